/* llk_avx2.c — the AVX2 + FMA + F16C level. Built with -mavx2 -mfma -mf16c; called only after
 * dispatch has seen those features. The kernels themselves are in llk_simd256.inc; this file gives
 * them their two AVX2 primitives.
 *
 * Built twice: as it is (llk_fill_avx2), and with AVX-VNNI (-mavxvnni, LLK_AVXVNNI=1, exported as
 * llk_fill_avx2vnni), which the AVX2 level takes on CPUs that have it (Intel since Alder Lake, AMD
 * since Zen 5): dot_us() becomes one vpdpbusd, and the panel kernels whose products AVX2 can only
 * take as maddubs + madd pairs (Q8_0's signed levels) get tiles of vpdpbusd. Same integers, same
 * float steps: the same floats as the plain build. */
#include "llk_internal.h"

#if defined(LLK_AVXVNNI)
#define LLK_FILL llk_fill_avx2vnni
#define LLK_HAVE_BUILD llk_have_avx2vnni_build
#else
#define LLK_FILL llk_fill_avx2
#define LLK_HAVE_BUILD llk_have_avx2_build
#endif

#if defined(LLK_TARGET_AVX2) && (!defined(LLK_AVXVNNI) || defined(LLK_TARGET_AVXVNNI))
#include <immintrin.h>

int LLK_HAVE_BUILD(void) { return 1; }

/* 8 x i32: sums of 4 adjacent u8 x s8 products (maddubs pairs, then madd by ones; one vpdpbusd
 * with AVX-VNNI) */
static inline __m256i dot_us(__m256i u, __m256i s) {
#if defined(LLK_AVXVNNI)
    return _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}
/* 32 bits -> 32 bytes: byte i is 0x10 where bit i is set, else 0. */
static inline __m256i bits32_x16(const uint8_t qh[4]) {
    uint32_t b; memcpy(&b, qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)b), shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

#include "llk_simd256.inc"
#include "llk_avx2_panel.inc"

/* The integer peak at this level: vpmaddubsw (32 u8 x s8 multiply-adds, pairs summed into int16)
 * in 8 chains, each product the next one's unsigned operand. Zen 3 and most AVX2 cores issue two
 * per cycle at a latency of 3-4, so 8 chains keep both multipliers busy. (Named variables, not an
 * array: gcc 12 stored an array's elements back to the stack on every round.) */
static int64_t int8_peak_256(int64_t n, uint64_t *sink) {
    const __m256i s = _mm256_set1_epi8(3);
    __m256i c0 = _mm256_set1_epi8(1), c1 = _mm256_set1_epi8(2), c2 = _mm256_set1_epi8(3), c3 = _mm256_set1_epi8(4);
    __m256i c4 = _mm256_set1_epi8(5), c5 = _mm256_set1_epi8(6), c6 = _mm256_set1_epi8(7), c7 = _mm256_set1_epi8(8);
    for (int64_t k = 0; k < n; k++) {
        c0 = _mm256_maddubs_epi16(c0, s); c1 = _mm256_maddubs_epi16(c1, s);
        c2 = _mm256_maddubs_epi16(c2, s); c3 = _mm256_maddubs_epi16(c3, s);
        c4 = _mm256_maddubs_epi16(c4, s); c5 = _mm256_maddubs_epi16(c5, s);
        c6 = _mm256_maddubs_epi16(c6, s); c7 = _mm256_maddubs_epi16(c7, s);
    }
    const __m256i x = _mm256_xor_si256(_mm256_xor_si256(_mm256_xor_si256(c0, c1), _mm256_xor_si256(c2, c3)),
                                       _mm256_xor_si256(_mm256_xor_si256(c4, c5), _mm256_xor_si256(c6, c7)));
    *sink ^= (uint64_t)_mm256_extract_epi64(x, 0);
    return n * 8 * 32;
}

void LLK_FILL(llk_kernels *k) {
    llk_fill_256(k);
    llk_fill_avx2_panel(k);
    k->int8_peak = int8_peak_256;
}
#else
int LLK_HAVE_BUILD(void) { return 0; }
void LLK_FILL(llk_kernels *k) { (void)k; }
#endif
