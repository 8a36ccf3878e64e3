/* The tensor-memory accelerator (sm_90a): the rings that passes/shared.c fills by TMA.
 *
 *   mbarrier_init %bars     thread 0 initializes each stage's mbarrier (one arrival),
 *                           fence.mbarrier_init, a barrier of the program
 *   tma_copy %buf, %s, ...  thread 0 (when the predicate holds): mbarrier.arrive.
 *                           expect_tx of the stage's bytes on bars[s], then one
 *                           cp.async.bulk.tensor.2d per box, completing on bars[s]
 *                           (.3d with the outer coordinate x third, for an op with an
 *                           outer pair: its map is of rank 3, box 1 along x)
 *   tma_wait %bars, %s, %ph every thread: mbarrier.try_wait.parity until bars[s] has
 *                           completed the phase of parity ph
 *
 * Clusters (passes/cluster.c). A `multicast` tma_copy's boxes are shared among the
 * cluster's CTAs: CTA r issues boxes r, r + n, ... with .multicast::cluster to every CTA,
 * each landing at the same stage offset of every CTA and completing the transaction on
 * the same barrier there; each CTA's thread still expects the whole block's bytes on its
 * own barrier (a peer's bytes may land before that expectation: the phase cannot
 * complete before the arrival that carries it). A `cluster` mbarrier_arrive arrives on
 * the barrier of every CTA (lane q of each warp on CTA q's, through mapa), so a stage
 * is refilled only when every CTA's warps are done with it: the empty barriers count
 * every CTA's warps. cluster_sync is barrier.cluster (arrive.release, wait.acquire) of
 * every thread; a producer warpgroup's threads arrive on a final one before they leave.
 *
 * Descriptors. Each distinct (pointer, shape, strides, box, swizzle) of the kernel's
 * tma_copy ops is one tensor map (CUtensorMap, 128 bytes), passed as a hidden kernel
 * parameter after the run-time ones, in the order of the plan's maps (passes/plan.c: first
 * use), as `.param .align 64 .b8 [128]`: an LLVM byval [128 x i8] parameter that the
 * nvvm annotation grid_constant keeps in parameter space (without it LLVM copies it to
 * local memory, and TMA cannot read a descriptor there). The runtime encodes each map at
 * launch from the kernel's arguments (cuTensorMapEncodeTiled, runtime/rt_tma.c) by the
 * recipe of the plan (ir/plan.h).
 *
 * Boxes. A stage in the NVMMA form of swizzle SW (ir/layout.h) is the tile's contiguous
 * axis cut into blocks of SW bytes, each block [rows x SW], one after another; a TMA box
 * of SW / element bytes by rows with the map's swizzle mode writes one such block exactly
 * (both XOR 16-byte chunk bits 4-6 with address bits 7-9, for 128 B; stages are
 * 1024-aligned), so box j goes to stage + j * rows * SW, from coordinate offset + j * SW
 * / element bytes along the contiguous axis. Coordinates outside the tensor (a negative
 * offset, past an edge) are filled with zeros by the copy, which is block_load's meaning;
 * the mbarrier still counts the whole box's bytes. */
#include <stdio.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "codegen/codegen.h"
#include "ir/layout.h"
#include "ir/target.h"

/* Where the pointer operand of a tma_copy or tma_store is; its shapes, strides and
 * offsets follow it (x 2 each). */
static uint32_t ptr_operand(const IrOp *op) { return op->code == IR_OP_TMA_STORE ? 2 : 3; }

typedef struct TmaOps {
    const IrOp *op;              /* the op sought, or NULL: count them all */
    uint32_t n, index;
} TmaOps;

static void visit_tma(IrOp *op, void *ud)
{
    TmaOps *t = ud;
    if (op->code != IR_OP_TMA_COPY && op->code != IR_OP_TMA_STORE) return;
    if (op == t->op) t->index = t->n;
    t->n++;
}

uint32_t cg_tma_ops(const IrFunc *k)
{
    TmaOps t = {NULL, 0, 0};
    ir_walk((IrBlock *)&k->body, visit_tma, &t);
    return t.n;
}

/* The address (i64, generic) of op's map: its hidden parameter, or, for a pointer that
 * may be one of several parameters, the map of the one whose address it holds (a
 * select chain; two parameters with one address have the same map but the base). */
static LLVMValueRef desc_addr(Cg *c, const IrOp *op)
{
    TmaOps t = {op, 0, UINT32_MAX};
    ir_walk((IrBlock *)&c->f->body, visit_tma, &t);   /* the plan's uses are in this order */
    const IrPlan *plan = c->f->plan;
    if (t.index >= plan->nuses) return NULL;
    const IrTmaUse *u = &plan->uses[t.index];
    uint32_t po = ptr_operand(op);
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef addr = NULL, ptr = NULL;
    if (u->n > 1) ptr = LLVMBuildPtrToInt(c->b, cg_get(c, op->operands[po]).v[0], i64, "");
    for (int p = (int)u->n - 1; p >= 0; p--) {
        LLVMValueRef m = LLVMBuildPtrToInt(c->b, LLVMGetParam(c->fn, c->f->body.nargs + u->map[p]), i64, "");
        if (!addr) {
            addr = m;
            continue;
        }
        LLVMValueRef base = LLVMBuildPtrToInt(c->b, LLVMGetParam(c->fn, u->param[p]), i64, "");
        addr = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, ptr, base, ""), m, addr, "");
    }
    return addr;
}

static void asm_void(Cg *c, LLVMValueRef *args, unsigned n, const char *text, const char *cons)
{
    cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), args, n, text, cons, true);
}

/* Branches to a new block where `cond` holds (thread 0, and a predicate); returns the
 * block after, for cg_tma_end_if. */
static LLVMBasicBlockRef begin_if(Cg *c, LLVMValueRef cond)
{
    LLVMBasicBlockRef then = cg_block_new(c, "tma.issue"), after = cg_block_new(c, "tma.after");
    LLVMBuildCondBr(c->b, cond, then, after);
    LLVMPositionBuilderAtEnd(c->b, then);
    return after;
}

static void end_if(Cg *c, LLVMBasicBlockRef after)
{
    LLVMBuildBr(c->b, after);
    LLVMPositionBuilderAtEnd(c->b, after);
}

/* The thread that issues copies: thread 0, or in a producer region the one thread
 * that runs it. */
static LLVMValueRef thread0(Cg *c)
{
    if (c->in_producer) return LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0);
    return LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32c(c, 0), "");
}

/* The i32 shared address of barrier s of bars. */
static LLVMValueRef barrier_addr(Cg *c, IrValue bars, LLVMValueRef s)
{
    return cg_add(c->b, cg_get(c, bars).v[0], cg_mul(c->b, s, cg_i32c(c, 8)));
}

/* A coordinate as TMA takes it (s32). An i64 one is clamped to the s32 range first:
 * the runtime admits extents below 2^31 only for i64 maps, so a clamped coordinate lies
 * outside the tensor exactly when the original does, and its box reads zeros. */
static LLVMValueRef as_i32(Cg *c, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v);
    unsigned w = LLVMGetIntTypeWidth(t);
    if (w == 32) return v;
    if (w < 32) return LLVMBuildSExt(c->b, v, cg_i32(c), "");
    LLVMValueRef hi = LLVMConstInt(t, INT32_MAX, 1), lo = LLVMConstInt(t, (unsigned long long)(int64_t)INT32_MIN, 1);
    v = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSGT, v, hi, ""), hi, v, "");
    v = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, v, lo, ""), lo, v, "");
    return LLVMBuildTrunc(c->b, v, cg_i32(c), "");
}

static bool lower_init(Cg *c, const IrOp *op)
{
    const IrType *t = cg_type(c, op->operands[0]);
    /* the block's thread 0 (a pingpong kernel's warpgroups each have a thread 0) */
    LLVMBasicBlockRef after = begin_if(c, LLVMBuildICmp(c->b, LLVMIntEQ, c->raw_tid, cg_i32c(c, 0), ""));
    for (int32_t s = 0; s < t->shape[0]; s++) {
        LLVMValueRef args[2] = {barrier_addr(c, op->operands[0], cg_i32c(c, s)), cg_i32c(c, op->attr.i)};
        asm_void(c, args, 2, "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}");
    }
    asm_void(c, NULL, 0, "fence.mbarrier_init.release.cluster;", "~{memory}");
    end_if(c, after);
    cg_barrier(c);
    return true;
}

static bool lower_copy(Cg *c, const IrOp *op)
{
    const IrType *bt = cg_type(c, op->operands[0]);
    const IrLayout *l = bt->layout;
    int fast = l->order[0] - 1, slow = 1 - fast, eb = ir_elem_bytes(bt->elem);
    uint32_t r = bt->rank - 1u;
    LLVMValueRef map = desc_addr(c, op);
    if (!map) return cg_error(c, op, "internal error: a tma_copy whose tensor is not known on the host");
    LLVMValueRef stage = cg_get(c, op->operands[1]).v[0];
    int32_t rows = bt->shape[1 + slow], sw = l->swizzle_bytes, boxw = sw / eb;
    int32_t nbox = bt->shape[1 + fast] / boxw;
    uint32_t stage_bytes = (uint32_t)(bt->shape[1] * bt->shape[2] * eb);
    LLVMValueRef cond = thread0(c);
    if (op->noperands == 5 + 3 * r || op->noperands == 7 + 3 * r)
        cond = LLVMBuildAnd(c->b, cond, cg_get(c, op->operands[op->noperands - 1]).v[0], "");
    LLVMValueRef of = as_i32(c, cg_get(c, op->operands[4 + 2 * r + fast]).v[0]);
    LLVMValueRef os = as_i32(c, cg_get(c, op->operands[4 + 2 * r + slow]).v[0]);
    uint32_t ox = ir_block_outer(c->f, op);   /* the third coordinate: an s32 (blockload.c) */
    LLVMValueRef oo = ox ? as_i32(c, cg_get(c, op->operands[ox]).v[0]) : NULL;
    LLVMValueRef dst0 = cg_add(c->b, cg_get(c, op->operands[0]).v[0], cg_mul(c->b, stage, cg_i32c(c, stage_bytes)));
    LLVMValueRef bar = barrier_addr(c, op->operands[2], stage);
    LLVMBasicBlockRef after = begin_if(c, cond);
    /* the stage was last read by ldmatrix or wgmma before the barrier that precedes
     * this copy; order those reads before the async proxy's writes */
    asm_void(c, NULL, 0, "fence.proxy.async.shared::cta;", "~{memory}");
    LLVMValueRef ex[2] = {bar, cg_i32c(c, stage_bytes)};
    asm_void(c, ex, 2, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,n,~{memory}");
    int32_t n = ir_cluster_size(c->f);
    if (op->attr.i && n > 1) {     /* this CTA's share of the block, to every CTA */
        LLVMValueRef rank = cg_sreg(c, "cluster.ctarank");
        LLVMValueRef mask = LLVMConstInt(LLVMInt16TypeInContext(c->ctx), (1u << n) - 1, 0);
        IrMulticast share = ir_multicast_share(bt, n);
        if (share == IR_MULTICAST_NONE)
            return cg_error(c, op, "internal error: a multicast copy of %d boxes of %d rows among %d CTAs", nbox, rows, n);
        bool by_rows = share == IR_MULTICAST_ROWS;
        /* by boxes: boxes rank + t n; by rows: every box, rows rank * rows / n .. */
        LLVMValueRef sub = by_rows ? cg_mul(c->b, rank, cg_i32c(c, rows / n)) : NULL;
        LLVMValueRef dsub = by_rows ? cg_add(c->b, dst0, cg_mul(c->b, sub, cg_i32c(c, sw))) : dst0;
        LLVMValueRef osub = by_rows ? cg_add(c->b, os, sub) : os;
        for (int32_t t = 0; t < (by_rows ? nbox : nbox / n); t++) {
            LLVMValueRef j = by_rows ? cg_i32c(c, t) : cg_add(c->b, rank, cg_i32c(c, (int64_t)t * n));
            LLVMValueRef args[7] = {cg_add(c->b, dsub, cg_mul(c->b, j, cg_i32c(c, (int64_t)rows * sw))), map,
                                    cg_add(c->b, of, cg_mul(c->b, j, cg_i32c(c, boxw))), osub, bar, mask, oo};
            if (oo)
                asm_void(c, args, 7,
                         "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                         "[$0], [$1, {$2, $3, $6}], [$4], $5;",
                         "r,l,r,r,r,h,r,~{memory}");
            else
                asm_void(c, args, 6,
                         "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster "
                         "[$0], [$1, {$2, $3}], [$4], $5;",
                         "r,l,r,r,r,h,~{memory}");
        }
        end_if(c, after);
        return true;
    }
    for (int32_t j = 0; j < nbox; j++) {
        LLVMValueRef args[6] = {cg_add(c->b, dst0, cg_i32c(c, (int64_t)j * rows * sw)), map,
                                cg_add(c->b, of, cg_i32c(c, (int64_t)j * boxw)), os, bar, oo};
        if (oo)
            asm_void(c, args, 6,
                     "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $5}], [$4];",
                     "r,l,r,r,r,r,~{memory}");
        else
            asm_void(c, args, 5,
                     "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];",
                     "r,l,r,r,r,~{memory}");
    }
    end_if(c, after);
    return true;
}

static bool lower_wait(Cg *c, const IrOp *op)
{
    LLVMValueRef args[2] = {barrier_addr(c, op->operands[0], cg_get(c, op->operands[1]).v[0]),
                            as_i32(c, cg_get(c, op->operands[2]).v[0])};
    LLVMValueRef cond = op->attr.i == 1 ? thread0(c) : NULL;
    if (op->noperands > 3) {
        LLVMValueRef p = cg_get(c, op->operands[3]).v[0];
        cond = cond ? LLVMBuildAnd(c->b, cond, p, "") : p;
    }
    LLVMBasicBlockRef after = cond ? begin_if(c, cond) : NULL;
    asm_void(c, args, 2,
             "{\n.reg .pred tile_p;\ntile_tma_wait_${:uid}:\n"
             "mbarrier.try_wait.parity.shared::cta.b64 tile_p, [$0], $1;\n"
             "@!tile_p bra tile_tma_wait_${:uid};\n}",
             "r,r,~{memory}");
    if (after) end_if(c, after);
    return true;
}

/* Each warp's lane 0 arrives once (the warp is done with the stage: its reads came
 * before, and a wgmma's were retired by its wait_group). On a cluster, lane q on CTA
 * q's barrier with the default semantics (release at CTA scope), as CUTLASS's
 * consumer release does: the arrive orders reads, no data; `.release.cluster` made
 * ptxas put MEMBAR.ALL.GPU, ERRBAR and CGAERRBAR before each (ncu on the H200: 43% of
 * the cluster GEMM's stall samples; 466 us against 179 without clusters). */
static bool lower_arrive(Cg *c, const IrOp *op)
{
    int32_t n = op->attr.i ? ir_cluster_size(c->f) : 1;
    LLVMValueRef cond = n > 1 ? LLVMBuildICmp(c->b, LLVMIntULT, c->lane, cg_i32c(c, n), "")
                              : LLVMBuildICmp(c->b, LLVMIntEQ, c->lane, cg_i32c(c, 0), "");
    if (op->noperands > 2) cond = LLVMBuildAnd(c->b, cond, cg_get(c, op->operands[2]).v[0], "");
    LLVMValueRef addr = barrier_addr(c, op->operands[0], cg_get(c, op->operands[1]).v[0]);
    LLVMBasicBlockRef after = begin_if(c, cond);
    if (n > 1) {   /* lane q: on CTA q's barrier */
        LLVMValueRef args[2] = {addr, c->lane};
        asm_void(c, args, 2,
                 "{\n.reg .b32 tile_remote;\nmapa.shared::cluster.u32 tile_remote, $0, $1;\n"
                 "mbarrier.arrive.shared::cluster.b64 _, [tile_remote];\n}",
                 "r,r,~{memory}");
    } else {
        asm_void(c, &addr, 1, "mbarrier.arrive.shared::cta.b64 _, [$0];", "r,~{memory}");
    }
    end_if(c, after);
    return true;
}

/* Every thread of the cluster: arrive (release: this thread's writes and arrivals before
 * it), then wait (acquire) until every thread of every CTA has arrived. */
static bool lower_cluster_sync(Cg *c)
{
    asm_void(c, NULL, 0, "barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;", "~{memory}");
    return true;
}

/* cluster_syncs after the producer op at its level: its warpgroup's threads, which leave
 * after the region, arrive on the one that ends the kernel (at most one). */
static int syncs_after(const IrOp *op)
{
    int n = 0;
    for (const IrOp *o = op->next; o; o = o->next) n += o->code == IR_OP_CLUSTER_SYNC;
    return n;
}

/* Each element of the value where it lies inside the tensor, stored by its own
 * instruction (the index math in the operands' integer type, as block_store's meaning
 * says). */
static void store_by_element(Cg *c, const IrOp *op, const IrLayoutMap *l, CgVal v, LLVMValueRef orow, LLVMValueRef ocol)
{
    IrElem ie = ir_value_type(c->f, op->operands[3])->elem;
    LLVMTypeRef it = LLVMTypeOf(orow), mt = cg_mem_type(c, cg_type(c, op->operands[1])->elem);
    LLVMValueRef ptr = cg_get(c, op->operands[2]).v[0], zero = LLVMConstInt(it, 0, 0);
    LLVMValueRef dim[2] = {cg_get(c, op->operands[3]).v[0], cg_get(c, op->operands[4]).v[0]};
    LLVMValueRef str[2] = {cg_get(c, op->operands[5]).v[0], cg_get(c, op->operands[6]).v[0]};
    LLVMValueRef off[2] = {orow, ocol};
    for (uint32_t k = 0; k < cg_layout_elems(l); k++) {
        LLVMValueRef co[IR_MAX_RANK], in = cg_layout_owner_at(c, l, k), idx = zero;
        cg_layout_coords(c, l, k, co);
        for (int d = 0; d < 2; d++) {   /* coordinates inside the tile: i32, >= 0 */
            LLVMValueRef cd = LLVMGetIntTypeWidth(it) == 32 ? co[d] : LLVMBuildZExt(c->b, co[d], it, "");
            LLVMValueRef x = LLVMBuildAdd(c->b, off[d], cd, "");
            in = LLVMBuildAnd(c->b, in, LLVMBuildICmp(c->b, LLVMIntSGE, x, zero, ""), "");
            in = LLVMBuildAnd(c->b, in, LLVMBuildICmp(c->b, LLVMIntSLT, x, dim[d], ""), "");
            idx = LLVMBuildAdd(c->b, idx, LLVMBuildMul(c->b, x, str[d], ""), "");
        }
        idx = cg_convert_scalar(c, idx, ie, IR_I64);
        LLVMBasicBlockRef after = begin_if(c, in);
        LLVMBuildStore(c->b, cg_at(v, k), LLVMBuildGEP2(c->b, mt, ptr, &idx, 1, ""));
        end_if(c, after);
    }
}

typedef struct Overlap {
    const IrFunc *f;
    const IrOp *alloc;
    uint32_t lo, hi;
    bool found;
} Overlap;

static uint32_t alloc_bytes(const IrFunc *f, const IrOp *alloc)
{
    const IrType *t = ir_value_type(f, alloc->results[0]);
    return (uint32_t)ir_type_numel(t) * (uint32_t)ir_elem_bytes(t->elem);
}

static void find_overlap(IrOp *op, void *ud)
{
    Overlap *o = ud;
    if (op->code != IR_OP_LOCAL_ALLOC || op == o->alloc) return;
    uint32_t lo = (uint32_t)op->attr.i, hi = lo + alloc_bytes(o->f, op);
    if (lo < o->hi && o->lo < hi) o->found = true;
}

/* Whether another buffer lies in the bytes of staging buffer `alloc` (tma_stores in the
 * two branches of an `if` share an area, passes/tmastore.c). */
static bool area_shared(Cg *c, const IrOp *alloc)
{
    Overlap o = {.f = c->f, .alloc = alloc, .lo = (uint32_t)alloc->attr.i};
    o.hi = o.lo + alloc_bytes(c->f, alloc);
    ir_walk((IrBlock *)&c->f->body, find_overlap, &o);
    return o.found;
}

/* tma_store %buf, %v, %p, shapes, strides, offsets: the value in chunks of the staging
 * buffer's shape (rows R of the buffer, cols = swizzle / element bytes; chunk q = the
 * column block q / NR and the row block q % NR), chunk q into buf[q % 2]:
 *   the issuing thread waits until at most one bulk group still reads (the one of the
 *   other half), a barrier; every thread writes its elements of chunk q at their
 *   swizzled addresses (row r, byte b: r * SW + b, the 16-byte chunk XORed with address
 *   bits 7-9, as TMA's swizzle of that width reads them; column pairs as one store),
 *   fence.proxy.async (generic writes visible to TMA), a barrier; the issuing thread
 *   stores the box at (col offset + its columns, row offset + its rows) and commits its
 *   bulk group.
 * Coordinates outside the tensor are not written by the copy, which is block_store's
 * meaning. Which chunk an element is in is known at compile time where it is the same
 * for every thread (accumulator layouts); elsewhere the store is predicated. */
static bool lower_store(Cg *c, const IrOp *op)
{
    const IrType *bt = cg_type(c, op->operands[0]), *vt = cg_type(c, op->operands[1]);
    const IrOp *alloc = c->f->values[op->operands[0]].def;
    if (!alloc || alloc->code != IR_OP_LOCAL_ALLOC || bt->rank != 3 || vt->rank != 2 || !bt->layout->swizzle_bytes)
        return cg_error(c, op, "internal error: a tma_store without its staging buffer");
    LLVMValueRef map = desc_addr(c, op);
    if (!map) return cg_error(c, op, "internal error: a tma_store whose tensor is not known on the host");
    IrLayoutMap l = ir_layout_map(vt);
    CgVal v = cg_get(c, op->operands[1]);
    IrElem e = vt->elem;
    LLVMTypeRef mt = cg_mem_type(c, e), i8 = LLVMInt8TypeInContext(c->ctx);
    int32_t eb = ir_elem_bytes(e), sw = bt->layout->swizzle_bytes, cols = sw / eb, rows = bt->shape[1];
    int32_t nr = vt->shape[0] / rows, nchunk = nr * (vt->shape[1] / cols);
    uint32_t half = (uint32_t)rows * (uint32_t)sw, base = c->smem_buffers + (uint32_t)alloc->attr.i;
    /* a pingpong kernel's warpgroups each stage through their own two halves */
    LLVMValueRef goff = bt->shape[0] == 4 && c->groups > 1 ? cg_mul(c->b, c->group, cg_i32c(c, (int64_t)2 * half))
                                                            : cg_i32c(c, 0);
    uint32_t run = cg_layout_run(&l), n = cg_layout_elems(&l), threads = c->threads;
    if (run * (uint32_t)eb > 16 || (run & (run - 1))) run = 1;
    LLVMValueRef orow = cg_get(c, op->operands[7]).v[0], ocol = cg_get(c, op->operands[8]).v[0];
    LLVMValueRef row0 = as_i32(c, orow), col0 = as_i32(c, ocol);
    /* TMA stores take no box that starts before the tensor (the H200 faults on a
     * negative coordinate): such a block, part of which lies before row 0 or column 0,
     * is stored element by element, each inside the tensor (uniform: the offsets are
     * scalars) */
    LLVMTypeRef it = LLVMTypeOf(orow);
    LLVMValueRef zero = LLVMConstInt(it, 0, 0);
    LLVMValueRef neg = LLVMBuildOr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, orow, zero, ""),
                                   LLVMBuildICmp(c->b, LLVMIntSLT, ocol, zero, ""), "");
    LLVMBasicBlockRef slow = cg_block_new(c, "tma.store.edge"), fast = cg_block_new(c, "tma.store"),
                      done = cg_block_new(c, "tma.store.done");
    LLVMBuildCondBr(c->b, neg, slow, fast);
    LLVMPositionBuilderAtEnd(c->b, slow);
    store_by_element(c, op, &l, v, orow, ocol);
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, fast);
    /* each element's chunk for every thread: lo..hi */
    int32_t *lo = tl_malloc(n * sizeof *lo), *hi = tl_malloc(n * sizeof *hi);
    if (!lo || !hi) tl_oom();
    for (uint32_t k = 0; k < n; k++) {
        lo[k] = INT32_MAX, hi[k] = -1;
        for (uint32_t t = 0; t < threads; t++) {
            int64_t co[IR_MAX_RANK];
            cg_layout_coords_at(&l, t, k, co);
            int32_t j = (int32_t)(co[1] / cols * nr + co[0] / rows);
            if (j < lo[k]) lo[k] = j;
            if (j > hi[k]) hi[k] = j;
        }
    }
    /* the first chunk's half may still be read by the last bulk group issued before it
     * where that group was another store's through the same area, or this store's own
     * one chunk in an earlier iteration: it waits for every group then */
    bool drain = nchunk == 1 || area_shared(c, alloc);
    /* a store of a sequence through one area (seq k, passes/tmastore.c): one chunk, in
     * half k % 2; the bulk group still in flight at most is the previous store's, in
     * the other half; the first of the sequence waits for all (the last one of the
     * previous tile of a persistent kernel may be in its half) */
    uint32_t seq = op->attr.i > 0 ? (uint32_t)(op->attr.i - 1) : 0;
    if (op->attr.i > 0) drain = seq == 0;
    for (int32_t j = 0; j < nchunk; j++) {
        uint32_t at = base + (uint32_t)((j + (int32_t)(seq % 2)) % 2) * half;
        int64_t r0 = (int64_t)(j % nr) * rows, c0 = (int64_t)(j / nr) * cols;   /* the chunk's corner */
        LLVMBasicBlockRef after = begin_if(c, thread0(c));
        asm_void(c, NULL, 0, j == 0 && drain ? "cp.async.bulk.wait_group.read 0;" : "cp.async.bulk.wait_group.read 1;",
                 "~{memory}");
        end_if(c, after);
        cg_barrier(c);
        for (uint32_t k = 0; k < n; k += run) {
            uint32_t w = run;
            for (uint32_t i = 1; i < run; i++)      /* a pair only where both sit in one chunk */
                if (lo[k + i] != lo[k] || hi[k + i] != hi[k]) w = 1;
            for (uint32_t k2 = k; k2 < k + run; k2 += w) {
                if (j < lo[k2] || j > hi[k2]) continue;
                LLVMValueRef co[IR_MAX_RANK];
                cg_layout_coords(c, &l, k2, co);
                LLVMValueRef cb = cg_mul(c->b, LLVMBuildSub(c->b, co[1], cg_i32c(c, c0), ""), cg_i32c(c, eb));
                LLVMValueRef o = cg_add(c->b, cg_mul(c->b, LLVMBuildSub(c->b, co[0], cg_i32c(c, r0), ""), cg_i32c(c, sw)), cb);
                LLVMValueRef x = cg_shl(c->b, cg_and(c->b, LLVMBuildLShr(c->b, o, cg_i32c(c, 7), ""),
                                                     cg_i32c(c, sw / 16 - 1)), cg_i32c(c, 4));
                o = cg_add(c->b, LLVMBuildXor(c->b, o, x, ""), cg_i32c(c, at));
                LLVMValueRef val;
                if (w == 1) {
                    val = cg_at(v, k2);
                } else {
                    val = LLVMGetUndef(LLVMVectorType(mt, w));
                    for (uint32_t i = 0; i < w; i++)
                        val = LLVMBuildInsertElement(c->b, val, cg_at(v, k2 + i), cg_i32c(c, i), "");
                }
                LLVMBasicBlockRef skip = NULL;
                if (lo[k2] != hi[k2]) {   /* this element is in chunk j for some threads only */
                    LLVMValueRef q = cg_add(c->b, cg_mul(c->b, LLVMBuildUDiv(c->b, co[1], cg_i32c(c, cols), ""), cg_i32c(c, nr)),
                                            LLVMBuildUDiv(c->b, co[0], cg_i32c(c, rows), ""));
                    LLVMValueRef in = LLVMBuildICmp(c->b, LLVMIntEQ, q, cg_i32c(c, j), "");
                    skip = begin_if(c, in);
                }
                o = cg_add(c->b, o, goff);   /* the buffer area: not the warpgroup's scratch */
                LLVMValueRef st = LLVMBuildStore(c->b, val, LLVMBuildGEP2(c->b, i8, c->smem, &o, 1, ""));
                LLVMSetAlignment(st, w * (unsigned)eb);
                if (skip) end_if(c, skip);
            }
        }
        asm_void(c, NULL, 0, "fence.proxy.async.shared::cta;", "~{memory}");
        cg_barrier(c);
        after = begin_if(c, thread0(c));
        LLVMValueRef args[4] = {map, cg_add(c->b, col0, cg_i32c(c, c0)), cg_add(c->b, row0, cg_i32c(c, r0)),
                                cg_add(c->b, cg_add(c->b, cg_get(c, op->operands[0]).v[0], goff),
                                       cg_i32c(c, (int64_t)at - base))};   /* the half written */
        asm_void(c, args, 4, "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];",
                 "l,r,r,r,~{memory}");
        asm_void(c, NULL, 0, "cp.async.bulk.commit_group;", "~{memory}");
        end_if(c, after);
    }
    tl_free(lo);
    tl_free(hi);
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
    return true;
}

/* The issuing thread waits for its bulk groups: the stores are written and their
 * buffers read before the program ends. */
static bool lower_store_wait(Cg *c)
{
    LLVMBasicBlockRef after = begin_if(c, thread0(c));
    asm_void(c, NULL, 0, "cp.async.bulk.wait_group 0;", "~{memory}");
    end_if(c, after);
    return true;
}

/* The split (passes/warpspec.c): threads from c->threads on are the producer
 * warpgroup; it gives registers back (setmaxnreg.dec, every warp of the warpgroup), one
 * of its threads runs the region, and all of them leave. The consumers take the
 * registers (setmaxnreg.inc) and go on with the ops after the producer, their barriers
 * now the named barrier 1 of c->threads threads (cg_barrier). */
static bool lower_producer(Cg *c, const IrOp *op)
{
    if (c->producer_threads != IR_WARPGROUP_THREADS || c->in_producer || c->consumers)
        return cg_error(c, op, "internal error: a producer the kernel's launch does not provide for");
    char text[64];
    int syncs = syncs_after(op);
    if (syncs > 1) return cg_error(c, op, "internal error: %d cluster_syncs after a producer (at most one)", syncs);
    LLVMBasicBlockRef prod = cg_block_new(c, "ws.producer"), run = cg_block_new(c, "ws.issue"),
                      cons = cg_block_new(c, "ws.consumer"), leave = c->exit_bb;
    if (syncs) {   /* the producer's threads arrive on the final cluster barrier as they leave */
        leave = cg_block_new(c, "ws.leave");
        LLVMBasicBlockRef here = LLVMGetInsertBlock(c->b);
        LLVMPositionBuilderAtEnd(c->b, leave);
        asm_void(c, NULL, 0, "barrier.cluster.arrive.release;", "~{memory}");
        LLVMBuildBr(c->b, c->exit_bb);
        LLVMPositionBuilderAtEnd(c->b, here);
    }
    uint32_t consumers = (uint32_t)c->threads * (uint32_t)c->groups;
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntUGE, c->raw_tid, cg_i32c(c, consumers), ""), prod, cons);
    LLVMPositionBuilderAtEnd(c->b, prod);
    snprintf(text, sizeof text, "setmaxnreg.dec.sync.aligned.u32 %d;", (int)(op->attr.i & 0xffff));
    asm_void(c, NULL, 0, text, "~{memory}");
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, c->raw_tid, cg_i32c(c, consumers), ""), run, leave);
    LLVMPositionBuilderAtEnd(c->b, run);
    c->in_producer = true;
    bool ok = cg_body(c, &op->regions[0]);
    c->in_producer = false;
    if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(c->b))) LLVMBuildBr(c->b, leave);
    LLVMPositionBuilderAtEnd(c->b, cons);
    snprintf(text, sizeof text, "setmaxnreg.inc.sync.aligned.u32 %d;", (int)(op->attr.i >> 16));
    asm_void(c, NULL, 0, text, "~{memory}");
    c->consumers = true;
    return ok;
}

/* The consumers' turns: two consumer warpgroups of 256 threads (FlashAttention-3's
 * ping-pong, passes/warpspec.c: named barriers 2 and 3) or a pingpong kernel's two of
 * 128 each (passes/persistent.c: barriers 3 and 4; 1 and 2 are their own), one barrier
 * per warpgroup's turn, each of both warpgroups' threads. wait: bar.sync on this
 * warpgroup's (it completes when the other has passed); pass: bar.arrive on the
 * other's; start: warpgroup 1 passes to warpgroup 0 once; end: the warpgroup owed the
 * last pass takes it, so that both barriers are left complete (0; with the count n of
 * a pingpong kernel's turns, warpgroup n % 2). */
static bool lower_turn(Cg *c, const IrOp *op)
{
    bool pp = c->groups > 1;
    if (!c->consumers || (pp ? c->threads != (int)IR_WARPGROUP_THREADS : c->threads != 2 * (int)IR_WARPGROUP_THREADS))
        return cg_error(c, op, "internal error: a turn without two consumer warpgroups");
    int base = pp ? 3 : 2;
    const char *sync = "bar.sync $0, 256;", *arrive = "bar.arrive $0, 256;";
    LLVMValueRef wg = pp ? c->group : LLVMBuildUDiv(c->b, c->tid, cg_i32c(c, (int32_t)IR_WARPGROUP_THREADS), "");
    LLVMValueRef mine = LLVMBuildAdd(c->b, wg, cg_i32c(c, base), ""), other = LLVMBuildSub(c->b, cg_i32c(c, base + 1), wg, "");
    LLVMValueRef first = LLVMBuildICmp(c->b, LLVMIntEQ, wg, cg_i32c(c, 0), "");
    switch (op->attr.i) {
    case IR_TURN_WAIT:
        asm_void(c, &mine, 1, sync, "r,~{memory}");
        return true;
    case IR_TURN_PASS:
        asm_void(c, &other, 1, arrive, "r,~{memory}");
        return true;
    case IR_TURN_START: {   /* warpgroup 0's barrier, by number */
        char text[32];
        snprintf(text, sizeof text, "bar.arrive %d, 256;", base);
        LLVMBasicBlockRef after = begin_if(c, LLVMBuildNot(c->b, first, ""));
        asm_void(c, NULL, 0, text, "~{memory}");
        end_if(c, after);
        return true;
    }
    default: {
        if (!op->noperands) {   /* warpgroup 0 is owed the last pass (FlashAttention-3's loops) */
            char text[32];
            snprintf(text, sizeof text, "bar.sync %d, 256;", base);
            LLVMBasicBlockRef after = begin_if(c, first);
            asm_void(c, NULL, 0, text, "~{memory}");
            end_if(c, after);
            return true;
        }
        /* n turns: the warpgroup n % 2 is owed one more pass than it waited for */
        LLVMValueRef n = cg_get(c, op->operands[0]).v[0];
        LLVMValueRef owed = LLVMBuildICmp(c->b, LLVMIntEQ, LLVMBuildAnd(c->b, n, cg_i32c(c, 1), ""), wg, "");
        LLVMBasicBlockRef after = begin_if(c, owed);
        asm_void(c, &mine, 1, sync, "r,~{memory}");
        end_if(c, after);
        return true;
    }
    }
}

bool cg_tma(Cg *c, const IrOp *op)
{
    if (!c->target->tma) return cg_error(c, op, "%s needs the tensor-memory accelerator (sm_90a)", ir_op_info[op->code].text);
    switch (op->code) {
    case IR_OP_MBARRIER_INIT: return lower_init(c, op);
    case IR_OP_TMA_COPY: return lower_copy(c, op);
    case IR_OP_TMA_WAIT: return lower_wait(c, op);
    case IR_OP_MBARRIER_ARRIVE: return lower_arrive(c, op);
    case IR_OP_PRODUCER: return lower_producer(c, op);
    case IR_OP_TURN: return lower_turn(c, op);
    case IR_OP_TMA_STORE: return lower_store(c, op);
    case IR_OP_TMA_STORE_WAIT: return lower_store_wait(c);
    case IR_OP_CLUSTER_SYNC: return lower_cluster_sync(c);
    default: return cg_error(c, op, "not a TMA op");
    }
}

/* The hidden parameters' attributes: byval [128 x i8], align 64, grid_constant. */
void cg_tma_params(Cg *c)
{
    if (!c->ntma) return;
    LLVMTypeRef map = LLVMArrayType2(LLVMInt8TypeInContext(c->ctx), 128);
    unsigned byval = LLVMGetEnumAttributeKindForName("byval", 5), align = LLVMGetEnumAttributeKindForName("align", 5);
    LLVMMetadataRef idx[CG_MAX_TMA];
    for (uint32_t j = 0; j < c->ntma; j++) {
        unsigned at = c->f->body.nargs + j;
        LLVMAddAttributeAtIndex(c->fn, at + 1, LLVMCreateTypeAttribute(c->ctx, byval, map));
        LLVMAddAttributeAtIndex(c->fn, at + 1, LLVMCreateEnumAttribute(c->ctx, align, 64));
        char name[24];
        snprintf(name, sizeof name, "tma.map%u", j);
        LLVMSetValueName2(LLVMGetParam(c->fn, at), name, strlen(name));
        /* grid_constant counts parameters from 1 */
        idx[j] = LLVMValueAsMetadata(LLVMConstInt(cg_i32(c), at + 1, 0));
    }
    LLVMMetadataRef ops[3] = {LLVMValueAsMetadata(c->fn), LLVMMDStringInContext2(c->ctx, "grid_constant", 13),
                              LLVMMDNodeInContext2(c->ctx, idx, c->ntma)};
    LLVMAddNamedMetadataOperand(c->mod, "nvvm.annotations",
                                LLVMMetadataAsValue(c->ctx, LLVMMDNodeInContext2(c->ctx, ops, 3)));
}
