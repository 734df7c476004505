/* llk_avx2.c — AVX2 + FMA + F16C kernels. Built with -mavx2 -mfma -mf16c; called only after
 * dispatch has seen those features. Each kernel matches its twin in llk_ref.c: integer sums are
 * exact, only the float accumulation order differs.
 *
 * Shape of every quantized dot: unpack a block's levels to unsigned bytes (0..63), multiply with
 * the signed activation bytes by maddubs (u8 x s8 -> pairs of i16, no saturation at these
 * ranges), widen with madd (by ones, or by the group's scale), then one float FMA per block.
 * Offsets such as Q4_0's -8 are subtracted as (offset x activation sums), exactly.
 */
#include "llk_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

int llk_have_avx2_build(void) { return 1; }

/* --- helpers ---------------------------------------------------------------------------------- */

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
static inline int hsum8i(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}
static inline float h2f(llk_half h) { return _cvtsh_ss(h); }

/* 16 packed bytes -> 32 levels 0..15 in element order (low nibbles, then high nibbles). */
static inline __m256i nib32(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m256i w = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
    return _mm256_and_si256(w, _mm256_set1_epi8(15));
}
/* 32 bits -> 32 bytes: byte i is 0x10 where bit i is set, else 0. */
static inline __m256i bits32_x16(const uint8_t qh[4]) {
    uint32_t b; memcpy(&b, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)b), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}
/* sum over pairs of u8 x s8 -> 8 x i32 */
static inline __m256i dot_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
/* s8 x s8 -> 8 x i32 (sign moved onto the activations) */
static inline __m256i dot_ss(__m256i w, __m256i x) {
    return dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* --- activations ------------------------------------------------------------------------------ */

static inline __m256 absmax8(__m256 m, __m256 v) {
    return _mm256_max_ps(m, _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v));
}
static inline float hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}
/* 32 floats -> 32 int8 = round(x * id), ties to even; returns the 8 x i32 partial sums. */
static inline __m256i q8_32(const float *x, float id, int8_t *out) {
    __m256 vid = _mm256_set1_ps(id);
    __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x), vid));
    __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8), vid));
    __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 16), vid));
    __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 24), vid));
    __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3));
    __m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
    __m256i b = _mm256_packs_epi16(p01, p23);
    /* packs work per 128-bit lane: order is 0-3,8-11,16-19,24-27,4-7,12-15,20-23,28-31 */
    b = _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)out, b);
    return sum;
}

static void quant_q8_32(const float *x, void *out, int64_t n) {
    llk_block_q8_32 *a = (llk_block_q8_32 *)out;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; i += 8) m = absmax8(m, _mm256_loadu_ps(x + i));
        float amax = hmax8(m);
        float d = amax >= LLK_ACT_TINY ? amax / 127.0f : 0.0f, id = amax >= LLK_ACT_TINY ? 127.0f / amax : 0.0f;
        int sum = hsum8i(q8_32(x, id, a[b].qs));
        a[b].d = d;
        a[b].s = d * (float)sum;
    }
}

static void quant_q8_256(const float *x, void *out, int64_t n) {
    llk_block_q8_256 *a = (llk_block_q8_256 *)out;
    for (int64_t b = 0; b < n / 256; b++, x += 256) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 256; i += 8) m = absmax8(m, _mm256_loadu_ps(x + i));
        float amax = hmax8(m);
        float id = amax >= LLK_ACT_TINY ? 127.0f / amax : 0.0f;
        for (int j = 0; j < 8; j++) q8_32(x + 32 * j, id, a[b].qs + 32 * j);
        for (int g = 0; g < 16; g++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(a[b].qs + 16 * g));
            __m256i w = _mm256_cvtepi8_epi16(v);
            __m256i s = _mm256_madd_epi16(w, _mm256_set1_epi16(1));
            a[b].bsums[g] = (int16_t)hsum8i(s);
        }
        a[b].d = amax >= LLK_ACT_TINY ? amax / 127.0f : 0.0f;
    }
}

/* --- float types ------------------------------------------------------------------------------ */

static float dot_f32(const void *w, const void *a, int64_t n) {
    const float *p = (const float *)w, *x = (const float *)a;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(p + i), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(p + i + 8), _mm256_loadu_ps(x + i + 8), s1);
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) { float v; memcpy(&v, p + i, 4); s += v * x[i]; }
    return s;
}
static float dot_f16(const void *w, const void *a, int64_t n) {
    const uint16_t *p = (const uint16_t *)w; const float *x = (const float *)a;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i)));
        __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i + 8)));
        s0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), s1);
    }
    float s = hsum8(_mm256_add_ps(s0, s1));
    for (; i < n; i++) { llk_half h; memcpy(&h, p + i, 2); s += llk_h2f(h) * x[i]; }
    return s;
}
static float dot_bf16(const void *w, const void *a, int64_t n) {
    const uint16_t *p = (const uint16_t *)w; const float *x = (const float *)a;
    __m256 s0 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + i)));
        s0 = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(v, 16)), _mm256_loadu_ps(x + i), s0);
    }
    float s = hsum8(s0);
    for (; i < n; i++) { uint16_t h; memcpy(&h, p + i, 2); s += llk_bf2f(h) * x[i]; }
    return s;
}
static void deq_f16(const void *x, float *y, int64_t n) {
    const uint16_t *p = (const uint16_t *)x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
    for (; i < n; i++) { llk_half h; memcpy(&h, p + i, 2); y[i] = llk_h2f(h); }
}

/* --- legacy 32-blocks ------------------------------------------------------------------------- */

#define LEG(T) const T *blk = (const T *)w; const llk_block_q8_32 *ab = (const llk_block_q8_32 *)a; \
               const int64_t nb = n / 32
#define XQ(b) _mm256_loadu_si256((const __m256i *)ab[b].qs)

/* Q4_0 / Q5_0 offsets are not unpacked per element: with s = dx * sum(qx),
 * dot = sum_b dw_b * (dx_b * <q, qx> - offset * s_b); the second sum is one scalar FMA a block. */
static float dot_q4_0(const void *w, const void *a, int64_t n) {
    LEG(blk_q4_0);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float corr = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i d0 = dot_us(nib32(blk[b].qs), XQ(b)), d1 = dot_us(nib32(blk[b + 1].qs), XQ(b + 1));
        float w0 = h2f(blk[b].d), w1 = h2f(blk[b + 1].d);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(w0 * ab[b].d), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(w1 * ab[b + 1].d), acc1);
        corr += w0 * ab[b].s + w1 * ab[b + 1].s;
    }
    for (; b < nb; b++) {
        float w0 = h2f(blk[b].d);
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_us(nib32(blk[b].qs), XQ(b))), _mm256_set1_ps(w0 * ab[b].d), acc0);
        corr += w0 * ab[b].s;
    }
    return hsum8(_mm256_add_ps(acc0, acc1)) - 8.0f * corr;
}

static float dot_q4_1(const void *w, const void *a, int64_t n) {
    LEG(blk_q4_1);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float sm = 0.0f;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i d0 = dot_us(nib32(blk[b].qs), XQ(b)), d1 = dot_us(nib32(blk[b + 1].qs), XQ(b + 1));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(h2f(blk[b + 1].d) * ab[b + 1].d), acc1);
        sm += h2f(blk[b].m) * ab[b].s + h2f(blk[b + 1].m) * ab[b + 1].s;
    }
    for (; b < nb; b++) {
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_us(nib32(blk[b].qs), XQ(b))), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc0);
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
        float w0 = h2f(blk[b].d);
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_us(q, XQ(b))), _mm256_set1_ps(w0 * ab[b].d), acc);
        corr += w0 * ab[b].s;
    }
    return hsum8(acc) - 16.0f * corr;
}

static float dot_q5_1(const void *w, const void *a, int64_t n) {
    LEG(blk_q5_1);
    __m256 acc = _mm256_setzero_ps();
    float sm = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        __m256i q = _mm256_or_si256(nib32(blk[b].qs), bits32_x16(blk[b].qh));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_us(q, XQ(b))), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc);
        sm += h2f(blk[b].m) * ab[b].s;
    }
    return hsum8(acc) + sm;
}

static float dot_q8_0(const void *w, const void *a, int64_t n) {
    LEG(blk_q8_0);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m256i d0 = dot_ss(_mm256_loadu_si256((const __m256i *)blk[b].qs), XQ(b));
        __m256i d1 = dot_ss(_mm256_loadu_si256((const __m256i *)blk[b + 1].qs), XQ(b + 1));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(h2f(blk[b + 1].d) * ab[b + 1].d), acc1);
    }
    for (; b < nb; b++) {
        __m256i d0 = dot_ss(_mm256_loadu_si256((const __m256i *)blk[b].qs), XQ(b));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc0);
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

static inline __m256i iq4_lut(void) {
    __m128i t = _mm_loadu_si128((const __m128i *)llk_iq4_values);
    return _mm256_set_m128i(t, t);
}

static float dot_iq4_nl(const void *w, const void *a, int64_t n) {
    LEG(blk_iq4_nl);
    const __m256i lut = iq4_lut();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i q = _mm256_shuffle_epi8(lut, nib32(blk[b].qs));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_ss(q, XQ(b))), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc);
    }
    return hsum8(acc);
}

/* --- K-quants ----------------------------------------------------------------------------------- */

#define KQ(T) const T *blk = (const T *)w; const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a; \
              const int64_t nb = n / 256
#define XK(b, off) _mm256_loadu_si256((const __m256i *)(ab[b].qs + (off)))

static inline void k4_scales(const uint8_t *s, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 4; j++) { sc[j] = s[j] & 63; mn[j] = s[j + 4] & 63; }
    for (int j = 4; j < 8; j++) {
        sc[j] = (uint8_t)((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
        mn[j] = (uint8_t)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}
/* i16 pair sums -> i32, low 128 bits weighted by s0, high by s1 */
static inline __m256i scale2(__m256i p16, int s0, int s1) {
    return _mm256_madd_epi16(p16, _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0)));
}

static float dot_q4_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q4_K);
    const __m256i m4 = _mm256_set1_epi8(15);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        k4_scales(blk[b].scales, sc, mn);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            __m256i plo = _mm256_maddubs_epi16(lo, XK(b, 64 * c));
            __m256i phi = _mm256_maddubs_epi16(hi, XK(b, 64 * c + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int m = 0;
        for (int g = 0; g < 8; g++) m += mn[g] * (ab[b].bsums[2 * g] + ab[b].bsums[2 * g + 1]);
        float dx = ab[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * dx), acc);
        accm += h2f(blk[b].dmin) * dx * (float)m;
    }
    return hsum8(acc) - accm;
}

static float dot_q5_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q5_K);
    const __m256i m4 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint8_t sc[8], mn[8];
        k4_scales(blk[b].scales, sc, mn);
        __m256i qh = _mm256_loadu_si256((const __m256i *)blk[b].qh);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            __m256i hlo = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c), one), 4);
            __m256i hhi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * c + 1), one), 4);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), hlo);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hhi);
            __m256i plo = _mm256_maddubs_epi16(lo, XK(b, 64 * c));
            __m256i phi = _mm256_maddubs_epi16(hi, XK(b, 64 * c + 32));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * c])));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * c + 1])));
        }
        int m = 0;
        for (int g = 0; g < 8; g++) m += mn[g] * (ab[b].bsums[2 * g] + ab[b].bsums[2 * g + 1]);
        float dx = ab[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * dx), acc);
        accm += h2f(blk[b].dmin) * dx * (float)m;
    }
    return hsum8(acc) - accm;
}

static float dot_q6_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q6_K);
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const int8_t *sc = blk[b].scales;
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk[b].ql + 64 * h));
            __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk[b].ql + 64 * h + 32));
            __m256i qh = _mm256_loadu_si256((const __m256i *)(blk[b].qh + 32 * h));
            __m256i lows[4] = {_mm256_and_si256(l0, m4), _mm256_and_si256(l1, m4),
                               _mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                               _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4)};
            for (int s = 0; s < 4; s++) {
                __m256i hi2 = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * s), m2);
                __m256i q = _mm256_or_si256(lows[s], _mm256_slli_epi16(hi2, 4));
                __m256i p = _mm256_maddubs_epi16(q, XK(b, 128 * h + 32 * s));
                isum = _mm256_add_epi32(isum, scale2(p, sc[8 * h + 2 * s], sc[8 * h + 2 * s + 1]));
            }
        }
        int off = 0;
        for (int g = 0; g < 16; g++) off += sc[g] * ab[b].bsums[g];
        isum = _mm256_sub_epi32(isum, _mm256_setr_epi32(32 * off, 0, 0, 0, 0, 0, 0, 0));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc);
    }
    return hsum8(acc);
}

static float dot_q2_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q2_K);
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    float accm = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sc = blk[b].scales;
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * h));
            for (int s = 0; s < 4; s++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m2);
                __m256i p = _mm256_maddubs_epi16(q, XK(b, 128 * h + 32 * s));
                isum = _mm256_add_epi32(isum, scale2(p, sc[8 * h + 2 * s] & 15, sc[8 * h + 2 * s + 1] & 15));
            }
        }
        int m = 0;
        for (int g = 0; g < 16; g++) m += (sc[g] >> 4) * ab[b].bsums[g];
        float dx = ab[b].d;
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * dx), acc);
        accm += h2f(blk[b].dmin) * dx * (float)m;
    }
    return hsum8(acc) - accm;
}

static float dot_q3_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q3_K);
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *s = blk[b].scales;
        int sc[16];
        for (int g = 0; g < 16; g++) {
            int lo = g < 8 ? (s[g] & 15) : (s[g - 8] >> 4);
            int hi = (s[8 + (g & 3)] >> (2 * (g >> 2))) & 3;
            sc[g] = (lo | hi << 4) - 32;
        }
        __m256i hm = _mm256_loadu_si256((const __m256i *)blk[b].hmask);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * h));
            for (int j = 0; j < 4; j++) {
                __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + j), one);
                /* level + 4 = low2 + 4 * high bit: 0..7 */
                __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m2),
                                            _mm256_slli_epi16(hb, 2));
                __m256i p = _mm256_maddubs_epi16(q, XK(b, 128 * h + 32 * j));
                isum = _mm256_add_epi32(isum, scale2(p, sc[8 * h + 2 * j], sc[8 * h + 2 * j + 1]));
            }
        }
        int off = 0;
        for (int g = 0; g < 16; g++) off += sc[g] * ab[b].bsums[g];
        isum = _mm256_sub_epi32(isum, _mm256_setr_epi32(4 * off, 0, 0, 0, 0, 0, 0, 0));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc);
    }
    return hsum8(acc);
}

static float dot_iq4_xs(const void *w, const void *a, int64_t n) {
    KQ(blk_iq4_xs);
    const __m256i lut = iq4_lut();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m256i isum = _mm256_setzero_si256();
        for (int g = 0; g < 8; g++) {
            int lo = (blk[b].scales_l[g >> 1] >> (4 * (g & 1))) & 15;
            int hi = (blk[b].scales_h >> (2 * g)) & 3;
            int ls = (lo | hi << 4) - 32;
            __m256i q = _mm256_shuffle_epi8(lut, nib32(blk[b].qs + 16 * g));
            __m256i x = XK(b, 32 * g);
            __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(q, q), _mm256_sign_epi8(x, q));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16((short)ls)));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(h2f(blk[b].d) * ab[b].d), acc);
    }
    return hsum8(acc);
}

void llk_fill_avx2(llk_kernels *k) {
    k->quant_q8_32 = quant_q8_32;
    k->quant_q8_256 = quant_q8_256;
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
    k->dot[LLK_TYPE_Q2_K] = dot_q2_K;
    k->dot[LLK_TYPE_Q3_K] = dot_q3_K;
    k->dot[LLK_TYPE_Q4_K] = dot_q4_K;
    k->dot[LLK_TYPE_Q5_K] = dot_q5_K;
    k->dot[LLK_TYPE_Q6_K] = dot_q6_K;
    k->dot[LLK_TYPE_IQ4_XS] = dot_iq4_xs;
}
#else
int llk_have_avx2_build(void) { return 0; }
void llk_fill_avx2(llk_kernels *k) { (void)k; }
#endif
