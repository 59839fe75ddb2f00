/* The counter scheme of softmax_icl.streams in C (see that module's docstring for the layout and the convention),
 * the one generator of both papers' engines (regression.c, classification.c):
 *
 *   value f of the sequence (key, tag, step, task) is word f % 4 of Philox4x32-10(key, (f / 4, task, step, tag));
 *   uniform  u = (w >> 8) * 2^-24;
 *   normal   Box-Muller on the words (0, 1) and (2, 3) of a block: r = sqrt(-2 ln v_0), z_0 = r cos 2 pi u_1,
 *            z_1 = r sin 2 pi u_1, with v = (2 (w >> 9) + 1) * 2^-24 in (0, 1) (so r > 0), the angle reduced in
 *            turns (sincos_turn: the quadrant round(4 u), then cos and sin of at most pi/4).
 *
 * stream_fill draws values as normals or uniforms, stream_words as words. Blocks are computed in vector registers
 * where the CPU has them: with AVX-512, 32 blocks at a time in two interleaved vectors of sixteen (the ragged ends of
 * a sequence sixteen or eight at a time); with AVX2, eight blocks per vector and two vectors interleaved (Philox's
 * 32 x 32 -> 64-bit products as even and odd lanes); elsewhere LANES at a time in plain loops over the lanes. Every
 * width runs the same operations, so a value has the same bits whichever width draws it (a task drawn alone or in a
 * sweep, at any offset). The integers are the same bits as the PyTorch implementation's; the floats use the
 * polynomials below (Cephes' single-precision ones, written branch-free), equal to PyTorch's to a few units in the
 * last place.
 */
#ifndef SOFTMAX_ICL_PHILOX_H
#define SOFTMAX_ICL_PHILOX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define LANES 16

typedef struct { uint32_t k0, k1; } key_t2;

static inline float bits_to_float(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static inline uint32_t float_to_bits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* Philox4x32-10 of the LANES counters (x0[l], x1[l], x2[l], x3[l]) under key, in place: the four words of lane l. */
static inline void philox_rounds(key_t2 key, uint32_t *restrict x0, uint32_t *restrict x1, uint32_t *restrict x2,
                                 uint32_t *restrict x3) {
    uint32_t k0 = key.k0, k1 = key.k1;
    for (int r = 0; r < 10; r++) {
        for (int l = 0; l < LANES; l++) {
            const uint64_t p0 = (uint64_t)x0[l] * PHILOX_M0, p1 = (uint64_t)x2[l] * PHILOX_M1;
            const uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1[l] ^ k0, y2 = (uint32_t)(p0 >> 32) ^ x3[l] ^ k1;
            x1[l] = (uint32_t)p1;
            x3[l] = (uint32_t)p0;
            x0[l] = y0;
            x2[l] = y2;
        }
        k0 += PHILOX_W0;
        k1 += PHILOX_W1;
    }
}

/* Philox4x32-10 of the LANES counters (c0[l], c1, c2, c3[l]) under key -> w[word][lane]. */
static inline void philox_lanes(key_t2 key, const uint32_t *c0, uint32_t c1, uint32_t c2, const uint32_t *c3,
                                uint32_t w[4][LANES]) {
    for (int l = 0; l < LANES; l++) { w[0][l] = c0[l]; w[1][l] = c1; w[2][l] = c2; w[3][l] = c3[l]; }
    philox_rounds(key, w[0], w[1], w[2], w[3]);
}

static inline float uniform_of(uint32_t w) { return (float)(int32_t)(w >> 8) * 5.9604644775390625e-8f; }

/* ln(v) for v in (0, 1] (normal floats): v = m 2^e with m in [sqrt(1/2), sqrt(2)), Cephes logf's polynomial. */
static inline float log_unit(float v) {
    const uint32_t b = float_to_bits(v);
    int32_t e = (int32_t)((b >> 23) & 0xff) - 126;
    float m = bits_to_float((b & 0x007fffffu) | 0x3f000000u);           /* [0.5, 1) */
    const int small = m < 0.707106781186547524f;
    e -= small;
    m = small ? m + m - 1.f : m - 1.f;
    const float z = m * m;
    float y = 7.0376836292e-2f;
    y = y * m - 1.1514610310e-1f;
    y = y * m + 1.1676998740e-1f;
    y = y * m - 1.2420140846e-1f;
    y = y * m + 1.4249322787e-1f;
    y = y * m - 1.6668057665e-1f;
    y = y * m + 2.0000714765e-1f;
    y = y * m - 2.4999993993e-1f;
    y = y * m + 3.3333331174e-1f;
    y = y * m * z;
    const float fe = (float)e;
    y += -2.12194440e-4f * fe;
    y += -0.5f * z;
    return m + y + 0.693359375f * fe;
}

/* sin and cos of r in [-pi/4, pi/4] (Cephes sinf / cosf polynomials). */
static inline float sin_small(float r) {
    const float z = r * r;
    return r + r * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f));
}
static inline float cos_small(float r) {
    const float z = r * r;
    return 1.f - 0.5f * z + z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f));
}

/* cos and sin of 2 pi u, u in [0, 1): quadrant q = round(4 u), r = (4 u - q) pi / 2 in [-pi/4, pi/4] (exact but for
 * the last product); the quadrant swaps the two and sets their signs (branch-free, so the loop vectorises). */
static inline void sincos_turn(float u, float *s, float *c) {
    const float t = 4.f * u, q = __builtin_rintf(t);
    const float r = (t - q) * 1.57079632679489662f;
    const float sr = sin_small(r), cr = cos_small(r);
    const uint32_t k = (uint32_t)(int32_t)q;
    const int swap = (int)(k & 1u);
    const float cs = swap ? sr : cr, sn = swap ? cr : sr;
    *c = bits_to_float(float_to_bits(cs) ^ (((k + 1u) & 2u) << 30));
    *s = bits_to_float(float_to_bits(sn) ^ ((k & 2u) << 30));
}

/* cos(x) for |x| < 8192: x = j pi/2 + r by a three-part Cody-Waite reduction, then the quadrant (as above). */
static inline float cos_any(float x) {
    const float j = __builtin_rintf(x * 0.636619772367581343f);
    const float r = ((x - j * 1.5703125f) - j * 4.837512969970703125e-4f) - j * 7.549789954891882e-8f;
    const uint32_t k = (uint32_t)(int32_t)j;
    const float v = (k & 1u) ? sin_small(r) : cos_small(r);
    return bits_to_float(float_to_bits(v) ^ (((k + 1u) & 2u) << 30));
}

/* exp(x) for x <= 0 (Cephes' single-precision polynomial, relative error about 1e-7); arguments below -87 give
 * exp(-87) ~ 1.6e-38 instead of underflowing. */
static inline float exp_nonpositive(float x) {
    x = x < -87.f ? -87.f : x;
    const float k = __builtin_rintf(x * 1.44269504088896341f);
    const float r = x - k * 0.693359375f + k * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.f;
    return p * bits_to_float((uint32_t)((int32_t)k + 127) << 23);
}

/* Box-Muller on word pairs (a, b): z0 = r cos theta, z1 = r sin theta, r = sqrt(-2 ln v_a), theta = 2 pi u_b. */
static inline void box_muller(const uint32_t *a, const uint32_t *b, float *z0, float *z1) {
    for (int l = 0; l < LANES; l++) {
        const float v = (float)(int32_t)(((a[l] >> 9) << 1) | 1u) * 5.9604644775390625e-8f;    /* odd / 2^24 */
        const float r = sqrtf(-2.f * log_unit(v));
        float s, c;
        sincos_turn(uniform_of(b[l]), &s, &c);
        z0[l] = r * c;
        z1[l] = r * s;
    }
}

#ifdef __AVX2__
#include <immintrin.h>
/* The same computations on eight blocks at a time in AVX2 registers (the compiler's own vectorisation of the loops
 * above loses most of the speed to memory round trips between the generator and Box-Muller). */
/* One Philox round on eight counters: the two 32 x 32 -> 64-bit products as even and odd lanes, then their high
 * and low words blended back into eight lanes. */
static inline void round_avx2(__m256i a[4], __m256i m0, __m256i m1, __m256i k0, __m256i k1) {
    const __m256i pe0 = _mm256_mul_epu32(a[0], m0), po0 = _mm256_mul_epu32(_mm256_srli_epi64(a[0], 32), m0);
    const __m256i pe1 = _mm256_mul_epu32(a[2], m1), po1 = _mm256_mul_epu32(_mm256_srli_epi64(a[2], 32), m1);
    const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pe0, 32), po0, 0xAA);
    const __m256i lo0 = _mm256_blend_epi32(pe0, _mm256_slli_epi64(po0, 32), 0xAA);
    const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pe1, 32), po1, 0xAA);
    const __m256i lo1 = _mm256_blend_epi32(pe1, _mm256_slli_epi64(po1, 32), 0xAA);
    a[0] = _mm256_xor_si256(_mm256_xor_si256(hi1, a[1]), k0);
    a[2] = _mm256_xor_si256(_mm256_xor_si256(hi0, a[3]), k1);
    a[1] = lo1;
    a[3] = lo0;
}

/* Philox4x32-10 on ``g`` (1 or 2) vectors of eight counters at once (two interleave their dependency chains). */
static inline void philox_avx2(key_t2 key, __m256i x[4], __m256i y[4], const int g) {
    const __m256i m0 = _mm256_set1_epi64x(PHILOX_M0), m1 = _mm256_set1_epi64x(PHILOX_M1);
    __m256i k0 = _mm256_set1_epi32((int)key.k0), k1 = _mm256_set1_epi32((int)key.k1);
    const __m256i w0 = _mm256_set1_epi32((int)PHILOX_W0), w1 = _mm256_set1_epi32((int)PHILOX_W1);
    for (int r = 0; r < 10; r++) {
        round_avx2(x, m0, m1, k0, k1);
        if (g == 2) round_avx2(y, m0, m1, k0, k1);
        k0 = _mm256_add_epi32(k0, w0);
        k1 = _mm256_add_epi32(k1, w1);
    }
}

/* Eight counters (j0 + l, c1, c2, c3): consecutive blocks of one sequence. */
static inline void consecutive_avx2(uint32_t j0, uint32_t c1, uint32_t c2, uint32_t c3, __m256i x[4]) {
    x[0] = _mm256_add_epi32(_mm256_set1_epi32((int)j0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    x[1] = _mm256_set1_epi32((int)c1);
    x[2] = _mm256_set1_epi32((int)c2);
    x[3] = _mm256_set1_epi32((int)c3);
}

#define V8(x) _mm256_set1_ps(x)
static inline __m256 uniform_avx2(__m256i w) {
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_srli_epi32(w, 8)), V8(5.9604644775390625e-8f));
}

static inline __m256 log_unit_avx2(__m256 v) {
    const __m256i b = _mm256_castps_si256(v);
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(b, 23), _mm256_set1_epi32(126)));
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b, _mm256_set1_epi32(0x007fffff)),
                                                   _mm256_set1_epi32(0x3f000000)));
    const __m256 small = _mm256_cmp_ps(m, V8(0.707106781186547524f), _CMP_LT_OQ);
    e = _mm256_sub_ps(e, _mm256_and_ps(small, V8(1.f)));
    m = _mm256_add_ps(_mm256_sub_ps(m, V8(1.f)), _mm256_and_ps(small, m));
    const __m256 z = _mm256_mul_ps(m, m);
    __m256 y = V8(7.0376836292e-2f);
    y = _mm256_fmadd_ps(y, m, V8(-1.1514610310e-1f));
    y = _mm256_fmadd_ps(y, m, V8(1.1676998740e-1f));
    y = _mm256_fmadd_ps(y, m, V8(-1.2420140846e-1f));
    y = _mm256_fmadd_ps(y, m, V8(1.4249322787e-1f));
    y = _mm256_fmadd_ps(y, m, V8(-1.6668057665e-1f));
    y = _mm256_fmadd_ps(y, m, V8(2.0000714765e-1f));
    y = _mm256_fmadd_ps(y, m, V8(-2.4999993993e-1f));
    y = _mm256_fmadd_ps(y, m, V8(3.3333331174e-1f));
    y = _mm256_mul_ps(_mm256_mul_ps(y, m), z);
    y = _mm256_fmadd_ps(e, V8(-2.12194440e-4f), y);
    y = _mm256_fmadd_ps(z, V8(-0.5f), y);
    return _mm256_fmadd_ps(e, V8(0.693359375f), _mm256_add_ps(m, y));
}

static inline void sincos_turn_avx2(__m256 u, __m256 *s, __m256 *c) {
    const __m256 t = _mm256_mul_ps(u, V8(4.f));
    const __m256 q = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_mul_ps(_mm256_sub_ps(t, q), V8(1.57079632679489662f));
    const __m256 z = _mm256_mul_ps(r, r);
    const __m256 sr = _mm256_fmadd_ps(_mm256_mul_ps(r, z), _mm256_fmadd_ps(_mm256_fmadd_ps(z, V8(-1.9515295891e-4f),
                                      V8(8.3321608736e-3f)), z, V8(-1.6666654611e-1f)), r);
    const __m256 cr = _mm256_fmadd_ps(_mm256_mul_ps(z, z), _mm256_fmadd_ps(_mm256_fmadd_ps(z,
                                      V8(2.443315711809948e-5f), V8(-1.388731625493765e-3f)), z,
                                      V8(4.166664568298827e-2f)), _mm256_fmadd_ps(z, V8(-0.5f), V8(1.f)));
    const __m256i k = _mm256_cvtps_epi32(q);
    const __m256 swap = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(k, _mm256_set1_epi32(1)),
                                                               _mm256_set1_epi32(1)));
    const __m256 cs = _mm256_blendv_ps(cr, sr, swap), sn = _mm256_blendv_ps(sr, cr, swap);
    const __m256i two = _mm256_set1_epi32(2);
    const __m256i nc = _mm256_slli_epi32(_mm256_and_si256(_mm256_add_epi32(k, _mm256_set1_epi32(1)), two), 30);
    const __m256i ns = _mm256_slli_epi32(_mm256_and_si256(k, two), 30);
    *c = _mm256_xor_ps(cs, _mm256_castsi256_ps(nc));
    *s = _mm256_xor_ps(sn, _mm256_castsi256_ps(ns));
}

static inline void box_muller_avx2(__m256i a, __m256i b, __m256 *z0, __m256 *z1) {
    const __m256i odd = _mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(a, 9), 1), _mm256_set1_epi32(1));
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(odd), V8(5.9604644775390625e-8f));
    const __m256 r = _mm256_sqrt_ps(_mm256_mul_ps(V8(-2.f), log_unit_avx2(v)));
    __m256 s, c;
    sincos_turn_avx2(uniform_avx2(b), &s, &c);
    *z0 = _mm256_mul_ps(r, c);
    *z1 = _mm256_mul_ps(r, s);
}

/* Four vectors of eight lanes (value q of block l in lane l of v[q]) stored as blocks: out[4 l + q]. */
static inline void store_blocks_avx2(const __m256 v[4], float *out) {
    const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
    const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    _mm256_storeu_ps(out, _mm256_permute2f128_ps(u0, u1, 0x20));
    _mm256_storeu_ps(out + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
    _mm256_storeu_ps(out + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
    _mm256_storeu_ps(out + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
}

/* Eight blocks' words x as normals and / or uniforms (NULL: not wanted): block l's four values at out[4 l ..]. */
static inline void convert_avx2(const __m256i x[4], float *normals, float *uniforms) {
    __m256 z[4];
    if (normals) {
        box_muller_avx2(x[0], x[1], &z[0], &z[1]);
        box_muller_avx2(x[2], x[3], &z[2], &z[3]);
        store_blocks_avx2(z, normals);
    }
    if (uniforms) {
        for (int q = 0; q < 4; q++) z[q] = uniform_avx2(x[q]);
        store_blocks_avx2(z, uniforms);
    }
}

/* LANES consecutive blocks j0 + l of the sequence (key, tag, step, task) as normals (normal = 1) or uniforms; only
 * the first eight when ``wanted`` <= 8 blocks are (out[32 ..] is then left as it was). */
static inline void lanes_avx2(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag, const int normal,
                              int64_t wanted, float out[4 * LANES]) {
    __m256i x[4], y[4];
    consecutive_avx2(j0, task, step, tag, x);
    if (wanted <= 8) {
        philox_avx2(key, x, NULL, 1);
        convert_avx2(x, normal ? out : NULL, normal ? NULL : out);
        return;
    }
    consecutive_avx2(j0 + 8, task, step, tag, y);
    philox_avx2(key, x, y, 2);
    convert_avx2(x, normal ? out : NULL, normal ? NULL : out);
    convert_avx2(y, normal ? out + 32 : NULL, normal ? NULL : out + 32);
}

/* The blocks of counters (c0[l], task, step, c3[l]), l < 8 m, as normals and uniforms: block l's four values at
 * normals[4 l ..] and uniforms[4 l ..]. */
static inline void blocks_of(key_t2 key, const uint32_t *c0, uint32_t task, uint32_t step, const uint32_t *c3, int m,
                             float *normals, float *uniforms) {
    for (int h = 0; h < 8 * m; h += 8) {
        __m256i x[4] = {_mm256_loadu_si256((const __m256i *)(c0 + h)), _mm256_set1_epi32((int)task),
                        _mm256_set1_epi32((int)step), _mm256_loadu_si256((const __m256i *)(c3 + h))};
        philox_avx2(key, x, NULL, 1);
        convert_avx2(x, normals + 4 * h, uniforms + 4 * h);
    }
}
#ifdef __AVX512F__
/* The same computations on sixteen blocks per AVX-512 vector, two vectors interleaved (WIDE_BLOCKS blocks at a time):
 * the same operations on wider registers, so the same bits as the AVX2 code above (tests/test_kernels.py holds them
 * against it); 1.49x the AVX2 code's blocks per second on an AVX-512 Xeon (measured with this code as a
 * stand-alone probe). */
#define WIDE_BLOCKS 32
/* One Philox round on sixteen counters. The products' high and low words are put back in place by merge-masked
 * shuffles (one shuffle port) instead of shifts and blends (the shifts share the multiplier's port): 12 operations a
 * round instead of 16: 1.26x the uniform blocks per second and 1.29x the normal ones in a stand-alone probe;
 * the same bits. */
static inline void round_512(__m512i a[4], __m512i m0, __m512i m1, __m512i k0, __m512i k1) {
    const __m512i pe0 = _mm512_mul_epu32(a[0], m0), po0 = _mm512_mul_epu32(_mm512_shuffle_epi32(a[0], 0xF5), m0);
    const __m512i pe1 = _mm512_mul_epu32(a[2], m1), po1 = _mm512_mul_epu32(_mm512_shuffle_epi32(a[2], 0xF5), m1);
    const __m512i hi0 = _mm512_mask_shuffle_epi32(po0, 0x5555, pe0, 0xF5);
    const __m512i lo0 = _mm512_mask_shuffle_epi32(pe0, 0xAAAA, po0, 0xA0);
    const __m512i hi1 = _mm512_mask_shuffle_epi32(po1, 0x5555, pe1, 0xF5);
    const __m512i lo1 = _mm512_mask_shuffle_epi32(pe1, 0xAAAA, po1, 0xA0);
    a[0] = _mm512_ternarylogic_epi32(hi1, a[1], k0, 0x96);
    a[2] = _mm512_ternarylogic_epi32(hi0, a[3], k1, 0x96);
    a[1] = lo1;
    a[3] = lo0;
}
/* Philox4x32-10 on ``g`` (1 or 2) vectors of sixteen counters (two interleave their dependency chains). */
static inline void philox_512(key_t2 key, __m512i x[4], __m512i y[4], const int g) {
    const __m512i m0 = _mm512_set1_epi64(PHILOX_M0), m1 = _mm512_set1_epi64(PHILOX_M1);
    __m512i k0 = _mm512_set1_epi32((int)key.k0), k1 = _mm512_set1_epi32((int)key.k1);
    const __m512i w0 = _mm512_set1_epi32((int)PHILOX_W0), w1 = _mm512_set1_epi32((int)PHILOX_W1);
    for (int r = 0; r < 10; r++) {
        round_512(x, m0, m1, k0, k1);
        if (g == 2) round_512(y, m0, m1, k0, k1);
        k0 = _mm512_add_epi32(k0, w0);
        k1 = _mm512_add_epi32(k1, w1);
    }
}
#define V16(x) _mm512_set1_ps(x)
static inline __m512 uniform_512(__m512i w) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(w, 8)), V16(5.9604644775390625e-8f));
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
/* Box-Muller on ``il`` independent vector pairs (a[j], b[j]) -> (z0[j], z1[j]), each step of the computation taken
 * for all of them before the next: their dependency chains (the logarithm's nine FMAs, the sine's and cosine's) are
 * interleaved in the instruction stream rather than left to the out-of-order window, which filled with one pair's
 * waiting operations (a stand-alone probe: 0.92x the time a normal with four pairs). The same operations in every
 * lane: the same bits. */
static inline __attribute__((always_inline)) void box_muller_512x(const __m512i *a, const __m512i *b, __m512 *z0,
                                                                  __m512 *z1, const int il) {
    __m512 e[4], m[4], z[4], y[4], r[4], s[4], c[4];
    for (int j = 0; j < il; j++) {
        const __m512i odd = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(a[j], 9), 1), _mm512_set1_epi32(1));
        const __m512i bb = _mm512_castps_si512(_mm512_mul_ps(_mm512_cvtepi32_ps(odd), V16(5.9604644775390625e-8f)));
        e[j] = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(bb, 23), _mm512_set1_epi32(126)));
        m[j] = _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(bb, _mm512_set1_epi32(0x007fffff)),
                                                   _mm512_set1_epi32(0x3f000000)));
        const __mmask16 small = _mm512_cmp_ps_mask(m[j], V16(0.707106781186547524f), _CMP_LT_OQ);
        e[j] = _mm512_mask_sub_ps(e[j], small, e[j], V16(1.f));
        m[j] = _mm512_add_ps(_mm512_sub_ps(m[j], V16(1.f)), _mm512_maskz_mov_ps(small, m[j]));
        z[j] = _mm512_mul_ps(m[j], m[j]);
        y[j] = V16(7.0376836292e-2f);
    }
    static const float LOG_POLY[8] = {-1.1514610310e-1f, 1.1676998740e-1f, -1.2420140846e-1f, 1.4249322787e-1f,
                                      -1.6668057665e-1f, 2.0000714765e-1f, -2.4999993993e-1f, 3.3333331174e-1f};
    for (int t = 0; t < 8; t++)
        for (int j = 0; j < il; j++) y[j] = _mm512_fmadd_ps(y[j], m[j], V16(LOG_POLY[t]));
    for (int j = 0; j < il; j++) {
        y[j] = _mm512_mul_ps(_mm512_mul_ps(y[j], m[j]), z[j]);
        y[j] = _mm512_fmadd_ps(e[j], V16(-2.12194440e-4f), y[j]);
        y[j] = _mm512_fmadd_ps(z[j], V16(-0.5f), y[j]);
        const __m512 lg = _mm512_fmadd_ps(e[j], V16(0.693359375f), _mm512_add_ps(m[j], y[j]));
        r[j] = _mm512_sqrt_ps(_mm512_mul_ps(V16(-2.f), lg));
    }
    for (int j = 0; j < il; j++) sincos_turn_512(uniform_512(b[j]), &s[j], &c[j]);
    for (int j = 0; j < il; j++) {
        z0[j] = _mm512_mul_ps(r[j], c[j]);
        z1[j] = _mm512_mul_ps(r[j], s[j]);
    }
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
static inline void uniforms_512(const __m512i x[4], float *out) {
    __m512 z[4];
    for (int q = 0; q < 4; q++) z[q] = uniform_512(x[q]);
    store_blocks_512(z, out);
}

/* Sixteen counters (j0 + l, c1, c2, c3): consecutive blocks of one sequence. */
static inline void consecutive_512(uint32_t j0, uint32_t c1, uint32_t c2, uint32_t c3, __m512i x[4]) {
    x[0] = _mm512_add_epi32(_mm512_set1_epi32((int)j0),
                            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    x[1] = _mm512_set1_epi32((int)c1);
    x[2] = _mm512_set1_epi32((int)c2);
    x[3] = _mm512_set1_epi32((int)c3);
}

/* Sixteen blocks' words as normals (normal = 1) or uniforms: block l's four values at out[4 l ..]. */
static inline void convert_512(const __m512i x[4], const int normal, float *out) {
    if (normal) {
        const __m512i a[2] = {x[0], x[2]}, b[2] = {x[1], x[3]};
        __m512 z0[2], z1[2];
        box_muller_512x(a, b, z0, z1, 2);
        const __m512 z[4] = {z0[0], z1[0], z0[1], z1[1]};
        store_blocks_512(z, out);
    } else {
        uniforms_512(x, out);
    }
}

/* WIDE_BLOCKS consecutive blocks j0 + l of the sequence (key, tag, step, task) as normals (normal = 1) or uniforms:
 * block l's four values at out[4 l ..]. */
static inline void lanes_wide(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag, const int normal,
                              float out[4 * WIDE_BLOCKS]) {
    __m512i x[4], y[4];
    consecutive_512(j0, task, step, tag, x);
    consecutive_512(j0 + 16, task, step, tag, y);
    philox_512(key, x, y, 2);
    if (!normal) {
        uniforms_512(x, out);
        uniforms_512(y, out + 64);
        return;
    }
    const __m512i a[4] = {x[0], x[2], y[0], y[2]}, b[4] = {x[1], x[3], y[1], y[3]};
    __m512 z0[4], z1[4];
    box_muller_512x(a, b, z0, z1, 4);                  /* four pairs' chains interleaved */
    const __m512 zx[4] = {z0[0], z1[0], z0[1], z1[1]}, zy[4] = {z0[2], z1[2], z0[3], z1[3]};
    store_blocks_512(zx, out);
    store_blocks_512(zy, out + 64);
}

/* LANES (16) consecutive blocks as lanes_avx2, in one 512-bit vector (where fewer than a wide group are wanted:
 * the ragged ends of fill); the first eight only (in an AVX2 vector) when ``wanted`` <= 8. */
static inline void lanes(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag, const int normal,
                         int64_t wanted, float out[4 * LANES]) {
    if (wanted <= 8) {
        lanes_avx2(key, j0, task, step, tag, normal, wanted, out);
        return;
    }
    __m512i x[4];
    consecutive_512(j0, task, step, tag, x);
    philox_512(key, x, NULL, 1);
    convert_512(x, normal, out);
}
#else
#define lanes lanes_avx2
#endif
#else
/* Blocks of counters (c0[l], task, step, c3[l]), l < count, as normals and / or uniforms (NULL: not wanted). */
static inline void words_to(key_t2 key, const uint32_t *c0, uint32_t task, uint32_t step, const uint32_t *c3,
                            int count, float *normals, float *uniforms) {
    for (int h = 0; h < count; h += LANES) {
        uint32_t w[4][LANES], a0[LANES] = {0}, a3[LANES] = {0};
        float z[4][LANES];
        for (int l = 0; l < LANES && h + l < count; l++) { a0[l] = c0[h + l]; a3[l] = c3[h + l]; }
        philox_lanes(key, a0, task, step, a3, w);
        if (normals) {
            box_muller(w[0], w[1], z[0], z[1]);
            box_muller(w[2], w[3], z[2], z[3]);
        }
        for (int l = 0; l < LANES && h + l < count; l++)
            for (int q = 0; q < 4; q++) {
                if (normals) normals[4 * (h + l) + q] = z[q][l];
                if (uniforms) uniforms[4 * (h + l) + q] = uniform_of(w[q][l]);
            }
    }
}

static inline void lanes(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag, const int normal,
                         int64_t wanted, float out[4 * LANES]) {
    (void)wanted;
    uint32_t c0[LANES], c3[LANES];
    for (int l = 0; l < LANES; l++) { c0[l] = j0 + (uint32_t)l; c3[l] = tag; }
    words_to(key, c0, task, step, c3, LANES, normal ? out : NULL, normal ? NULL : out);
}

static inline void blocks_of(key_t2 key, const uint32_t *c0, uint32_t task, uint32_t step, const uint32_t *c3, int m,
                             float *normals, float *uniforms) {
    words_to(key, c0, task, step, c3, 8 * m, normals, uniforms);
}
#endif

/* Values [f0, f0 + count) of the sequence (key, tag, step, task) as normals (normal = 1) or uniforms into out:
 * whole groups of WIDE_BLOCKS (with AVX-512) or LANES blocks straight into out, the ragged ends through a buffer. */
static inline __attribute__((always_inline)) void fill(key_t2 key, uint32_t tag, uint32_t step, uint32_t task,
                                                       int64_t f0, int64_t count, const int normal, float *out) {
    float buf[4 * LANES];
    int64_t f = f0;
    const int64_t end = f0 + count;
    while (f < end) {
        const int64_t j0 = f / 4, skip = f - 4 * j0;
#ifdef WIDE_BLOCKS
        if (skip == 0 && end - f >= 4 * WIDE_BLOCKS) {               /* whole wide groups straight into out */
            lanes_wide(key, (uint32_t)j0, task, step, tag, normal, out + (f - f0));
            f += 4 * WIDE_BLOCKS;
            continue;
        }
#endif
        const int whole = skip == 0 && end - f >= 4 * LANES;
        float *dst = whole ? out + (f - f0) : buf;
        lanes(key, (uint32_t)j0, task, step, tag, normal, (end - 4 * j0 + 3) / 4, dst);
        int64_t take = 4 * LANES - skip;
        if (take > end - f) take = end - f;
        if (!whole) memcpy(out + (f - f0), buf + skip, sizeof(float) * (size_t)take);
        f += take;
    }
}

static void stream_fill(key_t2 key, uint32_t tag, uint32_t step, uint32_t task, int64_t f0, int64_t count,
                        int normal, float *out) {
    if (normal) fill(key, tag, step, task, f0, count, 1, out);       /* each kind's loop compiled on its own */
    else fill(key, tag, step, task, f0, count, 0, out);
}

/* The words of LANES consecutive blocks j0 + l of the sequence (key, tag, step, task): block l's four at out[4 l ..]
 * (the AVX2 rounds on two interleaved vectors of eight where the CPU has them, the lanes' loop elsewhere: the same
 * integers). */
static inline void word_lanes(key_t2 key, uint32_t j0, uint32_t task, uint32_t step, uint32_t tag,
                              uint32_t out[4 * LANES]) {
#ifdef __AVX2__
    __m256i x[4], y[4];
    consecutive_avx2(j0, task, step, tag, x);
    consecutive_avx2(j0 + 8, task, step, tag, y);
    philox_avx2(key, x, y, 2);
    const __m256 a[4] = {_mm256_castsi256_ps(x[0]), _mm256_castsi256_ps(x[1]), _mm256_castsi256_ps(x[2]),
                         _mm256_castsi256_ps(x[3])};
    const __m256 b[4] = {_mm256_castsi256_ps(y[0]), _mm256_castsi256_ps(y[1]), _mm256_castsi256_ps(y[2]),
                         _mm256_castsi256_ps(y[3])};
    store_blocks_avx2(a, (float *)out);                              /* a transpose: the words' bits moved */
    store_blocks_avx2(b, (float *)out + 32);
#else
    uint32_t c0[LANES], c3[LANES], w[4][LANES];
    for (int l = 0; l < LANES; l++) { c0[l] = j0 + (uint32_t)l; c3[l] = tag; }
    philox_lanes(key, c0, task, step, c3, w);
    for (int l = 0; l < LANES; l++)
        for (int q = 0; q < 4; q++) out[4 * l + q] = w[q][l];
#endif
}

/* Words [f0, f0 + count) of the sequence (key, tag, step, task) into out. */
static void stream_words(key_t2 key, uint32_t tag, uint32_t step, uint32_t task, int64_t f0, int64_t count,
                         uint32_t *out) {
    uint32_t buf[4 * LANES];
    for (int64_t f = f0; f < f0 + count;) {
        const int64_t j0 = f / 4, skip = f - 4 * j0;
        word_lanes(key, (uint32_t)j0, task, step, tag, buf);
        int64_t take = 4 * LANES - skip;
        if (take > f0 + count - f) take = f0 + count - f;
        memcpy(out + (f - f0), buf + skip, sizeof(uint32_t) * (size_t)take);
        f += take;
    }
}

#endif
