/*
 * cli.c — mhla-cli: send one completion with stream=true and write the text
 * to stdout as each chunk arrives (flushed per chunk, so a terminal shows it
 * token by token). The prompt is the arguments joined by spaces, or stdin;
 * the flags before it are rows of base's option table (mhla_opts).
 */
#include "client_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Everything mhla-cli's flags set. */
typedef struct {
    cl_conn conn;
    cl_req_params params;
    long seed; /* --seed, for params.seed; -1: none */
    int stats;
} cli_args;

#define CONN(field) offsetof(cli_args, conn.field)
#define PARAM(field) offsetof(cli_args, params.field)
static const mhla_opt rows[] = {
    {.name = "url",
     .kind = MHLA_OPT_STRING,
     .off = CONN(url),
     .metavar = "URL",
     .help = "server base URL (default http://127.0.0.1:8080)"},
    {.name = "model",
     .kind = MHLA_OPT_STRING,
     .off = CONN(model),
     .metavar = "NAME",
     .help = "\"model\" field to send (default: none)"},
    {.name = "api-key",
     .kind = MHLA_OPT_STRING,
     .off = CONN(api_key),
     .metavar = "KEY",
     .help = "Authorization: Bearer KEY (default: $MHLA_API_KEY)"},
    {.name = "max-tokens",
     .kind = MHLA_OPT_LONG,
     .off = PARAM(max_tokens),
     .lo = 1,
     .hi = 1e7,
     .metavar = "N",
     .help = "tokens to generate (default 128)"},
    {.name = "temperature",
     .kind = MHLA_OPT_DOUBLE,
     .off = PARAM(temperature),
     .lo = 0,
     .hi = 100,
     .metavar = "T",
     .help = "sampling temperature (default: the server's)"},
    {.name = "seed",
     .kind = MHLA_OPT_LONG,
     .off = offsetof(cli_args, seed),
     .lo = 0,
     .hi = 9007199254740992.0,
     .metavar = "N",
     .help = "sampling seed (default: none)"},
    {.name = "ignore-eos",
     .kind = MHLA_OPT_FLAG,
     .off = PARAM(ignore_eos),
     .help = "keep going past the end-of-sequence token"},
    {.name = "chat",
     .kind = MHLA_OPT_FLAG,
     .off = PARAM(chat),
     .help = "send the prompt as one user message to /v1/chat/completions\n"
             "(the server renders it with the model's chat template)"},
    {.name = "stats",
     .kind = MHLA_OPT_FLAG,
     .off = offsetof(cli_args, stats),
     .help = "token count, time to first token and tokens/s on stderr"},
    {.name = "timeout",
     .kind = MHLA_OPT_DOUBLE,
     .off = CONN(timeout_s),
     .lo = 0,
     .hi = 1e6,
     .metavar = "S",
     .help = "request timeout in seconds (default 600)"},
};
#undef CONN
#undef PARAM

static const mhla_opts spec = {
    .usage = "usage: mhla-cli [options] [PROMPT...]\n"
             "\n"
             "Streams one completion to stdout. Without PROMPT, the prompt is read from stdin.\n"
             "\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 22,
};

/* Fills *a from the flags; *first is the first word of the prompt. Returns
 * -1 to go on, else the exit status (0 after --help, 2 on a usage error). */
static int parse_args(int argc, char **argv, cli_args *a, int *first)
{
    char err[CL_ERR_LEN];
    memset(a, 0, sizeof *a);
    a->conn.url = "http://127.0.0.1:8080";
    a->conn.timeout_s = 600;
    a->conn.api_key = getenv("MHLA_API_KEY");
    a->params = (cl_req_params){.max_tokens = 128, .temperature = -1, .usage = 1};
    a->seed = -1;
    int rc = mhla_opts_parse(&spec, a, argc, argv, first, err, sizeof err);
    if (rc == 1)
        mhla_opts_help(&spec, stdout);
    if (rc == 1 || rc == 2) /* --help or --version */
        return 0;
    if (rc) {
        fprintf(stderr, "mhla-cli: error: %s\n", err);
        return 2;
    }
    a->params.seed = a->seed;
    return -1;
}

static void write_text(void *ctx, const char *text, size_t len)
{
    int *ends_nl = ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    *ends_nl = text[len - 1] == '\n';
}

static int read_stdin(mhla_buf *s)
{
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0)
        if (mhla_buf_put(s, buf, n))
            return -1;
    return ferror(stdin) ? -1 : mhla_buf_put(s, "", 0);
}

/* The prompt: the words from argv[first] on joined by spaces, or stdin. */
static int read_prompt(int argc, char **argv, int first, mhla_buf *prompt)
{
    if (first >= argc)
        return read_stdin(prompt);
    int bad = 0;
    for (int k = first; k < argc && !bad; k++)
        bad = (k > first && mhla_buf_put(prompt, " ", 1)) ||
              mhla_buf_put(prompt, argv[k], strlen(argv[k]));
    return bad;
}

static void print_stats(const cl_req *r, double end)
{
    long n = cl_req_output_tokens(r);
    fprintf(stderr, "[%ld tokens, time to first token %.1f ms, %.1f tokens/s]\n", n,
            r->got_first ? (r->t_first - r->t_send) * 1000.0 : NAN,
            end > r->t_send ? n / (end - r->t_send) : 0.0);
}

/* Sends the completion and writes its text as it streams; 0 when it completed. */
static int stream_completion(cli_args *a, const char *prompt, char *err)
{
    cl_req r;
    memset(&r, 0, sizeof r);
    char kind[32];
    int ends_nl = 1, status = 1;
    char *pj = cl_json_string(prompt); /* the prompt as a JSON string value */
    a->params.prompt_json = pj;
    if (!pj) {
        snprintf(err, CL_ERR_LEN, "out of memory");
    } else if (cl_req_setup(&r, &a->conn, &a->params, err) == 0) {
        r.on_text = write_text;
        r.text_ctx = &ends_nl;
        r.t_send = mhla_now();
        CURLcode res = curl_easy_perform(r.easy);
        double end = mhla_now();
        if (!ends_nl)
            fputc('\n', stdout);
        fflush(stdout);
        if (cl_req_outcome(&r, res, kind, sizeof kind, err) == 0) {
            status = 0;
            if (a->stats)
                print_stats(&r, end);
        }
    }
    cl_req_free(&r);
    free(pj);
    return status;
}

int cl_cli_main(int argc, char **argv)
{
    cli_args a;
    int first = argc;
    int rc = parse_args(argc, argv, &a, &first);
    if (rc >= 0)
        return rc;
    mhla_buf prompt = {0};
    char err[CL_ERR_LEN];
    if (read_prompt(argc, argv, first, &prompt)) {
        mhla_buf_free(&prompt);
        fprintf(stderr, "mhla-cli: error: cannot read the prompt\n");
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        mhla_buf_free(&prompt);
        fprintf(stderr, "mhla-cli: error: curl_global_init failed\n");
        return 1;
    }
    int status = stream_completion(&a, prompt.p, err);
    if (status)
        fprintf(stderr, "mhla-cli: error: %s\n", err);
    mhla_buf_free(&prompt);
    curl_global_cleanup();
    return status;
}
