/* issue_rates.c — how many of the AVX2 prompt kernels' instructions this CPU issues per cycle, alone
 * and in the mixes the panel tiles (kernels/llk_avx2_panel.inc) are made of. It answers "what bounds
 * a tile here" without hardware counters (which KVM guests often lack) or a scheduling model.
 *
 *     gcc -O2 scripts/issue_rates.c -o /tmp/issue_rates && /tmp/issue_rates [LOOPS]
 *
 * (LOOPS, default 20000000: the loops each timing runs; fewer only to check that it builds and runs.)
 * It also times `vpmaddubsw` beside what the signed 8-bit types add to it, and on a CPU with
 * AVX-VNNI `vpdpbusd` (the avx2-vnni level's multiply-add) beside each other kind of instruction its
 * tiles issue, both in 8 independent chains: `vpdpbusd` takes ~4 cycles and two issue per cycle, so
 * fewer chains would time its latency instead of its pipes.
 *
 * x86-64 with AVX2, gcc or clang (AT&T inline assembly). Each line times a block of independent
 * instructions in a loop; the cycle is calibrated by a chain of dependent integer adds (one cycle
 * each on every x86-64 core of the last decade), so the figures hold whatever the clock is. Run it
 * on a quiet machine; two runs should agree within a few percent. Not a benchmark of the kernels:
 * the operands stay in L1 and registers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define R8(x) x x x x x x x x
#define CLOBBER "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
                "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15"
static long n_iter = 20000000L;
static int mem[256] __attribute__((aligned(64)));

/* Cycles per unit of body (`per` units in each copy of it): the best of 5 timings of n_iter loops
 * of 8 copies, since a neighbour on a shared host only ever makes a timing longer. */
#define TIME(label, body, per)                                                                  \
    do {                                                                                        \
        double best = 1e30;                                                                     \
        for (int rep = 0; rep < 5; rep++) {                                                     \
            double t0 = now();                                                                  \
            for (long n = 0; n < n_iter; n++) __asm__ volatile(R8(body) : : "r"(mem) : CLOBBER); \
            double dt = now() - t0;                                                             \
            best = dt < best ? dt : best;                                                       \
        }                                                                                       \
        printf("%-58s %6.3f cycles\n", label, best / (n_iter * 8.0 * (per)) / cycle);           \
    } while (0)

/* A multiply-add (M(k): into accumulator ymm k, k < 8) in 8 independent chains, with another
 * instruction after each (EACH) or after every second (HALF): `ins` is that instruction up to its
 * destination, which takes ymm10 .. ymm15 in turn. DP is AVX-VNNI's vpdpbusd in its VEX form,
 * spelled out because %{vex%} is what the assembler needs in inline assembly. */
#define DP(k) "%{vex%} vpdpbusd %%ymm8,%%ymm9,%%ymm" #k "\n\t"
#define MB(k) "vpmaddubsw %%ymm8,%%ymm9,%%ymm" #k "\n\t"
#define TO(ins, r) ins "%%ymm" #r "\n\t"
#define EACH(M, ins) M(0) TO(ins, 10) M(1) TO(ins, 11) M(2) TO(ins, 12) M(3) TO(ins, 13) \
                     M(4) TO(ins, 14) M(5) TO(ins, 15) M(6) TO(ins, 10) M(7) TO(ins, 11)
#define HALF(M, ins) M(0) TO(ins, 10) M(1) M(2) TO(ins, 11) M(3) M(4) TO(ins, 12) M(5) M(6) TO(ins, 13) M(7)
#define ALONE(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)

static void vnni_rates(double cycle) {
    printf("\nper vpdpbusd (AVX-VNNI, 8 chains), with other instructions between them:\n");
    TIME("  vpdpbusd ymm alone", ALONE(DP), 8);
    TIME("  vpdpbusd ymm, one chain (its latency)", DP(0), 1);
    TIME("  + a broadcast load each (the tiles' activations)",
         DP(0) "vpbroadcastd (%0),%%ymm10\n\t" DP(1) "vpbroadcastd 4(%0),%%ymm11\n\t"
         DP(2) "vpbroadcastd 8(%0),%%ymm12\n\t" DP(3) "vpbroadcastd 12(%0),%%ymm13\n\t"
         DP(4) "vpbroadcastd 16(%0),%%ymm14\n\t" DP(5) "vpbroadcastd 20(%0),%%ymm15\n\t"
         DP(6) "vpbroadcastd 24(%0),%%ymm10\n\t" DP(7) "vpbroadcastd 28(%0),%%ymm11\n\t", 8);
    TIME("  + a vpand each (unpacking nibbles)", EACH(DP, "vpand %%ymm8,%%ymm9,"), 8);
    TIME("  + a vpsrlw every second", HALF(DP, "vpsrlw $4,%%ymm8,"), 8);
    TIME("  + a vcvtdq2ps every second (a block's total to float)", HALF(DP, "vcvtdq2ps %%ymm8,"), 8);
    TIME("  + a vmulps every second (a block's scales)", HALF(DP, "vmulps %%ymm8,%%ymm9,"), 8);
    TIME("  + a vfmadd231ps every second (a block's float step)", HALF(DP, "vfmadd231ps %%ymm8,%%ymm9,"), 8);
}

int main(int argc, char **argv) {
    if (argc > 1) n_iter = atol(argv[1]);
    if (n_iter < 1) n_iter = 1;
    double cycle = 1e30;
    for (int rep = 0; rep < 8; rep++) {   /* the best of 8: the first ones let the clock ramp up */
        double t0 = now();
        for (long n = 0; n < n_iter; n++)
            __asm__ volatile(R8("add $1, %%rax\n\tadd $1, %%rax\n\t") : : : "rax");
        const double c = (now() - t0) / (n_iter * 16.0);
        cycle = c < cycle ? c : cycle;
    }
    printf("clock: %.2f GHz (a chain of dependent adds)\n\n", 1e-9 / cycle);
    printf("per instruction (throughput):\n");
    TIME("  vpmaddubsw ymm", "vpmaddubsw %%ymm8,%%ymm0,%%ymm0\n\t vpmaddubsw %%ymm8,%%ymm1,%%ymm1\n\t"
         "vpmaddubsw %%ymm8,%%ymm2,%%ymm2\n\t vpmaddubsw %%ymm8,%%ymm3,%%ymm3\n\t"
         "vpmaddubsw %%ymm8,%%ymm4,%%ymm4\n\t vpmaddubsw %%ymm8,%%ymm5,%%ymm5\n\t", 6);
    TIME("  vpaddw ymm", "vpaddw %%ymm8,%%ymm0,%%ymm0\n\t vpaddw %%ymm8,%%ymm1,%%ymm1\n\t"
         "vpaddw %%ymm8,%%ymm2,%%ymm2\n\t vpaddw %%ymm8,%%ymm3,%%ymm3\n\t"
         "vpaddw %%ymm8,%%ymm4,%%ymm4\n\t vpaddw %%ymm8,%%ymm5,%%ymm5\n\t", 6);
    TIME("  vmovdqa ymm, m256 (load)", "vmovdqa (%0),%%ymm8\n\t vmovdqa 32(%0),%%ymm9\n\t"
         "vmovdqa 64(%0),%%ymm10\n\t vmovdqa 96(%0),%%ymm11\n\t", 4);
    TIME("  vpbroadcastd ymm, m32 (broadcast load)", "vpbroadcastd (%0),%%ymm8\n\t vpbroadcastd 4(%0),%%ymm9\n\t"
         "vpbroadcastd 8(%0),%%ymm10\n\t vpbroadcastd 12(%0),%%ymm11\n\t", 4);
    printf("\nper vpmaddubsw, in the tiles' mixes:\n");
    TIME("  maddubs + add (weights and activations in registers)",
         "vpmaddubsw %%ymm8,%%ymm0,%%ymm9\n\t vpaddw %%ymm9,%%ymm1,%%ymm1\n\t"
         "vpmaddubsw %%ymm8,%%ymm2,%%ymm10\n\t vpaddw %%ymm10,%%ymm3,%%ymm3\n\t"
         "vpmaddubsw %%ymm8,%%ymm4,%%ymm11\n\t vpaddw %%ymm11,%%ymm5,%%ymm5\n\t"
         "vpmaddubsw %%ymm8,%%ymm6,%%ymm12\n\t vpaddw %%ymm12,%%ymm7,%%ymm7\n\t", 4);
    TIME("  broadcast + maddubs + add (1 panel x 4 tokens)",
         "vpbroadcastd (%0),%%ymm8\n\t vpmaddubsw %%ymm8,%%ymm0,%%ymm9\n\t vpaddw %%ymm9,%%ymm1,%%ymm1\n\t"
         "vpbroadcastd 4(%0),%%ymm13\n\t vpmaddubsw %%ymm13,%%ymm0,%%ymm10\n\t vpaddw %%ymm10,%%ymm3,%%ymm3\n\t"
         "vpbroadcastd 8(%0),%%ymm14\n\t vpmaddubsw %%ymm14,%%ymm0,%%ymm11\n\t vpaddw %%ymm11,%%ymm5,%%ymm5\n\t"
         "vpbroadcastd 12(%0),%%ymm15\n\t vpmaddubsw %%ymm15,%%ymm0,%%ymm12\n\t vpaddw %%ymm12,%%ymm7,%%ymm7\n\t", 4);
    TIME("  broadcast + 4 x (load + maddubs + add) (4 panels x 1)",
         "vpbroadcastd (%0),%%ymm8\n\t"
         "vmovdqa 64(%0),%%ymm0\n\t vpmaddubsw %%ymm8,%%ymm0,%%ymm9\n\t vpaddw %%ymm9,%%ymm1,%%ymm1\n\t"
         "vmovdqa 96(%0),%%ymm2\n\t vpmaddubsw %%ymm8,%%ymm2,%%ymm10\n\t vpaddw %%ymm10,%%ymm3,%%ymm3\n\t"
         "vmovdqa 128(%0),%%ymm4\n\t vpmaddubsw %%ymm8,%%ymm4,%%ymm11\n\t vpaddw %%ymm11,%%ymm5,%%ymm5\n\t"
         "vmovdqa 160(%0),%%ymm6\n\t vpmaddubsw %%ymm8,%%ymm6,%%ymm12\n\t vpaddw %%ymm12,%%ymm7,%%ymm7\n\t", 4);
    TIME("  broadcast + 4 x (maddubs + add) (4 panels in registers)",
         "vpbroadcastd (%0),%%ymm8\n\t"
         "vpmaddubsw %%ymm8,%%ymm0,%%ymm9\n\t vpaddw %%ymm9,%%ymm1,%%ymm1\n\t"
         "vpmaddubsw %%ymm8,%%ymm2,%%ymm10\n\t vpaddw %%ymm10,%%ymm3,%%ymm3\n\t"
         "vpmaddubsw %%ymm8,%%ymm4,%%ymm11\n\t vpaddw %%ymm11,%%ymm5,%%ymm5\n\t"
         "vpmaddubsw %%ymm8,%%ymm6,%%ymm12\n\t vpaddw %%ymm12,%%ymm7,%%ymm7\n\t", 4);
    printf("\nper vpmaddubsw (8 chains), with what the signed types (Q8_0, IQ4_XS) add to it:\n");
    TIME("  vpmaddubsw alone", ALONE(MB), 8);
    TIME("  + a vpsignb each (activations take the levels' signs)", EACH(MB, "vpsignb %%ymm8,%%ymm9,"), 8);
    TIME("  + a vpmaddwd each (the pairs widened to int32)", EACH(MB, "vpmaddwd %%ymm8,%%ymm9,"), 8);
    TIME("  + a vfmadd231ps every second", HALF(MB, "vfmadd231ps %%ymm8,%%ymm9,"), 8);
    if (__builtin_cpu_supports("avxvnni")) vnni_rates(cycle);
    else printf("\n(no AVX-VNNI on this CPU: its vpdpbusd lines are left out)\n");
    return 0;
}
