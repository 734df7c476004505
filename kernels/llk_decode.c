/* llk_decode.c — the generic decoder-only transformer: one llk_decode call takes a batch of
 * tokens at consecutive positions through embedding, every layer and the output projection, and
 * writes logits (of the last position, or of every position). KV cache in float16, float32 or
 * Q8_0 (8-bit blocks of 32, quantized as rows are written), allocated once for n_ctx positions
 * in blocks of KV_BLOCK positions, each block head after head (llk_kv_at), so that one head's keys
 * are one stream for the attention; llk_decoder_kv_read / _write copy a range of it out and back
 * (saved conversations) as position-major rows.
 *
 * Generic over llk_decoder_config: norm kind (RMS / layer), gated activation (SiLU / GELU),
 * QKV biases, QK-norm, post-norms, RoPE (any llk_rope_params; a per-layer base), per-layer sliding window,
 * embedding scale, tied output, attention and final logit soft-caps. Architectures differ by data:
 * absent tensors have data == NULL. Not here: sampling, tokens, policy (Python owns those).
 *
 * Dimension legend: T tokens in the batch, E = n_embd, H = n_head, Hkv = n_head_kv, D = head_dim,
 * F = n_ff, V = n_vocab, N = n_ctx (KV positions).
 */
#include <stdlib.h>
#include <string.h>
#include <math.h>
#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif
#include "llk_internal.h"
#include "llk_pool.h"

struct llk_decoder {
    llk_decoder_config c;
    llk_pool *pool;                 /* borrowed */
    llk_tensor tok_embd, output_norm, output_norm_b, output;
    llk_layer *layers;              /* n_layer, copied */
    void *k_cache, *v_cache;        /* n_layer x N x Hkv x D of kv_type, each layer laid out as
                                       kvl says; 64-byte aligned */
    void *k_alloc, *v_alloc;        /* what calloc returned (the caches start at the next line) */
    size_t kv_row_bytes;            /* one position of one layer: Hkv x D values of kv_type */
    size_t kv_layer_bytes;
    llk_attn_params kvl;            /* the caches' layout (n_head_kv, head_dim, kv_type, kv_block,
                                       kv_ctx) for llk_kv_at and the attention */
    float *x;                       /* n_batch x E: the residual stream */
    float *xb, *xb2;                /* n_batch x E: normed input, sub-layer output */
    float *q, *att;                 /* n_batch x H x D */
    float *k, *v;                   /* n_batch x Hkv x D */
    float *g, *u;                   /* n_batch x F */
    int32_t *pos;                   /* n_batch */
    float *rope_cs;                 /* 2 x n_batch x n_rot: the batch's RoPE cosines and sines
                                       (llk_rope_cs) for c->rope, then for the local base in use */
    uint8_t *act[3];                /* n_batch x act_bytes: quantized activations, per format */
    size_t act_bytes;               /* bytes of one token's activations, largest format */
    uint8_t *packs;                 /* every packed weight, one 64-byte aligned block (or NULL) */
    void *packs_alloc;              /* what malloc returned for it */
    size_t packs_bytes;
    const uint8_t **packed;         /* n_layer x N_SLOTS + 1 (the output): a weight's panels, or
                                     * NULL where it runs as read */
    float *vectors;                 /* pack == 2: the norms and biases, copied (own_vectors) */
    int embd_release;               /* the token embedding's mapped pages are given back after each
                                       batch reads its rows (pack == 2, and nothing else reads them) */
};

/* The matrices of a layer, in the order of the packed[] slots. */
enum { S_Q, S_K, S_V, S_O, S_GATE, S_UP, S_DOWN, N_SLOTS };
static const llk_tensor *slot_tensor(const llk_layer *L, int s) {
    const llk_tensor *m[N_SLOTS] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
    return m[s];
}

#define ROWS_PER_CHUNK 32           /* weight rows per pool chunk in the fused products of rows */
#define KV_BLOCK 256   /* cache positions per block: a head's 256 keys are one stream (32 KB at
                          head_dim 64 in float16); the cache's memory still grows as it fills */
#define ATTN_SERIAL_WORK (1 << 18)  /* query x key x dim products below which attention runs on
                                     * the caller alone (~50 us) */

static int tensor_ok(const llk_tensor *t, int64_t rows, int64_t cols) {
    if (!t->data) return 0;
    if (t->n_rows != rows || t->n_cols != cols) return 0;
    if (!llk_type_supported(t->type)) return 0;
    return t->row_stride >= llk_row_bytes(t->type, cols);
}
static int vec_ok(const llk_tensor *t, int64_t n) {  /* optional 1-D float32 vector */
    return !t->data || (t->type == LLK_TYPE_F32 && t->n_cols == n && t->n_rows == 1);
}

void llk_decoder_config_default(llk_decoder_config *c) {
    memset(c, 0, sizeof *c);
    c->n_batch = 512;
    c->kv_type = LLK_TYPE_F16;
    c->norm_kind = LLK_NORM_RMS;
    c->norm_eps = 1e-5f;
    c->ffn_act = LLK_FFN_SILU;
    c->embd_scale = 1.0f;
    c->isa = LLK_ISA_DEFAULT;
    c->pack = 1;
    llk_rope_params_default(&c->rope, 0);
}

void llk_decoder_free(llk_decoder *d) {
    if (!d) return;
    free(d->layers); free(d->k_alloc); free(d->v_alloc);
    free(d->x); free(d->xb); free(d->xb2); free(d->q); free(d->att);
    free(d->k); free(d->v); free(d->g); free(d->u); free(d->pos); free(d->rope_cs);
    for (int i = 0; i < 3; i++) free(d->act[i]);
    free(d->packs_alloc); free(d->packed); free(d->vectors);
    free(d);
}

/* Asks for 2 MiB pages on the whole huge pages inside [p, p + bytes), where the kernel offers them
 * (Linux, transparent huge pages in "madvise" or "always" mode); elsewhere nothing changes. */
static void advise_huge_pages(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = (uintptr_t)1 << 21;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + bytes) & ~(huge - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p; (void)bytes;
#endif
}

/* The whole pages of [from, to) are given back to the file they map (they are read from the page
 * cache again if anything touches them); returns where the released pages now end, the `from` of
 * the next call. Only for read-only file mappings: anonymous memory would read back as zeros. */
static const uint8_t *release_pages(const uint8_t *from, const uint8_t *to) {
#if defined(__linux__)
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = ((uintptr_t)from + page - 1) & ~(page - 1), e = (uintptr_t)to & ~(page - 1);
    if (e <= a) return from;
    (void)madvise((void *)a, e - a, MADV_DONTNEED);
    return (const uint8_t *)e;
#else
    (void)to;
    return from;
#endif
}

/* Reading one row of a mapped file maps back the page-cache folio around it: up to 2 MiB on recent
 * kernels, whatever the fault-around setting. With pack == 2 nothing else reads the token
 * embedding's pages (the output is its packed copy, or another tensor), so the 2 MiB window each
 * row a batch read starts in, and the next, are given back: otherwise a tied model holds its
 * embedding twice once a chat has used enough distinct tokens (a 1B model's is 200 MB and more).
 * Windows are clipped to the tensor; release_pages keeps the pages it shares with its neighbours. */
static void release_embedding_rows(const llk_decoder *d, const int32_t *tokens, int64_t T) {
    const uintptr_t window = (uintptr_t)1 << 21;
    const uint8_t *lo = (const uint8_t *)d->tok_embd.data;
    const uint8_t *hi = lo + (size_t)d->c.n_vocab * d->tok_embd.row_stride;
    uintptr_t done = 0;   /* the last window released: a prompt's rows often share one */
    for (int64_t t = 0; t < T; t++) {
        const uintptr_t at = (uintptr_t)(lo + (size_t)tokens[t] * d->tok_embd.row_stride) & ~(window - 1);
        if (at == done) continue;
        done = at;
        const uint8_t *a = (const uint8_t *)at < lo ? lo : (const uint8_t *)at;
        const uint8_t *e = (const uint8_t *)(at + 2 * window) > hi ? hi : (const uint8_t *)(at + 2 * window);
        (void)release_pages(a, e);
    }
}

/* A tensor is packed this many bytes of its rows at a time, and (pack == 2) those rows' pages
 * released before the next: at the peak a slice is held twice, not the largest tensor (the output
 * matrix of a 1B model is 200 MB and more). */
#define PACK_SLICE_BYTES ((size_t)4 << 20)

static llk_status pack_tensor(llk_decoder *d, const llk_tensor *w, uint8_t *out) {
    const size_t panel_bytes = llk_panel_bytes_of(w->type, w->n_cols);
    int64_t rows = (int64_t)(PACK_SLICE_BYTES / w->row_stride) / LLK_PANEL_ROWS * LLK_PANEL_ROWS;
    if (rows < LLK_PANEL_ROWS) rows = LLK_PANEL_ROWS;
    const uint8_t *base = (const uint8_t *)w->data, *released = base;
    for (int64_t r = 0; r < w->n_rows; r += rows) {
        const int64_t n = r + rows <= w->n_rows ? rows : w->n_rows - r;
        llk_status st = llk_pack(d->pool, w->type, base + (size_t)r * w->row_stride, w->row_stride, n,
                                 w->n_cols, out + (size_t)(r / LLK_PANEL_ROWS) * panel_bytes);
        if (st) return st;
        if (d->c.pack >= 2) released = release_pages(released, base + (size_t)(r + n) * w->row_stride);
    }
    return LLK_OK;
}

/* The float32 vectors a pass reads (norms, biases), 0 to 14 per layer. */
static int vector_fields(llk_decoder *d, int il, llk_tensor **out) {
    llk_layer *L = &d->layers[il];
    llk_tensor *all[] = {&L->attn_norm, &L->attn_norm_b, &L->bq, &L->bk, &L->bv, &L->q_norm, &L->k_norm,
                         &L->bo, &L->attn_post_norm, &L->ffn_norm, &L->ffn_norm_b, &L->ffn_post_norm};
    int n = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (all[i]->data) out[n++] = all[i];
    if (il == 0) {
        if (d->output_norm.data) out[n++] = &d->output_norm;
        if (d->output_norm_b.data) out[n++] = &d->output_norm_b;
    }
    return n;
}

/* With pack == 2 the weights' mapped pages are released, and the file is not to be read again by
 * a pass: the norms and biases between them are copied here. Reading a few KB of the mapping
 * maps back whole page-cache folios around it (up to megabytes each on recent kernels): on
 * SmolLM2 the first pass took 54 MB of the released pages back. Copied before packing, so the
 * folios the copy maps are released with the weights around them. */
static llk_status own_vectors(llk_decoder *d) {
    llk_tensor *v[14];
    size_t total = 0;
    for (int il = 0; il < d->c.n_layer; il++) {
        int n = vector_fields(d, il, v);
        for (int i = 0; i < n; i++) total += (size_t)v[i]->n_cols;
    }
    if (total == 0) return LLK_OK;
    d->vectors = (float *)malloc(total * sizeof(float));
    if (!d->vectors) return LLK_ERR_NOMEM;
    float *at = d->vectors;
    for (int il = 0; il < d->c.n_layer; il++) {
        int n = vector_fields(d, il, v);
        for (int i = 0; i < n; i++) {
            memcpy(at, v[i]->data, (size_t)v[i]->n_cols * sizeof(float));
            v[i]->data = at;
            at += v[i]->n_cols;
        }
    }
    return LLK_OK;
}

/* Weights the chosen level has panel kernels for (and whole panels of rows) are copied into the
 * packed layout (llk_panel.c), across the pool; with pack == 2 their mapped pages are released
 * slice by slice (pack_tensor), so the packed copy replaces them in memory instead of doubling it. */
static llk_status pack_weights(llk_decoder *d) {
    const llk_decoder_config *c = &d->c;
    const int64_t n_slots = (int64_t)c->n_layer * N_SLOTS + 1;
    d->packed = (const uint8_t **)calloc((size_t)n_slots, sizeof *d->packed);
    if (!d->packed) return LLK_ERR_NOMEM;
    if (c->pack <= 0) return LLK_OK;
    size_t total = 0;
    for (int64_t i = 0; i < n_slots; i++) {
        const llk_tensor *w = i + 1 == n_slots ? &d->output : slot_tensor(&d->layers[i / N_SLOTS], (int)(i % N_SLOTS));
        if (!llk_isa_packs(c->isa, w->type)) continue;
        total += (llk_packed_bytes(w->type, w->n_rows, w->n_cols) + 63) & ~(size_t)63;
    }
    if (total == 0) return LLK_OK;
    d->packs_alloc = malloc(total + 64);
    if (!d->packs_alloc) return LLK_ERR_NOMEM;
    d->packs = (uint8_t *)(((uintptr_t)d->packs_alloc + 63) & ~(uintptr_t)63);
    d->packs_bytes = total;
    advise_huge_pages(d->packs, total);   /* a 500 MB copy takes 250 faults, not 125,000 */
    size_t at = 0;
    for (int64_t i = 0; i < n_slots; i++) {
        const llk_tensor *w = i + 1 == n_slots ? &d->output : slot_tensor(&d->layers[i / N_SLOTS], (int)(i % N_SLOTS));
        if (!llk_isa_packs(c->isa, w->type)) continue;
        const size_t n = llk_packed_bytes(w->type, w->n_rows, w->n_cols);
        if (n == 0) continue;
        llk_status st = pack_tensor(d, w, d->packs + at);
        if (st) return st;
        d->packed[i] = d->packs + at;
        at += (n + 63) & ~(size_t)63;
    }
    return LLK_OK;
}

llk_status llk_decoder_new(const llk_decoder_config *cfg, const llk_tensor *tok_embd,
                           const llk_tensor *output_norm, const llk_tensor *output_norm_b,
                           const llk_tensor *output, const llk_layer *layers, llk_pool *pool,
                           llk_decoder **out) {
    if (!cfg || !tok_embd || !output_norm || !layers || !out) return LLK_ERR_ARG;
    *out = NULL;
    const llk_decoder_config *c = cfg;
    if (c->n_vocab <= 0 || c->n_embd <= 0 || c->n_layer <= 0 || c->n_head <= 0 ||
        c->n_head_kv <= 0 || c->head_dim <= 0 || c->n_ff <= 0 || c->n_ctx <= 0 ||
        c->n_batch <= 0 || c->n_head % c->n_head_kv || !(c->norm_eps > 0.0f))
        return LLK_ERR_ARG;
    if (c->isa != LLK_ISA_DEFAULT && !llk_kernels_for(c->isa)) return LLK_ERR_ISA;
    if (llk_kv_kind(c->kv_type) < 0 || (c->kv_type == LLK_TYPE_Q8_0 && c->head_dim % 32))
        return LLK_ERR_ARG;
    if (c->rope.n_rot > 0 && (c->rope.head_dim != c->head_dim || c->rope.n_rot > c->head_dim))
        return LLK_ERR_ARG;
    const int64_t E = c->n_embd, HD = (int64_t)c->n_head * c->head_dim,
                  KD = (int64_t)c->n_head_kv * c->head_dim, F = c->n_ff, V = c->n_vocab;
    if (!tensor_ok(tok_embd, V, E)) return LLK_ERR_ARG;
    const llk_tensor *outw = c->tied_output ? tok_embd : output;
    if (!outw || !tensor_ok(outw, V, E)) return LLK_ERR_ARG;
    if (!output_norm->data || !vec_ok(output_norm, E) || (output_norm_b && !vec_ok(output_norm_b, E)))
        return LLK_ERR_ARG;
    for (int il = 0; il < c->n_layer; il++) {
        const llk_layer *L = &layers[il];
        if (!tensor_ok(&L->wq, HD, E) || !tensor_ok(&L->wk, KD, E) || !tensor_ok(&L->wv, KD, E) ||
            !tensor_ok(&L->wo, E, HD) || !tensor_ok(&L->ffn_gate, F, E) ||
            !tensor_ok(&L->ffn_up, F, E) || !tensor_ok(&L->ffn_down, E, F))
            return LLK_ERR_ARG;
        if (!L->attn_norm.data || !L->ffn_norm.data) return LLK_ERR_ARG;
        if (!vec_ok(&L->attn_norm, E) || !vec_ok(&L->attn_norm_b, E) || !vec_ok(&L->ffn_norm, E) ||
            !vec_ok(&L->ffn_norm_b, E) || !vec_ok(&L->bq, HD) || !vec_ok(&L->bk, KD) ||
            !vec_ok(&L->bv, KD) || !vec_ok(&L->bo, E) || !vec_ok(&L->q_norm, c->head_dim) ||
            !vec_ok(&L->k_norm, c->head_dim) || !vec_ok(&L->attn_post_norm, E) ||
            !vec_ok(&L->ffn_post_norm, E))
            return LLK_ERR_ARG;
        if (c->qkv_bias && (!L->bq.data || !L->bk.data || !L->bv.data)) return LLK_ERR_ARG;
        if (c->qk_norm && (!L->q_norm.data || !L->k_norm.data)) return LLK_ERR_ARG;
        if (c->post_norms && (!L->attn_post_norm.data || !L->ffn_post_norm.data)) return LLK_ERR_ARG;
        if (L->window < 0 || !(L->rope_base >= 0.0f && L->rope_base < 1e12f)) return LLK_ERR_ARG;
    }
    llk_decoder *d = (llk_decoder *)calloc(1, sizeof *d);
    if (!d) return LLK_ERR_NOMEM;
    d->c = *c;
    d->pool = pool;
    d->tok_embd = *tok_embd;
    d->output_norm = *output_norm;
    if (output_norm_b) d->output_norm_b = *output_norm_b;
    d->output = *outw;
    size_t B = (size_t)c->n_batch;
    d->kv_row_bytes = llk_row_bytes(c->kv_type, KD);
    d->kv_layer_bytes = (size_t)c->n_ctx * d->kv_row_bytes;
    d->kvl.n_head = c->n_head; d->kvl.n_head_kv = c->n_head_kv; d->kvl.head_dim = c->head_dim;
    d->kvl.kv_type = c->kv_type; d->kvl.kv_block = KV_BLOCK; d->kvl.kv_ctx = c->n_ctx;
    d->layers = (llk_layer *)malloc(sizeof(llk_layer) * (size_t)c->n_layer);
    /* calloc (pages zeroed lazily, so a long context costs memory only as it fills), then the next
     * cache line: a SIMD load of a head's keys must not straddle two lines (calloc gives 16 bytes) */
    d->k_alloc = calloc(1, (size_t)c->n_layer * d->kv_layer_bytes + 64);
    d->v_alloc = calloc(1, (size_t)c->n_layer * d->kv_layer_bytes + 64);
    d->k_cache = d->k_alloc ? (void *)(((uintptr_t)d->k_alloc + 63) & ~(uintptr_t)63) : NULL;
    d->v_cache = d->v_alloc ? (void *)(((uintptr_t)d->v_alloc + 63) & ~(uintptr_t)63) : NULL;
    /* A prompt's attention walks a layer's cache a head slice per row, rows ~1 KB apart: on 4 KiB
     * pages every fourth row missed the TLB (a long context's pages outnumber its entries), and
     * those misses cost more than converting the rows. 2 MiB pages cost memory in 2 MiB steps per
     * layer as the context fills, never beyond the whole cache the memory check counts. */
    if (d->k_cache && d->v_cache) {
        advise_huge_pages(d->k_cache, (size_t)c->n_layer * d->kv_layer_bytes);
        advise_huge_pages(d->v_cache, (size_t)c->n_layer * d->kv_layer_bytes);
    }
    d->x = (float *)malloc(sizeof(float) * B * E);
    d->xb = (float *)malloc(sizeof(float) * B * E);
    d->xb2 = (float *)malloc(sizeof(float) * B * E);
    d->q = (float *)malloc(sizeof(float) * B * HD);
    d->att = (float *)malloc(sizeof(float) * B * HD);
    d->k = (float *)malloc(sizeof(float) * B * KD);
    d->v = (float *)malloc(sizeof(float) * B * KD);
    d->g = (float *)malloc(sizeof(float) * B * F);
    d->u = (float *)malloc(sizeof(float) * B * F);
    d->pos = (int32_t *)malloc(sizeof(int32_t) * B);
    d->rope_cs = (float *)malloc(sizeof(float) * 2 * B * (size_t)(c->rope.n_rot > 0 ? c->rope.n_rot : 1));
    /* activation rows: the largest any weight's type consumes (float32 types need 4 bytes per
     * input, the 8-bit formats a little over 1) */
    size_t ab = llk_act_row_bytes(outw->type, E);
    for (int il = 0; il < c->n_layer; il++) {
        const llk_layer *L = &layers[il];
        const llk_tensor *ms[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_gate, &L->ffn_up, &L->ffn_down};
        for (int i = 0; i < 7; i++) {
            size_t b = llk_act_row_bytes(ms[i]->type, ms[i]->n_cols);
            if (b > ab) ab = b;
        }
    }
    d->act_bytes = (ab + 63) & ~(size_t)63;
    int acts_ok = 1;
    for (int i = 0; i < 3; i++) {
        d->act[i] = (uint8_t *)malloc(d->act_bytes * B);
        acts_ok &= d->act[i] != NULL;
    }
    if (!acts_ok || !d->layers || !d->k_cache || !d->v_cache || !d->x || !d->xb || !d->xb2 || !d->q ||
        !d->att || !d->k || !d->v || !d->g || !d->u || !d->pos || !d->rope_cs) {
        llk_decoder_free(d);
        return LLK_ERR_NOMEM;
    }
    memcpy(d->layers, layers, sizeof(llk_layer) * (size_t)c->n_layer);
    /* the vectors first: the pages their copy maps back are then released with the weights' */
    llk_status st = c->pack >= 2 ? own_vectors(d) : LLK_OK;
    if (!st) st = pack_weights(d);
    d->embd_release = c->pack >= 2 && (!c->tied_output || d->packed[(size_t)c->n_layer * N_SLOTS]);
    if (st) {
        llk_decoder_free(d);
        return st;
    }
    *out = d;
    return LLK_OK;
}

size_t llk_decoder_packed_bytes(const llk_decoder *d) { return d ? d->packs_bytes : 0; }

size_t llk_decoder_kv_bytes(const llk_decoder *d) {
    return d ? 2 * d->kv_layer_bytes * (size_t)d->c.n_layer : 0;
}

/* --- steps ------------------------------------------------------------------------------------ */

/* y (T x n) = norm(x) * (w + offset) + b, rows of n. */
static llk_status norm_rows(const llk_decoder *d, const float *x, const llk_tensor *w,
                            const llk_tensor *b, float *y, int64_t T, int64_t n) {
    const float *wv = (const float *)w->data, *bv = b ? (const float *)b->data : NULL;
    llk_status st = d->c.norm_kind == LLK_NORM_LAYER
                        ? llk_layer_norm(x, NULL, NULL, y, T, n, d->c.norm_eps)
                        : llk_rms_norm(x, NULL, y, T, n, d->c.norm_eps);
    if (st) return st;
    const float off = d->c.norm_weight_offset;
    for (int64_t t = 0; t < T; t++) {
        float *r = y + t * n;
        if (wv) for (int64_t i = 0; i < n; i++) r[i] *= wv[i] + off;
        if (bv) for (int64_t i = 0; i < n; i++) r[i] += bv[i];
    }
    return LLK_OK;
}

/* --- per-token steps across the pool (prompt batches) ---------------------------------------
 * A batch's norms, activation quantization, RoPE and gated activation are independent per token:
 * with many tokens they run as pool jobs over token ranges, so that prompt processing scales
 * past one core. For a few tokens (generation) the serial loop is cheaper than a wake-up. */

#define PAR_MIN_TOKENS 4

enum { ROWS_NORM, ROWS_ADD_NORM, ROWS_QUANT, ROWS_ROPE_CS, ROWS_QK, ROWS_ACT };

typedef struct {
    const llk_decoder *d;
    int op;
    const float *x; float *y; const llk_tensor *w, *b; int64_t n;      /* NORM: rows of n */
    float *res; float *add; const llk_tensor *post;                    /* ADD_NORM: res += add (normed
                                                                          by post first, if given),
                                                                          then y = norm(res) */
    int type; uint8_t *a; size_t ab; int biased;                       /* QUANT: x -> a (biased for
                                                                          the type's panel kernel); ACT
                                                                          too if a (its g rows) */
    float *q, *k; const llk_rope_params *rope; float *cs;              /* ROPE_CS: rope, cs; QK: q, k, */
    const float *q_norm, *k_norm;                                      /* normed (if q_norm), then roped
                                                                          (if rope) by cs */
    float *g; const float *u;                                          /* ACT: g = act(g) * u */
    volatile int failed;
} rows_job;

static llk_status norm_rows(const llk_decoder *d, const float *x, const llk_tensor *w,
                            const llk_tensor *b, float *y, int64_t T, int64_t n);

/* Rows [t0, t1) of x (rows of n) quantized into a as QUANT says. */
static void quant_rows(rows_job *j, int64_t t0, int64_t t1, const float *x) {
    for (int64_t t = t0; t < t1; t++) {
        if (llk_quantize_act(j->d->c.isa, j->type, x + t * j->n, j->a + (size_t)t * j->ab, j->n))
            j->failed = 1;
        else if (j->biased)
            llk_act_bias(j->type, j->a + (size_t)t * j->ab, j->n);
    }
}

static void rows_fn(void *arg, int64_t t0, int64_t t1, int ith) {
    (void)ith;
    rows_job *j = (rows_job *)arg;
    const llk_decoder_config *c = &j->d->c;
    const int64_t T = t1 - t0;
    switch (j->op) {
    case ROWS_NORM:
        if (norm_rows(j->d, j->x + t0 * j->n, j->w, j->b, j->y + t0 * j->n, T, j->n)) j->failed = 1;
        break;
    case ROWS_ADD_NORM:   /* row by row, so that each is still in cache for the next step */
        for (int64_t t = t0; t < t1; t++) {
            float *r = j->res + t * j->n, *a = j->add + t * j->n;
            if (j->post && norm_rows(j->d, a, j->post, NULL, a, 1, j->n)) j->failed = 1;
            llk_add(r, a, r, j->n);
            if (j->y && norm_rows(j->d, r, j->w, j->b, j->y + t * j->n, 1, j->n)) j->failed = 1;
        }
        break;
    case ROWS_QUANT:
        quant_rows(j, t0, t1, j->x);
        break;
    case ROWS_ROPE_CS:
        if (llk_rope_cs(j->rope, j->d->pos + t0, T, j->cs + t0 * j->rope->n_rot)) j->failed = 1;
        break;
    case ROWS_QK: {
        const int D = c->head_dim;
        float *q = j->q + t0 * c->n_head * D, *k = j->k + t0 * c->n_head_kv * D;
        if (j->q_norm && (llk_rms_norm(q, j->q_norm, q, T * c->n_head, D, c->norm_eps) ||
                          llk_rms_norm(k, j->k_norm, k, T * c->n_head_kv, D, c->norm_eps)))
            j->failed = 1;
        if (j->rope) {
            const float *cs = j->cs + t0 * j->rope->n_rot;
            if (llk_rope_with(j->rope, cs, q, T, c->n_head) || llk_rope_with(j->rope, cs, k, T, c->n_head_kv))
                j->failed = 1;
        }
        break;
    }
    case ROWS_ACT: {   /* g = act(g) * u, each row then quantized for the next product if a */
        const int64_t F = c->n_ff;
        for (int64_t t = t0; t < t1; t++) {
            float *g = j->g + t * F;
            if (llk_glu_isa(c->isa, c->ffn_act, g, j->u + t * F, g, F)) j->failed = 1;
            if (j->a) quant_rows(j, t, t + 1, j->g);
        }
        break;
    }
    }
}

static llk_status run_rows(const llk_decoder *d, rows_job *j, int64_t T) {
    j->d = d;
    j->failed = 0;
    if (T < PAR_MIN_TOKENS || !d->pool) {
        rows_fn(j, 0, T, 0);
    } else {
        int64_t chunk = T / (4 * (int64_t)llk_pool_size(d->pool));
        llk_status st = llk_pool_run(d->pool, T, chunk < 1 ? 1 : chunk, rows_fn, j);
        if (st) return st;
    }
    return j->failed ? LLK_ERR_ARG : LLK_OK;
}

static llk_status norm_par(const llk_decoder *d, const float *x, const llk_tensor *w,
                           const llk_tensor *b, float *y, int64_t T, int64_t n) {
    rows_job j;
    memset(&j, 0, sizeof j);
    j.op = ROWS_NORM; j.x = x; j.y = y; j.w = w; j.b = b; j.n = n;
    return run_rows(d, &j, T);
}

/* x += r (r first normed by post, if given), then y = norm(x) by w and b (none if !y): a residual
 * connection and the next norm in one pass over the rows, across the pool. */
static llk_status add_norm_par(const llk_decoder *d, float *x, float *r, const llk_tensor *post,
                               const llk_tensor *w, const llk_tensor *b, float *y, int64_t T, int64_t n) {
    rows_job j;
    memset(&j, 0, sizeof j);
    j.op = ROWS_ADD_NORM; j.res = x; j.add = r; j.post = post; j.w = w; j.b = b; j.y = y; j.n = n;
    return run_rows(d, &j, T);
}

/* --- fused matrix products: several weights that read the same input, one pool job ---------- */

typedef struct {
    int n;                          /* targets */
    llk_mm_job mm[3];               /* each target's product, prepared once */
    int64_t n_rows[3];
    int64_t first_chunk[4];         /* chunk ranges per target: [first_chunk[i], first_chunk[i+1]) */
} fused_job;

static void fused_fn(void *arg, int64_t b, int64_t e, int ith) {
    (void)ith;
    const fused_job *j = (const fused_job *)arg;
    for (int64_t c = b; c < e; c++) {
        int i = 0;
        while (c >= j->first_chunk[i + 1]) i++;
        const int64_t n_chunks = j->first_chunk[i + 1] - j->first_chunk[i], k = c - j->first_chunk[i];
        llk_mm_rows(&j->mm[i], llk_mm_split(&j->mm[i], j->n_rows[i], k, n_chunks),
                    llk_mm_split(&j->mm[i], j->n_rows[i], k + 1, n_chunks));
    }
}

/* How QUANT rows for weight w (packed or not) are made: the fields of q it takes, beside x and a. */
static llk_status quant_spec(const llk_decoder *d, const llk_tensor *w, const uint8_t *packed, rows_job *q) {
    q->type = w->type; q->n = w->n_cols;
    q->ab = llk_act_row_bytes(w->type, w->n_cols);
    q->biased = packed && llk_kernels_for(d->c.isa)->panel_biased[w->type];
    return q->ab > d->act_bytes ? LLK_ERR_ARG : LLK_OK;
}

/* Y_i (T x rows_i) = X (T x cols) W_i^T (+ bias_i) for n <= 3 weights of the same input width:
 * the input is quantized once per activation format (biased or not: llk_act_bias, for the panel
 * kernels that take it so), and all rows of all weights form one pool job (one wake-up and one
 * barrier instead of n). preq: X is already in d->act[0] as quant_spec says for w[0] (n = 1). */
static llk_status linear_multi(llk_decoder *d, int n, const llk_tensor *const *w,
                               const uint8_t *const *packed, const llk_tensor *const *bias,
                               const float *x, int64_t T, float *const *y, int preq) {
    fused_job j;
    memset(&j, 0, sizeof j);
    j.n = n;
    const llk_kernels *kt = llk_kernels_for(d->c.isa);
    int fmt_of[3];
    const uint8_t *acts[3];
    for (int i = 0; i < n; i++) {
        rows_job q;
        memset(&q, 0, sizeof q);
        q.op = ROWS_QUANT; q.x = x; q.a = d->act[i];
        llk_status st = quant_spec(d, w[i], packed[i], &q);
        if (st) return st;
        fmt_of[i] = 2 * llk_type_act_format(w[i]->type) + q.biased;
        int slot = i;
        for (int k = 0; k < i; k++)
            if (fmt_of[k] == fmt_of[i]) { slot = k; break; }
        if (slot == i) {
            if (!(preq && i == 0) && (st = run_rows(d, &q, T))) return st;
            acts[i] = d->act[i];
        } else {
            acts[i] = acts[slot];
        }
        st = llk_mm_prepare(d->c.isa, w[i]->type, w[i]->data, w[i]->row_stride, w[i]->n_rows, w[i]->n_cols,
                            acts[i], T, y[i], w[i]->n_rows, &j.mm[i]);
        if (st) return st;
        if (packed[i]) {        /* the panels instead of the rows (pack_weights) */
            j.mm[i].w = packed[i];
            j.mm[i].panel = kt->panel[w[i]->type];
            j.mm[i].panel_bytes = llk_panel_bytes_of(w[i]->type, w[i]->n_cols);
        }
        j.n_rows[i] = w[i]->n_rows;
        /* weight rows per pool chunk: whole panels as llk_matmul_packed takes them, or rows */
        const int64_t rpc = packed[i] ? LLK_PANEL_ROWS * llk_panels_per_chunk(T) : ROWS_PER_CHUNK;
        j.first_chunk[i + 1] = j.first_chunk[i] + (w[i]->n_rows + rpc - 1) / rpc;
    }
    llk_status st = llk_pool_run(d->pool, j.first_chunk[n], 1, fused_fn, &j);
    if (st) return st;
    for (int i = 0; i < n; i++) {
        if (!bias || !bias[i] || !bias[i]->data) continue;
        const float *bv = (const float *)bias[i]->data;
        for (int64_t t = 0; t < T; t++)
            for (int64_t r = 0; r < w[i]->n_rows; r++) y[i][t * w[i]->n_rows + r] += bv[r];
    }
    return LLK_OK;
}

static llk_status linear(llk_decoder *d, const llk_tensor *w, const uint8_t *packed,
                         const llk_tensor *bias, const float *x, int64_t T, float *y, int preq) {
    const llk_tensor *ws[1] = {w}, *bs[1] = {bias};
    const uint8_t *ps[1] = {packed};
    float *ys[1] = {y};
    return linear_multi(d, 1, ws, ps, bs, x, T, ys, preq);
}

/* n float32 values (a whole number of cache rows) into the cache's format at y. Q8_0: per block
 * of 32, d = max|x| / 127 (stored as float16), q = x / d rounded to nearest (ties to even); plain
 * C at every ISA level, so the cache holds the same bytes on any CPU. */
static void kv_store_rows(int kv_type, const float *x, uint8_t *y, int64_t n) {
    if (kv_type == LLK_TYPE_F16) { llk_fp32_to_fp16(x, (uint16_t *)y, n); return; }
    if (kv_type == LLK_TYPE_F32) { memcpy(y, x, sizeof(float) * (size_t)n); return; }
    for (int64_t b = 0; b < n / 32; b++, x += 32, y += 34) {
        float amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const float dv = amax / 127.0f, id = dv > 0.0f ? 1.0f / dv : 0.0f;
        const llk_half h = llk_f2h(dv);
        memcpy(y, &h, 2);
        for (int i = 0; i < 32; i++) y[2 + i] = (uint8_t)(int8_t)nearbyintf(x[i] * id);
    }
}

/* T positions from p0 on of one layer's cache (at layer) from / into x (T x Hkv x D floats), head
 * by head in the cache's layout. */
static void kv_put(const llk_decoder *d, uint8_t *layer, const float *x, int64_t p0, int64_t T) {
    const int Hkv = d->c.n_head_kv, D = d->c.head_dim;
    for (int h = 0; h < Hkv; h++)
        for (int64_t t = 0; t < T; t++)
            kv_store_rows(d->c.kv_type, x + ((size_t)t * Hkv + h) * D, layer + llk_kv_at(&d->kvl, h, p0 + t), D);
}
static llk_status kv_get(const llk_decoder *d, const uint8_t *layer, int64_t p0, int64_t T, float *x) {
    const int Hkv = d->c.n_head_kv, D = d->c.head_dim;
    for (int h = 0; h < Hkv; h++)
        for (int64_t t = 0; t < T; t++) {
            llk_status st = llk_dequantize_row(LLK_ISA_REF, d->c.kv_type, layer + llk_kv_at(&d->kvl, h, p0 + t),
                                               x + ((size_t)t * Hkv + h) * D, D);
            if (st) return st;
        }
    return LLK_OK;
}

/* --- the 8-bit cache's rotation ---------------------------------------------------------------
 * An 8-bit block of 32 values has one scale, set by its largest value; keys carry a few large
 * channels, so the rest of their block is quantized coarsely. Multiplying each head's keys and
 * queries by the same orthonormal matrix H (here the normalized Walsh-Hadamard matrix, symmetric,
 * so H H = I) leaves every score q . k unchanged but spreads each channel over the whole block,
 * and the 8-bit error of the cache shrinks; values are rotated the same way, and the attention
 * output, a sum of rotated values, is rotated back by H. The cache then holds rotated rows; the
 * context shift undoes the rotation before it re-applies RoPE. Keys and queries are rotated in
 * blocks of the largest power of two (from 64) that divides the head, values and the output in
 * blocks of 64; heads that are no multiple of 64 are not rotated. (llama.cpp does the same for its
 * quantized caches; measured on SmolLM2, it is what made its q8_0 cache closer to f16 than ours.) */

static int kv_rot_k(const llk_decoder_config *c) {
    if (c->kv_type != LLK_TYPE_Q8_0 || c->head_dim % 64) return 0;
    int n = 64;
    while (c->head_dim % (2 * n) == 0) n *= 2;
    return n;
}
static int kv_rot_v(const llk_decoder_config *c) {
    return c->kv_type == LLK_TYPE_Q8_0 && c->head_dim % 64 == 0 ? 64 : 0;
}

/* x (n_vec * n floats) := each n-block times H / sqrt(n), in place (n a power of two): the fast
 * Walsh-Hadamard butterflies in Sylvester order, then the scale. Plain C at every level. */
static void hadamard_blocks(float *x, int64_t n_vec, int n) {
    const float s = 1.0f / sqrtf((float)n);
    for (int64_t v = 0; v < n_vec; v++, x += n) {
        for (int len = 1; len < n; len *= 2)
            for (int i = 0; i < n; i += 2 * len)
                for (int j = i; j < i + len; j++) {
                    const float a = x[j], b = x[j + len];
                    x[j] = a + b;
                    x[j + len] = a - b;
                }
        for (int i = 0; i < n; i++) x[i] *= s;
    }
}

/* Layer L's RoPE: the model's, or a local layer's own base, unscaled (gemma3). */
static llk_rope_params layer_rope(const llk_decoder_config *c, const llk_layer *L) {
    llk_rope_params rope = c->rope;
    if (L->rope_base > 0.0f) {
        rope.freq_base = L->rope_base; rope.scaling = LLK_ROPE_SCALING_NONE; rope.freq_scale = 1.0f;
    }
    return rope;
}

/* The batch's RoPE table for `rope` into cs (llk_rope_cs, on the pool). */
static llk_status rope_table(const llk_decoder *d, const llk_rope_params *rope, float *cs, int64_t T) {
    rows_job r;
    memset(&r, 0, sizeof r);
    r.op = ROWS_ROPE_CS; r.rope = rope; r.cs = cs;
    return run_rows(d, &r, T);
}

/* One batch of T <= n_batch tokens at positions p0 .. p0+T-1 through every layer. */
static llk_status decode_batch(llk_decoder *d, const int32_t *tokens, int64_t T, int64_t p0,
                               int all_logits, float *logits) {
    const llk_decoder_config *c = &d->c;
    const int64_t E = c->n_embd, D = c->head_dim, KD = (int64_t)c->n_head_kv * D;
    const int rk = kv_rot_k(c), rv = kv_rot_v(c);   /* the q8_0 cache's rotation blocks, or 0 */
    llk_status st;
    for (int64_t t = 0; t < T; t++) {
        d->pos[t] = (int32_t)(p0 + t);
        const uint8_t *row = (const uint8_t *)d->tok_embd.data + (size_t)tokens[t] * d->tok_embd.row_stride;
        st = llk_dequantize_row(c->isa, d->tok_embd.type, row, d->x + t * E, E);
        if (st) return st;
        if (c->embd_scale != 1.0f) llk_scale(d->x + t * E, c->embd_scale, d->x + t * E, E);
    }
    if (d->embd_release) release_embedding_rows(d, tokens, T);
    /* the positions' cosines and sines once per batch, not per layer: the model's base in the
     * first table, a local base in the second (computed again where the base changes) */
    float *cs_local = d->rope_cs + (size_t)c->n_batch * (size_t)c->rope.n_rot;
    float local_base = 0.0f;
    if (c->rope.n_rot > 0 && (st = rope_table(d, &c->rope, d->rope_cs, T))) return st;
    for (int il = 0; il < c->n_layer; il++) {
        const llk_layer *L = &d->layers[il];
        const uint8_t *const *pk = d->packed + (size_t)il * N_SLOTS;
        const llk_rope_params rope = layer_rope(c, L);
        /* attention: xb = norm(x) (the previous layer's last step made it); q, k, v = xb W^T;
         * rope; cache; att = softmax(q k^T) v */
        if (il == 0 && (st = norm_par(d, d->x, &L->attn_norm, &L->attn_norm_b, d->xb, T, E))) return st;
        {
            const llk_tensor *ws[3] = {&L->wq, &L->wk, &L->wv}, *bs[3] = {&L->bq, &L->bk, &L->bv};
            float *ys[3] = {d->q, d->k, d->v};
            if ((st = linear_multi(d, 3, ws, pk + S_Q, bs, d->xb, T, ys, 0))) return st;
        }
        if (c->qk_norm || rope.n_rot > 0) {   /* per head: rms-norm (Gemma 3, Qwen 3), then RoPE */
            rows_job r;
            memset(&r, 0, sizeof r);
            r.op = ROWS_QK; r.q = d->q; r.k = d->k;
            if (c->qk_norm) r.q_norm = (const float *)L->q_norm.data, r.k_norm = (const float *)L->k_norm.data;
            if (rope.n_rot > 0) {
                if (L->rope_base > 0.0f && L->rope_base != local_base) {
                    if ((st = rope_table(d, &rope, cs_local, T))) return st;
                    local_base = L->rope_base;
                }
                r.rope = &rope; r.cs = L->rope_base > 0.0f ? cs_local : d->rope_cs;
            }
            if ((st = run_rows(d, &r, T))) return st;
        }
        uint8_t *kc = (uint8_t *)d->k_cache + (size_t)il * d->kv_layer_bytes;
        uint8_t *vc = (uint8_t *)d->v_cache + (size_t)il * d->kv_layer_bytes;
        if (rk) {
            hadamard_blocks(d->q, T * c->n_head * D / rk, rk);
            hadamard_blocks(d->k, T * KD / rk, rk);
        }
        if (rv) hadamard_blocks(d->v, T * KD / rv, rv);
        kv_put(d, kc, d->k, p0, T);
        kv_put(d, vc, d->v, p0, T);
        llk_attn_params ap = d->kvl;
        ap.scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)D);
        ap.softcap = c->attn_softcap; ap.window = L->window; ap.causal = 1;
        /* a short attention (a generated token over a short context) costs less than waking
         * the pool: the caller does it alone (one barrier less per layer) */
        int64_t work = T * (int64_t)c->n_head * (p0 + T) * D;
        llk_pool *ap_pool = work < ATTN_SERIAL_WORK ? NULL : d->pool;
        if ((st = llk_attention(ap_pool, &ap, d->q, kc, vc, p0 + T, T, d->pos, d->att))) return st;
        if (rv) hadamard_blocks(d->att, T * c->n_head * D / rv, rv);   /* back from the rotated values */
        if ((st = linear(d, &L->wo, pk[S_O], &L->bo, d->att, T, d->xb2, 0))) return st;
        /* x += (post-normed) xb2; feed-forward: xb = norm(x), x += down(act(gate(xb)) * up(xb)) */
        if ((st = add_norm_par(d, d->x, d->xb2, c->post_norms ? &L->attn_post_norm : NULL, &L->ffn_norm,
                               &L->ffn_norm_b, d->xb, T, E)))
            return st;
        {
            const llk_tensor *ws[2] = {&L->ffn_gate, &L->ffn_up}, *bs[2] = {NULL, NULL};
            float *ys[2] = {d->g, d->u};
            if ((st = linear_multi(d, 2, ws, pk + S_GATE, bs, d->xb, T, ys, 0))) return st;
        }
        {   /* g = act(g) * u, each row quantized for the down product while it is in cache */
            rows_job a;
            memset(&a, 0, sizeof a);
            a.op = ROWS_ACT; a.g = d->g; a.u = d->u; a.a = d->act[0];
            if ((st = quant_spec(d, &L->ffn_down, pk[S_DOWN], &a)) || (st = run_rows(d, &a, T))) return st;
        }
        if ((st = linear(d, &L->ffn_down, pk[S_DOWN], NULL, d->g, T, d->xb2, 1))) return st;
        /* x += (post-normed) xb2, and the next layer's xb = norm(x) */
        const llk_layer *N = il + 1 < c->n_layer ? &d->layers[il + 1] : NULL;
        if ((st = add_norm_par(d, d->x, d->xb2, c->post_norms ? &L->ffn_post_norm : NULL, N ? &N->attn_norm : NULL,
                               N ? &N->attn_norm_b : NULL, N ? d->xb : NULL, T, E)))
            return st;
    }
    /* output: logits of every position, or of the last one only */
    const float *xs = all_logits ? d->x : d->x + (T - 1) * E;
    int64_t n_out = all_logits ? T : 1;
    if ((st = norm_rows(d, xs, &d->output_norm, d->output_norm_b.data ? &d->output_norm_b : NULL,
                        d->xb, n_out, E)))
        return st;
    if ((st = linear(d, &d->output, d->packed[(size_t)c->n_layer * N_SLOTS], NULL, d->xb, n_out, logits, 0)))
        return st;
    if (c->final_softcap > 0.0f) return llk_softcap_isa(c->isa, logits, n_out * c->n_vocab, 1.0f, c->final_softcap, NULL);
    return LLK_OK;
}

llk_status llk_decode(llk_decoder *d, const int32_t *tokens, int64_t n_tok, int64_t start_pos,
                      int all_logits, float *logits) {
    if (!d || !tokens || !logits || n_tok <= 0 || start_pos < 0 ||
        start_pos + n_tok > d->c.n_ctx)
        return LLK_ERR_ARG;
    for (int64_t t = 0; t < n_tok; t++)
        if (tokens[t] < 0 || tokens[t] >= d->c.n_vocab) return LLK_ERR_ARG;
    for (int64_t b = 0; b < n_tok; b += d->c.n_batch) {
        int64_t T = n_tok - b < d->c.n_batch ? n_tok - b : d->c.n_batch;
        /* a middle batch of a long prompt only fills the cache; its last-row logits are
         * overwritten by the next batch's */
        float *out = all_logits ? logits + b * d->c.n_vocab : logits;
        llk_status st = decode_batch(d, tokens + b, T, start_pos + b, all_logits, out);
        if (st) return st;
    }
    return LLK_OK;
}

/* Positions [src, src + n) of one layer's cache (at layer) to [dst, dst + n), dst < src: head by
 * head, in runs that stay inside a block at both ends, lowest positions first (so a run only
 * overwrites positions already moved or dropped). */
static void kv_move(const llk_decoder *d, uint8_t *layer, int64_t dst, int64_t src, int64_t n) {
    const size_t hb = llk_row_bytes(d->c.kv_type, d->c.head_dim);
    for (int h = 0; h < d->c.n_head_kv; h++)
        for (int64_t t = 0, run; t < n; t += run) {
            const int64_t a = KV_BLOCK - (dst + t) % KV_BLOCK, b = KV_BLOCK - (src + t) % KV_BLOCK;
            run = n - t < a ? n - t : a;
            run = run < b ? run : b;
            memmove(layer + llk_kv_at(&d->kvl, h, dst + t), layer + llk_kv_at(&d->kvl, h, src + t), (size_t)run * hb);
        }
}

/* Drop cache positions [p0, p0 + n_drop) and move [p0 + n_drop, n_past) down to p0, rotating the
 * moved keys by -n_drop positions (RoPE angles are linear in the position, so rotating again by a
 * delta gives the key at its new position). YaRN also scales magnitudes, which a second rotation
 * would square: LLK_ERR_ARG, and the caller decodes the moved tokens again instead. */
llk_status llk_decoder_kv_shift(llk_decoder *d, int64_t p0, int64_t n_drop, int64_t n_past) {
    if (!d || p0 < 0 || n_drop < 0 || n_past > d->c.n_ctx || p0 + n_drop > n_past) return LLK_ERR_ARG;
    if (d->c.rope.n_rot > 0 && d->c.rope.scaling == LLK_ROPE_SCALING_YARN) return LLK_ERR_ARG;
    if (n_drop == 0) return LLK_OK;
    const llk_decoder_config *c = &d->c;
    const int64_t KD = (int64_t)c->n_head_kv * c->head_dim, n_move = n_past - p0 - n_drop;
    const int rk = kv_rot_k(c);
    for (int64_t t = 0; t < c->n_batch; t++) d->pos[t] = (int32_t)-n_drop;
    for (int il = 0; il < c->n_layer; il++) {
        uint8_t *kc = (uint8_t *)d->k_cache + (size_t)il * d->kv_layer_bytes;
        uint8_t *vc = (uint8_t *)d->v_cache + (size_t)il * d->kv_layer_bytes;
        kv_move(d, kc, p0, p0 + n_drop, n_move);
        kv_move(d, vc, p0, p0 + n_drop, n_move);
        if (c->rope.n_rot <= 0) continue;
        llk_rope_params rope = layer_rope(c, &d->layers[il]);
        rope.attn_factor = 1.0f;    /* the magnitude factor belongs to the first rotation only */
        for (int64_t b = 0; b < n_move; b += c->n_batch) {   /* rows through the k scratch */
            int64_t T = n_move - b < c->n_batch ? n_move - b : c->n_batch;
            llk_status st = kv_get(d, kc, p0 + b, T, d->k);
            if (st) return st;
            if (rk) hadamard_blocks(d->k, T * KD / rk, rk);   /* H H = I: the keys as RoPE left them */
            if ((st = llk_rope(&rope, d->k, T, c->n_head_kv, d->pos))) return st;
            if (rk) hadamard_blocks(d->k, T * KD / rk, rk);
            kv_put(d, kc, d->k, p0 + b, T);   /* Q8_0: quantized again */
        }
    }
    return LLK_OK;
}

/* --- saving and restoring the cache ------------------------------------------------------------ */

size_t llk_decoder_kv_range_bytes(const llk_decoder *d, int64_t n) {
    if (!d || n < 0 || n > d->c.n_ctx) return 0;
    return 2 * (size_t)d->c.n_layer * (size_t)n * d->kv_row_bytes;
}

/* dir 0: cache -> buf, 1: buf -> cache; the image is layer by layer, K rows then V rows, each row
 * position-major (Hkv x D values), whatever the cache's own layout. */
static llk_status kv_copy(const llk_decoder *d, int64_t p0, int64_t n, uint8_t *buf, size_t bytes, int dir) {
    if (!d || !buf || p0 < 0 || n < 0 || p0 + n > d->c.n_ctx) return LLK_ERR_ARG;
    const size_t part = (size_t)n * d->kv_row_bytes, hb = llk_row_bytes(d->c.kv_type, d->c.head_dim);
    if (bytes < 2 * (size_t)d->c.n_layer * part) return LLK_ERR_ARG;
    for (int il = 0; il < d->c.n_layer; il++)
        for (int kv = 0; kv < 2; kv++) {
            uint8_t *layer = (uint8_t *)(kv ? d->v_cache : d->k_cache) + (size_t)il * d->kv_layer_bytes;
            uint8_t *img = buf + (2 * (size_t)il + (size_t)kv) * part;
            for (int h = 0; h < d->c.n_head_kv; h++)
                for (int64_t t = 0; t < n; t++) {
                    uint8_t *c = layer + llk_kv_at(&d->kvl, h, p0 + t), *r = img + (size_t)t * d->kv_row_bytes + h * hb;
                    if (dir) memcpy(c, r, hb);
                    else memcpy(r, c, hb);
                }
        }
    return LLK_OK;
}

llk_status llk_decoder_kv_read(const llk_decoder *d, int64_t p0, int64_t n, void *buf, size_t bytes) {
    return kv_copy(d, p0, n, (uint8_t *)buf, bytes, 0);
}

llk_status llk_decoder_kv_write(llk_decoder *d, int64_t p0, int64_t n, const void *buf, size_t bytes) {
    return kv_copy(d, p0, n, (uint8_t *)(uintptr_t)buf, bytes, 1);
}
