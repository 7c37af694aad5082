/*
 * structured.c — structured outputs: a request's constraint (a GBNF
 * grammar, a JSON Schema, any JSON object) compiled once and kept by its
 * content, so a repeated schema costs a lookup; and each constrained
 * choice's mask, which the sampler applies to its copy of the row before it
 * chooses (tokens the grammar cannot take become -inf) and which advances
 * with every token chosen.
 *
 * The vocabulary (each id's bytes, special ids, end ids) is read once at
 * start from the model's tokenizer. Compiled grammars live in a small LRU
 * cache; a request holds a reference to its entry until it is freed, so an
 * entry evicted meanwhile lives on for the requests that use it.
 */
#include "server_internal.h"
#include "grammar.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CACHE_ENTRIES 64
#define MAX_TOKEN_BYTES 1024

struct srv_grammar_ref {
    mhla_grammar_tokens *tokens;
    atomic_int refs; /* the cache's (while cached) and each request's */
    uint64_t hash;
    char *key; /* kind byte + the grammar's text */
    size_t key_len;
    struct srv_grammar_ref *prev, *next; /* LRU, most recent first; under mu */
};

struct srv_grammars {
    mhla_grammar_vocab *vocab;
    int n_vocab;
    pthread_mutex_t mu;
    srv_grammar_ref *head;
    int n_cached;
};

/* ---- the vocabulary --------------------------------------------------------- */

typedef struct {
    char **bytes;
    size_t *lens;
    unsigned char *special;
} vocab_parts;

static void parts_free(vocab_parts *p, int n)
{
    for (int i = 0; p->bytes && i < n; i++)
        free(p->bytes[i]);
    free(p->bytes);
    free(p->lens);
    free(p->special);
}

/* Every id's bytes from the codec; -1 with err when out of memory. */
static int read_parts(const srv_codec *codec, int n, vocab_parts *p, char *err, size_t errlen)
{
    p->bytes = calloc((size_t)n, sizeof *p->bytes);
    p->lens = calloc((size_t)n, sizeof *p->lens);
    p->special = calloc((size_t)n, 1);
    char buf[MAX_TOKEN_BYTES];
    for (int i = 0; p->bytes && p->lens && p->special && i < n; i++) {
        int special;
        size_t len = 0;
        if (srv_codec_token_bytes(codec, i, buf, sizeof buf, &len, &special))
            special = 1, len = 0; /* a token past the buffer is never allowed */
        p->special[i] = (unsigned char)(special || len == 0);
        p->lens[i] = len;
        if (!(p->bytes[i] = malloc(len ? len : 1)))
            break;
        memcpy(p->bytes[i], buf, len);
        if (i == n - 1)
            return 0;
    }
    snprintf(err, errlen, "out of memory reading the vocabulary's %d tokens for grammars", n);
    return -1;
}

int srv_grammars_create(const srv_codec *codec, const srv_gen_config *gen, int n_vocab,
                        srv_grammars **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_grammars *gs = calloc(1, sizeof *gs);
    vocab_parts p = {0};
    mhla_grammar_error ge = {0};
    if (!gs || read_parts(codec, n_vocab, &p, err, errlen)) {
        if (!gs)
            snprintf(err, errlen, "out of memory for the grammar cache");
        parts_free(&p, n_vocab);
        free(gs);
        return -1;
    }
    int rc = mhla_grammar_vocab_create(n_vocab, (const char *const *)p.bytes, p.lens, p.special,
                                       gen->eos, gen->n_eos, &gs->vocab, &ge);
    parts_free(&p, n_vocab);
    if (rc) {
        snprintf(err, errlen, "the vocabulary for grammars: %s", ge.msg);
        free(gs);
        return -1;
    }
    gs->n_vocab = n_vocab;
    pthread_mutex_init(&gs->mu, NULL);
    *out = gs;
    return 0;
}

void srv_grammar_ref_release(srv_grammar_ref *r)
{
    if (!r || atomic_fetch_sub(&r->refs, 1) > 1)
        return;
    mhla_grammar_tokens_free(r->tokens);
    free(r->key);
    free(r);
}

void srv_grammars_free(srv_grammars *gs)
{
    if (!gs)
        return;
    for (srv_grammar_ref *r = gs->head, *next; r; r = next) {
        next = r->next;
        srv_grammar_ref_release(r);
    }
    mhla_grammar_vocab_free(gs->vocab);
    pthread_mutex_destroy(&gs->mu);
    free(gs);
}

/* ---- the cache ---------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void unlink_ref(srv_grammars *gs, srv_grammar_ref *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        gs->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

static void push_front(srv_grammars *gs, srv_grammar_ref *r)
{
    r->next = gs->head;
    if (gs->head)
        gs->head->prev = r;
    gs->head = r;
}

/* The cached entry for key, moved to the front and retained; NULL when none. mu held. */
static srv_grammar_ref *lookup(srv_grammars *gs, uint64_t h, const char *key, size_t n)
{
    for (srv_grammar_ref *r = gs->head; r; r = r->next)
        if (r->hash == h && r->key_len == n && !memcmp(r->key, key, n)) {
            unlink_ref(gs, r);
            push_front(gs, r);
            atomic_fetch_add(&r->refs, 1);
            return r;
        }
    return NULL;
}

/* Keeps r (one reference for the cache), evicting the least recent past the cap. mu held. */
static void insert(srv_grammars *gs, srv_grammar_ref *r)
{
    atomic_fetch_add(&r->refs, 1);
    push_front(gs, r);
    if (++gs->n_cached <= CACHE_ENTRIES)
        return;
    srv_grammar_ref *last = gs->head;
    while (last->next)
        last = last->next;
    unlink_ref(gs, last);
    gs->n_cached--;
    srv_grammar_ref_release(last);
}

/* ---- compiling ------------------------------------------------------------------- */

static int compile(srv_grammar_kind kind, const char *text, size_t len, mhla_grammar **g,
                   mhla_grammar_error *ge)
{
    switch (kind) {
    case SRV_GRAMMAR_GBNF: return mhla_grammar_from_gbnf(text, len, NULL, g, ge);
    case SRV_GRAMMAR_SCHEMA: return mhla_grammar_from_json_schema(text, len, g, ge);
    case SRV_GRAMMAR_TOOL_CALLS: return mhla_grammar_from_gbnf(text, len, "tool-calls", g, ge);
    default: return mhla_grammar_json_object(g, ge);
    }
}

/* The error of a grammar that does not compile: a 400 naming param, with
 * where (a position, a schema path) when known; a 500 when out of memory. */
static void compile_error(int rc, const mhla_grammar_error *ge, const char *param, srv_error *e)
{
    if (rc == MHLA_GRAMMAR_NOMEM) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory compiling the grammar");
        return;
    }
    char where[200] = ""; /* a GBNF message names its line and column itself */
    if (ge->path[0])
        snprintf(where, sizeof where, " (at %s)", ge->path);
    srv_error_set(e, SRV_ERR_INVALID, param, "%s%s%s",
                  rc == MHLA_GRAMMAR_LIMIT ? "too large: " : "", ge->msg, where);
}

static srv_grammar_ref *new_ref(srv_grammars *gs, srv_grammar_kind kind, const char *text,
                                size_t len, const char *param, srv_error *e)
{
    mhla_grammar *g = NULL;
    mhla_grammar_error ge = {.pos = -1};
    srv_grammar_ref *r = calloc(1, sizeof *r);
    double t0 = mhla_now();
    int rc = r ? compile(kind, text, len, &g, &ge) : MHLA_GRAMMAR_NOMEM;
    if (rc == 0)
        rc = mhla_grammar_tokens_create(g, gs->vocab, &r->tokens, &ge);
    mhla_grammar_free(g); /* the tokens keep their own reference */
    if (rc == 0 && !(r->key = malloc(len + 1)))
        rc = MHLA_GRAMMAR_NOMEM;
    if (rc) {
        compile_error(rc, &ge, param, e);
        if (r)
            mhla_grammar_tokens_free(r->tokens);
        free(r);
        return NULL;
    }
    srv_metrics_grammar_compiled(mhla_now() - t0);
    r->key[0] = (char)kind;
    memcpy(r->key + 1, text, len);
    r->key_len = len + 1;
    r->hash = fnv1a(r->key, r->key_len);
    atomic_init(&r->refs, 1);
    return r;
}

int srv_grammars_get(srv_grammars *gs, srv_grammar_kind kind, const char *text, size_t len,
                     const char *param, srv_grammar_ref **out, srv_error *e)
{
    *out = NULL;
    char *key = malloc(len + 1);
    if (!key) {
        srv_error_set(e, SRV_ERR_INTERNAL, NULL, "out of memory for the grammar");
        return -1;
    }
    key[0] = (char)kind;
    memcpy(key + 1, text, len);
    uint64_t h = fnv1a(key, len + 1);
    pthread_mutex_lock(&gs->mu);
    srv_grammar_ref *r = lookup(gs, h, key, len + 1);
    pthread_mutex_unlock(&gs->mu);
    free(key);
    int fresh = r == NULL;
    srv_metrics_grammar_lookup(!fresh);
    if (fresh && !(r = new_ref(gs, kind, text, len, param, e)))
        return -1;
    if (fresh) { /* the cache keeps it too (two requests racing compile it twice) */
        pthread_mutex_lock(&gs->mu);
        insert(gs, r);
        pthread_mutex_unlock(&gs->mu);
    }
    *out = r;
    return 0;
}

/* ---- a choice's mask ---------------------------------------------------------------- */

struct srv_row_grammar {
    mhla_grammar_matcher *m;
    uint64_t *bits;
    int n_vocab;
};

/* The matcher's allowed tokens now, into rg->bits. */
static int compute_bits(srv_row_grammar *rg, mhla_error *err)
{
    mhla_grammar_error ge = {.pos = -1};
    int n = mhla_grammar_matcher_mask(rg->m, rg->bits, &ge);
    if (n < 0) {
        err->code = n == MHLA_GRAMMAR_NOMEM ? MHLA_ERR_NOMEM : MHLA_ERR_INVALID;
        snprintf(err->msg, sizeof err->msg, "grammar: %s", ge.msg);
        return -1;
    }
    return 0;
}

/* The host sampler's way: forbidden logits to -inf. */
static int mask_apply(void *ctx, float *logits, int vocab, mhla_error *err)
{
    srv_row_grammar *rg = ctx;
    double t0 = mhla_now();
    if (compute_bits(rg, err))
        return -1;
    for (int i = 0; i < vocab; i++)
        if (i >= rg->n_vocab || !((rg->bits[i >> 6] >> (i & 63)) & 1u))
            logits[i] = -INFINITY;
    srv_metrics_grammar_mask(mhla_now() - t0);
    return 0;
}

/* The device sampler's way: the bitmask itself (ids past the grammar's
 * vocabulary forbidden, as mask_apply has them). */
static int mask_bits(void *ctx, uint64_t *bits, int vocab, mhla_error *err)
{
    srv_row_grammar *rg = ctx;
    double t0 = mhla_now();
    if (compute_bits(rg, err))
        return -1;
    size_t words = ((size_t)vocab + 63) / 64, own = ((size_t)rg->n_vocab + 63) / 64;
    memcpy(bits, rg->bits, (words < own ? words : own) * sizeof *bits);
    for (size_t w = own; w < words; w++)
        bits[w] = 0;
    if (vocab > rg->n_vocab && rg->n_vocab % 64) /* the grammar's last word's spare bits */
        bits[own - 1] &= (1ull << (rg->n_vocab % 64)) - 1;
    srv_metrics_grammar_mask(mhla_now() - t0);
    return 0;
}

static int mask_accept(void *ctx, int32_t token, mhla_error *err)
{
    srv_row_grammar *rg = ctx;
    mhla_grammar_error ge = {.pos = -1};
    int rc = mhla_grammar_matcher_accept(rg->m, token, &ge);
    if (rc) {
        err->code = rc == MHLA_GRAMMAR_NOMEM ? MHLA_ERR_NOMEM : MHLA_ERR_INVALID;
        snprintf(err->msg, sizeof err->msg, "grammar: token %d: %s", (int)token, ge.msg);
    }
    return rc ? -1 : 0;
}

int srv_row_grammar_create(srv_grammar_ref *ref, int n_vocab, srv_row_grammar **out,
                           mhla_token_mask *mask, char *err, size_t errlen)
{
    *out = NULL;
    srv_row_grammar *rg = calloc(1, sizeof *rg);
    mhla_grammar_error ge = {.pos = -1};
    if (!rg || !(rg->bits = calloc(((size_t)n_vocab + 63) / 64, sizeof *rg->bits)) ||
        mhla_grammar_matcher_create(ref->tokens, &rg->m, &ge)) {
        snprintf(err, errlen, "grammar: %s", rg && rg->bits ? ge.msg : "out of memory");
        srv_row_grammar_free(rg);
        return -1;
    }
    rg->n_vocab = n_vocab;
    *mask =
        (mhla_token_mask){.apply = mask_apply, .accept = mask_accept, .ctx = rg, .bits = mask_bits};
    *out = rg;
    return 0;
}

void srv_row_grammar_free(srv_row_grammar *rg)
{
    if (!rg)
        return;
    mhla_grammar_matcher_free(rg->m);
    free(rg->bits);
    free(rg);
}
