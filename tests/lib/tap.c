#include "tap.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int g_n, g_fail, g_planned;

void tap_plan(int n) {
    printf("1..%d\n", n);
    g_planned = 1;
}

int tap_ok(int cond, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("%s %d - ", cond ? "ok" : "not ok", ++g_n);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (!cond) g_fail++;
    fflush(stdout);
    return cond;
}

void tap_skip(const char *why) { printf("ok %d # SKIP %s\n", ++g_n, why); }

void tap_diag(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("# ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

int tap_done(void) {
    if (!g_planned) printf("1..%d\n", g_n);
    fflush(stdout);
    return g_fail ? 1 : 0;
}

double tap_worse(double worst, double e) {
    if (isnan(worst) || isnan(e)) return INFINITY;
    return e > worst ? e : worst;
}

double tap_max_relerr(const float *a, const float *b, size_t n, double floor) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        double s = fabs((double)b[i]);
        double e = d / (s > floor ? s : floor);
        worst = tap_worse(worst, e);
    }
    return worst;
}

double tap_max_abserr(const float *a, const float *b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        worst = tap_worse(worst, d);
    }
    return worst;
}
