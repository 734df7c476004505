/* llk_ops.c — the operations built on the per-row kernels: matrix x vector and matrix x matrix
 * (threaded by the pool), and the element-wise, normalization, RoPE and attention steps of a
 * decoder. Plain C: these loops are either memory-bound on the weights (the matrix products,
 * whose inner dot kernels are the per-ISA ones) or a small share of the time.
 */
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "llk_internal.h"
#include "llk_threads.h"
#include "llk_pool.h"

#define ROWS_PER_CHUNK 16   /* fewest rows of W per pool chunk */
#define CHUNK_BYTES (128 * 1024) /* aim for chunks this big: each starts a new prefetch stream */
#define TOK_BLOCK 16        /* tokens per pass over a chunk of W rows in matmul */

static void *aligned_alloc64(size_t bytes) {
    if (bytes == 0) bytes = 64;
    bytes = (bytes + 63) & ~(size_t)63;
#if defined(_WIN32)
    return _aligned_malloc(bytes, 64);
#else
    void *p = NULL;
    return posix_memalign(&p, 64, bytes) ? NULL : p;
#endif
}
static void aligned_free64(void *p) {
#if defined(_WIN32)
    _aligned_free(p);
#else
    free(p);
#endif
}

/* --- matrix products ------------------------------------------------------------------------- */

/* Rows [r0, r1) of W against all tokens: W rows stay in L1 while token blocks stream past;
 * with a 1 x 4 kernel each weight block is unpacked once for four tokens. */
void llk_mm_rows(const llk_mm_job *j, int64_t r0, int64_t r1) {
    if (j->panel) {   /* packed W: r0 is a panel boundary (llk_mm_split), r1 one or the end */
        const int64_t p0 = r0 / LLK_PANEL_ROWS, p1 = (r1 + LLK_PANEL_ROWS - 1) / LLK_PANEL_ROWS;
        if (p1 > p0)
            j->panel(j->w + (size_t)p0 * j->panel_bytes, j->panel_bytes, p1 - p0, j->n_cols, j->a,
                     j->act_bytes, j->n_tok, j->y + p0 * LLK_PANEL_ROWS, j->ldy);
        return;
    }
    if (j->n_tok == 1) {
        for (int64_t r = r0; r < r1; r++)
            j->y[r] = j->dot(j->w + (size_t)r * j->row_stride, j->a, j->n_cols);
        return;
    }
    for (int64_t t0 = 0; t0 < j->n_tok; t0 += TOK_BLOCK) {
        int64_t t1 = t0 + TOK_BLOCK < j->n_tok ? t0 + TOK_BLOCK : j->n_tok;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *wr = j->w + (size_t)r * j->row_stride;
            int64_t t = t0;
            if (j->dot4) {
                for (; t + 4 <= t1; t += 4) {
                    float o[4];
                    j->dot4(wr, j->a + (size_t)t * j->act_bytes, j->act_bytes, j->n_cols, o);
                    for (int u = 0; u < 4; u++) j->y[(t + u) * j->ldy + r] = o[u];
                }
            }
            for (; t < t1; t++)
                j->y[t * j->ldy + r] = j->dot(wr, j->a + (size_t)t * j->act_bytes, j->n_cols);
        }
    }
}

int64_t llk_mm_split(const llk_mm_job *j, int64_t n_rows, int64_t k, int64_t n) {
    if (!j->panel) return n_rows * k / n;
    const int64_t n_panels = n_rows / LLK_PANEL_ROWS;
    return k == n ? n_rows : LLK_PANEL_ROWS * (n_panels * k / n);
}

typedef struct { llk_mm_job *mm; int64_t n_rows, rows_per_chunk; } mm_outer;

static void mm_chunk_fn(void *arg, int64_t b, int64_t e, int ith) {
    (void)ith;
    const mm_outer *o = (const mm_outer *)arg;
    int64_t r0 = b * o->rows_per_chunk, r1 = e * o->rows_per_chunk;
    if (r1 > o->n_rows) r1 = o->n_rows;
    llk_mm_rows(o->mm, r0, r1);
}

static llk_status mm_check(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                           int64_t n_cols, const llk_kernels **k, const llk_traits **t) {
    *t = llk_traits_of(type);
    if (!*t) return LLK_ERR_TYPE;
    *k = llk_kernels_for(isa);
    if (!*k) return LLK_ERR_ISA;
    if (n_rows < 0 || n_cols <= 0 || n_cols % (*t)->block_size) return LLK_ERR_ARG;
    if (n_rows > 0 && (!w || row_stride < llk_row_bytes(type, n_cols))) return LLK_ERR_ARG;
    return LLK_OK;
}

llk_status llk_matmul(llk_pool *pool, int isa, int type, const void *w, size_t row_stride,
                      int64_t n_rows, int64_t n_cols, const float *x, int64_t ldx,
                      int64_t n_tok, float *y, int64_t ldy) {
    const llk_kernels *k; const llk_traits *t;
    llk_status st = mm_check(isa, type, w, row_stride, n_rows, n_cols, &k, &t);
    if (st) return st;
    if (n_tok < 0 || (n_tok > 0 && (!x || !y || ldx < n_cols || ldy < n_rows))) return LLK_ERR_ARG;
    if (n_tok == 0 || n_rows == 0) return LLK_OK;
    size_t act_bytes = llk_act_row_bytes(type, n_cols);
    uint8_t *a = (uint8_t *)aligned_alloc64(act_bytes * (size_t)n_tok);
    if (!a) return LLK_ERR_NOMEM;
    for (int64_t tk = 0; tk < n_tok; tk++)
        llk_quantize_act_k(k, t->act, x + tk * ldx, a + (size_t)tk * act_bytes, n_cols);
    llk_mm_job j = {k->dot[type], k->dot4[type], (const uint8_t *)w, row_stride, a, act_bytes, n_cols, n_tok,
                ldy, y, NULL, 0};
    /* Chunks of ~CHUNK_BYTES of weights (a hardware prefetcher restarts at each one), but never
     * so few that a thread lacks work to balance: at least 8 chunks per thread. */
    int nth = pool ? llk_pool_size(pool) : 1;
    int64_t rpc = (int64_t)(CHUNK_BYTES / (row_stride ? row_stride : 1));
    if (rpc > n_rows / (8 * nth)) rpc = n_rows / (8 * nth);
    if (rpc < ROWS_PER_CHUNK) rpc = ROWS_PER_CHUNK;
    mm_outer o = {&j, n_rows, rpc};
    int64_t n_chunks = (n_rows + rpc - 1) / rpc;
    st = llk_pool_run(pool, n_chunks, 1, mm_chunk_fn, &o);
    aligned_free64(a);
    return st;
}

llk_status llk_matvec(llk_pool *pool, int isa, int type, const void *w, size_t row_stride,
                      int64_t n_rows, int64_t n_cols, const float *x, float *y) {
    return llk_matmul(pool, isa, type, w, row_stride, n_rows, n_cols, x, n_cols, 1, y, n_rows);
}

llk_status llk_mm_prepare(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                          int64_t n_cols, const void *a, int64_t n_tok, float *y, int64_t ldy,
                          llk_mm_job *out) {
    const llk_kernels *k; const llk_traits *t;
    llk_status st = mm_check(isa, type, w, row_stride, n_rows, n_cols, &k, &t);
    if (st) return st;
    if (n_tok < 0 || (n_tok > 0 && (!a || !y || ldy < n_rows))) return LLK_ERR_ARG;
    llk_mm_job j = {k->dot[type], k->dot4[type], (const uint8_t *)w, row_stride, (const uint8_t *)a,
                    llk_act_row_bytes(type, n_cols), n_cols, n_tok, ldy, y, NULL, 0};
    *out = j;
    return LLK_OK;
}

llk_status llk_matmul_part(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                           int64_t n_cols, const void *a, int64_t n_tok, float *y, int64_t ldy,
                           int ith, int nth) {
    if (nth < 1 || ith < 0 || ith >= nth) return LLK_ERR_ARG;
    llk_mm_job j;
    llk_status st = llk_mm_prepare(isa, type, w, row_stride, n_rows, n_cols, a, n_tok, y, ldy, &j);
    if (st) return st;
    int64_t r0 = n_rows * ith / nth, r1 = n_rows * (ith + 1) / nth;
    if (n_tok > 0) llk_mm_rows(&j, r0, r1);
    return LLK_OK;
}

/* --- normalization and element-wise ----------------------------------------------------------- */

/* The sum of squares of a row in double, in 8 running sums (element i into sum i % 8, then a fixed
 * tree): one order on every level, and no chain of dependent double adds (one add per element in
 * one chain took a prompt's norms ~1.5% of its time at 2048 values a row). */
static double sum_squares(const float *x, int64_t n) {
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) s[k] += (double)x[i + k] * x[i + k];
    for (; i < n; i++) s[i & 7] += (double)x[i] * x[i];
    return ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]));
}

llk_status llk_rms_norm(const float *x, const float *w, float *y, int64_t n_rows, int64_t n,
                        float eps) {
    if (n <= 0 || n_rows < 0 || !x || !y) return LLK_ERR_ARG;
    for (int64_t r = 0; r < n_rows; r++, x += n, y += n) {
        const double ss = sum_squares(x, n);
        float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * inv * (w ? w[i] : 1.0f);
    }
    return LLK_OK;
}

llk_status llk_layer_norm(const float *x, const float *w, const float *b, float *y,
                          int64_t n_rows, int64_t n, float eps) {
    if (n <= 0 || n_rows < 0 || !x || !y) return LLK_ERR_ARG;
    for (int64_t r = 0; r < n_rows; r++, x += n, y += n) {
        double s = 0.0, ss = 0.0;
        for (int64_t i = 0; i < n; i++) s += x[i];
        double mean = s / (double)n;
        for (int64_t i = 0; i < n; i++) { double d = x[i] - mean; ss += d * d; }
        float inv = (float)(1.0 / sqrt(ss / (double)n + (double)eps));
        float m = (float)mean;
        for (int64_t i = 0; i < n; i++)
            y[i] = (x[i] - m) * inv * (w ? w[i] : 1.0f) + (b ? b[i] : 0.0f);
    }
    return LLK_OK;
}

void llk_softmax(float *x, int64_t n) {
    if (n <= 0) return;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    if (mx == -INFINITY) { for (int64_t i = 0; i < n; i++) x[i] = 0.0f; return; }
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) { x[i] = expf(x[i] - mx); s += x[i]; }
    float inv = (float)(1.0 / s);
    for (int64_t i = 0; i < n; i++) x[i] *= inv;
}

static inline float gelu_erf1(float v) { return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)); }

void llk_silu(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = llk_silu1(x[i]); }
void llk_gelu(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = llk_gelu1(x[i]); }
void llk_gelu_erf(const float *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = gelu_erf1(x[i]); }
void llk_swiglu(const float *g, const float *u, float *y, int64_t n) { llk_glu_isa(LLK_ISA_DEFAULT, LLK_FFN_SILU, g, u, y, n); }
void llk_geglu(const float *g, const float *u, float *y, int64_t n) { llk_glu_isa(LLK_ISA_DEFAULT, LLK_FFN_GELU, g, u, y, n); }
llk_status llk_glu_isa(int isa, int act, const float *g, const float *u, float *y, int64_t n) {
    const llk_kernels *k = llk_kernels_for(isa);
    if (!k) return LLK_ERR_ISA;
    switch (act) {
    case LLK_FFN_SILU: k->swiglu(g, u, y, n); return LLK_OK;
    case LLK_FFN_GELU: k->geglu(g, u, y, n); return LLK_OK;
    case LLK_FFN_GELU_ERF: for (int64_t i = 0; i < n; i++) y[i] = gelu_erf1(g[i]) * u[i]; return LLK_OK;
    default: return LLK_ERR_ARG;
    }
}
llk_status llk_softcap_isa(int isa, float *x, int64_t n, float scale, float cap, float *max) {
    const llk_kernels *k = llk_kernels_for(isa);
    if (!k) return LLK_ERR_ISA;
    if (n < 0 || (n && !x) || !(cap > 0.0f)) return LLK_ERR_ARG;
    const float m = k->softcap(x, n, scale, cap);
    if (max) *max = m;
    return LLK_OK;
}
void llk_add(const float *a, const float *b, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = a[i] + b[i]; }
void llk_mul(const float *a, const float *b, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = a[i] * b[i]; }
void llk_scale(const float *a, float s, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = a[i] * s; }

void llk_fp32_to_fp16(const float *x, uint16_t *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = llk_f2h(x[i]); }
void llk_fp16_to_fp32(const uint16_t *x, float *y, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] = llk_h2f(x[i]); }

/* --- RoPE ----------------------------------------------------------------------------------- */

void llk_rope_params_default(llk_rope_params *p, int head_dim) {
    memset(p, 0, sizeof *p);
    p->head_dim = head_dim;
    p->n_rot = head_dim;
    p->freq_base = 10000.0f;
    p->scaling = LLK_ROPE_SCALING_NONE;
    p->freq_scale = 1.0f;
    p->n_ctx_orig = 0;
    p->ext_factor = -1.0f;
    p->attn_factor = 1.0f;
    p->beta_fast = 32.0f;
    p->beta_slow = 1.0f;
    p->low_freq_factor = 1.0f;
    p->high_freq_factor = 4.0f;
    p->factor = 8.0f;
}

/* YaRN: the rotary dimension index at which a frequency turns n_rot_turns times over the
 * original context. */
static double yarn_corr_dim(int n_rot, int n_ctx_orig, double turns, double base) {
    return n_rot * log((double)n_ctx_orig / (turns * 2.0 * 3.14159265358979323846)) / (2.0 * log(base));
}

/* Angle multipliers (theta_i = pos * inv_freq[i]) and the magnitude scale, per pair i. */
static llk_status rope_freqs(const llk_rope_params *p, double *inv_freq, double *mix,
                             double *interp, double *mscale) {
    int half = p->n_rot / 2;
    double base = p->freq_base;
    *mscale = 1.0;
    for (int i = 0; i < half; i++) {
        inv_freq[i] = pow(base, -2.0 * i / p->n_rot);
        if (p->freq_factors) {
            if (!(p->freq_factors[i] > 0.0f)) return LLK_ERR_ARG;
            inv_freq[i] /= p->freq_factors[i];
        }
        mix[i] = 1.0; interp[i] = 1.0;
    }
    switch (p->scaling) {
    case LLK_ROPE_SCALING_NONE:
        break;
    case LLK_ROPE_SCALING_LINEAR:
        for (int i = 0; i < half; i++) inv_freq[i] *= p->freq_scale;
        break;
    case LLK_ROPE_SCALING_YARN: {
        if (p->n_ctx_orig <= 0 || p->freq_scale <= 0.0f) return LLK_ERR_ARG;
        double ext = p->ext_factor < 0.0f ? 1.0 : p->ext_factor;
        double lo = floor(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_fast, base));
        double hi = ceil(yarn_corr_dim(p->n_rot, p->n_ctx_orig, p->beta_slow, base));
        if (lo < 0) lo = 0;
        if (hi > p->n_rot - 1) hi = p->n_rot - 1;
        for (int i = 0; i < half; i++) {
            /* ramp: 1 below lo (keep the original, high frequencies), 0 above hi (interpolate) */
            double y = ((double)i - lo) / fmax(0.001, hi - lo);
            double ramp = 1.0 - fmin(1.0, fmax(0.0, y));
            mix[i] = ramp * ext;             /* share of the extrapolated angle */
            interp[i] = p->freq_scale;       /* the interpolated angle's factor */
        }
        if (ext != 0.0) *mscale = 1.0 + 0.1 * log(1.0 / p->freq_scale);
        break;
    }
    case LLK_ROPE_SCALING_LLAMA3: {
        if (p->n_ctx_orig <= 0 || p->factor <= 0.0f || p->high_freq_factor <= p->low_freq_factor)
            return LLK_ERR_ARG;
        double lo_wl = p->n_ctx_orig / p->low_freq_factor, hi_wl = p->n_ctx_orig / p->high_freq_factor;
        for (int i = 0; i < half; i++) {
            double wl = 2.0 * 3.14159265358979323846 / inv_freq[i];
            if (wl < hi_wl) continue;
            if (wl > lo_wl) { inv_freq[i] /= p->factor; continue; }
            double smooth = (p->n_ctx_orig / wl - p->low_freq_factor) /
                            (p->high_freq_factor - p->low_freq_factor);
            inv_freq[i] = (1.0 - smooth) * inv_freq[i] / p->factor + smooth * inv_freq[i];
        }
        break;
    }
    default:
        return LLK_ERR_ARG;
    }
    *mscale *= p->attn_factor;
    return LLK_OK;
}

static int rope_params_bad(const llk_rope_params *p) {
    return !p || p->head_dim <= 0 || p->n_rot <= 0 || p->n_rot > p->head_dim || p->n_rot % 2 ||
           !(p->freq_base > 0.0f);
}

llk_status llk_rope_cs(const llk_rope_params *p, const int32_t *pos, int64_t n_tok, float *cs) {
    if (rope_params_bad(p) || !pos || !cs || n_tok < 0) return LLK_ERR_ARG;
    const int half = p->n_rot / 2;
    double *buf = (double *)malloc(sizeof(double) * 3 * (size_t)half);
    if (!buf) return LLK_ERR_NOMEM;
    double *inv_freq = buf, *mix = buf + half, *interp = buf + 2 * half, mscale;
    llk_status st = rope_freqs(p, inv_freq, mix, interp, &mscale);
    for (int64_t t = 0; t < n_tok && !st; t++, cs += 2 * half) {
        for (int i = 0; i < half; i++) {
            double th_ext = (double)pos[t] * inv_freq[i];
            double th = p->scaling == LLK_ROPE_SCALING_YARN
                            ? th_ext * interp[i] * (1.0 - mix[i]) + th_ext * mix[i]
                            : th_ext;
            cs[2 * i] = (float)(cos(th) * mscale);
            cs[2 * i + 1] = (float)(sin(th) * mscale);
        }
    }
    free(buf);
    return st;
}

llk_status llk_rope_with(const llk_rope_params *p, const float *cs, float *x, int64_t n_tok, int64_t n_head) {
    if (rope_params_bad(p) || !cs || !x || n_tok < 0 || n_head < 0) return LLK_ERR_ARG;
    const int half = p->n_rot / 2;
    for (int64_t t = 0; t < n_tok; t++, cs += 2 * half)
        for (int64_t h = 0; h < n_head; h++) {
            float *v = x + (t * n_head + h) * p->head_dim;
            for (int i = 0; i < half; i++) {
                int i0 = p->neox ? i : 2 * i, i1 = p->neox ? i + half : 2 * i + 1;
                float a = v[i0], b = v[i1], c = cs[2 * i], s = cs[2 * i + 1];
                v[i0] = a * c - b * s;
                v[i1] = a * s + b * c;
            }
        }
    return LLK_OK;
}

/* Up to ROPE_CHUNK tokens' table at a time. */
#define ROPE_CHUNK 64
llk_status llk_rope(const llk_rope_params *p, float *x, int64_t n_tok, int64_t n_head,
                    const int32_t *pos) {
    if (rope_params_bad(p) || !x || !pos || n_tok < 0 || n_head < 0) return LLK_ERR_ARG;
    float *cs = (float *)malloc(sizeof(float) * (size_t)p->n_rot * ROPE_CHUNK);
    if (!cs) return LLK_ERR_NOMEM;
    llk_status st = LLK_OK;
    for (int64_t t = 0; t < n_tok && !st; t += ROPE_CHUNK) {
        const int64_t n = n_tok - t < ROPE_CHUNK ? n_tok - t : ROPE_CHUNK;
        st = llk_rope_cs(p, pos + t, n, cs);
        if (!st) st = llk_rope_with(p, cs, x + t * n_head * p->head_dim, n, n_head);
    }
    free(cs);
    return st;
}

/* --- attention ------------------------------------------------------------------------------ */

#define ATTN_SPLIT_MIN 256   /* fewest positions per split when a long attention is split */
#define ATTN_SPLIT_MAX 32    /* most splits */
#define ATTN_SPLIT_ITEMS 16  /* attentions of fewer (token, KV head, subgroup) items are split */
#define ATTN_BLOCK_TOK 32    /* most prompt tokens per item: they share each cache tile (converted
                                once for all of them) while it is hot. The 1B shape's attention at
                                depth 4096 (512 tokens, 2 threads, Intel Xeon): 8 -> 32 tokens,
                                avx2 173 -> 158 ms, avx512 134 -> 124 ms (64: no better) */
#define ATTN_BLOCK_TOK_MAX (ATTN_BLOCK_TOK * 4) /* ... and when a KV head has 1 or 2 query
                                heads, 128 or 64 tokens (ATTN_BLOCK_TOK x 4 / group): each tile's
                                conversion then serves as many score rows as a group of 4's block,
                                not a quarter or half of them.
                                Intel Xeon, one thread, 512 tokens at depth 4096, one layer: Phi-3's
                                32 / 32 / 96 avx512 336 -> 300 ms, avx2 404-420 -> 386-392; Gemma 2
                                2B's 8 / 4 / 256 avx512 161-163 -> 143-155, avx2 224-226 -> 215-219 */
#define ATTN_BLOCK_MIN 8     /* fewest tokens per item: the block is halved down to this ... */
#define ATTN_BLOCK_ITEMS 4   /* ... while the threads would have fewer items each than this, */
#define ATTN_SCRATCH_MAX ((size_t)8 << 20)   /* or its score rows more bytes per thread than this */
#define ATTN_TILE_BYTES 16384 /* a tile of one KV head's positions as float32 (a K tile transposed,
                                 or a V tile): half of L1, rounded down to a power of two positions
                                 (a cache block of 256 is then whole tiles, none of them padded:
                                 head size 96 took 42, so 48 lanes of K dots for 42 positions and a
                                 last tile of 4 per block; 32 now. Phi-3's 32 / 32 / 96, Intel Xeon,
                                 avx2: 512 tokens at depth 4096, one thread, 360-374 -> 342-351 ms
                                 per layer; a token at depth 4096, 32 layers, 2 threads, 104-112
                                 -> 102-104 ms) ... */
#define ATTN_TILE_MIN 8      /* ... but at least this many positions, */
#define ATTN_TILE_MIN_BLOCK 32 /* and for a block of tokens this many: with head size 256 (Gemma) half
                                of L1 is 16 positions, one 512-bit vector, and the AVX-512 K dots of
                                a group of 4 heads ran 4 FMA chains. Zen 5, one thread, 512 tokens at
                                depth 4096, 8 heads of 256 / 2 KV heads, medians of 5: 151.8 -> 115.4
                                ms per layer (64 positions: ~5% slower than 32). One token's tiles
                                stay at 16 there: it reads them from memory, and with 32 it ran
                                10.6 -> 11.7 ms over 16 layers (medians of 8) */
#define ATTN_TILE_GROUP 8    /* most query heads of one KV head per item in the tiled walk: each
                                tile converted once for all of them (groups of 5-8 are common:
                                Qwen2.5's 6 and 7; the direct walk takes LLK_ATTN_GROUP) */

typedef struct {
    const llk_attn_params *p;
    const llk_kernels *k;
    const float *q;
    const uint8_t *kc, *vc;     /* the caches, laid out as llk_kv_at says */
    int kind;                   /* LLK_KV_* */
    size_t rows;                /* bytes from one position of a head to the next (within a block) */
    int64_t blk;                /* positions per block (INT64_MAX: position-major, one block) */
    int64_t n_kv;
    int64_t n_tok;
    const int32_t *pos;
    float *out;
    float *scratch;             /* per thread: n_blk x sub rows of scratch_stride floats, then a
                                   tile (attn_scratch_floats) */
    int64_t scratch_stride;
    int n_sub;                  /* query-head subgroups per KV head (groups over sub) */
    int sub;                    /* query heads per subgroup: LLK_ATTN_GROUP, or up to
                                   ATTN_TILE_GROUP in the tiled walk */
    int n_blk;                  /* tokens per item: up to ATTN_BLOCK_TOK_MAX for several tokens, else 1 */
    int64_t tile;               /* positions per tile: the K side always goes tile by tile, the V
                                   side too when n_blk > 1 (else one pass straight over the cache) */
    int n_split;                /* > 1: each item covers one of n_split ranges of positions and
                                   leaves an unnormalised partial for attn_merge */
    float *part;                /* n_tok x n_head x n_split x (head_dim + 2): acc, max, sum */
} attn_job;

/* One query row's work: the positions [lo, hi) it sees, its g heads' scores and sums, its output. */
typedef struct {
    int64_t lo, hi;
    const float *q;
    float *s;                   /* g rows of scores, scratch_stride apart; position lo in column 0 */
    float *o;                   /* g output rows, ostride apart */
    float mx[ATTN_TILE_GROUP], sum[ATTN_TILE_GROUP];
} attn_row;

/* The cache positions [lo, hi) token t sees (causal, sliding window) in split `split` of n_split. */
static void attn_span(const attn_job *j, int64_t t, int64_t split, int64_t *lo_out, int64_t *hi_out) {
    const llk_attn_params *p = j->p;
    const int64_t pos = j->pos[t];
    int64_t hi = p->causal ? (pos + 1 < j->n_kv ? pos + 1 : j->n_kv) : j->n_kv, lo = 0;
    if (p->window > 0 && pos - p->window + 1 > lo) lo = pos - p->window + 1;
    if (j->n_split > 1 && hi > lo) {
        /* whole tiles per split (a split's last tile is then only ever the range's last) */
        int64_t span = (hi - lo + j->n_split - 1) / j->n_split;
        span = (span + j->tile - 1) / j->tile * j->tile;
        const int64_t l2 = lo + split * span;
        hi = l2 + span < hi ? l2 + span : hi;
        lo = l2;
    }
    *lo_out = lo;
    *hi_out = hi;
}

/* Floats of the score rows of a block of tokens (per thread). */
static size_t attn_score_floats(const attn_job *j) {
    return (size_t)j->n_blk * (size_t)j->sub * (size_t)j->scratch_stride;
}
/* A tile's positions rounded up to whole lanes of the transposed K tile. */
static int64_t attn_lanes(int64_t n) { return (n + LLK_KT_LANES - 1) / LLK_KT_LANES * LLK_KT_LANES; }
/* Floats of a V tile as float32 rows: only the tiled walk converts V (a single token's sums read
 * the cache rows directly). */
static size_t attn_vtile_floats(const attn_job *j) {
    return j->n_blk > 1 ? (size_t)j->tile * (size_t)j->p->head_dim : 0;
}
/* Floats of scratch per thread: the score rows, a V tile, and the K tile transposed. */
static size_t attn_scratch_floats(const attn_job *j) {
    return attn_score_floats(j) + attn_vtile_floats(j) + (size_t)j->p->head_dim * (size_t)attn_lanes(j->tile);
}
/* Items before any split: blocks of tokens x KV heads x query-head subgroups. */
static int64_t attn_items(const attn_job *j) {
    return (j->n_tok + j->n_blk - 1) / j->n_blk * j->p->n_head_kv * j->n_sub;
}

/* n rows of one KV head from c on (j->rows apart) as float32 rows of head_dim: the same floats the
 * kernels read from the cache kind (half and 8-bit values convert exactly). Row r's conversion
 * prefetches row r of the tile the item converts next (`next`, NULL: none), so that tile comes
 * from far caches while the block's tokens work on this one: position-major rows are ~1 KB apart,
 * a stride the hardware prefetchers follow poorly, and a blocked cache's tiles are short streams
 * (8 KB of half floats) that they take too long to pick up (one thread's conversion read ~13 GB/s
 * from L3 without). */
static void attn_tile_f32(const attn_job *j, const uint8_t *c, int64_t n, float *ft, const uint8_t *next) {
    const int hd = j->p->head_dim;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
    const size_t bytes = next ? llk_kv_head_bytes(hd, j->kind) : 0;
#endif
    for (int64_t r = 0; r < n; r++) {
        const uint8_t *src = c + (size_t)r * j->rows;
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
        for (size_t b = 0; b < bytes; b += 64)
            _mm_prefetch((const char *)next + (size_t)r * j->rows + b, _MM_HINT_T0);
#endif
        j->k->dequant[j->p->kv_type](src, ft + r * hd, hd);
    }
}

/* The end of the run of positions from c0 on that one tile (or, unblocked, one pass) covers: at
 * most `tile` of them, short of hi, and inside one block of the cache (a head's rows are evenly
 * spaced only within a block). */
static int64_t attn_run_end(const attn_job *j, int64_t c0, int64_t hi, int64_t tile) {
    int64_t c1 = hi - c0 > tile ? c0 + tile : hi;
    if (j->blk != INT64_MAX) {
        const int64_t e = (c0 / j->blk + 1) * j->blk;
        c1 = e < c1 ? e : c1;
    }
    return c1;
}

/* How many tokens from rows[u] on (at most LLK_ATTN_GROUP) one kernel call of the tile ending at c1
 * takes as its rows, one head at a time: tokens that see the tile alike (the same span start, so
 * their score columns line up, and the same end in it). Only for groups of at most 2 query heads
 * per KV head: alone, their few rows gave the kernels as few FMA chains as rows times a tile's
 * vectors (multi-head attention at 512 bits: 4). A row's sums are the same either way. */
static int attn_stack(const attn_row *rows, int u, int nt, int g, int64_t c1) {
    if (2 * g > LLK_ATTN_GROUP) return 1;
    const attn_row *w = &rows[u];
    const int64_t e = c1 < w->hi ? c1 : w->hi;
    int k = 1;
    while (u + k < nt && k < LLK_ATTN_GROUP && rows[u + k].lo == w->lo &&
           (c1 < rows[u + k].hi ? c1 : rows[u + k].hi) == e)
        k++;
    return k;
}

/* One item: up to n_blk tokens, one KV head, and up to j->sub of the query heads that share it
 * (grouped-query attention: LLK_ATTN_GROUP when each token reads the cache directly, up to
 * ATTN_TILE_GROUP when the tokens share converted tiles). Each cache row is read once for the
 * whole group; the tokens walk the positions together a tile at a time, so a tile read from far
 * caches serves all of them.
 * Per query row the operations are those of one token alone, in the same order: all scores, then
 * the softmax, then the V sums position after position (tiles continue the same sums). */
static void attn_fn(void *arg, int64_t b, int64_t e, int ith) {
    const attn_job *j = (const attn_job *)arg;
    const llk_attn_params *p = j->p;
    const int hd = p->head_dim, group = p->n_head / p->n_head_kv, kind = j->kind;
    const size_t rs = j->rows;
    const int64_t ld = j->scratch_stride;
    float *sc = j->scratch + (size_t)ith * attn_scratch_floats(j);
    float *ft = sc + attn_score_floats(j);   /* a V tile as floats (the tiled walk) */
    float *kt = ft + attn_vtile_floats(j);   /* the K tile transposed */
    const float kscale = p->softcap > 0.0f ? 1.0f : p->scale;  /* softcap needs the raw product */
    const int64_t per_tok = (int64_t)p->n_head_kv * j->n_sub;
    const int64_t pstride = (int64_t)j->n_split * (hd + 2);    /* partials: one head to the next */
    const int64_t vtile = j->n_blk > 1 ? j->tile : INT64_MAX;
    const size_t frow = (size_t)hd * sizeof(float);
    for (int64_t it = b; it < e; it++) {
        const int64_t split = it % j->n_split, item = it / j->n_split;
        const int64_t blk = item / per_tok, r = item % per_tok, hk = r / j->n_sub, sg = r % j->n_sub;
        const int h0 = (int)(hk * group + sg * j->sub);
        const int g = group - sg * j->sub < j->sub ? (int)(group - sg * j->sub) : j->sub;
        const int64_t t0 = blk * j->n_blk;
        const int nt = (int)(j->n_tok - t0 < j->n_blk ? j->n_tok - t0 : j->n_blk);
        const int64_t ostride = j->n_split > 1 ? pstride : hd;
        attn_row rows[ATTN_BLOCK_TOK_MAX];
        int64_t lo = INT64_MAX, hi = 0;
        for (int u = 0; u < nt; u++) {
            attn_row *w = &rows[u];
            const int64_t t = t0 + u;
            attn_span(j, t, split, &w->lo, &w->hi);
            w->q = j->q + (t * p->n_head + h0) * hd;
            w->s = sc + (size_t)u * (size_t)j->sub * (size_t)ld;
            w->o = j->n_split > 1 ? j->part + (t * p->n_head + h0) * pstride + split * (hd + 2)
                                  : j->out + (t * p->n_head + h0) * hd;
            for (int a = 0; a < g; a++) {
                for (int d = 0; d < hd; d++) w->o[a * ostride + d] = 0.0f;
                if (j->n_split > 1) {
                    w->o[a * ostride + hd] = -INFINITY;
                    w->o[a * ostride + hd + 1] = 0.0f;
                }
                w->mx[a] = -INFINITY;
            }
            if (w->hi > w->lo) {
                lo = w->lo < lo ? w->lo : lo;
                hi = w->hi > hi ? w->hi : hi;
            }
        }
        /* the scores, a tile of positions at a time (transposed: a position per lane), and each
         * row's largest */
        for (int64_t c0 = lo, c1; c0 < hi; c0 = c1) {
            c1 = attn_run_end(j, c0, hi, j->tile);
            const int64_t np = attn_lanes(c1 - c0);
            /* next: the following K tile, after the last the first V tile */
            j->k->ktile(j->kc + llk_kv_at(p, hk, c0), rs, kind, c1 - c0, hd, kt, np,
                        c1 < hi ? j->kc + llk_kv_at(p, hk, c1) : j->vc + llk_kv_at(p, hk, lo));
            for (int u = 0, k; u < nt; u += k) {
                attn_row *w = &rows[u];
                const int64_t s0 = c0 > w->lo ? c0 : w->lo, s1 = c1 < w->hi ? c1 : w->hi;
                k = 1;
                if (s1 <= s0) continue;
                if ((k = attn_stack(rows, u, nt, g, c1)) == 1) {
                    j->k->kdots_tile(w->q, hd, g, kt, np, hd, kscale, s0 - c0, s1 - s0, w->s + (s0 - w->lo), ld, w->mx);
                    continue;
                }
                for (int a = 0; a < g; a++) {   /* head a of k tokens as the rows */
                    float m[LLK_ATTN_GROUP];
                    for (int i = 0; i < k; i++) m[i] = rows[u + i].mx[a];
                    j->k->kdots_tile(w->q + a * hd, (int64_t)p->n_head * hd, k, kt, np, hd, kscale, s0 - c0, s1 - s0,
                                     w->s + a * ld + (s0 - w->lo), (int64_t)j->sub * ld, m);
                    for (int i = 0; i < k; i++) rows[u + i].mx[a] = m[i];
                }
            }
        }
        for (int u = 0; u < nt; u++) {
            attn_row *w = &rows[u];
            const int64_t nv = w->hi - w->lo;
            if (nv <= 0) continue;
            for (int a = 0; a < g; a++) {
                float *s = w->s + a * ld;
                if (p->softcap > 0.0f) w->mx[a] = j->k->softcap(s, nv, p->scale, p->softcap);
                w->sum[a] = j->k->expsum(s, nv, w->mx[a]);
            }
        }
        /* the V sums, tile after tile in position order */
        for (int64_t c0 = lo, c1; c0 < hi; c0 = c1) {
            c1 = attn_run_end(j, c0, hi, vtile);
            const uint8_t *vr = j->vc + llk_kv_at(p, hk, c0);
            if (j->n_blk > 1) attn_tile_f32(j, vr, c1 - c0, ft, c1 < hi ? j->vc + llk_kv_at(p, hk, c1) : NULL);
            for (int u = 0, k; u < nt; u += k) {
                attn_row *w = &rows[u];
                const int64_t s0 = c0 > w->lo ? c0 : w->lo, s1 = c1 < w->hi ? c1 : w->hi;
                k = 1;
                if (s1 <= s0) continue;
                if (j->n_blk == 1) {   /* one token: straight over the cache rows */
                    j->k->vacc[kind](w->s + (s0 - w->lo), ld, g, vr + (size_t)(s0 - c0) * rs, rs, s1 - s0, hd, w->o,
                                     ostride);
                    continue;
                }
                const uint8_t *vt = (const uint8_t *)ft + (s0 - c0) * frow;   /* the V tile's rows s0 .. s1 */
                if ((k = attn_stack(rows, u, nt, g, c1)) > 1)   /* head a of k tokens, whose output rows
                                                                    are n_head x hd apart (a block is never split) */
                    for (int a = 0; a < g; a++)
                        j->k->vacc[LLK_KV_F32](w->s + a * ld + (s0 - w->lo), (int64_t)j->sub * ld, k, vt, frow,
                                               s1 - s0, hd, w->o + a * ostride, (int64_t)p->n_head * hd);
                else   /* the kernel takes LLK_ATTN_GROUP heads at a time */
                    for (int a = 0; a < g; a += LLK_ATTN_GROUP)
                        j->k->vacc[LLK_KV_F32](w->s + a * ld + (s0 - w->lo), ld,
                                               g - a < LLK_ATTN_GROUP ? g - a : LLK_ATTN_GROUP, vt, frow, s1 - s0,
                                               hd, w->o + a * ostride, ostride);
            }
        }
        for (int u = 0; u < nt; u++) {
            attn_row *w = &rows[u];
            if (w->hi <= w->lo) continue;
            for (int a = 0; a < g; a++) {
                if (j->n_split > 1) {   /* a split leaves its output unnormalised, with its max and sum */
                    w->o[a * ostride + hd] = w->mx[a];
                    w->o[a * ostride + hd + 1] = w->sum[a];
                } else {
                    const float rcp = 1.0f / w->sum[a];
                    for (int d = 0; d < hd; d++) w->o[a * hd + d] *= rcp;
                }
            }
        }
    }
}

/* The splits of each (token, head): out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s. */
static void attn_merge(const attn_job *j, int64_t n_tok) {
    const int hd = j->p->head_dim, ns = j->n_split;
    for (int64_t th = 0; th < n_tok * j->p->n_head; th++) {
        const float *part = j->part + th * ns * (hd + 2);
        float *o = j->out + th * hd;
        float M = -INFINITY, L = 0.0f;
        for (int s = 0; s < ns; s++) M = part[s * (hd + 2) + hd] > M ? part[s * (hd + 2) + hd] : M;
        for (int d = 0; d < hd; d++) o[d] = 0.0f;
        if (M == -INFINITY) continue;
        for (int s = 0; s < ns; s++) {
            const float *ps = part + s * (hd + 2);
            if (ps[hd] == -INFINITY) continue;
            const float w = expf(ps[hd] - M);
            L += w * ps[hd + 1];
            for (int d = 0; d < hd; d++) o[d] += w * ps[d];
        }
        const float r = 1.0f / L;
        for (int d = 0; d < hd; d++) o[d] *= r;
    }
}

size_t llk_kv_at(const llk_attn_params *p, int64_t h, int64_t pos) {
    const size_t hb = llk_row_bytes(p->kv_type, p->head_dim), row = (size_t)p->n_head_kv * hb;
    if (p->kv_block <= 0) return (size_t)pos * row + (size_t)h * hb;
    const int64_t b0 = pos / p->kv_block * p->kv_block, left = p->kv_ctx - b0;
    const int64_t nb = left < p->kv_block ? left : p->kv_block;   /* positions in this block */
    return (size_t)b0 * row + ((size_t)h * (size_t)nb + (size_t)(pos - b0)) * hb;
}

llk_status llk_attention(llk_pool *pool, const llk_attn_params *p, const float *q,
                         const void *k, const void *v, int64_t n_kv, int64_t n_tok,
                         const int32_t *pos, float *out) {
    return llk_attention_isa(pool, LLK_ISA_DEFAULT, p, q, k, v, n_kv, n_tok, pos, out);
}

llk_status llk_attention_isa(llk_pool *pool, int isa, const llk_attn_params *p, const float *q,
                             const void *k, const void *v, int64_t n_kv, int64_t n_tok,
                             const int32_t *pos, float *out) {
    if (!p || p->n_head <= 0 || p->n_head_kv <= 0 || p->head_dim <= 0 ||
        p->n_head % p->n_head_kv || n_kv < 0 || n_tok < 0)
        return LLK_ERR_ARG;
    if (n_tok == 0) return LLK_OK;
    if (!q || !out || !pos || (n_kv > 0 && (!k || !v))) return LLK_ERR_ARG;
    const int kind = llk_kv_kind(p->kv_type);
    if (kind < 0 || (kind == LLK_KV_Q8_0 && p->head_dim % 32)) return LLK_ERR_ARG;
    if (p->kv_block < 0 || (p->kv_block > 0 && p->kv_ctx < n_kv)) return LLK_ERR_ARG;
    const llk_kernels *kt = llk_kernels_for(isa);
    if (!kt) return LLK_ERR_ISA;
    int nth = pool ? llk_pool_size(pool) : 1;
    int64_t stride = n_kv > 0 ? ((n_kv + 15) / 16) * 16 : 16;
    const int group = p->n_head / p->n_head_kv;
    int64_t tile_rows = ATTN_TILE_BYTES / ((int64_t)p->head_dim * 4);
    while (tile_rows & (tile_rows - 1)) tile_rows &= tile_rows - 1;   /* a power of two */
    const size_t head_bytes = llk_row_bytes(p->kv_type, p->head_dim);
    attn_job j = {p, kt, q, (const uint8_t *)k, (const uint8_t *)v, kind,
                  p->kv_block > 0 ? head_bytes : (size_t)p->n_head_kv * head_bytes,
                  p->kv_block > 0 ? p->kv_block : INT64_MAX, n_kv, n_tok, pos,
                  out, NULL, stride, (group + LLK_ATTN_GROUP - 1) / LLK_ATTN_GROUP, LLK_ATTN_GROUP, 1, 0, 1,
                  NULL};
    /* Few items for a pool (a generated token has one per KV head) over a long context: split
     * the positions too (flash-decoding), ~ATTN_SPLIT_MIN positions or more per split, and merge.
     * Whether and how to split depends on the shapes alone, never on the pool: the thread count
     * changes no bit of the result (nor, with the kernels' summation contract, the ISA level).
     * Otherwise several tokens (a prompt, a verify pass) go through the cache in blocks, tile by
     * tile; which way a token goes changes none of its bits either. */
    j.tile = tile_rows > ATTN_TILE_MIN ? tile_rows : ATTN_TILE_MIN;
    const int64_t per_tok = p->n_head_kv * j.n_sub;
    if (n_tok * per_tok < ATTN_SPLIT_ITEMS && n_kv >= 2 * ATTN_SPLIT_MIN) {
        int64_t ns = n_kv / ATTN_SPLIT_MIN;
        if (ns > ATTN_SPLIT_MAX) ns = ATTN_SPLIT_MAX;
        j.n_split = (int)ns;
        j.part = (float *)malloc(sizeof(float) * (size_t)(n_tok * p->n_head * ns * (p->head_dim + 2)));
        if (!j.part) return LLK_ERR_NOMEM;
    } else if (n_tok > 1) {
        /* a tile serves the block's tokens x every head of the group (score rows for no more) */
        j.sub = group < ATTN_TILE_GROUP ? group : ATTN_TILE_GROUP;
        if (j.tile < ATTN_TILE_MIN_BLOCK) j.tile = ATTN_TILE_MIN_BLOCK;
        j.n_sub = (group + j.sub - 1) / j.sub;
        /* the block: smaller when the threads would be short of items or the score rows long (a
         * token's bits do not depend on its block) */
        j.n_blk = j.sub < 4 ? ATTN_BLOCK_TOK * (4 / j.sub) : ATTN_BLOCK_TOK;   /* 128, 64, 32, then 32 */
        while (j.n_blk > ATTN_BLOCK_MIN && (attn_items(&j) < (int64_t)ATTN_BLOCK_ITEMS * nth ||
                                            attn_score_floats(&j) * sizeof(float) > ATTN_SCRATCH_MAX))
            j.n_blk /= 2;
    }
    float *scratch = (float *)aligned_alloc64(sizeof(float) * attn_scratch_floats(&j) * (size_t)nth);
    if (!scratch) { free(j.part); return LLK_ERR_NOMEM; }
    j.scratch = scratch;
    llk_status st = llk_pool_run(pool, attn_items(&j) * j.n_split, 1, attn_fn, &j);
    if (st == LLK_OK && j.n_split > 1) attn_merge(&j, n_tok);
    free(j.part);
    aligned_free64(scratch);
    return st;
}

/* --- integer peak ----------------------------------------------------------------------------- */

#define PEAK_SLOTS 512   /* one per pool thread (llk_pool.c's MAX_THREADS), a cache line apart */
typedef struct { llk_int8_peak_fn fn; int64_t n_iter; int64_t macs[PEAK_SLOTS * 8]; uint64_t sink[PEAK_SLOTS * 8]; } peak_job;

static void peak_fn(void *arg, int64_t b, int64_t e, int ith) {
    peak_job *j = (peak_job *)arg;
    const int s = (ith % PEAK_SLOTS) * 8;
    for (int64_t c = b; c < e; c++) j->macs[s] += j->fn(j->n_iter, &j->sink[s]);
}

double llk_int8_peak_probe(llk_pool *pool, int isa, int64_t n_iter) {
    const llk_kernels *k = llk_kernels_for(isa);
    if (!k || n_iter < 1) return -1.0;
    if (!k->int8_peak) return 0.0;
    peak_job *j = (peak_job *)calloc(1, sizeof *j);
    if (!j) return -1.0;
    j->fn = k->int8_peak; j->n_iter = n_iter;
    /* many short chunks, so that a thread that wakes late only does fewer of them */
    const int64_t n_chunks = 16 * (int64_t)(pool ? llk_pool_size(pool) : 1);
    const double t0 = llk_now_seconds();
    const llk_status st = llk_pool_run(pool, n_chunks, 1, peak_fn, j);
    const double dt = llk_now_seconds() - t0;
    double ops = 0.0;
    for (int s = 0; s < PEAK_SLOTS; s++) ops += 2.0 * (double)j->macs[s * 8];
    free(j);
    return st || dt <= 0.0 ? -1.0 : ops / dt;
}

/* --- read bandwidth --------------------------------------------------------------------------- */

typedef struct { const uint8_t *buf; size_t bytes; uint64_t sink[64 * 8]; } bw_job;

#define BW_CHUNK (256 * 1024)

static void bw_fn(void *arg, int64_t b, int64_t e, int ith) {
    bw_job *j = (bw_job *)arg;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (int64_t c = b; c < e; c++) {
        size_t lo = (size_t)c * BW_CHUNK, hi = lo + BW_CHUNK < j->bytes ? lo + BW_CHUNK : j->bytes;
        const uint64_t *p = (const uint64_t *)(j->buf + lo);
        for (size_t i = 0; i < (hi - lo) / 8; i += 8) {
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
            _mm_prefetch((const char *)(p + i) + 4096, _MM_HINT_T0);   /* as the kernels do */
#endif
            a0 ^= p[i]; a1 ^= p[i + 1]; a2 ^= p[i + 2]; a3 ^= p[i + 3];
            a4 ^= p[i + 4]; a5 ^= p[i + 5]; a6 ^= p[i + 6]; a7 ^= p[i + 7];
        }
    }
    j->sink[(ith % 64) * 8] ^= a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

double llk_read_bandwidth_probe(llk_pool *pool, const void *buf, size_t bytes, int reps) {
    if (!buf || bytes < 64 || reps < 1) return -1.0;
    bytes &= ~(size_t)63;
    bw_job *j = (bw_job *)calloc(1, sizeof *j);
    if (!j) return -1.0;
    j->buf = (const uint8_t *)buf; j->bytes = bytes;
    int64_t n_chunks = (int64_t)((bytes + BW_CHUNK - 1) / BW_CHUNK);
    double t0 = llk_now_seconds();
    for (int r = 0; r < reps; r++) llk_pool_run(pool, n_chunks, 4, bw_fn, j);
    double dt = llk_now_seconds() - t0;
    volatile uint64_t keep = j->sink[0];
    (void)keep;
    free(j);
    return dt;
}

double llk_bench_vec_dot(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                         int64_t n_cols, const void *a, int inner, int reps) {
    const llk_kernels *k; const llk_traits *t;
    if (mm_check(isa, type, w, row_stride, n_rows, n_cols, &k, &t) || !a || inner < 1 || reps < 1)
        return -1.0;
    volatile float sink = 0.0f;
    double best = 1e300;
    for (int r = 0; r < reps; r++) {
        double t0 = llk_now_seconds();
        float s = 0.0f;
        for (int i = 0; i < inner; i++)
            for (int64_t row = 0; row < n_rows; row++)
                s += k->dot[type]((const uint8_t *)w + (size_t)row * row_stride, a, n_cols);
        double dt = llk_now_seconds() - t0;
        sink += s;
        if (dt < best) best = dt;
    }
    (void)sink;
    return best;
}
