/*
 * chat_tools.c — a chat body's tools, tool_choice and parallel_tool_calls:
 * the tool definitions checked (OpenAI's shape, {"type": "function",
 * "function": {name, description?, parameters?, strict?}}) and handed to
 * the template as `tools`, and how the reply is read: with tools and a
 * tool_choice other than "none", the reply's calls are parsed in the
 * server's tool-call format. A tool_choice that forces a call
 * ("required", or one named function) holds the reply to calls by a
 * grammar (tool_force.c).
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <string.h>

#define MAX_TOOLS 128
#define MAX_TOOL_NAME 64

static int refuse(srv_error *e, const char *param, const char *msg)
{
    srv_error_set(e, SRV_ERR_INVALID, param, "%s", msg);
    return -1;
}

/* OpenAI's rule for function names: a-z, A-Z, 0-9, '_' and '-', at most 64. */
static int good_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > MAX_TOOL_NAME)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

/* tools[i]: {"type": "function", "function": {"name", ...}}. */
static int check_tool(const cJSON *t, int i, srv_error *e)
{
    char param[64];
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
    snprintf(param, sizeof param, "tools[%d].type", i);
    if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function"))
        return refuse(e, param, "each tool needs \"type\": \"function\"");
    snprintf(param, sizeof param, "tools[%d].function", i);
    if (!cJSON_IsObject(fn))
        return refuse(e, param, "each tool needs a 'function' object");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(fn, "description");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    snprintf(param, sizeof param, "tools[%d].function.name", i);
    if (!cJSON_IsString(name) || !good_name(name->valuestring))
        return refuse(e, param,
                      "a function's 'name' must be 1 to 64 of a-z, A-Z, 0-9, '_', '-' and '.'");
    snprintf(param, sizeof param, "tools[%d].function.description", i);
    if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))
        return refuse(e, param, "a function's 'description' must be a string");
    snprintf(param, sizeof param, "tools[%d].function.parameters", i);
    if (params && !cJSON_IsNull(params) && !cJSON_IsObject(params))
        return refuse(e, param, "a function's 'parameters' must be a JSON Schema object");
    return 0;
}

static int check_tools(const cJSON *tools, srv_error *e)
{
    if (!cJSON_IsArray(tools))
        return refuse(e, "tools", "'tools' must be an array of tools");
    int n = cJSON_GetArraySize(tools), i = 0;
    if (n > MAX_TOOLS)
        return refuse(e, "tools", "at most 128 tools in a request");
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        if (check_tool(t, i++, e))
            return -1;
    }
    return 0;
}

/* tools names a function called name. */
static int has_tool(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *n =
            cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"),
                                             "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name))
            return 1;
    }
    return 0;
}

/* A named tool_choice, {"type": "function", "function": {"name"}}: its name
 * (one of the tools'), or NULL with e set. */
static const char *named_choice(const cJSON *choice, const cJSON *tools, srv_error *e)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(choice, "type");
    const cJSON *name =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(choice, "function"),
                                         "name");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsString(name)) {
        refuse(e, "tool_choice",
               "a named 'tool_choice' is {\"type\": \"function\", \"function\": {\"name\": …}}");
        return NULL;
    }
    if (!has_tool(tools, name->valuestring)) {
        refuse(e, "tool_choice.function.name",
               "'tool_choice' names a function 'tools' do not have");
        return NULL;
    }
    return name->valuestring;
}

enum { CHOICE_NONE, CHOICE_AUTO, CHOICE_FORCED };

/* tool_choice: CHOICE_AUTO when calls are parsed ("auto", the default with
 * tools), CHOICE_NONE for "none", CHOICE_FORCED for "required" or a named
 * function (*only: its name); -1 with e set. */
static int check_choice(const cJSON *choice, const cJSON *tools, const char **only, srv_error *e)
{
    int has_tools = tools != NULL;
    *only = NULL;
    if (!choice || cJSON_IsNull(choice))
        return has_tools ? CHOICE_AUTO : CHOICE_NONE;
    int is_word = cJSON_IsString(choice);
    const char *w = is_word ? choice->valuestring : "";
    if (is_word && !strcmp(w, "none"))
        return CHOICE_NONE;
    if (!has_tools)
        return refuse(e, "tool_choice", "'tool_choice' is only allowed when 'tools' are given");
    if (is_word && !strcmp(w, "auto"))
        return CHOICE_AUTO;
    if (is_word && !strcmp(w, "required"))
        return CHOICE_FORCED;
    if (cJSON_IsObject(choice))
        return (*only = named_choice(choice, tools, e)) ? CHOICE_FORCED : -1;
    return refuse(e, "tool_choice",
                  "'tool_choice' must be \"none\", \"auto\", \"required\" or a named function");
}

int srv_chat_tools_parse(const cJSON *root, const srv_chat_render *cr, srv_grammars *gs,
                         srv_params *p, const cJSON **tools, srv_error *e)
{
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    const char *only = NULL;
    *tools = NULL;
    if (t && cJSON_IsArray(t) && cJSON_GetArraySize(t) == 0)
        t = NULL; /* templates read [] as no tools */
    if (t && cJSON_IsNull(t))
        t = NULL;
    if (t && check_tools(t, e))
        return -1;
    int choice = check_choice(cJSON_GetObjectItemCaseSensitive(root, "tool_choice"), t, &only, e);
    if (choice < 0)
        return -1;
    if (par && !cJSON_IsNull(par) && !cJSON_IsBool(par))
        return refuse(e, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    p->single_tool_call = cJSON_IsFalse(par);
    p->tool_format = choice != CHOICE_NONE && cr ? cr->tool_format : SRV_TOOLS_NONE;
    *tools = t;
    if (choice != CHOICE_FORCED || !gs) /* /apply-template only renders */
        return 0;
    return srv_tool_force_grammar(gs, p->tool_format, t, only, p->single_tool_call || only != NULL,
                                  &p->grammar, e);
}
