/* The graph IR (ir/graph.h): symbolic sizes as normalized polynomials, the one
 * promotion rule, building and verifying a graph, and the text round trip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "ir/graph.h"
#include "ir/graph_interp.h"
#include "passes/passes.h"

static Arena *A;

static int setup(void **state)
{
    (void)state;
    A = arena_create();
    return A ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    arena_destroy(A);
    return 0;
}

static IrSize S(const char *name) { return ir_size_name(A, name); }
static IrSize K(int64_t c) { return ir_size_const(c); }

static IrSize mul(IrSize x, IrSize y)
{
    IrSize r;
    assert_true(ir_size_mul(A, x, y, &r));
    return r;
}

static IrSize add(IrSize x, IrSize y, int64_t k)
{
    IrSize r;
    assert_true(ir_size_add(A, x, y, k, &r));
    return r;
}

/* A graph module parsed from text and verified (every case below starts so). */
typedef struct GraphFx {
    Source *src;
    IrGraphModule *m;
    DiagList dl;
} GraphFx;

static IrGraph *parse_graph(GraphFx *x, const char *text)
{
    x->src = source_from_string("t.gir", text);
    x->m = ir_gmodule_create(A);
    diag_init(&x->dl);
    assert_true(ir_gmodule_parse(x->m, x->src, &x->dl));
    assert_true(ir_gmodule_verify(x->m, &x->dl));
    return x->m->graphs.data[0];
}

static void graph_fx_free(GraphFx *x)
{
    diag_free(&x->dl);
    ir_gmodule_destroy(x->m);
    source_free(x->src);
}

/* Runs g op by op into o1 (nouts results, kept for the caller's own checks) and through
 * plan, and checks that both give the same bits everywhere. */
static void assert_plan_same(const IrGraph *g, const IrGPlan *plan, const IrGTensor *params, const int64_t *sizes,
                             IrGTensor *o1, uint32_t nouts)
{
    IrGTensor o2[8] = {{0}};
    char err[200];
    assert_true(nouts <= 8);
    assert_true(ir_graph_interp(g, params, sizes, o1, err, sizeof err));
    assert_true(ir_graph_interp_plan(g, plan, params, sizes, o2, err, sizeof err));
    for (uint32_t r = 0; r < nouts; r++) {
        assert_int_equal(o1[r].n, o2[r].n);
        for (int64_t i = 0; i < o1[r].n; i++) assert_true(o1[r].f ? o1[r].f[i] == o2[r].f[i] : o1[r].i[i] == o2[r].i[i]);
        ir_gtensor_free(&o2[r]);
    }
}

/* 16*T*4 and T*64 are one size; T*S and S*T too; T+S-T is S. */
static void test_size_normal_form(void **state)
{
    (void)state;
    IrSize a = mul(mul(K(16), S("T")), K(4)), b = mul(S("T"), K(64));
    assert_true(ir_size_eq(a, b));
    assert_string_equal(ir_size_str(A, a), "64*T");
    assert_true(ir_size_eq(mul(S("T"), S("S")), mul(S("S"), S("T"))));
    assert_string_equal(ir_size_str(A, mul(S("T"), S("S"))), "S*T");
    assert_true(ir_size_eq(add(add(S("T"), S("S"), 1), S("T"), -1), S("S")));
    assert_false(ir_size_eq(S("T"), S("S")));
    assert_string_equal(ir_size_str(A, add(mul(K(2), S("S")), add(S("T"), K(1024), 1), 1)), "2*S+T+1024");
    assert_string_equal(ir_size_str(A, add(mul(K(2), S("T")), K(1), -1)), "2*T-1");
    assert_string_equal(ir_size_str(A, add(S("T"), S("T"), -1)), "0");
    /* (T+1)*(T-1) = T*T-1 */
    IrSize sq = mul(add(S("T"), K(1), 1), add(S("T"), K(1), -1));
    assert_string_equal(ir_size_str(A, sq), "T*T-1");
}

/* The element count of [4, T, 16] equals that of [4, 16*T] (the reshape bug of issue 10). */
static void test_size_numel(void **state)
{
    (void)state;
    IrSize d1[] = {K(4), S("T"), K(16)}, d2[] = {K(4), mul(K(16), S("T"))}, n1, n2;
    assert_true(ir_size_numel(A, 3, d1, &n1));
    assert_true(ir_size_numel(A, 2, d2, &n2));
    assert_true(ir_size_eq(n1, n2));
    assert_string_equal(ir_size_str(A, n1), "64*T");
    IrSize d3[] = {S("T"), S("T")}, n3;
    assert_true(ir_size_numel(A, 2, d3, &n3));
    assert_string_equal(ir_size_str(A, n3), "T*T");
}

static void test_size_eval_overflow(void **state)
{
    (void)state;
    const char *names[] = {"S", "T"};
    int64_t vals[] = {3, 5}, v;
    assert_true(ir_size_eval(add(mul(S("S"), S("T")), K(2), 1), names, vals, 2, &v));
    assert_int_equal(v, 17);
    assert_false(ir_size_eval(S("U"), names, vals, 2, &v));
    IrSize r;
    assert_false(ir_size_mul(A, K(INT64_MAX), K(2), &r));
    assert_false(ir_size_add(A, K(INT64_MAX), K(1), 1, &r));
}

/* LANGUAGE.md section 2, the one rule for kernels and graphs. */
static void test_promote(void **state)
{
    (void)state;
    assert_int_equal(ir_promote(IR_F8E4M3, IR_F8E5M2), IR_F16);
    assert_int_equal(ir_promote(IR_F16, IR_BF16), IR_F32);
    assert_int_equal(ir_promote(IR_I32, IR_F16), IR_F16);
    assert_int_equal(ir_promote(IR_I32, IR_U32), IR_U32);
    assert_int_equal(ir_promote(IR_I1, IR_I8), IR_I8);
    assert_int_equal(ir_promote(IR_BF16, IR_F32), IR_F32);
    assert_int_equal(ir_promote(IR_I64, IR_U8), IR_I64);
}

/* A graph built by hand verifies; a wrong result type is reported at the op. */
static void test_build_verify(void **state)
{
    (void)state;
    IrGraphModule *m = ir_gmodule_create(A);
    IrGraph *g = ir_graph_create(m, "g", (Loc){0});
    IrSize d[] = {S("T"), K(4)};
    IrTensorType t = {IR_F32, 2, d};
    uint32_t x = ir_graph_param(g, &t, "x");
    ir_graph_collect_sizes(g, A);
    assert_int_equal(g->nsizes, 1);
    uint32_t in[] = {x, x};
    uint32_t op = ir_graph_op(g, IR_GOP_ADD, (Loc){0}, in, 2, &t, 1);
    uint32_t r = ir_graph_result(g, op, 0);
    ir_graph_op(g, IR_GOP_RETURN, (Loc){0}, &r, 1, NULL, 0);
    DiagList dl;
    diag_init(&dl);
    assert_true(ir_graph_verify(g, A, &dl));
    IrTensorType bad = {IR_F32, 1, d};
    g->values.data[r].type = bad;
    assert_false(ir_graph_verify(g, A, &dl));
    assert_int_equal(dl.nerrors, 1);
    assert_string_equal(dl.items[0].msg, "graph 'g': the result of add must be f32[T, 4], not f32[T]");
    diag_free(&dl);
    ir_gmodule_destroy(m);
}

/* print -> parse -> print is the identity. */
static void test_text_roundtrip(void **state)
{
    (void)state;
    const char *text = "graph @g(%x: f32[T, 4], %n: i64) {\n"
                       "  %s = size 2*T+1 : i64\n"
                       "  %0 = sum 1 %x : f32[T]\n"
                       "  %c = const -2.5 : f32\n"
                       "  %1 = mul %0, %c : f32[T]\n"
                       "  return %1, %s\n"
                       "}\n";
    GraphFx x;
    parse_graph(&x, text);
    IrGraphModule *m = x.m;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ir_gmodule_print(m, f);
    fclose(f);
    assert_string_equal(buf, text);
    free(buf);
    graph_fx_free(&x);
}

/* exp(x) + sum(exp(x)) through its fusion plan (two kernels) equals op by op; a plan
 * that reads a value no kernel wrote is refused. */
static void test_plan_interp(void **state)
{
    (void)state;
    const char *text = "graph @g(%x: f32[N]) {\n"
                       "  %a = exp %x : f32[N]\n"
                       "  %s = sum 0 %a : f32\n"
                       "  %b = add %a, %s : f32[N]\n"
                       "  return %b\n"
                       "}\n";
    GraphFx fx;
    IrGraph *g = parse_graph(&fx, text);
    IrGPlan *plan = pass_graph_fuse(g, A);
    assert_int_equal(plan->nkernels, 2);   /* exp, sum | add: the add is on the sum's operand shape */
    int64_t n = 3, sizes[] = {3};
    IrGTensor x, o1 = {0}, o2 = {0};
    assert_true(ir_gtensor_alloc(&x, IR_F32, 1, &n));
    for (int i = 0; i < 3; i++) x.f[i] = i;
    char err[200];
    assert_plan_same(g, plan, &x, sizes, &o1, 1);
    double s = exp(0.0) + exp(1.0) + exp(2.0);
    for (int i = 0; i < 3; i++) assert_true(fabs(o1.f[i] - (double)(float)(exp((double)i) + s)) < 1e-5);
    IrGKernel bad = plan->kernels[1];          /* the add alone, before the others ran */
    IrGPlan wrong = {.nkernels = 1, .kernels = &bad};
    assert_false(ir_graph_interp_plan(g, &wrong, &x, sizes, &o2, err, sizeof err));
    assert_non_null(strstr(err, "which no earlier kernel wrote"));
    ir_gtensor_free(&x);
    ir_gtensor_free(&o1);
    ir_gtensor_free(&o2);
    graph_fx_free(&fx);
}

/* A chain of transposes (kernels of their own: a trans read by a trans, or by a rows
 * kernel, is no view): the memory plan reuses a buffer once its value's last reader ran,
 * and the plan interpreter runs it; a plan that puts a later value into the buffer of a
 * value still to be read is refused. */
static void test_plan_buffers(void **state)
{
    (void)state;
    const char *text = "graph @g(%x: f32[N, N]) {\n"
                       "  %a = exp %x : f32[N, N]\n"
                       "  %r1 = trans [1, 0] %a : f32[N, N]\n"
                       "  %r2 = trans [1, 0] %r1 : f32[N, N]\n"
                       "  %r3 = trans [1, 0] %r2 : f32[N, N]\n"
                       "  %r4 = trans [1, 0] %r3 : f32[N, N]\n"
                       "  %s = softmax 1 %r4 : f32[N, N]\n"
                       "  %b = add %s, %a : f32[N, N]\n"
                       "  return %b\n"
                       "}\n";
    GraphFx fx;
    IrGraph *g = parse_graph(&fx, text);
    IrGPlan *plan = pass_graph_fuse(g, A);
    uint32_t a = ir_graph_result(g, 0, 0), r1 = ir_graph_result(g, 1, 0), r2 = ir_graph_result(g, 2, 0),
             r3 = ir_graph_result(g, 3, 0), r4 = ir_graph_result(g, 4, 0);
    assert_int_equal(plan->nkernels, 6);
    assert_int_equal(ir_gplan_num_launched(plan), 6);
    /* %a lives k0 to k5; %r1 k1..k2 then %r3 k3..k4 share a buffer; %r2, %r4 another. */
    assert_int_equal(plan->nbuffers, 3);
    assert_int_equal(plan->buffers[0].nvalues, 1);
    assert_int_equal(plan->buffers[0].values[0], a);
    assert_int_equal(plan->buffers[1].nvalues, 2);
    assert_int_equal(plan->buffers[1].values[0], r1);
    assert_int_equal(plan->buffers[1].values[1], r3);
    assert_int_equal(plan->buffers[2].values[0], r2);
    assert_int_equal(plan->buffers[2].values[1], r4);
    assert_true(ir_size_eq(plan->buffers[0].bytes, plan->buffers[1].bytes));
    int64_t n[2] = {3, 3}, sizes[] = {3};
    IrGTensor x, o1 = {0}, o2 = {0};
    assert_true(ir_gtensor_alloc(&x, IR_F32, 2, n));
    for (int i = 0; i < 9; i++) x.f[i] = (float)i / 4;
    char err[200];
    assert_plan_same(g, plan, &x, sizes, &o1, 1);
    uint32_t v0[] = {a, r2}, v1[] = {r1, r3, r4}, k[] = {0, 0, 0};   /* %r2 overwrites %a */
    IrGBuffer bufs[] = {{.bytes = plan->buffers[0].bytes, .nvalues = 2, .values = v0, .first = k, .last = k},
                        {.bytes = plan->buffers[0].bytes, .nvalues = 3, .values = v1, .first = k, .last = k}};
    IrGPlan wrong = *plan;
    wrong.nbuffers = 2;
    wrong.buffers = bufs;
    assert_false(ir_graph_interp_plan(g, &wrong, &x, sizes, &o2, err, sizeof err));
    assert_non_null(strstr(err, "which holds value"));
    ir_gtensor_free(&x);
    ir_gtensor_free(&o1);
    ir_gtensor_free(&o2);
    graph_fx_free(&fx);
}

/* Reshapes of values in memory are views: no kernel runs, no buffer is planned for
 * them, and their root (%a, or the parameter %x) stays in its buffer until the last
 * reader of a view of it has run; a returned reshape of a value nothing else reads is a
 * store view (its producer writes the caller's memory). A plan that lets a later value take the root's buffer while a
 * view of it is still to be read is refused. */
static void test_plan_views(void **state)
{
    (void)state;
    const char *text = "graph @g(%x: f32[N, 4]) {\n"
                       "  %a = exp %x : f32[N, 4]\n"
                       "  %r1 = reshape %a : f32[4, N]\n"
                       "  %r2 = reshape %r1 : f32[N, 2, 2]\n"
                       "  %t = trans [1, 0] %r1 : f32[N, 4]\n"
                       "  %u = reshape %t : f32[4, N]\n"
                       "  %b = reshape %r2 : f32[N, 4]\n"
                       "  %c = add %b, %t : f32[N, 4]\n"
                       "  %xr = reshape %x : f32[4, N]\n"
                       "  %d = add %u, %xr : f32[4, N]\n"
                       "  %e = reshape %d : f32[N, 4]\n"
                       "  return %c, %e\n"
                       "}\n";
    GraphFx fx;
    IrGraph *g = parse_graph(&fx, text);
    IrGPlan *plan = pass_graph_fuse(g, A);
    uint32_t a = ir_graph_result(g, 0, 0), r1 = ir_graph_result(g, 1, 0), r2 = ir_graph_result(g, 2, 0),
             t = ir_graph_result(g, 3, 0), b = ir_graph_result(g, 5, 0), xr = ir_graph_result(g, 7, 0),
             e = ir_graph_result(g, 9, 0), x = g->params.data[0];
    assert_int_equal(ir_gplan_root(plan, r1), a);
    assert_int_equal(ir_gplan_root(plan, r2), a);
    assert_int_equal(ir_gplan_root(plan, b), a);
    assert_int_equal(ir_gplan_root(plan, xr), x);
    assert_int_equal(ir_gplan_root(plan, t), t);
    /* returned: a store view, %d's kernel writes the caller's memory of %e */
    uint32_t d = ir_graph_result(g, 8, 0);
    assert_int_equal(ir_gplan_root(plan, e), e);
    assert_int_equal(ir_gplan_root(plan, d), e);
    uint32_t views = 0, store_views = 0;
    for (uint32_t k = 0; k < plan->nkernels; k++) {
        const IrGKernel *K = &plan->kernels[k];
        views += K->view;
        store_views += K->store_view;
        if (K->view && !K->store_view) assert_int_not_equal(K->writes[0], e);
        if (K->store_view) assert_int_equal(K->writes[0], e);
        for (uint32_t bf = 0; bf < plan->nbuffers; bf++)
            for (uint32_t i = 0; K->view && i < plan->buffers[bf].nvalues; i++)
                assert_int_not_equal(plan->buffers[bf].values[i], K->writes[0]);
    }
    assert_int_equal(views, plan->nkernels - ir_gplan_num_launched(plan));
    assert_true(views >= 5);   /* %r1, %r2, %b, %xr, %e; %u too unless it fused */
    assert_int_equal(store_views, 1);
    int64_t n[2] = {6, 4}, sizes[] = {6};
    IrGTensor xs, o1[2] = {{0}}, o2[2] = {{0}};
    assert_true(ir_gtensor_alloc(&xs, IR_F32, 2, n));
    for (int i = 0; i < 24; i++) xs.f[i] = (float)(i % 7) / 8;
    char err[200];
    assert_plan_same(g, plan, &xs, sizes, o1, 2);
    /* %a's buffer given to a later value of the same size while %b (a view of %a) is
     * still to be read by %c's kernel */
    uint32_t ka = 0, kc = 0;
    for (uint32_t k = 0; k < plan->nkernels; k++)
        for (uint32_t i = 0; i < plan->kernels[k].nwrites; i++) {
            if (plan->kernels[k].writes[i] == a) ka = k;
            if (plan->kernels[k].writes[i] == t) kc = k;
        }
    assert_true(kc > ka);
    uint32_t v0[] = {a, t}, first[] = {ka, kc}, last[] = {ka, kc};
    IrGBuffer bufs[] = {{.bytes = plan->buffers[0].bytes, .nvalues = 2, .values = v0, .first = first, .last = last}};
    IrGPlan wrong = *plan;
    wrong.nbuffers = 1;
    wrong.buffers = bufs;
    assert_false(ir_graph_interp_plan(g, &wrong, &xs, sizes, o2, err, sizeof err));
    assert_non_null(strstr(err, "which holds value"));
    ir_gtensor_free(&xs);
    for (int j = 0; j < 2; j++) ir_gtensor_free(&o1[j]);
    graph_fx_free(&fx);
}

/* Two GEMMs of one x are one horizontal kernel and compute what op by op does; a kernel
 * of two GEMMs with different left operands is refused by the plan interpreter. */
static void test_plan_horizontal(void **state)
{
    (void)state;
    const char *text = "graph @g(%x: f32[N, 2], %y: f32[N, 2], %w: f32[2, 3]) {\n"
                       "  %a = matmul %x, %w : f32[N, 3]\n"
                       "  %b = matmul %x, %w : f32[N, 3]\n"
                       "  %c = matmul %y, %w : f32[N, 3]\n"
                       "  return %a, %b, %c\n"
                       "}\n";
    GraphFx fx;
    IrGraph *g = parse_graph(&fx, text);
    IrGPlan *plan = pass_graph_fuse(g, A);
    assert_int_equal(plan->nkernels, 2);
    assert_string_equal(plan->kernels[0].kind, "horizontal_matmul");
    assert_int_equal(plan->kernels[0].nops, 2);
    assert_string_equal(plan->kernels[1].kind, "matmul");
    int64_t sizes[] = {2}, d[] = {2, 2}, dw[] = {2, 3};
    IrGTensor p[3], o1[3] = {{0}}, o2[3] = {{0}};
    assert_true(ir_gtensor_alloc(&p[0], IR_F32, 2, d) && ir_gtensor_alloc(&p[1], IR_F32, 2, d) &&
                ir_gtensor_alloc(&p[2], IR_F32, 2, dw));
    for (int i = 0; i < 4; i++) p[0].f[i] = i, p[1].f[i] = 3 - i;
    for (int i = 0; i < 6; i++) p[2].f[i] = i;
    char err[200];
    assert_plan_same(g, plan, p, sizes, o1, 3);
    uint32_t ops[] = {0, 1, 2}, writes[] = {g->ops.data[0].out[0], g->ops.data[1].out[0], g->ops.data[2].out[0]};
    IrGKernel one = {.kind = "horizontal_matmul", .nops = 3, .nreads = 0, .nwrites = 3, .ops = ops, .writes = writes};
    IrGPlan wrong = {.nkernels = 1, .kernels = &one};
    assert_false(ir_graph_interp_plan(g, &wrong, p, sizes, o2, err, sizeof err));
    assert_non_null(strstr(err, "do not share their left operand"));
    for (int r = 0; r < 3; r++) {
        ir_gtensor_free(&p[r]);
        ir_gtensor_free(&o1[r]);
        ir_gtensor_free(&o2[r]);
    }
    graph_fx_free(&fx);
}

/* Fusion scales: a generated graph of 2000 blocks (22000 ops: a GEMM with its bias,
 * tanh and residual epilogue, two GEMMs of one input, their sum, rms_norm, the row max
 * broadcast back) fuses block by block into 3 kernels each, in well under the time and
 * memory an O(n^2) grouping takes (each merge used to copy the whole grouping), and the
 * plan is in dependency order: every kernel reads parameters and earlier writes only. */
static void test_fuse_large(void **state)
{
    (void)state;
    enum { BLOCKS = 2000 };
    IrGraphModule *m = ir_gmodule_create(A);
    IrGraph *g = ir_graph_create(m, "big", (Loc){0});
    IrSize T = S("T"), d64[] = {T, K(64)}, dw[] = {K(64), K(64)}, d1[] = {K(64)}, dr[] = {T}, dr1[] = {T, K(1)};
    IrTensorType tx = {IR_F32, 2, d64}, tw = {IR_F32, 2, dw}, tv = {IR_F32, 1, d1}, ts = {IR_F32, 0, NULL},
                 trow = {IR_F32, 1, dr}, trow1 = {IR_F32, 2, dr1};
    uint32_t x = ir_graph_param(g, &tx, "x"), w = ir_graph_param(g, &tw, "w"), w2 = ir_graph_param(g, &tw, "w2"),
             b = ir_graph_param(g, &tv, "b"), gm = ir_graph_param(g, &tv, "g"), eps = ir_graph_param(g, &ts, "eps");
    ir_graph_collect_sizes(g, A);
    Loc l = {0};
#define OP(k, t, ...) ir_graph_result(g, ir_graph_op(g, k, l, (uint32_t[]){__VA_ARGS__}, \
                                      sizeof((uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t), t, 1), 0)
    for (int i = 0; i < BLOCKS; i++) {
        uint32_t h = OP(IR_GOP_MATMUL, &tx, x, w), h2 = OP(IR_GOP_ADD, &tx, h, b), h3 = OP(IR_GOP_TANH, &tx, h2);
        uint32_t r = OP(IR_GOP_ADD, &tx, h3, x), q = OP(IR_GOP_MATMUL, &tx, r, w), k = OP(IR_GOP_MATMUL, &tx, r, w2);
        uint32_t qk = OP(IR_GOP_ADD, &tx, q, k), n = OP(IR_GOP_RMS_NORM, &tx, qk, gm, eps);
        uint32_t mx = OP(IR_GOP_MAX, &trow, n);
        g->ops.data[g->ops.len - 1].attr.axis = 1;
        uint32_t mr = OP(IR_GOP_RESHAPE, &trow1, mx);
        x = OP(IR_GOP_SUB, &tx, n, mr);
    }
#undef OP
    ir_graph_op(g, IR_GOP_RETURN, l, &x, 1, NULL, 0);
    DiagList dl;
    diag_init(&dl);
    assert_true(ir_graph_verify(g, A, &dl));
    diag_free(&dl);
    double t0 = tl_now_ms();
    IrGPlan *plan = pass_graph_fuse(g, A);
    double ms = tl_now_ms() - t0;
    assert_true(ms < 10000);
    assert_int_equal(plan->nkernels, 3 * BLOCKS);
    bool *have = calloc(g->values.len, 1), *placed = calloc(g->ops.len, 1);
    assert_non_null(have);
    assert_non_null(placed);
    for (size_t p = 0; p < g->params.len; p++) have[g->params.data[p]] = true;
    for (uint32_t k = 0; k < plan->nkernels; k++) {
        const IrGKernel *K = &plan->kernels[k];
        assert_string_equal(K->kind, k % 3 == 0 ? "matmul" : k % 3 == 1 ? "horizontal_matmul" : "rms_norm");
        for (uint32_t i = 0; i < K->nreads; i++) assert_true(have[K->reads[i]]);
        for (uint32_t i = 0; i < K->nops; i++) {
            assert_false(placed[K->ops[i]]);
            placed[K->ops[i]] = true;
        }
        for (uint32_t i = 0; i < K->nwrites; i++) have[K->writes[i]] = true;
    }
    for (size_t o = 0; o + 1 < g->ops.len; o++) assert_true(placed[o]);
    /* Liveness keeps the buffers few: each value dies within a block or the next. */
    assert_true(plan->nbuffers <= 4);
    free(have);
    free(placed);
    ir_gmodule_destroy(m);
}

/* Attention written out is one flash_attention kernel, described for lowering
 * (IrGAttention): its operands and the ops between the products; the fused run gives
 * the op-by-op run's bits. */
static void test_plan_attention(void **state)
{
    (void)state;
    const char *text = "graph @g(%q: f32[L, 4], %k: f32[L, 4], %v: f32[L, 2], %mask: f32[L, L], %p: f32, %seed: i64) {\n"
                       "  %kt = trans [1, 0] %k : f32[4, L]\n"
                       "  %s = matmul %q, %kt : f32[L, L]\n"
                       "  %c = const 0.5 : f32\n"
                       "  %ss = mul %s, %c : f32[L, L]\n"
                       "  %sm = add %ss, %mask : f32[L, L]\n"
                       "  %pr = softmax 1 %sm : f32[L, L]\n"
                       "  %pd = dropout %pr, %p, %seed : f32[L, L]\n"
                       "  %o = matmul %pd, %v : f32[L, 2]\n"
                       "  %y = neg %o : f32[L, 2]\n"
                       "  return %y\n"
                       "}\n";
    GraphFx fx;
    IrGraph *g = parse_graph(&fx, text);
    IrGPlan *plan = pass_graph_fuse(g, A);
    assert_int_equal(plan->nkernels, 1);
    const IrGKernel *K = &plan->kernels[0];
    assert_string_equal(K->kind, "flash_attention");
    assert_null(K->conv);
    const IrGAttention *at = K->attn;
    assert_non_null(at);
    assert_int_equal(at->op, IR_GNONE);
    assert_int_equal(at->q, g->params.data[0]);
    assert_int_equal(at->k, g->params.data[1]);
    assert_false(at->k_t);
    assert_int_equal(at->v, g->params.data[2]);
    assert_int_equal(at->qk, 1);
    assert_int_equal(at->softmax, 5);
    assert_int_equal(at->pv, 7);
    assert_int_equal(at->nscore, 2);
    assert_int_equal(at->score[0], 3);
    assert_int_equal(at->score[1], 4);
    assert_int_equal(at->nprob, 1);
    assert_int_equal(at->prob[0], 6);
    assert_int_equal(at->out, ir_graph_result(g, 7, 0));
    assert_int_equal(K->nwrites, 1);
    assert_int_equal(K->writes[0], ir_graph_result(g, 8, 0));
    int64_t sizes[] = {3}, dq[] = {3, 4}, dv[] = {3, 2}, dm[] = {3, 3};
    IrGTensor p[6], o1 = {0};
    assert_true(ir_gtensor_alloc(&p[0], IR_F32, 2, dq) && ir_gtensor_alloc(&p[1], IR_F32, 2, dq) &&
                ir_gtensor_alloc(&p[2], IR_F32, 2, dv) && ir_gtensor_alloc(&p[3], IR_F32, 2, dm) &&
                ir_gtensor_alloc(&p[4], IR_F32, 0, NULL) && ir_gtensor_alloc(&p[5], IR_I64, 0, NULL));
    for (int i = 0; i < 12; i++) p[0].f[i] = (i % 5) * 0.25, p[1].f[i] = (i % 3) * 0.5 - 0.5;
    for (int i = 0; i < 6; i++) p[2].f[i] = i;
    for (int i = 0; i < 9; i++) p[3].f[i] = i % 3 > i / 3 ? -INFINITY : 0;   /* causal */
    p[4].f[0] = 0.25;
    p[5].i[0] = 7;
    assert_plan_same(g, plan, p, sizes, &o1, 1);
    /* Row 0 sees key 0 only (the causal mask): its output is -v[0] / (1 - p) = [0, -4/3]
     * unless dropout drops that one probability. */
    assert_true(o1.f[0] == 0 && (o1.f[1] == 0 || fabs(o1.f[1] + 4.0 / 3) < 1e-6));
    for (int r = 0; r < 6; r++) ir_gtensor_free(&p[r]);
    ir_gtensor_free(&o1);
    graph_fx_free(&fx);
}

/* A conv2d kernel describes its conv and the per-channel ops folded into it. */
static void test_plan_conv(void **state)
{
    (void)state;
    const char *text = "graph @g(%x: f32[N, 2, 4, 4], %w: f32[3, 2, 1, 1], %s: f32[3], %t: f32[3]) {\n"
                       "  %y = conv2d nchw stride [1, 1] pad [0, 0] %x, %w : f32[N, 3, 4, 4]\n"
                       "  %e = exp %s : f32[3]\n"
                       "  %er = reshape %e : f32[3, 1, 1]\n"
                       "  %tr = reshape %t : f32[3, 1, 1]\n"
                       "  %a = mul %y, %er : f32[N, 3, 4, 4]\n"
                       "  %b = add %a, %tr : f32[N, 3, 4, 4]\n"
                       "  return %b\n"
                       "}\n";
    GraphFx fx;
    IrGraph *g = parse_graph(&fx, text);
    IrGPlan *plan = pass_graph_fuse(g, A);
    assert_int_equal(plan->nkernels, 1);
    const IrGConv *cv = plan->kernels[0].conv;
    assert_string_equal(plan->kernels[0].kind, "conv2d");
    assert_non_null(cv);
    assert_int_equal(cv->op, 0);
    assert_int_equal(cv->x, g->params.data[0]);
    assert_int_equal(cv->w, g->params.data[1]);
    assert_int_equal(cv->nchannel, 3);
    assert_int_equal(cv->channel[0], 1);
    assert_int_equal(cv->channel[1], 2);
    assert_int_equal(cv->channel[2], 3);
    graph_fx_free(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_size_normal_form, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_numel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_size_eval_overflow, setup, teardown),
        cmocka_unit_test_setup_teardown(test_promote, setup, teardown),
        cmocka_unit_test_setup_teardown(test_build_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_interp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_buffers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_views, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_horizontal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fuse_large, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_attention, setup, teardown),
        cmocka_unit_test_setup_teardown(test_plan_conv, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
