/*
 * schema_intrange.c — the decimal texts of the integers in [min, max] as a
 * GBNF expression, exactly (llama.cpp's _generate_min_max_int: a range is
 * cut into runs of equal length whose digits range uniformly). A side left
 * open is bounded to 16 digits, as llama.cpp's integral-part.
 */
#include "schema_internal.h"

#include <stdio.h>
#include <string.h>

#define OPEN_MAX -1 /* more_digits without an upper count */

static void digit_range(sc_buf *o, char from, char to)
{
    char t[8];
    if (from == to)
        snprintf(t, sizeof t, "[%c]", from);
    else
        snprintf(t, sizeof t, "[%c-%c]", from, to);
    sc_buf_add(o, t);
}

static void more_digits(sc_buf *o, int min_d, int max_d)
{
    sc_buf_add(o, "[0-9]");
    if (min_d == max_d && min_d == 1)
        return;
    if (max_d == min_d)
        sc_buf_addf(o, "{%d}", min_d);
    else if (max_d == OPEN_MAX)
        sc_buf_addf(o, "{%d,}", min_d);
    else
        sc_buf_addf(o, "{%d,%d}", min_d, max_d);
}

static void uniform_range(sc_buf *o, const char *from, const char *to);

/* The digits after position i, from's first digit to to's (sub_len > 0). */
static void uniform_tail(sc_buf *o, const char *from, const char *to, size_t i, size_t sub_len)
{
    char zeros[24], nines[24];
    memset(zeros, '0', sub_len);
    memset(nines, '9', sub_len);
    zeros[sub_len] = nines[sub_len] = '\0';
    const char *from_sub = from + i + 1, *to_sub = to + i + 1;
    int to_reached = 0;
    sc_buf_add(o, "(");
    if (!strcmp(from_sub, zeros)) {
        digit_range(o, from[i], (char)(to[i] - 1));
        sc_buf_add(o, " ");
        more_digits(o, (int)sub_len, (int)sub_len);
    } else {
        sc_buf_addf(o, "[%c] (", from[i]);
        uniform_range(o, from_sub, nines);
        sc_buf_add(o, ")");
        if (from[i] < to[i] - 1) {
            sc_buf_add(o, " | ");
            to_reached = !strcmp(to_sub, nines);
            digit_range(o, (char)(from[i] + 1), to_reached ? to[i] : (char)(to[i] - 1));
            sc_buf_add(o, " ");
            more_digits(o, (int)sub_len, (int)sub_len);
        }
    }
    if (!to_reached) {
        sc_buf_add(o, " | ");
        digit_range(o, to[i], to[i]);
        sc_buf_add(o, " ");
        uniform_range(o, zeros, to_sub);
    }
    sc_buf_add(o, ")");
}

/* from and to have the same length, from <= to. */
static void uniform_range(sc_buf *o, const char *from, const char *to)
{
    size_t i = 0, n = strlen(from);
    while (i < n && from[i] == to[i])
        i++;
    if (i > 0) {
        sc_buf_add(o, "\"");
        sc_buf_addn(o, from, i);
        sc_buf_add(o, "\"");
    }
    if (i == n)
        return;
    if (i > 0)
        sc_buf_add(o, " ");
    if (n - i - 1 > 0)
        uniform_tail(o, from, to, i, n - i - 1);
    else
        sc_buf_addf(o, "[%c-%c]", from[i], to[i]);
}

static void both_bounds(sc_buf *o, long long min, long long max)
{
    char min_s[24], max_s[24], nines[24];
    snprintf(min_s, sizeof min_s, "%lld", min);
    snprintf(max_s, sizeof max_s, "%lld", max);
    for (size_t digits = strlen(min_s); digits < strlen(max_s); digits++) {
        memset(nines, '9', digits);
        nines[digits] = '\0';
        uniform_range(o, min_s, nines);
        min_s[0] = '1';
        memset(min_s + 1, '0', digits);
        min_s[digits + 1] = '\0';
        sc_buf_add(o, " | ");
    }
    uniform_range(o, min_s, max_s);
}

static void min_max(sc_buf *o, const long long *min, const long long *max, int decimals, int top);

static void only_min(sc_buf *o, long long min, int decimals, int top)
{
    int less = decimals - 1 > 1 ? decimals - 1 : 1;
    char s[24];
    snprintf(s, sizeof s, "%lld", min);
    int len = (int)strlen(s);
    if (min == 0 && top) {
        sc_buf_add(o, "[0] | [1-9] ");
        more_digits(o, 0, less);
    } else if (min == 0) {
        more_digits(o, 1, decimals);
    } else if (min <= 9) {
        char start = top ? '1' : '0';
        if (s[0] > start) {
            digit_range(o, start, (char)(s[0] - 1));
            sc_buf_add(o, " ");
            more_digits(o, 1, less);
            sc_buf_add(o, " | ");
        }
        digit_range(o, s[0], '9');
        sc_buf_add(o, " ");
        more_digits(o, 0, less);
    } else {
        if (s[0] > '1') {
            digit_range(o, top ? '1' : '0', (char)(s[0] - 1));
            sc_buf_add(o, " ");
            more_digits(o, len, less);
            sc_buf_add(o, " | ");
        }
        /* after the first digit: as many digits as min's, not below them (a
         * fixed width, leading zeros included), or more digits */
        char nines[24];
        memset(nines, '9', (size_t)len - 1);
        nines[len - 1] = '\0';
        digit_range(o, s[0], s[0]);
        sc_buf_add(o, " (");
        uniform_range(o, s + 1, nines);
        sc_buf_add(o, " | ");
        more_digits(o, len, less);
        sc_buf_add(o, ")");
        if (s[0] < '9') {
            sc_buf_add(o, " | ");
            digit_range(o, (char)(s[0] + 1), '9');
            sc_buf_add(o, " ");
            more_digits(o, len - 1, less);
        }
    }
}

static void min_max(sc_buf *o, const long long *min, const long long *max, int decimals, int top)
{
    if (min && max) {
        long long lo = *min, hi = *max, zero = 0, neg_lo = -*min;
        if (lo < 0 && hi < 0) {
            long long a = -hi, b = -lo;
            sc_buf_add(o, "\"-\" (");
            min_max(o, &a, &b, decimals, 1);
            sc_buf_add(o, ")");
            return;
        }
        if (lo < 0) {
            sc_buf_add(o, "\"-\" (");
            min_max(o, &zero, &neg_lo, decimals, 1);
            sc_buf_add(o, ") | ");
            lo = 0;
        }
        both_bounds(o, lo, hi);
        return;
    }
    int less = decimals - 1 > 1 ? decimals - 1 : 1;
    if (min && *min < 0) {
        long long m = -*min;
        sc_buf_add(o, "\"-\" (");
        min_max(o, NULL, &m, decimals, 0);
        sc_buf_add(o, ") | [0] | [1-9] ");
        more_digits(o, 0, decimals - 1);
    } else if (min) {
        only_min(o, *min, decimals, top);
    } else if (max && *max >= 0) {
        long long zero = 0;
        if (top) {
            sc_buf_add(o, "\"-\" [1-9] ");
            more_digits(o, 0, less);
            sc_buf_add(o, " | ");
        }
        min_max(o, &zero, max, decimals, 1);
    } else if (max) {
        long long m = -*max;
        sc_buf_add(o, "\"-\" (");
        min_max(o, &m, NULL, decimals, 1);
        sc_buf_add(o, ")");
    }
}

int sc_int_range(sc_buf *o, const long long *min, const long long *max)
{
    sc_buf_add(o, "(");
    min_max(o, min, max, 16, 1);
    return sc_buf_add(o, ")");
}
