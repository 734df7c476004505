/* panel_tile.c — one panel kernel's own speed: random weights with sane scales, activations
 * quantized once, then the level's panel function called directly on the same rows, so that
 * nothing else (activation quantization, the pool, Python) is in the timing. The figures of
 * docs/BENCHMARKS.md's "C harness" (wide rows in ranges, six-token tiles) come from it.
 *
 * Build against a kernels/ tree K as scripts/panel_ab.c says (its object files), then
 *
 *   gcc $C scripts/panel_tile.c *.o -o panel_tile -lm -lpthread
 *
 * Run: panel_tile ROWS COLS TOKENS REPS [ISA [TYPE_ID [PANELS_PER_CALL]]] (ISA 1 = avx2, 2 = avx512;
 * TYPE_ID one of 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0, 12 Q4_K, 13 Q5_K, 14 Q6_K, 23 IQ4_XS;
 * default Q4_0; PANELS_PER_CALL: the panel function called on that many panels at a time, as the
 * engine's pool chunks call it with 4, instead of once on all of them), pinned
 * (taskset -c 0), interleaving the builds being compared: prints the best GFLOP/s of REPS calls and
 * the packed weights' GB/s at that speed (one token: what generation streams). The packed copy sits in
 * huge pages where the kernel gives them, as the engine's does.
 */
#include "llk_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

/* bytes per block, elements per block, and where its float16 scales sit (second: -1 for none) */
typedef struct { int type, elems, bytes, scale0, scale1; } block_shape;
static const block_shape SHAPES[] = {
    {2, 32, 18, 0, -1},   {3, 32, 20, 0, 2},     {6, 32, 22, 0, -1},     {7, 32, 24, 0, 2},
    {8, 32, 34, 0, -1},   {12, 256, 144, 0, 2},  {13, 256, 176, 0, 2},   {14, 256, 210, 208, -1},
    {23, 256, 136, 0, -1},
};

static double seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: panel_tile ROWS COLS TOKENS REPS [ISA [TYPE_ID [PANELS_PER_CALL]]]\n");
        return 2;
    }
    const int64_t rows = atoll(argv[1]), cols = atoll(argv[2]), ntok = atoll(argv[3]);
    const int reps = atoi(argv[4]), isa = argc > 5 ? atoi(argv[5]) : LLK_ISA_AVX2, type = argc > 6 ? atoi(argv[6]) : 2;
    const int64_t per_call = argc > 7 && atoll(argv[7]) > 0 ? atoll(argv[7]) : rows / 8;   /* panels per call */
    const block_shape *b = NULL;
    for (size_t i = 0; i < sizeof SHAPES / sizeof *SHAPES; i++)
        if (SHAPES[i].type == type) b = &SHAPES[i];
    const llk_kernels *k = llk_kernels_for(isa);
    const llk_traits *t = llk_traits_of(type);
    if (!b || !k || !t || !k->panel[type] || rows % 8 || cols % b->elems) {
        fprintf(stderr, "panel_tile: no panel kernel for type %d at level %d and %lld x %lld\n", type, isa,
                (long long)rows, (long long)cols);
        return 1;
    }
    const size_t row_bytes = (size_t)(cols / b->elems) * (size_t)b->bytes;
    uint8_t *w = malloc(row_bytes * (size_t)rows);
    srand(1);
    for (size_t i = 0; i < row_bytes * (size_t)rows; i++) w[i] = (uint8_t)rand();
    const uint16_t scale = 0x2C00;   /* 1/16 in float16 */
    for (size_t at = 0; at < row_bytes * (size_t)rows; at += (size_t)b->bytes) {
        memcpy(w + at + b->scale0, &scale, 2);
        if (b->scale1 >= 0) memcpy(w + at + b->scale1, &scale, 2);
    }
    llk_pool *pool;
    const size_t packed_bytes = llk_packed_bytes(type, rows, cols), as = llk_act_row_bytes(type, cols);
    /* in huge pages where the kernel gives them, as the engine's packed weights are (llk_decode.c) */
    const size_t huge = (size_t)2 << 20, packed_alloc = (packed_bytes + huge - 1) / huge * huge;
    void *packed = aligned_alloc(huge, packed_alloc);
#if defined(MADV_HUGEPAGE)
    if (packed) (void)madvise(packed, packed_alloc, MADV_HUGEPAGE);
#endif
    uint8_t *a = aligned_alloc(64, (as * (size_t)ntok + 63) / 64 * 64);
    float *x = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)(rows * ntok));
    if (!w || !packed || !a || !x || !y || llk_pool_new(1, &pool) || llk_pack(pool, type, w, row_bytes, rows, cols, packed)) {
        fprintf(stderr, "panel_tile: out of memory or no packed layout\n");
        return 1;
    }
    for (int64_t tk = 0; tk < ntok; tk++) {
        for (int64_t i = 0; i < cols; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;
        llk_quantize_act_panel(k, type, x, a + (size_t)tk * as, cols);
    }
    const size_t pb = llk_panel_bytes_of(type, cols);
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = seconds();
        for (int64_t p0 = 0; p0 < rows / 8; p0 += per_call)
            k->panel[type]((const uint8_t *)packed + (size_t)p0 * pb, pb, rows / 8 - p0 < per_call ? rows / 8 - p0 : per_call,
                           cols, a, as, ntok, y + 8 * p0, rows);
        const double dt = seconds() - t0;
        if (dt < best) best = dt;
    }
    printf("type %d rows %lld cols %lld tokens %lld: %.1f GFLOP/s, packed weights %.2f GB/s\n", type,
           (long long)rows, (long long)cols, (long long)ntok,
           2.0 * (double)rows * (double)cols * (double)ntok / best / 1e9, (double)packed_bytes / best / 1e9);
    llk_pool_free(pool);
    return 0;
}
