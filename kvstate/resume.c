/*
 * resume.c — end states of finished sequences that stopped mid-block, so a
 * request whose prompt extends an earlier prompt + completion resumes at the
 * exact position (multi-turn chat). An entry keeps only the tokens and the
 * partial block's raw rows; the whole blocks before it stay in the prefix
 * cache (and may be evicted there, which only shortens a later match). The
 * slots are few and scanned linearly; the least recently used is replaced.
 */
#include "kvstate_internal.h"

#include <stdlib.h>
#include <string.h>

static void entry_clear(kv_resume_entry *e)
{
    free(e->tokens);
    free(e->rows);
    memset(e, 0, sizeof *e);
}

void kv_resume_free_all(kv_pool *p)
{
    if (!p->resume)
        return;
    for (int i = 0; i < p->opt.resume_slots; i++)
        entry_clear(&p->resume[i]);
}

void kv_resume_keep(kv_pool *p, const kv_seq *s)
{
    const kv_geometry *g = &p->opt.geo;
    kv_resume_entry *slot = NULL;
    for (int i = 0; i < p->opt.resume_slots; i++) {
        kv_resume_entry *e = &p->resume[i];
        if (e->pos == s->pos && memcmp(e->tokens, s->tokens, (size_t)s->pos * 4) == 0) {
            e->last_used = ++p->clock; /* already kept */
            return;
        }
        if (e->pos == 0) { /* an empty slot beats any occupied one */
            if (!slot || slot->pos != 0)
                slot = e;
        } else if (!slot || (slot->pos != 0 && e->last_used < slot->last_used)) {
            slot = e;
        }
    }
    if (!slot)
        return;
    int r = s->pos % g->block_tokens;
    int32_t *tok = malloc((size_t)s->pos * sizeof *tok);
    float *rows = malloc(kv_rows_floats(g, r) * sizeof(float));
    if (!tok || !rows) { /* keeping is best-effort: nothing depends on it */
        free(tok);
        free(rows);
        return;
    }
    if (kv_rows_pack(p, &s->b, r, rows)) {
        free(tok);
        free(rows);
        return;
    }
    entry_clear(slot);
    memcpy(tok, s->tokens, (size_t)s->pos * sizeof *tok);
    slot->tokens = tok;
    slot->rows = rows;
    slot->pos = s->pos;
    slot->last_used = ++p->clock;
}

kv_resume_entry *kv_resume_find(kv_pool *p, const int32_t *tokens, int limit, int n_blocks)
{
    kv_resume_entry *best = NULL;
    for (int i = 0; i < p->opt.resume_slots; i++) {
        kv_resume_entry *e = &p->resume[i];
        if (e->pos > 0 && e->pos <= limit && e->pos / p->opt.geo.block_tokens == n_blocks &&
            (!best || e->pos > best->pos) &&
            memcmp(e->tokens, tokens, (size_t)e->pos * sizeof *tokens) == 0)
            best = e;
    }
    return best;
}
