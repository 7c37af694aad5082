/*
 * schema_internal.h — the JSON Schema to GBNF converter's shared state.
 *
 * The model is llama.cpp's json-schema-to-grammar: each schema node becomes a
 * named rule (its name built from the path: root-items-name), rules are kept
 * in a table (same name and body: reused; same name, other body: a numbered
 * name) and printed sorted by name, so one schema always gives one text.
 *
 * Unlike llama.cpp, nothing is silently dropped: every keyword a schema node
 * holds is either an annotation, used by the rule built for the node, or the
 * conversion fails with MHLA_GRAMMAR_UNSUPPORTED naming it. Every string the
 * grammar accepts validates against the schema (the grammar may serve a subset:
 * no extra properties unless asked, at most one item under uniqueItems, …).
 */
#ifndef MHLA_GRAMMAR_SCHEMA_INTERNAL_H
#define MHLA_GRAMMAR_SCHEMA_INTERNAL_H

#include "grammar.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Caps (MHLA_GRAMMAR_LIMIT past them): a pathological schema fails fast. */
#define SC_MAX_RULES 8192
#define SC_MAX_OUTPUT (4u << 20) /* bytes of GBNF text */
#define SC_MAX_DEPTH 48          /* schema nodes nested while converting */
#define SC_MAX_VISITS 50000      /* schema nodes converted, merges included */
#define SC_MAX_REPEAT 1000       /* a {m,n} count (lengths, items, regex) */
#define SC_MAX_NAME 80           /* a rule name's length before numbering */
#define SC_MAX_MEMBERS 4096      /* members of one schema object */

/* A growing text; a failed append (memory, SC_MAX_OUTPUT) sticks in err. */
typedef struct {
    char *p;
    size_t n, cap;
    int err; /* 0 or MHLA_GRAMMAR_NOMEM / MHLA_GRAMMAR_LIMIT */
} sc_buf;

int sc_buf_add(sc_buf *b, const char *s);
int sc_buf_addn(sc_buf *b, const char *s, size_t n);
int sc_buf_addf(sc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sc_buf_free(sc_buf *b);

typedef struct {
    char *name;
    char *body; /* NULL while reserved (a $ref being converted) */
} sc_rule;

typedef struct {
    char *ref;  /* the "#/…" pointer */
    char *name; /* its rule */
} sc_ref;

typedef struct {
    const cJSON *root;
    sc_rule *rules;
    size_t n_rules, cap_rules;
    sc_ref *refs;
    size_t n_refs, cap_refs;
    cJSON **owned; /* schemas built by merging (allOf, $ref siblings), freed at the end */
    size_t n_owned, cap_owned;
    size_t out_bytes;
    unsigned visits;
    int depth;
    char path[512]; /* the JSON pointer of the node being converted */
    size_t path_len;
    mhla_grammar_error *err;
} sc_conv;

/* ---- errors and the path (schema_rules.c) ---------------------------------- */

/* Fills err (the first failure only) with the message and the current path. */
int sc_fail(sc_conv *c, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The error of a buffer whose append failed. */
int sc_buf_fail(sc_conv *c, const sc_buf *b);
/* Appends "/seg" (~ and / escaped as a JSON pointer does); returns the old length. */
size_t sc_path_push(sc_conv *c, const char *seg);
size_t sc_path_push_index(sc_conv *c, int i);
void sc_path_pop(sc_conv *c, size_t old_len);

/* ---- the rule table (schema_rules.c) ---------------------------------------- */

/* Adds name ::= body (body copied); *out: the name used. */
int sc_rule_add(sc_conv *c, const char *name, const char *body, const char **out);
/* Reserves a fresh name (for a $ref converted recursively); sc_rule_define fills it. */
int sc_rule_reserve(sc_conv *c, const char *name, const char **out);
int sc_rule_define(sc_conv *c, const char *name, const char *body);
/* A built-in rule (space, string, number, date, …) and the ones it uses. */
int sc_rule_builtin(sc_conv *c, const char *which, const char **out);
/* "prefix-suffix" as llama.cpp names sub-rules ("suffix" alone under the root). */
int sc_name_join(sc_conv *c, const char *prefix, const char *suffix, char **out);
/* The grammar text: every rule, sorted by name. */
int sc_rules_print(sc_conv *c, char **out);
void sc_conv_free(sc_conv *c);
/* Keeps a merged schema alive until the conversion ends (taken even on failure). */
int sc_own(sc_conv *c, cJSON *node);

/* ---- GBNF text pieces (schema_text.c) --------------------------------------- */

/* A GBNF string literal of s[0, n) (UTF-8; code points escaped as needed). */
int sc_lit(sc_conv *c, sc_buf *b, const char *s, size_t n);
/* The GBNF literal of a JSON value's text (const, enum, property names). */
int sc_json_lit(sc_conv *c, sc_buf *b, const cJSON *v);
/* One code point as it appears inside a GBNF class. */
int sc_class_cp(sc_buf *b, uint32_t cp);
/* Decodes one UTF-8 character; 0 on success. */
int sc_utf8_next(const char *s, size_t n, size_t *i, uint32_t *cp);

/* ---- converting (schema_visit.c and the per-kind files) --------------------- */

/* Converts a schema node into a rule named after name; *out: the rule's name. */
int sc_visit(sc_conv *c, const cJSON *schema, const char *name, const char **out);
/* The rule body for a schema node (its keywords checked, each one used). */
int sc_build(sc_conv *c, const cJSON *schema, const char *name, char **body);

/* Keyword bits (schema_visit.c): a node's keywords, and the ones a builder used. */
typedef uint64_t sc_kw;
sc_kw sc_kw_bit(const char *keyword); /* 0: not a keyword this converter knows */
int sc_kw_is_annotation(const char *keyword);
/* Fails UNSUPPORTED naming the first keyword of present not in used. */
int sc_kw_check(sc_conv *c, const cJSON *schema, sc_kw used, const char *served_as);

/* An object's properties as schema_object.c collects them. */
typedef struct {
    const char *key; /* NULL: the extra keys of additionalProperties */
    const cJSON *schema;
    const char *kv; /* its key-value rule */
    int required;
} sc_prop;

typedef struct {
    sc_prop *p;
    int n;
    const cJSON *extra; /* additionalProperties when more keys are written, else NULL */
} sc_props;

/* The key-value rule of the extra keys (none of the named ones). */
int sc_object_extra(sc_conv *c, const sc_props *ps, const char *name, const char **kv);

int sc_build_object(sc_conv *c, const cJSON *schema, const char *name, sc_kw *used, char **body);
int sc_build_array(sc_conv *c, const cJSON *schema, const char *name, sc_kw *used, char **body);
int sc_build_string(sc_conv *c, const cJSON *schema, const char *name, sc_kw *used, char **body);
int sc_build_integer(sc_conv *c, const cJSON *schema, sc_kw *used, char **body);
int sc_build_number(sc_conv *c, const cJSON *schema, sc_kw *used, char **body);
/* A regex (JSON Schema "pattern") as a GBNF expression over the string's JSON text. */
int sc_regex(sc_conv *c, const char *pattern, const char *name, char **body);
/* allOf (and $ref with sibling keywords): one schema merged from the parts. */
int sc_merge_all_of(sc_conv *c, const cJSON *schema, const cJSON **merged);
/* The schema a "#/…" pointer names in the document. */
int sc_resolve_ref(sc_conv *c, const char *ref, const cJSON **target);
/* 1 when no JSON value the grammar serves for a can also be an instance of b. */
int sc_disjoint(sc_conv *c, const cJSON *a, const cJSON *b);
/* A non-negative integer keyword (minLength, maxItems, …) or -1 when absent. */
int sc_count(sc_conv *c, const cJSON *schema, const char *keyword, long *out);
/* The repetition llama.cpp builds: item (sep item){min-1,max-1}; max < 0: unbounded. */
int sc_repeat(sc_buf *b, const char *item, long min, long max, const char *sep);

#endif
