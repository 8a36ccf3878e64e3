/* Reductions (sum max min argmax argmin) and scans (cumsum cumprod).
 *
 * A reduction along axis a runs in three stages, as in Triton: each thread combines
 * its own elements along a (in coordinate order), lanes of a warp that hold different
 * parts of the axis combine by butterfly shuffles (shfl.sync.bfly; afterwards every
 * such lane holds the result), and warps that split the axis exchange partials through
 * shared memory (each thread combines all of them in warp order, so every thread ends
 * with the same value). The result then sits in the source layout with axis a
 * collapsed, and cg_convert moves it to the canonical layout of the result shape.
 * Lanes or warps that hold copies (tiles smaller than the program) take no part, so
 * nothing is counted twice. Sums of f16/bf16 accumulate in f32, as in the interpreter;
 * the order of the additions differs from its sequential one (float sums may differ in
 * the last bits). argmax/argmin carry (value, index) and prefer the first index on
 * ties and the first NaN, exactly as the interpreter.
 *
 * Scans go through shared memory: one thread scans each line sequentially, in the
 * interpreter's order and accumulator type, so results are bit-for-bit equal. That is
 * slow for long single rows and is the first thing to speed up (warp scans). */
#include "codegen/cg_internal.h"

typedef struct Red {
    IrOpcode code;
    IrElem e;                    /* the accumulator's element type */
    bool arg;                    /* argmax / argmin: an index travels with the value */
} Red;

typedef struct Pair {
    LLVMValueRef v, i;
} Pair;

static IrElem acc_elem(IrElem e)
{
    return e == IR_F16 || e == IR_BF16 || e == IR_F8E4M3 || e == IR_F8E5M2 ? IR_F32 : e;
}

static LLVMValueRef better(Cg *c, const Red *r, LLVMValueRef x, LLVMValueRef y)
{
    bool mx = r->code == IR_OP_ARGMAX;
    if (!ir_elem_is_float(r->e)) {
        bool s = ir_elem_is_signed(r->e);
        return LLVMBuildICmp(c->b, mx ? (s ? LLVMIntSGT : LLVMIntUGT) : (s ? LLVMIntSLT : LLVMIntULT), x, y, "");
    }
    LLVMValueRef xn = LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""), yn = LLVMBuildFCmp(c->b, LLVMRealUNO, y, y, "");
    LLVMValueRef gt = LLVMBuildFCmp(c->b, mx ? LLVMRealOGT : LLVMRealOLT, x, y, "");
    return LLVMBuildOr(c->b, LLVMBuildAnd(c->b, xn, LLVMBuildNot(c->b, yn, ""), ""), gt, "");
}

static LLVMValueRef same(Cg *c, const Red *r, LLVMValueRef x, LLVMValueRef y)
{
    if (!ir_elem_is_float(r->e)) return LLVMBuildICmp(c->b, LLVMIntEQ, x, y, "");
    LLVMValueRef bothnan = LLVMBuildAnd(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""),
                                        LLVMBuildFCmp(c->b, LLVMRealUNO, y, y, ""), "");
    return LLVMBuildOr(c->b, LLVMBuildFCmp(c->b, LLVMRealOEQ, x, y, ""), bothnan, "");
}

static Pair combine(Cg *c, const Red *r, Pair a, Pair b)
{
    Pair out = {0};
    switch (r->code) {
    case IR_OP_SUM:
        out.v = ir_elem_is_float(r->e) ? LLVMBuildFAdd(c->b, a.v, b.v, "") : LLVMBuildAdd(c->b, a.v, b.v, "");
        return out;
    case IR_OP_MAX: case IR_OP_MIN: {
        bool mx = r->code == IR_OP_MAX;
        if (ir_elem_is_float(r->e)) {
            out.v = cg_fmaximum(c, a.v, b.v, mx);
        } else {
            bool s = ir_elem_is_signed(r->e);
            LLVMTypeRef t = LLVMTypeOf(a.v);
            LLVMValueRef args[2] = {a.v, b.v};
            out.v = cg_intrinsic(c, mx ? (s ? "llvm.smax" : "llvm.umax") : (s ? "llvm.smin" : "llvm.umin"), &t, 1, args, 2);
        }
        return out;
    }
    default: {
        LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntSLT, b.i, a.i, "");
        LLVMValueRef take = LLVMBuildOr(c->b, better(c, r, b.v, a.v),
                                        LLVMBuildAnd(c->b, same(c, r, b.v, a.v), first, ""), "");
        out.v = LLVMBuildSelect(c->b, take, b.v, a.v, "");
        out.i = LLVMBuildSelect(c->b, take, b.i, a.i, "");
        return out;
    }
    }
}

/* ---- shuffles ------------------------------------------------------------------------- */

static LLVMValueRef shfl32(Cg *c, LLVMValueRef x, int mask)
{
    LLVMValueRef args[4] = {cg_i32c(c, -1), x, cg_i32c(c, mask), cg_i32c(c, 31)};
    return cg_intrinsic(c, "llvm.nvvm.shfl.sync.bfly.i32", NULL, 0, args, 4);
}

/* Any scalar of up to 64 bits, through one or two 32-bit shuffles. */
static LLVMValueRef shfl_xor(Cg *c, LLVMValueRef x, int mask)
{
    LLVMTypeRef t = LLVMTypeOf(x), i32 = cg_i32(c);
    unsigned bits = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t)
                  : LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 64 : 32;
    LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, bits);
    LLVMValueRef xi = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? x : LLVMBuildBitCast(c->b, x, it, "");
    LLVMValueRef r;
    if (bits <= 32) {
        r = shfl32(c, bits < 32 ? LLVMBuildZExt(c->b, xi, i32, "") : xi, mask);
        if (bits < 32) r = LLVMBuildTrunc(c->b, r, it, "");
    } else {
        LLVMValueRef lo = shfl32(c, LLVMBuildTrunc(c->b, xi, i32, ""), mask);
        LLVMValueRef hi = shfl32(c, LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, xi, cg_int(c, it, 32), ""), i32, ""), mask);
        r = LLVMBuildOr(c->b, LLVMBuildZExt(c->b, lo, it, ""),
                        LLVMBuildShl(c->b, LLVMBuildZExt(c->b, hi, it, ""), cg_int(c, it, 32), ""), "");
    }
    return it == t ? r : LLVMBuildBitCast(c->b, r, t, "");
}

/* ---- the three stages ------------------------------------------------------------------- */

static int32_t stride_of(const int32_t *v, int rank, int d)
{
    int32_t s = 1;
    for (int e = d + 1; e < rank; e++) s *= v[e];
    return s;
}

/* The thread's partials, one per combination of the other axes' local indices (the
 * element order of the collapsed layout). */
static Pair *in_thread(Cg *c, const Red *r, const CgLayout *l, int a, CgVal x, IrElem in, uint32_t *nrows)
{
    uint32_t ea = (uint32_t)(l->spt[a] * l->reps[a]), n = x.n / ea;
    uint32_t inner = 1;
    for (int d = a + 1; d < l->rank; d++) inner *= (uint32_t)(l->spt[d] * l->reps[d]);
    Pair *p = arena_alloc(c->arena, n * sizeof *p);
    for (uint32_t row = 0; row < n; row++) {
        uint32_t base = (row / inner) * ea * inner + row % inner;
        for (uint32_t j = 0; j < ea; j++) {
            uint32_t k = base + j * inner;
            Pair e = {cg_convert_scalar(c, x.v[k], in, r->e), NULL};
            if (r->arg) {
                LLVMValueRef co[IR_MAX_RANK];
                cg_layout_coords(c, l, k, co);
                e.i = co[a];
            }
            p[row] = j == 0 ? e : combine(c, r, p[row], e);
        }
    }
    *nrows = n;
    return p;
}

static void across_lanes(Cg *c, const Red *r, const CgLayout *l, int a, Pair *p, uint32_t n)
{
    int32_t nl = l->tpw[a] < l->shape[a] / l->spt[a] ? l->tpw[a] : l->shape[a] / l->spt[a];
    int32_t ls = stride_of(l->tpw, l->rank, a);
    for (int32_t m = 1; m < nl; m *= 2)
        for (uint32_t k = 0; k < n; k++) {
            Pair o = {shfl_xor(c, p[k].v, m * ls), r->arg ? shfl_xor(c, p[k].i, m * ls) : NULL};
            p[k] = combine(c, r, p[k], o);
        }
}

/* Row index (in the result shape) of the thread's partial k. */
static LLVMValueRef row_index(Cg *c, const CgLayout *collapsed, int a, uint32_t k)
{
    LLVMValueRef co[IR_MAX_RANK], lin = cg_i32c(c, 0);
    cg_layout_coords(c, collapsed, k, co);
    for (int d = 0; d < collapsed->rank; d++)
        if (d != a) lin = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, lin, cg_i32c(c, collapsed->shape[d]), ""), co[d], "");
    return lin;
}

static void across_warps(Cg *c, const Red *r, const CgLayout *l, const CgLayout *cl, int a, Pair *p, uint32_t n)
{
    int32_t span = l->spt[a] * l->tpw[a];
    int32_t nw = l->shape[a] / span < 1 ? 1 : l->shape[a] / span;
    if (nw > l->wpc[a]) nw = l->wpc[a];
    if (nw <= 1) return;
    LLVMTypeRef vt = LLVMTypeOf(p[0].v), i32 = cg_i32(c);
    uint32_t rows = 1, ibase;
    for (int d = 0; d < l->rank; d++) rows *= d == a ? 1 : (uint32_t)l->shape[d];
    ibase = rows * (uint32_t)nw * 8;
    LLVMValueRef w = LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, c->warp, cg_i32c(c, stride_of(l->wpc, l->rank, a)), ""),
                                   cg_i32c(c, nw), "");
    LLVMValueRef *slot = arena_alloc(c->arena, n * sizeof *slot);
    cg_barrier(c);
    for (uint32_t k = 0; k < n; k++) {
        slot[k] = LLVMBuildMul(c->b, row_index(c, cl, a, k), cg_i32c(c, nw), "");
        LLVMValueRef at = LLVMBuildAdd(c->b, slot[k], w, "");
        LLVMBuildStore(c->b, p[k].v, cg_smem_ptr(c, at, vt, 0));
        if (r->arg) LLVMBuildStore(c->b, p[k].i, cg_smem_ptr(c, at, i32, ibase));
    }
    cg_barrier(c);
    for (uint32_t k = 0; k < n; k++)
        for (int32_t j = 0; j < nw; j++) {
            LLVMValueRef at = LLVMBuildAdd(c->b, slot[k], cg_i32c(c, j), "");
            Pair o = {LLVMBuildLoad2(c->b, vt, cg_smem_ptr(c, at, vt, 0), ""),
                      r->arg ? LLVMBuildLoad2(c->b, i32, cg_smem_ptr(c, at, i32, ibase), "") : NULL};
            p[k] = j == 0 ? o : combine(c, r, p[k], o);
        }
}

bool cg_reduce(Cg *c, const IrOp *op)
{
    const IrType *st = cg_type(c, op->operands[0]), *rt = cg_type(c, op->results[0]);
    int a = (int)op->attr.i;
    Red r = {op->code, acc_elem(st->elem), op->code == IR_OP_ARGMAX || op->code == IR_OP_ARGMIN};
    if (r.code == IR_OP_SUM && st->elem == IR_PTR) return cg_error(c, op, "cannot sum pointers");
    CgLayout l = cg_layout_of(c->warps, st), cl = l;
    cl.shape[a] = cl.spt[a] = cl.reps[a] = 1;
    uint32_t n;
    Pair *p = in_thread(c, &r, &l, a, cg_get(c, op->operands[0]), st->elem, &n);
    across_lanes(c, &r, &l, a, p, n);
    across_warps(c, &r, &l, &cl, a, p, n);
    CgVal part = cg_val_new(c, n);
    for (uint32_t k = 0; k < n; k++)
        part.v[k] = r.arg ? p[k].i : cg_convert_scalar(c, p[k].v, r.e, rt->elem);
    CgLayout to = cg_layout_of(c->warps, rt);
    int64_t w[IR_MAX_RANK] = {0};
    for (int j = 0; j < rt->rank; j++) w[j] = stride_of(rt->shape, rt->rank, j);
    cg_set(c, op->results[0], cg_convert(c, &cl, part, rt->elem, &to, w));
    return true;
}

/* ---- scans ------------------------------------------------------------------------------------ */

/* Scans line `line` in shared memory: len elements `inner` apart. */
static void scan_line(Cg *c, const IrOp *op, IrElem e, LLVMValueRef line, int32_t len, int32_t inner)
{
    LLVMTypeRef mt = cg_mem_type(c, e);
    IrElem ae = acc_elem(e);
    bool prod = op->code == IR_OP_CUMPROD, fl = ir_elem_is_float(e);
    LLVMValueRef outer = LLVMBuildUDiv(c->b, line, cg_i32c(c, inner), "");
    LLVMValueRef base = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, outer, cg_i32c(c, len * inner), ""),
                                     LLVMBuildURem(c->b, line, cg_i32c(c, inner), ""), "");
    LLVMValueRef init = fl ? LLVMConstReal(cg_elem_type(c, ae), prod ? 1.0 : 0.0)
                           : cg_int(c, cg_elem_type(c, ae), prod);
    CgLoop k;
    cg_loop_begin(c, &k, cg_i32c(c, 0), cg_i32c(c, len), &init, 1);
    LLVMValueRef at = cg_smem_ptr(c, LLVMBuildAdd(c->b, base, LLVMBuildMul(c->b, k.i, cg_i32c(c, inner), ""), ""), mt, 0);
    LLVMValueRef x = LLVMBuildLoad2(c->b, mt, at, "");
    if (e == IR_I1) x = LLVMBuildTrunc(c->b, x, cg_elem_type(c, e), "");
    x = cg_convert_scalar(c, x, e, ae);
    LLVMValueRef acc = k.carried[0];
    acc = fl ? (prod ? LLVMBuildFMul(c->b, acc, x, "") : LLVMBuildFAdd(c->b, acc, x, ""))
             : (prod ? LLVMBuildMul(c->b, acc, x, "") : LLVMBuildAdd(c->b, acc, x, ""));
    LLVMValueRef y = cg_convert_scalar(c, acc, ae, e);
    if (e == IR_I1) y = LLVMBuildZExt(c->b, y, mt, "");
    LLVMBuildStore(c->b, y, at);
    cg_loop_end(c, &k, cg_i32c(c, 1), &acc);
}

bool cg_scan(Cg *c, const IrOp *op)
{
    const IrType *t = cg_type(c, op->operands[0]);
    int a = (int)op->attr.i;
    CgLayout l = cg_layout_of(c->warps, t);
    CgVal x = cg_get(c, op->operands[0]);
    int32_t len = t->shape[a], inner = stride_of(t->shape, t->rank, a);
    int32_t lines = (int32_t)(ir_type_numel(t) / len);
    LLVMTypeRef mt = cg_mem_type(c, t->elem);
    cg_barrier(c);
    for (uint32_t k = 0; k < x.n; k++) {
        LLVMValueRef co[IR_MAX_RANK], v = x.v[k];
        cg_layout_coords(c, &l, k, co);
        if (t->elem == IR_I1) v = LLVMBuildZExt(c->b, v, mt, "");
        LLVMBuildStore(c->b, v, cg_smem_ptr(c, cg_linear(c, &l, co), mt, 0));
    }
    cg_barrier(c);
    CgLoop ln;
    cg_loop_begin(c, &ln, c->tid, cg_i32c(c, lines), NULL, 0);
    scan_line(c, op, t->elem, ln.i, len, inner);
    cg_loop_end(c, &ln, cg_i32c(c, c->threads), NULL);
    CgVal out = cg_val_new(c, x.n);
    cg_barrier(c);
    for (uint32_t k = 0; k < x.n; k++) {
        LLVMValueRef co[IR_MAX_RANK];
        cg_layout_coords(c, &l, k, co);
        LLVMValueRef v = LLVMBuildLoad2(c->b, mt, cg_smem_ptr(c, cg_linear(c, &l, co), mt, 0), "");
        out.v[k] = t->elem == IR_I1 ? LLVMBuildTrunc(c->b, v, cg_elem_type(c, IR_I1), "") : v;
    }
    cg_set(c, op->results[0], out);
    return true;
}
