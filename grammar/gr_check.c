/*
 * gr_check.c — what a grammar must be before it is used: every referenced
 * rule defined, and no rule able to reach itself before matching a byte
 * (left recursion, direct, indirect, or behind rules that match the empty
 * string), which would make the expansion of stacks endless.
 */
#include "gr_core.h"

#include <stdlib.h>

/* 1 when the alternative starting at e[*i] can match the empty string;
 * *i is left past its GR_ALT/GR_END. */
static int alt_nullable(const gr_elem *e, uint32_t *i, const unsigned char *nullable)
{
    int all = 1;
    for (; e[*i].kind != GR_ALT && e[*i].kind != GR_END; ++*i)
        if (e[*i].kind == GR_BYTES || (e[*i].kind == GR_RULE && !nullable[e[*i].arg]))
            all = 0;
    ++*i;
    return all;
}

static int rule_nullable(const gb_seq *s, const unsigned char *nullable)
{
    uint32_t i = 0;
    while (i < s->n) {
        if (alt_nullable(s->e, &i, nullable))
            return 1;
    }
    return 0;
}

int gr_nullable(const gb_builder *b, unsigned char **out)
{
    unsigned char *nl = calloc(b->n_rules ? b->n_rules : 1, 1);
    if (!nl)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory checking rules");
    /* passes to a fixed point, alternating directions so chains written in
     * either order settle in few passes */
    for (int changed = 1, pass = 0; changed; pass++) {
        changed = 0;
        for (uint32_t k = 0; k < b->n_rules; k++) {
            uint32_t r = (pass & 1) ? b->n_rules - 1 - k : k;
            if (!nl[r] && rule_nullable(&b->rules[r], nl)) {
                nl[r] = 1;
                changed = 1;
            }
        }
    }
    *out = nl;
    return 0;
}

static int check_defined(gb_builder *b)
{
    for (uint32_t r = 0; r < b->n_rules; r++) {
        if (b->names[r] && b->def_pos[r] < 0)
            return gr_fail(b->err, MHLA_GRAMMAR_SYNTAX, b->ref_pos[r],
                           "undefined rule '%s' (referenced at offset %ld)", b->names[r],
                           b->ref_pos[r]);
    }
    return 0;
}

/* The rules r can reach before a byte: CSR arrays start (n_rules + 1), to. */
static int left_edges(gb_builder *b, const unsigned char *nl, uint32_t **start, uint32_t **to)
{
    uint32_t *st = calloc((size_t)b->n_rules + 1, sizeof *st), n = 0;
    uint32_t *t = malloc(((size_t)b->n_elems + 1) * sizeof *t);
    if (!st || !t) {
        free(st);
        free(t);
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory checking rules");
    }
    for (uint32_t r = 0; r < b->n_rules; r++) {
        const gr_elem *e = b->rules[r].e;
        int open = 1; /* still at the alternative's start (all before it nullable) */
        st[r] = n;
        for (uint32_t i = 0; i < b->rules[r].n; i++) {
            if (e[i].kind == GR_ALT || e[i].kind == GR_END)
                open = 1;
            else if (open && e[i].kind == GR_RULE)
                t[n++] = e[i].arg;
            if (e[i].kind == GR_BYTES || (e[i].kind == GR_RULE && !nl[e[i].arg]))
                open = 0;
        }
    }
    st[b->n_rules] = n;
    *start = st;
    *to = t;
    return 0;
}

static int report_cycle(gb_builder *b, uint32_t r)
{
    uint32_t u = b->owner[r];
    return gr_fail(b->err, MHLA_GRAMMAR_SYNTAX, b->def_pos[u],
                   "left recursion: rule '%s' can reach itself before matching a character",
                   b->names[u] ? b->names[u] : "?");
}

/* Depth-first search without recursion (a chain may be GR_MAX_RULES long):
 * a rule met again while still open closes a cycle. */
static int find_cycle(gb_builder *b, const uint32_t *st, const uint32_t *to)
{
    uint32_t n = b->n_rules;
    unsigned char *color = calloc(n ? n : 1, 1); /* 0 new, 1 open, 2 done */
    uint32_t *node = malloc((n ? n : 1) * sizeof *node), *edge = malloc((n ? n : 1) * sizeof *edge);
    int rc = (color && node && edge) ? 0 : gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory");
    for (uint32_t s = 0; s < n && !rc; s++) {
        if (color[s])
            continue;
        uint32_t depth = 1;
        node[0] = s, edge[0] = st[s], color[s] = 1;
        while (depth && !rc) {
            uint32_t r = node[depth - 1];
            if (edge[depth - 1] == st[r + 1]) {
                color[r] = 2;
                depth--;
                continue;
            }
            uint32_t v = to[edge[depth - 1]++];
            if (color[v] == 1)
                rc = report_cycle(b, v);
            else if (color[v] == 0)
                node[depth] = v, edge[depth] = st[v], color[v] = 1, depth++;
        }
    }
    free(color);
    free(node);
    free(edge);
    return rc;
}

int gr_check_rules(gb_builder *b)
{
    int rc = check_defined(b);
    unsigned char *nl = NULL;
    uint32_t *st = NULL, *to = NULL;
    if (!rc)
        rc = gr_nullable(b, &nl);
    if (!rc)
        rc = left_edges(b, nl, &st, &to);
    if (!rc)
        rc = find_cycle(b, st, to);
    free(nl);
    free(st);
    free(to);
    return rc;
}
