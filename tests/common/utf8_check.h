/*
 * utf8_check.h — the tokenizer tests' own UTF-8 validity check, written apart from
 * base's decoder so that it can judge what the tokenizer decodes.
 */
#ifndef MHLA_TESTS_UTF8_CHECK_H
#define MHLA_TESTS_UTF8_CHECK_H

#include <stddef.h>

/* 1 when s[0..n) is whole, valid UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF), else 0. */
static inline int valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80                 ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (!k || i + k > n)
            return 0;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80)
                return 0;
        if (k == 3 && ((c == 0xE0 && (unsigned char)s[i + 1] < 0xA0) ||
                       (c == 0xED && (unsigned char)s[i + 1] > 0x9F)))
            return 0;
        if (k == 4 && ((c == 0xF0 && (unsigned char)s[i + 1] < 0x90) ||
                       (c == 0xF4 && (unsigned char)s[i + 1] > 0x8F)))
            return 0;
        i += k;
    }
    return 1;
}

#endif
