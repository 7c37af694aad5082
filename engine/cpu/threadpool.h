/*
 * threadpool.h — the engine's worker threads.
 *
 * A job is a fixed list of tasks [0, n_tasks): the caller decides how the
 * work is cut, the same way on every run, and each task's arithmetic does
 * not depend on which thread runs it — so results are the same bits for
 * any number of threads. The caller's thread works on the job too; tasks
 * are handed out one at a time to whichever thread is running, so a worker
 * that the OS has descheduled (a busy machine, a CPU quota) delays at most
 * the one task it holds. Idle workers spin briefly, then sleep on a futex.
 * Where the threads together stop being faster than the caller alone (a
 * machine whose cores other processes take), fewer of them take part, and
 * more again once they pay (threadpool.c); the tasks stay the same.
 */
#ifndef MHLA_CPU_THREADPOOL_H
#define MHLA_CPU_THREADPOOL_H

#include <stddef.h>

typedef struct tp_pool tp_pool;
typedef void (*tp_task_fn)(void *ctx, int task);

/* A pool of n_threads threads in all, the caller's included (n_threads - 1
 * workers are started). -1 with a message in err on failure. */
int tp_create(int n_threads, tp_pool **out, char *err, size_t errlen);
void tp_free(tp_pool *pool);
int tp_threads(const tp_pool *pool);

/* A buffer of at least bytes for the pool's caller to use between and
 * during its jobs (the q8 products' quantized rows), grown here and kept
 * until tp_free: a caller that asks for the most it will need before it
 * starts a step (the CPU forward pass does) gets it during the step without
 * an allocation that could fail half-way. NULL when out of memory or with
 * no pool. Slots keep buffers that are in use at once apart. */
enum { TP_SCRATCH_SLOTS = 2 };
void *tp_scratch(tp_pool *pool, int slot, size_t bytes);

/* Runs fn(ctx, task) for every task in [0, n_tasks) and returns when all
 * are done. One job at a time per pool (the engine's forward thread). A
 * NULL pool, one thread or one task runs everything on the caller. */
void tp_run(tp_pool *pool, int n_tasks, tp_task_fn fn, void *ctx);

/* tp_run for jobs whose tasks are loops that take work of their own (one a
 * thread, sharing counters): a task's time says nothing of the work in it,
 * so the adaptation does not count such a job. Every task must finish when
 * run alone, one after the other, on the caller. */
void tp_run_loops(tp_pool *pool, int n_tasks, tp_task_fn fn, void *ctx);

/* tp_run with every thread of the pool taking part, whatever the
 * adaptation has set, and not counted by it: for measurements of the
 * machine (the memory bandwidth), which must not depend on it. */
void tp_run_all(tp_pool *pool, int n_tasks, tp_task_fn fn, void *ctx);

/* Whether the number of threads that take part adapts (on by default);
 * off, every thread takes part in every job. */
void tp_set_adaptive(tp_pool *pool, int on);

typedef struct {
    int threads;     /* of the pool, the caller's included */
    int active;      /* taking part now */
    long reductions; /* times the pool has reduced the threads that take part */
} tp_stats;
void tp_get_stats(const tp_pool *pool, tp_stats *out);

/* The number of CPUs this process may use: the CPUs of its affinity mask,
 * capped by the cgroup v2 cpu.max quota of its cgroup and the cgroups above
 * it (rounded up). `why` gets how the number was found. */
int tp_default_threads(char *why, size_t len);

/* The CPU quota of the cgroup that proc_cgroup (/proc/self/cgroup) names,
 * under root (/sys/fs/cgroup): the lowest of its and its ancestors' cgroup
 * v2 cpu.max (or v1 cpu.cfs_quota_us) in CPUs, rounded up; 0 without a
 * quota. `where` gets the file that sets it. */
int tp_quota_cpus(const char *proc_cgroup, const char *root, char *where, size_t len);

#ifdef MHLA_TP_TEST_HOOKS
#include <stdint.h>
/* Test builds only (tests/engine/test_threadpool.c compiles its own copy of
 * the pool with MHLA_TP_TEST_HOOKS): the points where a thread may be held
 * to open the pool's race windows on purpose. TP_HOOK_CLAIM_READ: in a
 * thread working for generation `gen`, just after it loaded the claim word
 * `claim` (before its generation is checked and the task count is read).
 * TP_HOOK_JOB_POSTED: in tp_run, once job `gen`'s description is written,
 * just before its claim word opens (`claim`: the word about to be stored).
 * Normal builds have neither the points nor the symbol. */
enum tp_hook_point { TP_HOOK_CLAIM_READ, TP_HOOK_JOB_POSTED };
extern void (*tp_test_hook)(enum tp_hook_point at, uint32_t gen, uint64_t claim);
#endif

#endif
