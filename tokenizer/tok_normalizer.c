/* Normalizers: Sequence, Prepend, Replace, NFC/NFKC/NFD/NFKD (utf8proc), Lowercase,
 * Strip, StripAccents — each behaving as the reference implementation's. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool jbool(const cJSON *o, const char *k, bool def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

/* {"String": "..."} or {"Regex": "..."}; capture mirrors the reference's create_pattern. */
int tok_pattern_build(const cJSON *pat, bool capture, tok_regex *re, char *err, size_t errlen,
                      const char *owner)
{
    const char *s = pat ? jstr(pat, "String") : NULL;
    if (s)
        return tok_regex_compile_literal(re, s, strlen(s), capture, err, errlen);
    const char *r = pat ? jstr(pat, "Regex") : NULL;
    if (r)
        return tok_regex_compile_onig(re, r, strlen(r), err, errlen);
    tok_err(err, errlen, "%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", owner);
    return -1;
}

/* nz->str = a copy of s; -1 with a message when out of memory. */
static int set_str(tok_normalizer *nz, const char *s, char *err, size_t errlen)
{
    nz->str = strdup(s);
    if (!nz->str) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    nz->str_len = strlen(s);
    return 0;
}

int tok_normalizer_build(const cJSON *j, tok_normalizer **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cJSON_IsObject(j)) {
        tok_err(err, errlen, "normalizer must be an object or null");
        return -1;
    }
    const char *type = jstr(j, "type");
    if (!type) {
        tok_err(err, errlen, "normalizer without a \"type\"");
        return -1;
    }
    tok_normalizer *nz = calloc(1, sizeof *nz);
    if (!nz) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    *out = nz;
    if (!strcmp(type, "Sequence")) {
        nz->kind = NORM_SEQUENCE;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(arr)) {
            tok_err(err, errlen, "normalizer Sequence without a \"normalizers\" array");
            return -1;
        }
        int n = cJSON_GetArraySize(arr);
        nz->children = calloc((size_t)n + 1, sizeof *nz->children);
        if (!nz->children) {
            tok_err(err, errlen, "out of memory");
            return -1;
        }
        const cJSON *c;
        cJSON_ArrayForEach(c, arr)
        {
            if (cJSON_IsNull(c))
                continue;
            if (tok_normalizer_build(c, &nz->children[nz->n_children], err, errlen)) {
                nz->n_children++;
                return -1;
            }
            nz->n_children++;
        }
        return 0;
    }
    if (!strcmp(type, "Prepend")) {
        nz->kind = NORM_PREPEND;
        const char *p = jstr(j, "prepend");
        if (!p) {
            tok_err(err, errlen, "normalizer Prepend without a \"prepend\" string");
            return -1;
        }
        return set_str(nz, p, err, errlen);
    }
    if (!strcmp(type, "Replace")) {
        nz->kind = NORM_REPLACE;
        const char *content = jstr(j, "content");
        if (set_str(nz, content ? content : "", err, errlen))
            return -1;
        if (tok_pattern_build(cJSON_GetObjectItemCaseSensitive(j, "pattern"), false, &nz->re, err,
                              errlen, "normalizer Replace"))
            return -1;
        nz->has_re = true;
        return 0;
    }
    if (!strcmp(type, "NFC")) {
        nz->kind = NORM_NFC;
        return 0;
    }
    if (!strcmp(type, "NFKC")) {
        nz->kind = NORM_NFKC;
        return 0;
    }
    if (!strcmp(type, "NFD")) {
        nz->kind = NORM_NFD;
        return 0;
    }
    if (!strcmp(type, "NFKD")) {
        nz->kind = NORM_NFKD;
        return 0;
    }
    if (!strcmp(type, "Lowercase")) {
        nz->kind = NORM_LOWERCASE;
        return 0;
    }
    if (!strcmp(type, "StripAccents")) {
        nz->kind = NORM_STRIP_ACCENTS;
        return 0;
    }
    if (!strcmp(type, "Strip")) {
        nz->kind = NORM_STRIP;
        nz->strip_left = jbool(j, "strip_left", false);
        nz->strip_right = jbool(j, "strip_right", false);
        return 0;
    }
    tok_err(err, errlen,
            "unsupported normalizer type \"%s\" (supported: Sequence, Prepend, Replace, NFC, NFKC, "
            "NFD, NFKD, Lowercase, Strip, StripAccents)",
            type);
    return -1;
}

void tok_normalizer_free(tok_normalizer *nz)
{
    if (!nz)
        return;
    for (size_t i = 0; i < nz->n_children; i++)
        tok_normalizer_free(nz->children[i]);
    free(nz->children);
    free(nz->str);
    tok_regex_free(&nz->re);
    free(nz);
}

static int unicode_normalize(const char *s, size_t n, utf8proc_option_t opt, mhla_buf *out,
                             char *err, size_t errlen)
{
    utf8proc_uint8_t *res = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &res, opt);
    if (r < 0) {
        tok_err(err, errlen, "unicode normalization failed: %s", utf8proc_errmsg(r));
        return -1;
    }
    int rc = mhla_buf_put(out, res, (size_t)r);
    free(res);
    if (rc)
        tok_err(err, errlen, "out of memory");
    return rc;
}

static bool is_cased(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL || c == UTF8PROC_CATEGORY_LT ||
           utf8proc_islower(cp) || utf8proc_isupper(cp);
}

static bool is_case_ignorable(int32_t cp)
{
    utf8proc_category_t c = utf8proc_category(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_ME || c == UTF8PROC_CATEGORY_CF ||
           c == UTF8PROC_CATEGORY_LM || c == UTF8PROC_CATEGORY_SK || cp == '\'' || cp == '.' ||
           cp == ':' || cp == 0xB7 || cp == 0x2018 || cp == 0x2019 || cp == 0x2024 ||
           cp == 0x2027 || cp == 0xFE13 || cp == 0xFE52 || cp == 0xFE55 || cp == 0xFF07 ||
           cp == 0xFF0E || cp == 0xFF1A || cp == 0x5E || cp == 0x60;
}

/* String.prototype.toLowerCase: simple mappings plus the unconditional special casing of
 * U+0130 and the Final_Sigma rule. */
static int lowercase(const char *s, size_t n, mhla_buf *out)
{
    size_t i = 0;
    while (i < n) {
        int32_t cp;
        size_t k = mhla_utf8_next(s + i, n - i, &cp);
        char enc[4];
        if (cp == 0x130) {
            if (mhla_buf_put(out, "i\xCC\x87", 3))
                return -1;
        } else if (cp == 0x3A3) {
            bool before = false, after = false;
            size_t p = i;
            while (p > 0) { /* look back over case-ignorables for a cased letter */
                size_t q = p - 1;
                while (q > 0 && ((unsigned char)s[q] & 0xC0) == 0x80)
                    q--;
                int32_t b;
                mhla_utf8_next(s + q, p - q, &b);
                if (is_case_ignorable(b)) {
                    p = q;
                    continue;
                }
                before = is_cased(b);
                break;
            }
            size_t f = i + k;
            while (f < n) {
                int32_t a;
                size_t kk = mhla_utf8_next(s + f, n - f, &a);
                if (is_case_ignorable(a)) {
                    f += kk;
                    continue;
                }
                after = is_cased(a);
                break;
            }
            int32_t lc = (before && !after) ? 0x3C2 : 0x3C3;
            if (mhla_buf_put(out, enc, mhla_utf8_put(enc, lc)))
                return -1;
        } else {
            if (mhla_buf_put(out, enc, mhla_utf8_put(enc, utf8proc_tolower(cp))))
                return -1;
        }
        i += k;
    }
    return 0;
}

static int apply_one(const tok_normalizer *nz, const char *s, size_t n, mhla_buf *out, char *err,
                     size_t errlen)
{
    switch (nz->kind) {
    case NORM_SEQUENCE: {
        mhla_buf a = {0}, b = {0};
        if (mhla_buf_put(&a, s, n)) {
            tok_err(err, errlen, "out of memory");
            return -1;
        }
        for (size_t i = 0; i < nz->n_children; i++) {
            b.len = 0;
            if (mhla_buf_reserve(&b, 0) ||
                apply_one(nz->children[i], a.p, a.len, &b, err, errlen)) {
                mhla_buf_free(&a);
                mhla_buf_free(&b);
                return -1;
            }
            mhla_buf t = a;
            a = b;
            b = t;
        }
        int rc = mhla_buf_put(out, a.p, a.len);
        mhla_buf_free(&a);
        mhla_buf_free(&b);
        return rc;
    }
    case NORM_PREPEND:
        return mhla_buf_put(out, nz->str, nz->str_len) || mhla_buf_put(out, s, n) ? -1 : 0;
    case NORM_REPLACE:
        return tok_regex_replace(&nz->re, s, n, nz->str, nz->str_len, out, err, errlen);
    case NORM_NFC:
        return unicode_normalize(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE, out, err, errlen);
    case NORM_NFKC:
        return unicode_normalize(s, n, UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT, out,
                                 err, errlen);
    case NORM_NFD:
        return unicode_normalize(s, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE, out, err, errlen);
    case NORM_NFKD:
        return unicode_normalize(s, n, UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT, out,
                                 err, errlen);
    case NORM_LOWERCASE: return lowercase(s, n, out);
    case NORM_STRIP: {
        size_t a, b;
        tok_js_trim(s, n, nz->strip_left, nz->strip_right, &a, &b);
        return mhla_buf_put(out, s + a, b - a);
    }
    case NORM_STRIP_ACCENTS: {
        size_t i = 0;
        while (i < n) {
            int32_t cp;
            size_t k = mhla_utf8_next(s + i, n - i, &cp);
            utf8proc_category_t c = utf8proc_category(cp);
            bool mark =
                c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC || c == UTF8PROC_CATEGORY_ME;
            if (!mark && mhla_buf_put(out, s + i, k))
                return -1;
            i += k;
        }
        return 0;
    }
    }
    return -1;
}

int tok_normalizer_apply(const tok_normalizer *nz, const char *s, size_t n, mhla_buf *out,
                         char *err, size_t errlen)
{
    if (mhla_buf_reserve(out, n)) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    if (apply_one(nz, s, n, out, err, errlen)) {
        if (err && !err[0])
            tok_err(err, errlen, "out of memory while normalizing");
        return -1;
    }
    return 0;
}
