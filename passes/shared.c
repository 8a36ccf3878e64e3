/* Shared-memory operands for tensor-core dots, loaded `stages` deep with async copies:
 * the software pipeline of a K loop (Triton's LoopPipeliner and the TritonGPU shared
 * encodings are the model). Runs after `layout`.
 *
 * require:    laid-out IR (pass_layout); a kernel's stages (f->stages, default 2)
 * guarantees: in every innermost `for` with a positive constant step, each operand of
 *             an mma dot that is a load in the loop body, or trans of one (read back
 *             transposed: local_load 1; attention's K^T; a load that several dots
 *             read, as A and as B^T, is one buffer read several ways), (its pointers and mask
 *             computed from the induction variable and values from outside the loop,
 *             by pure ops; its `other` absent or +0) is instead copied into a
 *             shared-memory ring of S = stages buffers: the copies of the first S-1
 *             iterations before the loop, then in iteration j the wait for j's copy,
 *             the read of j's stage into the operand layout, and the copy of iteration
 *             j+S-1 (masked off past the end) into the stage iteration j-1 read.
 *             Values are unchanged (a copy past the end writes zeros that nothing reads).
 *
 *   for %k = %lo to %hi step 32 iter(%acc) {        %buf = local_alloc 0 : f16[3, 128, 32] #shared
 *     %a  = load %pa, %ma, %zero : #blocked           (copies of iterations 0, 1; commit each)
 *     %ao = convert_layout %a : #dot_a          ->  for %k ... {
 *     %d  = dot %ao, %bo, %acc                        %s = rem (div (sub %k, %lo), 32), 3
 *     yield %d }                                      async_wait 1
 *                                                     %ao = local_load %buf, %s : #dot_a
 *                                                     async_copy %buf, %s2, %pa2, %ma2  (k + 64)
 *                                                     async_commit
 *                                                     %d = dot %ao, %bo, %acc ... }
 *                                                   async_wait 0
 *
 * The shared layout of a buffer (ir/layout.h): rows along the loaded tile's contiguous
 * axis, 16-byte chunks XOR-swizzled by row so that the eight rows an ldmatrix reads
 * fall in distinct banks (vec = 16 bytes of elements, per_phase = max(1, 128 / row
 * bytes), max_phase = min(8, row bytes / 16)).
 *
 * f8 operands that are not K-major (the f8 transpose): wgmma reads 8-bit operands only
 * K-major (its transpose bits are for 16-bit types), so a view of an f8 load whose
 * contiguous axis is not its operand's K (B loaded [K, N] with N contiguous, as
 * `b + rk[:, None] * stride_bk + rn[None, :]` or load_block of a [K, N] tensor writes it;
 * A read as trans of a [K, M] tile) is staged (pass_fp8_transpose_ok: the knob
 * fp8_transpose, sm_90a, no producer warpgroup, one consumer warpgroup, no cluster). Its
 * ring stays as copied (cp.async or TMA, N-major), and the pass adds a K-major NVMMA
 * buffer of 2 slots after the rings; in iteration j the warps read the stage into
 * registers as the tile [other, K] (staging_regs_type: 16 consecutive K a thread, read
 * transposed from an N-major B's stage), write it into slot j % 2 (16-byte stores),
 * fence the async proxy and meet at a barrier before the dot reads the slot in place:
 *
 *   %t  = local_alloc 98304 : f8e4m3[2, BK, BN] #shared(K-major, swizzle of BK bytes)
 *   for ... {  (wait for stage %s)
 *     %r = local_load 1 %ring, %s : f8e4m3[BN, BK] #blocked     (the stage, transposed)
 *     local_store 1 %t, %j2, %r                                 (%j2 = rem j, 2)
 *     fence_async                                               (generic -> async proxy)
 *     barrier                                                   (every warp's writes)
 *     %b = local_load 0 %t, %j2 : f8e4m3[BK, BN] #shared(K-major view)
 *     %d = dot %a, %b, %acc ... }
 *
 * Slot j % 2 was last read by iteration j-2's wgmma; codegen keeps no group of such a
 * dot in flight past its iteration (cg_wgmma.c in_flight_ok: the view is no ring stage,
 * so every dot ends with wait_group 0), and every warpgroup passed iteration j-1's
 * barrier after that wait, so the writes of iteration j never overtake a read. Where
 * the pass cannot stage (the knob off, sm_80, ws), the load is no candidate and the dot
 * goes back to mma.sync through f16 (settle_wgmma). The cost: one read (byte loads: a
 * thread's 16 K are rows apart in the N-major stage) and one write (16-byte stores) of
 * the tile in shared memory per iteration by the warps, a barrier, and no wgmma group
 * in flight across iterations.
 *
 * Placement: buffers live in the kernel's buffer area, which codegen puts after the
 * scratch that its own lowerings use (conversions, reductions). Only innermost loops
 * are pipelined, so the buffers of two loops are never live at once: each loop's
 * buffers are packed from offset 0, 128-byte aligned, and the area is as large as the
 * largest loop's. A loop whose buffers would not fit the target's shared memory is
 * pipelined with fewer stages, or not at all. */
#include <assert.h>
#include "passes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/layout.h"
#include "ir/layout_map.h"
#include "ir/target.h"

#define MAX_CANDS 8

#define MAX_VIEWS 4

typedef VEC(IrOp *) BlockLoads;

/* A load and the dot operands read from it: convert_layout(load), or
 * convert_layout(trans(load)) (trans set). */
typedef struct View {
    IrOp *trans, *cvt;
    bool staged;                 /* an f8 wgmma operand that is not K-major in the ring:
                                  * transposed through `tbuf` (pass_fp8_transpose_ok) */
    IrValue tbuf;
} View;

typedef struct Cand {
    IrOp *load;
    View views[MAX_VIEWS];
    int nviews;
    IrValue buf;
    bool multicast;              /* the CTAs of the cluster copy shares of it into every CTA */
} Cand;

typedef struct Pipe {
    IrFunc *f;
    IrOp *loop;
    IrBlock *body;
    bool *in_slice;              /* per value: computed by an op of a slice */
    IrValue *map;                /* old value -> clone, for one clone of the slices */
    uint32_t nold;               /* values that existed before the pass */
} Pipe;

/* ---- which loads ------------------------------------------------------------------------ */

/* Marks the ops of the body that compute v; false if v depends on a loop-carried value
 * or on an op that is not pure. */
static bool mark_slice(Pipe *p, IrValue v)
{
    IrFunc *f = p->f;
    if (!ir_value_defined_in(f, v, p->body) || p->in_slice[v]) return true;
    if (v == p->body->args[0]) return true;               /* the induction variable */
    IrOp *d = f->values[v].def;
    if (!d || d->parent != p->body || !(ir_op_info[d->code].flags & IR_P) || d->nregions) return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!mark_slice(p, d->operands[i])) return false;
    p->in_slice[v] = true;
    return true;
}

static bool is_plus_zero(const IrFunc *f, IrValue v)
{
    const IrOp *d = f->values[v].def;
    if (!d) return false;
    if (d->code == IR_OP_SPLAT) return is_plus_zero(f, d->operands[0]);
    return d->code == IR_OP_CONST && d->attr.i == 0 && d->attr.f == 0 && !signbit(d->attr.f);
}

static uint32_t use_count(const IrFunc *f, IrValue v, const IrOp *from)
{
    uint32_t n = 0;
    (void)f;
    for (const IrOp *op = from; op; op = op->next) {
        for (uint32_t i = 0; i < op->noperands; i++) n += op->operands[i] == v;
        for (uint32_t r = 0; r < op->nregions; r++) n += use_count(f, v, op->regions[r].first);
    }
    return n;
}

static bool writes_memory(const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (ir_op_info[op->code].flags & IR_W) return true;
        for (uint32_t r = 0; r < op->nregions; r++)
            if (writes_memory(&op->regions[r])) return true;
    }
    return false;
}

/* May the copies of loads of elem run ahead of blk's writes? Yes where every write is
 * a relaxed atomic (atomicity only, no order) of another element type
 * (LANGUAGE-REFERENCE.md "Memory model": a program reads back memory written as another
 * type, as other lanes' writes, only after a barrier; the fused attention backward's f32
 * atomic adds into dq_accum beside its bf16 loads of Q and dO), and there is no
 * barrier, ordering atomic, store or other write (a loop that stores stays as it was). */
static bool writes_other_types(const IrFunc *f, const IrBlock *blk, IrElem elem)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (ir_op_info[op->code].flags & IR_W) {
            bool atomic = op->code >= IR_OP_ATOMIC_ADD && op->code <= IR_OP_ATOMIC_CAS;
            if (!(atomic && op->attr.i == IR_SEM_RELAXED)) return false;
            if (ir_value_type(f, op->operands[0])->pointee == elem) return false;
        }
        for (uint32_t r = 0; r < op->nregions; r++)
            if (!writes_other_types(f, &op->regions[r], elem)) return false;
    }
    return true;
}

static bool is_wgmma_layout(const IrLayout *l)
{
    return l && l->kind == IR_LAYOUT_DOT_OPERAND && l->parent->kind == IR_LAYOUT_MMA && l->parent->version == 3;
}

/* v converted into an mma operand layout (rank 2; 16- or 32-bit elements, or 8-bit ones
 * for wgmma: is_candidate checks that they are K-major)? */
static bool is_operand_convert(const IrFunc *f, const IrOp *u, IrValue v)
{
    if (u->code != IR_OP_CONVERT_LAYOUT || u->operands[0] != v) return false;
    const IrType *rt = ir_value_type(f, u->results[0]);
    const IrLayout *l = rt->layout;
    int bytes = ir_elem_bytes(rt->elem);
    return rt->rank == 2 && l->kind == IR_LAYOUT_DOT_OPERAND && l->parent->kind == IR_LAYOUT_MMA &&
           (bytes == 2 || bytes == 4 || (bytes == 1 && is_wgmma_layout(l)));
}

static int fast_axis(const IrFunc *f, const Cand *cd);

/* wgmma reads 8-bit operands only K-major (no transpose bit for them): the view's
 * contiguous axis (the load's, swapped by a trans) must be its operand's K axis (1 for
 * A, 0 for B). */
static bool view_k_major(const IrFunc *f, const Cand *cd, const View *vw)
{
    const IrLayout *l = ir_value_type(f, vw->cvt->results[0])->layout;
    int fast = fast_axis(f, cd);
    if (vw->trans) fast = 1 - fast;
    return fast == (l->op == 0 ? 1 : 0);
}

bool pass_fp8_transpose_ok(const IrFunc *f)
{
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    return f->module->knobs.fp8_transpose && t->wgmma && !f->ws && ir_consumer_groups(f) == 1 &&
           ir_cluster_size(f) == 1;
}

/* The K axis of a view's operand (1 for A, 0 for B). */
static int view_k_axis(const IrFunc *f, const View *vw)
{
    return ir_value_type(f, vw->cvt->results[0])->layout->op == 0 ? 1 : 0;
}

/* Can the view be staged: a wgmma operand whose tile a K-major NVMMA buffer holds? */
static bool can_stage(const IrFunc *f, const View *vw)
{
    const IrType *vt = ir_value_type(f, vw->cvt->results[0]);
    return pass_fp8_transpose_ok(f) && is_wgmma_layout(vt->layout) && pass_nvmma_swizzle(vt, view_k_axis(f, vw)) != 0;
}

/* The only use of v in the body (NULL if it has none, several, or one in a region). */
static IrOp *only_use(const IrFunc *f, IrValue v, const IrBlock *body)
{
    IrOp *use = NULL;
    for (IrOp *op = body->first; op; op = op->next) {
        for (uint32_t i = 0; i < op->noperands; i++)
            if (op->operands[i] == v) {
                if (use) return NULL;
                use = op;
            }
        for (uint32_t r = 0; r < op->nregions; r++)
            if (use_count(f, v, op->regions[r].first)) return NULL;
    }
    return use;
}

/* A load of the body that can be copied: every use converts it (or trans of it, used
 * once) into an mma operand layout; those are its views, read back from one buffer. */
static bool is_candidate(Pipe *p, IrOp *ld, Cand *out)
{
    IrFunc *f = p->f;
    bool block = ld->code == IR_OP_BLOCK_LOAD;
    if ((ld->code != IR_OP_LOAD && !block) || ld->parent != p->body) return false;
    if (!block && ld->noperands > 2 && !is_plus_zero(f, ld->operands[2])) return false;
    IrValue v = ld->results[0];
    const IrLayout *ll = ir_value_type(f, v)->layout;   /* async copies take blocked pointers */
    if (!block && (!ll || ll->kind != IR_LAYOUT_BLOCKED)) return false;
    int n = 0;
    memset(out->views, 0, sizeof out->views);
    for (IrOp *op = p->body->first; op; op = op->next) {
        for (uint32_t r = 0; r < op->nregions; r++)
            if (use_count(f, v, op->regions[r].first)) return false;
        bool uses = false;
        for (uint32_t i = 0; i < op->noperands; i++) uses |= op->operands[i] == v;
        if (!uses) continue;
        if (n == MAX_VIEWS) return false;
        if (is_operand_convert(f, op, v)) {
            out->views[n].cvt = op;
            out->views[n++].trans = NULL;
            continue;
        }
        IrOp *cv = op->code == IR_OP_TRANS ? only_use(f, op->results[0], p->body) : NULL;
        if (!cv || !is_operand_convert(f, cv, op->results[0])) return false;
        out->views[n].cvt = cv;
        out->views[n++].trans = op;
    }
    if (n == 0) return false;
    /* a copy could overtake a store */
    if (writes_memory(p->body) && !writes_other_types(f, p->body, ir_value_type(f, v)->elem)) return false;
    out->load = ld;
    out->nviews = n;
    /* an f8 view that is not K-major is transposed into a buffer of its own, or the
     * load is no candidate (its dot then goes back to mma.sync: settle_wgmma) */
    if (ir_elem_bytes(ir_value_type(f, v)->elem) == 1)
        for (int q = 0; q < n; q++)
            if (!view_k_major(f, out, &out->views[q])) {
                if (!can_stage(f, &out->views[q])) return false;
                out->views[q].staged = true;
            }
    if (block) {
        for (uint32_t i = 0; i < ld->noperands; i++)
            if (!mark_slice(p, ld->operands[i])) return false;
        out->load = ld;
        out->nviews = n;
        return true;
    }
    if (ld->noperands > 1 && ir_value_type(f, ld->operands[1])->layout != ir_value_type(f, ld->operands[0])->layout)
        return false;
    if (!mark_slice(p, ld->operands[0]) || (ld->noperands > 1 && !mark_slice(p, ld->operands[1]))) return false;
    out->load = ld;
    out->nviews = n;
    return true;
}

/* ---- building --------------------------------------------------------------------------- */

/* The swizzle of a wgmma operand's rows (the NVMMA form): the widest of 128, 64 and 32
 * bytes that divides a row, or 0 when none does or the other extent is not a multiple
 * of 8 rows (a swizzle atom). */
int32_t pass_nvmma_swizzle(const IrType *t, int fast)
{
    int32_t row_bytes = t->shape[fast] * ir_elem_bytes(t->elem);
    if (t->shape[1 - fast] % 8) return 0;
    for (int32_t sw = 128; sw >= 32; sw /= 2)
        if (row_bytes % sw == 0) return sw;
    return 0;
}

/* The ring's layout for a loaded tile t. For mma.sync: rows along t's contiguous axis,
 * 16-byte chunks XORed with the row's phase so that ldmatrix's 8 rows hit distinct
 * banks. For wgmma (nvmma): the NVMMA form of ir/layout.h, the rows cut into blocks of
 * `swizzle` bytes, each the swizzle of that width (chunk ^= row / per_phase %
 * max_phase, per_phase = 128 / swizzle, max_phase = swizzle / 16), which is what the
 * wgmma descriptors of that swizzle mode read. */
static const IrLayout *shared_layout(IrCtx *c, const IrType *t, int fast, bool nvmma)
{
    int slow = 1 - fast;
    int32_t row_bytes = t->shape[fast] * ir_elem_bytes(t->elem);
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_SHARED;
    k.rank = 3;
    k.order[0] = fast + 1;
    k.order[1] = slow + 1;
    k.order[2] = 0;
    k.vec = 16 / ir_elem_bytes(t->elem);
    if (nvmma) {
        k.swizzle_bytes = pass_nvmma_swizzle(t, fast);
        k.per_phase = 128 / k.swizzle_bytes;
        k.max_phase = k.swizzle_bytes / 16;
        return ir_layout_intern(c, &k);
    }
    k.per_phase = row_bytes >= 128 ? 1 : 128 / row_bytes;
    k.max_phase = row_bytes >= 128 ? 8 : row_bytes >= 16 ? row_bytes / 16 : 1;
    if (k.max_phase < 1) k.max_phase = 1;
    if (k.per_phase < 1) k.per_phase = 1;
    return ir_layout_intern(c, &k);
}

const IrLayout *pass_nvmma_layout(IrCtx *c, const IrType *t, int fast) { return shared_layout(c, t, fast, true); }

/* A candidate read by wgmma (through any of its views) gets an NVMMA ring, when its
 * tile has a swizzle that fits. */
/* The axis of the candidate's tile that is contiguous in memory: the register layout's
 * fastest for a load, the stride-1 axis for a block load. */
static int fast_axis(const IrFunc *f, const Cand *cd)
{
    if (cd->load->code == IR_OP_BLOCK_LOAD) return blockload_fast_axis(f, cd->load);
    return ir_value_type(f, cd->load->results[0])->layout->order[0];
}

static bool wants_nvmma(const IrFunc *f, const Cand *cd)
{
    const IrType *t = ir_value_type(f, cd->load->results[0]);
    if (cd->load->code == IR_OP_BLOCK_LOAD) return true;      /* TMA writes the NVMMA form */
    bool any = false;
    for (int q = 0; q < cd->nviews; q++) any |= is_wgmma_layout(ir_value_type(f, cd->views[q].cvt->results[0])->layout);
    int bytes = ir_elem_bytes(t->elem);
    return any && (bytes == 2 || bytes == 1) && pass_nvmma_swizzle(t, t->layout->order[0]) != 0;
}

static IrValue iconst(IrBuilder *b, const IrType *t, int64_t v) { return ir_const_int(b, t, v); }

/* Clones the marked ops of the body, in order, at b, with the induction variable
 * standing for iv; fills p->map. */
static void clone_slices(Pipe *p, IrBuilder *b, IrValue iv)
{
    IrFunc *f = p->f;
    for (uint32_t v = 0; v < p->nold; v++) p->map[v] = v;
    p->map[p->body->args[0]] = iv;
    for (IrOp *op = p->body->first; op; op = op->next) {
        if (op->nresults != 1 || op->results[0] >= p->nold || !p->in_slice[op->results[0]]) continue;
        IrValue ops[8];
        for (uint32_t i = 0; i < op->noperands && i < 8; i++) ops[i] = p->map[op->operands[i]];
        const IrType *t = ir_value_type(f, op->results[0]);
        IrOp *n = ir_build(b, op->code, ops, op->noperands, &t, 1, 0);
        n->attr = op->attr;
        n->loc = op->loc;
        p->map[op->results[0]] = n->results[0];
    }
}

/* The copies of every candidate for the iteration whose induction variable is iv
 * into `stage`, masked off when iv >= hi, then a commit. */
static void emit_copies(Pipe *p, IrBuilder *b, Cand *cs, int n, IrValue iv, IrValue stage)
{
    IrFunc *f = p->f;
    IrCtx *c = f->module->ctx;
    clone_slices(p, b, iv);
    IrValue live = ir_build_cmp(b, IR_CMP_LT, iv, p->loop->operands[1]);
    for (int i = 0; i < n; i++) {
        const IrOp *ld = cs[i].load;
        IrValue ptr = p->map[ld->operands[0]];
        const IrType *mt = ir_type_like(c, ir_value_type(f, ptr), ir_type_scalar(c, IR_I1));
        mt = ir_type_with_layout(c, mt, ir_value_type(f, ptr)->layout);
        IrValue mask = ir_build1(b, IR_OP_SPLAT, mt, &live, 1);
        if (ld->noperands > 1) mask = ir_build_binary(b, IR_OP_AND, p->map[ld->operands[1]], mask);
        IrValue ops[4] = {cs[i].buf, stage, ptr, mask};
        ir_build(b, IR_OP_ASYNC_COPY, ops, 4, NULL, 0, 0);
    }
    ir_build(b, IR_OP_ASYNC_COMMIT, NULL, 0, NULL, 0, 0);
}

/* The TMA copies of every candidate (block loads) for the iteration whose induction
 * variable is iv into `stage`, each predicated on iv < hi: a copy past the end is not
 * issued (nothing would wait for it, and it could land after the loop, in memory the
 * epilogue uses). */
static void emit_tma_copies(Pipe *p, IrBuilder *b, Cand *cs, int n, IrValue iv, IrValue stage, IrValue bars)
{
    clone_slices(p, b, iv);
    IrValue live = ir_build_cmp(b, IR_CMP_LT, iv, p->loop->operands[1]);
    for (int i = 0; i < n; i++) {
        const IrOp *ld = cs[i].load;
        IrValue ops[4 + 3 * IR_MAX_RANK + 1] = {cs[i].buf, stage, bars};
        uint32_t k = 3;
        for (uint32_t j = 0; j < ld->noperands; j++) ops[k++] = p->map[ld->operands[j]];
        ops[k++] = live;
        ir_build(b, IR_OP_TMA_COPY, ops, k, NULL, 0, 0)->attr.i = cs[i].multicast;
    }
}

/* The mbarriers of a TMA ring: i64 [stages, 1, 1] in a plain shared layout. */
static const IrType *barriers_type(IrCtx *c, int stages)
{
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_SHARED;
    k.rank = 3;
    k.order[0] = 2;
    k.order[1] = 1;
    k.order[2] = 0;
    k.vec = 1;
    k.per_phase = 1;
    k.max_phase = 1;
    int32_t shape[3] = {stages, 1, 1};
    return ir_type_with_layout(c, ir_type_tile(c, ir_type_scalar(c, IR_I64), 3, shape), ir_layout_intern(c, &k));
}

static int64_t const_value(const IrFunc *f, IrValue v, bool *ok)
{
    const IrOp *d = f->values[v].def;
    *ok = d && d->code == IR_OP_CONST && ir_elem_is_int(ir_value_type(f, v)->elem);
    return *ok ? d->attr.i : 0;
}

static uint32_t buffer_bytes(const IrType *t, int stages)
{
    return (uint32_t)(ir_type_numel(t) * ir_elem_bytes(t->elem) * stages + 127) & ~127u;
}

/* The shared-memory scratch the ops of blk need while the loop's buffers are live (the
 * rule is ir_op_scratch_bytes, which the plan's map reads too): the ring gets the rest
 * of the block's shared memory. */

static bool is_view(const IrOp *op, const Cand *cs, int n)
{
    for (int i = 0; i < n; i++)
        for (int v = 0; v < cs[i].nviews; v++)
            if (cs[i].views[v].cvt == op || cs[i].views[v].trans == op) return true;
    return false;
}

static uint64_t scratch_bound(const IrFunc *f, const IrBlock *blk, const Cand *cs, int n)
{
    uint64_t worst = 0;
    for (const IrOp *op = blk->first; op; op = op->next) {
        for (uint32_t r = 0; r < op->nregions; r++) {
            uint64_t b = scratch_bound(f, &op->regions[r], cs, n);
            if (b > worst) worst = b;
        }
        /* the conversions that read the operands from the ring (cs[0..n)) become
         * local_loads, which need none */
        if (is_view(op, cs, n)) continue;
        uint64_t b = ir_op_scratch_bytes(f, op);
        if (b > worst) worst = b;
    }
    return worst;
}

/* The layout of one stage of a buffer in layout bl, read as it is or transposed: the
 * view a wgmma reads in place (local_load into a shared layout copies nothing). */
static const IrLayout *stage_view_layout(IrCtx *c, const IrLayout *bl, bool transposed)
{
    IrLayout k = *bl;
    k.rank = 2;
    int fast = bl->order[0] - 1;
    if (transposed) fast = 1 - fast;
    k.order[0] = fast;
    k.order[1] = 1 - fast;
    k.order[2] = 0;
    return ir_layout_intern(c, &k);
}

/* The registers a staged view's tile passes through: [other, K] (the view's K axis
 * last), blocked with 16 bytes of K a thread (a 16-byte store into the K-major slot),
 * the lanes along K as far as it goes, the warps along the other axis. */
static const IrType *staging_regs_type(const IrFunc *f, const View *vw)
{
    IrCtx *c = f->module->ctx;
    const IrType *vt = ir_value_type(f, vw->cvt->results[0]);
    int kax = view_k_axis(f, vw);
    int32_t shape[2] = {vt->shape[1 - kax], vt->shape[kax]}, spt[2], tpw[2], wpc[2];
    int32_t warps = ir_func_warps(f);
    spt[0] = 1;
    spt[1] = 16 / ir_elem_bytes(vt->elem);
    if (spt[1] > shape[1]) spt[1] = shape[1];
    tpw[1] = shape[1] / spt[1] < 32 ? shape[1] / spt[1] : 32;
    tpw[0] = 32 / tpw[1];
    int32_t room0 = shape[0] / tpw[0] < 1 ? 1 : shape[0] / tpw[0];
    wpc[0] = warps < room0 ? warps : room0;
    int32_t rest = warps / wpc[0], room1 = shape[1] / (spt[1] * tpw[1]) < 1 ? 1 : shape[1] / (spt[1] * tpw[1]);
    wpc[1] = rest < room1 ? rest : room1;
    wpc[0] *= rest / wpc[1];               /* too few elements: warps hold copies */
    const IrLayout *l = ir_layout_blocked(c, 2, spt, tpw, wpc, NULL);
    return ir_type_with_layout(c, ir_type_tile(c, ir_type_elem(c, vt), 2, shape), l);
}

/* The local_loads that replace the views of every candidate: stage `stage` of its
 * buffer, in place (a wgmma view of an NVMMA stage) or into the operand's registers. */
static void emit_views(IrFunc *f, IrBuilder *b, Cand *cs, int n, IrValue stage, IrValue j)
{
    IrCtx *c = f->module->ctx;
    /* the f8 transposes first: each staged view's stage read into registers as loaded
     * (N-major for B) and written into slot j % 2 of its K-major buffer; then one
     * fence (the writes are generic-proxy, wgmma reads through the async proxy) and a
     * barrier (every warp's writes are done) before the dots read the slots */
    IrValue slot = IR_NO_VALUE;
    for (int i = 0; i < n; i++)
        for (int q = 0; q < cs[i].nviews; q++) {
            const View *vw = &cs[i].views[q];
            if (!vw->staged) continue;
            if (slot == IR_NO_VALUE) slot = ir_build_binary(b, IR_OP_REM, j, iconst(b, ir_value_type(f, j), 2));
            /* the registers hold the tile [other, K] (K last, 16 consecutive K a thread):
             * read from the ring transposed where that is not its order, written into
             * the slot (the view's order) transposed for a B, in 16-byte stores */
            int kax = view_k_axis(f, vw);
            const IrType *rt = staging_regs_type(f, vw);
            IrValue lops[2] = {cs[i].buf, stage};
            IrOp *ll = ir_build(b, IR_OP_LOCAL_LOAD, lops, 2, &rt, 1, 0);
            ll->attr.i = (vw->trans != NULL) ^ (kax == 0);
            IrValue sops[3] = {vw->tbuf, slot, ll->results[0]};
            ir_build(b, IR_OP_LOCAL_STORE, sops, 3, NULL, 0, 0)->attr.i = kax == 0;
        }
    if (slot != IR_NO_VALUE) {
        ir_build(b, IR_OP_FENCE_ASYNC, NULL, 0, NULL, 0, 0);
        ir_build(b, IR_OP_BARRIER, NULL, 0, NULL, 0, 0);
    }
    for (int i = 0; i < n; i++)
        for (int q = 0; q < cs[i].nviews; q++) {
            const View *vw = &cs[i].views[q];
            if (vw->staged) {   /* the K-major slot, viewed in place */
                const IrType *lt = ir_value_type(f, vw->cvt->results[0]);
                lt = ir_type_with_layout(c, lt, stage_view_layout(c, ir_value_type(f, vw->tbuf)->layout, false));
                IrValue ops[2] = {vw->tbuf, slot};
                IrOp *ll = ir_build(b, IR_OP_LOCAL_LOAD, ops, 2, (const IrType *[]){lt}, 1, 0);
                ll->attr.i = 0;
                ir_replace_all_uses(f, vw->cvt->results[0], ll->results[0]);
                continue;
            }
            IrValue ops[2] = {cs[i].buf, stage};
            const IrType *lt = ir_value_type(f, vw->cvt->results[0]);
            const IrLayout *bl = ir_value_type(f, cs[i].buf)->layout;
            if (bl->swizzle_bytes && is_wgmma_layout(lt->layout))
                lt = ir_type_with_layout(c, lt, stage_view_layout(c, bl, vw->trans != NULL));
            IrOp *ll = ir_build(b, IR_OP_LOCAL_LOAD, ops, 2, (const IrType *[]){lt}, 1, 0);
            ll->attr.i = vw->trans != NULL;       /* 1: the stage read transposed */
            ir_replace_all_uses(f, vw->cvt->results[0], ll->results[0]);
        }
}

/* The ring of a loop whose candidates are all block loads, by TMA (b is before the
 * loop, after the buffers and the barriers: `bars`, full, one arrival per copy with its
 * bytes; `empty`, one arrival per warp):
 *
 *   tma_copy %buf, 0, %bars, ... (iteration 0), ... (iterations 1 .. S-2)
 *   for %k ... {
 *     %s = rem (div (sub %k, %lo), step), S      %ph = rem (div (j, S)), 2
 *     tma_wait 0 %bars, %s, %ph                  the copy of iteration j has landed
 *     %ao = local_load %buf, %s ... dot ...
 *     mbarrier_arrive %empty, %sp, j > 0          each warp is done with iteration j-1's stage sp
 *     tma_wait 1 %empty, %sp, (j-1)/S % 2, j > 0  the issuing thread waits for every warp
 *     tma_copy %buf, %sp, %bars, ... (iteration j + S-1, if < hi)
 *   }
 *   async_wait 0                                 (settles a wgmma group left in flight)
 *
 * The copies of iteration j+S-1 go into the stage sp = (j-1) % S that iteration j-1
 * read, once every warp has released it (a wgmma dot kept in flight retires iteration
 * j-1's group before it ends, cg_wgmma.c); only the issuing thread waits, the other
 * warps go on (TILE_TMA_RELEASE=barrier: a barrier of the program instead, the first
 * form, kept for measurements). */
static bool pipeline_tma(Pipe *p, IrBuilder *b, Cand *cs, int n, int stages, IrValue bars, IrValue empty)
{
    IrFunc *f = p->f;
    IrCtx *c = f->module->ctx;
    IrOp *loop = p->loop;
    bool ok;
    int64_t step = const_value(f, loop->operands[2], &ok);
    int dist = stages - 1;
    IrValue lo = loop->operands[0];
    const IrType *ivt = ir_value_type(f, lo), *st = ir_type_scalar(c, IR_I32);
    for (int d = 0; d < dist; d++) {
        IrValue iv = d ? ir_build_binary(b, IR_OP_ADD, lo, iconst(b, ivt, d * step)) : lo;
        emit_tma_copies(p, b, cs, n, iv, iconst(b, st, d), bars);
    }
    ir_builder_before(b, p->body->first);
    IrValue iv = p->body->args[0];
    IrValue j = ir_build_binary(b, IR_OP_DIV, ir_build_binary(b, IR_OP_SUB, iv, lo), iconst(b, ivt, step));
    if (ivt->elem != IR_I32) j = ir_build1(b, IR_OP_CONVERT, st, &j, 1);
    IrValue stage = ir_build_binary(b, IR_OP_REM, j, iconst(b, st, stages));
    IrValue phase = ir_build_binary(b, IR_OP_REM, ir_build_binary(b, IR_OP_DIV, j, iconst(b, st, stages)), iconst(b, st, 2));
    /* A dot that can stay in flight into the next iteration (one wgmma dot, 3 stages or
     * more: cg_wgmma.c) releases iteration j-1's stage only once its wait has retired
     * that group, at the end of iteration j: the copies come after the dot. Otherwise
     * the dots are done with stage j when iteration j ends: each warp releases it there,
     * and the copies of iteration j+S-1 go at the top of iteration j, into the stage
     * iteration j-1 read, as early as they can (a ring of 2 stages then still overlaps
     * a whole iteration). */
    bool wgmma_views = true;
    for (int i = 0; i < n; i++)
        for (int q = 0; q < cs[i].nviews; q++)
            wgmma_views &= is_wgmma_layout(ir_value_type(f, cs[i].views[q].cvt->results[0])->layout);
    /* The top form is the one for a loop of several dots whose copies a producer
     * warpgroup issues (ws: the consumers release each stage as soon as their dots are
     * done with it); without a producer it is opt-in (TILE_TMA_EARLY=1: the issuing
     * thread's wait for the release holds up its warpgroup, 10% slower in attention) */
    const TileKnobs *kn = &f->module->knobs;
    int ndots = ir_count_ops(p->body, IR_OP_DOT);
    bool top = kn->tma_early || (f->ws && ndots > 1);
    bool late = !top || (stages >= 3 && ndots == 1 && wgmma_views);
    bool cluster = false;   /* a multicast ring: each CTA's warps release the stage in every CTA */
    for (int i = 0; i < n; i++) cluster |= cs[i].multicast;
    bool barrier = kn->tma_release == 1 && !cluster;   /* every warp waits (the first form) */
    if (!late && !barrier) {
        IrValue prev_stage = ir_build_binary(b, IR_OP_REM, ir_build_binary(b, IR_OP_ADD, j, iconst(b, st, dist)), iconst(b, st, stages));
        IrValue after_first = ir_build_cmp(b, IR_CMP_LT, iconst(b, st, 0), j);
        IrValue jm1 = ir_build_binary(b, IR_OP_SUB, j, iconst(b, st, 1));
        IrValue ephase = ir_build_binary(b, IR_OP_REM, ir_build_binary(b, IR_OP_DIV, jm1, iconst(b, st, stages)), iconst(b, st, 2));
        IrValue eops[4] = {empty, prev_stage, ephase, after_first};
        ir_build(b, IR_OP_TMA_WAIT, eops, 4, NULL, 0, 0)->attr.i = 1;
        emit_tma_copies(p, b, cs, n, ir_build_binary(b, IR_OP_ADD, iv, iconst(b, ivt, dist * step)), prev_stage, bars);
    }
    IrValue wops[3] = {bars, stage, phase};
    ir_build(b, IR_OP_TMA_WAIT, wops, 3, NULL, 0, 0);
    emit_views(f, b, cs, n, stage, j);
    IrOp *y = p->body->last;
    IrBuilder e;
    if (y && y->code == IR_OP_YIELD) ir_builder_before(&e, y);
    else ir_builder_at_end(&e, p->body);
    e.loc = loop->loc;
    if (!late && !barrier) {
        IrValue aops[2] = {empty, stage};
        ir_build(&e, IR_OP_MBARRIER_ARRIVE, aops, 2, NULL, 0, 0)->attr.i = cluster;
        goto done;
    }
    /* iteration j-1's stage (the one j+S-1's copies refill): every warp releases it
     * (its reads are done: a wgmma dot has retired j-1's group before it ends), and the
     * issuing thread waits for all of them before the copies (from iteration 1 on; the
     * stage of iteration -1 was never read) */
    IrValue next_stage = ir_build_binary(&e, IR_OP_REM, ir_build_binary(&e, IR_OP_ADD, j, iconst(&e, st, dist)), iconst(&e, st, stages));
    if (barrier) {
        ir_build(&e, IR_OP_BARRIER, NULL, 0, NULL, 0, 0);
        emit_tma_copies(p, &e, cs, n, ir_build_binary(&e, IR_OP_ADD, iv, iconst(&e, ivt, dist * step)), next_stage, bars);
        goto done;
    }
    IrValue after_first = ir_build_cmp(&e, IR_CMP_LT, iconst(&e, st, 0), j);
    IrValue aops[3] = {empty, next_stage, after_first};
    ir_build(&e, IR_OP_MBARRIER_ARRIVE, aops, 3, NULL, 0, 0)->attr.i = cluster;
    IrValue jm1 = ir_build_binary(&e, IR_OP_SUB, j, iconst(&e, st, 1));
    IrValue ephase = ir_build_binary(&e, IR_OP_REM, ir_build_binary(&e, IR_OP_DIV, jm1, iconst(&e, st, stages)), iconst(&e, st, 2));
    IrValue eops[4] = {empty, next_stage, ephase, after_first};
    ir_build(&e, IR_OP_TMA_WAIT, eops, 4, NULL, 0, 0)->attr.i = 1;
    IrValue next = ir_build_binary(&e, IR_OP_ADD, iv, iconst(&e, ivt, dist * step));
    emit_tma_copies(p, &e, cs, n, next, next_stage, bars);
done:
    for (int i = 0; i < n; i++) {
        for (int q = 0; q < cs[i].nviews; q++) {
            ir_op_remove(cs[i].views[q].cvt);
            if (cs[i].views[q].trans) ir_op_remove(cs[i].views[q].trans);
        }
        ir_op_remove(cs[i].load);
    }
    ir_builder_before(b, loop->next);
    ir_build(b, IR_OP_ASYNC_WAIT, NULL, 0, NULL, 0, 0)->attr.i = 0;
    tl_free(p->in_slice);
    tl_free(p->map);
    return true;
}


/* In a kernel of clusters (passes/cluster.c), the ring's block loads that are the same
 * in every CTA (`multicast`) are copied by TMA multicast where their stage splits among
 * the CTAs (ir_multicast_share); true if any is (cs[i].multicast set). Such a ring's
 * stages are released by every CTA's warps. */
static bool multicast_ring(const IrFunc *f, Cand *cs, int n)
{
    int ctas = ir_cluster_size(f);
    bool any = false;
    for (int i = 0; i < n; i++) {
        cs[i].multicast = (cs[i].load->attr.i & IR_BLOCK_MULTICAST) &&
                          ir_multicast_share(ir_value_type(f, cs[i].buf), ctas) != IR_MULTICAST_NONE;
        any |= cs[i].multicast;
    }
    return any;
}

/* A barrier of the cluster after a multicast ring's mbarrier_inits (every CTA's barriers
 * are ready before a peer arrives on them or copies into them, its prologue's copies
 * included) and one before the kernel returns (no CTA leaves while a peer may still do
 * either), that one once. */
static void cluster_syncs(IrFunc *f, IrBuilder *b)
{
    IrOp *ret = f->body.last;
    ir_build(b, IR_OP_CLUSTER_SYNC, NULL, 0, NULL, 0, 0);
    if (ret && ret->code == IR_OP_RETURN && !(ret->prev && ret->prev->code == IR_OP_CLUSTER_SYNC)) {
        IrBuilder e;
        ir_builder_before(&e, ret);
        ir_build(&e, IR_OP_CLUSTER_SYNC, NULL, 0, NULL, 0, 0);
    }
}

/* A TMA ring's mbarriers: full and empty, 8 bytes a stage each; the empty ones start
 * at the half, and both take barriers_bytes. */
static uint32_t barriers_half(int stages) { return ((uint32_t)stages * 8 + 15) & ~15u; }
static uint32_t barriers_bytes(int stages) { return (2 * barriers_half(stages) + 127) & ~127u; }

/* Where a ring of `stages` ends: its buffers from base (an NVMMA one on IR_NVMMA_ALIGN),
 * then, for TMA, its barriers; as pipeline_loop places them. */
static uint64_t ring_end(IrFunc *f, const Cand *cs, int n, int stages, uint32_t base, bool tma)
{
    uint64_t offset = base;
    for (int i = 0; i < n; i++) {
        if (wants_nvmma(f, &cs[i])) offset = ir_nvmma_align(offset);
        offset += buffer_bytes(ir_value_type(f, cs[i].load->results[0]), stages);
    }
    for (int i = 0; i < n; i++)   /* the transposes' buffers, 2 slots each */
        for (int q = 0; q < cs[i].nviews; q++)
            if (cs[i].views[q].staged)
                offset = ir_nvmma_align(offset) + buffer_bytes(ir_value_type(f, cs[i].views[q].cvt->results[0]), 2);
    return offset + (tma ? barriers_bytes(stages) : 0);
}

static bool pipeline_loop(IrFunc *f, IrOp *loop, int stages, uint32_t smem_optin, uint32_t base)
{
    bool ok;
    int64_t step = const_value(f, loop->operands[2], &ok);
    if (!ok || step <= 0) return false;
    Pipe p = {f, loop, &loop->regions[0], NULL, NULL, f->nvalues};
    p.in_slice = tl_calloc(f->nvalues, sizeof *p.in_slice);
    p.map = tl_calloc(f->nvalues, sizeof *p.map);
    if (!p.in_slice || !p.map) tl_oom();
    Cand cs[MAX_CANDS];
    int n = 0;
    for (IrOp *op = p.body->first; op && n < MAX_CANDS; op = op->next)
        if (is_candidate(&p, op, &cs[n])) n++;
    int nblock = 0;
    for (int i = 0; i < n; i++) nblock += cs[i].load->code == IR_OP_BLOCK_LOAD;
    bool tma = nblock > 0;
    if (nblock && nblock != n) n = 0;   /* a ring is all TMA or all cp.async (blockload keeps such loops) */
    bool any_nvmma = false;
    for (int i = 0; i < n; i++) {
        any_nvmma |= wants_nvmma(f, &cs[i]);
        for (int q = 0; q < cs[i].nviews; q++) any_nvmma |= cs[i].views[q].staged;
    }
    /* each consumer warpgroup of a pingpong kernel has its own scratch, the largest any
     * op of the kernel needs (codegen/cg_module.c smem_plan: ops outside the loop too) */
    uint64_t scratch = (scratch_bound(f, p.body, cs, n) + 127) & ~(uint64_t)127;
    if (ir_consumer_groups(f) > 1) {
        uint64_t all = (scratch_bound(f, &f->body, cs, n) + 127) & ~(uint64_t)127;
        scratch = (all > scratch ? all : scratch) * (uint64_t)ir_consumer_groups(f);
    }
    /* the buffer area starts after the scratch (ir_buffer_area_at, as the plan places
     * it); the ring goes from base in it as placed below */
    uint64_t area = ir_buffer_area_at((uint32_t)scratch, any_nvmma), limit = (uint64_t)smem_optin + base;
    while (stages > 2 && area + ring_end(f, cs, n, stages, base, tma) > limit) stages--;
    if (n == 0 || stages < 2 || area + ring_end(f, cs, n, stages, base, tma) > limit) {
        tl_free(p.in_slice);
        tl_free(p.map);
        return false;
    }
    IrCtx *c = f->module->ctx;
    IrBuilder b;
    ir_builder_before(&b, loop);
    b.loc = loop->loc;
    uint32_t offset = base;
    for (int i = 0; i < n; i++) {
        const IrType *t = ir_value_type(f, cs[i].load->results[0]);
        int32_t shape[3] = {stages, t->shape[0], t->shape[1]};
        bool nvmma = wants_nvmma(f, &cs[i]);
        const IrType *bt = ir_type_with_layout(c, ir_type_tile(c, ir_type_elem(c, t), 3, shape),
                                               shared_layout(c, t, fast_axis(f, &cs[i]), nvmma));
        IrOp *a = ir_build(&b, IR_OP_LOCAL_ALLOC, NULL, 0, &bt, 1, 0);
        if (nvmma) offset = (uint32_t)ir_nvmma_align(offset);   /* a swizzle's repeat starts each stage */
        a->attr.i = offset;
        offset += buffer_bytes(t, stages);
        cs[i].buf = a->results[0];
    }
    /* the transposes' buffers: [2, rows, cols] K-major NVMMA, after the rings */
    for (int i = 0; i < n; i++)
        for (int q = 0; q < cs[i].nviews; q++) {
            View *vw = &cs[i].views[q];
            if (!vw->staged) continue;
            const IrType *vt = ir_value_type(f, vw->cvt->results[0]);
            int32_t shape[3] = {2, vt->shape[0], vt->shape[1]};
            const IrType *bt = ir_type_with_layout(c, ir_type_tile(c, ir_type_elem(c, vt), 3, shape),
                                                   shared_layout(c, vt, view_k_axis(f, vw), true));
            IrOp *a = ir_build(&b, IR_OP_LOCAL_ALLOC, NULL, 0, &bt, 1, 0);
            offset = (uint32_t)ir_nvmma_align(offset);
            a->attr.i = offset;
            offset += buffer_bytes(vt, 2);
            vw->tbuf = a->results[0];
        }
    if (tma) {
        const IrType *bt = barriers_type(c, stages);
        IrOp *full = ir_build(&b, IR_OP_LOCAL_ALLOC, NULL, 0, &bt, 1, 0);
        full->attr.i = offset;
        IrOp *empty = ir_build(&b, IR_OP_LOCAL_ALLOC, NULL, 0, &bt, 1, 0);
        empty->attr.i = offset + barriers_half(stages);
        offset += barriers_bytes(stages);
        int ctas = multicast_ring(f, cs, n) ? ir_cluster_size(f) : 1;
        IrOp *init = ir_build(&b, IR_OP_MBARRIER_INIT, full->results, 1, NULL, 0, 0);
        init->attr.i = n;        /* one arrival per copy of a stage (each with its bytes) */
        init = ir_build(&b, IR_OP_MBARRIER_INIT, empty->results, 1, NULL, 0, 0);
        init->attr.i = ir_func_warps(f) * ctas;   /* every warp (of every CTA) releases the stage */
        if (ctas > 1) cluster_syncs(f, &b);
        return pipeline_tma(&p, &b, cs, n, stages, full->results[0], empty->results[0]);
    }
    /* How far ahead the copies run: S-1 iterations. A loop of one wgmma dot with at
     * least 3 stages keeps the tensor-core group of iteration j in flight while
     * iteration j+1 starts (codegen waits for all but the last group at the end of
     * each dot, cg_wgmma.c), so its copies come after the dot and a barrier: by then
     * every warpgroup has retired iteration j-1's group, whose stage the copies of
     * iteration j+S-1 reuse, while iteration j's group runs on. (Copies before the dot
     * would have to stay S-2 ahead; this order gets S-1 from the same ring, as
     * Triton's pipeliner does.) */
    bool async_dot = stages >= 3 && n >= 2 && ir_count_ops(p.body, IR_OP_DOT) == 1;
    for (int i = 0; i < n; i++) async_dot &= wants_nvmma(f, &cs[i]);
    int dist = stages - 1;
    /* the prologue: iterations 0 .. dist-1 */
    IrValue lo = loop->operands[0];
    const IrType *ivt = ir_value_type(f, lo), *st = ir_type_scalar(c, IR_I32);
    for (int d = 0; d < dist; d++) {
        IrValue iv = d ? ir_build_binary(&b, IR_OP_ADD, lo, iconst(&b, ivt, d * step)) : lo;
        emit_copies(&p, &b, cs, n, iv, iconst(&b, st, d));
    }
    /* the body: wait for this iteration's copy, read it, start iteration j+S-1's */
    ir_builder_before(&b, p.body->first);
    IrValue iv = p.body->args[0];
    IrValue j = ir_build_binary(&b, IR_OP_DIV, ir_build_binary(&b, IR_OP_SUB, iv, lo), iconst(&b, ivt, step));
    if (ivt->elem != IR_I32) j = ir_build1(&b, IR_OP_CONVERT, st, &j, 1);
    IrValue stage = ir_build_binary(&b, IR_OP_REM, j, iconst(&b, st, stages));
    /* A loop of one dot (a GEMM's) waits at the end of its body, for the next
     * iteration, and once before the loop for the first: the dot's last step of K may
     * then run after the barrier, while the next stage's first step is read (codegen:
     * cg_shared.c, the prefetch across iterations). Others wait at the top. */
    bool at_end = ir_count_ops(p.body, IR_OP_DOT) == 1;
    IrOp *w = ir_build(&b, IR_OP_ASYNC_WAIT, NULL, 0, NULL, 0, 0);
    w->attr.i = dist - 1;
    if (at_end) {
        IrOp *y = p.body->last;
        ir_op_remove(w);
        IrBuilder e;
        if (y && y->code == IR_OP_YIELD) ir_builder_before(&e, y);
        else ir_builder_at_end(&e, p.body);
        e.loc = loop->loc;
        ir_build(&e, IR_OP_ASYNC_WAIT, NULL, 0, NULL, 0, 0)->attr.i = dist - 1;
        IrBuilder pre;
        ir_builder_before(&pre, loop);
        pre.loc = loop->loc;
        ir_build(&pre, IR_OP_ASYNC_WAIT, NULL, 0, NULL, 0, 0)->attr.i = dist - 1;
    }
    emit_views(f, &b, cs, n, stage, j);
    if (async_dot) {   /* the copies after the dot and a barrier (above) */
        IrOp *dot = NULL;
        for (IrOp *op = p.body->first; op; op = op->next)
            if (op->code == IR_OP_DOT) dot = op;
        assert(dot && dot->next);   /* one dot, and the async_wait at the end follows it */
        IrBuilder after;
        ir_builder_before(&after, dot->next);   /* the async_wait at the end, or the yield */
        after.loc = loop->loc;
        ir_build(&after, IR_OP_BARRIER, NULL, 0, NULL, 0, 0);
        b = after;
    }
    IrValue next = ir_build_binary(&b, IR_OP_ADD, iv, iconst(&b, ivt, dist * step));
    IrValue next_stage = ir_build_binary(&b, IR_OP_REM, ir_build_binary(&b, IR_OP_ADD, j, iconst(&b, st, dist)), iconst(&b, st, stages));
    emit_copies(&p, &b, cs, n, next, next_stage);
    for (int i = 0; i < n; i++) {
        for (int q = 0; q < cs[i].nviews; q++) {
            ir_op_remove(cs[i].views[q].cvt);
            if (cs[i].views[q].trans) ir_op_remove(cs[i].views[q].trans);
        }
        ir_op_remove(cs[i].load);
    }
    /* after the loop: nothing in flight */
    ir_builder_before(&b, loop->next);
    ir_build(&b, IR_OP_ASYNC_WAIT, NULL, 0, NULL, 0, 0)->attr.i = 0;
    tl_free(p.in_slice);
    tl_free(p.map);
    return true;
}

static bool has_loop(const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (op->code == IR_OP_FOR || op->code == IR_OP_WHILE) return true;
        for (uint32_t r = 0; r < op->nregions; r++)
            if (has_loop(&op->regions[r])) return true;
    }
    return false;
}

typedef struct Loops {
    IrOp **v;
    uint32_t n, cap;
} Loops;

static void collect_loops(IrOp *op, void *ud)
{
    Loops *l = ud;
    if (op->code != IR_OP_FOR || has_loop(&op->regions[0])) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = tl_realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) tl_oom();
    }
    l->v[l->n++] = op;
}

/* ---- loop-invariant A operands in shared memory ---------------------------------------------
 * A wgmma dot reads A from registers (the dot_operand layout) or from an NVMMA view of
 * shared memory. An A operand loaded once before a loop (attention's Q; the backward's K
 * and V, against which it walks the query blocks) is kept in registers by default: it
 * costs no shared-memory bandwidth. Where a loop's registers would not fit, such an
 * operand moves to shared memory instead (FlashAttention-3 keeps all of them there): a
 * buffer of one stage, filled once after the load by async copies (masked lanes zeros,
 * as the load's +0 `other`), and a view of it as the dots' A:
 *
 *   %k  = load %pk, %mk : bf16[64, 128] #blocked    %k = load ...   (dead if nothing else reads it)
 *   %ka = convert_layout %k : #dot_operand     ->   %r = local_alloc 0 : bf16[1, 64, 128] #nvmma
 *   for ... { dot %ka, ... }                        async_copy %r, 0, %pk, %mk; async_commit; async_wait 0
 *                                                   %kv = local_load 0 %r, 0 : bf16[64, 128] #nvmma-view
 *                                                   for ... { dot %kv, ... }
 *
 * The loop's pressure, in 32-bit registers per thread: its carried values, the
 * invariant A operands in registers, and the results of its dots that do not update a
 * carried value in place (S and dP, not the accumulators). Operands move, the largest
 * first, while it exceeds the registers a thread may have (255; with a producer
 * warpgroup, ws, what setmaxnreg gives the consumers) less 48 for the loop's other
 * temporaries. The buffers take the start of the buffer area; the rings follow them.
 * TILE_RESIDENT_A=0 keeps every such operand in registers, =1 moves every one (for
 * measuring). */
static uint32_t words_per_thread(const IrType *t, int threads)
{
    uint64_t bytes = ir_type_numel(t) * (uint64_t)(t->elem == IR_PTR ? 8 : ir_elem_bytes(t->elem));
    return (uint32_t)((bytes + 4 * (uint64_t)threads - 1) / (4 * (uint64_t)threads));
}

/* v is a carried value of body, or computed from one by the op that defines v */
static bool from_carried(const IrFunc *f, const IrBlock *body, IrValue v)
{
    for (uint32_t i = 1; i < body->nargs; i++)
        if (body->args[i] == v) return true;
    const IrOp *d = f->values[v].def;
    if (!d || d->parent != body) return false;
    for (uint32_t k = 0; k < d->noperands; k++)
        for (uint32_t i = 1; i < body->nargs; i++)
            if (body->args[i] == d->operands[k]) return true;
    return false;
}

/* The load whose conversion a is (the conversion in the loop or before it: licm comes
 * later), if a is a wgmma dot's A in registers, loaded before the loop (in the kernel's
 * body) as a K-major 16-bit tile that a one-stage NVMMA buffer can hold and async
 * copies can fill (a pointer load, its `other` absent or +0). */
static IrOp *invariant_a_load(const IrFunc *f, const IrBlock *body, IrValue a, int op)
{
    const IrOp *cvt = f->values[a].def;
    if (!cvt || cvt->code != IR_OP_CONVERT_LAYOUT) return NULL;   /* in the loop or before it */
    (void)body;
    const IrType *at = ir_value_type(f, a);
    if (!is_wgmma_layout(at->layout) || at->layout->op != op || ir_elem_bytes(at->elem) != 2) return NULL;
    IrOp *ld = f->values[cvt->operands[0]].def;
    if (!ld || ld->code != IR_OP_LOAD || ld->parent != &f->body) return NULL;
    const IrType *lt = ir_value_type(f, ld->results[0]);
    if (lt->rank != 2 || !lt->layout || lt->layout->kind != IR_LAYOUT_BLOCKED || lt->layout->order[0] != 1) return NULL;
    if (ld->noperands > 2 && !is_plus_zero(f, ld->operands[2])) return NULL;
    if (ld->noperands > 1 && ir_value_type(f, ld->operands[1])->layout != lt->layout) return NULL;
    return pass_nvmma_swizzle(lt, 1) ? ld : NULL;
}

typedef struct Resident {
    IrOp *load;
    uint32_t words;
    bool moved;
} Resident;

static uint32_t resident_operands(IrFunc *f, const Loops *loops)
{
    int knob = f->module->knobs.resident_a;   /* -1: decided here; 0 none; 1 all */
    if (knob == 0) return 0;
    bool all = knob == 1;
    int warps = ir_func_warps(f), threads = 32 * warps;
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    /* with a producer, what setmaxnreg gives the consumers (passes/warpspec.c) */
    uint32_t limit = f->ws ? tile_target_consumer_regs(t, warps * ir_consumer_groups(f)) : t->regs_per_thread;
    Resident rs[MAX_CANDS];
    int nr = 0;
    for (uint32_t li = 0; li < loops->n; li++) {
        IrOp *loop = loops->v[li];
        IrBlock *body = &loop->regions[0];
        uint32_t pressure = 0;
        for (uint32_t i = 0; i < loop->nresults; i++) pressure += words_per_thread(ir_value_type(f, loop->results[i]), threads);
        Resident mine[MAX_CANDS];
        int nm = 0;
        for (IrOp *op = body->first; op; op = op->next) {
            if (op->code != IR_OP_DOT) continue;
            const IrType *rt = ir_value_type(f, op->results[0]);
            if (!rt->layout || rt->layout->kind != IR_LAYOUT_MMA || rt->layout->version != 3) continue;
            if (!(op->noperands > 2 && from_carried(f, body, op->operands[2]))) pressure += words_per_thread(rt, threads);
            /* a B loaded before the loop (the fused attention backward's K for dQ = dS K):
             * wgmma reads B from shared memory only, so it is always resident (read
             * N-major through the descriptor's transpose bit, as a ring's [K, N] stage) */
            IrOp *bl = invariant_a_load(f, body, op->operands[1], 1);
            if (bl) {
                bool seen = false;
                for (int k = 0; k < nr; k++) seen |= rs[k].load == bl;
                if (!seen && nr < MAX_CANDS) rs[nr++] = (Resident){bl, 0, true};
            }
            IrOp *ld = invariant_a_load(f, body, op->operands[0], 0);
            if (!ld) continue;
            bool seen = false;
            for (int k = 0; k < nm; k++) seen |= mine[k].load == ld;
            if (seen || nm == MAX_CANDS) continue;
            mine[nm++] = (Resident){ld, words_per_thread(ir_value_type(f, op->operands[0]), threads), false};
            pressure += mine[nm - 1].words;
        }
        /* the largest first, while the loop does not fit */
        while (all || pressure + 48 > limit) {
            int best = -1;
            for (int k = 0; k < nm; k++)
                if (!mine[k].moved && (best < 0 || mine[k].words > mine[best].words)) best = k;
            if (best < 0) break;
            mine[best].moved = true;
            pressure -= mine[best].words;
            bool seen = false;
            for (int k = 0; k < nr; k++) seen |= rs[k].load == mine[best].load;
            if (!seen && nr < MAX_CANDS) rs[nr++] = mine[best];
        }
    }
    if (!nr) return 0;
    IrCtx *c = f->module->ctx;
    uint32_t offset = 0;
    for (int k = 0; k < nr; k++) {
        IrOp *ld = rs[k].load;
        const IrType *lt = ir_value_type(f, ld->results[0]);
        int32_t shape[3] = {1, lt->shape[0], lt->shape[1]};
        const IrType *bt = ir_type_with_layout(c, ir_type_tile(c, ir_type_elem(c, lt), 3, shape),
                                               shared_layout(c, lt, 1, true));
        IrBuilder b;
        ir_builder_before(&b, ld->next);
        b.loc = ld->loc;
        IrOp *a = ir_build(&b, IR_OP_LOCAL_ALLOC, NULL, 0, &bt, 1, 0);
        offset = (uint32_t)ir_nvmma_align(offset);
        a->attr.i = offset;
        offset += buffer_bytes(lt, 1);
        IrValue zero = iconst(&b, ir_type_scalar(c, IR_I32), 0);
        IrValue ops[4] = {a->results[0], zero, ld->operands[0], ld->noperands > 1 ? ld->operands[1] : IR_NO_VALUE};
        ir_build(&b, IR_OP_ASYNC_COPY, ops, ld->noperands > 1 ? 4 : 3, NULL, 0, 0);
        ir_build(&b, IR_OP_ASYNC_COMMIT, NULL, 0, NULL, 0, 0);
        ir_build(&b, IR_OP_ASYNC_WAIT, NULL, 0, NULL, 0, 0)->attr.i = 0;
        /* every wgmma dot reading the load's conversion as A (B) reads a view instead,
         * one for A and one for B (settle_wgmma may make them two operand layouts) */
        IrValue views[2] = {IR_NO_VALUE, IR_NO_VALUE};
        for (uint32_t v = 0; v < f->nvalues; v++) {
            IrOp *d = f->values[v].def;
            if (!d || d->code != IR_OP_DOT || d->results[0] != v) continue;
            for (int i = 0; i < 2; i++) {
                const IrOp *cvt = f->values[d->operands[i]].def;
                if (!cvt || cvt->code != IR_OP_CONVERT_LAYOUT || cvt->operands[0] != ld->results[0]) continue;
                const IrType *at = ir_value_type(f, d->operands[i]);
                if (!is_wgmma_layout(at->layout) || at->layout->op != i) continue;
                if (views[i] == IR_NO_VALUE) {   /* [rows, cols] of the load, A's [M, K] or B's [K, N] */
                    const IrType *vt = ir_type_with_layout(c, at, stage_view_layout(c, bt->layout, false));
                    IrValue lops[2] = {a->results[0], zero};
                    IrOp *ll = ir_build(&b, IR_OP_LOCAL_LOAD, lops, 2, &vt, 1, 0);
                    ll->attr.i = 0;
                    views[i] = ll->results[0];
                }
                IrValue *mem = arena_alloc(ir_ctx_arena(c), d->noperands * sizeof *mem);
                memcpy(mem, d->operands, d->noperands * sizeof *mem);
                mem[i] = views[i];
                d->operands = mem;
            }
        }
    }
    /* the conversions those dots read before are dead now: removed here, so that the
     * rings' budget (scratch_bound) plans no scratch for them (a 128 x 128 bf16 Q: 32 KB,
     * a ring stage of attention at BN = 128) */
    uint32_t *uses = ir_use_counts(f);
    for (uint32_t v = 0; v < f->nvalues; v++) {
        IrOp *d = f->values[v].def;
        if (!d || !d->parent || d->code != IR_OP_CONVERT_LAYOUT || d->results[0] != v || uses[v]) continue;
        for (int k = 0; k < nr; k++)
            if (d->operands[0] == rs[k].load->results[0]) {
                ir_op_remove(d);
                break;
            }
    }
    tl_free(uses);
    return (uint32_t)ir_nvmma_align(offset);
}

/* ---- wgmma or mma.sync ------------------------------------------------------------------ */

/* Do all wgmma dots read B from a view of an NVMMA stage, and A from one or registers? */
typedef struct Wg {
    const IrFunc *f;
    bool any, all;
} Wg;

static void wgmma_visit(IrOp *op, void *ud)
{
    Wg *w = ud;
    if (op->code != IR_OP_DOT) return;
    const IrLayout *l = ir_value_type(w->f, op->results[0])->layout;
    if (!l || l->kind != IR_LAYOUT_MMA || l->version != 3) return;
    w->any = true;
    for (int i = 0; i < 2; i++) {
        const IrLayout *ol = ir_value_type(w->f, op->operands[i])->layout;
        bool view = ol && ol->kind == IR_LAYOUT_SHARED && ol->swizzle_bytes;
        /* A may be registers: 16-bit, or 8-bit in the k32 fragment (kwidth 4: attention's
         * P in f8, converted from S's accumulator by the layout pass) */
        bool regs = i == 0 && ol && ol->kind == IR_LAYOUT_DOT_OPERAND && ol->parent == l &&
                    ol->kwidth * 8 == l->instr[2];
        if (!view && !regs) w->all = false;
    }
}

/* l with every mma version 3 in it (itself or a parent) made version 2 with the same
 * warps: the same accumulator layout, computed by mma.sync m16n8k16 (f8's k32 becomes
 * k16 through f16, its operands 2 elements per register). */
static const IrLayout *to_mma_sync(IrCtx *c, const IrLayout *l)
{
    if (!l) return NULL;
    if (l->kind == IR_LAYOUT_MMA && l->version == 3) {
        IrLayout k = *l;
        k.version = 2;
        k.instr[0] = 16;
        k.instr[1] = 8;
        k.instr[2] = 16;
        return ir_layout_intern(c, &k);
    }
    if ((l->kind == IR_LAYOUT_SLICE || l->kind == IR_LAYOUT_DOT_OPERAND) && l->parent) {
        const IrLayout *p = to_mma_sync(c, l->parent);
        if (p == l->parent) return l;
        IrLayout k = *l;
        k.parent = p;
        if (l->kind == IR_LAYOUT_DOT_OPERAND) k.kwidth = p->instr[2] / 8;
        return ir_layout_intern(c, &k);
    }
    return l;
}

/* Where a wgmma dot's operands are not both views of NVMMA stages (a loop the pass
 * could not pipeline, a dot outside loops), the kernel's wgmma layouts become
 * mma.sync's; a stage read by wgmma but now by ldmatrix keeps its NVMMA layout, which
 * ldmatrix reads as well (cg_shared.c), and its views become dot_operand reads. */
static bool settle_wgmma(IrFunc *f)
{
    Wg w = {f, false, true};
    ir_walk(&f->body, wgmma_visit, &w);
    if (!w.any || w.all) return false;
    IrCtx *c = f->module->ctx;
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrType *t = f->values[v].type;
        if (!t || !t->layout) continue;
        const IrLayout *l = t->layout;
        if (l->kind == IR_LAYOUT_SHARED && t->rank == 2 && f->values[v].def &&
            f->values[v].def->code == IR_OP_LOCAL_LOAD)
            continue;   /* views: below, from the dot that reads them */
        const IrLayout *n = to_mma_sync(c, l);
        if (n != l) f->values[v].type = ir_type_with_layout(c, t, n);
    }
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrOp *d = f->values[v].def;
        const IrType *t = f->values[v].type;
        if (!d || d->code != IR_OP_LOCAL_LOAD || !t || !t->layout || t->layout->kind != IR_LAYOUT_SHARED) continue;
        /* the view's users are dots: it becomes their operand layout */
        IrLayout k;
        memset(&k, 0, sizeof k);
        k.kind = IR_LAYOUT_DOT_OPERAND;
        k.rank = 2;
        k.kwidth = 2;
        for (uint32_t u = 0; u < f->nvalues; u++) {
            const IrOp *ud = f->values[u].def;
            if (!ud || ud->code != IR_OP_DOT) continue;
            for (int i = 0; i < 2; i++)
                if (ud->operands[i] == v) {
                    k.op = i;
                    k.parent = ir_value_type(f, ud->results[0])->layout;
                }
        }
        if (k.parent) f->values[v].type = ir_type_with_layout(c, t, ir_layout_intern(c, &k));
    }
    return true;
}

static void collect_block_loads(IrOp *op, void *ud)
{
    if (op->code == IR_OP_BLOCK_LOAD) vec_push((BlockLoads *)ud, op);
}

/* Block loads that blockload kept for TMA but no ring took (the loop's ring did not
 * fit, its dot is not on tensor cores): pointer loads now, in blocked layouts. */
static bool expand_leftovers(IrFunc *f)
{
    BlockLoads v = {0};
    ir_walk(&f->body, collect_block_loads, &v);
    for (size_t i = 0; i < v.len; i++) blockload_expand_laid_out(f, v.data[i]);
    bool any = v.len > 0;
    vec_free(&v);
    return any;
}

static bool contains(const IrBlock *blk, IrOpcode code)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (op->code == code) return true;
        for (uint32_t r = 0; r < op->nregions; r++)
            if (contains(&op->regions[r], code)) return true;
    }
    return false;
}

bool pass_shared(IrFunc *f)
{
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    if (f->kind != IR_FUNC_KERNEL) return false;
    bool changed = false;
    if (t->cp_async && f->stages >= 2) {
        Loops loops = {0};
        ir_walk(&f->body, collect_loops, &loops);
        /* the loop-invariant A operands that stay in shared memory: the rings after them */
        uint32_t resident = t->wgmma ? resident_operands(f, &loops) : 0;
        changed |= resident > 0;
        for (uint32_t i = 0; i < loops.n; i++) changed |= pipeline_loop(f, loops.v[i], f->stages, t->smem_optin - resident, resident);
        tl_free(loops.v);
    }
    changed |= settle_wgmma(f);
    changed |= expand_leftovers(f);
    if (!contains(&f->body, IR_OP_BLOCK_STORE)) return changed;
    /* the staging buffers of the TMA stores, after the rings' buffers and barriers */
    uint32_t end = 0;
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrOp *d = f->values[v].def;
        if (!d || d->code != IR_OP_LOCAL_ALLOC) continue;
        const IrType *bt = f->values[v].type;
        uint32_t e = (uint32_t)d->attr.i + buffer_bytes(bt, 1);
        if (e > end) end = e;
    }
    uint64_t scratch = ((scratch_bound(f, &f->body, NULL, 0) + 127) & ~(uint64_t)127) * (uint64_t)ir_consumer_groups(f);
    uint32_t area = ir_buffer_area_at((uint32_t)scratch, true);   /* the staging buffers are NVMMA */
    uint32_t limit = area < t->smem_optin ? t->smem_optin - area : 0;
    changed |= tmastore_lower(f, &end, limit);
    return changed;
}
