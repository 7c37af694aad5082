/*
 * libFuzzer target for the stop-string hold-back (srv_stopper). The input is
 * up to four stop strings and a text in chunks, all cut to whole UTF-8
 * characters (what the engine thread feeds it). Against a direct model of
 * what must come out — the text up to the earliest stop string, or all of it
 * — every step must hold:
 *   - what has been emitted is a prefix of that text, ends at a character
 *     boundary and holds no stop string;
 *   - a feed returns 1 exactly when the text so far holds a stop string, and
 *     the output then equals the text before it;
 *   - without a hit, flush releases the rest, and the output is the text.
 *
 * Layout: byte 0 = number of stop strings (low 2 bits + 1); then the stop
 * strings and the chunks, each ended by a 0xFF byte (0xFF never occurs in
 * UTF-8, so the pieces can hold any other byte).
 */
#include "server_internal.h"
#include "fuzz_utf8.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_stopper: " __VA_ARGS__);                                             \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

/* Earliest position in text[0..n) where one of the stops starts; n when none. */
static size_t first_stop(char **stops, int n_stops, const char *text, size_t n)
{
    size_t best = n;
    for (int i = 0; i < n_stops; i++) {
        size_t sl = strlen(stops[i]);
        for (size_t k = 0; k + sl <= n && k < best; k++)
            if (memcmp(text + k, stops[i], sl) == 0) {
                best = k;
                break;
            }
    }
    return best;
}

/* The next piece up to a 0xFF byte (or the end), cut to whole UTF-8 characters. */
static const uint8_t *next_piece(const uint8_t **p, const uint8_t *end, size_t *len)
{
    const uint8_t *start = *p;
    const uint8_t *sep = memchr(start, 0xFF, (size_t)(end - start));
    const uint8_t *stop = sep ? sep : end;
    *p = sep ? sep + 1 : end;
    *len = fuzz_utf8_valid_prefix(start, (size_t)(stop - start));
    return start;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int want = (data[0] & 3) + 1;
    char *stops[4] = {0};
    int n_stops = 0;
    const uint8_t *p = data + 1, *end = data + size;
    while (n_stops < want && p < end) {
        size_t len;
        const uint8_t *s = next_piece(&p, end, &len);
        const uint8_t *nul = memchr(s, 0, len); /* stop strings are C strings */
        if (nul)
            len = (size_t)(nul - s);
        if (len == 0)
            continue;
        stops[n_stops] = malloc(len + 1);
        memcpy(stops[n_stops], s, len);
        stops[n_stops][len] = 0;
        n_stops++;
    }
    srv_stopper st;
    srv_stopper_init(&st, stops, n_stops);
    mhla_buf out = {0}, fed = {0};
    int hit = 0;
    while (p < end && !hit) {
        size_t len;
        const uint8_t *chunk = next_piece(&p, end, &len);
        if (mhla_buf_put(&fed, chunk, len))
            FAIL("out of memory");
        hit = srv_stopper_feed(&st, (const char *)chunk, len, &out);
        if (hit < 0)
            FAIL("feed failed");
        size_t at = first_stop(stops, n_stops, fed.p, fed.len);
        if (hit != (at < fed.len))
            FAIL("feed returned %d but the text so far %s a stop string", hit,
                 at < fed.len ? "holds" : "does not hold");
        if (out.len > at || (out.len && memcmp(out.p, fed.p, out.len) != 0))
            FAIL("emitted %zu bytes that are not a prefix of the text before the stop (%zu)",
                 out.len, at);
        if (hit && out.len != at)
            FAIL("on a hit the output is %zu bytes, the text before the stop %zu", out.len, at);
        if (out.len < fed.len && out.len && ((uint8_t)fed.p[out.len] & 0xC0) == 0x80)
            FAIL("the output ends inside a character");
        if (!hit) {
            /* what is held back is exactly a beginning of some stop string */
            size_t held = fed.len - out.len;
            int could = held == 0;
            for (int i = 0; i < n_stops && !could; i++)
                could = held < strlen(stops[i]) && memcmp(fed.p + out.len, stops[i], held) == 0;
            if (!could && n_stops)
                FAIL("%zu bytes held back that do not start a stop string", held);
        }
    }
    if (!hit) {
        if (srv_stopper_flush(&st, &out))
            FAIL("flush failed");
        if (out.len != fed.len || (out.len && memcmp(out.p, fed.p, out.len) != 0))
            FAIL("after flush the output (%zu bytes) is not the text (%zu)", out.len, fed.len);
    }
    if (out.len && first_stop(stops, n_stops, out.p, out.len) < out.len)
        FAIL("the output holds a stop string");
    srv_stopper_free(&st);
    mhla_buf_free(&out);
    mhla_buf_free(&fed);
    for (int i = 0; i < n_stops; i++)
        free(stops[i]);
    return 0;
}
