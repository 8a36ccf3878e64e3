/* Node constructors for the grammar actions (see parse_util.h). */
#include "parse_util.h"

#include <stdarg.h>
#include <string.h>

/* Each node is allocated with its tree depth right behind it: the AST contract has no
 * room for it and only the parser needs it. A pointer to the node is a pointer to the
 * first member of the wrapper, so the depth is found again by a cast. */
typedef struct { AstExpr e; uint32_t depth, nest; } ExprNode;
typedef struct { AstStmt s; uint32_t depth; } StmtNode;

typedef struct Height {
    uint32_t depth, nest;
} Height;
static Height height(const AstExpr *e)
{
    return e ? (Height){((const ExprNode *)e)->depth, ((const ExprNode *)e)->nest} : (Height){0, 0};
}
static uint32_t stmt_depth(const AstStmt *s) { return s ? ((const StmtNode *)s)->depth : 0; }
static uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }
static Height hmax(Height a, Height b) { return (Height){max_u32(a.depth, b.depth), max_u32(a.nest, b.nest)}; }

void fe_ctx_init(ParseCtx *c, Arena *a, const Source *src, DiagList *diags)
{
    memset(c, 0, sizeof *c);
    c->arena = a;
    c->src = src;
    c->diags = diags;
    c->line = c->col = 1;
    c->items = fe_list(c);
}

Loc fe_loc(const ParseCtx *c, uint32_t line, uint32_t col) { return (Loc){c->src, line, col}; }

void fe_err(ParseCtx *c, Loc loc, const char *fmt, ...)
{
    if (c->fatal) return;
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(c->diags, DIAG_ERROR, loc, fmt, ap);
    va_end(ap);
}

void fe_too_deep(ParseCtx *c, Loc loc)
{
    fe_err(c, loc, "nesting is too deep (more than %d levels)", FE_MAX_NESTING);
    c->fatal = true;
}

/* ---- lists ----------------------------------------------------------------------- */

FeList *fe_list(ParseCtx *c) { return arena_alloc(c->arena, sizeof(FeList)); }

FeList *fe_push(ParseCtx *c, FeList *l, void *x)
{
    if (!l) l = fe_list(c);
    if (l->len == l->cap) {
        uint32_t nc = l->cap ? l->cap * 2 : 4;
        void **ni = arena_alloc(c->arena, nc * sizeof *ni);
        if (l->len) memcpy(ni, l->items, l->len * sizeof *ni);
        l->items = ni;
        l->cap = nc;
    }
    l->items[l->len++] = x;
    return l;
}

static uint32_t list_len(const FeList *l) { return l ? l->len : 0; }

/* ---- expressions ----------------------------------------------------------------- */

/* The one allocation point of expressions. Two measures are limited: the nesting
 * (brackets, calls, unary operators, right operands: what a reader sees as nested)
 * and the height of the tree, which a left-associative chain `a + b + c + ...` grows
 * without nesting anything. The chain limit keeps the recursive walks of later stages
 * within the C stack (a few hundred bytes a level, also under ASan). A binary
 * node's left operand's nesting is its own. */
static AstExpr *new_expr(ParseCtx *c, AstExprKind k, Loc loc, Height child)
{
    if (child.nest >= FE_MAX_NESTING) {
        fe_too_deep(c, loc);
        return NULL;
    }
    if (child.depth >= FE_MAX_CHAIN) {
        fe_err(c, loc, "this expression is too long (more than %d operators in a chain); split it with let",
               FE_MAX_CHAIN);
        c->fatal = true;
        return NULL;
    }
    ExprNode *n = arena_alloc(c->arena, sizeof *n);
    n->e.kind = k;
    n->e.loc = loc;
    n->depth = child.depth + 1;
    n->nest = child.nest + 1;
    return &n->e;
}

AstExpr *fe_leaf(ParseCtx *c, AstExprKind k, Loc loc) { return new_expr(c, k, loc, (Height){0, 0}); }

AstExpr *fe_name(ParseCtx *c, const char *name, Loc loc)
{
    AstExpr *e = new_expr(c, AST_NAME, loc, (Height){0, 0});
    if (e) e->name = name;
    return e;
}

AstExpr *fe_unary(ParseCtx *c, int op, AstExpr *x, Loc loc)
{
    AstExpr *e = new_expr(c, AST_UNARY, loc, height(x));
    if (!e) return NULL;
    e->op = op;
    e->lhs = x;
    return e;
}

AstExpr *fe_binary(ParseCtx *c, AstBinOp op, AstExpr *l, AstExpr *r, Loc loc)
{
    Height hl = height(l), hr = height(r);
    AstExpr *e = new_expr(c, AST_BINARY, loc,
                          (Height){max_u32(hl.depth, hr.depth), max_u32(hl.nest ? hl.nest - 1 : 0, hr.nest)});
    if (!e) return NULL;
    e->op = (int)op;
    e->lhs = l;
    e->rhs = r;
    return e;
}

AstExpr *fe_cast(ParseCtx *c, AstExpr *x, AstType *t, Loc loc)
{
    Height h = height(x);
    if (t && t->kind == AST_TYPE_OF) h = hmax(h, height(t->of));   /* x as dtype(...) nests too */
    AstExpr *e = new_expr(c, AST_CAST, loc, h);
    if (!e) return NULL;
    e->lhs = x;
    e->type = t;
    return e;
}

FeArg *fe_arg(ParseCtx *c, const char *name, Loc name_loc, AstExpr *value)
{
    FeArg *a = arena_alloc(c->arena, sizeof *a);
    *a = (FeArg){name, name_loc, value};
    return a;
}

/* Fills e->args (and names, for named arguments) from a list of FeArg*. */
static void set_named_args(ParseCtx *c, AstExpr *e, const FeList *args)
{
    uint32_t n = list_len(args);
    e->nargs = n;
    e->args = arena_alloc(c->arena, (n ? n : 1) * sizeof *e->args);
    e->arg_names = arena_alloc(c->arena, (n ? n : 1) * sizeof *e->arg_names);
    e->arg_name_locs = arena_alloc(c->arena, (n ? n : 1) * sizeof *e->arg_name_locs);
    for (uint32_t i = 0; i < n; i++) {
        const FeArg *a = args->items[i];
        e->args[i] = a->value;
        e->arg_names[i] = a->name;
        e->arg_name_locs[i] = a->name_loc;
    }
}

static Height args_height(const FeList *args, bool named)
{
    Height h = {0, 0};
    for (uint32_t i = 0; i < list_len(args); i++)
        h = hmax(h, height(named ? ((FeArg *)args->items[i])->value : args->items[i]));
    return h;
}

/* Positional arguments come first: a named one fixes the meaning of those after it. */
static void check_arg_order(ParseCtx *c, const FeList *args)
{
    bool named = false;
    for (uint32_t i = 0; i < list_len(args); i++) {
        const FeArg *a = args->items[i];
        if (a->name) named = true;
        else if (named) {
            fe_err(c, a->value->loc, "positional argument after a named one");
            return;
        }
    }
}

AstExpr *fe_call(ParseCtx *c, const char *name, FeList *args, Loc loc)
{
    AstExpr *e = new_expr(c, AST_CALL, loc, args_height(args, true));
    if (!e) return NULL;
    e->name = name;
    check_arg_order(c, args);
    set_named_args(c, e, args);
    return e;
}

AstExpr *fe_map(ParseCtx *c, FeList *entries, Loc loc)
{
    AstExpr *e = new_expr(c, AST_MAP, loc, args_height(entries, true));
    if (!e) return NULL;
    set_named_args(c, e, entries);
    return e;
}

AstExpr *fe_exprs(ParseCtx *c, AstExprKind k, AstExpr *lhs, FeList *elems, Loc loc)
{
    AstExpr *e = new_expr(c, k, loc, hmax(height(lhs), args_height(elems, false)));
    if (!e) return NULL;
    uint32_t n = list_len(elems);
    e->lhs = lhs;
    e->nargs = n;
    e->args = arena_alloc(c->arena, (n ? n : 1) * sizeof *e->args);
    if (n) memcpy(e->args, elems->items, n * sizeof *e->args);
    return e;
}

/* ---- types ------------------------------------------------------------------------ */

static const char *const scalar_names[] = {
    "i1", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
    "f16", "bf16", "f32", "f64", "f8e4m3", "f8e5m2",
};

/* The canonical spelling of a scalar type name, or NULL. `bool` is `i1`. */
static const char *scalar_name(const char *name)
{
    if (strcmp(name, "bool") == 0) return "i1";
    for (size_t i = 0; i < sizeof scalar_names / sizeof *scalar_names; i++)
        if (strcmp(name, scalar_names[i]) == 0) return scalar_names[i];
    return NULL;
}

static AstType *new_type(ParseCtx *c, AstTypeKind k, const char *name, Loc loc)
{
    AstType *t = arena_alloc(c->arena, sizeof *t);
    t->kind = k;
    t->loc = loc;
    const char *canon = name ? scalar_name(name) : NULL;
    if (name && !canon) fe_err(c, loc, "unknown type '%s'", name);
    t->name = canon ? canon : name;
    return t;
}

AstType *fe_scalar_type(ParseCtx *c, const char *name, Loc loc)
{
    return new_type(c, AST_TYPE_SCALAR, name, loc);
}

AstType *fe_ptr_type(ParseCtx *c, const char *name, Loc star, Loc name_loc)
{
    AstType *t = new_type(c, AST_TYPE_PTR, name, name_loc);
    t->loc = star;
    return t;
}

/* `x as dtype(e)`: the element type of e (which is only type-checked, as C's sizeof). */
AstType *fe_dtype_type(ParseCtx *c, const char *name, AstExpr *of, Loc loc)
{
    if (strcmp(name, "dtype"))
        fe_err(c, loc, "'as' needs a type or dtype(x), got a call of '%s'", name);
    AstType *t = new_type(c, AST_TYPE_OF, NULL, loc);
    t->name = "dtype";
    t->of = of;
    return t;
}

AstType *fe_tensor_type(ParseCtx *c, const char *name, FeList *dims, Loc loc)
{
    AstType *t = new_type(c, AST_TYPE_TENSOR, name, loc);
    t->ndims = list_len(dims);
    t->dims = arena_alloc(c->arena, (t->ndims ? t->ndims : 1) * sizeof *t->dims);
    if (t->ndims) memcpy(t->dims, dims->items, t->ndims * sizeof *t->dims);
    return t;
}

AstType *fe_tuple_type(ParseCtx *c, FeList *elems, Loc loc)
{
    AstType *t = new_type(c, AST_TYPE_TUPLE, NULL, loc);
    t->nelems = list_len(elems);
    t->elems = arena_alloc(c->arena, (t->nelems ? t->nelems : 1) * sizeof *t->elems);
    if (t->nelems) memcpy(t->elems, elems->items, t->nelems * sizeof *t->elems);
    return t;
}

/* ---- statements ------------------------------------------------------------------- */

/* Statement depth counts blocks and `else if` links (the two ways statements nest);
 * expressions are limited on their own. */
static AstStmt *new_stmt(ParseCtx *c, AstStmtKind k, Loc loc, uint32_t depth)
{
    if (depth > FE_MAX_NESTING) {
        fe_too_deep(c, loc);
        return NULL;
    }
    StmtNode *n = arena_alloc(c->arena, sizeof *n);
    n->s.kind = k;
    n->s.loc = loc;
    n->depth = depth;
    return &n->s;
}

AstStmt *fe_stmt(ParseCtx *c, AstStmtKind k, Loc loc) { return new_stmt(c, k, loc, 0); }

/* LET / VAR over a list of FeArg* (name and location; value unused). */
AstStmt *fe_let(ParseCtx *c, AstStmtKind k, FeList *names, AstExpr *v, Loc loc)
{
    AstStmt *s = new_stmt(c, k, loc, 0);
    uint32_t n = list_len(names);
    s->nnames = n;
    s->names = arena_alloc(c->arena, (n ? n : 1) * sizeof *s->names);
    s->name_locs = arena_alloc(c->arena, (n ? n : 1) * sizeof *s->name_locs);
    for (uint32_t i = 0; i < n; i++) {
        const FeArg *a = names->items[i];
        s->names[i] = a->name;
        s->name_locs[i] = a->name_loc;
    }
    s->value = v;
    return s;
}

AstStmt *fe_assign(ParseCtx *c, const char *name, Loc name_loc, int op, AstExpr *v)
{
    FeList *names = fe_push(c, NULL, fe_arg(c, name, name_loc, NULL));
    AstStmt *s = fe_let(c, AST_ASSIGN, names, v, name_loc);
    s->op = op;
    return s;
}

static AstStmt *for_stmt(ParseCtx *c, const char *var, Loc var_loc, FeList *range, AstStmt *body, Loc loc)
{
    uint32_t n = list_len(range);
    AstStmt *s = new_stmt(c, AST_FOR, loc, stmt_depth(body));
    if (!s) return NULL;
    s->names = arena_alloc(c->arena, sizeof *s->names);
    s->name_locs = arena_alloc(c->arena, sizeof *s->name_locs);
    s->names[0] = var;
    s->name_locs[0] = var_loc;
    s->nnames = 1;
    s->nargs = n;
    s->args = arena_alloc(c->arena, (n ? n : 1) * sizeof *s->args);
    if (n) memcpy(s->args, range->items, n * sizeof *s->args);
    s->body = body;
    return s;
}

/* for VAR in range(ARGS) BODY; range takes 2 or 3 arguments. */
AstStmt *fe_for(ParseCtx *c, const char *var, Loc var_loc, FeList *range, Loc range_loc,
                AstStmt *body, Loc loc)
{
    uint32_t n = list_len(range);
    if (n < 2 || n > 3)
        fe_err(c, range_loc, "range takes 2 or 3 arguments (lo, hi[, step]), not %u", n);
    return for_stmt(c, var, var_loc, range, body, loc);
}

/* for VAR in static_range(ARGS) BODY: `fname` must be static_range, with 2 or 3
 * arguments; the loop is unrolled by lowering. */
AstStmt *fe_static_for(ParseCtx *c, const char *fname, Loc fname_loc, const char *var, Loc var_loc,
                       FeList *range, AstStmt *body, Loc loc)
{
    uint32_t n = list_len(range);
    if (strcmp(fname, "static_range"))
        fe_err(c, fname_loc, "a for loop runs over range(...) or static_range(...), not '%s'", fname);
    else if (n < 2 || n > 3)
        fe_err(c, fname_loc, "static_range takes 2 or 3 arguments (lo, hi[, step]), not %u", n);
    AstStmt *s = for_stmt(c, var, var_loc, range, body, loc);
    if (s) s->unrolled = true;
    return s;
}

AstExpr *fe_if_expr(ParseCtx *c, AstExpr *cond, AstExpr *a, AstExpr *b, Loc loc)
{
    FeList *l = fe_push(c, fe_push(c, fe_push(c, NULL, cond), a), b);
    return fe_exprs(c, AST_IF_EXPR, NULL, l, loc);
}

AstStmt *fe_if(ParseCtx *c, AstExpr *cond, AstStmt *then, AstStmt *els, Loc loc)
{
    uint32_t d = max_u32(stmt_depth(then), stmt_depth(els) + (els && els->kind == AST_IF));
    AstStmt *s = new_stmt(c, AST_IF, loc, d);
    if (!s) return NULL;
    s->cond = cond;
    s->body = then;
    s->else_body = els;
    return s;
}

AstStmt *fe_while(ParseCtx *c, AstExpr *cond, AstStmt *body, Loc loc)
{
    AstStmt *s = new_stmt(c, AST_WHILE, loc, stmt_depth(body));
    if (!s) return NULL;
    s->cond = cond;
    s->body = body;
    return s;
}

AstStmt *fe_block(ParseCtx *c, FeList *stmts, Loc loc)
{
    uint32_t n = list_len(stmts), d = 0;
    for (uint32_t i = 0; i < n; i++) d = max_u32(d, stmt_depth(stmts->items[i]));
    AstStmt *s = new_stmt(c, AST_BLOCK, loc, d + 1);
    if (!s) return NULL;
    s->nstmts = n;
    s->stmts = arena_alloc(c->arena, (n ? n : 1) * sizeof *s->stmts);
    if (n) memcpy(s->stmts, stmts->items, n * sizeof *s->stmts);
    return s;
}

/* ---- items ------------------------------------------------------------------------ */

AstParam *fe_param(ParseCtx *c, bool is_const, const char *name, Loc loc, AstType *t,
                   AstExpr *def)
{
    AstParam *p = arena_alloc(c->arena, sizeof *p);
    *p = (AstParam){name, loc, is_const, t, def};
    return p;
}

AstAttr *fe_attr(ParseCtx *c, const char *name, FeList *args, Loc loc)
{
    AstAttr *at = arena_alloc(c->arena, sizeof *at);
    at->name = name;
    at->loc = loc;
    AstExpr tmp = {0};
    check_arg_order(c, args);
    set_named_args(c, &tmp, args);
    at->args = tmp.args;
    at->arg_names = tmp.arg_names;
    at->arg_name_locs = tmp.arg_name_locs;
    at->nargs = tmp.nargs;
    return at;
}

static const char *const item_words[] = {"kernel", "fn", "graph"};

/* Kernels and graphs take run-time values whose types must be known; only functions
 * are generic. */
static void check_params(ParseCtx *c, AstItemKind k, const AstParam *ps, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (!ps[i].type && k != AST_FN)
            fe_err(c, ps[i].loc, "parameter '%s' of a %s needs a type", ps[i].name,
                   item_words[k]);
}

AstItem *fe_item(ParseCtx *c, AstItemKind k, Loc loc, const char *name, Loc name_loc,
                 FeList *attrs, FeList *params)
{
    AstItem *it = arena_alloc(c->arena, sizeof *it);
    it->kind = k;
    it->loc = loc;
    it->name = name;
    it->name_loc = name_loc;
    it->nattrs = list_len(attrs);
    it->attrs = arena_alloc(c->arena, (it->nattrs ? it->nattrs : 1) * sizeof *it->attrs);
    for (uint32_t i = 0; i < it->nattrs; i++) it->attrs[i] = *(AstAttr *)attrs->items[i];
    it->nparams = list_len(params);
    it->params = arena_alloc(c->arena, (it->nparams ? it->nparams : 1) * sizeof *it->params);
    for (uint32_t i = 0; i < it->nparams; i++) it->params[i] = *(AstParam *)params->items[i];
    check_params(c, k, it->params, it->nparams);
    return it;
}

/* grid(e0[, e1[, e2]]) between a kernel's parameters and its body. */
void fe_set_grid(ParseCtx *c, AstItem *it, const char *kw, Loc kw_loc, FeList *exprs)
{
    uint32_t n = list_len(exprs);
    if (strcmp(kw, "grid") != 0) {
        fe_err(c, kw_loc, "expected 'grid(...)' or '{' after the parameters, found '%s'", kw);
        return;
    }
    if (n < 1 || n > 3) fe_err(c, kw_loc, "grid takes 1 to 3 expressions, not %u", n);
    it->ngrid = n;
    it->grid = arena_alloc(c->arena, (n ? n : 1) * sizeof *it->grid);
    if (n) memcpy(it->grid, exprs->items, n * sizeof *it->grid);
}
