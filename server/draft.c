/*
 * draft.c — drafts from a draft model (--speculate draft --draft-model DIR):
 * a second, smaller MHLA model with the same tokenizer proposes the tokens
 * the target verifies (docs/architecture.md, "Drafts from a draft model").
 * It has an engine and a state pool of its own; each drafting choice keeps a
 * sequence of it that holds the choice's accepted text. One draft-engine
 * step per draft position serves every drafting row at once: the first
 * feeds each row's text the draft has not seen (its last token, the tokens
 * accepted since, or a chunk of the prompt it is still catching up on) and
 * proposes the first draft, each later one feeds the previous draft and
 * proposes the next. The draft state then holds proposals the target may
 * refuse; after the target's step it goes back to the accepted text with
 * mhla_seq_rewind(), which is why a row never feeds drafts that close a
 * block of the draft model (a closed block may be shared by its prefix
 * cache: it cannot be reopened).
 */
#include "server_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct srv_drafter {
    mhla_model *model;
    mhla_engine *engine;
    const mhla_config *cfg;
    mhla_sampler *greedy; /* the draft's choice: its most likely token */
    int bounded;          /* a state pool with a limit: sequences reserve their pages */
    int catchup;          /* text tokens all rows may feed in one proposal's first step */
    mhla_batch_item *items;
    mhla_sample_slot *slots;
    int *row_of; /* item -> row */
    int32_t *feed;
    int cap_items, cap_slots, cap_rows, cap_feed;
};

/* The draft must read and write the same ids: its tokenizer file must be the
 * target's, byte for byte, and its vocabulary the same size. */
static int same_tokenizer(const char *target_dir, const char *draft_dir, int v_target, int v_draft,
                          char *err, size_t errlen)
{
    if (v_target != v_draft) {
        snprintf(err, errlen,
                 "--draft-model %s: its vocabulary has %d tokens, the model's %d: a draft model "
                 "must share the model's tokenizer",
                 draft_dir, v_draft, v_target);
        return -1;
    }
    char pa[4096], pb[4096], msg[512];
    snprintf(pa, sizeof pa, "%s/tokenizer.json", target_dir);
    snprintf(pb, sizeof pb, "%s/tokenizer.json", draft_dir);
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    int rc = -1;
    if (access(pa, F_OK) != 0 && access(pb, F_OK) != 0)
        return 0; /* neither has one: both read and write ids as they are */
    if (mhla_read_file(pa, (size_t)1 << 30, &a, &na, msg, sizeof msg) ||
        mhla_read_file(pb, (size_t)1 << 30, &b, &nb, msg, sizeof msg))
        snprintf(err, errlen, "--draft-model %s: cannot compare the tokenizers: %s", draft_dir,
                 msg);
    else if (na != nb || memcmp(a, b, na) != 0)
        snprintf(err, errlen,
                 "--draft-model %s: its tokenizer.json differs from the model's: a draft model "
                 "must share the model's tokenizer",
                 draft_dir);
    else
        rc = 0;
    free(a);
    free(b);
    return rc;
}

/* State a block of one position costs, in proportion: a page holds S_b
 * (dk x dv) and the key sums (dk) for each layer and kv head. */
static double per_position(const mhla_config *c)
{
    return (double)c->num_layers * c->num_kv_heads * c->head_k_dim * (c->head_v_dim + 1);
}

/* The draft's pool: auto holds as many positions as the model's. */
static size_t pool_bytes(const srv_drafter_options *o, const mhla_config *cfg)
{
    if (o->state_mb >= 0)
        return (size_t)o->state_mb << 20;
    if (o->target_state_bytes == 0)
        return 0;
    double b = (double)o->target_state_bytes * per_position(cfg) / per_position(o->target_cfg);
    return b < (double)(1 << 20) ? (size_t)1 << 20 : (size_t)b;
}

static int make_sampler(srv_drafter *d, char *err, size_t errlen)
{
    mhla_sampling_params sp;
    mhla_sampling_defaults(&sp);
    sp.temperature = 0.0f;
    mhla_error e = {0};
    if (mhla_sampler_create(&sp, d->cfg->vocab_size, NULL, 0, &d->greedy, &e)) {
        snprintf(err, errlen, "draft model: %s", e.msg);
        return -1;
    }
    return 0;
}

/* One step before serving: the engine's first step sets up its threads and
 * buffers, which would otherwise count as the first drafts' cost. */
static int warm_up(srv_drafter *d, mhla_error *e)
{
    mhla_seq *seq;
    int32_t tok = 0;
    if (mhla_engine_seq_create(d->engine, &seq, e))
        return -1;
    mhla_batch_item it = {.seq = seq, .tokens = &tok, .n_tokens = 1, .logits_from = 1};
    int rc = mhla_engine_step(d->engine, &it, 1, e);
    mhla_seq_free(seq);
    return rc;
}

int srv_drafter_create(const srv_drafter_options *o, srv_drafter **out, char *err, size_t errlen)
{
    *out = NULL;
    srv_drafter *d = calloc(1, sizeof *d);
    mhla_error e = {0};
    if (!d) {
        snprintf(err, errlen, "out of memory for the draft model");
        return -1;
    }
    if (mhla_model_load_with(o->dir, o->model_options, &d->model, &e)) {
        snprintf(err, errlen, "--draft-model %s: %s", o->dir, e.msg);
        srv_drafter_free(d);
        return -1;
    }
    d->cfg = mhla_model_config(d->model);
    mhla_engine_options eo = *o->engine_options;
    eo.state_bytes = pool_bytes(o, d->cfg);
    eo.state_prefault_bytes = 0; /* --state-prefault is the model's pool's; the draft's grows */
    eo.resume_slots = 0;
    eo.state_dir = NULL; /* the draft's pages are cheap to recompute */
    d->bounded = eo.state_bytes > 0;
    d->catchup = o->catchup > 0 ? o->catchup : 512;
    if (same_tokenizer(o->target_dir, o->dir, o->target_cfg->vocab_size, d->cfg->vocab_size, err,
                       errlen) ||
        make_sampler(d, err, errlen)) {
        srv_drafter_free(d);
        return -1;
    }
    if (mhla_engine_create(d->model, &eo, &d->engine, &e) || warm_up(d, &e)) {
        snprintf(err, errlen, "--draft-model %s: cannot create its engine: %s", o->dir, e.msg);
        srv_drafter_free(d);
        return -1;
    }
    srv_logf(MHLA_LOG_INFO, "draft_model", "%s: %d layers, hidden %d; state pool %s%.1f MB", o->dir,
             d->cfg->num_layers, d->cfg->hidden_size, eo.state_bytes ? "" : "unbounded, ",
             eo.state_bytes / 1e6);
    *out = d;
    return 0;
}

void srv_drafter_free(srv_drafter *d)
{
    if (!d)
        return;
    mhla_engine_free(d->engine);
    mhla_sampler_free(d->greedy);
    mhla_model_free(d->model);
    free(d->items);
    free(d->slots);
    free(d->row_of);
    free(d->feed);
    free(d);
}

const mhla_config *srv_drafter_config(const srv_drafter *d) { return d->cfg; }

mhla_engine *srv_drafter_engine(const srv_drafter *d) { return d->engine; }

double srv_drafter_cost_ratio(const srv_drafter *d, const mhla_model *target)
{
    size_t t = mhla_model_weight_bytes(target);
    return t ? (double)mhla_model_weight_bytes(d->model) / (double)t : 1.0;
}

void srv_draft_state_free(srv_draft_state *st)
{
    mhla_seq_free(st->seq);
    st->seq = NULL;
}

static int32_t text_at(const srv_spec_text *t, int i)
{
    return i < t->n_prompt ? t->prompt[i] : t->out[i - t->n_prompt];
}

/* Row r's draft sequence, made on its first proposal: what the draft's
 * prefix cache holds of the prompt, and a reservation of its worst case. A
 * choice the draft pool cannot promise that much drafts nothing. */
static int ensure_seq(srv_drafter *d, srv_draft_row *r)
{
    srv_draft_state *st = r->st;
    if (st->seq || st->off)
        return st->seq ? 0 : -1;
    mhla_error e = {0};
    if (mhla_engine_seq_create(d->engine, &st->seq, &e))
        goto off;
    if (!d->bounded)
        return 0;
    if (mhla_seq_match_prefix(st->seq, r->text.prompt, r->text.n_prompt, &e) < 0 ||
        mhla_seq_reserve(st->seq, r->reserve, &e))
        goto off;
    return 0;
off:
    srv_logf(MHLA_LOG_DEBUG, "draft", "a choice drafts nothing: %s", e.msg);
    srv_draft_state_free(st);
    st->off = 1;
    return -1;
}

static int grow(srv_drafter *d, int n_rows, int n_feed)
{
    return mhla_grow(&d->items, sizeof *d->items, &d->cap_items, n_rows) ||
           mhla_grow(&d->slots, sizeof *d->slots, &d->cap_slots, n_rows) ||
           mhla_grow(&d->row_of, sizeof *d->row_of, &d->cap_rows, n_rows) ||
           mhla_grow(&d->feed, sizeof *d->feed, &d->cap_feed, n_feed);
}

/* Drafts row r may propose now: never a fed draft that closes a block of the
 * draft model (drafts j = 1 .. k-1 are fed at end .. end+k-2), nor one past
 * its context. */
static int row_room(const srv_drafter *d, const srv_draft_row *r, int end)
{
    int C = d->cfg->chunk_size, k = r->want;
    int block = C - end % C, ctx = d->cfg->max_positions - end + 1;
    k = block < k ? block : k;
    k = ctx < k ? ctx : k;
    return k < 0 ? 0 : k;
}

static void slot_at(srv_drafter *d, int n, int at)
{
    mhla_sample_slot *sl = &d->slots[n];
    memset(sl, 0, sizeof *sl);
    sl->sampler = d->greedy;
    sl->at = at;
    sl->n_top = -1;
}

/* The first step's item of row i: the text its draft has not fed, within what is
 * left of the catch-up allowance, with a slot at the text's end when it gets there. */
static int first_item(srv_drafter *d, srv_draft_row *rows, int i, int n, int *left, int *at,
                      int *caught)
{
    srv_draft_row *r = &rows[i];
    int end = r->text.n_prompt + r->text.n_out;
    if (ensure_seq(d, r) || end > d->cfg->max_positions)
        return 0;
    int pos = mhla_seq_pos(r->st->seq), m = end - pos;
    int behind = m - 1 > *left; /* still catching up: no drafts this step */
    m = behind ? *left + 1 : m;
    *left -= m - 1;
    /* a prompt's catch-up, not the tokens a row that drafted nothing for a while lags */
    *caught += m - 2 > d->cfg->chunk_size ? m - 2 : 0;
    r->want = behind ? 0 : row_room(d, r, end);
    for (int j = 0; j < m; j++)
        d->feed[*at + j] = text_at(&r->text, pos + j);
    int full = pos + m == end && r->want > 0;
    if (full)
        slot_at(d, n, m - 1);
    d->items[n] = (mhla_batch_item){.seq = r->st->seq,
                                    .tokens = d->feed + *at,
                                    .n_tokens = m,
                                    .logits_from = m,
                                    .sample = full ? &d->slots[n] : NULL,
                                    .n_samples = full};
    d->row_of[n] = i;
    *at += m;
    return 1;
}

/* One draft-engine step over the n items; each slot's token is its row's next
 * draft (a failed slot ends the row's drafts). */
static int run_step(srv_drafter *d, srv_draft_row *rows, int n, char *err, size_t errlen)
{
    mhla_error e = {0};
    if (n == 0)
        return 0;
    if (mhla_engine_step(d->engine, d->items, n, &e)) {
        snprintf(err, errlen, "draft model step: %s", e.msg);
        return -1;
    }
    for (int b = 0; b < n; b++) {
        if (!d->items[b].n_samples)
            continue;
        srv_draft_row *r = &rows[d->row_of[b]];
        if (d->slots[b].status != MHLA_SLOT_OK)
            r->want = r->got;
        else
            r->out[r->got++] = d->slots[b].token;
    }
    return 0;
}

/* The items that feed each row's draft j and propose draft j + 1. */
static int next_items(srv_drafter *d, srv_draft_row *rows, int n_rows, int j)
{
    int n = 0;
    for (int i = 0; i < n_rows; i++) {
        srv_draft_row *r = &rows[i];
        if (r->got != j || r->want <= j)
            continue;
        slot_at(d, n, 0);
        d->items[n] = (mhla_batch_item){.seq = r->st->seq,
                                        .tokens = &r->out[j - 1],
                                        .n_tokens = 1,
                                        .logits_from = 1,
                                        .sample = &d->slots[n],
                                        .n_samples = 1};
        d->row_of[n++] = i;
    }
    return n;
}

int srv_drafter_propose(srv_drafter *d, srv_draft_row *rows, int n_rows, int *caught, char *err,
                        size_t errlen)
{
    int n = 0, at = 0, left = d->catchup;
    *caught = 0;
    for (int i = 0; i < n_rows; i++)
        rows[i].got = 0;
    if (grow(d, n_rows, n_rows + d->catchup)) {
        snprintf(err, errlen, "out of memory for a draft step of %d rows", n_rows);
        return -1;
    }
    for (int i = 0; i < n_rows; i++)
        n += first_item(d, rows, i, n, &left, &at, caught);
    for (int j = 1; n > 0; j++) {
        if (run_step(d, rows, n, err, errlen))
            return -1;
        n = next_items(d, rows, n_rows, j);
    }
    return 0;
}

void srv_draft_settle(srv_draft_state *st, int end, int accepted)
{
    mhla_error e = {0};
    int keep = end + accepted;
    if (!st->seq || mhla_seq_pos(st->seq) <= keep)
        return;
    if (mhla_seq_rewind(st->seq, keep, &e)) {
        srv_logf(MHLA_LOG_WARN, "draft", "a choice stops drafting: %s", e.msg);
        srv_draft_state_free(st);
        st->off = 1;
    }
}
