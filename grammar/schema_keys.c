/*
 * schema_keys.c — the extra keys of an object with additionalProperties
 * true or a schema: any key but the named ones (a trie of the names turned
 * into "not one of these strings", as llama.cpp's _not_strings), written
 * without escapes so that no other spelling of a named key gets through.
 */
#include "schema_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint32_t *cp;
    size_t n;
} key_cps;

static int key_cmp(const void *a, const void *b)
{
    const key_cps *x = a, *y = b;
    for (size_t i = 0; i < x->n && i < y->n; i++)
        if (x->cp[i] != y->cp[i])
            return x->cp[i] < y->cp[i] ? -1 : 1;
    return x->n < y->n ? -1 : x->n > y->n;
}

/* The names as code points, those that need an escape left out (an extra
 * key never has one, so it cannot be such a name). */
static int keys_decode(sc_conv *c, const sc_props *ps, key_cps *k, int *n)
{
    *n = 0;
    for (int i = 0; i < ps->n; i++) {
        size_t len = strlen(ps->p[i].key), at = 0, m = 0;
        uint32_t *cp = malloc((len + 1) * sizeof *cp), v;
        if (!cp)
            return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
        int plain = 1;
        while (at < len && plain) {
            if (sc_utf8_next(ps->p[i].key, len, &at, &v) != 0) {
                free(cp);
                return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: a property name is not UTF-8");
            }
            plain = v >= 0x20 && v != '"' && v != '\\';
            cp[m++] = v;
        }
        if (!plain) {
            free(cp);
            continue;
        }
        k[(*n)++] = (key_cps){cp, m};
    }
    qsort(k, (size_t)*n, sizeof *k, key_cmp);
    return 0;
}

/* Keys k[0, n) share their first depth code points: the strings that go on
 * from there and are none of them. */
static int trie_emit(sc_buf *b, const key_cps *k, int n, size_t depth)
{
    sc_buf rejects = {0};
    int first = 1, i = 0;
    while (i < n && k[i].n == depth)
        i++;
    while (i < n) {
        uint32_t cp = k[i].cp[depth];
        int j = i, deeper = 0, ends = 0;
        for (; j < n && k[j].cp[depth] == cp; j++) {
            deeper |= k[j].n > depth + 1;
            ends |= k[j].n == depth + 1;
        }
        sc_buf_add(b, first ? "[" : " | [");
        sc_class_cp(b, cp);
        sc_buf_add(b, "]");
        if (deeper) {
            sc_buf_add(b, " ( ");
            trie_emit(b, k + i, j - i, depth + 1);
            sc_buf_add(b, " )");
        } else if (ends) {
            sc_buf_add(b, " key-char+");
        }
        sc_class_cp(&rejects, cp);
        first = 0;
        i = j;
    }
    sc_buf_add(b, first ? "" : " | ");
    sc_buf_add(b, "[^\\\"\\\\\\x00-\\x1F");
    sc_buf_add(b, rejects.p ? rejects.p : "");
    sc_buf_add(b, "] key-char*");
    int err = rejects.err;
    sc_buf_free(&rejects);
    return err ? (b->err = err) : b->err;
}

static int key_rule(sc_conv *c, const sc_props *ps, const char *sub, const char **out)
{
    key_cps *k = calloc((size_t)ps->n + 1, sizeof *k);
    int n = 0, rc = k ? keys_decode(c, ps, k, &n) : sc_fail(c, MHLA_GRAMMAR_NOMEM, "out of memory");
    sc_buf b = {0};
    int empty_named = n > 0 && k[0].n == 0;
    if (!rc) {
        sc_buf_add(&b, "\"\\\"\" ( ");
        trie_emit(&b, k, n, 0);
        sc_buf_add(&b, empty_named ? " ) \"\\\"\"" : " )? \"\\\"\"");
        rc = b.err ? sc_buf_fail(c, &b) : 0;
    }
    char *kname = NULL;
    if (!rc)
        rc = sc_name_join(c, sub, "k", &kname);
    if (!rc)
        rc = sc_rule_builtin(c, "key-char", &(const char *){NULL});
    if (!rc)
        rc = sc_rule_add(c, kname, b.p, out);
    free(kname);
    for (int i = 0; k && i < n; i++)
        free(k[i].cp);
    free(k);
    sc_buf_free(&b);
    return rc;
}

static int value_rule(sc_conv *c, const sc_props *ps, const char *sub, const char **out)
{
    if (!cJSON_IsObject(ps->extra))
        return sc_rule_builtin(c, "value", out);
    char *vname = NULL;
    int rc = sc_name_join(c, sub, "value", &vname);
    size_t old = sc_path_push(c, "additionalProperties");
    if (!rc)
        rc = sc_visit(c, ps->extra, vname, out);
    sc_path_pop(c, old);
    free(vname);
    return rc;
}

int sc_object_extra(sc_conv *c, const sc_props *ps, const char *name, const char **kv)
{
    char *sub = NULL, *kvname = NULL;
    const char *key, *value;
    sc_buf b = {0};
    int rc = sc_name_join(c, name, "additional", &sub);
    if (!rc)
        rc = value_rule(c, ps, sub, &value);
    if (!rc)
        rc = ps->n ? key_rule(c, ps, sub, &key) : sc_rule_builtin(c, "string", &key);
    if (!rc) {
        sc_buf_addf(&b, "%s space \":\" space %s", key, value);
        rc = b.err ? sc_buf_fail(c, &b) : sc_name_join(c, sub, "kv", &kvname);
    }
    if (!rc)
        rc = sc_rule_add(c, kvname, b.p, kv);
    free(sub);
    free(kvname);
    sc_buf_free(&b);
    return rc;
}
