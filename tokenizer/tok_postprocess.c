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

/* The ids one template places before and after the text ($A). */
typedef struct {
    int32_t *before, *after;
    size_t nb, na;
    bool seen_a;
} template_ids;

/* One item of a "single" template: a SpecialToken adds its id before or after $A, a
 * Sequence item marks where $A is. Returns -1 with err set. */
static int template_item(const cJSON *item, const mhla_tokenizer *tok, template_ids *t, char *err,
                         size_t errlen)
{
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(item, "SpecialToken");
    const cJSON *sq = cJSON_GetObjectItemCaseSensitive(item, "Sequence");
    if (sq && !sp) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(sq, "id");
        if (cJSON_IsString(id) && !strcmp(id->valuestring, "A"))
            t->seen_a = true;
        return 0;
    }
    if (!sp) {
        tok_err(err, errlen, "TemplateProcessing: template items must be SpecialToken or Sequence");
        return -1;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(sp, "id");
    if (!cJSON_IsString(id)) {
        tok_err(err, errlen, "TemplateProcessing: SpecialToken without an id string");
        return -1;
    }
    int32_t v = mhla_tok_token_to_id(tok, id->valuestring, strlen(id->valuestring));
    if (v < 0) {
        tok_err(err, errlen, "TemplateProcessing: special token \"%.64s\" is not in the vocabulary",
                id->valuestring);
        return -1;
    }
    if (append(t->seen_a ? &t->after : &t->before, t->seen_a ? &t->na : &t->nb, v)) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

/* A later template wraps the result of an earlier one: its ids go outside pp's. */
static int wrap(tok_post *pp, const template_ids *t)
{
    int32_t *nbv = malloc((t->nb + pp->n_before + 1) * sizeof *nbv),
            *nav = malloc((t->na + pp->n_after + 1) * sizeof *nav);
    if (!nbv || !nav) {
        free(nbv);
        free(nav);
        return -1;
    }
    if (t->nb)
        memcpy(nbv, t->before, t->nb * sizeof *nbv);
    if (pp->n_before)
        memcpy(nbv + t->nb, pp->before, pp->n_before * sizeof *nbv);
    if (pp->n_after)
        memcpy(nav, pp->after, pp->n_after * sizeof *nav);
    if (t->na)
        memcpy(nav + pp->n_after, t->after, t->na * sizeof *nav);
    free(pp->before);
    free(pp->after);
    pp->before = nbv;
    pp->after = nav;
    pp->n_before += t->nb;
    pp->n_after += t->na;
    pp->present = true;
    return 0;
}

static int read_template(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen)
{
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single"), *item;
    if (!cJSON_IsArray(single)) {
        tok_err(err, errlen, "TemplateProcessing without a \"single\" array");
        return -1;
    }
    template_ids t = {0};
    int rc = 0;
    cJSON_ArrayForEach(item, single) if ((rc = template_item(item, ctx, &t, err, errlen))) break;
    if (rc == 0 && (rc = wrap(node, &t)))
        tok_err(err, errlen, "out of memory");
    free(t.before);
    free(t.after);
    return rc;
}

static int add_child(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen);

static const tok_build_type POST_TYPES[] = {
    {"TemplateProcessing", 0, read_template},
    {"ByteLevel", 0, NULL}, /* the identity on ids */
    {"Sequence", 0, NULL},
};
/* Every processor of a Sequence adds to the one tok_post: no kinds, no child nodes. */
static const tok_build_spec POST_SPEC = {"post_processor",
                                         "processors",
                                         false,
                                         POST_TYPES,
                                         sizeof POST_TYPES / sizeof POST_TYPES[0],
                                         NULL,
                                         NULL,
                                         add_child};

static int add_child(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen)
{
    if (!cJSON_IsObject(j)) { /* as it always was: a Sequence's children are not checked first */
        tok_err(err, errlen, "post_processor without a \"type\"");
        return -1;
    }
    return tok_build(&POST_SPEC, j, node, ctx, err, errlen);
}

int tok_post_build(const cJSON *j, const mhla_tokenizer *tok, tok_post *pp, char *err,
                   size_t errlen)
{
    memset(pp, 0, sizeof *pp);
    if (!j || cJSON_IsNull(j))
        return 0;
    return tok_build(&POST_SPEC, j, pp, tok, err, errlen);
}
