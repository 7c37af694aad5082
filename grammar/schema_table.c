/*
 * schema_table.c — the rule table: names made as llama.cpp makes them, the
 * built-in rules (JSON's primitives, formats, bounded whitespace) and the
 * grammar printed sorted by name, so that one schema always gives one text.
 */
#include "schema_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *name;
    const char *body;
    const char *deps[6];
} sc_builtin;

/* Whitespace between tokens is bounded (as llama.cpp's space rule): a model
 * cannot run on emitting blanks forever. */
static const sc_builtin BUILTINS[] = {
    {"space", "( \" \" | \"\\n\"{1,2} [ \\t]{0,20} )?", {NULL}},
    {"boolean", "( \"true\" | \"false\" )", {NULL}},
    {"null", "\"null\"", {NULL}},
    {"decimal-part", "[0-9]{1,16}", {NULL}},
    {"integral-part", "[0] | [1-9] [0-9]{0,15}", {NULL}},
    {"number",
     "( \"-\"? integral-part ) ( \".\" decimal-part )? ( [eE] [-+]? integral-part )?",
     {"integral-part", "decimal-part", NULL}},
    {"integer", "( \"-\"? integral-part )", {"integral-part", NULL}},
    /* no escape of a lone UTF-16 surrogate (\uD800-\uDFFF): such a string has
     * no UTF-8 form and its length in characters is ambiguous */
    {"char",
     "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] "
     "[0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} ) )",
     {NULL}},
    /* a pattern's '.': any character but a line feed, as JSON text */
    {"dot", "[^\"\\\\\\x00-\\x1F] | [\\\\] [\\x22\\x5C\\x72\\x74]", {NULL}},
    {"string", "\"\\\"\" char* \"\\\"\"", {"char", NULL}},
    /* a key beside named properties: no escapes, so that no spelling of a
     * named key can pass for another key */
    {"key-char", "[^\"\\\\\\x00-\\x1F]", {NULL}},
    {"value",
     "object | array | string | number | boolean | null",
     {"object", "array", "string", "number", "boolean", "null"}},
    {"object",
     "\"{\" space ( string space \":\" space value ( \",\" space string space \":\" space value "
     ")* )? space \"}\"",
     {"space", "string", "value"}},
    {"array",
     "\"[\" space ( value ( \",\" space value )* )? space \"]\"",
     {"space", "value", NULL}},
    {"uuid",
     "\"\\\"\" [0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} "
     "\"-\" [0-9a-fA-F]{12} \"\\\"\"",
     {NULL}},
    /* days that every year has: no 29 February (a date the validator may refuse) */
    {"date",
     "[1-9] [0-9]{3} \"-\" ( ( \"0\" [13578] | \"1\" [02] ) \"-\" ( \"0\" [1-9] | [12] [0-9] | "
     "\"3\" [01] ) | ( \"0\" [469] | \"11\" ) \"-\" ( \"0\" [1-9] | [12] [0-9] | \"30\" ) | "
     "\"02-\" ( \"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8] ) )",
     {NULL}},
    {"time",
     "( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] \":\" [0-5] [0-9] ( \".\" [0-9]{1,6} )? ( "
     "\"Z\" | [-+] ( [01] [0-9] | \"2\" [0-3] ) \":\" [0-5] [0-9] )",
     {NULL}},
    {"date-time", "date \"T\" time", {"date", "time", NULL}},
    {"date-string", "\"\\\"\" date \"\\\"\"", {"date", NULL}},
    {"time-string", "\"\\\"\" time \"\\\"\"", {"time", NULL}},
    {"date-time-string", "\"\\\"\" date-time \"\\\"\"", {"date-time", NULL}},
    {"email-string",
     "\"\\\"\" [a-zA-Z0-9._+-]{1,32} \"@\" [a-zA-Z0-9-]{1,32} ( \".\" [a-zA-Z0-9-]{1,16} "
     "){1,3} \"\\\"\"",
     {NULL}},
};
#define N_BUILTINS (sizeof BUILTINS / sizeof BUILTINS[0])

static const sc_builtin *builtin_find(const char *name)
{
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (strcmp(BUILTINS[i].name, name) == 0)
            return &BUILTINS[i];
    return NULL;
}

static sc_rule *rule_find(sc_conv *c, const char *name)
{
    for (size_t i = 0; i < c->n_rules; i++)
        if (strcmp(c->rules[i].name, name) == 0)
            return &c->rules[i];
    return NULL;
}

/* A rule name: runs of characters outside [a-zA-Z0-9-] become one '-' (as
 * llama.cpp's), cut to SC_MAX_NAME; a built-in's name or "root"/"dot" gets a '-'. */
static void name_clean(const char *name, char *out, size_t cap)
{
    size_t n = 0;
    for (const char *s = name; *s && n + 2 < cap && n < SC_MAX_NAME; s++) {
        int ok = (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
                 *s == '-';
        if (ok)
            out[n++] = *s;
        else if (n == 0 || out[n - 1] != '-')
            out[n++] = '-';
    }
    out[n] = '\0';
    if (n == 0)
        snprintf(out, cap, "root");
}

static int rule_push(sc_conv *c, const char *name, const char *body, const char **out)
{
    if (c->n_rules >= SC_MAX_RULES)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: more than %d rules", SC_MAX_RULES);
    if (c->n_rules == c->cap_rules) {
        size_t cap = c->cap_rules ? c->cap_rules * 2 : 32;
        sc_rule *p = realloc(c->rules, cap * sizeof *p);
        if (!p)
            return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
        c->rules = p;
        c->cap_rules = cap;
    }
    sc_rule *r = &c->rules[c->n_rules];
    r->name = strdup(name);
    r->body = body ? strdup(body) : NULL;
    if (!r->name || (body && !r->body)) {
        free(r->name);
        free(r->body);
        return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    }
    c->n_rules++;
    *out = r->name;
    return 0;
}

static int out_count(sc_conv *c, const char *name, const char *body)
{
    c->out_bytes += strlen(name) + (body ? strlen(body) : 0) + 6;
    if (c->out_bytes > SC_MAX_OUTPUT)
        return sc_fail(c, MHLA_GRAMMAR_LIMIT, "schema: the grammar exceeds %u bytes",
                       SC_MAX_OUTPUT);
    return 0;
}

/* name, or name0, name1, …: the first that is free or already holds body
 * (body NULL: the first free one). */
static int rule_place(sc_conv *c, const char *name, const char *body, const char **out)
{
    char base[SC_MAX_NAME + 8], key[SC_MAX_NAME + 32];
    name_clean(name, base, sizeof base);
    if (builtin_find(base))
        strcat(base, "-");
    snprintf(key, sizeof key, "%s", base);
    for (unsigned i = 0;; i++) {
        sc_rule *r = rule_find(c, key);
        if (!r)
            break;
        if (body && r->body && strcmp(r->body, body) == 0) {
            *out = r->name;
            return 0;
        }
        snprintf(key, sizeof key, "%s%u", base, i);
    }
    int rc = out_count(c, key, body);
    return rc ? rc : rule_push(c, key, body, out);
}

int sc_rule_add(sc_conv *c, const char *name, const char *body, const char **out)
{
    return rule_place(c, name, body, out);
}

int sc_rule_reserve(sc_conv *c, const char *name, const char **out)
{
    return rule_place(c, name, NULL, out);
}

int sc_rule_define(sc_conv *c, const char *name, const char *body)
{
    sc_rule *r = rule_find(c, name);
    if (!r || r->body)
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: rule '%s' defined twice", name);
    int rc = out_count(c, name, body);
    if (rc)
        return rc;
    r->body = strdup(body);
    return r->body ? 0 : sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
}

int sc_rule_builtin(sc_conv *c, const char *which, const char **out)
{
    const sc_builtin *b = builtin_find(which);
    if (!b)
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: no built-in rule '%s'", which);
    sc_rule *have = rule_find(c, which);
    if (have) {
        *out = have->name;
        return 0;
    }
    int rc = out_count(c, which, b->body);
    if (!rc)
        rc = rule_push(c, which, b->body, out);
    for (int i = 0; !rc && i < 6 && b->deps[i]; i++) {
        const char *dep;
        rc = sc_rule_builtin(c, b->deps[i], &dep);
    }
    return rc;
}

int sc_name_join(sc_conv *c, const char *prefix, const char *suffix, char **out)
{
    size_t np = strlen(prefix), ns = strlen(suffix);
    *out = malloc(np + ns + 2);
    if (!*out)
        return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    if (np)
        snprintf(*out, np + ns + 2, "%s-%s", prefix, suffix);
    else
        memcpy(*out, suffix, ns + 1);
    return 0;
}

static int rule_cmp(const void *a, const void *b)
{
    return strcmp((*(const sc_rule *const *)a)->name, (*(const sc_rule *const *)b)->name);
}

int sc_rules_print(sc_conv *c, char **out)
{
    const sc_rule **order = malloc((c->n_rules ? c->n_rules : 1) * sizeof *order);
    if (!order)
        return sc_fail(c, MHLA_GRAMMAR_NOMEM, "schema: out of memory");
    for (size_t i = 0; i < c->n_rules; i++)
        order[i] = &c->rules[i];
    qsort(order, c->n_rules, sizeof *order, rule_cmp);
    sc_buf b = {0};
    for (size_t i = 0; i < c->n_rules; i++) {
        if (!order[i]->body) {
            int rc =
                sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: rule '%s' left undefined", order[i]->name);
            free(order);
            sc_buf_free(&b);
            return rc;
        }
        sc_buf_add(&b, order[i]->name);
        sc_buf_add(&b, " ::= ");
        sc_buf_add(&b, order[i]->body);
        sc_buf_add(&b, "\n");
    }
    free(order);
    if (b.err) {
        sc_buf_free(&b);
        return sc_buf_fail(c, &b);
    }
    *out = b.p;
    return 0;
}
