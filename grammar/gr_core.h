/*
 * gr_core.h — what the core's files share while a grammar is compiled: the
 * rule builder (rules as growing element lists, classes deduplicated, the
 * caps of grammar_internal.h enforced), code point sets as byte-level rules,
 * and the error helper. Nothing here is seen by the mask or schema parts.
 */
#ifndef MHLA_GR_CORE_H
#define MHLA_GR_CORE_H

#include "grammar_internal.h"

#include <stddef.h>
#include <stdint.h>

/* Bounds of the GBNF text itself (MHLA_GRAMMAR_LIMIT past them). */
#define GBNF_MAX_REPEAT 100000 /* m and n of x{m,n} */
#define GBNF_MAX_NESTING 256   /* parentheses inside one another */

/* One rule under construction: alternatives separated by GR_ALT, GR_END last
 * once gb_end_rule ran. */
typedef struct {
    gr_elem *e;
    uint32_t n, cap;
} gb_seq;

/* A code point set node already compiled to a rule (gr_utf8.c's memo). */
typedef struct gb_memo gb_memo;

typedef struct {
    gb_seq *rules;
    uint32_t n_rules, cap_rules;
    char **names;        /* user rules' names; NULL for helper rules */
    long *def_pos;       /* offset of a rule's definition, -1 until defined */
    long *ref_pos;       /* offset of its first reference, -1 when none */
    uint32_t *owner;     /* the user rule a helper rule was made for */
    uint32_t *name_hash; /* open addressing over user rules: id + 1, 0 empty */
    uint32_t name_hash_cap;
    gr_class *classes;
    uint32_t n_classes, cap_classes;
    uint32_t *class_hash; /* open addressing: class index + 1, 0 empty */
    uint32_t class_hash_cap;
    uint64_t n_elems; /* all rules together, against GR_MAX_ELEMS */
    gb_memo *memo;
    uint32_t n_memo, cap_memo;
    mhla_grammar_error *err;
} gb_builder;

/* Fills err (when not NULL) and returns code. */
int gr_fail(mhla_grammar_error *err, int code, long pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

int gb_init(gb_builder *b, mhla_grammar_error *err);
void gb_free(gb_builder *b);
/* The user rule called name (made when new); ref_at >= 0 records a reference. */
int gb_rule_named(gb_builder *b, const char *name, size_t len, long ref_at, uint32_t *id);
/* A new helper rule made for the user rule owner. */
int gb_rule_helper(gb_builder *b, uint32_t owner, uint32_t *id);
int gb_push(gb_builder *b, uint32_t rule, gr_kind kind, uint32_t arg);
/* Appends n elements (which may lie in the same rule: they are copied first). */
int gb_push_elems(gb_builder *b, uint32_t rule, const gr_elem *e, uint32_t n);
int gb_push_class(gb_builder *b, uint32_t rule, const gr_class *c);
int gb_end_rule(gb_builder *b, uint32_t rule);
/* Drops the rule's elements from index n on. */
void gb_truncate(gb_builder *b, uint32_t rule, uint32_t n);
/* The compiled grammar (rules flattened); the builder is left to gb_free. */
int gb_finish(gb_builder *b, uint32_t root, mhla_grammar **out);

/* ---- code points (gr_utf8.c) ---------------------------------------------- */

typedef struct {
    uint32_t lo, hi; /* inclusive */
} gu_range;

/* Appends to rule the elements matching one code point of the set (ranges
 * in any order, overlapping allowed; negate: the complement over
 * 0..0x10FFFF). Surrogates are never in a set. ASCII-only sets are one
 * GR_BYTES element, others a reference to a byte-level helper rule. */
int gu_push_set(gb_builder *b, uint32_t rule, uint32_t owner, gu_range *r, size_t n, int negate);
/* Appends the UTF-8 bytes of code point cp (each a one-byte class). */
int gu_push_codepoint(gb_builder *b, uint32_t rule, uint32_t cp, long pos);
void gu_memo_free(gb_builder *b);

/* ---- GBNF lexing (gbnf_lex.c) --------------------------------------------- */

/* The text being parsed, NUL-ended (embedded NULs are refused before). */
typedef struct {
    const char *s;
    gb_builder *b;
    int depth; /* parentheses open */
} gp_parser;

/* Fails with code at text position at: the message, then its line and column. */
int gp_fail(gp_parser *p, const char *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Past spaces, tabs and comments, and newlines when newline_ok. */
const char *gp_space(const char *pos, int newline_ok);
int gp_is_word(char c);
/* One character of a literal or class: an escape or a UTF-8 sequence. */
int gp_char(gp_parser *p, const char **pos, uint32_t *cp);
/* A decimal count of a repetition, at most GBNF_MAX_REPEAT. */
int gp_count(gp_parser *p, const char **pos, int *v);

/* ---- checks (gr_check.c) -------------------------------------------------- */

/* Every referenced rule defined; no rule reaches itself before a byte. */
int gr_check_rules(gb_builder *b);
/* nullable[r] = 1 when rule r derives the empty string (n_rules bytes). */
int gr_nullable(const gb_builder *b, unsigned char **nullable);

#endif
