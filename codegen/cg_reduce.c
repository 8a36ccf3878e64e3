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
 * Scans run in the same three stages: each thread scans its own runs along the axis,
 * an inclusive warp scan of the run totals (shfl.sync.up, log2 of the lanes steps)
 * gives each lane the total of the lanes before it, the warps' totals go through
 * shared memory (each thread combines those of the warps before its own), and each
 * element adds its prefix. Integer scans are exact (wrapping + and * associate); float
 * sums and products are reassociated (last bits differ from the interpreter's
 * sequential order). Where the layout keeps the axis inside one thread, the scan is
 * the interpreter's sequential one, bit for bit. */
#include <stdio.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"

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
    return cg_or(c->b, cg_and(c->b, xn, LLVMBuildNot(c->b, yn, "")), gt);
}

static LLVMValueRef same(Cg *c, const Red *r, LLVMValueRef x, LLVMValueRef y)
{
    if (!ir_elem_is_float(r->e)) return LLVMBuildICmp(c->b, LLVMIntEQ, x, y, "");
    LLVMValueRef bothnan = cg_and(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, x, x, ""),
                                  LLVMBuildFCmp(c->b, LLVMRealUNO, y, y, ""));
    return cg_or(c->b, LLVMBuildFCmp(c->b, LLVMRealOEQ, x, y, ""), bothnan);
}

static Pair combine(Cg *c, const Red *r, Pair a, Pair b)
{
    Pair out = {0};
    switch (r->code) {
    case IR_OP_XOR_SUM:
        out.v = LLVMBuildXor(c->b, a.v, b.v, "");
        return out;
    case IR_OP_SUM:
        out.v = ir_elem_is_float(r->e) ? LLVMBuildFAdd(c->b, a.v, b.v, "") : cg_add(c->b, a.v, b.v);
        return out;
    case IR_OP_MAX: case IR_OP_MIN: {
        bool mx = r->code == IR_OP_MAX;
        if (ir_elem_is_float(r->e)) {
            out.v = cg_fmaximum(c, a.v, b.v, mx);
        } else {
            out.v = cg_int_minmax(c, mx, ir_elem_is_signed(r->e), a.v, b.v);
        }
        return out;
    }
    default: {
        LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntSLT, b.i, a.i, "");
        LLVMValueRef take = cg_or(c->b, better(c, r, b.v, a.v),
                                  cg_and(c->b, same(c, r, b.v, a.v), first));
        out.v = LLVMBuildSelect(c->b, take, b.v, a.v, "");
        out.i = LLVMBuildSelect(c->b, take, b.i, a.i, "");
        return out;
    }
    }
}

/* ---- shuffles ------------------------------------------------------------------------- */

/* One 32-bit shuffle of the whole warp: kind "bfly" (lane ^ arg), "up" (lane - arg;
 * the lowest lanes keep their own value) or "idx" (lane arg). The last operand is the
 * clamp (31 for bfly and idx, 0 for up: no segments). */
static LLVMValueRef shfl32(Cg *c, LLVMValueRef x, const char *kind, LLVMValueRef arg)
{
    char name[48];
    snprintf(name, sizeof name, "llvm.nvvm.shfl.sync.%s.i32", kind);
    LLVMValueRef args[4] = {cg_i32c(c, -1), x, arg, cg_i32c(c, strcmp(kind, "up") ? 31 : 0)};
    return cg_intrinsic(c, name, NULL, 0, args, 4);
}

/* Any scalar of up to 64 bits, through one or two 32-bit shuffles. */
static LLVMValueRef shfl(Cg *c, LLVMValueRef x, const char *kind, LLVMValueRef arg)
{
    LLVMTypeRef t = LLVMTypeOf(x), i32 = cg_i32(c);
    LLVMTypeKind k = LLVMGetTypeKind(t);
    unsigned bits = k == LLVMIntegerTypeKind ? LLVMGetIntTypeWidth(t) : k == LLVMDoubleTypeKind ? 64
                  : k == LLVMHalfTypeKind || k == LLVMBFloatTypeKind ? 16 : 32;   /* 16: combines of f16/bf16 */
    LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, bits);
    LLVMValueRef xi = LLVMGetTypeKind(t) == LLVMIntegerTypeKind ? x : LLVMBuildBitCast(c->b, x, it, "");
    LLVMValueRef r;
    if (bits <= 32) {
        r = shfl32(c, bits < 32 ? LLVMBuildZExt(c->b, xi, i32, "") : xi, kind, arg);
        if (bits < 32) r = LLVMBuildTrunc(c->b, r, it, "");
    } else {
        LLVMValueRef lo = shfl32(c, LLVMBuildTrunc(c->b, xi, i32, ""), kind, arg);
        LLVMValueRef hi = shfl32(c, LLVMBuildTrunc(c->b, cg_lshr(c->b, xi, cg_int(c, it, 32)), i32, ""), kind, arg);
        r = cg_or(c->b, LLVMBuildZExt(c->b, lo, it, ""),
                  cg_shl(c->b, LLVMBuildZExt(c->b, hi, it, ""), cg_int(c, it, 32)));
    }
    return it == t ? r : LLVMBuildBitCast(c->b, r, t, "");
}

static LLVMValueRef shfl_xor(Cg *c, LLVMValueRef x, int mask) { return shfl(c, x, "bfly", cg_i32c(c, mask)); }

/* ---- the three stages ------------------------------------------------------------------- */

static int32_t stride_of(const int32_t *v, int rank, int d)
{
    int32_t s = 1;
    for (int e = d + 1; e < rank; e++) s *= v[e];
    return s;
}

/* The elements e[0..n) combined as a balanced tree that keeps their order (each combine
 * takes an earlier part, then a later one: argmax's first index on ties holds): log2 n
 * dependent steps instead of n - 1 (a row of attention's 64 x 64 scores is 16 elements
 * a thread: 4 steps of FMNMX, where the chain's 15 waited each on the last). max and
 * min come out the same; float sums already differ from the interpreter's order. */
static Pair combine_tree(Cg *c, const Red *r, Pair *e, uint32_t n)
{
    for (uint32_t w = 1; w < n; w *= 2)
        for (uint32_t i = 0; i + w < n; i += 2 * w) e[i] = combine(c, r, e[i], e[i + w]);
    return e[0];
}

/* The thread's partials, one per combination of the other axes' local indices (the
 * element order of the collapsed layout). */
static Pair *in_thread(Cg *c, const Red *r, const IrLayoutMap *l, int a, CgVal x, IrElem in, uint32_t *nrows)
{
    uint32_t ea = (uint32_t)(l->spt[a] * l->reps[a]), n = x.n / ea;
    uint32_t inner = 1;
    for (int d = a + 1; d < l->rank; d++) inner *= (uint32_t)(l->spt[d] * l->reps[d]);
    Pair *p = arena_alloc(c->arena, n * sizeof *p), *e = arena_alloc(c->arena, ea * sizeof *e);
    for (uint32_t row = 0; row < n; row++) {
        uint32_t base = (row / inner) * ea * inner + row % inner;
        for (uint32_t j = 0; j < ea; j++) {
            uint32_t k = base + j * inner;
            e[j] = (Pair){cg_convert_scalar(c, x.v[k], in, r->e), NULL};
            if (r->arg) {
                LLVMValueRef co[IR_MAX_RANK];
                cg_layout_coords(c, l, k, co);
                e[j].i = co[a];
            }
        }
        p[row] = combine_tree(c, r, e, ea);
    }
    *nrows = n;
    return p;
}

static void across_lanes(Cg *c, const Red *r, const IrLayoutMap *l, int a, Pair *p, uint32_t n)
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
static LLVMValueRef row_index(Cg *c, const IrLayoutMap *collapsed, int a, uint32_t k)
{
    LLVMValueRef co[IR_MAX_RANK], lin = cg_i32c(c, 0);
    cg_layout_coords(c, collapsed, k, co);
    for (int d = 0; d < collapsed->rank; d++)
        if (d != a) lin = cg_add(c->b, cg_mul(c->b, lin, cg_i32c(c, collapsed->shape[d])), co[d]);
    return lin;
}

/* Warps holding distinct parts of axis a (the rest hold copies). */
static int32_t warps_along(const IrLayoutMap *l, int a)
{
    int32_t span = l->spt[a] * l->tpw[a];
    int32_t nw = l->shape[a] / span < 1 ? 1 : l->shape[a] / span;
    return nw > l->wpc[a] ? l->wpc[a] : nw;
}

static void across_warps(Cg *c, const Red *r, const IrLayoutMap *l, const IrLayoutMap *cl, int a, Pair *p, uint32_t n)
{
    int32_t nw = warps_along(l, a);
    if (nw <= 1) return;
    LLVMTypeRef vt = LLVMTypeOf(p[0].v), i32 = cg_i32(c);
    uint32_t rows = 1, ibase;
    for (int d = 0; d < l->rank; d++) rows *= d == a ? 1 : (uint32_t)l->shape[d];
    ibase = rows * (uint32_t)nw * 8;
    LLVMValueRef w = cg_urem(c->b, cg_udiv(c->b, c->warp, cg_i32c(c, stride_of(l->wpc, l->rank, a))),
                             cg_i32c(c, nw));
    LLVMValueRef *slot = arena_alloc(c->arena, n * sizeof *slot);
    cg_barrier(c);
    for (uint32_t k = 0; k < n; k++) {
        slot[k] = cg_mul(c->b, row_index(c, cl, a, k), cg_i32c(c, nw));
        LLVMValueRef at = cg_add(c->b, slot[k], w);
        LLVMBuildStore(c->b, p[k].v, cg_smem_ptr(c, at, vt, 0));
        if (r->arg) LLVMBuildStore(c->b, p[k].i, cg_smem_ptr(c, at, i32, ibase));
    }
    cg_barrier(c);
    for (uint32_t k = 0; k < n; k++)
        for (int32_t j = 0; j < nw; j++) {
            LLVMValueRef at = cg_add(c->b, slot[k], cg_i32c(c, j));
            Pair o = {LLVMBuildLoad2(c->b, vt, cg_smem_ptr(c, at, vt, 0), ""),
                      r->arg ? LLVMBuildLoad2(c->b, i32, cg_smem_ptr(c, at, i32, ibase), "") : NULL};
            p[k] = j == 0 ? o : combine(c, r, p[k], o);
        }
}

/* A row reduction of an mma.sync accumulator whose rows each live in one warp (WN = 1,
 * passes/layout.c, rows in one warp): a thread holds, per instruction row rm, rows g and
 * g + 8 at columns 2t, 2t + 1 of every column tile; it combines those, then the four
 * lanes t of the row by two butterfly shuffles. The result is the slice of the layout
 * along axis 1, whose elements (rm, i) are rows rm*16*WM + wm*16 + g + 8*(i >> 1). */
static bool reduce_mma_rows(Cg *c, const IrOp *op, const Red *r, const IrLayoutMap *l, IrElem in)
{
    const IrType *rt = cg_type(c, op->results[0]);
    CgVal x = cg_get(c, op->operands[0]);
    uint32_t RM = (uint32_t)l->reps[0], RN = (uint32_t)l->reps[1];
    Pair *p = arena_alloc(c->arena, RM * 2 * sizeof *p), *e = arena_alloc(c->arena, RN * 2 * sizeof *e);
    for (uint32_t rm = 0; rm < RM; rm++)
        for (uint32_t h = 0; h < 2; h++) {
            for (uint32_t rn = 0; rn < RN; rn++)
                for (uint32_t j = 0; j < 2; j++)
                    e[rn * 2 + j] = (Pair){cg_convert_scalar(c, x.v[(rm * RN + rn) * 4 + 2 * h + j], in, r->e), NULL};
            Pair acc = combine_tree(c, r, e, RN * 2);
            for (int m = 1; m <= 2; m <<= 1) {
                Pair o = {shfl_xor(c, acc.v, m), NULL};
                acc = combine(c, r, acc, o);
            }
            p[rm * 2 + h] = acc;
        }
    IrLayoutMap to = ir_layout_map(rt);
    uint32_t n = cg_layout_elems(&to);
    CgVal out = cg_val_new(c, n);
    bool fsum = r->code == IR_OP_SUM && ir_elem_is_float(r->e);
    for (uint32_t k = 0; k < n; k++) {
        int64_t co[IR_MAX_RANK];
        cg_layout_coords_at(&to, 0, k, co);          /* lane 0 of warp 0: rm*16*WM + 8h */
        int64_t row = co[0] % (16 * l->wpc[0]), rm = co[0] / (16 * l->wpc[0]);
        if (rm >= RM || (row != 0 && row != 8)) return cg_error(c, op, "internal: unexpected row slice layout");
        LLVMValueRef v = p[rm * 2 + (uint32_t)(row / 8)].v;
        if (fsum) v = LLVMBuildFAdd(c->b, v, LLVMConstReal(LLVMTypeOf(v), 0.0), "");
        out.v[k] = cg_convert_scalar(c, v, r->e, rt->elem);
    }
    cg_set(c, op->results[0], out);
    return true;
}

bool cg_reduce(Cg *c, const IrOp *op)
{
    const IrType *st = cg_type(c, op->operands[0]), *rt = cg_type(c, op->results[0]);
    int a = (int)op->attr.i;
    Red r = {op->code, acc_elem(st->elem), op->code == IR_OP_ARGMAX || op->code == IR_OP_ARGMIN};
    if (r.code == IR_OP_SUM && st->elem == IR_PTR) return cg_error(c, op, "cannot sum pointers");
    IrLayoutMap l = ir_layout_map(st), cl = l;
    if (l.kind == IR_LMAP_MMA && !l.slice && a == 1 && l.wpc[1] == 1 && !r.arg && rt->layout &&
        rt->layout->kind == IR_LAYOUT_SLICE)
        return reduce_mma_rows(c, op, &r, &l, st->elem);
    if (l.kind != IR_LMAP_BLOCKED) return cg_error(c, op, "reductions of tensor-core layouts are not lowered yet");
    cl.shape[a] = cl.spt[a] = cl.reps[a] = 1;
    uint32_t n;
    Pair *p = in_thread(c, &r, &l, a, cg_get(c, op->operands[0]), st->elem, &n);
    across_lanes(c, &r, &l, a, p, n);
    across_warps(c, &r, &l, &cl, a, p, n);
    CgVal part = cg_val_new(c, n);
    bool fsum = r.code == IR_OP_SUM && ir_elem_is_float(r.e);
    for (uint32_t k = 0; k < n; k++) {
        /* The interpreter's sum starts from +0, so a sum of -0s is +0: adding +0 here
         * changes nothing else (a sum of one element skipped the identity). */
        LLVMValueRef v = fsum ? LLVMBuildFAdd(c->b, p[k].v, LLVMConstReal(LLVMTypeOf(p[k].v), 0.0), "") : p[k].v;
        part.v[k] = r.arg ? p[k].i : cg_convert_scalar(c, v, r.e, rt->elem);
    }
    IrLayoutMap to = ir_layout_map(rt);
    int64_t w[IR_MAX_RANK] = {0};
    for (int j = 0; j < rt->rank; j++) w[j] = stride_of(rt->shape, rt->rank, j);
    cg_set(c, op->results[0], cg_convert(c, &cl, part, rt->elem, &to, w));
    return true;
}

/* ---- scans ------------------------------------------------------------------------------------ */

/* How the scanned axis a is spread: nl lanes (ls apart in the lane id) and nw warps (ws
 * apart in the warp id) hold distinct parts of it, in order; further lanes or warps
 * hold copies (they scan their copies alike). A thread's elements along a are reps
 * runs of spt consecutive ones, a whole program's span apart. */
typedef struct ScanAxis {
    int32_t spt, reps, nl, ls, nw, ws;
} ScanAxis;

static ScanAxis scan_axis(const IrLayoutMap *l, int a)
{
    ScanAxis s = {.spt = l->spt[a], .reps = l->reps[a]};
    int32_t lanes = l->shape[a] / l->spt[a];
    s.nl = l->tpw[a] < lanes ? l->tpw[a] : lanes;
    s.ls = stride_of(l->tpw, l->rank, a);
    s.nw = ir_layout_map_axis_warps(l, a);
    s.ws = stride_of(l->wpc, l->rank, a);
    return s;
}

typedef struct Scan {
    bool prod, fl, rev;          /* rev: from the last element down (the axis is in the thread) */
    IrElem e, ae;                /* element, accumulator (f32 for 8/16-bit floats) */
    LLVMValueRef id;             /* the identity: +0 (so -0 sums read +0, as the interpreter's) or 1 */
    uint32_t ea, inner;          /* elements per thread along the axis; local stride of the axis */
} Scan;

static LLVMValueRef scan_op(Cg *c, const Scan *s, LLVMValueRef x, LLVMValueRef y)
{
    if (s->fl) return s->prod ? LLVMBuildFMul(c->b, x, y, "") : LLVMBuildFAdd(c->b, x, y, "");
    return s->prod ? cg_mul(c->b, x, y) : cg_add(c->b, x, y);
}

/* Local element of the thread's line `row` at local index li along the axis. */
static uint32_t scan_elem(const Scan *s, uint32_t row, uint32_t li)
{
    return (row / s->inner) * s->ea * s->inner + row % s->inner + li * s->inner;
}

/* The axis is the thread's alone: one sequential scan per line, in the interpreter's
 * order from its identity, hence bit-exact. */
static void scan_sequential(Cg *c, const Scan *s, CgVal x, CgVal out)
{
    for (uint32_t row = 0; row < out.n / s->ea; row++) {
        LLVMValueRef acc = s->id;
        for (uint32_t j = 0; j < s->ea; j++) {
            uint32_t k = scan_elem(s, row, s->rev ? s->ea - 1 - j : j);
            acc = scan_op(c, s, acc, cg_convert_scalar(c, cg_at(x, k), s->e, s->ae));
            out.v[k] = cg_convert_scalar(c, acc, s->ae, s->e);
        }
    }
}

/* (id / stride) % count: the position along the axis of a lane or warp id. */
static LLVMValueRef id_along(Cg *c, LLVMValueRef id, int32_t stride, int32_t count)
{
    return cg_urem(c->b, cg_udiv(c->b, id, cg_i32c(c, stride)), cg_i32c(c, count));
}

/* The thread's segments (line, run): each run scanned in the thread (loc, per element),
 * then an inclusive scan of the run totals over the nl lanes by shfl.sync.up (log2 nl
 * steps), shifted by one more shuffle into the lanes' exclusive prefix `ex`. */
static void scan_lanes(Cg *c, const Scan *s, const ScanAxis *ax, CgVal x, LLVMValueRef *loc,
                       LLVMValueRef *w, LLVMValueRef *ex, uint32_t nseg)
{
    for (uint32_t g = 0; g < nseg; g++) {
        uint32_t row = g / (uint32_t)ax->reps, r = g % (uint32_t)ax->reps;
        for (int32_t j = 0; j < ax->spt; j++) {
            uint32_t k = scan_elem(s, row, r * (uint32_t)ax->spt + (uint32_t)j);
            LLVMValueRef v = cg_convert_scalar(c, cg_at(x, k), s->e, s->ae);
            loc[k] = j == 0 ? v : scan_op(c, s, loc[scan_elem(s, row, r * (uint32_t)ax->spt + (uint32_t)j - 1)], v);
        }
        w[g] = loc[scan_elem(s, row, r * (uint32_t)ax->spt + (uint32_t)ax->spt - 1)];
    }
    LLVMValueRef lg = id_along(c, c->lane, ax->ls, ax->nl);
    for (int32_t d = 1; d < ax->nl; d *= 2) {
        LLVMValueRef take = LLVMBuildICmp(c->b, LLVMIntUGE, lg, cg_i32c(c, d), "");
        for (uint32_t g = 0; g < nseg; g++) {
            LLVMValueRef o = shfl(c, w[g], "up", cg_i32c(c, d * ax->ls));
            w[g] = LLVMBuildSelect(c->b, take, scan_op(c, s, o, w[g]), w[g], "");
        }
    }
    LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntEQ, lg, cg_i32c(c, 0), "");
    for (uint32_t g = 0; g < nseg; g++)
        ex[g] = ax->nl > 1 ? LLVMBuildSelect(c->b, first, s->id, shfl(c, w[g], "up", cg_i32c(c, ax->ls)), "") : s->id;
}

/* Warp totals through shared memory: the last lane of each distinct warp stores its
 * inclusive total, then every thread combines the totals of the warps before its own
 * (pre) and of all of them (all, the run's total). */
static void scan_warps(Cg *c, const Scan *s, const IrLayoutMap *l, int a, const ScanAxis *ax,
                       LLVMValueRef *w, LLVMValueRef *pre, LLVMValueRef *all, uint32_t nseg)
{
    IrLayoutMap cl = *l;
    cl.shape[a] = cl.spt[a] = cl.reps[a] = 1;
    LLVMTypeRef vt = LLVMTypeOf(s->id);
    LLVMValueRef wa = id_along(c, c->warp, ax->ws, l->wpc[a]), wg = cg_urem(c->b, wa, cg_i32c(c, ax->nw));
    LLVMValueRef *slot = arena_alloc(c->arena, nseg * sizeof *slot);
    for (uint32_t g = 0; g < nseg; g++) {
        LLVMValueRef row = row_index(c, &cl, a, g / (uint32_t)ax->reps);
        LLVMValueRef seg = cg_add(c->b, cg_mul(c->b, row, cg_i32c(c, ax->reps)), cg_i32c(c, g % (uint32_t)ax->reps));
        slot[g] = cg_mul(c->b, seg, cg_i32c(c, ax->nw));
    }
    /* nw > 1 means no lane copies along a: the group's last lane is lane position nl - 1 */
    LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, id_along(c, c->lane, ax->ls, ax->nl), cg_i32c(c, ax->nl - 1), "");
    LLVMValueRef own = LLVMBuildICmp(c->b, LLVMIntULT, wa, cg_i32c(c, ax->nw), "");
    LLVMBasicBlockRef st = cg_block_new(c, "scan.store"), join = cg_block_new(c, "scan.join");
    cg_barrier(c);
    LLVMBuildCondBr(c->b, cg_and(c->b, last, own), st, join);
    LLVMPositionBuilderAtEnd(c->b, st);
    for (uint32_t g = 0; g < nseg; g++)
        LLVMBuildStore(c->b, w[g], cg_smem_ptr(c, cg_add(c->b, slot[g], wg), vt, 0));
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
    cg_barrier(c);
    for (uint32_t g = 0; g < nseg; g++) {
        pre[g] = all[g] = s->id;
        for (int32_t j = 0; j < ax->nw; j++) {
            LLVMValueRef t = LLVMBuildLoad2(c->b, vt, cg_smem_ptr(c, cg_add(c->b, slot[g], cg_i32c(c, j)), vt, 0), "");
            LLVMValueRef before = LLVMBuildICmp(c->b, LLVMIntULT, cg_i32c(c, j), wg, "");
            pre[g] = LLVMBuildSelect(c->b, before, scan_op(c, s, pre[g], t), pre[g], "");
            all[g] = scan_op(c, s, all[g], t);
        }
    }
}

/* The axis is spread over lanes and/or warps: element = carry (earlier runs) + pre
 * (earlier warps) + ex (earlier lanes) + loc (the thread's own inclusive scan). */
static void scan_parallel(Cg *c, const Scan *s, const IrLayoutMap *l, int a, const ScanAxis *ax, CgVal x, CgVal out)
{
    uint32_t nseg = out.n / s->ea * (uint32_t)ax->reps;
    LLVMValueRef *loc = arena_alloc(c->arena, out.n * sizeof *loc), *w = arena_alloc(c->arena, nseg * sizeof *w);
    LLVMValueRef *ex = arena_alloc(c->arena, nseg * sizeof *ex), *pre = arena_alloc(c->arena, nseg * sizeof *pre);
    LLVMValueRef *all = arena_alloc(c->arena, nseg * sizeof *all);
    scan_lanes(c, s, ax, x, loc, w, ex, nseg);
    if (ax->nw > 1) {
        scan_warps(c, s, l, a, ax, w, pre, all, nseg);
    } else {
        /* one warp: a run's total is the inclusive value of the group's last lane */
        LLVMValueRef lg = id_along(c, c->lane, ax->ls, ax->nl);
        LLVMValueRef src = cg_add(c->b, LLVMBuildSub(c->b, c->lane, cg_mul(c->b, lg, cg_i32c(c, ax->ls)), ""),
                                  cg_i32c(c, (ax->nl - 1) * ax->ls));
        for (uint32_t g = 0; g < nseg; g++) {
            pre[g] = s->id;
            all[g] = ax->reps > 1 ? shfl(c, w[g], "idx", src) : s->id;
        }
    }
    for (uint32_t g = 0, row = 0; row < out.n / s->ea; row++) {
        LLVMValueRef carry = s->id;
        for (uint32_t r = 0; r < (uint32_t)ax->reps; r++, g++) {
            LLVMValueRef base = scan_op(c, s, scan_op(c, s, carry, pre[g]), ex[g]);
            for (uint32_t j = 0; j < (uint32_t)ax->spt; j++) {
                uint32_t k = scan_elem(s, row, r * (uint32_t)ax->spt + j);
                out.v[k] = cg_convert_scalar(c, scan_op(c, s, base, loc[k]), s->ae, s->e);
            }
            if (r + 1 < (uint32_t)ax->reps) carry = scan_op(c, s, carry, all[g]);
        }
    }
}

bool cg_scan(Cg *c, const IrOp *op)
{
    const IrType *t = cg_type(c, op->operands[0]);
    int a = (int)(op->attr.i & IR_AXIS_MASK);
    IrLayoutMap l = ir_layout_map(t);
    if (l.kind != IR_LMAP_BLOCKED) return cg_error(c, op, "scans of tensor-core layouts are not lowered yet");
    ScanAxis ax = scan_axis(&l, a);
    bool rev = op->attr.i & IR_SCAN_REVERSE;
    if (rev && (ax.nl > 1 || ax.nw > 1))
        return cg_error(c, op, "internal: a reversed scan needs its axis in one thread (passes/layout.c)");
    Scan s = {.prod = op->code == IR_OP_CUMPROD, .fl = ir_elem_is_float(t->elem), .rev = rev, .e = t->elem,
              .ae = acc_elem(t->elem), .ea = (uint32_t)(ax.spt * ax.reps), .inner = 1};
    LLVMTypeRef at = cg_elem_type(c, s.ae);
    s.id = s.fl ? LLVMConstReal(at, s.prod ? 1.0 : 0.0) : cg_int(c, at, s.prod);
    for (int d = a + 1; d < l.rank; d++) s.inner *= (uint32_t)(l.spt[d] * l.reps[d]);
    CgVal x = cg_get(c, op->operands[0]), out = cg_val_new(c, cg_layout_elems(&l));
    if (ax.nl == 1 && ax.nw == 1) scan_sequential(c, &s, x, out);
    else scan_parallel(c, &s, &l, a, &ax, x, out);
    cg_set(c, op->results[0], out);
    return true;
}

/* ---- reduce and scan with a combine region ------------------------------------------------- */

/* The combine is associative but maybe not commutative, and has no identity, so the
 * elements must meet in order. passes/layout.c lays the operands out so that each
 * thread holds one contiguous run of the axis (reps = 1); then position along the axis is (warp, lane, element) in
 * lexicographic order, and the three stages keep it: each thread folds (or scans) its
 * run; lanes combine by butterflies in which the lower lane's value is always the left
 * operand (or, for a scan, shfl.sync.up with the earlier lanes on the left); warps go
 * through shared memory in warp order. The region is inlined at every combine. A
 * value that may be missing (the first lane has no earlier lanes) is chosen by a
 * select after an unconditional combine: the combine is pure. A reversed scan is the
 * mirror image: from the run's last element, the later lanes by shfl.sync.down, the
 * later warps. Lanes and warps holding copies compute the same values. */
enum { MAXT = 8 };

typedef struct Lines {
    uint32_t n, ea, inner, rows;     /* tiles; elements along the axis; its local stride; lines */
    CgVal x[MAXT];
    ScanAxis ax;
} Lines;

static bool combine_lines(Cg *c, const IrOp *op, int a, IrLayoutMap *l, Lines *ln)
{
    const IrType *st = cg_type(c, op->operands[0]);
    *l = ir_layout_map(st);
    ln->ax = scan_axis(l, a);
    if (l->kind != IR_LMAP_BLOCKED || ln->ax.reps != 1 || op->noperands > MAXT)
        return cg_error(c, op, "internal: %s needs one run of its axis per thread (passes/layout.c)",
                        ir_op_info[op->code].text);
    ln->n = op->noperands;
    ln->ea = (uint32_t)l->spt[a];
    ln->inner = 1;
    for (int d = a + 1; d < l->rank; d++) ln->inner *= (uint32_t)(l->spt[d] * l->reps[d]);
    for (uint32_t i = 0; i < ln->n; i++) {
        if (cg_type(c, op->operands[i])->layout != st->layout)
            return cg_error(c, op, "internal: the tiles of %s have different layouts", ir_op_info[op->code].text);
        ln->x[i] = cg_get(c, op->operands[i]);
    }
    ln->rows = ln->x[0].n / ln->ea;
    return true;
}

/* out = combine(l, r), n values each (out may be l or r). */
static bool comb(Cg *c, const IrOp *op, uint32_t n, const LLVMValueRef *l, const LLVMValueRef *r, LLVMValueRef *out)
{
    LLVMValueRef args[2 * MAXT];
    for (uint32_t i = 0; i < n; i++) args[i] = l[i], args[n + i] = r[i];
    return cg_combine(c, op, &op->regions[0], args, out);
}

static void select_n(Cg *c, uint32_t n, LLVMValueRef cond, const LLVMValueRef *t, const LLVMValueRef *f, LLVMValueRef *out)
{
    for (uint32_t i = 0; i < n; i++) out[i] = LLVMBuildSelect(c->b, cond, t[i], f[i], "");
}

static uint32_t line_base(const Lines *ln, uint32_t row) { return (row / ln->inner) * ln->ea * ln->inner + row % ln->inner; }

/* Each line's run folded in the thread, then across the nl lanes: at step m the lane
 * whose position has bit m set holds the upper half, so its partner's value goes left. */
static bool reduce_lanes(Cg *c, const IrOp *op, const Lines *ln, LLVMValueRef (*acc)[MAXT])
{
    for (uint32_t row = 0; row < ln->rows; row++) {
        uint32_t base = line_base(ln, row);
        for (uint32_t i = 0; i < ln->n; i++) acc[row][i] = cg_at(ln->x[i], base);
        for (uint32_t j = 1; j < ln->ea; j++) {
            LLVMValueRef e[MAXT];
            for (uint32_t i = 0; i < ln->n; i++) e[i] = cg_at(ln->x[i], base + j * ln->inner);
            if (!comb(c, op, ln->n, acc[row], e, acc[row])) return false;
        }
    }
    LLVMValueRef lg = id_along(c, c->lane, ln->ax.ls, ln->ax.nl);
    for (int32_t m = 1; m < ln->ax.nl; m *= 2) {
        LLVMValueRef upper = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildAnd(c->b, lg, cg_i32c(c, m), ""), cg_i32c(c, 0), "");
        for (uint32_t row = 0; row < ln->rows; row++) {
            LLVMValueRef o[MAXT], lo[MAXT], hi[MAXT];
            for (uint32_t i = 0; i < ln->n; i++) o[i] = shfl_xor(c, acc[row][i], m * ln->ax.ls);
            select_n(c, ln->n, upper, o, acc[row], lo);
            select_n(c, ln->n, upper, acc[row], o, hi);
            if (!comb(c, op, ln->n, lo, hi, acc[row])) return false;
        }
    }
    return true;
}

/* Bytes of shared memory per tile of a combine's warp exchange: one 8-byte slot per
 * line and warp along the axis. */
static uint32_t slot_bytes(const IrType *t, const ScanAxis *ax, int a)
{
    return (uint32_t)(ir_type_numel(t) / t->shape[a]) * (uint32_t)ax->nw * 8;
}

/* Warp partials through shared memory, combined in warp order: all of them (reduce),
 * or those of the warps before this one (scan: *pre, valid where the warp is not the
 * first). `own` says which threads store (NULL: all; copies store the same). */
enum { ALL_WARPS, WARPS_BEFORE, WARPS_AFTER };

static bool across_warps_n(Cg *c, const IrOp *op, const Lines *ln, const IrLayoutMap *l, int a, LLVMValueRef (*v)[MAXT],
                           LLVMValueRef own, int which, LLVMValueRef (*out)[MAXT])
{
    IrLayoutMap cl = *l;
    cl.shape[a] = cl.spt[a] = cl.reps[a] = 1;
    const IrType *st = cg_type(c, op->operands[0]);
    uint32_t region = slot_bytes(st, &ln->ax, a);
    LLVMValueRef wg = cg_urem(c->b, id_along(c, c->warp, ln->ax.ws, l->wpc[a]), cg_i32c(c, ln->ax.nw));
    LLVMValueRef *slot = arena_alloc(c->arena, ln->rows * sizeof *slot);
    for (uint32_t row = 0; row < ln->rows; row++)
        slot[row] = cg_mul(c->b, row_index(c, &cl, a, row), cg_i32c(c, ln->ax.nw));
    cg_barrier(c);
    LLVMBasicBlockRef st_bb = own ? cg_block_new(c, "comb.store") : NULL, join = own ? cg_block_new(c, "comb.join") : NULL;
    if (own) {
        LLVMBuildCondBr(c->b, own, st_bb, join);
        LLVMPositionBuilderAtEnd(c->b, st_bb);
    }
    for (uint32_t row = 0; row < ln->rows; row++)
        for (uint32_t i = 0; i < ln->n; i++)
            LLVMBuildStore(c->b, v[row][i], cg_smem_ptr(c, cg_add(c->b, slot[row], wg), LLVMTypeOf(v[row][i]), i * region));
    if (own) {
        LLVMBuildBr(c->b, join);
        LLVMPositionBuilderAtEnd(c->b, join);
    }
    cg_barrier(c);
    /* warps in order, or from the last one down for WARPS_AFTER (a reversed scan) */
    bool down = which == WARPS_AFTER;
    for (uint32_t row = 0; row < ln->rows; row++)
        for (int32_t q = 0; q < ln->ax.nw; q++) {
            int32_t j = down ? ln->ax.nw - 1 - q : q;
            LLVMValueRef t[MAXT], r[MAXT];
            for (uint32_t i = 0; i < ln->n; i++) {
                LLVMTypeRef vt = LLVMTypeOf(v[row][i]);
                t[i] = LLVMBuildLoad2(c->b, vt, cg_smem_ptr(c, cg_add(c->b, slot[row], cg_i32c(c, j)), vt, i * region), "");
            }
            if (q == 0) {
                memcpy(out[row], t, ln->n * sizeof *t);
                continue;
            }
            if (!comb(c, op, ln->n, out[row], t, r)) return false;
            if (which == ALL_WARPS) memcpy(out[row], r, ln->n * sizeof *r);
            else select_n(c, ln->n, LLVMBuildICmp(c->b, down ? LLVMIntUGT : LLVMIntULT, cg_i32c(c, j), wg, ""), r,
                          out[row], out[row]);
        }
    return true;
}

bool cg_reduce_region(Cg *c, const IrOp *op)
{
    int a = (int)(op->attr.i & IR_AXIS_MASK);
    IrLayoutMap l, cl;
    Lines ln;
    if (!combine_lines(c, op, a, &l, &ln)) return false;
    LLVMValueRef (*acc)[MAXT] = arena_alloc(c->arena, ln.rows * sizeof *acc);
    if (!reduce_lanes(c, op, &ln, acc)) return false;
    if (ln.ax.nw > 1 && !across_warps_n(c, op, &ln, &l, a, acc, NULL, ALL_WARPS, acc)) return false;
    cl = l;
    cl.shape[a] = cl.spt[a] = cl.reps[a] = 1;
    for (uint32_t i = 0; i < ln.n; i++) {
        CgVal part = cg_val_new(c, ln.rows);
        for (uint32_t row = 0; row < ln.rows; row++) part.v[row] = acc[row][i];
        const IrType *rt = cg_type(c, op->results[i]);
        IrLayoutMap to = ir_layout_map(rt);
        int64_t w[IR_MAX_RANK] = {0};
        for (int j = 0; j < rt->rank; j++) w[j] = stride_of(rt->shape, rt->rank, j);
        cg_set(c, op->results[i], cg_convert(c, &cl, part, rt->elem, &to, w));
    }
    return true;
}

/* The thread's inclusive scan of its run (loc), the lanes' inclusive scan of the run
 * totals by shfl.sync.up (w), and each lane's exclusive prefix (ex, valid past the
 * first lane). Reversed (rev): everything mirrored, from the run's last element, the
 * later lanes by shfl.sync.down, ex valid before the last lane. */
static bool scan_lanes_n(Cg *c, const IrOp *op, const Lines *ln, bool rev, LLVMValueRef (*loc)[MAXT],
                         LLVMValueRef (*w)[MAXT], LLVMValueRef (*ex)[MAXT], LLVMValueRef lg)
{
    const char *kind = rev ? "down" : "up";
    for (uint32_t row = 0; row < ln->rows; row++) {
        uint32_t base = line_base(ln, row);
        for (uint32_t q = 0; q < ln->ea; q++) {
            uint32_t j = rev ? ln->ea - 1 - q : q, k = base + j * ln->inner;
            for (uint32_t i = 0; i < ln->n; i++) loc[k][i] = cg_at(ln->x[i], k);
            uint32_t prev = rev ? k + ln->inner : k - ln->inner;
            if (q && !comb(c, op, ln->n, loc[prev], loc[k], loc[k])) return false;
        }
        memcpy(w[row], loc[base + (rev ? 0 : ln->ea - 1) * ln->inner], ln->n * sizeof **w);
    }
    for (int32_t d = 1; d < ln->ax.nl; d *= 2) {
        LLVMValueRef take = rev ? LLVMBuildICmp(c->b, LLVMIntULT, lg, cg_i32c(c, ln->ax.nl - d), "")
                                : LLVMBuildICmp(c->b, LLVMIntUGE, lg, cg_i32c(c, d), "");
        for (uint32_t row = 0; row < ln->rows; row++) {
            LLVMValueRef o[MAXT], r[MAXT];
            for (uint32_t i = 0; i < ln->n; i++) o[i] = shfl(c, w[row][i], kind, cg_i32c(c, d * ln->ax.ls));
            if (!comb(c, op, ln->n, o, w[row], r)) return false;
            select_n(c, ln->n, take, r, w[row], w[row]);
        }
    }
    for (uint32_t row = 0; row < ln->rows && ln->ax.nl > 1; row++)
        for (uint32_t i = 0; i < ln->n; i++) ex[row][i] = shfl(c, w[row][i], kind, cg_i32c(c, ln->ax.ls));
    return true;
}

bool cg_scan_region(Cg *c, const IrOp *op)
{
    int a = (int)(op->attr.i & IR_AXIS_MASK);
    IrLayoutMap l;
    Lines ln;
    if (!combine_lines(c, op, a, &l, &ln)) return false;
    CgVal out[MAXT];
    for (uint32_t i = 0; i < ln.n; i++) out[i] = cg_val_new(c, ln.x[0].n);
    bool rev = op->attr.i & IR_SCAN_REVERSE;
    LLVMValueRef (*loc)[MAXT] = arena_alloc(c->arena, ln.x[0].n * sizeof *loc);
    LLVMValueRef (*w)[MAXT] = arena_alloc(c->arena, ln.rows * sizeof *w), (*ex)[MAXT] = arena_alloc(c->arena, ln.rows * sizeof *ex);
    LLVMValueRef (*pre)[MAXT] = arena_alloc(c->arena, ln.rows * sizeof *pre);
    LLVMValueRef lg = id_along(c, c->lane, ln.ax.ls, ln.ax.nl);
    if (!scan_lanes_n(c, op, &ln, rev, loc, w, ex, lg)) return false;
    LLVMValueRef has_ex = rev ? LLVMBuildICmp(c->b, LLVMIntULT, lg, cg_i32c(c, ln.ax.nl - 1), "")
                              : LLVMBuildICmp(c->b, LLVMIntUGT, lg, cg_i32c(c, 0), "");
    LLVMValueRef has_pre = NULL;
    if (ln.ax.nw > 1) {
        /* nw > 1: no lane copies along the axis; the group's last lane (the first,
         * reversed) holds the warp's total */
        LLVMValueRef last = LLVMBuildICmp(c->b, LLVMIntEQ, lg, cg_i32c(c, rev ? 0 : ln.ax.nl - 1), "");
        LLVMValueRef wa = id_along(c, c->warp, ln.ax.ws, l.wpc[a]), wg = cg_urem(c->b, wa, cg_i32c(c, ln.ax.nw));
        LLVMValueRef own = cg_and(c->b, last, LLVMBuildICmp(c->b, LLVMIntULT, wa, cg_i32c(c, ln.ax.nw), ""));
        if (!across_warps_n(c, op, &ln, &l, a, w, own, rev ? WARPS_AFTER : WARPS_BEFORE, pre)) return false;
        has_pre = rev ? LLVMBuildICmp(c->b, LLVMIntULT, wg, cg_i32c(c, ln.ax.nw - 1), "")
                      : LLVMBuildICmp(c->b, LLVMIntUGT, wg, cg_i32c(c, 0), "");
    }
    for (uint32_t row = 0; row < ln.rows; row++) {
        LLVMValueRef base[MAXT], r[MAXT], has = NULL;
        if (has_pre && ln.ax.nl > 1) {
            if (!comb(c, op, ln.n, pre[row], ex[row], r)) return false;
            select_n(c, ln.n, has_ex, r, pre[row], r);
            select_n(c, ln.n, has_pre, r, ex[row], base);
            has = cg_or(c->b, has_pre, has_ex);
        } else if (has_pre) {
            memcpy(base, pre[row], ln.n * sizeof *base), has = has_pre;
        } else if (ln.ax.nl > 1) {
            memcpy(base, ex[row], ln.n * sizeof *base), has = has_ex;
        }
        uint32_t b0 = line_base(&ln, row);
        for (uint32_t j = 0; j < ln.ea; j++) {
            uint32_t k = b0 + j * ln.inner;
            if (has) {
                if (!comb(c, op, ln.n, base, loc[k], r)) return false;
                select_n(c, ln.n, has, r, loc[k], loc[k]);
            }
            for (uint32_t i = 0; i < ln.n; i++) out[i].v[k] = loc[k][i];
        }
    }
    for (uint32_t i = 0; i < ln.n; i++) cg_set(c, op->results[i], out[i]);
    return true;
}
