/* llk_avx512.c — AVX-512 F/BW/VL kernels, built twice: with VNNI (-mavx512vnni, LLK_VNNI=1,
 * exported as llk_fill_avx512vnni) and without (llk_fill_avx512). Called only after dispatch has
 * seen the features. Each kernel matches its twin in llk_ref.c.
 *
 * The table starts as a copy of the AVX2 one; this file overrides the float dots (16 lanes) and
 * the legacy 32-block dots, where VNNI's u8 x s8 -> i32 (vpdpbusd) replaces the
 * maddubs + madd pair. The K-quant dots keep their AVX2 form: their per-group integer scales
 * already ride on the madd, so VNNI saves nothing there.
 */
#include "llk_internal.h"

#if defined(LLK_VNNI)
#define LLK_FILL llk_fill_avx512vnni
#else
#define LLK_FILL llk_fill_avx512
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
    defined(__F16C__) && (!defined(LLK_VNNI) || defined(__AVX512VNNI__))
#include <immintrin.h>

#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 1; }
#endif

/* acc + sum over groups of 4 of u8 x s8 -> 8 x i32 */
static inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(LLK_VNNI)
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline float h2f(llk_half h) { return _cvtsh_ss(h); }

static inline __m256i nib32(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m256i w = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(w, _mm256_set1_epi8(15));
}
static inline __m256i bits32_x16(const uint8_t qh[4]) {
    uint32_t b; memcpy(&b, qh, 4);
    /* byte i = 0x10 where bit i of b is set: a mask register does the bit -> byte step */
    return _mm256_maskz_mov_epi8((__mmask32)b, _mm256_set1_epi8(0x10));
}

/* --- float types: 16 lanes ------------------------------------------------------------------- */

static float dot_f32(const void *w, const void *a, int64_t n) {
    const float *p = (const float *)w, *x = (const float *)a;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(p + i), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(p + i + 16), _mm512_loadu_ps(x + i + 16), s1);
    }
    if (i < n) { /* masked tail: at most 31 more */
        __mmask16 m0 = n - i >= 16 ? 0xffff : (__mmask16)((1u << (n - i)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m0, p + i), _mm512_maskz_loadu_ps(m0, x + i), s0);
        if (n - i > 16) {
            __mmask16 m1 = (__mmask16)((1u << (n - i - 16)) - 1);
            s1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m1, p + i + 16), _mm512_maskz_loadu_ps(m1, x + i + 16), s1);
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
static float dot_f16(const void *w, const void *a, int64_t n) {
    const uint16_t *p = (const uint16_t *)w; const float *x = (const float *)a;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + i)));
        __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p + i + 16)));
        s0 = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i < n; i += 16) {
        int64_t r = n - i < 16 ? n - i : 16;
        __mmask16 m = (__mmask16)((1u << r) - 1);
        __m512 w0 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + i));
        s0 = _mm512_fmadd_ps(w0, _mm512_maskz_loadu_ps(m, x + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
static float dot_bf16(const void *w, const void *a, int64_t n) {
    const uint16_t *p = (const uint16_t *)w; const float *x = (const float *)a;
    __m512 s0 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        int64_t r = n - i < 16 ? n - i : 16;
        __mmask16 m = (__mmask16)((1u << r) - 1);
        __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p + i));
        s0 = _mm512_fmadd_ps(_mm512_castsi512_ps(_mm512_slli_epi32(v, 16)), _mm512_maskz_loadu_ps(m, x + i), s0);
    }
    return _mm512_reduce_add_ps(s0);
}
static void deq_f16(const void *x, float *y, int64_t n) {
    const uint16_t *p = (const uint16_t *)x;
    for (int64_t i = 0; i < n; i += 16) {
        int64_t r = n - i < 16 ? n - i : 16;
        __mmask16 m = (__mmask16)((1u << r) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + i)));
    }
}

/* --- legacy 32-blocks ---------------------------------------------------------------------------
 * Offsets (Q4_0's -8, Q5_0's -16) are not unpacked per element: with s = dx * sum(qx),
 * dot = sum_b dw_b * (dx_b * <q, qx> - offset * s_b), and the second sum is one scalar FMA. */

#define LEG(T) const T *blk = (const T *)w; const llk_block_q8_32 *ab = (const llk_block_q8_32 *)a; \
               const int64_t nb = n / 32
#define XQ(b) _mm256_loadu_si256((const __m256i *)ab[b].qs)
#define FMA_BLOCK(acc, isum, b) \
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc)

static float dot_q4_0(const void *w, const void *a, int64_t n) {
    LEG(blk_q4_0);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i d0 = dpbusd(_mm256_setzero_si256(), nib32(blk[b].qs), XQ(b));
        __m256i d1 = dpbusd(_mm256_setzero_si256(), nib32(blk[b + 1].qs), XQ(b + 1));
        FMA_BLOCK(acc0, d0, b);
        FMA_BLOCK(acc1, d1, b + 1);
        corr += h2f(blk[b].d) * ab[b].s + h2f(blk[b + 1].d) * ab[b + 1].s;
    }
    for (; b < nb; b++) {
        __m256i d0 = dpbusd(_mm256_setzero_si256(), nib32(blk[b].qs), XQ(b));
        FMA_BLOCK(acc0, d0, b);
        corr += h2f(blk[b].d) * ab[b].s;
    }
    return hsum8(_mm256_add_ps(acc0, acc1)) - 8.0f * corr;
}

static float dot_q4_1(const void *w, const void *a, int64_t n) {
    LEG(blk_q4_1);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float sm = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i d0 = dpbusd(_mm256_setzero_si256(), nib32(blk[b].qs), XQ(b));
        __m256i d1 = dpbusd(_mm256_setzero_si256(), nib32(blk[b + 1].qs), XQ(b + 1));
        FMA_BLOCK(acc0, d0, b);
        FMA_BLOCK(acc1, d1, b + 1);
        sm += h2f(blk[b].m) * ab[b].s + h2f(blk[b + 1].m) * ab[b + 1].s;
    }
    for (; b < nb; b++) {
        __m256i d0 = dpbusd(_mm256_setzero_si256(), nib32(blk[b].qs), XQ(b));
        FMA_BLOCK(acc0, d0, b);
        sm += h2f(blk[b].m) * ab[b].s;
    }
    return hsum8(_mm256_add_ps(acc0, acc1)) + sm;
}

static float dot_q5_0(const void *w, const void *a, int64_t n) {
    LEG(blk_q5_0);
    __m256 acc = _mm256_setzero_ps();
    float corr = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        __m256i q = _mm256_or_si256(nib32(blk[b].qs), bits32_x16(blk[b].qh));
        __m256i d0 = dpbusd(_mm256_setzero_si256(), q, XQ(b));
        FMA_BLOCK(acc, d0, b);
        corr += h2f(blk[b].d) * ab[b].s;
    }
    return hsum8(acc) - 16.0f * corr;
}

static float dot_q5_1(const void *w, const void *a, int64_t n) {
    LEG(blk_q5_1);
    __m256 acc = _mm256_setzero_ps();
    float sm = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        __m256i q = _mm256_or_si256(nib32(blk[b].qs), bits32_x16(blk[b].qh));
        __m256i d0 = dpbusd(_mm256_setzero_si256(), q, XQ(b));
        FMA_BLOCK(acc, d0, b);
        sm += h2f(blk[b].m) * ab[b].s;
    }
    return hsum8(acc) + sm;
}

/* Q8_0: w + 128 is unsigned; <w, x> = <w + 128, x> - 128 * sum(x), both sums exact in i32. */
static float dot_q8_0(const void *w, const void *a, int64_t n) {
    LEG(blk_q8_0);
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i x0 = XQ(b), x1 = XQ(b + 1);
        __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk[b].qs), bias);
        __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk[b + 1].qs), bias);
        __m256i d0 = _mm256_sub_epi32(dpbusd(_mm256_setzero_si256(), w0, x0), dpbusd(_mm256_setzero_si256(), bias, x0));
        __m256i d1 = _mm256_sub_epi32(dpbusd(_mm256_setzero_si256(), w1, x1), dpbusd(_mm256_setzero_si256(), bias, x1));
        FMA_BLOCK(acc0, d0, b);
        FMA_BLOCK(acc1, d1, b + 1);
    }
    for (; b < nb; b++) {
        __m256i x0 = XQ(b);
        __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)blk[b].qs), bias);
        __m256i d0 = _mm256_sub_epi32(dpbusd(_mm256_setzero_si256(), w0, x0), dpbusd(_mm256_setzero_si256(), bias, x0));
        FMA_BLOCK(acc0, d0, b);
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

/* IQ4_NL: table values + 128 are unsigned (1..241); subtract 128 * sum(x) as for Q8_0. */
static float dot_iq4_nl(const void *w, const void *a, int64_t n) {
    LEG(blk_iq4_nl);
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    __m128i t = _mm_xor_si128(_mm_loadu_si128((const __m128i *)llk_iq4_values), _mm_set1_epi8((char)0x80));
    const __m256i lut = _mm256_set_m128i(t, t);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i x0 = XQ(b);
        __m256i q = _mm256_shuffle_epi8(lut, nib32(blk[b].qs));
        __m256i d0 = _mm256_sub_epi32(dpbusd(_mm256_setzero_si256(), q, x0), dpbusd(_mm256_setzero_si256(), bias, x0));
        FMA_BLOCK(acc, d0, b);
    }
    return hsum8(acc);
}

void LLK_FILL(llk_kernels *k) {
    k->dot[LLK_TYPE_F32] = dot_f32;
    k->dot[LLK_TYPE_F16] = dot_f16;
    k->dequant[LLK_TYPE_F16] = deq_f16;
    k->dot[LLK_TYPE_BF16] = dot_bf16;
    k->dot[LLK_TYPE_Q4_0] = dot_q4_0;
    k->dot[LLK_TYPE_Q4_1] = dot_q4_1;
    k->dot[LLK_TYPE_Q5_0] = dot_q5_0;
    k->dot[LLK_TYPE_Q5_1] = dot_q5_1;
    k->dot[LLK_TYPE_Q8_0] = dot_q8_0;
    k->dot[LLK_TYPE_IQ4_NL] = dot_iq4_nl;
}
#else
#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 0; }
#endif
void LLK_FILL(llk_kernels *k) { (void)k; }
#endif
