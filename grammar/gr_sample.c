/*
 * gr_sample.c — random strings of a grammar (mhla_grammar_sample), for
 * tests and tools. A walk over the rules that never exceeds its byte budget:
 * each element knows the fewest bytes that finish its alternative, and an
 * alternative is chosen only when the bytes written plus those minimums fit.
 * The deeper the walk and the fuller the budget, the likelier the shortest
 * alternative, so walks end well before the budget on most grammars.
 */
#include "gr_core.h"

#include <stdlib.h>
#include <string.h>

#define GR_INF 0x3FFFFFFFu
#define SAMPLE_MAX_STEPS (1u << 24)
#define SAMPLE_MAX_DEPTH (1u << 20)

typedef struct {
    const mhla_grammar *g;
    uint32_t *rest; /* per element: fewest bytes from it to its alternative's end */
    uint32_t *min;  /* per rule */
    uint64_t rng;
    uint32_t *stack;
    size_t n_stack, cap_stack;
    char *out;
    size_t len, cap, max, pending; /* pending: the stack's rest, summed */
    mhla_grammar_error *err;
} gs_walk;

static uint32_t sat_add(uint32_t a, uint32_t b) { return a + b >= GR_INF ? GR_INF : a + b; }

static uint64_t next_rand(gs_walk *w)
{
    uint64_t z = (w->rng += 0x9E3779B97F4A7C15ull); /* splitmix64 */
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int class_empty(const gr_class *c)
{
    return !(c->bits[0] | c->bits[1] | c->bits[2] | c->bits[3]);
}

/* rest[] from the rules' current minimums: one backward pass. */
static void fill_rest(gs_walk *w)
{
    const mhla_grammar *g = w->g;
    for (uint32_t e = g->n_elems; e-- > 0;) {
        gr_elem x = g->elems[e];
        uint32_t self = x.kind == GR_RULE    ? w->min[x.arg]
                        : x.kind == GR_BYTES ? (class_empty(&g->classes[x.arg]) ? GR_INF : 1)
                                             : 0;
        w->rest[e] = (x.kind == GR_ALT || x.kind == GR_END) ? 0 : sat_add(self, w->rest[e + 1]);
    }
}

/* A rule's minimum: its alternatives' smallest rest. */
static uint32_t rule_min(const gs_walk *w, uint32_t r)
{
    uint32_t best = GR_INF;
    for (uint32_t a = w->g->rule_start[r];;) {
        best = w->rest[a] < best ? w->rest[a] : best;
        while (w->g->elems[a].kind != GR_ALT && w->g->elems[a].kind != GR_END)
            a++;
        if (w->g->elems[a++].kind == GR_END)
            return best;
    }
}

/* Minimums to a fixed point (each pass can only lower them). */
static void fill_minimums(gs_walk *w)
{
    for (uint32_t r = 0; r < w->g->n_rules; r++)
        w->min[r] = GR_INF;
    for (int changed = 1; changed;) {
        changed = 0;
        fill_rest(w);
        for (uint32_t r = 0; r < w->g->n_rules; r++) {
            uint32_t m = rule_min(w, r);
            changed |= m < w->min[r];
            w->min[r] = m < w->min[r] ? m : w->min[r];
        }
    }
    fill_rest(w);
}

static int push(gs_walk *w, uint32_t e)
{
    if (w->n_stack == w->cap_stack) {
        if (w->cap_stack >= SAMPLE_MAX_DEPTH)
            return gr_fail(w->err, MHLA_GRAMMAR_LIMIT, -1, "a sample nested deeper than %u",
                           SAMPLE_MAX_DEPTH);
        size_t cap = w->cap_stack ? w->cap_stack * 2 : 64;
        uint32_t *s = realloc(w->stack, cap * sizeof *s);
        if (!s)
            return gr_fail(w->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory sampling");
        w->stack = s;
        w->cap_stack = cap;
    }
    w->stack[w->n_stack++] = e;
    return 0;
}

/* Replaces the top element t by the one after it, or pops it at its end. */
static int step_past(gs_walk *w, uint32_t t)
{
    gr_kind k = (gr_kind)w->g->elems[t + 1].kind;
    w->n_stack--;
    return (k == GR_ALT || k == GR_END) ? 0 : push(w, t + 1);
}

static int emit_byte(gs_walk *w, uint32_t t)
{
    const gr_class *c = &w->g->classes[w->g->elems[t].arg];
    int n = 0, pick;
    for (int i = 0; i < 4; i++)
        n += __builtin_popcountll(c->bits[i]);
    pick = (int)(next_rand(w) % (uint64_t)n); /* n > 0: empty classes are never chosen */
    for (int v = 0; v < 256; v++)
        if (gr_class_has(c, (unsigned char)v) && pick-- == 0) {
            if (w->len + 1 >= w->cap) {
                size_t cap = w->cap * 2;
                char *o = realloc(w->out, cap);
                if (!o)
                    return gr_fail(w->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory sampling");
                w->out = o;
                w->cap = cap;
            }
            w->out[w->len++] = (char)v;
            break;
        }
    w->pending -= 1;
    return step_past(w, t);
}

/* The k-th alternative of rule r that fits (k < 0: the shortest). */
static uint32_t pick_alt(const gs_walk *w, uint32_t r, size_t base, long k)
{
    uint32_t best = 0, best_rest = GR_INF;
    for (uint32_t a = w->g->rule_start[r];;) {
        if (base + w->rest[a] <= w->max) {
            if (k-- == 0)
                return a;
            if (w->rest[a] < best_rest)
                best = a, best_rest = w->rest[a];
        }
        uint32_t e = a;
        while (w->g->elems[e].kind != GR_ALT && w->g->elems[e].kind != GR_END)
            e++;
        if (w->g->elems[e].kind == GR_END)
            return best;
        a = e + 1;
    }
}

/* An alternative of rule r that fits when base bytes are spoken for:
 * the shortest under pressure, else any that fits. */
static int choose_alt(gs_walk *w, uint32_t r, size_t base, uint32_t *alt)
{
    long fits = 0;
    for (uint32_t a = w->g->rule_start[r];; a++) {
        if (a == w->g->rule_start[r] || w->g->elems[a - 1].kind == GR_ALT)
            fits += base + w->rest[a] <= w->max;
        if (w->g->elems[a].kind == GR_END)
            break;
    }
    if (fits == 0) /* cannot happen while the budget invariant holds; refuse rather than guess */
        return gr_fail(w->err, MHLA_GRAMMAR_LIMIT, -1, "no alternative of a rule fits the budget");
    size_t pressure = w->n_stack * 8 + (w->max ? w->len * 256 / w->max : 256);
    long k = (next_rand(w) & 255) < pressure ? -1 : (long)(next_rand(w) % (uint64_t)fits);
    *alt = pick_alt(w, r, base, k);
    return 0;
}

static int push_alt(gs_walk *w, uint32_t a)
{
    gr_kind k = (gr_kind)w->g->elems[a].kind;
    return (k == GR_ALT || k == GR_END) ? 0 : push(w, a);
}

static int expand_rule(gs_walk *w, uint32_t t)
{
    size_t base = w->len + w->pending - w->rest[t] + w->rest[t + 1];
    uint32_t a;
    int rc = choose_alt(w, w->g->elems[t].arg, base, &a);
    if (rc)
        return rc;
    w->pending = w->pending - w->rest[t] + w->rest[t + 1] + w->rest[a];
    rc = step_past(w, t);
    return rc ? rc : push_alt(w, a);
}

static int walk(gs_walk *w)
{
    uint32_t root_min = w->min[w->g->root];
    if (root_min >= GR_INF || root_min > w->max)
        return gr_fail(w->err, MHLA_GRAMMAR_LIMIT, -1,
                       root_min >= GR_INF ? "the grammar has no finite string"
                                          : "the shortest string is longer than max_bytes");
    uint32_t a;
    int rc = choose_alt(w, w->g->root, 0, &a);
    if (!rc) {
        w->pending = w->rest[a];
        rc = push_alt(w, a);
    }
    for (uint32_t steps = 0; !rc && w->n_stack; steps++) {
        uint32_t t = w->stack[w->n_stack - 1];
        if (steps > SAMPLE_MAX_STEPS)
            rc = gr_fail(w->err, MHLA_GRAMMAR_LIMIT, -1, "a sample took over %u steps",
                         SAMPLE_MAX_STEPS);
        else if (w->g->elems[t].kind == GR_BYTES)
            rc = emit_byte(w, t);
        else
            rc = expand_rule(w, t);
    }
    return rc;
}

int mhla_grammar_sample(const mhla_grammar *g, uint64_t seed, size_t max_bytes, char **out,
                        size_t *len, mhla_grammar_error *err)
{
    if (err)
        *err = (mhla_grammar_error){.pos = -1};
    if (!g || !out)
        return gr_fail(err, MHLA_GRAMMAR_SYNTAX, -1, "sample needs a grammar and a place for it");
    *out = NULL;
    /* budgets past GR_INF would let never-ending alternatives look affordable */
    gs_walk w = {.g = g,
                 .rng = seed,
                 .max = max_bytes < GR_INF ? max_bytes : GR_INF - 1,
                 .cap = 64,
                 .err = err};
    w.rest = malloc(((size_t)g->n_elems + 1) * sizeof *w.rest);
    w.min = malloc(((size_t)g->n_rules + 1) * sizeof *w.min);
    w.out = malloc(w.cap);
    int rc = (w.rest && w.min && w.out)
                 ? 0
                 : gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory sampling");
    if (!rc) {
        fill_minimums(&w);
        rc = walk(&w);
    }
    free(w.rest);
    free(w.min);
    free(w.stack);
    if (rc) {
        free(w.out);
        return rc;
    }
    w.out[w.len] = '\0';
    *out = w.out;
    if (len)
        *len = w.len;
    return 0;
}
