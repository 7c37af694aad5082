/*
 * schema_disjoint.c — may two oneOf branches give the same value? oneOf is
 * served as anyOf only when they cannot: a value valid for two branches would
 * be invalid for the oneOf. The check is conservative (1 only when sure):
 * the branches' JSON types do not meet, their const/enum values differ, or
 * they are objects one of which requires a key the other's grammar never
 * writes, or requires with the other a key whose values are disjoint.
 */
#include "schema_internal.h"

#include <string.h>

enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_BOOL = 16, T_NULL = 32, T_ALL = 63 };
#define MAX_DEPTH 8

static unsigned type_bit(const char *t)
{
    static const char *const names[] = {"object",  "array", "string", "number",
                                        "boolean", "null",  "integer"};
    static const unsigned bits[] = {T_OBJ, T_ARR, T_STR, T_NUM, T_BOOL, T_NULL, T_NUM};
    for (int i = 0; i < 7; i++)
        if (!strcmp(t, names[i]))
            return bits[i];
    return T_ALL;
}

static unsigned value_bit(const cJSON *v)
{
    if (cJSON_IsObject(v))
        return T_OBJ;
    if (cJSON_IsArray(v))
        return T_ARR;
    if (cJSON_IsString(v))
        return T_STR;
    if (cJSON_IsNumber(v))
        return T_NUM;
    return cJSON_IsBool(v) ? T_BOOL : T_NULL;
}

/* A schema with only $ref (annotations aside): its target; else itself. */
static const cJSON *deref(sc_conv *c, const cJSON *s, int depth)
{
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    for (const cJSON *e = cJSON_IsObject(s) ? s->child : NULL; e && r; e = e->next)
        if (strcmp(e->string, "$ref") != 0 && !sc_kw_is_annotation(e->string))
            return s;
    const cJSON *t = NULL;
    if (!cJSON_IsString(r) || depth > MAX_DEPTH || sc_resolve_ref(c, r->valuestring, &t) != 0)
        return s;
    return deref(c, t, depth + 1);
}

static unsigned kinds_of_keywords(const cJSON *s)
{
    static const char *const kw[] = {"properties", "required",    "additionalProperties",
                                     "items",      "prefixItems", "minItems",
                                     "maxItems",   "pattern",     "format",
                                     "minLength",  "maxLength",   "minimum",
                                     "maximum"};
    static const unsigned bit[] = {T_OBJ, T_OBJ, T_OBJ, T_ARR, T_ARR, T_ARR, T_ARR,
                                   T_STR, T_STR, T_STR, T_STR, T_NUM, T_NUM};
    for (int i = 0; i < 13; i++)
        if (cJSON_GetObjectItemCaseSensitive(s, kw[i]))
            return bit[i];
    return T_ALL;
}

static unsigned types_of(sc_conv *c, const cJSON *s, int depth);

static unsigned types_of_list(sc_conv *c, const cJSON *list, int depth, int all)
{
    unsigned m = all ? T_ALL : 0;
    for (const cJSON *e = cJSON_IsArray(list) ? list->child : NULL; e; e = e->next)
        m = all ? m & types_of(c, e, depth + 1) : m | types_of(c, e, depth + 1);
    return cJSON_IsArray(list) && list->child ? m : T_ALL;
}

/* The JSON types the grammar of s may give (T_ALL when unsure). */
static unsigned types_of(sc_conv *c, const cJSON *s, int depth)
{
    s = deref(c, s, depth);
    if (!cJSON_IsObject(s) || depth > MAX_DEPTH)
        return T_ALL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(s, "enum");
    unsigned m = T_ALL;
    if (cJSON_IsString(t))
        m = type_bit(t->valuestring);
    if (cJSON_IsArray(t)) {
        m = 0;
        for (const cJSON *e = t->child; e; e = e->next)
            m |= cJSON_IsString(e) ? type_bit(e->valuestring) : T_ALL;
    }
    if (cv)
        m &= value_bit(cv);
    if (cJSON_IsArray(ev) && ev->child) {
        unsigned em = 0;
        for (const cJSON *e = ev->child; e; e = e->next)
            em |= value_bit(e);
        m &= em;
    }
    m &= types_of_list(c, cJSON_GetObjectItemCaseSensitive(s, "anyOf"), depth, 0);
    m &= types_of_list(c, cJSON_GetObjectItemCaseSensitive(s, "oneOf"), depth, 0);
    m &= types_of_list(c, cJSON_GetObjectItemCaseSensitive(s, "allOf"), depth, 1);
    return m == T_ALL && !t ? kinds_of_keywords(s) : m;
}

/* Both hold const/enum and no value is in both. */
static int literals_disjoint(const cJSON *a, const cJSON *b)
{
    const cJSON *la[2] = {cJSON_GetObjectItemCaseSensitive(a, "const"),
                          cJSON_GetObjectItemCaseSensitive(a, "enum")};
    const cJSON *lb[2] = {cJSON_GetObjectItemCaseSensitive(b, "const"),
                          cJSON_GetObjectItemCaseSensitive(b, "enum")};
    const cJSON *va = la[0] ? la[0] : cJSON_IsArray(la[1]) ? la[1]->child : NULL;
    const cJSON *vb0 = lb[0] ? lb[0] : cJSON_IsArray(lb[1]) ? lb[1]->child : NULL;
    if (!va || !vb0)
        return 0;
    for (; va; va = la[0] ? NULL : va->next)
        for (const cJSON *vb = vb0; vb; vb = lb[0] ? NULL : vb->next)
            if (cJSON_Compare(va, vb, 1))
                return 0;
    return 1;
}

/* a's grammar writes only its named properties (no additionalProperties
 * that lets others in) and b requires one a never writes. */
static int missing_required(const cJSON *a, const cJSON *b)
{
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(a, "additionalProperties");
    static const char *const more[] = {"anyOf", "oneOf", "allOf", "$ref"};
    if (ap && !cJSON_IsFalse(ap))
        return 0;
    for (int i = 0; i < 4; i++)
        if (cJSON_GetObjectItemCaseSensitive(a, more[i]))
            return 0; /* keys may come from elsewhere */
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(a, "properties");
    const cJSON *req_a = cJSON_GetObjectItemCaseSensitive(a, "required");
    const cJSON *req_b = cJSON_GetObjectItemCaseSensitive(b, "required");
    for (const cJSON *r = cJSON_IsArray(req_b) ? req_b->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r) || cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            continue;
        int in_a = 0;
        for (const cJSON *q = cJSON_IsArray(req_a) ? req_a->child : NULL; q && !in_a; q = q->next)
            in_a = cJSON_Compare(q, r, 1);
        if (!in_a)
            return 1;
    }
    return 0;
}

static int disjoint_at(sc_conv *c, const cJSON *a, const cJSON *b, int depth);

/* A key both require whose values cannot be the same. */
static int required_key_disjoint(sc_conv *c, const cJSON *a, const cJSON *b, int depth)
{
    const cJSON *req_a = cJSON_GetObjectItemCaseSensitive(a, "required");
    const cJSON *req_b = cJSON_GetObjectItemCaseSensitive(b, "required");
    const cJSON *pa = cJSON_GetObjectItemCaseSensitive(a, "properties");
    const cJSON *pb = cJSON_GetObjectItemCaseSensitive(b, "properties");
    for (const cJSON *r = cJSON_IsArray(req_a) ? req_a->child : NULL; r; r = r->next) {
        int in_b = 0;
        for (const cJSON *q = cJSON_IsArray(req_b) ? req_b->child : NULL; q && !in_b; q = q->next)
            in_b = cJSON_Compare(q, r, 1);
        if (!in_b || !cJSON_IsString(r))
            continue;
        const cJSON *sa = cJSON_GetObjectItemCaseSensitive(pa, r->valuestring);
        const cJSON *sb = cJSON_GetObjectItemCaseSensitive(pb, r->valuestring);
        if (sa && sb && disjoint_at(c, sa, sb, depth + 1))
            return 1;
    }
    return 0;
}

static int disjoint_at(sc_conv *c, const cJSON *a, const cJSON *b, int depth)
{
    if (depth > MAX_DEPTH)
        return 0;
    a = deref(c, a, depth);
    b = deref(c, b, depth);
    if (!cJSON_IsObject(a) || !cJSON_IsObject(b))
        return 0;
    unsigned ta = types_of(c, a, depth), tb = types_of(c, b, depth);
    if ((ta & tb) == 0 || literals_disjoint(a, b))
        return 1;
    if (ta != T_OBJ || tb != T_OBJ)
        return 0;
    return missing_required(a, b) || missing_required(b, a) ||
           required_key_disjoint(c, a, b, depth);
}

int sc_disjoint(sc_conv *c, const cJSON *a, const cJSON *b) { return disjoint_at(c, a, b, 0); }
