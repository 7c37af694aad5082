/*
 * schema_regex.h — a JSON Schema "pattern" to GBNF: the parser
 * (schema_regex.c) and its character sets (schema_regex_set.c).
 */
#ifndef MHLA_GRAMMAR_SCHEMA_REGEX_H
#define MHLA_GRAMMAR_SCHEMA_REGEX_H

#include "schema_internal.h"

#define RX_MAX_RANGES 512 /* ranges in one character set */

typedef struct {
    uint32_t lo, hi;
} rx_range;

typedef struct {
    rx_range r[RX_MAX_RANGES];
    int n;
} rx_set;

int rx_set_add(rx_set *s, uint32_t lo, uint32_t hi); /* -1 when full */
void rx_set_norm(rx_set *s);
void rx_set_complement(rx_set *s, uint32_t top);
void rx_set_cut(rx_set *s, uint32_t lo, uint32_t hi);
int rx_set_has(const rx_set *s, uint32_t cp);
int rx_set_shorthand(rx_set *s, char ch);
/* The JSON text of one character of s; *empty: s holds none JSON can write. */
int rx_set_emit(sc_buf *out, const rx_set *s, int *empty);

#endif
