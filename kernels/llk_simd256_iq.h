/* llk_simd256_iq.h — the 256-bit dot products of the grid types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS
 * and IQ3_S against q8_256 activations. Part of llk_simd256.h and included by it only: it uses
 * that file's helpers (hsum8, h2f, scale2, KQ, XK) and its includer's bits32_x16, and is compiled
 * once per ISA file like the rest. Twins: llk_ref_iq.c.
 *
 * Shape, per sub-block of 32: the grid entries (unsigned magnitudes, 8 or 4 bytes each) are looked
 * up from the tables in llk_iq_tables.h and assembled into one ymm; the signs go onto the
 * activation bytes (sign_epi8 with +1 / -1 bytes from llk_ksigns64, or from the type's sign bits);
 * maddubs gives i16 pair sums (magnitudes <= 62, activations <= 127: no saturation), one madd
 * weights them by the integer scale (2 ls + 1 or 1 + 2 sc), and one FMA per super-block applies
 * d * dx times the type's constant.
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

static void llk_fill_256_iq(llk_kernels *k) {
    k->dot[LLK_TYPE_IQ2_XXS] = dot_iq2_xxs;
    k->dot[LLK_TYPE_IQ2_XS] = dot_iq2_xs;
    k->dot[LLK_TYPE_IQ2_S] = dot_iq2_s;
    k->dot[LLK_TYPE_IQ3_XXS] = dot_iq3_xxs;
    k->dot[LLK_TYPE_IQ3_S] = dot_iq3_s;
}

#endif /* LLK_SIMD256_IQ_H */
