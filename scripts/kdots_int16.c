/* kdots_int16.c — what an int16 contract for the attention's K dots would buy at plain AVX2: one
 * token's 4 query heads against a K tile of 64 positions (head size 64), the float32 way the engine
 * runs them today (kernels/llk_simd256_attn.inc's kdt_pass: a position per lane, 4 rows x 3 vectors
 * of sums, one FMA per head value) against int16 levels of Q and K multiplied by `vpmaddwd` (two
 * head values per product, 4 rows x 2 vectors of int32 sums). The integers are small, so both give
 * the same sums here; a real int16 contract would quantize each query row and each cache row with a
 * scale (Q to 11 bits and K to 15, so that 64 products fit an int32) and change every level's and
 * the reference's attention, which is why it is a measurement and not a kernel.
 *
 *     gcc -O3 -mavx2 -mfma scripts/kdots_int16.c -o /tmp/kdots_int16 && taskset -c 1 /tmp/kdots_int16 [LOOPS]
 *
 * (LOOPS, default 2000000, the tiles each timing runs; fewer only to check that it builds and runs.)
 * -O3 matters: at -O2 gcc keeps the float sums in memory and the comparison means nothing.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NP 72   /* float32 tile: 3 passes of 24 positions */
#define NP16 64 /* int16 tile: 4 passes of 16 */
#define HD 64

static float kt[HD][NP] __attribute__((aligned(64)));             /* head value i, position p */
static int16_t kt16[HD / 2][NP16][2] __attribute__((aligned(64))); /* head values 2i, 2i + 1 of p */
static float q[4][HD];
static int16_t q16[4][HD];
static float out[4][NP];
static int32_t out16[4][NP16];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

__attribute__((noinline)) static void f32_pass(int c) {
    __m256 acc[4][3];
    for (int r = 0; r < 4; r++)
        for (int w = 0; w < 3; w++) acc[r][w] = _mm256_setzero_ps();
    for (int i = 0; i < HD; i++) {
        const __m256 k0 = _mm256_loadu_ps(&kt[i][c]), k1 = _mm256_loadu_ps(&kt[i][c + 8]),
                     k2 = _mm256_loadu_ps(&kt[i][c + 16]);
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            const __m256 qi = _mm256_broadcast_ss(&q[r][i]);
            acc[r][0] = _mm256_fmadd_ps(qi, k0, acc[r][0]);
            acc[r][1] = _mm256_fmadd_ps(qi, k1, acc[r][1]);
            acc[r][2] = _mm256_fmadd_ps(qi, k2, acc[r][2]);
        }
    }
    for (int r = 0; r < 4; r++)
        for (int w = 0; w < 3; w++) _mm256_storeu_ps(&out[r][c + 8 * w], acc[r][w]);
}

__attribute__((noinline)) static void i16_pass(int c) {
    __m256i acc[4][2];
    for (int r = 0; r < 4; r++)
        for (int w = 0; w < 2; w++) acc[r][w] = _mm256_setzero_si256();
    for (int i = 0; i < HD / 2; i++) {
        const __m256i k0 = _mm256_loadu_si256((const __m256i *)&kt16[i][c][0]),
                      k1 = _mm256_loadu_si256((const __m256i *)&kt16[i][c + 8][0]);
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) {
            int32_t v;
            memcpy(&v, &q16[r][2 * i], 4);
            const __m256i qi = _mm256_set1_epi32(v);
            acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(qi, k0));
            acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(qi, k1));
        }
    }
    for (int r = 0; r < 4; r++)
        for (int w = 0; w < 2; w++) _mm256_storeu_si256((__m256i *)&out16[r][c + 8 * w], acc[r][w]);
}

int main(int argc, char **argv) {
    for (int i = 0; i < HD; i++)
        for (int p = 0; p < NP; p++) {
            const int v = (i * 7 + p * 3) % 17 - 8;
            kt[i][p] = (float)v;
            if (p < NP16) kt16[i / 2][p][i & 1] = (int16_t)v;
        }
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < HD; i++) q[r][i] = (float)(q16[r][i] = (int16_t)((r + i) % 5 - 2));
    const long n = argc > 1 && atol(argv[1]) > 0 ? atol(argv[1]) : 2000000;
    double bf = 1e30, bi = 1e30;
    for (int rep = 0; rep < 5; rep++) {   /* the best of 5: a neighbour only makes a timing longer */
        const double t0 = now();
        for (long k = 0; k < n; k++)
            for (int c = 0; c < NP; c += 24) f32_pass(c);
        const double t1 = now();
        for (long k = 0; k < n; k++)
            for (int c = 0; c < NP16; c += 16) i16_pass(c);
        const double t2 = now();
        bf = t1 - t0 < bf ? t1 - t0 : bf;
        bi = t2 - t1 < bi ? t2 - t1 : bi;
    }
    int same = 1;
    for (int r = 0; r < 4; r++)
        for (int p = 0; p < NP16; p++) same &= (int32_t)out[r][p] == out16[r][p];
    const double nf = (double)n * 4 * NP, ni = (double)n * 4 * NP16;   /* positions x heads */
    printf("float32 FMAs: %.2f ns per position and head (%.1f G multiply-adds/s)\n", bf / nf * 1e9, nf * HD / bf * 1e-9);
    printf("int16 vpmaddwd: %.2f ns per position and head (%.1f G multiply-adds/s): %.2fx\n", bi / ni * 1e9,
           ni * HD / bi * 1e-9, (bf / nf) / (bi / ni));
    printf("same sums: %s\n", same ? "yes" : "NO");
    return same ? 0 : 1;
}
