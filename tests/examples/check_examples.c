/* tile-examples: compiles every example of examples/, runs it on fresh inputs, and
 * checks the result against a reference computed here in C (in double precision,
 * rounded to the output type where the kernel rounds). Prints one row per example.
 *
 *   tile-examples [--device cpu|gpu] [--only NAME] EXAMPLES_DIR
 *
 * Each example runs twice in the interpreter: as lowered (-O0) and after the cleanup
 * passes (-O2), so the passes are checked numerically on real kernels too. Exit status
 * 0 when every example matches its reference. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/frontend.h"
#include "ir/interp.h"
#include "passes/passes.h"
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
typedef struct Case {
    InterpArg args[MAX_ARGS];
    Buf bufs[MAX_ARGS];       /* the buffer of each pointer argument (elem 0 if none) */
    uint32_t nargs;
    Buf expect[MAX_ARGS];     /* expected contents of output buffers (n == 0: not checked) */
    double atol[MAX_ARGS], rtol[MAX_ARGS];
    bool write_only[MAX_ARGS];  /* an output the kernel never reads: poisoned on the GPU */
    char shape[48];
} Case;

static void arg_buf(Case *c, Buf b)
{
    c->bufs[c->nargs] = b;
    c->args[c->nargs].is_buffer = true;
    c->args[c->nargs].u.buf = (InterpBuffer){b.elem, b.data, b.n};
    c->nargs++;
}
static void arg_int(Case *c, int64_t v) { c->args[c->nargs++].u.i = v; }
static void arg_float(Case *c, double v) { c->args[c->nargs++].u.f = v; }
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
};

/* ---- running and comparing ------------------------------------------------------------ */
/* Compiles `path` at the given -O level; returns the kernel or NULL (diagnostics
 * printed). */
static const IrFunc *compile(IrCtx *ctx, const Source *src, const char *kernel, int opt)
{
    DiagList *d = ir_ctx_diags(ctx);
    AstProgram *p = fe_parse(ir_ctx_arena(ctx), src, d);
    FeOptions fo = {NULL, 0, kernel};
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
            double ratio = err == 0 ? 0 : tol == 0 ? INFINITY : err / tol;
            if (!(ratio <= worst)) worst = ratio;   /* NaN propagates as a failure */
            if (!(err <= *max_abs)) *max_abs = err;
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
    TrtStatus st = trt_module_load_file(gpu_ctx, path, &m);
    if (!st) st = trt_module_get_kernel(m, ex->kernel, NULL, 0, &kern);
    for (uint32_t a = 0; a < c->nargs && !st; a++) {
        size_t bytes = c->args[a].is_buffer ? (size_t)(c->bufs[a].n * ir_elem_bytes(c->bufs[a].elem)) : 0;
        if (c->args[a].is_buffer && !(st = trt_mem_alloc(gpu_ctx, bytes, &dev[a])))
            st = trt_memcpy_htod(gpu_ctx, dev[a], c->bufs[a].data, bytes);
        targs[a] = gpu_arg(k, a, &c->args[a], dev[a]);
    }
    uint32_t g[3] = {(uint32_t)grid[0], (uint32_t)grid[1], (uint32_t)grid[2]};
    if (!st) st = trt_launch(kern, targs, c->nargs, g, NULL);
    if (!st) st = trt_synchronize(gpu_ctx);
    for (uint32_t a = 0; a < c->nargs && !st; a++)
        if (c->args[a].is_buffer)
            st = trt_memcpy_dtoh(gpu_ctx, c->bufs[a].data, dev[a],
                                 (size_t)(c->bufs[a].n * ir_elem_bytes(c->bufs[a].elem)));
    for (uint32_t a = 0; a < c->nargs; a++) trt_mem_free(gpu_ctx, dev[a]);
    trt_module_destroy(m);
    return st ? gpu_fail(st) : true;
}

/* Runs one example at one -O level; prints its row; returns whether it passed. */
static bool run_example(const char *dir, const Example *ex, int opt)
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
    const IrFunc *k = compile(ctx, src, ex->kernel, opt);
    double t1 = now_ms();
    int64_t grid[3] = {1, 1, 1};
    bool ok = k && k->grid && interp_eval_grid(k->grid, c.args, c.nargs, grid, ir_ctx_diags(ctx)) > 0;
    InterpOptions io = {0};
    if (gpu_ctx) ok = ok && run_gpu(path, ex, &c, k, grid);
    else ok = ok && interp_run(k, c.args, c.nargs, grid, &io, ir_ctx_diags(ctx));
    double t2 = now_ms(), max_abs = 0;
    double ratio = ok ? compare(&c, &max_abs) : INFINITY;
    ok = ok && ratio <= 1;
    if (k) diag_print(ir_ctx_diags(ctx), stderr);
    printf("%-20s %-3s %-16s %-13s %10.3g %8.2f %9.1f %9.1f  %s\n", ex->file,
           gpu_ctx ? "GPU" : opt ? "O2" : "O0",
           c.shape, grid_str(grid), max_abs, ratio, t1 - t0, t2 - t1, ok ? "ok" : "FAIL");
    ir_ctx_destroy(ctx);
    free_case(&c);
    source_free(src);
    return ok;
}

int main(int argc, char **argv)
{
    const char *dir = NULL, *only = NULL, *device = "cpu";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else if (!strcmp(argv[i], "--device") && i + 1 < argc) device = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) rng_seed = strtoull(argv[++i], NULL, 0);
        else dir = argv[i];
    }
    if (!dir || (strcmp(device, "cpu") && strcmp(device, "gpu"))) {
        fputs("usage: tile-examples [--device cpu|gpu] [--seed N] [--only FILE] EXAMPLES_DIR\n", stderr);
        return 2;
    }
    if (!strcmp(device, "gpu")) {
        TrtStatus st = trt_context_create(0, TRT_MODE_FROM_ENV, NULL, &gpu_ctx);
        if (st == TRT_ERROR_NO_DRIVER || st == TRT_ERROR_NO_DEVICE) {
            gpu_fail(st);
            return 77;  /* no GPU here: skipped, as ctest counts it */
        }
        if (st) return gpu_fail(st), 1;
        rng_seed ^= (uint64_t)time(NULL);  /* fresh inputs on every GPU run */
    }
    printf("inputs from seed %llu; outputs checked against references computed in C\n",
           (unsigned long long)rng_seed);
    printf("%-20s %-3s %-16s %-13s %10s %8s %9s %9s  %s\n", "example", "run", "shape", "grid",
           "max|err|", "err/tol", "compile", "run(ms)", "result");
    int failed = 0, passed = 0;
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) {
        if (only && strcmp(only, examples[i].file)) continue;
        for (int opt = gpu_ctx ? 2 : 0; opt <= 2; opt += 2)
            run_example(dir, &examples[i], opt) ? passed++ : failed++;
    }
    printf("examples: %d passed, %d failed\n", passed, failed);
    trt_context_destroy(gpu_ctx);
    return failed ? 1 : 0;
}
