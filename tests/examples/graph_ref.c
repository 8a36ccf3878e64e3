/* Independent references for examples/graphs/ (tests/examples/graphs.sh): each example
 * computed in plain C (doubles), with no code of the compiler.
 *
 *   graph_ref gen NAME DIR      writes the inputs to DIR (NAME.bin, raw little-endian) and
 *                               the expected results to DIR/expect.txt; prints the
 *                               `--arg` options that pass the inputs to `tilec run`
 *   graph_ref cmp NAME DIR OUT  compares OUT (the values `tilec run --print` printed,
 *                               one a line, results in order) with DIR/expect.txt
 *                               within the example's tolerance; exit status 1 if not */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;
static void *blocks[64];   /* every array, freed at the end */
static size_t nblocks;

static double *arr(size_t n)
{
    double *p = calloc(n ? n : 1, sizeof *p);
    if (!p || nblocks == sizeof blocks / sizeof *blocks) exit(2);
    return blocks[nblocks++] = p;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* Uniform in [-1, 1). */
static double uni(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / (double)(1ull << 52) - 1.0;
}

static float bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* A parameter of n elements, uniform in [-scale, scale) + shift, written as f32 or bf16
 * (rounded; the returned values are the rounded ones). */
static double *param(const char *name, size_t n, double scale, double shift, int bf16)
{
    double *v = arr(n);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!v || !f) exit(2);
    for (size_t i = 0; i < n; i++) {
        float x = (float)(uni() * scale + shift);
        if (bf16) {
            x = bf16_round(x);
            uint32_t u;
            memcpy(&u, &x, 4);
            uint16_t h = (uint16_t)(u >> 16);
            fwrite(&h, 2, 1, f);
        } else fwrite(&x, 4, 1, f);
        v[i] = x;
    }
    fclose(f);
    printf(" --arg %s=@%s", name, path);
    return v;
}

static FILE *expect;
static void out(const double *v, size_t n)
{
    for (size_t i = 0; i < n; i++) fprintf(expect, "%.17g\n", v[i]);
}

/* c[m][n] = a[m][k] b[k][n] */
static double *mm(const double *a, const double *b, size_t M, size_t K, size_t N)
{
    double *c = arr(M * N);
    for (size_t i = 0; i < M; i++)
        for (size_t k = 0; k < K; k++)
            for (size_t j = 0; j < N; j++) c[i * N + j] += a[i * K + k] * b[k * N + j];
    return c;
}

static void rms_norm(double *y, const double *x, const double *g, size_t T, size_t D)
{
    for (size_t t = 0; t < T; t++) {
        double s = 0;
        for (size_t d = 0; d < D; d++) s += x[t * D + d] * x[t * D + d];
        double inv = 1.0 / sqrt(s / (double)D + 1e-5);
        for (size_t d = 0; d < D; d++) y[t * D + d] = x[t * D + d] * inv * g[d];
    }
}

static void ffn(void)
{
    enum { T = 2, D = 1024, F = 4096 };
    printf("--arg T=%d", T);
    double *x = param("x", T * D, 1, 0, 1), *w1 = param("w1", (size_t)D * F, 1.0 / 32, 0, 1),
           *b1 = param("b1", F, 0.1, 0, 1), *w2 = param("w2", (size_t)F * D, 1.0 / 64, 0, 1),
           *b2 = param("b2", D, 0.1, 0, 1);
    double *h = mm(x, w1, T, D, F);
    for (size_t i = 0; i < T * F; i++) {
        double z = h[i] + b1[i % F];
        h[i] = 0.5 * z * (1.0 + erf(z * 0.7071067811865476));
    }
    double *y = mm(h, w2, T, F, D);
    for (size_t i = 0; i < T * D; i++) y[i] += b2[i % D];
    out(y, T * D);
}

/* Both block (the mask a parameter, dropout p = 0) and block_op (the attention op,
 * causal): the same numbers. */
static int with_mask = 1;
static void block(void)
{
    enum { T = 8, D = 64, H = 4, E = 16, F = 128 };
    printf("--arg T=%d", T);
    double *x = param("x", T * D, 1, 0, 0), *g1 = param("g1", D, 0.5, 1, 0), *wq = param("wq", D * D, 0.25, 0, 0),
           *wk = param("wk", D * D, 0.25, 0, 0), *wv = param("wv", D * D, 0.25, 0, 0),
           *wo = param("wo", D * D, 0.125, 0, 0), *g2 = param("g2", D, 0.5, 1, 0),
           *wg = param("wg", D * F, 0.25, 0, 0), *wu = param("wu", D * F, 0.25, 0, 0),
           *wd = param("wd", F * D, 0.125, 0, 0);
    /* The causal mask as an additive tensor (0 where key j <= query i, else -inf). */
    char path[4096];
    snprintf(path, sizeof path, "%s/mask.bin", dir);
    FILE *mf = with_mask ? fopen(path, "wb") : NULL;
    if (with_mask && !mf) exit(2);
    for (int i = 0; mf && i < T; i++)
        for (int j = 0; j < T; j++) {
            float m = j <= i ? 0.0f : -INFINITY;
            fwrite(&m, 4, 1, mf);
        }
    if (mf) fclose(mf);
    if (mf) printf(" --arg mask=@%s --arg pdrop=0.0 --arg seed=1", path);
    double h[T * D], o[T * D], x1[T * D], h2[T * D];
    rms_norm(h, x, g1, T, D);
    double *q = mm(h, wq, T, D, D), *k = mm(h, wk, T, D, D), *v = mm(h, wv, T, D, D);
    for (int hd = 0; hd < H; hd++)
        for (int i = 0; i < T; i++) {
            double s[T], mx = -INFINITY, sum = 0;
            for (int j = 0; j <= i; j++) {
                s[j] = 0;
                for (int e = 0; e < E; e++) s[j] += q[i * D + hd * E + e] * k[j * D + hd * E + e];
                s[j] *= 0.25;
                mx = fmax(mx, s[j]);
            }
            for (int j = 0; j <= i; j++) sum += s[j] = exp(s[j] - mx);
            for (int e = 0; e < E; e++) {
                double acc = 0;
                for (int j = 0; j <= i; j++) acc += s[j] / sum * v[j * D + hd * E + e];
                o[i * D + hd * E + e] = acc;
            }
        }
    double *p = mm(o, wo, T, D, D);
    for (int i = 0; i < T * D; i++) x1[i] = x[i] + p[i];
    rms_norm(h2, x1, g2, T, D);
    double *a = mm(h2, wg, T, D, F), *b = mm(h2, wu, T, D, F);
    for (int i = 0; i < T * F; i++) a[i] = a[i] / (1.0 + exp(-a[i])) * b[i];
    double *y = mm(a, wd, T, F, D);
    for (int i = 0; i < T * D; i++) y[i] += x1[i];
    out(y, T * D);
}

static void block_op(void)
{
    with_mask = 0;
    block();
}

static void residual_layernorm(void)
{
    enum { T = 4, D = 256 };
    printf("--arg T=%d", T);
    double *x = param("x", T * D, 1, 0, 0), *y = param("y", T * D, 1, 0.5, 0), *w = param("w", D, 0.5, 1, 0),
           *b = param("b", D, 0.5, 0, 0);
    double r[T * D], n[T * D];
    for (int i = 0; i < T * D; i++) r[i] = x[i] + y[i];
    for (int t = 0; t < T; t++) {
        double mean = 0, var = 0;
        for (int d = 0; d < D; d++) mean += r[t * D + d] / D;
        for (int d = 0; d < D; d++) var += (r[t * D + d] - mean) * (r[t * D + d] - mean) / D;
        for (int d = 0; d < D; d++) n[t * D + d] = (r[t * D + d] - mean) / sqrt(var + 1e-5) * w[d] + b[d];
    }
    out(r, T * D);
    out(n, T * D);
}

static void conv_bn_relu(void)
{
    enum { N = 2, C = 3, HW = 16, K = 8, R = 3 };
    printf("--arg N=%d", N);
    double *x = param("x", N * C * HW * HW, 1, 0, 0), *w = param("w", K * C * R * R, 0.5, 0, 0),
           *mean = param("mean", K, 0.5, 0, 0), *var = param("variance", K, 0.4, 0.6, 0),
           *gamma = param("gamma", K, 0.5, 1, 0), *beta = param("beta", K, 0.5, 0, 0);
    static double y[N * K * HW * HW];
    for (int n = 0; n < N; n++)
        for (int k = 0; k < K; k++)
            for (int p = 0; p < HW; p++)
                for (int q = 0; q < HW; q++) {
                    double acc = 0;
                    for (int c = 0; c < C; c++)
                        for (int r = 0; r < R; r++)
                            for (int s = 0; s < R; s++) {
                                int h = p + r - 1, ww = q + s - 1;
                                if (h >= 0 && h < HW && ww >= 0 && ww < HW)
                                    acc += x[((n * C + c) * HW + h) * HW + ww] * w[((k * C + c) * R + r) * R + s];
                            }
                    double z = (acc - mean[k]) / sqrt(var[k] + 1e-5) * gamma[k] + beta[k];
                    y[((n * K + k) * HW + p) * HW + q] = z > 0 ? z : 0;
                }
    out(y, N * K * HW * HW);
}

static void adamw(void)
{
    enum { N = 1000 };
    double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = 0.01, bc1 = 1 - 0.9, bc2 = 1 - 0.999;
    printf("--arg N=%d --arg lr=%g --arg beta1=%g --arg beta2=%g --arg eps=%g --arg wd=%g --arg bc1=%g --arg bc2=%g", N,
           lr, b1, b2, eps, wd, bc1, bc2);
    double *p = param("p", N, 1, 0, 0), *g = param("g", N, 0.1, 0, 0), *m = param("m", N, 0.01, 0, 0),
           *v = param("v", N, 1e-4, 1e-4, 0);
    double p2[N], m2[N], v2[N];
    for (int i = 0; i < N; i++) {
        m2[i] = b1 * m[i] + (1 - b1) * g[i];
        v2[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p2[i] = p[i] - lr * ((m2[i] / bc1) / (sqrt(v2[i] / bc2) + eps) + wd * p[i]);
    }
    out(p2, N);
    out(m2, N);
    out(v2, N);
}

/* The numbers of a file, one a line (NULL if it cannot be read). */
static double *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "r");
    size_t cap = 1024;
    double *v = f ? malloc(cap * sizeof *v) : NULL, x;
    *n = 0;
    while (v && fscanf(f, "%lf", &x) == 1) {
        if (*n == cap) {
            double *w = realloc(v, (cap *= 2) * sizeof *v);
            if (!w) free(v);
            v = w;
            if (!v) break;
        }
        v[(*n)++] = x;
    }
    if (f) fclose(f);
    return v;
}

static const struct {
    const char *name;
    void (*gen)(void);
    double rtol;             /* |got - want| <= rtol * (|want| + the mean |want|) */
} examples[] = {
    {"ffn", ffn, 3e-2},      /* bf16: every op rounds to 8 bits of mantissa */
    {"block", block, 1e-4},  /* f32 */
    {"block_op", block_op, 1e-4},
    {"residual_layernorm", residual_layernorm, 1e-5},
    {"conv_bn_relu", conv_bn_relu, 1e-5},
    {"adamw", adamw, 1e-5},
};

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: graph_ref gen NAME DIR | cmp NAME DIR OUT\n");
        return 2;
    }
    dir = argv[3];
    size_t e = 0, ne = sizeof examples / sizeof *examples;
    while (e < ne && strcmp(examples[e].name, argv[2])) e++;
    if (e == ne) {
        fprintf(stderr, "graph_ref: no example '%s'\n", argv[2]);
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/expect.txt", dir);
    if (!strcmp(argv[1], "gen")) {
        if (!(expect = fopen(path, "w"))) return 2;
        examples[e].gen();
        printf("\n");
        while (nblocks) free(blocks[--nblocks]);
        return fclose(expect) ? 2 : 0;
    }
    if (strcmp(argv[1], "cmp") || argc < 5) return 2;
    size_t n = 0, ng = 0;
    double *want = read_all(path, &n), *got = read_all(argv[4], &ng), mean = 0;
    int status = 0;
    if (!want || !got || n == 0 || n != ng) {
        fprintf(stderr, "graph_ref: %s: %zu values expected, %zu printed\n", argv[2], n, ng);
        status = 1;
    }
    for (size_t i = 0; !status && i < n; i++) mean += fabs(want[i]) / (double)n;
    size_t bad = 0;
    for (size_t i = 0; !status && i < n; i++)
        if (!(fabs(got[i] - want[i]) <= examples[e].rtol * (fabs(want[i]) + mean)) && bad++ < 5)
            fprintf(stderr, "graph_ref: %s: value %zu is %.9g, the reference %.9g\n", argv[2], i, got[i], want[i]);
    if (bad) fprintf(stderr, "graph_ref: %s: %zu of %zu values differ\n", argv[2], bad, n), status = 1;
    else if (!status) printf("graph_ref: %s: %zu values agree with the reference (rtol %g)\n", argv[2], n, examples[e].rtol);
    free(want);
    free(got);
    return status;
}
