/*
 * kernels_bd_body.h — the loops of a bf16 dot product (kernels_bd.h) with
 * fmas, written once. Included by an isa_*.c after kernels_body.h's vec16,
 * V_ZERO, V_SET1, V_FMA and V_STORE, defining:
 *   BD_FN, BD_TILE_FN   the names of the functions to define
 *   BD_ATTR             their attributes (a target, or nothing)
 *   bd_op, BD_LOAD(p)   32 bf16 of a panel (one pair of K for its 16 rows)
 *                       loaded as two vec16 of f32: .e the even elements,
 *                       .o the odd ones
 *   BD_TILE_T x BD_TILE_J   the register tile (rows of x by panels of w);
 *                  BD_TILE_J1 the panels against a single row (default J)
 *   BD_PREFETCH(p), BD_PREFETCH_BYTES   optional: a single row's prefetch
 *   BD_PREFETCH_TILES   0 where only a single row prefetches, not the
 *                       first tile of every pass (default 1)
 * and, for x in another form than f32 rows a pair of K at a time (the
 * default): BD_XT an element of x's rows, BD_X_ROWS(x) the rows (NULL where
 * they could not be had: BD_FALLBACK then runs), BD_X_STRIDE(Kp) their
 * stride, BD_UNIT the pairs of K a unit takes, bd_xop and BD_X_LOAD(row, s,
 * u) the x operands of unit u of step s, and BD_MAC(ce, co, xv, wv) the unit's
 * step of the two chains.
 * Lane l of a vector is output column 16 p + l of panel p: every output's
 * two chains and its accumulator are its own whatever tile, batch or thread
 * it fell in, so the bits depend on none of them.
 */

#ifndef BD_TILE_J1
#define BD_TILE_J1 BD_TILE_J /* panels against a single row of x */
#endif
#ifndef BD_TILE_JMAX
#define BD_TILE_JMAX (BD_TILE_J1 > BD_TILE_J ? BD_TILE_J1 : BD_TILE_J)
#endif
#ifndef BD_PREFETCH_TILES
#define BD_PREFETCH_TILES 1
#endif
#ifndef BD_X_BLOCK_BYTES
#define BD_X_BLOCK_BYTES (256 * 1024)
#endif

#ifndef BD_XT /* the fma kernels' x: rows of f32, one pair of K a unit */
#define BD_XT float
#define BD_X_ROWS(x) ((x)->xf)
#define BD_X_STRIDE(Kp) (Kp)
#define BD_UNIT 1
#define bd_xop bd_fma_x
typedef struct {
    vec16 e, o;
} bd_fma_x;
#define BD_X_LOAD(xrow, s, u)                                                                      \
    ((bd_fma_x){V_SET1((xrow)[(s) + 2 * (u)]), V_SET1((xrow)[(s) + 2 * (u) + 1])})
#define BD_MAC(ce, co, xv, wv)                                                                     \
    ((ce) = V_FMA((xv).e, (wv).e, (ce)), (co) = V_FMA((xv).o, (wv).o, (co)))
#endif

/* M rows of x (BD_X_STRIDE(Kp) apart) by MJ whole panels of w (Kp * 16
 * apart), into y's 16 * MJ columns from y: M and MJ are constants at every
 * call site. A unit (BD_UNIT pairs of K) at a time, each output's two chains
 * run a step, then their sum goes to its accumulator. pf: the first tile
 * over these panels, which reads them from memory and prefetches them. */
BD_ATTR static inline __attribute__((always_inline)) void
BD_TILE_FN(const BD_XT *xr, int Kp, const uint16_t *w, float *y, int ldy, int M, int MJ, int pf)
{
    (void)pf;                       /* where BD_PREFETCH is defined */
    const vec16 one = V_SET1(1.0f); /* fma(1, a, b): a + b, one rounding */
    const size_t panel = (size_t)Kp * K_BD_PANEL, xs = (size_t)BD_X_STRIDE(Kp);
    const int unit = BD_UNIT * 2 * K_BD_PANEL; /* a unit's values in a panel */
    vec16 acc[BD_TILE_T][BD_TILE_JMAX];
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++)
            acc[t][j] = V_ZERO();
    for (int s = 0; s < Kp; s += K_BD_STEP) {
        vec16 e[BD_TILE_T][BD_TILE_JMAX], o[BD_TILE_T][BD_TILE_JMAX];
        for (int t = 0; t < M; t++)
            for (int j = 0; j < MJ; j++)
                e[t][j] = o[t][j] = V_ZERO();
        const uint16_t *ws = w + (size_t)s * K_BD_PANEL;
        for (int u = 0; u < K_BD_STEP / 2 / BD_UNIT; u++) {
            bd_op wv[BD_TILE_JMAX];
            for (int j = 0; j < MJ; j++) {
                const uint16_t *wu = ws + (size_t)j * panel + (size_t)u * unit;
                wv[j] = BD_LOAD(wu);
#ifdef BD_PREFETCH
                if (pf && (BD_PREFETCH_TILES || M == 1))
                    for (int l = 0; l < unit; l += 32)
                        BD_PREFETCH(wu + BD_PREFETCH_BYTES / 2 + l);
#endif
            }
            for (int t = 0; t < M; t++) {
                bd_xop xv = BD_X_LOAD(xr + (size_t)t * xs, s, u);
                for (int j = 0; j < MJ; j++)
                    BD_MAC(e[t][j], o[t][j], xv, wv[j]);
            }
        }
        for (int t = 0; t < M; t++)
            for (int j = 0; j < MJ; j++)
                acc[t][j] = V_FMA(one, V_FMA(one, e[t][j], o[t][j]), acc[t][j]);
    }
    for (int t = 0; t < M; t++)
        for (int j = 0; j < MJ; j++)
            V_STORE(y + (size_t)t * ldy + (size_t)j * K_BD_PANEL, acc[t][j]);
}

/* Columns [c0, c1) of panel p (c0 > 0 or c1 < 16) for rows [t0, t1), through a tile of its own. */
BD_ATTR static void BD_PART_FN(const BD_XT *xr, int Kp, const uint16_t *w, int p, int c0, int c1,
                               int t0, int t1, float *y, int ldy)
{
    float tmp[K_BD_PANEL];
    const uint16_t *wp = w + (size_t)p * Kp * K_BD_PANEL;
    for (int t = t0; t < t1; t++) {
        BD_TILE_FN(xr + (size_t)t * BD_X_STRIDE(Kp), Kp, wp, tmp, K_BD_PANEL, 1, 1, t == t0);
        for (int c = c0; c < c1; c++)
            y[(size_t)t * ldy + (size_t)p * K_BD_PANEL + c] = tmp[c];
    }
}

/* Rows [t0, t1) of x against MJ panels from w, into y's columns from y: whole tiles, then
 * the rows left over as one tile (M a constant at each call, so the tile's loops unroll). */
#if BD_TILE_T > 4
#error "the rows past the whole tiles take tiles of 1 to 3 rows"
#endif
#define BD_CAT_(a, b) a##b
#define BD_CAT(a, b) BD_CAT_(a, b)
#define BD_ROWS_FN BD_CAT(BD_TILE_FN, _rows)
BD_ATTR static inline __attribute__((always_inline)) void
BD_ROWS_FN(const BD_XT *xr, int Kp, const uint16_t *w, int t0, int t1, float *y, int ldy, int MJ)
{
    const size_t xs = (size_t)BD_X_STRIDE(Kp);
    int t = t0;
    for (; t + BD_TILE_T <= t1; t += BD_TILE_T)
        BD_TILE_FN(xr + t * xs, Kp, w, y + (size_t)t * ldy, ldy, BD_TILE_T, MJ, t == t0);
    switch (t1 - t) {
#if BD_TILE_T > 3
    case 3: BD_TILE_FN(xr + t * xs, Kp, w, y + (size_t)t * ldy, ldy, 3, MJ, t == t0); break;
#endif
#if BD_TILE_T > 2
    case 2: BD_TILE_FN(xr + t * xs, Kp, w, y + (size_t)t * ldy, ldy, 2, MJ, t == t0); break;
#endif
#if BD_TILE_T > 1
    case 1: BD_TILE_FN(xr + t * xs, Kp, w, y + (size_t)t * ldy, ldy, 1, MJ, t == t0); break;
#endif
    default: break;
    }
}

/* Rows of x in blocks that stay in L2 while a task's panels stream past
 * them; against each group of panels the whole tiles and then the rows left
 * over (BD_ROWS_FN), then the panels left over, and the panels [j0, j1)
 * only cuts. */
BD_ATTR static void BD_FN(const k_bd_rows *x, const uint16_t *w, int j0, int j1, float *y, int ldy)
{
    const int Kp = x->Kp, T = x->T, P = K_BD_PANEL;
    const size_t panel = (size_t)Kp * P, xs = (size_t)BD_X_STRIDE(Kp);
    const BD_XT *xr = BD_X_ROWS(x);
#ifdef BD_FALLBACK
    if (!xr) {
        BD_FALLBACK(x, w, j0, j1, y, ldy);
        return;
    }
#endif
    int tb = (int)(BD_X_BLOCK_BYTES / ((size_t)Kp * 4));
    tb = tb < 16 ? 16 : tb > 128 ? 128 : tb;
    int pa = (j0 + P - 1) / P, pb = j1 / P; /* the whole panels */
    for (int t0 = 0; t0 < T; t0 += tb) {
        int t1 = t0 + tb < T ? t0 + tb : T;
        if (pa > pb) { /* [j0, j1) within one panel */
            BD_PART_FN(xr, Kp, w, j0 / P, j0 % P, j1 - j0 / P * P, t0, t1, y, ldy);
            continue;
        }
        if (j0 % P)
            BD_PART_FN(xr, Kp, w, j0 / P, j0 % P, P, t0, t1, y, ldy);
        /* a single row against BD_TILE_J1 panels at a time: chains enough to hide the
         * instructions' latency, or one panel where a single weight stream reads memory
         * faster; more rows BD_TILE_J panels at a time, the rows past the whole tiles a tile
         * of their own while the panels are in cache (a pass of their own read them from
         * memory again) */
        int p = pa;
        if (t1 - t0 == 1) {
            for (; p + BD_TILE_J1 <= pb; p += BD_TILE_J1)
                BD_TILE_FN(xr + t0 * xs, Kp, w + p * panel, y + (size_t)t0 * ldy + p * P, ldy, 1,
                           BD_TILE_J1, 1);
        } else {
            for (; p + BD_TILE_J <= pb; p += BD_TILE_J)
                BD_ROWS_FN(xr, Kp, w + p * panel, t0, t1, y + p * P, ldy, BD_TILE_J);
        }
        for (; p < pb; p++)
            BD_ROWS_FN(xr, Kp, w + p * panel, t0, t1, y + p * P, ldy, 1);
        if (j1 % P)
            BD_PART_FN(xr, Kp, w, pb, 0, j1 % P, t0, t1, y, ldy);
    }
}

#undef BD_FN
#undef BD_TILE_FN
#undef BD_PART_FN
#undef BD_ROWS_FN
#undef BD_CAT
#undef BD_CAT_
#undef BD_ATTR
#undef bd_op
#undef BD_LOAD
#undef BD_XT
#undef BD_UNIT
#undef bd_xop
#undef BD_X_LOAD
#undef BD_MAC
#undef BD_X_ROWS
#undef BD_X_STRIDE
#undef BD_FALLBACK
#undef BD_TILE_J1
#undef BD_TILE_JMAX
#undef BD_PREFETCH
#undef BD_PREFETCH_TILES
