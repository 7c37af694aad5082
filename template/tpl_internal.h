/* tpl_internal.h — the template module's private types: the arena every
 * program and render allocates from, tokens, the syntax tree, values and
 * the run-time state of a render. */
#ifndef TPL_INTERNAL_H
#define TPL_INTERNAL_H

#include <stddef.h>

#include "base.h"
#include "template.h"

#define TPL_MAX_PARSE_DEPTH 200

/* ---- arena (tpl_arena.c) ---- */
typedef struct tpl_chunk tpl_chunk;
typedef struct {
    tpl_chunk *head;
    size_t used, cap; /* cap 0: no cap */
    int over;         /* 1 when an allocation failed for the cap, 2 for memory */
} tpl_arena;

void *tpl_alloc(tpl_arena *a, size_t n); /* zeroed; NULL when over the cap or out of memory */
char *tpl_strdup(tpl_arena *a, const char *s, size_t n);
void tpl_arena_free(tpl_arena *a);

/* ---- tokens (tpl_lex.c) ---- */
enum {
    T_EOF,
    T_TEXT,
    T_VAR_BEGIN,
    T_VAR_END,
    T_BLOCK_BEGIN,
    T_BLOCK_END,
    T_NAME,
    T_STRING,
    T_INT,
    T_FLOAT,
    T_OP,
};

typedef struct {
    int kind, line;
    const char *s; /* text, name, operator, or the unescaped string */
    size_t n;
    long long i;
    double f;
} tpl_tok;

typedef struct {
    tpl_tok *t;
    int n, cap;
} tpl_toks;

int tpl_lex(tpl_arena *a, const char *src, size_t len, tpl_toks *out, char *err, size_t errlen);

/* ---- values (tpl_value.c) ---- */
typedef enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_FUNC } tpl_vkind;

typedef struct tpl_val tpl_val;
typedef struct tpl_node tpl_node;
typedef struct tpl_scope tpl_scope;

enum { F_GLOBAL, F_METHOD, F_MACRO };

struct tpl_val {
    tpl_vkind k;
    unsigned char tuple, ns; /* a list shown as a tuple; a dict that is a namespace() */
    unsigned char gen;       /* a list that stands for a generator (map, select, ...) */
    unsigned char markup; /* a string that is Markup (|safe, |escape): + escapes the other side */
    const char *name;     /* V_UNDEF: the name that was missing; V_FUNC: its name */
    union {
        int b;
        long long i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        struct {
            tpl_val **a;
            int n, cap;
        } l;
        struct {
            tpl_val **k, **v;
            int n, cap;
        } d;
        struct {
            int kind;
            tpl_val *self;         /* F_METHOD: the object */
            const tpl_node *macro; /* F_MACRO */
            tpl_scope *scope;      /* F_MACRO: where it was defined */
        } fn;
    } u;
};

/* ---- syntax tree (tpl_parse*.c) ---- */
enum {
    N_BODY,
    N_TEXT,
    N_OUT,
    N_IF,
    N_FOR,
    N_SET,
    N_MACRO,
    N_CALLBLOCK,
    N_BREAK,
    N_CONTINUE,
    N_LIT,
    N_NAME,
    N_LIST,
    N_TUPLE,
    N_DICT,
    N_PAIR,
    N_ATTR,
    N_ITEM,
    N_SLICE,
    N_CALL,
    N_KWARG,
    N_FILTER,
    N_TEST,
    N_NEG,
    N_POS,
    N_NOT,
    N_AND,
    N_OR,
    N_BIN,
    N_COND,
    N_PARAM,
    N_FILTERBLOCK,
    N_GENERATION, /* {% generation %}: body */
};

enum {
    OP_ADD,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FDIV,
    OP_MOD,
    OP_POW,
    OP_CAT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_NOTIN
};

struct tpl_node {
    int kind, line, op, neg;
    const char *s; /* a name, a text, a filter's or test's name */
    size_t n;
    tpl_val *lit;
    tpl_node *a, *b, *c, *d;
    tpl_node *body;  /* for, macro, set block, call block, filter block */
    tpl_node **kids; /* a body's statements */
    int nk, capk;
    tpl_node **args; /* arguments, items, parameters */
    int na, capa;
};

struct mhla_tpl {
    tpl_arena arena;
    tpl_node *root;
};

int tpl_parse(tpl_arena *a, const tpl_toks *toks, tpl_node **root, char *err, size_t errlen);

/* ---- a render (tpl_render.c, tpl_eval.c, ...) ---- */
struct tpl_scope {
    tpl_scope *parent;
    tpl_val *vars; /* a dict */
};

typedef struct {
    tpl_arena *a;
    mhla_buf *out;
    mhla_tpl_limits lim;
    long iters;
    int depth, edepth, rc;
    char *err;
    size_t errlen;
    tpl_scope *globals, *sc; /* sc: the scope expressions read now */
} tpl_rt;

/* Every evaluation returns NULL with rt->rc and rt->err set on failure. */
int tpl_fail(tpl_rt *rt, int rc, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
tpl_val *tpl_failv(tpl_rt *rt, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
tpl_val *tpl_nomem(tpl_rt *rt);

tpl_val *tpl_new(tpl_rt *rt, tpl_vkind k);
tpl_val *tpl_undef(tpl_rt *rt, const char *name);
tpl_val *tpl_none(tpl_rt *rt);
tpl_val *tpl_bool(tpl_rt *rt, int b);
tpl_val *tpl_int(tpl_rt *rt, long long i);
tpl_val *tpl_float(tpl_rt *rt, double f);
tpl_val *tpl_str(tpl_rt *rt, const char *s, size_t n); /* copies */
tpl_val *tpl_list(tpl_rt *rt);
tpl_val *tpl_dict(tpl_rt *rt);
int tpl_list_push(tpl_rt *rt, tpl_val *l, tpl_val *v);
int tpl_dict_set(tpl_rt *rt, tpl_val *d, tpl_val *k, tpl_val *v);
tpl_val *tpl_dict_get(const tpl_val *d, const tpl_val *k); /* NULL when absent */
tpl_val *tpl_dict_gets(const tpl_val *d, const char *k);
int tpl_truthy(const tpl_val *v);
int tpl_equal(const tpl_val *x, const tpl_val *y);
/* -2 when x and y do not compare (a type error), else -1, 0 or 1 */
int tpl_compare(const tpl_val *x, const tpl_val *y);
int tpl_is_str(const tpl_val *v, const char *s);
const char *tpl_type_name(const tpl_val *v);
tpl_val *tpl_from_json(tpl_rt *rt, const cJSON *j);
/* The items of an iterable (a list's items, a dict's keys, a string's
 * characters); NULL with the error set when v does not iterate. */
tpl_val *tpl_iterate(tpl_rt *rt, tpl_val *v, int line);

/* ---- text of values (tpl_repr.c) ---- */
int tpl_put_str(tpl_rt *rt, mhla_buf *b, const tpl_val *v);  /* Python's str() */
int tpl_put_repr(tpl_rt *rt, mhla_buf *b, const tpl_val *v); /* Python's repr() */
int tpl_put_json(tpl_rt *rt, mhla_buf *b, const tpl_val *v, int indent, int level, const char *isep,
                 const char *ksep, int sort);
tpl_val *tpl_to_str(tpl_rt *rt, const tpl_val *v); /* a V_STR of str(v) */
void tpl_put_float(char *dst, size_t n, double f); /* Python's repr of a float */

/* ---- evaluation (tpl_eval.c, tpl_ops.c, tpl_call.c) ---- */
tpl_val *tpl_eval(tpl_rt *rt, const tpl_node *n);
tpl_val *tpl_binop(tpl_rt *rt, int op, tpl_val *x, tpl_val *y, int line);
tpl_val *tpl_getattr(tpl_rt *rt, tpl_val *o, const char *name, size_t n, int line);
tpl_val *tpl_getitem(tpl_rt *rt, tpl_val *o, tpl_val *key, int line);
tpl_val *tpl_lookup(tpl_rt *rt, tpl_scope *sc, const char *name, size_t n);

/* Arguments of a call: positional, then keyword. */
typedef struct {
    tpl_val *pos[8];
    int npos;
    const char *kwname[8];
    tpl_val *kw[8];
    int nkw;
    int line;
} tpl_args;

int tpl_eval_args(tpl_rt *rt, const tpl_node *n, tpl_args *args, int first);
/* The argument at position i or named name; NULL when not given. */
tpl_val *tpl_arg(const tpl_args *args, int i, const char *name);
tpl_val *tpl_call(tpl_rt *rt, tpl_val *f, tpl_args *args);
tpl_val *tpl_call_global(tpl_rt *rt, const char *name, tpl_args *args);
tpl_val *tpl_call_method(tpl_rt *rt, tpl_val *self, const char *name, tpl_args *args);
int tpl_has_method(const tpl_val *o, const char *name);
tpl_val *tpl_filter(tpl_rt *rt, const char *name, tpl_val *x, tpl_args *args);
int tpl_test(tpl_rt *rt, const char *name, tpl_val *x, tpl_args *args); /* 0/1, -1 error */

/* ---- strings (tpl_string.c) and dicts ---- */
tpl_val *tpl_str_strip(tpl_rt *rt, tpl_val *s, tpl_val *chars, int left, int right);
tpl_val *tpl_str_split(tpl_rt *rt, tpl_val *s, tpl_val *sep, long long maxsplit, int line);
tpl_val *tpl_str_replace(tpl_rt *rt, tpl_val *s, tpl_val *old, tpl_val *new_, long long count);
tpl_val *tpl_str_case(tpl_rt *rt, tpl_val *s, int how); /* 0 lower 1 upper 2 title 3 capitalize */
tpl_val *tpl_str_join(tpl_rt *rt, tpl_val *sep, tpl_val *items, int line);
int tpl_str_is_case(const tpl_val *s, int upper); /* str.islower / str.isupper */
/* fmt % args: Python's printf-style formatting (tpl_format.c) */
tpl_val *tpl_format(tpl_rt *rt, tpl_val *fmt, tpl_val *args, int line);
tpl_val *tpl_dict_items(tpl_rt *rt, tpl_val *d); /* a list of (key, value) tuples */
/* HTML-escaped as markupsafe's escape(); Markup comes back as it is. */
tpl_val *tpl_escape(tpl_rt *rt, tpl_val *s);
tpl_val *tpl_slice(tpl_rt *rt, tpl_val *o, tpl_val *parts[3], int line);

/* ---- statements (tpl_exec.c, tpl_macro.c) ---- */
int tpl_exec_body(tpl_rt *rt, tpl_scope *sc, const tpl_node *body); /* 0, -1, or BRK/CONT */
enum { TPL_BREAK = 1, TPL_CONTINUE = 2 };
int tpl_emit(tpl_rt *rt, const char *s, size_t n);
tpl_val *tpl_call_macro(tpl_rt *rt, tpl_val *f, tpl_args *args, const tpl_node *caller,
                        tpl_scope *caller_sc);
tpl_scope *tpl_scope_new(tpl_rt *rt, tpl_scope *parent);
int tpl_scope_set(tpl_rt *rt, tpl_scope *sc, const char *name, tpl_val *v);
int tpl_assign(tpl_rt *rt, tpl_scope *sc, const tpl_node *target, tpl_val *v);
/* Runs body into a fresh buffer and returns its text as a string value. */
tpl_val *tpl_capture(tpl_rt *rt, tpl_scope *sc, const tpl_node *body);

#endif
