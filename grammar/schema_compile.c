/*
 * schema_compile.c — a JSON Schema, or "any JSON object", compiled: the GBNF
 * text of schema.c given to the GBNF compiler. Apart from schema.c so that
 * the text alone (tools, tests, the fuzz target) needs no compiler.
 */
#include "schema_internal.h"

#include <stdlib.h>
#include <string.h>

int mhla_grammar_from_json_schema(const char *schema, size_t len, mhla_grammar **out,
                                  mhla_grammar_error *err)
{
    char *gbnf = NULL;
    if (out)
        *out = NULL;
    int rc = mhla_grammar_schema_to_gbnf(schema, len, &gbnf, err);
    if (rc)
        return rc;
    rc = mhla_grammar_from_gbnf(gbnf, strlen(gbnf), "root", out, err);
    free(gbnf);
    return rc;
}

int mhla_grammar_json_object(mhla_grammar **out, mhla_grammar_error *err)
{
    static const char any_object[] = "{\"type\":\"object\"}";
    return mhla_grammar_from_json_schema(any_object, sizeof any_object - 1, out, err);
}
