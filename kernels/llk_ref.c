/* llk_ref.c — the reference kernels: plain C, one per tensor type, the spec for every SIMD twin.
 *
 * Each type has a row dequantizer (blocks -> float) and a dot product against the activation
 * format it consumes (float32, q8_32 or q8_256). Written for clarity, not speed; the SIMD files
 * must compute the same floats, bit for bit (the summation contract in llk_internal.h; held by
 * tests/kernels/test_bitexact.py), so the float operations written here are the spec.
 * Lengths are already checked by the caller (a multiple of the type's block size).
 */
#include "llk_internal.h"

const int8_t llk_iq4_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1, 13, 25, 38, 53, 69, 89, 113};

/* --- activations ------------------------------------------------------------------------------ */

/* Rounding: nearbyintf (ties to even), the same rule the SIMD converts use, so twins agree bit
 * for bit on the quantized activations. */
static void quant_q8_32_ref(const float *x, void *out, int64_t n) {
    llk_block_q8_32x8 *a = (llk_block_q8_32x8 *)out;
    const int64_t nb = n / LLK_QK;
    memset(&a[(nb + 7) / 8 - 1], 0, sizeof *a);   /* the last group's unused blocks stay zero */
    for (int64_t b = 0; b < nb; b++, x += LLK_QK) {
        float amax = 0.0f;
        for (int i = 0; i < LLK_QK; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax >= LLK_ACT_TINY ? amax / 127.0f : 0.0f, id = amax >= LLK_ACT_TINY ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int i = 0; i < LLK_QK; i++) {
            int q = (int)nearbyintf(x[i] * id);
            ACT_Q(a, b)[i] = (int8_t)q;
            sum += q;
        }
        ACT_D(a, b) = d;
        ACT_S(a, b) = d * (float)sum;
        ACT_O(a, b) = -8 * sum;
    }
}

static void quant_q8_256_ref(const float *x, void *out, int64_t n) {
    llk_block_q8_256 *a = (llk_block_q8_256 *)out;
    for (int64_t b = 0; b < n / LLK_QKK; b++, x += LLK_QKK) {
        float amax = 0.0f;
        for (int i = 0; i < LLK_QKK; i++) amax = fmaxf(amax, fabsf(x[i]));
        float d = amax >= LLK_ACT_TINY ? amax / 127.0f : 0.0f, id = amax >= LLK_ACT_TINY ? 127.0f / amax : 0.0f;
        for (int i = 0; i < LLK_QKK; i++) a[b].qs[i] = (int8_t)nearbyintf(x[i] * id);
        for (int g = 0; g < 16; g++) {
            int s = 0;
            for (int i = 0; i < 16; i++) s += a[b].qs[16 * g + i];
            a[b].bsums[g] = (int16_t)s;
        }
        for (int g = 0; g < 8; g++) a[b].gsums[g] = (int16_t)(a[b].bsums[2 * g] + a[b].bsums[2 * g + 1]);
        a[b].d = d;
    }
}

/* --- float types ---------------------------------------------------------------------------- */

static void deq_f32(const void *x, float *y, int64_t n) { memcpy(y, x, (size_t)n * 4); }
static void deq_f16(const void *x, float *y, int64_t n) {
    const uint8_t *p = (const uint8_t *)x;
    for (int64_t i = 0; i < n; i++) { llk_half h; memcpy(&h, p + 2 * i, 2); y[i] = llk_h2f(h); }
}
static void deq_bf16(const void *x, float *y, int64_t n) {
    const uint8_t *p = (const uint8_t *)x;
    for (int64_t i = 0; i < n; i++) { uint16_t h; memcpy(&h, p + 2 * i, 2); y[i] = llk_bf2f(h); }
}

/* The float-type contract (every level): element i < n8 = n & ~7 is accumulated in lane i % 32 by
 * FMA, in order; the 32 lanes fold to 16 (l + l+16), to 8 (l + l+8), then llk_sum8; the last n % 8
 * elements are added after that, one product at a time. */
static float float_dot(float (*wv)(const uint8_t *, int64_t), const void *w, const void *a, int64_t n) {
    const uint8_t *p = (const uint8_t *)w; const float *x = (const float *)a;
    const int64_t n8 = n & ~(int64_t)7;
    float L[32] = {0}, v[8];
    for (int64_t i = 0; i < n8; i++) L[i & 31] = fmaf(wv(p, i), x[i], L[i & 31]);
    for (int l = 0; l < 8; l++) v[l] = (L[l] + L[l + 16]) + (L[l + 8] + L[l + 24]);
    float s = llk_sum8(v);
    for (int64_t i = n8; i < n; i++) s += wv(p, i) * x[i];
    return s;
}
static float wv_f32(const uint8_t *p, int64_t i) { float v; memcpy(&v, p + 4 * i, 4); return v; }
static float wv_f16(const uint8_t *p, int64_t i) { llk_half h; memcpy(&h, p + 2 * i, 2); return llk_h2f(h); }
static float wv_bf16(const uint8_t *p, int64_t i) { uint16_t h; memcpy(&h, p + 2 * i, 2); return llk_bf2f(h); }
static float dot_f32(const void *w, const void *a, int64_t n) { return float_dot(wv_f32, w, a, n); }
static float dot_f16(const void *w, const void *a, int64_t n) { return float_dot(wv_f16, w, a, n); }
static float dot_bf16(const void *w, const void *a, int64_t n) { return float_dot(wv_bf16, w, a, n); }

/* --- legacy 32-blocks ---------------------------------------------------------------------------
 * The summation contract (every level): block b = 8g + j of a row contributes in lane j,
 *   acc[j]  = fmaf(dw_b * dx_b, (float)I_b, acc[j])      I_b = sum_i w_i * qx_i, exact
 *   accx[j] = fmaf(m_b, sx_b, accx[j])                   sx_b = the activations' s = dx_b * sum(qx)
 * group after group, where w are the block's signed levels (Q4_0: the nibble - 8, Q5_0: the 5-bit
 * value - 16, Q8_0 and IQ4_NL: their values; kernels take the offset as the activations' integer
 * o_b = -8 sum(qx), once or twice) and the mins' lane set accx is the _1 types' (Q4_1, Q5_1: w the
 * unsigned levels, m_b the block's min); for the others accx stays zero. A partial last group runs
 * all 8 lanes, the missing blocks as zeros. The dot is llk_sum8(acc + accx). */

/* Level of element i (0..31) of a 4-bit block: low nibbles first, then high. */
static inline int nib(const uint8_t *qs, int i) { return i < 16 ? (qs[i] & 15) : (qs[i - 16] >> 4); }
static inline int hbit(const uint8_t qh[4], int i) { return (qh[i >> 3] >> (i & 7)) & 1; }

static int u_q4_0(const void *b, int i) { return nib(((const blk_q4_0 *)b)->qs, i); }
static int u_q4_1(const void *b, int i) { return nib(((const blk_q4_1 *)b)->qs, i); }
static int u_q5_0(const void *b, int i) { const blk_q5_0 *B = (const blk_q5_0 *)b; return nib(B->qs, i) | hbit(B->qh, i) << 4; }
static int u_q5_1(const void *b, int i) { const blk_q5_1 *B = (const blk_q5_1 *)b; return nib(B->qs, i) | hbit(B->qh, i) << 4; }
static int u_q8_0(const void *b, int i) { return ((const blk_q8_0 *)b)->qs[i]; }
static int u_iq4_nl(const void *b, int i) { return llk_iq4_values[nib(((const blk_iq4_nl *)b)->qs, i)]; }

/* A legacy type for legacy_dot: block bytes, unsigned-form levels, the offset that makes them
 * signed (-8, -16, or 0 for none) and whether the block has a min m (a float16 right after d).
 * Every block starts with d. */
typedef struct { size_t bytes; int (*u)(const void *, int); int off; int has_m; } legacy_type;

static float legacy_dot(const legacy_type *t, const void *w, const void *a, int64_t n) {
    const uint8_t *blk = (const uint8_t *)w;
    const llk_block_q8_32x8 *ab = (const llk_block_q8_32x8 *)a;
    const int64_t nb = n / LLK_QK;
    float acc[8] = {0}, accx[8] = {0};
    for (int64_t g = 0; 8 * g < nb; g++)
        for (int j = 0; j < 8; j++) {
            const int64_t b = 8 * g + j;
            float dw = 0.0f, m = 0.0f;
            int I = 0;
            if (b < nb) {
                const uint8_t *B = blk + (size_t)b * t->bytes;
                llk_half h;
                memcpy(&h, B, 2); dw = llk_h2f(h);
                if (t->has_m) { memcpy(&h, B + 2, 2); m = llk_h2f(h); }
                for (int i = 0; i < 32; i++) I += (t->u(B, i) + t->off) * ACT_Q(ab, b)[i];
            }
            acc[j] = fmaf(dw * ACT_D(ab, b), (float)I, acc[j]);
            if (t->has_m) accx[j] = fmaf(m, ACT_S(ab, b), accx[j]);
        }
    float v[8];
    for (int j = 0; j < 8; j++) v[j] = acc[j] + accx[j];
    return llk_sum8(v);
}

static const legacy_type T_Q4_0 = {sizeof(blk_q4_0), u_q4_0, -8, 0};
static const legacy_type T_Q4_1 = {sizeof(blk_q4_1), u_q4_1, 0, 1};
static const legacy_type T_Q5_0 = {sizeof(blk_q5_0), u_q5_0, -16, 0};
static const legacy_type T_Q5_1 = {sizeof(blk_q5_1), u_q5_1, 0, 1};
static const legacy_type T_Q8_0 = {sizeof(blk_q8_0), u_q8_0, 0, 0};
static const legacy_type T_IQ4_NL = {sizeof(blk_iq4_nl), u_iq4_nl, 0, 0};

static float dot_q4_0(const void *w, const void *a, int64_t n) { return legacy_dot(&T_Q4_0, w, a, n); }
static float dot_q4_1(const void *w, const void *a, int64_t n) { return legacy_dot(&T_Q4_1, w, a, n); }
static float dot_q5_0(const void *w, const void *a, int64_t n) { return legacy_dot(&T_Q5_0, w, a, n); }
static float dot_q5_1(const void *w, const void *a, int64_t n) { return legacy_dot(&T_Q5_1, w, a, n); }
static float dot_q8_0(const void *w, const void *a, int64_t n) { return legacy_dot(&T_Q8_0, w, a, n); }
static float dot_iq4_nl(const void *w, const void *a, int64_t n) { return legacy_dot(&T_IQ4_NL, w, a, n); }

static void deq_q4_0(const void *x, float *y, int64_t n) {
    const blk_q4_0 *blk = (const blk_q4_0 *)x;
    const int64_t nb = n / LLK_QK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 32; i++) y[32 * b + i] = d * (float)(nib(blk[b].qs, i) - 8);
    }
}
static void deq_q4_1(const void *x, float *y, int64_t n) {
    const blk_q4_1 *blk = (const blk_q4_1 *)x;
    const int64_t nb = n / LLK_QK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d), m = llk_h2f(blk[b].m);
        for (int i = 0; i < 32; i++) y[32 * b + i] = d * (float)nib(blk[b].qs, i) + m;
    }
}
static void deq_q5_0(const void *x, float *y, int64_t n) {
    const blk_q5_0 *blk = (const blk_q5_0 *)x;
    const int64_t nb = n / LLK_QK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 32; i++)
            y[32 * b + i] = d * (float)((nib(blk[b].qs, i) | hbit(blk[b].qh, i) << 4) - 16);
    }
}
static void deq_q5_1(const void *x, float *y, int64_t n) {
    const blk_q5_1 *blk = (const blk_q5_1 *)x;
    const int64_t nb = n / LLK_QK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d), m = llk_h2f(blk[b].m);
        for (int i = 0; i < 32; i++)
            y[32 * b + i] = d * (float)(nib(blk[b].qs, i) | hbit(blk[b].qh, i) << 4) + m;
    }
}
static void deq_q8_0(const void *x, float *y, int64_t n) {
    const blk_q8_0 *blk = (const blk_q8_0 *)x;
    const int64_t nb = n / LLK_QK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 32; i++) y[32 * b + i] = d * (float)blk[b].qs[i];
    }
}
static void deq_iq4_nl(const void *x, float *y, int64_t n) {
    const blk_iq4_nl *blk = (const blk_iq4_nl *)x;
    const int64_t nb = n / LLK_QK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 32; i++) y[32 * b + i] = d * (float)llk_iq4_values[nib(blk[b].qs, i)];
    }
}

/* --- K-quants: each super-block is unpacked to 256 integer levels plus per-group scale/min ----
 *
 * The summation contract of the super-block (256) types Q2_K .. Q6_K and IQ4_XS, which every SIMD
 * twin follows bit for bit:
 *  1. per super-block b, the exact integer sums written below (acc = sum_g scale_g * sum of
 *     level x activation over group g; for the types with mins, accm = sum_g min_g * bsum_g) may
 *     be formed in any order (integer arithmetic is exact; they fit in int32), but are fully
 *     reduced to one scalar int each per super-block;
 *  2. that super-block's float contribution is then computed in scalar code with exactly the
 *     operations below, in the same order (C evaluates left to right: `dx * d * (float)acc` is
 *     (dx * d) * acc), no FMA;
 *  3. s accumulates the contributions one super-block after another, from 0.0f, and is returned.
 * The 1 x 4 matmul kernels give each token exactly the float of its single dot. */



/* Q3_K signed scale of group g (0..15). */
static inline int k3_scale(const uint8_t *s, int g) {
    int lo = g < 8 ? (s[g] & 15) : (s[g - 8] >> 4);
    int hi = (s[8 + (g & 3)] >> (2 * (g >> 2))) & 3;
    return (lo | hi << 4) - 32;
}

static inline int q2k_level(const blk_q2_K *b, int i) {
    return (b->qs[32 * (i >> 7) + (i & 31)] >> (2 * ((i >> 5) & 3))) & 3;
}
static inline int q3k_level(const blk_q3_K *b, int i) {
    int lo = (b->qs[32 * (i >> 7) + (i & 31)] >> (2 * ((i >> 5) & 3))) & 3;
    int hi = (b->hmask[i & 31] >> (i >> 5)) & 1;
    return lo - (hi ? 0 : 4);
}
static inline int q4k_level(const blk_q4_K *b, int i) {
    int g = i >> 5, l = i & 31;
    return (b->qs[32 * (g >> 1) + l] >> (4 * (g & 1))) & 15;
}
static inline int q5k_level(const blk_q5_K *b, int i) {
    int g = i >> 5, l = i & 31;
    return ((b->qs[32 * (g >> 1) + l] >> (4 * (g & 1))) & 15) | (((b->qh[l] >> g) & 1) << 4);
}
static inline int q6k_level(const blk_q6_K *b, int i) {
    int h = i >> 7, s = (i >> 5) & 3, l = i & 31;
    int lo = (b->ql[64 * h + l + 32 * (s & 1)] >> (4 * (s >> 1))) & 15;
    int hi = (b->qh[32 * h + l] >> (2 * s)) & 3;
    return (lo | hi << 4) - 32;
}
static inline int iq4xs_level(const blk_iq4_xs *b, int i) {
    int g = i >> 5, l = i & 31;
    int q = l < 16 ? (b->qs[16 * g + l] & 15) : (b->qs[16 * g + l - 16] >> 4);
    return llk_iq4_values[q];
}

static void deq_q2_K(const void *x, float *y, int64_t n) {
    const blk_q2_K *blk = (const blk_q2_K *)x;
    const int64_t nb = n / LLK_QKK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d), dm = llk_h2f(blk[b].dmin);
        for (int i = 0; i < 256; i++) {
            uint8_t sc = blk[b].scales[i >> 4];
            y[256 * b + i] = d * (float)(sc & 15) * (float)q2k_level(&blk[b], i) - dm * (float)(sc >> 4);
        }
    }
}
static float dot_q2_K(const void *w, const void *a, int64_t n) {
    const blk_q2_K *blk = (const blk_q2_K *)w;
    const int64_t nb = n / LLK_QKK;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int acc = 0, accm = 0;
        for (int g = 0; g < 16; g++) {
            int t = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) t += q2k_level(&blk[b], i) * ab[b].qs[i];
            acc += (blk[b].scales[g] & 15) * t;
            accm += (blk[b].scales[g] >> 4) * ab[b].bsums[g];
        }
        s += ab[b].d * (llk_h2f(blk[b].d) * (float)acc - llk_h2f(blk[b].dmin) * (float)accm);
    }
    return s;
}

static void deq_q3_K(const void *x, float *y, int64_t n) {
    const blk_q3_K *blk = (const blk_q3_K *)x;
    const int64_t nb = n / LLK_QKK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 256; i++)
            y[256 * b + i] = d * (float)k3_scale(blk[b].scales, i >> 4) * (float)q3k_level(&blk[b], i);
    }
}
static float dot_q3_K(const void *w, const void *a, int64_t n) {
    const blk_q3_K *blk = (const blk_q3_K *)w;
    const int64_t nb = n / LLK_QKK;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int acc = 0;
        for (int g = 0; g < 16; g++) {
            int t = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) t += q3k_level(&blk[b], i) * ab[b].qs[i];
            acc += k3_scale(blk[b].scales, g) * t;
        }
        s += ab[b].d * llk_h2f(blk[b].d) * (float)acc;
    }
    return s;
}

static void deq_q4_K(const void *x, float *y, int64_t n) {
    const blk_q4_K *blk = (const blk_q4_K *)x;
    const int64_t nb = n / LLK_QKK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d), dm = llk_h2f(blk[b].dmin);
        for (int g = 0; g < 8; g++) {
            int sc, mn; llk_k4_scale_min(blk[b].scales, g, &sc, &mn);
            for (int i = 32 * g; i < 32 * g + 32; i++)
                y[256 * b + i] = d * (float)sc * (float)q4k_level(&blk[b], i) - dm * (float)mn;
        }
    }
}
static float dot_q4_K(const void *w, const void *a, int64_t n) {
    const blk_q4_K *blk = (const blk_q4_K *)w;
    const int64_t nb = n / LLK_QKK;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int acc = 0, accm = 0;
        for (int g = 0; g < 8; g++) {
            int sc, mn, t = 0; llk_k4_scale_min(blk[b].scales, g, &sc, &mn);
            for (int i = 32 * g; i < 32 * g + 32; i++) t += q4k_level(&blk[b], i) * ab[b].qs[i];
            acc += sc * t;
            accm += mn * (ab[b].bsums[2 * g] + ab[b].bsums[2 * g + 1]);
        }
        s += ab[b].d * (llk_h2f(blk[b].d) * (float)acc - llk_h2f(blk[b].dmin) * (float)accm);
    }
    return s;
}

static void deq_q5_K(const void *x, float *y, int64_t n) {
    const blk_q5_K *blk = (const blk_q5_K *)x;
    const int64_t nb = n / LLK_QKK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d), dm = llk_h2f(blk[b].dmin);
        for (int g = 0; g < 8; g++) {
            int sc, mn; llk_k4_scale_min(blk[b].scales, g, &sc, &mn);
            for (int i = 32 * g; i < 32 * g + 32; i++)
                y[256 * b + i] = d * (float)sc * (float)q5k_level(&blk[b], i) - dm * (float)mn;
        }
    }
}
static float dot_q5_K(const void *w, const void *a, int64_t n) {
    const blk_q5_K *blk = (const blk_q5_K *)w;
    const int64_t nb = n / LLK_QKK;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int acc = 0, accm = 0;
        for (int g = 0; g < 8; g++) {
            int sc, mn, t = 0; llk_k4_scale_min(blk[b].scales, g, &sc, &mn);
            for (int i = 32 * g; i < 32 * g + 32; i++) t += q5k_level(&blk[b], i) * ab[b].qs[i];
            acc += sc * t;
            accm += mn * (ab[b].bsums[2 * g] + ab[b].bsums[2 * g + 1]);
        }
        s += ab[b].d * (llk_h2f(blk[b].d) * (float)acc - llk_h2f(blk[b].dmin) * (float)accm);
    }
    return s;
}

static void deq_q6_K(const void *x, float *y, int64_t n) {
    const blk_q6_K *blk = (const blk_q6_K *)x;
    const int64_t nb = n / LLK_QKK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 256; i++)
            y[256 * b + i] = d * (float)blk[b].scales[i >> 4] * (float)q6k_level(&blk[b], i);
    }
}
static float dot_q6_K(const void *w, const void *a, int64_t n) {
    const blk_q6_K *blk = (const blk_q6_K *)w;
    const int64_t nb = n / LLK_QKK;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int acc = 0;
        for (int g = 0; g < 16; g++) {
            int t = 0;
            for (int i = 16 * g; i < 16 * g + 16; i++) t += q6k_level(&blk[b], i) * ab[b].qs[i];
            acc += blk[b].scales[g] * t;
        }
        s += ab[b].d * llk_h2f(blk[b].d) * (float)acc;
    }
    return s;
}

static void deq_iq4_xs(const void *x, float *y, int64_t n) {
    const blk_iq4_xs *blk = (const blk_iq4_xs *)x;
    const int64_t nb = n / LLK_QKK;
    for (int64_t b = 0; b < nb; b++) {
        float d = llk_h2f(blk[b].d);
        for (int i = 0; i < 256; i++)
            y[256 * b + i] = d * (float)llk_iq4xs_scale(&blk[b], i >> 5) * (float)iq4xs_level(&blk[b], i);
    }
}
static float dot_iq4_xs(const void *w, const void *a, int64_t n) {
    const blk_iq4_xs *blk = (const blk_iq4_xs *)w;
    const int64_t nb = n / LLK_QKK;
    const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;
    float s = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int acc = 0;
        for (int g = 0; g < 8; g++) {
            int t = 0;
            for (int i = 32 * g; i < 32 * g + 32; i++) t += iq4xs_level(&blk[b], i) * ab[b].qs[i];
            acc += llk_iq4xs_scale(&blk[b], g) * t;
        }
        s += ab[b].d * llk_h2f(blk[b].d) * (float)acc;
    }
    return s;
}

/* --- attention inner loops ------------------------------------------------------------------ */

static inline float cache_val(const uint8_t *row, int i, int kind) {
    if (kind == LLK_KV_Q8_0) return llk_kv_q8_scale(row, i) * (float)(int8_t)row[llk_kv_off(i, kind)];
    if (kind == LLK_KV_F16) { llk_half h; memcpy(&h, row + 2 * i, 2); return llk_h2f(h); }
    float v; memcpy(&v, row + 4 * i, 4); return v;
}
/* The attention contract (every level). kdots: each score is q[0] k[0] + q[1] k[1] + ... by FMA
 * in order from 0, then times scale (a position is a lane of a transposed tile, so its sum never
 * crosses lanes). vacc: out += p * v by FMA, row after row, for every element. */
static void ktile_ref(const uint8_t *rows, size_t rs, int kind, int64_t n, int hd, float *kt, int64_t np,
                      const uint8_t *next) {
    (void)next;
    for (int i = 0; i < hd; i++)
        for (int64_t j = 0; j < np; j++) kt[i * np + j] = j < n ? cache_val(rows + (size_t)j * rs, i, kind) : 0.0f;
}
static void kdots_tile_ref(const float *q, int64_t qs, int nq, const float *kt, int64_t np, int hd, float scale,
                           int64_t j0, int64_t n, float *out, int64_t os, float *mx) {
    for (int r = 0; r < nq; r++)
        for (int64_t j = 0; j < n; j++) {
            float s = 0.0f;
            for (int i = 0; i < hd; i++) s = fmaf(q[r * qs + i], kt[i * np + j0 + j], s);
            s *= scale;
            out[r * os + j] = s;
            mx[r] = s > mx[r] ? s : mx[r];
        }
}
static void vacc_ref(const float *p, int64_t ld, int g, const void *v, size_t row_bytes, int64_t n,
                     int hd, float *out, int64_t os, int kind) {
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = (const uint8_t *)v + (size_t)j * row_bytes;
        for (int a = 0; a < g; a++)
            for (int i = 0; i < hd; i++)
                out[a * os + i] = fmaf(p[a * ld + j], cache_val(row, i, kind), out[a * os + i]);
    }
}
static void vacc_f32(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                     float *o, int64_t os) { vacc_ref(p, ld, g, v, rb, n, hd, o, os, 0); }
static void vacc_f16(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                     float *o, int64_t os) { vacc_ref(p, ld, g, v, rb, n, hd, o, os, 1); }
static void vacc_q8(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                    float *o, int64_t os) { vacc_ref(p, ld, g, v, rb, n, hd, o, os, 2); }
/* x[i] = llk_exp(x[i] - mx); the sum: lane i % 8 for i < n & ~7, llk_sum8, then the rest in order. */
static float expsum_ref(float *x, int64_t n, float mx) {
    const int64_t n8 = n & ~(int64_t)7;
    float L[8] = {0};
    for (int64_t i = 0; i < n8; i++) { x[i] = llk_exp(x[i] - mx); L[i & 7] += x[i]; }
    float s = llk_sum8(L);
    for (int64_t i = n8; i < n; i++) { x[i] = llk_exp(x[i] - mx); s += x[i]; }
    return s;
}

static float softcap_ref(float *x, int64_t n, float scale, float cap) {
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        x[i] = llk_softcap1(x[i], scale, cap);
        m = x[i] > m ? x[i] : m;
    }
    return m;
}

static void swiglu_ref(const float *g, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = llk_silu1(g[i]) * u[i];
}
static void geglu_ref(const float *g, const float *u, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = llk_gelu1(g[i]) * u[i];
}

void llk_fill_ref(llk_kernels *k) {
    memset(k, 0, sizeof *k);
    k->quant_q8_32 = quant_q8_32_ref;
    k->quant_q8_256 = quant_q8_256_ref;
    k->vacc[LLK_KV_F32] = vacc_f32; k->vacc[LLK_KV_F16] = vacc_f16; k->vacc[LLK_KV_Q8_0] = vacc_q8;
    k->ktile = ktile_ref;
    k->kdots_tile = kdots_tile_ref;
    k->expsum = expsum_ref;
    k->softcap = softcap_ref;
    k->swiglu = swiglu_ref;
    k->geglu = geglu_ref;
#define SET(T, dq, dt) k->dequant[T] = dq; k->dot[T] = dt
    SET(LLK_TYPE_F32, deq_f32, dot_f32);
    SET(LLK_TYPE_F16, deq_f16, dot_f16);
    SET(LLK_TYPE_BF16, deq_bf16, dot_bf16);
    SET(LLK_TYPE_Q4_0, deq_q4_0, dot_q4_0);
    SET(LLK_TYPE_Q4_1, deq_q4_1, dot_q4_1);
    SET(LLK_TYPE_Q5_0, deq_q5_0, dot_q5_0);
    SET(LLK_TYPE_Q5_1, deq_q5_1, dot_q5_1);
    SET(LLK_TYPE_Q8_0, deq_q8_0, dot_q8_0);
    SET(LLK_TYPE_Q2_K, deq_q2_K, dot_q2_K);
    SET(LLK_TYPE_Q3_K, deq_q3_K, dot_q3_K);
    SET(LLK_TYPE_Q4_K, deq_q4_K, dot_q4_K);
    SET(LLK_TYPE_Q5_K, deq_q5_K, dot_q5_K);
    SET(LLK_TYPE_Q6_K, deq_q6_K, dot_q6_K);
    SET(LLK_TYPE_IQ4_NL, deq_iq4_nl, dot_iq4_nl);
    SET(LLK_TYPE_IQ4_XS, deq_iq4_xs, dot_iq4_xs);
#undef SET
    llk_fill_ref_iq(k);
}
