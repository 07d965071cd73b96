/* loader.h — forked loader workers filling a shared ring of batches.
 *
 * The main process posts passes over data sets (loader_post); worker
 * processes claim the next batch number from a shared counter, fill the
 * ring slot that batch maps to, and mark it ready; the main process takes
 * batches strictly in order 0, 1, 2, ... across all passes, so prefetching
 * runs on into the next epoch without a pause. With 0 workers the main
 * process fills each batch itself when asked, with the same code.
 *
 * Processes: loader_create forks a small supervisor, which forks the workers
 * and is their parent: it reaps them, reports deaths (pid, signal or status,
 * the batch held) through shared memory, and forks replacements on request
 * (--respawn) from its clean single-threaded state, whatever threads or
 * CUDA context the main process has by then. Everything shared (control
 * block, pass table, permutations, the ring) is one anonymous MAP_SHARED
 * mapping created before the fork: nothing in /dev/shm to leak or run out
 * of. Synchronisation is futexes on words in that mapping: nobody spins or
 * sleeps in a loop. Workers and supervisor die with their parent
 * (PR_SET_PDEATHSIG), so no process outlives the program.
 *
 * What a worker does per sample is the caller's: a load function and a
 * per-worker context (image decoder, scratch buffers) created after fork.
 */
#ifndef TRAIN_LOADER_H
#define TRAIN_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "common/rng.h"
#include "common/util.h"
#include "loader/dataset.h"

#define LOADER_MAX_WORKERS 64
#define LOADER_MAX_SOURCES 2

typedef struct loader loader;

/* What a pass asks of each sample; the load function interprets it. */
typedef enum load_pass_kind {
    LOAD_PASS_TRAIN = 0, /* augmented sample */
    LOAD_PASS_EVAL,      /* no augmentation */
    LOAD_PASS_BUILD,     /* preload: build the cache entry, no ring output */
    LOAD_PASS_READ_ONLY, /* diagnosis: read the bytes, no decode */
} load_pass_kind;

/* Produce sample `index` of `src` into out (sample_bytes), or into the
 * preload cache for LOAD_PASS_BUILD. wctx is the worker context. Returns 0,
 * or -1 with `path: reason` in e, or LOADER_LOAD_NO_MEMORY when memory ran
 * out (a fatal LOADER_NO_MEMORY, never skipped as a bad sample). */
#define LOADER_LOAD_NO_MEMORY (-2)
typedef int (*loader_load_fn)(void *wctx, int src, uint32_t index, load_pass_kind kind, rng *r,
                              uint8_t *out, errbuf *e);

/* I/O counters (remote shards and the shard cache): cumulative for a
 * process from loader_config.io_counts and loader_fetch_io, one batch's
 * share in loader_batch.io. */
typedef struct loader_io {
    uint64_t bytes;     /* body bytes received from remote storage */
    uint64_t requests;  /* requests made (each try counted) */
    uint64_t retries;   /* ... of which retries of a failed try */
    uint64_t hits;      /* shard lookups the shard cache answered */
    uint64_t downloads; /* shard lookups that downloaded the shard */
    double wait_s;      /* seconds spent waiting for shards (downloads included) */
} loader_io;

typedef struct loader_config {
    int workers;         /* 0: the main process loads */
    int prefetch;        /* batches in flight per worker; ring = max(1, workers * prefetch) */
    uint32_t batch;      /* largest batch size any pass uses */
    size_t sample_bytes; /* bytes of one sample in the ring (u8 C*H*W) */
    const dataset *src[LOADER_MAX_SOURCES]; /* data sets (0 training, 1 validation) */
    int nsrc;
    uint64_t seed;
    int skip_bad;   /* replace a bad sample by the next good one */
    int respawn;    /* replace a dead worker and redo its batch */
    double timeout; /* seconds a batch may take; 0 = no limit */
    loader_load_fn load;
    void *(*worker_init)(void *arg); /* per-worker context, after fork */
    void (*worker_fini)(void *wctx);
    /* optional: the seconds wctx has spent so far reading files and
     * decoding them (cumulative); a batch's share is in loader_batch */
    void (*phase_times)(void *wctx, double *read_s, double *decode_s);
    /* optional: the calling process's I/O counters so far (cumulative);
     * a batch's share is in loader_batch.io */
    void (*io_counts)(void *wctx, loader_io *io);
    void *arg;
    /* optional: run this program as the supervisor instead of forking this
     * process (a caller that has threads already: the Python module). The
     * shared mapping is then a memfd; the program starts with it as fd
     * LOADER_SERVE_MAP_FD and the command socket as LOADER_SERVE_CMD_FD,
     * and calls loader_serve with the same configuration. NULL: fork. */
    char *const *spawn_argv;
    int spawn_cache_fd; /* with spawn_argv: also handed over, as LOADER_SERVE_CACHE_FD
                           (the preload cache); 0 or -1: none */
    /* optional, read-ahead (remote shards): a fetcher process walks the
     * samples of the coming batches in order, and for each new `unit`
     * (a shard: fetch_unit's value for the sample, UINT32_MAX for a
     * sample with nothing to fetch) calls fetch, which makes it local;
     * it keeps `read_ahead` units beyond the one the workers are at.
     * Both get loader_config.arg. read_ahead 0 or fetch NULL: none. */
    uint32_t (*fetch_unit)(void *arg, int src, load_pass_kind kind, uint32_t index);
    void (*fetch)(void *arg, int src, uint32_t index);
    int read_ahead;
    /* optional: asked at least every 0.1 s while loader_next waits for a
     * worker; nonzero ends the wait with LOADER_INTERRUPTED (the Python
     * module's Ctrl-C: its handler runs only when asked) */
    int (*should_stop)(void *ctx);
    void *stop_ctx;
} loader_config;

enum { LOADER_SERVE_MAP_FD = 3, LOADER_SERVE_CMD_FD = 4, LOADER_SERVE_CACHE_FD = 5 };

/* load_pass.order: the order of a shuffled pass */
enum {
    LOAD_ORDER_GLOBAL = 0, /* one permutation of all rows (sampler_permutation) */
    LOAD_ORDER_SHARDS = 1, /* shard by shard through a shuffle buffer
                              (sampler_shard_order); a source without
                              shards (shard_first NULL) falls back to global */
};

typedef struct load_pass {
    int src; /* index into loader_config.src */
    load_pass_kind kind;
    uint32_t epoch; /* keys the shuffle and the augmentation */
    uint32_t batch; /* batch size (<= loader_config.batch) */
    int shuffle;
    int drop_last;
    uint32_t max_batches; /* > 0: stop the pass after this many batches */
    int after_previous;   /* no batch starts before every earlier batch is
                             released (e.g. training after the preload build) */
    /* data-parallel ranks (sampler_slice): this process loads slice `rank`
     * of `ranks` of every batch; ranks 0 or 1 loads whole batches. A slice
     * may be empty (a batch with fewer samples than ranks): count 0. */
    uint32_t rank, ranks;
    int order;               /* LOAD_ORDER_* */
    uint32_t shuffle_buffer; /* LOAD_ORDER_SHARDS: samples in the shuffle buffer */
} load_pass;

typedef struct loader_batch {
    uint64_t seq;      /* global batch number across passes */
    int pass;          /* id returned by loader_post */
    uint32_t index;    /* batch number within the pass */
    uint32_t count;    /* samples in this batch */
    uint32_t skipped;  /* bad samples replaced (skip_bad) */
    uint8_t *data;     /* count x sample_bytes, in the ring */
    int32_t *labels;   /* count labels */
    uint32_t *indices; /* count sample indices (after replacement) */
    double wait_s;     /* how long loader_next waited for it */
    double fill_t0;    /* when its filling began (now_sec()'s clock) */
    double fill_s;     /* time the filling process spent on it */
    double read_s;     /* ... of which reading files (phase_times; else 0) */
    double decode_s;   /* ... and decoding them; the rest is transformation */
    loader_io io;      /* the filling process's I/O for it (io_counts; else 0) */
    int filler;        /* pid of the process that filled it */
    int slot;
} loader_batch;

/* Status codes of loader_next, chosen to be the program's exit statuses. */
enum loader_status {
    LOADER_OK = 0,
    LOADER_END = 1,          /* no more posted batches */
    LOADER_BAD_SAMPLE = 2,   /* a sample could not be loaded (message in e) */
    LOADER_WORKER_LOST = 3,  /* a worker died or a batch timed out */
    LOADER_NO_MEMORY = 5,    /* memory ran out loading a sample (message in e) */
    LOADER_INTERRUPTED = 130 /* loader_interrupt was called (SIGINT/SIGTERM) */
};

/* Map the shared memory and fork the supervisor and workers. Call before
 * creating any thread or touching CUDA. */
loader *loader_create(const loader_config *cfg, errbuf *e);

/* In the program loader_config.spawn_argv runs: map the caller's shared
 * memory (cfg must describe the same loader: its size is checked) and be
 * its supervisor, forking the workers from this clean process. Returns
 * only on failure (-1, with e); exits when the caller's loader is
 * destroyed or the caller dies. */
int loader_serve(const loader_config *cfg, errbuf *e);

/* Append a pass to the plan; returns its id. Passes run in the order posted;
 * post a whole run's passes up front and prefetching crosses epochs. */
int loader_post(loader *p, const load_pass *pass);

/* Number of batches pass `id` has. */
uint32_t load_pass_batches(const loader *p, int id);

/* Wait for the next batch in order. LOADER_OK fills b; other statuses fill e
 * with a one-line message for the user. */
int loader_next(loader *p, loader_batch *b, errbuf *e);

/* Give a batch's slot back (after its data has been consumed or copied). */
void loader_release(loader *p, const loader_batch *b);

/* Async-signal-safe: make a waiting loader_next return LOADER_INTERRUPTED. */
void loader_interrupt(loader *p);

/* Stop and reap every process, unmap. Safe on a half-created loader.
 * Every wait for the supervisor is bounded: a stopped one is SIGKILLed at
 * once, one that has not exited LOADER_REAP_WAIT_S seconds after being
 * told to (stuck) then; stderr says so. Generous, since an ASan build's
 * supervisor may need seconds for its leak check at exit. */
#define LOADER_REAP_WAIT_S 10.0
void loader_destroy(loader *p);

/* Hand the loader's shared mapping (which holds the ring) to the caller:
 * loader_destroy then stops every process but leaves the mapping, and the
 * caller munmaps (*base, *len) when the last view of the ring is gone
 * (the Python module's batches outlive their loader). */
void loader_disown_map(loader *p, void **base, size_t *len);

/* The slots' labels (every slot's, contiguous in the shared mapping) and
 * their size, for page-locking them beside the ring. */
int32_t *loader_labels_area(loader *p, size_t *bytes);

/* The ring, for page-locking: base and length (page aligned). */
void *loader_ring(loader *p, size_t *bytes);
size_t loader_ring_slots(const loader *p);

/* pids of the supervisor and the live workers (for memory accounting);
 * returns how many were written. */
int loader_pids(const loader *p, int *pids, int max);

/* Counters for reports. */
typedef struct loader_stats {
    uint64_t respawns; /* workers replaced */
    uint64_t redone;   /* batches the main process redid for a dead worker */
} loader_stats;
void loader_get_stats(const loader *p, loader_stats *s);

/* The I/O of the loader's read-ahead of shards so far (cumulative; zeros
 * while it has none), which no batch's io holds. */
void loader_fetch_io(const loader *p, loader_io *io);

#endif
