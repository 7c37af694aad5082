/*
 * The engine's thread pool: every task of every job runs exactly once, for
 * 1 to 4 threads and jobs of 1 to 97 tasks, thousands of jobs in a row (a
 * worker that wakes late must never take a task of the next job); and the
 * default thread count reads the cgroup CPU quota (v2 cpu.max along the
 * cgroup's path, v1 cpu.cfs_quota_us) from a fake cgroup tree.
 *
 * usage: test_threadpool WORK_DIR
 */
#include "cpu/threadpool.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int failures;
#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL: " __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                                 \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct {
    atomic_int runs[128];
    int job;
    atomic_int wrong_job;
    const int *current_job;
} counter;

static void count_task(void *ctx, int task)
{
    counter *c = ctx;
    atomic_fetch_add(&c->runs[task], 1);
    if (*c->current_job != c->job)
        atomic_fetch_add(&c->wrong_job, 1);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f)) {
        fprintf(stderr, "FAIL: cannot write %s\n", path);
        exit(1);
    }
}

static void mkdirs(const char *path)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            mkdir(p, 0755);
            *s = '/';
        }
    mkdir(p, 0755);
}

static void check_quota(const char *work)
{
    char root[512], dir[1024], file[1100], where[1300];
    /* v2: a 1.5-CPU quota two levels up, none at the leaf */
    snprintf(root, sizeof root, "%s/v2", work);
    snprintf(dir, sizeof dir, "%s/a/b/c", root);
    mkdirs(dir);
    snprintf(file, sizeof file, "%s/a/cpu.max", root);
    write_file(file, "150000 100000\n");
    snprintf(file, sizeof file, "%s/a/b/c/cpu.max", root);
    write_file(file, "max 100000\n");
    snprintf(file, sizeof file, "%s/cgroup", root);
    write_file(file, "0::/a/b/c\n");
    int q = tp_quota_cpus(file, root, where, sizeof where);
    CHECK(q == 2, "v2 quota 150000/100000 above the leaf: %d CPUs, want 2", q);
    CHECK(strstr(where, "/a/cpu.max") != NULL, "v2 quota found at '%s', want a/cpu.max", where);
    /* a tighter quota at the leaf wins */
    snprintf(file, sizeof file, "%s/a/b/c/cpu.max", root);
    write_file(file, "50000 100000\n");
    snprintf(file, sizeof file, "%s/cgroup", root);
    q = tp_quota_cpus(file, root, where, sizeof where);
    CHECK(q == 1, "v2 leaf quota 50000/100000: %d CPUs, want 1", q);
    /* no quota anywhere */
    snprintf(file, sizeof file, "%s/cgroup", root);
    write_file(file, "0::/a/b\n");
    snprintf(file, sizeof file, "%s/a/cpu.max", root);
    write_file(file, "max 100000\n");
    snprintf(file, sizeof file, "%s/cgroup", root);
    q = tp_quota_cpus(file, root, where, sizeof where);
    CHECK(q == 0, "no quota: %d CPUs, want 0", q);
    /* v1 (hybrid): cpu,cpuacct controller with a 3-CPU quota */
    snprintf(root, sizeof root, "%s/v1", work);
    snprintf(dir, sizeof dir, "%s/cpu,cpuacct/job", root);
    mkdirs(dir);
    snprintf(file, sizeof file, "%s/cpu.cfs_quota_us", dir);
    write_file(file, "300000\n");
    snprintf(file, sizeof file, "%s/cpu.cfs_period_us", dir);
    write_file(file, "100000\n");
    snprintf(file, sizeof file, "%s/cgroup", root);
    write_file(file, "4:memory:/x\n3:cpu,cpuacct:/job\n0::/\n");
    q = tp_quota_cpus(file, root, where, sizeof where);
    CHECK(q == 3, "v1 quota 300000/100000: %d CPUs, want 3", q);
    snprintf(file, sizeof file, "%s/missing", root);
    CHECK(tp_quota_cpus(file, root, where, sizeof where) == 0, "no /proc/self/cgroup: want 0");
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s WORK_DIR\n", argv[0]);
        return 2;
    }
    static counter c;
    for (int threads = 1; threads <= 4; threads++) {
        tp_pool *p;
        char err[200];
        if (tp_create(threads, &p, err, sizeof err)) {
            fprintf(stderr, "FAIL: tp_create(%d): %s\n", threads, err);
            return 1;
        }
        CHECK(tp_threads(p) == threads, "tp_threads %d, want %d", tp_threads(p), threads);
        int job = 0;
        c.current_job = &job;
        for (int j = 0; j < 4000; j++) {
            int n = 1 + (j * 37) % 97;
            for (int t = 0; t < n; t++)
                atomic_store(&c.runs[t], 0);
            c.job = job = j;
            tp_run(p, n, count_task, &c);
            job = -1; /* a task that runs after tp_run returned sees this */
            for (int t = 0; t < n; t++)
                if (atomic_load(&c.runs[t]) != 1) {
                    CHECK(0, "%d threads, job %d: task %d of %d ran %d times", threads, j, t, n,
                          atomic_load(&c.runs[t]));
                    break;
                }
        }
        CHECK(atomic_load(&c.wrong_job) == 0, "%d threads: %d tasks ran outside their job", threads,
              atomic_load(&c.wrong_job));
        tp_free(p);
    }
    check_quota(argv[1]);
    char why[400];
    int n = tp_default_threads(why, sizeof why);
    printf("default threads here: %s\n", why);
    CHECK(n >= 1, "default threads %d", n);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("PASS: every task ran once in 16000 jobs on 1-4 threads; cgroup quotas read\n");
    return 0;
}
