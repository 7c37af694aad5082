/*
 * gbnf_lex.c — the tokens of GBNF as llama.cpp reads them: spaces and
 * comments, rule names, characters with their escapes, counts. Unlike
 * llama.cpp, characters are read as strict UTF-8 (a malformed sequence is an
 * error naming its place, not a guess).
 */
#include "gr_core.h"

#include <stdarg.h>
#include <stdio.h>

int gp_fail(gp_parser *p, const char *at, int code, const char *fmt, ...)
{
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    long line = 1, col = 1;
    for (const char *q = p->s; q < at; q++) {
        col = (*q == '\n') ? 1 : col + 1;
        line += (*q == '\n');
    }
    return gr_fail(p->b->err, code, (long)(at - p->s), "%s (line %ld, column %ld)", what, line,
                   col);
}

const char *gp_space(const char *pos, int newline_ok)
{
    while (*pos == ' ' || *pos == '\t' || *pos == '#' ||
           (newline_ok && (*pos == '\r' || *pos == '\n'))) {
        if (*pos == '#') {
            while (*pos && *pos != '\r' && *pos != '\n')
                pos++;
        } else {
            pos++;
        }
    }
    return pos;
}

int gp_is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static int hex_digits(gp_parser *p, const char **pos, int size, uint32_t *v)
{
    const char *q = *pos;
    *v = 0;
    for (int i = 0; i < size; i++, q++) {
        int d = (*q >= '0' && *q <= '9')   ? *q - '0'
                : (*q >= 'a' && *q <= 'f') ? *q - 'a' + 10
                : (*q >= 'A' && *q <= 'F') ? *q - 'A' + 10
                                           : -1;
        if (d < 0)
            return gp_fail(p, q, MHLA_GRAMMAR_SYNTAX, "expecting %d hex digits", size);
        *v = (*v << 4) | (uint32_t)d;
    }
    *pos = q;
    return 0;
}

static int escape(gp_parser *p, const char **pos, uint32_t *cp)
{
    const char *at = *pos;
    char e = at[1];
    *pos = at + 2;
    switch (e) {
    case 'x': return hex_digits(p, pos, 2, cp);
    case 'u': return hex_digits(p, pos, 4, cp);
    case 'U': return hex_digits(p, pos, 8, cp);
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'n': *cp = '\n'; return 0;
    case '\\':
    case '"':
    case '[':
    case ']': *cp = (unsigned char)e; return 0;
    case '\0': return gp_fail(p, at, MHLA_GRAMMAR_SYNTAX, "unterminated escape");
    default: return gp_fail(p, at, MHLA_GRAMMAR_SYNTAX, "unknown escape '\\%c'", e);
    }
}

/* One UTF-8 sequence, strictly: no overlong forms, no surrogates. */
static int utf8_char(gp_parser *p, const char **pos, uint32_t *cp)
{
    const unsigned char *q = (const unsigned char *)*pos;
    int n = q[0] < 0x80                    ? 0
            : q[0] >= 0xC2 && q[0] <= 0xDF ? 1
            : (q[0] & 0xF0) == 0xE0        ? 2
            : q[0] >= 0xF0 && q[0] <= 0xF4 ? 3
                                           : -1;
    uint32_t v = n <= 0 ? q[0] : (uint32_t)(q[0] & (0x3F >> n));
    for (int i = 1; i <= n; i++) {
        if ((q[i] & 0xC0) != 0x80) { /* a NUL (the end) stops here too */
            n = -1;
            break;
        }
        v = (v << 6) | (q[i] & 0x3F);
    }
    static const uint32_t min[4] = {0, 0x80, 0x800, 0x10000};
    if (n < 0 || v < min[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return gp_fail(p, *pos, MHLA_GRAMMAR_SYNTAX, "invalid UTF-8");
    *cp = v;
    *pos += n + 1;
    return 0;
}

int gp_char(gp_parser *p, const char **pos, uint32_t *cp)
{
    if (**pos == '\0')
        return gp_fail(p, *pos, MHLA_GRAMMAR_SYNTAX, "unexpected end of input");
    return **pos == '\\' ? escape(p, pos, cp) : utf8_char(p, pos, cp);
}

int gp_count(gp_parser *p, const char **pos, int *v)
{
    const char *q = *pos;
    if (*q < '0' || *q > '9')
        return gp_fail(p, q, MHLA_GRAMMAR_SYNTAX, "expecting an integer");
    long x = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        x = x * 10 + (*q - '0');
        if (x > GBNF_MAX_REPEAT)
            return gp_fail(p, *pos, MHLA_GRAMMAR_LIMIT, "repetition count over %d",
                           GBNF_MAX_REPEAT);
    }
    *v = (int)x;
    *pos = q;
    return 0;
}
