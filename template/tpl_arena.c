/* tpl_arena.c — the bump allocator a program's tree and a render's values
 * come from, freed at once; a render's arena has a cap on its bytes. */
#include <stdlib.h>
#include <string.h>

#include "tpl_internal.h"

#define CHUNK_BYTES ((size_t)64 << 10)

struct tpl_chunk {
    tpl_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

static tpl_chunk *new_chunk(tpl_arena *a, size_t need)
{
    size_t size = need > CHUNK_BYTES ? need : CHUNK_BYTES;
    if (a->cap && a->used + size > a->cap) {
        a->over = 1;
        return NULL;
    }
    tpl_chunk *c = malloc(sizeof *c + size);
    if (!c) {
        a->over = 2;
        return NULL;
    }
    c->size = size;
    c->used = 0;
    c->next = a->head;
    a->head = c;
    a->used += size;
    return c;
}

void *tpl_alloc(tpl_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0)
        n = 16;
    tpl_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        c = new_chunk(a, n);
        if (!c)
            return NULL;
    }
    void *p = c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *tpl_strdup(tpl_arena *a, const char *s, size_t n)
{
    char *p = tpl_alloc(a, n + 1);
    if (p && n)
        memcpy(p, s, n);
    return p;
}

void tpl_arena_free(tpl_arena *a)
{
    while (a->head) {
        tpl_chunk *next = a->head->next;
        free(a->head);
        a->head = next;
    }
    a->used = 0;
}
