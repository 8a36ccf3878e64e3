/* tile-examples: compiles every example of examples/, runs it on fresh inputs, and
 * checks the result against a reference computed here in C (in double precision,
 * rounded to the output type where the kernel rounds). Prints one row per example.
 *
 *   tile-examples [--device cpu|gpu] [--check-bounds] [--only NAME] EXAMPLES_DIR
 *
 * Each example runs four times in the interpreter: as lowered (-O0), after the cleanup
 * passes (-O2), as the runtime would compile it for its arguments (specialized, the
 * GPU pipeline) with every fact of the axis analysis checked on the values (AX), and
 * the checked variant of TILE_DEBUG=bounds (BC: the GPU pipeline and the bounds pass,
 * with every buffer's size; it must compute the same and report nothing), so the
 * passes are checked numerically on real kernels too. --check-bounds on the GPU runs
 * the checked variants there, with every buffer's size. A case may set const values
 * (smaller tiles in the interpreter) and choose larger sizes on the GPU. Exit status 0
 * when every example matches its reference. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/frontend.h"
#include "ir/interp.h"
#include "passes/axischeck.h"
#include "passes/passes.h"
#include "passes/specialize.h"
#include "tile/tile_rt.h"

/* ---- buffers ------------------------------------------------------------------------ */
typedef struct Buf {
    IrElem elem;
    int64_t n;
    void *data;
} Buf;

static Buf buf_new(IrElem e, int64_t n)
{
    Buf b = {e, n, calloc((size_t)(n ? n : 1), (size_t)ir_elem_bytes(e))};
    if (!b.data) abort();
    return b;
}

static double buf_get(const Buf *b, int64_t i)
{
    const unsigned char *p = (const unsigned char *)b->data + i * ir_elem_bytes(b->elem);
    uint16_t h;
    int32_t w;
    float f;
    switch (b->elem) {
    case IR_F16: memcpy(&h, p, 2); return fp_f16_to_f32(h);
    case IR_BF16: memcpy(&h, p, 2); return fp_bf16_to_f32(h);
    case IR_F32: memcpy(&f, p, 4); return f;
    case IR_I32: memcpy(&w, p, 4); return w;
    case IR_F8E4M3: return fp_f8e4m3_to_f32(*p);
    default: abort();
    }
}

static void buf_set(Buf *b, int64_t i, double v)
{
    unsigned char *p = (unsigned char *)b->data + i * ir_elem_bytes(b->elem);
    uint16_t h;
    int32_t w = (int32_t)v;
    float f = (float)v;
    switch (b->elem) {
    case IR_F16: h = fp_f32_to_f16(f); memcpy(p, &h, 2); break;
    case IR_BF16: h = fp_f32_to_bf16(f); memcpy(p, &h, 2); break;
    case IR_F32: memcpy(p, &f, 4); break;
    case IR_I32: memcpy(p, &w, 4); break;
    case IR_F8E4M3: *p = fp_f32_to_f8e4m3(f); break;
    default: abort();
    }
}

/* Uniform in [lo, hi), from a fixed-seed generator so a failure reproduces. */
static uint64_t rng_seed = 0x9E3779B97F4A7C15ull, rng_state;
static double uniform(double lo, double hi)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(rng_state >> 11) / 9007199254740992.0;
}

static Buf buf_rand(IrElem e, int64_t n, double lo, double hi)
{
    Buf b = buf_new(e, n);
    for (int64_t i = 0; i < n; i++) buf_set(&b, i, uniform(lo, hi));
    return b;
}

/* ---- one example: its arguments, and its reference ------------------------------------ */
#define MAX_ARGS 16
#define MAX_DEFS 8
typedef struct Case {
    InterpArg args[MAX_ARGS];
    Buf bufs[MAX_ARGS];       /* the buffer of each pointer argument (elem 0 if none) */
    uint32_t nargs;
    Buf expect[MAX_ARGS];     /* expected contents of output buffers (n == 0: not checked) */
    double atol[MAX_ARGS], rtol[MAX_ARGS];
    double *etol[MAX_ARGS];   /* NULL, or a further absolute tolerance per element */
    bool write_only[MAX_ARGS];  /* an output the kernel never reads: poisoned on the GPU */
    FeDefine defs[MAX_DEFS];    /* const parameters set by the case (-D), the rest default */
    uint32_t ndefs;
    char shape[64];
} Case;

/* Set by --device gpu: cases may choose larger sizes (and the kernels' own tile sizes)
 * there, where the run is fast; the interpreter in CI gets small ones. */
static bool on_gpu;

static void arg_buf(Case *c, Buf b)
{
    c->bufs[c->nargs] = b;
    c->args[c->nargs].is_buffer = true;
    c->args[c->nargs].u.buf = (InterpBuffer){b.elem, b.data, b.n};
    c->nargs++;
}
static void arg_int(Case *c, int64_t v) { c->args[c->nargs++].u.i = v; }
static void arg_float(Case *c, double v) { c->args[c->nargs++].u.f = v; }
static void def(Case *c, const char *name, int64_t value)
{
    if (c->ndefs == MAX_DEFS) abort();
    c->defs[c->ndefs++] = (FeDefine){name, value};
}
static void expect(Case *c, uint32_t arg, Buf want, double atol, double rtol)
{
    c->write_only[arg] = true;  /* cases that read their output clear it below */
    c->expect[arg] = want;
    c->atol[arg] = atol;
    c->rtol[arg] = rtol;
}


static void case_vector_add(Case *c)
{
    int n = 5000;
    Buf a = buf_rand(IR_F32, n, -1, 1), b = buf_rand(IR_F32, n, -1, 1), want = buf_new(IR_F32, n);
    for (int i = 0; i < n; i++) buf_set(&want, i, (float)buf_get(&a, i) + (float)buf_get(&b, i));
    arg_buf(c, buf_new(IR_F32, n));
    arg_buf(c, a);
    arg_buf(c, b);
    arg_int(c, n);
    expect(c, 0, want, 0, 0);
    snprintf(c->shape, sizeof c->shape, "n=%d", n);
}

static void case_softmax(Case *c)
{
    int rows = 37, cols = 781, stride = 800;
    Buf x = buf_rand(IR_BF16, (int64_t)rows * stride, -4, 4), want = buf_new(IR_BF16, (int64_t)rows * stride);
    /* Columns n_cols..stride of each row are never written: they keep the poison. */
    memset(want.data, 0xFF, (size_t)(want.n * 2));
    for (int r = 0; r < rows; r++) {
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < cols; j++) mx = fmax(mx, buf_get(&x, r * stride + j));
        for (int j = 0; j < cols; j++) s += exp(buf_get(&x, r * stride + j) - mx);
        for (int j = 0; j < cols; j++) buf_set(&want, r * stride + j, exp(buf_get(&x, r * stride + j) - mx) / s);
    }
    arg_buf(c, buf_new(IR_BF16, (int64_t)rows * stride));
    arg_buf(c, x);
    arg_int(c, stride);
    arg_int(c, rows);
    arg_int(c, cols);
    expect(c, 0, want, 1e-6, 1.5 / 128);   /* one bf16 ulp, with slack for f32 rounding */
    snprintf(c->shape, sizeof c->shape, "%dx%d", rows, cols);
}

static void case_layernorm(Case *c)
{
    int rows = 16, cols = 1000;
    int64_t n = (int64_t)rows * cols;
    double eps = 1e-5;
    Buf x = buf_rand(IR_F16, n, -2, 2), r = buf_rand(IR_F16, n, -2, 2);
    Buf w = buf_rand(IR_F32, cols, 0.5, 1.5), b = buf_rand(IR_F32, cols, -0.5, 0.5);
    Buf want_y = buf_new(IR_F16, n), want_h = buf_new(IR_F16, n);
    for (int i = 0; i < rows; i++) {
        double mean = 0, var = 0;
        for (int j = 0; j < cols; j++) mean += buf_get(&x, i * cols + j) + buf_get(&r, i * cols + j);
        mean /= cols;
        for (int j = 0; j < cols; j++) {
            double d = buf_get(&x, i * cols + j) + buf_get(&r, i * cols + j) - mean;
            var += d * d;
        }
        double rstd = 1 / sqrt(var / cols + eps);
        for (int j = 0; j < cols; j++) {
            double s = buf_get(&x, i * cols + j) + buf_get(&r, i * cols + j);
            buf_set(&want_h, i * cols + j, s);
            buf_set(&want_y, i * cols + j, (s - mean) * rstd * buf_get(&w, j) + buf_get(&b, j));
        }
    }
    arg_buf(c, buf_new(IR_F16, n));
    arg_buf(c, buf_new(IR_F16, n));
    arg_buf(c, x);
    arg_buf(c, r);
    arg_buf(c, w);
    arg_buf(c, b);
    arg_int(c, rows);
    arg_int(c, cols);
    arg_float(c, eps);
    expect(c, 0, want_y, 1e-3, 1.0 / 1024);  /* one f16 ulp */
    expect(c, 1, want_h, 0, 1.0 / 2048);
    snprintf(c->shape, sizeof c->shape, "%dx%d", rows, cols);
}

static void case_rmsnorm(Case *c)
{
    int rows = 16, cols = 1500;
    int64_t n = (int64_t)rows * cols;
    double eps = 1e-6;
    Buf x = buf_rand(IR_BF16, n, -3, 3), w = buf_rand(IR_BF16, cols, 0.5, 1.5), want = buf_new(IR_BF16, n);
    for (int i = 0; i < rows; i++) {
        double ms = 0;
        for (int j = 0; j < cols; j++) ms += buf_get(&x, i * cols + j) * buf_get(&x, i * cols + j);
        double scale = 1 / sqrt(ms / cols + eps);
        for (int j = 0; j < cols; j++) buf_set(&want, i * cols + j, buf_get(&x, i * cols + j) * scale * buf_get(&w, j));
    }
    arg_buf(c, buf_new(IR_BF16, n));
    arg_buf(c, x);
    arg_buf(c, w);
    arg_int(c, rows);
    arg_int(c, cols);
    arg_float(c, eps);
    expect(c, 0, want, 1e-6, 1.5 / 128);  /* one bf16 ulp, with slack for f32 rounding */
    snprintf(c->shape, sizeof c->shape, "%dx%d", rows, cols);
}

static void case_matmul(Case *c)
{
    int M = 100, N = 72, K = 50;
    Buf a = buf_rand(IR_F16, (int64_t)M * K, -1, 1), b = buf_rand(IR_F16, (int64_t)K * N, -1, 1);
    Buf want = buf_new(IR_F32, (int64_t)M * N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += buf_get(&a, i * K + k) * buf_get(&b, k * N + j);
            buf_set(&want, i * N + j, s);
        }
    arg_buf(c, buf_new(IR_F32, (int64_t)M * N));
    arg_buf(c, a);
    arg_buf(c, b);
    arg_int(c, M);
    arg_int(c, N);
    arg_int(c, K);
    arg_int(c, K);
    arg_int(c, N);
    arg_int(c, N);
    expect(c, 0, want, 1e-5, 1e-5);
    snprintf(c->shape, sizeof c->shape, "%dx%dx%d", M, N, K);
}

static double gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }

static void case_gelu_bias(Case *c)
{
    int rows = 8, cols = 3000;
    int64_t n = (int64_t)rows * cols;
    Buf x = buf_rand(IR_BF16, n, -3, 3), bias = buf_rand(IR_BF16, cols, -1, 1), want = buf_new(IR_BF16, n);
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            buf_set(&want, i * cols + j, gelu((float)(buf_get(&x, i * cols + j) + buf_get(&bias, j))));
    arg_buf(c, buf_new(IR_BF16, n));
    arg_buf(c, x);
    arg_buf(c, bias);
    arg_int(c, rows);
    arg_int(c, cols);
    expect(c, 0, want, 1e-6, 1.5 / 128);  /* one bf16 ulp, with slack for f32 rounding */
    snprintf(c->shape, sizeof c->shape, "%dx%d", rows, cols);
}

static void case_dropout(Case *c)
{
    int n = 5000;
    double p = 0.25;
    uint64_t seed = 1234567890123ull;
    Buf x = buf_rand(IR_F32, n, -1, 1), want = buf_new(IR_F32, n);
    int kept = 0;
    for (int i = 0; i < n; i++) {
        bool keep = tile_rand(seed, i) >= (float)p;
        kept += keep;
        buf_set(&want, i, keep ? (float)buf_get(&x, i) / (float)(1.0f - (float)p) : 0.0);
    }
    if (kept < n * 0.7 || kept > n * 0.8) fprintf(stderr, "dropout: kept %d of %d (expected about 75%%)\n", kept, n);
    arg_buf(c, buf_new(IR_F32, n));
    arg_buf(c, x);
    arg_int(c, n);
    arg_float(c, p);
    arg_int(c, (int64_t)seed);
    expect(c, 0, want, 0, 0);
    snprintf(c->shape, sizeof c->shape, "n=%d p=%.2f", n, p);
}

static void case_cumsum_argmax(Case *c)
{
    int rows = 12, cols = 300;
    int64_t n = (int64_t)rows * cols;
    Buf x = buf_rand(IR_F32, n, -10, 10), want_cs = buf_new(IR_F32, n), want_am = buf_new(IR_I32, rows);
    for (int i = 0; i < cols; i += 37) buf_set(&x, 5 * cols + i, 50.0);   /* ties in row 5 */
    for (int i = 0; i < rows; i++) {
        double s = 0, best = -INFINITY;
        int arg = 0;
        for (int j = 0; j < cols; j++) {
            double v = buf_get(&x, i * cols + j);
            s += v;
            buf_set(&want_cs, i * cols + j, s);
            if (v > best) best = v, arg = j;
        }
        buf_set(&want_am, i, arg);
    }
    arg_buf(c, buf_new(IR_F32, n));
    arg_buf(c, buf_new(IR_I32, rows));
    arg_buf(c, x);
    arg_int(c, rows);
    arg_int(c, cols);
    expect(c, 0, want_cs, 1e-3, 1e-5);
    expect(c, 1, want_am, 0, 0);
    snprintf(c->shape, sizeof c->shape, "%dx%d", rows, cols);
}

static void case_histogram(Case *c)
{
    int n = 10000, bins = 64;
    double lo = -2, hi = 2;
    Buf x = buf_rand(IR_F32, n, -2.5, 2.5), want = buf_new(IR_I32, bins);
    for (int i = 0; i < n; i++) {
        float t = ((float)buf_get(&x, i) - (float)lo) / (float)(hi - lo) * (float)bins;
        int b = (int)t;
        b = b < 0 ? 0 : b > bins - 1 ? bins - 1 : b;
        buf_set(&want, b, buf_get(&want, b) + 1);
    }
    arg_buf(c, buf_new(IR_I32, bins));
    arg_buf(c, x);
    arg_int(c, n);
    arg_float(c, lo);
    arg_float(c, hi);
    expect(c, 0, want, 0, 0);
    c->write_only[0] = false;  /* counts accumulate onto zeros */
    snprintf(c->shape, sizeof c->shape, "n=%d bins=%d", n, bins);
}

static void case_adamw(Case *c)
{
    int n = 5000, step = 10;
    /* The kernel takes its hyperparameters as f32: the reference uses the same values. */
    double lr = (float)1e-3, b1 = (float)0.9, b2 = (float)0.999, eps = (float)1e-8, wd = (float)0.01;
    Buf p = buf_rand(IR_F32, n, -1, 1), g = buf_rand(IR_BF16, n, -0.1, 0.1);
    Buf m = buf_rand(IR_F32, n, -0.01, 0.01), v = buf_rand(IR_F32, n, 0, 1e-4);
    Buf wp = buf_new(IR_F32, n), wm = buf_new(IR_F32, n), wv = buf_new(IR_F32, n);
    for (int i = 0; i < n; i++) {
        double gi = buf_get(&g, i);
        double mi = b1 * buf_get(&m, i) + (1 - b1) * gi, vi = b2 * buf_get(&v, i) + (1 - b2) * gi * gi;
        double pi = buf_get(&p, i) * (1 - lr * wd);
        pi -= lr * (mi / (1 - pow(b1, step))) / (sqrt(vi / (1 - pow(b2, step))) + eps);
        buf_set(&wp, i, pi);
        buf_set(&wm, i, mi);
        buf_set(&wv, i, vi);
    }
    arg_buf(c, p);
    arg_buf(c, g);
    arg_buf(c, m);
    arg_buf(c, v);
    arg_int(c, n);
    arg_float(c, lr);
    arg_float(c, b1);
    arg_float(c, b2);
    arg_float(c, eps);
    arg_float(c, wd);
    arg_int(c, step);
    expect(c, 0, wp, 1e-6, 1e-5);
    expect(c, 2, wm, 1e-8, 1e-5);   /* m and v are sums of f32 products: a few f32 ulp */
    expect(c, 3, wv, 1e-11, 1e-5);
    c->write_only[0] = c->write_only[2] = c->write_only[3] = false;  /* updated in place */
    snprintf(c->shape, sizeof c->shape, "n=%d step=%d", n, step);
}

/* ---- tensor-core examples (bf16 inputs, f32 accumulation) ---------------------------- */
/* The elements of b as doubles (callers free them). */
static double *buf_doubles(const Buf *b)
{
    double *d = malloc((size_t)(b->n ? b->n : 1) * sizeof *d);
    if (!d) abort();
    for (int64_t i = 0; i < b->n; i++) d[i] = buf_get(b, i);
    return d;
}

/* A bf16 [rows, stride] buffer to be written by the kernel: the expected contents are
 * NaN (the poison) in the columns cols..stride, which it must not write. */
static Buf gapped_bf16(int rows, int stride)
{
    Buf b = buf_new(IR_BF16, (int64_t)rows * stride);
    memset(b.data, 0xFF, (size_t)b.n * 2);
    return b;
}

/* c[M, N] = a[M, K] @ b[K, N] in double, from row-major operands of the given strides. */
static double *gemm_ref(const Buf *a, const Buf *b, int M, int N, int K, int sa, int sb)
{
    double *ad = buf_doubles(a), *bd = buf_doubles(b), *c = calloc((size_t)M * N, sizeof *c);
    if (!c) abort();
    for (int i = 0; i < M; i++)
        for (int k = 0; k < K; k++)
            for (int j = 0; j < N; j++) c[(int64_t)i * N + j] += ad[(int64_t)i * sa + k] * bd[(int64_t)k * sb + j];
    free(ad);
    free(bd);
    return c;
}

/* The sizes of a GEMM case: small with small tiles (several programs, partial groups of
 * the swizzle, every edge masked) in the interpreter, larger with the kernel's own tiles
 * on the GPU. Row strides are 8 elements wider than the rows. */
static void gemm_sizes(Case *c, int *M, int *N, int *K)
{
    *M = on_gpu ? 777 : 200;
    *N = on_gpu ? 520 : 150;
    *K = on_gpu ? 300 : 100;
    if (!on_gpu) {
        def(c, "BM", 64);
        def(c, "BN", 32);
        def(c, "BK", 32);
        def(c, "GROUP", 2);
    }
}

static void case_matmul_bf16(Case *c)
{
    int M, N, K;
    gemm_sizes(c, &M, &N, &K);
    int sa = K + 8, sb = N + 8, sc = N + 8;
    Buf a = buf_rand(IR_BF16, (int64_t)M * sa, -1, 1), b = buf_rand(IR_BF16, (int64_t)K * sb, -1, 1);
    Buf want = gapped_bf16(M, sc);
    double *ref = gemm_ref(&a, &b, M, N, K, sa, sb);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) buf_set(&want, (int64_t)i * sc + j, ref[(int64_t)i * N + j]);
    free(ref);
    arg_buf(c, buf_new(IR_BF16, want.n));
    arg_buf(c, a);
    arg_buf(c, b);
    arg_int(c, M);
    arg_int(c, N);
    arg_int(c, K);
    arg_int(c, sa);
    arg_int(c, sb);
    arg_int(c, sc);
    expect(c, 0, want, 1e-4, 1.0 / 128);  /* half a bf16 ulp, twice, for the f32 sums */
    snprintf(c->shape, sizeof c->shape, "%dx%dx%d", M, N, K);
}

/* The same GEMM with each program on a cluster of two CTAs (passes/cluster.c): each CTA
 * computes half of the program's rows, B's blocks multicast between them by TMA. */
static void case_matmul_bf16_cluster(Case *c)
{
    def(c, "cluster", 2);
    if (on_gpu) def(c, "BM", 256);   /* 128 rows a CTA: the default's per-CTA tile */
    else def(c, "BN", 128);          /* B's stages two boxes of 128 bytes: one from each CTA */
    case_matmul_bf16(c);
}

/* Two consumer warpgroups walking alternate tiles, one's main loop beside the other's
 * epilogue (pingpong: passes/persistent.c), 4 warps a program. */
static void pingpong_keys(Case *c)
{
    def(c, "pingpong", 1);
    def(c, "ws", 1);
    def(c, "persistent", 1);
    def(c, "warps", 4);
    if (on_gpu) def(c, "BN", 128);   /* 128 x 128 a warpgroup: CUTLASS's ping-pong tile */
}

static void case_matmul_bf16_pingpong(Case *c)
{
    pingpong_keys(c);
    case_matmul_bf16(c);
}

static void case_gemm_bias_gelu(Case *c)
{
    int M, N, K;
    gemm_sizes(c, &M, &N, &K);
    int sa = K + 8, sb = N + 8, sc = N + 8;
    Buf a = buf_rand(IR_BF16, (int64_t)M * sa, -1, 1), b = buf_rand(IR_BF16, (int64_t)K * sb, -1, 1);
    Buf bias = buf_rand(IR_BF16, N, -2, 2), want = gapped_bf16(M, sc);
    double *ref = gemm_ref(&a, &b, M, N, K, sa, sb);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            buf_set(&want, (int64_t)i * sc + j, gelu(ref[(int64_t)i * N + j] + buf_get(&bias, j)));
    free(ref);
    arg_buf(c, buf_new(IR_BF16, want.n));
    arg_buf(c, a);
    arg_buf(c, b);
    arg_buf(c, bias);
    arg_int(c, M);
    arg_int(c, N);
    arg_int(c, K);
    arg_int(c, sa);
    arg_int(c, sb);
    arg_int(c, sc);
    expect(c, 0, want, 1e-4, 1.0 / 128);
    snprintf(c->shape, sizeof c->shape, "%dx%dx%d", M, N, K);
}

/* The GELU epilogue of one warpgroup beside the other's main loop: each its own scratch
 * and staging halves. */
static void case_gemm_bias_gelu_pingpong(Case *c)
{
    pingpong_keys(c);
    case_gemm_bias_gelu(c);
}

/* matmul_fp8: C = (A @ W^T) * sa[m] * sb[n] (rowwise) or * sa[0] * sb[0] (per tensor),
 * f8e4m3 operands with W given [N, K]. Beyond the bf16 rounding of the result, each
 * element may be off by 2^-12 of the sum of |a| |w| over K (scaled): wgmma adds f8
 * products with fewer bits than f32 (Hopper's fast accumulation; tests/difftest allows
 * the same). */
static void case_matmul_fp8(Case *c, int rowwise)
{
    int M, N, K;
    gemm_sizes(c, &M, &N, &K);
    def(c, "ROWWISE", rowwise);
    int sa = K + 16, sw = K + 16, sc = N + 8;
    Buf a = buf_rand(IR_F8E4M3, (int64_t)M * sa, -2, 2), w = buf_rand(IR_F8E4M3, (int64_t)N * sw, -2, 2);
    Buf scale_a = buf_rand(IR_F32, rowwise ? M : 1, 0.25, 2), scale_b = buf_rand(IR_F32, rowwise ? N : 1, 0.25, 2);
    Buf want = gapped_bf16(M, sc);
    double *ad = buf_doubles(&a), *wd = buf_doubles(&w);
    double *tol = calloc((size_t)want.n, sizeof *tol);
    if (!tol) abort();
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double p = ad[(int64_t)i * sa + k] * wd[(int64_t)j * sw + k];
                s += p;
                mag += fabs(p);
            }
            double scale = buf_get(&scale_a, rowwise ? i : 0) * buf_get(&scale_b, rowwise ? j : 0);
            buf_set(&want, (int64_t)i * sc + j, s * scale);
            tol[(int64_t)i * sc + j] = mag * scale * ldexp(1.0, -12);
        }
    free(ad);
    free(wd);
    arg_buf(c, buf_new(IR_BF16, want.n));
    arg_buf(c, a);
    arg_buf(c, w);
    arg_buf(c, scale_a);
    arg_buf(c, scale_b);
    arg_int(c, M);
    arg_int(c, N);
    arg_int(c, K);
    arg_int(c, sa);
    arg_int(c, sw);
    arg_int(c, sc);
    expect(c, 0, want, 1e-4, 1.0 / 128);
    c->etol[0] = tol;
    snprintf(c->shape, sizeof c->shape, "%dx%dx%d %s", M, N, K, rowwise ? "rowwise" : "tensor");
}
static void case_matmul_fp8_rowwise(Case *c) { case_matmul_fp8(c, 1); }
static void case_matmul_fp8_tensor(Case *c) { case_matmul_fp8(c, 0); }

static void case_qkv_proj(Case *c)
{
    /* hidden = 80 with 32-column tiles: the tiles at columns 64 and 160 straddle q|k
     * and k|v, so each column must find its buffer by itself. */
    int T = on_gpu ? 300 : 100, H = on_gpu ? 200 : 80, N = 3 * H;
    if (!on_gpu) {
        def(c, "BM", 32);
        def(c, "BN", 32);
        def(c, "BK", 32);
        def(c, "GROUP", 2);
    }
    int sx = H + 8, sw = N + 8, so = H + 8;
    Buf x = buf_rand(IR_BF16, (int64_t)T * sx, -1, 1), w = buf_rand(IR_BF16, (int64_t)H * sw, -1, 1);
    Buf want[3] = {gapped_bf16(T, so), gapped_bf16(T, so), gapped_bf16(T, so)};
    double *ref = gemm_ref(&x, &w, T, N, H, sx, sw);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < N; j++) buf_set(&want[j / H], (int64_t)i * so + j % H, ref[(int64_t)i * N + j]);
    free(ref);
    for (int o = 0; o < 3; o++) arg_buf(c, buf_new(IR_BF16, want[o].n));
    arg_buf(c, x);
    arg_buf(c, w);
    arg_int(c, T);
    arg_int(c, H);
    arg_int(c, sx);
    arg_int(c, sw);
    arg_int(c, so);
    for (int o = 0; o < 3; o++) expect(c, (uint32_t)o, want[o], 1e-4, 1.0 / 128);
    snprintf(c->shape, sizeof c->shape, "T=%d hidden=%d", T, H);
}

/* Attention: bf16 [BH, L, D] tensors with rows stride_l = D + 8 apart and heads
 * stride_bh = L * stride_l + 64 apart (the gaps are never read or written), lse and
 * delta f32 [BH, L]. The interpreter gets L = 100 with 16- and 32-row blocks (every
 * loop of the kernels runs: unmasked blocks, diagonal blocks, the tail); the GPU L = 300
 * with the kernels' own tiles and D = 128. */
typedef struct Attn {
    int BH, L, D, causal;
    int64_t sl, sbh;
    double scale;              /* as the kernel gets it, an f32 */
    Buf q, k, v, dout;         /* inputs, bf16 */
    double *qd, *kd, *vd, *dod;  /* the same as doubles, for the references */
    double *p;                 /* P[bh][i][j], from lse as given (0 where masked) */
} Attn;

static double attn_get(const Attn *a, const double *t, int bh, int i, int d)
{
    return t[bh * a->sbh + i * a->sl + d];
}

static double attn_score(const Attn *a, int bh, int i, int j)
{
    double s = 0;
    for (int d = 0; d < a->D; d++) s += attn_get(a, a->qd, bh, i, d) * attn_get(a, a->kd, bh, j, d);
    return a->scale * s;
}

static bool attn_seen(const Attn *a, int i, int j) { return !a->causal || j <= i; }

/* The sizes and random inputs; the consts CAUSAL, BM and BN (bn == 0: a kernel with
 * neither CAUSAL nor BN) and, in the interpreter, D. */
static void attn_init(Case *c, Attn *a, int causal, int bm, int bn)
{
    a->BH = on_gpu ? 3 : 2;
    a->L = on_gpu ? 300 : 100;
    a->D = on_gpu ? 128 : 64;
    a->causal = causal;
    a->sl = a->D + 8;
    a->sbh = a->L * a->sl + 64;
    a->scale = (float)(1 / sqrt(a->D));
    int64_t n = a->BH * a->sbh;
    a->q = buf_rand(IR_BF16, n, -2, 2);
    a->k = buf_rand(IR_BF16, n, -2, 2);
    a->v = buf_rand(IR_BF16, n, -1, 1);
    a->dout = buf_rand(IR_BF16, n, -1, 1);
    a->qd = buf_doubles(&a->q);
    a->kd = buf_doubles(&a->k);
    a->vd = buf_doubles(&a->v);
    a->dod = buf_doubles(&a->dout);
    a->p = NULL;
    if (bn) def(c, "CAUSAL", causal);
    if (!on_gpu) {
        def(c, "BM", bm);
        if (bn) def(c, "BN", bn);
        def(c, "D", a->D);
    }
    snprintf(c->shape, sizeof c->shape, "%dx%dx%d%s", a->BH, a->L, a->D,
             !bn ? "" : causal ? " causal" : " full");
}

/* The kernels round the weights of their dots (P, dS) to bf16, a relative error of at
 * most 2^-9 per term; the tolerance of an output element allows twice that on the sum
 * of the magnitudes of its terms, which the references compute beside the values. A
 * wrong mask or a lost block changes a sum by whole terms, far more. */
#define BF16_TERM (1.0 / 256)

static double *tol_new(int64_t n)
{
    double *t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) abort();
    return t;
}

/* The forward in double: lse (natural log) into lse, O rounded to bf16 into o, and, if
 * otol is not NULL, the tolerance of each element of O. */
static void attn_forward(const Attn *a, Buf *o, Buf *lse, double *otol)
{
    double *s = malloc((size_t)a->L * sizeof *s);
    if (!s) abort();
    for (int bh = 0; bh < a->BH; bh++)
        for (int i = 0; i < a->L; i++) {
            double mx = -INFINITY, l = 0;
            for (int j = 0; j < a->L; j++)
                if (attn_seen(a, i, j)) s[j] = attn_score(a, bh, i, j), mx = fmax(mx, s[j]);
            for (int j = 0; j < a->L; j++)
                if (attn_seen(a, i, j)) l += exp(s[j] - mx);
            buf_set(lse, (int64_t)bh * a->L + i, mx + log(l));
            for (int d = 0; d < a->D; d++) {
                double acc = 0, mag = 0;
                for (int j = 0; j < a->L; j++)
                    if (attn_seen(a, i, j)) {
                        double t = exp(s[j] - mx) * attn_get(a, a->vd, bh, j, d);
                        acc += t;
                        mag += fabs(t);
                    }
                int64_t at = bh * a->sbh + i * a->sl + d;
                buf_set(o, at, acc / l);
                if (otol) otol[at] = BF16_TERM * mag / l;
            }
        }
    free(s);
}

/* delta[bh][i] = sum over d of dO * O, from the bf16 values. */
static void attn_delta(const Attn *a, const Buf *o, Buf *delta)
{
    double *od = buf_doubles(o);
    for (int bh = 0; bh < a->BH; bh++)
        for (int i = 0; i < a->L; i++) {
            double s = 0;
            for (int d = 0; d < a->D; d++) s += attn_get(a, od, bh, i, d) * attn_get(a, a->dod, bh, i, d);
            buf_set(delta, (int64_t)bh * a->L + i, s);
        }
    free(od);
}

/* The doubles and P (the Bufs belong to the case once passed as arguments). */
static void attn_free(Attn *a)
{
    free(a->qd);
    free(a->kd);
    free(a->vd);
    free(a->dod);
    free(a->p);
}

/* The inputs of the backward kernels, lse and delta (f32, as the forward and the
 * preprocess kernel would give them), and P recomputed from that lse as the kernels do. */
static void attn_backward_inputs(Attn *a, Buf *lse, Buf *delta)
{
    Buf o = buf_new(IR_BF16, a->q.n);
    *lse = buf_new(IR_F32, (int64_t)a->BH * a->L);
    *delta = buf_new(IR_F32, (int64_t)a->BH * a->L);
    attn_forward(a, &o, lse, NULL);
    attn_delta(a, &o, delta);
    free(o.data);
    a->p = calloc((size_t)a->BH * a->L * a->L, sizeof *a->p);
    if (!a->p) abort();
    for (int bh = 0; bh < a->BH; bh++)
        for (int i = 0; i < a->L; i++)
            for (int j = 0; j < a->L; j++)
                if (attn_seen(a, i, j))
                    a->p[((int64_t)bh * a->L + i) * a->L + j] =
                        exp(attn_score(a, bh, i, j) - buf_get(lse, (int64_t)bh * a->L + i));
}

/* dS[bh][i][j] = P * (dP - delta), dP = dO_i . v_j. */
static double attn_ds(const Attn *a, const Buf *delta, int bh, int i, int j)
{
    double p = a->p[((int64_t)bh * a->L + i) * a->L + j], dp = 0;
    if (p == 0) return 0;
    for (int d = 0; d < a->D; d++) dp += attn_get(a, a->dod, bh, i, d) * attn_get(a, a->vd, bh, j, d);
    return p * (dp - buf_get(delta, (int64_t)bh * a->L + i));
}

/* A bf16 [BH, L, D] output in the layout of the inputs, gaps poisoned. */
static Buf attn_out(const Attn *a)
{
    Buf b = buf_new(IR_BF16, a->q.n);
    memset(b.data, 0xFF, (size_t)b.n * 2);
    return b;
}

static void attn_args(Case *c, const Attn *a)
{
    arg_int(c, a->BH);
    arg_int(c, a->L);
    arg_float(c, a->scale);
    arg_int(c, a->sbh);
    arg_int(c, a->sl);
}

static void case_attn_fwd(Case *c, int causal)
{
    Attn a;
    attn_init(c, &a, causal, 32, 16);
    Buf want_o = attn_out(&a), want_lse = buf_new(IR_F32, (int64_t)a.BH * a.L);
    double *otol = tol_new(want_o.n);
    attn_forward(&a, &want_o, &want_lse, otol);
    arg_buf(c, buf_new(IR_BF16, want_o.n));
    arg_buf(c, buf_new(IR_F32, want_lse.n));
    arg_buf(c, a.q);
    arg_buf(c, a.k);
    arg_buf(c, a.v);
    attn_args(c, &a);
    free(a.dout.data);
    attn_free(&a);
    /* O: the rounding of P, then half a bf16 ulp (twice) for O's own; lse stays f32. */
    expect(c, 0, want_o, 1e-5, 1.0 / 128);
    c->etol[0] = otol;
    expect(c, 1, want_lse, 1e-5, 1e-5);
}
/* attn_fwd_fp8 (examples/flash_attn_fwd_fp8.tile): e4m3 q, k and V^T ([BH, D, L], its
 * own strides) with per-tensor descales, O bf16 and lse f32 as attn_fwd's. The
 * reference is the same e4m3 values times their descales in double; the kernel rounds
 * P to e4m3, 2^-4 relative or 2^-10 absolute (below e4m3's normal range) per term,
 * which each element's tolerance allows on the magnitudes of its terms. */
static void case_attn_fwd_fp8(Case *c, int causal)
{
    int BH = on_gpu ? 3 : 2, L = on_gpu ? 300 : 100, D = on_gpu ? 128 : 64;
    int64_t sl = D + 16, sbh = (int64_t)L * sl + 64, svt = L + 16, svbh = (int64_t)D * svt + 64;
    double qs = 0.5, ks = 0.25, vs = 1.5, scale = (float)(1 / sqrt(D));
    Buf q = buf_rand(IR_F8E4M3, BH * sbh, -4, 4), k = buf_rand(IR_F8E4M3, BH * sbh, -4, 4);
    Buf vt = buf_rand(IR_F8E4M3, BH * svbh, -2, 2);
    Buf want_o = buf_new(IR_BF16, BH * sbh), want_lse = buf_new(IR_F32, (int64_t)BH * L);
    memset(want_o.data, 0xFF, (size_t)want_o.n * 2);   /* the gaps: poisoned, never written */
    double *otol = tol_new(want_o.n), *sc = malloc((size_t)L * sizeof *sc);
    if (!sc) abort();
    for (int bh = 0; bh < BH; bh++)
        for (int i = 0; i < L; i++) {
            int n = causal ? i + 1 : L;
            double mx = -INFINITY, l = 0;
            for (int j = 0; j < n; j++) {
                double t = 0;
                for (int d = 0; d < D; d++)
                    t += buf_get(&q, bh * sbh + i * sl + d) * buf_get(&k, bh * sbh + j * sl + d);
                sc[j] = scale * qs * ks * t;
                mx = fmax(mx, sc[j]);
            }
            for (int j = 0; j < n; j++) l += exp(sc[j] - mx);
            buf_set(&want_lse, (int64_t)bh * L + i, mx + log(l));
            for (int d = 0; d < D; d++) {
                double acc = 0, mag = 0;
                for (int j = 0; j < n; j++) {
                    double p = exp(sc[j] - mx), v = vs * buf_get(&vt, bh * svbh + d * svt + j);
                    acc += p * v;
                    mag += (p / 16 + 1.0 / 1024) * fabs(v);
                }
                buf_set(&want_o, bh * sbh + i * sl + d, acc / l);
                otol[bh * sbh + i * sl + d] = mag / l;
            }
        }
    free(sc);
    def(c, "CAUSAL", causal);
    if (!on_gpu) {
        def(c, "BM", 32);
        def(c, "BN", 16);
        def(c, "D", D);
    }
    snprintf(c->shape, sizeof c->shape, "%dx%dx%d%s", BH, L, D, causal ? " causal" : " full");
    arg_buf(c, buf_new(IR_BF16, want_o.n));
    arg_buf(c, buf_new(IR_F32, want_lse.n));
    arg_buf(c, q);
    arg_buf(c, k);
    arg_buf(c, vt);
    arg_int(c, BH);
    arg_int(c, L);
    arg_float(c, scale);
    arg_float(c, qs);
    arg_float(c, ks);
    arg_float(c, vs);
    arg_int(c, sbh);
    arg_int(c, sl);
    arg_int(c, svbh);
    arg_int(c, svt);
    expect(c, 0, want_o, 1e-5, 1.0 / 128);
    c->etol[0] = otol;
    expect(c, 1, want_lse, 1e-5, 1e-5);
}
static void case_attn_fwd_fp8_full(Case *c) { case_attn_fwd_fp8(c, 0); }
static void case_attn_fwd_fp8_causal(Case *c) { case_attn_fwd_fp8(c, 1); }

/* The _tma kernels' layout: the heads one after the other (no gap between them: the
 * kernels read [BH * L, D] blocks), the rows still strided. */
static void attn_pack_heads(Attn *a)
{
    a->sbh = (int64_t)a->L * a->sl;           /* the buffers stay as allocated, larger */
    free(a->qd);
    free(a->kd);
    free(a->vd);
    free(a->dod);
    a->qd = buf_doubles(&a->q);
    a->kd = buf_doubles(&a->k);
    a->vd = buf_doubles(&a->v);
    a->dod = buf_doubles(&a->dout);
}

/* The scalars of a _tma kernel: BH, L, scale, the row stride, the rows of all heads. */
static void attn_args_packed(Case *c, const Attn *a)
{
    arg_int(c, a->BH);
    arg_int(c, a->L);
    arg_float(c, a->scale);
    arg_int(c, a->sl);
    arg_int(c, (int64_t)a->BH * a->L);
}

static void case_attn_fwd_tma(Case *c, int causal)
{
    Attn a;
    attn_init(c, &a, causal, on_gpu ? 128 : 32, 16);
    attn_pack_heads(&a);
    Buf want_o = attn_out(&a), want_lse = buf_new(IR_F32, (int64_t)a.BH * a.L);
    double *otol = tol_new(want_o.n);
    attn_forward(&a, &want_o, &want_lse, otol);
    Buf out = buf_new(IR_BF16, want_o.n);
    arg_buf(c, out);
    arg_buf(c, buf_new(IR_F32, want_lse.n));
    arg_buf(c, a.q);
    arg_buf(c, a.k);
    arg_buf(c, a.v);
    attn_args_packed(c, &a);
    free(a.dout.data);
    attn_free(&a);
    expect(c, 0, want_o, 1e-5, 1.0 / 128);
    c->etol[0] = otol;
    expect(c, 1, want_lse, 1e-5, 1e-5);
}
static void case_attn_fwd_tma_full(Case *c) { case_attn_fwd_tma(c, 0); }
static void case_attn_fwd_tma_causal(Case *c) { case_attn_fwd_tma(c, 1); }
/* Each program's query rows on a cluster of two CTAs, K and V multicast between them
 * (passes/cluster.c), with a producer warpgroup. */
static void case_attn_fwd_tma_cluster(Case *c)
{
    def(c, "cluster", 2);
    def(c, "ws", 1);
    def(c, "BM", on_gpu ? 256 : 64);
    case_attn_fwd_tma(c, 1);
}

static void case_attn_fwd_full(Case *c) { case_attn_fwd(c, 0); }
static void case_attn_fwd_causal(Case *c) { case_attn_fwd(c, 1); }

static void case_attn_bwd_preprocess(Case *c)
{
    Attn a;
    attn_init(c, &a, 0, 32, 0);
    Buf o = buf_rand(IR_BF16, a.q.n, -1, 1), want = buf_new(IR_F32, (int64_t)a.BH * a.L);
    attn_delta(&a, &o, &want);
    arg_buf(c, buf_new(IR_F32, want.n));
    arg_buf(c, o);
    arg_buf(c, a.dout);
    arg_int(c, a.BH);
    arg_int(c, a.L);
    arg_int(c, a.sbh);
    arg_int(c, a.sl);
    free(a.q.data);
    free(a.k.data);
    free(a.v.data);
    attn_free(&a);
    expect(c, 0, want, 1e-5, 1e-5);  /* exact products, f32 sums of D of them */
}

/* tma: attn_bwd_dkdv_tma (the heads packed, ws on the GPU and in the checked GPU IR) */
static void attn_bwd_dkdv(Case *c, int causal, int tma)
{
    Attn a;
    Buf lse, delta;
    attn_init(c, &a, causal, tma && on_gpu ? 64 : 16, tma && on_gpu ? 64 : 32);
    if (tma) attn_pack_heads(&a);
    attn_backward_inputs(&a, &lse, &delta);
    Buf want_dk = attn_out(&a), want_dv = attn_out(&a);
    double *ktol = tol_new(want_dk.n), *vtol = tol_new(want_dv.n);
    double *ds = malloc((size_t)a.L * sizeof *ds);
    if (!ds) abort();
    for (int bh = 0; bh < a.BH; bh++)
        for (int j = 0; j < a.L; j++) {
            for (int i = 0; i < a.L; i++) ds[i] = attn_ds(&a, &delta, bh, i, j);
            for (int d = 0; d < a.D; d++) {
                double dk = 0, dv = 0, kmag = 0, vmag = 0;
                for (int i = 0; i < a.L; i++) {
                    double tk = ds[i] * attn_get(&a, a.qd, bh, i, d);
                    double tv = a.p[((int64_t)bh * a.L + i) * a.L + j] * attn_get(&a, a.dod, bh, i, d);
                    dk += tk, kmag += fabs(tk);
                    dv += tv, vmag += fabs(tv);
                }
                int64_t at = bh * a.sbh + j * a.sl + d;
                buf_set(&want_dk, at, a.scale * dk);
                buf_set(&want_dv, at, dv);
                ktol[at] = BF16_TERM * a.scale * kmag;
                vtol[at] = BF16_TERM * vmag;
            }
        }
    free(ds);
    attn_free(&a);
    arg_buf(c, buf_new(IR_BF16, want_dk.n));
    arg_buf(c, buf_new(IR_BF16, want_dv.n));
    arg_buf(c, a.q);
    arg_buf(c, a.k);
    arg_buf(c, a.v);
    arg_buf(c, a.dout);
    arg_buf(c, lse);
    arg_buf(c, delta);
    if (tma) attn_args_packed(c, &a);
    else attn_args(c, &a);
    expect(c, 0, want_dk, 1e-5, 1.0 / 128);
    expect(c, 1, want_dv, 1e-5, 1.0 / 128);
    c->etol[0] = ktol;
    c->etol[1] = vtol;
}
static void case_attn_bwd_dkdv_full(Case *c) { attn_bwd_dkdv(c, 0, 0); }
static void case_attn_bwd_dkdv_causal(Case *c) { attn_bwd_dkdv(c, 1, 0); }
static void case_attn_bwd_dkdv_tma_full(Case *c) { attn_bwd_dkdv(c, 0, 1); }
static void case_attn_bwd_dkdv_tma_causal(Case *c) { attn_bwd_dkdv(c, 1, 1); }

static void attn_bwd_dq(Case *c, int causal, int tma)
{
    Attn a;
    Buf lse, delta;
    attn_init(c, &a, causal, tma && on_gpu ? 64 : 32, tma && on_gpu ? 64 : 16);
    if (tma) attn_pack_heads(&a);
    attn_backward_inputs(&a, &lse, &delta);
    Buf want = attn_out(&a);
    double *qtol = tol_new(want.n);
    double *ds = malloc((size_t)a.L * sizeof *ds);
    if (!ds) abort();
    for (int bh = 0; bh < a.BH; bh++)
        for (int i = 0; i < a.L; i++) {
            for (int j = 0; j < a.L; j++) ds[j] = attn_ds(&a, &delta, bh, i, j);
            for (int d = 0; d < a.D; d++) {
                double dq = 0, mag = 0;
                for (int j = 0; j < a.L; j++) {
                    double t = ds[j] * attn_get(&a, a.kd, bh, j, d);
                    dq += t, mag += fabs(t);
                }
                int64_t at = bh * a.sbh + i * a.sl + d;
                buf_set(&want, at, a.scale * dq);
                qtol[at] = BF16_TERM * a.scale * mag;
            }
        }
    free(ds);
    attn_free(&a);
    arg_buf(c, buf_new(IR_BF16, want.n));
    arg_buf(c, a.q);
    arg_buf(c, a.k);
    arg_buf(c, a.v);
    arg_buf(c, a.dout);
    arg_buf(c, lse);
    arg_buf(c, delta);
    if (tma) attn_args_packed(c, &a);
    else attn_args(c, &a);
    expect(c, 0, want, 1e-5, 1.0 / 128);
    c->etol[0] = qtol;
}
static void case_attn_bwd_dq_full(Case *c) { attn_bwd_dq(c, 0, 0); }
static void case_attn_bwd_dq_causal(Case *c) { attn_bwd_dq(c, 1, 0); }
static void case_attn_bwd_dq_tma_full(Case *c) { attn_bwd_dq(c, 0, 1); }
static void case_attn_bwd_dq_tma_causal(Case *c) { attn_bwd_dq(c, 1, 1); }

/* The fused backward: attn_bwd_fused's dK, dV (as attn_bwd_dkdv's) and dq_accum (dS K,
 * f32, unscaled: the partials of every key block added in), from zeroed dq_accum and sem;
 * det: DETERMINISTIC = 1 (the key blocks' adds in turn). */
static void attn_bwd_fused(Case *c, int causal, int det)
{
    Attn a;
    Buf lse, delta;
    attn_init(c, &a, causal, 16, 32);
    if (det) def(c, "DETERMINISTIC", 1);
    attn_backward_inputs(&a, &lse, &delta);
    Buf want_dk = attn_out(&a), want_dv = attn_out(&a);
    Buf want_acc = buf_new(IR_F32, (int64_t)a.BH * a.L * a.D);
    double *ktol = tol_new(want_dk.n), *vtol = tol_new(want_dv.n), *qtol = tol_new(want_acc.n);
    double *ds = malloc((size_t)a.L * a.L * sizeof *ds);
    if (!ds) abort();
    for (int bh = 0; bh < a.BH; bh++) {
        for (int i = 0; i < a.L; i++)
            for (int j = 0; j < a.L; j++) ds[(int64_t)i * a.L + j] = attn_ds(&a, &delta, bh, i, j);
        for (int j = 0; j < a.L; j++)
            for (int d = 0; d < a.D; d++) {
                double dk = 0, dv = 0, kmag = 0, vmag = 0;
                for (int i = 0; i < a.L; i++) {
                    double tk = ds[(int64_t)i * a.L + j] * attn_get(&a, a.qd, bh, i, d);
                    double tv = a.p[((int64_t)bh * a.L + i) * a.L + j] * attn_get(&a, a.dod, bh, i, d);
                    dk += tk, kmag += fabs(tk);
                    dv += tv, vmag += fabs(tv);
                }
                int64_t at = bh * a.sbh + j * a.sl + d;
                buf_set(&want_dk, at, a.scale * dk);
                buf_set(&want_dv, at, dv);
                ktol[at] = BF16_TERM * a.scale * kmag;
                vtol[at] = BF16_TERM * vmag;
            }
        for (int i = 0; i < a.L; i++)
            for (int d = 0; d < a.D; d++) {
                double dq = 0, mag = 0;
                for (int j = 0; j < a.L; j++) {
                    double t = ds[(int64_t)i * a.L + j] * attn_get(&a, a.kd, bh, j, d);
                    dq += t, mag += fabs(t);
                }
                int64_t at = ((int64_t)bh * a.L + i) * a.D + d;
                buf_set(&want_acc, at, dq);
                qtol[at] = BF16_TERM * mag;
            }
    }
    free(ds);
    attn_free(&a);
    arg_buf(c, buf_new(IR_BF16, want_dk.n));
    arg_buf(c, buf_new(IR_BF16, want_dv.n));
    arg_buf(c, buf_new(IR_F32, want_acc.n));                 /* zeroed, as the preprocess leaves it */
    arg_buf(c, buf_new(IR_I32, (int64_t)a.BH * a.L));
    arg_buf(c, a.q);
    arg_buf(c, a.k);
    arg_buf(c, a.v);
    arg_buf(c, a.dout);
    arg_buf(c, lse);
    arg_buf(c, delta);
    attn_args(c, &a);
    expect(c, 0, want_dk, 1e-5, 1.0 / 128);
    expect(c, 1, want_dv, 1e-5, 1.0 / 128);
    expect(c, 2, want_acc, 1e-5, 1e-5);                      /* f32 sums of bf16 products of dS */
    c->write_only[2] = false;                                /* read: the adds start from its zeros */
    c->etol[0] = ktol;
    c->etol[1] = vtol;
    c->etol[2] = qtol;
    if (det) snprintf(c->shape + strlen(c->shape), sizeof c->shape - strlen(c->shape), " det");
}
static void case_attn_bwd_fused_full(Case *c) { attn_bwd_fused(c, 0, 0); }
static void case_attn_bwd_fused_causal(Case *c) { attn_bwd_fused(c, 1, 0); }
static void case_attn_bwd_fused_causal_det(Case *c) { attn_bwd_fused(c, 1, 1); }

/* attn_bwd_preprocess_fused: delta, and dq_accum and sem zeroed (poisoned before). */
static void case_attn_bwd_preprocess_fused(Case *c)
{
    Attn a;
    attn_init(c, &a, 0, 32, 0);
    Buf o = buf_rand(IR_BF16, a.q.n, -1, 1), want = buf_new(IR_F32, (int64_t)a.BH * a.L);
    attn_delta(&a, &o, &want);
    arg_buf(c, buf_new(IR_F32, want.n));
    arg_buf(c, buf_new(IR_F32, (int64_t)a.BH * a.L * a.D));
    arg_buf(c, buf_new(IR_I32, (int64_t)a.BH * a.L));
    arg_buf(c, o);
    arg_buf(c, a.dout);
    arg_int(c, a.BH);
    arg_int(c, a.L);
    arg_int(c, a.sbh);
    arg_int(c, a.sl);
    expect(c, 0, want, 1e-5, 1e-5);
    expect(c, 1, buf_new(IR_F32, (int64_t)a.BH * a.L * a.D), 0, 0);
    expect(c, 2, buf_new(IR_I32, (int64_t)a.BH * a.L), 0, 0);
    free(a.q.data);
    free(a.k.data);
    free(a.v.data);
    attn_free(&a);
}

/* attn_bwd_dq_convert: dq = bf16(dq_accum * scale) in dq's strides, the gaps untouched. */
static void case_attn_bwd_dq_convert(Case *c)
{
    Attn a;
    attn_init(c, &a, 0, 32, 0);
    Buf acc = buf_rand(IR_F32, (int64_t)a.BH * a.L * a.D, -4, 4), want = attn_out(&a);
    for (int bh = 0; bh < a.BH; bh++)
        for (int i = 0; i < a.L; i++)
            for (int d = 0; d < a.D; d++)
                buf_set(&want, bh * a.sbh + i * a.sl + d,
                        (float)(buf_get(&acc, ((int64_t)bh * a.L + i) * a.D + d) * (float)a.scale));
    arg_buf(c, buf_new(IR_BF16, want.n));
    arg_buf(c, acc);
    arg_int(c, a.BH);
    arg_int(c, a.L);
    arg_float(c, a.scale);
    arg_int(c, a.sbh);
    arg_int(c, a.sl);
    expect(c, 0, want, 0, 0);                                /* one f32 product, rounded once */
    free(a.q.data);
    free(a.k.data);
    free(a.v.data);
    free(a.dout.data);
    attn_free(&a);
}

/* Paged decoding attention: a few sequences of odd lengths (one empty, one shorter than a page, one over several
 * pages) whose pages are scattered over a cache with spare pages of random data (a
 * wrong page read shows), grouped-query heads. */
static void case_paged_attn_decode(Case *c)
{
    enum { NS = 5 };
    const int lens_gpu[NS] = {1, 300, 0, 129, 64}, lens_cpu[NS] = {1, 45, 0, 33, 16};
    const int *lens = on_gpu ? lens_gpu : lens_cpu;
    int H = on_gpu ? 8 : 4, GROUP = on_gpu ? 4 : 2, D = on_gpu ? 128 : 32, PAGE = 16, BN = on_gpu ? 64 : 32;
    int HKV = H / GROUP, max_pages = 0, used = 0, max_len = 1;
    for (int b = 0; b < NS; b++) {
        int np = (lens[b] + PAGE - 1) / PAGE;
        if (lens[b] > max_len) max_len = lens[b];
        used += np;
        if (np > max_pages) max_pages = np;
    }
    max_pages += 1;                       /* a row longer than any sequence needs */
    int npages = used + 3;                /* spare pages hold random data too */
    int64_t page_elems = (int64_t)PAGE * HKV * D;
    Buf q = buf_rand(IR_BF16, (int64_t)NS * H * D, -2, 2);
    Buf kc = buf_rand(IR_BF16, npages * page_elems, -2, 2), vc = buf_rand(IR_BF16, npages * page_elems, -1, 1);
    Buf table = buf_new(IR_I32, (int64_t)NS * max_pages), seq = buf_new(IR_I32, NS);
    /* a shuffled assignment of physical pages; unused table entries point anywhere */
    int *perm = malloc((size_t)npages * sizeof *perm);
    if (!perm) abort();
    for (int i = 0; i < npages; i++) perm[i] = i;
    for (int i = npages - 1; i > 0; i--) {
        int j = (int)uniform(0, i + 1);
        if (j > i) j = i;
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int next = 0;
    for (int b = 0; b < NS; b++) {
        buf_set(&seq, b, lens[b]);
        for (int i = 0; i < max_pages; i++)
            buf_set(&table, (int64_t)b * max_pages + i, i * PAGE < lens[b] ? perm[next++] : perm[npages - 1 - i % 3]);
    }
    free(perm);
    double *qd = buf_doubles(&q), *kd = buf_doubles(&kc), *vd = buf_doubles(&vc);
    double scale = (float)(1 / sqrt(D));
    Buf want = buf_new(IR_BF16, (int64_t)NS * H * D);
    double *s = malloc((size_t)max_len * sizeof *s);
    if (!s) abort();
    for (int b = 0; b < NS; b++)
        for (int h = 0; h < H; h++) {
            const double *qr = qd + ((int64_t)b * H + h) * D;
            double mx = -INFINITY, l = 0;
            for (int t = 0; t < lens[b]; t++) {
                int64_t pg = (int64_t)buf_get(&table, (int64_t)b * max_pages + t / PAGE);
                const double *kr = kd + pg * page_elems + ((int64_t)(t % PAGE) * HKV + h / GROUP) * D;
                double dot = 0;
                for (int d = 0; d < D; d++) dot += qr[d] * kr[d];
                s[t] = scale * dot;
                mx = fmax(mx, s[t]);
            }
            for (int t = 0; t < lens[b]; t++) l += exp(s[t] - mx);
            for (int d = 0; d < D; d++) {
                double acc = 0;
                for (int t = 0; t < lens[b]; t++) {
                    int64_t pg = (int64_t)buf_get(&table, (int64_t)b * max_pages + t / PAGE);
                    acc += exp(s[t] - mx) * vd[pg * page_elems + ((int64_t)(t % PAGE) * HKV + h / GROUP) * D + d];
                }
                buf_set(&want, ((int64_t)b * H + h) * D + d, lens[b] ? acc / l : 0);
            }
        }
    free(s);
    free(qd);
    free(kd);
    free(vd);
    arg_buf(c, buf_new(IR_BF16, want.n));
    arg_buf(c, q);
    arg_buf(c, kc);
    arg_buf(c, vc);
    arg_buf(c, table);
    arg_buf(c, seq);
    arg_int(c, NS);
    arg_int(c, max_pages);
    arg_float(c, scale);
    def(c, "H", H);
    def(c, "GROUP", GROUP);
    def(c, "D", D);
    def(c, "PAGE", PAGE);
    def(c, "BN", BN);
    /* f32 softmax and sums: O's own bf16 rounding (half an ulp, twice for safety) */
    expect(c, 0, want, 1e-4, 1.0 / 128);
    snprintf(c->shape, sizeof c->shape, "%d seqs H%d/%d D%d", NS, H, HKV, D);
}

typedef struct Example {
    const char *file, *kernel;
    void (*make)(Case *c);
} Example;

static const Example examples[] = {
    {"vector_add.tile", "vector_add", case_vector_add},
    {"softmax.tile", "softmax", case_softmax},
    {"layernorm.tile", "add_layernorm", case_layernorm},
    {"rmsnorm.tile", "rms_norm", case_rmsnorm},
    {"matmul.tile", "matmul", case_matmul},
    {"gelu_bias.tile", "gelu_bias", case_gelu_bias},
    {"dropout.tile", "dropout", case_dropout},
    {"cumsum_argmax.tile", "cumsum_argmax", case_cumsum_argmax},
    {"histogram.tile", "histogram", case_histogram},
    {"adamw.tile", "adamw", case_adamw},
    {"matmul_bf16.tile", "matmul_bf16", case_matmul_bf16},
    {"matmul_bf16.tile", "matmul_bf16", case_matmul_bf16_cluster},
    {"matmul_bf16.tile", "matmul_bf16", case_matmul_bf16_pingpong},
    {"gemm_bias_gelu.tile", "gemm_bias_gelu", case_gemm_bias_gelu},
    {"gemm_bias_gelu.tile", "gemm_bias_gelu", case_gemm_bias_gelu_pingpong},
    {"matmul_fp8.tile", "matmul_fp8", case_matmul_fp8_rowwise},
    {"matmul_fp8.tile", "matmul_fp8", case_matmul_fp8_tensor},
    {"qkv_proj.tile", "qkv_proj", case_qkv_proj},
    {"flash_attn_fwd.tile", "attn_fwd", case_attn_fwd_full},
    {"flash_attn_fwd.tile", "attn_fwd", case_attn_fwd_causal},
    {"flash_attn_fwd.tile", "attn_fwd_tma", case_attn_fwd_tma_full},
    {"flash_attn_fwd.tile", "attn_fwd_tma", case_attn_fwd_tma_causal},
    {"flash_attn_fwd.tile", "attn_fwd_tma", case_attn_fwd_tma_cluster},
    {"flash_attn_fwd_fp8.tile", "attn_fwd_fp8", case_attn_fwd_fp8_full},
    {"flash_attn_fwd_fp8.tile", "attn_fwd_fp8", case_attn_fwd_fp8_causal},
    {"flash_attn_bwd.tile", "attn_bwd_preprocess", case_attn_bwd_preprocess},
    {"flash_attn_bwd.tile", "attn_bwd_dkdv", case_attn_bwd_dkdv_full},
    {"flash_attn_bwd.tile", "attn_bwd_dkdv", case_attn_bwd_dkdv_causal},
    {"flash_attn_bwd.tile", "attn_bwd_dq", case_attn_bwd_dq_full},
    {"flash_attn_bwd.tile", "attn_bwd_dq", case_attn_bwd_dq_causal},
    {"flash_attn_bwd.tile", "attn_bwd_dkdv_tma", case_attn_bwd_dkdv_tma_full},
    {"flash_attn_bwd.tile", "attn_bwd_dkdv_tma", case_attn_bwd_dkdv_tma_causal},
    {"flash_attn_bwd.tile", "attn_bwd_dq_tma", case_attn_bwd_dq_tma_full},
    {"flash_attn_bwd.tile", "attn_bwd_dq_tma", case_attn_bwd_dq_tma_causal},
    {"flash_attn_bwd.tile", "attn_bwd_preprocess_fused", case_attn_bwd_preprocess_fused},
    {"flash_attn_bwd.tile", "attn_bwd_fused", case_attn_bwd_fused_full},
    {"flash_attn_bwd.tile", "attn_bwd_fused", case_attn_bwd_fused_causal},
    {"flash_attn_bwd.tile", "attn_bwd_fused", case_attn_bwd_fused_causal_det},
    {"flash_attn_bwd.tile", "attn_bwd_dq_convert", case_attn_bwd_dq_convert},
    {"paged_attn_decode.tile", "paged_attn_decode", case_paged_attn_decode},
};

/* ---- running and comparing ------------------------------------------------------------ */
/* Compiles `path` with the case's const values at the given -O level; returns the kernel or NULL (diagnostics
 * printed). */
static const IrFunc *compile(IrCtx *ctx, const Source *src, const char *kernel,
                             const Case *c, int opt)
{
    DiagList *d = ir_ctx_diags(ctx);
    AstProgram *p = fe_parse(ir_ctx_arena(ctx), src, d);
    FeOptions fo = {c->defs, c->ndefs, kernel};
    IrModule *m = p && !d->nerrors ? fe_lower(ctx, p, &fo, d) : NULL;
    if (m && !d->nerrors) {
        PassOptions po = {.verify_each = true};
        pass_run_default(m, opt, &po);
    }
    const IrFunc *k = m && !d->nerrors ? ir_module_find(m, kernel) : NULL;
    diag_print(d, stderr);
    return k;
}

/* Largest error relative to the tolerance (<= 1 passes) over the checked buffers. */
static double compare(const Case *c, double *max_abs)
{
    double worst = 0;
    *max_abs = 0;
    for (uint32_t a = 0; a < c->nargs; a++) {
        const Buf *want = &c->expect[a];
        for (int64_t i = 0; i < want->n; i++) {
            double got = buf_get(&c->bufs[a], i), w = buf_get(want, i);
            if (isnan(w) && isnan(got)) continue;   /* a gap the kernel must not write */
            double err = fabs(got - w), tol = c->atol[a] + c->rtol[a] * fabs(w);
            if (c->etol[a]) tol += c->etol[a][i];
            double ratio = err == 0 ? 0 : tol == 0 ? INFINITY : err / tol;
            /* A NaN (a value where the poison should be, or NaN where a value should
             * be) is a failure that later elements must not overwrite. */
            if (isnan(ratio) || ratio > worst) worst = isnan(worst) ? worst : ratio;
            if (isnan(err) || err > *max_abs) *max_abs = isnan(*max_abs) ? *max_abs : err;
        }
    }
    return worst;
}

static const char *grid_str(const int64_t g[3])
{
    static char buf[48];
    snprintf(buf, sizeof buf, "%lldx%lldx%lld", (long long)g[0], (long long)g[1], (long long)g[2]);
    return buf;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void free_case(Case *c)
{
    for (uint32_t a = 0; a < MAX_ARGS; a++) {
        free(c->bufs[a].data);
        free(c->expect[a].data);
        free(c->etol[a]);
    }
}

/* Fills every write-only output with 0xFF bytes (NaN for floats, -1 for integers), on
 * the CPU as on the GPU, so an element the kernel forgets to write shows. */
static void poison_outputs(Case *c)
{
    for (uint32_t a = 0; a < c->nargs; a++)
        if (c->args[a].is_buffer && c->write_only[a])
            memset(c->bufs[a].data, 0xFF, (size_t)(c->bufs[a].n * ir_elem_bytes(c->bufs[a].elem)));
}

/* ---- the GPU, through libtileRT ------------------------------------------------------- */
static TrtContext *gpu_ctx;

static bool gpu_fail(TrtStatus st)
{
    fprintf(stderr, "tile-examples: %s: %s\n", trt_status_name(st), trt_last_error());
    return false;
}

static TrtArg gpu_arg(const IrFunc *k, uint32_t p, const InterpArg *a, CUdeviceptr dev)
{
    IrElem e = ir_value_type(k, k->body.args[p])->elem;
    if (e == IR_PTR) return trt_arg_ptr(dev);
    if (e == IR_F32) return trt_arg_f32((float)a->u.f);
    if (e == IR_F64) return trt_arg_f64(a->u.f);
    if (e == IR_I64) return trt_arg_i64(a->u.i);
    return trt_arg_i32((int32_t)a->u.i);
}

/* Copies the buffers to the device (write-only outputs already poisoned), launches,
 * copies them back. */
static bool run_gpu(const char *path, const Example *ex, Case *c, const IrFunc *k,
                    const int64_t grid[3])
{
    TrtModule *m = NULL;
    TrtKernel *kern = NULL;
    CUdeviceptr dev[MAX_ARGS] = {0};
    TrtArg targs[MAX_ARGS];
    TrtConst consts[MAX_DEFS];
    for (uint32_t i = 0; i < c->ndefs; i++) consts[i] = (TrtConst){c->defs[i].name, c->defs[i].value};
    TrtStatus st = trt_module_load_file(gpu_ctx, path, &m);
    if (!st) st = trt_module_get_kernel(m, ex->kernel, consts, c->ndefs, &kern);
    for (uint32_t a = 0; a < c->nargs && !st; a++) {
        size_t bytes = c->args[a].is_buffer ? (size_t)(c->bufs[a].n * ir_elem_bytes(c->bufs[a].elem)) : 0;
        if (c->args[a].is_buffer && !(st = trt_mem_alloc(gpu_ctx, bytes, &dev[a])))
            st = trt_memcpy_htod(gpu_ctx, dev[a], c->bufs[a].data, bytes);
        targs[a] = gpu_arg(k, a, &c->args[a], dev[a]);
    }
    uint32_t g[3] = {(uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2]};
    uint64_t sizes[MAX_ARGS];
    for (uint32_t a = 0; a < c->nargs; a++)
        sizes[a] = c->args[a].is_buffer ? (uint64_t)(c->bufs[a].n * ir_elem_bytes(c->bufs[a].elem)) : 0;
    if (!st) st = trt_launch_sized(kern, targs, sizes, c->nargs, g, NULL);
    if (!st) st = trt_synchronize(gpu_ctx);
    for (uint32_t a = 0; a < c->nargs && !st; a++)
        if (c->args[a].is_buffer)
            st = trt_memcpy_dtoh(gpu_ctx, c->bufs[a].data, dev[a],
                                 (size_t)(c->bufs[a].n * ir_elem_bytes(c->bufs[a].elem)));
    for (uint32_t a = 0; a < c->nargs; a++) trt_mem_free(gpu_ctx, dev[a]);
    trt_module_destroy(m);
    return st ? gpu_fail(st) : true;
}

/* The kernel as the runtime would compile it for these arguments (specialized, -O3,
 * the GPU pipeline), run in the interpreter with every fact of the axis analysis
 * checked on the values (as `tilec run --check-axis-info`). */
static bool run_checking_axis_info(IrFunc *k, const Case *c, const int64_t grid[3], DiagList *diags)
{
    SpecClass classes[MAX_ARGS];
    spec_classes_of_args(k, c->args, classes);
    uint64_t aligned = pass_prepare_gpu(k, classes, &(PassOptions){.verify_each = true});
    InterpOptions io = {0};
    return axisinfo_check_run(k, aligned, c->args, c->nargs, grid, &io, diags);
}

/* The checked variant (TILE_DEBUG=bounds) as libtileRT compiles it, in the
 * interpreter with each buffer's size and a report: an in-bounds example must compute
 * what the others do, and report nothing. */
static bool run_checked(IrFunc *k, const Case *c, const int64_t grid[3], DiagList *diags)
{
    SpecClass classes[MAX_ARGS];
    spec_classes_of_args(k, c->args, classes);
    pass_prepare_gpu(k, classes, &(PassOptions){.verify_each = true, .check_bounds = true});
    InterpArg args[2 * MAX_ARGS + 1];
    int64_t report[IR_BOUNDS_WORDS];
    if (k->body.nargs > 2 * MAX_ARGS + 1) return false;
    memcpy(args, c->args, c->nargs * sizeof *args);
    uint32_t n = bounds_bind_args(k, args, c->nargs, report);
    InterpOptions io = {0};
    return interp_run(k, args, n, grid, &io, diags) &&
           !bounds_report_diag(report, k->name, k->param_names, c->nargs, NULL, diags);
}

/* The runs of an example in the interpreter: -O0, -O2, the GPU-level IR with the
 * axis facts checked (AX) and the checked variant (BC); on the GPU one run. */
enum { RUN_O0, RUN_O2, RUN_AX, RUN_BC, RUN_GPU };
static const char *const run_names[] = {"O0", "O2", "AX", "BC", "GPU"};

/* Runs one example one way; prints its row; returns whether it passed. */
static bool run_example(const char *dir, const Example *ex, int how)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, ex->file);
    Source *src = source_read(path);
    if (!src) {
        fprintf(stderr, "tile-examples: cannot read %s\n", path);
        return false;
    }
    rng_state = rng_seed;
    Case c;
    memset(&c, 0, sizeof c);
    ex->make(&c);
    poison_outputs(&c);
    IrCtx *ctx = ir_ctx_create();
    double t0 = now_ms();
    IrFunc *k = (IrFunc *)compile(ctx, src, ex->kernel, &c, how == RUN_O0 ? 0 : 2);
    double t1 = now_ms();
    int64_t grid[3] = {1, 1, 1};
    bool ok = k && k->grid && interp_eval_grid(k->grid, c.args, c.nargs, grid, ir_ctx_diags(ctx)) > 0;
    InterpOptions io = {0};
    if (how == RUN_GPU) ok = ok && run_gpu(path, ex, &c, k, grid);
    else if (how == RUN_AX) ok = ok && run_checking_axis_info(k, &c, grid, ir_ctx_diags(ctx));
    else if (how == RUN_BC) ok = ok && run_checked(k, &c, grid, ir_ctx_diags(ctx));
    else ok = ok && interp_run(k, c.args, c.nargs, grid, &io, ir_ctx_diags(ctx));
    double t2 = now_ms(), max_abs = 0;
    double ratio = ok ? compare(&c, &max_abs) : INFINITY;
    ok = ok && ratio <= 1;
    if (k) diag_print(ir_ctx_diags(ctx), stderr);
    printf("%-20s %-20s %-3s %-22s %-13s %10.3g %8.2f %9.1f %9.1f  %s\n", ex->file, ex->kernel,
           run_names[how],
           c.shape, grid_str(grid), max_abs, ratio, t1 - t0, t2 - t1, ok ? "ok" : "FAIL");
    ir_ctx_destroy(ctx);
    free_case(&c);
    source_free(src);
    return ok;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *only = NULL, *device = "cpu";
    bool check_bounds = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--check-bounds")) check_bounds = true;
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_seed = strtoull(argv[++i], NULL, 0);
        else dir = argv[i];
    }
    if (!dir || (strcmp(device, "cpu") && strcmp(device, "gpu"))) {
        fputs("usage: tile-examples [--device cpu|gpu] [--check-bounds] [--seed N] [--only FILE] EXAMPLES_DIR\n", stderr);
        return 2;
    }
    if (!strcmp(device, "gpu")) {
        on_gpu = true;
        TrtStatus st = trt_context_create(0, TRT_MODE_FROM_ENV, NULL, &gpu_ctx);
        if (st == TRT_ERROR_NO_DRIVER || st == TRT_ERROR_NO_DEVICE) {
            gpu_fail(st);
            return 77;  /* no GPU here: skipped, as ctest counts it */
        }
        if (!st && check_bounds) st = trt_context_set_debug(gpu_ctx, TRT_DEBUG_BOUNDS);
        if (st) return gpu_fail(st), 1;
        rng_seed ^= (uint64_t)time(NULL);  /* fresh inputs on every GPU run */
    }
    printf("inputs from seed %llu; outputs checked against references computed in C\n",
           (unsigned long long)rng_seed);
    printf("%-20s %-20s %-3s %-22s %-13s %10s %8s %9s %9s  %s\n", "example", "kernel", "run", "shape", "grid",
           "max|err|", "err/tol", "compile", "run(ms)", "result");
    int failed = 0, passed = 0;
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
        if (only && strcmp(only, examples[i].file)) continue;
        for (int how = gpu_ctx ? RUN_GPU : RUN_O0; how <= (gpu_ctx ? RUN_GPU : RUN_BC); how++)
            run_example(dir, &examples[i], how) ? passed++ : failed++;
    }
    printf("examples: %d passed, %d failed\n", passed, failed);
    trt_context_destroy(gpu_ctx);
    return failed ? 1 : 0;
}
