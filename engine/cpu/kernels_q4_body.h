/*
 * kernels_q4_body.h — the loops of a q4 product (kernels_q4.h), written once.
 *
 * Included by an isa_*.c once per variant of its q4 kernel, after it
 * defines vec16, V_STORE, V_STORE_TAIL (kernels_body.h) and:
 *   K4_FN          the name of the function to define
 *   K4_TILE        an always-inline k4_tile(x, t, M, wb, sh, shift, G, pf, acc):
 *                  acc[m] (lane r) = the product of activation row t + m with
 *                  row r of the block whose packed groups start at wb and whose
 *                  f16 scales start at sh (group g's at sh + (g >> shift) * 16),
 *                  M at most K4_TILE_T; pf as in kernels_q8_body.h
 *   K4_TILE_T      rows of x per tile
 *   K4_ATTR        attributes of the function (a target, or nothing)
 * Each lane's arithmetic is the same whatever the tile, so the result for a
 * row never depends on the rows around it.
 */

#ifndef K4_TOKEN_BLOCK
#define K4_TOKEN_BLOCK 32
/* log2(wgroup / 32): the scale of activation group g is the weights' group g >> shift */
static inline int k4_shift(int wgroup) { return wgroup == 128 ? 2 : wgroup == 64 ? 1 : 0; }
#endif

#if K4_TILE_T > 4
#error "the rows past the whole tiles take tiles of 1 to 3 rows"
#endif
K4_ATTR static void K4_FN(const kq_act *x, int T, const k_q8_matrix *w, int b0, int b1, float *y,
                          int ldy)
{
    const int G = w->groups, shift = k4_shift(w->wgroup), GW = w->K / w->wgroup;
    const uint8_t *q = (const uint8_t *)w->q;
    for (int t0 = 0; t0 < T; t0 += K4_TOKEN_BLOCK) {
        int t1 = t0 + K4_TOKEN_BLOCK < T ? t0 + K4_TOKEN_BLOCK : T;
        for (int b = b0; b < b1; b++) {
            const uint8_t *wb = q + (size_t)b * G * 256;
            const uint16_t *sh = w->scale_h + (size_t)b * GW * KQ_ROWS;
            int rows = w->N - b * KQ_ROWS < KQ_ROWS ? w->N - b * KQ_ROWS : KQ_ROWS;
            float *yb = y + (size_t)b * KQ_ROWS;
            vec16 acc[K4_TILE_T];
            /* the rows past the last whole tile are a tile of their own, not a pass over
             * the block's weights each: a pass repeats the loads of w for every row */
            for (int t = t0, m; t < t1; t += m) {
                m = t1 - t < K4_TILE_T ? t1 - t : K4_TILE_T;
                switch (m) { /* M a constant in each call, so the tile's loops unroll */
                case K4_TILE_T: K4_TILE(x, t, K4_TILE_T, wb, sh, shift, G, t == t0, acc); break;
#if K4_TILE_T > 3
                case 3: K4_TILE(x, t, 3, wb, sh, shift, G, t == t0, acc); break;
#endif
#if K4_TILE_T > 2
                case 2: K4_TILE(x, t, 2, wb, sh, shift, G, t == t0, acc); break;
#endif
#if K4_TILE_T > 1
                default: K4_TILE(x, t, 1, wb, sh, shift, G, t == t0, acc);
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

#undef K4_FN
#undef K4_TILE
#undef K4_ATTR
