/*
 * memory.c — the memory a pool keeps its pages and sequence buffers in: the
 * host's by default, or a device backend's (kv_pool_options.memory).
 */
#include "kvstate_internal.h"

#include <stdlib.h>
#include <string.h>

static void *host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return calloc(1, bytes ? bytes : 1);
}

static void host_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

static int host_copy(void *ctx, void *dst, const void *src, size_t bytes, kv_copy_dir dir)
{
    (void)ctx;
    (void)dir;
    memcpy(dst, src, bytes);
    return 0;
}

void kv_memory_host(kv_memory *m)
{
    m->ctx = NULL;
    m->alloc = host_alloc;
    m->release = host_release;
    m->copy = host_copy;
}

void *kv_mem_alloc(const kv_pool *p, size_t bytes) { return p->mem.alloc(p->mem.ctx, bytes); }

void kv_mem_release(const kv_pool *p, void *ptr)
{
    if (ptr)
        p->mem.release(p->mem.ctx, ptr);
}

int kv_mem_copy(const kv_pool *p, void *dst, const void *src, size_t bytes, kv_copy_dir dir)
{
    if (bytes == 0)
        return 0;
    return p->mem.copy(p->mem.ctx, dst, src, bytes, dir);
}
