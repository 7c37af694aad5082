/*
 * byte_codec.c — the byte-level stand-in used when the model directory has
 * no tokenizer.json: byte b is token id b (text only for vocab == 256);
 * decoding maps ids 1..255 back to bytes, skips the others (id 0 too: JSON
 * text cannot carry NUL), and turns byte sequences that are not UTF-8 into
 * U+FFFD (one per maximal invalid subpart, as the WHATWG decoder does).
 */
#include "server_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct srv_bytes_stream {
    int vocab_size;
    unsigned char part[4]; /* an incomplete but so far valid UTF-8 sequence */
    int npart;
    char out[64];
};

/* Only a vocabulary of exactly 256 ids is bytes. With fewer, bytes past its
 * last id have no token; with more, the ids above 255 are the model's own
 * tokens, whose text the stand-in does not know: text encoded as bytes would
 * not be what the model was trained on, and its replies would decode wrong. */
int srv_bytes_refusal(int vocab_size, char *why, size_t cap)
{
    if (vocab_size < 256)
        snprintf(why, cap,
                 "this model has no tokenizer.json and its vocabulary (%d ids) cannot hold the "
                 "byte-level stand-in encoding; send the prompt as token ids",
                 vocab_size);
    else if (vocab_size > 256)
        snprintf(why, cap,
                 "this model has no tokenizer.json and its vocabulary has %d ids, not the "
                 "byte-level stand-in's 256: ids above 255 are not bytes, so text cannot be "
                 "encoded; send the prompt as token ids",
                 vocab_size);
    return vocab_size != 256;
}

int srv_bytes_encode(int vocab_size, const char *text, size_t len, int32_t **ids, int *n, char *err,
                     size_t errlen)
{
    *ids = NULL;
    *n = 0;
    if (srv_bytes_refusal(vocab_size, err, errlen))
        return -1;
    if (len > (size_t)1 << 30) {
        snprintf(err, errlen, "text of %zu bytes is too long", len);
        return -1;
    }
    int32_t *v = malloc((len ? len : 1) * sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory encoding %zu bytes", len);
        return -2;
    }
    for (size_t i = 0; i < len; i++)
        v[i] = (unsigned char)text[i];
    *ids = v;
    *n = (int)len;
    return 0;
}

static const char REPLACEMENT[3] = {(char)0xEF, (char)0xBF, (char)0xBD};

/* Whether the decoder's U+FFFD over part[0..used) stands for invalid bytes
 * rather than for the character U+FFFD itself. */
static int invalid(const unsigned char *part, size_t used, int32_t cp)
{
    return cp == 0xFFFD && !(used == 3 && memcmp(part, REPLACEMENT, 3) == 0);
}

/* Feeds one byte; appends completed characters to out (*olen, room >= 8). */
static void feed_byte(srv_bytes_stream *s, unsigned char b, char *out, size_t *olen)
{
    s->part[s->npart++] = b;
    while (s->npart) {
        int32_t cp;
        size_t used = mhla_utf8_next((const char *)s->part, (size_t)s->npart, &cp);
        int bad = invalid(s->part, used, cp);
        /* all of part was taken and found short: a lead byte (0xC2..0xF4) and
         * valid continuations so far, the rest may still come */
        if (bad && used == (size_t)s->npart && s->part[0] >= 0xC2 && s->part[0] <= 0xF4)
            return;
        /* a character, or a maximal invalid subpart (U+FFFD); what follows it
         * (at most the byte b) starts afresh */
        memcpy(out + *olen, bad ? REPLACEMENT : (const char *)s->part, bad ? 3 : used);
        *olen += bad ? 3 : used;
        s->npart -= (int)used;
        memmove(s->part, s->part + used, (size_t)s->npart);
    }
}

int srv_bytes_stream_new(int vocab_size, srv_bytes_stream **out, char *err, size_t errlen)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        snprintf(err, errlen, "out of memory for a decoding stream");
        return -1;
    }
    (*out)->vocab_size = vocab_size;
    return 0;
}

int srv_bytes_stream_push(srv_bytes_stream *s, int32_t id, const char **piece, size_t *len,
                          char *err, size_t errlen)
{
    size_t n = 0;
    if (id < 0 || id >= s->vocab_size) {
        snprintf(err, errlen, "token id %d is outside the vocabulary [0, %d)", (int)id,
                 s->vocab_size);
        return -1;
    }
    if (id > 0 && id < 256)
        feed_byte(s, (unsigned char)id, s->out, &n);
    s->out[n] = 0;
    *piece = s->out;
    *len = n;
    return 0;
}

void srv_bytes_stream_finish(srv_bytes_stream *s, const char **piece, size_t *len)
{
    size_t n = 0;
    if (s->npart) {
        memcpy(s->out, REPLACEMENT, 3);
        n = 3;
        s->npart = 0;
    }
    s->out[n] = 0;
    *piece = s->out;
    *len = n;
}

void srv_bytes_stream_free(srv_bytes_stream *s) { free(s); }

int srv_bytes_decode(int vocab_size, const int32_t *ids, int n, char **text, size_t *len, char *err,
                     size_t errlen)
{
    *text = NULL;
    *len = 0;
    /* each byte yields at most 3 bytes of output, plus the final flush */
    size_t cap = (size_t)(n > 0 ? n : 0) * 3 + 8;
    char *buf = malloc(cap);
    if (!buf) {
        snprintf(err, errlen, "out of memory decoding %d ids", n);
        return -1;
    }
    srv_bytes_stream st = {.vocab_size = vocab_size};
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= vocab_size) {
            snprintf(err, errlen, "token id %d is outside the vocabulary [0, %d)", (int)ids[i],
                     vocab_size);
            free(buf);
            return -1;
        }
        if (ids[i] > 0 && ids[i] < 256)
            feed_byte(&st, (unsigned char)ids[i], buf, &o);
    }
    if (st.npart) {
        memcpy(buf + o, REPLACEMENT, 3);
        o += 3;
    }
    buf[o] = 0;
    *text = buf;
    *len = o;
    return 0;
}
