/* Probe: what an AVX-512 version of src/softmax_icl/kernels/philox.h's normals would give on this CPU.
 *
 * philox.h draws Philox4x32-10 blocks and turns them into normals (Box-Muller) eight blocks per AVX2 vector, two
 * vectors interleaved; a quarter to two thirds of a paper-1 engine step is that (roofline.md). Below, the same
 * operations on sixteen lanes per AVX-512 vector (one vector, and two interleaved), held bit for bit against
 * philox.h's `lanes`, and each timed in one run on the same blocks:
 *
 *     cc -O3 -march=native -ffast-math -I src/softmax_icl/kernels benchmarks/philox_simd_probe.c -o /tmp/probe -lm
 *     /tmp/probe [values]        (default 2^22 values, 16 MB per output; 16384 keeps them in cache)
 *
 * Not part of the package: a measurement for the next change of philox.h (which re-keys every record).
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <immintrin.h>

#include "philox.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

/* ---- AVX-512 port: the same operations, sixteen lanes ---- */
static inline void round_512(__m512i a[4], __m512i m0, __m512i m1, __m512i k0, __m512i k1) {
    const __m512i pe0 = _mm512_mul_epu32(a[0], m0), po0 = _mm512_mul_epu32(_mm512_srli_epi64(a[0], 32), m0);
    const __m512i pe1 = _mm512_mul_epu32(a[2], m1), po1 = _mm512_mul_epu32(_mm512_srli_epi64(a[2], 32), m1);
    const __m512i hi0 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe0, 32), po0);
    const __m512i lo0 = _mm512_mask_blend_epi32(0xAAAA, pe0, _mm512_slli_epi64(po0, 32));
    const __m512i hi1 = _mm512_mask_blend_epi32(0xAAAA, _mm512_srli_epi64(pe1, 32), po1);
    const __m512i lo1 = _mm512_mask_blend_epi32(0xAAAA, pe1, _mm512_slli_epi64(po1, 32));
    a[0] = _mm512_ternarylogic_epi32(hi1, a[1], k0, 0x96);
    a[2] = _mm512_ternarylogic_epi32(hi0, a[3], k1, 0x96);
    a[1] = lo1;
    a[3] = lo0;
}
static inline void philox_512x2(key_t2 key, __m512i x[4], __m512i y[4]) {
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
    __m512i k0 = _mm512_set1_epi32((int)key.k0), k1 = _mm512_set1_epi32((int)key.k1);
    const __m512i w0 = _mm512_set1_epi32((int)PHILOX_W0), w1 = _mm512_set1_epi32((int)PHILOX_W1);
    for (int r = 0; r < 10; r++) {
        round_512(x, m0, m1, k0, k1);
        round_512(y, m0, m1, k0, k1);
        k0 = _mm512_add_epi32(k0, w0);
        k1 = _mm512_add_epi32(k1, w1);
    }
}
static inline void philox_512(key_t2 key, __m512i x[4]) {
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
    __m512i k0 = _mm512_set1_epi32((int)key.k0), k1 = _mm512_set1_epi32((int)key.k1);
    const __m512i w0 = _mm512_set1_epi32((int)PHILOX_W0), w1 = _mm512_set1_epi32((int)PHILOX_W1);
    for (int r = 0; r < 10; r++) {
        round_512(x, m0, m1, k0, k1);
        k0 = _mm512_add_epi32(k0, w0);
        k1 = _mm512_add_epi32(k1, w1);
    }
}
#define V16(x) _mm512_set1_ps(x)
static inline __m512 uniform_512(__m512i w) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), V16(5.9604644775390625e-8f));
}
static inline __m512 log_unit_512(__m512 v) {
    const __m512i b = _mm512_castps_si512(v);
    __m512 e = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(b, 23), _mm512_set1_epi32(126)));
    __m512 m = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(b, _mm512_set1_epi32(0x007fffff)),
                                                   _mm512_set1_epi32(0x3f000000)));
    const __mmask16 small = _mm512_cmp_ps_mask(m, V16(0.707106781186547524f), _CMP_LT_OQ);
    e = _mm512_mask_sub_ps(e, small, e, V16(1.f));
    m = _mm512_add_ps(_mm512_sub_ps(m, V16(1.f)), _mm512_maskz_mov_ps(small, m));
    const __m512 z = _mm512_mul_ps(m, m);
    __m512 y = V16(7.0376836292e-2f);
    y = _mm512_fmadd_ps(y, m, V16(-1.1514610310e-1f));
    y = _mm512_fmadd_ps(y, m, V16(1.1676998740e-1f));
    y = _mm512_fmadd_ps(y, m, V16(-1.2420140846e-1f));
    y = _mm512_fmadd_ps(y, m, V16(1.4249322787e-1f));
    y = _mm512_fmadd_ps(y, m, V16(-1.6668057665e-1f));
    y = _mm512_fmadd_ps(y, m, V16(2.0000714765e-1f));
    y = _mm512_fmadd_ps(y, m, V16(-2.4999993993e-1f));
    y = _mm512_fmadd_ps(y, m, V16(3.3333331174e-1f));
    y = _mm512_mul_ps(_mm512_mul_ps(y, m), z);
    y = _mm512_fmadd_ps(e, V16(-2.12194440e-4f), y);
    y = _mm512_fmadd_ps(z, V16(-0.5f), y);
    return _mm512_fmadd_ps(e, V16(0.693359375f), _mm512_add_ps(m, y));
}
static inline void sincos_turn_512(__m512 u, __m512 *s, __m512 *c) {
    const __m512 t = _mm512_mul_ps(u, V16(4.f));
    const __m512 q = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_mul_ps(_mm512_sub_ps(t, q), V16(1.57079632679489662f));
    const __m512 z = _mm512_mul_ps(r, r);
    const __m512 sr = _mm512_fmadd_ps(_mm512_mul_ps(r, z), _mm512_fmadd_ps(_mm512_fmadd_ps(z, V16(-1.9515295891e-4f),
                                      V16(8.3321608736e-3f)), z, V16(-1.6666654611e-1f)), r);
    const __m512 cr = _mm512_fmadd_ps(_mm512_mul_ps(z, z), _mm512_fmadd_ps(_mm512_fmadd_ps(z,
                                      V16(2.443315711809948e-5f), V16(-1.388731625493765e-3f)), z,
                                      V16(4.166664568298827e-2f)), _mm512_fmadd_ps(z, V16(-0.5f), V16(1.f)));
    const __m512i k = _mm512_cvtps_epi32(q);
    const __mmask16 swap = _mm512_test_epi32_mask(k, _mm512_set1_epi32(1));
    const __m512 cs = _mm512_mask_blend_ps(swap, cr, sr), sn = _mm512_mask_blend_ps(swap, sr, cr);
    const __m512i two = _mm512_set1_epi32(2);
    const __m512i nc = _mm512_slli_epi32(_mm512_and_si512(_mm512_add_epi32(k, _mm512_set1_epi32(1)), two), 30);
    const __m512i ns = _mm512_slli_epi32(_mm512_and_si512(k, two), 30);
    *c = _mm512_xor_ps(cs, _mm512_castsi512_ps(nc));
    *s = _mm512_xor_ps(sn, _mm512_castsi512_ps(ns));
}
static inline void box_muller_512(__m512i a, __m512i b, __m512 *z0, __m512 *z1) {
    const __m512i odd = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(a, 9), 1), _mm512_set1_epi32(1));
    const __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(odd), V16(5.9604644775390625e-8f));
    const __m512 r = _mm512_sqrt_ps(_mm512_mul_ps(V16(-2.f), log_unit_512(v)));
    __m512 s, c;
    sincos_turn_512(uniform_512(b), &s, &c);
    *z0 = _mm512_mul_ps(r, c);
    *z1 = _mm512_mul_ps(r, s);
}
/* 16 blocks' 4 values -> out[4 l + q]: transpose 4 x 16 */
static inline void store_blocks_512(const __m512 v[4], float *out) {
    const __m512i i01 = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i i01h = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    const __m512 a = _mm512_permutex2var_ps(v[0], i01, v[1]), b = _mm512_permutex2var_ps(v[0], i01h, v[1]);
    const __m512 c = _mm512_permutex2var_ps(v[2], i01, v[3]), d = _mm512_permutex2var_ps(v[2], i01h, v[3]);
    /* a = (v0_0 v1_0 v0_1 v1_1 ...), c = (v2_0 v3_0 ...): interleave pairs (64-bit) */
    const __m512i p0 = _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), p1 = _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15);
    _mm512_storeu_ps(out, _mm512_castpd_ps(_mm512_permutex2var_pd(_mm512_castps_pd(a), p0, _mm512_castps_pd(c))));
    _mm512_storeu_ps(out + 16, _mm512_castpd_ps(_mm512_permutex2var_pd(_mm512_castps_pd(a), p1, _mm512_castps_pd(c))));
    _mm512_storeu_ps(out + 32, _mm512_castpd_ps(_mm512_permutex2var_pd(_mm512_castps_pd(b), p0, _mm512_castps_pd(d))));
    _mm512_storeu_ps(out + 48, _mm512_castpd_ps(_mm512_permutex2var_pd(_mm512_castps_pd(b), p1, _mm512_castps_pd(d))));
}
static inline void lanes_512(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag, float *out) {
    __m512i x[4];
    x[0] = _mm512_add_epi32(_mm512_set1_epi32((int)j0), _mm512_setr_epi32(0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15));
    x[1] = _mm512_set1_epi32((int)task); x[2] = _mm512_set1_epi32((int)step); x[3] = _mm512_set1_epi32((int)tag);
    philox_512(key, x);
    __m512 z[4];
    box_muller_512(x[0], x[1], &z[0], &z[1]);
    box_muller_512(x[2], x[3], &z[2], &z[3]);
    store_blocks_512(z, out);
}

static inline void lanes_512x2(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag, float *out) {
    __m512i x[4], y[4];
    x[0] = _mm512_add_epi32(_mm512_set1_epi32((int)j0), _mm512_setr_epi32(0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15));
    y[0] = _mm512_add_epi32(x[0], _mm512_set1_epi32(16));
    x[1] = y[1] = _mm512_set1_epi32((int)task);
    x[2] = y[2] = _mm512_set1_epi32((int)step);
    x[3] = y[3] = _mm512_set1_epi32((int)tag);
    philox_512x2(key, x, y);
    __m512 z[4];
    box_muller_512(x[0], x[1], &z[0], &z[1]);
    box_muller_512(x[2], x[3], &z[2], &z[3]);
    store_blocks_512(z, out);
    box_muller_512(y[0], y[1], &z[0], &z[1]);
    box_muller_512(y[2], y[3], &z[2], &z[3]);
    store_blocks_512(z, out + 64);
}
int main(int argc, char **argv) {
    const int64_t N = argc > 1 ? atol(argv[1]) : (1 << 22);        /* values, a multiple of 128 */
    float *a = aligned_alloc(64, N * 4), *b = aligned_alloc(64, N * 4);
    key_t2 key = {0x12345678u, 0x9abcdef0u};
    /* equality */
    for (int64_t f = 0; f < N; f += 64) lanes(key, (uint32_t)(f / 4), 7, 3, 11, 1, 16, a + f);
    for (int64_t f = 0; f < N; f += 64) lanes_512(key, (uint32_t)(f / 4), 7, 3, 11, b + f);
    int64_t diff = 0; for (int64_t i = 0; i < N; i++) diff += memcmp(a + i, b + i, 4) != 0;
    for (int64_t f = 0; f < N; f += 128) lanes_512x2(key, (uint32_t)(f / 4), 7, 3, 11, b + f);
    int64_t diff2 = 0; for (int64_t i = 0; i < N; i++) diff2 += memcmp(a + i, b + i, 4) != 0;
    printf("values whose bits differ from philox.h's: AVX-512 %ld, AVX-512 x2 %ld, of %ld\n", (long)diff,
           (long)diff2, (long)N);
    /* each variant timed over the same blocks, interleaved over repetitions; the best of each is reported */
    const int reps = (int)((1 << 24) / N * 10 / 4) + 1;
    double best[3] = {1e30, 1e30, 1e30};
    for (int rep = 0; rep < 7; rep++) {
        for (int v = 0; v < 3; v++) {
            const double t0 = now();
            for (int it = 0; it < reps; it++) {
                if (v == 0) for (int64_t f = 0; f < N; f += 64) lanes(key, (uint32_t)(f / 4), it, 3, 11, 1, 16, a + f);
                if (v == 1) for (int64_t f = 0; f < N; f += 64) lanes_512(key, (uint32_t)(f / 4), it, 3, 11, b + f);
                if (v == 2) for (int64_t f = 0; f < N; f += 128) lanes_512x2(key, (uint32_t)(f / 4), it, 3, 11, b + f);
            }
            const double t = (now() - t0) / ((double)reps * N / 4);
            if (t < best[v]) best[v] = t;
        }
    }
    printf("ns per block of four normals (best of 7): AVX2 (philox.h) %.2f, AVX-512 %.2f (%.2fx), "
           "AVX-512 two vectors interleaved %.2f (%.2fx)\n", 1e9 * best[0], 1e9 * best[1], best[0] / best[1],
           1e9 * best[2], best[0] / best[2]);
    free(a);
    free(b);
    return diff || diff2;
}
