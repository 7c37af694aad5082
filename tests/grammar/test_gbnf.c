/*
 * test_gbnf.c — the GBNF compiler and the byte-level automaton, feature by
 * feature: each construct with strings it must accept whole, as a prefix
 * only, and reject; character classes over UTF-8 checked against their
 * definition on random sets; repetition bounds exactly; every error with
 * its code and position; the caps; sampling.
 */
#include "check.h"
#include "grammar.h"
#include "grammar_internal.h"

#include <string.h>

#define WHOLE 1
#define PREFIX 0
#define REJ MHLA_GRAMMAR_REJECTED

static mhla_grammar *compile(const char *gbnf)
{
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    int rc = mhla_grammar_from_gbnf(gbnf, strlen(gbnf), NULL, &g, &err);
    CHECK(rc == 0, "compile failed (%d: %s): %s", rc, err.msg, gbnf);
    return rc == 0 ? g : NULL;
}

/* Each (string, expected) pair of a grammar; the strings may hold any byte
 * (lengths from strlen: no NUL in them). */
static void expect_all(const char *gbnf, const char *const *s, const int *want, int n)
{
    mhla_grammar *g = compile(gbnf);
    for (int i = 0; g && i < n; i++) {
        mhla_grammar_error err;
        int rc = mhla_grammar_match(g, s[i], strlen(s[i]), &err);
        CHECK(rc == want[i], "grammar %s: \"%s\" gave %d (%s), expected %d", gbnf, s[i], rc,
              rc < 0 ? err.msg : "", want[i]);
    }
    mhla_grammar_free(g);
}

#define EXPECT(gbnf, ...)                                                                          \
    do {                                                                                           \
        const struct {                                                                             \
            const char *s;                                                                         \
            int want;                                                                              \
        } c_[] = {__VA_ARGS__};                                                                    \
        const char *s_[sizeof c_ / sizeof c_[0]];                                                  \
        int w_[sizeof c_ / sizeof c_[0]];                                                          \
        for (size_t i_ = 0; i_ < sizeof c_ / sizeof c_[0]; i_++)                                   \
            s_[i_] = c_[i_].s, w_[i_] = c_[i_].want;                                               \
        expect_all(gbnf, s_, w_, (int)(sizeof c_ / sizeof c_[0]));                                 \
    } while (0)

static void test_basics(void)
{
    EXPECT("root ::= \"abc\"", {"abc", WHOLE}, {"ab", PREFIX}, {"", PREFIX}, {"abd", REJ},
           {"abcd", REJ});
    EXPECT("root ::= \"a\" | \"bc\"", {"a", WHOLE}, {"bc", WHOLE}, {"b", PREFIX}, {"c", REJ});
    EXPECT("root ::= x \"-\" x\nx ::= \"1\" | \"22\"", {"1-22", WHOLE}, {"22-1", WHOLE},
           {"1-2", PREFIX}, {"1-3", REJ}, {"2-1", REJ});
    EXPECT("root ::= (\"ab\" | \"c\")+ \"d\"", {"abcd", WHOLE}, {"cabd", WHOLE}, {"d", REJ},
           {"ab", PREFIX}, {"abd", WHOLE}, {"acd", REJ});
    EXPECT("root ::= \"\" | \"a\"", {"", WHOLE}, {"a", WHOLE}, {"b", REJ});
    EXPECT("root ::= \"a\" # a comment\n# another\n\nb ::= \"x\" # unused", {"a", WHOLE},
           {"x", REJ});
    EXPECT("root ::= my-rule\nmy-rule ::= \"x\" other-2\nother-2 ::= \"y\"", {"xy", WHOLE});
    EXPECT("root ::= (\"a\"\n  \"b\")", {"ab", WHOLE});
    EXPECT("root ::= \"a\" |\n  \"b\"", {"a", WHOLE}, {"b", WHOLE});
    EXPECT("root ::= \"a\"\r\nb ::= \"b\"\r\n", {"a", WHOLE}, {"b", REJ});
    EXPECT("root ::=\n  \"a\" x\nx ::= \"b\"", {"ab", WHOLE});
    EXPECT("root ::= x(\"+\" x)*\nx ::= [0-9]", {"1+2+3", WHOLE}, {"1+", PREFIX}, {"+", REJ});
}

static void test_escapes(void)
{
    EXPECT("root ::= \"\\n\\r\\t\\\\\\\"\\[\\]\\x41\\u00e9\\U0001F600\"",
           {"\n\r\t\\\"[]A\xC3\xA9\xF0\x9F\x98\x80", WHOLE}, {"\n\r\t\\\"[]A\xC3", PREFIX},
           {"\n\r\t\\\"[]A\xE9", REJ});
    EXPECT("root ::= [\\x00-\\x08\\]\\[\\\\-]", {"]", WHOLE}, {"[", WHOLE}, {"\\", WHOLE},
           {"-", WHOLE}, {"\x01", WHOLE}, {"a", REJ});
    EXPECT("root ::= \"é😀\"", {"é😀", WHOLE}, {"é", PREFIX}, {"e", REJ});
}

static void test_classes(void)
{
    EXPECT("root ::= [a-cx]", {"a", WHOLE}, {"c", WHOLE}, {"x", WHOLE}, {"d", REJ}, {"", PREFIX});
    EXPECT("root ::= [^a-c]", {"d", WHOLE}, {"a", REJ}, {"\xC3\xA9", WHOLE}, {"\xC3", PREFIX},
           {"\xFF", REJ}, {"\xED\xA0\x80", REJ}, {"\xED\x9F\xBF", WHOLE}, {"\xC0\x80", REJ});
    EXPECT("root ::= .", {"a", WHOLE}, {"\xC3\xA9", WHOLE}, {"\xF0\x9F\x98\x80", WHOLE},
           {"\xF0\x9F\x98", PREFIX}, {"\xC0\x80", REJ}, {"\xF4\x90\x80\x80", REJ}, {"\xF5", REJ},
           {"\x80", REJ}, {"\xE0\x80\x80", REJ}, {"ab", REJ});
    EXPECT("root ::= [ぁ-ゟ]+", {"ぁゟ", WHOLE}, {"ゔ", WHOLE}, {"ァ", REJ}, {"\xE3\x81", PREFIX},
           {"\xE3\x81\x80", REJ});
    EXPECT("root ::= [aé-ê]", {"a", WHOLE}, {"é", WHOLE}, {"ê", WHOLE}, {"ë", REJ}, {"è", REJ});
    EXPECT("root ::= [\\u007F-\\u0080]", {"\x7F", WHOLE}, {"\xC2\x80", WHOLE}, {"\xC2\x81", REJ},
           {"\x7E", REJ});
    EXPECT("root ::= [\\u07FF-\\u0800]", {"\xDF\xBF", WHOLE}, {"\xE0\xA0\x80", WHOLE},
           {"\xE0\xA0\x81", REJ}, {"\xDF\xBE", REJ});
    EXPECT("root ::= [\\uFFFF-\\U00010000]", {"\xEF\xBF\xBF", WHOLE}, {"\xF0\x90\x80\x80", WHOLE},
           {"\xF0\x90\x80\x81", REJ}, {"\xEF\xBF\xBE", REJ});
    EXPECT("root ::= [\\uD7FF-\\uE000]", {"\xED\x9F\xBF", WHOLE}, {"\xEE\x80\x80", WHOLE},
           {"\xED\xA0\x80", REJ}, {"\xED\xBF\xBF", REJ});
    EXPECT("root ::= [^\\x00-\\U0010FFFF] | \"z\"", {"z", WHOLE}, {"a", REJ}, {"\xC3\xA9", REJ});
    /* tokens that split a character: the automaton is over bytes */
    EXPECT("root ::= \"é\" [^é]", {"\xC3", PREFIX}, {"\xC3\xA9", PREFIX}, {"\xC3\xA9\xC3", PREFIX},
           {"\xC3\xA9\xC3\xA9", REJ}, {"\xC3\xA9\xC3\xA8", WHOLE});
}

/* UTF-8 of cp into u; its length. */
static int utf8(uint32_t cp, char *u)
{
    if (cp < 0x80)
        return u[0] = (char)cp, 1;
    if (cp < 0x800)
        return u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)),
               u[2] = (char)(0x80 | (cp & 63)), 3;
    return u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)),
           u[2] = (char)(0x80 | ((cp >> 6) & 63)), u[3] = (char)(0x80 | (cp & 63)), 4;
}

/* A code point near a boundary of UTF-8 or of the ranges (lo[], hi[]). */
static uint32_t near_cp(const uint32_t *lo, const uint32_t *hi, int n)
{
    static const uint32_t edges[] = {0,      0x7F,   0x80,   0x7FF,   0x800,   0xFFF,   0x1000,
                                     0xD7FF, 0xE000, 0xFFFF, 0x10000, 0x3FFFF, 0x40000, 0x10FFFF};
    uint32_t base;
    int k = rnd(4);
    if (k == 0)
        return (uint32_t)rnd(0x110000);
    base = k == 1 ? edges[rnd(14)] : k == 2 ? lo[rnd(n)] : hi[rnd(n)];
    int64_t cp = (int64_t)base + rnd(5) - 2;
    return cp < 0 ? 0 : cp > 0x10FFFF ? 0x10FFFF : (uint32_t)cp;
}

static void check_class_cps(mhla_grammar *g, const uint32_t *lo, const uint32_t *hi, int n,
                            int negate, const char *gbnf)
{
    for (int t = 0; t < 400; t++) {
        uint32_t cp = near_cp(lo, hi, n);
        if (cp >= 0xD800 && cp <= 0xDFFF)
            continue;
        int in = 0;
        for (int i = 0; i < n; i++)
            in |= cp >= lo[i] && cp <= hi[i];
        in ^= negate;
        char u[4];
        int len = utf8(cp, u);
        int rc = mhla_grammar_match(g, u, (size_t)len, NULL);
        CHECK(rc == (in ? WHOLE : REJ), "%s: U+%04X gave %d", gbnf, (unsigned)cp, rc);
        if (in && len > 1) {
            rc = mhla_grammar_match(g, u, (size_t)len - 1, NULL);
            CHECK(rc == PREFIX, "%s: U+%04X cut gave %d", gbnf, (unsigned)cp, rc);
        }
    }
}

/* Random sets of ranges, plain and negated, against their definition. */
static void test_random_classes(void)
{
    for (int k = 0; k < 300; k++) {
        uint32_t lo[4], hi[4], none[1] = {0};
        int n = 1 + rnd(4), negate = rnd(2);
        char gbnf[200];
        int at = snprintf(gbnf, sizeof gbnf, "root ::= [%s", negate ? "^" : "");
        for (int i = 0; i < n; i++) {
            uint32_t a = near_cp(none, none, 1), b = rnd(3) ? a + (uint32_t)rnd(3000) : a;
            b = b > 0x10FFFF ? 0x10FFFF : b;
            lo[i] = a, hi[i] = b;
            at += snprintf(gbnf + at, sizeof gbnf - (size_t)at, "\\U%08X-\\U%08X", (unsigned)a,
                           (unsigned)b);
        }
        snprintf(gbnf + at, sizeof gbnf - (size_t)at, "]");
        mhla_grammar *g = compile(gbnf);
        if (g)
            check_class_cps(g, lo, hi, n, negate, gbnf);
        mhla_grammar_free(g);
    }
}

/* x{m,n} accepts exactly m..n copies (n < 0: no bound), for a one-byte
 * and a two-byte item. */
static void check_bounds(const char *item, const char *unit, int m, int n, const char *rep)
{
    char gbnf[100], s[64] = "";
    snprintf(gbnf, sizeof gbnf, "root ::= %s%s", item, rep);
    mhla_grammar *g = compile(gbnf);
    size_t ul = strlen(unit);
    for (int k = 0; g && k <= (n < 0 ? m + 4 : n + 2); k++) {
        int want = k >= m && (n < 0 || k <= n) ? WHOLE : k < m ? PREFIX : REJ;
        int rc = mhla_grammar_match(g, s, strlen(s), NULL);
        CHECK(rc == want, "%s: %d copies gave %d, expected %d", gbnf, k, rc, want);
        if (ul > 1 && k >= m && (n < 0 || k < n)) { /* a copy begun: a prefix */
            memcpy(s + strlen(s), unit, 1);
            s[k * ul + 1] = '\0';
            CHECK(mhla_grammar_match(g, s, strlen(s), NULL) == PREFIX, "%s: half copy", gbnf);
            s[k * ul] = '\0';
        }
        strcat(s, unit);
    }
    mhla_grammar_free(g);
}

static void test_repetition(void)
{
    static const struct {
        int m, n;
        const char *rep;
    } r[] = {{0, -1, "*"},        {1, -1, "+"},    {0, 1, "?"},     {0, 0, "{0}"},
             {3, 3, "{3}"},       {2, -1, "{2,}"}, {2, 4, "{2,4}"}, {0, 3, "{0,3}"},
             {1, 1, "{ 1 , 1 }"}, {0, -1, "{0,}"}, {5, 7, "{5,7}"}};
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        check_bounds("\"a\"", "a", r[i].m, r[i].n, r[i].rep);
        check_bounds("(\"x\" \"y\")", "xy", r[i].m, r[i].n, r[i].rep);
        check_bounds("[é]", "é", r[i].m, r[i].n, r[i].rep);
    }
    /* a repetition applies to the item before it: a literal as a whole */
    EXPECT("root ::= \"ab\"{2} \"c\"", {"ababc", WHOLE}, {"abbc", REJ});
}

/* gbnf fails with code, err.pos == pos (-2: not checked), msg holding what. */
static void expect_error(const char *gbnf, size_t len, int code, long pos, const char *what)
{
    mhla_grammar *g = (mhla_grammar *)1;
    mhla_grammar_error err;
    int rc = mhla_grammar_from_gbnf(gbnf, len, NULL, &g, &err);
    CHECK(rc == code, "%.60s: rc %d (%s), expected %d", gbnf, rc, rc ? err.msg : "", code);
    CHECK(rc != 0 || g == NULL, "%.60s: a grammar on failure", gbnf);
    if (rc == 0) {
        mhla_grammar_free(g);
        return;
    }
    CHECK(g == NULL, "%.60s: *out not NULL on failure", gbnf);
    CHECK(pos == -2 || err.pos == pos, "%.60s: pos %ld, expected %ld (%s)", gbnf, err.pos, pos,
          err.msg);
    CHECK(strstr(err.msg, what) != NULL, "%.60s: message \"%s\" lacks \"%s\"", gbnf, err.msg, what);
}

#define ERR(gbnf, code, pos, what) expect_error(gbnf, strlen(gbnf), code, pos, what)

static void test_errors(void)
{
    const int S = MHLA_GRAMMAR_SYNTAX;
    ERR("root ::= foo", S, 9, "undefined rule 'foo'");
    ERR("root ::= \"a\"\nx ::= \"b\" y-z", S, 23, "undefined rule 'y-z'");
    ERR("a ::= \"x\"", S, -1, "no rule named 'root'");
    ERR("", S, -1, "no rule named 'root'");
    ERR("root ::= root \"a\" | \"b\"", S, 0, "left recursion: rule 'root'");
    ERR("root ::= a\na ::= b \"x\"\nb ::= \"y\" | a", S, 11, "left recursion: rule 'a'");
    ERR("root ::= e root \"x\" | \"y\"\ne ::= \"\" | \"z\"", S, 0, "left recursion: rule 'root'");
    ERR("root ::= x\nx ::= (\"a\"? x) | \"b\"", S, 11, "left recursion: rule 'x'");
    ERR("root ::= \"a\\q\"", S, 11, "unknown escape '\\q'");
    ERR("root ::= \"abc", S, 9, "unterminated string");
    ERR("root ::= [abc", S, 9, "unterminated character class");
    ERR("root ::= (\"a\"", S, 13, "expecting ')'");
    ERR("root ::= \"\\x4g\"", S, 13, "expecting 2 hex digits");
    ERR("root ::= \"\\ud800\"", S, 10, "not a character");
    ERR("root ::= \"\xC3\x28\"", S, 10, "invalid UTF-8");
    ERR("root ::= \"\xE0\x80\x80\"", S, 10, "invalid UTF-8");
    ERR("root ::= \"a\"\nroot ::= \"b\"", S, 13, "defined twice");
    ERR("root ::= [z-a]", S, 10, "reversed range");
    ERR("root ::= []", S, 9, "empty character class");
    ERR("root ::= \"a\"{3,2}", S, 12, "maximum below minimum");
    ERR("root ::= *", S, 9, "expecting an item before '*'");
    ERR("root = \"a\"", S, 5, "expecting '::='");
    ERR("root ::= \"a\" )", S, 13, "expecting a newline");
    ERR("root ::= \"a\"\n\"b\"", S, 13, "expecting a rule name");
    ERR("root ::= \"a\"{2", S, 14, "expecting ',' or '}'");
    ERR("root ::= \"a\"{x}", S, 13, "expecting an integer");
    ERR("root ::= \"a\"\n  x ::= \"b\" \\", S, 25, "expecting a newline");
    expect_error("root ::= \"a\0\"", 13, S, 11, "NUL byte");
    /* the position is also given as a line and column */
    ERR("root ::= \"a\"\nb ::= \"\\z\"", S, 20, "line 2, column 8");
}

/* A string of n copies of unit, then tail (malloc'd). */
static char *repeat(const char *head, const char *unit, int n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * (size_t)n + tl + 1);
    if (!s)
        die("out of memory");
    memcpy(s, head, hl);
    for (int i = 0; i < n; i++)
        memcpy(s + hl + ul * (size_t)i, unit, ul);
    memcpy(s + hl + ul * (size_t)n, tail, tl + 1);
    return s;
}

static void test_caps(void)
{
    const int L = MHLA_GRAMMAR_LIMIT;
    ERR("root ::= \"a\"{100001}", L, 13, "repetition count over 100000");
    ERR("root ::= \"a\"{0,99999999999999999999}", L, 15, "repetition count over");
    ERR("root ::= \"a\"{0,70000}", L, -1, "more than 65536 rules");
    ERR("root ::= \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaa\"{50000}",
        L, -1, "more than 4194304 elements");
    char *deep = repeat("root ::= ", "(", 300, "\"a\"");
    ERR(deep, L, -2, "parentheses nested deeper than 256");
    free(deep);
    deep = repeat("root ::= ", "(", 200, "");
    char *ok = repeat(deep, ")", 200, "");
    free(deep);
    deep = repeat(ok, "", 0, " \"a\"");
    mhla_grammar *g = compile(deep);
    CHECK(g && mhla_grammar_match(g, "a", 1, NULL) == WHOLE, "200 nested groups");
    mhla_grammar_free(g);
    free(ok);
    free(deep);
    /* stacks at run time: depth and count */
    g = compile("root ::= \"(\" root \")\" | \"x\"");
    char *s = repeat("", "(", 2000, "");
    mhla_grammar_error err;
    int rc = g ? mhla_grammar_match(g, s, 2000, &err) : 0;
    CHECK(rc == L && strstr(err.msg, "deeper than 1024"), "deep stack: %d %s", rc, err.msg);
    CHECK(g && mhla_grammar_match(g, s, 500, NULL) == PREFIX, "500 deep");
    mhla_grammar_free(g);
    free(s);
    g = compile("root ::= x\nx ::= \"a\" x \"b\" | \"a\" x \"c\" | \"\"");
    rc = g ? mhla_grammar_match(g, "aaaaaaaaaaaaaa", 14, &err) : 0;
    CHECK(rc == L && strstr(err.msg, "more than 4096 stacks"), "stack count: %d %s", rc, err.msg);
    CHECK(g && mhla_grammar_match(g, "aaaaaaab", 8, NULL) == PREFIX, "7 a's fit");
    mhla_grammar_free(g);
    /* nullable repetitions of a recursive group: exponentially many ways to
     * expand the same stacks, stopped by the expansion cap */
    g = compile("root ::= (\"-(\" root \"\")*{3,5}");
    s = repeat("", "-(", 100, "");
    rc = g ? mhla_grammar_match(g, s, 200, &err) : 0;
    CHECK(rc == L && strstr(err.msg, "rule expansions"), "expansions: %d %s", rc, err.msg);
    CHECK(g && mhla_grammar_match(g, s, 4, NULL) == WHOLE, "two levels fit");
    free(s);
    mhla_grammar_free(g);
}

static void test_sample(void)
{
    static const char *gs[] = {
        "root ::= \"abc\"",
        "root ::= (\"x\" | [0-9]+ | \"é\"{2,3})* \"!\"",
        "root ::= obj\nobj ::= \"{\" (pair (\",\" pair)*)? \"}\"\npair ::= [a-z]+ \":\" val\n"
        "val ::= obj | [0-9]+ | [^\\x00-\\x7F]",
        "root ::= \"(\" root \")\" | \"x\"",
        "root ::= [^\\x00-\\x7F]{1,8}",
    };
    for (size_t i = 0; i < sizeof gs / sizeof gs[0]; i++) {
        mhla_grammar *g = compile(gs[i]);
        for (uint64_t seed = 0; g && seed < 100; seed++) {
            char *s = NULL, *s2 = NULL;
            size_t n = 0, n2 = 0;
            mhla_grammar_error err;
            int rc = mhla_grammar_sample(g, seed, 200, &s, &n, &err);
            CHECK(rc == 0, "%s: sample %d %s", gs[i], rc, err.msg);
            CHECK(rc || n <= 200, "%s: %zu bytes over the budget", gs[i], n);
            CHECK(rc || mhla_grammar_match(g, s, n, NULL) == WHOLE, "%s: sample '%s' rejected",
                  gs[i], s);
            rc = mhla_grammar_sample(g, seed, 200, &s2, &n2, NULL);
            CHECK(rc == 0 && n2 == n && memcmp(s, s2, n) == 0, "%s: seed %d not repeatable", gs[i],
                  (int)seed);
            free(s);
            free(s2);
        }
        mhla_grammar_free(g);
    }
}

static void test_sample_limits(void)
{
    mhla_grammar *g = compile("root ::= \"abc\"");
    char *s = (char *)1;
    size_t n;
    CHECK(g && mhla_grammar_sample(g, 1, 2, &s, &n, NULL) == MHLA_GRAMMAR_LIMIT && s == NULL,
          "a budget below the shortest string");
    CHECK(g && mhla_grammar_sample(g, 1, 3, &s, &n, NULL) == 0 && n == 3 && strcmp(s, "abc") == 0,
          "exact budget");
    free(g ? s : NULL);
    mhla_grammar_free(g);
    g = compile("root ::= \"a\" root");
    mhla_grammar_error err;
    CHECK(g && mhla_grammar_sample(g, 1, 1000, &s, &n, &err) == MHLA_GRAMMAR_LIMIT &&
              strstr(err.msg, "no finite string"),
          "no finite string");
    mhla_grammar_free(g);
    /* a deep grammar under a tight budget still ends inside it */
    g = compile("root ::= \"(\" root \")\" | \"(\" root root \")\" | \"x\"");
    for (uint64_t seed = 0; g && seed < 50; seed++) {
        int rc = mhla_grammar_sample(g, seed, 21, &s, &n, NULL);
        CHECK(rc == 0 && n <= 21 && mhla_grammar_match(g, s, n, NULL) == WHOLE, "tight budget");
        free(rc == 0 ? s : NULL);
    }
    mhla_grammar_free(g);
}

static void test_refs(void)
{
    mhla_grammar *g = compile("root ::= \"a\"");
    mhla_grammar_retain(g);
    mhla_grammar_free(g); /* one reference left */
    CHECK(g && mhla_grammar_match(g, "a", 1, NULL) == WHOLE, "retained grammar usable");
    mhla_grammar_free(g);
    mhla_grammar_free(NULL);
    mhla_grammar_error err;
    CHECK(mhla_grammar_from_gbnf("root ::= \"a\"", 12, NULL, NULL, &err) == MHLA_GRAMMAR_SYNTAX,
          "NULL out");
    CHECK(mhla_grammar_match(NULL, "a", 1, &err) == MHLA_GRAMMAR_SYNTAX, "NULL grammar");
    g = NULL;
    CHECK(mhla_grammar_from_gbnf("start ::= \"s\"", 13, "start", &g, &err) == 0 && g &&
              mhla_grammar_match(g, "s", 1, NULL) == WHOLE,
          "another start rule: %s", err.msg);
    mhla_grammar_free(g);
}

int main(void)
{
    test_basics();
    test_escapes();
    test_classes();
    test_random_classes();
    test_repetition();
    test_errors();
    test_caps();
    test_sample();
    test_sample_limits();
    test_refs();
    if (failures) {
        fprintf(stderr, "grammar.gbnf: %d failures\n", failures);
        return 1;
    }
    printf("grammar.gbnf: all checks passed\n");
    return 0;
}
