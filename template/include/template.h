/*
 * template.h — a Jinja2 template renderer for chat templates: a template's
 * text is compiled once into a program, then rendered against a context
 * (a cJSON object: messages, tools, add_generation_prompt, bos_token, ...)
 * into text byte-identical to Python's jinja2 as Hugging Face transformers
 * sets it up (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
 * loopcontrols, tojson with ensure_ascii=False, raise_exception,
 * strftime_now). What is supported is listed in template/README.md.
 *
 * Sandboxed: a template reads nothing but its context and does no I/O.
 * Bounded: a render stops with MHLA_TPL_LIMIT past any cap of its limits.
 * Every call returns a code the caller must check; nothing aborts, and on
 * any failure everything allocated so far is freed.
 */
#ifndef MHLA_TEMPLATE_H
#define MHLA_TEMPLATE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes: 0 success, else one of these (err says what and, where it
 * can, on which line of the template). */
enum {
    MHLA_TPL_ERROR = -1,  /* a syntax error, or an error while rendering */
    MHLA_TPL_RAISED = -2, /* the template called raise_exception(msg): err is msg */
    MHLA_TPL_LIMIT = -3,  /* a cap of mhla_tpl_limits was reached */
    MHLA_TPL_NOMEM = -4,  /* out of memory */
};

/* Caps on one render; a field left 0 takes its default. */
typedef struct {
    size_t max_output;   /* bytes of rendered text (default 16 MiB) */
    size_t max_memory;   /* bytes of values a render may hold (default 256 MiB) */
    long max_iterations; /* loop iterations of all loops together (default 1,000,000) */
    int max_depth;       /* nested macro calls and blocks captured by set (default 64) */
    int max_expr_depth;  /* expressions and blocks nested at once, through macro calls
                          * too: what bounds the stack (default 256) */
} mhla_tpl_limits;

typedef struct mhla_tpl mhla_tpl;

/* Compiles src[0..len) (UTF-8). On success *tpl is the program (free it
 * with mhla_tpl_free); else *tpl is NULL and err (may be NULL) says why.
 * Statements and expressions nest at most 200 deep in a template's text. */
int mhla_tpl_compile(const char *src, size_t len, mhla_tpl **tpl, char *err, size_t errlen);

/* Renders tpl with the variables of ctx (a cJSON object; NULL: none) and
 * the globals range, dict, namespace, raise_exception and strftime_now.
 * limits may be NULL (all defaults). On success *out is the text (malloc'd,
 * NUL-terminated, *len bytes before the NUL; free it); else *out is NULL
 * and err says why. A compiled program is read-only: many threads may
 * render it at once.
 *
 * strftime_now(fmt) formats the current local time; when the environment
 * variable MHLA_TPL_FAKE_TIME holds seconds since the epoch, that time is
 * used instead (the tests render with a fixed date). */
int mhla_tpl_render(const mhla_tpl *tpl, const cJSON *ctx, const mhla_tpl_limits *limits,
                    char **out, size_t *len, char *err, size_t errlen);

void mhla_tpl_free(mhla_tpl *tpl);

#ifdef __cplusplus
}
#endif
#endif
