/* Timeline tracing in the Chrome trace-event format (open the file in ui.perfetto.dev or
 * chrome://tracing): one process track per rank, complete ("X") events in microseconds.
 * Each process records its own events in memory (nothing when tracing is off, so the calls
 * can stay in hot loops); the cluster gathers the serialised buffers and rank 0 writes one
 * file with ht_trace_write. No MPI and no OpenCL here. */
#ifndef HT_IO_TRACE_H
#define HT_IO_TRACE_H

#include <stddef.h>
#include <stdint.h>

#define HT_TRACE_NAME 48 /* bytes of an event name, with the terminator */

/* Starts recording for this process as `rank`; times are relative to this call (call it
 * right after a barrier so that the ranks' clocks line up). Again: restarts, events dropped. */
void ht_trace_start(int rank);
/* 1 while recording. */
int ht_trace_on(void);
/* Names this process's track: "rank r (host, device)" in the viewer. */
void ht_trace_set_label(const char *label);
/* The step that the following events belong to (shown in each event's args); -1 = none. */
void ht_trace_set_step(int64_t step);

/* A span on this rank's track: begin/end pairs nest (at most 8 deep); the name is copied
 * (at most HT_TRACE_NAME - 1 bytes). Unmatched ends are ignored. No-ops when off. */
void ht_trace_begin(const char *name);
void ht_trace_end(void);
/* A span already measured with ht_now() seconds. */
void ht_trace_span(const char *name, double t0, double t1);

/* This process's track as JSON: a comma-separated list of trace-event objects (metadata
 * first), no brackets, so that ranks' lists can be concatenated. *out is malloc'd (free it);
 * "" when off. */
void ht_trace_serialize(char **out, size_t *len);
/* Writes {"traceEvents":[part0,part1,...],...} to path atomically (a temporary file beside
 * it, then rename). Empty parts are skipped. HT_ERUNTIME with the reason on failure. */
int ht_trace_write(const char *path, const char *const *parts, const size_t *lens, int nparts);
/* Stops recording and drops the events. */
void ht_trace_stop(void);

#endif
