/* Canonicalization: algebraic identities that need no constant folding, and one
 * canonical operand order, so CSE sees equal computations as equal ops.
 *
 * require:    verified IR
 * guarantees: constants stand to the right of commutative ops; none of the
 *             identities below is left; results are bit-identical to the input's
 *
 *   %c = add %zero, %x : i32        ->   %c = add %x, %zero : i32   (constant right)
 *   %d = mul %x, %one : f32         ->   uses of %d use %x
 *   %e = select %true, %a, %b       ->   uses of %e use %a
 *
 * Identities (x any value, c a constant, tiles of a splat constant included):
 *   x+0, x-0, x*1, x/1, x|0, x^0, x<<0, x>>0, x&-1 -> x;  x*0, x&0 -> 0 (integers)
 *   x-x, x^x -> a new constant 0 (integers)
 *   select(true/false, a, b) -> a / b;  select(c, a, a) -> a
 *   convert, broadcast, reshape to the same type -> x;  trans of rank <= 1 -> x
 *   not(not x), neg(neg x) -> x
 * For floats only the exact ones apply: x + -0.0 (not x + 0.0: -0.0 + 0.0 is +0.0),
 * x - 0.0, x * 1.0, x / 1.0; x * 0 is not 0 for NaN, inf or -x. multiple_of and
 * max_contiguous are hints for later passes and are never removed here.
 *
 * A replaced op is removed (it is pure and has no uses left). */
#include "passes.h"

#include <math.h>
#include <string.h>

static IrOp *const_def(const IrFunc *f, IrValue v)
{
    IrOp *d = f->values[v].def;
    return d && d->code == IR_OP_CONST ? d : NULL;
}

/* The low `bits` bits of every element are equal to those of `want`. */
static bool is_int_const(const IrFunc *f, IrValue v, int64_t want)
{
    const IrOp *c = const_def(f, v);
    const IrType *t = ir_value_type(f, v);
    if (!c || !ir_elem_is_int(t->elem)) return false;
    int bits = ir_elem_bits(t->elem);
    uint64_t mask = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
    return (((uint64_t)c->attr.i ^ (uint64_t)want) & mask) == 0;
}

/* Equal to `want`, the sign of zero included. */
static bool is_float_const(const IrFunc *f, IrValue v, double want)
{
    const IrOp *c = const_def(f, v);
    return c && ir_elem_is_float(ir_value_type(f, v)->elem) && c->attr.f == want &&
           signbit(c->attr.f) == signbit(want);
}

/* x op c == x: the neutral constant of the op for ints, or its exact float one. */
static bool is_neutral(const IrFunc *f, IrValue c, int64_t int_v, double float_v)
{
    return is_int_const(f, c, int_v) || is_float_const(f, c, float_v);
}

static bool is_true(const IrFunc *f, IrValue v) { return is_int_const(f, v, 1); }
static bool is_false(const IrFunc *f, IrValue v) { return is_int_const(f, v, 0); }

static bool same_type(const IrFunc *f, const IrOp *op) { return ir_value_type(f, op->operands[0]) == ir_value_type(f, op->results[0]); }

/* x = op(op(x)) for an involution op (not, neg). */
static IrValue involution(const IrFunc *f, const IrOp *op)
{
    const IrOp *inner = f->values[op->operands[0]].def;
    return inner && inner->code == op->code ? inner->operands[0] : IR_NO_VALUE;
}

/* The binary identities with the constant on the right (the canonical order). */
static IrValue simplify_binary(const IrFunc *f, const IrOp *op)
{
    IrValue x = op->operands[0], c = op->operands[1];
    switch (op->code) {
    case IR_OP_ADD: return is_neutral(f, c, 0, -0.0) ? x : IR_NO_VALUE;
    case IR_OP_SUB: return is_neutral(f, c, 0, 0.0) ? x : IR_NO_VALUE;
    case IR_OP_MUL: return is_neutral(f, c, 1, 1.0) ? x : is_int_const(f, c, 0) ? c : IR_NO_VALUE;
    case IR_OP_DIV: return is_neutral(f, c, 1, 1.0) ? x : IR_NO_VALUE;
    case IR_OP_AND: return is_int_const(f, c, -1) ? x : is_int_const(f, c, 0) ? c : IR_NO_VALUE;
    case IR_OP_OR: case IR_OP_XOR: case IR_OP_SHL: case IR_OP_SHR:
        return is_int_const(f, c, 0) ? x : IR_NO_VALUE;
    default: return IR_NO_VALUE;
    }
}

/* The value the op's result equals, or IR_NO_VALUE. */
static IrValue simplify(const IrFunc *f, const IrOp *op)
{
    switch (op->code) {
    case IR_OP_SELECT:
        if (op->operands[1] == op->operands[2] || is_true(f, op->operands[0])) return op->operands[1];
        return is_false(f, op->operands[0]) ? op->operands[2] : IR_NO_VALUE;
    case IR_OP_CONVERT: case IR_OP_BROADCAST: case IR_OP_RESHAPE: case IR_OP_EXPAND_DIMS:
        return same_type(f, op) ? op->operands[0] : IR_NO_VALUE;
    case IR_OP_TRANS:
        return same_type(f, op) && ir_value_type(f, op->operands[0])->rank <= 1 ? op->operands[0] : IR_NO_VALUE;
    case IR_OP_NOT: case IR_OP_NEG: return involution(f, op);
    default: return op->nregions == 0 && op->noperands == 2 ? simplify_binary(f, op) : IR_NO_VALUE;
    }
}

/* c op x -> x op c for commutative ops. */
static bool constant_right(const IrFunc *f, IrOp *op)
{
    if (!(ir_op_info[op->code].flags & IR_C) || op->noperands != 2) return false;
    if (!const_def(f, op->operands[0]) || const_def(f, op->operands[1])) return false;
    IrValue t = op->operands[0];
    op->operands[0] = op->operands[1];
    op->operands[1] = t;
    return true;
}

/* Uses of a replaced result are rewritten as the walk reaches them (IrForward): a
 * walk of the whole function per identity made the pass quadratic (20k took 58 s). */
typedef struct Ctx {
    IrFunc *f;
    bool changed;
    VEC(IrOp *) dead;            /* replaced ops, removed after the walk */
    IrForward fw;
} Ctx;

/* x - x and x ^ x of integers: a new constant 0 (x - x is NaN for x = inf). */
static IrValue self_cancel(IrFunc *f, IrOp *op)
{
    const IrType *t = ir_value_type(f, op->results[0]);
    if ((op->code != IR_OP_SUB && op->code != IR_OP_XOR) || op->operands[0] != op->operands[1] ||
        !ir_elem_is_int(t->elem))
        return IR_NO_VALUE;
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    return ir_const_int(&b, t, 0);
}

static void canonicalize_op(IrOp *op, void *ud)
{
    Ctx *c = ud;
    ir_forward_operands(&c->fw, op);
    c->changed |= constant_right(c->f, op);
    if (op->nresults != 1 || !(ir_op_info[op->code].flags & IR_P)) return;
    IrValue to = simplify(c->f, op);
    if (to == IR_NO_VALUE) to = self_cancel(c->f, op);
    if (to == IR_NO_VALUE || ir_value_type(c->f, to) != ir_value_type(c->f, op->results[0])) return;
    ir_forward_set(&c->fw, op->results[0], to);
    vec_push(&c->dead, op);
    c->changed = true;
}

bool pass_canonicalize(IrFunc *f)
{
    Ctx c = {f, false, {0}, {0}};
    ir_forward_init(&c.fw, f);
    ir_walk(&f->body, canonicalize_op, &c);
    for (size_t i = 0; i < c.dead.len; i++) ir_op_remove(c.dead.data[i]);
    vec_free(&c.dead);
    ir_forward_free(&c.fw);
    return c.changed;
}
