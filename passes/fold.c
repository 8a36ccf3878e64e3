/* Constant folding.
 *
 * require:    verified IR
 * guarantees: every foldable op whose operands are all constants is a `const` of the
 *             same type (the old op is gone, its uses use the constant); `if` on a
 *             constant condition is inlined; `for` whose trip count is zero is gone
 *
 *   %a = const 2 : i32                     %a = const 2 : i32
 *   %b = const 3 : i32             ->      %b = const 3 : i32
 *   %c = add %a, %b : i32                  %c = const 5 : i32
 *   %t = splat %c : i32[64]                %t = const 5 : i32[64]
 *
 * Folds are exact: they compute what the interpreter computes, in the same way.
 * Integers wrap to the type's width (interp_int_norm); / % and >> follow the type's
 * signedness; floats are computed in double and rounded to the type once
 * (fp_round), which for + - * / and sqrt is the correctly rounded result of the
 * narrow type, exactly as interp_ops.c does; conversions use the interpreter's own
 * interp_convert. Left alone, for the interpreter to run or report: integer division
 * by zero, shifts by a negative amount or by the width or more, and the ops whose
 * float results depend on a math library (exp, log, sin, pow, fma, ...). A constant
 * tile is a splat (a `const` of tile type), so only element-wise ops on splats and
 * shape ops (splat, broadcast, expand_dims, reshape, trans) of constants fold. */
#include "passes.h"

#include <math.h>

#include "ir/interp.h"
#include "ir/scalar.h"

static const IrOp *const_def(const IrFunc *f, IrValue v)
{
    const IrOp *d = f->values[v].def;
    return d && d->code == IR_OP_CONST ? d : NULL;
}

/* A constant's element as the interpreter holds it: normalized or rounded. */
static Slot const_slot(const IrFunc *f, IrValue v)
{
    const IrOp *c = const_def(f, v);
    IrElem e = ir_value_type(f, v)->elem;
    Slot s;
    if (ir_elem_is_float(e)) s.f = fp_round(e, c->attr.f);
    else s.i = interp_int_norm(e, c->attr.i);
    return s;
}

static bool int_binary(IrOpcode code, IrElem e, int64_t a, int64_t b, int64_t *out)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    bool sg = ir_elem_is_signed(e);
    switch (code) {
    case IR_OP_ADD: *out = (int64_t)(ua + ub); break;
    case IR_OP_SUB: *out = (int64_t)(ua - ub); break;
    case IR_OP_MUL: *out = (int64_t)(ua * ub); break;
    case IR_OP_DIV: case IR_OP_REM:
        if (b == 0) return false;
        if (!sg) *out = (int64_t)(code == IR_OP_DIV ? ua / ub : ua % ub);
        else if (a == INT64_MIN && b == -1) *out = code == IR_OP_DIV ? a : 0;
        else *out = code == IR_OP_DIV ? a / b : a % b;
        break;
    case IR_OP_AND: *out = a & b; break;
    case IR_OP_OR: *out = a | b; break;
    case IR_OP_XOR: *out = a ^ b; break;
    case IR_OP_SHL: case IR_OP_SHR:
        if (b < 0 || b >= ir_elem_bits(e)) return false;
        *out = code == IR_OP_SHL ? (int64_t)(ua << b) : sg ? a >> b : (int64_t)(ua >> b);
        break;
    case IR_OP_MINIMUM: *out = (sg ? a <= b : ua <= ub) ? a : b; break;
    case IR_OP_MAXIMUM: *out = (sg ? a >= b : ua >= ub) ? a : b; break;
    default: return false;
    }
    *out = interp_int_norm(e, *out);
    return true;
}

/* IEEE minimum/maximum as the interpreter has them: a NaN wins, -0 < +0. */
static double float_minmax(bool is_min, double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) ? a : b;
    if (a != b) return (a < b) == is_min ? a : b;
    return signbit(a) == is_min ? a : b;
}

static bool float_binary(IrOpcode code, IrElem e, double a, double b, double *out)
{
    switch (code) {
    case IR_OP_ADD: *out = a + b; break;
    case IR_OP_SUB: *out = a - b; break;
    case IR_OP_MUL: *out = a * b; break;
    case IR_OP_DIV: *out = a / b; break;
    case IR_OP_REM: *out = fmod(a, b); break;
    case IR_OP_MINIMUM: case IR_OP_MAXIMUM: *out = float_minmax(code == IR_OP_MINIMUM, a, b); break;
    default: return false;
    }
    *out = fp_round(e, *out);
    return true;
}

static bool int_unary(IrOpcode code, IrElem e, int64_t a, int64_t *out)
{
    switch (code) {
    case IR_OP_NEG: *out = (int64_t)(0 - (uint64_t)a); break;
    case IR_OP_NOT: *out = (int64_t)~(uint64_t)a; break;
    case IR_OP_ABS: *out = ir_elem_is_signed(e) && a < 0 ? (int64_t)(0 - (uint64_t)a) : a; break;
    default: return false;
    }
    *out = interp_int_norm(e, *out);
    return true;
}

/* Only the unary float ops that are exact or correctly rounded in every library. */
static bool float_unary(IrOpcode code, IrElem e, double a, double *out)
{
    switch (code) {
    case IR_OP_NEG: *out = -a; break;
    case IR_OP_ABS: *out = fabs(a); break;
    case IR_OP_FLOOR: *out = floor(a); break;
    case IR_OP_CEIL: *out = ceil(a); break;
    case IR_OP_SQRT: *out = sqrt(a); break;
    default: return false;
    }
    *out = fp_round(e, *out);
    return true;
}


static bool all_const(const IrFunc *f, const IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++)
        if (!const_def(f, op->operands[i])) return false;
    return op->noperands > 0;
}

/* The element of an element-wise op (or shape op) on constants, if it folds. */
static bool eval(const IrFunc *f, const IrOp *op, Slot *out)
{
    IrElem e = ir_value_type(f, op->operands[0])->elem, re = ir_value_type(f, op->results[0])->elem;
    Slot a = const_slot(f, op->operands[0]), b = a;
    if (op->noperands > 1) b = const_slot(f, op->operands[1]);
    bool fl = ir_elem_is_float(e);
    switch (op->code) {
    case IR_OP_SPLAT: case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS: case IR_OP_RESHAPE: case IR_OP_TRANS:
        *out = a;
        return true;
    case IR_OP_CONVERT: *out = interp_convert(e, re, a); return true;
    case IR_OP_BITCAST: *out = interp_bitcast(e, re, a); return true;
    case IR_OP_CMP: out->i = interp_cmp_holds((IrCmp)op->attr.i, interp_cmp_slots(e, a, b)); return true;
    case IR_OP_SELECT: *out = a.i ? b : const_slot(f, op->operands[2]); return true;
    case IR_OP_NEG: case IR_OP_NOT: case IR_OP_ABS: case IR_OP_FLOOR: case IR_OP_CEIL: case IR_OP_SQRT:
        return fl ? float_unary(op->code, e, a.f, &out->f) : int_unary(op->code, e, a.i, &out->i);
    default:
        if (op->noperands != 2 || e == IR_PTR) return false;
        return fl ? float_binary(op->code, e, a.f, b.f, &out->f) : int_binary(op->code, e, a.i, b.i, &out->i);
    }
}

/* Uses of a replaced value are rewritten as the walk reaches them (IrForward):
 * rewriting them by a walk of the whole function per fold made the pass quadratic
 * (10k folds took 20 s). */
typedef struct Fold {
    IrFunc *f;
    IrForward fw;
} Fold;

/* Replaces op (one result) by a constant of its result type holding s. */
static void replace_by_const(Fold *c, IrOp *op, Slot s)
{
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    IrValue old = op->results[0];
    const IrType *t = ir_value_type(c->f, old);
    IrValue k = ir_elem_is_float(t->elem) ? ir_const_float(&b, t, s.f) : ir_const_int(&b, t, s.i);
    c->f->values[k].name = c->f->values[old].name;
    ir_forward_set(&c->fw, old, k);
    ir_op_remove(op);
}

static bool fold_value_op(Fold *c, IrOp *op)
{
    Slot s;
    IrFunc *f = c->f;
    if (!(ir_op_info[op->code].flags & IR_P) || op->nresults != 1 || op->code == IR_OP_CONST) return false;
    if (!all_const(f, op) || ir_value_type(f, op->operands[0])->elem == IR_PTR || !eval(f, op, &s)) return false;
    replace_by_const(c, op, s);
    return true;
}

/* if on a constant: the taken region's ops move before the if, its yield's values
 * replace the results. A region that ends in `return` stays (it leaves the kernel). */
static bool fold_if(Fold *c, IrOp *op)
{
    if (!const_def(c->f, op->operands[0])) return false;
    IrBlock *blk = &op->regions[const_slot(c->f, op->operands[0]).i ? 0 : 1];
    IrOp *term = blk->last;
    bool yields = term && term->code == IR_OP_YIELD;
    if (term && (ir_op_info[term->code].flags & IR_T) && !yields) return false;
    if (!yields && op->nresults) return false;
    for (IrOp *o = blk->first, *next; o && o != (yields ? term : NULL); o = next) {
        next = o->next;
        ir_op_remove(o);
        ir_op_insert_before(o, op);
    }
    for (uint32_t i = 0; i < op->nresults; i++) ir_forward_set(&c->fw, op->results[i], term->operands[i]);
    ir_op_remove(op);
    return true;
}

/* for with constant bounds that runs zero times: its results are its inits. */
static bool fold_for(Fold *c, IrOp *op)
{
    const IrFunc *f = c->f;
    if (!const_def(f, op->operands[0]) || !const_def(f, op->operands[1]) || !const_def(f, op->operands[2]))
        return false;
    IrElem e = ir_value_type(f, op->operands[0])->elem;
    Slot lo = const_slot(f, op->operands[0]), hi = const_slot(f, op->operands[1]), st = const_slot(f, op->operands[2]);
    bool sg = ir_elem_is_signed(e);
    bool step_pos = sg ? st.i > 0 : st.i != 0;
    bool empty = sg ? lo.i >= hi.i : (uint64_t)lo.i >= (uint64_t)hi.i;
    if (!step_pos || !empty) return false;
    for (uint32_t i = 0; i < op->nresults; i++) ir_forward_set(&c->fw, op->results[i], op->operands[3 + i]);
    ir_op_remove(op);
    return true;
}

static bool fold_block(Fold *c, IrBlock *blk)
{
    bool changed = false;
    for (IrOp *op = blk->first, *next; op; op = next) {
        next = op->next;
        ir_forward_operands(&c->fw, op);
        for (uint32_t r = 0; r < op->nregions; r++) changed |= fold_block(c, &op->regions[r]);
        if (op->code == IR_OP_IF) changed |= fold_if(c, op);
        else if (op->code == IR_OP_FOR) changed |= fold_for(c, op);
        else changed |= fold_value_op(c, op);
    }
    return changed;
}

bool pass_fold(IrFunc *f)
{
    Fold c = {f, {0}};
    ir_forward_init(&c.fw, f);
    bool changed = fold_block(&c, &f->body);
    ir_forward_free(&c.fw);
    return changed;
}
