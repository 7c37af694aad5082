/*
 * libFuzzer target for JSON Schema to GBNF (mhla_grammar_schema_to_gbnf).
 * The input is a schema's text. Whatever it holds:
 *   - the conversion returns 0 with a grammar, or a negative MHLA_GRAMMAR_*
 *     code with a message and no grammar;
 *   - converting the same text again gives the same code and the same text
 *     (a grammar can be cached by the schema's hash);
 *   - the grammar text is ASCII, ends with a newline and has a root rule;
 *   - nothing leaks (LeakSanitizer) and nothing aborts.
 */
#include "grammar.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "fuzz_schema: " __VA_ARGS__);                                              \
        fputc('\n', stderr);                                                                       \
        abort();                                                                                   \
    } while (0)

static void check_text(const char *g)
{
    size_t n = strlen(g);
    if (n == 0 || g[n - 1] != '\n')
        FAIL("grammar text does not end with a newline");
    if (strncmp(g, "root ::= ", 9) != 0 && !strstr(g, "\nroot ::= "))
        FAIL("no root rule");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)g[i] >= 0x80)
            FAIL("a byte 0x%02x outside ASCII at %zu", (unsigned char)g[i], i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *a = NULL, *b = NULL;
    mhla_grammar_error ea, eb;
    int ra = mhla_grammar_schema_to_gbnf((const char *)data, size, &a, &ea);
    int rb = mhla_grammar_schema_to_gbnf((const char *)data, size, &b, &eb);
    if (ra != rb)
        FAIL("two conversions returned %d and %d", ra, rb);
    if (ra > 0 || ra < MHLA_GRAMMAR_REJECTED)
        FAIL("return code %d is not 0 or an MHLA_GRAMMAR_* code", ra);
    if (ra != 0 && (a || b || ea.msg[0] == '\0'))
        FAIL("failure %d without a message or with a grammar", ra);
    if (ra != 0 && strcmp(ea.msg, eb.msg) != 0)
        FAIL("two failures differ: '%s' and '%s'", ea.msg, eb.msg);
    if (ra == 0 && (!a || !b || strcmp(a, b) != 0))
        FAIL("two conversions gave different grammars");
    if (ra == 0)
        check_text(a);
    free(a);
    free(b);
    return 0;
}
