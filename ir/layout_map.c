/* Layout tables (ir/layout_map.h): the counts of a tile's register layout. */
#include "ir/layout_map.h"

#include "ir/layout.h"

IrLayoutMap ir_layout_map_mma(const IrType *t)
{
    const IrLayout *il = t->layout, *mma = il->kind == IR_LAYOUT_MMA ? il : il->parent;
    IrLayoutMap l = {.rank = 2};
    l.shape[0] = t->shape[0];
    l.shape[1] = t->shape[1];
    l.wpc[0] = mma->wpc[0];
    l.wpc[1] = mma->wpc[1];
    l.spt[0] = l.spt[1] = 1;
    if (il->kind == IR_LAYOUT_MMA) {
        l.kind = IR_LMAP_MMA;
        l.reps[0] = t->shape[0] / (16 * l.wpc[0]);
        l.reps[1] = t->shape[1] / (8 * l.wpc[1]);
        l.spt[1] = 2;
    } else if (il->op == 0) {
        l.kind = IR_LMAP_DOT_A;
        l.kwidth = il->kwidth;
        l.reps[0] = t->shape[0] / (16 * l.wpc[0]);
        l.ks = t->shape[1] / (8 * l.kwidth);
    } else {
        l.kind = IR_LMAP_DOT_B;
        l.kwidth = il->kwidth;
        l.reps[1] = t->shape[1] / (8 * l.wpc[1]);
        l.ks = t->shape[0] / (8 * l.kwidth);
    }
    return l;
}

/* The mma layout of t (ir_layout_map_mma), with at least one repeat along an axis narrower
 * than its warps' instruction tiles ([M, 1] and [1, N] tiles wrap). */
static IrLayoutMap mma_family(const IrType *t)
{
    IrLayoutMap l = ir_layout_map_mma(t);
    for (int d = 0; l.kind == IR_LMAP_MMA && d < 2; d++)
        if (l.reps[d] < 1) l.reps[d] = 1;
    return l;
}

/* slice<dim, parent = #mma> of [S]: the parent's layout of [S, 1] (dim 1) or [1, S]
 * (dim 0), viewed as rank 1. */
static IrLayoutMap mma_slice(const IrType *t)
{
    const IrLayout *il = t->layout;
    IrType pt = *t;
    int dim = il->dim;
    pt.rank = 2;
    pt.shape[dim] = 1;
    pt.shape[1 - dim] = t->shape[0];
    pt.layout = il->parent;
    IrLayoutMap l = mma_family(&pt);
    l.slice = dim + 1;
    l.rank = 1;
    l.shape[0] = t->shape[0];
    l.shape[1] = 0;
    l.spt[0] = l.spt[1 - dim];
    return l;
}

IrLayoutMap ir_layout_map(const IrType *t)
{
    IrLayoutMap l = {.kind = IR_LMAP_BLOCKED, .rank = t->rank};
    if (t->rank == 0 || !t->layout) return l;
    const IrLayout *il = t->layout;
    if (il->kind == IR_LAYOUT_MMA || il->kind == IR_LAYOUT_DOT_OPERAND) return mma_family(t);
    if (il->kind == IR_LAYOUT_SLICE) return mma_slice(t);
    if (il->kind == IR_LAYOUT_SHARED) {        /* a view of a stage: one value, its address */
        for (int d = 0; d < t->rank; d++) l.shape[d] = t->shape[d], l.spt[d] = l.tpw[d] = l.wpc[d] = l.reps[d] = 1;
        return l;
    }
    for (int d = 0; d < t->rank; d++) {
        l.shape[d] = t->shape[d];
        l.spt[d] = il->spt[d];
        l.tpw[d] = il->tpw[d];
        l.wpc[d] = il->wpc[d];
        int32_t span = l.spt[d] * l.tpw[d] * l.wpc[d];
        l.reps[d] = span >= l.shape[d] ? 1 : l.shape[d] / span;
    }
    return l;
}


int32_t ir_layout_map_axis_warps(const IrLayoutMap *l, int a)
{
    int32_t warps = l->shape[a] / (l->spt[a] * l->tpw[a]);
    return warps < 1 ? 1 : warps > l->wpc[a] ? l->wpc[a] : warps;
}

static uint32_t tile_bytes(const IrType *t, int elem_bytes) { return (uint32_t)(ir_type_numel(t) * elem_bytes); }

static int mem_bytes(IrElem e) { return e == IR_PTR ? 8 : ir_elem_bytes(e); }

/* cumsum/cumprod along a: the totals of each warp's part, for every line across it */
static uint32_t scan_bytes(const IrType *t, int a)
{
    if (!t->layout) return 0;
    IrLayoutMap l = ir_layout_map(t);
    int32_t nw = ir_layout_map_axis_warps(&l, a);
    return nw == 1 ? 0 : (uint32_t)(ir_type_numel(t) / t->shape[a]) * (uint32_t)(l.reps[a] * nw) * 8;
}

/* reduce/scan with a combine region: each operand's warp partials, on blocked layouts
 * whose axis is not repeated */
static uint32_t combine_bytes(const IrFunc *f, const IrOp *op)
{
    const IrType *t = ir_value_type(f, op->operands[0]);
    if (!t->layout || op->nregions != 1) return 0;
    IrLayoutMap l = ir_layout_map(t);
    int a = (int)(op->attr.i & IR_AXIS_MASK);
    int32_t nw = ir_layout_map_axis_warps(&l, a);
    bool across = nw > 1 && l.reps[a] == 1 && l.kind == IR_LMAP_BLOCKED;
    return across ? op->noperands * (uint32_t)(ir_type_numel(t) / t->shape[a]) * (uint32_t)nw * 8 : 0;
}

uint32_t ir_op_scratch_bytes(const IrFunc *f, const IrOp *op)
{
    if (op->noperands == 0 || op->nresults == 0) return 0;
    const IrType *a = ir_value_type(f, op->operands[0]), *r = ir_value_type(f, op->results[0]);
    switch (op->code) {
    case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS: case IR_OP_RESHAPE: case IR_OP_TRANS: case IR_OP_CONVERT_LAYOUT:
    case IR_OP_EXTRACT:
        if (ir_layout_in_registers((int)op->code, a->layout, r->layout)) return 0;
        if (op->code == IR_OP_CONVERT_LAYOUT && ir_layout_quad_shuffle(a, r)) return 0;
        return tile_bytes(a, mem_bytes(a->elem));
    case IR_OP_REDUCE: case IR_OP_SCAN: {
        uint32_t x = combine_bytes(f, op), squeeze = op->code == IR_OP_REDUCE ? tile_bytes(r, 8) : 0;
        return x > squeeze ? x : squeeze;
    }
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_XOR_SUM: {
        uint32_t nw = (uint32_t)ir_reduce_warps(a, (int)op->attr.i);
        uint32_t partials = nw > 1 ? tile_bytes(r, 16) * nw : 0, squeeze = tile_bytes(r, 8);
        return partials > squeeze ? partials : squeeze;
    }
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: return scan_bytes(a, (int)(op->attr.i & IR_AXIS_MASK));
    case IR_OP_DOT: {
        if (r->layout && r->layout->kind == IR_LAYOUT_MMA) return 0;   /* operands come in registers */
        const IrType *b = ir_value_type(f, op->operands[1]);
        int eb = ir_elem_is_float(a->elem) && a->elem != IR_F64 ? 4 : 8;
        return tile_bytes(a, eb) + tile_bytes(b, eb);
    }
    case IR_OP_ATOMIC_ADD: case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN: case IR_OP_ATOMIC_XCHG:
    case IR_OP_ATOMIC_AND: case IR_OP_ATOMIC_OR: case IR_OP_ATOMIC_XOR: case IR_OP_ATOMIC_CAS:
        return tile_bytes(r, 8);
    default: return 0;
    }
}

uint32_t ir_buffer_area_bytes(const IrFunc *f)
{
    uint32_t end = 0;
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrOp *d = f->values[v].def;
        if (!d || d->code != IR_OP_LOCAL_ALLOC) continue;
        const IrType *t = f->values[v].type;
        uint32_t e = (uint32_t)d->attr.i + (uint32_t)(ir_type_numel(t) * ir_elem_bytes(t->elem));
        if (e > end) end = e;
    }
    return end;
}

uint32_t ir_buffer_area_at(uint32_t scratch, bool nvmma)
{
    return nvmma ? (uint32_t)ir_nvmma_align(scratch) : (scratch + 127) & ~127u;
}
