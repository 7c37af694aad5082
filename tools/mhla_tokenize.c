/* mhla-tokenize: encode stdin to ids, decode ids to text, or train a byte-level BPE. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tokenizer.h"

#define MAX_STDIN_BYTES ((size_t)1 << 31)

static void usage(FILE *f)
{
    fprintf(
        f, "usage: mhla-tokenize encode --tokenizer FILE [--config FILE] [--no-special]\n"
           "       mhla-tokenize decode --tokenizer FILE [--config FILE] [--skip-special]\n"
           "       mhla-tokenize train --vocab-size N --out tokenizer.json FILES...\n"
           "encode reads all of stdin as UTF-8 and prints the ids on one line; decode reads\n"
           "whitespace-separated ids from stdin and writes the text. A tokenizer_config.json next\n"
           "to the tokenizer file is used unless --config names another (or --config none).\n");
}

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

static int cmd_decode(const char *path, const char *config, int skip_special)
{
    mhla_tokenizer *tok;
    if (load(path, config, &tok))
        return 1;
    size_t len;
    char *in = read_stdin(&len), err[512];
    if (!in) {
        fprintf(stderr, "mhla-tokenize: cannot read stdin: %s\n", strerror(errno));
        mhla_tok_free(tok);
        return 1;
    }
    size_t n = 0, cap = 1024;
    int32_t *ids = malloc(cap * sizeof *ids);
    char *p = in;
    int rc = 1;
    if (!ids)
        goto done;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
            p++;
        if (!*p)
            break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX ||
            (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
            fprintf(stderr, "mhla-tokenize: decode: \"%.20s\" is not a token id\n", p);
            goto done;
        }
        if (n == cap) {
            int32_t *q = realloc(ids, 2 * cap * sizeof *q);
            if (!q)
                goto done;
            ids = q;
            cap *= 2;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if ((size_t)(p - in) != len) {
        fprintf(stderr, "mhla-tokenize: decode: NUL byte in input\n");
        goto done;
    }
    char *text;
    size_t tl;
    if (mhla_tok_decode(tok, ids, n, skip_special, &text, &tl, err, sizeof err)) {
        fprintf(stderr, "mhla-tokenize: %s\n", err);
        goto done;
    }
    rc = write_all(text, tl) || fflush(stdout) ? 1 : 0;
    free(text);
done:
    free(ids);
    free(in);
    mhla_tok_free(tok);
    return rc;
}

static int cmd_train(int argc, char **argv)
{
    long vocab = 0;
    const char *out = NULL;
    int i = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab-size") && i + 1 < argc) {
            char *end;
            vocab = strtol(argv[++i], &end, 10);
            if (*end || vocab <= 0) {
                fprintf(stderr, "mhla-tokenize: --vocab-size needs a positive integer\n");
                return 2;
            }
        } else if (!strcmp(argv[i], "--out") && i + 1 < argc) {
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, "mhla-tokenize: train: unknown option %s\n", argv[i]);
            return 2;
        } else
            break;
    }
    if (!vocab || !out || i >= argc) {
        usage(stderr);
        return 2;
    }
    char err[512];
    if (mhla_tok_train_bpe((const char *const *)(argv + i), (size_t)(argc - i), (size_t)vocab, out,
                           err, sizeof err)) {
        fprintf(stderr, "mhla-tokenize: train: %s\n", err);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "train"))
        return cmd_train(argc - 2, argv + 2);
    const char *path = NULL, *config = NULL;
    int no_special = 0, skip_special = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--tokenizer") && i + 1 < argc)
            path = argv[++i];
        else if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
        else if (!strcmp(argv[i], "--no-special"))
            no_special = 1;
        else if (!strcmp(argv[i], "--skip-special"))
            skip_special = 1;
        else {
            fprintf(stderr, "mhla-tokenize: unknown argument %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "encode"))
        return cmd_encode(path, config, !no_special);
    if (!strcmp(argv[1], "decode"))
        return cmd_decode(path, config, skip_special);
    fprintf(stderr, "mhla-tokenize: unknown command %s\n", argv[1]);
    usage(stderr);
    return 2;
}
