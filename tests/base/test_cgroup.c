/* base's cgroup reader over fake trees: v2 (the unified line, "max", a
 * "QUOTA PERIOD" pair, the walk up to the root), a hybrid layout (v2 under
 * unified/), a v1 controller that wins over the unified line and is mounted
 * under its joined name or, failing that, its own, and missing files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "check.h"

static char work[512];

/* <work>/<rel> with text, its folders made. */
static void put(const char *rel, const char *text)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", work, rel);
    for (char *p = path + strlen(work) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        if (mkdir(path, 0700) && errno != EEXIST)
            die("mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f))
        die("cannot write %s", path);
}

static int find(const char *tree, const char *controller, mhla_cgroup *cg)
{
    char file[700], mounts[700];
    snprintf(file, sizeof file, "%s/%s/cgroup", work, tree);
    snprintf(mounts, sizeof mounts, "%s/%s/fs", work, tree);
    return mhla_cgroup_find(file, mounts, controller, cg);
}

/* The folder of cg relative to the tree's mounts. */
static const char *rel_dir(const char *tree, const mhla_cgroup *cg)
{
    static char dir[1300];
    char mounts[700];
    mhla_cgroup_dir(cg, dir, sizeof dir);
    snprintf(mounts, sizeof mounts, "%s/%s/fs", work, tree);
    return strncmp(dir, mounts, strlen(mounts)) == 0 ? dir + strlen(mounts) : dir;
}

static void test_v2(void)
{
    put("v2/cgroup", "0::/a/b/\n");
    put("v2/fs/a/b/cpu.max", "max 100000\n");
    put("v2/fs/a/cpu.max", "150000 100000\n");
    put("v2/fs/a/memory.max", "1073741824\n");
    mhla_cgroup cg;
    CHECK(find("v2", "cpu", &cg) == 2 && strcmp(cg.path, "/a/b") == 0, "v2: version %d, path '%s'",
          cg.version, cg.path);
    CHECK(strcmp(rel_dir("v2", &cg), "/a/b") == 0, "v2 folder: %s", rel_dir("v2", &cg));
    char dir[1300];
    mhla_cgroup_dir(&cg, dir, sizeof dir);
    uint64_t v = 7, p = 7;
    CHECK(mhla_cgroup_read(dir, "cpu.max", &v, &p) == -1 && v == 7, "\"max\": no number");
    CHECK(mhla_cgroup_read(dir, "memory.max", &v, NULL) == 0, "an absent file");
    CHECK(mhla_cgroup_up(&cg) == 1 && strcmp(cg.path, "/a") == 0, "up to '%s'", cg.path);
    mhla_cgroup_dir(&cg, dir, sizeof dir);
    CHECK(mhla_cgroup_read(dir, "cpu.max", &v, &p) == 1 && v == 150000 && p == 100000,
          "cpu.max: %llu %llu", (unsigned long long)v, (unsigned long long)p);
    CHECK(mhla_cgroup_read(dir, "memory.max", &v, &p) == 1 && v == 1073741824 && p == 0,
          "memory.max: %llu, second %llu", (unsigned long long)v, (unsigned long long)p);
    CHECK(mhla_cgroup_up(&cg) == 1 && cg.path[0] == 0, "up to the root: '%s'", cg.path);
    CHECK(strcmp(rel_dir("v2", &cg), "") == 0, "the root's folder: %s", rel_dir("v2", &cg));
    CHECK(mhla_cgroup_up(&cg) == 0, "nothing above the root");
}

static void test_hybrid_and_v1(void)
{
    mhla_cgroup cg;
    /* hybrid: v2 mounted at unified/, cpu,cpuacct and memory,hugetlb v1 */
    put("hy/cgroup", "0::/u\n5:memory,hugetlb:/m\n3:cpu,cpuacct:/job\n");
    put("hy/fs/unified/cgroup.controllers", "\n");
    put("hy/fs/cpu,cpuacct/job/cpu.cfs_quota_us", "-1\n");
    put("hy/fs/memory/m/memory.limit_in_bytes", "9223372036854771712\n");
    CHECK(find("hy", "cpu", &cg) == 1 && strcmp(cg.path, "/job") == 0, "v1 cpu: v%d '%s'",
          cg.version, cg.path);
    CHECK(strcmp(rel_dir("hy", &cg), "/cpu,cpuacct/job") == 0, "v1 cpu folder: %s",
          rel_dir("hy", &cg));
    char dir[1300];
    uint64_t v = 7;
    mhla_cgroup_dir(&cg, dir, sizeof dir);
    CHECK(mhla_cgroup_read(dir, "cpu.cfs_quota_us", &v, NULL) == -1 && v == 7, "-1: no number");
    CHECK(find("hy", "memory", &cg) == 1 && strcmp(rel_dir("hy", &cg), "/memory/m") == 0,
          "v1 memory,hugetlb at memory/: %s", rel_dir("hy", &cg));
    mhla_cgroup_dir(&cg, dir, sizeof dir);
    CHECK(mhla_cgroup_read(dir, "memory.limit_in_bytes", &v, NULL) == 1 &&
              v == 9223372036854771712ull,
          "v1 no-limit value: %llu", (unsigned long long)v);
    CHECK(find("hy", "pids", &cg) == 2 && strcmp(rel_dir("hy", &cg), "/unified/u") == 0,
          "v2 of a hybrid layout: %s", rel_dir("hy", &cg));
    CHECK(find("none", "cpu", &cg) == 0 && cg.version == 0, "no cgroup file: none");
}

int main(int argc, char **argv)
{
    if (argc != 2)
        die("usage: test_cgroup WORK_DIR");
    snprintf(work, sizeof work, "%s", argv[1]);
    test_v2();
    test_hybrid_and_v1();
    if (failures)
        return 1;
    printf("base.cgroup: OK\n");
    return 0;
}
