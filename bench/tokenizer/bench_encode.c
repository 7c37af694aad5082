/* Encode throughput of mhla_tokenizer on one text file: loads the tokenizer, encodes the
 * file in 64 KB chunks (cut at newlines) several times and prints MB/s of input text.
 * usage: bench_tokenizer_encode tokenizer.json text.txt [repeats] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "tokenizer.h"

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s tokenizer.json text.txt [repeats]\n", argv[0]);
        return 2;
    }
    int repeats = argc > 3 ? atoi(argv[3]) : 3;
    char err[512];
    mhla_tokenizer *tok;
    if (mhla_tok_load(argv[1], NULL, &tok, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) {
        perror(argv[2]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n);
    if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", argv[2]);
        return 1;
    }
    fclose(f);
    double best = 1e30;
    size_t total_ids = 0;
    for (int r = 0; r < repeats; r++) {
        double t0 = mhla_now();
        total_ids = 0;
        for (long off = 0; off < n;) {
            long end = off + 65536 < n ? off + 65536 : n;
            while (end < n && text[end - 1] != '\n')
                end++;
            int32_t *ids;
            size_t k;
            if (mhla_tok_encode(tok, text + off, (size_t)(end - off), 0, &ids, &k, err,
                                sizeof err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            total_ids += k;
            free(ids);
            off = end;
        }
        double dt = mhla_now() - t0;
        if (dt < best)
            best = dt;
    }
    printf("ours %.2f MB/s (%ld bytes, %zu tokens, best of %d: %.3f s)\n", (double)n / 1e6 / best,
           n, total_ids, repeats, best);
    mhla_tok_free(tok);
    free(text);
    return 0;
}
