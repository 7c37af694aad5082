/*
 * schema_number.c — integer and number bounds (minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum; draft 4's boolean exclusive* too).
 *
 * Integers: exactly the integers in the bounds (schema_intrange.c), a side
 * left open bounded to 16 digits. Numbers: bounds that are integers of at
 * most 9 digits are exact: the integral part ranges between them, the
 * fraction (at most 6 digits, so the text reads back as a double on the same
 * side of the bound) is free inside, zero at an inclusive upper end, nonzero
 * at an exclusive lower one; no exponent. Other bounds are refused.
 */
#include "schema_internal.h"

#include <math.h>
#include <string.h>

#define INT_BOUND 1e15 /* integer bounds: 16 digits at most, as the open side */
#define NUM_BOUND 1e9  /* number bounds: with 6 fraction digits, 15 significant */

int sc_int_range(sc_buf *o, const long long *min, const long long *max);

typedef struct {
    int has;
    double v;
    int excl;
} bound;

/* The tighter of keyword (inclusive) and its exclusive form; draft 4's
 * boolean exclusive* marks the inclusive one exclusive. */
static int get_bound(sc_conv *c, const cJSON *s, const char *incl, const char *excl, int lower,
                     bound *b)
{
    const cJSON *vi = cJSON_GetObjectItemCaseSensitive(s, incl);
    const cJSON *ve = cJSON_GetObjectItemCaseSensitive(s, excl);
    *b = (bound){0, 0, 0};
    if ((vi && !cJSON_IsNumber(vi)) || (ve && !cJSON_IsNumber(ve) && !cJSON_IsBool(ve)))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: '%s'/'%s' must be numbers", incl, excl);
    if (vi)
        *b = (bound){1, vi->valuedouble, cJSON_IsTrue(ve)};
    if (cJSON_IsNumber(ve)) {
        int tighter = !b->has || (lower ? ve->valuedouble >= b->v : ve->valuedouble <= b->v);
        if (tighter)
            *b = (bound){1, ve->valuedouble, 1};
    }
    if (b->has && !isfinite(b->v))
        return sc_fail(c, MHLA_GRAMMAR_SYNTAX, "schema: '%s' is not finite", incl);
    return 0;
}

static int get_bounds(sc_conv *c, const cJSON *s, sc_kw *used, bound *lo, bound *hi)
{
    *used |= sc_kw_bit("minimum") | sc_kw_bit("maximum") | sc_kw_bit("exclusiveMinimum") |
             sc_kw_bit("exclusiveMaximum");
    int rc = get_bound(c, s, "minimum", "exclusiveMinimum", 1, lo);
    return rc ? rc : get_bound(c, s, "maximum", "exclusiveMaximum", 0, hi);
}

static int finish(sc_conv *c, sc_buf *b, char **body)
{
    if (b->err) {
        sc_buf_free(b);
        return sc_buf_fail(c, b);
    }
    *body = b->p;
    return 0;
}

int sc_build_integer(sc_conv *c, const cJSON *schema, sc_kw *used, char **body)
{
    bound lo, hi;
    int rc = get_bounds(c, schema, used, &lo, &hi);
    if (rc)
        return rc;
    if (!lo.has && !hi.has) {
        const char *rule;
        rc = sc_rule_builtin(c, "integer", &rule);
        sc_buf b = {0};
        sc_buf_add(&b, rule);
        return rc ? rc : finish(c, &b, body);
    }
    /* checked before the casts: a double past long long's range has no value there */
    if ((lo.has && fabs(lo.v) >= INT_BOUND) || (hi.has && fabs(hi.v) >= INT_BOUND))
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                       "schema: integer bounds beyond 10^15 are not served");
    long long min = 0, max = 0;
    if (lo.has)
        min = (long long)(lo.excl ? floor(lo.v) + 1 : ceil(lo.v));
    if (hi.has)
        max = (long long)(hi.excl ? ceil(hi.v) - 1 : floor(hi.v));
    if (lo.has && hi.has && min > max)
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: empty integer range: no value");
    sc_buf b = {0};
    sc_int_range(&b, lo.has ? &min : NULL, hi.has ? &max : NULL);
    return finish(c, &b, body);
}

#define FRAC_ANY "( \".\" [0-9]{1,6} )?"
#define FRAC_ZERO "( \".\" [0]{1,6} )?"
#define FRAC_NONZERO "\".\" [0-9]{0,5} [1-9] [0]{0,5}"

static void alt(sc_buf *b, int *n, const char *sign)
{
    sc_buf_add(b, (*n)++ ? " | " : "");
    sc_buf_add(b, sign);
}

/* Magnitudes m = I.F with lo < m (lo_excl) or lo <= m, and m <= hi (or <) when
 * has_hi, as alternatives after sign; *n counts the alternatives written. */
static void magnitudes(sc_buf *b, int *n, const char *sign, long long lo, int lo_excl, int has_hi,
                       long long hi, int hi_excl)
{
    if (has_hi && (lo > hi || (lo == hi && (lo_excl || hi_excl))))
        return;
    if (has_hi && lo == hi) {
        alt(b, n, sign);
        sc_buf_addf(b, "\"%lld\" " FRAC_ZERO, lo);
        return;
    }
    long long inner_lo = lo + 1, inner_hi = hi - 1;
    if (!has_hi || inner_lo <= inner_hi) {
        alt(b, n, sign);
        sc_int_range(b, &inner_lo, has_hi ? &inner_hi : NULL);
        sc_buf_add(b, " " FRAC_ANY);
    }
    alt(b, n, sign);
    sc_buf_addf(b, "\"%lld\" %s", lo, lo_excl ? FRAC_NONZERO : FRAC_ANY);
    if (has_hi && !hi_excl) {
        alt(b, n, sign);
        sc_buf_addf(b, "\"%lld\" " FRAC_ZERO, hi);
    }
}

static int number_bounded(sc_conv *c, const bound *lo, const bound *hi, char **body)
{
    long long L = (long long)lo->v, U = (long long)hi->v;
    sc_buf b = {0};
    int n = 0;
    sc_buf_add(&b, "( ");
    if (!hi->has || U > 0 || (U == 0 && !hi->excl)) { /* values >= 0 */
        int from_l = lo->has && L >= 0;
        magnitudes(&b, &n, "", from_l ? L : 0, from_l && lo->excl, hi->has, U, hi->excl);
    }
    if (!lo->has || L < 0) { /* values < 0: m = -x > 0 */
        int from_u = hi->has && U < 0;
        magnitudes(&b, &n, "\"-\" ", from_u ? -U : 0, from_u ? hi->excl : 1, lo->has, -L, lo->excl);
    }
    sc_buf_add(&b, " )");
    if (n == 0) {
        sc_buf_free(&b);
        return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED, "schema: empty number range: no value");
    }
    return finish(c, &b, body);
}

int sc_build_number(sc_conv *c, const cJSON *schema, sc_kw *used, char **body)
{
    bound lo, hi;
    int rc = get_bounds(c, schema, used, &lo, &hi);
    if (rc)
        return rc;
    if (!lo.has && !hi.has) {
        const char *rule;
        rc = sc_rule_builtin(c, "number", &rule);
        sc_buf b = {0};
        sc_buf_add(&b, rule);
        return rc ? rc : finish(c, &b, body);
    }
    const bound *bs[2] = {&lo, &hi};
    for (int i = 0; i < 2; i++)
        if (bs[i]->has && (bs[i]->v != floor(bs[i]->v) || fabs(bs[i]->v) >= NUM_BOUND))
            return sc_fail(c, MHLA_GRAMMAR_UNSUPPORTED,
                           "schema: a number bound %g is served only as an integer below 10^9",
                           bs[i]->v);
    return number_bounded(c, &lo, &hi, body);
}
