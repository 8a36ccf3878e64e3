/* Layouts: which thread holds which element of a tile, and conversions between them.
 *
 * Every tile carries its layout in its type, chosen by the GPU layout pass
 * (passes/layout.c); codegen reads it (ir_layout_map) and never chooses one. Today
 * that is the pass's blocked layout per shape: element-wise ops never convert, and
 * ops whose result is another shape (broadcast, expand_dims, trans, reshape, the
 * squeeze after a reduction) convert: directly when each thread already holds the
 * elements it needs (checked at compile time over all threads), else through shared
 * memory.
 *
 * A thread's local element k has one local index per axis (row-major over the axes,
 * li_d in [0, spt_d * reps_d)), and along axis d the coordinate
 *     ((li_d / spt_d) * spt_d*tpw_d*wpc_d + warp_d*spt_d*tpw_d + lane_d*spt_d + li_d % spt_d)
 *     mod shape_d. */
#include "codegen/cg_internal.h"
#include "ir/layout.h"
#include "ir/target.h"

/* What codegen lowers today: blocked layouts whose lanes and warps are numbered with
 * the last axis fastest (order [rank-1, ..., 0]); mma.sync accumulators (version 2,
 * m16n8k8, k16, k32) of any shape, their slices, and their operands (K / 8 elements per
 * register: the verifier's rule); shared-memory buffers (cg_shared.c). */
static bool supported(const IrLayout *l, bool wgmma)
{
    if (l->kind == IR_LAYOUT_MMA && l->version == 3) return wgmma && l->instr[0] == 64 && (l->instr[2] == 16 || l->instr[2] == 32);
    if (l->kind == IR_LAYOUT_MMA) return l->version == 2 && (l->instr[2] == 8 || l->instr[2] == 16 || l->instr[2] == 32);
    if (l->kind == IR_LAYOUT_SLICE) return l->parent->kind == IR_LAYOUT_MMA && supported(l->parent, wgmma);
    if (l->kind == IR_LAYOUT_DOT_OPERAND)   /* registers: mma.sync's operands, wgmma's A */
        return l->parent->kind == IR_LAYOUT_MMA && supported(l->parent, wgmma) &&
               (l->parent->version == 2 ? l->kwidth * 8 == l->parent->instr[2]
                                        : l->op == 0 && l->kwidth * 8 == l->parent->instr[2]);
    /* buffers (cg_shared.c), and with an NVMMA swizzle the views of their stages */
    if (l->kind == IR_LAYOUT_SHARED) return !l->pad && (l->rank == 3 || (l->rank == 2 && l->swizzle_bytes));
    if (l->kind != IR_LAYOUT_BLOCKED) return false;
    for (int d = 0; d < l->rank; d++)
        if (l->order[d] != l->rank - 1 - d) return false;
    return true;
}

typedef struct LayoutWalk {
    Cg *c;
    const IrFunc *k;
    bool ok;
} LayoutWalk;

static bool check_value(LayoutWalk *w, const IrOp *op, IrValue v)
{
    const IrType *t = ir_value_type(w->k, v);
    if (t->rank == 0 || (t->layout && supported(t->layout, w->c->target && w->c->target->wgmma))) return true;
    if (!t->layout)
        return cg_error(w->c, op, "a tile without a layout reached code generation: run the GPU pipeline "
                                  "(pass_run_gpu) first");
    char buf[256];
    return cg_error(w->c, op, "code generation does not lower the layout %s yet", ir_layout_str(t->layout, NULL, buf, sizeof buf));
}

static void check_visit(IrOp *op, void *ud)
{
    LayoutWalk *w = ud;
    for (uint32_t i = 0; w->ok && i < op->nresults; i++) w->ok = check_value(w, op, op->results[i]);
    for (uint32_t r = 0; w->ok && r < op->nregions; r++)
        for (uint32_t i = 0; w->ok && i < op->regions[r].nargs; i++) w->ok = check_value(w, op, op->regions[r].args[i]);
}

bool cg_check_layouts(Cg *c, const IrFunc *k)
{
    LayoutWalk w = {c, k, true};
    ir_walk((IrBlock *)&k->body, check_visit, &w);
    return w.ok;
}

/* ---- the mma family: narrow tiles wrap, slices drop an axis ------------------------------ */

/* The instruction tiles of all warps along axis d of an accumulator: 16 rows per warp
 * row, 8 columns per warp column. A narrower axis wraps. */
static int32_t mma_span(const IrLayoutMap *l, int d) { return d == 0 ? 16 * l->wpc[0] : 8 * l->wpc[1]; }

/* The rank-2 shape the mma coordinate functions lay out (a slice's parent shape). */
static void mma_shape(const IrLayoutMap *l, int32_t ps[2])
{
    if (!l->slice) {
        ps[0] = l->shape[0];
        ps[1] = l->shape[1];
        return;
    }
    ps[l->slice - 1] = 1;
    ps[2 - l->slice] = l->shape[0];
}

static bool mma_narrow(const IrLayoutMap *l, int d)
{
    int32_t ps[2];
    mma_shape(l, ps);
    return l->kind == IR_LMAP_MMA && ps[d] < mma_span(l, d);
}

static void mma_coords(Cg *c, const IrLayoutMap *l, uint32_t k, LLVMValueRef coords[IR_MAX_RANK])
{
    LLVMValueRef pc[IR_MAX_RANK];
    int32_t ps[2];
    cg_mma_coords(c, l, k, pc);
    mma_shape(l, ps);
    for (int d = 0; d < 2; d++)
        if (mma_narrow(l, d)) pc[d] = cg_and(c->b, pc[d], cg_i32c(c, ps[d] - 1));
    if (l->slice) coords[0] = pc[2 - l->slice];
    else coords[0] = pc[0], coords[1] = pc[1];
}

static bool mma_coords_at(const IrLayoutMap *l, uint32_t t, uint32_t k, int64_t coords[IR_MAX_RANK])
{
    int64_t pc[IR_MAX_RANK];
    int32_t ps[2];
    bool owner = cg_mma_coords_at(l, t, k, pc);
    mma_shape(l, ps);
    for (int d = 0; d < 2; d++)
        if (mma_narrow(l, d)) {
            owner &= pc[d] < ps[d];
            pc[d] &= ps[d] - 1;
        }
    if (l->slice) coords[0] = pc[2 - l->slice];
    else coords[0] = pc[0], coords[1] = pc[1];
    return owner;
}

/* Narrow accumulator tiles: element k is owned where its unwrapped coordinates are
 * inside the tile. */
static LLVMValueRef mma_owner_at(Cg *c, const IrLayoutMap *l, uint32_t k)
{
    if (l->kind != IR_LMAP_MMA) return cg_mma_owner(c, l);
    LLVMValueRef own = LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0), pc[IR_MAX_RANK];
    int32_t ps[2];
    mma_shape(l, ps);
    if (!mma_narrow(l, 0) && !mma_narrow(l, 1)) return own;
    cg_mma_coords(c, l, k, pc);
    for (int d = 0; d < 2; d++)
        if (mma_narrow(l, d)) own = cg_and(c->b, own, LLVMBuildICmp(c->b, LLVMIntULT, pc[d], cg_i32c(c, ps[d]), ""));
    return own;
}

static uint32_t axis_elems(const IrLayoutMap *l, int d) { return (uint32_t)(l->spt[d] * l->reps[d]); }

uint32_t cg_layout_elems(const IrLayoutMap *l)
{
    if (l->kind != IR_LMAP_BLOCKED) return cg_mma_elems(l);
    uint32_t n = 1;
    for (int d = 0; d < l->rank; d++) n *= axis_elems(l, d);
    return n;
}

/* Local index of element k along each axis. */
static void local_index(const IrLayoutMap *l, uint32_t k, uint32_t li[IR_MAX_RANK])
{
    for (int d = l->rank - 1; d >= 0; d--) {
        li[d] = k % axis_elems(l, d);
        k /= axis_elems(l, d);
    }
}

static int32_t stride_of(const int32_t *v, int rank, int d)
{
    int32_t s = 1;
    for (int e = d + 1; e < rank; e++) s *= v[e];
    return s;
}

/* Position of this thread's first element along axis d, unwrapped (i32): built once
 * per kernel and layout axis, in the entry block (cg_thread_value). */
static LLVMValueRef thread_base(Cg *c, const IrLayoutMap *l, int d)
{
    int32_t key[8] = {1, stride_of(l->tpw, l->rank, d), l->tpw[d], stride_of(l->wpc, l->rank, d), l->wpc[d],
                      l->spt[d], 0, 0};
    LLVMValueRef v = cg_thread_value(c, key);
    if (v) return v;
    LLVMBuilderRef b = cg_thread_builder(c);
    LLVMValueRef lane = cg_urem(b, cg_udiv(b, c->lane, cg_i32c(c, key[1])), cg_i32c(c, l->tpw[d]));
    LLVMValueRef warp = cg_urem(b, cg_udiv(b, c->warp, cg_i32c(c, key[3])), cg_i32c(c, l->wpc[d]));
    LLVMValueRef wb = cg_mul(b, warp, cg_i32c(c, l->spt[d] * l->tpw[d]));
    return cg_thread_remember(c, key, cg_add(b, wb, cg_mul(b, lane, cg_i32c(c, l->spt[d]))));
}

static int32_t local_offset(const IrLayoutMap *l, int d, uint32_t li)
{
    return (int32_t)(li / (uint32_t)l->spt[d]) * l->spt[d] * l->tpw[d] * l->wpc[d] + (int32_t)(li % (uint32_t)l->spt[d]);
}

void cg_layout_coords(Cg *c, const IrLayoutMap *l, uint32_t k, LLVMValueRef coords[IR_MAX_RANK])
{
    if (l->kind != IR_LMAP_BLOCKED) {
        mma_coords(c, l, k, coords);
        return;
    }
    uint32_t li[IR_MAX_RANK];
    local_index(l, k, li);
    for (int d = 0; d < l->rank; d++) {
        LLVMValueRef raw = cg_add(c->b, thread_base(c, l, d), cg_i32c(c, local_offset(l, d, li[d])));
        coords[d] = cg_and(c->b, raw, cg_i32c(c, l->shape[d] - 1));
    }
}

bool cg_layout_coords_at(const IrLayoutMap *l, uint32_t t, uint32_t k, int64_t coords[IR_MAX_RANK])
{
    if (l->kind != IR_LMAP_BLOCKED) return mma_coords_at(l, t, k, coords);
    uint32_t li[IR_MAX_RANK], lane = t % 32, warp = t / 32;
    bool owner = true;
    local_index(l, k, li);
    for (int d = 0; d < l->rank; d++) {
        int64_t ld = (lane / (uint32_t)stride_of(l->tpw, l->rank, d)) % (uint32_t)l->tpw[d];
        int64_t wd = (warp / (uint32_t)stride_of(l->wpc, l->rank, d)) % (uint32_t)l->wpc[d];
        int64_t raw = wd * l->spt[d] * l->tpw[d] + ld * l->spt[d] + local_offset(l, d, li[d]);
        owner &= raw < l->shape[d];
        coords[d] = raw & (l->shape[d] - 1);
    }
    return owner;
}

bool cg_layout_replicated(const IrLayoutMap *l)
{
    if (l->rank == 0) return true;
    if (l->kind == IR_LMAP_MMA) return mma_narrow(l, 0) || mma_narrow(l, 1);
    if (l->kind == IR_LMAP_DOT_A) return l->wpc[1] > 1;
    if (l->kind == IR_LMAP_DOT_B) return l->wpc[0] > 1;
    for (int d = 0; d < l->rank; d++)
        if (l->spt[d] * l->tpw[d] * l->wpc[d] > l->shape[d]) return true;
    return false;
}

/* A copy is the owner when its unwrapped position is inside the tile on every axis;
 * for blocked layouts that does not depend on the element (spans larger than the axis
 * have one repeat); narrow accumulator tiles need cg_layout_owner_at. */
LLVMValueRef cg_layout_owner(Cg *c, const IrLayoutMap *l)
{
    if (l->rank == 0) return LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32c(c, 0), "");
    if (l->kind != IR_LMAP_BLOCKED) return cg_mma_owner(c, l);
    LLVMValueRef own = LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0);
    for (int d = 0; d < l->rank; d++) {
        if (l->spt[d] * l->tpw[d] * l->wpc[d] <= l->shape[d]) continue;
        LLVMValueRef in = LLVMBuildICmp(c->b, LLVMIntULT, thread_base(c, l, d), cg_i32c(c, l->shape[d]), "");
        own = cg_and(c->b, own, in);
    }
    return own;
}

LLVMValueRef cg_layout_owner_at(Cg *c, const IrLayoutMap *l, uint32_t k)
{
    return l->rank > 0 && l->kind != IR_LMAP_BLOCKED ? mma_owner_at(c, l, k) : cg_layout_owner(c, l);
}

uint32_t cg_layout_run(const IrLayoutMap *l)
{
    if (l->rank == 0) return 1;
    int last = l->rank - 1;
    if (l->kind == IR_LMAP_BLOCKED) return (uint32_t)l->spt[last];
    if (l->kind != IR_LMAP_MMA || l->slice == 2) return 1;     /* operands; the rows of a slice */
    return mma_narrow(l, 1) ? 1 : (uint32_t)l->spt[last];        /* column pairs, unless they wrap */
}

LLVMValueRef cg_linear(Cg *c, const IrLayoutMap *l, LLVMValueRef coords[IR_MAX_RANK])
{
    LLVMValueRef lin = cg_i32c(c, 0);
    for (int d = 0; d < l->rank; d++)
        lin = cg_add(c->b, lin, cg_mul(c->b, coords[d], cg_i32c(c, stride_of(l->shape, l->rank, d))));
    return lin;
}

/* ---- conversions ------------------------------------------------------------------------ */

static int64_t mapped_index(const IrLayoutMap *to, const int64_t coords[IR_MAX_RANK], const int64_t w[IR_MAX_RANK],
                            int64_t base)
{
    int64_t lin = base;
    for (int d = 0; d < to->rank; d++) lin += coords[d] * w[d];
    return lin;
}

/* The local elements of `from` that thread t holds, by their row-major index: an
 * open-addressing table (size a power of two, at least twice the elements), the first
 * local element for an index held twice. */
typedef struct LocalIndex {
    int64_t *lin;                /* -1: empty */
    uint32_t *k, mask;
} LocalIndex;

static void index_thread(LocalIndex *ix, const IrLayoutMap *from, uint32_t t)
{
    uint32_t n = cg_layout_elems(from);
    for (uint32_t i = 0; i <= ix->mask; i++) ix->lin[i] = -1;
    for (uint32_t k = 0; k < n; k++) {
        int64_t co[IR_MAX_RANK] = {0}, l2 = 0;
        cg_layout_coords_at(from, t, k, co);
        for (int d = 0; d < from->rank; d++) l2 = l2 * from->shape[d] + co[d];
        uint32_t h = (uint32_t)((uint64_t)l2 * 0x9E3779B97F4A7C15u >> 40) & ix->mask;
        while (ix->lin[h] >= 0 && ix->lin[h] != l2) h = (h + 1) & ix->mask;
        if (ix->lin[h] < 0) ix->lin[h] = l2, ix->k[h] = k;
    }
}

/* Local element of `from` at row-major index lin in the indexed thread, or -1. */
static int64_t find_local(const LocalIndex *ix, int64_t lin)
{
    uint32_t h = (uint32_t)((uint64_t)lin * 0x9E3779B97F4A7C15u >> 40) & ix->mask;
    while (ix->lin[h] >= 0) {
        if (ix->lin[h] == lin) return ix->k[h];
        h = (h + 1) & ix->mask;
    }
    return -1;
}

/* The direct plan: src local element for each dst local element, the same in every
 * thread; false if some thread lacks an element or the search is too large. Each
 * thread's elements of `from` are indexed once (threads x (ns + nd) coordinate
 * computations, not threads x nd x ns: that search was a fifth of a GEMM's compile). */
static bool direct_plan(Cg *c, const IrLayoutMap *from, const IrLayoutMap *to, const int64_t w[IR_MAX_RANK], int64_t base,
                        uint32_t *plan, bool planned)
{
    uint32_t nd = cg_layout_elems(to), ns = cg_layout_elems(from);
    /* a bound on the search for conversions that may well go through shared memory;
     * one planned in registers (ir_layout_in_registers) is always searched: its work is
     * threads x (ns + nd) hash lookups */
    if (!planned && (uint64_t)c->threads * nd * ns > (UINT64_C(1) << 22)) return false;
    uint32_t size = 16;
    while (size < 2 * ns) size *= 2;
    LocalIndex ix = {tl_malloc(size * sizeof *ix.lin), tl_malloc(size * sizeof *ix.k), size - 1};
    if (!ix.lin || !ix.k) tl_oom();
    bool ok = true;
    for (uint32_t t = 0; t < (uint32_t)c->threads && ok; t++) {
        index_thread(&ix, from, t);
        for (uint32_t k = 0; k < nd; k++) {
            int64_t co[IR_MAX_RANK] = {0};
            cg_layout_coords_at(to, t, k, co);
            int64_t s = find_local(&ix, mapped_index(to, co, w, base));
            if (s < 0 || (t > 0 && plan[k] != (uint32_t)s)) {
                ok = false;
                break;
            }
            plan[k] = (uint32_t)s;
        }
    }
    tl_free(ix.lin);
    tl_free(ix.k);
    return ok;
}

static LLVMValueRef to_mem(Cg *c, LLVMValueRef x, IrElem e)
{
    return e == IR_I1 ? LLVMBuildZExt(c->b, x, LLVMInt8TypeInContext(c->ctx), "") : x;
}

static LLVMValueRef from_mem(Cg *c, LLVMValueRef x, IrElem e)
{
    return e == IR_I1 ? LLVMBuildICmp(c->b, LLVMIntNE, x, cg_int(c, LLVMTypeOf(x), 0), "") : x;
}

static CgVal through_smem(Cg *c, const IrLayoutMap *from, CgVal src, IrElem e, const IrLayoutMap *to, const int64_t w[IR_MAX_RANK],
                          int64_t base)
{
    LLVMTypeRef mt = cg_mem_type(c, e);
    cg_barrier(c);
    for (uint32_t k = 0; k < src.n; k++) {
        LLVMValueRef co[IR_MAX_RANK];
        cg_layout_coords(c, from, k, co);
        LLVMBuildStore(c->b, to_mem(c, src.v[k], e), cg_smem_ptr(c, cg_linear(c, from, co), mt, 0));
    }
    cg_barrier(c);
    CgVal out = cg_val_new(c, cg_layout_elems(to));
    for (uint32_t k = 0; k < out.n; k++) {
        LLVMValueRef co[IR_MAX_RANK], lin = cg_i32c(c, (int32_t)base);
        cg_layout_coords(c, to, k, co);
        for (int d = 0; d < to->rank; d++)
            lin = cg_add(c->b, lin, cg_mul(c->b, co[d], cg_i32c(c, w[d])));
        out.v[k] = from_mem(c, LLVMBuildLoad2(c->b, mt, cg_smem_ptr(c, lin, mt, 0), ""), e);
    }
    return out;
}

/* The conversion in registers (every element from a register of the same thread):
 * false when some element lives in another thread. */
static bool convert_direct(Cg *c, const IrLayoutMap *from, CgVal src, const IrLayoutMap *to, const int64_t w[IR_MAX_RANK],
                           int64_t base, CgVal *out, bool planned)
{
    uint32_t nd = cg_layout_elems(to);
    uint32_t *plan = tl_calloc(nd, sizeof *plan);
    if (!plan) tl_oom();
    bool ok = direct_plan(c, from, to, w, base, plan, planned);
    if (ok) {
        *out = cg_val_new(c, nd);
        for (uint32_t k = 0; k < nd; k++) out->v[k] = src.v[plan[k]];
    }
    tl_free(plan);
    return ok;
}

CgVal cg_convert(Cg *c, const IrLayoutMap *from, CgVal src, IrElem e, const IrLayoutMap *to, const int64_t w[IR_MAX_RANK])
{
    CgVal out;
    if (convert_direct(c, from, src, to, w, 0, &out, false)) return out;
    return through_smem(c, from, src, e, to, w, 0);
}

/* ---- shape ops ------------------------------------------------------------------------------ */

/* Weights of the result axes in the source's row-major index. */
static void shape_weights(const IrOp *op, const IrType *st, const IrType *rt, int64_t w[IR_MAX_RANK])
{
    int64_t sstr[IR_MAX_RANK] = {0}, rstr[IR_MAX_RANK] = {0};
    for (int d = 0; d < st->rank; d++) sstr[d] = stride_of(st->shape, st->rank, d);
    for (int d = 0; d < rt->rank; d++) rstr[d] = stride_of(rt->shape, rt->rank, d);
    for (int d = 0; d < rt->rank; d++) {
        switch (op->code) {
        case IR_OP_BROADCAST: w[d] = st->shape[d] == 1 ? 0 : sstr[d]; break;
        case IR_OP_EXPAND_DIMS:
            w[d] = d == op->attr.i ? 0 : sstr[d < op->attr.i ? d : d - 1];
            break;
        case IR_OP_TRANS: w[d] = sstr[rt->rank - 1 - d]; break;
        case IR_OP_EXTRACT: w[d] = sstr[d]; break;   /* plus the first column (base) */
        default: w[d] = rstr[d]; break;   /* reshape: the same row-major index */
        }
    }
}

/* ir_layout_quad_shuffle's conversion: an 8-bit mma accumulator (m16n8 tiles: thread
 * (g, t) of a quad holds row g (and g + 8), columns 8n + 2t and 8n + 2t + 1) to the
 * 8-bit A operand (register r of K step ks: row g + 8 (r & 1), columns 32 ks + 16 (r >> 1)
 * + 4t .. + 3). Column 4t + j of a 16-column half lives in lane 2 (t & 1) + j / 2 of the
 * quad, tile 2h + t / 2; so each lane packs, per row half and 16 columns, its 4 bytes
 * (2 of each 8-column tile) into one word, and lane t reads the words of lanes 2 (t & 1)
 * and 2 (t & 1) + 1 (two shfl.sync.idx a register), keeping the low or the high half of
 * each by t / 2 (one prmt.b32). */
static CgVal quad_shuffle(Cg *c, const IrLayoutMap *from, CgVal src, const IrLayoutMap *to)
{
    LLVMBuilderRef b = c->b;
    LLVMTypeRef i32 = cg_i32(c), i8 = LLVMInt8TypeInContext(c->ctx);
    LLVMValueRef t = cg_and(b, c->lane, cg_i32c(c, 3));
    LLVMValueRef la = cg_add(b, cg_and(b, c->lane, cg_i32c(c, ~3)),
                             cg_mul(b, cg_and(b, t, cg_i32c(c, 1)), cg_i32c(c, 2)));
    LLVMValueRef lb = cg_add(b, la, cg_i32c(c, 1));
    /* prmt's selector: bytes 0, 1 of each word (t < 2) or 2, 3, the first word's low */
    LLVMValueRef sel = LLVMBuildSelect(b, LLVMBuildICmp(b, LLVMIntUGE, t, cg_i32c(c, 2), ""), cg_i32c(c, 0x7632),
                                       cg_i32c(c, 0x5410), "");
    uint32_t RM = (uint32_t)to->reps[0], KS = (uint32_t)to->ks, RN = (uint32_t)from->reps[1];
    CgVal out = cg_val_new(c, RM * KS * 16);
    for (uint32_t rm = 0; rm < RM; rm++)
        for (uint32_t ks = 0; ks < KS; ks++)
            for (uint32_t r = 0; r < 4; r++) {
                uint32_t hi = r & 1, rn0 = ks * 4 + 2 * (r >> 1);
                LLVMValueRef word = cg_i32c(c, 0);
                for (uint32_t q = 0; q < 4; q++) {
                    LLVMValueRef x = cg_at(src, (rm * RN + rn0 + q / 2) * 4 + 2 * hi + q % 2);
                    x = LLVMBuildZExt(b, x, i32, "");
                    word = LLVMBuildOr(b, word, LLVMBuildShl(b, x, cg_i32c(c, 8 * q), ""), "");
                }
                LLVMValueRef aa[4] = {cg_i32c(c, -1), word, la, cg_i32c(c, 31)};
                LLVMValueRef ab[4] = {cg_i32c(c, -1), word, lb, cg_i32c(c, 31)};
                LLVMValueRef xa = cg_intrinsic(c, "llvm.nvvm.shfl.sync.idx.i32", NULL, 0, aa, 4);
                LLVMValueRef xb = cg_intrinsic(c, "llvm.nvvm.shfl.sync.idx.i32", NULL, 0, ab, 4);
                LLVMValueRef pa[3] = {xa, xb, sel};
                LLVMValueRef reg = cg_intrinsic(c, "llvm.nvvm.prmt", NULL, 0, pa, 3);
                for (uint32_t j = 0; j < 4; j++)
                    out.v[(rm * KS + ks) * 16 + r * 4 + j] =
                        LLVMBuildTrunc(b, cg_lshr(b, reg, cg_i32c(c, 8 * j)), i8, "");
            }
    return out;
}

bool cg_shape_op(Cg *c, const IrOp *op)
{
    const IrType *st = cg_type(c, op->operands[0]), *rt = cg_type(c, op->results[0]);
    CgVal src = cg_get(c, op->operands[0]);
    IrLayoutMap to = ir_layout_map(rt);
    if (st->rank == 0) {                  /* splat, or a shape op on a scalar */
        CgVal out = cg_val_new(c, cg_layout_elems(&to));
        for (uint32_t k = 0; k < out.n; k++) out.v[k] = src.v[0];
        cg_set(c, op->results[0], out);
        return true;
    }
    IrLayoutMap from = ir_layout_map(st);
    int64_t w[IR_MAX_RANK] = {0};
    shape_weights(op, st, rt, w);
    if (op->code == IR_OP_CONVERT_LAYOUT && ir_layout_quad_shuffle(st, rt)) {
        cg_set(c, op->results[0], quad_shuffle(c, &from, src, &to));
        return true;
    }
    /* extract: the source's row-major index of result element (r.., c) is that of
     * (r.., c + first column) */
    int64_t base = op->code == IR_OP_EXTRACT ? op->attr.i : 0;
    if (ir_layout_in_registers((int)op->code, st->layout, rt->layout)) {
        /* planned without scratch (ir_op_scratch_bytes): shared memory
         * here could overlap the rings' buffers */
        CgVal out;
        if (!convert_direct(c, &from, src, &to, w, base, &out, true))
            return cg_error(c, op, "internal error: a '%s' planned in registers (ir_layout_in_registers) moves "
                            "elements between threads", ir_op_info[op->code].text);
        cg_set(c, op->results[0], out);
        return true;
    }
    if (base) {
        CgVal out;
        if (!convert_direct(c, &from, src, &to, w, base, &out, false)) out = through_smem(c, &from, src, st->elem, &to, w, base);
        cg_set(c, op->results[0], out);
        return true;
    }
    cg_set(c, op->results[0], cg_convert(c, &from, src, st->elem, &to, w));
    return true;
}

