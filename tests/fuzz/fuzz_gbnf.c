/*
 * libFuzzer target for the GBNF compiler and the byte automaton (grammar/).
 * The input is a grammar's text. Must hold:
 *   - compiling returns 0 or one of the MHLA_GRAMMAR_* codes; a failure
 *     comes with a message, no grammar, and a position inside the text or -1;
 *   - a compiled grammar's samples (three seeds, at most 256 bytes each) are
 *     whole strings of it to the matcher, and their first halves prefixes,
 *     unless a run-time cap (MHLA_GRAMMAR_LIMIT) stops the matcher; a sample
 *     fails only with MHLA_GRAMMAR_LIMIT;
 *   - matching the raw input against its own grammar ends in a known code;
 *   - no crash, leak, hang or sanitizer error (the caps bound every loop and
 *     allocation).
 */
#include "grammar.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_gbnf: " __VA_ARGS__);                                                \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static int known(int rc)
{
    return rc == MHLA_GRAMMAR_SYNTAX || rc == MHLA_GRAMMAR_UNSUPPORTED ||
           rc == MHLA_GRAMMAR_LIMIT || rc == MHLA_GRAMMAR_NOMEM || rc == MHLA_GRAMMAR_REJECTED;
}

static void check_sample(mhla_grammar *g, uint64_t seed)
{
    char *s = NULL;
    size_t n = 0;
    mhla_grammar_error err;
    int rc = mhla_grammar_sample(g, seed, 256, &s, &n, &err);
    if (rc) {
        if (rc != MHLA_GRAMMAR_LIMIT || s || !err.msg[0])
            FAIL("sample gave %d (%s)", rc, err.msg);
        return;
    }
    if (n > 256 || strlen(s) > n)
        FAIL("a sample of %zu bytes", n);
    rc = mhla_grammar_match(g, s, n, &err);
    if (rc != 1 && rc != MHLA_GRAMMAR_LIMIT)
        FAIL("sample (seed %llu) not matched whole: %d (%s): %s", (unsigned long long)seed, rc,
             err.msg, s);
    rc = mhla_grammar_match(g, s, n / 2, &err);
    if (rc != 0 && rc != 1 && rc != MHLA_GRAMMAR_LIMIT)
        FAIL("half a sample not a prefix: %d (%s)", rc, err.msg);
    free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    int rc = mhla_grammar_from_gbnf((const char *)data, size, NULL, &g, &err);
    if (rc) {
        if (!known(rc) || g || !err.msg[0] || err.pos < -1 || err.pos > (long)size)
            FAIL("compile gave %d, grammar %p, pos %ld, msg '%s'", rc, (void *)g, err.pos, err.msg);
        return 0;
    }
    if (!g)
        FAIL("compile succeeded without a grammar");
    for (uint64_t seed = 1; seed <= 3; seed++)
        check_sample(g, seed);
    rc = mhla_grammar_match(g, (const char *)data, size, &err);
    if (rc != 0 && rc != 1 && !known(rc))
        FAIL("match gave %d", rc);
    mhla_grammar_free(g);
    return 0;
}
