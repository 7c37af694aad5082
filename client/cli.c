/*
 * cli.c — mhla-cli: send one completion with stream=true and write the text
 * to stdout as each chunk arrives (flushed per chunk, so a terminal shows it
 * token by token). The prompt is the arguments joined by spaces, or stdin.
 */
#include "client_internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static void help(FILE *f)
{
    fprintf(f, "usage: mhla-cli [options] [PROMPT...]\n"
               "\n"
               "Streams one completion to stdout. Without PROMPT, the prompt is read from stdin.\n"
               "\n"
               "  --url URL           server base URL (default http://127.0.0.1:8080)\n"
               "  --model NAME        \"model\" field to send (default: none)\n"
               "  --api-key KEY       Authorization: Bearer KEY (default: $MHLA_API_KEY)\n"
               "  --max-tokens N      tokens to generate (default 128)\n"
               "  --temperature T     sampling temperature (default: the server's)\n"
               "  --seed N            sampling seed (default: none)\n"
               "  --ignore-eos        keep going past the end-of-sequence token\n"
               "  --stats             token count, time to first token and tokens/s on stderr\n"
               "  --timeout S         request timeout in seconds (default 600)\n"
               "  --help              this text\n");
}

static int usage(const char *msg)
{
    fprintf(stderr, "mhla-cli: error: %s\n", msg);
    return 2;
}

static void write_text(void *ctx, const char *text, size_t len)
{
    int *ends_nl = ctx;
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    *ends_nl = text[len - 1] == '\n';
}

static int number(const char *flag, const char *v, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        char msg[CL_ERR_LEN];
        snprintf(msg, sizeof msg, "%s: '%.64s' is not a number in [%g, %g]", flag, v, lo, hi);
        return usage(msg);
    }
    *out = x;
    return 0;
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

int cl_cli_main(int argc, char **argv)
{
    cl_conn c = {.url = "http://127.0.0.1:8080",
                 .api_key = getenv("MHLA_API_KEY"),
                 .timeout_s = 600};
    cl_req_params p = {.max_tokens = 128, .temperature = -1, .seed = -1, .usage = 1};
    int stats = 0, rc;
    mhla_buf prompt = {0};
    double x;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        const char *f = argv[i];
        if (strcmp(f, "--") == 0) {
            i++;
            break;
        }
        if (strcmp(f, "--help") == 0) {
            help(stdout);
            return 0;
        }
        if (strcmp(f, "--stats") == 0) {
            stats = 1;
            continue;
        }
        if (strcmp(f, "--ignore-eos") == 0) {
            p.ignore_eos = 1;
            continue;
        }
        if (i + 1 >= argc) {
            char msg[CL_ERR_LEN];
            snprintf(msg, sizeof msg, "%.64s needs a value (or is unknown; see --help)", f);
            return usage(msg);
        }
        const char *v = argv[++i];
        if (strcmp(f, "--url") == 0)
            c.url = v;
        else if (strcmp(f, "--model") == 0)
            c.model = v;
        else if (strcmp(f, "--api-key") == 0)
            c.api_key = v;
        else if (strcmp(f, "--max-tokens") == 0) {
            if ((rc = number(f, v, 1, 1e7, &x)))
                return rc;
            p.max_tokens = (long)x;
        } else if (strcmp(f, "--temperature") == 0) {
            if ((rc = number(f, v, 0, 100, &p.temperature)))
                return rc;
        } else if (strcmp(f, "--seed") == 0) {
            if ((rc = number(f, v, 0, 9007199254740992.0, &x)))
                return rc;
            p.seed = (long long)x;
        } else if (strcmp(f, "--timeout") == 0) {
            if ((rc = number(f, v, 0, 1e6, &c.timeout_s)))
                return rc;
        } else {
            char msg[CL_ERR_LEN];
            snprintf(msg, sizeof msg, "unknown option '%.64s' (see --help)", f);
            return usage(msg);
        }
    }
    int bad = 0;
    if (i < argc) {
        for (int k = i; k < argc && !bad; k++)
            bad = (k > i && mhla_buf_put(&prompt, " ", 1)) ||
                  mhla_buf_put(&prompt, argv[k], strlen(argv[k]));
    } else {
        bad = read_stdin(&prompt);
    }
    if (bad) {
        mhla_buf_free(&prompt);
        fprintf(stderr, "mhla-cli: error: cannot read the prompt\n");
        return 1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        mhla_buf_free(&prompt);
        fprintf(stderr, "mhla-cli: error: curl_global_init failed\n");
        return 1;
    }
    /* the prompt as a JSON string value */
    char *pj = NULL;
    cl_req r;
    memset(&r, 0, sizeof r);
    char err[CL_ERR_LEN], kind[32];
    int ends_nl = 1, status = 1;
    pj = cl_json_string(prompt.p);
    p.prompt_json = pj;
    if (!pj) {
        snprintf(err, sizeof err, "out of memory");
    } else if (cl_req_setup(&r, &c, &p, err) == 0) {
        r.on_text = write_text;
        r.text_ctx = &ends_nl;
        r.t_send = cl_now();
        CURLcode res = curl_easy_perform(r.easy);
        double end = cl_now();
        if (!ends_nl)
            fputc('\n', stdout);
        fflush(stdout);
        if (cl_req_outcome(&r, res, kind, sizeof kind, err) == 0) {
            status = 0;
            long n = cl_req_output_tokens(&r);
            if (stats)
                fprintf(stderr, "[%ld tokens, time to first token %.1f ms, %.1f tokens/s]\n", n,
                        r.got_first ? (r.t_first - r.t_send) * 1000.0 : NAN,
                        end > r.t_send ? n / (end - r.t_send) : 0.0);
        }
    }
    if (status)
        fprintf(stderr, "mhla-cli: error: %s\n", err);
    cl_req_free(&r);
    free(pj);
    mhla_buf_free(&prompt);
    curl_global_cleanup();
    return status;
}
