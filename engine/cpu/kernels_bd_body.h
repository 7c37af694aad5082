/*
 * kernels_bd_body.h — the loops of a bf16 dot product (kernels_bd.h),
 * written once. Included by an isa_*.c once per variant of its kernel,
 * after kernels_body.h's vec16, V_ZERO, V_STORE and v_reduce, defining:
 *   BD_FN          the name of the function to define
 *   BD_ATTR        its attributes (a target, or nothing)
 *   bd_op, BD_LOAD(p), BD_LOAD_TAIL(p, n), BD_MAC(acc, a, b)
 *                  an operand of 32 bf16 (a step), loaded whole or its first
 *                  n (zero past them), and the step of 16 lanes' chains:
 *                  acc_l = fma(a[2l+1], b[2l+1], acc_l), then the even pair
 *   BD_TILE_T x BD_TILE_J   the register tile (rows of x by rows of w)
 *   BD_TILE_STORE(acc, y, ldy)   optional: a whole tile reduced at once, in
 *                  v_reduce's tree
 * Each value is its own chain whatever tile it fell in, so the bits do not
 * depend on the batch, the tile or the thread.
 */

#ifndef BD_X_BLOCK_BYTES
#define BD_X_BLOCK_BYTES (256 * 1024)
#endif

/* M rows of x (rounded, Kp apart) by MJ rows of w (K apart): M and MJ are
 * constants at every call site. */
BD_ATTR static inline __attribute__((always_inline)) void
BD_TILE_FN(const uint16_t *x, int Kp, const uint16_t *w, int K, float *y, int ldy, int M, int MJ)
{
    vec16 acc[BD_TILE_T][BD_TILE_J];
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++)
            acc[t][j] = V_ZERO();
    int s = 0;
    for (; s + 32 <= K; s += 32) {
        bd_op xv[BD_TILE_T];
        for (int t = 0; t < M; t++)
            xv[t] = BD_LOAD(x + (size_t)t * Kp + s);
        for (int j = 0; j < MJ; j++) {
            bd_op wv = BD_LOAD(w + (size_t)j * K + s);
            for (int t = 0; t < M; t++)
                acc[t][j] = BD_MAC(acc[t][j], xv[t], wv);
        }
    }
    if (s < K) { /* x is zero past K already */
        bd_op xv[BD_TILE_T];
        for (int t = 0; t < M; t++)
            xv[t] = BD_LOAD(x + (size_t)t * Kp + s);
        for (int j = 0; j < MJ; j++) {
            bd_op wv = BD_LOAD_TAIL(w + (size_t)j * K + s, K - s);
            for (int t = 0; t < M; t++)
                acc[t][j] = BD_MAC(acc[t][j], xv[t], wv);
        }
    }
#ifdef BD_TILE_STORE
    if (M == BD_TILE_T && MJ == BD_TILE_J) {
        BD_TILE_STORE(acc, y, ldy);
        return;
    }
#endif
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++)
            y[(size_t)t * ldy + j] = v_reduce(acc[t][j]);
}

/* Rows of x in blocks that stay in L2 while a task's rows of w stream past
 * them; whole tiles, then the rows of x and of w left over. */
BD_ATTR static void BD_FN(const uint16_t *x, int T, int Kp, const uint16_t *w, int K, int j0,
                          int j1, float *y, int ldy)
{
    int tb = (int)(BD_X_BLOCK_BYTES / ((size_t)Kp * 2));
    tb = tb < 16 ? 16 : tb > 128 ? 128 : tb;
    for (int t0 = 0; t0 < T; t0 += tb) {
        int t1 = t0 + tb < T ? t0 + tb : T;
        int j = j0;
        for (; j + BD_TILE_J <= j1; j += BD_TILE_J) {
            const uint16_t *wj = w + (size_t)j * K;
            int t = t0;
            for (; t + BD_TILE_T <= t1; t += BD_TILE_T)
                BD_TILE_FN(x + (size_t)t * Kp, Kp, wj, K, y + (size_t)t * ldy + j, ldy, BD_TILE_T,
                           BD_TILE_J);
            for (; t < t1; t++)
                BD_TILE_FN(x + (size_t)t * Kp, Kp, wj, K, y + (size_t)t * ldy + j, ldy, 1,
                           BD_TILE_J);
        }
        for (; j < j1; j++)
            for (int t = t0; t < t1; t++)
                BD_TILE_FN(x + (size_t)t * Kp, Kp, w + (size_t)j * K, K, y + (size_t)t * ldy + j,
                           ldy, 1, 1);
    }
}

#undef BD_FN
#undef BD_TILE_FN
#undef BD_ATTR
#undef bd_op
#undef BD_LOAD
#undef BD_LOAD_TAIL
#undef BD_MAC
