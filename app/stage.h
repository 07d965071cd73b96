/* stage.h — getting a loader batch to the compute device.
 *
 *   CPU backend     zero copy: the model reads the ring slot itself; the
 *                   slot goes back to the loader after the step.
 *   GPU, blocking   copy the u8 batch (4x fewer bytes than floats), wait,
 *                   compute: the baseline.
 *   GPU, --non-blocking
 *                   the copy runs on the copy stream into one of several
 *                   device buffers while the previous batch computes; the
 *                   compute stream waits for it on the device, and the
 *                   next copy into a buffer waits for the compute that
 *                   reads it.
 *   --pin           the ring itself is page-locked (after the workers were
 *                   forked), so workers write straight into pinned memory
 *                   and copies are DMA: no extra host copy as in PyTorch's
 *                   pin-memory thread.
 *
 * A slot holds the batch's labels too, which the step reads: it goes back
 * to the loader once its copy has completed AND stager_done was called
 * for it, oldest first.
 */
#ifndef TRAIN_STAGE_H
#define TRAIN_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "loader/loader.h"
#include "nn/backend.h"

typedef struct stager stager;

/* note receives one line for the user when pinning was refused, failed or
 * has no effect; empty otherwise. */
stager *stager_create(backend *be, loader *ldr, size_t sample_bytes, int max_batch, int pin,
                      int non_blocking, int pin_force, char *note, size_t note_len, errbuf *e);
void stager_free(stager *s);

/* 1 when batches should be fetched one ahead (their copies overlap the
 * current step): --non-blocking on a GPU with at least two ring slots. */
int stager_lookahead(const stager *s);

/* 1 when copies to the device are asynchronous: --non-blocking on a GPU. */
int stager_async(const stager *s);

/* Before loader_next: give back slots that are done with, and wait for the
 * oldest one's copy when the loader would otherwise have no free slot. */
void stager_make_room(stager *s);

/* Start moving batch b to the device; returns the device pointer the model
 * reads (valid until stager_done for b). b's slot stays held. */
const uint8_t *stager_push(stager *s, const loader_batch *b);

/* The step that reads b has been enqueued (CPU: has run) and no longer
 * needs b's labels. */
void stager_done(stager *s, const loader_batch *b);
/* Right before b's step is enqueued: the compute stream waits (on the
 * device) for b's copy. Not earlier, or the wait would also hold the steps
 * enqueued before it. Returns b's labels on the device (copied with the
 * pixels, for model_batch.dev_labels), or NULL on the CPU. */
const int32_t *stager_begin(stager *s, const loader_batch *b);

/* Release every slot still held (end of the run). */
void stager_drain(stager *s);

/* Seconds the host spent blocked on copies since the last call. */
double stager_take_copy_s(stager *s);
size_t stager_pinned_bytes(const stager *s);

#endif
