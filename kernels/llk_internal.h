/* llk_internal.h — what the kernel files share and callers never see: the weight block layouts
 * of the GGUF types, scalar float16/bfloat16 conversions, and the per-ISA kernel table.
 *
 * The block layouts are facts of the GGUF format (they must match byte for byte); see the
 * comment on each struct for the order of elements inside a block.
 */
#ifndef LLK_INTERNAL_H
#define LLK_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include <math.h>
#include "llk.h"

#define LLK_QK 32     /* elements per block of the legacy types and IQ4_NL */
#define LLK_QKK 256   /* elements per super-block of the K-quants and IQ4_XS */

/* An activation block whose absolute maximum is below this is stored as zeros: 127 / amax would
 * overflow to infinity for such values, and they are far below anything a model computes. */
#define LLK_ACT_TINY 1e-30f

typedef uint16_t llk_half; /* IEEE binary16 bits */

/* Packed to byte alignment: rows in a file start anywhere, and a block read through a struct
 * pointer must not assume the 2-byte alignment of its float16 fields. */
#pragma pack(push, 1)
/* Q4_0: x = d * (q - 8); qs[j] low nibble is element j, high nibble element j + 16. */
typedef struct { llk_half d; uint8_t qs[16]; } blk_q4_0;
/* Q4_1: x = d * q + m; nibble order as Q4_0. */
typedef struct { llk_half d, m; uint8_t qs[16]; } blk_q4_1;
/* Q5_0: x = d * (q - 16); q = nibble | (bit j of qh) << 4, nibble order as Q4_0. */
typedef struct { llk_half d; uint8_t qh[4]; uint8_t qs[16]; } blk_q5_0;
/* Q5_1: x = d * q + m. */
typedef struct { llk_half d, m; uint8_t qh[4]; uint8_t qs[16]; } blk_q5_1;
/* Q8_0: x = d * q. */
typedef struct { llk_half d; int8_t qs[32]; } blk_q8_0;
/* Q2_K: 16 groups of 16; scales[g] = scale (low 4 bits) | min (high 4 bits);
 * element i = 128h + 32s + l (h < 2, s < 4, l < 32) is (qs[32h + l] >> 2s) & 3;
 * x = d * sc * q - dmin * mn. */
typedef struct { uint8_t scales[16]; uint8_t qs[64]; llk_half d, dmin; } blk_q2_K;
/* Q3_K: 16 groups of 16 with signed 6-bit scales (minus 32) packed in 12 bytes; low 2 bits of
 * element i as Q2_K, high bit = bit (i / 32) of hmask[i % 32]; q = low - (high ? 0 : 4). */
typedef struct { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; llk_half d; } blk_q3_K;
/* Q4_K: 8 groups of 32, 6-bit scale and min per group packed in 12 bytes;
 * group 2c uses the low nibbles of qs[32c .. 32c+31], group 2c+1 the high nibbles;
 * x = d * sc * q - dmin * mn. */
typedef struct { llk_half d, dmin; uint8_t scales[12]; uint8_t qs[128]; } blk_q4_K;
/* Q5_K: as Q4_K plus a fifth bit: bit g of qh[l] for element l of group g. */
typedef struct { llk_half d, dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; } blk_q5_K;
/* Q6_K: 16 groups of 16, int8 scales; element i = 128h + 32s + l:
 * low 4 bits = (ql[64h + l + 32(s & 1)] >> 4(s >> 1)) & 15, high 2 = (qh[32h + l] >> 2s) & 3;
 * x = d * scales[i / 16] * (q - 32). */
typedef struct { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; llk_half d; } blk_q6_K;
/* IQ4_NL: x = d * kvalues[nibble]; nibble order as Q4_0. */
typedef struct { llk_half d; uint8_t qs[16]; } blk_iq4_nl;
/* IQ4_XS: 8 groups of 32; 6-bit scale (minus 32) = low 4 bits from scales_l, high 2 from
 * scales_h; group g: low nibbles of qs[16g ..] then high nibbles; x = d * ls * kvalues[n]. */
typedef struct { llk_half d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; } blk_iq4_xs;
/* The IQ1/IQ2/IQ3 grids (llk_iq_tables.h): a super-block of 256 is 8 sub-blocks of 32, each
 * made of grid entries (8 or 4 magnitudes) with signs and a 4- or 3-bit scale. Multi-byte fields
 * are little-endian and read with memcpy (they sit at odd offsets).
 * IQ2_XXS: sub-block s = 8 bytes at qs[8s]: 4 grid indexes (bytes), then a u32 of four 7-bit
 * ksigns indexes (bits 0-27) and the scale ls (bits 28-31); x = d * (0.5 + ls) / 4 * grid * sign. */
typedef struct { llk_half d; uint8_t qs[64]; } blk_iq2_xxs;
/* IQ2_XS: 32 u16 in qs, one per 8 elements: 9-bit grid index | 7-bit ksigns index << 9;
 * scales[s]: low nibble for elements 32s .. 32s+15, high nibble for the next 16; as IQ2_XXS. */
typedef struct { llk_half d; uint8_t qs[64]; uint8_t scales[8]; } blk_iq2_xs;
/* IQ2_S: grid index of 8 elements k = qs[k] | ((qh[k / 4] >> 2(k % 4)) & 3) << 8; one sign bit
 * per element (bit i % 8 of signs[i / 8]); scales as IQ2_XS. */
typedef struct { llk_half d; uint8_t qs[32]; uint8_t signs[32]; uint8_t qh[8]; uint8_t scales[8]; } blk_iq2_s;
/* IQ3_XXS: qs[k] = grid index of 4 elements; sub-block s: u32 at sas[4s] as IQ2_XXS's second
 * word; x = d * (0.5 + ls) / 2 * grid * sign. */
typedef struct { llk_half d; uint8_t qs[64]; uint8_t sas[32]; } blk_iq3_xxs;
/* IQ3_S: grid index of 4 elements k = qs[k] | bit (k % 8) of qh[k / 8] << 8; sign bits as IQ2_S;
 * scale nibble of sub-block s in scales[s / 2] (low nibble first); x = d * (1 + 2 sc) * grid * sign. */
typedef struct { llk_half d; uint8_t qs[64]; uint8_t qh[8]; uint8_t signs[32]; uint8_t scales[4]; } blk_iq3_s;
/* IQ1_S: sub-block s: u16 h = qh[2s..]; grid index of 8 elements k (k < 4) = qs[4s + k] |
 * ((h >> 3k) & 7) << 8; x = d * (2 ((h >> 12) & 7) + 1) * (grid + (h >> 15 ? -1/8 : 1/8)). */
typedef struct { llk_half d; uint8_t qs[32]; uint8_t qh[16]; } blk_iq1_s;
/* IQ1_M: grid index k = qs[k] | (nibble k of qh) & 7 << 8, delta sign = bit 3 of that nibble
 * (per 8 elements); 16 3-bit scales (one per 16 elements) in bits 0-11 of the 4 u16 of scales,
 * the float16 d in their top nibbles (d bits 4w .. 4w+3 from u16 w). */
typedef struct { uint8_t qs[32]; uint8_t qh[16]; uint8_t scales[8]; } blk_iq1_m;
/* TQ1_0: ternary, base-3 digits packed 5 per byte (4 in qh) as ceil(v * 256 / 243): digit j of
 * byte b is ((b * 3^j mod 256) * 3) >> 8; elements: qs[0..32) digit j -> 32j + m, qs[32..48) ->
 * 160 + 16j + m, qh -> 240 + 4j + m; x = d * (digit - 1). */
typedef struct { uint8_t qs[48]; uint8_t qh[4]; llk_half d; } blk_tq1_0;
/* TQ2_0: element 128c + 32j + m = ((qs[32c + m] >> 2j) & 3) - 1, times d. */
typedef struct { uint8_t qs[64]; llk_half d; } blk_tq2_0;
/* MXFP4 (32 per block): x = 2^(e - 128) * llk_mxfp4_values[nibble]; nibble order as Q4_0. */
typedef struct { uint8_t e; uint8_t qs[16]; } blk_mxfp4;

/* Q4_K / Q5_K scale and min of group j (0..7) from the 12 packed bytes. */
static inline void llk_k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) { *sc = s[j] & 63; *mn = s[j + 4] & 63; }
    else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* IQ4_XS: the signed scale (minus 32) of group g (0..7) from scales_l and scales_h. */
static inline int llk_iq4xs_scale(const blk_iq4_xs *b, int g) {
    const int lo = (b->scales_l[g >> 1] >> (4 * (g & 1))) & 15, hi = (b->scales_h >> (2 * g)) & 3;
    return (lo | hi << 4) - 32;
}

/* Panels: 8 rows of a weight matrix interleaved block by block, the layout of the matrix x matrix
 * kernels (llk_panel.c). Entry (j, g) of a panel holds block b = 8g + j of its 8 rows; entries are
 * stored lane-major (j = 0 .. 7, then g ascending), the order the summation contract accumulates
 * in, so every kernel walks a panel front to back.
 * Q4_0 x 8: the rows' float16 scales, then byte 32c + 4r + i = qs[4c + i] of row r (c, i < 4): its
 * low nibble is element 4c + i, its high nibble element 16 + 4c + i. 144 bytes.
 * Q8_0 x 8: the scales, then byte 32c + 4r + i = qs[4c + i] of row r (c < 8, i < 4). 272 bytes. */
typedef struct { llk_half d[8]; uint8_t qs[128]; } blk_q4_0x8;
/* Q4_1 x 8: as Q4_0 x 8 with the rows' mins after their scales. 160 bytes. */
typedef struct { llk_half d[8], m[8]; uint8_t qs[128]; } blk_q4_1x8;
typedef struct { llk_half d[8]; int8_t qs[256]; } blk_q8_0x8;
/* Q5_0 x 8 and Q5_1 x 8: as Q4_0 x 8 and Q4_1 x 8 with the fifth bits between the float16 fields
 * and the quants, rearranged: bit 2c + h of byte 4r + i of qh is the fifth bit of element
 * 16h + 4c + i of row r (c, i < 4; h < 2), whose low four bits are where Q4_0 x 8 has them.
 * 176 and 192 bytes, as the rows. */
typedef struct { llk_half d[8]; uint8_t qh[32]; uint8_t qs[128]; } blk_q5_0x8;
typedef struct { llk_half d[8], m[8]; uint8_t qh[32]; uint8_t qs[128]; } blk_q5_1x8;
/* Q4_K x 8 (one super-block of 8 rows, entries in super-block order; the K-quant contract has no
 * lanes): d, dmin of each row; sc[g][r], mn[g][r] its 6-bit scale and min of group g unpacked;
 * byte 256c + 32k + 4r + i = qs[32c + 4k + i] of row r (c < 4, k < 8, i < 4), whose low nibble is
 * element 64c + 4k + i (group 2c) and high nibble element 64c + 32 + 4k + i (group 2c + 1).
 * 1184 bytes against the 8 rows' 1152. */
typedef struct { llk_half d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint8_t qs[1024]; } blk_q4_Kx8;
/* Q5_K x 8: Q4_K x 8, then the fifth bits: byte 32k + 4r + i = qh[4k + i] of row r (k < 8), whose
 * bit g is the fifth bit of element 32g + 4k + i. 1440 bytes against the 8 rows' 1408. */
typedef struct { llk_half d[8], dmin[8]; uint8_t sc[8][8], mn[8][8]; uint8_t qs[1024]; uint8_t qh[256]; } blk_q5_Kx8;
/* Q6_K x 8 (one super-block of 8 rows): d of each row; sc[g][r] its int8 scale of group g (16
 * elements); ql[h][p][k] = 32 bytes, byte 4r + i = ql[64h + 32p + 4k + i] of row r; qh[h][k] = 32
 * bytes, byte 4r + i = qh[32h + 4k + i] of row r (h, p < 2, k < 8, i < 4). 1680 bytes, as the rows. */
typedef struct { llk_half d[8]; int8_t sc[16][8]; uint8_t ql[2][2][8][32]; uint8_t qh[2][8][32]; } blk_q6_Kx8;
/* IQ4_XS x 8 (one super-block of 8 rows): d of each row; ls[g][r] its scale of group g minus 32;
 * group g's 128 bytes at qs + 128g: byte 32k + 4r + i = qs[16g + 4k + i] of row r (k, i < 4), whose
 * low nibble indexes element 32g + 4k + i and high nibble element 32g + 16 + 4k + i. 1104 bytes
 * against the 8 rows' 1088. */
typedef struct { llk_half d[8]; int8_t ls[8][8]; uint8_t qs[1024]; } blk_iq4_xsx8;
#define LLK_PANEL_ROWS 8
/* Panels per pool chunk of a product over packed weights (what one call of a panel kernel takes):
 * 4 for a few tokens (generation, verify passes: a chunk is one stream of weights, and many chunks
 * balance the threads), 8 for a prompt, whose tiles then meet each token's activations with more
 * panels per read of them (the 512-bit super-block tiles four pairs at once). Zen 5, 1B pp512 at
 * avx512, 2 threads, alternating: Q4_0 with chunks of 16 against 4, +4-10% (median +7%, 8 rounds);
 * Q5_K_M with chunks of 8 against 16 +1-8% (16 waited on the threads' ends twice as long). */
static inline int64_t llk_panels_per_chunk(int64_t n_tok) { return n_tok > 16 ? 8 : 4; }

/* Block j of a q8_32 activation row (groups of 8, see llk_block_q8_32x8). */
#define ACT_D(g, j) ((g)[(j) >> 3].d[(j) & 7])
#define ACT_S(g, j) ((g)[(j) >> 3].s[(j) & 7])
#define ACT_O(g, j) ((g)[(j) >> 3].o[(j) & 7])
#define ACT_Q(g, j) ((g)[(j) >> 3].qs[(j) & 7])
#pragma pack(pop)

/* The 16 levels of the IQ4 non-linear grid (a format constant). */
extern const int8_t llk_iq4_values[16];
/* llk_iq_tables.h (generated from the gguf package's tables, defined in llk_ref_iq.c) */
extern const uint64_t llk_iq2xxs_grid[256], llk_iq2xs_grid[512], llk_iq2s_grid[1024];
extern const uint32_t llk_iq3xxs_grid[256], llk_iq3s_grid[512];
extern const uint64_t llk_iq1s_grid[2048];
extern const uint8_t llk_ksigns[128];
extern const uint64_t llk_ksigns64[128];
extern const int8_t llk_mxfp4_values[16];

/* MXFP4's shared scale: 2^(e - 128), the e8m0 exponent halved (the values are doubled). */
static inline float llk_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f; memcpy(&f, &bits, 4); return f;
}

/* --- scalar float16 / bfloat16 (exact, handle subnormals, inf and NaN) --------------------- */

static inline float llk_bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t llk_f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float llk_h2f(llk_half h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ffu;
    if (exp == 0x1f) return llk_bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) { /* zero or subnormal: man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return llk_bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline llk_half llk_f2h(float f) { /* round to nearest even */
    uint32_t u = llk_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return (llk_half)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u : 0u));
    if (a >= 0x477ff000u) return (llk_half)(sign | 0x7c00u); /* rounds to >= 65520: inf */
    if (a < 0x38800000u) { /* result subnormal or zero: value / 2^-24 rounded to even */
        float v = llk_bits_f32(a) * 16777216.0f;
        uint32_t m = (uint32_t)nearbyintf(v);
        return (llk_half)(sign | m);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (llk_half)(sign | ((r - 0x38000000u) >> 13));
}

static inline float llk_bf2f(uint16_t b) { return llk_bits_f32((uint32_t)b << 16); }

/* --- the summation contract: every ISA level computes the same floats -------------------------
 * Integer sums are exact, so SIMD kernels may form them in any order; float operations are not,
 * so each kernel family fixes them (see the reference kernels in llk_ref.c and llk_ref_iq.c):
 * which lane each product is accumulated in, where an FMA is used, and the reduction trees below.
 * A greedy continuation then does not depend on the CPU it runs on (tests/kernels/test_bitexact.py).
 * The library is compiled with -ffp-contract=off: a * b + c is fused only where written fmaf. */

/* 8 lanes in the tree a 256-bit reduction takes: halves, then quarters, then pairs. */
static inline float llk_sum8(const float v[8]) {
    return ((v[0] + v[4]) + (v[2] + v[6])) + ((v[1] + v[5]) + (v[3] + v[7]));
}

/* exp(x) for the softmax (x <= 0 in use): x = k ln2 + r with |r| <= ln2 / 2 (ln2 split in two
 * so k ln2 is exact), exp(r) by its Taylor polynomial to degree 6 (relative error ~2e-7), 2^k put
 * in the exponent bits; 0 below -87.3 (float's smallest normal is exp(-87.3)) and for NaN. The
 * SIMD twins (exp8) follow these operations one for one. */
#define LLK_EXP_LO (-87.3f)
#define LLK_EXP_LOG2E 1.44269504088896341f       /* 1 / ln2 */
#define LLK_EXP_LN2_HI 0.693145751953125f         /* ln2's leading bits (k ln2_hi exact) ... */
#define LLK_EXP_LN2_LO 1.428606765330187e-06f     /* ... and the rest */
static inline float llk_exp(float x) {
    float xc = x > LLK_EXP_LO ? x : LLK_EXP_LO;
    float k = nearbyintf(xc * LLK_EXP_LOG2E);
    float r = fmaf(-k, LLK_EXP_LN2_HI, xc);
    r = fmaf(-k, LLK_EXP_LN2_LO, r);
    float p = 1.0f / 720.0f;
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    float y = p * llk_bits_f32((uint32_t)((int32_t)k + 127) << 23);
    return x > LLK_EXP_LO ? y : 0.0f;
}

/* x * sigmoid(x) with llk_exp, from e = exp(-|x|) only (no overflow for either sign): x / (1 + e)
 * for x >= 0, x e / (1 + e) below. The SIMD activations (llk_kernels.swiglu) give these floats. */
static inline float llk_silu1(float x) {
    const float e = llk_exp(-fabsf(x));
    return (x >= 0.0f ? x : x * e) / (1.0f + e);
}
/* GELU, tanh approximation: 0.5 x (1 + tanh(z)) with z = c (x + 0.044715 x^3), written as
 * x sigmoid(2z) (the same function) and taken as llk_silu1 takes its sigmoid: from e = exp(-|2z|). */
#define LLK_GELU_C 0.7978845608028654f /* sqrt(2 / pi) */
static inline float llk_gelu1(float x) {
    const float s = 2.0f * (LLK_GELU_C * (x + 0.044715f * x * x * x));
    const float e = llk_exp(-fabsf(s));
    return (s >= 0.0f ? x : x * e) / (1.0f + e);
}

/* tanh for the logit soft-caps, from e = exp(-2|x|) (llk_exp): (1 - e) / (1 + e) with x's sign;
 * NaN stays NaN, +-inf gives +-1. Its absolute error is a few 1e-8 (near 0, 1 - e keeps the
 * absolute precision of 1, not the relative precision of x): under a cap of 50 a score moves by
 * ~1e-6. The SIMD twins (tanh8, tanh16) follow these operations one for one. */
static inline float llk_tanh(float x) {
    const float e = llk_exp(-2.0f * fabsf(x));
    const float t = (1.0f - e) / (1.0f + e);
    return x != x ? x : copysignf(t, x);
}
/* A soft-capped logit: cap tanh((x scale) / cap), in that order. */
static inline float llk_softcap1(float x, float scale, float cap) { return cap * llk_tanh(x * scale / cap); }

/* --- what the compiler was told to target (each ISA file is built with its own flags) ------- */

/* MSVC's /arch:AVX2 implies FMA and F16C without defining their macros, and its /arch:AVX512
 * (F, CD, BW, DQ, VL) leaves VNNI to the intrinsics, which MSVC always accepts. (AVX-VNNI's are
 * not taken there: that build stays a stub, and the AVX2 level runs without it.) */
#if defined(_MSC_VER) && !defined(__clang__)
#if defined(__AVX2__)
#define LLK_TARGET_AVX2 1
#endif
#if defined(__AVX512F__)
#define LLK_TARGET_AVX512 1
#define LLK_TARGET_VNNI 1
#endif
#else
#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define LLK_TARGET_AVX2 1
#endif
#if defined(LLK_TARGET_AVX2) && defined(__AVX512F__) && defined(__AVX512BW__) && \
    defined(__AVX512VL__) && defined(__AVX512DQ__)
#define LLK_TARGET_AVX512 1
#endif
#if defined(__AVX512VNNI__)
#define LLK_TARGET_VNNI 1
#endif
#if defined(LLK_TARGET_AVX2) && defined(__AVXVNNI__)
#define LLK_TARGET_AVXVNNI 1
#endif
#endif

/* --- kernel table ---------------------------------------------------------------------------- */

#define LLK_N_TYPES 40

typedef void (*llk_dequant_fn)(const void *x, float *y, int64_t n);
typedef void (*llk_quant_fn)(const float *x, void *a, int64_t n);
typedef float (*llk_dot_fn)(const void *w, const void *a, int64_t n);
/* out[t] = dot(w, activation row t), t < 4, rows `as` bytes apart (register-blocked matmul) */
typedef void (*llk_dot4_fn)(const void *w, const void *a, size_t as, int64_t n, float *out);

/* KV cache kinds: the attention kernels' tables are indexed by them. A Q8_0 head slice is hd / 32
 * blocks of 34 bytes (float16 scale d, then 32 int8 q), value d * q. That product is exact in
 * float32 (11 significant bits times 8), so each kernel reads the 8-bit cache directly and still
 * sums the very floats the reference does. */
enum { LLK_KV_F32 = 0, LLK_KV_F16 = 1, LLK_KV_Q8_0 = 2, LLK_KV_KINDS = 3 };
static inline int llk_kv_kind(int type) {
    return type == LLK_TYPE_F32 ? LLK_KV_F32 : type == LLK_TYPE_F16 ? LLK_KV_F16
         : type == LLK_TYPE_Q8_0 ? LLK_KV_Q8_0 : -1;
}
/* Byte offset of head value i (i % 8 == 0 for the SIMD loads) and bytes of a head slice of hd. */
static inline size_t llk_kv_off(int i, int kind) {
    return kind == LLK_KV_Q8_0 ? (size_t)(i >> 5) * 34 + 2 + (size_t)(i & 31)
                               : (size_t)i * (kind == LLK_KV_F16 ? 2 : 4);
}
static inline size_t llk_kv_head_bytes(int hd, int kind) {
    return kind == LLK_KV_Q8_0 ? (size_t)(hd >> 5) * 34 : (size_t)hd * (kind == LLK_KV_F16 ? 2 : 4);
}
/* The float16 scale (its bits) of the Q8_0 block holding head value i: the block's first 2 bytes. */
static inline llk_half llk_kv_q8_scale_bits(const uint8_t *row, int i) {
    llk_half h;
    memcpy(&h, row + (size_t)(i >> 5) * 34, 2);
    return h;
}
/* ... as float32. */
static inline float llk_kv_q8_scale(const uint8_t *row, int i) { return llk_h2f(llk_kv_q8_scale_bits(row, i)); }

/* Attention inner loops. The K side works on tiles: up to a tile of one KV head's positions,
 * converted and transposed at once (ktile) to hd rows of np floats, one per head value, so that a
 * position is a lane. kdots_tile takes nq query rows against such a tile, and each score is one
 * lane's sum: q[0] k[0] + q[1] k[1] + ... by FMA in order from 0, then times scale (the contract,
 * llk_ref.c).
 * ktile:      kt[i * np + j] = value i of cache row j (rows rs bytes apart, of a LLK_KV_* kind) for
 *             j < n, 0 for n <= j < np (np % LLK_KT_LANES == 0); the rows of `next` (the tile read
 *             after this one, or NULL) are prefetched as these are read.
 * kdots_tile: out[r * os + j] = scale * dot(q + r * qs, position j0 + j of kt) for r < nq and j < n
 *             (0 <= j0, j0 + n <= np), and mx[r] = the larger of mx[r] and those.
 * vacc: for a group of g <= LLK_ATTN_GROUP query heads that share one KV head (grouped-query
 *       attention), over n cache rows of hd values (a LLK_KV_* kind), rows row_bytes apart, each
 *       row read and converted once for the whole group:
 *       out[a * os + i] += sum_j p[a * ld + j] * V row j [i]. */
#define LLK_ATTN_GROUP 4
#define LLK_KT_LANES 16   /* a transposed tile's rows are padded to a multiple of this (the widest lanes) */
/* The attention kernels cover their vectors in passes of at most w_max vectors (a pass keeps rows x
 * its width sums in registers, one FMA chain each). With `left` vectors to go, the next pass is w_max
 * wide, except that the last two passes split what is left evenly when that is between w_max and
 * 2 w_max (4 vectors under 3: 2 + 2, not 3 + 1, whose last pass would have as few chains as rows and
 * wait on the FMA latency). Which vectors share a pass changes no sum, only how many run at once. */
static inline int llk_next_pass(int64_t left, int w_max) {
    if (left >= 2 * (int64_t)w_max || left == w_max) return w_max;
    return (int)(left > w_max ? (left + 1) / 2 : left);
}
typedef void (*llk_ktile_fn)(const uint8_t *rows, size_t rs, int kind, int64_t n, int hd, float *kt, int64_t np,
                             const uint8_t *next);
typedef void (*llk_kdots_tile_fn)(const float *q, int64_t qs, int nq, const float *kt, int64_t np, int hd,
                                  float scale, int64_t j0, int64_t n, float *out, int64_t os, float *mx);
typedef void (*llk_vacc_fn)(const float *p, int64_t ld, int g, const void *v, size_t row_bytes,
                            int64_t n, int hd, float *out, int64_t os);

/* x[i] = exp(x[i] - mx) in place; returns the sum (softmax without the division). */
typedef float (*llk_expsum_fn)(float *x, int64_t n, float mx);

/* x[i] = llk_softcap1(x[i], scale, cap) in place; returns the largest (NaN skipped; -inf for n = 0). */
typedef float (*llk_softcap_fn)(float *x, int64_t n, float scale, float cap);

/* The gated activations of a feed-forward: y[i] = act(g[i]) * u[i] (y may be g), act llk_silu1
 * (SwiGLU) or llk_gelu1 (GeGLU). */
typedef void (*llk_glu_fn)(const float *g, const float *u, float *y, int64_t n);

/* The integer peak probe's loop (llk_int8_peak_probe): the level's widest 8-bit multiply-add
 * instruction run n times in each of several independent chains, nothing else; returns the
 * multiply-adds done and folds the results into *sink so that none is optimised away. */
typedef int64_t (*llk_int8_peak_fn)(int64_t n, uint64_t *sink);

/* Panels [0, n_panels) of a packed matrix (panel_bytes apart, n_cols columns) against n_tok
 * activation rows `as` bytes apart: y[t * ldy + 8p + r] = dot(row 8p + r, activation row t). */
typedef void (*llk_panel_fn)(const void *w, size_t panel_bytes, int64_t n_panels, int64_t n_cols,
                             const void *a, size_t as, int64_t n_tok, float *y, int64_t ldy);

typedef struct {
    llk_dequant_fn dequant[LLK_N_TYPES];
    llk_dot_fn dot[LLK_N_TYPES];
    llk_dot4_fn dot4[LLK_N_TYPES];    /* NULL: the driver calls dot four times */
    llk_panel_fn panel[LLK_N_TYPES];  /* NULL: no packed layout at this level (rows stay as read) */
    uint8_t panel_biased[LLK_N_TYPES];/* 1: panel[type] takes its activations biased (llk_act_bias) */
    llk_quant_fn quant_q8_32;
    llk_quant_fn quant_q8_256;
    llk_vacc_fn vacc[LLK_KV_KINDS];   /* by LLK_KV_* kind of the cache */
    llk_ktile_fn ktile;
    llk_kdots_tile_fn kdots_tile;
    llk_expsum_fn expsum;
    llk_softcap_fn softcap;
    llk_glu_fn swiglu;
    llk_glu_fn geglu;
    llk_int8_peak_fn int8_peak;       /* NULL at the reference level (no 8-bit multiply-add) */
} llk_kernels;

/* Each ISA file fills a table from the one below it, then overwrites what it accelerates. */
void llk_fill_ref(llk_kernels *k);
void llk_fill_ref_iq(llk_kernels *k);    /* the grid, ternary and MXFP4 types (llk_ref_iq.c) */
void llk_fill_avx2(llk_kernels *k);
void llk_fill_avx512(llk_kernels *k);      /* AVX-512 F/BW/VL without VNNI */
void llk_fill_avx512vnni(llk_kernels *k);  /* the same file built with VNNI */
void llk_fill_avx2vnni(llk_kernels *k);    /* llk_avx2.c built with AVX-VNNI (-mavxvnni) */
int llk_have_avx2_build(void);
int llk_have_avx2vnni_build(void);
int llk_have_avx512_build(void);

/* The CPU's L1 data cache per core, in bytes, as CPUID tells it (32 KiB where it does not): what
 * the prompt tiles size their column ranges by. Valid once a kernel table was chosen. */
size_t llk_l1d_bytes(void);

/* The table for a level (LLK_ISA_DEFAULT: the chosen one); NULL if the level is unavailable. */
const llk_kernels *llk_kernels_for(int isa);

/* A matrix product with its kernels and sizes looked up once, run on ranges of W's rows (from
 * inside a pool job: the decoder's fused products); y[t * ldy + r] for every token t. */
typedef struct {
    llk_dot_fn dot;
    llk_dot4_fn dot4;       /* NULL where the type has no 1 x 4 kernel at this level */
    const uint8_t *w;       /* rows row_stride bytes apart */
    size_t row_stride;
    const uint8_t *a;       /* n_tok x act_bytes: quantized activations */
    size_t act_bytes;
    int64_t n_cols, n_tok, ldy;
    float *y;               /* n_tok x ldy */
    llk_panel_fn panel;     /* non-NULL: W is packed (w = its panels, panel_bytes apart) */
    size_t panel_bytes;
} llk_mm_job;
llk_status llk_mm_prepare(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                          int64_t n_cols, const void *a, int64_t n_tok, float *y, int64_t ldy,
                          llk_mm_job *out);
void llk_mm_rows(const llk_mm_job *j, int64_t r0, int64_t r1);
/* Row k of n equal splits of a job's n_rows rows: whole panels where W is packed. */
int64_t llk_mm_split(const llk_mm_job *j, int64_t n_rows, int64_t k, int64_t n);

/* Packing (llk_panel.c): bytes of one packed panel of n_cols columns (0: the type has no panel
 * layout), and the panels [p0, p1) of W (n_rows a multiple of 8) written into out. */
size_t llk_panel_bytes_of(int type, int64_t n_cols);
void llk_panel_pack_range(int type, const uint8_t *w, size_t row_stride, int64_t n_cols,
                          int64_t p0, int64_t p1, uint8_t *out);
void llk_fill_ref_panel(llk_kernels *k);   /* the reference panel kernels (llk_panel.c) */

/* Activations of one row in the format `act`, with table k. */
void llk_quantize_act_k(const llk_kernels *k, int act, const float *x, void *a, int64_t n);
/* Biased activations: the 8-bit quants of one row of n in `type`'s activation format (q8_256 or
 * q8_32) moved to a + 128, stored as the unsigned byte a ^ 0x80 (scales and sums unchanged). A u8 x
 * s8 multiply-add can then take the activations as its unsigned side and the weights' levels as
 * signed, and the 128 x sum of levels it adds is the weights' own constant (a panel kernel
 * subtracts it once per block or super-block, instead of a token's sums times the weights' scales:
 * Q6_K's -32; or instead of moving each weight's sign onto the activations: Q8_0 with VNNI). */
void llk_act_bias(int type, void *a, int64_t n);
/* The activations table k's panel kernel for `type` takes (n a whole number of its blocks). */
void llk_quantize_act_panel(const llk_kernels *k, int type, const float *x, void *a, int64_t n);

/* Traits */
typedef struct { int block_size, block_bytes, act; } llk_traits;
const llk_traits *llk_traits_of(int type);

#endif /* LLK_INTERNAL_H */
