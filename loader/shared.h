/* shared.h — the memory the loader's processes share, and the futex
 * helpers. Private to loader/loader*.c.
 *
 * Layout of the one MAP_SHARED mapping (created before fork):
 *
 *   loader_ctl | worker_rec[workers] | slot_hdr[slots] | pass_entry[LOADER_PASSQ]
 *   | perm[LOADER_PASSQ][max_n] | labels[slots][batch] | indices[slots][batch]
 *   | skip_told[LOADER_MAX_SOURCES][max_n]
 *   | ring: slots x round_up(batch * sample_bytes, page)
 *
 * Who writes what:
 *   main       ctl.limit, ctl.work_seq, ctl.stop, slot_hdr.{seq, pass, index}
 *              while the slot is not claimable, pass_entry + perm of passes
 *              whose previous occupant is fully released
 *   worker     ctl.next_claim (CAS), its worker_rec.current, everything in
 *              the slot of the batch it claimed, then slot_hdr.ready_tag
 *   supervisor worker_rec.{pid, state, death info}, ctl.deaths
 * Every cross-process hand-over is a seq_cst atomic; plain fields are only
 * read after the atomic that published them.
 */
#ifndef TRAIN_LOADER_SHARED_H
#define TRAIN_LOADER_SHARED_H

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "loader/loader.h"

#define LOADER_PASSQ 4        /* passes active at once (perm buffers) */
#define LOADER_FETCH_PLANQ 64 /* posted passes the fetcher can be behind by */

enum worker_state { WORKER_STARTING = 0, WORKER_ALIVE, WORKER_DEAD };

typedef struct worker_rec {
    _Atomic int32_t pid;
    _Atomic int32_t state;   /* enum worker_state */
    _Atomic int64_t current; /* batch seq being filled, or -1 */
    /* set by the supervisor when the worker dies */
    int32_t exit_status; /* or -1 */
    int32_t term_signal; /* or 0 */
    int64_t held;        /* `current` at death */
} worker_rec;

typedef struct slot_hdr {
    _Atomic uint32_t ready_tag; /* tag(seq) once the batch of `seq` is in */
    uint64_t seq;               /* armed by main */
    uint32_t pass;              /* pass entry index, armed by main */
    uint32_t index;             /* batch within the pass, armed by main */
    /* written by the filler */
    uint32_t count, skipped;
    int32_t status; /* 0 ok, LOADER_BAD_SAMPLE, LOADER_NO_MEMORY */
    double fill_t0; /* now_sec() when filling began (one clock
                                   for every process: CLOCK_MONOTONIC) */
    double fill_s;
    double read_s, decode_s; /* of fill_s: the batch's sums (phase_times) */
    loader_io io;            /* the filler's I/O for the batch (io_counts) */
    int32_t filler;          /* pid of the process that filled it */
    char msg[2 * ERR_MAX];   /* `csv:line: ` + the loader's message */
} slot_hdr;

typedef struct pass_entry {
    load_pass pass;
    uint64_t first; /* first global seq */
    uint32_t nbatches;
    uint32_t n; /* samples in the data set */
    int id;
} pass_entry;

/* A posted pass as the fetcher sees it (fetch.c): main writes record
 * k % LOADER_FETCH_PLANQ, then raises ctl.plan_posted to k + 1. */
typedef struct fetch_plan {
    load_pass pass;
    uint64_t first; /* first global seq */
    uint32_t nbatches;
} fetch_plan;

typedef struct loader_ctl {
    _Atomic uint64_t next_claim; /* next seq a worker may claim */
    _Atomic uint64_t limit;      /* workers claim seq < limit */
    _Atomic uint32_t work_seq;   /* futex: workers wait here for work */
    _Atomic uint32_t main_seq;   /* futex: main waits here for batches/deaths */
    _Atomic uint32_t stop;
    _Atomic uint32_t deaths; /* workers that died so far */
    _Atomic uint32_t interrupted;
    _Atomic uint64_t plan_posted; /* fetch_plan records written */
    _Atomic int32_t fetch_pid;    /* the fetcher process, or 0 */
    /* the fetcher's I/O since it started (loader_fetch_io): its downloads
     * only (its look into the cache before each is not a lookup a worker
     * waited on, so neither hits nor wait time) */
    _Atomic uint64_t fetch_bytes, fetch_requests, fetch_retries, fetch_downloads;
} loader_ctl;

struct loader {
    loader_config cfg;
    int nslots;
    size_t map_len, slot_stride;
    uint8_t *map;
    int map_disowned; /* loader_disown_map: the caller unmaps */
    loader_ctl *ctl;
    worker_rec *workers;
    slot_hdr *slots;
    pass_entry *passes;
    uint32_t *perms; /* LOADER_PASSQ x max_n */
    uint32_t max_n;
    int32_t *labels;
    uint32_t *indices;
    _Atomic uint8_t *skip_told; /* LOADER_MAX_SOURCES x max_n: a skipped
                                   sample's reason was printed */
    fetch_plan *fplan;          /* LOADER_FETCH_PLANQ records */
    uint8_t *ring;
    size_t ring_len;
    /* supervisor started by loader_serve: it also leaves when this
     * process (its parent) is gone, as it cannot ask for PR_SET_PDEATHSIG
     * safely (that follows the parent's thread, not the process) */
    pid_t watch_parent;

    /* main process only */
    int sup_pid;
    int fetch_child; /* the fetcher, forked by main when there is no supervisor */
    int cmd_fd;      /* write end of the supervisor's command pipe */
    load_pass *plan; /* every posted pass */
    uint64_t *plan_first;
    uint32_t *plan_nb;
    int nplan, plan_cap;
    int active_end;        /* passes [0, active_end) have entries */
    uint64_t posted_end;   /* seq after the last activated pass's batches */
    uint64_t consumed;     /* next seq loader_next returns */
    uint64_t released;     /* all seq < released are released */
    uint8_t *release_mark; /* per slot: released out of order */
    uint32_t deaths_seen;
    void *main_wctx; /* loader context of the main process (0 workers, redo) */
    int main_wctx_made;
    loader_stats stats;
};

static inline uint32_t loader_tag(uint64_t seq) { return (uint32_t)(seq + 1); }

static inline long futex_wait_shared(_Atomic uint32_t *addr, uint32_t val,
                                     const struct timespec *rel)
{
    return syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, rel, NULL, 0);
}

static inline long futex_wake_shared(_Atomic uint32_t *addr, int n)
{
    return syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* Fill the batch of `seq` into its slot (worker, or main for 0 workers and
 * redone batches) and publish it. */
void loader_fill(loader *p, uint64_t seq, void *wctx);

/* perm[0..n) of pass j (sampler.h): what activate() puts in the shared
 * table, and what the fetcher computes for itself. */
void loader_pass_perm(const loader *p, const load_pass *j, uint32_t *perm);

/* main: tell the fetcher about posted pass `id` (fetch.c). */
void loader_fetch_post(loader *p, int id);
/* The fetcher process (loader_config.fetch): never returns. */
void loader_fetch_main(loader *p) __attribute__((noreturn));

/* The supervisor process: never returns. */
void loader_supervisor_main(loader *p, int cmd_fd) __attribute__((noreturn));
/* In a freshly forked child: SIGKILL when `parent` dies; exits at once
 * when it already has (before the request took effect). */
void die_with_parent(pid_t parent);

#endif
