/* Control flow and the op dispatcher: structured regions (for, if, while, return)
 * become an LLVM CFG with one phi per carried element; every other op goes to its
 * family file.
 *
 * Conditions and loop bounds are scalars, hence uniform: every thread of a program
 * takes the same path, which is what makes the barriers inside layout conversions,
 * reductions and dot legal anywhere. `return` branches to the kernel's exit block;
 * code after it in the same region lands in a block without predecessors, which LLVM
 * deletes. */
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"

static bool cg_op(Cg *c, const IrOp *op);

/* ---- load scheduling ------------------------------------------------------------------- */

/* A load after a reduction waits for it: the reduction's barriers order the global load
 * after them, in LLVM and in ptxas (rmsnorm's `w`, read after the row's sum). Emitting
 * the load before the reduction, as soon as its operands exist, puts its latency under
 * the reduction's. A load moves only above pure ops and other loads, never across a
 * store, an atomic, print/assert or a region op, and never out of its block. It moves
 * only when that passes a reduction, scan or dot (elsewhere ptxas schedules loads
 * itself), and while the values moved so far take at most CG_HOIST_BYTES per thread:
 * they stay live across the reduction, and registers decide occupancy: rmsnorm at
 * BLOCK=4096 with its bf16 `w` (32 bytes) moved needs 44 registers (5 programs of 256
 * threads per SM) instead of fitting the 32-register cap (8 programs, cg_occupancy.c),
 * and layernorm's f32 `w` and `b` would take 32 registers. */
#define CG_HOIST_BYTES 16

static bool is_fence(const IrOp *op)
{
    return op->code != IR_OP_LOAD && !(ir_op_info[op->code].flags & IR_P);
}

static bool has_barrier(const IrOp *op)
{
    switch (op->code) {
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN:
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: case IR_OP_DOT: case IR_OP_XOR_SUM: case IR_OP_REDUCE: case IR_OP_SCAN:
        return true;
    default: return false;
    }
}

/* Position in seq[0..n) of the op defining v; -1 if defined outside. */
static int def_pos(const IrOp **seq, uint32_t n, IrValue v)
{
    for (uint32_t i = n; i-- > 0;)
        for (uint32_t r = 0; r < seq[i]->nresults; r++)
            if (seq[i]->results[r] == v) return (int)i;
    return -1;
}

static uint32_t load_bytes(Cg *c, const IrOp *op)
{
    const IrType *t = cg_type(c, op->results[0]);
    IrLayoutMap l = ir_layout_map(t);
    return cg_layout_elems(&l) * (uint32_t)ir_elem_bytes(t->elem);
}

/* Marks in in[lo..i] the load at i and the ops after lo it depends on (its address
 * computation); false if that includes a reduction (the load needs its result). */
static bool closure(const IrOp **seq, uint32_t lo, uint32_t i, bool *in)
{
    memset(in + lo, 0, (i - lo + 1) * sizeof *in);
    in[i] = true;
    for (uint32_t j = i + 1; j-- > lo;) {
        if (!in[j]) continue;
        if (has_barrier(seq[j])) return false;
        for (uint32_t k = 0; k < seq[j]->noperands; k++) {
            int d = def_pos(seq, j, seq[j]->operands[k]);
            if (d >= (int)lo) in[d] = true;
        }
    }
    return true;
}

/* Moves the load at i, with the pure ops computing its operands, to just before the
 * first reduction after the last fence, if there is one and the budget allows. */
static void hoist_load(Cg *c, const IrOp **seq, uint32_t i, bool *in, const IrOp **tmp, uint32_t *budget)
{
    uint32_t lo = i, b = i;
    while (lo > 0 && !is_fence(seq[lo - 1])) lo--;
    for (uint32_t j = lo; j < i && b == i; j++)
        if (has_barrier(seq[j])) b = j;
    uint32_t bytes = load_bytes(c, seq[i]);
    if (b == i || bytes > *budget || !closure(seq, b, i, in)) return;
    *budget -= bytes;
    uint32_t n = 0;
    for (uint32_t j = b; j <= i; j++)
        if (in[j]) tmp[n++] = seq[j];
    for (uint32_t j = b; j <= i; j++)
        if (!in[j]) tmp[n++] = seq[j];
    memcpy(seq + b, tmp, n * sizeof *seq);
}

/* The ops from first up to (not including) stop, in emission order. */
static const IrOp **schedule(Cg *c, const IrOp *first, const IrOp *stop, uint32_t *count)
{
    uint32_t n = 0, budget = CG_HOIST_BYTES;
    for (const IrOp *op = first; op != stop; op = op->next) n++;
    const IrOp **seq = arena_alloc(c->arena, (n ? n : 1) * sizeof *seq);
    const IrOp **tmp = arena_alloc(c->arena, (n ? n : 1) * sizeof *tmp);
    bool *in = arena_alloc(c->arena, (n ? n : 1) * sizeof *in);
    n = 0;
    for (const IrOp *op = first; op != stop; op = op->next) seq[n++] = op;
    for (uint32_t i = 0; i < n; i++)
        if (seq[i]->code == IR_OP_LOAD) hoist_load(c, seq, i, in, tmp, &budget);
    *count = n;
    return seq;
}

/* Emits a region's ops; returns its terminator (NULL if none). A `return` becomes a
 * branch to the exit, and emission continues in a dead block. */
static const IrOp *region(Cg *c, const IrBlock *blk, bool *returned)
{
    *returned = false;
    const IrOp *stop = blk->first;
    while (stop && stop->code != IR_OP_RETURN && !(ir_op_info[stop->code].flags & IR_T)) stop = stop->next;
    uint32_t n;
    const IrOp **seq = schedule(c, blk->first, stop, &n);
    for (uint32_t i = 0; i < n; i++)
        if (!cg_op(c, seq[i])) return NULL;
    if (stop && stop->code == IR_OP_RETURN) {
        LLVMBuildBr(c->b, c->exit_bb);
        LLVMPositionBuilderAtEnd(c->b, cg_block_new(c, "dead"));
        *returned = true;
    }
    return stop;
}

/* Phis in the current block for values of the given types, one per element. */
static CgVal *phis(Cg *c, const IrValue *vals, uint32_t n)
{
    CgVal *out = arena_alloc(c->arena, (n ? n : 1) * sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        const IrType *t = cg_type(c, vals[i]);
        IrLayoutMap l = ir_layout_map(t);
        out[i] = cg_val_new(c, cg_layout_elems(&l));
        for (uint32_t k = 0; k < out[i].n; k++) out[i].v[k] = LLVMBuildPhi(c->b, cg_elem_type(c, t->elem), "");
    }
    return out;
}

/* The values of IR values, as CgVals (for incoming edges). */
static CgVal *vals_of(Cg *c, const IrValue *vals, uint32_t n)
{
    CgVal *out = arena_alloc(c->arena, (n ? n : 1) * sizeof *out);
    for (uint32_t i = 0; i < n; i++) out[i] = cg_get(c, vals[i]);
    return out;
}

static void incoming(CgVal *ph, const CgVal *from, uint32_t n, LLVMBasicBlockRef bb)
{
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t k = 0; k < ph[i].n; k++) {
            LLVMValueRef v = cg_at(from[i], k);
            LLVMAddIncoming(ph[i].v[k], &v, &bb, 1);
        }
}

/* Phis at the start of block bb (the builder returns to where it was). */
static CgVal *phis_in(Cg *c, LLVMBasicBlockRef bb, const IrValue *types_of, uint32_t n)
{
    LLVMBasicBlockRef here = LLVMGetInsertBlock(c->b);
    LLVMPositionBuilderAtEnd(c->b, bb);
    CgVal *p = phis(c, types_of, n);
    LLVMPositionBuilderAtEnd(c->b, here);
    return p;
}

static bool failed(Cg *c) { return c->failed; }

/* ---- for ----------------------------------------------------------------------------- */

/* The interpreter counts in 64 bits: the induction variable of a narrower type never
 * wraps, and a 64-bit one stops when the next value would overflow. */
static LLVMValueRef widen(Cg *c, LLVMValueRef x, IrElem e)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    if (ir_elem_bits(e) == 64) return x;
    return ir_elem_is_signed(e) ? LLVMBuildSExt(c->b, x, i64, "") : LLVMBuildZExt(c->b, x, i64, "");
}

/* Ends a for body that did not return: iv + step, back to the head. */
static void for_latch(Cg *c, IrElem e, LLVMValueRef iv, LLVMValueRef step, CgVal *it, CgVal *res,
                      const CgVal *yielded, uint32_t n, LLVMBasicBlockRef exit)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef next;
    if (ir_elem_bits(e) == 64) {
        LLVMValueRef args[2] = {iv, step};
        LLVMValueRef pair = cg_intrinsic(c, "llvm.sadd.with.overflow", &i64, 1, args, 2);
        next = LLVMBuildExtractValue(c->b, pair, 0, "");
        LLVMBasicBlockRef cont = cg_block_new(c, "for.next");
        LLVMBuildCondBr(c->b, LLVMBuildExtractValue(c->b, pair, 1, ""), exit, cont);
        incoming(res, yielded, n, LLVMGetInsertBlock(c->b));
        LLVMPositionBuilderAtEnd(c->b, cont);
    } else {
        next = LLVMBuildAdd(c->b, iv, step, "");
    }
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, LLVMGetInstructionParent(iv));
    LLVMAddIncoming(iv, &next, &latch, 1);
    incoming(it, yielded, n, latch);
}

/* A K loop that issues its own TMA copies (passes/shared.c without a producer: its
 * warps wait on the ring and one thread refills it), run by every thread of the block
 * (inside no `if` and no producer region: shfl.sync needs every lane). Its index goes
 * through shfl.sync.idx from lane 0 (cg_lane0): ptxas then keeps the stage, the
 * phase, the stage addresses and the wgmma descriptors made from it in uniform
 * registers. From the loop's phi they were vector values, and each wgmma waited for
 * R2URs of its descriptors: GEMM + GELU's default K loop had 31 R2URs a step (now 2),
 * the graph GEMMs' 16 for their 4 wgmmas; with a producer (ws) the consumers' loops
 * were uniform already. */
static bool tma_issuing_loop(const IrOp *loop)
{
    for (const IrBlock *b = loop->parent; b && b->parent_op; b = b->parent_op->parent)
        if (b->parent_op->code != IR_OP_FOR) return false;
    for (const IrOp *op = loop->regions[0].first; op; op = op->next)
        if (op->code == IR_OP_TMA_COPY) return true;
    return false;
}

static bool lower_for(Cg *c, const IrOp *op)
{
    const IrBlock *body = &op->regions[0];
    IrElem e = cg_type(c, op->operands[0])->elem;
    uint32_t n = op->noperands - 3;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef lo = widen(c, cg_get(c, op->operands[0]).v[0], e), hi = widen(c, cg_get(c, op->operands[1]).v[0], e);
    LLVMValueRef step = widen(c, cg_get(c, op->operands[2]).v[0], e);
    if (op->attr.i && c->groups > 1) {   /* `for pingpong`: warpgroup g takes iterations g, g + 2, ... */
        lo = LLVMBuildAdd(c->b, lo, LLVMBuildMul(c->b, LLVMBuildZExt(c->b, c->group, i64, ""), step, ""), "");
        step = LLVMBuildMul(c->b, step, LLVMConstInt(i64, (unsigned long long)c->groups, 0), "");
    }
    LLVMValueRef up = LLVMBuildICmp(c->b, LLVMIntSGT, step, LLVMConstNull(i64), "");
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = cg_block_new(c, "for"), bb = cg_block_new(c, "for.body");
    LLVMBasicBlockRef exit = cg_block_new(c, "for.end");
    CgVal *inits = vals_of(c, op->operands + 3, n);
    for (uint32_t i = 0; i < n; i++) {   /* wgmma accumulators starting from constants */
        const IrLayout *l = cg_type(c, op->operands[3 + i])->layout;
        bool consts = c->wgmma && l && l->kind == IR_LAYOUT_MMA && l->version == 3 && inits[i].n > 1;
        for (uint32_t k = 0; consts && k < inits[i].n; k++) consts = LLVMIsConstant(inits[i].v[k]);
        if (consts) inits[i] = cg_wgmma_hold(c, inits[i]);
    }
    CgPrefetch pf, *outer = c->pf;
    bool prefetch = cg_prefetch_begin(c, op, &pf);
    LLVMBuildBr(c->b, head);
    LLVMPositionBuilderAtEnd(c->b, head);
    LLVMValueRef iv = LLVMBuildPhi(c->b, i64, "iv");
    LLVMAddIncoming(iv, &lo, &pre, 1);
    CgVal *it = phis(c, op->operands + 3, n);
    incoming(it, inits, n, pre);
    CgVal *res = phis_in(c, exit, op->operands + 3, n);
    incoming(res, it, n, head);
    if (prefetch) cg_prefetch_phis(c, &pf, pre);
    c->pf = prefetch ? &pf : NULL;
    LLVMValueRef go = LLVMBuildSelect(c->b, up, LLVMBuildICmp(c->b, LLVMIntSLT, iv, hi, ""),
                                      LLVMBuildICmp(c->b, LLVMIntSGT, iv, hi, ""), "");
    LLVMBuildCondBr(c->b, go, bb, exit);
    LLVMPositionBuilderAtEnd(c->b, bb);
    CgVal ivv = cg_val_new(c, 1);
    ivv.v[0] = ir_elem_bits(e) == 64 ? iv : LLVMBuildTrunc(c->b, iv, cg_elem_type(c, e), "");
    if (tma_issuing_loop(op)) ivv.v[0] = cg_lane0(c, ivv.v[0]);
    cg_set(c, body->args[0], ivv);
    for (uint32_t i = 0; i < n && i + 1 < body->nargs; i++) cg_set(c, body->args[i + 1], it[i]);
    bool ret;
    const IrOp *term = region(c, body, &ret);
    if (failed(c)) {
        c->pf = outer;
        return false;
    }
    if (!ret) for_latch(c, e, iv, step, it, res, term ? vals_of(c, term->operands, n) : inits, n, exit);
    bool ok = !prefetch || ret || cg_prefetch_end(c, &pf, LLVMGetInsertBlock(c->b));
    c->pf = outer;
    if (!ok) return false;
    LLVMPositionBuilderAtEnd(c->b, exit);
    for (uint32_t i = 0; i < op->nresults; i++) cg_set(c, op->results[i], res[i]);
    return true;
}

/* ---- if, while ------------------------------------------------------------------------- */

static bool lower_if(Cg *c, const IrOp *op)
{
    LLVMBasicBlockRef then = cg_block_new(c, "then"), els = cg_block_new(c, "else"), join = cg_block_new(c, "endif");
    LLVMBuildCondBr(c->b, cg_get(c, op->operands[0]).v[0], then, els);
    CgVal *res = phis_in(c, join, op->results, op->nresults);
    LLVMBasicBlockRef arms[2] = {then, els};
    for (int r = 0; r < 2; r++) {
        LLVMPositionBuilderAtEnd(c->b, arms[r]);
        bool ret = false;
        const IrOp *term = r < (int)op->nregions ? region(c, &op->regions[r], &ret) : NULL;
        if (failed(c)) return false;
        if (ret) continue;
        if (term && op->nresults) incoming(res, vals_of(c, term->operands, op->nresults), op->nresults, LLVMGetInsertBlock(c->b));
        LLVMBuildBr(c->b, join);
    }
    LLVMPositionBuilderAtEnd(c->b, join);
    for (uint32_t i = 0; i < op->nresults; i++) cg_set(c, op->results[i], res[i]);
    return true;
}

/* before: args -> condition(c, values...); after: values -> yield(args...). */
static bool lower_while(Cg *c, const IrOp *op)
{
    const IrBlock *before = &op->regions[0], *after = &op->regions[1];
    uint32_t n = op->noperands;
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = cg_block_new(c, "while");
    LLVMBasicBlockRef body = cg_block_new(c, "while.body"), exit = cg_block_new(c, "while.end");
    CgVal *inits = vals_of(c, op->operands, n);
    LLVMBuildBr(c->b, head);
    LLVMPositionBuilderAtEnd(c->b, head);
    CgVal *args = phis(c, op->operands, n);
    incoming(args, inits, n, pre);
    for (uint32_t i = 0; i < n && i < before->nargs; i++) cg_set(c, before->args[i], args[i]);
    bool ret;
    const IrOp *cond = region(c, before, &ret);
    if (failed(c)) return false;
    if (ret || !cond || cond->code != IR_OP_CONDITION) {
        if (!ret) return cg_error(c, op, "while loop without a condition");
        LLVMPositionBuilderAtEnd(c->b, exit);
        return true;
    }
    CgVal *vals = vals_of(c, cond->operands + 1, op->nresults);
    LLVMBuildCondBr(c->b, cg_get(c, cond->operands[0]).v[0], body, exit);
    LLVMPositionBuilderAtEnd(c->b, body);
    for (uint32_t i = 0; i < op->nresults && i < after->nargs; i++) cg_set(c, after->args[i], vals[i]);
    const IrOp *y = region(c, after, &ret);
    if (failed(c)) return false;
    if (!ret) {
        if (y) incoming(args, vals_of(c, y->operands, n), n, LLVMGetInsertBlock(c->b));
        LLVMBuildBr(c->b, head);
    }
    LLVMPositionBuilderAtEnd(c->b, exit);
    for (uint32_t i = 0; i < op->nresults; i++) cg_set(c, op->results[i], vals[i]);
    return true;
}

/* ---- dispatch ------------------------------------------------------------------------------ */

static bool cg_op(Cg *c, const IrOp *op)
{
    switch (op->code) {
    case IR_OP_FOR: return lower_for(c, op);
    case IR_OP_IF: return lower_if(c, op);
    case IR_OP_WHILE: return lower_while(c, op);
    case IR_OP_SPLAT: case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS: case IR_OP_RESHAPE: case IR_OP_TRANS:
    case IR_OP_CONVERT_LAYOUT: case IR_OP_EXTRACT:
        return cg_shape_op(c, op);
    case IR_OP_LOAD: case IR_OP_STORE: case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN:
    case IR_OP_ATOMIC_XCHG: case IR_OP_ATOMIC_AND: case IR_OP_ATOMIC_OR: case IR_OP_ATOMIC_XOR:
    case IR_OP_ATOMIC_CAS: case IR_OP_BARRIER: case IR_OP_CHECK_BOUNDS:
        return cg_memory(c, op);
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_XOR_SUM:
        return cg_reduce(c, op);
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: return cg_scan(c, op);
    case IR_OP_REDUCE: return cg_reduce_region(c, op);
    case IR_OP_SCAN: return cg_scan_region(c, op);
    case IR_OP_DOT: return cg_dot(c, op);
    case IR_OP_DOT_WAIT: return cg_wgmma_wait(c, op);
    case IR_OP_LOCAL_ALLOC: case IR_OP_ASYNC_COPY: case IR_OP_ASYNC_COMMIT: case IR_OP_ASYNC_WAIT:
    case IR_OP_LOCAL_LOAD: case IR_OP_LOCAL_STORE: case IR_OP_FENCE_ASYNC:
        return cg_shared(c, op);
    case IR_OP_MBARRIER_INIT: case IR_OP_TMA_COPY: case IR_OP_TMA_WAIT: case IR_OP_MBARRIER_ARRIVE:
    case IR_OP_TMA_STORE: case IR_OP_TMA_STORE_WAIT:
    case IR_OP_PRODUCER: case IR_OP_TURN: case IR_OP_CLUSTER_SYNC:
        return cg_tma(c, op);
    case IR_OP_RAND: case IR_OP_RANDN: case IR_OP_PRINT: case IR_OP_ASSERT: case IR_OP_MULTIPLE_OF:
    case IR_OP_MAX_CONTIGUOUS:
        return cg_misc(c, op);
    default: return cg_elementwise(c, op);
    }
}

bool cg_combine(Cg *c, const IrOp *op, const IrBlock *blk, const LLVMValueRef *args, LLVMValueRef *out)
{
    for (uint32_t i = 0; i < blk->nargs; i++) {
        CgVal v = cg_val_new(c, 1);
        v.v[0] = args[i];
        cg_set(c, blk->args[i], v);
    }
    bool ret;
    const IrOp *y = region(c, blk, &ret);
    if (failed(c)) return false;
    if (ret || !y || y->code != IR_OP_YIELD) return cg_error(c, op, "internal: a combine region must end in yield");
    for (uint32_t i = 0; i < y->noperands; i++) out[i] = cg_get(c, y->operands[i]).v[0];
    return true;
}

bool cg_body(Cg *c, const IrBlock *body)
{
    bool ret;
    region(c, body, &ret);
    return !c->failed;
}
