/*
 * text_codec.c — text <-> ids: the model's tokenizer.json through the
 * tokenizer module when the directory has one, else the byte-level stand-in
 * of byte_codec.c. Generated ids the tokenizer does not know (vocabularies
 * padded past the tokenizer's) are dropped from the text, not an error: the
 * model may well sample them.
 */
#include "server_internal.h"
#include "tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct srv_codec {
    int vocab_size;
    mhla_tokenizer *tok; /* NULL: byte-level stand-in */
    char name[128];
};

struct srv_codec_stream {
    const srv_codec *c;
    mhla_tok_stream *ts;
    srv_bytes_stream *bs;
    mhla_buf fixed; /* a piece with its NUL bytes replaced */
};

/* A byte-level vocabulary holds a token for the byte 0: decoded text would
 * end there wherever it becomes a C string (JSON bodies, echo, offsets), so
 * it becomes U+FFFD, as bytes that are not UTF-8 do. Returns 0, -1 when out
 * of memory. */
static int replace_nul(const char *text, size_t len, mhla_buf *out)
{
    out->len = 0;
    for (size_t i = 0; i < len; i++) {
        const char *nul = memchr(text + i, 0, len - i);
        size_t n = nul ? (size_t)(nul - (text + i)) : len - i;
        if (mhla_buf_put(out, text + i, n) || (nul && mhla_buf_put(out, "\xEF\xBF\xBD", 3)))
            return -1;
        i += n;
    }
    return mhla_buf_put(out, "", 0);
}

/* The piece as handed out: pointing into s->fixed when it held a NUL. */
static int piece_out(srv_codec_stream *s, const char **piece, size_t *len, char *err, size_t errlen)
{
    if (!*len || !memchr(*piece, 0, *len))
        return 0;
    if (replace_nul(*piece, *len, &s->fixed)) {
        snprintf(err, errlen, "out of memory decoding a token");
        return -1;
    }
    *piece = s->fixed.p;
    *len = s->fixed.len;
    return 0;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The model's tokenizer.json (tj), with tokenizer_config.json (tc) when it
 * has one, into c; its ids must fit the model's vocabulary. */
static int load_tokenizer(srv_codec *c, const char *tj, const char *tc, char *err, size_t errlen)
{
    char msg[400];
    if (mhla_tok_load(tj, file_exists(tc) ? tc : NULL, &c->tok, msg, sizeof msg)) {
        snprintf(err, errlen, "cannot load %s: %s", tj, msg);
        return -1;
    }
    if (mhla_tok_vocab_size(c->tok) > (size_t)c->vocab_size) {
        snprintf(err, errlen,
                 "%s has ids up to %zu but the model's vocabulary holds %d: they do not "
                 "belong together",
                 tj, mhla_tok_vocab_size(c->tok) - 1, c->vocab_size);
        return -1;
    }
    snprintf(c->name, sizeof c->name, "tokenizer.json (%zu ids)", mhla_tok_vocab_size(c->tok));
    return 0;
}

int srv_codec_create(const char *model_dir, int vocab_size, srv_codec **out, char *err,
                     size_t errlen)
{
    *out = NULL;
    if (vocab_size <= 0) {
        snprintf(err, errlen, "text codec: vocabulary size %d is not positive", vocab_size);
        return -1;
    }
    srv_codec *c = calloc(1, sizeof *c);
    size_t dl = strlen(model_dir);
    char *tj = malloc(dl + 32), *tc = malloc(dl + 32);
    int rc = 0;
    if (!c || !tj || !tc) {
        snprintf(err, errlen, "text codec: out of memory");
        rc = -1;
    } else {
        c->vocab_size = vocab_size;
        snprintf(tj, dl + 32, "%s/tokenizer.json", model_dir);
        snprintf(tc, dl + 32, "%s/tokenizer_config.json", model_dir);
        if (file_exists(tj))
            rc = load_tokenizer(c, tj, tc, err, errlen);
        else
            snprintf(c->name, sizeof c->name,
                     "byte-level stand-in (no tokenizer.json in the model directory)");
    }
    free(tj);
    free(tc);
    if (rc) {
        srv_codec_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void srv_codec_free(srv_codec *c)
{
    if (!c)
        return;
    mhla_tok_free(c->tok);
    free(c);
}

const char *srv_codec_name(const srv_codec *c) { return c->name; }

int srv_codec_text_refused(const srv_codec *c, char *why, size_t cap)
{
    return !c->tok && srv_bytes_refusal(c->vocab_size, why, cap);
}

static int known(const srv_codec *c, int32_t id)
{
    size_t len;
    return id >= 0 && (size_t)id < mhla_tok_vocab_size(c->tok) &&
           mhla_tok_id_to_token(c->tok, id, &len) != NULL;
}

int srv_codec_encode(const srv_codec *c, const char *text, size_t len, int add_special,
                     int32_t **ids, int *n, char *err, size_t errlen)
{
    if (!c->tok)
        return srv_bytes_encode(c->vocab_size, text, len, ids, n, err, errlen);
    *ids = NULL;
    *n = 0;
    size_t nn = 0;
    if (mhla_tok_encode(c->tok, text, len, add_special, ids, &nn, err, errlen))
        return -2; /* any text encodes: only memory (or the tokenizer) fails */
    if (nn > (size_t)1 << 30) {
        free(*ids);
        *ids = NULL;
        snprintf(err, errlen, "text of %zu tokens is too long", nn);
        return -1;
    }
    *n = (int)nn;
    return 0;
}

int srv_codec_token_bytes(const srv_codec *c, int32_t id, char *buf, size_t cap, size_t *len,
                          int *special)
{
    *len = 0;
    *special = 0;
    if (id < 0 || id >= c->vocab_size)
        return -1;
    if (!c->tok) { /* the stand-in: byte b is id b; 0 and past 255 are no text */
        *special = id == 0 || id > 255;
        if (!*special && cap > 0)
            buf[(*len)++] = (char)id;
        return 0;
    }
    if ((size_t)id >= mhla_tok_vocab_size(c->tok)) { /* padding rows: never text */
        *special = 1;
        return 0;
    }
    *special = mhla_tok_is_special(c->tok, id);
    return mhla_tok_token_bytes(c->tok, id, buf, cap, len);
}

int srv_codec_decode(const srv_codec *c, const int32_t *ids, int n, int skip_special, char **text,
                     size_t *len, char *err, size_t errlen)
{
    if (!c->tok)
        return srv_bytes_decode(c->vocab_size, ids, n, text, len, err, errlen);
    *text = NULL;
    *len = 0;
    int32_t *k = malloc((size_t)(n > 0 ? n : 1) * sizeof *k);
    if (!k) {
        snprintf(err, errlen, "out of memory decoding %d ids", n);
        return -1;
    }
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= c->vocab_size) {
            snprintf(err, errlen, "token id %d is outside the vocabulary [0, %d)", (int)ids[i],
                     c->vocab_size);
            free(k);
            return -1;
        }
        if (known(c, ids[i]))
            k[m++] = ids[i];
    }
    int rc = mhla_tok_decode(c->tok, k, (size_t)m, skip_special, text, len, err, errlen);
    free(k);
    if (rc || !*len || !memchr(*text, 0, *len))
        return rc;
    mhla_buf b = {0};
    if (replace_nul(*text, *len, &b)) {
        mhla_buf_free(&b);
        snprintf(err, errlen, "out of memory decoding %d ids", n);
        return -1;
    }
    free(*text);
    *text = b.p;
    *len = b.len;
    return 0;
}

int srv_codec_stream_new(const srv_codec *c, srv_codec_stream **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_codec_stream *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "out of memory for a decoding stream");
        return -1;
    }
    s->c = c;
    int rc = c->tok ? mhla_tok_stream_new(c->tok, 1, &s->ts, err, errlen)
                    : srv_bytes_stream_new(c->vocab_size, &s->bs, err, errlen);
    if (rc) {
        free(s);
        return -1;
    }
    *out = s;
    return 0;
}

int srv_codec_stream_push(srv_codec_stream *s, int32_t id, const char **piece, size_t *len,
                          char *err, size_t errlen)
{
    if (!s->c->tok)
        return srv_bytes_stream_push(s->bs, id, piece, len, err, errlen);
    if (id < 0 || id >= s->c->vocab_size) {
        snprintf(err, errlen, "token id %d is outside the vocabulary [0, %d)", (int)id,
                 s->c->vocab_size);
        return -1;
    }
    if (!known(s->c, id)) {
        *piece = "";
        *len = 0;
        return 0;
    }
    if (mhla_tok_stream_push(s->ts, id, piece, len, err, errlen))
        return -1;
    return piece_out(s, piece, len, err, errlen);
}

int srv_codec_stream_finish(srv_codec_stream *s, const char **piece, size_t *len, char *err,
                            size_t errlen)
{
    if (!s->c->tok) {
        srv_bytes_stream_finish(s->bs, piece, len);
        return 0;
    }
    if (mhla_tok_stream_finish(s->ts, piece, len, err, errlen))
        return -1;
    return piece_out(s, piece, len, err, errlen);
}

void srv_codec_stream_free(srv_codec_stream *s)
{
    if (!s)
        return;
    mhla_tok_stream_free(s->ts);
    srv_bytes_stream_free(s->bs);
    mhla_buf_free(&s->fixed);
    free(s);
}

long srv_utf8_chars(const char *text, size_t len)
{
    long n = 0;
    for (size_t i = 0; i < len; n++) {
        int32_t cp;
        i += mhla_utf8_next(text + i, len - i, &cp);
    }
    return n;
}
