/*
 * Allocation failures, one at a time (SQLite's way): for n = 1, 2, 3, ... the
 * n-th allocation of a scenario fails (fault.h) and the scenario must either
 * succeed with the results of a run without injection, or fail cleanly: an
 * error whose code is MHLA_ERR_NOMEM (the engine), whose srv_error maps to
 * HTTP 500 (the server), or whose message says "out of memory" (APIs that
 * only have messages), with nothing leaked (LeakSanitizer, checked after
 * every n in a sanitized build) and no crash (the n is printed). The loop
 * ends at the first n whose fault never fired: every allocation the scenario
 * makes has then been failed once.
 *
 * usage: test_fault engine CHECKPOINT          model load, engine, prefill, decode
 *        test_fault engine_pool CHECKPOINT     the same with a state pool: prefix
 *                                              cache, resume, reservations, snapshots
 *        test_fault engine_threads CHECKPOINT  2 threads: the engine's thread pool
 *        test_fault engine_bf16 CHECKPOINT     bf16 weights (converted at load)
 *        test_fault engine_q8 CHECKPOINT       q8 weights, 2 threads
 *        test_fault tokenizer TOKENIZER_JSON   load, encode, decode, streaming decode
 *        test_fault tokenizer_sp DIR           the same on DIR/tokenizer.json with its
 *                                              tokenizer_config.json (SentencePiece style;
 *                                              tokenizer_metaspace: the same, another name)
 *        test_fault tokenizer_train -          BPE training on a small corpus
 *        test_fault codec CHECKPOINT TOKDIR    the server's text codecs (tokenizer.json in
 *                                              TOKDIR, the byte-level stand-in) and
 *                                              generation config
 *        test_fault params CHECKPOINT TOKDIR   request bodies parsed, an error body, metrics
 *        test_fault sched CHECKPOINT TOKDIR    one request through the scheduler
 *        test_fault sched_nopool CHECKPOINT TOKDIR   the same without a state pool
 *        test_fault sched_stream CHECKPOINT TOKDIR   the same streamed (SSE)
 *        test_fault template TEMPLATE          a chat template compiled and rendered with
 *                                              tools and tool calls
 *        test_fault chat_messages -            a chat body's messages checked and rewritten
 *        test_fault chat CHECKPOINT TOKDIR TEMPLATE SPECIALS_DIR
 *                                              the chat template loaded and compiled as at
 *                                              start, /apply-template with tools, a chat
 *                                              body parsed into its prompt
 */
#include "check.h"
#include "engine.h"
#include "fault.h"
#include "template.h"
#ifdef FAULT_WITH_SERVER
#include "server_internal.h"
#include <cJSON.h>
#endif
#include "tokenizer.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FAULT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FAULT_ASAN 1
#endif
#endif
#ifdef FAULT_ASAN
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>
#endif

/* What a scenario produced, compared with a run without injection. */
typedef struct {
    char text[4096];
    size_t len;
} result;

/* A scenario's outcome. */
enum { RUN_OK = 0, RUN_NOMEM = 1, RUN_BAD = -1 };

static const char *scenario;
static result base;             /* the results of a run without injection */
static volatile long current_n; /* for the crash report */
static int fired_before_disarm; /* a scenario that turned injection off itself */
static double time_factor = 1;
static double request_limit_s = 60; /* set from the run without injection */

/* ---- reporting a crash with its n ---------------------------------------- */

static void say_n(void)
{
    if (current_n < 0)
        return;
    char b[160];
    int k = snprintf(b, sizeof b, "FAIL fault.%s: crashed with allocation %ld failing\n",
                     scenario ? scenario : "?", current_n);
    if (k > 0 && write(2, b, (size_t)k) < 0)
        return;
}

#ifndef FAULT_ASAN
static void on_signal(int sig)
{
    say_n();
    signal(sig, SIG_DFL);
    raise(sig);
}
#endif

static void catch_crashes(void)
{
#ifdef FAULT_ASAN
    __sanitizer_set_death_callback(say_n);
#else
    int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        signal(sigs[i], on_signal);
#endif
}

/* ---- the checks on a failure --------------------------------------------- */

static int engine_nomem(const mhla_error *e, const char *what)
{
    if (e->code == MHLA_ERR_NOMEM && e->msg[0])
        return RUN_NOMEM;
    fprintf(stderr, "FAIL fault.%s n=%ld: %s failed with code %d, not MHLA_ERR_NOMEM: %s\n",
            scenario, current_n, what, (int)e->code, e->msg);
    return RUN_BAD;
}

static int msg_nomem(const char *msg, const char *what)
{
    if (strstr(msg, "out of memory"))
        return RUN_NOMEM;
    fprintf(stderr, "FAIL fault.%s n=%ld: %s failed without saying out of memory: '%s'\n", scenario,
            current_n, what, msg);
    return RUN_BAD;
}

/* ---- results ------------------------------------------------------------- */

static int same(const result *a, const result *b)
{
    return a->len == b->len && !memcmp(a->text, b->text, a->len);
}

static void put(result *r, const void *s, size_t n)
{
    if (r->len + n < sizeof r->text) {
        memcpy(r->text + r->len, s, n);
        r->len += n;
    }
}

static void put_ints(result *r, const int32_t *v, int n)
{
    char b[16];
    for (int i = 0; i < n; i++)
        put(r, b, (size_t)snprintf(b, sizeof b, "%d ", (int)v[i]));
}

/* ---- scenario: the engine ------------------------------------------------- */

#define PROMPT 40
#define DECODE 6

static const char *ckpt;
static int with_pool;     /* engine_pool: a state pool, and a snapshot saved and loaded */
static int n_threads = 1; /* engine_threads, engine_q8: 2 */
static mhla_weight_dtype weights = MHLA_WEIGHTS_F32;
static char snapshot_path[256];

/* Prefill seq with tokens[from..n), sampling the next token into *tok, then
 * DECODE steps; every token goes to out. */
static int generate(mhla_engine *eng, mhla_seq *seq, mhla_sampler *smp, const int32_t *tokens,
                    int from, int n, int vocab, result *out)
{
    mhla_error e = {0};
    mhla_sample_slot slot = {.sampler = smp, .at = n - from - 1, .n_top = 2};
    float *logits = malloc((size_t)vocab * sizeof *logits);
    if (!logits)
        return RUN_NOMEM;
    /* the prompt's last position's logits come back beside the slot's token */
    mhla_batch_item it = {.seq = seq,
                          .tokens = tokens + from,
                          .n_tokens = n - from,
                          .logits_from = n - from - 1,
                          .logits = logits,
                          .sample = &slot,
                          .n_samples = 1};
    int rc = RUN_OK;
    int32_t next = 0;
    for (int step = 0; step <= DECODE && rc == RUN_OK; step++) {
        if (mhla_engine_step(eng, &it, 1, &e))
            rc = engine_nomem(&e, "mhla_engine_step");
        else if (slot.status)
            rc = engine_nomem(&slot.err, "the step's sampling");
        if (rc != RUN_OK)
            break;
        int32_t t = slot.token;
        put_ints(out, &t, 1);
        char b[32];
        put(out, b, (size_t)snprintf(b, sizeof b, "%.4f %d|", slot.token_logprob, slot.top[0].id));
        if (step == 0)
            put(out, b, (size_t)snprintf(b, sizeof b, "%.5f|", logits[t]));
        next = t;
        slot.at = 0;
        it = (mhla_batch_item){.seq = seq,
                               .tokens = &next,
                               .n_tokens = 1,
                               .logits_from = 1,
                               .sample = &slot,
                               .n_samples = 1};
    }
    free(logits);
    return rc;
}

static int make_seq(const mhla_model *m, mhla_engine *eng, mhla_seq **s, const int32_t *tokens,
                    int n, int *pos)
{
    mhla_error e = {0};
    *pos = 0;
    if (!with_pool)
        return mhla_seq_create(m, s, &e) ? engine_nomem(&e, "mhla_seq_create") : RUN_OK;
    if (mhla_engine_seq_create(eng, s, &e))
        return engine_nomem(&e, "mhla_engine_seq_create");
    int rc = *pos = mhla_seq_match_prefix(*s, tokens, n, &e);
    if (rc >= 0)
        rc = mhla_seq_reserve(*s, n + DECODE + 1, &e);
    if (rc < 0) {
        mhla_seq_free(*s);
        *s = NULL;
        return engine_nomem(&e, "reserving or matching a prefix");
    }
    return RUN_OK;
}

static int run_engine(result *out)
{
    mhla_error e = {0};
    mhla_model *m = NULL;
    mhla_engine *eng = NULL;
    mhla_seq *s1 = NULL, *s2 = NULL, *s3 = NULL;
    mhla_sampler *smp = NULL;
    int rc = RUN_OK, pos = 0;
    mhla_model_options mo = {.weights = weights};
    if (mhla_model_load_with(ckpt, &mo, &m, &e))
        return engine_nomem(&e, "mhla_model_load_with");
    int vocab = mhla_model_config(m)->vocab_size;
    mhla_engine_options o = {.n_threads = n_threads,
                             .state_bytes = with_pool ? 8u << 20 : 0,
                             .resume_slots = 2};
    if (mhla_engine_create(m, &o, &eng, &e)) {
        rc = engine_nomem(&e, "mhla_engine_create");
        goto done;
    }
    int32_t tokens[PROMPT + 8];
    for (int i = 0; i < PROMPT + 8; i++)
        tokens[i] = (int32_t)((i * 7 + 3) % vocab);
    mhla_sampling_params sp;
    mhla_sampling_defaults(&sp);
    sp.temperature = 0.8f;
    sp.top_k = 20;
    sp.repetition_penalty = 1.1f;
    sp.seed = 5;
    if (mhla_sampler_create(&sp, vocab, tokens, PROMPT, &smp, &e)) {
        rc = engine_nomem(&e, "mhla_sampler_create");
        goto done;
    }
    /* one sequence fed the prompt, a clone of it decoding on, and (with the
     * pool: after the first is finished) one whose prompt extends the first's,
     * served by the prefix cache or the resume store. What the cache serves
     * may change under a failed allocation (it is a cache), the results not. */
    if ((rc = make_seq(m, eng, &s1, tokens, PROMPT, &pos)) != RUN_OK)
        goto done;
    if ((rc = generate(eng, s1, smp, tokens, pos, PROMPT, vocab, out)) != RUN_OK)
        goto done;
    if (mhla_seq_clone(s1, &s2, &e)) {
        rc = engine_nomem(&e, "mhla_seq_clone");
        goto done;
    }
    if ((rc = generate(eng, s2, smp, tokens, 0, 1, vocab, out)) != RUN_OK)
        goto done;
    if (with_pool) {
        mhla_seq_finish(s1);
        s1 = NULL;
    }
    if ((rc = make_seq(m, eng, &s3, tokens, PROMPT + 8, &pos)) != RUN_OK)
        goto done;
    if ((rc = generate(eng, s3, smp, tokens, pos, PROMPT + 8, vocab, out)) != RUN_OK || !with_pool)
        goto done;
    /* s3's state through a snapshot file into a fresh sequence, which decodes on */
    mhla_seq_free(s2);
    s2 = NULL;
    if (mhla_seq_save(s3, snapshot_path, &e)) {
        rc = engine_nomem(&e, "mhla_seq_save");
        goto done;
    }
    if (mhla_engine_seq_create(eng, &s2, &e)) {
        rc = engine_nomem(&e, "mhla_engine_seq_create");
        goto done;
    }
    if (mhla_seq_load(s2, snapshot_path, &e)) {
        rc = engine_nomem(&e, "mhla_seq_load");
        goto done;
    }
    rc = generate(eng, s2, smp, tokens, 0, 1, vocab, out);
done:
    mhla_seq_free(s3);
    mhla_seq_free(s2);
    mhla_seq_free(s1);
    mhla_sampler_free(smp);
    mhla_engine_free(eng);
    mhla_model_free(m);
    return rc;
}

/* ---- scenario: the tokenizer ----------------------------------------------- */

static char corpus_path[256], trained_path[256];

/* FNV-1a of a file's bytes into out; RUN_BAD when it cannot be read. */
static int put_file_hash(const char *path, result *out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return RUN_BAD;
    uint64_t h = 14695981039346656037ull;
    int c;
    while ((c = getc(f)) != EOF)
        h = (h ^ (uint64_t)c) * 1099511628211ull;
    fclose(f);
    char b[32];
    put(out, b, (size_t)snprintf(b, sizeof b, "%016llx|", (unsigned long long)h));
    return RUN_OK;
}

/* BPE training (300 ids) on a small corpus; the tokenizer.json it writes. */
static int run_tok_train(result *out)
{
    char err[256] = "";
    const char *files[] = {corpus_path};
    remove(trained_path);
    if (mhla_tok_train_bpe(files, 1, 300, trained_path, err, sizeof err))
        return msg_nomem(err, "mhla_tok_train_bpe");
    int rc = put_file_hash(trained_path, out);
    if (rc != RUN_OK)
        fprintf(stderr, "FAIL fault.%s n=%ld: training succeeded but wrote no %s\n", scenario,
                current_n, trained_path);
    return rc;
}

static void write_corpus(void)
{
    FILE *f = fopen(corpus_path, "w");
    if (!f)
        die("cannot write %s", corpus_path);
    for (int i = 0; i < 12; i++)
        fprintf(f,
                "The town had %d cafes, and the cafes in the town were open late. "
                "They went home when the \xe2\x82\xac%d coffee was gone.\n",
                i * 7, i);
    fclose(f);
}

static const char *tok_path, *tok_config; /* tok_config may be NULL */

static int run_tokenizer(result *out)
{
    /* an added special token, digits, a decomposed é (NFC), bytes past ASCII */
    static const char text[] = "<|user|>The 42 cafe\xcc\x81s, \xe2\x82\xac"
                               "5\xf0\x9f\x99\x82 in town.";
    char err[256] = "";
    mhla_tokenizer *tok = NULL;
    mhla_tok_stream *st = NULL;
    int32_t *ids = NULL;
    char *dec = NULL;
    size_t n = 0, len = 0;
    int rc = RUN_OK;
    if (mhla_tok_load(tok_path, tok_config, &tok, err, sizeof err))
        return msg_nomem(err, "mhla_tok_load");
    if (mhla_tok_encode(tok, text, sizeof text - 1, 1, &ids, &n, err, sizeof err)) {
        rc = msg_nomem(err, "mhla_tok_encode");
        goto done;
    }
    put_ints(out, ids, (int)n);
    for (int skip = 0; skip < 2; skip++) {
        if (mhla_tok_decode(tok, ids, n, skip, &dec, &len, err, sizeof err)) {
            rc = msg_nomem(err, "mhla_tok_decode");
            goto done;
        }
        put(out, dec, len);
        put(out, "|", 1);
        free(dec);
        dec = NULL;
    }
    if (mhla_tok_stream_new(tok, 1, &st, err, sizeof err)) {
        rc = msg_nomem(err, "mhla_tok_stream_new");
        goto done;
    }
    const char *piece;
    for (size_t i = 0; i <= n; i++) {
        int r = i < n ? mhla_tok_stream_push(st, ids[i], &piece, &len, err, sizeof err)
                      : mhla_tok_stream_finish(st, &piece, &len, err, sizeof err);
        if (r) {
            rc = msg_nomem(err, i < n ? "mhla_tok_stream_push" : "mhla_tok_stream_finish");
            goto done;
        }
        put(out, piece, len);
        put(out, "/", 1);
    }
done:
    mhla_tok_stream_free(st);
    free(ids);
    free(dec);
    mhla_tok_free(tok);
    return rc;
}

/* ---- scenario: a chat template compiled and rendered ----------------------- */

/* The context chat_render.c gives a template: messages as
 * srv_chat_messages_parse leaves them (content strings, arguments objects),
 * tools, add_generation_prompt, bos_token and eos_token. */
static const char tpl_context[] =
    "{\"messages\": ["
    "{\"role\": \"system\", \"content\": \"Be brief.\"},"
    "{\"role\": \"user\", \"content\": \"Weather in Oslo and in Lyon?\"},"
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": ["
    "{\"id\": \"a1b2c3d4e\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Oslo\", \"unit\": \"celsius\"}}},"
    "{\"id\": \"f5g6h7i8j\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"arguments\": {\"city\": \"Lyon\"}}}]},"
    "{\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", \"name\": \"get_weather\", "
    "\"content\": \"-3 C\"},"
    "{\"role\": \"tool\", \"tool_call_id\": \"f5g6h7i8j\", \"name\": \"get_weather\", "
    "\"content\": \"14 C\"},"
    "{\"role\": \"assistant\", \"content\": \"Oslo: -3 C. Lyon: 14 C.\"},"
    "{\"role\": \"user\", \"content\": \"And tomorrow in Oslo?\"}],"
    "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", "
    "\"description\": \"The weather in a city\", \"parameters\": {\"type\": \"object\", "
    "\"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": \"string\", "
    "\"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}],"
    "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";

static char *tpl_src;
static size_t tpl_len;
static cJSON *tpl_ctx;

/* A template call's failure must be MHLA_TPL_NOMEM saying out of memory. */
static int tpl_nomem(int rc, const char *err, const char *what)
{
    if (rc == MHLA_TPL_NOMEM)
        return msg_nomem(err, what);
    fprintf(stderr, "FAIL fault.%s n=%ld: %s failed with %d, not MHLA_TPL_NOMEM: %s\n", scenario,
            current_n, what, rc, err);
    return RUN_BAD;
}

static int run_template(result *out)
{
    mhla_tpl *tpl;
    char err[512] = "", *text;
    size_t len;
    int rc = mhla_tpl_compile(tpl_src, tpl_len, &tpl, err, sizeof err);
    if (rc)
        return tpl_nomem(rc, err, "mhla_tpl_compile");
    rc = mhla_tpl_render(tpl, tpl_ctx, NULL, &text, &len, err, sizeof err);
    mhla_tpl_free(tpl);
    if (rc)
        return tpl_nomem(rc, err, "mhla_tpl_render");
    put(out, text, len);
    free(text);
    return RUN_OK;
}

static void template_setup(const char *path)
{
    char err[512];
    if (mhla_read_file(path, 1 << 20, &tpl_src, &tpl_len, err, sizeof err))
        die("%s", err);
    if (!(tpl_ctx = cJSON_Parse(tpl_context)))
        die("the template scenario's context does not parse");
}

#ifdef FAULT_WITH_SERVER
/* ---- scenario: the server's text codecs and generation config -------------- */

static const char *codec_ckpt, *codec_tokdir;

/* Encodes, decodes and stream-decodes text through a codec made from dir. */
static int codec_round(const char *dir, int vocab, result *out)
{
    static const char text[] = "The 42 cafe\xcc\x81s, \xe2\x82\xac"
                               "5 each\xf0\x9f\x99\x82.";
    char err[256] = "";
    srv_codec *c;
    srv_codec_stream *st = NULL;
    int32_t *ids = NULL;
    char *dec = NULL;
    size_t len;
    int n, rc = RUN_OK;
    if (srv_codec_create(dir, vocab, &c, err, sizeof err))
        return msg_nomem(err, "srv_codec_create");
    int r = srv_codec_encode(c, text, sizeof text - 1, 1, &ids, &n, err, sizeof err);
    if (r) {
        rc = r == -2 ? msg_nomem(err, "srv_codec_encode") : RUN_BAD;
        goto done;
    }
    put_ints(out, ids, n);
    if (srv_codec_decode(c, ids, n, 1, &dec, &len, err, sizeof err)) {
        rc = msg_nomem(err, "srv_codec_decode");
        goto done;
    }
    put(out, dec, len);
    if (srv_codec_stream_new(c, &st, err, sizeof err)) {
        rc = msg_nomem(err, "srv_codec_stream_new");
        goto done;
    }
    const char *piece;
    for (int i = 0; i <= n; i++) {
        r = i < n ? srv_codec_stream_push(st, ids[i], &piece, &len, err, sizeof err)
                  : srv_codec_stream_finish(st, &piece, &len, err, sizeof err);
        if (r) {
            rc = msg_nomem(err, "the codec's streaming decode");
            goto done;
        }
        put(out, piece, len);
        put(out, "/", 1);
    }
done:
    srv_codec_stream_free(st);
    free(dec);
    free(ids);
    srv_codec_free(c);
    return rc;
}

static int run_codec(result *out)
{
    /* the tokenizer (the wide checkpoint's 1500 ids hold its 321), then the
     * byte-level stand-in of a directory without tokenizer.json, for the one
     * vocabulary it encodes text for (256 ids) */
    int rc = codec_round(codec_tokdir, 1500, out);
    if (rc == RUN_OK)
        rc = codec_round(codec_ckpt, 256, out);
    if (rc != RUN_OK)
        return rc;
    mhla_model *m;
    mhla_error e = {0};
    char err[256] = "";
    if (mhla_model_load(codec_ckpt, &m, &e))
        return engine_nomem(&e, "mhla_model_load");
    srv_gen_config g;
    if (srv_gen_config_load(codec_ckpt, mhla_model_config(m), &g, err, sizeof err))
        rc = msg_nomem(err, "srv_gen_config_load");
    else
        put_ints(out, g.eos, g.n_eos);
    mhla_model_free(m);
    return rc;
}

/* ---- scenario: a request through the scheduler ---------------------------- */

static mhla_model *sched_model;
static mhla_engine *sched_engine;
static srv_codec *sched_codec;
static srv_gen_config sched_gen;
static int sched_pool = 1;   /* sched_nopool: 0, sequences made as needed */
static int sched_stream = 0; /* sched_stream: the request streamed (sse.c) */

static const char request_body[] =
    "{\"prompt\": \"The town of 42 cafes\", \"max_tokens\": 5, \"n\": 2, \"logprobs\": 1, "
    "\"temperature\": 0.7, \"seed\": 3, \"stop\": [\"zq\"]}";
static const char stream_body[] =
    "{\"prompt\": \"The town of 42 cafes\", \"max_tokens\": 5, \"n\": 2, \"logprobs\": 1, "
    "\"temperature\": 0.7, \"seed\": 3, \"stop\": [\"zq\"], \"stream\": true, "
    "\"stream_options\": {\"include_usage\": true}}";

/* Waits until r is done, at most request_limit_s: a request that never ends
 * is a hang, reported and fatal. */
static void await(srv_req *r)
{
    double t0 = mhla_now();
    srv_req_lock(r);
    while (!r->done) {
        srv_req_wait(r, 0.05, NULL, NULL);
        if (!r->done && mhla_now() - t0 > request_limit_s) {
            fprintf(stderr, "FAIL fault.%s n=%ld: the request did not finish in %.0f s\n", scenario,
                    current_n, request_limit_s);
            _exit(1);
        }
    }
    srv_req_unlock(r);
}

/* The stream's client: connected until the request has run past its limit. */
static int stream_alive(void *ctx)
{
    int *hung = ctx;
    static double t0;
    if (*hung < 0) { /* the first ask of this stream */
        t0 = mhla_now();
        *hung = 0;
    }
    if (mhla_now() - t0 > request_limit_s)
        *hung = 1;
    return !*hung;
}

/* Every event of an SSE body: "data: " and a JSON object, or "data: [DONE]"
 * last. RUN_OK with [DONE], RUN_NOMEM without (the stream was cut short). */
static int check_events(const char *b, size_t n)
{
    int done = 0;
    for (size_t at = 0; at < n;) {
        const char *end = strstr(b + at, "\n\n");
        if (done || !end || strncmp(b + at, "data: ", 6)) {
            fprintf(stderr,
                    "FAIL fault.%s n=%ld: a malformed event in the stream at byte %zu: %.60s\n",
                    scenario, current_n, at, b + at);
            return RUN_BAD;
        }
        const char *data = b + at + 6;
        size_t len = (size_t)(end - data);
        if (len == 6 && !strncmp(data, "[DONE]", 6)) {
            done = 1;
        } else {
            cJSON *j = cJSON_ParseWithLength(data, len);
            int ok = cJSON_IsObject(j);
            cJSON_Delete(j);
            if (!ok) {
                fprintf(stderr, "FAIL fault.%s n=%ld: an event that is no JSON object: %.*s\n",
                        scenario, current_n, (int)len, data);
                return RUN_BAD;
            }
        }
        at = (size_t)(end + 2 - b);
    }
    return done ? RUN_OK : RUN_NOMEM;
}

/* Streams r (whose reference the writer takes over) to its end. */
static int stream(srv_req *r)
{
    static char body[1 << 16];
    size_t n = 0;
    long k;
    int hung = -1;
    srv_sse *sse;
    if (srv_sse_create(r, "fault", sched_codec, stream_alive, &hung, &sse)) {
        srv_req_abandon(r); /* -1 only when out of memory */
        return RUN_NOMEM;
    }
    while ((k = srv_sse_read(sse, body + n, sizeof body - 1 - n)) > 0)
        n += (size_t)k;
    body[n] = 0;
    srv_sse_free(sse);
    if (hung > 0) {
        fprintf(stderr, "FAIL fault.%s n=%ld: the stream did not end in %.0f s\n", scenario,
                current_n, request_limit_s);
        _exit(1);
    }
    return check_events(body, n);
}

/* The response bodies of a finished request: NULL only when out of memory. */
static int render(const srv_req *r)
{
    const srv_choice *c = &r->choices[0];
    char *body[3] = {srv_completion_json(r, "fault", sched_codec),
                     srv_chunk_json(r, "fault", sched_codec, 0, c->text.p, c->text.len, 0, c->n_ids,
                                    c->finish_reason),
                     srv_usage_chunk_json(r, "fault")};
    int rc = RUN_OK;
    for (int i = 0; i < 3; i++) {
        if (!body[i])
            rc = RUN_NOMEM;
        free(body[i]);
    }
    return rc;
}

/* One request through s: RUN_OK with its results in out, RUN_NOMEM when it
 * failed with a 500 error saying out of memory. */
static int one_request(srv_sched *s, result *out)
{
    srv_limits lim = {.codec = sched_codec,
                      .gen = &sched_gen,
                      .model_name = "fault",
                      .vocab_size = mhla_model_config(sched_model)->vocab_size,
                      .max_positions = mhla_model_config(sched_model)->max_positions,
                      .max_running = 8};
    srv_params p;
    memset(&p, 0, sizeof p);
    srv_error se = {0};
    const char *req = sched_stream ? stream_body : request_body;
    if (srv_params_parse(req, strlen(req), &lim, &p, &se)) {
        srv_params_free(&p);
        if (srv_error_status(se.code) != 500) {
            fprintf(stderr, "FAIL fault.%s n=%ld: srv_params_parse failed with HTTP %d: %s\n",
                    scenario, current_n, srv_error_status(se.code), se.message);
            return RUN_BAD;
        }
        return msg_nomem(se.message, "srv_params_parse");
    }
    srv_req *r;
    if (srv_req_create(&p, sched_codec, &r, &se)) /* takes p over, also on failure */
        return msg_nomem(se.message, "srv_req_create");
    int sub = srv_sched_submit(s, r);
    if (sub != SRV_SUBMIT_OK) {
        fprintf(stderr, "FAIL fault.%s n=%ld: srv_sched_submit refused the request (%d)\n",
                scenario, current_n, sub);
        srv_req_release(r);
        return RUN_BAD;
    }
    int rc = RUN_OK;
    if (sched_stream) {
        srv_req_retain(r); /* ours, beside the stream's */
        rc = stream(r);
    }
    await(r); /* a stream cut short has cancelled r: it ends at the next step */
    srv_req_lock(r);
    if (rc != RUN_BAD && r->failed) {
        if (srv_error_status(r->err_code) != 500) {
            fprintf(stderr, "FAIL fault.%s n=%ld: the request failed with HTTP %d: %s\n", scenario,
                    current_n, srv_error_status(r->err_code), r->err);
            rc = RUN_BAD;
        } else {
            rc = msg_nomem(r->err, "the request");
        }
    } else if (rc == RUN_OK && (sched_stream || (rc = render(r)) == RUN_OK)) {
        /* streamed or not, the choices hold what the client was sent */
        for (int i = 0; i < r->n_choices; i++) {
            const srv_choice *c = &r->choices[i];
            put(out, c->text.p ? c->text.p : "", c->text.len);
            put(out, "|", 1);
            put_ints(out, c->ids, c->n_ids);
            const char *fr = c->finish_reason ? c->finish_reason : "?";
            put(out, fr, strlen(fr));
            put(out, "|", 1);
        }
    }
    srv_req_unlock(r);
    srv_req_release(r);
    return rc;
}

static int run_sched(result *out)
{
    srv_sched_options c = {.engine = sched_engine,
                           .model = sched_model,
                           .codec = sched_codec,
                           .gen = &sched_gen,
                           .state_pool = sched_pool,
                           .max_batch_tokens = 16, /* the prompt in two chunks or more */
                           .max_running = 8,
                           .max_queue = 8};
    char err[256] = "";
    srv_sched *s;
    if (srv_sched_create(&c, &s, err, sizeof err))
        return msg_nomem(err, "srv_sched_create");
    int rc = one_request(s, out);
    if (rc != RUN_BAD) {
        /* whatever happened to that request, the next one is served */
        long armed = current_n;
        fired_before_disarm = fault_fired();
        fault_fail_at(0);
        result again = {0};
        if (one_request(s, &again) != RUN_OK) {
            fprintf(stderr, "FAIL fault.%s n=%ld: the request after it failed\n", scenario, armed);
            rc = RUN_BAD;
        } else if (!same(&again, base.len ? &base : out)) {
            fprintf(stderr, "FAIL fault.%s n=%ld: the request after it gave other results\n",
                    scenario, armed);
            rc = RUN_BAD;
        }
    }
    srv_sched_free(s);
    return rc;
}

/* ---- scenario: request parsing, error bodies, metrics ---------------------- */

static const char *const param_bodies[] = {
    "{\"model\": \"fault\", \"prompt\": [\"The town\", [5, 6, 7], \"cafe\xcc\x81s\"], "
    "\"max_tokens\": 3, \"n\": 2, \"stop\": [\"x\", \"yz\", \"\xe2\x82\xac\"], "
    "\"logit_bias\": {\"5\": 1.5, \"7\": -100}, \"user\": \"u1\", \"seed\": 9}",
    "{\"prompt\": [4, 5, 6], \"echo\": true, \"logprobs\": 2, \"stop\": \"zz\", "
    "\"stream\": true, \"stream_options\": {\"include_usage\": true}}",
    "{\"prompt\": [\"a\", \"b\"], \"presence_penalty\": 0.5, \"top_k\": 4}",
};

static void put_params(const srv_params *p, result *out)
{
    char b[64];
    put(out, b,
        (size_t)snprintf(b, sizeof b, "%d %d %d %d %d|", p->n_prompts, p->n, p->n_stop, p->n_bias,
                         p->logprobs));
    for (int i = 0; i < p->n_prompts; i++)
        put_ints(out, p->prompts[i].ids, p->prompts[i].n);
    for (int i = 0; i < p->n_stop; i++)
        put(out, p->stop[i], strlen(p->stop[i]));
    put(out, p->model ? p->model : "-", strlen(p->model ? p->model : "-"));
    put(out, p->user ? p->user : "-", strlen(p->user ? p->user : "-"));
}

static int run_params(result *out)
{
    srv_limits lim = {.codec = sched_codec,
                      .gen = &sched_gen,
                      .model_name = "fault",
                      .vocab_size = mhla_model_config(sched_model)->vocab_size,
                      .max_positions = mhla_model_config(sched_model)->max_positions,
                      .max_running = 8};
    for (size_t k = 0; k < sizeof param_bodies / sizeof *param_bodies; k++) {
        srv_params p;
        memset(&p, 0, sizeof p);
        srv_error se = {0};
        int rc = srv_params_parse(param_bodies[k], strlen(param_bodies[k]), &lim, &p, &se);
        if (rc == 0)
            put_params(&p, out);
        srv_params_free(&p);
        if (rc && srv_error_status(se.code) != 500) {
            fprintf(stderr, "FAIL fault.%s n=%ld: srv_params_parse failed with HTTP %d: %s\n",
                    scenario, current_n, srv_error_status(se.code), se.message);
            return RUN_BAD;
        }
        if (rc)
            return msg_nomem(se.message, "srv_params_parse");
    }
    srv_error e;
    srv_error_set(&e, SRV_ERR_FULL, "prompt", "state memory full: %d pages", 7);
    char *body[2] = {srv_error_json(&e), srv_metrics_render()};
    int rc = body[0] && body[1] ? RUN_OK : RUN_NOMEM;
    if (body[0])
        put(out, body[0], strlen(body[0]));
    free(body[0]);
    free(body[1]);
    return rc;
}

static void sched_setup(const char *dir, const char *tokdir)
{
    mhla_error e = {0};
    char err[256];
    mhla_engine_options o = {.n_threads = 1,
                             .state_bytes = sched_pool ? 8u << 20 : 0,
                             .resume_slots = 2};
    srv_log_set_level(MHLA_LOG_OFF); /* the failed requests are the point, not news */
    if (mhla_model_load(dir, &sched_model, &e) ||
        mhla_engine_create(sched_model, &o, &sched_engine, &e))
        die_err("model", &e);
    const mhla_config *cfg = mhla_model_config(sched_model);
    if (srv_codec_create(tokdir, cfg->vocab_size, &sched_codec, err, sizeof err) ||
        srv_gen_config_load(dir, cfg, &sched_gen, err, sizeof err))
        die("%s", err);
}

/* ---- scenario: the chat path (messages, template, /apply-template, params) -- */

/* Content parts, a system message as parts, tool calls with 9-character ids
 * (Mistral's templates refuse others), their arguments as JSON strings. */
#define CHAT_MESSAGES                                                                              \
    "\"messages\": ["                                                                              \
    "{\"role\": \"system\", \"content\": [{\"type\": \"text\", \"text\": \"Be brief.\"}, "         \
    "{\"type\": \"text\", \"text\": \"Use the tools.\"}]},"                                        \
    "{\"role\": \"user\", \"content\": \"Weather in Oslo and in Lyon?\"},"                         \
    "{\"role\": \"assistant\", \"content\": null, \"tool_calls\": ["                               \
    "{\"id\": \"a1b2c3d4e\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "   \
    "\"arguments\": \"{\\\"city\\\": \\\"Oslo\\\", \\\"unit\\\": \\\"celsius\\\"}\"}},"            \
    "{\"id\": \"f5g6h7i8j\", \"type\": \"function\", \"function\": {\"name\": \"get_weather\", "   \
    "\"arguments\": \"{\\\"city\\\": \\\"Lyon\\\"}\"}}]},"                                         \
    "{\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", \"name\": \"get_weather\", "            \
    "\"content\": \"-3 C\"},"                                                                      \
    "{\"role\": \"tool\", \"tool_call_id\": \"f5g6h7i8j\", \"name\": \"get_weather\", "            \
    "\"content\": [{\"type\": \"text\", \"text\": \"14 C\"}]},"                                    \
    "{\"role\": \"assistant\", \"content\": \"Oslo: -3 C. Lyon: 14 C.\"},"                         \
    "{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"And tomorrow\"}, "        \
    "{\"type\": \"text\", \"text\": \"in Oslo?\"}]}]"
#define CHAT_TOOLS                                                                                 \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "        \
    "\"The weather in a city\", \"parameters\": {\"type\": \"object\", \"properties\": {"          \
    "\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", "  \
    "\"fahrenheit\"]}}, \"required\": [\"city\"]}}},"                                              \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {"            \
    "\"type\": \"object\", \"properties\": {\"zone\": {\"type\": \"string\"}}}}}]"

static const char chat_apply_body[] =
    "{" CHAT_MESSAGES ", \"tools\": " CHAT_TOOLS ", \"chat_template_kwargs\": {\"extra\": 1}}";
static const char chat_params_body[] =
    "{" CHAT_MESSAGES ", \"tools\": " CHAT_TOOLS ", \"tool_choice\": \"auto\", "
    "\"max_tokens\": 3, \"chat_template_kwargs\": {\"extra\": 1}}";
/* Replies with content and two calls, as the stop strings release them:
 * hermes, then the template's own format (mistral). */
static const char *const tool_reply[] = {
    "Checking both.\n<tool",
    "_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": ",
    "\"Oslo\"}}\n</tool_call>\n<tool_call>{\"name\": \"get_time\", \"arguments\": {}}",
    "</tool_call> done",
    NULL,
    "Both. [TOOL_",
    "CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}, ",
    "{\"name\": \"get_time\", \"arguments\": {}}]",
    NULL};

static const char *chat_template_path; /* the template file (template, chat) */
static const char *chat_specials_dir;  /* its tokenizer_config.json: bos and eos (chat) */

/* A server error must be a 500 saying out of memory. */
static int srv_nomem(const srv_error *se, const char *what)
{
    if (srv_error_status(se->code) != 500) {
        fprintf(stderr, "FAIL fault.%s n=%ld: %s failed with HTTP %d: %s\n", scenario, current_n,
                what, srv_error_status(se->code), se->message);
        return RUN_BAD;
    }
    return msg_nomem(se->message, what);
}

/* Puts a cJSON value's text; cJSON's printing may itself run out of memory. */
static int put_json(const cJSON *j, result *out)
{
    char *text = cJSON_PrintUnformatted(j);
    if (!text)
        return RUN_NOMEM;
    put(out, text, strlen(text));
    cJSON_free(text);
    return RUN_OK;
}

static int run_chat_messages(result *out)
{
    cJSON *root = cJSON_Parse(chat_apply_body), *msgs = NULL;
    if (!root)
        return RUN_NOMEM; /* cJSON's own parse, out of memory: the body is valid */
    srv_error se = {0};
    int rc = srv_chat_messages_parse(root, &msgs, &se) ? srv_nomem(&se, "srv_chat_messages_parse")
                                                       : put_json(msgs, out);
    cJSON_Delete(msgs);
    cJSON_Delete(root);
    return rc;
}

/* /apply-template's render of chat_apply_body (tools and kwargs), then
 * chat_params_body parsed into its prompt's ids, both through cr. */
static int chat_requests(const srv_chat_render *cr, result *out)
{
    cJSON *root = cJSON_Parse(chat_apply_body);
    if (!root)
        return RUN_NOMEM;
    char *text = NULL;
    size_t len = 0;
    srv_error se = {0};
    int rc = srv_chat_apply_template(cr, root, &text, &len, &se);
    cJSON_Delete(root);
    if (rc) {
        free(text);
        return srv_nomem(&se, "srv_chat_apply_template");
    }
    put(out, text, len);
    free(text);
    srv_limits lim = {.codec = sched_codec,
                      .gen = &sched_gen,
                      .model_name = "fault",
                      .vocab_size = mhla_model_config(sched_model)->vocab_size,
                      .max_positions = 1 << 16, /* the prompt is parsed, never run */
                      .max_running = 8,
                      .chat = cr};
    srv_params p;
    memset(&p, 0, sizeof p);
    rc = srv_chat_params_parse(chat_params_body, strlen(chat_params_body), &lim, &p, &se);
    if (rc == 0)
        put_params(&p, out);
    srv_params_free(&p);
    return rc ? srv_nomem(&se, "srv_chat_params_parse") : RUN_OK;
}

/* The reply's pieces from tool_reply[*at] to its NULL through the parser. */
static int parse_tool_reply(srv_tool_format f, size_t *at, result *out)
{
    srv_tool_parser *tp = srv_tool_parser_new(f);
    cJSON *calls = cJSON_CreateArray();
    mhla_buf content = {0};
    int rc = !tp || !calls;
    for (; tool_reply[*at]; ++*at)
        rc = rc || srv_tool_feed(tp, tool_reply[*at], strlen(tool_reply[*at]), &content, calls);
    ++*at;
    rc = rc || srv_tool_finish(tp, &content, calls);
    if (!rc) {
        put(out, content.p ? content.p : "", content.len);
        rc = put_json(calls, out);
    } else {
        rc = RUN_NOMEM;
    }
    mhla_buf_free(&content);
    cJSON_Delete(calls);
    srv_tool_parser_free(tp);
    return rc;
}

/* The server's start (the template read and compiled, its specials read),
 * then two chat requests and a reply's tool calls. */
static int run_chat(result *out)
{
    srv_chat_template t;
    srv_chat_render cr;
    char err[512] = "";
    if (srv_chat_template_load(NULL, chat_template_path, &t, err, sizeof err))
        return msg_nomem(err, "srv_chat_template_load");
    int rc = srv_chat_render_init(&cr, &t, chat_specials_dir, -1, err, sizeof err);
    srv_chat_template_free(&t);
    if (rc)
        return msg_nomem(err, "srv_chat_render_init");
    rc = chat_requests(&cr, out);
    size_t at = 0;
    if (rc == RUN_OK)
        rc = parse_tool_reply(SRV_TOOLS_HERMES, &at, out);
    if (rc == RUN_OK)
        rc = parse_tool_reply(cr.tool_format, &at, out);
    srv_chat_render_free(&cr);
    return rc;
}

/* The server's cJSON hooks, as at start: their malloc is the wrapped one
 * (util.c is linked in here), so the chat path's cJSON objects fail one at
 * a time too, and a parse knows when it ran out of memory. */
static void cjson_through_wrap(void) { srv_json_hooks_install(); }
#endif

/* ---- the loop -------------------------------------------------------------- */

/* LeakSanitizer over everything allocated and not freed, in a sanitized build
 * (elsewhere leaks go unseen: `make test` runs these tests sanitized). A check
 * takes a while, so it runs every LEAK_EVERY n; its report's stacks name the
 * allocation, the n is known to that window. */
#ifdef FAULT_ASAN
#define LEAK_EVERY 32
static long leak_checked; /* the last n checked */
#endif

static void leak_check(int now)
{
#ifdef FAULT_ASAN
    if (!now && current_n - leak_checked < LEAK_EVERY)
        return;
    if (__lsan_do_recoverable_leak_check()) {
        fprintf(stderr,
                "FAIL fault.%s: memory leaked (above) with allocation n failing, %ld < n <= %ld\n",
                scenario, leak_checked, current_n);
        current_n = -1; /* nothing more to report at exit */
        exit(1);
    }
    leak_checked = current_n;
#else
    (void)now;
#endif
}

static int loop(int (*run)(result *))
{
    current_n = 0;
    fault_fail_at(0);
    double t0 = mhla_now();
    if (run(&base) != RUN_OK)
        die("the scenario fails without injection");
    double t_run = mhla_now() - t0;
    long count = fault_count();
    /* a request may take this long before it is a hang: the work's own time,
     * many times over (a busy machine, a sanitizer), never a fixed short wall */
    request_limit_s = (10 + 200 * t_run) * time_factor;
    /* the results of a second run must be the same, or nothing can be compared */
    result again = {0};
    if (run(&again) != RUN_OK || !same(&again, &base))
        die("two runs without injection differ");
    leak_check(1);

    long survived = 0, succeeded = 0;
    for (long n = 1;; n++) {
        current_n = n;
        result got = {0};
        fired_before_disarm = 0;
        fault_fail_at(n);
        int rc = run(&got);
        int fired = fault_fired() || fired_before_disarm;
        fault_fail_at(0);
        if (rc == RUN_BAD)
            return 1;
        leak_check(!fired);
        if (!fired) {
            if (rc != RUN_OK) {
                fprintf(stderr, "FAIL fault.%s n=%ld: failed with no allocation failing\n",
                        scenario, n);
                return 1;
            }
            break; /* past the last allocation: every one has been failed */
        }
        if (rc == RUN_OK) {
            /* the failure was absorbed: the results must not have changed */
            if (!same(&got, &base)) {
                fprintf(stderr, "FAIL fault.%s n=%ld: succeeded with other results\n", scenario, n);
                fprintf(stderr, "  without injection: %.*s\n  with:              %.*s\n",
                        (int)base.len, base.text, (int)got.len, got.text);
                return 1;
            }
            succeeded++;
        }
        survived++;
        if (n > 4 * count + 1000) {
            fprintf(stderr, "FAIL fault.%s: still allocating at n=%ld (a run makes %ld)\n",
                    scenario, n, count);
            return 1;
        }
    }
    printf("fault.%s: %ld allocation points failed one at a time, all clean "
           "(%ld absorbed with the same results; %ld allocations in a run, %.3f s)\n",
           scenario, survived, succeeded, count, t_run);
    return survived > 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *tf = getenv("MHLA_TEST_TIME_FACTOR");
    if (tf && atof(tf) > 0)
        time_factor = atof(tf);
    if (argc < 3)
        die("usage: test_fault engine|engine_pool|tokenizer|sched PATH [TOKDIR]");
    scenario = argv[1];
    catch_crashes();
    if (!strncmp(scenario, "engine", 6)) {
        ckpt = argv[2];
        with_pool = !strcmp(scenario, "engine_pool");
        if (!strcmp(scenario, "engine_q8")) {
            weights = MHLA_WEIGHTS_Q8;
            n_threads = 2;
        } else if (!strcmp(scenario, "engine_bf16")) {
            weights = MHLA_WEIGHTS_BF16;
        } else if (!strcmp(scenario, "engine_threads")) {
            n_threads = 2;
        } else if (strcmp(scenario, "engine") && !with_pool) {
            die("unknown scenario '%s'", scenario);
        }
        const char *tmp = getenv("TMPDIR");
        snprintf(snapshot_path, sizeof snapshot_path, "%s/test_fault_%d.snapshot",
                 tmp && *tmp ? tmp : "/tmp", (int)getpid());
        failures += loop(run_engine);
        remove(snapshot_path);
    } else if (!strcmp(scenario, "tokenizer")) {
        tok_path = argv[2];
        failures += loop(run_tokenizer);
    } else if (!strcmp(scenario, "tokenizer_sp") || !strcmp(scenario, "tokenizer_metaspace")) {
        static char json[512], config[512];
        snprintf(json, sizeof json, "%s/tokenizer.json", argv[2]);
        snprintf(config, sizeof config, "%s/tokenizer_config.json", argv[2]);
        tok_path = json;
        tok_config = config;
        failures += loop(run_tokenizer);
    } else if (!strcmp(scenario, "template")) {
        template_setup(argv[2]);
        failures += loop(run_template);
        cJSON_Delete(tpl_ctx);
        free(tpl_src);
    } else if (!strcmp(scenario, "tokenizer_train")) {
        const char *tmp = getenv("TMPDIR");
        tmp = tmp && *tmp ? tmp : "/tmp";
        snprintf(corpus_path, sizeof corpus_path, "%s/test_fault_%d.txt", tmp, (int)getpid());
        snprintf(trained_path, sizeof trained_path, "%s/test_fault_%d.json", tmp, (int)getpid());
        write_corpus();
        failures += loop(run_tok_train);
        remove(corpus_path);
        remove(trained_path);
#ifdef FAULT_WITH_SERVER
    } else if (!strcmp(scenario, "codec") && argc == 4) {
        codec_ckpt = argv[2];
        codec_tokdir = argv[3];
        failures += loop(run_codec);
    } else if (!strcmp(scenario, "chat_messages")) {
        cjson_through_wrap();
        failures += loop(run_chat_messages);
    } else if (!strcmp(scenario, "chat") && argc == 6) {
        cjson_through_wrap();
        chat_template_path = argv[4];
        chat_specials_dir = argv[5];
        setenv("MHLA_TPL_FAKE_TIME", "1750000000", 1); /* strftime_now: one date for all runs */
        sched_setup(argv[2], argv[3]);
        failures += loop(run_chat);
        srv_codec_free(sched_codec);
        mhla_engine_free(sched_engine);
        mhla_model_free(sched_model);
    } else if (!strcmp(scenario, "params") && argc == 4) {
        sched_setup(argv[2], argv[3]);
        failures += loop(run_params);
        srv_codec_free(sched_codec);
        mhla_engine_free(sched_engine);
        mhla_model_free(sched_model);
    } else if (!strncmp(scenario, "sched", 5) && argc == 4) {
        if (!strcmp(scenario, "sched_nopool"))
            sched_pool = 0;
        else if (!strcmp(scenario, "sched_stream"))
            sched_stream = 1;
        else if (strcmp(scenario, "sched"))
            die("unknown scenario '%s'", scenario);
        sched_setup(argv[2], argv[3]);
        failures += loop(run_sched);
        srv_codec_free(sched_codec);
        mhla_engine_free(sched_engine);
        mhla_model_free(sched_model);
#endif
    } else {
        die("unknown scenario '%s'", scenario);
    }
    return failures ? 1 : 0;
}
