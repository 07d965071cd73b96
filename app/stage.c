/* stage.c — see stage.h. */
#define _POSIX_C_SOURCE 200809L
#include "stage.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../nn/device.h"

#define NBUF 3 /* device input buffers for non-blocking copies */

typedef struct held {
    pool_batch b;
    int buf; /* device buffer, or -1 (CPU) */
} held;

struct stager {
    backend *be;
    pool *pl;
    size_t sample_bytes;
    int gpu, non_blocking;
    void *pinned;
    size_t pinned_bytes;
    uint8_t *dev[NBUF];
    int next_buf;
    held q[64]; /* batches whose slots are still held, oldest first */
    int nq;
    double copy_s;
};

stager *stager_create(backend *be, pool *pl, size_t sample_bytes, int max_batch, int pin,
                      int non_blocking, int pin_force, char *note, size_t note_len, errbuf *e)
{
    stager *s = xcalloc(1, sizeof *s);
    s->be = be;
    s->pl = pl;
    s->sample_bytes = sample_bytes;
    s->gpu = !be->host_visible && be->ops->stage_copy;
    s->non_blocking = s->gpu && non_blocking;
    note[0] = '\0';
    if (!s->gpu) {
        if (pin)
            snprintf(note, note_len, "note: --pin has no effect without a GPU (the CPU reads the "
                                     "loader's memory directly); continuing unpinned");
        else if (non_blocking)
            snprintf(note, note_len, "note: --non-blocking has no effect without a GPU");
        return s;
    }
    int nbuf = s->non_blocking ? NBUF : 1;
    for (int i = 0; i < nbuf; i++)
        s->dev[i] = be->ops->alloc(be, sample_bytes * (size_t)max_batch);
    if (pin) {
        size_t bytes;
        void *ring = pool_ring(pl, &bytes);
        uint64_t avail = mem_available_bytes();
        errbuf pe;
        int rc = device_pin_check(bytes, avail, pin_force, &pe);
        if (rc < 0) {
            errf(e, "%s", pe.msg);
            stager_free(s);
            return NULL;
        }
        if (rc > 0)
            snprintf(note, note_len, "warning: %s", pe.msg);
        if (be->ops->host_pin(be, ring, bytes, &pe) != 0) {
            snprintf(note, note_len, "warning: page-locking the loader ring failed (%s); "
                                     "continuing with pageable memory", pe.msg);
        } else {
            s->pinned = ring;
            s->pinned_bytes = bytes;
        }
    }
    return s;
}

void stager_free(stager *s)
{
    if (!s)
        return;
    stager_drain(s);
    if (s->pinned)
        s->be->ops->host_unpin(s->be, s->pinned);
    for (int i = 0; i < NBUF; i++)
        if (s->dev[i])
            s->be->ops->free(s->be, s->dev[i]);
    free(s);
}

int stager_lookahead(const stager *s) { return s->non_blocking; }

static void release_front(stager *s)
{
    pool_release(s->pl, &s->q[0].b);
    memmove(s->q, s->q + 1, (size_t)(s->nq - 1) * sizeof *s->q);
    s->nq--;
}

void stager_make_room(stager *s)
{
    /* slots whose copies finished go back at once */
    while (s->nq > 0 && s->q[0].buf >= 0 && s->be->ops->stage_done(s->be, s->q[0].buf, 0))
        release_front(s);
    size_t slots = pool_ring_slots(s->pl);
    while (s->nq > 0 && (size_t)s->nq >= slots) {
        double t0 = now_sec();
        if (s->q[0].buf >= 0)
            s->be->ops->stage_done(s->be, s->q[0].buf, 1);
        s->copy_s += now_sec() - t0;
        release_front(s);
    }
}

const uint8_t *stager_push(stager *s, const pool_batch *b)
{
    if (!s->gpu)
        return b->data;
    int k = s->next_buf;
    s->next_buf = (s->next_buf + 1) % (s->non_blocking ? NBUF : 1);
    double t0 = now_sec();
    s->be->ops->stage_copy(s->be, k, s->dev[k], b->data, (size_t)b->count * s->sample_bytes);
    if (!s->non_blocking) {
        s->be->ops->stage_done(s->be, k, 1);
        s->copy_s += now_sec() - t0;
        pool_release(s->pl, b);
    } else {
        s->q[s->nq].b = *b;
        s->q[s->nq].buf = k;
        s->nq++;
    }
    s->be->ops->stage_wait(s->be, k);
    return s->dev[k];
}

void stager_done(stager *s, const pool_batch *b)
{
    if (!s->gpu) {
        pool_release(s->pl, b);
        return;
    }
    /* the buffer this batch used may be overwritten once its readers ran */
    for (int i = 0; i < s->nq; i++)
        if (s->q[i].b.seq == b->seq)
            s->be->ops->stage_release(s->be, s->q[i].buf);
    if (!s->non_blocking)
        s->be->ops->stage_release(s->be, 0);
}

void stager_drain(stager *s)
{
    while (s->nq > 0) {
        if (s->q[0].buf >= 0)
            s->be->ops->stage_done(s->be, s->q[0].buf, 1);
        release_front(s);
    }
}

double stager_take_copy_s(stager *s)
{
    double c = s->copy_s;
    s->copy_s = 0;
    return c;
}

size_t stager_pinned_bytes(const stager *s) { return s->pinned_bytes; }
