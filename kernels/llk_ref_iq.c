/* llk_ref_iq.c — reference kernels of the grid and ternary types (IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS,
 * IQ2_S, IQ3_XXS, IQ3_S, TQ1_0, TQ2_0) and of MXFP4: plain C, the spec for their SIMD twins.
 *
 * Every 256-element type is unpacked to one shape (sblock): 256 integer levels, one integer scale
 * and one dequantization scale per 16 elements. Dequantization then computes the very float
 * products gguf.quants does (bit-identical); the dot against q8_256 activations is an integer sum
 * per 16 elements, times the integer scale, times one float per super-block. MXFP4 is a 32-block
 * type against q8_32 activations. Holds the lookup tables too (llk_iq_tables.h, generated).
 *
 * The summation contract (every ISA level returns these dots bit for bit, tests/kernels/
 * test_bitexact.py): integer arithmetic is exact, so the SIMD twins may form the integer parts in
 * any order; the float operations are the ones written here, in this order, and nothing else
 * (the library is built with -ffp-contract=off: no multiply-add is fused unless written so).
 *  - 256-element types: per super-block b, the exact integer acc = sum over the 16 groups of
 *    sc * (sum of lv * activation byte) (IQ1's delta inside lv, so inside acc), one scalar; then
 *    s += dx * d * (float)acc, d the sblock's d (h2f(d) times the type's constant): two multiplies
 *    and an add; s from 0.0f, super-block by super-block.
 *  - MXFP4 (32-blocks, q8_32 activations): per block b the exact integer acc; its term
 *    e8m0(e) * dx * (float)acc is added to lane b % 8 of eight float sums l[] (from 0.0f), block
 *    by block; then ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) (a vector step per group of
 *    8 blocks in SIMD, the hsum8 tree at the end).
 * The 1 x 4 matmul kernels give each token exactly this single dot.
 */
#include "llk_internal.h"
#include "llk_iq_tables.h"

/* One super-block: x[i] = dq[i / 16] * (lv[i] * lvmul) exactly as gguf computes it, and
 * x[i] ~= d * sc[i / 16] * lv[i] for the dot (the type's constant folded into d). */
typedef struct {
    int8_t lv[256];     /* integer levels; IQ1: 8 * (grid + delta) */
    int sc[16];         /* integer scale of each 16 elements */
    float dq[16];       /* dequantization scale of each 16 elements */
    float d;            /* super-block factor of the integer dot */
    float lvmul;        /* 1, or 1/8 for IQ1 */
} sblock;

static inline uint32_t rd32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t rd16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* 8 magnitudes of a grid word, negated where bit i of signs is set */
static inline void put8(int8_t *lv, uint64_t g, unsigned signs) {
    for (int i = 0; i < 8; i++) {
        int v = (int)((g >> (8 * i)) & 255);
        lv[i] = (int8_t)((signs >> i) & 1 ? -v : v);
    }
}
static inline void put4(int8_t *lv, uint32_t g, unsigned signs) {
    for (int i = 0; i < 4; i++) {
        int v = (int)((g >> (8 * i)) & 255);
        lv[i] = (int8_t)((signs >> i) & 1 ? -v : v);
    }
}
/* the same scale for the two 16-element groups of sub-block s */
static inline void scale32(sblock *u, int s, int sc, float dq) {
    u->sc[2 * s] = u->sc[2 * s + 1] = sc;
    u->dq[2 * s] = u->dq[2 * s + 1] = dq;
}

static void unpack_iq2_xxs(const void *p, sblock *u) {
    const blk_iq2_xxs *b = (const blk_iq2_xxs *)p;
    const float d = llk_h2f(b->d);
    for (int s = 0; s < 8; s++) {
        uint32_t aux = rd32(b->qs + 8 * s + 4);
        int ls = (int)(aux >> 28);
        for (int k = 0; k < 4; k++)
            put8(u->lv + 32 * s + 8 * k, llk_iq2xxs_grid[b->qs[8 * s + k]], llk_ksigns[(aux >> (7 * k)) & 127]);
        scale32(u, s, 2 * ls + 1, d * (0.5f + (float)ls) * 0.25f);
    }
    u->d = d * 0.125f; u->lvmul = 1.0f;
}

static void unpack_iq2_xs(const void *p, sblock *u) {
    const blk_iq2_xs *b = (const blk_iq2_xs *)p;
    const float d = llk_h2f(b->d);
    for (int k = 0; k < 32; k++) {
        uint16_t q = rd16(b->qs + 2 * k);
        put8(u->lv + 8 * k, llk_iq2xs_grid[q & 511], llk_ksigns[q >> 9]);
    }
    for (int g = 0; g < 16; g++) {
        int ls = (b->scales[g >> 1] >> (4 * (g & 1))) & 15;
        u->sc[g] = 2 * ls + 1;
        u->dq[g] = d * (0.5f + (float)ls) * 0.25f;
    }
    u->d = d * 0.125f; u->lvmul = 1.0f;
}

static void unpack_iq2_s(const void *p, sblock *u) {
    const blk_iq2_s *b = (const blk_iq2_s *)p;
    const float d = llk_h2f(b->d);
    for (int k = 0; k < 32; k++) {
        int idx = b->qs[k] | ((b->qh[k >> 2] >> (2 * (k & 3))) & 3) << 8;
        put8(u->lv + 8 * k, llk_iq2s_grid[idx], b->signs[k]);
    }
    for (int g = 0; g < 16; g++) {
        int ls = (b->scales[g >> 1] >> (4 * (g & 1))) & 15;
        u->sc[g] = 2 * ls + 1;
        u->dq[g] = d * (0.5f + (float)ls) * 0.25f;
    }
    u->d = d * 0.125f; u->lvmul = 1.0f;
}

static void unpack_iq3_xxs(const void *p, sblock *u) {
    const blk_iq3_xxs *b = (const blk_iq3_xxs *)p;
    const float d = llk_h2f(b->d);
    for (int s = 0; s < 8; s++) {
        uint32_t aux = rd32(b->sas + 4 * s);
        int ls = (int)(aux >> 28);
        for (int j = 0; j < 4; j++) {
            unsigned sg = llk_ksigns[(aux >> (7 * j)) & 127];
            int8_t *lv = u->lv + 32 * s + 8 * j;
            put4(lv, llk_iq3xxs_grid[b->qs[8 * s + 2 * j]], sg);
            put4(lv + 4, llk_iq3xxs_grid[b->qs[8 * s + 2 * j + 1]], sg >> 4);
        }
        scale32(u, s, 2 * ls + 1, d * (0.5f + (float)ls) * 0.5f);
    }
    u->d = d * 0.25f; u->lvmul = 1.0f;
}

static void unpack_iq3_s(const void *p, sblock *u) {
    const blk_iq3_s *b = (const blk_iq3_s *)p;
    const float d = llk_h2f(b->d);
    for (int k = 0; k < 64; k++) {
        int idx = b->qs[k] | ((b->qh[k >> 3] >> (k & 7)) & 1) << 8;
        put4(u->lv + 4 * k, llk_iq3s_grid[idx], (unsigned)b->signs[k >> 1] >> (4 * (k & 1)));
    }
    for (int s = 0; s < 8; s++) {
        int sc = 1 + 2 * ((b->scales[s >> 1] >> (4 * (s & 1))) & 15);
        scale32(u, s, sc, d * (float)sc);
    }
    u->d = d; u->lvmul = 1.0f;
}

static void unpack_iq1_s(const void *p, sblock *u) {
    const blk_iq1_s *b = (const blk_iq1_s *)p;
    const float d = llk_h2f(b->d);
    for (int s = 0; s < 8; s++) {
        uint16_t h = rd16(b->qh + 2 * s);
        int delta = h & 0x8000 ? -1 : 1;
        for (int k = 0; k < 4; k++) {
            uint64_t g = llk_iq1s_grid[b->qs[4 * s + k] | ((h >> (3 * k)) & 7) << 8];
            for (int i = 0; i < 8; i++)
                u->lv[32 * s + 8 * k + i] = (int8_t)(8 * (int8_t)(g >> (8 * i)) + delta);
        }
        int sc = 2 * ((h >> 12) & 7) + 1;
        scale32(u, s, sc, d * (float)sc);
    }
    u->d = d * 0.125f; u->lvmul = 0.125f;
}

static void unpack_iq1_m(const void *p, sblock *u) {
    const blk_iq1_m *b = (const blk_iq1_m *)p;
    uint16_t sw[4];
    llk_half dh = 0;
    for (int w = 0; w < 4; w++) {
        sw[w] = rd16(b->scales + 2 * w);
        dh |= (llk_half)((sw[w] >> 12) << (4 * w));
    }
    const float d = llk_h2f(dh);
    for (int k = 0; k < 32; k++) {
        int nib = (b->qh[k >> 1] >> (4 * (k & 1))) & 15;
        uint64_t g = llk_iq1s_grid[b->qs[k] | (nib & 7) << 8];
        int delta = nib & 8 ? -1 : 1;
        for (int i = 0; i < 8; i++) u->lv[8 * k + i] = (int8_t)(8 * (int8_t)(g >> (8 * i)) + delta);
    }
    for (int g = 0; g < 16; g++) {
        int sc = 2 * ((sw[g >> 2] >> (3 * (g & 3))) & 7) + 1;
        u->sc[g] = sc;
        u->dq[g] = d * (float)sc;
    }
    u->d = d * 0.125f; u->lvmul = 0.125f;
}

/* TQ1_0: base-3 digit j of a packed byte */
static inline int8_t tq1_digit(uint8_t q, int j) {
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    uint8_t v = (uint8_t)(q * pow3[j]);
    return (int8_t)(((v * 3) >> 8) - 1);
}

static void unpack_tq1_0(const void *p, sblock *u) {
    const blk_tq1_0 *b = (const blk_tq1_0 *)p;
    const float d = llk_h2f(b->d);
    for (int j = 0; j < 5; j++) {
        for (int m = 0; m < 32; m++) u->lv[32 * j + m] = tq1_digit(b->qs[m], j);
        for (int m = 0; m < 16; m++) u->lv[160 + 16 * j + m] = tq1_digit(b->qs[32 + m], j);
    }
    for (int j = 0; j < 4; j++)
        for (int m = 0; m < 4; m++) u->lv[240 + 4 * j + m] = tq1_digit(b->qh[m], j);
    for (int g = 0; g < 16; g++) { u->sc[g] = 1; u->dq[g] = d; }
    u->d = d; u->lvmul = 1.0f;
}

static void unpack_tq2_0(const void *p, sblock *u) {
    const blk_tq2_0 *b = (const blk_tq2_0 *)p;
    const float d = llk_h2f(b->d);
    for (int c = 0; c < 2; c++)
        for (int j = 0; j < 4; j++)
            for (int m = 0; m < 32; m++)
                u->lv[128 * c + 32 * j + m] = (int8_t)(((b->qs[32 * c + m] >> (2 * j)) & 3) - 1);
    for (int g = 0; g < 16; g++) { u->sc[g] = 1; u->dq[g] = d; }
    u->d = d; u->lvmul = 1.0f;
}

/* --- the shared dequantization and dot of the unpacked super-blocks --------------------------- */

typedef void (*unpack_fn)(const void *p, sblock *u);

static inline void deq_sb(unpack_fn unpack, size_t bytes, const void *x, float *y, int64_t n) {
    const uint8_t *p = (const uint8_t *)x;
    sblock u;
    for (int64_t b = 0; b < n / LLK_QKK; b++, p += bytes, y += LLK_QKK) {
        unpack(p, &u);
        for (int i = 0; i < LLK_QKK; i++) y[i] = u.dq[i >> 4] * ((float)u.lv[i] * u.lvmul);
    }
}
static inline float dot_sb(unpack_fn unpack, size_t bytes, const void *w, const void *a, int64_t n) {
    const uint8_t *p = (const uint8_t *)w;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    sblock u;
    for (int64_t b = 0; b < n / LLK_QKK; b++, p += bytes) {
        unpack(p, &u);
        int64_t acc = 0;
        for (int g = 0; g < 16; g++) {
            int t = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) t += u.lv[i] * ab[b].qs[i];
            acc += (int64_t)u.sc[g] * t;
        }
        s += ab[b].d * u.d * (float)acc;
    }
    return s;
}

/* Each type's two kernels: the shared bodies with its unpacker and super-block size. */
static void deq_iq2_xxs(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq2_xxs, sizeof(blk_iq2_xxs), x, y, n);
}
static float dot_iq2_xxs(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq2_xxs, sizeof(blk_iq2_xxs), w, a, n);
}
static void deq_iq2_xs(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq2_xs, sizeof(blk_iq2_xs), x, y, n);
}
static float dot_iq2_xs(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq2_xs, sizeof(blk_iq2_xs), w, a, n);
}
static void deq_iq2_s(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq2_s, sizeof(blk_iq2_s), x, y, n);
}
static float dot_iq2_s(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq2_s, sizeof(blk_iq2_s), w, a, n);
}
static void deq_iq3_xxs(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq3_xxs, sizeof(blk_iq3_xxs), x, y, n);
}
static float dot_iq3_xxs(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq3_xxs, sizeof(blk_iq3_xxs), w, a, n);
}
static void deq_iq3_s(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq3_s, sizeof(blk_iq3_s), x, y, n);
}
static float dot_iq3_s(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq3_s, sizeof(blk_iq3_s), w, a, n);
}
static void deq_iq1_s(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq1_s, sizeof(blk_iq1_s), x, y, n);
}
static float dot_iq1_s(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq1_s, sizeof(blk_iq1_s), w, a, n);
}
static void deq_iq1_m(const void *x, float *y, int64_t n) {
    deq_sb(unpack_iq1_m, sizeof(blk_iq1_m), x, y, n);
}
static float dot_iq1_m(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_iq1_m, sizeof(blk_iq1_m), w, a, n);
}
static void deq_tq1_0(const void *x, float *y, int64_t n) {
    deq_sb(unpack_tq1_0, sizeof(blk_tq1_0), x, y, n);
}
static float dot_tq1_0(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_tq1_0, sizeof(blk_tq1_0), w, a, n);
}
static void deq_tq2_0(const void *x, float *y, int64_t n) {
    deq_sb(unpack_tq2_0, sizeof(blk_tq2_0), x, y, n);
}
static float dot_tq2_0(const void *w, const void *a, int64_t n) {
    return dot_sb(unpack_tq2_0, sizeof(blk_tq2_0), w, a, n);
}

/* --- MXFP4: 32-blocks against q8_32 activations ------------------------------------------------- */

static inline int mx_level(const uint8_t *qs, int i) {
    return llk_mxfp4_values[i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4)];
}
static void deq_mxfp4(const void *x, float *y, int64_t n) {
    const blk_mxfp4 *blk = (const blk_mxfp4 *)x;
    for (int64_t b = 0; b < n / LLK_QK; b++) {
        float d = llk_e8m0_half(blk[b].e);
        for (int i = 0; i < 32; i++) y[32 * b + i] = d * (float)mx_level(blk[b].qs, i);
    }
}
static float dot_mxfp4(const void *w, const void *a, int64_t n) {
    const blk_mxfp4 *blk = (const blk_mxfp4 *)w;
    const llk_block_q8_32x8 *ab = (const llk_block_q8_32x8 *)a;
    float l[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};   /* block b -> lane b % 8 */
    for (int64_t b = 0; b < n / LLK_QK; b++) {
        int acc = 0;
        for (int i = 0; i < 32; i++) acc += mx_level(blk[b].qs, i) * ACT_Q(ab, b)[i];
        l[b & 7] += llk_e8m0_half(blk[b].e) * ACT_D(ab, b) * (float)acc;
    }
    return llk_sum8(l);
}

void llk_fill_ref_iq(llk_kernels *k) {
#define SET(T, name) k->dequant[T] = deq_##name; k->dot[T] = dot_##name
    SET(LLK_TYPE_IQ2_XXS, iq2_xxs);
    SET(LLK_TYPE_IQ2_XS, iq2_xs);
    SET(LLK_TYPE_IQ2_S, iq2_s);
    SET(LLK_TYPE_IQ3_XXS, iq3_xxs);
    SET(LLK_TYPE_IQ3_S, iq3_s);
    SET(LLK_TYPE_IQ1_S, iq1_s);
    SET(LLK_TYPE_IQ1_M, iq1_m);
    SET(LLK_TYPE_TQ1_0, tq1_0);
    SET(LLK_TYPE_TQ2_0, tq2_0);
    SET(LLK_TYPE_MXFP4, mxfp4);
#undef SET
}
