/*
 * threadpool.c — a persistent pool of workers on Linux futexes (see
 * threadpool.h). A job is posted by writing its description, then a new
 * claim word (generation << 32 | next task) and the generation; threads
 * take tasks by compare-and-swap on the claim word, so a worker that wakes
 * late for an old generation can never take a task of the new one.
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

struct tp_pool {
    int n_threads;
    pthread_t *workers;
    int n_started;
    /* the job */
    _Atomic(tp_task_fn) fn;
    _Atomic(void *) ctx;
    atomic_int n_tasks;
    _Atomic uint64_t claim;    /* generation << 32 | next task */
    atomic_int finished;       /* tasks of the current job done */
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

/* Takes and runs tasks of generation g until none is left. */
static void work(tp_pool *p, uint32_t g)
{
    for (;;) {
        uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
        TEST_HOOK(TP_HOOK_CLAIM_READ, g, w);
        if ((uint32_t)(w >> 32) != g)
            return;
        int task = (int)(uint32_t)w;
        /* acquire: a count from a newer job comes with that job's closed claim
         * word (tp_run), so the compare-and-swap below then fails */
        int n = atomic_load_explicit(&p->n_tasks, memory_order_acquire);
        if (task >= n)
            return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        /* the claim succeeded for generation g: the job is g's until every
         * task of it, this one included, is finished */
        tp_task_fn fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&p->ctx, memory_order_relaxed);
        fn(ctx, task);
        if (atomic_fetch_add(&p->finished, 1) + 1 == n && atomic_load(&p->caller_waiting)) {
            atomic_store(&p->done_gen, g);
            futex_wake(&p->done_gen, 1);
        }
    }
}

static void *worker_main(void *arg)
{
    tp_pool *p = arg;
    uint32_t seen = 0;
    for (;;) {
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
        work(p, g);
    }
}

int tp_create(int n_threads, tp_pool **out, char *err, size_t errlen)
{
    *out = NULL;
    if (n_threads < 1)
        n_threads = 1;
    tp_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->workers = calloc((size_t)n_threads, sizeof *p->workers))) {
        free(p);
        snprintf(err, errlen, "out of memory for the thread pool");
        return -1;
    }
    p->n_threads = n_threads;
    for (int i = 0; i < n_threads - 1; i++) {
        int rc = pthread_create(&p->workers[i], NULL, worker_main, p);
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
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    free(p);
}

int tp_threads(const tp_pool *p) { return p ? p->n_threads : 1; }

void tp_run(tp_pool *p, int n_tasks, tp_task_fn fn, void *ctx)
{
    if (n_tasks <= 0)
        return;
    if (!p || p->n_threads == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++)
            fn(ctx, t);
        return;
    }
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
    TEST_HOOK(TP_HOOK_JOB_POSTED, g, (uint64_t)g << 32);
    atomic_store_explicit(&p->claim, (uint64_t)g << 32, memory_order_release);
    atomic_store(&p->gen, g);
    if (atomic_load(&p->sleepers) > 0)
        futex_wake(&p->gen, INT_MAX);
    work(p, g);
    /* the tasks still running on workers: spin, then sleep until the last
     * one is finished */
    long t0 = now_ns();
    for (int i = 1; atomic_load_explicit(&p->finished, memory_order_acquire) < n_tasks; i++) {
        cpu_relax();
        if ((i & 63) == 0 && now_ns() - t0 > SPIN_NS)
            break;
    }
    if (atomic_load(&p->finished) < n_tasks) {
        uint32_t d = atomic_load(&p->done_gen);
        atomic_store(&p->caller_waiting, 1);
        while (atomic_load(&p->finished) < n_tasks)
            futex_wait(&p->done_gen, d);
        atomic_store(&p->caller_waiting, 0);
    }
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
