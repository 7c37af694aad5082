/*
 * chat_messages.c — a chat request's "messages" as a chat template reads
 * them. Each message is checked (its role, its content, the names and the
 * tool calls it may carry) and rewritten into the shape Hugging Face
 * templates expect: content a string (text parts joined with "\n", as vLLM
 * and llama-server flatten them; any other part type is refused, naming the
 * part), an assistant's tool-call arguments parsed from their JSON string
 * into an object. Every refusal is a 400 whose param points at the field
 * (messages[2].content[1].type).
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#define MAX_MESSAGES 4096

static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};

static int refuse(srv_error *e, const char *param, const char *fmt, const char *arg)
{
    srv_error_set(e, SRV_ERR_INVALID, param, fmt, arg);
    return -1;
}

static int nomem(srv_error *e)
{
    srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory reading the messages");
    return -1;
}

/* An array of parts as one string: text parts joined with "\n". */
static int flatten_parts(const cJSON *parts, int i, mhla_buf *out, srv_error *e)
{
    char param[64];
    const cJSON *p;
    int j = 0;
    cJSON_ArrayForEach(p, parts)
    {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        snprintf(param, sizeof param, "messages[%d].content[%d].type", i, j);
        if (!cJSON_IsObject(p) || !cJSON_IsString(type))
            return refuse(e, param, "a content part needs a string '%s'", "type");
        if (strcmp(type->valuestring, "text") != 0)
            return refuse(e, param, "content parts of type '%.40s' are not supported (text only)",
                          type->valuestring);
        snprintf(param, sizeof param, "messages[%d].content[%d].text", i, j);
        if (!cJSON_IsString(text))
            return refuse(e, param, "a text part needs a string '%s'", "text");
        if ((j > 0 && mhla_buf_putc(out, '\n')) ||
            mhla_buf_put(out, text->valuestring, strlen(text->valuestring)))
            return nomem(e);
        j++;
    }
    return mhla_buf_put(out, "", 0) ? nomem(e) : 0;
}

/* The message's content as the template sees it: a string, or null. */
static int add_content(const cJSON *m, int i, int may_be_null, cJSON *out, srv_error *e)
{
    char param[48];
    snprintf(param, sizeof param, "messages[%d].content", i);
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsNull(c)) {
        if (!may_be_null)
            return refuse(e, param, "this message needs its '%s'", "content");
        return cJSON_AddNullToObject(out, "content") ? 0 : nomem(e);
    }
    if (cJSON_IsString(c))
        return cJSON_AddStringToObject(out, "content", c->valuestring) ? 0 : nomem(e);
    if (!cJSON_IsArray(c))
        return refuse(e, param, "'%s' must be a string or an array of parts", "content");
    mhla_buf text = {0};
    int rc = flatten_parts(c, i, &text, e);
    if (rc == 0 && !cJSON_AddStringToObject(out, "content", text.p ? text.p : ""))
        rc = nomem(e);
    mhla_buf_free(&text);
    return rc;
}

/* One tool call of an assistant message, its arguments parsed into an object. */
static int add_tool_call(const cJSON *tc, int i, int k, cJSON *calls, srv_error *e)
{
    char param[80];
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
    snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function", i, k);
    if (!cJSON_IsObject(tc) || !cJSON_IsObject(fn) || !cJSON_IsString(name))
        return refuse(e, param, "a tool call needs a function with a string '%s'", "name");
    int oom = 0;
    cJSON *parsed = cJSON_IsString(args)
                        ? srv_json_parse(args->valuestring, strlen(args->valuestring), NULL, &oom)
                        : NULL;
    if (oom)
        return nomem(e);
    if (args && !cJSON_IsNull(args) && !parsed) {
        snprintf(param, sizeof param, "messages[%d].tool_calls[%d].function.arguments", i, k);
        return refuse(e, param, "'%s' must be a string holding JSON", "arguments");
    }
    cJSON *call = cJSON_CreateObject(), *f = cJSON_CreateObject();
    int ok = call && f && cJSON_AddStringToObject(call, "type", "function") &&
             (!cJSON_IsString(id) || cJSON_AddStringToObject(call, "id", id->valuestring)) &&
             cJSON_AddStringToObject(f, "name", name->valuestring);
    if (ok && parsed) {
        ok = cJSON_AddItemToObject(f, "arguments", parsed);
        if (ok)
            parsed = NULL;
    }
    ok = ok && cJSON_AddItemToObject(call, "function", f);
    if (ok)
        f = NULL;
    ok = ok && cJSON_AddItemToArray(calls, call);
    cJSON_Delete(parsed);
    cJSON_Delete(f);
    if (!ok)
        cJSON_Delete(call);
    return ok ? 0 : nomem(e);
}

static int add_tool_calls(const cJSON *m, int i, cJSON *out, srv_error *e)
{
    const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
    if (!tcs || cJSON_IsNull(tcs))
        return 0;
    char param[48];
    snprintf(param, sizeof param, "messages[%d].tool_calls", i);
    if (!cJSON_IsArray(tcs))
        return refuse(e, param, "'%s' must be an array", "tool_calls");
    cJSON *calls = cJSON_AddArrayToObject(out, "tool_calls");
    if (!calls)
        return nomem(e);
    const cJSON *tc;
    int k = 0;
    cJSON_ArrayForEach(tc, tcs)
    {
        if (add_tool_call(tc, i, k++, calls, e))
            return -1;
    }
    return 0;
}

/* An optional string field copied as is. */
static int add_string(const cJSON *m, int i, const char *name, int required, cJSON *out,
                      srv_error *e)
{
    char param[64];
    snprintf(param, sizeof param, "messages[%d].%s", i, name);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, name);
    if (!v || cJSON_IsNull(v))
        return required ? refuse(e, param, "a tool message needs its '%s'", name) : 0;
    if (!cJSON_IsString(v))
        return refuse(e, param, "'%s' must be a string", name);
    return cJSON_AddStringToObject(out, name, v->valuestring) ? 0 : nomem(e);
}

/* Message i, checked, into a new object of the template's shape. */
static cJSON *one_message(const cJSON *m, int i, srv_error *e)
{
    char param[48];
    snprintf(param, sizeof param, "messages[%d].role", i);
    const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
    if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
        snprintf(param, sizeof param, "messages[%d]", i);
        refuse(e, param, "a message is an object with a string '%s'", "role");
        return NULL;
    }
    size_t r = 0;
    while (r < sizeof roles / sizeof roles[0] && strcmp(role->valuestring, roles[r]))
        r++;
    if (r == sizeof roles / sizeof roles[0]) {
        refuse(e, param, "unknown role '%.40s' (system, developer, user, assistant or tool)",
               role->valuestring);
        return NULL;
    }
    int assistant = !strcmp(roles[r], "assistant"), tool = !strcmp(roles[r], "tool");
    cJSON *out = cJSON_CreateObject();
    if (!out || !cJSON_AddStringToObject(out, "role", roles[r])) {
        nomem(e);
        cJSON_Delete(out);
        return NULL;
    }
    if (add_content(m, i, assistant, out, e) || add_string(m, i, "name", 0, out, e) ||
        (assistant && add_tool_calls(m, i, out, e)) ||
        (tool && add_string(m, i, "tool_call_id", 1, out, e))) {
        cJSON_Delete(out);
        return NULL;
    }
    return out;
}

int srv_chat_messages_parse(const cJSON *root, cJSON **out, srv_error *e)
{
    *out = NULL;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) == 0)
        return refuse(e, "messages", "'%s' must be a non-empty array of messages", "messages");
    if (cJSON_GetArraySize(ms) > MAX_MESSAGES)
        return refuse(e, "messages", "'%s' holds more than 4096 messages", "messages");
    cJSON *list = cJSON_CreateArray();
    if (!list)
        return nomem(e);
    const cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, ms)
    {
        cJSON *one = one_message(m, i++, e);
        if (!one || !cJSON_AddItemToArray(list, one)) {
            if (one)
                nomem(e);
            cJSON_Delete(one);
            cJSON_Delete(list);
            return -1;
        }
    }
    *out = list;
    return 0;
}
