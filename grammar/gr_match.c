/*
 * gr_match.c — whole strings against a grammar: the matcher of tests and
 * tools (mhla_grammar_match), the stacks run over every byte.
 */
#include "gr_core.h"

int mhla_grammar_match(const mhla_grammar *g, const char *s, size_t n, mhla_grammar_error *err)
{
    if (err)
        *err = (mhla_grammar_error){.pos = -1};
    if (!g || (!s && n))
        return gr_fail(err, MHLA_GRAMMAR_SYNTAX, -1, "match needs a grammar and a string");
    gr_stacks a = {0}, b = {0};
    int rc = gr_stacks_start(g, &a, err);
    for (size_t i = 0; i < n && !rc; i++) {
        rc = gr_stacks_advance(g, &a, (unsigned char)s[i], &b, err);
        gr_stacks t = a;
        a = b;
        b = t;
        if (!rc && a.n == 0)
            rc = gr_fail(err, MHLA_GRAMMAR_REJECTED, (long)i,
                         "byte %zu (0x%02X) cannot continue the string", i, (unsigned char)s[i]);
    }
    if (!rc)
        rc = gr_stacks_accepting(&a);
    gr_stacks_free(&a);
    gr_stacks_free(&b);
    return rc;
}
