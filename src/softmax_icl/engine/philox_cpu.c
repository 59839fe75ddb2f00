/* Philox blocks on the CPU in C: the words of softmax_icl.streams.blocks, bit for bit, and the values of
 * softmax_icl.streams.values drawn from them (see philox_cpu.py).
 *
 * out[r][t][j][0..3] = Philox4x32-10(key r, counter (block[j], tasks[t], step, tag[j])), as int64 in [0, 2^32)
 * (philox_blocks), or as four floats (philox_values: Box-Muller normals for the first ``normals`` blocks of a task,
 * uniforms for the others, by philox.h's conversions, the compiled engine's). Counters are taken LANES at a time (a
 * task's blocks when it has LANES or more, else a row's T * J counters in order), the ten rounds run on the lanes in
 * registers, and each block's four values are written once (a last group overlaps its predecessor or repeats its
 * final counter; the values it writes are the same either way).
 */
#include "philox.h"

/* Writes lanes [0, n) of the words x0..x3 as int64 blocks of four at o. */
static inline void store_lanes(int64_t *o, int64_t n, const uint32_t *x0, const uint32_t *x1, const uint32_t *x2,
                               const uint32_t *x3) {
    for (int64_t l = 0; l < n; l++) {
        o[4 * l] = x0[l]; o[4 * l + 1] = x1[l]; o[4 * l + 2] = x2[l]; o[4 * l + 3] = x3[l];
    }
}

#ifdef __AVX512F__
/* The LANES counters x0..x3 in one 512-bit vector through philox.h's AVX-512 rounds (the same bits as the AVX2
 * ones); lanes [0, n) written at o as int64 blocks of four. */
static inline void group(uint32_t k0, uint32_t k1, uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3,
                         int64_t *o, int64_t n) {
    __m512i a[4] = {_mm512_loadu_si512(x0), _mm512_loadu_si512(x1), _mm512_loadu_si512(x2), _mm512_loadu_si512(x3)};
    philox_512((key_t2){k0, k1}, a, NULL, 1);
    uint32_t w[4 * LANES];
    const __m512 v[4] = {_mm512_castsi512_ps(a[0]), _mm512_castsi512_ps(a[1]), _mm512_castsi512_ps(a[2]),
                         _mm512_castsi512_ps(a[3])};
    store_blocks_512(v, (float *)w);                                  /* lane l's four words at w[4 l ..] */
    if (n == LANES) {
        for (int h = 0; h < 4 * LANES; h += 8)
            _mm512_storeu_si512(o + h, _mm512_cvtepu32_epi64(_mm256_loadu_si256((const __m256i *)(w + h))));
        return;
    }
    for (int64_t h = 0; h < 4 * n; h++) o[h] = w[h];
}
#elif defined(__AVX2__)
/* Eight lanes' words (four vectors of eight uint32) as eight int64 blocks of four: a 4 x 4 transpose in each half,
 * each row zero-extended to int64. */
static inline void store8_avx2(int64_t *o, const __m256i a[4]) {
    const __m256i t0 = _mm256_unpacklo_epi32(a[0], a[1]), t1 = _mm256_unpackhi_epi32(a[0], a[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(a[2], a[3]), t3 = _mm256_unpackhi_epi32(a[2], a[3]);
    const __m256i r[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                          _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
    for (int l = 0; l < 4; l++) {
        _mm256_storeu_si256((__m256i *)(o + 4 * l), _mm256_cvtepu32_epi64(_mm256_castsi256_si128(r[l])));
        _mm256_storeu_si256((__m256i *)(o + 4 * (l + 4)), _mm256_cvtepu32_epi64(_mm256_extracti128_si256(r[l], 1)));
    }
}

/* The LANES counters x0..x3 (overwritten) through philox.h's AVX2 rounds (two interleaved vectors of eight); lanes
 * [0, n) written at o. */
static inline void group(uint32_t k0, uint32_t k1, uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3,
                         int64_t *o, int64_t n) {
    uint32_t *const p[4] = {x0, x1, x2, x3};
    __m256i a[4], b[4];
    for (int w = 0; w < 4; w++) {
        a[w] = _mm256_loadu_si256((const __m256i *)p[w]);
        b[w] = _mm256_loadu_si256((const __m256i *)(p[w] + 8));
    }
    philox_avx2((key_t2){k0, k1}, a, b, 2);
    if (n == LANES) {
        store8_avx2(o, a);
        store8_avx2(o + 32, b);
        return;
    }
    for (int w = 0; w < 4; w++) {
        _mm256_storeu_si256((__m256i *)p[w], a[w]);
        _mm256_storeu_si256((__m256i *)(p[w] + 8), b[w]);
    }
    store_lanes(o, n, x0, x1, x2, x3);
}
#else
static inline void group(uint32_t k0, uint32_t k1, uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3,
                         int64_t *o, int64_t n) {
    philox_rounds((key_t2){k0, k1}, x0, x1, x2, x3);
    store_lanes(o, n, x0, x1, x2, x3);
}
#endif

/* The LANES counters x0..x3 (overwritten) as values: lanes [0, n) written at o as blocks of four floats, lane l as
 * normals where normal[l], else as uniforms (each conversion computed only where some lane takes it). */
static inline void group_values(uint32_t k0, uint32_t k1, uint32_t *x0, uint32_t *x1, uint32_t *x2, uint32_t *x3,
                                const unsigned char *normal, float *o, int64_t n) {
    int normals = 0, uniforms = 0;
    for (int64_t l = 0; l < n; l++) {
        normals |= normal[l];
        uniforms |= !normal[l];
    }
    float nz[4 * LANES], un[4 * LANES];
    const key_t2 key = {k0, k1};
#ifdef __AVX512F__
    __m512i a[4] = {_mm512_loadu_si512(x0), _mm512_loadu_si512(x1), _mm512_loadu_si512(x2), _mm512_loadu_si512(x3)};
    philox_512(key, a, NULL, 1);
    if (normals) convert_512(a, 1, nz);
    if (uniforms) convert_512(a, 0, un);
#elif defined(__AVX2__)
    uint32_t *const p[4] = {x0, x1, x2, x3};
    for (int h = 0; h < LANES; h += 8) {
        __m256i a[4];
        for (int w = 0; w < 4; w++) a[w] = _mm256_loadu_si256((const __m256i *)(p[w] + h));
        philox_avx2(key, a, NULL, 1);
        convert_avx2(a, normals ? nz + 4 * h : NULL, uniforms ? un + 4 * h : NULL);
    }
#else
    philox_rounds(key, x0, x1, x2, x3);
    float z[4][LANES];
    if (normals) {
        box_muller(x0, x1, z[0], z[1]);
        box_muller(x2, x3, z[2], z[3]);
    }
    const uint32_t *const p[4] = {x0, x1, x2, x3};
    for (int l = 0; l < LANES; l++)
        for (int q = 0; q < 4; q++) {
            nz[4 * l + q] = normals ? z[q][l] : 0.f;
            un[4 * l + q] = uniform_of(p[q][l]);
        }
#endif
    for (int64_t l = 0; l < n; l++) memcpy(o + 4 * l, normal[l] ? nz + 4 * l : un + 4 * l, 4 * sizeof(float));
}

/* Every row's T * J counters through Philox, LANES at a time: as int64 words at words (values == NULL), else as
 * floats at values, a task's blocks j < normals as normals. */
static void walk(const int64_t *keys, int64_t R, int64_t step, const int64_t *tasks, int64_t T, const int64_t *block,
                 const int64_t *tag, int64_t J, int64_t normals, int64_t *words, float *values) {
    const int64_t total = T * J;
    uint32_t x0[LANES], x1[LANES], x2[LANES], x3[LANES];
    unsigned char normal[LANES];
    for (int64_t r = 0; r < R; r++) {
        const uint32_t k0 = (uint32_t)keys[2 * r], k1 = (uint32_t)keys[2 * r + 1];
        int64_t *o = words ? words + 4 * r * total : NULL;
        float *v = values ? values + 4 * r * total : NULL;
        if (J >= LANES) {          /* a task's blocks LANES at a time (the last group of a task may overlap) */
            for (int64_t t = 0; t < T; t++) {
                for (int64_t j0 = 0; j0 < J; j0 += LANES) {
                    const int64_t j = j0 + LANES <= J ? j0 : J - LANES;
                    for (int l = 0; l < LANES; l++) {
                        x0[l] = (uint32_t)block[j + l];
                        x1[l] = (uint32_t)tasks[t];
                        x2[l] = (uint32_t)step;
                        x3[l] = (uint32_t)tag[j + l];
                        normal[l] = j + l < normals;
                    }
                    if (v) group_values(k0, k1, x0, x1, x2, x3, normal, v + 4 * (t * J + j), LANES);
                    else group(k0, k1, x0, x1, x2, x3, o + 4 * (t * J + j), LANES);
                }
            }
            continue;
        }
        int64_t t = 0, j = 0;      /* short tasks: the row's T * J counters LANES at a time */
        for (int64_t base = 0; base < total; base += LANES) {
            const int64_t n = total - base < LANES ? total - base : LANES;
            for (int l = 0; l < LANES; l++) {
                x0[l] = (uint32_t)block[j];
                x1[l] = (uint32_t)tasks[t];
                x2[l] = (uint32_t)step;
                x3[l] = (uint32_t)tag[j];
                normal[l] = j < normals;
                if (l + 1 < n && ++j == J) { j = 0; t++; }
            }
            if (++j == J) { j = 0; t++; }          /* past the group's last counter */
            if (v) group_values(k0, k1, x0, x1, x2, x3, normal, v + 4 * base, n);
            else group(k0, k1, x0, x1, x2, x3, o + 4 * base, n);
        }
    }
}

void philox_blocks(const int64_t *keys, int64_t R, int64_t step, const int64_t *tasks, int64_t T,
                   const int64_t *block, const int64_t *tag, int64_t J, int64_t *out) {
    walk(keys, R, step, tasks, T, block, tag, J, 0, out, NULL);
}

void philox_values(const int64_t *keys, int64_t R, int64_t step, const int64_t *tasks, int64_t T,
                   const int64_t *block, const int64_t *tag, int64_t J, int64_t normals, float *out) {
    walk(keys, R, step, tasks, T, block, tag, J, normals, NULL, out);
}
