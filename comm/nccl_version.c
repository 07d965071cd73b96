/* nccl_version.c — the NCCL this process loaded, beside the nccl.h it was
 * built with (dist.h's dist_nccl_version). A libnccl.so from a pip wheel
 * found first may be older than the toolkit's header. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "comm/dist.h"

#if defined(TRAIN_MPI) && defined(TRAIN_CUDA)
#include <nccl.h>

const char *dist_nccl_version(char *buf, size_t len, char *warn, size_t wlen)
{
    int v = 0;
    if (warn && wlen)
        warn[0] = 0;
    if (ncclGetVersion(&v) != ncclSuccess || v <= 0) {
        snprintf(buf, len, "NCCL not loaded");
        return buf;
    }
    /* since 2.9: major * 10000 + minor * 100 + patch (before, * 1000) */
    int major = v >= 10000 ? v / 10000 : v / 1000;
    int minor = v >= 10000 ? v % 10000 / 100 : v % 1000 / 100;
    int patch = v % 100;
    snprintf(buf, len, "NCCL %d.%d.%d", major, minor, patch);
    if (warn && (major < NCCL_MAJOR || (major == NCCL_MAJOR && minor < NCCL_MINOR)))
        snprintf(warn, wlen,
                 "NCCL %d.%d.%d is loaded, older than the %d.%d headers this train was built with",
                 major, minor, patch, NCCL_MAJOR, NCCL_MINOR);
    return buf;
}
#else
const char *dist_nccl_version(char *buf, size_t len, char *warn, size_t wlen)
{
    (void)buf, (void)len, (void)warn, (void)wlen;
    return NULL;
}
#endif
