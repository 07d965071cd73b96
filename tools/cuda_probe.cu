// tools/cuda_probe.cu — what the fake CUDA runtime (tests/fakecuda) cannot
// model, measured on a real card: tools/gpu-check runs it (docs/GPU.md).
//
//   cuda_probe [--quick]
//
// One line per finding, "probe: NAME: value  (what it means)":
//   launch       host time per empty-kernel launch, and the device time per
//                launch inside an event bracket around 200 back-to-back ones
//                (the bracket counts the gaps between kernels as busy)
//   bracket      one short kernel inside an event pair versus its own length:
//                what busy% from events would read for a launch-bound step
//   wake         how late cudaEventSynchronize returns after a kernel ends,
//                blocking-sync events versus spinning ones
//   cpu          CPU seconds the host burns waiting 200 ms for the device,
//                blocking-sync versus spinning
//   register     cudaHostRegister of two byte ranges that share a page
//   fork         a MAP_SHARED buffer registered in the parent and written by a
//                child forked before and after the registration: does the
//                device copy see the child's bytes?
// Exit 0 when every probe ran, 1 when a CUDA call failed, 2 without a device.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "cuda_probe: %s:%d: %s: %s\n", __FILE__, __LINE__, #x,                 \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + 1e-6 * (double)r.ru_utime.tv_usec +
           (double)r.ru_stime.tv_sec + 1e-6 * (double)r.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

__global__ void empty_kernel(void) {}

// spins for `ns` nanoseconds of the device's global timer
__global__ void spin_kernel(uint64_t ns)
{
    uint64_t t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

__global__ void sum_kernel(const unsigned char *p, size_t n, unsigned long long *out)
{
    unsigned long long s = 0;
    for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        s += p[i];
    atomicAdd(out, s);
}

static void probe_launch(int reps)
{
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    empty_kernel<<<1, 32>>>();
    CK(cudaDeviceSynchronize());
    double host[16], dev[16];
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a));
        double t0 = now_s();
        for (int i = 0; i < 200; i++)
            empty_kernel<<<1, 32>>>();
        double t1 = now_s();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        host[r] = (t1 - t0) / 200 * 1e6;
        dev[r] = ms * 1e3 / 200;
    }
    printf("probe: launch: %.2f us host per empty launch, %.2f us device per launch in a bracket"
           "  (the bracket's time per kernel is the launch rate, not the kernel)\n",
           median(host, reps), median(dev, reps));
    // one 5 us kernel inside a bracket, host idle between: the bracket's
    // length against the kernel's
    double br[16];
    for (int r = 0; r < reps; r++) {
        CK(cudaEventRecord(a));
        spin_kernel<<<1, 1>>>(5000);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        br[r] = ms * 1e3;
    }
    printf("probe: bracket: %.2f us for one 5.00 us kernel between two events\n", median(br, reps));
    CK(cudaEventDestroy(a));
    CK(cudaEventDestroy(b));
}

static void probe_wake(int reps)
{
    const uint64_t spin_ns = 2000000; // 2 ms
    double late[2][32], cpu[2];
    for (int mode = 0; mode < 2; mode++) {
        cudaEvent_t e;
        CK(cudaEventCreateWithFlags(&e, mode ? cudaEventBlockingSync : cudaEventDefault));
        for (int r = 0; r < reps; r++) {
            // the kernel's own length on the host clock: launch+sync of a
            // zero-length kernel first, so only the wake-up remains
            spin_kernel<<<1, 1>>>(0);
            CK(cudaEventRecord(e));
            double t0 = now_s();
            CK(cudaEventSynchronize(e));
            double base = now_s() - t0;
            spin_kernel<<<1, 1>>>(spin_ns);
            CK(cudaEventRecord(e));
            t0 = now_s();
            CK(cudaEventSynchronize(e));
            late[mode][r] = (now_s() - t0 - 1e-9 * (double)spin_ns - base) * 1e6;
        }
        double c0 = cpu_s(), w0 = now_s();
        spin_kernel<<<1, 1>>>(200000000); // 200 ms
        CK(cudaEventRecord(e));
        CK(cudaEventSynchronize(e));
        cpu[mode] = (cpu_s() - c0) / (now_s() - w0);
        CK(cudaEventDestroy(e));
    }
    printf("probe: wake: %.1f us late with blocking-sync events, %.1f us with default events"
           "  (median of %d, 2 ms kernels; the trace's device tracks can be shifted by this)\n",
           median(late[1], reps), median(late[0], reps), reps);
    printf("probe: cpu: %.2f of a core while waiting with blocking-sync events, %.2f with default "
           "events\n",
           cpu[1], cpu[0]);
}

static void probe_register(void)
{
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *buf = (unsigned char *)aligned_alloc((size_t)page, (size_t)page * 4);
    // [page/2, page + page/2) and [page + page/2 + 64, 3 pages): both touch page 1
    cudaError_t e1 = cudaHostRegister(buf + page / 2, (size_t)page, cudaHostRegisterDefault);
    cudaError_t e2 =
        cudaHostRegister(buf + page + page / 2 + 64, (size_t)page, cudaHostRegisterDefault);
    printf("probe: register: first range %s; second range sharing its last page %s"
           "  (page %ld bytes)\n",
           e1 == cudaSuccess ? "ok" : cudaGetErrorString(e1),
           e2 == cudaSuccess ? "ok" : cudaGetErrorString(e2), page);
    (void)cudaGetLastError();
    if (e1 == cudaSuccess)
        CK(cudaHostUnregister(buf + page / 2));
    if (e2 == cudaSuccess)
        CK(cudaHostUnregister(buf + page + page / 2 + 64));
    free(buf);
}

// child writes `val` over the buffer when told (a byte on `go`), then exits
static pid_t writer(unsigned char *p, size_t n, int go, unsigned char val)
{
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        if (read(go, &c, 1) != 1)
            _exit(3);
        memset(p, val, n);
        _exit(0);
    }
    return pid;
}

static void probe_fork(void)
{
    const size_t n = 8 << 20;
    unsigned long long *dsum, hsum;
    unsigned char *dbuf;
    CK(cudaMalloc(&dsum, sizeof *dsum));
    CK(cudaMalloc(&dbuf, n));
    const char *label[2] = {"forked before registering", "forked after registering"};
    for (int order = 0; order < 2; order++) {
        unsigned char *p = (unsigned char *)mmap(NULL, n, PROT_READ | PROT_WRITE,
                                                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        memset(p, 1, n);
        int fds[2];
        if (pipe(fds)) {
            perror("pipe");
            exit(1);
        }
        pid_t pid = -1;
        if (order == 0)
            pid = writer(p, n, fds[0], 3);
        CK(cudaHostRegister(p, n, cudaHostRegisterDefault));
        if (order == 1)
            pid = writer(p, n, fds[0], 3);
        int st = 0;
        if (write(fds[1], "x", 1) != 1 || waitpid(pid, &st, 0) != pid) {
            perror("fork probe");
            exit(1);
        }
        cudaStream_t s;
        CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        CK(cudaMemcpyAsync(dbuf, p, n, cudaMemcpyHostToDevice, s));
        CK(cudaMemsetAsync(dsum, 0, sizeof *dsum, s));
        sum_kernel<<<256, 256, 0, s>>>(dbuf, n, dsum);
        CK(cudaMemcpyAsync(&hsum, dsum, sizeof hsum, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        CK(cudaStreamDestroy(s));
        unsigned long long want = 3ull * n, host = 0;
        for (size_t i = 0; i < n; i += 4096)
            host += p[i];
        printf("probe: fork: %s: device sees %s, host sees %s (child exit %d)\n", label[order],
               hsum == want ? "the child's bytes"
               : hsum == n  ? "the old bytes"
                            : "a mix",
               host == 3ull * (n / 4096) ? "the child's bytes" : "the old bytes",
               WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        CK(cudaHostUnregister(p));
        munmap(p, n);
        close(fds[0]);
        close(fds[1]);
    }
    CK(cudaFree(dsum));
    CK(cudaFree(dbuf));
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    /* no driver at all reads "insufficient driver" from the runtime: say
     * what it is */
    void *libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!libcuda) {
        printf("probe: no CUDA device (no NVIDIA driver: libcuda.so.1 not found)\n");
        return 2;
    }
    dlclose(libcuda);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        printf("probe: no CUDA device (%s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return 2;
    }
    int rt = 0, drv = 0;
    CK(cudaRuntimeGetVersion(&rt));
    CK(cudaDriverGetVersion(&drv));
    cudaDeviceProp p;
    CK(cudaGetDeviceProperties(&p, 0));
    printf("probe: device 0: %s (cc %d.%d), runtime %d, driver %d\n", p.name, p.major, p.minor, rt,
           drv);
    CK(cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync));
    CK(cudaFree(0));
    probe_launch(quick ? 3 : 9);
    probe_wake(quick ? 5 : 21);
    probe_register();
    probe_fork();
    return 0;
}
