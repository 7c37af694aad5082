/*
 * test_schema_text.c — JSON Schema to GBNF, checked on the text alone (no
 * GBNF compiler needed): the rules expected for small schemas (llama.cpp's
 * shapes), refused keywords with their message and JSON pointer, the caps,
 * and the same text for the same schema.
 */
#include "grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            failures++;                                                                            \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

static char *gbnf_of(const char *schema, int *rc, mhla_grammar_error *err)
{
    char *g = NULL;
    *rc = mhla_grammar_schema_to_gbnf(schema, strlen(schema), &g, err);
    return g;
}

/* The schema converts and its text holds every snippet. */
static void expect_rules(const char *schema, const char *const *snippets)
{
    mhla_grammar_error err;
    int rc;
    char *g = gbnf_of(schema, &rc, &err);
    CHECK(rc == 0, "%s: rc %d (%s at %s)", schema, rc, err.msg, err.path);
    for (int i = 0; rc == 0 && snippets[i]; i++)
        CHECK(strstr(g, snippets[i]) != NULL, "%s: no '%s' in:\n%s", schema, snippets[i], g);
    free(g);
}

/* The schema fails with code, the message naming what, at path. */
static void expect_error(const char *schema, int code, const char *what, const char *path)
{
    mhla_grammar_error err;
    int rc;
    char *g = gbnf_of(schema, &rc, &err);
    CHECK(rc == code, "%s: rc %d, expected %d (%s)", schema, rc, code, err.msg);
    CHECK(g == NULL, "%s: a grammar on failure", schema);
    CHECK(strstr(err.msg, what) != NULL, "%s: message '%s' does not name '%s'", schema, err.msg,
          what);
    CHECK(!path || strcmp(err.path, path) == 0, "%s: path '%s', expected '%s'", schema, err.path,
          path);
    free(g);
}

static void test_shapes(void)
{
    expect_rules("{\"type\":\"string\"}",
                 (const char *const[]){"root ::= string\n", "space ::= ", "{0,20}", NULL});
    expect_rules("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{"
                 "\"type\":\"boolean\"}},\"required\":[\"a\"]}",
                 (const char *const[]){"a-kv ::= \"\\\"a\\\"\" space \":\" space a\n",
                                       "root ::= \"{\" space a-kv ( \",\" space ( b-kv ) )? "
                                       "space \"}\"",
                                       NULL});
    expect_rules("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,"
                 "\"maxItems\":3}",
                 (const char *const[]){"\"[\" space item ( \",\" space item ){0,2} space \"]\"",
                                       NULL});
    expect_rules("{\"type\":\"integer\",\"minimum\":1,\"maximum\":12}",
                 (const char *const[]){"root ::= ([1-9] | \"1\" [0-2])", NULL});
    expect_rules("{\"enum\":[\"a\",1,null]}",
                 (const char *const[]){"root ::= ( \"\\\"a\\\"\" | \"1\" | \"null\" )", NULL});
    expect_rules("{\"type\":\"string\",\"pattern\":\"^ab?$\"}",
                 (const char *const[]){"root ::= \"\\\"\" ( [a] [b]? ) \"\\\"\"", NULL});
    expect_rules("{\"type\":\"string\",\"format\":\"date\"}",
                 (const char *const[]){"root ::= date-string", NULL});
    expect_rules("{\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/"
                 "$defs/n\"}}}},\"$ref\":\"#/$defs/n\"}",
                 (const char *const[]){"root ::= ref-defs-n\n", "next ::= ref-defs-n\n", NULL});
    /* a $ref beside other keywords is their conjunction, not the $ref alone */
    expect_rules("{\"$ref\":\"#/$defs/s\",\"maxLength\":2,\"$defs\":{\"s\":{\"type\":\"string\"}}}",
                 (const char *const[]){"root ::= \"\\\"\" char{0,2} \"\\\"\"", NULL});
    expect_rules("{\"id\":\"urn:x\",\"title\":\"t\",\"type\":\"null\"}",
                 (const char *const[]){"root ::= null\n", NULL});
    expect_rules("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"null\"}},"
                 "\"additionalProperties\":{\"type\":\"integer\"}}",
                 (const char *const[]){"additional-k ::= ", "key-char ::= ", NULL});
}

static void test_refusals(void)
{
    expect_error("{\"type\":\"integer\",\"multipleOf\":3}", MHLA_GRAMMAR_UNSUPPORTED,
                 "'multipleOf'", "/multipleOf");
    expect_error("{\"type\":\"object\",\"properties\":{\"age\":{\"type\":\"integer\",\"not\":{}}}}",
                 MHLA_GRAMMAR_UNSUPPORTED, "'not'", "/properties/age/not");
    expect_error("{\"type\":\"object\",\"patternProperties\":{}}", MHLA_GRAMMAR_UNSUPPORTED,
                 "'patternProperties'", "/patternProperties");
    expect_error("{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", MHLA_GRAMMAR_UNSUPPORTED,
                 "lookaround", "/pattern");
    expect_error("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", MHLA_GRAMMAR_UNSUPPORTED,
                 "backreference", "/pattern");
    expect_error("{\"type\":\"string\",\"format\":\"uri\"}", MHLA_GRAMMAR_UNSUPPORTED, "'uri'",
                 "/format");
    expect_error("{\"type\":\"string\",\"minLength\":2,\"pattern\":\"a\"}",
                 MHLA_GRAMMAR_UNSUPPORTED, "pattern", NULL);
    expect_error("{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}",
                 MHLA_GRAMMAR_UNSUPPORTED, "oneOf", NULL);
    expect_error("{\"$ref\":\"other.json#/a\"}", MHLA_GRAMMAR_UNSUPPORTED, "another document",
                 NULL);
    expect_error("{\"$ref\":\"#/$defs/missing\"}", MHLA_GRAMMAR_SYNTAX, "names nothing", NULL);
    expect_error("{\"type\":\"number\",\"minimum\":0.5}", MHLA_GRAMMAR_UNSUPPORTED, "0.5", NULL);
    expect_error("{\"type\":", MHLA_GRAMMAR_SYNTAX, "not valid JSON", NULL);
    expect_error("false", MHLA_GRAMMAR_UNSUPPORTED, "no value", NULL);
    expect_error("{\"type\":\"strnig\"}", MHLA_GRAMMAR_SYNTAX, "strnig", NULL);
}

/* Caps: a deep nest, a big repeat count and a self-feeding allOf fail fast. */
static void test_limits(void)
{
    size_t depth = 200, n = 0;
    char *deep = malloc(depth * 16 + 64);
    for (size_t i = 0; i < depth; i++)
        n += (size_t)sprintf(deep + n, "{\"items\":");
    n += (size_t)sprintf(deep + n, "{}");
    for (size_t i = 0; i < depth; i++)
        deep[n++] = '}';
    deep[n] = '\0';
    expect_error(deep, MHLA_GRAMMAR_LIMIT, "deeper", NULL);
    free(deep);
    expect_error("{\"type\":\"string\",\"minLength\":100000}", MHLA_GRAMMAR_LIMIT, "minLength",
                 NULL);
    expect_error("{\"type\":\"string\",\"pattern\":\"a{5000}\"}", MHLA_GRAMMAR_LIMIT, "repeat",
                 NULL);
    expect_error("{\"allOf\":[{\"$ref\":\"#\"}]}", MHLA_GRAMMAR_LIMIT, "deeper", NULL);
}

static void test_deterministic(void)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"x\":{\"anyOf\":[{\"type\":\"string\"},"
                    "{\"type\":\"array\",\"items\":{\"$ref\":\"#\"}}]},\"y\":{\"type\":\"integer\","
                    "\"minimum\":-5}},\"additionalProperties\":true}";
    mhla_grammar_error err;
    int rc1, rc2;
    char *a = gbnf_of(s, &rc1, &err), *b = gbnf_of(s, &rc2, &err);
    CHECK(rc1 == 0 && rc2 == 0 && strcmp(a, b) == 0, "two conversions differ");
    free(a);
    free(b);
}

int main(void)
{
    test_shapes();
    test_refusals();
    test_limits();
    test_deterministic();
    if (failures) {
        fprintf(stderr, "test_schema_text: %d failures\n", failures);
        return 1;
    }
    printf("test_schema_text: ok\n");
    return 0;
}
