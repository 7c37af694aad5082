/*
 * schema.c — a JSON Schema's text to GBNF text (schema_compile.c compiles it).
 */
#include "schema_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void err_clear(mhla_grammar_error *err)
{
    if (err) {
        err->msg[0] = '\0';
        err->path[0] = '\0';
        err->pos = -1;
    }
}

/* The root rule is reserved first: no property named "root" can take it. */
static int convert(sc_conv *c, char **gbnf)
{
    const char *root, *space;
    char *body = NULL;
    int rc = sc_rule_reserve(c, "root", &root);
    if (!rc) /* every grammar has it, as llama.cpp's: rules refer to it freely */
        rc = sc_rule_builtin(c, "space", &space);
    if (!rc)
        rc = sc_build(c, c->root, "", &body);
    if (!rc)
        rc = sc_rule_define(c, "root", body);
    free(body);
    return rc ? rc : sc_rules_print(c, gbnf);
}

int mhla_grammar_schema_to_gbnf(const char *schema, size_t len, char **gbnf,
                                mhla_grammar_error *err)
{
    mhla_grammar_error local;
    if (!err)
        err = &local;
    err_clear(err);
    if (!gbnf || (!schema && len)) {
        snprintf(err->msg, sizeof err->msg, "schema: no schema text or no place for the grammar");
        return MHLA_GRAMMAR_SYNTAX;
    }
    *gbnf = NULL;
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(schema ? schema : "", len, &end, 0);
    if (!doc) {
        err->pos = end && schema ? (long)(end - schema) : 0;
        snprintf(err->msg, sizeof err->msg, "schema: not valid JSON (near byte %ld)", err->pos);
        return MHLA_GRAMMAR_SYNTAX;
    }
    sc_conv c = {0};
    c.root = doc;
    c.err = err;
    int rc = convert(&c, gbnf);
    sc_conv_free(&c);
    cJSON_Delete(doc);
    return rc;
}
