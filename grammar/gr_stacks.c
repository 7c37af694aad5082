/*
 * gr_stacks.c — the pushdown automaton's step: sets of expanded stacks, a
 * byte at a time. This is the hot path of the mask computation, so a set
 * keeps all its memory (the stacks' positions back to back, the dedup
 * table, the expansion's scratch) and reuses it from call to call, and a
 * rule reference is expanded depth first on one scratch stack with undo
 * records instead of copying a stack per alternative.
 */
#include "gr_core.h"

#include <stdlib.h>
#include <string.h>

/* A rule reference being expanded: cur had length L with the reference on
 * top; alt is the start of the alternative being tried. */
typedef struct {
    uint32_t L, ref, alt;
} gr_choice;

typedef struct {
    uint32_t gen, idx;
} gr_slot;

struct gr_stacks_mem {
    uint32_t *pool; /* the stacks' positions, back to back */
    size_t pool_n, pool_cap;
    size_t *off;   /* stack i's offset in pool (pointers are set when the set is done) */
    gr_slot *hash; /* open addressing; a slot is in use when its gen is the set's */
    uint32_t hash_cap, gen;
    gr_choice *cps;
    uint32_t n_cps, cap_cps;
    uint32_t steps; /* expansions in this call, against GR_MAX_EXPAND */
    uint32_t cur[GR_MAX_STACK_DEPTH + 2];
};

void gr_stacks_free(gr_stacks *ss)
{
    if (!ss)
        return;
    if (ss->mem) {
        free(ss->mem->pool);
        free(ss->mem->off);
        free(ss->mem->hash);
        free(ss->mem->cps);
        free(ss->mem);
    }
    free(ss->s);
    memset(ss, 0, sizeof *ss);
}

int gr_stacks_accepting(const gr_stacks *ss)
{
    for (uint32_t i = 0; ss && i < ss->n; i++)
        if (ss->s[i].n == 0)
            return 1;
    return 0;
}

/* Empties out, keeping its memory. */
static int reset(gr_stacks *out, mhla_grammar_error *err)
{
    if (!out->mem) {
        out->mem = calloc(1, sizeof *out->mem);
        if (!out->mem)
            return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory for a stack set");
    }
    struct gr_stacks_mem *m = out->mem;
    out->n = 0;
    m->pool_n = 0;
    m->n_cps = 0;
    m->steps = 0;
    if (++m->gen == 0) { /* wrapped: no slot may look in use */
        if (m->hash)
            memset(m->hash, 0, m->hash_cap * sizeof *m->hash);
        m->gen = 1;
    }
    return 0;
}

static uint32_t hash_stack(const uint32_t *p, uint32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0xFF51AFD7ED558CCDull;
    return (uint32_t)(h ^ (h >> 32));
}

static int grow_mem(void **p, size_t *cap, size_t need, size_t elem, mhla_grammar_error *err)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory for stacks");
    *p = q;
    *cap = c;
    return 0;
}

/* Doubles the dedup table (kept at most half full) and re-enters the stacks. */
static int rehash(gr_stacks *ss, mhla_grammar_error *err)
{
    struct gr_stacks_mem *m = ss->mem;
    uint32_t cap = m->hash_cap ? m->hash_cap * 2 : 64;
    gr_slot *t = calloc(cap, sizeof *t);
    if (!t)
        return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory for stacks");
    for (uint32_t i = 0; i < ss->n; i++) {
        uint32_t h = hash_stack(m->pool + m->off[i], ss->s[i].n) & (cap - 1);
        while (t[h].gen == m->gen)
            h = (h + 1) & (cap - 1);
        t[h] = (gr_slot){m->gen, i};
    }
    free(m->hash);
    m->hash = t;
    m->hash_cap = cap;
    return 0;
}

/* Room for one more stack of len positions. */
static int room(gr_stacks *ss, uint32_t len, mhla_grammar_error *err)
{
    struct gr_stacks_mem *m = ss->mem;
    if (ss->n >= GR_MAX_STACKS)
        return gr_fail(err, MHLA_GRAMMAR_LIMIT, -1,
                       "more than %d stacks at once (an ambiguous "
                       "grammar)",
                       GR_MAX_STACKS);
    size_t cap = ss->cap, ocap = cap;
    int rc = grow_mem((void **)&ss->s, &cap, ss->n + 1, sizeof *ss->s, err);
    if (!rc)
        rc = grow_mem((void **)&m->off, &ocap, ss->n + 1, sizeof *m->off, err);
    if (!rc)
        ss->cap = (uint32_t)cap;
    if (!rc)
        rc = grow_mem((void **)&m->pool, &m->pool_cap, m->pool_n + len + 1, sizeof *m->pool,
                      err); /* + 1: never NULL, even when every stack is empty */
    if (!rc && (ss->n + 1) * 2 > m->hash_cap)
        rc = rehash(ss, err);
    return rc;
}

/* Adds cur[0, len) to the set unless it is there already. */
static int add_stack(gr_stacks *ss, uint32_t len, mhla_grammar_error *err)
{
    struct gr_stacks_mem *m = ss->mem;
    uint32_t h = hash_stack(m->cur, len), mask = m->hash_cap - 1;
    for (h &= mask; m->hash_cap && m->hash[h].gen == m->gen; h = (h + 1) & mask) {
        uint32_t i = m->hash[h].idx;
        if (ss->s[i].n == len && memcmp(m->pool + m->off[i], m->cur, len * sizeof *m->cur) == 0)
            return 0;
    }
    int rc = room(ss, len, err);
    if (rc)
        return rc;
    if (mask != m->hash_cap - 1) { /* the table grew: find the free slot again */
        mask = m->hash_cap - 1;
        for (h = hash_stack(m->cur, len) & mask; m->hash[h].gen == m->gen; h = (h + 1) & mask)
            ;
    }
    m->off[ss->n] = m->pool_n;
    memcpy(m->pool + m->pool_n, m->cur, len * sizeof *m->cur);
    m->pool_n += len;
    ss->s[ss->n].n = len;
    m->hash[h] = (gr_slot){m->gen, ss->n++};
    return 0;
}

static int is_end(const mhla_grammar *g, uint32_t e)
{
    return g->elems[e].kind == GR_ALT || g->elems[e].kind == GR_END;
}

/* The stack for choice c's current alternative: below the reference, the
 * element after it (unless it ends its alternative: a tail call), then
 * the alternative's first element (unless it is empty). */
static int apply_choice(const mhla_grammar *g, struct gr_stacks_mem *m, const gr_choice *c,
                        uint32_t *len, mhla_grammar_error *err)
{
    *len = c->L - 1;
    if (*len + 2 > GR_MAX_STACK_DEPTH)
        return gr_fail(err, MHLA_GRAMMAR_LIMIT, -1,
                       "a stack deeper than %d (rules nested too "
                       "deep)",
                       GR_MAX_STACK_DEPTH);
    if (!is_end(g, c->ref + 1))
        m->cur[(*len)++] = c->ref + 1;
    if (!is_end(g, c->alt))
        m->cur[(*len)++] = c->alt;
    return 0;
}

/* Moves the innermost choice to its next alternative (undoing what it
 * wrote), dropping choices that have none left; 0 with *more = 0 when
 * every choice is exhausted. */
static int next_choice(const mhla_grammar *g, struct gr_stacks_mem *m, uint32_t base, uint32_t *len,
                       int *more, mhla_grammar_error *err)
{
    while (m->n_cps > base) {
        gr_choice *c = &m->cps[m->n_cps - 1];
        m->cur[c->L - 1] = c->ref;
        uint32_t a = c->alt;
        while (!is_end(g, a))
            a++;
        if (g->elems[a].kind == GR_ALT) {
            c->alt = a + 1;
            *more = 1;
            return apply_choice(g, m, c, len, err);
        }
        m->n_cps--;
    }
    *more = 0;
    return 0;
}

/* Opens the reference on top of cur: its first alternative. */
static int push_choice(const mhla_grammar *g, struct gr_stacks_mem *m, uint32_t *len,
                       mhla_grammar_error *err)
{
    if (++m->steps > GR_MAX_EXPAND)
        return gr_fail(err, MHLA_GRAMMAR_LIMIT, -1, "more than %d rule expansions for one byte",
                       GR_MAX_EXPAND);
    if (m->n_cps == m->cap_cps) {
        uint32_t cap = m->cap_cps ? m->cap_cps * 2 : 64;
        gr_choice *c = realloc(m->cps, cap * sizeof *c);
        if (!c)
            return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory expanding stacks");
        m->cps = c;
        m->cap_cps = cap;
    }
    uint32_t ref = m->cur[*len - 1];
    gr_choice *c = &m->cps[m->n_cps++];
    *c = (gr_choice){*len, ref, g->rule_start[g->elems[ref].arg]};
    return apply_choice(g, m, c, len, err);
}

/* Adds every expanded stack cur[0, len) leads to. */
static int expand(const mhla_grammar *g, gr_stacks *ss, uint32_t len, mhla_grammar_error *err)
{
    struct gr_stacks_mem *m = ss->mem;
    uint32_t base = m->n_cps;
    int more = 1, rc = 0;
    while (more && !rc) {
        while (!rc && len && g->elems[m->cur[len - 1]].kind == GR_RULE)
            rc = push_choice(g, m, &len, err);
        if (!rc)
            rc = add_stack(ss, len, err);
        if (!rc)
            rc = next_choice(g, m, base, &len, &more, err);
    }
    m->n_cps = base;
    return rc;
}

/* Points the stacks into the pool, now that it no longer moves. */
static void settle(gr_stacks *ss)
{
    for (uint32_t i = 0; i < ss->n; i++)
        ss->s[i].pos = ss->mem->pool + ss->mem->off[i];
}

int gr_stacks_start(const mhla_grammar *g, gr_stacks *out, mhla_grammar_error *err)
{
    if (!g || !out)
        return gr_fail(err, MHLA_GRAMMAR_SYNTAX, -1, "no grammar or no stack set");
    int rc = reset(out, err);
    for (uint32_t a = g->rule_start[g->root]; !rc;) {
        uint32_t len = 0;
        if (!is_end(g, a))
            out->mem->cur[len++] = a;
        rc = expand(g, out, len, err);
        while (!is_end(g, a))
            a++;
        if (g->elems[a].kind == GR_END)
            break;
        a++;
    }
    if (rc)
        out->n = 0;
    settle(out);
    return rc;
}

int gr_stacks_advance(const mhla_grammar *g, const gr_stacks *in, unsigned char b, gr_stacks *out,
                      mhla_grammar_error *err)
{
    if (!g || !in || !out || in == out)
        return gr_fail(err, MHLA_GRAMMAR_SYNTAX, -1, "advance needs a grammar and two stack sets");
    int rc = reset(out, err);
    for (uint32_t i = 0; i < in->n && !rc; i++) {
        const gr_stack *s = &in->s[i];
        if (s->n == 0)
            continue;
        uint32_t top = s->pos[s->n - 1], len = s->n - 1;
        if (!gr_class_has(&g->classes[g->elems[top].arg], b))
            continue;
        memcpy(out->mem->cur, s->pos, len * sizeof *s->pos);
        if (!is_end(g, top + 1))
            out->mem->cur[len++] = top + 1;
        rc = expand(g, out, len, err);
    }
    if (rc)
        out->n = 0;
    settle(out);
    return rc;
}
