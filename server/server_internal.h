/*
 * server_internal.h — the server's private header: the types and functions its
 * files share. include/server.h is the module's public header; nothing outside
 * server/ includes this one except the fuzz targets, which drive its parts.
 */
#ifndef MHLA_SERVER_INTERNAL_H
#define MHLA_SERVER_INTERNAL_H

#include "base.h"
#include "engine.h"
#include "server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* ---- text_codec.c, byte_codec.c: text <-> token ids ----------------------- */
/* text_codec.c uses the model directory's tokenizer.json (tokenizer/
 * tokenizer.h) when there is one; without it, byte_codec.c's byte-level
 * stand-in (byte b <-> token id b; text prompts only for a vocabulary of
 * exactly 256 ids, token ids for any). Every function that can fail returns 0 on success or -1
 * with err (errlen bytes) naming the cause. */
typedef struct srv_codec srv_codec;
typedef struct srv_codec_stream srv_codec_stream;

/* model_dir may hold tokenizer.json (and tokenizer_config.json); vocab_size
 * is the model's. A tokenizer with ids past the model's vocabulary is refused. */
int srv_codec_create(const char *model_dir, int vocab_size, srv_codec **out, char *err,
                     size_t errlen);
void srv_codec_free(srv_codec *c);
/* Short description for logs ("tokenizer.json (4096 ids)", "byte-level stand-in ..."). */
const char *srv_codec_name(const srv_codec *c);
/* 1 with why (cap bytes) when text prompts will be refused (no tokenizer.json
 * and a vocabulary the stand-in does not fit), else 0: worth a warning at
 * start, since token-id prompts still work. */
int srv_codec_text_refused(const srv_codec *c, char *why, size_t cap);

/* UTF-8 text -> ids (malloc'd; *n may be 0). add_special applies the
 * tokenizer's post-processor (BOS/EOS template), as the reference does by
 * default; the stand-in has no special tokens. Fails with -1 when the text is
 * refused (the request's fault: too long, no byte-level encoding for this
 * vocabulary) and -2 when the server failed (out of memory, the tokenizer). */
int srv_codec_encode(const srv_codec *c, const char *text, size_t len, int add_special,
                     int32_t **ids, int *n, char *err, size_t errlen);
/* ids -> valid UTF-8 text (malloc'd, NUL-terminated). skip_special drops the
 * tokenizer's special tokens. Ids the tokenizer does not know (a model
 * vocabulary padded past the tokenizer's) decode to nothing. */
/* The bytes token id adds to a text (buf of cap bytes, *len of them) and
 * whether it is special (or no text at all: padding ids, the stand-in's 0):
 * what a grammar's mask needs. -1 for an id outside the vocabulary, or cap
 * too small (*len the size needed). */
int srv_codec_token_bytes(const srv_codec *c, int32_t id, char *buf, size_t cap, size_t *len,
                          int *special);
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
/* 1 with why (cap bytes) naming the cause when text cannot be encoded with
 * the stand-in for this vocabulary (any size but 256), else 0. */
int srv_bytes_refusal(int vocab_size, char *why, size_t cap);
/* As srv_codec_encode: -1 refused, -2 out of memory. */
int srv_bytes_encode(int vocab_size, const char *text, size_t len, int32_t **ids, int *n, char *err,
                     size_t errlen);
int srv_bytes_decode(int vocab_size, const int32_t *ids, int n, char **text, size_t *len, char *err,
                     size_t errlen);
int srv_bytes_stream_new(int vocab_size, srv_bytes_stream **out, char *err, size_t errlen);
int srv_bytes_stream_push(srv_bytes_stream *s, int32_t id, const char **piece, size_t *len,
                          char *err, size_t errlen);
void srv_bytes_stream_finish(srv_bytes_stream *s, const char **piece, size_t *len);
void srv_bytes_stream_free(srv_bytes_stream *s);

/* ---- util.c ---------------------------------------------------------------- */

/* Growable buffers are base's mhla_buf (mhla_buf_put, mhla_buf_free). */
/* Appends printf-style text to b; -1 when out of memory. */
int srv_buf_printf(mhla_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double srv_wall_time(void); /* unix seconds */
/* Constant-time equality of two strings (time depends on the lengths only). */
int srv_ct_equal(const char *a, const char *b);
/* Random 64-bit value from the OS (falls back to time). */
uint64_t srv_random_u64(void);
/* cJSON reports bad JSON and a failed allocation alike (NULL): the server's
 * hooks (installed once at start, before any other thread runs) note the
 * failed allocation, so that srv_json_parse can tell them apart. */
void srv_json_hooks_install(void);
/* cJSON_ParseWithLengthOpts(s, len, end, 0); when NULL, *nomem is 1 if an
 * allocation failed (known with the hooks installed; else always 0). */
struct cJSON *srv_json_parse(const char *s, size_t len, const char **end, int *nomem);

/* ---- openapi.json, embedded at build time (cmake/embed_file.cmake) -------- */
/* The OpenAPI 3.1 document GET /openapi.json serves, NUL-terminated. */
extern const char srv_openapi_json[];

/* ---- cors.c: --allowed-origins ------------------------------------------- */
struct MHD_Response;
/* 0 when list (NULL: CORS off) is "*" or comma-separated origins, else -1 with err. */
int srv_cors_check(const char *list, char *err, size_t errlen);
/* The Access-Control-Allow-Origin value for a request's Origin header: "*",
 * origin itself, or NULL (no CORS: list NULL, no Origin, or one not listed). */
const char *srv_cors_allow(const char *list, const char *origin);
/* Vary (with a list) and, when allow is not NULL, the allow and expose headers. */
void srv_cors_headers(struct MHD_Response *resp, const char *list, const char *allow);
/* A preflight's allowed methods, headers (with requested's when a plain list), max age. */
void srv_cors_preflight_headers(struct MHD_Response *resp, const char *requested);

/* ---- webui.c: the playground (GET / and the files under /webui) ---------- */
/* 1 when path is one of the playground's: the page or a file it loads. */
int srv_webui_is_asset(const char *path);
/* The answer for GET/HEAD of one (NULL: not one, or out of memory): 200 with the
 * file, or 304 when if_none_match (may be NULL) holds its ETag; *status says which. */
struct MHD_Response *srv_webui_response(const char *path, const char *if_none_match, int *status);

/* ---- log.c ----------------------------------------------------------------- */

void srv_log_set_level(mhla_log_level lvl);
/* text 1: lines for people ("TIME LEVEL event: message key=value ..."); 0: JSON. */
void srv_log_set_format(int text);
int srv_log_enabled(mhla_log_level lvl);
/* One JSON line on stderr: {"ts":..,"level":..,"event":event, fields...}.
 * fields (may be NULL) is a cJSON object; it is consumed. */
typedef struct cJSON cJSON;
void srv_log(mhla_log_level lvl, const char *event, struct cJSON *fields);
void srv_logf(mhla_log_level lvl, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One access-log line (the "request" event): a finished HTTP request's
 * facts and, for a completion, its request's (id, tokens, finish reason,
 * queue wait, time to first token). */
typedef struct {
    const char *method, *path, *termination;
    const char *remote; /* the client's address; NULL when unknown */
    int status, stream;
    double duration_s;
    const char *request_id; /* the response's X-Request-Id */
    struct srv_req *r;      /* NULL: not a completion */
} srv_access;
/* The longest X-Request-Id taken from a client; a longer one is replaced. */
#define SRV_REQUEST_ID_MAX 128
void srv_log_access(const srv_access *a);
/* A request field the server does not know, logged at debug level the first
 * time its name is seen (at most 64 names are remembered: the set of names
 * is the client's to choose). */
void srv_log_unknown_field(const char *name);

/* ---- memory.c: --state-memory auto ----------------------------------------- */

#define SRV_STATE_MEMORY_AUTO (-1)
/* --speculate: what proposes the drafts the model verifies. */
enum { SRV_SPEC_OFF = 0, SRV_SPEC_NGRAM = 1, SRV_SPEC_DRAFT = 2 };

typedef struct {
    size_t limit;           /* bytes this process may use */
    const char *limit_from; /* where the limit came from */
    size_t cgroup_max;      /* the cgroup's limit when one binds, else 0 */
    int cgroup_version;     /* 1 or 2, with cgroup_max */
    char cgroup_path[256];  /* the cgroup whose limit it is */
    size_t device_total;    /* a GPU engine's device memory, else 0 */
    size_t device_weights;  /* the weights already on that device */
    size_t weights, step_buffers, headroom;
    size_t seq_buffer_bytes; /* one sequence's buffers outside the pages */
    size_t sequences;        /* max_running of them */
    int resume_slots;
    size_t resume; /* resume entries at their largest */
    size_t page_bytes, cap;
    size_t pages; /* the state pool's budget */
} srv_memory_plan;

/* Reads the limit (before the weights are loaded). */
void srv_memory_probe(srv_memory_plan *m);
/* The same, reading <root>/proc and <root>/sys (a test's fake trees). */
void srv_memory_probe_at(srv_memory_plan *m, const char *root);
/* The state pool's budget for this model and these limits; -1 with err when
 * not even one full-context sequence would fit. */
int srv_memory_plan_budget(srv_memory_plan *m, const mhla_model *model, int max_running,
                           int max_batch_tokens, char *err, size_t errlen);
/* The same on a GPU engine: the pool's budget from the device's free memory
 * (the weights are already there). */
int srv_memory_plan_device(srv_memory_plan *m, mhla_engine *engine, const mhla_model *model,
                           int max_running, int max_batch_tokens, char *err, size_t errlen);
/* The budget with its arithmetic, one log line. */
void srv_memory_log(const srv_memory_plan *m);

/* ---- metrics.c ------------------------------------------------------------- */

/* seconds: time to first token, inter-token, end to end, engine step (forward
 * call), queue wait (arrival to admission) */
enum { SRV_HIST_TTFT, SRV_HIST_ITL, SRV_HIST_E2E, SRV_HIST_STEP, SRV_HIST_QUEUE, SRV_HIST_COUNT };

void srv_metrics_init(void);
void srv_metrics_status(int http_status);
void srv_metrics_chat_request(void);         /* a /v1/chat/completions request was parsed */
void srv_metrics_finish(const char *reason); /* stop, length, cancelled, error, timeout */
void srv_metrics_tokens(long prompt, long generated);
void srv_metrics_gauges(int running_reqs, int waiting_reqs, int running_seqs, size_t state_bytes);
/* The engine's state pool; promised: pages the scheduler keeps for clones. */
void srv_metrics_state(const mhla_state_stats *st, long promised);
void srv_metrics_observe(int hist, double seconds);
void srv_metrics_step(int n_items, int n_tokens);
/* A step's prompt tokens and the cost estimates after it (fixed, per decode
 * row, per prefill token: step_plan.h). */
void srv_metrics_step_plan(int prefill_tokens, const double costs[4]);
void srv_metrics_itl_target(double seconds); /* --itl-target-ms; 0: off */
/* A step of decode_rows decode rows took seconds: over the target, it counts. */
void srv_metrics_step_budget(int decode_rows, double seconds);
void srv_metrics_cpu_isa(const char *path); /* the CPU kernels' instruction-set path */
/* The engine's gauges: a CPU engine's threads, a GPU engine's counters. */
void srv_metrics_engine(const mhla_engine *e);
/* Prometheus text exposition; the caller frees the result. NULL when out of memory. */
char *srv_metrics_render(void);
/* metrics_grammar.c: structured outputs' counters and the mask histogram. */
void srv_metrics_grammar_compiled(double seconds);
void srv_metrics_grammar_lookup(int hit);
void srv_metrics_grammar_row(void);
void srv_metrics_grammar_mask(double seconds);
int srv_metrics_grammar_render(mhla_buf *b);
/* metrics_spec.c: a row that verified drafted tokens (mode SRV_SPEC_*), and how many the model
 * took. */
void srv_metrics_spec(int mode, int drafted, int accepted);
int srv_metrics_spec_render(mhla_buf *b);
void srv_metrics_spec_engine(mhla_engine *engine); /* the engine's verify counters */

/* ---- state_disk.c: the state tier on disk ---- */
/* --state-disk-max: bytes, with an optional K, M, G or T (1024s). */
int srv_parse_size(const char *flag, const char *v, void *base, char *err, size_t errlen);
/* The limit for the tier in dir: asked, or (0) half its filesystem's free space now. */
uint64_t srv_state_disk_limit(const char *dir, unsigned long long asked);
/* The tier's /metrics lines (nothing without a tier), read live from engine. */
void srv_metrics_disk_engine(const mhla_engine *engine);
int srv_metrics_disk_render(mhla_buf *b);
/* Warns (at most once a minute) when writes fail, files are bad or writes are dropped. */
void srv_state_disk_watch(const mhla_state_stats *st);
/* The tier's fields of the start log line. */
void srv_state_disk_log_fields(struct cJSON *f, mhla_engine *engine, const char *dir);
/* A loading line: the time the checkpoint's fingerprint took (the tier's start-up cost). */
void srv_state_disk_log_start(mhla_engine *engine);

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

/* ---- tool_parse.c: tool calls in a chat choice's text ----------------------- */

/* How a model writes its tool calls (tool_parse.c shows each). */
typedef enum {
    SRV_TOOLS_NONE,
    SRV_TOOLS_HERMES,
    SRV_TOOLS_LLAMA3,
    SRV_TOOLS_MISTRAL
} srv_tool_format;

const char *srv_tool_format_name(srv_tool_format f);
/* "none", "hermes", "llama3" or "mistral": 0; anything else -1. */
int srv_tool_format_from_name(const char *name, srv_tool_format *f);
/* The format a chat template's tool calls take, by the markers it writes
 * ([TOOL_CALLS], <tool_call>, <|python_tag|>); hermes when it shows none. */
srv_tool_format srv_tool_format_detect(const char *tpl);

typedef struct srv_tool_parser srv_tool_parser;
srv_tool_parser *srv_tool_parser_new(srv_tool_format f); /* NULL: out of memory */
/* Text as the stop strings release it: what is content goes to content,
 * each call completed in it to calls as {"name", "arguments": JSON text}.
 * -1 when out of memory. */
int srv_tool_feed(srv_tool_parser *tp, const char *text, size_t len, mhla_buf *content,
                  cJSON *calls);
/* The reply ended: held text becomes calls or content. -1 out of memory. */
int srv_tool_finish(srv_tool_parser *tp, mhla_buf *content, cJSON *calls);
int srv_tool_parser_calls(const srv_tool_parser *tp); /* calls found so far */
void srv_tool_parser_free(srv_tool_parser *tp);

/* ---- structured.c: grammars, their cache, a choice's mask ------------------ */

/* TOOL_CALLS: GBNF whose start rule is "tool-calls" (tool_force.c) */
typedef enum {
    SRV_GRAMMAR_GBNF = 1,
    SRV_GRAMMAR_SCHEMA,
    SRV_GRAMMAR_JSON_OBJECT,
    SRV_GRAMMAR_TOOL_CALLS
} srv_grammar_kind;
typedef struct srv_grammars srv_grammars;       /* the server's: vocabulary and cache */
typedef struct srv_grammar_ref srv_grammar_ref; /* one compiled grammar, counted */
typedef struct srv_row_grammar srv_row_grammar; /* one choice's matcher */

/* ---- request parameters (params.c) ---------------------------------------- */

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
    /* The request's modes, named when the body is parsed: echo with
     * logprobs scores the prompt's own tokens (every prompt position's
     * logits, so no prefix cache). */
    int prompt_logprobs;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int has_seed;
    uint64_t seed;
    mhla_sampling_params sampling; /* logit_bias stays NULL here: see bias */
    mhla_logit_bias *bias;
    int n_bias;
    char *user;
    int chat; /* a /v1/chat/completions request: the response writers' chat shapes */
    srv_tool_format tool_format; /* chat with tools: how its replies' calls are parsed */
    srv_grammar_ref *grammar;    /* response_format / grammar: the constraint, or NULL */
    int single_tool_call;        /* parallel_tool_calls false: the first call only */
} srv_params;

/* ---- errors.c: the one error model ---------------------------------------- */

/* What went wrong; the HTTP status, type and code string follow from it. */
typedef enum {
    SRV_ERR_INVALID,           /* 400 */
    SRV_ERR_CONTEXT,           /* 400 context_length_exceeded */
    SRV_ERR_UNAUTHORIZED,      /* 401 invalid_api_key */
    SRV_ERR_NOT_FOUND,         /* 404 not_found (no such endpoint) */
    SRV_ERR_MODEL_NOT_FOUND,   /* 404 model_not_found */
    SRV_ERR_ORIGIN,            /* 403 origin_not_allowed (a CORS preflight) */
    SRV_ERR_METHOD,            /* 405 method_not_allowed */
    SRV_ERR_TOO_LARGE,         /* 413 request_too_large */
    SRV_ERR_URI_TOO_LONG,      /* 414 uri_too_long */
    SRV_ERR_HEADERS_TOO_LARGE, /* 431 headers_too_large */
    SRV_ERR_QUEUE_FULL,        /* 429 queue_full */
    SRV_ERR_CLIENT_CLOSED,     /* 499 client_closed */
    SRV_ERR_INTERNAL,          /* 500: out of memory, the engine or the device failed */
    SRV_ERR_FULL,              /* 503 state_memory_full */
    SRV_ERR_DRAINING,          /* 503 server_draining */
    SRV_ERR_COUNT
} srv_errcode;

typedef struct {
    srv_errcode code;
    char message[512];
    char param[64]; /* "" for null */
} srv_error;

void srv_error_set(srv_error *e, srv_errcode code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int srv_error_status(srv_errcode code);
/* The server's code for an engine error that ended a running request. */
srv_errcode srv_error_from_engine(mhla_status code);
/* {"error": {message, type, param, code}}; NULL when out of memory. */
char *srv_error_json(const srv_error *e);

typedef struct srv_chat_render srv_chat_render;

typedef struct {
    const srv_codec *codec;
    const srv_gen_config *gen;
    const char *model_name;
    int vocab_size;
    int max_positions;
    int max_running;
    const srv_chat_render *chat; /* NULL: no chat requests */
    srv_grammars *grammars;      /* NULL: no structured outputs (last: callers list the others) */
} srv_limits;

/* Parses and validates a /v1/completions body. On error fills e and returns -1. */
int srv_params_parse(const char *body, size_t len, const srv_limits *lim, srv_params *p,
                     srv_error *e);
/* The same for a /v1/chat/completions body: its messages rendered with
 * lim->chat's template into the one prompt (p->chat set). */
int srv_chat_params_parse(const char *body, size_t len, const srv_limits *lim, srv_params *p,
                          srv_error *e);
void srv_params_free(srv_params *p);
/* params_format.c: response_format, grammar or json_schema into p->grammar
 * (compiled through lim->grammars); -1 with e set. */
int srv_params_format(const cJSON *root, const srv_limits *lim, srv_params *p, srv_error *e);
/* chat_template.c: the chat template chosen at start (--chat-template FILE,
 * else tokenizer_config.json's chat_template, else a built-in ChatML one). */
typedef struct {
    char *text;       /* the template ("default" of a named list) */
    char *tool_use;   /* a named list's "tool_use" template, or NULL */
    int builtin;      /* the model has none: the built-in ChatML template */
    char source[256]; /* where it came from, for the log and /v1/models */
} srv_chat_template;

int srv_chat_template_load(const char *model_dir, const char *file, srv_chat_template *t, char *err,
                           size_t errlen);
void srv_chat_template_free(srv_chat_template *t);

/* chat_render.c: the chat template compiled once at start, and the special
 * tokens' text it is given (tokenizer_config.json's bos_token and eos_token,
 * "" when the model has none). render renders messages (the array
 * srv_chat_messages_parse made; consumed) with tools (an array, or NULL),
 * add_generation_prompt, bos_token, eos_token and kwargs' keys (may be
 * NULL) into *text (malloc'd):
 * -1 with e set, a 400 (param "messages") for a template error,
 * raise_exception or a render limit, a 500 when out of memory. params.c
 * calls it through the pointer, so the request parser links without the
 * template module (the fuzz targets build the server's sources alone). */
struct srv_chat_render {
    struct mhla_tpl *tpl;
    struct mhla_tpl *tpl_tools;  /* the "tool_use" template, for requests with tools (or NULL) */
    srv_tool_format tool_format; /* how replies' tool calls are parsed */
    char *bos, *eos;
    int (*render)(const srv_chat_render *cr, cJSON *messages, const cJSON *tools,
                  const cJSON *kwargs, char **text, size_t *len, srv_error *e);
};
/* Compiles t's templates; an error names t->source. tool_format: a
 * srv_tool_format, or -1 for the one the template's markers show. */
int srv_chat_render_init(srv_chat_render *cr, const srv_chat_template *t, const char *model_dir,
                         int tool_format, char *err, size_t errlen);
void srv_chat_render_free(srv_chat_render *cr);
/* POST /apply-template (llama-server's shape): the prompt text body's
 * messages render to, with its tools, add_generation_prompt (default true)
 * and chat_template_kwargs. -1 with e set, as render. */
int srv_chat_apply_template(const srv_chat_render *cr, const cJSON *root, char **text, size_t *len,
                            srv_error *e);

/* chat_tools.c: a chat body's tools (checked; *tools points into root, NULL
 * when none), tool_choice and parallel_tool_calls into p->tool_format and
 * p->single_tool_call. -1 with e set (a 400 naming the field). */
int srv_chat_tools_parse(const cJSON *root, const srv_chat_render *cr, srv_grammars *gs,
                         srv_params *p, const cJSON **tools, srv_error *e);
/* tool_force.c: the grammar that holds a reply to tool calls of tools (only
 * the one named only, when not NULL; one call when single) in format f. */
int srv_tool_force_grammar(srv_grammars *gs, srv_tool_format f, const cJSON *tools,
                           const char *only, int single, srv_grammar_ref **out, srv_error *e);

/* chat_messages.c: a chat body's "messages", checked and rewritten into the
 * array a chat template reads (*out, the caller's to cJSON_Delete): content
 * a string (text parts joined with "\n"; other part types refused), tool
 * calls' arguments parsed into objects, tool messages with tool_call_id.
 * -1 with e set (a 400 naming the field, or a 500 when out of memory). */
int srv_chat_messages_parse(const cJSON *root, cJSON **out, srv_error *e);
/* A request body as one JSON value: nested at most 32 deep, no NUL in its
 * strings, nothing but whitespace after it. NULL with e set otherwise. */
cJSON *srv_json_parse_body(const char *body, size_t len, srv_error *e);
/* JSON nesting depth check (strings and escapes honoured); 0 when within max. */
int srv_json_depth_ok(const char *s, size_t len, int max_depth);

/* ---- structured.c (the types are above, with the parameters) ------------- */

/* The vocabulary's bytes from codec (end ids from gen), an empty cache. */
int srv_grammars_create(const srv_codec *codec, const srv_gen_config *gen, int n_vocab,
                        srv_grammars **out, char *err, size_t errlen);
void srv_grammars_free(srv_grammars *gs);
/* The compiled grammar of text (GBNF, a schema's JSON, or none for a JSON
 * object), from the cache or compiled now; *out holds a reference for the
 * caller. A grammar that does not compile is a 400 naming param, with the
 * position or schema path; out of memory a 500. */
int srv_grammars_get(srv_grammars *gs, srv_grammar_kind kind, const char *text, size_t len,
                     const char *param, srv_grammar_ref **out, srv_error *e);
void srv_grammar_ref_release(srv_grammar_ref *r);
/* A choice's matcher on ref and the mask the sampler applies through it. */
int srv_row_grammar_create(srv_grammar_ref *ref, int n_vocab, srv_row_grammar **out,
                           mhla_token_mask *mask, char *err, size_t errlen);
void srv_row_grammar_free(srv_row_grammar *rg);

/* ---- stopper.c: stop strings with hold-back ----------------------------- */

typedef struct {
    char **stops;
    int n_stops;
    mhla_buf pending; /* decoded text that could still start a stop string */
} srv_stopper;

void srv_stopper_init(srv_stopper *s, char **stops, int n_stops);
/* Adds text (complete UTF-8); appends what is safe to emit to out. Returns 1
 * when a stop string was hit (text from it on is dropped), 0, or -1 (memory). */
int srv_stopper_feed(srv_stopper *s, const char *text, size_t len, mhla_buf *out);
/* End of generation: everything held back is released. */
int srv_stopper_flush(srv_stopper *s, mhla_buf *out);
void srv_stopper_free(srv_stopper *s);

/* ---- requests (shared between HTTP threads and the engine thread) ---------- */

/* ---- spec.c: prompt-lookup drafts ------------------------------------------ */

/* A choice's text as prompt lookup reads it: its prompt, then its output. */
typedef struct {
    const int32_t *prompt, *out;
    int n_prompt, n_out;
} srv_spec_text;

/* ---- draft.c: drafts from a draft model ------------------------------------- */

typedef struct srv_drafter srv_drafter;
typedef struct {
    const char *dir;                           /* --draft-model */
    const char *target_dir;                    /* the model's: the tokenizers must match */
    const mhla_model_options *model_options;   /* as the model's (NULL: defaults) */
    const mhla_engine_options *engine_options; /* as the model's engine */
    const mhla_config *target_cfg;
    size_t target_state_bytes; /* the model's state pool (0: no limit) */
    int state_mb;              /* the draft's pool, MiB; 0: no limit; -1: auto (from the model's) */
    int catchup;               /* prompt tokens all rows together feed per step while catching up */
} srv_drafter_options;
/* Loads the draft model and makes its engine; refuses a model whose
 * tokenizer or vocabulary is not the target's. */
int srv_drafter_create(const srv_drafter_options *o, srv_drafter **out, char *err, size_t errlen);
void srv_drafter_free(srv_drafter *d);
const mhla_config *srv_drafter_config(const srv_drafter *d);
mhla_engine *srv_drafter_engine(const srv_drafter *d);
/* The draft's weights over the model's: what a draft step costs beside a decode row. */
double srv_drafter_cost_ratio(const srv_drafter *d, const mhla_model *target);

/* A choice's draft state: a sequence of the draft model holding its text. */
typedef struct {
    mhla_seq *seq; /* NULL until its first proposal */
    int off;       /* 1: the draft pool could not hold it; it drafts nothing */
} srv_draft_state;
void srv_draft_state_free(srv_draft_state *st);

/* One drafting row of a step. */
typedef struct {
    srv_draft_state *st;
    srv_spec_text text; /* the choice's prompt and output, its last token included */
    long reserve;       /* positions its draft sequence reserves: prompt + max_tokens + drafts */
    int want;           /* in: drafts the cost rule allows; out: lowered by the draft's room */
    int32_t *out;       /* room for want drafts */
    int got;            /* out: drafts proposed */
} srv_draft_row;
/* Proposes each row's drafts: one draft-engine step per draft position over
 * every row still drafting; *caught: the text tokens rows fed to catch up on
 * a prompt (more than a block of the draft model beyond the last token and
 * one more). -1 with err when a step failed (rows keep the drafts proposed before
 * it; srv_draft_settle takes every draft back). */
int srv_drafter_propose(srv_drafter *d, srv_draft_row *rows, int n_rows, int *caught, char *err,
                        size_t errlen);
/* After the target's step: its text had end tokens and the target accepted
 * the first accepted drafts; the draft state goes back to hold no more. */
void srv_draft_settle(srv_draft_state *st, int end, int accepted);

/* How one choice drafts: its draft length now and its acceptance record. */
typedef struct {
    int k;              /* drafts to propose at most now */
    double hits, tries; /* decayed counts: drafts accepted, drafts decided */
    int idle;           /* steps it drafted nothing because drafts did not pay */
} srv_spec_row;

/* Up to k tokens that followed the latest earlier match of the text's last
 * n tokens (n = ngram_max .. 1) into out; returns how many (0: no match). */
int srv_spec_lookup(const srv_spec_text *t, int ngram_max, int k, int32_t *out);
void srv_spec_row_init(srv_spec_row *r, int draft_max);
/* Drafts worth verifying now, at most k_max: those each still expected to
 * save more (per_row_s, a plain step's time per row) than its verification
 * costs (per_token_s); with no costs known yet, the row's length. */
int srv_spec_length(srv_spec_row *r, int k_max, double per_row_s, double per_token_s);
/* After a step: drafted tokens, and how many the model chose too. */
void srv_spec_row_update(srv_spec_row *r, int drafted, int accepted, int draft_max);

/* Per batch size (decode rows, in powers of two): a plain decode step's time
 * per row, from the steps that only decode, and what a drafted token adds to
 * such a step, from the steps that also verify drafts (their time beyond the
 * rows' plain time, per draft). */
enum { SRV_SPEC_COST_BUCKETS = 6 }; /* batches of 1, 2-3, 4-7, 8-15, 16-31, 32+ rows */
typedef struct {
    double row_s[SRV_SPEC_COST_BUCKETS]; /* seconds; 0 until such a step was seen */
    double xx[SRV_SPEC_COST_BUCKETS], xy[SRV_SPEC_COST_BUCKETS];
    double per_token[SRV_SPEC_COST_BUCKETS]; /* seconds; 0 until such a step was seen */
} srv_spec_cost;
void srv_spec_cost_plain(srv_spec_cost *c, int rows, double seconds);
void srv_spec_cost_observe(srv_spec_cost *c, int rows, int drafts, double seconds);
/* At a batch of rows decode rows; 0 when no such step has been timed yet. */
double srv_spec_cost_per_token(const srv_spec_cost *c, int rows);
double srv_spec_cost_per_row(const srv_spec_cost *c, int rows);

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
    int group; /* prompt index */
    mhla_seq *seq;
    mhla_sampler *sampler;
    srv_codec_stream *dec;
    srv_stopper stopper;
    srv_tool_parser *tools;   /* p.tool_format: the reply's calls parsed out */
    srv_row_grammar *grammar; /* p.grammar: this choice's matcher, and its mask */
    mhla_token_mask mask;
    int32_t last_tok;
    srv_spec_row spec;     /* prompt-lookup drafting (spec.c) */
    srv_draft_state draft; /* --speculate draft: the draft model's state (draft.c) */
    double t_last;
    long dec_chars; /* characters the decoder has produced (text_offset) */
    /* under req->mu */
    srv_choice_state state;
    mhla_buf text;      /* all text emitted so far */
    size_t text_sent;   /* streamed so far */
    int32_t *ids;       /* generated ids */
    srv_lp *lp;         /* with logprobs: one per id */
    mhla_logprob *tops; /* with logprobs: p.logprobs per id */
    int n_ids, cap_ids;
    int ids_sent;
    const char *finish_reason; /* NULL while running */
    int finish_sent;
    cJSON *tool_calls; /* the reply's calls ({id, type, function}), NULL while none */
    int n_calls, calls_sent;
} srv_choice;

typedef struct {
    /* engine thread only */
    mhla_seq *seq; /* the prefill sequence (cloned into the choices) */
    int pos;       /* prompt tokens fed so far */
    int loading;   /* the prefix is still being read from the disk tier: not fed yet */
    long promised; /* state pool: pages kept free for the clones of n > 1 */
    /* p.prompt_logprobs: one per prompt token (the first has none), made
     * with the request (request_echo.c sets the offsets); the engine's
     * token scores fill in the logprobs before the group's first choice starts. */
    float *prompt_logprob;
    long *prompt_offset;
    mhla_logprob *prompt_tops; /* p.logprobs per prompt token */
    mhla_token_scores scores;  /* engine thread: the step's request for them */
} srv_group;

typedef struct srv_req {
    pthread_mutex_t mu;
    pthread_cond_t cv; /* signalled on new text, finish or error */
    int refs;          /* under mu */
    atomic_int cancelled;

    srv_params p;
    char id[48];
    long created;
    double t_arrive, t_admit, t_first, t_deadline; /* t_admit: left the queue */
    srv_group *groups;                             /* p.n_prompts */
    srv_choice *choices;                           /* p.n_prompts * p.n */
    int n_choices;
    int n_done; /* under mu */
    int done;   /* under mu: every choice finished (or failed) */
    int failed; /* under mu: engine error, message in err */
    srv_errcode err_code;
    char err[512];
    long prompt_tokens, completion_tokens; /* under mu */
    long cached_tokens; /* under mu: prompt tokens the state pool served (set at admission) */
    char **echo;        /* p.n_prompts decoded prompts when p.echo, set before submission */

    struct srv_req *next; /* scheduler queue link */
} srv_req;

/* A new request holding one reference (the caller's); takes over p (also
 * on failure). With p->echo, the prompts are decoded now with codec (and
 * with p->prompt_logprobs each token's character offset recorded), so
 * the engine thread only fills in numbers. On failure e says why. */
int srv_req_create(srv_params *p, const srv_codec *codec, srv_req **out, srv_error *e);
/* request_echo.c: r->echo and, with prompt logprobs, their room and offsets. */
int srv_req_echo_prompts(srv_req *r, const srv_codec *codec, srv_error *e);
/* The engine-side parts of a choice: sequence, sampler, decoder, stop strings. */
void srv_choice_free_engine(srv_choice *c);
void srv_req_retain(srv_req *r);
/* Drops a reference; the last one frees the request. */
void srv_req_release(srv_req *r);
/* The client is gone: the engine thread ends r at its next step. */
void srv_req_cancel(srv_req *r);
int srv_req_cancelled(srv_req *r);
/* Every choice finished (or r failed). */
int srv_req_done(srv_req *r);
/* A client's reference when it leaves: cancels r unless done, then releases. */
void srv_req_abandon(srv_req *r);
/* Reading r's results (text, ids, done, failed, err) from an HTTP thread. */
void srv_req_lock(srv_req *r);
void srv_req_unlock(srv_req *r);
/* With r locked: waits up to timeout_s for news from the engine thread. When
 * none came, asks alive(ctx) (may be NULL; r is unlocked meanwhile) and
 * cancels r when the client is gone. Returns 0, or -1 when it is gone. */
int srv_req_wait(srv_req *r, double timeout_s, int (*alive)(void *), void *ctx);

/* One generated token as the engine thread hands it to a choice. */
typedef struct {
    int32_t id;
    srv_lp lp;               /* with logprobs */
    const mhla_logprob *top; /* with logprobs > 0: p.logprobs alternatives */
    const char *text;        /* the text it releases (past stop hold-back) */
    size_t len;
    const char *finish; /* non-NULL: the choice ends with this reason */
    cJSON *calls;       /* tool calls it completes (an array, its items moved), or NULL */
} srv_token;

/* Engine thread: appends t to choice ci and wakes the readers; -1 when out
 * of memory (nothing is appended then). */
int srv_req_push_token(srv_req *r, int ci, const srv_token *t);
void srv_req_set_decoding(srv_req *r, int ci);
/* Ends every unfinished choice with reason; failure (may be NULL) marks r
 * failed with code and that message. */
void srv_req_finish(srv_req *r, const char *reason, srv_errcode code, const char *failure);

/* ---- output.c: a chosen token's way to its client ----------------------- */

typedef struct {
    const srv_codec *codec;
    const srv_gen_config *gen;
    int state_pool;   /* a finished choice keeps its end state for resume */
    mhla_buf emit;    /* the text one token releases */
    mhla_buf content; /* with tool calls: the part of emit that is content */
    cJSON *calls;     /* with tool calls: the calls one token completes */
} srv_output;

/* Choice ci starts decoding: its decoder and stop strings. */
int srv_output_start(srv_output *o, srv_req *r, int ci, char *err, size_t errlen);
/* Choice ci's next token as the engine chose it: detokenized, through the
 * stop strings, timed (TTFT, ITL) and pushed to the request; the choice ends
 * (its engine side freed) at EOS, a stop string or max_tokens. */
int srv_output_token(srv_output *o, srv_req *r, int ci, const mhla_sample_slot *sl, char *err,
                     size_t errlen);
void srv_output_free(srv_output *o);

/* ---- sched.c --------------------------------------------------------------- */

typedef struct srv_sched srv_sched;

typedef struct {
    mhla_engine *engine;
    const mhla_model *model;
    const srv_codec *codec;
    const srv_gen_config *gen;
    int state_pool; /* sequences from the engine's pool: prefix cache, admission by pages */
    int max_batch_tokens, max_running, max_queue;
    double itl_target_s; /* the step time budget; 0: the token budget alone */
    double request_timeout_s;
    int speculate;              /* SRV_SPEC_*: off, prompt-lookup drafts (spec.c), draft model */
    srv_drafter *drafter;       /* SRV_SPEC_DRAFT: the draft model (draft.c) */
    int draft_max, draft_ngram; /* drafted tokens per step at most; longest n-gram matched */
    int draft_min;              /* drafts proposed even where they do not pay */
} srv_sched_options;

enum { SRV_SUBMIT_OK = 0, SRV_SUBMIT_FULL = 1, SRV_SUBMIT_DRAINING = 2, SRV_SUBMIT_TOO_BIG = 3 };

int srv_sched_create(const srv_sched_options *c, srv_sched **out, char *err, size_t errlen);
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

/* The full non-streaming response (r must be done). codec names the tokens
 * of logprobs. */
char *srv_completion_json(const srv_req *r, const char *model_name, const srv_codec *codec);
/* One streamed chunk for choice ci carrying text (may be empty) and the ids
 * [id_from, id_to) with their logprobs; finish may be NULL. */
char *srv_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec, int ci,
                     const char *text, size_t text_len, int id_from, int id_to, const char *finish);
/* The chunk that streams choice ci's echoed prompt (with its logprobs). */
char *srv_echo_chunk_json(const srv_req *r, const char *model_name, const srv_codec *codec, int ci);
/* A chat stream's first chunk for choice ci: the delta {role: assistant, content: ""}. */
char *srv_chat_role_chunk_json(const srv_req *r, const char *model_name, int ci);
/* A chat stream's chunk with choice ci's tool calls [from, to) as deltas
 * ({index, id, type, function: {name, arguments}} each, whole). */
char *srv_chat_calls_chunk_json(const srv_req *r, const char *model_name, int ci, int from, int to);
/* The usage-only chunk of stream_options.include_usage. */
char *srv_usage_chunk_json(const srv_req *r, const char *model_name);

/* ---- sse.c: the streaming body --------------------------------------------- */

typedef struct srv_sse srv_sse;
/* alive(ctx) (may be NULL) says whether the client is still connected; the
 * writer asks while it waits for tokens and cancels the request when not. */
int srv_sse_create(srv_req *r, const char *model_name, const srv_codec *codec, int (*alive)(void *),
                   void *alive_ctx, srv_sse **out);
/* Fills buf with up to max bytes of the event stream, blocking until there
 * is some. Returns the count, 0 never, -1 at the end of the stream. */
long srv_sse_read(srv_sse *s, char *buf, size_t max);
/* Frees the writer; cancels the request when it had not finished. */
void srv_sse_free(srv_sse *s);

/* ---- conn_watch.c: the deadline for receiving a request ------------------- */

typedef struct srv_watch srv_watch;
typedef struct srv_watch_conn srv_watch_conn;

enum { SRV_WATCH_RECEIVING, SRV_WATCH_IN_APP, SRV_WATCH_WRITING };

int srv_watch_start(double read_timeout_s, double write_timeout_s, srv_watch **out, char *err,
                    size_t errlen);
void srv_watch_stop(srv_watch *w);
/* A new connection (socket fd), receiving its first request from now on;
 * NULL when out of memory (the connection then has no read deadline). */
srv_watch_conn *srv_watch_add(srv_watch *w, int fd);
/* The connection is closing; c is freed. */
void srv_watch_remove(srv_watch *w, srv_watch_conn *c);
/* The connection enters a phase (its deadline starts now): RECEIVING the
 * next request (read timeout), IN_APP while the server works on the answer
 * (none), WRITING what it handed libmicrohttpd (write timeout). */
void srv_watch_phase(srv_watch *w, srv_watch_conn *c, int phase);

/* ---- http.c ---------------------------------------------------------------- */

typedef struct srv_http srv_http;

typedef struct {
    const mhla_server_options *opt;
    const char *model_name;
    const srv_codec *codec;
    const srv_gen_config *gen;
    const mhla_config *cfg;
    const srv_chat_template *chat;
    const srv_chat_render *render; /* chat's template compiled (NULL: no chat endpoint) */
    srv_grammars *grammars;        /* structured outputs (NULL: none served) */
    srv_sched *sched;
} srv_http_options;

int srv_http_start(const srv_http_options *c, srv_http **out, int *bound_port, char *err,
                   size_t errlen);
/* Waits (at most max_s) until every completion's response is sent: after
 * the scheduler ended the unfinished ones, their error events and [DONE]
 * reach the clients before the sockets close. */
void srv_http_flush(srv_http *h, double max_s);
void srv_http_stop(srv_http *h);

#endif
