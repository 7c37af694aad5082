/*
 * response.c — JSON bodies: the legacy Completions response and its
 * streamed chunks, and (for a request with p.chat) the Chat Completions
 * response and its chat.completion.chunk events.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* chunk: a streamed chunk (the object names differ on chat only). */
static cJSON *head(const srv_req *r, const char *model_name, int chunk)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    const char *object = !r->p.chat ? "text_completion"
                         : chunk    ? "chat.completion.chunk"
                                    : "chat.completion";
    char id[64];
    snprintf(id, sizeof id, "%s%s", r->p.chat ? "chat" : "", r->id); /* cmpl-... */
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)r->created);
    cJSON_AddStringToObject(o, "model", model_name);
    return o;
}

static cJSON *usage(const srv_req *r)
{
    cJSON *u = cJSON_CreateObject();
    if (!u)
        return NULL;
    cJSON_AddNumberToObject(u, "prompt_tokens", (double)r->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", (double)r->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", (double)(r->prompt_tokens + r->completion_tokens));
    /* OpenAI's shape: the prompt tokens not recomputed (prefix cache, resume) */
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    if (d)
        cJSON_AddNumberToObject(d, "cached_tokens", (double)r->cached_tokens);
    return u;
}

static cJSON *ids_array(const int32_t *ids, int from, int to)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = from; a && i < to; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

/* cJSON's strings end at a NUL: text holding one (byte-level token 0, say)
 * becomes a raw JSON string, each piece escaped by cJSON, NUL as \u0000. */
static cJSON *string_nul(const char *text, size_t len)
{
    mhla_buf raw = {0};
    int rc = mhla_buf_put(&raw, "\"", 1);
    for (size_t at = 0; !rc && at <= len;) {
        const char *nul = memchr(text + at, 0, len - at);
        size_t n = nul ? (size_t)(nul - (text + at)) : len - at;
        char *piece = malloc(n + 1);
        if (piece) {
            memcpy(piece, text + at, n);
            piece[n] = 0;
        }
        cJSON *s = piece ? cJSON_CreateString(piece) : NULL;
        char *quoted = s ? cJSON_PrintUnformatted(s) : NULL;
        rc = !quoted || mhla_buf_put(&raw, quoted + 1, strlen(quoted) - 2) ||
             (nul && mhla_buf_put(&raw, "\\u0000", 6));
        free(quoted);
        cJSON_Delete(s);
        free(piece);
        at += n + 1;
    }
    cJSON *item = !rc && mhla_buf_put(&raw, "\"", 1) == 0 ? cJSON_CreateRaw(raw.p) : NULL;
    mhla_buf_free(&raw);
    return item;
}

/* A string item from len bytes (which may hold NUL). */
static cJSON *string_n(const char *text, size_t len)
{
    if (len && memchr(text, 0, len))
        return string_nul(text, len);
    char *t = malloc(len + 1);
    if (!t)
        return NULL;
    if (len) /* text may be NULL when empty */
        memcpy(t, text, len);
    t[len] = 0;
    cJSON *s = cJSON_CreateString(t);
    free(t);
    return s;
}

/* ---- logprobs: the legacy shape {tokens, token_logprobs, top_logprobs,
 * text_offset}. A token's string is its text alone (special tokens
 * included); top_logprobs holds the best p.logprobs ids plus the chosen one
 * (as OpenAI does), a string met twice keeping its first (higher) value. */

typedef struct {
    cJSON *tokens, *lps, *tops, *offsets;
} lp_arrays;

/* as_key: for a top_logprobs key, which cJSON ends at a NUL. NULL when out
 * of memory (an id the codec does not know decodes to ""). */
static cJSON *token_string(const srv_codec *codec, int32_t id, int as_key)
{
    char *t = NULL, msg[128];
    size_t len = 0;
    if (srv_codec_decode(codec, &id, 1, 0, &t, &len, msg, sizeof msg))
        return NULL;
    cJSON *s = as_key ? cJSON_CreateString(t) : string_n(t, len);
    free(t);
    return s;
}

static cJSON *lp_new(lp_arrays *a)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    a->tokens = cJSON_AddArrayToObject(o, "tokens");
    a->lps = cJSON_AddArrayToObject(o, "token_logprobs");
    a->tops = cJSON_AddArrayToObject(o, "top_logprobs");
    a->offsets = cJSON_AddArrayToObject(o, "text_offset");
    if (!a->tokens || !a->lps || !a->tops || !a->offsets) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* Appends one token; no_lp: a token without logprobs (the first of a prompt).
 * 0 when out of memory (the arrays are then incomplete). */
static int lp_add(lp_arrays *a, const srv_codec *codec, int32_t id, srv_lp lp, int no_lp,
                  const mhla_logprob *top, int K)
{
    int ok = cJSON_AddItemToArray(a->tokens, token_string(codec, id, 0)) &
             cJSON_AddItemToArray(a->offsets, cJSON_CreateNumber((double)lp.text_offset));
    if (no_lp)
        return ok & cJSON_AddItemToArray(a->lps, cJSON_CreateNull()) &
               cJSON_AddItemToArray(a->tops, cJSON_CreateNull());
    ok &= cJSON_AddItemToArray(a->lps, cJSON_CreateNumber(lp.logprob));
    cJSON *d = cJSON_CreateObject();
    if (!d)
        return 0;
    int chosen_in = 0;
    for (int i = 0; i <= K; i++) {
        int32_t tid = i < K ? top[i].id : id;
        float v = i < K ? top[i].logprob : lp.logprob;
        if (i == K && chosen_in)
            break;
        if (i < K && tid == id)
            chosen_in = 1;
        cJSON *ts = token_string(codec, tid, 1);
        ok &= ts && ts->valuestring;
        if (ok && !cJSON_GetObjectItemCaseSensitive(d, ts->valuestring))
            ok &= cJSON_AddNumberToObject(d, ts->valuestring, v) != NULL;
        cJSON_Delete(ts);
    }
    return ok & cJSON_AddItemToArray(a->tops, d);
}

/* Echoed prompt tokens of group g (when echo), then generated ids [from, to). */
static cJSON *logprobs_json(const srv_req *r, const srv_codec *codec, int ci, int with_prompt,
                            int from, int to)
{
    lp_arrays a;
    cJSON *o = lp_new(&a);
    if (!o)
        return NULL;
    int K = r->p.logprobs, ok = 1;
    const srv_choice *c = &r->choices[ci];
    if (with_prompt) {
        const srv_group *g = &r->groups[c->group];
        const srv_prompt *pr = &r->p.prompts[c->group];
        for (int t = 0; ok && t < pr->n && g->prompt_logprob; t++)
            ok = lp_add(&a, codec, pr->ids[t], (srv_lp){g->prompt_logprob[t], g->prompt_offset[t]},
                        t == 0, K ? g->prompt_tops + (size_t)t * (size_t)K : NULL, K);
    }
    for (int i = from; ok && i < to; i++)
        ok = lp_add(&a, codec, c->ids[i], c->lp[i], 0, K ? c->tops + (size_t)i * (size_t)K : NULL,
                    K);
    if (!ok) { /* out of memory: no logprobs rather than wrong ones */
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* ---- chat: {"content": [{token, logprob, bytes, top_logprobs: [{token,
 * logprob, bytes}]}]}, the top p.logprobs alternatives; a token's string is
 * its text alone (special tokens included), bytes its UTF-8 bytes. */

static cJSON *chat_token(const srv_codec *codec, int32_t id, float logprob)
{
    char *t = NULL, msg[128];
    size_t len = 0;
    cJSON *o = cJSON_CreateObject(), *bytes = cJSON_CreateArray();
    int ok = o && bytes && !srv_codec_decode(codec, &id, 1, 0, &t, &len, msg, sizeof msg);
    ok = ok && cJSON_AddItemToObject(o, "token", string_n(t, len));
    ok = ok && cJSON_AddNumberToObject(o, "logprob", logprob);
    for (size_t i = 0; ok && i < len; i++)
        ok = cJSON_AddItemToArray(bytes, cJSON_CreateNumber((unsigned char)t[i]));
    free(t);
    if (ok && cJSON_AddItemToObject(o, "bytes", bytes))
        return o;
    cJSON_Delete(bytes);
    cJSON_Delete(o);
    return NULL;
}

/* Choice ci's generated ids [from, to); NULL when out of memory. */
static cJSON *chat_logprobs_json(const srv_req *r, const srv_codec *codec, int ci, int from, int to)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *content = o ? cJSON_AddArrayToObject(o, "content") : NULL;
    int K = r->p.logprobs, ok = content != NULL;
    const srv_choice *c = &r->choices[ci];
    for (int i = from; ok && i < to; i++) {
        cJSON *t = chat_token(codec, c->ids[i], c->lp[i].logprob);
        cJSON *tops = t ? cJSON_AddArrayToObject(t, "top_logprobs") : NULL;
        ok = cJSON_AddItemToArray(content, t) && tops;
        for (int k = 0; ok && k < K; k++) {
            const mhla_logprob *top = &c->tops[(size_t)i * (size_t)K + (size_t)k];
            ok = cJSON_AddItemToArray(tops, chat_token(codec, top->id, top->logprob));
        }
    }
    if (ok)
        return o;
    cJSON_Delete(o);
    return NULL;
}

/* logprobs, finish_reason and token_ids of a chat choice; 0 when out of memory. */
static int chat_choice_tail(cJSON *ch, const srv_req *r, const srv_codec *codec, int ci, int from,
                            int to, const char *finish)
{
    int ok = 1;
    if (r->p.logprobs >= 0 && to > from)
        ok = cJSON_AddItemToObject(ch, "logprobs", chat_logprobs_json(r, codec, ci, from, to));
    else
        ok = cJSON_AddNullToObject(ch, "logprobs") != NULL;
    if (finish)
        ok &= cJSON_AddStringToObject(ch, "finish_reason", finish) != NULL;
    else
        ok &= cJSON_AddNullToObject(ch, "finish_reason") != NULL;
    if (r->p.return_token_ids)
        ok &= cJSON_AddItemToObject(ch, "token_ids", ids_array(r->choices[ci].ids, from, to));
    return ok;
}

/* {role?, content?} of a message or a delta; 0 when out of memory. */
static int chat_message(cJSON *ch, const char *key, const char *role, const char *text, size_t len,
                        int with_content)
{
    cJSON *m = cJSON_CreateObject();
    if (!cJSON_AddItemToObject(ch, key, m))
        return cJSON_Delete(m), 0;
    int ok = !role || cJSON_AddStringToObject(m, "role", role);
    if (with_content)
        ok &= cJSON_AddItemToObject(m, "content", string_n(text ? text : "", len));
    return ok;
}

/* The message of a reply with tool calls: its content (null when it has
 * none, as OpenAI's) and the calls. */
static int tool_message(cJSON *ch, const srv_choice *c)
{
    cJSON *m = cJSON_CreateObject();
    if (!cJSON_AddItemToObject(ch, "message", m))
        return cJSON_Delete(m), 0;
    int ok = cJSON_AddStringToObject(m, "role", "assistant") != NULL;
    if (c->text.len)
        ok &= cJSON_AddItemToObject(m, "content", string_n(c->text.p, c->text.len));
    else
        ok &= cJSON_AddNullToObject(m, "content") != NULL;
    return ok && cJSON_AddItemToObject(m, "tool_calls", cJSON_Duplicate(c->tool_calls, 1));
}

static char *chat_completion_json(const srv_req *r, const char *model_name, const srv_codec *codec)
{
    cJSON *o = head(r, model_name, 0);
    cJSON *choices = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
    int ok = choices != NULL; /* out of memory anywhere: no body rather than a wrong one */
    for (int i = 0; ok && i < r->n_choices; i++) {
        const srv_choice *c = &r->choices[i];
        cJSON *ch = cJSON_CreateObject();
        ok = cJSON_AddItemToArray(choices, ch) && cJSON_AddNumberToObject(ch, "index", i);
        if (c->n_calls)
            ok = ok && tool_message(ch, c);
        else
            ok = ok && chat_message(ch, "message", "assistant", c->text.p, c->text.len, 1);
        ok = ok && chat_choice_tail(ch, r, codec, i, 0, c->n_ids, c->finish_reason);
    }
    ok = ok && cJSON_AddItemToObject(o, "usage", usage(r));
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* role: the first chunk's delta {role, content: ""}; finish without text:
 * the last one's empty delta. */
static char *chat_chunk(const srv_req *r, const char *model_name, const srv_codec *codec, int ci,
                        const char *role, const char *text, size_t text_len, int id_from, int id_to,
                        const char *finish)
{
    cJSON *o = head(r, model_name, 1);
    cJSON *choices = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
    cJSON *ch = cJSON_CreateObject();
    int ok = choices && cJSON_AddItemToArray(choices, ch);
    if (!ok)
        cJSON_Delete(ch);
    ok = ok && cJSON_AddNumberToObject(ch, "index", ci);
    ok = ok && chat_message(ch, "delta", role, text, text_len, role || text_len || !finish);
    ok = ok && chat_choice_tail(ch, r, codec, ci, id_from, id_to, finish);
    if (ok && r->p.include_usage)
        ok = cJSON_AddNullToObject(o, "usage") != NULL;
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *chat_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec,
                             int ci, const char *text, size_t text_len, int id_from, int id_to,
                             const char *finish)
{
    return chat_chunk(r, model_name, codec, ci, NULL, text, text_len, id_from, id_to, finish);
}

char *srv_chat_role_chunk_json(const srv_req *r, const char *model_name, int ci)
{
    return chat_chunk(r, model_name, NULL, ci, "assistant", "", 0, 0, 0, NULL);
}

/* A call as a stream delta: OpenAI's, with the call's index in the reply. */
static cJSON *call_delta(const cJSON *call, int k)
{
    cJSON *d = cJSON_Duplicate(call, 1);
    cJSON *idx = d ? cJSON_AddNumberToObject(d, "index", k) : NULL;
    /* index first, as OpenAI's deltas have it */
    if (idx && cJSON_InsertItemInArray(d, 0, cJSON_DetachItemViaPointer(d, idx)))
        return d;
    cJSON_Delete(d);
    return NULL;
}

char *srv_chat_calls_chunk_json(const srv_req *r, const char *model_name, int ci, int from, int to)
{
    cJSON *o = head(r, model_name, 1);
    cJSON *choices = o ? cJSON_AddArrayToObject(o, "choices") : NULL;
    cJSON *ch = cJSON_CreateObject(), *delta = NULL, *calls = NULL;
    int ok = choices && cJSON_AddItemToArray(choices, ch);
    if (!ok)
        cJSON_Delete(ch);
    ok = ok && cJSON_AddNumberToObject(ch, "index", ci) &&
         (delta = cJSON_AddObjectToObject(ch, "delta")) &&
         (calls = cJSON_AddArrayToObject(delta, "tool_calls"));
    for (int k = from; ok && k < to; k++) {
        cJSON *d = call_delta(cJSON_GetArrayItem(r->choices[ci].tool_calls, k), k);
        ok = d && cJSON_AddItemToArray(calls, d);
        if (!ok)
            cJSON_Delete(d);
    }
    ok = ok && cJSON_AddNullToObject(ch, "logprobs") && cJSON_AddNullToObject(ch, "finish_reason");
    if (ok && r->p.include_usage)
        ok = cJSON_AddNullToObject(o, "usage") != NULL;
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_completion_json(const srv_req *r, const char *model_name, const srv_codec *codec)
{
    if (r->p.chat)
        return chat_completion_json(r, model_name, codec);
    cJSON *o = head(r, model_name, 0), *choices = cJSON_CreateArray();
    if (!o || !choices) {
        cJSON_Delete(o);
        cJSON_Delete(choices);
        return NULL;
    }
    cJSON_AddItemToObject(o, "choices", choices);
    int ok = 1; /* out of memory anywhere: no body rather than a wrong one */
    for (int i = 0; ok && i < r->n_choices; i++) {
        const srv_choice *c = &r->choices[i];
        cJSON *ch = cJSON_CreateObject();
        ok = cJSON_AddItemToArray(choices, ch);
        if (!ok)
            break;
        cJSON_AddNumberToObject(ch, "index", i);
        mhla_buf t = {0};
        if (r->echo && r->echo[c->group])
            ok = !mhla_buf_put(&t, r->echo[c->group], strlen(r->echo[c->group]));
        ok &= !mhla_buf_put(&t, c->text.p ? c->text.p : "", c->text.len);
        ok &= cJSON_AddItemToObject(ch, "text", string_n(t.p ? t.p : "", t.len));
        mhla_buf_free(&t);
        if (r->p.logprobs >= 0)
            ok &= cJSON_AddItemToObject(ch, "logprobs",
                                        logprobs_json(r, codec, i, r->echo != NULL, 0, c->n_ids));
        else
            cJSON_AddNullToObject(ch, "logprobs");
        if (c->finish_reason)
            cJSON_AddStringToObject(ch, "finish_reason", c->finish_reason);
        else
            cJSON_AddNullToObject(ch, "finish_reason");
        if (r->p.return_token_ids)
            ok &= cJSON_AddItemToObject(ch, "token_ids", ids_array(c->ids, 0, c->n_ids));
    }
    ok &= cJSON_AddItemToObject(o, "usage", usage(r));
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec, int ci,
                        const char *text, size_t text_len, int echo, int id_from, int id_to,
                        const char *finish)
{
    if (r->p.chat)
        return chat_chunk_json(r, model_name, codec, ci, text, text_len, id_from, id_to, finish);
    cJSON *o = head(r, model_name, 1), *choices = cJSON_CreateArray(), *ch = cJSON_CreateObject();
    if (!o || !choices || !ch) {
        cJSON_Delete(o);
        cJSON_Delete(choices);
        cJSON_Delete(ch);
        return NULL;
    }
    cJSON_AddItemToObject(o, "choices", choices);
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", ci);
    /* out of memory anywhere: no chunk rather than a wrong one */
    int ok = cJSON_AddItemToObject(ch, "text", string_n(text, text_len));
    if (r->p.logprobs >= 0)
        ok &= cJSON_AddItemToObject(ch, "logprobs",
                                    logprobs_json(r, codec, ci, echo, id_from, id_to));
    else
        cJSON_AddNullToObject(ch, "logprobs");
    if (finish)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    if (r->p.return_token_ids)
        ok &= cJSON_AddItemToObject(ch, "token_ids", ids_array(r->choices[ci].ids, id_from, id_to));
    if (r->p.include_usage)
        cJSON_AddNullToObject(o, "usage");
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec, int ci,
                     const char *text, size_t text_len, int id_from, int id_to, const char *finish)
{
    return chunk_json(r, model_name, codec, ci, text, text_len, 0, id_from, id_to, finish);
}

char *srv_echo_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec, int ci)
{
    const char *t = r->echo[r->choices[ci].group];
    return chunk_json(r, model_name, codec, ci, t, strlen(t), 1, 0, 0, NULL);
}

char *srv_usage_chunk_json(const srv_req *r, const char *model_name)
{
    cJSON *o = head(r, model_name, 1);
    if (!o)
        return NULL;
    int ok = cJSON_AddItemToObject(o, "choices", cJSON_CreateArray()) &
             cJSON_AddItemToObject(o, "usage", usage(r));
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}
