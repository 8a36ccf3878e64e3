/* Every gradient rule of ir/graph_grad.c against central finite differences, in f64 on
 * the graph IR interpreter (issue 42, item 6).
 *
 * Each case is a forward graph returning a scalar loss. The test takes its return off,
 * appends the backward for the gradients with respect to its first `nwrt` parameters
 * (ir_graph_grad), returns (loss, gradients...), verifies the graph, runs it on inputs
 * drawn from a fixed generator, and compares every element of every gradient with
 * (loss(x + h) - loss(x - h)) / 2h: |g - fd| <= tol * (1 + |fd|). The shapes are odd
 * and broadcast (sizes 1, 3, 5, batch axes of one operand only) so that a rule that
 * forgets to sum over a broadcast axis, or transposes the wrong way, fails. */
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
#include "passes/passes.h"

typedef struct Case {
    const char *name;
    const char *src;         /* one graph returning an f64 scalar */
    uint32_t nwrt;           /* differentiate with respect to the first nwrt parameters */
    double lo, hi;           /* float inputs: |x| in [lo, hi] */
    bool sign;               /* random signs too */
    double h, tol;           /* 0: 1e-5 and 1e-6 */
    double grid;             /* > 0: inputs rounded to multiples of grid (exact in f32) */
} Case;

#define MAXP 8

typedef struct Run {
    Arena *a;
    Source *src;
    DiagList d;
    IrGraphModule *m;
    IrGraph *g;
    IrGTensor params[MAXP];
    IrGTensor outs[MAXP + 1];
    int64_t sizes[4];
} Run;

static uint64_t rng = 0x9e3779b97f4a7c15u;

/* > 0: build() runs the LM head's fusion (passes/graph_lmce.c) with chunks of this many
 * rows after the backward, and expects lce_want rewrites. */
static int64_t lce_chunk;
static uint32_t lce_want;
static bool lce_liger;   /* the op in Liger's order (the split's), else reading the seed (the joint run's) */

static double uniform(void)
{
    rng = rng * 6364136223846793005u + 1442695040888963407u;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* The forward graph of c, with the backward appended and (loss, grads...) returned. */
static IrGraph *build(Run *r, const Case *c)
{
    r->a = arena_create();
    r->src = source_from_string("t.tile", c->src);
    diag_init(&r->d);
    AstProgram *p = fe_parse(r->a, r->src, &r->d);
    assert_non_null(p);
    r->m = ir_gmodule_create(r->a);
    IrGraph *g = fe_build_graph(r->a, p, &p->items[p->nitems - 1], r->m, &r->d, NULL);
    for (size_t i = 0; i < r->d.len; i++) fprintf(stderr, "%s: %s\n", c->name, r->d.items[i].msg);
    assert_non_null(g);
    IrGOp ret = g->ops.data[--g->ops.len];
    uint32_t in[MAXP + 1] = {ret.in[0]};
    IrGradFail fail;
    assert_true(ir_graph_grad(g, ret.in[0], g->params.data, c->nwrt, ret.loc, in + 1, &fail));
    ir_graph_op(g, IR_GOP_RETURN, ret.loc, in, c->nwrt + 1, NULL, 0);
    if (lce_chunk) assert_int_equal(pass_graph_lmce(g, lce_chunk, lce_liger, r->a), lce_want);
    bool ok = ir_graph_verify(g, r->a, &r->d);
    for (size_t i = 0; i < r->d.len; i++) fprintf(stderr, "%s: %s\n", c->name, r->d.items[i].msg);
    assert_true(ok);
    return r->g = g;
}

static double draw(const Case *c)
{
    double v = c->lo + (c->hi - c->lo) * uniform();
    if (c->sign && uniform() < 0.5) v = -v;
    return c->grid > 0 ? round(v / c->grid) * c->grid : v;
}

/* Element k of an integer tensor (cross_entropy's labels): classes 0 to 3, and every
 * third row -100 (ignored). */
static int64_t label(int64_t k) { return k % 3 == 1 ? -100 : (k * 5) % 4; }

static void make_inputs(Run *r, const Case *c)
{
    for (uint32_t s = 0; s < r->g->nsizes; s++) r->sizes[s] = 3;
    for (uint32_t p = 0; p < r->g->params.len; p++) {
        const IrTensorType *t = &r->g->values.data[r->g->params.data[p]].type;
        int64_t dims[8];
        for (uint32_t k = 0; k < t->rank; k++)
            assert_true(ir_size_eval(t->dims[k], r->g->sizes, r->sizes, r->g->nsizes, &dims[k]));
        assert_true(ir_gtensor_alloc(&r->params[p], t->elem, t->rank, dims));
        for (int64_t k = 0; k < r->params[p].n; k++)
            if (r->params[p].f) r->params[p].f[k] = draw(c);
            else r->params[p].i[k] = t->rank ? label(k) : 7;
    }
}

static void free_outs(Run *r)
{
    for (uint32_t i = 0; i <= MAXP; i++) ir_gtensor_free(&r->outs[i]);
}

static double run_loss(Run *r)
{
    char err[256] = "";
    free_outs(r);
    bool ok = ir_graph_interp(r->g, r->params, r->sizes, r->outs, err, sizeof err);
    if (!ok) fprintf(stderr, "interpreter: %s\n", err);
    assert_true(ok);
    return r->outs[0].f[0];
}

static void run_free(Run *r)
{
    free_outs(r);
    for (uint32_t p = 0; p < MAXP; p++) ir_gtensor_free(&r->params[p]);
    ir_gmodule_destroy(r->m);
    diag_free(&r->d);
    source_free(r->src);
    arena_destroy(r->a);
}

/* The number of elements of the gradients that differ from finite differences. */
static int check_case(const Case *c)
{
    Run r = {0};
    build(&r, c);
    make_inputs(&r, c);
    run_loss(&r);
    IrGTensor grads[MAXP] = {{0}};
    for (uint32_t p = 0; p < c->nwrt; p++) grads[p] = r.outs[p + 1], r.outs[p + 1] = (IrGTensor){0};
    double h = c->h > 0 ? c->h : 1e-5, tol = c->tol > 0 ? c->tol : 1e-6;
    int bad = 0;
    for (uint32_t p = 0; p < c->nwrt; p++)
        for (int64_t k = 0; k < r.params[p].n; k++) {
            double x = r.params[p].f[k];
            r.params[p].f[k] = x + h;
            double up = run_loss(&r);
            r.params[p].f[k] = x - h;
            double down = run_loss(&r);
            r.params[p].f[k] = x;
            double fd = (up - down) / (2 * h), g = grads[p].f[k];
            if (fabs(g - fd) <= tol * (1 + fabs(fd))) continue;
            if (bad++ < 4)
                fprintf(stderr, "%s: d loss / d param %u [%lld]: grad %.12g, finite differences %.12g\n", c->name,
                        p, (long long)k, g, fd);
        }
    for (uint32_t p = 0; p < MAXP; p++) ir_gtensor_free(&grads[p]);
    run_free(&r);
    return bad;
}

/* ---- the cases: every op with a rule ------------------------------------------------------ */

#define POS 0.3, 1.3, false, 0, 0, 0
#define ANY 0.3, 1.3, true, 0, 0, 0

static const Case cases[] = {
    {"add sub, broadcast", "graph g(x: f64[3, 4], b: f64[4], c: f64[3, 1]) -> f64 {\n"
     "  return sum(sum((x + b) * (x - c) - b * c + (b - x), 1), 0);\n}", 3, ANY},
    {"mul div, broadcast", "graph g(x: f64[2, 3], y: f64[3], z: f64[2, 1]) -> f64 {\n"
     "  return sum(sum(x * y / (y + x * x + z), 0), 0);\n}", 3, POS},
    {"exp exp2 log log2 sqrt rsqrt", "graph g(x: f64[5]) -> f64 {\n"
     "  return sum(exp(x) * exp2(x) + log(x) * log2(x) + sqrt(x) * rsqrt(x * x + 1.0), 0);\n}", 1, POS},
    {"sin cos tanh erf sigmoid abs neg", "graph g(x: f64[5]) -> f64 {\n"
     "  return sum(sin(x) * cos(x) + tanh(x) * erf(x) + sigmoid(x) * abs(x) * x - (-x) * x, 0);\n}", 1, ANY},
    {"minimum maximum pow", "graph g(x: f64[4], y: f64[3, 4]) -> f64 {\n"
     "  return sum(sum(maximum(x, y) * minimum(x, y) + pow(y, x) + pow(x, 2.0), 1), 0);\n}", 2, POS},
    {"fma where", "graph g(a: f64[3, 1], b: f64[4], c: f64[3, 4]) -> f64 {\n"
     "  return sum(sum(where(c > 0.8, fma(a, b, c), a * c) * c, 1), 0);\n}", 3, POS},
    {"matmul batched", "graph g(a: f64[2, 3, 4], b: f64[4, 5], t: f64[2, 3, 5]) -> f64 {\n"
     "  let y = a @ b;\n  return sum(sum(sum(y * y + t * y, 2), 1), 0);\n}", 3, ANY},
    {"matmul batch broadcast", "graph g(a: f64[3, 4], b: f64[2, 1, 4, 5]) -> f64 {\n"
     "  let y = a @ b;\n  return sum(sum(sum(sum(y * y, 3), 2), 1), 0);\n}", 2, ANY},
    {"matmul vectors", "graph g(v: f64[4], m: f64[4, 3], w: f64[3], x: f64[2, 3, 4]) -> f64 {\n"
     "  return (v @ m) @ w + sum((m @ w) * v, 0) + sum(sum(x @ v, 1), 0) + sum(sum(sum((w @ trans(m)) * x, 2), 1), 0);\n}",
     4, ANY},
    {"sum mean max min", "graph g(x: f64[3, 4, 5]) -> f64 {\n"
     "  return sum(sum(max(x, 2) * mean(x, 2), 1), 0) + sum(sum(min(x, 0) * min(x, 0), 0), 0) + mean(mean(mean(x * x, 1), 1), 0);\n}",
     1, ANY},
    {"softmax", "graph g(x: f64[3, 5], t: f64[3, 5]) -> f64 {\n"
     "  return sum(sum(softmax(x, 1) * t + softmax(x, 0) * softmax(x, 0), 1), 0);\n}", 2, ANY},
    {"cumsum", "graph g(x: f64[3, 4], t: f64[3, 4]) -> f64 {\n"
     "  return sum(sum(cumsum(x, 1) * t + cumsum(x, 0) * cumsum(x, 0), 1), 0);\n}", 2, ANY},
    {"layer_norm", "graph g(x: f64[3, 5], w: f64[5], b: f64[5], eps: f64, t: f64[3, 5]) -> f64 {\n"
     "  let y = layer_norm(x, w, b, eps);\n  return sum(sum(y * t + y * y, 1), 0);\n}", 5, ANY},
    {"rms_norm", "graph g(x: f64[2, 3, 4], w: f64[4], eps: f64, t: f64[3, 4]) -> f64 {\n"
     "  let y = rms_norm(x, w, eps);\n  return sum(sum(sum(y * t + y * y, 2), 1), 0);\n}", 4, ANY},
    {"trans reshape index", "graph g(x: f64[2, 3, 4], t: f64[4, 6], u: f64[3]) -> f64 {\n"
     "  let a = reshape(trans(x, [2, 0, 1]), [4, 6]);\n  let b = trans(reshape(x, [6, 4]));\n"
     "  return sum(sum(a * t * b, 1), 0) + sum(sum(u[:, None] * u[None, :], 1), 0);\n}", 3, ANY},
    {"broadcast full", "graph g(x: f64[3], s: f64) -> f64 {\n"
     "  return sum(sum(broadcast(x, [2, 3]) * full([2, 3], s, f64), 1), 0) +\n"
     "    sum(sum(broadcast(x[:, None], [3, 2]) * s, 1), 0);\n}",
     2, ANY},
    {"concat split", "graph g(a: f64[2, 3], b: f64[2, 2]) -> f64 {\n"
     "  let c = concat([a, b], 1);\n  let (p, q) = split(c * c, [1, 4], 1);\n  let (u, v) = split(c, [4, 1], 1);\n"
     "  return sum(sum(p, 1), 0) * 2.0 + sum(sum(q * q, 1), 0) + sum(sum(u * u * u, 1), 0);\n}", 2, ANY},
    {"dropout", "graph g(x: f64[4, 5], t: f64[4, 5], q: f64, seed: i32) -> f64 {\n"
     "  return sum(sum(dropout(x, q * 0.4, seed) * t * x, 1), 0);\n}", 3, POS},
    {"cross_entropy", "graph g(x: f64[5, 4], lab: i64[5], t: f64[5, 4]) -> f64 {\n"
     "  return cross_entropy(x * t, lab) + cross_entropy(x * x, lab, -100) * 0.5;\n}", 1, ANY},
    {"rope (x, and the tables broadcast over the batch)", "graph g(x: f64[2, 3, 6], c: f64[3, 3], s: f64[3, 3], t: f64[2, 3, 6]) -> f64 {\n"
     "  let y = rope(x, c, s);\n  return sum(sum(sum(y * t + y * y * y, 2), 1), 0);\n}", 3, ANY},
    {"swiglu (up broadcast)", "graph g(a: f64[3, 4], u: f64[4], t: f64[3, 4]) -> f64 {\n"
     "  let y = swiglu(a, u);\n  return sum(sum(y * t + y * y, 1), 0);\n}", 2, ANY},
    {"attention (k and v broadcast over the batch, the scale)", "graph g(q: f64[2, 3, 4], k: f64[5, 4], v: f64[5, 3], sc: f64,\n"
     "        t: f64[2, 3, 3]) -> f64 {\n"
     "  let y = attention(q, k, v, scale = sc);\n  return sum(sum(sum(y * t + y * y, 2), 1), 0);\n}", 4, ANY},
    {"attention causal (Lq < Lk, bottom-right aligned)", "graph g(q: f64[2, 3, 4], k: f64[2, 5, 4], v: f64[2, 5, 3],\n"
     "        t: f64[2, 3, 3]) -> f64 {\n"
     "  let y = attention(q, k, v, causal = true, scale = 0.7);\n  return sum(sum(sum(y * t + y * y, 2), 1), 0);\n}", 3, ANY},
    {"attention causal (Lq > Lk: rows that see no key)", "graph g(q: f64[5, 4], k: f64[3, 4], v: f64[3, 2], t: f64[5, 2]) -> f64 {\n"
     "  let y = attention(q, k, v, causal = true);\n  return sum(sum(y * t + y * y, 1), 0);\n}", 3, ANY},
    {"attention gqa, causal with a window (dk, dv summed over each group)", "graph g(q: f64[2, 4, 5, 3], k: f64[2, 2, 6, 3],\n"
     "        v: f64[2, 2, 6, 2], t: f64[2, 4, 5, 2]) -> f64 {\n"
     "  let y = attention(q, k, v, causal = true, scale = 0.8, window = [2, -1], gqa = true);\n"
     "  return sum(sum(sum(sum(y * t + y * y, 3), 2), 1), 0);\n}", 3, ANY},
    {"attention gqa 4/1 (multi-query), not causal, Lq != Lk", "graph g(q: f64[4, 5, 3], k: f64[1, 6, 3], v: f64[1, 6, 2],\n"
     "        t: f64[4, 5, 2]) -> f64 {\n"
     "  let y = attention(q, k, v, scale = 0.6, gqa = true);\n"
     "  return sum(sum(sum(y * t + y * y, 2), 1), 0);\n}", 3, ANY},
    {"attention gqa 4/2 over a batch, causal, Lq > Lk (rows that see no key)",
     "graph g(q: f64[2, 4, 5, 3], k: f64[2, 2, 3, 3], v: f64[2, 2, 3, 2], t: f64[2, 4, 5, 2]) -> f64 {\n"
     "  let y = attention(q, k, v, causal = true, scale = 0.9, gqa = true);\n"
     "  return sum(sum(sum(sum(y * t + y * y, 3), 2), 1), 0);\n}", 3, ANY},
    {"attention gqa 4/2 and the scale's gradient (the dense rule: K and V repeated, summed back)",
     "graph g(q: f64[4, 3, 2], k: f64[2, 5, 2], v: f64[2, 5, 3], sc: f64, t: f64[4, 3, 3]) -> f64 {\n"
     "  let y = attention(q, k, v, causal = true, scale = sc, window = [1, -1], gqa = true);\n"
     "  return sum(sum(sum(y * t + y * y, 2), 1), 0);\n}", 4, ANY},
    {"attention symbolic lengths, a window", "graph g(q: f64[2, T, 3], k: f64[2, T, 3], v: f64[2, T, 2], t: f64[2, T, 2]) -> f64 {\n"
     "  let y = attention(q, k, v, causal = true, window = [1, 0]);\n"
     "  return sum(sum(sum(y * t + y * y, 2), 1), 0);\n}", 3, ANY},
    {"attention window both sides, not causal", "graph g(q: f64[6, 4], k: f64[5, 4], v: f64[5, 3], t: f64[6, 3]) -> f64 {\n"
     "  let y = attention(q, k, v, window = [1, 2]);\n  return sum(sum(y * t + y * y, 1), 0);\n}", 3, ANY},
    {"a Llama block's pieces", "graph g(x: f64[4, 6], w: f64[6], wg: f64[6, 5], wu: f64[6, 5], wo: f64[5, 7], c: f64[4, 3],\n"
     "        s: f64[4, 3], lab: i64[4]) -> f64 {\n"
     "  let h = rms_norm(x, w, 0.001);\n  let q = rope(h, c, s);\n"
     "  return cross_entropy(swiglu(q @ wg, q @ wu) @ wo, lab);\n}", 7, ANY},
    {"cast f64 f32 (exact on a grid)", "graph g(x: f64[4], w: f64[4]) -> f64 {\n"
     "  let y = x as f32;\n  let z = (w as f32) * y;\n  return sum((y * y + z) as f64, 0);\n}", 2, 0.3, 1.3, false, 0.0625, 1e-12, 0.0625},
    {"symbolic sizes", "graph g(x: f64[T, 3], w: f64[3, T]) -> f64 {\n"
     "  return sum(sum((x @ w) * (x @ w), 1), 0) + sum(mean(x, 0) * mean(x, 0), 0);\n}", 2, ANY},
    {"values used several times (an MLP)", "fn gelu(x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }\n"
     "graph g(x: f64[3, 4], w1: f64[4, 5], b1: f64[5], w2: f64[5, 2]) -> f64 {\n"
     "  let h = gelu(x @ w1 + b1);\n  let y = h @ w2;\n"
     "  return mean(mean(y * y, 1), 0);\n}", 4, ANY},
};

static void test_every_rule(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int b = check_case(&cases[i]);
        if (b) fprintf(stderr, "%s: %d elements differ\n", cases[i].name, b);
        bad += b;
    }
    assert_int_equal(bad, 0);
}

/* linear_cross_entropy (the LM head fused by passes/graph_lmce.c): the fused op's loss
 * rows, dx and dw against finite differences of the loss that the rewritten graph itself
 * computes, in f64, chunks of 2 rows over 5 (not a multiple), every third row ignored;
 * both head forms (w [D, V] and x @ trans(w)), losses scaled (a seed that reaches the op
 * as dy, not 1), x also read elsewhere (dx summed with another adjoint). The patterns the
 * pass must leave alone (the logits read elsewhere; dy computed from the loss) are
 * checked too: 0 rewrites, and the graph's gradients still right. Both orders: the op
 * reading the seed (the joint run's), and Liger's (the split's). */
static const struct {
    Case c;
    uint32_t want;
} lce_cases[] = {
    {{"lce x @ w, scaled", "graph g(x: f64[5, 4], w: f64[4, 6], lab: i64[5]) -> f64 {\n"
      "  return cross_entropy(x @ w, lab) * 1.7;\n}", 2, ANY}, 1},
    {{"lce x @ trans(w), x read elsewhere", "graph g(x: f64[5, 4], w: f64[6, 4], lab: i64[5]) -> f64 {\n"
      "  return cross_entropy(x @ trans(w), lab) * 0.6 + sum(sum(x * x, 1), 0);\n}", 2, ANY}, 1},
    {{"lce w only, T symbolic", "graph g(x: f64[T, 4], w: f64[4, 5], lab: i64[T]) -> f64 {\n"
      "  return 3.0 - cross_entropy(x @ w, lab);\n}", 2, ANY}, 1},
    {{"lce not: logits read elsewhere", "graph g(x: f64[5, 4], w: f64[4, 6], lab: i64[5]) -> f64 {\n"
      "  let z = x @ w;\n  return cross_entropy(z, lab) + sum(sum(z * z, 1), 0);\n}", 2, ANY}, 0},
    {{"lce not: dy from the loss", "graph g(x: f64[5, 4], w: f64[4, 6], lab: i64[5]) -> f64 {\n"
      "  let l = cross_entropy(x @ w, lab);\n  return l * l;\n}", 2, ANY}, 0},
};

static void test_linear_cross_entropy(void **state)
{
    (void)state;
    int bad = 0;
    lce_chunk = 2;
    for (int liger = 0; liger < 2; liger++)
        for (size_t i = 0; i < sizeof lce_cases / sizeof *lce_cases; i++) {
            lce_want = lce_cases[i].want;
            lce_liger = liger;
            int b = check_case(&lce_cases[i].c);
            if (b) fprintf(stderr, "%s%s: %d elements differ\n", lce_cases[i].c.name, liger ? " (Liger)" : "", b);
            bad += b;
        }
    lce_chunk = 0;
    assert_int_equal(bad, 0);
}

/* How many ops of kind k the graph has. */
static uint32_t count_ops(const IrGraph *g, IrGOpKind k)
{
    uint32_t n = 0;
    for (size_t i = 0; i < g->ops.len; i++) n += g->ops.data[i].kind == k;
    return n;
}

/* grad through attention is one attention_bwd op on the forward's saved output and
 * logsumexp (the forward op's second result, f64 [.., Lq] here), with grouped K and V
 * as they are: no softmax, no product, no value of [Lq, Lk] scores, no repeated K/V. A scale that needs a gradient keeps the dense rule. */
static void test_attention_backward_op(void **state)
{
    (void)state;
    static const Case flash = {"flash", "graph g(q: f64[4, 5, 3], k: f64[2, 6, 3], v: f64[2, 6, 2], t: f64[4, 5, 2]) -> f64 {\n"
                               "  let y = attention(q, k, v, causal = true, scale = 0.5, gqa = true);\n"
                               "  return sum(sum(sum(y * t, 2), 1), 0);\n}", 3, ANY};
    Run r = {0};
    IrGraph *g = build(&r, &flash);
    assert_int_equal(count_ops(g, IR_GOP_ATTENTION_BWD), 1);
    assert_int_equal(count_ops(g, IR_GOP_SOFTMAX) + count_ops(g, IR_GOP_MATMUL), 0);
    for (size_t v = 0; v < g->values.len; v++) {   /* no [2, 2, 6, 3] repeat, no [4, 5, 6] scores */
        const IrTensorType *t = &g->values.data[v].type;
        int64_t d1, d2;
        assert_true(t->rank < 4);
        assert_false(t->rank == 3 && ir_size_is_const(t->dims[1], &d1) && ir_size_is_const(t->dims[2], &d2) && d1 == 5 &&
                     d2 == 6);
    }
    const IrGOp *fw = NULL;
    for (size_t i = 0; i < g->ops.len; i++)
        if (g->ops.data[i].kind == IR_GOP_ATTENTION) fw = &g->ops.data[i];
    assert_non_null(fw);
    assert_int_equal(fw->nout, 2);
    const IrTensorType *lse = &g->values.data[fw->out[1]].type, *k = &g->values.data[fw->in[1]].type;
    int64_t d;
    assert_int_equal(lse->elem, IR_F64);
    assert_int_equal(lse->rank, 2);
    assert_true(ir_size_is_const(lse->dims[1], &d) && d == 5);
    assert_true(ir_size_is_const(k->dims[0], &d) && d == 2);   /* k un-repeated */
    run_free(&r);
    static const Case dense = {"dense", "graph g(q: f64[5, 3], k: f64[6, 3], v: f64[6, 2], sc: f64) -> f64 {\n"
                               "  return sum(sum(attention(q, k, v, scale = sc), 1), 0);\n}", 4, ANY};
    Run r2 = {0};
    g = build(&r2, &dense);
    assert_int_equal(count_ops(g, IR_GOP_ATTENTION_BWD), 0);
    assert_int_equal(count_ops(g, IR_GOP_SOFTMAX), 1);
    run_free(&r2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_rule),
        cmocka_unit_test(test_linear_cross_entropy),
        cmocka_unit_test(test_attention_backward_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
