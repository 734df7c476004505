/* llk_dispatch.c — CPU feature detection, the once-chosen kernel table, type traits, and the
 * per-row entry points of the public header.
 *
 * The only global state of the library lives here: the feature bits and the kernel tables,
 * filled once (thread-safe, see llk_threads.h) on first use. LLAMBDA_ISA=ref|avx2|avx512 lowers
 * the chosen level; it can never raise it above what the CPU and the build support.
 * LLAMBDA_ISA=avx512-novnni also leaves VNNI unused (to test that build on a VNNI CPU), and
 * LLAMBDA_ISA=avx2-novnni chooses the AVX2 level without AVX-VNNI (the same, for that build).
 */
#include <stdlib.h>
#include <string.h>
#include "llk_internal.h"
#include "llk_threads.h"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
#define LLK_X86 1
#if defined(_MSC_VER)
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#else
#define LLK_X86 0
#endif

const char *llk_version(void) { return "llk 0.1.0"; }

/* --- CPU features -------------------------------------------------------------------------- */

/* vnni: AVX512-VNNI (EVEX, with AVX-512); avxvnni: AVX-VNNI (VEX, 256-bit: Intel since Alder Lake,
 * AMD since Zen 5), which the AVX2 level takes where the CPU has it */
typedef struct { int avx2, avx512, vnni, avxvnni; size_t l1d; } cpu_features;
#define L1D_DEFAULT (32 * 1024)   /* the L1 data cache taken where CPUID does not tell it */

#if LLK_X86
static void cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
#if defined(_MSC_VER)
    int t[4]; __cpuidex(t, (int)leaf, (int)sub);
    for (int i = 0; i < 4; i++) r[i] = (unsigned)t[i];
#else
    if (!__get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3])) r[0] = r[1] = r[2] = r[3] = 0;
#endif
}
static unsigned long long xgetbv0(void) {
#if defined(_MSC_VER)
    return _xgetbv(0);
#else
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
#endif
}
#endif

#if LLK_X86
/* The L1 data cache per core in bytes, 0 where CPUID does not say: AMD's leaf 0x80000005 (ECX
 * bits 31..24, KiB), else the deterministic cache parameters of Intel's leaf 4 (ways x partitions x
 * line x sets of the level-1 data cache). */
static size_t detect_l1d(unsigned max_leaf) {
    unsigned r[4];
    cpuid(0x80000000u, 0, r);
    if (r[0] >= 0x80000005u) {
        cpuid(0x80000005u, 0, r);
        if (r[2] >> 24) return (size_t)(r[2] >> 24) * 1024;
    }
    for (unsigned sub = 0; max_leaf >= 4 && sub < 16; sub++) {
        cpuid(4, sub, r);
        const unsigned type = r[0] & 31, level = (r[0] >> 5) & 7;
        if (type == 0) break;
        if (type == 1 && level == 1)
            return (size_t)((r[1] >> 22) + 1) * (((r[1] >> 12) & 0x3ff) + 1) * ((r[1] & 0xfff) + 1) * ((size_t)r[2] + 1);
    }
    return 0;
}
#endif

static cpu_features detect(void) {
    cpu_features f = {0, 0, 0, 0, L1D_DEFAULT};
#if LLK_X86
    unsigned r[4];
    cpuid(0, 0, r);
    unsigned max_leaf = r[0];
    const size_t l1d = detect_l1d(max_leaf);
    if (l1d >= 4096 && l1d <= 4 * 1024 * 1024) f.l1d = l1d;
    if (max_leaf < 7) return f;
    cpuid(1, 0, r);
    unsigned ecx1 = r[2];
    int osxsave = (ecx1 >> 27) & 1, avx = (ecx1 >> 28) & 1, fma = (ecx1 >> 12) & 1,
        f16c = (ecx1 >> 29) & 1;
    if (!osxsave || !avx) return f;
    unsigned long long xcr0 = xgetbv0();
    int os_avx = (xcr0 & 0x6) == 0x6;           /* XMM and YMM state */
    int os_avx512 = (xcr0 & 0xe6) == 0xe6;      /* plus opmask, ZMM_Hi256, Hi16_ZMM */
    cpuid(7, 0, r);
    unsigned ebx7 = r[1], ecx7 = r[2], max_sub7 = r[0];
    int avx2 = (ebx7 >> 5) & 1, avx512f = (ebx7 >> 16) & 1, avx512bw = (ebx7 >> 30) & 1,
        avx512vl = (ebx7 >> 31) & 1, avx512dq = (ebx7 >> 17) & 1, vnni = (ecx7 >> 11) & 1;
    f.avx2 = os_avx && avx2 && fma && f16c;
    f.avx512 = f.avx2 && os_avx512 && avx512f && avx512bw && avx512vl && avx512dq;
    f.vnni = f.avx512 && vnni;
    if (max_sub7 >= 1) {
        cpuid(7, 1, r);
        f.avxvnni = f.avx2 && ((r[0] >> 4) & 1);
    }
#endif
    return f;
}

/* --- the tables, filled once ---------------------------------------------------------------- */

static llk_once_flag g_once = LLK_ONCE_INIT;
static cpu_features g_cpu;
static int g_best, g_chosen;
static llk_kernels g_tab[3];

static int level_from_env(int best) {
    const char *e = getenv("LLAMBDA_ISA");
    if (!e || !*e) return best;
    int want = best;
    if (!strcmp(e, "ref")) want = LLK_ISA_REF;
    else if (!strcmp(e, "avx2") || !strcmp(e, "avx2-novnni")) want = LLK_ISA_AVX2;
    else if (!strcmp(e, "avx512") || !strcmp(e, "avx512-novnni")) want = LLK_ISA_AVX512;
    return want < best ? want : best;
}

static void init_once(void) {
    g_cpu = detect();
    /* LLAMBDA_ISA=avx512-novnni / avx2-novnni: the level without VNNI, as on CPUs that lack it */
    const char *e = getenv("LLAMBDA_ISA");
    if (e && !strcmp(e, "avx512-novnni")) g_cpu.vnni = g_cpu.avxvnni = 0;
    if (e && !strcmp(e, "avx2-novnni")) g_cpu.avxvnni = 0;
    llk_fill_ref(&g_tab[LLK_ISA_REF]);
    g_best = LLK_ISA_REF;
    if (g_cpu.avx2 && llk_have_avx2_build()) {
        g_tab[LLK_ISA_AVX2] = g_tab[LLK_ISA_REF];
        llk_fill_avx2(&g_tab[LLK_ISA_AVX2]);
        g_best = LLK_ISA_AVX2;
        if (g_cpu.avx512 && llk_have_avx512_build()) {
            g_tab[LLK_ISA_AVX512] = g_tab[LLK_ISA_AVX2];
            if (g_cpu.vnni) llk_fill_avx512vnni(&g_tab[LLK_ISA_AVX512]);
            else llk_fill_avx512(&g_tab[LLK_ISA_AVX512]);
            g_best = LLK_ISA_AVX512;
        }
        /* after the AVX-512 table was copied from it: that level is the same with or without */
        if (g_cpu.avxvnni && llk_have_avx2vnni_build()) llk_fill_avx2vnni(&g_tab[LLK_ISA_AVX2]);
        else g_cpu.avxvnni = 0;
    }
    g_chosen = level_from_env(g_best);
}

static void ensure_init(void) { llk_call_once(&g_once, init_once); }

int llk_isa(void) { ensure_init(); return g_chosen; }
int llk_isa_best(void) { ensure_init(); return g_best; }
int llk_cpu_has_vnni(void) { ensure_init(); return g_cpu.vnni && g_best == LLK_ISA_AVX512; }
size_t llk_l1d_bytes(void) { return g_cpu.l1d ? g_cpu.l1d : L1D_DEFAULT; }

const char *llk_isa_name(int isa) {
    ensure_init();
    if (isa == LLK_ISA_DEFAULT) isa = g_chosen;
    switch (isa) {
    case LLK_ISA_REF: return "ref";
    case LLK_ISA_AVX2: return g_cpu.avxvnni ? "avx2-vnni" : "avx2";
    case LLK_ISA_AVX512: return llk_cpu_has_vnni() ? "avx512-vnni" : "avx512";
    default: return NULL;
    }
}

const llk_kernels *llk_kernels_for(int isa) {
    ensure_init();
    if (isa == LLK_ISA_DEFAULT) isa = g_chosen;
    if (isa < LLK_ISA_REF || isa > g_best) return NULL;
    return &g_tab[isa];
}

/* --- traits ------------------------------------------------------------------------------------ */

static const llk_traits g_traits[LLK_N_TYPES] = {
    [LLK_TYPE_F32] = {1, 4, LLK_ACT_F32},
    [LLK_TYPE_F16] = {1, 2, LLK_ACT_F32},
    [LLK_TYPE_BF16] = {1, 2, LLK_ACT_F32},
    [LLK_TYPE_Q4_0] = {32, 18, LLK_ACT_Q8_32},
    [LLK_TYPE_Q4_1] = {32, 20, LLK_ACT_Q8_32},
    [LLK_TYPE_Q5_0] = {32, 22, LLK_ACT_Q8_32},
    [LLK_TYPE_Q5_1] = {32, 24, LLK_ACT_Q8_32},
    [LLK_TYPE_Q8_0] = {32, 34, LLK_ACT_Q8_32},
    [LLK_TYPE_Q2_K] = {256, 84, LLK_ACT_Q8_256},
    [LLK_TYPE_Q3_K] = {256, 110, LLK_ACT_Q8_256},
    [LLK_TYPE_Q4_K] = {256, 144, LLK_ACT_Q8_256},
    [LLK_TYPE_Q5_K] = {256, 176, LLK_ACT_Q8_256},
    [LLK_TYPE_Q6_K] = {256, 210, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ4_NL] = {32, 18, LLK_ACT_Q8_32},
    [LLK_TYPE_IQ4_XS] = {256, 136, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ2_XXS] = {256, 66, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ2_XS] = {256, 74, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ2_S] = {256, 82, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ3_XXS] = {256, 98, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ3_S] = {256, 110, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ1_S] = {256, 50, LLK_ACT_Q8_256},
    [LLK_TYPE_IQ1_M] = {256, 56, LLK_ACT_Q8_256},
    [LLK_TYPE_TQ1_0] = {256, 54, LLK_ACT_Q8_256},
    [LLK_TYPE_TQ2_0] = {256, 66, LLK_ACT_Q8_256},
    [LLK_TYPE_MXFP4] = {32, 17, LLK_ACT_Q8_32},
};

const llk_traits *llk_traits_of(int type) {
    if (type < 0 || type >= LLK_N_TYPES || g_traits[type].block_size == 0) return NULL;
    return &g_traits[type];
}

int llk_type_supported(int type) { return llk_traits_of(type) != NULL; }
int llk_type_block_size(int type) { const llk_traits *t = llk_traits_of(type); return t ? t->block_size : 0; }
int llk_type_block_bytes(int type) { const llk_traits *t = llk_traits_of(type); return t ? t->block_bytes : 0; }
int llk_type_act_format(int type) { const llk_traits *t = llk_traits_of(type); return t ? t->act : -1; }

size_t llk_row_bytes(int type, int64_t n) {
    const llk_traits *t = llk_traits_of(type);
    if (!t || n < 0 || n % t->block_size) return 0;
    return (size_t)(n / t->block_size) * (size_t)t->block_bytes;
}

size_t llk_act_row_bytes(int type, int64_t n) {
    const llk_traits *t = llk_traits_of(type);
    if (!t || n < 0 || n % t->block_size) return 0;
    switch (t->act) {
    case LLK_ACT_Q8_32: return (size_t)((n / 32 + 7) / 8) * sizeof(llk_block_q8_32x8);
    case LLK_ACT_Q8_256: return (size_t)(n / 256) * sizeof(llk_block_q8_256);
    default: return (size_t)n * sizeof(float);
    }
}

/* --- per-row entry points ------------------------------------------------------------------- */

static llk_status check(int isa, int type, int64_t n, const llk_kernels **k, const llk_traits **t) {
    *t = llk_traits_of(type);
    if (!*t) return LLK_ERR_TYPE;
    if (n < 0 || n % (*t)->block_size) return LLK_ERR_ARG;
    *k = llk_kernels_for(isa);
    if (!*k) return LLK_ERR_ISA;
    return LLK_OK;
}

llk_status llk_dequantize_row(int isa, int type, const void *x, float *y, int64_t n) {
    const llk_kernels *k; const llk_traits *t;
    llk_status st = check(isa, type, n, &k, &t);
    if (st) return st;
    if (n && (!x || !y)) return LLK_ERR_ARG;
    if (n) k->dequant[type](x, y, n);
    return LLK_OK;
}

void llk_quantize_act_k(const llk_kernels *k, int act, const float *x, void *a, int64_t n) {
    if (act == LLK_ACT_Q8_32) k->quant_q8_32(x, a, n);
    else if (act == LLK_ACT_Q8_256) k->quant_q8_256(x, a, n);
    else memcpy(a, x, (size_t)n * sizeof(float));
}

static void bias_bytes(int8_t *q, int n) {
    for (int i = 0; i < n; i++) q[i] = (int8_t)((uint8_t)q[i] ^ 0x80u);
}
void llk_act_bias(int type, void *a, int64_t n) {
    if (llk_type_act_format(type) == LLK_ACT_Q8_32) {
        llk_block_q8_32x8 *g = (llk_block_q8_32x8 *)a;
        for (int64_t j = 0; j < n / 32; j++) bias_bytes(ACT_Q(g, j), 32);
    } else {
        llk_block_q8_256 *b = (llk_block_q8_256 *)a;
        for (int64_t j = 0; j < n / 256; j++) bias_bytes(b[j].qs, 256);
    }
}

void llk_quantize_act_panel(const llk_kernels *k, int type, const float *x, void *a, int64_t n) {
    const llk_traits *t = llk_traits_of(type);
    llk_quantize_act_k(k, t->act, x, a, n);
    if (k->panel_biased[type]) llk_act_bias(type, a, n);
}

llk_status llk_quantize_act(int isa, int type, const float *x, void *a, int64_t n) {
    const llk_kernels *k; const llk_traits *t;
    llk_status st = check(isa, type, n, &k, &t);
    if (st) return st;
    if (n && (!x || !a)) return LLK_ERR_ARG;
    if (n) llk_quantize_act_k(k, t->act, x, a, n);
    return LLK_OK;
}

llk_status llk_vec_dot(int isa, int type, const void *w, const void *a, int64_t n, float *out) {
    const llk_kernels *k; const llk_traits *t;
    llk_status st = check(isa, type, n, &k, &t);
    if (st) return st;
    if (!out || (n && (!w || !a))) return LLK_ERR_ARG;
    *out = n ? k->dot[type](w, a, n) : 0.0f;
    return LLK_OK;
}
