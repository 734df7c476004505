/* llk_simd256.h — the 256-bit kernels, written once and compiled twice: by llk_avx2.c (AVX2 +
 * FMA + F16C) and by llk_avx512.c (AVX-512 VL, where the includer's dot_us() is VNNI's vpdpbusd
 * and the compiler may use 32 registers). The includer defines, before including:
 *   dot_us(u, s)    8 x i32: sums of 4 adjacent u8 x s8 products (no saturation at our ranges)
 *   bits32_x16(qh)  32 bytes: 0x10 where bit i of the 4 bytes qh is set
 * Each kernel matches its twin in llk_ref.c; integer sums are exact, float order differs.
 *
 * Shape of a quantized dot: unpack a block's levels to bytes, multiply with the signed activation
 * bytes (maddubs u8 x s8 -> i16 pairs, or dot_us), widen with madd (by ones or by the group's
 * integer scale), then one float FMA per block with the product of the two block scales.
 */
#ifndef LLK_SIMD256_H
#define LLK_SIMD256_H

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
/* s8 x s8 -> 8 x i32 (sign moved onto the activations) */
static inline __m256i dot_ss(__m256i w, __m256i x) {
    return dot_us(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
}

/* Software prefetch PF_DIST bytes ahead of the weights a group or super-block reads: with both
 * cores streaming, the hardware prefetchers alone leave the 4-bit kernels short of bandwidth. */
#define PF_DIST 4096
#define PREFETCH_AHEAD(p, bytes)                                                                  \
    for (size_t pf_ = 0; pf_ < (size_t)(bytes); pf_ += 64)                                        \
        _mm_prefetch((const char *)(p) + PF_DIST + pf_, _MM_HINT_T0)

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
    llk_block_q8_32x8 *a = (llk_block_q8_32x8 *)out;
    const int64_t nb = n / 32;
    memset(&a[(nb + 7) / 8 - 1], 0, sizeof *a);   /* the last group's unused blocks stay zero */
    for (int64_t b = 0; b < nb; b++, x += 32) {
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 32; i += 8) m = absmax8(m, _mm256_loadu_ps(x + i));
        float amax = hmax8(m);
        float d = amax >= LLK_ACT_TINY ? amax / 127.0f : 0.0f, id = amax >= LLK_ACT_TINY ? 127.0f / amax : 0.0f;
        int sum = hsum8i(q8_32(x, id, ACT_Q(a, b)));
        ACT_D(a, b) = d;
        ACT_S(a, b) = d * (float)sum;
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

/* The float types (contract in llk_ref.c): four accumulators are lanes 0-7, 8-15, 16-23, 24-31 of
 * the 32; FLOAT_DOT_FINISH takes the remaining whole 8-float steps into their lane group, folds
 * (s0 + s2) + (s1 + s3), reduces, and adds the last n % 8 products one by one. */
#define FLOAT_DOT_FINISH(LOAD8, W1)                                                              \
    for (; i + 8 <= n; i += 8) {                                                                  \
        const __m256 w_ = LOAD8(i), x_ = _mm256_loadu_ps(x + i);                                  \
        switch ((i >> 3) & 3) {                                                                   \
        case 0: s0 = _mm256_fmadd_ps(w_, x_, s0); break;                                          \
        case 1: s1 = _mm256_fmadd_ps(w_, x_, s1); break;                                          \
        case 2: s2 = _mm256_fmadd_ps(w_, x_, s2); break;                                          \
        default: s3 = _mm256_fmadd_ps(w_, x_, s3); break;                                         \
        }                                                                                         \
    }                                                                                             \
    float s = hsum8(_mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s1, s3)));                 \
    for (; i < n; i++) s += W1(i) * x[i];                                                         \
    return s;

#define FLOAT_DOT_256(NAME, LOAD8, W1)                                                            \
    static float NAME(const void *w, const void *a, int64_t n) {                                  \
        const uint8_t *p = (const uint8_t *)w; const float *x = (const float *)a;                 \
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                \
        int64_t i = 0;                                                                            \
        for (; i + 32 <= n; i += 32) {                                                            \
            s0 = _mm256_fmadd_ps(LOAD8(i), _mm256_loadu_ps(x + i), s0);                           \
            s1 = _mm256_fmadd_ps(LOAD8(i + 8), _mm256_loadu_ps(x + i + 8), s1);                   \
            s2 = _mm256_fmadd_ps(LOAD8(i + 16), _mm256_loadu_ps(x + i + 16), s2);                 \
            s3 = _mm256_fmadd_ps(LOAD8(i + 24), _mm256_loadu_ps(x + i + 24), s3);                 \
        }                                                                                         \
        FLOAT_DOT_FINISH(LOAD8, W1)                                                               \
    }

#define F32X8(i) _mm256_loadu_ps((const float *)(p + 4 * (i)))
#define F16X8(i) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * (i))))
#define BF16X8(i) _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * (i)))), 16))
static inline float f32_at(const uint8_t *p, int64_t i) { float v; memcpy(&v, p + 4 * i, 4); return v; }
static inline float f16_at(const uint8_t *p, int64_t i) { llk_half h; memcpy(&h, p + 2 * i, 2); return llk_h2f(h); }
static inline float bf16_at(const uint8_t *p, int64_t i) { uint16_t h; memcpy(&h, p + 2 * i, 2); return llk_bf2f(h); }
#define F32_1(i) f32_at(p, i)
#define F16_1(i) f16_at(p, i)
#define BF16_1(i) bf16_at(p, i)

FLOAT_DOT_256(dot_f32, F32X8, F32_1)
FLOAT_DOT_256(dot_f16, F16X8, F16_1)
FLOAT_DOT_256(dot_bf16, BF16X8, BF16_1)

static void deq_f16(const void *x, float *y, int64_t n) {
    const uint16_t *p = (const uint16_t *)x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + i))));
    for (; i < n; i++) { llk_half h; memcpy(&h, p + i, 2); y[i] = llk_h2f(h); }
}

/* --- legacy 32-blocks -------------------------------------------------------------------------
 * Eight blocks at a time, matching the activation groups: the eight products of block scales
 * dw * dx come from one vector multiply (dw gathered from the weight blocks, dx one load), and the
 * per-block terms that are not integer dots (Q4_1's m * s; the offsets -8 / -16, written as
 * offset * dw * s with s = dx * sum(qx)) from one vector FMA. Per block there remain the level
 * unpacking, the integer dot, a lane broadcast of its scale and an FMA into one of four
 * accumulators (the FMA latency would bound a single chain). */

/* 8 float16 fields `stride` bytes apart -> 8 floats (cnt < 8: the rest are 0) */
static inline __m256 gather_h8(const uint8_t *p, size_t stride, int cnt) {
    if (cnt == 8) {
        uint64_t lo = 0, hi = 0;
        for (int i = 0; i < 4; i++) {
            uint16_t h0, h1;
            memcpy(&h0, p + i * stride, 2); memcpy(&h1, p + (i + 4) * stride, 2);
            lo |= (uint64_t)h0 << (16 * i); hi |= (uint64_t)h1 << (16 * i);
        }
        return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
    }
    /* a partial group (a row's tail): inserted in a register, never through memory (a store
     * of 16-bit halves read back as one vector stalls store forwarding) */
    __m128i v = _mm_setzero_si128();
    uint16_t h;
    switch (cnt) {
    case 7: memcpy(&h, p + 6 * stride, 2); v = _mm_insert_epi16(v, h, 6); /* fall through */
    case 6: memcpy(&h, p + 5 * stride, 2); v = _mm_insert_epi16(v, h, 5); /* fall through */
    case 5: memcpy(&h, p + 4 * stride, 2); v = _mm_insert_epi16(v, h, 4); /* fall through */
    case 4: memcpy(&h, p + 3 * stride, 2); v = _mm_insert_epi16(v, h, 3); /* fall through */
    case 3: memcpy(&h, p + 2 * stride, 2); v = _mm_insert_epi16(v, h, 2); /* fall through */
    case 2: memcpy(&h, p + 1 * stride, 2); v = _mm_insert_epi16(v, h, 1); /* fall through */
    case 1: memcpy(&h, p, 2); v = _mm_insert_epi16(v, h, 0); /* fall through */
    default: break;
    }
    return _mm256_cvtph_ps(v);
}


/* The 8 exact totals of 8 vectors of i32 partial sums, in order (block j of a group in lane j). */
static inline __m256i hsum8x8i(__m256i p0, __m256i p1, __m256i p2, __m256i p3,
                               __m256i p4, __m256i p5, __m256i p6, __m256i p7) {
    __m256i q0 = _mm256_hadd_epi32(_mm256_hadd_epi32(p0, p1), _mm256_hadd_epi32(p2, p3));
    __m256i q1 = _mm256_hadd_epi32(_mm256_hadd_epi32(p4, p5), _mm256_hadd_epi32(p6, p7));
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* block i's integer dot partial sums, or zeros past the row's last block */
#define LEG_P(LEVELS, i) ((i) < cnt ? LEVELS(&B[i], _mm256_loadu_si256((const __m256i *)G->qs[i])) \
                                    : _mm256_setzero_si256())

/* The contract of llk_ref.c: a group's 8 block totals I in one vector, then one FMA with the
 * group's scale products into lane j = block j; the offsets / mins go through accx.
 * CF(B, dw, cnt): the group's coefficients of the activation sums (see cf_q4_0). */
#define LEGACY_DOT(NAME, T, LEVELS, CF)                                                       \
    static float NAME(const void *w, const void *a, int64_t n) {                                 \
        const T *blk = (const T *)w;                                                             \
        const llk_block_q8_32x8 *ag = (const llk_block_q8_32x8 *)a;                              \
        const int64_t nb = n / 32;                                                               \
        __m256 acc = _mm256_setzero_ps(), accx = acc;                                            \
        for (int64_t g = 0; 8 * g < nb; g++) {                                                   \
            const T *B = blk + 8 * g;                                                            \
            const llk_block_q8_32x8 *G = ag + g;                                                 \
            const int cnt = nb - 8 * g < 8 ? (int)(nb - 8 * g) : 8;                              \
            PREFETCH_AHEAD(B, 8 * sizeof(T));                                                    \
            __m256 dw = gather_h8((const uint8_t *)B + offsetof(T, d), sizeof(T), cnt);          \
            __m256 S = _mm256_mul_ps(dw, _mm256_loadu_ps(G->d));                                 \
            accx = _mm256_fmadd_ps(CF(B, dw, cnt), _mm256_loadu_ps(G->s), accx);                 \
            __m256i I = hsum8x8i(LEG_P(LEVELS, 0), LEG_P(LEVELS, 1), LEG_P(LEVELS, 2),           \
                                 LEG_P(LEVELS, 3), LEG_P(LEVELS, 4), LEG_P(LEVELS, 5),           \
                                 LEG_P(LEVELS, 6), LEG_P(LEVELS, 7));                            \
            acc = _mm256_fmadd_ps(S, _mm256_cvtepi32_ps(I), acc);                                \
        }                                                                                        \
        return hsum8(_mm256_add_ps(acc, accx));                                                  \
    }

static inline __m256i iq4_lut(void) {
    __m128i t = _mm_loadu_si128((const __m128i *)llk_iq4_values);
    return _mm256_set_m128i(t, t);
}

static inline __m256i lv_q4_0(const blk_q4_0 *B, __m256i x) { return dot_us(nib32(B->qs), x); }
static inline __m256i lv_q4_1(const blk_q4_1 *B, __m256i x) { return dot_us(nib32(B->qs), x); }
static inline __m256i lv_q5_0(const blk_q5_0 *B, __m256i x) {
    return dot_us(_mm256_or_si256(nib32(B->qs), bits32_x16(B->qh)), x);
}
static inline __m256i lv_q5_1(const blk_q5_1 *B, __m256i x) {
    return dot_us(_mm256_or_si256(nib32(B->qs), bits32_x16(B->qh)), x);
}
static inline __m256i lv_q8_0(const blk_q8_0 *B, __m256i x) {
    return dot_ss(_mm256_loadu_si256((const __m256i *)B->qs), x);
}
static inline __m256i lv_iq4_nl(const blk_iq4_nl *B, __m256i x) {
    return dot_ss(_mm256_shuffle_epi8(iq4_lut(), nib32(B->qs)), x);
}

/* The per-block terms that are not integer dots, as coefficients of the activation sums s:
 * extra = sum_b cf_b * s_b, with cf = -offset * dw (Q4_0, Q5_0), m (Q4_1, Q5_1) or 0.
 * Blocks past cnt have s = 0. */
static inline __m256 cf_q4_0(const blk_q4_0 *B, __m256 dw, int cnt) { (void)B; (void)cnt; return _mm256_mul_ps(dw, _mm256_set1_ps(-8.0f)); }
static inline __m256 cf_q5_0(const blk_q5_0 *B, __m256 dw, int cnt) { (void)B; (void)cnt; return _mm256_mul_ps(dw, _mm256_set1_ps(-16.0f)); }
static inline __m256 cf_q4_1(const blk_q4_1 *B, __m256 dw, int cnt) { (void)dw; return gather_h8((const uint8_t *)B + offsetof(blk_q4_1, m), sizeof *B, cnt); }
static inline __m256 cf_q5_1(const blk_q5_1 *B, __m256 dw, int cnt) { (void)dw; return gather_h8((const uint8_t *)B + offsetof(blk_q5_1, m), sizeof *B, cnt); }
static inline __m256 cf_q8_0(const blk_q8_0 *B, __m256 dw, int cnt) { (void)B; (void)dw; (void)cnt; return _mm256_setzero_ps(); }
static inline __m256 cf_iq4_nl(const blk_iq4_nl *B, __m256 dw, int cnt) { (void)B; (void)dw; (void)cnt; return _mm256_setzero_ps(); }

LEGACY_DOT(dot_q4_0, blk_q4_0, lv_q4_0, cf_q4_0)
LEGACY_DOT(dot_q4_1, blk_q4_1, lv_q4_1, cf_q4_1)
LEGACY_DOT(dot_q5_0, blk_q5_0, lv_q5_0, cf_q5_0)
LEGACY_DOT(dot_q5_1, blk_q5_1, lv_q5_1, cf_q5_1)
LEGACY_DOT(dot_q8_0, blk_q8_0, lv_q8_0, cf_q8_0)
LEGACY_DOT(dot_iq4_nl, blk_iq4_nl, lv_iq4_nl, cf_iq4_nl)

/* --- 1 x 4 register-blocked legacy dots (matrix x matrix) ----------------------------------------
 * out[t] = dot(w, activation row t) for 4 rows `as` bytes apart: each block's levels are unpacked
 * once and used for four tokens. UNPACK gives the level bytes, DOTX the integer dot with one
 * token's bytes. */

/* The 8 exact block totals of one group (B, its activations G[0..3], cnt blocks) for four tokens
 * at 256 bits: each block pair unpacked once, hadd-reduced per token (no work past cnt). */
#define LEG4_TOTALS(UNPACK, DOTX, I)                                                             \
    do {                                                                                         \
        __m256i h_[4][4];                                                                        \
        for (int k = 0; k < 4; k++) {                                                            \
            const __m256i z = _mm256_setzero_si256();                                            \
            if (2 * k >= cnt) {                                                                  \
                for (int t = 0; t < 4; t++) h_[t][k] = z;                                        \
                continue;                                                                        \
            }                                                                                    \
            const __m256i u0 = UNPACK(&B[2 * k]);                                                \
            const __m256i u1 = 2 * k + 1 < cnt ? UNPACK(&B[2 * k + 1]) : z;                      \
            for (int t = 0; t < 4; t++)                                                          \
                h_[t][k] = _mm256_hadd_epi32(                                                    \
                    DOTX(u0, _mm256_loadu_si256((const __m256i *)G[t]->qs[2 * k])),              \
                    DOTX(u1, _mm256_loadu_si256((const __m256i *)G[t]->qs[2 * k + 1])));         \
        }                                                                                        \
        for (int t = 0; t < 4; t++) {                                                            \
            __m256i q0 = _mm256_hadd_epi32(h_[t][0], h_[t][1]), q1 = _mm256_hadd_epi32(h_[t][2], h_[t][3]); \
            (I)[t] = _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20),                   \
                                      _mm256_permute2x128_si256(q0, q1, 0x31));                  \
        }                                                                                        \
    } while (0)

#define LEGACY_DOT4(NAME, T, UNPACK, DOTX, CF)                                                   \
    static void NAME(const void *w, const void *a, size_t as, int64_t n, float *out) {           \
        const T *blk = (const T *)w;                                                             \
        const uint8_t *a8 = (const uint8_t *)a;                                                  \
        const int64_t nb = n / 32;                                                               \
        __m256 c[4], cx[4];                                                                      \
        for (int t = 0; t < 4; t++) c[t] = cx[t] = _mm256_setzero_ps();                          \
        for (int64_t g = 0; 8 * g < nb; g++) {                                                   \
            const T *B = blk + 8 * g;                                                            \
            const int cnt = nb - 8 * g < 8 ? (int)(nb - 8 * g) : 8;                              \
            const llk_block_q8_32x8 *G[4];                                                       \
            for (int t = 0; t < 4; t++) G[t] = (const llk_block_q8_32x8 *)(a8 + t * as) + g;     \
            __m256 dw = gather_h8((const uint8_t *)B + offsetof(T, d), sizeof(T), cnt);          \
            const __m256 cf = CF(B, dw, cnt);                                                    \
            __m256i I[4];                                                                        \
            LEG4_TOTALS(UNPACK, DOTX, I);                                                        \
            for (int t = 0; t < 4; t++) {                                                        \
                c[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_loadu_ps(G[t]->d)), _mm256_cvtepi32_ps(I[t]), c[t]); \
                cx[t] = _mm256_fmadd_ps(cf, _mm256_loadu_ps(G[t]->s), cx[t]);                    \
            }                                                                                    \
        }                                                                                        \
        for (int t = 0; t < 4; t++) out[t] = hsum8(_mm256_add_ps(c[t], cx[t]));                  \
    }

static inline __m256i un_q4_0(const blk_q4_0 *B) { return nib32(B->qs); }
static inline __m256i un_q4_1(const blk_q4_1 *B) { return nib32(B->qs); }
static inline __m256i un_q5_0(const blk_q5_0 *B) { return _mm256_or_si256(nib32(B->qs), bits32_x16(B->qh)); }
static inline __m256i un_q5_1(const blk_q5_1 *B) { return _mm256_or_si256(nib32(B->qs), bits32_x16(B->qh)); }
static inline __m256i un_q8_0(const blk_q8_0 *B) { return _mm256_loadu_si256((const __m256i *)B->qs); }
static inline __m256i un_iq4_nl(const blk_iq4_nl *B) { return _mm256_shuffle_epi8(iq4_lut(), nib32(B->qs)); }

LEGACY_DOT4(dot4_q4_0, blk_q4_0, un_q4_0, dot_us, cf_q4_0)
LEGACY_DOT4(dot4_q4_1, blk_q4_1, un_q4_1, dot_us, cf_q4_1)
LEGACY_DOT4(dot4_q5_0, blk_q5_0, un_q5_0, dot_us, cf_q5_0)
LEGACY_DOT4(dot4_q5_1, blk_q5_1, un_q5_1, dot_us, cf_q5_1)
LEGACY_DOT4(dot4_q8_0, blk_q8_0, un_q8_0, dot_ss, cf_q8_0)
LEGACY_DOT4(dot4_iq4_nl, blk_iq4_nl, un_iq4_nl, dot_ss, cf_iq4_nl)

#include "llk_simd256_k.h"
#include "llk_simd256_iq.h"

/* --- row dequantization of the hot types --------------------------------------------------------
 * Bit-identical to the reference (and to gguf.quants): the same float products in the same order,
 * separate multiplies and adds (no FMA contraction). */

static inline __m256 i8x8_f(__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); }
static inline void store32(float *y, __m256i q8, __m256 d) {   /* y[0..32) = d * q (i8 levels) */
    __m128i lo = _mm256_castsi256_si128(q8), hi = _mm256_extracti128_si256(q8, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(d, i8x8_f(lo)));
    _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, i8x8_f(_mm_srli_si128(lo, 8))));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, i8x8_f(hi)));
    _mm256_storeu_ps(y + 24, _mm256_mul_ps(d, i8x8_f(_mm_srli_si128(hi, 8))));
}
static inline void store32_add(float *y, __m256i q8, __m256 d, __m256 m) {   /* d * q + m */
    __m128i lo = _mm256_castsi256_si128(q8), hi = _mm256_extracti128_si256(q8, 1);
    _mm256_storeu_ps(y, _mm256_add_ps(_mm256_mul_ps(d, i8x8_f(lo)), m));
    _mm256_storeu_ps(y + 8, _mm256_add_ps(_mm256_mul_ps(d, i8x8_f(_mm_srli_si128(lo, 8))), m));
    _mm256_storeu_ps(y + 16, _mm256_add_ps(_mm256_mul_ps(d, i8x8_f(hi)), m));
    _mm256_storeu_ps(y + 24, _mm256_add_ps(_mm256_mul_ps(d, i8x8_f(_mm_srli_si128(hi, 8))), m));
}

static void deq_q4_0(const void *x, float *y, int64_t n) {
    const blk_q4_0 *blk = (const blk_q4_0 *)x;
    for (int64_t b = 0; b < n / 32; b++, y += 32)
        store32(y, _mm256_sub_epi8(nib32(blk[b].qs), _mm256_set1_epi8(8)), _mm256_set1_ps(h2f(blk[b].d)));
}
static void deq_q4_1(const void *x, float *y, int64_t n) {
    const blk_q4_1 *blk = (const blk_q4_1 *)x;
    for (int64_t b = 0; b < n / 32; b++, y += 32)
        store32_add(y, nib32(blk[b].qs), _mm256_set1_ps(h2f(blk[b].d)), _mm256_set1_ps(h2f(blk[b].m)));
}
static void deq_q8_0(const void *x, float *y, int64_t n) {
    const blk_q8_0 *blk = (const blk_q8_0 *)x;
    for (int64_t b = 0; b < n / 32; b++, y += 32)
        store32(y, _mm256_loadu_si256((const __m256i *)blk[b].qs), _mm256_set1_ps(h2f(blk[b].d)));
}
static void deq_q4_K(const void *x, float *y, int64_t n) {
    const blk_q4_K *blk = (const blk_q4_K *)x;
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t b = 0; b < n / 256; b++, y += 256) {
        uint32_t scw[2], mnw[2];
        uint8_t sc[8], mn[8];
        k4_unpack(blk[b].scales, scw, mnw);
        memcpy(sc, scw, 8); memcpy(mn, mnw, 8);
        float d = h2f(blk[b].d), dm = h2f(blk[b].dmin);
        for (int c = 0; c < 4; c++) {
            __m256i v = _mm256_loadu_si256((const __m256i *)(blk[b].qs + 32 * c));
            store32_add(y + 64 * c, _mm256_and_si256(v, m4), _mm256_set1_ps(d * (float)sc[2 * c]),
                        _mm256_set1_ps(-(dm * (float)mn[2 * c])));
            store32_add(y + 64 * c + 32, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4),
                        _mm256_set1_ps(d * (float)sc[2 * c + 1]), _mm256_set1_ps(-(dm * (float)mn[2 * c + 1])));
        }
    }
}
static void deq_q6_K(const void *x, float *y, int64_t n) {
    const blk_q6_K *blk = (const blk_q6_K *)x;
    const __m256i k32 = _mm256_set1_epi8(32);
    for (int64_t b = 0; b < n / 256; b++, y += 256) {
        const float d = h2f(blk[b].d);
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_half(&blk[b], h, q);
            for (int s = 0; s < 4; s++) {
                __m256i v = _mm256_sub_epi8(q[s], k32);                 /* levels -32..31 */
                float *o = y + 128 * h + 32 * s;
                const int g = 8 * h + 2 * s;
                __m128i lo = _mm256_castsi256_si128(v), hi = _mm256_extracti128_si256(v, 1);
                __m256 d0 = _mm256_set1_ps(d * (float)blk[b].scales[g]), d1 = _mm256_set1_ps(d * (float)blk[b].scales[g + 1]);
                _mm256_storeu_ps(o, _mm256_mul_ps(d0, i8x8_f(lo)));
                _mm256_storeu_ps(o + 8, _mm256_mul_ps(d0, i8x8_f(_mm_srli_si128(lo, 8))));
                _mm256_storeu_ps(o + 16, _mm256_mul_ps(d1, i8x8_f(hi)));
                _mm256_storeu_ps(o + 24, _mm256_mul_ps(d1, i8x8_f(_mm_srli_si128(hi, 8))));
            }
        }
    }
}

/* --- attention inner loops ------------------------------------------------------------------- */

/* The float16 scale of the Q8_0 block holding head value i (F16C: the same float as llk_h2f). */
static inline __m256 q8_scale8(const uint8_t *row, int i) {
    uint16_t h;
    memcpy(&h, row + (size_t)(i >> 5) * 34, 2);
    return _mm256_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))));
}
/* Eight head values from i on (i % 8 == 0) as floats; a Q8_0 cache gives d * q, exact. */
static inline __m256 cache8(const uint8_t *row, int i, const int kind) {
    if (kind == LLK_KV_Q8_0) {
        __m128i q = _mm_loadl_epi64((const __m128i *)(row + llk_kv_off(i, kind)));
        return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), q8_scale8(row, i));
    }
    return kind == LLK_KV_F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + 2 * i)))
                              : _mm256_loadu_ps((const float *)(row + 4 * i));
}
static inline float cache1(const uint8_t *row, int i, const int kind) {
    if (kind == LLK_KV_Q8_0) return llk_kv_q8_scale(row, i) * (float)(int8_t)row[llk_kv_off(i, kind)];
    if (kind == LLK_KV_F16) { llk_half h; memcpy(&h, row + 2 * i, 2); return llk_h2f(h); }
    float v; memcpy(&v, row + 4 * i, 4); return v;
}

/* Cache rows are rb bytes apart and a group of query heads reads only its KV head's slice of
 * each: a stride the hardware prefetchers follow poorly (generation at depth 2000 ran 30% faster
 * or slower with the caches' alignment). So the kernels prefetch the slice ~24 KB of rows ahead
 * (SmolLM2: 64 rows; tg64 @ d2000 at 1 / 2 threads ~100 / ~160 -> ~160 / ~250 tok/s). */
static inline size_t attn_prefetch_bytes(size_t rb) {
    size_t rows = 24576 / (rb ? rb : 1);
    return (rows < 8 ? 8 : rows > 64 ? 64 : rows) * rb;
}

/* The attention kernels take the group size (and pass width) as arguments that must fold to
 * constants: a partly specialised clone kept the group's sums in memory. */
#if defined(__GNUC__) || defined(__clang__)
#define ATTN_INLINE static inline __attribute__((always_inline))
#else
#define ATTN_INLINE static __forceinline
#endif

/* The sums of a0..a3 (8 lanes each) in lanes 0..3. */
static inline __m128 hsum4x8(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* One K row's G scaled scores into out[a * ld + j] and the running maxima; at the end, the maxima
 * into mx (both kdots kernels). */
ATTN_INLINE void kdots_put(__m128 s, const int G, float *out, int64_t ld, int64_t j, __m128 *vmx) {
    float t[4];
    _mm_storeu_ps(t, s);
    for (int a = 0; a < G; a++) out[a * ld + j] = t[a];
    *vmx = _mm_max_ps(*vmx, s);
}
ATTN_INLINE void kdots_max(__m128 vmx, const int G, float *mx) {
    float m[4];
    _mm_storeu_ps(m, vmx);
    for (int a = 0; a < G; a++) mx[a] = m[a];
}

/* G query heads against each K row: the row is converted once, G FMAs per 8 values, and the G
 * sums come out of one horizontal reduction. G and kind are constants at each call site. The
 * contract of llk_ref.c: even 8-value steps in a[.][0], odd ones in a[.][1] (lanes 0-15), folded,
 * then hsum4x8 (llk_sum8_adj's tree); the last hd % 8 products after, one at a time. */
ATTN_INLINE void kdots_grp(const float *q, const int G, const uint8_t *k, size_t rb, int64_t n,
                             int hd, float scale, float *out, int64_t ld, float *mx, const int kind) {
    const int h8 = hd & ~7, bytes = (int)llk_kv_head_bytes(hd, kind);
    const size_t pf = attn_prefetch_bytes(rb);
    const __m128 sc = _mm_set1_ps(scale);
    __m128 vmx = _mm_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j++) {
        const uint8_t *row = k + (size_t)j * rb;
        for (int b = 0; b < bytes; b += 64) _mm_prefetch((const char *)row + pf + b, _MM_HINT_T0);
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        int i = 0;
        for (; i + 16 <= h8; i += 16) {
            const __m256 kv = cache8(row, i, kind), kw = cache8(row, i + 8, kind);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, a0);
            b0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i + 8), kw, b0);
            if (G > 1) { a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + hd + i), kv, a1);
                         b1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + hd + i + 8), kw, b1); }
            if (G > 2) { a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * hd + i), kv, a2);
                         b2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * hd + i + 8), kw, b2); }
            if (G > 3) { a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * hd + i), kv, a3);
                         b3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * hd + i + 8), kw, b3); }
        }
        if (i < h8) {   /* one more even step */
            const __m256 kv = cache8(row, i, kind);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + i), kv, a0);
            if (G > 1) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + hd + i), kv, a1);
            if (G > 2) a2 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 2 * hd + i), kv, a2);
            if (G > 3) a3 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 3 * hd + i), kv, a3);
        }
        float t[4];
        _mm_storeu_ps(t, hsum4x8(_mm256_add_ps(a0, b0), _mm256_add_ps(a1, b1), _mm256_add_ps(a2, b2),
                                 _mm256_add_ps(a3, b3)));
        for (i = h8; i < hd; i++) {
            const float kv = cache1(row, i, kind);
            for (int a = 0; a < G; a++) t[a] += q[a * hd + i] * kv;
        }
        kdots_put(_mm_mul_ps(_mm_loadu_ps(t), sc), G, out, ld, j, &vmx);
    }
    kdots_max(vmx, G, mx);
}

/* out[a] += sum_j p[a][j] * V row j, 16 values of the head at a time: the G x 2 sums stay in
 * registers over all rows, each row's 16 values are converted once for the group. */
ATTN_INLINE void vacc_grp(const float *p, int64_t ld, const int G, const uint8_t *v, size_t rb,
                            int64_t n, int hd, float *out, int64_t os, const int kind) {
    const size_t pf = attn_prefetch_bytes(rb);
    int i = 0;
    for (; i + 16 <= hd; i += 16) {
        __m256 c[4][2];
        for (int a = 0; a < G; a++) {
            c[a][0] = _mm256_loadu_ps(out + a * os + i);
            c[a][1] = _mm256_loadu_ps(out + a * os + i + 8);
        }
        for (int64_t j = 0; j < n; j++) {
            const uint8_t *row = v + (size_t)j * rb;
            _mm_prefetch((const char *)row + pf + llk_kv_off(i, kind), _MM_HINT_T0);
            const __m256 v0 = cache8(row, i, kind), v1 = cache8(row, i + 8, kind);
            for (int a = 0; a < G; a++) {
                const __m256 pj = _mm256_broadcast_ss(p + a * ld + j);
                c[a][0] = _mm256_fmadd_ps(pj, v0, c[a][0]);
                c[a][1] = _mm256_fmadd_ps(pj, v1, c[a][1]);
            }
        }
        for (int a = 0; a < G; a++) {
            _mm256_storeu_ps(out + a * os + i, c[a][0]);
            _mm256_storeu_ps(out + a * os + i + 8, c[a][1]);
        }
    }
    for (; i + 8 <= hd; i += 8) {
        __m256 c[4];
        for (int a = 0; a < G; a++) c[a] = _mm256_loadu_ps(out + a * os + i);
        for (int64_t j = 0; j < n; j++) {
            const __m256 v0 = cache8(v + (size_t)j * rb, i, kind);
            for (int a = 0; a < G; a++)
                c[a] = _mm256_fmadd_ps(_mm256_broadcast_ss(p + a * ld + j), v0, c[a]);
        }
        for (int a = 0; a < G; a++) _mm256_storeu_ps(out + a * os + i, c[a]);
    }
    for (; i < hd; i++)
        for (int64_t j = 0; j < n; j++) {
            const float vv = cache1(v + (size_t)j * rb, i, kind);
            for (int a = 0; a < G; a++) out[a * os + i] = fmaf(p[a * ld + j], vv, out[a * os + i]);
        }
}

#define ATTN_BY_G(CALL)                                                                         \
    switch (g) {                                                                                \
    case 1: CALL(1); break;                                                                     \
    case 2: CALL(2); break;                                                                     \
    case 3: CALL(3); break;                                                                     \
    default: CALL(4); break;                                                                    \
    }
static void kdots_f32(const float *q, int g, const void *k, size_t rb, int64_t n, int hd, float scale,
                      float *o, int64_t ld, float *mx) {
#define KD32(G) kdots_grp(q, G, (const uint8_t *)k, rb, n, hd, scale, o, ld, mx, 0)
    ATTN_BY_G(KD32)
}
static void kdots_f16(const float *q, int g, const void *k, size_t rb, int64_t n, int hd, float scale,
                      float *o, int64_t ld, float *mx) {
#define KD16(G) kdots_grp(q, G, (const uint8_t *)k, rb, n, hd, scale, o, ld, mx, 1)
    ATTN_BY_G(KD16)
}
static void kdots_q8(const float *q, int g, const void *k, size_t rb, int64_t n, int hd, float scale,
                     float *o, int64_t ld, float *mx) {
#define KDQ8(G) kdots_grp(q, G, (const uint8_t *)k, rb, n, hd, scale, o, ld, mx, LLK_KV_Q8_0)
    ATTN_BY_G(KDQ8)
}
static void vacc_f32(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                     float *o, int64_t os) {
#define VA32(G) vacc_grp(p, ld, G, (const uint8_t *)v, rb, n, hd, o, os, 0)
    ATTN_BY_G(VA32)
}
static void vacc_f16(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                     float *o, int64_t os) {
#define VA16(G) vacc_grp(p, ld, G, (const uint8_t *)v, rb, n, hd, o, os, 1)
    ATTN_BY_G(VA16)
}
static void vacc_q8(const float *p, int64_t ld, int g, const void *v, size_t rb, int64_t n, int hd,
                    float *o, int64_t os) {
#define VAQ8(G) vacc_grp(p, ld, G, (const uint8_t *)v, rb, n, hd, o, os, LLK_KV_Q8_0)
    ATTN_BY_G(VAQ8)
}

/* llk_exp (llk_internal.h) for 8 floats, operation for operation. */
static inline __m256 exp8(__m256 x) {
    const __m256 lo = _mm256_set1_ps(-87.3f);
    __m256 xc = _mm256_max_ps(x, lo);
    __m256 k = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), xc);
    r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187e-06f), r);
    __m256 p = _mm256_set1_ps(1.0f / 720.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_and_ps(y, _mm256_cmp_ps(x, lo, _CMP_GT_OQ));
}
static float expsum(float *x, int64_t n, float mx) {
    __m256 m = _mm256_set1_ps(mx), s = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
        _mm256_storeu_ps(x + i, e);
        s = _mm256_add_ps(s, e);
    }
    float t = hsum8(s);
    for (; i < n; i++) { x[i] = llk_exp(x[i] - mx); t += x[i]; }
    return t;
}

static void llk_fill_256(llk_kernels *k) {
    k->expsum = expsum;
    k->dequant[LLK_TYPE_Q4_0] = deq_q4_0;
    k->dequant[LLK_TYPE_Q4_1] = deq_q4_1;
    k->dequant[LLK_TYPE_Q8_0] = deq_q8_0;
    k->dequant[LLK_TYPE_Q4_K] = deq_q4_K;
    k->dequant[LLK_TYPE_Q6_K] = deq_q6_K;
    k->kdots[LLK_KV_F32] = kdots_f32; k->kdots[LLK_KV_F16] = kdots_f16; k->kdots[LLK_KV_Q8_0] = kdots_q8;
    k->vacc[LLK_KV_F32] = vacc_f32; k->vacc[LLK_KV_F16] = vacc_f16; k->vacc[LLK_KV_Q8_0] = vacc_q8;
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
    k->dot4[LLK_TYPE_Q4_0] = dot4_q4_0;
    k->dot4[LLK_TYPE_Q4_1] = dot4_q4_1;
    k->dot4[LLK_TYPE_Q5_0] = dot4_q5_0;
    k->dot4[LLK_TYPE_Q5_1] = dot4_q5_1;
    k->dot4[LLK_TYPE_Q8_0] = dot4_q8_0;
    k->dot4[LLK_TYPE_IQ4_NL] = dot4_iq4_nl;
    k->dot4[LLK_TYPE_Q4_K] = dot4_q4_K;
    k->dot4[LLK_TYPE_Q6_K] = dot4_q6_K;
    llk_fill_256_iq(k);
}

#endif /* LLK_SIMD256_H */
