/*
 * schema_array.c — arrays: items (one schema for all), a tuple (prefixItems,
 * or items as a list with additionalItems, the older spelling) with the items
 * after it, minItems/maxItems as a bounded repetition. uniqueItems: true is
 * served by writing at most one item, the one count whose items are always
 * unique (a subset; refused with minItems > 1). A maxItems over SC_MAX_REPEAT
 * is served as SC_MAX_REPEAT (a subset again).
 */
#include "schema_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sc_repeat(sc_buf *b, const char *item, long min, long max, const char *sep)
{
    if (max == 0)
        return b->err;
    if (min == 0 && (max == 1 || sep))
        sc_buf_add(b, max == 1 ? "" : "( ");
    sc_buf_add(b, item);
    if (min == 0 && max == 1)
        return sc_buf_add(b, "?");
    if (!sep && max < 0)
        return min <= 1 ? sc_buf_add(b, min ? "+" : "*") : sc_buf_addf(b, "{%ld,}", min);
    if (!sep)
        return sc_buf_addf(b, "{%ld,%ld}", min, max);
    /* item ( sep item ){min-1,max-1}, all optional when min is 0 */
    sc_buf inner = {0};
    sc_buf_add(&inner, "( ");
    sc_buf_add(&inner, sep);
    sc_buf_add(&inner, " ");
    sc_buf_add(&inner, item);
    sc_buf_add(&inner, " )");
    sc_buf_add(b, " ");
    if (!inner.err)
        sc_repeat(b, inner.p, min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1, NULL);
    if (min == 0)
        sc_buf_add(b, " )?");
    int err = inner.err ? inner.err : b->err;
    sc_buf_free(&inner);
    return b->err = err;
}

/* min, max (-1: none) with uniqueItems and the cap applied. */
static int counts(sc_conv *c, const cJSON *schema, long *min, long *max)
{
    int rc = sc_count(c, schema, "minItems", min);
    if (!rc)
        rc = sc_count(c, schema, "maxItems", max);
    if (rc)
        return rc;
    if (*min < 0)
        *min = 0;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(schema, "uniqueItems");
    if (u && !cJSON_IsBool(u))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'uniqueItems' must be a boolean");
    if (cJSON_IsTrue(u) && *min > 1)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: uniqueItems with minItems > 1 is not served");
    if (cJSON_IsTrue(u) && (*max < 0 || *max > 1))
        *max = 1;
    if (*max > SC_MAX_REPEAT)
        *max = SC_MAX_REPEAT;
    if (*max >= 0 && *min > *max)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: minItems > maxItems: no value");
    return 0;
}

static int visit_at(sc_conv *c, const cJSON *s, const char *key, int index, const char *name,
                    const char *suffix, const char **rule)
{
    char *sub = NULL;
    size_t old = sc_path_push(c, key), o2 = index >= 0 ? sc_path_push_index(c, index) : old;
    int rc = sc_name_join(c, name, suffix, &sub);
    if (!rc)
        rc = sc_visit(c, s, sub, rule);
    free(sub);
    sc_path_pop(c, o2);
    sc_path_pop(c, old);
    return rc;
}

/* The tuple's first items, then the rest (when a schema for it is given). */
static int tuple(sc_conv *c, const cJSON *list, const char *key, const cJSON *rest,
                 const char *rest_key, long min, long max, const char *name, sc_buf *b)
{
    long n = cJSON_GetArraySize(list), count = max >= 0 && max < n ? max : n, i = 0;
    int rc = 0;
    const char *rule;
    for (const cJSON *e = list->child; e && i < count && !rc; e = e->next, i++) {
        char suffix[32];
        snprintf(suffix, sizeof suffix, "tuple-%ld", i);
        rc = visit_at(c, e, key, (int)i, name, suffix, &rule);
        if (!rc)
            sc_buf_addf(b, "%s%s", i ? " \",\" space " : "", rule);
    }
    int more = rest && !cJSON_IsFalse(rest) && (max < 0 || max > count);
    if (!rc && min > count && !more)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: minItems beyond the tuple's items");
    if (rc || !more)
        return rc;
    rc = visit_at(c, rest, rest_key, -1, name, "rest", &rule);
    if (rc)
        return rc;
    long rmin = min > count ? min - count : 0, rmax = max < 0 ? -1 : max - count;
    if (count == 0)
        return sc_repeat(b, rule, rmin, rmax, "\",\" space");
    sc_buf one = {0};
    sc_buf_addf(&one, "( \",\" space %s )", rule);
    sc_buf_add(b, " ");
    rc = one.err ? one.err : sc_repeat(b, one.p, rmin, rmax, NULL);
    sc_buf_free(&one);
    return rc;
}

static int array_items(sc_conv *c, const cJSON *schema, long min, long max, const char *name,
                       sc_buf *b)
{
    const cJSON *prefix = cJSON_GetObjectItemCaseSensitive(schema, "prefixItems");
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(schema, "additionalItems");
    if (prefix && !cJSON_IsArray(prefix))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: 'prefixItems' must be a list");
    if (prefix && cJSON_IsArray(items))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: prefixItems with a list of items");
    if (addl && !cJSON_IsArray(items))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: additionalItems without a list of items is not served");
    if (prefix)
        return tuple(c, prefix, "prefixItems", items, "items", min, max, name, b);
    if (cJSON_IsArray(items))
        return tuple(c, items, "items", addl, "additionalItems", min, max, name, b);
    if (cJSON_IsFalse(items))
        return min > 0 ? sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: items false with minItems")
                       : 0;
    const char *rule;
    int rc = items ? visit_at(c, items, "items", -1, name, "item", &rule)
                   : sc_rule_builtin(c, "value", &rule);
    return rc ? rc : sc_repeat(b, rule, min, max, "\",\" space");
}

int sc_build_array(sc_conv *c, const cJSON *schema, const char *name, sc_kw *used, char **body)
{
    long min, max;
    *used |= sc_kw_bit("items") | sc_kw_bit("prefixItems") | sc_kw_bit("additionalItems") |
             sc_kw_bit("minItems") | sc_kw_bit("maxItems") | sc_kw_bit("uniqueItems");
    int rc = counts(c, schema, &min, &max);
    if (rc)
        return rc;
    sc_buf b = {0};
    sc_buf_add(&b, "\"[\" space ");
    rc = array_items(c, schema, min, max, name, &b);
    sc_buf_add(&b, " space \"]\"");
    if (!rc && b.err)
        rc = sc_buf_fail(c, &b);
    if (rc)
        sc_buf_free(&b);
    *body = rc ? NULL : b.p;
    return rc;
}
