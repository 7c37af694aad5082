/*
 * memory.c — the memory a pool keeps its pages and sequence buffers in: the
 * host's by default, or a device backend's (kv_pool_options.memory).
 */
#include "kvstate_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_BYTES ((size_t)2 << 20)

static void *host_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return calloc(1, bytes ? bytes : 1);
}

/*
 * A sequence's P_i and current-block rows: the token mixer sweeps all of them once per step.
 * From 2 MiB on they get huge pages, as the weights do: on 4 KiB pages each sweep restarts the
 * hardware prefetcher and misses the TLB every 4 KiB (bench/RESULTS.md, the token mixer's
 * state in huge pages). Pages of S_b are mappings of their own (host_alloc_page).
 *
 * Zero-filled, 2 MiB-aligned and advised for transparent huge pages: a block from the
 * allocator (free() takes it back like calloc's). Not a mapping of its own: a fresh mapping
 * faults its huge pages in again for every sequence, while the allocator hands a freed block,
 * its pages already in, to the next sequence (the first two steps of a new sequence measured
 * 2-7 ms faster, bench/RESULTS.md).
 */
static void *host_alloc_swept(void *ctx, size_t bytes)
{
    if (bytes < HUGE_BYTES)
        return host_alloc(ctx, bytes);
    if (bytes > SIZE_MAX - HUGE_BYTES)
        return NULL;
    size_t span = (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    void *p = aligned_alloc(HUGE_BYTES, span);
    if (!p)
        return NULL;
    (void)madvise(p, span, MADV_HUGEPAGE); /* advice only: fine if refused */
    memset(p, 0, bytes);
    return p;
}

static void host_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}

/* Linux 5.14; an older kernel refuses it, and the pages fault in as they are first written */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

/* A state page of `bytes` goes on huge pages when rounding it up to whole ones costs at most
 * 1/16 more (the 340M shape's pages are 12 MiB exactly); 0 where it does not. */
static size_t huge_span(size_t bytes)
{
    if (bytes > SIZE_MAX - 2 * HUGE_BYTES) /* no room to round up and align */
        return 0;
    size_t span = (bytes + HUGE_BYTES - 1) / HUGE_BYTES * HUGE_BYTES;
    return span - bytes <= bytes / 16 ? span : 0;
}

/*
 * A state page: a mapping of its own, faulted in, writable, before it is handed out. A page is
 * taken when a block closes and written whole at once, on the step's critical path; from the
 * allocator (calloc) its storage was fresh memory nearly every time (jemalloc and glibc hand
 * blocks this large back to the system when freed), and its pages faulted in inside the close.
 *
 * On huge pages where they fit (huge_span): 2 MiB-aligned, advised for transparent huge pages
 * and populated with MADV_POPULATE_WRITE. On a 2-vCPU KVM guest, 4 KiB pages populated with
 * MAP_POPULATE were still slow to write the first time: sixteen 12 MiB pages took ~35 ms to
 * map and ~260 ms to write once (a second write ~8 ms), where recycled huge pages took ~11 ms
 * to populate and ~8 ms to write. At batch 16 a block's close took 85-390 thread-ms of the
 * mixer and the next block's mix at ~1,900 190-770, against 64-88 and 145-185 on huge pages;
 * memory new to the process costs its faults either way, in the populate here (~150 ms for
 * sixteen pages) rather than the first write (bench/RESULTS.md, 2026-12-03). The advice is
 * only advice: where the kernel has no huge page to give, 4 KiB pages serve, and where it
 * refuses the populate they fault in as they are first written; either way the page is
 * zero-filled.
 *
 * Other pages from 2 MiB on: a mapping populated with MAP_POPULATE on 4 KiB pages. Pages under
 * HUGE_BYTES (the demo model's are 72 KiB) come from the allocator, which keeps such blocks
 * for reuse: as mappings each would be a system call, a size rounded up to 4 KiB, and,
 * released between others, a split of the mappings the kernel had merged, counting toward
 * its limit on mappings (vm.max_map_count).
 */
/* The mapping of a page from 2 MiB on, populated or not (the caller's thread, or the first
 * writer's, faults it in then: kv_mem_populate_page). */
static void *host_map_page(size_t bytes, int populate)
{
    size_t span = huge_span(bytes);
    if (!span) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0), -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    /* a huge page more than the span, so that an aligned span lies inside; the rest goes back */
    unsigned char *m =
        mmap(NULL, span + HUGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    unsigned char *p =
        (unsigned char *)(((uintptr_t)m + HUGE_BYTES - 1) & ~(uintptr_t)(HUGE_BYTES - 1));
    if (p > m)
        (void)munmap(m, (size_t)(p - m));
    if (p + span < m + span + HUGE_BYTES)
        (void)munmap(p + span, (size_t)(m + span + HUGE_BYTES - (p + span)));
    (void)madvise(p, span, MADV_HUGEPAGE);
    if (populate)
        (void)madvise(p, span, MADV_POPULATE_WRITE);
    return p;
}

static void *host_alloc_page(void *ctx, size_t bytes)
{
    if (bytes < HUGE_BYTES)
        return host_alloc(ctx, bytes);
    return host_map_page(bytes, 1);
}

static void host_release_page(void *ctx, void *p, size_t bytes)
{
    if (bytes < HUGE_BYTES) {
        host_release(ctx, p);
        return;
    }
    size_t span = huge_span(bytes);
    (void)munmap(p, span ? span : bytes);
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
    m->alloc_swept = host_alloc_swept;
    m->release = host_release;
    m->alloc_page = host_alloc_page;
    m->release_page = host_release_page;
    m->copy = host_copy;
}

void *kv_mem_alloc(const kv_pool *p, size_t bytes) { return p->mem.alloc(p->mem.ctx, bytes); }

void *kv_mem_alloc_swept(const kv_pool *p, size_t bytes)
{
    if (!p->mem.alloc_swept)
        return kv_mem_alloc(p, bytes);
    return p->mem.alloc_swept(p->mem.ctx, bytes);
}

void *kv_mem_alloc_page(const kv_pool *p)
{
    if (!p->mem.alloc_page)
        return kv_mem_alloc(p, p->page_bytes);
    return p->mem.alloc_page(p->mem.ctx, p->page_bytes);
}

/* Host memory only: what kv_memory_host installs. */
static int host_pool(const kv_pool *p) { return p->mem.alloc_page == host_alloc_page; }

void *kv_mem_alloc_page_unpopulated(const kv_pool *p)
{
    if (!host_pool(p) || p->page_bytes < HUGE_BYTES)
        return kv_mem_alloc_page(p);
    return host_map_page(p->page_bytes, 0);
}

int kv_mem_page_slow(const kv_pool *p) { return host_pool(p) && p->page_bytes >= HUGE_BYTES; }

/* A huge page at a time: the populate holds the process's memory map for reading, and a
 * thread that maps or unmaps memory meanwhile waits for it; whole, a fresh 12 MiB page held
 * it ~30 ms on a 2-vCPU guest (bench/kvstate/bench_page_take.c), in pieces ~5 ms each. */
int kv_mem_populate_piece(const kv_pool *p, void *ptr, int k)
{
    if (!host_pool(p) || p->page_bytes < HUGE_BYTES)
        return 0;
    size_t span = huge_span(p->page_bytes), bytes = span ? span : p->page_bytes;
    size_t off = (size_t)k * HUGE_BYTES;
    if (k < 0 || off >= bytes)
        return 0;
    size_t n = bytes - off < HUGE_BYTES ? bytes - off : HUGE_BYTES;
    (void)madvise((unsigned char *)ptr + off, n, MADV_POPULATE_WRITE);
    return 1;
}

void kv_mem_populate_page(const kv_pool *p, void *ptr)
{
    for (int k = 0; kv_mem_populate_piece(p, ptr, k); k++)
        ;
}

void kv_mem_release_page(const kv_pool *p, void *ptr)
{
    if (!ptr)
        return;
    if (!p->mem.release_page)
        p->mem.release(p->mem.ctx, ptr);
    else
        p->mem.release_page(p->mem.ctx, ptr, p->page_bytes);
}

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
