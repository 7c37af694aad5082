/*
 * prompts.c — where the bench's prompts come from: a JSONL file (one
 * {"prompt", "max_tokens"} object per line; any other field of a line is
 * sent in that prompt's request body), or synthesized to exact token
 * lengths drawn from a distribution.
 *
 * Synthesis asks the server itself, so lengths are exact for whatever
 * tokenizer it runs: random words are tokenized (/tokenize), the ids are cut to
 * the drawn length and turned back into text (/detokenize), and that text is
 * tokenized again to confirm the length. Where text does not round-trip to the
 * same count (a BPE merge across the cut), the prompt is sent as the id array
 * instead, which the completions API accepts and which is exact by definition.
 * For --chat the prompt stays text (a message's content is a string) and the
 * input length is left to the usage chunk: the server's chat template wraps
 * the message in tokens of its own.
 */
#include "client_internal.h"

#include <cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int cl_parse_dist(const char *s, cl_dist *out)
{
    if (strcmp(s, "fixed") == 0)
        *out = CL_DIST_FIXED;
    else if (strcmp(s, "uniform") == 0)
        *out = CL_DIST_UNIFORM;
    else if (strcmp(s, "normal") == 0)
        *out = CL_DIST_NORMAL;
    else
        return -1;
    return 0;
}

long cl_draw_len(const cl_len_spec *s, mhla_rng *r)
{
    double x = (double)s->mean;
    if (s->dist == CL_DIST_UNIFORM)
        x += (2.0 * mhla_rng_uniform(r) - 1.0) * s->spread;
    else if (s->dist == CL_DIST_NORMAL)
        x += mhla_rng_normal(r) * s->spread;
    long n = lround(x);
    return n < 1 ? 1 : n;
}

void cl_prompts_free(cl_prompts *p)
{
    for (size_t i = 0; i < p->n; i++) {
        free(p->p[i].prompt_json);
        free(p->p[i].extra_json);
    }
    free(p->p);
    memset(p, 0, sizeof *p);
}

/* Appends a prompt; json and extra (may be NULL) are owned from here on,
 * freed when it cannot be added. */
static int push(cl_prompts *ps, char *json, long max_tokens, long in_tokens, char *extra)
{
    cl_prompt *np = json ? realloc(ps->p, (ps->n + 1) * sizeof *np) : NULL;
    if (!np) {
        free(json);
        free(extra);
        return -1;
    }
    ps->p = np;
    ps->p[ps->n++] = (cl_prompt){json, max_tokens, in_tokens, extra};
    return 0;
}

/* A JSONL line's fields other than "prompt" and "max_tokens" (sent as they
 * are in its request body), as an object's JSON text; NULL when there are
 * none. *oom set when they could not be printed. */
static char *line_extra(const cJSON *o, int *oom)
{
    cJSON *x = cJSON_Duplicate(o, 1);
    char *s = NULL;
    cJSON_DeleteItemFromObjectCaseSensitive(x, "prompt");
    cJSON_DeleteItemFromObjectCaseSensitive(x, "max_tokens");
    if (x && x->child && !(s = cJSON_PrintUnformatted(x)))
        *oom = 1;
    *oom |= !x;
    cJSON_Delete(x);
    return s;
}

/* One non-blank line of a JSONL file: {"prompt": string or array, "max_tokens"?};
 * text_only: the prompt must be a string. */
static int jsonl_line(const char *line, const char *path, long lineno, long default_max_tokens,
                      int text_only, cl_prompts *out, char *err)
{
    cJSON *o = cJSON_Parse(line);
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "max_tokens");
    int rc = 0;
    if (!cJSON_IsObject(o) || !(cJSON_IsString(pr) || cJSON_IsArray(pr))) {
        snprintf(err, CL_ERR_LEN,
                 "%s:%ld: expected a JSON object with a string or array "
                 "\"prompt\"",
                 path, lineno);
        rc = -1;
    } else if (text_only && !cJSON_IsString(pr)) {
        snprintf(err, CL_ERR_LEN,
                 "%s:%ld: --chat sends each prompt as a message's text, and this \"prompt\" "
                 "is an array",
                 path, lineno);
        rc = -1;
    } else if (mt && !(cJSON_IsNumber(mt) && mt->valuedouble >= 1)) {
        snprintf(err, CL_ERR_LEN, "%s:%ld: \"max_tokens\" must be a number >= 1", path, lineno);
        rc = -1;
    } else {
        long in = -1;
        if (cJSON_IsArray(pr) && cJSON_GetArraySize(pr) > 0 &&
            cJSON_IsNumber(cJSON_GetArrayItem(pr, 0)))
            in = cJSON_GetArraySize(pr); /* an id array's length is known */
        int oom = 0;
        char *extra = line_extra(o, &oom);
        if (oom || push(out, cJSON_PrintUnformatted(pr),
                        mt ? (long)mt->valuedouble : default_max_tokens, in, extra)) {
            snprintf(err, CL_ERR_LEN, "out of memory reading %s", path);
            rc = -1;
        }
    }
    cJSON_Delete(o);
    return rc;
}

int cl_prompts_load_jsonl(const char *path, long default_max_tokens, int text_only, cl_prompts *out,
                          char *err)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, CL_ERR_LEN, "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    ssize_t n;
    int rc = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") < (size_t)n) /* else a blank line */
            rc = jsonl_line(line, path, lineno, default_max_tokens, text_only, out, err);
    }
    free(line);
    if (rc == 0 && ferror(f)) {
        snprintf(err, CL_ERR_LEN, "error reading %s", path);
        rc = -1;
    }
    fclose(f);
    if (rc == 0 && out->n == 0) {
        snprintf(err, CL_ERR_LEN, "%s holds no prompts", path);
        rc = -1;
    }
    if (rc)
        cl_prompts_free(out);
    return rc;
}

static const char *const WORDS[] = {
    "the",     "model",   "server",  "token",  "stream",   "linear", "attention", "block",
    "summary", "state",   "query",   "key",    "value",    "head",   "batch",     "cache",
    "prefix",  "request", "latency", "river",  "mountain", "garden", "window",    "quiet",
    "bright",  "slowly",  "number",  "paper",  "light",    "water",  "stone",     "across",
    "between", "under",   "before",  "after",  "city",     "market", "letter",    "music",
    "winter",  "summer",  "forest",  "table",  "chair",    "answer", "question",  "simple",
    "complex", "measure", "signal",  "travel", "morning",  "evening"};

/* POSTs {"field": value} to path and returns the parsed response (status 200). */
static cJSON *call(const cl_conn *c, const char *path, const char *field, cJSON *value, char *err)
{
    cJSON *o = cJSON_CreateObject();
    char *body = NULL, *resp = NULL;
    cJSON *r = NULL;
    long status = 0;
    if (!o || !value) {
        cJSON_Delete(value);
        snprintf(err, CL_ERR_LEN, "out of memory calling %s", path);
        goto out;
    }
    cJSON_AddItemToObject(o, field, value);
    if (!(body = cJSON_PrintUnformatted(o))) {
        snprintf(err, CL_ERR_LEN, "out of memory calling %s", path);
        goto out;
    }
    if (cl_post_json(c, path, body, &status, &resp, err))
        goto out;
    if (status != 200) {
        snprintf(err, CL_ERR_LEN,
                 "%s answered HTTP %ld (%.120s); synthesized prompts need "
                 "the server's %s endpoint (or use --prompts FILE)",
                 path, status, resp, path);
        goto out;
    }
    if (!(r = cJSON_Parse(resp)))
        snprintf(err, CL_ERR_LEN, "%s answered something that is not JSON", path);
out:
    cJSON_Delete(o);
    free(body);
    free(resp);
    return r;
}

/* The token ids of text (a JSON array, owned by the returned object *holder). */
static const cJSON *tokenize(const cl_conn *c, const char *text, cJSON **holder, char *err)
{
    *holder = call(c, "/tokenize", "prompt", cJSON_CreateString(text), err);
    if (!*holder)
        return NULL;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(*holder, "tokens");
    if (!cJSON_IsArray(t)) {
        snprintf(err, CL_ERR_LEN, "/tokenize answered without a \"tokens\" array");
        cJSON_Delete(*holder);
        *holder = NULL;
        return NULL;
    }
    return t;
}

static int random_text(mhla_rng *rng, size_t chars, mhla_buf *s)
{
    s->len = 0;
    while (s->len < chars) {
        const char *w = WORDS[(size_t)(mhla_rng_uniform(rng) * (sizeof WORDS / sizeof *WORDS))];
        if ((s->len && mhla_buf_put(s, " ", 1)) || mhla_buf_put(s, w, strlen(w)))
            return -1;
    }
    return 0;
}

/* Random text the server tokenizes to at least len tokens (*held owns the
 * answer the ids come from); NULL with err set. */
static const cJSON *long_enough(const cl_conn *c, mhla_rng *rng, long len, double chars_per_token,
                                mhla_buf *text, cJSON **held, char *err)
{
    const cJSON *toks = NULL;
    size_t chars = (size_t)((double)len * chars_per_token * 1.25) + 32;
    for (int tries = 0; tries < 8; tries++, chars *= 2) {
        cJSON_Delete(*held);
        *held = NULL;
        if (random_text(rng, chars, text)) {
            snprintf(err, CL_ERR_LEN, "out of memory synthesizing a prompt");
            return NULL;
        }
        if (!(toks = tokenize(c, text->p, held, err)))
            return NULL;
        if (cJSON_GetArraySize(toks) >= len)
            return toks;
    }
    snprintf(err, CL_ERR_LEN, "could not synthesize a %ld-token prompt", len);
    return NULL;
}

/* One prompt of exactly len tokens, as a JSON value: the text of the first
 * len ids when it tokenizes back to len ids, else the ids (*as_ids). text_only:
 * that text without the check, since a chat message's content must be text and
 * the chat template's tokens make the length inexact anyway. */
static char *one_prompt(const cl_conn *c, mhla_rng *rng, long len, double chars_per_token,
                        int text_only, int *as_ids, char *err)
{
    mhla_buf text = {0};
    cJSON *h1 = NULL, *h2 = NULL, *h3 = NULL, *ids = NULL;
    char *json = NULL;
    const cJSON *toks = long_enough(c, rng, len, chars_per_token, &text, &h1, err), *back = NULL,
                *again = NULL;
    if (toks && !(ids = cJSON_CreateArray()))
        snprintf(err, CL_ERR_LEN, "out of memory synthesizing a prompt");
    for (long i = 0; ids && i < len; i++)
        cJSON_AddItemToArray(ids, cJSON_Duplicate(cJSON_GetArrayItem(toks, (int)i), 0));
    if (ids) {
        h2 = call(c, "/detokenize", "tokens", cJSON_Duplicate(ids, 1), err);
        back = cJSON_GetObjectItemCaseSensitive(h2, "prompt");
        if (h2 && !cJSON_IsString(back))
            snprintf(err, CL_ERR_LEN, "/detokenize answered without a \"prompt\" string");
    }
    if (cJSON_IsString(back) && text_only) {
        if (!(json = cJSON_PrintUnformatted(back)))
            snprintf(err, CL_ERR_LEN, "out of memory synthesizing a prompt");
    } else if (cJSON_IsString(back) && (again = tokenize(c, back->valuestring, &h3, err))) {
        *as_ids = cJSON_GetArraySize(again) != len;
        json = cJSON_PrintUnformatted(*as_ids ? ids : back);
        if (!json)
            snprintf(err, CL_ERR_LEN, "out of memory synthesizing a prompt");
    }
    cJSON_Delete(h1);
    cJSON_Delete(h2);
    cJSON_Delete(h3);
    cJSON_Delete(ids);
    mhla_buf_free(&text);
    return json;
}

int cl_prompts_synthesize(const cl_conn *c, const cl_len_spec *in, const cl_len_spec *out_len,
                          size_t count, uint64_t seed, int text_only, cl_prompts *out, char *err)
{
    memset(out, 0, sizeof *out);
    mhla_rng rng;
    mhla_rng_seed(&rng, seed);
    /* characters per token, measured once on a sample so first tries are long enough */
    mhla_buf sample = {0};
    cJSON *h = NULL;
    if (random_text(&rng, 2000, &sample)) {
        snprintf(err, CL_ERR_LEN, "out of memory synthesizing prompts");
        return -1;
    }
    const cJSON *t = tokenize(c, sample.p, &h, err);
    if (!t) {
        mhla_buf_free(&sample);
        return -1;
    }
    int nt = cJSON_GetArraySize(t);
    double cpt = nt > 0 ? (double)sample.len / nt : 4.0;
    cJSON_Delete(h);
    mhla_buf_free(&sample);
    for (size_t i = 0; i < count; i++) {
        long len = cl_draw_len(in, &rng), max_tokens = cl_draw_len(out_len, &rng);
        int as_ids = 0;
        char *json = one_prompt(c, &rng, len, cpt, text_only, &as_ids, err);
        if (!json || push(out, json, max_tokens, text_only ? -1 : len, NULL)) {
            if (json) /* push freed it */
                snprintf(err, CL_ERR_LEN, "out of memory synthesizing prompts");
            cl_prompts_free(out);
            return -1;
        }
        out->as_ids += (size_t)as_ids;
    }
    return 0;
}
