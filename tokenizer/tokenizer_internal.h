/* tokenizer_internal.h — structures shared by the tokenizer's source files. Not installed. */
#ifndef MHLA_TOK_INTERNAL_H
#define MHLA_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "tokenizer.h"

/* ---- errors, string lists and id arrays (tok_common.c) ---- */
void tok_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The growable buffer is base's (mhla_buf_reserve, _put, _putc, _free). */

/* A list of strings stored back to back in one buffer (pre-token lists, decoder chains). */
typedef struct {
    mhla_buf data;
    size_t *off, *len;
    size_t n, cap;
} tok_strlist;
int tok_strlist_push(tok_strlist *l, const char *s, size_t n);
void tok_strlist_clear(tok_strlist *l);
void tok_strlist_free(tok_strlist *l);
static inline const char *tok_strlist_at(const tok_strlist *l, size_t i)
{
    return l->data.p + l->off[i];
}

typedef struct {
    int32_t *v;
    size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *a, int32_t id);

/* ---- UTF-8 helpers (tok_utf8.c; decoding and encoding are base's mhla_utf8_next / _put) ---- */
/* Replace invalid sequences by U+FFFD exactly as the WHATWG TextDecoder does. */
int tok_utf8_sanitize(const char *s, size_t n, mhla_buf *out);
/* The offset of the first byte that does not start a valid UTF-8 sequence, n if none. */
size_t tok_utf8_invalid_at(const char *s, size_t n);
/* JavaScript's notion of white space (String.prototype.trim, \s without the u-flag
 * rewrite): the reference implementation uses it in several places. */
bool tok_js_space(int32_t cp);
void tok_js_trim(const char *s, size_t n, bool left, bool right, size_t *start, size_t *end);

/* ---- hash maps (tok_hash.c) ---- */
typedef struct {
    uint64_t *hash; /* 0 = empty slot */
    uint32_t *koff, *klen;
    int32_t *val;
    size_t cap, count;
    mhla_buf keys;
} tok_strmap;
uint64_t tok_hash_bytes(const char *s, size_t n);
int tok_strmap_put(tok_strmap *m, const char *k, size_t n, int32_t v); /* overwrites */
bool tok_strmap_get(const tok_strmap *m, const char *k, size_t n, int32_t *v);
void tok_strmap_free(tok_strmap *m);

typedef struct {
    uint64_t *key; /* UINT64_MAX = empty */
    int32_t *rank, *merged;
    size_t cap, count;
} tok_pairmap;
int tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
bool tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b, int32_t *rank, int32_t *merged);
void tok_pairmap_free(tok_pairmap *m);

/* ---- regexes with the reference's (JavaScript) matching semantics (tok_regex.c) ---- */
typedef struct {
    pcre2_code *code;
    bool jit;
} tok_regex;
/* Compile a pattern from tokenizer.json ("Regex" = Oniguruma syntax, translated the way the
 * reference translates it) or a literal string. */
int tok_regex_compile_onig(tok_regex *re, const char *pat, size_t n, char *err, size_t errlen);
int tok_regex_compile_literal(tok_regex *re, const char *lit, size_t n, bool capture, char *err,
                              size_t errlen);
int tok_regex_compile_raw(tok_regex *re, const char *pcre_pat, char *err, size_t errlen);
void tok_regex_free(tok_regex *re);
/* Iterate matches like String.prototype.matchAll: calls cb(start,end) for every match. */
typedef int (*tok_match_cb)(void *ctx, size_t start, size_t end);
int tok_regex_each(const tok_regex *re, const char *s, size_t n, tok_match_cb cb, void *ctx,
                   char *err, size_t errlen);
/* String.prototype.split(regex) pieces (captures included), empty pieces dropped. */
int tok_regex_js_split(const tok_regex *re, const char *s, size_t n, tok_strlist *out, char *err,
                       size_t errlen);
/* String.prototype.replaceAll(regex, literal content). */
int tok_regex_replace(const tok_regex *re, const char *s, size_t n, const char *rep, size_t rn,
                      mhla_buf *out, char *err, size_t errlen);

/* ---- building components from tokenizer.json (tok_build.c) ---- */
typedef struct cJSON cJSON;
const char *tok_jstr(const cJSON *o, const char *k); /* the string at key k, or NULL */
bool tok_jbool(const cJSON *o, const char *k, bool def);
/* {"String": ...} or {"Regex": ...} (a Split, Replace pattern); owner names it in messages. */
int tok_pattern_build(const cJSON *pat, bool capture, tok_regex *re, char *err, size_t errlen,
                      const char *owner);
/* One "type" a component may have: the kind its builder stores, and what reads the type's
 * own fields into the node (NULL when it has none). */
typedef struct {
    const char *name;
    int kind;
    int (*read)(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen);
} tok_build_type;
/* What a builder (normalizer, pre-tokenizer, decoder, post-processor) tells the skeleton. */
typedef struct {
    const char *what;            /* the tokenizer.json key: names the component in messages */
    const char *list_key;        /* a Sequence's array of children ("normalizers", ...) */
    bool skip_null;              /* a null child of a Sequence is skipped, else refused */
    const tok_build_type *types; /* every type, "Sequence" too, in the order messages list them */
    size_t n_types;
    void (*set_kind)(void *node, int kind); /* NULL: the node keeps no kind */
    int (*reserve)(void *node, size_t n);   /* room for n children; NULL: none needed */
    int (*add_child)(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen);
} tok_build_spec;
/* Builds j (an object with a "type") into node: refuses a non-object, a missing or an
 * unsupported type, and a Sequence without its array, with a message naming the cause. */
int tok_build(const tok_build_spec *spec, const cJSON *j, void *node, const void *ctx, char *err,
              size_t errlen);

/* ---- normalizers (tok_normalizer.c) ---- */
typedef enum {
    NORM_SEQUENCE,
    NORM_PREPEND,
    NORM_REPLACE,
    NORM_NFC,
    NORM_NFKC,
    NORM_NFD,
    NORM_NFKD,
    NORM_LOWERCASE,
    NORM_STRIP,
    NORM_STRIP_ACCENTS
} tok_norm_kind;
typedef struct tok_normalizer {
    tok_norm_kind kind;
    struct tok_normalizer **children;
    size_t n_children;
    char *str;
    size_t str_len; /* Prepend text / Replace content */
    tok_regex re;   /* Replace pattern */
    bool has_re, strip_left, strip_right;
} tok_normalizer;
int tok_normalizer_build(const cJSON *j, tok_normalizer **out, char *err, size_t errlen);
int tok_normalizer_apply(const tok_normalizer *nz, const char *s, size_t n, mhla_buf *out,
                         char *err, size_t errlen);
void tok_normalizer_free(tok_normalizer *nz);

/* ---- pre-tokenizers (tok_pretokenizer.c) ---- */
typedef enum {
    PRE_SEQUENCE,
    PRE_BYTELEVEL,
    PRE_SPLIT,
    PRE_METASPACE,
    PRE_DIGITS,
    PRE_WHITESPACE,
    PRE_WHITESPACE_SPLIT,
    PRE_PUNCTUATION
} tok_pre_kind;
typedef enum { SPLIT_REMOVED, SPLIT_OTHER } tok_split_behavior;
typedef struct tok_pretok {
    tok_pre_kind kind;
    struct tok_pretok **children;
    size_t n_children;
    tok_regex re;
    bool has_re, add_prefix_space, use_regex, invert, individual_digits;
    tok_split_behavior behavior;
    char *replacement;
    size_t replacement_len;
    int prepend_scheme; /* 0 never, 1 first, 2 always */
} tok_pretok;
int tok_pretok_build(const cJSON *j, tok_pretok **out, char *err, size_t errlen);
/* Apply to every string of in, appending the pieces to out. */
int tok_pretok_apply(const tok_pretok *pt, const tok_strlist *in, size_t section_index,
                     tok_strlist *out, char *err, size_t errlen);
void tok_pretok_free(tok_pretok *pt);
extern const int32_t tok_byte_to_cp[256];
int tok_cp_to_byte(int32_t cp); /* -1 when cp is not a byte-level character */

/* ---- BPE model (tok_bpe.c) ---- */
#define TOK_CACHE_SLOTS 8192
#define TOK_CACHE_LOCKS 64
typedef struct {
    uint64_t hash;
    char *key;
    uint32_t klen;
    int32_t *ids;
    uint32_t n;
} tok_cache_slot;
typedef struct {
    tok_strmap vocab;           /* token string -> id (model vocab plus added tokens) */
    tok_pairmap merges;         /* (left id, right id) -> rank, merged id */
    int32_t small_cp_id[512];   /* id of the one-character token for code points < 512, or -1 */
    int32_t byte_token_id[256]; /* <0xXX> ids for byte fallback, -1 if absent */
    bool byte_fallback, ignore_merges, all_byte_tokens;
    int32_t unk_id; /* -1 when no unk token */
    char *eow_suffix;
    size_t eow_len; /* end_of_word_suffix */
    char *cont_prefix;
    size_t cont_len; /* continuing_subword_prefix */
    tok_cache_slot *cache;
    pthread_mutex_t locks[TOK_CACHE_LOCKS];
} tok_bpe;
int tok_bpe_build(const cJSON *model, tok_bpe *bpe, char *err, size_t errlen);
/* Encode one pre-token, appending ids. */
int tok_bpe_encode_word(const tok_bpe *bpe, const char *w, size_t n, tok_ids *out, char *err,
                        size_t errlen);
void tok_bpe_free(tok_bpe *bpe);

/* ---- added tokens (tok_added.c) ---- */
typedef struct {
    char *content;
    size_t len;
    int32_t id;
    bool special, lstrip, rstrip, single_word, normalized;
} tok_added;
typedef struct tok_trie tok_trie;
tok_trie *tok_trie_new(void);
int tok_trie_add(tok_trie *t, const char *s, size_t n, int32_t value);
/* Longest match starting at s: returns match length (0 = none) and its value. */
size_t tok_trie_match(const tok_trie *t, const char *s, size_t n, int32_t *value);
void tok_trie_free(tok_trie *t);
typedef struct {
    size_t start, end;
    int32_t added;
} tok_section; /* added = index or -1 */
/* Split text into sections around added-token matches (greedy longest match, left to
 * right), then apply lstrip/rstrip trimming of the neighbours as the reference does. */
int tok_added_split(const tok_trie *trie, const tok_added *added, const char *s, size_t n,
                    tok_section **out, size_t *n_out, char *err, size_t errlen);

/* ---- decoders (tok_decoder.c) ---- */
typedef enum {
    DEC_SEQUENCE,
    DEC_BYTELEVEL,
    DEC_METASPACE,
    DEC_REPLACE,
    DEC_BYTEFALLBACK,
    DEC_FUSE,
    DEC_STRIP
} tok_dec_kind;
typedef struct tok_decoder {
    tok_dec_kind kind;
    struct tok_decoder **children;
    size_t n_children;
    tok_regex re;
    bool has_re;
    char *str;
    size_t str_len; /* Replace content / Metaspace replacement / Strip content */
    int32_t strip_cp;
    long start, stop;
} tok_decoder;
int tok_decoder_build(const cJSON *j, tok_decoder **out, char *err, size_t errlen);
struct mhla_tokenizer;
int tok_decoder_run(const struct mhla_tokenizer *tok, const tok_decoder *d, tok_strlist *toks,
                    tok_strlist *tmp, char *err, size_t errlen);
void tok_decoder_free(tok_decoder *d);
/* The byte a "<0xAB>" token stands for (ByteFallback), or -1 when s is no such token. */
int tok_byte_token(const char *s, size_t n);
/* A Strip decoder's trimming of one string, pushed onto out. */
int tok_strip_token(const tok_decoder *d, const char *s, size_t n, tok_strlist *out);

/* ---- post-processor (tok_postprocess.c) ---- */
typedef struct {
    bool present;
    int32_t *before, *after;
    size_t n_before, n_after; /* ids around $A */
} tok_post;
int tok_post_build(const cJSON *j, const struct mhla_tokenizer *tok, tok_post *pp, char *err,
                   size_t errlen);

/* ---- the tokenizer ---- */
struct mhla_tokenizer {
    tok_bpe bpe;
    tok_normalizer *normalizer; /* NULL = none */
    tok_pretok *pretok;         /* NULL = none */
    tok_decoder *decoder;       /* NULL = join with " " as the reference does */
    tok_post post;
    tok_added *added;
    size_t n_added;
    tok_strmap added_map; /* content (and normalized content) -> index into added */
    tok_trie *trie_raw, *trie_norm;
    char **id_str;
    uint32_t *id_len;
    size_t n_ids;                   /* id -> token string */
    uint8_t *is_added, *is_special; /* per id */
    int32_t bos_id, eos_id;
    bool cleanup_spaces;
    char *unk_str;
    size_t unk_len;
};

int tok_decode_internal(const mhla_tokenizer *tok, const int32_t *ids, size_t n, int skip_special,
                        bool cleanup, mhla_buf *out, char *err, size_t errlen);
#endif
