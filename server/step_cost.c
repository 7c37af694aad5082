/*
 * step_cost.c — the engine's step time learned online, in two parts:
 *
 *   decode(rows) = fixed + per_row × rows, fitted over the steps that only
 *   decode; and per_token and per_close, the time each prompt token and each
 *   block closed adds to such a step, fitted together over the steps that
 *   decode and feed prompts, on (step time − decode(rows)).
 *
 * A block's close is priced apart because it is work of its own (the
 * block's summary is finished and the earlier blocks' summaries are mixed
 * for the next), the same whatever the chunk: measured on the 340M shape
 * (bf16, 2 threads, AVX-512) as ~30 ms beside a 100 ms step. Averaged into
 * per_token, one step in three beside a stream (a 64-token block at ~21
 * tokens a step) took 1.2-1.3 × its prediction and the others 0.85 ×.
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

double srv_step_cost_predict(const srv_step_cost *c, int rows, int tokens, int closes)
{
    return c->theta[SRV_COST_FIXED] + c->theta[SRV_COST_PER_ROW] * rows +
           c->theta[SRV_COST_PER_TOKEN] * tokens + c->theta[SRV_COST_PER_CLOSE] * closes;
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
static double keep(const srv_step_cost *c, int rows, int tokens, int closes, double seconds)
{
    if (rows == 0 || tokens == 0 || c->mixed_steps == 0)
        return FORGET;
    return seconds > SURGE * srv_step_cost_predict(c, rows, tokens, closes) ? SURGE_KEEP : FORGET;
}

/* per_token and per_close from the mixed steps' sums. per_close is pulled
 * slightly towards its previous estimate, so steps that close nothing leave
 * it as it was and fit per_token alone. A fit at or below 0 says 0 (the steps
 * took no longer than the decode estimate: a few tokens ride on the rows'
 * weight reads, or the estimate is high after a slow moment), and the other
 * cost is refitted without it; holding the last positive value instead could
 * hold a slow moment's cost for good. */
static void refit_mixed(srv_step_cost *c)
{
    double r1 = RIDGE * c->mix[1][1] + 1e-12;
    double m00 = c->mix[0][0], m01 = c->mix[0][1], m11 = c->mix[1][1] + r1;
    double v0 = c->mix_y[0], v1 = c->mix_y[1] + r1 * c->theta[SRV_COST_PER_CLOSE];
    double det = m00 * m11 - m01 * m01;
    if (m00 <= 0 || det <= 0)
        return;
    double per_token = (v0 * m11 - v1 * m01) / det, per_close = (v1 * m00 - v0 * m01) / det;
    if (per_close < 0) {
        per_close = 0;
        per_token = v0 / m00;
    } else if (per_token < 0) {
        per_token = 0;
        per_close = v1 / m11;
    }
    c->theta[SRV_COST_PER_TOKEN] = per_token > 0 ? per_token : 0;
    c->theta[SRV_COST_PER_CLOSE] = per_close > 0 ? per_close : 0;
}

/* A decode-only step: its time less its blocks' closes feeds the decode fit. */
static void observe_decode(srv_step_cost *c, double k, int rows, int closes, double seconds)
{
    double x[2] = {1, rows}, y = seconds - c->theta[SRV_COST_PER_CLOSE] * closes;
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++)
            c->a[i][j] = k * c->a[i][j] + x[i] * x[j];
        c->b[i] = k * c->b[i] + x[i] * y;
    }
    c->decode_steps++;
    c->since_decode = 0;
    refit_decode(c);
}

void srv_step_cost_observe(srv_step_cost *c, int device, int rows, int tokens, int closes,
                           double seconds)
{
    if (device != c->device)
        srv_step_cost_reset(c, device);
    if (!(seconds >= 0) || rows < 0 || tokens < 0 || closes < 0 || rows + tokens == 0)
        return;
    double k = keep(c, rows, tokens, closes, seconds);
    c->steps++;
    if (tokens == 0) {
        observe_decode(c, k, rows, closes, seconds);
        return;
    }
    c->prefill_steps++;
    /* the prompt tokens' share of the step: what decoding alone would not take */
    double extra = seconds - srv_step_cost_predict(c, rows, 0, 0), t = tokens;
    if (rows == 0) { /* large chunks alone: only a seed of per_token, closes and all */
        c->solo_xx = FORGET * c->solo_xx + t * t;
        c->solo_xy = FORGET * c->solo_xy + t * extra;
        if (c->mix[0][0] <= 0 && c->solo_xy > 0)
            c->theta[SRV_COST_PER_TOKEN] = c->solo_xy / c->solo_xx;
        return;
    }
    c->since_decode++;
    c->mixed_steps++;
    /* a short prompt's last few tokens do not shrink the next chunk at once */
    c->last_prefill = tokens > c->last_prefill / 2 ? tokens : c->last_prefill / 2;
    double x[2] = {t, closes};
    for (int i = 0; i < 2; i++) {
        for (int j = 0; j < 2; j++)
            c->mix[i][j] = k * c->mix[i][j] + x[i] * x[j];
        c->mix_y[i] = k * c->mix_y[i] + x[i] * extra;
    }
    refit_mixed(c);
}
