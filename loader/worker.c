/* worker.c — the loader's other processes: the supervisor and the
 * workers it forks, and loader_fill, the per-batch work every filler shares.
 *
 * The supervisor is single-threaded and does nothing but fork workers,
 * reap them and report their deaths; it is forked from the main process
 * before any thread or CUDA context exists, so a replacement worker forked
 * later (--respawn) starts from the same clean state as the first ones.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loader/sampler.h"
#include "loader/shared.h"

/* ---------------------------------------------------------------- filling */

static int load_one(loader *p, void *wctx, const pass_entry *je, uint32_t idx, uint32_t key,
                    uint8_t *out, errbuf *e)
{
    rng r = rng_keyed(p->cfg.seed, RNG_AUGMENT, je->pass.epoch, key);
    return p->cfg.load(wctx, je->pass.src, idx, je->pass.kind, &r, out, e);
}

/* --skip-bad: name each bad sample once per run, whichever process meets
 * it first and however many epochs meet it again. One write(2) per line,
 * so lines from several workers do not interleave. */
static void tell_skipped(loader *p, int src, uint32_t idx, const errbuf *e)
{
    if (atomic_exchange(&p->skip_told[(size_t)src * p->max_n + idx], 1))
        return;
    const dataset *ds = p->cfg.src[src];
    char line[3 * ERR_MAX], where[2 * ERR_MAX];
    int n = snprintf(line, sizeof line, "train: skipped %s\n",
                     dataset_row_message(ds, idx, e->msg, where, sizeof where));
    if (n > (int)sizeof line - 1)
        n = (int)sizeof line - 1, line[n - 1] = '\n';
    if (write(2, line, (size_t)n) < 0) {
        /* nowhere left to say it */
    }
}

void loader_fill(loader *p, uint64_t seq, void *wctx)
{
    double t0 = now_sec();
    int s = (int)(seq % (uint64_t)p->nslots);
    slot_hdr *h = &p->slots[s];
    const pass_entry *je = &p->passes[h->pass];
    const dataset *ds = p->cfg.src[je->pass.src];
    const uint32_t *perm = p->perms + (size_t)h->pass * p->max_n;
    uint32_t B = je->pass.batch;
    uint32_t first;
    uint32_t count = sampler_slice(sampler_batch_size(je->n, B, h->index), je->pass.rank,
                                   je->pass.ranks, &first);
    int32_t *labels = p->labels + (size_t)s * p->cfg.batch;
    uint32_t *indices = p->indices + (size_t)s * p->cfg.batch;
    uint8_t *data = p->ring + (size_t)s * p->slot_stride;
    int build = je->pass.kind == LOAD_PASS_BUILD;

    double read0 = 0, decode0 = 0, read1 = 0, decode1 = 0;
    if (p->cfg.phase_times)
        p->cfg.phase_times(wctx, &read0, &decode0);
    loader_io io0 = {0}, io1 = {0};
    if (p->cfg.io_counts)
        p->cfg.io_counts(wctx, &io0);
    h->fill_t0 = t0;
    h->filler = (int32_t)getpid();
    h->status = 0;
    h->skipped = 0;
    h->msg[0] = '\0';
    for (uint32_t i = 0; i < count; i++) {
        uint32_t idx = perm[(size_t)h->index * B + first + i];
        uint8_t *out = build ? NULL : data + (size_t)i * p->cfg.sample_bytes;
        errbuf e;
        /* --skip-bad remembers failures (skip_told, shared by every
         * process, kept across epochs): a sample that failed once is not
         * read again, so a run of k bad rows costs k reads, not k^2/2 */
        const _Atomic uint8_t *known_bad = p->skip_told + (size_t)je->pass.src * p->max_n;
        int skipping = p->cfg.skip_bad && !build;
        int rc = skipping && atomic_load(&known_bad[idx])
                     ? errf(&e, "%s", "every sample failed to load")
                     : load_one(p, wctx, je, idx, idx, out, &e);
        /* out of memory is no verdict on the sample: never skipped */
        if (rc != 0 && rc != LOADER_LOAD_NO_MEMORY && skipping) {
            tell_skipped(p, je->pass.src, idx, &e);
            /* the next good sample in index order, augmented with the
             * original sample's stream: depends on the data only */
            uint32_t tries = 1, alt = idx;
            while (rc != 0 && rc != LOADER_LOAD_NO_MEMORY && tries < je->n) {
                alt = (alt + 1) % je->n;
                tries++;
                if (atomic_load(&known_bad[alt]))
                    continue;
                errbuf e2;
                rc = load_one(p, wctx, je, alt, idx, out, &e2);
                if (rc == LOADER_LOAD_NO_MEMORY)
                    e = e2;
                else if (rc != 0)
                    tell_skipped(p, je->pass.src, alt, &e2);
            }
            if (rc == 0 || rc == LOADER_LOAD_NO_MEMORY) {
                h->skipped += rc == 0;
                idx = alt;
            }
        }
        if (rc != 0) {
            char where[2 * ERR_MAX];
            snprintf(h->msg, sizeof h->msg, "%s",
                     dataset_row_message(ds, idx, e.msg, where, sizeof where));
            h->status = rc == LOADER_LOAD_NO_MEMORY ? LOADER_NO_MEMORY : LOADER_BAD_SAMPLE;
            count = i;
            break;
        }
        labels[i] = ds->rows[idx].label;
        indices[i] = idx;
    }
    h->count = count;
    if (p->cfg.phase_times)
        p->cfg.phase_times(wctx, &read1, &decode1);
    h->read_s = read1 - read0;
    h->decode_s = decode1 - decode0;
    if (p->cfg.io_counts)
        p->cfg.io_counts(wctx, &io1);
    h->io = (loader_io){.bytes = io1.bytes - io0.bytes,
                        .requests = io1.requests - io0.requests,
                        .retries = io1.retries - io0.retries,
                        .hits = io1.hits - io0.hits,
                        .downloads = io1.downloads - io0.downloads,
                        .wait_s = io1.wait_s - io0.wait_s};
    h->fill_s = now_sec() - t0;
    atomic_store(&h->ready_tag, loader_tag(seq));
    atomic_fetch_add(&p->ctl->main_seq, 1);
    futex_wake_shared(&p->ctl->main_seq, INT_MAX); /* main, and the fetcher */
}

/* ---------------------------------------------------------------- workers */

void die_with_parent(pid_t parent)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) /* the parent died before prctl took effect */
        _exit(0);
}

static void worker_main(loader *p, int i) __attribute__((noreturn));
static void worker_main(loader *p, int i)
{
    loader_ctl *c = p->ctl;
    worker_rec *me = &p->workers[i];
    void *wctx = p->cfg.worker_init ? p->cfg.worker_init(p->cfg.arg) : NULL;
    atomic_store(&me->state, WORKER_ALIVE);
    for (;;) {
        uint32_t ws = atomic_load(&c->work_seq);
        if (atomic_load(&c->stop))
            break;
        uint64_t seq = atomic_load(&c->next_claim);
        if (seq >= atomic_load(&c->limit)) {
            futex_wait_shared(&c->work_seq, ws, NULL);
            continue;
        }
        /* announce the intent before claiming: a death between the claim
         * and any later store would otherwise lose the batch silently */
        atomic_store(&me->current, (int64_t)seq);
        if (!atomic_compare_exchange_strong(&c->next_claim, &seq, seq + 1))
            continue;
        loader_fill(p, seq, wctx);
        atomic_store(&me->current, -1);
    }
    if (p->cfg.worker_fini)
        p->cfg.worker_fini(wctx);
    _exit(0);
}

/* ---------------------------------------------------------------- supervisor */

/* fork a child of the supervisor: in the child (0 returned) it dies with
 * the supervisor, holds none of its descriptors and has the signal mask
 * the supervisor started with */
static pid_t fork_child(sigset_t *oldmask, int cmd_fd, int sfd)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        die_with_parent(parent);
        close(cmd_fd);
        close(sfd);
        sigprocmask(SIG_SETMASK, oldmask, NULL);
    }
    return pid;
}

static pid_t spawn_worker(loader *p, int i, sigset_t *oldmask, int cmd_fd, int sfd)
{
    worker_rec *w = &p->workers[i];
    atomic_store(&w->current, -1);
    atomic_store(&w->state, WORKER_STARTING);
    w->exit_status = -1;
    w->term_signal = 0;
    w->held = -1;
    pid_t pid = fork_child(oldmask, cmd_fd, sfd);
    if (pid == 0)
        worker_main(p, i);
    if (pid > 0)
        atomic_store(&w->pid, pid);
    return pid;
}

/* The read-ahead process (fetch.c), when there is one to run. */
static void spawn_fetcher(loader *p, sigset_t *oldmask, int cmd_fd, int sfd)
{
    if (!p->cfg.fetch || !p->cfg.fetch_unit || p->cfg.read_ahead <= 0)
        return;
    pid_t pid = fork_child(oldmask, cmd_fd, sfd);
    if (pid == 0)
        loader_fetch_main(p);
    if (pid > 0) /* a fetcher that cannot start only costs its read-ahead */
        atomic_store(&p->ctl->fetch_pid, pid);
}

static void record_death(loader *p, pid_t pid, int status)
{
    for (int i = 0; i < p->cfg.workers; i++) {
        worker_rec *w = &p->workers[i];
        if (atomic_load(&w->pid) != pid || atomic_load(&w->state) == WORKER_DEAD)
            continue;
        w->exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        w->term_signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
        w->held = atomic_load(&w->current);
        atomic_store(&w->state, WORKER_DEAD);
        atomic_fetch_add(&p->ctl->deaths, 1);
        atomic_fetch_add(&p->ctl->main_seq, 1);
        futex_wake_shared(&p->ctl->main_seq, 1);
        return;
    }
}

static void reap(loader *p)
{
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        record_death(p, pid, status);
}

static void shut_down(loader *p) __attribute__((noreturn));
static void shut_down(loader *p)
{
    /* workers and the fetcher hold nothing but shared memory and open
     * files (a fetcher's half download is a .part-PID the next eviction
     * clears): kill them */
    pid_t fp = atomic_load(&p->ctl->fetch_pid);
    if (fp > 0)
        kill(fp, SIGKILL);
    for (int i = 0; i < p->cfg.workers; i++) {
        pid_t pid = atomic_load(&p->workers[i].pid);
        if (pid > 0 && atomic_load(&p->workers[i].state) != WORKER_DEAD)
            kill(pid, SIGKILL);
    }
    /* SIGKILLed, they go at once; a worker in an uninterruptible sleep
     * must not hold the supervisor (and the caller's close) forever */
    double deadline = now_sec() + LOADER_REAP_WAIT_S;
    while (now_sec() < deadline) {
        pid_t r = waitpid(-1, NULL, WNOHANG);
        if (r < 0 && errno != EINTR)
            break; /* no child left */
        if (r <= 0) {
            struct timespec ts = {0, 5000000};
            nanosleep(&ts, NULL);
        }
    }
    _exit(0);
}

void loader_supervisor_main(loader *p, int cmd_fd)
{
    signal(SIGINT, SIG_IGN); /* the main process decides; workers inherit this */
    signal(SIGTERM, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC);
    if (sfd < 0)
        _exit(1);
    for (int i = 0; i < p->cfg.workers; i++)
        if (spawn_worker(p, i, &old, cmd_fd, sfd) < 0)
            shut_down(p);
    spawn_fetcher(p, &old, cmd_fd, sfd);
    struct pollfd fds[2] = {{.fd = cmd_fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    for (;;) {
        int n = poll(fds, 2, p->watch_parent ? 500 : -1);
        if (p->watch_parent && getppid() != p->watch_parent)
            shut_down(p); /* the caller died without closing its end */
        if (n < 0) {
            if (errno == EINTR)
                continue;
            shut_down(p);
        }
        if (fds[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof si) < 0 && errno != EINTR && errno != EAGAIN)
                shut_down(p);
            reap(p); /* several deaths may share one SIGCHLD */
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            unsigned char cmd[2];
            ssize_t got = read(cmd_fd, cmd, 2);
            if (got == 2 && cmd[0] == 'R' && cmd[1] < p->cfg.workers) {
                reap(p);
                if (spawn_worker(p, cmd[1], &old, cmd_fd, sfd) < 0)
                    shut_down(p);
            } else {
                shut_down(p); /* 'Q', EOF (main gone) or garbage */
            }
        }
    }
}
