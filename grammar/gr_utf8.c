/*
 * gr_utf8.c — sets of code points as byte-level rules. A set becomes the
 * smallest deterministic automaton over its UTF-8 encodings: lead bytes
 * whose continuations match the same sets share one alternative, and each
 * continuation set is a rule made once (memoised), so that the stacks a
 * character class opens stay few (one per group of lead bytes) and a matcher
 * holds one stack again after the first byte. ASCII-only sets stay one
 * GR_BYTES element.
 */
#include "gr_core.h"

#include <stdlib.h>
#include <string.h>

struct gb_memo {
    uint32_t ncont; /* continuation bytes left; 4 marks a whole set (lead byte first) */
    gu_range *r;
    uint32_t nr, rule;
    int single; /* one alternative: callers copy its elements instead of a reference */
};

typedef struct {
    unsigned char byte, ncont, done;
    const gu_range *sub;
    uint32_t nsub;
} gu_item;

void gu_memo_free(gb_builder *b)
{
    for (uint32_t i = 0; i < b->n_memo; i++)
        free(b->memo[i].r);
    free(b->memo);
    b->memo = NULL;
    b->n_memo = b->cap_memo = 0;
}

static int cmp_range(const void *a, const void *b)
{
    const gu_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorted, merged, clipped to 0..0x10FFFF (in place; returns the count). */
static size_t merge_ranges(gu_range *r, size_t n)
{
    size_t m = 0;
    qsort(r, n, sizeof *r, cmp_range);
    for (size_t i = 0; i < n; i++) {
        if (r[i].lo > r[i].hi || r[i].lo > 0x10FFFF)
            continue;
        if (r[i].hi > 0x10FFFF)
            r[i].hi = 0x10FFFF;
        if (m && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi)
                r[m - 1].hi = r[i].hi;
        } else {
            r[m++] = r[i];
        }
    }
    return m;
}

/* Appends [lo, hi] to out without the surrogates D800..DFFF. */
static void emit_range(gu_range *out, size_t *m, uint32_t lo, uint32_t hi)
{
    if (lo < 0xD800)
        out[(*m)++] = (gu_range){lo, hi < 0xD7FF ? hi : 0xD7FF};
    if (hi > 0xDFFF)
        out[(*m)++] = (gu_range){lo > 0xE000 ? lo : 0xE000, hi};
}

/* out (room for n + 2) = r (merged), complemented when negate, without
 * the surrogates. */
static size_t finish_set(const gu_range *r, size_t n, int negate, gu_range *out)
{
    size_t m = 0;
    uint32_t next = 0;
    for (size_t i = 0; i <= n; i++) {
        gu_range x = i < n ? r[i] : (gu_range){0x110000, 0x110000};
        if (negate && x.lo > next)
            emit_range(out, &m, next, x.lo - 1);
        if (!negate && i < n)
            emit_range(out, &m, x.lo, x.hi);
        next = x.hi + 1;
    }
    return m;
}

/* out = (V ∩ [lo, hi]) - base; returns the count. */
static uint32_t sub_of(const gu_range *v, uint32_t nv, uint32_t lo, uint32_t hi, uint32_t base,
                       gu_range *out)
{
    uint32_t m = 0;
    for (uint32_t i = 0; i < nv && v[i].lo <= hi; i++) {
        if (v[i].hi < lo)
            continue;
        uint32_t a = v[i].lo > lo ? v[i].lo : lo, z = v[i].hi < hi ? v[i].hi : hi;
        out[m++] = (gu_range){a - base, z - base};
    }
    return m;
}

static gb_memo *memo_find(gb_builder *b, uint32_t ncont, const gu_range *v, uint32_t nv)
{
    for (uint32_t i = 0; i < b->n_memo; i++) {
        gb_memo *m = &b->memo[i];
        if (m->ncont == ncont && m->nr == nv && memcmp(m->r, v, nv * sizeof *v) == 0)
            return m;
    }
    return NULL;
}

static int memo_add(gb_builder *b, uint32_t ncont, const gu_range *v, uint32_t nv, uint32_t rule,
                    int single)
{
    if (b->n_memo == b->cap_memo) {
        uint32_t cap = b->cap_memo ? b->cap_memo * 2 : 16;
        gb_memo *m = realloc(b->memo, cap * sizeof *m);
        if (!m)
            return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory compiling a class");
        b->memo = m;
        b->cap_memo = cap;
    }
    gu_range *copy = malloc((nv ? nv : 1) * sizeof *copy);
    if (!copy)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory compiling a class");
    memcpy(copy, v, nv * sizeof *v);
    b->memo[b->n_memo++] = (gb_memo){ncont, copy, nv, rule, single};
    return 0;
}

static int build_node(gb_builder *b, uint32_t owner, uint32_t ncont, const gu_range *v, uint32_t nv,
                      const gb_memo **out);

/* Appends the elements matching the continuation set (ncont bytes left):
 * the node's one alternative copied, or a reference to its rule. */
static int push_node(gb_builder *b, uint32_t rule, uint32_t owner, uint32_t ncont,
                     const gu_range *v, uint32_t nv)
{
    const gb_memo *m;
    int rc = build_node(b, owner, ncont, v, nv, &m);
    if (rc)
        return rc;
    if (!m->single)
        return gb_push(b, rule, GR_RULE, m->rule);
    const gb_seq *s = &b->rules[m->rule];
    return gb_push_elems(b, rule, s->e, s->n - 1); /* without its GR_END */
}

static int same_item(const gu_item *x, const gu_item *y)
{
    return x->ncont == y->ncont && x->nsub == y->nsub &&
           memcmp(x->sub, y->sub, x->nsub * sizeof *x->sub) == 0;
}

/* Items with equal continuations become one alternative (their bytes one
 * class); returns the number of alternatives through *n_alts. */
static int emit_groups(gb_builder *b, uint32_t rule, uint32_t owner, gu_item *it, uint32_t k,
                       uint32_t *n_alts)
{
    int rc = 0;
    *n_alts = 0;
    for (uint32_t i = 0; i < k && !rc; i++) {
        if (it[i].done)
            continue;
        gr_class c = {{0}};
        for (uint32_t j = i; j < k; j++) {
            if (!it[j].done && same_item(&it[i], &it[j])) {
                it[j].done = 1;
                c.bits[it[j].byte >> 6] |= 1ull << (it[j].byte & 63);
            }
        }
        if ((*n_alts)++)
            rc = gb_push(b, rule, GR_ALT, 0);
        if (!rc)
            rc = gb_push_class(b, rule, &c);
        if (!rc && it[i].ncont)
            rc = push_node(b, rule, owner, it[i].ncont, it[i].sub, it[i].nsub);
    }
    return rc;
}

static const gu_range k_unit = {0, 0}; /* the continuation of a last byte: nothing */

/* Items of a continuation node: byte 0x80 | c takes the part of v in c's
 * window of 64^(ncont-1) values. */
static uint32_t items_cont(uint32_t ncont, const gu_range *v, uint32_t nv, gu_item *it,
                           gu_range *subs)
{
    uint32_t span = 1u << (6 * (ncont - 1)), k = 0, used = 0;
    for (uint32_t c = 0; c < 64; c++) {
        uint32_t n = sub_of(v, nv, c * span, (c + 1) * span - 1, c * span, subs + used);
        if (!n)
            continue;
        it[k++] =
            (gu_item){(unsigned char)(0x80 | c), (unsigned char)(ncont - 1), 0, subs + used, n};
        used += n;
    }
    return k;
}

/* Items of a whole set: ASCII bytes, then lead bytes with the part of v
 * their encoding length and payload bits cover. */
static uint32_t items_root(const gu_range *v, uint32_t nv, gu_item *it, gu_range *subs)
{
    static const struct {
        unsigned lead0, lead1, ncont, shift;
        uint32_t min, max;
    } len[3] = {{0xC2, 0xDF, 1, 6, 0x80, 0x7FF},
                {0xE0, 0xEF, 2, 12, 0x800, 0xFFFF},
                {0xF0, 0xF4, 3, 18, 0x10000, 0x10FFFF}};
    uint32_t k = 0, used = 0;
    for (uint32_t i = 0; i < nv && v[i].lo < 0x80; i++)
        for (uint32_t c = v[i].lo; c <= v[i].hi && c < 0x80; c++)
            it[k++] = (gu_item){(unsigned char)c, 0, 0, &k_unit, 1};
    for (int l = 0; l < 3; l++) {
        for (unsigned lead = len[l].lead0; lead <= len[l].lead1; lead++) {
            uint32_t base = (lead & (0x3Fu >> len[l].ncont)) << len[l].shift;
            uint32_t lo = base > len[l].min ? base : len[l].min;
            uint32_t hi = base + (1u << len[l].shift) - 1;
            hi = hi < len[l].max ? hi : len[l].max;
            uint32_t n = sub_of(v, nv, lo, hi, base, subs + used);
            if (!n)
                continue;
            it[k++] =
                (gu_item){(unsigned char)lead, (unsigned char)len[l].ncont, 0, subs + used, n};
            used += n;
        }
    }
    return k;
}

static int build_node(gb_builder *b, uint32_t owner, uint32_t ncont, const gu_range *v, uint32_t nv,
                      const gb_memo **out)
{
    const gb_memo *m = memo_find(b, ncont, v, nv);
    if (m) {
        *out = m;
        return 0;
    }
    gu_item *it = malloc(256 * sizeof *it);
    gu_range *subs = malloc((nv + 256) * sizeof *subs);
    uint32_t rule, n_alts = 0;
    int rc = (it && subs) ? gb_rule_helper(b, owner, &rule)
                          : gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory in a class");
    if (!rc) {
        uint32_t k = ncont == 4 ? items_root(v, nv, it, subs) : items_cont(ncont, v, nv, it, subs);
        rc = emit_groups(b, rule, owner, it, k, &n_alts);
    }
    if (!rc)
        rc = gb_end_rule(b, rule);
    if (!rc)
        rc = memo_add(b, ncont, v, nv, rule, n_alts == 1);
    free(it);
    free(subs);
    if (!rc)
        *out = &b->memo[b->n_memo - 1];
    return rc;
}

int gu_push_set(gb_builder *b, uint32_t rule, uint32_t owner, gu_range *r, size_t n, int negate)
{
    n = merge_ranges(r, n);
    gu_range *v = malloc((n + 2) * sizeof *v);
    if (!v)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory compiling a class");
    uint32_t nv = (uint32_t)finish_set(r, n, negate, v);
    int rc;
    if (nv == 0 || v[nv - 1].hi < 0x80) { /* ASCII only (or empty: never matches) */
        gr_class c = {{0}};
        for (uint32_t i = 0; i < nv; i++)
            for (uint32_t x = v[i].lo; x <= v[i].hi; x++)
                c.bits[x >> 6] |= 1ull << (x & 63);
        rc = gb_push_class(b, rule, &c);
    } else {
        rc = push_node(b, rule, owner, 4, v, nv);
    }
    free(v);
    return rc;
}

int gu_push_codepoint(gb_builder *b, uint32_t rule, uint32_t cp, long pos)
{
    unsigned char u[4];
    int n;
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return gr_fail(b->err, MHLA_GRAMMAR_SYNTAX, pos,
                       "U+%04X is not a character UTF-8 can encode", (unsigned)cp);
    if (cp < 0x80) {
        u[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (unsigned char)(0xC0 | cp >> 6);
        u[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (unsigned char)(0xE0 | cp >> 12);
        u[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        u[0] = (unsigned char)(0xF0 | cp >> 18);
        u[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        gr_class c = {{0}};
        c.bits[u[i] >> 6] |= 1ull << (u[i] & 63);
        rc = gb_push_class(b, rule, &c);
    }
    return rc;
}
