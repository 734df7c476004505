/* llk_simd256_iq.h — the 256-bit dot products of the grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ1_S, IQ1_M) and the ternary TQ1_0 / TQ2_0 against q8_256 activations, and of MXFP4
 * against q8_32. Part of llk_simd256.h and included by it only: it uses that file's helpers
 * (hsum8, h2f, nib32, dot_ss, KQ, XK) and is compiled once per ISA file like the rest.
 * Twins: llk_ref_iq.c. Dequantization stays with the reference.
 *
 * Shape, per sub-block of 32: the grid entries (unsigned magnitudes, 8 or 4 bytes each) are looked
 * up from the tables in llk_iq_tables.h and assembled into one ymm; the signs go onto the
 * activation bytes (sign_epi8 with +1 / -1 bytes from llk_ksigns64, or from the type's sign bits);
 * maddubs gives i16 pair sums (magnitudes <= 62, activations <= 127: no saturation), one madd
 * weights them by the integer scale (2 ls + 1 or 1 + 2 sc); per super-block the i32 lanes are
 * summed to one int and the reference's scalar float step follows (dx * d * (float)sum, added to
 * s: the contract in llk_ref_iq.c, bit-identical at every level). IQ1 builds its signed levels
 * (8 grid + delta) in bytes; the ternary types multiply unsigned digits and subtract the
 * activations' sum (the -1 offset).
 * The grid types also have 1 x 4 kernels (matrix x matrix): the lookups once for four tokens.
 * Measured against ggml's own kernels on the same bytes by kernels/bench_vs_ggml.py.
 */
#ifndef LLK_SIMD256_IQ_H
#define LLK_SIMD256_IQ_H

/* four 8-byte grid entries -> 32 bytes, entry k in bytes 8k .. 8k+7 */
static inline __m256i grid8x4(const uint64_t *grid, int i0, int i1, int i2, int i3) {
    return _mm256_set_epi64x((long long)grid[i3], (long long)grid[i2], (long long)grid[i1], (long long)grid[i0]);
}
/* four 7-bit ksigns indexes (bits 0-27 of aux) -> 32 bytes of +1 / -1 */
static inline __m256i ksigns32(uint32_t aux) {
    return grid8x4(llk_ksigns64, (int)(aux & 127), (int)((aux >> 7) & 127), (int)((aux >> 14) & 127),
                   (int)((aux >> 21) & 127));
}
/* 32 sign bits (bit i: element i negative) -> 32 bytes of +1 / -1 */
static inline __m256i sign_bits32(const uint8_t *p) {
    uint32_t b; memcpy(&b, p, 4);
#if defined(LLK_TARGET_AVX512)
    return _mm256_mask_mov_epi8(_mm256_set1_epi8(1), (__mmask32)b, _mm256_set1_epi8(-1));
#else
    /* byte i gets byte i / 8 of b, then tests bit i % 8 */
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)b), shuf), bit);
    return _mm256_or_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(1));
#endif
}
static inline uint32_t rd32u(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t rd16u(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

/* --- the grid types: one sub-block unpacker per type, shared dot and 1 x 4 dot shapes ----------
 * SUB(B, s, &mag, &sgn, &scl) gives sub-block s (elements 32s .. 32s+31) of super-block B as
 * unsigned magnitudes (bytes), signs (bytes whose sign is the weight's; never 0) and the i16
 * scales its maddubs pair sums are weighted by; DSCALE(B) is the super-block's float factor;
 * EXTRA(B, A) starts the super-block's i32 sums (a term taken from the activations A). */

static inline __m256i scale16(int s) { return _mm256_set1_epi16((short)s); }
static inline __m256i scale16x2(int s0, int s1) {   /* s0 for elements 0-15, s1 for 16-31 */
    return _mm256_set_m128i(_mm_set1_epi16((short)s1), _mm_set1_epi16((short)s0));
}

static inline void sub_iq2_xxs(const blk_iq2_xxs *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 8 * s;
    uint32_t aux = rd32u(q + 4);
    *mag = grid8x4(llk_iq2xxs_grid, q[0], q[1], q[2], q[3]);
    *sgn = ksigns32(aux);
    *scl = scale16((int)(2 * (aux >> 28) + 1));
}
static inline float ds_iq2_xxs(const blk_iq2_xxs *B) { return h2f(B->d) * 0.125f; }

static inline void sub_iq2_xs(const blk_iq2_xs *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 8 * s;
    uint16_t k0 = rd16u(q), k1 = rd16u(q + 2), k2 = rd16u(q + 4), k3 = rd16u(q + 6);
    *mag = grid8x4(llk_iq2xs_grid, k0 & 511, k1 & 511, k2 & 511, k3 & 511);
    *sgn = grid8x4(llk_ksigns64, k0 >> 9, k1 >> 9, k2 >> 9, k3 >> 9);
    *scl = scale16x2(2 * (B->scales[s] & 15) + 1, 2 * (B->scales[s] >> 4) + 1);
}
static inline float ds_iq2_xs(const blk_iq2_xs *B) { return h2f(B->d) * 0.125f; }

static inline void sub_iq2_s(const blk_iq2_s *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 4 * s;
    const int qh = B->qh[s];
    *mag = grid8x4(llk_iq2s_grid, q[0] | (qh & 3) << 8, q[1] | (qh & 12) << 6, q[2] | (qh & 48) << 4,
                   q[3] | (qh & 192) << 2);
    *sgn = sign_bits32(B->signs + 4 * s);
    *scl = scale16x2(2 * (B->scales[s] & 15) + 1, 2 * (B->scales[s] >> 4) + 1);
}
static inline float ds_iq2_s(const blk_iq2_s *B) { return h2f(B->d) * 0.125f; }

/* eight 4-byte grid entries -> 32 bytes */
static inline __m256i grid4x8(const uint32_t *grid, const int i[8]) {
    return _mm256_set_epi32((int)grid[i[7]], (int)grid[i[6]], (int)grid[i[5]], (int)grid[i[4]],
                            (int)grid[i[3]], (int)grid[i[2]], (int)grid[i[1]], (int)grid[i[0]]);
}

static inline void sub_iq3_xxs(const blk_iq3_xxs *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 8 * s;
    const int idx[8] = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
    uint32_t aux = rd32u(B->sas + 4 * s);
    *mag = grid4x8(llk_iq3xxs_grid, idx);
    *sgn = ksigns32(aux);
    *scl = scale16((int)(2 * (aux >> 28) + 1));
}
static inline float ds_iq3_xxs(const blk_iq3_xxs *B) { return h2f(B->d) * 0.25f; }

static inline void sub_iq3_s(const blk_iq3_s *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 8 * s;
    const int qh = B->qh[s];
    int idx[8];
    for (int j = 0; j < 8; j++) idx[j] = q[j] | ((qh >> j) & 1) << 8;
    *mag = grid4x8(llk_iq3s_grid, idx);
    *sgn = sign_bits32(B->signs + 4 * s);
    *scl = scale16(1 + 2 * ((B->scales[s >> 1] >> (4 * (s & 1))) & 15));
}
static inline float ds_iq3_s(const blk_iq3_s *B) { return h2f(B->d); }

/* IQ1: signed levels 8 * grid + delta (-9 .. 9, never 0) built in bytes from four int8 grid
 * entries (-1, 0, 1) and the deltas (+1 / -1 bytes); magnitude |lv|, sign lv. */
static inline __m256i iq1_levels(int i0, int i1, int i2, int i3, __m256i delta) {
    __m256i g = grid8x4(llk_iq1s_grid, i0, i1, i2, i3);
    g = _mm256_add_epi8(g, g); g = _mm256_add_epi8(g, g); g = _mm256_add_epi8(g, g);
    return _mm256_add_epi8(g, delta);
}

/* IQ1_S: the grid levels (-1, 0, 1) as they are, scaled by 8 sc; the delta (+-1/8 of the
 * scale, per sub-block) comes once per super-block from the activations' block sums (ex_iq1_s) */
static inline void sub_iq1_s(const blk_iq1_s *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 4 * s;
    const int h = rd16u(B->qh + 2 * s);
    __m256i g = grid8x4(llk_iq1s_grid, q[0] | (h & 7) << 8, q[1] | (h & 0x38) << 5, q[2] | (h & 0x1c0) << 2,
                        q[3] | (h & 0xe00) >> 1);
    *mag = _mm256_abs_epi8(g);
    *sgn = g;   /* 0 where the level is 0: sign_epi8 zeroes those activations, as the product is */
    *scl = scale16(8 * (2 * ((h >> 12) & 7) + 1));
}
/* sum over sub-blocks s of delta_s * sc_s * (bsums[2s] + bsums[2s+1]), as i32 lanes */
static inline __m256i ex_iq1_s(const blk_iq1_s *B, const llk_block_q8_256 *A) {
    __m128i h = _mm_loadu_si128((const __m128i *)B->qh);                                /* 8 x u16 */
    __m128i sc = _mm_add_epi16(_mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 12), _mm_set1_epi16(7)), 1),
                               _mm_set1_epi16(1));
    __m128i neg = _mm_srai_epi16(h, 15);                                                /* -1 where bit 15 */
    sc = _mm_sub_epi16(_mm_xor_si128(sc, neg), neg);
    __m256i sc2 = _mm256_set_m128i(_mm_unpackhi_epi16(sc, sc), _mm_unpacklo_epi16(sc, sc));
    return _mm256_madd_epi16(sc2, _mm256_loadu_si256((const __m256i *)A->bsums));
}
static inline __m256i ex_none(const void *B, const llk_block_q8_256 *A) {
    (void)B; (void)A;
    return _mm256_setzero_si256();
}
static inline float ds_iq1_s(const blk_iq1_s *B) { return h2f(B->d) * 0.125f; }

static inline void sub_iq1_m(const blk_iq1_m *B, int s, __m256i *mag, __m256i *sgn, __m256i *scl) {
    const uint8_t *q = B->qs + 4 * s;
    const int h0 = B->qh[2 * s], h1 = B->qh[2 * s + 1];   /* nibbles of entries 4s .. 4s+3 */
    /* the delta bits (bit 3 of each nibble: bits 3, 7, 11, 15 of h) -> +1 / -1 in every byte of
     * the entry's 64-bit lane */
    const __m256i one64 = _mm256_set1_epi64x(1);
    __m256i db = _mm256_and_si256(_mm256_srlv_epi64(_mm256_set1_epi64x(h0 | h1 << 8), _mm256_setr_epi64x(3, 7, 11, 15)), one64);
    __m256i delta = _mm256_or_si256(_mm256_cmpeq_epi64(db, one64), _mm256_set1_epi8(1));
    __m256i lv = iq1_levels(q[0] | (h0 & 7) << 8, q[1] | (h0 & 0x70) << 4, q[2] | (h1 & 7) << 8,
                            q[3] | (h1 & 0x70) << 4, delta);
    const int sc = rd16u(B->scales + 2 * (s >> 1)) >> (6 * (s & 1));   /* groups 2s, 2s + 1 */
    *mag = _mm256_abs_epi8(lv);
    *sgn = lv;
    *scl = scale16x2(2 * (sc & 7) + 1, 2 * ((sc >> 3) & 7) + 1);
}
static inline float ds_iq1_m(const blk_iq1_m *B) {   /* d: the top nibbles of the scale words */
    llk_half dh = 0;
    for (int j = 0; j < 4; j++) dh |= (llk_half)((rd16u(B->scales + 2 * j) >> 12) << (4 * j));
    return h2f(dh) * 0.125f;
}

/* i32 sums of one sub-block against activation bytes x */
#define IQ_SUB_DOT(m, g, c, x) _mm256_madd_epi16(_mm256_maddubs_epi16(m, _mm256_sign_epi8(x, g)), c)

/* The float step, per super-block, exactly the reference's (llk_ref_iq.c, dot_sb): the exact i32
 * lanes summed to one int, then s += dx * DSCALE * (float)sum, two multiplies and an add (no
 * FMA), s from 0.0f in super-block order. */
#define IQ_DOT(NAME, T, SUB, DSCALE, EXTRA)                                                      \
    static float NAME(const void *w, const void *a, int64_t n) {                                 \
        KQ(T);                                                                                   \
        float acc = 0.0f;                                                                        \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            PREFETCH_AHEAD(&blk[b], sizeof *blk);                                                \
            __m256i i0 = EXTRA(&blk[b], &ab[b]), i1 = _mm256_setzero_si256();                   \
            for (int s = 0; s < 8; s += 2) {                                                     \
                __m256i m0, g0, c0, m1, g1, c1;                                                  \
                SUB(&blk[b], s, &m0, &g0, &c0);                                                  \
                SUB(&blk[b], s + 1, &m1, &g1, &c1);                                              \
                i0 = _mm256_add_epi32(i0, IQ_SUB_DOT(m0, g0, c0, XK(b, 32 * s)));                \
                i1 = _mm256_add_epi32(i1, IQ_SUB_DOT(m1, g1, c1, XK(b, 32 * s + 32)));           \
            }                                                                                    \
            acc += ab[b].d * DSCALE(&blk[b]) * (float)hsum8i(_mm256_add_epi32(i0, i1));          \
        }                                                                                        \
        return acc;                                                                              \
    }

/* four tokens' i32 lanes -> their four sums (exact integers, any order) */
static inline __m128i hsum4x8i(__m256i a0, __m256i a1, __m256i a2, __m256i a3) {
    __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* 1 x 4 (matrix x matrix): each sub-block's lookups done once for four tokens; token t's float
 * step is the single dot's, lane t of 128-bit vectors (the same multiply, multiply, add each) */
#define IQ_DOT4(NAME, T, SUB, DSCALE, EXTRA)                                                     \
    static void NAME(const void *w, const void *a, size_t as, int64_t n, float *out) {           \
        const T *blk = (const T *)w;                                                             \
        const int64_t nb = n / 256;                                                              \
        __m128 acc = _mm_setzero_ps();                                                           \
        for (int64_t b = 0; b < nb; b++) {                                                       \
            const llk_block_q8_256 *A[4];                                                        \
            for (int t = 0; t < 4; t++) A[t] = (const llk_block_q8_256 *)((const uint8_t *)a + t * as) + b; \
            __m256i is[4];                                                                       \
            for (int t = 0; t < 4; t++) is[t] = EXTRA(&blk[b], A[t]);                            \
            for (int s = 0; s < 8; s++) {                                                        \
                __m256i m, g, c;                                                                 \
                SUB(&blk[b], s, &m, &g, &c);                                                     \
                for (int t = 0; t < 4; t++)                                                      \
                    is[t] = _mm256_add_epi32(is[t], IQ_SUB_DOT(m, g, c,                          \
                        _mm256_loadu_si256((const __m256i *)(A[t]->qs + 32 * s))));              \
            }                                                                                    \
            const __m128 dx = _mm_setr_ps(A[0]->d, A[1]->d, A[2]->d, A[3]->d);                   \
            const __m128 p = _mm_mul_ps(_mm_mul_ps(dx, _mm_set1_ps(DSCALE(&blk[b]))),            \
                                        _mm_cvtepi32_ps(hsum4x8i(is[0], is[1], is[2], is[3])));  \
            acc = _mm_add_ps(acc, p);                                                            \
        }                                                                                        \
        _mm_storeu_ps(out, acc);                                                                 \
    }

#define IQ_KERNELS(TY, EXTRA)                                     \
    IQ_DOT(dot_##TY, blk_##TY, sub_##TY, ds_##TY, EXTRA)          \
    IQ_DOT4(dot4_##TY, blk_##TY, sub_##TY, ds_##TY, EXTRA)

IQ_KERNELS(iq2_xxs, ex_none)
IQ_KERNELS(iq2_xs, ex_none)
IQ_KERNELS(iq2_s, ex_none)
IQ_KERNELS(iq3_xxs, ex_none)
IQ_KERNELS(iq3_s, ex_none)
IQ_KERNELS(iq1_s, ex_iq1_s)
IQ_KERNELS(iq1_m, ex_none)

/* --- TQ2_0: levels q - 1 with q = 0..2: maddubs(q, x), minus the activations' sum ------------- */

static float dot_tq2_0(const void *w, const void *a, int64_t n) {
    KQ(blk_tq2_0);
    const __m256i m2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        /* the -1 offset: minus the sum of the 16 block sums */
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab[b].bsums), ones));
        for (int c = 0; c < 2; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            __m256i p = _mm256_maddubs_epi16(_mm256_and_si256(v, m2), XK(b, 128 * c));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 2), m2), XK(b, 128 * c + 32)));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 4), m2), XK(b, 128 * c + 64)));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(v, 6), m2), XK(b, 128 * c + 96)));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));   /* i16: 4 x 2 x 2 x 127 fits */
        }
        acc += ab[b].d * h2f(blk[b].d) * (float)hsum8i(isum);   /* the reference's float step */
    }
    return acc;
}

/* --- TQ1_0: base-3 digits extracted in 16-bit lanes, ((v * 3^j mod 256) * 3) >> 8, then as TQ2_0 */

static inline __m256i tq1_digits(__m256i v16, __m256i pow3) {
    __m256i t = _mm256_and_si256(_mm256_mullo_epi16(v16, pow3), _mm256_set1_epi16(255));
    return _mm256_srli_epi16(_mm256_mullo_epi16(t, _mm256_set1_epi16(3)), 8);
}
/* two vectors of 16 u16 digits -> 32 bytes, a's first (packus works per 128-bit lane) */
static inline __m256i pack_digits(__m256i a, __m256i b) {
    return _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xd8);
}

static float dot_tq1_0(const void *w, const void *a, int64_t n) {
    KQ(blk_tq1_0);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i pqh = _mm256_setr_epi16(1, 1, 1, 1, 3, 3, 3, 3, 9, 9, 9, 9, 27, 27, 27, 27);
    static const short pow3[5] = {1, 3, 9, 27, 81};
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i isum = _mm256_sub_epi32(_mm256_setzero_si256(),
                                        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab[b].bsums), ones));
        __m256i lo = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)q));
        __m256i hi = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(q + 16)));
        __m256i mid = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(q + 32)));
        __m256i p = _mm256_setzero_si256();
        for (int j = 0; j < 5; j++) {   /* qs[0..32): elements 32j + m */
            __m256i pw = _mm256_set1_epi16(pow3[j]);
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(pack_digits(tq1_digits(lo, pw), tq1_digits(hi, pw)), XK(b, 32 * j)));
        }
        for (int j = 0; j < 4; j += 2) {   /* qs[32..48): elements 160 + 16j + m, two digits a time */
            __m256i d = pack_digits(tq1_digits(mid, _mm256_set1_epi16(pow3[j])), tq1_digits(mid, _mm256_set1_epi16(pow3[j + 1])));
            p = _mm256_add_epi16(p, _mm256_maddubs_epi16(d, XK(b, 160 + 16 * j)));
        }
        /* digit 4 of qs[32..48) (elements 224..239), then qh (240 + 4j + m) */
        __m256i vqh = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)rd32u(blk[b].qh)));
        __m256i d = pack_digits(tq1_digits(mid, _mm256_set1_epi16(81)), tq1_digits(vqh, pqh));
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(d, XK(b, 224)));   /* i16: 8 x 2 x 2 x 127 fits */
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, ones));
        acc += ab[b].d * h2f(blk[b].d) * (float)hsum8i(isum);   /* the reference's float step */
    }
    return acc;
}

/* --- MXFP4: 32-blocks against q8_32 activations, table levels as IQ4_NL's ----------------------
 * The reference's order (llk_ref_iq.c, dot_mxfp4): block b's exact integer dot, times its scale
 * product, is added to lane b % 8 of eight float sums; a group of 8 blocks is one vector step (the
 * 8 blocks' i32 lanes reduced to 8 sums, then per lane the same two multiplies and add, no FMA);
 * the blocks of a last partial group are added scalar, each to its lane; then hsum8's tree. */

static inline __m256i mx_levels(const blk_mxfp4 *B, __m256i lut, __m256i x) {
    return dot_ss(_mm256_shuffle_epi8(lut, nib32(B->qs)), x);
}
static float dot_mxfp4(const void *w, const void *a, int64_t n) {
    const blk_mxfp4 *blk = (const blk_mxfp4 *)w;
    const llk_block_q8_32x8 *ag = (const llk_block_q8_32x8 *)a;
    const __m128i t = _mm_loadu_si128((const __m128i *)llk_mxfp4_values);
    const __m256i lut = _mm256_set_m128i(t, t);
    const int64_t nb = n / 32;
    __m256 acc = _mm256_setzero_ps();
    int64_t g = 0;
    for (; 8 * g + 8 <= nb; g++) {
        const blk_mxfp4 *B = blk + 8 * g;
        const llk_block_q8_32x8 *G = ag + g;
        PREFETCH_AHEAD(B, 8 * sizeof *B);
        __m256i p[8];
        for (int i = 0; i < 8; i++) p[i] = mx_levels(&B[i], lut, _mm256_loadu_si256((const __m256i *)G->qs[i]));
        const __m256 e = _mm256_setr_ps(llk_e8m0_half(B[0].e), llk_e8m0_half(B[1].e), llk_e8m0_half(B[2].e),
                                        llk_e8m0_half(B[3].e), llk_e8m0_half(B[4].e), llk_e8m0_half(B[5].e),
                                        llk_e8m0_half(B[6].e), llk_e8m0_half(B[7].e));
        acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(e, _mm256_loadu_ps(G->d)), _mm256_cvtepi32_ps(hsum8x8i(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]))));
    }
    float l[8];
    _mm256_storeu_ps(l, acc);
    for (int64_t b = 8 * g; b < nb; b++) {
        int sum = hsum8i(mx_levels(&blk[b], lut, _mm256_loadu_si256((const __m256i *)ACT_Q(ag, b))));
        l[b & 7] += llk_e8m0_half(blk[b].e) * ACT_D(ag, b) * (float)sum;
    }
    return llk_sum8(l);
}

static void llk_fill_256_iq(llk_kernels *k) {
    k->dot4[LLK_TYPE_IQ2_XXS] = dot4_iq2_xxs;
    k->dot4[LLK_TYPE_IQ2_XS] = dot4_iq2_xs;
    k->dot4[LLK_TYPE_IQ2_S] = dot4_iq2_s;
    k->dot4[LLK_TYPE_IQ3_XXS] = dot4_iq3_xxs;
    k->dot4[LLK_TYPE_IQ3_S] = dot4_iq3_s;
    k->dot4[LLK_TYPE_IQ1_S] = dot4_iq1_s;
    k->dot4[LLK_TYPE_IQ1_M] = dot4_iq1_m;
    k->dot[LLK_TYPE_IQ1_S] = dot_iq1_s;
    k->dot[LLK_TYPE_IQ1_M] = dot_iq1_m;
    k->dot[LLK_TYPE_TQ1_0] = dot_tq1_0;
    k->dot[LLK_TYPE_TQ2_0] = dot_tq2_0;
    k->dot[LLK_TYPE_MXFP4] = dot_mxfp4;
    k->dot[LLK_TYPE_IQ2_XXS] = dot_iq2_xxs;
    k->dot[LLK_TYPE_IQ2_XS] = dot_iq2_xs;
    k->dot[LLK_TYPE_IQ2_S] = dot_iq2_s;
    k->dot[LLK_TYPE_IQ3_XXS] = dot_iq3_xxs;
    k->dot[LLK_TYPE_IQ3_S] = dot_iq3_s;
}

#endif /* LLK_SIMD256_IQ_H */
