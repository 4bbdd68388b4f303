/* Progress reporting: bar or plain lines. The bar blanks its previous text with spaces rather
 * than terminal escapes, so a bar forced into a file or a pipe stays readable. */
#include "io/progress.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

enum { BAR_WIDTH = 24 };

int ht_progress_init(ht_progress *p, FILE *out, int64_t total_steps, const char *mode,
                     int64_t every) {
    memset(p, 0, sizeof *p);
    p->out = out;
    p->total = total_steps > 0 ? total_steps : 0;
    p->every = every > 0 ? every : p->total ? (p->total / 20 > 0 ? p->total / 20 : 1) : 100;
    p->min_interval = 0.1;
    p->now = ht_now;
    p->t_init = p->now();
    if (!mode || !strcmp(mode, "auto")) {
        const char *term = getenv("TERM");
        int fd = out ? fileno(out) : -1;
        int tty = fd >= 0 && isatty(fd) && !(term && !strcmp(term, "dumb"));
        p->mode = tty ? HT_PROGRESS_BAR : HT_PROGRESS_PLAIN;
    } else if (!strcmp(mode, "bar")) {
        p->mode = HT_PROGRESS_BAR;
    } else if (!strcmp(mode, "plain")) {
        p->mode = HT_PROGRESS_PLAIN;
    } else if (!strcmp(mode, "none")) {
        p->mode = HT_PROGRESS_NONE;
    } else {
        p->mode = HT_PROGRESS_NONE;
        return ht_error(HT_EINPUT, "progress mode '%s': expected one of auto, bar, plain, none",
                        mode);
    }
    if (!out) p->mode = HT_PROGRESS_NONE;
    return HT_OK;
}

void ht_progress_set_clock(ht_progress *p, double (*now)(void)) {
    p->now = now;
    p->t_init = now();
}

void ht_progress_fmt_hms(char *buf, size_t size, double s) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(buf, size, "--:--:--");
        return;
    }
    long t = (long)(s + 0.5);
    snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* Seconds left, from the rate since the first update; negative when unknown. */
static double eta(const ht_progress *p, double now) {
    int64_t done = p->step - p->step_first;
    double el = now - p->t_first;
    if (!p->total || done <= 0 || el <= 0) return -1;
    return (double)(p->total - p->step) * el / (double)done;
}

static void draw_bar(ht_progress *p, double now) {
    char line[256], eb[32];
    int n;
    ht_progress_fmt_hms(eb, sizeof eb, eta(p, now));
    if (p->total) {
        double frac = (double)p->step / (double)p->total;
        frac = frac < 0 ? 0 : frac > 1 ? 1 : frac;
        int fill = (int)(frac * BAR_WIDTH);
        char bar[BAR_WIDTH + 1];
        for (int i = 0; i < BAR_WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[BAR_WIDTH] = 0;
        n = snprintf(line, sizeof line,
                     "%lld/%lld [%s] %3d%% loss %.4f lr %.2e %.1f samples/s ETA %s",
                     (long long)p->step, (long long)p->total, bar, (int)(frac * 100), p->loss,
                     p->lr, p->sps, eb);
    } else {
        n = snprintf(line, sizeof line, "step %lld loss %.4f lr %.2e %.1f samples/s",
                     (long long)p->step, p->loss, p->lr, p->sps);
    }
    size_t len = n < 0 ? 0 : (size_t)n >= sizeof line ? sizeof line - 1 : (size_t)n;
    fputc('\r', p->out);
    fputs(line, p->out);
    /* Blank what a longer previous line left behind. */
    for (size_t i = len; i < p->bar_len; i++)
        fputc(' ', p->out);
    p->bar_len = len;
    p->drawn = 1;
    p->t_last_draw = now;
    fflush(p->out);
}

static void print_plain(ht_progress *p, double now) {
    char eb[32], elb[32];
    ht_progress_fmt_hms(elb, sizeof elb, now - p->t_init);
    if (p->total) {
        ht_progress_fmt_hms(eb, sizeof eb, eta(p, now));
        fprintf(p->out,
                "step %lld/%lld (%d%%) loss %.4f lr %.2e %.1f samples/s elapsed %s ETA %s\n",
                (long long)p->step, (long long)p->total,
                (int)(100.0 * (double)p->step / (double)p->total), p->loss, p->lr, p->sps, elb, eb);
    } else {
        fprintf(p->out, "step %lld loss %.4f lr %.2e %.1f samples/s elapsed %s\n",
                (long long)p->step, p->loss, p->lr, p->sps, elb);
    }
    p->last_printed = p->step;
    fflush(p->out);
}

void ht_progress_update(ht_progress *p, int64_t step, double loss, double lr,
                        double samples_per_s) {
    if (p->mode == HT_PROGRESS_NONE) return;
    double now = p->now();
    if (!p->started) {
        p->started = 1;
        p->t_first = now;
        p->step_first = step;
        p->last_printed = -1;
        p->t_last_draw = -INFINITY;
    }
    p->step = step;
    p->loss = loss;
    p->lr = lr;
    p->sps = samples_per_s;
    int last = p->total && step >= p->total;
    if (p->mode == HT_PROGRESS_BAR) {
        if (last || now - p->t_last_draw >= p->min_interval) draw_bar(p, now);
    } else if (step % p->every == 0 || last) {
        print_plain(p, now);
    }
}

void ht_progress_note(ht_progress *p, const char *fmt, ...) {
    if (p->mode == HT_PROGRESS_NONE) return;
    if (p->mode == HT_PROGRESS_BAR && p->drawn) {
        fputc('\r', p->out);
        for (size_t i = 0; i < p->bar_len; i++)
            fputc(' ', p->out);
        fputc('\r', p->out);
    }
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    size_t n = strlen(fmt);
    if (!n || fmt[n - 1] != '\n') fputc('\n', p->out);
    if (p->mode == HT_PROGRESS_BAR && p->drawn) {
        p->bar_len = 0; /* the line is fresh: nothing to blank */
        draw_bar(p, p->now());
    }
    fflush(p->out);
}

void ht_progress_finish(ht_progress *p) {
    if (p->mode == HT_PROGRESS_NONE || !p->started) return;
    double now = p->now();
    if (p->mode == HT_PROGRESS_BAR) {
        draw_bar(p, now);
        fputc('\n', p->out);
        p->drawn = 0;
        p->bar_len = 0;
    } else if (p->last_printed != p->step) {
        print_plain(p, now);
    }
    fflush(p->out);
}
