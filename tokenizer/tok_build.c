/* The one skeleton behind the normalizer, pre-tokenizer, decoder and post-processor
 * builders: read "type", look it up among the builder's types, build a "Sequence" from its
 * array of children, or refuse the type with a message listing those supported. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "tokenizer_internal.h"

const char *tok_jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool tok_jbool(const cJSON *o, const char *k, bool def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* {"String": "..."} or {"Regex": "..."}; capture mirrors the reference's create_pattern. */
int tok_pattern_build(const cJSON *pat, bool capture, tok_regex *re, char *err, size_t errlen,
                      const char *owner)
{
    const char *s = pat ? tok_jstr(pat, "String") : NULL;
    if (s)
        return tok_regex_compile_literal(re, s, strlen(s), capture, err, errlen);
    const char *r = pat ? tok_jstr(pat, "Regex") : NULL;
    if (r)
        return tok_regex_compile_onig(re, r, strlen(r), err, errlen);
    tok_err(err, errlen, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", owner);
    return -1;
}

static int refuse_type(const tok_build_spec *spec, const char *type, char *err, size_t errlen)
{
    char list[256];
    size_t k = 0;
    list[0] = 0;
    for (size_t i = 0; i < spec->n_types && k < sizeof list; i++)
        k +=
            (size_t)snprintf(list + k, sizeof list - k, "%s%s", i ? ", " : "", spec->types[i].name);
    tok_err(err, errlen, "unsupported %s type \"%s\" (supported: %s)", spec->what, type, list);
    return -1;
}

/* The children of a Sequence, each built by the builder's add_child in order. */
static int build_sequence(const tok_build_spec *spec, const cJSON *j, void *node, const void *ctx,
                          char *err, size_t errlen)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, spec->list_key), *c;
    if (!cJSON_IsArray(arr)) {
        tok_err(err, errlen, "%s Sequence without a \"%s\" array", spec->what, spec->list_key);
        return -1;
    }
    if (spec->reserve && spec->reserve(node, (size_t)cJSON_GetArraySize(arr))) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    cJSON_ArrayForEach(c, arr)
    {
        if (spec->skip_null && cJSON_IsNull(c))
            continue;
        if (spec->add_child(node, c, ctx, err, errlen))
            return -1;
    }
    return 0;
}

int tok_build(const tok_build_spec *spec, const cJSON *j, void *node, const void *ctx, char *err,
              size_t errlen)
{
    if (!cJSON_IsObject(j)) {
        tok_err(err, errlen, "%s must be an object or null", spec->what);
        return -1;
    }
    const char *type = tok_jstr(j, "type");
    if (!type) {
        tok_err(err, errlen, "%s without a \"type\"", spec->what);
        return -1;
    }
    for (size_t i = 0; i < spec->n_types; i++) {
        const tok_build_type *t = &spec->types[i];
        if (strcmp(type, t->name) != 0)
            continue;
        if (spec->set_kind)
            spec->set_kind(node, t->kind);
        if (!strcmp(t->name, "Sequence"))
            return build_sequence(spec, j, node, ctx, err, errlen);
        return t->read ? t->read(node, j, ctx, err, errlen) : 0;
    }
    return refuse_type(spec, type, err, errlen);
}
