/*
 * memory.c — --state-memory auto: the state pool's budget from the memory
 * this process may use. The limit is the memory cgroup's (v2 memory.max or
 * v1 memory.limit_in_bytes, the smallest along the path to the root that
 * binds the process, less what that cgroup already uses) when one is set,
 * else MemAvailable, never more than the other when both are known. From
 * it go the weights, an estimate of the engine's and the scheduler's
 * per-step buffers, and a headroom for everything else (HTTP threads,
 * response buffers, allocator slack); what stays is the state budget. The
 * per-sequence buffers outside the pages (max_running of them) and the
 * resume entries are taken from that budget before it becomes pages, so the
 * pool's admission never promises memory they need. On a GPU engine the
 * pages and the sequences' buffers live in device memory: there the limit is
 * the device's free memory, read with the weights and the engine's buffers
 * already on it, and the same arithmetic follows. The arithmetic is logged at
 * start.
 */
#include "base.h"
#include "server_internal.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define HEADROOM_FIXED (256 * MIB) /* threads, buffers, allocator slack */
#define HEADROOM_PERCENT 10        /* of the limit, on top */
#define RESUME_SLOTS 64
/* Pages beyond what max_running full-context sequences can hold only feed
 * the prefix cache; past this many times that, more is not worth the tables. */
#define CACHE_FACTOR 4

/* A "key: N kB" line of <root>/proc/meminfo, in bytes; 0 when absent. */
static size_t meminfo(const char *root, const char *key)
{
    char path[600];
    snprintf(path, sizeof path, "%s/proc/meminfo", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[256];
    size_t klen = strlen(key), v = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, klen) == 0 && line[klen] == ':')
            v = (size_t)strtoull(line + klen + 1, NULL, 10) * 1024;
    fclose(f);
    return v;
}

/* cgroup v1 writes "no limit" as LONG_MAX rounded down to a page; anything
 * this large is no limit. */
#define CGROUP_NO_LIMIT ((size_t)1 << 62)

/* The room the memory cgroup leaves: the smallest of limit - usage over the
 * process's cgroup and the ancestors whose limits bind it (all of them in v2;
 * in v1 those with memory.use_hierarchy 1). Levels without the files are
 * skipped, so a container that sees its own cgroup as the mount's root (v1
 * without a cgroup namespace) still finds its limit there. 0 when no level
 * has a limit; else m's cgroup fields name the level that binds. */
static size_t cgroup_room(const char *root, srv_memory_plan *m)
{
    char file[600], mounts[600], dir[1200];
    snprintf(file, sizeof file, "%s/proc/self/cgroup", root);
    snprintf(mounts, sizeof mounts, "%s/sys/fs/cgroup", root);
    mhla_cgroup cg;
    int version = mhla_cgroup_find(file, mounts, "memory", &cg);
    if (!version)
        return 0;
    const char *lim_name = version == 1 ? "memory.limit_in_bytes" : "memory.max";
    const char *use_name = version == 1 ? "memory.usage_in_bytes" : "memory.current";
    size_t room = 0;
    int first = 1;
    do {
        mhla_cgroup_dir(&cg, dir, sizeof dir);
        uint64_t lim = 0, use = 0, hier = 1;
        int has = mhla_cgroup_read(dir, lim_name, &lim, NULL);
        int binds = first || version == 2 ||
                    mhla_cgroup_read(dir, "memory.use_hierarchy", &hier, NULL) <= 0 || hier != 0;
        if (has == 1 && lim < CGROUP_NO_LIMIT && binds) {
            mhla_cgroup_read(dir, use_name, &use, NULL);
            size_t r = lim > use ? (size_t)(lim - use) : 1;
            if (!room || r < room) {
                room = r;
                m->cgroup_max = (size_t)lim;
                m->cgroup_version = version;
                snprintf(m->cgroup_path, sizeof m->cgroup_path, "%.255s",
                         cg.path[0] ? cg.path : "/");
            }
        }
        if (has)
            first = 0;
    } while (mhla_cgroup_up(&cg));
    return room;
}

void srv_memory_probe_at(srv_memory_plan *m, const char *root)
{
    memset(m, 0, sizeof *m);
    size_t avail = meminfo(root, "MemAvailable"), cg = cgroup_room(root, m);
    m->limit = avail;
    m->limit_from = "MemAvailable";
    if (cg && (!avail || cg < avail)) {
        m->limit = cg;
        m->limit_from = m->cgroup_version == 1
                            ? "cgroup v1 memory.limit_in_bytes - memory.usage_in_bytes"
                            : "cgroup memory.max - memory.current";
    }
}

void srv_memory_probe(srv_memory_plan *m) { srv_memory_probe_at(m, ""); }

/* Bytes of one page of state (f32): one finished block of every layer. */
static size_t page_bytes(const mhla_config *c)
{
    size_t per_head = (size_t)c->head_k_dim * c->head_v_dim + (c->normalize ? c->head_k_dim : 0);
    return (size_t)c->num_layers * c->num_kv_heads * per_head * sizeof(float);
}

/* The engine's and the scheduler's buffers for one step of max_batch_tokens
 * (activations and logits rows), estimated from the shape. */
static size_t step_buffers(const mhla_config *c, int max_batch_tokens)
{
    size_t per_token =
        8 * (size_t)c->hidden_size + 3 * (size_t)c->intermediate_size + 2 * (size_t)c->vocab_size;
    return (size_t)max_batch_tokens * per_token * sizeof(float);
}

/* Bytes a sequence holds besides its pages (its buffers), measured. */
static int sequence_buffers(const mhla_model *model, size_t *out, char *err, size_t errlen)
{
    mhla_seq *s = NULL;
    mhla_error e = {0};
    if (mhla_seq_create(model, &s, &e)) {
        snprintf(err, errlen, "--state-memory auto: %s", e.msg);
        return -1;
    }
    *out = mhla_seq_state_bytes(s);
    mhla_seq_free(s);
    return 0;
}

static size_t minus(size_t a, size_t b) { return a > b ? a - b : 0; }

/* What stays of m->limit for pages once m->weights (0 where they are not in
 * the limit's memory), the step buffers, the headroom, the sequences'
 * buffers and the resume entries are taken; -1 with err when not one
 * full-context sequence fits. */
static int plan_pages(srv_memory_plan *m, const mhla_model *model, int max_running,
                      int max_batch_tokens, char *err, size_t errlen)
{
    const mhla_config *c = mhla_model_config(model);
    if (sequence_buffers(model, &m->seq_buffer_bytes, err, errlen))
        return -1;
    m->step_buffers = step_buffers(c, max_batch_tokens);
    m->headroom = HEADROOM_FIXED + m->limit / 100 * HEADROOM_PERCENT;
    m->sequences = (size_t)max_running * m->seq_buffer_bytes;
    m->resume_slots = RESUME_SLOTS;
    /* an entry: the tokens and a partial block's rows (at most the buffers) */
    m->resume =
        (size_t)RESUME_SLOTS * (m->seq_buffer_bytes + (size_t)c->max_positions * sizeof(int32_t));
    m->page_bytes = page_bytes(c);
    size_t full = (size_t)mhla_state_pages_needed(model, c->max_positions) * m->page_bytes;
    m->cap = (size_t)CACHE_FACTOR * (size_t)max_running * (full ? full : m->page_bytes);
    size_t left = minus(m->limit, m->weights + m->step_buffers + m->headroom);
    m->pages = minus(left, m->sequences + m->resume);
    if (m->pages > m->cap)
        m->pages = m->cap;
    m->pages = m->pages / m->page_bytes * m->page_bytes;
    if (m->pages < full || m->pages == 0) {
        snprintf(err, errlen,
                 "--state-memory auto: %zu MiB usable (%s) leave %zu MiB for state pages, less "
                 "than one full-context sequence needs (%zu MiB); lower --max-running or give "
                 "--state-memory MB (0: unbounded)",
                 m->limit / MIB, m->limit_from, m->pages / MIB, full / MIB);
        return -1;
    }
    return 0;
}

int srv_memory_plan_budget(srv_memory_plan *m, const mhla_model *model, int max_running,
                           int max_batch_tokens, char *err, size_t errlen)
{
    if (!m->limit) {
        snprintf(err, errlen,
                 "--state-memory auto: neither a cgroup memory limit nor "
                 "/proc/meminfo's MemAvailable is readable; give --state-memory MB");
        return -1;
    }
    m->weights = mhla_model_weight_bytes(model);
    return plan_pages(m, model, max_running, max_batch_tokens, err, errlen);
}

int srv_memory_plan_device(srv_memory_plan *m, mhla_engine *engine, const mhla_model *model,
                           int max_running, int max_batch_tokens, char *err, size_t errlen)
{
    mhla_error e = {0};
    size_t free_bytes = 0, total = 0;
    if (mhla_engine_device_memory(engine, &free_bytes, &total, &e)) {
        snprintf(err, errlen, "--state-memory auto: %s; give --state-memory MB", e.msg);
        return -1;
    }
    memset(m, 0, sizeof *m);
    m->limit = free_bytes;
    m->limit_from = "device free memory";
    m->device_total = total;
    m->device_weights = mhla_engine_step_weight_bytes(engine);
    m->weights = 0; /* already on the device: not in the free memory */
    return plan_pages(m, model, max_running, max_batch_tokens, err, errlen);
}

void srv_memory_log(const srv_memory_plan *m)
{
    cJSON *f = cJSON_CreateObject();
    if (f) {
        cJSON_AddStringToObject(f, "limit_from", m->limit_from);
        cJSON_AddNumberToObject(f, "limit_mib", (double)(m->limit / MIB));
        if (m->cgroup_max) {
            cJSON_AddNumberToObject(f, "cgroup_memory_max_mib", (double)(m->cgroup_max / MIB));
            cJSON_AddNumberToObject(f, "cgroup_version", m->cgroup_version);
            cJSON_AddStringToObject(f, "cgroup", m->cgroup_path);
        }
        if (m->device_total) {
            cJSON_AddNumberToObject(f, "device_total_mib", (double)(m->device_total / MIB));
            cJSON_AddNumberToObject(f, "device_weights_mib", (double)(m->device_weights / MIB));
        }
        cJSON_AddNumberToObject(f, "weights_mib", (double)(m->weights / MIB));
        cJSON_AddNumberToObject(f, "step_buffers_mib", (double)(m->step_buffers / MIB));
        cJSON_AddNumberToObject(f, "headroom_mib", (double)(m->headroom / MIB));
        cJSON_AddNumberToObject(f, "sequence_buffers_mib", (double)(m->sequences / MIB));
        cJSON_AddNumberToObject(f, "resume_entries_mib", (double)(m->resume / MIB));
        cJSON_AddNumberToObject(f, "cache_cap_mib", (double)(m->cap / MIB));
        cJSON_AddNumberToObject(f, "pages_mib", (double)(m->pages / MIB));
        cJSON_AddNumberToObject(f, "pages", (double)(m->pages / m->page_bytes));
    }
    srv_log(MHLA_LOG_INFO, "state_memory", f);
    if (m->device_total) {
        srv_logf(MHLA_LOG_INFO, "state_memory_arithmetic",
                 "pages %zu MiB = min(cap %zu, device free %zu of %zu MiB (the weights' %zu MiB "
                 "and the engine's buffers already there) - step buffers %zu - headroom %zu "
                 "(256 MiB + %d%%) - sequence buffers %zu - resume entries %zu) MiB",
                 m->pages / MIB, m->cap / MIB, m->limit / MIB, m->device_total / MIB,
                 m->device_weights / MIB, m->step_buffers / MIB, m->headroom / MIB,
                 HEADROOM_PERCENT, m->sequences / MIB, m->resume / MIB);
        return;
    }
    srv_logf(MHLA_LOG_INFO, "state_memory_arithmetic",
             "pages %zu MiB = min(cap %zu, limit %zu (%s) - weights %zu - step buffers %zu - "
             "headroom %zu (256 MiB + %d%%) - sequence buffers %zu - resume entries %zu) MiB",
             m->pages / MIB, m->cap / MIB, m->limit / MIB, m->limit_from, m->weights / MIB,
             m->step_buffers / MIB, m->headroom / MIB, HEADROOM_PERCENT, m->sequences / MIB,
             m->resume / MIB);
}
