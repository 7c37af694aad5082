/*
 * text_codec.h — text <-> token ids for the server (private to server/).
 *
 * This is the seam where the tokenizer module plugs in: text_codec.c is a
 * byte-level stand-in (byte b <-> token id b, for models whose vocabulary
 * holds at least 256 ids) and is meant to be replaced by a file with the
 * same interface on top of tokenizer/tokenizer.h. Every function that can
 * fail returns 0 on success or -1 with err (errlen bytes) naming the cause.
 */
#ifndef MHLA_TEXT_CODEC_H
#define MHLA_TEXT_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct srv_codec srv_codec;
typedef struct srv_codec_stream srv_codec_stream;

/* model_dir may hold a tokenizer; vocab_size is the model's. */
int srv_codec_create(const char *model_dir, int vocab_size, srv_codec **out, char *err,
                     size_t errlen);
void srv_codec_free(srv_codec *c);
/* Short description for logs ("byte-level stand-in", ...). */
const char *srv_codec_name(const srv_codec *c);
/* 1 when text prompts can be encoded at all. */
int srv_codec_can_encode(const srv_codec *c);

/* UTF-8 text -> ids (malloc'd; *n may be 0). */
int srv_codec_encode(const srv_codec *c, const char *text, size_t len, int32_t **ids, int *n,
                     char *err, size_t errlen);
/* ids -> valid UTF-8 text (malloc'd, NUL-terminated). */
int srv_codec_decode(const srv_codec *c, const int32_t *ids, int n, char **text, size_t *len,
                     char *err, size_t errlen);

/* Incremental decoding: each push yields only complete UTF-8 characters (bytes
 * that can never form one become U+FFFD); finish yields the rest. The pieces
 * concatenated equal srv_codec_decode of all ids. A piece stays valid until
 * the next call on the stream. */
int srv_codec_stream_new(const srv_codec *c, srv_codec_stream **out, char *err, size_t errlen);
int srv_codec_stream_push(srv_codec_stream *s, int32_t id, const char **piece, size_t *len,
                          char *err, size_t errlen);
int srv_codec_stream_finish(srv_codec_stream *s, const char **piece, size_t *len, char *err,
                            size_t errlen);
void srv_codec_stream_free(srv_codec_stream *s);

#endif
