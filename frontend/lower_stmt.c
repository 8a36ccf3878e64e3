/* Statements, structured control flow, and inlining of fns.
 *
 * Variables are SSA under the hood: a `var` binding holds its current IR value and an
 * assignment rebinds it. A for/while/if turns the outer vars its body assigns (found
 * by a scan of the body before lowering it) into loop-carried values or if results:
 *     var acc = zeros([64], f32);          %acc0 = const 0
 *     for k in range(0, n) {        ->     %acc1 = for %k = 0 to %n step 1 iter(%a = %acc0) {
 *         acc += load(p + k);                  %x = load ...; %s = add %a, %x; yield %s }
 *     }
 * A fn is instantiated at each call: its body is lowered into the caller with a fresh
 * scope holding the arguments, so generic parameters take the argument's type and
 * shape. Its returns must be in tail position (the last statement, or both branches
 * of a final if/else, lowered as an if with results). */
#include <string.h>

#include "lower_internal.h"

enum { MAX_RESULTS = 8 };

typedef VEC(size_t) Idx;

static void lower_stmt(Lower *L, const AstStmt *s);

/* ---- carried variables ------------------------------------------------------------- */
static void collect_assigned(Lower *L, const AstStmt *s, Idx *out)
{
    if (!s) return;
    if (s->kind == AST_ASSIGN && s->nnames) {
        Binding *bd = lw_lookup(L, s->names[0]);
        size_t at = bd ? (size_t)(bd - L->scope.data) : 0;
        bool seen = false;
        for (size_t i = 0; i < out->len; i++) seen |= out->data[i] == at;
        if (bd && bd->kind == BIND_VAR && bd->val.t && !seen) vec_push(out, at);
    }
    collect_assigned(L, s->body, out);
    collect_assigned(L, s->else_body, out);
    for (uint32_t i = 0; i < s->nstmts; i++) collect_assigned(L, s->stmts[i], out);
}

static const IrType **carried_types(Lower *L, const Idx *c)
{
    const IrType **t = arena_alloc(L->arena, (c->len + 1) * sizeof *t);
    for (size_t i = 0; i < c->len; i++) t[i] = L->scope.data[c->data[i]].val.t;
    return t;
}

/* The current values of the carried vars, after `extra` leading values. */
static IrValue *current_values(Lower *L, const Idx *c, const IrValue *extra, size_t nextra)
{
    IrValue *v = arena_alloc(L->arena, (c->len + nextra + 1) * sizeof *v);
    for (size_t i = 0; i < nextra; i++) v[i] = extra[i];
    for (size_t i = 0; i < c->len; i++) v[nextra + i] = L->scope.data[c->data[i]].val.v;
    return v;
}

static void set_values(Lower *L, const Idx *c, const IrValue *v)
{
    for (size_t i = 0; i < c->len; i++) L->scope.data[c->data[i]].val = lw_val(L, v[i]);
}

/* Adds one block argument per carried var and rebinds the vars to them. */
static void bind_region_args(Lower *L, IrBlock *blk, const Idx *c)
{
    for (size_t i = 0; i < c->len; i++) {
        Binding *bd = &L->scope.data[c->data[i]];
        bd->val = lw_val(L, ir_block_add_arg(blk, bd->val.t, bd->name));
    }
}

static void terminate(Lower *L, IrOpcode code, const Idx *c, const IrValue *extra, size_t nextra, Loc loc)
{
    L->b.loc = loc;
    ir_build(&L->b, code, current_values(L, c, extra, nextra), (uint32_t)(c->len + nextra), NULL, 0, 0);
}

/* Gives op n results of the given types (for an if whose result types are known only
 * after its regions are lowered). */
static void attach_results(Lower *L, IrOp *op, const IrType *const *types, uint32_t n)
{
    IrFunc *f = L->b.func;
    op->results = arena_alloc(L->arena, (n + 1) * sizeof *op->results);
    op->nresults = n;
    for (uint32_t i = 0; i < n; i++) {
        IrValue v = ir_value_new(f, types[i], NULL);
        f->values[v].def = op;
        f->values[v].index = i;
        op->results[i] = v;
    }
}

/* ---- let, var, assignment -------------------------------------------------------------- */
static Val materialize(Lower *L, Val v)
{
    if (v.t) lw_ir(L, &v);
    return v;
}

static void lower_let(Lower *L, const AstStmt *s, BindKind kind)
{
    int64_t cv;
    CeStatus cs = kind == BIND_LET ? ce_eval_typed(L, s->value, &cv) : CE_NONE;
    bool is_const = cs == CE_OK;
    Val v = materialize(L, lower_expr(L, s->value));
    size_t at = lw_bind(L, s->names[0], s->loc, kind, v);
    L->scope.data[at].has_cval = is_const;
    L->scope.data[at].cval_error = cs == CE_ERROR;
    L->scope.data[at].cval = is_const ? cv : 0;
}

static void lower_destructure(Lower *L, const AstStmt *s)
{
    const AstExpr *e = s->value;
    const AstItem *fn = e->kind == AST_CALL ? lw_find_item(L, e->name) : NULL;
    Val out[MAX_RESULTS];
    int n = -1;
    if (e->kind == AST_CALL && !fn && (n = lower_builtin_results(L, e, out, MAX_RESULTS)) != -2) {
        if (n >= 0 && (uint32_t)n != s->nnames)
            lw_error(L, s->loc, "%s(...) gives %d value%s here but %u names are given", e->name, n, n == 1 ? "" : "s",
                     s->nnames);
    } else if (!fn || fn->kind != AST_FN)
        lw_error(L, e->loc, "only the results of a fn call can be destructured, as in `let (a, b) = f(...);`");
    else if ((n = lower_fn_call(L, e, fn, out, MAX_RESULTS)) >= 0 && (uint32_t)n != s->nnames)
        lw_error(L, s->loc, "fn '%s' returns %d value%s but %u names are given", fn->name, n, n == 1 ? "" : "s",
                 s->nnames);
    for (uint32_t i = 0; i < s->nnames; i++)
        for (uint32_t j = 0; j < i; j++)
            if (!strcmp(s->names[i], s->names[j]))
                lw_error(L, s->name_locs ? s->name_locs[i] : s->loc, "'%s' is bound twice in this let",
                         s->names[i]);
    for (uint32_t i = 0; i < s->nnames; i++) {
        Val v = (uint32_t)n == s->nnames ? materialize(L, out[i]) : VERR;
        lw_bind(L, s->names[i], s->name_locs ? s->name_locs[i] : s->loc, BIND_LET, v);
    }
}

static const char *assign_hint(Lower *L, const Binding *bd, const Val *v)
{
    if (ir_elem_is_int(bd->val.t->elem) && ir_elem_is_float(v->t->elem))
        return arena_printf(L->arena, "; declare it as `var %s = 0.0;` or convert with `as`", bd->name);
    /* `as` converts numbers only: no advice for a pointer on either side */
    if (bd->val.t->elem == IR_PTR || v->t->elem == IR_PTR) return "";
    if (bd->val.t->elem != v->t->elem) return "; convert it with `as`";
    return "";
}

/* A var keeps its type: literals are converted, scalars splat; anything else of
 * another type is an error. */
static Val assigned_value(Lower *L, const Binding *bd, Val v, Loc loc)
{
    const IrType *t = bd->val.t;
    if (v.lit && t->elem != IR_PTR) {
        IrElem e;
        Val probe = {.t = ir_type_elem(L->ctx, t), .v = 0};
        if (!lw_join_elems(L, (Val[]){v, probe}, 2, loc, &e)) return VERR;
        if (e == t->elem) v = lw_convert(L, v, t->elem);
    }
    if (!v.lit && v.t->elem == t->elem && !v.t->rank && t->rank) v = lw_broadcast_to(L, v, t->rank, t->shape);
    if (v.lit || v.t != t) {
        lw_error(L, loc, "cannot assign a value of type %s to variable '%s' of type %s%s",
                 v.lit ? ir_elem_name(v.t->elem) : lw_tstr(L, v.t), bd->name, lw_tstr(L, t), assign_hint(L, bd, &v));
        return VERR;
    }
    return v;
}

static const char *const not_var[] = {
    [BIND_LET] = "it was declared with let (use var)",
    [BIND_PARAM] = "it is a parameter (copy it into a var first)",
    [BIND_CONST] = "it is a const parameter",
    [BIND_LOOP] = "it is the loop variable",
};

/* The binary operator of `x op= e`. */
static int assign_op(int c)
{
    switch (c) {
    case '+': return AST_ADD;
    case '-': return AST_SUB;
    case '*': return AST_MUL;
    case '/': return AST_DIV;
    default: return AST_REM;
    }
}

static void lower_assign(Lower *L, const AstStmt *s)
{
    /* The binding is found by index: lowering the value may inline fns, whose bindings
     * grow (and move) the scope. */
    Binding *bd = lw_lookup(L, s->names[0]);
    size_t at = bd ? (size_t)(bd - L->scope.data) : 0;
    Val v = lower_expr(L, s->value);
    if (!bd) {
        lw_error(L, s->loc, "unknown name '%s'", s->names[0]);
        return;
    }
    bd = &L->scope.data[at];
    if (bd->kind != BIND_VAR) {
        lw_error(L, s->loc, "cannot assign to '%s': %s", bd->name, not_var[bd->kind]);
        return;
    }
    if (!bd->val.t || !v.t) return;
    if (s->op) v = lw_binop(L, assign_op(s->op), bd->val, v, s->loc);
    if (!v.t) return;
    bd = &L->scope.data[at];
    v = assigned_value(L, bd, v, s->loc);
    if (v.t) L->scope.data[at].val = v;
}

/* ---- conditions and control flow ------------------------------------------------------------ */
/* A scalar i1 condition; on an error a constant false keeps the lowering going. */
static IrValue condition(Lower *L, const AstExpr *e, const char *what)
{
    Val c = lower_expr(L, e);
    if (c.t && c.t->rank) {
        lw_error(L, e->loc, "%s needs a scalar condition; for tiles use where(c, a, b)", what);
        c = VERR;
    } else if (c.t && (c.lit || c.t->elem != IR_I1)) {
        lw_error(L, e->loc, "%s needs a boolean condition (a comparison), got %s", what,
                 c.lit ? ir_elem_name(c.t->elem) : lw_tstr(L, c.t));
        c = VERR;
    }
    L->b.loc = e->loc;
    return c.t ? c.v : ir_const_int(&L->b, lw_scalar(L, IR_I1), 0);
}

static void lower_if(Lower *L, const AstStmt *s)
{
    IrValue c = condition(L, s->cond, "if");
    Idx carried = {0};
    collect_assigned(L, s->body, &carried);
    collect_assigned(L, s->else_body, &carried);
    IrBuilder saved = L->b;
    IrValue *outer = current_values(L, &carried, NULL, 0);
    L->b.loc = s->loc;
    IrOp *op = ir_build(&L->b, IR_OP_IF, &c, 1, carried_types(L, &carried), (uint32_t)carried.len, 2);
    bool ret[2] = {false, false};
    for (int r = 0; r < 2; r++) {
        const AstStmt *branch = r ? s->else_body : s->body;
        ir_builder_at_end(&L->b, &op->regions[r]);
        L->returned = false;
        if (branch) lower_stmt(L, branch);
        ret[r] = L->returned;
        if (!ret[r]) terminate(L, IR_OP_YIELD, &carried, NULL, 0, s->loc);
        set_values(L, &carried, outer);
    }
    L->b = saved;
    set_values(L, &carried, op->results);
    L->returned = ret[0] && ret[1];
    vec_free(&carried);
}

/* if c { a } else { b } as an expression: an if with one result, each branch lowered in
 * its region. The two values are joined as where's are: a literal takes the other's
 * type (two literals their default type), a scalar is splat to the other's shape, and
 * two tiles must have one shape. */
static Val branch_value(Lower *L, IrBlock *blk, const AstExpr *e)
{
    ir_builder_at_end(&L->b, blk);
    return lower_expr(L, e);
}

static const IrType *branch_type(Lower *L, Val *v, Loc loc)
{
    IrElem e;
    const IrType *a = v[0].t, *b = v[1].t, *tile = a->rank ? a : b;
    if (a->rank && b->rank && (a->rank != b->rank || memcmp(a->shape, b->shape, a->rank * sizeof *a->shape))) {
        lw_error(L, loc, "the branches of an if expression have shapes %s and %s", lw_shape_str(L, a->rank, a->shape),
                 lw_shape_str(L, b->rank, b->shape));
        return NULL;
    }
    if (a->elem == IR_PTR || b->elem == IR_PTR) {
        if (a->elem == b->elem && a->pointee == b->pointee) return ir_type_like(L->ctx, tile, ir_type_elem(L->ctx, a));
        lw_error(L, loc, "the branches of an if expression give %s and %s", lw_tstr(L, a), lw_tstr(L, b));
        return NULL;
    }
    return lw_join_elems(L, v, 2, loc, &e) ? lw_like(L, tile, e) : NULL;
}

Val lower_if_expr(Lower *L, const AstExpr *e)
{
    IrValue c = condition(L, e->args[0], "an if expression");
    IrBuilder saved = L->b;
    L->b.loc = e->loc;
    IrOp *op = ir_build(&L->b, IR_OP_IF, &c, 1, NULL, 0, 2);
    Val v[2] = {branch_value(L, &op->regions[0], e->args[1]), VERR};
    IrBuilder then_end = L->b;
    v[1] = branch_value(L, &op->regions[1], e->args[2]);
    IrBuilder else_end = L->b;
    const IrType *t = v[0].t && v[1].t ? branch_type(L, v, e->loc) : NULL;
    IrBuilder ends[2] = {then_end, else_end};
    for (int r = 0; r < 2; r++) {
        L->b = ends[r];
        L->b.loc = e->args[r + 1]->loc;
        Val x = t ? lw_broadcast_to(L, lw_convert(L, v[r], t->elem), t->rank, t->shape) : VERR;
        IrValue y = x.t ? lw_ir(L, &x) : IR_NO_VALUE;
        ir_build(&L->b, IR_OP_YIELD, &y, t ? 1 : 0, NULL, 0, 0);
    }
    L->b = saved;
    if (!t) {
        ir_op_remove(op);
        return VERR;
    }
    attach_results(L, op, &t, 1);
    return lw_val(L, op->results[0]);
}

static void lower_while(Lower *L, const AstStmt *s)
{
    Idx carried = {0};
    collect_assigned(L, s->body, &carried);
    IrBuilder saved = L->b;
    L->b.loc = s->loc;
    IrOp *op = ir_build(&L->b, IR_OP_WHILE, current_values(L, &carried, NULL, 0), (uint32_t)carried.len,
                        carried_types(L, &carried), (uint32_t)carried.len, 2);
    ir_builder_at_end(&L->b, &op->regions[0]);
    bind_region_args(L, &op->regions[0], &carried);
    IrValue c = condition(L, s->cond, "while");
    terminate(L, IR_OP_CONDITION, &carried, &c, 1, s->loc);
    ir_builder_at_end(&L->b, &op->regions[1]);
    bind_region_args(L, &op->regions[1], &carried);
    L->returned = false;
    lower_block(L, s->body);
    if (!L->returned) terminate(L, IR_OP_YIELD, &carried, NULL, 0, s->loc);
    L->returned = false;
    L->b = saved;
    set_values(L, &carried, op->results);
    vec_free(&carried);
}

/* lo, hi, step: integer scalars promoted to one type (literals take the others'). */
static bool range_bounds(Lower *L, const AstStmt *s, Val *v)
{
    IrElem e;
    if (s->nargs < 2 || s->nargs > 3) {
        lw_error(L, s->loc, "range takes 2 or 3 arguments (lo, hi[, step]), got %u", s->nargs);
        return false;
    }
    v[2] = (Val){.t = lw_scalar(L, IR_I32), .v = IR_NO_VALUE, .lit = LIT_INT, .i = 1, .loc = s->loc};
    for (uint32_t i = 0; i < s->nargs; i++) {
        v[i] = lower_expr(L, s->args[i]);
        if (!v[i].t) return false;
        if (v[i].t->rank || v[i].lit == LIT_FLOAT || !ir_elem_is_int(v[i].t->elem) || v[i].t->elem == IR_I1) {
            lw_error(L, s->args[i]->loc, "range needs integer scalars, got %s",
                     v[i].lit ? "a float literal" : lw_tstr(L, v[i].t));
            return false;
        }
    }
    int64_t step;
    CeStatus cs = s->nargs == 3 ? ce_eval_typed(L, s->args[2], &step) : CE_NONE;
    if (cs == CE_ERROR) return false;
    if (cs == CE_OK && step == 0) {
        lw_error(L, s->args[2]->loc, "the step of range must not be 0");
        return false;
    }
    if (!lw_join_elems(L, v, 3, s->loc, &e)) return false;
    for (int i = 0; i < 3; i++) {
        v[i] = lw_convert(L, v[i], e);
        lw_ir(L, &v[i]);
    }
    return true;
}

/* for i in static_range(lo, hi[, step]): the body once per value, i a compile-time
 * integer (a literal that takes the type of the other operand, usable in shapes). */
enum { MAX_UNROLL = 4096, MAX_UNROLL_TOTAL = 1 << 16 };

static bool static_bounds(Lower *L, const AstStmt *s, int64_t *v)
{
    v[2] = 1;
    if (s->nargs < 2 || s->nargs > 3) return false;   /* the parser said so */
    for (uint32_t i = 0; i < s->nargs; i++) {
        CeStatus cs = ce_eval(L, s->args[i], &v[i]);
        if (cs == CE_NONE)
            lw_error(L, s->args[i]->loc, "the bounds of static_range must be known at compile time; use range");
        if (cs != CE_OK) return false;
    }
    if (v[2] == 0) {
        lw_error(L, s->args[2]->loc, "the step of static_range must not be 0");
        return false;
    }
    return true;
}

static int64_t trip_count(const int64_t *v)
{
    if (v[2] > 0) return v[0] < v[1] ? (int64_t)(((uint64_t)v[1] - (uint64_t)v[0] - 1) / (uint64_t)v[2] + 1) : 0;
    return v[0] > v[1] ? (int64_t)(((uint64_t)v[0] - (uint64_t)v[1] - 1) / (0 - (uint64_t)v[2]) + 1) : 0;
}

static void lower_static_for(Lower *L, const AstStmt *s)
{
    int64_t v[3];
    if (!static_bounds(L, s, v)) return;
    int64_t n = trip_count(v);
    if (n > MAX_UNROLL) {
        lw_error(L, s->loc, "static_range unrolls at most %d iterations, this one %lld; use range", MAX_UNROLL,
                 (long long)n);
        return;
    }
    for (int64_t k = 0; k < n && !L->returned && !diag_full(L->diags); k++) {
        if (L->unrolled >= MAX_UNROLL_TOTAL) {   /* nested loops multiply; said once */
            if (L->unrolled++ == MAX_UNROLL_TOTAL)
                lw_error(L, s->loc, "static_range unrolls more than %d iterations in all; use range for some loops",
                         MAX_UNROLL_TOTAL);
            return;
        }
        L->unrolled++;
        int64_t i = (int64_t)((uint64_t)v[0] + (uint64_t)k * (uint64_t)v[2]);
        Val lit = {.t = lw_scalar(L, lw_int_fits(i, false, IR_I32) ? IR_I32 : IR_I64), .v = IR_NO_VALUE,
                   .lit = LIT_INT, .i = i, .loc = s->name_locs[0]};
        size_t mark = lw_bind(L, s->names[0], s->loc, BIND_LOOP, lit);
        L->scope.data[mark].has_cval = true;
        L->scope.data[mark].cval = i;
        lower_block(L, s->body);
        lw_scope_pop(L, mark);
    }
}

static void lower_for(Lower *L, const AstStmt *s)
{
    Val b[3];
    if (s->unrolled) {
        lower_static_for(L, s);
        return;
    }
    Idx carried = {0};
    if (!range_bounds(L, s, b)) {
        /* still check the body, with an error-valued loop variable */
        size_t mark = lw_bind(L, s->names[0], s->loc, BIND_LOOP, VERR);
        lower_block(L, s->body);
        lw_scope_pop(L, mark);
        return;
    }
    collect_assigned(L, s->body, &carried);
    IrValue bounds[3] = {b[0].v, b[1].v, b[2].v};
    IrBuilder saved = L->b;
    L->b.loc = s->loc;
    IrOp *op = ir_build(&L->b, IR_OP_FOR, current_values(L, &carried, bounds, 3), (uint32_t)carried.len + 3,
                        carried_types(L, &carried), (uint32_t)carried.len, 1);
    IrValue iv = ir_block_add_arg(&op->regions[0], b[0].t, s->names[0]);
    bind_region_args(L, &op->regions[0], &carried);
    ir_builder_at_end(&L->b, &op->regions[0]);
    size_t mark = lw_bind(L, s->names[0], s->loc, BIND_LOOP, lw_val(L, iv));
    L->returned = false;
    lower_block(L, s->body);
    if (!L->returned) terminate(L, IR_OP_YIELD, &carried, NULL, 0, s->loc);
    L->returned = false;
    lw_scope_pop(L, mark);
    L->b = saved;
    set_values(L, &carried, op->results);
    vec_free(&carried);
}

static void lower_return(Lower *L, const AstStmt *s)
{
    if (L->depth > 0) return;   /* a return out of tail position: check_no_return said so */
    if (s->value) lw_error(L, s->value->loc, "a kernel returns nothing; write `return;`");
    L->b.loc = s->loc;
    ir_build(&L->b, IR_OP_RETURN, NULL, 0, NULL, 0, 0);
    L->returned = true;
}

static void lower_stmt(Lower *L, const AstStmt *s)
{
    L->b.loc = s->loc;
    switch (s->kind) {
    case AST_LET:
        if (s->destructure) lower_destructure(L, s);
        else lower_let(L, s, BIND_LET);
        break;
    case AST_VAR: lower_let(L, s, BIND_VAR); break;
    case AST_ASSIGN: lower_assign(L, s); break;
    case AST_FOR: lower_for(L, s); break;
    case AST_WHILE: lower_while(L, s); break;
    case AST_IF: lower_if(L, s); break;
    case AST_RETURN: lower_return(L, s); break;
    case AST_EXPR: lower_expr_stmt(L, s->value); break;
    case AST_BLOCK: lower_block(L, s); break;
    }
}

void lower_block(Lower *L, const AstStmt *blk)
{
    size_t mark = L->scope.len;
    for (uint32_t i = 0; i < blk->nstmts && !diag_full(L->diags); i++) {
        if (L->returned) {
            lw_warning(L, blk->stmts[i]->loc, "this code is unreachable: it follows a return");
            break;
        }
        lower_stmt(L, blk->stmts[i]);
    }
    lw_scope_pop(L, mark);
}

/* ---- fns: returns in tail position ----------------------------------------------------------- */
static void check_no_return(Lower *L, const AstItem *fn, const AstStmt *s, bool in_loop)
{
    if (!s) return;
    if (s->kind == AST_RETURN)
        lw_error(L, s->loc, in_loop ? "a return inside a loop is not supported in fn '%s'"
                                    : "a return in fn '%s' must be its last statement, or end both branches of a final if/else",
                 fn->name);
    in_loop |= s->kind == AST_FOR || s->kind == AST_WHILE;
    check_no_return(L, fn, s->body, in_loop);
    check_no_return(L, fn, s->else_body, in_loop);
    for (uint32_t i = 0; i < s->nstmts; i++) check_no_return(L, fn, s->stmts[i], in_loop);
}

static int tail_stmt(Lower *L, const AstItem *fn, const AstStmt *s, Val *out);

static int tail_block(Lower *L, const AstItem *fn, const AstStmt *blk, Val *out)
{
    size_t mark = L->scope.len;
    int n = 0;
    for (uint32_t i = 0; i + 1 < blk->nstmts && !diag_full(L->diags); i++) {
        check_no_return(L, fn, blk->stmts[i], false);
        lower_stmt(L, blk->stmts[i]);
    }
    if (blk->nstmts) n = tail_stmt(L, fn, blk->stmts[blk->nstmts - 1], out);
    lw_scope_pop(L, mark);
    return n;
}

static int tail_return(Lower *L, const AstItem *fn, const AstStmt *s, Val *out)
{
    const AstExpr *e = s->value;
    if (!e) return 0;
    if (e->kind != AST_TUPLE) {
        out[0] = lower_expr(L, e);
        return out[0].t ? 1 : -1;
    }
    if (e->nargs > MAX_RESULTS) {
        lw_error(L, e->loc, "fn '%s' returns %u values; at most %d are supported", fn->name, e->nargs, MAX_RESULTS);
        return -1;
    }
    bool ok = true;
    for (uint32_t i = 0; i < e->nargs; i++) ok &= (out[i] = lower_expr(L, e->args[i])).t != NULL;
    return ok ? (int)e->nargs : -1;
}

static bool branch_pair_error(Lower *L, const AstItem *fn, const Val *tv, const Val *ev, Loc loc)
{
    lw_error(L, loc, "the branches of the final if/else of fn '%s' return %s and %s", fn->name, lw_val_str(L, tv),
             lw_val_str(L, ev));
    return false;
}

/* Gives a pair of branch results one type: a literal takes the other's type (never a
 * pointer's: a pointer goes only with a pointer of its type). */
static bool unify_branch_pair(Lower *L, const AstItem *fn, IrOp *op, Val *tv, Val *ev, Loc loc)
{
    IrElem e;
    int ptr;
    if (lw_pointer_mismatch((Val[]){*tv, *ev}, 2, &ptr) >= 0) return branch_pair_error(L, fn, tv, ev, loc);
    if (!lw_join_elems(L, (Val[]){*tv, *ev}, 2, loc, &e)) return false;
    for (int r = 0; r < 2; r++) {
        Val *v = r ? ev : tv, *other = r ? tv : ev;
        if (!v->lit) continue;
        ir_builder_at_end(&L->b, &op->regions[r]);
        *v = lw_convert(L, *v, e);
        if (!other->lit) *v = lw_broadcast_to(L, *v, other->t->rank, other->t->shape);
    }
    return tv->t == ev->t || branch_pair_error(L, fn, tv, ev, loc);
}

static bool tail_results(Lower *L, const AstItem *fn, IrOp *op, Val *tv, Val *ev, int n, Loc loc)
{
    for (int i = 0; i < n; i++)
        if (!tv[i].t || !ev[i].t || !unify_branch_pair(L, fn, op, &tv[i], &ev[i], loc)) return false;
    return true;
}

static int tail_if(Lower *L, const AstItem *fn, const AstStmt *s, Val *out)
{
    IrValue c = condition(L, s->cond, "if");
    Idx carried = {0};
    collect_assigned(L, s->body, &carried);
    collect_assigned(L, s->else_body, &carried);
    IrBuilder saved = L->b;
    IrValue *outer = current_values(L, &carried, NULL, 0), *cur[2];
    L->b.loc = s->loc;
    IrOp *op = ir_build(&L->b, IR_OP_IF, &c, 1, NULL, 0, 2);
    Val vals[2][MAX_RESULTS];
    int n[2];
    for (int r = 0; r < 2; r++) {
        ir_builder_at_end(&L->b, &op->regions[r]);
        n[r] = tail_stmt(L, fn, r ? s->else_body : s->body, vals[r]);
        cur[r] = current_values(L, &carried, NULL, 0);
        set_values(L, &carried, outer);
    }
    int nr = n[0];
    if (n[0] != n[1] && n[0] >= 0 && n[1] >= 0)
        lw_error(L, s->loc, "the branches of the final if/else of fn '%s' return different numbers of values", fn->name);
    if (n[0] != n[1] || nr < 0 || !tail_results(L, fn, op, vals[0], vals[1], nr, s->loc)) nr = -1;
    for (int r = 0; r < 2 && nr >= 0; r++) {
        IrValue *ops = arena_alloc(L->arena, (carried.len + (size_t)nr + 1) * sizeof *ops);
        memcpy(ops, cur[r], carried.len * sizeof *ops);
        for (int i = 0; i < nr; i++) ops[carried.len + (size_t)i] = lw_ir(L, &vals[r][i]);
        ir_builder_at_end(&L->b, &op->regions[r]);
        L->b.loc = s->loc;
        ir_build(&L->b, IR_OP_YIELD, ops, (uint32_t)carried.len + (uint32_t)nr, NULL, 0, 0);
    }
    L->b = saved;
    if (nr >= 0) {
        const IrType **types = carried_types(L, &carried);
        const IrType **all = arena_alloc(L->arena, (carried.len + (size_t)nr + 1) * sizeof *all);
        memcpy(all, types, carried.len * sizeof *all);
        for (int i = 0; i < nr; i++) all[carried.len + (size_t)i] = vals[0][i].t;
        attach_results(L, op, all, (uint32_t)carried.len + (uint32_t)nr);
        set_values(L, &carried, op->results);
        for (int i = 0; i < nr; i++) out[i] = lw_val(L, op->results[carried.len + (size_t)i]);
    }
    vec_free(&carried);
    return nr;
}

static int tail_stmt(Lower *L, const AstItem *fn, const AstStmt *s, Val *out)
{
    switch (s->kind) {
    case AST_RETURN: return tail_return(L, fn, s, out);
    case AST_BLOCK: return tail_block(L, fn, s, out);
    case AST_IF:
        if (s->else_body) return tail_if(L, fn, s, out);
        /* fallthrough */
    default:
        check_no_return(L, fn, s, false);
        lower_stmt(L, s);
        return 0;
    }
}

/* ---- fn calls ---------------------------------------------------------------------------------- */
static bool on_stack(const Lower *L, const AstItem *fn)
{
    for (int i = 0; i < L->depth; i++)
        if (L->fn_stack[i] == fn) return true;
    return false;
}

/* Checks a typed parameter's argument: a literal converts, anything else must already
 * have the parameter's element type (tiles of it are fine). */
static Val typed_arg(Lower *L, const AstItem *fn, const AstParam *p, Val v, Loc loc, const char *what)
{
    const IrType *t = lw_type(L, p->type);
    IrElem e;
    if (!t || !v.t) return VERR;
    if (v.lit && t->elem != IR_PTR) {
        Val probe = {.t = t, .v = 0};
        if (!lw_join_elems(L, (Val[]){v, probe}, 2, loc, &e)) return VERR;
        return lw_convert(L, v, t->elem);
    }
    if (v.lit || v.t->elem != t->elem || (t->elem == IR_PTR && v.t->pointee != t->pointee)) {
        lw_error(L, loc, "%s '%s' of fn '%s' must be %s, got %s", what, p->name, fn->name, lw_tstr(L, t),
                 v.lit ? ir_elem_name(v.t->elem) : lw_tstr(L, v.t));
        return VERR;
    }
    return v;
}

static const IrType *const_param_type(Lower *L, const AstItem *fn, const AstParam *p)
{
    const IrType *t = p->type ? lw_type(L, p->type) : lw_scalar(L, IR_I32);
    if (t && (t->elem == IR_PTR || !ir_elem_is_int(t->elem))) {
        lw_error(L, p->type->loc, "const parameter '%s' of fn '%s' must have an integer type, got %s", p->name,
                 fn->name, lw_tstr(L, t));
        return NULL;
    }
    return t;
}

/* Evaluates the arguments in the caller's scope and binds them in a new one. */
static void bind_fn_args(Lower *L, const AstExpr *call, const AstItem *fn, Binding *args)
{
    for (uint32_t i = 0; i < fn->nparams; i++) {
        const AstParam *p = &fn->params[i];
        const AstExpr *a = call->args[i];
        args[i] = (Binding){.name = p->name, .loc = p->loc, .kind = p->is_const ? BIND_CONST : BIND_PARAM};
        if (p->is_const) {
            CeStatus cs = ce_eval(L, a, &args[i].cval);
            args[i].has_cval = cs == CE_OK;
            if (cs == CE_NONE)
                lw_error(L, a->loc, "argument '%s' of fn '%s' must be known at compile time", p->name, fn->name);
            const IrType *t = const_param_type(L, fn, p);
            if (t && args[i].has_cval && !lw_int_fits(args[i].cval, false, t->elem)) {
                lw_error(L, a->loc, "the value %lld does not fit in const parameter '%s' of fn '%s' (%s)",
                         (long long)args[i].cval, p->name, fn->name, ir_elem_name(t->elem));
                args[i].has_cval = false;
            }
            args[i].cval_error = !args[i].has_cval;   /* reported above */
            L->b.loc = a->loc;
            args[i].val = t && args[i].has_cval ? lw_val(L, ir_const_int(&L->b, t, args[i].cval)) : VERR;
        } else {
            Val v = lower_expr(L, a);
            args[i].val = p->type ? typed_arg(L, fn, p, v, a->loc, "argument") : v;
        }
    }
}

static bool check_call_shape(Lower *L, const AstExpr *call, const AstItem *fn)
{
    if (on_stack(L, fn)) {
        lw_error(L, call->loc, "recursive call of fn '%s' (recursion is not supported)", fn->name);
        return false;
    }
    if (L->depth >= FE_MAX_INSTANTIATION_DEPTH) {
        lw_error(L, call->loc, "instantiation depth exceeds %d: fn '%s' is called by a chain of %d fns being inlined",
                 FE_MAX_INSTANTIATION_DEPTH, fn->name, L->depth);
        return false;
    }
    for (uint32_t i = 0; i < call->nargs; i++)
        if (call->arg_names && call->arg_names[i]) {
            lw_error(L, call->args[i]->loc, "arguments of fn '%s' are passed by position", fn->name);
            return false;
        }
    if (call->nargs != fn->nparams) {
        lw_error(L, call->loc, "fn '%s' takes %u argument%s, got %u", fn->name, fn->nparams,
                 fn->nparams == 1 ? "" : "s", call->nargs);
        return false;
    }
    return true;
}

/* Checks the results against a declared return type; literals convert. */
static bool check_results(Lower *L, const AstItem *fn, Val *out, int n)
{
    const AstType *r = fn->ret;
    if (!r || n < 0) return n >= 0;
    uint32_t want = r->kind == AST_TYPE_TUPLE ? r->nelems : 1;
    if ((uint32_t)n != want) {
        lw_error(L, r->loc, "fn '%s' is declared to return %u value%s but returns %d", fn->name, want,
                 want == 1 ? "" : "s", n);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const AstParam p = {.name = arena_printf(L->arena, "%d", i + 1), .loc = r->loc,
                            .type = r->kind == AST_TYPE_TUPLE ? r->elems[i] : (AstType *)r};
        if (!(out[i] = typed_arg(L, fn, &p, out[i], r->loc, "result")).t) return false;
    }
    return true;
}

/* fn's body inlined with its parameters bound to args (fn->nparams of them), in a scope
 * of its own: its results, checked, in out[0..max); their number, or -1. */
static int inline_body(Lower *L, const AstItem *fn, const Binding *args, Val *out, int max)
{
    Val res[MAX_RESULTS];
    size_t saved_base = L->scope_base, mark = L->scope.len;
    bool saved_ret = L->returned;
    L->scope_base = mark;
    for (uint32_t i = 0; i < fn->nparams; i++) lw_push_binding(L, args[i]);
    L->fn_stack[L->depth++] = fn;
    int n = fn->body ? tail_block(L, fn, fn->body, res) : -1;
    L->depth--;
    lw_scope_pop(L, mark);
    L->scope_base = saved_base;
    L->returned = saved_ret;
    if (!check_results(L, fn, res, n)) return -1;
    for (int i = 0; i < n && i < max; i++) out[i] = res[i];
    return n;
}

int lower_fn_call(Lower *L, const AstExpr *call, const AstItem *fn, Val *out, int max)
{
    if (!check_call_shape(L, call, fn)) return -1;
    Binding *args = arena_alloc(L->arena, (fn->nparams + 1) * sizeof *args);
    bind_fn_args(L, call, fn, args);
    return inline_body(L, fn, args, out, max);
}

/* Inlines fn at loc with arguments already lowered (the combine of reduce and
 * associative_scan): as a call, but the arguments are values, not expressions. */
int lw_inline_fn(Lower *L, const AstItem *fn, Loc loc, const Val *argv, uint32_t nargs, Val *out, int max)
{
    if (on_stack(L, fn)) {
        lw_error(L, loc, "recursive call of fn '%s' (recursion is not supported)", fn->name);
        return -1;
    }
    if (L->depth >= FE_MAX_INSTANTIATION_DEPTH || nargs != fn->nparams) {
        lw_error(L, loc, "fn '%s' takes %u argument%s, got %u", fn->name, fn->nparams, fn->nparams == 1 ? "" : "s", nargs);
        return -1;
    }
    Binding *args = arena_alloc(L->arena, (fn->nparams + 1) * sizeof *args);
    for (uint32_t i = 0; i < nargs; i++) {
        const AstParam *p = &fn->params[i];
        if (p->is_const) {
            lw_error(L, p->loc, "fn '%s' is a combine: its parameter '%s' cannot be const", fn->name, p->name);
            return -1;
        }
        args[i] = (Binding){.name = p->name, .loc = p->loc, .kind = BIND_PARAM,
                            .val = p->type ? typed_arg(L, fn, p, argv[i], loc, "argument") : argv[i]};
        if (!args[i].val.t) return -1;
    }
    return inline_body(L, fn, args, out, max);
}
