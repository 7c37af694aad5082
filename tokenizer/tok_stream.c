/* Incremental decoding for streaming. Each push decodes a short window of recent ids
 * twice (without and with the new ids) and emits the difference once it ends on a
 * complete character; finish reconciles with the one-shot decode so the concatenation
 * of all pieces always equals mhla_tok_decode of every id.
 *
 * Text that ends in U+FFFD after every push (ids that decode to invalid UTF-8) must not
 * hold the window in place, or each push re-decodes everything since the last emission
 * (quadratic work, no text until finish). A trailing U+FFFD that later ids turn into more
 * text is final: an unfinished UTF-8 sequence only grows its one U+FFFD, so text after it
 * means the sequence ended. Such text is emitted up to the previous push and the window
 * moves on. Windows that still cannot move (ids that add no text, decoders whose output
 * is not prefix-stable) are re-decoded only when their pending length doubles, which
 * keeps the total work linear in the ids pushed. A window never starts at ids that decode
 * to nothing on their own (see move_window). */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

struct mhla_tok_stream {
    const mhla_tokenizer *tok;
    int skip_special;
    tok_ids ids;
    size_t prefix, read; /* window start; ids before read are already reflected in emitted */
    mhla_buf emitted;    /* everything handed out so far */
    mhla_buf piece;      /* the last piece handed out */
    long holdback;       /* characters a Strip decoder may still remove from the end */
    size_t decoded;      /* ids passed through the decoder so far: the stream's work */
};

/* pending ids re-decoded at every push; beyond that only when their count doubles */
enum { STREAM_EAGER_IDS = 16 };

static long max_strip_stop(const tok_decoder *d)
{
    if (!d)
        return 0;
    long m = d->kind == DEC_STRIP ? d->stop : 0;
    for (size_t i = 0; i < d->n_children; i++) {
        long c = max_strip_stop(d->children[i]);
        if (c > m)
            m = c;
    }
    return m;
}

int mhla_tok_stream_new(const mhla_tokenizer *tok, int skip_special, mhla_tok_stream **out,
                        char *err, size_t errlen)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    (*out)->tok = tok;
    (*out)->skip_special = skip_special;
    (*out)->holdback = max_strip_stop(tok->decoder);
    return 0;
}

void mhla_tok_stream_free(mhla_tok_stream *st)
{
    if (!st)
        return;
    free(st->ids.v);
    mhla_buf_free(&st->emitted);
    mhla_buf_free(&st->piece);
    free(st);
}

static bool ends_incomplete(const mhla_buf *b)
{
    /* a trailing U+FFFD may be a character whose remaining bytes are still to come */
    return b->len >= 3 && memcmp(b->p + b->len - 3, "\xEF\xBF\xBD", 3) == 0;
}

static bool starts_with(const mhla_buf *b, const mhla_buf *head)
{
    return b->len >= head->len && (head->len == 0 || memcmp(b->p, head->p, head->len) == 0);
}

/* raw decode: the cleanup pass is not prefix-stable, so streaming never applies it */
static int decode_window(mhla_tok_stream *st, const int32_t *ids, size_t n, mhla_buf *out,
                         char *err, size_t errlen)
{
    st->decoded += n;
    return tok_decode_internal(st->tok, ids, n, st->skip_special, false, out, err, errlen);
}

size_t mhla_tok_stream_decoded_ids(const mhla_tok_stream *st) { return st->decoded; }

static int set_piece(mhla_tok_stream *st, const char *s, size_t n, const char **piece, size_t *len)
{
    st->piece.len = 0;
    if (mhla_buf_put(&st->piece, s, n) || mhla_buf_put(&st->emitted, s, n))
        return -1;
    *piece = st->piece.p;
    *len = n;
    return 0;
}

/* How far back move_window looks for a start before it keeps the window's old one. */
enum { STREAM_START_SEARCH = 8 };

/* The text of the ids before `to` is emitted: the window moves on, to start at the latest
 * id from which the ids up to `to` decode to some text of their own. A window must not
 * start where its first ids decode to nothing: the next push's text would then meet the
 * start-of-text rules where the text before it did not (a byte run's leading BOM dropped,
 * then a Strip decoder taking off the space that followed it — a space the one-shot decode
 * keeps). */
static int move_window(mhla_tok_stream *st, size_t to, char *err, size_t errlen)
{
    size_t p = st->read;
    for (;;) {
        mhla_buf ctx = {0};
        int rc = decode_window(st, st->ids.v + p, to - p, &ctx, err, errlen);
        bool text = ctx.len > 0;
        mhla_buf_free(&ctx);
        if (rc)
            return -1;
        if (text || p == st->prefix)
            break;
        p = st->read - p >= STREAM_START_SEARCH ? st->prefix : p - 1;
    }
    st->prefix = p;
    st->read = to;
    return 0;
}

/* A decoder that strips characters off the end is not prefix-stable: re-decode
 * everything and keep the last `holdback` characters (and any trailing U+FFFD) back until
 * finish. */
static int push_holdback(mhla_tok_stream *st, const char **piece, size_t *len, char *err,
                         size_t errlen)
{
    mhla_buf all = {0};
    int rc = decode_window(st, st->ids.v, st->ids.n, &all, err, errlen);
    size_t end = all.len;
    for (long k = 0; rc == 0 && k < st->holdback && end > 0; k++) {
        end--;
        while (end > 0 && ((unsigned char)all.p[end] & 0xC0) == 0x80)
            end--;
    }
    while (rc == 0 && end >= 3 && memcmp(all.p + end - 3, "\xEF\xBF\xBD", 3) == 0)
        end -= 3;
    if (rc == 0 && end > st->emitted.len &&
        memcmp(all.p, st->emitted.p ? st->emitted.p : "", st->emitted.len) == 0 &&
        set_piece(st, all.p + st->emitted.len, end - st->emitted.len, piece, len)) {
        tok_err(err, errlen, "out of memory");
        rc = -1;
    }
    mhla_buf_free(&all);
    return rc;
}

/* Emits the text from the window's `before` to `to`'s, and moves the window to `to`. */
static int emit_to(mhla_tok_stream *st, const mhla_buf *before, const mhla_buf *text, size_t to,
                   const char **piece, size_t *len, char *err, size_t errlen)
{
    if (set_piece(st, text->p + before->len, text->len - before->len, piece, len)) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    return move_window(st, to, err, errlen);
}

/* The window's text before the pending ids and with them: the difference is emitted when
 * it ends on a complete character; else, when the text up to the previous push still
 * starts this text and more follows it, that text is final: it is emitted and the window
 * moves on to there. */
static int push_window(mhla_tok_stream *st, const char **piece, size_t *len, char *err,
                       size_t errlen)
{
    mhla_buf before = {0}, after = {0}, mid = {0};
    const int32_t *w = st->ids.v + st->prefix;
    size_t last = st->ids.n - 1 - st->prefix; /* the window's ids up to the previous push */
    int rc = -1;
    if (decode_window(st, w, st->read - st->prefix, &before, err, errlen) ||
        decode_window(st, w, st->ids.n - st->prefix, &after, err, errlen))
        goto done;
    bool extends = after.len > before.len && starts_with(&after, &before);
    if (extends && !ends_incomplete(&after)) {
        rc = emit_to(st, &before, &after, st->ids.n, piece, len, err, errlen);
        goto done;
    }
    if (extends && st->ids.n - 1 > st->read) {
        if (decode_window(st, w, last, &mid, err, errlen))
            goto done;
        if (mid.len > before.len && after.len > mid.len && starts_with(&mid, &before) &&
            starts_with(&after, &mid)) {
            rc = emit_to(st, &before, &mid, st->ids.n - 1, piece, len, err, errlen);
            goto done;
        }
    }
    rc = 0;
done:
    mhla_buf_free(&before);
    mhla_buf_free(&after);
    mhla_buf_free(&mid);
    return rc;
}

int mhla_tok_stream_push(mhla_tok_stream *st, int32_t id, const char **piece, size_t *len,
                         char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    *piece = "";
    *len = 0;
    if (id < 0 || (size_t)id >= st->tok->n_ids || !st->tok->id_str[id]) {
        tok_err(err, errlen, "stream decode: token id %ld is not in the vocabulary", (long)id);
        return -1;
    }
    if (tok_ids_push(&st->ids, id)) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    if (st->skip_special && st->tok->is_special[id])
        return 0; /* adds no text: nothing to decode */
    if (st->holdback > 0)
        return push_holdback(st, piece, len, err, errlen);
    size_t pending = st->ids.n - st->read;
    if (pending > STREAM_EAGER_IDS && (pending & (pending - 1)) != 0)
        return 0; /* re-decoded only when the pending count doubles */
    return push_window(st, piece, len, err, errlen);
}

int mhla_tok_stream_finish(mhla_tok_stream *st, const char **piece, size_t *len, char *err,
                           size_t errlen)
{
    if (err && errlen)
        err[0] = 0;
    *piece = "";
    *len = 0;
    mhla_buf full = {0};
    if (decode_window(st, st->ids.v, st->ids.n, &full, err, errlen)) {
        mhla_buf_free(&full);
        return -1;
    }
    int rc = 0;
    if (full.len < st->emitted.len ||
        (st->emitted.len && memcmp(full.p, st->emitted.p, st->emitted.len) != 0)) {
        tok_err(err, errlen, "stream decode: emitted text diverged from the one-shot decode");
        rc = -1;
    } else if (set_piece(st, (full.p ? full.p : "") + st->emitted.len, full.len - st->emitted.len,
                         piece, len)) {
        tok_err(err, errlen, "out of memory");
        rc = -1;
    }
    mhla_buf_free(&full);
    st->prefix = st->read = st->ids.n;
    return rc;
}
