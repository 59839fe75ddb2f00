/* Fused attention readout + squared-error loss + gradient in M, for the CPU trainer (softmax_icl.kernels).
 *
 * For every configuration (r, g) of an R x G layout and every task b:
 *   s_i   = x_i^T M x_q                                      (scores, i < n)
 *   pred  = sum_i a_i y_i,  a = softmax(s)   or   a = s / n  (linear)
 *   loss  = mean_b (pred - f)^2
 *   dloss/dM = sum_b (2 (pred - f) / B) sum_i (da_i-weighted y) x_i x_q^T
 * in three passes over the context, with the context held transposed (x^T: d rows of n + 1 values, the
 * query in the last column), so every pass is a vector loop over i.
 *
 * Each configuration is computed by one thread in a fixed order: the result does not depend on the number
 * of threads. The body is inlined with the input dimension d as a constant for d <= 12 (fully unrolled
 * inner loops) and with a run-time d above that.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

/* exp(x) for x <= 0 (Cephes' single-precision polynomial, relative error about 1e-7), written so the compiler
 * inlines and vectorises it; arguments below -87 give exp(-87) ~ 1.6e-38 instead of underflowing. */
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
    union { int32_t i; float f; } scale = { .i = ((int32_t)k + 127) << 23 };
    return p * scale.f;
}

typedef struct {
    int64_t R, G, B, n, d, fs;
    int softmax;
    const float *M, *xT, *y, *f;
    float *loss, *grad;
    int64_t start, stop; /* configurations [start, stop) of R * G */
    int ok;
} job_t;

static inline __attribute__((always_inline)) int run(const job_t *J, const int64_t D) {
    const int64_t G = J->G, B = J->B, n = J->n, n1 = J->n + 1;
    float *s = (float *)malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    double *gacc = (double *)malloc(sizeof(double) * (size_t)(D * D));
    float *q = (float *)malloc(sizeof(float) * (size_t)D), *rv = (float *)malloc(sizeof(float) * (size_t)D);
    if (!s || !gacc || !q || !rv) { free(s); free(gacc); free(q); free(rv); return 0; }
    for (int64_t rg = J->start; rg < J->stop; rg++) {
        const int64_t r = rg / G;
        const float *Mrg = J->M + rg * D * D;
        double acc_loss = 0.0;
        for (int64_t k = 0; k < D * D; k++) gacc[k] = 0.0;
        for (int64_t b = 0; b < B; b++) {
            const float *X = J->xT + (r * B + b) * D * n1;   /* X[k * n1 + i]; the query is column n */
            const float *Y = J->y + (rg * B + b) * n;
            for (int64_t k = 0; k < D; k++) {
                float t = 0.f;
                for (int64_t e = 0; e < D; e++) t += Mrg[k * D + e] * X[e * n1 + n];
                q[k] = t;
            }
            /* pass 1: scores and their maximum */
            float m = -3.0e38f;
            for (int64_t i = 0; i < n; i++) {
                float t = 0.f;
                for (int64_t k = 0; k < D; k++) t += X[k * n1 + i] * q[k];
                s[i] = t;
                m = t > m ? t : m;
            }
            float pred, c;
            if (J->softmax) {
                /* pass 2: weights, normaliser, weighted sum of the labels */
                float Z = 0.f, num = 0.f;
                for (int64_t i = 0; i < n; i++) {
                    float e = exp_nonpositive(s[i] - m);
                    s[i] = e;
                    Z += e;
                    num += e * Y[i];
                }
                pred = num / Z;
                const float err = pred - J->f[(rg * B + b) * J->fs];
                acc_loss += (double)err * err;
                c = 2.f * err / ((float)B * Z);
                /* pass 3: dloss/ds_i = c e_i (y_i - pred), contracted with x_i */
                for (int64_t k = 0; k < D; k++) rv[k] = 0.f;
                for (int64_t i = 0; i < n; i++) {
                    const float w = c * s[i] * (Y[i] - pred);
                    for (int64_t k = 0; k < D; k++) rv[k] += w * X[k * n1 + i];
                }
            } else {
                float num = 0.f;
                for (int64_t i = 0; i < n; i++) num += s[i] * Y[i];
                pred = num / (float)n;
                const float err = pred - J->f[(rg * B + b) * J->fs];
                acc_loss += (double)err * err;
                c = 2.f * err / ((float)B * (float)n);
                /* pass 3: dloss/ds_i = c y_i, contracted with x_i */
                for (int64_t k = 0; k < D; k++) rv[k] = 0.f;
                for (int64_t i = 0; i < n; i++)
                    for (int64_t k = 0; k < D; k++) rv[k] += c * Y[i] * X[k * n1 + i];
            }
            for (int64_t k = 0; k < D; k++)
                for (int64_t e = 0; e < D; e++) gacc[k * D + e] += (double)rv[k] * X[e * n1 + n];
        }
        J->loss[rg] = (float)(acc_loss / (double)B);
        for (int64_t k = 0; k < D * D; k++) J->grad[rg * D * D + k] = (float)gacc[k];
    }
    free(s); free(gacc); free(q); free(rv);
    return 1;
}

#define CASE(K) case K: return run(J, K);
static int dispatch(const job_t *J) {
    switch (J->d) {
        CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8) CASE(9) CASE(10) CASE(11) CASE(12)
        default: return run(J, J->d);
    }
}

static void *worker(void *arg) {
    job_t *J = (job_t *)arg;
    J->ok = dispatch(J);
    return NULL;
}

/* x (R,B,n+1,d) -> xT (R,B,d,n+1): every context held as d rows of n + 1 values. */
static void transpose(int64_t RB, int64_t n1, int64_t d, const float *x, float *xT) {
    for (int64_t rb = 0; rb < RB; rb++) {
        const float *src = x + rb * n1 * d;
        float *dst = xT + rb * d * n1;
        for (int64_t i = 0; i < n1; i++)
            for (int64_t k = 0; k < d; k++) dst[k * n1 + i] = src[i * d + k];
    }
}

/* M (R,G,d,d), x (R,B,n+1,d) with the query at position n, y (R,G,B,n), f: the target of configuration rg and
 * task b at f[(rg * B + b) * fs] -> loss (R,G), grad (R,G,d,d). Returns 1 on success, 0 if out of memory. */
int readout_mse(int64_t R, int64_t G, int64_t B, int64_t n, int64_t d, int softmax, int nthreads,
                const float *M, const float *x, const float *y, const float *f, int64_t fs, float *loss, float *grad) {
    const int64_t C = R * G;
    float *xT = (float *)malloc(sizeof(float) * (size_t)(R * B * d * (n + 1)));
    if (!xT) return 0;
    transpose(R * B, n + 1, d, x, xT);
    /* a thread costs tens of microseconds to start: give each at least ~2^17 scores */
    const int64_t work = C * B * (n > 0 ? n : 1) / (1 << 17);
    if (nthreads > work) nthreads = (int)work;
    if (nthreads < 1) nthreads = 1;
    if (nthreads > C) nthreads = (int)C;
    if (nthreads > 64) nthreads = 64;
    job_t jobs[64];
    pthread_t threads[64];
    int started[64] = {0};
    for (int t = 0; t < nthreads; t++) {
        job_t J = {R, G, B, n, d, fs, softmax, M, xT, y, f, loss, grad, C * t / nthreads, C * (t + 1) / nthreads, 0};
        jobs[t] = J;
    }
    for (int t = 1; t < nthreads; t++) started[t] = pthread_create(&threads[t], NULL, worker, &jobs[t]) == 0;
    int ok = 1;
    for (int t = 1; t < nthreads; t++)
        if (!started[t]) ok &= dispatch(&jobs[t]);            /* no thread: do it here */
    ok &= dispatch(&jobs[0]);
    for (int t = 1; t < nthreads; t++)
        if (started[t]) { pthread_join(threads[t], NULL); ok &= jobs[t].ok; }
    free(xT);
    return ok;
}
