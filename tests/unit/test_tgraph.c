/* libtileRT's graph API (runtime/rt_tgraph.c): a module's graph runs as the Tile kernels
 * of its fusion plan. On a CPU context the kernels run in the interpreter, so results
 * are checked against values computed here; on a GPU context (the mock driver, and a
 * stand-in for the code generator that writes an empty entry of the kernel's
 * signature) the launches are checked: their order, their arguments, the planned
 * buffers, and that a new value of a size compiles nothing new. */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/mock/mockcuda.h"
#include "rt_internal.h"
#include "tests/unit/rt_test.h"

static MockCountsFn mock_counts;
static MockLaunchLogFn mock_log;
static MockResetFn mock_reset;

static const char graphs_src[] =
    "graph ffn(x: f32[T, 4], w: f32[4, 2], b: f32[2]) -> f32[T, 2] {\n"
    "    return maximum(x @ w + b, 0.0);\n"
    "}\n"
    "graph chain(x: f32[T, 2], w: f32[2, 2]) -> f32[T, 2] { return x @ w @ w @ w; }\n"
    "graph rows(x: f32[T, 3], s: f32) -> (f32[T, 3], f32[T]) {\n"
    "    let y = softmax(x * s, 1);\n"
    "    return (y, sum(x, 1));\n"
    "}\n"
    "graph same(x: f32[4]) -> f32[4] { return x; }\n"
    "graph opt(p: f32[N], g: f32[N], m: f32[N], v: f32[N], q: f32[3], gq: f32[3], mq: f32[3], vq: f32[3],\n"
    "          t: i32, lr: f32) -> (f32[N], f32[3], f32[N], f32[3], f32[N], f32[3]) {\n"
    "    let (a, b, c, d, e, h) = adamw([p, q], [g, gq], [m, mq], [v, vq], t, lr = lr, weight_decay = 0.1);\n"
    "    return (a, b, c, d, e, h);\n"
    "}\n"
    "graph mlp(x: f32[T, 4], w1: f32[4, 3], w2: f32[3, 2]) -> (f32, f32[4, 3], f32[3, 2]) {\n"
    "    let p = tanh(x @ w1) @ w2;\n"
    "    let loss = sum(sum(p * p, 1), 0);\n"
    "    let (d1, d2) = grad(loss, [w1, w2]);\n"
    "    return (loss, d1, d2);\n"
    "}\n";

static const char lmhead_src[] =
    "@linear_cross_entropy(chunk = 8)\n"
    "graph lmhead(x: f32[T, 4], w: f32[4, V], lab: i64[T]) -> (f32, f32[T, 4], f32[4, V]) {\n"
    "    let l = cross_entropy(x @ w, lab);\n"
    "    let (dx, dw) = grad(l, [x, w]);\n"
    "    return (l, dx, dw);\n"
    "}\n";

static const char lmhead_bf16_src[] =
    "@linear_cross_entropy(chunk = 8)\n"
    "graph lmhead(x: bf16[T, 8], w: bf16[8, V], lab: i64[T]) -> (f32, bf16[T, 8], bf16[8, V]) {\n"
    "    let l = cross_entropy(x @ w, lab);\n"
    "    let (dx, dw) = grad(l, [x, w]);\n"
    "    return (l, dx, dw);\n"
    "}\n";

static struct {
    TrtContext *ctx;
    TrtModule *mod;
    TrtTensorGraph *g;
    char dir[256];
} cur;

static int setup(void **state)
{
    (void)state;
    memset(&cur, 0, sizeof cur);
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-tgraph-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return -1;
    mock_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    trt_tgraph_destroy(cur.g);
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cur.dir);
    return system(cmd);
}

static TrtTensorGraph *get_graph_of(int device, const char *src, const char *name)
{
    assert_ok(trt_context_create(device, TRT_MODE_DEFAULT, device == TRT_DEVICE_CPU ? NULL : cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "graphs.tile", src, &cur.mod));
    assert_ok(trt_module_get_graph(cur.mod, name, &cur.g));
    return cur.g;
}

static TrtTensorGraph *get_graph(int device, const char *name) { return get_graph_of(device, graphs_src, name); }

/* PTX of an empty entry with the kernel's parameters (pointers and i64s, 8 bytes each). */
static char *fake_compile(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st)
{
    (void)mask, (void)checked, (void)st;
    meta->threads = 128;
    meta->shared_bytes = 0;
    char *ptx = malloc(2048);
    int n = snprintf(ptx, 2048, ".version 8.3\n.target sm_90a\n.address_size 64\n.visible .entry %s(", k->name);
    for (uint32_t i = 0; i < k->nparams; i++) n += snprintf(ptx + n, 2048 - (size_t)n, "%s.param .u64 p%u", i ? ", " : "", i);
    snprintf(ptx + n, 2048 - (size_t)n, ")\n{\n\tret;\n}\n");
    return ptx;
}

static TrtDevicePtr host(const void *p) { return (TrtDevicePtr)(uintptr_t)p; }

/* maximum(x @ w + b, 0) on the CPU, for x[i][k] = i - k, w[k][j] = k + j - 2, b = [1, -1]. */
static void ffn_expected(int64_t T, const float *x, const float *w, const float *b, float *out)
{
    for (int64_t i = 0; i < T; i++)
        for (int j = 0; j < 2; j++) {
            float acc = 0;
            for (int k = 0; k < 4; k++) acc += x[i * 4 + k] * w[k * 2 + j];
            acc += b[j];
            out[i * 2 + j] = acc > 0 ? acc : 0;
        }
}

static void run_ffn(TrtTensorGraph *g, int64_t T)
{
    float x[64 * 4], w[8], b[2] = {1, -1}, out[64 * 2], want[64 * 2];
    for (int64_t i = 0; i < T; i++)
        for (int k = 0; k < 4; k++) x[i * 4 + k] = (float)(i - k);
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 2; j++) w[k * 2 + j] = (float)(k + j - 2);
    memset(out, 0xff, sizeof out);
    assert_ok(trt_tgraph_bind_size(g, "T", T));
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(host(x))));
    assert_ok(trt_tgraph_bind(g, "w", trt_arg_ptr(host(w))));
    assert_ok(trt_tgraph_bind(g, "b", trt_arg_ptr(host(b))));
    assert_ok(trt_tgraph_bind_output(g, 0, host(out)));
    uint64_t bytes = 0;
    assert_ok(trt_tgraph_output_bytes(g, 0, &bytes));
    assert_int_equal(bytes, (uint64_t)T * 2 * 4);
    assert_ok(trt_tgraph_run(g, NULL));
    ffn_expected(T, x, w, b, want);
    for (int64_t e = 0; e < T * 2; e++) assert_float_equal(out[e], want[e], 1e-5);
}

/* The FFN is one GEMM kernel with its epilogue; the graph runs again with other sizes
 * of T (rebinding only T). */
static void test_cpu_ffn(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "ffn");
    assert_int_equal(trt_tgraph_num_kernels(g), 1);
    assert_string_equal(trt_kernel_name(trt_tgraph_kernel(g, 0)), "ffn_k0");
    assert_null(trt_tgraph_kernel(g, 1));
    assert_int_equal(trt_tgraph_num_outputs(g), 1);
    run_ffn(g, 3);
    run_ffn(g, 5);
    run_ffn(g, 64);
}

/* softmax(x * s) and sum(x) per row, with a scalar parameter passed by value. */
static void test_cpu_rows_and_scalar(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "rows");
    float x[6] = {0, 1, 2, 3, 3, 3}, y[6], s[2];
    assert_ok(trt_tgraph_bind_size(g, "T", 2));
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(host(x))));
    assert_ok(trt_tgraph_bind(g, "s", trt_arg_f32(0.5f)));
    assert_ok(trt_tgraph_bind_output(g, 0, host(y)));
    assert_ok(trt_tgraph_bind_output(g, 1, host(s)));
    assert_ok(trt_tgraph_run(g, NULL));
    double z = 1 + exp(0.5) + exp(1.0);
    assert_float_equal(y[0], 1 / z, 1e-6);
    assert_float_equal(y[2], exp(1.0) / z, 1e-6);
    for (int j = 3; j < 6; j++) assert_float_equal(y[j], 1.0 / 3, 1e-6);
    assert_float_equal(s[0], 3, 0);
    assert_float_equal(s[1], 9, 0);
}

/* torch.optim.AdamW's step on one element, in double. */
static void adamw_ref(double *p, double g, double *m, double *v, int t, double lr)
{
    *p *= 1 - lr * 0.1;
    *m += 0.1 * (g - *m);
    *v = *v * 0.999 + 0.001 * g * g;
    *p -= lr / (1 - pow(0.9, t)) * *m / (sqrt(*v) / sqrt(1 - pow(0.999, t)) + 1e-8);
}

/* AdamW over two parameters: one multi-tensor kernel (and the step's cast); three steps
 * from the host with every state result bound to its input's memory (the kernel reads
 * and writes each element in one program, so the update is in place). */
static void test_cpu_adamw_in_place(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "opt");
    assert_int_equal(trt_tgraph_num_kernels(g), 2);
    float p[5], gr[5], m[5] = {0}, v[5] = {0}, q[3], gq[3], mq[3] = {0}, vq[3] = {0};
    double rp[8], rm[8] = {0}, rv[8] = {0};
    for (int i = 0; i < 5; i++) p[i] = (float)(i - 2) * 0.5f, gr[i] = (float)(3 - i) * 0.25f, rp[i] = p[i];
    for (int i = 0; i < 3; i++) q[i] = (float)i, gq[i] = (float)(i + 1) * -0.5f, rp[5 + i] = q[i];
    float *bound[6] = {p, q, m, mq, v, vq};   /* the results' order: new p, q, m, mq, v, vq */
    assert_ok(trt_tgraph_bind_size(g, "N", 5));
    assert_ok(trt_tgraph_bind(g, "g", trt_arg_ptr(host(gr))));
    assert_ok(trt_tgraph_bind(g, "gq", trt_arg_ptr(host(gq))));
    assert_ok(trt_tgraph_bind(g, "lr", trt_arg_f32(0.05f)));
    for (int t = 1; t <= 3; t++) {
        const char *in[6] = {"p", "q", "m", "mq", "v", "vq"};
        for (int k = 0; k < 6; k++) {
            assert_ok(trt_tgraph_bind(g, in[k], trt_arg_ptr(host(bound[k]))));
            assert_ok(trt_tgraph_bind_output(g, (uint32_t)k, host(bound[k])));
        }
        assert_ok(trt_tgraph_bind(g, "t", trt_arg_i32(t)));
        assert_ok(trt_tgraph_run(g, NULL));
        for (int i = 0; i < 8; i++) adamw_ref(&rp[i], i < 5 ? gr[i] : gq[i - 5], &rm[i], &rv[i], t, 0.05);
    }
    for (int i = 0; i < 5; i++) assert_float_equal(p[i], rp[i], 1e-5), assert_float_equal(m[i], rm[i], 1e-6);
    for (int i = 0; i < 3; i++) assert_float_equal(q[i], rp[5 + i], 1e-5), assert_float_equal(vq[i], rv[5 + i], 1e-6);
}

/* x @ w @ w @ w: four kernels, two buffers of the memory plan; a smaller T keeps them,
 * a larger one grows them. */
static void test_cpu_buffers_reused(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "chain");
    assert_int_equal(trt_tgraph_num_kernels(g), 3);
    assert_int_equal(trt_tgraph_num_buffers(g), 2);
    assert_int_equal(trt_tgraph_buffer_bytes(g, 0), 0);
    float x[16 * 2], w[4] = {0, 1, 2, 3}, out[16 * 2];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 5);
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(host(x))));
    assert_ok(trt_tgraph_bind(g, "w", trt_arg_ptr(host(w))));
    assert_ok(trt_tgraph_bind_output(g, 0, host(out)));
    int64_t sizes[3] = {8, 2, 16};
    uint64_t want[3] = {64, 64, 128};
    for (int r = 0; r < 3; r++) {
        assert_ok(trt_tgraph_bind_size(g, "T", sizes[r]));
        assert_ok(trt_tgraph_run(g, NULL));
        assert_int_equal(trt_tgraph_buffer_bytes(g, 0), want[r]);
        assert_int_equal(trt_tgraph_buffer_bytes(g, 1), want[r]);
        for (int64_t i = 0; i < sizes[r]; i++) {   /* w^3 = [[6, 11], [22, 39]] */
            float a = x[i * 2], b = x[i * 2 + 1];
            assert_float_equal(out[i * 2], 6 * a + 22 * b, 0);
            assert_float_equal(out[i * 2 + 1], 11 * a + 39 * b, 0);
        }
    }
}

static void test_errors(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "ffn");
    assert_int_equal(trt_tgraph_run(g, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "graph 'ffn': size 'T' is not bound"));
    assert_int_equal(trt_tgraph_bind_size(g, "T", 0), TRT_ERROR_INVALID_ARGUMENT);
    assert_int_equal(trt_tgraph_bind_size(g, "S", 4), TRT_ERROR_NOT_FOUND);
    assert_int_equal(trt_tgraph_bind(g, "nope", trt_arg_ptr(0)), TRT_ERROR_NOT_FOUND);
    assert_int_equal(trt_tgraph_bind(g, "x", trt_arg_f32(1)), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "parameter 'x' of graph 'ffn' takes a pointer"));
    assert_int_equal(trt_tgraph_bind_output(g, 1, 0), TRT_ERROR_INVALID_ARGUMENT);
    assert_ok(trt_tgraph_bind_size(g, "T", 2));
    assert_int_equal(trt_tgraph_run(g, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "parameter 'x' is not bound"));
    TrtTensorGraph *h = NULL;
    assert_int_equal(trt_module_get_graph(cur.mod, "none", &h), TRT_ERROR_NOT_FOUND);
    assert_int_equal(trt_module_get_graph(cur.mod, "same", &h), TRT_ERROR_COMPILE);
    assert_non_null(strstr(trt_last_error(), "result 0 is a parameter or a constant"));
    assert_null(h);
}

/* ---- the forward/backward split (trt_tgraph_run_forward, _backward) ---------------------- */

typedef struct Step {
    float x[5 * 4], loss, d1[12], d2[6];
    void *saved[16];
} Step;

static void mlp_inputs(TrtTensorGraph *g, Step *st, float shift, float *w1, float *w2)
{
    for (int i = 0; i < 20; i++) st->x[i] = (float)sin(0.7 * i + shift);
    for (int i = 0; i < 12; i++) w1[i] = (float)cos(0.3 * i) * 0.5f;
    for (int i = 0; i < 6; i++) w2[i] = (float)sin(0.9 * i + 1) * 0.5f;
    memset(&st->loss, 0xff, sizeof st->loss + sizeof st->d1 + sizeof st->d2);
    assert_ok(trt_tgraph_bind_size(g, "T", 5));
    assert_ok(trt_tgraph_bind(g, "w1", trt_arg_ptr(host(w1))));
    assert_ok(trt_tgraph_bind(g, "w2", trt_arg_ptr(host(w2))));
}

/* Binds step st's input, results and saved memory (allocated on first use). */
static void bind_step(TrtTensorGraph *g, Step *st)
{
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(host(st->x))));
    assert_ok(trt_tgraph_bind_output(g, 0, host(&st->loss)));
    assert_ok(trt_tgraph_bind_output(g, 1, host(st->d1)));
    assert_ok(trt_tgraph_bind_output(g, 2, host(st->d2)));
    for (uint32_t i = 0; i < trt_tgraph_num_saved(g); i++) {
        uint64_t bytes = 0;
        assert_ok(trt_tgraph_saved_bytes(g, i, &bytes));
        if (!st->saved[i]) assert_non_null(st->saved[i] = calloc(1, bytes));
        assert_ok(trt_tgraph_bind_saved(g, i, host(st->saved[i])));
    }
}

static void free_step(Step *st)
{
    for (int i = 0; i < 16; i++) free(st->saved[i]);
}

/* The joint run's results of step st (its saved memory untouched). */
static void joint(TrtTensorGraph *g, Step *st, Step *out)
{
    memcpy(out->x, st->x, sizeof st->x);
    memset(out->saved, 0, sizeof out->saved);
    bind_step(g, out);
    assert_ok(trt_tgraph_run(g, NULL));
    free_step(out);
}

/* The forward part writes the loss and the saved values, not the gradients; the backward,
 * after the graph's own buffers are overwritten, gives the joint run's gradients bit for
 * bit from the saved memory alone; two forwards before their two backwards (gradient
 * accumulation) each get their own step's gradients; a seed of 2 doubles them exactly. */
static void test_cpu_split(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "mlp");
    float w1[12], w2[6];
    Step a = {0}, b = {0}, ja, jb;
    mlp_inputs(g, &a, 0, w1, w2);
    for (int i = 0; i < 20; i++) b.x[i] = (float)cos(1.3 * i);
    assert_int_equal(trt_tgraph_num_params(g), 3);   /* the seed is no parameter of the caller's */
    assert_true(trt_tgraph_num_saved(g) > 0 && trt_tgraph_num_saved(g) <= 16);
    TrtGraphValueInfo info;
    assert_ok(trt_tgraph_saved(g, 0, &info));
    assert_non_null(info.name);
    assert_int_equal(trt_tgraph_output_part(g, 0), 1);
    assert_int_equal(trt_tgraph_output_part(g, 1), 2);
    assert_int_equal(trt_tgraph_output_part(g, 2), 2);
    joint(g, &a, &ja);
    joint(g, &b, &jb);
    bind_step(g, &a);
    assert_ok(trt_tgraph_run_forward(g, NULL));
    assert_memory_equal(&a.loss, &ja.loss, sizeof a.loss);
    uint32_t nan = 0xffffffffu;
    assert_memory_equal(&a.d1[0], &nan, 4);   /* the forward computes no gradient */
    bind_step(g, &b);
    assert_ok(trt_tgraph_run_forward(g, NULL));
    assert_ok(rt_tgraph_poison_buffers(g));
    bind_step(g, &a);
    assert_ok(trt_tgraph_run_backward(g, NULL));
    bind_step(g, &b);
    assert_ok(trt_tgraph_run_backward(g, NULL));
    assert_memory_equal(a.d1, ja.d1, sizeof a.d1);
    assert_memory_equal(a.d2, ja.d2, sizeof a.d2);
    assert_memory_equal(b.d1, jb.d1, sizeof b.d1);
    assert_memory_equal(b.d2, jb.d2, sizeof b.d2);
    assert_memory_not_equal(a.d2, b.d2, sizeof a.d2);
    assert_ok(trt_tgraph_bind_seed(g, trt_arg_f32(2.0f)));
    assert_ok(trt_tgraph_run_backward(g, NULL));
    for (int i = 0; i < 6; i++) assert_true(b.d2[i] == 2 * jb.d2[i]);
    assert_ok(trt_tgraph_run(g, NULL));   /* the joint run's seed stays 1 */
    assert_memory_equal(b.d2, jb.d2, sizeof b.d2);
    free_step(&a);
    free_step(&b);
}

/* The value of element i of a head's result: f32, or bf16 (its bits the f32's top half). */
static float head_elem(const void *p, uint64_t esize, uint64_t i)
{
    uint32_t bits = 0;
    if (esize == 2) bits = (uint32_t)((const uint16_t *)p)[i] << 16;
    else memcpy(&bits, (const float *)p + i, 4);
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* The LM head's joint run (its op reading the seed through dy, dx and dw its results)
 * against its split (a build of its own in Liger's order: dx and dw for a seed of 1
 * saved by the forward with the loss, scaled by the seed in the backward) on the CPU,
 * T = 20 rows in chunks of 8, one ignored, V = 40: the same loss, dx and dw bit for bit
 * (the backward after the buffers are overwritten), and a seed of 2 doubles dx and dw
 * exactly. */
static void joint_against_split(const char *src, uint64_t esize, uint64_t D)
{
    TrtTensorGraph *g = get_graph_of(TRT_DEVICE_CPU, src, "lmhead");
    enum { T_ = 20, V_ = 40 };
    uint8_t x[T_ * 8 * 4], w[8 * V_ * 4], res[2][2][8 * V_ * 4];   /* [joint, split][dx, dw] */
    int64_t lab[T_];
    float loss[2];
    for (uint64_t i = 0; i < T_ * D; i++) {
        float f = (float)sin(0.37 * (double)i + 0.1);
        uint32_t b;
        memcpy(&b, &f, 4);
        if (esize == 2) ((uint16_t *)x)[i] = (uint16_t)(b >> 16);
        else memcpy(x + 4 * i, &f, 4);
    }
    for (uint64_t i = 0; i < D * V_; i++) {
        float f = (float)cos(0.53 * (double)i) * 0.5f;
        uint32_t b;
        memcpy(&b, &f, 4);
        if (esize == 2) ((uint16_t *)w)[i] = (uint16_t)(b >> 16);
        else memcpy(w + 4 * i, &f, 4);
    }
    for (int i = 0; i < T_; i++) lab[i] = i == 5 ? -100 : (i * 7) % V_;
    assert_ok(trt_tgraph_bind_size(g, "T", T_));
    assert_ok(trt_tgraph_bind_size(g, "V", V_));
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(host(x))));
    assert_ok(trt_tgraph_bind(g, "w", trt_arg_ptr(host(w))));
    assert_ok(trt_tgraph_bind(g, "lab", trt_arg_ptr(host(lab))));
    void *saved[2] = {NULL, NULL};
    for (int way = 0; way < 2; way++) {
        memset(res[way], 0xff, sizeof res[way]);
        assert_ok(trt_tgraph_bind_output(g, 0, host(&loss[way])));
        assert_ok(trt_tgraph_bind_output(g, 1, host(res[way][0])));
        assert_ok(trt_tgraph_bind_output(g, 2, host(res[way][1])));
        if (!way) {
            assert_ok(trt_tgraph_run(g, NULL));
            continue;
        }
        assert_int_equal(trt_tgraph_num_saved(g), 2);   /* dx and dw for a seed of 1 */
        for (uint32_t i = 0; i < 2; i++) {
            uint64_t bytes = 0;
            assert_ok(trt_tgraph_saved_bytes(g, i, &bytes));
            assert_non_null(saved[i] = calloc(1, bytes));
            assert_ok(trt_tgraph_bind_saved(g, i, host(saved[i])));
        }
        assert_int_equal(trt_tgraph_output_part(g, 0), 1);   /* the loss: the forward's */
        assert_ok(trt_tgraph_run_forward(g, NULL));
        assert_ok(rt_tgraph_poison_buffers(g));
        assert_ok(trt_tgraph_run_backward(g, NULL));
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    assert_memory_equal(res[0][0], res[1][0], T_ * D * esize);
    assert_memory_equal(res[0][1], res[1][1], D * V_ * esize);
    assert_ok(trt_tgraph_bind_seed(g, trt_arg_f32(2.0f)));
    assert_ok(trt_tgraph_run_backward(g, NULL));
    bool nonzero = false;
    for (uint64_t i = 0; i < D * V_; i++) {
        assert_true(head_elem(res[1][1], esize, i) == 2 * head_elem(res[0][1], esize, i));
        nonzero |= head_elem(res[0][1], esize, i) != 0;
    }
    for (uint64_t i = 0; i < T_ * D; i++) assert_true(head_elem(res[1][0], esize, i) == 2 * head_elem(res[0][0], esize, i));
    assert_true(nonzero);
    for (int i = 0; i < 2; i++) free(saved[i]);
}

static void test_cpu_head_joint_split(void **state)
{
    (void)state;
    joint_against_split(lmhead_src, 4, 4);
}

static void test_cpu_head_joint_split_bf16(void **state)
{
    (void)state;
    joint_against_split(lmhead_bf16_src, 2, 8);
}

/* The backward reads the saved memory, not a buffer: NaN there gives NaN gradients. */
static void test_cpu_split_reads_saved(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "mlp");
    float w1[12], w2[6];
    Step a = {0};
    mlp_inputs(g, &a, 0, w1, w2);
    bind_step(g, &a);
    assert_ok(trt_tgraph_run_forward(g, NULL));
    for (uint32_t i = 0; i < trt_tgraph_num_saved(g); i++) {
        uint64_t bytes = 0;
        assert_ok(trt_tgraph_saved_bytes(g, i, &bytes));
        memset(a.saved[i], 0xff, bytes);
    }
    assert_ok(trt_tgraph_run_backward(g, NULL));
    bool any_nan = false;
    for (int i = 0; i < 6; i++) any_nan |= isnan(a.d2[i]);
    assert_true(any_nan);
    free_step(&a);
}

static void test_split_errors(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "mlp");
    float w1[12], w2[6];
    Step a = {0};
    mlp_inputs(g, &a, 0, w1, w2);
    assert_int_equal(trt_tgraph_run_backward(g, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "trt_tgraph_run_backward: graph 'mlp': saved value 0 ("));
    assert_non_null(strstr(trt_last_error(), "is not bound (trt_tgraph_bind_saved)"));
    assert_int_equal(trt_tgraph_bind_saved(g, trt_tgraph_num_saved(g), 0), TRT_ERROR_INVALID_ARGUMENT);
    assert_int_equal(trt_tgraph_bind_seed(g, trt_arg_f64(1.0)), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "the seed of graph 'mlp' is f32"));
    bind_step(g, &a);
    assert_int_equal(trt_tgraph_bind(g, "dloss", trt_arg_f32(1)), TRT_ERROR_NOT_FOUND);
    free_step(&a);
    TrtTensorGraph *f = NULL;
    assert_ok(trt_module_get_graph(cur.mod, "ffn", &f));
    assert_int_equal(trt_tgraph_num_saved(f), 0);
    assert_int_equal(trt_tgraph_run_forward(f, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "graph 'ffn' has no grad"));
    trt_tgraph_destroy(f);
}

/* On a GPU (the mock): the chain's three kernels launch in order on the stream, with
 * the bound pointers, the planned buffers and T; a new T of the same class loads no new
 * code. */
static void test_gpu_launches(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(0, "chain");
    rt_tgraph_module(g)->compile = fake_compile;
    TrtDevicePtr x = 0, w = 0, out = 0;
    assert_ok(trt_mem_alloc(cur.ctx, 32 * 8, &x));
    assert_ok(trt_mem_alloc(cur.ctx, 16, &w));
    assert_ok(trt_mem_alloc(cur.ctx, 32 * 8, &out));
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(x)));
    assert_ok(trt_tgraph_bind(g, "w", trt_arg_ptr(w)));
    assert_ok(trt_tgraph_bind_output(g, 0, out));
    assert_ok(trt_tgraph_bind_size(g, "T", 20));
    TrtStream stream = (TrtStream)0x5000;
    MockCounts cold;
    mock_counts(&cold);
    assert_ok(trt_tgraph_run(g, stream));
    /* the first run built its three kernels' variants before launching, in threads
     * (one per kernel up to the cores), each once */
    uint32_t built = 0, threads = 0;
    rt_tgraph_prebuilt(g, &built, &threads);
    assert_int_equal(built, 3);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(threads, cores >= 3 ? 3 : cores < 1 ? 1 : (uint32_t)cores);
    MockCounts warm;
    mock_counts(&warm);
    assert_int_equal(warm.ptx_loads + warm.cubin_loads, cold.ptx_loads + cold.cubin_loads + 3);
    MockLaunch log[8];
    assert_int_equal(mock_log(log, 8), 3);
    for (int k = 0; k < 3; k++) {
        char name[32];
        snprintf(name, sizeof name, "chain_k%d", k);
        assert_string_equal(log[k].func, name);
        assert_true(log[k].stream == stream);
        assert_int_equal(log[k].params[3], 20);             /* s_T, after out, a, b */
        assert_int_equal(log[k].grid[0], 1);                /* cdiv(20, 128) * cdiv(2, 16) */
    }
    assert_int_equal(log[0].params[1], x);                  /* k0 reads x and w */
    assert_int_equal(log[0].params[2], w);
    assert_int_equal(log[1].params[1], log[0].params[0]);   /* k1 reads what k0 wrote */
    assert_int_equal(log[2].params[0], out);                /* k2 writes the result */
    assert_true(log[0].params[0] != x && log[0].params[0] != out);
    MockCounts before, after;
    mock_counts(&before);
    assert_ok(trt_tgraph_bind_size(g, "T", 30));            /* same class as 20 */
    assert_ok(trt_tgraph_run(g, stream));
    mock_counts(&after);
    assert_int_equal(after.ptx_loads + after.cubin_loads, before.ptx_loads + before.cubin_loads);
    assert_int_equal(after.launches, before.launches + 3);
    rt_tgraph_prebuilt(g, &built, &threads);
    assert_int_equal(built, 0);                             /* nothing new to build */
    trt_mem_free(cur.ctx, x);
    trt_mem_free(cur.ctx, w);
    trt_mem_free(cur.ctx, out);
}

/* The LM head graphs' memory at T <= 32, V = 40 (x, w, lab, loss, dx, dw: elements of
 * esize bytes, D of them a row), allocated and bound. */
typedef struct HeadMem {
    TrtDevicePtr p[6];
} HeadMem;

static void bind_head(TrtTensorGraph *g, uint64_t esize, uint64_t D, HeadMem *m)
{
    const uint64_t bytes[6] = {32 * D * esize, D * 40 * esize, 32 * 8, 4, 32 * D * esize, D * 40 * esize};
    for (int i = 0; i < 6; i++) {
        m->p[i] = 0;
        assert_ok(trt_mem_alloc(cur.ctx, bytes[i], &m->p[i]));
    }
    assert_ok(trt_tgraph_bind(g, "x", trt_arg_ptr(m->p[0])));
    assert_ok(trt_tgraph_bind(g, "w", trt_arg_ptr(m->p[1])));
    assert_ok(trt_tgraph_bind(g, "lab", trt_arg_ptr(m->p[2])));
    for (uint32_t r = 0; r < 3; r++) assert_ok(trt_tgraph_bind_output(g, r, m->p[3 + r]));
}

static void free_head(HeadMem *m)
{
    for (int i = 0; i < 6; i++) trt_mem_free(cur.ctx, m->p[i]);
}

/* The LM head fused with its cross-entropy (@linear_cross_entropy(chunk = 8)): its plan
 * kernel runs its four steps once per chunk of rows, T = 20 in three chunks (an f32 head
 * has no dw sums: one chunk only up to the chunk's rows), each launch given the chunk's
 * first row, the row after its last, its rows and the one scratch buffer of [8, V] f32
 * logits (bf16 for a bf16 head). */
static void test_gpu_chunk_loop(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph_of(0, lmhead_src, "lmhead");
    rt_tgraph_module(g)->compile = fake_compile;
    HeadMem m;
    bind_head(g, 4, 4, &m);
    TrtDevicePtr x = m.p[0], w = m.p[1], dx = m.p[4], dw = m.p[5];
    assert_ok(trt_tgraph_bind_size(g, "T", 20));
    assert_ok(trt_tgraph_bind_size(g, "V", 40));
    /* before the head: the label count (the forward's), dy from the seed (the seed over
     * the count, then its broadcast: the backward's, the seed an input, passes/
     * graph_split.c); after it the mean. The joint run reads the seed through dy, so the
     * op's dx and dw are the results: no scaling kernel (passes/graph_lmce.c) */
    assert_int_equal(trt_tgraph_num_kernels(g), 5);
    assert_string_equal(trt_kernel_name(trt_tgraph_kernel(g, 3)), "lmhead_k4_logits");
    MockCounts cold, warm;
    mock_counts(&cold);
    assert_ok(trt_tgraph_run(g, (TrtStream)0x5000));
    /* the steps were built before the launches with the other kernels, in threads: each
     * step for the classes of its chunks' off and end (0 and 8, 8 and 16, 16 and 20), so
     * no launch built anything (the loads are the variants built) */
    uint32_t built = 0, threads = 0;
    rt_tgraph_prebuilt(g, &built, &threads);
    assert_int_equal(built, 4 + 4 * 3);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    assert_int_equal(threads, cores >= 16 ? 16 : cores < 1 ? 1 : (uint32_t)cores);
    mock_counts(&warm);
    assert_int_equal(warm.ptx_loads + warm.cubin_loads, cold.ptx_loads + cold.cubin_loads + built);
    MockLaunch log[32];
    const int pre = 3;
    assert_int_equal(mock_log(log, 32), pre + 3 * 4 + 1);   /* the count, dy, its broadcast, the chunks, the mean */
    static const char *const step[4] = {"logits", "loss", "dx", "dw"};
    static const uint32_t at_off[4] = {3, 4, 3, 3};         /* after the step's pointers and ps */
    static const int64_t cn[3] = {8, 8, 4};
    uint64_t scratch = log[pre].params[2];
    uint32_t nb = trt_tgraph_num_buffers(g);
    bool found = false;
    for (uint32_t b = 0; b < nb; b++) found |= trt_tgraph_buffer_bytes(g, b) == 8 * 40 * 4;
    assert_true(found);                                     /* the scratch: [8, V] f32 at V = 40 */
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < 4; i++) {
            const MockLaunch *l = &log[pre + c * 4 + i];
            char name[32];
            snprintf(name, sizeof name, "lmhead_k4_%s", step[i]);
            assert_string_equal(l->func, name);
            assert_int_equal(l->params[at_off[i]], 8 * c);   /* off: the chunk's first row */
            assert_int_equal(l->params[at_off[i] + 1], c < 2 ? 8 * c + 8 : 20);   /* end: the row after its last */
            assert_int_equal(l->params[at_off[i] - 1], scratch);
            assert_int_equal(l->params[at_off[i] + 2], cn[c]);   /* cn: the chunk's rows */
            assert_int_equal(l->params[at_off[i] + 3], 20);  /* s_T */
        }
    assert_int_equal(log[pre].params[0], x);                /* logits read x and w */
    assert_int_equal(log[pre].params[1], w);
    /* dx and dw: the dx and dw steps write the results' memory */
    assert_int_equal(log[pre + 2].params[0], dx);
    assert_int_equal(log[pre + 3].params[0], dw);
    /* the split, a build of its own in Liger's order, made by the first split call: the
     * forward's head computes dx and dw for a seed of 1 into the saved memory, the
     * backward's scaling kernels read them there and write the results */
    assert_false(rt_tgraph_split_built(g));
    assert_int_equal(trt_tgraph_num_saved(g), 2);
    assert_true(rt_tgraph_split_built(g));
    TrtDevicePtr saved[2];
    for (uint32_t i = 0; i < 2; i++) {
        uint64_t bytes = 0;
        assert_ok(trt_tgraph_saved_bytes(g, i, &bytes));
        assert_ok(trt_mem_alloc(cur.ctx, bytes, &saved[i]));
        assert_ok(trt_tgraph_bind_saved(g, i, saved[i]));
    }
    mock_reset();
    assert_ok(trt_tgraph_run_forward(g, (TrtStream)0x5000));
    assert_int_equal(mock_log(log, 32), 1 + 3 * 4 + 1);     /* dy (the count's kernel), the chunks, the mean */
    assert_string_equal(log[1].func, "lmhead_k1_logits");
    uint64_t sdx = log[3].params[0], sdw = log[4].params[0];
    assert_true((sdx == saved[0] && sdw == saved[1]) || (sdx == saved[1] && sdw == saved[0]));
    mock_reset();
    assert_ok(trt_tgraph_run_backward(g, (TrtStream)0x5000));
    assert_int_equal(mock_log(log, 32), 2);
    const MockLaunch *sx = &log[0], *sw = &log[1];
    assert_string_equal(sx->func, "lmhead_k3");
    assert_string_equal(sw->func, "lmhead_k4");
    assert_int_equal(sx->params[1], dx);
    assert_int_equal(sx->params[3], sdx);
    assert_int_equal(sw->params[0], dw);
    assert_int_equal(sw->params[2], sdw);
    for (uint32_t i = 0; i < 2; i++) trt_mem_free(cur.ctx, saved[i]);
    free_head(&m);
}

/* A bf16 head (@linear_cross_entropy(chunk = 8), D = 8): dx and dw are bf16, so the dw
 * step's f32 sums between chunks are a buffer of their own (pa, its last pointer). Rows up
 * to 8 + 2 * 8 = 24 run as one chunk of all of them (off 0, end and cn T, the scratch
 * [T, V] bf16), which holds less than chunks and their sums: T = 8 and T = 20 pass
 * another buffer's memory as pa (never read) and the plan holds no [8, V] f32; T = 30,
 * four chunks of 8, 8, 8 and 6 rows, passes the same [8, V] f32 buffer (V = 40) to each
 * chunk's dw step, the scratch [8, V]. Each run's step variants are built before the
 * launches, exactly those launched (one class a step for one chunk; the first, middle
 * and last chunk's for several), none at a launch; the dx and dw steps write the bf16
 * results (the joint run: no casts up and back, no scaling kernel). */
static void test_gpu_chunk_loop_bf16(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph_of(0, lmhead_bf16_src, "lmhead");
    rt_tgraph_module(g)->compile = fake_compile;
    HeadMem m;
    bind_head(g, 2, 8, &m);
    assert_ok(trt_tgraph_bind_size(g, "V", 40));
    assert_int_equal(trt_tgraph_num_kernels(g), 5);
    static const char *const step[4] = {"logits", "loss", "dx", "dw"};
    const int pre = 3, dw_pa = 8;                           /* pa: after dw, x, ps, off, end, cn, s_T, s_V */
    /* per run: T, its chunks, the variants prebuilt (the other kernels' too while s_T's
     * class is new: divisible by 8, then neither; the steps' one class, then three) */
    static const int64_t Ts[3] = {8, 20, 30}, ncs[3] = {1, 1, 4}, built_of[3] = {4 + 4, 4 + 4, 4 * 3};
    MockLaunch log[32];
    uint32_t nb = trt_tgraph_num_buffers(g);
    uint64_t logits_max = 0;
    for (int run = 0; run < 3; run++) {
        int64_t T = Ts[run], nc = ncs[run];
        assert_ok(trt_tgraph_bind_size(g, "T", T));
        mock_reset();
        MockCounts cold, warm;
        mock_counts(&cold);
        assert_ok(trt_tgraph_run(g, (TrtStream)0x5000));
        uint32_t built = 0, threads = 0;
        rt_tgraph_prebuilt(g, &built, &threads);
        mock_counts(&warm);
        assert_int_equal(built, built_of[run]);
        assert_int_equal(warm.ptx_loads + warm.cubin_loads, cold.ptx_loads + cold.cubin_loads + built);   /* none at launch */
        assert_int_equal(mock_log(log, 32), pre + nc * 4 + 1);   /* the count, dy, its broadcast, the chunks, the mean */
        uint64_t scratch = log[pre].params[2], pa = log[pre + 3].params[dw_pa];
        bool sums = false, logits = false;
        /* the scratch [T, V] or [8, V] bf16; a buffer grows, never shrinks (T 30 keeps T 20's) */
        if ((uint64_t)(nc > 1 ? 8 : T) * 40 * 2 > logits_max) logits_max = (uint64_t)(nc > 1 ? 8 : T) * 40 * 2;
        for (uint32_t b = 0; b < nb; b++) {
            sums |= trt_tgraph_buffer_bytes(g, b) == 8 * 40 * 4;    /* dw's f32 sums, [8, V] */
            logits |= trt_tgraph_buffer_bytes(g, b) == logits_max;   /* the bf16 logits */
        }
        assert_true(logits);
        assert_int_equal(sums, nc > 1);
        /* one chunk: no memory for the sums; the argument is another buffer's address, never
         * read or written (the tensor map of its block store is encoded from a real one) */
        assert_true(pa != 0);
        if (nc > 1) assert_true(pa != scratch);
        for (int c = 0; c < nc; c++)
            for (int i = 0; i < 4; i++) {
                const MockLaunch *l = &log[pre + c * 4 + i];
                char name[32];
                snprintf(name, sizeof name, "lmhead_k4_%s", step[i]);
                assert_string_equal(l->func, name);
                int64_t off = 8 * c, end = nc == 1 ? T : c < nc - 1 ? off + 8 : T;
                assert_int_equal(l->params[dw_pa - 5 + (i == 1)], off);
                assert_int_equal(l->params[dw_pa - 4 + (i == 1)], end);
                assert_int_equal(l->params[dw_pa - 3 + (i == 1)], end - off);   /* cn */
                if (i == 3) assert_int_equal(l->params[dw_pa], pa);   /* every chunk's dw step: the same sums */
            }
        /* dx's pointer first in the dx step, dw's in the dw step: the results' */
        assert_int_equal(log[pre + 2].params[0], m.p[4]);
        assert_int_equal(log[pre + 3].params[0], m.p[5]);
    }
    free_head(&m);
}

/* The introspection a binding uses: the module's graphs by name, and each graph's
 * parameters, results and size names with their types as declared. */
static void test_introspection(void **state)
{
    (void)state;
    TrtTensorGraph *g = get_graph(TRT_DEVICE_CPU, "rows");
    assert_int_equal(trt_module_num_graphs(cur.mod), 6);
    assert_string_equal(trt_module_graph_name(cur.mod, 0), "ffn");
    assert_string_equal(trt_module_graph_name(cur.mod, 3), "same");
    assert_string_equal(trt_module_graph_name(cur.mod, 4), "opt");
    assert_string_equal(trt_module_graph_name(cur.mod, 5), "mlp");
    assert_null(trt_module_graph_name(cur.mod, 6));
    assert_int_equal(trt_tgraph_num_params(g), 2);
    TrtGraphValueInfo v;
    assert_ok(trt_tgraph_param(g, 0, &v));
    assert_string_equal(v.name, "x");
    assert_int_equal(v.kind, TRT_ARG_PTR);
    assert_string_equal(v.elem, "f32");
    assert_int_equal(v.elem_bytes, 4);
    assert_int_equal(v.rank, 2);
    assert_string_equal(v.dims[0], "T");
    assert_string_equal(v.dims[1], "3");
    assert_string_equal(v.type, "f32[T, 3]");
    assert_ok(trt_tgraph_param(g, 1, &v));
    assert_int_equal(v.kind, TRT_ARG_F32);
    assert_int_equal(v.rank, 0);
    assert_int_equal(trt_tgraph_param(g, 2, &v), TRT_ERROR_INVALID_ARGUMENT);
    assert_ok(trt_tgraph_output(g, 1, &v));
    assert_string_equal(v.name, "ret1");
    assert_string_equal(v.type, "f32[T]");
    assert_int_equal(trt_tgraph_output(g, 2, &v), TRT_ERROR_INVALID_ARGUMENT);
    assert_int_equal(trt_tgraph_num_sizes(g), 1);
    assert_string_equal(trt_tgraph_size_name(g, 0), "T");
    assert_null(trt_tgraph_size_name(g, 1));
}

int main(void)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    unsetenv("TILE_LOG_RECOMPILES");
    unsetenv("TILE_DEBUG");
    unsetenv("TILE_MODE");
    void *h = dlopen(getenv("TILE_CUDA_LIBRARY"), RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cannot open the mock driver: %s\n", dlerror());
        return 1;
    }
    mock_counts = (MockCountsFn)dlsym(h, "mockcuda_counts");
    mock_log = (MockLaunchLogFn)dlsym(h, "mockcuda_launch_log");
    mock_reset = (MockResetFn)dlsym(h, "mockcuda_reset");
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_cpu_ffn), T(test_cpu_rows_and_scalar), T(test_cpu_buffers_reused), T(test_errors),
        T(test_gpu_launches), T(test_introspection), T(test_cpu_adamw_in_place), T(test_gpu_chunk_loop),
        T(test_gpu_chunk_loop_bf16),
        T(test_cpu_split), T(test_cpu_split_reads_saved), T(test_split_errors), T(test_cpu_head_joint_split),
        T(test_cpu_head_joint_split_bf16),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
