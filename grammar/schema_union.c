/*
 * schema_union.c — alternatives: anyOf, oneOf (served as anyOf when its
 * branches cannot both match, refused otherwise), a list of types, and the
 * literal values of const and enum.
 */
#include "schema_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SC_MAX_ONEOF 256 /* branches checked pairwise for overlap */

static int value_has_type(const cJSON *v, const char *type)
{
    if (!strcmp(type, "string"))
        return cJSON_IsString(v);
    if (!strcmp(type, "number"))
        return cJSON_IsNumber(v);
    if (!strcmp(type, "integer"))
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(type, "boolean"))
        return cJSON_IsBool(v);
    if (!strcmp(type, "null"))
        return cJSON_IsNull(v);
    if (!strcmp(type, "object"))
        return cJSON_IsObject(v);
    return !strcmp(type, "array") && cJSON_IsArray(v);
}

/* One literal of a const/enum value when it has the schema's type (if any). */
static int literal_add(sc_conv *c, sc_buf *b, const cJSON *v, const char *type, int *n)
{
    if (type && !value_has_type(v, type))
        return 0;
    if (*n)
        sc_buf_add(b, " | ");
    (*n)++;
    return sc_json_lit(c, b, v);
}

int sc_build_literals(sc_conv *c, const cJSON *schema, sc_kw *used, char **body)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(schema, "const");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(schema, "enum");
    const char *type = cJSON_IsString(t) ? t->valuestring : NULL;
    sc_buf b = {0};
    int n = 0, rc = 0;
    *used |= sc_kw_bit("const") | sc_kw_bit("enum");
    if (ev && (!cJSON_IsArray(ev) || !ev->child))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'enum' must be a non-empty list");
    sc_buf_add(&b, "( ");
    for (const cJSON *v = cv ? cv : ev->child; v && !rc; v = cv ? NULL : v->next) {
        int in_enum = !cv || !ev;
        for (const cJSON *e = ev && cv ? ev->child : NULL; e && !in_enum; e = e->next)
            in_enum = cJSON_Compare(e, v, 1);
        rc = in_enum ? literal_add(c, &b, v, type, &n) : 0;
    }
    sc_buf_add(&b, " )");
    if (!rc && b.err)
        rc = sc_buf_fail(c, &b);
    if (!rc && n == 0)
        rc = sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                     "schema: no const/enum value is of the schema's type: no value is valid");
    if (rc)
        sc_buf_free(&b);
    *body = rc ? NULL : b.p;
    return rc;
}

/* A new schema (kept until the end): schema's members but skip, plus extra. */
static int schema_without(sc_conv *c, const cJSON *schema, const char *skip, cJSON *extra,
                          const char *extra_key, cJSON **out)
{
    cJSON *o = cJSON_CreateObject();
    int rc = o ? sc_own(c, o) : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (const cJSON *e = schema->child; !rc && e; e = e->next)
        if (strcmp(e->string, skip) != 0 &&
            !cJSON_AddItemReferenceToObject(o, e->string, (cJSON *)e))
            rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    if (!rc && extra && !cJSON_AddItemReferenceToObject(o, extra_key, extra))
        rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    *out = rc ? NULL : o;
    return rc;
}

/* Branch i of an anyOf/oneOf whose node has other keywords: both merged. */
static int branch_merged(sc_conv *c, const cJSON *siblings, const cJSON *branch, const cJSON **out)
{
    cJSON *wrap = cJSON_CreateObject(), *list = cJSON_CreateArray();
    int rc = wrap ? sc_own(c, wrap) : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    if (!rc && (!list || !cJSON_AddItemToObject(wrap, "allOf", list))) {
        cJSON_Delete(list);
        rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    }
    if (!rc && (!cJSON_AddItemReferenceToArray(list, (cJSON *)siblings) ||
                !cJSON_AddItemReferenceToArray(list, (cJSON *)branch)))
        rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    return rc ? rc : sc_merge_all_of(c, wrap, out);
}

/* The branches as the grammar serves them: each merged with the siblings. */
static int union_branches(sc_conv *c, const cJSON *schema, const char *key, const cJSON ***out,
                          int *n)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(schema, key);
    cJSON *siblings = NULL;
    int rc = 0, has_siblings = 0, k = 0;
    if (!cJSON_IsArray(list) || !list->child)
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: '%s' must be a non-empty list", key);
    for (const cJSON *e = schema->child; e; e = e->next)
        has_siblings |= strcmp(e->string, key) != 0 && !sc_kw_is_annotation(e->string);
    if (has_siblings)
        rc = schema_without(c, schema, key, NULL, NULL, &siblings);
    *n = cJSON_GetArraySize(list);
    *out = rc ? NULL : calloc((size_t)*n, sizeof **out);
    if (!rc && !*out)
        rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (const cJSON *e = list->child; !rc && e; e = e->next, k++) {
        size_t old = sc_path_push(c, key), o2 = sc_path_push_index(c, k);
        (*out)[k] = e;
        if (has_siblings)
            rc = branch_merged(c, siblings, e, &(*out)[k]);
        sc_path_pop(c, o2);
        sc_path_pop(c, old);
    }
    return rc;
}

/* oneOf: served only when no two branches can give the same value. */
static int oneof_check(sc_conv *c, const cJSON **br, int n)
{
    if (n > SC_MAX_ONEOF)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: oneOf with more than %d branches",
                       SC_MAX_ONEOF);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (!sc_disjoint(c, br[i], br[j]))
                return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                               "schema: oneOf branches %d and %d may both match (oneOf is served "
                               "only when its branches are disjoint)",
                               i, j);
    return 0;
}

static int union_rules(sc_conv *c, const cJSON **br, int n, const char *name, const char *key,
                       char **body)
{
    sc_buf b = {0};
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        char suffix[40], *sub = NULL;
        const char *rule;
        snprintf(suffix, sizeof suffix, "%s%d", name[0] ? "" : "alternative-", i);
        size_t old = sc_path_push(c, key), o2 = sc_path_push_index(c, i);
        rc = name[0] ? sc_name_join(c, name, suffix, &sub) : sc_name_join(c, "", suffix, &sub);
        if (!rc)
            rc = sc_visit(c, br[i], sub, &rule);
        free(sub);
        sc_path_pop(c, o2);
        sc_path_pop(c, old);
        if (!rc && i)
            sc_buf_add(&b, " | ");
        if (!rc)
            sc_buf_add(&b, rule);
    }
    if (!rc && b.err)
        rc = sc_buf_fail(c, &b);
    if (rc)
        sc_buf_free(&b);
    *body = rc ? NULL : b.p;
    return rc;
}

/* "type": [..]: one branch per type, the node's other keywords on each. */
static int type_branches(sc_conv *c, const cJSON *schema, const cJSON ***out, int *n)
{
    const cJSON *types = cJSON_GetObjectItemCaseSensitive(schema, "type");
    int k = 0, rc = 0;
    *n = cJSON_GetArraySize(types);
    if (*n == 0)
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'type' is an empty list");
    *out = calloc((size_t)*n, sizeof **out);
    if (!*out)
        return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (cJSON *t = types->child; t && !rc; t = t->next, k++) {
        cJSON *one;
        if (!cJSON_IsString(t))
            return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'type' lists a non-string");
        rc = schema_without(c, schema, "type", t, "type", &one);
        (*out)[k] = one;
    }
    return rc;
}

int sc_build_union(sc_conv *c, const cJSON *schema, const char *name, sc_kw present, char **body)
{
    int any = (present & sc_kw_bit("anyOf")) != 0, one = (present & sc_kw_bit("oneOf")) != 0;
    const cJSON **br = NULL;
    int n = 0, rc;
    if (any && one)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: anyOf and oneOf in one schema are not served");
    const char *key = any ? "anyOf" : one ? "oneOf" : "type";
    if (any || one)
        rc = union_branches(c, schema, key, &br, &n);
    else
        rc = type_branches(c, schema, &br, &n);
    if (!rc && one)
        rc = oneof_check(c, br, n);
    if (!rc)
        rc = union_rules(c, br, n, name, any || one ? key : "type", body);
    free(br);
    return rc;
}
