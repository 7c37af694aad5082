/*
 * test_memory_probe.c — --state-memory auto's limit read from fake /proc and
 * /sys trees: cgroup v2 with a memory.max and with "max", cgroup v1 with a
 * limit and unlimited, nested v1 limits (the smallest binding one wins, an
 * ancestor without use_hierarchy does not bind), a hybrid machine (v1's
 * memory line wins over the unified one), a v1 container that sees its own
 * cgroup as the mount's root, and missing files (MemAvailable, or nothing).
 */
#include "check.h"
#include "server_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define V1_NO_LIMIT "9223372036854771712"

static char base[256];

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(2);
}
static int tree;

/* <base>/<n>/<path> with the text, its folders made; the root is returned. */
static const char *root_of(int n)
{
    static char r[300];
    snprintf(r, sizeof r, "%s/%d", base, n);
    return r;
}

static void put(const char *rel, const char *fmt, ...)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", root_of(tree), rel);
    for (char *p = path + strlen(base) + 1; (p = strchr(p, '/')); p++) {
        *p = 0;
        if (mkdir(path, 0700) && errno != EEXIST)
            die("mkdir %s: %s", path, strerror(errno));
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s", path);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

static void meminfo(size_t avail_mib)
{
    put("proc/meminfo", "MemTotal:       24684092 kB\nMemFree:  1000 kB\nMemAvailable: %zu kB\n",
        avail_mib * 1024);
}

/* A v1 memory cgroup folder under /sys/fs/cgroup/memory. */
static void v1(const char *dir, const char *limit, size_t usage_mib, int hierarchy)
{
    char rel[512];
    snprintf(rel, sizeof rel, "sys/fs/cgroup/memory%s/memory.limit_in_bytes", dir);
    put(rel, "%s\n", limit);
    snprintf(rel, sizeof rel, "sys/fs/cgroup/memory%s/memory.usage_in_bytes", dir);
    put(rel, "%zu\n", usage_mib * MIB);
    snprintf(rel, sizeof rel, "sys/fs/cgroup/memory%s/memory.use_hierarchy", dir);
    put(rel, "%d\n", hierarchy);
}

static void v2(const char *dir, const char *max, size_t current_mib)
{
    char rel[512];
    snprintf(rel, sizeof rel, "sys/fs/cgroup%s/memory.max", dir);
    put(rel, "%s\n", max);
    snprintf(rel, sizeof rel, "sys/fs/cgroup%s/memory.current", dir);
    put(rel, "%zu\n", current_mib * MIB);
}

static const char *mib(size_t n)
{
    static char s[4][32];
    static int i;
    i = (i + 1) % 4;
    snprintf(s[i], sizeof s[i], "%zu", n * MIB);
    return s[i];
}

static srv_memory_plan probe(void)
{
    srv_memory_plan m;
    srv_memory_probe_at(&m, root_of(tree));
    return m;
}

static const char *V1_FROM = "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes";
static const char *V2_FROM = "cgroup memory.max - memory.current";

int main(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(base, sizeof base, "%s/mhla-memprobe-XXXXXX", tmp);
    if (!mkdtemp(base))
        die("mkdtemp %s: %s", base, strerror(errno));

    /* v2 with a memory.max: max - current */
    tree = 1;
    meminfo(20000);
    put("proc/self/cgroup", "0::/system.slice/mhla.service\n");
    v2("/system.slice/mhla.service", mib(4096), 96);
    v2("/system.slice", "max", 500);
    srv_memory_plan m = probe();
    CHECK(m.limit == 4000 * MIB && strcmp(m.limit_from, V2_FROM) == 0 && m.cgroup_version == 2 &&
              m.cgroup_max == 4096 * MIB &&
              strcmp(m.cgroup_path, "/system.slice/mhla.service") == 0,
          "v2 memory.max: limit %zu MiB from %s (%s)", m.limit / MIB, m.limit_from, m.cgroup_path);

    /* v2 "max" everywhere: MemAvailable */
    tree = 2;
    meminfo(20000);
    put("proc/self/cgroup", "0::/user.slice\n");
    v2("/user.slice", "max", 96);
    m = probe();
    CHECK(m.limit == 20000 * MIB && strcmp(m.limit_from, "MemAvailable") == 0 && !m.cgroup_max,
          "v2 max: MemAvailable, got %zu MiB from %s", m.limit / MIB, m.limit_from);

    /* v2: an ancestor's smaller room binds */
    tree = 3;
    meminfo(20000);
    put("proc/self/cgroup", "0::/kubepods/pod1/ctr\n");
    v2("/kubepods/pod1/ctr", mib(8192), 100);
    v2("/kubepods/pod1", mib(6144), 1144);
    v2("/kubepods", "max", 3000);
    m = probe();
    CHECK(m.limit == 5000 * MIB && m.cgroup_max == 6144 * MIB &&
              strcmp(m.cgroup_path, "/kubepods/pod1") == 0,
          "v2 nested: the pod's 6144 - 1144 binds, got %zu MiB at %s", m.limit / MIB,
          m.cgroup_path);

    /* v1 with a limit, on a hybrid machine (the unified line names no memory) */
    tree = 4;
    meminfo(20000);
    put("proc/self/cgroup", "9:name=systemd:/\n4:memory:/process_api/abc/soak\n3:cpuset:/\n0::/\n");
    v1("/process_api/abc/soak", mib(8192), 2, 1);
    v1("/process_api/abc", V1_NO_LIMIT, 3, 1);
    v1("/process_api", V1_NO_LIMIT, 5000, 1);
    v1("", V1_NO_LIMIT, 5000, 1);
    m = probe();
    CHECK(m.limit == 8190 * MIB && strcmp(m.limit_from, V1_FROM) == 0 && m.cgroup_version == 1 &&
              m.cgroup_max == 8192 * MIB && strcmp(m.cgroup_path, "/process_api/abc/soak") == 0,
          "v1 limit: got %zu MiB from %s (%s)", m.limit / MIB, m.limit_from, m.cgroup_path);

    /* v1 unlimited along the whole path: MemAvailable */
    tree = 5;
    meminfo(21000);
    put("proc/self/cgroup", "4:memory:/process_api/abc\n0::/\n");
    v1("/process_api/abc", V1_NO_LIMIT, 3, 1);
    v1("/process_api", V1_NO_LIMIT, 5000, 1);
    v1("", V1_NO_LIMIT, 5000, 1);
    m = probe();
    CHECK(m.limit == 21000 * MIB && strcmp(m.limit_from, "MemAvailable") == 0 && !m.cgroup_max,
          "v1 unlimited: MemAvailable, got %zu MiB from %s", m.limit / MIB, m.limit_from);

    /* v1 nested: the smallest room along the path, controllers comma-joined */
    tree = 6;
    meminfo(21000);
    put("proc/self/cgroup", "7:memory,hugetlb:/a/b/c\n");
    v1("/a/b/c", mib(8192), 100, 1);
    v1("/a/b", mib(3072), 72, 1);
    v1("/a", mib(16384), 9000, 1);
    m = probe();
    CHECK(m.limit == 3000 * MIB && m.cgroup_max == 3072 * MIB && strcmp(m.cgroup_path, "/a/b") == 0,
          "v1 nested: /a/b's 3072 - 72 binds, got %zu MiB at %s", m.limit / MIB, m.cgroup_path);

    /* v1: an ancestor with use_hierarchy 0 does not account its children */
    tree = 7;
    meminfo(21000);
    put("proc/self/cgroup", "4:memory:/a/b\n");
    v1("/a/b", mib(8192), 100, 1);
    v1("/a", mib(1024), 10, 0);
    m = probe();
    CHECK(m.limit == 8092 * MIB && strcmp(m.cgroup_path, "/a/b") == 0,
          "v1 use_hierarchy 0: /a does not bind, got %zu MiB at %s", m.limit / MIB, m.cgroup_path);

    /* v1 in a container without a cgroup namespace: its cgroup is the mount's root */
    tree = 8;
    meminfo(21000);
    put("proc/self/cgroup", "4:memory:/docker/0123abcd\n");
    v1("", mib(2048), 48, 1);
    m = probe();
    CHECK(m.limit == 2000 * MIB && strcmp(m.limit_from, V1_FROM) == 0 &&
              strcmp(m.cgroup_path, "/") == 0,
          "v1 container root: got %zu MiB from %s at %s", m.limit / MIB, m.limit_from,
          m.cgroup_path);

    /* a cgroup limit above MemAvailable: MemAvailable is the smaller */
    tree = 9;
    meminfo(1500);
    put("proc/self/cgroup", "4:memory:/big\n");
    v1("/big", mib(8192), 0, 1);
    m = probe();
    CHECK(m.limit == 1500 * MIB && strcmp(m.limit_from, "MemAvailable") == 0,
          "limit above MemAvailable: got %zu MiB from %s", m.limit / MIB, m.limit_from);

    /* no cgroup files at all: MemAvailable */
    tree = 10;
    meminfo(12345);
    put("proc/self/cgroup", "4:memory:/gone\n0::/\n");
    m = probe();
    CHECK(m.limit == 12345 * MIB && strcmp(m.limit_from, "MemAvailable") == 0,
          "missing cgroup files: MemAvailable, got %zu MiB from %s", m.limit / MIB, m.limit_from);

    /* nothing readable: no limit (the budget then refuses with a message) */
    tree = 11;
    put("proc/version", "fake\n");
    m = probe();
    CHECK(m.limit == 0, "nothing readable: no limit, got %zu MiB", m.limit / MIB);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", base);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("memory probe: 11 trees ok\n");
    return failures ? 1 : 0;
}
