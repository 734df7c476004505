/* panel_ab.c — one kernel tree's matrix x matrix speed on real weights, for A/B runs of the panel
 * kernels without rebuilding the Python extension (docs/BENCHMARKS.md, "Later the same day: the
 * tiles' chunk loops").
 *
 * Build against a kernels/ tree K (any copy: the change and its base side by side), with the
 * flags kernels/build_ffi.py gives each file (gcc as below; clang the same way, to see what a
 * clang build of the kernels makes of them):
 *
 *   C="-std=c11 -O3 -fno-strict-aliasing -D_GNU_SOURCE -ffp-contract=off -IK"
 *   A2="-mavx2 -mfma -mf16c"; A5="$A2 -mavx512f -mavx512bw -mavx512vl -mavx512dq"
 *   for f in ref ref_iq dispatch pool ops panel decode sample generate; do
 *       gcc $C -c K/llk_$f.c -o $f.o; done
 *   gcc $C $A2 -c K/llk_avx2.c -o a2.o; gcc $C $A5 -c K/llk_avx512.c -o a5.o
 *   gcc $C $A5 -mavx512vnni -DLLK_VNNI=1 -c K/llk_avx512.c -o a5v.o
 *   gcc $C scripts/panel_ab.c *.o -o panel_ab -lm -lpthread
 *
 * Weights: the raw bytes of one tensor of a benchmark model (scripts/make_bench_models.py), e.g.
 *
 *   python -c "import gguf, sys; r = gguf.GGUFReader(sys.argv[1]);
 *              t = next(t for t in r.tensors if t.name == sys.argv[2]);
 *              open(sys.argv[3], 'wb').write(t.data.tobytes())" MODEL blk.0.attn_output.weight w.bin
 *
 * Run: panel_ab W.bin TYPE_ID ROWS COLS TOKENS [REPS [ISA]] (ISA 1 = avx2, 2 = avx512) prints the
 * best GFLOP/s of REPS runs and a hash of the output floats: two trees that claim the same floats
 * must print the same hash. Pin it (taskset -c 0) and interleave the trees: on a shared host the
 * noise only ever slows a run down, so the best of many interleaved runs is the estimate.
 */
#include "llk.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: panel_ab W.bin TYPE_ID ROWS COLS TOKENS [REPS [ISA]]\n");
        return 2;
    }
    const int type = atoi(argv[2]), reps = argc > 6 ? atoi(argv[6]) : 5, isa = argc > 7 ? atoi(argv[7]) : LLK_ISA_AVX2;
    const int64_t rows = atoll(argv[3]), cols = atoll(argv[4]), ntok = atoll(argv[5]);
    FILE *f = fopen(argv[1], "rb");
    if (!f) { fprintf(stderr, "panel_ab: cannot open %s\n", argv[1]); return 1; }
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    void *w = malloc((size_t)n);
    if (!w || fread(w, 1, (size_t)n, f) != (size_t)n) { fprintf(stderr, "panel_ab: cannot read %s\n", argv[1]); return 1; }
    fclose(f);
    if (n % rows) { fprintf(stderr, "panel_ab: %ld bytes are not %lld rows\n", n, (long long)rows); return 1; }

    llk_pool *pool;
    const size_t pb = llk_packed_bytes(type, rows, cols);
    void *packed = pb ? aligned_alloc(64, (pb + 63) / 64 * 64) : NULL;
    float *x = malloc(sizeof(float) * (size_t)(ntok * cols)), *y = malloc(sizeof(float) * (size_t)(ntok * rows));
    if (llk_pool_new(1, &pool) || !packed || !x || !y ||
        llk_pack(pool, type, w, (size_t)(n / rows), rows, cols, packed)) {
        fprintf(stderr, "panel_ab: type %d has no packed layout for %lld x %lld\n", type, (long long)rows, (long long)cols);
        return 1;
    }
    srand(1);
    for (int64_t i = 0; i < ntok * cols; i++) x[i] = (float)rand() / (float)RAND_MAX - 0.5f;

    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = now_s();
        const llk_status s = llk_matmul_packed(pool, isa, type, packed, rows, cols, x, cols, ntok, y, rows);
        if (s) { fprintf(stderr, "panel_ab: llk_matmul_packed failed (%d)\n", (int)s); return 1; }
        const double t = now_s() - t0;
        if (t < best) best = t;
    }
    uint32_t h = 0;
    for (int64_t i = 0; i < ntok * rows; i++) {
        uint32_t u;
        memcpy(&u, &y[i], 4);
        h = h * 31u + u;
    }
    printf("%.1f GFLOP/s  hash %08x\n", 2.0 * (double)rows * (double)cols * (double)ntok / best / 1e9, h);
    llk_pool_free(pool);
    return 0;
}
