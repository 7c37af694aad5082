/* Pre-tokenizers: ByteLevel, Split, Metaspace, Digits, Whitespace, WhitespaceSplit,
 * Punctuation and Sequence, each splitting text the way the reference implementation does. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_internal.h"

int tok_pattern_build(const cJSON *pat, bool capture, tok_regex *re, char *err, size_t errlen,
                      const char *owner);

/* The reference hard-codes GPT-2's pattern for ByteLevel, with JavaScript's \s
 * (which, unlike Unicode White_Space, includes U+FEFF and excludes U+0085). */
#define JS_SPACE_BODY                                                                              \
    "\\t\\n\\x0B\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}\\x{FEFF}"
static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" JS_SPACE_BODY
    "\\p{L}\\p{N}]+|[" JS_SPACE_BODY "]+(?![^" JS_SPACE_BODY "])|[" JS_SPACE_BODY "]+";

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

static int oom(char *err, size_t errlen)
{
    tok_err(err, errlen, "out of memory");
    return -1;
}

int tok_pretok_build(const cJSON *j, tok_pretok **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!cJSON_IsObject(j)) {
        tok_err(err, errlen, "pre_tokenizer must be an object or null");
        return -1;
    }
    const char *type = jstr(j, "type");
    if (!type) {
        tok_err(err, errlen, "pre_tokenizer without a \"type\"");
        return -1;
    }
    tok_pretok *pt = calloc(1, sizeof *pt);
    if (!pt) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    *out = pt;
    if (!strcmp(type, "Sequence")) {
        pt->kind = PRE_SEQUENCE;
        const cJSON *arr = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        if (!cJSON_IsArray(arr)) {
            tok_err(err, errlen, "pre_tokenizer Sequence without a \"pretokenizers\" array");
            return -1;
        }
        pt->children = calloc((size_t)cJSON_GetArraySize(arr) + 1, sizeof *pt->children);
        if (!pt->children) {
            tok_err(err, errlen, "out of memory");
            return -1;
        }
        const cJSON *c;
        cJSON_ArrayForEach(c, arr)
        {
            if (cJSON_IsNull(c))
                continue;
            int rc = tok_pretok_build(c, &pt->children[pt->n_children], err, errlen);
            pt->n_children++;
            if (rc)
                return -1;
        }
        return 0;
    }
    if (!strcmp(type, "ByteLevel")) {
        pt->kind = PRE_BYTELEVEL;
        pt->add_prefix_space = jbool(j, "add_prefix_space", false);
        pt->use_regex = jbool(j, "use_regex", true);
        if (pt->use_regex) {
            if (tok_regex_compile_raw(&pt->re, GPT2_PATTERN, err, errlen))
                return -1;
            pt->has_re = true;
        }
        return 0;
    }
    if (!strcmp(type, "Split")) {
        pt->kind = PRE_SPLIT;
        const cJSON *inv = cJSON_GetObjectItemCaseSensitive(j, "invert");
        pt->invert = cJSON_IsTrue(inv);
        const char *beh = jstr(j, "behavior");
        static const char *known[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                      "Contiguous"};
        bool ok = beh == NULL;
        for (size_t i = 0; beh && i < 5; i++)
            ok |= strcmp(beh, known[i]) == 0;
        if (!ok) {
            tok_err(err, errlen, "pre_tokenizer Split: unknown behavior \"%s\"", beh);
            return -1;
        }
        pt->behavior = beh && !strcmp(beh, "Removed") ? SPLIT_REMOVED : SPLIT_OTHER;
        /* the reference wraps a literal in a capture group unless invert is absent or true */
        bool capture = cJSON_IsBool(inv) ? !cJSON_IsTrue(inv) : false;
        if (tok_pattern_build(cJSON_GetObjectItemCaseSensitive(j, "pattern"), capture, &pt->re, err,
                              errlen, "pre_tokenizer Split"))
            return -1;
        pt->has_re = true;
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        pt->kind = PRE_METASPACE;
        const char *rep = jstr(j, "replacement");
        const char *str_rep = jstr(j, "str_rep");
        if (!rep)
            rep = "\xE2\x96\x81";
        pt->replacement = strdup(str_rep && *str_rep ? str_rep : rep);
        if (!pt->replacement)
            return oom(err, errlen);
        pt->replacement_len = strlen(pt->replacement);
        const char *scheme = jstr(j, "prepend_scheme");
        if (!scheme || !strcmp(scheme, "always"))
            pt->prepend_scheme = 2;
        else if (!strcmp(scheme, "first"))
            pt->prepend_scheme = 1;
        else if (!strcmp(scheme, "never"))
            pt->prepend_scheme = 0;
        else {
            tok_err(err, errlen, "pre_tokenizer Metaspace: unknown prepend_scheme \"%s\"", scheme);
            return -1;
        }
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        pt->kind = PRE_DIGITS;
        pt->individual_digits = jbool(j, "individual_digits", false);
        return 0;
    }
    if (!strcmp(type, "Whitespace")) {
        pt->kind = PRE_WHITESPACE;
        return 0;
    }
    if (!strcmp(type, "WhitespaceSplit")) {
        pt->kind = PRE_WHITESPACE_SPLIT;
        return 0;
    }
    if (!strcmp(type, "Punctuation")) {
        pt->kind = PRE_PUNCTUATION;
        return 0;
    }
    tok_err(
        err, errlen,
        "unsupported pre_tokenizer type \"%s\" (supported: ByteLevel, Split, Metaspace, Digits, "
        "Whitespace, WhitespaceSplit, Punctuation, Sequence)",
        type);
    return -1;
}

void tok_pretok_free(tok_pretok *pt)
{
    if (!pt)
        return;
    for (size_t i = 0; i < pt->n_children; i++)
        tok_pretok_free(pt->children[i]);
    free(pt->children);
    if (pt->has_re)
        tok_regex_free(&pt->re);
    free(pt->replacement);
    free(pt);
}

/* ---- helpers ---- */

typedef struct {
    const char *s;
    tok_strlist *out;
    size_t last;
    bool keep_gaps;
} match_ctx;

static int collect_cb(void *vctx, size_t a, size_t e)
{
    match_ctx *c = vctx;
    if (c->keep_gaps && a > c->last && tok_strlist_push(c->out, c->s + c->last, a - c->last))
        return -2;
    if (e > a && tok_strlist_push(c->out, c->s + a, e - a))
        return -2;
    c->last = e;
    return 0;
}

static int push_bytelevel(tok_strlist *out, const char *s, size_t n)
{
    char tmp[512];
    mhla_buf big = {0};
    char *dst = tmp;
    if (n * 2 > sizeof tmp) {
        if (mhla_buf_reserve(&big, n * 2))
            return -1;
        dst = big.p;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t cp = tok_byte_to_cp[(unsigned char)s[i]];
        if (cp < 0x80)
            dst[k++] = (char)cp;
        else {
            dst[k++] = (char)(0xC0 | (cp >> 6));
            dst[k++] = (char)(0x80 | (cp & 0x3F));
        }
    }
    int rc = tok_strlist_push(out, dst, k);
    mhla_buf_free(&big);
    return rc;
}

typedef enum { CLS_WORD, CLS_SPACE, CLS_OTHER } char_cls;

static bool is_js_punct(int32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
        (cp >= 0x7B && cp <= 0x7E))
        return true;
    utf8proc_category_t c = utf8proc_category(cp);
    return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

/* Emit maximal runs of characters of equal class; runs of class `drop` are skipped and
 * `single` class runs are cut into single characters (Digits with individual_digits). */
static int runs(const char *s, size_t n, int (*cls)(int32_t), int drop, int single,
                tok_strlist *out)
{
    size_t i = 0, start = 0;
    int cur = -1;
    while (i < n) {
        int32_t cp;
        size_t k = mhla_utf8_next(s + i, n - i, &cp);
        int c = cls(cp);
        if (c != cur || c == single) {
            if (cur >= 0 && cur != drop && i > start && tok_strlist_push(out, s + start, i - start))
                return -1;
            start = i;
            cur = c;
        }
        i += k;
    }
    if (cur >= 0 && cur != drop && n > start && tok_strlist_push(out, s + start, n - start))
        return -1;
    return 0;
}

static int cls_whitespace(int32_t cp)
{
    if (tok_js_space(cp))
        return CLS_SPACE;
    bool w = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
             cp == '_';
    return w ? CLS_WORD : CLS_OTHER;
}
static int cls_space_only(int32_t cp) { return tok_js_space(cp) ? CLS_SPACE : CLS_OTHER; }
static int cls_punct(int32_t cp) { return is_js_punct(cp) ? CLS_OTHER : CLS_WORD; }
static int cls_digit(int32_t cp) { return cp >= '0' && cp <= '9' ? CLS_WORD : CLS_OTHER; }

static int apply_text(const tok_pretok *pt, const char *s, size_t n, size_t section_index,
                      tok_strlist *out, char *err, size_t errlen)
{
    switch (pt->kind) {
    case PRE_SEQUENCE: {
        tok_strlist a = {0}, b = {0};
        int rc = tok_strlist_push(&a, s, n);
        for (size_t i = 0; i < pt->n_children && rc == 0; i++) {
            tok_strlist_clear(&b);
            rc = tok_pretok_apply(pt->children[i], &a, section_index, &b, err, errlen);
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
    case PRE_BYTELEVEL: {
        mhla_buf pre = {0};
        if (pt->add_prefix_space && !(n > 0 && s[0] == ' ')) {
            if (mhla_buf_putc(&pre, ' ') || mhla_buf_put(&pre, s, n)) {
                mhla_buf_free(&pre);
                return -1;
            }
            s = pre.p;
            n = pre.len;
        }
        int rc = 0;
        if (!pt->use_regex) {
            rc = push_bytelevel(out, s, n);
        } else {
            tok_strlist pieces = {0};
            match_ctx c = {s, &pieces, 0, false};
            rc = tok_regex_each(&pt->re, s, n, collect_cb, &c, err, errlen);
            for (size_t i = 0; i < pieces.n && rc == 0; i++)
                rc = push_bytelevel(out, tok_strlist_at(&pieces, i), pieces.len[i]);
            tok_strlist_free(&pieces);
        }
        mhla_buf_free(&pre);
        return rc;
    }
    case PRE_SPLIT: {
        if (pt->invert) {
            match_ctx c = {s, out, 0, false};
            return tok_regex_each(&pt->re, s, n, collect_cb, &c, err, errlen);
        }
        if (pt->behavior == SPLIT_REMOVED)
            return tok_regex_js_split(&pt->re, s, n, out, err, errlen);
        match_ctx c = {s, out, 0, true};
        int rc = tok_regex_each(&pt->re, s, n, collect_cb, &c, err, errlen);
        if (rc == 0 && c.last < n && tok_strlist_push(out, s + c.last, n - c.last))
            rc = -1;
        return rc;
    }
    case PRE_METASPACE: {
        mhla_buf b = {0};
        int rc = 0;
        for (size_t i = 0; i < n && rc == 0; i++)
            rc = s[i] == ' ' ? mhla_buf_put(&b, pt->replacement, pt->replacement_len)
                             : mhla_buf_putc(&b, s[i]);
        bool starts =
            b.len >= pt->replacement_len && memcmp(b.p, pt->replacement, pt->replacement_len) == 0;
        bool prepend =
            !starts && (pt->prepend_scheme == 2 || (pt->prepend_scheme == 1 && section_index == 0));
        mhla_buf r = {0};
        if (rc == 0 && prepend)
            rc = mhla_buf_put(&r, pt->replacement, pt->replacement_len);
        if (rc == 0)
            rc = mhla_buf_put(&r, b.p ? b.p : "", b.len);
        if (rc == 0)
            rc = tok_strlist_push(out, r.p, r.len);
        mhla_buf_free(&b);
        mhla_buf_free(&r);
        return rc;
    }
    case PRE_DIGITS: return runs(s, n, cls_digit, -1, pt->individual_digits ? CLS_WORD : -2, out);
    case PRE_WHITESPACE: return runs(s, n, cls_whitespace, CLS_SPACE, -2, out);
    case PRE_WHITESPACE_SPLIT: return runs(s, n, cls_space_only, CLS_SPACE, -2, out);
    case PRE_PUNCTUATION: return runs(s, n, cls_punct, -1, -2, out);
    }
    return -1;
}

int tok_pretok_apply(const tok_pretok *pt, const tok_strlist *in, size_t section_index,
                     tok_strlist *out, char *err, size_t errlen)
{
    for (size_t i = 0; i < in->n; i++) {
        int rc = apply_text(pt, tok_strlist_at(in, i), in->len[i], section_index, out, err, errlen);
        if (rc) {
            if (rc != -1 || (err && !err[0]))
                tok_err(err, errlen, "out of memory in pre-tokenizer");
            return -1;
        }
    }
    return 0;
}
