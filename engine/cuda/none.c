/*
 * none.c — the CUDA backend of a build without nvcc: every device request
 * is answered "built without CUDA", so --device auto falls back to the CPU
 * and --device cuda fails with that reason.
 */
#include "cuda_backend.h"

#include <stdio.h>

static int without(char *err)
{
    if (err)
        snprintf(err, MHLA_CUDA_ERR, "this build has no CUDA backend (nvcc was not found when it "
                                     "was configured)");
    return -1;
}

int mhla_cuda_probe(int device_index, char *why)
{
    (void)device_index;
    return without(why);
}

int mhla_cuda_create(const mhla_cuda_model_src *src, const mhla_cuda_options *opt,
                     mhla_cuda **out, char *err)
{
    (void)src;
    (void)opt;
    *out = NULL;
    return without(err);
}

void mhla_cuda_free(mhla_cuda *g) { (void)g; }
const char *mhla_cuda_name(const mhla_cuda *g)
{
    (void)g;
    return "none";
}
size_t mhla_cuda_bytes(const mhla_cuda *g)
{
    (void)g;
    return 0;
}
void *mhla_cuda_mem_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    (void)bytes;
    return NULL;
}
void mhla_cuda_mem_release(void *ctx, void *p)
{
    (void)ctx;
    (void)p;
}
int mhla_cuda_mem_copy(void *ctx, void *dst, const void *src, size_t bytes, int dir)
{
    (void)ctx;
    (void)dst;
    (void)src;
    (void)bytes;
    (void)dir;
    return -1;
}
int mhla_cuda_forward(mhla_cuda *g, const mhla_cuda_item *items, int n_items, char *err)
{
    (void)g;
    (void)items;
    (void)n_items;
    return without(err);
}
int mhla_cuda_restore_prefix(mhla_cuda *g, const mhla_cuda_item *item, char *err)
{
    (void)g;
    (void)item;
    return without(err);
}
int mhla_cuda_copy_bandwidth(mhla_cuda *g, double *bytes_per_s, char *err)
{
    (void)g;
    *bytes_per_s = 0;
    return without(err);
}
void mhla_cuda_stats(const mhla_cuda *g, uint64_t *steps, uint64_t *captures, uint64_t *replays)
{
    (void)g;
    *steps = *captures = *replays = 0;
}
