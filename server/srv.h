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
void srv_metrics_observe(int hist, double seconds);
void srv_metrics_step(int n_items, int n_tokens);
/* Prometheus text exposition; the caller frees the result. NULL when out of memory. */
char *srv_metrics_render(void);

/* ---- request parameters (request.c) ---------------------------------------- */

#define SRV_MAX_STOP 4
#define SRV_MAX_PROMPTS 64
#define SRV_MAX_N 64

typedef struct {
    int32_t id;
    float bias;
} srv_logit_bias;

typedef struct {
    float temperature; /* 0 greedy */
    float top_p;       /* 1: off */
    int top_k;         /* 0: off */
    float min_p;       /* 0: off */
    float presence_penalty, frequency_penalty;
    float repetition_penalty; /* 1: off */
    srv_logit_bias *bias;
    int n_bias;
} srv_sampling;

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
    srv_sampling sampling;
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

/* ---- sampling.c ------------------------------------------------------------ */

typedef struct srv_sampler srv_sampler;
/* Per-choice sampler: owns a seeded generator and the token counts the
 * penalties need. prompt ids feed the repetition penalty. */
int srv_sampler_create(const srv_sampling *s, int vocab_size, uint64_t seed,
                       const int32_t *prompt, int n_prompt, srv_sampler **out, char *err,
                       size_t errlen);
void srv_sampler_free(srv_sampler *s);
/* Chooses the next token from logits (not modified). Records it for penalties. */
int32_t srv_sampler_next(srv_sampler *s, const float *logits);
/* Log-probability of every candidate under the model (log-softmax of logits). */

/* ---- textstream.c: stop strings with hold-back ----------------------------- */

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

typedef struct {
    /* engine thread only */
    int group;      /* prompt index */
    mhla_seq *seq;
    srv_sampler *sampler;
    srv_codec_stream *dec;
    srv_stopper stopper;
    int32_t last_tok;
    double t_last;
    /* under req->mu */
    srv_choice_state state;
    srv_buf text;        /* all text emitted so far */
    size_t text_sent;    /* streamed so far */
    int32_t *ids;        /* generated ids */
    int n_ids, cap_ids;
    int ids_sent;
    const char *finish_reason; /* NULL while running */
    int finish_sent;
} srv_choice;

typedef struct {
    /* engine thread only */
    mhla_seq *seq; /* the prefill sequence (cloned into the choices) */
    int pos;       /* prompt tokens fed so far */
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
    int max_batch_tokens, max_running, max_queue;
    double request_timeout_s;
} srv_sched_config;

enum { SRV_SUBMIT_OK = 0, SRV_SUBMIT_FULL = 1, SRV_SUBMIT_DRAINING = 2 };

int srv_sched_create(const srv_sched_config *c, srv_sched **out, char *err, size_t errlen);
/* Queues r (taking a reference of its own). Returns SRV_SUBMIT_*. */
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
/* The full non-streaming response (r must be done). */
char *srv_completion_json(const srv_req *r, const char *model_name);
/* One streamed chunk for choice ci carrying text (may be empty) and ids
 * [id_from, id_to); finish may be NULL. */
char *srv_chunk_json(const srv_req *r, const char *model_name, int ci, const char *text,
                     size_t text_len, int id_from, int id_to, const char *finish);
/* The usage-only chunk of stream_options.include_usage. */
char *srv_usage_chunk_json(const srv_req *r, const char *model_name);

/* ---- sse.c: the streaming body --------------------------------------------- */

typedef struct srv_sse srv_sse;
/* alive(ctx) (may be NULL) says whether the client is still connected; the
 * writer asks while it waits for tokens and cancels the request when not. */
int srv_sse_create(srv_req *r, const char *model_name, int (*alive)(void *), void *alive_ctx,
                   srv_sse **out);
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
    const mhla_config *cfg;
    srv_sched *sched;
} srv_http_config;

int srv_http_start(const srv_http_config *c, srv_http **out, int *bound_port, char *err,
                   size_t errlen);
void srv_http_stop(srv_http *h);

#endif
