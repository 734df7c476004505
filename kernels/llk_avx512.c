/* llk_avx512.c — AVX-512 F/BW/VL kernels, built twice: with VNNI (-mavx512vnni, LLK_VNNI=1,
 * exported as llk_fill_avx512vnni) and without (llk_fill_avx512). Called only after dispatch has
 * seen the features. Each kernel matches its twin in llk_ref.c.
 *
 * The quantized kernels are llk_simd256.h's, recompiled here with dot_us() as VNNI's vpdpbusd
 * (u8 x s8 -> i32 in one instruction, where AVX2 needs maddubs + madd) and bits -> bytes through a
 * mask register; the float dots use 16 lanes.
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

#include "llk_simd256.h"

/* --- float types: 16 lanes ------------------------------------------------------------------- */

static float dot_f32_512(const void *w, const void *a, int64_t n) {
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
static float dot_f16_512(const void *w, const void *a, int64_t n) {
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
static float dot_bf16_512(const void *w, const void *a, int64_t n) {
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
static void deq_f16_512(const void *x, float *y, int64_t n) {
    const uint16_t *p = (const uint16_t *)x;
    for (int64_t i = 0; i < n; i += 16) {
        int64_t r = n - i < 16 ? n - i : 16;
        __mmask16 m = (__mmask16)((1u << r) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p + i)));
    }
}

void LLK_FILL(llk_kernels *k) {
    llk_fill_256(k);
    k->dot[LLK_TYPE_F32] = dot_f32_512;
    k->dot[LLK_TYPE_F16] = dot_f16_512;
    k->dequant[LLK_TYPE_F16] = deq_f16_512;
    k->dot[LLK_TYPE_BF16] = dot_bf16_512;
}
#else
#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 0; }
#endif
void LLK_FILL(llk_kernels *k) { (void)k; }
#endif
