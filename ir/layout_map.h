/* A layout as a table of counts: which thread holds which element of a tile, in the
 * numbers that code generation and the shared-memory rules (ir_op_scratch_bytes)
 * both read. Derived from the tile's IrLayout alone (ir/layout.h), so the passes that
 * plan shared memory and codegen that uses it see the same figures. */
#ifndef TILE_IR_LAYOUT_MAP_H
#define TILE_IR_LAYOUT_MAP_H

#include "ir/ir.h"

/* A distributed layout, read from the IR (ir_layout_map).
 * Blocked (Triton's BlockedEncoding): along each axis d a thread holds spt[d]
 * consecutive elements, tpw[d] lanes of a warp and wpc[d] warps of the program cover
 * the axis side by side, and the pattern repeats reps[d] times. Where spt * tpw * wpc
 * exceeds the axis, coordinates wrap: several threads hold copies of one element (the
 * copy at an unwrapped position is the owner). Rank 0: a uniform scalar.
 * The tensor-core kinds, for [M, N] accumulators of mma.sync m16n8kK and
 * their [M, K] / [K, N] operands, with wpc = [WM, WN] warps (N fastest in the warp id)
  * and reps = [RM, RN] instruction tiles 16*WM rows and 8*WN columns apart; an operand
 * has kwidth K elements per 32-bit register (1 tf32, 2 f16/bf16/f8, 4 i8/u8; the
 * instruction's K is 8 * kwidth) and ks = K / (8 * kwidth) steps of K. spt[1] = 2 says
 * that an accumulator's elements come in pairs of neighbouring columns (c0 c1, c2 c3).
 * An accumulator layout also lays out tiles narrower than its warps' instruction tiles
 * ([M, 1], [1, N]: coordinates wrap, the copy at an unwrapped position owns the
 * element), and `slice` = 1 + d marks the slice of an accumulator layout along axis d
 * (rank 1: the parent's layout of the tile with a size-1 axis d inserted; reps, wpc and
 * the kind are the parent's, spt[0] the run along the axis that stays). */
typedef enum { IR_LMAP_BLOCKED, IR_LMAP_MMA, IR_LMAP_DOT_A, IR_LMAP_DOT_B } IrLayoutMapKind;

typedef struct IrLayoutMap {
    IrLayoutMapKind kind;
    int rank;
    int32_t shape[IR_MAX_RANK], spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK], reps[IR_MAX_RANK];
    int32_t ks;                  /* dot operands: instruction steps along K */
    int32_t kwidth;              /* dot operands: K elements per 32-bit register */
    int32_t slice;               /* 1 + the axis removed from an mma parent; 0: none */
} IrLayoutMap;

/* The table of the register layout t carries (passes/layout.c); a uniform scalar for
 * rank 0 or a tile without a layout. */
IrLayoutMap ir_layout_map(const IrType *t);
/* The table of an mma accumulator or operand layout (ir_layout_map of such a t without
 * the wrap of narrow tiles). */
IrLayoutMap ir_layout_map_mma(const IrType *t);

/* The warps along `axis` of map l that hold distinct elements of it (its extent's span
 * over spt * tpw, at most wpc): the partners of a cross-warp reduction or scan. */
int32_t ir_layout_map_axis_warps(const IrLayoutMap *l, int axis);

/* The shared-memory scratch op needs while it runs, in bytes (0: none), from the
 * layouts of its operands and result: THE rule, read by the passes that budget shared
 * memory (passes/shared.c's rings, passes/plan.c's map) and by nothing else. A shape op
 * (convert_layout, broadcast, expand_dims, reshape, trans) not done in registers stages
 * its operand in its own element size; a reduction (sum, max, ...) its cross-warp
 * partials, 16 bytes a result element and warp, and the result's 8-byte squeeze; a
 * combine (reduce/scan with a region) its warp exchange a slot per operand; cumsum its
 * cross-warp totals; an FMA dot both operands as 32-bit (64-bit for f64 and integers)
 * values; an atomic its results. */
uint32_t ir_op_scratch_bytes(const IrFunc *f, const IrOp *op);
/* NVMMA stages (buffers wgmma reads, swizzled) start on a multiple of 1024 bytes:
 * the swizzle patterns repeat every 1024 bytes, and the descriptors assume a stage
 * starts on a repeat. THE alignment rule: the rings' offsets (passes/shared.c) and the
 * buffer area's start (ir_buffer_area_at) follow it. */
#define IR_NVMMA_ALIGN 1024u
static inline uint64_t ir_nvmma_align(uint64_t offset) { return (offset + IR_NVMMA_ALIGN - 1) & ~(uint64_t)(IR_NVMMA_ALIGN - 1); }
/* Where the buffer area starts after `scratch` bytes of scratch: the next 128 bytes,
 * or the next NVMMA_ALIGN when it holds NVMMA stages. */
uint32_t ir_buffer_area_at(uint32_t scratch, bool nvmma);
/* The end of the furthest local_alloc buffer of f (its offset, attr.i, plus its bytes). */
uint32_t ir_buffer_area_bytes(const IrFunc *f);

#endif
