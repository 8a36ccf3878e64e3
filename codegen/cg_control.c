/* Control flow and the op dispatcher: structured regions (for, if, while, return)
 * become an LLVM CFG with one phi per carried element; every other op goes to its
 * family file.
 *
 * Conditions and loop bounds are scalars, hence uniform: every thread of a program
 * takes the same path, which is what makes the barriers inside layout conversions,
 * reductions and dot legal anywhere. `return` branches to the kernel's exit block;
 * code after it in the same region lands in a block without predecessors, which LLVM
 * deletes. */
#include "codegen/cg_internal.h"

static bool cg_op(Cg *c, const IrOp *op);

/* Emits a region's ops; returns its terminator (NULL if none). A `return` becomes a
 * branch to the exit, and emission continues in a dead block. */
static const IrOp *region(Cg *c, const IrBlock *blk, bool *returned)
{
    *returned = false;
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (op->code == IR_OP_RETURN) {
            LLVMBuildBr(c->b, c->exit_bb);
            LLVMPositionBuilderAtEnd(c->b, cg_block_new(c, "dead"));
            *returned = true;
            return op;
        }
        if (ir_op_info[op->code].flags & IR_T) return op;
        if (!cg_op(c, op)) return NULL;
    }
    return NULL;
}

/* Phis in the current block for values of the given types, one per element. */
static CgVal *phis(Cg *c, const IrValue *vals, uint32_t n)
{
    CgVal *out = arena_alloc(c->arena, (n ? n : 1) * sizeof *out);
    for (uint32_t i = 0; i < n; i++) {
        const IrType *t = cg_type(c, vals[i]);
        CgLayout l = cg_layout_of(c->warps, t);
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

static bool lower_for(Cg *c, const IrOp *op)
{
    const IrBlock *body = &op->regions[0];
    IrElem e = cg_type(c, op->operands[0])->elem;
    uint32_t n = op->noperands - 3;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef lo = widen(c, cg_get(c, op->operands[0]).v[0], e), hi = widen(c, cg_get(c, op->operands[1]).v[0], e);
    LLVMValueRef step = widen(c, cg_get(c, op->operands[2]).v[0], e);
    LLVMValueRef up = LLVMBuildICmp(c->b, LLVMIntSGT, step, LLVMConstNull(i64), "");
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = cg_block_new(c, "for"), bb = cg_block_new(c, "for.body");
    LLVMBasicBlockRef exit = cg_block_new(c, "for.end");
    CgVal *inits = vals_of(c, op->operands + 3, n);
    LLVMBuildBr(c->b, head);
    LLVMPositionBuilderAtEnd(c->b, head);
    LLVMValueRef iv = LLVMBuildPhi(c->b, i64, "iv");
    LLVMAddIncoming(iv, &lo, &pre, 1);
    CgVal *it = phis(c, op->operands + 3, n);
    incoming(it, inits, n, pre);
    CgVal *res = phis_in(c, exit, op->operands + 3, n);
    incoming(res, it, n, head);
    LLVMValueRef go = LLVMBuildSelect(c->b, up, LLVMBuildICmp(c->b, LLVMIntSLT, iv, hi, ""),
                                      LLVMBuildICmp(c->b, LLVMIntSGT, iv, hi, ""), "");
    LLVMBuildCondBr(c->b, go, bb, exit);
    LLVMPositionBuilderAtEnd(c->b, bb);
    CgVal ivv = cg_val_new(c, 1);
    ivv.v[0] = ir_elem_bits(e) == 64 ? iv : LLVMBuildTrunc(c->b, iv, cg_elem_type(c, e), "");
    cg_set(c, body->args[0], ivv);
    for (uint32_t i = 0; i < n && i + 1 < body->nargs; i++) cg_set(c, body->args[i + 1], it[i]);
    bool ret;
    const IrOp *term = region(c, body, &ret);
    if (failed(c)) return false;
    if (!ret) for_latch(c, e, iv, step, it, res, term ? vals_of(c, term->operands, n) : inits, n, exit);
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
        return cg_shape_op(c, op);
    case IR_OP_LOAD: case IR_OP_STORE: case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN:
    case IR_OP_ATOMIC_XCHG: case IR_OP_ATOMIC_CAS:
        return cg_memory(c, op);
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN: return cg_reduce(c, op);
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: return cg_scan(c, op);
    case IR_OP_DOT: return cg_dot(c, op);
    case IR_OP_RAND: case IR_OP_RANDN: case IR_OP_PRINT: case IR_OP_ASSERT: case IR_OP_MULTIPLE_OF:
    case IR_OP_MAX_CONTIGUOUS:
        return cg_misc(c, op);
    default: return cg_elementwise(c, op);
    }
}

bool cg_body(Cg *c, const IrBlock *body)
{
    bool ret;
    region(c, body, &ret);
    return !c->failed;
}
