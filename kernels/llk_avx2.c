/* llk_avx2.c — AVX2 + FMA + F16C kernels. Built with -mavx2 -mfma -mf16c; called only after
 * dispatch has seen those features. Each kernel matches its twin in llk_ref.c. */
#include "llk_internal.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

int llk_have_avx2_build(void) { return 1; }

void llk_fill_avx2(llk_kernels *k) {
    (void)k;
}
#else
int llk_have_avx2_build(void) { return 0; }
void llk_fill_avx2(llk_kernels *k) { (void)k; }
#endif
