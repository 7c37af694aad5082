/*
 * mask_util.c — small helpers the mask code shares: error messages, and
 * arrays of scratch stack sets (zeroed, so gr_stacks_advance may fill them
 * and then reuse their memory from step to step).
 */
#include "mask_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

int gr_mask_err(mhla_grammar_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    err->pos = -1;
    err->path[0] = '\0';
    return code;
}

gr_stacks *gr_mask_sets_new(size_t n) { return calloc(n ? n : 1, sizeof(gr_stacks)); }

void gr_mask_sets_free(gr_stacks *sets, size_t n)
{
    if (!sets)
        return;
    for (size_t i = 0; i < n; i++)
        gr_stacks_free(&sets[i]);
    free(sets);
}
