/* The GPT-2 byte <-> printable character table used by byte-level models. */
#include "tokenizer_internal.h"

#define R(a) a, a + 1, a + 2, a + 3, a + 4, a + 5, a + 6, a + 7
/* Bytes 33..126, 161..172 and 174..255 stand for themselves; the remaining 68 bytes map,
 * in order, to U+0100..U+0143. */
const int32_t tok_byte_to_cp[256] = {
    256, 257,   258,    259,    260,    261,    262,    263,    264,    265,    266,    267,    268,
    269, 270,   271,    272,    273,    274,    275,    276,    277,    278,    279,    280,    281,
    282, 283,   284,    285,    286,    287,    288,    33,     34,     35,     36,     37,     38,
    39,  R(40), R(48),  R(56),  R(64),  R(72),  R(80),  R(88),  R(96),  R(104), R(112), 120,    121,
    122, 123,   124,    125,    126,    289,    290,    291,    292,    293,    294,    295,    296,
    297, 298,   299,    300,    301,    302,    303,    304,    305,    306,    307,    308,    309,
    310, 311,   312,    313,    314,    315,    316,    317,    318,    319,    320,    321,    322,
    161, 162,   163,    164,    165,    166,    167,    168,    169,    170,    171,    172,    323,
    174, 175,   R(176), R(184), R(192), R(200), R(208), R(216), R(224), R(232), R(240), R(248),
};

int tok_cp_to_byte(int32_t cp)
{
    static int inv[324];
    static int ready; /* benign: every thread computes the same table (filled before the flag) */
    if (!__atomic_load_n(&ready, __ATOMIC_ACQUIRE)) {
        int tmp[324];
        for (int i = 0; i < 324; i++)
            tmp[i] = -1;
        for (int b = 0; b < 256; b++)
            tmp[tok_byte_to_cp[b]] = b;
        for (int i = 0; i < 324; i++)
            __atomic_store_n(&inv[i], tmp[i], __ATOMIC_RELAXED);
        __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
    }
    if (cp < 0 || cp >= 324)
        return -1;
    return inv[cp];
}
