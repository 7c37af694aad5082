/* mhla-grammar: compile a grammar and report its errors with their place,
 * match a text against it, or write random strings of it.
 * The flags are rows of base's option table (mhla_opts). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "grammar.h"

#define MAX_INPUT_BYTES ((size_t)64 << 20)

/* What the grammar file holds: a switch so that more input kinds can join. */
enum { INPUT_GBNF };
static const char *const input_words[] = {"gbnf", NULL};

typedef struct {
    int input;
    const char *root, *text, *file;
    long seed, count;
    size_t max_bytes;
} gr_args;

#define ARG(field) offsetof(gr_args, field)
static const mhla_opt rows[] = {
    {.name = "input",
     .kind = MHLA_OPT_ENUM,
     .off = ARG(input),
     .words = input_words,
     .metavar = "gbnf",
     .help = "what FILE holds (default gbnf: llama.cpp's GBNF)"},
    {.name = "root",
     .kind = MHLA_OPT_STRING,
     .off = ARG(root),
     .metavar = "NAME",
     .help = "the start rule (default root)"},
    {.kind = MHLA_OPT_TEXT, .help = "match:"},
    {.name = "text",
     .kind = MHLA_OPT_STRING,
     .off = ARG(text),
     .metavar = "STR",
     .help = "the text to match"},
    {.name = "file",
     .kind = MHLA_OPT_STRING,
     .off = ARG(file),
     .metavar = "F",
     .help = "match the bytes of file F"},
    {.kind = MHLA_OPT_TEXT, .help = "sample:"},
    {.name = "seed",
     .kind = MHLA_OPT_LONG,
     .off = ARG(seed),
     .lo = 0,
     .hi = 9e18,
     .metavar = "N",
     .help = "the first sample's seed (default 1; sample i uses N + i)"},
    {.name = "count",
     .kind = MHLA_OPT_LONG,
     .off = ARG(count),
     .lo = 1,
     .hi = 1e6,
     .metavar = "K",
     .help = "samples to write (default 1)"},
    {.name = "max-bytes",
     .kind = MHLA_OPT_SIZE,
     .off = ARG(max_bytes),
     .lo = 0,
     .hi = 1e9,
     .metavar = "N",
     .help = "the most bytes of a sample (default 1024)"},
};

static const mhla_opts spec = {
    .usage = "usage: mhla-grammar check FILE [--input gbnf] [--root NAME]\n"
             "       mhla-grammar match FILE (--text STR | --file F)\n"
             "       mhla-grammar sample FILE [--seed N] [--count K] [--max-bytes N]\n"
             "check compiles FILE (exit 0) or names the fault with its line and column\n"
             "(exit 1). match exits 0 when the text is a whole string of the grammar, 3\n"
             "when it is only the start of one, 1 when it is neither. sample writes each\n"
             "sample on its own line as a JSON string (quoted, escaped).\n"
             "Usage errors and grammars that do not compile exit 2 (check: 1).\n\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 20,
};

/* "line L, column C" of offset pos in text. */
static void line_col(const char *text, size_t len, long pos, long *line, long *col)
{
    *line = 1, *col = 1;
    for (long i = 0; i < pos && (size_t)i < len; i++) {
        *col = text[i] == '\n' ? 1 : *col + 1;
        *line += text[i] == '\n';
    }
}

/* The grammar in path, compiled as its input kind says; 0, or 1 with the
 * fault written to stderr as path:line:column: message. */
static int load(const char *path, const gr_args *a, mhla_grammar **g)
{
    char *text, msg[512];
    size_t len;
    if (mhla_read_file(path, MAX_INPUT_BYTES, &text, &len, msg, sizeof msg)) {
        fprintf(stderr, "mhla-grammar: %s\n", msg);
        return 1;
    }
    mhla_grammar_error err;
    int rc = -1;
    switch (a->input) {
    case INPUT_GBNF: rc = mhla_grammar_from_gbnf(text, len, a->root, g, &err); break;
    }
    if (rc) {
        long line = 0, col = 0;
        if (err.pos >= 0)
            line_col(text, len, err.pos, &line, &col);
        if (err.pos >= 0)
            fprintf(stderr, "%s:%ld:%ld: %s\n", path, line, col, err.msg);
        else
            fprintf(stderr, "%s: %s\n", path, err.msg);
    }
    free(text);
    return rc ? 1 : 0;
}

static int cmd_check(mhla_grammar *g, const char *path)
{
    (void)g;
    printf("%s: ok\n", path);
    return 0;
}

static int cmd_match(mhla_grammar *g, const gr_args *a)
{
    char *buf = NULL, msg[512];
    size_t len = a->text ? strlen(a->text) : 0;
    if (a->file && mhla_read_file(a->file, MAX_INPUT_BYTES, &buf, &len, msg, sizeof msg)) {
        fprintf(stderr, "mhla-grammar: %s\n", msg);
        return 2;
    }
    mhla_grammar_error err;
    int rc = mhla_grammar_match(g, a->file ? buf : a->text, len, &err);
    free(buf);
    if (rc == 1) {
        printf("whole\n");
        return 0;
    }
    if (rc == 0) {
        printf("prefix\n");
        return 3;
    }
    printf("rejected: %s\n", err.msg);
    return rc == MHLA_GRAMMAR_REJECTED ? 1 : 2;
}

/* s[0, n) as a JSON string on its own line. */
static void put_json(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *e = c == '"'    ? "\\\""
                        : c == '\\' ? "\\\\"
                        : c == '\n' ? "\\n"
                        : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t"
                                    : NULL;
        if (e)
            fputs(e, stdout);
        else if (c < 0x20 || c == 0x7F)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    fputs("\"\n", stdout);
}

static int cmd_sample(mhla_grammar *g, const gr_args *a)
{
    for (long i = 0; i < a->count; i++) {
        char *s;
        size_t n;
        mhla_grammar_error err;
        if (mhla_grammar_sample(g, (uint64_t)a->seed + (uint64_t)i, a->max_bytes, &s, &n, &err)) {
            fprintf(stderr, "mhla-grammar: sample %ld: %s\n", i, err.msg);
            return 1;
        }
        put_json(s, n);
        free(s);
    }
    return 0;
}

static int usage_error(const char *why)
{
    fprintf(stderr, "mhla-grammar: %s (see --help)\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    gr_args a = {.seed = 1, .count = 1, .max_bytes = 1024};
    char err[256];
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        mhla_opts_help(&spec, stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--version")) {
        mhla_opts_version(&spec);
        return 0;
    }
    const char *cmd = argc >= 2 ? argv[1] : "";
    if (strcmp(cmd, "check") && strcmp(cmd, "match") && strcmp(cmd, "sample"))
        return usage_error("the first argument is check, match or sample");
    if (argc < 3 || argv[2][0] == '-')
        return usage_error("FILE missing after the command");
    /* FILE stands where parse expects the program's name: the flags follow it */
    int rc = mhla_opts_parse(&spec, &a, argc - 2, argv + 2, NULL, err, sizeof err);
    if (rc == 1)
        mhla_opts_help(&spec, stdout);
    if (rc)
        return rc > 0 ? 0 : usage_error(err); /* --help or --version: exit 0 */
    if (!strcmp(cmd, "match") && !a.text == !a.file)
        return usage_error("match takes one of --text and --file");
    mhla_grammar *g = NULL;
    if (load(argv[2], &a, &g))
        return !strcmp(cmd, "check") ? 1 : 2;
    rc = !strcmp(cmd, "check")   ? cmd_check(g, argv[2])
         : !strcmp(cmd, "match") ? cmd_match(g, &a)
                                 : cmd_sample(g, &a);
    mhla_grammar_free(g);
    return rc;
}
