/* Decoders (ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, Sequence): each maps
 * a list of token strings to a list of strings, exactly as the reference's decode_chain. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

static long jint(const cJSON *o, const char *k, long def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e9 ? (long)v->valuedouble
                                                                            : def;
}

/* d->str = a copy of s, or -1 with err set */
static int set_str(tok_decoder *d, const char *s, char *err, size_t errlen)
{
    d->str = strdup(s);
    d->str_len = d->str ? strlen(d->str) : 0;
    if (!d->str)
        tok_err(err, errlen, "out of memory");
    return d->str ? 0 : -1;
}

static int read_metaspace(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen)
{
    (void)ctx;
    const char *r = tok_jstr(j, "replacement");
    return set_str(node, r ? r : "\xE2\x96\x81", err, errlen);
}

static int read_replace(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen)
{
    (void)ctx;
    tok_decoder *d = node;
    const char *c = tok_jstr(j, "content");
    if (set_str(d, c ? c : "", err, errlen))
        return -1;
    if (tok_pattern_build(cJSON_GetObjectItemCaseSensitive(j, "pattern"), false, &d->re, err,
                          errlen, "decoder Replace"))
        return -1;
    d->has_re = true;
    return 0;
}

static int read_strip(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen)
{
    (void)ctx;
    tok_decoder *d = node;
    const char *c = tok_jstr(j, "content");
    if (set_str(d, c ? c : "", err, errlen))
        return -1;
    /* the reference compares single UTF-16 units with content: only a one-character
     * content can ever match */
    int32_t cp = -1;
    if (d->str_len) {
        size_t k = mhla_utf8_next(d->str, d->str_len, &cp);
        if (k != d->str_len || cp > 0xFFFF)
            cp = -1;
    }
    d->strip_cp = cp;
    d->start = jint(j, "start", 0);
    d->stop = jint(j, "stop", 0);
    return 0;
}

static void set_kind(void *node, int kind) { ((tok_decoder *)node)->kind = kind; }

static int reserve_children(void *node, size_t n)
{
    tok_decoder *d = node;
    d->children = calloc(n + 1, sizeof *d->children);
    return d->children ? 0 : -1;
}

static int add_child(void *node, const cJSON *j, const void *ctx, char *err, size_t errlen)
{
    (void)ctx;
    tok_decoder *d = node;
    /* counted even when it fails: tok_decoder_free frees what it holds */
    return tok_decoder_build(j, &d->children[d->n_children++], err, errlen);
}

static const tok_build_type DEC_TYPES[] = {
    {"ByteLevel", DEC_BYTELEVEL, NULL},
    {"Metaspace", DEC_METASPACE, read_metaspace},
    {"Replace", DEC_REPLACE, read_replace},
    {"ByteFallback", DEC_BYTEFALLBACK, NULL},
    {"Fuse", DEC_FUSE, NULL},
    {"Strip", DEC_STRIP, read_strip},
    {"Sequence", DEC_SEQUENCE, NULL},
};
/* unlike the other Sequences, a decoder Sequence refuses a null child */
static const tok_build_spec DEC_SPEC = {
    "decoder", "decoders",       false,    DEC_TYPES, sizeof DEC_TYPES / sizeof DEC_TYPES[0],
    set_kind,  reserve_children, add_child};

int tok_decoder_build(const cJSON *j, tok_decoder **out, char *err, size_t errlen)
{
    *out = calloc(1, sizeof **out);
    if (!*out) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    return tok_build(&DEC_SPEC, j, *out, NULL, err, errlen);
}

void tok_decoder_free(tok_decoder *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->n_children; i++)
        tok_decoder_free(d->children[i]);
    free(d->children);
    if (d->has_re)
        tok_regex_free(&d->re);
    free(d->str);
    free(d);
}

static bool is_added_content(const mhla_tokenizer *tok, const char *s, size_t n)
{
    int32_t idx;
    return tok_strmap_get(&tok->added_map, s, n, &idx) && tok->added[idx].len == n &&
           memcmp(tok->added[idx].content, s, n) == 0;
}

/* Map byte-level characters back to bytes (characters outside the table become 0, as in
 * the reference), then decode as UTF-8 with replacement, keeping any BOM. */
static int flush_bytes(mhla_buf *bytes, tok_strlist *out, bool strip_bom)
{
    mhla_buf txt = {0};
    const char *p = bytes->p ? bytes->p : "";
    size_t n = bytes->len;
    if (strip_bom && n >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) {
        p += 3;
        n -= 3;
    }
    int rc = tok_utf8_sanitize(p, n, &txt);
    if (rc == 0)
        rc = tok_strlist_push(out, txt.p ? txt.p : "", txt.len);
    mhla_buf_free(&txt);
    bytes->len = 0;
    return rc;
}

static int hexval(int32_t c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* "<0xAB>" -> byte, following the reference: exactly 6 UTF-16 units and parseInt(x, 16) of
 * the middle two. Returns -1 when the token is not a byte token. */
int tok_byte_token(const char *s, size_t n)
{
    if (n < 6 || memcmp(s, "<0x", 3) != 0 || s[n - 1] != '>')
        return -1;
    int32_t mid[4];
    size_t nm = 0, i = 3, units = 4;
    while (i < n - 1 && nm < 4) {
        size_t k = mhla_utf8_next(s + i, n - 1 - i, &mid[nm]);
        units += mid[nm] > 0xFFFF ? 2 : 1;
        nm++;
        i += k;
    }
    if (i != n - 1 || units != 6 || nm != 2)
        return -1;
    size_t p = 0;
    int sign = 1;
    if (tok_js_space(mid[0]))
        p = 1;
    else if (mid[0] == '+' || mid[0] == '-') {
        sign = mid[0] == '-' ? -1 : 1;
        p = 1;
    }
    if (p >= nm || hexval(mid[p]) < 0)
        return -1;
    int v = hexval(mid[p]);
    if (p + 1 < nm && hexval(mid[p + 1]) >= 0)
        v = v * 16 + hexval(mid[p + 1]);
    return (sign * v) & 0xFF;
}

static int run_one(const mhla_tokenizer *tok, const tok_decoder *d, const tok_strlist *in,
                   tok_strlist *out, char *err, size_t errlen);

/* Each child decodes the previous one's list. */
static int run_sequence(const mhla_tokenizer *tok, const tok_decoder *d, const tok_strlist *in,
                        tok_strlist *out, char *err, size_t errlen)
{
    int rc = 0;
    tok_strlist a = {0}, b = {0};
    for (size_t i = 0; i < in->n && rc == 0; i++)
        rc = tok_strlist_push(&a, tok_strlist_at(in, i), in->len[i]);
    for (size_t c = 0; c < d->n_children && rc == 0; c++) {
        tok_strlist_clear(&b);
        rc = run_one(tok, d->children[c], &a, &b, err, errlen);
        tok_strlist t = a;
        a = b;
        b = t;
    }
    for (size_t i = 0; i < a.n && rc == 0; i++)
        rc = tok_strlist_push(out, tok_strlist_at(&a, i), a.len[i]);
    tok_strlist_free(&a);
    tok_strlist_free(&b);
    return rc;
}

/* Runs of byte-level tokens become one string each; added tokens pass through whole. */
static int decode_bytelevel(const mhla_tokenizer *tok, const tok_strlist *in, tok_strlist *out)
{
    int rc = 0;
    mhla_buf bytes = {0};
    bool pending = false;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = tok_strlist_at(in, i);
        size_t n = in->len[i];
        if (is_added_content(tok, s, n)) {
            if (pending)
                rc = flush_bytes(&bytes, out, false);
            pending = false;
            if (rc == 0)
                rc = tok_strlist_push(out, s, n);
            continue;
        }
        pending = true;
        size_t k = 0;
        while (k < n && rc == 0) {
            int32_t cp;
            k += mhla_utf8_next(s + k, n - k, &cp);
            int b = tok_cp_to_byte(cp);
            rc = mhla_buf_putc(&bytes, (char)(b < 0 ? 0 : b));
        }
    }
    if (rc == 0 && pending)
        rc = flush_bytes(&bytes, out, false);
    mhla_buf_free(&bytes);
    return rc;
}

/* Runs of <0xAB> tokens become the text their bytes spell; other tokens pass through. */
static int decode_bytefallback(const tok_strlist *in, tok_strlist *out)
{
    int rc = 0;
    mhla_buf bytes = {0};
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = tok_strlist_at(in, i);
        int b = tok_byte_token(s, in->len[i]);
        if (b >= 0) {
            rc = mhla_buf_putc(&bytes, (char)b);
            continue;
        }
        if (bytes.len)
            rc = flush_bytes(&bytes, out, true);
        if (rc == 0)
            rc = tok_strlist_push(out, s, in->len[i]);
    }
    if (rc == 0 && bytes.len)
        rc = flush_bytes(&bytes, out, true);
    mhla_buf_free(&bytes);
    return rc;
}

static int decode_fuse(const tok_strlist *in, tok_strlist *out)
{
    int rc = 0;
    mhla_buf all = {0};
    for (size_t i = 0; i < in->n && rc == 0; i++)
        rc = mhla_buf_put(&all, tok_strlist_at(in, i), in->len[i]);
    if (rc == 0)
        rc = tok_strlist_push(out, all.p ? all.p : "", all.len);
    mhla_buf_free(&all);
    return rc;
}

/* The replacement becomes a space; the first string loses a leading one. */
static int decode_metaspace(const tok_decoder *d, const tok_strlist *in, tok_strlist *out)
{
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        const char *s = tok_strlist_at(in, i);
        size_t n = in->len[i];
        mhla_buf t = {0};
        for (size_t k = 0; k < n && rc == 0;) {
            if (d->str_len && n - k >= d->str_len && memcmp(s + k, d->str, d->str_len) == 0) {
                rc = mhla_buf_putc(&t, ' ');
                k += d->str_len;
            } else {
                rc = mhla_buf_putc(&t, s[k++]);
            }
        }
        size_t skip = i == 0 && t.len && t.p[0] == ' ' ? 1 : 0;
        if (rc == 0)
            rc = tok_strlist_push(out, t.p ? t.p + skip : "", t.len - skip);
        mhla_buf_free(&t);
    }
    return rc;
}

static int decode_replace(const tok_decoder *d, const tok_strlist *in, tok_strlist *out, char *err,
                          size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; i < in->n && rc == 0; i++) {
        mhla_buf t = {0};
        rc = tok_regex_replace(&d->re, tok_strlist_at(in, i), in->len[i], d->str, d->str_len, &t,
                               err, errlen);
        if (rc == 0)
            rc = tok_strlist_push(out, t.p ? t.p : "", t.len);
        mhla_buf_free(&t);
    }
    return rc;
}

/* Up to start characters equal to the content off the front, up to stop off the end. */
int tok_strip_token(const tok_decoder *d, const char *s, size_t n, tok_strlist *out)
{
    size_t a = 0, e = n;
    for (long k = 0; k < d->start && a < n; k++) {
        int32_t cp;
        size_t step = mhla_utf8_next(s + a, n - a, &cp);
        if (cp != d->strip_cp)
            break;
        a += step;
    }
    for (long k = 0; k < d->stop && e > a; k++) {
        size_t p = e - 1;
        while (p > a && ((unsigned char)s[p] & 0xC0) == 0x80)
            p--;
        int32_t cp;
        mhla_utf8_next(s + p, e - p, &cp);
        if (cp != d->strip_cp)
            break;
        e = p;
    }
    return tok_strlist_push(out, s + a, e - a);
}

static int run_one(const mhla_tokenizer *tok, const tok_decoder *d, const tok_strlist *in,
                   tok_strlist *out, char *err, size_t errlen)
{
    int rc = 0;
    switch (d->kind) {
    case DEC_SEQUENCE: return run_sequence(tok, d, in, out, err, errlen);
    case DEC_BYTELEVEL: return decode_bytelevel(tok, in, out);
    case DEC_BYTEFALLBACK: return decode_bytefallback(in, out);
    case DEC_FUSE: return decode_fuse(in, out);
    case DEC_METASPACE: return decode_metaspace(d, in, out);
    case DEC_REPLACE: return decode_replace(d, in, out, err, errlen);
    case DEC_STRIP:
        for (size_t i = 0; i < in->n && rc == 0; i++)
            rc = tok_strip_token(d, tok_strlist_at(in, i), in->len[i], out);
        return rc;
    }
    return -1;
}

int tok_decoder_run(const mhla_tokenizer *tok, const tok_decoder *d, tok_strlist *toks,
                    tok_strlist *tmp, char *err, size_t errlen)
{
    tok_strlist_clear(tmp);
    if (run_one(tok, d, toks, tmp, err, errlen)) {
        if (err && !err[0])
            tok_err(err, errlen, "out of memory while decoding");
        return -1;
    }
    tok_strlist t = *toks;
    *toks = *tmp;
    *tmp = t;
    return 0;
}
