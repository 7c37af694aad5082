/*
 * spec.c — prompt-lookup drafts for speculative decoding (docs/architecture.md,
 * "Speculative decoding: drafts, verification, rolling back"): the last n
 * tokens of a choice's text (prompt and output), n from --draft-ngram down
 * to 1, are looked up earlier in it, and
 * the tokens that followed the latest match are proposed. The engine verifies
 * them in the row's step and keeps those the model chooses itself, so the
 * output is plain decoding's bit for bit; what is decided here is only how
 * many to draft: as many as each is still expected to pay for.
 */
#include "server_internal.h"

#include <math.h>

/* Token i of the choice's text: the prompt, then the output. */
static int32_t tok_at(const srv_spec_text *t, int i)
{
    return i < t->n_prompt ? t->prompt[i] : t->out[i - t->n_prompt];
}

/* Whether the n tokens at a equal the text's last n. */
static int same_tail(const srv_spec_text *t, int a, int n)
{
    int end = t->n_prompt + t->n_out;
    for (int j = 0; j < n; j++)
        if (tok_at(t, a + j) != tok_at(t, end - n + j))
            return 0;
    return 1;
}

int srv_spec_lookup(const srv_spec_text *t, int ngram_max, int k, int32_t *out)
{
    int end = t->n_prompt + t->n_out;
    for (int n = ngram_max < end - 1 ? ngram_max : end - 1; n >= 1 && k > 0; n--)
        /* the latest earlier match with at least one token after it */
        for (int a = end - n - 1; a >= 0; a--) {
            if (!same_tail(t, a, n))
                continue;
            int got = 0;
            for (int i = a + n; i < end && got < k; i++)
                out[got++] = tok_at(t, i);
            return got;
        }
    return 0;
}

void srv_spec_row_init(srv_spec_row *r, int draft_max)
{
    /* a row starts short and grows by 2 a fully accepted span: text with
     * nothing to copy costs a few drafts, not a block of them */
    r->k = draft_max < 2 ? draft_max : 2;
    r->hits = 1.0; /* a prior of one success in two tries: a = 0.5 */
    r->tries = 2.0;
    r->idle = 0;
}

/* Each drafted token i (1-based) is accepted with probability a^i (a: the
 * row's chance that a draft after an accepted one is accepted too). It
 * saves a step's share of this row, per_row_s, and costs a verified token,
 * per_token_s: draft while a^i · per_row_s > per_token_s. */
int srv_spec_length(srv_spec_row *r, int k_max, double per_row_s, double per_token_s)
{
    int k = r->k < k_max ? r->k : k_max;
    if (k <= 0)
        return 0;
    double a = r->hits / r->tries;
    a = a < 0.02 ? 0.02 : a > 0.98 ? 0.98 : a;
    if (per_row_s > 0.0 && per_token_s > 0.0) {
        double worth = log(per_token_s / per_row_s) / log(a); /* a^i · per_row > per_token */
        int pays = per_token_s >= per_row_s ? 0 : worth <= 0.0 ? 0 : worth >= k ? k : (int)worth;
        /* a row whose drafts stopped paying tries one now and then, to notice text
         * that turned copyable (and to keep the cost measured), at most every 16
         * steps and so rarely that the tries cost ~0.4 % of its time: one draft
         * per 256 · per_token / per_row steps */
        double every = 256.0 * per_token_s / per_row_s;
        every = every < 16.0 ? 16.0 : every > 4096.0 ? 4096.0 : every;
        if (pays == 0 && ++r->idle >= every)
            pays = 1;
        k = pays;
    }
    if (k > 0)
        r->idle = 0;
    return k;
}

void srv_spec_row_update(srv_spec_row *r, int drafted, int accepted, int draft_max)
{
    if (drafted <= 0)
        return;
    /* geometric model: the accepted drafts are successes, the first miss a failure */
    r->hits = 0.8 * r->hits + accepted;
    r->tries = 0.8 * r->tries + accepted + (accepted < drafted);
    r->k = accepted == drafted ? (r->k + 2 < draft_max ? r->k + 2 : draft_max) : accepted + 1;
}

/* Batches of 1, 2-3, 4-7, 8-15, 16-31 and more decode rows: a drafted token
 * costs a few % of a step at batch 1 and about a row at 16 (the step is
 * bound by its multiply-adds there), so each size learns its own cost. */
static int bucket(int rows)
{
    int b = 0;
    while (rows > 1 && b < SRV_SPEC_COST_BUCKETS - 1) {
        rows >>= 1;
        b++;
    }
    return b;
}

void srv_spec_cost_plain(srv_spec_cost *c, int rows, double seconds)
{
    if (rows <= 0 || !(seconds >= 0.0))
        return;
    int b = bucket(rows);
    double v = seconds / rows;
    c->row_s[b] = c->row_s[b] > 0.0 ? 0.8 * c->row_s[b] + 0.2 * v : v;
}

void srv_spec_cost_observe(srv_spec_cost *c, int rows, int drafts, double seconds)
{
    int b = bucket(rows);
    if (drafts <= 0 || !(seconds >= 0.0) || c->row_s[b] <= 0.0)
        return;
    double extra_s = seconds - c->row_s[b] * rows; /* what the drafts added to the step */
    /* exponentially weighted least squares through 0: about the last 20 such steps */
    c->xx[b] = 0.95 * c->xx[b] + (double)drafts * drafts;
    c->xy[b] = 0.95 * c->xy[b] + (double)drafts * extra_s;
    double per = c->xy[b] / c->xx[b];
    /* a fit at or below 0 is the step times' noise, not free drafts: 0 says "not
     * known", and the caller's stand-in (a prompt token's cost) is used until the fit
     * says more (a near-zero cost would let every row draft in every step, whatever
     * its acceptance, until enough such steps were timed) */
    c->per_token[b] = per > 0.0 ? per : 0.0;
}

double srv_spec_cost_per_token(const srv_spec_cost *c, int rows)
{
    return c->per_token[bucket(rows)];
}

double srv_spec_cost_per_row(const srv_spec_cost *c, int rows) { return c->row_s[bucket(rows)]; }
