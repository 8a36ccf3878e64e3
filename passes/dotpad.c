/* Dots smaller than 16 in some dimension, padded to 16 (the first GPU pass).
 *
 * require:   Tile IR without layouts
 * guarantee: every dot has M, K and N of at least 16 (what tensor-core layouts and
 *            codegen's dot lowering assume), and computes the values of the original
 *            dot exactly
 *
 * M and N grow by copies: rows of a and acc are repeated to 16 rows, columns of b and
 * acc to 16 columns, so the padded product holds copies of the original one, and a max
 * over the copies (all equal, NaN and -0.0 too) gives it back. K grows by zeros: -0.0
 * in a and +0.0 in b, so every added product is -0.0, which leaves every sum as it was
 * (x + -0.0 == x for every x, -0.0 included; integers pad with 0).
 *
 *   %d = dot %a, %b, %c : f32[4, 32]            %a1 = reshape(broadcast(expand_dims %a)) : f16[16, 16]
 *     (a: f16[4, 8], b: f16[8, 32])      ->     %a2 = select %kmask, %a1, -0.0 ... (b likewise, +0.0)
 *                                               %d1 = dot %a2, %b2, %c1 : f32[16, 32]
 *                                               %d = max(reshape %d1 : f32[4, 4, 32], 0) : f32[4, 32]
 */
#include "passes.h"

#include "ir/arena.h"

enum { DOT_MIN = 16 };

static const IrType *tile_of(IrFunc *f, IrValue like, int rank, const int32_t *shape)
{
    IrCtx *c = f->module->ctx;
    return ir_type_tile(c, ir_type_elem(c, ir_value_type(f, like)), rank, shape);
}

static IrValue shape_op(IrBuilder *b, IrOpcode code, IrValue v, int rank, const int32_t *shape, int64_t attr)
{
    const IrType *t = tile_of(b->func, v, rank, shape);
    IrOp *op = ir_build(b, code, &v, 1, &t, 1, 0);
    op->attr.i = attr;
    return op->results[0];
}

/* [.., n, ..] -> [.., to, ..] along `axis` of a rank-2 tile, by copies of the axis:
 * expand_dims at axis, broadcast that axis to to / n copies, reshape. */
static IrValue repeat(IrBuilder *b, IrValue v, int axis, int32_t to)
{
    const IrType *t = ir_value_type(b->func, v);
    int32_t n = t->shape[axis], e[3], r[2] = {t->shape[0], t->shape[1]};
    if (n >= to) return v;
    r[axis] = to;
    const IrOp *d = b->func->values[v].def;
    if (d && d->code == IR_OP_CONST) {           /* a constant (the zero acc): a bigger one */
        const IrType *ct = tile_of(b->func, v, 2, r);
        IrOp *k = ir_build(b, IR_OP_CONST, NULL, 0, &ct, 1, 0);
        k->attr = d->attr;
        return k->results[0];
    }
    for (int i = 0, j = 0; i < 3; i++) e[i] = i == axis ? 1 : t->shape[j++];
    v = shape_op(b, IR_OP_EXPAND_DIMS, v, 3, e, axis);
    e[axis] = to / n;
    v = shape_op(b, IR_OP_BROADCAST, v, 3, e, 0);
    return shape_op(b, IR_OP_RESHAPE, v, 2, r, 0);
}

/* The inverse of repeat: [.., to, ..] as [.., to / n, n, ..], the copies folded by max
 * (they are equal). */
static IrValue unrepeat(IrBuilder *b, IrValue v, int axis, int32_t n)
{
    const IrType *t = ir_value_type(b->func, v);
    int32_t to = t->shape[axis], s[3], r[2] = {t->shape[0], t->shape[1]};
    if (n >= to) return v;
    for (int i = 0, j = 0; i < 2; i++) {
        if (i == axis) s[j++] = to / n;
        s[j++] = i == axis ? n : t->shape[i];
    }
    v = shape_op(b, IR_OP_RESHAPE, v, 3, s, 0);
    r[axis] = n;
    return shape_op(b, IR_OP_MAX, v, 2, r, axis);
}

/* v with the elements at index >= k along `axis` replaced by z (-0.0 or +0.0; 0 for
 * integers). */
static IrValue zero_past(IrBuilder *b, IrValue v, int axis, int32_t k, double z)
{
    IrFunc *f = b->func;
    IrCtx *c = f->module->ctx;
    const IrType *t = ir_value_type(f, v), *i32 = ir_type_scalar(c, IR_I32);
    int32_t n = t->shape[axis], one[2] = {1, 1};
    one[axis] = n;
    IrValue ix = ir_build1(b, IR_OP_ARANGE, ir_type_tile(c, i32, 1, &n), NULL, 0);
    ix = shape_op(b, IR_OP_RESHAPE, ix, 2, one, 0);
    ix = shape_op(b, IR_OP_BROADCAST, ix, 2, t->shape, 0);
    IrValue ops[3] = {ix, ir_const_int(b, ir_value_type(f, ix), k)};
    const IrType *mt = ir_type_like(c, t, ir_type_scalar(c, IR_I1));
    IrOp *cmp = ir_build(b, IR_OP_CMP, ops, 2, &mt, 1, 0);
    cmp->attr.i = IR_CMP_LT;
    ops[0] = cmp->results[0];
    ops[1] = v;
    ops[2] = ir_elem_is_float(t->elem) ? ir_const_float(b, t, z) : ir_const_int(b, t, 0);
    return ir_build1(b, IR_OP_SELECT, t, ops, 3);
}

static int32_t at_least(int32_t n) { return n < DOT_MIN ? DOT_MIN : n; }

static void pad_dot(IrFunc *f, IrOp *op)
{
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    const IrType *at = ir_value_type(f, op->operands[0]), *bt = ir_value_type(f, op->operands[1]);
    int32_t m = at->shape[0], k = at->shape[1], n = bt->shape[1];
    int32_t mp = at_least(m), kp = at_least(k), np = at_least(n);
    IrValue a = repeat(&b, repeat(&b, op->operands[0], 0, mp), 1, kp);
    IrValue bb = repeat(&b, op->operands[1], 0, kp);
    if (kp > k) a = zero_past(&b, a, 1, k, -0.0), bb = zero_past(&b, bb, 0, k, 0.0);
    bb = repeat(&b, bb, 1, np);
    IrValue acc = repeat(&b, repeat(&b, op->operands[2], 0, mp), 1, np);
    IrValue ops[3] = {a, bb, acc};
    int32_t ps[2] = {mp, np};
    const IrType *dt = tile_of(f, op->results[0], 2, ps);
    IrOp *d = ir_build(&b, IR_OP_DOT, ops, 3, &dt, 1, 0);
    d->attr = op->attr;
    IrValue r = unrepeat(&b, unrepeat(&b, d->results[0], 0, m), 1, n);
    ir_replace_all_uses(f, op->results[0], r);
    ir_op_remove(op);
}

static bool small(const IrFunc *f, const IrOp *op)
{
    const IrType *a = ir_value_type(f, op->operands[0]), *b = ir_value_type(f, op->operands[1]);
    return a->shape[0] < DOT_MIN || a->shape[1] < DOT_MIN || b->shape[1] < DOT_MIN;
}

typedef struct Found {
    IrFunc *f;
    VEC(IrOp *) ops;
} Found;

static void collect(IrOp *op, void *ud)
{
    Found *s = ud;
    if (op->code == IR_OP_DOT && small(s->f, op)) vec_push(&s->ops, op);
}

bool pass_dot_pad(IrFunc *f)
{
    Found s = {f, {0}};
    ir_walk(&f->body, collect, &s);
    for (size_t i = 0; i < s.ops.len; i++) pad_dot(f, s.ops.data[i]);
    bool changed = s.ops.len > 0;
    vec_free(&s.ops);
    return changed;
}
