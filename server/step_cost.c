/*
 * step_cost.c — the engine's step time learned online, in two parts:
 *
 *   decode(rows) = fixed + per_row × rows, fitted over the steps that only
 *   decode; and per_token, the time each prompt token adds to such a step,
 *   fitted over the steps that decode and feed prompts, as (step time −
 *   decode(rows)) per token.
 *
 * One joint fit of all three costs cannot tell them apart when the steps look
 * alike — under steady prompt pressure every step has the same rows and about
 * the same chunk, and noise then moves cost between fixed, per_row and
 * per_token freely (measured: a decode estimate 2.5× the true one, so steps
 * beside decode ran 8× a decode-only step). Learned apart, each part comes
 * from the steps that show it; the planner keeps decode-only steps coming
 * (step_plan.c). Steps with no decode rows feed large chunks whose tokens cost
 * less each; they only seed per_token until a step has done both. All sums
 * are exponentially weighted, so the costs follow the machine as its load
 * changes.
 */
#include "step_plan.h"

#include <string.h>

#define FORGET 0.95 /* each older step weighs 5 % less: about the last 20 steps count */
#define RIDGE 1e-3  /* the pull towards the previous estimates, relative to the data */
/* A step this much slower than predicted: the machine got slower (a busy
 * neighbour, throttling), so the older steps weigh only SURGE_KEEP of what
 * they did. The estimates then follow within a step or two instead of 20,
 * while every following step would overshoot the budget; a faster machine
 * is followed at the usual pace (it only costs throughput meanwhile). */
#define SURGE 1.25
#define SURGE_KEEP 0.02

void srv_step_cost_reset(srv_step_cost *c, int device)
{
    memset(c, 0, sizeof *c);
    c->device = device;
}

double srv_step_cost_predict(const srv_step_cost *c, int rows, int tokens)
{
    return c->theta[SRV_COST_FIXED] + c->theta[SRV_COST_PER_ROW] * rows +
           c->theta[SRV_COST_PER_TOKEN] * tokens;
}

/* fixed and per_row from the decode-only steps' sums, pulled slightly
 * towards the previous estimates (steps that all have the same rows say
 * nothing about the split, only about the sum). A cost the fit makes
 * negative keeps its previous value and the other is refitted around it. */
static void refit_decode(srv_step_cost *c)
{
    double r0 = RIDGE * c->a[0][0] + 1e-12, r1 = RIDGE * c->a[1][1] + 1e-12;
    double m00 = c->a[0][0] + r0, m01 = c->a[0][1], m11 = c->a[1][1] + r1;
    double v0 = c->b[0] + r0 * c->theta[SRV_COST_FIXED];
    double v1 = c->b[1] + r1 * c->theta[SRV_COST_PER_ROW];
    double det = m00 * m11 - m01 * m01;
    if (det <= 0)
        return;
    double fixed = (v0 * m11 - v1 * m01) / det, per_row = (v1 * m00 - v0 * m01) / det;
    if (fixed < 0) { /* hold fixed, fit per_row */
        fixed = c->theta[SRV_COST_FIXED];
        per_row = (v1 - m01 * fixed) / m11;
    } else if (per_row < 0) { /* hold per_row, fit fixed */
        per_row = c->theta[SRV_COST_PER_ROW];
        fixed = (v0 - m01 * per_row) / m00;
    }
    if (fixed >= 0 && per_row >= 0) {
        c->theta[SRV_COST_FIXED] = fixed;
        c->theta[SRV_COST_PER_ROW] = per_row;
    }
}

/* How much the older steps keep for this one: FORGET, or SURGE_KEEP for a
 * step beside decode rows that took SURGE × its prediction. Only there: the
 * decode fit follows at the usual pace, since one slow decode-only step (a
 * preemption) taken at face value would make the decode estimate high, and
 * the time prompt tokens add to a step (its time less that estimate) low. */
static double keep(const srv_step_cost *c, int rows, int tokens, double seconds)
{
    if (rows == 0 || tokens == 0 || c->mixed_steps == 0)
        return FORGET;
    return seconds > SURGE * srv_step_cost_predict(c, rows, tokens) ? SURGE_KEEP : FORGET;
}

void srv_step_cost_observe(srv_step_cost *c, int device, int rows, int tokens, double seconds)
{
    if (device != c->device)
        srv_step_cost_reset(c, device);
    if (!(seconds >= 0) || rows < 0 || tokens < 0 || rows + tokens == 0)
        return;
    double k = keep(c, rows, tokens, seconds);
    c->steps++;
    if (tokens == 0) {
        double x[2] = {1, rows};
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 2; j++)
                c->a[i][j] = k * c->a[i][j] + x[i] * x[j];
            c->b[i] = k * c->b[i] + x[i] * seconds;
        }
        c->decode_steps++;
        c->since_decode = 0;
        refit_decode(c);
        return;
    }
    c->prefill_steps++;
    /* the prompt tokens' share of the step: what decoding alone would not take */
    double extra = seconds - srv_step_cost_predict(c, rows, 0), t = tokens;
    if (rows > 0) {
        c->since_decode++;
        c->mixed_steps++;
        /* a short prompt's last few tokens do not shrink the next chunk at once */
        c->last_prefill = tokens > c->last_prefill / 2 ? tokens : c->last_prefill / 2;
        c->tok_xx = k * c->tok_xx + t * t;
        c->tok_xy = k * c->tok_xy + t * extra;
    } else {
        c->solo_xx = FORGET * c->solo_xx + t * t;
        c->solo_xy = FORGET * c->solo_xy + t * extra;
    }
    /* Beside decode rows a fit at or below 0 (the steps took no longer than the
     * decode estimate: a few tokens ride on the rows' weight reads, or the
     * estimate is high after a slow moment) says 0, so the planner grows the
     * chunks from what the steps show; holding the last positive value instead
     * could hold a slow moment's cost for good. */
    if (c->tok_xx > 0)
        c->theta[SRV_COST_PER_TOKEN] = c->tok_xy > 0 ? c->tok_xy / c->tok_xx : 0;
    else if (c->solo_xy > 0)
        c->theta[SRV_COST_PER_TOKEN] = c->solo_xy / c->solo_xx;
}
