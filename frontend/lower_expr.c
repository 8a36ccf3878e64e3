/* Expressions: names, literals, operators, `as`, indexing and calls.
 *
 * Operators follow LANGUAGE.md 2: the operands' element types are promoted first (on
 * the smaller shapes, where it is cheaper), then the shapes broadcast numpy-style (a
 * scalar is splat; a lower rank gets leading size-1 axes; size-1 axes grow). A literal
 * takes the other operand's type, so `x * 2` keeps x's type and `x + 1.0` makes an
 * integer x f32. Pointer + integer is pointer arithmetic in elements. */
#include <math.h>
#include <string.h>

#include "ir/graph.h"
#include "lower_internal.h"
#include "ir/interp.h"
#include "ir/scalar.h"

const Val VERR = {.t = NULL, .v = IR_NO_VALUE};

Val lw_val(Lower *L, IrValue v) { return (Val){.t = ir_value_type(L->b.func, v), .v = v}; }

/* ---- literals ----------------------------------------------------------------------- */
static bool lit_fits(const Val *v, IrElem e)
{
    int bits = ir_elem_bits(e);
    if (v->big) return e == IR_U64;
    if (e == IR_I1) return v->i == 0 || v->i == 1;
    if (ir_elem_is_signed(e))
        return bits == 64 || (v->i >= -(INT64_C(1) << (bits - 1)) && v->i < (INT64_C(1) << (bits - 1)));
    return v->i >= 0 && (bits == 64 || v->i < (INT64_C(1) << bits));
}

/* The literal as a constant of type t (a scalar or a splat tile), converted exactly as
 * the convert op converts at run time (interp_convert): an integer literal is an i64
 * (u64 when big), a float literal an f64, so `2 as bool` is 1, `-5.0 as u8` saturates
 * to 0 and `300 as u8` wraps to 44 whether or not the passes fold anything. */
static Val lit_convert(Lower *L, const Val *v, const IrType *t, bool checked)
{
    IrElem from = v->lit == LIT_FLOAT ? IR_F64 : v->big ? IR_U64 : IR_I64;
    Slot s = v->lit == LIT_FLOAT ? (Slot){.f = v->f} : (Slot){.i = v->i};
    double exact = v->lit == LIT_FLOAT ? v->f : v->big ? (double)(uint64_t)v->i : (double)v->i;
    s = interp_convert(from, t->elem, s);
    if (!ir_elem_is_float(t->elem)) return lw_val(L, ir_const_int(&L->b, t, s.i));
    if (checked && isfinite(exact) && !isfinite(s.f)) {
        lw_error(L, v->loc, "the literal %g does not fit in %s (it would be %s)", exact, ir_elem_name(t->elem),
                 isnan(s.f) ? "nan" : "inf");
        return VERR;
    }
    return lw_val(L, ir_const_float(&L->b, t, s.f));
}

/* A float literal too large for its type is an error, as an integer literal that does
 * not fit is: `70000.0` as f16 would silently be inf. */
static Val lit_const(Lower *L, const Val *v, const IrType *t) { return lit_convert(L, v, t, true); }

static Val make_int_lit(Lower *L, uint64_t x, Loc loc)
{
    Val v = {.lit = LIT_INT, .v = IR_NO_VALUE, .i = (int64_t)x, .big = x > INT64_MAX, .loc = loc};
    IrElem e = v.big ? IR_U64 : (v.i <= INT32_MAX ? IR_I32 : IR_I64);
    v.t = lw_scalar(L, e);
    return v;
}

IrValue lw_ir(Lower *L, Val *v)
{
    if (v->lit) {
        Val c = lit_const(L, v, v->t);
        *v = c;
    }
    return v->v;
}

Val lw_convert(Lower *L, Val v, IrElem e)
{
    if (!v.t) return VERR;
    if (v.lit) return lit_const(L, &v, lw_like(L, v.t, e));
    if (v.t->elem == e) return v;
    return lw_val(L, ir_build1(&L->b, IR_OP_CONVERT, lw_like(L, v.t, e), &v.v, 1));
}

/* ---- promotion ---------------------------------------------------------------------- */
/* The one promotion rule of the compiler, shared with graphs (ir/graph.h). */
IrElem lw_promote(IrElem a, IrElem b) { return ir_promote(a, b); }

static IrElem lit_default(const Val *vs, int n)
{
    IrElem e = IR_I32;
    for (int i = 0; i < n; i++) {
        if (!vs[i].lit) continue;
        if (vs[i].lit == LIT_FLOAT) return IR_F32;
        e = lw_promote(e, vs[i].t->elem);
    }
    return e;
}

const char *lw_val_str(Lower *L, const Val *v) { return v->lit ? ir_elem_name(v->t->elem) : lw_tstr(L, v->t); }

static bool is_ptr(const Val *v) { return v->t->elem == IR_PTR && !v->lit; }

/* An operand that differs from the first pointer among vs (a number, a literal, a
 * pointer to another type), or -1 when there is none: then vs are all numbers, or
 * all pointers of one type. A literal never matches a pointer. */
int lw_pointer_mismatch(const Val *vs, int n, int *ptr)
{
    for (*ptr = 0; *ptr < n && !is_ptr(&vs[*ptr]); ++*ptr) {}
    for (int i = 0; *ptr < n && i < n; i++)
        if (!is_ptr(&vs[i]) || vs[i].t->pointee != vs[*ptr].t->pointee) return i;
    return -1;
}

/* Pointers join only with pointers of their type (a select of two addresses); mixed
 * with a number they would become a "pointer constant" the IR has no meaning for. */
static bool join_pointers(Lower *L, const Val *vs, int n, Loc loc, IrElem *out)
{
    int p, bad = lw_pointer_mismatch(vs, n, &p);
    if (bad < 0) {
        *out = IR_PTR;
        return true;
    }
    lw_error(L, loc, "cannot combine %s with %s: a pointer goes only with a pointer of its type",
             lw_val_str(L, &vs[p]), lw_val_str(L, &vs[bad]));
    return false;
}

bool lw_join_elems(Lower *L, Val *vs, int n, Loc loc, IrElem *out)
{
    bool have = false, flit = false;
    IrElem e = IR_I32;
    for (int i = 0; i < n; i++)
        if (is_ptr(&vs[i])) return join_pointers(L, vs, n, loc, out);
    for (int i = 0; i < n; i++) {
        if (vs[i].lit) flit |= vs[i].lit == LIT_FLOAT;
        else {
            e = have ? lw_promote(e, vs[i].t->elem) : vs[i].t->elem;
            have = true;
        }
    }
    if (!have) e = lit_default(vs, n);
    if (flit && ir_elem_is_int(e)) e = IR_F32;
    for (int i = 0; i < n && ir_elem_is_int(e); i++) {
        if (vs[i].lit != LIT_INT) continue;
        if (e == IR_I1) e = lw_promote(IR_I32, vs[i].t->elem);
        if (!lit_fits(&vs[i], e)) {
            lw_error(L, vs[i].loc, "the literal %s%llu does not fit in %s", vs[i].i < 0 && !vs[i].big ? "-" : "",
                     vs[i].i < 0 && !vs[i].big ? 0ull - (unsigned long long)vs[i].i : (unsigned long long)vs[i].i,
                     ir_elem_name(e));
            return false;
        }
    }
    *out = e;
    return true;
}

/* ---- broadcasting -------------------------------------------------------------------- */
bool lw_shape_join(const IrType *a, const IrType *b, int *rank, int32_t *shape)
{
    int r = a->rank > b->rank ? a->rank : b->rank;
    for (int i = 0; i < r; i++) {
        int ia = i - (r - a->rank), ib = i - (r - b->rank);
        int32_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) return false;
        shape[i] = da == 1 ? db : da;
    }
    *rank = r;
    return true;
}

Val lw_broadcast_to(Lower *L, Val v, int rank, const int32_t *shape)
{
    if (!v.t) return VERR;
    const IrType *target = ir_type_tile(L->ctx, ir_type_elem(L->ctx, v.t), rank, shape);
    if (v.t == target) return v;
    if (v.lit) return lit_const(L, &v, target);
    if (!v.t->rank) return lw_val(L, ir_build1(&L->b, IR_OP_SPLAT, target, &v.v, 1));
    while (v.t->rank < rank) {
        int32_t s[IR_MAX_RANK] = {1};
        memcpy(s + 1, v.t->shape, (size_t)v.t->rank * sizeof *s);
        IrOp *op = ir_build(&L->b, IR_OP_EXPAND_DIMS, &v.v, 1,
                            (const IrType *[]){ir_type_tile(L->ctx, ir_type_elem(L->ctx, v.t), v.t->rank + 1, s)},
                            1, 0);
        op->attr.i = 0;
        v = lw_val(L, op->results[0]);
    }
    if (v.t == target) return v;
    return lw_val(L, ir_build1(&L->b, IR_OP_BROADCAST, target, &v.v, 1));
}

Val lw_broadcast_like(Lower *L, Val v, const IrType *shape_of, Loc loc, const char *what)
{
    int rank;
    int32_t shape[IR_MAX_RANK];
    if (!v.t) return VERR;
    if (!lw_shape_join(v.t, shape_of, &rank, shape) || rank != shape_of->rank ||
        memcmp(shape, shape_of->shape, (size_t)rank * sizeof *shape)) {
        lw_error(L, loc, "cannot broadcast %s of shape %s to shape %s", what,
                 lw_shape_str(L, v.t->rank, v.t->shape), lw_shape_str(L, shape_of->rank, shape_of->shape));
        return VERR;
    }
    return lw_broadcast_to(L, v, rank, shape);
}

/* v as element e broadcast to shape; a literal becomes one (splat) constant. */
static Val convert_to(Lower *L, Val v, IrElem e, int rank, const int32_t *shape)
{
    if (v.lit) return lit_const(L, &v, ir_type_tile(L->ctx, lw_scalar(L, e), rank, shape));
    return lw_broadcast_to(L, lw_convert(L, v, e), rank, shape);
}

bool lw_unify(Lower *L, Val *vs, int n, Loc loc, const char *what)
{
    IrElem e;
    const IrType *joined = NULL;
    int rank = 0;
    int32_t shape[IR_MAX_RANK];
    for (int i = 0; i < n; i++)
        if (!vs[i].t) return false;
    if (!lw_join_elems(L, vs, n, loc, &e)) return false;
    for (int i = 0; i < n; i++) {
        if (vs[i].lit) continue;
        if (joined && !lw_shape_join(joined, vs[i].t, &rank, shape)) {
            lw_error(L, loc, "the arguments of %s have shapes %s and %s, which do not broadcast", what,
                     lw_shape_str(L, joined->rank, joined->shape), lw_shape_str(L, vs[i].t->rank, vs[i].t->shape));
            return false;
        }
        if (!joined) {
            rank = vs[i].t->rank;
            memcpy(shape, vs[i].t->shape, sizeof shape);
        }
        joined = ir_type_tile(L->ctx, lw_scalar(L, IR_I32), rank, shape);
    }
    for (int i = 0; i < n; i++) vs[i] = convert_to(L, vs[i], e, rank, shape);
    return true;
}

Val lw_build_unary(Lower *L, IrOpcode code, Val a)
{
    if (!a.t) return VERR;
    lw_ir(L, &a);
    return lw_val(L, ir_build1(&L->b, code, a.t, &a.v, 1));
}

Val lw_build_binary(Lower *L, IrOpcode code, const IrType *t, Val a, Val b)
{
    IrValue ops[2] = {lw_ir(L, &a), lw_ir(L, &b)};
    return lw_val(L, ir_build1(&L->b, code, t, ops, 2));
}

/* ---- binary operators ------------------------------------------------------------------ */
enum { K_NUM, K_BITS, K_SHIFT, K_LOGIC, K_CMP };

static const struct {
    IrOpcode code;
    int kind;
    IrCmp cmp;
    bool swap;           /* the message names the right operand first */
    const char *verb;    /* "cannot <verb> ..." with the two shapes */
} binops[] = {
    [AST_ADD] = {IR_OP_ADD, K_NUM, 0, false, "add a tile of shape %s to one of shape %s"},
    [AST_SUB] = {IR_OP_SUB, K_NUM, 0, true, "subtract a tile of shape %s from one of shape %s"},
    [AST_MUL] = {IR_OP_MUL, K_NUM, 0, false, "multiply a tile of shape %s by one of shape %s"},
    [AST_DIV] = {IR_OP_DIV, K_NUM, 0, false, "divide a tile of shape %s by one of shape %s"},
    [AST_REM] = {IR_OP_REM, K_NUM, 0, false, "take the remainder of a tile of shape %s by one of shape %s"},
    [AST_MATMUL] = {IR_OP_DOT, K_NUM, 0, false, ""},
    [AST_SHL] = {IR_OP_SHL, K_SHIFT, 0, false, "shift a tile of shape %s by one of shape %s"},
    [AST_SHR] = {IR_OP_SHR, K_SHIFT, 0, false, "shift a tile of shape %s by one of shape %s"},
    [AST_BAND] = {IR_OP_AND, K_BITS, 0, false, "and a tile of shape %s with one of shape %s"},
    [AST_BXOR] = {IR_OP_XOR, K_BITS, 0, false, "xor a tile of shape %s with one of shape %s"},
    [AST_BOR] = {IR_OP_OR, K_BITS, 0, false, "or a tile of shape %s with one of shape %s"},
    [AST_EQ] = {IR_OP_CMP, K_CMP, IR_CMP_EQ, false, "compare a tile of shape %s with one of shape %s"},
    [AST_NE] = {IR_OP_CMP, K_CMP, IR_CMP_NE, false, "compare a tile of shape %s with one of shape %s"},
    [AST_LT] = {IR_OP_CMP, K_CMP, IR_CMP_LT, false, "compare a tile of shape %s with one of shape %s"},
    [AST_LE] = {IR_OP_CMP, K_CMP, IR_CMP_LE, false, "compare a tile of shape %s with one of shape %s"},
    [AST_GT] = {IR_OP_CMP, K_CMP, IR_CMP_GT, false, "compare a tile of shape %s with one of shape %s"},
    [AST_GE] = {IR_OP_CMP, K_CMP, IR_CMP_GE, false, "compare a tile of shape %s with one of shape %s"},
    [AST_LAND] = {IR_OP_AND, K_LOGIC, 0, false, "and a tile of shape %s with one of shape %s"},
    [AST_LOR] = {IR_OP_OR, K_LOGIC, 0, false, "or a tile of shape %s with one of shape %s"},
};

static IrElem val_elem(const Val *v) { return v->lit == LIT_FLOAT ? IR_F32 : v->t->elem; }

/* The operand kind check of an operator; false with an error. */
static bool check_kinds(Lower *L, int op, const Val *a, const Val *b, Loc loc)
{
    const Val *vs[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        IrElem e = val_elem(vs[i]);
        const char *bad = NULL;
        switch (binops[op].kind) {
        case K_BITS: bad = ir_elem_is_int(e) ? NULL : "integer or boolean"; break;
        case K_SHIFT: bad = ir_elem_is_int(e) && e != IR_I1 ? NULL : "integer"; break;
        case K_LOGIC: bad = e == IR_I1 && !vs[i]->lit ? NULL : "boolean"; break;
        default: bad = e == IR_PTR ? "number" : NULL; break;
        }
        if (e == IR_PTR) {
            lw_error(L, loc, "'%s' is not defined for pointers; a pointer moves with p + n and p - n",
                     ast_binop_text[op]);
            return false;
        }
        if (bad) {
            lw_error(L, loc, "'%s' needs %s operands%s, got %s", ast_binop_text[op], bad,
                     binops[op].kind == K_LOGIC ? " (comparisons)" : "",
                     vs[i]->lit ? ir_elem_name(e) : lw_tstr(L, vs[i]->t));
            return false;
        }
    }
    return true;
}

static Val ptr_arith(Lower *L, int op, Val a, Val b, Loc loc)
{
    bool ap = a.t->elem == IR_PTR;
    Val p = ap ? a : b, off = ap ? b : a;
    int rank;
    int32_t shape[IR_MAX_RANK];
    if (off.t->elem == IR_PTR || (op == AST_SUB && !ap) || !ir_elem_is_int(val_elem(&off)) ||
        val_elem(&off) == IR_I1) {
        lw_error(L, loc, "cannot %s %s and %s: a pointer moves by an integer number of elements",
                 op == AST_ADD ? "add" : "subtract", a.lit ? ir_elem_name(val_elem(&a)) : lw_tstr(L, a.t),
                 b.lit ? ir_elem_name(val_elem(&b)) : lw_tstr(L, b.t));
        return VERR;
    }
    lw_ir(L, &off);
    if (op == AST_SUB) off = lw_build_unary(L, IR_OP_NEG, off);
    if (!lw_shape_join(p.t, off.t, &rank, shape)) {
        lw_error(L, loc, "cannot offset a pointer tile of shape %s by one of shape %s",
                 lw_shape_str(L, p.t->rank, p.t->shape), lw_shape_str(L, off.t->rank, off.t->shape));
        return VERR;
    }
    p = lw_broadcast_to(L, p, rank, shape);
    off = lw_broadcast_to(L, off, rank, shape);
    return lw_build_binary(L, IR_OP_ADDPTR, p.t, p, off);
}

static double lit_value(const Val *v)
{
    return v->lit == LIT_FLOAT ? v->f : v->big ? (double)(uint64_t)v->i : (double)v->i;
}

/* Arithmetic on two float literals that leaves the type's range: the IR computes it
 * (and the fold pass folds it) to inf, as IEEE says, but it is most likely a mistake,
 * so the frontend warns. */
static void warn_lit_overflow(Lower *L, int op, const Val *a, const Val *b, IrElem e, Loc loc)
{
    double x = lit_value(a), y = lit_value(b), r;
    switch (op) {
    case AST_ADD: r = x + y; break;
    case AST_SUB: r = x - y; break;
    case AST_MUL: r = x * y; break;
    case AST_DIV: r = y != 0 ? x / y : 0; break;
    default: return;
    }
    if (isfinite(x) && isfinite(y) && !isfinite(fp_round(e, r)))
        lw_warning(L, loc, "%g %s %g overflows %s to inf", x, ast_binop_text[op], y, ir_elem_name(e));
}

Val lw_binop(Lower *L, int op, Val a, Val b, Loc loc)
{
    IrElem e;
    int rank;
    int32_t shape[IR_MAX_RANK];
    if (!a.t || !b.t) return VERR;
    L->b.loc = loc;
    if (op == AST_MATMUL) {
        lw_error(L, loc, "'@' is only allowed in graphs; use dot(a, b) in kernels");
        return VERR;
    }
    if ((a.t->elem == IR_PTR || b.t->elem == IR_PTR) && (op == AST_ADD || op == AST_SUB))
        return ptr_arith(L, op, a, b, loc);
    if (!check_kinds(L, op, &a, &b, loc) || !lw_join_elems(L, (Val[]){a, b}, 2, loc, &e)) return VERR;
    if (!a.lit) a = lw_convert(L, a, e);
    if (!b.lit) b = lw_convert(L, b, e);
    if (!lw_shape_join(a.t, b.t, &rank, shape)) {
        const IrType *x = binops[op].swap ? b.t : a.t, *y = binops[op].swap ? a.t : b.t;
        char fmt[160];
        snprintf(fmt, sizeof fmt, "cannot %s", binops[op].verb);
        lw_error(L, loc, fmt, lw_shape_str(L, x->rank, x->shape), lw_shape_str(L, y->rank, y->shape));
        return VERR;
    }
    if (a.lit && b.lit && ir_elem_is_float(e)) warn_lit_overflow(L, op, &a, &b, e, loc);
    a = convert_to(L, a, e, rank, shape);
    b = convert_to(L, b, e, rank, shape);
    if (!a.t || !b.t) return VERR;
    Val r = lw_build_binary(L, binops[op].code, binops[op].kind == K_CMP ? lw_like(L, a.t, IR_I1) : a.t, a, b);
    if (binops[op].kind == K_CMP) L->b.func->values[r.v].def->attr.i = binops[op].cmp;
    return r;
}

/* ---- unary operators, `as`, indexing ------------------------------------------------------- */
static Val negate_lit(Lower *L, Val v, Loc loc)
{
    if (v.lit == LIT_FLOAT) {
        v.f = -v.f;
        return v;
    }
    if (v.big && (uint64_t)v.i != (UINT64_C(1) << 63)) {
        lw_error(L, loc, "the literal -%llu does not fit in i64", (unsigned long long)v.i);
        return VERR;
    }
    Val n = make_int_lit(L, 0, v.loc);
    n.i = (int64_t)(0 - (uint64_t)v.i);
    n.big = false;
    n.t = lw_scalar(L, n.i >= INT32_MIN && n.i <= INT32_MAX ? IR_I32 : IR_I64);
    n.loc = loc;
    return n;
}

static Val lower_unary(Lower *L, const AstExpr *e)
{
    Val a = lower_expr(L, e->lhs);
    if (!a.t) return VERR;
    L->b.loc = e->loc;
    IrElem el = val_elem(&a);
    if (e->op == '-' && a.lit) return negate_lit(L, a, e->loc);
    if (e->op == '-' && el != IR_PTR && el != IR_I1) return lw_build_unary(L, IR_OP_NEG, a);
    if (e->op == '!' && el == IR_I1 && !a.lit) return lw_build_unary(L, IR_OP_NOT, a);
    if (e->op == '~' && ir_elem_is_int(el)) return lw_build_unary(L, IR_OP_NOT, a);
    lw_error(L, e->loc, "'%c' needs %s operand, got %s", e->op,
             e->op == '-' ? "a number" : e->op == '!' ? "a boolean (comparison)" : "an integer",
             a.lit ? ir_elem_name(el) : lw_tstr(L, a.t));
    return VERR;
}

/* The element type of e's value without evaluating e (C's sizeof): e is lowered for
 * its type and the ops it built are removed again. A literal has its default type
 * (i32, f32). IR_NUM_ELEMS after an error. */
IrElem lw_dtype_of(Lower *L, const AstExpr *e)
{
    IrBlock *blk = L->b.block;
    IrOp *before = L->b.before, *mark = before ? before->prev : blk->last;
    Val v = lower_expr(L, e);
    IrOp *op = mark ? mark->next : blk->first;
    while (op && op != before) {
        IrOp *next = op->next;
        ir_op_remove(op);
        op = next;
    }
    if (!v.t) return IR_NUM_ELEMS;
    if (v.t->elem == IR_PTR) {
        lw_error(L, e->loc, "dtype(...) of a pointer (%s) is no number type; for the type it points to write "
                 "dtype(load(p)), which loads nothing", lw_tstr(L, v.t));
        return IR_NUM_ELEMS;
    }
    return v.t->elem;
}

static Val lower_cast(Lower *L, const AstExpr *e)
{
    Val a = lower_expr(L, e->lhs);
    const IrType *t = NULL;
    if (e->type->kind == AST_TYPE_OF) {
        IrElem el = lw_dtype_of(L, e->type->of);
        t = el == IR_NUM_ELEMS ? NULL : lw_scalar(L, el);
    } else {
        t = lw_type(L, e->type);
    }
    if (!a.t || !t) return VERR;
    L->b.loc = e->loc;
    if (t->elem == IR_PTR || a.t->elem == IR_PTR) {
        lw_error(L, e->loc, "'as' converts numbers; cannot convert %s to %s", lw_tstr(L, a.t), lw_tstr(L, t));
        return VERR;
    }
    /* an explicit conversion of a literal converts as at run time (1e50 as f16 is inf) */
    if (a.lit) return lit_convert(L, &a, lw_like(L, a.t, t->elem), false);
    return lw_convert(L, a, t->elem);
}

static Val expand_at(Lower *L, Val v, int pos)
{
    int32_t s[IR_MAX_RANK] = {0};
    for (int i = 0, j = 0; i <= v.t->rank; i++) s[i] = i == pos ? 1 : v.t->shape[j++];
    const IrType *t = ir_type_tile(L->ctx, ir_type_elem(L->ctx, v.t), v.t->rank + 1, s);
    IrOp *op = ir_build(&L->b, IR_OP_EXPAND_DIMS, &v.v, 1, &t, 1, 0);
    op->attr.i = pos;
    return lw_val(L, op->results[0]);
}

static Val lower_index(Lower *L, const AstExpr *e)
{
    Val v = lower_expr(L, e->lhs);
    uint32_t slices = 0;
    if (!v.t) return VERR;
    for (uint32_t i = 0; i < e->nargs; i++) {
        if (e->args[i]->kind != AST_SLICE && e->args[i]->kind != AST_NONE) {
            lw_error(L, e->args[i]->loc, "only ':' and 'None' are allowed in an index, as in t[:, None]");
            return VERR;
        }
        slices += e->args[i]->kind == AST_SLICE;
    }
    if ((v.lit || !v.t->rank) && slices == 0 && e->nargs <= IR_MAX_RANK) {   /* s[None]: a [1] tile */
        int32_t ones[IR_MAX_RANK];
        for (uint32_t i = 0; i < e->nargs; i++) ones[i] = 1;
        L->b.loc = e->loc;
        lw_ir(L, &v);
        return lw_broadcast_to(L, v, (int)e->nargs, ones);
    }
    if (v.lit || !v.t->rank) {
        lw_error(L, e->loc, "cannot index a scalar with ':'; s[None] makes a tile of shape [1]");
        return VERR;
    }
    if (slices != v.t->rank || e->nargs > IR_MAX_RANK) {
        if (e->nargs > IR_MAX_RANK)
            lw_error(L, e->loc, "a tile has at most %d dimensions, the index makes %u", IR_MAX_RANK, e->nargs);
        else
            lw_error(L, e->loc, "indexing a tile of rank %u needs one ':' per axis", v.t->rank);
        return VERR;
    }
    L->b.loc = e->loc;
    for (uint32_t i = 0; i < e->nargs; i++)
        if (e->args[i]->kind == AST_NONE) v = expand_at(L, v, (int)i);
    return v;
}

/* ---- names and calls ---------------------------------------------------------------------- */
static Val lower_name(Lower *L, const AstExpr *e)
{
    Binding *bd = lw_lookup(L, e->name);
    IrElem el;
    if (bd) {
        Val v = bd->val;
        if (v.lit) v.loc = e->loc;
        return v;
    }
    if (ir_elem_from_name(e->name, strlen(e->name), &el))
        lw_error(L, e->loc, "'%s' is a type, not a value", e->name);
    else
        lw_error(L, e->loc, "unknown name '%s'", e->name);
    return VERR;
}

static void unknown_function(Lower *L, const AstExpr *e)
{
    const char *best = lw_closest_builtin(e->name);
    int bd = best ? lw_edit_distance(best, e->name) : 99;
    for (uint32_t i = 0; i < L->prog->nitems; i++) {
        const AstItem *it = &L->prog->items[i];
        int d = it->kind == AST_FN ? lw_edit_distance(it->name, e->name) : 99;
        if (d < bd) bd = d, best = it->name;
    }
    if (bd <= lw_suggest_limit(e->name)) lw_error(L, e->loc, "unknown function '%s'; did you mean '%s'?", e->name, best);
    else lw_error(L, e->loc, "unknown function '%s'", e->name);
}

static Val lower_call(Lower *L, const AstExpr *e)
{
    Val out = VERR;
    L->b.loc = e->loc;
    if (L->in_grid && strcmp(e->name, "cdiv") && strcmp(e->name, "minimum") && strcmp(e->name, "maximum")) {
        lw_error(L, e->loc, "grid(...) may only use parameters, constants, cdiv, minimum and maximum");
        return VERR;
    }
    if (lower_builtin(L, e, &out)) return out;
    const AstItem *it = lw_find_item(L, e->name);
    if (!it && !strcmp(e->name, "dtype")) {
        lw_error(L, e->loc, "dtype(x) names a type, not a value: write y as dtype(x), or zeros(shape, dtype(x))");
        return VERR;
    }
    if (!it) {
        unknown_function(L, e);
        return VERR;
    }
    if (it->kind != AST_FN) {
        lw_error(L, e->loc, "cannot call %s '%s': only fns can be called", it->kind == AST_KERNEL ? "kernel" : "graph",
                 e->name);
        return VERR;
    }
    int n = lower_fn_call(L, e, it, &out, 1);
    if (n == 1) return out;
    if (n == 0) return VVOID;
    if (n > 1) lw_error(L, e->loc, "fn '%s' returns %d values; take them with `let (a, b) = %s(...)`", e->name, n, e->name);
    return VERR;
}

/* A binary operator, and the left-associative chain below it (`a + b + c + ...`, up to
 * FE_MAX_CHAIN long), without recursing down the chain: the C stack holds one frame
 * per nesting level, not one per operator. Operands are lowered left to right. */
static Val lower_chain(Lower *L, const AstExpr *e)
{
    VEC(const AstExpr *) spine = {0};
    const AstExpr *x = e;
    for (; x->kind == AST_BINARY; x = x->lhs) vec_push(&spine, x);
    Val a = lower_expr(L, x);
    for (size_t i = spine.len; i-- > 0;) {
        const AstExpr *op = spine.data[i];
        Val b = lower_expr(L, op->rhs);
        a = lw_binop(L, op->op, a, b, op->loc);
    }
    vec_free(&spine);
    return a;
}

Val lower_expr(Lower *L, const AstExpr *e)
{
    L->b.loc = e->loc;
    switch (e->kind) {
    case AST_INT: return make_int_lit(L, e->ival, e->loc);
    case AST_FLOAT: return (Val){.t = lw_scalar(L, IR_F32), .v = IR_NO_VALUE, .lit = LIT_FLOAT, .f = e->fval, .loc = e->loc};
    case AST_BOOL: return lw_val(L, ir_const_int(&L->b, lw_scalar(L, IR_I1), (int64_t)e->ival));
    case AST_NAME: return lower_name(L, e);
    case AST_UNARY: return lower_unary(L, e);
    case AST_BINARY: return lower_chain(L, e);
    case AST_CAST: return lower_cast(L, e);
    case AST_INDEX: return lower_index(L, e);
    case AST_IF_EXPR: return lower_if_expr(L, e);
    case AST_CALL: {
        Val v = lower_call(L, e);
        if (!v.t && v.v == VVOID.v) lw_error(L, e->loc, "%s(...) gives no value", e->name);
        return v.t ? v : VERR;
    }
    case AST_STRING: lw_error(L, e->loc, "a string is only allowed as the message of assert or print"); break;
    case AST_NONE: lw_error(L, e->loc, "'None' is only allowed in an index, as in t[:, None]"); break;
    case AST_SLICE: lw_error(L, e->loc, "':' is only allowed in an index, as in t[:, None]"); break;
    case AST_LIST: lw_error(L, e->loc, "a list like [64, 32] is only allowed as a shape argument"); break;
    case AST_MAP: lw_error(L, e->loc, "{...} is only allowed in attributes"); break;
    case AST_TUPLE: lw_error(L, e->loc, "a tuple is only allowed in a return statement and as the tiles of reduce or associative_scan"); break;
    }
    return VERR;
}

Val lower_expr_stmt(Lower *L, const AstExpr *e)
{
    return e->kind == AST_CALL ? lower_call(L, e) : lower_expr(L, e);
}
