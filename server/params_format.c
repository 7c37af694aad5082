/*
 * params_format.c — a body's constraint on its output: OpenAI's
 * response_format ({"type": "text"}, {"type": "json_object"},
 * {"type": "json_schema", "json_schema": {name, schema, strict}}), or
 * llama-server's grammar (GBNF text) and json_schema (a schema object).
 * At most one of them; its grammar is compiled (or found in the cache) here,
 * on the connection's thread, so a bad one is a 400 before anything runs.
 */
#include "server_internal.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

static int refuse(srv_error *e, const char *param, const char *msg)
{
    srv_error_set(e, SRV_ERR_INVALID, param, "%s", msg);
    return -1;
}

/* The grammar of a schema value (an object; true means any JSON value). */
static int from_schema(const cJSON *schema, const srv_limits *lim, const char *param, srv_params *p,
                       srv_error *e)
{
    if (!cJSON_IsObject(schema) && !cJSON_IsTrue(schema))
        return refuse(e, param, "the schema must be a JSON Schema object");
    char *text = cJSON_PrintUnformatted(schema);
    if (!text) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory reading the schema");
        return -1;
    }
    int rc = srv_grammars_get(lim->grammars, SRV_GRAMMAR_SCHEMA, text, strlen(text), param,
                              &p->grammar, e);
    cJSON_free(text);
    return rc;
}

/* response_format's json_schema: {name?, schema, strict?, description?}. */
static int json_schema_format(const cJSON *js, const srv_limits *lim, srv_params *p, srv_error *e)
{
    if (!cJSON_IsObject(js))
        return refuse(e, "response_format.json_schema",
                      "'json_schema' must be an object with the 'schema'");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (name && !cJSON_IsString(name))
        return refuse(e, "response_format.json_schema.name", "'name' must be a string");
    if (strict && !cJSON_IsBool(strict) && !cJSON_IsNull(strict))
        return refuse(e, "response_format.json_schema.strict", "'strict' must be a boolean");
    if (!schema)
        return refuse(e, "response_format.json_schema.schema", "the 'schema' is missing");
    return from_schema(schema, lim, "response_format.json_schema.schema", p, e);
}

static int response_format(const cJSON *rf, const srv_limits *lim, srv_params *p, srv_error *e)
{
    const cJSON *type = cJSON_IsObject(rf) ? cJSON_GetObjectItemCaseSensitive(rf, "type") : NULL;
    if (!cJSON_IsString(type))
        return refuse(e, "response_format", "'response_format' must be an object with a 'type'");
    const char *t = type->valuestring;
    if (!strcmp(t, "text"))
        return 0;
    if (!strcmp(t, "json_object"))
        return srv_grammars_get(lim->grammars, SRV_GRAMMAR_JSON_OBJECT, "", 0, "response_format",
                                &p->grammar, e);
    if (!strcmp(t, "json_schema"))
        return json_schema_format(cJSON_GetObjectItemCaseSensitive(rf, "json_schema"), lim, p, e);
    return refuse(e, "response_format.type",
                  "'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"");
}

static const cJSON *given(const cJSON *root, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

int srv_params_format(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e)
{
    const cJSON *rf = given(root, "response_format"), *gbnf = given(root, "grammar"),
                *js = given(root, "json_schema");
    if ((rf != NULL) + (gbnf != NULL) + (js != NULL) > 1)
        return refuse(e, gbnf ? "grammar" : "json_schema",
                      "give one of 'response_format', 'grammar' and 'json_schema'");
    if (!rf && !gbnf && !js)
        return 0;
    if (p->grammar) /* tool_choice forces calls */
        return refuse(e,
                      rf     ? "response_format"
                      : gbnf ? "grammar"
                             : "json_schema",
                      "a 'tool_choice' that forces a call already holds the answer to tool calls");
    if (!lim->grammars)
        return refuse(e,
                      rf     ? "response_format"
                      : gbnf ? "grammar"
                             : "json_schema",
                      "structured outputs are not served by this server");
    int rc = 0;
    if (rf)
        rc = response_format(rf, lim, p, e);
    else if (js)
        rc = from_schema(js, lim, "json_schema", p, e);
    else if (!cJSON_IsString(gbnf) || !gbnf->valuestring[0])
        return refuse(e, "grammar", "'grammar' must be GBNF text");
    else
        rc = srv_grammars_get(lim->grammars, SRV_GRAMMAR_GBNF, gbnf->valuestring,
                              strlen(gbnf->valuestring), "grammar", &p->grammar, e);
    if (rc == 0 && p->grammar && p->ignore_eos)
        return refuse(e, "ignore_eos",
                      "'ignore_eos' cannot go with a grammar: the answer ends where its grammar "
                      "is complete");
    return rc;
}
