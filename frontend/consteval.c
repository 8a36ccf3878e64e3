/* Compile-time integer evaluation.
 *
 * Tile shapes, arange bounds, axes and hint values must be known when the kernel is
 * compiled: they are expressions of literals, const parameters (and lets bound to such
 * expressions), combined with + - * / % << >> & | ^, comparisons, && || ! and cdiv.
 * Values are exact i64 and never wrap: a result outside i64, a division by zero or a
 * shift count outside 0..63 is an error at the operator (CE_ERROR, reported once here);
 * an expression that is merely not compile-time (a load) is CE_NONE and the caller
 * says which use needed it.
 *
 * A let has a run-time value as well, computed in its expression's type (i32 for
 * `B * B` with `const B: i32`). ce_eval_typed follows those types (the rule of
 * lw_join_elems: a literal takes the other operand's type, two literals give i32, or
 * i64 when one needs it) and a result outside its type is an error too, so a let's
 * compile-time value is always its run-time value. */
#include <string.h>

#include "lower_internal.h"

static FeIntStatus shl(int64_t a, int64_t b, int64_t *out)
{
    if (b < 0 || b > 63) return FE_INT_SHIFT;
    int64_t r = (int64_t)((uint64_t)a << b);
    if ((r >> b) != a) return FE_INT_OVERFLOW;
    *out = r;
    return FE_INT_OK;
}

static FeIntStatus divide(int op, int64_t a, int64_t b, int64_t *out)
{
    if (b == 0) return FE_INT_DIV_ZERO;
    if (a == INT64_MIN && b == -1) return FE_INT_OVERFLOW;
    *out = op == AST_DIV ? a / b : a % b;
    return FE_INT_OK;
}

static FeIntStatus ovf(bool overflowed) { return overflowed ? FE_INT_OVERFLOW : FE_INT_OK; }

FeIntStatus fe_int_binop(int op, int64_t a, int64_t b, int64_t *out)
{
    switch (op) {
    case AST_ADD: return ovf(__builtin_add_overflow(a, b, out));
    case AST_SUB: return ovf(__builtin_sub_overflow(a, b, out));
    case AST_MUL: return ovf(__builtin_mul_overflow(a, b, out));
    case AST_DIV:
    case AST_REM: return divide(op, a, b, out);
    case AST_SHL: return shl(a, b, out);
    case AST_SHR:
        if (b < 0 || b > 63) return FE_INT_SHIFT;
        *out = a >> b;
        return FE_INT_OK;
    case AST_BAND: *out = a & b; return FE_INT_OK;
    case AST_BOR: *out = a | b; return FE_INT_OK;
    case AST_BXOR: *out = a ^ b; return FE_INT_OK;
    case AST_EQ: *out = a == b; return FE_INT_OK;
    case AST_NE: *out = a != b; return FE_INT_OK;
    case AST_LT: *out = a < b; return FE_INT_OK;
    case AST_LE: *out = a <= b; return FE_INT_OK;
    case AST_GT: *out = a > b; return FE_INT_OK;
    case AST_GE: *out = a >= b; return FE_INT_OK;
    case AST_LAND: *out = a && b; return FE_INT_OK;
    case AST_LOR: *out = a || b; return FE_INT_OK;
    default: return FE_INT_NOT_INT;
    }
}

FeIntStatus fe_int_unop(int op, int64_t a, int64_t *out)
{
    switch (op) {
    case '-': return ovf(__builtin_sub_overflow((int64_t)0, a, out));
    case '~': *out = ~a; return FE_INT_OK;
    case '!': *out = !a; return FE_INT_OK;
    default: return FE_INT_NOT_INT;
    }
}

/* ---- values and their run-time types --------------------------------------------------- */
typedef struct CeVal {
    int64_t v;
    IrElem t;            /* its type at run time (IR_I64 when not typed) */
    bool lit;            /* a literal: takes the type of the other operand */
} CeVal;

typedef struct Ce {
    Lower *L;
    bool typed;          /* follow run-time types (ce_eval_typed) */
} Ce;

static CeStatus eval(Ce *c, const AstExpr *e, CeVal *out);

static IrElem lit_type(int64_t v) { return v >= INT32_MIN && v <= INT32_MAX ? IR_I32 : IR_I64; }

static bool is_cmp(int op) { return op >= AST_EQ; }

/* The type of a OP b at run time, as lw_join_elems gives it; IR_NUM_ELEMS when a
 * literal does not fit it (lowering reports that). */
static IrElem join(const CeVal *a, const CeVal *b)
{
    if (a->lit && b->lit) return ir_promote(a->t, b->t);
    if (!a->lit && !b->lit) return ir_promote(a->t, b->t);
    const CeVal *x = a->lit ? b : a, *l = a->lit ? a : b;
    IrElem e = x->t == IR_I1 ? ir_promote(IR_I32, l->t) : x->t;
    return lw_int_fits(l->v, false, e) ? e : IR_NUM_ELEMS;
}

/* Whether v is a value of t; u64 values past i64 have no compile-time value. */
static FeIntStatus in_type(Ce *c, int64_t v, IrElem t)
{
    return !c->typed || lw_int_fits(v, false, t) ? FE_INT_OK : FE_INT_OVERFLOW;
}

/* ---- diagnostics: one per error, at the operator --------------------------------------- */
static CeStatus binop_error(Ce *c, Loc at, FeIntStatus s, int op, const CeVal *a, const CeVal *b, IrElem t)
{
    long long x = (long long)a->v, y = (long long)b->v;
    const char *o = ast_binop_text[op], *tn = ir_elem_name(t);
    if (s == FE_INT_NOT_INT) return CE_NONE;
    if (s == FE_INT_OVERFLOW && t == IR_U64) return CE_NONE;   /* may fit u64: left to run time */
    if (s == FE_INT_OVERFLOW)
        lw_error(c->L, at, "%lld %s %lld overflows %s (compile-time integers never wrap)", x, o, y, tn);
    else if (s == FE_INT_DIV_ZERO) lw_error(c->L, at, "%lld %s 0 divides by zero at compile time", x, o);
    else lw_error(c->L, at, "%lld %s %lld shifts by %lld, out of range for %s (0 to %d)", x, o, y, y, tn,
                  (c->typed ? ir_elem_bits(t) : 64) - 1);
    return CE_ERROR;
}

static CeStatus binop(Ce *c, Loc at, int op, CeVal a, CeVal b, CeVal *out)
{
    IrElem t = c->typed ? join(&a, &b) : IR_I64;
    FeIntStatus s = FE_INT_OK;
    int64_t r = 0;
    if (t == IR_NUM_ELEMS) return CE_NONE;
    if ((op == AST_SHL || op == AST_SHR) && c->typed && (b.v < 0 || b.v >= ir_elem_bits(t))) s = FE_INT_SHIFT;
    if (s == FE_INT_OK) s = fe_int_binop(op, a.v, b.v, &r);
    *out = (CeVal){.v = r, .t = is_cmp(op) ? IR_I1 : t};
    if (s == FE_INT_OK) s = in_type(c, out->v, out->t);
    return s == FE_INT_OK ? CE_OK : binop_error(c, at, s, op, &a, &b, t);
}

/* ~ on an unsigned type flips its bits only: ~1 as u8 is 254, not -2. */
static FeIntStatus complement(Ce *c, const CeVal *a, int64_t *out)
{
    bool narrow_unsigned = c->typed && !a->lit && !ir_elem_is_signed(a->t);
    int bits = ir_elem_bits(a->t);
    if (narrow_unsigned && bits == 64) return FE_INT_NOT_INT;
    *out = narrow_unsigned ? a->v ^ ((INT64_C(1) << bits) - 1) : ~a->v;
    return FE_INT_OK;
}

static CeStatus unop(Ce *c, const AstExpr *e, CeVal a, CeVal *out)
{
    int64_t r = 0;
    FeIntStatus s = e->op == '~' ? complement(c, &a, &r) : fe_int_unop(e->op, a.v, &r);
    IrElem t = e->op == '!' ? IR_I1 : a.t;
    *out = (CeVal){.v = r, .t = t, .lit = a.lit && e->op == '-'};
    if (out->lit) out->t = lit_type(out->v);
    if (s == FE_INT_OK && !out->lit) s = in_type(c, out->v, t);
    if (s == FE_INT_OK) return CE_OK;
    if (s == FE_INT_NOT_INT || (c->typed && t == IR_U64)) return CE_NONE;
    lw_error(c->L, e->loc, "-(%lld) overflows %s (compile-time integers never wrap)", (long long)a.v,
             ir_elem_name(c->typed ? t : IR_I64));
    return CE_ERROR;
}

/* ---- expressions ------------------------------------------------------------------------ */
/* cdiv(a, b) = (a + b - 1) / b, the one call allowed in constant expressions. */
static CeStatus ce_call(Ce *c, const AstExpr *e, CeVal *out)
{
    CeVal a, b, one = {.v = 1, .t = IR_I32, .lit = true};
    CeStatus s;
    if (strcmp(e->name, "cdiv") || e->nargs != 2) return CE_NONE;
    if (e->arg_names && (e->arg_names[0] || e->arg_names[1])) return CE_NONE;
    if ((s = eval(c, e->args[0], &a)) != CE_OK || (s = eval(c, e->args[1], &b)) != CE_OK) return s;
    if ((s = binop(c, e->loc, AST_ADD, a, b, out)) != CE_OK) return s;
    if ((s = binop(c, e->loc, AST_SUB, *out, one, out)) != CE_OK) return s;
    return binop(c, e->loc, AST_DIV, *out, b, out);
}

/* A left-associative chain without recursing down it (see lower_chain). */
static CeStatus ce_chain(Ce *c, const AstExpr *e, CeVal *out)
{
    VEC(const AstExpr *) spine = {0};
    const AstExpr *x = e;
    CeVal b;
    for (; x->kind == AST_BINARY; x = x->lhs) vec_push(&spine, x);
    CeStatus s = eval(c, x, out);
    for (size_t i = spine.len; s == CE_OK && i-- > 0;) {
        const AstExpr *op = spine.data[i];
        s = eval(c, op->rhs, &b);
        if (s == CE_OK) s = binop(c, op->loc, op->op, *out, b, out);
    }
    vec_free(&spine);
    return s;
}

static CeStatus ce_name(Ce *c, const AstExpr *e, CeVal *out)
{
    Binding *bd = lw_lookup(c->L, e->name);
    if (bd && bd->cval_error) return CE_ERROR;      /* reported where it was bound */
    if (!bd || !bd->has_cval) return CE_NONE;
    *out = (CeVal){.v = bd->cval, .t = bd->val.t ? bd->val.t->elem : IR_I64, .lit = bd->val.lit};
    if (out->t == IR_U64 && out->v < 0) return CE_NONE;   /* past i64: a run-time value only */
    if (!c->typed) out->t = IR_I64;
    return CE_OK;
}

static CeStatus eval(Ce *c, const AstExpr *e, CeVal *out)
{
    CeVal a;
    CeStatus s;
    if (!e) return CE_NONE;
    switch (e->kind) {
    case AST_INT:
        if (e->ival > INT64_MAX) return CE_NONE;
        *out = (CeVal){.v = (int64_t)e->ival, .t = lit_type((int64_t)e->ival), .lit = true};
        return CE_OK;
    case AST_BOOL: *out = (CeVal){.v = (int64_t)e->ival, .t = IR_I1}; return CE_OK;
    case AST_NAME: return ce_name(c, e, out);
    case AST_UNARY: return (s = eval(c, e->lhs, &a)) == CE_OK ? unop(c, e, a, out) : s;
    case AST_BINARY: return ce_chain(c, e, out);
    case AST_CALL: return ce_call(c, e, out);
    default: return CE_NONE;
    }
}

static CeStatus run(Lower *L, const AstExpr *e, bool typed, int64_t *out)
{
    Ce c = {.L = L, .typed = typed};
    CeVal v;
    CeStatus s = eval(&c, e, &v);
    if (s == CE_OK) *out = v.v;
    return s;
}

CeStatus ce_eval(Lower *L, const AstExpr *e, int64_t *out) { return run(L, e, false, out); }
CeStatus ce_eval_typed(Lower *L, const AstExpr *e, int64_t *out) { return run(L, e, true, out); }

bool ce_shape(Lower *L, const AstExpr *e, const char *what, int *rank, int32_t *shape)
{
    if (e->kind != AST_LIST) {
        lw_error(L, e->loc, "the shape of %s must be a list of sizes like [64, 32]", what);
        return false;
    }
    if (e->nargs < 1 || e->nargs > IR_MAX_RANK) {
        lw_error(L, e->loc, "a tile has 1 to %d dimensions, but the shape of %s has %u", IR_MAX_RANK, what,
                 e->nargs);
        return false;
    }
    for (uint32_t i = 0; i < e->nargs; i++) {
        int64_t v;
        CeStatus s = ce_eval(L, e->args[i], &v);
        if (s != CE_OK) {
            if (s == CE_NONE) lw_error(L, e->args[i]->loc, "the shape of %s must be known at compile time", what);
            return false;
        }
        if (v < 1 || v > IR_MAX_TILE_ELEMS) {
            lw_error(L, e->args[i]->loc, "tile size %lld is out of range (1 to %d)",
                     (long long)v, IR_MAX_TILE_ELEMS);
            return false;
        }
        shape[i] = (int32_t)v;
    }
    *rank = (int)e->nargs;
    return lw_check_shape(L, e->loc, *rank, shape);
}
