/* versions.c — the cuDNN and cuBLAS this process actually loaded, beside
 * the headers it was built with. The libraries a machine has may be older
 * than the toolkit's headers (PyTorch's pip wheels, found first on a
 * run path or LD_LIBRARY_PATH): a loaded major.minor older than the
 * headers' is worth a warning, since an entry point or behaviour the code
 * was written against may be missing. cuDNN is linked (cudnnGetVersion
 * answers without a device); cuBLAS is opened by cuda/cublas_dl.c
 * (cublasGetProperty, no handle needed), which this opens when it is not
 * yet.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <string.h>

#include <cublas_v2.h>
#include <cudnn.h>

#include "cuda/gpu.h"

int gpu_version_older(int major, int minor, int hdr_major, int hdr_minor)
{
    return major < hdr_major || (major == hdr_major && minor < hdr_minor);
}

void gpu_versions_format(const gpu_lib_version *v, int n, char *buf, size_t len, char *warn,
                         size_t wlen)
{
    size_t at = 0, wat = 0;
    buf[0] = 0;
    if (warn && wlen)
        warn[0] = 0;
    for (int i = 0; i < n; i++) {
        const gpu_lib_version *l = &v[i];
        if (at < len) {
            if (l->major < 0)
                at +=
                    (size_t)snprintf(buf + at, len - at, "%s%s not loaded", i ? ", " : "", l->name);
            else
                at += (size_t)snprintf(buf + at, len - at, "%s%s %d.%d.%d", i ? ", " : "", l->name,
                                       l->major, l->minor, l->patch);
        }
        if (warn && wat < wlen && l->major >= 0 &&
            gpu_version_older(l->major, l->minor, l->hdr_major, l->hdr_minor))
            wat += (size_t)snprintf(warn + wat, wlen - wat,
                                    "%s%s %d.%d.%d is loaded, older than the %d.%d headers this "
                                    "train was built with",
                                    wat ? "; " : "", l->name, l->major, l->minor, l->patch,
                                    l->hdr_major, l->hdr_minor);
    }
}

int gpu_library_versions(gpu_lib_version *v, int max)
{
    int n = 0;
    if (n < max) {
        /* cuDNN 9: major * 10000 + minor * 100 + patch */
        size_t c = cudnnGetVersion();
        v[n++] = (gpu_lib_version){"cuDNN",        (int)(c / 10000), (int)(c % 10000 / 100),
                                   (int)(c % 100), CUDNN_MAJOR,      CUDNN_MINOR};
    }
    if (n < max) {
        gpu_lib_version b = {"cuBLAS", -1, 0, 0, CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR};
        if (cublasGetProperty(MAJOR_VERSION, &b.major) != CUBLAS_STATUS_SUCCESS ||
            cublasGetProperty(MINOR_VERSION, &b.minor) != CUBLAS_STATUS_SUCCESS ||
            cublasGetProperty(PATCH_LEVEL, &b.patch) != CUBLAS_STATUS_SUCCESS)
            b.major = -1;
        v[n++] = b;
    }
    return n;
}

const char *gpu_libraries_line(char *buf, size_t len, char *warn, size_t wlen)
{
    gpu_lib_version v[4];
    int n = gpu_library_versions(v, 4);
    gpu_versions_format(v, n, buf, len, warn, wlen);
    return buf;
}
