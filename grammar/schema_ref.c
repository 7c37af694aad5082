/*
 * schema_ref.c — local references: "#" and "#/…" JSON pointers into the
 * schema document ($defs, definitions or any other place). Each target is
 * converted once into a rule named after its pointer; a reference met again
 * while its target is being converted (recursion) names that rule.
 */
#include "schema_internal.h"

#include <stdlib.h>
#include <string.h>

static int hexval(char h)
{
    if (h >= '0' && h <= '9')
        return h - '0';
    if (h >= 'a' && h <= 'f')
        return h - 'a' + 10;
    if (h >= 'A' && h <= 'F')
        return h - 'A' + 10;
    return -1;
}

/* One pointer segment s[0, n) unescaped (%XX, ~1, ~0) into out. */
static int segment(const char *s, size_t n, char *out, size_t cap)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%' && i + 2 < n + 1 && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            ch = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else if (ch == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
            ch = s[i + 1] == '0' ? '~' : '/';
            i++;
        }
        if (k + 1 >= cap)
            return -1;
        out[k++] = ch;
    }
    out[k] = '\0';
    return 0;
}

static const cJSON *step(const cJSON *node, const char *seg)
{
    if (cJSON_IsObject(node))
        return cJSON_GetObjectItemCaseSensitive(node, seg);
    if (!cJSON_IsArray(node) || !seg[0] || strspn(seg, "0123456789") != strlen(seg))
        return NULL;
    return strlen(seg) > 9 ? NULL : cJSON_GetArrayItem(node, atoi(seg));
}

int sc_resolve_ref(sc_conv *c, const char *ref, const cJSON **target)
{
    if (ref[0] != '#')
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: $ref '%.80s' names another document (only '#…' is served)", ref);
    if (ref[1] != '\0' && ref[1] != '/')
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: $ref '%.80s' names an anchor (only JSON pointers are served)", ref);
    const cJSON *node = c->root;
    for (const char *p = ref + 1; *p == '/' && node;) {
        const char *end = strchr(p + 1, '/');
        size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
        char seg[256];
        if (segment(p + 1, n, seg, sizeof seg) != 0)
            return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: $ref '%.80s' has a long segment", ref);
        node = step(node, seg);
        p += n + 1;
    }
    if (!node)
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: $ref '%.80s' names nothing", ref);
    *target = node;
    return 0;
}

static int ref_record(sc_conv *c, const char *ref, const char *name)
{
    if (c->n_refs == c->cap_refs) {
        size_t cap = c->cap_refs ? c->cap_refs * 2 : 16;
        sc_ref *p = realloc(c->refs, cap * sizeof *p);
        if (!p)
            return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
        c->refs = p;
        c->cap_refs = cap;
    }
    sc_ref *r = &c->refs[c->n_refs];
    r->ref = strdup(ref);
    r->name = strdup(name);
    if (!r->ref || !r->name) {
        free(r->ref);
        free(r->name);
        return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    }
    c->n_refs++;
    return 0;
}

/* The target converted under its reserved rule name, with the error path
 * pointing into the target. */
static int ref_convert(sc_conv *c, const cJSON *target, const char *ref, const char *rule)
{
    char saved[sizeof c->path];
    size_t saved_len = c->path_len;
    memcpy(saved, c->path, sizeof saved);
    c->path_len = strlen(ref + 1) < sizeof c->path ? strlen(ref + 1) : 0;
    memcpy(c->path, ref + 1, c->path_len);
    c->path[c->path_len] = '\0';
    char *body = NULL;
    int rc = sc_build(c, target, rule, &body);
    memcpy(c->path, saved, sizeof saved);
    c->path_len = saved_len;
    if (!rc && strcmp(body, rule) == 0)
        rc = sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: $ref '%.80s' refers only to itself", ref);
    if (!rc)
        rc = sc_rule_define(c, rule, body);
    free(body);
    return rc;
}

int sc_build_ref(sc_conv *c, const cJSON *schema, char **body)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
    if (!cJSON_IsString(r))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: '$ref' must be a string");
    const char *ref = r->valuestring, *rule = NULL;
    for (size_t i = 0; i < c->n_refs && !rule; i++)
        if (strcmp(c->refs[i].ref, ref) == 0)
            rule = c->refs[i].name;
    int rc = 0;
    if (!rule) {
        const cJSON *target;
        char *name = NULL;
        rc = sc_resolve_ref(c, ref, &target);
        if (!rc)
            rc = sc_name_join(c, "ref", ref + 1, &name);
        if (!rc)
            rc = sc_rule_reserve(c, name, &rule);
        free(name);
        if (!rc)
            rc = ref_record(c, ref, rule);
        /* the recorded name stays where it is while more references are recorded */
        rule = rc ? NULL : c->refs[c->n_refs - 1].name;
        if (!rc)
            rc = ref_convert(c, target, ref, rule);
    }
    if (rc)
        return rc;
    *body = strdup(rule);
    return *body ? 0 : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
}
