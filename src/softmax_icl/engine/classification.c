/* Paper 2's CPU engine: the classification tasks drawn from the counter-based streams, and the loss and gradient of
 * the one-layer attention classifiers, each a context at a time while it is in cache.
 *
 * cls_draw: the tasks of softmax_icl.classification.tasks (see its docstring for the streams, the readings and the
 *   class-balanced pool), for every (seed, context) on its own: the same numbers whatever the thread count.
 * cls_loss: per configuration the mean cross-entropy over the contexts of its task, and its gradient in
 *   A = W_K^T W_Q and W_V (models.sa_logits; the softmax, 1/n-linear and unnormalised linear units), each
 *   configuration summed over its contexts in order on one thread.
 * cls_step: both for a training step, a chunk of contexts of one seed at a time while it is in cache (at the end).
 *
 * Streams: philox.h, the counter scheme of softmax_icl.streams in C, shared with paper 1's engine (regression.c):
 * value f of (key, tag, step, task) is word f % 4 of Philox4x32-10(key, (f / 4, task, step, tag)), converted to
 * normals and uniforms by the header's one convention (Box-Muller on a block's word pairs), the same bits whichever
 * vector width draws a value.
 */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adam.h"                     /* unit_update: the training step's update (Adam) */
#include "philox.h"                   /* stream_fill, stream_words: the counter-based streams */
#if defined(__AVX2__)
#include <immintrin.h>
#endif

#define CHUNK 64                       /* pool candidates scanned at a time (and the scratch's row multiple) */
/* Every loop over points runs over whole vectors of VEC points (the rows have room for them): a point is computed by
 * the same instructions wherever it sits, so a context drawn alone or padded into a larger one has the same bits
 * (vectorised division and square roots may be approximations refined by a Newton step, not the scalar results).
 * The code is compiled with -ffast-math, which assumes no infinities: masked lanes use finite sentinels. */
#define VEC 8
#define LOW (-1e30f)                    /* a score below any real one: exp(LOW - max) is 0 */

/* VEC floats or ints in a vector (GCC's vector extensions); loads and stores need no alignment. */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

static inline v8f ld(const float *p) { v8f v; memcpy(&v, p, sizeof v); return v; }
static inline v8i ldi(const int32_t *p) { v8i v; memcpy(&v, p, sizeof v); return v; }
static inline void st(float *p, v8f v) { memcpy(p, &v, sizeof v); }
static inline void sti(int32_t *p, v8i v) { memcpy(p, &v, sizeof v); }
static inline v8f splat(float x) { v8f v = {x, x, x, x, x, x, x, x}; return v; }
static inline v8i splati(int32_t x) { v8i v = {x, x, x, x, x, x, x, x}; return v; }
static inline v8f masked(v8i m, v8f a) { return (v8f)((v8i)a & m); }
/* a b + c rounded once where the CPU has FMA, as GCC contracts the loops over rows (it leaves `c += a * b` on vector
 * types as a product and a sum: other bits). */
static inline v8f fma8(v8f a, v8f b, v8f c) {
#if defined(__FMA__) && defined(__AVX2__)
    return (v8f)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    return a * b + c;
#endif
}
static inline float hsum(v8f v) { float s = 0.0f; for (int l = 0; l < VEC; l++) s += v[l]; return s; }

enum { READ_UNIFORM = 0, READ_BALANCED = 1, READ_CLUSTERED = 2, READ_SUBSPACE = 3 };

static inline int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

/* out[i] = v[idx[i]] for i < n (idx in 0..C-1): a copy, the same bits by either path (AVX2: a register lookup for
 * C <= 8). */
static void lookup(float *out, const int32_t *idx, const float *v, int64_t C, int64_t n) {
    int64_t i = 0;
#if defined(__AVX2__)
    if (C <= 8) {
        float t[8] = {0};
        memcpy(t, v, (size_t)C * sizeof(float));
        const __m256 tab = _mm256_loadu_ps(t);
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(out + i, _mm256_permutevar8x32_ps(tab, _mm256_loadu_si256((const __m256i *)(idx + i))));
    }
#endif
    for (; i < n; i++) out[i] = v[idx[i]];
}

/* The table v (C <= 8 entries) as a register, for lookup8 (AVX2); the entries from C on are 0. */
#if defined(__AVX2__)
typedef __m256 table8;
static inline table8 table_of(const float *v, int64_t C) {
    float t[8] = {0};
    memcpy(t, v, (size_t)(C < 8 ? C : 8) * sizeof(float));
    return _mm256_loadu_ps(t);
}
/* v[idx[i]] for the VEC indices at idx: what lookup writes. */
static inline v8f lookup8(table8 tab, const float *v, int64_t C, const int32_t *idx) {
    if (C <= 8) return (v8f)_mm256_permutevar8x32_ps(tab, _mm256_loadu_si256((const __m256i *)idx));
    v8f r; for (int l = 0; l < VEC; l++) r[l] = v[idx[l]]; return r;
}
#else
typedef int table8;
static inline table8 table_of(const float *v, int64_t C) { (void)v; (void)C; return 0; }
static inline v8f lookup8(table8 tab, const float *v, int64_t C, const int32_t *idx) {
    (void)tab; (void)C; v8f r; for (int l = 0; l < VEC; l++) r[l] = v[idx[l]]; return r;
}
#endif

/* ----------------------------------------------------------------------------------------------------------------
 * cls_draw
 */

typedef struct {
    int64_t S, T, G, n_max, C_max, P_max, d_max;
    int64_t first;                     /* task index of the first context */
    int64_t step;
    const uint32_t *key_seed;          /* (S, 2) */
    const uint32_t *key_coord;         /* (S, d_max, 2) */
    const uint32_t *key_proto;         /* (S, d_max, P_max, 2) */
    const int32_t *g_seed, *g_code, *g_P, *g_C, *g_d, *g_k, *g_n;   /* (G,): g_n = points - 1 */
    const float *g_tau;                /* (G,) */
    int32_t need_class;                /* some task draws the class of a point (balanced, clustered) */
    float *xs;                         /* (G, T, d_max, np), np = n_max rounded up to VEC: zero beyond a context */
    float *xq;                         /* (G, T, d_max) */
    int32_t *lab;                      /* (G, T, np) */
    int32_t *lq;                       /* (G, T) */
    float *protos;                     /* (G, T, C_max, P_max, d_max) or NULL */
    int64_t *length_words;             /* (S, T) or NULL */
    int64_t threads;
    uint8_t *work;                     /* threads x cls_draw_workspace bytes */
} draw_spec;

/* Per-thread scratch (floats and ints; a context's rows padded to a multiple of CHUNK). */
typedef struct {
    float *zx;       /* (d_max, n1p): input normals of the context, coordinate-major */
    float *zp;       /* (d_max, P_max, C_maxp): prototype normals */
    float *pr;       /* (C_max, P_max, d_max): the task's prototypes */
    float *xh;       /* (d_max, n1p): the task's inputs */
    float *cx;       /* (d_max, n1p): each point's class vector (clustered tasks) */
    float *norm;     /* (n1p) */
    float *cz;       /* (d_max, CHUNK): pool candidates */
    float *cnorm;    /* (CHUNK) */
    float *first;    /* (C_max, d_max): the first candidate of each class */
    float *tab;      /* (C_max) */
    uint32_t *m24;   /* (n1p) */
    int32_t *kc;     /* (n1p): drawn class */
    int32_t *lbl;    /* (n1p): label */
    int32_t *cl;     /* (CHUNK): candidate labels */
    int32_t *order;  /* (n1p): points grouped by class, in point order */
    int32_t *start;  /* (C_max + 1) */
    int32_t *need;   /* (C_max) */
    int32_t *found;  /* (C_max) */
    int32_t *has_first; /* (C_max) */
} scratch;

static int64_t draw_floats(const draw_spec *s) {
    int64_t n1p = round_up(s->n_max + 1, CHUNK), Cp = round_up(s->C_max, 4);
    return 3 * s->d_max * n1p + s->d_max * s->P_max * Cp + s->C_max * s->P_max * s->d_max + n1p
           + s->d_max * CHUNK + CHUNK + s->C_max * s->d_max + s->C_max;
}

static int64_t draw_ints(const draw_spec *s) {
    int64_t n1p = round_up(s->n_max + 1, CHUNK);
    return 4 * n1p + CHUNK + (s->C_max + 1) + 3 * s->C_max;
}

int64_t cls_draw_workspace(const draw_spec *s) { return 4 * (draw_floats(s) + draw_ints(s)) + 64; }

static scratch carve(const draw_spec *s, uint8_t *base) {
    int64_t n1p = round_up(s->n_max + 1, CHUNK), Cp = round_up(s->C_max, 4);
    int64_t dm = s->d_max, Pm = s->P_max, Cm = s->C_max;
    float *f = (float *)base;
    scratch w;
    w.zx = f; f += dm * n1p;
    w.zp = f; f += dm * Pm * Cp;
    w.pr = f; f += Cm * Pm * dm;
    w.xh = f; f += dm * n1p;
    w.cx = f; f += dm * n1p;
    w.norm = f; f += n1p;
    w.cz = f; f += dm * CHUNK;
    w.cnorm = f; f += CHUNK;
    w.first = f; f += Cm * dm;
    w.tab = f; f += Cm;
    int32_t *i = (int32_t *)f;
    w.m24 = (uint32_t *)i; i += n1p;
    w.kc = i; i += n1p;
    w.lbl = i; i += n1p;
    w.order = i; i += n1p;
    w.cl = i; i += CHUNK;
    w.start = i; i += Cm + 1;
    w.need = i; i += Cm;
    w.found = i; i += Cm;
    w.has_first = i;
    return w;
}

static key_t2 key_at(const uint32_t *k, int64_t i) { key_t2 r = {k[2 * i], k[2 * i + 1]}; return r; }

/* inv[p] = 1 / max(sqrt(inv[p]), 1e-30), p < m, as IEEE sqrt and division. Under -ffast-math GCC writes 1 / sqrtf
 * as an estimate refined by one Newton step, and AVX-512 CPUs estimate differently in 512-bit vectors (vrsqrt14ps)
 * than in narrower ones and scalars (vrsqrtps, vrsqrtss; AMD's and Intel's estimates differ too): a point's unit
 * vector depended on where in a loop it fell (alone or in a sweep, padded or not) and on the CPU. Exact operations
 * round alike in every lane, width and CPU. Not inlined: its options differ. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-unsafe-math-optimizations")
#endif
static __attribute__((noinline)) void exact_inverse_norms(float *inv, int64_t m) {
    for (int64_t p = 0; p < m; p++) inv[p] = 1.0f / fmaxf(sqrtf(inv[p]), 1e-30f);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

/* The inverse norms 1 / max(|x_p|, 1e-30) of the points 0 .. m-1 of src (d coordinates, row stride ld), a block of
 * VEC points at a time with its sum of squares in a register (the coordinates added in order, as by rows). */
static void inverse_norms(const float *src, int64_t ld_, int64_t d, int64_t m, float *inv) {
    m = round_up(m, VEC);
    for (int64_t p = 0; p < m; p += VEC) {
        v8f ss = splat(0.0f);
        for (int64_t c = 0; c < d; c++) { v8f x = ld(src + c * ld_ + p); ss = fma8(x, x, ss); }
        st(inv + p, ss);
    }
    exact_inverse_norms(inv, m);
}

/* dst = the points 0 .. m-1 of src normalised, x / max(|x|, 1e-30) (dst may be src). */
static void normalise_points(float *dst, const float *src, int64_t ld_, int64_t d, int64_t m, float *inv) {
    inverse_norms(src, ld_, d, m, inv);
    m = round_up(m, VEC);
    for (int64_t c = 0; c < d; c++) {
        const float *x = src + c * ld_;
        float *y = dst + c * ld_;
        for (int64_t p = 0; p < m; p++) y[p] = x[p] * inv[p];
    }
}

/* lbl[p] = argmax over (class k < C, prototype q < P) of pr_{k,q}^T x_p, as its class (the first maximum), for the
 * points p < m of xh (d coordinates, row stride ld): a block of VEC points at a time, its scores, best score and label
 * in registers (each score the coordinates' products added in order from 0, as a loop over rows would: the same
 * bits, a third of the loads and no stores). */
static void label_points(const float *pr, int64_t Pm, int64_t dm, int64_t C, int64_t P, const float *xh, int64_t ld_,
                         int64_t d, int64_t m, int32_t *lbl) {
    m = round_up(m, VEC);
    for (int64_t p = 0; p < m; p += VEC) {
        v8f best = splat(0.0f);
        v8i lb = splati(0);
        for (int64_t k = 0; k < C; k++)
            for (int64_t q = 0; q < P; q++) {
                const float *v = pr + (k * Pm + q) * dm;
                v8f sc = splat(0.0f);
                for (int64_t c = 0; c < d; c++) sc = fma8(splat(v[c]), ld(xh + c * ld_ + p), sc);
                if (k == 0 && q == 0) { best = sc; continue; }
                v8i up = sc > best;                    /* lanes of all ones where this class scores higher */
                best = (v8f)(((v8i)sc & up) | ((v8i)best & ~up));
                lb = (splati((int32_t)k) & up) | (lb & ~up);
            }
        sti(lbl + p, lb);
    }
}

/* Write the points 0 .. m-1 (0: the query) of task g, context t: their d_max coordinates from xh (zero from d on;
 * scaled by inv on the way when it is given) and their labels. */
static void put_points(const draw_spec *s, int64_t g, int64_t t, const float *xh, int64_t ld, int64_t d,
                       const int32_t *lbl, int64_t m, const float *inv) {
    int64_t dm = s->d_max, nm = round_up(s->n_max, VEC), gt = g * s->T + t;
    float *xq = s->xq + gt * dm, *xs = s->xs + gt * dm * nm;
    int32_t *lab = s->lab + gt * nm;
    for (int64_t c = 0; c < dm; c++) {
        float *row = xs + c * nm;
        if (c < d && inv) {                       /* the points normalised on the way */
            const float *x = xh + c * ld;
            xq[c] = x[0] * inv[0];
            for (int64_t p = 1; p < m; p++) row[p - 1] = x[p] * inv[p];
            memset(row + (m - 1), 0, (size_t)(nm - (m - 1)) * sizeof(float));
        } else if (c < d) {
            xq[c] = xh[c * ld];
            memcpy(row, xh + c * ld + 1, (size_t)(m - 1) * sizeof(float));
            memset(row + (m - 1), 0, (size_t)(nm - (m - 1)) * sizeof(float));
        } else {
            xq[c] = 0.0f;
            memset(row, 0, (size_t)nm * sizeof(float));
        }
    }
    s->lq[gt] = lbl[0];
    memcpy(lab, lbl + 1, (size_t)(m - 1) * sizeof(int32_t));
    memset(lab + (m - 1), 0, (size_t)(nm - (m - 1)) * sizeof(int32_t));
}

/* The class-balanced points 0 .. m-1 of task g (see tasks.py): candidates scanned in pool order until every class
 * has the candidates its points take, or the pool (R = 16 m) ends. */
static void balanced(const draw_spec *s, scratch *w, int64_t sd, int64_t t, int64_t C, int64_t d,
                     int64_t m) {
    int64_t dm = s->d_max, Pm = s->P_max, n1p = round_up(s->n_max + 1, CHUNK), R = 16 * m;
    uint32_t step = (uint32_t)s->step, task = (uint32_t)(s->first + t);
    for (int64_t p = 0; p < m; p++) w->kc[p] = (int32_t)(((uint64_t)w->m24[p] * (uint64_t)C) >> 24);
    for (int64_t k = 0; k <= C; k++) w->start[k] = 0;
    for (int64_t p = 0; p < m; p++) w->start[w->kc[p] + 1]++;
    for (int64_t k = 0; k < C; k++) { w->need[k] = w->start[k + 1]; w->start[k + 1] += w->start[k];
                                      w->found[k] = 0; w->has_first[k] = 0; }
    for (int64_t p = 0; p < m; p++) { int32_t k = w->kc[p]; w->order[w->start[k] + w->found[k]++] = (int32_t)p; }
    for (int64_t k = 0; k < C; k++) w->found[k] = 0;
    int64_t left = m;
    for (int64_t j0 = 0; j0 < R && left > 0; j0 += CHUNK) {
        int64_t cnt = R - j0 < CHUNK ? R - j0 : CHUNK;
        for (int64_t c = 0; c < d; c++)
            stream_fill(key_at(s->key_coord, sd * dm + c), 0x205, step, task, j0, cnt, 1, w->cz + c * CHUNK);
        normalise_points(w->cz, w->cz, CHUNK, d, cnt, w->cnorm);
        label_points(w->pr, Pm, dm, C, 1, w->cz, CHUNK, d, cnt, w->cl);
        for (int64_t j = 0; j < cnt && left > 0; j++) {
            int32_t k = w->cl[j];
            if (!w->has_first[k]) {
                w->has_first[k] = 1;
                for (int64_t c = 0; c < d; c++) w->first[k * dm + c] = w->cz[c * CHUNK + j];
            }
            if (w->found[k] < w->need[k]) {
                int64_t p = w->order[w->start[k] + w->found[k]++];
                for (int64_t c = 0; c < d; c++) w->xh[c * n1p + p] = w->cz[c * CHUNK + j];
                w->lbl[p] = k;
                left--;
            }
        }
    }
    if (left > 0) {   /* the pool ended: classes with too few candidates reuse them, empty ones borrow */
        for (int64_t k = 0; k < C; k++) {
            int64_t have = w->found[k];
            if (have >= w->need[k]) continue;
            int64_t kk = k;
            if (have == 0)
                for (int64_t o = 1; o < C; o++)
                    if (w->has_first[(k + o) % C]) { kk = (k + o) % C; break; }
            for (int64_t r = have; r < w->need[k]; r++) {
                int64_t p = w->order[w->start[k] + r];
                for (int64_t c = 0; c < d; c++)
                    w->xh[c * n1p + p] = have ? w->xh[c * n1p + w->order[w->start[k] + r % have]] : w->first[kk * dm + c];
                w->lbl[p] = (int32_t)kk;
            }
        }
    }
}

static void draw_item(const draw_spec *s, scratch *w, int64_t sd, int64_t t) {
    int64_t dm = s->d_max, Pm = s->P_max, Cm = s->C_max, n1 = s->n_max + 1;
    int64_t n1p = round_up(n1, CHUNK), Cp = round_up(Cm, 4), n1v = round_up(n1, VEC);
    uint32_t step = (uint32_t)s->step, task = (uint32_t)(s->first + t);
    for (int64_t c = 0; c < dm; c++) {
        stream_fill(key_at(s->key_coord, sd * dm + c), 0x201, step, task, 0, n1v, 1, w->zx + c * n1p);
        for (int64_t q = 0; q < Pm; q++)
            stream_fill(key_at(s->key_proto, (sd * dm + c) * Pm + q), 0x202, step, task, 0, Cm, 1,
                        w->zp + (c * Pm + q) * Cp);
    }
    if (s->need_class) {
        stream_words(key_at(s->key_seed, sd), 0x203, step, task, 0, n1v, w->m24);
        for (int64_t p = 0; p < n1v; p++) w->m24[p] >>= 8;
    }
    if (s->length_words) {
        uint32_t lw;
        stream_words(key_at(s->key_seed, sd), 0x204, step, task, 0, 1, &lw);
        s->length_words[sd * s->T + t] = (int64_t)(lw >> 8);
    }
    int64_t pr_C = -1, pr_dp = -1;          /* the (C, dp) the prototypes in w->pr were made for */
    int cx_ready = 0;                       /* w->cx holds the class vectors of the points for these prototypes */
    for (int64_t g = 0; g < s->G; g++) {
        if (s->g_seed[g] != sd) continue;
        int64_t code = s->g_code[g], C = s->g_C[g], P = s->g_P[g], d = s->g_d[g];
        int64_t dp = code == READ_SUBSPACE && s->g_k[g] < d ? s->g_k[g] : d;     /* prototype coordinates in use */
        if (C != pr_C || dp != pr_dp) { pr_C = C; pr_dp = dp; cx_ready = 0; }
        else goto made;                     /* the same prototypes as the previous task of this seed */
        /* prototypes: normalise(z) over the first dp coordinates, for every class and prototype slot */
        for (int64_t k = 0; k < Cm; k++)
            for (int64_t q = 0; q < Pm; q++) {
                float *v = w->pr + (k * Pm + q) * dm, nn = 0.0f;
                for (int64_t c = 0; c < dm; c++) { v[c] = c < dp ? w->zp[(c * Pm + q) * Cp + k] : 0.0f; nn += v[c] * v[c]; }
                nn = fmaxf(sqrtf(nn), 1e-30f);
                for (int64_t c = 0; c < dm; c++) v[c] = v[c] / nn;
            }
    made:
        if (s->protos) memcpy(s->protos + (g * s->T + t) * Cm * Pm * dm, w->pr, (size_t)(Cm * Pm * dm) * sizeof(float));
        int64_t m = code == READ_BALANCED ? s->g_n[g] + 1 : n1;
        if (code == READ_UNIFORM || code == READ_SUBSPACE) {
            normalise_points(w->xh, w->zx, n1p, d, n1, w->norm);
            label_points(w->pr, Pm, dm, C, P, w->xh, n1p, d, n1, w->lbl);
        } else if (code == READ_CLUSTERED) {
            float tau = s->g_tau[g], sq = sqrtf((float)d);
            if (!cx_ready) {               /* each point's class vector c_k, shared by the seed's clustered tasks */
                for (int64_t p = 0; p < n1v; p++) w->kc[p] = (int32_t)(((uint64_t)w->m24[p] * (uint64_t)C) >> 24);
                for (int64_t c = 0; c < d; c++) {
                    for (int64_t k = 0; k < C; k++) w->tab[k] = w->pr[k * Pm * dm + c];
                    lookup(w->cx + c * n1p, w->kc, w->tab, C, n1v);
                }
                cx_ready = 1;
            }
            /* x = c_k + tau z / sqrt(d) and its sum of squares, a block of VEC points at a time (the same operations
             * as a loop over each row, then inverse_norms) */
            const v8f tv = splat(tau), sv = splat(sq);
            for (int64_t p = 0; p < n1v; p += VEC) {
                v8f ss = splat(0.0f);
                for (int64_t c = 0; c < d; c++) {
                    v8f x = ld(w->zx + c * n1p + p) * tv / sv + ld(w->cx + c * n1p + p);
                    st(w->xh + c * n1p + p, x);
                    ss = fma8(x, x, ss);
                }
                st(w->norm + p, ss);
            }
            exact_inverse_norms(w->norm, n1v);
            memcpy(w->lbl, w->kc, (size_t)n1 * sizeof(int32_t));
        } else {
            balanced(s, w, sd, t, C, d, m);
        }
        put_points(s, g, t, w->xh, n1p, d, w->lbl, m, code == READ_CLUSTERED ? w->norm : NULL);
    }
}

/* A parallel loop over items 0 .. count-1: threads take the next `grain` items from a shared counter until none are
 * left, so a thread that the machine runs slower takes fewer. Each item writes only its own outputs, whichever thread
 * runs it, so the numbers do not depend on the thread count or the schedule. */
typedef struct {
    void (*item)(const void *spec, uint8_t *work, int64_t i);
    const void *spec;
    uint8_t *work;             /* per thread: stride bytes each */
    int64_t stride, count, grain;
    int64_t next;              /* the shared counter */
} pool;

typedef struct { pool *p; int64_t thread; } pool_arg;

static void *pool_run(void *arg) {
    pool_arg *a = (pool_arg *)arg;
    pool *p = a->p;
    uint8_t *work = p->work + a->thread * p->stride;
    for (;;) {
        int64_t lo = __atomic_fetch_add(&p->next, p->grain, __ATOMIC_RELAXED);
        if (lo >= p->count) break;
        int64_t hi = lo + p->grain < p->count ? lo + p->grain : p->count;
        for (int64_t i = lo; i < hi; i++) p->item(p->spec, work, i);
    }
    return NULL;
}

static void parallel_for(pool *p, int64_t threads) {
    pthread_t tid[64];
    pool_arg args[64];
    int started[64] = {0};
    int64_t nth = threads < 1 ? 1 : (threads > 64 ? 64 : threads);
    p->next = 0;
    for (int64_t i = 0; i < nth; i++) { args[i].p = p; args[i].thread = i; }
    for (int64_t i = 1; i < nth; i++) started[i] = pthread_create(&tid[i], NULL, pool_run, &args[i]) == 0;
    pool_run(&args[0]);
    for (int64_t i = 1; i < nth; i++)
        if (started[i]) pthread_join(tid[i], NULL);
}

static void draw_one(const void *spec, uint8_t *work, int64_t i) {
    const draw_spec *s = (const draw_spec *)spec;
    scratch w = carve(s, work);
    draw_item(s, &w, i / s->T, i % s->T);
}

int cls_draw(const draw_spec *s) {
    pool p = {draw_one, s, s->work, cls_draw_workspace(s), s->S * s->T, 4, 0};
    parallel_for(&p, s->threads);
    return 1;
}

/* ----------------------------------------------------------------------------------------------------------------
 * cls_loss
 */

typedef struct {
    int64_t K, T, n_max, C_max, d_max;
    const int32_t *group, *code, *C, *d;     /* (K,): task, model (0 softmax, 1 linear s/n, 2 linear s), sizes */
    const int32_t *n;                        /* (K,) context lengths, or NULL with lengths */
    const int64_t *lengths;                  /* (K, T) context lengths (a mixture), or NULL */
    const float *A, *WV;                     /* (K, D, D), D = d_max + C_max */
    const float *xs, *xq;                    /* tasks (G, T, d_max, np), (G, T, d_max); np = n_max rounded up to VEC */
    const int32_t *lab, *lq;                 /* (G, T, np), (G, T) */
    float *loss;                             /* (K,) mean cross-entropy */
    float *gA, *gWV;                         /* (K, D, D) gradients of loss[k] */
    float *logits;                           /* cls_logits: (K, T, C_max) */
    int64_t threads;
    uint8_t *work;                           /* threads x cls_loss_workspace bytes */
} loss_spec;

int64_t cls_loss_workspace(const loss_spec *s) {
    int64_t D = s->d_max + s->C_max;
    return 4 * (3 * round_up(s->n_max, VEC) + 8 * D) + 64;
}

/* Blocks of VEC = 8 points as GCC/Clang vector types (AVX2 registers where there are some; the compiler lowers them
 * otherwise). Loads and stores go through memcpy: no alignment is assumed. */

/* sum_i w[i] x[i] over i < n (n a multiple of VEC), with four independent accumulators (a single one would wait
 * for every addition). */
static float dot(const float *w, const float *x, int64_t n) {
    v8f a0 = splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 * VEC <= n; i += 4 * VEC) {
        a0 += ld(w + i) * ld(x + i);
        a1 += ld(w + i + VEC) * ld(x + i + VEC);
        a2 += ld(w + i + 2 * VEC) * ld(x + i + 2 * VEC);
        a3 += ld(w + i + 3 * VEC) * ld(x + i + 3 * VEC);
    }
    for (; i < n; i += VEC) a0 += ld(w + i) * ld(x + i);
    return hsum((a0 + a1) + (a2 + a3));
}

/* out[c] = sum of w[i] over the i < n with lab[i] = c, for c < C (n a multiple of VEC), four accumulators each. */
static void sum_by_label(float *out, const float *w, const int32_t *lab, int64_t C, int64_t n) {
    for (int32_t c = 0; c < (int32_t)C; c++) {
        const v8i cv = splati(c);
        v8f a0 = splat(0.0f), a1 = a0, a2 = a0, a3 = a0;
        int64_t i = 0;
        for (; i + 4 * VEC <= n; i += 4 * VEC) {
            a0 += masked(ldi(lab + i) == cv, ld(w + i));
            a1 += masked(ldi(lab + i + VEC) == cv, ld(w + i + VEC));
            a2 += masked(ldi(lab + i + 2 * VEC) == cv, ld(w + i + 2 * VEC));
            a3 += masked(ldi(lab + i + 3 * VEC) == cv, ld(w + i + 3 * VEC));
        }
        for (; i < n; i += VEC) a0 += masked(ldi(lab + i) == cv, ld(w + i));
        out[c] = hsum((a0 + a1) + (a2 + a3));
    }
}

#define INLINE static inline __attribute__((always_inline))

/* The small per-context pieces the generic loops and the programs for fixed (d, C) share (inlined: in a program d and
 * C are constants). A, W_V: a configuration's D x D matrices, the x part in columns 0 .. d-1, the y part from dm. */

/* u = A[:, :d] x_q: rows 0 .. d-1 (x part) and dm .. dm+C-1 (y part) */
INLINE void query_keys(const float *A, const float *q, float *u, int64_t d, int64_t C, int64_t dm, int64_t D) {
    for (int64_t e = 0; e < d; e++) {
        float v = 0.0f;
        for (int64_t f = 0; f < d; f++) v += A[e * D + f] * q[f];
        u[e] = v;
    }
    for (int64_t c = 0; c < C; c++) {
        float v = 0.0f;
        for (int64_t f = 0; f < d; f++) v += A[(dm + c) * D + f] * q[f];
        u[dm + c] = v;
    }
}

/* logits z_c = W_V[y_c] . [h_x; h_y] for c < nl */
INLINE void logits_of(const float *WV, const float *hx, const float *hy, float *lg, int64_t nl, int64_t d, int64_t C,
                      int64_t dm, int64_t D) {
    for (int64_t c = 0; c < nl; c++) {
        const float *wr = WV + (dm + c) * D;
        float v = 0.0f;
        for (int64_t f = 0; f < d; f++) v += wr[f] * hx[f];
        for (int64_t f = 0; f < C; f++) v += wr[dm + f] * hy[f];
        lg[c] = v;
    }
}

/* The cross-entropy of label y from the logits lg (added to *total), then the backward pass from dL/dlogits =
 * (p - e_y) / T (lg overwritten by it) to dL/dW_V (added to gWV) and dL/dh (dhx, dhy). Returns rho = dhx^T h_x +
 * dhy^T h_y (= sum_j a_j da_j / Z; softmax only, else 0). */
INLINE float head_backward(float *lg, int64_t y, float inv_T, const float *WV, float *gWV, const float *hx,
                           const float *hy, float *dhx, float *dhy, int64_t code, double *total, int64_t d, int64_t C,
                           int64_t dm, int64_t D) {
    float lm = lg[0];
    for (int64_t c = 1; c < C; c++) lm = fmaxf(lm, lg[c]);
    float ly = lg[y], Zl = 0.0f;
    for (int64_t c = 0; c < C; c++) { lg[c] = expf(lg[c] - lm); Zl += lg[c]; }
    *total += (double)(logf(Zl) + lm - ly);             /* logsumexp(logits) - logits[y] */
    float izl = 1.0f / Zl;
    for (int64_t c = 0; c < C; c++) lg[c] = (lg[c] * izl - (c == y ? 1.0f : 0.0f)) * inv_T;
    for (int64_t f = 0; f < d; f++) dhx[f] = 0.0f;
    for (int64_t f = 0; f < C; f++) dhy[f] = 0.0f;
    for (int64_t c = 0; c < C; c++) {
        const float *wr = WV + (dm + c) * D;
        float *gr = gWV + (dm + c) * D, l = lg[c];
        for (int64_t f = 0; f < d; f++) { gr[f] += l * hx[f]; dhx[f] += l * wr[f]; }
        for (int64_t f = 0; f < C; f++) { gr[dm + f] += l * hy[f]; dhy[f] += l * wr[dm + f]; }
    }
    float rho = 0.0f;
    if (code == 0) {
        for (int64_t f = 0; f < d; f++) rho += dhx[f] * hx[f];
        for (int64_t f = 0; f < C; f++) rho += dhy[f] * hy[f];
    }
    return rho;
}

/* dA[:, :d] += du x_q^T */
INLINE void add_key_gradient(float *gA, const float *dux, const float *duy, const float *q, int64_t d, int64_t C,
                             int64_t dm, int64_t D) {
    for (int64_t e = 0; e < d; e++) for (int64_t f = 0; f < d; f++) gA[e * D + f] += dux[e] * q[f];
    for (int64_t c = 0; c < C; c++) for (int64_t f = 0; f < d; f++) gA[(dm + c) * D + f] += duy[c] * q[f];
}

/* The forward pass of configuration k on context gt (length n): the scores' y-part and x-part into u, the weights
 * a (softmax: exp(s_i - max), not normalised; linear: s_i / n or s_i; 0 beyond n), h = sum_i a_i [x_i; y_i] / Z into
 * hx, hy, and the logits of the classes c < nl into lg. Returns 1/Z (softmax) or 1 (linear). */
typedef struct { float *sc, *a, *u, *hx, *hy, *lg; } fwd_buf;

static float forward_context(const loss_spec *s, int64_t k, int64_t gt, int64_t n, const fwd_buf *b, int64_t nl) {
    int64_t dm = s->d_max, Cm = s->C_max, D = dm + Cm, np = round_up(s->n_max, VEC), nb = round_up(n, VEC);
    int64_t code = s->code[k], C = s->C[k], d = s->d[k];
    const float *A = s->A + k * D * D, *WV = s->WV + k * D * D;
    const float *x = s->xs + gt * dm * np, *q = s->xq + gt * dm;
    const int32_t *lab = s->lab + gt * np;
    float *sc = b->sc, *a = b->a, *u = b->u, *hx = b->hx, *hy = b->hy;
    query_keys(A, q, u, d, C, dm, D);
    /* scores s_i = x_i^T u_x + u_y[label_i] (LOW beyond the context) */
    {   /* a block of VEC points at a time, its scores in a register (the coordinates' products added in order from 0
         * to the label's term, as a loop over rows would: the same bits) */
        const table8 tab = table_of(u + dm, C);
        for (int64_t i = 0; i < nb; i += VEC) {
            v8f v = lookup8(tab, u + dm, C, lab + i);
            for (int64_t e = 0; e < d; e++) v = fma8(splat(u[e]), ld(x + e * np + i), v);
            st(sc + i, v);
        }
        for (int64_t i = n; i < nb; i++) sc[i] = LOW;
    }
    /* attention weights */
    float iz = 1.0f, lin = code == 1 ? 1.0f / (float)n : 1.0f;
    if (code == 0) {
        float mx = sc[0];
        for (int64_t i = 1; i < nb; i++) mx = fmaxf(mx, sc[i]);
        for (int64_t i = 0; i < nb; i++) a[i] = expf(sc[i] - mx);
        float Z = 0.0f;
        for (int64_t i = 0; i < nb; i += VEC) Z += hsum(ld(a + i));
        iz = 1.0f / Z;
    } else {
        for (int64_t i = 0; i < nb; i++) a[i] = i < n ? sc[i] * lin : 0.0f;
    }
    /* h = sum_i a_i [x_i; y_i] / Z */
    for (int64_t e = 0; e < d; e++) hx[e] = dot(a, x + e * np, nb) * iz;
    sum_by_label(hy, a, lab, C, nb);
    for (int64_t c = 0; c < C; c++) hy[c] *= iz;
    logits_of(WV, hx, hy, b->lg, nl, d, C, dm, D);
    return iz;
}

/* A thread's scratch for one configuration's contexts (cls_loss_workspace): the rows sc, a, da of np floats each,
 * then the small vectors of the forward and backward passes; both loss loops carve it here. */
typedef struct { float *a, *da, *hx, *dhx, *dux, *hy, *dhy, *duy, *lg; fwd_buf fb; } ctx_buf;

static ctx_buf ctx_buffers(const loss_spec *s, float *work) {
    const int64_t dm = s->d_max, Cm = s->C_max, D = dm + Cm, np = round_up(s->n_max, VEC);
    ctx_buf b;
    float *sc = work, *u;
    b.a = sc + np; b.da = b.a + np; u = b.da + np;
    b.hx = u + D; b.dhx = b.hx + dm; b.dux = b.dhx + dm;
    b.hy = b.dux + dm; b.dhy = b.hy + Cm; b.duy = b.dhy + Cm; b.lg = b.duy + Cm;
    const fwd_buf fb = {sc, b.a, u, b.hx, b.hy, b.lg};
    b.fb = fb;
    return b;
}

/* The contexts 0 .. s->T - 1 of configuration k added in order to gA, gWV (its gradient, the mean over T_all
 * contexts) and *total_out (the sum of their cross-entropies). A pass over a context's points runs over whole blocks
 * of VEC points (the rows are padded to whole blocks); the weights of points beyond the context length are 0. */
static void loss_contexts(const loss_spec *s, int64_t k, float *work, int64_t T_all, float *gA, float *gWV,
                          double *total_out) {
    int64_t dm = s->d_max, Cm = s->C_max, D = dm + Cm, np = round_up(s->n_max, VEC), T = s->T;
    int64_t g = s->group[k], code = s->code[k], C = s->C[k], d = s->d[k];
    const float *WV = s->WV + k * D * D;
    const ctx_buf b = ctx_buffers(s, work);
    float *a = b.a, *da = b.da, *hx = b.hx, *dhx = b.dhx, *dux = b.dux;
    float *hy = b.hy, *dhy = b.dhy, *duy = b.duy, *lg = b.lg;
    double total = *total_out;
    const float inv_T = 1.0f / (float)T_all;
    for (int64_t t = 0; t < T; t++) {
        int64_t gt = g * T + t;
        const float *x = s->xs + gt * dm * np, *q = s->xq + gt * dm;
        const int32_t *lab = s->lab + gt * np;
        int64_t n = s->lengths ? s->lengths[k * T + t] : s->n[k], nb = round_up(n, VEC);
        const float iz = forward_context(s, k, gt, n, &b.fb, C), lin = code == 1 ? 1.0f / (float)n : 1.0f;
        /* the cross-entropy of the query's label and the backward pass to dL/dh */
        const float rho = head_backward(lg, s->lq[gt], inv_T, WV, gWV, hx, hy, dhx, dhy, code, &total, d, C, dm, D);
        /* dL/da_i = dhx^T x_i + dhy[label_i]; dL/ds_i: softmax a_i (da_i - rho) / Z, linear da_i / n or da_i; 0
         * beyond n */
        {   /* a block of VEC points at a time in a register, as the scores above */
            const table8 tab = table_of(dhy, C);
            const v8f vz = splat(iz), vr = splat(rho), vl = splat(lin);
            for (int64_t i = 0; i < nb; i += VEC) {
                v8f v = lookup8(tab, dhy, C, lab + i);
                for (int64_t e = 0; e < d; e++) v = fma8(splat(dhx[e]), ld(x + e * np + i), v);
                st(da + i, code == 0 ? ld(a + i) * vz * (v - vr) : v * vl);
            }
            if (code != 0) for (int64_t i = n; i < nb; i++) da[i] = 0.0f;
        }
        /* du = sum_i ds_i [x_i; y_i]; dA[:, :d] += du x_q^T */
        for (int64_t e = 0; e < d; e++) dux[e] = dot(da, x + e * np, nb);
        sum_by_label(duy, da, lab, C, nb);
        add_key_gradient(gA, dux, duy, q, d, C, dm, D);
    }
    *total_out = total;
}

/* ---- The same passes with d and C known to the compiler (2 <= d, C <= FIXED): one program per (d, C), each point's
 * block of VEC points read once per pass with every sum over the points in registers. The generic functions above
 * take the other sizes. Each sum over points is a sum of per-lane partial sums (one per block, added in order) added
 * across the lanes at the end, so the numbers differ from the generic path's by float rounding. */
#define FIXED 6

/* acc + (a where lab == c, else 0): an add under a mask where the CPU has AVX-512VL */
INLINE v8f add_where(v8f acc, v8i lab, int32_t c, v8f a) {
#if defined(__AVX512VL__)
    return (v8f)_mm256_mask_add_ps((__m256)acc, _mm256_cmpeq_epi32_mask((__m256i)lab, (__m256i)splati(c)), (__m256)acc,
                                   (__m256)a);
#else
    return acc + masked(lab == splati(c), a);
#endif
}
INLINE v8f max8(v8f a, v8f b) { v8i m = a > b; return (v8f)(((v8i)a & m) | ((v8i)b & ~m)); }
INLINE float hmax(v8f v) { float m = v[0]; for (int l = 1; l < VEC; l++) m = fmaxf(m, v[l]); return m; }
/* lanes of all ones where the point i + l is in the context (i + l < n) */
INLINE v8i inside(int64_t i, int64_t n) {
    const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
    return (splati((int32_t)i) + lane) < splati((int32_t)n);
}

INLINE float forward_fixed(const loss_spec *s, int64_t k, int64_t gt, int64_t n, const fwd_buf *b, int64_t nl,
                           const int64_t d, const int64_t C) {
    int64_t dm = s->d_max, Cm = s->C_max, D = dm + Cm, np = round_up(s->n_max, VEC), nb = round_up(n, VEC);
    int64_t code = s->code[k];
    const float *A = s->A + k * D * D, *WV = s->WV + k * D * D;
    const float *x = s->xs + gt * dm * np, *q = s->xq + gt * dm;
    const int32_t *lab = s->lab + gt * np;
    float *sc = b->sc, *a = b->a, *u = b->u, *hx = b->hx, *hy = b->hy;
    query_keys(A, q, u, d, C, dm, D);
    /* scores s_i = x_i^T u_x + u_y[label_i] (LOW beyond the context) and their largest */
    const table8 tab = table_of(u + dm, C);
    v8f ue[FIXED], top = splat(LOW);
    for (int64_t e = 0; e < d; e++) ue[e] = splat(u[e]);
    for (int64_t i = 0; i < nb; i += VEC) {
        v8f v = lookup8(tab, u + dm, C, lab + i);
        for (int64_t e = 0; e < d; e++) v = fma8(ue[e], ld(x + e * np + i), v);
        if (i + VEC > n) { v8i in = inside(i, n); v = (v8f)(((v8i)v & in) | ((v8i)splat(LOW) & ~in)); }
        st(sc + i, v);
        top = max8(top, v);
    }
    float iz = 1.0f, lin = code == 1 ? 1.0f / (float)n : 1.0f;
    if (code == 0) {
        float mx = hmax(top);
        for (int64_t i = 0; i < nb; i++) a[i] = expf(sc[i] - mx);
    }
    /* Z = sum_i a_i and h = sum_i a_i [x_i; y_i] in one pass (linear: a_i = s_i / n or s_i, 0 beyond n) */
    v8f zs = splat(0.0f), hxs[FIXED], hys[FIXED];
    for (int64_t e = 0; e < d; e++) hxs[e] = zs;
    for (int64_t c = 0; c < C; c++) hys[c] = zs;
    const v8f vl = splat(lin);
    for (int64_t i = 0; i < nb; i += VEC) {
        v8f av;
        if (code == 0) av = ld(a + i);
        else {
            av = ld(sc + i) * vl;
            if (i + VEC > n) av = masked(inside(i, n), av);
            st(a + i, av);
        }
        zs += av;
        for (int64_t e = 0; e < d; e++) hxs[e] = fma8(av, ld(x + e * np + i), hxs[e]);
        const v8i lv = ldi(lab + i);
        for (int64_t c = 0; c < C; c++) hys[c] = add_where(hys[c], lv, (int32_t)c, av);
    }
    if (code == 0) iz = 1.0f / hsum(zs);
    for (int64_t e = 0; e < d; e++) hx[e] = hsum(hxs[e]) * iz;
    for (int64_t c = 0; c < C; c++) hy[c] = hsum(hys[c]) * iz;
    logits_of(WV, hx, hy, b->lg, nl, d, C, dm, D);
    return iz;
}

/* loss_contexts for configurations of these d and C */
INLINE void contexts_fixed(const loss_spec *s, int64_t k, float *work, int64_t T_all, float *gA, float *gWV,
                           double *total_out, const int64_t d, const int64_t C) {
    int64_t dm = s->d_max, Cm = s->C_max, D = dm + Cm, np = round_up(s->n_max, VEC), T = s->T;
    int64_t g = s->group[k], code = s->code[k];
    const float *WV = s->WV + k * D * D;
    const ctx_buf b = ctx_buffers(s, work);
    float *a = b.a, *hx = b.hx, *dhx = b.dhx, *dux = b.dux;
    float *hy = b.hy, *dhy = b.dhy, *duy = b.duy, *lg = b.lg;
    double total = *total_out;
    const float inv_T = 1.0f / (float)T_all;
    for (int64_t t = 0; t < T; t++) {
        int64_t gt = g * T + t;
        const float *x = s->xs + gt * dm * np, *q = s->xq + gt * dm;
        const int32_t *lab = s->lab + gt * np;
        int64_t n = s->lengths ? s->lengths[k * T + t] : s->n[k], nb = round_up(n, VEC);
        const float iz = forward_fixed(s, k, gt, n, &b.fb, C, d, C), lin = code == 1 ? 1.0f / (float)n : 1.0f;
        const float rho = head_backward(lg, s->lq[gt], inv_T, WV, gWV, hx, hy, dhx, dhy, code, &total, d, C, dm, D);
        /* da_i = dhx^T x_i + dhy[label_i]; ds_i (softmax a_i (da_i - rho) / Z, linear da_i / n or da_i, 0 beyond n);
         * du = sum_i ds_i [x_i; y_i]: one pass */
        const table8 tab = table_of(dhy, C);
        const v8f vz = splat(iz), vr = splat(rho), vl = splat(lin);
        v8f dh[FIXED], duxs[FIXED], duys[FIXED];
        for (int64_t e = 0; e < d; e++) { dh[e] = splat(dhx[e]); duxs[e] = splat(0.0f); }
        for (int64_t c = 0; c < C; c++) duys[c] = splat(0.0f);
        for (int64_t i = 0; i < nb; i += VEC) {
            v8f v = lookup8(tab, dhy, C, lab + i);
            for (int64_t e = 0; e < d; e++) v = fma8(dh[e], ld(x + e * np + i), v);
            v8f ds;
            if (code == 0) ds = ld(a + i) * vz * (v - vr);
            else {
                ds = v * vl;
                if (i + VEC > n) ds = masked(inside(i, n), ds);
            }
            for (int64_t e = 0; e < d; e++) duxs[e] = fma8(ds, ld(x + e * np + i), duxs[e]);
            const v8i lv = ldi(lab + i);
            for (int64_t c = 0; c < C; c++) duys[c] = add_where(duys[c], lv, (int32_t)c, ds);
        }
        for (int64_t e = 0; e < d; e++) dux[e] = hsum(duxs[e]);
        for (int64_t c = 0; c < C; c++) duy[c] = hsum(duys[c]);
        /* dA[:, :d] += du x_q^T */
        add_key_gradient(gA, dux, duy, q, d, C, dm, D);
    }
    *total_out = total;
}

typedef float (*forward_fn)(const loss_spec *, int64_t, int64_t, int64_t, const fwd_buf *, int64_t);
typedef void (*contexts_fn)(const loss_spec *, int64_t, float *, int64_t, float *, float *, double *);
#define FIXED_DC(d, C) \
    static float forward_##d##_##C(const loss_spec *s, int64_t k, int64_t gt, int64_t n, const fwd_buf *b, int64_t nl) \
    { return forward_fixed(s, k, gt, n, b, nl, d, C); } \
    static void contexts_##d##_##C(const loss_spec *s, int64_t k, float *w, int64_t T_all, float *gA, float *gWV, \
                                   double *tot) { contexts_fixed(s, k, w, T_all, gA, gWV, tot, d, C); }
#define FIXED_D(d) FIXED_DC(d, 2) FIXED_DC(d, 3) FIXED_DC(d, 4) FIXED_DC(d, 5) FIXED_DC(d, 6)
FIXED_D(2) FIXED_D(3) FIXED_D(4) FIXED_D(5) FIXED_D(6)
#define ROW(d, f) {f##_##d##_2, f##_##d##_3, f##_##d##_4, f##_##d##_5, f##_##d##_6}
static const forward_fn FORWARD[5][5] = {ROW(2, forward), ROW(3, forward), ROW(4, forward), ROW(5, forward),
                                         ROW(6, forward)};
static const contexts_fn CONTEXTS[5][5] = {ROW(2, contexts), ROW(3, contexts), ROW(4, contexts), ROW(5, contexts),
                                           ROW(6, contexts)};

/* Whether configuration k has a program of its own: 2 <= d, C <= FIXED (the book's sizes but its largest; each
 * program costs the engine's build a third of a second). */
static int fixed(const loss_spec *s, int64_t k) {
    return s->d[k] >= 2 && s->d[k] <= FIXED && s->C[k] >= 2 && s->C[k] <= FIXED;
}

/* forward_context / loss_contexts, by the program for the configuration's (d, C) where there is one */
static float forward_any(const loss_spec *s, int64_t k, int64_t gt, int64_t n, const fwd_buf *b, int64_t nl) {
    return fixed(s, k) ? FORWARD[s->d[k] - 2][s->C[k] - 2](s, k, gt, n, b, nl) : forward_context(s, k, gt, n, b, nl);
}

static void contexts_any(const loss_spec *s, int64_t k, float *work, int64_t T_all, float *gA, float *gWV,
                         double *total_out) {
    if (fixed(s, k)) CONTEXTS[s->d[k] - 2][s->C[k] - 2](s, k, work, T_all, gA, gWV, total_out);
    else loss_contexts(s, k, work, T_all, gA, gWV, total_out);
}

/* One configuration k: its loss and gradients, summed over its contexts in order. */
static void loss_unit(const loss_spec *s, int64_t k, float *work) {
    int64_t D = s->d_max + s->C_max;
    float *gA = s->gA + k * D * D, *gWV = s->gWV + k * D * D;
    memset(gA, 0, (size_t)(D * D) * sizeof(float));
    memset(gWV, 0, (size_t)(D * D) * sizeof(float));
    double total = 0.0;
    contexts_any(s, k, work, s->T, gA, gWV, &total);
    s->loss[k] = (float)(total / (double)s->T);
}

static void loss_one(const void *spec, uint8_t *work, int64_t k) { loss_unit((const loss_spec *)spec, k, (float *)work); }

int cls_loss(const loss_spec *s) {
    pool p = {loss_one, s, s->work, cls_loss_workspace(s), s->K, 1, 0};
    parallel_for(&p, s->threads);
    return 1;
}

static void logits_one(const void *spec, uint8_t *work, int64_t k) {
    const loss_spec *s = (const loss_spec *)spec;
    int64_t dm = s->d_max, Cm = s->C_max, D = dm + Cm, np = round_up(s->n_max, VEC), T = s->T;
    float *sc = (float *)work, *a = sc + np, *u = a + np, *hx = u + D, *hy = hx + dm, *lg = hy + Cm;
    const fwd_buf fb = {sc, a, u, hx, hy, lg};
    for (int64_t t = 0; t < T; t++) {
        forward_any(s, k, s->group[k] * T + t, s->lengths ? s->lengths[k * T + t] : s->n[k], &fb, Cm);
        memcpy(s->logits + (k * T + t) * Cm, lg, (size_t)Cm * sizeof(float));
    }
}

/* The logits (K, T, C_max) of every configuration on the contexts of its task (no loss, no gradient). */
int cls_logits(const loss_spec *s) {
    pool p = {logits_one, s, s->work, cls_loss_workspace(s), s->K, 1, 0};
    parallel_for(&p, s->threads);
    return 1;
}

/* ----------------------------------------------------------------------------------------------------------------
 * cls_step: a training step's draws and loss together, a chunk of contexts at a time while it is in cache.
 *
 * cls_draw writes every task of the step to memory (58 MB a step of train_readings_n200) and cls_loss reads each
 * back once per configuration; the fused step took 0.74 of their time there (measured on train_readings_n200).
 * Here an item is (seed, chunk of `chunk`
 * contexts): its contexts of every task of the seed are drawn into the thread's own buffers (draw_item, the same
 * numbers), then every configuration of that seed adds those contexts, in order, to its partial sums for the chunk;
 * the partial sums are added over the chunks in order at the end. The numbers depend on `chunk`, not on the thread
 * count or the schedule. No mixtures of lengths (their lengths come from the drawn words). */
typedef struct {
    draw_spec d;                 /* T: the step's contexts; first, step; xs, xq, lab, lq, protos, length_words unused */
    loss_spec l;                 /* K configurations, A, WV; loss, gA, gWV: the step's outputs; xs .. lq unused */
    int64_t chunk;
    float *part;                 /* (K, chunks, 2, D, D) */
    double *part_loss;           /* (K, chunks) */
    uint8_t *work;               /* d.threads x cls_step_workspace bytes */
} step_spec;

static int64_t step_chunks(const step_spec *p) { return (p->d.T + p->chunk - 1) / p->chunk; }

static int64_t step_task_floats(const step_spec *p) {
    int64_t G = p->d.G, dm = p->d.d_max, nm = round_up(p->d.n_max, VEC);
    return G * p->chunk * (dm * nm + dm + nm + 1);          /* xs, xq, lab, lq (ints are 4 bytes too) */
}

int64_t cls_step_workspace(const step_spec *p) {
    return round_up(cls_draw_workspace(&p->d), 64) + round_up(4 * step_task_floats(p), 64)
           + round_up(cls_loss_workspace(&p->l), 64);
}

static void step_one(const void *spec, uint8_t *work, int64_t i) {
    const step_spec *p = (const step_spec *)spec;
    int64_t nc = step_chunks(p), sd = i / nc, c = i % nc;
    int64_t t0 = c * p->chunk, cnt = p->d.T - t0 < p->chunk ? p->d.T - t0 : p->chunk;
    int64_t G = p->d.G, dm = p->d.d_max, nm = round_up(p->d.n_max, VEC), D = p->l.d_max + p->l.C_max;
    uint8_t *tasks = work + round_up(cls_draw_workspace(&p->d), 64);
    float *xs = (float *)tasks, *xq = xs + G * p->chunk * dm * nm;
    int32_t *lab = (int32_t *)(xq + G * p->chunk * dm), *lq = lab + G * p->chunk * nm;
    float *lwork = (float *)(tasks + round_up(4 * step_task_floats(p), 64));
    draw_spec ds = p->d;
    ds.T = cnt; ds.first = p->d.first + t0;
    ds.xs = xs; ds.xq = xq; ds.lab = lab; ds.lq = lq; ds.protos = NULL; ds.length_words = NULL;
    scratch w = carve(&ds, work);
    for (int64_t t = 0; t < cnt; t++) draw_item(&ds, &w, sd, t);
    loss_spec ls = p->l;
    ls.T = cnt; ls.xs = xs; ls.xq = xq; ls.lab = lab; ls.lq = lq; ls.lengths = NULL;
    for (int64_t k = 0; k < ls.K; k++) {
        if (p->d.g_seed[ls.group[k]] != sd) continue;
        float *gA = p->part + ((k * nc + c) * 2) * D * D, *gWV = gA + D * D;
        memset(gA, 0, (size_t)(2 * D * D) * sizeof(float));
        p->part_loss[k * nc + c] = 0.0;
        contexts_any(&ls, k, lwork, p->d.T, gA, gWV, &p->part_loss[k * nc + c]);
    }
}

int cls_step(const step_spec *p) {
    if (p->d.length_words || p->l.lengths || p->chunk < 1) return 0;
    pool q = {step_one, p, p->work, cls_step_workspace(p), p->d.S * step_chunks(p), 1, 0};
    parallel_for(&q, p->d.threads);
    int64_t nc = step_chunks(p), D = p->l.d_max + p->l.C_max;
    for (int64_t k = 0; k < p->l.K; k++) {
        float *gA = p->l.gA + k * D * D, *gWV = p->l.gWV + k * D * D;
        double total = 0.0;
        for (int64_t c = 0; c < nc; c++) {
            const float *pa = p->part + ((k * nc + c) * 2) * D * D, *pw = pa + D * D;
            for (int64_t j = 0; j < D * D; j++) {
                gA[j] = c ? gA[j] + pa[j] : pa[j];
                gWV[j] = c ? gWV[j] + pw[j] : pw[j];
            }
            total += p->part_loss[k * nc + c];
        }
        p->l.loss[k] = (float)(total / (double)p->d.T);
    }
    return 1;
}

