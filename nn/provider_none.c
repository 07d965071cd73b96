/* provider_none.c — the registry of a CPU-only build: no provider (see
 * nn/provider.h). Linked only where cuda/ is not (Makefile: GPU_STUB_SRC);
 * the CUDA build's registry is cuda/provider.c. */
#include "nn/provider.h"

const backend_provider *const *backend_providers(void)
{
    static const backend_provider *const none[] = {NULL};
    return none;
}
