/* Post-processors: TemplateProcessing (single-sequence template), ByteLevel (identity) and
 * Sequence of those, reduced to the ids placed before and after the encoded text. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static int append(int32_t **v, size_t *n, int32_t id)
{
    int32_t *p = realloc(*v, (*n + 1) * sizeof *p);
    if (!p)
        return -1;
    p[(*n)++] = id;
    *v = p;
    return 0;
}

static int build_one(const cJSON *j, const mhla_tokenizer *tok, tok_post *pp, char *err,
                     size_t errlen)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "type");
    const char *type = cJSON_IsString(t) ? t->valuestring : NULL;
    if (!type) {
        tok_err(err, errlen, "post_processor without a \"type\"");
        return -1;
    }
    if (!strcmp(type, "ByteLevel"))
        return 0;
    if (!strcmp(type, "Sequence")) {
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "processors"), *c;
        if (!cJSON_IsArray(arr)) {
            tok_err(err, errlen, "post_processor Sequence without a \"processors\" array");
            return -1;
        }
        cJSON_ArrayForEach(c, arr) if (build_one(c, tok, pp, err, errlen)) return -1;
        return 0;
    }
    if (strcmp(type, "TemplateProcessing") != 0) {
        tok_err(
            err, errlen,
            "unsupported post_processor type \"%s\" (supported: TemplateProcessing, ByteLevel, Sequence)",
            type);
        return -1;
    }
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single"), *item;
    if (!cJSON_IsArray(single)) {
        tok_err(err, errlen, "TemplateProcessing without a \"single\" array");
        return -1;
    }
    /* a later template wraps the result of an earlier one */
    int32_t *before = NULL, *after = NULL;
    size_t nb = 0, na = 0;
    bool seen_a = false;
    cJSON_ArrayForEach(item, single)
    {
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(item, "SpecialToken");
        const cJSON *sq = cJSON_GetObjectItemCaseSensitive(item, "Sequence");
        if (sp) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
            if (!cJSON_IsString(id)) {
                tok_err(err, errlen, "TemplateProcessing: SpecialToken without an id string");
                goto fail;
            }
            int32_t v = mhla_tok_token_to_id(tok, id->valuestring, strlen(id->valuestring));
            if (v < 0) {
                tok_err(err, errlen,
                        "TemplateProcessing: special token \"%.64s\" is not in the vocabulary",
                        id->valuestring);
                goto fail;
            }
            if (append(seen_a ? &after : &before, seen_a ? &na : &nb, v))
                goto oom;
        } else if (sq) {
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(sq, "id");
            if (cJSON_IsString(id) && !strcmp(id->valuestring, "A"))
                seen_a = true;
        } else {
            tok_err(err, errlen,
                    "TemplateProcessing: template items must be SpecialToken or Sequence");
            goto fail;
        }
    }
    {
        int32_t *nbv = malloc((nb + pp->n_before + 1) * sizeof *nbv),
                *nav = malloc((na + pp->n_after + 1) * sizeof *nav);
        if (!nbv || !nav) {
            free(nbv);
            free(nav);
            goto oom;
        }
        if (nb)
            memcpy(nbv, before, nb * sizeof *nbv);
        if (pp->n_before)
            memcpy(nbv + nb, pp->before, pp->n_before * sizeof *nbv);
        if (pp->n_after)
            memcpy(nav, pp->after, pp->n_after * sizeof *nav);
        if (na)
            memcpy(nav + pp->n_after, after, na * sizeof *nav);
        free(pp->before);
        free(pp->after);
        pp->before = nbv;
        pp->after = nav;
        pp->n_before += nb;
        pp->n_after += na;
        pp->present = true;
    }
    free(before);
    free(after);
    return 0;
oom:
    tok_err(err, errlen, "out of memory");
fail:
    free(before);
    free(after);
    return -1;
}

int tok_post_build(const cJSON *j, const mhla_tokenizer *tok, tok_post *pp, char *err,
                   size_t errlen)
{
    memset(pp, 0, sizeof *pp);
    if (!j || cJSON_IsNull(j))
        return 0;
    if (!cJSON_IsObject(j)) {
        tok_err(err, errlen, "post_processor must be an object or null");
        return -1;
    }
    return build_one(j, tok, pp, err, errlen);
}
