/*
 * cgroup.c — the process's cgroup, read once for every module: which
 * cgroup /proc/self/cgroup puts it in for a controller, where that
 * hierarchy is mounted, the walk from it up to the hierarchy's root, and a
 * controller file's value ("max" read as no number). Every path comes from
 * the caller, so tests point it at a fake tree.
 */
#include "base.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The cgroup path, without the trailing '/' (the root is ""). */
static void take_path(mhla_cgroup *cg, int version, const char *path)
{
    cg->version = version;
    snprintf(cg->path, sizeof cg->path, "%s", path);
    size_t n = strlen(cg->path);
    while (n > 0 && cg->path[n - 1] == '/')
        cg->path[--n] = 0;
}

/* v2 is mounted at mounts, or at mounts/unified on a hybrid layout. */
static void v2_mount(mhla_cgroup *cg, const char *mounts)
{
    char probe[sizeof cg->mount + 32];
    snprintf(probe, sizeof probe, "%s/unified/cgroup.controllers", mounts);
    if (is_file(probe))
        snprintf(cg->mount, sizeof cg->mount, "%s/unified", mounts);
    else
        snprintf(cg->mount, sizeof cg->mount, "%s", mounts);
}

/* A v1 hierarchy is mounted at mounts/CONTROLLERS as the line lists them
 * (cpu,cpuacct), else at mounts/CONTROLLER (its link). */
static void v1_mount(mhla_cgroup *cg, const char *mounts, const char *listed,
                     const char *controller)
{
    snprintf(cg->mount, sizeof cg->mount, "%s/%s", mounts, listed);
    if (!is_dir(cg->mount))
        snprintf(cg->mount, sizeof cg->mount, "%s/%s", mounts, controller);
}

int mhla_cgroup_find(const char *proc_cgroup, const char *mounts, const char *controller,
                     mhla_cgroup *cg)
{
    memset(cg, 0, sizeof *cg);
    FILE *f = fopen(proc_cgroup, "r");
    if (!f)
        return 0;
    char line[1024], want[80], listed[300];
    snprintf(want, sizeof want, ",%s,", controller);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c1 = *c2 = 0;
        const char *ctrls = c1 + 1, *path = c2 + 1;
        snprintf(listed, sizeof listed, ",%s,", ctrls);
        if (strcmp(line, "0") == 0 && !ctrls[0]) {
            if (cg->version == 0) { /* v2, unless a v1 line names the controller */
                take_path(cg, 2, path);
                v2_mount(cg, mounts);
            }
        } else if (strstr(listed, want)) {
            take_path(cg, 1, path);
            v1_mount(cg, mounts, ctrls, controller);
        }
    }
    fclose(f);
    return cg->version;
}

void mhla_cgroup_dir(const mhla_cgroup *cg, char *dir, size_t len)
{
    snprintf(dir, len, "%s%s", cg->mount, cg->path);
}

int mhla_cgroup_up(mhla_cgroup *cg)
{
    if (!cg->path[0])
        return 0;
    char *slash = strrchr(cg->path, '/');
    *(slash ? slash : cg->path) = 0;
    return 1;
}

int mhla_cgroup_read(const char *dir, const char *file, uint64_t *v, uint64_t *second)
{
    char path[1400];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[128] = {0};
    int got = fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9';
    fclose(f);
    if (second)
        *second = 0;
    if (!got)
        return -1;
    char *end;
    *v = (uint64_t)strtoull(buf, &end, 10);
    if (second && (*end == ' ' || *end == '\t'))
        *second = (uint64_t)strtoull(end, NULL, 10);
    return 1;
}
