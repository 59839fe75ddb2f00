/* The CPU engine of paper 1's trainer (softmax_icl.engine.regression): tasks drawn from the counter-based streams, labelled,
 * and consumed by the attention readout while they are in cache.
 *
 * fused_steps: for every task stream of a step (a sweep's context lengths), every row r (a seed's key) and task b,
 * draw the task (query, direction, coefficients, context inputs, noise: philox.h), and for each of the row's G
 * configurations (class, L, sigma, key-query matrix M)
 *   y_i   = f(x_i) + sigma eps_i,   target f(x_q)
 *   s_i   = x_i^T M x_q,   pred = sum_i a_i y_i,  a = softmax(s) or s / n (linear)
 *   loss  = mean_b (pred - f(x_q))^2,   dloss/dM = sum_b (sum_i dloss/ds_i x_i) x_q^T
 * in three passes over the context (scores, weights, gradient), held transposed (d rows of n values) so every pass is
 * a vector loop over i, with q = M x_q formed first (no d^2 pair features). Nothing is allocated: the caller owns
 * the per-thread scratch and the per-task results.
 *
 * sample_raw: the same draws written out (inputs, task parameters, noise), for evaluation sets and the tests.
 *
 * window_sums: the inner sums of theory.relu_window_scan (Theorem 3.4's population terms over M = w I): for every
 * task, segment of its context and window w, the sums of e_i = exp(w (c_i - max c)), e_i p+_i, e_i p-_i and e_i^2
 * over the segment's points, each exp computed once and consumed in registers (PyTorch materialises every
 * (tasks, w, points) tensor several times over).
 *
 * segment_exp: the softmax weights of rows of scores cut into segments (each relative to its segment's largest
 * score) with each segment's largest score, sum and sum of squares, in one pass: the readout at every prefix length
 * of an evaluation (softmax_icl.models.segment_weights).
 *
 * Threads: tasks are split over the threads, each writing its task's results (err, and sum_i dloss/ds_i x_i per
 * configuration) to the task's own slot; the sums over tasks are then taken per configuration in task order, in
 * double. No number depends on the thread count. fused_steps runs the steps of several streams (a sweep's context
 * lengths) in one call: thread t takes part t of every stream, so the threads start twice a step, not twice per
 * stream, and short contexts do not leave one idle.
 */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
/* The compiler's own vector loops (the labels, the norms, the window sums' exponentials; the readout's softmax weights
 * are written with intrinsics) on 512-bit registers like the rest of the engine: GCC prefers 256 bits on these CPUs
 * unless told. */
#pragma GCC target("prefer-vector-width=512")
#endif
#include <pthread.h>
#include <stdint.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "philox.h"
#include "adam.h"

#define DMAX 64
#define CHUNK 128 /* points drawn and normalised at a time (D CHUNK / 4 blocks: whole groups of 32) */
#ifdef __AVX512F__
#define VW 16 /* floats per vector of the readout's passes */
#else
#define VW 8
#endif
#define PAD(n) (((n) + VW - 1) / VW * VW) /* context rows padded to whole vectors */
#define COS_SLOTS 4 /* rows of cosines a task keeps (labels) */

/* VW floats (GCC / Clang vector extension: AVX-512 registers where there are, AVX ones or pairs of SSE ones
 * elsewhere). The step's rows start at multiples of 64 bytes (the scratch is 64-byte aligned, every row a whole
 * number of vectors). */
typedef float vf __attribute__((vector_size(4 * VW)));
typedef int32_t vi __attribute__((vector_size(4 * VW)));

/* the larger of vectors a and b lane by lane, and the largest lane (exact in any order) */
#if VW == 16
#define VMAX(a, b) ((vf)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define HMAX(a) _mm512_reduce_max_ps((__m512)(a))
#else
#ifdef __AVX__
#define VMAX(a, b) ((vf)_mm256_max_ps((__m256)(a), (__m256)(b)))
#else /* a macro: a function of vectors would warn of the ABI where they are wider than the CPU's registers */
#define VMAX(a, b) ((vf)(((vi)(a) & ((a) > (b))) | ((vi)(b) & ~((a) > (b)))))
#endif
static inline float hmax8(const float *a) {
    float m = a[0];
    for (int l = 1; l < 8; l++) m = a[l] > m ? a[l] : m;
    return m;
}
#define HMAX(a) hmax8((const float *)&(a))
#endif

#if VW == 16
/* exp_nonpositive (philox.h) on sixteen lanes, the power of two applied by vscalefps (one operation instead of
 * forming 2^k's bits and multiplying: the same product, exact either way). */
static inline vf exp_nonpositive_512(vf xv) {
    const __m512 x = _mm512_max_ps((__m512)xv, _mm512_set1_ps(-87.f));
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f),
                                     _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x));
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.f));
    return (vf)_mm512_scalef_ps(p, k);
}
#endif

static inline float hsum(const vf *v) {
    const vf a = *v;
#if VW == 16
    const float t[8] = {a[0] + a[8], a[1] + a[9], a[2] + a[10], a[3] + a[11], a[4] + a[12], a[5] + a[13],
                        a[6] + a[14], a[7] + a[15]};
#else
    const float *t = (const float *)&a;
#endif
    return ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
}

enum { TAG_X = 1, TAG_QUERY = 2, TAG_DIRECTION = 3, TAG_LOWRANK = 4, TAG_COEF = 5, TAG_PHASE = 6, TAG_NOISE = 7 };
enum { ISOTROPIC = 0, NONISOTROPIC = 1, WHITENED = 2 };

typedef struct {
    int64_t R, B, n, d, k;      /* rows (keys), tasks per row, context length, input dimension, low-rank rank */
    int64_t first_task;         /* index of the first task (an evaluation set drawn in chunks) */
    int64_t step;
    int64_t input_dist;         /* ISOTROPIC, NONISOTROPIC, WHITENED */
    int64_t nthreads;
    const uint32_t *keys;       /* (R, 2) */
    const float *sqrt_cov;      /* (d), or NULL when isotropic */
    const float *basis;         /* (d, k), row-major, or NULL: the low-rank basis B */
} spec_t;

typedef struct {
    int64_t G;
    int64_t softmax;
    const int32_t *cls;         /* (R, G) class codes (see labels) */
    const float *L, *sigma, *cmean;   /* (R, G); cmean: E_x cos(L w^T x) of the centred cosine class */
    const float *M;             /* (R, G, d, d) */
    float *results;             /* (R, G, B, d + 1): err, then sum_i dloss/ds_i x_i */
    float *queries;             /* (R, B, d) */
    float *scratch;             /* nthreads x scratch_floats(n, d) */
    float *loss, *grad;         /* (R, G), (R, G, d, d) */
} step_t;

int64_t scratch_floats(int64_t n, int64_t d) { return (d + 5 + COS_SLOTS) * PAD(n); }

/* One task's own draws. */
typedef struct {
    float u[DMAX], w[DMAX], a[DMAX], coef[3], phase;
    float xq[DMAX], pq[2];      /* the query input and its projections on u and w */
} task_t;

/* inv[i] = 1 / |v_i| (0 where |v_i| = 0) for m vectors of D coordinates, coordinate k of vector i at v[k ld + i]:
 * the squares summed over k in order, the square root and the division as IEEE operations. Everything a unit vector
 * takes from the vector's length is computed here, so that it depends on the vector alone, never on where it falls
 * in a loop (alone or in a sweep, a prefix of a longer context) nor on the CPU. Under -ffast-math, GCC writes
 * 1 / sqrtf as an estimate refined by one Newton step, and AVX-512 CPUs estimate differently in 512-bit vectors
 * (vrsqrt14ps) than in narrower ones and scalars (vrsqrtps, vrsqrtss; AMD's and Intel's estimates differ too); and it
 * may sum a loop's vector body and its scalar remainder in other orders (a point's squared norm then depended on m in
 * one build). Exact, ordered operations round alike in every lane, width and CPU. Not inlined: its options differ. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-unsafe-math-optimizations")
#endif
static inline __attribute__((always_inline)) void inverse_norms_d(const float *v, int64_t ld, int64_t m,
                                                                  const int64_t D, float *inv) {
    for (int64_t i = 0; i < m; i++) inv[i] = 0.f;
    for (int64_t k = 0; k < D; k++)
        for (int64_t i = 0; i < m; i++) inv[i] += v[k * ld + i] * v[k * ld + i];
    for (int64_t i = 0; i < m; i++) inv[i] = inv[i] > 0.f ? 1.f / sqrtf(inv[i]) : 0.f;
}
/* (the sums compiled for each d <= 10, the book's input dimensions, as the engine's other loops over d are) */
static __attribute__((noinline)) void exact_inverse_norms(const float *v, int64_t ld, int64_t m, int64_t D,
                                                          float *inv) {
    switch (D) {
    case 1: inverse_norms_d(v, ld, m, 1, inv); break; case 2: inverse_norms_d(v, ld, m, 2, inv); break;
    case 3: inverse_norms_d(v, ld, m, 3, inv); break; case 4: inverse_norms_d(v, ld, m, 4, inv); break;
    case 5: inverse_norms_d(v, ld, m, 5, inv); break; case 6: inverse_norms_d(v, ld, m, 6, inv); break;
    case 7: inverse_norms_d(v, ld, m, 7, inv); break; case 8: inverse_norms_d(v, ld, m, 8, inv); break;
    case 9: inverse_norms_d(v, ld, m, 9, inv); break; case 10: inverse_norms_d(v, ld, m, 10, inv); break;
    default: inverse_norms_d(v, ld, m, D, inv);
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* v / |v|; a zero vector stays zero (as PyTorch's, whose norm is clamped): only d = 1 can draw one. */
static inline void unit(float *v, int64_t D) {
    float inv;
    exact_inverse_norms(v, 1, 1, D, &inv);
    for (int64_t k = 0; k < D; k++) v[k] *= inv;
}

/* A task's own draws (query, direction, low-rank coefficients, coefficients, phase) in one pass of the generator:
 * every kind's blocks side by side in the lanes. */
static __attribute__((noinline)) void draw_task(const spec_t *S, key_t2 key, uint32_t task, task_t *T,
                                                float *xq_task, const int64_t D) {
    enum { MAXB = 64 };                              /* 2 ceil(d / 4) + ceil(k / 4) + 2 <= 50 blocks for d, k <= 64 */
    const int64_t nd = (D + 3) / 4, nk = (S->k + 3) / 4;
    const uint32_t tags[5] = {TAG_QUERY, TAG_DIRECTION, TAG_LOWRANK, TAG_COEF, TAG_PHASE};
    const int64_t count[5] = {nd, nd, nk, 1, 1};
    uint32_t c0[MAXB] = {0}, c3[MAXB] = {0};
    int64_t J = 0;
    for (int kind = 0; kind < 5; kind++)
        for (int64_t j = 0; j < count[kind]; j++, J++) { c0[J] = (uint32_t)j; c3[J] = tags[kind]; }
    float z[4 * MAXB], u[4 * MAXB];
    blocks_of(key, c0, task, (uint32_t)S->step, c3, (int)((J + 7) / 8), z, u);
    float zq[DMAX];
    for (int64_t e = 0; e < D; e++) { zq[e] = z[e]; T->u[e] = z[4 * nd + e]; }
    for (int64_t j = 0; j < S->k; j++) T->a[j] = z[8 * nd + j];
    unit(zq, D);
    unit(T->u, D);
    unit(T->a, S->k);
    for (int q = 0; q < 3; q++) T->coef[q] = 2.f * u[4 * (2 * nd + nk) + q] - 1.f;
    T->phase = u[4 * (2 * nd + nk + 1)] * 6.28318530717958648f;
    for (int64_t e = 0; e < D; e++) {
        float t = 0.f;
        if (S->basis)
            for (int64_t j = 0; j < S->k; j++) t += S->basis[e * S->k + j] * T->a[j];
        T->w[e] = t;
    }
    for (int64_t e = 0; e < D; e++) T->xq[e] = S->sqrt_cov ? zq[e] * S->sqrt_cov[e] : zq[e];
    const float *at = S->input_dist == WHITENED ? zq : T->xq;        /* where the task is evaluated */
    float pu = 0.f, pw = 0.f;
    for (int64_t e = 0; e < D; e++) { pu += at[e] * T->u[e]; pw += at[e] * T->w[e]; }
    T->pq[0] = pu;
    T->pq[1] = pw;
    if (xq_task)
        for (int64_t e = 0; e < D; e++) xq_task[e] = zq[e];
}

/* m <= CHUNK points of D coordinates, point-major in z, as D rows of CHUNK in zt. GCC vectorises this loop for
 * D = 1, 2, 3, 4, 8, 16; for other D it moves one float per load and store, and with AVX-512 a gather of sixteen
 * points of a coordinate is 2.3x faster (D = 5, 6, 10; a stand-alone probe). z is then read up to 16 points past
 * m (inside its CHUNK points) and what lands in zt past m is never read. */
static inline __attribute__((always_inline)) void transpose_points(const float *z, int64_t m, float *zt,
                                                                   const int64_t D) {
#ifdef __AVX512F__
    if (!(D <= 4 || D == 8 || D == 16)) {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32((int)D));
        for (int64_t i = 0; i < m; i += 16)
            for (int64_t k = 0; k < D; k++)
                _mm512_storeu_ps(zt + k * CHUNK + i, _mm512_i32gather_ps(idx, z + i * D + k, 4));
        return;
    }
#endif
    for (int64_t i = 0; i < m; i++)
        for (int64_t k = 0; k < D; k++) zt[k * CHUNK + i] = z[i * D + k];
}

/* Context points [i0, i0 + m), m <= CHUNK, of a task as unit vectors zt (D rows of CHUNK) and inputs xt = the
 * vectors scaled by Sigma^{1/2} (D rows of CHUNK; xt == zt when isotropic). */
static inline __attribute__((always_inline)) void draw_points(const spec_t *S, key_t2 key, uint32_t task, int64_t i0,
                                                              int64_t m, float *z, float *zt, float *xt,
                                                              const int64_t D) {
    stream_fill(key, TAG_X, (uint32_t)S->step, task, i0 * D, m * D, 1, z);
    float inv[CHUNK];
    transpose_points(z, m, zt, D);
    exact_inverse_norms(zt, CHUNK, m, D, inv);
    for (int64_t k = 0; k < D; k++) {
        const float sc = S->sqrt_cov ? S->sqrt_cov[k] : 1.f;
        for (int64_t i = 0; i < m; i++) {
            zt[k * CHUNK + i] *= inv[i];
            xt[k * CHUNK + i] = zt[k * CHUNK + i] * sc;
        }
    }
}

/* The task's cos(phase + L p_i) at up to COS_SLOTS values of L (the cosine classes at one L, with or without their
 * mean, and at each noise level, share one row of cosines): ``rows`` holds COS_SLOTS rows of np floats. */
typedef struct {
    float *rows;
    float L[COS_SLOTS];
    int used, next;
} cos_cache_t;

/* cos(ph + L p_i), i < n, from the cache, computed into the oldest slot when L is not in it. */
static const float *cosines(cos_cache_t *C, float ph, float L, const float *p, int64_t n, int64_t np) {
    for (int j = 0; j < C->used; j++)
        if (C->L[j] == L) return C->rows + j * np;
    const int j = C->next;
    float *c = C->rows + j * np;
    for (int64_t i = 0; i < n; i++) c[i] = cos_any(ph + L * p[i]);
    C->L[j] = L;
    C->next = (j + 1) % COS_SLOTS;
    if (C->used < COS_SLOTS) C->used++;
    return c;
}

/* y_i = f(p_i) + sigma eps_i for one class over n points (and f at the query projection). */
static void labels(int32_t cls, float L, float sigma, float cmean, const task_t *T, const float *pu, const float *pw,
                   const float *eps, int64_t n, int64_t np, cos_cache_t *C, float *y, float *fq) {
    const float c0 = T->coef[0], c1 = T->coef[1], c2 = T->coef[2], ph = T->phase;
    const float *p = cls >= 4 ? pw : pu;
    const float q = cls >= 4 ? T->pq[1] : T->pq[0];
    switch (cls) {
    case 0: /* affine */
        for (int64_t i = 0; i < n; i++) y[i] = L * (c1 + c0 * p[i]) + sigma * eps[i];
        *fq = L * (c1 + c0 * q);
        break;
    case 1: /* relu */
        for (int64_t i = 0; i < n; i++)
            y[i] = L * (c0 * fmaxf(p[i], 0.f) + c1 * fmaxf(-p[i], 0.f) + c2) + sigma * eps[i];
        *fq = L * (c0 * fmaxf(q, 0.f) + c1 * fmaxf(-q, 0.f) + c2);
        break;
    case 2: { /* cosine */
        const float *c = cosines(C, ph, L, p, n, np);
        for (int64_t i = 0; i < n; i++) y[i] = c[i] + sigma * eps[i];
        *fq = cos_any(ph + L * q);
        break;
    }
    case 3: { /* cosine, less its mean over x */
        const float off = cos_any(ph) * cmean, *c = cosines(C, ph, L, p, n, np);
        for (int64_t i = 0; i < n; i++) y[i] = (c[i] - off) + sigma * eps[i];
        *fq = cos_any(ph + L * q) - off;
        break;
    }
    case 4: /* low-rank linear */
        for (int64_t i = 0; i < n; i++) y[i] = L * p[i] + sigma * eps[i];
        *fq = L * q;
        break;
    case 5: /* low-rank affine */
        for (int64_t i = 0; i < n; i++) y[i] = (L * p[i] + 2.f) + sigma * eps[i];
        *fq = L * q + 2.f;
        break;
    case 6: /* low-rank quadratic */
        for (int64_t i = 0; i < n; i++) { const float t = L * p[i]; y[i] = t * t + sigma * eps[i]; }
        *fq = (L * q) * (L * q);
        break;
    default: /* low-rank cosine */
        for (int64_t i = 0; i < n; i++) y[i] = cos_any(4.f * (L * p[i])) + sigma * eps[i];
        *fq = cos_any(4.f * (L * q));
        break;
    }
}

/* Readout of one configuration on one task: returns err = pred - fq and rv = sum_i dloss/ds_i x_i (D).
 * X: D rows of np = PAD(n) inputs (zero beyond n), y: np labels (zero beyond n), s: np scratch. The score pass
 * (with the largest score) and the gradient pass (with dloss/ds_i) read the inputs as vectors of VW points; the
 * weights pass is a plain loop the compiler vectorises (exp). */
static inline __attribute__((always_inline)) float readout(const float *X, int64_t n, const float *Mg, const float *xq,
                                                           const float *y, float fq, int softmax, int64_t B,
                                                           float *s, float *rv, const int64_t D) {
    const int64_t np = PAD(n), nv = np / VW;
    float q[DMAX];
    for (int64_t k = 0; k < D; k++) {
        float t = 0.f;
        for (int64_t e = 0; e < D; e++) t += Mg[k * D + e] * xq[e];
        q[k] = t;
    }
    vf *sv = (vf *)s;
    const vf *Xv = (const vf *)X, *yv = (const vf *)y;
    /* scores, and their largest in two vectors of running maxima (one would wait on vmaxps' latency at every
     * vector); the last vector, which holds the padding, after it is set */
    vf mx0 = (vf){0} - 3.0e38f, mx1 = mx0;
    int64_t v = 0;
    for (; v + 2 < nv; v += 2) {
        vf a0 = q[0] * Xv[v], a1 = q[0] * Xv[v + 1];
        for (int64_t k = 1; k < D; k++) {
            a0 += q[k] * Xv[k * nv + v];
            a1 += q[k] * Xv[k * nv + v + 1];
        }
        sv[v] = a0, sv[v + 1] = a1;
        if (softmax) mx0 = VMAX(mx0, a0), mx1 = VMAX(mx1, a1);     /* linear attention needs no maxima */
    }
    for (; v < nv; v++) {
        vf a = q[0] * Xv[v];
        for (int64_t k = 1; k < D; k++) a += q[k] * Xv[k * nv + v];
        sv[v] = a;
        if (softmax && v + 1 < nv) mx0 = VMAX(mx0, a);
    }
    float pred, c;
    if (softmax) {
        for (int64_t i = n; i < np; i++) s[i] = -3.0e38f;                  /* padding: weight exp(-87), label 0 */
        const vf mv = VMAX(VMAX(mx0, mx1), sv[nv - 1]);
        const float m = HMAX(mv);
        float Z = 0.f, num = 0.f;
#if VW == 16
        vf Zv = (vf){0}, Nv = (vf){0};
        for (int64_t w = 0; w < nv; w++) {
            const vf e = exp_nonpositive_512(sv[w] - m);
            sv[w] = e;
            Zv += e;
            Nv += e * yv[w];
        }
        Z = hsum(&Zv), num = hsum(&Nv);
#else
        for (int64_t i = 0; i < np; i++) {
            const float e = exp_nonpositive(s[i] - m);
            s[i] = e;
            Z += e;
            num += e * y[i];
        }
#endif
        pred = num / Z;
        c = 2.f * (pred - fq) / ((float)B * Z);
    } else {
        float num = 0.f;
        for (int64_t i = 0; i < np; i++) num += s[i] * y[i];
        pred = num / (float)n;
        c = 2.f * (pred - fq) / ((float)B * (float)n);
    }
    /* sum_i dloss/ds_i X_ki, dloss/ds_i = c e_i (y_i - pred) (softmax) or c y_i (linear), with U vectors of
     * accumulators, U D >= 8 where D < 8: D chains alone would each wait on the FMA's latency (4 cycles) at every
     * vector */
    const int64_t U = D >= 8 ? 1 : (D >= 4 ? 2 : 4);
    vf acc[4][DMAX];
    for (int64_t u = 0; u < U; u++)
        for (int64_t k = 0; k < D; k++) acc[u][k] = (vf){0};
    v = 0;
    for (; v + U <= nv; v += U)
        for (int64_t u = 0; u < U; u++) {
            const vf w = softmax ? c * sv[v + u] * (yv[v + u] - pred) : c * yv[v + u];
            for (int64_t k = 0; k < D; k++) acc[u][k] += w * Xv[k * nv + v + u];
        }
    for (; v < nv; v++) {
        const vf w = softmax ? c * sv[v] * (yv[v] - pred) : c * yv[v];
        for (int64_t k = 0; k < D; k++) acc[0][k] += w * Xv[k * nv + v];
    }
    for (int64_t k = 0; k < D; k++) {
        for (int64_t u = 1; u < U; u++) acc[0][k] += acc[u][k];
        rv[k] = hsum(&acc[0][k]);
    }
    return pred - fq;
}

/* window_sums' arguments: B tasks of n points, K segments [bounds[k], bounds[k + 1]) of every context, W windows. */
typedef struct {
    int64_t B, n, W, K;
    const int64_t *bounds;     /* (K + 1) */
    const float *w;            /* (W) */
    const float *c, *pp, *pm;  /* (B, n): the cosine to the query, and (q^T x_i)_+, (q^T x_i)_- */
    float *out;                /* (B, K, W, 4): sum e_i, sum e_i p+_i, sum e_i p-_i, sum e_i^2 */
} scan_t;

typedef struct job {
    const spec_t *S;
    const step_t *P;           /* NULL: sample_raw */
    float *x, *x_task, *u, *a, *coef, *phase, *noise;   /* sample_raw's outputs */
    float *scratch;
    int phase2;                /* 0: tasks [start, stop) of R * B; 1: configurations [start, stop) of R * G */
    int64_t start, stop;
    void (*fn)(const struct job *);   /* window_sums, segment_exp: items [start, stop) of ``arg`` (S, P NULL) */
    const void *arg;
    int64_t count;             /* fused_steps: the streams S[0 .. count), P[0 .. count) */
    int64_t slot, parts;       /* the thread's index (its scratch slot) of ``parts`` threads */
} job_t;

/* Context points [i0, i0 + m) of a task for the step: inputs into the rows of X (stride np), their projections on
 * the task direction u and on w = B a (at the inputs, or at the unit vectors for whitened inputs) into pu, pw. */
static inline __attribute__((always_inline)) void step_points(const spec_t *S, key_t2 key, uint32_t task,
                                                              const task_t *T, int64_t i0, int64_t m, int64_t np,
                                                              float *X, float *pu, float *pw, const int64_t D) {
    float z[DMAX * CHUNK], zt[DMAX * CHUNK], inv[CHUNK];
    stream_fill(key, TAG_X, (uint32_t)S->step, task, i0 * D, m * D, 1, z);
    transpose_points(z, m, zt, D);
    exact_inverse_norms(zt, CHUNK, m, D, inv);
    const int whitened = S->input_dist == WHITENED;
    float *a1 = pu + i0, *a2 = pw + i0;    /* the projections summed in place: a copy from the stack was a memcpy */
    for (int64_t k = 0; k < D; k++) {
        const float sc = S->sqrt_cov ? S->sqrt_cov[k] : 1.f, at = whitened ? 1.f : sc;
        const float uk = T->u[k] * at, wk = T->w[k] * at;
        float *Xk = X + k * np + i0;
        for (int64_t i = 0; i < m; i++) {             /* straight into X: a copy through zt was a rep movsq per row */
            const float unit = zt[k * CHUNK + i] * inv[i];
            Xk[i] = unit * sc;
            a1[i] = k ? a1[i] + unit * uk : unit * uk;
            a2[i] = k ? a2[i] + unit * wk : unit * wk;
        }
    }
}

static inline __attribute__((always_inline)) void step_tasks(const job_t *J, const int64_t D) {
    const spec_t *S = J->S;
    const step_t *P = J->P;
    const int64_t n = S->n, np = PAD(n), B = S->B, G = P->G;
    float *X = J->scratch, *pu = X + D * np, *pw = pu + np, *eps = pw + np, *y = eps + np, *s = y + np;
    cos_cache_t C = {s + np, {0}, 0, 0};
    for (int64_t k = 0; k < D; k++)
        for (int64_t i = n; i < np; i++) X[k * np + i] = 0.f;        /* padding: zero inputs (and labels below) */
    for (int64_t rb = J->start; rb < J->stop; rb++) {
        const int64_t r = rb / B, b = rb % B;
        const key_t2 key = {S->keys[2 * r], S->keys[2 * r + 1]};
        const uint32_t task = (uint32_t)(S->first_task + b);
        task_t T;
        draw_task(S, key, task, &T, NULL, D);
        C.used = 0, C.next = 0;                                       /* a new task: no cosines yet */
        for (int64_t i0 = 0; i0 < n; i0 += CHUNK)
            step_points(S, key, task, &T, i0, n - i0 < CHUNK ? n - i0 : CHUNK, np, X, pu, pw, D);
        stream_fill(key, TAG_NOISE, (uint32_t)S->step, task, 0, n, 1, eps);
        for (int64_t e = 0; e < D; e++) P->queries[rb * D + e] = T.xq[e];
        for (int64_t g = 0; g < G; g++) {
            const int64_t rg = r * G + g;
            float fq;
            labels(P->cls[rg], P->L[rg], P->sigma[rg], P->cmean[rg], &T, pu, pw, eps, n, np, &C, y, &fq);
            for (int64_t i = n; i < np; i++) y[i] = 0.f;
            float *res = P->results + (rg * B + b) * (D + 1);
            res[0] = readout(X, n, P->M + rg * D * D, T.xq, y, fq, (int)P->softmax, B, s, res + 1, D);
        }
    }
}

/* loss and gradient of configurations [start, stop): sums over tasks in task order, in double. */
static void step_reduce(const job_t *J) {
    const spec_t *S = J->S;
    const step_t *P = J->P;
    const int64_t B = S->B, D = S->d, G = P->G;
    double acc[DMAX * DMAX];
    for (int64_t rg = J->start; rg < J->stop; rg++) {
        const int64_t r = rg / G;
        double l = 0.0;
        for (int64_t k = 0; k < D * D; k++) acc[k] = 0.0;
        for (int64_t b = 0; b < B; b++) {
            const float *res = P->results + (rg * B + b) * (D + 1), *xq = P->queries + (r * B + b) * D;
            l += (double)res[0] * res[0];
            for (int64_t k = 0; k < D; k++)
                for (int64_t e = 0; e < D; e++) acc[k * D + e] += (double)res[1 + k] * xq[e];
        }
        P->loss[rg] = (float)(l / (double)B);
        for (int64_t k = 0; k < D * D; k++) P->grad[rg * D * D + k] = (float)acc[k];
    }
}

static inline __attribute__((always_inline)) void raw_tasks(const job_t *J, const int64_t D) {
    const spec_t *S = J->S;
    const int64_t n = S->n, B = S->B, n1 = n + 1;
    float z[CHUNK * DMAX], zt[CHUNK * DMAX], xt[CHUNK * DMAX];
    for (int64_t rb = J->start; rb < J->stop; rb++) {
        const int64_t b = rb % B, r = rb / B;
        const key_t2 key = {S->keys[2 * r], S->keys[2 * r + 1]};
        const uint32_t task = (uint32_t)(S->first_task + b);
        task_t T;
        float *x = J->x + rb * n1 * D, *xw = J->x_task ? J->x_task + rb * n1 * D : NULL;
        draw_task(S, key, task, &T, xw ? xw + n * D : NULL, D);
        for (int64_t i0 = 0; i0 < n; i0 += CHUNK) {
            const int64_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
            draw_points(S, key, task, i0, m, z, zt, xt, D);
            for (int64_t i = 0; i < m; i++)
                for (int64_t k = 0; k < D; k++) {
                    x[(i0 + i) * D + k] = xt[k * CHUNK + i];
                    if (xw) xw[(i0 + i) * D + k] = zt[k * CHUNK + i];
                }
        }
        for (int64_t e = 0; e < D; e++) x[n * D + e] = T.xq[e];
        for (int64_t e = 0; e < D; e++) J->u[rb * D + e] = T.u[e];
        for (int64_t j = 0; j < S->k; j++) J->a[rb * S->k + j] = T.a[j];
        for (int q = 0; q < 3; q++) J->coef[rb * 3 + q] = T.coef[q];
        J->phase[rb] = T.phase;
        stream_fill(key, TAG_NOISE, (uint32_t)S->step, task, 0, n, 1, J->noise + rb * n);
    }
}

#define CASES(F) \
    switch (J->S->d) { \
    case 1: F(J, 1); break; case 2: F(J, 2); break; case 3: F(J, 3); break; case 4: F(J, 4); break; \
    case 5: F(J, 5); break; case 6: F(J, 6); break; case 7: F(J, 7); break; case 8: F(J, 8); break; \
    case 9: F(J, 9); break; case 10: F(J, 10); break; case 11: F(J, 11); break; case 12: F(J, 12); break; \
    default: F(J, J->S->d); }

/* Tasks [start, stop) of window_sums. Each segment's points (three rows of at most n floats) stay in cache while
 * every w runs over them; the loop over points vectorises (exp_nonpositive: every argument is <= 0). A weight below
 * exp(-40) ~ 4e-18 of the segment's largest (which is 1) is dropped: float32 could not add it to a sum >= 1, and its
 * products (e p, e^2) would be subnormal numbers, each costing a hundred cycles. */
static void scan_tasks(const job_t *J) {
    const scan_t *A = (const scan_t *)J->arg;
    for (int64_t b = J->start; b < J->stop; b++) {
        const float *c = A->c + b * A->n, *pp = A->pp + b * A->n, *pm = A->pm + b * A->n;
        for (int64_t k = 0; k < A->K; k++) {
            const int64_t i0 = A->bounds[k], i1 = A->bounds[k + 1];
            float cm = -3.0e38f;
            for (int64_t i = i0; i < i1; i++) cm = c[i] > cm ? c[i] : cm;
            for (int64_t j = 0; j < A->W; j++) {
                const float w = A->w[j];
                float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
                for (int64_t i = i0; i < i1; i++) {
                    const float a = w * (c[i] - cm);
                    const float e = a < -40.f ? 0.f : exp_nonpositive(a);
                    s0 += e;
                    s1 += e * pp[i];
                    s2 += e * pm[i];
                    s3 += e * e;
                }
                float *o = A->out + ((b * A->K + k) * A->W + j) * 4;
                o[0] = s0, o[1] = s1, o[2] = s2, o[3] = s3;
            }
        }
    }
}

static void stream_tasks(const job_t *J) { CASES(step_tasks) }

/* Part ``slot`` of ``parts`` of the items of every one of fused_steps' streams (tasks in phase 1, configurations
 * in phase 2), each with the stream's scratch slot ``slot``. */
static void multi_items(const job_t *J) {
    const int64_t t = J->slot, parts = J->parts;
    for (int64_t c = 0; c < J->count; c++) {
        const spec_t *S = J->S + c;
        const step_t *P = J->P + c;
        const int64_t items = J->phase2 ? S->R * P->G : S->R * S->B;
        job_t K = *J;
        K.S = S, K.P = P, K.start = items * t / parts, K.stop = items * (t + 1) / parts, K.count = 0;
        K.scratch = P->scratch + t * scratch_floats(S->n, S->d);
        if (K.start >= K.stop) continue;
        if (K.phase2) step_reduce(&K);
        else stream_tasks(&K);
    }
}

static void *worker(void *arg) {
    job_t *J = (job_t *)arg;
    if (J->fn) J->fn(J);
    else if (J->count) multi_items(J);
    else if (J->phase2) step_reduce(J);
    else if (J->P) { CASES(step_tasks) }
    else { CASES(raw_tasks) }
    return NULL;
}

/* ``items`` (tasks, or configurations in phase 2) split over ``nthreads`` threads, each with its scratch; a thread
 * that cannot be started leaves its share to this one (the same numbers). */
static void run_cuts(const job_t *proto, int phase2, const int64_t *cuts, int64_t nthreads, int64_t scratch) {
    job_t jobs[64];
    pthread_t threads[64];
    int started[64] = {0};
    for (int64_t t = 0; t < nthreads; t++) {
        jobs[t] = *proto;
        jobs[t].phase2 = phase2;
        jobs[t].start = cuts[t];
        jobs[t].stop = cuts[t + 1];
        jobs[t].slot = t;
        jobs[t].parts = nthreads;
        jobs[t].scratch = proto->scratch ? proto->scratch + t * scratch : NULL;
    }
    for (int64_t t = 1; t < nthreads; t++) started[t] = pthread_create(&threads[t], NULL, worker, &jobs[t]) == 0;
    worker(&jobs[0]);
    for (int64_t t = 1; t < nthreads; t++) {
        if (started[t]) pthread_join(threads[t], NULL);
        else { jobs[t].scratch = jobs[0].scratch; worker(&jobs[t]); }
    }
}

static int64_t clamp_threads(int64_t nthreads, int64_t items) {
    if (nthreads > items) nthreads = items;
    if (nthreads > 64) nthreads = 64;
    return nthreads < 1 ? 1 : nthreads;
}

static void run(const job_t *proto, int phase2, int64_t items, int64_t nthreads, int64_t scratch) {
    if (items <= 0) return;
    nthreads = clamp_threads(nthreads, items);
    int64_t cuts[65];
    for (int64_t t = 0; t <= nthreads; t++) cuts[t] = items * t / nthreads;
    run_cuts(proto, phase2, cuts, nthreads, scratch);
}

/* Threads worth starting for ``work`` (about one unit per drawn or read number): one costs tens of microseconds. */
static int64_t threads_for(int64_t nthreads, double work) {
    const int64_t most = (int64_t)(work / 65536.0);
    return nthreads < most ? nthreads : (most < 1 ? 1 : most);
}

/* The training step of ``count`` task streams in one call (every context length of a sweep): phase 1 draws, labels
 * and reads out every stream's tasks, phase 2 sums every stream's configurations; thread t of T takes the t-th of T
 * equal parts of every stream's items (so short contexts do not leave a thread idle), in its own scratch slot t,
 * and the threads start twice a step, not twice per stream. Every task's results go to its own slot and the sums
 * run in task order: no number depends on the thread count. */
int fused_steps(const spec_t *S, const step_t *P, int64_t count, int64_t nthreads) {
    if (count < 1) return 0;
    double work1 = 0.0, work2 = 0.0;
    int64_t items1 = 0, items2 = 0;
    for (int64_t c = 0; c < count; c++) {
        if (S[c].d < 1 || S[c].d > DMAX || S[c].k < 1 || S[c].k > DMAX) return 0;
        work1 += (double)S[c].R * S[c].B * (S[c].n + 1) * (S[c].d + 1 + P[c].G);
        work2 += (double)S[c].R * P[c].G * S[c].B * S[c].d * S[c].d;
        items1 += S[c].R * S[c].B, items2 += S[c].R * P[c].G;
    }
    job_t J = {0};
    J.S = S, J.P = P, J.count = count;
    int64_t cuts[65], T;
    for (int phase = 0; phase < 2; phase++) {
        if ((phase ? items2 : items1) < 1) continue;
        T = clamp_threads(threads_for(nthreads, phase ? work2 : work1), phase ? items2 : items1);
        for (int64_t t = 0; t <= T; t++) cuts[t] = t;          /* job t: part t of T of every stream */
        run_cuts(&J, phase, cuts, T, 0);
    }
    return 1;
}

int sample_raw(const spec_t *S, float *x, float *x_task, float *u, float *a, float *coef, float *phase, float *noise) {
    if (S->d < 1 || S->d > DMAX || S->k < 1 || S->k > DMAX) return 0;
    job_t J = {S, NULL, x, x_task, u, a, coef, phase, noise, NULL, 0, 0, 0};
    run(&J, 0, S->R * S->B, threads_for(S->nthreads, (double)S->R * S->B * (S->n + 1) * (S->d + 1)), 0);
    return 1;
}

/* Items [0, items) of fn over threads (window_sums, segment_exp), when bounds[0..K] cut 0..n into non-empty
 * segments (else 0: nothing is done). */
static int run_segments(void (*fn)(const struct job *), const void *arg, const int64_t *bounds, int64_t K, int64_t n,
                        int64_t items, int64_t nthreads, double work) {
    for (int64_t k = 0; k < K; k++)
        if (bounds[k] < 0 || bounds[k] >= bounds[k + 1] || bounds[k + 1] > n) return 0;
    job_t J = {0};
    J.fn = fn;
    J.arg = arg;
    run(&J, 0, items, threads_for(nthreads, work), 0);
    return 1;
}

int window_sums(const scan_t *A, int64_t nthreads) {
    return run_segments(scan_tasks, A, A->bounds, A->K, A->n, A->B, nthreads, (double)A->B * A->n * A->W * 8.0);
}

/* segment_exp's arguments: ``rows`` rows of n scores, K segments [bounds[k], bounds[k + 1]) of each. */
typedef struct {
    int64_t rows, n, K;
    const int64_t *bounds;     /* (K + 1) */
    float *s;                  /* (rows, n): scores in, weights out */
    float *stats;              /* (rows, K, 3): the segment's largest score, sum e_i, sum e_i^2 */
} segexp_t;

/* Rows [start, stop) of segment_exp: each score replaced by its weight relative to its segment's largest score,
 * e_i = exp(s_i - max), dropped below exp(-40) as in window_sums. */
static void segexp_rows(const job_t *J) {
    const segexp_t *A = (const segexp_t *)J->arg;
    for (int64_t r = J->start; r < J->stop; r++) {
        float *s = A->s + r * A->n;
        for (int64_t k = 0; k < A->K; k++) {
            const int64_t i0 = A->bounds[k], i1 = A->bounds[k + 1];
            float cm = -3.0e38f, s0 = 0.f, s2 = 0.f;
            for (int64_t i = i0; i < i1; i++) cm = s[i] > cm ? s[i] : cm;
            for (int64_t i = i0; i < i1; i++) {
                const float a = s[i] - cm;
                const float e = a < -40.f ? 0.f : exp_nonpositive(a);
                s[i] = e;
                s0 += e;
                s2 += e * e;
            }
            float *o = A->stats + (r * A->K + k) * 3;
            o[0] = cm, o[1] = s0, o[2] = s2;
        }
    }
}

int segment_exp(const segexp_t *A, int64_t nthreads) {
    return run_segments(segexp_rows, A, A->bounds, A->K, A->n, A->rows, nthreads, (double)A->rows * A->n * 8.0);
}

/* Words or values [f0, f0 + count) of the sequence (key, tag, step, task): kind 0 words, 1 uniforms, 2 normals. */
void stream_values(uint32_t k0, uint32_t k1, uint32_t tag, uint32_t step, uint32_t task, int64_t f0, int64_t count,
                   int kind, void *out) {
    const key_t2 key = {k0, k1};
    if (kind) stream_fill(key, tag, step, task, f0, count, kind == 2, (float *)out);
    else stream_words(key, tag, step, task, f0, count, (uint32_t *)out);
}
