/*
 * kernels_q8_body.h — the loops of a q8 product (kernels_q8.h), written once.
 *
 * Included by an isa_*.c once per variant of its q8 kernel, after it
 * defines vec16, V_STORE, V_STORE_TAIL (kernels_body.h) and:
 *   KQ_FN          the name of the function to define
 *   KQ_TILE        an always-inline kq_tile(x, t, M, wb, sb, groups, pf, acc):
 *                  acc[m] (lane r) = the product of activation row t + m with
 *                  row r of the block whose packed groups start at wb and whose
 *                  scales start at sb, M at most KQ_TILE_T; pf is set for the
 *                  first tile of a pass over the block, the one that reads its
 *                  weights from memory, which a kernel may prefetch
 *   KQ_TILE_T      rows of x per tile
 *   KQ_ATTR        attributes of the function (a target, or nothing)
 * Each lane's arithmetic is the same whatever the tile, so the result for a
 * row never depends on the rows around it.
 */

/* Rows of x per pass over a task's weights: a pass's activations stay in
 * the L1/L2 cache while its weights stream through. */
#ifndef KQ_TOKEN_BLOCK
#define KQ_TOKEN_BLOCK 32
#endif

#if KQ_TILE_T > 4
#error "the rows past the whole tiles take tiles of 1 to 3 rows"
#endif
KQ_ATTR static void KQ_FN(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                          int ldy)
{
    const int G = w->groups;
    for (int t0 = 0; t0 < T; t0 += KQ_TOKEN_BLOCK) {
        int t1 = t0 + KQ_TOKEN_BLOCK < T ? t0 + KQ_TOKEN_BLOCK : T;
        for (int b = b0; b < b1; b++) {
            const int8_t *wb = w->q + (size_t)b * G * 512;
            const float *sb = w->scale + (size_t)b * G * KQ_ROWS;
            int rows = w->N - b * KQ_ROWS < KQ_ROWS ? w->N - b * KQ_ROWS : KQ_ROWS;
            float *yb = y + (size_t)b * KQ_ROWS;
            vec16 acc[KQ_TILE_T];
            /* the rows past the last whole tile are a tile of their own, not a pass over
             * the block's weights each: a pass repeats the loads of w for every row */
            for (int t = t0, m; t < t1; t += m) {
                m = t1 - t < KQ_TILE_T ? t1 - t : KQ_TILE_T;
                switch (m) { /* M a constant in each call, so the tile's loops unroll */
                case KQ_TILE_T: KQ_TILE(x, t, KQ_TILE_T, wb, sb, G, t == t0, acc); break;
#if KQ_TILE_T > 3
                case 3: KQ_TILE(x, t, 3, wb, sb, G, t == t0, acc); break;
#endif
#if KQ_TILE_T > 2
                case 2: KQ_TILE(x, t, 2, wb, sb, G, t == t0, acc); break;
#endif
#if KQ_TILE_T > 1
                default: KQ_TILE(x, t, 1, wb, sb, G, t == t0, acc);
#endif
                }
                for (int r = 0; r < m; r++) {
                    if (rows == KQ_ROWS)
                        V_STORE(yb + (size_t)(t + r) * ldy, acc[r]);
                    else
                        V_STORE_TAIL(yb + (size_t)(t + r) * ldy, acc[r], rows);
                }
            }
        }
    }
}

#undef KQ_FN
#undef KQ_TILE
#undef KQ_ATTR
