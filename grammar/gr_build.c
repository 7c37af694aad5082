/*
 * gr_build.c — the rule builder: rules grow element by element while a
 * grammar is parsed, byte classes are stored once, and every cap of
 * grammar_internal.h is checked as things are added, so that no input can
 * make a compile grow without bound.
 */
#include "gr_core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gr_fail(mhla_grammar_error *err, int code, long pos, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->pos = pos;
    err->path[0] = '\0';
    return code;
}

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem, mhla_grammar_error *err)
{
    if (need <= *cap)
        return 0;
    uint32_t c = *cap ? *cap : 8;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory growing the grammar");
    *p = q;
    *cap = c;
    return 0;
}

static uint32_t hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 16777619u;
    return h;
}

int gb_init(gb_builder *b, mhla_grammar_error *err)
{
    memset(b, 0, sizeof *b);
    b->err = err;
    b->name_hash_cap = 1024;
    b->class_hash_cap = 1024;
    b->name_hash = calloc(b->name_hash_cap, sizeof *b->name_hash);
    b->class_hash = calloc(b->class_hash_cap, sizeof *b->class_hash);
    if (!b->name_hash || !b->class_hash) {
        gb_free(b);
        return gr_fail(err, MHLA_GRAMMAR_NOMEM, -1, "out of memory starting a grammar");
    }
    return 0;
}

void gb_free(gb_builder *b)
{
    for (uint32_t r = 0; r < b->n_rules; r++) {
        free(b->rules[r].e);
        free(b->names[r]);
    }
    free(b->rules);
    free(b->names);
    free(b->def_pos);
    free(b->ref_pos);
    free(b->owner);
    free(b->name_hash);
    free(b->classes);
    free(b->class_hash);
    gu_memo_free(b);
    memset(b, 0, sizeof *b);
}

/* The per-rule arrays all grow together. */
static int grow_rules(gb_builder *b)
{
    uint32_t need = b->n_rules + 1, cap = b->cap_rules;
    if (need > GR_MAX_RULES)
        return gr_fail(b->err, MHLA_GRAMMAR_LIMIT, -1, "more than %d rules (helper rules included)",
                       GR_MAX_RULES);
    if (need <= cap)
        return 0;
    uint32_t c = cap, c2 = cap, c3 = cap, c4 = cap, c5 = cap;
    if (grow((void **)&b->rules, &c, need, sizeof *b->rules, b->err) ||
        grow((void **)&b->names, &c2, need, sizeof *b->names, b->err) ||
        grow((void **)&b->def_pos, &c3, need, sizeof *b->def_pos, b->err) ||
        grow((void **)&b->ref_pos, &c4, need, sizeof *b->ref_pos, b->err) ||
        grow((void **)&b->owner, &c5, need, sizeof *b->owner, b->err))
        return MHLA_GRAMMAR_NOMEM; /* arrays already grown keep their larger size: harmless */
    b->cap_rules = c;
    return 0;
}

static int new_rule(gb_builder *b, char *name, uint32_t owner, uint32_t *id)
{
    int rc = grow_rules(b);
    if (rc)
        return rc;
    uint32_t r = b->n_rules++;
    memset(&b->rules[r], 0, sizeof b->rules[r]);
    b->names[r] = name;
    b->def_pos[r] = -1;
    b->ref_pos[r] = -1;
    b->owner[r] = name ? r : owner;
    *id = r;
    return 0;
}

int gb_rule_helper(gb_builder *b, uint32_t owner, uint32_t *id)
{
    return new_rule(b, NULL, owner, id);
}

/* Doubles the name table when it is half full (user rules only). */
static int rehash_names(gb_builder *b)
{
    uint32_t cap = b->name_hash_cap * 2;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory indexing rule names");
    for (uint32_t r = 0; r < b->n_rules; r++) {
        if (!b->names[r])
            continue;
        uint32_t h = hash_bytes(b->names[r], strlen(b->names[r])) & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = r + 1;
    }
    free(b->name_hash);
    b->name_hash = t;
    b->name_hash_cap = cap;
    return 0;
}

int gb_rule_named(gb_builder *b, const char *name, size_t len, long ref_at, uint32_t *id)
{
    uint32_t mask = b->name_hash_cap - 1, h = hash_bytes(name, len) & mask;
    for (; b->name_hash[h]; h = (h + 1) & mask) {
        uint32_t r = b->name_hash[h] - 1;
        if (strlen(b->names[r]) == len && memcmp(b->names[r], name, len) == 0) {
            if (ref_at >= 0 && b->ref_pos[r] < 0)
                b->ref_pos[r] = ref_at;
            *id = r;
            return 0;
        }
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory naming a rule");
    memcpy(copy, name, len);
    copy[len] = '\0';
    int rc = new_rule(b, copy, 0, id);
    if (rc) {
        free(copy);
        return rc;
    }
    b->name_hash[h] = *id + 1;
    b->ref_pos[*id] = ref_at;
    return (b->n_rules * 2 > b->name_hash_cap) ? rehash_names(b) : 0;
}

int gb_push_elems(gb_builder *b, uint32_t rule, const gr_elem *e, uint32_t n)
{
    if (b->n_elems + n > GR_MAX_ELEMS)
        return gr_fail(b->err, MHLA_GRAMMAR_LIMIT, -1, "more than %d elements in the rules",
                       GR_MAX_ELEMS);
    gb_seq *s = &b->rules[rule];
    gr_elem *copy = NULL;
    if (n && s->e && e >= s->e &&
        e < s->e + s->n) { /* a part of this rule: it may move on growth */
        copy = malloc((size_t)n * sizeof *copy);
        if (!copy)
            return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory copying elements");
        memcpy(copy, e, (size_t)n * sizeof *copy);
        e = copy;
    }
    int rc = grow((void **)&s->e, &s->cap, s->n + n, sizeof *s->e, b->err);
    if (!rc && n) {
        memcpy(s->e + s->n, e, (size_t)n * sizeof *e);
        s->n += n;
        b->n_elems += n;
    }
    free(copy);
    return rc;
}

int gb_push(gb_builder *b, uint32_t rule, gr_kind kind, uint32_t arg)
{
    gr_elem e = {.kind = kind, .arg = arg};
    return gb_push_elems(b, rule, &e, 1);
}

void gb_truncate(gb_builder *b, uint32_t rule, uint32_t n)
{
    if (n < b->rules[rule].n) {
        b->n_elems -= b->rules[rule].n - n;
        b->rules[rule].n = n;
    }
}

int gb_end_rule(gb_builder *b, uint32_t rule) { return gb_push(b, rule, GR_END, 0); }

static int rehash_classes(gb_builder *b)
{
    uint32_t cap = b->class_hash_cap * 2;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory indexing byte classes");
    for (uint32_t i = 0; i < b->n_classes; i++) {
        uint32_t h = hash_bytes(&b->classes[i], sizeof(gr_class)) & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = i + 1;
    }
    free(b->class_hash);
    b->class_hash = t;
    b->class_hash_cap = cap;
    return 0;
}

/* The index of class c, stored once however often it is used. */
static int class_id(gb_builder *b, const gr_class *c, uint32_t *id)
{
    uint32_t mask = b->class_hash_cap - 1, h = hash_bytes(c, sizeof *c) & mask;
    for (; b->class_hash[h]; h = (h + 1) & mask) {
        if (memcmp(&b->classes[b->class_hash[h] - 1], c, sizeof *c) == 0) {
            *id = b->class_hash[h] - 1;
            return 0;
        }
    }
    int rc = grow((void **)&b->classes, &b->cap_classes, b->n_classes + 1, sizeof *c, b->err);
    if (rc)
        return rc;
    *id = b->n_classes;
    b->classes[b->n_classes++] = *c;
    b->class_hash[h] = *id + 1;
    return (b->n_classes * 2 > b->class_hash_cap) ? rehash_classes(b) : 0;
}

int gb_push_class(gb_builder *b, uint32_t rule, const gr_class *c)
{
    uint32_t id;
    int rc = class_id(b, c, &id);
    return rc ? rc : gb_push(b, rule, GR_BYTES, id);
}

/* The flattened arrays of the compiled grammar. */
static int flatten(gb_builder *b, mhla_grammar *g)
{
    g->elems = malloc((size_t)(b->n_elems ? b->n_elems : 1) * sizeof *g->elems);
    g->rule_start = malloc((size_t)b->n_rules * sizeof *g->rule_start);
    g->rule_names = calloc(b->n_rules, sizeof *g->rule_names);
    g->classes = malloc((size_t)(b->n_classes ? b->n_classes : 1) * sizeof *g->classes);
    if (!g->elems || !g->rule_start || !g->rule_names || !g->classes)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory compiling the grammar");
    g->n_rules = b->n_rules;
    uint32_t at = 0;
    for (uint32_t r = 0; r < b->n_rules; r++) {
        g->rule_start[r] = at;
        if (b->rules[r].n)
            memcpy(g->elems + at, b->rules[r].e, (size_t)b->rules[r].n * sizeof *g->elems);
        at += b->rules[r].n;
        g->rule_names[r] = strdup(b->names[r] ? b->names[r] : "");
        if (!g->rule_names[r])
            return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory naming rules");
    }
    g->n_elems = at;
    if (b->n_classes)
        memcpy(g->classes, b->classes, (size_t)b->n_classes * sizeof *g->classes);
    g->n_classes = b->n_classes;
    return 0;
}

int gb_finish(gb_builder *b, uint32_t root, mhla_grammar **out)
{
    mhla_grammar *g = calloc(1, sizeof *g);
    if (!g)
        return gr_fail(b->err, MHLA_GRAMMAR_NOMEM, -1, "out of memory compiling the grammar");
    g->refs = 1;
    g->root = root;
    int rc = flatten(b, g);
    if (rc) {
        if (!g->rule_names)
            g->n_rules = 0;
        mhla_grammar_free(g);
        return rc;
    }
    *out = g;
    return 0;
}
