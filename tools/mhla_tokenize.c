/* mhla-tokenize: encode stdin to ids, decode ids to text, train a byte-level BPE, or
 * render a chat template.
 * The flags are rows of base's option table (mhla_opts). */
#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "template.h"
#include "tokenizer.h"

#define MAX_STDIN_BYTES ((size_t)1 << 31)

/* Every command's flags; main refuses those of another command. */
typedef struct {
    const char *tokenizer, *config, *out;
    int no_special, skip_special;
    long vocab_size;
    const char *template, *messages, *tools, *bos_token, *eos_token;
    int add_generation_prompt;
} tok_args;

#define ARG(field) offsetof(tok_args, field)
static const mhla_opt rows[] = {
    {.kind = MHLA_OPT_TEXT, .help = "encode and decode:"},
    {.name = "tokenizer",
     .kind = MHLA_OPT_STRING,
     .off = ARG(tokenizer),
     .metavar = "FILE",
     .help = "tokenizer.json (required)"},
    {.name = "config",
     .kind = MHLA_OPT_STRING,
     .off = ARG(config),
     .metavar = "FILE",
     .help = "tokenizer_config.json (default: the one next to the\n"
             "tokenizer file, when present; none: no config)"},
    {.name = "no-special",
     .kind = MHLA_OPT_FLAG,
     .off = ARG(no_special),
     .help = "encode: add no special tokens (BOS)"},
    {.name = "skip-special",
     .kind = MHLA_OPT_FLAG,
     .off = ARG(skip_special),
     .help = "decode: leave special tokens out of the text"},
    {.kind = MHLA_OPT_TEXT, .help = "train:"},
    {.name = "vocab-size",
     .kind = MHLA_OPT_LONG,
     .off = ARG(vocab_size),
     .lo = 1,
     .hi = 2147483647.0,
     .metavar = "N",
     .help = "tokens in the trained vocabulary (required)"},
    {.name = "out",
     .kind = MHLA_OPT_STRING,
     .off = ARG(out),
     .metavar = "FILE",
     .help = "where the trained tokenizer.json goes (required)"},
    {.kind = MHLA_OPT_TEXT, .help = "apply-template:"},
    {.name = "template",
     .kind = MHLA_OPT_STRING,
     .off = ARG(template),
     .metavar = "FILE",
     .help = "the chat template, Jinja2 (required)"},
    {.name = "messages",
     .kind = MHLA_OPT_STRING,
     .off = ARG(messages),
     .metavar = "FILE",
     .help = "the conversation: a JSON array of messages (required)"},
    {.name = "tools",
     .kind = MHLA_OPT_STRING,
     .off = ARG(tools),
     .metavar = "FILE",
     .help = "a JSON array of tool definitions"},
    {.name = "add-generation-prompt",
     .kind = MHLA_OPT_FLAG,
     .off = ARG(add_generation_prompt),
     .help = "end with the assistant turn's opening"},
    {.name = "bos-token",
     .kind = MHLA_OPT_STRING,
     .off = ARG(bos_token),
     .metavar = "TEXT",
     .help = "the template's bos_token"},
    {.name = "eos-token",
     .kind = MHLA_OPT_STRING,
     .off = ARG(eos_token),
     .metavar = "TEXT",
     .help = "the template's eos_token"},
};
#undef ARG

static const mhla_opts spec = {
    .usage =
        "usage: mhla-tokenize encode --tokenizer FILE [--config FILE] [--no-special]\n"
        "       mhla-tokenize decode --tokenizer FILE [--config FILE] [--skip-special]\n"
        "       mhla-tokenize train --vocab-size N --out tokenizer.json FILES...\n"
        "       mhla-tokenize apply-template --template FILE --messages FILE [--tools FILE]\n"
        "                     [--add-generation-prompt] [--bos-token TEXT] [--eos-token TEXT]\n"
        "encode reads all of stdin as UTF-8 and prints the ids on one line; decode reads\n"
        "whitespace-separated ids from stdin and writes the text. A tokenizer_config.json "
        "next\n"
        "to the tokenizer file is used unless --config names another (or --config none).\n"
        "apply-template writes the rendered text to stdout as it is (no newline added).\n"
        "\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 22,
};

static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        return NULL;
    for (;;) {
        if (n == cap) {
            if (cap >= MAX_STDIN_BYTES) {
                free(buf);
                errno = EFBIG;
                return NULL;
            }
            char *p = realloc(buf, cap * 2 + 1);
            if (!p) {
                free(buf);
                return NULL;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t r = read(STDIN_FILENO, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            free(buf);
            return NULL;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static int load(const char *path, const char *config, mhla_tokenizer **tok)
{
    char err[512], guess[4096];
    if (!config) {
        /* default: tokenizer_config.json in the same directory, when present */
        const char *slash = strrchr(path, '/');
        int dir = slash ? (int)(slash - path + 1) : 0;
        snprintf(guess, sizeof guess, "%.*stokenizer_config.json", dir, path);
        if (access(guess, R_OK) == 0)
            config = guess;
    } else if (!strcmp(config, "none")) {
        config = NULL;
    }
    if (mhla_tok_load(path, config, tok, err, sizeof err)) {
        fprintf(stderr, "mhla-tokenize: %s\n", err);
        return -1;
    }
    return 0;
}

static int write_all(const char *s, size_t n)
{
    while (n) {
        size_t w = fwrite(s, 1, n, stdout);
        if (w == 0)
            return -1;
        s += w;
        n -= w;
    }
    return 0;
}

static int cmd_encode(const char *path, const char *config, int add_special)
{
    mhla_tokenizer *tok;
    if (load(path, config, &tok))
        return 1;
    size_t len;
    char *text = read_stdin(&len), err[512];
    if (!text) {
        fprintf(stderr, "mhla-tokenize: cannot read stdin: %s\n", strerror(errno));
        mhla_tok_free(tok);
        return 1;
    }
    int32_t *ids;
    size_t n;
    int rc = mhla_tok_encode(tok, text, len, add_special, &ids, &n, err, sizeof err);
    free(text);
    if (rc) {
        fprintf(stderr, "mhla-tokenize: %s\n", err);
        mhla_tok_free(tok);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? " %ld" : "%ld", (long)ids[i]);
    printf("\n");
    free(ids);
    mhla_tok_free(tok);
    return fflush(stdout) == 0 ? 0 : 1;
}

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* The whitespace-separated ids in in[0..len) (NUL-terminated); 0, or -1 with
 * the message printed. */
static int parse_ids(const char *in, size_t len, int32_t **ids, int *n)
{
    const char *p = in;
    int cap = 0;
    for (*n = 0;;) {
        while (is_space(*p))
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || (*end && !is_space(*end))) {
            fprintf(stderr, "mhla-tokenize: decode: \"%.20s\" is not a token id\n", p);
            return -1;
        }
        if (mhla_grow(ids, sizeof **ids, &cap, *n + 1)) {
            fprintf(stderr, "mhla-tokenize: decode: out of memory\n");
            return -1;
        }
        (*ids)[(*n)++] = (int32_t)v;
        p = end;
    }
    if ((size_t)(p - in) != len) {
        fprintf(stderr, "mhla-tokenize: decode: NUL byte in input\n");
        return -1;
    }
    return 0;
}

static int cmd_decode(const char *path, const char *config, int skip_special)
{
    mhla_tokenizer *tok;
    if (load(path, config, &tok))
        return 1;
    size_t len, tl;
    char *in = read_stdin(&len), *text, err[512];
    if (!in) {
        fprintf(stderr, "mhla-tokenize: cannot read stdin: %s\n", strerror(errno));
        mhla_tok_free(tok);
        return 1;
    }
    int32_t *ids = NULL;
    int n = 0, rc = 1;
    if (parse_ids(in, len, &ids, &n) == 0) {
        if (mhla_tok_decode(tok, ids, (size_t)n, skip_special, &text, &tl, err, sizeof err)) {
            fprintf(stderr, "mhla-tokenize: %s\n", err);
        } else {
            rc = write_all(text, tl) || fflush(stdout) ? 1 : 0;
            free(text);
        }
    }
    free(ids);
    free(in);
    mhla_tok_free(tok);
    return rc;
}

static int cmd_train(const tok_args *a, int n_files, char **files)
{
    char err[512];
    if (mhla_tok_train_bpe((const char *const *)files, (size_t)n_files, (size_t)a->vocab_size,
                           a->out, err, sizeof err)) {
        fprintf(stderr, "mhla-tokenize: train: %s\n", err);
        return 1;
    }
    return 0;
}

/* A JSON file's value into obj under key; 0, or -1 with the message printed. */
static int add_json_file(cJSON *obj, const char *key, const char *path)
{
    char *text, err[512];
    size_t len;
    if (mhla_read_file(path, (size_t)1 << 28, &text, &len, err, sizeof err)) {
        fprintf(stderr, "mhla-tokenize: %s\n", err);
        return -1;
    }
    cJSON *v = cJSON_ParseWithLength(text, len);
    free(text);
    if (!v) {
        fprintf(stderr, "mhla-tokenize: %s is not JSON\n", path);
        return -1;
    }
    cJSON_AddItemToObject(obj, key, v);
    return 0;
}

static cJSON *template_context(const tok_args *a)
{
    cJSON *ctx = cJSON_CreateObject();
    if (!ctx || add_json_file(ctx, "messages", a->messages) ||
        (a->tools && add_json_file(ctx, "tools", a->tools)) ||
        !cJSON_AddBoolToObject(ctx, "add_generation_prompt", a->add_generation_prompt) ||
        (a->bos_token && !cJSON_AddStringToObject(ctx, "bos_token", a->bos_token)) ||
        (a->eos_token && !cJSON_AddStringToObject(ctx, "eos_token", a->eos_token))) {
        cJSON_Delete(ctx);
        return NULL;
    }
    return ctx;
}

static int cmd_apply_template(const tok_args *a)
{
    char *src, *out = NULL, err[1024];
    size_t len, out_len;
    if (mhla_read_file(a->template, (size_t)1 << 24, &src, &len, err, sizeof err)) {
        fprintf(stderr, "mhla-tokenize: %s\n", err);
        return 1;
    }
    mhla_tpl *tpl = NULL;
    cJSON *ctx = NULL;
    int rc = mhla_tpl_compile(src, len, &tpl, err, sizeof err);
    free(src);
    if (!rc && !(ctx = template_context(a)))
        rc = 1, err[0] = 0;
    if (!rc)
        rc = mhla_tpl_render(tpl, ctx, NULL, &out, &out_len, err, sizeof err);
    if (!rc)
        rc = write_all(out, out_len) || fflush(stdout) ? 1 : 0;
    else if (err[0])
        fprintf(stderr, "mhla-tokenize: apply-template: %s%s\n",
                rc == MHLA_TPL_RAISED ? "the template raised: " : "", err);
    free(out);
    cJSON_Delete(ctx);
    mhla_tpl_free(tpl);
    return rc ? 1 : 0;
}

/* What a command needs and takes of the flags; NULL when they fit. */
static const char *misfit(int train, const tok_args *a, int n_files)
{
    int tpl_flags = a->template || a->messages || a->tools || a->add_generation_prompt ||
                    a->bos_token || a->eos_token;
    if (train < 0)
        return !a->template || !a->messages ? "apply-template needs --template and --messages"
               : a->tokenizer || a->config || a->no_special || a->skip_special || a->vocab_size ||
                       a->out
                   ? "apply-template takes only its own flags"
                   : NULL;
    if (tpl_flags)
        return "--template, --messages, --tools, ... are apply-template's flags";
    if (train && (a->tokenizer || a->config || a->no_special || a->skip_special))
        return "train takes --vocab-size, --out and the input files only";
    if (train && (!a->vocab_size || !a->out || n_files < 1))
        return "train needs --vocab-size N, --out FILE and at least one input file";
    if (!train && (a->vocab_size || a->out))
        return "--vocab-size and --out are train's flags";
    if (!train && !a->tokenizer)
        return "encode and decode need --tokenizer FILE";
    return NULL;
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "mhla-tokenize: error: %s (see --help)\n", msg);
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        mhla_opts_help(&spec, argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        mhla_opts_version(&spec);
        return 0;
    }
    const char *cmd = argv[1], *why;
    int train = !strcmp(cmd, "train") ? 1 : !strcmp(cmd, "apply-template") ? -1 : 0;
    int first = 1, rc;
    if (!train && strcmp(cmd, "encode") && strcmp(cmd, "decode")) {
        fprintf(stderr, "mhla-tokenize: error: unknown command '%.64s' (see --help)\n", cmd);
        return 2;
    }
    tok_args a = {0};
    char err[256];
    rc = mhla_opts_parse(&spec, &a, argc - 1, argv + 1, train > 0 ? &first : NULL, err, sizeof err);
    if (rc == 1)
        mhla_opts_help(&spec, stdout);
    if (rc == 1 || rc == 2) /* --help or --version */
        return 0;
    if (rc)
        return usage_error(err);
    if ((why = misfit(train, &a, argc - 1 - first)))
        return usage_error(why);
    if (train < 0)
        return cmd_apply_template(&a);
    if (train)
        return cmd_train(&a, argc - 1 - first, argv + 1 + first);
    if (!strcmp(cmd, "encode"))
        return cmd_encode(a.tokenizer, a.config, !a.no_special);
    return cmd_decode(a.tokenizer, a.config, a.skip_special);
}
