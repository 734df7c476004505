/* llk_sample.c — choosing the next token from a row of logits, in llama.cpp's default order:
 * penalties over a window of recent tokens, top-k, top-p, min-p, temperature, then one draw.
 *
 * The order of candidates is total and fixed: a higher logit first, and among equal logits the
 * lower id first. So the result depends only on the logits, the settings and the uniform number
 * the caller draws (the caller owns the random generator and its seed).
 *
 * Cost: one pass over the vocabulary for top-k (a block of 16 logits is skipped with one
 * comparison each against the k-th best so far), never a sort of the whole vocabulary when a
 * filter is on. With every filter off the draw walks the vocabulary in id order instead.
 */
#include "llk.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__) || defined(_M_X64)
#include <emmintrin.h>     /* every x86-64 CPU has SSE2: no dispatch needed */
#define LLK_SAMPLE_SSE2 1
#endif

typedef struct { float v; int32_t id; } cand;

/* a ranks before b: higher logit, then lower id. NaN logits rank as -inf. */
static inline float rank_value(float v) { return v == v ? v : -INFINITY; }
static inline int before(cand a, cand b) { return a.v > b.v || (a.v == b.v && a.id < b.id); }

static int cand_cmp(const void *pa, const void *pb) {
    cand a = *(const cand *)pa, b = *(const cand *)pb;
    return before(a, b) ? -1 : before(b, a) ? 1 : 0;
}

/* The largest of x[0..16), NaNs ignored (-inf if all are NaN). */
static inline float max16(const float *x) {
#ifdef LLK_SAMPLE_SSE2
    /* maxps(a, b) returns b when a is NaN: the accumulator goes second */
    __m128 m = _mm_set1_ps(-INFINITY);
    m = _mm_max_ps(_mm_loadu_ps(x), m);
    m = _mm_max_ps(_mm_loadu_ps(x + 4), m);
    m = _mm_max_ps(_mm_loadu_ps(x + 8), m);
    m = _mm_max_ps(_mm_loadu_ps(x + 12), m);
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(1, 0, 3, 2)));
    m = _mm_max_ps(m, _mm_shuffle_ps(m, m, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtss_f32(m);
#else
    float m = -INFINITY;
    for (int j = 0; j < 16; j++) m = x[j] > m ? x[j] : m;
    return m;
#endif
}

/* Min-heap on the ranking: heap[0] is the worst of those kept. */
static void sift_down(cand *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && before(h[w], h[l])) w = l;
        if (r < n && before(h[w], h[r])) w = r;
        if (w == i) return;
        cand t = h[i]; h[i] = h[w]; h[w] = t;
        i = w;
    }
}

/* The best k of x[0..n) into out[0..k), best first (k <= n). */
static void top_k_sorted(const float *x, int64_t n, int64_t k, cand *out) {
    for (int64_t i = 0; i < k; i++) { out[i].v = rank_value(x[i]); out[i].id = (int32_t)i; }
    for (int64_t i = k / 2; i-- > 0;) sift_down(out, k, i);
    int64_t i = k;
    /* A later id never beats an equal logit already kept, so "> worst" is the whole test. */
    for (; i + 16 <= n; i += 16) {
        if (!(max16(x + i) > out[0].v)) continue;
        for (int j = 0; j < 16; j++) {
            if (x[i + j] > out[0].v) {
                out[0].v = x[i + j]; out[0].id = (int32_t)(i + j);
                sift_down(out, k, 0);
            }
        }
    }
    for (; i < n; i++) {
        if (x[i] > out[0].v) {
            out[0].v = x[i]; out[0].id = (int32_t)i;
            sift_down(out, k, 0);
        }
    }
    qsort(out, (size_t)k, sizeof(cand), cand_cmp);
}

static float max_of(const float *x, int64_t n) {
    float m = -INFINITY;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        float b = max16(x + i);
        m = b > m ? b : m;
    }
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* The first index of the largest logit (NaNs ignored; 0 if none is above -inf). */
static int32_t argmax(const float *x, int64_t n) {
    float m = -INFINITY;
    int64_t block = -1, i = 0;
    for (; i + 16 <= n; i += 16) {
        float b = max16(x + i);
        if (b > m) { m = b; block = i; }
    }
    int64_t best = -1;
    if (block >= 0)
        for (int64_t j = block; best < 0; j++) if (x[j] == m) best = j;
    for (; i < n; i++) if (x[i] > m) { m = x[i]; best = i; }
    return best < 0 ? 0 : (int32_t)best;
}

static int int32_cmp(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The logits the chain sees: `logits` itself, or a copy in `work` with the penalties of the
 * window applied (each distinct id once: repeat penalty divides a positive logit and multiplies a
 * negative one, then count * frequency and presence are subtracted). */
static const float *penalized(const float *logits, int64_t n_vocab, const int32_t *window,
                              int64_t n_window, const llk_sampler_params *p, float *work,
                              int32_t *scratch_ids) {
    int on = p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
             p->presence_penalty != 0.0f;
    if (!on || n_window <= 0 || !window) return logits;
    memcpy(work, logits, (size_t)n_vocab * sizeof(float));
    int64_t m = 0;
    for (int64_t i = 0; i < n_window; i++)
        if (window[i] >= 0 && window[i] < n_vocab) scratch_ids[m++] = window[i];
    qsort(scratch_ids, (size_t)m, sizeof(int32_t), int32_cmp);
    for (int64_t i = 0; i < m;) {
        int64_t j = i;
        while (j < m && scratch_ids[j] == scratch_ids[i]) j++;
        float c = (float)(j - i), v = work[scratch_ids[i]];
        if (p->repeat_penalty != 1.0f) v = v > 0 ? v / p->repeat_penalty : v * p->repeat_penalty;
        work[scratch_ids[i]] = v - c * p->frequency_penalty - p->presence_penalty;
        i = j;
    }
    return work;
}

static int64_t filter_chain(const float *x, int64_t n, const llk_sampler_params *p, cand *c) {
    int64_t k = p->top_k > 0 && p->top_k < n ? p->top_k : n, m = 0;
    int has_k = k < n, has_p = p->top_p < 1.0f, has_min = p->min_p > 0.0f;
    if (has_k) top_k_sorted(x, n, k, c);
    const float mx = has_k ? c[0].v : max_of(x, n);    /* the chain's reference: the best logit */
    if (!(mx > -INFINITY)) {                           /* nothing finite to rank */
        c[0].id = argmax(x, n); c[0].v = x[c[0].id];
        return 1;
    }
    double z = 0.0;       /* top-p's normaliser: over top-k's survivors, else the vocabulary */
    if (has_k) {
        m = k;
        if (has_p) for (int64_t i = 0; i < m; i++) z += exp((double)c[i].v - mx);
    } else if (has_p) {
        /* grow a sorted prefix until it holds top_p of the whole vocabulary's mass */
        for (int64_t i = 0; i < n; i++) if (x[i] == x[i]) z += expf(x[i] - mx);
        m = n < 64 ? n : 64;
        for (;;) {
            top_k_sorted(x, n, m, c);
            double acc = 0.0;
            for (int64_t i = 0; i < m; i++) acc += exp((double)c[i].v - mx);
            if (acc / z >= p->top_p || m == n) break;
            m = m * 8 < n ? m * 8 : n;
        }
    } else if (has_min) {
        double floor = (double)mx + log((double)p->min_p);
        for (int64_t i = 0; i < n; i++)
            if ((double)x[i] >= floor) { c[m].v = x[i]; c[m].id = (int32_t)i; m++; }
        qsort(c, (size_t)m, sizeof(cand), cand_cmp);
    } else {
        for (int64_t i = 0; i < n; i++) { c[i].v = rank_value(x[i]); c[i].id = (int32_t)i; }
        qsort(c, (size_t)n, sizeof(cand), cand_cmp);
        return n;
    }
    if (has_p) {
        double acc = 0.0;
        int64_t cut = m;
        for (int64_t i = 0; i < m; i++) {
            acc += exp((double)c[i].v - mx) / z;
            if (acc >= p->top_p) { cut = i + 1; break; }
        }
        m = cut;
    }
    if (has_min) {
        double floor = (double)mx + log((double)p->min_p);
        int64_t keep = 0;
        while (keep < m && (double)c[keep].v >= floor) keep++;   /* sorted: a prefix */
        m = keep;
    }
    return m;
}

/* The caller's scratch, carved up: candidates, the penalised copy, draw weights, window ids. */
typedef struct { cand *c; float *work; double *w; int32_t *win; } scratch_parts;

static scratch_parts carve(void *scratch, int64_t n_vocab) {
    scratch_parts s;
    char *b = scratch;
    s.c = (cand *)(void *)b;
    b += (size_t)n_vocab * sizeof(cand);
    s.w = (double *)(void *)b;
    b += (size_t)n_vocab * sizeof(double);
    s.work = (float *)(void *)b;
    b += (size_t)n_vocab * sizeof(float);
    s.win = (int32_t *)(void *)b;
    return s;
}

size_t llk_sample_scratch_bytes(int64_t n_vocab, int64_t n_window) {
    if (n_vocab <= 0 || n_window < 0) return 0;
    return (size_t)n_vocab * (sizeof(cand) + sizeof(double) + sizeof(float)) +
           (size_t)n_window * sizeof(int32_t);
}

int64_t llk_sample_candidates(const float *logits, int64_t n_vocab, const int32_t *window,
                              int64_t n_window, const llk_sampler_params *p, void *scratch,
                              int32_t *ids, float *vals) {
    if (!logits || n_vocab <= 0 || !p || !scratch || !ids || !vals || n_window < 0) return -1;
    scratch_parts s = carve(scratch, n_vocab);
    const float *x = penalized(logits, n_vocab, window, n_window, p, s.work, s.win);
    int64_t m = filter_chain(x, n_vocab, p, s.c);
    for (int64_t i = 0; i < m; i++) { ids[i] = s.c[i].id; vals[i] = x[s.c[i].id]; }
    return m;
}

/* The first index whose running weight exceeds u * total (numpy's choice does the same with its
 * cumulative distribution), over w[0..n). */
static int64_t draw(const double *w, int64_t n, double total, double u) {
    double target = u * total, acc = 0.0;
    for (int64_t i = 0; i < n; i++) {
        acc += w[i];
        if (acc > target) return i;
    }
    for (int64_t i = n; i-- > 0;) if (w[i] > 0) return i;   /* rounding at the very top */
    return 0;
}

int32_t llk_sample(const float *logits, int64_t n_vocab, const int32_t *window, int64_t n_window,
                   const llk_sampler_params *p, double u, void *scratch) {
    if (!logits || n_vocab <= 0 || !p || !scratch || n_window < 0) return -1;
    scratch_parts s = carve(scratch, n_vocab);
    const float *x = penalized(logits, n_vocab, window, n_window, p, s.work, s.win);
    if (p->temperature <= 0.0f) return argmax(x, n_vocab);
    int filtered = (p->top_k > 0 && p->top_k < n_vocab) || p->top_p < 1.0f || p->min_p > 0.0f;
    double inv_t = 1.0 / (double)p->temperature, total = 0.0;
    if (!filtered) {
        /* softmax(x / T) over the whole vocabulary, drawn in id order: no sort */
        float mx = max_of(x, n_vocab);
        if (mx == -INFINITY || mx != mx) return argmax(x, n_vocab);
        for (int64_t i = 0; i < n_vocab; i++) {
            s.w[i] = x[i] == x[i] ? exp(((double)x[i] - mx) * inv_t) : 0.0;
            total += s.w[i];
        }
        return (int32_t)draw(s.w, n_vocab, total, u);
    }
    int64_t m = filter_chain(x, n_vocab, p, s.c);
    if (m <= 1) return s.c[0].id;
    for (int64_t i = 0; i < m; i++) {
        s.w[i] = exp(((double)s.c[i].v - s.c[0].v) * inv_t);
        total += s.w[i];
    }
    return s.c[draw(s.w, m, total, u)].id;
}
