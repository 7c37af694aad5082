/* Test driver: loads a tokenizer, encodes every string of a corpus file (records
 * "<len>\n<bytes>\n"), decodes the ids one-shot and through the streaming decoder, and
 * prints one JSON line per string for compare.mjs to check against the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"
#include "utf8_check.h"

static void put_json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7f)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void put_ids(const int32_t *ids, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ",%ld" : "%ld", (long)ids[i]);
    putchar(']');
}

static int stream_check(const mhla_tokenizer *tok, const int32_t *ids, size_t n, const char *full,
                        size_t full_len, char *why, size_t whylen)
{
    mhla_tok_stream *st;
    char err[256];
    if (mhla_tok_stream_new(tok, 0, &st, err, sizeof err)) {
        snprintf(why, whylen, "%s", err);
        return 0;
    }
    char *acc = malloc(full_len + 64);
    size_t al = 0, cap = full_len + 64;
    int ok = 1;
    for (size_t i = 0; i <= n && ok; i++) {
        const char *p;
        size_t pl;
        int rc = i < n ? mhla_tok_stream_push(st, ids[i], &p, &pl, err, sizeof err)
                       : mhla_tok_stream_finish(st, &p, &pl, err, sizeof err);
        if (rc) {
            snprintf(why, whylen, "%s", err);
            ok = 0;
            break;
        }
        if (!valid_utf8(p, pl)) {
            snprintf(why, whylen, "piece after id #%zu is not valid UTF-8", i);
            ok = 0;
            break;
        }
        if (al + pl > cap) {
            snprintf(why, whylen, "stream produced more text than the one-shot decode");
            ok = 0;
            break;
        }
        memcpy(acc + al, p, pl);
        al += pl;
    }
    if (ok && (al != full_len || memcmp(acc, full, al) != 0)) {
        snprintf(why, whylen, "stream concatenation differs from decode");
        ok = 0;
    }
    free(acc);
    mhla_tok_stream_free(st);
    return ok;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tok_dump tokenizer.json config.json|- corpus.bin\n");
        return 2;
    }
    mhla_tokenizer *tok;
    char err[512];
    if (mhla_tok_load(argv[1], strcmp(argv[2], "-") ? argv[2] : NULL, &tok, err, sizeof err)) {
        fprintf(stderr, "tok_dump: %s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[3], "rb");
    if (!f) {
        perror(argv[3]);
        return 1;
    }
    size_t len;
    while (fscanf(f, "%zu", &len) == 1) {
        if (fgetc(f) != '\n') {
            fprintf(stderr, "tok_dump: bad corpus record\n");
            return 1;
        }
        char *s = malloc(len + 1);
        if (!s || fread(s, 1, len, f) != len || fgetc(f) != '\n') {
            fprintf(stderr, "tok_dump: truncated corpus\n");
            return 1;
        }
        int32_t *ids = NULL, *plain = NULL;
        size_t n = 0, np = 0, tl = 0;
        char *text = NULL, why[256] = "";
        int ok = mhla_tok_encode(tok, s, len, 1, &ids, &n, err, sizeof err) == 0 &&
                 mhla_tok_encode(tok, s, len, 0, &plain, &np, err, sizeof err) == 0 &&
                 mhla_tok_decode(tok, ids, n, 0, &text, &tl, err, sizeof err) == 0;
        if (!ok) {
            printf("{\"error\":");
            put_json_string(err, strlen(err));
            printf("}\n");
        } else {
            int sok = stream_check(tok, ids, n, text, tl, why, sizeof why);
            printf("{\"ids\":");
            put_ids(ids, n);
            printf(",\"plain\":");
            put_ids(plain, np);
            printf(",\"text\":");
            put_json_string(text, tl);
            printf(",\"stream_ok\":%s,\"stream_why\":", sok ? "true" : "false");
            put_json_string(why, strlen(why));
            printf("}\n");
        }
        free(ids);
        free(plain);
        free(text);
        free(s);
    }
    fclose(f);
    mhla_tok_free(tok);
    return 0;
}
