/* llk_generate.c — the generation loop in C: sample a token, decode it, sample the next, ...
 *
 * A caller that owns an interpreter lock (the Python engine) would otherwise take it back after
 * every token to sample and decode the next; here it hands over a run of tokens and holds nothing
 * while they are made, so a UI thread drawing the previous ones never delays the next. The caller
 * looks at the run afterwards (text, stop strings) and keeps what it wants of the cache.
 */
#include "llk_internal.h"

static int is_stop(int32_t tok, const int32_t *stop, int64_t n_stop) {
    for (int64_t i = 0; i < n_stop; i++)
        if (stop[i] == tok) return 1;
    return 0;
}

llk_status llk_generate(llk_decoder *d, float *logits, int64_t n_vocab, int64_t pos,
                        int32_t *hist, int64_t n_hist, int64_t n_window,
                        const llk_sampler_params *p, const double *u, const int32_t *stop_ids,
                        int64_t n_stop, int64_t max_tokens, double max_seconds, void *scratch,
                        int32_t *out, int64_t *n_out, double *sample_seconds) {
    if (!d || !logits || n_vocab <= 0 || pos < 0 || n_hist < 0 || n_window < 0 || !p || !u ||
        (n_stop > 0 && !stop_ids) || n_stop < 0 || max_tokens < 1 || !scratch || !out || !n_out ||
        (n_hist + max_tokens > 0 && !hist))
        return LLK_ERR_ARG;
    *n_out = 0;
    double t0 = llk_now_seconds(), ts = 0.0;
    llk_status st = LLK_OK;
    for (int64_t i = 0; i < max_tokens; i++) {
        const double a = llk_now_seconds();
        const int64_t w = n_hist < n_window ? n_hist : n_window;
        const int32_t tok = llk_sample(logits, n_vocab, hist + n_hist - w, w, p, u[i], scratch);
        const double b = llk_now_seconds();
        ts += b - a;
        if (tok < 0) { st = LLK_ERR_ARG; break; }
        out[(*n_out)++] = tok;
        if (is_stop(tok, stop_ids, n_stop) || i + 1 == max_tokens || b - t0 >= max_seconds) break;
        st = llk_decode(d, &tok, 1, pos + i, 0, logits);
        if (st) break;
        hist[n_hist++] = tok;
    }
    if (sample_seconds) *sample_seconds = ts;
    return st;
}
