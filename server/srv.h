/*
 * srv.h — types shared by the server's files (private to server/).
 */
#ifndef MHLA_SRV_H
#define MHLA_SRV_H

#include "engine.h"
#include "server.h"
#include "text_codec.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- util.c ---------------------------------------------------------------- */

typedef struct {
    char *data; /* always NUL-terminated when non-NULL */
    size_t len, cap;
} srv_buf;

int srv_buf_append(srv_buf *b, const void *p, size_t n);
int srv_buf_appendf(srv_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void srv_buf_free(srv_buf *b);
double srv_now(void);       /* monotonic seconds */
double srv_wall_time(void); /* unix seconds */
/* Constant-time equality of two strings (time depends on the lengths only). */
int srv_ct_equal(const char *a, const char *b);
/* Random 64-bit value from the OS (falls back to time). */
uint64_t srv_random_u64(void);

/* ---- log.c ----------------------------------------------------------------- */

void srv_log_set_level(mhla_log_level lvl);
int srv_log_enabled(mhla_log_level lvl);
/* One JSON line on stderr: {"ts":..,"level":..,"event":event, fields...}.
 * fields (may be NULL) is a cJSON object; it is consumed. */
struct cJSON;
void srv_log(mhla_log_level lvl, const char *event, struct cJSON *fields);
void srv_logf(mhla_log_level lvl, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- metrics.c ------------------------------------------------------------- */

enum { SRV_HIST_TTFT, SRV_HIST_ITL, SRV_HIST_E2E, SRV_HIST_COUNT };

void srv_metrics_init(void);
void srv_metrics_status(int http_status);
void srv_metrics_finish(const char *reason); /* stop, length, cancelled, error, timeout */
void srv_metrics_tokens(long prompt, long generated);
void srv_metrics_gauges(int running_reqs, int waiting_reqs, int running_seqs, size_t state_bytes);
void srv_metrics_state(const mhla_state_stats *st); /* the engine's state pool */
void srv_metrics_device(const mhla_device_stats *st); /* GPU engines only */
void srv_metrics_observe(int hist, double seconds);
void srv_metrics_step(int n_items, int n_tokens);
void srv_metrics_cpu_isa(const char *path); /* the CPU kernels' instruction-set path */
/* Prometheus text exposition; the caller frees the result. NULL when out of memory. */
char *srv_metrics_render(void);

/* ---- gen_config.c: generation_config.json ---------------------------------- */

#define SRV_MAX_EOS 8

typedef struct {
    int32_t eos[SRV_MAX_EOS]; /* ids that end a choice (unless ignore_eos) */
    int n_eos;
    /* request defaults: temperature, top_p, top_k, min_p, repetition_penalty
     * from generation_config.json, OpenAI's defaults otherwise */
    mhla_sampling_params defaults;
    const char *source; /* where the eos ids came from, for the log */
} srv_gen_config;

/* Reads dir/generation_config.json when present; eos ids fall back to cfg's. */
int srv_gen_config_load(const char *dir, const mhla_config *cfg, srv_gen_config *out, char *err,
                        size_t errlen);
int srv_gen_is_eos(const srv_gen_config *g, int32_t id);

/* ---- request parameters (request.c) ---------------------------------------- */

#define SRV_MAX_STOP 4
#define SRV_MAX_PROMPTS 64
#define SRV_MAX_N 64

typedef struct {
    int32_t *ids;
    int n;
} srv_prompt;

typedef struct {
    char *model; /* as given (may be NULL) */
    srv_prompt *prompts;
    int n_prompts;
    int n; /* choices per prompt */
    int max_tokens;
    int stream, include_usage, echo, ignore_eos, return_token_ids;
    int logprobs; /* -1: none */
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int has_seed;
    uint64_t seed;
    mhla_sampling_params sampling; /* logit_bias stays NULL here: see bias */
    mhla_logit_bias *bias;
    int n_bias;
    char *user;
} srv_params;

typedef struct {
    int status;      /* HTTP status */
    char message[512];
    const char *type; /* invalid_request_error, ... */
    char param[64];   /* "" for null */
    const char *code; /* NULL for null */
} srv_error;

void srv_error_set(srv_error *e, int status, const char *type, const char *param,
                   const char *code, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

typedef struct {
    const srv_codec *codec;
    const srv_gen_config *gen;
    const char *model_name;
    int vocab_size;
    int max_positions;
    int max_running;
} srv_limits;

/* Parses and validates a /v1/completions body. On error fills e and returns -1. */
int srv_params_parse(const char *body, size_t len, const srv_limits *lim, srv_params *p,
                     srv_error *e);
void srv_params_free(srv_params *p);
/* JSON nesting depth check (strings and escapes honoured); 0 when within max. */
int srv_json_depth_ok(const char *s, size_t len, int max_depth);

/* ---- stopper.c: stop strings with hold-back ----------------------------- */

typedef struct {
    char **stops;
    int n_stops;
    srv_buf pending; /* decoded text that could still start a stop string */
} srv_stopper;

void srv_stopper_init(srv_stopper *s, char **stops, int n_stops);
/* Adds text (complete UTF-8); appends what is safe to emit to out. Returns 1
 * when a stop string was hit (text from it on is dropped), 0, or -1 (memory). */
int srv_stopper_feed(srv_stopper *s, const char *text, size_t len, srv_buf *out);
/* End of generation: everything held back is released. */
int srv_stopper_flush(srv_stopper *s, srv_buf *out);
void srv_stopper_free(srv_stopper *s);

/* ---- requests (shared between HTTP threads and the engine thread) ---------- */

typedef enum { SRV_CH_PREFILL, SRV_CH_DECODE, SRV_CH_DONE } srv_choice_state;

/* The logprobs of one token: its own and its character offset in the
 * choice's text (echo included); its p.logprobs top alternatives are kept
 * beside, in a flat array with that stride. */
typedef struct {
    float logprob;
    long text_offset;
} srv_lp;

typedef struct {
    /* engine thread only */
    int group;      /* prompt index */
    mhla_seq *seq;
    mhla_sampler *sampler;
    srv_codec_stream *dec;
    srv_stopper stopper;
    int32_t last_tok;
    double t_last;
    long dec_chars; /* characters the decoder has produced (text_offset) */
    /* under req->mu */
    srv_choice_state state;
    srv_buf text;        /* all text emitted so far */
    size_t text_sent;    /* streamed so far */
    int32_t *ids;        /* generated ids */
    srv_lp *lp;          /* with logprobs: one per id */
    mhla_logprob *tops;  /* with logprobs: p.logprobs per id */
    int n_ids, cap_ids;
    int ids_sent;
    const char *finish_reason; /* NULL while running */
    int finish_sent;
} srv_choice;

typedef struct {
    /* engine thread only */
    mhla_seq *seq; /* the prefill sequence (cloned into the choices) */
    int pos;       /* prompt tokens fed so far */
    long promised; /* state pool: pages kept free for the clones of n > 1 */
    /* echo + logprobs: one per prompt token (the first has none). The HTTP
     * thread allocates them and sets the offsets before submission; the engine
     * thread fills in the logprobs before the group's first choice starts. */
    srv_lp *prompt_lp;
    mhla_logprob *prompt_tops;
} srv_group;

typedef struct srv_req {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on new text, finish or error */
    int refs;          /* under mu */
    atomic_int cancelled;

    srv_params p;
    char id[48];
    long created;
    double t_arrive, t_first, t_deadline;
    srv_group *groups;   /* p.n_prompts */
    srv_choice *choices; /* p.n_prompts * p.n */
    int n_choices;
    int n_done;    /* under mu */
    int done;      /* under mu: every choice finished (or failed) */
    int failed;    /* under mu: engine error, message in err */
    char err[512];
    long prompt_tokens, completion_tokens; /* under mu */
    char **echo; /* p.n_prompts decoded prompts when p.echo, set before submission */

    struct srv_req *next; /* scheduler queue link */
} srv_req;

/* A new request holding one reference (the caller's); takes over p. */
int srv_req_create(srv_params *p, srv_req **out, char *err, size_t errlen);
void srv_req_release(srv_req *r);
void srv_req_cancel(srv_req *r);

/* ---- sched.c --------------------------------------------------------------- */

typedef struct srv_sched srv_sched;

typedef struct {
    mhla_engine *engine;
    const mhla_model *model;
    const srv_codec *codec;
    const srv_gen_config *gen;
    int state_pool; /* sequences from the engine's pool: prefix cache, admission by pages */
    int max_batch_tokens, max_running, max_queue;
    double request_timeout_s;
} srv_sched_config;

enum { SRV_SUBMIT_OK = 0, SRV_SUBMIT_FULL = 1, SRV_SUBMIT_DRAINING = 2, SRV_SUBMIT_TOO_BIG = 3 };

int srv_sched_create(const srv_sched_config *c, srv_sched **out, char *err, size_t errlen);
/* Queues r (taking a reference of its own). Returns SRV_SUBMIT_*: TOO_BIG when
 * the state pool could not hold r's worst case even empty. */
int srv_sched_submit(srv_sched *s, srv_req *r);
/* Refuse new requests from now on. */
void srv_sched_drain(srv_sched *s);
int srv_sched_draining(srv_sched *s);
/* Requests queued or running. */
int srv_sched_active(srv_sched *s);
/* Stops the engine thread; requests still active finish with an error. */
void srv_sched_free(srv_sched *s);

/* ---- response.c: JSON bodies ----------------------------------------------- */

char *srv_error_json(const srv_error *e);
/* The full non-streaming response (r must be done). codec names the tokens
 * of logprobs. */
char *srv_completion_json(const srv_req *r, const char *model_name, const srv_codec *codec);
/* One streamed chunk for choice ci carrying text (may be empty) and the ids
 * [id_from, id_to) with their logprobs; finish may be NULL. */
char *srv_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec, int ci,
                     const char *text, size_t text_len, int id_from, int id_to,
                     const char *finish);
/* The chunk that streams choice ci's echoed prompt (with its logprobs). */
char *srv_echo_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec,
                          int ci);
/* The usage-only chunk of stream_options.include_usage. */
char *srv_usage_chunk_json(const srv_req *r, const char *model_name);

/* ---- sse.c: the streaming body --------------------------------------------- */

typedef struct srv_sse srv_sse;
/* alive(ctx) (may be NULL) says whether the client is still connected; the
 * writer asks while it waits for tokens and cancels the request when not. */
int srv_sse_create(srv_req *r, const char *model_name, const srv_codec *codec,
                   int (*alive)(void *), void *alive_ctx, srv_sse **out);
/* Fills buf with up to max bytes of the event stream, blocking until there
 * is some. Returns the count, 0 never, -1 at the end of the stream. */
long srv_sse_read(srv_sse *s, char *buf, size_t max);
/* Frees the writer; cancels the request when it had not finished. */
void srv_sse_free(srv_sse *s);

/* ---- http.c ---------------------------------------------------------------- */

typedef struct srv_http srv_http;

typedef struct {
    const mhla_server_options *opt;
    const char *model_name;
    const srv_codec *codec;
    const srv_gen_config *gen;
    const mhla_config *cfg;
    srv_sched *sched;
} srv_http_config;

int srv_http_start(const srv_http_config *c, srv_http **out, int *bound_port, char *err,
                   size_t errlen);
void srv_http_stop(srv_http *h);

#endif
