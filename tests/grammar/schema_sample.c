/*
 * schema_sample.c — the corpus test's driver: each JSON Schema file compiled
 * (mhla_grammar_from_json_schema) and sampled N times with seeds SEED,
 * SEED+1, … (mhla_grammar_sample), each sample checked to be a whole string
 * of its grammar (mhla_grammar_match).
 *
 *   schema_sample N SEED FILE...
 *
 * Output, per file: "# FILE ok" or "# FILE error CODE<TAB>MESSAGE<TAB>PATH",
 * then per sample "S LEN" and the LEN bytes on the next line, or "L MESSAGE"
 * when no sample fit the length cap, or "M MESSAGE" when a sample did not
 * match its own grammar. Exit 0 unless a file could not be read.
 */
#include "grammar.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SAMPLE (1u << 16) /* bytes of one sample */

static char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    *n = 0;
    for (;;) {
        if (*n + 4096 > cap) {
            char *p = realloc(buf, cap = cap * 2 + 8192);
            if (!p)
                break;
            buf = p;
        }
        size_t got = fread(buf + *n, 1, cap - *n, f);
        *n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    return buf;
}

static void one_sample(mhla_grammar *g, uint64_t seed)
{
    char *s = NULL;
    size_t len = 0;
    mhla_grammar_error err;
    int rc = mhla_grammar_sample(g, seed, MAX_SAMPLE, &s, &len, &err);
    if (rc != 0) {
        printf("L %s\n", err.msg);
        return;
    }
    if (mhla_grammar_match(g, s, len, &err) != 1)
        printf("M sample %llu is not a whole string of its grammar\n", (unsigned long long)seed);
    printf("S %zu\n", len);
    fwrite(s, 1, len, stdout);
    putchar('\n');
    free(s);
}

static int one_file(const char *path, int n, uint64_t seed)
{
    size_t len;
    char *text = slurp(path, &len);
    if (!text) {
        fprintf(stderr, "schema_sample: cannot read %s\n", path);
        return 1;
    }
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    int rc = mhla_grammar_from_json_schema(text, len, &g, &err);
    free(text);
    if (rc != 0) {
        printf("# %s error %d\t%s\t%s\n", path, rc, err.msg, err.path);
        return 0;
    }
    printf("# %s ok\n", path);
    for (int i = 0; i < n; i++)
        one_sample(g, seed + (uint64_t)i);
    mhla_grammar_free(g);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: schema_sample N SEED FILE...\n");
        return 2;
    }
    int n = atoi(argv[1]), bad = 0;
    uint64_t seed = strtoull(argv[2], NULL, 10);
    for (int a = 3; a < argc; a++)
        bad |= one_file(argv[a], n, seed);
    return bad;
}
