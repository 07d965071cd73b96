/* trace.h — --trace FILE: a timeline of the run in the Chrome trace-event
 * JSON format (opens in Perfetto and chrome://tracing), so a user sees
 * where the time goes instead of reading percentages.
 *
 * Every span is a complete event ("ph": "X") on one clock, now_sec()'s
 * CLOCK_MONOTONIC, which every process shares: the main process's
 * wait/stage/step spans, and one "fill" span per batch on the track of the
 * loader worker that made it, with its "read", "decode" and "transform"
 * spans inside (recorded by the worker in the ring's shared slot header —
 * the batch's start, length and per-stage sums — read back by the main
 * process when it takes the batch, so nothing is merged at the end; the
 * three are drawn back to back, as sums, not per sample). Processes and
 * tracks are named with metadata events ("ph": "M").
 *
 * On a GPU the backend's timeline (backend_timeline_take: CUDA timing
 * events around each staging copy and each step's compute, mapped to the
 * same clock) adds a "device" process with "copy" and "compute" tracks; on
 * the fake runtime those are its simulated times.
 *
 * Deliberately left out: a span per sample (two clock reads per stage and
 * sample are kept, as sums; tens of thousands of spans per epoch are not).
 */
#ifndef TRAIN_APP_TRACE_H
#define TRAIN_APP_TRACE_H

#include "common/util.h"

typedef struct trace trace;

/* Open path for writing now (so a bad path fails before any work); NULL
 * and a message in e on failure. */
trace *trace_open(const char *path, errbuf *e);
/* One span [t0, t0 + dur) in seconds of now_sec()'s clock, on track
 * `track` of process pid, named name; batch >= 0 goes into its args.
 * t may be NULL (no --trace). */
void trace_span(trace *t, int pid, const char *track, const char *name, double t0, double dur,
                long batch);
/* Name process pid in the viewer ("train", "loader worker"). */
void trace_name_process(trace *t, int pid, const char *name);
/* Write the file and free; returns -1 (message in e) when writing failed. */
int trace_close(trace *t, errbuf *e);

#endif
