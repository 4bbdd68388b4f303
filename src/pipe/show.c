/* Showing a schedule: text timeline, instruction listing and Chrome trace, all from the
 * checker's unit-time timeline. The only file in src/pipe that does I/O. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "io/json.h"
#include "io/trace.h"
#include "pipe/schedule.h"

typedef struct tl {
    double **t0, **t1;
    ht_pipe_report rep;
} tl;

static int timeline(const ht_pipe_sched *s, double bf, tl *t) {
    int D = s->p.D;
    t->t0 = ht_xcalloc((size_t)D, sizeof *t->t0);
    t->t1 = ht_xcalloc((size_t)D, sizeof *t->t1);
    for (int r = 0; r < D; r++) {
        t->t0[r] = ht_xcalloc((size_t)s->len[r] + 1, sizeof **t->t0);
        t->t1[r] = ht_xcalloc((size_t)s->len[r] + 1, sizeof **t->t1);
    }
    return ht_pipe_timeline(s, bf, NULL, t->t0, t->t1, &t->rep);
}

static void tl_free(const ht_pipe_sched *s, tl *t) {
    for (int r = 0; r < s->p.D; r++)
        free(t->t0[r]), free(t->t1[r]);
    free(t->t0), free(t->t1);
}

static int is_compute(int op) {
    return op == HT_PI_FWD || op == HT_PI_BWD || op == HT_PI_BWD_W || op == HT_PI_RECOMPUTE;
}

/* "F3", "b12", "R3:1", "W3": what a compute instruction shows (W: a weight gradient). */
static void label(const ht_pipe_sched *s, const ht_pipe_instr *in, char *buf, size_t n) {
    char c = in->op == HT_PI_FWD ? 'F' : in->op == HT_PI_BWD ? 'B' : in->op == HT_PI_BWD_W ? 'W' : 'R';
    if (in->dir) c = (char)(c - 'A' + 'a');
    if (s->p.v > 1) snprintf(buf, n, "%c%d:%d", c, (int)in->mb, (int)in->chunk);
    else snprintf(buf, n, "%c%d", c, (int)in->mb);
}

/* Time resolution: the fewest cells per unit that put every boundary on a cell edge. */
static int cells_per_unit(double bf) {
    for (int k = 1; k <= 8; k++)
        if (fabs(bf * k - floor(bf * k + 0.5)) < 1e-9) return k;
    return 4;
}

void ht_pipe_print_timeline(const ht_pipe_sched *s, double bf, FILE *f) {
    tl t;
    if (timeline(s, bf, &t)) {
        fprintf(f, "schedule rejected: %s\n", ht_errmsg());
        tl_free(s, &t);
        return;
    }
    /* split kinds: B and W take bf / 2 each */
    int D = s->p.D, k = cells_per_unit(ht_pipe_kind_split(s->p.kind) ? bf / 2 : bf), w = 0;
    char lab[32];
    for (int r = 0; r < D; r++)
        for (int i = 0; i < s->len[r]; i++)
            if (is_compute(s->ins[r][i].op)) {
                label(s, &s->ins[r][i], lab, sizeof lab);
                if ((int)strlen(lab) > w) w = (int)strlen(lab);
            }
    int ncell = (int)(t.rep.makespan * k + 0.5);
    char *row = ht_xmalloc((size_t)ncell * (size_t)(w + 1) + 1);
    fprintf(f, "%s: D=%d N=%d v=%d, F=1 B=%g, one column = %g time unit%s\n",
            ht_pipe_kind_names[s->p.kind], D, s->p.N, s->p.v, bf, 1.0 / k, k == 1 ? "" : "s");
    for (int r = 0; r < D; r++) {
        for (int c = 0; c < ncell; c++) { /* idle by default: '.' then spaces */
            char *cell = row + (size_t)c * (w + 1);
            memset(cell, ' ', (size_t)w + 1);
            cell[0] = '.';
        }
        for (int i = 0; i < s->len[r]; i++) {
            const ht_pipe_instr *in = &s->ins[r][i];
            if (!is_compute(in->op)) continue;
            int c0 = (int)(t.t0[r][i] * k + 0.5), c1 = (int)(t.t1[r][i] * k + 0.5);
            label(s, in, lab, sizeof lab);
            for (int c = c0; c < c1 && c < ncell; c++) {
                char *cell = row + (size_t)c * (w + 1);
                memset(cell, c == c0 ? ' ' : '-', (size_t)w + 1);
                if (c == c0) memcpy(cell, lab, strlen(lab));
                cell[w] = ' ';
            }
        }
        row[(size_t)ncell * (w + 1)] = 0;
        fprintf(f, "rank %2d | %s\n", r, row);
    }
    fprintf(f, "makespan %g, busy %g of %g (rank x time), bubble %.4f\npeak slots in flight:",
            t.rep.makespan, t.rep.busy, D * t.rep.makespan, t.rep.bubble);
    for (int r = 0; r < D && r < 64; r++)
        fprintf(f, " %d", t.rep.peak_inflight[r]);
    fprintf(f, " (max %d)\n", t.rep.peak_max);
    free(row);
    tl_free(s, &t);
}

void ht_pipe_print_streams(const ht_pipe_sched *s, FILE *f) {
    char buf[128];
    for (int r = 0; r < s->p.D; r++) {
        fprintf(f, "rank %d: %d instructions, %d slots\n", r, s->len[r], s->nbuf[r]);
        for (int i = 0; i < s->len[r]; i++) {
            ht_pipe_instr_str(&s->ins[r][i], buf, sizeof buf);
            fprintf(f, "  %4d  %s\n", i, buf);
        }
    }
}

int ht_pipe_write_trace(const ht_pipe_sched *s, double bf, const char *path) {
    tl t;
    int rc = timeline(s, bf, &t);
    if (rc) {
        tl_free(s, &t);
        return rc;
    }
    ht_jbuf b = {0};
    char name[128];
    for (int r = 0; r < s->p.D; r++) {
        if (r) ht_jbuf_puts(&b, ",\n");
        ht_jbuf_printf(&b,
                       "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                       "\"args\":{\"name\":\"rank %d\"}},\n{\"name\":\"process_sort_index\","
                       "\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}",
                       r, r, r, r);
        for (int i = 0; i < s->len[r]; i++) {
            const ht_pipe_instr *in = &s->ins[r][i];
            ht_pipe_instr_str(in, name, sizeof name);
            ht_jbuf_puts(&b, ",\n{\"name\":");
            ht_jbuf_put_str(&b, name);
            /* compute as a span, everything else (0 time on the unit model) as an instant */
            if (is_compute(in->op))
                ht_jbuf_printf(&b, ",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f",
                               r, t.t0[r][i] * 1e3, (t.t1[r][i] - t.t0[r][i]) * 1e3);
            else
                ht_jbuf_printf(&b, ",\"ph\":\"i\",\"s\":\"t\",\"pid\":%d,\"tid\":0,\"ts\":%.3f", r,
                               t.t0[r][i] * 1e3);
            ht_jbuf_printf(&b, ",\"args\":{\"index\":%d}}", i);
        }
    }
    const char *parts[1] = {b.s ? b.s : ""};
    size_t lens[1] = {b.len};
    rc = ht_trace_write(path, parts, lens, 1);
    ht_jbuf_free(&b);
    tl_free(s, &t);
    return rc;
}
