/*
 * fuzz_utf8.h — the fuzz targets' own UTF-8 check, written apart from base's
 * decoder on purpose: the targets use it as an oracle for the code that
 * decodes with base's.
 */
#ifndef MHLA_FUZZ_UTF8_H
#define MHLA_FUZZ_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length of the longest prefix of s[0..n) made of whole, valid UTF-8 characters. */
static inline size_t fuzz_utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k; /* continuation bytes */
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return i;
        }
        if (n - i <= k || s[i + 1] < lo || s[i + 1] > hi)
            return i;
        for (size_t j = 2; j <= k; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return i;
        i += k + 1;
    }
    return i;
}

#endif
