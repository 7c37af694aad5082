/*
 * response.c — JSON bodies: OpenAI-shape errors, the legacy Completions
 * response and its streamed chunks.
 */
#include "srv.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

char *srv_error_json(const srv_error *e)
{
    cJSON *root = cJSON_CreateObject(), *o = cJSON_CreateObject();
    if (!root || !o) {
        cJSON_Delete(root);
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddItemToObject(root, "error", o);
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddStringToObject(o, "type", e->type ? e->type : "invalid_request_error");
    if (e->param[0])
        cJSON_AddStringToObject(o, "param", e->param);
    else
        cJSON_AddNullToObject(o, "param");
    if (e->code)
        cJSON_AddStringToObject(o, "code", e->code);
    else
        cJSON_AddNullToObject(o, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static cJSON *head(const srv_req *r, const char *model_name)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddStringToObject(o, "object", "text_completion");
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
    return u;
}

static cJSON *ids_array(const int32_t *ids, int from, int to)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = from; a && i < to; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
    return a;
}

/* A string item from len bytes (which may hold NUL). */
static cJSON *string_n(const char *text, size_t len)
{
    char *t = malloc(len + 1);
    if (!t)
        return NULL;
    memcpy(t, text, len);
    t[len] = 0;
    cJSON *s = cJSON_CreateString(t);
    free(t);
    return s;
}

char *srv_completion_json(const srv_req *r, const char *model_name)
{
    cJSON *o = head(r, model_name), *choices = cJSON_CreateArray();
    if (!o || !choices) {
        cJSON_Delete(o);
        cJSON_Delete(choices);
        return NULL;
    }
    cJSON_AddItemToObject(o, "choices", choices);
    for (int i = 0; i < r->n_choices; i++) {
        const srv_choice *c = &r->choices[i];
        cJSON *ch = cJSON_CreateObject();
        if (!ch)
            break;
        cJSON_AddItemToArray(choices, ch);
        cJSON_AddNumberToObject(ch, "index", i);
        srv_buf t = {0};
        if (r->echo && r->echo[c->group])
            srv_buf_append(&t, r->echo[c->group], strlen(r->echo[c->group]));
        srv_buf_append(&t, c->text.data ? c->text.data : "", c->text.len);
        cJSON_AddItemToObject(ch, "text", string_n(t.data ? t.data : "", t.len));
        srv_buf_free(&t);
        cJSON_AddNullToObject(ch, "logprobs");
        if (c->finish_reason)
            cJSON_AddStringToObject(ch, "finish_reason", c->finish_reason);
        else
            cJSON_AddNullToObject(ch, "finish_reason");
        if (r->p.return_token_ids)
            cJSON_AddItemToObject(ch, "token_ids", ids_array(c->ids, 0, c->n_ids));
    }
    cJSON_AddItemToObject(o, "usage", usage(r));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *srv_chunk_json(const srv_req *r, const char *model_name, int ci, const char *text,
                     size_t text_len, int id_from, int id_to, const char *finish)
{
    cJSON *o = head(r, model_name), *choices = cJSON_CreateArray(), *ch = cJSON_CreateObject();
    if (!o || !choices || !ch) {
        cJSON_Delete(o);
        cJSON_Delete(choices);
        cJSON_Delete(ch);
        return NULL;
    }
    cJSON_AddItemToObject(o, "choices", choices);
    cJSON_AddItemToArray(choices, ch);
    cJSON_AddNumberToObject(ch, "index", ci);
    cJSON_AddItemToObject(ch, "text", string_n(text, text_len));
    cJSON_AddNullToObject(ch, "logprobs");
    if (finish)
        cJSON_AddStringToObject(ch, "finish_reason", finish);
    else
        cJSON_AddNullToObject(ch, "finish_reason");
    if (r->p.return_token_ids)
        cJSON_AddItemToObject(ch, "token_ids", ids_array(r->choices[ci].ids, id_from, id_to));
    if (r->p.include_usage)
        cJSON_AddNullToObject(o, "usage");
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

char *srv_usage_chunk_json(const srv_req *r, const char *model_name)
{
    cJSON *o = head(r, model_name);
    if (!o)
        return NULL;
    cJSON_AddItemToObject(o, "choices", cJSON_CreateArray());
    cJSON_AddItemToObject(o, "usage", usage(r));
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}
