/* threads.c — the CPU backend's worker threads.
 *
 * A fixed set of threads (the caller counts as thread 0) that run the tasks
 * of one operation at a time: tasks are claimed from an atomic counter, the
 * caller works too, and returns when every worker has finished the job.
 * Workers spin briefly after a job (the next operation of a training step
 * follows within microseconds), then sleep on a condition variable, so an
 * idle set of threads costs nothing while the loader waits for data.
 *
 * A job may carry a cancellation flag (a signal handler's): every thread
 * looks at it before claiming its next task and stops claiming once it is
 * set, so Ctrl-C acts within one task, not one operation.
 *
 * Threads start lazily, on the first job with more than one task: the
 * loader forks its workers before training starts, and a fork should not
 * copy a process with threads half-way through something.
 *
 * Deliberately left out: work stealing, priorities, nested jobs.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/assert.h"
#include "common/util.h"
#include "cpu/internal.h"

/* pause-instruction iterations a worker or the caller spins before sleeping
 * (a pause is ~40-140 cycles: this is tens of microseconds) */
#define SPIN_ROUNDS 4000

struct cpu_threads {
    int threads;
    int started;
    pthread_t *tids;
    pthread_mutex_t mu;
    pthread_cond_t wake, done;
    /* the current job; written by the caller before gen is bumped */
    cpu_task_fn fn;
    void *arg;
    int ntasks;
    volatile sig_atomic_t *cancel; /* NULL: never */
    atomic_int next;               /* next unclaimed task */
    atomic_int busy;               /* workers still inside the current job */
    atomic_ulong gen;              /* job generation */
    atomic_int stop;
};

typedef struct worker_arg {
    cpu_threads *p;
    int id;
} worker_arg;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int cancelled(volatile sig_atomic_t *cancel) { return cancel && *cancel; }

static void run_tasks(cpu_threads *p, int thread)
{
    int i;
    while (!cancelled(p->cancel) && (i = atomic_fetch_add(&p->next, 1)) < p->ntasks)
        p->fn(p->arg, i, thread);
}

static void *worker_main(void *argp)
{
    worker_arg wa = *(worker_arg *)argp;
    free(argp);
    cpu_threads *p = wa.p;
    unsigned long seen = 0;
    for (;;) {
        unsigned long g = atomic_load(&p->gen);
        for (int s = 0; g == seen && s < SPIN_ROUNDS && !atomic_load(&p->stop); s++) {
            cpu_relax();
            g = atomic_load(&p->gen);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            while ((g = atomic_load(&p->gen)) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        run_tasks(p, wa.id);
        if (atomic_fetch_sub(&p->busy, 1) == 1) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

cpu_threads *cpu_threads_create(int threads)
{
    cpu_threads *p = xcalloc(1, sizeof *p);
    p->threads = threads < 1 ? 1 : threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    atomic_init(&p->busy, 0);
    atomic_init(&p->gen, 0);
    atomic_init(&p->stop, 0);
    return p;
}

static void threads_start(cpu_threads *p)
{
    p->tids = xcalloc((size_t)p->threads, sizeof *p->tids);
    for (int i = 1; i < p->threads; i++) {
        worker_arg *wa = xmalloc(sizeof *wa);
        wa->p = p;
        wa->id = i;
        int rc = pthread_create(&p->tids[i], NULL, worker_main, wa);
        if (rc != 0) {
            fprintf(stderr,
                    "train: cannot start compute thread %d of %d (pthread_create error %d)\n", i,
                    p->threads, rc);
            exit(1);
        }
    }
    p->started = 1;
}

void cpu_threads_run(cpu_threads *p, int ntasks, cpu_task_fn fn, void *arg,
                     volatile sig_atomic_t *cancel)
{
    if (ntasks <= 0)
        return;
    /* one run at a time: the tasks, p->fn and p->arg belong to it (a task
     * that starts another run, or two threads running at once, would
     * deadlock or mix the jobs) */
    ASSERT(atomic_load(&p->busy) == 0);
    if (ntasks == 1 || p->threads == 1) {
        for (int i = 0; i < ntasks && !cancelled(cancel); i++)
            fn(arg, i, 0);
        return;
    }
    if (!p->started)
        threads_start(p);
    p->fn = fn;
    p->arg = arg;
    p->ntasks = ntasks;
    p->cancel = cancel;
    atomic_store(&p->next, 0);
    atomic_store(&p->busy, p->threads - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_tasks(p, 0);

    for (int s = 0; atomic_load(&p->busy) != 0 && s < SPIN_ROUNDS; s++)
        cpu_relax();
    if (atomic_load(&p->busy) != 0) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->busy) != 0)
            pthread_cond_wait(&p->done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
}

void cpu_threads_free(cpu_threads *p)
{
    if (!p)
        return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->stop, 1);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
        for (int i = 1; i < p->threads; i++)
            pthread_join(p->tids[i], NULL);
    }
    free(p->tids);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->wake);
    pthread_cond_destroy(&p->done);
    free(p);
}
