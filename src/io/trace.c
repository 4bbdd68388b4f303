/* Chrome trace-event recording: events are kept as fixed-size records in a growable array
 * (no formatting in the loop) and turned into JSON only at the end. */
#include "io/trace.h"

#include "core/path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/log.h"
#include "io/json.h"

#define DEPTH 8

typedef struct event {
    char name[HT_TRACE_NAME];
    double t0, t1; /* seconds since the start */
    int64_t step;
} event;

static struct {
    int on, rank;
    double origin;
    int64_t step;
    char label[256];
    event *ev;
    size_t n, cap;
    struct {
        char name[HT_TRACE_NAME];
        double t0;
    } open[DEPTH];
    int depth, lost; /* lost: begins past DEPTH, whose ends are skipped */
} g;

void ht_trace_start(int rank) {
    ht_trace_stop();
    g.on = 1;
    g.rank = rank;
    g.step = -1;
    g.origin = ht_now();
    snprintf(g.label, sizeof g.label, "rank %d", rank);
}

int ht_trace_on(void) { return g.on; }

void ht_trace_set_label(const char *label) {
    if (g.on) snprintf(g.label, sizeof g.label, "%s", label);
}

void ht_trace_set_step(int64_t step) { g.step = step; }

static void push(const char *name, double t0, double t1) {
    if (g.n == g.cap) {
        g.cap = g.cap ? 2 * g.cap : 1024;
        g.ev = ht_xrealloc(g.ev, g.cap * sizeof *g.ev);
    }
    event *e = &g.ev[g.n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->t0 = t0 - g.origin;
    e->t1 = t1 - g.origin;
    e->step = g.step;
}

void ht_trace_begin(const char *name) {
    if (!g.on) return;
    if (g.depth == DEPTH) {
        g.lost++;
        return;
    }
    snprintf(g.open[g.depth].name, HT_TRACE_NAME, "%s", name);
    g.open[g.depth++].t0 = ht_now();
}

void ht_trace_end(void) {
    if (!g.on) return;
    if (g.lost) {
        g.lost--;
        return;
    }
    if (g.depth == 0) return;
    g.depth--;
    push(g.open[g.depth].name, g.open[g.depth].t0, ht_now());
}

void ht_trace_span(const char *name, double t0, double t1) {
    if (g.on) push(name, t0, t1);
}

void ht_trace_serialize(char **out, size_t *len) {
    ht_jbuf b = {0};
    if (g.on) {
        /* metadata: the track's name and its place (by rank) in the viewer */
        ht_jbuf_printf(&b,
                       "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                       "\"args\":{\"name\":",
                       g.rank);
        ht_jbuf_put_str(&b, g.label);
        ht_jbuf_printf(&b,
                       "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,"
                       "\"tid\":0,\"args\":{\"sort_index\":%d}}",
                       g.rank, g.rank);
        for (size_t i = 0; i < g.n; i++) {
            const event *e = &g.ev[i];
            ht_jbuf_puts(&b, ",\n{\"name\":");
            ht_jbuf_put_str(&b, e->name);
            ht_jbuf_printf(&b, ",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f",
                           g.rank, e->t0 * 1e6, (e->t1 - e->t0) * 1e6);
            if (e->step >= 0) ht_jbuf_printf(&b, ",\"args\":{\"step\":%lld}", (long long)e->step);
            ht_jbuf_putc(&b, '}');
        }
    }
    if (!b.s) ht_jbuf_puts(&b, "");
    *out = b.s;
    *len = b.len;
}

int ht_trace_write(const char *path, const char *const *parts, const size_t *lens, int nparts) {
    char tmp[4096];
    if (ht_check_replaceable(path, "--trace") != HT_OK) return HT_EINPUT;
    ht_remove_stale_tmp(path);
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return ht_error(HT_ERUNTIME, "trace %s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return ht_error(HT_ERUNTIME, "trace %s: cannot create %s: %s", path, tmp, strerror(errno));
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    int first = 1;
    for (int i = 0; i < nparts; i++) {
        if (!lens[i]) continue;
        if (!first) fputs(",\n", f);
        fwrite(parts[i], 1, lens[i], f);
        first = 0;
    }
    fputs("\n]}\n", f);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return ht_error(HT_ERUNTIME, "trace %s: write failed: %s", path, strerror(e));
    }
    return HT_OK;
}

void ht_trace_stop(void) {
    free(g.ev);
    memset(&g, 0, sizeof g);
}
