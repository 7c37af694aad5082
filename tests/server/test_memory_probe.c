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

#define UNLIMITED (-1L) /* a cgroup folder's limit: v2 "max", v1 V1_NO_LIMIT */

/* One memory cgroup folder of a fake tree. */
typedef struct {
    int version;       /* 1: under /sys/fs/cgroup/memory, 2: under /sys/fs/cgroup */
    const char *dir;   /* "" is the mount's root */
    long limit_mib;    /* or UNLIMITED */
    size_t usage_mib;  /* memory.usage_in_bytes (v1), memory.current (v2) */
    int use_hierarchy; /* v1's memory.use_hierarchy */
} cgroup_dir;

/* A fake /proc + /sys tree and what the probe must read from it. */
typedef struct {
    const char *what;
    size_t avail_mib;        /* /proc/meminfo's MemAvailable; 0: no /proc/meminfo */
    const char *self_cgroup; /* /proc/self/cgroup; NULL: none */
    cgroup_dir dirs[4];      /* up to the first one without a dir */
    struct {
        size_t limit_mib; /* always checked */
        const char *from; /* the other fields: NULL / 0 are not checked */
        int version;
        size_t max_mib;
        int no_cgroup_max; /* no cgroup limit binds: cgroup_max 0 */
        const char *path;
    } want;
} probe_case;

#define V1_FROM "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes"
#define V2_FROM "cgroup memory.max - memory.current"

static const probe_case CASES[] = {
    {.what = "v2 with a memory.max: max - current",
     .avail_mib = 20000,
     .self_cgroup = "0::/system.slice/mhla.service\n",
     .dirs = {{2, "/system.slice/mhla.service", 4096, 96}, {2, "/system.slice", UNLIMITED, 500}},
     .want = {.limit_mib = 4000,
              .from = V2_FROM,
              .version = 2,
              .max_mib = 4096,
              .path = "/system.slice/mhla.service"}},
    {.what = "v2 \"max\" everywhere: MemAvailable",
     .avail_mib = 20000,
     .self_cgroup = "0::/user.slice\n",
     .dirs = {{2, "/user.slice", UNLIMITED, 96}},
     .want = {.limit_mib = 20000, .from = "MemAvailable", .no_cgroup_max = 1}},
    {.what = "v2 nested: an ancestor's smaller room (the pod's 6144 - 1144) binds",
     .avail_mib = 20000,
     .self_cgroup = "0::/kubepods/pod1/ctr\n",
     .dirs = {{2, "/kubepods/pod1/ctr", 8192, 100},
              {2, "/kubepods/pod1", 6144, 1144},
              {2, "/kubepods", UNLIMITED, 3000}},
     .want = {.limit_mib = 5000, .max_mib = 6144, .path = "/kubepods/pod1"}},
    {.what = "v1 with a limit, on a hybrid machine (the unified line names no memory)",
     .avail_mib = 20000,
     .self_cgroup = "9:name=systemd:/\n4:memory:/process_api/abc/soak\n3:cpuset:/\n0::/\n",
     .dirs = {{1, "/process_api/abc/soak", 8192, 2, 1},
              {1, "/process_api/abc", UNLIMITED, 3, 1},
              {1, "/process_api", UNLIMITED, 5000, 1},
              {1, "", UNLIMITED, 5000, 1}},
     .want = {.limit_mib = 8190,
              .from = V1_FROM,
              .version = 1,
              .max_mib = 8192,
              .path = "/process_api/abc/soak"}},
    {.what = "v1 unlimited along the whole path: MemAvailable",
     .avail_mib = 21000,
     .self_cgroup = "4:memory:/process_api/abc\n0::/\n",
     .dirs = {{1, "/process_api/abc", UNLIMITED, 3, 1},
              {1, "/process_api", UNLIMITED, 5000, 1},
              {1, "", UNLIMITED, 5000, 1}},
     .want = {.limit_mib = 21000, .from = "MemAvailable", .no_cgroup_max = 1}},
    {.what = "v1 nested, controllers comma-joined: the smallest room (/a/b's 3072 - 72) binds",
     .avail_mib = 21000,
     .self_cgroup = "7:memory,hugetlb:/a/b/c\n",
     .dirs = {{1, "/a/b/c", 8192, 100, 1}, {1, "/a/b", 3072, 72, 1}, {1, "/a", 16384, 9000, 1}},
     .want = {.limit_mib = 3000, .max_mib = 3072, .path = "/a/b"}},
    {.what = "v1: an ancestor with use_hierarchy 0 (/a) does not account its children",
     .avail_mib = 21000,
     .self_cgroup = "4:memory:/a/b\n",
     .dirs = {{1, "/a/b", 8192, 100, 1}, {1, "/a", 1024, 10, 0}},
     .want = {.limit_mib = 8092, .path = "/a/b"}},
    {.what = "v1 in a container without a cgroup namespace: its cgroup is the mount's root",
     .avail_mib = 21000,
     .self_cgroup = "4:memory:/docker/0123abcd\n",
     .dirs = {{1, "", 2048, 48, 1}},
     .want = {.limit_mib = 2000, .from = V1_FROM, .path = "/"}},
    {.what = "a cgroup limit above MemAvailable: MemAvailable is the smaller",
     .avail_mib = 1500,
     .self_cgroup = "4:memory:/big\n",
     .dirs = {{1, "/big", 8192, 0, 1}},
     .want = {.limit_mib = 1500, .from = "MemAvailable"}},
    {.what = "no cgroup files at all: MemAvailable",
     .avail_mib = 12345,
     .self_cgroup = "4:memory:/gone\n0::/\n",
     .want = {.limit_mib = 12345, .from = "MemAvailable"}},
    {.what = "nothing readable: no limit (the budget then refuses with a message)",
     .want = {.limit_mib = 0}},
};

/* Writes case c's tree under <base>/<tree>. */
static void write_tree(const probe_case *c)
{
    if (c->avail_mib)
        meminfo(c->avail_mib);
    if (c->self_cgroup)
        put("proc/self/cgroup", "%s", c->self_cgroup);
    else if (!c->avail_mib)
        put("proc/version", "fake\n"); /* the tree exists, with nothing the probe reads */
    for (const cgroup_dir *d = c->dirs; d < c->dirs + 4 && d->dir; d++) {
        char limit[32];
        if (d->limit_mib == UNLIMITED)
            snprintf(limit, sizeof limit, "%s", d->version == 1 ? V1_NO_LIMIT : "max");
        else
            snprintf(limit, sizeof limit, "%zu", (size_t)d->limit_mib * MIB);
        if (d->version == 1)
            v1(d->dir, limit, d->usage_mib, d->use_hierarchy);
        else
            v2(d->dir, limit, d->usage_mib);
    }
}

static void check_case(const probe_case *c)
{
    srv_memory_plan m;
    srv_memory_probe_at(&m, root_of(tree));
    int ok = m.limit == c->want.limit_mib * MIB &&
             (!c->want.from || strcmp(m.limit_from, c->want.from) == 0) &&
             (!c->want.version || m.cgroup_version == c->want.version) &&
             (!c->want.max_mib || m.cgroup_max == c->want.max_mib * MIB) &&
             (!c->want.no_cgroup_max || m.cgroup_max == 0) &&
             (!c->want.path || strcmp(m.cgroup_path, c->want.path) == 0);
    CHECK(ok,
          "tree %d, %s: limit %zu MiB from %s, cgroup v%d max %zu MiB at '%s'; want %zu MiB "
          "from %s, v%d, max %zu MiB%s, at %s (null / 0: any)",
          tree, c->what, m.limit / MIB, m.limit_from ? m.limit_from : "(null)", m.cgroup_version,
          m.cgroup_max / MIB, m.cgroup_path, c->want.limit_mib,
          c->want.from ? c->want.from : "(null)", c->want.version, c->want.max_mib,
          c->want.no_cgroup_max ? " (none binds)" : "", c->want.path ? c->want.path : "(null)");
}

int main(void)
{
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(base, sizeof base, "%s/mhla-memprobe-XXXXXX", tmp);
    if (!mkdtemp(base))
        die("mkdtemp %s: %s", base, strerror(errno));
    int n = (int)(sizeof CASES / sizeof CASES[0]);
    for (int i = 0; i < n; i++) {
        tree = i + 1;
        write_tree(&CASES[i]);
        check_case(&CASES[i]);
    }

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", base);
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        printf("memory probe: %d trees ok\n", n);
    return failures ? 1 : 0;
}
