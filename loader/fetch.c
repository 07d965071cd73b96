/* fetch.c — the loader's read-ahead process (loader_config.fetch).
 *
 * Workers fetch what a sample needs when they meet it (a remote shard:
 * downloaded then, everybody else waiting for it). The fetcher makes that
 * rare: it walks the samples of the batches after the one the workers
 * claim next, in the order they will be loaded, and makes the next
 * `read_ahead` units (shards) local before any worker asks. The order is
 * its own copy of each pass's permutation (loader_pass_perm, the same
 * function the main process fills the shared table with), from the
 * posted passes main hands it through the shared fetch_plan records, so
 * it reads nothing main may be rewriting. It is a hint: a unit it has not
 * made local yet, or one it failed on, is fetched by the worker as
 * before, so its timing changes nothing in the batches.
 *
 * It wakes when batches complete (ctl.main_seq) or every second, and
 * exits with the loader (stop, or SIGKILL from the supervisor).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "loader/sampler.h"
#include "loader/shared.h"

void loader_fetch_post(loader *p, int id)
{
    if (!p->cfg.fetch || p->cfg.read_ahead <= 0)
        return;
    uint64_t k = atomic_load(&p->ctl->plan_posted);
    fetch_plan *r = &p->fplan[k % LOADER_FETCH_PLANQ];
    r->pass = p->plan[id];
    r->first = p->plan_first[id];
    r->nbatches = p->plan_nb[id];
    atomic_store(&p->ctl->plan_posted, k + 1);
}

/* A pass's permutation, computed once while it is near. */
typedef struct cached_perm {
    uint64_t record; /* plan record number + 1; 0: empty */
    uint32_t *perm;
} cached_perm;

static const uint32_t *perm_of(loader *p, cached_perm c[2], uint64_t k, const fetch_plan *r)
{
    for (int i = 0; i < 2; i++)
        if (c[i].record == k + 1)
            return c[i].perm;
    cached_perm t = c[0]; /* the older one goes */
    c[0] = c[1];
    c[1] = t;
    if (!c[1].perm)
        c[1].perm = xmalloc(sizeof(uint32_t) * (p->max_n ? p->max_n : 1));
    loader_pass_perm(p, &r->pass, c[1].perm);
    c[1].record = k + 1;
    return c[1].perm;
}

/* Units made local lately (most recent last): not asked for again. */
#define DONE_MAX 64
typedef struct done_set {
    uint64_t v[DONE_MAX];
    int n;
} done_set;

static int done_has(const done_set *d, uint64_t u)
{
    for (int i = 0; i < d->n; i++)
        if (d->v[i] == u)
            return 1;
    return 0;
}

static void done_add(done_set *d, uint64_t u)
{
    if (d->n == DONE_MAX) {
        memmove(d->v, d->v + 1, (DONE_MAX - 1) * sizeof *d->v);
        d->n--;
    }
    d->v[d->n++] = u;
}

/* the fetcher's counters since `base`, published for loader_fetch_io */
static void publish_io(loader *p, const loader_io *base)
{
    if (!p->cfg.io_counts)
        return;
    loader_io io;
    p->cfg.io_counts(NULL, &io);
    atomic_store(&p->ctl->fetch_bytes, io.bytes - base->bytes);
    atomic_store(&p->ctl->fetch_requests, io.requests - base->requests);
    atomic_store(&p->ctl->fetch_retries, io.retries - base->retries);
    atomic_store(&p->ctl->fetch_downloads, io.downloads - base->downloads);
}

/* One walk: every unit of the batches workers are filling now, then
 * read_ahead units past the first one of the next batch to claim (or
 * until the posted plan ends). */
static void walk(loader *p, cached_perm cache[2], done_set *done, const loader_io *base)
{
    loader_ctl *c = p->ctl;
    uint64_t claim = atomic_load(&c->next_claim), posted = atomic_load(&c->plan_posted);
    uint64_t seq = claim; /* from the oldest batch still being filled */
    for (int i = 0; i < p->cfg.workers; i++) {
        int64_t cur = atomic_load(&p->workers[i].current);
        if (cur >= 0 && (uint64_t)cur < seq)
            seq = (uint64_t)cur;
    }
    uint64_t k0 = posted > LOADER_FETCH_PLANQ ? posted - LOADER_FETCH_PLANQ : 0;
    int units = 0; /* counted from the batch `claim` on */
    uint64_t last = UINT64_MAX;
    for (uint64_t k = k0; k < posted && units <= p->cfg.read_ahead; k++) {
        const fetch_plan *r = &p->fplan[k % LOADER_FETCH_PLANQ];
        if (seq >= r->first + r->nbatches)
            continue;
        const uint32_t *perm = perm_of(p, cache, k, r);
        uint32_t n = p->cfg.src[r->pass.src]->n, B = r->pass.batch;
        uint32_t b0 = seq > r->first ? (uint32_t)(seq - r->first) : 0;
        for (uint32_t b = b0; b < r->nbatches && units <= p->cfg.read_ahead; b++) {
            int ahead = r->first + b >= claim;
            uint32_t first, count = sampler_slice(sampler_batch_size(n, B, b), r->pass.rank,
                                                  r->pass.ranks, &first);
            for (uint32_t i = 0; i < count && units <= p->cfg.read_ahead; i++) {
                uint32_t idx = perm[(size_t)b * B + first + i];
                uint32_t u32 = p->cfg.fetch_unit(p->cfg.arg, r->pass.src, r->pass.kind, idx);
                if (u32 == UINT32_MAX)
                    continue;
                uint64_t u = (uint64_t)r->pass.src << 32 | u32;
                if (u == last)
                    continue;
                last = u;
                units += ahead;
                if (done_has(done, u))
                    continue;
                if (atomic_load(&c->stop))
                    return;
                p->cfg.fetch(p->cfg.arg, r->pass.src, idx);
                done_add(done, u);
                publish_io(p, base);
            }
        }
    }
}

void loader_fetch_main(loader *p)
{
    loader_ctl *c = p->ctl;
    cached_perm cache[2] = {{0, NULL}, {0, NULL}};
    done_set done = {.n = 0};
    loader_io base = {0}; /* what this process's counters held at its fork */
    if (p->cfg.io_counts)
        p->cfg.io_counts(NULL, &base);
    while (!atomic_load(&c->stop)) {
        uint32_t ms = atomic_load(&c->main_seq);
        walk(p, cache, &done, &base);
        struct timespec ts = {1, 0}; /* a safety net: completed batches wake it */
        futex_wait_shared(&c->main_seq, ms, &ts);
    }
    free(cache[0].perm);
    free(cache[1].perm);
    _exit(0);
}
