/*
 * grammar.c — a compiled grammar's life: shared by every row that uses it,
 * freed with its last reference.
 */
#include "grammar_internal.h"

#include <stdatomic.h>
#include <stdlib.h>

void mhla_grammar_retain(mhla_grammar *g)
{
    if (g)
        __atomic_add_fetch(&g->refs, 1, __ATOMIC_RELAXED);
}

void mhla_grammar_free(mhla_grammar *g)
{
    if (!g || __atomic_sub_fetch(&g->refs, 1, __ATOMIC_ACQ_REL) > 0)
        return;
    for (uint32_t r = 0; r < g->n_rules && g->rule_names; r++)
        free(g->rule_names[r]);
    free(g->rule_names);
    free(g->rule_start);
    free(g->elems);
    free(g->classes);
    free(g);
}
