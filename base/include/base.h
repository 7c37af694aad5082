/*
 * base.h — helpers every module shares, kept once: the sampling generator,
 * f32 <-> bf16 conversion, UTF-8 decoding, a growable byte buffer, system
 * helpers, the process's cgroup and the command-line option table every
 * program parses with. The bottom module: it includes no other module's
 * header, and any module may include it.
 */
#ifndef MHLA_BASE_H
#define MHLA_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- random numbers (rng.c) ------------------------------------------------ */

/* xoshiro256**, seeded through splitmix64: the same numbers on any libc, so
 * a seed repeats a run (a request's sampling, a benchmark's schedule). */
typedef struct {
    uint64_t state[4];
} mhla_rng;

void mhla_rng_seed(mhla_rng *rng, uint64_t seed);
/* Uniform in [0, 1), 53 bits. */
double mhla_rng_uniform(mhla_rng *rng);
/* Standard normal (Box–Muller; two uniforms a call). */
double mhla_rng_normal(mhla_rng *rng);

/* ---- bf16 ------------------------------------------------------------------- */

/* The engine's exactness rests on every path converting the same way: the
 * CPU kernels, the model loader and kvstate's bf16 pages all use these. */

/* bf16 → f32: exact (bf16 is f32's upper half). */
static inline float mhla_f32_from_bf16(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* f32 → bf16, rounding to nearest even; a NaN stays a (quiet) NaN. */
static inline uint16_t mhla_bf16_from_f32(float f)
{
    uint32_t bits;
    memcpy(&bits, &f, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((bits >> 16) | 0x40);
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return (uint16_t)(bits >> 16);
}

/* ---- UTF-8 (utf8.c) ---------------------------------------------------------- */

/* Decodes one code point at s[0..n) (n >= 1) and returns the bytes consumed
 * (>= 1). An invalid or truncated sequence gives *cp = 0xFFFD and consumes
 * its maximal subpart, as the WHATWG decoder (JavaScript's TextDecoder) does. */
size_t mhla_utf8_next(const char *s, size_t n, int32_t *cp);
/* Encodes cp (a Unicode scalar value) into out; returns its length, 1 to 4. */
size_t mhla_utf8_put(char out[4], int32_t cp);

/* ---- growable buffer (buf.c) ---------------------------------------------------- */

/* Bytes with a terminating NUL kept after them (p is a C string once
 * anything was put). Zero-initialised is empty. */
typedef struct {
    char *p;
    size_t len, cap;
} mhla_buf;

/* Room for extra more bytes (and the NUL); -1 when out of memory. */
int mhla_buf_reserve(mhla_buf *b, size_t extra);
int mhla_buf_put(mhla_buf *b, const void *s, size_t n);
static inline int mhla_buf_putc(mhla_buf *b, char c) { return mhla_buf_put(b, &c, 1); }
void mhla_buf_free(mhla_buf *b);

/* ---- system helpers (sys.c) ------------------------------------------------ */

/* Seconds on the monotonic clock: for durations, never for dates. */
double mhla_now(void);

/* Reads the whole file at path into *out (malloc'd, NUL-terminated; *len
 * bytes before the NUL). Refuses a file larger than max_bytes. On failure
 * *out is NULL, msg (may be NULL) says why, naming the path, and the return
 * says which failure it was, for callers whose errors carry a kind. */
enum { MHLA_READ_IO = -1, MHLA_READ_TOO_LARGE = -2, MHLA_READ_NOMEM = -3 };
int mhla_read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *msg,
                   size_t msglen);

/* Makes the array *array points to (any element type, elem_size bytes each,
 * *cap elements now) hold at least need elements, doubling; on failure the
 * old array and *cap stay as they were and it returns -1. */
int mhla_grow(void *array, size_t elem_size, int *cap, int need);

/* ---- command-line options (opts.c) -------------------------------------------- */

/* A program's flags are one table of rows; mhla_opts_parse reads argv with
 * glibc's getopt_long (--flag VALUE or --flag=VALUE, whole flag names only,
 * options before the other arguments) and mhla_opts_help writes --help from
 * the same rows. Values land in the struct passed as base, at each row's
 * offset (offsetof). */
typedef enum {
    MHLA_OPT_TEXT,     /* no flag: help is a line of --help (a section title) */
    MHLA_OPT_FLAG,     /* no value: the int field becomes 1 */
    MHLA_OPT_FLAG_OFF, /* no value: the int field becomes 0 (--no-...) */
    MHLA_OPT_INT,      /* int field: an integer in [lo, hi] */
    MHLA_OPT_LONG,     /* long field: an integer in [lo, hi] */
    MHLA_OPT_SIZE,     /* size_t field: an integer in [lo, hi] */
    MHLA_OPT_DOUBLE,   /* double field: a number in [lo, hi] */
    MHLA_OPT_STRING,   /* const char * field: the argument itself (not copied) */
    MHLA_OPT_ENUM,     /* int field: the index of the value in words */
    MHLA_OPT_CUSTOM,   /* parse(flag, value, base, err, errlen) stores it */
} mhla_opt_kind;

/* A CUSTOM row's parser: flag is the row's name (without "--"); returns 0, or
 * -1 with a message in err naming the flag and the value. */
typedef int (*mhla_opt_parse_fn)(const char *flag, const char *value, void *base, char *err,
                                 size_t errlen);

typedef struct {
    const char *name; /* the long flag without its "--" (NULL for TEXT) */
    mhla_opt_kind kind;
    size_t off;               /* the field's offset in the struct at base */
    double lo, hi;            /* INT, LONG, SIZE, DOUBLE: the range, both ends allowed */
    const char *const *words; /* ENUM: the accepted words, NULL-terminated */
    mhla_opt_parse_fn parse;  /* CUSTOM */
    const char *metavar;      /* --help's name of the value ("N", "DIR"); ENUM: a|b|c */
    const char *help;         /* --help's text; '\n' starts an indented further line */
} mhla_opt;

typedef struct {
    const char *usage; /* --help's text before the rows */
    const mhla_opt *rows;
    size_t n_rows;
    const char *footer; /* --help's text after the rows (and --help's own), or NULL */
    int help_col;       /* the column help texts start at; 0: 26 */
} mhla_opts;

/* Parses argv[1..argc) into the struct at base. Every row's flag is first
 * taken from the environment as MHLA_<FLAG> (upper case, '-' -> '_':
 * --max-batch-tokens is MHLA_MAX_BATCH_TOKENS; an empty variable counts as
 * unset; a switch takes 1/true/on or 0/false/off), then from argv, so the
 * command line wins. Returns 0; 1 when --help or -h was given (the caller
 * prints mhla_opts_help and exits 0); 2 when --version was given (the line
 * "<program> <version> (<commit>)" is written to stdout already, the caller
 * exits 0); -1 with a message in err naming the flag (or the variable) and
 * the value (the caller exits 2). With first_arg, *first_arg is the index of
 * the first argument that is not an option (after "--" when given); without
 * it such an argument is an error. <program> is the word after "usage: " in
 * spec's usage. */
int mhla_opts_parse(const mhla_opts *spec, void *base, int argc, char **argv, int *first_arg,
                    char *err, size_t errlen);
/* --help: spec's usage, a line per row, --help's and --version's rows, a line
 * on MHLA_<FLAG> variables, the footer. */
void mhla_opts_help(const mhla_opts *spec, FILE *f);
/* --version's line, "<program> <version> (<commit>)", on stdout (for programs
 * whose first argument is a command, before mhla_opts_parse sees argv). */
void mhla_opts_version(const mhla_opts *spec);

/* ---- the build (version.c) ---------------------------------------------------- */

/* The project's version (CMakeLists.txt's project()), the git commit the
 * binary was built from (git describe --always --dirty; "unknown" outside a
 * git checkout) and CMAKE_BUILD_TYPE, all fixed at build time. */
const char *mhla_version(void);
const char *mhla_commit(void);
const char *mhla_build_type(void);

/* ---- cgroups (cgroup.c) ------------------------------------------------------ */

/* The process's cgroup for one controller. */
typedef struct {
    int version;     /* 1 or 2; 0: none found */
    char path[512];  /* in its hierarchy, without the trailing '/': "" is the root */
    char mount[640]; /* the folder that hierarchy is mounted at */
} mhla_cgroup;

/* Finds the cgroup of controller ("cpu", "memory") in proc_cgroup (a
 * /proc/self/cgroup: "ID:CONTROLLERS:PATH" lines), its hierarchies mounted
 * under mounts (/sys/fs/cgroup; tests give a fake tree). A v1 line that
 * names the controller (controllers may be comma-joined) wins over the v2
 * line "0::PATH", since on a hybrid machine that controller is v1's. v1 is
 * mounted at mounts/CONTROLLERS as listed (cpu,cpuacct), else at
 * mounts/CONTROLLER; v2 at mounts, or at mounts/unified on a hybrid layout.
 * Returns the version, 0 when the file is missing or names neither. */
int mhla_cgroup_find(const char *proc_cgroup, const char *mounts, const char *controller,
                     mhla_cgroup *cg);
/* The folder of cg's cgroup. */
void mhla_cgroup_dir(const mhla_cgroup *cg, char *dir, size_t len);
/* Moves cg to its parent cgroup; 0 when it was the hierarchy's root. */
int mhla_cgroup_up(mhla_cgroup *cg);
/* A controller file in the cgroup folder dir: its first field into *v and,
 * when second is not NULL, its second into *second (0 when absent; cpu.max's
 * period). 1 when the first field is a number, -1 when it is not ("max": no
 * limit; v1's -1) and *v is left alone, 0 when the file is absent. */
int mhla_cgroup_read(const char *dir, const char *file, uint64_t *v, uint64_t *second);

#ifdef __cplusplus
}
#endif
#endif
