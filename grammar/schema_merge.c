/*
 * schema_merge.c — allOf (and a $ref beside other keywords, which is the
 * same conjunction) as one schema: the parts' keywords gathered into a new
 * node. A keyword met in one part is taken as it is; in several parts it is
 * combined where the conjunction has one meaning (properties: a property in
 * two parts gets both schemas as allOf; required: the union; type: the same,
 * integer within number; min*: the largest, max*: the smallest; items: both
 * as allOf) and taken when the parts agree; otherwise UNSUPPORTED.
 */
#include "schema_internal.h"

#include <stdlib.h>
#include <string.h>

#define OOM(c) sc_fail((c), MHLA_GRAMMAR_NOMEM, "schema: out of memory")

typedef struct {
    const cJSON **parts;
    int n, cap;
} parts_list;

static int parts_add(sc_conv *c, parts_list *pl, const cJSON *part)
{
    if (pl->n >= SC_MAX_MEMBERS)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: allOf with more than %d parts",
                       SC_MAX_MEMBERS);
    if (pl->n == pl->cap) {
        int cap = pl->cap ? pl->cap * 2 : 8;
        const cJSON **p = realloc(pl->parts, (size_t)cap * sizeof *p);
        if (!p)
            return OOM(c);
        pl->parts = p;
        pl->cap = cap;
    }
    pl->parts[pl->n++] = part;
    return 0;
}

/* The parts of a node: itself (less $ref and allOf), its $ref's target's
 * parts and each allOf element's parts. */
static int flatten(sc_conv *c, const cJSON *node, parts_list *pl, int depth)
{
    if (depth > SC_MAX_DEPTH)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: allOf/$ref nested deeper than %d",
                       SC_MAX_DEPTH);
    if (cJSON_IsTrue(node))
        return 0;
    if (cJSON_IsFalse(node))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: 'false' in allOf admits no value");
    if (!cJSON_IsObject(node))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: an allOf part must be a schema");
    int rc = parts_add(c, pl, node);
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(node, "$ref");
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(node, "allOf");
    if (!rc && ref) {
        const cJSON *target = NULL;
        rc = cJSON_IsString(ref)
                 ? sc_resolve_ref(c, ref->valuestring, &target)
                 : sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: '$ref' must be a string");
        if (!rc)
            rc = flatten(c, target, pl, depth + 1);
    }
    if (!rc && all && (!cJSON_IsArray(all) || !all->child))
        rc = sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'allOf' must be a non-empty list");
    for (const cJSON *e = all ? all->child : NULL; !rc && e; e = e->next)
        rc = flatten(c, e, pl, depth + 1);
    return rc;
}

/* parent[key] (old) and add both: {"allOf": [old, add]} of references, or,
 * when old is such a node made by an earlier merge, add appended to it (the
 * node must not be replaced: references would point into the freed list). */
static int conjoin(sc_conv *c, cJSON *parent, const char *key, cJSON *old, const cJSON *add)
{
    if (!(old->type & cJSON_IsReference)) {
        cJSON *list = cJSON_GetObjectItemCaseSensitive(old, "allOf");
        return list && cJSON_AddItemReferenceToArray(list, (cJSON *)add) ? 0 : OOM(c);
    }
    cJSON *o = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(o, "allOf");
    if (!list || !cJSON_AddItemReferenceToArray(list, old) ||
        !cJSON_AddItemReferenceToArray(list, (cJSON *)add) ||
        !cJSON_ReplaceItemInObjectCaseSensitive(parent, key, o)) {
        cJSON_Delete(o);
        return OOM(c);
    }
    return 0;
}

static int merge_properties(sc_conv *c, cJSON *out, const cJSON *props)
{
    if (!cJSON_IsObject(props))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'properties' must be an object");
    cJSON *have = cJSON_GetObjectItemCaseSensitive(out, "properties");
    if (!have && !(have = cJSON_AddObjectToObject(out, "properties")))
        return OOM(c);
    for (const cJSON *p = props->child; p; p = p->next) {
        cJSON *old = cJSON_GetObjectItemCaseSensitive(have, p->string);
        if (!old) {
            if (!cJSON_AddItemReferenceToObject(have, p->string, (cJSON *)p))
                return OOM(c);
            continue;
        }
        int rc = conjoin(c, have, p->string, old, p);
        if (rc)
            return rc;
    }
    return 0;
}

static int merge_required(sc_conv *c, cJSON *out, const cJSON *req)
{
    if (!cJSON_IsArray(req))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'required' must be a list");
    cJSON *have = cJSON_GetObjectItemCaseSensitive(out, "required");
    if (!have && !(have = cJSON_AddArrayToObject(out, "required")))
        return OOM(c);
    for (const cJSON *r = req->child; r; r = r->next) {
        int dup = 0;
        for (const cJSON *h = have->child; h && !dup; h = h->next)
            dup = cJSON_Compare(h, r, 1);
        if (!dup && !cJSON_AddItemReferenceToArray(have, (cJSON *)r))
            return OOM(c);
    }
    return 0;
}

/* type in two parts: the same, or integer within number. */
static int merge_type(sc_conv *c, cJSON *out, cJSON *have, const cJSON *t)
{
    if (!cJSON_IsString(t) || !cJSON_IsString(have))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: allOf parts with lists of types");
    if (!strcmp(have->valuestring, t->valuestring) || !strcmp(t->valuestring, "number"))
        return 0;
    if (!strcmp(have->valuestring, "number") && !strcmp(t->valuestring, "integer")) {
        cJSON *integer = cJSON_CreateString("integer");
        if (integer && cJSON_ReplaceItemInObjectCaseSensitive(out, "type", integer))
            return 0;
        cJSON_Delete(integer);
        return OOM(c);
    }
    return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                   "schema: allOf parts of types '%s' and '%s': no value is valid",
                   have->valuestring, t->valuestring);
}

/* min*: the larger; max*: the smaller (numbers on both sides). */
static int merge_bound(sc_conv *c, cJSON *out, const char *key, const cJSON *have, const cJSON *v)
{
    if (!cJSON_IsNumber(have) || !cJSON_IsNumber(v))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: allOf parts with different non-numeric '%s'", key);
    int is_min = strstr(key, "min") != NULL || strstr(key, "Min") != NULL;
    int take = is_min ? v->valuedouble > have->valuedouble : v->valuedouble < have->valuedouble;
    if (!take)
        return 0;
    cJSON *ref = cJSON_CreateNumber(v->valuedouble);
    if (!ref || !cJSON_ReplaceItemInObjectCaseSensitive(out, key, ref)) {
        cJSON_Delete(ref);
        return OOM(c);
    }
    return 0;
}

static int is_bound(const char *key)
{
    static const char *const b[] = {"minimum",          "maximum",   "exclusiveMinimum",
                                    "exclusiveMaximum", "minLength", "maxLength",
                                    "minItems",         "maxItems"};
    for (size_t i = 0; i < sizeof b / sizeof b[0]; i++)
        if (!strcmp(key, b[i]))
            return 1;
    return 0;
}

/* One keyword of one part into the merged node. */
static int merge_kw(sc_conv *c, cJSON *out, const cJSON *kv)
{
    const char *key = kv->string;
    if (sc_kw_is_annotation(key) || !strcmp(key, "$ref") || !strcmp(key, "allOf"))
        return 0;
    if (!strcmp(key, "properties"))
        return merge_properties(c, out, kv);
    if (!strcmp(key, "required"))
        return merge_required(c, out, kv);
    cJSON *have = cJSON_GetObjectItemCaseSensitive(out, key);
    if (!have)
        return cJSON_AddItemReferenceToObject(out, key, (cJSON *)kv) ? 0 : OOM(c);
    if (cJSON_Compare(have, kv, 1))
        return 0;
    if (!strcmp(key, "type"))
        return merge_type(c, out, have, kv);
    if (is_bound(key))
        return merge_bound(c, out, key, have, kv);
    if (!strcmp(key, "items") && cJSON_IsObject(kv) && cJSON_IsObject(have))
        return conjoin(c, out, key, have, kv);
    return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                   "schema: allOf parts with different '%s' are not served", key);
}

/* A part that closes its object (additionalProperties other than true) must
 * name every property the merged node may hold: the merged object's keys are
 * the union of the parts' properties. */
static int check_closed(sc_conv *c, const cJSON *part, const cJSON *merged)
{
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(part, "additionalProperties");
    if (!ap || cJSON_IsTrue(ap))
        return 0;
    const cJSON *own = cJSON_GetObjectItemCaseSensitive(part, "properties");
    const char *keys[] = {"properties", "required"};
    for (int k = 0; k < 2; k++) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(merged, keys[k]);
        for (const cJSON *e = list ? list->child : NULL; e; e = e->next) {
            const char *name = k == 0 ? e->string : cJSON_IsString(e) ? e->valuestring : "";
            if (!cJSON_GetObjectItemCaseSensitive(own, name))
                return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                               "schema: allOf: property '%.60s' is not allowed by a part's "
                               "additionalProperties",
                               name);
        }
    }
    return 0;
}

int sc_merge_all_of(sc_conv *c, const cJSON *schema, const cJSON **merged)
{
    parts_list pl = {0};
    cJSON *out = cJSON_CreateObject();
    int rc = out ? sc_own(c, out) : OOM(c);
    if (!rc)
        rc = flatten(c, schema, &pl, 0);
    if (!rc && ++c->visits > SC_MAX_VISITS)
        rc = sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: more than %d schema nodes converted",
                     SC_MAX_VISITS);
    for (int i = 0; !rc && i < pl.n; i++)
        for (const cJSON *kv = pl.parts[i]->child; !rc && kv; kv = kv->next)
            rc = merge_kw(c, out, kv);
    for (int i = 0; !rc && i < pl.n; i++)
        rc = check_closed(c, pl.parts[i], out);
    free(pl.parts);
    *merged = rc ? NULL : out;
    return rc;
}
