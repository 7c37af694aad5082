/*
 * state_disk.c — the server's side of the state tier on disk (--state-dir,
 * --state-disk-max; the tier itself is the engine's): the size flag, the
 * default limit, the tier's /metrics lines, and warnings when its writes
 * fail or it finds bad files (serving goes on either way).
 */
#include "server_internal.h"

#include <cJSON.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

int srv_parse_size(const char *flag, const char *v, void *base, char *err, size_t errlen)
{
    mhla_server_options *o = base;
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    double mult = 1;
    const char *units = "KMGT";
    const char *u = *end ? strchr(units, *end) : NULL;
    if (u && *end) {
        for (const char *k = units; k <= u; k++)
            mult *= 1024;
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B')
            end++;
    }
    if (end == v || *end || errno || x < 0 || x * mult > 9.0e18) {
        snprintf(err, errlen,
                 "--%s takes a size in bytes with an optional K, M, G or T (1024s), not '%.64s'",
                 flag, v);
        return -1;
    }
    o->state_disk_max = (unsigned long long)(x * mult);
    return 0;
}

uint64_t srv_state_disk_limit(const char *dir, unsigned long long asked)
{
    if (asked > 0 || !dir || !dir[0])
        return asked;
    /* half the free space of its filesystem now (the directory's, else its parent's) */
    struct statvfs sv;
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s/..", dir);
    if (statvfs(dir, &sv) && statvfs(parent, &sv))
        return 0;
    return (uint64_t)sv.f_bavail * sv.f_frsize / 2;
}

/* The engine whose tier /metrics shows: its counters move while the
 * scheduler idles (the writer runs behind), so they are read live. */
static const mhla_engine *disk_engine;

void srv_metrics_disk_engine(const mhla_engine *engine) { disk_engine = engine; }

int srv_metrics_disk_render(mhla_buf *b)
{
    if (!disk_engine)
        return 0;
    mhla_state_stats st;
    const mhla_state_stats *p = &st;
    mhla_engine_disk_stats(disk_engine, &st);
    if (!p->disk)
        return 0;
#define C_(name, help) "# HELP " name " " help "\n# TYPE " name " counter\n" name " %llu\n"
    return srv_buf_printf(
        b,
        C_("mhla_state_disk_hits_total", "State pages loaded from the disk tier.") C_(
            "mhla_state_disk_misses_total",
            "Disk tier lookups that found no valid file.") C_("mhla_state_disk_read_bytes_total",
                                                              "Bytes of page files loaded.")
            C_("mhla_state_disk_written_bytes_total",
               "Bytes of page files written.") "# HELP mhla_state_disk_load_seconds_total Time spent loading pages from disk.\n"
                                               "# TYPE mhla_state_disk_load_seconds_total counter\n"
                                               "mhla_state_disk_load_seconds_total %.6f\n" C_(
                                                   "mhla_state_disk_writes_total",
                                                   "Page files written.")
                                                   C_("mhla_state_disk_corrupt_files_total",
                                                      "Page files refused and removed: truncated, corrupt, another model or format.")
                                                       C_("mhla_state_disk_write_errors_total",
                                                          "Page writes that failed (disk full, unwritable directory).")
                                                           C_("mhla_state_disk_dropped_writes_total",
                                                              "Pages not written: the write queue was full.")
                                                               C_("mhla_state_disk_evictions_total",
                                                                  "Page files removed for --state-disk-max.") "# HELP mhla_state_disk_bytes Bytes of page files in the state directory.\n"
                                                                                                              "# TYPE mhla_state_disk_bytes gauge\nmhla_state_disk_bytes %llu\n",
        (unsigned long long)p->disk_hits, (unsigned long long)p->disk_misses,
        (unsigned long long)p->disk_bytes_read, (unsigned long long)p->disk_bytes_written,
        (double)p->disk_load_ns * 1e-9, (unsigned long long)p->disk_writes,
        (unsigned long long)p->disk_corrupt, (unsigned long long)p->disk_write_errors,
        (unsigned long long)p->disk_dropped, (unsigned long long)p->disk_evictions,
        (unsigned long long)p->disk_bytes);
#undef C_
}

/* What has been warned about; the scheduler's thread only. */
static struct {
    uint64_t write_errors, corrupt, dropped;
    time_t last;
} W;

void srv_state_disk_watch(const mhla_state_stats *st)
{
    if (!st->disk)
        return;
    time_t now = time(NULL);
    int news = st->disk_write_errors > W.write_errors || st->disk_corrupt > W.corrupt ||
               st->disk_dropped > W.dropped;
    /* the first news at once, then at most one line a minute */
    if (!news || (W.last && now - W.last < 60))
        return;
    if (st->disk_write_errors > W.write_errors)
        srv_logf(MHLA_LOG_WARN, "state_disk",
                 "%llu page writes failed in all (serving goes on, pages are recomputed): %s",
                 (unsigned long long)st->disk_write_errors, st->disk_error);
    if (st->disk_corrupt > W.corrupt)
        srv_logf(MHLA_LOG_WARN, "state_disk",
                 "%llu bad page files in all were refused, removed and recomputed",
                 (unsigned long long)st->disk_corrupt);
    if (st->disk_dropped > W.dropped)
        srv_logf(MHLA_LOG_WARN, "state_disk",
                 "%llu page writes in all dropped: the disk is slower than blocks close",
                 (unsigned long long)st->disk_dropped);
    W.write_errors = st->disk_write_errors;
    W.corrupt = st->disk_corrupt;
    W.dropped = st->disk_dropped;
    W.last = now;
}

void srv_state_disk_log_fields(cJSON *f, mhla_engine *engine, const char *dir)
{
    mhla_state_stats st;
    mhla_engine_state_stats(engine, &st);
    cJSON_AddStringToObject(f, "state_dir", dir);
    cJSON_AddNumberToObject(f, "state_dir_mb", (double)(st.disk_bytes >> 20));
    if (st.disk_error[0])
        cJSON_AddStringToObject(f, "state_dir_warning", st.disk_error);
}

void srv_state_disk_log_start(mhla_engine *engine)
{
    mhla_state_stats st;
    mhla_engine_state_stats(engine, &st);
    if (st.disk)
        srv_logf(MHLA_LOG_INFO, "loading",
                 "the state dir's fingerprint: %.1f MB of the checkpoint hashed in %.2f s",
                 (double)st.disk_fingerprint_bytes / 1e6, st.disk_fingerprint_s);
}
