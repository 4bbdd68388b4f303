/* Progress of a training loop on a terminal (a one-line bar redrawn with \r, at most 10 times a
 * second) or in logs (a plain line every N steps). Notes such as eval results are printed on
 * their own line without tearing the bar. The stream is a parameter so tests can capture it. */
#ifndef HT_IO_PROGRESS_H
#define HT_IO_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"

typedef enum { HT_PROGRESS_NONE, HT_PROGRESS_PLAIN, HT_PROGRESS_BAR } ht_progress_mode;

typedef struct ht_progress {
    FILE *out;
    ht_progress_mode mode;
    int64_t total;       /* <= 0: unknown, no percentage or ETA */
    int64_t every;       /* plain mode: a line every this many steps */
    double min_interval; /* bar mode: seconds between redraws (0.1) */
    double (*now)(void); /* clock in seconds (ht_now; see ht_progress_set_clock) */
    /* state */
    /* Elapsed time counts from init; the rate behind the ETA counts from the first update, so
     * startup cost and a resumed run's earlier steps do not skew it. */
    double t_init, t_first;
    int64_t step_first;
    double t_last_draw;
    int64_t step, last_printed;
    double loss, lr, sps;
    int started, drawn;
    size_t bar_len; /* length of the bar line on screen, to blank it */
} ht_progress;

/* mode: "auto" (bar if out is a terminal and TERM is not "dumb", else plain), "bar", "plain",
 * "none". every <= 0 picks total/20 (at least 1; 100 when total is unknown).
 * HT_EINPUT for an unknown mode. */
int ht_progress_init(ht_progress *p, FILE *out, int64_t total_steps, const char *mode,
                     int64_t every);
/* Replaces the clock (tests use a fake one) and restarts the elapsed time from now. */
void ht_progress_set_clock(ht_progress *p, double (*now)(void));
/* Reports that step (1-based count of finished steps) is done. */
void ht_progress_update(ht_progress *p, int64_t step, double loss, double lr, double samples_per_s);
/* Prints one line (no trailing newline needed); the bar is cleared first and redrawn after. */
void ht_progress_note(ht_progress *p, const char *fmt, ...) HT_PRINTF(2, 3);
/* Draws the final state and ends the bar's line. */
void ht_progress_finish(ht_progress *p);

/* "h:mm:ss" for seconds >= 0 (hours grow as needed; "--:--:--" for negative/NaN/huge). */
void ht_progress_fmt_hms(char *buf, size_t size, double seconds);

#endif
