/*
 * memory.c — --state-memory auto: the state pool's budget from the memory
 * this process may use. The limit is the cgroup v2 memory.max of the
 * process's cgroup (less what the cgroup already uses) when one is set,
 * else MemAvailable, never more than the other when both are known. From
 * it go the weights, an estimate of the engine's and the scheduler's
 * per-step buffers, and a headroom for everything else (HTTP threads,
 * response buffers, allocator slack); what stays is the state budget. The
 * per-sequence buffers outside the pages (max_running of them) and the
 * resume entries are taken from that budget before it becomes pages, so the
 * pool's admission never promises memory they need. The arithmetic is
 * logged at start.
 */
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

/* A "key: N kB" line of /proc/meminfo, in bytes; 0 when absent. */
static size_t meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
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

/* A number in a cgroup file; 0 when absent or "max". */
static size_t cgroup_value(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char buf[64] = {0};
    size_t v = 0;
    if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9')
        v = (size_t)strtoull(buf, NULL, 10);
    fclose(f);
    return v;
}

/* cgroup v2: memory.max - memory.current of this process's cgroup; 0: none. */
static size_t cgroup_room(size_t *max_out)
{
    *max_out = 0;
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return 0;
    char line[512], dir[400] = {0};
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0)
            snprintf(dir, sizeof dir, "%.*s", (int)strcspn(line + 3, "\n"), line + 3);
    fclose(f);
    if (strcmp(dir, "/") == 0)
        dir[0] = 0;
    size_t max = cgroup_value(dir, "memory.max"), cur = cgroup_value(dir, "memory.current");
    *max_out = max;
    return max > cur ? max - cur : (max ? 1 : 0);
}

void srv_memory_probe(srv_memory_plan *m)
{
    memset(m, 0, sizeof *m);
    size_t avail = meminfo("MemAvailable"), cg_max = 0, cg = cgroup_room(&cg_max);
    m->limit = avail;
    m->limit_from = "MemAvailable";
    if (cg && (!avail || cg < avail)) {
        m->limit = cg;
        m->limit_from = "cgroup memory.max - memory.current";
    }
    m->cgroup_max = cg_max;
}

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

int srv_memory_plan_budget(srv_memory_plan *m, const mhla_model *model, int max_running,
                           int max_batch_tokens, char *err, size_t errlen)
{
    const mhla_config *c = mhla_model_config(model);
    if (!m->limit) {
        snprintf(err, errlen,
                 "--state-memory auto: neither a cgroup memory.max nor "
                 "/proc/meminfo's MemAvailable is readable; give --state-memory MB");
        return -1;
    }
    if (sequence_buffers(model, &m->seq_buffer_bytes, err, errlen))
        return -1;
    m->weights = mhla_model_weight_bytes(model);
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

void srv_memory_log(const srv_memory_plan *m)
{
    cJSON *f = cJSON_CreateObject();
    if (f) {
        cJSON_AddStringToObject(f, "limit_from", m->limit_from);
        cJSON_AddNumberToObject(f, "limit_mib", (double)(m->limit / MIB));
        if (m->cgroup_max)
            cJSON_AddNumberToObject(f, "cgroup_memory_max_mib", (double)(m->cgroup_max / MIB));
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
    srv_logf(MHLA_LOG_INFO, "state_memory_arithmetic",
             "pages %zu MiB = min(cap %zu, limit %zu (%s) - weights %zu - step buffers %zu - "
             "headroom %zu (256 MiB + %d%%) - sequence buffers %zu - resume entries %zu) MiB",
             m->pages / MIB, m->cap / MIB, m->limit / MIB, m->limit_from, m->weights / MIB,
             m->step_buffers / MIB, m->headroom / MIB, HEADROOM_PERCENT, m->sequences / MIB,
             m->resume / MIB);
}
