/* llk_avx512_k.h — the K-quants and IQ4_XS at 512 bits, included by llk_avx512.c after its legacy
 * section (it uses nib64 and dpbusd512 from there); built twice like that file, with and
 * without VNNI. Each kernel keeps its reference's summation order (llk_ref.c, the K-quant contract).
 */
#ifndef LLK_AVX512_K_H
#define LLK_AVX512_K_H


/* --- K-quants, 64 weights per zmm --------------------------------------------------------------
 * Q4_K / Q5_K: a 32-byte chunk holds groups 2c (low nibbles) and 2c+1 (high): unpacked into one
 * zmm, they meet the 64 contiguous activation bytes of those groups in one maddubs; the i16 pair
 * sums are weighted by the two group scales and widened in one vpdpwssd (VNNI) or madd.
 * Q6_K: the two 32-byte halves of ql hold four groups of 32, two per zmm likewise.
 * Float order (see llk_ref.c, the K-quant contract): each super-block's integer sums are reduced
 * to scalar ints, then its float contribution is the reference's scalar expression. */

/* the 16 i32 lanes of v folded to 8 (exact), for the reductions of llk_simd256_k.h */
static inline __m256i fold16i(__m512i v) {
    return _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
}

/* v, opaque to the compiler: keeps a sum's additions where they are written (GCC otherwise
 * reassociates the integer adds of the four super-blocks of a step, interleaves them and spills) */
#if defined(__GNUC__) || defined(__clang__)
#define KEEP(v) __asm__("" : "+v"(v))
#else
#define KEEP(v) ((void)0)
#endif

static inline __m512i wsum512(__m512i acc, __m512i p16, __m512i s16) {
#if defined(LLK_VNNI)
    return _mm512_dpwssd_epi32(acc, p16, s16);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(p16, s16));
#endif
}
/* i16 word j of every 128-bit lane of v in the low 256 bits, word j+1 in the high 256 bits */
static inline __m512i bcast_w2(__m512i v, int j) {
    __m512i ctrl = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi16((short)(0x0100 + 0x0202 * j))),
                                      _mm256_set1_epi16((short)(0x0100 + 0x0202 * (j + 1))), 1);
    return _mm512_shuffle_epi8(v, ctrl);
}
static inline __m512i join256(__m256i lo, __m256i hi) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* 32 bytes of nibbles -> [low nibbles | high nibbles] (unmasked): a 256-bit broadcast load and a
 * per-half shift, no shuffle-port work */
static inline __m512i nib_lohi(const uint8_t *q) {
    __m512i z = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)q));
    return _mm512_srlv_epi16(z, _mm512_set_epi64(4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL,
                                                 4 * 0x0001000100010001LL, 4 * 0x0001000100010001LL, 0, 0, 0, 0));
}

/* Four super-blocks per step (the contract's steps, batched): the integer sums of super-blocks
 * b .. b+3 are reduced together, transpose-style, to one vector whose lane t is super-block b + t's
 * exact sum; one cvtdq2ps converts them; the float contributions are formed in those lanes by the
 * reference's operations in its order (lane-wise mulps / subps round exactly as the scalar mulss /
 * subss; no FMA); s then adds lanes 0, 1, 2, 3 one at a time, in super-block order. Left-over
 * super-blocks (nb % 4) take the same steps one at a time. Step b - 4's float work (and, for the
 * types without mins, its reduction too) is issued during step b, after its vector work: it
 * hides that work's latency. Each super-block prefetches its own lines, as one at a time did
 * (one burst of prefetches per step cost ~10% out of cache). */

/* lane t = exact sum of the 16 i32 lanes of z_t */
static inline __m128i hsum16i_x4(__m512i z0, __m512i z1, __m512i z2, __m512i z3) {
    __m512i a = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
    __m512i b = _mm512_add_epi32(_mm512_unpacklo_epi32(z2, z3), _mm512_unpackhi_epi32(z2, z3));
    __m512i c = _mm512_add_epi32(_mm512_unpacklo_epi64(a, b), _mm512_unpackhi_epi64(a, b));
    __m256i d = _mm256_add_epi32(_mm512_castsi512_si256(c), _mm512_extracti64x4_epi64(c, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
}
/* lane t = exact sum of the 8 i32 lanes of v_t */
static inline __m128i hsum8i_x4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i a = _mm256_add_epi32(_mm256_unpacklo_epi32(v0, v1), _mm256_unpackhi_epi32(v0, v1));
    __m256i b = _mm256_add_epi32(_mm256_unpacklo_epi32(v2, v3), _mm256_unpackhi_epi32(v2, v3));
    __m256i c = _mm256_add_epi32(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
    return _mm_add_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
}
/* the activation scales of ab[0 .. 3] */
static inline __m128 xd_x4(const llk_block_q8_256 *ab) {
    return _mm_setr_ps(ab[0].d, ab[1].d, ab[2].d, ab[3].d);
}
/* s + t0 + t1 + t2 + t3, left to right */
static inline float add4(float s, __m128 t) {
    s += _mm_cvtss_f32(t);
    s += _mm_cvtss_f32(_mm_movehdup_ps(t));
    s += _mm_cvtss_f32(_mm_movehl_ps(t, t));
    s += _mm_cvtss_f32(_mm_shuffle_ps(t, t, 3));
    return s;
}
/* types without mins: contribution t = ab[t].d * d_t * (float)A_t, d_t the float16 at
 * dp + t * stride */
static inline float kd_add4(float s, const uint8_t *dp, size_t stride, const llk_block_q8_256 *ab, __m128i A) {
    uint16_t h0, h1, h2, h3;
    memcpy(&h0, dp, 2); memcpy(&h1, dp + stride, 2); memcpy(&h2, dp + 2 * stride, 2); memcpy(&h3, dp + 3 * stride, 2);
    __m128 d = _mm_cvtph_ps(_mm_setr_epi16((short)h0, (short)h1, (short)h2, (short)h3, 0, 0, 0, 0));
    return add4(s, _mm_mul_ps(_mm_mul_ps(xd_x4(ab), d), _mm_cvtepi32_ps(A)));
}
/* types with mins: contribution t = ab[t].d * (d_t * (float)A_t - dmin_t * (float)M_t), d_t and
 * dmin_t the adjacent float16 pair at dp + t * stride */
static inline float kmin_add4(float s, const uint8_t *dp, size_t stride, const llk_block_q8_256 *ab,
                              __m128i A, __m128i M) {
    uint32_t h0, h1, h2, h3;
    memcpy(&h0, dp, 4); memcpy(&h1, dp + stride, 4); memcpy(&h2, dp + 2 * stride, 4); memcpy(&h3, dp + 3 * stride, 4);
    __m128i hv = _mm_shuffle_epi8(_mm_setr_epi32((int)h0, (int)h1, (int)h2, (int)h3),
                                  _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
    __m256 p = _mm256_mul_ps(_mm256_cvtph_ps(hv),
                             _mm256_cvtepi32_ps(_mm256_set_m128i(M, A)));  /* [d A | dmin M] */
    __m128 r = _mm_sub_ps(_mm256_castps256_ps128(p), _mm256_extractf128_ps(p, 1));
    return add4(s, _mm_mul_ps(xd_x4(ab), r));
}

/* The single dots: SB(B, A, &pm) gives one super-block's weighted level sums as a zmm (offsets
 * included) and, for the types with mins, its min sums (pm, 8 lanes). */
#define KDOT_MIN_512(NAME, T, SB)                                                                 \
    static float NAME(const void *w, const void *a, int64_t n) {                                  \
        const T *blk = (const T *)w;                                                              \
        const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;                                 \
        const int64_t nb = n / 256;                                                               \
        float s = 0.0f;                                                                           \
        int64_t b = 0;                                                                            \
        __m128i pa = _mm_setzero_si128(), pm = pa;   /* step b - 4's sums, taken during b */     \
        for (; b + 4 <= nb; b += 4) {                                                             \
            __m256i m0, m1, m2, m3;                                                               \
            PREFETCH_AHEAD(&blk[b], sizeof *blk);                                                 \
            __m512i i0 = SB(&blk[b], &ab[b], &m0);                                                \
            PREFETCH_AHEAD(&blk[b + 1], sizeof *blk);                                             \
            __m512i i1 = SB(&blk[b + 1], &ab[b + 1], &m1);                                        \
            PREFETCH_AHEAD(&blk[b + 2], sizeof *blk);                                             \
            __m512i i2 = SB(&blk[b + 2], &ab[b + 2], &m2);                                        \
            PREFETCH_AHEAD(&blk[b + 3], sizeof *blk);                                             \
            __m512i i3 = SB(&blk[b + 3], &ab[b + 3], &m3);                                        \
            if (b) s = kmin_add4(s, (const uint8_t *)&blk[b - 4].d, sizeof *blk, &ab[b - 4], pa, pm); \
            pa = hsum16i_x4(i0, i1, i2, i3); pm = hsum8i_x4(m0, m1, m2, m3);                      \
        }                                                                                         \
        if (b) s = kmin_add4(s, (const uint8_t *)&blk[b - 4].d, sizeof *blk, &ab[b - 4], pa, pm); \
        for (; b < nb; b++) {                                                                     \
            __m256i m;                                                                            \
            __m512i i = SB(&blk[b], &ab[b], &m);                                                  \
            s += ab[b].d * kmin_diff(&blk[b].d, fold16i(i), m);                                   \
        }                                                                                         \
        return s;                                                                                 \
    }
#define KDOT_D_512(NAME, T, SB)                                                                   \
    static float NAME(const void *w, const void *a, int64_t n) {                                  \
        const T *blk = (const T *)w;                                                              \
        const llk_block_q8_256 *ab = (const llk_block_q8_256 *)a;                                 \
        const int64_t nb = n / 256;                                                               \
        float s = 0.0f;                                                                           \
        int64_t b = 0;                                                                            \
        __m512i p0 = _mm512_setzero_si512(), p1 = p0, p2 = p0, p3 = p0;                          \
        for (; b + 4 <= nb; b += 4) {                                                             \
            PREFETCH_AHEAD(&blk[b], sizeof *blk);                                                 \
            __m512i i0 = SB(&blk[b], &ab[b]);                                                     \
            PREFETCH_AHEAD(&blk[b + 1], sizeof *blk);                                             \
            __m512i i1 = SB(&blk[b + 1], &ab[b + 1]);                                             \
            PREFETCH_AHEAD(&blk[b + 2], sizeof *blk);                                             \
            __m512i i2 = SB(&blk[b + 2], &ab[b + 2]);                                             \
            PREFETCH_AHEAD(&blk[b + 3], sizeof *blk);                                             \
            __m512i i3 = SB(&blk[b + 3], &ab[b + 3]);                                             \
            if (b) s = kd_add4(s, (const uint8_t *)&blk[b - 4].d, sizeof *blk, &ab[b - 4], hsum16i_x4(p0, p1, p2, p3)); \
            p0 = i0; p1 = i1; p2 = i2; p3 = i3;                                                   \
        }                                                                                         \
        if (b) s = kd_add4(s, (const uint8_t *)&blk[b - 4].d, sizeof *blk, &ab[b - 4], hsum16i_x4(p0, p1, p2, p3)); \
        for (; b < nb; b++)                                                                       \
            s += ab[b].d * h2f(blk[b].d) * hsum8i_f(fold16i(SB(&blk[b], &ab[b])));                \
        return s;                                                                                 \
    }
/* an 8-lane offset as the starting value of a 16-lane sum */
static inline __m512i isum_init(__m256i v) { return _mm512_zextsi256_si512(v); }

static inline __m512i sb_q4_K(const blk_q4_K *B, const llk_block_q8_256 *A, __m256i *pm) {
    const __m512i m4 = _mm512_set1_epi8(15);
    uint32_t sc[2], mn[2];
    k4_unpack(B->scales, sc, mn);
    __m512i scv = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0])));
    __m512i isum = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        __m512i z = _mm512_and_si512(nib_lohi(B->qs + 32 * c), m4);
        __m512i p = _mm512_maddubs_epi16(z, _mm512_loadu_si512((const void *)(A->qs + 64 * c)));
        isum = wsum512(isum, p, bcast_w2(scv, 2 * c));
    }
    *pm = k4_min_dot(mn, A->bsums);
    return isum;
}
KDOT_MIN_512(dot_q4_K_512, blk_q4_K, sb_q4_K)

static inline __m512i sb_q5_K(const blk_q5_K *B, const llk_block_q8_256 *A, __m256i *pm) {
    const __m512i m4 = _mm512_set1_epi8(15), b4 = _mm512_set1_epi8(16);
    uint32_t sc[2], mn[2];
    k4_unpack(B->scales, sc, mn);
    __m512i scv = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)sc[1], (int)sc[0])));
    __m256i qh = _mm256_loadu_si256((const __m256i *)B->qh);
    __m512i isum = _mm512_setzero_si512();
    for (int c = 0; c < 4; c++) {
        /* bits 2c and 2c + 1 of qh, each moved to bit 4 */
        __m256i hlo = c < 2 ? _mm256_slli_epi16(qh, 4 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 4);
        __m256i hhi = c < 2 ? _mm256_slli_epi16(qh, 3 - 2 * c) : _mm256_srli_epi16(qh, 2 * c - 3);
        __m512i z = _mm512_or_si512(_mm512_and_si512(nib_lohi(B->qs + 32 * c), m4),
                                    _mm512_and_si512(join256(hlo, hhi), b4));
        __m512i p = _mm512_maddubs_epi16(z, _mm512_loadu_si512((const void *)(A->qs + 64 * c)));
        isum = wsum512(isum, p, bcast_w2(scv, 2 * c));
    }
    *pm = k4_min_dot(mn, A->bsums);
    return isum;
}
KDOT_MIN_512(dot_q5_K_512, blk_q5_K, sb_q5_K)

/* word index vector: words 8k .. 8k+7 all = g + k (k < 4) */
static inline __m512i quad_idx(int g) {
    const long long r = 0x0001000100010001LL;
    return _mm512_set_epi64((g + 3) * r, (g + 3) * r, (g + 2) * r, (g + 2) * r, (g + 1) * r, (g + 1) * r,
                            g * r, g * r);
}

static inline __m512i sb_q6_K(const blk_q6_K *B, const llk_block_q8_256 *A) {
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3 << 4);
    __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)B->scales));
    __m256i off = _mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)A->bsums));
    __m512i sc512 = _mm512_castsi256_si512(sc16);
    /* the -32 offset, 32 * sum_g sc[g] * bsums[g], starts the sum */
    __m512i isum = isum_init(_mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(off, 5)));
    for (int h = 0; h < 2; h++) {
        __m512i L = _mm512_loadu_si512((const void *)(B->ql + 64 * h));     /* [l0 | l1] */
        __m256i qh = _mm256_loadu_si256((const __m256i *)(B->qh + 32 * h));
        __m512i h01 = _mm512_and_si512(join256(_mm256_slli_epi16(qh, 4), _mm256_slli_epi16(qh, 2)), m2);
        __m512i h23 = _mm512_and_si512(join256(qh, _mm256_srli_epi16(qh, 2)), m2);
        __m512i z01 = _mm512_or_si512(_mm512_and_si512(L, m4), h01);
        __m512i z23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), h23);
        const int g = 8 * h;
        __m512i s01 = _mm512_permutexvar_epi16(quad_idx(g), sc512);      /* groups g .. g+3 */
        __m512i s23 = _mm512_permutexvar_epi16(quad_idx(g + 4), sc512);  /* groups g+4 .. g+7 */
        __m512i p01 = _mm512_maddubs_epi16(z01, _mm512_loadu_si512((const void *)(A->qs + 128 * h)));
        __m512i p23 = _mm512_maddubs_epi16(z23, _mm512_loadu_si512((const void *)(A->qs + 128 * h + 64)));
        isum = wsum512(isum, p01, s01);
        isum = wsum512(isum, p23, s23);
    }
#if !defined(LLK_VNNI)
    KEEP(isum);   /* without VNNI the wsum512 adds are reassociated across super-blocks: spills */
#endif
    return isum;
}
KDOT_D_512(dot_q6_K_512, blk_q6_K, sb_q6_K)

/* Q2_K and Q3_K: the 2-bit fields of one 32-byte row of qs hold four groups of 32; two of them
 * per zmm meet 64 contiguous activation bytes; the scales of the four 16-element groups a maddubs
 * result spans come from one word permute. */
static inline __m512i sb_q2_K(const blk_q2_K *B, const llk_block_q8_256 *A, __m256i *pm) {
    const __m256i m2 = _mm256_set1_epi8(3);
    __m128i sb = _mm_loadu_si128((const __m128i *)B->scales);
    __m512i sc512 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(sb, _mm_set1_epi8(15))));
    __m256i mn16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sb, 4), _mm_set1_epi8(15)));
    __m512i isum = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(B->qs + 32 * h));
        __m512i z01 = join256(_mm256_and_si256(v, m2), _mm256_and_si256(_mm256_srli_epi16(v, 2), m2));
        __m512i z23 = join256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m2), _mm256_and_si256(_mm256_srli_epi16(v, 6), m2));
        __m512i p01 = _mm512_maddubs_epi16(z01, _mm512_loadu_si512((const void *)(A->qs + 128 * h)));
        __m512i p23 = _mm512_maddubs_epi16(z23, _mm512_loadu_si512((const void *)(A->qs + 128 * h + 64)));
        isum = wsum512(isum, p01, _mm512_permutexvar_epi16(quad_idx(8 * h), sc512));
        isum = wsum512(isum, p23, _mm512_permutexvar_epi16(quad_idx(8 * h + 4), sc512));
    }
    *pm = _mm256_madd_epi16(mn16, _mm256_loadu_si256((const __m256i *)A->bsums));
    return isum;
}
KDOT_MIN_512(dot_q2_K_512, blk_q2_K, sb_q2_K)

/* bit k of each byte of hm, moved to bit 2 (the Q3_K high bit as +4 on the level) */
static inline __m256i q3_hbit(__m256i hm, int k) {
    __m256i t = k <= 2 ? _mm256_slli_epi16(hm, 2 - k) : _mm256_srli_epi16(hm, k - 2);
    return _mm256_and_si256(t, _mm256_set1_epi8(4));
}

static inline __m512i sb_q3_K(const blk_q3_K *B, const llk_block_q8_256 *A) {
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256i sc16 = k3_scales(B->scales);
    __m512i sc512 = _mm512_castsi256_si512(sc16);
    /* level + 4 = low2 + 4 * high bit (0..7): 4 * sum_g sc[g] * bsums[g] starts the sum, negated */
    __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(sc16, _mm256_loadu_si256((const __m256i *)A->bsums)), 2);
    __m512i isum = isum_init(_mm256_sub_epi32(_mm256_setzero_si256(), off));
    __m256i hm = _mm256_loadu_si256((const __m256i *)B->hmask);
    for (int h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(B->qs + 32 * h));
        __m512i z01 = join256(_mm256_or_si256(_mm256_and_si256(v, m2), q3_hbit(hm, 4 * h)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 2), m2), q3_hbit(hm, 4 * h + 1)));
        __m512i z23 = join256(_mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m2), q3_hbit(hm, 4 * h + 2)),
                              _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 6), m2), q3_hbit(hm, 4 * h + 3)));
        __m512i p01 = _mm512_maddubs_epi16(z01, _mm512_loadu_si512((const void *)(A->qs + 128 * h)));
        __m512i p23 = _mm512_maddubs_epi16(z23, _mm512_loadu_si512((const void *)(A->qs + 128 * h + 64)));
        isum = wsum512(isum, p01, _mm512_permutexvar_epi16(quad_idx(8 * h), sc512));
        isum = wsum512(isum, p23, _mm512_permutexvar_epi16(quad_idx(8 * h + 4), sc512));
    }
#if !defined(LLK_VNNI)
    KEEP(isum);   /* without VNNI the wsum512 adds are reassociated across super-blocks: spills */
#endif
    return isum;
}
KDOT_D_512(dot_q3_K_512, blk_q3_K, sb_q3_K)

#if defined(LLK_VNNI)
/* IQ4_XS, two groups of 32 per zmm: table values + 128 (unsigned, up to 241) times the activation
 * bytes in one vpdpbusd (exact in i32, where maddubs would saturate), group scales by one vpmulld;
 * the +128 comes back out as 128 * sum_g ls_g * (group sum of the activations). */
static inline __m512i sb_iq4_xs(const blk_iq4_xs *B, const llk_block_q8_256 *A) {
    const __m512i lut = _mm512_broadcast_i32x4(_mm_xor_si128(_mm_loadu_si128((const __m128i *)llk_iq4_values),
                                                             _mm_set1_epi8((char)0x80)));
    /* the 8 scales as i32 lanes, built in registers (stored scalars would stall the loads) */
    uint32_t sl; memcpy(&sl, B->scales_l, 4);
    __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)sl), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                  _mm256_set1_epi32(15));
    __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(B->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
                                  _mm256_set1_epi32(3));
    __m256i ls8 = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
    __m512i ls512 = _mm512_castsi256_si512(ls8);
    /* each scale in both i16 halves of its lane: pairs with bsums[2g], bsums[2g+1] */
    __m256i ls2 = _mm256_or_si256(_mm256_and_si256(ls8, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(ls8, 16));
    __m256i bias = _mm256_slli_epi32(_mm256_madd_epi16(ls2, _mm256_loadu_si256((const __m256i *)A->bsums)), 7);
    __m512i isum = isum_init(_mm256_sub_epi32(_mm256_setzero_si256(), bias));
    for (int k = 0; k < 4; k++) {
        __m512i q = _mm512_shuffle_epi8(lut, nib64(B->qs + 32 * k, B->qs + 32 * k + 16));
        __m512i d = dpbusd512(q, _mm512_loadu_si512((const void *)(A->qs + 64 * k)));
        __m512i sc = _mm512_permutexvar_epi32(_mm512_set_epi32(2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1,
            2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k, 2 * k), ls512);
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(d, sc));
        KEEP(isum);
    }
    return isum;
}
KDOT_D_512(dot_iq4_xs_512, blk_iq4_xs, sb_iq4_xs)
#endif

#endif /* LLK_AVX512_K_H */
