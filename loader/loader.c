/* loader.c — the main process's side of the loader (see loader.h).
 *
 * The main process owns the plan (every posted pass), activates passes into
 * the shared pass table as entries free up, arms ring slots with the batch
 * they will hold, raises the claim limit as slots are released, and waits
 * for batches in order. It never spins: it sleeps on a futex that workers
 * and the supervisor bump, waking at least once a second to look at the
 * clock (--timeout) and at its child.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "common/assert.h"
#include "loader/sampler.h"
#include "loader/shared.h"

#define MAX_RESPAWNS 100

extern char **environ;

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Where each part of the shared mapping starts, in bytes from its start;
 * the control block is at 0, the ring last and page-aligned. */
typedef struct map_layout {
    size_t workers, slots, passes, perms, labels, indices, skip_told, fplan, ring, end;
} map_layout;

static map_layout layout(loader *p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t batch = (size_t)p->nslots * p->cfg.batch;
    map_layout l;
    l.workers = align_up(sizeof(loader_ctl), 64);
    l.slots = align_up(
        l.workers + sizeof(worker_rec) * (size_t)(p->cfg.workers ? p->cfg.workers : 1), 64);
    l.passes = align_up(l.slots + sizeof(slot_hdr) * (size_t)p->nslots, 64);
    l.perms = align_up(l.passes + sizeof(pass_entry) * LOADER_PASSQ, 64);
    l.labels = align_up(l.perms + sizeof(uint32_t) * LOADER_PASSQ * (size_t)p->max_n, 64);
    l.indices = align_up(l.labels + sizeof(int32_t) * batch, 64);
    l.skip_told = align_up(l.indices + sizeof(uint32_t) * batch, 64);
    l.fplan = align_up(l.skip_told + (size_t)LOADER_MAX_SOURCES * p->max_n, 64);
    l.ring = align_up(l.fplan + sizeof(fetch_plan) * LOADER_FETCH_PLANQ, page);
    p->slot_stride = align_up(p->cfg.batch * p->cfg.sample_bytes, page);
    p->ring_len = p->slot_stride * (size_t)p->nslots;
    l.end = l.ring + p->ring_len;
    return l;
}

/* The loader's struct for cfg, without its mapping (map_len computed). */
static loader *loader_new(const loader_config *cfg, errbuf *e)
{
    if (cfg->workers < 0 || cfg->workers > LOADER_MAX_WORKERS)
        return errf(e, "--workers %d: must be 0..%d", cfg->workers, LOADER_MAX_WORKERS), NULL;
    if (cfg->prefetch < 1)
        return errf(e, "--prefetch %d: must be at least 1", cfg->prefetch), NULL;
    if (cfg->batch < 1 || cfg->sample_bytes < 1 || cfg->nsrc < 1 ||
        cfg->nsrc > LOADER_MAX_SOURCES || !cfg->load)
        return errf(e, "internal: bad loader configuration"), NULL;
    loader *p = xcalloc(1, sizeof *p);
    p->cfg = *cfg;
    p->nslots = cfg->workers ? cfg->workers * cfg->prefetch : 1;
    p->sup_pid = -1;
    p->cmd_fd = -1;
    for (int i = 0; i < cfg->nsrc; i++)
        if (cfg->src[i]->n > p->max_n)
            p->max_n = cfg->src[i]->n;
    p->map_len = layout(p).end;
    return p;
}

/* Point p's parts into mapping m. */
static void loader_place(loader *p, uint8_t *m)
{
    map_layout off = layout(p);
    p->map = m;
    p->ctl = (loader_ctl *)m;
    p->workers = (worker_rec *)(p->map + off.workers);
    p->slots = (slot_hdr *)(p->map + off.slots);
    p->passes = (pass_entry *)(p->map + off.passes);
    p->perms = (uint32_t *)(p->map + off.perms);
    p->labels = (int32_t *)(p->map + off.labels);
    p->indices = (uint32_t *)(p->map + off.indices);
    p->skip_told = (_Atomic uint8_t *)(p->map + off.skip_told);
    p->fplan = (fetch_plan *)(p->map + off.fplan);
    p->ring = p->map + off.ring;
}

/* A memfd of len bytes (spawn mode), or -1 with e. */
static int map_fd_create(size_t len, errbuf *e)
{
    int fd = memfd_create("train-loader", MFD_CLOEXEC);
    if (fd < 0)
        return errf(e, "memfd_create for the loader's shared memory: %s", strerror(errno));
    if (ftruncate(fd, (off_t)len) != 0) {
        errf(e, "cannot size the loader's shared memory to %zu bytes: %s", len, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* Run cfg->spawn_argv with the mapping and the command socket on the fds
 * loader_serve expects. posix_spawn, not fork: the caller may have threads. */
static pid_t spawn_supervisor(const loader_config *cfg, int map_fd, int cmd_fd, errbuf *e)
{
    /* out of the way of the target numbers, so one dup2 cannot clobber the other's source */
    int hi_map = fcntl(map_fd, F_DUPFD_CLOEXEC, LOADER_SERVE_CACHE_FD + 1);
    int hi_cmd = fcntl(cmd_fd, F_DUPFD_CLOEXEC, LOADER_SERVE_CACHE_FD + 1);
    int hi_cache = cfg->spawn_cache_fd > 0
                       ? fcntl(cfg->spawn_cache_fd, F_DUPFD_CLOEXEC, LOADER_SERVE_CACHE_FD + 1)
                       : -1;
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&at);
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGCHLD);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (hi_map < 0 || hi_cmd < 0 || (cfg->spawn_cache_fd > 0 && hi_cache < 0)) {
        errf(e, "cannot pass the loader's memory to its supervisor: %s", strerror(errno));
    } else {
        posix_spawn_file_actions_adddup2(&fa, hi_map, LOADER_SERVE_MAP_FD);
        posix_spawn_file_actions_adddup2(&fa, hi_cmd, LOADER_SERVE_CMD_FD);
        if (hi_cache >= 0)
            posix_spawn_file_actions_adddup2(&fa, hi_cache, LOADER_SERVE_CACHE_FD);
        int rc = posix_spawn(&pid, cfg->spawn_argv[0], &fa, &at, cfg->spawn_argv, environ);
        if (rc != 0) {
            errf(e, "cannot start the loader supervisor %s: %s", cfg->spawn_argv[0], strerror(rc));
            pid = -1;
        }
    }
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (hi_map >= 0)
        close(hi_map);
    if (hi_cmd >= 0)
        close(hi_cmd);
    if (hi_cache >= 0)
        close(hi_cache);
    return pid;
}

loader *loader_create(const loader_config *cfg, errbuf *e)
{
    loader *p = loader_new(cfg, e);
    if (!p)
        return NULL;
    uint64_t avail = mem_available_bytes();
    if (avail && p->map_len > avail / 10 * 8) {
        char need[32], have[32];
        errf(e,
             "the loader ring needs %s (%d slots of %u samples) but only %s is available: "
             "lower --batch, --prefetch or --workers",
             fmt_bytes(need, sizeof need, p->map_len), p->nslots, cfg->batch,
             fmt_bytes(have, sizeof have, avail));
        free(p);
        return NULL;
    }
    int spawn = cfg->spawn_argv && cfg->workers > 0;
    int map_fd = spawn ? map_fd_create(p->map_len, e) : -1;
    if (spawn && map_fd < 0) {
        free(p);
        return NULL;
    }
    void *m = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE,
                   spawn ? MAP_SHARED : MAP_SHARED | MAP_ANONYMOUS, map_fd, 0);
    if (m == MAP_FAILED) {
        errf(e, "cannot map %zu bytes of shared memory for the loader: %s", p->map_len,
             strerror(errno));
        if (map_fd >= 0)
            close(map_fd);
        free(p);
        return NULL;
    }
    loader_place(p, m);
    p->release_mark = xcalloc((size_t)p->nslots, 1);
    for (int i = 0; i < cfg->workers; i++) {
        atomic_store(&p->workers[i].current, -1);
        p->workers[i].held = -1;
    }
    if (cfg->workers == 0) { /* no supervisor: the read-ahead is this process's child */
        if (cfg->fetch && cfg->fetch_unit && cfg->read_ahead > 0) {
            fflush(NULL);
            pid_t main_pid = getpid(), pid = fork();
            if (pid == 0) {
                die_with_parent(main_pid);
                loader_fetch_main(p);
            }
            if (pid > 0) { /* one that cannot start only costs its read-ahead */
                atomic_store(&p->ctl->fetch_pid, pid);
                p->fetch_child = pid;
            }
        }
        return p;
    }

    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        errf(e, "socketpair: %s", strerror(errno));
        if (map_fd >= 0)
            close(map_fd);
        loader_destroy(p);
        return NULL;
    }
    if (spawn) {
        pid_t pid = spawn_supervisor(cfg, map_fd, sv[1], e);
        close(map_fd);
        close(sv[1]);
        p->cmd_fd = sv[0];
        if (pid < 0) {
            loader_destroy(p);
            return NULL;
        }
        p->sup_pid = pid;
        return p;
    }
    fflush(NULL); /* no buffered output duplicated into the children */
    pid_t main_pid = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        errf(e, "cannot fork the loader supervisor: %s", strerror(errno));
        close(sv[0]);
        close(sv[1]);
        loader_destroy(p);
        return NULL;
    }
    if (pid == 0) {
        die_with_parent(main_pid);
        close(sv[0]);
        loader_supervisor_main(p, sv[1]);
    }
    close(sv[1]);
    p->sup_pid = pid;
    p->cmd_fd = sv[0];
    return p;
}

int loader_serve(const loader_config *cfg, errbuf *e)
{
    pid_t parent = getppid();
    loader *p = loader_new(cfg, e);
    if (!p)
        return -1;
    struct stat st;
    if (fstat(LOADER_SERVE_MAP_FD, &st) != 0 || (size_t)st.st_size != p->map_len) {
        errf(e,
             "internal: the loader's shared memory is %lld bytes, this configuration needs %zu "
             "(the supervisor must be started with the caller's options)",
             (long long)st.st_size, p->map_len);
        free(p);
        return -1;
    }
    void *m = mmap(NULL, p->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, LOADER_SERVE_MAP_FD, 0);
    if (m == MAP_FAILED) {
        errf(e, "cannot map the loader's shared memory: %s", strerror(errno));
        free(p);
        return -1;
    }
    close(LOADER_SERVE_MAP_FD);
    fcntl(LOADER_SERVE_CMD_FD, F_SETFD, FD_CLOEXEC);
    loader_place(p, m);
    p->watch_parent = parent;
    loader_supervisor_main(p, LOADER_SERVE_CMD_FD);
}

int loader_post(loader *p, const load_pass *pass)
{
    if (p->nplan == p->plan_cap) {
        p->plan_cap = p->plan_cap ? p->plan_cap * 2 : 16;
        p->plan = xrealloc(p->plan, (size_t)p->plan_cap * sizeof *p->plan);
        p->plan_first = xrealloc(p->plan_first, (size_t)p->plan_cap * sizeof *p->plan_first);
        p->plan_nb = xrealloc(p->plan_nb, (size_t)p->plan_cap * sizeof *p->plan_nb);
    }
    int id = p->nplan++;
    p->plan[id] = *pass;
    if (p->plan[id].batch == 0 || p->plan[id].batch > p->cfg.batch)
        p->plan[id].batch = p->cfg.batch;
    const dataset *ds = p->cfg.src[pass->src];
    p->plan_nb[id] = sampler_batches(ds->n, p->plan[id].batch, pass->drop_last);
    if (pass->max_batches && p->plan_nb[id] > pass->max_batches)
        p->plan_nb[id] = pass->max_batches;
    p->plan_first[id] = id ? p->plan_first[id - 1] + p->plan_nb[id - 1] : 0;
    loader_fetch_post(p, id);
    return id;
}

uint32_t load_pass_batches(const loader *p, int id)
{
    return id >= 0 && id < p->nplan ? p->plan_nb[id] : 0;
}

static uint64_t plan_end(const loader *p)
{
    return p->nplan ? p->plan_first[p->nplan - 1] + p->plan_nb[p->nplan - 1] : 0;
}

/* The plan index of the pass holding `seq`. */
static int pass_of(const loader *p, uint64_t seq)
{
    int lo = 0, hi = p->nplan - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (p->plan_first[mid] <= seq)
            lo = mid;
        else
            hi = mid - 1;
    }
    while (lo < p->nplan - 1 && p->plan_nb[lo] == 0 && p->plan_first[lo + 1] <= seq)
        lo++;
    return lo;
}

void loader_pass_perm(const loader *p, const load_pass *j, uint32_t *perm)
{
    const dataset *ds = p->cfg.src[j->src];
    if (j->order == LOAD_ORDER_SHARDS && ds->shard_first)
        sampler_shard_order(perm, ds->n, ds->shard_first, ds->nshards, p->cfg.seed, j->epoch,
                            (uint32_t)j->src, j->shuffle, j->shuffle_buffer);
    else
        sampler_permutation(perm, ds->n, p->cfg.seed, j->epoch, (uint32_t)j->src, j->shuffle);
}

/* Give plan passes entries in the shared table while entries are free: an
 * entry is free once every batch of its previous pass has been released. */
static void activate(loader *p)
{
    while (p->active_end < p->nplan) {
        int j = p->active_end;
        if (j >= LOADER_PASSQ) {
            int old = j - LOADER_PASSQ;
            if (p->released < p->plan_first[old] + p->plan_nb[old])
                return;
        }
        pass_entry *je = &p->passes[j % LOADER_PASSQ];
        je->pass = p->plan[j];
        je->first = p->plan_first[j];
        je->nbatches = p->plan_nb[j];
        je->n = p->cfg.src[p->plan[j].src]->n;
        je->id = j;
        loader_pass_perm(p, &p->plan[j], p->perms + (size_t)(j % LOADER_PASSQ) * p->max_n);
        p->posted_end = je->first + je->nbatches;
        p->active_end++;
    }
}

/* Arm the slots of newly claimable batches and let the workers at them. */
static void raise_limit(loader *p)
{
    uint64_t lim = p->released + (uint64_t)p->nslots;
    if (lim > p->posted_end)
        lim = p->posted_end;
    /* a pass that must wait for everything before it caps the limit at its
     * first batch until all earlier batches are back */
    for (int j = pass_of(p, p->released); j < p->active_end; j++)
        if (p->plan[j].after_previous && p->plan_first[j] > p->released && p->plan_first[j] < lim)
            lim = p->plan_first[j];
    uint64_t old = atomic_load(&p->ctl->limit);
    if (lim <= old)
        return;
    /* a slot is armed again only once its last batch is back */
    ASSERT(lim <= p->released + (uint64_t)p->nslots);
    for (uint64_t seq = old; seq < lim; seq++) {
        int j = pass_of(p, seq);
        slot_hdr *h = &p->slots[seq % (uint64_t)p->nslots];
        h->seq = seq;
        h->pass = (uint32_t)(j % LOADER_PASSQ);
        h->index = (uint32_t)(seq - p->plan_first[j]);
    }
    atomic_store(&p->ctl->limit, lim);
    atomic_fetch_add(&p->ctl->work_seq, 1);
    futex_wake_shared(&p->ctl->work_seq, INT_MAX);
}

static void *main_ctx(loader *p)
{
    if (!p->main_wctx_made) {
        p->main_wctx = p->cfg.worker_init ? p->cfg.worker_init(p->cfg.arg) : NULL;
        p->main_wctx_made = 1;
    }
    return p->main_wctx;
}

static void describe_seq(const loader *p, uint64_t seq, char *buf, size_t len)
{
    int j = pass_of(p, seq);
    const load_pass *pass = &p->plan[j];
    snprintf(buf, len, "%s batch %llu of epoch %u",
             pass->kind == LOAD_PASS_EVAL    ? "validation"
             : pass->kind == LOAD_PASS_BUILD ? "preload"
                                             : "training",
             (unsigned long long)(seq - p->plan_first[j]), pass->epoch + 1);
}

static void describe_death(const worker_rec *w, char *buf, size_t len)
{
    if (w->term_signal)
        snprintf(buf, len, "was killed by signal %d (%s)", w->term_signal,
                 strsignal(w->term_signal));
    else
        snprintf(buf, len, "exited with status %d", w->exit_status);
}

static int handle_deaths(loader *p, errbuf *e)
{
    p->deaths_seen = atomic_load(&p->ctl->deaths);
    for (int i = 0; i < p->cfg.workers; i++) {
        worker_rec *w = &p->workers[i];
        if (atomic_load(&w->state) != WORKER_DEAD)
            continue;
        char how[96], what[96] = "while idle";
        describe_death(w, how, sizeof how);
        if (w->held >= 0 && atomic_load(&p->slots[w->held % p->nslots].ready_tag) !=
                                loader_tag((uint64_t)w->held)) {
            char b[80];
            describe_seq(p, (uint64_t)w->held, b, sizeof b);
            snprintf(what, sizeof what, "while loading %s", b);
        }
        if (!p->cfg.respawn || p->stats.respawns >= MAX_RESPAWNS)
            return fail(e, LOADER_WORKER_LOST, "loader worker %d (pid %d) %s %s%s", i,
                        (int)atomic_load(&w->pid), how, what,
                        p->cfg.respawn ? " (too many respawns)"
                                       : "; --respawn replaces dead workers");
        fprintf(stderr, "train: loader worker %d (pid %d) %s %s; starting a new one\n", i,
                (int)atomic_load(&w->pid), how, what);
        /* mark it so that this death is not handled twice before the
         * supervisor has reset the record */
        atomic_store(&w->state, WORKER_STARTING);
        atomic_store(&w->current, -1);
        unsigned char cmd[2] = {'R', (unsigned char)i};
        if (send(p->cmd_fd, cmd, 2, MSG_NOSIGNAL) != 2)
            return fail(e, LOADER_WORKER_LOST, "loader supervisor (pid %d) is gone", p->sup_pid);
        p->stats.respawns++;
    }
    return LOADER_OK;
}

/* A batch claimed by a worker that died before publishing it. */
static int orphaned(loader *p, uint64_t seq)
{
    if (seq >= atomic_load(&p->ctl->next_claim))
        return 0;
    for (int i = 0; i < p->cfg.workers; i++)
        if (atomic_load(&p->workers[i].state) != WORKER_DEAD &&
            atomic_load(&p->workers[i].current) == (int64_t)seq)
            return 0;
    return 1;
}

static int holder_of(loader *p, uint64_t seq)
{
    for (int i = 0; i < p->cfg.workers; i++)
        if (atomic_load(&p->workers[i].current) == (int64_t)seq)
            return i;
    return -1;
}

static int wait_ready(loader *p, uint64_t seq, errbuf *e)
{
    slot_hdr *h = &p->slots[seq % (uint64_t)p->nslots];
    loader_ctl *c = p->ctl;
    double t0 = now_sec(), deadline = p->cfg.timeout > 0 ? t0 + p->cfg.timeout : 0;
    for (;;) {
        if (atomic_load(&h->ready_tag) == loader_tag(seq))
            return LOADER_OK;
        if (atomic_load(&c->interrupted))
            return fail(e, LOADER_INTERRUPTED, "interrupted");
        uint32_t ms = atomic_load(&c->main_seq);
        if (atomic_load(&h->ready_tag) == loader_tag(seq))
            return LOADER_OK;
        if (atomic_load(&c->deaths) != p->deaths_seen) {
            int rc = handle_deaths(p, e);
            if (rc != LOADER_OK)
                return rc;
        }
        if (p->stats.respawns > 0 && orphaned(p, seq) &&
            atomic_load(&h->ready_tag) != loader_tag(seq)) {
            loader_fill(p, seq, main_ctx(p)); /* its worker died holding it */
            p->stats.redone++;
            return LOADER_OK;
        }
        int st;
        if (waitpid(p->sup_pid, &st, WNOHANG) == p->sup_pid) {
            p->sup_pid = -1;
            return fail(e, LOADER_WORKER_LOST, "the loader supervisor died unexpectedly");
        }
        if (p->cfg.should_stop && p->cfg.should_stop(p->cfg.stop_ctx))
            return fail(e, LOADER_INTERRUPTED, "interrupted");
        double now = now_sec(), wait = p->cfg.should_stop ? 0.1 : 1.0;
        if (deadline) {
            if (now >= deadline) {
                char b[80];
                describe_seq(p, seq, b, sizeof b);
                int w = holder_of(p, seq);
                if (w >= 0)
                    return fail(e, LOADER_WORKER_LOST,
                                "timeout: %s not delivered within %g s (loader worker %d, pid %d, "
                                "is still loading it)",
                                b, p->cfg.timeout, w, (int)atomic_load(&p->workers[w].pid));
                return fail(e, LOADER_WORKER_LOST, "timeout: %s not delivered within %g s", b,
                            p->cfg.timeout);
            }
            if (deadline - now < wait)
                wait = deadline - now;
        }
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        futex_wait_shared(&c->main_seq, ms, &ts);
    }
}

int loader_next(loader *p, loader_batch *b, errbuf *e)
{
    if (p->consumed >= plan_end(p))
        return LOADER_END;
    if (atomic_load(&p->ctl->interrupted))
        return fail(e, LOADER_INTERRUPTED, "interrupted");
    activate(p);
    raise_limit(p);
    uint64_t seq = p->consumed;
    if (seq >= atomic_load(&p->ctl->limit))
        return fail(e, LOADER_WORKER_LOST,
                    "internal: every ring slot is held; release batches before asking for more");
    double t0 = now_sec();
    if (p->cfg.workers == 0) {
        atomic_store(&p->ctl->next_claim, seq); /* where the fetcher reads ahead from */
        loader_fill(p, seq, main_ctx(p));
    } else {
        int rc = wait_ready(p, seq, e);
        if (rc != LOADER_OK)
            return rc;
    }
    int s = (int)(seq % (uint64_t)p->nslots);
    slot_hdr *h = &p->slots[s];
    /* the slot holds this batch: armed for seq, and none of its ring's
     * batches taken and not yet given back is in it */
    ASSERT(h->seq == seq && p->consumed - p->released < (uint64_t)p->nslots);
    if (h->status != 0)
        return errf(e, "%s", h->msg), h->status;
    int j = pass_of(p, seq);
    memset(b, 0, sizeof *b);
    b->seq = seq;
    b->pass = j;
    b->index = (uint32_t)(seq - p->plan_first[j]);
    b->count = h->count;
    b->skipped = h->skipped;
    b->data = p->ring + (size_t)s * p->slot_stride;
    b->labels = p->labels + (size_t)s * p->cfg.batch;
    b->indices = p->indices + (size_t)s * p->cfg.batch;
    b->wait_s = now_sec() - t0;
    b->fill_t0 = h->fill_t0;
    b->fill_s = h->fill_s;
    b->read_s = h->read_s;
    b->decode_s = h->decode_s;
    b->io = h->io;
    b->filler = h->filler;
    b->slot = s;
    p->consumed++;
    return LOADER_OK;
}

void loader_release(loader *p, const loader_batch *b)
{
    /* a batch taken by loader_next and not given back yet, once */
    ASSERT(b->slot >= 0 && b->slot < p->nslots && !p->release_mark[b->slot]);
    ASSERT(b->seq >= p->released && b->seq < p->consumed);
    p->release_mark[b->slot] = 1;
    while (p->released < p->consumed && p->release_mark[p->released % (uint64_t)p->nslots]) {
        p->release_mark[p->released % (uint64_t)p->nslots] = 0;
        p->released++;
    }
    activate(p);
    raise_limit(p);
}

void loader_interrupt(loader *p)
{
    if (!p || !p->ctl)
        return;
    atomic_store(&p->ctl->interrupted, 1);
    atomic_fetch_add(&p->ctl->main_seq, 1);
    futex_wake_shared(&p->ctl->main_seq, INT_MAX);
}

void loader_disown_map(loader *p, void **base, size_t *len)
{
    p->map_disowned = 1;
    *base = p->map;
    *len = p->map_len;
}

void loader_destroy(loader *p)
{
    if (!p)
        return;
    if (p->sup_pid > 0) {
        atomic_store(&p->ctl->stop, 1);
        atomic_fetch_add(&p->ctl->work_seq, 1);
        futex_wake_shared(&p->ctl->work_seq, INT_MAX);
        unsigned char cmd[2] = {'Q', 0};
        if (send(p->cmd_fd, cmd, 2, MSG_NOSIGNAL) != 2) {
            /* the supervisor is gone already; waitpid below reaps it */
        }
    }
    if (p->cmd_fd >= 0)
        close(p->cmd_fd);
    if (p->sup_pid > 0)
        reap_bounded(p->sup_pid, LOADER_REAP_WAIT_S, "the loader supervisor");
    if (p->fetch_child > 0) {
        kill(p->fetch_child, SIGKILL); /* it holds nothing but a .part-PID, cleared later */
        reap_bounded(p->fetch_child, LOADER_REAP_WAIT_S, "the loader's fetcher");
    }
    if (p->main_wctx_made && p->cfg.worker_fini)
        p->cfg.worker_fini(p->main_wctx);
    if (p->map && !p->map_disowned)
        munmap(p->map, p->map_len);
    free(p->plan);
    free(p->plan_first);
    free(p->plan_nb);
    free(p->release_mark);
    free(p);
}

void *loader_ring(loader *p, size_t *bytes)
{
    if (bytes)
        *bytes = p->ring_len;
    return p->ring;
}

int32_t *loader_labels_area(loader *p, size_t *bytes)
{
    if (bytes)
        *bytes = sizeof(int32_t) * (size_t)p->nslots * p->cfg.batch;
    return p->labels;
}

size_t loader_ring_slots(const loader *p) { return (size_t)p->nslots; }

int loader_pids(const loader *p, int *pids, int max)
{
    int n = 0;
    if (p->sup_pid > 0 && n < max)
        pids[n++] = p->sup_pid;
    int fp = p->ctl ? atomic_load(&p->ctl->fetch_pid) : 0;
    if (fp > 0 && n < max)
        pids[n++] = fp;
    for (int i = 0; i < p->cfg.workers && n < max; i++) {
        int pid = atomic_load(&p->workers[i].pid);
        if (pid > 0 && atomic_load(&p->workers[i].state) != WORKER_DEAD)
            pids[n++] = pid;
    }
    return n;
}

void loader_get_stats(const loader *p, loader_stats *s) { *s = p->stats; }

void loader_fetch_io(const loader *p, loader_io *io)
{
    memset(io, 0, sizeof *io);
    if (!p || !p->ctl)
        return;
    io->bytes = atomic_load(&p->ctl->fetch_bytes);
    io->requests = atomic_load(&p->ctl->fetch_requests);
    io->retries = atomic_load(&p->ctl->fetch_retries);
    io->downloads = atomic_load(&p->ctl->fetch_downloads);
}
