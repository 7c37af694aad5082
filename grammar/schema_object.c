/*
 * schema_object.c — objects, as llama.cpp builds them: the required
 * properties first in the schema's order, then any subset of the optional
 * ones in that order (a chain of "-rest" rules), then, when
 * additionalProperties is true or a schema, more keys that are none of the
 * named ones. Without additionalProperties only the named properties are
 * written (a subset of what the schema allows, as llama.cpp does).
 */
#include "schema_internal.h"

#include <stdlib.h>
#include <string.h>

#define SC_MAX_KEY 1024 /* bytes of a property name */

static int is_required(const cJSON *req, const char *key)
{
    for (const cJSON *r = cJSON_IsArray(req) ? req->child : NULL; r; r = r->next)
        if (cJSON_IsString(r) && !strcmp(r->valuestring, key))
            return 1;
    return 0;
}

static const cJSON TRUE_SCHEMA = {.type = cJSON_True};

/* A required key the properties do not name: its values are additionalProperties'. */
static int add_required_only(sc_conv *c, sc_props *ps, const cJSON *req, const cJSON *ap,
                             const cJSON *named)
{
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r))
            return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'required' lists a non-string");
        int seen = cJSON_GetObjectItemCaseSensitive(named, r->valuestring) != NULL;
        for (int i = 0; i < ps->n && !seen; i++)
            seen = !strcmp(ps->p[i].key, r->valuestring);
        if (seen)
            continue;
        if (cJSON_IsFalse(ap))
            return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                           "schema: required '%.60s' is forbidden by additionalProperties: "
                           "false: no value is valid",
                           r->valuestring);
        ps->p[ps->n++] = (sc_prop){r->valuestring, cJSON_IsObject(ap) ? ap : &TRUE_SCHEMA, NULL, 1};
    }
    return 0;
}

static int collect(sc_conv *c, const cJSON *schema, sc_props *ps)
{
    const cJSON *named = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(schema, "required");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (named && !cJSON_IsObject(named))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'properties' must be an object");
    if (req && !cJSON_IsArray(req))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'required' must be a list");
    if (ap && !cJSON_IsBool(ap) && !cJSON_IsObject(ap))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'additionalProperties' must be a schema");
    int cap = cJSON_GetArraySize(named) + cJSON_GetArraySize(req) + 1;
    ps->p = calloc((size_t)cap, sizeof *ps->p);
    if (!ps->p)
        return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (const cJSON *p = named ? named->child : NULL; p; p = p->next)
        ps->p[ps->n++] = (sc_prop){p->string, p, NULL, is_required(req, p->string)};
    ps->extra = ap && !cJSON_IsFalse(ap) ? ap : NULL;
    return add_required_only(c, ps, req, ap, named);
}

/* "key" space ":" space value, the value converted at /properties/key. */
static int kv_rule(sc_conv *c, const char *name, sc_prop *p)
{
    char *sub = NULL, *kvname = NULL;
    const char *value;
    sc_buf b = {0};
    if (strlen(p->key) > SC_MAX_KEY)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: a property name over %d bytes", SC_MAX_KEY);
    size_t old = sc_path_push(c, p->schema == &TRUE_SCHEMA ? "required" : "properties");
    size_t o2 = sc_path_push(c, p->key);
    int rc = sc_name_join(c, name, p->key, &sub);
    if (!rc)
        rc = sc_visit(c, p->schema, sub, &value);
    cJSON *key = rc ? NULL : cJSON_CreateString(p->key);
    if (!rc && !key)
        rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    if (!rc)
        rc = sc_json_lit(c, &b, key);
    sc_buf_add(&b, " space \":\" space ");
    sc_buf_add(&b, rc ? "" : value);
    if (!rc && b.err)
        rc = sc_buf_fail(c, &b);
    if (!rc)
        rc = sc_name_join(c, sub, "kv", &kvname);
    if (!rc)
        rc = sc_rule_add(c, kvname, b.p, &p->kv);
    cJSON_Delete(key);
    free(sub);
    free(kvname);
    sc_buf_free(&b);
    sc_path_pop(c, o2);
    sc_path_pop(c, old);
    return rc;
}

/* The optional ones from i on: opt[i]'s kv, then the "-rest" rule of the
 * ones after it (each optional, in order); the extra keys repeat. */
static int optional_chain(sc_conv *c, sc_prop **opt, int n, const char *name, char **alts)
{
    const char **rest = calloc((size_t)n + 1, sizeof *rest);
    sc_buf b = {0};
    int rc = rest ? 0 : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (int j = n - 1; j >= 1 && !rc; j--) {
        sc_buf r = {0};
        char *rname = NULL;
        sc_buf_addf(&r, "( \",\" space %s )%s", opt[j]->kv, opt[j]->key ? "?" : "*");
        if (rest[j + 1])
            sc_buf_addf(&r, " %s", rest[j + 1]);
        rc = r.err ? sc_buf_fail(c, &r) : sc_name_join(c, name, opt[j - 1]->key, &rname);
        char *full = NULL;
        if (!rc)
            rc = sc_name_join(c, rname, "rest", &full);
        if (!rc)
            rc = sc_rule_add(c, full, r.p, &rest[j]);
        free(full);
        free(rname);
        sc_buf_free(&r);
    }
    for (int i = 0; i < n && !rc; i++) {
        sc_buf_addf(&b, "%s%s", i ? " | " : "", opt[i]->kv);
        if (!opt[i]->key)
            sc_buf_addf(&b, " ( \",\" space %s )*", opt[i]->kv);
        if (rest[i + 1])
            sc_buf_addf(&b, " %s", rest[i + 1]);
    }
    free(rest);
    if (!rc && b.err)
        rc = sc_buf_fail(c, &b);
    *alts = rc ? NULL : b.p;
    if (rc)
        sc_buf_free(&b);
    return rc;
}

static int object_body(sc_conv *c, sc_props *ps, sc_prop **opt, int n_opt, const char *name,
                       char **body)
{
    sc_buf b = {0};
    int n_req = 0, rc = 0;
    char *alts = NULL;
    sc_buf_add(&b, "\"{\" space ");
    for (int i = 0; i < ps->n; i++)
        if (ps->p[i].required)
            sc_buf_addf(&b, "%s%s", n_req++ ? " \",\" space " : "", ps->p[i].kv);
    if (n_opt)
        rc = optional_chain(c, opt, n_opt, name, &alts);
    if (!rc && n_opt) {
        sc_buf_add(&b, n_req ? " ( \",\" space ( " : "( ");
        sc_buf_add(&b, alts);
        sc_buf_add(&b, n_req ? " ) )?" : " )?");
    }
    free(alts);
    sc_buf_add(&b, " space \"}\"");
    if (!rc && b.err)
        rc = sc_buf_fail(c, &b);
    *body = rc ? NULL : b.p;
    if (rc)
        sc_buf_free(&b);
    return rc;
}

int sc_build_object(sc_conv *c, const cJSON *schema, const char *name, sc_kw *used, char **body)
{
    sc_props ps = {0};
    sc_prop **opt = NULL;
    int n_opt = 0;
    *used |= sc_kw_bit("properties") | sc_kw_bit("required") | sc_kw_bit("additionalProperties");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(schema, "additionalProperties");
    if (!cJSON_GetObjectItemCaseSensitive(schema, "properties") &&
        !cJSON_GetObjectItemCaseSensitive(schema, "required") && (!ap || cJSON_IsTrue(ap))) {
        const char *any; /* nothing named: any object, as llama.cpp */
        int rc = sc_rule_builtin(c, "object", &any);
        *body = rc ? NULL : strdup(any);
        return rc ? rc : *body ? 0 : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    }
    int rc = collect(c, schema, &ps);
    for (int i = 0; i < ps.n && !rc; i++)
        rc = kv_rule(c, name, &ps.p[i]);
    opt = rc ? NULL : calloc((size_t)ps.n + 2, sizeof *opt);
    if (!rc && !opt)
        rc = sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (int i = 0; i < ps.n && !rc; i++)
        if (!ps.p[i].required)
            opt[n_opt++] = &ps.p[i];
    sc_prop extra = {NULL, NULL, NULL, 0};
    if (!rc && ps.extra) {
        rc = sc_object_extra(c, &ps, name, &extra.kv);
        opt[n_opt++] = &extra;
    }
    if (!rc)
        rc = object_body(c, &ps, opt, n_opt, name, body);
    free(opt);
    free(ps.p);
    return rc;
}
