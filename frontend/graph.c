/* The graph checker: names, element types and shapes of a `graph` item (LANGUAGE.md
 * section 7), with sizes that may be known only at run time.
 *
 * A size is a linear form c + k1*S1 + k2*S2 + ... over symbolic names (IrSize): the same
 * name is the same size, `concat` adds sizes, and two sizes are equal exactly when
 * their forms are. Every expression gets a GType (element type, literal-ness and
 * shape, or a tuple of those); an expression that failed gets the poison type, which
 * every later check accepts silently, so one mistake gives one diagnostic. A call of
 * one of the file's fns is checked by walking the fn's body with its parameters bound
 * to the argument types, once per (fn, argument types). The rules are written down in
 * docs/GRAPHS.md; the graph built-ins are in graph_builtins below. */
#include <stdlib.h>
#include <string.h>

#include "frontend/frontend.h"
#include "ir/graph_grad.h"

/* ---- sizes: IrSize (ir/graph.h) -------------------------------------------------- */

#define MAX_SIZE IR_SIZE_MAX   /* a written size or factor; sums stay far from overflow */

static bool dim_is_one(IrSize d)
{
    int64_t c;
    return ir_size_is_const(d, &c) && c == 1;
}

/* ---- types ------------------------------------------------------------------------ */

typedef enum { GT_POISON, GT_VOID, GT_VALUE, GT_TUPLE } GKind;

typedef struct GType {
    GKind kind;
    IrElem elem;
    char lit;             /* 'i'/'f': a literal, which takes the other operand's type */
    uint32_t rank;        /* 0: a scalar */
    const IrSize *dims;
    const struct GType **elems;   /* GT_TUPLE */
    uint32_t nelems;
    uint32_t vid;         /* the graph IR value + 1; 0: none (a literal not yet made one) */
    bool known;           /* a literal of known value: fval ('f') or ival ('i') */
    double fval;
    int64_t ival;
} GType;

static const GType poison = {.kind = GT_POISON};
static const GType void_type = {.kind = GT_VOID};

static GType *gt_value(Arena *a, IrElem e, char lit, uint32_t rank, const IrSize *dims)
{
    GType *t = arena_alloc(a, sizeof *t);
    *t = (GType){.kind = GT_VALUE, .elem = e, .lit = lit, .rank = rank, .dims = dims};
    return t;
}

static const GType *gt_scalar(Arena *a, IrElem e) { return gt_value(a, e, 0, 0, NULL); }

static const GType *gt_with_elem(Arena *a, const GType *t, IrElem e)
{
    return gt_value(a, e, 0, t->rank, t->dims);
}

static const char *shape_str(Arena *a, uint32_t rank, const IrSize *dims)
{
    const char *s = "[";
    for (uint32_t i = 0; i < rank; i++)
        s = arena_printf(a, "%s%s%s", s, i ? ", " : "", ir_size_str(a, dims[i]));
    return arena_printf(a, "%s]", s);
}

static const char *gt_shape(Arena *a, const GType *t) { return shape_str(a, t->rank, t->dims); }

/* "bf16[T, 1024]", "f32", "(f32[T], f32[T])". */
static const char *gt_str(Arena *a, const GType *t)
{
    if (t->kind == GT_VOID) return "no value";
    if (t->kind == GT_TUPLE) {
        const char *s = "(";
        for (uint32_t i = 0; i < t->nelems; i++)
            s = arena_printf(a, "%s%s%s", s, i ? ", " : "", gt_str(a, t->elems[i]));
        return arena_printf(a, "%s)", s);
    }
    if (t->kind != GT_VALUE) return "?";
    const char *e = ir_elem_name(t->elem);
    return t->rank ? arena_printf(a, "%s%s", e, gt_shape(a, t)) : e;
}

static bool is_float(const GType *t) { return ir_elem_is_float(t->elem); }
static bool is_int(const GType *t) { return ir_elem_is_int(t->elem); }

/* ---- promotion and broadcasting (LANGUAGE.md section 2) ---------------------------- */

/* The compiler's one promotion rule (ir_promote, LANGUAGE.md section 2). */
static IrElem promote_elem(IrElem a, IrElem b) { return ir_promote(a, b); }

/* The element type of an operation on l and r: a literal takes the other operand's
 * type, except that a float literal with an integer operand gives f32. */
static IrElem promote(const GType *l, const GType *r, char *lit)
{
    *lit = 0;
    if (l->lit && r->lit) {
        *lit = l->lit == 'f' || r->lit == 'f' ? 'f' : 'i';
        return *lit == 'f' ? IR_F32 : promote_elem(l->elem, r->elem);
    }
    if (!l->lit && !r->lit) return promote_elem(l->elem, r->elem);
    const GType *lt = l->lit ? l : r, *ot = l->lit ? r : l;
    return lt->lit == 'f' && !is_float(ot) ? IR_F32 : ot->elem;
}

/* Numpy broadcasting of two shapes aligned at the right; false if they clash. */
static bool bcast_dims(Arena *a, uint32_t na, const IrSize *da, uint32_t nb, const IrSize *db,
                       uint32_t *n, const IrSize **out)
{
    uint32_t r = na > nb ? na : nb;
    IrSize *d = arena_alloc(a, (r + 1) * sizeof *d);
    for (uint32_t i = 0; i < r; i++) {
        const IrSize *x = i < na ? &da[na - 1 - i] : NULL, *y = i < nb ? &db[nb - 1 - i] : NULL;
        if (!x || (y && dim_is_one(*x))) d[r - 1 - i] = *y;
        else if (!y || dim_is_one(*y) || ir_size_eq(*x, *y)) d[r - 1 - i] = *x;
        else return false;
    }
    *n = r;
    *out = d;
    return true;
}

/* ---- the checker's state ---------------------------------------------------------- */

typedef struct Var {
    const char *name;
    const GType *type;
    bool is_var;
} Var;

typedef struct Size {      /* a size name of the graph or fn instance and its value */
    const char *name;
    IrSize dim;
} Size;

typedef struct Memo {      /* one instantiation of a fn */
    const AstItem *fn;
    const char *key;       /* the argument types */
    const GType *ret;      /* NULL while it is being checked */
} Memo;

typedef struct Shared {
    Arena *a;
    const AstProgram *p;
    DiagList *diags;
    VEC(Memo) memo;
    int depth;
    IrGraph *g;            /* the graph IR being built */
    const char *why;       /* set when it cannot be (loops, ...), and where */
    Loc why_loc;
} Shared;

typedef struct Seen {      /* the value an expression gave, for the builder */
    const AstExpr *e;
    const GType *t;
} Seen;

typedef struct Frame {     /* a graph, or one instance of a fn */
    Shared *s;
    Arena *a;
    const AstItem *item;
    const char *what;      /* "graph 'ffn'", "fn 'gelu'" */
    VEC(Var) vars;
    VEC(Size) sizes;
    const GType *ret_decl; /* the declared return type, or NULL */
    const GType *ret_seen; /* the first returned type (fns without a declared one) */
    const GType *ret_val;  /* the first returned value, as the builder made it */
    bool returned;
    VEC(Seen) seen;        /* the values of the expressions checked so far */
    const uint32_t *perm;  /* the axes of the last trans checked */
    struct {               /* the attribute of the last conv2d checked */
        uint32_t stride[2], pad[2];
        bool nhwc;
    } conv;
    struct {               /* the keywords of the last attention checked */
        bool window, gqa;
        int64_t left, right;   /* the window; -1: that side unbounded */
    } attn;
} Frame;

#define ERR(f, loc, ...) diag_error((f)->s->diags, (loc), __VA_ARGS__)

static const Var *lookup_var(const Frame *f, const char *name)
{
    for (size_t i = f->vars.len; i-- > 0;)
        if (strcmp(f->vars.data[i].name, name) == 0) return &f->vars.data[i];
    return NULL;
}

static const Size *lookup_size(const Frame *f, const char *name)
{
    for (size_t i = 0; i < f->sizes.len; i++)
        if (strcmp(f->sizes.data[i].name, name) == 0) return &f->sizes.data[i];
    return NULL;
}

static bool building(const Frame *f);

static void bind(Frame *f, const char *name, const GType *t, bool is_var)
{
    if (!name || strcmp(name, "_") == 0) return;
    vec_push(&f->vars, ((Var){name, t, is_var}));
}

/* A let or var names its IR value (the first name bound to it is the one printed). */
static void name_value(Frame *f, const char *name, const GType *t)
{
    IrGValue *v = name && strcmp(name, "_") && building(f) && t->vid ? &f->s->g->values.data[t->vid - 1] : NULL;
    if (v && !v->name) v->name = name;
}

static const AstItem *find_item(const AstProgram *p, const char *name)
{
    for (uint32_t i = 0; i < p->nitems; i++)
        if (p->items[i].name && strcmp(p->items[i].name, name) == 0) return &p->items[i];
    return NULL;
}

static const char *item_what(Arena *a, const AstItem *it)
{
    static const char *const kinds[] = {"kernel", "fn", "graph"};
    return arena_printf(a, "%s '%s'", kinds[it->kind], it->name ? it->name : "?");
}

static const GType *check_expr(Frame *f, const AstExpr *e);

/* ---- building the graph IR (ir/graph.h) ---------------------------------------------
 * Every value the checker computes carries its IR value (vid); a literal stays a
 * known number until an operation gives it a type (`x * 0.5` makes 0.5 a constant of
 * x's type). Operands are cast to the promoted type before an element-wise op, as the
 * graph IR wants one element type per op. */

static bool building(const Frame *f) { return f->s->g && !f->s->why; }

static void no_ir(Frame *f, Loc loc, const char *why)
{
    if (f->s->why) return;
    f->s->why = why;
    f->s->why_loc = loc;
}

static IrTensorType ttype(const GType *t) { return (IrTensorType){t->elem, t->rank, t->dims}; }

static IrGOp *op_at(Frame *f, uint32_t op) { return &f->s->g->ops.data[op]; }

/* Appends an op of one result of type res; res with that value, or res when not building. */
static const GType *emit(Frame *f, IrGOpKind k, Loc loc, const uint32_t *in, uint32_t nin,
                         const GType *res, uint32_t *opidx)
{
    if (!building(f) || res->kind != GT_VALUE) return res;
    if (f->s->g->ops.len >= FE_MAX_GRAPH_OPS) {
        no_ir(f, loc, "it has too many operations after inlining its fns");
        return res;
    }
    IrTensorType tt = ttype(res);
    uint32_t op = ir_graph_op(f->s->g, k, loc, in, nin, &tt, 1);
    GType *t = gt_value(f->a, res->elem, res->lit, res->rank, res->dims);
    t->vid = ir_graph_result(f->s->g, op, 0) + 1;
    if (opidx) *opidx = op;
    return t;
}

static uint32_t const_val(Frame *f, Loc loc, IrElem e, double fv, int64_t iv)
{
    uint32_t op = 0;
    const GType *r = emit(f, IR_GOP_CONST, loc, NULL, 0, gt_value(f->a, e, 0, 0, NULL), &op);
    if (!r->vid) return 0;
    if (ir_elem_is_float(e)) op_at(f, op)->attr.c.f = fv;
    else op_at(f, op)->attr.c.i = iv;
    return r->vid - 1;
}

/* t's value as element type e: a cast where the types differ, a constant of e for a
 * literal that has no value yet. */
static uint32_t val_as(Frame *f, Loc loc, const GType *t, IrElem e)
{
    if (!building(f)) return 0;
    if (!t) {
        no_ir(f, loc, "of a value the graph IR builder does not know");
        return 0;
    }
    if (!t->vid) {
        if (!t->known) no_ir(f, loc, "of a value the graph IR builder does not know");
        bool fl = t->lit == 'f';
        return const_val(f, loc, e, fl ? t->fval : (double)t->ival, fl ? (int64_t)t->fval : t->ival);
    }
    uint32_t v = t->vid - 1;
    if (f->s->g->values.data[v].type.elem == e) return v;
    const GType *r = emit(f, IR_GOP_CAST, loc, &v, 1, gt_value(f->a, e, 0, t->rank, t->dims), NULL);
    return r->vid ? r->vid - 1 : 0;
}

static uint32_t val(Frame *f, Loc loc, const GType *t) { return val_as(f, loc, t, t->elem); }

/* A copy of the type `as` holding t's value (converted to as's element type). */
static const GType *as_value(Frame *f, Loc loc, const GType *t, const GType *as)
{
    if (!building(f) || as->kind != GT_VALUE) return as;
    GType *r = gt_value(f->a, as->elem, as->lit, as->rank, as->dims);
    r->vid = val_as(f, loc, t, as->elem) + 1;
    return r;
}

/* t as the declared type `want` (a tuple element-wise). */
static const GType *coerce(Frame *f, Loc loc, const GType *t, const GType *want)
{
    if (!building(f) || t->kind != want->kind) return t;
    if (t->kind == GT_VALUE) return as_value(f, loc, t, want);
    if (t->kind != GT_TUPLE) return t;
    GType *r = arena_alloc(f->a, sizeof *r);
    const GType **el = arena_alloc(f->a, (t->nelems + 1) * sizeof *el);
    for (uint32_t i = 0; i < t->nelems; i++) el[i] = coerce(f, loc, t->elems[i], want->elems[i]);
    *r = (GType){.kind = GT_TUPLE, .elems = el, .nelems = t->nelems};
    return r;
}

/* The value that expression e gave when it was checked last. */
static const GType *seen(const Frame *f, const AstExpr *e)
{
    for (size_t i = f->seen.len; i-- > 0;)
        if (f->seen.data[i].e == e) return f->seen.data[i].t;
    return NULL;
}

/* A single value (not a tuple, not nothing); poison with an error otherwise. */
static const GType *value_of(Frame *f, const AstExpr *e)
{
    const GType *t = check_expr(f, e);
    if (t->kind == GT_TUPLE)
        ERR(f, e->loc, "this expression gives %u values; unpack them with let (a, b, ...) = ...",
            t->nelems);
    else if (t->kind == GT_VOID)
        ERR(f, e->loc, "this call returns no value");
    t = t->kind == GT_VALUE ? t : &poison;
    if (building(f)) vec_push(&f->seen, ((Seen){e, t}));
    return t;
}

/* ---- sizes written in the source: [T, 1024], split sizes ------------------------- */

/* A size expression: integers and size names under +, - and * (products of size
 * names too, LANGUAGE.md section 7: `16 * T`, `S * T`). */
static bool size_expr(Frame *f, const AstExpr *e, IrSize *out)
{
    if (!e) return false;
    if (e->kind == AST_INT) {
        if (e->ival > (uint64_t)MAX_SIZE) {
            ERR(f, e->loc, "size %llu is too large", (unsigned long long)e->ival);
            return false;
        }
        *out = ir_size_const((int64_t)e->ival);
        return true;
    }
    if (e->kind == AST_NAME) {
        const Size *s = lookup_size(f, e->name);
        if (!s) ERR(f, e->loc, "unknown size '%s' (sizes are named in the parameters' shapes)",
                    e->name);
        if (s) *out = s->dim;
        return s != NULL;
    }
    IrSize l, r;
    if (e->kind != AST_BINARY || (e->op != AST_ADD && e->op != AST_SUB && e->op != AST_MUL)) {
        ERR(f, e->loc, "a size must be an integer, a size name, or a sum or product of those");
        return false;
    }
    if (!size_expr(f, e->lhs, &l) || !size_expr(f, e->rhs, &r)) return false;
    bool ok = e->op == AST_MUL ? ir_size_mul(f->a, l, r, out)
                               : ir_size_add(f->a, l, r, e->op == AST_ADD ? 1 : -1, out);
    if (ok && out->n == 0 && (out->c > MAX_SIZE || out->c < -MAX_SIZE)) ok = false;
    if (!ok) ERR(f, e->loc, "size is too large");
    return ok;
}

/* A list of sizes `[T, 8, 128]`; positive where known. */
static bool size_list(Frame *f, const AstExpr *e, const char *what, uint32_t *n, IrSize **out)
{
    if (!e || e->kind != AST_LIST) {
        if (e) ERR(f, e->loc, "the %s must be a list of sizes like [T, 1024]", what);
        return false;
    }
    IrSize *d = arena_alloc(f->a, (e->nargs + 1) * sizeof *d);
    bool ok = true;
    for (uint32_t i = 0; i < e->nargs; i++) {
        if (!size_expr(f, e->args[i], &d[i])) ok = false;
        else if (d[i].n == 0 && d[i].c < 1) {
            ERR(f, e->args[i]->loc, "a size must be positive, not %lld", (long long)d[i].c);
            ok = false;
        }
    }
    *n = e->nargs;
    *out = d;
    return ok;
}

static bool axis_arg(Frame *f, const AstExpr *e, const char *fn, const GType *t, uint32_t *out);

/* axis = [a]: that axis; a list of several says which rule it breaks (each axis once,
 * then one axis only), so that [0, 0] is not reported as "not an integer literal". */
static bool axis_list(Frame *f, const AstExpr *e, const char *fn, const GType *t, uint32_t *out)
{
    uint64_t seen = 0;
    for (uint32_t i = 0; i < e->nargs; i++) {
        if (!axis_arg(f, e->args[i], fn, t, out)) return false;
        if (seen >> *out & 1) {
            ERR(f, e->loc, "axis %u appears twice in the axes of %s", *out, fn);
            return false;
        }
        seen |= UINT64_C(1) << *out;
    }
    if (e->nargs == 1) return true;
    ERR(f, e->loc, "%s takes one axis, not a list of %u", fn, e->nargs);
    return false;
}

/* An axis argument: an integer literal, negative counting from the end. */
static bool axis_arg(Frame *f, const AstExpr *e, const char *fn, const GType *t, uint32_t *out)
{
    if (e->kind == AST_LIST && e->nargs) return axis_list(f, e, fn, t, out);
    bool neg = e->kind == AST_UNARY && e->op == '-' && e->lhs;
    const AstExpr *lit = neg ? e->lhs : e;
    if (lit->kind != AST_INT) {
        const char *hint = strcmp(fn, "max") == 0 ? " (use maximum(a, b) for the element-wise maximum)"
                         : strcmp(fn, "min") == 0 ? " (use minimum(a, b) for the element-wise minimum)"
                                                  : "";
        ERR(f, e->loc, "the axis of %s must be an integer literal%s", fn, hint);
        return false;
    }
    int64_t r = t->rank, v = lit->ival > (uint64_t)r ? r + 1 : (int64_t)lit->ival;
    if (neg) v = -v;
    if (v < -r || v >= r) {
        ERR(f, e->loc, "axis %s%llu is out of range for a tensor of shape %s (rank %u)",
            neg ? "-" : "", (unsigned long long)lit->ival, gt_shape(f->a, t), t->rank);
        return false;
    }
    *out = (uint32_t)(v < 0 ? v + r : v);
    return true;
}

/* ---- operators ----------------------------------------------------------------------- */

static void shape_clash(Frame *f, Loc loc, const char *op, const GType *l, const GType *r)
{
    const char *ls = gt_shape(f->a, l), *rs = gt_shape(f->a, r);
    if (strcmp(op, "+") == 0) ERR(f, loc, "cannot add a tensor of shape %s to one of shape %s", ls, rs);
    else if (strcmp(op, "-") == 0)
        ERR(f, loc, "cannot subtract a tensor of shape %s from one of shape %s", rs, ls);
    else if (strcmp(op, "*") == 0)
        ERR(f, loc, "cannot multiply a tensor of shape %s by one of shape %s", ls, rs);
    else if (strcmp(op, "/") == 0)
        ERR(f, loc, "cannot divide a tensor of shape %s by one of shape %s", ls, rs);
    else ERR(f, loc, "cannot combine a tensor of shape %s with one of shape %s in '%s'", ls, rs, op);
}

/* The broadcast and promoted type of an element-wise operation on l and r. */
static const GType *elementwise(Frame *f, Loc loc, const char *op, const GType *l, const GType *r)
{
    if (l->kind != GT_VALUE || r->kind != GT_VALUE) return &poison;
    uint32_t n;
    const IrSize *d;
    if (!bcast_dims(f->a, l->rank, l->dims, r->rank, r->dims, &n, &d)) {
        shape_clash(f, loc, op, l, r);
        return &poison;
    }
    char lit;
    IrElem e = promote(l, r, &lit);
    return gt_value(f->a, e, lit, n, d);
}

static bool is_cmp(int op) { return op >= AST_EQ && op <= AST_GE; }
static bool wants_int(int op) { return op >= AST_SHL && op <= AST_BOR; }

static const GType *check_binary(Frame *f, const AstExpr *e);
static const GType *check_matmul(Frame *f, const AstExpr *e);

static const GType *check_unary(Frame *f, const AstExpr *e)
{
    const GType *t = value_of(f, e->lhs);
    if (t->kind != GT_VALUE) return t;
    if ((e->op == '~' || e->op == '!') && !is_int(t)) {
        ERR(f, e->loc, "operator '%c' needs an integer or bool operand, not %s", e->op,
            gt_str(f->a, t));
        return &poison;
    }
    if (!building(f)) return e->op == '!' ? gt_with_elem(f->a, t, IR_I1) : t;
    if (e->op == '-' && t->known) {
        GType *r = gt_value(f->a, t->elem, t->lit, 0, NULL);
        *r = *t;
        r->fval = -t->fval;
        r->ival = (int64_t)(0 - (uint64_t)t->ival);
        return r;
    }
    uint32_t v = val(f, e->loc, t);
    IrGOpKind k = e->op == '-' ? IR_GOP_NEG : e->op == '~' ? IR_GOP_BNOT : IR_GOP_NOT;
    return emit(f, k, e->loc, &v, 1, e->op == '!' ? gt_with_elem(f->a, t, IR_I1) : t, NULL);
}

static const GType *binary_of(Frame *f, const AstExpr *e, const GType *l, const GType *r);

static const IrGOpKind binop_kind[] = {
    [AST_ADD] = IR_GOP_ADD, [AST_SUB] = IR_GOP_SUB, [AST_MUL] = IR_GOP_MUL, [AST_DIV] = IR_GOP_DIV,
    [AST_REM] = IR_GOP_REM, [AST_SHL] = IR_GOP_SHL, [AST_SHR] = IR_GOP_SHR, [AST_BAND] = IR_GOP_AND,
    [AST_BXOR] = IR_GOP_XOR, [AST_BOR] = IR_GOP_OR, [AST_EQ] = IR_GOP_CMP, [AST_NE] = IR_GOP_CMP,
    [AST_LT] = IR_GOP_CMP, [AST_LE] = IR_GOP_CMP, [AST_GT] = IR_GOP_CMP, [AST_GE] = IR_GOP_CMP,
    [AST_LAND] = IR_GOP_LAND, [AST_LOR] = IR_GOP_LOR,
};

/* Two known literals under + - * (and / of floats) give a known literal. */
static bool fold(const GType *l, const GType *r, int op, GType *out)
{
    if (!l->known || !r->known || op > AST_DIV || (op == AST_DIV && out->lit != 'f')) return false;
    if (out->lit == 'f') {
        double x = l->lit == 'f' ? l->fval : (double)l->ival, y = r->lit == 'f' ? r->fval : (double)r->ival;
        out->fval = op == AST_ADD ? x + y : op == AST_SUB ? x - y : op == AST_MUL ? x * y : x / y;
    } else if (op == AST_ADD ? __builtin_add_overflow(l->ival, r->ival, &out->ival)
               : op == AST_SUB ? __builtin_sub_overflow(l->ival, r->ival, &out->ival)
                               : __builtin_mul_overflow(l->ival, r->ival, &out->ival))
        return false;
    out->known = true;
    return true;
}

/* The op of `l op r` with result type t: both operands as their promoted type. */
static const GType *emit_binary(Frame *f, Loc loc, int op, const GType *l, const GType *r, const GType *t)
{
    if (!building(f) || t->kind != GT_VALUE) return t;
    GType folded = *t;
    if (t->lit && fold(l, r, op, &folded)) {
        GType *c = gt_value(f->a, t->elem, t->lit, 0, NULL);
        *c = folded;
        return c;
    }
    char lit;
    IrElem pe = promote(l, r, &lit);
    uint32_t in[2] = {val_as(f, loc, l, pe), val_as(f, loc, r, pe)}, idx = 0;
    const GType *res = emit(f, binop_kind[op], loc, in, 2, t, &idx);
    if (res->vid && binop_kind[op] == IR_GOP_CMP) op_at(f, idx)->attr.cmp = (IrGCmp)(op - AST_EQ);
    return res;
}

/* A chain `a + b + c + ...` is walked without recursing down its left spine (up to
 * FE_MAX_CHAIN operators), so the C stack holds a frame per nesting level only. */
static const GType *check_binary(Frame *f, const AstExpr *e)
{
    if (e->op == AST_MATMUL) return check_matmul(f, e);
    VEC(const AstExpr *) spine = {0};
    const AstExpr *x = e;
    for (; x->kind == AST_BINARY && x->op != AST_MATMUL; x = x->lhs) vec_push(&spine, x);
    const GType *t = value_of(f, x);
    for (size_t i = spine.len; i-- > 0;) t = binary_of(f, spine.data[i], t, value_of(f, spine.data[i]->rhs));
    vec_free(&spine);
    return t;
}

static const GType *binary_of(Frame *f, const AstExpr *e, const GType *l, const GType *r)
{
    const char *op = e->op >= 0 && e->op <= AST_LOR ? ast_binop_text[e->op] : "?";
    if (l->kind != GT_VALUE || r->kind != GT_VALUE) return &poison;
    bool need_int = wants_int(e->op) || e->op == AST_LAND || e->op == AST_LOR;
    if (need_int && (!is_int(l) || !is_int(r))) {
        ERR(f, e->loc, "operator '%s' needs integer or bool operands, not %s and %s", op,
            gt_str(f->a, l), gt_str(f->a, r));
        return &poison;
    }
    const GType *t = elementwise(f, e->loc, op, l, r);
    if (t->kind == GT_VALUE && (is_cmp(e->op) || e->op == AST_LAND || e->op == AST_LOR))
        t = gt_with_elem(f->a, t, IR_I1);
    return emit_binary(f, e->loc, e->op, l, r, t);
}

/* [..., M, K] @ [..., K, N] -> [..., M, N], leading axes broadcast; a vector operand
 * counts as a matrix of one row (left) or column (right) that the result drops. */
static const GType *check_matmul(Frame *f, const AstExpr *e)
{
    const GType *l = value_of(f, e->lhs), *r = value_of(f, e->rhs);
    if (l->kind != GT_VALUE || r->kind != GT_VALUE) return &poison;
    const char *ls = gt_shape(f->a, l), *rs = gt_shape(f->a, r);
    if (l->rank == 0 || r->rank == 0) {
        ERR(f, e->loc, "cannot multiply a tensor of shape %s by one of shape %s with @: both "
            "need a rank of 1 or more (use * to scale)", ls, rs);
        return &poison;
    }
    IrSize kl = l->dims[l->rank - 1], kr = r->dims[r->rank == 1 ? 0 : r->rank - 2];
    if (!ir_size_eq(kl, kr)) {
        ERR(f, e->loc, "cannot multiply a tensor of shape %s by one of shape %s: inner sizes "
            "%s and %s differ", ls, rs, ir_size_str(f->a, kl), ir_size_str(f->a, kr));
        return &poison;
    }
    uint32_t bl = l->rank >= 2 ? l->rank - 2 : 0, br = r->rank >= 2 ? r->rank - 2 : 0, n;
    const IrSize *batch;
    if (!bcast_dims(f->a, bl, l->dims, br, r->dims, &n, &batch)) {
        ERR(f, e->loc, "cannot multiply a tensor of shape %s by one of shape %s: batch shapes "
            "%s and %s differ", ls, rs, shape_str(f->a, bl, l->dims), shape_str(f->a, br, r->dims));
        return &poison;
    }
    IrSize *d = arena_alloc(f->a, (n + 2) * sizeof *d);
    memcpy(d, batch, n * sizeof *d);
    if (l->rank >= 2) d[n++] = l->dims[l->rank - 2];
    if (r->rank >= 2) d[n++] = r->dims[r->rank - 1];
    char lit;
    IrElem pe = promote(l, r, &lit);
    uint32_t in[2] = {val_as(f, e->loc, l, pe), val_as(f, e->loc, r, pe)};
    return emit(f, IR_GOP_MATMUL, e->loc, in, 2, gt_value(f->a, pe, 0, n, d), NULL);
}

/* ---- names, literals, conversions, indexing ----------------------------------------- */

static const GType *check_name(Frame *f, const AstExpr *e)
{
    const Var *v = lookup_var(f, e->name);
    if (v) return v->type;
    const Size *s = lookup_size(f, e->name);
    if (s) {
        uint32_t idx = 0;
        const GType *t = emit(f, IR_GOP_SIZE, e->loc, NULL, 0, gt_scalar(f->a, IR_I64), &idx);
        if (t->vid) op_at(f, idx)->attr.size = s->dim;
        return t;
    }
    ERR(f, e->loc, "unknown name '%s'", e->name);
    return &poison;
}

static const GType *check_int(Frame *f, const AstExpr *e)
{
    GType *t = gt_value(f->a, e->ival > INT32_MAX ? IR_I64 : IR_I32, 'i', 0, NULL);
    t->known = true;
    t->ival = (int64_t)e->ival;
    return t;
}

static const GType *check_float(Frame *f, const AstExpr *e)
{
    GType *t = gt_value(f->a, IR_F32, 'f', 0, NULL);
    t->known = true;
    t->fval = e->fval;
    return t;
}

/* The element type an AstType names (`f32`, `bool`); false with an error. */
static bool elem_of(Frame *f, const AstType *t, IrElem *out)
{
    if (!t || !t->name) return false;
    if (t->kind == AST_TYPE_PTR) {
        ERR(f, t->loc, "graphs have no pointers; use a tensor type like %s[N]", t->name);
        return false;
    }
    if (!ir_elem_from_name(t->name, strlen(t->name), out) || *out == IR_PTR) {
        ERR(f, t->loc, "unknown element type '%s'", t->name);
        return false;
    }
    return true;
}

static const GType *check_cast(Frame *f, const AstExpr *e)
{
    const GType *t = value_of(f, e->lhs);
    if (e->type && e->type->kind == AST_TYPE_OF) {          /* x as dtype(y): y's element type */
        const GType *of = value_of(f, e->type->of);
        if (t->kind != GT_VALUE || of->kind != GT_VALUE) return &poison;
        return as_value(f, e->loc, t, gt_with_elem(f->a, t, of->lit == 'f' ? IR_F32 : of->lit == 'i' ? IR_I32 : of->elem));
    }
    if (e->type && e->type->kind != AST_TYPE_SCALAR && e->type->kind != AST_TYPE_PTR) {
        ERR(f, e->type->loc, "'as' converts the element type only; write 'as %s'",
            e->type->name ? e->type->name : "f32");
        return &poison;
    }
    IrElem el;
    if (!elem_of(f, e->type, &el) || t->kind != GT_VALUE) return &poison;
    return as_value(f, e->loc, t, gt_with_elem(f->a, t, el));
}

/* t[:, None]: one ':' per axis of t, a None where an axis of size 1 is inserted. */
static const GType *check_index(Frame *f, const AstExpr *e)
{
    const GType *t = value_of(f, e->lhs);
    if (t->kind != GT_VALUE) return t;
    IrSize *d = arena_alloc(f->a, (e->nargs + 1) * sizeof *d);
    uint32_t slices = 0;
    for (uint32_t i = 0; i < e->nargs; i++) {
        const AstExpr *x = e->args[i];
        if (!x || (x->kind != AST_SLICE && x->kind != AST_NONE)) {
            ERR(f, x ? x->loc : e->loc, "an index may only hold ':' and None");
            return &poison;
        }
        d[i] = x->kind == AST_NONE ? ir_size_const(1) : slices < t->rank ? t->dims[slices] : ir_size_const(1);
        slices += x->kind == AST_SLICE;
    }
    if (slices != t->rank) {
        ERR(f, e->loc, "the index has %u ':' but the tensor of shape %s has rank %u", slices,
            gt_shape(f->a, t), t->rank);
        return &poison;
    }
    uint32_t v = val(f, e->loc, t);
    return emit(f, IR_GOP_RESHAPE, e->loc, &v, 1, gt_value(f->a, t->elem, 0, e->nargs, d), NULL);
}

static const GType *check_tuple(Frame *f, const AstExpr *e)
{
    GType *t = arena_alloc(f->a, sizeof *t);
    const GType **el = arena_alloc(f->a, (e->nargs + 1) * sizeof *el);
    for (uint32_t i = 0; i < e->nargs; i++) {
        el[i] = value_of(f, e->args[i]);
        if (el[i]->kind != GT_VALUE) return &poison;
    }
    *t = (GType){.kind = GT_TUPLE, .elems = el, .nelems = e->nargs};
    return t;
}

/* ---- arguments by position and by name ---------------------------------------------- */

/* Puts call's arguments into slots[0..np) by position or name; false with an error. */
static bool bind_args(Frame *f, const AstExpr *call, const char *fn, const char *const *names,
                      uint32_t np, uint32_t nreq, const AstExpr **slots)
{
    if (call->nargs > np) {
        ERR(f, call->loc, "%s takes %s%u argument%s, not %u", fn, nreq < np ? "at most " : "", np,
            np == 1 ? "" : "s", call->nargs);
        return false;
    }
    for (uint32_t i = 0; i < call->nargs; i++) {
        const char *an = call->arg_names ? call->arg_names[i] : NULL;
        Loc loc = call->arg_name_locs && an ? call->arg_name_locs[i] : call->loc;
        uint32_t k = i;
        if (an)
            for (k = 0; k < np && strcmp(names[k], an) != 0;) k++;
        if (k == np) {
            ERR(f, loc, "%s has no argument named '%s'", fn, an);
            return false;
        }
        if (slots[k]) {
            ERR(f, loc, "argument '%s' of %s is given twice", names[k], fn);
            return false;
        }
        slots[k] = call->args[i];
    }
    for (uint32_t k = 0; k < nreq; k++)
        if (!slots[k]) {
            ERR(f, call->loc, "missing argument '%s' of %s", names[k], fn);
            return false;
        }
    return true;
}

/* ---- graph built-ins ------------------------------------------------------------------ */

typedef const GType *(*BuiltinCheck)(Frame *f, const AstExpr *call, const AstExpr **args);

typedef struct Builtin {
    const char *name;
    const char *params[11];
    uint32_t nparams, nreq;
    BuiltinCheck check;
} Builtin;

static const GType *need_float(Frame *f, const AstExpr *arg, const GType *t, const char *fn,
                               const char *what)
{
    if (t->kind != GT_VALUE || is_float(t) || t->lit == 'i') return t;
    ERR(f, arg->loc, "the %s of %s must be a float tensor, not %s", what, fn, gt_str(f->a, t));
    return &poison;
}

static const GType *need_tensor(Frame *f, const AstExpr *arg, const GType *t, const char *fn,
                                uint32_t min_rank)
{
    if (t->kind != GT_VALUE || t->rank >= min_rank) return t;
    ERR(f, arg->loc, "%s needs a tensor of rank %u or more, not %s", fn, min_rank,
        gt_str(f->a, t));
    return &poison;
}

static const GType *need_scalar(Frame *f, const AstExpr *arg, const GType *t, const char *fn,
                                const char *what, bool want_float)
{
    if (t->kind != GT_VALUE) return t;
    if (t->rank != 0) {
        ERR(f, arg->loc, "the %s of %s must be a scalar, not a tensor of shape %s", what, fn,
            gt_shape(f->a, t));
        return &poison;
    }
    if (want_float ? !is_float(t) && t->lit != 'i' : !is_int(t)) {
        ERR(f, arg->loc, "the %s of %s must be %s, not %s", what, fn,
            want_float ? "a float" : "an integer", gt_str(f->a, t));
        return &poison;
    }
    return t;
}

/* exp, log, sqrt, ... : float in, the same type out; an integer literal becomes f32. */
static const GType *b_math(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = need_float(f, args[0], value_of(f, args[0]), call->name, "argument");
    if (t->kind == GT_VALUE && t->lit == 'i') return gt_value(f->a, IR_F32, 'f', 0, NULL);
    return t;
}

static const GType *b_abs(Frame *f, const AstExpr *call, const AstExpr **args)
{
    return value_of(f, args[0]);
}

/* isnan, isinf, isfinite: bool of the argument's shape. */
static const GType *b_classify(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = value_of(f, args[0]);
    return t->kind == GT_VALUE ? gt_with_elem(f->a, t, IR_I1) : t;
}

/* minimum, maximum, pow, fma: element-wise over broadcast arguments; float math
 * (pow, fma) computes integers in f32, as kernels do. */
static const GType *b_elementwise(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = value_of(f, args[0]);
    for (uint32_t i = 1; i < 3 && args[i]; i++)
        t = elementwise(f, call->loc, call->name, t, value_of(f, args[i]));
    int arity;
    if (t->kind == GT_VALUE && ir_elementwise_kind(call->name, &arity) == 'f' && !is_float(t))
        t = gt_value(f->a, IR_F32, t->lit ? 'f' : 0, t->rank, t->dims);
    return t;
}

static const GType *b_where(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *c = value_of(f, args[0]);
    if (c->kind == GT_VALUE && c->elem != IR_I1) {
        ERR(f, args[0]->loc, "the condition of where must be bool, not %s", gt_str(f->a, c));
        return &poison;
    }
    const GType *v = elementwise(f, call->loc, "where", value_of(f, args[1]), value_of(f, args[2]));
    const GType *s = elementwise(f, call->loc, "where", c, v);
    return s->kind == GT_VALUE ? gt_value(f->a, v->elem, v->lit, s->rank, s->dims) : s;
}

/* t without its axis `ax`. */
static const GType *drop_axis(Frame *f, const GType *t, uint32_t ax, IrElem e)
{
    IrSize *d = arena_alloc(f->a, t->rank * sizeof *d + 1);
    for (uint32_t i = 0, n = 0; i < t->rank; i++)
        if (i != ax) d[n++] = t->dims[i];
    return gt_value(f->a, e, 0, t->rank - 1, d);
}

/* sum, max, min, mean, argmax, argmin: remove the axis. */
static const GType *b_reduce(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = need_tensor(f, args[0], value_of(f, args[0]), call->name, 1);
    uint32_t ax;
    if (t->kind != GT_VALUE || !axis_arg(f, args[1], call->name, t, &ax)) return &poison;
    IrElem e = t->elem;
    if (strncmp(call->name, "arg", 3) == 0) e = IR_I32;
    else if (!strcmp(call->name, "any") || !strcmp(call->name, "all")) e = IR_I1;
    else if (strcmp(call->name, "mean") == 0 && !is_float(t)) e = IR_F32;
    return drop_axis(f, t, ax, e);
}

/* softmax, cumsum, cumprod: the same type, along an axis. */
static const GType *b_along(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = need_tensor(f, args[0], value_of(f, args[0]), call->name, 1);
    if (strcmp(call->name, "softmax") == 0) t = need_float(f, args[0], t, call->name, "input");
    uint32_t ax;
    if (t->kind != GT_VALUE || !axis_arg(f, args[1], call->name, t, &ax)) return &poison;
    return t;
}

/* A weight or bias of a norm: a vector of the input's last size. */
static bool norm_vector(Frame *f, const AstExpr *arg, const char *what, const char *fn,
                        const GType *t)
{
    const GType *w = value_of(f, arg);
    if (w->kind != GT_VALUE) return false;
    IrSize last = t->dims[t->rank - 1];
    if (w->rank == 1 && ir_size_eq(w->dims[0], last) && is_float(w)) return true;
    ERR(f, arg->loc, "the %s of %s must be a float tensor of shape [%s] (the last size of the "
        "input %s), not %s", what, fn, ir_size_str(f->a, last), gt_shape(f->a, t), gt_str(f->a, w));
    return false;
}

static const GType *b_norm(Frame *f, const AstExpr *call, const AstExpr **args)
{
    bool ln = strcmp(call->name, "layer_norm") == 0;
    const GType *t = need_tensor(f, args[0], value_of(f, args[0]), call->name, 1);
    t = need_float(f, args[0], t, call->name, "input");
    const AstExpr *eps = args[ln ? 3 : 2];
    bool ok = need_scalar(f, eps, value_of(f, eps), call->name, "eps", true)->kind == GT_VALUE;
    if (t->kind != GT_VALUE) return &poison;
    ok &= norm_vector(f, args[1], "weight", call->name, t);
    if (ln) ok &= norm_vector(f, args[2], "bias", call->name, t);
    return ok ? t : &poison;
}

/* cross_entropy(logits [N, V] float, labels [N] i32 or i64, ignore_index = -100): the
 * mean loss over the rows not ignored, a scalar (f64 for f64 logits, else f32). */
static const GType *b_cross_entropy(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *x = value_of(f, args[0]), *l = value_of(f, args[1]);
    bool ok = !args[2] || need_scalar(f, args[2], value_of(f, args[2]), "cross_entropy", "ignore_index", false)->kind == GT_VALUE;
    if (x->kind == GT_VALUE && (x->rank != 2 || !is_float(x))) {
        ERR(f, args[0]->loc, "the logits of cross_entropy must be a float tensor of shape [N, V], not %s", gt_str(f->a, x));
        return &poison;
    }
    if (x->kind != GT_VALUE || l->kind != GT_VALUE) return &poison;
    if (l->rank != 1 || (l->elem != IR_I32 && l->elem != IR_I64) || l->lit || !ir_size_eq(l->dims[0], x->dims[0])) {
        ERR(f, args[1]->loc, "the labels of cross_entropy must be an i32 or i64 tensor of shape [%s] (a class index per "
            "row of the logits %s), not %s", ir_size_str(f->a, x->dims[0]), gt_shape(f->a, x), gt_str(f->a, l));
        return &poison;
    }
    return ok ? gt_scalar(f->a, x->elem == IR_F64 ? IR_F64 : IR_F32) : &poison;
}

/* rope(x [..., T, D], cos, sin): rotary position embedding, D a known even size, cos and
 * sin of x's element type and of a shape that broadcasts to [..., T, D/2]; x's type. */
static const GType *b_rope(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *x = value_of(f, args[0]);
    int64_t d = 0;
    if (x->kind == GT_VALUE && (x->rank < 2 || !is_float(x) || x->lit)) {
        ERR(f, args[0]->loc, "the input of rope must be a float tensor of shape [..., T, D], not %s", gt_str(f->a, x));
        return &poison;
    }
    if (x->kind != GT_VALUE) return &poison;
    if (!ir_size_is_const(x->dims[x->rank - 1], &d) || d % 2) {
        ERR(f, args[0]->loc, "rope rotates pairs of the last axis, whose size must be a known even number, not %s (in %s)",
            ir_size_str(f->a, x->dims[x->rank - 1]), gt_str(f->a, x));
        return &poison;
    }
    IrSize *half = arena_alloc(f->a, x->rank * sizeof *half);
    memcpy(half, x->dims, x->rank * sizeof *half);
    half[x->rank - 1] = ir_size_const(d / 2);
    bool ok = true;
    for (uint32_t i = 1; i < 3; i++) {
        const GType *t = value_of(f, args[i]);
        if (t->kind != GT_VALUE) {
            ok = false;
            continue;
        }
        uint32_t n;
        const IrSize *b;
        bool fits = !t->lit && t->elem == x->elem && t->rank >= 1 && t->rank <= x->rank &&
                    ir_size_eq(t->dims[t->rank - 1], half[x->rank - 1]) &&
                    ir_broadcast_shapes(f->a, t->rank, t->dims, x->rank, half, &n, &b);
        for (uint32_t k = 0; fits && k < n; k++) fits = ir_size_eq(b[k], half[k]);
        if (!fits) {
            ERR(f, args[i]->loc, "the %s table of rope must be a %s tensor of shape %s (or one that broadcasts to it: "
                "[T, %lld]), not %s", i == 1 ? "cos" : "sin", ir_elem_name(x->elem), ir_shape_str(f->a, x->rank, half),
                (long long)(d / 2), gt_str(f->a, t));
            ok = false;
        }
    }
    return ok ? x : &poison;
}

/* swiglu(gate, up) = silu(gate) * up: float operands (integers become f32), promoted and
 * broadcast. */
static const GType *b_swiglu(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *g = need_float(f, args[0], value_of(f, args[0]), "swiglu", "gate");
    const GType *u = need_float(f, args[1], value_of(f, args[1]), "swiglu", "up");
    const GType *t = elementwise(f, call->loc, "swiglu", g, u);
    if (t->kind == GT_VALUE && !is_float(t)) t = gt_value(f->a, IR_F32, t->lit ? 'f' : 0, t->rank, t->dims);
    return t;
}

/* trans(t) swaps the last two axes; trans(t, [2, 0, 1]) permutes them (result axis i
 * is axis axes[i] of t). The permutation is kept in f->perm for the builder. */
static bool trans_axes(Frame *f, const AstExpr *e, const GType *t, uint32_t *perm)
{
    for (uint32_t i = 0; i < t->rank; i++) perm[i] = i;
    if (!e) {
        perm[t->rank - 1] = t->rank - 2;
        perm[t->rank - 2] = t->rank - 1;
        return true;
    }
    if (e->kind != AST_LIST || e->nargs != t->rank) {
        ERR(f, e->loc, "the axes of trans must be a list of %u axes (a permutation of 0 .. %u)",
            t->rank, t->rank - 1);
        return false;
    }
    uint64_t seen = 0;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (!axis_arg(f, e->args[i], "trans", t, &perm[i])) return false;
        if (seen >> perm[i] & 1) {
            ERR(f, e->args[i]->loc, "axis %u appears twice in the axes of trans", perm[i]);
            return false;
        }
        seen |= (uint64_t)1 << perm[i];
    }
    return true;
}

static const GType *b_trans(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = need_tensor(f, args[0], value_of(f, args[0]), "trans", args[1] ? 1 : 2);
    if (t->kind != GT_VALUE) return t;
    uint32_t *perm = arena_alloc(f->a, (t->rank + 1) * sizeof *perm);
    if (!trans_axes(f, args[1], t, perm)) return &poison;
    IrSize *d = arena_alloc(f->a, t->rank * sizeof *d);
    for (uint32_t i = 0; i < t->rank; i++) d[i] = t->dims[perm[i]];
    f->perm = perm;
    return gt_value(f->a, t->elem, 0, t->rank, d);
}

/* The element count of a shape as a polynomial, printed "64*T"; NULL on overflow. */
static const char *numel_str(Arena *a, uint32_t rank, const IrSize *dims, IrSize *n)
{
    return ir_size_numel(a, rank, dims, n) ? ir_size_str(a, *n) : NULL;
}

/* reshape(t, shape): element counts equal as polynomials ([4, T, 16] to [4, 16 * T]). */
static const GType *b_reshape(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = value_of(f, args[0]);
    uint32_t n;
    IrSize *d;
    if (!size_list(f, args[1], "shape of reshape", &n, &d) || t->kind != GT_VALUE) return &poison;
    IrSize nf, nt;
    const char *from = numel_str(f->a, t->rank, t->dims, &nf), *to = numel_str(f->a, n, d, &nt);
    if (!from || !to || !ir_size_eq(nf, nt)) {
        ERR(f, call->loc, "cannot reshape a tensor of shape %s (%s elements) to %s (%s elements)",
            gt_shape(f->a, t), from ? from : "too many", shape_str(f->a, n, d), to ? to : "too many");
        return &poison;
    }
    return gt_value(f->a, t->elem, 0, n, d);
}

static const GType *b_broadcast(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = value_of(f, args[0]);
    uint32_t n, rn;
    IrSize *d;
    const IrSize *rd;
    if (!size_list(f, args[1], "shape of broadcast", &n, &d) || t->kind != GT_VALUE) return &poison;
    bool ok = bcast_dims(f->a, t->rank, t->dims, n, d, &rn, &rd) && rn == n;
    for (uint32_t i = 0; ok && i < n; i++) ok = ir_size_eq(rd[i], d[i]);
    if (!ok) {
        ERR(f, call->loc, "cannot broadcast a tensor of shape %s to shape %s", gt_shape(f->a, t),
            shape_str(f->a, n, d));
        return &poison;
    }
    return gt_value(f->a, t->elem, t->lit, n, d);
}

/* concat([a, b, ...], axis): equal sizes off the axis; the axis sizes add up. */
static const GType *b_concat(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const AstExpr *l = args[0];
    if (l->kind != AST_LIST || l->nargs == 0) {
        ERR(f, l->loc, "the first argument of concat must be a list of tensors like [a, b]");
        return &poison;
    }
    const GType *t = need_tensor(f, l->args[0], value_of(f, l->args[0]), "concat", 1);
    uint32_t ax;
    if (t->kind != GT_VALUE || !axis_arg(f, args[1], "concat", t, &ax)) return &poison;
    IrSize *d = arena_alloc(f->a, t->rank * sizeof *d);
    memcpy(d, t->dims, t->rank * sizeof *d);
    IrElem e = t->elem;
    for (uint32_t i = 1; i < l->nargs; i++) {
        const GType *u = value_of(f, l->args[i]);
        if (u->kind != GT_VALUE) return &poison;
        bool ok = u->rank == t->rank;
        for (uint32_t k = 0; ok && k < t->rank; k++) ok = k == ax || ir_size_eq(d[k], u->dims[k]);
        if (!ok) {
            ERR(f, l->args[i]->loc, "cannot concatenate a tensor of shape %s with one of shape %s "
                "along axis %u", shape_str(f->a, t->rank, d), gt_shape(f->a, u), ax);
            return &poison;
        }
        char lit;
        e = promote(gt_scalar(f->a, e), u, &lit);
        if (!ir_size_add(f->a, d[ax], u->dims[ax], 1, &d[ax])) {
            ERR(f, l->args[i]->loc, "size is too large");
            return &poison;
        }
    }
    return gt_value(f->a, e, 0, t->rank, d);
}

/* split(t, sizes, axis) -> one tensor per size; the sizes add up to the axis' size. */
static const GType *b_split(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = need_tensor(f, args[0], value_of(f, args[0]), "split", 1);
    uint32_t n, ax;
    IrSize *sz;
    if (!size_list(f, args[1], "sizes of split", &n, &sz) || t->kind != GT_VALUE ||
        !axis_arg(f, args[2], "split", t, &ax))
        return &poison;
    IrSize total = ir_size_const(0);
    for (uint32_t i = 0; i < n; i++)
        if (!ir_size_add(f->a, total, sz[i], 1, &total)) {
            ERR(f, args[1]->loc, "size is too large");
            return &poison;
        }
    if (n == 0 || !ir_size_eq(total, t->dims[ax])) {
        ERR(f, args[1]->loc, "split sizes %s add up to %s, but axis %u of the tensor of shape %s "
            "has size %s", shape_str(f->a, n, sz), ir_size_str(f->a, total), ax, gt_shape(f->a, t),
            ir_size_str(f->a, t->dims[ax]));
        return &poison;
    }
    GType *tup = arena_alloc(f->a, sizeof *tup);
    const GType **el = arena_alloc(f->a, n * sizeof *el);
    for (uint32_t i = 0; i < n; i++) {
        IrSize *d = arena_alloc(f->a, t->rank * sizeof *d);
        memcpy(d, t->dims, t->rank * sizeof *d);
        d[ax] = sz[i];
        el[i] = gt_value(f->a, t->elem, 0, t->rank, d);
    }
    *tup = (GType){.kind = GT_TUPLE, .elems = el, .nelems = n};
    return tup;
}

static const GType *b_dropout(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *t = need_float(f, args[0], value_of(f, args[0]), "dropout", "input");
    const GType *p = need_scalar(f, args[1], value_of(f, args[1]), "dropout", "probability", true);
    const GType *s = need_scalar(f, args[2], value_of(f, args[2]), "dropout", "seed", false);
    const AstExpr *pe = args[1];
    if (pe->kind == AST_FLOAT && !(pe->fval >= 0.0 && pe->fval < 1.0)) {
        ERR(f, pe->loc, "the probability of dropout must be in [0, 1), not %g", pe->fval);
        return &poison;
    }
    return p->kind == GT_VALUE && s->kind == GT_VALUE ? t : &poison;
}

static bool attention_pair(Frame *f, Loc loc, const char *x, const GType *a, const char *y,
                           const GType *b, uint32_t ia, uint32_t ib, const char *what)
{
    IrSize da = a->dims[a->rank - ia], db = b->dims[b->rank - ib];
    if (ir_size_eq(da, db)) return true;
    ERR(f, loc, "attention: %s of shape %s and %s of shape %s have different %s (%s and %s)", x,
        gt_shape(f->a, a), y, gt_shape(f->a, b), what, ir_size_str(f->a, da), ir_size_str(f->a, db));
    return false;
}

/* One side of attention's window: an integer literal, -1 (unbounded) or 0 up to 2^30. */
static bool window_side(Frame *f, const AstExpr *e, int64_t *out)
{
    if (e->kind == AST_UNARY && e->op == '-' && e->lhs->kind == AST_INT && e->lhs->ival == 1) return *out = -1, true;
    if (e->kind == AST_INT && e->ival <= (1u << 30)) return *out = (int64_t)e->ival, true;
    ERR(f, e->loc, "each side of attention's window must be an integer literal, -1 (unbounded) or 0 up to 2^30");
    return false;
}

/* window = [left, right]: query i sees the keys i + Lk - Lq - left up to i + Lk - Lq + right. */
static bool attention_window(Frame *f, const AstExpr *e)
{
    f->attn.window = e != NULL;
    f->attn.left = f->attn.right = -1;
    if (!e) return true;
    if (e->kind != AST_LIST || e->nargs != 2) {
        ERR(f, e->loc, "the window of attention is a list of two integers [left, right]");
        return false;
    }
    bool ok = window_side(f, e->args[0], &f->attn.left);
    return window_side(f, e->args[1], &f->attn.right) && ok;
}

/* gqa = true: k and v of [..., Hkv, Lk, D] and q of [..., H, Lq, D], Hkv dividing H;
 * t[1] and t[2] become k's and v's types repeated to H heads for the checks of the
 * result's shape; the op takes k and v as they are (query head h reads KV head
 * h / (H / Hkv), as SDPA's enable_gqa; no repeated copy). */
static bool attention_gqa(Frame *f, const AstExpr *call, const AstExpr *e, const GType **t)
{
    f->attn.gqa = false;
    if (!e) return true;
    if (e->kind != AST_BOOL) {
        ERR(f, e->loc, "gqa of attention must be true or false");
        return false;
    }
    if (!(f->attn.gqa = e->ival != 0)) return true;
    for (int i = 0; i < 3; i++)
        if (t[i]->rank < 3) {
            ERR(f, call->loc, "attention with gqa needs q, k and v of rank 3 or more ([..., heads, L, D]), not %s",
                gt_shape(f->a, t[i]));
            return false;
        }
    IrSize h = t[0]->dims[t[0]->rank - 3], hk = t[1]->dims[t[1]->rank - 3], hv = t[2]->dims[t[2]->rank - 3];
    int64_t nh, nk;
    if (!ir_size_eq(hk, hv) || !ir_size_is_const(h, &nh) || !ir_size_is_const(hk, &nk) || nk <= 0 || nh % nk) {
        ERR(f, call->loc, "attention with gqa: the heads of k and v (%s and %s) must be one number that divides the "
            "heads of q (%s), all known constants", ir_size_str(f->a, hk), ir_size_str(f->a, hv), ir_size_str(f->a, h));
        return false;
    }
    for (int i = 1; i < 3; i++) {
        IrSize *d = arena_alloc(f->a, t[i]->rank * sizeof *d);
        memcpy(d, t[i]->dims, t[i]->rank * sizeof *d);
        d[t[i]->rank - 3] = h;
        t[i] = gt_value(f->a, t[i]->elem, t[i]->lit, t[i]->rank, d);
    }
    return true;
}

/* attention(q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv], causal, scale, window, gqa)
 * -> [..., Lq, Dv]. */
static const GType *b_attention(Frame *f, const AstExpr *call, const AstExpr **args)
{
    static const char *const names[] = {"q", "k", "v"};
    const GType *t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = need_tensor(f, args[i], value_of(f, args[i]), "attention", 2);
        t[i] = need_float(f, args[i], t[i], "attention", names[i]);
    }
    if (args[3]) {
        const GType *c = value_of(f, args[3]);
        if (c->kind == GT_VALUE && (c->rank || c->elem != IR_I1))
            ERR(f, args[3]->loc, "causal must be a bool, not %s", gt_str(f->a, c));
    }
    if (args[4]) need_scalar(f, args[4], value_of(f, args[4]), "attention", "scale", true);
    if (!attention_window(f, args[5])) return &poison;
    if (t[0]->kind != GT_VALUE || t[1]->kind != GT_VALUE || t[2]->kind != GT_VALUE) return &poison;
    if (!attention_gqa(f, call, args[6], t)) return &poison;
    if (!attention_pair(f, call->loc, "q", t[0], "k", t[1], 1, 1, "head sizes") ||
        !attention_pair(f, call->loc, "k", t[1], "v", t[2], 2, 2, "sequence lengths"))
        return &poison;
    uint32_t n1, n;
    const IrSize *b1, *b;
    if (!bcast_dims(f->a, t[0]->rank - 2, t[0]->dims, t[1]->rank - 2, t[1]->dims, &n1, &b1) ||
        !bcast_dims(f->a, n1, b1, t[2]->rank - 2, t[2]->dims, &n, &b)) {
        ERR(f, call->loc, "attention: the batch shapes of q %s, k %s and v %s differ",
            gt_shape(f->a, t[0]), gt_shape(f->a, t[1]), gt_shape(f->a, t[2]));
        return &poison;
    }
    IrSize *d = arena_alloc(f->a, (n + 2) * sizeof *d);
    memcpy(d, b, n * sizeof *d);
    d[n] = t[0]->dims[t[0]->rank - 2];
    d[n + 1] = t[2]->dims[t[2]->rank - 1];
    char lit;
    IrElem e = promote(t[0], t[2], &lit);
    return gt_value(f->a, e, 0, n + 2, d);
}

/* conv2d's stride or padding: an integer literal (both axes) or a list of two. */
static bool conv_pair(Frame *f, const AstExpr *e, const char *what, uint32_t min, uint32_t out[2])
{
    out[0] = out[1] = min;   /* the defaults: stride 1, padding 0 */
    if (!e) return true;
    const AstExpr *one[1] = {e}, *const *el = e->kind == AST_LIST ? (const AstExpr *const *)e->args : one;
    uint32_t n = e->kind == AST_LIST ? e->nargs : 1;
    if (n != 2 && e->kind == AST_LIST) {
        ERR(f, e->loc, "the %s of conv2d is an integer or a list of two (height, width), not %u", what, n);
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (el[i]->kind != AST_INT || el[i]->ival < min || el[i]->ival > 65536) {
            ERR(f, el[i]->loc, "the %s of conv2d must be an integer literal in %u..65536", what, min);
            return false;
        }
        out[i] = (uint32_t)el[i]->ival;
    }
    if (n == 1) out[1] = out[0];
    return true;
}

/* conv2d(x, w, stride = 1, padding = 0, nhwc = false) (docs/GRAPHS.md). */
static const GType *b_conv2d(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *x = need_float(f, args[0], value_of(f, args[0]), "conv2d", "input");
    const GType *w = need_float(f, args[1], value_of(f, args[1]), "conv2d", "weight");
    bool ok = conv_pair(f, args[2], "stride", 1, f->conv.stride);
    ok = conv_pair(f, args[3], "padding", 0, f->conv.pad) && ok;   /* both report their errors */
    f->conv.nhwc = false;
    if (args[4]) {
        if (args[4]->kind != AST_BOOL) {
            ERR(f, args[4]->loc, "nhwc of conv2d must be true or false");
            ok = false;
        } else f->conv.nhwc = args[4]->ival != 0;
    }
    if (!ok || x->kind != GT_VALUE || w->kind != GT_VALUE) return &poison;
    IrTensorType xt = {x->elem, x->rank, x->dims}, wt = {w->elem, w->rank, w->dims};
    IrSize *d = arena_alloc(f->a, 4 * sizeof *d);
    const char *err;
    if (!ir_conv2d_shape(f->a, &xt, &wt, f->conv.stride, f->conv.pad, f->conv.nhwc, d, &err)) {
        ERR(f, call->loc, "%s", err);
        return &poison;
    }
    char lit;
    return gt_value(f->a, promote(x, w, &lit), 0, 4, d);
}

/* ---- grad(y, [x1, x2, ...]) (LANGUAGE-REFERENCE.md section 7.3) ------------------------ */

static bool one_element(const GType *t)
{
    for (uint32_t i = 0; i < t->rank; i++)
        if (!dim_is_one(t->dims[i])) return false;
    return true;
}

/* What grad differentiates: a float value of the graph with one element. */
static const GType *grad_of(Frame *f, const AstExpr *e)
{
    const GType *y = value_of(f, e);
    if (y->kind != GT_VALUE) return y;
    if (y->lit) ERR(f, e->loc, "grad needs a value computed by the graph to differentiate, not a literal");
    else if (!is_float(y)) ERR(f, e->loc, "grad differentiates a float scalar, not %s", gt_str(f->a, y));
    else if (!one_element(y))
        ERR(f, e->loc, "grad differentiates a scalar (rank 0, or one element), not a tensor of shape %s; "
            "reduce it first, for example with sum or mean", gt_shape(f->a, y));
    else return y;
    return &poison;
}

/* One name of grad's list: a float tensor (or scalar) of the graph. */
static const GType *grad_wrt(Frame *f, const AstExpr *e)
{
    const Var *v = e->kind == AST_NAME ? lookup_var(f, e->name) : NULL;
    if (e->kind != AST_NAME)
        ERR(f, e->loc, "grad differentiates with respect to named tensors of the graph; write a name here");
    else if (!v && lookup_size(f, e->name)) ERR(f, e->loc, "'%s' is a size, not a tensor of %s", e->name, f->what);
    else if (!v) ERR(f, e->loc, "unknown name '%s'", e->name);
    else if (v->type->kind != GT_VALUE) return v->type;
    else if (v->type->lit) ERR(f, e->loc, "'%s' is a literal, not a tensor of %s", e->name, f->what);
    else if (!is_float(v->type))
        ERR(f, e->loc, "cannot differentiate with respect to '%s' of type %s: gradients are for float tensors",
            e->name, gt_str(f->a, v->type));
    else {
        if (building(f)) vec_push(&f->seen, ((Seen){e, v->type}));
        return v->type;
    }
    return &poison;
}

/* grad(y, [x1, ...]): a tuple of one gradient per x, each of its x's type. */
static const GType *b_grad(Frame *f, const AstExpr *call, const AstExpr **args)
{
    if (f->item->kind != AST_GRAPH) {
        ERR(f, call->loc, "grad is allowed in a graph's body only, not in %s (fns are inlined; "
            "take the gradient in the graph)", f->what);
        return &poison;
    }
    const GType *y = grad_of(f, args[0]);
    const AstExpr *l = args[1];
    if (l->kind != AST_LIST || l->nargs == 0) {
        ERR(f, l->loc, "the second argument of grad must be a list of names like [w1, w2]");
        return &poison;
    }
    GType *tup = arena_alloc(f->a, sizeof *tup);
    const GType **el = arena_alloc(f->a, l->nargs * sizeof *el);
    bool ok = y->kind == GT_VALUE;
    for (uint32_t i = 0; i < l->nargs; i++) {
        const GType *x = grad_wrt(f, l->args[i]);
        ok &= x->kind == GT_VALUE;
        el[i] = x->kind == GT_VALUE ? gt_value(f->a, x->elem, 0, x->rank, x->dims) : x;
    }
    *tup = (GType){.kind = GT_TUPLE, .elems = el, .nelems = l->nargs};
    return ok ? tup : &poison;
}

/* ---- the optimizer step: lists of tensors (LANGUAGE-REFERENCE.md section 7.5) ---------- */

/* A list argument `[a, b, ...]` of at least one element; NULL with an error otherwise. */
static const AstExpr *tensor_list(Frame *f, const AstExpr *l, const char *fn, const char *what)
{
    if (l->kind == AST_LIST && l->nargs) return l;
    ERR(f, l->loc, "the %s of %s must be a list of tensors like [a, b]", what, fn);
    return NULL;
}

/* One element of such a list: a float value of the graph, not a literal. */
static const GType *list_float(Frame *f, const AstExpr *e, const char *fn, const char *what)
{
    const GType *t = value_of(f, e);
    if (t->kind != GT_VALUE) return t;
    if (!t->lit && is_float(t)) return t;
    ERR(f, e->loc, "the %s of %s must be float tensors of the graph, not %s%s", what, fn, t->lit ? "a literal " : "",
        gt_str(f->a, t));
    return &poison;
}

/* found_inf([g, ...]) -> bool; global_norm([g, ...], scale = 1.0) -> f32 (f64 when a g is). */
static const GType *b_grad_stats(Frame *f, const AstExpr *call, const AstExpr **args)
{
    bool norm = call->name[0] == 'g';
    const AstExpr *l = tensor_list(f, args[0], call->name, "first argument");
    if (!l) return &poison;
    IrElem e = IR_F32;
    bool ok = true;
    for (uint32_t i = 0; i < l->nargs; i++) {
        const GType *t = list_float(f, l->args[i], call->name, "tensors");
        ok &= t->kind == GT_VALUE;
        if (t->kind == GT_VALUE && t->elem == IR_F64) e = IR_F64;
    }
    if (norm && args[1]) ok &= need_scalar(f, args[1], value_of(f, args[1]), call->name, "scale", true)->kind == GT_VALUE;
    return ok ? gt_scalar(f->a, norm ? e : IR_I1) : &poison;
}

static const char *const adamw_lists[4] = {"params", "grads", "exp_avgs", "exp_avg_sqs"};
static const char *const adamw_one[4] = {"param", "grad", "exp_avg", "exp_avg_sq"};

/* Parameter i of adamw: p an f32/f64 tensor of the type e of the others, g a float tensor
 * of its shape, m and v of p's type. */
static bool adamw_param(Frame *f, const AstExpr *const *l, uint32_t i, IrElem *e, const GType **pt_out)
{
    const GType *t[4];
    bool ok = true;
    for (uint32_t k = 0; k < 4; k++) ok &= (t[k] = list_float(f, l[k]->args[i], "adamw", adamw_lists[k]))->kind == GT_VALUE;
    if (!ok) return false;
    const AstExpr *pe = l[0]->args[i];
    if ((t[0]->elem != IR_F32 && t[0]->elem != IR_F64) || (i && t[0]->elem != *e)) {
        ERR(f, pe->loc, "the params of adamw must be f32 or f64 tensors of one type (keep f32 master weights and "
            "cast them for a 16-bit forward: `x @ (w as bf16)`), not %s", gt_str(f->a, t[0]));
        return false;
    }
    *e = t[0]->elem;
    *pt_out = t[0];
    IrTensorType pt = ttype(t[0]), gt = ttype(t[1]);
    gt.elem = pt.elem;
    for (uint32_t k = 1; k < 4; k++) {
        IrTensorType u = k == 1 ? gt : ttype(t[k]);
        if (ir_ttype_eq(&u, &pt)) continue;
        ERR(f, l[k]->args[i]->loc, "%s %u of adamw must be %s%s (its parameter's), not %s", adamw_one[k], i,
            k == 1 ? "a float tensor of shape " : "", k == 1 ? gt_shape(f->a, t[0]) : gt_str(f->a, t[0]),
            gt_str(f->a, t[k]));
        return false;
    }
    return true;
}

/* adamw's scalars: step a number, lr eps weight_decay grad_scale floats, betas a pair of
 * floats, skip a bool. */
static bool adamw_scalars(Frame *f, const AstExpr **args)
{
    const GType *st = value_of(f, args[4]);
    bool ok = st->kind == GT_VALUE;
    if (ok && (st->rank || (!is_float(st) && !is_int(st)) || st->elem == IR_I1)) {
        ERR(f, args[4]->loc, "the step of adamw must be a number (the step count t >= 1), not %s", gt_str(f->a, st));
        ok = false;
    }
    static const uint32_t fl[4] = {5, 7, 8, 9};
    static const char *const fn[4] = {"learning rate", "eps", "weight decay", "gradient scale"};
    for (uint32_t k = 0; k < 4; k++)
        if (args[fl[k]]) ok &= need_scalar(f, args[fl[k]], value_of(f, args[fl[k]]), "adamw", fn[k], true)->kind == GT_VALUE;
    const AstExpr *b = args[6];
    if (b && (b->kind != AST_TUPLE || b->nargs != 2)) {
        ERR(f, b->loc, "the betas of adamw must be a pair like (0.9, 0.999)");
        return false;
    }
    for (uint32_t k = 0; b && k < 2; k++) ok &= need_scalar(f, b->args[k], value_of(f, b->args[k]), "adamw", "beta", true)->kind == GT_VALUE;
    if (args[10]) {
        const GType *sk = value_of(f, args[10]);
        if (sk->kind == GT_VALUE && (sk->rank || sk->elem != IR_I1)) {
            ERR(f, args[10]->loc, "the skip flag of adamw must be a bool scalar (found_inf(...)), not %s", gt_str(f->a, sk));
            ok = false;
        }
        ok &= sk->kind == GT_VALUE;
    }
    return ok;
}

/* adamw(params, grads, exp_avgs, exp_avg_sqs, step, ...) -> (params'..., exp_avgs'...,
 * exp_avg_sqs'...): one tuple of 3n tensors. */
static const GType *b_adamw(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const AstExpr *l[4];
    for (uint32_t k = 0; k < 4; k++)
        if (!(l[k] = tensor_list(f, args[k], "adamw", adamw_lists[k]))) return &poison;
    uint32_t n = l[0]->nargs;
    for (uint32_t k = 1; k < 4; k++)
        if (l[k]->nargs != n) {
            ERR(f, l[k]->loc, "adamw has %u param%s but %u %s (one per parameter)", n, n == 1 ? "" : "s", l[k]->nargs,
                l[k]->nargs == 1 ? adamw_one[k] : adamw_lists[k]);
            return &poison;
        }
    GType *tup = arena_alloc(f->a, sizeof *tup);
    const GType **el = arena_alloc(f->a, 3 * n * sizeof *el);
    bool ok = true;
    IrElem e = IR_F32;
    for (uint32_t i = 0; i < n; i++) {
        const GType *pt = &poison;
        ok &= adamw_param(f, l, i, &e, &pt);
        for (uint32_t k = 0; k < 3; k++) el[k * n + i] = pt;
    }
    ok &= adamw_scalars(f, args);
    *tup = (GType){.kind = GT_TUPLE, .elems = el, .nelems = 3 * n};
    return ok ? tup : &poison;
}

/* update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
 * growth_interval) -> (scale', growth_tracker'): GradScaler.update. */
static const GType *b_update_scale(Frame *f, const AstExpr *call, const AstExpr **args)
{
    static const char *const what[6] = {"scale", "growth tracker", "found_inf flag", "growth factor", "backoff factor",
                                        "growth interval"};
    const GType *t[6] = {0};
    bool ok = true;
    for (uint32_t k = 0; k < 6; k++) {
        if (!args[k]) continue;
        t[k] = need_scalar(f, args[k], value_of(f, args[k]), "update_scale", what[k], k != 1 && k != 5 && k != 2);
        ok &= t[k]->kind == GT_VALUE;
    }
    if (ok && t[2]->elem != IR_I1) {
        ERR(f, args[2]->loc, "the found_inf flag of update_scale must be a bool (found_inf(...)), not %s", gt_str(f->a, t[2]));
        ok = false;
    }
    if (!ok) return &poison;
    GType *tup = arena_alloc(f->a, sizeof *tup);
    const GType **el = arena_alloc(f->a, 2 * sizeof *el);
    el[0] = gt_scalar(f->a, t[0]->lit ? IR_F32 : t[0]->elem);
    el[1] = gt_scalar(f->a, t[1]->lit ? IR_I32 : t[1]->elem);
    *tup = (GType){.kind = GT_TUPLE, .elems = el, .nelems = 2};
    return tup;
}

/* zeros(shape, T), full(shape, value, T). */
static const GType *b_fill(Frame *f, const AstExpr *call, const AstExpr **args)
{
    bool full = call->name[0] == 'f';
    const AstExpr *te = args[full ? 2 : 1];
    uint32_t n;
    IrSize *d;
    bool ok = size_list(f, args[0], "shape", &n, &d);
    if (full) ok &= need_scalar(f, args[1], value_of(f, args[1]), "full", "value", true)->kind ==
                    GT_VALUE;
    IrElem e;
    if (te->kind != AST_NAME || !ir_elem_from_name(te->name, strlen(te->name), &e) || e == IR_PTR) {
        ERR(f, te->loc, "the element type of %s must be a type name like f32", call->name);
        return &poison;
    }
    return ok ? gt_value(f->a, e, 0, n, d) : &poison;
}

static const GType *b_cdiv(Frame *f, const AstExpr *call, const AstExpr **args)
{
    const GType *a = need_scalar(f, args[0], value_of(f, args[0]), "cdiv", "first argument", false);
    const GType *b = need_scalar(f, args[1], value_of(f, args[1]), "cdiv", "second argument", false);
    return elementwise(f, call->loc, "cdiv", a, b);
}

/* The element-wise functions come from ir/elementwise.def, shared with kernels. */
#define EW_PARAMS_1 {"x"}
#define EW_PARAMS_2 {"a", "b"}
#define EW_PARAMS_3 {"a", "b", "c"}
static const Builtin graph_builtins[] = {
    /* name        params                          np nreq check */
#define EW(n, ar, top, gop, kind) \
    {n, EW_PARAMS_##ar, ar, ar, kind == 'c' ? b_classify : ar == 1 && kind == 'f' ? b_math : ar == 1 ? b_abs : b_elementwise},
#include "ir/elementwise.def"
#undef EW
    {"where", {"cond", "a", "b"}, 3, 3, b_where},
    {"sum", {"t", "axis"}, 2, 2, b_reduce},
    {"max", {"t", "axis"}, 2, 2, b_reduce},
    {"min", {"t", "axis"}, 2, 2, b_reduce},
    {"mean", {"t", "axis"}, 2, 2, b_reduce},
    {"argmax", {"t", "axis"}, 2, 2, b_reduce},
    {"argmin", {"t", "axis"}, 2, 2, b_reduce},
    {"any", {"t", "axis"}, 2, 2, b_reduce},
    {"all", {"t", "axis"}, 2, 2, b_reduce},
    {"softmax", {"t", "axis"}, 2, 2, b_along},
    {"cumsum", {"t", "axis"}, 2, 2, b_along},
    {"cumprod", {"t", "axis"}, 2, 2, b_along},
    {"layer_norm", {"t", "w", "b", "eps"}, 4, 4, b_norm},
    {"rms_norm", {"t", "w", "eps"}, 3, 3, b_norm},
    {"trans", {"t", "axes"}, 2, 1, b_trans},
    {"reshape", {"t", "shape"}, 2, 2, b_reshape},
    {"broadcast", {"t", "shape"}, 2, 2, b_broadcast},
    {"concat", {"tensors", "axis"}, 2, 2, b_concat},
    {"split", {"t", "sizes", "axis"}, 3, 3, b_split},
    {"dropout", {"t", "p", "seed"}, 3, 3, b_dropout},
    {"attention", {"q", "k", "v", "causal", "scale", "window", "gqa"}, 7, 3, b_attention},
    {"conv2d", {"x", "w", "stride", "padding", "nhwc"}, 5, 2, b_conv2d},
    {"cross_entropy", {"logits", "labels", "ignore_index"}, 3, 2, b_cross_entropy},
    {"rope", {"x", "cos", "sin"}, 3, 3, b_rope},
    {"swiglu", {"gate", "up"}, 2, 2, b_swiglu},
    {"zeros", {"shape", "type"}, 2, 2, b_fill},
    {"full", {"shape", "value", "type"}, 3, 3, b_fill},
    {"cdiv", {"a", "b"}, 2, 2, b_cdiv},
    {"grad", {"y", "wrt"}, 2, 2, b_grad},
    {"found_inf", {"tensors"}, 1, 1, b_grad_stats},
    {"global_norm", {"tensors", "scale"}, 2, 1, b_grad_stats},
    {"adamw", {"params", "grads", "exp_avgs", "exp_avg_sqs", "step", "lr", "betas", "eps", "weight_decay", "grad_scale",
               "skip"}, 11, 5, b_adamw},
    {"update_scale", {"scale", "growth_tracker", "found_inf", "growth_factor", "backoff_factor", "growth_interval"}, 6, 3,
     b_update_scale},
};

/* Kernel built-ins, which work on tiles and memory, not on whole tensors. */
static const char *const kernel_only[] = {
    "program_id", "num_programs", "arange", "load", "store", "atomic_add", "atomic_max",
    "atomic_min", "atomic_xchg", "atomic_and", "atomic_or", "atomic_xor", "atomic_cas", "barrier", "dot", "rand", "randn", "multiple_of",
    "max_contiguous", "assert", "print",
};

static const Builtin *find_builtin(const char *name)
{
    for (size_t i = 0; i < sizeof graph_builtins / sizeof *graph_builtins; i++)
        if (strcmp(graph_builtins[i].name, name) == 0) return &graph_builtins[i];
    return NULL;
}

static bool is_kernel_only(const char *name)
{
    for (size_t i = 0; i < sizeof kernel_only / sizeof *kernel_only; i++)
        if (strcmp(kernel_only[i], name) == 0) return true;
    return false;
}

/* ---- the graph IR of a built-in call ------------------------------------------------ */

static uint32_t arg_as(Frame *f, const AstExpr *arg, IrElem e) { return val_as(f, arg->loc, seen(f, arg), e); }

/* A scalar argument as a float (literals f32) or an integer (literals i64). */
static uint32_t scalar_arg(Frame *f, const AstExpr *arg, bool want_float)
{
    const GType *t = seen(f, arg);
    bool keep = t && !t->lit && (want_float ? is_float(t) : is_int(t));
    return val_as(f, arg->loc, t, keep ? t->elem : want_float ? IR_F32 : IR_I64);
}

/* A tuple of the results of op, of the types of t's elements. */
static const GType *tuple_of(Frame *f, uint32_t op, const GType *t)
{
    GType *r = arena_alloc(f->a, sizeof *r);
    const GType **el = arena_alloc(f->a, (t->nelems + 1) * sizeof *el);
    for (uint32_t i = 0; i < t->nelems; i++) {
        GType *e = gt_value(f->a, t->elems[i]->elem, 0, t->elems[i]->rank, t->elems[i]->dims);
        e->vid = ir_graph_result(f->s->g, op, i) + 1;
        el[i] = e;
    }
    *r = (GType){.kind = GT_TUPLE, .elems = el, .nelems = t->nelems};
    return r;
}

static const GType *emit_split(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    const GType *x = seen(f, args[0]);
    uint32_t ax = 0, v = val(f, call->loc, x);
    axis_arg(f, args[2], "split", x, &ax);
    IrTensorType *tt = arena_alloc(f->a, (t->nelems + 1) * sizeof *tt);
    for (uint32_t i = 0; i < t->nelems; i++) tt[i] = ttype(t->elems[i]);
    if (!building(f)) return t;
    uint32_t op = ir_graph_op(f->s->g, IR_GOP_SPLIT, call->loc, &v, 1, tt, t->nelems);
    op_at(f, op)->attr.axis = ax;
    return tuple_of(f, op, t);
}

static const GType *emit_concat(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    const AstExpr *l = args[0];
    uint32_t *in = arena_alloc(f->a, (l->nargs + 1) * sizeof *in), ax = 0, op = 0;
    for (uint32_t i = 0; i < l->nargs; i++) in[i] = arg_as(f, l->args[i], t->elem);
    axis_arg(f, args[1], "concat", seen(f, l->args[0]), &ax);
    const GType *r = emit(f, IR_GOP_CONCAT, call->loc, in, l->nargs, t, &op);
    if (r->vid) op_at(f, op)->attr.axis = ax;
    return r;
}

/* The operands of a built-in of graph_ops.def's family `fam`; their count. */
static uint32_t builtin_operands(Frame *f, IrGOpKind k, const AstExpr **args, const GType *t, uint32_t *in)
{
    const GType *a0 = seen(f, args[0]);
    switch (ir_gop_family(k)) {
    case 'u':
        if (k == IR_GOP_ISNAN || k == IR_GOP_ISINF || k == IR_GOP_ISFINITE)
            return in[0] = arg_as(f, args[0], is_float(a0) && !a0->lit ? a0->elem : IR_F32), 1;
        return in[0] = arg_as(f, args[0], t->elem), 1;
    case 'b': case 't':
        for (uint32_t i = 0; i < (uint32_t)ir_gop_nin(k); i++)
            in[i] = arg_as(f, args[i], k == IR_GOP_WHERE && i == 0 ? IR_I1 : t->elem);
        return (uint32_t)ir_gop_nin(k);
    case 'r': case 'a': case 's': return in[0] = val(f, args[0]->loc, a0), 1;
    case 'n': {
        bool ln = k == IR_GOP_LAYER_NORM;
        in[0] = val(f, args[0]->loc, a0);
        in[1] = val(f, args[1]->loc, seen(f, args[1]));
        if (ln) in[2] = val(f, args[2]->loc, seen(f, args[2]));
        in[ln ? 3 : 2] = scalar_arg(f, args[ln ? 3 : 2], true);
        return ln ? 4 : 3;
    }
    case 'd':
        in[0] = val(f, args[0]->loc, a0);
        in[1] = scalar_arg(f, args[1], true);
        in[2] = scalar_arg(f, args[2], false);
        return 3;
    case 'A':
        for (int i = 0; i < 3; i++) in[i] = arg_as(f, args[i], t->elem);   /* gqa: k, v as they are */
        in[3] = args[3] ? arg_as(f, args[3], IR_I1) : const_val(f, args[0]->loc, IR_I1, 0, 0);
        in[4] = args[4] ? scalar_arg(f, args[4], true) : const_val(f, args[0]->loc, IR_F32, 1.0, 0);
        if (!f->attn.window) return 5;
        in[5] = const_val(f, args[5]->loc, IR_I64, 0, f->attn.left);
        in[6] = const_val(f, args[5]->loc, IR_I64, 0, f->attn.right);
        return 7;
    case 'C':
        for (int i = 0; i < 2; i++) in[i] = arg_as(f, args[i], t->elem);
        return 2;
    case 'P':
        for (int i = 0; i < 3; i++) in[i] = val(f, args[i]->loc, seen(f, args[i]));
        return 3;
    case 'L': {   /* ignore_index in the labels' type, -100 when not given (as PyTorch) */
        IrElem le = seen(f, args[1])->elem;
        in[0] = val(f, args[0]->loc, a0);
        in[1] = val(f, args[1]->loc, seen(f, args[1]));
        in[2] = args[2] ? arg_as(f, args[2], le) : const_val(f, args[1]->loc, le, 0, -100);
        return 3;
    }
    default: return 0;
    }
}

/* Why grad failed on the graph IR, at its place (ir/graph_grad.h). */
static void grad_failed(Frame *f, const AstExpr *call, const AstExpr **args, const IrGradFail *fail)
{
    const AstExpr *y = args[0];
    const char *yn = y->kind == AST_NAME ? arena_printf(f->a, "'%s'", y->name) : "the value differentiated";
    if (fail->status == IR_GRAD_UNUSED) {
        const AstExpr *x = args[1]->args[fail->which];
        ERR(f, x->loc, "%s does not depend on '%s' (its gradient would be zero everywhere)", yn, x->name);
        return;
    }
    const IrGOp *op = &f->s->g->ops.data[fail->op];
    ERR(f, call->loc, "grad has no rule for %s yet", ir_gop_name(op->kind));
    diag_note(f->s->diags, op->loc, "the %s that %s depends on is here", ir_gop_name(op->kind), yn);
}

/* The backward of grad, appended to the graph IR here (ir/graph_grad.c). */
static const GType *emit_grad(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    const AstExpr *l = args[1];
    if (!building(f)) return t;
    uint32_t y = val(f, args[0]->loc, seen(f, args[0]));
    uint32_t *xs = arena_alloc(f->a, 2 * l->nargs * sizeof *xs), *grads = xs + l->nargs;
    for (uint32_t i = 0; i < l->nargs; i++) xs[i] = val(f, l->args[i]->loc, seen(f, l->args[i]));
    IrGradFail fail;
    if (!ir_graph_grad(f->s->g, y, xs, l->nargs, call->loc, grads, &fail)) {
        grad_failed(f, call, args, &fail);
        return &poison;
    }
    if (f->s->g->ops.len >= FE_MAX_GRAPH_OPS) no_ir(f, call->loc, "it has too many operations after grad");
    GType *r = arena_alloc(f->a, sizeof *r);
    const GType **el = arena_alloc(f->a, l->nargs * sizeof *el);
    for (uint32_t i = 0; i < l->nargs; i++) {
        GType *e = gt_value(f->a, t->elems[i]->elem, 0, t->elems[i]->rank, t->elems[i]->dims);
        e->vid = grads[i] + 1;
        el[i] = e;
    }
    *r = (GType){.kind = GT_TUPLE, .elems = el, .nelems = l->nargs};
    return r;
}

/* cross_entropy(x, labels, ignore_index) is built as each row's loss (a kernel of row
 * blocks) and the mean over the rows kept: sum(rows) / sum(labels != ignore_index), one
 * small reduction in a fixed order, so the loss is the same bits on every run. */
static const GType *emit_cross_entropy(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    uint32_t in[3], op = 0;
    builtin_operands(f, IR_GOP_CROSS_ENTROPY_ROWS, args, t, in);
    const IrTensorType *lt = &f->s->g->values.data[in[1]].type;
    const GType *rt = gt_value(f->a, t->elem, 0, 1, lt->dims), *bt = gt_value(f->a, IR_I1, 0, 1, lt->dims);
    const GType *rows = emit(f, IR_GOP_CROSS_ENTROPY_ROWS, call->loc, in, 3, rt, NULL);
    uint32_t ne[2] = {in[1], in[2]};
    const GType *kept = emit(f, IR_GOP_CMP, call->loc, ne, 2, bt, &op);
    if (!rows->vid || !kept->vid) return &poison;
    op_at(f, op)->attr.cmp = IR_GCMP_NE;
    uint32_t kv = kept->vid - 1;
    const GType *kf = emit(f, IR_GOP_CAST, call->loc, &kv, 1, rt, NULL);
    uint32_t sums[2] = {rows->vid - 1, kf->vid - 1};
    for (uint32_t i = 0; i < 2; i++) {
        const GType *r = emit(f, IR_GOP_SUM, call->loc, &sums[i], 1, t, &op);
        if (!r->vid) return &poison;
        op_at(f, op)->attr.axis = 0;
        sums[i] = r->vid - 1;
    }
    return emit(f, IR_GOP_DIV, call->loc, sums, 2, t, NULL);
}

/* ---- the optimizer step's ops ------------------------------------------------------------ */

/* An optional scalar argument as type e, or the default `d` when it is not given. */
static uint32_t opt_arg(Frame *f, Loc loc, const AstExpr *arg, IrElem e, double d)
{
    return arg ? arg_as(f, arg, e) : const_val(f, loc, e, d, (int64_t)d);
}

static const GType *emit_grad_stats(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    bool norm = call->name[0] == 'g';
    const AstExpr *l = args[0];
    uint32_t *in = arena_alloc(f->a, (l->nargs + 2) * sizeof *in), k = 0;
    if (norm) in[k++] = opt_arg(f, call->loc, args[1], t->elem, 1.0);
    for (uint32_t i = 0; i < l->nargs; i++) in[k++] = val(f, l->args[i]->loc, seen(f, l->args[i]));
    return emit(f, norm ? IR_GOP_GLOBAL_NORM : IR_GOP_FOUND_INF, call->loc, in, k, t, NULL);
}


/* The operands in ir/graph.h's order: lr beta1 beta2 eps weight_decay step grad_scale skip,
 * then the four lists; defaults as torch.optim.AdamW's. */
static const GType *emit_adamw(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    const uint32_t b = IR_ADAMW_NSCALARS, n = args[0]->nargs;
    IrElem e = t->elems[0]->elem;
    const AstExpr *bt = args[6];
    Loc loc = call->loc;
    uint32_t *in = arena_alloc(f->a, (b + 4 * n) * sizeof *in);
    in[0] = opt_arg(f, loc, args[5], e, 1e-3);
    in[1] = bt ? arg_as(f, bt->args[0], e) : const_val(f, loc, e, 0.9, 0);
    in[2] = bt ? arg_as(f, bt->args[1], e) : const_val(f, loc, e, 0.999, 0);
    in[3] = opt_arg(f, loc, args[7], e, 1e-8);
    in[4] = opt_arg(f, loc, args[8], e, 1e-2);
    in[5] = arg_as(f, args[4], e);
    in[6] = opt_arg(f, loc, args[9], e, 1.0);
    in[7] = args[10] ? arg_as(f, args[10], IR_I1) : const_val(f, loc, IR_I1, 0, 0);
    for (uint32_t k = 0; k < 4; k++)
        for (uint32_t i = 0; i < n; i++) {
            const AstExpr *x = args[k]->args[i];
            in[b + k * n + i] = k == 1 ? val(f, x->loc, seen(f, x)) : arg_as(f, x, e);
        }
    IrTensorType *tt = arena_alloc(f->a, 3 * n * sizeof *tt);
    for (uint32_t i = 0; i < 3 * n; i++) tt[i] = ttype(t->elems[i]);
    if (f->s->g->ops.len >= FE_MAX_GRAPH_OPS) {
        no_ir(f, loc, "it has too many operations");
        return t;
    }
    return tuple_of(f, ir_graph_op(f->s->g, IR_GOP_ADAMW, loc, in, b + 4 * n, tt, 3 * n), t);
}

/* A scalar op of the step's bookkeeping: its value id (0 when it could not be made). */
static uint32_t sc_op(Frame *f, Loc loc, IrGOpKind k, IrElem e, uint32_t a, uint32_t b, uint32_t c)
{
    uint32_t in[3] = {a, b, c}, op = 0;
    int nin = ir_gop_nin(k);
    const GType *r = emit(f, k, loc, in, (uint32_t)nin, gt_scalar(f->a, e), &op);
    if (!r->vid) return 0;
    if (k == IR_GOP_CMP) op_at(f, op)->attr.cmp = IR_GCMP_EQ;
    return r->vid - 1;
}

/* GradScaler.update, written out in scalar ops: on overflow the scale times the backoff
 * and the tracker 0; else the tracker counts the clean step, and at the interval the
 * scale grows (if the grown scale is finite) and the tracker is 0 again. */
static const GType *emit_update_scale(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    Loc loc = call->loc;
    IrElem E = t->elems[0]->elem, I = t->elems[1]->elem;
    uint32_t s = arg_as(f, args[0], E), tr = arg_as(f, args[1], I), inf = arg_as(f, args[2], IR_I1);
    uint32_t gf = opt_arg(f, loc, args[3], E, 2.0), bf = opt_arg(f, loc, args[4], E, 0.5);
    uint32_t gi = opt_arg(f, loc, args[5], I, 2000), one = const_val(f, loc, I, 1, 1), zero = const_val(f, loc, I, 0, 0);
    uint32_t t1 = sc_op(f, loc, IR_GOP_ADD, I, tr, one, 0), hit = sc_op(f, loc, IR_GOP_CMP, IR_I1, t1, gi, 0);
    uint32_t grown = sc_op(f, loc, IR_GOP_MUL, E, s, gf, 0), fin = sc_op(f, loc, IR_GOP_ISFINITE, IR_I1, grown, 0, 0);
    uint32_t take = sc_op(f, loc, IR_GOP_LAND, IR_I1, hit, fin, 0);
    uint32_t clean = sc_op(f, loc, IR_GOP_WHERE, E, take, grown, s), back = sc_op(f, loc, IR_GOP_MUL, E, s, bf, 0);
    uint32_t tclean = sc_op(f, loc, IR_GOP_WHERE, I, hit, zero, t1);
    uint32_t out[2] = {sc_op(f, loc, IR_GOP_WHERE, E, inf, back, clean), sc_op(f, loc, IR_GOP_WHERE, I, inf, zero, tclean)};
    GType *r = arena_alloc(f->a, sizeof *r);
    const GType **el = arena_alloc(f->a, 2 * sizeof *el);
    for (uint32_t i = 0; i < 2; i++) {
        GType *e = gt_value(f->a, i ? I : E, 0, 0, NULL);
        e->vid = out[i] + 1;
        el[i] = e;
    }
    *r = (GType){.kind = GT_TUPLE, .elems = el, .nelems = 2};
    return r;
}

/* The op of a checked built-in call whose result type is t. */
static const GType *emit_builtin(Frame *f, const AstExpr *call, const AstExpr **args, const GType *t)
{
    if (!building(f) || t->kind == GT_POISON || t->kind == GT_VOID) return t;
    const char *n = call->name;
    IrGOpKind k;
    if (!strcmp(n, "split")) return emit_split(f, call, args, t);
    if (!strcmp(n, "concat")) return emit_concat(f, call, args, t);
    if (!strcmp(n, "grad")) return emit_grad(f, call, args, t);
    if (!strcmp(n, "cross_entropy")) return emit_cross_entropy(f, call, args, t);
    if (!strcmp(n, "found_inf") || !strcmp(n, "global_norm")) return emit_grad_stats(f, call, args, t);
    if (!strcmp(n, "adamw")) return emit_adamw(f, call, args, t);
    if (!strcmp(n, "update_scale")) return emit_update_scale(f, call, args, t);
    if (!strcmp(n, "zeros") || !strcmp(n, "full")) {
        uint32_t v = n[0] == 'z' ? const_val(f, call->loc, t->elem, 0.0, 0) : arg_as(f, args[1], t->elem);
        return emit(f, IR_GOP_FULL, call->loc, &v, 1, t, NULL);
    }
    if (!ir_gop_from_name(n, &k)) {
        no_ir(f, call->loc, "of a built-in the graph IR does not have");
        return t;
    }
    uint32_t in[8], op = 0, nin = builtin_operands(f, k, args, t, in);
    const GType *r = emit(f, k, call->loc, in, nin, t, &op);
    if (!r->vid) return r;
    if (ir_gop_attr(k) == GA_AXIS) {
        uint32_t ax = 0;
        axis_arg(f, args[1], n, seen(f, args[0]), &ax);
        op_at(f, op)->attr.axis = ax;
    } else if (k == IR_GOP_TRANS) op_at(f, op)->attr.perm = f->perm;
    else if (k == IR_GOP_CONV2D) {
        IrGOp *c = op_at(f, op);
        memcpy(c->attr.conv.stride, f->conv.stride, sizeof f->conv.stride);
        memcpy(c->attr.conv.pad, f->conv.pad, sizeof f->conv.pad);
        c->attr.conv.nhwc = f->conv.nhwc;
    }
    return r;
}

static const GType *call_builtin(Frame *f, const AstExpr *call, const Builtin *b)
{
    const AstExpr *slots[11] = {0};
    if (!bind_args(f, call, b->name, b->params, b->nparams, b->nreq, slots)) return &poison;
    for (uint32_t i = 0; i < b->nreq; i++)
        if (!slots[i]) return &poison;
    return emit_builtin(f, call, slots, b->check(f, call, slots));
}

/* ---- fns: instantiation for the argument types ---------------------------------------- */

static void check_block(Frame *f, const AstStmt *s);

/* Binds the size names of a parameter's declared tensor type to the argument's sizes
 * (a name seen before must match); false if the argument does not fit. */
static bool match_param(Frame *f, const AstType *t, const GType *arg)
{
    IrElem e;
    if (!elem_of(f, t, &e)) return false;
    if (t->kind == AST_TYPE_SCALAR)
        return arg->rank == 0 && (arg->elem == e || arg->lit == 'i' || (arg->lit && ir_elem_is_float(e)));
    if (t->kind != AST_TYPE_TENSOR || arg->rank != t->ndims || arg->elem != e) return false;
    for (uint32_t i = 0; i < t->ndims; i++) {
        const AstExpr *d = t->dims[i];
        const Size *s = d && d->kind == AST_NAME ? lookup_size(f, d->name) : NULL;
        if (!d || (d->kind != AST_NAME && d->kind != AST_INT)) return false;
        if (d->kind == AST_NAME && !s) {
            vec_push(&f->sizes, ((Size){d->name, arg->dims[i]}));
            continue;
        }
        IrSize want = s ? s->dim : ir_size_const(d->ival > (uint64_t)MAX_SIZE ? -1 : (int64_t)d->ival);
        if (!ir_size_eq(want, arg->dims[i])) return false;
    }
    return true;
}

static const char *ast_type_str(Arena *a, const AstType *t)
{
    if (!t) return "?";
    if (t->kind == AST_TYPE_PTR) return arena_printf(a, "*%s", t->name);
    if (t->kind != AST_TYPE_TENSOR) return t->name ? t->name : "?";
    const char *s = arena_printf(a, "%s[", t->name);
    for (uint32_t i = 0; i < t->ndims; i++) {
        const AstExpr *d = t->dims[i];
        const char *ds = !d ? "?" : d->kind == AST_NAME ? d->name
                       : arena_printf(a, "%llu", (unsigned long long)d->ival);
        s = arena_printf(a, "%s%s%s", s, i ? ", " : "", ds);
    }
    return arena_printf(a, "%s]", s);
}

/* A declared type under the frame's sizes; poison with an error for an unknown size.
 * With `bind`, an unknown size name instead becomes a new symbolic size (parameters). */
static const GType *resolve_type(Frame *f, const AstType *t, bool bind_new)
{
    if (!t) return &poison;
    if (t->kind == AST_TYPE_TUPLE) {
        GType *tup = arena_alloc(f->a, sizeof *tup);
        const GType **el = arena_alloc(f->a, (t->nelems + 1) * sizeof *el);
        for (uint32_t i = 0; i < t->nelems; i++)
            if ((el[i] = resolve_type(f, t->elems[i], bind_new))->kind != GT_VALUE) return &poison;
        *tup = (GType){.kind = GT_TUPLE, .elems = el, .nelems = t->nelems};
        return tup;
    }
    IrElem e;
    if (!elem_of(f, t, &e)) return &poison;
    IrSize *d = arena_alloc(f->a, (t->ndims + 1) * sizeof *d);
    for (uint32_t i = 0; i < t->ndims; i++) {
        const AstExpr *x = t->dims[i];
        if (x && x->kind == AST_NAME && bind_new && !lookup_size(f, x->name))
            vec_push(&f->sizes, ((Size){x->name, ir_size_name(f->a, x->name)}));
        if (!size_expr(f, x, &d[i])) return &poison;
        if (d[i].n == 0 && d[i].c < 1) {
            ERR(f, x->loc, "a size must be positive, not %lld", (long long)d[i].c);
            return &poison;
        }
    }
    return gt_value(f->a, e, 0, t->kind == AST_TYPE_TENSOR ? t->ndims : 0, d);
}

/* "(bf16[T, 4096], f32)": the memo key and the note of an instance. */
static const char *args_key(Arena *a, const GType **argt, uint32_t n)
{
    const char *s = "(";
    for (uint32_t i = 0; i < n; i++)
        s = arena_printf(a, "%s%s%s%s", s, i ? ", " : "", argt[i]->lit ? "literal " : "",
                         gt_str(a, argt[i]));
    return arena_printf(a, "%s)", s);
}

static void frame_free(Frame *f)
{
    vec_free(&f->vars);
    vec_free(&f->sizes);
    vec_free(&f->seen);
}

/* Binds the parameters of fn in callee to the argument types; false with an error. */
static bool bind_fn_params(Frame *callee, const AstExpr *call, const GType **argt)
{
    const AstItem *fn = callee->item;
    for (uint32_t i = 0; i < fn->nparams; i++) {
        const AstParam *p = &fn->params[i];
        if (p->type && !match_param(callee, p->type, argt[i])) {
            ERR(callee, call->loc, "argument '%s' of fn '%s' must be %s, not %s",
                p->name ? p->name : "?", fn->name,
                ast_type_str(callee->a, p->type), gt_str(callee->a, argt[i]));
            return false;
        }
        const GType *t = argt[i];
        if (p->type) t = as_value(callee, call->loc, argt[i], resolve_type(callee, p->type, false));
        bind(callee, p->name, t, false);
    }
    return true;
}

/* Checks fn's body for these argument types; its return type, or poison. The value it
 * returns (for the builder) goes to *value. */
static bool has_attr(const AstItem *it, const char *name)
{
    for (uint32_t i = 0; i < it->nattrs; i++)
        if (!strcmp(it->attrs[i].name, name)) return true;
    return false;
}

/* The ops of a call of a @checkpoint fn, forward ops all, form a checkpoint region (the
 * outermost call's, when such calls nest). */
static void mark_region(Frame *f, const AstItem *fn, uint32_t first)
{
    if (!building(f) || !has_attr(fn, "checkpoint") || f->s->g->ops.len == first) return;
    uint32_t r = ++f->s->g->nregions;
    for (uint32_t o = first; o < f->s->g->ops.len; o++) f->s->g->ops.data[o].region = r;
}

static const GType *instantiate(Frame *f, const AstExpr *call, const AstItem *fn,
                                const GType **argt, const GType **value)
{
    uint32_t first = building(f) ? (uint32_t)f->s->g->ops.len : 0;
    Frame callee = {.s = f->s, .a = f->a, .item = fn, .what = item_what(f->a, fn)};
    const GType *ret = &poison;
    if (bind_fn_params(&callee, call, argt)) {
        callee.ret_decl = fn->ret ? resolve_type(&callee, fn->ret, false) : NULL;
        check_block(&callee, fn->body);
        ret = callee.ret_decl ? callee.ret_decl : callee.ret_seen ? callee.ret_seen : &void_type;
    }
    *value = callee.ret_val ? callee.ret_val : ret;
    mark_region(f, fn, first);
    if (building(f) && ret->kind != GT_VOID && ret->kind != GT_POISON && !callee.ret_val)
        no_ir(f, call->loc, "a fn it calls returns no value on some path");
    frame_free(&callee);
    return ret;
}

static Memo *find_memo(Shared *s, const AstItem *fn, const char *key)
{
    for (size_t i = 0; i < s->memo.len; i++)
        if (s->memo.data[i].fn == fn && strcmp(s->memo.data[i].key, key) == 0) return &s->memo.data[i];
    return NULL;
}

/* The types of a call's arguments in fn's parameter order (defaults filled in). */
static const GType **fn_arg_types(Frame *f, const AstExpr *call, const AstItem *fn)
{
    const AstExpr **slots = arena_alloc(f->a, (fn->nparams + 1) * sizeof *slots);
    const char **names = arena_alloc(f->a, (fn->nparams + 1) * sizeof *names);
    const GType **argt = arena_alloc(f->a, (fn->nparams + 1) * sizeof *argt);
    uint32_t nreq = 0;
    for (uint32_t i = 0; i < fn->nparams; i++) {
        names[i] = fn->params[i].name ? fn->params[i].name : "?";
        if (!fn->params[i].default_value) nreq = i + 1;
    }
    const char *what = arena_printf(f->a, "fn '%s'", fn->name);
    if (!bind_args(f, call, what, names, fn->nparams, nreq, slots)) return NULL;
    for (uint32_t i = 0; i < fn->nparams; i++) {
        argt[i] = value_of(f, slots[i] ? slots[i] : fn->params[i].default_value);
        if (argt[i]->kind != GT_VALUE) return NULL;
    }
    return argt;
}

/* Instantiates fn once per argument types; a repeated call reuses the result. */
static const GType *call_fn(Frame *f, const AstExpr *call, const AstItem *fn)
{
    const GType **argt = fn_arg_types(f, call, fn);
    if (!argt) return &poison;
    const char *key = args_key(f->a, argt, fn->nparams);
    const Memo *m = find_memo(f->s, fn, key);
    if (m && !m->ret)
        ERR(f, call->loc, "fn '%s' calls itself; fns are inlined, so they cannot be recursive", fn->name);
    if (m && (!m->ret || m->ret->kind == GT_POISON || !building(f))) return m->ret ? m->ret : &poison;
    const GType *value;
    if (m) {   /* checked before with these types: inline it again for the graph IR */
        f->s->depth++;
        instantiate(f, call, fn, argt, &value);
        f->s->depth--;
        return value;
    }
    if (f->s->depth >= FE_MAX_INSTANTIATION_DEPTH) {
        ERR(f, call->loc, "instantiation depth exceeds %d: fn '%s' is called by a chain of %d fns being inlined",
            FE_MAX_INSTANTIATION_DEPTH, fn->name, f->s->depth);
        return &poison;
    }
    size_t idx = f->s->memo.len, nerr = f->s->diags->nerrors;
    vec_push(&f->s->memo, ((Memo){fn, key, NULL}));
    f->s->depth++;
    const GType *ret = instantiate(f, call, fn, argt, &value);
    f->s->depth--;
    if (f->s->diags->nerrors > nerr) {
        diag_note(f->s->diags, call->loc, "in fn '%s' called here with %s", fn->name, key);
        ret = &poison;
    }
    f->s->memo.data[idx].ret = ret;
    return ret->kind == GT_POISON ? ret : value;
}

static const GType *check_call(Frame *f, const AstExpr *e)
{
    const Builtin *b = find_builtin(e->name);
    if (b) return call_builtin(f, e, b);
    if (is_kernel_only(e->name)) {
        ERR(f, e->loc, "%s is not available in a graph (graphs work on whole tensors; use a kernel)",
            e->name);
        return &poison;
    }
    const AstItem *it = find_item(f->s->p, e->name);
    if (!it) {
        ERR(f, e->loc, "unknown function '%s'", e->name);
        return &poison;
    }
    if (it->kind != AST_FN) {
        ERR(f, e->loc, "%s cannot be called from a graph; only fns can", item_what(f->a, it));
        return &poison;
    }
    return call_fn(f, e, it);
}

static const GType *check_expr(Frame *f, const AstExpr *e)
{
    if (!e) return &poison;
    switch (e->kind) {
    case AST_INT: return check_int(f, e);
    case AST_FLOAT: return check_float(f, e);
    case AST_BOOL: {
        GType *t = gt_value(f->a, IR_I1, 0, 0, NULL);
        if (building(f)) t->vid = const_val(f, e->loc, IR_I1, 0, e->ival != 0) + 1;
        return t;
    }
    case AST_NAME: return e->name ? check_name(f, e) : &poison;
    case AST_UNARY: return check_unary(f, e);
    case AST_BINARY: return check_binary(f, e);
    case AST_CAST: return check_cast(f, e);
    case AST_CALL: return e->name ? check_call(f, e) : &poison;
    case AST_INDEX: return check_index(f, e);
    case AST_TUPLE: return check_tuple(f, e);
    case AST_LIST: ERR(f, e->loc, "a list is allowed only as an argument (of reshape, concat, split, ...)"); break;
    case AST_STRING: ERR(f, e->loc, "a string is not a value in a graph"); break;
    default: ERR(f, e->loc, "this is not a value"); break;
    }
    return &poison;
}

/* ---- statements ------------------------------------------------------------------------ */

/* Whether a value of type `t` may stand where `want` is declared: the same element
 * type and shape, or a literal that takes a scalar's type. */
static bool fits(const GType *t, const GType *want)
{
    if (t->kind != want->kind) return false;
    if (t->kind == GT_TUPLE) {
        if (t->nelems != want->nelems) return false;
        for (uint32_t i = 0; i < t->nelems; i++)
            if (!fits(t->elems[i], want->elems[i])) return false;
        return true;
    }
    if (t->kind != GT_VALUE || t->rank != want->rank) return false;
    for (uint32_t i = 0; i < t->rank; i++)
        if (!ir_size_eq(t->dims[i], want->dims[i])) return false;
    return t->elem == want->elem || t->lit == 'i' || (t->lit == 'f' && is_float(want));
}

static bool has_poison(const GType *t)
{
    if (t->kind == GT_TUPLE)
        for (uint32_t i = 0; i < t->nelems; i++)
            if (has_poison(t->elems[i])) return true;
    return t->kind == GT_POISON;
}

static void check_return(Frame *f, const AstStmt *s)
{
    const GType *t = s->value ? check_expr(f, s->value) : &void_type;
    bool first = !f->returned;
    f->returned = true;
    if (has_poison(t)) return;
    const char *ts = gt_str(f->a, t);
    if (first && (!f->ret_decl || (!has_poison(f->ret_decl) && fits(t, f->ret_decl))))
        f->ret_val = f->ret_decl ? coerce(f, s->loc, t, f->ret_decl) : t;
    if (f->ret_decl && !has_poison(f->ret_decl) && !fits(t, f->ret_decl))
        ERR(f, s->loc, "%s returns %s, but its declared return type is %s", f->what, ts,
            gt_str(f->a, f->ret_decl));
    else if (!f->ret_decl && f->item->kind == AST_GRAPH && t->kind != GT_VOID)
        ERR(f, s->loc, "%s returns %s but declares no return type (add -> %s)", f->what, ts, ts);
    else if (!f->ret_decl && first) f->ret_seen = t;
    else if (!f->ret_decl && f->ret_seen && !fits(t, f->ret_seen))
        ERR(f, s->loc, "%s returns %s here but %s before", f->what, ts, gt_str(f->a, f->ret_seen));
}

static void check_let(Frame *f, const AstStmt *s)
{
    const GType *t = check_expr(f, s->value);
    if (!s->destructure) {
        if (t->kind == GT_VOID) ERR(f, s->value->loc, "this call returns no value");
        bind(f, s->nnames ? s->names[0] : NULL, t->kind == GT_VOID ? &poison : t, false);
        name_value(f, s->nnames ? s->names[0] : NULL, t);
        return;
    }
    bool ok = t->kind == GT_TUPLE && t->nelems == s->nnames;
    if (!ok && t->kind != GT_POISON)
        ERR(f, s->loc, "cannot unpack %s into %u names", gt_str(f->a, t), s->nnames);
    for (uint32_t i = 0; i < s->nnames; i++) {
        bind(f, s->names[i], ok ? t->elems[i] : &poison, false);
        if (ok) name_value(f, s->names[i], t->elems[i]);
    }
}

static void check_var(Frame *f, const AstStmt *s)
{
    const GType *t = value_of(f, s->value);
    if (t->kind == GT_VALUE && t->lit)
        t = as_value(f, s->loc, t, gt_with_elem(f->a, t, t->lit == 'f' ? IR_F32 : t->elem));
    bind(f, s->nnames ? s->names[0] : NULL, t, true);
    name_value(f, s->nnames ? s->names[0] : NULL, t);
}

static void check_assign(Frame *f, const AstStmt *s)
{
    const char *name = s->nnames ? s->names[0] : NULL;
    Var *v = name ? (Var *)lookup_var(f, name) : NULL;
    const GType *t = value_of(f, s->value);
    if (!v) {
        if (name) ERR(f, s->loc, "unknown name '%s'", name);
        return;
    }
    if (!v->is_var) {
        ERR(f, s->loc, "cannot assign to '%s', which is not a var (it was bound with let)", name);
        return;
    }
    const char op[2] = {(char)s->op, 0};
    const GType *r = t;
    if (s->op) t = elementwise(f, s->loc, op, v->type, t);
    if (t->kind == GT_VALUE && v->type->kind == GT_VALUE && !fits(t, v->type))
        ERR(f, s->loc, "cannot assign a value of type %s to the var '%s' of type %s",
            gt_str(f->a, t), name, gt_str(f->a, v->type));
    else if (building(f) && t->kind == GT_VALUE && v->type->kind == GT_VALUE) {
        int aop = s->op == '+' ? AST_ADD : s->op == '-' ? AST_SUB : s->op == '*' ? AST_MUL : AST_DIV;
        if (s->op) t = emit_binary(f, s->loc, aop, v->type, r, t);
        v->type = as_value(f, s->loc, t, v->type);
    }
}

/* A scalar condition or loop bound. */
static void check_scalar(Frame *f, const AstExpr *e, const char *what)
{
    const GType *t = value_of(f, e);
    if (t->kind == GT_VALUE && (t->rank || !is_int(t)))
        ERR(f, e->loc, "%s must be an integer or bool scalar, not %s", what, gt_str(f->a, t));
}

static void check_stmt(Frame *f, const AstStmt *s);

static void check_for(Frame *f, const AstStmt *s)
{
    no_ir(f, s->loc, "it has a loop");
    for (uint32_t i = 0; i < s->nargs; i++) check_scalar(f, s->args[i], "a bound of range");
    size_t mark = f->vars.len;
    bind(f, s->nnames ? s->names[0] : NULL, gt_scalar(f->a, IR_I32), false);
    check_block(f, s->body);
    f->vars.len = mark;
}

static void check_stmt(Frame *f, const AstStmt *s)
{
    if (!s) return;
    switch (s->kind) {
    case AST_LET: check_let(f, s); break;
    case AST_VAR: check_var(f, s); break;
    case AST_ASSIGN: check_assign(f, s); break;
    case AST_FOR: check_for(f, s); break;
    case AST_WHILE:
        no_ir(f, s->loc, "it has a loop");
        check_scalar(f, s->cond, "the condition of while");
        check_block(f, s->body);
        break;
    case AST_IF:
        no_ir(f, s->loc, "it has a branch");
        check_scalar(f, s->cond, "the condition of if");
        check_block(f, s->body);
        check_block(f, s->else_body);
        break;
    case AST_RETURN: check_return(f, s); break;
    case AST_EXPR: check_expr(f, s->value); break;
    case AST_BLOCK: check_block(f, s); break;
    }
}

/* A block (or an else-if) with its own scope. */
static void check_block(Frame *f, const AstStmt *s)
{
    if (!s) return;
    if (s->kind != AST_BLOCK) {
        check_stmt(f, s);
        return;
    }
    size_t mark = f->vars.len;
    for (uint32_t i = 0; i < s->nstmts; i++) check_stmt(f, s->stmts[i]);
    f->vars.len = mark;
}

/* ---- the graph ---------------------------------------------------------------------------- */

static void bind_graph_params(Frame *f, const AstItem *g)
{
    for (uint32_t i = 0; i < g->nparams; i++) {
        const AstParam *p = &g->params[i];
        const GType *t = &poison;
        for (uint32_t k = 0; k < i; k++)
            if (p->name && g->params[k].name && strcmp(p->name, g->params[k].name) == 0)
                ERR(f, p->loc, "parameter '%s' is declared twice", p->name);
        if (p->is_const) ERR(f, p->loc, "graph parameters cannot be const; '%s' is a run-time value", p->name);
        else if (!p->type) ERR(f, p->loc, "graph parameter '%s' needs a type like bf16[T, 1024] or f32", p->name);
        else if (p->type->kind == AST_TYPE_TUPLE) ERR(f, p->type->loc, "a parameter cannot have a tuple type");
        else t = resolve_type(f, p->type, true);
        if (t->kind == GT_VALUE && building(f)) {
            GType *v = gt_value(f->a, t->elem, 0, t->rank, t->dims);
            IrTensorType tt = ttype(t);
            v->vid = ir_graph_param(f->s->g, &tt, p->name) + 1;
            t = v;
        }
        bind(f, p->name, t, false);
    }
}

/* The graph's return op: the returned values (a tuple's elements), none for no value. */
static void emit_return(Frame *f, const AstItem *graph)
{
    const GType *r = f->ret_val;
    if (!building(f)) return;
    if (f->ret_decl && !r) {
        no_ir(f, graph->name_loc, "it does not return on every path");
        return;
    }
    uint32_t n = !r || r->kind == GT_VOID ? 0 : r->kind == GT_TUPLE ? r->nelems : 1;
    uint32_t *in = arena_alloc(f->a, (n + 1) * sizeof *in);
    for (uint32_t i = 0; i < n; i++) {
        const GType *e = r->kind == GT_TUPLE ? r->elems[i] : r;
        in[i] = val(f, graph->name_loc, e);
    }
    if (building(f)) ir_graph_op(f->s->g, IR_GOP_RETURN, graph->name_loc, in, n, NULL, 0);
}

/* Drops the graph just created in m (the last one) when it could not be built. */
static void drop_graph(IrGraphModule *m, IrGraph *g)
{
    if (!g) return;
    vec_free(&g->values);
    vec_free(&g->ops);
    vec_free(&g->params);
    m->graphs.len--;
}

/* ---- @recompute(POLICY, budget = B) and @memory_budget(B) on a graph --------------------- */

/* A policy written as a name (save_all, selective, checkpoint) or a string ("save-all"). */
static bool attr_policy(Frame *f, const AstExpr *e, IrRemat *r)
{
    const char *s = e->kind == AST_NAME ? e->name : e->kind == AST_STRING ? e->sval : NULL;
    char buf[32];
    if (s && strlen(s) < sizeof buf) {
        strcpy(buf, s);
        if (buf[4] == '_' && !strncmp(buf, "save_all", 8)) buf[4] = '-';
        if (ir_remat_policy_from_name(buf, &r->policy)) return true;
    }
    ERR(f, e->loc, "the policy of @recompute must be save_all, selective or checkpoint");
    return false;
}

/* A budget: bytes (an integer, or a string with a unit: "2GiB") or a fraction of save-all's
 * saved bytes (a float in (0, 1]). */
static bool attr_budget(Frame *f, const AstExpr *e, IrRemat *r)
{
    char buf[64];
    const char *s = e->kind == AST_STRING ? e->sval : NULL;
    if (e->kind == AST_INT) snprintf(buf, sizeof buf, "%llu", (unsigned long long)e->ival), s = buf;
    if (e->kind == AST_FLOAT && e->fval > 0 && e->fval <= 1) snprintf(buf, sizeof buf, "%.17f", e->fval), s = buf;
    else if (e->kind == AST_FLOAT && e->fval > 1) snprintf(buf, sizeof buf, "%.0f", e->fval), s = buf;
    if (s && ir_remat_parse_budget(s, r)) return true;
    ERR(f, e->loc, "a memory budget is a byte count (1073741824, \"2GiB\") or a fraction of save-all's "
        "saved bytes in (0, 1] (0.5)");
    return false;
}

static void attr_recompute(Frame *f, const AstAttr *at, IrRemat *r)
{
    bool mb = !strcmp(at->name, "memory_budget");
    if (at->nargs == 0 || at->nargs > (mb ? 1u : 2u)) {
        ERR(f, at->loc, mb ? "@memory_budget takes one budget: @memory_budget(0.5)"
                           : "@recompute takes a policy and an optional budget: @recompute(selective, budget = 0.5)");
        return;
    }
    for (uint32_t i = 0; i < at->nargs; i++) {
        const char *n = at->arg_names ? at->arg_names[i] : NULL;
        bool budget = mb || (n ? !strcmp(n, "budget") : i == 1);
        if (n && strcmp(n, budget ? "budget" : "policy"))
            ERR(f, at->arg_name_locs[i], "unknown argument '%s' of @%s (policy, budget)", n, at->name);
        else if (budget) attr_budget(f, at->args[i], r);
        else attr_policy(f, at->args[i], r);
    }
}

/* @linear_cross_entropy or @linear_cross_entropy(chunk = N): the LM head fused with its
 * cross-entropy, N rows a chunk (PASS_LMCE_CHUNK without one); the chunk in *chunk. */
static void attr_lce(Frame *f, const AstAttr *at, int64_t *chunk)
{
    *chunk = 1024;   /* PASS_LMCE_CHUNK (passes/passes.h) */
    if (at->nargs > 1 || (at->nargs == 1 && at->arg_names && at->arg_names[0] && strcmp(at->arg_names[0], "chunk"))) {
        ERR(f, at->loc, "@linear_cross_entropy takes one argument, the rows of a chunk: @linear_cross_entropy(chunk = 1024)");
        return;
    }
    if (at->nargs == 1) {
        const AstExpr *e = at->args[0];
        if (e->kind != AST_INT || e->ival < 1 || e->ival > ((uint64_t)1 << 30)) {
            ERR(f, e->loc, "the chunk of @linear_cross_entropy must be an integer from 1 to 2^30 (rows)");
            return;
        }
        *chunk = (int64_t)e->ival;
    }
}

/* @attention_bwd_split(rows = N): the KV rows up to which attention's backward splits its
 * dK/dV step over the query heads (0: never); *rows = N + 1 (IrGraph.bwd_split_rows). */
static void attr_bwd_split(Frame *f, const AstAttr *at, int64_t *rows)
{
    if (at->nargs != 1 || !at->arg_names || !at->arg_names[0] || strcmp(at->arg_names[0], "rows")) {
        ERR(f, at->loc, "@attention_bwd_split takes one argument, the KV rows up to which it splits: "
                        "@attention_bwd_split(rows = 16896)");
        return;
    }
    const AstExpr *e = at->args[0];
    if (e->kind != AST_INT || e->ival > ((uint64_t)1 << 40)) {
        ERR(f, e->loc, "the rows of @attention_bwd_split must be an integer from 0 (never split) to 2^40");
        return;
    }
    *rows = (int64_t)e->ival + 1;
}

/* The graph's recomputation options from its attributes; a graph that calls @checkpoint
 * fns and names no policy checkpoints them. */
static void graph_attrs(Frame *f, const AstItem *graph)
{
    IrRemat r = {IR_REMAT_SAVE_ALL, IR_BUDGET_NONE, 0};
    bool policy = false;
    int64_t chunk = 0, split = 0;
    for (uint32_t i = 0; i < graph->nattrs; i++) {
        const AstAttr *at = &graph->attrs[i];
        if (!strcmp(at->name, "recompute") || !strcmp(at->name, "memory_budget")) {
            policy |= at->name[0] == 'r';
            attr_recompute(f, at, &r);
        } else if (!strcmp(at->name, "linear_cross_entropy")) {
            attr_lce(f, at, &chunk);
        } else if (!strcmp(at->name, "attention_bwd_split")) {
            attr_bwd_split(f, at, &split);
        } else {
            ERR(f, at->loc, "unknown attribute '@%s' of a graph (@recompute, @memory_budget, @linear_cross_entropy, "
                            "@attention_bwd_split)", at->name);
        }
    }
    if (!f->s->g) return;
    if (!policy && f->s->g->nregions) r.policy = IR_REMAT_CHECKPOINT;
    f->s->g->remat = r;
    f->s->g->lce_chunk = chunk;
    f->s->g->bwd_split_rows = split;
}

IrGraph *fe_build_graph(Arena *a, const AstProgram *p, const AstItem *graph, IrGraphModule *m,
                        DiagList *diags, FeGraphNoIr *why)
{
    size_t nerr = diags->nerrors;
    Shared s = {.a = a, .p = p, .diags = diags};
    if (m) s.g = ir_graph_create(m, graph->name ? graph->name : "?", graph->name_loc);
    Frame f = {.s = &s, .a = a, .item = graph, .what = item_what(a, graph)};
    bind_graph_params(&f, graph);
    if (s.g) ir_graph_collect_sizes(s.g, a);
    if (graph->ret) f.ret_decl = resolve_type(&f, graph->ret, false);
    check_block(&f, graph->body);
    if (f.ret_decl && !f.returned && !has_poison(f.ret_decl))
        ERR(&f, graph->name_loc, "%s never returns its result of type %s", f.what,
            gt_str(a, f.ret_decl));
    if (diags->nerrors == nerr) emit_return(&f, graph);
    graph_attrs(&f, graph);
    frame_free(&f);
    vec_free(&s.memo);
    if (why) *why = (FeGraphNoIr){s.why, s.why_loc};
    if (s.g && (diags->nerrors > nerr || s.why)) {
        drop_graph(m, s.g);
        return NULL;
    }
    return s.g;
}

/* Builds the graph IR into a module thrown away after: grad's rules (a value it does
 * not depend on, an op with no rule yet) are checked on the graph IR. */
bool fe_check_graph(Arena *a, const AstProgram *p, const AstItem *graph, DiagList *diags)
{
    size_t nerr = diags->nerrors;
    IrGraphModule *m = ir_gmodule_create(a);
    fe_build_graph(a, p, graph, m, diags, NULL);
    ir_gmodule_destroy(m);
    return diags->nerrors == nerr;
}
