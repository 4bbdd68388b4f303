/* Logging to stderr with a level and an optional rank prefix, and a monotonic clock. */
#ifndef HT_CORE_LOG_H
#define HT_CORE_LOG_H

#include "core/err.h"

enum { HT_LOG_QUIET = 0, HT_LOG_WARN = 1, HT_LOG_INFO = 2, HT_LOG_DEBUG = 3 };

void ht_log_set_level(int level);
int ht_log_level(void);
/* rank < 0: no prefix (single process). */
void ht_log_set_rank(int rank);
void ht_log_info(const char *fmt, ...) HT_PRINTF(1, 2);
void ht_log_warn(const char *fmt, ...) HT_PRINTF(1, 2);
void ht_log_debug(const char *fmt, ...) HT_PRINTF(1, 2);

/* Seconds from an arbitrary origin, monotonic. */
double ht_now(void);
/* Sleeps s seconds (nothing when s <= 0 or NaN), resuming after signals, but returns
 * early (within HT_SLEEP_SLICE) once a stop was requested (core/stop.h): 1 then, else 0. */
int ht_sleep(double s);
#define HT_SLEEP_SLICE 0.05 /* seconds */
/* Points ht_now and ht_sleep at another clock (src/comm under SimGrid's SMPI: the simulated
 * one, so that every time hettrain reads and every idle wait is virtual); NULL: the system's. */
void ht_clock_set(double (*now)(void), void (*sleep_s)(double));

#endif
