/* UTF-8 decoding with the WHATWG replacement rules (what the reference's TextDecoder
 * does), and JavaScript's white-space set. */
#include <string.h>

#include "tokenizer_internal.h"

size_t tok_utf8_next(const char *str, size_t n, int32_t *cp)
{
    const unsigned char *s = (const unsigned char *)str;
    unsigned c = s[0];
    if (c < 0x80) { *cp = (int32_t)c; return 1; }
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    int32_t v;
    if (c >= 0xC2 && c <= 0xDF) { need = 1; v = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2; v = c & 0x0F;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3; v = c & 0x07;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else { *cp = 0xFFFD; return 1; }
    size_t i = 1;
    for (; i <= need; i++) {
        /* A byte outside the allowed range ends the maximal subpart without being consumed. */
        if (i >= n || s[i] < lo || s[i] > hi) { *cp = 0xFFFD; return i; }
        v = (v << 6) | (s[i] & 0x3F);
        lo = 0x80; hi = 0xBF;
    }
    *cp = v;
    return i;
}

size_t tok_utf8_put(char out[4], int32_t cp)
{
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12)); out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F)); return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18)); out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int tok_utf8_sanitize(const char *s, size_t n, tok_buf *out)
{
    if (tok_buf_reserve(out, n)) return -1;
    size_t i = 0, run = 0; /* copy valid runs in one go */
    while (i < n) {
        int32_t cp;
        size_t k = tok_utf8_next(s + i, n - i, &cp);
        bool bad = cp == 0xFFFD && !(k == 3 && (unsigned char)s[i] == 0xEF &&
                                     (unsigned char)s[i + 1] == 0xBF && (unsigned char)s[i + 2] == 0xBD);
        if (bad) {
            if (tok_buf_put(out, s + run, i - run) || tok_buf_put(out, "\xEF\xBF\xBD", 3)) return -1;
            run = i + k;
        }
        i += k;
    }
    return tok_buf_put(out, s + run, n - run);
}

bool tok_utf8_valid(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        int32_t cp;
        size_t k = tok_utf8_next(s + i, n - i, &cp);
        if (cp == 0xFFFD && !(k == 3 && memcmp(s + i, "\xEF\xBF\xBD", 3) == 0)) return false;
        i += k;
    }
    return true;
}

bool tok_js_space(int32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

void tok_js_trim(const char *s, size_t n, bool left, bool right, size_t *start, size_t *end)
{
    size_t a = 0, b = n;
    if (left) {
        while (a < b) {
            int32_t cp;
            size_t k = tok_utf8_next(s + a, b - a, &cp);
            if (!tok_js_space(cp)) break;
            a += k;
        }
    }
    if (right) {
        while (b > a) {
            size_t p = b - 1;
            while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80) p--;
            int32_t cp;
            tok_utf8_next(s + p, b - p, &cp);
            if (!tok_js_space(cp)) break;
            b = p;
        }
    }
    *start = a;
    *end = b;
}
