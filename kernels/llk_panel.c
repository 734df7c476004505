/* llk_panel.c — packed weights: rows interleaved eight at a time (panels), the layout of the
 * matrix x matrix kernels, and the reference panel kernels that are the spec of their SIMD twins.
 *
 * Why: a prompt multiplies every weight row with hundreds of tokens. Row by row, each token's
 * activations are read again for every row (a byte per multiply-add, from L2 or L3). In a panel,
 * one 32-byte load holds four weights of each of eight rows, so a token's four activation bytes,
 * broadcast once, meet eight rows at a time, and the eight rows' integer sums come out in the
 * eight lanes of one register: no horizontal reductions, no re-reads.
 *
 * The summation contract is the legacy types' (llk_ref.c, legacy_dot): per row, block b = 8g + j
 * goes into lane j by one FMA with dw * dx (the offset of Q4_0 and Q5_0 in its integer), the mins term of the _1 types into a second lane set, lanes summed by
 * llk_sum8. A panel stores its entries lane-major (all of lane 0's blocks, then lane 1's, ...), so
 * that order is also the memory order. Packed or not, a row gives the same float bit for bit.
 *
 * Which levels pack is the kernel table's business (llk_kernels.panel): the decoder packs a
 * weight when the chosen level has a panel kernel for its type and the row count is a multiple of
 * 8; the reference kernels here back llk_matmul_packed at LLK_ISA_REF (tests hold levels together).
 */
#include <stdlib.h>
#include <string.h>
#include "llk_internal.h"
#include "llk_pool.h"

/* --- layouts ----------------------------------------------------------------------------------- */

size_t llk_panel_bytes_of(int type, int64_t n_cols) {
    if (n_cols <= 0 || n_cols % LLK_QK) return 0;
    const size_t nb = (size_t)(n_cols / LLK_QK);
    switch (type) {
    case LLK_TYPE_Q4_0: return nb * sizeof(blk_q4_0x8);
    case LLK_TYPE_Q4_1: return nb * sizeof(blk_q4_1x8);
    case LLK_TYPE_Q5_0: return nb * sizeof(blk_q5_0x8);
    case LLK_TYPE_Q5_1: return nb * sizeof(blk_q5_1x8);
    case LLK_TYPE_Q8_0: return nb * sizeof(blk_q8_0x8);
    case LLK_TYPE_Q4_K: return n_cols % LLK_QKK ? 0 : (size_t)(n_cols / LLK_QKK) * sizeof(blk_q4_Kx8);
    case LLK_TYPE_Q5_K: return n_cols % LLK_QKK ? 0 : (size_t)(n_cols / LLK_QKK) * sizeof(blk_q5_Kx8);
    case LLK_TYPE_Q6_K: return n_cols % LLK_QKK ? 0 : (size_t)(n_cols / LLK_QKK) * sizeof(blk_q6_Kx8);
    case LLK_TYPE_IQ4_XS: return n_cols % LLK_QKK ? 0 : (size_t)(n_cols / LLK_QKK) * sizeof(blk_iq4_xsx8);
    default: return 0;
    }
}

/* Level of element k (< 32) of row r in an entry's quants: the unsigned nibble (Q4_0, Q4_1), the
 * unsigned nibble and the fifth bit (Q5_0, Q5_1: the 32 bytes of bits, then the nibbles), the
 * signed byte (Q8_0). */
static inline int u_q4x8(const uint8_t *qs, int r, int k) {
    const uint8_t b = qs[32 * ((k & 15) >> 2) + 4 * r + (k & 3)];
    return k < 16 ? (b & 15) : (b >> 4);
}
static inline int u_q5x8(const uint8_t *qh, int r, int k) {
    return u_q4x8(qh + 32, r, k) | ((qh[4 * r + (k & 3)] >> (2 * ((k & 15) >> 2) + (k >> 4))) & 1) << 4;
}
static inline int u_q8_0x8(const uint8_t *qs, int r, int k) {
    return (int8_t)qs[32 * (k >> 2) + 4 * r + (k & 3)];
}

/* A legacy type's panel: its block and entry sizes, the float16 fields that head each block (d;
 * d and m), whether the fifth bits follow them, the 4-byte chunks of quants, their levels, and the
 * offset (legacy_dot's off / has_m). */
typedef struct {
    size_t blk, ent; int head, has_qh, n_chunks; int (*u)(const uint8_t *, int, int); int off;
} legacy_panel;
static const legacy_panel P_Q4_0 = {sizeof(blk_q4_0), sizeof(blk_q4_0x8), 1, 0, 4, u_q4x8, -8};
static const legacy_panel P_Q4_1 = {sizeof(blk_q4_1), sizeof(blk_q4_1x8), 2, 0, 4, u_q4x8, 0};
static const legacy_panel P_Q5_0 = {sizeof(blk_q5_0), sizeof(blk_q5_0x8), 1, 1, 4, u_q5x8, -16};
static const legacy_panel P_Q5_1 = {sizeof(blk_q5_1), sizeof(blk_q5_1x8), 2, 1, 4, u_q5x8, 0};
static const legacy_panel P_Q8_0 = {sizeof(blk_q8_0), sizeof(blk_q8_0x8), 1, 0, 8, u_q8_0x8, 0};

static const legacy_panel *legacy_of(int type) {
    switch (type) {
    case LLK_TYPE_Q4_0: return &P_Q4_0;
    case LLK_TYPE_Q4_1: return &P_Q4_1;
    case LLK_TYPE_Q5_0: return &P_Q5_0;
    case LLK_TYPE_Q5_1: return &P_Q5_1;
    case LLK_TYPE_Q8_0: return &P_Q8_0;
    default: return NULL;
    }
}

/* Q4_K and Q5_K: row r's super-block into entry e: its scales and mins unpacked, its quants in
 * 4-byte chunks interleaved (chunk k of row r at 32k + 4r within each 256-byte quarter), Q5_K's
 * fifth bits the same way after them. */
static void put_k4(uint8_t *e8, int r, llk_half d, llk_half dmin, const uint8_t *scales,
                   const uint8_t *qs, const uint8_t *qh) {
    blk_q5_Kx8 *e = (blk_q5_Kx8 *)e8;    /* Q4_K x 8 is its prefix */
    e->d[r] = d;
    e->dmin[r] = dmin;
    for (int g = 0; g < 8; g++) {
        int sc, mn;
        llk_k4_scale_min(scales, g, &sc, &mn);
        e->sc[g][r] = (uint8_t)sc;
        e->mn[g][r] = (uint8_t)mn;
    }
    for (int c = 0; c < 4; c++)
        for (int k = 0; k < 8; k++) memcpy(e->qs + 256 * c + 32 * k + 4 * r, qs + 32 * c + 4 * k, 4);
    if (qh)
        for (int k = 0; k < 8; k++) memcpy(e->qh + 32 * k + 4 * r, qh + 4 * k, 4);
}
static void put_q4_K(uint8_t *e8, int r, const uint8_t *B8) {
    const blk_q4_K *B = (const blk_q4_K *)B8;
    put_k4(e8, r, B->d, B->dmin, B->scales, B->qs, NULL);
}
static void put_q5_K(uint8_t *e8, int r, const uint8_t *B8) {
    const blk_q5_K *B = (const blk_q5_K *)B8;
    put_k4(e8, r, B->d, B->dmin, B->scales, B->qs, B->qh);
}

/* Q6_K: the scales by group, the low and high bits in 4-byte chunks as blk_q6_Kx8 says. */
static void put_q6_K(uint8_t *e8, int r, const uint8_t *B8) {
    blk_q6_Kx8 *e = (blk_q6_Kx8 *)e8;
    const blk_q6_K *B = (const blk_q6_K *)B8;
    e->d[r] = B->d;
    for (int g = 0; g < 16; g++) e->sc[g][r] = B->scales[g];
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 8; k++) {
            memcpy(&e->ql[h][0][k][4 * r], B->ql + 64 * h + 4 * k, 4);
            memcpy(&e->ql[h][1][k][4 * r], B->ql + 64 * h + 32 + 4 * k, 4);
            memcpy(&e->qh[h][k][4 * r], B->qh + 32 * h + 4 * k, 4);
        }
}

/* IQ4_XS: the scales unpacked (minus 32), each group's 16 bytes in 4-byte chunks interleaved. */
static void put_iq4_xs(uint8_t *e8, int r, const uint8_t *B8) {
    blk_iq4_xsx8 *e = (blk_iq4_xsx8 *)e8;
    const blk_iq4_xs *B = (const blk_iq4_xs *)B8;
    e->d[r] = B->d;
    for (int g = 0; g < 8; g++) {
        e->ls[g][r] = (int8_t)llk_iq4xs_scale(B, g);
        for (int k = 0; k < 4; k++) memcpy(e->qs + 128 * g + 32 * k + 4 * r, B->qs + 16 * g + 4 * k, 4);
    }
}

/* K-quant panels [p0, p1): one entry per super-block, in order, each filled row by row. */
static void pack_super(void (*put)(uint8_t *, int, const uint8_t *), size_t blk, size_t ent,
                       const uint8_t *w, size_t row_stride, int64_t n_cols, int64_t p0, int64_t p1,
                       uint8_t *out) {
    const int64_t nb = n_cols / LLK_QKK;
    uint8_t *e = out;
    for (int64_t p = p0; p < p1; p++) {
        const uint8_t *rows = w + (size_t)p * LLK_PANEL_ROWS * row_stride;
        for (int64_t b = 0; b < nb; b++, e += ent)
            for (int r = 0; r < LLK_PANEL_ROWS; r++) put(e, r, rows + (size_t)r * row_stride + (size_t)b * blk);
    }
}

/* Legacy panels [p0, p1): for each entry (lane-major), the 8 rows' scales, Q5_0's and Q5_1's fifth
 * bits rearranged (blk_q5_0x8), then their 4-byte chunks interleaved (chunk c of row r at 32c + 4r),
 * the row's bytes as they are. */
void llk_panel_pack_range(int type, const uint8_t *w, size_t row_stride, int64_t n_cols,
                          int64_t p0, int64_t p1, uint8_t *out) {
    void (*put)(uint8_t *, int, const uint8_t *) = NULL;   /* the super-block types' entries */
    size_t blk = 0, ent = 0;
    switch (type) {
    case LLK_TYPE_Q4_K: put = put_q4_K; blk = sizeof(blk_q4_K); ent = sizeof(blk_q4_Kx8); break;
    case LLK_TYPE_Q5_K: put = put_q5_K; blk = sizeof(blk_q5_K); ent = sizeof(blk_q5_Kx8); break;
    case LLK_TYPE_Q6_K: put = put_q6_K; blk = sizeof(blk_q6_K); ent = sizeof(blk_q6_Kx8); break;
    case LLK_TYPE_IQ4_XS: put = put_iq4_xs; blk = sizeof(blk_iq4_xs); ent = sizeof(blk_iq4_xsx8); break;
    default: break;
    }
    if (put) {
        pack_super(put, blk, ent, w, row_stride, n_cols, p0, p1, out);
        return;
    }
    const legacy_panel *L = legacy_of(type);
    const int64_t nb = n_cols / LLK_QK;
    const size_t pb = llk_panel_bytes_of(type, n_cols);
    for (int64_t p = p0; p < p1; p++) {
        uint8_t *e = out + (size_t)(p - p0) * pb;
        const uint8_t *rows = w + (size_t)p * LLK_PANEL_ROWS * row_stride;
        for (int j = 0; j < 8; j++)
            for (int64_t b = j; b < nb; b += 8, e += L->ent) {
                for (int r = 0; r < LLK_PANEL_ROWS; r++) {
                    const uint8_t *B = rows + (size_t)r * row_stride + (size_t)b * L->blk;
                    for (int h = 0; h < L->head; h++) memcpy(e + 16 * h + 2 * r, B + 2 * h, 2);   /* d, m */
                    const uint8_t *qs = B + 2 * L->head + 4 * L->has_qh;
                    uint8_t *eq = e + 16 * L->head + 32 * L->has_qh;
                    for (int c = 0; c < L->n_chunks; c++) memcpy(eq + 32 * c + 4 * r, qs + 4 * c, 4);
                    if (L->has_qh) {   /* the block's 32 fifth bits as blk_q5_0x8 lays them out */
                        uint32_t qh;
                        memcpy(&qh, B + 2 * L->head, 4);
                        uint8_t *eh = e + 16 * L->head;
                        for (int i = 0; i < 4; i++) {
                            uint8_t v = 0;
                            for (int c = 0; c < 4; c++)
                                for (int h = 0; h < 2; h++) v |= (uint8_t)(((qh >> (16 * h + 4 * c + i)) & 1) << (2 * c + h));
                            eh[4 * r + i] = v;
                        }
                    }
                }
            }
    }
}

/* --- reference panel kernels -------------------------------------------------------------------- */

/* One row of a panel against one activation row: legacy_dot's contract, entries in memory order. */
static float panel_row_ref(const legacy_panel *L, const uint8_t *P, int64_t nb, int r,
                           const llk_block_q8_32x8 *A) {
    float acc[8] = {0}, accx[8] = {0}, v[8];
    const uint8_t *e = P;
    for (int j = 0; j < 8; j++)
        for (int64_t b = j; b < nb; b += 8, e += L->ent) {
            llk_half h, hm;
            memcpy(&h, e + 2 * r, 2);
            const float dw = llk_h2f(h);
            int I = 0;
            for (int k = 0; k < LLK_QK; k++) I += (L->u(e + 16 * L->head, r, k) + L->off) * ACT_Q(A, b)[k];
            acc[j] = fmaf(dw * ACT_D(A, b), (float)I, acc[j]);
            if (L->head == 2) {                   /* m, where the type has one */
                memcpy(&hm, e + 16 + 2 * r, 2);
                accx[j] = fmaf(llk_h2f(hm), ACT_S(A, b), accx[j]);
            }
        }
    for (int j = 0; j < 8; j++) v[j] = acc[j] + accx[j];
    return llk_sum8(v);
}

static void panel_ref(const legacy_panel *L, const void *w, size_t pb, int64_t n_panels,
                      int64_t n_cols, const void *a, size_t as, int64_t n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_cols / LLK_QK;
    for (int64_t p = 0; p < n_panels; p++)
        for (int64_t t = 0; t < n_tok; t++)
            for (int r = 0; r < LLK_PANEL_ROWS; r++)
                y[t * ldy + LLK_PANEL_ROWS * p + r] = panel_row_ref(
                    L, (const uint8_t *)w + (size_t)p * pb, nb, r,
                    (const llk_block_q8_32x8 *)((const uint8_t *)a + (size_t)t * as));
}

static void panel_q4_0_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_ref(&P_Q4_0, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_q4_1_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_ref(&P_Q4_1, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_q5_0_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_ref(&P_Q5_0, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_q5_1_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_ref(&P_Q5_1, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_q8_0_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_ref(&P_Q8_0, w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}

/* Q4_K and Q5_K (qh: the fifth bits, or NULL): row r's term of one super-block (entry e) in
 * dot_q4_K's contract (llk_ref.c, dot_q5_K's is the same), its integers read from the panel. */
static float term_k4(const uint8_t *e8, const uint8_t *qh, int r, const llk_block_q8_256 *A) {
    const blk_q4_Kx8 *e = (const blk_q4_Kx8 *)e8;
    int acc = 0, accm = 0;
    for (int g = 0; g < 8; g++) {
        int tg = 0;
        for (int l = 0; l < 32; l++) {
            const int at = 32 * (l >> 2) + 4 * r + (l & 3);
            const uint8_t q = e->qs[256 * (g >> 1) + at];
            const int hi = qh ? ((qh[at] >> g) & 1) << 4 : 0;
            tg += (((g & 1) ? q >> 4 : q & 15) | hi) * A->qs[32 * g + l];
        }
        acc += e->sc[g][r] * tg;
        accm += e->mn[g][r] * (A->bsums[2 * g] + A->bsums[2 * g + 1]);
    }
    return A->d * (llk_h2f(e->d[r]) * (float)acc - llk_h2f(e->dmin[r]) * (float)accm);
}
static float term_q4_K(const uint8_t *e8, int r, const llk_block_q8_256 *A) { return term_k4(e8, NULL, r, A); }
static float term_q5_K(const uint8_t *e8, int r, const llk_block_q8_256 *A) {
    return term_k4(e8, ((const blk_q5_Kx8 *)e8)->qh, r, A);
}

/* Q6_K: the same in dot_q6_K's contract; element 128h + 32s + 4k + i of row r from the
 * interleaved low and high bits. */
static float term_q6_K(const uint8_t *e8, int r, const llk_block_q8_256 *A) {
    const blk_q6_Kx8 *e = (const blk_q6_Kx8 *)e8;
    int acc = 0;
    for (int g = 0; g < 16; g++) {
        int tg = 0;
        for (int i = 16 * g; i < 16 * g + 16; i++) {
            const int h = i >> 7, sh = (i >> 5) & 3, l = i & 31, k = l >> 2, c = 4 * r + (l & 3);
            const int lo = (e->ql[h][sh & 1][k][c] >> (4 * (sh >> 1))) & 15;
            const int hi = (e->qh[h][k][c] >> (2 * sh)) & 3;
            tg += ((lo | hi << 4) - 32) * A->qs[i];
        }
        acc += e->sc[g][r] * tg;
    }
    return A->d * llk_h2f(e->d[r]) * (float)acc;
}

/* IQ4_XS: the same in dot_iq4_xs's contract. */
static float term_iq4_xs(const uint8_t *e8, int r, const llk_block_q8_256 *A) {
    const blk_iq4_xsx8 *e = (const blk_iq4_xsx8 *)e8;
    int acc = 0;
    for (int g = 0; g < 8; g++) {
        int tg = 0;
        for (int l = 0; l < 32; l++) {
            const uint8_t q = e->qs[128 * g + 32 * ((l & 15) >> 2) + 4 * r + (l & 3)];
            tg += llk_iq4_values[l < 16 ? q & 15 : q >> 4] * A->qs[32 * g + l];
        }
        acc += e->ls[g][r] * tg;
    }
    return A->d * llk_h2f(e->d[r]) * (float)acc;
}

/* The K-quant contract's last step, per row and token: the super-blocks' terms added in order
 * from 0.0f. */
static void panel_kref(float (*term)(const uint8_t *, int, const llk_block_q8_256 *), size_t ent,
                       const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                       size_t as, int64_t n_tok, float *y, int64_t ldy) {
    const int64_t nb = n_cols / LLK_QKK;
    for (int64_t p = 0; p < n_panels; p++)
        for (int64_t t = 0; t < n_tok; t++) {
            const llk_block_q8_256 *ab = (const llk_block_q8_256 *)((const uint8_t *)a + (size_t)t * as);
            for (int r = 0; r < LLK_PANEL_ROWS; r++) {
                const uint8_t *e = (const uint8_t *)w + (size_t)p * pb;
                float s = 0.0f;
                for (int64_t b = 0; b < nb; b++, e += ent) s += term(e, r, &ab[b]);
                y[t * ldy + LLK_PANEL_ROWS * p + r] = s;
            }
        }
}

static void panel_q4_K_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_kref(term_q4_K, sizeof(blk_q4_Kx8), w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_q5_K_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_kref(term_q5_K, sizeof(blk_q5_Kx8), w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_iq4_xs_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                             size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_kref(term_iq4_xs, sizeof(blk_iq4_xsx8), w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}
static void panel_q6_K_ref(const void *w, size_t pb, int64_t n_panels, int64_t n_cols, const void *a,
                           size_t as, int64_t n_tok, float *y, int64_t ldy) {
    panel_kref(term_q6_K, sizeof(blk_q6_Kx8), w, pb, n_panels, n_cols, a, as, n_tok, y, ldy);
}

static llk_panel_fn panel_ref_for(int type) {
    switch (type) {
    case LLK_TYPE_Q4_0: return panel_q4_0_ref;
    case LLK_TYPE_Q4_1: return panel_q4_1_ref;
    case LLK_TYPE_Q5_0: return panel_q5_0_ref;
    case LLK_TYPE_Q5_1: return panel_q5_1_ref;
    case LLK_TYPE_Q8_0: return panel_q8_0_ref;
    case LLK_TYPE_Q4_K: return panel_q4_K_ref;
    case LLK_TYPE_Q5_K: return panel_q5_K_ref;
    case LLK_TYPE_IQ4_XS: return panel_iq4_xs_ref;
    case LLK_TYPE_Q6_K: return panel_q6_K_ref;
    default: return NULL;
    }
}

/* --- public entry points ------------------------------------------------------------------------- */

static llk_panel_fn panel_fn(int isa, int type) {
    if (type < 0 || type >= LLK_N_TYPES) return NULL;
    if (isa == LLK_ISA_REF) return panel_ref_for(type);
    const llk_kernels *k = llk_kernels_for(isa);
    return k ? k->panel[type] : NULL;
}

int llk_isa_packs(int isa, int type) {
    if (isa == LLK_ISA_REF) return 0;           /* the reference level runs rows as read */
    return panel_fn(isa, type) != NULL;
}

size_t llk_packed_bytes(int type, int64_t n_rows, int64_t n_cols) {
    if (n_rows <= 0 || n_rows % LLK_PANEL_ROWS) return 0;
    return (size_t)(n_rows / LLK_PANEL_ROWS) * llk_panel_bytes_of(type, n_cols);
}

typedef struct { int type; const uint8_t *w; size_t row_stride; int64_t n_cols; uint8_t *out; size_t pb; } pack_job;

static void pack_fn(void *arg, int64_t b, int64_t e, int ith) {
    (void)ith;
    const pack_job *j = (const pack_job *)arg;
    llk_panel_pack_range(j->type, j->w, j->row_stride, j->n_cols, b, e, j->out + (size_t)b * j->pb);
}

llk_status llk_pack(llk_pool *pool, int type, const void *w, size_t row_stride, int64_t n_rows,
                    int64_t n_cols, void *out) {
    if (!w || !out || !llk_packed_bytes(type, n_rows, n_cols)) return LLK_ERR_ARG;
    if (row_stride < llk_row_bytes(type, n_cols)) return LLK_ERR_ARG;
    pack_job j = {type, (const uint8_t *)w, row_stride, n_cols, (uint8_t *)out,
                  llk_panel_bytes_of(type, n_cols)};
    return llk_pool_run(pool, n_rows / LLK_PANEL_ROWS, 16, pack_fn, &j);
}

static void packed_fn(void *arg, int64_t b, int64_t e, int ith) {
    (void)ith;
    const llk_mm_job *j = (const llk_mm_job *)arg;
    llk_mm_rows(j, b * LLK_PANEL_ROWS, e * LLK_PANEL_ROWS);
}

llk_status llk_matmul_packed(llk_pool *pool, int isa, int type, const void *packed, int64_t n_rows,
                             int64_t n_cols, const float *x, int64_t ldx, int64_t n_tok, float *y,
                             int64_t ldy) {
    const llk_kernels *k = llk_kernels_for(isa);
    const llk_traits *t = llk_traits_of(type);
    llk_panel_fn fn = panel_fn(isa, type);
    if (!k) return LLK_ERR_ISA;
    if (!t || !fn) return LLK_ERR_TYPE;
    if (!packed || !llk_packed_bytes(type, n_rows, n_cols)) return LLK_ERR_ARG;
    if (n_tok < 0 || (n_tok > 0 && (!x || !y || ldx < n_cols || ldy < n_rows))) return LLK_ERR_ARG;
    if (n_tok == 0) return LLK_OK;
    size_t act_bytes = llk_act_row_bytes(type, n_cols);
    uint8_t *a = (uint8_t *)malloc(act_bytes * (size_t)n_tok);
    if (!a) return LLK_ERR_NOMEM;
    for (int64_t tk = 0; tk < n_tok; tk++)
        llk_quantize_act_panel(k, type, x + tk * ldx, a + (size_t)tk * act_bytes, n_cols);
    llk_mm_job j;
    memset(&j, 0, sizeof j);
    j.w = (const uint8_t *)packed; j.a = a; j.act_bytes = act_bytes; j.n_cols = n_cols;
    j.n_tok = n_tok; j.ldy = ldy; j.y = y;
    j.panel = fn; j.panel_bytes = llk_panel_bytes_of(type, n_cols);
    llk_status st = llk_pool_run(pool, n_rows / LLK_PANEL_ROWS, llk_panels_per_chunk(n_tok), packed_fn, &j);
    free(a);
    return st;
}
