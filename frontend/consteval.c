/* Compile-time integer evaluation.
 *
 * Tile shapes, arange bounds, axes and hint values must be known when the kernel is
 * compiled: they are expressions of literals, const parameters (and lets bound to such
 * expressions), combined with + - * / % << >> & | ^, comparisons, && || ! and cdiv.
 * Arithmetic wraps like i64 (done in u64 so overflow is defined); anything else, a
 * division by zero or an out-of-range shift makes the expression "not compile-time"
 * and the caller says which use needed it. */
#include <string.h>

#include "lower_internal.h"

bool fe_int_binop(int op, int64_t a, int64_t b, int64_t *out)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    switch (op) {
    case AST_ADD: *out = (int64_t)(ua + ub); return true;
    case AST_SUB: *out = (int64_t)(ua - ub); return true;
    case AST_MUL: *out = (int64_t)(ua * ub); return true;
    case AST_DIV:
    case AST_REM:
        if (b == 0 || (a == INT64_MIN && b == -1)) return false;
        *out = op == AST_DIV ? a / b : a % b;
        return true;
    case AST_SHL:
    case AST_SHR:
        if (b < 0 || b > 63) return false;
        *out = op == AST_SHL ? (int64_t)(ua << b) : a >> b;
        return true;
    case AST_BAND: *out = a & b; return true;
    case AST_BOR: *out = a | b; return true;
    case AST_BXOR: *out = a ^ b; return true;
    case AST_EQ: *out = a == b; return true;
    case AST_NE: *out = a != b; return true;
    case AST_LT: *out = a < b; return true;
    case AST_LE: *out = a <= b; return true;
    case AST_GT: *out = a > b; return true;
    case AST_GE: *out = a >= b; return true;
    case AST_LAND: *out = a && b; return true;
    case AST_LOR: *out = a || b; return true;
    default: return false;
    }
}

bool fe_int_unop(int op, int64_t a, int64_t *out)
{
    switch (op) {
    case '-': *out = (int64_t)(0 - (uint64_t)a); return true;
    case '~': *out = ~a; return true;
    case '!': *out = !a; return true;
    default: return false;
    }
}

/* cdiv(a, b) = (a + b - 1) / b, the one call allowed in constant expressions. */
static bool ce_call(Lower *L, const AstExpr *e, int64_t *out)
{
    int64_t a, b;
    if (strcmp(e->name, "cdiv") || e->nargs != 2) return false;
    if (e->arg_names && (e->arg_names[0] || e->arg_names[1])) return false;
    if (!ce_eval(L, e->args[0], &a) || !ce_eval(L, e->args[1], &b) || b == 0) return false;
    return fe_int_binop(AST_DIV, (int64_t)((uint64_t)a + (uint64_t)b - 1), b, out);
}

/* A left-associative chain without recursing down it (see lower_chain). */
static bool ce_chain(Lower *L, const AstExpr *e, int64_t *out)
{
    VEC(const AstExpr *) spine = {0};
    const AstExpr *x = e;
    int64_t a, b;
    for (; x->kind == AST_BINARY; x = x->lhs) vec_push(&spine, x);
    bool ok = ce_eval(L, x, &a);
    for (size_t i = spine.len; ok && i-- > 0;)
        ok = ce_eval(L, spine.data[i]->rhs, &b) && fe_int_binop(spine.data[i]->op, a, b, &a);
    vec_free(&spine);
    *out = a;
    return ok;
}

bool ce_eval(Lower *L, const AstExpr *e, int64_t *out)
{
    int64_t a;
    if (!e) return false;
    switch (e->kind) {
    case AST_INT:
        if (e->ival > INT64_MAX) return false;
        *out = (int64_t)e->ival;
        return true;
    case AST_BOOL: *out = (int64_t)e->ival; return true;
    case AST_NAME: {
        Binding *bd = lw_lookup(L, e->name);
        if (!bd || !bd->has_cval) return false;
        *out = bd->cval;
        return true;
    }
    case AST_UNARY: return ce_eval(L, e->lhs, &a) && fe_int_unop(e->op, a, out);
    case AST_BINARY: return ce_chain(L, e, out);
    case AST_CALL: return ce_call(L, e, out);
    default: return false;
    }
}

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
        if (!ce_eval(L, e->args[i], &v)) {
            lw_error(L, e->args[i]->loc, "the shape of %s must be known at compile time", what);
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
