/* tpl_value.c — values: making them, lists and dicts, Python's truthiness,
 * equality and ordering, and the context's JSON turned into values. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tpl_internal.h"

int tpl_fail(tpl_rt *rt, int rc, int line, const char *fmt, ...)
{
    if (rt->rc)
        return rt->rc; /* the first error stands */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rt->rc = rc;
    if (rt->err && rc == MHLA_TPL_RAISED)
        snprintf(rt->err, rt->errlen, "%s", msg);
    else if (rt->err && line > 0)
        snprintf(rt->err, rt->errlen, "line %d: %s", line, msg);
    else if (rt->err)
        snprintf(rt->err, rt->errlen, "%s", msg);
    return rc;
}

tpl_val *tpl_failv(tpl_rt *rt, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tpl_fail(rt, MHLA_TPL_ERROR, line, "%s", msg);
    return NULL;
}

tpl_val *tpl_nomem(tpl_rt *rt)
{
    if (rt->a->over == 1)
        tpl_fail(rt, MHLA_TPL_LIMIT, 0, "template memory limit reached (%zu bytes)",
                 rt->lim.max_memory);
    else
        tpl_fail(rt, MHLA_TPL_NOMEM, 0, "out of memory");
    return NULL;
}

tpl_val *tpl_new(tpl_rt *rt, tpl_vkind k)
{
    tpl_val *v = tpl_alloc(rt->a, sizeof *v);
    if (!v)
        return tpl_nomem(rt);
    v->k = k;
    return v;
}

tpl_val *tpl_undef(tpl_rt *rt, const char *name)
{
    tpl_val *v = tpl_new(rt, V_UNDEF);
    if (v)
        v->name = name;
    return v;
}

tpl_val *tpl_none(tpl_rt *rt) { return tpl_new(rt, V_NONE); }

tpl_val *tpl_bool(tpl_rt *rt, int b)
{
    tpl_val *v = tpl_new(rt, V_BOOL);
    if (v)
        v->u.b = !!b;
    return v;
}

tpl_val *tpl_int(tpl_rt *rt, long long i)
{
    tpl_val *v = tpl_new(rt, V_INT);
    if (v)
        v->u.i = i;
    return v;
}

tpl_val *tpl_float(tpl_rt *rt, double f)
{
    tpl_val *v = tpl_new(rt, V_FLOAT);
    if (v)
        v->u.f = f;
    return v;
}

tpl_val *tpl_str(tpl_rt *rt, const char *s, size_t n)
{
    tpl_val *v = tpl_new(rt, V_STR);
    if (!v)
        return NULL;
    char *p = tpl_strdup(rt->a, s, n);
    if (!p)
        return tpl_nomem(rt);
    v->u.s.p = p;
    v->u.s.n = n;
    return v;
}

tpl_val *tpl_list(tpl_rt *rt) { return tpl_new(rt, V_LIST); }
tpl_val *tpl_dict(tpl_rt *rt) { return tpl_new(rt, V_DICT); }

/* Makes room for need items in an arena array of *cap. */
static int arena_grow(tpl_rt *rt, tpl_val ***arr, int *cap, int need)
{
    if (need <= *cap)
        return 0;
    int ncap = *cap ? *cap * 2 : 4;
    while (ncap < need)
        ncap *= 2;
    tpl_val **p = tpl_alloc(rt->a, sizeof *p * (size_t)ncap);
    if (!p) {
        tpl_nomem(rt);
        return -1;
    }
    if (*cap)
        memcpy(p, *arr, sizeof *p * (size_t)*cap);
    *arr = p;
    *cap = ncap;
    return 0;
}

int tpl_list_push(tpl_rt *rt, tpl_val *l, tpl_val *v)
{
    if (arena_grow(rt, &l->u.l.a, &l->u.l.cap, l->u.l.n + 1))
        return -1;
    l->u.l.a[l->u.l.n++] = v;
    return 0;
}

tpl_val *tpl_dict_get(const tpl_val *d, const tpl_val *k)
{
    for (int i = 0; i < d->u.d.n; i++)
        if (tpl_equal(d->u.d.k[i], k))
            return d->u.d.v[i];
    return NULL;
}

tpl_val *tpl_dict_gets(const tpl_val *d, const char *k)
{
    tpl_val key = {.k = V_STR};
    key.u.s.p = k;
    key.u.s.n = strlen(k);
    return tpl_dict_get(d, &key);
}

int tpl_dict_set(tpl_rt *rt, tpl_val *d, tpl_val *k, tpl_val *v)
{
    for (int i = 0; i < d->u.d.n; i++)
        if (tpl_equal(d->u.d.k[i], k)) {
            d->u.d.v[i] = v;
            return 0;
        }
    int cap = d->u.d.cap;
    if (arena_grow(rt, &d->u.d.k, &cap, d->u.d.n + 1) ||
        arena_grow(rt, &d->u.d.v, &d->u.d.cap, d->u.d.n + 1))
        return -1;
    d->u.d.k[d->u.d.n] = k;
    d->u.d.v[d->u.d.n++] = v;
    return 0;
}

int tpl_truthy(const tpl_val *v)
{
    switch (v->k) {
    case V_BOOL: return v->u.b;
    case V_INT: return v->u.i != 0;
    case V_FLOAT: return v->u.f != 0;
    case V_STR: return v->u.s.n != 0;
    case V_LIST: return v->gen || v->u.l.n != 0;
    case V_DICT: return v->ns || v->u.d.n != 0;
    case V_FUNC: return 1;
    default: return 0;
    }
}

static int is_num(const tpl_val *v) { return v->k == V_BOOL || v->k == V_INT || v->k == V_FLOAT; }

static double num(const tpl_val *v)
{
    return v->k == V_FLOAT ? v->u.f : v->k == V_INT ? (double)v->u.i : (double)v->u.b;
}

static long long inum(const tpl_val *v) { return v->k == V_INT ? v->u.i : v->u.b; }

static int equal_seq(const tpl_val *x, const tpl_val *y)
{
    if (x->u.l.n != y->u.l.n || x->tuple != y->tuple)
        return 0;
    for (int i = 0; i < x->u.l.n; i++)
        if (!tpl_equal(x->u.l.a[i], y->u.l.a[i]))
            return 0;
    return 1;
}

static int equal_dict(const tpl_val *x, const tpl_val *y)
{
    if (x->u.d.n != y->u.d.n)
        return 0;
    for (int i = 0; i < x->u.d.n; i++) {
        const tpl_val *o = tpl_dict_get(y, x->u.d.k[i]);
        if (!o || !tpl_equal(x->u.d.v[i], o))
            return 0;
    }
    return 1;
}

int tpl_equal(const tpl_val *x, const tpl_val *y)
{
    if (is_num(x) && is_num(y)) {
        if (x->k != V_FLOAT && y->k != V_FLOAT)
            return inum(x) == inum(y);
        return num(x) == num(y);
    }
    if (x->k != y->k)
        return 0;
    switch (x->k) {
    case V_UNDEF:
    case V_NONE: return 1;
    case V_STR: return x->u.s.n == y->u.s.n && !memcmp(x->u.s.p, y->u.s.p, x->u.s.n);
    case V_LIST: return equal_seq(x, y);
    case V_DICT: return x->ns || y->ns ? x == y : equal_dict(x, y);
    default: return x == y;
    }
}

static int cmp_seq(const tpl_val *x, const tpl_val *y)
{
    for (int i = 0; i < x->u.l.n && i < y->u.l.n; i++) {
        if (tpl_equal(x->u.l.a[i], y->u.l.a[i]))
            continue;
        return tpl_compare(x->u.l.a[i], y->u.l.a[i]);
    }
    return x->u.l.n < y->u.l.n ? -1 : x->u.l.n > y->u.l.n;
}

int tpl_compare(const tpl_val *x, const tpl_val *y)
{
    if (is_num(x) && is_num(y)) {
        if (x->k != V_FLOAT && y->k != V_FLOAT)
            return inum(x) < inum(y) ? -1 : inum(x) > inum(y);
        return num(x) < num(y) ? -1 : num(x) > num(y);
    }
    if (x->k == V_STR && y->k == V_STR) {
        size_t n = x->u.s.n < y->u.s.n ? x->u.s.n : y->u.s.n;
        int c = memcmp(x->u.s.p, y->u.s.p, n);
        if (c)
            return c < 0 ? -1 : 1;
        return x->u.s.n < y->u.s.n ? -1 : x->u.s.n > y->u.s.n;
    }
    if (x->k == V_LIST && y->k == V_LIST && x->tuple == y->tuple)
        return cmp_seq(x, y);
    return -2;
}

int tpl_is_str(const tpl_val *v, const char *s)
{
    return v->k == V_STR && v->u.s.n == strlen(s) && !memcmp(v->u.s.p, s, v->u.s.n);
}

const char *tpl_type_name(const tpl_val *v)
{
    static const char *names[] = {"Undefined", "NoneType", "bool", "int",     "float",
                                  "str",       "list",     "dict", "function"};
    if (v->k == V_LIST && (v->tuple || v->gen))
        return v->gen ? "generator" : "tuple";
    if (v->k == V_DICT && v->ns)
        return "Namespace";
    return names[v->k];
}

static tpl_val *json_number(tpl_rt *rt, const cJSON *j)
{
    double d = j->valuedouble;
    if (floor(d) == d && fabs(d) < 9007199254740992.0)
        return tpl_int(rt, (long long)d);
    return tpl_float(rt, d);
}

static tpl_val *json_container(tpl_rt *rt, const cJSON *j)
{
    tpl_val *v = cJSON_IsArray(j) ? tpl_list(rt) : tpl_dict(rt);
    if (!v)
        return NULL;
    for (const cJSON *c = j->child; c; c = c->next) {
        tpl_val *item = tpl_from_json(rt, c);
        if (!item)
            return NULL;
        if (v->k == V_LIST && tpl_list_push(rt, v, item))
            return NULL;
        if (v->k == V_DICT) {
            tpl_val *k = tpl_str(rt, c->string, strlen(c->string));
            if (!k || tpl_dict_set(rt, v, k, item))
                return NULL;
        }
    }
    return v;
}

tpl_val *tpl_from_json(tpl_rt *rt, const cJSON *j)
{
    if (cJSON_IsNull(j))
        return tpl_none(rt);
    if (cJSON_IsBool(j))
        return tpl_bool(rt, cJSON_IsTrue(j));
    if (cJSON_IsNumber(j))
        return json_number(rt, j);
    if (cJSON_IsString(j))
        return tpl_str(rt, j->valuestring, strlen(j->valuestring));
    if (cJSON_IsArray(j) || cJSON_IsObject(j))
        return json_container(rt, j);
    return tpl_failv(rt, 0, "the context holds a value that is not JSON");
}

tpl_val *tpl_iterate(tpl_rt *rt, tpl_val *v, int line)
{
    if (v->k == V_LIST || v->k == V_UNDEF)
        return v->k == V_LIST ? v : tpl_list(rt);
    tpl_val *l = tpl_list(rt);
    if (!l)
        return NULL;
    if (v->k == V_DICT && !v->ns) {
        for (int i = 0; i < v->u.d.n; i++)
            if (tpl_list_push(rt, l, v->u.d.k[i]))
                return NULL;
        return l;
    }
    if (v->k != V_STR)
        return tpl_failv(rt, line, "'%s' object is not iterable", tpl_type_name(v));
    for (size_t i = 0; i < v->u.s.n;) {
        int32_t cp;
        size_t k = mhla_utf8_next(v->u.s.p + i, v->u.s.n - i, &cp);
        tpl_val *c = tpl_str(rt, v->u.s.p + i, k);
        if (!c || tpl_list_push(rt, l, c))
            return NULL;
        i += k;
    }
    return l;
}
