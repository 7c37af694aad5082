/*
 * ir_build.h — builds a compiled grammar (grammar_internal.h) by hand, for
 * tests and the benchmark that must not depend on the GBNF parser. Rules are
 * numbered in the order they are begun, so a rule may refer to one begun
 * later by its number. Byte classes are not shared (each element its own).
 *
 *   ir b; ir_init(&b);
 *   ir_rule(&b);  ir_lit(&b, "ab"); ir_ref(&b, 1); ir_alt(&b); ... ir_end(&b);
 *   mhla_grammar *g = ir_finish(&b, root);
 */
#ifndef MHLA_TESTS_IR_BUILD_H
#define MHLA_TESTS_IR_BUILD_H

#include "grammar_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    gr_elem *e;
    uint32_t n, cap;
    uint32_t *start;
    uint32_t n_rules, cap_rules;
    gr_class *cls;
    uint32_t n_cls, cap_cls;
    int oom;
} ir;

static inline void ir_init(ir *b) { memset(b, 0, sizeof *b); }

static inline void *ir_grow(void *p, uint32_t *cap, uint32_t need, size_t size, int *oom)
{
    if (need <= *cap)
        return p;
    uint32_t c = *cap ? *cap * 2 : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(p, (size_t)c * size);
    if (!q) {
        *oom = 1;
        return p;
    }
    *cap = c;
    return q;
}

static inline void ir_put(ir *b, gr_kind k, uint32_t arg)
{
    b->e = ir_grow(b->e, &b->cap, b->n + 1, sizeof *b->e, &b->oom);
    if (b->n < b->cap)
        b->e[b->n++] = (gr_elem){k, arg};
}

/* Begins the next rule; returns its number. */
static inline uint32_t ir_rule(ir *b)
{
    b->start = ir_grow(b->start, &b->cap_rules, b->n_rules + 1, sizeof *b->start, &b->oom);
    if (b->n_rules < b->cap_rules)
        b->start[b->n_rules++] = b->n;
    return b->n_rules - 1;
}

static inline void ir_class(ir *b, const gr_class *c)
{
    b->cls = ir_grow(b->cls, &b->cap_cls, b->n_cls + 1, sizeof *b->cls, &b->oom);
    if (b->n_cls < b->cap_cls) {
        b->cls[b->n_cls] = *c;
        ir_put(b, GR_BYTES, b->n_cls++);
    }
}

static inline void cls_add(gr_class *c, unsigned lo, unsigned hi)
{
    for (unsigned x = lo; x <= hi && x < 256; x++)
        c->bits[x >> 6] |= 1ull << (x & 63);
}

static inline void ir_range(ir *b, unsigned lo, unsigned hi)
{
    gr_class c = {{0}};
    cls_add(&c, lo, hi);
    ir_class(b, &c);
}

/* One element per byte of s. */
static inline void ir_lit(ir *b, const char *s)
{
    for (; *s; s++)
        ir_range(b, (unsigned char)*s, (unsigned char)*s);
}

/* One element matching any byte of set (a NUL-free string). */
static inline void ir_set(ir *b, const char *set)
{
    gr_class c = {{0}};
    for (; *set; set++)
        cls_add(&c, (unsigned char)*set, (unsigned char)*set);
    ir_class(b, &c);
}

static inline void ir_ref(ir *b, uint32_t r) { ir_put(b, GR_RULE, r); }
static inline void ir_alt(ir *b) { ir_put(b, GR_ALT, 0); }
static inline void ir_end(ir *b) { ir_put(b, GR_END, 0); }

static inline void ir_discard(ir *b)
{
    free(b->e);
    free(b->start);
    free(b->cls);
    memset(b, 0, sizeof *b);
}

/* The grammar (one reference), or NULL when out of memory; b is emptied. */
static inline mhla_grammar *ir_finish(ir *b, uint32_t root)
{
    mhla_grammar *g = calloc(1, sizeof *g);
    char **names = calloc(b->n_rules ? b->n_rules : 1, sizeof *names);
    if (!g || !names || b->oom) {
        free(g);
        free(names);
        ir_discard(b);
        return NULL;
    }
    for (uint32_t r = 0; r < b->n_rules; r++)
        names[r] = calloc(1, 1);
    *g = (mhla_grammar){1, b->e, b->n, b->start, names, b->n_rules, root, b->cls, b->n_cls};
    memset(b, 0, sizeof *b);
    return g;
}

#endif
