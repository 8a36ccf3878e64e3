/* f32 (and f16/bf16/f8, computed in f32) division of a thread's elements by a divisor
 * that several of them share, as `e / sum(e, 0)` of a softmax: div.rn.f32 expands in
 * ptxas to a dozen instructions and a call to a slow path per element, which makes such
 * kernels issue bound. Instead the reciprocal y = RN(1/s) is computed once per divisor
 * (div.rn), and each element takes Markstein's correction
 *     q0 = RN(x*y),  r = fma(-q0, s, x) (exact),  q = fma(r, y, q0) = RN(x/s),
 * with q0's sign (r*y + q0 turns -0 into +0). It is exact when s and x lie in the
 * ranges of cg_fastdiv.h (no subnormal or overflowing quotient, an exact remainder;
 * tests/unit/test_fastdiv.c checks it against a C model). The op is emitted twice:
 * before any quotient, the thread checks its dividends and divisors, a warp vote
 * (vote.any) makes the choice uniform, and the warp runs either the fast version or
 * the plain div.rn version for all its elements. Checking x rather than q0 keeps the
 * register pressure of the two versions apart (a per-quotient fallback would keep
 * dividends and quotients live together and spill under cg_occupancy's 32-register
 * cap). The result is always the correctly rounded quotient that LANGUAGE.md promises
 * and the interpreter computes. */
#include "codegen/cg_internal.h"

typedef LLVMValueRef V;

static V fabs_(Cg *c, V x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return cg_intrinsic(c, "llvm.fabs", &t, 1, &x, 1);
}

static V in_range(Cg *c, V x, double lo, double hi)
{
    V a = fabs_(c, x);
    return LLVMBuildAnd(c->b, LLVMBuildFCmp(c->b, LLVMRealOGE, a, cg_f32c(c, lo), ""),
                        LLVMBuildFCmp(c->b, LLVMRealOLE, a, cg_f32c(c, hi), ""), "");
}

/* The index of the first element whose divisor is ds[k] (the LLVM values of one
 * divisor are shared: a broadcast scalar or a row's reduction). */
static uint32_t first_use(const V *ds, uint32_t k)
{
    uint32_t i = 0;
    while (ds[i] != ds[k]) i++;
    return i;
}

/* RN(x/s) from y = RN(1/s), inside the ranges of cg_fastdiv.h. */
static V markstein(Cg *c, V x, V s, V y)
{
    LLVMTypeRef ft = LLVMFloatTypeInContext(c->ctx);
    V q0 = LLVMBuildFMul(c->b, x, y, "");
    V a1[3] = {LLVMBuildFNeg(c->b, q0, ""), s, x};
    V r = cg_intrinsic(c, "llvm.fma", &ft, 1, a1, 3);
    V a2[3] = {r, y, q0};
    V q = LLVMBuildBitCast(c->b, cg_intrinsic(c, "llvm.fma", &ft, 1, a2, 3), cg_i32(c), "");
    V sign = LLVMBuildAnd(c->b, LLVMBuildBitCast(c->b, q0, cg_i32(c), ""), cg_i32c(c, INT32_MIN), "");
    q = LLVMBuildOr(c->b, LLVMBuildAnd(c->b, q, cg_i32c(c, INT32_MAX), ""), sign, "");   /* copysign: one lop3 */
    return LLVMBuildBitCast(c->b, q, ft, "");
}

/* The per-element data of one division op. */
typedef struct Div {
    uint32_t n;
    V *raw;                /* the divisors as the operand holds them (shared values) */
    V *x, *s, *y;          /* f32 dividends, divisors, reciprocals (NULL: not shared) */
} Div;

/* Computes y for the divisors used by more than one element, and `bad`: whether this
 * thread has a divisor or dividend outside the fast ranges. False when none is shared. */
static bool find_shared(Cg *c, const Div *d, V *bad_out)
{
    uint32_t *uses = arena_alloc(c->arena, d->n * sizeof *uses);
    bool any = false;
    for (uint32_t k = 0; k < d->n; k++) uses[k] = 0;
    for (uint32_t k = 0; k < d->n; k++) uses[first_use(d->raw, k)]++;
    V bad = LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 0, 0);
    for (uint32_t k = 0; k < d->n; k++) {
        uint32_t f = first_use(d->raw, k);
        d->y[k] = NULL;
        if (uses[f] < 2) continue;
        any = true;
        if (f == k) {
            d->y[k] = LLVMBuildFDiv(c->b, cg_f32c(c, 1.0), d->s[k], "");
            bad = LLVMBuildOr(c->b, bad, LLVMBuildNot(c->b, in_range(c, d->s[k], CG_FDIV_SMIN, CG_FDIV_SMAX), ""), "");
        }
        d->y[k] = d->y[f];
        d->s[k] = d->s[f];
        V zero = LLVMBuildFCmp(c->b, LLVMRealOEQ, d->x[k], cg_f32c(c, 0.0), "");
        V ok = LLVMBuildOr(c->b, zero, in_range(c, d->x[k], CG_FDIV_XMIN, CG_FDIV_XMAX), "");
        bad = LLVMBuildOr(c->b, bad, LLVMBuildNot(c->b, ok, ""), "");
    }
    *bad_out = bad;
    return any;
}

/* One version of the op, branching to join; its first block in *start. */
static LLVMBasicBlockRef version(Cg *c, const Div *d, bool fast, IrElem e, LLVMBasicBlockRef join,
                                 LLVMBasicBlockRef *start, V *q)
{
    *start = cg_block_new(c, fast ? "div.fast" : "div.rn");
    LLVMPositionBuilderAtEnd(c->b, *start);
    for (uint32_t k = 0; k < d->n; k++) {
        V f = fast && d->y[k] ? markstein(c, d->x[k], d->s[k], d->y[k]) : LLVMBuildFDiv(c->b, d->x[k], d->s[k], "");
        q[k] = cg_from_f32(c, f, e);
    }
    LLVMBasicBlockRef end = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, join);
    return end;
}

bool cg_fastdiv(Cg *c, const IrOp *op, CgVal *out)
{
    IrElem e = cg_type(c, op->operands[0])->elem;
    CgVal a = cg_get(c, op->operands[0]), b = cg_get(c, op->operands[1]);
    uint32_t n = out->n;
    if (n < 2 || !ir_elem_is_float(e) || e == IR_F64) return false;
    V *buf = arena_alloc(c->arena, 6 * n * sizeof *buf), *fast = buf + 4 * n, *slow = buf + 5 * n;
    Div d = {n, buf, buf + n, buf + 2 * n, buf + 3 * n};
    for (uint32_t k = 0; k < n; k++) {
        d.raw[k] = cg_at(b, k);
        d.x[k] = cg_to_f32(c, cg_at(a, k), e);
        d.s[k] = cg_to_f32(c, d.raw[k], e);
    }
    V bad;
    if (!find_shared(c, &d, &bad)) return false;
    V args[2] = {cg_i32c(c, -1), bad};
    V any = cg_intrinsic(c, "llvm.nvvm.vote.any.sync", NULL, 0, args, 2);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(c->b), join = cg_block_new(c, "div.join"), fast_bb, slow_bb;
    LLVMBasicBlockRef ends[2] = {version(c, &d, true, e, join, &fast_bb, fast), version(c, &d, false, e, join, &slow_bb, slow)};
    LLVMPositionBuilderAtEnd(c->b, from);
    LLVMBuildCondBr(c->b, any, slow_bb, fast_bb);
    LLVMPositionBuilderAtEnd(c->b, join);
    for (uint32_t k = 0; k < n; k++) {
        out->v[k] = LLVMBuildPhi(c->b, LLVMTypeOf(fast[k]), "");
        V vals[2] = {fast[k], slow[k]};
        LLVMAddIncoming(out->v[k], vals, ends, 2);
    }
    return true;
}
