/* llk_simd256_k.h — the 256-bit K-quant and IQ4_XS kernels (256-element super-blocks against
 * q8_256 activations), part of llk_simd256.h and included by it only: it uses that file's helpers
 * (hsum8, h2f, nib32, dot_us, iq4_lut) and is compiled once per ISA file like the rest.
 *
 * Shape: per super-block, the 6-bit or 4-bit group scales are unpacked with word or vector ops,
 * levels with shifts and masks; maddubs gives i16 pair sums that madd weights by the group scale;
 * mins and offsets use the activation block sums (bsums) in one more madd.
 * Float order (see llk_ref.c, the K-quant contract): the integer sums of a super-block are reduced
 * to scalar ints (hsum8i), then its float contribution is the reference's scalar expression, added
 * to s super-block by super-block.
 */
#ifndef LLK_SIMD256_K_H
#define LLK_SIMD256_K_H

/* --- K-quants ----------------------------------------------------------------------------------- */

/* (float) of the exact sum of the 8 i32 lanes of v: the contract's (float)acc, converted in the
 * vector unit (cvtdq2ps rounds as the C conversion does) with no trip through a general register */
static inline float hsum8i_f(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 1));
    return _mm_cvtss_f32(_mm_cvtepi32_ps(s));
}

/* hsum8i_f of four vectors at once: lane t = (float) of the exact lane sum of v[t] */
static inline __m128 hsum8i_f4(const __m256i v[4]) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
    return _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)));
}

/* The types with mins (Q2_K, Q4_K, Q5_K): the reference's d * (float)acc - dmin * (float)accm,
 * with acc, accm the exact lane sums of va, vm. The two sums are reduced together and converted in
 * one cvtdq2ps, d and dmin (adjacent halves at dd) in one cvtph2ps; lanes 0 and 1 of the product
 * are the two scalar products, rounded exactly as the scalar code rounds them. */
static inline float kmin_diff(const llk_half *dd, __m256i va, __m256i vm) {
    __m256i t = _mm256_add_epi32(_mm256_unpacklo_epi32(va, vm), _mm256_unpackhi_epi32(va, vm));
    __m128i u = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    u = _mm_add_epi32(u, _mm_unpackhi_epi64(u, u));                 /* [acc, accm, ..] */
    uint32_t h; memcpy(&h, dd, 4);
    __m128 p = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)h)), _mm_cvtepi32_ps(u));
    return _mm_cvtss_f32(_mm_sub_ss(p, _mm_movehdup_ps(p)));
}

#define KQ(T) const T *blk = (const T *)w; const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a; \
              const int64_t nb = n / 256
#define XK(b, off) _mm256_loadu_si256((const __m256i *)(ab[b].qs + (off)))

/* Q4_K / Q5_K: the 12 packed bytes -> 8 scales (sc) and 8 mins (mn), one byte each, as words:
 * groups 0-3 are the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); groups 4-7 take their low
 * 4 bits from bytes 8-11 and their top 2 bits from the top of bytes 0-3 / 4-7. */
static inline void k4_unpack(const uint8_t *s, uint32_t sc[2], uint32_t mn[2]) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4); memcpy(&a1, s + 4, 4); memcpy(&a2, s + 8, 4);
    sc[0] = a0 & 0x3f3f3f3fu;
    mn[0] = a1 & 0x3f3f3f3fu;
    sc[1] = (a2 & 0x0f0f0f0fu) | (((a0 >> 6) & 0x03030303u) << 4);
    mn[1] = ((a2 >> 4) & 0x0f0f0f0fu) | (((a1 >> 6) & 0x03030303u) << 4);
}
/* sum_g mn[g] * (bsums[2g] + bsums[2g+1]) as 8 x i32 (one madd with the mins doubled) */
static inline __m256i k4_min_dot(const uint32_t mn[2], const int16_t *bsums) {
    __m128i m8 = _mm_set_epi32(0, 0, (int)mn[1], (int)mn[0]);
    __m256i m16 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    return _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)bsums), m16);
}
/* broadcast i16 word j (0..7) of v (both 128-bit lanes hold the 8 words) */
static inline __m256i bcast_w(__m256i v, int j) {
    return _mm256_shuffle_epi8(v, _mm256_set1_epi16((short)(0x0100 + 0x0202 * j)));
}
/* i16 pair sums -> i32, low 128 bits weighted by s0, high by s1 */
static inline __m256i scale2(__m256i p16, int s0, int s1) {
    return _mm256_madd_epi16(p16, _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0)));
}

static float dot_q4_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q4_K);
    const __m256i m4 = _mm256_set1_epi8(15);
    float s = 0.0f;
    __m256i pa = _mm256_setzero_si256(), pm = pa;   /* b - 1's integer sums, reduced during b */
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        uint32_t sc[2], mn[2];
        k4_unpack(blk[b].scales, sc, mn);
        __m128i s16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0]));
        __m256i scv = _mm256_set_m128i(s16, s16);
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            __m256i plo = _mm256_maddubs_epi16(lo, XK(b, 64 * c));
            __m256i phi = _mm256_maddubs_epi16(hi, XK(b, 64 * c + 32));
            i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(plo, bcast_w(scv, 2 * c)));
            i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(phi, bcast_w(scv, 2 * c + 1)));
        }
        if (b) s += ab[b - 1].d * kmin_diff(&blk[b - 1].d, pa, pm);
        pa = _mm256_add_epi32(i0, i1); pm = k4_min_dot(mn, ab[b].bsums);
    }
    if (nb) s += ab[nb - 1].d * kmin_diff(&blk[nb - 1].d, pa, pm);
    return s;
}

static float dot_q5_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q5_K);
    const __m256i m4 = _mm256_set1_epi8(15), b4 = _mm256_set1_epi8(16);
    float s = 0.0f;
    __m256i pa = _mm256_setzero_si256(), pm = pa;   /* b - 1's integer sums, reduced during b */
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        uint32_t sc[2], mn[2];
        k4_unpack(blk[b].scales, sc, mn);
        __m128i s16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0]));
        __m256i scv = _mm256_set_m128i(s16, s16);
        __m256i qh = _mm256_loadu_si256((const __m256i *)blk[b].qh);
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            /* bit 2c of qh moved to bit 4, bit 2c + 1 likewise */
            __m256i hlo = _mm256_and_si256(c < 2 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4), b4);
            __m256i hhi = _mm256_and_si256(c < 2 ? _mm256_slli_epi16(qh, 3 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 3), b4);
            __m256i lo = _mm256_or_si256(_mm256_and_si256(v, m4), hlo);
            __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), hhi);
            __m256i plo = _mm256_maddubs_epi16(lo, XK(b, 64 * c));
            __m256i phi = _mm256_maddubs_epi16(hi, XK(b, 64 * c + 32));
            i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(plo, bcast_w(scv, 2 * c)));
            i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(phi, bcast_w(scv, 2 * c + 1)));
        }
        if (b) s += ab[b - 1].d * kmin_diff(&blk[b - 1].d, pa, pm);
        pa = _mm256_add_epi32(i0, i1); pm = k4_min_dot(mn, ab[b].bsums);
    }
    if (nb) s += ab[nb - 1].d * kmin_diff(&blk[nb - 1].d, pa, pm);
    return s;
}

/* Q6_K: half h (128 levels) of a super-block -> four vectors of 32 six-bit levels 0..63 (the
 * -32 offset is left to the caller): low nibbles from ql, the top two bits from qh. */
static inline void q6k_half(const blk_q6_K *blk, int h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3 << 4);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h));
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk->ql + 64 * h + 32));
    __m256i qh = _mm256_loadu_si256((const __m256i *)(blk->qh + 32 * h));
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
}

static float dot_q6_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q6_K);
    float s = 0.0f;
    __m256i pa = _mm256_setzero_si256();   /* b - 1's integer sums, reduced during b */
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const int8_t *sc = blk[b].scales;
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        /* the -32 offset: 32 * sum_g sc[g] * bsums[g], one madd */
        __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)ab[b].bsums));
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_half(&blk[b], h, q);
            const int g = 8 * h;
            i0 = _mm256_add_epi32(i0, scale2(_mm256_maddubs_epi16(q[0], XK(b, 128 * h)), sc[g], sc[g + 1]));
            i1 = _mm256_add_epi32(i1, scale2(_mm256_maddubs_epi16(q[1], XK(b, 128 * h + 32)), sc[g + 2], sc[g + 3]));
            i0 = _mm256_add_epi32(i0, scale2(_mm256_maddubs_epi16(q[2], XK(b, 128 * h + 64)), sc[g + 4], sc[g + 5]));
            i1 = _mm256_add_epi32(i1, scale2(_mm256_maddubs_epi16(q[3], XK(b, 128 * h + 96)), sc[g + 6], sc[g + 7]));
        }
        if (b) s += ab[b - 1].d * h2f(blk[b - 1].d) * hsum8i_f(pa);
        pa = _mm256_sub_epi32(_mm256_add_epi32(i0, i1), _mm256_slli_epi32(off, 5));
    }
    if (nb) s += ab[nb - 1].d * h2f(blk[nb - 1].d) * hsum8i_f(pa);
    return s;
}

/* Q4_K and Q6_K, 1 x 4: levels and scales unpacked once per super-block for four tokens. */
static void dot4_q4_K(const void *w, const void *a, size_t as, int64_t n, float *out) {
    const blk_q4_K *blk = (const blk_q4_K *)w;
    const int64_t nb = n / 256;
    const __m256i m4 = _mm256_set1_epi8(15);
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; b++) {
        const llk_block_q8_256 *A[4];
        for (int t = 0; t < 4; t++) A[t] = (const llk_block_q8_256 *)((const uint8_t *)a + t * as) + b;
        uint32_t sc[2], mn[2];
        k4_unpack(blk[b].scales, sc, mn);
        __m128i s16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0]));
        __m256i scv = _mm256_set_m128i(s16, s16);
        __m256i is[4];
        for (int t = 0; t < 4; t++) is[t] = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
            __m256i slo = bcast_w(scv, 2 * c), shi = bcast_w(scv, 2 * c + 1);
            for (int t = 0; t < 4; t++) {
                __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(A[t]->qs + 64 * c)));
                __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(A[t]->qs + 64 * c + 32)));
                is[t] = _mm256_add_epi32(is[t], _mm256_add_epi32(_mm256_madd_epi16(plo, slo), _mm256_madd_epi16(phi, shi)));
            }
        }
        __m256i im[4];
        for (int t = 0; t < 4; t++) im[t] = k4_min_dot(mn, A[t]->bsums);
        float fa[4], fm[4];
        _mm_storeu_ps(fa, hsum8i_f4(is));
        _mm_storeu_ps(fm, hsum8i_f4(im));
        const float d = h2f(blk[b].d), dm = h2f(blk[b].dmin);
        for (int t = 0; t < 4; t++) s[t] += A[t]->d * (d * fa[t] - dm * fm[t]);
    }
    for (int t = 0; t < 4; t++) out[t] = s[t];
}

static void dot4_q6_K(const void *w, const void *a, size_t as, int64_t n, float *out) {
    const blk_q6_K *blk = (const blk_q6_K *)w;
    const int64_t nb = n / 256;
    float s[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t b = 0; b < nb; b++) {
        const llk_block_q8_256 *A[4];
        for (int t = 0; t < 4; t++) A[t] = (const llk_block_q8_256 *)((const uint8_t *)a + t * as) + b;
        const int8_t *sc = blk[b].scales;
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        __m256i is[4];
        for (int t = 0; t < 4; t++)
            is[t] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                     _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)A[t]->bsums)), 5));
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_half(&blk[b], h, q);
            for (int s = 0; s < 4; s++) {
                const int g = 8 * h + 2 * s;
                __m256i sv = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
                for (int t = 0; t < 4; t++) {
                    __m256i p = _mm256_maddubs_epi16(q[s], _mm256_loadu_si256((const __m256i *)(A[t]->qs + 128 * h + 32 * s)));
                    is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(p, sv));
                }
            }
        }
        const float d = h2f(blk[b].d);
        float f[4];
        _mm_storeu_ps(f, hsum8i_f4(is));
        for (int t = 0; t < 4; t++) s[t] += A[t]->d * d * f[t];
    }
    for (int t = 0; t < 4; t++) out[t] = s[t];
}

/* 16 i16 group scales (both 128-bit lanes of v hold words 0-7 of half h ... see callers):
 * low lane = word g, high lane = word g + 1, for g even; v = the 8-word half containing g. */
static inline __m256i pair_scales(__m256i v8, int g) {
    const int j = g & 7;
    return _mm256_shuffle_epi8(v8, _mm256_set_m128i(_mm_set1_epi16((short)(0x0100 + 0x0202 * (j + 1))),
                                                    _mm_set1_epi16((short)(0x0100 + 0x0202 * j))));
}
/* the 8-word half h (0: groups 0-7, 1: groups 8-15) of 16 i16 scales, in both 128-bit lanes */
static inline __m256i half_scales(__m256i s16, int h) {
    return h ? _mm256_permute2x128_si256(s16, s16, 0x11) : _mm256_permute2x128_si256(s16, s16, 0x00);
}

static float dot_q2_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q2_K);
    const __m256i m2 = _mm256_set1_epi8(3);
    float s = 0.0f;
    __m256i pa = _mm256_setzero_si256(), pm = pa;   /* b - 1's integer sums, reduced during b */
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        __m128i sb = _mm_loadu_si128((const __m128i *)blk[b].scales);
        __m256i sc16 = _mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15)));
        __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(15)));
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * h));
            __m256i sv = half_scales(sc16, h);
            for (int s = 0; s < 4; s++) {
                __m256i q = _mm256_and_si256(_mm256_srli_epi16(v, 2 * s), m2);
                __m256i p = _mm256_maddubs_epi16(q, XK(b, 128 * h + 32 * s));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, pair_scales(sv, 8 * h + 2 * s)));
            }
        }
        if (b) s += ab[b - 1].d * kmin_diff(&blk[b - 1].d, pa, pm);
        pa = isum; pm = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)ab[b].bsums));
    }
    if (nb) s += ab[nb - 1].d * kmin_diff(&blk[nb - 1].d, pa, pm);
    return s;
}

/* Q3_K: the 16 signed 6-bit scales from their 12 packed bytes, as 16 i16 (word ops, no loop) */
static inline __m256i k3_scales(const uint8_t *s) {
    uint32_t a0, a1, a2;
    memcpy(&a0, s, 4); memcpy(&a1, s + 4, 4); memcpy(&a2, s + 8, 4);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    uint32_t w0 = (a0 & m4) | ((a2 & m2) << 4);               /* groups 0-3 */
    uint32_t w1 = (a1 & m4) | (((a2 >> 2) & m2) << 4);        /* groups 4-7 */
    uint32_t w2 = ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4); /* groups 8-11 */
    uint32_t w3 = ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4); /* groups 12-15 */
    __m256i v = _mm256_cvtepu8_epi16(_mm_set_epi32((int)w3, (int)w2, (int)w1, (int)w0));
    return _mm256_sub_epi16(v, _mm256_set1_epi16(32));
}

static float dot_q3_K(const void *w, const void *a, int64_t n) {
    KQ(blk_q3_K);
    const __m256i m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
    float s = 0.0f;
    __m256i pa = _mm256_setzero_si256();   /* b - 1's integer sums, reduced during b */
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        __m256i sc16 = k3_scales(blk[b].scales);
        /* level + 4 = low2 + 4 * high bit (0..7): subtract 4 * sum_g sc[g] * bsums[g] after */
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(
            _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)ab[b].bsums)), 2));
        __m256i hm = _mm256_loadu_si256((const __m256i *)blk[b].hmask);
        for (int h = 0; h < 2; h++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * h));
            __m256i sv = half_scales(sc16, h);
            for (int j = 0; j < 4; j++) {
                /* bit 4h + j of hmask -> 4 where set */
                const int k = 4 * h + j;
                __m256i hb = _mm256_and_si256(k <= 2 ? _mm256_slli_epi16(hm, 2 - k) : _mm256_srli_epi16(hm, k - 2), four);
                __m256i q = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2 * j), m2), hb);
                __m256i p = _mm256_maddubs_epi16(q, XK(b, 128 * h + 32 * j));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, pair_scales(sv, 8 * h + 2 * j)));
            }
        }
        if (b) s += ab[b - 1].d * h2f(blk[b - 1].d) * hsum8i_f(pa);
        pa = isum;
    }
    if (nb) s += ab[nb - 1].d * h2f(blk[nb - 1].d) * hsum8i_f(pa);
    return s;
}

static float dot_iq4_xs(const void *w, const void *a, int64_t n) {
    KQ(blk_iq4_xs);
    const __m256i lut = iq4_lut();
    float s = 0.0f;
    __m256i pa = _mm256_setzero_si256();   /* b - 1's integer sums, reduced during b */
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
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
        if (b) s += ab[b - 1].d * h2f(blk[b - 1].d) * hsum8i_f(pa);
        pa = isum;
    }
    if (nb) s += ab[nb - 1].d * h2f(blk[nb - 1].d) * hsum8i_f(pa);
    return s;
}

#endif /* LLK_SIMD256_K_H */
