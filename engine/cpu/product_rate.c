/*
 * product_rate.c — the matrix products of a batch-1 decode step run
 * alone, timed (the backend's product_pass; mhla_engine_product_rate).
 *
 * A batch-1 step reads every weight once, so its rate against the memory
 * bound is the question bench_decode asks. The step is the products plus
 * everything between them: the norms, the token mixer, the residual adds,
 * the wait at each job's end for the slowest thread. This pass runs the
 * products only, in the jobs and order a step runs them (per layer q, k, v
 * (and g) in one job, the output projection, gate and up in one job, down;
 * then the head), against one row of activations. Its rate over the same
 * weight bytes, set against a bandwidth reading, says how much of a step's
 * shortfall from the bound the products and their job boundaries account
 * for, and the step's rate against it says how much the rest costs. The
 * head alone (MHLA_PRODUCTS_HEAD: one matrix, one job, the largest a step
 * reads) is the kernels' own streaming rate, with one job's start and end.
 */
#include "cpu_backend.h"
#include "kernels.h"

#include <stdlib.h>

/* x gets small values that change from element to element (what the
 * products compute does not matter; the bytes they read do) */
static void fill_row(float *x, int n)
{
    for (int i = 0; i < n; i++)
        x[i] = (float)((i * 37) % 64 - 32) * (1.0f / 256);
}

/* One layer's products in a step's jobs, on the one row x: q, k, v (and g)
 * into y, the output projection and down into o, gate and up (with the
 * step's swiglu epilogue); -1 when the q, k, v products fail. */
static int layer_products(eng_cpu *e, const eng_layer *ly, const float *x, float *y[4], float *o,
                          float *gate, float *up)
{
    const mhla_config *c = &e->model->cfg;
    int D = c->hidden_size, I = c->intermediate_size;
    int qd = c->num_heads * c->head_k_dim, kd = c->num_kv_heads * c->head_k_dim;
    int vd = c->num_kv_heads * c->head_v_dim, od = c->num_heads * c->head_v_dim;
    k_matrix w[4] = {ly->wq, ly->wk, ly->wv, ly->wg};
    int n[4] = {qd, kd, vd, od};
    if (k_linear_multi(x, 1, D, w, n, y, n, k_matrix_present(ly->wg) ? 4 : 3, e->workers))
        return -1;
    k_linear(x, 1, od, ly->wo, D, o, D, e->workers);
    k_matrix wgu[2] = {ly->w_gate, ly->w_up};
    float *ygu[2] = {gate, up};
    eng_swiglu_job sw = {gate, up, 1, I};
    k_linear_pair(x, 1, D, wgu, I, ygu, I, eng_swiglu_cols, &sw, e->workers);
    k_linear(x, 1, I, ly->w_down, D, o, D, e->workers);
    return 0;
}

int eng_cpu_product_pass(void *ctx, mhla_products which, double *seconds, double *bytes,
                         mhla_error *err)
{
    eng_cpu *e = ctx;
    const mhla_model *m = e->model;
    const mhla_config *c = &m->cfg;
    int D = c->hidden_size, I = c->intermediate_size, V = c->vocab_size;
    int qd = c->num_heads * c->head_k_dim, kd = c->num_kv_heads * c->head_k_dim;
    int vd = c->num_kv_heads * c->head_v_dim, od = c->num_heads * c->head_v_dim;
    *seconds = *bytes = 0;
    if (which != MHLA_PRODUCTS_STEP && which != MHLA_PRODUCTS_HEAD)
        return eng_fail(err, "products to time: %d is neither the step's nor the head's", which);
    /* one row in, every output of the step's products out: x (up to I wide),
     * q k v g, the projections' D, gate and up, the head's V */
    int in = I > od ? I : od;
    in = in > D ? in : D;
    size_t outs = (size_t)qd + kd + vd + od + D + 2 * (size_t)I + V;
    float *buf = malloc(((size_t)in + outs) * sizeof *buf);
    if (!buf)
        return eng_fail_as(err, MHLA_ERR_NOMEM, "out of memory for the products-only pass");
    float *x = buf, *q = x + in, *k = q + qd, *v = k + kd, *g = v + vd, *o = g + od;
    float *gate = o + D, *up = gate + I, *logits = up + I;
    fill_row(x, in);

    double t0 = mhla_now();
    for (int l = 0; which == MHLA_PRODUCTS_STEP && l < c->num_layers; l++) {
        float *y[4] = {q, k, v, g};
        if (layer_products(e, &m->layers[l], x, y, o, gate, up)) {
            free(buf);
            return eng_fail_as(err, MHLA_ERR_INTERNAL, "layer %d: the q, k, v products failed", l);
        }
    }
    k_linear(x, 1, D, m->lm_head, V, logits, V, e->workers);
    double dt = mhla_now() - t0;

    free(buf);
    if (!(dt > 0))
        return eng_fail_as(err, MHLA_ERR_INTERNAL, "the products-only pass took no time");
    *seconds = dt;
    /* the step's weight bytes hold its norms' and mixing coefficients' too,
     * which the products do not read: ~0.05 % of them on the 340M shape */
    *bytes = which == MHLA_PRODUCTS_HEAD ? (double)eng_matrix_bytes(m->lm_head, (size_t)V * D)
                                         : (double)eng_step_weight_bytes(m);
    return 0;
}
