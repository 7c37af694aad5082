/* base's option table (mhla_opts_parse, mhla_opts_help): every value kind
 * lands in its field, in both --flag VALUE and --flag=VALUE; a bad value, a
 * missing value, an unknown or abbreviated flag each give a message naming
 * the flag and the value; --help lists every row; --version answers 2. */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"

typedef struct {
    int count, verbose, color;
    long big;
    size_t bytes;
    double ratio;
    const char *name;
    int level;
    int even;
} args;

static const char *const levels[] = {"low", "mid", "high", NULL};

static int parse_even(const char *flag, const char *value, void *base, char *err, size_t errlen)
{
    int v = atoi(value);
    if (v % 2) {
        snprintf(err, errlen, "--%s: '%s' is odd", flag, value);
        return -1;
    }
    ((args *)base)->even = v;
    return 0;
}

#define A(f) offsetof(args, f)
static const mhla_opt rows[] = {
    {.kind = MHLA_OPT_TEXT, .help = "section one"},
    {.name = "count",
     .kind = MHLA_OPT_INT,
     .off = A(count),
     .lo = 0,
     .hi = 1000000,
     .metavar = "N",
     .help = "how many\nsecond line"},
    {.name = "verbose", .kind = MHLA_OPT_FLAG, .off = A(verbose), .help = "say more"},
    {.name = "no-color", .kind = MHLA_OPT_FLAG_OFF, .off = A(color), .help = "plain"},
    {.name = "big",
     .kind = MHLA_OPT_LONG,
     .off = A(big),
     .lo = -5,
     .hi = 4611686018427387904.0,
     .metavar = "N",
     .help = "a long"},
    {.name = "bytes",
     .kind = MHLA_OPT_SIZE,
     .off = A(bytes),
     .lo = 64,
     .hi = 1 << 30,
     .metavar = "N",
     .help = "a size"},
    {.name = "ratio",
     .kind = MHLA_OPT_DOUBLE,
     .off = A(ratio),
     .lo = 0,
     .hi = 1,
     .metavar = "X",
     .help = "a fraction"},
    {.name = "name", .kind = MHLA_OPT_STRING, .off = A(name), .metavar = "S", .help = "a name"},
    {.name = "level",
     .kind = MHLA_OPT_ENUM,
     .off = A(level),
     .words = levels,
     .help = "one of three"},
    {.name = "even",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_even,
     .metavar = "N",
     .help = "an even number"},
    {.name = "a-very-long-option-name",
     .kind = MHLA_OPT_FLAG,
     .off = A(verbose),
     .help = "past the column"},
};
#undef A
static const mhla_opts spec = {"usage: prog [options] [ARGS...]\n", rows,
                               sizeof rows / sizeof rows[0], "footer text\n", 24};

/* Parses the NULL-terminated words into *a; returns parse's result. */
static int run(args *a, char *err, int *first, const char *w0, ...)
{
    char *argv[32] = {"prog"};
    int argc = 1;
    va_list ap;
    va_start(ap, w0);
    for (const char *w = w0; w && argc < 31; w = va_arg(ap, const char *))
        argv[argc++] = (char *)w;
    va_end(ap);
    argv[argc] = NULL;
    memset(a, 0, sizeof *a);
    a->color = 1;
    err[0] = '\0';
    return mhla_opts_parse(&spec, a, argc, argv, first, err, 256);
}

static void test_kinds(void)
{
    args a;
    char err[256];
    int rc = run(&a, err, NULL, "--count", "12", "--verbose", "--no-color", "--big=-5", "--bytes",
                 "1048576", "--ratio=0.25", "--name", "x y", "--level", "high", "--even=4", NULL);
    CHECK(rc == 0, "valid line: %d %s", rc, err);
    CHECK(a.count == 12 && a.verbose == 1 && a.color == 0 && a.big == -5, "int/flag/long");
    CHECK(a.bytes == 1048576 && a.ratio == 0.25 && a.name && strcmp(a.name, "x y") == 0,
          "size/double/string");
    CHECK(a.level == 2 && a.even == 4, "enum %d custom %d", a.level, a.even);
    rc = run(&a, err, NULL, "--big", "4611686018427387904", "--count", "1e3", NULL);
    CHECK(rc == 0 && a.big == 4611686018427387904L && a.count == 1000, "big values: %s", err);
    int first = -1;
    rc = run(&a, err, &first, "--count", "3", "hello", "--verbose", NULL);
    CHECK(rc == 0 && first == 3 && a.verbose == 0, "stops at the first argument: %d", first);
    rc = run(&a, err, &first, "--count", "3", "--", "--verbose", NULL);
    CHECK(rc == 0 && first == 4 && a.verbose == 0, "-- ends the options: %d", first);
    CHECK(run(&a, err, NULL, "--help", NULL) == 1, "--help");
    CHECK(run(&a, err, NULL, "--count", "2", "-h", NULL) == 1, "-h");
    CHECK(run(&a, err, NULL, "--version", NULL) == 2, "--version");
}

/* rc -1 and err containing want. */
static void expect_error(const char *want, const char *w0, const char *w1, const char *w2)
{
    args a;
    char err[256];
    int rc = run(&a, err, NULL, w0, w1, w2, NULL);
    CHECK(rc == -1 && strstr(err, want), "%s %s: rc %d, '%s' (want '%s')", w0, w1 ? w1 : "", rc,
          err, want);
}

static void test_errors(void)
{
    expect_error("--count takes an integer from 0 to 1000000, not 'abc'", "--count", "abc", NULL);
    expect_error("--count takes an integer from 0 to 1000000, not '-1'", "--count=-1", NULL, NULL);
    expect_error("--count takes an integer from 0 to 1000000, not '2.5'", "--count", "2.5", NULL);
    expect_error("not '99999999999999999999'", "--count", "99999999999999999999", NULL);
    expect_error("--big takes an integer from -5 to", "--big", "-6", NULL);
    expect_error("--bytes takes an integer from 64 to 1073741824, not '63'", "--bytes", "63", NULL);
    expect_error("--ratio takes a number from 0 to 1, not '1.5'", "--ratio", "1.5", NULL);
    expect_error("--ratio takes a number from 0 to 1, not 'x'", "--ratio", "x", NULL);
    expect_error("--level takes low, mid or high, not 'top'", "--level", "top", NULL);
    expect_error("--even: '3' is odd", "--even", "3", NULL);
    expect_error("option '--count' needs a value", "--verbose", "--count", NULL);
    expect_error("option '--verbose' takes no value", "--verbose=1", NULL, NULL);
    expect_error("unknown option '--cuont'", "--cuont", "3", NULL);
    expect_error("unknown option '--cou'", "--cou", "3", NULL);
    expect_error("unknown option '-x'", "-x", NULL, NULL);
    expect_error("unknown option '--vers' (did you mean --version?)", "--vers", NULL, NULL);
    expect_error("option '--version' takes no value", "--version=1", NULL, NULL);
    expect_error("unexpected argument 'stray'", "--count", "1", "stray");
}

/* MHLA_<FLAG> variables: each kind from the environment, the command line
 * winning, a bad value named by its variable, an empty one as unset. */
static void test_env(void)
{
    args a;
    char err[256];
    setenv("MHLA_COUNT", "7", 1);
    setenv("MHLA_LEVEL", "mid", 1);
    setenv("MHLA_VERBOSE", "true", 1);
    setenv("MHLA_NO_COLOR", "1", 1);
    setenv("MHLA_NAME", "", 1);
    int rc = run(&a, err, NULL, NULL);
    CHECK(rc == 0 && a.count == 7 && a.level == 1 && a.verbose == 1 && a.color == 0 && !a.name,
          "from the environment: rc %d %s, count %d level %d verbose %d color %d", rc, err, a.count,
          a.level, a.verbose, a.color);
    rc = run(&a, err, NULL, "--count", "3", "--level", "high", NULL);
    CHECK(rc == 0 && a.count == 3 && a.level == 2, "the command line wins: %d %d", a.count,
          a.level);
    setenv("MHLA_VERBOSE", "off", 1);
    setenv("MHLA_COUNT", "abc", 1);
    rc = run(&a, err, NULL, "--count", "3", NULL);
    CHECK(rc == 0 && a.verbose == 0 && a.count == 3, "off, and a bad value the line overrides");
    rc = run(&a, err, NULL, NULL);
    CHECK(rc == -1 && strstr(err, "MHLA_COUNT: --count takes an integer from 0 to 1000000, "
                                  "not 'abc'"),
          "bad integer: %s", err);
    setenv("MHLA_COUNT", "", 1);
    setenv("MHLA_VERBOSE", "maybe", 1);
    rc = run(&a, err, NULL, NULL);
    CHECK(rc == -1 && strstr(err, "MHLA_VERBOSE: --verbose is a switch") && strstr(err, "maybe"),
          "bad switch: %s", err);
    setenv("MHLA_VERBOSE", "", 1);
    setenv("MHLA_A_VERY_LONG_OPTION_NAME", "on", 1);
    rc = run(&a, err, NULL, NULL);
    CHECK(rc == 0 && a.verbose == 1, "'-' as '_': %s", err);
    CHECK(run(&a, err, NULL, "--help", NULL) == 1, "--help despite a variable");
    const char *names[] = {"MHLA_COUNT",    "MHLA_LEVEL", "MHLA_VERBOSE",
                           "MHLA_NO_COLOR", "MHLA_NAME",  "MHLA_A_VERY_LONG_OPTION_NAME"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        unsetenv(names[k]);
}

static void test_help(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        die("open_memstream failed");
    mhla_opts_help(&spec, f);
    fclose(f);
    CHECK(strncmp(text, "usage: prog", 11) == 0, "usage first:\n%s", text);
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        char want[128];
        if (rows[k].kind == MHLA_OPT_TEXT)
            snprintf(want, sizeof want, "\n%s\n", rows[k].help);
        else
            snprintf(want, sizeof want, "  --%s", rows[k].name);
        CHECK(strstr(text, want) != NULL, "--help lacks '%s':\n%s", want, text);
        CHECK(strstr(text, rows[k].help) || strchr(rows[k].help, '\n'), "help text of row %zu", k);
    }
    CHECK(strstr(text, "  --count N             how many\n"
                       "                        second line\n"),
          "column and continuation:\n%s", text);
    CHECK(strstr(text, "  --level low|mid|high  one of three\n"), "enum metavar:\n%s", text);
    CHECK(strstr(text, "  --a-very-long-option-name  past the column\n"), "long flag");
    CHECK(strstr(text, "  --help                this text\n"
                       "  --version             the version and git commit, then exit\n"),
          "help, version:\n%s", text);
    CHECK(strstr(text, "\nfooter text\n"), "footer");
    CHECK(strstr(text, "MHLA_<FLAG> in the environment"), "the variables' line:\n%s", text);
    free(text);
}

int main(void)
{
    test_kinds();
    test_errors();
    test_env();
    test_help();
    if (failures) {
        fprintf(stderr, "base.opts: %d failure(s)\n", failures);
        return 1;
    }
    printf("base.opts: PASS\n");
    return 0;
}
