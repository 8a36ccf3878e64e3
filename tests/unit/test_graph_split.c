/* The forward/backward split (passes/graph_split.c): the seed becomes the parameter
 * dloss (of the loss's type, read through a cast), every op gets a phase, and a plan
 * divides into a forward and a backward with the values crossing between them named;
 * the graph computes what it did with dloss = 1 and dloss times the gradients else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "ir/graph_interp.h"
#include "passes/graph_remat.h"
#include "passes/graph_split.h"
#include "passes/passes.h"

typedef struct Fx {
    Arena *a;
    Source *src;
    DiagList d;
    IrGraphModule *m;
} Fx;

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
    return g;
}

static void fx_free(Fx *x)
{
    ir_gmodule_destroy(x->m);
    diag_free(&x->d);
    source_free(x->src);
    arena_destroy(x->a);
}

static const char mlp[] =
    "graph mlp(x: f32[T, 4], w1: f32[4, 6], w2: f32[6, 2]) -> (f32, f32[4, 6], f32[6, 2]) {\n"
    "    let p = tanh(x @ w1) @ w2;\n"
    "    let loss = sum(sum(p * p, 1), 0);\n"
    "    let (d1, d2) = grad(loss, [w1, w2]);\n"
    "    return (loss, d1, d2);\n"
    "}\n";

/* g (a copy with the policy's remat and the seed input) at T = 3, dloss = seed. */
static void run_mlp(const IrGraph *g, double seed, IrGTensor *out)
{
    IrGTensor params[4] = {0};
    int64_t T = 3, dims[3][2] = {{3, 4}, {4, 6}, {6, 2}};
    for (int p = 0; p < 3; p++) {
        assert_true(ir_gtensor_alloc(&params[p], IR_F32, 2, dims[p]));
        for (int64_t i = 0; i < params[p].n; i++) params[p].f[i] = (float)((i * 7 + p * 3) % 11) / 8 - 0.6;
    }
    uint32_t np = (uint32_t)g->params.len;
    if (np == 4) {
        assert_true(ir_gtensor_alloc(&params[3], IR_F32, 0, NULL));
        params[3].f[0] = seed;
    }
    char err[256];
    assert_true(ir_graph_interp(g, params, &T, out, err, sizeof err));
    for (uint32_t p = 0; p < np; p++) ir_gtensor_free(&params[p]);
}

static IrGraph *split_copy_budget(Fx *x, const IrGraph *g, IrRematPolicy policy, IrBudgetKind kind, double budget)
{
    IrGraph *c = ir_graph_clone(x->m, g);
    IrRemat r = {policy, kind, budget};
    pass_graph_remat(c, &r, NULL, x->a);
    pass_graph_seed_input(c);
    assert_true(ir_graph_verify(c, x->a, &x->d));
    return c;
}

static IrGraph *split_copy(Fx *x, const IrGraph *g, IrRematPolicy policy)
{
    return split_copy_budget(x, g, policy, IR_BUDGET_NONE, 0);
}

/* dloss is the last parameter, f32 like the loss; no op reads the constant seed any more;
 * dloss = 1 gives the graph's values bit for bit, dloss = 0.5 halves the gradients. */
static void test_seed_input(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_tile(&x, mlp);
    IrGTensor ref[3] = {0};
    run_mlp(g, 1, ref);
    for (int p = 0; p < 3; p++) {
        IrGraph *c = split_copy(&x, g, (IrRematPolicy)p);
        assert_int_equal(c->params.len, 4);
        assert_int_equal(c->dloss, c->params.data[3]);
        assert_int_equal(c->values.data[c->dloss].type.elem, IR_F32);
        assert_int_equal(c->values.data[c->dloss].type.rank, 0);
        for (uint32_t o = 0; o < c->ops.len; o++) {
            for (uint32_t i = 0; i < c->ops.data[o].nin; i++) assert_int_not_equal(c->ops.data[o].in[i], c->seed);
            assert_true(c->ops.data[o].phase <= 2);
            if (o < c->nfwd) assert_int_equal(c->ops.data[o].phase, 1);
        }
        IrGTensor one[3] = {0}, half[3] = {0};
        run_mlp(c, 1, one);
        run_mlp(c, 0.5, half);
        for (int k = 0; k < 3; k++) {
            assert_memory_equal(one[k].f, ref[k].f, (size_t)ref[k].n * sizeof(double));
            for (int64_t i = 0; k && i < ref[k].n; i++) assert_true(half[k].f[i] == (double)(float)(ref[k].f[i] * 0.5));
            ir_gtensor_free(&one[k]);
            ir_gtensor_free(&half[k]);
        }
    }
    for (int k = 0; k < 3; k++) ir_gtensor_free(&ref[k]);
    fx_free(&x);
}

/* Every kernel in one part; what the backward reads of the forward is named; each saved
 * value is written by a forward kernel and read by a backward one. */
static void test_plan_split(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_tile(&x, mlp);
    for (int p = 0; p < 3; p++) {
        IrGraph *c = split_copy(&x, g, (IrRematPolicy)p);
        const IrGPlan *plan = pass_graph_fuse(c, x.a);
        const char *err;
        const PassSplit *s = pass_graph_split(c, plan, x.a, &err);
        assert_null(err);
        assert_non_null(s);
        assert_int_equal(s->nforward + s->nbackward, ir_gplan_num_launched(plan));
        assert_true(s->nforward > 0 && s->nbackward > 0);
        for (uint32_t i = 0; i < s->ncross; i++) {
            const PassCross *cr = &s->cross[i];
            if (cr->kind == PASS_CROSS_PARAM) assert_int_equal(c->values.data[cr->value].def, IR_GNONE);
            else assert_int_equal(s->phase[cr->writer], 1);
        }
        for (uint32_t i = 0; i < s->nsaved; i++) {
            bool read_by_backward = false;
            for (uint32_t k = 0; k < plan->nkernels; k++)
                for (uint32_t r = 0; s->phase[k] == 2 && r < plan->kernels[k].nreads; r++)
                    read_by_backward |= ir_gplan_root(plan, plan->kernels[k].reads[r]) == s->saved[i];
            assert_true(read_by_backward);
        }
        if (p == IR_REMAT_CHECKPOINT) assert_int_equal(s->nsaved, 0);   /* the whole forward recomputed */
        else assert_true(s->nsaved > 0);
    }
    fx_free(&x);
}

/* The fused LM head in Liger's order (passes/graph_lmce.c): linear_cross_entropy runs in
 * the forward (phase 1, before nfwd) on a dy that no longer depends on dloss (its ops
 * cloned from a constant 1), and so does the loss; the backward has two multiplies of
 * its dx and dw by the seed (phase 2). With dloss = 1 the values are the graph's as
 * built (op by op, the [T, V] logits held), bit for bit; with dloss = 0.5 the loss is the
 * same and the gradients are halved exactly. The split saves dx and dw, written by the
 * fused op's forward kernel, under every policy and budget (never recomputed). */
static const char lce[] =
    "@linear_cross_entropy(chunk = 2)\n"
    "graph lce(x: f64[5, 4], w: f64[4, 6], lab: i64[5]) -> (f64, f64[5, 4], f64[4, 6]) {\n"
    "    let l = cross_entropy(x @ w, lab) * 1.7;\n"
    "    let (dx, dw) = grad(l, [x, w]);\n"
    "    return (l, dx, dw);\n"
    "}\n";

static void run_lce(const IrGraph *g, double seed, IrGTensor *out)
{
    IrGTensor params[4] = {0};
    int64_t dims[3][2] = {{5, 4}, {4, 6}, {5, 0}};
    for (int p = 0; p < 2; p++) {
        assert_true(ir_gtensor_alloc(&params[p], IR_F64, 2, dims[p]));
        for (int64_t i = 0; i < params[p].n; i++) params[p].f[i] = (double)((i * 7 + p * 3) % 11) / 8 - 0.6;
    }
    assert_true(ir_gtensor_alloc(&params[2], IR_I64, 1, dims[2]));
    for (int64_t i = 0; i < 5; i++) params[2].i[i] = i == 2 ? -100 : (i * 5 + 1) % 6;   /* row 2 ignored */
    uint32_t np = (uint32_t)g->params.len;
    if (np == 4) {
        assert_true(ir_gtensor_alloc(&params[3], IR_F64, 0, NULL));
        params[3].f[0] = seed;
    }
    char err[256];
    assert_true(ir_graph_interp(g, params, NULL, out, err, sizeof err));
    for (uint32_t p = 0; p < np; p++) ir_gtensor_free(&params[p]);
}

/* Whether value v of g depends on value from. */
static bool depends_on(const IrGraph *g, uint32_t v, uint32_t from)
{
    if (v == from) return true;
    uint32_t d = g->values.data[v].def;
    if (d == IR_GNONE) return false;
    for (uint32_t i = 0; i < g->ops.data[d].nin; i++)
        if (depends_on(g, g->ops.data[d].in[i], from)) return true;
    return false;
}

static void test_lce_liger(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_tile(&x, lce);
    assert_int_equal(g->lce_chunk, 2);
    IrGTensor ref[3] = {0};
    run_lce(g, 1, ref);
    for (int p = 0; p < 4; p++) {   /* every policy, then selective under a budget of 1 byte */
        IrGraph *c = ir_graph_clone(x.m, g);
        assert_int_equal(pass_graph_lmce(c, c->lce_chunk, true, x.a), 1);
        c = p < 3 ? split_copy(&x, c, (IrRematPolicy)p) : split_copy_budget(&x, c, IR_REMAT_SELECTIVE, IR_BUDGET_BYTES, 1);
        uint32_t lce_op = IR_GNONE, nscale = 0;
        for (uint32_t o = 0; o < c->ops.len; o++)
            if (c->ops.data[o].kind == IR_GOP_LINEAR_CROSS_ENTROPY) lce_op = o;
        assert_int_not_equal(lce_op, IR_GNONE);
        const IrGOp *op = &c->ops.data[lce_op];
        assert_true(lce_op < c->nfwd);
        assert_int_equal(op->phase, 1);
        assert_false(depends_on(c, op->in[IR_LCE_DY], c->dloss));
        assert_true(c->values.data[c->loss].def < c->nfwd);
        for (uint32_t o = 0; o < c->ops.len; o++) {
            const IrGOp *m = &c->ops.data[o];
            if (m->kind != IR_GOP_MUL || (m->in[1] != op->out[1] && m->in[1] != op->out[2])) continue;
            nscale++;
            assert_true(depends_on(c, m->in[0], c->dloss));
            assert_int_equal(m->phase, 2);
        }
        assert_int_equal(nscale, 2);
        IrGTensor one[3] = {0}, half[3] = {0};
        run_lce(c, 1, one);
        run_lce(c, 0.5, half);
        for (int k = 0; k < 3; k++) {
            assert_memory_equal(one[k].f, ref[k].f, (size_t)ref[k].n * sizeof(double));
            for (int64_t i = 0; i < ref[k].n; i++) assert_true(half[k].f[i] == (k ? 0.5 : 1) * ref[k].f[i]);
            ir_gtensor_free(&one[k]);
            ir_gtensor_free(&half[k]);
        }
        const IrGPlan *plan = pass_graph_fuse(c, x.a);
        const char *err;
        const PassSplit *s = pass_graph_split(c, plan, x.a, &err);
        assert_null(err);
        assert_non_null(s);
        bool saved[2] = {false, false};
        for (uint32_t i = 0; i < s->nsaved; i++)
            for (int r = 0; r < 2; r++) saved[r] |= s->saved[i] == op->out[1 + r];
        assert_true(saved[0] && saved[1]);
        for (uint32_t k = 0; k < plan->nkernels; k++)
            for (uint32_t i = 0; i < plan->kernels[k].nops; i++)
                if (plan->kernels[k].ops[i] == lce_op || plan->kernels[k].ops[i] == c->values.data[c->loss].def)
                    assert_int_equal(s->phase[k], 1);
    }
    for (int k = 0; k < 3; k++) ir_gtensor_free(&ref[k]);
    fx_free(&x);
}

/* A bf16 loss: dloss is bf16, cast up to the backward's f32 before any use. */
static void test_bf16_seed(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_tile(&x, "graph h(x: bf16[T, 4], w: bf16[4, 2]) -> (bf16, bf16[4, 2]) {\n"
                               "    let l = sum(sum(x @ w, 1), 0);\n"
                               "    let (dw) = grad(l, [w]);\n"
                               "    return (l, dw);\n"
                               "}\n");
    IrGraph *c = split_copy(&x, g, IR_REMAT_SAVE_ALL);
    assert_int_equal(c->values.data[c->dloss].type.elem, IR_BF16);
    uint32_t readers = 0;
    for (uint32_t o = 0; o < c->ops.len; o++)
        for (uint32_t i = 0; i < c->ops.data[o].nin; i++)
            if (c->ops.data[o].in[i] == c->dloss) {
                readers++;
                assert_int_equal(c->ops.data[o].kind, IR_GOP_CAST);
                assert_int_equal(c->values.data[c->ops.data[o].out[0]].type.elem, IR_F32);
                assert_int_equal(c->ops.data[o].phase, 2);
            }
    assert_int_equal(readers, 1);
    fx_free(&x);
}

/* Without a grad nothing changes and there is no split. */
static void test_no_grad(void **state)
{
    (void)state;
    Fx x;
    IrGraph *g = from_tile(&x, "graph f(x: f32[T, 4]) -> f32[T] { return sum(x, 1); }\n");
    uint32_t nops = (uint32_t)g->ops.len;
    pass_graph_seed_input(g);
    assert_int_equal(g->ops.len, nops);
    assert_int_equal(g->params.len, 1);
    assert_int_equal(g->dloss, IR_GNONE);
    const char *err;
    assert_null(pass_graph_split(g, pass_graph_fuse(g, x.a), x.a, &err));
    assert_null(err);
    fx_free(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_input),
        cmocka_unit_test(test_plan_split),
        cmocka_unit_test(test_lce_liger),
        cmocka_unit_test(test_bf16_seed),
        cmocka_unit_test(test_no_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
