/* mhla-serve tokenizer: Hugging Face tokenizer.json (BPE models), exact encode/decode,
 * streaming-safe incremental decoding and byte-level BPE training.
 *
 * Conventions: every function that can fail returns 0 on success and -1 on failure,
 * writing a message that names the cause into err (errlen bytes, always terminated).
 * Nothing aborts on bad input. A loaded tokenizer is immutable apart from an internal,
 * mutex-protected cache, so encode/decode may be called from many threads at once. */
#ifndef MHLA_TOKENIZER_H
#define MHLA_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mhla_tokenizer mhla_tokenizer;
typedef struct mhla_tok_stream mhla_tok_stream;

/* Load tokenizer.json (path) and, optionally, tokenizer_config.json (config_path may be
 * NULL; it supplies add_bos_token / add_eos_token / clean_up_tokenization_spaces). */
int mhla_tok_load(const char *path, const char *config_path, mhla_tokenizer **out, char *err,
                  size_t errlen);
/* Same from memory; config_json may be NULL. */
int mhla_tok_load_mem(const char *json, size_t len, const char *config_json, size_t config_len,
                      mhla_tokenizer **out, char *err, size_t errlen);
void mhla_tok_free(mhla_tokenizer *tok);

/* Encode UTF-8 text (invalid sequences become U+FFFD, as a WHATWG decoder does).
 * add_special: apply the post-processor (BOS/EOS template). *ids is malloc'd. */
int mhla_tok_encode(const mhla_tokenizer *tok, const char *text, size_t len, int add_special,
                    int32_t **ids, size_t *n_ids, char *err, size_t errlen);

/* Decode ids to UTF-8 text (malloc'd, NUL-terminated, *len excludes the NUL).
 * skip_special drops special added tokens. Unknown ids are an error. */
int mhla_tok_decode(const mhla_tokenizer *tok, const int32_t *ids, size_t n_ids, int skip_special,
                    char **text, size_t *len, char *err, size_t errlen);

size_t mhla_tok_vocab_size(const mhla_tokenizer *tok);                              /* max id + 1 */
int32_t mhla_tok_token_to_id(const mhla_tokenizer *tok, const char *s, size_t len); /* -1 if none */
const char *mhla_tok_id_to_token(const mhla_tokenizer *tok, int32_t id,
                                 size_t *len); /* NULL if none */
int mhla_tok_is_special(const mhla_tokenizer *tok, int32_t id);
/* The bytes token id adds in the middle of a text (for matching tokens against a grammar):
 * the decoder applied to the token alone, without what it does only at a text's start (a
 * SentencePiece "\xE2\x96\x81" is a space even first) and without repairing UTF-8, so a
 * byte-level or <0xAB> token that holds part of a character gives its raw bytes; an added
 * token gives its content. For a byte-level tokenizer the tokens' bytes, concatenated, are
 * the decoded text. Returns 0 with *len bytes in buf; -1 with *len 0 when id is not in the
 * vocabulary (or memory ran out), -1 with *len the size needed when cap is less. */
int mhla_tok_token_bytes(const mhla_tokenizer *tok, int32_t id, char *buf, size_t cap, size_t *len);
int32_t mhla_tok_bos_id(const mhla_tokenizer *tok); /* -1 when the tokenizer has none */
int32_t mhla_tok_eos_id(const mhla_tokenizer *tok);

/* Incremental decoder for streaming: push ids one at a time; each call returns the new
 * text (only complete UTF-8 characters; may be empty). finish returns the rest. The
 * concatenation of all pieces equals mhla_tok_decode of all ids (skip_special as given).
 * Returned pieces point into the stream and stay valid until the next call on it. */
int mhla_tok_stream_new(const mhla_tokenizer *tok, int skip_special, mhla_tok_stream **out,
                        char *err, size_t errlen);
int mhla_tok_stream_push(mhla_tok_stream *st, int32_t id, const char **piece, size_t *len,
                         char *err, size_t errlen);
int mhla_tok_stream_finish(mhla_tok_stream *st, const char **piece, size_t *len, char *err,
                           size_t errlen);
void mhla_tok_stream_free(mhla_tok_stream *st);
/* Ids the stream has passed through the decoder so far (its work, for tests and
 * monitoring): linear in the ids pushed. */
size_t mhla_tok_stream_decoded_ids(const mhla_tok_stream *st);

/* Train a byte-level BPE (GPT-2 pre-tokenization, <|endoftext|> special token id 0) on the
 * given files and write a tokenizer.json to out_path. */
int mhla_tok_train_bpe(const char *const *files, size_t n_files, size_t vocab_size,
                       const char *out_path, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
