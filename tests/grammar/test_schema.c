/*
 * test_schema.c — JSON Schemas compiled (mhla_grammar_from_json_schema) and
 * matched: for each small schema, instances it allows (and the grammar
 * serves) are whole strings of the grammar, instances it forbids are not.
 * Also "any JSON object" and its bounded whitespace.
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

typedef struct {
    const char *schema;
    const char *valid[6];   /* whole strings of the grammar */
    const char *invalid[6]; /* neither whole nor (where noted by the schema) accepted */
} example;

static const example EXAMPLES[] = {
    {"{\"type\":\"string\"}",
     {"\"\"", "\"a\\\"b\"", "\"\\u00e9\"", "\"\xc3\xa9\""},
     {"a", "\"\\x\"", "\"\\ud800\"", "1"}},
    {"{\"type\":\"integer\",\"minimum\":-3,\"maximum\":12}",
     {"-3", "0", "7", "12"},
     {"-4", "13", "1.5", "012"}},
    {"{\"type\":\"integer\",\"exclusiveMinimum\":99}", {"100", "12345"}, {"99", "-1", "0"}},
    {"{\"type\":\"number\",\"minimum\":0,\"maximum\":1}",
     {"0", "0.5", "1", "1.000"},
     {"1.5", "-0.1", "1.01", "2"}},
    {"{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":2}",
     {"0.001", "1", "1.999"},
     {"0", "2", "2.0", "-1"}},
    {"{\"type\":\"boolean\"}", {"true", "false"}, {"null", "True"}},
    {"{\"enum\":[\"red\",2,null,{\"a\":1}]}",
     {"\"red\"", "2", "null", "{\"a\":1}"},
     {"\"blue\"", "3"}},
    {"{\"const\":\"x\"}", {"\"x\""}, {"\"y\"", "x"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}",
     {"\"ab\"", "\"a\\nc\"", "\"abc\""},
     {"\"a\"", "\"abcd\""}},
    {"{\"type\":\"string\",\"pattern\":\"^[a-c]+-\\\\d{2}$\"}",
     {"\"ab-12\"", "\"c-00\""},
     {"\"ab-1\"", "\"d-12\"", "\"ab-123\""}},
    {"{\"type\":\"string\",\"pattern\":\"^(foo|bar)?x$\"}",
     {"\"x\"", "\"foox\"", "\"barx\""},
     {"\"bazx\"", "\"foo\""}},
    {"{\"type\":\"string\",\"pattern\":\"b\"}", {"\"b\"", "\"abc\""}, {"\"ac\""}},
    {"{\"type\":\"string\",\"format\":\"date\"}",
     {"\"2024-02-28\"", "\"1999-12-31\""},
     {"\"2024-13-01\"", "\"2024-02-30\""}},
    {"{\"type\":\"string\",\"format\":\"uuid\"}",
     {"\"123e4567-e89b-12d3-a456-426614174000\""},
     {"\"123e4567\""}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":1,\"maxItems\":2}",
     {"[1]", "[1, 2]", "[ 1,2 ]"},
     {"[]", "[1,2,3]", "[\"a\"]"}},
    {"{\"type\":\"array\",\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"null\"}],\"items\":false}",
     {"[\"a\",null]"},
     {"[null,\"a\"]", "[\"a\",null,1]"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"},\"b\":{\"type\":\"string\"}},\"required\":[\"a\"]}",
     {"{\"a\":1}", "{\"a\":1,\"b\":\"x\"}", "{ \"a\" : 1 }"},
     {"{}", "{\"b\":\"x\"}", "{\"a\":\"1\"}", "{\"a\":1,\"c\":2}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"additionalProperties\":{\"type\":\"boolean\"}}",
     {"{\"a\":1,\"z\":true}", "{\"zz\":false}"},
     {"{\"z\":1}", "{\"a\":true}"}},
    {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":1}]}",
     {"1", "\"a\""},
     {"\"ab\"", "null"}},
    {"{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"}},\"required\":[\"k\"]},{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"b\"},\"n\":{\"type\":\"integer\"}},\"required\":[\"k\",\"n\"]}]}",
     {"{\"k\":\"a\"}", "{\"k\":\"b\",\"n\":1}"},
     {"{\"k\":\"b\"}", "{\"k\":\"c\"}"}},
    {"{\"allOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},{\"properties\":{\"b\":{\"type\":\"null\"}},\"required\":[\"b\"]}]}",
     {"{\"a\":1,\"b\":null}"},
     {"{\"a\":1}", "{\"b\":null}"}},
    {"{\"$defs\":{\"t\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/$defs/t\"}}},\"required\":[\"v\"]}},\"$ref\":\"#/$defs/t\"}",
     {"{\"v\":1}", "{\"v\":1,\"kids\":[{\"v\":2,\"kids\":[]}]}"},
     {"{\"v\":1,\"kids\":[{}]}"}},
    {"{\"type\":[\"integer\",\"null\"]}", {"1", "null"}, {"\"1\"", "true"}},
};

static void check_example(const example *e)
{
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    int rc = mhla_grammar_from_json_schema(e->schema, strlen(e->schema), &g, &err);
    CHECK(rc == 0, "%s: rc %d: %s (%s)", e->schema, rc, err.msg, err.path);
    for (int i = 0; g && i < 6 && e->valid[i]; i++) {
        int m = mhla_grammar_match(g, e->valid[i], strlen(e->valid[i]), &err);
        CHECK(m == 1, "%s: valid %s not accepted (%d %s)", e->schema, e->valid[i], m, err.msg);
    }
    for (int i = 0; g && i < 6 && e->invalid[i]; i++) {
        int m = mhla_grammar_match(g, e->invalid[i], strlen(e->invalid[i]), &err);
        CHECK(m != 1, "%s: invalid %s accepted", e->schema, e->invalid[i]);
    }
    mhla_grammar_free(g);
}

static void test_json_object(void)
{
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    CHECK(mhla_grammar_json_object(&g, &err) == 0, "json_object: %s", err.msg);
    static const char *const yes[] = {"{}", "{\"a\":[1,2.5e3,{\"b\":null}],\"c\":\"\\u0041\"}",
                                      "{\n  \"a\": true\n}"};
    static const char *const no[] = {"[1]", "\"x\"", "{\"a\":}", "{\"a\":1,}"};
    for (size_t i = 0; g && i < sizeof yes / sizeof yes[0]; i++)
        CHECK(mhla_grammar_match(g, yes[i], strlen(yes[i]), &err) == 1, "json_object: %s", yes[i]);
    for (size_t i = 0; g && i < sizeof no / sizeof no[0]; i++)
        CHECK(mhla_grammar_match(g, no[i], strlen(no[i]), &err) != 1, "json_object: %s", no[i]);
    /* whitespace is bounded: a run of 40 blanks is no prefix of any string */
    char run[64] = "{";
    memset(run + 1, ' ', 40);
    run[41] = '\0';
    CHECK(g && mhla_grammar_match(g, run, strlen(run), &err) == MHLA_GRAMMAR_REJECTED,
          "json_object: 40 blanks accepted");
    mhla_grammar_free(g);
}

/* Sampled strings are JSON of the schema's shape, the same for the same seed. */
static void test_sample(void)
{
    const char *s = "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":"
                    "0,\"maximum\":9}},\"required\":[\"n\"]}";
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    CHECK(mhla_grammar_from_json_schema(s, strlen(s), &g, &err) == 0, "%s", err.msg);
    CHECK(g && mhla_grammar_sample(g, 7, 4096, &a, &na, &err) == 0, "sample: %s", err.msg);
    CHECK(g && mhla_grammar_sample(g, 7, 4096, &b, &nb, &err) == 0, "sample: %s", err.msg);
    CHECK(a && b && na == nb && memcmp(a, b, na) == 0, "two samples of one seed differ");
    CHECK(a && mhla_grammar_match(g, a, na, &err) == 1, "a sample is not a string: %s", a);
    free(a);
    free(b);
    mhla_grammar_free(g);
}

int main(void)
{
    for (size_t i = 0; i < sizeof EXAMPLES / sizeof EXAMPLES[0]; i++)
        check_example(&EXAMPLES[i]);
    test_json_object();
    test_sample();
    if (failures) {
        fprintf(stderr, "test_schema: %d failures\n", failures);
        return 1;
    }
    printf("test_schema: %zu schemas ok\n", sizeof EXAMPLES / sizeof EXAMPLES[0]);
    return 0;
}
