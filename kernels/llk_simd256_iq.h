/* llk_simd256_iq.h — the 256-bit dot products of the grid types (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS,
 * IQ3_S, IQ1_S, IQ1_M) and the ternary TQ1_0 / TQ2_0 against q8_256 activations, and of MXFP4
 * against q8_32. Part of llk_simd256.h and included by it only: it uses that file's helpers
 * (hsum8, h2f, nib32, dot_ss, scale2, KQ, XK) and its includer's bits32_x16, and is compiled once
 * per ISA file like the rest. Twins: llk_ref_iq.c. Dequantization stays with the reference.
 *
 * Shape, per sub-block of 32: the grid entries (unsigned magnitudes, 8 or 4 bytes each) are looked
 * up from the tables in llk_iq_tables.h and assembled into one ymm; the signs go onto the
 * activation bytes (sign_epi8 with +1 / -1 bytes from llk_ksigns64, or from the type's sign bits);
 * maddubs gives i16 pair sums (magnitudes <= 62, activations <= 127: no saturation), one madd
 * weights them by the integer scale (2 ls + 1 or 1 + 2 sc), and one FMA per super-block applies
 * d * dx times the type's constant. IQ1 builds its signed levels (8 grid + delta) in bytes; the
 * ternary types multiply unsigned digits and subtract the activations' sum (the -1 offset).
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
    __m256i m = _mm256_cmpeq_epi8(bits32_x16(p), _mm256_set1_epi8(0x10));
    return _mm256_or_si256(m, _mm256_set1_epi8(1));
}
static inline uint32_t rd32u(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint16_t rd16u(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return v; }

static float dot_iq2_xxs(const void *w, const void *a, int64_t n) {
    KQ(blk_iq2_xxs);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int s = 0; s < 8; s += 2) {
            uint32_t a0 = rd32u(q + 8 * s + 4), a1 = rd32u(q + 8 * s + 12);
            __m256i g0 = grid8x4(llk_iq2xxs_grid, q[8 * s], q[8 * s + 1], q[8 * s + 2], q[8 * s + 3]);
            __m256i g1 = grid8x4(llk_iq2xxs_grid, q[8 * s + 8], q[8 * s + 9], q[8 * s + 10], q[8 * s + 11]);
            __m256i p0 = _mm256_maddubs_epi16(g0, _mm256_sign_epi8(XK(b, 32 * s), ksigns32(a0)));
            __m256i p1 = _mm256_maddubs_epi16(g1, _mm256_sign_epi8(XK(b, 32 * s + 32), ksigns32(a1)));
            i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(p0, _mm256_set1_epi16((short)(2 * (a0 >> 28) + 1))));
            i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(p1, _mm256_set1_epi16((short)(2 * (a1 >> 28) + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)),
                              _mm256_set1_ps(ab[b].d * (h2f(blk[b].d) * 0.125f)), acc);
    }
    return hsum8(acc);
}

static float dot_iq2_xs(const void *w, const void *a, int64_t n) {
    KQ(blk_iq2_xs);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int s = 0; s < 8; s += 2) {
            __m256i p[2];
            for (int h = 0; h < 2; h++) {
                const uint8_t *qq = q + 8 * (s + h);
                uint16_t k0 = rd16u(qq), k1 = rd16u(qq + 2), k2 = rd16u(qq + 4), k3 = rd16u(qq + 6);
                __m256i g = grid8x4(llk_iq2xs_grid, k0 & 511, k1 & 511, k2 & 511, k3 & 511);
                __m256i sg = grid8x4(llk_ksigns64, k0 >> 9, k1 >> 9, k2 >> 9, k3 >> 9);
                p[h] = _mm256_maddubs_epi16(g, _mm256_sign_epi8(XK(b, 32 * (s + h)), sg));
            }
            const uint8_t s0 = blk[b].scales[s], s1 = blk[b].scales[s + 1];
            i0 = _mm256_add_epi32(i0, scale2(p[0], 2 * (s0 & 15) + 1, 2 * (s0 >> 4) + 1));
            i1 = _mm256_add_epi32(i1, scale2(p[1], 2 * (s1 & 15) + 1, 2 * (s1 >> 4) + 1));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)),
                              _mm256_set1_ps(ab[b].d * (h2f(blk[b].d) * 0.125f)), acc);
    }
    return hsum8(acc);
}

static float dot_iq2_s(const void *w, const void *a, int64_t n) {
    KQ(blk_iq2_s);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int s = 0; s < 8; s += 2) {
            __m256i p[2];
            for (int h = 0; h < 2; h++) {
                const int t = s + h, qh = blk[b].qh[t];
                __m256i g = grid8x4(llk_iq2s_grid, q[4 * t] | (qh & 3) << 8, q[4 * t + 1] | (qh & 12) << 6,
                                    q[4 * t + 2] | (qh & 48) << 4, q[4 * t + 3] | (qh & 192) << 2);
                p[h] = _mm256_maddubs_epi16(g, _mm256_sign_epi8(XK(b, 32 * t), sign_bits32(blk[b].signs + 4 * t)));
            }
            const uint8_t s0 = blk[b].scales[s], s1 = blk[b].scales[s + 1];
            i0 = _mm256_add_epi32(i0, scale2(p[0], 2 * (s0 & 15) + 1, 2 * (s0 >> 4) + 1));
            i1 = _mm256_add_epi32(i1, scale2(p[1], 2 * (s1 & 15) + 1, 2 * (s1 >> 4) + 1));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)),
                              _mm256_set1_ps(ab[b].d * (h2f(blk[b].d) * 0.125f)), acc);
    }
    return hsum8(acc);
}

/* eight 4-byte grid entries -> 32 bytes */
static inline __m256i grid4x8(const uint32_t *grid, const int i[8]) {
    return _mm256_set_epi32((int)grid[i[7]], (int)grid[i[6]], (int)grid[i[5]], (int)grid[i[4]],
                            (int)grid[i[3]], (int)grid[i[2]], (int)grid[i[1]], (int)grid[i[0]]);
}

static float dot_iq3_xxs(const void *w, const void *a, int64_t n) {
    KQ(blk_iq3_xxs);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int s = 0; s < 8; s += 2) {
            __m256i p[2];
            short sc[2];
            for (int h = 0; h < 2; h++) {
                const int t = s + h;
                const int idx[8] = {q[8 * t], q[8 * t + 1], q[8 * t + 2], q[8 * t + 3],
                                    q[8 * t + 4], q[8 * t + 5], q[8 * t + 6], q[8 * t + 7]};
                uint32_t aux = rd32u(blk[b].sas + 4 * t);
                p[h] = _mm256_maddubs_epi16(grid4x8(llk_iq3xxs_grid, idx), _mm256_sign_epi8(XK(b, 32 * t), ksigns32(aux)));
                sc[h] = (short)(2 * (aux >> 28) + 1);
            }
            i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(p[0], _mm256_set1_epi16(sc[0])));
            i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(p[1], _mm256_set1_epi16(sc[1])));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)),
                              _mm256_set1_ps(ab[b].d * (h2f(blk[b].d) * 0.25f)), acc);
    }
    return hsum8(acc);
}

static float dot_iq3_s(const void *w, const void *a, int64_t n) {
    KQ(blk_iq3_s);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
        for (int s = 0; s < 8; s += 2) {
            __m256i p[2];
            for (int h = 0; h < 2; h++) {
                const int t = s + h, qh = blk[b].qh[t];
                int idx[8];
                for (int j = 0; j < 8; j++) idx[j] = q[8 * t + j] | ((qh >> j) & 1) << 8;
                p[h] = _mm256_maddubs_epi16(grid4x8(llk_iq3s_grid, idx),
                                            _mm256_sign_epi8(XK(b, 32 * t), sign_bits32(blk[b].signs + 4 * t)));
            }
            const uint8_t sc = blk[b].scales[s >> 1];   /* sub-blocks s and s + 1 */
            i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(p[0], _mm256_set1_epi16((short)(1 + 2 * (sc & 15)))));
            i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(p[1], _mm256_set1_epi16((short)(1 + 2 * (sc >> 4)))));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(i0, i1)),
                              _mm256_set1_ps(ab[b].d * h2f(blk[b].d)), acc);
    }
    return hsum8(acc);
}

/* --- IQ1_S / IQ1_M: levels 8 * grid + delta (-9 .. 9) built in bytes, then as a signed dot --- */

/* four int8 grid entries (-1, 0, 1) times 8 plus the deltas (+1 / -1 per entry) */
static inline __m256i iq1_levels(int i0, int i1, int i2, int i3, __m256i delta) {
    __m256i g = grid8x4(llk_iq1s_grid, i0, i1, i2, i3);
    g = _mm256_add_epi8(g, g); g = _mm256_add_epi8(g, g); g = _mm256_add_epi8(g, g);
    return _mm256_add_epi8(g, delta);
}
/* i16 pair sums of lv * x for signed lv: |lv| x sign(x, lv) (|lv| <= 9: no saturation) */
static inline __m256i sdot16(__m256i lv, __m256i x) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(lv, lv), _mm256_sign_epi8(x, lv));
}

static float dot_iq1_s(const void *w, const void *a, int64_t n) {
    KQ(blk_iq1_s);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int s = 0; s < 8; s++) {
            const int h = rd16u(blk[b].qh + 2 * s);
            __m256i delta = _mm256_set1_epi8(h & 0x8000 ? -1 : 1);
            __m256i lv = iq1_levels(q[4 * s] | (h & 7) << 8, q[4 * s + 1] | (h & 0x38) << 5,
                                    q[4 * s + 2] | (h & 0x1c0) << 2, q[4 * s + 3] | (h & 0xe00) >> 1, delta);
            __m256i p = sdot16(lv, XK(b, 32 * s));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, _mm256_set1_epi16((short)(2 * ((h >> 12) & 7) + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(ab[b].d * (h2f(blk[b].d) * 0.125f)), acc);
    }
    return hsum8(acc);
}

static float dot_iq1_m(const void *w, const void *a, int64_t n) {
    KQ(blk_iq1_m);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        PREFETCH_AHEAD(&blk[b], sizeof *blk);
        const uint8_t *q = blk[b].qs;
        uint16_t sw[4];
        llk_half dh = 0;
        for (int j = 0; j < 4; j++) {
            sw[j] = rd16u(blk[b].scales + 2 * j);
            dh |= (llk_half)((sw[j] >> 12) << (4 * j));
        }
        __m256i isum = _mm256_setzero_si256();
        for (int s = 0; s < 8; s++) {
            const int h0 = blk[b].qh[2 * s], h1 = blk[b].qh[2 * s + 1];   /* nibbles of entries 4s .. 4s+3 */
            /* +1 or -1 (-1LL: 0xff in every byte) for the 8 elements of each entry */
            __m256i delta = _mm256_set_epi64x(h1 & 0x80 ? -1LL : 0x0101010101010101LL,
                                              h1 & 0x08 ? -1LL : 0x0101010101010101LL,
                                              h0 & 0x80 ? -1LL : 0x0101010101010101LL,
                                              h0 & 0x08 ? -1LL : 0x0101010101010101LL);
            __m256i lv = iq1_levels(q[4 * s] | (h0 & 7) << 8, q[4 * s + 1] | (h0 & 0x70) << 4,
                                    q[4 * s + 2] | (h1 & 7) << 8, q[4 * s + 3] | (h1 & 0x70) << 4, delta);
            const int sc = sw[s >> 1] >> (6 * (s & 1));   /* 3-bit scales of groups 2s, 2s + 1 */
            isum = _mm256_add_epi32(isum, scale2(sdot16(lv, XK(b, 32 * s)), 2 * (sc & 7) + 1, 2 * ((sc >> 3) & 7) + 1));
        }
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(ab[b].d * (llk_h2f(dh) * 0.125f)), acc);
    }
    return hsum8(acc);
}

/* --- TQ2_0: levels q - 1 with q = 0..2: maddubs(q, x), minus the activations' sum ------------- */

static float dot_tq2_0(const void *w, const void *a, int64_t n) {
    KQ(blk_tq2_0);
    const __m256i m2 = _mm256_set1_epi8(3), ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
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
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(ab[b].d * h2f(blk[b].d)), acc);
    }
    return hsum8(acc);
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
    __m256 acc = _mm256_setzero_ps();
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
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(ab[b].d * h2f(blk[b].d)), acc);
    }
    return hsum8(acc);
}

/* --- MXFP4: 32-blocks against q8_32 activations, table levels as IQ4_NL's ---------------------- */

static float dot_mxfp4(const void *w, const void *a, int64_t n) {
    const blk_mxfp4 *blk = (const blk_mxfp4 *)w;
    const llk_block_q8_32x8 *ab = (const llk_block_q8_32x8 *)a;
    const __m128i t = _mm_loadu_si128((const __m128i *)llk_mxfp4_values);
    const __m256i lut = _mm256_set_m128i(t, t);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const int64_t nb = n / 32;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        PREFETCH_AHEAD(&blk[b], 2 * sizeof *blk);
        __m256i p0 = dot_ss(_mm256_shuffle_epi8(lut, nib32(blk[b].qs)), _mm256_loadu_si256((const __m256i *)ACT_Q(ab, b)));
        __m256i p1 = dot_ss(_mm256_shuffle_epi8(lut, nib32(blk[b + 1].qs)), _mm256_loadu_si256((const __m256i *)ACT_Q(ab, b + 1)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(llk_e8m0_half(blk[b].e) * ACT_D(ab, b)), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p1), _mm256_set1_ps(llk_e8m0_half(blk[b + 1].e) * ACT_D(ab, b + 1)), acc1);
    }
    if (b < nb) {
        __m256i p0 = dot_ss(_mm256_shuffle_epi8(lut, nib32(blk[b].qs)), _mm256_loadu_si256((const __m256i *)ACT_Q(ab, b)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p0), _mm256_set1_ps(llk_e8m0_half(blk[b].e) * ACT_D(ab, b)), acc0);
    }
    return hsum8(_mm256_add_ps(acc0, acc1));
}

static void llk_fill_256_iq(llk_kernels *k) {
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
