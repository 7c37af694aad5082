/*
 * compat.h — the CUDA headers, or the CPU simulator (tests/cudasim) that
 * runs the same kernels without a GPU. Kernels are launched with
 * MHLA_LAUNCH(kernel, grid, block, smem, stream)(args...) so both build.
 */
#ifndef MHLA_CUDA_COMPAT_H
#define MHLA_CUDA_COMPAT_H

#ifdef MHLA_CUDA_SIM
#include "cudasim.h" /* tests/cudasim */
#else
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#define MHLA_LAUNCH(kernel, grid, block, smem, stream) kernel<<<grid, block, smem, stream>>>
#define MHLA_DYNAMIC_SMEM(T, name)                                                                 \
    extern __shared__ __align__(16) unsigned char eng_dsmem_[];                                    \
    T *name = reinterpret_cast<T *>(eng_dsmem_)
#endif

#endif
