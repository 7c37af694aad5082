/*
 * threadpool.c — a persistent pool of workers on Linux futexes (see
 * threadpool.h). A job is posted by writing its description, then a new
 * claim word (generation << 32 | next task) and the generation; threads
 * take tasks by compare-and-swap on the claim word, so a worker that wakes
 * late for an old generation can never take a task of the new one.
 *
 * How many threads take part adapts to the machine. After each job the
 * caller knows how long the job took, how long it ran its own tasks, and
 * how long the workers' tasks took; from the faster side's time per task it
 * estimates what the job would have cost on the caller alone. Where, over
 * two windows of jobs in a row, the threads together were not faster than
 * that estimate (a worker the OS had descheduled while it held a task, on a
 * machine whose cores are taken by other processes), the pool halves the
 * threads that take part and holds there a while before it tries twice as
 * many again; each failed try doubles the hold. The estimate assumes the
 * caller alone would keep its CPU, which it does not where busy processes
 * share the cores (it loses its CPU as often as a worker does, and two
 * threads get two shares of the machine): so a reduction stands only once
 * the next windows, timed with the fewer threads, are not slower than the
 * windows that failed (the check, below). Now and then a window runs with
 * half the threads, to see what the estimate cannot: the cost of running
 * side by side at all (the probe, below). The tasks and their arithmetic
 * stay the same, so the bits do too.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "threadpool.h"

#include "base.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

/* How long an idle thread spins before it sleeps: long enough to bridge
 * the serial code between two jobs of a step, short enough not to take
 * the CPU from others on a busy machine. */
#define SPIN_NS 30000L

/* The adaptation (above). A window is judged once it holds this many
 * measured jobs and this much of their time: long enough that one job's
 * noise does not decide, short enough that a probe on a busy machine costs
 * little. The threads are reduced where, in two windows in a row, they were
 * not at least MIN_GAIN faster than the caller alone would have been (one
 * window alone measured a few failures a second on a quiet VM whose host
 * took a CPU for a moment, at batch-1 decode). Holds start at HOLD_NS and
 * double with every failed try up to HOLD_MAX_NS and halve with every
 * window that succeeds with every thread. */
#define WINDOW_JOBS 16
#define WINDOW_NS 10000000L
#define MIN_GAIN 0.02
#define HOLD_NS 50000000L
#define HOLD_MAX_NS 2000000000L
/* The probe: the estimate above comes from tasks run side by side, so it
 * cannot see what running them side by side costs (each job's output
 * moving between the cores for the code that reads it next, the wake-ups):
 * on a model small enough, one thread is faster than two whose every
 * window looks good. So after PROBE_EVERY good windows with every thread,
 * the next window runs with half of them, and its mean time a job (with
 * the serial code since the job before, up to GAP_MAX_NS: a longer gap is
 * a pause between steps) is set against the window before it. Fewer
 * threads faster by MIN_GAIN, twice in a row, make a reduction like any
 * other, held at least PROBE_HOLD_NS (a measurement, not an estimate:
 * with 50 ms holds, a 0.5 s decode of the demo model went back to two
 * threads again and again and gained nothing); otherwise the interval
 * doubles, up to PROBE_MAX windows. Only windows of small jobs (a mean up
 * to PROBE_JOB_NS) probe: where a job lasts longer, the per-job costs are
 * small beside it, and a probe of a few such jobs would cost much of their
 * time. */
#define PROBE_EVERY 2
#define PROBE_MAX 512
#define PROBE_JOB_NS 1000000.0
#define PROBE_HOLD_NS 400000000L
#define GAP_MAX_NS 1000000L
/* The check of a reduction (see the top of the file): the CHECK_WINDOWS
 * windows after it run with the fewer threads (one window of a busy
 * machine is a few of its time slices: a coin toss), and where their mean
 * time a job (measured as the probe's) is over MIN_GAIN slower than the two
 * failed windows', every thread comes back and the estimate's failures
 * reduce nothing for DISTRUST_NS, doubled with every reduction undone in a row up to
 * DISTRUST_MAX_NS (measured with two busy loops on 2 CPUs and the 340M
 * shape: without the check the pool ran one thread in ~90 % of the decode
 * steps, and a decode step took 1.4 x as long as with both threads). */
#define CHECK_WINDOWS 3
#define DISTRUST_NS 400000000L
#define DISTRUST_MAX_NS 8000000000L

typedef struct {
    struct tp_pool *pool;
    uint32_t index; /* 1..n_threads-1; the caller is 0 */
} tp_worker;

struct tp_pool {
    int n_threads;
    void *scratch[TP_SCRATCH_SLOTS]; /* the caller's buffers between jobs (tp_scratch) */
    size_t scratch_bytes[TP_SCRATCH_SLOTS];
    pthread_t *workers;
    tp_worker *worker_args;
    int n_started;
    /* futex word: the threads that take part, the caller's included; a
     * worker whose index is at or past it waits on this word */
    _Atomic uint32_t active;
    /* the adaptation, touched by the caller's thread only (tp_run) */
    int adaptive;
    long hold_ns, hold_until, win_jobs, win_par_ns;
    long win_gap_ns, last_end; /* the serial code between the window's jobs */
    double win_serial_ns;
    _Atomic long reductions; /* read by tp_get_stats from any thread */
    int fails;               /* windows in a row that failed */
    /* the probe (see the top of the file) */
    int probing, probe_from, probe_fails, probe_reduced;
    long probe_after, probe_every; /* good windows until the next probe; the interval */
    double ref_job_ns;             /* a job's mean time in the window before the probe */
    /* the check of a reduction (see the top of the file) */
    int checking, check_from;      /* windows of the check left; the threads before it */
    double check_ref_ns;           /* a job's mean time in the two windows that failed */
    double check_sum_ns;           /* the sum of the check's windows' job times */
    double fail_job_ns;            /* a job's mean time in the last window that failed */
    long trust_after, distrust_ns; /* the estimate's failures reduce nothing before trust_after */
    /* the job */
    _Atomic(tp_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_int n_tasks;
    _Atomic uint64_t claim;    /* generation << 32 | next task */
    atomic_int finished;       /* tasks of the current job done */
    _Atomic long worker_ns;    /* the time the workers' tasks of the job took */
    atomic_int timed;          /* whether workers time this job's tasks */
    _Atomic uint32_t gen;      /* futex word: bumped for every job */
    _Atomic uint32_t done_gen; /* futex word the caller sleeps on */
    atomic_int sleepers;       /* workers in (or entering) futex_wait */
    atomic_int caller_waiting;
    atomic_int stop;
};

static void futex_wait(_Atomic uint32_t *w, uint32_t expect)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w, int n)
{
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static long now_ns(void) { return (long)(mhla_now() * 1e9); }

/* Spins until *w != v or SPIN_NS pass; returns the last value seen. */
static uint32_t spin_while(_Atomic uint32_t *w, uint32_t v)
{
    long t0 = now_ns();
    for (int i = 1;; i++) {
        uint32_t cur = atomic_load_explicit(w, memory_order_acquire);
        if (cur != v)
            return cur;
        cpu_relax();
        if ((i & 63) == 0 && now_ns() - t0 > SPIN_NS)
            return cur;
    }
}

#ifdef MHLA_TP_TEST_HOOKS
void (*tp_test_hook)(enum tp_hook_point at, uint32_t gen, uint64_t claim);
#define TEST_HOOK(at, gen, claim)                                                                  \
    do {                                                                                           \
        if (tp_test_hook)                                                                          \
            tp_test_hook(at, gen, claim);                                                          \
    } while (0)
#else
#define TEST_HOOK(at, gen, claim) ((void)0)
#endif

/* Takes and runs tasks of generation g until none is left; returns how
 * many it ran. A worker times its tasks where the adaptation counts the job. */
static int work(tp_pool *p, uint32_t g, int on_caller)
{
    for (int ran = 0;; ran++) {
        uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
        TEST_HOOK(TP_HOOK_CLAIM_READ, g, w);
        if ((uint32_t)(w >> 32) != g)
            return ran;
        int task = (int)(uint32_t)w;
        /* acquire: a count from a newer job comes with that job's closed claim
         * word (tp_run), so the compare-and-swap below then fails */
        int n = atomic_load_explicit(&p->n_tasks, memory_order_acquire);
        if (task >= n)
            return ran;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_relaxed)) {
            ran--;
            continue;
        }
        /* the claim succeeded for generation g: the job is g's until every
         * task of it, this one included, is finished */
        tp_task_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        if (on_caller || !atomic_load_explicit(&p->timed, memory_order_relaxed)) {
            fn(ctx, task);
        } else {
            long t0 = now_ns();
            fn(ctx, task);
            atomic_fetch_add_explicit(&p->worker_ns, now_ns() - t0, memory_order_relaxed);
        }
        if (atomic_fetch_add(&p->finished, 1) + 1 == n && atomic_load(&p->caller_waiting)) {
            atomic_store(&p->done_gen, g);
            futex_wake(&p->done_gen, 1);
        }
    }
}

static void *worker_main(void *arg)
{
    tp_worker *me = arg;
    tp_pool *p = me->pool;
    uint32_t seen = 0;
    for (;;) {
        /* not taking part for now: wait until the pool grows again */
        for (uint32_t a; (a = atomic_load(&p->active)) <= me->index && !atomic_load(&p->stop);)
            futex_wait(&p->active, a);
        uint32_t g = spin_while(&p->gen, seen);
        if (g == seen) {
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen)
                futex_wait(&p->gen, seen);
            atomic_fetch_sub(&p->sleepers, 1);
        }
        if (atomic_load(&p->stop))
            return NULL;
        seen = g;
        /* a worker the pool has just stopped using takes no task: it may,
         * without harm (any thread may run any task), but it would only
         * compete with the caller for the CPU the pool gave up */
        if (me->index < atomic_load(&p->active))
            work(p, g, 0);
    }
}

/* A futex wake cannot pick which waiters it wakes: on growth every parked
 * worker wakes, and those still past the new count park again. */
static void set_active(tp_pool *p, int n)
{
    uint32_t old = atomic_exchange(&p->active, (uint32_t)n);
    if ((uint32_t)n > old)
        futex_wake(&p->active, INT_MAX);
}

static void probe_reset(tp_pool *p)
{
    p->probing = p->probe_fails = p->probe_reduced = 0;
    p->probe_after = p->probe_every = PROBE_EVERY;
}

/* Halves the threads that take part, from `active`, and holds there a while
 * (each reduction in a row doubles the hold). */
static void reduce(tp_pool *p, int active, long t)
{
    set_active(p, active / 2 > 1 ? active / 2 : 1);
    atomic_fetch_add_explicit(&p->reductions, 1, memory_order_relaxed);
    p->hold_until = t + p->hold_ns;
    p->hold_ns = p->hold_ns * 2 < HOLD_MAX_NS ? p->hold_ns * 2 : HOLD_MAX_NS;
}

/* Ends a probe window whose jobs took job_ns each on average: fewer threads
 * faster by MIN_GAIN than before the probe, twice in a row, keep the fewer;
 * otherwise every thread again, and the next probe comes twice as late. */
static void end_probe(tp_pool *p, double job_ns, long t)
{
    p->probing = 0;
    if (job_ns < (1.0 - MIN_GAIN) * p->ref_job_ns) {
        if (++p->probe_fails >= 2) {
            /* after the hold, the first good window with every thread probes
             * again, and one more such probe is enough */
            p->probe_fails = 1;
            p->probe_every = PROBE_EVERY;
            p->probe_after = 1;
            p->probe_reduced = 1;
            /* the probe's threads stay, as a reduction from the threads before it */
            if (p->hold_ns < PROBE_HOLD_NS)
                p->hold_ns = PROBE_HOLD_NS;
            reduce(p, p->probe_from, t);
            return;
        }
        p->probe_after = 1; /* confirm at the next good window */
    } else {
        p->probe_fails = 0;
        p->probe_reduced = 0;
        p->probe_every = p->probe_every * 2 < PROBE_MAX ? p->probe_every * 2 : PROBE_MAX;
        p->probe_after = p->probe_every;
    }
    set_active(p, p->probe_from);
}

/* Ends a window after a reduction the estimate made, whose jobs took
 * job_ns each on average. After the check's last: where its windows were
 * slower than the failed ones by MIN_GAIN, the threads before it come back
 * and the estimate is not trusted for a while; otherwise the reduction
 * stands and the estimate regains trust. */
static void end_check(tp_pool *p, double job_ns, long t)
{
    p->check_sum_ns += job_ns;
    if (--p->checking > 0)
        return;
    job_ns = p->check_sum_ns / CHECK_WINDOWS;
    if (job_ns <= (1.0 + MIN_GAIN) * p->check_ref_ns) {
        p->distrust_ns = p->distrust_ns / 2 > DISTRUST_NS ? p->distrust_ns / 2 : DISTRUST_NS;
        return;
    }
    set_active(p, p->check_from);
    p->hold_ns = p->hold_ns / 2 > HOLD_NS ? p->hold_ns / 2 : HOLD_NS; /* undo reduce's doubling */
    p->trust_after = t + p->distrust_ns;
    p->distrust_ns = p->distrust_ns * 2 < DISTRUST_MAX_NS ? p->distrust_ns * 2 : DISTRUST_MAX_NS;
}

/* Two failed windows in a row, the last with jobs of job_ns: fewer threads,
 * to be checked by the next windows; nothing while the estimate is distrusted. */
static void reduce_by_estimate(tp_pool *p, int active, double job_ns, long t)
{
    if (t < p->trust_after)
        return;
    p->checking = CHECK_WINDOWS;
    p->check_from = active;
    p->check_ref_ns = (job_ns + p->fail_job_ns) / 2;
    p->check_sum_ns = 0;
    reduce(p, active, t);
}

/* A full window whose jobs took job_ns each ends the probe or the check
 * that runs, if one does: nonzero when it did. */
static int end_measured(tp_pool *p, double job_ns, long t)
{
    if (p->probing)
        end_probe(p, job_ns, t);
    else if (p->checking)
        end_check(p, job_ns, t);
    else
        return 0;
    return 1;
}

/* A measured job, from t0 to t, into the window; serial_ns the estimate
 * of it on the caller alone. Judges a window once it is full. */
static void window_add(tp_pool *p, long t0, long t, double serial_ns)
{
    /* the serial code since the last job (up to GAP_MAX_NS: a longer gap
     * is a pause between steps) is part of a job's cost for the probe: it
     * reads what the job's threads wrote */
    long gap = t0 - p->last_end;
    p->win_gap_ns += gap < 0 ? 0 : gap > GAP_MAX_NS ? GAP_MAX_NS : gap;
    p->last_end = t;
    p->win_serial_ns += serial_ns;
    p->win_par_ns += t - t0;
    if (++p->win_jobs < WINDOW_JOBS || p->win_par_ns < WINDOW_NS)
        return;
    int active = (int)atomic_load(&p->active);
    double job_ns = (double)(p->win_par_ns + p->win_gap_ns) / (double)p->win_jobs;
    int failed = (double)p->win_par_ns > (1.0 - MIN_GAIN) * p->win_serial_ns;
    p->win_jobs = p->win_par_ns = p->win_gap_ns = 0;
    p->win_serial_ns = 0;
    if (end_measured(p, job_ns, t))
        return;
    /* one window alone can be a blip (the host took a CPU for a moment): two
     * in a row decide */
    p->fails = failed ? p->fails + 1 : 0;
    if (p->fails == 1)
        p->fail_job_ns = job_ns;
    if (p->fails >= 2) {
        p->fails = 0;
        reduce_by_estimate(p, active, job_ns, t);
    } else if (failed) {
        return;
    } else if (active < p->n_threads) {
        if (t >= p->hold_until)
            set_active(p, active * 2 < p->n_threads ? active * 2 : p->n_threads);
    } else {
        /* one good window on a busy machine is often luck: the holds shrink
         * as they grew, one step a success, so that the tries stay rare
         * while most of them fail; not while the last probe found fewer
         * threads faster */
        if (p->hold_ns > HOLD_NS && !p->probe_reduced)
            p->hold_ns /= 2;
        if (job_ns <= PROBE_JOB_NS && --p->probe_after <= 0) {
            p->probing = 1;
            p->probe_from = active;
            p->ref_job_ns = job_ns;
            set_active(p, active / 2);
        }
    }
}

/* After a job the threads ran together, posted at t0: the caller ran
 * `mine` of its n_tasks tasks until t1 and then waited for the workers'
 * until t2; the workers' tasks took worker_ns. The job alone on the caller
 * is estimated at n_tasks times the lesser of the two sides' times a task:
 * the greater one holds the time a thread of that side was descheduled,
 * and scaled by n_tasks / mine one such pause would count many times. */
static void adapt_after_job(tp_pool *p, int n_tasks, int mine, long t0, long t1, long t2,
                            long worker_ns)
{
    /* a job the caller took no part in says nothing about its tasks' time */
    if (!p->adaptive || mine <= 0)
        return;
    double per = (double)(t1 - t0) / mine;
    if (mine < n_tasks && (double)worker_ns / (n_tasks - mine) < per)
        per = (double)worker_ns / (n_tasks - mine);
    window_add(p, t0, t2, per * n_tasks);
}

int tp_create(int n_threads, tp_pool **out, char *err, size_t errlen)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->workers = calloc((size_t)n_threads, sizeof *p->workers)) ||
        !(p->worker_args = calloc((size_t)n_threads, sizeof *p->worker_args))) {
        if (p)
            free(p->workers);
        free(p);
        snprintf(err, errlen, "out of memory for the thread pool");
        return -1;
    }
    p->n_threads = n_threads;
    atomic_store(&p->active, (uint32_t)n_threads);
    p->adaptive = 1;
    p->hold_ns = HOLD_NS;
    p->distrust_ns = DISTRUST_NS;
    probe_reset(p);
    for (int i = 0; i < n_threads - 1; i++) {
        p->worker_args[i] = (tp_worker){p, (uint32_t)i + 1};
        int rc = pthread_create(&p->workers[i], NULL, worker_main, &p->worker_args[i]);
        if (rc) {
            snprintf(err, errlen, "cannot start worker thread %d of %d: %s", i + 1, n_threads - 1,
                     strerror(rc));
            tp_free(p);
            return -1;
        }
        p->n_started++;
    }
    *out = p;
    return 0;
}

void tp_free(tp_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen, 1);
    futex_wake(&p->gen, INT_MAX);
    atomic_fetch_add(&p->active, 1);
    futex_wake(&p->active, INT_MAX);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p->worker_args);
    for (int i = 0; i < TP_SCRATCH_SLOTS; i++)
        free(p->scratch[i]);
    free(p);
}

int tp_threads(const tp_pool *p) { return p ? p->n_threads : 1; }

void *tp_scratch(tp_pool *p, int slot, size_t bytes)
{
    if (!p || slot < 0 || slot >= TP_SCRATCH_SLOTS)
        return NULL;
    if (bytes > p->scratch_bytes[slot]) {
        void *b = realloc(p->scratch[slot], bytes);
        if (!b)
            return NULL;
        p->scratch[slot] = b;
        p->scratch_bytes[slot] = bytes;
    }
    return p->scratch[slot];
}

void tp_set_adaptive(tp_pool *p, int on)
{
    if (!p)
        return;
    p->adaptive = on != 0;
    p->win_jobs = p->win_par_ns = p->win_gap_ns = 0;
    p->win_serial_ns = 0;
    p->fails = 0;
    p->hold_ns = HOLD_NS;
    p->checking = 0;
    p->trust_after = 0;
    p->distrust_ns = DISTRUST_NS;
    probe_reset(p);
    set_active(p, p->n_threads);
}

void tp_get_stats(const tp_pool *p, tp_stats *out)
{
    out->threads = tp_threads(p);
    out->active = p ? (int)atomic_load(&p->active) : 1;
    out->reductions = p ? atomic_load_explicit(&p->reductions, memory_order_relaxed) : 0;
}

/* Posts a job to the threads that take part and runs it with them. */
static void run_together(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx, int measure)
{
    uint32_t g = atomic_load_explicit(&p->gen, memory_order_relaxed) + 1;
    /* Close the claim word first: a worker that read the last job's claim
     * word and then this job's task count would otherwise claim a task
     * index of the new job under the old generation (and run it with the
     * new job's context). Task INT32_MAX is past every count. */
    atomic_store(&p->claim, (uint64_t)g << 32 | (uint64_t)INT32_MAX);
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&p->n_tasks, n_tasks, memory_order_release);
    atomic_store_explicit(&p->finished, 0, memory_order_relaxed);
    atomic_store_explicit(&p->worker_ns, 0, memory_order_relaxed);
    /* published with the claim word below (release), as fn and ctx are */
    atomic_store_explicit(&p->timed, measure && p->adaptive, memory_order_relaxed);
    TEST_HOOK(TP_HOOK_JOB_POSTED, g, (uint64_t)g << 32);
    long t0 = now_ns();
    atomic_store_explicit(&p->claim, (uint64_t)g << 32, memory_order_release);
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers) > 0)
        futex_wake(&p->gen, INT_MAX);
    int mine = work(p, g, 1);
    /* the tasks still running on workers: spin, then sleep until the last
     * one is finished */
    long t1 = now_ns();
    for (int i = 1; atomic_load_explicit(&p->finished, memory_order_acquire) < n_tasks; i++) {
        cpu_relax();
        if ((i & 63) == 0 && now_ns() - t1 > SPIN_NS)
            break;
    }
    if (atomic_load(&p->finished) < n_tasks) {
        uint32_t d = atomic_load(&p->done_gen);
        atomic_store(&p->caller_waiting, 1);
        while (atomic_load(&p->finished) < n_tasks)
            futex_wait(&p->done_gen, d);
        atomic_store(&p->caller_waiting, 0);
    }
    if (measure)
        adapt_after_job(p, n_tasks, mine, t0, t1, now_ns(),
                        atomic_load_explicit(&p->worker_ns, memory_order_relaxed));
}

/* Runs the job on the caller alone where no other thread would help:
 * nonzero when it did. */
static int run_alone(const tp_pool *p, int threads, int n_tasks, tp_task_fn fn, void *ctx)
{
    if (p && threads > 1 && n_tasks > 1)
        return 0;
    for (int t = 0; t < n_tasks; t++)
        fn(ctx, t);
    return 1;
}

static void run_job(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx, int measure)
{
    if (n_tasks <= 0)
        return;
    if (p && p->n_threads > 1 && n_tasks > 1 && atomic_load(&p->active) == 1) {
        /* the jobs of a probe's or a check's window on the caller alone: timed */
        if ((p->probing || p->checking) && measure) {
            long t0 = now_ns();
            run_alone(p, 1, n_tasks, fn, ctx);
            long t1 = now_ns();
            window_add(p, t0, t1, (double)(t1 - t0));
            return;
        }
        if (!p->probing && !p->checking && now_ns() >= p->hold_until)
            set_active(p, 2); /* the hold is over: try two threads again */
    }
    if (!run_alone(p, p ? (int)atomic_load(&p->active) : 1, n_tasks, fn, ctx))
        run_together(p, n_tasks, fn, ctx, measure);
}

void tp_run(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx) { run_job(p, n_tasks, fn, ctx, 1); }

void tp_run_loops(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx)
{
    run_job(p, n_tasks, fn, ctx, 0);
}

void tp_run_all(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx)
{
    if (n_tasks <= 0 || run_alone(p, tp_threads(p), n_tasks, fn, ctx))
        return;
    uint32_t active = atomic_load(&p->active);
    if ((int)active < p->n_threads)
        set_active(p, p->n_threads);
    run_together(p, n_tasks, fn, ctx, 0);
    if ((int)active < p->n_threads)
        set_active(p, (int)active);
}

/* The quota of one cgroup folder in CPUs (rounded up), 0 without one:
 * cgroup v2 cpu.max ("QUOTA PERIOD" or "max PERIOD"), or v1
 * cpu.cfs_quota_us / cpu.cfs_period_us (quota -1: none). */
static int dir_quota(const char *dir, char *where, size_t len)
{
    uint64_t quota = 0, period = 0;
    const char *name = "cpu.max";
    int got = mhla_cgroup_read(dir, name, &quota, &period);
    if (!got) {
        name = "cpu.cfs_quota_us";
        got = mhla_cgroup_read(dir, name, &quota, NULL);
        if (got == 1 && mhla_cgroup_read(dir, "cpu.cfs_period_us", &period, NULL) != 1)
            period = 0;
    }
    if (got != 1 || quota == 0 || period == 0)
        return 0;
    snprintf(where, len, "%s/%s (%llu/%llu)", dir, name, (unsigned long long)quota,
             (unsigned long long)period);
    uint64_t cpus = (quota + period - 1) / period;
    return cpus > INT_MAX ? INT_MAX : (int)cpus;
}

int tp_quota_cpus(const char *proc_cgroup, const char *root, char *where, size_t len)
{
    mhla_cgroup cg;
    if (!mhla_cgroup_find(proc_cgroup, root, "cpu", &cg))
        return 0;
    int best = 0;
    do { /* the smallest quota from the process's cgroup up to the root */
        char dir[1200], w[1300];
        mhla_cgroup_dir(&cg, dir, sizeof dir);
        int q = dir_quota(dir, w, sizeof w);
        if (q > 0 && (!best || q < best)) {
            best = q;
            snprintf(where, len, "%s", w);
        }
    } while (mhla_cgroup_up(&cg));
    return best;
}

int tp_default_threads(char *why, size_t len)
{
    int n = 0;
    const char *src = "CPUs of its affinity mask";
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        n = CPU_COUNT(&set);
    if (n < 1) {
        n = (int)sysconf(_SC_NPROCESSORS_ONLN);
        src = "online CPUs";
    }
    if (n < 1)
        n = 1;
    char where[1300] = "";
    int q = tp_quota_cpus("/proc/self/cgroup", "/sys/fs/cgroup", where, sizeof where);
    if (q > 0 && q < n)
        snprintf(why, len, "%d threads: the cgroup CPU quota %s (the affinity mask has %d CPUs)", q,
                 where, n);
    else
        snprintf(why, len, "%d threads: the %d %s%s", n, n, src,
                 q > 0 ? " (within the cgroup CPU quota)" : ", no cgroup CPU quota");
    return q > 0 && q < n ? q : n;
}
