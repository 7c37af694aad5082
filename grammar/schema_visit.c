/*
 * schema_visit.c — one schema node to one rule: its keywords checked against
 * the ones this converter knows, the node's kind chosen ($ref, allOf, anyOf /
 * oneOf, a list of types, const, enum, then the type's own keywords), and
 * every keyword the chosen builder did not use refused by name.
 */
#include "schema_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every keyword known here. Annotations (the first group) never constrain a
 * value and are skipped ("id" is draft 4's "$id"); $defs/definitions only
 * hold schemas for $ref. */
static const char *const KEYWORDS[] = {"title", "description", "$schema", "$id", "id", "examples",
                                       "default", "$comment", "readOnly", "writeOnly", "deprecated",
                                       "$defs", "definitions", "$anchor",
                                       /* the served ones */
                                       "$ref", "allOf", "anyOf", "oneOf", "type", "const", "enum",
                                       "properties", "required", "additionalProperties", "items",
                                       "prefixItems", "additionalItems", "minItems", "maxItems",
                                       "uniqueItems", "minLength", "maxLength", "pattern", "format",
                                       "minimum", "maximum", "exclusiveMinimum",
                                       "exclusiveMaximum"};
#define N_ANNOTATIONS 14
#define N_KEYWORDS (sizeof KEYWORDS / sizeof KEYWORDS[0])
#define ANNOTATIONS ((((sc_kw)1) << N_ANNOTATIONS) - 1)

sc_kw sc_kw_bit(const char *keyword)
{
    for (size_t i = 0; i < N_KEYWORDS; i++)
        if (strcmp(KEYWORDS[i], keyword) == 0)
            return ((sc_kw)1) << i;
    return 0;
}

int sc_kw_is_annotation(const char *keyword) { return (sc_kw_bit(keyword) & ANNOTATIONS) != 0; }

/* The node's keywords as bits; an unknown keyword or a repeated member fails. */
static int kw_scan(sc_conv *c, const cJSON *schema, sc_kw *present)
{
    int n = 0;
    *present = 0;
    for (const cJSON *k = schema->child; k; k = k->next, n++) {
        sc_kw bit = sc_kw_bit(k->string);
        size_t old = sc_path_push(c, k->string);
        int rc = 0;
        if (n >= SC_MAX_MEMBERS)
            rc = sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: more than %d members in an object",
                         SC_MAX_MEMBERS);
        else if (!bit)
            rc = sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: keyword '%s' is not served",
                         k->string);
        else if (*present & bit)
            rc = sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: keyword '%s' appears twice", k->string);
        sc_path_pop(c, old);
        if (rc)
            return rc;
        *present |= bit;
    }
    return 0;
}

int sc_kw_check(sc_conv *c, const cJSON *schema, sc_kw used, const char *served_as)
{
    for (const cJSON *k = schema->child; k; k = k->next) {
        sc_kw bit = sc_kw_bit(k->string);
        if ((bit & ANNOTATIONS) || (bit & used))
            continue;
        size_t old = sc_path_push(c, k->string);
        int rc = sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: keyword '%s' is not served on %s",
                         k->string, served_as);
        sc_path_pop(c, old);
        return rc;
    }
    return 0;
}

int sc_count(sc_conv *c, const cJSON *schema, const char *keyword, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(schema, keyword);
    *out = -1;
    if (!v)
        return 0;
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 0) || d != floor(d)) {
        size_t old = sc_path_push(c, keyword);
        int rc =
            sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: '%s' must be a non-negative integer", keyword);
        sc_path_pop(c, old);
        return rc;
    }
    if (d > SC_MAX_REPEAT && strncmp(keyword, "max", 3) != 0)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: '%s' %.0f is over the cap of %d", keyword, d,
                       SC_MAX_REPEAT);
    /* a larger maximum is served as the cap (callers clamp): no cast past long's range */
    *out = d > SC_MAX_REPEAT ? SC_MAX_REPEAT + 1 : (long)d;
    return 0;
}

int sc_visit(sc_conv *c, const cJSON *schema, const char *name, const char **out)
{
    char *body = NULL;
    int rc = sc_build(c, schema, name, &body);
    if (!rc)
        rc = sc_rule_add(c, name, body, out);
    free(body);
    return rc;
}

static int dup_body(sc_conv *c, const char *text, char **body)
{
    *body = strdup(text);
    return *body ? 0 : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
}

static int builtin_body(sc_conv *c, const char *which, char **body)
{
    const char *rule;
    int rc = sc_rule_builtin(c, which, &rule);
    return rc ? rc : dup_body(c, rule, body);
}

/* Any JSON value (a schema without constraints, or true). */
static int any_value(sc_conv *c, const cJSON *schema, char **body)
{
    const char *name;
    int rc = schema ? sc_kw_check(c, schema, 0, "a schema without type") : 0;
    if (!rc)
        rc = sc_rule_builtin(c, "value", &name);
    return rc ? rc : dup_body(c, name, body);
}

int sc_build_union(sc_conv *c, const cJSON *schema, const char *name, sc_kw present, char **body);
int sc_build_literals(sc_conv *c, const cJSON *schema, sc_kw *used, char **body);
int sc_build_ref(sc_conv *c, const cJSON *schema, char **body);

/* A node with one "type" (or none): its type's builder. */
static int build_typed(sc_conv *c, const cJSON *schema, const char *name, char **body)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : "";
    sc_kw used = sc_kw_bit("type");
    int rc;
    if (t && !cJSON_IsString(t))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'type' must be a string or a list");
    if (!strcmp(type, "object"))
        rc = sc_build_object(c, schema, name, &used, body);
    else if (!strcmp(type, "array"))
        rc = sc_build_array(c, schema, name, &used, body);
    else if (!strcmp(type, "string"))
        rc = sc_build_string(c, schema, name, &used, body);
    else if (!strcmp(type, "integer"))
        rc = sc_build_integer(c, schema, &used, body);
    else if (!strcmp(type, "number"))
        rc = sc_build_number(c, schema, &used, body);
    else if (!strcmp(type, "boolean") || !strcmp(type, "null"))
        rc = builtin_body(c, type, body);
    else
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: unknown type '%s'", type);
    if (!rc)
        rc = sc_kw_check(c, schema, used, type);
    return rc;
}

/* No "type": the kind its keywords name (llama.cpp's reading), or any value. */
static int build_untyped(sc_conv *c, const cJSON *schema, const char *name, sc_kw present,
                         char **body)
{
    static const char *const kinds[][6] = {
        {"object", "properties", "required", "additionalProperties", NULL},
        {"array", "items", "prefixItems", "additionalItems", "minItems", "maxItems"},
        {"string", "pattern", "format", "minLength", "maxLength", NULL},
        {"number", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", NULL},
    };
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (int i = 1; i < 6 && kinds[k][i]; i++) {
            if (!(present & sc_kw_bit(kinds[k][i])))
                continue;
            cJSON *typed = cJSON_CreateObject();
            int rc = typed ? sc_own(c, typed) : sc_fail(c, MHLA_GRAMMAR_NOMEM, "out of memory");
            for (const cJSON *e = schema->child; !rc && e; e = e->next)
                if (!cJSON_AddItemReferenceToObject(typed, e->string, (cJSON *)e))
                    rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
            if (!rc && !cJSON_AddStringToObject(typed, "type", kinds[k][0]))
                rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
            return rc ? rc : build_typed(c, typed, name, body);
        }
    }
    return any_value(c, schema, body);
}

static int build_node(sc_conv *c, const cJSON *schema, const char *name, char **body)
{
    sc_kw present;
    int rc = kw_scan(c, schema, &present);
    if (rc)
        return rc;
    sc_kw annot = ANNOTATIONS;
    if (present & sc_kw_bit("$ref") && !(present & ~annot & ~sc_kw_bit("$ref")))
        return sc_build_ref(c, schema, body);
    if (present & (sc_kw_bit("$ref") | sc_kw_bit("allOf"))) {
        const cJSON *merged;
        rc = sc_merge_all_of(c, schema, &merged);
        return rc ? rc : sc_build(c, merged, name, body);
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(schema, "type");
    if (present & (sc_kw_bit("anyOf") | sc_kw_bit("oneOf")) || cJSON_IsArray(t))
        return sc_build_union(c, schema, name, present, body);
    if (present & (sc_kw_bit("const") | sc_kw_bit("enum"))) {
        sc_kw used = sc_kw_bit("type");
        rc = sc_build_literals(c, schema, &used, body);
        return rc ? rc : sc_kw_check(c, schema, used, "const/enum");
    }
    if (t)
        return build_typed(c, schema, name, body);
    return build_untyped(c, schema, name, present, body);
}

int sc_build(sc_conv *c, const cJSON *schema, const char *name, char **body)
{
    *body = NULL;
    if (cJSON_IsTrue(schema))
        return any_value(c, NULL, body);
    if (cJSON_IsFalse(schema))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: 'false' admits no value");
    if (!cJSON_IsObject(schema))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: a schema must be an object or a boolean");
    if (++c->visits > SC_MAX_VISITS)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: more than %d schema nodes converted",
                       SC_MAX_VISITS);
    if (c->depth >= SC_MAX_DEPTH)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: nested deeper than %d", SC_MAX_DEPTH);
    c->depth++;
    int rc = build_node(c, schema, name, body);
    c->depth--;
    if (rc) {
        free(*body);
        *body = NULL;
    }
    return rc;
}
