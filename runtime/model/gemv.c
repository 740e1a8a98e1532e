/* int8 x int8 products of a few rows against a weight matrix, streamed at the memory's rate.
 *
 * cm_gemv_i8(x, m, k, w, wsums, n, out, threads):
 *     out[i][j] = sum_t x[i][t] * w[j][t], exactly, in int32,
 * for x int8 (m, k) and w int8 (n, k), both row-major and contiguous, wsums int32 (n,) the sums of w's rows
 * (sum_t w[j][t]), out int32 (m, n). The sums are torch._int_mm(x, w.t())'s to the bit (integer arithmetic).
 * 1 <= m <= CM_MAX_ROWS (2^20). Returns 0, or -1 (nothing written) when m, k or n is out of range or memory runs out.
 *
 * Why: a decode step multiplies one row, or a few (forced text, drafts), by every weight matrix of the model.
 * Each weight is used m times per load, so the product is bound by how fast the weights stream from memory,
 * not by arithmetic; torch's int8 kernels read about 15 GB/s of the 22-30 this machine gives.
 *
 * How: each weight row is read once, as 64-byte vectors, and all m rows' dot products are done on it
 * (AVX-512 VNNI vpdpbusd: unsigned x signed bytes, four products summed into each int32 lane). vpdpbusd wants
 * one operand unsigned: x + 128 is (its sign bit flipped), and
 *     sum_t (x_t + 128) w_t = sum_t x_t w_t + 128 wsums[j],
 * so 128 wsums[j] is subtracted (the identity by which oneDNN and llama.cpp feed signed activations to VNNI).
 * 4, 2 or 1 weight rows are done at a time, as many as the vector registers hold accumulators for. Each
 * weight row is prefetched CM_PREFETCH bytes ahead of where it is read: with many rows' arithmetic per load
 * the out-of-order window no longer covers the memory's latency (measured, 2-core Sapphire Rapids, all 196
 * matrices of Qwen2.5-1.5B, 8 rows: 12.9 GB/s without, 22.7 with 8 KiB ahead into the L1). The prefetch goes
 * into the L2 (CM_PREFETCH_HINT _MM_HINT_T2), 16 KiB ahead: into the L1 (_MM_HINT_T0), 8 KiB ahead, one core
 * read 12.7 GB/s of the 29 a plain load loop reads there (2-core Zen 4; the L1's few outstanding misses, each
 * weight row only 1,536 bytes long for the hardware prefetchers to follow). bench/int8_kernels.py, 2 threads,
 * all 196 matrices, ms, three alternating rounds on Zen 4 (L1 8 KiB / L2 16 KiB ahead): 1 row 48-51 / 31-32,
 * 3 rows 55-58 / 30-31, 8 rows 68-72 / 44-47, 16 rows 90-106 / 81-88, 24 rows 128-137 / 112-134; L2 12 or 24
 * KiB ahead and _MM_HINT_T1 8 KiB were in between. Both can be set at build time (-DCM_PREFETCH=...,
 * -DCM_PREFETCH_HINT=...; $CC "cc -D..." builds a library of its own). The rows of w are split
 * between threads in contiguous ranges (OpenMP), so each thread streams its own part of the matrix (chunks of
 * 64 or 256 rows handed out dynamically were no faster on a loaded machine).
 *
 * All 196 matrices of Qwen2.5-1.5B (1,310 MB), 2 threads, ms (this kernel / torch._int_mm) at 1, 2, 4, 8, 12, 14
 * and 16 rows: 48 / 101, 51 / 100, 56 / 96, 70 / 100, 83-86 / 98-99, 81 / 97, 109 / 104-107 (Sapphire Rapids).
 *
 * Up to CM_STREAM_ROWS (2) rows of x, each weight row is instead read alone, front to back, with no software
 * prefetch (row_stream): one stream per thread, which the hardware prefetchers follow. A plain C loop of that
 * shape read 51-58 GB/s over 1.3 GB on two Zen 4 cores where four interleaved rows read 43 with the prefetch
 * and 26 without. All 196 matrices of Qwen2.5-1.5B, one process, the same weights, the two builds alternating
 * (ms, best of 6): 1 row 26.9 against 30.9, 2 rows 27.9 against 31.7 while the machine read 50-57 GB/s; even
 * (38.6-41.6 against 38.8-41.0) while its neighbours left it 32 GB/s; from 3 rows slower (3: 38.8 against 30.0,
 * 4: 44.4 against 31.9, 8: 69.5 against 44.3: two loads of x per weight load, where four weight rows share one).
 *
 * More than CM_SINGLE rows (a server step of 16 rows, a draft's verification) go in groups of at most
 * CM_GROUP rows, as equal as can be (16: 8 + 8; 20: 7 + 7 + 6): two weight rows are read from memory once and
 * from the cache for each group. One pass over 12 or 14 rows had 24 or 14 accumulators on each weight row, and
 * was bound by the loads of x (one 64-byte load per product on a row of 14) or spilled. 2-core AMD EPYC (Zen 4,
 * no AMX), bench/int8_kernels.py, ms (one pass / groups / torch._int_mm): 12 rows 93-118 / 76-90 / 125-140, 14
 * rows 91-93 / 78-82 / 124-128; 16 rows - / 89-107 / 124-136, 20 - / 104-131 / 141-160, 24 - / 141-154 /
 * 155-178, 32 - / 180-200 / 176-193; groups of at most 5 rows on four weight rows were slower (12 rows 86, 16
 * rows 108), of 12 rows on two slower (24 rows 166); hence at most 24 rows this way. From CM_LANES_MIN (9)
 * rows, product_lanes below takes any number of rows instead (16 rows 64 against 88 ms).
 *
 * Where the compiler offers AVX2 but no AVX-512 VNNI (Zen 2 and 3, Intel before Ice Lake), product16 takes every
 * product instead, of any number of rows (CM_CHUNK = 24 at a time), and cm_simd() returns 2: x is widened to
 * int16 once per call and each 16 bytes of a weight row once per load (vpmovsxbw), then vpmaddwd multiplies
 * and sums pairs into int32 lanes, exact for every int8 value. There torch's int8 products have no fast
 * kernel: 2-core AMD EPYC (Zen 3), all 196 matrices of Qwen2.5-1.5B, 2 threads, ms (product16 / torch._int_mm)
 * at 1, 2, 4, 8, 16, 24 and 64 rows: 48 / 7,693, 53 / 9,254, 112 / 7,708, 184 / 9,482, 318 / 9,315, 493 / 14,578,
 * 1,623 / 31,453 (bench/int8_kernels.py). One and two rows read 27 and 25 GB/s; from 4 rows the kernel is
 * bound by its multiplies (about 66 GMAC/s at 16 rows).
 * With neither, cm_simd() returns 0 and a plain loop stands in: exact, but slower than torch's own kernels,
 * which the caller then keeps.
 *
 * cm_gemm_i8(x, m, k, w, n, out, threads): the same sums for any m >= 1, with AMX (Intel's tile matrix
 * extensions, TDPBSSD: a 16 x 64 int8 tile times a 64 x 16 one, signed x signed, into 16 x 16 int32 in one
 * instruction), for k a multiple of 64 and n of 32. The weights are the tiles' left operand as they lie (16
 * rows of w, 64 bytes of each: C^T = w x^T), so only x is repacked, into the right operand's layout (each
 * 4-byte group of a row of x becomes one column of a tile row; Intel's Architecture Instruction Set
 * Extensions Programming Reference, "Intel AMX"). Each block of 32 weight rows is read once from memory for
 * 32 rows of x (four accumulator tiles), then from the cache for the next 32. The kernel must grant the
 * process the tiles' state first (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16 and later): cm_amx() asks once
 * and says whether it was granted; cm_gemm_i8 refuses (-1) until it was.
 * All 196 matrices of Qwen2.5-1.5B, 2 threads, ms (cm_gemm_i8 / cm_gemv_i8 / torch._int_mm) at 1, 4, 8, 14,
 * 16, 32, 64, 128 and 256 rows: 49 / 43 / 101, 49 / 50 / 101, 51 / 62 / 103, 53 / 77 / 103, 53 / - / 103,
 * 71 / - / 108, 99 / - / 127, 169 / - / 184, 311 / - / 359 (with software prefetch 4 or 8 KiB ahead: slower).
 *
 * cm_gemv_i8_scaled and cm_gemm_i8_scaled write bfloat16 outputs scaled per row and per column instead of the
 * int32 sums (cm_scaled below): a rotated int8 layer's epilogue in the pass that writes the sums, not in four
 * torch operators after it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512F__)
#include <immintrin.h>
#define CM_VNNI 1
#else
#define CM_VNNI 0
#endif

/* AVX2 without AVX-512 VNNI (Zen 2 and 3, Intel before Ice Lake): the products of x widened to int16 (see
 * product16) */
#if !CM_VNNI && defined(__AVX2__)
#include <immintrin.h>
#define CM_AVX2 1
#else
#define CM_AVX2 0
#endif

#if CM_VNNI && defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define CM_AMX 1
#else
#define CM_AMX 0
#endif

#define CM_BLOCK_ROWS 14 /* the most rows of x one pass over a weight row takes (the accumulators' registers) */
#ifndef CM_GROUP
#define CM_GROUP 8 /* beyond CM_SINGLE rows, the rows of x go in groups of at most this many */
#endif
#ifndef CM_SINGLE
#define CM_SINGLE 8 /* up to this many rows, one pass over each weight row takes them all */
#endif
#ifndef CM_STREAM_ROWS
#define CM_STREAM_ROWS 2 /* up to this many rows, each weight row is read alone as one stream: see row_stream */
#endif
#if CM_STREAM_ROWS > CM_SINGLE
#error "CM_STREAM_ROWS must be at most CM_SINGLE"
#endif
#ifndef CM_MAX_ROWS
#define CM_MAX_ROWS (1 << 20) /* any number of rows: product_lanes (VNNI) or CM_CHUNK at a time (AVX2) */
#endif
#ifndef CM_CHUNK
#define CM_CHUNK 24
#endif
#ifndef CM_GROUP16
#define CM_GROUP16 6 /* beyond 3 rows, the AVX2 kernel takes the rows of x in groups of at most this many */
#endif
#ifndef CM_WIDE3
#define CM_WIDE3 3 /* groups of at most this many rows go on three weight rows at a time, larger ones on two */
#endif
#ifndef CM_ROTATE_ROWS
#define CM_ROTATE_ROWS 4 /* cm_rotate_quantize splits the rows between threads from this many */
#endif
#define CM_MAX_K 65536 /* 65,536 x 128 x 128 < 2^31: every sum of int8 products fits in int32 */
#ifndef CM_PREFETCH_HINT /* into the L2 (and L3), not the L1: see the header */
#define CM_PREFETCH_HINT _MM_HINT_T2
#endif
#ifndef CM_PREFETCH /* bytes ahead */
#define CM_PREFETCH 16384
#endif

/* 1 where the VNNI kernel was compiled, 0 where the plain loop stands in. */
/* Which product kernel was built: 1 AVX-512 VNNI, 2 AVX2 (product16), 0 none (the plain loop) */
int cm_simd(void) { return CM_VNNI ? 1 : CM_AVX2 ? 2 : 0; }

/* The most rows of x one call takes. */
int cm_max_rows(void) { return CM_MAX_ROWS; }

/* The scaled epilogue (the *_scaled entry points): instead of the int32 sum s of row i and column j, write
 *     out[i][j] = bfloat16((float)s * row_scale[i] * col_scale[j]),
 * the two products rounded to float32 in that order and the result to bfloat16 to nearest even (NaN: 0xffff), as
 * torch computes sums.float().mul_(row_scale[:, None]).mul_(col_scale).to(torch.bfloat16): the same bits for every
 * result, NaN included (a tensor's conversion takes ATen's vectorized cvtfp32_bf16, which writes every NaN as
 * 0xffff; c10::BFloat16's scalar rounding, 0x7fc0, is only a 0-dim tensor's). One pass instead of four over the
 * outputs. */
typedef struct {
    const float *row_scale, *col_scale;
    uint16_t *out;
} cm_scaled;

static inline uint16_t bf16_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0xffff;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

#if CM_VNNI
/* bf16_of on 16 lanes: each float of f rounded to bfloat16 to nearest even (NaN: 0xffff), as 16 uint16 */
static inline __m256i bf16_of16(__m512 f)
{
    const __m512i u = _mm512_castps_si512(f);
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i h = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), odd), 16);
    h = _mm512_mask_mov_epi32(h, _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q), _mm512_set1_epi32(0xffff));
    return _mm512_cvtepi32_epi16(h);
}
#endif

/* the float32 a bfloat16 stands for (exact: its 16 bits are the float's upper half) */
static inline float float_of_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* f rounded to bfloat16 to nearest even, as a float32 */
static inline float rounded_bf16(float f)
{
    return float_of_bf16(bf16_of(f));
}

/* out[i * n + j] = s, or its scaled bfloat16 (sc) */
static inline void put(int32_t *out, const cm_scaled *sc, int n, int i, int j, int32_t s)
{
    if (sc)
        sc->out[(ptrdiff_t)i * n + j] = bf16_of(((float)s * sc->row_scale[i]) * sc->col_scale[j]);
    else
        out[(ptrdiff_t)i * n + j] = s;
}

/* The epilogue of the rows of x from i0 on, written into *part: NULL when sc is (int32 sums) */
static inline const cm_scaled *scaled_from(const cm_scaled *sc, int i0, int n, cm_scaled *part)
{
    if (!sc)
        return NULL;
    part->row_scale = sc->row_scale + i0;
    part->col_scale = sc->col_scale;
    part->out = sc->out + (ptrdiff_t)i0 * n;
    return part;
}

/* Inside an OpenMP team: this thread's contiguous range [*j0, *j1) of n weight rows, in whole blocks of
 * `align` rows (so that a thread's blocks are never cut short but at the end) */
static inline void thread_rows(int n, int align, int *j0, int *j1)
{
    int nt = 1, id = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads();
    id = omp_get_thread_num();
#endif
    int per = ((n + nt - 1) / nt + align - 1) / align * align;
    *j0 = id * per < n ? id * per : n;
    *j1 = *j0 + per < n ? *j0 + per : n;
}

#if CM_VNNI

/* Weight rows j .. j+R-1 against the M rows of u (x + 128), R and M constants once inlined. */
static inline __attribute__((always_inline)) void
rows_block(const uint8_t *restrict u, int M, int k, const int8_t *restrict w, const int32_t *restrict wsums,
           int j, int R, int32_t *restrict out, const cm_scaled *sc, int n)
{
    __m512i acc[4][CM_BLOCK_ROWS];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++)
            acc[r][i] = _mm512_setzero_si512();
    int t = 0;
    for (; t + 64 <= k; t += 64) {
        __m512i wv[4];
        for (int r = 0; r < R; r++) {
            const int8_t *p = w + (ptrdiff_t)(j + r) * k + t;
            _mm_prefetch((const char *)(p + CM_PREFETCH), CM_PREFETCH_HINT);
            wv[r] = _mm512_loadu_si512((const void *)p);
        }
        for (int i = 0; i < M; i++) {
            __m512i uv = _mm512_loadu_si512((const void *)(u + (ptrdiff_t)i * k + t));
            for (int r = 0; r < R; r++)
                acc[r][i] = _mm512_dpbusd_epi32(acc[r][i], uv, wv[r]);
        }
    }
    if (t < k) { /* the last k % 64 bytes: masked loads, zeros beyond (a zero weight adds nothing) */
        __mmask64 mask = (~(__mmask64)0) >> (64 - (k - t));
        __m512i wv[4];
        for (int r = 0; r < R; r++)
            wv[r] = _mm512_maskz_loadu_epi8(mask, (const void *)(w + (ptrdiff_t)(j + r) * k + t));
        for (int i = 0; i < M; i++) {
            __m512i uv = _mm512_maskz_loadu_epi8(mask, (const void *)(u + (ptrdiff_t)i * k + t));
            for (int r = 0; r < R; r++)
                acc[r][i] = _mm512_dpbusd_epi32(acc[r][i], uv, wv[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        /* modulo 2^32, as vpdpbusd sums: exact wherever the true sum fits in int32 */
        uint32_t offset = 128u * (uint32_t)wsums[j + r];
        for (int i = 0; i < M; i++)
            put(out, sc, n, i, j + r, (int32_t)((uint32_t)_mm512_reduce_add_epi32(acc[r][i]) - offset));
    }
}

/* Weight row j against the M rows of u (x + 128), M a constant once inlined, the row read front to back as one
 * stream with no software prefetch: the hardware's own prefetchers follow one stream per thread (see
 * CM_STREAM_ROWS). Two accumulators per row of u (even and odd 64-byte vectors), added at the end: the same
 * sums modulo 2^32. */
static inline __attribute__((always_inline)) void
row_stream(const uint8_t *restrict u, int M, int k, const int8_t *restrict w, const int32_t *restrict wsums,
           int j, int32_t *restrict out, const cm_scaled *sc, int n)
{
    __m512i acc[CM_SINGLE][2];
    for (int i = 0; i < M; i++)
        acc[i][0] = acc[i][1] = _mm512_setzero_si512();
    const int8_t *p = w + (ptrdiff_t)j * k;
    int t = 0;
    for (; t + 128 <= k; t += 128) {
        __m512i w0 = _mm512_loadu_si512((const void *)(p + t)), w1 = _mm512_loadu_si512((const void *)(p + t + 64));
        for (int i = 0; i < M; i++) {
            acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], _mm512_loadu_si512((const void *)(u + (ptrdiff_t)i * k + t)), w0);
            acc[i][1] = _mm512_dpbusd_epi32(acc[i][1], _mm512_loadu_si512((const void *)(u + (ptrdiff_t)i * k + t + 64)),
                                            w1);
        }
    }
    for (; t < k; t += 64) { /* a last 64 bytes, then k % 64: masked loads, zeros beyond (adding nothing) */
        __mmask64 mask = k - t >= 64 ? ~(__mmask64)0 : (~(__mmask64)0) >> (64 - (k - t));
        __m512i wv = _mm512_maskz_loadu_epi8(mask, (const void *)(p + t));
        for (int i = 0; i < M; i++)
            acc[i][0] = _mm512_dpbusd_epi32(acc[i][0], _mm512_maskz_loadu_epi8(mask, (const void *)(u + (ptrdiff_t)i * k + t)),
                                            wv);
    }
    uint32_t offset = 128u * (uint32_t)wsums[j];
    for (int i = 0; i < M; i++)
        put(out, sc, n, i, j, (int32_t)((uint32_t)_mm512_reduce_add_epi32(_mm512_add_epi32(acc[i][0], acc[i][1]))
                                        - offset));
}

/* Weight rows j0 .. j1-1: up to CM_STREAM_ROWS rows of u, one weight row at a time (row_stream); beyond, 4 at a
 * time while 4 x M accumulators fit in the 32 vector registers (with the 4
 * weight vectors and one of u), then 2, then 1. */
static inline __attribute__((always_inline)) void
rows_range(const uint8_t *restrict u, int M, int k, const int8_t *restrict w, const int32_t *restrict wsums,
           int j0, int j1, int32_t *restrict out, const cm_scaled *sc, int n)
{
    int j = j0;
    if (M <= CM_STREAM_ROWS) {
        for (; j < j1; j++)
            row_stream(u, M, k, w, wsums, j, out, sc, n);
        return;
    }
    if (M <= 5)
        for (; j + 4 <= j1; j += 4)
            rows_block(u, M, k, w, wsums, j, 4, out, sc, n);
    if (M <= 12)
        for (; j + 2 <= j1; j += 2)
            rows_block(u, M, k, w, wsums, j, 2, out, sc, n);
    for (; j < j1; j++)
        rows_block(u, M, k, w, wsums, j, 1, out, sc, n);
}

#define CM_CASE(M) case M: rows_range(u, M, k, w, wsums, j0, j1, out, sc, n); break;
#define CM_GROUP_CASE(M) case M: rows_block(u, M, k, w, wsums, j, R, out, sc, n); break;

/* rows_block for M rows, 1 <= M <= 12, R weight rows (1, 2 or 4; constants once inlined) */
static inline __attribute__((always_inline)) void
group_block(const uint8_t *restrict u, int M, int k, const int8_t *restrict w, const int32_t *restrict wsums,
            int j, int R, int32_t *restrict out, const cm_scaled *sc, int n)
{
    switch (M) {
    CM_GROUP_CASE(1) CM_GROUP_CASE(2) CM_GROUP_CASE(3) CM_GROUP_CASE(4) CM_GROUP_CASE(5) CM_GROUP_CASE(6)
    CM_GROUP_CASE(7) CM_GROUP_CASE(8) CM_GROUP_CASE(9) CM_GROUP_CASE(10) CM_GROUP_CASE(11)
    default: rows_block(u, 12, k, w, wsums, j, R, out, sc, n); break;
    }
}

/* Weight rows j0 .. j1-1 against m > CM_SINGLE rows of u: two weight rows at a time (four when the groups hold at
 * most 5 rows), against each group of rows of u in turn (groups of at most CM_GROUP, their sizes as equal as can
 * be), so that the weight rows are read from memory once and from the cache for the other groups. */
static void rows_grouped(const uint8_t *u, int m, int k, const int8_t *w, const int32_t *wsums, int j0, int j1,
                         int32_t *out, const cm_scaled *sc, int n)
{
    int groups = (m + CM_GROUP - 1) / CM_GROUP;
    int wide = (m + groups - 1) / groups <= 5 ? 4 : 2; /* weight rows per block: 4 x 5 or 2 x 8 accumulators */
    for (int j = j0; j < j1;) {
        int R = j + wide <= j1 ? wide : j + 2 <= j1 ? 2 : 1;
        for (int g = 0, i0 = 0; g < groups; g++) {
            int M = m / groups + (g < m % groups);
            cm_scaled part;
            const cm_scaled *psc = scaled_from(sc, i0, n, &part);
            int32_t *pout = out ? out + (ptrdiff_t)i0 * n : NULL;
            const uint8_t *pu = u + (ptrdiff_t)i0 * k;
            if (R == 4)
                group_block(pu, M, k, w, wsums, j, 4, pout, psc, n);
            else if (R == 2)
                group_block(pu, M, k, w, wsums, j, 2, pout, psc, n);
            else
                group_block(pu, M, k, w, wsums, j, 1, pout, psc, n);
            i0 += M;
        }
        j += R;
    }
}

static void product(const uint8_t *u, int m, int k, const int8_t *w, const int32_t *wsums, int n, int32_t *out,
                    const cm_scaled *sc, int threads)
{
    #pragma omp parallel num_threads(threads)
    {
        int j0, j1;
        thread_rows(n, 4, &j0, &j1); /* whole blocks of 4 rows per thread */
        if (j0 < j1) {
            if (m > CM_SINGLE)
                rows_grouped(u, m, k, w, wsums, j0, j1, out, sc, n);
            else
                switch (m) {
                CM_CASE(1) CM_CASE(2) CM_CASE(3) CM_CASE(4) CM_CASE(5) CM_CASE(6) CM_CASE(7) CM_CASE(8)
                CM_CASE(9) CM_CASE(10) CM_CASE(11) CM_CASE(12) CM_CASE(13)
                default: rows_range(u, 14, k, w, wsums, j0, j1, out, sc, n); break;
                }
        }
    }
}

/* ---------------------------------------------------------------------------------------------------------
 * Many rows: the rows of x in the vector's lanes (product_lanes, from CM_LANES_MIN rows, any number of them).
 *
 * rows_block puts 64 bytes of k in a vector's lanes, so every output ends in a horizontal sum and each 64-byte
 * load of x serves only the two weight rows in registers. Here the lanes hold 16 rows of x instead: x + 128 is
 * packed once per call so that one 64-byte vector holds 4 bytes of k of 16 rows (the layout vpdpbusd sums over,
 * which oneDNN and AMX call the VNNI layout, here given to x, so that the weights stay as they lie), and each
 * weight row gives 4 bytes at a time, broadcast to all 16 lanes. A block of 16 weight rows against one such
 * vector (sums_16x1), or of 8 against two (sums_8x2, 32 rows of x), keeps 16 accumulators of 16 sums each, one
 * lane per row of x: no horizontal sum, each 64-byte load of x serves 16 or 8 products, and the epilogue
 * (the 128 wsums[j] off, the scaled bfloat16) is done 16 outputs at a time. x is packed in chunks of 32 rows (a
 * last chunk of 16 or fewer takes one vector); each thread streams its range of weight rows once per chunk,
 * prefetching CM_LANE_BLOCKS blocks ahead into the L2 (CM_LANE_HINT).
 *
 * 2-core AMD EPYC (Zen 4, no AMX), 2026-12-07, all 196 matrices of Qwen2.5-1.5B (1,310 MB) from memory, the
 * scaled epilogue, C without Python (best of 3-5, ms; the machine's speed moved by 20% from minute to minute):
 * 16 rows 54-58 against 85-101 for rows_grouped, 24 rows 103-112 against 162-166, 32 rows 105-115 (torch._int_mm
 * 176-200). A loop of independent vpdpbusd reads 3.64 G/s on one core (233 GMAC/s), so 16 rows in 54 ms are
 * 83% of the two cores' multipliers, while reading the weights at 24 GB/s. Prefetch variants at 16 rows: one block
 * ahead into the L1 63-74 ms, two into the L2 54-58, four into the L2 56-68; each row's line 512 bytes ahead
 * slower. Through Kernel.gemv (bench/int8_kernels.py's shapes, old and new libraries alternating in one process):
 * 9 rows 56 against 63 ms, 12 58 / 68, 16 64 / 88, 24 115 / 130; at 8 rows even (48 / 48), so from 9 rows. */
#ifndef CM_LANE_HINT
#define CM_LANE_HINT _MM_HINT_T1
#endif
#ifndef CM_LANE_BLOCKS
#define CM_LANE_BLOCKS 2 /* the prefetch reads this many blocks ahead */
#endif
#ifndef CM_LANES_MIN
#define CM_LANES_MIN 9 /* from this many rows of x, product_lanes */
#endif

/* Pack rows [i0, i0 + L) of x (int8, k per row; L <= 16 V) as u = x + 128 into p, V vectors per group of 4 bytes
 * of k: p[((g V + v) 16 + l) 4 + b] = u[i0 + 16 v + l][4 g + b], 0 beyond k and beyond L (a zero u adds
 * nothing, and only the real k is in the 128 wsums[j] taken off). */
static void pack_lanes(const int8_t *x, int i0, int L, int k, int V, uint8_t *p)
{
    int k4 = (k + 3) / 4;
    memset(p, 0, (size_t)k4 * V * 64);
    for (int l = 0; l < L; l++) {
        const int8_t *row = x + (ptrdiff_t)(i0 + l) * k;
        uint8_t *q = p + (ptrdiff_t)(l / 16) * 64 + 4 * (l % 16);
        int g = 0;
        for (; 4 * g + 4 <= k; g++) {
            uint32_t b;
            memcpy(&b, row + 4 * g, 4);
            b ^= 0x80808080u;
            memcpy(q + (ptrdiff_t)g * V * 64, &b, 4);
        }
        for (int t = 4 * g; t < k; t++)
            q[(ptrdiff_t)g * V * 64 + t % 4] = (uint8_t)row[t] ^ 0x80;
    }
}

/* 4 bytes of weight row `row` from byte 4 g on, as one int32 for the broadcast; zeros beyond k */
static inline int32_t weight_quad(const int8_t *row, int g, int k)
{
    int32_t b = 0;
    int t = 4 * g;
    memcpy(&b, row + t, (size_t)(k - t >= 4 ? 4 : k - t));
    return b;
}

/* The prefetch of a lane kernel's weights at group g of k, for R rows: the block CM_LANE_BLOCKS blocks ahead
 * (`ahead`), its R x k bytes in order, 4 R bytes a group, into the cache CM_LANE_HINT names (the header's
 * figures: two blocks ahead into the L2 was faster than one into the L1, and than each row's own line 512 bytes
 * ahead) */
#define CM_LANE_PREFETCH(R) _mm_prefetch(ahead + (ptrdiff_t)4 * (R) * g, CM_LANE_HINT)

/* An int32 read from any address (the 4 bytes of a weight row broadcast to all lanes) */
typedef int32_t cm_quad __attribute__((aligned(1), may_alias));
#define CM_BQ(ptr) _mm512_set1_epi32(*(const cm_quad *)(ptr))

/* The sums of 16 weight rows (wr, rows k bytes apart) against one vector of packed x (p), over the first kf
 * groups of 4 bytes of k: acc[r] (16 lanes: 16 rows of x). The rows are addressed from four pointers, k, 2 k
 * and 3 k apart, so that the loop needs no more registers than there are; `ahead`: the weights to prefetch
 * (CM_LANE_PREFETCH), 64 bytes a group (16 k bytes over k / 4 groups). */
static __attribute__((noinline)) void
sums_16x1(const uint8_t *restrict p, ptrdiff_t k, const int8_t *restrict wr, int kf, const char *ahead, __m512i *acc)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
            a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    const int8_t *b0 = wr, *b1 = wr + 4 * k, *b2 = wr + 8 * k, *b3 = wr + 12 * k;
    const ptrdiff_t k2 = 2 * k, k3 = 3 * k;
    for (int g = 0; g < kf; g++) {
        CM_LANE_PREFETCH(16);
        __m512i x = _mm512_load_si512((const void *)(p + (ptrdiff_t)64 * g));
        a0 = _mm512_dpbusd_epi32(a0, x, CM_BQ(b0));
        a1 = _mm512_dpbusd_epi32(a1, x, CM_BQ(b0 + k));
        a2 = _mm512_dpbusd_epi32(a2, x, CM_BQ(b0 + k2));
        a3 = _mm512_dpbusd_epi32(a3, x, CM_BQ(b0 + k3));
        a4 = _mm512_dpbusd_epi32(a4, x, CM_BQ(b1));
        a5 = _mm512_dpbusd_epi32(a5, x, CM_BQ(b1 + k));
        a6 = _mm512_dpbusd_epi32(a6, x, CM_BQ(b1 + k2));
        a7 = _mm512_dpbusd_epi32(a7, x, CM_BQ(b1 + k3));
        a8 = _mm512_dpbusd_epi32(a8, x, CM_BQ(b2));
        a9 = _mm512_dpbusd_epi32(a9, x, CM_BQ(b2 + k));
        a10 = _mm512_dpbusd_epi32(a10, x, CM_BQ(b2 + k2));
        a11 = _mm512_dpbusd_epi32(a11, x, CM_BQ(b2 + k3));
        a12 = _mm512_dpbusd_epi32(a12, x, CM_BQ(b3));
        a13 = _mm512_dpbusd_epi32(a13, x, CM_BQ(b3 + k));
        a14 = _mm512_dpbusd_epi32(a14, x, CM_BQ(b3 + k2));
        a15 = _mm512_dpbusd_epi32(a15, x, CM_BQ(b3 + k3));
        b0 += 4, b1 += 4, b2 += 4, b3 += 4;
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6, acc[7] = a7;
    acc[8] = a8, acc[9] = a9, acc[10] = a10, acc[11] = a11, acc[12] = a12, acc[13] = a13, acc[14] = a14;
    acc[15] = a15;
}

/* sums_16x1 for 8 weight rows against two vectors of packed x (32 rows): acc[2 r + v] */
static __attribute__((noinline)) void
sums_8x2(const uint8_t *restrict p, ptrdiff_t k, const int8_t *restrict wr, int kf, const char *ahead, __m512i *acc)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0,
            a9 = a0, a10 = a0, a11 = a0, a12 = a0, a13 = a0, a14 = a0, a15 = a0;
    const int8_t *b0 = wr, *b1 = wr + 4 * k;
    const ptrdiff_t k2 = 2 * k, k3 = 3 * k;
    for (int g = 0; g < kf; g++) {
        CM_LANE_PREFETCH(8);
        __m512i x0 = _mm512_load_si512((const void *)(p + (ptrdiff_t)128 * g));
        __m512i x1 = _mm512_load_si512((const void *)(p + (ptrdiff_t)128 * g + 64));
        __m512i q;
        q = CM_BQ(b0), a0 = _mm512_dpbusd_epi32(a0, x0, q), a1 = _mm512_dpbusd_epi32(a1, x1, q);
        q = CM_BQ(b0 + k), a2 = _mm512_dpbusd_epi32(a2, x0, q), a3 = _mm512_dpbusd_epi32(a3, x1, q);
        q = CM_BQ(b0 + k2), a4 = _mm512_dpbusd_epi32(a4, x0, q), a5 = _mm512_dpbusd_epi32(a5, x1, q);
        q = CM_BQ(b0 + k3), a6 = _mm512_dpbusd_epi32(a6, x0, q), a7 = _mm512_dpbusd_epi32(a7, x1, q);
        q = CM_BQ(b1), a8 = _mm512_dpbusd_epi32(a8, x0, q), a9 = _mm512_dpbusd_epi32(a9, x1, q);
        q = CM_BQ(b1 + k), a10 = _mm512_dpbusd_epi32(a10, x0, q), a11 = _mm512_dpbusd_epi32(a11, x1, q);
        q = CM_BQ(b1 + k2), a12 = _mm512_dpbusd_epi32(a12, x0, q), a13 = _mm512_dpbusd_epi32(a13, x1, q);
        q = CM_BQ(b1 + k3), a14 = _mm512_dpbusd_epi32(a14, x0, q), a15 = _mm512_dpbusd_epi32(a15, x1, q);
        b0 += 4, b1 += 4;
    }
    acc[0] = a0, acc[1] = a1, acc[2] = a2, acc[3] = a3, acc[4] = a4, acc[5] = a5, acc[6] = a6, acc[7] = a7;
    acc[8] = a8, acc[9] = a9, acc[10] = a10, acc[11] = a11, acc[12] = a12, acc[13] = a13, acc[14] = a14;
    acc[15] = a15;
}

/* Weight rows j .. j+R-1 (R = 16 with V = 1, 8 with V = 2, or any R fewer at a range's end) against the L rows
 * of x packed at p (V vectors, L <= 16 V), rows i0.. of the output. */
static void lanes_block(const uint8_t *restrict p, int V, int L, int i0, int k, const int8_t *restrict w,
                        const int32_t *restrict wsums, int j, int R, int32_t *restrict out, const cm_scaled *sc, int n)
{
    __m512i acc[32]; /* acc[r V + v] */
    const int8_t *wr = w + (ptrdiff_t)j * k;
    const char *ahead = (const char *)(wr + (ptrdiff_t)CM_LANE_BLOCKS * R * k);
    int kf = k / 4, k4 = (k + 3) / 4;
    if (V == 1 && R == 16) {
        sums_16x1(p, k, wr, kf, ahead, acc);
    } else if (V == 2 && R == 8) {
        sums_8x2(p, k, wr, kf, ahead, acc);
    } else {
        for (int a = 0; a < R * V; a++)
            acc[a] = _mm512_setzero_si512();
        for (int g = 0; g < kf; g++)
            for (int r = 0; r < R; r++) {
                __m512i q = CM_BQ(wr + (ptrdiff_t)r * k + 4 * g);
                for (int v = 0; v < V; v++)
                    acc[r * V + v] = _mm512_dpbusd_epi32(acc[r * V + v],
                                                         _mm512_load_si512((const void *)(p + ((ptrdiff_t)g * V + v) * 64)), q);
            }
    }
    if (kf < k4) /* the last k % 4 bytes */
        for (int r = 0; r < R; r++) {
            __m512i q = _mm512_set1_epi32(weight_quad(wr + (ptrdiff_t)r * k, kf, k));
            for (int v = 0; v < V; v++)
                acc[r * V + v] = _mm512_dpbusd_epi32(acc[r * V + v],
                                                     _mm512_load_si512((const void *)(p + ((ptrdiff_t)kf * V + v) * 64)), q);
        }
    /* the epilogue: 16 rows' sums of each weight row at once, then written row by row */
    for (int v = 0; v < V; v++) {
        int lanes = L - 16 * v < 16 ? L - 16 * v : 16;
        if (lanes <= 0)
            break;
        __mmask16 valid = (__mmask16)((1u << lanes) - 1);
        __m512 rs = sc ? _mm512_maskz_loadu_ps(valid, sc->row_scale + i0 + 16 * v) : _mm512_setzero_ps();
        union {
            int32_t s[16];
            uint16_t h[32];
        } tile[16];
        for (int r = 0; r < R; r++) {
            __m512i s = _mm512_sub_epi32(acc[r * V + v], _mm512_set1_epi32((int32_t)(128u * (uint32_t)wsums[j + r])));
            if (sc) {
                __m512 f = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), rs), _mm512_set1_ps(sc->col_scale[j + r]));
                _mm256_storeu_si256((__m256i *)tile[r].h, bf16_of16(f));
            } else {
                _mm512_storeu_si512((void *)tile[r].s, s);
            }
        }
        for (int l = 0; l < lanes; l++) {
            ptrdiff_t at = (ptrdiff_t)(i0 + 16 * v + l) * n + j;
            if (sc)
                for (int r = 0; r < R; r++)
                    sc->out[at + r] = tile[r].h[l];
            else
                for (int r = 0; r < R; r++)
                    out[at + r] = tile[r].s[l];
        }
    }
}

/* The product of m rows of x through lanes_block: x packed in chunks of 32 rows (the last of 16 or fewer in one
 * vector); each thread takes a contiguous range of weight rows, in blocks, against every chunk in turn. */
static int product_lanes(const int8_t *x, int m, int k, const int8_t *w, const int32_t *wsums, int n, int32_t *out,
                         const cm_scaled *sc, int threads)
{
    int k4 = (k + 3) / 4, chunks = (m + 31) / 32;
    size_t chunk_bytes = (size_t)k4 * 2 * 64;
    uint8_t *p = aligned_alloc(64, chunk_bytes * chunks);
    if (!p)
        return -1;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int c = 0; c < chunks; c++) {
        int L = m - 32 * c < 32 ? m - 32 * c : 32;
        pack_lanes(x, 32 * c, L, k, L > 16 ? 2 : 1, p + chunk_bytes * c);
    }
    #pragma omp parallel num_threads(threads)
    {
        int j0, j1;
        thread_rows(n, 16, &j0, &j1);
        for (int c = 0; c < chunks; c++) {
            int L = m - 32 * c < 32 ? m - 32 * c : 32, V = L > 16 ? 2 : 1, step = V == 2 ? 8 : 16;
            const uint8_t *pc = p + chunk_bytes * c;
            for (int j = j0; j < j1; j += step)
                lanes_block(pc, V, L, 32 * c, k, w, wsums, j, j + step <= j1 ? step : j1 - j, out, sc, n);
        }
    }
    free(p);
    return 0;
}

#endif

#if CM_AVX2

/* the sum of the eight int32 lanes of v, modulo 2^32 */
static inline int32_t hsum8(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* Weight rows j .. j+R-1 against the M rows of x16 (x widened to int16, rows k apart), R and M constants once
 * inlined (R x M accumulators, R weight vectors and one of x in the 16 registers). Each 16 bytes of a weight
 * row are widened once (vpmovsxbw) and multiplied with each row of x by vpmaddwd (16 int16 products, pairs
 * summed into eight int32 lanes): exact, for every int8 value. The last k % 16 bytes in scalar code. */
static inline __attribute__((always_inline)) void
block16(const int16_t *restrict x16, int M, int k, const int8_t *restrict w, int j, int R,
        int32_t *restrict out, const cm_scaled *sc, int n)
{
    __m256i acc[3][CM_GROUP16];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++)
            acc[r][i] = _mm256_setzero_si256();
    int t = 0;
    for (; t + 16 <= k; t += 16) {
        __m256i wv[3];
        for (int r = 0; r < R; r++)
            wv[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + (ptrdiff_t)(j + r) * k + t)));
        for (int i = 0; i < M; i++) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(x16 + (ptrdiff_t)i * k + t));
            for (int r = 0; r < R; r++)
                acc[r][i] = _mm256_add_epi32(acc[r][i], _mm256_madd_epi16(xv, wv[r]));
        }
    }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < M; i++) {
            uint32_t s = (uint32_t)hsum8(acc[r][i]);
            for (int u = t; u < k; u++)
                s += (uint32_t)((int32_t)x16[(ptrdiff_t)i * k + u] * w[(ptrdiff_t)(j + r) * k + u]);
            put(out, sc, n, i, j + r, (int32_t)s);
        }
}

/* Weight row j alone against the M (1 or 2) rows of x16, read front to back as one stream (as row_stream),
 * two accumulators per row of x (even and odd 16-byte steps). */
static inline __attribute__((always_inline)) void
stream16(const int16_t *restrict x16, int M, int k, const int8_t *restrict w, int j, int32_t *restrict out,
         const cm_scaled *sc, int n)
{
    __m256i acc[2][2];
    for (int i = 0; i < M; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    const int8_t *p = w + (ptrdiff_t)j * k;
    int t = 0;
    for (; t + 32 <= k; t += 32) {
        __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + t)));
        __m256i w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + t + 16)));
        for (int i = 0; i < M; i++) {
            const int16_t *xi = x16 + (ptrdiff_t)i * k + t;
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xi), w0));
            acc[i][1] = _mm256_add_epi32(acc[i][1],
                                         _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(xi + 16)), w1));
        }
    }
    if (t + 16 <= k) {
        __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + t)));
        for (int i = 0; i < M; i++)
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(
                _mm256_loadu_si256((const __m256i *)(x16 + (ptrdiff_t)i * k + t)), w0));
        t += 16;
    }
    for (int i = 0; i < M; i++) {
        uint32_t s = (uint32_t)hsum8(_mm256_add_epi32(acc[i][0], acc[i][1]));
        for (int u = t; u < k; u++)
            s += (uint32_t)((int32_t)x16[(ptrdiff_t)i * k + u] * p[u]);
        put(out, sc, n, i, j, (int32_t)s);
    }
}

#define CM_BLOCK16_CASE(M) case M: block16(x16, M, k, w, j, R, out, sc, n); break;

/* block16 for 1 <= M <= CM_GROUP16 rows and R (1, 2 or 3) weight rows, constants once inlined */
static inline __attribute__((always_inline)) void
group16(const int16_t *restrict x16, int M, int k, const int8_t *restrict w, int j, int R, int32_t *restrict out,
        const cm_scaled *sc, int n)
{
    switch (M) {
    CM_BLOCK16_CASE(1) CM_BLOCK16_CASE(2) CM_BLOCK16_CASE(3) CM_BLOCK16_CASE(4) CM_BLOCK16_CASE(5)
    default: block16(x16, CM_GROUP16, k, w, j, R, out, sc, n); break;
    }
}

/* Weight rows j0 .. j1-1 against m rows of x16: 1 or 2 rows one weight row at a time as one stream (stream16);
 * 3 rows on three weight rows at a time; more in groups of at most CM_GROUP16 rows (as equal as can be) on two
 * weight rows at a time, the two read from memory once and from the L1 for the other groups. */
static void rows16(const int16_t *x16, int m, int k, const int8_t *w, int j0, int j1, int32_t *out,
                   const cm_scaled *sc, int n)
{
    if (m <= 2) {
        for (int j = j0; j < j1; j++)
            if (m == 1)
                stream16(x16, 1, k, w, j, out, sc, n);
            else
                stream16(x16, 2, k, w, j, out, sc, n);
        return;
    }
    int groups = (m + CM_GROUP16 - 1) / CM_GROUP16;
    int wide = (m + groups - 1) / groups <= CM_WIDE3 ? 3 : 2; /* weight rows per block: 3 x 4 or 2 x 6 */
    for (int j = j0; j < j1;) {
        int R = j + wide <= j1 ? wide : 1;
        for (int g = 0, i0 = 0; g < groups; g++) {
            int M = m / groups + (g < m % groups);
            cm_scaled part;
            const cm_scaled *psc = scaled_from(sc, i0, n, &part);
            int32_t *pout = out ? out + (ptrdiff_t)i0 * n : NULL;
            const int16_t *px = x16 + (ptrdiff_t)i0 * k;
            if (R == 3)
                group16(px, M, k, w, j, 3, pout, psc, n);
            else if (R == 2)
                group16(px, M, k, w, j, 2, pout, psc, n);
            else
                group16(px, M, k, w, j, 1, pout, psc, n);
            i0 += M;
        }
        j += R;
    }
}

/* The AVX2 product: x int8 (m, k) against w int8 (n, k), CM_CHUNK rows of x at a time (each widened to int16
 * once, then every weight row read once for the chunk), the rows of w split between threads in contiguous
 * ranges as in product(). Why int16 and not vpmaddubsw (unsigned x signed bytes, pairs summed into int16, the
 * instruction llama.cpp's AVX2 dot products use): its pairs saturate (255 x 127 x 2 > 32,767), so it is exact
 * only with an operand's sign moved onto the other and neither holding -128; vpmaddwd on widened rows costs
 * the same four operations per 32 weights and row of x (widen, multiply-add, add), and is exact for every int8.
 * Returns -1 when memory runs out. */
static int product16(const int8_t *x, int m, int k, const int8_t *w, int n, int32_t *out, const cm_scaled *sc,
                     int threads)
{
    int chunk = m < CM_CHUNK ? m : CM_CHUNK;
    int16_t *x16 = malloc((size_t)chunk * k * sizeof(int16_t));
    if (!x16)
        return -1;
    for (int c0 = 0; c0 < m; c0 += chunk) {
        int rows = m - c0 < chunk ? m - c0 : chunk;
        for (size_t t = 0; t < (size_t)rows * k; t++)
            x16[t] = x[(size_t)c0 * k + t];
        cm_scaled part;
        const cm_scaled *psc = scaled_from(sc, c0, n, &part);
        int32_t *pout = out ? out + (ptrdiff_t)c0 * n : NULL;
        #pragma omp parallel num_threads(threads)
        {
            int j0, j1;
            thread_rows(n, 6, &j0, &j1); /* whole blocks of 2 and 3 weight rows per thread */
            if (j0 < j1)
                rows16(x16, rows, k, w, j0, j1, pout, psc, n);
        }
    }
    free(x16);
    return 0;
}

#endif

/* cm_rotate_quantize(x, bf16, m, k, block, q, step, threads): the input side of a rotated int8 layer, in one pass.
 * Each row of x (m, k) (bfloat16 as uint16 when bf16 is 1, else float32; contiguous) is multiplied by the
 * block-diagonal matrix of normalized Sylvester-Hadamard blocks of order block (a power of two, 2 to 256,
 * dividing k), then quantized per row: step[i] = max(absmax_i, 1e-12) / 127 (float32), q[i][t] = the rotated
 * value / step[i], rounded to nearest even, as int8.
 * The rotation is the fast Walsh-Hadamard transform (log2(block) stages of butterflies (a + b, a - b) between
 * entries block/2, ..., 2, 1 apart, then one product by (float)(1 / sqrt(block))), the same operations in the
 * same order as quant.walsh_hadamard, so the outputs are its bits: 8 additions per entry instead of the dense
 * product's 256 multiply-adds. From CM_ROTATE_ROWS rows, `threads` threads take a share of the rows each (a
 * prompt's or a server step's rows; one row is not split). Returns 0, or -1 when block, k or m is out of range
 * (nothing written) or memory ran out. */
/* the larger of a running absmax and v; a NaN, once met, stays (torch's amax propagates NaN) */
static inline float max_keeping_nan(float amax, float v)
{
    return v > amax || v != v ? v : amax;
}

#if CM_VNNI
/* One 256-entry block y (16 vectors) through the transform's eight stages, then times scale; returns the
 * largest |value| of the block (a NaN propagated). Stages 128 .. 16 apart pair whole vectors; 8 .. 1 apart pair
 * lanes of one vector: s is the vector with each lane's partner, the lower lane of a pair takes x + s = a + b,
 * the upper s - x = a - b (the scalar loop's operations, exactly). */
static inline float fwht256(__m512 *v, float scale)
{
    for (int h = 8; h >= 1; h /= 2)
        for (int s = 0; s < 16; s += 2 * h)
            for (int j = s; j < s + h; j++) {
                __m512 a = v[j], b = v[j + h];
                v[j] = _mm512_add_ps(a, b);
                v[j + h] = _mm512_sub_ps(a, b);
            }
    const __m512i p8 = _mm512_setr_epi32(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
    const __m512i p4 = _mm512_setr_epi32(4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11);
    const __m512i p2 = _mm512_setr_epi32(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13);
    const __m512i p1 = _mm512_setr_epi32(1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14);
    const __m512i perm[4] = {p8, p4, p2, p1};
    const __mmask16 upper[4] = {0xff00, 0xf0f0, 0xcccc, 0xaaaa};
    const __m512 sc = _mm512_set1_ps(scale);
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < 16; i++) {
        __m512 x = v[i];
        for (int st = 0; st < 4; st++) {
            __m512 partner = _mm512_permutexvar_ps(perm[st], x);
            x = _mm512_mask_blend_ps(upper[st], _mm512_add_ps(x, partner), _mm512_sub_ps(partner, x));
        }
        x = _mm512_mul_ps(x, sc);
        v[i] = x;
        __m512 mag = _mm512_abs_ps(x);
        /* max that keeps a NaN: where mag is NaN (unordered with itself) take it */
        amax = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(mag, mag, _CMP_UNORD_Q), _mm512_max_ps(amax, mag), mag);
    }
    float out = 0.0f;
    float lanes[16];
    _mm512_storeu_ps(lanes, amax);
    for (int i = 0; i < 16; i++)
        out = max_keeping_nan(out, lanes[i]);
    return out;
}
#endif

#if CM_AVX2
/* fwht256 in AVX2: the 256-entry block y as 32 vectors of 8; stages 128 .. 8 apart pair whole vectors, 4, 2 and 1
 * apart lanes of one vector (the partner by a permute, the lower lane x + s, the upper s - x: the scalar loop's
 * operations); then times scale; returns the largest |value| (a NaN, once met, kept: max(mag, amax) returns
 * amax when either is NaN, and a NaN mag is taken by the blend) */
static inline float fwht256_avx2(__m256 *v, float scale)
{
    for (int h = 16; h >= 1; h /= 2)
        for (int s = 0; s < 32; s += 2 * h)
            for (int j = s; j < s + h; j++) {
                __m256 a = v[j], b = v[j + h];
                v[j] = _mm256_add_ps(a, b);
                v[j + h] = _mm256_sub_ps(a, b);
            }
    const __m256 sc = _mm256_set1_ps(scale), sign = _mm256_set1_ps(-0.0f);
    __m256 amax = _mm256_setzero_ps();
    for (int i = 0; i < 32; i++) {
        __m256 x = v[i], partner;
        partner = _mm256_permute2f128_ps(x, x, 0x01);
        x = _mm256_blend_ps(_mm256_add_ps(x, partner), _mm256_sub_ps(partner, x), 0xF0);
        partner = _mm256_permute_ps(x, 0x4E);
        x = _mm256_blend_ps(_mm256_add_ps(x, partner), _mm256_sub_ps(partner, x), 0xCC);
        partner = _mm256_permute_ps(x, 0xB1);
        x = _mm256_blend_ps(_mm256_add_ps(x, partner), _mm256_sub_ps(partner, x), 0xAA);
        x = _mm256_mul_ps(x, sc);
        v[i] = x;
        __m256 mag = _mm256_andnot_ps(sign, x);
        amax = _mm256_blendv_ps(_mm256_max_ps(mag, amax), mag, _mm256_cmp_ps(mag, mag, _CMP_UNORD_Q));
    }
    float lanes[8], out = 0.0f;
    _mm256_storeu_ps(lanes, amax);
    for (int i = 0; i < 8; i++)
        out = max_keeping_nan(out, lanes[i]);
    return out;
}
#endif

int cm_rotate_quantize(const void *x, int bf16, int m, int k, int block, float scale, int8_t *q, float *step,
                       int threads)
{
    if (m < 0 || k < 1 || block < 2 || block > 256 || (block & (block - 1)) || k % block)
        return -1;
    int failed = 0;
    /* rows split between threads from CM_ROTATE_ROWS rows (a prompt's or a server step's); each row alone */
    #pragma omp parallel num_threads(m >= CM_ROTATE_ROWS && threads > 1 ? threads : 1) reduction(| : failed)
    {
    float *row = malloc((size_t)k * sizeof(float));
    if (!row)
        failed = 1;
    #pragma omp for schedule(static)
    for (int i = 0; i < m; i++) {
        if (!row)
            continue;
        if (bf16) {
            const uint16_t *src = (const uint16_t *)x + (ptrdiff_t)i * k;
            for (int t = 0; t < k; t++)
                row[t] = float_of_bf16(src[t]);
        } else {
            memcpy(row, (const float *)x + (ptrdiff_t)i * k, (size_t)k * sizeof(float));
        }
        float amax = 0.0f;
        for (int b0 = 0; b0 < k; b0 += block) {
            float *y = row + b0;
#if CM_VNNI
            if (block == 256) {
                __m512 v[16];
                for (int j = 0; j < 16; j++)
                    v[j] = _mm512_loadu_ps(y + 16 * j);
                float a = fwht256(v, scale);
                for (int j = 0; j < 16; j++)
                    _mm512_storeu_ps(y + 16 * j, v[j]);
                amax = max_keeping_nan(amax, a);
                continue;
            }
#elif CM_AVX2
            if (block == 256) {
                __m256 v[32];
                for (int j = 0; j < 32; j++)
                    v[j] = _mm256_loadu_ps(y + 8 * j);
                float a = fwht256_avx2(v, scale);
                for (int j = 0; j < 32; j++)
                    _mm256_storeu_ps(y + 8 * j, v[j]);
                amax = max_keeping_nan(amax, a);
                continue;
            }
#endif
            for (int h = block / 2; h >= 1; h /= 2)
                for (int s = 0; s < block; s += 2 * h)
                    for (int j = s; j < s + h; j++) {
                        float a = y[j], c = y[j + h];
                        y[j] = a + c;
                        y[j + h] = a - c;
                    }
            for (int j = 0; j < block; j++) {
                y[j] *= scale;
                float v = y[j] < 0 ? -y[j] : y[j];
                amax = max_keeping_nan(amax, v);
            }
        }
        float st = (amax < 1e-12f ? 1e-12f : amax) / 127.0f;
        step[i] = st;
        int t = 0;
#if CM_VNNI
        const __m512 vst = _mm512_set1_ps(st);
        for (; t + 16 <= k; t += 16) {
            __m512 r = _mm512_roundscale_ps(_mm512_div_ps(_mm512_loadu_ps(row + t), vst),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            _mm_storeu_si128((__m128i *)(q + (ptrdiff_t)i * k + t), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(r)));
        }
#elif CM_AVX2
        const __m256 vst = _mm256_set1_ps(st);
        for (; t + 8 <= k; t += 8) {
            __m256i r = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_div_ps(_mm256_loadu_ps(row + t), vst),
                                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
            __m128i p16 = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
            _mm_storel_epi64((__m128i *)(q + (ptrdiff_t)i * k + t), _mm_packs_epi16(p16, p16));
        }
#endif
        for (; t < k; t++)
            q[(ptrdiff_t)i * k + t] = (int8_t)__builtin_rintf(row[t] / st);
    }
    free(row);
    }
    return failed ? -1 : 0;
}

/* cm_scale_sums(sums, m, n, row_scale, col_scale, out16, threads): the scaled epilogue (cm_scaled) over int32
 * sums computed elsewhere (torch._int_mm's, for products wider than these kernels take): out16[i][j] =
 * bfloat16((float)sums[i][j] * row_scale[i] * col_scale[j]), the same bits as put(), in one pass instead of
 * torch's four (sums.float().mul_(row_scale).mul_(col_scale).to(torch.bfloat16)). Returns 0, or -1 when m or
 * n is negative. */
int cm_scale_sums(const int32_t *sums, int m, int n, const float *row_scale, const float *col_scale,
                  uint16_t *out16, int threads)
{
    if (m < 0 || n < 0)
        return -1;
    if (threads < 1)
        threads = 1;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int i = 0; i < m; i++) {
        const int32_t *s = sums + (ptrdiff_t)i * n;
        uint16_t *o = out16 + (ptrdiff_t)i * n;
        float r = row_scale[i];
        int j = 0;
#if CM_VNNI
        const __m512 vr = _mm512_set1_ps(r);
        for (; j + 16 <= n; j += 16) {
            __m512 f = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512((const void *)(s + j))), vr),
                                     _mm512_loadu_ps(col_scale + j));
            _mm256_storeu_si256((__m256i *)(o + j), bf16_of16(f));
        }
#endif
        for (; j < n; j++)
            o[j] = bf16_of(((float)s[j] * r) * col_scale[j]);
    }
    return 0;
}

/* wsums[j] = sum_t w[j][t] for w int8 (n, k) row-major: what cm_gemv_i8 needs, without a wider copy of w. */
int cm_row_sums(const int8_t *w, int n, int k, int32_t *wsums, int threads)
{
    if (k < 1 || k > CM_MAX_K || n < 0)
        return -1;
    if (threads < 1)
        threads = 1;
    #pragma omp parallel for schedule(static) num_threads(threads)
    for (int j = 0; j < n; j++) {
        int32_t s = 0;
        for (int t = 0; t < k; t++)
            s += w[(ptrdiff_t)j * k + t];
        wsums[j] = s;
    }
    return 0;
}

static int gemv(const int8_t *x, int m, int k, const int8_t *w, const int32_t *wsums, int n, int32_t *out,
                const cm_scaled *sc, int threads)
{
    if (m < 1 || m > CM_MAX_ROWS || k < 1 || k > CM_MAX_K || n < 0)
        return -1;
    if (threads < 1)
        threads = 1;
#if CM_AVX2
    (void)wsums;
    return product16(x, m, k, w, n, out, sc, threads);
#elif CM_VNNI
    if (m >= CM_LANES_MIN)
        return product_lanes(x, m, k, w, wsums, n, out, sc, threads);
    uint8_t *u = malloc((size_t)m * k);
    if (!u)
        return -1;
    for (size_t t = 0; t < (size_t)m * k; t++)
        u[t] = (uint8_t)x[t] ^ 0x80; /* x + 128, as unsigned bytes */
    product(u, m, k, w, wsums, n, out, sc, threads);
    free(u);
#else
    (void)threads;
    (void)wsums;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            int32_t s = 0;
            for (int t = 0; t < k; t++)
                s += (int32_t)x[(size_t)i * k + t] * w[(size_t)j * k + t];
            put(out, sc, n, i, j, s);
        }
#endif
    return 0;
}

int cm_gemv_i8(const int8_t *x, int m, int k, const int8_t *w, const int32_t *wsums, int n, int32_t *out,
               int threads)
{
    return gemv(x, m, k, w, wsums, n, out, NULL, threads);
}

/* cm_gemv_i8 with the scaled epilogue: out16 bfloat16 (m, n) as uint16, row_scale float (m,), col_scale (n,) */
int cm_gemv_i8_scaled(const int8_t *x, int m, int k, const int8_t *w, const int32_t *wsums, int n,
                      const float *row_scale, const float *col_scale, uint16_t *out16, int threads)
{
    cm_scaled sc = {row_scale, col_scale, out16};
    return gemv(x, m, k, w, wsums, n, NULL, &sc, threads);
}

/* ---------------------------------------------------------------------------------------------------------
 * AMX: cm_gemm_i8 */

static int amx_granted = 0;

#if CM_AMX

#define CM_XCOMP_PERM 0x1023  /* arch_prctl ARCH_REQ_XCOMP_PERM */
#define CM_XTILEDATA 18       /* XFEATURE_XTILEDATA */

/* the tile configuration: palette 1, all 8 tiles 16 rows of 64 bytes */
static void tiles_configure(void)
{
    struct {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } __attribute__((packed, aligned(64))) cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* Rows 16 * tile .. 16 * tile + 15 of x (zeros past m) into b, the right operands' layout:
 * b[chunk][tile] is 16 x 64 bytes, its row q holding bytes 4q..4q+3 of the chunk of each of the 16 rows. */
static void pack_tile(const int8_t *x, int m, int k, int tiles, int tile, int8_t *b)
{
    const int kc = k / 64;
    uint32_t *b32 = (uint32_t *)b; /* b is 64-byte aligned; x may be at any byte: read through memcpy */
    for (int c = 0; c < 16; c++) {
        const int i = tile * 16 + c;
        for (int ch = 0; ch < kc; ch++) {
            uint32_t *dst = b32 + ((size_t)ch * tiles + tile) * 256 + c;
            if (i < m) {
                const int8_t *src = x + (size_t)i * k + (size_t)ch * 64;
                for (int q = 0; q < 16; q++)
                    memcpy(dst + q * 16, src + 4 * q, 4);
            } else {
                for (int q = 0; q < 16; q++)
                    dst[q * 16] = 0;
            }
        }
    }
}

/* The accumulator tile c (16 weight rows x 16 rows of x) into out[row0 ..][col0 ..], transposed. */
static inline void store_transposed(const int32_t *c, int32_t *out, const cm_scaled *sc, int n, int m, int col0,
                                    int row0)
{
    const __m512i down = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
    for (int b = 0; b < 16 && row0 + b < m; b++) {
        const __m512i s = _mm512_i32gather_epi32(down, c + b, 4);
        if (!sc) {
            _mm512_storeu_si512((void *)(out + (ptrdiff_t)(row0 + b) * n + col0), s);
            continue;
        }
        /* (float)s * row_scale * col_scale, then bf16_of on 16 lanes */
        const __m512 f = _mm512_mul_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(s), _mm512_set1_ps(sc->row_scale[row0 + b])),
                                       _mm512_loadu_ps(sc->col_scale + col0));
        _mm256_storeu_si256((__m256i *)(sc->out + (ptrdiff_t)(row0 + b) * n + col0), bf16_of16(f));
    }
}

/* Weight rows j .. j+31 against x's tiles t and t+1 (when there is one): accumulators 0-3, weights 4-5, x 6-7. */
static void tiles_block(const int8_t *w, int k, const int8_t *b, int tiles, int t, int j, int m, int n, int32_t *out,
                        const cm_scaled *sc)
{
    const int kc = k / 64, two = t + 1 < tiles;
    const int8_t *w0 = w + (ptrdiff_t)j * k, *w1 = w0 + (ptrdiff_t)16 * k;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int ch = 0; ch < kc; ch++) {
        _tile_loadd(4, w0 + ch * 64, k);
        _tile_loadd(5, w1 + ch * 64, k);
        _tile_loadd(6, b + ((size_t)ch * tiles + t) * 1024, 64);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbssd(1, 5, 6);
        if (two) {
            _tile_loadd(7, b + ((size_t)ch * tiles + t + 1) * 1024, 64);
            _tile_dpbssd(2, 4, 7);
            _tile_dpbssd(3, 5, 7);
        }
    }
    int32_t c[256] __attribute__((aligned(64)));
    _tile_stored(0, c, 64);
    store_transposed(c, out, sc, n, m, j, t * 16);
    _tile_stored(1, c, 64);
    store_transposed(c, out, sc, n, m, j + 16, t * 16);
    if (two) {
        _tile_stored(2, c, 64);
        store_transposed(c, out, sc, n, m, j, t * 16 + 16);
        _tile_stored(3, c, 64);
        store_transposed(c, out, sc, n, m, j + 16, t * 16 + 16);
    }
}

int cm_amx(void)
{
    static int asked = 0;
    if (!asked) {
        asked = 1;
        amx_granted = syscall(SYS_arch_prctl, CM_XCOMP_PERM, CM_XTILEDATA) == 0;
    }
    return amx_granted;
}

static int gemm(const int8_t *x, int m, int k, const int8_t *w, int n, int32_t *out, const cm_scaled *sc,
                int threads)
{
    if (!amx_granted || m < 1 || k < 64 || k > CM_MAX_K || k % 64 || n < 0 || n % 32)
        return -1;
    if (threads < 1)
        threads = 1;
    const int tiles = (m + 15) / 16;
    int8_t *b = aligned_alloc(64, (size_t)tiles * 16 * k);
    if (!b)
        return -1;
    #pragma omp parallel num_threads(threads)
    {
        int nt = 1, id = 0;
#ifdef _OPENMP
        nt = omp_get_num_threads();
        id = omp_get_thread_num();
#endif
        for (int t = id; t < tiles; t += nt)
            pack_tile(x, m, k, tiles, t, b);
        #pragma omp barrier
        tiles_configure();
        const int blocks = n / 32, per = (blocks + nt - 1) / nt;
        const int b0 = id * per < blocks ? id * per : blocks, b1 = b0 + per < blocks ? b0 + per : blocks;
        for (int bl = b0; bl < b1; bl++)
            for (int t = 0; t < tiles; t += 2)
                tiles_block(w, k, b, tiles, t, bl * 32, m, n, out, sc);
        _tile_release();
    }
    free(b);
    return 0;
}

int cm_gemm_i8(const int8_t *x, int m, int k, const int8_t *w, int n, int32_t *out, int threads)
{
    return gemm(x, m, k, w, n, out, NULL, threads);
}

/* cm_gemm_i8 with the scaled epilogue (see cm_scaled) */
int cm_gemm_i8_scaled(const int8_t *x, int m, int k, const int8_t *w, int n, const float *row_scale,
                      const float *col_scale, uint16_t *out16, int threads)
{
    cm_scaled sc = {row_scale, col_scale, out16};
    return gemm(x, m, k, w, n, NULL, &sc, threads);
}

#else

int cm_amx(void) { return 0; }

int cm_gemm_i8(const int8_t *x, int m, int k, const int8_t *w, int n, int32_t *out, int threads)
{
    (void)x, (void)m, (void)k, (void)w, (void)n, (void)out, (void)threads, (void)amx_granted;
    return -1;
}

int cm_gemm_i8_scaled(const int8_t *x, int m, int k, const int8_t *w, int n, const float *row_scale,
                      const float *col_scale, uint16_t *out16, int threads)
{
    (void)x, (void)m, (void)k, (void)w, (void)n, (void)row_scale, (void)col_scale, (void)out16, (void)threads;
    return -1;
}

#endif

/* ---- The decode step's attention: one query token over bfloat16 keys and values ----
 *
 * A one-token step of the plain decoder (runtime/model/llama.py) did its rotary embedding and its attention in
 * about 30 torch operators a layer, 6-7 ms of a 56 ms step of Qwen2.5-1.5B (2-core Zen 4, 250 cached tokens):
 * the arithmetic is a few microseconds, the rest is each operator's dispatch. Two calls instead.
 *
 * cm_rope_bf16(x, heads, d, cos, sin): the rotary embedding (Su et al. 2021, RoFormer) of ``heads`` bfloat16
 * vectors of d entries (contiguous), in place, bit for bit torch's (x * cos) + (rotate_half(x) * sin) in
 * bfloat16, where rotate_half(x) = (-x[d/2:], x[:d/2]) and cos, sin are bfloat16 (d,): each product and the sum
 * rounded to bfloat16 to nearest even, as torch's bfloat16 operators round each result (negation is exact).
 * Returns 0, or -1 when d is odd or a count is out of range.
 *
 * cm_attend_one(q, heads, k, v, kv_heads, n, d, head_stride, scaling, out, threads): softmax(q K^T * scaling) V
 * for one bfloat16 query vector per head (q: heads x d, contiguous) over n keys and values (k, v: bfloat16, head
 * g's token t at g * head_stride + t * d), query head h reading key/value head h / (heads / kv_heads) (grouped-
 * query attention), in float32, written to out (heads x d) rounded to bfloat16. The float32 operations of
 * llama.py's _one_query (each score a float32 dot product times scaling; exp(score - max) / sum; the weighted
 * sum of values): the same values up to the order of float32 additions and expf's last bit, so not always the
 * same bits. Threads take key/value heads. Returns 0, or -1 when a count is out of range or memory runs out. */

int cm_rope_bf16(uint16_t *x, int heads, int d, const uint16_t *cos, const uint16_t *sin)
{
    if (heads < 0 || d < 2 || d % 2)
        return -1;
    int half = d / 2;
    for (int h = 0; h < heads; h++) {
        uint16_t *r = x + (ptrdiff_t)h * d;
        for (int i = 0; i < half; i++) {
            float a = float_of_bf16(r[i]), b = float_of_bf16(r[i + half]);
            float lo = rounded_bf16(a * float_of_bf16(cos[i])) + rounded_bf16(-b * float_of_bf16(sin[i]));
            float hi = rounded_bf16(b * float_of_bf16(cos[i + half])) + rounded_bf16(a * float_of_bf16(sin[i + half]));
            r[i] = bf16_of(lo);
            r[i + half] = bf16_of(hi);
        }
    }
    return 0;
}

#if CM_VNNI
static inline __m512 load_bf16x16(const uint16_t *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
#endif

/* The attention's products (head_scores, head_values) on float vectors of CM_FW lanes: AVX-512 (16), or AVX2
 * and FMA where there is no AVX-512 (8; on a 2-core Zen 3 the plain loops took 0.46 ms a layer at 250 cached
 * tokens, 13 of a 109 ms decode step of Qwen2.5-1.5B); neither: the plain loops alone. */
#if CM_AVX2 && defined(__FMA__)
static inline __m256 load_bf16x8(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

/* the sum of the 8 lanes of v */
static inline float hsum8f(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

#if CM_VNNI
#define CM_FW 16
#define cm_vf __m512
#define cm_vf_zero _mm512_setzero_ps
#define cm_vf_load _mm512_loadu_ps
#define cm_vf_store _mm512_storeu_ps
#define cm_vf_set1 _mm512_set1_ps
#define cm_vf_fmadd _mm512_fmadd_ps
#define cm_vf_mul _mm512_mul_ps
#define cm_vf_bf16 load_bf16x16
#define cm_vf_sum _mm512_reduce_add_ps
#elif CM_AVX2 && defined(__FMA__)
#define CM_FW 8
#define cm_vf __m256
#define cm_vf_zero _mm256_setzero_ps
#define cm_vf_load _mm256_loadu_ps
#define cm_vf_store _mm256_storeu_ps
#define cm_vf_set1 _mm256_set1_ps
#define cm_vf_fmadd _mm256_fmadd_ps
#define cm_vf_mul _mm256_mul_ps
#define cm_vf_bf16 load_bf16x8
#define cm_vf_sum hsum8f
#else
#define CM_FW 0
#endif

#if CM_VNNI
/* exp of 16 floats: x = n ln 2 + r, |r| <= ln 2 / 2, e^r by Cephes' expf polynomial (Moshier, Cephes Math
 * Library, expf.c: about 1 ulp), times 2^n by vscalefps (0 below the smallest float, infinity above); a NaN stays
 * NaN, as in expf and torch's exp, so that a NaN or infinite key makes its heads' outputs NaN wherever it lies
 * (the clamps alone would turn it into 0) */
static inline __m512 exp16(__m512 x)
{
    __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); /* kept NaN below: max and min would drop it */
    x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f)); /* far below expf's smallest denormal result: gives 0 */
    x = _mm512_min_ps(x, _mm512_set1_ps(89.0f));   /* past expf's largest: gives infinity */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500E-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
    __m512 y = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
    return _mm512_mask_blend_ps(nan, _mm512_scalef_ps(y, n), _mm512_set1_ps(__builtin_nanf("")));
}
#endif

/* softmax in place over n scores: exp(s - max) / sum, as torch's softmax (times the sum's reciprocal) */
static void softmax(float *sc, int n)
{
    float top = -__builtin_inff(), sum = 0.0f;
    for (int t = 0; t < n; t++)
        top = sc[t] > top ? sc[t] : top;
    int t = 0;
#if CM_VNNI
    __m512 vtop = _mm512_set1_ps(top), vsum = _mm512_setzero_ps();
    for (; t + 16 <= n; t += 16) {
        __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(sc + t), vtop));
        _mm512_storeu_ps(sc + t, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    sum = _mm512_reduce_add_ps(vsum);
#endif
    for (; t < n; t++) {
        sc[t] = __builtin_expf(sc[t] - top);
        sum += sc[t];
    }
    float inv = 1.0f / sum;
    for (t = 0; t < n; t++)
        sc[t] *= inv;
}

/* scores[j][t] = (q_j . k_t) * scaling for the query heads j < group of one key/value head (qf: group x d
 * floats; k: n bfloat16 vectors of d, d apart); each key read once for the group */
static void head_scores(const float *qf, int group, const uint16_t *k, int n, int d, float scaling, float *scores,
                        int stride)
{
    int t = 0;
#if CM_FW
    if (d % CM_FW == 0 && group <= 8) {
        /* eight accumulators whatever the group (a constant count stays in registers); the heads past the
         * group read row 0 again and are not stored */
        const float *rows[8];
        for (int j = 0; j < 8; j++)
            rows[j] = qf + (ptrdiff_t)(j < group ? j : 0) * d;
        for (; t < n; t++) {
            const uint16_t *kt = k + (ptrdiff_t)t * d;
            cm_vf acc[8];
            for (int j = 0; j < 8; j++)
                acc[j] = cm_vf_zero();
            for (int i = 0; i < d; i += CM_FW) {
                cm_vf kb = cm_vf_bf16(kt + i);
                for (int j = 0; j < 8; j++)
                    acc[j] = cm_vf_fmadd(cm_vf_load(rows[j] + i), kb, acc[j]);
            }
            for (int j = 0; j < group; j++)
                scores[(ptrdiff_t)j * stride + t] = cm_vf_sum(acc[j]) * scaling;
        }
    }
#endif
    for (; t < n; t++) {
        const uint16_t *kt = k + (ptrdiff_t)t * d;
        for (int j = 0; j < group; j++) {
            float s = 0.0f;
            for (int i = 0; i < d; i++)
                s += qf[(ptrdiff_t)j * d + i] * float_of_bf16(kt[i]);
            scores[(ptrdiff_t)j * stride + t] = s * scaling;
        }
    }
}

/* out[j] (d floats) = sum_t p[j][t] v_t for the query heads j < group of one key/value head; each value read
 * once for the group, 16 entries at a time */
static void head_values(const float *p, int group, const uint16_t *v, int n, int d, float *out, int stride)
{
    int i = 0;
#if CM_FW
    if (group <= 8) {
        const float *rows[8];
        for (int j = 0; j < 8; j++)
            rows[j] = p + (ptrdiff_t)(j < group ? j : 0) * stride;
        for (; i + CM_FW <= d; i += CM_FW) {
            cm_vf acc[8];
            for (int j = 0; j < 8; j++)
                acc[j] = cm_vf_zero();
            for (int t = 0; t < n; t++) {
                cm_vf vb = cm_vf_bf16(v + (ptrdiff_t)t * d + i);
                for (int j = 0; j < 8; j++)
                    acc[j] = cm_vf_fmadd(cm_vf_set1(rows[j][t]), vb, acc[j]);
            }
            for (int j = 0; j < group; j++)
                cm_vf_store(out + (ptrdiff_t)j * d + i, acc[j]);
        }
    }
#endif
    for (; i < d; i++)
        for (int j = 0; j < group; j++) {
            float s = 0.0f;
            for (int t = 0; t < n; t++)
                s += p[(ptrdiff_t)j * stride + t] * float_of_bf16(v[(ptrdiff_t)t * d + i]);
            out[(ptrdiff_t)j * d + i] = s;
        }
}

int cm_attend_one(const uint16_t *q, int heads, const uint16_t *k, const uint16_t *v, int kv_heads, int n, int d,
                  long head_stride, float scaling, uint16_t *out, int threads)
{
    if (heads < 1 || kv_heads < 1 || heads % kv_heads || n < 1 || d < 1 || head_stride < (long)n * d)
        return -1;
    int group = heads / kv_heads;
    /* per query head: its query in float32 (d), its scores (n), its output sum (d) */
    float *work = malloc(sizeof(float) * (size_t)heads * (2 * (size_t)d + (size_t)n));
    if (!work)
        return -1;
    int team = threads < 1 ? 1 : threads > kv_heads ? kv_heads : threads;
    if ((long)n * d * heads < 65536)
        team = 1; /* a short context: a thread team costs more than it saves */
#pragma omp parallel for num_threads(team) schedule(static)
    for (int g = 0; g < kv_heads; g++) {
        /* this key/value head's query heads: their queries in float32 (group x d), scores (group x n), outputs
         * (group x d) */
        float *qf = work + (size_t)g * group * (2 * (size_t)d + (size_t)n), *scores = qf + (size_t)group * d;
        float *acc = scores + (size_t)group * n;
        for (int t = 0; t < group * d; t++)
            qf[t] = float_of_bf16(q[(ptrdiff_t)g * group * d + t]);
        head_scores(qf, group, k + (ptrdiff_t)g * head_stride, n, d, scaling, scores, n);
        for (int j = 0; j < group; j++)
            softmax(scores + (ptrdiff_t)j * n, n);
        head_values(scores, group, v + (ptrdiff_t)g * head_stride, n, d, acc, n);
        for (int t = 0; t < group * d; t++)
            out[(ptrdiff_t)g * group * d + t] = bf16_of(acc[t]);
    }
    free(work);
    return 0;
}

/* ---- A batched step's attention: packed query tokens over a shared base and their rows' own slots ----
 *
 * A server step feeds 16 rows a few tokens each (their requests' messages, chosen tokens, drafts, forced text),
 * and every row starts with the same catalog prompt, held once (the "base", 472 tokens of the public set's
 * catalog). In torch (runtime/decoding/rowpass.py's _attend_packed) the step's attention took 25% of a 1.2 s
 * step of Qwen2.5-1.5B on two Zen 4 cores (16 rows feeding 200 tokens): the products over the rows' own slots
 * ran on a padded layout (each row padded to the widest, its queries against every slot of the step), and a
 * dozen gathers, scatters, concatenations and copies a layer moved the scores around. One call a layer instead.
 *
 * cm_attend_rows(q, T, heads, kv_heads, d, base_kt, base_v, B, Bp, on_base, keys, values, rows, cap, row_stride,
 *                head_stride, token_row, offsets, slots, scaling, out, threads):
 * for each of T query tokens (q: bfloat16 (T, heads, d), contiguous) and each query head h, reading key/value
 * head g = h / (heads / kv_heads) (grouped-query attention): softmax((q . k) * scaling) over the base's B keys
 * when on_base[t] is nonzero, followed by the token's own slots slots[offsets[t] .. offsets[t + 1]) of its row
 * token_row[t], times the matching values, summed in float32 and written to out (T, heads, d) rounded to
 * bfloat16 to nearest even. base_kt: float32 (kv_heads, d, Bp), the base's keys transposed, Bp >= B a
 * multiple of CM_ATT_KEYS (32; the padding's scores are computed and ignored); base_v: float32 (kv_heads, B, d).
 * keys, values: float32 buffers of `rows` rows, slot s of row r and head g at r * row_stride + g * head_stride
 * + s * d, s < cap. token_row (T,) and slots int32, offsets (T + 1,) int32 ascending from 0. A row's tokens are
 * consecutive, and each token's slots are the start of the next one's (a row's valid slots, then the step's
 * tokens up to this one: causal attention), so that the keys of a run of a row's tokens are gathered once,
 * transposed, for all of them. The operations of rowpass's float32 attention (a float32 dot product times
 * scaling; exp(score - max) / sum as softmax() above; the weighted sum of values): the same values up to the
 * order of the float32 additions and expf's last bit (where the CPU has AVX-512 BF16 and the base's keys are
 * bfloat16 values, as a bfloat16 model's are, their scores go through vdpbf16ps: bfloat16 products are exact in
 * float32, so only the additions' order differs there too). Threads take (key/value head, run of at most
 * CM_ATT_TOKENS tokens of a row) pairs, head by head, so that a thread reads one head's base from its cache.
 * Returns 0, or -1 when a count, a row or a slot is out of range, the slots are not as above, or memory runs
 * out (nothing useful written then). */

#define CM_ATT_KEYS 32   /* keys a block of scores takes; Bp is a multiple of it */
#define CM_ATT_TOKENS 16 /* the most tokens of a row that share one gathered copy of its keys */
#if CM_FW == 16
#define CM_ATT_HEADS 8 /* query heads one pass over the keys takes: 8 x 2 accumulators + 2 keys in 32 registers */
#else
#define CM_ATT_HEADS 6 /* 6 x 2 accumulators + 2 keys + 1 broadcast in 16 registers (AVX2) */
#endif

#if CM_FW
/* sc[j * stride + t] = (q_j . k_t) * scaling for J query heads (qf: J x d floats) and the keys t < n (kt: d
 * rows of ld floats, the keys transposed; n a multiple of 2 CM_FW), two vectors of keys at a time: no
 * horizontal sums */
static inline __attribute__((always_inline)) void
scores_j(const float *qf, const int J, int d, const float *kt, int ld, int n, float scaling, float *sc, long stride)
{
    for (int t0 = 0; t0 < n; t0 += 2 * CM_FW) {
        cm_vf acc[CM_ATT_HEADS][2];
        for (int j = 0; j < J; j++)
            acc[j][0] = acc[j][1] = cm_vf_zero();
        for (int i = 0; i < d; i++) {
            const float *row = kt + (ptrdiff_t)i * ld + t0;
            cm_vf k0 = cm_vf_load(row), k1 = cm_vf_load(row + CM_FW);
            for (int j = 0; j < J; j++) {
                cm_vf qj = cm_vf_set1(qf[(ptrdiff_t)j * d + i]);
                acc[j][0] = cm_vf_fmadd(qj, k0, acc[j][0]);
                acc[j][1] = cm_vf_fmadd(qj, k1, acc[j][1]);
            }
        }
        cm_vf s = cm_vf_set1(scaling);
        for (int j = 0; j < J; j++) {
            cm_vf_store(sc + (ptrdiff_t)j * stride + t0, cm_vf_mul(acc[j][0], s));
            cm_vf_store(sc + (ptrdiff_t)j * stride + t0 + CM_FW, cm_vf_mul(acc[j][1], s));
        }
    }
}

/* out[j][c .. c + 2 CM_FW) = sum_t p[j * stride + t] v_t[c ..] for J query heads over the n value rows v_t
 * (vrows[t], d floats each; d a multiple of 2 CM_FW), two vectors of d at a time; out: J x d floats */
static inline __attribute__((always_inline)) void
values_j(const float *p, const int J, long stride, const float *const *vrows, int n, int d, float *out)
{
    for (int c = 0; c < d; c += 2 * CM_FW) {
        cm_vf acc[CM_ATT_HEADS][2];
        for (int j = 0; j < J; j++)
            acc[j][0] = acc[j][1] = cm_vf_zero();
        for (int t = 0; t < n; t++) {
            cm_vf v0 = cm_vf_load(vrows[t] + c), v1 = cm_vf_load(vrows[t] + c + CM_FW);
            for (int j = 0; j < J; j++) {
                cm_vf pj = cm_vf_set1(p[(ptrdiff_t)j * stride + t]);
                acc[j][0] = cm_vf_fmadd(pj, v0, acc[j][0]);
                acc[j][1] = cm_vf_fmadd(pj, v1, acc[j][1]);
            }
        }
        for (int j = 0; j < J; j++) {
            cm_vf_store(out + (ptrdiff_t)j * d + c, acc[j][0]);
            cm_vf_store(out + (ptrdiff_t)j * d + c + CM_FW, acc[j][1]);
        }
    }
}

/* scores_j and values_j with J a constant (their loops unrolled, the accumulators in registers) */
#if CM_ATT_HEADS == 8
#define CM_ATT_CASES_78(call) case 7: call(7); break; case 8: call(8); break;
#else
#define CM_ATT_CASES_78(call)
#endif
#define CM_ATT_CASES(call)                                                                                        \
    switch (J) {                                                                                                  \
    case 1: call(1); break;                                                                                       \
    case 2: call(2); break;                                                                                       \
    case 3: call(3); break;                                                                                       \
    case 4: call(4); break;                                                                                       \
    case 5: call(5); break;                                                                                       \
    case 6: call(6); break;                                                                                       \
    CM_ATT_CASES_78(call)                                                                                         \
    }

static void scores(const float *qf, int J, int d, const float *kt, int ld, int n, float scaling, float *sc,
                   long stride)
{
#define CM_CALL(j) scores_j(qf, j, d, kt, ld, n, scaling, sc, stride)
    CM_ATT_CASES(CM_CALL)
#undef CM_CALL
}

static void weighted_values(const float *p, int J, long stride, const float *const *vrows, int n, int d, float *out)
{
#define CM_CALL(j) values_j(p, j, stride, vrows, n, d, out)
    CM_ATT_CASES(CM_CALL)
#undef CM_CALL
}
#endif

#if CM_VNNI && defined(__AVX512BF16__)
#define CM_ATT_BF16 1
/* scores_j with vdpbf16ps (AVX-512 BF16): kp holds the keys as bfloat16 pairs (d / 2 rows of ld uint32, pair m of
 * key t: entries 2m and 2m + 1); each instruction takes two entries of
 * 16 keys, twice scores_j's float32 FMA's; qp: the J queries' bfloat16 entries, d apart (the products of two bfloat16 values are exact in float32; the sums are
 * float32's, in another order) */
static inline __attribute__((always_inline)) void
scores_bf16_j(const uint16_t *qp, const int J, int d, const uint32_t *kp, int ld, int n, float scaling, float *sc,
              long stride)
{
    int half = d / 2;
    for (int t0 = 0; t0 < n; t0 += 32) {
        __m512 acc[CM_ATT_HEADS][2];
        for (int j = 0; j < J; j++)
            acc[j][0] = acc[j][1] = _mm512_setzero_ps();
        for (int m = 0; m < half; m++) {
            const uint32_t *row = kp + (ptrdiff_t)m * ld + t0;
            __m512bh k0 = (__m512bh)_mm512_loadu_si512((const void *)row);
            __m512bh k1 = (__m512bh)_mm512_loadu_si512((const void *)(row + 16));
            for (int j = 0; j < J; j++) {
                __m512bh qj = (__m512bh)CM_BQ(qp + (ptrdiff_t)j * d + 2 * m);
                acc[j][0] = _mm512_dpbf16_ps(acc[j][0], qj, k0);
                acc[j][1] = _mm512_dpbf16_ps(acc[j][1], qj, k1);
            }
        }
        __m512 s = _mm512_set1_ps(scaling);
        for (int j = 0; j < J; j++) {
            _mm512_storeu_ps(sc + (ptrdiff_t)j * stride + t0, _mm512_mul_ps(acc[j][0], s));
            _mm512_storeu_ps(sc + (ptrdiff_t)j * stride + t0 + 16, _mm512_mul_ps(acc[j][1], s));
        }
    }
}

static void scores_bf16(const uint16_t *qp, int J, int d, const uint32_t *kp, int ld, int n, float scaling,
                        float *sc, long stride)
{
#define CM_CALL(j) scores_bf16_j(qp, j, d, kp, ld, n, scaling, sc, stride)
    CM_ATT_CASES(CM_CALL)
#undef CM_CALL
}

/* The base's keys (float32, kv_heads x d x Bp, transposed) as bfloat16 pairs for scores_bf16 (kv_heads x d / 2 x
 * Bp uint32), or NULL when one is not a bfloat16 value (then the float32 products run: the same values) or
 * memory runs out */
static uint32_t *base_pairs(const float *kt, int kv_heads, int d, int Bp)
{
    size_t count = (size_t)kv_heads * (d / 2) * Bp;
    uint32_t *kp = malloc(sizeof(uint32_t) * (count ? count : 1));
    if (!kp)
        return NULL;
    uint32_t loose = 0;
    for (int g = 0; g < kv_heads; g++)
        for (int m = 0; m < d / 2; m++)
            for (int t = 0; t < Bp; t++) {
                uint32_t lo, hi;
                memcpy(&lo, kt + ((ptrdiff_t)g * d + 2 * m) * Bp + t, 4);
                memcpy(&hi, kt + ((ptrdiff_t)g * d + 2 * m + 1) * Bp + t, 4);
                loose |= (lo | hi) & 0xffffu;
                kp[((size_t)g * (d / 2) + m) * Bp + t] = (lo >> 16) | (hi & 0xffff0000u);
            }
    if (loose) {
        free(kp);
        return NULL;
    }
    return kp;
}
#else
#define CM_ATT_BF16 0
#endif

/* the same products in plain loops (no SIMD, or d not a multiple of 2 CM_FW); n keys of kt, as above */
static void scores_plain(const float *qf, int J, int d, const float *kt, int ld, int n, float scaling, float *sc,
                         long stride)
{
    for (int j = 0; j < J; j++)
        for (int t = 0; t < n; t++) {
            float dot = 0.0f;
            for (int i = 0; i < d; i++)
                dot += qf[(ptrdiff_t)j * d + i] * kt[(ptrdiff_t)i * ld + t];
            sc[(ptrdiff_t)j * stride + t] = dot * scaling;
        }
}

static void values_plain(const float *p, int J, long stride, const float *const *vrows, int n, int d, float *out)
{
    for (int j = 0; j < J; j++)
        for (int i = 0; i < d; i++) {
            float sum = 0.0f;
            for (int t = 0; t < n; t++)
                sum += p[(ptrdiff_t)j * stride + t] * vrows[t][i];
            out[(ptrdiff_t)j * d + i] = sum;
        }
}

/* the runs of cm_attend_rows: maximal ranges of consecutive tokens of one row, cut every CM_ATT_TOKENS; first[r]
 * is run r's first token, first[runs] = T. Returns the number of runs. */
static int token_runs(const int32_t *token_row, int T, int *first)
{
    int runs = 0;
    for (int t = 0; t < T; t++)
        if (t == 0 || token_row[t] != token_row[t - 1] || t - first[runs - 1] == CM_ATT_TOKENS)
            first[runs++] = t;
    first[runs] = T;
    return runs;
}

int cm_attend_rows(const uint16_t *q, int T, int heads, int kv_heads, int d, const float *base_kt,
                   const float *base_v, int B, int Bp, const uint8_t *on_base, const float *keys,
                   const float *values, int rows, int cap, long row_stride, long head_stride,
                   const int32_t *token_row, const int32_t *offsets, const int32_t *slots, float scaling,
                   uint16_t *out, int threads)
{
    if (T < 0 || heads < 1 || kv_heads < 1 || heads % kv_heads || d < 1 || B < 0 || Bp < B || Bp % CM_ATT_KEYS
        || rows < 0 || cap < 0 || head_stride < (long)cap * d || row_stride < head_stride * kv_heads
        || (B > 0 && (!base_kt || !base_v)) || offsets[0] != 0)
        return -1;
    int *first = malloc(sizeof(int) * ((size_t)T + 1));
    if (!first)
        return -1;
    int runs = token_runs(token_row, T, first), most = 0; /* most: the most own slots of a token */
    for (int t = 0; t < T; t++) {
        int n = offsets[t + 1] - offsets[t];
        int bad = n < 0 || token_row[t] < 0 || token_row[t] >= rows || (n == 0 && !(on_base[t] && B > 0));
        for (int i = offsets[t]; !bad && i < offsets[t + 1]; i++)
            bad = slots[i] < 0 || slots[i] >= cap;
        /* each token's slots start the next one's within a row */
        if (!bad && t + 1 < T && token_row[t + 1] == token_row[t])
            bad = offsets[t + 2] - offsets[t + 1] < n
                  || memcmp(slots + offsets[t], slots + offsets[t + 1], sizeof(int32_t) * (size_t)n) != 0;
        if (bad) {
            free(first);
            return -1;
        }
        most = n > most ? n : most;
    }
    int group = heads / kv_heads, chunk = group < CM_ATT_HEADS ? group : CM_ATT_HEADS;
    int own_pad = (most + CM_ATT_KEYS - 1) / CM_ATT_KEYS * CM_ATT_KEYS;
    long stride = (long)Bp + own_pad; /* a query head's scores: the base's (padded), then its own slots' */
    int simd = 0;
#if CM_FW
    simd = d % (2 * CM_FW) == 0;
#endif
    int team = threads < 1 ? 1 : threads;
    if ((long)T * heads * (B + most) * d < 65536)
        team = 1; /* a small step: a thread team costs more than it saves */
    uint32_t *kp = NULL; /* the base's keys as bfloat16 pairs, where the CPU multiplies them (AVX-512 BF16) */
#if CM_ATT_BF16
    if (simd && B > 0)
        kp = base_pairs(base_kt, kv_heads, d, Bp);
#endif
    int failed = 0;
#pragma omp parallel num_threads(team)
    {
        /* per thread: the queries in float32 and the outputs (chunk x d each), the scores (chunk x stride), the
         * run's keys transposed (d x own_pad), the value rows (B + most pointers) */
        float *qf = malloc(sizeof(float) * ((size_t)chunk * d * 2 + (size_t)chunk * stride + (size_t)d * own_pad));
        const float **vrows = malloc(sizeof(float *) * ((size_t)B + most + 1));
        if (!qf || !vrows) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (long item = 0; item < (long)kv_heads * runs; item++) {
            if (!qf || !vrows)
                continue;
            int g = (int)(item / runs), r = (int)(item % runs), last = first[r + 1] - 1;
            float *acc = qf + (size_t)chunk * d, *sc = acc + (size_t)chunk * d, *kt = sc + (size_t)chunk * stride;
            const float *kbuf = keys + (ptrdiff_t)token_row[last] * row_stride + (ptrdiff_t)g * head_stride;
            const float *vbuf = values + (ptrdiff_t)token_row[last] * row_stride + (ptrdiff_t)g * head_stride;
            const int32_t *own = slots + offsets[last];
            int n = offsets[last + 1] - offsets[last], padded = (n + CM_ATT_KEYS - 1) / CM_ATT_KEYS * CM_ATT_KEYS;
            /* the run's last token's keys (every token of the run reads the start of them), transposed */
            for (int s = 0; s < n; s++) {
                const float *k = kbuf + (ptrdiff_t)own[s] * d;
                for (int i = 0; i < d; i++)
                    kt[(ptrdiff_t)i * padded + s] = k[i];
            }
            for (int i = 0; i < d; i++)
                for (int s = n; s < padded; s++)
                    kt[(ptrdiff_t)i * padded + s] = 0.0f;
            for (int s = 0; s < B; s++)
                vrows[s] = base_v + ((ptrdiff_t)g * B + s) * d;
            for (int s = 0; s < n; s++)
                vrows[B + s] = vbuf + (ptrdiff_t)own[s] * d;
            for (int t = first[r]; t <= last; t++) {
                int mine = offsets[t + 1] - offsets[t], base = on_base[t] ? B : 0;
                const float *const *rows_t = vrows + (B - base); /* the base's rows when it attends to them */
                for (int h0 = 0; h0 < group; h0 += chunk) {
                    int J = group - h0 < chunk ? group - h0 : chunk;
                    const uint16_t *qt = q + ((ptrdiff_t)t * heads + (ptrdiff_t)g * group + h0) * d;
                    for (int i = 0; i < J * d; i++)
                        qf[i] = float_of_bf16(qt[i]);
#if CM_FW
                    if (simd) {
#if CM_ATT_BF16
                        if (base && kp)
                            scores_bf16(qt, J, d, kp + (ptrdiff_t)g * (d / 2) * Bp, Bp,
                                        Bp, scaling, sc, stride);
                        else
#endif
                        if (base)
                            scores(qf, J, d, base_kt + (ptrdiff_t)g * d * Bp, Bp, Bp, scaling, sc, stride);
                        scores(qf, J, d, kt, padded, (mine + CM_ATT_KEYS - 1) / CM_ATT_KEYS * CM_ATT_KEYS, scaling,
                               sc + base, stride);
                    }
#endif
                    if (!simd) {
                        if (base)
                            scores_plain(qf, J, d, base_kt + (ptrdiff_t)g * d * Bp, Bp, B, scaling, sc, stride);
                        scores_plain(qf, J, d, kt, padded, mine, scaling, sc + base, stride);
                    }
                    for (int j = 0; j < J; j++)
                        softmax(sc + (ptrdiff_t)j * stride, base + mine);
#if CM_FW
                    if (simd)
                        weighted_values(sc, J, stride, rows_t, base + mine, d, acc);
#endif
                    if (!simd)
                        values_plain(sc, J, stride, rows_t, base + mine, d, acc);
                    uint16_t *dst = out + ((ptrdiff_t)t * heads + (ptrdiff_t)g * group + h0) * d;
                    for (int i = 0; i < J * d; i++)
                        dst[i] = bf16_of(acc[i]);
                }
            }
        }
        free(qf);
        free(vrows);
    }
    free(kp);
    free(first);
    return failed ? -1 : 0;
}

/* cm_silu_mul_bf16(g, u, count, out, threads): the gated MLP's elementwise step, out = bfloat16(bfloat16(silu(g))
 * u) for count bfloat16 values (g, u, out contiguous), as torch's F.silu(g) * u rounds it: silu(x) = x / (1 +
 * exp(-x)) in float32, rounded to bfloat16, times u in float32, rounded again (to nearest even). exp by exp16
 * (Cephes' polynomial) where torch's vectorized silu uses SLEEF's: the same up to exp's last bit, so a value
 * lying on a bfloat16 rounding boundary may round the other way (not always the same bits; the same bits on 1.8
 * million random values). In torch the two operators took 0.7-1.4 ms for 200 rows of Qwen2.5-1.5B's 8,960 (two
 * Zen 4 cores; this pass 0.8, bound by the memory as they are), 20-38 ms of a batch step; in the step, 1,020
 * against 1,053 ms (four alternating rounds: one intermediate fewer written and read). AVX-512
 * only (returns -1 elsewhere: the caller keeps torch's). Threads split the values from 65,536. Returns 0, or -1
 * when count is negative. */
int cm_silu_mul_bf16(const uint16_t *g, const uint16_t *u, long count, uint16_t *out, int threads)
{
#if CM_VNNI
    if (count < 0)
        return -1;
    long blocks = count / 16;
    int team = count >= 65536 && threads > 1 ? threads : 1;
#pragma omp parallel for num_threads(team) schedule(static)
    for (long b = 0; b < blocks; b++) {
        __m512 x = load_bf16x16(g + 16 * b);
        __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        __m512 silu = _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        __m256i h = bf16_of16(silu);
        __m512 s = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
        _mm256_storeu_si256((__m256i *)(out + 16 * b), bf16_of16(_mm512_mul_ps(s, load_bf16x16(u + 16 * b))));
    }
    for (long i = 16 * blocks; i < count; i++) {
        float x = float_of_bf16(g[i]);
        float silu = rounded_bf16(x / (1.0f + __builtin_expf(-x)));
        out[i] = bf16_of(silu * float_of_bf16(u[i]));
    }
    return 0;
#else
    (void)g, (void)u, (void)count, (void)out, (void)threads;
    return -1;
#endif
}

/* cm_rms_norm_bf16(x, m, d, w, eps, out, threads): the root-mean-square norm (Zhang & Sennrich 2019) of m
 * bfloat16 rows of d entries, as llama.py's RMSNorm computes it: r = 1 / sqrt(mean(x^2) + eps) in float32, y =
 * bfloat16(x r), out = bfloat16(w y) for the bfloat16 weight w (d,). The same operations as torch's, except
 * the order of the float32 additions of the mean (16 lanes, then across them), so r may differ in its last bit
 * and a rounding of y with it. Rows are split between threads from 64 rows. Returns 0, or -1 when a count is
 * out of range. */
int cm_rms_norm_bf16(const uint16_t *x, int m, int d, const uint16_t *w, float eps, uint16_t *out, int threads)
{
    if (m < 0 || d < 1)
        return -1;
    int team = m >= 64 && threads > 1 ? threads : 1;
#pragma omp parallel for num_threads(team) schedule(static)
    for (int i = 0; i < m; i++) {
        const uint16_t *row = x + (ptrdiff_t)i * d;
        uint16_t *dst = out + (ptrdiff_t)i * d;
        float ss = 0.0f;
        int t = 0;
#if CM_VNNI
        __m512 acc = _mm512_setzero_ps();
        for (; t + 16 <= d; t += 16) {
            __m512 v = load_bf16x16(row + t);
            acc = _mm512_add_ps(acc, _mm512_mul_ps(v, v)); /* x.pow(2), then the sum: two roundings, as torch */
        }
        ss = _mm512_reduce_add_ps(acc);
#endif
        for (; t < d; t++) {
            float v = float_of_bf16(row[t]);
            ss += v * v;
        }
        float r = 1.0f / __builtin_sqrtf(ss / (float)d + eps);
        for (t = 0; t < d; t++)
            dst[t] = bf16_of(float_of_bf16(w[t]) * rounded_bf16(float_of_bf16(row[t]) * r));
    }
    return 0;
}
