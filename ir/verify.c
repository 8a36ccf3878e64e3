/* The verifier: every rule of every op of ops.def (docs/IR.md, "Verifier rules").
 *
 * Passes and the IR parser rely on it: the parser checks only syntax and names, the
 * verifier checks types, shapes, attributes, region structure and SSA dominance, so a
 * rule lives in exactly one place. Each violation is a diagnostic at the op's location
 * of the form "verifier: 'add' operands must have the same type, got f32[64] and
 * f16[64]"; verification carries on after one to report the others. */
#include "ir.h"
#include "target.h"
#include "layout.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

typedef struct Verifier {
    const IrFunc *f;
    DiagList *diags;
    bool ok;
    bool *visible;               /* values defined in the current block or above it */
    uint32_t laid_out, bare;     /* tile values with and without a layout */
} Verifier;

typedef struct TypeStr {
    char s[640];
} TypeStr;

/* A type as the rules see it: with its layout, which is part of its identity. */
static TypeStr tstr(const IrType *t)
{
    TypeStr r;
    if (t) {
        ir_type_str(t, r.s, sizeof r.s);
        size_t at = strlen(r.s);
        if (t->layout && at + 2 < sizeof r.s) {
            r.s[at++] = ' ';
            r.s[at++] = '#';
            ir_layout_str(t->layout, NULL, r.s + at, sizeof r.s - at);
        }
    } else {
        snprintf(r.s, sizeof r.s, "<no type>");
    }
    return r;
}

static bool fail(Verifier *v, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static bool fail(Verifier *v, const IrOp *op, const char *fmt, ...)
{
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *name = op->code < IR_NUM_OPS ? ir_op_info[op->code].text : "?";
    diag_error(v->diags, op->loc, "verifier: '%s' %s", name, msg);
    v->ok = false;
    return false;
}

/* ---- type predicates ------------------------------------------------------------- */
static const IrType *opt(const Verifier *v, const IrOp *op, uint32_t i)
{
    return ir_value_type(v->f, op->operands[i]);
}

static const IrType *rty(const Verifier *v, const IrOp *op) { return ir_value_type(v->f, op->results[0]); }

static bool same_shape(const IrType *a, const IrType *b)
{
    return a->rank == b->rank && !memcmp(a->shape, b->shape, a->rank * sizeof *a->shape);
}

static bool same_elem(const IrType *a, const IrType *b) { return a->elem == b->elem && a->pointee == b->pointee; }
static bool is_numeric(const IrType *t) { return t->elem != IR_PTR; }
static bool is_int(const IrType *t) { return ir_elem_is_int(t->elem); }
static bool is_float(const IrType *t) { return ir_elem_is_float(t->elem); }
static bool is_scalar_int(const IrType *t) { return t->rank == 0 && is_int(t); }
static bool is_i1_scalar(const IrType *t) { return t->rank == 0 && t->elem == IR_I1; }
static bool is_ptr(const IrType *t) { return t->elem == IR_PTR; }

/* A tile's dims are powers of two and it holds at most IR_MAX_TILE_ELEMS elements. */
/* Tile dims are powers of two; a shared-memory buffer's first axis counts stages, any
 * number of them. */
static bool shape_ok(const IrType *t)
{
    if (t->rank > IR_MAX_RANK) return false;
    bool buffer = t->layout && t->layout->kind == IR_LAYOUT_SHARED;
    for (int i = 0; i < t->rank; i++)
        if (t->shape[i] <= 0 || (!(buffer && i == 0) && (t->shape[i] & (t->shape[i] - 1)))) return false;
    return ir_type_numel(t) <= IR_MAX_TILE_ELEMS;
}

/* ---- rules per op family ---------------------------------------------------------- */
/* Every operand has the result's type (binary and ternary element-wise arithmetic). */
static bool all_like_result(Verifier *v, const IrOp *op)
{
    const IrType *r = rty(v, op);
    for (uint32_t i = 0; i < op->noperands; i++)
        if (opt(v, op, i) != r) {
            if (i > 0 && opt(v, op, i) != opt(v, op, 0))
                return fail(v, op, "operands must have the same type, got %s and %s",
                            tstr(opt(v, op, 0)).s, tstr(opt(v, op, i)).s);
            return fail(v, op, "operand %u must have the result type %s, got %s", i, tstr(r).s,
                        tstr(opt(v, op, i)).s);
        }
    return true;
}

static bool elementwise(Verifier *v, const IrOp *op, bool (*elem_ok)(const IrType *), const char *what)
{
    if (!all_like_result(v, op)) return false;
    if (!elem_ok(rty(v, op))) return fail(v, op, "needs %s, got %s", what, tstr(rty(v, op)).s);
    return true;
}

static bool check_cmp(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *b = opt(v, op, 1), *r = rty(v, op);
    if (a != b) return fail(v, op, "operands must have the same type, got %s and %s", tstr(a).s, tstr(b).s);
    if (r->elem != IR_I1 || !same_shape(a, r))
        return fail(v, op, "result must be i1 of the operands' shape, got %s", tstr(r).s);
    if (op->attr.i < 0 || op->attr.i > IR_CMP_GE) return fail(v, op, "has an unknown predicate %" PRId64, op->attr.i);
    return true;
}

static bool check_select(Verifier *v, const IrOp *op)
{
    const IrType *c = opt(v, op, 0), *r = rty(v, op);
    if (c->elem != IR_I1 || !same_shape(c, r))
        return fail(v, op, "condition must be i1 of the result's shape, got %s", tstr(c).s);
    for (uint32_t i = 1; i < 3; i++)
        if (opt(v, op, i) != r)
            return fail(v, op, "operands must have the result type %s, got %s", tstr(r).s, tstr(opt(v, op, i)).s);
    return true;
}

static bool check_convert(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    if (!is_numeric(a) || !is_numeric(r))
        return fail(v, op, "converts numbers only, got %s to %s", tstr(a).s, tstr(r).s);
    if (!same_shape(a, r)) return fail(v, op, "keeps the shape, got %s to %s", tstr(a).s, tstr(r).s);
    return true;
}

static bool check_bitcast(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    if (!is_numeric(a) || !is_numeric(r) || a->elem == IR_I1 || r->elem == IR_I1)
        return fail(v, op, "reinterprets numbers other than i1, got %s to %s", tstr(a).s, tstr(r).s);
    if (ir_elem_bits(a->elem) != ir_elem_bits(r->elem))
        return fail(v, op, "keeps the width, got %s to %s", tstr(a).s, tstr(r).s);
    if (!same_shape(a, r)) return fail(v, op, "keeps the shape, got %s to %s", tstr(a).s, tstr(r).s);
    return true;
}

static bool check_addptr(Verifier *v, const IrOp *op)
{
    const IrType *p = opt(v, op, 0), *o = opt(v, op, 1), *r = rty(v, op);
    if (!is_ptr(p) || !is_int(o)) return fail(v, op, "needs a pointer and an integer offset, got %s and %s", tstr(p).s, tstr(o).s);
    if (!same_shape(p, o) || r != p) return fail(v, op, "operands and result must have the same shape, got %s, %s -> %s",
                                                  tstr(p).s, tstr(o).s, tstr(r).s);
    return true;
}

static bool check_axis_attr(Verifier *v, const IrOp *op, int64_t lo, int64_t hi)
{
    if (op->attr.i < lo || op->attr.i > hi)
        return fail(v, op, "axis %" PRId64 " is out of range %" PRId64 "..%" PRId64, op->attr.i, lo, hi);
    return true;
}

static bool check_program_id(Verifier *v, const IrOp *op)
{
    if (rty(v, op)->rank || rty(v, op)->elem != IR_I32) return fail(v, op, "result must be i32, got %s", tstr(rty(v, op)).s);
    return check_axis_attr(v, op, 0, 2);
}

static bool check_arange(Verifier *v, const IrOp *op)
{
    const IrType *r = rty(v, op);
    if (r->rank != 1 || r->elem != IR_I32) return fail(v, op, "result must be a rank-1 i32 tile, got %s", tstr(r).s);
    if (op->attr.i < INT32_MIN || op->attr.i + r->shape[0] - 1 > INT32_MAX)
        return fail(v, op, "range %" PRId64 "..%" PRId64 " does not fit i32", op->attr.i, op->attr.i + r->shape[0]);
    return true;
}

static bool check_const(Verifier *v, const IrOp *op)
{
    const IrType *r = rty(v, op);
    if (!is_numeric(r)) return fail(v, op, "result must be a number or a tile of numbers, got %s", tstr(r).s);
    int bits = ir_elem_bits(r->elem);
    if (!is_int(r) || bits == 64) return true;
    /* either reading of the bits is accepted: u8 255 and u8 -1 are the same constant */
    int64_t lo = r->elem == IR_I1 ? 0 : -(INT64_C(1) << (bits - 1)), hi = (INT64_C(1) << bits) - 1;
    if (op->attr.i < lo || op->attr.i > hi)
        return fail(v, op, "value %" PRId64 " does not fit %s", op->attr.i, tstr(r).s);
    return true;
}

static bool check_splat(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    if (a->rank || !r->rank || !same_elem(a, r))
        return fail(v, op, "makes a tile of a scalar of the same element type, got %s -> %s", tstr(a).s, tstr(r).s);
    return true;
}

static bool check_broadcast(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    bool ok = same_elem(a, r) && a->rank == r->rank;
    for (int i = 0; ok && i < a->rank; i++) ok = a->shape[i] == r->shape[i] || a->shape[i] == 1;
    if (!ok) return fail(v, op, "grows size-1 dims of the same rank and element type, got %s -> %s", tstr(a).s, tstr(r).s);
    return true;
}

static bool check_expand_dims(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    int64_t ax = op->attr.i;
    if (!check_axis_attr(v, op, 0, a->rank)) return false;
    bool ok = same_elem(a, r) && r->rank == a->rank + 1 && r->shape[ax] == 1;
    for (int i = 0, j = 0; ok && i < r->rank; i++)
        if (i != ax) ok = r->shape[i] == a->shape[j++];
    if (!ok) return fail(v, op, "inserts a size-1 axis at %" PRId64 ", got %s -> %s", ax, tstr(a).s, tstr(r).s);
    return true;
}

static bool check_extract(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    bool ok = same_elem(a, r) && a->rank >= 1 && r->rank == a->rank;
    for (int i = 0; ok && i + 1 < a->rank; i++) ok = r->shape[i] == a->shape[i];
    if (!ok) return fail(v, op, "keeps the element type, the rank and every size but the last, got %s -> %s", tstr(a).s,
                         tstr(r).s);
    int64_t lo = op->attr.i, n = r->shape[r->rank - 1], an = a->shape[a->rank - 1];
    if (lo < 0 || n < 1 || lo > an - n)
        return fail(v, op, "columns [%" PRId64 ", %" PRId64 ") lie outside the operand's %" PRId64, lo, lo + n, an);
    return true;
}

static bool check_reshape(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    if (!same_elem(a, r) || ir_type_numel(a) != ir_type_numel(r))
        return fail(v, op, "keeps the element type and count, got %s -> %s", tstr(a).s, tstr(r).s);
    return true;
}

static bool check_trans(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    bool ok = same_elem(a, r) && a->rank == r->rank;
    for (int i = 0; ok && i < a->rank; i++) ok = r->shape[i] == a->shape[a->rank - 1 - i];
    if (!ok) return fail(v, op, "reverses the axes, got %s -> %s", tstr(a).s, tstr(r).s);
    return true;
}

static bool check_count(Verifier *v, const IrOp *op, uint32_t lo, uint32_t hi)
{
    if (op->noperands < lo || op->noperands > hi)
        return fail(v, op, "takes %u to %u operands, got %u", lo, hi, op->noperands);
    return true;
}

/* The type a pointer tile points at: the pointee with the pointer's shape. */
static bool is_pointee_of(const IrType *p, const IrType *t)
{
    return is_ptr(p) && t->elem == p->pointee && same_shape(p, t);
}

static bool check_mask(Verifier *v, const IrOp *op, uint32_t i, const IrType *p)
{
    const IrType *m = opt(v, op, i);
    if (m->elem != IR_I1 || !same_shape(m, p))
        return fail(v, op, "mask must be i1 of the pointer's shape %s, got %s", tstr(p).s, tstr(m).s);
    return true;
}

static bool check_load(Verifier *v, const IrOp *op)
{
    if (!check_count(v, op, 1, 3)) return false;
    const IrType *p = opt(v, op, 0), *r = rty(v, op);
    if (!is_pointee_of(p, r)) return fail(v, op, "result must be the pointee of %s, got %s", tstr(p).s, tstr(r).s);
    if (op->noperands > 1 && !check_mask(v, op, 1, p)) return false;
    if (op->noperands > 2 && opt(v, op, 2) != r)
        return fail(v, op, "other must have the result type %s, got %s", tstr(r).s, tstr(opt(v, op, 2)).s);
    return true;
}

/* Operands [from, to) of a block op (its shape, strides and offsets): scalar integers
 * of one type. */
static bool check_block_ints(Verifier *v, const IrOp *op, uint32_t from, uint32_t to)
{
    const IrType *i0 = opt(v, op, from);
    for (uint32_t i = from; i < to; i++)
        if (!is_scalar_int(opt(v, op, i)) || opt(v, op, i) != i0)
            return fail(v, op, "shape, strides and offsets must be scalar integers of one type, got %s and %s",
                        tstr(i0).s, tstr(opt(v, op, i)).s);
    return true;
}

/* The outer pair of a block op (ir_block_outer), where it has one: two scalar integers
 * of one type. */
static bool check_outer(Verifier *v, const IrOp *op)
{
    uint32_t x = ir_block_outer(v->f, op);
    if (!x) return true;
    if (!is_scalar_int(opt(v, op, x)) || opt(v, op, x + 1) != opt(v, op, x))
        return fail(v, op, "the outer offset and stride must be scalar integers of one type, got %s and %s",
                    tstr(opt(v, op, x)).s, tstr(opt(v, op, x + 1)).s);
    return true;
}

/* block_load (ptr, shape x R, strides x R, offsets x R[, x, s]): ptr a scalar pointer to
 * the result's elements, the rest scalar integers of one type (the outer pair's may be
 * another), R the result's rank. */
static bool check_block_load(Verifier *v, const IrOp *op)
{
    const IrType *p = opt(v, op, 0), *r = rty(v, op);
    uint32_t n = 1 + 3u * (uint32_t)r->rank;
    if (r->rank < 1 || (op->noperands != n && op->noperands != n + 2))
        return fail(v, op, "needs a pointer and a shape, strides and offsets of the result's rank (and an outer offset "
                    "and stride), got %u operands for %s", op->noperands, tstr(r).s);
    if (!is_ptr(p) || p->rank || p->pointee != r->elem)
        return fail(v, op, "needs a scalar pointer to the result's %s, got %s", ir_elem_name(r->elem), tstr(p).s);
    return check_block_ints(v, op, 1, n) && check_outer(v, op);
}

/* block_store (ptr, shape x R, strides x R, offsets x R, value): block_load's operands
 * for the block of the value, R the value's rank, ptr a scalar pointer to its elements. */
static bool check_block_store(Verifier *v, const IrOp *op)
{
    if (op->noperands < 2) return fail(v, op, "needs a pointer, a shape, strides and offsets, and a value");
    const IrType *p = opt(v, op, 0), *x = opt(v, op, op->noperands - 1);
    uint32_t n = 1 + 3u * (uint32_t)x->rank;
    if (x->rank < 1 || (op->noperands != n + 1 && op->noperands != n + 3))
        return fail(v, op, "needs a pointer, a shape, strides and offsets of the value's rank (and an outer offset and "
                    "stride) and the value, got %u operands for %s", op->noperands, tstr(x).s);
    if (!is_ptr(p) || p->rank || p->pointee != x->elem)
        return fail(v, op, "needs a scalar pointer to the value's %s, got %s", ir_elem_name(x->elem), tstr(p).s);
    return check_block_ints(v, op, 1, n) && check_outer(v, op);
}

static bool check_store(Verifier *v, const IrOp *op)
{
    if (!check_count(v, op, 2, 3)) return false;
    const IrType *p = opt(v, op, 0), *x = opt(v, op, 1);
    if (!is_pointee_of(p, x)) return fail(v, op, "value must be the pointee of %s, got %s", tstr(p).s, tstr(x).s);
    return op->noperands < 3 || check_mask(v, op, 2, p);
}

static bool check_atomic(Verifier *v, const IrOp *op)
{
    bool cas = op->code == IR_OP_ATOMIC_CAS;
    if (!check_count(v, op, cas ? 3 : 2, cas ? 4 : 3)) return false;
    const IrType *p = opt(v, op, 0), *x = opt(v, op, cas ? 2 : 1), *r = rty(v, op);
    if (!is_pointee_of(p, x) || r != x)
        return fail(v, op, "value and result must be the pointee of %s, got %s -> %s", tstr(p).s, tstr(x).s, tstr(r).s);
    if (cas && opt(v, op, 1) != x) return fail(v, op, "compare value must have type %s, got %s", tstr(x).s, tstr(opt(v, op, 1)).s);
    bool bits = op->code == IR_OP_ATOMIC_AND || op->code == IR_OP_ATOMIC_OR || op->code == IR_OP_ATOMIC_XOR;
    if (bits && !ir_elem_is_int(x->elem)) return fail(v, op, "needs integers, got %s", tstr(x).s);
    if (op->attr.i < IR_SEM_ACQ_REL || op->attr.i > IR_SEM_RELEASE)
        return fail(v, op, "has an unknown memory order %" PRId64, op->attr.i);
    return op->noperands < (cas ? 4u : 3u) || check_mask(v, op, cas ? 3 : 2, p);
}

/* check_bounds (ptr, base, n, report[, mask]) -> i1 of ptr's shape and layout, where
 * base is a pointer parameter of the kernel (what ptr was computed from) and the
 * guarded op one that reaches global memory (passes/bounds.c). */
static bool check_check_bounds(Verifier *v, const IrOp *op)
{
    if (!check_count(v, op, 4, 5)) return false;
    const IrType *p = opt(v, op, 0), *b = opt(v, op, 1), *n = opt(v, op, 2), *rep = opt(v, op, 3), *r = rty(v, op);
    const IrValueInfo *bi = &v->f->values[op->operands[1]];
    IrOpcode g = (IrOpcode)op->attr.i;
    if (op->attr.i < 0 || op->attr.i >= IR_NUM_OPS ||
        !(g == IR_OP_LOAD || g == IR_OP_STORE || g == IR_OP_ASYNC_COPY || ir_op_is_atomic(g)))
        return fail(v, op, "guards a load, store, atomic or async_copy, got op %" PRId64, op->attr.i);
    if (!is_ptr(p)) return fail(v, op, "checks pointers, got %s", tstr(p).s);
    if (!is_ptr(b) || b->rank || b->pointee != p->pointee || bi->def || bi->block != &v->f->body)
        return fail(v, op, "base must be a pointer parameter of the kernel to %s, got %s", ir_elem_name(p->pointee),
                    tstr(b).s);
    if (n->rank || n->elem != IR_I64) return fail(v, op, "element count must be an i64 scalar, got %s", tstr(n).s);
    if (!is_ptr(rep) || rep->rank || rep->pointee != IR_I64)
        return fail(v, op, "report must be an *i64 scalar, got %s", tstr(rep).s);
    if (op->noperands == 5 && !check_mask(v, op, 4, p)) return false;
    if (op->noperands == 5 && opt(v, op, 4)->layout != p->layout)
        return fail(v, op, "mask and pointers must share a layout, got %s and %s", tstr(opt(v, op, 4)).s, tstr(p).s);
    if (r->elem != IR_I1 || !same_shape(r, p) || r->layout != p->layout)
        return fail(v, op, "result must be i1 of the pointers' shape and layout %s, got %s", tstr(p).s, tstr(r).s);
    return true;
}

static bool check_dot(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *b = opt(v, op, 1), *c = opt(v, op, 2), *r = rty(v, op);
    if (a->rank != 2 || b->rank != 2 || c->rank != 2 || !is_numeric(a) || a->elem != b->elem)
        return fail(v, op, "needs rank-2 tiles a and b of one element type, got %s and %s", tstr(a).s, tstr(b).s);
    if (a->shape[1] != b->shape[0] || c->shape[0] != a->shape[0] || c->shape[1] != b->shape[1])
        return fail(v, op, "shapes must be [M, K] x [K, N] + [M, N], got %s, %s, %s", tstr(a).s, tstr(b).s, tstr(c).s);
    if (r != c) return fail(v, op, "result must have the accumulator type %s, got %s", tstr(c).s, tstr(r).s);
    if (op->attr.i < 0 || op->attr.i > IR_PREC_IEEE) return fail(v, op, "has an unknown precision %" PRId64, op->attr.i);
    return true;
}

static bool check_reduce(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0), *r = rty(v, op);
    if (a->rank < 1) return fail(v, op, "reduces a tile, got %s", tstr(a).s);
    if (!check_axis_attr(v, op, 0, a->rank - 1)) return false;
    bool arg = op->code == IR_OP_ARGMAX || op->code == IR_OP_ARGMIN;
    bool ok = r->rank == a->rank - 1 && (arg ? r->elem == IR_I32 : same_elem(a, r)) && is_numeric(a);
    for (int i = 0, j = 0; ok && i < a->rank; i++)
        if (i != op->attr.i) ok = r->shape[j++] == a->shape[i];
    if (!ok) return fail(v, op, "result must be %s without axis %" PRId64 ", got %s",
                         arg ? "the i32 shape of the operand" : "the operand", op->attr.i, tstr(r).s);
    return true;
}

static bool check_scan(Verifier *v, const IrOp *op)
{
    const IrType *a = opt(v, op, 0);
    if (a->rank < 1 || !is_numeric(a)) return fail(v, op, "scans a tile of numbers, got %s", tstr(a).s);
    if (rty(v, op) != a) return fail(v, op, "result must have the operand type %s, got %s", tstr(a).s, tstr(rty(v, op)).s);
    if (op->attr.i & ~(int64_t)(IR_AXIS_MASK | IR_SCAN_REVERSE)) return fail(v, op, "has unknown flags in %" PRId64, op->attr.i);
    int64_t axis = op->attr.i & IR_AXIS_MASK;
    if (axis > a->rank - 1) return fail(v, op, "axis %" PRId64 " is out of range 0..%d", axis, a->rank - 1);
    return true;
}

static bool check_rand(Verifier *v, const IrOp *op)
{
    const IrType *s = opt(v, op, 0), *o = opt(v, op, 1), *r = rty(v, op);
    if (!is_scalar_int(s) || !is_int(o)) return fail(v, op, "needs a scalar integer seed and integer offsets, got %s and %s", tstr(s).s, tstr(o).s);
    if (r->elem != IR_F32 || !same_shape(r, o)) return fail(v, op, "result must be f32 of the offsets' shape, got %s", tstr(r).s);
    return true;
}

static bool check_hint(Verifier *v, const IrOp *op)
{
    if (rty(v, op) != opt(v, op, 0) || !(is_int(opt(v, op, 0)) || is_ptr(opt(v, op, 0))))
        return fail(v, op, "result must have the integer or pointer operand type, got %s -> %s",
                    tstr(opt(v, op, 0)).s, tstr(rty(v, op)).s);
    if (op->attr.i < 1) return fail(v, op, "n must be positive, got %" PRId64, op->attr.i);
    return true;
}

static bool check_assert(Verifier *v, const IrOp *op)
{
    if (opt(v, op, 0)->elem != IR_I1) return fail(v, op, "condition must be i1, got %s", tstr(opt(v, op, 0)).s);
    if (!op->attr.s) return fail(v, op, "needs a message");
    return true;
}

/* ---- regions ------------------------------------------------------------------------ */
/* The values `term` hands on must have the types types[0..n). */
static bool check_values(Verifier *v, const IrOp *term, const IrValue *vals, uint32_t nvals,
                         const IrValue *like, uint32_t n, const char *what)
{
    if (nvals != n) return fail(v, term, "gives %u value(s), %s needs %u", nvals, what, n);
    for (uint32_t i = 0; i < n; i++) {
        const IrType *a = ir_value_type(v->f, vals[i]), *b = ir_value_type(v->f, like[i]);
        if (a != b) return fail(v, term, "value %u must have type %s (%s), got %s", i, tstr(b).s, what, tstr(a).s);
    }
    return true;
}

static bool check_block_args(Verifier *v, const IrOp *op, const IrBlock *blk, const IrValue *like, uint32_t n, const char *what)
{
    if (blk->nargs != n) return fail(v, op, "%s must have %u argument(s), got %u", what, n, blk->nargs);
    for (uint32_t i = 0; i < n; i++)
        if (ir_value_type(v->f, blk->args[i]) != ir_value_type(v->f, like[i]))
            return fail(v, op, "%s argument %u must have type %s, got %s", what, i,
                        tstr(ir_value_type(v->f, like[i])).s, tstr(ir_value_type(v->f, blk->args[i])).s);
    return true;
}

/* A region ends in `yield` of values like like[0..n); a kernel's region may end in
 * `return` (early exit) instead; a region that yields nothing may end without one. */
static bool check_yield_end(Verifier *v, const IrOp *op, const IrBlock *blk, const IrValue *like, uint32_t n, const char *what)
{
    const IrOp *t = blk->last;
    if (t && t->code == IR_OP_YIELD) return check_values(v, t, t->operands, t->noperands, like, n, what);
    if (t && t->code == IR_OP_RETURN && v->f->kind == IR_FUNC_KERNEL) return true;
    if (n == 0 && (!t || !(ir_op_info[t->code].flags & IR_T))) return true;
    return fail(v, op, "%s must end in 'yield' of %u value(s)", what, n);
}

static bool check_for(Verifier *v, const IrOp *op)
{
    if (op->noperands < 3) return fail(v, op, "needs lo, hi and step, got %u operand(s)", op->noperands);
    const IrType *lo = opt(v, op, 0);
    if (!is_scalar_int(lo) || opt(v, op, 1) != lo || opt(v, op, 2) != lo)
        return fail(v, op, "lo, hi and step must be integer scalars of one type, got %s, %s, %s", tstr(lo).s,
                    tstr(opt(v, op, 1)).s, tstr(opt(v, op, 2)).s);
    const IrValue *inits = op->operands + 3;
    uint32_t n = op->noperands - 3;
    if (op->nresults != n) return fail(v, op, "must have one result per iter value (%u), got %u", n, op->nresults);
    if (!check_values(v, op, op->results, n, inits, n, "the iter values")) return false;
    const IrBlock *body = &op->regions[0];
    if (body->nargs != n + 1 || ir_value_type(v->f, body->args[0]) != lo)
        return fail(v, op, "body must have the arguments (iv: %s, iters...)", tstr(lo).s);
    return check_values(v, op, body->args + 1, n, inits, n, "the body arguments") &&
           check_yield_end(v, op, body, inits, n, "the body");
}

static bool check_if(Verifier *v, const IrOp *op)
{
    if (!is_i1_scalar(opt(v, op, 0))) return fail(v, op, "condition must be an i1 scalar, got %s", tstr(opt(v, op, 0)).s);
    for (int r = 0; r < 2; r++)
        if (op->regions[r].nargs) return fail(v, op, "regions take no arguments");
    return check_yield_end(v, op, &op->regions[0], op->results, op->nresults, "the then-region") &&
           check_yield_end(v, op, &op->regions[1], op->results, op->nresults, "the else-region");
}

static bool check_while(Verifier *v, const IrOp *op)
{
    const IrBlock *before = &op->regions[0], *after = &op->regions[1];
    if (!check_block_args(v, op, before, op->operands, op->noperands, "the before-region") ||
        !check_block_args(v, op, after, op->results, op->nresults, "the after-region"))
        return false;
    const IrOp *c = before->last;
    if (!c || c->code != IR_OP_CONDITION) return fail(v, op, "the before-region must end in 'condition'");
    if (c->noperands < 1 || !is_i1_scalar(ir_value_type(v->f, c->operands[0])))
        return fail(v, c, "needs an i1 scalar first operand");
    return check_values(v, c, c->operands + 1, c->noperands - 1, op->results, op->nresults, "the while results") &&
           check_yield_end(v, op, after, op->operands, op->noperands, "the after-region");
}

/* The combine region of reduce/scan over n tiles: arguments (a0..an-1, b0..bn-1), the
 * scalars of the operands' element types, ending in a yield of n such scalars; inside,
 * only pure ops and ifs (a combine has no effects). */
static bool pure_region(Verifier *v, const IrOp *owner, const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        unsigned fl = ir_op_info[op->code].flags;
        if (!(fl & IR_P) && op->code != IR_OP_IF && op->code != IR_OP_YIELD)
            return fail(v, op, "may not stand in the combine region of '%s' (only pure ops and ifs)", ir_op_info[owner->code].text);
        for (uint32_t r = 0; r < op->nregions; r++)
            if (!pure_region(v, owner, &op->regions[r])) return false;
    }
    return true;
}

static bool check_combine(Verifier *v, const IrOp *op)
{
    uint32_t n = op->noperands;
    const IrBlock *blk = &op->regions[0];
    if (blk->nargs != 2 * n) return fail(v, op, "the combine region must have %u arguments, got %u", 2 * n, blk->nargs);
    for (uint32_t i = 0; i < 2 * n; i++) {
        const IrType *t = ir_value_type(v->f, blk->args[i]), *o = opt(v, op, i % n);
        if (t->rank || !same_elem(t, o) || t->layout)
            return fail(v, op, "combine argument %u must be the scalar of %s, got %s", i, tstr(o).s, tstr(t).s);
    }
    const IrOp *y = blk->last;
    if (!y || y->code != IR_OP_YIELD) return fail(v, op, "the combine region must end in 'yield' of %u value(s)", n);
    return check_values(v, y, y->operands, y->noperands, blk->args, n, "the combine") && pure_region(v, op, blk);
}

/* reduce/scan over n tiles of one shape: reduce removes the axis, scan keeps it. */
static bool check_region_reduce(Verifier *v, const IrOp *op)
{
    uint32_t n = op->noperands;
    bool scan = op->code == IR_OP_SCAN;
    if (n < 1 || op->nresults != n) return fail(v, op, "needs n >= 1 operands and n results, got %u and %u", n, op->nresults);
    const IrType *a = opt(v, op, 0);
    if (a->rank < 1) return fail(v, op, "works on tiles, got %s", tstr(a).s);
    if (op->attr.i & ~(int64_t)(IR_AXIS_MASK | (scan ? IR_SCAN_REVERSE : 0)))
        return fail(v, op, "has unknown flags in %" PRId64, op->attr.i);
    int64_t axis = op->attr.i & IR_AXIS_MASK;
    if (axis > a->rank - 1) return fail(v, op, "axis %" PRId64 " is out of range 0..%d", axis, a->rank - 1);
    for (uint32_t i = 0; i < n; i++) {
        const IrType *t = opt(v, op, i), *r = ir_value_type(v->f, op->results[i]);
        if (!is_numeric(t) || !same_shape(t, a)) return fail(v, op, "operand %u must be numbers of shape like %s, got %s", i, tstr(a).s, tstr(t).s);
        bool ok = scan ? r == t : r->rank == a->rank - 1 && same_elem(r, t);
        for (int d = 0, j = 0; ok && !scan && d < a->rank; d++)
            if (d != axis) ok = r->shape[j++] == a->shape[d];
        if (!ok) return fail(v, op, "result %u must be %s%s, got %s", i, tstr(t).s, scan ? "" : " without the axis", tstr(r).s);
    }
    return check_combine(v, op);
}

/* Where a terminator may stand: the last op of the right kind of block. */
static bool check_terminator(Verifier *v, const IrOp *op)
{
    const IrBlock *blk = op->parent;
    const IrOp *owner = blk ? blk->parent_op : NULL;
    if (blk && blk->last != op) return fail(v, op, "must be the last op of its region");
    if (op->code == IR_OP_CONDITION && !(owner && owner->code == IR_OP_WHILE && blk == &owner->regions[0]))
        return fail(v, op, "may only end a while's before-region");
    if (op->code == IR_OP_YIELD && (!owner || (owner->code == IR_OP_WHILE && blk == &owner->regions[0])))
        return fail(v, op, "may only end a for body, an if region, a while's after-region, a combine region or a "
                    "producer region");
    if (op->code != IR_OP_RETURN) return true;
    if (v->f->kind == IR_FUNC_KERNEL) {
        if (op->noperands) return fail(v, op, "of a kernel takes no operands, got %u", op->noperands);
        return true;
    }
    if (owner) return fail(v, op, "of a grid function must end its body");
    if (op->noperands < 1 || op->noperands > 3) return fail(v, op, "of a grid function gives 1 to 3 values, got %u", op->noperands);
    for (uint32_t i = 0; i < op->noperands; i++)
        if (!is_scalar_int(opt(v, op, i))) return fail(v, op, "grid sizes must be integer scalars, got %s", tstr(opt(v, op, i)).s);
    return true;
}


/* ---- shared memory (the GPU level: passes/shared.c) ------------------------------------ */
static bool is_buffer(const IrType *t) { return t->rank >= 2 && t->layout && t->layout->kind == IR_LAYOUT_SHARED; }

/* t is one stage of buffer b (b's shape without its first axis; reversed when
 * transposed). */
static bool is_stage_of_t(const IrType *t, const IrType *b, bool transposed)
{
    if (t->rank + 1 != b->rank) return false;
    for (int d = 0; d < t->rank; d++)
        if (t->shape[d] != b->shape[transposed ? b->rank - 1 - d : d + 1]) return false;
    return true;
}

static bool is_stage_of(const IrType *t, const IrType *b) { return is_stage_of_t(t, b, false); }

static bool check_local_alloc(Verifier *v, const IrOp *op)
{
    if (!is_buffer(rty(v, op)))
        return fail(v, op, "makes a shared-memory buffer [stages, ...] with a shared layout, got %s", tstr(rty(v, op)).s);
    if (op->attr.i < 0 || op->attr.i % 16) return fail(v, op, "offset %" PRId64 " must be a multiple of 16 bytes", op->attr.i);
    return true;
}

static bool check_stage_operands(Verifier *v, const IrOp *op)
{
    if (!is_buffer(opt(v, op, 0))) return fail(v, op, "operand 0 must be a shared-memory buffer, got %s", tstr(opt(v, op, 0)).s);
    if (!is_scalar_int(opt(v, op, 1))) return fail(v, op, "the stage must be an integer scalar, got %s", tstr(opt(v, op, 1)).s);
    return true;
}

static bool check_async_copy(Verifier *v, const IrOp *op)
{
    if (!check_count(v, op, 3, 4) || !check_stage_operands(v, op)) return false;
    const IrType *b = opt(v, op, 0), *p = opt(v, op, 2);
    if (p->elem != IR_PTR || p->pointee != b->elem || !is_stage_of(p, b))
        return fail(v, op, "copies pointers to one stage of %s, got %s", tstr(b).s, tstr(p).s);
    if (op->noperands == 4 && opt(v, op, 3)->layout != p->layout)
        return fail(v, op, "mask and pointers must share a layout, got %s and %s", tstr(opt(v, op, 3)).s, tstr(p).s);
    return op->noperands < 4 || check_mask(v, op, 3, p);
}

static bool check_local_load(Verifier *v, const IrOp *op)
{
    if (!check_stage_operands(v, op)) return false;
    const IrType *b = opt(v, op, 0), *r = rty(v, op);
    if (op->attr.i != 0 && (op->attr.i != 1 || b->rank != 3))
        return fail(v, op, "reads a stage as it is (0) or, for a 2-D stage, transposed (1), got %" PRId64, op->attr.i);
    bool view = r->layout && r->layout->kind == IR_LAYOUT_SHARED;
    if (r->elem != b->elem || !is_stage_of_t(r, b, op->attr.i == 1) || !r->layout ||
        (view && (!b->layout || !b->layout->swizzle_bytes || r->layout->swizzle_bytes != b->layout->swizzle_bytes)))
        return fail(v, op, "reads one stage of %s into registers (or views it in place, in the buffer's NVMMA "
                    "layout), got %s", tstr(b).s, tstr(r).s);
    return true;
}

/* local_store (buf, stage, value): a tile in registers (not a view) into one stage, as
 * it is or (2-D) transposed. */
static bool check_local_store(Verifier *v, const IrOp *op)
{
    if (!check_stage_operands(v, op)) return false;
    const IrType *b = opt(v, op, 0), *t = opt(v, op, 2);
    if (op->attr.i != 0 && (op->attr.i != 1 || b->rank != 3))
        return fail(v, op, "writes a stage as it is (0) or, for a 2-D stage, transposed (1), got %" PRId64, op->attr.i);
    if (t->elem != b->elem || !is_stage_of_t(t, b, op->attr.i == 1) || !t->layout || t->layout->kind == IR_LAYOUT_SHARED)
        return fail(v, op, "writes a tile in registers into one stage of %s, got %s", tstr(b).s, tstr(t).s);
    return true;
}

/* The mbarriers of a TMA ring: an i64 buffer [stages, 1, 1]. */
static bool is_barriers(const IrType *t)
{
    return is_buffer(t) && t->elem == IR_I64 && t->rank == 3 && t->shape[1] == 1 && t->shape[2] == 1;
}

static bool check_mbarrier_init(Verifier *v, const IrOp *op)
{
    if (!is_barriers(opt(v, op, 0)))
        return fail(v, op, "initializes an i64 buffer of barriers [stages, 1, 1], got %s", tstr(opt(v, op, 0)).s);
    if (op->attr.i < 1 || op->attr.i > 1024) return fail(v, op, "expects 1 to 1024 arrivals, got %" PRId64, op->attr.i);
    return true;
}

/* tma_copy (buf, stage, bars, ptr, shape x R, strides x R, offsets x R[, x, s][, i1]): a
 * block_load's operands after the buffer, its stage and the ring's barriers (one per
 * stage). */
static bool check_tma_copy(Verifier *v, const IrOp *op)
{
    if (op->noperands < 4) return fail(v, op, "needs a buffer, a stage, barriers and a block");
    if (!check_stage_operands(v, op)) return false;
    const IrType *b = opt(v, op, 0), *bars = opt(v, op, 2), *p = opt(v, op, 3);
    uint32_t r = b->rank - 1u;
    bool pred = op->noperands == 5 + 3 * r || op->noperands == 7 + 3 * r;
    if (op->noperands < 4 + 3 * r || op->noperands > 7 + 3 * r)
        return fail(v, op, "copies a block of the stage's rank %u: a pointer and %u shapes, strides and offsets (an "
                    "outer offset and stride, and an i1 that says whether to copy), got %u operands", r, r, op->noperands);
    if (pred && !is_i1_scalar(opt(v, op, op->noperands - 1)))
        return fail(v, op, "the last operand says whether to copy: an i1 scalar, got %s", tstr(opt(v, op, op->noperands - 1)).s);
    if (!is_barriers(bars) || bars->shape[0] != b->shape[0])
        return fail(v, op, "needs one barrier per stage of %s, got %s", tstr(b).s, tstr(bars).s);
    if (!is_ptr(p) || p->rank || p->pointee != b->elem)
        return fail(v, op, "needs a scalar pointer to the buffer's %s, got %s", ir_elem_name(b->elem), tstr(p).s);
    return check_block_ints(v, op, 4, 4 + 3 * r) && check_outer(v, op);
}

/* tma_store (buf, value, ptr, shape x 2, strides x 2, offsets x 2): a staging buffer
 * [2, rows, cols] in the NVMMA form (swizzle_bytes = cols x element bytes) of the
 * value's element type, a value of a whole number of chunks of rows x cols, and a
 * block_store's operands for it. */
static bool check_tma_store(Verifier *v, const IrOp *op)
{
    if (op->noperands != 9 && op->noperands != 11)
        return fail(v, op, "needs a staging buffer, a value of rank 2, a pointer, 2 shapes, strides and offsets (and an "
                    "outer offset and stride), got %u operands", op->noperands);
    const IrType *b = opt(v, op, 0), *x = opt(v, op, 1), *p = opt(v, op, 2);
    if (!is_buffer(b) || b->rank != 3 || (b->shape[0] != 2 && b->shape[0] != 4) || !b->layout ||
        !b->layout->swizzle_bytes)   /* 4: two chunks for each of a pingpong kernel's warpgroups */
        return fail(v, op, "stages through a buffer [2, rows, cols] (or [4, ...]) in the NVMMA form, got %s", tstr(b).s);
    if (x->rank != 2 || x->elem != b->elem || x->shape[0] % b->shape[1] || x->shape[1] % b->shape[2] ||
        b->shape[2] * ir_elem_bytes(b->elem) != b->layout->swizzle_bytes)
        return fail(v, op, "stores a value of the buffer's element type in whole chunks of its rows and columns, got %s "
                    "through %s", tstr(x).s, tstr(b).s);
    if (!is_ptr(p) || p->rank || p->pointee != x->elem)
        return fail(v, op, "needs a scalar pointer to the value's %s, got %s", ir_elem_name(x->elem), tstr(p).s);
    if (op->attr.i < 0 || (op->attr.i && (b->shape[0] != 2 || x->shape[0] != b->shape[1] || x->shape[1] != b->shape[2])))
        return fail(v, op, "in a sequence (seq) stores one chunk through a buffer of two, got %s through %s", tstr(x).s,
                    tstr(b).s);
    return check_block_ints(v, op, 3, 9) && check_outer(v, op);
}

/* dot_wait n (values...) -> the values: as many results as operands, each of its
 * operand's type; 0 <= n <= 7 (wgmma.wait_group's range). */
static bool check_dot_wait(Verifier *v, const IrOp *op)
{
    if (op->attr.i < 0 || op->attr.i > 7) return fail(v, op, "waits for 0 to 7 groups in flight, got %" PRId64, op->attr.i);
    if (op->noperands == 0 || op->nresults != op->noperands)
        return fail(v, op, "passes its values through: as many results as operands (at least one), got %u and %u",
                    op->nresults, op->noperands);
    for (uint32_t i = 0; i < op->noperands; i++)
        if (opt(v, op, i) != ir_value_type(v->f, op->results[i]))
            return fail(v, op, "result %u must have its operand's type %s, got %s", i, tstr(opt(v, op, i)).s,
                        tstr(ir_value_type(v->f, op->results[i])).s);
    return true;
}

/* The cluster ops and flags (passes/cluster.c) belong to kernels of a cluster of CTAs;
 * cluster_sync is a barrier of every thread, outside a producer's region. */
static bool in_producer(const IrOp *op)
{
    for (const IrBlock *b = op->parent; b && b->parent_op; b = b->parent_op->parent)
        if (b->parent_op->code == IR_OP_PRODUCER) return true;
    return false;
}

static bool check_cluster(Verifier *v, const IrOp *op)
{
    /* block_load's `upper` (IR_BLOCK_UPPER) is no cluster flag */
    int64_t flag = op->code == IR_OP_BLOCK_LOAD ? op->attr.i & ~(int64_t)IR_BLOCK_UPPER : op->attr.i;
    bool flagged = op->code == IR_OP_CLUSTER_RANK || op->code == IR_OP_CLUSTER_SYNC || flag != 0;
    if (op->code == IR_OP_CLUSTER_RANK && (rty(v, op)->rank || rty(v, op)->elem != IR_I32))
        return fail(v, op, "result must be i32, got %s", tstr(rty(v, op)).s);
    if ((op->code == IR_OP_MBARRIER_ARRIVE || op->code == IR_OP_TMA_COPY || op->code == IR_OP_BLOCK_LOAD) &&
        flag != 0 && flag != 1)
        return fail(v, op, "has the flag 0 or 1, got %" PRId64, flag);
    if (flagged && (v->f->kind != IR_FUNC_KERNEL || ir_cluster_size(v->f) < 2))
        return fail(v, op, "%s a kernel whose programs run on clusters of CTAs (launch {cluster = 2})",
                    op->code == IR_OP_CLUSTER_SYNC || op->code == IR_OP_CLUSTER_RANK ? "stands only in" : "is flagged for");
    if (op->code == IR_OP_CLUSTER_SYNC && in_producer(op))
        return fail(v, op, "is a barrier of every thread, not in a producer region");
    return true;
}

/* turn: one of its four kinds, in a kernel of two consumer warpgroups (8 warps) beside a
 * producer, outside the producer's region. */
static bool check_turn(Verifier *v, const IrOp *op)
{
    if (op->attr.i < 0 || op->attr.i > 3) return fail(v, op, "is wait, pass, start or end, got %" PRId64, op->attr.i);
    bool pp = v->f->pingpong && v->f->warps == 4;   /* two consumer warpgroups of a program each */
    if (v->f->kind != IR_FUNC_KERNEL || (v->f->warps != 8 && !pp))
        return fail(v, op, "orders two consumer warpgroups: needs a kernel of 8 warps, or of 4 with pingpong");
    if (op->noperands > (op->attr.i == IR_TURN_END && pp ? 1u : 0u) ||
        (op->noperands && (opt(v, op, 0)->rank || opt(v, op, 0)->elem != IR_I32)))
        return fail(v, op, "takes no operand (but `end`, in a pingpong kernel: the i32 count of turns)");
    if (in_producer(op)) return fail(v, op, "is for the consumers, not in a producer region");
    return true;
}

static bool check_tma_wait(Verifier *v, const IrOp *op)
{
    bool wait = op->code == IR_OP_TMA_WAIT;
    uint32_t n = wait ? 3 : 2;
    if (!check_count(v, op, n, n + 1)) return false;
    if (!is_barriers(opt(v, op, 0)))
        return fail(v, op, "%s an i64 buffer of barriers [stages, 1, 1], got %s", wait ? "waits on" : "arrives on",
                    tstr(opt(v, op, 0)).s);
    for (uint32_t i = 1; i < n; i++)
        if (!is_scalar_int(opt(v, op, i)))
            return fail(v, op, "the stage and the phase must be integer scalars, got %s", tstr(opt(v, op, i)).s);
    if (op->noperands > n && !is_i1_scalar(opt(v, op, n)))
        return fail(v, op, "the last operand says whether to %s: an i1 scalar, got %s", wait ? "wait" : "arrive",
                    tstr(opt(v, op, n)).s);
    if (wait && op->attr.i != 0 && op->attr.i != 1)
        return fail(v, op, "waits in every thread (0) or in the one that issues copies (1), got %" PRId64, op->attr.i);
    return true;
}

/* ---- warp specialization (passes/warpspec.c) ------------------------------------------ */
static bool setmaxnreg_ok(int64_t r) { return r >= 24 && r <= 256 && r % 8 == 0; }

/* What the producer's one thread may run: scalar arithmetic, loops and ifs of it, and
 * the copies with their empty-slot waits. */
static bool producer_op_ok(const IrFunc *f, const IrOp *op)
{
    if (op->code == IR_OP_TMA_COPY || op->code == IR_OP_YIELD) return true;
    if (op->code == IR_OP_TMA_WAIT) return op->attr.i == 1;
    if (op->code == IR_OP_FOR || op->code == IR_OP_IF) {
        for (uint32_t r = 0; r < op->nregions; r++)
            for (const IrOp *o = op->regions[r].first; o; o = o->next)
                if (!producer_op_ok(f, o)) return false;
        for (uint32_t i = 0; i < op->nresults; i++)   /* a persistent walk's carried count */
            if (op->code != IR_OP_FOR || ir_value_type(f, op->results[i])->rank) return false;
        return true;
    }
    if (!(ir_op_info[op->code].flags & IR_P)) return false;
    for (uint32_t i = 0; i < op->nresults; i++)
        if (ir_value_type(f, op->results[i])->rank) return false;
    return true;
}

/* Block blk of op is scalar ops and for loops (at most `max` of them), then yield (the
 * copies in the loops); the number of loops, or 0 after a diagnostic. */
static int producer_loops_of(Verifier *v, const IrOp *op, const IrBlock *blk, int max, const char *what)
{
    int n = 0;
    for (const IrOp *o = blk->first; o; o = o->next) {
        if (o->code == IR_OP_IF || (o->code == IR_OP_FOR && n == max))
            return fail(v, o, "%s is scalar ops, %s, then yield", what, max == 1 ? "one for loop" : "for loops"), 0;
        if (o->code == IR_OP_FOR) n++;
        if ((o->code == IR_OP_TMA_COPY || o->code == IR_OP_TMA_WAIT) && !n)
            return fail(v, o, "a producer's copies are in its for loop"), 0;
    }
    /* a persistent walk's tile loop yields its carried count (passes/persistent.c) */
    if (!n || !blk->last || blk->last->code != IR_OP_YIELD || blk->last->noperands != op->nresults)
        return fail(v, op, "%s is scalar ops, %s, then yield", what, max == 1 ? "one for loop" : "for loops"), 0;
    return n;
}

/* A producer's loop of copies: scalar ops and the copies, no loops or ifs. */
static bool copy_loop_ok(Verifier *v, const IrOp *loop)
{
    for (const IrOp *o = loop->regions[0].first; o; o = o->next)
        if (o->code == IR_OP_FOR || o->code == IR_OP_IF)
            return fail(v, o, "a producer's copy loop holds scalar ops and the copies only");
    return true;
}

/* One producer per kernel, in its body, after ops that every thread may run (pure ones,
 * the buffers and their barriers, the cluster's barrier); its region: scalar ops, one
 * `for` of the copies, `yield`. */
static bool check_producer(Verifier *v, const IrOp *op)
{
    int64_t p = op->attr.i & 0xffff, c = op->attr.i >> 16;
    if (!setmaxnreg_ok(p) || !setmaxnreg_ok(c))
        return fail(v, op, "register counts must be multiples of 8 from 24 to 256, got %" PRId64 " and %" PRId64, p, c);
    if (op->parent != &v->f->body || v->f->kind != IR_FUNC_KERNEL) return fail(v, op, "may only stand in a kernel's body");
    for (const IrOp *o = v->f->body.first; o != op; o = o->next) {
        unsigned fl = ir_op_info[o->code].flags;
        if (!(fl & IR_P) && o->code != IR_OP_LOCAL_ALLOC && o->code != IR_OP_MBARRIER_INIT && o->code != IR_OP_CLUSTER_SYNC)
            return fail(v, op, "must come before every op but pure ones, local_alloc, mbarrier_init and cluster_sync; '%s' at %u:%u "
                        "comes before it", ir_op_info[o->code].text, o->loc.line, o->loc.col);
    }
    for (const IrOp *o = op->next; o; o = o->next)
        if (o->code == IR_OP_PRODUCER) return fail(v, o, "a kernel has at most one producer");
    const IrBlock *blk = &op->regions[0];
    if (blk->nargs) return fail(v, op, "the region takes no arguments");
    for (const IrOp *o = blk->first; o; o = o->next)
        if (!producer_op_ok(v->f, o))
            return fail(v, o, "a producer region holds scalar arithmetic, loops, tma_wait 1 and tma_copy only");
    /* scalars and loops, yield (one loop per ring loop of the consumers, in their order,
     * passes/warpspec.c); a loop's body: the copies, or (a persistent kernel's tiles,
     * passes/persistent.c) scalars, the loops of the copies, yield */
    if (!producer_loops_of(v, op, blk, 64, "a producer region")) return false;
    for (const IrOp *loop = blk->first; loop; loop = loop->next) {
        if (loop->code != IR_OP_FOR) continue;
        bool tiles = false;
        for (const IrOp *o = loop->regions[0].first; o; o = o->next) tiles |= o->code == IR_OP_FOR;
        if (!tiles) {
            if (!copy_loop_ok(v, loop)) return false;
            continue;
        }
        if (!producer_loops_of(v, loop, &loop->regions[0], 64, "a producer's tile loop")) return false;
        for (const IrOp *cl = loop->regions[0].first; cl; cl = cl->next)
            if (cl->code == IR_OP_FOR && !copy_loop_ok(v, cl)) return false;
    }
    return true;
}

/* ---- dispatch ------------------------------------------------------------------------- */
static bool is_float_t(const IrType *t) { return is_float(t); }
static bool is_int_t(const IrType *t) { return is_int(t); }
static bool is_numeric_t(const IrType *t) { return is_numeric(t); }

/* ---- layouts (ir/layout.h) ---------------------------------------------------------- */
/* A value's layout fits its type and the kernel; counts tiles with and without one. */
static bool check_value_layout(Verifier *v, const IrOp *op, const IrType *t)
{
    if (t->rank == 0) {
        if (t->layout) return fail(v, op, "a scalar has no layout, got %s", tstr(t).s);
        return true;
    }
    if (!t->layout) {
        v->bare++;
        return true;
    }
    v->laid_out++;
    char why[160];
    if (!ir_layout_check(t->layout, t->rank, ir_func_warps(v->f), why, sizeof why))
        return fail(v, op, "has an invalid layout: %s, in %s", why, tstr(t).s);
    return true;
}

/* A dot on mma.sync takes its operands in its layout's dot_operand layouts, and the
 * layout names the instruction for its element types (ir_mma_sync_k). */
static bool check_mma_dot(Verifier *v, const IrOp *op)
{
    const IrLayout *m = rty(v, op)->layout;
    for (uint32_t i = 0; i < 2; i++) {
        const IrLayout *l = opt(v, op, i)->layout;
        if (!l || l->kind != IR_LAYOUT_DOT_OPERAND || l->op != (int32_t)i || l->parent != m)
            return fail(v, op, "in an mma layout takes operand %u in its dot_operand layout (op = %u), got %s", i, i,
                        tstr(opt(v, op, i)).s);
    }
    IrElem in = opt(v, op, 0)->elem, acc = rty(v, op)->elem;
    if (ir_mma_sync_k(in, acc, (int)op->attr.i) != m->instr[2])
        return fail(v, op, "of %s (precision %s) into %s has no mma.sync with instr = [16, 8, %d]", ir_elem_name(in),
                    op->attr.i >= 0 && op->attr.i <= IR_PREC_IEEE ? ir_precision_names[op->attr.i] : "?",
                    ir_elem_name(acc), m->instr[2]);
    return true;
}

/* A dot on wgmma (mma version 3): f16 or bf16 (K = 16) or f8 (K = 32) into f32, each
 * operand either in its dot_operand layout (until the shared pass makes it a view) or a
 * view of a stage in an NVMMA shared layout; an f8 view K-major (its contiguous axis,
 * order[0], the operand's K axis: wgmma transposes only 16-bit operands). */
static bool check_wgmma_dot(Verifier *v, const IrOp *op)
{
    const IrLayout *m = rty(v, op)->layout;
    IrElem in = opt(v, op, 0)->elem;
    if (ir_wgmma_k(in, rty(v, op)->elem) != m->instr[2] || m->instr[1] != rty(v, op)->shape[1])
        return fail(v, op, "on wgmma takes f16 or bf16 (instr = [64, N, 16]) or f8 (instr = [64, N, 32]) into f32, "
                    "N the result's columns; got %s into %s", ir_elem_name(in), tstr(rty(v, op)).s);
    for (uint32_t i = 0; i < 2; i++) {
        const IrLayout *l = opt(v, op, i)->layout;
        bool reg = l && l->kind == IR_LAYOUT_DOT_OPERAND && l->op == (int32_t)i && l->parent == m;
        bool view = l && l->kind == IR_LAYOUT_SHARED && l->swizzle_bytes;
        if (!reg && !view)
            return fail(v, op, "in an mma layout of version 3 (wgmma) takes operand %u in its dot_operand layout or as "
                        "a view of a stage in an NVMMA shared layout, got %s", i, tstr(opt(v, op, i)).s);
        if (view && ir_elem_bytes(in) == 1 && l->order[0] != (i == 0 ? 1 : 0))
            return fail(v, op, "on wgmma reads 8-bit operand %u K-major only (order[0] = %u), got %s", i, i == 0 ? 1 : 0,
                        tstr(opt(v, op, i)).s);
    }
    return true;
}

/* Element-wise ops compute each element where it is held: operands and result share a
 * layout. convert_layout moves a tile between layouts and changes nothing else. */
static bool check_layouts(Verifier *v, const IrOp *op)
{
    for (uint32_t i = 0; i < op->nresults; i++)
        if (!check_value_layout(v, op, ir_value_type(v->f, op->results[i]))) return false;
    const unsigned fl = ir_op_info[op->code].flags;
    if ((fl & IR_E) && op->nresults == 1)
        for (uint32_t i = 0; i < op->noperands; i++)
            if (opt(v, op, i)->rank && opt(v, op, i)->layout != rty(v, op)->layout)
                return fail(v, op, "is element-wise: operand %u must have the result's layout, got %s for %s", i,
                            tstr(opt(v, op, i)).s, tstr(rty(v, op)).s);
    if (op->code == IR_OP_DOT && rty(v, op)->layout && rty(v, op)->layout->kind == IR_LAYOUT_MMA)
        return rty(v, op)->layout->version == 2 ? check_mma_dot(v, op) : check_wgmma_dot(v, op);
    if (op->code == IR_OP_CONVERT_LAYOUT) {
        const IrType *a = opt(v, op, 0), *r = rty(v, op);
        if (!same_shape(a, r) || !same_elem(a, r) || !a->layout || !r->layout)
            return fail(v, op, "keeps shape and element type and goes between layouts, got %s to %s", tstr(a).s,
                        tstr(r).s);
    }
    return true;
}

static bool check_op_rules(Verifier *v, const IrOp *op)
{
    switch (op->code) {
    case IR_OP_CONST: return check_const(v, op);
    case IR_OP_PROGRAM_ID: case IR_OP_NUM_PROGRAMS: return check_program_id(v, op);
    case IR_OP_LAUNCHED_PROGRAMS:
        if (rty(v, op)->rank || rty(v, op)->elem != IR_I32) return fail(v, op, "result must be i32, got %s", tstr(rty(v, op)).s);
        return v->f->kind == IR_FUNC_KERNEL ? true : fail(v, op, "may only stand in a kernel");
    case IR_OP_ARANGE: return check_arange(v, op);
    case IR_OP_SPLAT: return check_splat(v, op);
    case IR_OP_BROADCAST: return check_broadcast(v, op);
    case IR_OP_EXPAND_DIMS: return check_expand_dims(v, op);
    case IR_OP_RESHAPE: return check_reshape(v, op);
    case IR_OP_EXTRACT: return check_extract(v, op);
    case IR_OP_TRANS: return check_trans(v, op);
    case IR_OP_CONVERT: return check_convert(v, op);
    case IR_OP_BITCAST: return check_bitcast(v, op);
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_REM:
    case IR_OP_MINIMUM: case IR_OP_MAXIMUM: case IR_OP_NEG: case IR_OP_ABS:
        return elementwise(v, op, is_numeric_t, "numbers");
    case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR: case IR_OP_SHL: case IR_OP_SHR: case IR_OP_NOT:
        return elementwise(v, op, is_int_t, "integers");
    case IR_OP_POW: case IR_OP_FMA: case IR_OP_EXP: case IR_OP_EXP2: case IR_OP_LOG: case IR_OP_LOG2:
    case IR_OP_SQRT: case IR_OP_RSQRT: case IR_OP_SIN: case IR_OP_COS: case IR_OP_TANH: case IR_OP_ERF:
    case IR_OP_FLOOR: case IR_OP_CEIL: case IR_OP_SIGMOID:
        return elementwise(v, op, is_float_t, "floats");
    case IR_OP_CMP: return check_cmp(v, op);
    case IR_OP_SELECT: return check_select(v, op);
    case IR_OP_ADDPTR: return check_addptr(v, op);
    case IR_OP_LOAD: return check_load(v, op);
    case IR_OP_BLOCK_LOAD: return check_cluster(v, op) && check_block_load(v, op);
    case IR_OP_CLUSTER_RANK: case IR_OP_CLUSTER_SYNC: return check_cluster(v, op);
    case IR_OP_BLOCK_STORE: return check_block_store(v, op);
    case IR_OP_STORE: return check_store(v, op);
    case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN: case IR_OP_ATOMIC_XCHG:
    case IR_OP_ATOMIC_AND: case IR_OP_ATOMIC_OR: case IR_OP_ATOMIC_XOR: case IR_OP_ATOMIC_CAS:
        return check_atomic(v, op);
    case IR_OP_BARRIER: return true;
    case IR_OP_DOT: return check_dot(v, op);
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
        return check_reduce(v, op);
    case IR_OP_XOR_SUM:
        if (!is_int(opt(v, op, 0))) return fail(v, op, "needs integers, got %s", tstr(opt(v, op, 0)).s);
        return check_reduce(v, op);
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: return check_scan(v, op);
    case IR_OP_REDUCE: case IR_OP_SCAN: return check_region_reduce(v, op);
    case IR_OP_RAND: case IR_OP_RANDN: return check_rand(v, op);
    case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS: return check_hint(v, op);
    case IR_OP_CONVERT_LAYOUT: return true;   /* check_layouts */
    case IR_OP_LOCAL_ALLOC: return check_local_alloc(v, op);
    case IR_OP_ASYNC_COPY: return check_async_copy(v, op);
    case IR_OP_LOCAL_LOAD: return check_local_load(v, op);
    case IR_OP_LOCAL_STORE: return check_local_store(v, op);
    case IR_OP_FENCE_ASYNC: return true;
    case IR_OP_MBARRIER_INIT: return check_mbarrier_init(v, op);
    case IR_OP_TMA_COPY: return check_cluster(v, op) && check_tma_copy(v, op);
    case IR_OP_TMA_STORE: return check_tma_store(v, op);
    case IR_OP_TMA_STORE_WAIT: return true;
    case IR_OP_DOT_WAIT: return check_dot_wait(v, op);
    case IR_OP_TMA_WAIT: return check_tma_wait(v, op);
    case IR_OP_MBARRIER_ARRIVE: return check_cluster(v, op) && check_tma_wait(v, op);
    case IR_OP_PRODUCER: return check_producer(v, op);
    case IR_OP_TURN: return check_turn(v, op);
    case IR_OP_ASYNC_COMMIT: case IR_OP_ASYNC_WAIT: return op->attr.i >= 0 ? true : fail(v, op, "counts groups: at least 0");
    case IR_OP_CHECK_BOUNDS: return check_check_bounds(v, op);
    case IR_OP_ASSERT: return check_assert(v, op);
    case IR_OP_PRINT: return op->attr.s ? true : fail(v, op, "needs a message");
    case IR_OP_FOR:
        if (op->attr.i && (op->attr.i != 1 || !v->f->pingpong || op->nresults))
            return fail(v, op, "pingpong takes turns of a pingpong kernel's warpgroups, without carried values");
        return check_for(v, op);
    case IR_OP_IF: return check_if(v, op);
    case IR_OP_WHILE: return check_while(v, op);
    case IR_OP_YIELD: case IR_OP_CONDITION: case IR_OP_RETURN: return check_terminator(v, op);
    default: return fail(v, op, "is not a known op");
    }
}

/* The counts ops.def fixes, and result shapes, before any rule looks at types. */
static bool check_structure(Verifier *v, const IrOp *op)
{
    if (op->code >= IR_NUM_OPS) return fail(v, op, "is not a known op");
    const IrOpInfo *in = &ir_op_info[op->code];
    if (in->nops >= 0 && op->noperands != (uint32_t)in->nops)
        return fail(v, op, "takes %d operand(s), got %u", in->nops, op->noperands);
    if (in->nres >= 0 && op->nresults != (uint32_t)in->nres)
        return fail(v, op, "has %d result(s), got %u", in->nres, op->nresults);
    if (op->nregions != (uint32_t)in->nregions) return fail(v, op, "has %d region(s), got %u", in->nregions, op->nregions);
    for (uint32_t i = 0; i < op->nresults; i++)
        if (!shape_ok(ir_value_type(v->f, op->results[i])))
            return fail(v, op, "result type %s: tile dims must be powers of two, at most %d elements",
                        tstr(ir_value_type(v->f, op->results[i])).s, IR_MAX_TILE_ELEMS);
    return true;
}

/* SSA dominance: every operand is defined earlier in this block or an enclosing one. */
static bool check_dominance(Verifier *v, const IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++) {
        IrValue x = op->operands[i];
        if (x >= v->f->nvalues) return fail(v, op, "operand %u is not a value of the function", i);
        if (!v->visible[x]) return fail(v, op, "operand %u is used where its definition does not dominate", i);
    }
    return true;
}

static void verify_block(Verifier *v, const IrBlock *blk);

static void verify_op(Verifier *v, const IrOp *op)
{
    bool ok = check_structure(v, op) && check_dominance(v, op);
    for (uint32_t r = 0; ok && r < op->nregions; r++) verify_block(v, &op->regions[r]);
    if (ok && check_op_rules(v, op)) check_layouts(v, op);
    for (uint32_t i = 0; i < op->nresults; i++)
        if (op->results[i] < v->f->nvalues) v->visible[op->results[i]] = true;
}

/* Visits a block with its arguments in scope, then takes its values out of scope. */
static void verify_block(Verifier *v, const IrBlock *blk)
{
    for (uint32_t i = 0; i < blk->nargs; i++) {
        if (!shape_ok(ir_value_type(v->f, blk->args[i]))) {
            diag_error(v->diags, blk->parent_op ? blk->parent_op->loc : v->f->loc,
                       "verifier: argument type %s: tile dims must be powers of two, at most %d elements",
                       tstr(ir_value_type(v->f, blk->args[i])).s, IR_MAX_TILE_ELEMS);
            v->ok = false;
        }
        if (blk->parent_op) check_value_layout(v, blk->parent_op, ir_value_type(v->f, blk->args[i]));
        v->visible[blk->args[i]] = true;
    }
    for (const IrOp *op = blk->first; op; op = op->next) verify_op(v, op);
    for (uint32_t i = 0; i < blk->nargs; i++) v->visible[blk->args[i]] = false;
    for (const IrOp *op = blk->first; op; op = op->next)
        for (uint32_t i = 0; i < op->nresults; i++)
            if (op->results[i] < v->f->nvalues) v->visible[op->results[i]] = false;
}

/* Every launch key of a kernel in its range (launch.def): the IR parser and the passes
 * store what they are given. */
static void verify_launch(Verifier *v, const IrFunc *f)
{
    for (int k = 0; f->kind == IR_FUNC_KERNEL && k < IR_NUM_LAUNCH_KEYS; k++) {
        int x = ir_launch_get(f, (IrLaunchKey)k);
        if (ir_launch_valid((IrLaunchKey)k, x)) continue;
        diag_error(v->diags, f->loc, "verifier: kernel '@%s': %s, got %d", f->name, ir_launch_info[k].rule, x);
        v->ok = false;
    }
}

/* A resource plan (ir/plan.h) agrees with itself and the kernel: its threads are its
 * warpgroups', its regions lie in its shared memory, on their alignment, and each
 * tma op has a use of the plan's maps. */
static bool plan_fail(Verifier *v, const IrFunc *f, const char *what)
{
    diag_error(v->diags, f->loc, "verifier: kernel '@%s': its plan's %s", f->name, what);
    return v->ok = false;
}

static void count_tma_ops(IrOp *op, void *ud) { *(uint32_t *)ud += op->code == IR_OP_TMA_COPY || op->code == IR_OP_TMA_STORE; }

static void verify_plan(Verifier *v, const IrFunc *f)
{
    const IrPlan *p = f->plan;
    if (!p) return;
    if (p->threads != p->groups * p->group_threads + p->producer_threads || !p->groups ||
        p->group_threads != (uint32_t)ir_func_warps(f) * 32 || p->threads > IR_MAX_BLOCK_THREADS)
        plan_fail(v, f, "threads are not its warpgroups' (groups x group_threads + producer_threads, at most 1024)");
    for (uint32_t i = 0; i < p->nregions; i++) {
        const IrSmemRegion *r = &p->regions[i];
        if (!r->align || (r->align & (r->align - 1)) || r->at % r->align || (uint64_t)r->at + r->bytes > p->shared_bytes)
            plan_fail(v, f, "map has a region off its alignment or past the shared memory");
    }
    if (p->buffers_at % (p->buffer_align ? p->buffer_align : 1) || p->shared_bytes % 16)
        plan_fail(v, f, "buffer area or shared memory is not aligned");
    uint32_t ntma = 0;
    ir_walk((IrBlock *)&f->body, count_tma_ops, &ntma);
    if (p->ntma && p->nuses != ntma) plan_fail(v, f, "tma_uses do not name every tma op of the kernel");
    for (uint32_t i = 0; i < p->nuses; i++)
        for (uint32_t j = 0; j < p->uses[i].n; j++)
            if (p->uses[i].map[j] >= p->ntma || p->uses[i].param[j] >= f->body.nargs)
                plan_fail(v, f, "tma_uses name a map or parameter it does not have");
}

bool ir_verify_func(const IrFunc *f)
{
    Verifier v = {f, ir_ctx_diags(f->module->ctx), true, NULL, 0, 0};
    v.visible = tl_calloc(f->nvalues ? f->nvalues : 1, sizeof *v.visible);
    if (!v.visible) tl_oom();
    if (!f->body.last || f->body.last->code != IR_OP_RETURN) {
        diag_error(v.diags, f->loc, "verifier: function '@%s' must end in 'return'", f->name);
        v.ok = false;
    }
    verify_launch(&v, f);
    verify_plan(&v, f);
    verify_block(&v, &f->body);
    if (v.laid_out && v.bare) {
        diag_error(v.diags, f->loc, "verifier: function '@%s' has %u tiles with layouts and %u without: after the "
                   "layout pass every tile has one", f->name, v.laid_out, v.bare);
        v.ok = false;
    }
    tl_free(v.visible);
    return v.ok;
}

bool ir_verify_module(const IrModule *m)
{
    bool ok = true;
    for (uint32_t i = 0; i < m->nfuncs; i++) {
        const IrFunc *f = m->funcs[i];
        ok &= ir_verify_func(f);
        if (f->grid && (f->grid->kind != IR_FUNC_GRID || f->grid->body.nargs != f->body.nargs - ir_func_hidden_params(f))) {
            diag_error(ir_ctx_diags(m->ctx), f->loc, "verifier: the grid function of '@%s' must take its parameters", f->name);
            ok = false;
        }
    }
    return ok;
}
