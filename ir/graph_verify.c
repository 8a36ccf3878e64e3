/* The graph IR verifier: per-op type rules (ir_gop_check, one function per op family
 * of graph_ops.def) and the whole-graph rules (definition before use, one return at
 * the end, sizes named by the parameters). The rules are docs/IR.md's "Graph IR". */
#include <string.h>

#include "graph.h"

typedef struct Chk {
    Arena *a;
    const IrGraph *g;
    const IrGOp *op;
    const char **err;
} Chk;

static const IrTensorType *in_t(const Chk *c, uint32_t i) { return &c->g->values.data[c->op->in[i]].type; }
static const IrTensorType *out_t(const Chk *c, uint32_t i) { return &c->g->values.data[c->op->out[i]].type; }

static bool fail(const Chk *c, const char *msg)
{
    *c->err = msg;
    return false;
}

#define FAILF(c, ...) fail((c), arena_printf((c)->a, __VA_ARGS__))

static const char *ts(const Chk *c, const IrTensorType *t) { return ir_ttype_str(c->a, t); }

static bool is_float(const IrTensorType *t) { return ir_elem_is_float(t->elem); }
static bool is_int(const IrTensorType *t) { return ir_elem_is_int(t->elem); }

static bool same_shape(const IrTensorType *x, const IrTensorType *y)
{
    if (x->rank != y->rank) return false;
    for (uint32_t i = 0; i < x->rank; i++)
        if (!ir_size_eq(x->dims[i], y->dims[i])) return false;
    return true;
}

/* The result must be `elem` with the shape (rank, dims). */
static bool want(const Chk *c, IrElem elem, uint32_t rank, const IrSize *dims)
{
    IrTensorType t = {elem, rank, dims};
    if (ir_ttype_eq(out_t(c, 0), &t)) return true;
    return FAILF(c, "the result of %s must be %s, not %s", ir_gop_name(c->op->kind), ts(c, &t),
                 ts(c, out_t(c, 0)));
}

static bool want_like(const Chk *c, IrElem elem, const IrTensorType *shape)
{
    return want(c, elem, shape->rank, shape->dims);
}

/* Operands 0..n of one element type, broadcast to one shape in rank and dims. */
static bool operands_bcast(const Chk *c, uint32_t from, uint32_t *rank, const IrSize **dims)
{
    const IrTensorType *t0 = in_t(c, from);
    *rank = t0->rank;
    *dims = t0->dims;
    for (uint32_t i = from + 1; i < c->op->nin; i++) {
        const IrTensorType *t = in_t(c, i);
        if (t->elem != t0->elem)
            return FAILF(c, "the operands of %s must have one element type, not %s and %s",
                         ir_gop_name(c->op->kind), ts(c, t0), ts(c, t));
        if (!ir_broadcast_shapes(c->a, *rank, *dims, t->rank, t->dims, rank, dims))
            return FAILF(c, "the operand shapes of %s do not broadcast: %s and %s",
                         ir_gop_name(c->op->kind), ir_shape_str(c->a, *rank, *dims),
                         ir_shape_str(c->a, t->rank, t->dims));
    }
    return true;
}

static bool check_unary(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0);
    IrGOpKind k = c->op->kind;
    bool classify = k == IR_GOP_ISNAN || k == IR_GOP_ISINF || k == IR_GOP_ISFINITE;
    bool any = k == IR_GOP_NEG || k == IR_GOP_ABS;
    if ((k == IR_GOP_NOT || k == IR_GOP_BNOT) && !is_int(t))
        return FAILF(c, "%s needs an integer or bool operand, not %s", ir_gop_name(k), ts(c, t));
    if (!any && k != IR_GOP_NOT && k != IR_GOP_BNOT && !is_float(t))
        return FAILF(c, "%s needs a float operand, not %s", ir_gop_name(k), ts(c, t));
    return want_like(c, classify || k == IR_GOP_NOT ? IR_I1 : t->elem, t);
}

static bool check_binary(const Chk *c)
{
    uint32_t rank;
    const IrSize *dims;
    if (!operands_bcast(c, 0, &rank, &dims)) return false;
    IrGOpKind k = c->op->kind;
    IrElem e = in_t(c, 0)->elem;
    bool ints = (k >= IR_GOP_AND && k <= IR_GOP_LOR) || k == IR_GOP_CDIV;
    if (ints && !ir_elem_is_int(e))
        return FAILF(c, "%s needs integer or bool operands, not %s", ir_gop_name(k), ir_elem_name(e));
    if (k == IR_GOP_SWIGLU && !ir_elem_is_float(e)) return FAILF(c, "swiglu needs float operands, not %s", ir_elem_name(e));
    bool cmp = k == IR_GOP_CMP || k == IR_GOP_LAND || k == IR_GOP_LOR;
    return want(c, cmp ? IR_I1 : e, rank, dims);
}

static bool check_ternary(const Chk *c)
{
    uint32_t rank;
    const IrSize *dims, *cd;
    bool where = c->op->kind == IR_GOP_WHERE;
    if (!operands_bcast(c, where, &rank, &dims)) return false;
    if (where) {
        const IrTensorType *t = in_t(c, 0);
        if (t->elem != IR_I1) return FAILF(c, "the condition of where must be i1, not %s", ts(c, t));
        if (!ir_broadcast_shapes(c->a, t->rank, t->dims, rank, dims, &rank, &cd))
            return FAILF(c, "the condition of where of shape %s does not broadcast with %s",
                         ir_shape_str(c->a, t->rank, t->dims), ir_shape_str(c->a, rank, dims));
        dims = cd;
    }
    return want(c, in_t(c, where)->elem, rank, dims);
}

static bool check_matmul(const Chk *c)
{
    const IrTensorType *l = in_t(c, 0), *r = in_t(c, 1);
    if (l->elem != r->elem) return FAILF(c, "matmul operands %s and %s differ in element type", ts(c, l), ts(c, r));
    if (!l->rank || !r->rank) return fail(c, "matmul needs operands of rank 1 or more");
    IrSize kl = l->dims[l->rank - 1], kr = r->dims[r->rank == 1 ? 0 : r->rank - 2];
    if (!ir_size_eq(kl, kr))
        return FAILF(c, "matmul inner sizes %s and %s differ", ir_size_str(c->a, kl), ir_size_str(c->a, kr));
    uint32_t bl = l->rank >= 2 ? l->rank - 2 : 0, br = r->rank >= 2 ? r->rank - 2 : 0, n;
    const IrSize *batch;
    if (!ir_broadcast_shapes(c->a, bl, l->dims, br, r->dims, &n, &batch))
        return fail(c, "matmul batch shapes do not broadcast");
    IrSize *d = arena_alloc(c->a, (n + 2) * sizeof *d);
    if (n) memcpy(d, batch, n * sizeof *d);
    if (l->rank >= 2) d[n++] = l->dims[l->rank - 2];
    if (r->rank >= 2) d[n++] = r->dims[r->rank - 1];
    return want(c, l->elem, n, d);
}

static bool axis_ok(const Chk *c, const IrTensorType *t)
{
    if (c->op->attr.axis >= 0 && c->op->attr.axis < (int64_t)t->rank) return true;
    return FAILF(c, "axis %lld is out of range for %s", (long long)c->op->attr.axis, ts(c, t));
}

static bool check_reduce(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0);
    if (!axis_ok(c, t)) return false;
    IrGOpKind k = c->op->kind;
    IrElem e = k == IR_GOP_ARGMAX || k == IR_GOP_ARGMIN ? IR_I32
             : k == IR_GOP_ANY || k == IR_GOP_ALL       ? IR_I1
             : k == IR_GOP_MEAN && !is_float(t)         ? IR_F32 : t->elem;
    IrSize *d = arena_alloc(c->a, (t->rank + 1) * sizeof *d);
    for (uint32_t i = 0, n = 0; i < t->rank; i++)
        if (i != c->op->attr.axis) d[n++] = t->dims[i];
    return want(c, e, t->rank - 1, d);
}

static bool check_along(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0);
    if (!axis_ok(c, t)) return false;
    if (c->op->kind == IR_GOP_SOFTMAX && !is_float(t)) return FAILF(c, "softmax needs floats, not %s", ts(c, t));
    return want_like(c, t->elem, t);
}

static bool scalar_ok(const Chk *c, uint32_t i, bool want_float, const char *what)
{
    const IrTensorType *t = in_t(c, i);
    if (t->rank == 0 && (want_float ? is_float(t) : is_int(t))) return true;
    return FAILF(c, "the %s of %s must be %s scalar, not %s", what, ir_gop_name(c->op->kind),
                 want_float ? "a float" : "an integer", ts(c, t));
}

static bool check_norm(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0);
    bool ln = c->op->kind == IR_GOP_LAYER_NORM;
    if (!t->rank || !is_float(t)) return FAILF(c, "%s needs a float tensor, not %s", ir_gop_name(c->op->kind), ts(c, t));
    for (uint32_t i = 1; i < c->op->nin - 1; i++) {
        const IrTensorType *w = in_t(c, i);
        if (w->rank != 1 || !is_float(w) || !ir_size_eq(w->dims[0], t->dims[t->rank - 1]))
            return FAILF(c, "the %s of %s must be a float vector of the input's last size, not %s",
                         i == 1 ? "weight" : "bias", ir_gop_name(c->op->kind), ts(c, w));
    }
    return scalar_ok(c, ln ? 3 : 2, true, "eps") && want_like(c, t->elem, t);
}

static bool check_trans(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0);
    const uint32_t *p = c->op->attr.perm;
    uint32_t seen = 0;
    if (!p || t->rank < 2) return FAILF(c, "trans needs a permutation and a tensor of rank 2 or more, not %s", ts(c, t));
    IrSize *d = arena_alloc(c->a, t->rank * sizeof *d);
    for (uint32_t i = 0; i < t->rank; i++) {
        if (p[i] >= t->rank || (seen >> p[i] & 1)) return fail(c, "the axes of trans are not a permutation");
        seen |= 1u << p[i];
        d[i] = t->dims[p[i]];
    }
    return want(c, t->elem, t->rank, d);
}

static bool check_reshape(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0), *r = out_t(c, 0);
    IrSize x, y;
    if (r->elem != t->elem) return FAILF(c, "reshape keeps the element type %s", ir_elem_name(t->elem));
    if (!ir_size_numel(c->a, t->rank, t->dims, &x) || !ir_size_numel(c->a, r->rank, r->dims, &y) ||
        !ir_size_eq(x, y))
        return FAILF(c, "cannot reshape %s to %s: element counts differ", ts(c, t), ts(c, r));
    return true;
}

static bool check_broadcast(const Chk *c)
{
    const IrTensorType *t = in_t(c, 0), *r = out_t(c, 0);
    uint32_t n;
    const IrSize *d;
    if (r->elem != t->elem || !ir_broadcast_shapes(c->a, t->rank, t->dims, r->rank, r->dims, &n, &d) ||
        n != r->rank || !same_shape(&(IrTensorType){r->elem, n, d}, r))
        return FAILF(c, "cannot broadcast %s to %s", ts(c, t), ts(c, r));
    return true;
}

/* concat (operands) and split (results): one rank and element type, equal off the axis,
 * the axis sizes adding up to the other side's. */
static bool check_pieces(const Chk *c, const IrTensorType *whole, bool split)
{
    uint32_t n = split ? c->op->nout : c->op->nin;
    if (!axis_ok(c, whole)) return false;
    IrSize total = ir_size_const(0);
    for (uint32_t i = 0; i < n; i++) {
        const IrTensorType *p = split ? out_t(c, i) : in_t(c, i);
        bool ok = p->rank == whole->rank && p->elem == whole->elem;
        for (uint32_t k = 0; ok && k < p->rank; k++) ok = k == c->op->attr.axis || ir_size_eq(p->dims[k], whole->dims[k]);
        if (!ok || !ir_size_add(c->a, total, p->dims[c->op->attr.axis], 1, &total))
            return FAILF(c, "%s piece %s does not fit %s along axis %lld", ir_gop_name(c->op->kind),
                         ts(c, p), ts(c, whole), (long long)c->op->attr.axis);
    }
    if (!ir_size_eq(total, whole->dims[c->op->attr.axis]))
        return FAILF(c, "the pieces of %s add up to %s along axis %lld, not %s", ir_gop_name(c->op->kind),
                     ir_size_str(c->a, total), (long long)c->op->attr.axis,
                     ir_size_str(c->a, whole->dims[c->op->attr.axis]));
    return true;
}

/* Whether x is the constant 1. */
static bool size_is_one(IrSize x)
{
    int64_t v;
    return ir_size_is_const(x, &v) && v == 1;
}

/* Whether kv heads s group r query heads: both known, s divides r. */
static bool size_groups(IrSize r, IrSize s)
{
    int64_t a, b;
    return ir_size_is_const(r, &a) && ir_size_is_const(s, &b) && b > 0 && a % b == 0;
}

/* The batch shape of an attention (operands 0, 1, 2: q, k, v): numpy broadcasting of
 * their batch shapes, aligned at the right, except that along the head axis (axis -3)
 * the heads of k and v may divide q's (grouped-query attention: query head h reads KV
 * head h / (Hq / Hkv), as SDPA's enable_gqa). False when they do not fit. */
static bool attn_batch(const Chk *c, uint32_t *n, const IrSize **b)
{
    const IrTensorType *t[3] = {in_t(c, 0), in_t(c, 1), in_t(c, 2)};
    uint32_t nb = 0;
    for (int x = 0; x < 3; x++) nb = t[x]->rank - 2 > nb ? t[x]->rank - 2 : nb;
    IrSize *d = arena_alloc(c->a, (nb + 1) * sizeof *d);
    for (uint32_t i = 0; i < nb; i++) {   /* i: the axis counted from the right */
        IrSize r = ir_size_const(1);
        for (int x = 0; x < 3; x++) {
            uint32_t bx = t[x]->rank - 2;
            IrSize s = i < bx ? t[x]->dims[bx - 1 - i] : ir_size_const(1);
            if (ir_size_eq(s, r) || size_is_one(s)) continue;
            if (size_is_one(r)) r = s;
            else if (!(x > 0 && i == 0 && size_groups(r, s))) return false;
        }
        d[nb - 1 - i] = r;
    }
    *n = nb;
    *b = d;
    return true;
}

/* q, k, v (operands 0..2), then causal, scale and the window's sides from operand `at`:
 * the rules attention and attention_bwd share. */
static bool attn_operands(const Chk *c, uint32_t at)
{
    const char *name = ir_gop_name(c->op->kind);
    const IrTensorType *q = in_t(c, 0), *k = in_t(c, 1), *v = in_t(c, 2);
    if (q->rank < 2 || k->rank < 2 || v->rank < 2 || !is_float(q) || q->elem != k->elem || q->elem != v->elem)
        return FAILF(c, "%s needs q, k, v float tensors of one element type and rank 2 or more", name);
    if (!ir_size_eq(q->dims[q->rank - 1], k->dims[k->rank - 1]) ||
        !ir_size_eq(k->dims[k->rank - 2], v->dims[v->rank - 2]))
        return FAILF(c, "%s: q and k need one head size, k and v one sequence length", name);
    const IrTensorType *cz = in_t(c, at);
    if (cz->rank || cz->elem != IR_I1) return FAILF(c, "the causal operand of %s must be an i1 scalar", name);
    if (!scalar_ok(c, at + 1, true, "scale")) return false;
    if (c->op->nin == at + 4 && (!scalar_ok(c, at + 2, false, "window's left") ||
                                 !scalar_ok(c, at + 3, false, "window's right")))
        return false;
    return true;
}

/* The shape batch + [Lq, last] of an attention's values: its output (last = Dv), its
 * logsumexp (no last axis). */
static IrTensorType attn_shape(const Chk *c, IrElem e, uint32_t n, const IrSize *b, bool with_dv)
{
    const IrTensorType *q = in_t(c, 0), *v = in_t(c, 2);
    IrSize *d = arena_alloc(c->a, (n + 2) * sizeof *d);
    if (n) memcpy(d, b, n * sizeof *d);
    d[n] = q->dims[q->rank - 2];
    d[n + 1] = v->dims[v->rank - 1];
    return (IrTensorType){e, n + 1 + with_dv, d};
}

/* The element type of attention's logsumexp: f64 for f64 operands, else f32. */
static IrElem lse_elem(IrElem e) { return e == IR_F64 ? IR_F64 : IR_F32; }

static bool want_result(const Chk *c, uint32_t i, const IrTensorType *t, const char *what)
{
    if (ir_ttype_eq(out_t(c, i), t)) return true;
    return FAILF(c, "the %s of %s must be %s, not %s", what, ir_gop_name(c->op->kind), ts(c, t), ts(c, out_t(c, i)));
}

/* attention q, k, v, causal, scale[, left, right] -> o[, lse]. */
static bool check_attention(const Chk *c)
{
    if (c->op->nin != 5 && c->op->nin != 7)
        return FAILF(c, "attention takes 5 operands (q, k, v, causal, scale) or 7 (and a window's left and right), not %u",
                     c->op->nin);
    if (c->op->nout > 2) return FAILF(c, "attention gives its output and its logsumexp, not %u results", c->op->nout);
    if (!attn_operands(c, 3)) return false;
    uint32_t n;
    const IrSize *b;
    if (!attn_batch(c, &n, &b)) return fail(c, "attention: the batch shapes of q, k and v do not broadcast");
    IrElem e = in_t(c, 0)->elem;
    IrTensorType o = attn_shape(c, e, n, b, true), lse = attn_shape(c, lse_elem(e), n, b, false);
    return want(c, e, o.rank, o.dims) && (c->op->nout < 2 || want_result(c, 1, &lse, "logsumexp"));
}

/* attention_bwd q, k, v, o, do, lse, causal, scale[, left, right] -> dq, dk, dv: o and
 * lse attention's results, do o's adjoint (f32 or f64), the gradients of do's type in
 * the shapes of q, k and v. */
static bool check_attention_bwd(const Chk *c)
{
    if (c->op->nin != 8 && c->op->nin != 10)
        return FAILF(c, "attention_bwd takes 8 operands (q, k, v, o, do, lse, causal, scale) or 10 (and a window's "
                     "left and right), not %u", c->op->nin);
    if (!attn_operands(c, 6)) return false;
    uint32_t n;
    const IrSize *b;
    if (!attn_batch(c, &n, &b)) return fail(c, "attention_bwd: the batch shapes of q, k and v do not broadcast");
    IrElem e = in_t(c, 0)->elem, de = in_t(c, 4)->elem;
    IrTensorType o = attn_shape(c, e, n, b, true), lse = attn_shape(c, lse_elem(e), n, b, false);
    if (!ir_ttype_eq(in_t(c, 3), &o))
        return FAILF(c, "the output operand of attention_bwd must be %s, not %s", ts(c, &o), ts(c, in_t(c, 3)));
    o.elem = de;
    if ((de != IR_F32 && de != IR_F64) || !ir_ttype_eq(in_t(c, 4), &o))
        return FAILF(c, "the output's gradient of attention_bwd must be %s (or f64), not %s", ts(c, &o), ts(c, in_t(c, 4)));
    if (!ir_ttype_eq(in_t(c, 5), &lse))
        return FAILF(c, "the logsumexp of attention_bwd must be %s, not %s", ts(c, &lse), ts(c, in_t(c, 5)));
    static const char *const what[3] = {"gradient of q", "gradient of k", "gradient of v"};
    for (uint32_t i = 0; i < 3; i++) {
        IrTensorType t = *in_t(c, i);
        t.elem = de;
        if (!want_result(c, i, &t, what[i])) return false;
    }
    return true;
}

static bool check_conv2d(const Chk *c)
{
    const IrTensorType *x = in_t(c, 0), *w = in_t(c, 1);
    if (!is_float(x) || x->elem != w->elem) return fail(c, "conv2d needs float operands of one element type");
    IrSize d[4];
    const char *err;
    if (!ir_conv2d_shape(c->a, x, w, c->op->attr.conv.stride, c->op->attr.conv.pad, c->op->attr.conv.nhwc, d, &err))
        return fail(c, err);
    return want(c, x->elem, 4, d);
}

/* The logits [N, V] (float), labels [N] (i32 or i64) and ignore_index (a scalar of the
 * labels' type) of cross_entropy_rows and cross_entropy_grad. */
static bool check_logits_labels(const Chk *c)
{
    const IrTensorType *x = in_t(c, 0), *l = in_t(c, 1), *ig = in_t(c, 2);
    const char *name = ir_gop_name(c->op->kind);
    if (x->rank != 2 || !is_float(x)) return FAILF(c, "the logits of %s must be a float [N, V] tensor, not %s", name, ts(c, x));
    if (l->rank != 1 || (l->elem != IR_I32 && l->elem != IR_I64) || !ir_size_eq(l->dims[0], x->dims[0]))
        return FAILF(c, "the labels of %s must be an i32 or i64 vector of the logits' %s rows, not %s", name,
                     ir_size_str(c->a, x->dims[0]), ts(c, l));
    if (ig->rank || ig->elem != l->elem)
        return FAILF(c, "the ignore_index of %s must be an %s scalar (the labels' type), not %s", name,
                     ir_elem_name(l->elem), ts(c, ig));
    return true;
}

/* cross_entropy_rows(logits, labels, ignore_index) -> each row's loss [N]: f64 for f64
 * logits, else f32. cross_entropy_grad(logits, labels, ignore_index, dy [N] f32 or f64)
 * -> d logits, [N, V] of dy's type. */
static bool check_linear_cross_entropy(const Chk *c);

static bool check_cross_entropy(const Chk *c)
{
    if (c->op->kind == IR_GOP_LINEAR_CROSS_ENTROPY || c->op->kind == IR_GOP_LINEAR_CROSS_ENTROPY_ROWS)
        return check_linear_cross_entropy(c);
    if (!check_logits_labels(c)) return false;
    const IrTensorType *x = in_t(c, 0);
    if (c->op->kind == IR_GOP_CROSS_ENTROPY_ROWS) return want(c, x->elem == IR_F64 ? IR_F64 : IR_F32, 1, x->dims);
    const IrTensorType *d = in_t(c, 3);
    if (d->rank != 1 || (d->elem != IR_F32 && d->elem != IR_F64) || !ir_size_eq(d->dims[0], x->dims[0]))
        return FAILF(c, "the row gradient of cross_entropy_grad must be an f32 or f64 vector of the logits' %s rows, not %s",
                     ir_size_str(c->a, x->dims[0]), ts(c, d));
    return want(c, d->elem, 2, x->dims);
}

/* linear_cross_entropy x [N, D], w [D, V], labels [N], ignore_index, dy [N], chunk ->
 * rows [N], dx [N, D], dw [D, V] (ir/graph.h): x and w floats of one type; rows of dy's
 * type (f32 or f64), dx and dw too, or bf16 for bf16 x (ir_lce_grad_elem); chunk an i64
 * scalar. linear_cross_entropy_rows: the first
 * four operands, rows f64 for f64 x, else f32. */
static bool check_linear_cross_entropy(const Chk *c)
{
    const IrTensorType *x = in_t(c, IR_LCE_X), *w = in_t(c, IR_LCE_W), *l = in_t(c, IR_LCE_LABELS),
                       *ig = in_t(c, IR_LCE_IGNORE);
    if (x->rank != 2 || !is_float(x) || w->rank != 2 || w->elem != x->elem || !ir_size_eq(w->dims[0], x->dims[1]))
        return FAILF(c, "linear_cross_entropy needs x [N, D] and w [D, V] floats of one type, not %s and %s", ts(c, x),
                     ts(c, w));
    if (l->rank != 1 || (l->elem != IR_I32 && l->elem != IR_I64) || !ir_size_eq(l->dims[0], x->dims[0]))
        return FAILF(c, "the labels of linear_cross_entropy must be an i32 or i64 vector of x's %s rows, not %s",
                     ir_size_str(c->a, x->dims[0]), ts(c, l));
    if (ig->rank || ig->elem != l->elem)
        return FAILF(c, "the ignore_index of linear_cross_entropy must be an %s scalar (the labels' type), not %s",
                     ir_elem_name(l->elem), ts(c, ig));
    if (c->op->kind == IR_GOP_LINEAR_CROSS_ENTROPY_ROWS) return want(c, x->elem == IR_F64 ? IR_F64 : IR_F32, 1, x->dims);
    const IrTensorType *d = in_t(c, IR_LCE_DY), *ch = in_t(c, IR_LCE_CHUNK);
    if (d->rank != 1 || (d->elem != IR_F32 && d->elem != IR_F64) || !ir_size_eq(d->dims[0], x->dims[0]))
        return FAILF(c, "the row gradient of linear_cross_entropy must be an f32 or f64 vector of x's %s rows, not %s",
                     ir_size_str(c->a, x->dims[0]), ts(c, d));
    if (ch->rank || ch->elem != IR_I64) return FAILF(c, "the chunk of linear_cross_entropy must be an i64 scalar, not %s", ts(c, ch));
    IrSize dv[2] = {w->dims[0], w->dims[1]};
    IrElem ge = x->elem == IR_BF16 ? IR_BF16 : d->elem;   /* ir_lce_grad_elem */
    IrTensorType rows = {d->elem, 1, x->dims}, dx = {ge, 2, x->dims}, dw = {ge, 2, dv};
    const IrTensorType *want3[3] = {&rows, &dx, &dw};
    for (uint32_t r = 0; r < 3; r++)
        if (!ir_ttype_eq(out_t(c, r), want3[r]))
            return FAILF(c, "result %u of linear_cross_entropy must be %s, not %s", r, ts(c, want3[r]), ts(c, out_t(c, r)));
    return true;
}

/* rope(x [..., T, D], cos, sin): D a known even size; cos and sin of x's element type,
 * of shape [..., T, D/2] broadcast to x's with its last size halved. */
static bool check_rope(const Chk *c)
{
    const IrTensorType *x = in_t(c, 0);
    int64_t d;
    if (x->rank < 2 || !is_float(x)) return FAILF(c, "the input of rope must be a float tensor [..., T, D], not %s", ts(c, x));
    if (!ir_size_is_const(x->dims[x->rank - 1], &d) || d % 2)
        return FAILF(c, "the last size of rope's input must be a known even number, not %s",
                     ir_size_str(c->a, x->dims[x->rank - 1]));
    IrSize *half = arena_alloc(c->a, x->rank * sizeof *half);
    memcpy(half, x->dims, x->rank * sizeof *half);
    half[x->rank - 1] = ir_size_const(d / 2);
    for (uint32_t i = 1; i < 3; i++) {
        const IrTensorType *t = in_t(c, i);
        uint32_t n;
        const IrSize *b;
        bool fits = t->elem == x->elem && t->rank >= 1 && t->rank <= x->rank &&
                    ir_size_eq(t->dims[t->rank - 1], half[x->rank - 1]) &&
                    ir_broadcast_shapes(c->a, t->rank, t->dims, x->rank, half, &n, &b);
        for (uint32_t k = 0; fits && k < n; k++) fits = ir_size_eq(b[k], half[k]);
        if (!fits)
            return FAILF(c, "the %s table of rope must be %s of a shape that broadcasts to %s, not %s", i == 1 ? "cos" : "sin",
                         ir_elem_name(x->elem), ir_shape_str(c->a, x->rank, half), ts(c, t));
    }
    return want_like(c, x->elem, x);
}

/* ---- the optimizer step's multi-tensor ops (family 'O', ir/graph.h) ---------------- */

static bool float_list(const Chk *c, uint32_t from, uint32_t to, const char *what)
{
    for (uint32_t i = from; i < to; i++)
        if (!is_float(in_t(c, i)))
            return FAILF(c, "the %s of %s must be float tensors, not %s", what, ir_gop_name(c->op->kind), ts(c, in_t(c, i)));
    return true;
}

/* found_inf g... -> i1; global_norm s, g... -> s's type (f32 or f64). */
static bool check_grad_stats(const Chk *c)
{
    bool norm = c->op->kind == IR_GOP_GLOBAL_NORM;
    if (norm && c->op->nin < 2) return fail(c, "global_norm takes a scale and at least one tensor");
    if (!float_list(c, norm, c->op->nin, "tensors")) return false;
    if (!norm) return want(c, IR_I1, 0, NULL);
    const IrTensorType *s = in_t(c, 0);
    if (s->rank || (s->elem != IR_F32 && s->elem != IR_F64))
        return FAILF(c, "the scale of global_norm must be an f32 or f64 scalar, not %s", ts(c, s));
    return want(c, s->elem, 0, NULL);
}

/* Parameter i's state: p, m, v of one f32 or f64 type, g a float tensor of its shape. */
static bool adamw_param(const Chk *c, uint32_t n, uint32_t i, IrElem e)
{
    const uint32_t b = IR_ADAMW_NSCALARS;
    const IrTensorType *p = in_t(c, b + i), *g = in_t(c, b + n + i);
    if (p->elem != e)
        return FAILF(c, "the parameters of adamw must be of the scalars' type %s, not %s", ir_elem_name(e), ts(c, p));
    if (!is_float(g) || !same_shape(g, p))
        return FAILF(c, "gradient %u of adamw must be a float tensor of its parameter's shape %s, not %s", i,
                     ir_shape_str(c->a, p->rank, p->dims), ts(c, g));
    for (uint32_t k = 2; k < 4; k++)
        if (!ir_ttype_eq(in_t(c, b + k * n + i), p))
            return FAILF(c, "moment %u of adamw must be %s (its parameter's type), not %s", i, ts(c, p),
                         ts(c, in_t(c, b + k * n + i)));
    for (uint32_t k = 0; k < 3; k++)
        if (!ir_ttype_eq(out_t(c, k * n + i), p))
            return FAILF(c, "result %u of adamw must be %s, not %s", k * n + i, ts(c, p), ts(c, out_t(c, k * n + i)));
    return true;
}

static bool check_adamw(const Chk *c)
{
    const uint32_t b = IR_ADAMW_NSCALARS;
    if (c->op->nin <= b || (c->op->nin - b) % 4 || c->op->nout != (c->op->nin - b) / 4 * 3)
        return FAILF(c, "adamw takes %u scalars and four lists of n tensors and gives 3n results, not %u operands "
                     "and %u results", b, c->op->nin, c->op->nout);
    IrElem e = in_t(c, 0)->elem;
    if (e != IR_F32 && e != IR_F64) return FAILF(c, "the learning rate of adamw must be f32 or f64, not %s", ts(c, in_t(c, 0)));
    for (uint32_t i = 0; i + 1 < b; i++)
        if (in_t(c, i)->rank || in_t(c, i)->elem != e)
            return FAILF(c, "scalar operand %u of adamw must be %s, not %s", i, ir_elem_name(e), ts(c, in_t(c, i)));
    if (in_t(c, b - 1)->rank || in_t(c, b - 1)->elem != IR_I1)
        return FAILF(c, "the skip flag of adamw must be an i1 scalar, not %s", ts(c, in_t(c, b - 1)));
    uint32_t n = (c->op->nin - b) / 4;
    for (uint32_t i = 0; i < n; i++)
        if (!adamw_param(c, n, i, e)) return false;
    return true;
}

static bool check_shape_op(const Chk *c)
{
    switch (c->op->kind) {
    case IR_GOP_FULL:
        if (in_t(c, 0)->rank || in_t(c, 0)->elem != out_t(c, 0)->elem)
            return fail(c, "full takes a scalar of the result's element type");
        return true;
    case IR_GOP_TRANS: return check_trans(c);
    case IR_GOP_RESHAPE: return check_reshape(c);
    case IR_GOP_BROADCAST: return check_broadcast(c);
    case IR_GOP_CONCAT: return check_pieces(c, out_t(c, 0), false);
    case IR_GOP_SPLIT: return check_pieces(c, in_t(c, 0), true);
    default: return true;
    }
}

static bool check_count(const Chk *c)
{
    int nin = ir_gop_nin(c->op->kind), nout = ir_gop_nout(c->op->kind);
    const char *name = ir_gop_name(c->op->kind);
    if (c->op->kind == IR_GOP_RETURN) return c->op->nout == 0 || fail(c, "return has no results");
    if (nin >= 0 ? c->op->nin != (uint32_t)nin : c->op->nin == 0)
        return FAILF(c, "%s takes %s%d operand%s, not %u", name, nin < 0 ? "at least " : "", nin < 0 ? 1 : nin,
                     nin == 1 || nin < 0 ? "" : "s", c->op->nin);
    if (nout >= 0 ? c->op->nout != (uint32_t)nout : c->op->nout == 0)
        return FAILF(c, "%s gives %s%d result%s, not %u", name, nout < 0 ? "at least " : "",
                     nout < 0 ? 1 : nout, nout == 1 || nout < 0 ? "" : "s", c->op->nout);
    return true;
}

bool ir_gop_check(Arena *a, const IrGraph *g, const IrGOp *op, const char **err)
{
    Chk c = {a, g, op, err};
    if (!check_count(&c)) return false;
    switch (ir_gop_family(op->kind)) {
    case 'k':
        if (op->kind == IR_GOP_SIZE) return want(&c, IR_I64, 0, NULL);
        return out_t(&c, 0)->rank == 0 || fail(&c, "const makes a scalar; use full for a tensor");
    case 'x': return same_shape(in_t(&c, 0), out_t(&c, 0)) || fail(&c, "cast keeps the shape");
    case 'u': return check_unary(&c);
    case 'b': case 'c': return check_binary(&c);
    case 't': return check_ternary(&c);
    case 'm': return check_matmul(&c);
    case 'r': return check_reduce(&c);
    case 'a': return check_along(&c);
    case 'n': return check_norm(&c);
    case 's': return check_shape_op(&c);
    case 'd':
        if (!is_float(in_t(&c, 0))) return fail(&c, "dropout needs a float tensor");
        return scalar_ok(&c, 1, true, "probability") && scalar_ok(&c, 2, false, "seed") &&
               want_like(&c, in_t(&c, 0)->elem, in_t(&c, 0));
    case 'A': return op->kind == IR_GOP_ATTENTION ? check_attention(&c) : check_attention_bwd(&c);
    case 'C': return check_conv2d(&c);
    case 'L': return check_cross_entropy(&c);
    case 'P': return check_rope(&c);
    case 'O': return op->kind == IR_GOP_ADAMW ? check_adamw(&c) : check_grad_stats(&c);
    default: return true;
    }
}

/* ---- the whole graph ---------------------------------------------------------------------- */

static bool sizes_named(const IrGraph *g, const IrTensorType *t, const char **bad)
{
    for (uint32_t i = 0; i < t->rank; i++) {
        int64_t c;
        if (ir_size_is_const(t->dims[i], &c) && c < 1) return *bad = "a size that is not positive", false;
        for (uint32_t j = 0; j < t->dims[i].n; j++)
            for (uint32_t k = 0; k < t->dims[i].m[j].n; k++) {
                bool found = false;
                for (uint32_t s = 0; s < g->nsizes && !found; s++) found = !strcmp(g->sizes[s], t->dims[i].m[j].names[k]);
                if (!found) return *bad = t->dims[i].m[j].names[k], false;
            }
    }
    return true;
}

static bool verify_op(const IrGraph *g, Arena *a, uint32_t idx, DiagList *diags)
{
    const IrGOp *op = &g->ops.data[idx];
    const char *err = NULL;
    for (uint32_t i = 0; i < op->nin; i++) {
        uint32_t v = op->in[i];
        if (v >= g->values.len || (g->values.data[v].def != IR_GNONE && g->values.data[v].def >= idx)) {
            diag_error(diags, op->loc, "graph '%s': operand %u of %s is used before it is defined", g->name,
                       i, ir_gop_name(op->kind));
            return false;
        }
    }
    for (uint32_t i = 0; i < op->nout; i++)
        if (!sizes_named(g, &g->values.data[op->out[i]].type, &err)) {
            diag_error(diags, op->loc, "graph '%s': the result of %s has %s%s%s", g->name, ir_gop_name(op->kind),
                       strchr(err, ' ') ? "" : "the size '", err, strchr(err, ' ') ? "" : "', which no parameter names");
            return false;
        }
    if (op->kind == IR_GOP_SIZE && !sizes_named(g, &(IrTensorType){IR_I64, 1, &op->attr.size}, &err)) {
        diag_error(diags, op->loc, "graph '%s': size %s names no parameter's size", g->name,
                   ir_size_str(a, op->attr.size));
        return false;
    }
    if (ir_gop_check(a, g, op, &err)) return true;
    diag_error(diags, op->loc, "graph '%s': %s", g->name, err);
    return false;
}

bool ir_graph_verify(const IrGraph *g, Arena *a, DiagList *diags)
{
    bool ok = true;
    if (!g->ops.len || g->ops.data[g->ops.len - 1].kind != IR_GOP_RETURN) {
        diag_error(diags, g->loc, "graph '%s' does not end with a return", g->name);
        return false;
    }
    for (size_t i = 0; i < g->ops.len && ok; i++) {
        ok = verify_op(g, a, (uint32_t)i, diags);
        if (ok && g->ops.data[i].kind == IR_GOP_RETURN && i + 1 < g->ops.len) {
            diag_error(diags, g->ops.data[i].loc, "graph '%s': return must be its last op", g->name);
            ok = false;
        }
    }
    return ok;
}

bool ir_gmodule_verify(const IrGraphModule *m, DiagList *diags)
{
    bool ok = true;
    for (size_t i = 0; i < m->graphs.len; i++) ok &= ir_graph_verify(m->graphs.data[i], m->arena, diags);
    return ok;
}
