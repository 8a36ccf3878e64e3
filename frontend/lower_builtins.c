/* Built-in functions (LANGUAGE.md 5): argument matching, checks, and their IR.
 *
 * One table row per built-in: its name, how many arguments it needs and takes, the
 * names of its parameters (only the optional ones may be passed by name, as in
 * `load(p, mask = m)`, except load_block's and store_block's, five arguments that read
 * better named), and the handler that checks and builds it. Compile-time
 * arguments (axes, shapes, element types, hint values) are read from the AST with
 * consteval; the rest are lowered as values. */
#include <math.h>
#include <string.h>

#include "lower_internal.h"
#include "ir/graph.h"

typedef struct Builtin Builtin;
typedef Val (*BuiltinFn)(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args);

struct Builtin {
    const char *name;
    uint8_t nreq, nmax;          /* nmax 255: variadic (print) */
    const char *params[6];
    BuiltinFn fn;
    IrOpcode op;
};

enum { MAX_SLOTS = 6, VARIADIC = 255 };

/* The result of a call that gives no value (store, assert, print). */
const Val VVOID = {.t = NULL, .v = IR_NO_VALUE - 1};

/* ---- helpers ----------------------------------------------------------------------- */
static Val build_attr(Lower *L, IrOpcode code, const IrType *t, IrValue *ops, uint32_t n, int64_t attr)
{
    IrOp *op = ir_build(&L->b, code, ops, n, &t, 1, 0);
    op->attr.i = attr;
    return lw_val(L, op->results[0]);
}

static Val int_const(Lower *L, const IrType *t, int64_t v) { return lw_val(L, ir_const_int(&L->b, t, v)); }

static Val bin(Lower *L, IrOpcode code, Val a, Val b) { return lw_build_binary(L, code, a.t, a, b); }

static const char *val_str(Lower *L, const Val *v)
{
    return v->lit ? (v->lit == LIT_FLOAT ? "a float literal" : "an integer literal") : lw_tstr(L, v->t);
}

/* A value that must be a pointer (scalar or tile). */
static Val ptr_arg(Lower *L, const Builtin *bi, const AstExpr *e)
{
    Val p = lower_expr(L, e);
    if (p.t && p.t->elem != IR_PTR) {
        lw_error(L, e->loc, "the first argument of %s must be a pointer, got %s", bi->name, val_str(L, &p));
        return VERR;
    }
    return p;
}

static bool is_bool(const Val *v) { return v->t && !v->lit && v->t->elem == IR_I1; }

/* A boolean mask or condition broadcast to the shape of `like` (NULL: any shape). */
static Val bool_arg(Lower *L, const Builtin *bi, const AstExpr *e, const char *what, const IrType *like)
{
    Val m = lower_expr(L, e);
    if (m.t && !is_bool(&m)) {
        lw_error(L, e->loc, "the %s of %s must be boolean (a comparison), got %s", what, bi->name, val_str(L, &m));
        return VERR;
    }
    if (!like) return m;
    return lw_broadcast_like(L, m, like, e->loc, arena_printf(L->arena, "the %s of %s", what, bi->name));
}

/* v (the lowered e), a value stored as `pointee`: a number, converted to it. */
static Val stored_elem(Lower *L, const Builtin *bi, const AstExpr *e, Val v, const char *what, IrElem pointee)
{
    if (!v.t) return VERR;
    if (v.t->elem == IR_PTR) {
        lw_error(L, e->loc, "the %s of %s must be a number, got %s", what, bi->name, lw_tstr(L, v.t));
        return VERR;
    }
    if (v.lit && ir_elem_is_int(pointee) && v.lit == LIT_INT) {
        IrElem el;
        Val probe = {.t = lw_scalar(L, pointee), .v = 0};
        if (!lw_join_elems(L, (Val[]){v, probe}, 2, e->loc, &el)) return VERR;
    }
    return lw_convert(L, v, pointee);
}

/* A value stored through p: converted to the pointee and broadcast to p's shape. */
static Val stored_arg(Lower *L, const Builtin *bi, const AstExpr *e, const char *what, const IrType *p)
{
    Val v = stored_elem(L, bi, e, lower_expr(L, e), what, p->pointee);
    if (!v.t) return VERR;
    return lw_broadcast_like(L, v, p, e->loc, arena_printf(L->arena, "the %s of %s", what, bi->name));
}

static bool const_arg(Lower *L, const Builtin *bi, const AstExpr *e, const char *what, int64_t *out)
{
    CeStatus s = ce_eval(L, e, out);
    if (s == CE_NONE) lw_error(L, e->loc, "the %s of %s must be known at compile time", what, bi->name);
    return s == CE_OK;
}

static bool elem_arg(Lower *L, const Builtin *bi, const AstExpr *e, IrElem *out)
{
    if (e->kind == AST_NAME && ir_elem_from_name(e->name, strlen(e->name), out)) return true;
    if (e->kind == AST_CALL && !strcmp(e->name, "dtype") && e->nargs == 1 && !(e->arg_names && e->arg_names[0]))
        return (*out = lw_dtype_of(L, e->args[0])) != IR_NUM_ELEMS;
    lw_error(L, e->loc, "the element type of %s must be a type name like f32, or dtype(x)", bi->name);
    return false;
}

/* A value that must be a tile (reductions, shape changes). */
static Val tile_arg(Lower *L, const Builtin *bi, const AstExpr *e)
{
    Val t = lower_expr(L, e);
    if (t.t && (t.lit || !t.t->rank)) {
        lw_error(L, e->loc, "%s needs a tile, got %s", bi->name, val_str(L, &t));
        return VERR;
    }
    return t;
}

/* ---- program ids, ranges, constants -------------------------------------------------- */
static Val bi_program_id(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    int64_t axis;
    if (!const_arg(L, bi, args[0], "axis", &axis)) return VERR;
    if (axis < 0 || axis > 2) {
        lw_error(L, args[0]->loc, "the axis of %s must be 0, 1 or 2", bi->name);
        return VERR;
    }
    L->b.loc = call->loc;
    return build_attr(L, bi->op, lw_scalar(L, IR_I32), NULL, 0, axis);
}

static Val bi_arange(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    int64_t lo, hi;
    if (!const_arg(L, bi, args[0], "start", &lo) || !const_arg(L, bi, args[1], "end", &hi)) return VERR;
    if (lo < INT32_MIN || hi > INT32_MAX || hi - lo < 1 || hi - lo > IR_MAX_TILE_ELEMS) {
        lw_error(L, call->loc, "arange(%lld, %lld) must cover 1 to %d values", (long long)lo, (long long)hi,
                 IR_MAX_TILE_ELEMS);
        return VERR;
    }
    int32_t n = (int32_t)(hi - lo);
    if (!lw_check_shape(L, call->loc, 1, &n)) return VERR;
    L->b.loc = call->loc;
    return build_attr(L, IR_OP_ARANGE, ir_type_tile(L->ctx, lw_scalar(L, IR_I32), 1, &n), NULL, 0, lo);
}

static Val bi_zeros(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    int rank;
    int32_t shape[IR_MAX_RANK];
    IrElem el;
    bool full = bi->nreq == 3;
    bool scalar = args[0]->kind == AST_LIST && !args[0]->nargs;   /* [] : a 0-d tile is a scalar */
    if (scalar) rank = 0;
    else if (!ce_shape(L, args[0], bi->name, &rank, shape)) return VERR;
    if (!elem_arg(L, bi, args[full ? 2 : 1], &el)) return VERR;
    const IrType *t = rank ? ir_type_tile(L->ctx, lw_scalar(L, el), rank, shape) : lw_scalar(L, el);
    L->b.loc = call->loc;
    if (!full) return ir_elem_is_float(el) ? lw_val(L, ir_const_float(&L->b, t, 0)) : lw_val(L, ir_const_int(&L->b, t, 0));
    Val v = lower_expr(L, args[1]);
    if (v.t && (v.t->rank || v.t->elem == IR_PTR)) {
        lw_error(L, args[1]->loc, "the value of full must be a number, got %s", lw_tstr(L, v.t));
        return VERR;
    }
    return lw_broadcast_to(L, lw_convert(L, v, el), rank, shape);
}

/* ---- memory -------------------------------------------------------------------------- */
static Val bi_load(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val p = ptr_arg(L, bi, args[0]), m = VERR, o = VERR;
    IrValue ops[3];
    uint32_t n = 0;
    if (!p.t) return VERR;
    ops[n++] = p.v;
    if (args[2] && !args[1]) {
        lw_error(L, args[2]->loc, "'other' of load needs a mask: it fills the masked-off lanes");
        return VERR;
    }
    if (args[1] && !(m = bool_arg(L, bi, args[1], "mask", p.t)).t) return VERR;
    if (args[1]) ops[n++] = m.v;
    if (args[2] && !(o = stored_arg(L, bi, args[2], "other value", p.t)).t) return VERR;
    if (args[2]) ops[n++] = o.v;
    L->b.loc = call->loc;
    return lw_val(L, ir_build1(&L->b, IR_OP_LOAD, lw_like(L, p.t, p.t->pointee), ops, n));
}

/* The pointer of load_block and store_block: a scalar, the tensor's start. */
static Val block_ptr_arg(Lower *L, const Builtin *bi, const AstExpr *e)
{
    Val p = ptr_arg(L, bi, e);
    if (!p.t) return VERR;
    if (p.t->rank) {
        lw_error(L, e->loc, "the pointer of %s must be a scalar (the tensor's start), got %s", bi->name,
                 lw_tstr(L, p.t));
        return VERR;
    }
    return p;
}

/* The shape, strides and offsets of a block of `rank` axes (args[1..3] of load_block and
 * store_block) into ops[1 .. 3 * rank]: lists of scalar integers, converted to i64 if any
 * is i64 (or a literal outside i32), else to i32. `per` says what a list has one entry
 * for (the error of a list of another length). */
static bool block_lists(Lower *L, const Builtin *bi, const AstExpr **args, int rank, const char *per, IrValue *ops)
{
    static const char *what[3] = {"shape", "strides", "offsets"};
    Val vs[3][IR_MAX_RANK];
    bool wide = false;
    for (int a = 0; a < 3; a++) {
        const AstExpr *e = args[1 + a];
        if (e->kind != AST_LIST || e->nargs != (uint32_t)rank) {
            lw_error(L, e->loc, "the %s of %s must be a list of %d integers, one per %s", what[a], bi->name, rank, per);
            return false;
        }
        for (int d = 0; d < rank; d++) {
            Val v = lower_expr(L, e->args[d]);
            if (!v.t) return false;
            if (v.t->rank || !ir_elem_is_int(v.t->elem) || v.t->elem == IR_I1) {
                lw_error(L, e->args[d]->loc, "the %s of %s are scalar integers, got %s", what[a], bi->name,
                         val_str(L, &v));
                return false;
            }
            wide |= v.lit ? (v.big || v.i > INT32_MAX || v.i < INT32_MIN) : ir_elem_bytes(v.t->elem) == 8;
            vs[a][d] = v;
        }
    }
    IrElem ie = wide ? IR_I64 : IR_I32;
    for (int a = 0; a < 3; a++)
        for (int d = 0; d < rank; d++) {
            Val v = lw_convert(L, vs[a][d], ie);
            ops[1 + a * rank + d] = lw_ir(L, &v);
        }
    return true;
}

/* load_block(ptr, shape, strides, offsets, block): the tile of `block` elements at
 * `offsets` of the tensor of `shape` and `strides` (in elements) at ptr, zeros outside
 * the tensor (LANGUAGE-REFERENCE.md "Block loads"). shape, strides and offsets are
 * lists of scalar integers, in i64 if any is i64, else i32; block is a shape. */
static Val bi_load_block(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val p = block_ptr_arg(L, bi, args[0]);
    if (!p.t) return VERR;
    int rank;
    int32_t block[IR_MAX_RANK];
    if (!ce_shape(L, args[4], "load_block's block", &rank, block)) return VERR;
    IrValue ops[1 + 3 * IR_MAX_RANK];
    ops[0] = p.v;
    const char *per = arena_printf(L->arena, "axis of the block %s", lw_shape_str(L, rank, block));
    if (!block_lists(L, bi, args, rank, per, ops)) return VERR;
    L->b.loc = call->loc;
    const IrType *t = ir_type_tile(L->ctx, lw_scalar(L, p.t->pointee), rank, block);
    return lw_val(L, ir_build1(&L->b, IR_OP_BLOCK_LOAD, t, ops, 1 + 3 * (uint32_t)rank));
}

/* store_block(ptr, shape, strides, offsets, value): stores the tile `value` as the block
 * at `offsets` of the tensor of `shape` and `strides` at ptr, dropping the elements
 * outside the tensor (LANGUAGE-REFERENCE.md "Block stores"). The lists are load_block's,
 * shape's length the rank, which the value must have; the value is converted to the
 * pointee as store converts it. */
static Val bi_store_block(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val p = block_ptr_arg(L, bi, args[0]);
    if (!p.t) return VERR;
    const AstExpr *sh = args[1];
    if (sh->kind != AST_LIST || sh->nargs < 1 || sh->nargs > IR_MAX_RANK) {
        lw_error(L, sh->loc, "the shape of store_block must be a list of 1 to %d integers, one per axis of the value",
                 IR_MAX_RANK);
        return VERR;
    }
    int rank = (int)sh->nargs;
    IrValue ops[2 + 3 * IR_MAX_RANK];
    ops[0] = p.v;
    if (!block_lists(L, bi, args, rank, "entry of shape", ops)) return VERR;
    Val v = lower_expr(L, args[4]);
    if (!v.t) return VERR;
    if (v.lit || v.t->rank != rank) {
        lw_error(L, args[4]->loc, "the value of store_block must be a tile of rank %d, one axis per entry of shape, got %s",
                 rank, val_str(L, &v));
        return VERR;
    }
    if (!(v = stored_elem(L, bi, args[4], v, "value", p.t->pointee)).t) return VERR;
    ops[1 + 3 * rank] = v.v;
    L->b.loc = call->loc;
    ir_build(&L->b, IR_OP_BLOCK_STORE, ops, 2 + 3 * (uint32_t)rank, NULL, 0, 0);
    return VVOID;
}

static Val bi_store(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val p = ptr_arg(L, bi, args[0]);
    if (!p.t) return VERR;
    Val v = stored_arg(L, bi, args[1], "value", p.t), m = VERR;
    if (!v.t || (args[2] && !(m = bool_arg(L, bi, args[2], "mask", p.t)).t)) return VERR;
    IrValue ops[3] = {p.v, v.v, m.v};
    L->b.loc = call->loc;
    ir_build(&L->b, IR_OP_STORE, ops, args[2] ? 3 : 2, NULL, 0, 0);
    return VVOID;
}

/* sem = relaxed | acquire | release | acq_rel (the default). */
static bool sem_arg(Lower *L, const Builtin *bi, const AstExpr *e, int64_t *out)
{
    *out = IR_SEM_ACQ_REL;
    if (!e) return true;
    for (int i = 0; e->kind == AST_NAME && i < 4; i++)
        if (!strcmp(e->name, ir_sem_names[i])) {
            *out = i;
            return true;
        }
    lw_error(L, e->loc, "the sem of %s must be relaxed, acquire, release or acq_rel", bi->name);
    return false;
}

static bool is_bitwise_atomic(IrOpcode op) { return op == IR_OP_ATOMIC_AND || op == IR_OP_ATOMIC_OR || op == IR_OP_ATOMIC_XOR; }

static Val bi_atomic(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val p = ptr_arg(L, bi, args[0]);
    int64_t sem;
    if (!p.t || !sem_arg(L, bi, args[3], &sem)) return VERR;
    if (is_bitwise_atomic(bi->op) && !ir_elem_is_int(p.t->pointee)) {
        lw_error(L, args[0]->loc, "%s needs a pointer to integers, got %s", bi->name, lw_tstr(L, p.t));
        return VERR;
    }
    bool cas = bi->op == IR_OP_ATOMIC_CAS;
    Val v = stored_arg(L, bi, args[1], cas ? "compared value" : "value", p.t), m = VERR;
    if (!v.t) return VERR;
    if (args[2]) m = cas ? stored_arg(L, bi, args[2], "value", p.t) : bool_arg(L, bi, args[2], "mask", p.t);
    if (args[2] && !m.t) return VERR;
    IrValue ops[3] = {p.v, v.v, m.v};
    L->b.loc = call->loc;
    return build_attr(L, bi->op, lw_like(L, p.t, p.t->pointee), ops, args[2] ? 3 : 2, sem);
}

static Val bi_barrier(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    (void)bi, (void)args;
    L->b.loc = call->loc;
    ir_build(&L->b, IR_OP_BARRIER, NULL, 0, NULL, 0, 0);
    return VVOID;
}

/* ---- dot ------------------------------------------------------------------------------ */
static bool dot_shapes(Lower *L, const AstExpr *call, const IrType *a, const IrType *b)
{
    if (a->rank != 2 || b->rank != 2) {
        lw_error(L, call->loc, "dot needs 2-D tiles, got %s x %s", lw_tstr(L, a), lw_tstr(L, b));
        return false;
    }
    const char *sa = lw_shape_str(L, 2, a->shape), *sb = lw_shape_str(L, 2, b->shape);
    if (a->shape[1] != b->shape[0]) {
        lw_error(L, call->loc, "dot needs [M, K] x [K, N], got %s x %s", sa, sb);
        return false;
    }
    if (a->elem != b->elem) {
        lw_error(L, call->loc, "dot needs a and b of one element type, got %s and %s", ir_elem_name(a->elem),
                 ir_elem_name(b->elem));
        return false;
    }
    if (!ir_elem_is_float(a->elem) && a->elem != IR_I8 && a->elem != IR_U8) {
        lw_error(L, call->loc, "dot takes float, i8 or u8 tiles, got %s", ir_elem_name(a->elem));
        return false;
    }
    return true;
}

/* precision = tf32 | tf32x3 | ieee; tf32x3 is no IrPrecision: lowered as three tf32
 * dots (*x3 set, *out tf32). */
static bool dot_precision(Lower *L, const AstExpr *e, IrElem in, int64_t *out, bool *x3)
{
    *out = IR_PREC_DEFAULT;
    *x3 = false;
    if (!e) return true;
    bool known = e->kind == AST_NAME && (!strcmp(e->name, "tf32") || !strcmp(e->name, "ieee") ||
                                         !strcmp(e->name, "tf32x3"));
    if (!known) {
        lw_error(L, e->loc, "the precision of dot must be tf32, tf32x3 or ieee");
        return false;
    }
    if (in != IR_F32) {
        lw_error(L, e->loc, "the precision of dot applies only to f32 inputs, got %s", ir_elem_name(in));
        return false;
    }
    *x3 = !strcmp(e->name, "tf32x3");
    *out = strcmp(e->name, "ieee") ? IR_PREC_TF32 : IR_PREC_IEEE;
    return true;
}

/* out_dtype: the accumulator's type, the default one (f32; f64 for f64, i32 for
 * integers) or f16 for f16 and f8 inputs (issue 13). */
static bool dot_out_dtype(Lower *L, const Builtin *bi, const AstExpr *e, IrElem in, IrElem def, IrElem *out)
{
    *out = def;
    if (!e) return true;
    if (!elem_arg(L, bi, e, out)) return false;
    bool f16_ok = in == IR_F16 || in == IR_F8E4M3 || in == IR_F8E5M2;
    if (*out == def || (*out == IR_F16 && f16_ok)) return true;
    lw_error(L, e->loc, "the out_dtype of dot with %s inputs must be %s%s, got %s", ir_elem_name(in), ir_elem_name(def),
             f16_ok ? " or f16" : "", ir_elem_name(*out));
    return false;
}

/* max_num_imprecise_acc: a constant >= 0, for f8 inputs only. Checked, not used yet:
 * f8 dots on wgmma sum in the tensor core's accumulator across the K loop (Triton's
 * default on Hopper), on mma.sync and in the interpreter every product in full f32
 * (LANGUAGE-REFERENCE.md). */
static bool dot_imprecise(Lower *L, const Builtin *bi, const AstExpr *e, IrElem in)
{
    int64_t n;
    if (!e) return true;
    if (!const_arg(L, bi, e, "max_num_imprecise_acc", &n)) return false;
    if (in != IR_F8E4M3 && in != IR_F8E5M2) {
        lw_error(L, e->loc, "max_num_imprecise_acc of dot applies only to f8 inputs, got %s", ir_elem_name(in));
        return false;
    }
    if (n < 0) {
        lw_error(L, e->loc, "max_num_imprecise_acc of dot must be 0 or more, got %lld", (long long)n);
        return false;
    }
    return true;
}

static Val dot_op(Lower *L, Val a, Val b, Val acc, int64_t prec)
{
    IrValue ops[3] = {a.v, b.v, acc.v};
    return build_attr(L, IR_OP_DOT, acc.t, ops, 3, prec);
}

/* The halves of an f32 for tf32x3: hi keeps the sign, exponent and 10 mantissa bits
 * (exactly a tf32), lo = x - hi (exact). For inf and NaN the big term's operand is x
 * itself and the small terms' operands 0, so that they add no NaN (inf - inf, inf * 0). */
static void split_tf32(Lower *L, Val x, Val *big, Val *hi, Val *lo)
{
    const IrType *u = lw_like(L, x.t, IR_U32), *bt = lw_like(L, x.t, IR_I1);
    IrValue ops[3];
    Val bits = lw_val(L, ir_build1(&L->b, IR_OP_BITCAST, u, &x.v, 1));
    bits = bin(L, IR_OP_AND, bits, int_const(L, u, 0xffffe000));
    Val h = lw_val(L, ir_build1(&L->b, IR_OP_BITCAST, x.t, &bits.v, 1));
    ops[0] = ir_build1(&L->b, IR_OP_ABS, x.t, &x.v, 1);
    ops[1] = ir_const_float(&L->b, x.t, INFINITY);
    IrValue fin = build_attr(L, IR_OP_CMP, bt, ops, 2, IR_CMP_LT).v;
    IrValue zero = ir_const_float(&L->b, x.t, 0);
    IrValue sel[3][3] = {{fin, h.v, x.v}, {fin, h.v, zero}, {fin, bin(L, IR_OP_SUB, x, h).v, zero}};
    Val *out[3] = {big, hi, lo};
    for (int i = 0; i < 3; i++) *out[i] = lw_val(L, ir_build1(&L->b, IR_OP_SELECT, x.t, sel[i], 3));
}

/* tf32x3: a*b ~ a_hi*b_hi + a_hi*b_lo + a_lo*b_hi, three tf32 dots (the small terms
 * first), near f32 accuracy on tensor cores. */
static Val dot_tf32x3(Lower *L, Val a, Val b, Val acc)
{
    Val ab, ah, al, bb, bh, blo;
    split_tf32(L, a, &ab, &ah, &al);
    split_tf32(L, b, &bb, &bh, &blo);
    acc = dot_op(L, al, bh, acc, IR_PREC_TF32);
    acc = dot_op(L, ah, blo, acc, IR_PREC_TF32);
    return dot_op(L, ab, bb, acc, IR_PREC_TF32);
}

static Val bi_dot(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val a = tile_arg(L, bi, args[0]), b = tile_arg(L, bi, args[1]), acc;
    int64_t prec;
    bool x3;
    IrElem ae;
    if (!a.t || !b.t || !dot_shapes(L, call, a.t, b.t)) return VERR;
    if (!dot_precision(L, args[3], a.t->elem, &prec, &x3)) return VERR;
    IrElem def = a.t->elem == IR_F64 ? IR_F64 : ir_elem_is_float(a.t->elem) ? IR_F32 : IR_I32;
    if (!dot_out_dtype(L, bi, args[4], a.t->elem, def, &ae) || !dot_imprecise(L, bi, args[5], a.t->elem)) return VERR;
    int32_t shape[2] = {a.t->shape[0], b.t->shape[1]};
    const IrType *at = ir_type_tile(L->ctx, lw_scalar(L, ae), 2, shape);
    L->b.loc = call->loc;
    if (!args[2]) acc = ae == IR_I32 ? lw_val(L, ir_const_int(&L->b, at, 0)) : lw_val(L, ir_const_float(&L->b, at, 0));
    else if ((acc = lower_expr(L, args[2])).t && acc.t != at) {
        lw_error(L, args[2]->loc, "the accumulator of dot must be %s, got %s", lw_tstr(L, at), val_str(L, &acc));
        return VERR;
    }
    if (!acc.t) return VERR;
    L->b.loc = call->loc;
    if (x3) return dot_tf32x3(L, a, b, acc);
    if (ae == def) return dot_op(L, a, b, acc, prec);
    /* out_dtype = f16: summed in f32 (acc converted exactly), rounded once to f16 */
    Val d = dot_op(L, a, b, lw_convert(L, acc, def), prec);
    return lw_convert(L, d, ae);
}

/* ---- reductions and scans ---------------------------------------------------------------- */
/* Every reduction takes (t, axis?, options...): no axis (or None) reduces all axes
 * (t flattened row-major, so argmax gives the flat index), a negative axis counts
 * from the end, keep_dims keeps the reduced axes with size 1. Options become plain
 * IR: dtype a convert before, propagate_nan = false selects around the NaNs,
 * return_indices a second reduction (argmax beside max); only xor_sum, reduce and
 * scan are ops of their own. */
static bool small_int(IrElem e) { return ir_elem_is_int(e) && ir_elem_bits(e) < 32; }

enum { ALL_AXES = -1 };

/* The parameter slot named `name` of bi (an option), NULL if absent. */
static const AstExpr *opt_slot(const Builtin *bi, const AstExpr **args, const char *name)
{
    for (int j = 0; j < MAX_SLOTS && bi->params[j]; j++)
        if (!strcmp(bi->params[j], name)) return args[j];
    return NULL;
}

static bool flag_opt(Lower *L, const Builtin *bi, const AstExpr **args, const char *name, bool *out)
{
    const AstExpr *e = opt_slot(bi, args, name);
    int64_t v = 0;
    *out = false;
    if (!e) return true;
    CeStatus s = ce_eval(L, e, &v);
    if (s == CE_OK && (v == 0 || v == 1)) return *out = v, true;
    if (s != CE_ERROR) lw_error(L, e->loc, "the %s of %s must be true or false", name, bi->name);
    return false;
}

/* One axis, compile-time and in range; a negative axis counts from the end. */
static bool one_axis(Lower *L, const Builtin *bi, const AstExpr *e, int rank, int64_t *axis)
{
    if (!const_arg(L, bi, e, "axis", axis)) return false;
    if (*axis >= -rank && *axis < rank) {
        if (*axis < 0) *axis += rank;
        return true;
    }
    lw_error(L, e->loc, "axis %lld of %s is out of range for a tile of rank %d", (long long)*axis, bi->name, rank);
    return false;
}

/* axis = [a, b, ...]: each axis once; one axis is that axis, every axis of the tile is
 * all of them (as None; not for scans); other subsets are not supported. */
static bool axis_list(Lower *L, const Builtin *bi, const AstExpr *e, int rank, bool none_ok, int64_t *axis)
{
    bool seen[IR_MAX_RANK] = {false};
    for (uint32_t i = 0; i < e->nargs; i++) {
        if (!one_axis(L, bi, e->args[i], rank, axis)) return false;
        if (seen[*axis]) {
            lw_error(L, e->loc, "axis %lld appears twice in the axes of %s", (long long)*axis, bi->name);
            return false;
        }
        seen[*axis] = true;
    }
    if (e->nargs == 1) return true;
    if (none_ok && e->nargs == (uint32_t)rank) return *axis = ALL_AXES, true;
    if (none_ok) lw_error(L, e->loc, "%s takes one axis or all of them; reduce the axes one at a time", bi->name);
    else lw_error(L, e->loc, "%s takes one axis, not a list of %u", bi->name, e->nargs);
    return false;
}

/* axis: absent or None is ALL_AXES; a negative axis counts from the end. */
static bool red_axis(Lower *L, const Builtin *bi, const AstExpr *e, int rank, bool none_ok, int64_t *axis)
{
    if ((!e || e->kind == AST_NONE) && none_ok) return *axis = ALL_AXES, true;
    if (!e || e->kind == AST_NONE) {
        lw_error(L, e ? e->loc : (Loc){0}, "%s needs an axis", bi->name);
        return false;
    }
    if (e->kind == AST_LIST && !e->nargs) {
        lw_error(L, e->loc, "the axes of %s are an empty list; %s", bi->name,
                 none_ok ? "leave the axis out (or write None) to reduce every axis" : "give one axis");
        return false;
    }
    if (e->kind == AST_LIST) return axis_list(L, bi, e, rank, none_ok, axis);
    return one_axis(L, bi, e, rank, axis);
}

/* A tile of numbers for reduction `bi` (pointer tiles are errors). */
static Val red_tile(Lower *L, const Builtin *bi, const AstExpr *e)
{
    Val t = tile_arg(L, bi, e);
    if (t.t && t.t->elem == IR_PTR) {
        lw_error(L, e->loc, "%s needs a tile of numbers, got the pointer tile %s", bi->name, val_str(L, &t));
        return VERR;
    }
    return t;
}

/* How a reduction was asked for: the axis it removes from the (maybe flattened)
 * operand, and the original shape for keep_dims. */
typedef struct RedShape {
    int64_t axis;
    bool all, keep;
    int rank;
    int32_t shape[IR_MAX_RANK];
} RedShape;

static Val flatten(Lower *L, Val t)
{
    if (t.t->rank == 1) return t;
    int32_t n = (int32_t)ir_type_numel(t.t);
    return lw_val(L, ir_build1(&L->b, IR_OP_RESHAPE, ir_type_tile(L->ctx, lw_scalar(L, t.t->elem), 1, &n), &t.v, 1));
}

/* The operand as the reduction sees it: flattened when all axes are reduced. */
static Val red_operand(Lower *L, Val t, RedShape *rs, int64_t axis, bool keep)
{
    *rs = (RedShape){.axis = axis == ALL_AXES ? 0 : axis, .all = axis == ALL_AXES, .keep = keep, .rank = t.t->rank};
    memcpy(rs->shape, t.t->shape, sizeof rs->shape);
    return rs->all ? flatten(L, t) : t;
}

static Val build_red(Lower *L, IrOpcode code, Val t, const RedShape *rs, IrElem re)
{
    int32_t shape[IR_MAX_RANK] = {0};
    for (int i = 0, j = 0; i < t.t->rank; i++)
        if (i != rs->axis) shape[j++] = t.t->shape[i];
    return build_attr(L, code, ir_type_tile(L->ctx, lw_scalar(L, re), t.t->rank - 1, shape), &t.v, 1, rs->axis);
}

/* keep_dims: the reduced axes come back with size 1. */
static Val keep_dims(Lower *L, Val r, const RedShape *rs)
{
    if (!rs->keep || !r.t) return r;
    int32_t shape[IR_MAX_RANK];
    for (int i = 0; i < rs->rank; i++) shape[i] = rs->all || i == rs->axis ? 1 : rs->shape[i];
    const IrType *t = ir_type_tile(L->ctx, lw_scalar(L, r.t->elem), rs->rank, shape);
    if (!r.t->rank) return lw_val(L, ir_build1(&L->b, IR_OP_SPLAT, t, &r.v, 1));
    return build_attr(L, IR_OP_EXPAND_DIMS, t, &r.v, 1, rs->axis);
}

static Val const_like(Lower *L, const IrType *t, double f)
{
    return lw_val(L, ir_elem_is_float(t->elem) ? ir_const_float(&L->b, t, f) : ir_const_int(&L->b, t, (int64_t)f));
}

static Val is_nan(Lower *L, Val t)
{
    IrValue ops[2] = {t.v, t.v};
    return build_attr(L, IR_OP_CMP, lw_like(L, t.t, IR_I1), ops, 2, IR_CMP_NE);
}

static Val select3(Lower *L, Val c, Val a, Val b)
{
    IrValue ops[3] = {c.v, a.v, b.v};
    return lw_val(L, ir_build1(&L->b, IR_OP_SELECT, a.t, ops, 3));
}

/* max/min(t, axis?, propagate_nan?, keep_dims?, return_indices?) and
 * argmax/argmin(t, axis?, keep_dims?, return_value?): the value and/or the index;
 * both give (value, index) when both are asked for. Without propagate_nan (it is true
 * by default: LANGUAGE.md's max propagates NaN) NaNs are skipped: the extreme of the
 * other elements, NaN only where all are NaN. */
static int minmax_results(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args, Val *out)
{
    Val t = red_tile(L, bi, args[0]);
    int64_t axis;
    bool keep, both, prop = true, arg = bi->op == IR_OP_ARGMAX || bi->op == IR_OP_ARGMIN;
    bool mx = bi->op == IR_OP_MAX || bi->op == IR_OP_ARGMAX;
    if (!t.t || !red_axis(L, bi, args[1], t.t->rank, true, &axis) || !flag_opt(L, bi, args, "keep_dims", &keep) ||
        !flag_opt(L, bi, args, arg ? "return_value" : "return_indices", &both))
        return -1;
    if (!arg && opt_slot(bi, args, "propagate_nan") && !flag_opt(L, bi, args, "propagate_nan", &prop)) return -1;
    L->b.loc = call->loc;
    RedShape rs;
    Val x = red_operand(L, t, &rs, axis, keep), allnan = VERR;
    if (!prop && ir_elem_is_float(x.t->elem)) {
        Val nan = is_nan(L, x);
        allnan = build_red(L, IR_OP_MIN, nan, &rs, IR_I1);
        x = select3(L, nan, const_like(L, x.t, mx ? -INFINITY : INFINITY), x);
    }
    int n = 0;
    if (!arg || both) {
        Val v = build_red(L, mx ? IR_OP_MAX : IR_OP_MIN, x, &rs, x.t->elem);
        if (allnan.t) v = select3(L, allnan, const_like(L, v.t, NAN), v);
        out[n++] = keep_dims(L, v, &rs);
    }
    if (arg || both) out[n++] = keep_dims(L, build_red(L, mx ? IR_OP_ARGMAX : IR_OP_ARGMIN, x, &rs, IR_I32), &rs);
    return n;
}

/* sum(t, axis?, keep_dims?, dtype?), xor_sum(t, axis?, keep_dims?) */
static int sum_results(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args, Val *out)
{
    Val t = red_tile(L, bi, args[0]);
    int64_t axis;
    bool keep;
    IrElem de = IR_NUM_ELEMS;
    const AstExpr *d = opt_slot(bi, args, "dtype");
    if (!t.t || !red_axis(L, bi, args[1], t.t->rank, true, &axis) || !flag_opt(L, bi, args, "keep_dims", &keep) ||
        (d && !elem_arg(L, bi, d, &de)))
        return -1;
    if (bi->op == IR_OP_XOR_SUM && !ir_elem_is_int(t.t->elem)) {
        lw_error(L, args[0]->loc, "xor_sum needs a tile of integers, got %s", val_str(L, &t));
        return -1;
    }
    L->b.loc = call->loc;
    if (de != IR_NUM_ELEMS) t = lw_convert(L, t, de);
    else if (bi->op == IR_OP_SUM && small_int(t.t->elem)) t = lw_convert(L, t, IR_I32);
    RedShape rs;
    Val x = red_operand(L, t, &rs, axis, keep);
    out[0] = keep_dims(L, build_red(L, bi->op, x, &rs, x.t->elem), &rs);
    return 1;
}

/* cumsum/cumprod(t, axis, reverse?, dtype?) */
static Val bi_scan(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val t = red_tile(L, bi, args[0]);
    int64_t axis;
    bool rev;
    IrElem de = IR_NUM_ELEMS;
    const AstExpr *d = opt_slot(bi, args, "dtype");
    if (!t.t || !red_axis(L, bi, args[1], t.t->rank, false, &axis) || !flag_opt(L, bi, args, "reverse", &rev) ||
        (d && !elem_arg(L, bi, d, &de)))
        return VERR;
    L->b.loc = call->loc;
    if (de != IR_NUM_ELEMS) t = lw_convert(L, t, de);
    else if (small_int(t.t->elem)) t = lw_convert(L, t, IR_I32);
    return build_attr(L, bi->op, t.t, &t.v, 1, axis | (rev ? IR_SCAN_REVERSE : 0));
}

/* ---- reduce and associative_scan with a combine fn ------------------------------------------ */
enum { MAX_TILES = 8 };

/* The tiles: one tile or a tuple of tiles of one shape. */
static int combine_tiles(Lower *L, const Builtin *bi, const AstExpr *e, Val *ts)
{
    uint32_t n = e->kind == AST_TUPLE ? e->nargs : 1;
    if (n > MAX_TILES) {
        lw_error(L, e->loc, "%s takes at most %d tiles, got %u", bi->name, MAX_TILES, n);
        return -1;
    }
    bool ok = true;
    for (uint32_t i = 0; i < n; i++) ok &= (ts[i] = red_tile(L, bi, e->kind == AST_TUPLE ? e->args[i] : e)).t != NULL;
    for (uint32_t i = 1; ok && i < n; i++)
        if (ts[i].t->rank != ts[0].t->rank || memcmp(ts[i].t->shape, ts[0].t->shape, sizeof ts[0].t->shape)) {
            lw_error(L, e->args[i]->loc, "the tiles of %s must have one shape, got %s and %s", bi->name,
                     lw_shape_str(L, ts[0].t->rank, ts[0].t->shape), lw_shape_str(L, ts[i].t->rank, ts[i].t->shape));
            ok = false;
        }
    return ok ? (int)n : -1;
}

static const AstItem *combine_fn(Lower *L, const Builtin *bi, const AstExpr *e, int n)
{
    const AstItem *fn = e->kind == AST_NAME ? lw_find_item(L, e->name) : NULL;
    if (!fn || fn->kind != AST_FN) {
        lw_error(L, e->loc, "the combine of %s must name a fn, as in %s(t, 0, f) with fn f(a, b) { ... }", bi->name, bi->name);
        return NULL;
    }
    if (fn->nparams != 2 * (uint32_t)n) {
        lw_error(L, e->loc, "the combine fn '%s' of %s takes %u parameter%s; over %d tile%s it needs %d (a%s, then b%s)",
                 fn->name, bi->name, fn->nparams, fn->nparams == 1 ? "" : "s", n, n == 1 ? "" : "s", 2 * n,
                 n == 1 ? "" : "0..", n == 1 ? "" : "0..");
        return NULL;
    }
    return fn;
}

/* The first op in blk (or its regions) with an effect, NULL if none. */
static const IrOp *effect_in(const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (!(ir_op_info[op->code].flags & IR_P) && op->code != IR_OP_IF && op->code != IR_OP_YIELD) return op;
        for (uint32_t r = 0; r < op->nregions; r++) {
            const IrOp *e = effect_in(&op->regions[r]);
            if (e) return e;
        }
    }
    return NULL;
}

/* The combine's results: n scalars of the tiles' element types, yielded. */
static bool combine_yield(Lower *L, const AstItem *fn, const Builtin *bi, IrOp *op, Val *res, int got, const Val *ts,
                          int n, Loc loc)
{
    if (got < 0) return false;
    if (got != n) {
        lw_error(L, loc, "the combine fn '%s' of %s returns %d value%s; it must return %d (one per tile)", fn->name,
                 bi->name, got, got == 1 ? "" : "s", n);
        return false;
    }
    IrValue ys[MAX_TILES];
    for (int i = 0; i < n; i++) {
        IrElem e = ts[i].t->elem;
        if (res[i].lit == LIT_FLOAT && !ir_elem_is_float(e)) {
            lw_error(L, loc, "result %d of the combine fn '%s' of %s must be a scalar %s (the tile's element type), got a "
                     "float literal", i + 1, fn->name, bi->name, ir_elem_name(e));
            return false;
        }
        if (res[i].lit) res[i] = lw_convert(L, res[i], e);
        if (res[i].t->rank || res[i].t->elem != e) {
            lw_error(L, loc, "result %d of the combine fn '%s' of %s must be a scalar %s (the tile's element type), got %s",
                     i + 1, fn->name, bi->name, ir_elem_name(e), lw_tstr(L, res[i].t));
            return false;
        }
        ys[i] = res[i].v;
    }
    ir_build(&L->b, IR_OP_YIELD, ys, (uint32_t)n, NULL, 0, 0);
    const IrOp *eff = effect_in(&op->regions[0]);
    if (!eff) return true;
    lw_error(L, eff->loc, "the combine fn '%s' of %s must be pure: '%s' is not allowed in it", fn->name, bi->name,
             ir_op_info[eff->code].text);
    return false;
}

/* reduce(t, axis, combine, keep_dims?) and associative_scan(t, axis, combine,
 * reverse?): t one tile or a tuple of tiles of one shape; combine a fn of 2n scalars
 * (a0..an-1, b0..bn-1) giving n, assumed associative. The op's region is the fn
 * inlined once on scalars; interpreter and GPU call it per pair. */
static int combine_results(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args, Val *out)
{
    Val ts[MAX_TILES], argv[2 * MAX_TILES], res[8];
    bool scan = bi->op == IR_OP_SCAN, flag;
    int64_t axis;
    int n = combine_tiles(L, bi, args[0], ts);
    if (n < 0 || !red_axis(L, bi, args[1], ts[0].t->rank, !scan, &axis)) return -1;
    const AstItem *fn = combine_fn(L, bi, args[2], n);
    if (!fn || !flag_opt(L, bi, args, scan ? "reverse" : "keep_dims", &flag)) return -1;
    L->b.loc = call->loc;
    RedShape rs = {0};
    IrValue ops[MAX_TILES];
    const IrType *rt[MAX_TILES];
    for (int i = 0; i < n; i++) {
        ts[i] = scan ? ts[i] : red_operand(L, ts[i], &rs, axis, flag);
        ops[i] = ts[i].v;
        int32_t shape[IR_MAX_RANK] = {0};
        for (int d = 0, j = 0; !scan && d < ts[i].t->rank; d++)
            if (d != rs.axis) shape[j++] = ts[i].t->shape[d];
        rt[i] = scan ? ts[i].t : ir_type_tile(L->ctx, lw_scalar(L, ts[i].t->elem), ts[i].t->rank - 1, shape);
    }
    IrOp *op = ir_build(&L->b, bi->op, ops, (uint32_t)n, rt, (uint32_t)n, 1);
    op->attr.i = scan ? axis | (flag ? IR_SCAN_REVERSE : 0) : rs.axis;
    for (int k = 0; k < 2 * n; k++)
        argv[k] = lw_val(L, ir_block_add_arg(&op->regions[0], lw_scalar(L, ts[k % n].t->elem), NULL));
    IrBuilder saved = L->b;
    ir_builder_at_end(&L->b, &op->regions[0]);
    int got = lw_inline_fn(L, fn, call->loc, argv, (uint32_t)(2 * n), res, 8);
    L->b.loc = call->loc;
    bool ok = combine_yield(L, fn, bi, op, res, got, ts, n, call->loc);
    L->b = saved;
    if (!ok) {
        ir_op_remove(op);
        return -1;
    }
    for (int i = 0; i < n; i++) out[i] = scan ? lw_val(L, op->results[i]) : keep_dims(L, lw_val(L, op->results[i]), &rs);
    return n;
}

/* The handlers that may give several values, and their one-value form. */
static int results_of(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args, Val *out)
{
    switch (bi->op) {
    case IR_OP_SUM: case IR_OP_XOR_SUM: return sum_results(L, bi, call, args, out);
    case IR_OP_REDUCE: case IR_OP_SCAN: return combine_results(L, bi, call, args, out);
    default: return minmax_results(L, bi, call, args, out);
    }
}

static Val bi_reduce(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val out[MAX_TILES];
    int n = results_of(L, bi, call, args, out);
    if (n == 1 || n < 0) return n == 1 ? out[0] : VERR;
    lw_error(L, call->loc, "%s(...) gives %d values here; bind them with let (a, b) = %s(...)", bi->name, n, bi->name);
    return VERR;
}

/* any/all(t, axis): max/min of i1 along the axis (exact: i1 is 0 or 1, unsigned).
 * Other numbers count as true where they are not 0, as in NumPy and PyTorch (a NaN is
 * not 0, so it is true). */
static Val bi_any_all(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val t = tile_arg(L, bi, args[0]);
    int64_t axis;
    if (!t.t || !red_axis(L, bi, args[1], t.t->rank, false, &axis)) return VERR;
    if (t.t->elem == IR_PTR) {
        lw_error(L, args[0]->loc, "%s needs booleans or numbers, got %s", bi->name, lw_tstr(L, t.t));
        return VERR;
    }
    L->b.loc = call->loc;
    t = lw_convert(L, t, IR_I1);
    int32_t shape[IR_MAX_RANK] = {0};
    for (int i = 0, j = 0; i < t.t->rank; i++)
        if (i != axis) shape[j++] = t.t->shape[i];
    return build_attr(L, bi->op, ir_type_tile(L->ctx, lw_scalar(L, IR_I1), t.t->rank - 1, shape), &t.v, 1, axis);
}

/* ---- element-wise ------------------------------------------------------------------------ */


static Val bi_where(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val c = bool_arg(L, bi, args[0], "condition", NULL);
    Val ab[2] = {lower_expr(L, args[1]), lower_expr(L, args[2])};
    int rank, ptr;
    int32_t shape[IR_MAX_RANK];
    if (!c.t || !ab[0].t || !ab[1].t) return VERR;
    if (lw_pointer_mismatch(ab, 2, &ptr) >= 0) {
        lw_error(L, args[2 - ptr]->loc, "where chooses between two numbers or two pointers of one type, got %s and %s",
                 lw_val_str(L, &ab[0]), lw_val_str(L, &ab[1]));
        return VERR;
    }
    if (!lw_unify(L, ab, 2, call->loc, "where")) return VERR;
    if (!lw_shape_join(c.t, ab[0].t, &rank, shape)) {
        lw_error(L, call->loc, "the condition of where has shape %s, which does not broadcast with %s",
                 lw_shape_str(L, c.t->rank, c.t->shape), lw_shape_str(L, ab[0].t->rank, ab[0].t->shape));
        return VERR;
    }
    c = lw_broadcast_to(L, c, rank, shape);
    ab[0] = lw_broadcast_to(L, ab[0], rank, shape);
    ab[1] = lw_broadcast_to(L, ab[1], rank, shape);
    IrValue ops[3] = {c.v, lw_ir(L, &ab[0]), lw_ir(L, &ab[1])};
    L->b.loc = call->loc;
    return lw_val(L, ir_build1(&L->b, IR_OP_SELECT, ab[0].t, ops, 3));
}

static bool number_args(Lower *L, const Builtin *bi, Val *vs, int n, const AstExpr **args)
{
    for (int i = 0; i < n; i++) {
        if (!vs[i].t) return false;
        if (vs[i].t->elem == IR_PTR) {
            lw_error(L, args[i]->loc, "%s needs numbers, got %s", bi->name, lw_tstr(L, vs[i].t));
            return false;
        }
    }
    return true;
}

/* exp, log, ..., abs, floor, minimum, pow, fma: integers go to f32 except for the ops
 * that are exact on integers (abs, minimum, maximum). */
static Val bi_math(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val vs[3];
    int n = bi->nreq;
    for (int i = 0; i < n; i++) vs[i] = lower_expr(L, args[i]);
    if (!number_args(L, bi, vs, n, args) || !lw_unify(L, vs, n, call->loc, bi->name)) return VERR;
    int arity;
    bool int_ok = ir_elementwise_kind(bi->name, &arity) == 'n';   /* ir/elementwise.def */
    IrValue ops[3];
    L->b.loc = call->loc;
    for (int i = 0; i < n; i++) {
        if (!int_ok && ir_elem_is_int(vs[i].t->elem)) vs[i] = lw_convert(L, vs[i], IR_F32);
        ops[i] = lw_ir(L, &vs[i]);
    }
    return lw_val(L, ir_build1(&L->b, bi->op, vs[0].t, ops, (uint32_t)n));
}

/* exp2(x, ftz?): ftz = true flushes subnormal results (below 2^-126) and arguments to
 * zero in f32 math (f16 and bf16 are computed in f32; f64 ignores it): the hardware's
 * ex2.approx.ftz, one instruction where keeping subnormals takes a compare and two
 * multiplies more. For softmax-like uses (exp2(s - max) summed with the max's 1), where
 * such values are below f32's resolution of the sum. */
static Val bi_exp2(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    bool ftz;
    if (!flag_opt(L, bi, args, "ftz", &ftz)) return VERR;
    Val r = bi_math(L, bi, call, args);   /* x alone (nreq 1), as every element-wise function */
    if (r.t && ftz) L->b.func->values[r.v].def->attr.i = 1;
    return r;
}

/* isnan/isinf/isfinite(x): i1 of x's shape, by exact comparisons: x != x, |x| == inf,
 * |x| < inf (f8e4m3 has no infinities: never inf, finite where not NaN). Integers are
 * never NaN or infinite: the constants false, false, true, as in PyTorch. */
static Val bi_classify(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val x = lower_expr(L, args[0]);
    if (!number_args(L, bi, &x, 1, args)) return VERR;
    if (x.lit == LIT_FLOAT) x = lw_convert(L, x, IR_F32);
    lw_ir(L, &x);
    L->b.loc = call->loc;
    const IrType *bt = lw_like(L, x.t, IR_I1);
    bool nan = !strcmp(bi->name, "isnan"), inf = !strcmp(bi->name, "isinf");
    if (!ir_elem_is_float(x.t->elem)) return lw_val(L, ir_const_int(&L->b, bt, !nan && !inf));
    IrValue ops[2] = {x.v, x.v};
    if (nan || x.t->elem == IR_F8E4M3) {
        if (inf) return lw_val(L, ir_const_int(&L->b, bt, 0));
        return build_attr(L, IR_OP_CMP, bt, ops, 2, nan ? IR_CMP_NE : IR_CMP_EQ);
    }
    ops[0] = ir_build1(&L->b, IR_OP_ABS, x.t, &x.v, 1);
    ops[1] = ir_const_float(&L->b, x.t, INFINITY);
    return build_attr(L, IR_OP_CMP, bt, ops, 2, inf ? IR_CMP_EQ : IR_CMP_LT);
}

static Val bi_cdiv(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val a = lower_expr(L, args[0]), b = lower_expr(L, args[1]);
    if (!a.t || !b.t) return VERR;
    for (int i = 0; i < 2; i++) {
        const Val *v = i ? &b : &a;
        if (v->t->rank || v->lit == LIT_FLOAT || !ir_elem_is_int(v->t->elem) || v->t->elem == IR_I1) {
            lw_error(L, args[i]->loc, "cdiv takes integer scalars, got %s; for tiles write (a + b - 1) / b",
                     val_str(L, v));
            return VERR;
        }
    }
    Val one = {.t = lw_scalar(L, IR_I32), .v = IR_NO_VALUE, .lit = LIT_INT, .i = 1, .loc = call->loc};
    Val s = lw_binop(L, AST_ADD, a, b, call->loc);
    s = lw_binop(L, AST_SUB, s, one, call->loc);
    return lw_binop(L, AST_DIV, s, b, call->loc);
}

/* ---- shapes ------------------------------------------------------------------------------- */
static Val bi_trans(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val t = tile_arg(L, bi, args[0]);
    if (!t.t) return VERR;
    if (t.t->rank < 2) {
        lw_error(L, call->loc, "trans needs a tile of rank 2 to 5, got %s", lw_tstr(L, t.t));
        return VERR;
    }
    int32_t shape[IR_MAX_RANK];
    for (int i = 0; i < t.t->rank; i++) shape[i] = t.t->shape[t.t->rank - 1 - i];
    L->b.loc = call->loc;
    return lw_val(L, ir_build1(&L->b, IR_OP_TRANS, ir_type_tile(L->ctx, ir_type_elem(L->ctx, t.t), t.t->rank, shape),
                               &t.v, 1));
}

static Val bi_reshape(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val t = lower_expr(L, args[0]);
    int rank;
    int32_t shape[IR_MAX_RANK];
    if (!t.t || !ce_shape(L, args[1], bi->name, &rank, shape)) return VERR;
    const IrType *target = ir_type_tile(L->ctx, ir_type_elem(L->ctx, t.t), rank, shape);
    L->b.loc = call->loc;
    if (bi->op == IR_OP_BROADCAST) return lw_broadcast_like(L, t, target, call->loc, "the tile");
    if (t.lit || !t.t->rank || ir_type_numel(t.t) != ir_type_numel(target)) {
        lw_error(L, call->loc, "cannot reshape a tile of shape %s to %s: the element counts differ",
                 t.lit ? "[]" : lw_shape_str(L, t.t->rank, t.t->shape), lw_shape_str(L, rank, shape));
        return VERR;
    }
    return lw_val(L, ir_build1(&L->b, IR_OP_RESHAPE, target, &t.v, 1));
}

/* ---- random numbers, hints --------------------------------------------------------------- */
static bool int_val(const Val *v) { return v->t && v->lit != LIT_FLOAT && ir_elem_is_int(v->t->elem) && v->t->elem != IR_I1; }

static Val bi_rand(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val seed = lower_expr(L, args[0]), off = lower_expr(L, args[1]);
    if (!seed.t || !off.t) return VERR;
    if (!int_val(&seed) || seed.t->rank) {
        lw_error(L, args[0]->loc, "the seed of %s must be an integer scalar, got %s", bi->name, val_str(L, &seed));
        return VERR;
    }
    if (!int_val(&off)) {
        lw_error(L, args[1]->loc, "the offsets of %s must be integers, got %s", bi->name, val_str(L, &off));
        return VERR;
    }
    IrValue ops[2] = {lw_ir(L, &seed), lw_ir(L, &off)};
    L->b.loc = call->loc;
    return lw_val(L, ir_build1(&L->b, bi->op, lw_like(L, off.t, IR_F32), ops, 2));
}

static Val bi_hint(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val x = lower_expr(L, args[0]);
    int64_t n;
    if (!x.t || !const_arg(L, bi, args[1], "n", &n)) return VERR;
    if (n < 1) {
        lw_error(L, args[1]->loc, "the n of %s must be positive, got %lld", bi->name, (long long)n);
        return VERR;
    }
    if (!int_val(&x) && x.t->elem != IR_PTR) {
        lw_error(L, args[0]->loc, "%s needs integers or pointers, got %s", bi->name, val_str(L, &x));
        return VERR;
    }
    lw_ir(L, &x);
    L->b.loc = call->loc;
    return build_attr(L, bi->op, x.t, &x.v, 1, n);
}

/* ---- assert, print ------------------------------------------------------------------------ */
static const char *message_arg(Lower *L, const Builtin *bi, const AstExpr *e)
{
    if (e->kind == AST_STRING) return arena_strdup(L->arena, e->sval ? e->sval : "");
    lw_error(L, e->loc, "the message of %s must be a string", bi->name);
    return NULL;
}

static Val bi_assert(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val c = bool_arg(L, bi, args[0], "condition", NULL);
    const char *msg = message_arg(L, bi, args[1]);
    if (!c.t || !msg) return VERR;
    L->b.loc = call->loc;
    ir_build(&L->b, IR_OP_ASSERT, &c.v, 1, NULL, 0, 0)->attr.s = msg;
    return VVOID;
}

static Val bi_print(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    const char *msg = message_arg(L, bi, call->args[0]);
    IrValue *ops = arena_alloc(L->arena, call->nargs * sizeof *ops);
    bool ok = msg != NULL;
    for (uint32_t i = 1; i < call->nargs; i++) {
        Val v = lower_expr(L, call->args[i]);
        ok &= v.t != NULL;
        if (v.t) ops[i - 1] = lw_ir(L, &v);
    }
    if (!ok) return VERR;
    L->b.loc = call->loc;
    ir_build(&L->b, IR_OP_PRINT, ops, call->nargs - 1, NULL, 0, 0)->attr.s = msg;
    return VVOID;
}

/* ---- bit casts, clamp, umulhi (issue 13) ------------------------------------------------- */
/* bitcast(x, T): the bits of x read as T, of the same width (i1 has none in registers). */
static Val bi_bitcast(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val x = lower_expr(L, args[0]);
    IrElem to;
    if (!x.t || !elem_arg(L, bi, args[1], &to)) return VERR;
    lw_ir(L, &x);
    IrElem from = x.t->elem;
    if (from == IR_PTR || from == IR_I1 || to == IR_I1) {
        lw_error(L, from == IR_PTR || from == IR_I1 ? args[0]->loc : args[1]->loc,
                 "bitcast reinterprets numbers other than i1, got %s to %s", lw_tstr(L, x.t), ir_elem_name(to));
        return VERR;
    }
    if (ir_elem_bits(from) != ir_elem_bits(to)) {
        lw_error(L, call->loc, "bitcast needs types of one width: %s has %d bits, %s has %d", ir_elem_name(from),
                 ir_elem_bits(from), ir_elem_name(to), ir_elem_bits(to));
        return VERR;
    }
    if (from == to) return x;
    L->b.loc = call->loc;
    return lw_val(L, ir_build1(&L->b, IR_OP_BITCAST, lw_like(L, x.t, to), &x.v, 1));
}

/* clamp(x, lo, hi) = minimum(maximum(x, lo), hi): promoted and broadcast together; a
 * NaN anywhere gives NaN (as minimum and maximum), lo > hi gives hi. */
static Val bi_clamp(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val vs[3];
    for (int i = 0; i < 3; i++) vs[i] = lower_expr(L, args[i]);
    if (!number_args(L, bi, vs, 3, args) || !lw_unify(L, vs, 3, call->loc, bi->name)) return VERR;
    L->b.loc = call->loc;
    for (int i = 0; i < 3; i++) lw_ir(L, &vs[i]);
    Val m = lw_build_binary(L, IR_OP_MAXIMUM, vs[0].t, vs[0], vs[1]);
    return lw_build_binary(L, IR_OP_MINIMUM, vs[0].t, m, vs[2]);
}

/* The high 64 bits of the unsigned 128-bit product of two u64 tiles, from 32-bit
 * halves (Hacker's Delight 8-2). */
static Val mulhi_u64(Lower *L, Val a, Val b)
{
    Val m = int_const(L, a.t, 0xffffffff), k = int_const(L, a.t, 32);
    Val al = bin(L, IR_OP_AND, a, m), ah = bin(L, IR_OP_SHR, a, k);
    Val bl = bin(L, IR_OP_AND, b, m), bh = bin(L, IR_OP_SHR, b, k);
    Val t = bin(L, IR_OP_ADD, bin(L, IR_OP_MUL, ah, bl), bin(L, IR_OP_SHR, bin(L, IR_OP_MUL, al, bl), k));
    Val w = bin(L, IR_OP_ADD, bin(L, IR_OP_AND, t, m), bin(L, IR_OP_MUL, al, bh));
    Val hi = bin(L, IR_OP_ADD, bin(L, IR_OP_MUL, ah, bh), bin(L, IR_OP_SHR, t, k));
    return bin(L, IR_OP_ADD, hi, bin(L, IR_OP_SHR, w, k));
}

/* umulhi(a, b): the high half of the full 2N-bit product of two N-bit integers (signed
 * for signed types, as CUDA's __mulhi/__umulhi). Narrower types multiply in 64 bits;
 * 64-bit ones by halves, a signed product corrected by (a < 0 ? b : 0) + (b < 0 ? a : 0). */
static Val bi_umulhi(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **args)
{
    Val vs[2] = {lower_expr(L, args[0]), lower_expr(L, args[1])};
    if (!number_args(L, bi, vs, 2, args) || !lw_unify(L, vs, 2, call->loc, bi->name)) return VERR;
    IrElem e = vs[0].t->elem;
    if (!ir_elem_is_int(e) || e == IR_I1) {
        lw_error(L, call->loc, "umulhi needs integers, got %s", lw_tstr(L, vs[0].t));
        return VERR;
    }
    L->b.loc = call->loc;
    bool sg = ir_elem_is_signed(e);
    int w = ir_elem_bits(e);
    if (w < 64) {
        IrElem wide = sg ? IR_I64 : IR_U64;
        Val a = lw_convert(L, vs[0], wide), b = lw_convert(L, vs[1], wide);
        Val p = bin(L, IR_OP_SHR, bin(L, IR_OP_MUL, a, b), int_const(L, a.t, w));
        return lw_convert(L, p, e);
    }
    Val a = lw_convert(L, vs[0], IR_U64), b = lw_convert(L, vs[1], IR_U64);
    lw_ir(L, &a), lw_ir(L, &b);
    Val hi = mulhi_u64(L, a, b);
    if (!sg) return hi;
    Val z = int_const(L, vs[0].t, 0), zu = int_const(L, a.t, 0);
    for (int i = 0; i < 2; i++) {
        IrValue ops[2] = {lw_ir(L, &vs[i]), z.v};
        IrValue neg = build_attr(L, IR_OP_CMP, lw_like(L, vs[i].t, IR_I1), ops, 2, IR_CMP_LT).v;
        IrValue sel[3] = {neg, (i ? a : b).v, zu.v};
        hi = bin(L, IR_OP_SUB, hi, lw_val(L, ir_build1(&L->b, IR_OP_SELECT, a.t, sel, 3)));
    }
    return lw_convert(L, hi, e);
}

/* ---- the table ------------------------------------------------------------------------------ */
/* The element-wise functions come from ir/elementwise.def, shared with graphs. */
#define EW_PARAMS_1 {"x"}
#define EW_PARAMS_2 {"a", "b"}
#define EW_PARAMS_3 {"a", "b", "c"}
#define MINMAX(n, OPC) {n, 1, 5, {"t", "axis", "propagate_nan", "keep_dims", "return_indices"}, bi_reduce, IR_OP_##OPC}
#define ARGM(n, OPC) {n, 1, 4, {"t", "axis", "keep_dims", "return_value"}, bi_reduce, IR_OP_##OPC}
#define SCAN(n, OPC) {n, 2, 4, {"t", "axis", "reverse", "dtype"}, bi_scan, IR_OP_##OPC}
#define ATOMIC(n, OPC) {n, 2, 4, {"ptr", "value", "mask", "sem"}, bi_atomic, IR_OP_ATOMIC_##OPC}
static const Builtin builtins[] = {
    {"program_id", 1, 1, {"axis"}, bi_program_id, IR_OP_PROGRAM_ID},
    {"num_programs", 1, 1, {"axis"}, bi_program_id, IR_OP_NUM_PROGRAMS},
    {"arange", 2, 2, {"start", "end"}, bi_arange, IR_OP_ARANGE},
    {"zeros", 2, 2, {"shape", "dtype"}, bi_zeros, IR_OP_CONST},
    {"full", 3, 3, {"shape", "value", "dtype"}, bi_zeros, IR_OP_CONST},
    {"load", 1, 3, {"ptr", "mask", "other"}, bi_load, IR_OP_LOAD},
    {"load_block", 5, 5, {"ptr", "shape", "strides", "offsets", "block"}, bi_load_block, IR_OP_BLOCK_LOAD},
    {"store", 2, 3, {"ptr", "value", "mask"}, bi_store, IR_OP_STORE},
    {"store_block", 5, 5, {"ptr", "shape", "strides", "offsets", "value"}, bi_store_block, IR_OP_BLOCK_STORE},
    ATOMIC("atomic_add", ADD), ATOMIC("atomic_max", MAX), ATOMIC("atomic_min", MIN),
    ATOMIC("atomic_xchg", XCHG), ATOMIC("atomic_and", AND), ATOMIC("atomic_or", OR),
    ATOMIC("atomic_xor", XOR),
    {"atomic_cas", 3, 4, {"ptr", "cmp", "value", "sem"}, bi_atomic, IR_OP_ATOMIC_CAS},
    {"barrier", 0, 0, {0}, bi_barrier, IR_OP_BARRIER},
    {"dot", 2, 6, {"a", "b", "acc", "precision", "out_dtype", "max_num_imprecise_acc"}, bi_dot, IR_OP_DOT},
    {"sum", 1, 4, {"t", "axis", "keep_dims", "dtype"}, bi_reduce, IR_OP_SUM},
    {"xor_sum", 1, 3, {"t", "axis", "keep_dims"}, bi_reduce, IR_OP_XOR_SUM},
    MINMAX("max", MAX), MINMAX("min", MIN), ARGM("argmax", ARGMAX), ARGM("argmin", ARGMIN),
    SCAN("cumsum", CUMSUM), SCAN("cumprod", CUMPROD),
    {"reduce", 3, 4, {"t", "axis", "combine", "keep_dims"}, bi_reduce, IR_OP_REDUCE},
    {"associative_scan", 3, 4, {"t", "axis", "combine", "reverse"}, bi_reduce, IR_OP_SCAN},
    {"any", 2, 2, {"t", "axis"}, bi_any_all, IR_OP_MAX},
    {"all", 2, 2, {"t", "axis"}, bi_any_all, IR_OP_MIN},
    {"where", 3, 3, {"cond", "a", "b"}, bi_where, IR_OP_SELECT},
    {"exp2", 1, 2, {"x", "ftz"}, bi_exp2, IR_OP_EXP2},   /* before the table's exp2: found first */
#define EW(n, ar, top, gop, kind) {n, ar, ar, EW_PARAMS_##ar, kind == 'c' ? bi_classify : bi_math, IR_OP_##top},
#include "ir/elementwise.def"
#undef EW
    {"cdiv", 2, 2, {"a", "b"}, bi_cdiv, IR_OP_DIV},
    {"trans", 1, 1, {"t"}, bi_trans, IR_OP_TRANS},
    {"reshape", 2, 2, {"t", "shape"}, bi_reshape, IR_OP_RESHAPE},
    {"broadcast", 2, 2, {"t", "shape"}, bi_reshape, IR_OP_BROADCAST},
    {"rand", 2, 2, {"seed", "offsets"}, bi_rand, IR_OP_RAND},
    {"randn", 2, 2, {"seed", "offsets"}, bi_rand, IR_OP_RANDN},
    {"multiple_of", 2, 2, {"x", "n"}, bi_hint, IR_OP_MULTIPLE_OF},
    {"max_contiguous", 2, 2, {"x", "n"}, bi_hint, IR_OP_MAX_CONTIGUOUS},
    {"assert", 2, 2, {"cond", "msg"}, bi_assert, IR_OP_ASSERT},
    {"print", 1, VARIADIC, {"msg"}, bi_print, IR_OP_PRINT},
    {"bitcast", 2, 2, {"x", "dtype"}, bi_bitcast, IR_OP_BITCAST},
    {"clamp", 3, 3, {"x", "lo", "hi"}, bi_clamp, IR_OP_MINIMUM},
    {"umulhi", 2, 2, {"a", "b"}, bi_umulhi, IR_OP_MUL},
};

static const Builtin *find_builtin(const char *name)
{
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++)
        if (!strcmp(builtins[i].name, name)) return &builtins[i];
    return NULL;
}

bool lw_is_builtin(const char *name) { return find_builtin(name) != NULL; }

const char *lw_closest_builtin(const char *name)
{
    const char *best = NULL;
    int bd = 99;
    for (size_t i = 0; i < sizeof builtins / sizeof *builtins; i++) {
        int d = lw_edit_distance(builtins[i].name, name);
        if (d < bd) bd = d, best = builtins[i].name;
    }
    return best;
}

/* ---- argument matching --------------------------------------------------------------------- */
static void arity_error(Lower *L, const Builtin *bi, const AstExpr *call)
{
    if (bi->nmax == VARIADIC)
        lw_error(L, call->loc, "%s takes a message and then values, got no message", bi->name);
    else if (bi->nreq == bi->nmax)
        lw_error(L, call->loc, "%s takes %d argument%s, got %u", bi->name, bi->nreq, bi->nreq == 1 ? "" : "s",
                 call->nargs);
    else
        lw_error(L, call->loc, "%s takes %d to %d arguments, got %u", bi->name, bi->nreq, bi->nmax, call->nargs);
}

/* The first parameter that may be passed by name. */
static int first_named(const Builtin *bi) { return bi->fn == bi_load_block || bi->fn == bi_store_block ? 0 : bi->nreq; }

static void unknown_arg(Lower *L, const Builtin *bi, const char *name, Loc loc)
{
    const char *best = NULL;
    int bd = 99;
    for (int j = first_named(bi); j < bi->nmax && j < MAX_SLOTS; j++) {
        int d = lw_edit_distance(bi->params[j], name);
        if (d < bd) bd = d, best = bi->params[j];
    }
    if (bd <= lw_suggest_limit(name)) lw_error(L, loc, "unknown argument '%s' to %s; did you mean '%s'?", name, bi->name, best);
    else lw_error(L, loc, "unknown argument '%s' to %s", name, bi->name);
}

/* Places positional arguments first, then named ones (from first_named on) into slots;
 * false after an error. */
static bool slot_named(Lower *L, const Builtin *bi, const AstExpr *call, uint32_t i, const AstExpr **slots)
{
    const char *name = call->arg_names[i];
    Loc loc = call->arg_name_locs ? call->arg_name_locs[i] : call->args[i]->loc;
    for (int j = first_named(bi); j < bi->nmax && j < MAX_SLOTS; j++) {
        if (strcmp(bi->params[j], name)) continue;
        if (slots[j]) {
            lw_error(L, loc, "argument '%s' of %s is given twice", name, bi->name);
            return false;
        }
        slots[j] = call->args[i];
        return true;
    }
    unknown_arg(L, bi, name, loc);
    return false;
}

static bool slot_args(Lower *L, const Builtin *bi, const AstExpr *call, const AstExpr **slots)
{
    uint32_t npos = 0;
    bool named = false;
    for (uint32_t i = 0; i < call->nargs; i++) {
        if (call->arg_names && call->arg_names[i]) {
            if (!slot_named(L, bi, call, i, slots)) return false;
            named = true;
            continue;
        }
        if (named) {
            lw_error(L, call->args[i]->loc, "a positional argument cannot follow a named one");
            return false;
        }
        if (npos >= bi->nmax) {
            arity_error(L, bi, call);
            return false;
        }
        if (npos < MAX_SLOTS) slots[npos] = call->args[i];
        npos++;
    }
    for (int j = 0; j < bi->nreq; j++)
        if (!slots[j]) {
            arity_error(L, bi, call);
            return false;
        }
    return true;
}

bool lower_builtin(Lower *L, const AstExpr *call, Val *out)
{
    const Builtin *bi = find_builtin(call->name);
    const AstExpr *slots[MAX_SLOTS] = {0};
    if (!bi) return false;
    *out = slot_args(L, bi, call, slots) ? bi->fn(L, bi, call, slots) : VERR;
    return true;
}

int lower_builtin_results(Lower *L, const AstExpr *call, Val *out, int max)
{
    const Builtin *bi = find_builtin(call->name);
    const AstExpr *slots[MAX_SLOTS] = {0};
    Val res[MAX_TILES];
    if (!bi || bi->fn != bi_reduce) return -2;
    int n = slot_args(L, bi, call, slots) ? results_of(L, bi, call, slots, res) : -1;
    for (int i = 0; i < n && i < max; i++) out[i] = res[i];
    return n;
}
