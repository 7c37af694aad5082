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
 * many again; each failed try doubles the hold. The tasks and their
 * arithmetic stay the same, so the bits do too.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include "threadpool.h"

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
#include <time.h>
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

typedef struct {
    struct tp_pool *pool;
    uint32_t index; /* 1..n_threads-1; the caller is 0 */
} tp_worker;

struct tp_pool {
    int n_threads;
    pthread_t *workers;
    tp_worker *worker_args;
    int n_started;
    /* futex word: the threads that take part, the caller's included; a
     * worker whose index is at or past it waits on this word */
    _Atomic uint32_t active;
    /* the adaptation, touched by the caller's thread only (tp_run) */
    int adaptive;
    long hold_ns, hold_until, win_jobs, win_par_ns;
    double win_serial_ns;
    _Atomic long reductions; /* read by tp_get_stats from any thread */
    int fails;               /* windows in a row that failed */
    /* the job */
    _Atomic(tp_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_int n_tasks;
    _Atomic uint64_t claim;    /* generation << 32 | next task */
    atomic_int finished;       /* tasks of the current job done */
    _Atomic long worker_ns;    /* the time the workers' tasks of the job took */
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

static long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

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
 * many it ran. A worker times its tasks, for the adaptation. */
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
        if (on_caller) {
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

static void set_active(tp_pool *p, int n)
{
    uint32_t old = atomic_exchange(&p->active, (uint32_t)n);
    if ((uint32_t)n > old)
        futex_wake(&p->active, INT_MAX);
}

/* After a job the threads ran together, posted at t0: the caller ran
 * `mine` of its n_tasks tasks until t1 and then waited for the workers'
 * until t2; the workers' tasks took worker_ns. The job alone on the caller
 * is estimated at n_tasks times the lesser of the two sides' times a task:
 * the greater one holds the time a thread of that side was descheduled,
 * and scaled by n_tasks / mine one such pause would count many times.
 * Judges a window once it is full (see the top of the file). */
static void adapt_after_job(tp_pool *p, int n_tasks, int mine, long t0, long t1, long t2,
                            long worker_ns)
{
    /* a job the caller took no part in says nothing about its tasks' time */
    if (!p->adaptive || mine <= 0)
        return;
    double per = (double)(t1 - t0) / mine;
    if (mine < n_tasks && (double)worker_ns / (n_tasks - mine) < per)
        per = (double)worker_ns / (n_tasks - mine);
    p->win_serial_ns += per * n_tasks;
    p->win_par_ns += t2 - t0;
    if (++p->win_jobs < WINDOW_JOBS || p->win_par_ns < WINDOW_NS)
        return;
    int active = (int)atomic_load(&p->active);
    int failed = (double)p->win_par_ns > (1.0 - MIN_GAIN) * p->win_serial_ns;
    p->win_jobs = p->win_par_ns = 0;
    p->win_serial_ns = 0;
    /* one window alone can be a blip (the host took a CPU for a moment): two
     * in a row decide */
    p->fails = failed ? p->fails + 1 : 0;
    if (p->fails >= 2) {
        p->fails = 0;
        set_active(p, active / 2 > 1 ? active / 2 : 1);
        atomic_fetch_add_explicit(&p->reductions, 1, memory_order_relaxed);
        p->hold_until = t2 + p->hold_ns;
        p->hold_ns = p->hold_ns * 2 < HOLD_MAX_NS ? p->hold_ns * 2 : HOLD_MAX_NS;
    } else if (failed) {
        return;
    } else if (active < p->n_threads) {
        if (t2 >= p->hold_until)
            set_active(p, active * 2 < p->n_threads ? active * 2 : p->n_threads);
    } else if (p->hold_ns > HOLD_NS) {
        /* one good window on a busy machine is often luck: the holds shrink
         * as they grew, one step a success, so that the tries stay rare
         * while most of them fail */
        p->hold_ns /= 2;
    }
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
    free(p);
}

int tp_threads(const tp_pool *p) { return p ? p->n_threads : 1; }

void tp_set_adaptive(tp_pool *p, int on)
{
    if (!p)
        return;
    p->adaptive = on != 0;
    p->win_jobs = p->win_par_ns = 0;
    p->win_serial_ns = 0;
    p->fails = 0;
    p->hold_ns = HOLD_NS;
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

static void run_job(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx, int measure)
{
    if (n_tasks <= 0)
        return;
    if (p && p->n_threads > 1 && n_tasks > 1 && atomic_load(&p->active) == 1 &&
        now_ns() >= p->hold_until)
        set_active(p, 2); /* the hold is over: try two threads again */
    if (!p || atomic_load(&p->active) == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++)
            fn(ctx, t);
        return;
    }
    run_together(p, n_tasks, fn, ctx, measure);
}

void tp_run(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx) { run_job(p, n_tasks, fn, ctx, 1); }

void tp_run_loops(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx)
{
    run_job(p, n_tasks, fn, ctx, 0);
}

void tp_run_all(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++)
            fn(ctx, t);
        return;
    }
    uint32_t active = atomic_load(&p->active);
    if ((int)active < p->n_threads)
        set_active(p, p->n_threads);
    run_together(p, n_tasks, fn, ctx, 0);
    if ((int)active < p->n_threads)
        set_active(p, (int)active);
}

/* The quota of one cgroup directory in CPUs (rounded up), 0 without one:
 * cgroup v2 cpu.max ("QUOTA PERIOD" or "max PERIOD"), or v1
 * cpu.cfs_quota_us / cpu.cfs_period_us (quota -1: none). */
static int dir_quota(const char *dir, char *where, size_t len)
{
    char file[1240];
    long quota = -1, period = 0;
    snprintf(file, sizeof file, "%s/cpu.max", dir);
    FILE *f = fopen(file, "r");
    if (f) {
        char q[32] = "";
        if (fscanf(f, "%31s %ld", q, &period) == 2 && strcmp(q, "max") != 0)
            quota = atol(q);
        fclose(f);
    } else {
        snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
        if ((f = fopen(file, "r"))) {
            if (fscanf(f, "%ld", &quota) != 1)
                quota = -1;
            fclose(f);
            char pf[1240];
            snprintf(pf, sizeof pf, "%s/cpu.cfs_period_us", dir);
            if ((f = fopen(pf, "r"))) {
                if (fscanf(f, "%ld", &period) != 1)
                    period = 0;
                fclose(f);
            }
        }
    }
    if (quota <= 0 || period <= 0)
        return 0;
    snprintf(where, len, "%s (%ld/%ld)", file, quota, period);
    int cpus = (int)((quota + period - 1) / period);
    return cpus < 1 ? 1 : cpus;
}

int tp_quota_cpus(const char *proc_cgroup, const char *root, char *where, size_t len)
{
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    /* the cgroup's path, and the folder its hierarchy is mounted at */
    char line[512], path[512] = "", mount[600] = "";
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *ctrl = c1 + 1;
        if (strcmp(line, "0") == 0 && !ctrl[0] && !mount[0]) { /* v2; v1 cpu wins below */
            snprintf(path, sizeof path, "%s", c2 + 1);
            snprintf(mount, sizeof mount, "%s", root);
            char uni[600];
            snprintf(uni, sizeof uni, "%s/unified", root);
            FILE *u = fopen(strcat(uni, "/cgroup.controllers"), "r");
            if (u) { /* hybrid layout: v2 mounted at unified/ */
                fclose(u);
                snprintf(mount, sizeof mount, "%s/unified", root);
            }
        } else if (strcmp(ctrl, "cpu") == 0 || strcmp(ctrl, "cpu,cpuacct") == 0 ||
                   strcmp(ctrl, "cpuacct,cpu") == 0) {
            snprintf(path, sizeof path, "%s", c2 + 1);
            snprintf(mount, sizeof mount, "%s/%s", root, ctrl);
        }
    }
    fclose(f);
    if (!path[0])
        return 0;
    int best = 0;
    for (;;) {
        char dir[1200], w[1300];
        snprintf(dir, sizeof dir, "%s%s", mount, strcmp(path, "/") == 0 ? "" : path);
        int q = dir_quota(dir, w, sizeof w);
        if (q > 0 && (!best || q < best)) {
            best = q;
            snprintf(where, len, "%s", w);
        }
        char *slash = strrchr(path, '/');
        if (!slash || strcmp(path, "/") == 0)
            break;
        if (slash == path)
            path[1] = 0;
        else
            *slash = 0;
    }
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
