// cupti_probe — what CUPTI's activity API does on a real card (issue 27):
// whether it may be enabled in this container, whether records carry the
// host clock we give it (CLOCK_MONOTONIC through the timestamp callback),
// how far a kernel's record sits inside the host's launch..sync bracket,
// what it costs per launch, and whether a copy on one stream and a kernel
// on another show as overlapping.  Prints one "key value" line per fact.
//
//   nvcc -o build/tools/cupti_probe tools/cupti_probe.cu -lcupti
#include <cuda_runtime.h>
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CK(x)                                                                                      \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CU(x)                                                                                      \
    do {                                                                                           \
        CUptiResult r_ = (x);                                                                      \
        if (r_ != CUPTI_SUCCESS) {                                                                 \
            const char *s_ = "?";                                                                  \
            cuptiGetResultString(r_, &s_);                                                         \
            printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #x, s_);                             \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static uint64_t CUPTIAPI ts_cb(void) { return now_ns(); }

enum { MAXREC = 4096 };
struct rec {
    int kind; /* 0 kernel, 1 memcpy */
    uint64_t start, end, bytes;
    uint32_t stream;
};
static struct rec recs[MAXREC];
static int nrec;

static void CUPTIAPI buf_req(uint8_t **buf, size_t *size, size_t *maxrec)
{
    *size = 8 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *maxrec = 0;
}
static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *buf, size_t size, size_t valid)
{
    (void)c, (void)s, (void)size;
    CUpti_Activity *r = NULL;
    while (cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        if (nrec >= MAXREC)
            break;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            CUpti_ActivityKernel10 *k = (CUpti_ActivityKernel10 *)r;
            recs[nrec++] = (struct rec){0, k->start, k->end, 0, k->streamId};
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            CUpti_ActivityMemcpy6 *m = (CUpti_ActivityMemcpy6 *)r;
            recs[nrec++] = (struct rec){1, m->start, m->end, m->bytes, m->streamId};
        }
    }
    free(buf);
}

__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}
__global__ void empty(void) {}

static int cmp_i64(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return x < y ? -1 : x > y;
}
static long long median(long long *v, int n)
{
    qsort(v, n, sizeof *v, cmp_i64);
    return v[n / 2];
}

int main(void)
{
    uint32_t ver = 0;
    CU(cuptiGetVersion(&ver));
    printf("cupti_api_version %u\n", ver);
    int rtv = 0, drv = 0;
    CK(cudaRuntimeGetVersion(&rtv));
    CK(cudaDriverGetVersion(&drv));
    printf("cudart %d driver %d\n", rtv, drv);
    int khz = 0;
    CK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    long long cyc_per_us = khz / 1000; /* kHz -> cycles per µs */
    printf("sm_clock_khz %d\n", khz);
    CK(cudaFree(0));

    /* baseline: 2000 empty launches without CUPTI */
    cudaStream_t s1, s2;
    CK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    for (int i = 0; i < 100; i++)
        empty<<<1, 1, 0, s1>>>();
    CK(cudaStreamSynchronize(s1));
    uint64_t t = now_ns();
    for (int i = 0; i < 2000; i++)
        empty<<<1, 1, 0, s1>>>();
    uint64_t host_off = now_ns() - t;
    CK(cudaStreamSynchronize(s1));
    printf("launch_host_ns_without_cupti %.0f\n", host_off / 2000.0);

    CUptiResult rr = cuptiActivityRegisterTimestampCallback(ts_cb);
    const char *rs = "?";
    cuptiGetResultString(rr, &rs);
    printf("timestamp_callback %s\n", rs);
    CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    uint64_t te = now_ns();
    rr = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiGetResultString(rr, &rs);
    printf("enable_concurrent_kernel %s (%.1f ms)\n", rs, (now_ns() - te) / 1e6);
    if (rr != CUPTI_SUCCESS)
        return 1;
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY));

    t = now_ns();
    for (int i = 0; i < 2000; i++)
        empty<<<1, 1, 0, s1>>>();
    uint64_t host_on = now_ns() - t;
    CK(cudaStreamSynchronize(s1));
    printf("launch_host_ns_with_cupti %.0f\n", host_on / 2000.0);
    CU(cuptiActivityFlushAll(1));
    int nempty = 0;
    for (int i = 0; i < nrec; i++)
        nempty += recs[i].kind == 0;
    printf("empty_kernel_records %d of 2000 (+100 warm-up before enable: not recorded)\n", nempty);
    long long *gap = (long long *)calloc(MAXREC, sizeof(long long));
    {
        int n = 0;
        for (int i = 1; i < nrec && n < MAXREC; i++)
            if (recs[i].kind == 0 && recs[i - 1].kind == 0)
                gap[n++] = (long long)(recs[i].start - recs[i - 1].start);
        if (n)
            printf("empty_kernel_start_to_start_ns median %lld\n", median(gap, n));
    }
    nrec = 0;

    /* alignment: 30 x (host t0; 50 µs spin; sync; host t1) */
    uint64_t h0[30], h1[30];
    for (int i = 0; i < 30; i++) {
        h0[i] = now_ns();
        spin<<<1, 1, 0, s1>>>(50 * cyc_per_us);
        CK(cudaStreamSynchronize(s1));
        h1[i] = now_ns();
    }
    CU(cuptiActivityFlushAll(1));
    long long lead[30], tail[30], dur[30];
    int bad = 0, n = 0;
    for (int i = 0; i < nrec && n < 30; i++) {
        if (recs[i].kind != 0)
            continue;
        lead[n] = (long long)recs[i].start - (long long)h0[n];
        tail[n] = (long long)h1[n] - (long long)recs[i].end;
        dur[n] = (long long)(recs[i].end - recs[i].start);
        bad += lead[n] < 0 || tail[n] < 0;
        n++;
    }
    printf("spin_records %d; outside the host bracket %d\n", n, bad);
    if (n) {
        long long mn = lead[0], mt = tail[0];
        for (int i = 0; i < n; i++) {
            mn = lead[i] < mn ? lead[i] : mn;
            mt = tail[i] < mt ? tail[i] : mt;
        }
        printf("spin_dur_ns median %lld (asked 50000)\n", median(dur, n));
        printf("host_launch_to_kernel_start_ns median %lld min %lld\n", median(lead, n), mn);
        printf("kernel_end_to_host_sync_return_ns median %lld min %lld\n", median(tail, n), mt);
    }
    nrec = 0;

    /* overlap: 64 MB H2D on s2 (pinned) beside 2 ms of spin on s1 */
    size_t bytes = 64u << 20;
    void *hp, *dp, *hq;
    CK(cudaMallocHost(&hp, bytes));
    CK(cudaMalloc(&dp, bytes));
    hq = malloc(bytes);
    memset(hp, 1, bytes);
    memset(hq, 2, bytes);
    uint64_t a0 = now_ns();
    spin<<<1, 1, 0, s1>>>(2000 * cyc_per_us);
    CK(cudaMemcpyAsync(dp, hp, bytes, cudaMemcpyHostToDevice, s2));
    CK(cudaDeviceSynchronize());
    uint64_t a1 = now_ns();
    CK(cudaMemcpy(dp, hq, bytes, cudaMemcpyHostToDevice)); /* pageable */
    CU(cuptiActivityFlushAll(1));
    struct rec *k = NULL, *m = NULL, *pg = NULL;
    for (int i = 0; i < nrec; i++) {
        if (recs[i].kind == 0 && !k)
            k = &recs[i];
        else if (recs[i].kind == 1 && !m)
            m = &recs[i];
        else if (recs[i].kind == 1)
            pg = &recs[i];
    }
    if (k && m) {
        long long ov = (long long)((k->end < m->end ? k->end : m->end)) -
                       (long long)((k->start > m->start ? k->start : m->start));
        printf("overlap kernel %.3f ms copy %.3f ms (%.1f GB/s) overlapped %.3f ms; host span %.3f "
               "ms\n",
               (k->end - k->start) / 1e6, (m->end - m->start) / 1e6,
               m->bytes / ((m->end - m->start) / 1e9) / 1e9, ov / 1e6, (a1 - a0) / 1e6);
    } else
        printf("overlap: records missing (kernel %d copy %d)\n", !!k, !!m);
    if (pg)
        printf("pageable_copy_records: one of %.3f ms (%.1f GB/s)\n", (pg->end - pg->start) / 1e6,
               pg->bytes / ((pg->end - pg->start) / 1e9) / 1e9);
    int cnt = 0;
    for (int i = 0; i < nrec; i++)
        cnt += recs[i].kind == 1;
    printf("memcpy_records %d\n", cnt);
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(NULL, 0, &dropped);
    printf("dropped %zu\n", dropped);
    free(gap);
    free(hq);
    CK(cudaFreeHost(hp));
    CK(cudaFree(dp));
    printf("OK\n");
    return 0;
}
