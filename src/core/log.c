/* Logging and clock. */
#include "core/log.h"

#include "core/stop.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

static int g_level = HT_LOG_INFO;
static int g_rank = -1;

void ht_log_set_level(int level) { g_level = level; }
int ht_log_level(void) { return g_level; }
void ht_log_set_rank(int rank) { g_rank = rank; }

/* One write per line: stderr is unbuffered, and under mpirun a line written in pieces can
 * have another stream's line (a rank's stdout) forwarded between its pieces. */
static void vlog(int level, const char *tag, const char *fmt, va_list ap) {
    if (level > g_level) return;
    char line[8192];
    int k = g_rank >= 0 ? snprintf(line, sizeof line, "[rank %d] ", g_rank) : 0;
    k += snprintf(line + k, sizeof line - (size_t)k, "%s", tag ? tag : "");
    int m = vsnprintf(line + k, sizeof line - (size_t)k, fmt, ap);
    if (m >= 0 && (size_t)(k + m) + 1 < sizeof line) {
        line[k + m] = '\n';
        fwrite(line, 1, (size_t)(k + m) + 1, stderr);
    } else { /* longer than the buffer: written as it fits, then the newline */
        fputs(line, stderr);
        fputs(" [...]\n", stderr);
    }
}

#define LOG_FN(fn, level, tag)                                                                     \
    void fn(const char *fmt, ...) {                                                                \
        va_list ap;                                                                                \
        va_start(ap, fmt);                                                                         \
        vlog(level, tag, fmt, ap);                                                                 \
        va_end(ap);                                                                                \
    }
LOG_FN(ht_log_info, HT_LOG_INFO, NULL)
LOG_FN(ht_log_warn, HT_LOG_WARN, "warning: ")
LOG_FN(ht_log_debug, HT_LOG_DEBUG, "debug: ")

static double (*g_now)(void);
static void (*g_sleep)(double);

void ht_clock_set(double (*now)(void), void (*sleep_s)(double)) {
    g_now = now;
    g_sleep = sleep_s;
}

double ht_now(void) {
    if (g_now) return g_now();
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int ht_sleep(double s) {
    if (!(s > 0)) return ht_stop_requested();
    if (g_sleep) { /* a simulated sleep takes no real time: no slices */
        g_sleep(s);
        return ht_stop_requested();
    }
    /* in slices: the signal may be delivered to another thread (an OpenCL runtime's), and
     * then this nanosleep is not interrupted; a slice bounds how late we notice */
    double end = ht_now() + s;
    for (;;) {
        if (ht_stop_requested()) return 1;
        double left = end - ht_now();
        if (left <= 0) return 0;
        if (left > HT_SLEEP_SLICE) left = HT_SLEEP_SLICE;
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL); /* EINTR: the loop looks at the flag */
    }
}
