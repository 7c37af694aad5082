/*
 * bench_decode — decode and prefill throughput of the CPU engine.
 *
 * Times the prefill of each prompt length given (--prefill, default 512 and
 * 2,000 tokens; a prompt longer than 1,900 tokens is fed in two calls,
 * 1,900 + the rest, so the state at position 1,900 can be cloned; a shorter
 * one in one call on a fresh sequence), then times decode steps at
 * positions ~100 and ~1,900, at each batch size given. With the default 64
 * steps every decode window holds exactly one block boundary (C = 64).
 * The two positions are measured alternately, --rounds times, and the best
 * round of each is kept, so a burst of load from elsewhere on a shared
 * machine does not land on one side of the ratio only.
 *
 * Before a batch size's rounds, --warmup windows (default 1) at ~100 run
 * untimed, as llama-bench and llama-batched-bench run a warm-up decode over
 * a cache they allocated and cleared before timing: the first window of a
 * fresh process otherwise pays for memory new to it (the state pages its
 * block boundary takes: on a 2-vCPU KVM guest one boundary step of 16
 * sequences took ~530 ms the first time and ~70 ms after, bench/RESULTS.md).
 * With --warmup 1 or more, a prefill of 1,900 tokens (the longest call) also
 * runs untimed on a sequence of its own before the timed ones, as llama-bench
 * runs a warm-up prompt of the length it times: the first call of that size
 * otherwise pays for the activations' memory and the state's pages (prefill
 * 2,000 on an AMD Zen 4 guest, bf16dot: median 389 tok/s cold, 465 warm).
 *
 * Next to each rate it prints the bound memory bandwidth sets: a decode step
 * reads every weight once (the bytes the device holds them in) and, per
 * sequence, P_i plus on average C/2 rows of the current block; the bound is
 * batch * bandwidth / those bytes (a GPU: device-to-device copy, bytes read +
 * written per second; the CPU: a read of at least 256 MiB and 3 times the
 * L3 with the engine's threads, streamed as the kernels stream weights). A
 * shared machine's bandwidth moves between runs and within one, so it is
 * measured BW_REPS times at start and again right before and right after
 * each batch size's decode rounds; each
 * reading is printed as best / median / worst, and a batch's bound takes the
 * best of its before and after readings, the highest rate the machine showed
 * around that decode, so a rate's fraction of it is never flattered by a
 * slow moment of the measurement. At batch 1 it also sets each step against
 * the machine of the same moment: `steps` steps at each position, each
 * followed by one reading, and prints the median (and quartiles) of the
 * steps' rates as fractions of the reading after each ("paired"), and then
 * the same for the step's matrix products run alone ("products alone",
 * mhla_engine_product_rate): what the products reach of the bound, and what
 * the rest of a step costs beside them.
 *
 * usage: bench_decode MODEL_DIR [--batch 1,16] [--steps 64] [--rounds 3] [--warmup 1]
 *                    [--threads N]
 *                    [--weights f32|bf16|q8|bf16dot|q4] [--device cpu|cuda|auto] [--gpu-weights
 * bf16|f16|f32]
 *                    [--state f32|bf16] [--state-memory MB] [--no-graphs 1]
 *                    [--cpu-isa auto|avx512|avx2|neon|portable] [--prefill 512,2000]
 *                    [--thread-adapt on|off]
 * (the flags are rows of base's option table, mhla_opts; bench_decode with no
 * model prints them)
 *
 * --state-memory gives the engine a page pool of that size (pages are then
 * allocated once and reused, as in the server with --state-memory).
 *
 * On the CPU it also prints a compute bound: the fp32 rate of OpenBLAS's
 * cblas_sgemm (where the build found OpenBLAS) on M=512 rows of the model's
 * MLP shape with the engine's thread count, measured in the same run. It is
 * a roofline only (the engine keeps its own batch-invariant kernels): a
 * token costs 2 flops per weight, so the bound in tokens/s is that rate over
 * 2 x the weights a step reads. Each rate is printed as a fraction of the
 * memory bound and of the compute bound. Both bounds are read again right
 * before and after each prefill and each batch's decode rounds, and each
 * rate is set against the better of the two readings around it (a shared
 * machine's bandwidth and free cores change within minutes).
 */
#include "bench_util.h"
#include "engine.h"

#include <stddef.h>

#ifdef MHLA_BENCH_OPENBLAS
#include <cblas.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(int rc, const mhla_error *err)
{
    if (rc) {
        fprintf(stderr, "bench_decode: error: %s\n", err->msg);
        exit(1);
    }
}

/* Feeds n random tokens to seq in one call, returns seconds. */
/* The process's CPU time of the last feed() (every thread's): on a shared machine the wall
 * clock counts the time others held the CPUs, this does not. */
static double feed_cpu;

static double process_cpu(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double feed(mhla_engine *e, mhla_seq *s, int n, int V, unsigned *seed)
{
    mhla_error err;
    int32_t *tok = malloc((size_t)n * sizeof *tok);
    float *logits = malloc((size_t)V * sizeof(float));
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)(rand_r(seed) % V);
    mhla_batch_item it = {s, tok, n, n - 1, logits, NULL, 0, NULL};
    double t0 = mhla_now(), c0 = process_cpu();
    check(mhla_engine_step(e, &it, 1, &err), &err);
    double dt = mhla_now() - t0;
    feed_cpu = process_cpu() - c0;
    free(tok);
    free(logits);
    return dt;
}

/* Seconds of CPU time the whole process (every thread) has used. */
static double process_cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Times `steps` decode steps of `batch` clones of base. Returns tokens per
 * second over the whole window (block boundaries included); *median_rate
 * gets the rate of the median step, which a burst of load from elsewhere on
 * a shared machine cannot move; *cpu_per_step the process's CPU seconds a
 * step (every thread's: on a shared machine the wall clock counts the time
 * others held the CPU, this does not). */
static double decode_rate(mhla_engine *e, const mhla_seq *base, int batch, int steps, int V,
                          unsigned *seed, double *median_rate, double *cpu_per_step)
{
    double *step_s = malloc((size_t)steps * sizeof *step_s);
    mhla_error err;
    mhla_seq **seqs = calloc((size_t)batch, sizeof *seqs);
    mhla_batch_item *items = calloc((size_t)batch, sizeof *items);
    int32_t *tok = calloc((size_t)batch, sizeof *tok);
    float *logits = malloc((size_t)batch * V * sizeof(float));
    for (int b = 0; b < batch; b++) {
        check(mhla_seq_clone(base, &seqs[b], &err), &err);
        items[b] = (mhla_batch_item){seqs[b], &tok[b], 1, 0, logits + (size_t)b * V, NULL, 0, NULL};
    }
    double t0 = mhla_now(), c0 = process_cpu_s();
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < batch; b++)
            tok[b] = (int32_t)(rand_r(seed) % V);
        double ts = mhla_now();
        check(mhla_engine_step(e, items, batch, &err), &err);
        step_s[s] = mhla_now() - ts;
    }
    double dt = mhla_now() - t0;
    *cpu_per_step = (process_cpu_s() - c0) / steps;
    qsort(step_s, (size_t)steps, sizeof *step_s, bench_cmp_double);
    *median_rate = batch / step_s[steps / 2];
    free(step_s);
    for (int b = 0; b < batch; b++)
        mhla_seq_free(seqs[b]);
    free(seqs);
    free(items);
    free(tok);
    free(logits);
    return (double)batch * steps / dt;
}

/* Batch-1 steps of a clone of base, each followed by one bandwidth reading,
 * `steps` times: the fraction of each step's rate (its weight and state bytes
 * over its time) of the reading right after it. A shared machine's bandwidth
 * moves from one minute to the next, and a bound read before and after a
 * whole window sets the window against the best moment around it; a pair
 * sets each step against the machine of the same moment. The reading evicts
 * the last step's state from the caches, so a step of a pair never finds its
 * state there. *median gets the median fraction, *lo and *hi the quartiles,
 * *read_median the readings' median in bytes/s. */
static void paired_fractions(mhla_engine *e, const mhla_seq *base, int steps, int V,
                             double step_bytes, unsigned *seed, double *median, double *lo,
                             double *hi, double *read_median)
{
    mhla_error err;
    mhla_seq *s;
    double *frac = malloc((size_t)steps * sizeof *frac),
           *reads = malloc((size_t)steps * sizeof *reads);
    float *logits = malloc((size_t)V * sizeof(float));
    if (!frac || !reads || !logits) {
        fprintf(stderr, "bench_decode: out of memory\n");
        exit(1);
    }
    check(mhla_seq_clone(base, &s, &err), &err);
    int32_t tok;
    mhla_batch_item it = {s, &tok, 1, 0, logits, NULL, 0, NULL};
    for (int i = 0; i < steps; i++) {
        tok = (int32_t)(rand_r(seed) % V);
        double t0 = mhla_now();
        check(mhla_engine_step(e, &it, 1, &err), &err);
        double dt = mhla_now() - t0;
        check(mhla_engine_memory_bandwidth(e, &reads[i], 1, &err), &err);
        frac[i] = reads[i] > 0 ? step_bytes / dt / reads[i] : 0;
    }
    qsort(frac, (size_t)steps, sizeof *frac, bench_cmp_double);
    qsort(reads, (size_t)steps, sizeof *reads, bench_cmp_double);
    *median = frac[steps / 2], *lo = frac[steps / 4], *hi = frac[(3 * steps) / 4];
    *read_median = reads[steps / 2];
    mhla_seq_free(s);
    free(frac);
    free(reads);
    free(logits);
}

/* A step's products alone (mhla_engine_product_rate: all of them, or the
 * head's), `passes` times, each followed by one bandwidth reading, as
 * paired_fractions does with steps: the median and quartiles of the passes'
 * rates as fractions of the reading after each, and *read_median the
 * readings' median. Returns -1 where the engine does not time its products
 * alone (a GPU). */
static int paired_products(mhla_engine *e, mhla_products which, int passes, double *median,
                           double *lo, double *hi, double *read_median)
{
    mhla_error err;
    double *frac = malloc((size_t)passes * sizeof *frac),
           *reads = malloc((size_t)passes * sizeof *reads);
    if (!frac || !reads) {
        fprintf(stderr, "bench_decode: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < passes; i++) {
        double rate, read;
        if (mhla_engine_product_rate(e, which, &rate, NULL, &err)) {
            free(frac);
            free(reads);
            return -1;
        }
        check(mhla_engine_memory_bandwidth(e, &read, 1, &err), &err);
        frac[i] = read > 0 ? rate / read : 0;
        reads[i] = read;
    }
    qsort(frac, (size_t)passes, sizeof *frac, bench_cmp_double);
    qsort(reads, (size_t)passes, sizeof *reads, bench_cmp_double);
    *median = frac[passes / 2], *lo = frac[passes / 4], *hi = frac[(3 * passes) / 4];
    *read_median = reads[passes / 2];
    free(frac);
    free(reads);
    return 0;
}

/* Whether OpenBLAS runs kernels older than AVX2 on a CPU that has it: OpenBLAS picks its
 * kernels by the CPU's model, and one it does not know gets its SSE3 ones (core Prescott; a
 * Xeon of family 6 model 207 under OpenBLAS 0.3.21: 89 GFLOP/s against 403 with its
 * SkylakeX kernels), so the bound would sit far below what the vector units do. */
static int sgemm_core_too_old(const char *core)
{
#if defined(__x86_64__)
    static const char *const old[] = {"Prescott", "Core2",  "Penryn", "Dunnington", "Nehalem",
                                      "Atom",     "Katmai", "Banias", "Northwood"};
    if (!__builtin_cpu_supports("avx2"))
        return 0;
    for (size_t i = 0; i < sizeof old / sizeof *old; i++)
        if (strcmp(core, old[i]) == 0)
            return 1;
#else
    (void)core;
#endif
    return 0;
}

/* GFLOP/s of OpenBLAS sgemm, C[M,N] = A[M,K] B[N,K]^T, best of 5; 0 without OpenBLAS. The
 * operands are made on the first call and kept: the rate is read again around every
 * prefill and every batch's decode, so that a bound comes from the same minutes as the rate
 * set against it (a burst of other work on a shared machine can halve one reading). */
static double sgemm_gflops(int M, int N, int K, int threads, const char **core)
{
#ifdef MHLA_BENCH_OPENBLAS
    static float *a, *b, *c;
    if (!a) {
        a = malloc((size_t)M * K * sizeof(float)), b = malloc((size_t)N * K * sizeof(float));
        c = malloc((size_t)M * N * sizeof(float));
        if (!a || !b || !c) {
            free(a), free(b), free(c);
            a = b = c = NULL;
            *core = "not measured: out of memory";
            return 0;
        }
        for (size_t i = 0; i < (size_t)M * K; i++)
            a[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        for (size_t i = 0; i < (size_t)N * K; i++)
            b[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
    }
    openblas_set_num_threads(threads);
    *core = openblas_get_corename();
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = mhla_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        double dt = mhla_now() - t0;
        double g = 2.0 * M * N * K / dt / 1e9;
        best = g > best ? g : best;
    }
    return best;
#else
    (void)M, (void)N, (void)K, (void)threads;
    *core = "not measured: built without OpenBLAS";
    return 0;
#endif
}

/* Repetitions of each bandwidth reading. */
#define BW_REPS 9

typedef struct {
    double best, median, worst;
} bw_reading;

static bw_reading read_bandwidth(mhla_engine *e)
{
    double r[BW_REPS];
    mhla_error err;
    check(mhla_engine_memory_bandwidth(e, r, BW_REPS, &err), &err);
    qsort(r, BW_REPS, sizeof r[0], bench_cmp_double);
    return (bw_reading){r[BW_REPS - 1], r[BW_REPS / 2], r[0]};
}

/* Whether the engine's CPU threads were reduced (thread_adapt) since the last
 * call: a rate measured while fewer took part says so. */
static void print_thread_reductions(mhla_engine *e, long *seen)
{
    mhla_cpu_threads t;
    mhla_engine_cpu_threads(e, &t);
    if (t.reductions != *seen)
        printf("       threads: reduced %ld times meanwhile (thread adapt); %d of %d take part "
               "now\n",
               t.reductions - *seen, t.active, t.threads);
    *seen = t.reductions;
}

static void print_fraction(double rate, double bound)
{
    if (bound > 0)
        printf(" %6.1f%%", 100.0 * rate / bound);
    else
        printf(" %7s", "-");
}

/* Everything bench_decode's flags set. */
#define MAX_LIST 16
typedef struct {
    mhla_engine_options o;
    int weights; /* mhla_weight_dtype */
    int batches[MAX_LIST], prefills[MAX_LIST];
    int n_batches, n_prefills, steps, rounds, warmup;
    long state_mb;
} bench_args;

static int parse_batch(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    bench_args *a = base;
    return bench_opt_list(flag, v, 1, 1024, a->batches, MAX_LIST, &a->n_batches, err, errlen);
}

static int parse_prefill(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    bench_args *a = base;
    return bench_opt_list(flag, v, 1, 1L << 24, a->prefills, MAX_LIST, &a->n_prefills, err, errlen);
}

_Static_assert(sizeof(mhla_device) == sizeof(int) && sizeof(mhla_gpu_weights) == sizeof(int) &&
                   sizeof(mhla_state_dtype) == sizeof(int),
               "the enum flags are stored as ints");

static const char *const weight_words[] = {"f32", "bf16", "q8", "bf16dot", "q4", NULL};
static const char *const device_words[] = {"cpu", "auto", "cuda", NULL};
static const char *const gpu_weight_words[] = {"bf16", "f16", "f32", NULL};
static const char *const state_words[] = {"f32", "bf16", NULL};

#define ARG(field) offsetof(bench_args, field)
#define ENG(field) offsetof(bench_args, o.field)
static const mhla_opt rows[] = {
    {.name = "batch",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_batch,
     .metavar = "1,16",
     .help = "batch sizes of the decode rounds"},
    {.name = "steps",
     .kind = MHLA_OPT_INT,
     .off = ARG(steps),
     .lo = 1,
     .hi = 1000000,
     .metavar = "64",
     .help = "decode steps a round at each position"},
    {.name = "rounds",
     .kind = MHLA_OPT_INT,
     .off = ARG(rounds),
     .lo = 1,
     .hi = 1000,
     .metavar = "3",
     .help = "rounds of each position, the best kept"},
    {.name = "warmup",
     .kind = MHLA_OPT_INT,
     .off = ARG(warmup),
     .lo = 0,
     .hi = 1000,
     .metavar = "1",
     .help = "untimed windows @~100 before a batch size's rounds (1+: and a "
             "1,900-token prefill)"},
    {.name = "threads",
     .kind = MHLA_OPT_INT,
     .off = ENG(n_threads),
     .lo = 0,
     .hi = 4096,
     .metavar = "N",
     .help = "engine threads (0: the CPUs this process may use)"},
    {.name = "weights",
     .kind = MHLA_OPT_ENUM,
     .off = ARG(weights),
     .words = weight_words,
     .help = "how the weights are held"},
    {.name = "device",
     .kind = MHLA_OPT_ENUM,
     .off = ENG(device),
     .words = device_words,
     .help = "where the engine runs"},
    {.name = "gpu-weights",
     .kind = MHLA_OPT_ENUM,
     .off = ENG(gpu_weights),
     .words = gpu_weight_words,
     .help = "how the GPU holds the weights"},
    {.name = "state",
     .kind = MHLA_OPT_ENUM,
     .off = ENG(state_dtype),
     .words = state_words,
     .help = "the state's pages"},
    {.name = "state-memory",
     .kind = MHLA_OPT_LONG,
     .off = ARG(state_mb),
     .lo = 0,
     .hi = 1L << 30,
     .metavar = "MB",
     .help = "a page pool of that size (0: none)"},
    {.name = "no-graphs",
     .kind = MHLA_OPT_INT,
     .off = ENG(gpu_no_graphs),
     .lo = 0,
     .hi = 1,
     .metavar = "1",
     .help = "1: never replay decode steps as CUDA graphs"},
    {.name = "cpu-isa",
     .kind = MHLA_OPT_STRING,
     .off = ENG(cpu_isa),
     .metavar = "auto|avx512|avx2|neon|portable",
     .help = "CPU kernel path"},
    {.name = "prefill",
     .kind = MHLA_OPT_CUSTOM,
     .parse = parse_prefill,
     .metavar = "512,2000",
     .help = "prompt lengths whose prefill is timed"},
    {.name = "thread-adapt",
     .kind = MHLA_OPT_STRING,
     .off = ENG(thread_adapt),
     .metavar = "on|off",
     .help = "fewer threads while they do not pay"},
};
#undef ARG
#undef ENG

static const mhla_opts spec = {
    .usage = "usage: bench_decode MODEL_DIR [options]\n",
    .rows = rows,
    .n_rows = sizeof rows / sizeof rows[0],
    .help_col = 44,
};

/* The flags after MODEL_DIR into *a; 0, or the exit status 2 with the
 * message (or the usage) printed. */
static int parse_args(int argc, char **argv, bench_args *a)
{
    char err[256];
    *a = (bench_args){.batches = {1, 16},
                      .prefills = {512, 2000},
                      .n_batches = 2,
                      .n_prefills = 2,
                      .steps = 64,
                      .rounds = 3,
                      .warmup = 1};
    if (argc < 2 || argv[1][0] == '-') {
        mhla_opts_help(&spec, stderr);
        return 2;
    }
    /* argv[1] (the model) stands where parsing expects the program's name */
    int rc = mhla_opts_parse(&spec, a, argc - 1, argv + 1, NULL, err, sizeof err);
    if (rc == 1)
        mhla_opts_help(&spec, stderr);
    else if (rc < 0)
        fprintf(stderr, "bench_decode: %s\n", err);
    a->o.state_bytes = (size_t)a->state_mb << 20;
    return rc ? 2 : 0;
}

int main(int argc, char **argv)
{
    bench_args a;
    if (parse_args(argc, argv, &a))
        return 2;
    int *batches = a.batches, *prefills = a.prefills, n_batches = a.n_batches;
    int n_prefills = a.n_prefills, steps = a.steps, rounds = a.rounds;
    mhla_model_options mo = {.weights = (mhla_weight_dtype)a.weights};
    mhla_engine_options o = a.o;
    mhla_error err;
    mhla_model *m;
    check(mhla_model_load_with(argv[1], &mo, &m, &err), &err);
    const mhla_config *c = mhla_model_config(m);
    int V = c->vocab_size;
    mhla_engine *e;
    check(mhla_engine_create(m, &o, &e, &err), &err);
    const char *note = mhla_engine_device_note(e);
    bw_reading at_start = read_bandwidth(e);
    double bw = at_start.best;
    double wbytes = (double)mhla_engine_step_weight_bytes(e);
    /* per sequence and step: P_i, and on average C/2 rows of the current block */
    double lh = (double)c->num_layers * c->num_kv_heads;
    double sbytes = lh * ((double)c->head_k_dim * c->head_v_dim * 4 +
                          c->chunk_size / 2.0 * (c->head_k_dim + c->head_v_dim) * 4);
    printf("device: %s%s%s\n", mhla_engine_device_name(e), note[0] ? "; " : "", note);
    printf("cpu: %s\n", mhla_engine_cpu_note(e));
    printf("bandwidth %.1f GB/s (%s; best of %d, median %.1f, worst %.1f); a step reads %.1f MB "
           "of weights and %.2f MB of state per sequence\n",
           bw / 1e9,
           mhla_engine_device(e) == MHLA_DEVICE_CUDA ? "device copy, read + written" : "read",
           BW_REPS, at_start.median / 1e9, at_start.worst / 1e9, wbytes / 1e6, sbytes / 1e6);
    printf("model: %d layers, d=%d, H=%d, Hkv=%d, dk=%d, dv=%d, I=%d, V=%d, C=%d, context %d; "
           "weights %.0f MB (%s)\n",
           c->num_layers, c->hidden_size, c->num_heads, c->num_kv_heads, c->head_k_dim,
           c->head_v_dim, c->intermediate_size, V, c->chunk_size, c->max_positions,
           mhla_model_weight_bytes(m) / 1e6, mhla_weight_dtype_name(mo.weights));
    /* compute roofline: 2 flops per weight per token */
    double gflops = 0, flop_tok = 0;
    const char *core = "";
    int nt = 1;
    if (mhla_engine_device(e) == MHLA_DEVICE_CPU) {
        nt = o.n_threads > 0 ? o.n_threads : 0;
        if (nt == 0 && sscanf(mhla_engine_device_name(e), "cpu (%d", &nt) != 1)
            nt = 1;
        gflops = sgemm_gflops(512, c->intermediate_size, c->hidden_size, nt, &core);
        /* q8: 1 byte a weight plus a 4-byte scale per 32 (padding rows aside) */
        double welems =
            wbytes / (mo.weights == MHLA_WEIGHTS_Q8 ? 1.125
                      : mo.weights == MHLA_WEIGHTS_BF16 || mo.weights == MHLA_WEIGHTS_BF16DOT
                          ? 2.0
                          : 4.0);
        flop_tok = 2.0 * welems;
        printf("compute: OpenBLAS sgemm %.1f GFLOP/s (M=512, N=%d, K=%d, %d threads, core %s); "
               "a token costs %.2f GFLOP: bound %.1f tokens/s\n",
               gflops, c->intermediate_size, c->hidden_size, nt, core, flop_tok / 1e9,
               gflops > 0 ? gflops * 1e9 / flop_tok : 0.0);
        if (sgemm_core_too_old(core))
            printf("compute: OpenBLAS runs its %s kernels on a CPU with AVX2 (it does not know "
                   "this model): the bound is too low; OPENBLAS_CORETYPE=SkylakeX (AVX-512) or "
                   "Haswell (AVX2) picks kernels that use the vector units\n",
                   core);
    }
    /* the compute bound in tokens/s from the sgemm rate read now; 0 where there is none */
#define COMPUTE_BOUND_NOW()                                                                        \
    (gflops > 0                                                                                    \
         ? sgemm_gflops(512, c->intermediate_size, c->hidden_size, nt, &core) * 1e9 / flop_tok     \
         : 0.0)
    unsigned seed = 1;
    long reductions = 0;
    int lo = 100, hi = 1900;
    if (hi + steps > c->max_positions) {
        fprintf(stderr, "bench_decode: the model's context %d is too short\n", c->max_positions);
        return 1;
    }
    mhla_seq *at_lo, *at_hi, *tmp;
    check(mhla_engine_seq_create(e, &at_lo, &err), &err);
    check(mhla_engine_seq_create(e, &at_hi, &err), &err);
    if (a.warmup > 0) { /* llama-bench's warm-up prompt run: the longest call, untimed */
        check(mhla_engine_seq_create(e, &tmp, &err), &err);
        printf("prefill warm-up: %d tokens untimed in %.3f s\n", hi, feed(e, tmp, hi, V, &seed));
        mhla_seq_free(tmp);
    }
    feed(e, at_lo, lo, V, &seed);
    double t_hi = feed(e, at_hi, hi, V, &seed), cpu_hi = feed_cpu;
    for (int pi = 0; pi < n_prefills; pi++) {
        int plen = prefills[pi];
        if (plen < 1 || plen > c->max_positions) {
            fprintf(stderr, "bench_decode: prefill length %d is outside 1..%d\n", plen,
                    c->max_positions);
            return 1;
        }
        double t_pre, cpu_pre, cb_before = COMPUTE_BOUND_NOW();
        int calls = 1;
        if (plen > hi) { /* reuses the state at position hi: two calls */
            check(mhla_seq_clone(at_hi, &tmp, &err), &err);
            t_pre = t_hi + feed(e, tmp, plen - hi, V, &seed);
            cpu_pre = cpu_hi + feed_cpu;
            calls = 2;
        } else {
            check(mhla_engine_seq_create(e, &tmp, &err), &err);
            t_pre = feed(e, tmp, plen, V, &seed);
            cpu_pre = feed_cpu;
        }
        mhla_seq_free(tmp);
        double cb_after = COMPUTE_BOUND_NOW();
        double cb = cb_before > cb_after ? cb_before : cb_after;
        /* each call reads the weights once */
        printf("prefill: %d-token prompt in %.3f s: %.1f tokens/s (memory bound %.0f tokens/s, "
               "compute bound %.1f tokens/s:",
               plen, t_pre, plen / t_pre, bw > 0 ? plen / (calls * wbytes / bw) : 0.0, cb);
        print_fraction(plen / t_pre, cb);
        printf(")\n");
        printf("       in CPU time: %.3f s of the process's, %.1f tokens/s over %d threads\n",
               cpu_pre, plen / (cpu_pre / nt), nt);
        if (cb > 0)
            printf("       compute bound before / after this prefill, tokens/s: %.1f / %.1f; the "
                   "bound is the better\n",
                   cb_before, cb_after);
        print_thread_reductions(e, &reductions);
        fflush(stdout);
    }
    printf("decode: state per sequence at position %d: %.1f MB\n", hi,
           mhla_seq_state_bytes(at_hi) / 1e6);

    printf("tok/s: whole window of %d steps (best of %d rounds) | rate of the median step\n", steps,
           rounds);
    printf("%-6s %12s %12s %9s | %12s %12s %9s | %12s %12s | %7s %7s (window @~100 as a "
           "fraction of each bound)\n",
           "batch", "@~100", "@~1900", "ratio", "@~100", "@~1900", "ratio", "mem. bound",
           "comp. bound", "mem.", "comp.");
    for (int bi = 0; bi < n_batches; bi++) {
        int batch = batches[bi];
        double r_lo = 0, r_hi = 0, m_lo = 0, m_hi = 0, c_lo = 1e30, c_hi = 1e30;
        bw_reading before = read_bandwidth(e);
        double cb_before = COMPUTE_BOUND_NOW();
        for (int r = 0; r < a.warmup; r++) {
            double wm, wc;
            (void)decode_rate(e, at_lo, batch, steps, V, &seed, &wm, &wc);
        }
        for (int r = 0; r < (rounds > 0 ? rounds : 1); r++) {
            double ma, mb, ca, cb_;
            double a = decode_rate(e, at_lo, batch, steps, V, &seed, &ma, &ca);
            double b = decode_rate(e, at_hi, batch, steps, V, &seed, &mb, &cb_);
            c_lo = ca < c_lo ? ca : c_lo;
            c_hi = cb_ < c_hi ? cb_ : c_hi;
            r_lo = a > r_lo ? a : r_lo;
            r_hi = b > r_hi ? b : r_hi;
            m_lo = ma > m_lo ? ma : m_lo;
            m_hi = mb > m_hi ? mb : m_hi;
        }
        bw_reading after = read_bandwidth(e);
        double cb_after = COMPUTE_BOUND_NOW();
        double cb = cb_before > cb_after ? cb_before : cb_after;
        double bw_b = before.best > after.best ? before.best : after.best;
        double bound = bw_b > 0 ? batch * bw_b / (wbytes + batch * sbytes) : 0;
        printf("%-6d %12.2f %12.2f %9.3f | %12.2f %12.2f %9.3f | %12.1f %12.1f |", batch, r_lo,
               r_hi, r_hi / r_lo, m_lo, m_hi, m_hi / m_lo, bound, cb);
        print_fraction(r_lo, bound);
        print_fraction(r_lo, cb);
        printf("\n       bandwidth before / after these rounds, GB/s: best %.1f / %.1f, median "
               "%.1f / %.1f, worst %.1f / %.1f; the bound is from %.1f\n",
               before.best / 1e9, after.best / 1e9, before.median / 1e9, after.median / 1e9,
               before.worst / 1e9, after.worst / 1e9, bw_b / 1e9);
        if (cb > 0)
            printf("       compute bound before / after these rounds, tokens/s: %.1f / %.1f; the "
                   "bound is the better\n",
                   cb_before, cb_after);
        printf("       process CPU time a step (every thread, the least of the rounds): @~100 "
               "%.2f ms, @~1900 %.2f ms\n",
               c_lo * 1e3, c_hi * 1e3);
        print_thread_reductions(e, &reductions);
        if (batch == 1 && bw > 0) {
            double f_lo[3], f_hi[3], rd_lo, rd_hi;
            paired_fractions(e, at_lo, steps, V, wbytes + sbytes, &seed, &f_lo[0], &f_lo[1],
                             &f_lo[2], &rd_lo);
            paired_fractions(e, at_hi, steps, V, wbytes + sbytes, &seed, &f_hi[0], &f_hi[1],
                             &f_hi[2], &rd_hi);
            printf("       paired: %d steps, each followed by a bandwidth reading; a step's rate "
                   "as a fraction of the reading after it, median (quartiles): @~100 %.1f%% "
                   "(%.1f-%.1f%%), @~1900 %.1f%% (%.1f-%.1f%%); readings' median %.1f / %.1f "
                   "GB/s\n",
                   steps, 100 * f_lo[0], 100 * f_lo[1], 100 * f_lo[2], 100 * f_hi[0], 100 * f_hi[1],
                   100 * f_hi[2], rd_lo / 1e9, rd_hi / 1e9);
            double p[4], h[4];
            if (paired_products(e, MHLA_PRODUCTS_STEP, steps, &p[0], &p[1], &p[2], &p[3]) == 0 &&
                paired_products(e, MHLA_PRODUCTS_HEAD, steps, &h[0], &h[1], &h[2], &h[3]) == 0)
                printf("       products alone: %d passes of a step's matrix products (its jobs, "
                       "no norms, token mixer or sampling), and of its head alone (one job), "
                       "each followed by a bandwidth reading; the weights' rate as a fraction "
                       "of the reading after it, median (quartiles): step's products %.1f%% "
                       "(%.1f-%.1f%%), head %.1f%% (%.1f-%.1f%%); readings' median %.1f / %.1f "
                       "GB/s\n",
                       steps, 100 * p[0], 100 * p[1], 100 * p[2], 100 * h[0], 100 * h[1],
                       100 * h[2], p[3] / 1e9, h[3] / 1e9);
        }
        fflush(stdout);
    }
    mhla_seq_free(at_lo);
    mhla_seq_free(at_hi);
    mhla_engine_free(e);
    mhla_model_free(m);
    return 0;
}
