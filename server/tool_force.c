/*
 * tool_force.c — tool_choice "required" or a named function: the reply is
 * held, by a grammar, to tool calls in the server's tool-call format. Each
 * call is a JSON object {"name": <one of the tools>, "arguments": <that
 * tool's parameters schema>} ("parameters" for llama3), written in the
 * format's wrapping:
 *
 *   hermes   <tool_call>\n{…}\n</tool_call>, one or more (one without
 *            parallel calls), separated by a newline;
 *   llama3   the object itself, one call;
 *   mistral  [TOOL_CALLS][{…}, …].
 *
 * The calls' JSON is the grammar of a JSON Schema (anyOf the tools' call
 * objects), so the arguments follow each tool's schema; the wrapping is GBNF
 * around it, whose start rule is "tool-calls".
 */
#include "server_internal.h"
#include "grammar.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

/* The call object's schema for one tool, appended to b: its name as a
 * constant (names are checked to need no escaping), its parameters (any
 * object when it has none) under key. 0, or -1 when out of memory. */
static int call_schema(mhla_buf *b, const cJSON *fn, const char *key)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
    char *args = cJSON_IsObject(params) ? cJSON_PrintUnformatted(params) : NULL;
    int rc = (cJSON_IsObject(params) && !args) ||
             srv_buf_printf(b,
                            "{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"%s\"},"
                            "\"%s\":%s},\"required\":[\"name\",\"%s\"],"
                            "\"additionalProperties\":false}",
                            name->valuestring, key, args ? args : "{\"type\":\"object\"}", key);
    cJSON_free(args);
    return rc ? -1 : 0;
}

/* anyOf the call objects of the tools (only the one named only, when given). */
static int calls_schema(mhla_buf *b, const cJSON *tools, const char *only, const char *key)
{
    int rc = mhla_buf_put(b, "{\"anyOf\":[", 10), n = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools)
    {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (rc || (only && strcmp(name->valuestring, only)))
            continue;
        rc = (n++ && mhla_buf_putc(b, ',')) || call_schema(b, fn, key);
    }
    return rc || mhla_buf_put(b, "]}", 2) ? -1 : 0;
}

/* The wrapping of the format, its start rule "tool-calls" around the
 * schema's "root". */
static const char *wrapping(srv_tool_format f, int single)
{
    switch (f) {
    case SRV_TOOLS_HERMES:
        return single ? "\ntool-calls ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n"
                      : "\ntool-calls ::= call ( \"\\n\" call )*\n"
                        "call ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n";
    case SRV_TOOLS_LLAMA3: return "\ntool-calls ::= root\n";
    default:
        return single ? "\ntool-calls ::= \"[TOOL_CALLS][\" root \"]\"\n"
                      : "\ntool-calls ::= \"[TOOL_CALLS][\" root ( \", \" root )* \"]\"\n";
    }
}

int srv_tool_force_grammar(srv_grammars *gs, srv_tool_format f, const cJSON *tools,
                           const char *only, int single, srv_grammar_ref **out, srv_error *e)
{
    *out = NULL;
    if (f == SRV_TOOLS_NONE) {
        srv_error_set(e, SRV_ERR_INVALID, "tool_choice",
                      "'tool_choice' cannot force a call: this server does not read tool calls "
                      "(--tool-call-format none)");
        return -1;
    }
    mhla_buf schema = {0}, text = {0};
    char *gbnf = NULL;
    mhla_grammar_error ge = {.pos = -1};
    int rc = calls_schema(&schema, tools, only, f == SRV_TOOLS_LLAMA3 ? "parameters" : "arguments")
                 ? MHLA_GRAMMAR_NOMEM
                 : mhla_grammar_schema_to_gbnf(schema.p, schema.len, &gbnf, &ge);
    mhla_buf_free(&schema);
    if (rc == 0) {
        const char *w = wrapping(f, single);
        rc = mhla_buf_put(&text, gbnf, strlen(gbnf)) || mhla_buf_put(&text, w, strlen(w))
                 ? MHLA_GRAMMAR_NOMEM
                 : 0;
    }
    free(gbnf);
    if (rc == 0)
        rc = srv_grammars_get(gs, SRV_GRAMMAR_TOOL_CALLS, text.p, text.len, "tools", out, e);
    else if (rc == MHLA_GRAMMAR_NOMEM)
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory for the tool calls' grammar");
    else
        srv_error_set(e, SRV_ERR_INVALID, "tools", "a tool's parameters: %s%s%s", ge.msg,
                      ge.path[0] ? " at " : "", ge.path);
    mhla_buf_free(&text);
    return rc ? -1 : 0;
}
