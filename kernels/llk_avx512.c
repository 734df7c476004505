/* llk_avx512.c — the AVX-512 level (F/BW/VL/DQ), built twice: with VNNI (-mavx512vnni,
 * LLK_VNNI=1, exported as llk_fill_avx512vnni) and without (llk_fill_avx512). Called only after
 * dispatch has seen the features. Each kernel matches its twin in llk_ref.c.
 *
 * The table starts from llk_simd256.inc's kernels, recompiled here with dot_us() as VNNI's vpdpbusd
 * (u8 x s8 -> i32 in one instruction, where AVX2 needs maddubs + madd) and bits -> bytes through a
 * mask register. Then the hot dots are replaced by 512-bit ones: float types 16 lanes at a time;
 * legacy 32-blocks two blocks per zmm (dots and 1 x 4 matmul kernels); K-quants and IQ4_XS 64
 * weights per zmm (IQ4_XS, whose biased levels exceed maddubs' range, only with VNNI). Every one
 * keeps its reference's summation order (llk_internal.h, the summation contract).
 */
#include "llk_internal.h"

#if defined(LLK_VNNI)
#define LLK_FILL llk_fill_avx512vnni
#else
#define LLK_FILL llk_fill_avx512
#endif

#if defined(LLK_TARGET_AVX512) && (!defined(LLK_VNNI) || defined(LLK_TARGET_VNNI))
#include <immintrin.h>
#include <stdlib.h>

#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 1; }
#endif

/* 8 x i32: sums of 4 adjacent u8 x s8 products: one vpdpbusd with VNNI */
static inline __m256i dot_us(__m256i u, __m256i s) {
#if defined(LLK_VNNI)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
/* byte i = 0x10 where bit i of qh is set: a mask register does the bit -> byte step */
static inline __m256i bits32_x16(const uint8_t qh[4]) {
    uint32_t b; memcpy(&b, qh, 4);
    return _mm256_maskz_mov_epi8((__mmask32)b, _mm256_set1_epi8(0x10));
}

#include "llk_simd256.inc"
#include "llk_avx2_panel.inc"
#include "llk_avx512_panel.inc"
#include "llk_avx512_panel2.inc"
#if defined(LLK_VNNI)
#include "llk_vnni256_panel.inc"
#endif

/* --- float types: 16 lanes ------------------------------------------------------------------- */

/* z0, z1 are lanes 0-15 and 16-31 of the contract's 32 (llk_ref.c); the tail and the fold are
 * the 256-bit kernels' on their halves (float_dot_finish). Plain loads in the main loop: masked
 * loads of streamed data run far below memory speed here. */
typedef __m512 (*float_load16_fn)(const uint8_t *p, int64_t i);

static inline __m512 f32x16_at(const uint8_t *p, int64_t i) { return _mm512_loadu_ps((const float *)(p + 4 * i)); }
static inline __m512 f16x16_at(const uint8_t *p, int64_t i) {
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + 2 * i)));
}
static inline __m512 bf16x16_at(const uint8_t *p, int64_t i) {
    __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(p + 2 * i)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}

KERNEL_INLINE float float_dot_512(const void *w, const void *a, int64_t n, float_load16_fn load16,
                                  float_load8_fn load8, float_load1_fn load1) {
    const uint8_t *p = (const uint8_t *)w;
    const float *x = (const float *)a;
    __m512 z0 = _mm512_setzero_ps(), z1 = z0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        z0 = _mm512_fmadd_ps(load16(p, i), _mm512_loadu_ps(x + i), z0);
        z1 = _mm512_fmadd_ps(load16(p, i + 16), _mm512_loadu_ps(x + i + 16), z1);
    }
    __m256 s0 = _mm512_castps512_ps256(z0), s1 = _mm512_extractf32x8_ps(z0, 1);
    __m256 s2 = _mm512_castps512_ps256(z1), s3 = _mm512_extractf32x8_ps(z1, 1);
    return float_dot_finish(p, x, n, i, s0, s1, s2, s3, load8, load1);
}

static float dot_f32_512(const void *w, const void *a, int64_t n) {
    return float_dot_512(w, a, n, f32x16_at, f32x8_at, f32_at);
}
static float dot_f16_512(const void *w, const void *a, int64_t n) {
    return float_dot_512(w, a, n, f16x16_at, f16x8_at, f16_at);
}
static float dot_bf16_512(const void *w, const void *a, int64_t n) {
    return float_dot_512(w, a, n, bf16x16_at, bf16x8_at, bf16_at);
}

static void deq_f16_512(const void *x, float *y, int64_t n) {
    const uint16_t *p = (const uint16_t *)x;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + i))));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + i)));
    }
}

/* --- legacy 32-blocks, two blocks per 512-bit vector -----------------------------------------
 * Blocks 2k and 2k+1 of an activation group are 64 contiguous bytes; their weight levels are
 * unpacked into one zmm in the same order ([a 0-15, a 16-31, b 0-15, b 16-31]) and multiplied by
 * one vpdpbusd (u8 x s8; signed levels move their sign onto the activations). The four products
 * of a group reduce to its 8 exact block totals, which take the contract's one FMA per group
 * (llk_ref.c) as in the 256-bit kernels. Partial last groups use the 256-bit steps. */

static inline __m512i dpbusd512(__m512i u, __m512i s) {
#if defined(LLK_VNNI)
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, s);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1));
#endif
}
/* s8 x s8: |w| x (x with w's sign); |w| <= 128 and |x| <= 127 keep maddubs' i16 pairs exact */
static inline __m512i sdot512(__m512i w, __m512i x) {
    const __m512i nx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return dpbusd512(_mm512_abs_epi8(w), nx);
}

/* 16 + 16 packed nibble bytes of two blocks -> 64 levels, in element order per block:
 * [a lo, a hi, b lo, b hi] from two 128-bit broadcast loads, a blend and a per-lane shift
 * (no shuffle-port work: Zen 4/5 and Intel cores have fewer shuffle ports than ALU ports). */
static inline __m512i nib64(const uint8_t *qa, const uint8_t *qb) {
    __m512i za = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qa));
    __m512i zb = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qb));
    __m512i z = _mm512_mask_blend_epi64(0xf0, za, zb);                        /* [a, a, b, b] */
    z = _mm512_srlv_epi16(z, _mm512_set_epi64(4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL, 0, 0,
                                              4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL, 0, 0));
    return _mm512_and_si512(z, _mm512_set1_epi8(15));
}
static inline __m512i hbits64(const uint8_t qa[4], const uint8_t qb[4]) {
    uint32_t ha, hb; memcpy(&ha, qa, 4); memcpy(&hb, qb, 4);
    return _mm512_maskz_mov_epi8((__mmask64)ha | ((__mmask64)hb << 32), _mm512_set1_epi8(0x10));
}
/* The per-type helpers of the 512-bit legacy kernels (B: the first byte of blocks 2k, 2k + 1):
 *   pair_levels  the two blocks' 64 levels in one zmm, in the order above
 *   pair_dot     dpbusd512 (unsigned levels) or sdot512 (signed levels: Q8_0, IQ4_NL) */
typedef __m512i (*pair_levels_fn)(const uint8_t *B);
typedef __m512i (*pair_dot_fn)(__m512i levels, __m512i x);

static inline __m512i pair_levels_q4_0(const uint8_t *B) {
    const blk_q4_0 *b = (const blk_q4_0 *)B;
    return nib64(b[0].qs, b[1].qs);
}
static inline __m512i pair_levels_q4_1(const uint8_t *B) {
    const blk_q4_1 *b = (const blk_q4_1 *)B;
    return nib64(b[0].qs, b[1].qs);
}
static inline __m512i pair_levels_q5_0(const uint8_t *B) {
    const blk_q5_0 *b = (const blk_q5_0 *)B;
    return _mm512_or_si512(nib64(b[0].qs, b[1].qs), hbits64(b[0].qh, b[1].qh));
}
static inline __m512i pair_levels_q5_1(const uint8_t *B) {
    const blk_q5_1 *b = (const blk_q5_1 *)B;
    return _mm512_or_si512(nib64(b[0].qs, b[1].qs), hbits64(b[0].qh, b[1].qh));
}
static inline __m512i pair_levels_q8_0(const uint8_t *B) {
    const blk_q8_0 *b = (const blk_q8_0 *)B;
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs)),
                              _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
}
static inline __m512i pair_levels_iq4_nl(const uint8_t *B) {
    const blk_iq4_nl *b = (const blk_iq4_nl *)B;
    return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)llk_iq4_values)),
                               nib64(b[0].qs, b[1].qs));
}

/* The 8 float16 fields `off` bytes into 8 consecutive blocks of `stride` bytes (a whole group),
 * by two-source word permutes over 128-byte windows that stay inside the group: one window when
 * all 8 fit (18-byte blocks), else one for blocks 0-3 and one for 4-7 (constants fold). */
static inline __m256 gather_h8_perm(const uint8_t *p, int stride, int off) {
    const int sw = stride / 2, ow = off / 2;
    if (ow + 7 * sw < 64) {
        __m512i lo = _mm512_loadu_si512((const void *)p), hi = _mm512_loadu_si512((const void *)(p + 64));
        __m512i idx = _mm512_castsi128_si512(_mm_setr_epi16((short)ow, (short)(ow + sw), (short)(ow + 2 * sw),
            (short)(ow + 3 * sw), (short)(ow + 4 * sw), (short)(ow + 5 * sw), (short)(ow + 6 * sw), (short)(ow + 7 * sw)));
        return _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_permutex2var_epi16(lo, idx, hi)));
    }
    /* second window: from block 4 if 128 bytes fit before the group's end, else the last 128 */
    const int b1 = 4 * stride + 128 <= 8 * stride ? 4 * stride : 8 * stride - 128;
    const int w1 = ow - b1 / 2;   /* word index of block k's field: w1 + k * sw */
    __m512i lo0 = _mm512_loadu_si512((const void *)p), hi0 = _mm512_loadu_si512((const void *)(p + 64));
    __m512i lo1 = _mm512_loadu_si512((const void *)(p + b1)), hi1 = _mm512_loadu_si512((const void *)(p + b1 + 64));
    __m512i i0 = _mm512_castsi128_si512(_mm_setr_epi16((short)ow, (short)(ow + sw), (short)(ow + 2 * sw),
                                                       (short)(ow + 3 * sw), 0, 0, 0, 0));
    __m512i i1 = _mm512_castsi128_si512(_mm_setr_epi16(0, 0, 0, 0, (short)(w1 + 4 * sw), (short)(w1 + 5 * sw),
                                                       (short)(w1 + 6 * sw), (short)(w1 + 7 * sw)));
    __m128i r = _mm_mask_blend_epi16(0xf0, _mm512_castsi512_si128(_mm512_permutex2var_epi16(lo0, i0, hi0)),
                                     _mm512_castsi512_si128(_mm512_permutex2var_epi16(lo1, i1, hi1)));
    return _mm256_cvtph_ps(r);
}
/* The 8 float16 scales d of a group's blocks (bsize bytes each, d first): the permute gather for
 * a whole group, the register inserts for a row's partial last group. */
KERNEL_INLINE __m256 gather_d8(const uint8_t *B, const size_t bsize, int cnt) {
    return cnt == 8 ? gather_h8_perm(B, (int)bsize, 0) : gather_h8(B, bsize, cnt);
}
static inline __m256 act_coef512_q4_1(const uint8_t *B, __m256 dw, int cnt) {
    (void)dw;
    return cnt == 8 ? gather_h8_perm(B, (int)sizeof(blk_q4_1), (int)offsetof(blk_q4_1, m))
                    : gather_h8(B + offsetof(blk_q4_1, m), sizeof(blk_q4_1), cnt);
}
static inline __m256 act_coef512_q5_1(const uint8_t *B, __m256 dw, int cnt) {
    (void)dw;
    return cnt == 8 ? gather_h8_perm(B, (int)sizeof(blk_q5_1), (int)offsetof(blk_q5_1, m))
                    : gather_h8(B + offsetof(blk_q5_1, m), sizeof(blk_q5_1), cnt);
}

/* The 8 exact block totals of a group from its four pair products d_k (block 2k in lanes 0-7,
 * 2k+1 in 8-15), in order: pairwise within 128-bit lanes, then across them. */
static inline __m256i pairs_to_blocks(__m512i d0, __m512i d1, __m512i d2, __m512i d3) {
    __m512i e01 = _mm512_add_epi32(_mm512_unpacklo_epi32(d0, d1), _mm512_unpackhi_epi32(d0, d1));
    __m512i e23 = _mm512_add_epi32(_mm512_unpacklo_epi32(d2, d3), _mm512_unpackhi_epi32(d2, d3));
    /* 128-bit lane L: [d0, d1, d2, d3 summed over L] */
    __m512i f = _mm512_add_epi32(_mm512_unpacklo_epi64(e01, e23), _mm512_unpackhi_epi64(e01, e23));
    /* lane 0: blocks 0, 2, 4, 6; lane 2: blocks 1, 3, 5, 7 */
    __m512i g = _mm512_add_epi32(f, _mm512_shuffle_i32x4(f, f, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 0, 0, 0, 0, 0, 0, 0, 0), g));
}

/* pair k's products: blocks 2k, 2k + 1 of B against their 64 activation bytes in G */
KERNEL_INLINE __m512i pair_sums(const uint8_t *B, const size_t bsize, const llk_block_q8_32x8 *G, int k,
                                pair_levels_fn pair_levels, pair_dot_fn pair_dot) {
    return pair_dot(pair_levels(B + (size_t)(2 * k) * bsize), _mm512_loadu_si512((const void *)G->qs[2 * k]));
}

/* legacy_dot (llk_simd256.inc) with a whole group's products two blocks per zmm */
KERNEL_INLINE float legacy_dot512(const void *w, const void *a, int64_t n, const size_t bsize,
                                  pair_levels_fn pair_levels, pair_dot_fn pair_dot,
                                  leg_block_idot_fn block_idot, leg_act_coef_fn act_coef, const int off) {
    const uint8_t *blk = (const uint8_t *)w;
    const llk_block_q8_32x8 *ag = (const llk_block_q8_32x8 *)a;
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps(), accx = acc;
    for (int64_t g = 0; 8 * g < nb; g++) {
        const uint8_t *B = blk + (size_t)(8 * g) * bsize;
        const llk_block_q8_32x8 *G = ag + g;
        const int cnt = nb - 8 * g < 8 ? (int)(nb - 8 * g) : 8;
        prefetch_ahead(B, 8 * bsize);
        __m256 dw = gather_d8(B, bsize, cnt);
        __m256 S = _mm256_mul_ps(dw, _mm256_loadu_ps(G->d));
        if (act_coef) accx = _mm256_fmadd_ps(act_coef(B, dw, cnt), _mm256_loadu_ps(G->s), accx);
        __m256i I;
        if (cnt == 8)
            I = pairs_to_blocks(pair_sums(B, bsize, G, 0, pair_levels, pair_dot), pair_sums(B, bsize, G, 1, pair_levels, pair_dot),
                                pair_sums(B, bsize, G, 2, pair_levels, pair_dot), pair_sums(B, bsize, G, 3, pair_levels, pair_dot));
        else
            I = hsum8x8i(leg_block_sums(B, bsize, G, 0, cnt, block_idot), leg_block_sums(B, bsize, G, 1, cnt, block_idot),
                         leg_block_sums(B, bsize, G, 2, cnt, block_idot), leg_block_sums(B, bsize, G, 3, cnt, block_idot),
                         leg_block_sums(B, bsize, G, 4, cnt, block_idot), leg_block_sums(B, bsize, G, 5, cnt, block_idot),
                         leg_block_sums(B, bsize, G, 6, cnt, block_idot), leg_block_sums(B, bsize, G, 7, cnt, block_idot));
        acc = _mm256_fmadd_ps(S, _mm256_cvtepi32_ps(leg_offset(I, G, off)), acc);
    }
    return hsum8(_mm256_add_ps(acc, accx));
}

static float dot_q4_0_512(const void *w, const void *a, int64_t n) {
    return legacy_dot512(w, a, n, sizeof(blk_q4_0), pair_levels_q4_0, dpbusd512, block_idot_q4_0, NULL, 1);
}
static float dot_q4_1_512(const void *w, const void *a, int64_t n) {
    return legacy_dot512(w, a, n, sizeof(blk_q4_1), pair_levels_q4_1, dpbusd512, block_idot_q4_1, act_coef512_q4_1, 0);
}
static float dot_q5_0_512(const void *w, const void *a, int64_t n) {
    return legacy_dot512(w, a, n, sizeof(blk_q5_0), pair_levels_q5_0, dpbusd512, block_idot_q5_0, NULL, 2);
}
static float dot_q5_1_512(const void *w, const void *a, int64_t n) {
    return legacy_dot512(w, a, n, sizeof(blk_q5_1), pair_levels_q5_1, dpbusd512, block_idot_q5_1, act_coef512_q5_1, 0);
}
static float dot_q8_0_512(const void *w, const void *a, int64_t n) {
    return legacy_dot512(w, a, n, sizeof(blk_q8_0), pair_levels_q8_0, sdot512, block_idot_q8_0, NULL, 0);
}
static float dot_iq4_nl_512(const void *w, const void *a, int64_t n) {
    return legacy_dot512(w, a, n, sizeof(blk_iq4_nl), pair_levels_iq4_nl, sdot512, block_idot_iq4_nl, NULL, 0);
}

/* --- 1 x 4 register-blocked legacy dots, two blocks per zmm (matrix x matrix) ------------------
 * The pair of blocks is unpacked once; each of the four tokens then costs one vpdpbusd per pair
 * and, per group, one reduction to block totals and one FMA. Partial groups: legacy4_totals. */

KERNEL_INLINE void legacy_dot4_512(const void *w, const void *a, size_t as, int64_t n, float *out,
                                   const size_t bsize, pair_levels_fn pair_levels, pair_dot_fn pair_dot,
                                   leg_levels_fn levels, leg_bytes_dot_fn bytes_dot, leg_act_coef_fn act_coef,
                                   const int off) {
    const uint8_t *blk = (const uint8_t *)w;
    const uint8_t *a8 = (const uint8_t *)a;
    const int64_t nb = n / 32;
    __m256 c[4], cx[4];
    for (int t = 0; t < 4; t++) c[t] = cx[t] = _mm256_setzero_ps();
    for (int64_t g = 0; 8 * g < nb; g++) {
        const uint8_t *B = blk + (size_t)(8 * g) * bsize;
        const int cnt = nb - 8 * g < 8 ? (int)(nb - 8 * g) : 8;
        __m256 dw = gather_d8(B, bsize, cnt);
        const __m256 cf = act_coef ? act_coef(B, dw, cnt) : _mm256_setzero_ps();
        const llk_block_q8_32x8 *G[4];
        for (int t = 0; t < 4; t++) G[t] = (const llk_block_q8_32x8 *)(a8 + t * as) + g;
        __m256i I[4];
        if (cnt == 8) {
            __m512i d[4][4];
            for (int k = 0; k < 4; k++) {
                const __m512i lv = pair_levels(B + (size_t)(2 * k) * bsize);
                for (int t = 0; t < 4; t++)
                    d[t][k] = pair_dot(lv, _mm512_loadu_si512((const void *)G[t]->qs[2 * k]));
            }
            for (int t = 0; t < 4; t++) I[t] = pairs_to_blocks(d[t][0], d[t][1], d[t][2], d[t][3]);
        } else {
            legacy4_totals(B, bsize, G, cnt, levels, bytes_dot, I);
        }
        for (int t = 0; t < 4; t++) {
            c[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps(G[t]->d)),
                                   _mm256_cvtepi32_ps(leg_offset(I[t], G[t], off)), c[t]);
            if (act_coef) cx[t] = _mm256_fmadd_ps(cf, _mm256_loadu_ps(G[t]->s), cx[t]);
        }
    }
    for (int t = 0; t < 4; t++) out[t] = hsum8(_mm256_add_ps(c[t], cx[t]));
}

static void dot4_q4_0_512(const void *w, const void *a, size_t as, int64_t n, float *out) {
    legacy_dot4_512(w, a, as, n, out, sizeof(blk_q4_0), pair_levels_q4_0, dpbusd512, levels_q4_0, dot_us, NULL, 1);
}
static void dot4_q4_1_512(const void *w, const void *a, size_t as, int64_t n, float *out) {
    legacy_dot4_512(w, a, as, n, out, sizeof(blk_q4_1), pair_levels_q4_1, dpbusd512, levels_q4_1, dot_us, act_coef512_q4_1, 0);
}
static void dot4_q5_0_512(const void *w, const void *a, size_t as, int64_t n, float *out) {
    legacy_dot4_512(w, a, as, n, out, sizeof(blk_q5_0), pair_levels_q5_0, dpbusd512, levels_q5_0, dot_us, NULL, 2);
}
static void dot4_q5_1_512(const void *w, const void *a, size_t as, int64_t n, float *out) {
    legacy_dot4_512(w, a, as, n, out, sizeof(blk_q5_1), pair_levels_q5_1, dpbusd512, levels_q5_1, dot_us, act_coef512_q5_1, 0);
}
static void dot4_q8_0_512(const void *w, const void *a, size_t as, int64_t n, float *out) {
    legacy_dot4_512(w, a, as, n, out, sizeof(blk_q8_0), pair_levels_q8_0, sdot512, levels_q8_0, dot_ss, NULL, 0);
}
static void dot4_iq4_nl_512(const void *w, const void *a, size_t as, int64_t n, float *out) {
    legacy_dot4_512(w, a, as, n, out, sizeof(blk_iq4_nl), pair_levels_iq4_nl, sdot512, levels_iq4_nl, dot_ss, NULL, 0);
}

#include "llk_avx512_k.inc"

/* --- attention at 512 bits ----------------------------------------------------------------------
 * The K dots over a transposed tile, 16 positions per zmm; V rows feed G x 4 zmm sums (64 head
 * values at a time), head sizes that are not multiples of 16 taking the 256-bit V sums. */

static inline __m512 cache16(const uint8_t *row, int i, const int kind) {
    if (kind == LLK_KV_Q8_0) {   /* 16 values of one block: d * q, exact (as cache8) */
        __m128i q = _mm_loadu_si128((const __m128i *)(row + llk_kv_off(i, kind)));
        const __m512 d = _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(llk_kv_q8_scale_bits(row, i)))));
        return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
    }
    return kind == LLK_KV_F16 ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(row + 2 * i)))
                              : _mm512_loadu_ps((const float *)(row + 4 * i));
}
/* kdots_tile (llk_simd256_attn.inc's kdots_tile) at 512 bits: R query rows against W vectors of 16
 * positions from c on, each lane one position's sum, FMA by FMA from head value 0; R x W <= 16 sums
 * and W tile vectors within the 32 registers. Lanes outside the wanted [j0, j0 + n) are masked out
 * of the stores and the maximum. */
KERNEL_INLINE void kdt512_pass(const float *q, int64_t qs, const int R, const int W, const float *kt, int64_t np,
                               int hd, int64_t c, __m512 sc, int64_t j0, int64_t n, float *out, int64_t os,
                               float *mx) {
    __m512 acc[4][12];
    for (int r = 0; r < R; r++)
        for (int w = 0; w < W; w++) acc[r][w] = _mm512_setzero_ps();
    const float *kr = kt + c;
    for (int i = 0; i < hd; i++, kr += np) {
        __m512 k[12];
        for (int w = 0; w < W; w++) k[w] = _mm512_loadu_ps(kr + 16 * w);
        for (int r = 0; r < R; r++) {
            const __m512 qi = _mm512_set1_ps(q[r * qs + i]);
            for (int w = 0; w < W; w++) acc[r][w] = _mm512_fmadd_ps(qi, k[w], acc[r][w]);
        }
    }
    __mmask16 mk[12];
    for (int w = 0; w < W; w++) {   /* lane l of vector w is position c + 16 w + l; wanted: j0 .. j0 + n - 1 */
        const int64_t p = c + 16 * w - j0;
        const int64_t a = p < 0 ? -p : 0, b = n - p >= 16 ? 16 : n - p;
        mk[w] = b > a ? (__mmask16)(((1u << b) - 1u) & ~((1u << a) - 1u)) : 0;
    }
    for (int r = 0; r < R; r++) {
        __m512 vm = _mm512_set1_ps(-INFINITY);
        for (int w = 0; w < W; w++) {
            const __m512 s = _mm512_mul_ps(acc[r][w], sc);
            /* lane l to out + p + l: the pointer may sit before the row, but only wanted lanes store */
            _mm512_mask_storeu_ps(out + r * os + (c + 16 * w - j0), mk[w], s);
            vm = _mm512_mask_max_ps(vm, mk[w], vm, s);
        }
        const float m = _mm512_reduce_max_ps(vm);
        mx[r] = m > mx[r] ? m : mx[r];
    }
}
KERNEL_INLINE void kdt512_rows(const float *q, int64_t qs, const int R, const int W, const float *kt, int64_t np,
                               int hd, __m512 sc, int64_t j0, int64_t n, float *out, int64_t os, float *mx) {
    int64_t c = j0 & ~(int64_t)15;
    for (int64_t left = (((j0 + n + 15) & ~(int64_t)15) - c) / 16, w; left > 0; left -= w, c += 16 * w) {
        w = llk_next_pass(left, W);   /* W wide, the last two as even as W allows */
        switch (w == W ? 0 : w) {     /* constant widths */
        case 0: kdt512_pass(q, qs, R, W, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 1: kdt512_pass(q, qs, R, 1, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 2: kdt512_pass(q, qs, R, 2, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 3: kdt512_pass(q, qs, R, 3, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 4: kdt512_pass(q, qs, R, 4, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 5: kdt512_pass(q, qs, R, 5, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 6: kdt512_pass(q, qs, R, 6, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        case 7: kdt512_pass(q, qs, R, 7, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        default: kdt512_pass(q, qs, R, 8, kt, np, hd, c, sc, j0, n, out, os, mx); break;
        }
    }
}
static void kdots_tile512(const float *q, int64_t qs, int nq, const float *kt, int64_t np, int hd, float scale,
                          int64_t j0, int64_t n, float *out, int64_t os, float *mx) {
    const __m512 sc = _mm512_set1_ps(scale);
    int r = 0;
    for (; r + 4 <= nq; r += 4) kdt512_rows(q + r * qs, qs, 4, 4, kt, np, hd, sc, j0, n, out + r * os, os, mx + r);
    switch (nq - r) {
    case 1: kdt512_rows(q + r * qs, qs, 1, 9, kt, np, hd, sc, j0, n, out + r * os, os, mx + r); break;
    case 2: kdt512_rows(q + r * qs, qs, 2, 8, kt, np, hd, sc, j0, n, out + r * os, os, mx + r); break;
    case 3: kdt512_rows(q + r * qs, qs, 3, 5, kt, np, hd, sc, j0, n, out + r * os, os, mx + r); break;
    default: break;
    }
}

/* exp8 (llk_exp's twin) on 16 lanes, operation for operation: each lane the same float. */
static inline __m512 exp16(__m512 x) {
    const __m512 lo = _mm512_set1_ps(LLK_EXP_LO);
    const __m512 xc = _mm512_max_ps(x, lo);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(LLK_EXP_LOG2E)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LLK_EXP_LN2_HI), xc);
    r = _mm512_fnmadd_ps(k, _mm512_set1_ps(LLK_EXP_LN2_LO), r);
    __m512 p = _mm512_set1_ps(1.0f / 720.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    const __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, lo, _CMP_GT_OQ), _mm512_mul_ps(p, _mm512_castsi512_ps(e)));
}
/* expsum (the softmax's exp and sum) with 16 exps at a time: the sum still takes each 8 in turn
 * into its 8 lanes, low half then high, and the 256-bit kernel does the rest (expsum_from), so it
 * is that kernel's float for float. The exp was 13% of a prompt's attention at depth 4096 on 8 lanes. */
static float expsum512(float *x, int64_t n, float mx) {
    const __m512 m = _mm512_set1_ps(mx);
    __m256 s = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), m));
        _mm512_storeu_ps(x + i, e);
        s = _mm256_add_ps(_mm256_add_ps(s, _mm512_castps512_ps256(e)), _mm512_extractf32x8_ps(e, 1));
    }
    return expsum_from(x, i, n, mx, s);
}

/* tanh8 and softcap8 on 16 lanes, operation for operation. */
static inline __m512 tanh16(__m512 x) {
    const __m512 sign = _mm512_set1_ps(-0.0f), one = _mm512_set1_ps(1.0f);
    const __m512 e = exp16(_mm512_mul_ps(_mm512_set1_ps(-2.0f), _mm512_andnot_ps(sign, x)));   /* exp(-2|x|) */
    const __m512 t = _mm512_div_ps(_mm512_sub_ps(one, e), _mm512_add_ps(one, e));
    return _mm512_mask_mov_ps(_mm512_or_ps(t, _mm512_and_ps(x, sign)), _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}
/* softcap (the soft-capped attention scores and final logits) 16 at a time; the 256-bit kernel
 * takes the rest and the lanes' largest (softcap_from). */
static float softcap512(float *x, int64_t n, float scale, float cap) {
    const __m512 vs = _mm512_set1_ps(scale), vc = _mm512_set1_ps(cap);
    __m512 m16 = _mm512_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 y = _mm512_mul_ps(vc, tanh16(_mm512_div_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs), vc)));
        _mm512_storeu_ps(x + i, y);
        m16 = _mm512_max_ps(y, m16);
    }
    const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(m16), _mm512_extractf32x8_ps(m16, 1));
    return softcap_from(x, i, n, scale, cap, m8);
}

/* W zmm (16 values each) of each of G heads, from head value i on, over all n rows */
KERNEL_INLINE void vacc512_pass(const float *p, int64_t ld, const int G, const int W, const uint8_t *v,
                                size_t rb, int64_t n, int i, float *out, int64_t os, const int kind) {
    __m512 c[4][8];
    const size_t pf = attn_prefetch_bytes(rb);
    for (int a = 0; a < G; a++)
        for (int w = 0; w < W; w++) c[a][w] = _mm512_loadu_ps(out + a * os + i + 16 * w);
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = v + (size_t)j * rb;
        for (int w = 0; w < W; w += 2)   /* 64 bytes of f16 (128 of f32) per two zmm */
            _mm_prefetch((const char *)row + pf + llk_kv_off(i + 16 * w, kind), ATTN_PF_HINT);
        __m512 vv[8];
        for (int w = 0; w < W; w++) vv[w] = cache16(row, i + 16 * w, kind);
        for (int a = 0; a < G; a++) {
            const __m512 pj = _mm512_set1_ps(p[a * ld + j]);
            for (int w = 0; w < W; w++) c[a][w] = _mm512_fmadd_ps(pj, vv[w], c[a][w]);
        }
    }
    for (int a = 0; a < G; a++)
        for (int w = 0; w < W; w++) _mm512_storeu_ps(out + a * os + i + 16 * w, c[a][w]);
}
/* Passes of up to 4 zmm per head (llk_next_pass), 8 for one head alone (multi-head attention), whose
 * 4 sums otherwise waited on the FMA latency. */
KERNEL_INLINE void vacc512_grp(const float *p, int64_t ld, const int G, const uint8_t *v, size_t rb,
                               int64_t n, int hd, float *out, int64_t os, const int kind) {
    const int W = G == 1 ? 8 : 4;
    int i = 0;
    for (int64_t left = hd / 16, w; left > 0; left -= w, i += 16 * (int)w) {
        w = llk_next_pass(left, W);
        switch (w == W ? 0 : w) {   /* constant widths */
        case 0: vacc512_pass(p, ld, G, W, v, rb, n, i, out, os, kind); break;
        case 1: vacc512_pass(p, ld, G, 1, v, rb, n, i, out, os, kind); break;
        case 2: vacc512_pass(p, ld, G, 2, v, rb, n, i, out, os, kind); break;
        case 3: vacc512_pass(p, ld, G, 3, v, rb, n, i, out, os, kind); break;
        case 4: vacc512_pass(p, ld, G, 4, v, rb, n, i, out, os, kind); break;
        case 5: vacc512_pass(p, ld, G, 5, v, rb, n, i, out, os, kind); break;
        case 6: vacc512_pass(p, ld, G, 6, v, rb, n, i, out, os, kind); break;
        default: vacc512_pass(p, ld, G, 7, v, rb, n, i, out, os, kind); break;
        }
    }
}

KERNEL_INLINE void vacc512_any_g(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                                 float *o, int64_t os, const int kind) {
    const uint8_t *v8 = (const uint8_t *)v;
    switch (g) {
    case 1: vacc512_grp(p, ld, 1, v8, rb, n, hd, o, os, kind); break;
    case 2: vacc512_grp(p, ld, 2, v8, rb, n, hd, o, os, kind); break;
    case 3: vacc512_grp(p, ld, 3, v8, rb, n, hd, o, os, kind); break;
    default: vacc512_grp(p, ld, 4, v8, rb, n, hd, o, os, kind); break;
    }
}
static void vacc512_q8(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                       float *o, int64_t os) {
    vacc512_any_g(p, ld, g, v, rb, n, hd, o, os, LLK_KV_Q8_0);
}
static void vacc512_f32(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                        float *o, int64_t os) {
    if (hd & 15) { vacc_f32(p, ld, g, v, rb, n, hd, o, os); return; }
    vacc512_any_g(p, ld, g, v, rb, n, hd, o, os, LLK_KV_F32);
}
static void vacc512_f16(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                        float *o, int64_t os) {
    if (hd & 15) { vacc_f16(p, ld, g, v, rb, n, hd, o, os); return; }
    vacc512_any_g(p, ld, g, v, rb, n, hd, o, os, LLK_KV_F16);
}

/* One link of the integer peak's chains: 64 u8 x s8 multiply-adds, vpdpbusd with VNNI
 * (accumulating into int32), else vpmaddubsw on 512 bits (the product is the next unsigned operand). */
static inline __m512i peak_link(__m512i c, __m512i s) {
#if defined(LLK_VNNI)
    return _mm512_dpbusd_epi32(c, s, s);
#else
    return _mm512_maddubs_epi16(c, s);
#endif
}
/* The integer peak at this level: 8 independent chains of peak_link (named variables, as the
 * AVX2 level's: an array was stored back to the stack every round). */
static int64_t int8_peak_512(int64_t n, uint64_t *sink) {
    const __m512i s = _mm512_set1_epi8(3);
    __m512i c0 = _mm512_set1_epi8(1), c1 = _mm512_set1_epi8(2), c2 = _mm512_set1_epi8(3), c3 = _mm512_set1_epi8(4);
    __m512i c4 = _mm512_set1_epi8(5), c5 = _mm512_set1_epi8(6), c6 = _mm512_set1_epi8(7), c7 = _mm512_set1_epi8(8);
    for (int64_t k = 0; k < n; k++) {
        c0 = peak_link(c0, s); c1 = peak_link(c1, s); c2 = peak_link(c2, s); c3 = peak_link(c3, s);
        c4 = peak_link(c4, s); c5 = peak_link(c5, s); c6 = peak_link(c6, s); c7 = peak_link(c7, s);
    }
    const __m512i x = _mm512_xor_si512(_mm512_xor_si512(_mm512_xor_si512(c0, c1), _mm512_xor_si512(c2, c3)),
                                       _mm512_xor_si512(_mm512_xor_si512(c4, c5), _mm512_xor_si512(c6, c7)));
    *sink ^= (uint64_t)_mm_cvtsi128_si64(_mm512_castsi512_si128(x));
    return n * 8 * 64;
}

void LLK_FILL(llk_kernels *k) {
    llk_fill_256(k);
    k->int8_peak = int8_peak_512;
    llk_fill_avx512_panel(k);
#if defined(LLK_VNNI)
    llk_fill_vnni256_panel(k);
#endif
    k->vacc[LLK_KV_F32] = vacc512_f32; k->vacc[LLK_KV_F16] = vacc512_f16; k->vacc[LLK_KV_Q8_0] = vacc512_q8;
    k->kdots_tile = kdots_tile512;
    k->expsum = expsum512;
    k->softcap = softcap512;
    k->dot[LLK_TYPE_F32] = dot_f32_512;
    k->dot[LLK_TYPE_F16] = dot_f16_512;
    k->dequant[LLK_TYPE_F16] = deq_f16_512;
    k->dot[LLK_TYPE_BF16] = dot_bf16_512;
    k->dot[LLK_TYPE_Q4_0] = dot_q4_0_512;
    k->dot[LLK_TYPE_Q4_1] = dot_q4_1_512;
    k->dot[LLK_TYPE_Q5_0] = dot_q5_0_512;
    k->dot[LLK_TYPE_Q5_1] = dot_q5_1_512;
    k->dot4[LLK_TYPE_Q4_0] = dot4_q4_0_512;
    k->dot4[LLK_TYPE_Q4_1] = dot4_q4_1_512;
    k->dot4[LLK_TYPE_Q5_0] = dot4_q5_0_512;
    k->dot4[LLK_TYPE_Q5_1] = dot4_q5_1_512;
    k->dot[LLK_TYPE_Q8_0] = dot_q8_0_512;
    k->dot[LLK_TYPE_IQ4_NL] = dot_iq4_nl_512;
    k->dot4[LLK_TYPE_Q8_0] = dot4_q8_0_512;
    k->dot4[LLK_TYPE_IQ4_NL] = dot4_iq4_nl_512;
#if defined(LLK_VNNI)
    k->dot[LLK_TYPE_IQ4_XS] = dot_iq4_xs_512;
#endif
    k->dot[LLK_TYPE_Q4_K] = dot_q4_K_512;
    k->dot[LLK_TYPE_Q5_K] = dot_q5_K_512;
    k->dot[LLK_TYPE_Q6_K] = dot_q6_K_512;
    k->dot[LLK_TYPE_Q2_K] = dot_q2_K_512;
    k->dot[LLK_TYPE_Q3_K] = dot_q3_K_512;
}
#else
#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 0; }
#endif
void LLK_FILL(llk_kernels *k) { (void)k; }
#endif
