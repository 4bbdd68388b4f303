/* JSON Lines metrics writer. Records are built in memory and written with one fwrite + fflush,
 * so a reader tailing the file sees whole lines, and a malformed format never reaches disk. */
#include "io/metrics.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "io/json.h"
#include "io/tfevents.h"

/* A record's numbers, for TensorBoard: "type/key" (records with a rank: "type/key/rankR") at
 * the record's step, or the last step seen for records without one. */
#define MAX_SCALARS 32
typedef struct scalars {
    int n, has_step, rank; /* rank -1: none */
    long long step;
    char type[32];
    char key[MAX_SCALARS][48];
    double v[MAX_SCALARS];
} scalars;

struct ht_metrics {
    FILE *fp;
    char *path; /* NULL when the stream belongs to the caller */
    ht_jbuf line;
    long long failed;   /* records that could not be written */
    char first_err[256]; /* the first write failure */
    ht_tfevents *tb;    /* NULL: no TensorBoard events */
    long long last_step;
    scalars sc;
};

int ht_metrics_open(ht_metrics **out, const char *path, int append) {
    *out = NULL;
    if (!path || !path[0]) { /* no JSON Lines: TensorBoard events only */
        *out = ht_xcalloc(1, sizeof **out);
        return HT_OK;
    }
    FILE *fp = fopen(path, append ? "a" : "w");
    if (!fp)
        return ht_error(HT_ERUNTIME, "cannot open metrics file '%s': %s", path, strerror(errno));
    ht_metrics *m = ht_xcalloc(1, sizeof *m);
    m->fp = fp;
    m->path = ht_xstrdup(path);
    *out = m;
    return HT_OK;
}

int ht_metrics_tensorboard(ht_metrics *m, const char *dir) {
    int rc = ht_tfevents_open(&m->tb, dir);
    if (rc == HT_OK) ht_log_info("TensorBoard events: %s", ht_tfevents_path(m->tb));
    return rc;
}

int ht_metrics_status(const ht_metrics *m) {
    if (!m || !m->failed) return HT_OK;
    return ht_error(HT_ERUNTIME, "%lld metrics record%s could not be written: %s", m->failed,
                    m->failed == 1 ? "" : "s", m->first_err);
}

int ht_metrics_close(ht_metrics *m) {
    int rc = HT_OK;
    if (!m) return rc;
    if (m->path && fclose(m->fp) != 0 && !m->failed)
        rc = ht_error(HT_ERUNTIME, "closing metrics file '%s': %s", m->path, strerror(errno));
    if (ht_tfevents_close(m->tb) != HT_OK && !m->failed && rc == HT_OK) rc = HT_ERUNTIME;
    if (m->failed) rc = ht_metrics_status(m);
    free(m->path);
    ht_jbuf_free(&m->line);
    free(m);
    return rc;
}

static int is_key_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == '-';
}

/* Formats one value from a conversion spec starting after '%'; returns chars consumed or -1. */
/* Keeps the number x of field key (len chars) for TensorBoard; the step and the rank index. */
static void keep_number(scalars *sc, const char *key, size_t len, double x) {
    if (len == 4 && !strncmp(key, "step", 4)) {
        sc->has_step = 1, sc->step = (long long)x;
    } else if (len == 4 && !strncmp(key, "rank", 4)) {
        sc->rank = (int)x;
    } else if (sc->n < MAX_SCALARS && len < sizeof sc->key[0]) {
        memcpy(sc->key[sc->n], key, len);
        sc->key[sc->n][len] = 0;
        sc->v[sc->n++] = x;
    }
}

static int put_value(ht_jbuf *b, const char *f, va_list *ap, scalars *sc, const char *key,
                     size_t klen) {
    if (f[0] == 's') {
        const char *s = va_arg(*ap, const char *);
        if (s)
            ht_jbuf_put_str(b, s);
        else
            ht_jbuf_puts(b, "null");
        if (s && klen == 4 && !strncmp(key, "type", 4)) snprintf(sc->type, sizeof sc->type, "%s", s);
        return 1;
    }
    if (f[0] == 'f' || f[0] == 'g' || f[0] == 'e') {
        double x = va_arg(*ap, double);
        ht_jbuf_put_num(b, x);
        keep_number(sc, key, klen, x);
        return 1;
    }
    int len = 0; /* 0: int, 1: long, 2: long long, 3: size_t */
    int n = 0;
    if (f[0] == 'z')
        len = 3, n = 1;
    else if (f[0] == 'l' && f[1] == 'l')
        len = 2, n = 2;
    else if (f[0] == 'l')
        len = 1, n = 1;
    char c = f[n];
    if (c == 'd' || c == 'i') {
        long long v = len == 0   ? va_arg(*ap, int)
                      : len == 1 ? va_arg(*ap, long)
                      : len == 2 ? va_arg(*ap, long long)
                                 : (long long)va_arg(*ap, size_t);
        ht_jbuf_printf(b, "%lld", v);
        keep_number(sc, key, klen, (double)v);
    } else if (c == 'u') {
        unsigned long long v = len == 0   ? va_arg(*ap, unsigned)
                               : len == 1 ? va_arg(*ap, unsigned long)
                               : len == 2 ? va_arg(*ap, unsigned long long)
                                          : va_arg(*ap, size_t);
        ht_jbuf_printf(b, "%llu", v);
        keep_number(sc, key, klen, (double)v);
    } else {
        return -1;
    }
    return n + 1;
}

static int build(ht_jbuf *b, const char *fmt, va_list *ap, scalars *sc) {
    const char *p = fmt;
    int first = 1;
    b->len = 0;
    sc->n = sc->has_step = 0, sc->rank = -1, sc->type[0] = 0;
    ht_jbuf_putc(b, '{');
    for (;;) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        const char *k = p;
        while (is_key_char(*p))
            p++;
        if (p == k || p[0] != '=' || p[1] != '%')
            return ht_error(HT_ERUNTIME, "metrics format \"%s\": expected key=%%conv at offset %d",
                            fmt, (int)(k - fmt));
        if (!first) ht_jbuf_putc(b, ',');
        first = 0;
        ht_jbuf_putc(b, '"');
        ht_jbuf_put(b, k, (size_t)(p - k));
        ht_jbuf_puts(b, "\":");
        int used = put_value(b, p + 2, ap, sc, k, (size_t)(p - k));
        if (used < 0)
            return ht_error(HT_ERUNTIME,
                            "metrics format \"%s\": unsupported conversion at offset %d", fmt,
                            (int)(p + 1 - fmt));
        p += 2 + used;
        if (*p && *p != ' ')
            return ht_error(HT_ERUNTIME, "metrics format \"%s\": expected a space at offset %d",
                            fmt, (int)(p - fmt));
    }
    ht_jbuf_puts(b, "}\n");
    return HT_OK;
}

/* The record's numbers as one TensorBoard event. */
static int write_scalars(ht_metrics *m) {
    scalars *sc = &m->sc;
    if (sc->has_step) m->last_step = sc->step;
    if (!sc->n) return HT_OK;
    char tags[MAX_SCALARS][96];
    const char *tp[MAX_SCALARS];
    for (int i = 0; i < sc->n; i++) {
        int at = snprintf(tags[i], sizeof tags[i], "%s%s%s", sc->type, sc->type[0] ? "/" : "",
                          sc->key[i]);
        if (sc->rank >= 0 && at > 0 && (size_t)at < sizeof tags[i])
            snprintf(tags[i] + at, sizeof tags[i] - (size_t)at, "/rank%d", sc->rank);
        tp[i] = tags[i];
    }
    return ht_tfevents_scalars(m->tb, m->last_step, -1, sc->n, tp, sc->v);
}

int ht_metrics_write(ht_metrics *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = build(&m->line, fmt, &ap, &m->sc);
    va_end(ap);
    if (rc) return rc;
    errno = 0;
    if (m->tb && (rc = write_scalars(m)) != HT_OK) {
        if (!m->failed++) {
            ht_strlcpy(m->first_err, ht_errmsg(), sizeof m->first_err);
            ht_log_warn("%s; later records may be lost too, and the run will end with exit "
                        "status 1", m->first_err);
        }
        return rc;
    }
    if (!m->fp) return HT_OK;
    errno = 0;
    if (fwrite(m->line.s, 1, m->line.len, m->fp) != m->line.len || fflush(m->fp) != 0) {
        int e = errno;
        clearerr(m->fp);
        rc = ht_error(HT_ERUNTIME, "writing metrics file '%s': %s",
                      m->path ? m->path : "(stream)", e ? strerror(e) : "write failed");
        /* a full disk must not pass silently, nor flood the log: one warning, and the
         * failure sticks (ht_metrics_status, ht_metrics_close) so the run exits 1 */
        if (!m->failed++) {
            ht_strlcpy(m->first_err, ht_errmsg(), sizeof m->first_err);
            ht_log_warn("%s; later records may be lost too, and the run will end with exit "
                        "status 1",
                        m->first_err);
        }
        return rc;
    }
    return HT_OK;
}

int ht_metrics_train(ht_metrics *m, int64_t step, double loss, double lr, double samples_per_s) {
    return ht_metrics_write(m, "type=%s step=%lld loss=%f lr=%f samples_per_s=%f", "train",
                            (long long)step, loss, lr, samples_per_s);
}

int ht_metrics_eval(ht_metrics *m, int64_t step, double val_loss, double val_acc, double time_s) {
    return ht_metrics_write(m, "type=%s step=%lld val_loss=%f val_acc=%f time_s=%f", "eval",
                            (long long)step, val_loss, val_acc, time_s);
}
