/*
 * errors.c — the server's one error model: every failure carries a code
 * (srv_errcode); the HTTP status, the OpenAI error type and the error's
 * "code" string are chosen from it here and nowhere else. Engine errors
 * reach it through srv_error_from_engine.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdarg.h>
#include <stdio.h>

static const struct {
    int status;
    const char *type;
    const char *code; /* NULL: JSON null */
} kinds[SRV_ERR_COUNT] = {
    [SRV_ERR_INVALID] = {400, "invalid_request_error", NULL},
    [SRV_ERR_CONTEXT] = {400, "invalid_request_error", "context_length_exceeded"},
    [SRV_ERR_UNAUTHORIZED] = {401, "invalid_request_error", "invalid_api_key"},
    [SRV_ERR_NOT_FOUND] = {404, "invalid_request_error", "not_found"},
    [SRV_ERR_MODEL_NOT_FOUND] = {404, "invalid_request_error", "model_not_found"},
    [SRV_ERR_ORIGIN] = {403, "invalid_request_error", "origin_not_allowed"},
    [SRV_ERR_METHOD] = {405, "invalid_request_error", "method_not_allowed"},
    [SRV_ERR_TOO_LARGE] = {413, "invalid_request_error", "request_too_large"},
    [SRV_ERR_URI_TOO_LONG] = {414, "invalid_request_error", "uri_too_long"},
    [SRV_ERR_HEADERS_TOO_LARGE] = {431, "invalid_request_error", "headers_too_large"},
    [SRV_ERR_QUEUE_FULL] = {429, "rate_limit_error", "queue_full"},
    [SRV_ERR_CLIENT_CLOSED] = {499, "invalid_request_error", "client_closed"},
    [SRV_ERR_INTERNAL] = {500, "server_error", NULL},
    [SRV_ERR_FULL] = {503, "server_error", "state_memory_full"},
    [SRV_ERR_DRAINING] = {503, "server_error", "server_draining"},
};

static srv_errcode valid(srv_errcode code)
{
    return (unsigned)code < SRV_ERR_COUNT ? code : SRV_ERR_INTERNAL;
}

void srv_error_set(srv_error *e, srv_errcode code, const char *param, const char *fmt, ...)
{
    e->code = valid(code);
    snprintf(e->param, sizeof e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

int srv_error_status(srv_errcode code) { return kinds[valid(code)].status; }

srv_errcode srv_error_from_engine(mhla_status code)
{
    switch (code) {
    case MHLA_ERR_FULL: return SRV_ERR_FULL;
    case MHLA_ERR_CONTEXT: return SRV_ERR_CONTEXT;
    default: return SRV_ERR_INTERNAL; /* requests were validated: the rest is ours */
    }
}

char *srv_error_json(const srv_error *e)
{
    cJSON *root = cJSON_CreateObject(), *o = cJSON_CreateObject();
    if (!root || !o) {
        cJSON_Delete(root);
        cJSON_Delete(o);
        return NULL;
    }
    srv_errcode code = valid(e->code);
    cJSON_AddItemToObject(root, "error", o);
    cJSON_AddStringToObject(o, "message", e->message);
    cJSON_AddStringToObject(o, "type", kinds[code].type);
    if (e->param[0])
        cJSON_AddStringToObject(o, "param", e->param);
    else
        cJSON_AddNullToObject(o, "param");
    if (kinds[code].code)
        cJSON_AddStringToObject(o, "code", kinds[code].code);
    else
        cJSON_AddNullToObject(o, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}
