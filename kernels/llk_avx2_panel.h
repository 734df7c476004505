/* llk_avx2_panel.h — the AVX2 panel kernels (packed weights x quantized activations), included by
 * llk_avx2.c only. Each is the SIMD twin of its reference in llk_panel.c, float for float.
 *
 * Register tile: one panel (8 rows, one per lane) x up to PANEL_TOK tokens. For each entry (block b
 * of the 8 rows) and 4-byte chunk c, one load holds four weights of every row; a token's four
 * activation bytes are broadcast and maddubs gives each row's pair sums in its own lane. The
 * entry's integer totals come out as 8 lanes = 8 rows; one FMA per token adds dw * dx * I into
 * the lane set of the block's contract lane j (entries are lane-major, so j changes only every
 * nb / 8 entries and the accumulators stay in registers). Offsets (Q4_0's -8 dw * s) go through a
 * second pass over the entries' scales, into the second lane set of the contract.
 *
 * Bounds: Q4_0 levels are 0..15 and activations -127..127, so a maddubs pair is at most 3810 and
 * the eight pairs of one block's lane add up to at most 30480 in int16; Q8_0 (|w| <= 128) takes a
 * madd to int32 after every maddubs.
 */
#ifndef LLK_AVX2_PANEL_H
#define LLK_AVX2_PANEL_H

#if defined(__GNUC__) || defined(__clang__)
#define PANEL_INLINE static inline __attribute__((always_inline))
#else
#define PANEL_INLINE static __forceinline
#endif

#define PANEL_TOK 4        /* tokens per register tile */
#define PANEL_TOK_MAX 8    /* the most any level's tile takes (llk_avx512_panel.h: 8) */

/* Unrolled fully, the chunk loops below would have every token's products live at once and spill
 * them to the stack; two chunks at a time keep the tile in registers. */
#if defined(__GNUC__) && !defined(__clang__)
#define PANEL_UNROLL2 _Pragma("GCC unroll 2")
#elif defined(__clang__)
#define PANEL_UNROLL2 _Pragma("unroll 2")
#else
#define PANEL_UNROLL2
#endif
#define PANEL_PF 2048      /* bytes of panel prefetched ahead when one token streams the weights */

static inline __m256i bcast4(const int8_t *x) {
    int32_t v; memcpy(&v, x, 4);
    return _mm256_set1_epi32(v);
}

/* The activation group holding block b of token t's row. */
static inline const llk_block_q8_32x8 *act_group(const uint8_t *a, size_t as, int t, int64_t b) {
    return (const llk_block_q8_32x8 *)(a + (size_t)t * as) + (b >> 3);
}

/* lanes[t][j] += the offset lane set of the contract: fmaf(cf_b, s_b) over lane j's blocks,
 * cf = -8 dw (Q4_0) or m (Q4_1: the float16 row mins after the scales, has_m). */
PANEL_INLINE void offsets_q4(const uint8_t *e, size_t ent, int has_m, int64_t nb, const uint8_t *a,
                             size_t as, int nt, __m256 (*lanes)[8]) {
    const __m256 m8 = _mm256_set1_ps(-8.0f);
    for (int j = 0; j < 8; j++) {
        __m256 accx[PANEL_TOK_MAX];
        for (int t = 0; t < nt; t++) accx[t] = _mm256_setzero_ps();
        for (int64_t b = j; b < nb; b += 8, e += ent) {
            const __m256 cf = has_m ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(e + 16)))
                                    : _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e)), m8);
            for (int t = 0; t < nt; t++)
                accx[t] = _mm256_fmadd_ps(cf, _mm256_set1_ps(act_group(a, as, t, b)->s[j & 7]), accx[t]);
        }
        for (int t = 0; t < nt; t++) lanes[t][j] = _mm256_add_ps(lanes[t][j], accx[t]);
    }
}

/* y[t * ldy + r] = llk_sum8 over the 8 lane sets, per row (lane) r: vertical adds in its tree. */
PANEL_INLINE void store_rows(__m256 (*lanes)[8], int nt, float *y, int64_t ldy) {
    for (int t = 0; t < nt; t++) {
        const __m256 *v = lanes[t];
        const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                                       _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
        _mm256_storeu_ps(y + t * ldy, s);
    }
}

/* Q4_0 and Q4_1 entries (ent bytes: float16 d[8], Q4_1's m[8], then 128 bytes of quants). */
PANEL_INLINE void tile_q4(const uint8_t *P, size_t ent, int has_m, int64_t nb, const uint8_t *a,
                          size_t as, int nt, float *y, int64_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const size_t qs_at = has_m ? 32 : 16;
    __m256 lanes[PANEL_TOK][8];
    const uint8_t *e = P;
    for (int j = 0; j < 8; j++) {
        __m256 acc[PANEL_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        /* G: token 0's activation group of block b; token t's is as * t bytes further */
        const llk_block_q8_32x8 *G = (const llk_block_q8_32x8 *)a;
        for (int64_t b = j; b < nb; b += 8, e += ent, G++) {
            if (nt == 1) {
                _mm_prefetch((const char *)e + PANEL_PF, _MM_HINT_T0);
                _mm_prefetch((const char *)e + PANEL_PF + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)e + PANEL_PF + 128, _MM_HINT_T0);
            }
            /* chunk c of the entry's 8 rows: its low nibbles are elements 4c .. 4c+3, its high
             * nibbles 16 + 4c ..; unpacked once for every token, one chunk at a time (so that only
             * the tokens' int16 sums stay live, not all 32 levels) */
            __m256i s[PANEL_TOK];
            PANEL_UNROLL2
            for (int c = 0; c < 4; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(e + qs_at + 32 * c));
                const __m256i lo = _mm256_and_si256(v, m4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                for (int t = 0; t < nt; t++) {
                    const int8_t *x = ((const llk_block_q8_32x8 *)((const uint8_t *)G + (size_t)t * as))->qs[j];
                    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(x + 4 * c)),
                                                       _mm256_maddubs_epi16(hi, bcast4(x + 16 + 4 * c)));
                    s[t] = c ? _mm256_add_epi16(s[t], p) : p;
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e));
            for (int t = 0; t < nt; t++) {
                const llk_block_q8_32x8 *Gt = (const llk_block_q8_32x8 *)((const uint8_t *)G + (size_t)t * as);
                const __m256 S = _mm256_mul_ps(dw, _mm256_set1_ps(Gt->d[j]));
                acc[t] = _mm256_fmadd_ps(S, _mm256_cvtepi32_ps(_mm256_madd_epi16(s[t], ones)), acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) lanes[t][j] = acc[t];
    }
    offsets_q4(P, ent, has_m, nb, a, as, nt, lanes);
    store_rows(lanes, nt, y, ldy);
}

PANEL_INLINE void tile_q8_0(const uint8_t *P8, int64_t nb, const uint8_t *a, size_t as, int nt,
                            float *y, int64_t ldy) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 lanes[PANEL_TOK][8];
    const blk_q8_0x8 *e = (const blk_q8_0x8 *)P8;
    for (int j = 0; j < 8; j++) {
        __m256 acc[PANEL_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
        for (int64_t b = j; b < nb; b += 8, e++) {
            if (nt == 1) {
                for (int l = 0; l < 5; l++) _mm_prefetch((const char *)e + PANEL_PF + 64 * l, _MM_HINT_T0);
            }
            __m256i s[PANEL_TOK];
            PANEL_UNROLL2
            for (int c = 0; c < 8; c++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(e->qs + 32 * c));
                const __m256i av = _mm256_abs_epi8(v);
                for (int t = 0; t < nt; t++) {
                    const int8_t *x = act_group(a, as, t, b)->qs[j];
                    const __m256i p = _mm256_madd_epi16(
                        _mm256_maddubs_epi16(av, _mm256_sign_epi8(bcast4(x + 4 * c), v)), ones);
                    s[t] = c ? _mm256_add_epi32(s[t], p) : p;
                }
            }
            const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->d));
            for (int t = 0; t < nt; t++) {
                const __m256 S = _mm256_mul_ps(dw, _mm256_set1_ps(act_group(a, as, t, b)->d[j]));
                acc[t] = _mm256_fmadd_ps(S, _mm256_cvtepi32_ps(s[t]), acc[t]);
            }
        }
        for (int t = 0; t < nt; t++) lanes[t][j] = acc[t];   /* Q8_0 has no offset lanes (cf = 0) */
    }
    store_rows(lanes, nt, y, ldy);
}

/* Lanes (2r, 2r + 1) = v8[r] as int16: a row's scale for both of its pair sums (madd). */
static inline __m256i pairs_u8(const uint8_t *v8) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)v8));
    return _mm256_or_si256(x, _mm256_slli_epi32(x, 16));
}

/* The start of a K-quant entry (super-block b of a panel, ent bytes): prefetch ahead when one
 * token streams the weights, and each token's activation super-block b. */
PANEL_INLINE void kentry_start(const void *e, size_t ent, int64_t b, const uint8_t *a, size_t as,
                               int nt, const llk_block_q8_256 **A) {
    if (nt == 1)
        for (size_t l = 0; l < ent; l += 64) _mm_prefetch((const char *)e + PANEL_PF + l, _MM_HINT_T0);
    for (int t = 0; t < nt; t++) A[t] = (const llk_block_q8_256 *)(a + (size_t)t * as) + b;
}

/* The fifth bits of Q5_K's group g as 0x10 per byte, from a 32-byte chunk of the entry's qh. */
static inline __m256i bit5(const uint8_t *qh, int g) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)qh);
    return _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(g)), _mm256_set1_epi8(1)), 4);
}

/* Q4_K and Q5_K (has_qh): per super-block (entry) and token, each group's pair sums accumulate in
 * int16 (Q4_K: 8 chunks of at most 3810; Q5_K, levels to 31: 4 chunks of at most 7874 per half),
 * madd by the group's scale pairs gives sc * t per row lane in int32, the mins go through bsums the
 * same way; then dot_q4_K's float expression (dot_q5_K's is the same), lane by lane. */
PANEL_INLINE void tile_k4(const uint8_t *P, int has_qh, int64_t nb, const uint8_t *a, size_t as, int nt,
                          float *y, int64_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(15);
    const size_t ent = has_qh ? sizeof(blk_q5_Kx8) : sizeof(blk_q4_Kx8);
    __m256 s[PANEL_TOK];
    for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const blk_q5_Kx8 *e = (const blk_q5_Kx8 *)(P + (size_t)b * ent);   /* Q4_K x 8: its prefix */
        const llk_block_q8_256 *A[PANEL_TOK];
        kentry_start(e, ent, b, a, as, nt, A);
        __m256i acc[PANEL_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_si256();
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 1
#endif
        for (int g = 0; g < 8; g++) {
            const uint8_t *q = e->qs + 256 * (g >> 1);
            const __m256i sc = pairs_u8(e->sc[g]);
            for (int half = 0; half < (has_qh ? 2 : 1); half++) {
                const int k0 = 4 * half, k1 = has_qh ? k0 + 4 : 8;
                __m256i sg[PANEL_TOK];
                for (int t = 0; t < nt; t++) sg[t] = _mm256_setzero_si256();
                PANEL_UNROLL2
                for (int k = k0; k < k1; k++) {
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(q + 32 * k));
                    __m256i u = (g & 1) ? _mm256_and_si256(_mm256_srli_epi16(v, 4), m4) : _mm256_and_si256(v, m4);
                    if (has_qh) u = _mm256_or_si256(u, bit5(e->qh + 32 * k, g));
                    for (int t = 0; t < nt; t++) {
                        const __m256i p = _mm256_maddubs_epi16(u, bcast4(A[t]->qs + 32 * g + 4 * k));
                        sg[t] = _mm256_add_epi16(sg[t], p);
                    }
                }
                for (int t = 0; t < nt; t++) {
                    const __m256i p = _mm256_madd_epi16(sg[t], sc);
                    acc[t] = _mm256_add_epi32(acc[t], p);
                }
            }
        }
        __m256i accm[PANEL_TOK];
        for (int g = 0; g < 8; g++) {
            const __m256i mn = pairs_u8(e->mn[g]);
            for (int t = 0; t < nt; t++) {
                const __m256i p = _mm256_madd_epi16(mn, bcast4((const int8_t *)&A[t]->bsums[2 * g]));
                accm[t] = g ? _mm256_add_epi32(accm[t], p) : p;
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->d));
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->dmin));
        for (int t = 0; t < nt; t++) {
            const __m256 v = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(acc[t])),
                                           _mm256_mul_ps(dm, _mm256_cvtepi32_ps(accm[t])));
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_set1_ps(A[t]->d), v));
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy, s[t]);
}

/* Lanes (2r, 2r + 1) = v8[r] (signed) as int16. */
static inline __m256i pairs_i8(const int8_t *v8) {
    const __m256i x = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)v8));
    return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xffff)), _mm256_slli_epi32(x, 16));
}
/* Lanes (2r, 2r + 1) = (a[r], b[r]) (signed) as int16. */
static inline __m256i pairs2_i8(const int8_t *a8, const int8_t *b8) {
    const __m128i v = _mm_unpacklo_epi8(_mm_loadl_epi64((const __m128i *)a8), _mm_loadl_epi64((const __m128i *)b8));
    return _mm256_cvtepi8_epi16(v);
}

/* Q6_K: levels 0..63 (the -32 goes through bsums: sum sc (T - 32 bsum)), at most two chunks of
 * maddubs (4 products of <= 63 * 127 per lane) per int16 sum, then madd by the group's scale
 * pairs; dot_q6_K's float expression lane by lane. */
PANEL_INLINE void tile_q6_K(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt,
                            float *y, int64_t ldy) {
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    const blk_q6_Kx8 *e = (const blk_q6_Kx8 *)P;
    __m256 s[PANEL_TOK];
    for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, e++) {
        const llk_block_q8_256 *A[PANEL_TOK];
        kentry_start(e, sizeof *e, b, a, as, nt, A);
        __m256i acc[PANEL_TOK];
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 1
#endif
        for (int g = 0; g < 16; g++) {            /* elements 16g .. 16g + 15 = 128h + 32sh + 4k + i */
            const int h = g >> 3, sh = (g >> 1) & 3, k0 = 4 * (g & 1);
            const __m256i sc = pairs_i8(e->sc[g]);
            for (int half = 0; half < 2; half++) {
                __m256i sg[PANEL_TOK];
                for (int kk = 0; kk < 2; kk++) {
                    const int k = k0 + 2 * half + kk;
                    const __m256i lq = _mm256_loadu_si256((const __m256i *)e->ql[h][sh & 1][k]);
                    const __m256i hq = _mm256_loadu_si256((const __m256i *)e->qh[h][k]);
                    const __m256i lo = _mm256_and_si256(sh >> 1 ? _mm256_srli_epi16(lq, 4) : lq, m4);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(hq, 2 * sh), m2);
                    const __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                    for (int t = 0; t < nt; t++) {
                        const __m256i p = _mm256_maddubs_epi16(u, bcast4(A[t]->qs + 16 * g + 4 * (2 * half + kk)));
                        sg[t] = kk ? _mm256_add_epi16(sg[t], p) : p;
                    }
                }
                for (int t = 0; t < nt; t++) {
                    const __m256i p = _mm256_madd_epi16(sg[t], sc);
                    acc[t] = (g || half) ? _mm256_add_epi32(acc[t], p) : p;
                }
            }
        }
        for (int g = 0; g < 16; g += 2) {         /* minus 32 sum_g sc_g bsum_g */
            const __m256i sc2 = pairs2_i8(e->sc[g], e->sc[g + 1]);
            for (int t = 0; t < nt; t++) {
                const __m256i p = _mm256_madd_epi16(sc2, bcast4((const int8_t *)&A[t]->bsums[g]));
                acc[t] = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(p, 5));
            }
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->d));
        for (int t = 0; t < nt; t++)
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(A[t]->d), d),
                                                     _mm256_cvtepi32_ps(acc[t])));
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy, s[t]);
}

/* Token tiles outside, panels inside: a tile's activations stay in L1 while the panels pass.
 * Each token count is its own call, so the always-inlined tile is compiled for a constant nt. */
typedef void (*panel_tile_fn)(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt,
                              float *y, int64_t ldy);
PANEL_INLINE void panel_run(panel_tile_fn tile, int64_t block, const void *w, size_t pb,
                            int64_t n_panels, int64_t n_cols, const void *a, size_t as,
                            int64_t n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_cols / block;
    for (int64_t t0 = 0; t0 < n_tok; t0 += PANEL_TOK) {
        const int nt = n_tok - t0 < PANEL_TOK ? (int)(n_tok - t0) : PANEL_TOK;
        const uint8_t *at = (const uint8_t *)a + (size_t)t0 * as;
        for (int64_t p = 0; p < n_panels; p++) {
            const uint8_t *P = (const uint8_t *)w + (size_t)p * pb;
            float *yt = y + t0 * ldy + LLK_PANEL_ROWS * p;
            switch (nt) {
            case 4: tile(P, nb, at, as, 4, yt, ldy); break;
            case 3: tile(P, nb, at, as, 3, yt, ldy); break;
            case 2: tile(P, nb, at, as, 2, yt, ldy); break;
            default: tile(P, nb, at, as, 1, yt, ldy); break;
            }
        }
    }
}

/* The tiles in one shape for panel_run. */
PANEL_INLINE void tile_q4_0(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile_q4(P, sizeof(blk_q4_0x8), 0, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile_q4_K(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile_k4(P, 0, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile_q5_K(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile_k4(P, 1, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile_q4_1(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile_q4(P, sizeof(blk_q4_1x8), 1, nb, a, as, nt, y, ldy);
}

#define PANEL_ARGS const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a, \
                   size_t as, int64_t n_tok, float *y, int64_t ldy
static void panel_q4_0(PANEL_ARGS) { panel_run(tile_q4_0, LLK_QK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy); }
static void panel_q4_1(PANEL_ARGS) { panel_run(tile_q4_1, LLK_QK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy); }
static void panel_q8_0(PANEL_ARGS) { panel_run(tile_q8_0, LLK_QK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy); }
static void panel_q4_K(PANEL_ARGS) { panel_run(tile_q4_K, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy); }
static void panel_q5_K(PANEL_ARGS) { panel_run(tile_q5_K, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy); }
static void panel_q6_K(PANEL_ARGS) { panel_run(tile_q6_K, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy); }
#undef PANEL_ARGS

static void llk_fill_avx2_panel(llk_kernels *k) {
    k->panel[LLK_TYPE_Q4_0] = panel_q4_0;
    k->panel[LLK_TYPE_Q4_1] = panel_q4_1;
    k->panel[LLK_TYPE_Q8_0] = panel_q8_0;
    k->panel[LLK_TYPE_Q4_K] = panel_q4_K;
    k->panel[LLK_TYPE_Q5_K] = panel_q5_K;
    k->panel[LLK_TYPE_Q6_K] = panel_q6_K;
}

#endif /* LLK_AVX2_PANEL_H */
