/*
 * state_disk.c — the engine's disk tier (kvstate's, under the pool): the
 * fingerprint that says whose bits a page file holds, and the tier's
 * counters. A page's bits depend on the model (its config and every weight
 * byte), on the storage the kernels read the weights in (f32, bf16, q8) and
 * on the device (a GPU's products differ from the CPU's) — not on the CPU's
 * instruction-set path or thread count, whose bits are the same (docs/
 * architecture.md), so a file written on one CPU path serves every other.
 */
#include "engine_internal.h"

#include <string.h>

/* q4 is a kind per group size: the groups change the bits */
static int storage_kind(k_matrix w)
{
    return w.q8 ? (w.q8->bits == 4 ? 4 + w.q8->wgroup : 3) : w.bf16 ? 2 : w.f32 ? 1 : 0;
}

/* The weight storage of every matrix, in order. */
static uint64_t storage_hash(const mhla_model *m, uint64_t h)
{
    int k = storage_kind(m->lm_head);
    h = kv_hash64(h, &k, sizeof k);
    for (int l = 0; l < m->cfg.num_layers; l++) {
        const eng_layer *y = &m->layers[l];
        int kinds[] = {storage_kind(y->wq),   storage_kind(y->wk),    storage_kind(y->wv),
                       storage_kind(y->wg),   storage_kind(y->wo),    storage_kind(y->w_gate),
                       storage_kind(y->w_up), storage_kind(y->w_down)};
        h = kv_hash64(h, kinds, sizeof kinds);
    }
    return h;
}

/* The checkpoint: every tensor's name, dtype, shape and bytes. */
static uint64_t tensors_hash(const mhla_model *m, uint64_t h, uint64_t *bytes)
{
    *bytes = 0;
    for (int i = 0; i < m->st.n_tensors; i++) {
        const st_tensor *t = &m->st.tensors[i];
        h = kv_hash64(h, t->name, strlen(t->name));
        h = kv_hash64(h, t->dtype_name, strnlen(t->dtype_name, sizeof t->dtype_name));
        h = kv_hash64(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
        h = kv_hash64(h, t->data, t->nbytes);
        *bytes += t->nbytes;
    }
    return h;
}

/* The device: the CPU (any path), or the GPU's kind and weight storage
 * ("cuda:0 NVIDIA H200 (bf16 weights)" less its index). */
static uint64_t device_hash(const mhla_engine *e, uint64_t h)
{
    int dev = (int)e->ops->device;
    h = kv_hash64(h, &dev, sizeof dev);
    if (e->ops->device == MHLA_DEVICE_CPU)
        return h;
    const char *name = strchr(e->device_name, ' ');
    name = name ? name : e->device_name;
    return kv_hash64(h, name, strlen(name));
}

/* The config and the checkpoint, hashed on the model's first engine only:
 * reading every weight byte is the tier's start-up cost. */
static uint64_t checkpoint_hash(mhla_engine *e)
{
    mhla_model *m = (mhla_model *)e->model; /* the cache is the one field that changes */
    if (m->checkpoint_fp_done)
        return m->checkpoint_fp;
    double t0 = mhla_now();
    const mhla_config *c = &m->cfg;
    int64_t f[] = {c->vocab_size,      c->hidden_size, c->num_layers,         c->num_heads,
                   c->num_kv_heads,    c->head_k_dim,  c->head_v_dim,         c->intermediate_size,
                   c->chunk_size,      c->num_blocks,  c->max_positions,      c->feature_map,
                   c->use_output_gate, c->normalize,   c->tie_word_embeddings};
    uint64_t h = kv_hash64(0x6d686c612d6b7670ull, f, sizeof f);
    h = kv_hash64(h, &c->norm_eps, sizeof c->norm_eps);
    m->checkpoint_fp = tensors_hash(m, h, &m->checkpoint_fp_bytes);
    m->checkpoint_fp_s = mhla_now() - t0;
    m->checkpoint_fp_done = 1;
    return m->checkpoint_fp;
}

static uint64_t fingerprint(mhla_engine *e)
{
    uint64_t h = checkpoint_hash(e);
    h = storage_hash(e->model, h);
    return device_hash(e, h);
}

int eng_state_disk_open(mhla_engine *e, const mhla_engine_options *opt, mhla_error *err)
{
    if (!opt || !opt->state_dir || !opt->state_dir[0])
        return 0;
    if (opt->state_bytes == 0)
        return eng_fail(err, "a state dir needs a state pool with a budget (its prefix cache)");
    kv_disk_options o = {.dir = opt->state_dir,
                         .max_bytes = opt->state_disk_max,
                         .fingerprint = fingerprint(e)};
    kv_geometry g = eng_state_geometry(&e->model->cfg);
    kv_disk *d;
    kv_error ke;
    if (kv_disk_open(&o, &g, kv_pool_dtype(e->pool), &d, &ke))
        return eng_fail_kv(err, &ke);
    if (kv_pool_set_disk(e->pool, d, &ke)) {
        kv_disk_close(d);
        return eng_fail_kv(err, &ke);
    }
    return 0;
}

void eng_state_disk_stats(const mhla_engine *e, mhla_state_stats *out)
{
    kv_disk *d = kv_pool_disk(e->pool);
    if (!d)
        return;
    kv_disk_stats k;
    kv_disk_stats_get(d, &k);
    out->disk = 1;
    out->disk_hits = k.hits;
    out->disk_misses = k.misses;
    out->disk_bytes_read = k.bytes_read;
    out->disk_bytes_written = k.bytes_written;
    out->disk_load_ns = k.load_ns;
    out->disk_writes = k.writes;
    out->disk_corrupt = k.corrupt;
    out->disk_write_errors = k.write_errors;
    out->disk_dropped = k.dropped;
    out->disk_evictions = k.evictions;
    out->disk_bytes = k.bytes;
    memcpy(out->disk_error, k.last_error, sizeof out->disk_error);
    out->disk_fingerprint_s = e->model->checkpoint_fp_s;
    out->disk_fingerprint_bytes = e->model->checkpoint_fp_bytes;
}

void mhla_engine_disk_stats(const mhla_engine *e, mhla_state_stats *out)
{
    memset(out, 0, sizeof *out);
    eng_state_disk_stats(e, out);
}

int eng_state_disk_control(mhla_engine *e, int op, int arg, mhla_error *err)
{
    kv_disk *d = kv_pool_disk(e->pool);
    if (!d)
        return eng_fail(err, "the engine has no disk tier");
    if (op == MHLA_TESTCTRL_DISK_FLUSH)
        kv_disk_flush(d);
    else if (arg < KV_DISK_FAULT_NONE || arg > KV_DISK_FAULT_READONLY)
        return eng_fail(err, "unknown disk fault %d", arg);
    else
        kv_disk_set_fault(d, (kv_disk_fault)arg);
    return 0;
}
