/* UTF-8 sanitising with the WHATWG replacement rules (what the reference's TextDecoder
 * does; the decoder itself is base's mhla_utf8_next), and JavaScript's white-space set. */
#include <string.h>

#include "tokenizer_internal.h"

int tok_utf8_sanitize(const char *s, size_t n, mhla_buf *out)
{
    if (mhla_buf_reserve(out, n))
        return -1;
    size_t i = 0, run = 0; /* copy valid runs in one go */
    while (i < n) {
        int32_t cp;
        size_t k = mhla_utf8_next(s + i, n - i, &cp);
        bool bad =
            cp == 0xFFFD && !(k == 3 && (unsigned char)s[i] == 0xEF &&
                              (unsigned char)s[i + 1] == 0xBF && (unsigned char)s[i + 2] == 0xBD);
        if (bad) {
            if (mhla_buf_put(out, s + run, i - run) || mhla_buf_put(out, "\xEF\xBF\xBD", 3))
                return -1;
            run = i + k;
        }
        i += k;
    }
    return mhla_buf_put(out, s + run, n - run);
}

size_t tok_utf8_invalid_at(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        int32_t cp;
        size_t k = mhla_utf8_next(s + i, n - i, &cp);
        if (cp == 0xFFFD && !(k == 3 && (unsigned char)s[i] == 0xEF &&
                              (unsigned char)s[i + 1] == 0xBF && (unsigned char)s[i + 2] == 0xBD))
            return i;
        i += k;
    }
    return n;
}

bool tok_js_space(int32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

void tok_js_trim(const char *s, size_t n, bool left, bool right, size_t *start, size_t *end)
{
    size_t a = 0, b = n;
    if (left) {
        while (a < b) {
            int32_t cp;
            size_t k = mhla_utf8_next(s + a, b - a, &cp);
            if (!tok_js_space(cp))
                break;
            a += k;
        }
    }
    if (right) {
        while (b > a) {
            size_t p = b - 1;
            while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80)
                p--;
            int32_t cp;
            mhla_utf8_next(s + p, b - p, &cp);
            if (!tok_js_space(cp))
                break;
            b = p;
        }
    }
    *start = a;
    *end = b;
}
