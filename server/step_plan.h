/*
 * step_plan.h — how much prompt work one engine step takes: the engine's
 * learned step costs and the planner that sizes each step's prefill to a time
 * budget. Pure C with no server state, so that tests drive it without an
 * engine (tests/server/test_step_plan.c); server/sched.c calls it.
 */
#ifndef MHLA_SERVER_STEP_PLAN_H
#define MHLA_SERVER_STEP_PLAN_H

/* ---- step_cost.c: a step decoding rows and feeding tokens prompt tokens
 * while closing closes blocks takes fixed + per_row × rows + per_token ×
 * tokens + per_close × closes; fixed and per_row come from the steps that
 * only decode, per_token and per_close from those that also feed prompts */

typedef struct {
    double a[2][2], b[2];       /* decode-only steps: weighted normal equations of fixed, per_row */
    double mix[2][2], mix_y[2]; /* steps that decode and feed prompts: weighted normal
                                   equations of per_token, per_close */
    double solo_xx, solo_xy;    /* steps that only feed prompts: its seed until such a step */
    double theta[4];    /* the estimates: fixed, per decode row, per prefill token, per block
                           closed (seconds) */
    long steps;         /* steps observed since the last reset */
    long prefill_steps; /* of them, steps that fed prompt tokens */
    long decode_steps;  /* of them, steps that only decoded */
    long mixed_steps;   /* of them, steps that decoded and fed prompts */
    long since_decode;  /* steps that decoded and fed prompts since the last decode-only one */
    int last_prefill;   /* prompt tokens of the last step that also decoded, or half
                           the value before it when that is more */
    int device;         /* the engine's device the costs belong to */
} srv_step_cost;

enum { SRV_COST_FIXED, SRV_COST_PER_ROW, SRV_COST_PER_TOKEN, SRV_COST_PER_CLOSE, SRV_COST_N };

/* Forgets every estimate (a new device, a new server). */
void srv_step_cost_reset(srv_step_cost *c, int device);
/* One step of rows decode rows and tokens prefill tokens, in which closes
 * blocks of its sequences closed, took seconds on device (a different
 * device than before resets the fit first). */
void srv_step_cost_observe(srv_step_cost *c, int device, int rows, int tokens, int closes,
                           double seconds);
/* The predicted seconds of a step of that shape. */
double srv_step_cost_predict(const srv_step_cost *c, int rows, int tokens, int closes);

/* ---- step_plan.c: the prefill budget and its split among prompts ---------- */

/* Under steady prompt pressure one step in this many only decodes, so the
 * decode cost the budget rests on is measured afresh (a few % of the prompt
 * throughput beside decode rows); the scheduler drafts nothing on one step
 * in this many for the same reason. */
enum { SRV_PLAN_REFRESH_STEPS = 32 };

typedef struct {
    double target_s;   /* the step time to stay within; 0: token budget only, FCFS chunks */
    int max_tokens;    /* hard cap on decode rows + prefill tokens per step */
    int block_tokens;  /* tokens per block: a chunk reaching a block's end closes it */
    int decode_closes; /* blocks this step's decode rows close */
} srv_plan_limits;

typedef struct {
    int remaining; /* prompt tokens not fed yet (> 0) */
    int fed;       /* prompt tokens fed (or taken from the prefix cache) so far: its position */
    double age_s;  /* since its request arrived */
} srv_plan_prompt;

/* Prompt tokens this step may feed besides decode_rows decode rows (which
 * always run): the cap when there is no target or no decode row; else what
 * the time left after the decode rows buys, at least a minimum share (a
 * fifth of the target, plus half of what decoding alone takes beyond it), and
 * never more than twice the last such step's (a wrong estimate costs one
 * step, not a stall); while no step has fed prompts beside decode rows, what
 * the time left buys at a decode step's time per token (no prompt token costs
 * more than a step of its own); none on a step that measures the decode cost
 * (the first beside decode rows, then one in SRV_PLAN_REFRESH_STEPS while
 * prompts keep coming). */
int srv_plan_budget(const srv_plan_limits *l, const srv_step_cost *c, int decode_rows);

/* Splits the budget among n waiting prompts (given in admission order):
 * chunk[i] gets prompt i's tokens this step (0: none). Without a target in
 * admission order; with one, shortest remaining first with aging: a prompt's
 * wait counts as the prompt tokens steps of this budget would have fed it
 * meanwhile, less those it got, so a long prompt is overtaken but never
 * starved. With nothing decoding, once a prompt finishes in the step (and
 * so starts decoding), the tokens after it keep to the time budget. order (n ints) is scratch.
 * Returns the tokens planned. */
int srv_plan_prefill(const srv_plan_limits *l, const srv_step_cost *c, int decode_rows,
                     const srv_plan_prompt *p, int n, int *order, int *chunk);

#endif
