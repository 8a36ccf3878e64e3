/* Reverse-mode differentiation over the graph IR: the expansion of grad(y, [x1, ...]).
 *
 * grad is expanded where it stands, while the graph is built: the forward ops are in
 * the graph already, and the backward is appended after them, so the statements after
 * grad (an optimizer step) read the gradients as ordinary values, and every later stage
 * (verifier, interpreter, fusion, lowering) sees one graph with no op of its own.
 *
 *   1. Activity: a value takes part when it is a float value that depends on some x
 *      and that y depends on, through ops that carry a gradient (rules below; r_none
 *      marks those that carry none: floor, ceil, and every op whose results are not
 *      floats). Everything is checked before anything is appended.
 *   2. The ops with a result that takes part, last to first, each give their operands'
 *      adjoints from their results' (one rule per op kind, the table at the end). A
 *      value used several times gets the sum of what each use gives; an operand that an
 *      element-wise op or @ broadcast gets the adjoint summed over the broadcast axes.
 *   3. Precision, as automatic mixed precision does it: the backward computes in f64 for
 *      f64 values and in f32 for every other float type; a rule reads a 16-bit forward
 *      value cast up (once per value); each gradient is cast to its x's type at the end.
 *
 *   %0 = mul %x, %w : f32[T, 4]          %0 = mul %x, %w : f32[T, 4]
 *   %l = sum 0 (sum 1 %0) : f32   ==>    %l = ...
 *   grad(%l, [%w])                       %2 = const 1.0 : f32             (the seed)
 *                                        %6 = broadcast (reshape ...) : f32[T, 4]
 *                                        %7 = mul %6, %x : f32[T, 4]      (mul's rule)
 *                                        %dw = sum 0 %7 : f32[4]          (w was broadcast)
 */
#include "graph_grad.h"

#include <math.h>
#include <string.h>

#define LN2 0.69314718055994530942          /* log(2), for exp2 and log2 */
#define TWO_OVER_SQRT_PI 1.12837916709551257390   /* erf'(x) = 2/sqrt(pi) * exp(-x^2) */

typedef struct Grad {
    IrGraph *g;
    Arena *a;
    Loc loc;                 /* grad's: every op of the backward gets it */
    uint32_t nv;             /* the values before the backward */
    bool *active;            /* per forward value: it takes part (step 1) */
    uint32_t *adj;           /* per forward value: its adjoint so far, or IR_GNONE */
    uint32_t *up;            /* per forward value: it in the backward's type, or IR_GNONE */
} Grad;

typedef void (*GradRule)(Grad *G, const IrGOp *op);

/* ---- building the backward ------------------------------------------------------------ */

static IrTensorType ty(const Grad *G, uint32_t v) { return G->g->values.data[v].type; }
static IrElem bw_elem(IrElem e) { return e == IR_F64 ? IR_F64 : IR_F32; }
static IrGOp *last_op(Grad *G) { return &G->g->ops.data[G->g->ops.len - 1]; }

static uint32_t emit(Grad *G, IrGOpKind k, const uint32_t *in, uint32_t nin, IrTensorType t)
{
    return ir_graph_result(G->g, ir_graph_op(G->g, k, G->loc, in, nin, &t, 1), 0);
}

static uint32_t emit_axis(Grad *G, IrGOpKind k, uint32_t x, uint32_t axis, IrTensorType t)
{
    uint32_t r = emit(G, k, &x, 1, t);
    last_op(G)->attr.axis = axis;
    return r;
}

/* A float constant of element type e. */
static uint32_t cst(Grad *G, IrElem e, double v)
{
    uint32_t r = emit(G, IR_GOP_CONST, NULL, 0, (IrTensorType){e, 0, NULL});
    last_op(G)->attr.c.f = v;
    return r;
}

/* A constant of like's element type. */
static uint32_t kc(Grad *G, uint32_t like, double v) { return cst(G, ty(G, like).elem, v); }

static uint32_t cast(Grad *G, uint32_t v, IrElem e)
{
    IrTensorType t = ty(G, v);
    if (t.elem == e) return v;
    t.elem = e;
    return emit(G, IR_GOP_CAST, &v, 1, t);
}

/* A forward value as the backward reads it: cast up once, where first needed. */
static uint32_t fwd(Grad *G, uint32_t v)
{
    if (v >= G->nv) return v;
    if (G->up[v] == IR_GNONE) G->up[v] = cast(G, v, bw_elem(ty(G, v).elem));
    return G->up[v];
}

static uint32_t xin(Grad *G, const IrGOp *op, uint32_t i) { return fwd(G, op->in[i]); }
static uint32_t yout(Grad *G, const IrGOp *op) { return fwd(G, op->out[0]); }
static uint32_t dy(const Grad *G, const IrGOp *op) { return G->adj[op->out[0]]; }

static uint32_t un(Grad *G, IrGOpKind k, uint32_t x) { return emit(G, k, &x, 1, ty(G, x)); }

/* An element-wise op on a and b (broadcast) with a result of element type e. */
static uint32_t bin_as(Grad *G, IrGOpKind k, uint32_t a, uint32_t b, IrElem e)
{
    IrTensorType ta = ty(G, a), tb = ty(G, b), t = {e, 0, NULL};
    ir_broadcast_shapes(G->a, ta.rank, ta.dims, tb.rank, tb.dims, &t.rank, &t.dims);
    uint32_t in[2] = {a, b};
    return emit(G, k, in, 2, t);
}

static uint32_t bin(Grad *G, IrGOpKind k, uint32_t a, uint32_t b) { return bin_as(G, k, a, b, ty(G, a).elem); }
static uint32_t add(Grad *G, uint32_t a, uint32_t b) { return bin(G, IR_GOP_ADD, a, b); }
static uint32_t sub(Grad *G, uint32_t a, uint32_t b) { return bin(G, IR_GOP_SUB, a, b); }
static uint32_t mul(Grad *G, uint32_t a, uint32_t b) { return bin(G, IR_GOP_MUL, a, b); }
static uint32_t dvd(Grad *G, uint32_t a, uint32_t b) { return bin(G, IR_GOP_DIV, a, b); }
static uint32_t neg(Grad *G, uint32_t a) { return un(G, IR_GOP_NEG, a); }

static uint32_t cmp(Grad *G, IrGCmp c, uint32_t a, uint32_t b)
{
    uint32_t r = bin_as(G, IR_GOP_CMP, a, b, IR_I1);
    last_op(G)->attr.cmp = c;
    return r;
}

/* where(c, a, b), all three broadcast. */
static uint32_t sel(Grad *G, uint32_t c, uint32_t a, uint32_t b)
{
    IrTensorType tc = ty(G, c), ta = ty(G, a), tb = ty(G, b), t = {ta.elem, 0, NULL};
    uint32_t n1, in[3] = {c, a, b};
    const IrSize *d1;
    ir_broadcast_shapes(G->a, ta.rank, ta.dims, tb.rank, tb.dims, &n1, &d1);
    ir_broadcast_shapes(G->a, tc.rank, tc.dims, n1, d1, &t.rank, &t.dims);
    return emit(G, IR_GOP_WHERE, in, 3, t);
}

static uint32_t reshape(Grad *G, uint32_t x, uint32_t rank, const IrSize *dims)
{
    return emit(G, IR_GOP_RESHAPE, &x, 1, (IrTensorType){ty(G, x).elem, rank, dims});
}

/* x broadcast to the shape of `to` (x's element type). */
static uint32_t bcast_to(Grad *G, uint32_t x, const IrTensorType *to)
{
    return emit(G, IR_GOP_BROADCAST, &x, 1, (IrTensorType){ty(G, x).elem, to->rank, to->dims});
}

/* A reduction of x along ax (the axis removed). */
static uint32_t reduce(Grad *G, IrGOpKind k, uint32_t x, uint32_t ax)
{
    IrTensorType t = ty(G, x);
    IrSize *d = arena_alloc(G->a, (t.rank + 1) * sizeof *d);
    for (uint32_t i = 0, n = 0; i < t.rank; i++)
        if (i != ax) d[n++] = t.dims[i];
    return emit_axis(G, k, x, ax, (IrTensorType){t.elem, t.rank - 1, d});
}

static uint32_t insert_one(Grad *G, uint32_t v, uint32_t at);

/* x, a reduction's result, with its axis ax put back as a size-1 axis. */
static uint32_t keep(Grad *G, uint32_t x, uint32_t ax) { return insert_one(G, x, ax); }

static uint32_t reduce_keep(Grad *G, IrGOpKind k, uint32_t x, uint32_t ax) { return keep(G, reduce(G, k, x, ax), ax); }

/* x with the axes permuted (result axis i is axis perm[i] of x). */
static uint32_t trans(Grad *G, uint32_t x, const uint32_t *perm)
{
    IrTensorType t = ty(G, x);
    IrSize *d = arena_alloc(G->a, (t.rank + 1) * sizeof *d);
    for (uint32_t i = 0; i < t.rank; i++) d[i] = t.dims[perm[i]];
    uint32_t r = emit(G, IR_GOP_TRANS, &x, 1, (IrTensorType){t.elem, t.rank, d});
    last_op(G)->attr.perm = perm;
    return r;
}

static uint32_t trans_last(Grad *G, uint32_t x)
{
    uint32_t rank = ty(G, x).rank, *p = arena_alloc(G->a, rank * sizeof *p);
    for (uint32_t i = 0; i < rank; i++) p[i] = i;
    p[rank - 1] = rank - 2;
    p[rank - 2] = rank - 1;
    return trans(G, x, p);
}

/* l [..., M, K] @ r [..., K, N], both of rank 2 or more, batch axes broadcast. */
static uint32_t matmul(Grad *G, uint32_t l, uint32_t r)
{
    IrTensorType tl = ty(G, l), tr = ty(G, r);
    uint32_t nb, in[2] = {l, r};
    const IrSize *b;
    ir_broadcast_shapes(G->a, tl.rank - 2, tl.dims, tr.rank - 2, tr.dims, &nb, &b);
    IrSize *d = arena_alloc(G->a, (nb + 2) * sizeof *d);
    if (nb) memcpy(d, b, nb * sizeof *d);
    d[nb] = tl.dims[tl.rank - 2];
    d[nb + 1] = tr.dims[tr.rank - 1];
    return emit(G, IR_GOP_MATMUL, in, 2, (IrTensorType){tl.elem, nb + 2, d});
}

static bool is_one(IrSize s)
{
    int64_t c;
    return ir_size_is_const(s, &c) && c == 1;
}

/* d summed over the axes that broadcasting added to a value of shape `to`: the leading
 * axes it lacks and its size-1 axes that became larger. */
static uint32_t unbroadcast(Grad *G, uint32_t d, const IrTensorType *to)
{
    IrTensorType t = ty(G, d);
    uint32_t lead = t.rank - to->rank;
    bool summed = false;
    for (uint32_t i = t.rank; i-- > 0;)
        if (i < lead || (is_one(to->dims[i - lead]) && !is_one(t.dims[i]))) {
            d = reduce(G, IR_GOP_SUM, d, i);
            summed = true;
        }
    return summed && ty(G, d).rank != to->rank ? reshape(G, d, to->rank, to->dims) : d;
}

/* The cast of backward value v to element type e that the backward has already, or
 * IR_GNONE. */
static uint32_t cast_made(const Grad *G, uint32_t v, IrElem e)
{
    for (uint32_t o = G->g->ops.len; o-- > 0;) {
        const IrGOp *op = &G->g->ops.data[o];
        if (op->nout && op->out[0] < G->nv) break;   /* the forward's ops: no more backward */
        if (op->kind == IR_GOP_CAST && op->in[0] == v && ty(G, op->out[0]).elem == e) return op->out[0];
    }
    return IR_GNONE;
}

/* Adds d (of v's shape, or one v broadcast to) to v's adjoint. The adjoint of a 16-bit
 * value held while its other uses give theirs (a residual stream's: the last norm's dx,
 * held across the MLP's backward) is read back from its 16-bit cast where the backward
 * has one already (a GEMM's operand), as PyTorch holds the gradient of a bf16 tensor in
 * bf16: fusion then keeps no f32 copy of it alive between the two kernels. */
static void give_to(Grad *G, uint32_t v, uint32_t d)
{
    IrTensorType t = ty(G, v);
    d = cast(G, unbroadcast(G, d, &t), bw_elem(t.elem));
    uint32_t held = G->adj[v], r = IR_GNONE;
    if (held != IR_GNONE && (t.elem == IR_BF16 || t.elem == IR_F16)) r = cast_made(G, held, t.elem);
    G->adj[v] = held == IR_GNONE ? d : r != IR_GNONE ? add(G, d, cast(G, r, bw_elem(t.elem))) : add(G, held, d);
}

/* Whether operand i of op takes part (a rule computes only what is wanted). */
static bool wants(const Grad *G, const IrGOp *op, uint32_t i) { return G->active[op->in[i]]; }

static void give(Grad *G, const IrGOp *op, uint32_t i, uint32_t d)
{
    if (wants(G, op, i)) give_to(G, op->in[i], d);
}

/* ---- the rules ------------------------------------------------------------------------- */

static void r_none(Grad *G, const IrGOp *op) { (void)G, (void)op; }

/* y = f(x): dx = dy * f'(x), from x or y. */
static uint32_t d_unary(Grad *G, const IrGOp *op, uint32_t d)
{
    switch (op->kind) {
    case IR_GOP_NEG: return neg(G, d);
    case IR_GOP_EXP: return mul(G, d, yout(G, op));
    case IR_GOP_EXP2: {
        uint32_t t = mul(G, d, yout(G, op));
        return mul(G, t, kc(G, d, LN2));
    }
    case IR_GOP_LOG: return dvd(G, d, xin(G, op, 0));
    case IR_GOP_LOG2: {
        uint32_t x = xin(G, op, 0);
        return dvd(G, d, mul(G, x, kc(G, d, LN2)));
    }
    case IR_GOP_SQRT: {
        uint32_t t = mul(G, d, kc(G, d, 0.5));
        return dvd(G, t, yout(G, op));
    }
    case IR_GOP_RSQRT: {
        uint32_t k = kc(G, d, -0.5), y = yout(G, op), x = xin(G, op, 0);
        return mul(G, d, mul(G, k, dvd(G, y, x)));
    }
    case IR_GOP_SIN: return mul(G, d, un(G, IR_GOP_COS, xin(G, op, 0)));
    case IR_GOP_COS: return neg(G, mul(G, d, un(G, IR_GOP_SIN, xin(G, op, 0))));
    case IR_GOP_TANH: {
        uint32_t one = kc(G, d, 1), y = yout(G, op);
        return mul(G, d, sub(G, one, mul(G, y, y)));
    }
    case IR_GOP_SIGMOID: {
        uint32_t y = yout(G, op), one = kc(G, d, 1);
        return mul(G, d, mul(G, y, sub(G, one, y)));
    }
    case IR_GOP_ERF: {
        uint32_t x = xin(G, op, 0);
        uint32_t k = kc(G, d, TWO_OVER_SQRT_PI), e = un(G, IR_GOP_EXP, neg(G, mul(G, x, x)));
        return mul(G, d, mul(G, k, e));
    }
    default: { /* abs: the sign of x (1 at 0) */
        uint32_t x = xin(G, op, 0), neg0 = cmp(G, IR_GCMP_LT, x, kc(G, d, 0));
        return sel(G, neg0, neg(G, d), d);
    }
    }
}

static void r_unary(Grad *G, const IrGOp *op) { give(G, op, 0, d_unary(G, op, dy(G, op))); }

static void r_add(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    give(G, op, 0, d);
    if (wants(G, op, 1)) give(G, op, 1, op->kind == IR_GOP_SUB ? neg(G, d) : d);
}

static void r_mul(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    if (wants(G, op, 0)) give(G, op, 0, mul(G, d, xin(G, op, 1)));
    if (wants(G, op, 1)) give(G, op, 1, mul(G, d, xin(G, op, 0)));
}

static void r_div(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    if (wants(G, op, 0)) give(G, op, 0, dvd(G, d, xin(G, op, 1)));
    if (wants(G, op, 1)) {
        uint32_t t = mul(G, d, yout(G, op));
        give(G, op, 1, neg(G, dvd(G, t, xin(G, op, 1))));
    }
}

/* minimum, maximum: the adjoint goes to the operand chosen; a tie goes to the first. */
static void r_minmax(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op), z = kc(G, d, 0);
    uint32_t first = cmp(G, op->kind == IR_GOP_MAXIMUM ? IR_GCMP_GE : IR_GCMP_LE, op->in[0], op->in[1]);
    if (wants(G, op, 0)) give(G, op, 0, sel(G, first, d, z));
    if (wants(G, op, 1)) give(G, op, 1, sel(G, first, z, d));
}

/* y = a^b: da = dy * b * a^(b-1), db = dy * y * log(a). */
static void r_pow(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op), a = xin(G, op, 0), b = xin(G, op, 1);
    if (wants(G, op, 0)) give(G, op, 0, mul(G, d, mul(G, b, bin(G, IR_GOP_POW, a, sub(G, b, kc(G, b, 1))))));
    if (wants(G, op, 1)) {
        uint32_t y = yout(G, op);
        give(G, op, 1, mul(G, d, mul(G, y, un(G, IR_GOP_LOG, a))));
    }
}

static void r_fma(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    if (wants(G, op, 0)) give(G, op, 0, mul(G, d, xin(G, op, 1)));
    if (wants(G, op, 1)) give(G, op, 1, mul(G, d, xin(G, op, 0)));
    give(G, op, 2, d);
}

static void r_where(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op), z = kc(G, d, 0);
    if (wants(G, op, 1)) give(G, op, 1, sel(G, op->in[0], d, z));
    if (wants(G, op, 2)) give(G, op, 2, sel(G, op->in[0], z, d));
}

/* The cast's adjoint goes back as it is; give_to casts it to the source's backward type. */
static void r_pass(Grad *G, const IrGOp *op) { give(G, op, 0, dy(G, op)); }

/* v with a size-1 axis inserted at `at`: [..., n] as [..., 1, n] (at = rank - 1) or
 * [..., n, 1] (at = rank); a reduction's result with its axis put back. */
static uint32_t insert_one(Grad *G, uint32_t v, uint32_t at)
{
    IrTensorType t = ty(G, v);
    IrSize *d = arena_alloc(G->a, (t.rank + 2) * sizeof *d);
    for (uint32_t i = 0; i < t.rank; i++) d[i < at ? i : i + 1] = t.dims[i];
    d[at] = ir_size_const(1);
    return reshape(G, v, t.rank + 1, d);
}

/* The shape of op's operand i as a matrix: a vector a [K] is [1, K], a vector b [K] is [K, 1]. */
static IrTensorType matrix_type(const Grad *G, const IrGOp *op, uint32_t i)
{
    IrTensorType t = ty(G, op->in[i]);
    if (t.rank != 1) return t;
    IrSize *d = arena_alloc(G->a, 2 * sizeof *d);
    d[i] = ir_size_const(1);
    d[1 - i] = t.dims[0];
    return (IrTensorType){t.elem, 2, d};
}

/* Operand i as the backward reads it, as a matrix. */
static uint32_t matrix_operand(Grad *G, const IrGOp *op, uint32_t i)
{
    uint32_t v = xin(G, op, i);
    return ty(G, v).rank == 1 ? insert_one(G, v, i) : v;
}

/* The type of a product's backward products: its operands' for two bf16 or two f16
 * operands, else IR_F32 (none). On f16 operands a loss scaled by GradScaler's 65536 can
 * overflow in a product where PyTorch's does too (inf, the step skipped):
 * tests/examples/train_step.py's reference rounds as autocast does. */
static IrElem half_of(const Grad *G, const IrGOp *op)
{
    IrElem a = ty(G, op->in[0]).elem, b = ty(G, op->in[1]).elem;
    return a == b && (a == IR_BF16 || a == IR_F16) ? a : IR_F32;
}

/* y = a @ b: da = dy @ b^T, db = a^T @ dy, each summed over the batch axes it was
 * broadcast along; a vector operand is a one-row (a) or one-column (b) matrix, and dy
 * gets the axis the product dropped back. A product of bf16 operands runs its backward
 * products on bf16 operands, as automatic mixed precision does (dy rounded to bf16, the
 * operands read as they are, f32 accumulation, the result rounded, then cast up): the
 * dX and dW GEMMs on tensor cores, the forward values they read kept at half the bytes
 * (an f32 product of a Llama block's sizes ran on the FMA units, at a tenth of the
 * speed). */
static void r_matmul(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    IrTensorType t0 = ty(G, op->in[0]), t1 = ty(G, op->in[1]);
    if (t0.rank == 1) d = insert_one(G, d, ty(G, d).rank - (t1.rank == 1 ? 0 : 1));
    if (t1.rank == 1) d = insert_one(G, d, ty(G, d).rank);
    IrElem h = half_of(G, op), up = bw_elem(ty(G, d).elem);
    bool half = h != IR_F32;
    if (half) d = cast(G, d, h);
    uint32_t a = half ? (t0.rank == 1 ? insert_one(G, op->in[0], 0) : op->in[0]) : 0;
    uint32_t b = half ? (t1.rank == 1 ? insert_one(G, op->in[1], 1) : op->in[1]) : 0;
    if (wants(G, op, 0)) {
        IrTensorType ta = matrix_type(G, op, 0);
        uint32_t p = half ? cast(G, matmul(G, d, trans_last(G, b)), up) : matmul(G, d, trans_last(G, matrix_operand(G, op, 1)));
        uint32_t da = unbroadcast(G, p, &ta);
        give(G, op, 0, t0.rank == 1 ? reshape(G, da, 1, t0.dims) : da);
    }
    if (wants(G, op, 1)) {
        IrTensorType tb = matrix_type(G, op, 1);
        uint32_t p = half ? cast(G, matmul(G, trans_last(G, a), d), up) : matmul(G, trans_last(G, matrix_operand(G, op, 0)), d);
        uint32_t db = unbroadcast(G, p, &tb);
        give(G, op, 1, t1.rank == 1 ? reshape(G, db, 1, t1.dims) : db);
    }
}

/* sum, mean: the adjoint spread over the axis (divided by its size for mean). */
static void r_sum(Grad *G, const IrGOp *op)
{
    IrTensorType tx = ty(G, op->in[0]);
    uint32_t ax = (uint32_t)op->attr.axis, d = dy(G, op);
    if (op->kind == IR_GOP_MEAN) {
        uint32_t n = emit(G, IR_GOP_SIZE, NULL, 0, (IrTensorType){IR_I64, 0, NULL});
        last_op(G)->attr.size = tx.dims[ax];
        d = dvd(G, d, cast(G, n, ty(G, d).elem));
    }
    give(G, op, 0, bcast_to(G, keep(G, d, ax), &tx));
}

/* max, min: the adjoint split evenly among the elements equal to the extreme. */
static void r_extreme(Grad *G, const IrGOp *op)
{
    uint32_t ax = (uint32_t)op->attr.axis, d = dy(G, op);
    uint32_t hit = cmp(G, IR_GCMP_EQ, op->in[0], keep(G, op->out[0], ax));
    uint32_t mask = cast(G, hit, ty(G, d).elem), count = reduce(G, IR_GOP_SUM, mask, ax);
    give(G, op, 0, mul(G, mask, keep(G, dvd(G, d, count), ax)));
}

/* y = softmax(x): dx = y * (dy - sum(dy * y)) along the axis. */
static void r_softmax(Grad *G, const IrGOp *op)
{
    uint32_t ax = (uint32_t)op->attr.axis, y = yout(G, op), t = mul(G, dy(G, op), y);
    give(G, op, 0, sub(G, t, mul(G, y, reduce_keep(G, IR_GOP_SUM, t, ax))));
}

/* y = cumsum(x): dx is dy summed from the end: sum(dy) - cumsum(dy) + dy. */
static void r_cumsum(Grad *G, const IrGOp *op)
{
    uint32_t ax = (uint32_t)op->attr.axis, d = dy(G, op);
    uint32_t c = emit_axis(G, IR_GOP_CUMSUM, d, ax, ty(G, d));
    give(G, op, 0, add(G, sub(G, reduce_keep(G, IR_GOP_SUM, d, ax), c), d));
}

/* layer_norm and rms_norm over the last axis, recomputed from x: xhat = (x - mean) *
 * rstd (rms_norm: no mean), rstd = rsqrt(var + eps), g = dy * w; then dx = rstd * (g -
 * mean(g) - xhat * mean(g * xhat)) (rms_norm: no mean(g)), dw = dy * xhat, db = dy and
 * deps = -rstd^2 / 2 * g * xhat, each summed over the axes w, b and eps lack. */
static void r_norm(Grad *G, const IrGOp *op)
{
    bool ln = op->kind == IR_GOP_LAYER_NORM;
    uint32_t x = xin(G, op, 0), d = dy(G, op), last = ty(G, x).rank - 1, ie = ln ? 3 : 2;
    uint32_t eps = cast(G, xin(G, op, ie), ty(G, x).elem);
    uint32_t mu = ln ? reduce_keep(G, IR_GOP_MEAN, x, last) : IR_GNONE, xc = ln ? sub(G, x, mu) : x;
    uint32_t rstd = un(G, IR_GOP_RSQRT, add(G, reduce_keep(G, IR_GOP_MEAN, mul(G, xc, xc), last), eps));
    /* xhat from x by ops of its own (its own cast up, its own centring), not from the
     * statistics' values of x's shape: the kernel of the statistics then writes only the
     * per-row mean and rstd, and each consumer recomputes xhat from x in its own rows or
     * column tiles instead of reading an f32 [T, D] xhat (fusion puts no op in two
     * kernels, so a shared cast would be written once in f32 and read back). */
    uint32_t x2 = cast(G, op->in[0], ty(G, x).elem), xc2 = ln ? sub(G, x2, mu) : x2;
    uint32_t xhat = mul(G, xc2, rstd), g = mul(G, d, xin(G, op, 1)), gx = mul(G, g, xhat);
    if (wants(G, op, 0)) {
        uint32_t inner = mul(G, xhat, reduce_keep(G, IR_GOP_MEAN, gx, last));
        if (ln) inner = add(G, inner, reduce_keep(G, IR_GOP_MEAN, g, last));
        give(G, op, 0, mul(G, rstd, sub(G, g, inner)));
    }
    if (wants(G, op, 1)) give(G, op, 1, mul(G, d, xhat));
    if (ln) give(G, op, 2, d);
    if (wants(G, op, ie)) {
        uint32_t t = mul(G, gx, mul(G, rstd, rstd));
        give(G, op, ie, mul(G, t, kc(G, d, -0.5)));
    }
}

static void r_trans(Grad *G, const IrGOp *op)
{
    uint32_t rank = ty(G, op->in[0]).rank, *inv = arena_alloc(G->a, (rank + 1) * sizeof *inv);
    for (uint32_t i = 0; i < rank; i++) inv[op->attr.perm[i]] = i;
    give(G, op, 0, trans(G, dy(G, op), inv));
}

static void r_reshape(Grad *G, const IrGOp *op)
{
    IrTensorType t = ty(G, op->in[0]);
    give(G, op, 0, reshape(G, dy(G, op), t.rank, t.dims));
}

/* concat: the adjoint split into the operands' pieces. */
static void r_concat(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    IrTensorType *pieces = arena_alloc(G->a, op->nin * sizeof *pieces);
    for (uint32_t i = 0; i < op->nin; i++) pieces[i] = ty(G, op->in[i]), pieces[i].elem = ty(G, d).elem;
    uint32_t s = ir_graph_op(G->g, IR_GOP_SPLIT, G->loc, &d, 1, pieces, op->nin);
    G->g->ops.data[s].attr.axis = op->attr.axis;
    for (uint32_t i = 0; i < op->nin; i++) give(G, op, i, ir_graph_result(G->g, s, i));
}

/* split: the results' adjoints joined (zeros for a piece y does not use). */
static void r_split(Grad *G, const IrGOp *op)
{
    IrElem e = bw_elem(ty(G, op->in[0]).elem);
    uint32_t *in = arena_alloc(G->a, op->nout * sizeof *in);
    for (uint32_t i = 0; i < op->nout; i++) {
        IrTensorType t = ty(G, op->out[i]);
        uint32_t z = G->adj[op->out[i]] == IR_GNONE ? cst(G, e, 0) : IR_GNONE;
        in[i] = z == IR_GNONE ? G->adj[op->out[i]] : emit(G, IR_GOP_FULL, &z, 1, (IrTensorType){e, t.rank, t.dims});
    }
    IrTensorType t = ty(G, op->in[0]);
    uint32_t r = emit(G, IR_GOP_CONCAT, in, op->nout, (IrTensorType){e, t.rank, t.dims});
    last_op(G)->attr.axis = op->attr.axis;
    give(G, op, 0, r);
}

/* dropout: the same elements dropped (the mask comes again from the seed, never stored)
 * and the same scale; dp = dy * y / (1 - p). */
static void r_dropout(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    if (wants(G, op, 0)) {
        uint32_t in[3] = {d, op->in[1], op->in[2]};
        give(G, op, 0, emit(G, IR_GOP_DROPOUT, in, 3, ty(G, d)));
    }
    if (wants(G, op, 1)) {
        uint32_t p = cast(G, xin(G, op, 1), ty(G, d).elem);
        uint32_t y = yout(G, op), one = kc(G, d, 1);
        give(G, op, 1, mul(G, d, dvd(G, y, sub(G, one, p))));
    }
}

/* cross_entropy_rows(x [N, V], labels, ignore): dx = (softmax(x) - onehot(label)) * dy,
 * zero on the ignored rows, as one op (cross_entropy_grad: a kernel of row blocks that
 * recomputes each row's logsumexp over vocabulary blocks, never a softmax or a one-hot
 * in memory). It reads the logits as they are (a 16-bit x is not cast up in memory);
 * the labels carry no gradient. */
static void r_cross_entropy(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op), in[4] = {op->in[0], op->in[1], op->in[2], d};
    IrTensorType t = ty(G, op->in[0]);
    t.elem = ty(G, d).elem;
    give(G, op, 0, emit(G, IR_GOP_CROSS_ENTROPY_GRAD, in, 4, t));
}

/* The halves [..., :D/2] and [..., D/2:] of v's last axis. */
static void halves(Grad *G, uint32_t v, uint32_t *lo, uint32_t *hi)
{
    IrTensorType t = ty(G, v), p[2];
    IrSize *d = arena_alloc(G->a, t.rank * sizeof *d);
    int64_t n = 0;
    ir_size_is_const(t.dims[t.rank - 1], &n);
    memcpy(d, t.dims, t.rank * sizeof *d);
    d[t.rank - 1] = ir_size_const(n / 2);
    p[0] = p[1] = (IrTensorType){t.elem, t.rank, d};
    uint32_t s = ir_graph_op(G->g, IR_GOP_SPLIT, G->loc, &v, 1, p, 2);
    G->g->ops.data[s].attr.axis = t.rank - 1;
    *lo = ir_graph_result(G->g, s, 0);
    *hi = ir_graph_result(G->g, s, 1);
}

/* y = rope(x, c, s): a rotation of each pair (x1, x2) = (x[i], x[i + D/2]) by the angle
 * whose cosine and sine are c[i] and s[i], so dx is dy rotated back, rope(dy, c, -s);
 * dc = dy1 x1 + dy2 x2 and ds = dy2 x1 - dy1 x2, summed over the axes c and s were
 * broadcast along. */
static void r_rope(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op);
    if (wants(G, op, 0)) {
        uint32_t c = xin(G, op, 1), s = neg(G, xin(G, op, 2)), in[3] = {d, c, s};
        give(G, op, 0, emit(G, IR_GOP_ROPE, in, 3, ty(G, d)));
    }
    if (!wants(G, op, 1) && !wants(G, op, 2)) return;
    uint32_t x1, x2, d1, d2;
    halves(G, xin(G, op, 0), &x1, &x2);
    halves(G, d, &d1, &d2);
    if (wants(G, op, 1)) {
        uint32_t a = mul(G, d1, x1);
        give(G, op, 1, add(G, a, mul(G, d2, x2)));
    }
    if (wants(G, op, 2)) {
        uint32_t a = mul(G, d2, x1);
        give(G, op, 2, sub(G, a, mul(G, d1, x2)));
    }
}

/* y = swiglu(g, u) = g sigmoid(g) u: dg = dy u s (1 + g (1 - s)), du = dy g s with s =
 * sigmoid(g); element-wise ops on the same operands, so fusion makes both gradients in
 * one kernel. */
static void r_swiglu(Grad *G, const IrGOp *op)
{
    uint32_t d = dy(G, op), g = xin(G, op, 0), u = xin(G, op, 1), sg = un(G, IR_GOP_SIGMOID, g);
    if (wants(G, op, 0)) {
        uint32_t one = kc(G, d, 1), slope = add(G, one, mul(G, g, sub(G, one, sg)));
        uint32_t du = mul(G, d, u);
        give(G, op, 0, mul(G, du, mul(G, sg, slope)));
    }
    if (wants(G, op, 1)) give(G, op, 1, mul(G, d, mul(G, g, sg)));
}

/* 0, 1, ..., n - 1 as a [n, 1] (ax 0) or [1, n] (ax 1) tensor of element type e: a
 * cumsum of ones (exact in f32 up to 2^24). */
static uint32_t iota(Grad *G, IrElem e, IrSize n, uint32_t ax)
{
    IrSize *d = arena_alloc(G->a, 2 * sizeof *d);
    d[ax] = n;
    d[1 - ax] = ir_size_const(1);
    uint32_t one = cst(G, e, 1.0), f = emit(G, IR_GOP_FULL, &one, 1, (IrTensorType){e, 2, d});
    uint32_t c = emit_axis(G, IR_GOP_CUMSUM, f, ax, ty(G, f));
    return sub(G, c, kc(G, f, 1));
}

/* A size as a scalar of element type e. */
static uint32_t size_as(Grad *G, IrSize s, IrElem e)
{
    uint32_t n = emit(G, IR_GOP_SIZE, NULL, 0, (IrTensorType){IR_I64, 0, NULL});
    last_op(G)->attr.size = s;
    return cast(G, n, e);
}

static uint32_t lor(Grad *G, uint32_t a, uint32_t b) { return bin_as(G, IR_GOP_LOR, a, b, IR_I1); }

/* Which keys j each query i of an attention op sees, [Lq, Lk] (i1): with d = i + Lk - Lq
 * (the diagonal, bottom-right aligned), j <= d when causal, and with a window (operands
 * 5 and 6, -1 unbounded) d - left <= j <= d + right. */
static uint32_t attn_visible(Grad *G, const IrGOp *op, IrElem e)
{
    IrTensorType tq = ty(G, op->in[0]), tk = ty(G, op->in[1]);
    IrSize Lq = tq.dims[tq.rank - 2], Lk = tk.dims[tk.rank - 2];
    uint32_t i = iota(G, e, Lq, 0), j = iota(G, e, Lk, 1);
    uint32_t lk = size_as(G, Lk, e), lq = size_as(G, Lq, e);
    uint32_t diag = add(G, i, sub(G, lk, lq)), zero = cst(G, e, 0);
    uint32_t nc = un(G, IR_GOP_NOT, op->in[3]), vis = lor(G, nc, cmp(G, IR_GCMP_LE, j, diag));
    if (op->nin < 7) return vis;
    uint32_t wl = cast(G, op->in[5], e), wr = cast(G, op->in[6], e);
    uint32_t wl0 = cmp(G, IR_GCMP_LT, wl, zero), lo = lor(G, wl0, cmp(G, IR_GCMP_GE, j, sub(G, diag, wl)));
    uint32_t wr0 = cmp(G, IR_GCMP_LT, wr, zero), hi = lor(G, wr0, cmp(G, IR_GCMP_LE, j, add(G, diag, wr)));
    return bin_as(G, IR_GOP_LAND, vis, bin_as(G, IR_GOP_LAND, lo, hi, IR_I1), IR_I1);
}

/* x summed over every axis. */
static uint32_t sum_all(Grad *G, uint32_t x)
{
    while (ty(G, x).rank) x = reduce(G, IR_GOP_SUM, x, ty(G, x).rank - 1);
    return x;
}

/* Whether x (k or v of an attention whose result has H heads on axis -3) is grouped:
 * fewer heads than H, more than one (grouped-query attention). */
static bool grouped(Grad *G, uint32_t x, const IrTensorType *o)
{
    IrTensorType t = ty(G, x);
    return t.rank >= 3 && o->rank >= 3 && !is_one(t.dims[t.rank - 3]) &&
           !ir_size_eq(t.dims[t.rank - 3], o->dims[o->rank - 3]);
}

/* x [..., Hkv, L, D] repeated over each group of H / Hkv query heads: [..., H, L, D]
 * (the view reshape, broadcast, reshape; only the dense rule below needs it). */
static uint32_t repeat_heads(Grad *G, uint32_t x, IrSize h)
{
    IrTensorType t = ty(G, x);
    int64_t nh, nk;
    ir_size_is_const(h, &nh);
    ir_size_is_const(t.dims[t.rank - 3], &nk);
    IrSize *d1 = arena_alloc(G->a, (t.rank + 1) * sizeof *d1), *d2 = arena_alloc(G->a, (t.rank + 1) * sizeof *d2);
    IrSize *d3 = arena_alloc(G->a, t.rank * sizeof *d3);
    for (uint32_t i = 0, n = 0; i < t.rank; i++) {
        d1[n] = d2[n] = d3[i] = t.dims[i];
        if (++n == t.rank - 2) d1[n] = ir_size_const(1), d2[n] = ir_size_const(nh / nk), n++;
    }
    d3[t.rank - 3] = h;
    x = reshape(G, x, t.rank + 1, d1);
    x = bcast_to(G, x, &(IrTensorType){t.elem, t.rank + 1, d2});
    return reshape(G, x, t.rank, d3);
}

/* d [..., H, L, D], the gradient of a grouped x [..., Hkv, L, D] repeated, summed over
 * each group: [..., Hkv, L, D] (the other batch axes as d's). */
static uint32_t sum_groups(Grad *G, uint32_t d, const IrTensorType *x)
{
    IrTensorType t = ty(G, d);
    int64_t nh, nk;
    ir_size_is_const(t.dims[t.rank - 3], &nh);
    ir_size_is_const(x->dims[x->rank - 3], &nk);
    IrSize *d1 = arena_alloc(G->a, (t.rank + 1) * sizeof *d1);
    for (uint32_t i = 0, n = 0; i < t.rank; i++) {
        d1[n++] = t.dims[i];
        if (i == t.rank - 3) d1[n - 1] = x->dims[x->rank - 3], d1[n++] = ir_size_const(nh / nk);
    }
    return reduce(G, IR_GOP_SUM, reshape(G, d, t.rank + 1, d1), t.rank - 2);
}

/* The dense backward of o = attention(q, k, v), for a scale that needs a gradient:
 * P recomputed from Q and K as an [Lq, Lk] tensor (masked scores, their softmax; a query
 * that sees no key has P = 0, as the forward's zeros): dV = P^T dO, dP = dO V^T, dS = P
 * (dP - delta) with delta = rowsum(dO * O), dQ = dS K scale, dK = dS^T Q scale, dscale =
 * sum(dS * Q K^T); each summed over the batch axes its operand was broadcast along, and
 * grouped K and V repeated over their groups and their gradients summed back. */
static void r_attention_dense(Grad *G, const IrGOp *op)
{
    IrTensorType to = ty(G, op->out[0]);
    uint32_t d = dy(G, op), q = xin(G, op, 0), k = xin(G, op, 1), v = xin(G, op, 2);
    bool gk = grouped(G, k, &to), gv = grouped(G, v, &to);
    if (gk) k = repeat_heads(G, k, to.dims[to.rank - 3]);
    if (gv) v = repeat_heads(G, v, to.dims[to.rank - 3]);
    IrElem e = ty(G, d).elem;
    uint32_t sc = cast(G, xin(G, op, 4), e), qk = matmul(G, q, trans_last(G, k)), vis = attn_visible(G, op, e);
    uint32_t sqk = mul(G, qk, sc), s = sel(G, vis, sqk, cst(G, e, -INFINITY)), last = ty(G, d).rank - 1;
    uint32_t sm = emit_axis(G, IR_GOP_SOFTMAX, s, ty(G, s).rank - 1, ty(G, s)), p = sel(G, vis, sm, cst(G, e, 0));
    uint32_t delta = reduce_keep(G, IR_GOP_SUM, mul(G, d, yout(G, op)), last);
    uint32_t ds = mul(G, p, sub(G, matmul(G, d, trans_last(G, v)), delta));
    IrTensorType tk = ty(G, op->in[1]), tv = ty(G, op->in[2]);
    if (wants(G, op, 0)) give(G, op, 0, mul(G, matmul(G, ds, k), sc));
    if (wants(G, op, 1)) {
        uint32_t dk = mul(G, matmul(G, trans_last(G, ds), q), sc);
        give(G, op, 1, gk ? sum_groups(G, dk, &tk) : dk);
    }
    if (wants(G, op, 2)) {
        uint32_t dv = matmul(G, trans_last(G, p), d);
        give(G, op, 2, gv ? sum_groups(G, dv, &tv) : dv);
    }
    if (wants(G, op, 4)) give(G, op, 4, sum_all(G, mul(G, ds, qk)));
}

/* The logsumexp of forward attention op `op` (a copy of it): its second result, which
 * this makes when it has none (the forward then saves it: the flash kernel stores each
 * row's lse, f32, or f64 for f64 operands). */
static uint32_t attention_lse(Grad *G, const IrGOp *op)
{
    IrGraph *g = G->g;
    uint32_t idx = g->values.data[op->out[0]].def;
    IrGOp *f = &g->ops.data[idx];
    if (f->nout == 2) return f->out[1];
    IrTensorType to = ty(G, op->out[0]);
    IrTensorType t = {to.elem == IR_F64 ? IR_F64 : IR_F32, to.rank - 1, to.dims};
    uint32_t *outs = arena_alloc(G->a, 3 * sizeof *outs);
    outs[0] = op->out[0];
    outs[1] = (uint32_t)g->values.len;
    vec_push(&g->values, ((IrGValue){t, NULL, idx, 1}));
    f->out = outs;
    f->nout = 2;
    return outs[1];
}

/* o = attention(q, k, v): attention_bwd, FlashAttention-2's backward from the saved
 * output and logsumexp (P recomputed block by block, never an [Lq, Lk] tensor; grouped
 * K and V read at their own heads, their gradients summed over each group inside the
 * op). A scale that needs a gradient takes the dense rule instead. */
static void r_attention(Grad *G, const IrGOp *op)
{
    if (wants(G, op, 4)) {
        r_attention_dense(G, op);
        return;
    }
    uint32_t lse = attention_lse(G, op), d = dy(G, op), n = 8;
    uint32_t in[10] = {op->in[0], op->in[1], op->in[2], op->out[0], d, lse, op->in[3], op->in[4]};
    if (op->nin == 7) in[8] = op->in[5], in[9] = op->in[6], n = 10;
    IrTensorType t[3];
    for (uint32_t i = 0; i < 3; i++) t[i] = ty(G, op->in[i]), t[i].elem = ty(G, d).elem;
    uint32_t b = ir_graph_op(G->g, IR_GOP_ATTENTION_BWD, G->loc, in, n, t, 3);
    for (uint32_t i = 0; i < 3; i++) give(G, op, i, ir_graph_result(G->g, b, i));
}

/* The rule of each op kind. r_none: the op carries no gradient (its results are not
 * floats, or it is constant almost everywhere). An op kind missing here has no rule yet
 * (rem, cumprod, conv2d): grad through it is an error, never a wrong answer. */
static const GradRule rules[IR_GOP_COUNT] = {
    /* op                        rule */
    [IR_GOP_CONST] = r_none,     [IR_GOP_SIZE] = r_none,     [IR_GOP_FULL] = r_pass,
    [IR_GOP_CAST] = r_pass,      [IR_GOP_NEG] = r_unary,     [IR_GOP_NOT] = r_none,
    [IR_GOP_BNOT] = r_none,      [IR_GOP_EXP] = r_unary,     [IR_GOP_EXP2] = r_unary,
    [IR_GOP_LOG] = r_unary,      [IR_GOP_LOG2] = r_unary,    [IR_GOP_SQRT] = r_unary,
    [IR_GOP_RSQRT] = r_unary,    [IR_GOP_SIN] = r_unary,     [IR_GOP_COS] = r_unary,
    [IR_GOP_TANH] = r_unary,     [IR_GOP_ERF] = r_unary,     [IR_GOP_ABS] = r_unary,
    [IR_GOP_FLOOR] = r_none,     [IR_GOP_CEIL] = r_none,     [IR_GOP_SIGMOID] = r_unary,
    [IR_GOP_ISNAN] = r_none,     [IR_GOP_ISINF] = r_none,    [IR_GOP_ISFINITE] = r_none,
    [IR_GOP_ADD] = r_add,        [IR_GOP_SUB] = r_add,       [IR_GOP_MUL] = r_mul,
    [IR_GOP_DIV] = r_div,        [IR_GOP_AND] = r_none,      [IR_GOP_OR] = r_none,
    [IR_GOP_XOR] = r_none,       [IR_GOP_SHL] = r_none,      [IR_GOP_SHR] = r_none,
    [IR_GOP_LAND] = r_none,      [IR_GOP_LOR] = r_none,      [IR_GOP_MINIMUM] = r_minmax,
    [IR_GOP_MAXIMUM] = r_minmax, [IR_GOP_POW] = r_pow,       [IR_GOP_CDIV] = r_none,
    [IR_GOP_CMP] = r_none,       [IR_GOP_FMA] = r_fma,       [IR_GOP_WHERE] = r_where,
    [IR_GOP_MATMUL] = r_matmul,  [IR_GOP_SUM] = r_sum,       [IR_GOP_MAX] = r_extreme,
    [IR_GOP_MIN] = r_extreme,    [IR_GOP_MEAN] = r_sum,      [IR_GOP_ARGMAX] = r_none,
    [IR_GOP_ARGMIN] = r_none,    [IR_GOP_ANY] = r_none,      [IR_GOP_ALL] = r_none,
    [IR_GOP_SOFTMAX] = r_softmax, [IR_GOP_CUMSUM] = r_cumsum, [IR_GOP_LAYER_NORM] = r_norm,
    [IR_GOP_RMS_NORM] = r_norm,  [IR_GOP_TRANS] = r_trans,   [IR_GOP_RESHAPE] = r_reshape,
    [IR_GOP_BROADCAST] = r_pass, [IR_GOP_CONCAT] = r_concat, [IR_GOP_SPLIT] = r_split,
    [IR_GOP_DROPOUT] = r_dropout, [IR_GOP_CROSS_ENTROPY_ROWS] = r_cross_entropy,
    [IR_GOP_ROPE] = r_rope, [IR_GOP_SWIGLU] = r_swiglu, [IR_GOP_FOUND_INF] = r_none,
    [IR_GOP_ATTENTION] = r_attention,
    [IR_GOP_RETURN] = r_none,
};

bool ir_gop_has_grad(IrGOpKind k) { return k < IR_GOP_COUNT && rules[k]; }

/* ---- activity and the walk back ----------------------------------------------------------- */

static bool is_float_value(const IrGraph *g, uint32_t v) { return ir_elem_is_float(g->values.data[v].type.elem); }

/* From the xs forward: the float values that depend on one through ops that carry a gradient. */
static void mark_varied(const IrGraph *g, uint32_t nops, const uint32_t *xs, uint32_t n, bool *varied)
{
    for (uint32_t i = 0; i < n; i++) varied[xs[i]] = is_float_value(g, xs[i]);
    for (uint32_t o = 0; o < nops; o++) {
        const IrGOp *op = &g->ops.data[o];
        bool any = false;
        for (uint32_t i = 0; i < op->nin; i++) any |= varied[op->in[i]];
        if (!any || rules[op->kind] == r_none) continue;
        for (uint32_t i = 0; i < op->nout; i++) varied[op->out[i]] |= is_float_value(g, op->out[i]);
    }
}

/* From y back: the float values y depends on through ops that carry a gradient. */
static void mark_useful(const IrGraph *g, uint32_t nops, uint32_t y, bool *useful)
{
    useful[y] = true;
    for (uint32_t o = nops; o-- > 0;) {
        const IrGOp *op = &g->ops.data[o];
        bool any = false;
        for (uint32_t i = 0; i < op->nout; i++) any |= useful[op->out[i]];
        if (!any || rules[op->kind] == r_none) continue;
        for (uint32_t i = 0; i < op->nin; i++) useful[op->in[i]] |= is_float_value(g, op->in[i]);
    }
}

static bool op_active(const Grad *G, uint32_t o)
{
    const IrGOp *op = &G->g->ops.data[o];
    for (uint32_t i = 0; i < op->nout; i++)
        if (G->active[op->out[i]]) return true;
    return false;
}

/* Step 1; false with *fail when an x is unused or an op on the way has no rule. */
static bool find_active(Grad *G, uint32_t nops, uint32_t y, const uint32_t *xs, uint32_t n, IrGradFail *fail)
{
    bool *varied = arena_alloc(G->a, G->nv * sizeof *varied), *useful = arena_alloc(G->a, G->nv * sizeof *useful);
    memset(varied, 0, G->nv * sizeof *varied);
    memset(useful, 0, G->nv * sizeof *useful);
    mark_varied(G->g, nops, xs, n, varied);
    mark_useful(G->g, nops, y, useful);
    for (uint32_t v = 0; v < G->nv; v++) G->active[v] = varied[v] && useful[v];
    for (uint32_t i = 0; i < n; i++)
        if (!G->active[xs[i]]) return *fail = (IrGradFail){IR_GRAD_UNUSED, 0, i}, false;
    for (uint32_t o = 0; o < nops; o++)
        if (op_active(G, o) && !rules[G->g->ops.data[o].kind])
            return *fail = (IrGradFail){IR_GRAD_NO_RULE, o, 0}, false;
    return true;
}

/* dy/dy: ones of y's shape (one element). */
static uint32_t seed(Grad *G, uint32_t y)
{
    IrTensorType t = ty(G, y);
    uint32_t one = cst(G, bw_elem(t.elem), 1.0);
    return t.rank ? emit(G, IR_GOP_FULL, &one, 1, (IrTensorType){bw_elem(t.elem), t.rank, t.dims}) : one;
}

bool ir_graph_grad(IrGraph *g, uint32_t y, const uint32_t *xs, uint32_t n, Loc loc, uint32_t *grads,
                   IrGradFail *fail)
{
    Grad G = {.g = g, .a = g->arena, .loc = loc, .nv = (uint32_t)g->values.len};
    uint32_t nops = (uint32_t)g->ops.len;
    G.active = arena_alloc(G.a, G.nv * sizeof *G.active);
    G.adj = arena_alloc(G.a, G.nv * sizeof *G.adj);
    G.up = arena_alloc(G.a, G.nv * sizeof *G.up);
    memset(G.adj, 0xff, G.nv * sizeof *G.adj);   /* IR_GNONE */
    memset(G.up, 0xff, G.nv * sizeof *G.up);
    *fail = (IrGradFail){IR_GRAD_OK, 0, 0};
    if (!find_active(&G, nops, y, xs, n, fail)) return false;
    bool first = !g->nfwd;
    if (first) g->nfwd = nops;   /* the forward, for recomputation (the first grad's) */
    G.adj[y] = seed(&G, y);
    if (first) g->loss = y, g->seed = G.adj[y];   /* for the split (passes/graph_split.c) */
    for (uint32_t o = nops; o-- > 0;)
        if (op_active(&G, o)) {
            IrGOp op = g->ops.data[o];   /* a copy: the rule appends to g->ops */
            rules[op.kind](&G, &op);
        }
    for (uint32_t i = 0; i < n; i++) grads[i] = cast(&G, G.adj[xs[i]], ty(&G, xs[i]).elem);
    return true;
}
