/*
 * step_plan.c — how many prompt tokens one engine step feeds, and whose.
 * Decode rows always run; prefill gets the time the target leaves after
 * them (at least a minimum share, so prompts move even when decoding alone
 * nears or exceeds the target), in chunks of any length. Prompts share that
 * budget shortest-remaining first with aging (docs/architecture.md, "The
 * step's time budget").
 */
#include "step_plan.h"

#include <math.h>

#define FIT_STEPS 3 /* steps beside decode rows before the fit orders prompts by rate */
/* Prefill's time beside decode rows: at least this share of the target, so
 * that a step stays within 1.2 × the target however near decoding alone
 * comes to it (with two busy loops on 2 CPUs a decode step of the 340M
 * shape takes 85-97 ms of the 100 ms target: half a decode step on top, as
 * before, planned every step at ~1.4 × the target and the machine's stalls
 * took the largest gap past 2 ×) ... */
#define MIN_SHARE_TARGET 0.2
/* ... plus this share of the time decoding alone takes beyond the target:
 * where the target cannot be met at all, prompts still move at a share of
 * the time that grows towards a third. */
#define MIN_SHARE_OVER 0.5
#define MIN_TOKENS 4  /* and at least this many tokens */
#define GROWTH 2      /* a step's prompt tokens beside decode rows: at most this × the last's */
#define GROWTH_BASE 2 /* ... counted from at least this many (the cold step may feed 1) */
/* A step beside decode rows also takes at most this × a decode-only step, so
 * a stream's largest gap stays within a few of its median gaps even when
 * the target is loose for this machine (a fast GPU, a small model); 4 leaves a
 * batch-1 stream of a mid-size model on a CPU (~30-45 ms a token) the whole target,
 * so a long prompt beside it gets the time the target leaves (docs/architecture.md). */
#define GAP_FACTOR 4.0

static int min_int(int a, int b) { return a < b ? a : b; }

/* The seconds prompt tokens get beside decode rows that take decode: the
 * target (at most GAP_FACTOR decode steps) less the decode time, at least
 * the minimum share. */
static double time_left(const srv_plan_limits *l, double decode)
{
    double target = l->target_s < GAP_FACTOR * decode ? l->target_s : GAP_FACTOR * decode;
    double left = target - decode, over = decode > target ? decode - target : 0;
    double floor_s = MIN_SHARE_TARGET * target + MIN_SHARE_OVER * over;
    return left < floor_s ? floor_s : left;
}

/* No step has fed prompt tokens beside decode rows yet, so their cost there
 * is unknown (beside a row they cost up to twice what they cost in a step
 * that only prefills). What is known bounds it: a prompt token costs no more
 * than a step that decodes one row (that step reads every weight for one
 * row; a token among others shares the read). The first chunk is what the
 * time left buys at that price, at least 1 token; the chunks after it grow
 * from what each step measured. */
static int cold_chunk(const srv_step_cost *c, double left, int cap)
{
    double bound = srv_step_cost_predict(c, 1, 0, 0);
    double tokens = bound > 0 ? left / bound : 1;
    return tokens >= cap ? cap : tokens < 1 ? 1 : (int)tokens;
}

/* A prompt token's price beside decode rows: the mixed steps' fit. Where that
 * says 0 but a block's close has a cost (a starved machine's slow steps all
 * went into the closes), a decode row's, the same work for one more row of
 * activations: priced at nothing, a chunk's closes went unpriced too, and on a
 * machine giving the server a third of a core chunks of 256-785 tokens were
 * planned at 27-79 ms beside a stream held to 10 ms. With neither priced (a
 * few tokens rode on the rows' weight reads), 0: the chunks grow by GROWTH. */
static double token_price(const srv_step_cost *c)
{
    double p = c->theta[SRV_COST_PER_TOKEN];
    return p > 0 || c->theta[SRV_COST_PER_CLOSE] <= 0 ? p : c->theta[SRV_COST_PER_ROW];
}

int srv_plan_budget(const srv_plan_limits *l, const srv_step_cost *c, int decode_rows)
{
    int cap = l->max_tokens - decode_rows;
    if (cap <= 0)
        return 0;
    if (l->target_s <= 0 || decode_rows == 0)
        return cap; /* nobody waits for this step: whole chunks for throughput */
    if (c->decode_steps == 0 || c->since_decode >= SRV_PLAN_REFRESH_STEPS)
        return 0; /* measure what decoding alone costs first */
    double decode = srv_step_cost_predict(c, decode_rows, 0, l->decode_closes);
    double left = time_left(l, decode);
    if (c->mixed_steps == 0)
        return cold_chunk(c, left, cap);
    cap = min_int(cap, GROWTH * (c->last_prefill > GROWTH_BASE ? c->last_prefill : GROWTH_BASE));
    double per_token = token_price(c);
    if (per_token <= 0)
        return cap;
    double tokens = left / per_token;
    if (tokens >= cap)
        return cap;
    return min_int(cap, tokens < MIN_TOKENS ? MIN_TOKENS : (int)tokens);
}

/* Lower goes first: the tokens left, less the credit of its wait: the prompt
 * tokens steps like this one would have fed it since it arrived (rate,
 * tokens per second) beyond those it got. A prompt served all along keeps
 * its length (shortest first); one overtaken again and again climbs. With no
 * rate known yet, arrival order. */
static double priority(double rate, const srv_plan_prompt *p)
{
    if (rate <= 0)
        return -p->age_s;
    double credit = p->age_s * rate - p->fed;
    return p->remaining - (credit > 0 ? credit : 0);
}

/* Stable insertion sort of order by priority (n is the running prompts: small). */
static void sort_prompts(double rate, const srv_plan_prompt *p, int n, int *order)
{
    for (int k = 1; k < n; k++) {
        int i = order[k], j = k;
        double key = priority(rate, &p[i]);
        while (j > 0 && priority(rate, &p[order[j - 1]]) > key) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
}

/* The prompt tokens per second that steps of this budget feed. */
static double prefill_rate(const srv_step_cost *c, int decode_rows, int budget)
{
    double t = srv_step_cost_predict(c, decode_rows, budget, 0);
    if (c->mixed_steps < FIT_STEPS || c->theta[SRV_COST_PER_TOKEN] <= 0 || t <= 0)
        return 0;
    return budget / t;
}

/* With nothing decoding the step takes whole chunks, but a prompt it
 * finishes starts decoding at its end: once one has, what follows is held to
 * the time budget of that many decode rows (their first tokens must not wait
 * for a long prompt's whole chunk). Returns the budget left. */
static int after_starts(const srv_plan_limits *l, const srv_step_cost *c, int starts, int planned,
                        int budget)
{
    int timed = srv_plan_budget(l, c, starts) - planned;
    return min_int(budget, timed > 0 ? timed : 0);
}

/* Blocks a chunk of take tokens from position fed closes. */
static int closes(int C, int fed, int take) { return (fed + take) / C - fed / C; }

/* A block's close costs time of its own (step_cost.c), close_tok prompt
 * tokens' worth beside decode rows: take (at most budget) shrinks until its
 * tokens and its closes fit the budget, keeping its closes where fewer tokens still reach
 * them, else stopping short of the last block end (the next step closes
 * it, beside fewer tokens). Where not even that is left (the prompt stands
 * at a block's last token), the close happens now with the tokens up to
 * the block's end: a prompt always moves. Returns the tokens; *cost gets
 * their share of the budget. */
static int fit_closes(int C, int fed, int take, int budget, double close_tok, int *cost)
{
    int first = take;
    for (;;) {
        int k = closes(C, fed, take);
        double need = take + k * close_tok;
        if (take <= 0 || need <= budget) {
            *cost = take > 0 ? (int)ceil(need) : 0;
            break;
        }
        int last_end = (fed + take) / C * C - fed; /* the tokens that reach the last close */
        int same = (int)(budget - k * close_tok);
        take = same >= last_end ? same : last_end - 1;
    }
    if (take > 0)
        return take;
    int to_end = C - fed % C; /* then the close with just the block's last tokens */
    take = to_end < first ? to_end : first;
    *cost = budget;
    return take;
}

/* The tokens of prompt pr this step, within budget; *cost: their share of it. */
static int prompt_take(const srv_plan_limits *l, const srv_step_cost *c, int decode_rows,
                       const srv_plan_prompt *pr, int budget, int *cost)
{
    int take = min_int(pr->remaining, budget);
    *cost = take;
    double per_token = token_price(c), per_close = c->theta[SRV_COST_PER_CLOSE];
    if (l->target_s <= 0 || decode_rows == 0 || l->block_tokens <= 0 || per_token <= 0 ||
        per_close <= 0 || closes(l->block_tokens, pr->fed, take) == 0)
        return take;
    return fit_closes(l->block_tokens, pr->fed, take, budget, per_close / per_token, cost);
}

int srv_plan_prefill(const srv_plan_limits *l, const srv_step_cost *c, int decode_rows,
                     const srv_plan_prompt *p, int n, int *order, int *chunk)
{
    int budget = srv_plan_budget(l, c, decode_rows), planned = 0, starts = 0;
    for (int i = 0; i < n; i++) {
        order[i] = i;
        chunk[i] = 0;
    }
    if (l->target_s > 0)
        sort_prompts(prefill_rate(c, decode_rows, budget), p, n, order);
    for (int k = 0; k < n && budget > 0; k++) {
        int i = order[k], cost, take = prompt_take(l, c, decode_rows, &p[i], budget, &cost);
        chunk[i] = take;
        budget -= cost;
        planned += take;
        starts += take == p[i].remaining;
        if (l->target_s > 0 && decode_rows == 0 && starts > 0)
            budget = after_starts(l, c, starts, planned, budget);
    }
    return planned;
}
