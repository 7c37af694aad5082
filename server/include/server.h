/*
 * server.h — mhla-server, the OpenAI-compatible HTTP front end of mhla-serve
 * (docs/api.md): options, argument parsing and the blocking run loop.
 *
 * Every function that can fail returns 0 on success or -1 with a one-line
 * message in err (errlen bytes, always terminated) naming the cause.
 */
#ifndef MHLA_SERVER_H
#define MHLA_SERVER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MHLA_LOG_DEBUG = 0,
    MHLA_LOG_INFO = 1,
    MHLA_LOG_WARN = 2,
    MHLA_LOG_ERROR = 3,
    MHLA_LOG_OFF = 4,
} mhla_log_level;

typedef struct {
    const char *host;          /* address to bind (default 127.0.0.1) */
    int port;                  /* 0 picks a free port (logged at start) */
    const char *model_dir;     /* checkpoint directory */
    const char *model_name;    /* id served by /v1/models (default: the dir's basename) */
    const char *chat_template; /* a chat template file (NULL: the model's, else ChatML) */
    int tool_call_format; /* 0 auto (from the template), 1 hermes, 2 llama3, 3 mistral, 4 none */
    int threads;          /* engine worker threads, 0 = the CPUs the process may use */
    const char *cpu_isa;  /* CPU kernel path (NULL: MHLA_CPU_ISA, else the best the CPU runs) */
    const char *thread_adapt; /* "on" | "off" (NULL: MHLA_THREAD_ADAPT, else on) */
    int max_batch_tokens;     /* tokens per engine step (decode + prefill chunks): a hard cap */
    int itl_target_ms;        /* step time budget for running streams; 0: token budget only */
    int max_running;          /* sequences decoding at once */
    int max_queue;            /* waiting requests before 429 */
    const char *api_key;      /* NULL: no authentication */
    /* CORS: "*" or comma-separated origins whose pages may call the API; NULL: off */
    const char *allowed_origins;
    int no_webui; /* 1: no playground at GET / (its paths are 404s) */
    mhla_log_level log_level;
    int log_format; /* --log-format: 0 auto (text on a terminal, else json), 1 text, 2 json */
    size_t max_body_bytes;          /* request body limit (413 past it) */
    int max_connections;            /* concurrent HTTP connections */
    int timeout_s;                  /* idle connection timeout (also a stream's write deadline) */
    int read_timeout_s;             /* deadline for a whole request's headers and body */
    int max_connections_per_client; /* per client address; 0: all but a reserve */
    int request_timeout_s;          /* per-request deadline, 0 = none */
    int shutdown_timeout_s;         /* SIGTERM: how long running requests may still take */
    int state_memory_mb;   /* state pool with prefix cache (kvstate/README.md), MiB; 0: unbounded
                              per-sequence state; -1 (the default): auto */
    int state_prefault_mb; /* of the pool, made at start (MiB); 0: none; -1 (default): auto */
    const char *state_dir; /* state pages on disk under the prefix cache; NULL: none */
    unsigned long long
        state_disk_max; /* bytes of it; 0: half its filesystem's free space at start */
    int weights;        /* mhla_weight_dtype: f32, bf16 (half the bytes per step) or q8 */
    int device;         /* mhla_device: cpu, auto or cuda */
    int gpu_weights;    /* mhla_gpu_weights */
    int gpu_index;
    int gpu_no_graphs;
    int speculate;             /* 0 off, 1 ngram (prompt lookup drafts), 2 draft (a draft model) */
    const char *draft_model;   /* --draft-model: the draft model of --speculate draft */
    int draft_state_memory_mb; /* its state pool, MiB; 0: unbounded; -1 (default): auto */
    int draft_max;   /* --draft-max: drafted tokens a sequence verifies per step at most */
    int draft_ngram; /* --draft-ngram: the longest n-gram prompt lookup matches */
    int draft_min;   /* --draft-min: drafts proposed even where they do not pay */
} mhla_server_options;

void mhla_server_options_default(mhla_server_options *o);

/* Parses argv into o (which should hold the defaults). Returns 0, 1 when
 * --help was printed (the caller exits 0), or -1 with err set. */
int mhla_server_parse_args(int argc, char **argv, mhla_server_options *o, char *err, size_t errlen);

/* Prints the --help text to f (a FILE *). */
void mhla_server_print_help(void *f);

/* Loads the model, serves until SIGTERM/SIGINT, drains and returns 0. The
 * calling thread must be the process's main thread (it handles the signals). */
int mhla_server_run(const mhla_server_options *o, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
