/*
 * opts.c — every program's command-line flags from one table: parsing on
 * glibc's getopt_long (--flag VALUE and --flag=VALUE), the value checked
 * against its row (integer or number in a range, size, string, one of a list
 * of words, a switch, or the program's own function), and --help written
 * from the same rows. A flag the command line leaves out is taken from its
 * MHLA_<FLAG> environment variable, so a service's settings can live in an
 * environment file. A bad command line is an error message naming the flag
 * and the value, never an exit or an abort here.
 */
#include "base.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define OPTS_MAX_ROWS 128
#define OPT_VAL_BASE 256 /* getopt_long's val of row k: OPT_VAL_BASE + k */

static int opt_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int takes_value(mhla_opt_kind kind)
{
    return kind != MHLA_OPT_TEXT && kind != MHLA_OPT_FLAG && kind != MHLA_OPT_FLAG_OFF;
}

/* An integer: decimal digits, or a whole number in other notation (1e3, 5.0). */
static int parse_integer(const char *v, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end != v && !*end) {
        *out = x;
        return errno ? 1 : 0; /* 1: out of any range */
    }
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(d) || d != floor(d))
        return -1;
    if (fabs(d) > 9.2e18)
        return 1;
    *out = (long long)d;
    return 0;
}

static int set_integer(const mhla_opt *row, const char *v, char *field, char *err, size_t errlen)
{
    long long x = 0;
    int rc = parse_integer(v, &x);
    if (rc || (double)x < row->lo || (double)x > row->hi)
        return opt_fail(err, errlen, "--%s takes an integer from %.0f to %.0f, not '%.64s'",
                        row->name, row->lo, row->hi, v);
    if (row->kind == MHLA_OPT_INT)
        *(int *)field = (int)x;
    else if (row->kind == MHLA_OPT_LONG)
        *(long *)field = (long)x;
    else
        *(size_t *)field = (size_t)x;
    return 0;
}

static int set_double(const mhla_opt *row, const char *v, char *field, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= row->lo && x <= row->hi))
        return opt_fail(err, errlen, "--%s takes a number from %g to %g, not '%.64s'", row->name,
                        row->lo, row->hi, v);
    *(double *)field = x;
    return 0;
}

/* "a, b or c" from a NULL-terminated list of words. */
static void join_words(const char *const *words, char *out, size_t outlen)
{
    size_t n = 0, used = 0;
    while (words[n])
        n++;
    out[0] = '\0';
    for (size_t k = 0; k < n && used < outlen; k++) {
        const char *sep = k == 0 ? "" : k + 1 == n ? " or " : ", ";
        int w = snprintf(out + used, outlen - used, "%s%s", sep, words[k]);
        used += w > 0 ? (size_t)w : 0;
    }
}

static int set_enum(const mhla_opt *row, const char *v, char *field, char *err, size_t errlen)
{
    for (int k = 0; row->words && row->words[k]; k++) {
        if (strcmp(row->words[k], v) == 0) {
            *(int *)field = k;
            return 0;
        }
    }
    char list[256] = "";
    if (row->words)
        join_words(row->words, list, sizeof list);
    return opt_fail(err, errlen, "--%s takes %s, not '%.64s'", row->name, list, v);
}

/* Stores value v (NULL for a switch) of row into the struct at base. */
static int set_value(const mhla_opt *row, const char *v, void *base, char *err, size_t errlen)
{
    char *field = (char *)base + row->off;
    switch (row->kind) {
    case MHLA_OPT_FLAG:
    case MHLA_OPT_FLAG_OFF: *(int *)field = row->kind == MHLA_OPT_FLAG; return 0;
    case MHLA_OPT_INT:
    case MHLA_OPT_LONG:
    case MHLA_OPT_SIZE: return set_integer(row, v, field, err, errlen);
    case MHLA_OPT_DOUBLE: return set_double(row, v, field, err, errlen);
    case MHLA_OPT_STRING: *(const char **)field = v; return 0;
    case MHLA_OPT_ENUM: return set_enum(row, v, field, err, errlen);
    case MHLA_OPT_CUSTOM:
        if (!row->parse)
            return opt_fail(err, errlen, "--%s has no parser", row->name);
        return row->parse(row->name, v, base, err, errlen);
    case MHLA_OPT_TEXT: break;
    }
    return opt_fail(err, errlen, "--%s is not an option", row->name ? row->name : "?");
}

/* getopt_long's table from the rows (TEXT rows get a name no one can type). */
static int build_longopts(const mhla_opts *spec, struct option *lo, char *err, size_t errlen)
{
    if (spec->n_rows + 3 > OPTS_MAX_ROWS)
        return opt_fail(err, errlen, "too many option rows (%zu)", spec->n_rows);
    size_t n = 0;
    for (size_t k = 0; k < spec->n_rows; k++) {
        const mhla_opt *r = &spec->rows[k];
        if (r->kind == MHLA_OPT_TEXT || !r->name)
            continue;
        lo[n++] = (struct option){r->name, takes_value(r->kind) ? required_argument : no_argument,
                                  NULL, OPT_VAL_BASE + (int)k};
    }
    lo[n++] = (struct option){"help", no_argument, NULL, 'h'};
    lo[n++] = (struct option){"version", no_argument, NULL, 'V'};
    lo[n] = (struct option){NULL, 0, NULL, 0};
    return 0;
}

/* The flag as typed in argv[at], without any "=value". */
static void typed_flag(char **argv, int at, char *out, size_t outlen)
{
    const char *a = argv[at] ? argv[at] : "";
    size_t n = strcspn(a, "=");
    snprintf(out, outlen, "%.*s", (int)(n < 64 ? n : 64), a);
}

/* The message for one of getopt_long's complaints ('?' or ':'). */
static int getopt_error(const mhla_opts *spec, int c, char **argv, int at, char *err, size_t errlen)
{
    char typed[80];
    typed_flag(argv, at, typed, sizeof typed);
    if (c == ':' && optopt >= OPT_VAL_BASE)
        return opt_fail(err, errlen, "option '--%s' needs a value (see --help)",
                        spec->rows[optopt - OPT_VAL_BASE].name);
    if (c == '?' && optopt >= OPT_VAL_BASE)
        return opt_fail(err, errlen, "option '--%s' takes no value (see --help)",
                        spec->rows[optopt - OPT_VAL_BASE].name);
    if (c == '?' && (optopt == 'h' || optopt == 'V'))
        return opt_fail(err, errlen, "option '--%s' takes no value",
                        optopt == 'h' ? "help" : "version");
    return opt_fail(err, errlen, "unknown option '%s' (see --help)", typed);
}

/* getopt_long takes an unambiguous prefix of a long flag; the table's flags
 * are only accepted whole. */
static int typed_whole(const char *name, char **argv, int at)
{
    const char *a = argv[at];
    size_t n = strlen(name);
    return a[0] == '-' && a[1] == '-' && strncmp(a + 2, name, n) == 0 &&
           (a[2 + n] == '\0' || a[2 + n] == '=');
}

/* The program's name: the word after "usage: " in the usage text, so every
 * table names its program once. */
static void program_name(const mhla_opts *spec, char *out, size_t outlen)
{
    const char *u = spec->usage ? spec->usage : "";
    if (strncmp(u, "usage: ", 7) == 0)
        u += 7;
    size_t n = strcspn(u, " \n");
    snprintf(out, outlen, "%.*s", (int)(n ? n : 4), n ? u : "mhla");
}

void mhla_opts_version(const mhla_opts *spec)
{
    char name[64];
    program_name(spec, name, sizeof name);
    printf("%s %s (%s)\n", name, mhla_version(), mhla_commit());
    fflush(stdout);
}

/* One option read by getopt_long: its value stored and its row marked in
 * seen. Returns 0, 1 (--help), 2 (--version) or -1 with a message. */
static int take_option(const mhla_opts *spec, int c, int at, char **argv, void *base,
                       unsigned char *seen, char *err, size_t errlen)
{
    if (c == 'h')
        return 1;
    if (c == 'V' && typed_whole("version", argv, at)) {
        mhla_opts_version(spec);
        return 2;
    }
    if (c == 'V')
        return opt_fail(err, errlen, "unknown option '%.64s' (did you mean --version?)", argv[at]);
    if (c < OPT_VAL_BASE)
        return getopt_error(spec, c, argv, at, err, errlen);
    const mhla_opt *row = &spec->rows[c - OPT_VAL_BASE];
    if (!typed_whole(row->name, argv, at)) {
        char typed[80];
        typed_flag(argv, at, typed, sizeof typed);
        return opt_fail(err, errlen, "unknown option '%s' (did you mean --%s?)", typed, row->name);
    }
    seen[c - OPT_VAL_BASE] = 1;
    return set_value(row, takes_value(row->kind) ? optarg : NULL, base, err, errlen);
}

/* "MHLA_" and the flag in upper case, '-' as '_'. */
static void env_name(const char *flag, char *out, size_t outlen)
{
    size_t n = (size_t)snprintf(out, outlen, "MHLA_%s", flag);
    for (size_t k = 5; k < n && k < outlen; k++)
        out[k] = out[k] == '-' ? '_' : (char)toupper((unsigned char)out[k]);
}

/* A switch's value in the environment: 1, 0, or -1 when it is neither. */
static int env_switch(const char *v)
{
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "on"))
        return 1;
    if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "off"))
        return 0;
    return -1;
}

/* Row's MHLA_<FLAG> variable, when set and not empty, into the struct at base. */
static int env_row(const mhla_opt *row, void *base, char *err, size_t errlen)
{
    char name[96], msg[512];
    env_name(row->name, name, sizeof name);
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    if (!takes_value(row->kind)) {
        int on = env_switch(v);
        if (on < 0)
            return opt_fail(err, errlen,
                            "%s: --%s is a switch: 1, true, on, 0, false or off, "
                            "not '%.64s'",
                            name, row->name, v);
        return on ? set_value(row, NULL, base, err, errlen) : 0;
    }
    if (set_value(row, v, base, msg, sizeof msg))
        return opt_fail(err, errlen, "%s: %s", name, msg);
    return 0;
}

/* Every row the command line did not set, from its variable. */
static int apply_env(const mhla_opts *spec, const unsigned char *seen, void *base, char *err,
                     size_t errlen)
{
    for (size_t k = 0; k < spec->n_rows; k++) {
        const mhla_opt *r = &spec->rows[k];
        if (r->kind != MHLA_OPT_TEXT && r->name && !seen[k] && env_row(r, base, err, errlen))
            return -1;
    }
    return 0;
}

int mhla_opts_parse(const mhla_opts *spec, void *base, int argc, char **argv, int *first_arg,
                    char *err, size_t errlen)
{
    struct option lo[OPTS_MAX_ROWS];
    unsigned char seen[OPTS_MAX_ROWS] = {0};
    if (build_longopts(spec, lo, err, errlen))
        return -1;
    optind = 0; /* glibc: start afresh, also after an earlier parse */
    opterr = 0;
    for (;;) {
        int at = optind ? optind : 1, c = getopt_long(argc, argv, "+:h", lo, NULL);
        if (c == -1)
            break;
        int rc = take_option(spec, c, at, argv, base, seen, err, errlen);
        if (rc)
            return rc;
    }
    if (first_arg)
        *first_arg = optind;
    else if (optind < argc)
        return opt_fail(err, errlen, "unexpected argument '%.64s' (see --help)", argv[optind]);
    /* after the command line, so that it wins: a variable fills only what it left */
    return apply_env(spec, seen, base, err, errlen);
}

/* One row of --help: "  --name METAVAR" then the help text from spec's
 * column, its further lines indented to that column. */
static void help_row(const mhla_opts *spec, const mhla_opt *r, FILE *f)
{
    int col = spec->help_col > 0 ? spec->help_col : 26, used;
    if (r->kind == MHLA_OPT_TEXT) {
        fprintf(f, "%s\n", r->help ? r->help : "");
        return;
    }
    char words[256] = "";
    const char *meta = r->metavar;
    if (!meta && r->kind == MHLA_OPT_ENUM && r->words) {
        for (size_t k = 0; r->words[k]; k++)
            snprintf(words + strlen(words), sizeof words - strlen(words), "%s%s", k ? "|" : "",
                     r->words[k]);
        meta = words;
    }
    if (!meta && takes_value(r->kind))
        meta = "VALUE";
    used = fprintf(f, "  --%s%s%s", r->name, meta ? " " : "", meta ? meta : "");
    const char *h = r->help ? r->help : "";
    fprintf(f, "%*s", used < col ? col - used : 2, "");
    for (const char *nl; (nl = strchr(h, '\n')) != NULL; h = nl + 1)
        fprintf(f, "%.*s\n%*s", (int)(nl - h), h, col, "");
    fprintf(f, "%s\n", h);
}

void mhla_opts_help(const mhla_opts *spec, FILE *f)
{
    if (spec->usage)
        fputs(spec->usage, f);
    for (size_t k = 0; k < spec->n_rows; k++)
        help_row(spec, &spec->rows[k], f);
    mhla_opt help = {.name = "help", .kind = MHLA_OPT_FLAG, .help = "this text"};
    help_row(spec, &help, f);
    mhla_opt version = {.name = "version",
                        .kind = MHLA_OPT_FLAG,
                        .help = "the version and git commit, then exit"};
    help_row(spec, &version, f);
    fputs("Every flag can also be set as MHLA_<FLAG> in the environment (--max-batch-tokens:\n"
          "MHLA_MAX_BATCH_TOKENS; a switch takes 1 or 0); the command line wins.\n",
          f);
    if (spec->footer)
        fputs(spec->footer, f);
}
