/* llk_avx512_panel.h — the 512-bit panel kernels (packed weights x quantized activations), included
 * by llk_avx512.c only, after llk_avx2_panel.h (whose helpers they share). Same panels, same
 * contract: each is the twin of its reference in llk_panel.c, float for float.
 *
 * Register tile: one panel (8 rows) x up to PANEL512_TOK tokens. A zmm holds two 4-byte chunks of
 * each of the 8 rows, zipped so that lane 2r is chunk c of row r and lane 2r + 1 chunk c + 1
 * (zip_rows: one permute per 64 bytes of panel, shared by every token of the tile). A token's 8
 * activation bytes of those two chunks are then one 64-bit broadcast, and one vpdpbusd adds 8
 * products into each row's two lanes: a block of 32 weights x 8 rows is 4 vpdpbusd per token,
 * where the 256-bit kernels take 8 maddubs and 8 adds. Lanes 2r and 2r + 1 are summed (exact
 * integers) before the block's float step, which is the 256-bit kernels' in 8 lanes.
 *
 * Without VNNI, dpbusd_acc is maddubs + madd + add: the same integers (pairs stay in int16 range:
 * 4-bit levels x 127, or |w| <= 128 x 127 for Q8_0, whose sign moves onto the activations).
 */
#ifndef LLK_AVX512_PANEL_H
#define LLK_AVX512_PANEL_H

#define PANEL512_TOK 8     /* tokens per register tile (<= PANEL_TOK_MAX) */

/* acc + the sums of 4 adjacent u8 x s8 products per dword lane */
static inline __m512i dpbusd_acc(__m512i acc, __m512i u, __m512i s) {
#if defined(LLK_VNNI)
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

/* 64 bytes of a panel (chunks c and c + 1 of its 8 rows) zipped: lane 2r = chunk c of row r,
 * lane 2r + 1 = chunk c + 1 of row r. */
static inline __m512i zip_rows(const uint8_t *p) {
    const __m512i idx = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    return _mm512_permutexvar_epi32(idx, _mm512_loadu_si512((const void *)p));
}

/* 8 activation bytes (two chunks) in every lane pair */
static inline __m512i bcast8(const int8_t *x) {
    int64_t v; memcpy(&v, x, 8);
    return _mm512_set1_epi64(v);
}

/* Row r's two lanes summed: 16 zipped lanes -> 8 row lanes */
static inline __m256i unzip_sum(__m512i i) {
    return _mm512_cvtepi64_epi32(_mm512_add_epi32(i, _mm512_srli_epi64(i, 32)));
}

/* 8 scales (one per row) as dwords in both lanes of their row: unsigned or signed bytes */
static inline __m512i zip_u8(const uint8_t *v8) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)v8);
    return _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(v, v));
}
static inline __m512i zip_i8(const int8_t *v8) {
    const __m128i v = _mm_loadl_epi64((const __m128i *)v8);
    return _mm512_cvtepi8_epi32(_mm_unpacklo_epi8(v, v));
}

/* A table of 16 int16 coefficients per row (cf. k < 16) as four vectors for the K-quants' bsums
 * terms: lane 2r + h of vector m = the pair (cf[4m + 2h][r], cf[4m + 2h + 1][r]), so that one madd
 * with the 64-bit broadcast of bsums[4m .. 4m + 3] adds row r's 4 products into its two lanes.
 * lo[k], hi[k]: the 8 rows' values of coefficients 2k and 2k + 1, as int16. */
static inline void coef_pairs(const __m128i lo[8], const __m128i hi[8], __m512i out[4]) {
    const __m512i idx = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    for (int m = 0; m < 4; m++) {
        const __m256i h0 = _mm256_setr_m128i(_mm_unpacklo_epi16(lo[2 * m], hi[2 * m]), _mm_unpackhi_epi16(lo[2 * m], hi[2 * m]));
        const __m256i h1 = _mm256_setr_m128i(_mm_unpacklo_epi16(lo[2 * m + 1], hi[2 * m + 1]),
                                             _mm_unpackhi_epi16(lo[2 * m + 1], hi[2 * m + 1]));
        out[m] = _mm512_permutex2var_epi32(_mm512_castsi256_si512(h0), idx, _mm512_castsi256_si512(h1));
    }
}
/* sum_k cf[k][r] * bs[k] per row, zipped (row r in lanes 2r, 2r + 1) */
static inline __m512i bsums_dot(const __m512i cf[4], const int16_t *bs) {
    __m512i z = _mm512_setzero_si512();
    for (int m = 0; m < 4; m++) {
        int64_t v; memcpy(&v, bs + 4 * m, 8);
        z = _mm512_add_epi32(z, _mm512_madd_epi16(cf[m], _mm512_set1_epi64(v)));
    }
    return z;
}

/* Legacy entries (Q4_0, Q4_1, Q8_0: block b = 8g + j of the 8 rows, lane-major) — one block's 32
 * levels of 8 rows, zipped into 4 vectors paired with activation bytes 0-7, 8-15, 16-23, 24-31;
 * signed levels (Q8_0) as |w|, their signs as byte masks for the activations. */
typedef struct { __m512i u[4]; __mmask64 neg[4]; } lv512;

PANEL_INLINE lv512 lv512_q4(const uint8_t *qs) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i z01 = zip_rows(qs), z23 = zip_rows(qs + 64);   /* elements 4c + i: c = 0, 1 | 2, 3 */
    lv512 L;
    L.u[0] = _mm512_and_si512(z01, m4);
    L.u[1] = _mm512_and_si512(z23, m4);
    L.u[2] = _mm512_and_si512(_mm512_srli_epi16(z01, 4), m4);    /* the high nibbles: 16 + 4c + i */
    L.u[3] = _mm512_and_si512(_mm512_srli_epi16(z23, 4), m4);
    for (int k = 0; k < 4; k++) L.neg[k] = 0;
    return L;
}
PANEL_INLINE lv512 lv512_q8_0(const uint8_t *qs) {
    lv512 L;
    for (int k = 0; k < 4; k++) {
        const __m512i w = zip_rows(qs + 64 * k);                 /* chunks 2k, 2k + 1 */
        L.u[k] = _mm512_abs_epi8(w);
        L.neg[k] = _mm512_movepi8_mask(w);
    }
    return L;
}

/* One token's products of a block, zipped (lane 2r + p: half p of row r's total) */
PANEL_INLINE __m512i block_products(const lv512 *L, int is_signed, const int8_t *x) {
    __m512i i = _mm512_setzero_si512();
    for (int k = 0; k < 4; k++) {
        __m512i v = bcast8(x + 8 * k);
        if (is_signed) v = _mm512_mask_sub_epi8(v, L->neg[k], _mm512_setzero_si512(), v);
        i = dpbusd_acc(i, L->u[k], v);
    }
    return i;
}

/* Two tokens' block totals in one vector: lane 2r = token a's row r, lane 2r + 1 = token b's. */
static inline __m512i pair_totals(__m512i ia, __m512i ib) {
    return _mm512_mask_blend_epi32(0xaaaa, _mm512_add_epi32(ia, _mm512_srli_epi64(ia, 32)),
                                   _mm512_add_epi32(ib, _mm512_slli_epi64(ib, 32)));
}

/* Q4_0, Q4_1 (has_m) and Q8_0 (is_signed): the main lane sets with the tile's tokens taken in
 * pairs (lane 2r + u of pair q is row r of token 2q + u: one float step for two tokens), then
 * the offsets (llk_avx2_panel.h), then the contract's tree. An odd last token pairs with itself. */
PANEL_INLINE void tile512_legacy(const uint8_t *P, size_t ent, int has_m, int is_signed, int64_t nb,
                                 const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    const size_t qs_at = has_m ? 32 : 16;
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
    const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 0, 0, 0, 0, 0, 0, 0, 0);
    const int np = (nt + 1) / 2;
    __m256 lanes[PANEL512_TOK][8];
    const uint8_t *e = P;
    for (int j = 0; j < 8; j++) {
        __m512 acc[PANEL512_TOK / 2];
        for (int q = 0; q < np; q++) acc[q] = _mm512_setzero_ps();
        const llk_block_q8_32x8 *G = (const llk_block_q8_32x8 *)a;   /* token 0's group of block b */
        for (int64_t b = j; b < nb; b += 8, e += ent, G++) {
            if (nt == 1)
                for (size_t l = 0; l < ent; l += 64) _mm_prefetch((const char *)e + PANEL_PF + l, _MM_HINT_T0);
            const lv512 L = is_signed ? lv512_q8_0(e + qs_at) : lv512_q4(e + qs_at);
            const __m512 dw = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(
                _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e))));
            for (int q = 0; q < np; q++) {
                const int tb = 2 * q + 1 < nt ? 2 * q + 1 : 2 * q;
                const llk_block_q8_32x8 *Ga = (const llk_block_q8_32x8 *)((const uint8_t *)G + (size_t)(2 * q) * as);
                const llk_block_q8_32x8 *Gb = (const llk_block_q8_32x8 *)((const uint8_t *)G + (size_t)tb * as);
                const __m512i ia = block_products(&L, is_signed, Ga->qs[j]);
                const __m512i I = pair_totals(ia, tb == 2 * q ? ia : block_products(&L, is_signed, Gb->qs[j]));
                const __m512 dx = _mm512_mask_blend_ps(0xaaaa, _mm512_set1_ps(Ga->d[j]), _mm512_set1_ps(Gb->d[j]));
                acc[q] = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(I), acc[q]);
            }
        }
        for (int t = 0; t < nt; t++)
            lanes[t][j] = _mm512_castps512_ps256(_mm512_permutexvar_ps(t & 1 ? odd : even, acc[t >> 1]));
    }
    if (!is_signed) offsets_q4(P, ent, has_m, nb, a, as, nt, lanes);   /* Q8_0 has no offset lanes */
    store_rows(lanes, nt, y, ldy);
}

/* Q4_K and Q5_K (has_qh): per super-block and token, group g's 4 zipped products (each lane a
 * sum of 16 products: <= 16 x 15 x 127 for Q4_K, an int16, so its scale is a madd; Q5_K's levels
 * to 31 need a mullo) times the group's scale, summed over the groups and the row's two lanes:
 * exactly sum_g sc_g t_g; the mins through bsums; then dot_q4_K's float expression. */
PANEL_INLINE void tile512_k4(const uint8_t *P, int has_qh, int64_t nb, const uint8_t *a, size_t as, int nt,
                             float *y, int64_t ldy) {
    const __m512i m4 = _mm512_set1_epi8(15), one = _mm512_set1_epi8(1);
    const size_t ent = has_qh ? sizeof(blk_q5_Kx8) : sizeof(blk_q4_Kx8);
    __m256 s[PANEL512_TOK];
    for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const blk_q5_Kx8 *e = (const blk_q5_Kx8 *)(P + (size_t)b * ent);   /* Q4_K x 8: its prefix */
        const llk_block_q8_256 *A[PANEL512_TOK];
        kentry_start(e, ent, b, a, as, nt, A);
        __m512i acc[PANEL512_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_si512();
        __m512i zh[4];
        if (has_qh)
            for (int m = 0; m < 4; m++) zh[m] = zip_rows(e->qh + 64 * m);
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 1
#endif
        for (int c = 0; c < 4; c++) {             /* groups 2c (low nibbles) and 2c + 1 (high) */
            __m512i z[4];
            for (int m = 0; m < 4; m++) z[m] = zip_rows(e->qs + 256 * c + 64 * m);
            for (int h = 0; h < 2; h++) {
                const int g = 2 * c + h;
                __m512i u[4];
                for (int m = 0; m < 4; m++) {
                    u[m] = _mm512_and_si512(h ? _mm512_srli_epi16(z[m], 4) : z[m], m4);
                    if (has_qh)
                        u[m] = _mm512_or_si512(u[m], _mm512_slli_epi16(_mm512_and_si512(
                            _mm512_srl_epi16(zh[m], _mm_cvtsi32_si128(g)), one), 4));
                }
                const __m512i sc = zip_u8(e->sc[g]);
                for (int t = 0; t < nt; t++) {
                    const int8_t *x = A[t]->qs + 32 * g;
                    __m512i i = _mm512_setzero_si512();
                    for (int m = 0; m < 4; m++) i = dpbusd_acc(i, u[m], bcast8(x + 8 * m));
                    acc[t] = _mm512_add_epi32(acc[t], has_qh ? _mm512_mullo_epi32(i, sc) : _mm512_madd_epi16(i, sc));
                }
            }
        }
        __m512i mn[4];          /* bsums k = 2g, 2g + 1 both take the group's min */
        {
            __m128i lo[8];
            for (int g = 0; g < 8; g++) lo[g] = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)e->mn[g]));
            coef_pairs(lo, lo, mn);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->d));
        const __m256 dm = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->dmin));
        for (int t = 0; t < nt; t++) {
            const __m256i accm = unzip_sum(bsums_dot(mn, A[t]->bsums));
            const __m256 v = _mm256_sub_ps(_mm256_mul_ps(d, _mm256_cvtepi32_ps(unzip_sum(acc[t]))),
                                           _mm256_mul_ps(dm, _mm256_cvtepi32_ps(accm)));
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_set1_ps(A[t]->d), v));
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy, s[t]);
}

/* Q6_K: levels 0..63 (the -32 through bsums, as in the 256-bit tile); group g (16 elements =
 * two zipped chunk pairs, each lane <= 8 x 63 x 127: beyond int16, so the scale is a mullo). */
PANEL_INLINE void tile512_q6_K(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt,
                               float *y, int64_t ldy) {
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    const blk_q6_Kx8 *e = (const blk_q6_Kx8 *)P;
    __m256 s[PANEL512_TOK];
    for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, e++) {
        const llk_block_q8_256 *A[PANEL512_TOK];
        kentry_start(e, sizeof *e, b, a, as, nt, A);
        __m512i acc[PANEL512_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_si512();
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 1
#endif
        for (int hp = 0; hp < 4; hp++) {          /* elements 128h + 32sh + 16p + l (l < 16) */
            const int h = hp >> 1, p = hp & 1;
            /* chunk pairs 2p + m (m < 2) of the low bits (both nibble halves) and of the high bits */
            __m512i zl[2][2], zh[2];
            for (int m = 0; m < 2; m++) {
                zl[0][m] = zip_rows(e->ql[h][0][4 * p + 2 * m]);
                zl[1][m] = zip_rows(e->ql[h][1][4 * p + 2 * m]);
                zh[m] = zip_rows(e->qh[h][4 * p + 2 * m]);
            }
            for (int sh = 0; sh < 4; sh++) {
                const int g = 8 * h + 2 * sh + p;
                __m512i u[2];
                for (int m = 0; m < 2; m++) {
                    const __m512i lq = zl[sh & 1][m];
                    const __m512i lo = _mm512_and_si512(sh >> 1 ? _mm512_srli_epi16(lq, 4) : lq, m4);
                    const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(zh[m], 2 * sh), m2);
                    u[m] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
                }
                const __m512i sc = zip_i8(e->sc[g]);
                for (int t = 0; t < nt; t++) {
                    const int8_t *x = A[t]->qs + 16 * g;
                    const __m512i i = dpbusd_acc(dpbusd_acc(_mm512_setzero_si512(), u[0], bcast8(x)), u[1], bcast8(x + 8));
                    acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(i, sc));
                }
            }
        }
        __m512i scp[4];          /* minus 32 sum_g sc_g bsum_g, into the zipped totals */
        {
            __m128i lo[8], hi[8];
            for (int k = 0; k < 8; k++) {
                lo[k] = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)e->sc[2 * k]));
                hi[k] = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)e->sc[2 * k + 1]));
            }
            coef_pairs(lo, hi, scp);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->d));
        for (int t = 0; t < nt; t++) {
            const __m512i z = _mm512_sub_epi32(acc[t], _mm512_slli_epi32(bsums_dot(scp, A[t]->bsums), 5));
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(A[t]->d), d),
                                                     _mm256_cvtepi32_ps(unzip_sum(z))));
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy, s[t]);
}

#if defined(LLK_VNNI)
/* IQ4_XS (VNNI only): the levels biased by 128 (1..241, unsigned for vpdpbusd, which does not
 * saturate; beyond maddubs' range), group g's zipped products times its scale (mullo), and the
 * bias taken back through bsums: -128 sum_g ls_g (bsums[2g] + bsums[2g + 1]); then dot_iq4_xs's
 * float expression. */
PANEL_INLINE void tile512_iq4_xs(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt,
                                 float *y, int64_t ldy) {
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i kv = _mm512_add_epi8(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)llk_iq4_values)),
                                       _mm512_set1_epi8((char)0x80));
    const blk_iq4_xsx8 *e = (const blk_iq4_xsx8 *)P;
    __m256 s[PANEL512_TOK];
    for (int t = 0; t < nt; t++) s[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++, e++) {
        const llk_block_q8_256 *A[PANEL512_TOK];
        kentry_start(e, sizeof *e, b, a, as, nt, A);
        __m512i acc[PANEL512_TOK];
        for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_si512();
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC unroll 1
#endif
        for (int g = 0; g < 8; g++) {
            const __m512i z01 = zip_rows(e->qs + 128 * g), z23 = zip_rows(e->qs + 128 * g + 64);
            __m512i u[4];           /* elements 0-7, 8-15, 16-23, 24-31 of the group */
            u[0] = _mm512_shuffle_epi8(kv, _mm512_and_si512(z01, m4));
            u[1] = _mm512_shuffle_epi8(kv, _mm512_and_si512(z23, m4));
            u[2] = _mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(z01, 4), m4));
            u[3] = _mm512_shuffle_epi8(kv, _mm512_and_si512(_mm512_srli_epi16(z23, 4), m4));
            const __m512i sc = zip_i8(e->ls[g]);
            for (int t = 0; t < nt; t++) {
                const int8_t *x = A[t]->qs + 32 * g;
                __m512i i = _mm512_setzero_si512();
                for (int m = 0; m < 4; m++) i = dpbusd_acc(i, u[m], bcast8(x + 8 * m));
                acc[t] = _mm512_add_epi32(acc[t], _mm512_mullo_epi32(i, sc));
            }
        }
        __m512i lsp[4];
        {
            __m128i lo[8];
            for (int g = 0; g < 8; g++) lo[g] = _mm_cvtepi8_epi16(_mm_loadl_epi64((const __m128i *)e->ls[g]));
            coef_pairs(lo, lo, lsp);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)e->d));
        for (int t = 0; t < nt; t++) {
            const __m512i z = _mm512_sub_epi32(acc[t], _mm512_slli_epi32(bsums_dot(lsp, A[t]->bsums), 7));
            s[t] = _mm256_add_ps(s[t], _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(A[t]->d), d),
                                                     _mm256_cvtepi32_ps(unzip_sum(z))));
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(y + t * ldy, s[t]);
}

#endif

/* Token tiles outside, panels inside (as panel_run); each token count its own inlined tile. */
PANEL_INLINE void panel_run512(panel_tile_fn tile, int64_t block, const void *w, size_t pb,
                               int64_t n_panels, int64_t n_cols, const void *a, size_t as,
                               int64_t n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_cols / block;
    for (int64_t t0 = 0; t0 < n_tok; t0 += PANEL512_TOK) {
        const int nt = n_tok - t0 < PANEL512_TOK ? (int)(n_tok - t0) : PANEL512_TOK;
        const uint8_t *at = (const uint8_t *)a + (size_t)t0 * as;
        for (int64_t p = 0; p < n_panels; p++) {
            const uint8_t *P = (const uint8_t *)w + (size_t)p * pb;
            float *yt = y + t0 * ldy + LLK_PANEL_ROWS * p;
            switch (nt) {
            case 8: tile(P, nb, at, as, 8, yt, ldy); break;
            case 7: tile(P, nb, at, as, 7, yt, ldy); break;
            case 6: tile(P, nb, at, as, 6, yt, ldy); break;
            case 5: tile(P, nb, at, as, 5, yt, ldy); break;
            case 4: tile(P, nb, at, as, 4, yt, ldy); break;
            case 3: tile(P, nb, at, as, 3, yt, ldy); break;
            case 2: tile(P, nb, at, as, 2, yt, ldy); break;
            default: tile(P, nb, at, as, 1, yt, ldy); break;
            }
        }
    }
}

PANEL_INLINE void tile512_q4_K(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile512_k4(P, 0, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile512_q5_K(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile512_k4(P, 1, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile512_q4_0(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile512_legacy(P, sizeof(blk_q4_0x8), 0, 0, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile512_q4_1(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile512_legacy(P, sizeof(blk_q4_1x8), 1, 0, nb, a, as, nt, y, ldy);
}
PANEL_INLINE void tile512_q8_0(const uint8_t *P, int64_t nb, const uint8_t *a, size_t as, int nt, float *y, int64_t ldy) {
    tile512_legacy(P, sizeof(blk_q8_0x8), 0, 1, nb, a, as, nt, y, ldy);
}

static void panel512_q4_0(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                          size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_q4_0, LLK_QK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel512_q4_1(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                          size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_q4_1, LLK_QK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel512_q8_0(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                          size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_q8_0, LLK_QK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel512_q4_K(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                          size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_q4_K, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel512_q5_K(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                          size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_q5_K, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel512_q6_K(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                          size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_q6_K, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}

#if defined(LLK_VNNI)
static void panel512_iq4_xs(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                            size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_run512(tile512_iq4_xs, LLK_QKK, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
#endif

static void llk_fill_avx512_panel(llk_kernels *k) {
    llk_fill_avx2_panel(k);        /* the 256-bit tiles, rebuilt here, for what has no 512-bit one */
    k->panel[LLK_TYPE_Q4_0] = panel512_q4_0;
    k->panel[LLK_TYPE_Q4_1] = panel512_q4_1;
    k->panel[LLK_TYPE_Q8_0] = panel512_q8_0;
    k->panel[LLK_TYPE_Q4_K] = panel512_q4_K;
    k->panel[LLK_TYPE_Q5_K] = panel512_q5_K;
    k->panel[LLK_TYPE_Q6_K] = panel512_q6_K;
#if defined(LLK_VNNI)
    k->panel[LLK_TYPE_IQ4_XS] = panel512_iq4_xs;
#endif
}

#endif /* LLK_AVX512_PANEL_H */
