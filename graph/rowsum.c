/* Row sums for the halo kernels, and the VJP's scatters. One body,
 * compiled for three vector widths with GCC/Clang vector extensions; the
 * widest the CPU runs is picked once. The accumulators live in registers
 * for a block of four vectors of features while every source row is
 * added, so the output row is loaded and stored once per block instead of
 * once per edge. Sums add one source at a time per lane: no
 * reassociation, no FMA (the file is built with -ffp-contract=off), the
 * plain loop's result exactly; the scatters round each product, then add
 * it, as the plain loop does. */
#include "rowsum.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef void (*rowsum_fn)(size_t features, void *acc,
                          const struct halo_rows *rs, bool fresh, double scale);
typedef void (*rowsum_csr_fn)(size_t features, const struct halo_csr_rows *cr);

/* V: vector type of VW elements of elem_t (a typedef in the function),
 * NV: vectors per block, SRC(k): the k-th source row as const elem_t *.
 * A block keeps its sums in registers while every source is added (NV
 * independent chains hide the add latency). Unaligned loads and stores go
 * through memcpy, which compilers turn into plain moves. Works on a, n,
 * fresh, scaled, w and f. */
#define ROWSUM_BLOCK(V, VW, NV, SRC)                                           \
    for (; f + (NV) * (VW) <= features; f += (NV) * (VW)) {                    \
        V r[NV];                                                               \
        for (int j = 0; j < (NV); j++)                                         \
            if (fresh)                                                         \
                r[j] = (V){0};                                                 \
            else                                                               \
                memcpy(&r[j], a + f + j * (VW), sizeof(V));                    \
        for (size_t k = 0; k < n; k++) {                                       \
            const elem_t *s = SRC(k) + f;                                      \
            for (int j = 0; j < (NV); j++) {                                   \
                V x;                                                           \
                memcpy(&x, s + j * (VW), sizeof(V));                           \
                r[j] += x;                                                     \
            }                                                                  \
        }                                                                      \
        for (int j = 0; j < (NV); j++) {                                       \
            if (scaled)                                                        \
                r[j] *= w;                                                     \
            memcpy(a + f + j * (VW), &r[j], sizeof(V));                        \
        }                                                                      \
    }

/* One output row: blocks of 4, 2 and 1 vectors, then scalar lanes. */
#define ROWSUM_CORE(V, VW, SRC)                                                \
    do {                                                                       \
        size_t f = 0;                                                          \
        ROWSUM_BLOCK(V, VW, 4, SRC)                                            \
        ROWSUM_BLOCK(V, VW, 2, SRC)                                            \
        ROWSUM_BLOCK(V, VW, 1, SRC)                                            \
        for (; f < features; f++) {                                            \
            elem_t sum = fresh ? 0 : a[f];                                     \
            for (size_t k = 0; k < n; k++)                                     \
                sum += SRC(k)[f];                                              \
            a[f] = scaled ? sum * w : sum;                                     \
        }                                                                      \
    } while (0)

#define SRC_PTR(k) ((const elem_t *)ptr[k])
#define SRC_IDX(k) ((const elem_t *)(base + idx[k] * stride))
#define SRC_SEG(k)                                                             \
    ((const elem_t *)(seg_base(segs, num_segs, idx[k]) + idx[k] * stride))

/* The base of j's segment: a compare and a conditional move per segment
 * after the first, no branch to mispredict on a scattered graph. */
static inline uintptr_t seg_base(const struct halo_seg *segs, size_t n,
                                 uint64_t j)
{
    uintptr_t b = segs[0].base;

    for (size_t s = 1; s < n; s++)
        b = j >= segs[s].first ? segs[s].base : b;
    return b;
}

#define ROWSUM_PTR_FN(NAME, ATTR, E, V, VW)                                    \
    ATTR static void NAME(size_t features, void *acc,                          \
                          const struct halo_rows *rs, bool fresh,              \
                          double scale)                                        \
    {                                                                          \
        typedef E elem_t;                                                      \
        const void *const *ptr = rs->ptr;                                      \
        size_t n = rs->n;                                                      \
        elem_t *a = acc;                                                       \
        elem_t w = (elem_t)scale;                                              \
        bool scaled = scale != 1.0;                                            \
                                                                               \
        ROWSUM_CORE(V, VW, SRC_PTR);                                           \
    }

#define ROWSUM_CSR_FN(NAME, ATTR, E, V, VW)                                    \
    ATTR static void NAME(size_t features, const struct halo_csr_rows *cr)     \
    {                                                                          \
        typedef E elem_t;                                                      \
        const struct halo_seg *segs = cr->segs;                                \
        size_t num_segs = cr->num_segs;                                        \
        const char *base = num_segs ? (const char *)segs[0].base : cr->base;   \
        size_t stride = cr->stride;                                            \
        const bool fresh = true;                                               \
                                                                               \
        for (size_t q = 0; q < cr->count; q++) {                               \
            uint64_t i = cr->rows[q];                                          \
            int64_t lo = cr->row_ptr[i];                                       \
            const uint64_t *idx = cr->idx + lo;                                \
            size_t n = (size_t)(cr->row_ptr[i + 1] - lo);                      \
            elem_t *a = (elem_t *)(cr->out + i * stride);                      \
            bool scaled = cr->mean && n > 1;                                   \
            elem_t w = scaled ? (elem_t)(1.0 / (double)n) : 1;                 \
                                                                               \
            if (num_segs <= 1)                                                 \
                ROWSUM_CORE(V, VW, SRC_IDX);                                   \
            else                                                               \
                ROWSUM_CORE(V, VW, SRC_SEG);                                   \
        }                                                                      \
    }

/* a[f] += w * g[f] over one row, a vector at a time: a product then a
 * sum per lane, as the scalar loop does (this file is built with
 * -ffp-contract=off, so no FMA joins them). */
#define AXPY_ROW(V, VW, a, g, wv, w)                                           \
    do {                                                                       \
        size_t f = 0;                                                          \
        for (; f + (VW) <= features; f += (VW)) {                              \
            V x, y;                                                            \
            memcpy(&x, (a) + f, sizeof(V));                                    \
            memcpy(&y, (g) + f, sizeof(V));                                    \
            x += (wv)*y;                                                       \
            memcpy((a) + f, &x, sizeof(V));                                    \
        }                                                                      \
        for (; f < features; f++)                                              \
            (a)[f] += (w) * (g)[f];                                            \
    } while (0)

/* One row's entries [lo, hi) of loc, of which those in [first, end) name
 * row l at base + (l - first) * stride; other entries are skipped. */
struct halo_scatter {
    const uint64_t *loc;
    int64_t lo, hi;
    uint64_t first, end;
    char *base;
    size_t stride;
};

/* Distance, in entries, of the rows prefetched (for writing) ahead. */
#define SCATTER_PREFETCH 4

#define ROWAXPY_FN(NAME, ATTR, E, V, VW)                                       \
    ATTR static inline void NAME(size_t features, const void *grow,            \
                                 double scale, const struct halo_scatter *sc)  \
    {                                                                          \
        typedef E elem_t;                                                      \
        const elem_t *g = grow;                                                \
        elem_t w = (elem_t)scale;                                              \
        V wv;                                                                  \
                                                                               \
        for (int j = 0; j < (VW); j++)                                         \
            wv[j] = w;                                                         \
        for (int64_t k = sc->lo; k < sc->hi; k++) {                            \
            uint64_t l = sc->loc[k];                                           \
                                                                               \
            if (k + SCATTER_PREFETCH < sc->hi) {                               \
                uint64_t p = sc->loc[k + SCATTER_PREFETCH];                    \
                                                                               \
                if (p >= sc->first && p < sc->end) {                           \
                    const char *r = sc->base + (p - sc->first) * sc->stride;   \
                    __builtin_prefetch(r, 1);                                  \
                    __builtin_prefetch(r + sc->stride - 1, 1);                 \
                }                                                              \
            }                                                                  \
            if (l < sc->first || l >= sc->end)                                 \
                continue;                                                      \
            elem_t *a = (elem_t *)(sc->base + (l - sc->first) * sc->stride);   \
            AXPY_ROW(V, VW, a, g, wv, w);                                      \
        }                                                                      \
    }

#define ROWAXPY_CSR_FN(NAME, ATTR, E, V, VW)                                   \
    ATTR static void NAME(size_t features, const struct halo_scatter_csr *cs)  \
    {                                                                          \
        for (size_t q = 0; q < cs->count; q++) {                               \
            uint64_t i = cs->rows ? cs->rows[q] : cs->row0 + q;                \
            int64_t lo = cs->row_ptr[i], hi = cs->row_ptr[i + 1];              \
            double scale = cs->mean && hi > lo ? 1.0 / (double)(hi - lo) : 1;  \
            const struct halo_scatter sc = {                                   \
                cs->loc, lo, hi, cs->first, cs->end, cs->base, cs->stride};    \
                                                                               \
            NAME##_row(features, cs->g + i * cs->stride, scale, &sc);          \
        }                                                                      \
    }

#define ROWADD_FN(NAME, ATTR, E, V, VW)                                        \
    ATTR static void NAME(size_t features, const struct halo_gather_add *ga)   \
    {                                                                          \
        typedef E elem_t;                                                      \
        const elem_t w = 1;                                                    \
        V wv;                                                                  \
                                                                               \
        for (int j = 0; j < (VW); j++)                                         \
            wv[j] = w;                                                         \
        for (size_t k = 0; k < ga->count; k++) {                               \
            elem_t *a =                                                        \
                (elem_t *)(ga->out +                                           \
                           (uint64_t)(ga->ids[k] - ga->id0) * ga->stride);     \
            const elem_t *g = (const elem_t *)(ga->src + k * ga->stride);      \
            AXPY_ROW(V, VW, a, g, wv, w);                                      \
        }                                                                      \
    }

/* Distance, in entries, of the cotangent rows prefetched ahead. */
#define GATHER_PREFETCH 8

#define ROWGATHER_FN(NAME, ATTR, E, V, VW)                                     \
    ATTR static void NAME(size_t features, const struct halo_gather_csr *gc)   \
    {                                                                          \
        typedef E elem_t;                                                      \
        size_t stride = gc->stride;                                            \
        int64_t end = gc->ptr[gc->count];                                      \
                                                                               \
        for (size_t q = 0; q < gc->count; q++) {                               \
            elem_t *a = (elem_t *)(gc->out + q * stride);                      \
                                                                               \
            memset(a, 0, features * sizeof(elem_t));                           \
            for (int64_t k = gc->ptr[q]; k < gc->ptr[q + 1]; k++) {            \
                const elem_t *g =                                              \
                    (const elem_t *)(gc->g + gc->src[k] * stride);             \
                elem_t w = gc->w ? (elem_t)gc->w[k] : 1;                       \
                V wv;                                                          \
                                                                               \
                if (k + GATHER_PREFETCH < end) {                               \
                    const char *r =                                            \
                        gc->g + gc->src[k + GATHER_PREFETCH] * stride;         \
                    __builtin_prefetch(r);                                     \
                    __builtin_prefetch(r + stride - 1);                        \
                }                                                              \
                for (int j = 0; j < (VW); j++)                                 \
                    wv[j] = w;                                                 \
                AXPY_ROW(V, VW, a, g, wv, w);                                  \
            }                                                                  \
        }                                                                      \
    }

/* The functions of one instruction set: {ptr, csr, axpy, add, gather} x
 * {f32, f64}. */
#define ROWSUM_ISA(SFX, ATTR, V32, W32, V64, W64)                              \
    ROWSUM_PTR_FN(sum_f32_ptr_##SFX, ATTR, float, V32, W32)                    \
    ROWSUM_PTR_FN(sum_f64_ptr_##SFX, ATTR, double, V64, W64)                   \
    ROWSUM_CSR_FN(sum_f32_csr_##SFX, ATTR, float, V32, W32)                    \
    ROWSUM_CSR_FN(sum_f64_csr_##SFX, ATTR, double, V64, W64)                   \
    ROWAXPY_FN(axpy_f32_##SFX##_row, ATTR, float, V32, W32)                    \
    ROWAXPY_FN(axpy_f64_##SFX##_row, ATTR, double, V64, W64)                   \
    ROWAXPY_CSR_FN(axpy_f32_##SFX, ATTR, float, V32, W32)                      \
    ROWAXPY_CSR_FN(axpy_f64_##SFX, ATTR, double, V64, W64)                     \
    ROWADD_FN(add_f32_##SFX, ATTR, float, V32, W32)                            \
    ROWADD_FN(add_f64_##SFX, ATTR, double, V64, W64)                           \
    ROWGATHER_FN(gather_f32_##SFX, ATTR, float, V32, W32)                      \
    ROWGATHER_FN(gather_f64_##SFX, ATTR, double, V64, W64)

typedef float f32x4 __attribute__((vector_size(16)));
typedef double f64x2 __attribute__((vector_size(16)));
ROWSUM_ISA(base, , f32x4, 4, f64x2, 2)

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define ROWSUM_X86 1
typedef float f32x8 __attribute__((vector_size(32)));
typedef double f64x4 __attribute__((vector_size(32)));
typedef float f32x16 __attribute__((vector_size(64)));
typedef double f64x8 __attribute__((vector_size(64)));
ROWSUM_ISA(avx2, __attribute__((target("avx2"))), f32x8, 8, f64x4, 4)
ROWSUM_ISA(avx512, __attribute__((target("avx512f"))), f32x16, 16, f64x8, 8)
#else
#define ROWSUM_X86 0
#endif

enum { ISA_BASE, ISA_AVX2, ISA_AVX512, ISA_UNSET };

static const char *const isa_names[] = {"baseline", "avx2", "avx512"};
/* [instruction set][f32, f64] */
static const rowsum_fn ptr_table[][2] = {
    {sum_f32_ptr_base, sum_f64_ptr_base},
#if ROWSUM_X86
    {sum_f32_ptr_avx2, sum_f64_ptr_avx2},
    {sum_f32_ptr_avx512, sum_f64_ptr_avx512},
#endif
};
static const rowsum_csr_fn csr_table[][2] = {
    {sum_f32_csr_base, sum_f64_csr_base},
#if ROWSUM_X86
    {sum_f32_csr_avx2, sum_f64_csr_avx2},
    {sum_f32_csr_avx512, sum_f64_csr_avx512},
#endif
};

typedef void (*rowaxpy_fn)(size_t features, const struct halo_scatter_csr *cs);
typedef void (*rowadd_fn)(size_t features, const struct halo_gather_add *ga);
static const rowaxpy_fn axpy_table[][2] = {
    {axpy_f32_base, axpy_f64_base},
#if ROWSUM_X86
    {axpy_f32_avx2, axpy_f64_avx2},
    {axpy_f32_avx512, axpy_f64_avx512},
#endif
};
static const rowadd_fn add_table[][2] = {
    {add_f32_base, add_f64_base},
#if ROWSUM_X86
    {add_f32_avx2, add_f64_avx2},
    {add_f32_avx512, add_f64_avx512},
#endif
};
typedef void (*rowgather_fn)(size_t features, const struct halo_gather_csr *gc);
static const rowgather_fn gather_table[][2] = {
    {gather_f32_base, gather_f64_base},
#if ROWSUM_X86
    {gather_f32_avx2, gather_f64_avx2},
    {gather_f32_avx512, gather_f64_avx512},
#endif
};

static _Atomic int chosen = ISA_UNSET;

static int cpu_level(void)
{
#if ROWSUM_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return ISA_AVX512;
    if (__builtin_cpu_supports("avx2"))
        return ISA_AVX2;
#endif
    return ISA_BASE;
}

static int choose(void)
{
    int level = atomic_load_explicit(&chosen, memory_order_relaxed);
    const char *cap;

    if (level != ISA_UNSET)
        return level;
    level = cpu_level();
    cap = getenv("STRATA_SIMD");
    for (int i = 0; cap && i < level; i++)
        if (strcmp(cap, isa_names[i]) == 0)
            level = i;
    /* Every thread computes the same answer; the first store wins. */
    atomic_store_explicit(&chosen, level, memory_order_relaxed);
    return level;
}

void halo_rowsum(strata_dtype dtype, size_t features, void *acc,
                 const struct halo_rows *rs, bool fresh, double scale)
{
    ptr_table[choose()][dtype == STRATA_F32 ? 0 : 1](features, acc, rs, fresh,
                                                     scale);
}

void halo_rowsum_csr(strata_dtype dtype, size_t features,
                     const struct halo_csr_rows *cr)
{
    csr_table[choose()][dtype == STRATA_F32 ? 0 : 1](features, cr);
}

void halo_rowaxpy_csr(strata_dtype dtype, size_t features,
                      const struct halo_scatter_csr *cs)
{
    axpy_table[choose()][dtype == STRATA_F32 ? 0 : 1](features, cs);
}

void halo_rowadd(strata_dtype dtype, size_t features,
                 const struct halo_gather_add *ga)
{
    add_table[choose()][dtype == STRATA_F32 ? 0 : 1](features, ga);
}

void halo_rowgather_csr(strata_dtype dtype, size_t features,
                        const struct halo_gather_csr *gc)
{
    gather_table[choose()][dtype == STRATA_F32 ? 0 : 1](features, gc);
}

bool halo_rowsum_use(const char *isa)
{
    int top = cpu_level();

    for (int i = 0; i <= top; i++)
        if (strcmp(isa, isa_names[i]) == 0) {
            atomic_store_explicit(&chosen, i, memory_order_relaxed);
            return true;
        }
    return false;
}

const char *halo_rowsum_isa(void)
{
    return isa_names[choose()];
}
