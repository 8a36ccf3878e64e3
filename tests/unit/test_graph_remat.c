/* The recomputation pass (passes/graph_remat.c): the min cut on small joint graphs (a
 * known optimal cut, a budget that forces recomputation, a budget that cannot be met,
 * a cheap value that is saved because its input would be gone), checkpoint regions of
 * @checkpoint fns, dropout recomputed from its seed (no mask stored), and every policy
 * computing save-all's values bit for bit in the interpreter, op by op and fused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "ir/graph_grad.h"
#include "ir/graph_interp.h"
#include "passes/graph_remat.h"
#include "passes/passes.h"

typedef struct Fx {
    Arena *a;
    Source *src;
    DiagList d;
    IrGraphModule *m;
} Fx;

static void fx_free(Fx *x)
{
    ir_gmodule_destroy(x->m);
    diag_free(&x->d);
    source_free(x->src);
    arena_destroy(x->a);
}

static IrGraph *from_gir(Fx *x, const char *text)
{
    x->a = arena_create();
    x->src = source_from_string("t.gir", text);
    diag_init(&x->d);
    x->m = ir_gmodule_create(x->a);
    bool ok = ir_gmodule_parse(x->m, x->src, &x->d) && ir_gmodule_verify(x->m, &x->d);
    for (size_t i = 0; i < x->d.len; i++) fprintf(stderr, "%s\n", x->d.items[i].msg);
    assert_true(ok);
    return x->m->graphs.data[0];
}

static IrGraph *from_tile(Fx *x, const char *text)
{
    x->a = arena_create();
    x->src = source_from_string("t.tile", text);
    diag_init(&x->d);
    AstProgram *p = fe_parse(x->a, x->src, &x->d);
    x->m = ir_gmodule_create(x->a);
    IrGraph *g = fe_build_graph(x->a, p, &p->items[p->nitems - 1], x->m, &x->d, NULL);
    for (size_t i = 0; i < x->d.len; i++) fprintf(stderr, "%s\n", x->d.items[i].msg);
    assert_non_null(g);
    assert_true(ir_graph_verify(g, x->a, &x->d));
    return g;
}

static const PassRemat *run(Fx *x, IrGraph *g, IrRematPolicy p, IrBudgetKind bk, double b, const int64_t *sizes)
{
    IrRemat r = {p, bk, b};
    const PassRemat *rep = pass_graph_remat(g, &r, sizes, x->a);
    assert_true(ir_graph_verify(g, x->a, &x->d));
    return rep;
}

/* The printed names of a list of values, space separated. */
static const char *names_of(Fx *x, const IrGraph *g, const uint32_t *v, uint32_t n)
{
    const char **names = ir_graph_value_names(x->a, g), *s = "";
    for (uint32_t i = 0; i < n; i++) s = arena_printf(x->a, "%s%s%s", s, i ? " " : "", names[v[i]]);
    return s;
}

/* exp and tanh after a GEMM, both read by the backward: save-all keeps both (512*T
 * bytes); the optimal cut keeps the GEMM's output (256*T) and recomputes the two. */
static const char chain[] =
    "graph @g(%x: f32[T, 4], %w: f32[4, 64]) {\n"
    "  %a = matmul %x, %w : f32[T, 64]\n"
    "  %b = exp %a : f32[T, 64]\n"
    "  %c = tanh %b : f32[T, 64]\n"
    "  %s = sum 1 %c : f32[T]\n"
    "  %l = sum 0 %s : f32\n"
    "backward:\n"
    "  %one = const 1.0 : f32\n"
    "  %d1 = mul %one, %b : f32[T, 64]\n"
    "  %d2 = mul %d1, %c : f32[T, 64]\n"
    "  return %l, %d2\n"
    "}\n";

static void test_known_cut(void **state)
{
    (void)state;
    const struct { IrRematPolicy p; const char *saved, *recomputed, *bytes; } cases[] = {
        {IR_REMAT_SAVE_ALL, "b c", "", "512*T"},
        {IR_REMAT_SELECTIVE, "a", "b c", "256*T"},
        {IR_REMAT_CHECKPOINT, "", "a b c", "0"},   /* no region: the whole forward */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        Fx x;
        IrGraph *g = from_gir(&x, chain);
        const PassRemat *r = run(&x, g, cases[i].p, IR_BUDGET_NONE, 0, NULL);
        assert_string_equal(names_of(&x, g, r->saved, r->nsaved), cases[i].saved);
        assert_string_equal(names_of(&x, g, r->recomputed, r->nrecomputed), cases[i].recomputed);
        assert_string_equal(ir_size_str(x.a, r->saved_bytes), cases[i].bytes);
        assert_true(r->met);
        fx_free(&x);
    }
}

/* At T = 8 selective saves 2048 bytes; a budget of 1000 makes the GEMM recomputable, and
 * then nothing is saved (x and w are parameters); a fraction works the same way. */
static void test_budget_forces_recompute(void **state)
{
    (void)state;
    int64_t T = 8;
    Fx x;
    IrGraph *g = from_gir(&x, chain);
    const PassRemat *r = run(&x, g, IR_REMAT_SELECTIVE, IR_BUDGET_BYTES, 1000, &T);
    assert_true(r->met);
    assert_int_equal(r->nsaved, 0);
    assert_int_equal(r->nunbanned, 1);
    assert_string_equal(names_of(&x, g, r->recomputed, r->nrecomputed), "a b c");
    fx_free(&x);
    g = from_gir(&x, chain);
    r = run(&x, g, IR_REMAT_SAVE_ALL, IR_BUDGET_FRACTION, 0.5, &T);   /* 4096 * 0.5: selective's cut fits */
    assert_true(r->met);
    assert_string_equal(names_of(&x, g, r->saved, r->nsaved), "a");
    assert_int_equal(r->nunbanned, 0);
    fx_free(&x);
}

/* The sum is cheap, but recomputing it needs the GEMM's output, which selective keeps
 * only if saved: the cut keeps the sum ([T], 4*T bytes), not the GEMM ([T, 64]), and the
 * backward reads it from memory. */
static void test_input_gone(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_gir(&x,
        "graph @g(%x: f32[T, 4], %w: f32[4, 64]) {\n"
        "  %a = matmul %x, %w : f32[T, 64]\n"
        "  %r = sum 1 %a : f32[T]\n"
        "  %e = exp %r : f32[T]\n"
        "  %l = sum 0 %e : f32\n"
        "backward:\n"
        "  %one = const 1.0 : f32\n"
        "  %d = mul %one, %r : f32[T]\n"
        "  return %l, %d\n"
        "}\n");
    const PassRemat *r = run(&x, g, IR_REMAT_SELECTIVE, IR_BUDGET_NONE, 0, NULL);
    assert_string_equal(names_of(&x, g, r->saved, r->nsaved), "r");
    assert_int_equal(r->nrecomputed, 0);
    fx_free(&x);
}

/* A checkpoint region's output that the forward reads outside the region is saved, its
 * inside recomputed; a budget below it lifts the output's ban and recomputes it too. */
static void test_region_output(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_gir(&x,
        "graph @g(%x: f32[T, 4]) {\n"
        "  %a = exp %x : f32[T, 4] checkpoint 1\n"
        "  %s = sum 1 %a : f32[T] checkpoint 1\n"
        "  %l = sum 0 %s : f32\n"
        "backward:\n"
        "  %one = const 1.0 : f32\n"
        "  %d = mul %one, %s : f32[T]\n"
        "  return %l, %d\n"
        "}\n");
    assert_int_equal(g->nregions, 1);
    const PassRemat *r = run(&x, g, IR_REMAT_CHECKPOINT, IR_BUDGET_NONE, 0, NULL);
    assert_string_equal(names_of(&x, g, r->saved, r->nsaved), "s");   /* the region's output */
    assert_int_equal(r->nrecomputed, 0);
    fx_free(&x);
    g = from_gir(&x,
        "graph @g(%x: f32[T, 4]) {\n"
        "  %a = exp %x : f32[T, 4] checkpoint 1\n"
        "  %s = sum 1 %a : f32[T] checkpoint 1\n"
        "  %l = sum 0 %s : f32\n"
        "backward:\n"
        "  %one = const 1.0 : f32\n"
        "  %d = mul %one, %s : f32[T]\n"
        "  return %l, %d\n"
        "}\n");
    r = run(&x, g, IR_REMAT_CHECKPOINT, IR_BUDGET_BYTES, 1, NULL);   /* the budget lifts the output's ban */
    assert_true(r->met);
    assert_int_equal(r->nsaved, 0);
    assert_string_equal(names_of(&x, g, r->recomputed, r->nrecomputed), "a s");
    fx_free(&x);
}

/* Runs g's values (as built) and, for each policy, the rewritten graph op by op and
 * through its fusion plan: the same bits every time. */
static void same_values(const char *src, const int64_t *sizes, uint32_t nparams, bool *has_dropout_copy)
{
    Fx x;
    IrGraph *g = from_tile(&x, src);
    IrGTensor params[8] = {0}, ref[8] = {0};
    uint64_t s = 12345;
    for (uint32_t p = 0; p < nparams; p++) {
        const IrTensorType *t = &g->values.data[g->params.data[p]].type;
        int64_t dims[8];
        for (uint32_t d = 0; d < t->rank; d++) assert_true(ir_size_eval(t->dims[d], g->sizes, sizes, g->nsizes, &dims[d]));
        assert_true(ir_gtensor_alloc(&params[p], t->elem, t->rank, dims));
        for (int64_t i = 0; i < params[p].n; i++) {
            s = s * 6364136223846793005u + 1442695040888963407u;
            if (params[p].f) params[p].f[i] = (double)(s >> 40) / (double)(1 << 24) - 0.5;
            else params[p].i[i] = (int64_t)(s >> 60);
        }
    }
    char err[512];
    assert_true(ir_graph_interp(g, params, sizes, ref, err, sizeof err));
    uint32_t nout = g->ops.data[g->ops.len - 1].nin;
    for (int p = 0; p < 3; p++) {
        IrGraphModule *m = ir_gmodule_create(x.a);
        IrGraph *c = ir_graph_clone(m, g);
        const PassRemat *r = run(&x, c, (IrRematPolicy)p, IR_BUDGET_NONE, 0, NULL);
        for (uint32_t i = 0; i < r->nrecomputed && has_dropout_copy; i++)
            *has_dropout_copy |= c->ops.data[c->values.data[r->recomputed[i]].def].kind == IR_GOP_DROPOUT;
        for (int fused = 0; fused < 2; fused++) {
            IrGTensor out[8] = {0};
            bool ok = fused ? ir_graph_interp_plan(c, pass_graph_fuse(c, x.a), params, sizes, out, err, sizeof err)
                            : ir_graph_interp(c, params, sizes, out, err, sizeof err);
            if (!ok) fprintf(stderr, "%s\n", err);
            assert_true(ok);
            for (uint32_t k = 0; k < nout; k++) {
                assert_int_equal(out[k].n, ref[k].n);
                for (int64_t i = 0; out[k].f && i < out[k].n; i++) assert_memory_equal(&out[k].f[i], &ref[k].f[i], sizeof(double));
                ir_gtensor_free(&out[k]);
            }
        }
        ir_gmodule_destroy(m);
    }
    for (uint32_t k = 0; k < nout; k++) ir_gtensor_free(&ref[k]);
    for (uint32_t p = 0; p < nparams; p++) ir_gtensor_free(&params[p]);
    fx_free(&x);
}

/* Dropout's mask is no value of the graph: its grad drops the same elements again from
 * the seed. Selective recomputes the dropout itself (from its operand and the seed),
 * and every policy gives save-all's gradients. */
static void test_dropout_from_seed(void **state)
{
    (void)state;
    int64_t sizes[1] = {5};
    bool copied = false;
    same_values("graph g(x: f32[T, 6], w: f32[6, 6], seed: i64) -> (f32, f32[6, 6]) {\n"
                "    let h = dropout(tanh(x @ w), 0.25, seed);\n"
                "    let l = sum(sum(h * h, 1), 0);\n"
                "    let (dw) = grad(l, [w]);\n"
                "    return (l, dw);\n"
                "}\n", sizes, 3, &copied);
    assert_true(copied);
}

/* @checkpoint fns: each call is a region; the backward recomputes its inside from the
 * region's inputs, and the values it hands on (the block's result) are saved. */
static void test_checkpoint_fn(void **state)
{
    (void)state;
    const char src[] =
        "@checkpoint fn block(x, w) { return x + tanh(x @ w) * sigmoid(x @ w); }\n"
        "graph g(x: f32[T, 6], w1: f32[6, 6], w2: f32[6, 6]) -> (f32, f32[6, 6], f32[6, 6]) {\n"
        "    let h = block(block(x, w1), w2);\n"
        "    let l = sum(sum(h * h, 1), 0);\n"
        "    let (d1, d2) = grad(l, [w1, w2]);\n"
        "    return (l, d1, d2);\n"
        "}\n";
    Fx x;
    IrGraph *g = from_tile(&x, src);
    assert_int_equal(g->nregions, 2);
    assert_int_equal(g->remat.policy, IR_REMAT_CHECKPOINT);   /* @checkpoint fns: the default */
    const PassRemat *r = run(&x, g, IR_REMAT_CHECKPOINT, IR_BUDGET_NONE, 0, NULL);
    const char **names = ir_graph_value_names(x.a, g);
    /* only the blocks' results (the residual adds): the first block's, which the second
     * reads, and h, which the loss reads; transpositions of x are recomputed */
    assert_int_equal(r->nsaved, 2);
    assert_string_equal(names[r->saved[1]], "h");
    assert_int_equal(g->ops.data[g->values.data[r->saved[0]].def].kind, IR_GOP_ADD);
    assert_true(r->nrecomputed >= 8);   /* both blocks' matmuls, tanh, sigmoid, products */
    fx_free(&x);
    int64_t sizes[1] = {3};
    same_values(src, sizes, 3, NULL);
}

/* The examples' shapes of training graph: every policy gives save-all's bits. */
static void test_policies_same_values(void **state)
{
    (void)state;
    int64_t sizes[1] = {4};
    same_values("fn gelu(x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }\n"
                "graph g(x: bf16[T, 8], w1: bf16[8, 12], w2: bf16[12, 3], wn: bf16[8]) -> (f32, bf16[8, 12], bf16[12, 3]) {\n"
                "    let h = gelu(rms_norm(x, wn, 0.00001) @ w1);\n"
                "    let e = softmax(h @ w2, 1) as f32;\n"
                "    let l = mean(mean(e * e, 1), 0);\n"
                "    let (d1, d2) = grad(l, [w1, w2]);\n"
                "    return (l, d1, d2);\n"
                "}\n", sizes, 4, NULL);
}

/* The options: policy names, budgets as bytes, units and fractions. */
static void test_options(void **state)
{
    (void)state;
    IrRemat r = {0};
    assert_true(ir_remat_parse_budget("0.5", &r));
    assert_int_equal(r.budget_kind, IR_BUDGET_FRACTION);
    assert_true(ir_remat_parse_budget("2GiB", &r));
    assert_int_equal(r.budget_kind, IR_BUDGET_BYTES);
    assert_true(r.budget == 2147483648.0);
    assert_true(ir_remat_parse_budget("1.5e9", &r) && r.budget == 1.5e9);
    assert_true(ir_remat_parse_budget("1048576", &r) && r.budget == 1048576);
    assert_false(ir_remat_parse_budget("1.5", &r));   /* a fraction above 1 */
    assert_false(ir_remat_parse_budget("-1", &r));
    assert_false(ir_remat_parse_budget("3 apples", &r));
    IrRematPolicy p;
    assert_true(ir_remat_policy_from_name("selective", &p) && p == IR_REMAT_SELECTIVE);
    assert_false(ir_remat_policy_from_name("save_all", &p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_cut),
        cmocka_unit_test(test_budget_forces_recompute),
        cmocka_unit_test(test_input_gone),
        cmocka_unit_test(test_region_output),
        cmocka_unit_test(test_dropout_from_seed),
        cmocka_unit_test(test_checkpoint_fn),
        cmocka_unit_test(test_policies_same_values),
        cmocka_unit_test(test_options),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
