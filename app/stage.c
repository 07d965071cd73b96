/* stage.c — see stage.h.
 *
 * A ring slot holds a batch's pixels, labels and sample indices (loader/loader.h),
 * so it goes back to the loader only when both its copy to the device has
 * completed (the pixels were read) and stager_done said the step that reads
 * its labels has been enqueued (on a GPU the labels travel in the batch's
 * own copy, to a device buffer beside its pixels; the CPU reads them
 * from the slot; model_train_step is done with them before it
 * returns). Slots go back in the order they were taken. A device input
 * buffer is rewritten only after the compute that reads it: stager_done
 * records that point on the compute stream (stage_release), and the next
 * copy into the buffer waits for it on the device.
 *
 * The compute stream waits for batch b's copy in stager_begin, right
 * before b's step is enqueued — never in stager_push: the loop pushes b+1
 * before computing on b, and a wait enqueued then would hold b's step
 * until b+1's copy ended (CUDA: "all future work submitted to the stream
 * waits"), so copies and compute would take turns instead of overlapping.
 *
 * Looking ahead (fetching batch b+1 before computing on b, so its copy
 * overlaps b's compute) needs a second ring slot: with one (0 workers) the
 * next batch could only be loaded into the slot b still holds.
 */
#define _POSIX_C_SOURCE 200809L
#include "app/stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/device.h"
#include "common/assert.h"

#define NBUF 3  /* device input buffers for non-blocking copies */
#define QMAX 64 /* slots held at once */

typedef struct held {
    loader_batch b;
    int buf;  /* device buffer its copy went to, or -1 (CPU) */
    int done; /* stager_done was called: only the copy can still need the slot */
} held;

struct stager {
    backend *be;
    loader *ldr;
    size_t sample_bytes;
    int gpu, non_blocking, lookahead;
    void *pinned, *pinned_labels;
    size_t pinned_bytes;
    uint8_t *dev[NBUF];
    int32_t *dev_labels[NBUF]; /* the batch's labels travel with it */
    int next_buf;
    held q[QMAX]; /* batches whose slots are still held, oldest first */
    int nq;
    double copy_s;
};

stager *stager_create(backend *be, loader *ldr, size_t sample_bytes, int max_batch, int pin,
                      int non_blocking, int pin_force, char *note, size_t note_len, errbuf *e)
{
    stager *s = xcalloc(1, sizeof *s);
    s->be = be;
    s->ldr = ldr;
    s->sample_bytes = sample_bytes;
    s->gpu = !be->host_visible && backend_has_staging(be);
    s->non_blocking = s->gpu && non_blocking;
    s->lookahead = s->non_blocking && loader_ring_slots(ldr) >= 2;
    note[0] = '\0';
    if (!s->gpu) {
        if (pin)
            snprintf(note, note_len,
                     "note: --pin has no effect without a GPU (the CPU reads the "
                     "loader's memory directly); continuing unpinned");
        else if (non_blocking)
            snprintf(note, note_len, "note: --non-blocking has no effect without a GPU");
        return s;
    }
    int nbuf = s->non_blocking ? NBUF : 1;
    for (int i = 0; i < nbuf; i++) {
        s->dev[i] = be->ops->alloc(be, sample_bytes * (size_t)max_batch);
        s->dev_labels[i] = be->ops->alloc(be, sizeof(int32_t) * (size_t)max_batch);
    }
    if (pin) {
        size_t bytes;
        void *ring = loader_ring(ldr, &bytes);
        char what[1280];
        uint64_t avail = device_pin_budget(what, sizeof what);
        errbuf pe;
        int rc = device_pin_check_of(bytes, avail, what, pin_force, &pe);
        if (rc < 0) {
            errf(e, "%s", pe.msg);
            stager_free(s);
            return NULL;
        }
        if (rc > 0)
            snprintf(note, note_len, "warning: %s", pe.msg);
        if (be->ops->host_pin(be, ring, bytes, &pe) != 0) {
            snprintf(note, note_len,
                     "warning: page-locking the loader ring failed (%s); "
                     "continuing with pageable memory",
                     pe.msg);
        } else {
            s->pinned = ring;
            s->pinned_bytes = bytes;
            /* the labels travel in the batch's copy: pinned too, or that
             * copy would hold the host */
            size_t lb;
            int32_t *labels = loader_labels_area(ldr, &lb);
            if (be->ops->host_pin(be, labels, lb, &pe) == 0)
                s->pinned_labels = labels;
        }
    }
    if (s->non_blocking && !s->pinned && !note[0])
        snprintf(note, note_len,
                 "note: --non-blocking without --pin: CUDA holds the host in every copy from "
                 "pageable memory while it stages the bytes, at about half a pinned copy's "
                 "speed, and the host enqueues nothing meanwhile (as with PyTorch's "
                 "non_blocking=True without pin_memory); add --pin");
    return s;
}

void stager_free(stager *s)
{
    if (!s)
        return;
    stager_drain(s);
    if (s->pinned)
        s->be->ops->host_unpin(s->be, s->pinned);
    if (s->pinned_labels)
        s->be->ops->host_unpin(s->be, s->pinned_labels);
    for (int i = 0; i < NBUF; i++) {
        if (s->dev[i])
            s->be->ops->free(s->be, s->dev[i]);
        if (s->dev_labels[i])
            s->be->ops->free(s->be, s->dev_labels[i]);
    }
    free(s);
}

int stager_lookahead(const stager *s) { return s->lookahead; }

int stager_async(const stager *s) { return s->non_blocking; }

/* the oldest held slot may go back without waiting */
static int front_free(stager *s)
{
    held *h = &s->q[0];
    return h->done && (h->buf < 0 || s->be->ops->stage_done(s->be, h->buf, 0));
}

/* Give the oldest held slot back; wait = 1 first blocks until its copy has
 * completed, else it must have. */
static void release_front(stager *s, int wait)
{
    held *h = &s->q[0];
    ASSERT(s->nq > 0 && (wait || front_free(s)));
    if (h->buf >= 0 && wait) {
        double t0 = now_sec();
        s->be->ops->stage_done(s->be, h->buf, 1);
        s->copy_s += now_sec() - t0;
    }
    loader_release(s->ldr, &h->b);
    memmove(s->q, s->q + 1, (size_t)(s->nq - 1) * sizeof *s->q);
    s->nq--;
}

void stager_make_room(stager *s)
{
    while (s->nq > 0 && front_free(s))
        release_front(s, 0);
    /* every slot held (or our queue full): the oldest must come back. It
     * is done unless the caller looks ahead with a single slot, which
     * stager_lookahead rules out. */
    size_t slots = loader_ring_slots(s->ldr);
    while (s->nq > 0 && ((size_t)s->nq >= slots || s->nq >= QMAX)) {
        if (!s->q[0].done) {
            fprintf(stderr, "train: internal error: stager_make_room: the ring's only free slot "
                            "holds a batch not yet computed\n");
            exit(1);
        }
        release_front(s, 1);
    }
}

const uint8_t *stager_push(stager *s, const loader_batch *b)
{
    if (s->nq == QMAX) {
        fprintf(stderr, "train: internal error: stager_push: %d batches held\n", QMAX);
        exit(1);
    }
    /* slots go back in the order they were taken: the queue is in batch order */
    ASSERT(s->nq == 0 || s->q[s->nq - 1].b.seq < b->seq);
    held *h = &s->q[s->nq++];
    h->b = *b;
    h->buf = -1;
    h->done = 0;
    if (!s->gpu)
        return b->data;
    int k = s->next_buf;
    s->next_buf = (s->next_buf + 1) % (s->non_blocking ? NBUF : 1);
    h->buf = k;
    double t0 = now_sec();
    /* labels first, pixels second: b's copy event, recorded after each,
     * covers both */
    s->be->ops->stage_copy(s->be, k, s->dev_labels[k], b->labels,
                           (size_t)b->count * sizeof(int32_t));
    s->be->ops->stage_copy(s->be, k, s->dev[k], b->data, (size_t)b->count * s->sample_bytes);
    if (!s->non_blocking) /* the baseline: the host waits for the copy */
        s->be->ops->stage_done(s->be, k, 1);
    /* copy% is host time spent copying: the wait above, or the time a
     * "non-blocking" copy from pageable memory held the host inside the
     * call (about nothing when pinned) */
    s->copy_s += now_sec() - t0;
    return s->dev[k];
}

const int32_t *stager_begin(stager *s, const loader_batch *b)
{
    for (int i = 0; i < s->nq; i++)
        if (s->q[i].b.seq == b->seq && s->q[i].buf >= 0) {
            s->be->ops->stage_wait(s->be, s->q[i].buf);
            return s->dev_labels[s->q[i].buf];
        }
    return NULL;
}

void stager_done(stager *s, const loader_batch *b)
{
    int found = 0;
    for (int i = 0; i < s->nq; i++) {
        held *h = &s->q[i];
        if (h->b.seq != b->seq)
            continue;
        found = 1;
        h->done = 1;
        /* the buffer may be overwritten once the compute enqueued so far ran */
        if (h->buf >= 0)
            s->be->ops->stage_release(s->be, h->buf);
    }
    ASSERT(found); /* b was pushed and is still held */
    while (s->nq > 0 && front_free(s))
        release_front(s, 0);
}

void stager_drain(stager *s)
{
    while (s->nq > 0)
        release_front(s, 1);
}

double stager_take_copy_s(stager *s)
{
    double c = s->copy_s;
    s->copy_s = 0;
    return c;
}

size_t stager_pinned_bytes(const stager *s) { return s->pinned_bytes; }
