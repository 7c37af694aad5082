/*
 * backend_registry.c — the backends this build has (backend.h). Compiled
 * with each variant of the engine: MHLA_BACKEND_CUDA where the variant has
 * the CUDA backend (nvcc, or the tests' simulator); without it the table
 * simply has no CUDA entry.
 */
#include "engine_internal.h"

#include <stddef.h>

const eng_backend_ops *const eng_backends[] = {
#ifdef MHLA_BACKEND_CUDA
    &eng_cuda_backend,
#endif
    &eng_cpu_backend,
    NULL,
};
