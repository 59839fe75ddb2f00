/* A training step's update in C, shared by the two engines (engine/regression.c, engine/classification.c).
 *
 * Adam is PyTorch's default one (torch.optim.Adam: single-tensor, no weight decay, not amsgrad), the same operations
 * in the same order: m += (1 - beta1) (g - m); v = beta2 v + (1 - beta2) g g;
 * p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps), the step's scalars computed in double and
 * rounded to float where PyTorch passes them to its float kernels. The numbers are PyTorch's to float rounding (the
 * engines are compiled with -ffast-math: products and sums contract into FMAs).
 *
 * A key-query pair M = P^T Q (P, Q: r x d per unit) gets its gradient from the loss's gradient G in M:
 * dP = Q G^T, dQ = P G. */
#ifndef SOFTMAX_ICL_ADAM_H
#define SOFTMAX_ICL_ADAM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Everything here in exact IEEE arithmetic, scalar, as exact_inverse_norms in paper 2's engine: under -ffast-math GCC
 * writes a vectorised division or square root as an estimate and a Newton step (which AVX-512 CPUs estimate
 * differently in 512-bit vectors than in narrower ones), and a vectorised loop peels iterations until its pointers
 * are aligned, so a parameter's update depended on where it lay in memory (alone or inside a sweep). Products and
 * sums still contract into FMAs, in every element alike. A step's update is a few microseconds either way. (Clang:
 * its loop pragmas, SCALAR_LOOP.) */
#if defined(__clang__)
#define SCALAR_LOOP _Pragma("clang loop vectorize(disable) interleave(disable)")
#else
#define SCALAR_LOOP
#endif
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-unsafe-math-optimizations", "no-tree-vectorize")
#endif

typedef struct { float w1, b2, w2, step_size, bc2_sqrt, eps; } adam_scalars;

/* the scalars of Adam's step `step` (1 for the first) at learning rate lr */
static adam_scalars adam_at(int64_t step, double lr, double beta1, double beta2, double eps) {
    const double bc1 = 1.0 - pow(beta1, (double)step), bc2 = 1.0 - pow(beta2, (double)step);
    adam_scalars a = {(float)(1.0 - beta1), (float)beta2, (float)(1.0 - beta2), (float)(lr / bc1), (float)sqrt(bc2),
                      (float)eps};
    return a;
}

/* n parameters p, their gradient g and Adam's moments m, v: one step in place, blocks of 8 (the last through a
 * copy), every element through the same instructions. */
typedef float adam_v8 __attribute__((vector_size(32)));

static inline void adam_block(float *p, const float *g, float *m, float *v, adam_scalars a) {
    adam_v8 P, G, M, V, D;
    memcpy(&P, p, sizeof P); memcpy(&G, g, sizeof G); memcpy(&M, m, sizeof M); memcpy(&V, v, sizeof V);
    M = M + a.w1 * (G - M);
    V = V * a.b2 + a.w2 * G * G;
    for (int l = 0; l < 8; l++) D[l] = sqrtf(V[l]);
    P = P - a.step_size * (M / (D / a.bc2_sqrt + a.eps));
    memcpy(p, &P, sizeof P); memcpy(m, &M, sizeof M); memcpy(v, &V, sizeof V);
}

static void adam_update(float *p, const float *g, float *m, float *v, int64_t n, adam_scalars a) {
    int64_t i = 0;
    SCALAR_LOOP for (; i + 8 <= n; i += 8) adam_block(p + i, g + i, m + i, v + i, a);
    if (i < n) {
        float bp[8] = {0}, bg[8] = {0}, bm[8] = {0}, bv[8] = {0};
        const size_t k = (size_t)(n - i) * sizeof(float);
        memcpy(bp, p + i, k); memcpy(bg, g + i, k); memcpy(bm, m + i, k); memcpy(bv, v + i, k);
        adam_block(bp, bg, bm, bv, a);
        memcpy(p + i, bp, k); memcpy(m + i, bm, k); memcpy(v + i, bv, k);
    }
}

/* One unit's gP = Q G^T, gQ = P G (P, Q: r x d, G: d x d) and its M = P^T Q, a function called per unit (nothing
 * is combined across units). */
static __attribute__((noinline)) void kq_gradient_unit(int64_t r, int64_t d, const float *p, const float *q,
                                                       const float *g, float *gp, float *gq) {
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < d; j++) {
            float s = 0.0f, t = 0.0f;
            SCALAR_LOOP for (int64_t l = 0; l < d; l++) {
                s += q[i * d + l] * g[j * d + l];
                t += p[i * d + l] * g[l * d + j];
            }
            gp[i * d + j] = s;
            gq[i * d + j] = t;
        }
}

static __attribute__((noinline)) void kq_product_unit(int64_t r, int64_t d, const float *p, const float *q, float *o) {
    for (int64_t i = 0; i < d; i++)
        for (int64_t j = 0; j < d; j++) {
            float s = 0.0f;
            SCALAR_LOOP for (int64_t l = 0; l < r; l++) s += p[l * d + i] * q[l * d + j];
            o[i * d + j] = s;
        }
}

/* units u < U of M = P^T Q (P, Q: (U, r, d), G: (U, d, d)): gP = Q G^T, gQ = P G, each (U, r, d) */
static void kq_gradients(int64_t U, int64_t r, int64_t d, const float *P, const float *Q, const float *G, float *gP,
                         float *gQ) {
    for (int64_t u = 0; u < U; u++)
        kq_gradient_unit(r, d, P + u * r * d, Q + u * r * d, G + u * d * d, gP + u * r * d, gQ + u * r * d);
}

/* M = P^T Q for units u < U (M: (U, d, d)) */
static void kq_product(int64_t U, int64_t r, int64_t d, const float *P, const float *Q, float *M) {
    for (int64_t u = 0; u < U; u++) kq_product_unit(r, d, P + u * r * d, Q + u * r * d, M + u * d * d);
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* unit_update, exported by both engines (softmax_icl.engine.common.Update): a training step's update of units' parameters
 * from the loss's gradient in their M. kq = 0: the parameter is M itself (P: (U, d, d)); kq = 1: M = P^T Q (P, Q:
 * (U, r, d)), their gradients from the one in M, and M of the updated pair written for the next step. On the CPU
 * PyTorch's small operations for this (autograd's backward pass, Adam) cost up to a millisecond a step once an engine
 * has swept the caches; here they are one call. */
typedef struct {
    int64_t U, r, d, kq;
    float *P, *Q;                /* parameters, updated in place (Q: kq only) */
    const float *gM;             /* (U, d, d): the loss's gradient in M */
    float *g, *m, *v;            /* (1 + kq, U, r, d): the parameters' gradients (written), Adam's moments */
    float *M;                    /* (U, d, d): P^T Q after the update (kq only) */
    int64_t step;                /* Adam's step count after this step (1 for the first) */
    double lr, beta1, beta2, eps;
} update_t;

int unit_update(const update_t *u) {
    if (u->U < 1 || u->d < 1 || u->step < 1 || (u->kq && u->r < 1)) return 0;
    const adam_scalars a = adam_at(u->step, u->lr, u->beta1, u->beta2, u->eps);
    if (!u->kq) {
        const int64_t N = u->U * u->d * u->d;
        memcpy(u->g, u->gM, (size_t)N * sizeof(float));
        adam_update(u->P, u->g, u->m, u->v, N, a);
        return 1;
    }
    const int64_t N = u->U * u->r * u->d;
    kq_gradients(u->U, u->r, u->d, u->P, u->Q, u->gM, u->g, u->g + N);
    adam_update(u->P, u->g, u->m, u->v, N, a);
    adam_update(u->Q, u->g + N, u->m + N, u->v + N, N, a);
    kq_product(u->U, u->r, u->d, u->P, u->Q, u->M);
    return 1;
}

#endif
