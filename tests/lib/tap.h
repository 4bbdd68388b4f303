/* Minimal TAP producer for C tests (run by prove). */
#ifndef HT_TESTS_TAP_H
#define HT_TESTS_TAP_H

#include <stddef.h>

void tap_plan(int n);          /* "1..n"; call tap_done() instead when the count is not known */
int tap_ok(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tap_skip(const char *why);
void tap_diag(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int tap_done(void);            /* prints the plan if none was given; returns the exit status */

/* The larger of two errors, where a NaN in either is +inf and stays +inf: a kernel that
 * leaves an element of a NaN-filled output unwritten fails a `worst < tol` check and trips a
 * `worst > tol` one wherever the element lies. (`if (!(e <= worst)) worst = e` kept a NaN only
 * until the next finite error replaced it.) */
double tap_worse(double worst, double e);

/* Max |a-b| / (|b| + atol_scale) style comparison: returns the worst relative error
 * max_i |a_i - b_i| / max(|b_i|, floor); +inf if any element is NaN (see tap_worse). */
double tap_max_relerr(const float *a, const float *b, size_t n, double floor);
double tap_max_abserr(const float *a, const float *b, size_t n);

#endif
