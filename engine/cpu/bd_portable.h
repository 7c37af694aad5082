/*
 * bd_portable.h — bf16 dot products (kernels_bd.h) in plain C: 16 outputs
 * to a vec16, each lane's two chains run with fmaf.
 * Included by isa_portable.c before kernels_body.h.
 */
#include "kernels_bd.h"

typedef struct {
    vec16 o, e;
} bd_c_pair;
static inline bd_c_pair bd_c_load_tail(const uint16_t *p, int n)
{
    bd_c_pair r;
    for (int l = 0; l < 16; l++) {
        r.e.l[l] = 2 * l < n ? mhla_f32_from_bf16(p[2 * l]) : 0.0f;
        r.o.l[l] = 2 * l + 1 < n ? mhla_f32_from_bf16(p[2 * l + 1]) : 0.0f;
    }
    return r;
}
#define BD_TILE_T 2
#define BD_TILE_J 1
#define BD_FN bd_linear
#define BD_TILE_FN bd_tile_c
#define BD_PART_FN bd_part_c
#define BD_ATTR
#define bd_op bd_c_pair
#define BD_LOAD(p) bd_c_load_tail((p), 32)
#include "kernels_bd_body.h"

static const char *bd_kernel(void) { return "fma"; }
