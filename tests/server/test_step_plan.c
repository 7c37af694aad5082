/*
 * The step planner (server/step_plan.c, server/step_cost.c) as a unit, driven
 * by a simulated engine whose step time is fixed + per_row × rows + per_token
 * × tokens with ±5 % noise:
 *   - the fit learns the simulated costs and starts over on a new device;
 *   - beside decode rows the first prompt chunks are small probes, and no
 *     chunk is more than twice the last;
 *   - every plan fits: chunks within each prompt's remaining tokens, decode
 *     rows plus prompt tokens within --max-batch-tokens, decode rows always
 *     left their place, and the step's true time within the target (or the
 *     decode time plus the minimum share: 20 % of the target plus half of
 *     what decoding alone takes beyond it, when the time left is less);
 *   - nothing decoding: whole chunks, held to the target once a prompt
 *     finishing in the step is about to start decoding;
 *   - a short prompt overtakes a long one that arrived before it;
 *   - no prompt starves: a long prompt finishes while short prompts keep
 *     arriving faster than the budget feeds them;
 *   - without a target: the token budget in admission order (the old plan);
 *   - on a second engine shaped like a CPU one (prompt tokens beside decode
 *     rows cost twice what they cost alone), under steady prompt pressure:
 *     the decode estimate stays the decode step's, the per-token cost beside
 *     decode rows is learned, every step keeps to the target and the gap;
 *   - a busy machine (the 340M engine 2.6 × slower: decoding alone takes 90 %
 *     of the target) from a cold start: every step beside the stream within
 *     1.2 × the target once the chunks have grown (what the machine's stalls
 *     leave of a 2 × bound; 1.5 × while they grow), and
 *     the prompt still moves (its first token within 2.5 × its prefill alone).
 *
 * usage: test_step_plan
 */
#include "step_plan.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"

#define MAX_P 256
#define CAP 2048

static const double F = 0.002, R = 0.0005, P = 0.00025; /* the simulated engine's costs */

/* A second engine, shaped like a CPU one (measured on a 340M model, bf16):
 * prompt tokens beside decode rows cost twice what they cost in the large
 * chunks of a step that only prefills (a small batch runs the matrix kernels
 * below their best), so no one line fits every step. */
static const double F2 = 0.004, R2 = 0.0031, P2_MIXED = 0.0045, P2_ALONE = 0.0023;
static int cpu_like; /* which engine the simulation runs */

/* A third, measured on the 340M shape (bf16, 2 threads, AVX-512;
 * bench/bench_step_shapes): a step that decodes reads every weight (35 ms),
 * prompt tokens beside the row ride along almost free until the products
 * turn compute-bound, then cost 3.7 ms each; a step that only prefills costs
 * 3.5 ms a token (at least the weights' read). One line through the origin
 * fitted on small chunks underestimates large ones. slow scales it all (a
 * busy or throttled machine). */
static int knee;
static double slow = 1.0;
static double spike = 1.0; /* the next step only takes this × its time (a preemption) */
/* A block's close beside decode rows (0: free): finishing the block's summary
 * and mixing the earlier ones', measured in the server's step log on the
 * 340M shape as ~33 ms on top of a ~90 ms step (large prefill-only chunks
 * have it in their per-token time already). */
static double close_s;
#define BLOCK 64
static double knee_time(int rows, int tokens)
{
    double t;
    if (rows == 0)
        t = tokens * 0.0035 > 0.033 ? tokens * 0.0035 : 0.033;
    else
        t = 0.034 + 0.001 * rows + 0.0037 * (tokens > 4 ? tokens - 4 : 0);
    return slow * t;
}

static double noise(void) { return 1.0 + (rnd(1001) - 500) / 10000.0; }
static double true_time(int rows, int tokens)
{
    if (knee)
        return knee_time(rows, tokens);
    if (cpu_like)
        return F2 + R2 * rows + (rows > 0 ? P2_MIXED : P2_ALONE) * tokens;
    return F + R * rows + P * tokens;
}

typedef struct {
    int len, remaining;
    double arrive, done;
} prompt;

typedef struct {
    srv_plan_limits lim;
    srv_step_cost cost;
    prompt p[MAX_P];
    int n;
    double now;
    long steps;
    int last_chunk; /* prompt tokens of the last step with decode rows */
    double last_t;  /* the last step's time */
} sim;

static void sim_init(sim *s, double target_s)
{
    memset(s, 0, sizeof *s);
    s->lim = (srv_plan_limits){.target_s = target_s, .max_tokens = CAP, .block_tokens = BLOCK};
    srv_step_cost_reset(&s->cost, 0);
}

static int arrive(sim *s, int len)
{
    if (s->n == MAX_P)
        return -1;
    s->p[s->n] = (prompt){.len = len, .remaining = len, .arrive = s->now, .done = -1};
    return s->n++;
}

/* Every property one plan must have. */
static void check_plan(const sim *s, int rows, const srv_plan_prompt *in, int n, const int *chunk,
                       int planned)
{
    int sum = 0;
    for (int i = 0; i < n; i++) {
        CHECK(chunk[i] >= 0 && chunk[i] <= in[i].remaining, "chunk %d of %d", chunk[i],
              in[i].remaining);
        sum += chunk[i];
    }
    CHECK(sum == planned, "planned %d, chunks sum to %d", planned, sum);
    CHECK(rows + planned <= (rows > CAP ? rows : CAP), "%d rows + %d tokens past the cap", rows,
          planned);
    /* (the measured engine, whose speed changes, checks its steps in test_cold_start) */
    if (rows > 0 && s->lim.target_s > 0 && s->cost.prefill_steps >= 3 && s->steps > 50 && !knee) {
        double decode = true_time(rows, 0), t = true_time(rows, planned);
        double target = s->lim.target_s < 4 * decode ? s->lim.target_s : 4 * decode;
        double floor = 0.2 * target + 0.5 * (decode > target ? decode - target : 0);
        double allowed =
            1.15 * (decode + floor > s->lim.target_s ? decode + floor : s->lim.target_s);
        CHECK(t <= allowed || planned <= 4, "step %ld: %d rows + %d tokens take %.1f ms > %.1f ms",
              s->steps, rows, planned, t * 1e3, allowed * 1e3);
        /* and a step beside decode rows stays within 4 decode-only steps (even gaps) */
        CHECK(t <= 1.15 * 4 * decode || planned <= 4,
              "step %ld: %d rows + %d tokens take %.1f ms > 4 x the decode step (%.1f ms)",
              s->steps, rows, planned, t * 1e3, decode * 1e3);
    }
    if (rows > 0 && s->lim.target_s > 0 && s->last_chunk == 0 && planned > 0)
        CHECK(planned == 1 ||
                  (planned - 1) * srv_step_cost_predict(&s->cost, 1, 0, 0) <= s->lim.target_s,
              "the first chunk beside decode rows: %d tokens, more than the target buys at a "
              "decode step per token",
              planned);
    int last = s->cost.last_prefill > 2 ? s->cost.last_prefill : 2;
    if (rows > 0 && s->lim.target_s > 0 && s->last_chunk > 0 && planned > 0)
        CHECK(planned <= 2 * last, "chunk %d after %d", planned, last);
}

/* One step: plan, check, run on the simulated engine, learn. Returns the tokens planned. */
static int step(sim *s, int rows)
{
    srv_plan_prompt in[MAX_P] = {{0}};
    int idx[MAX_P], order[MAX_P], chunk[MAX_P], n = 0, closes = 0;
    for (int i = 0; i < s->n; i++)
        if (s->p[i].remaining > 0) {
            idx[n] = i;
            in[n++] = (srv_plan_prompt){s->p[i].remaining, s->p[i].len - s->p[i].remaining,
                                        s->now - s->p[i].arrive};
        }
    int planned = srv_plan_prefill(&s->lim, &s->cost, rows, in, n, order, chunk);
    check_plan(s, rows, in, n, chunk, planned);
    for (int k = 0; k < n; k++) {
        int fed = s->p[idx[k]].len - s->p[idx[k]].remaining;
        closes += (fed + chunk[k]) / BLOCK - fed / BLOCK;
    }
    double close_t = rows > 0 ? slow * close_s * closes : 0;
    double t = (true_time(rows, planned) + close_t) * noise() * spike;
    spike = 1.0;
    s->now += t;
    s->last_t = t;
    for (int k = 0; k < n; k++) {
        prompt *p = &s->p[idx[k]];
        p->remaining -= chunk[k];
        if (p->remaining == 0 && chunk[k] > 0)
            p->done = s->now;
    }
    srv_step_cost_observe(&s->cost, 0, rows, planned, closes, t);
    if (rows > 0 && planned > 0)
        s->last_chunk = planned;
    s->steps++;
    return planned;
}

static void test_learning(void)
{
    sim s;
    sim_init(&s, 0.05);
    for (int k = 0; k < 400; k++) {
        if (k % 40 == 0)
            arrive(&s, 200 + rnd(1800));
        step(&s, 1 + rnd(16));
    }
    const double *th = s.cost.theta;
    CHECK(fabs(th[SRV_COST_FIXED] - F) < 0.2 * F && fabs(th[SRV_COST_PER_ROW] - R) < 0.2 * R &&
              fabs(th[SRV_COST_PER_TOKEN] - P) < 0.1 * P,
          "learned %.4f %.4f %.5f ms, simulated %.4f %.4f %.5f ms", th[0] * 1e3, th[1] * 1e3,
          th[2] * 1e3, F * 1e3, R * 1e3, P * 1e3);
    srv_step_cost_observe(&s.cost, 1, 4, 0, 0, 0.01);
    CHECK(s.cost.steps == 1 && s.cost.prefill_steps == 0 && s.cost.device == 1,
          "a new device starts the fit over (steps %ld)", s.cost.steps);
    int cold = srv_plan_budget(&s.lim, &s.cost, 4);
    CHECK(cold >= 1 && cold <= 4, "and the first chunk beside decode is small (%d)", cold);
}

static void test_budget_edges(void)
{
    sim s;
    sim_init(&s, 0.05);
    CHECK(srv_plan_budget(&s.lim, &s.cost, 0) == CAP, "no decode rows: whole chunks up to the cap");
    CHECK(srv_plan_budget(&s.lim, &s.cost, CAP) == 0, "decode rows fill the cap: no prefill");
    CHECK(srv_plan_budget(&s.lim, &s.cost, CAP + 5) == 0, "decode rows past the cap all stay");
    /* decoding alone exceeds the target: prompts still get the minimum share */
    for (int k = 0; k < 60; k++) {
        if (k % 20 == 0)
            arrive(&s, 2000);
        step(&s, k < 30 ? 4 : 120);
    }
    int b = srv_plan_budget(&s.lim, &s.cost, 120);
    CHECK(b >= 4 && b * P >= 0.15 * true_time(120, 0),
          "decode alone (%.1f ms) over the target: %d prompt tokens still fit",
          true_time(120, 0) * 1e3, b);
}

/* A short prompt arrives after a long one has prefilled for `head` steps
 * beside `rows` decode rows (120: decoding alone exceeds the target). */
/* Nothing decodes: whole chunks, but a prompt finishing in the step holds the
 * rest to the time budget of its first token. */
static void test_starts(void)
{
    sim s;
    sim_init(&s, 0.05);
    for (int k = 0; k < 30; k++) /* learn the costs */
        step(&s, 8), k == 0 ? arrive(&s, 1500) : 0;
    srv_plan_prompt in[2] = {{3000, 0, 0.01}, {40, 0, 0.0}};
    int order[2], chunk[2];
    int planned = srv_plan_prefill(&s.lim, &s.cost, 0, in, 1, order, chunk);
    CHECK(planned == CAP, "one long prompt, nothing decoding: a whole chunk (%d)", planned);
    planned = srv_plan_prefill(&s.lim, &s.cost, 0, in, 2, order, chunk);
    CHECK(chunk[1] == 40 && planned < CAP / 2 && true_time(1, planned) <= 1.25 * s.lim.target_s,
          "a short prompt finishing beside a long one: the long one's chunk (%d) keeps to the "
          "target (%.1f ms)",
          chunk[0], true_time(1, planned) * 1e3);
}

static void test_overtake(int rows, int head)
{
    sim s;
    sim_init(&s, 0.05);
    for (int k = 0; k < 20; k++) /* learn the costs on a first prompt */
        step(&s, rows), k == 0 ? arrive(&s, 600) : 0;
    while (s.p[0].remaining > 0)
        step(&s, rows);
    int lng = arrive(&s, 2000);
    for (int k = 0; k < head; k++)
        step(&s, rows);
    double step_s = true_time(rows, srv_plan_budget(&s.lim, &s.cost, rows));
    int shrt = arrive(&s, 60);
    while (s.p[shrt].remaining > 0 || s.p[lng].remaining > 0)
        step(&s, rows);
    CHECK(s.p[shrt].done < s.p[lng].done,
          "%d rows, after %d steps: the short prompt finished first (%.3f s vs %.3f s)", rows, head,
          s.p[shrt].done - s.p[shrt].arrive, s.p[lng].done - s.p[lng].arrive);
    double steps_needed = 60.0 / srv_plan_budget(&s.lim, &s.cost, rows) + 2;
    CHECK(s.p[shrt].done - s.p[shrt].arrive < 1.5 * steps_needed * step_s,
          "%d rows: the short prompt's wait (%.3f s) is the steps it needs (%.1f of %.3f s), not "
          "the long prompt's prefill",
          rows, s.p[shrt].done - s.p[shrt].arrive, steps_needed, step_s);
}

static void test_no_starvation(void)
{
    sim s;
    sim_init(&s, 0.05);
    int lng = -1, every = 1;
    long steps_at_long = 0;
    /* short prompts (175 tokens on average) arrive 1.25 × as fast as the
     * step's budget feeds them (overload), once the costs are learned */
    for (int k = 0; k < 4000 && s.n < MAX_P; k++) {
        if (k == 100) {
            lng = arrive(&s, 2000);
            steps_at_long = s.steps;
            int budget = srv_plan_budget(&s.lim, &s.cost, 8);
            every = (int)(175.0 / (1.25 * (budget > 0 ? budget : 1)));
            every = every < 1 ? 1 : every;
        }
        if (k >= 50 && (k < 100 || k % every == 0))
            arrive(&s, 150 + rnd(50));
        step(&s, 8);
        if (lng >= 0 && s.p[lng].remaining == 0)
            break;
    }
    CHECK(lng >= 0 && s.p[lng].remaining == 0,
          "the long prompt finished while short prompts kept arriving (%d left)",
          lng >= 0 ? s.p[lng].remaining : -1);
    int shorts_before = 0;
    for (int i = 0; i < s.n; i++)
        shorts_before += i != lng && s.p[i].remaining == 0;
    CHECK(shorts_before > 0, "and short prompts were served meanwhile (%d, %ld steps)",
          shorts_before, s.steps - steps_at_long);
}

static void test_mixed_run(void)
{
    sim s;
    sim_init(&s, 0.04);
    double max_wait_per_token = 0;
    for (int k = 0; k < 4000; k++) {
        if (rnd(12) == 0 && s.n < MAX_P)
            arrive(&s, rnd(4) == 0 ? 1000 + rnd(1001) : 10 + rnd(200));
        step(&s, rnd(10) == 0 ? 0 : 1 + rnd(24));
    }
    for (int i = 0; i < s.n; i++) {
        if (s.p[i].arrive > s.now - 30)
            continue;
        CHECK(s.p[i].remaining == 0, "prompt %d (%d tokens, arrived at %.1f s) starved", i,
              s.p[i].len, s.p[i].arrive);
        double w = (s.p[i].done - s.p[i].arrive) / s.p[i].len;
        max_wait_per_token = w > max_wait_per_token ? w : max_wait_per_token;
    }
    printf("mixed run: %ld steps, %d prompts, %.1f s simulated\n", s.steps, s.n, s.now);
}

/* Prompts arrive before anything decodes (large chunks alone), then 8 rows
 * decode under steady pressure from long prompts: every step beside the rows
 * has about the same shape, the case a joint fit of all three costs could not
 * tell apart. check_plan holds each step to the target and to 2 decode-only
 * steps; the decode estimate stays the decode step's. */
static void test_steady_pressure(void)
{
    cpu_like = 1;
    sim s;
    sim_init(&s, 0.4);
    for (int k = 0; k < 4; k++)
        arrive(&s, 1500);
    for (int k = 0; k < 6; k++)
        step(&s, 0);
    int mixed = 0, decode_only = 0;
    for (int k = 0; k < 1500; k++) {
        if (k % 30 == 0)
            arrive(&s, 1000 + rnd(1001));
        int planned = step(&s, 8);
        mixed += planned > 0;
        decode_only += planned == 0;
        double est = srv_step_cost_predict(&s.cost, 8, 0, 0), truth = true_time(8, 0);
        if (k > 50)
            CHECK(est > 0.8 * truth && est < 1.2 * truth,
                  "step %d: decoding 8 rows estimated at %.1f ms, takes %.1f ms", k, est * 1e3,
                  truth * 1e3);
    }
    CHECK(mixed > 1000 && decode_only < 100,
          "prompts fed on %d of 1,500 steps beside the rows (%d decode-only)", mixed, decode_only);
    CHECK(fabs(s.cost.theta[SRV_COST_PER_TOKEN] - P2_MIXED) < 0.15 * P2_MIXED,
          "a prompt token beside the rows estimated at %.2f ms, costs %.2f ms",
          s.cost.theta[SRV_COST_PER_TOKEN] * 1e3, P2_MIXED * 1e3);
    cpu_like = 0;
}

/* The step beside the stream with the largest time, after `from` steps of s. */
static double run_prompt(sim *s, int p, int rows, int *steps)
{
    double worst = 0;
    for (*steps = 0; s->p[p].remaining > 0; ++*steps) {
        step(s, rows);
        worst = s->last_t > worst ? s->last_t : worst;
    }
    return worst;
}

/* A fresh server (nothing learned) on the measured engine: a stream's
 * 5-token prompt prefills alone and it decodes 10 tokens; then a prompt of
 * len tokens arrives (its index). */
static int cold_stream(sim *s, int len)
{
    sim_init(s, 0.1);
    s->lim.max_tokens = 512;
    step(s, 0 * arrive(s, 5));
    for (int k = 0; k < 10; k++)
        step(s, 1);
    return arrive(s, len);
}

/* A fresh server (nothing learned) on the engine measured on the 340M shape:
 * a stream's short prompt prefills alone, it decodes 10 tokens, then a
 * 1,000-token prompt arrives. The first step beside the stream and every
 * one after it stay within 1.5 × the target, and the prompt's first token
 * comes within 1.6 × its prefill alone. Then the machine slows down while a
 * 2,000-token prompt prefills beside the stream: gradually (5 % a step, to
 * twice as slow) every step stays within 1.5 × the target; at once (twice as
 * slow from one step to the next), the step that meets it is over, the ones
 * after it within again. */
static void test_cold_start(void)
{
    knee = 1;
    slow = 1.0;
    sim s;
    int p = cold_stream(&s, 1000), n;
    double worst = run_prompt(&s, p, 1, &n), alone = knee_time(0, 512) + knee_time(0, 488);
    double ttft = s.p[p].done - s.p[p].arrive;
    CHECK(worst <= 1.5 * s.lim.target_s,
          "cold start: the largest of %d steps beside the stream took %.1f ms, target %.0f ms", n,
          worst * 1e3, s.lim.target_s * 1e3);
    CHECK(ttft <= 1.6 * alone, "cold start: the prompt's first token after %.2f s, alone %.2f s",
          ttft, alone);
    printf("cold start: largest step %.1f ms (target %.0f ms), TTFT %.2f s = %.2f x alone\n",
           worst * 1e3, s.lim.target_s * 1e3, ttft, ttft / alone);
    p = arrive(&s, 2000);
    double over = 0;
    for (int k = 0; k < 60; k++) {
        slow = slow * 1.05 < 2 ? slow * 1.05 : 2;
        step(&s, 1);
        over = s.last_t > over ? s.last_t : over;
    }
    CHECK(over <= 1.5 * s.lim.target_s,
          "a machine slowing down 5 %% a step: the largest step %.1f ms, target %.0f ms",
          over * 1e3, s.lim.target_s * 1e3);
    slow = 1.0;
    for (int k = 0; k < 40; k++)
        step(&s, 1);
    slow = 2.0;
    step(&s, 1);
    worst = run_prompt(&s, p, 1, &n);
    CHECK(worst <= 1.5 * s.lim.target_s,
          "twice as slow at once: after the step that met it, the largest of %d took %.1f ms", n,
          worst * 1e3);
    printf("slowing down: largest step %.1f ms gradually, %.1f ms after a jump\n", over * 1e3,
           worst * 1e3);
    knee = 0;
    slow = 1.0;
}

/* Slow moments on the measured engine while a 1,000-token prompt prefills
 * beside the stream: one step beside it 5 × its time, later a decode-only
 * step 3 × its time (preemptions). The steps after them stay within 1.5 × the
 * target, and the prompt's first token comes within 1.6 × its prefill alone
 * plus the time the slow steps lost: a slow moment's cost is not kept. */
static void test_slow_moments(void)
{
    knee = 1;
    sim s;
    int p = cold_stream(&s, 1000), spiked_decode = 0;
    double worst = 0, lost = 0;
    for (int n = 0; s.p[p].remaining > 0; n++) {
        int decode_only = srv_plan_budget(&s.lim, &s.cost, 1) == 0;
        double f = n == 20 ? 5 : n > 30 && decode_only && !spiked_decode++ ? 3 : 1;
        spike = f;
        step(&s, 1);
        if (f > 1)
            lost += s.last_t - s.last_t / f;
        else
            worst = s.last_t > worst ? s.last_t : worst;
    }
    double ttft = s.p[p].done - s.p[p].arrive, alone = knee_time(0, 512) + knee_time(0, 488);
    CHECK(spiked_decode && worst <= 1.5 * s.lim.target_s,
          "slow moments: the largest other step took %.1f ms, target %.0f ms", worst * 1e3,
          s.lim.target_s * 1e3);
    CHECK(ttft <= 1.6 * alone + lost,
          "slow moments: the prompt's first token after %.2f s, alone %.2f s, lost %.2f s", ttft,
          alone, lost);
    printf("slow moments: largest other step %.1f ms, TTFT %.2f s = %.2f x alone (%.2f s lost)\n",
           worst * 1e3, ttft, ttft / alone, lost);
    knee = 0;
}

/* The cold start on a busy machine: the 340M engine 2.6 × slower, so decoding
 * alone takes ~90 ms of the 100 ms target (two busy loops on 2 CPUs). Each
 * step beside the stream gets only the minimum share; planned within 1.2 ×
 * the target once the chunks have grown from the cold chunk (within 1.5 ×
 * while they grow: the first 4 tokens ride free on the row's weight reads, so
 * the next doubling meets their full cost), a stall of the machine of 1.6 ×
 * still keeps the stream's gap
 * within 2 × (half a decode step as the share planned ~1.4 × the target, so
 * the stalls measured there took it to 2.2-2.5 ×). The prompt still moves:
 * its first token within 2.5 × its prefill alone on the same machine. */
static void test_busy_machine(void)
{
    knee = 1;
    slow = 2.6;
    sim s;
    int p = cold_stream(&s, 1000), n = 0;
    double growing = 0, worst = 0, alone = knee_time(0, 512) + knee_time(0, 488);
    for (; s.p[p].remaining > 0; n++) {
        step(&s, 1);
        if (n < 8) /* the chunks grow from the cold chunk */
            growing = s.last_t > growing ? s.last_t : growing;
        else
            worst = s.last_t > worst ? s.last_t : worst;
    }
    double ttft = s.p[p].done - s.p[p].arrive;
    CHECK(worst <= 1.2 * 1.05 * s.lim.target_s,
          "busy machine (decoding alone %.0f ms): the largest of %d steps beside the stream took "
          "%.1f ms, over 1.2 x the %.0f ms target",
          knee_time(1, 0) * 1e3, n - 8, worst * 1e3, s.lim.target_s * 1e3);
    CHECK(growing <= 1.5 * s.lim.target_s,
          "busy machine: while the chunks grew, a step took %.1f ms, over 1.5 x the target",
          growing * 1e3);
    CHECK(ttft <= 2.5 * alone, "busy machine: the prompt's first token after %.2f s, alone %.2f s",
          ttft, alone);
    printf("busy machine: largest step %.1f ms (%.1f ms while the chunks grew; decode %.1f ms, "
           "target %.0f ms), TTFT %.2f s = %.2f x alone\n",
           worst * 1e3, growing * 1e3, knee_time(1, 0) * 1e3, s.lim.target_s * 1e3, ttft,
           ttft / alone);
    knee = 0;
    slow = 1.0;
}

/* Blocks' closes with a cost of their own beside the stream, from a cold
 * start: 33 ms (measured on the 340M shape with each new state page faulted
 * in inside the close) and 9 ms (with pages made ahead, kvstate's stash), on
 * a quiet machine and on the busy one (everything 2.6 × slower). Once the
 * chunks have grown every step keeps within 1.15 × the target when quiet
 * (averaged into the per-token cost, a 33 ms close made every third step
 * 1.2-1.3 × its prediction) and 1.5 × when busy, where a close costs most of
 * the time prompt tokens get and goes in a step beside the row with only the
 * block's last tokens; the cost of a close is learned, and the prompt's first
 * token comes within 1.6 × its prefill alone (2.5 × busy). */
static void test_block_closes(void)
{
    const struct {
        double slow, close_s, bound;
    } cases[] = {{1.0, 0.033, 1.15}, {1.0, 0.009, 1.15}, {2.6, 0.009, 1.5}};
    knee = 1;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        slow = cases[c].slow;
        close_s = cases[c].close_s;
        sim s;
        int p = cold_stream(&s, 1000), n = 0;
        double worst = 0, alone = knee_time(0, 512) + knee_time(0, 488);
        for (; s.p[p].remaining > 0; n++) {
            step(&s, 1);
            worst = n >= 8 && s.last_t > worst ? s.last_t : worst;
        }
        double ttft = s.p[p].done - s.p[p].arrive, got = s.cost.theta[SRV_COST_PER_CLOSE];
        const char *name = slow > 1 ? "busy machine" : "quiet machine";
        CHECK(worst <= cases[c].bound * s.lim.target_s,
              "%s, %.0f ms closes: the largest of %d steps beside the stream took %.1f ms, over "
              "%.2f x the %.0f ms target",
              name, close_s * 1e3, n - 8, worst * 1e3, cases[c].bound, s.lim.target_s * 1e3);
        /* (the measured engine's prompt tokens are not one line through the origin, and the
         * fit takes some of the difference: within half) */
        CHECK(fabs(got - slow * close_s) < 0.5 * slow * close_s,
              "%s: a block's close learned as %.1f ms, costs %.1f ms", name, got * 1e3,
              slow * close_s * 1e3);
        CHECK(ttft <= (slow > 1 ? 2.5 : 1.6) * alone,
              "%s, %.0f ms closes: the prompt's first token after %.2f s, alone %.2f s", name,
              close_s * 1e3, ttft, alone);
        printf("block closes of %.0f ms (%s): largest step %.1f ms, a close learned as %.1f ms, "
               "TTFT %.2f s = %.2f x alone\n",
               close_s * 1e3, name, worst * 1e3, got * 1e3, ttft, ttft / alone);
    }
    knee = 0;
    slow = 1.0;
    close_s = 0;
}

/* Costs as if learned: past the cold steps, the last step beside decode rows fed
 * last_prefill tokens. */
static void learned_costs(srv_step_cost *c, int last_prefill, double fixed, double per_row,
                          double per_token, double per_close)
{
    srv_step_cost_reset(c, 0);
    c->decode_steps = 1;
    c->mixed_steps = 5;
    c->since_decode = 1;
    c->last_prefill = last_prefill;
    c->theta[SRV_COST_FIXED] = fixed;
    c->theta[SRV_COST_PER_ROW] = per_row;
    c->theta[SRV_COST_PER_TOKEN] = per_token;
    c->theta[SRV_COST_PER_CLOSE] = per_close;
}

/* One prompt's chunk for a set of costs: decode 30 ms a row, a prompt token 2 ms, a close
 * close_ms, the target 100 ms (35 tokens' budget beside one row). */
static int close_chunk(double close_ms, int decode_closes, int remaining, int fed)
{
    srv_plan_limits l = {.target_s = 0.1,
                         .max_tokens = 512,
                         .block_tokens = 64,
                         .decode_closes = decode_closes};
    srv_step_cost c;
    learned_costs(&c, 100, 0.015, 0.015, 0.002, close_ms * 1e-3);
    srv_plan_prompt in[2] = {{remaining, fed, 0.01}, {4000, 0, 0.0}}; /* the first goes first */
    int order[2], chunk[2];
    srv_plan_prefill(&l, &c, 1, in, 2, order, chunk);
    int closes = (fed + chunk[0]) / 64 - fed / 64 + chunk[1] / 64 + decode_closes;
    double ms = 30 + 2.0 * (chunk[0] + chunk[1]) + close_ms * closes;
    /* within the target, but for a close dearer than the budget with 1 token and nothing else */
    CHECK(ms <= 100.0 + 1e-9 || (chunk[0] == 1 && chunk[1] == 0),
          "a close of %.0f ms at %d: %d + %d tokens and %d closes plan %.1f ms", close_ms, fed,
          chunk[0], chunk[1], closes, ms);
    return chunk[0];
}

/* The chunk rules at a block's end (fit_closes): a chunk keeps its close with fewer
 * tokens where that fits, or stops short of the block's end; a prompt at a block's last
 * token closes it with that token even where the close costs more than the budget; a
 * prompt's last tokens close their block within the step's budget, not their own count;
 * the decode rows' closes come off the budget first. */
static void test_close_chunks(void)
{
    struct {
        double close_ms;
        int decode_closes, remaining, fed, want;
        const char *what;
    } cases[] = {
        {20, 0, 1000, 0, 35, "no block end in reach: the whole budget"},
        {20, 0, 1000, 40, 25, "a close of 10 tokens' worth: kept, with 25 tokens"},
        {50, 0, 1000, 50, 13, "a close of 25 tokens' worth that does not fit: short of the end"},
        {50, 0, 1000, 63, 10, "at the block's last token: the close with 10 tokens"},
        {80, 0, 1000, 63, 1, "a close dearer than the budget: with the block's last token"},
        {50, 0, 10, 60, 10, "a prompt's last 10 tokens and a close within the budget"},
        {50, 1, 1000, 0, 10, "a decode row's close: the budget less its 50 ms"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = close_chunk(cases[i].close_ms, cases[i].decode_closes, cases[i].remaining,
                              cases[i].fed);
        CHECK(got == cases[i].want, "%s: %d tokens, want %d", cases[i].what, got, cases[i].want);
    }
}

/* The mixed steps' fit can say a prompt token costs nothing beside the rows: on a machine
 * giving the server a third of a core it read 0 a token and 5-6 ms a close. The planner
 * then prices a token as a decode row, so a chunk's closes still count: each step it plans
 * beside the stream stays within the target at those prices, and the prompt moves. */
static void test_free_tokens(void)
{
    srv_plan_limits l = {.target_s = 0.010, .max_tokens = 2048, .block_tokens = 64};
    srv_step_cost c;
    learned_costs(&c, 400, 0.0003, 0.00005, 0, 0.0055);
    const int fed[] = {0, 40, 63, 256};
    for (size_t i = 0; i < sizeof fed / sizeof fed[0]; i++) {
        srv_plan_prompt in[1] = {{1900 - fed[i], fed[i], 0.0}};
        int order[1], chunk[1];
        int planned = srv_plan_prefill(&l, &c, 1, in, 1, order, chunk);
        int closes = (fed[i] + planned) / 64 - fed[i] / 64;
        double price = c.theta[SRV_COST_PER_ROW];
        double s = c.theta[SRV_COST_FIXED] + price * (1 + planned) + 0.0055 * closes;
        CHECK(planned > 0 && s <= l.target_s + 1e-12,
              "tokens priced at 0, closes at 5.5 ms, from token %d: %d tokens and %d closes "
              "plan %.1f ms beside a row (target %.0f ms)",
              fed[i], planned, closes, s * 1e3, l.target_s * 1e3);
    }
}

static void test_token_budget(void)
{
    sim s;
    sim_init(&s, 0);
    srv_plan_prompt in[3] = {{500, 0, 0.1}, {100, 0, 0.05}, {300, 0, 0.0}};
    int order[3], chunk[3];
    int planned = srv_plan_prefill(&s.lim, &s.cost, 1848, in, 3, order, chunk);
    CHECK(planned == 200 && chunk[0] == 200 && chunk[1] == 0 && chunk[2] == 0,
          "no target: the token budget in admission order (%d: %d %d %d)", planned, chunk[0],
          chunk[1], chunk[2]);
    planned = srv_plan_prefill(&s.lim, &s.cost, 1400, in, 3, order, chunk);
    CHECK(planned == 648 && chunk[0] == 500 && chunk[1] == 100 && chunk[2] == 48,
          "no target: whole prompts first come, first served (%d: %d %d %d)", planned, chunk[0],
          chunk[1], chunk[2]);
}

int main(void)
{
    test_learning();
    test_free_tokens();
    test_budget_edges();
    test_starts();
    test_overtake(8, 2);
    test_overtake(8, 8);
    test_overtake(120, 10);
    test_no_starvation();
    test_mixed_run();
    test_steady_pressure();
    test_cold_start();
    test_slow_moments();
    test_busy_machine();
    test_block_closes();
    test_close_chunks();
    test_token_budget();
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("step planner: all checks passed\n");
    return 0;
}
