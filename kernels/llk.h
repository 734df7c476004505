/* llk.h — public interface of the Llambda kernel library (prefix llk_).
 *
 * The library holds the CPU kernels of the inference engine: per-type row dequantization and
 * dot products against quantized activations, a persistent thread pool, matrix x vector and
 * matrix x matrix products, and the element-wise / normalization / attention operations of a
 * decoder. It never prints, never exits and never allocates behind a caller's back except in the
 * *_new functions and in documented scratch buffers: every call returns an llk_status.
 *
 * Everything between LLK_CDEF_BEGIN and LLK_CDEF_END is also fed verbatim to cffi's cdef(), so
 * that region holds only plain declarations (no macros, no #if).
 *
 * Shapes in comments: rows x cols, row-major; "n" counts elements (not bytes) unless named *_bytes.
 */
#ifndef LLK_H
#define LLK_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* LLK_CDEF_BEGIN */

/* Status codes: 0 is success, everything else is a failure the caller turns into an error. */
typedef enum {
    LLK_OK = 0,
    LLK_ERR_ARG = 1,          /* a bad argument (null pointer, length not a block multiple...) */
    LLK_ERR_TYPE = 2,         /* a tensor type this library cannot run */
    LLK_ERR_NOMEM = 3,        /* an allocation failed */
    LLK_ERR_ABORTED = 4,      /* the pool's abort flag was set while the job ran */
    LLK_ERR_THREAD = 5,       /* the operating system refused to start a thread */
    LLK_ERR_ISA = 6,          /* an instruction-set level this CPU or build does not have */
    LLK_ERR_BUSY = 7          /* the pool is running a job for another thread */
} llk_status;

/* Instruction-set levels, lowest first. */
typedef enum {
    LLK_ISA_REF = 0,          /* plain C, every CPU */
    LLK_ISA_AVX2 = 1,         /* AVX2 + FMA + F16C */
    LLK_ISA_AVX512 = 2,       /* AVX-512 F/BW/VL/DQ (+ VNNI where present) */
    LLK_ISA_DEFAULT = -1      /* whatever llk_isa() says: the chosen level */
} llk_isa_level;

/* GGML tensor type ids (the numbers in a GGUF tensor table). */
typedef enum {
    LLK_TYPE_F32 = 0, LLK_TYPE_F16 = 1, LLK_TYPE_Q4_0 = 2, LLK_TYPE_Q4_1 = 3,
    LLK_TYPE_Q5_0 = 6, LLK_TYPE_Q5_1 = 7, LLK_TYPE_Q8_0 = 8,
    LLK_TYPE_Q2_K = 10, LLK_TYPE_Q3_K = 11, LLK_TYPE_Q4_K = 12, LLK_TYPE_Q5_K = 13,
    LLK_TYPE_Q6_K = 14, LLK_TYPE_IQ2_XXS = 16, LLK_TYPE_IQ2_XS = 17, LLK_TYPE_IQ3_XXS = 18,
    LLK_TYPE_IQ1_S = 19, LLK_TYPE_IQ4_NL = 20, LLK_TYPE_IQ3_S = 21, LLK_TYPE_IQ2_S = 22,
    LLK_TYPE_IQ4_XS = 23, LLK_TYPE_IQ1_M = 29, LLK_TYPE_BF16 = 30, LLK_TYPE_TQ1_0 = 34,
    LLK_TYPE_TQ2_0 = 35, LLK_TYPE_MXFP4 = 39
} llk_type;

/* Activation formats a weight type's dot product consumes. */
typedef enum {
    LLK_ACT_F32 = 0,          /* plain float32 (weights F32, F16, BF16) */
    LLK_ACT_Q8_32 = 1,        /* llk_block_q8_32x8: 8-bit per 32 with scale and scaled sum */
    LLK_ACT_Q8_256 = 2        /* llk_block_q8_256: 8-bit per 256 with scale and 16 block sums */
} llk_act_format;

/* Eight blocks of 32 activations, scales first so SIMD kernels load 8 at once: block j holds
 * x[i] ~= d[j] * qs[j][i], s[j] = d[j] * sum(qs[j]) (the mins' term of Q4_1 and Q5_1) and
 * o[j] = -8 * sum(qs[j]) (the offset of Q4_0's levels as an exact integer; Q5_0's is twice it).
 * 352 bytes; a row's last group is zero-padded. */
typedef struct { float d[8]; float s[8]; int32_t o[8]; int8_t qs[8][32]; } llk_block_q8_32x8;
/* One block of 256 activations: x[i] ~= d * qs[i]; bsums[j] = sum(qs[16j .. 16j+15]) (the groups
 * of 16 of Q2_K, Q3_K, Q6_K) and gsums[g] = sum(qs[32g .. 32g+31]) = bsums[2g] + bsums[2g+1] (the
 * groups of 32 of Q4_K, Q5_K, IQ4_XS, ready for a broadcast instead of a pairwise add per use).
 * 308 bytes. */
typedef struct { float d; int8_t qs[256]; int16_t bsums[16]; int16_t gsums[8]; } llk_block_q8_256;

/* --- CPU features and dispatch ------------------------------------------------------------- */

int llk_isa(void);                     /* the level in use: best available, lowered by LLAMBDA_ISA */
int llk_isa_best(void);                /* the best level this CPU and build support */
const char *llk_isa_name(int isa);     /* "ref", "avx2", "avx512" (or "avx512-vnni"); NULL if bad */
int llk_cpu_has_vnni(void);            /* 1 where AVX-512 VNNI is present and used */
const char *llk_version(void);

/* --- type traits --------------------------------------------------------------------------- */

int llk_type_supported(int type);      /* 1 if the type has dequantize and dot kernels */
int llk_type_block_size(int type);     /* elements per block; 0 for an unknown type */
int llk_type_block_bytes(int type);    /* bytes per block; 0 for an unknown type */
int llk_type_act_format(int type);     /* an llk_act_format; -1 for an unknown type */
size_t llk_row_bytes(int type, int64_t n);        /* bytes of an n-element row; 0 if invalid */
size_t llk_act_row_bytes(int type, int64_t n);    /* bytes of that row's activations */

/* --- per-row kernels (isa = an llk_isa_level; LLK_ISA_DEFAULT for the dispatched one) ------ */

/* y[0..n) = the n values of one row of `type` held in x (row bytes, any alignment). */
llk_status llk_dequantize_row(int isa, int type, const void *x, float *y, int64_t n);
/* a[0..act_row_bytes) = x[0..n) in the activation format `type` consumes. */
llk_status llk_quantize_act(int isa, int type, const float *x, void *a, int64_t n);
/* *out = dot(row w of `type`, activations a made by llk_quantize_act for the same type).
 * Weight rows may start at any byte; activations and float arrays must be 4-byte aligned. */
llk_status llk_vec_dot(int isa, int type, const void *w, const void *a, int64_t n, float *out);

/* --- thread pool --------------------------------------------------------------------------- */

typedef struct llk_pool llk_pool;

int llk_cpu_count_allowed(void);       /* CPUs this process may run on */
int llk_cpu_count_physical(void);      /* physical cores among them (>= 1) */
/* n_threads <= 0: one per physical core. Never more than the allowed CPUs. One thread drives a
 * pool at a time: a job started while another runs returns LLK_ERR_BUSY. */
llk_status llk_pool_new(int n_threads, llk_pool **out);
void llk_pool_free(llk_pool *pool);
int llk_pool_size(const llk_pool *pool);
/* Set from any thread: running and later jobs stop at the next chunk and return LLK_ERR_ABORTED
 * until llk_pool_clear_abort. */
void llk_pool_abort(llk_pool *pool);
void llk_pool_clear_abort(llk_pool *pool);
int llk_pool_aborted(const llk_pool *pool);
/* Per-thread busy time (ns spent inside jobs) and chunks done, since the pool started. */
uint64_t llk_pool_busy_ns(const llk_pool *pool, int ith);
uint64_t llk_pool_chunks(const llk_pool *pool, int ith);
uint64_t llk_pool_jobs(const llk_pool *pool);
/* Since the pool started: ns the driving thread spent waiting, after its own chunks, for chunks
 * other threads had taken, and how many jobs had it wait more than STALL_NS (llk_pool.c: 100 us; a thread the OS or the
 * hypervisor stopped mid-chunk: the job cannot end before that chunk does). */
uint64_t llk_pool_wait_ns(const llk_pool *pool);
uint64_t llk_pool_stalls(const llk_pool *pool);
/* Microseconds a waiting worker spins before it sleeps (default 200: covers the gaps between the
 * steps of one decode; 0 sleeps at once). */
void llk_pool_set_spin(llk_pool *pool, int spin_us);
/* Threads now taking part in jobs (1 .. size): the pool narrows while its jobs keep waiting on
 * threads the OS does not run, and widens again now and then. set_adaptive(pool, 0) keeps it at
 * its size (call it between jobs, from the driving thread). */
int llk_pool_width(const llk_pool *pool);
void llk_pool_set_adaptive(llk_pool *pool, int on);
/* Test job: n_items items in chunks of `chunk`; each item burns `work` units of arithmetic and
 * adds 1 to counts[item] (counts may be NULL). Proves that every item runs exactly once. */
llk_status llk_pool_test_job(llk_pool *pool, int64_t n_items, int64_t chunk, int64_t work,
                             int32_t *counts);
/* Test job for the width: items done by threads other than the caller take stall_us each (as if
 * the OS had stopped them), the caller's a sixth of that; counts as above. */
llk_status llk_pool_test_stall_job(llk_pool *pool, int64_t n_items, int stall_us, int32_t *counts);

/* --- matrix products ----------------------------------------------------------------------- */

/* y[r] = dot(W row r, x) for r in [0, n_rows): W is n_rows x n_cols of `type`, rows row_stride
 * bytes apart (>= llk_row_bytes). x is float32[n_cols]. Rows split among the pool's threads. */
llk_status llk_matvec(llk_pool *pool, int isa, int type, const void *w, size_t row_stride,
                      int64_t n_rows, int64_t n_cols, const float *x, float *y);
/* Y (n_tok x n_rows, row stride ldy floats) = X (n_tok x n_cols, stride ldx) * W^T. */
llk_status llk_matmul(llk_pool *pool, int isa, int type, const void *w, size_t row_stride,
                      int64_t n_rows, int64_t n_cols, const float *x, int64_t ldx,
                      int64_t n_tok, float *y, int64_t ldy);
/* The thread parts: what one of nth threads computes (rows ith*n/nth ..), activations already
 * quantized into a (n_tok rows of llk_act_row_bytes each). Useful to callers with their own pool. */
llk_status llk_matmul_part(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                           int64_t n_cols, const void *a, int64_t n_tok, float *y, int64_t ldy,
                           int ith, int nth);

/* --- packed weights: the matrix x matrix layout (llk_panel.c) ------------------------------- */

/* 1 where the decoder packs weights of `type` at level isa (the level has panel kernels). */
int llk_isa_packs(int isa, int type);
/* Bytes of W (n_rows x n_cols of `type`) packed into panels of 8 rows; 0 where the type has no
 * packed layout or n_rows is not a multiple of 8. */
size_t llk_packed_bytes(int type, int64_t n_rows, int64_t n_cols);
/* out[0 .. llk_packed_bytes) = W packed (W's rows row_stride bytes apart), across the pool. */
llk_status llk_pack(llk_pool *pool, int type, const void *w, size_t row_stride, int64_t n_rows,
                    int64_t n_cols, void *out);
/* Y (n_tok x n_rows, stride ldy) = X (n_tok x n_cols, stride ldx) * W^T with W packed: the same
 * floats as llk_matmul on the unpacked W. LLK_ERR_TYPE where the level has no panel kernel for
 * the type (LLK_ISA_REF always has one). */
llk_status llk_matmul_packed(llk_pool *pool, int isa, int type, const void *packed, int64_t n_rows,
                             int64_t n_cols, const float *x, int64_t ldx, int64_t n_tok, float *y,
                             int64_t ldy);

/* --- decoder operations (float32 unless said; in place allowed where y == x) --------------- */

/* y = x / sqrt(mean(x^2) + eps) * w   (w may be NULL) over rows of n. */
llk_status llk_rms_norm(const float *x, const float *w, float *y, int64_t n_rows, int64_t n,
                        float eps);
/* y = (x - mean) / sqrt(var + eps) * w + b   (w, b may be NULL). */
llk_status llk_layer_norm(const float *x, const float *w, const float *b, float *y,
                          int64_t n_rows, int64_t n, float eps);
void llk_softmax(float *x, int64_t n);                   /* in place, one row */
void llk_silu(const float *x, float *y, int64_t n);      /* y = x * sigmoid(x) */
void llk_gelu(const float *x, float *y, int64_t n);      /* tanh approximation */
void llk_gelu_erf(const float *x, float *y, int64_t n);  /* exact (erf) GELU */
/* Gated: y = act(g) * u   (SwiGLU with act = SiLU, GeGLU with act = GELU). */
void llk_swiglu(const float *g, const float *u, float *y, int64_t n);
void llk_geglu(const float *g, const float *u, float *y, int64_t n);
/* y = act(g) * u at one level, act an llk_ffn_act (below): the decoder's gated feed-forward. */
llk_status llk_glu_isa(int isa, int act, const float *g, const float *u, float *y, int64_t n);
/* Soft-capped logits at one level: x[i] = cap tanh(x[i] scale / cap) in place (tanh from the
 * library's own exp, the same floats at every level); *max (if not NULL) = the largest. cap > 0. */
llk_status llk_softcap_isa(int isa, float *x, int64_t n, float scale, float cap, float *max);
void llk_add(const float *a, const float *b, float *y, int64_t n);
void llk_mul(const float *a, const float *b, float *y, int64_t n);
void llk_scale(const float *a, float s, float *y, int64_t n);

/* RoPE scaling kinds. */
typedef enum { LLK_ROPE_SCALING_NONE = 0, LLK_ROPE_SCALING_LINEAR = 1, LLK_ROPE_SCALING_YARN = 2,
               LLK_ROPE_SCALING_LLAMA3 = 3 } llk_rope_scaling;

typedef struct {
    int head_dim;             /* elements per head */
    int n_rot;                /* rotated dims (<= head_dim, even); the rest pass through */
    int neox;                 /* 0: rotate pairs (2i, 2i+1); 1: rotate (i, i + n_rot/2) */
    float freq_base;          /* theta, e.g. 10000 */
    int scaling;              /* an llk_rope_scaling */
    float freq_scale;         /* linear/YaRN: 1 / factor */
    int n_ctx_orig;           /* YaRN / Llama-3: original training context */
    float ext_factor;         /* YaRN: ramp mix (0 = pure linear, 1 = full YaRN); < 0 = auto */
    float attn_factor;        /* YaRN: magnitude scale (1 unless the model says otherwise) */
    float beta_fast;          /* YaRN: 32 */
    float beta_slow;          /* YaRN: 1 */
    float low_freq_factor;    /* Llama-3: 1 */
    float high_freq_factor;   /* Llama-3: 4 */
    float factor;             /* Llama-3 scaling factor, e.g. 8 */
    const float *freq_factors;/* NULL, or n_rot/2 divisors of the pairs' frequencies (GGUF
                                 rope_freqs.weight: Llama 3.1, LongRoPE); applied before scaling */
} llk_rope_params;

void llk_rope_params_default(llk_rope_params *p, int head_dim);
/* x: n_tok x n_head x head_dim, rotated in place; token t sits at position pos[t]. */
llk_status llk_rope(const llk_rope_params *p, float *x, int64_t n_tok, int64_t n_head,
                    const int32_t *pos);
/* The same in two steps, for many rotations at the same positions (every layer of a batch):
 * cs (n_tok x n_rot floats) = each position's cosines and sines as llk_rope takes them, then the
 * rotation by them, the same floats as llk_rope gives. */
llk_status llk_rope_cs(const llk_rope_params *p, const int32_t *pos, int64_t n_tok, float *cs);
llk_status llk_rope_with(const llk_rope_params *p, const float *cs, float *x, int64_t n_tok, int64_t n_head);

typedef struct {
    int n_head;               /* query heads */
    int n_head_kv;            /* key/value heads (n_head % n_head_kv == 0) */
    int head_dim;
    int kv_type;              /* the caches' llk_type: LLK_TYPE_F32, LLK_TYPE_F16, or LLK_TYPE_Q8_0
                                 (blocks of 32 values: float16 scale + 32 int8; head_dim % 32 == 0) */
    float scale;              /* logit scale, usually 1/sqrt(head_dim) */
    float softcap;            /* > 0: logits = softcap * tanh(logits / softcap) */
    int window;               /* > 0: key j is visible to a query at pos p only if p - j < window */
    int causal;               /* 1: key j visible only if j <= p */
    int kv_block;             /* 0: the caches are position-major (below); > 0: they are in blocks
                                 of kv_block positions, each block head after head (see llk_kv_at) */
    int64_t kv_ctx;           /* kv_block > 0: positions the caches hold (the last block holds
                                 what is left of them); ignored otherwise */
} llk_attn_params;

/* Where position pos of KV head h starts in a cache laid out as p says. Position-major (kv_block 0):
 * row pos of n_head_kv x head_dim values, the head at h x its bytes. Blocked: positions
 * [b x kv_block, (b + 1) x kv_block) fill block b, which starts at b x kv_block rows; inside it each
 * head's positions are consecutive (head_dim values each), head after head. So one head's keys
 * are one stream per block: what a prompt's tiles and a generated token read. */
size_t llk_kv_at(const llk_attn_params *p, int64_t h, int64_t pos);

/* q: n_tok x n_head x head_dim (float32) at positions pos[t]; k, v: caches of kv_type holding
 * n_kv (or more) positions laid out as llk_kv_at says (a Q8_0 head is llk_row_bytes(Q8_0,
 * head_dim) bytes, read as it is: no dequantized copy); out: n_tok x n_head x head_dim. Run across
 * the pool by (token, KV head, up to 4 of its query heads). Scratch: 4 x n_kv floats per thread,
 * allocated per call. */
llk_status llk_attention(llk_pool *pool, const llk_attn_params *p, const float *q,
                         const void *k, const void *v, int64_t n_kv, int64_t n_tok,
                         const int32_t *pos, float *out);
/* The same at a given instruction-set level (an llk_isa_level; tests hold the levels together). */
llk_status llk_attention_isa(llk_pool *pool, int isa, const llk_attn_params *p, const float *q,
                             const void *k, const void *v, int64_t n_kv, int64_t n_tok,
                             const int32_t *pos, float *out);

/* --- conversions and measurement ------------------------------------------------------------ */

void llk_fp32_to_fp16(const float *x, uint16_t *y, int64_t n);
void llk_fp16_to_fp32(const uint16_t *x, float *y, int64_t n);
/* Read `bytes` of buf (>= 64-byte multiple) `reps` times across the pool; returns seconds. */
double llk_read_bandwidth_probe(llk_pool *pool, const void *buf, size_t bytes, int reps);
/* The integer peak of level isa: 8-bit operations per second (a multiply-add counts two) of its
 * widest 8-bit multiply-add instruction (AVX2: vpmaddubsw; AVX-512: vpdpbusd with VNNI, else
 * vpmaddubsw on 512 bits), every pool thread running 16 chunks of n_iter rounds of it and nothing
 * else; 0 at the reference level, -1 on bad arguments. */
double llk_int8_peak_probe(llk_pool *pool, int isa, int64_t n_iter);
double llk_now_seconds(void);
/* Best-of-`reps` seconds of `inner` back-to-back passes of vec_dot over n_rows rows of `type`
 * against activations a (no thread pool, no call overhead): the kernels' in-cache throughput. */
double llk_bench_vec_dot(int isa, int type, const void *w, size_t row_stride, int64_t n_rows,
                         int64_t n_cols, const void *a, int inner, int reps);

/* --- the generic decoder (llk_decode.c) ------------------------------------------------------ */

typedef enum { LLK_NORM_RMS = 0, LLK_NORM_LAYER = 1 } llk_norm_kind;
typedef enum { LLK_FFN_SILU = 0, LLK_FFN_GELU = 1, LLK_FFN_GELU_ERF = 2 } llk_ffn_act;

/* One weight matrix (n_rows x n_cols of `type`, rows row_stride bytes apart) or float32 vector
 * (n_rows = 1, type F32). data == NULL: absent. Borrowed: the caller keeps it mapped. */
typedef struct { const void *data; int type; int64_t n_rows; int64_t n_cols; size_t row_stride; } llk_tensor;

typedef struct {
    llk_tensor attn_norm, attn_norm_b;          /* E */
    llk_tensor wq, wk, wv;                      /* (H*D) x E, (Hkv*D) x E, (Hkv*D) x E */
    llk_tensor bq, bk, bv;                      /* optional biases */
    llk_tensor q_norm, k_norm;                  /* D: QK-norm weights (optional) */
    llk_tensor wo, bo;                          /* E x (H*D) */
    llk_tensor attn_post_norm;                  /* E (optional) */
    llk_tensor ffn_norm, ffn_norm_b;            /* E */
    llk_tensor ffn_gate, ffn_up, ffn_down;      /* F x E, F x E, E x F */
    llk_tensor ffn_post_norm;                   /* E (optional) */
    int window;                                 /* sliding window of this layer; 0 = full */
    float rope_base;                            /* > 0: this layer's RoPE base, unscaled, instead
                                                   of the config's (gemma3's local layers) */
} llk_layer;

typedef struct {
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    int n_ctx;                /* KV cache positions */
    int n_batch;              /* tokens per pass; longer inputs are split */
    int kv_type;              /* K/V cache: LLK_TYPE_F16 (default), LLK_TYPE_F32 or LLK_TYPE_Q8_0
                                 (rows quantized as they are written; head_dim % 32 == 0) */
    int norm_kind;            /* an llk_norm_kind */
    float norm_eps;
    float norm_weight_offset; /* norm weight used as (w + offset) */
    int ffn_act;              /* an llk_ffn_act: the gated feed-forward's activation */
    int qkv_bias, qk_norm, post_norms, tied_output;
    float embd_scale;         /* embeddings are multiplied by this (1: none) */
    float attn_scale;         /* <= 0: 1/sqrt(head_dim) */
    float attn_softcap, final_softcap;   /* > 0: cap * tanh(x / cap) */
    llk_rope_params rope;     /* n_rot == 0: no RoPE */
    int isa;                  /* an llk_isa_level for the matrix products */
    int pack;                 /* 0: weights run as read; 1 (default): weights the level has panel
                                 kernels for are copied into the packed layout (llk_pack) at
                                 creation; 2: and the source pages are released: only for weights
                                 in a read-only file mapping (they are re-read from the file if
                                 touched), so the copy replaces them instead of doubling memory */
} llk_decoder_config;

typedef struct llk_decoder llk_decoder;

void llk_decoder_config_default(llk_decoder_config *c);
/* Checks every shape against the config; allocates the KV cache and scratch for n_batch tokens.
 * output is ignored when tied_output (the embedding matrix is used). */
llk_status llk_decoder_new(const llk_decoder_config *cfg, const llk_tensor *tok_embd,
                           const llk_tensor *output_norm, const llk_tensor *output_norm_b,
                           const llk_tensor *output, const llk_layer *layers, llk_pool *pool,
                           llk_decoder **out);
void llk_decoder_free(llk_decoder *d);
size_t llk_decoder_kv_bytes(const llk_decoder *d);
size_t llk_decoder_packed_bytes(const llk_decoder *d);   /* the packed copies of the weights */
/* tokens[0..n_tok) at positions start_pos.. (start_pos + n_tok <= n_ctx): fills the KV cache and
 * writes logits: n_tok x n_vocab if all_logits, else n_vocab (the last position). */
llk_status llk_decode(llk_decoder *d, const int32_t *tokens, int64_t n_tok, int64_t start_pos,
                      int all_logits, float *logits);
/* Drop cache positions [p0, p0 + n_drop) of the n_past filled ones; later positions move down
 * and their keys are re-rotated. LLK_ERR_ARG for YaRN (decode the moved tokens again instead). */
llk_status llk_decoder_kv_shift(llk_decoder *d, int64_t p0, int64_t n_drop, int64_t n_past);
/* Saving and restoring the cache: positions [p0, p0 + n) of every layer's K and V, in the cache's
 * own format, layer by layer (layer 0's K rows, its V rows, layer 1's K rows...). kv_range_bytes
 * is the size of that image for n positions (0 if n is out of range); read copies the image into
 * buf, write copies one back (bytes must be at least the image's size). */
size_t llk_decoder_kv_range_bytes(const llk_decoder *d, int64_t n);
llk_status llk_decoder_kv_read(const llk_decoder *d, int64_t p0, int64_t n, void *buf, size_t bytes);
llk_status llk_decoder_kv_write(llk_decoder *d, int64_t p0, int64_t n, const void *buf, size_t bytes);

/* --- sampling (llk_sample.c) ---------------------------------------------------------------- */

/* The chain, in llama.cpp's default order: penalties over the window, top-k, top-p (over what
 * top-k kept, renormalised), min-p (relative to the best), temperature, one draw. Off values:
 * top_k <= 0, top_p >= 1, min_p <= 0, repeat_penalty 1, the other penalties 0. */
typedef struct {
    float temperature;        /* <= 0: greedy (arg-max after penalties) */
    int32_t top_k;
    float top_p, min_p;
    float repeat_penalty, frequency_penalty, presence_penalty;
} llk_sampler_params;

/* Bytes of the scratch buffer the calls below need (allocate once, reuse every token). */
size_t llk_sample_scratch_bytes(int64_t n_vocab, int64_t n_window);
/* The candidates that survive the chain, best first (higher logit, then lower id), with their
 * penalised logits: ids/vals need room for n_vocab. Returns the count, -1 on a bad argument. */
int64_t llk_sample_candidates(const float *logits, int64_t n_vocab, const int32_t *window,
                              int64_t n_window, const llk_sampler_params *p, void *scratch,
                              int32_t *ids, float *vals);
/* One token. u in [0, 1) is the caller's uniform draw (unused when greedy). -1 on a bad argument. */
int32_t llk_sample(const float *logits, int64_t n_vocab, const int32_t *window, int64_t n_window,
                   const llk_sampler_params *p, double u, void *scratch);

/* --- the generation loop (llk_generate.c) ---------------------------------------------------- */

/* A run of generated tokens without returning per token. logits: those after the last decoded
 * token (pos tokens are in the cache); they are overwritten as the run goes. hist: the last n_hist
 * tokens of the cache with room for max_tokens more (the penalty window is its last n_window).
 * Step i samples with uniform u[i] into out; stops after a token in stop_ids, after max_tokens, or
 * once max_seconds have passed; otherwise decodes the token at pos + i and appends it to hist.
 * The last token sampled is never decoded: *n_out are sampled, the first *n_out - 1 decoded, also
 * when the run ends in an error (LLK_ERR_ABORTED: the pool was aborted). */
llk_status llk_generate(llk_decoder *d, float *logits, int64_t n_vocab, int64_t pos,
                        int32_t *hist, int64_t n_hist, int64_t n_window,
                        const llk_sampler_params *p, const double *u, const int32_t *stop_ids,
                        int64_t n_stop, int64_t max_tokens, double max_seconds, void *scratch,
                        int32_t *out, int64_t *n_out, double *sample_seconds);

/* LLK_CDEF_END */

#ifdef __cplusplus
}
#endif
#endif /* LLK_H */
