/* The mode tables, expanded from the rows in modes.h. */
#include "config/modes.h"

#include <stdio.h>
#include <string.h>

#include "core/err.h"

#define SYNC_ROW(id, name, family, flags, doc) [HT_SYNC_##id] = {name, doc, family, flags},
#define SYNC_NAME(id, name, ...) name,
const ht_sync_row ht_sync_rows[HT_SYNC_NMODES] = {HT_SYNC_ROWS(SYNC_ROW)};
const char *const ht_sync_mode_names[HT_SYNC_NMODES + 1] = {HT_SYNC_ROWS(SYNC_NAME) NULL};
#define SYNC_DOC(id, name, family, flags, doc) doc,
const char *const ht_sync_mode_docs[HT_SYNC_NMODES + 1] = {HT_SYNC_ROWS(SYNC_DOC) NULL};

#define PIPE_ROW(id, name, gen, flags, doc) [HT_PIPE_##id] = {name, doc, flags},
#define PIPE_NAME(id, name, ...) name,
const ht_pipe_row ht_pipe_rows[HT_PIPE_NKINDS] = {HT_PIPE_ROWS(PIPE_ROW)};
const char *const ht_pipe_kind_names[HT_PIPE_NKINDS] = {HT_PIPE_ROWS(PIPE_NAME)};
const char *const ht_pipe_schedule_names[HT_PIPE_NKINDS + 2] = {"none",
                                                               HT_PIPE_ROWS(PIPE_NAME) NULL};
#define PIPE_DOC(id, name, gen, flags, doc) doc,
const char *const ht_pipe_schedule_docs[HT_PIPE_NKINDS + 2] = {
    "no pipeline: the whole model on every rank (data parallel)", HT_PIPE_ROWS(PIPE_DOC) NULL};

const ht_sync_row *ht_sync_row_of(int mode) {
    return mode >= 0 && mode < HT_SYNC_NMODES ? &ht_sync_rows[mode] : NULL;
}

const char *ht_sync_mode_name(int mode) {
    return mode >= 0 && mode < HT_SYNC_NMODES ? ht_sync_rows[mode].name : "?";
}

int ht_sync_mode_parse(const char *name) {
    for (int m = 0; name && m < HT_SYNC_NMODES; m++)
        if (!strcmp(name, ht_sync_rows[m].name)) return m;
    return -1;
}

int ht_sync_has_servers(int mode) {
    const ht_sync_row *r = ht_sync_row_of(mode);
    return r && r->family == HT_SYNC_FAM_PS;
}

int ht_sync_extra_ranks(int mode, int servers) {
    const ht_sync_row *r = ht_sync_row_of(mode);
    return !r || r->family == HT_SYNC_FAM_ALLREDUCE ? 0 : r->family == HT_SYNC_FAM_PS ? servers : 1;
}

const ht_pipe_row *ht_pipe_row_of(int kind) {
    return kind >= 0 && kind < HT_PIPE_NKINDS ? &ht_pipe_rows[kind] : NULL;
}

int ht_pipe_kind_has(int kind, unsigned flags) {
    const ht_pipe_row *r = ht_pipe_row_of(kind);
    return r && (r->flags & flags) == flags;
}

int ht_pipe_kind_parse(const char *name) {
    for (int k = 0; name && k < HT_PIPE_NKINDS; k++)
        if (!strcmp(name, ht_pipe_rows[k].name)) return k;
    return -1;
}

const char *ht_pipe_kind_name(int kind) {
    return kind == HT_PIPE_NONE ? "none" : kind >= 0 && kind < HT_PIPE_NKINDS ? ht_pipe_rows[kind].name : "?";
}

int ht_pipe_kind_shape(int kind, int D, int N, int v, char *msg, size_t n) {
    const char *k = ht_pipe_kind_name(kind);
    if (ht_pipe_kind_has(kind, HT_PIPE_F_TWO_WAY) && D % 2)
        snprintf(msg, n,
                 "schedule \"%s\" needs an even number of pipeline stages, got %d: rank r holds "
                 "stage r of the down pipeline and stage D-1-r of the up one, and with D odd the "
                 "middle rank would hold the same stage twice (and a basic unit of D "
                 "micro-batches could not split half down, half up); use %d stages",
                 k, D, D + 1);
    else if (ht_pipe_kind_has(kind, HT_PIPE_F_CHUNKS) && v > 1 && D > 0 && N % D)
        snprintf(msg, n,
                 "schedule \"%s\" needs the micro-batches (%d) to be a multiple of the pipeline "
                 "stages (%d): each rank runs its %d chunks in groups of %d micro-batches; %d or "
                 "%d would fit",
                 k, N, D, v, D, N > D ? N / D * D : D, (N / D + 1) * D);
    else if (ht_pipe_kind_has(kind, HT_PIPE_F_NO_FLUSH) && N < D)
        snprintf(msg, n,
                 "schedule \"%s\" needs at least as many micro-batches as stages (%d < %d): "
                 "with fewer, a stage would still run batch b - 1's backwards when batch b + 1 "
                 "starts, and two weight versions would not suffice; use %d or more "
                 "micro-batches",
                 k, N, D, D);
    else
        return HT_OK;
    return HT_EINPUT;
}

/* "a, b or c" of the n names that `take` keeps. */
static void prose(const char *const *names, int n, const unsigned char *take, char *buf,
                  size_t size) {
    int total = 0, k = 0;
    size_t len = 0;
    for (int i = 0; i < n; i++)
        total += take[i];
    if (size) buf[0] = 0;
    for (int i = 0; i < n && len < size; i++) {
        if (!take[i]) continue;
        const char *sep = k == 0 ? "" : k == total - 1 ? " or " : ", ";
        len += (size_t)snprintf(buf + len, size - len, "%s%s", sep, names[i]);
        k++;
    }
}

void ht_pipe_kind_list(unsigned want, unsigned refuse, char *buf, size_t n) {
    unsigned char take[HT_PIPE_NKINDS];
    for (int k = 0; k < HT_PIPE_NKINDS; k++)
        take[k] = (ht_pipe_rows[k].flags & want) == want && !(ht_pipe_rows[k].flags & refuse);
    prose(ht_pipe_kind_names, HT_PIPE_NKINDS, take, buf, n);
}

void ht_sync_mode_list(char *buf, size_t n) {
    unsigned char take[HT_SYNC_NMODES];
    memset(take, 1, sizeof take);
    prose(ht_sync_mode_names, HT_SYNC_NMODES, take, buf, n);
}
