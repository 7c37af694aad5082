/* template.c — the public API: compile a template's text into a program,
 * render a program against a JSON context, free. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpl_internal.h"

int mhla_tpl_compile(const char *src, size_t len, mhla_tpl **tpl, char *err, size_t errlen)
{
    *tpl = NULL;
    mhla_tpl *t = calloc(1, sizeof *t);
    if (!t) {
        if (err)
            snprintf(err, errlen, "out of memory");
        return MHLA_TPL_NOMEM;
    }
    tpl_toks toks = {0};
    int rc = tpl_lex(&t->arena, src, len, &toks, err, errlen);
    if (!rc)
        rc = tpl_parse(&t->arena, &toks, &t->root, err, errlen);
    free(toks.t);
    if (rc) {
        mhla_tpl_free(t);
        return rc;
    }
    *tpl = t;
    return 0;
}

static void set_limits(mhla_tpl_limits *lim, const mhla_tpl_limits *given)
{
    if (given)
        *lim = *given;
    else
        memset(lim, 0, sizeof *lim);
    if (!lim->max_output)
        lim->max_output = (size_t)16 << 20;
    if (!lim->max_memory)
        lim->max_memory = (size_t)256 << 20;
    if (lim->max_iterations <= 0)
        lim->max_iterations = 1000000;
    if (lim->max_depth <= 0)
        lim->max_depth = 64;
    if (lim->max_expr_depth <= 0)
        lim->max_expr_depth = 256;
}

/* The context's variables as the render's outermost scope. */
static int load_context(tpl_rt *rt, const cJSON *ctx)
{
    if (!(rt->globals = tpl_scope_new(rt, NULL)))
        return rt->rc;
    if (ctx && !cJSON_IsObject(ctx))
        return tpl_fail(rt, MHLA_TPL_ERROR, 0, "the context is not a JSON object");
    for (const cJSON *c = ctx ? ctx->child : NULL; c; c = c->next) {
        tpl_val *v = tpl_from_json(rt, c);
        if (!v || tpl_scope_set(rt, rt->globals, c->string, v))
            return rt->rc;
    }
    return 0;
}

int mhla_tpl_render(const mhla_tpl *tpl, const cJSON *ctx, const mhla_tpl_limits *limits,
                    char **out, size_t *len, char *err, size_t errlen)
{
    tpl_arena arena = {0};
    mhla_buf buf = {0};
    tpl_rt rt = {.a = &arena, .out = &buf, .err = err, .errlen = errlen};
    *out = NULL;
    *len = 0;
    set_limits(&rt.lim, limits);
    arena.cap = rt.lim.max_memory;
    int rc = load_context(&rt, ctx);
    if (!rc) {
        rt.sc = rt.globals;
        rc = tpl_exec_body(&rt, rt.globals, tpl->root);
        rc = rc < 0 ? (rt.rc ? rt.rc : MHLA_TPL_ERROR) : 0;
    }
    tpl_arena_free(&arena);
    if (!rc && !buf.p && !(buf.p = calloc(1, 1)))
        rc = tpl_fail(&rt, MHLA_TPL_NOMEM, 0, "out of memory");
    if (rc) {
        mhla_buf_free(&buf);
        return rc;
    }
    *out = buf.p;
    *len = buf.len;
    return 0;
}

void mhla_tpl_free(mhla_tpl *tpl)
{
    if (!tpl)
        return;
    tpl_arena_free(&tpl->arena);
    free(tpl);
}
