/* Regexes for Split / Replace: PCRE2 (UTF, Unicode properties, JIT), with the pattern
 * translated the way the reference implementation translates Oniguruma syntax, and match
 * iteration / split following JavaScript's String methods so results agree exactly. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_internal.h"

#define WORD_CLASS_BODY "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}"

static int compile(tok_regex *re, const char *pat, size_t n, uint32_t extra, char *err,
                   size_t errlen, const char *what)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_compile_context *cc = pcre2_compile_context_create(NULL);
    if (!cc) {
        tok_err(err, errlen, "out of memory compiling regex");
        return -1;
    }
    pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
    re->code = pcre2_compile((PCRE2_SPTR)pat, n, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK | extra,
                             &ec, &eo, cc);
    pcre2_compile_context_free(cc);
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        tok_err(err, errlen, "cannot compile %s regex \"%.*s\" at offset %zu: %s", what,
                (int)(n > 200 ? 200 : n), pat, (size_t)eo, (const char *)msg);
        return -1;
    }
    re->jit = pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE) == 0;
    return 0;
}

int tok_regex_compile_raw(tok_regex *re, const char *pat, char *err, size_t errlen)
{
    return compile(re, pat, strlen(pat), 0, err, errlen, "built-in");
}

int tok_regex_compile_literal(tok_regex *re, const char *lit, size_t n, bool capture, char *err,
                              size_t errlen)
{
    /* escape every ASCII non-alphanumeric (PCRE2_LITERAL cannot be combined with UCP) */
    mhla_buf b = {0};
    int rc = capture ? mhla_buf_putc(&b, '(') : mhla_buf_reserve(&b, n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        unsigned char c = (unsigned char)lit[i];
        if (c < 0x80 &&
            !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
            rc = mhla_buf_putc(&b, '\\');
        if (rc == 0)
            rc = mhla_buf_putc(&b, (char)c);
    }
    if (rc == 0 && capture)
        rc = mhla_buf_putc(&b, ')');
    if (rc) {
        mhla_buf_free(&b);
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    rc = compile(re, b.p ? b.p : "", b.len, 0, err, errlen, "literal");
    mhla_buf_free(&b);
    return rc;
}

/* The translation of an Oniguruma pattern as it is copied out, one construct at a time. */
typedef struct {
    const char *pat;
    size_t n, i; /* the pattern and where the translation stands in it */
    mhla_buf out;
    int depth, icase_depth[64], n_icase; /* group depth; depths of the open (?i: groups */
    bool in_class;
} onig_tr;

/* The PCRE2 text for escape \e, or NULL when \e means the same in both. */
static const char *escape_rep(char e, bool in_class)
{
    switch (e) {
    case 's': return "\\p{White_Space}";
    case 'S': return "\\P{White_Space}";
    case 'd': return "\\p{Nd}";
    case 'D': return "\\P{Nd}";
    case 'w': return in_class ? WORD_CLASS_BODY : "[" WORD_CLASS_BODY "]";
    case 'W': return in_class ? NULL : "[^" WORD_CLASS_BODY "]";
    case 'h': return in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]";
    case 'H': return in_class ? NULL : "[^0-9A-Fa-f]";
    case 'b':
        return in_class ? NULL
                        : "(?:(?<![" WORD_CLASS_BODY "])(?=[" WORD_CLASS_BODY
                          "])|(?<=[" WORD_CLASS_BODY "])(?![" WORD_CLASS_BODY "]))";
    case 'B':
        return in_class ? NULL
                        : "(?:(?<![" WORD_CLASS_BODY "])(?![" WORD_CLASS_BODY
                          "])|(?<=[" WORD_CLASS_BODY "])(?=[" WORD_CLASS_BODY "]))";
    default: return NULL;
    }
}

/* Steps below return 0, -1 when out of memory, -2 when the pattern is refused (err set). */
static int tr_escape(onig_tr *t, char *err, size_t errlen)
{
    char e = t->pat[++t->i];
    const char *rep = escape_rep(e, t->in_class);
    if (!rep && t->in_class && (e == 'W' || e == 'H')) {
        tok_err(err, errlen,
                "unsupported regex construct \\%c inside a character class in \"%.*s\"", e,
                (int)(t->n > 200 ? 200 : t->n), t->pat);
        return -2;
    }
    if (rep)
        return mhla_buf_put(&t->out, rep, strlen(rep));
    return mhla_buf_putc(&t->out, '\\') || mhla_buf_putc(&t->out, e) ? -1 : 0;
}

/* '[' opens a class, in which a ']' or '^]' right after the '[' is literal. */
static int tr_class(onig_tr *t)
{
    t->in_class = true;
    int rc = mhla_buf_putc(&t->out, '[');
    if (t->i + 1 < t->n && t->pat[t->i + 1] == '^') {
        rc = rc ? rc : mhla_buf_putc(&t->out, '^');
        t->i++;
    }
    if (t->i + 1 < t->n && t->pat[t->i + 1] == ']') {
        rc = rc ? rc : mhla_buf_put(&t->out, "\\]", 2);
        t->i++;
    }
    return rc;
}

/* Groups: a (?i: group becomes (?: and its letters are folded by tr_char instead. */
static int tr_group(onig_tr *t, char c)
{
    const char *p = t->pat + t->i;
    if (c == ')') {
        if (t->n_icase && t->icase_depth[t->n_icase - 1] == t->depth)
            t->n_icase--;
        t->depth--;
        return mhla_buf_putc(&t->out, c);
    }
    t->depth++;
    if (t->i + 3 < t->n && p[1] == '?' && p[2] == 'i' && p[3] == ':') {
        if (t->n_icase < 64)
            t->icase_depth[t->n_icase++] = t->depth;
        t->i += 3;
        return mhla_buf_put(&t->out, "(?:", 3);
    }
    return mhla_buf_putc(&t->out, c);
}

static int tr_char(onig_tr *t, char *err, size_t errlen)
{
    char c = t->pat[t->i];
    if (c == '\\' && t->i + 1 < t->n)
        return tr_escape(t, err, errlen);
    if (t->in_class) {
        if (c == ']')
            t->in_class = false;
        return mhla_buf_putc(&t->out, c);
    }
    if (c == '[')
        return tr_class(t);
    if (c == '(' || c == ')')
        return tr_group(t, c);
    if (t->n_icase && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
        char lo = (char)(c | 0x20), up = (char)(lo - 32), cls[4] = {'[', lo, up, ']'};
        return mhla_buf_put(&t->out, cls, 4);
    }
    return mhla_buf_putc(&t->out, c);
}

/* Rewrite the escapes whose meaning differs between Oniguruma/the reference and PCRE2:
 * \s \S \w \W \d \D \h \H \b \B, ^ and $ (line anchors), and ASCII-only case folding
 * inside (?i: ... ) groups (PCRE2 would also fold e.g. U+017F to 's'). */
int tok_regex_compile_onig(tok_regex *re, const char *pat, size_t n, char *err, size_t errlen)
{
    onig_tr t = {.pat = pat, .n = n};
    int rc = 0;
    for (t.i = 0; t.i < n && rc == 0; t.i++)
        rc = tr_char(&t, err, errlen);
    if (rc == 0)
        rc = compile(re, t.out.p ? t.out.p : "", t.out.len, PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX,
                     err, errlen, "tokenizer.json");
    else if (rc == -1)
        tok_err(err, errlen, "out of memory");
    mhla_buf_free(&t.out);
    return rc ? -1 : 0;
}

void tok_regex_free(tok_regex *re)
{
    if (re->code)
        pcre2_code_free(re->code);
    re->code = NULL;
}

/* One search from start; returns 1 and fills ov when found, 0 when not, -1 on error. */
static int search(const tok_regex *re, pcre2_match_data *md, const char *s, size_t n, size_t start,
                  char *err, size_t errlen)
{
    int r = pcre2_match(re->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, md, NULL);
    if (r == PCRE2_ERROR_JIT_STACKLIMIT) /* fall back to the interpreter, which uses the heap */
        r = pcre2_match(re->code, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md,
                        NULL);
    if (r == PCRE2_ERROR_NOMATCH)
        return 0;
    if (r < 0) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(r, msg, sizeof msg);
        tok_err(err, errlen, "regex match failed: %s", (const char *)msg);
        return -1;
    }
    return 1;
}

static size_t advance_cp(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return i + 1;
    i++;
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80)
        i++;
    return i;
}

int tok_regex_each(const tok_regex *re, const char *s, size_t n, tok_match_cb cb, void *ctx,
                   char *err, size_t errlen)
{
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!md) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    size_t pos = 0;
    int rc = 0;
    while (pos <= n) {
        int r = search(re, md, s, n, pos, err, errlen);
        if (r <= 0) {
            rc = r;
            break;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], e = ov[1];
        if (e < a)
            e = a; /* \K tricks: never produce a reversed span */
        if ((rc = cb(ctx, a, e)))
            break;
        /* JavaScript's matchAll: after an empty match, step one code point */
        pos = e == a ? advance_cp(s, n, e) : e;
    }
    pcre2_match_data_free(md);
    return rc;
}

/* split puts the non-empty captures of each match between the pieces. */
static int push_groups(pcre2_match_data *md, const char *s, tok_strlist *out)
{
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t groups = pcre2_get_ovector_count(md);
    for (uint32_t g = 1; g < groups; g++)
        if (ov[2 * g] != PCRE2_UNSET && ov[2 * g + 1] > ov[2 * g] &&
            tok_strlist_push(out, s + ov[2 * g], ov[2 * g + 1] - ov[2 * g]))
            return -1;
    return 0;
}

int tok_regex_js_split(const tok_regex *re, const char *s, size_t n, tok_strlist *out, char *err,
                       size_t errlen)
{
    if (n == 0)
        return 0; /* "".split(x) yields [] or [""], and empty pieces are dropped */
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re->code, NULL);
    if (!md) {
        tok_err(err, errlen, "out of memory");
        return -1;
    }
    size_t p = 0, q = 0;
    int rc = 0;
    while (q < n) {
        int r = search(re, md, s, n, q, err, errlen);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], e = ov[1];
        if (a >= n)
            break; /* split never matches at the very end */
        if (e > n)
            e = n;
        if (e == p) {
            q = advance_cp(s, n, a);
            continue;
        } /* the spec steps past a match ending at the last cut */
        if (a > p && tok_strlist_push(out, s + p, a - p)) {
            rc = -2;
            break;
        }
        if (push_groups(md, s, out)) {
            rc = -2;
            break;
        }
        p = e;
        q = p;
    }
    if (rc == 0 && p < n && tok_strlist_push(out, s + p, n - p))
        rc = -2;
    if (rc == -2) {
        tok_err(err, errlen, "out of memory");
        rc = -1;
    }
    pcre2_match_data_free(md);
    return rc;
}

typedef struct {
    const char *s, *rep;
    size_t rn, last;
    mhla_buf *out;
} replace_ctx;

static int replace_cb(void *vctx, size_t a, size_t e)
{
    replace_ctx *c = vctx;
    if (mhla_buf_put(c->out, c->s + c->last, a - c->last) || mhla_buf_put(c->out, c->rep, c->rn))
        return -2;
    c->last = e;
    return 0;
}

int tok_regex_replace(const tok_regex *re, const char *s, size_t n, const char *rep, size_t rn,
                      mhla_buf *out, char *err, size_t errlen)
{
    replace_ctx c = {s, rep, rn, 0, out};
    int rc = tok_regex_each(re, s, n, replace_cb, &c, err, errlen);
    if (rc == 0 && mhla_buf_put(out, s + c.last, n - c.last))
        rc = -2;
    if (rc == -2)
        tok_err(err, errlen, "out of memory");
    return rc ? -1 : 0;
}
