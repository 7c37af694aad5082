/*
 * step_cost.c — the engine's step time learned online: step_time ≈ fixed +
 * per_row × decode rows + per_token × prefill tokens, fitted by exponentially
 * weighted least squares, so the costs follow the machine as its load
 * changes. Each refit is pulled slightly towards the previous estimates: a
 * cost the recent steps say nothing about (no prefill for a while, always
 * the same number of rows) keeps its last value instead of drifting.
 */
#include "step_plan.h"

#include <string.h>

#define FORGET 0.95 /* each older step weighs 5 % less: about the last 20 steps count */
#define RIDGE 1e-3  /* the pull towards the previous estimates, relative to the data */

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

/* Solves m x = v by Gaussian elimination with partial pivoting; -1 when m is
 * singular. m and v are overwritten. */
static int solve3(double m[3][3], double v[3], double x[3])
{
    for (int k = 0; k < 3; k++) {
        int p = k;
        for (int i = k + 1; i < 3; i++)
            if ((m[i][k] < 0 ? -m[i][k] : m[i][k]) > (m[p][k] < 0 ? -m[p][k] : m[p][k]))
                p = i;
        if (m[p][k] == 0)
            return -1;
        for (int j = 0; j < 3; j++) {
            double t = m[k][j];
            m[k][j] = m[p][j];
            m[p][j] = t;
        }
        double t = v[k];
        v[k] = v[p];
        v[p] = t;
        for (int i = k + 1; i < 3; i++) {
            double f = m[i][k] / m[k][k];
            for (int j = k; j < 3; j++)
                m[i][j] -= f * m[k][j];
            v[i] -= f * v[k];
        }
    }
    for (int k = 2; k >= 0; k--) {
        double s = v[k];
        for (int j = k + 1; j < 3; j++)
            s -= m[k][j] * x[j];
        x[k] = s / m[k][k];
    }
    return 0;
}

/* The regularised normal equations with the costs not in free held at
 * their previous estimates. */
static void build(const srv_step_cost *c, const int free_[3], double m[3][3], double v[3])
{
    for (int i = 0; i < 3; i++) {
        double r = RIDGE * c->a[i][i] + 1e-12;
        for (int j = 0; j < 3; j++)
            m[i][j] = free_[i] ? c->a[i][j] : i == j;
        m[i][i] += free_[i] ? r : 0;
        v[i] = free_[i] ? c->b[i] + r * c->theta[i] : c->theta[i];
    }
}

/* New estimates from the sums. A cost the fit makes negative (noise, or steps
 * too alike to tell the costs apart) keeps its previous estimate and the
 * others are refitted around it: costs are never negative, and a per-token
 * cost once learned never collapses to nothing. */
static void refit(srv_step_cost *c)
{
    int free_[3] = {1, 1, 1};
    for (int pass = 0; pass < 3; pass++) {
        double m[3][3], v[3], x[3] = {0, 0, 0};
        build(c, free_, m, v);
        if (solve3(m, v, x))
            return;
        int neg = 0;
        for (int i = 0; i < 3; i++)
            if (free_[i] && x[i] < 0) {
                free_[i] = 0;
                neg = 1;
            }
        if (!neg) {
            memcpy(c->theta, x, sizeof x);
            return;
        }
    }
}

void srv_step_cost_observe(srv_step_cost *c, int device, int rows, int tokens, double seconds)
{
    if (device != c->device)
        srv_step_cost_reset(c, device);
    if (!(seconds >= 0) || rows < 0 || tokens < 0 || rows + tokens == 0)
        return;
    double x[3] = {1, rows, tokens};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++)
            c->a[i][j] = FORGET * c->a[i][j] + x[i] * x[j];
        c->b[i] = FORGET * c->b[i] + x[i] * seconds;
    }
    c->steps++;
    c->prefill_steps += tokens > 0;
    if (tokens > 0 && rows > 0)
        c->last_prefill = tokens;
    refit(c);
}
