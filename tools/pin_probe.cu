/* pin_probe.cu — page-locking facts the fake (tests/fakecuda/runtime/memory.c) and
 * the --pin guard (app/device.c) rely on, measured on a card: whether
 * cudaHostRegister and cudaMallocHost honour RLIMIT_MEMLOCK, as root and as
 * uid 65534 (a child each, the limit set to 64 KB; VmLck/VmPin after);
 * which error overlapping byte ranges get; whether the bytes of a page
 * outside a registered range count as registered
 * (cudaPointerGetAttributes); what unregistering a non-base address says.
 * Results on an H100 (CUDA 13.0, driver 580): docs/GPU.md. Run as root. */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static void vmlck(const char *when)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmLck", 5) || !strncmp(line, "VmPin", 5))
            printf("  %s %s", when, line);
    if (f)
        fclose(f);
}

static const char *memtype(const void *p)
{
    cudaPointerAttributes a;
    cudaError_t st = cudaPointerGetAttributes(&a, p);
    if (st != cudaSuccess)
        return cudaGetErrorName(st);
    switch (a.type) {
    case cudaMemoryTypeUnregistered: return "unregistered";
    case cudaMemoryTypeHost: return "host (registered)";
    case cudaMemoryTypeDevice: return "device";
    case cudaMemoryTypeManaged: return "managed";
    }
    return "?";
}

static void limit_test(const char *who, size_t bytes)
{
    struct rlimit rl = {65536, 65536};
    int rc = setrlimit(RLIMIT_MEMLOCK, &rl);
    getrlimit(RLIMIT_MEMLOCK, &rl);
    printf("%s (uid %d): setrlimit MEMLOCK 64K rc %d, now cur %llu\n", who, (int)getuid(), rc,
           (unsigned long long)rl.rlim_cur);
    void *p = NULL;
    if (posix_memalign(&p, 4096, bytes) != 0)
        return;
    memset(p, 1, bytes);
    cudaError_t st = cudaHostRegister(p, bytes, cudaHostRegisterDefault);
    printf("  cudaHostRegister %zu MB: %s\n", bytes >> 20, cudaGetErrorName(st));
    vmlck("after register");
    if (st == cudaSuccess)
        printf("  attributes: %s\n", memtype(p));
    void *h = NULL;
    st = cudaMallocHost(&h, bytes);
    printf("  cudaMallocHost %zu MB: %s\n", bytes >> 20, cudaGetErrorName(st));
    vmlck("after mallochost");
    void *m = malloc(1 << 20);
    int ml = mlock(m, 1 << 20);
    printf("  mlock 1 MB: %d\n", ml);
}

int main(void)
{
    size_t pg = 4096;
    printf("uid %d\n", (int)getuid());
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setgid(65534) != 0 || setuid(65534) != 0)
            printf("nobody: setuid failed\n");
        limit_test("nobody", 256u << 20);
        fflush(stdout);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    pid = fork();
    if (pid == 0) {
        limit_test("root", 256u << 20);
        fflush(stdout);
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    char *b = NULL;
    if (posix_memalign((void **)&b, pg, 8 * pg) != 0)
        return 1;
    cudaError_t st = cudaHostRegister(b + 100, 2 * pg, 0);
    printf("register [100, 100+2pg): %s\n", cudaGetErrorName(st));
    printf("  byte 0 of the first page (outside): %s\n", memtype(b));
    printf("  byte 99 (outside): %s\n", memtype(b + 99));
    printf("  byte 100 (inside): %s\n", memtype(b + 100));
    printf("  byte 100+2pg (outside, same page): %s\n", memtype(b + 100 + 2 * pg));
    printf("  byte 3pg+1 (next page): %s\n", memtype(b + 3 * pg + 1));
    st = cudaHostRegister(b + 100 + 2 * pg, pg, 0);
    printf("register [100+2pg, +pg) sharing the page, no byte overlap: %s\n", cudaGetErrorName(st));
    cudaGetLastError();
    st = cudaHostRegister(b + 100 + pg, pg, 0);
    printf("register overlapping bytes: %s\n", cudaGetErrorName(st));
    cudaGetLastError();
    st = cudaHostRegister(b + 100, 2 * pg, 0);
    printf("register the same range again: %s\n", cudaGetErrorName(st));
    cudaGetLastError();
    st = cudaHostUnregister(b + 101);
    printf("unregister inside, not the base: %s\n", cudaGetErrorName(st));
    cudaGetLastError();
    int v = 0;
    cudaRuntimeGetVersion(&v);
    int d = 0;
    cudaDriverGetVersion(&d);
    printf("runtime %d driver %d\n", v, d);
    return 0;
}
