/*
 * text_codec.h — text <-> token ids for the server (private to server/).
 *
 * text_codec.c uses the model directory's tokenizer.json (tokenizer/
 * tokenizer.h) when there is one; without it, byte_codec.c's byte-level
 * stand-in (byte b <-> token id b, for models whose vocabulary holds at
 * least 256 ids). Every function that can fail returns 0 on success or -1
 * with err (errlen bytes) naming the cause.
 */
#ifndef MHLA_TEXT_CODEC_H
#define MHLA_TEXT_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct srv_codec srv_codec;
typedef struct srv_codec_stream srv_codec_stream;

/* model_dir may hold tokenizer.json (and tokenizer_config.json); vocab_size
 * is the model's. A tokenizer with ids past the model's vocabulary is refused. */
int srv_codec_create(const char *model_dir, int vocab_size, srv_codec **out, char *err,
                     size_t errlen);
void srv_codec_free(srv_codec *c);
/* Short description for logs ("tokenizer.json (4096 ids)", "byte-level stand-in ..."). */
const char *srv_codec_name(const srv_codec *c);
/* 1 when a tokenizer.json is in use. */
int srv_codec_is_tokenizer(const srv_codec *c);

/* UTF-8 text -> ids (malloc'd; *n may be 0). add_special applies the
 * tokenizer's post-processor (BOS/EOS template), as the reference does by
 * default; the stand-in has no special tokens. */
int srv_codec_encode(const srv_codec *c, const char *text, size_t len, int add_special,
                     int32_t **ids, int *n, char *err, size_t errlen);
/* ids -> valid UTF-8 text (malloc'd, NUL-terminated). skip_special drops the
 * tokenizer's special tokens. Ids the tokenizer does not know (a model
 * vocabulary padded past the tokenizer's) decode to nothing. */
int srv_codec_decode(const srv_codec *c, const int32_t *ids, int n, int skip_special, char **text,
                     size_t *len, char *err, size_t errlen);

/* Incremental decoding of generated ids (special tokens skipped): each push
 * yields only complete UTF-8 characters (bytes that can never form one become
 * U+FFFD); finish yields the rest. The pieces concatenated equal
 * srv_codec_decode(skip_special) of all ids. A piece stays valid until the
 * next call on the stream. */
int srv_codec_stream_new(const srv_codec *c, srv_codec_stream **out, char *err, size_t errlen);
int srv_codec_stream_push(srv_codec_stream *s, int32_t id, const char **piece, size_t *len,
                          char *err, size_t errlen);
int srv_codec_stream_finish(srv_codec_stream *s, const char **piece, size_t *len, char *err,
                            size_t errlen);
void srv_codec_stream_free(srv_codec_stream *s);

/* Number of Unicode characters in UTF-8 text (the unit of text_offset). */
long srv_utf8_chars(const char *text, size_t len);

/* ---- byte_codec.c: the byte-level stand-in ---------------------------------- */

typedef struct srv_bytes_stream srv_bytes_stream;
int srv_bytes_encode(int vocab_size, const char *text, size_t len, int32_t **ids, int *n,
                     char *err, size_t errlen);
int srv_bytes_decode(int vocab_size, const int32_t *ids, int n, char **text, size_t *len,
                     char *err, size_t errlen);
int srv_bytes_stream_new(int vocab_size, srv_bytes_stream **out, char *err, size_t errlen);
int srv_bytes_stream_push(srv_bytes_stream *s, int32_t id, const char **piece, size_t *len,
                          char *err, size_t errlen);
void srv_bytes_stream_finish(srv_bytes_stream *s, const char **piece, size_t *len);
void srv_bytes_stream_free(srv_bytes_stream *s);

#endif
