/* timeline.c — what the fake device did, kept for the fake NVML
 * (tests/fakecuda/nvml/fake_nvml.c, libfakenvml.so) to read back as utilisation
 * samples, GPM counters and this process's device memory.
 *
 * The clock (clock.c) is virtual: by default it moves only with launch
 * costs and host waits, never with the host's own work, so it has no fixed
 * relation to the wall clock the program cuts its epochs by. NVML's figures
 * are about wall-clock periods, so the fake NVML needs the two to be one
 * clock: with real-time mode on (fake_set_realtime, or FAKECUDA_REALTIME=1
 * in the environment at start-up and after every fake_reset), virtual
 * time 0 is the moment the clock was (re)started, and
 *   - before every launch and host wait the host clock catches up with the
 *     wall clock (CLOCK_MONOTONIC since that moment): the host's own work
 *     between calls — the loader, the CPU side of a step — now takes the
 *     time it really took, during which the device runs nothing new;
 *   - a host wait or a launch that moves the host clock past the wall
 *     clock sleeps until the wall clock gets there (a 20 ms kernel really
 *     holds a synchronising host for 20 ms).
 * So virtual ms v is CLOCK_MONOTONIC base + v, and CLOCK_REALTIME base + v
 * on NVML's clock (fake_timeline_realtime_base_us: both bases are read
 * together). The device's engines still run as the cost model says.
 *
 * The compute engine's busy intervals are recorded here (merged when they
 * touch; they arrive in start order, engines run one operation at a time).
 * The fake NVML asks from its own thread (the program's sampling thread):
 * the intervals are guarded by a mutex; fake_timeline_now_ms reads the
 * wall clock only. An interval enqueued later never starts before the
 * host clock at its enqueue, so what lies before "now" is final up to the
 * few microseconds between a host catch-up and the enqueue it precedes.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/fakecuda/runtime/fake.h"
#include "tests/fakecuda/runtime/internal.h"

typedef struct span {
    double t0, t1;
} span;

static struct {
    pthread_mutex_t mu;
    span *busy; /* the compute engine's, merged, in order */
    size_t n, cap;
    int realtime, loaded;
    struct timespec base_mono; /* virtual 0 */
    long long base_real_us;    /* ... on CLOCK_REALTIME */
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void take_base(void)
{
    struct timespec r;
    clock_gettime(CLOCK_MONOTONIC, &T.base_mono);
    clock_gettime(CLOCK_REALTIME, &r);
    T.base_real_us = (long long)r.tv_sec * 1000000LL + r.tv_nsec / 1000;
}

static void load(void)
{
    if (T.loaded)
        return;
    T.loaded = 1;
    const char *v = getenv("FAKECUDA_REALTIME");
    T.realtime = v && !strcmp(v, "1");
    take_base();
}

void fake_set_realtime(int on)
{
    load();
    T.realtime = on;
}

int fake_timeline_realtime(void) { return (load(), T.realtime); }

double fake_timeline_now_ms(void)
{
    load();
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - T.base_mono.tv_sec) * 1e3 +
           (double)(now.tv_nsec - T.base_mono.tv_nsec) * 1e-6;
}

long long fake_timeline_realtime_base_us(void) { return (load(), T.base_real_us); }

double fk_realtime_catch_up(double host_ms)
{
    if (!fake_timeline_realtime())
        return host_ms;
    double now = fake_timeline_now_ms();
    return now > host_ms ? now : host_ms;
}

void fk_realtime_sleep_until(double host_ms)
{
    if (!fake_timeline_realtime())
        return;
    double ahead = host_ms - fake_timeline_now_ms();
    if (ahead <= 0.01)
        return;
    struct timespec t = {(time_t)(ahead / 1e3), (long)(((long long)(ahead * 1e6)) % 1000000000LL)};
    while (nanosleep(&t, &t) != 0)
        ;
}

void fk_timeline_note(fk_engine eng, double t0, double t1)
{
    if (eng != FK_ENGINE_COMPUTE || !(t1 > t0))
        return;
    pthread_mutex_lock(&T.mu);
    if (T.n && t0 <= T.busy[T.n - 1].t1) {
        if (t1 > T.busy[T.n - 1].t1)
            T.busy[T.n - 1].t1 = t1;
    } else {
        if (T.n == T.cap) {
            T.cap = T.cap ? 2 * T.cap : 256;
            T.busy = realloc(T.busy, T.cap * sizeof *T.busy);
            if (!T.busy)
                abort();
        }
        T.busy[T.n++] = (span){t0, t1};
    }
    pthread_mutex_unlock(&T.mu);
}

double fake_timeline_busy_ms(double v0, double v1)
{
    double sum = 0;
    pthread_mutex_lock(&T.mu);
    for (size_t i = T.n; i-- > 0;) {
        if (T.busy[i].t1 <= v0)
            break;
        double a = T.busy[i].t0 > v0 ? T.busy[i].t0 : v0;
        double b = T.busy[i].t1 < v1 ? T.busy[i].t1 : v1;
        if (b > a)
            sum += b - a;
    }
    pthread_mutex_unlock(&T.mu);
    return sum;
}

/* read from the sampling thread without a lock: one word the main
 * thread's cudaMalloc/cudaFree write, a torn or stale read at worst one
 * sample late */
size_t fake_timeline_device_bytes(void) { return fk_mem_used(); }

void fk_timeline_reset(void)
{
    pthread_mutex_lock(&T.mu);
    free(T.busy);
    T.busy = NULL;
    T.n = T.cap = 0;
    T.loaded = 0;
    pthread_mutex_unlock(&T.mu);
    load();
}
