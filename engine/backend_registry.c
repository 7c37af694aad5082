/*
 * backend_registry.c — the backends this build has (backend.h). Compiled
 * with each variant of the engine: MHLA_BACKEND_CUDA where the variant has
 * the CUDA backend (nvcc, or the tests' simulator); without it the table
 * simply has no CUDA entry.
 */
#include "engine_internal.h"

#include <stddef.h>

const mhla_backend_ops *const mhla_backends[] = {
#ifdef MHLA_BACKEND_CUDA
    &mhla_cuda_backend,
#endif
    &mhla_cpu_backend,
    NULL,
};
