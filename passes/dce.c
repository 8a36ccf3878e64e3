/* Dead code elimination.
 *
 * require:    verified IR
 * guarantees: no pure op (IR_P in ops.def) has only unused results; an `if` without
 *             results whose regions hold nothing but their terminator is gone
 *
 *   %a = mul %x, %y : f32          (unused)        ->   (removed)
 *   %b = load %p : f32             (unused)        ->   %b = load %p : f32
 *
 * Ops with effects stay: store, atomics, assert, print, and load too. A load is not
 * pure because it can fault on an out-of-bounds lane, and the interpreter reports
 * that; removing a dead load would turn a reported error into silence. Loops stay
 * even when they compute nothing: a loop can run past the interpreter's step limit,
 * which is an error the program must still see.
 *
 * Walks every block backwards, regions before the op owning them, so a use is
 * dropped before its definition is looked at: one pass reaches the fixed point for
 * straight-line code; the pass repeats until nothing changes for the rest. */
#include "passes.h"


static bool results_unused(const IrOp *op, const uint32_t *uses)
{
    for (uint32_t i = 0; i < op->nresults; i++)
        if (uses[op->results[i]]) return false;
    return true;
}

/* A region that does nothing: empty, or only a yield of no values. */
static bool region_trivial(const IrBlock *blk)
{
    return !blk->first || (blk->first == blk->last && blk->first->code == IR_OP_YIELD && !blk->first->noperands);
}

static bool removable(const IrOp *op, const uint32_t *uses)
{
    if (op->code == IR_OP_IF)
        return !op->nresults && region_trivial(&op->regions[0]) && region_trivial(&op->regions[1]);
    return (ir_op_info[op->code].flags & IR_P) && !op->nregions && results_unused(op, uses);
}

static void drop_uses(const IrBlock *blk, uint32_t *uses);

static void drop_op_uses(const IrOp *op, uint32_t *uses)
{
    for (uint32_t i = 0; i < op->noperands; i++) uses[op->operands[i]]--;
    for (uint32_t r = 0; r < op->nregions; r++) drop_uses(&op->regions[r], uses);
}

static void drop_uses(const IrBlock *blk, uint32_t *uses)
{
    for (const IrOp *op = blk->first; op; op = op->next) drop_op_uses(op, uses);
}

static bool dce_block(IrBlock *blk, uint32_t *uses)
{
    bool changed = false;
    for (IrOp *op = blk->last, *prev; op; op = prev) {
        prev = op->prev;
        for (uint32_t r = 0; r < op->nregions; r++) changed |= dce_block(&op->regions[r], uses);
        if (!removable(op, uses)) continue;
        drop_op_uses(op, uses);
        ir_op_remove(op);
        changed = true;
    }
    return changed;
}

bool pass_dce(IrFunc *f)
{
    bool changed = false;
    for (bool again = true; again;) {
        uint32_t *uses = ir_use_counts(f);
        again = dce_block(&f->body, uses);
        changed |= again;
        tl_free(uses);
    }
    return changed;
}
