/*
 * test_llamacpp.c — llama.cpp's own grammars (tests/grammar/gbnf/, see
 * PROVENANCE.md): every .gbnf there compiles, 50 seeded samples of each
 * are accepted whole by the matcher, and hand-written strings of json,
 * arithmetic, list and c are accepted, accepted as a prefix, or rejected as
 * llama.cpp's grammars define them.
 * usage: test_llamacpp DIR
 */
#include "check.h"
#include "base.h"
#include "grammar.h"

#include <dirent.h>
#include <string.h>

#define WHOLE 1
#define PREFIX 0
#define REJ MHLA_GRAMMAR_REJECTED

static mhla_grammar *load(const char *dir, const char *name)
{
    char path[1024], msg[256];
    char *text;
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (mhla_read_file(path, 1 << 20, &text, &len, msg, sizeof msg))
        die("%s", msg);
    mhla_grammar *g = NULL;
    mhla_grammar_error err;
    int rc = mhla_grammar_from_gbnf(text, len, NULL, &g, &err);
    CHECK(rc == 0, "%s: %s", name, err.msg);
    free(text);
    return g;
}

static int check_samples(const char *dir, const char *name)
{
    mhla_grammar *g = load(dir, name);
    int n_ok = 0;
    for (uint64_t seed = 1; g && seed <= 50; seed++) {
        char *s;
        size_t n;
        mhla_grammar_error err;
        int rc = mhla_grammar_sample(g, seed, 4096, &s, &n, &err);
        CHECK(rc == 0, "%s seed %d: %s", name, (int)seed, err.msg);
        if (rc)
            continue;
        rc = mhla_grammar_match(g, s, n, &err);
        CHECK(rc == WHOLE, "%s seed %d: sample rejected (%d %s): %s", name, (int)seed, rc,
              rc < 0 ? err.msg : "", s);
        n_ok += rc == WHOLE;
        free(s);
    }
    mhla_grammar_free(g);
    return n_ok;
}

typedef struct {
    const char *s;
    int want;
} case_t;

static void check_cases(const char *dir, const char *name, const case_t *c, size_t n)
{
    mhla_grammar *g = load(dir, name);
    for (size_t i = 0; g && i < n; i++) {
        mhla_grammar_error err;
        int rc = mhla_grammar_match(g, c[i].s, strlen(c[i].s), &err);
        CHECK(rc == c[i].want, "%s: \"%s\" gave %d (%s), expected %d", name, c[i].s, rc,
              rc < 0 ? err.msg : "", c[i].want);
    }
    mhla_grammar_free(g);
}

static const case_t json_cases[] = {
    {"{}", WHOLE},
    {"{\"a\": 1}", WHOLE},
    {"{\"a\":[1,2.5e3,\"x\\n\",true,null,{\"b\":-0.5}]}", WHOLE},
    {"{\n  \"k\": \"\xC3\xA9\xF0\x9F\x98\x80\"\n}", WHOLE},
    {"{\"u\":\"\\u00e9\\\"\"} ", WHOLE},
    {"{\"a\": [1, 2", PREFIX},
    {"{\"a\":tr", PREFIX},
    {"{\"s\":\"\xE2\x82", PREFIX},
    {"[]", REJ},
    {"{\"a\" 1}", REJ},
    {"{\"a\":01}", REJ},
    {"{'a':1}", REJ},
    {"{\"a\":tru}", REJ},
    {"{\"a\":\"\x01\"}", REJ},
    {"{\"a\":1,}", REJ},
    {"{\"a\":\"\\x\"}", REJ},
    {"{\"a\":\"\xFF\"}", REJ},
    {"{}  ", REJ},
};

static const case_t arithmetic_cases[] = {
    {"1+2=3\n", WHOLE}, {"(a*b)=c\n", WHOLE}, {"x=1\nx=y\n", WHOLE}, {"1+2=", PREFIX},
    {"1+2;", REJ},      {"=3\n", REJ},        {"1+2=3", PREFIX},     {"A=1\n", REJ},
};

static const case_t list_cases[] = {
    {"- a\n- b c\n", WHOLE},
    {"- \xC3\xA9\n", WHOLE},
    {"- a", PREFIX},
    {"- \n", REJ},
    {"a\n", REJ},
    {"- x\r\n", REJ},
    {"- \xE2\x80\xA8\n", REJ},
    {"- \xC2\x85\n", REJ},
    {"", PREFIX},
};

static const case_t c_cases[] = {
    {"int main(){return 0;}", WHOLE},
    {"int f(int x){x = x+1;return x;}", WHOLE},
    {"float g(){while(a<b){a = a+1;}}", WHOLE},
    {"int h(){/* c */// d\n}", WHOLE},
    {"int main(){", PREFIX},
    {"int main() {}", REJ},
    {"main(){}", REJ},
    {"int 1x(){}", REJ},
};

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_llamacpp DIR");
    DIR *d = opendir(argv[1]);
    if (!d)
        die("cannot open %s", argv[1]);
    int n_files = 0, n_samples = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".gbnf") == 0) {
            n_files++;
            n_samples += check_samples(argv[1], e->d_name);
        }
    }
    closedir(d);
    CHECK(n_files >= 8, "only %d .gbnf files in %s", n_files, argv[1]);
    check_cases(argv[1], "json.gbnf", json_cases, sizeof json_cases / sizeof json_cases[0]);
    check_cases(argv[1], "arithmetic.gbnf", arithmetic_cases,
                sizeof arithmetic_cases / sizeof arithmetic_cases[0]);
    check_cases(argv[1], "list.gbnf", list_cases, sizeof list_cases / sizeof list_cases[0]);
    check_cases(argv[1], "c.gbnf", c_cases, sizeof c_cases / sizeof c_cases[0]);
    printf("grammar.llamacpp: %d grammars, %d samples matched\n", n_files, n_samples);
    return failures ? 1 : 0;
}
