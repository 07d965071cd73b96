/* nccl_version.c — the fake NCCL's version: the library its header
 * describes (ncclGetVersion's encoding since 2.9). Apart from nccl.c so
 * the version has a file of its own. */
#ifdef TRAIN_MPI
#include <nccl.h>
#include <stddef.h>

ncclResult_t ncclGetVersion(int *version)
{
    if (!version)
        return ncclInvalidArgument;
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}
#else
typedef int fake_nccl_version_unused; /* ISO C: no empty translation unit */
#endif
