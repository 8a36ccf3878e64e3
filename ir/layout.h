/* Layouts: which thread of a program holds which element of a tile (or where in shared
 * memory it lives), as data in the IR, after Triton's TritonGPU encodings.
 *
 * A tile type carries a layout once the GPU layout pass has run (passes/layout.c);
 * before, every layout is NULL. Layouts are interned in the IrCtx, so equal layouts
 * are equal pointers and a laid-out type stays one interned pointer. A layout never
 * changes what a program computes: the interpreter ignores layouts and runs
 * `convert_layout` as the identity; codegen reads them and never invents one.
 *
 * The kinds (fields that a kind does not use stay 0):
 *   blocked      registers, for coalesced global access. Along axis d a thread holds
 *                spt[d] consecutive elements, tpw[d] lanes of a warp and wpc[d] warps
 *                cover the axis side by side, and the pattern repeats to fill the
 *                shape (or wraps: several threads then hold copies). order[0] is the
 *                fastest-varying axis of the lane and warp numbering, order[1] the next.
 *   slice        registers: parent's layout with axis `dim` removed (a reduction's
 *                result along `dim` keeps the threads that held each row).
 *   mma          registers: the accumulator of a tensor-core instruction. version 2:
 *                mma.sync, instr = [16, 8, K] per warp (c_i at row g + 8*(i>=2), col
 *                2t + (i&1), g = lane/4, t = lane%4), K = 8 (tf32), 16 (f16, bf16, and
 *                f8 converted to f16) or 32 (i8, u8); version 3: wgmma, instr =
 *                [64, N, K] per warpgroup, K = 16 (f16, bf16) or 32 (f8, native).
 *                wpc: warps (v2) along M and N.
 *   dot_operand  registers: operand op (0: A, 1: B) of a parent mma (or of a blocked
 *                parent, for dots on FMAs), kwidth consecutive K elements per thread
 *                and 32-bit register; with an mma v2 parent kwidth = K / 8 (1 tf32, 2
 *                16-bit, 4 8-bit elements).
 *   shared       shared memory, row-major along `order` (order[0] contiguous): either
 *                swizzled, the 16-byte chunk index XORed with the row's phase (vec
 *                elements per chunk, per_phase rows per phase, max_phase phases), with
 *                swizzle_bytes 32/64/128 for wgmma/TMA descriptors (the NVMMA form), or
 *                padded by pad elements per row.
 */
#ifndef TILE_IR_LAYOUT_H
#define TILE_IR_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ir.h"

/*        NAME          text           */
#define IR_LAYOUT_KINDS(X)             \
    X(BLOCKED,     "blocked")          \
    X(SLICE,       "slice")            \
    X(MMA,         "mma")              \
    X(DOT_OPERAND, "dot_operand")      \
    X(SHARED,      "shared")

typedef enum {
#define X(n, t) IR_LAYOUT_##n,
    IR_LAYOUT_KINDS(X)
#undef X
    IR_NUM_LAYOUT_KINDS
} IrLayoutKind;

struct IrLayout {
    IrLayoutKind kind;
    int32_t rank;                /* the rank of the tiles it lays out */
    int32_t spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK];  /* blocked; wpc: mma */
    int32_t order[IR_MAX_RANK];  /* blocked, shared: fastest axis first */
    int32_t dim;                 /* slice */
    int32_t version;             /* mma: 2 (mma.sync) or 3 (wgmma) */
    int32_t instr[3];            /* mma: M, N, K of one instruction */
    int32_t op, kwidth;          /* dot_operand */
    int32_t vec, per_phase, max_phase, pad, swizzle_bytes;   /* shared */
    const IrLayout *parent;      /* slice, dot_operand */
};

const char *ir_layout_kind_name(IrLayoutKind k);
/* The interned copy of *key (its unused fields must be 0: build keys with memset). */
const IrLayout *ir_layout_intern(IrCtx *c, const IrLayout *key);
/* A blocked layout; order NULL: the last axis fastest ([rank-1, ..., 0]). */
const IrLayout *ir_layout_blocked(IrCtx *c, int rank, const int32_t *spt, const int32_t *tpw,
                                  const int32_t *wpc, const int32_t *order);
const IrLayout *ir_layout_slice(IrCtx *c, const IrLayout *parent, int dim);

/* Threads a register layout spreads over (warps * 32), or 0 for shared layouts. */
int ir_layout_warps(const IrLayout *l);
/* Whether a and b give every thread the same elements of a tile in the same registers,
 * so that converting one into the other moves nothing: different mma layouts of
 * version 3 with the same warps along M only that differ in the instruction's N (a
 * wgmma accumulator's element (r, c) lives in the same thread and register slot whatever
 * N is), their slices along the same axis, and such an accumulator of 16-bit elements
 * as the A operand (op 0, two per register) of a dot whose accumulator layout is alike
 * (attention's P). Equal layouts are not "alike" (nothing to convert). */
bool ir_layout_alike(const IrLayout *a, const IrLayout *b);
/* Whether a shape op (code: convert_layout, broadcast, expand_dims) from layout `from`
 * to layout `to` is done in registers, so that it needs no shared memory: a conversion
 * between alike layouts, an expand_dims or broadcast from an mma layout or its slice
 * into that mma layout, an extract of a wgmma accumulator's columns into the alike
 * layout of the chunk's N. passes/shared.c budgets the rings' shared memory by it and
 * codegen plans its scratch by it (cg_op_smem_bytes), and fails, never spills into the
 * rings, where such an op would need shared memory after all. */
bool ir_layout_in_registers(int code, const IrLayout *from, const IrLayout *to);
/* Whether a convert_layout of tile `from` to the type `to` moves its elements within
 * quads of lanes by shuffles, needing no shared memory and no barrier: an mma
 * accumulator with the warps along M (version 2 or 3, wpc [W, 1]) of 8-bit elements,
 * whole 16 * W rows and 32 columns, to the 8-bit A operand (kwidth 4: mma.sync
 * m16n8k32's A, wgmma's 8-bit A from registers) of an mma with the same warps: a row's
 * elements stay in the quad of lanes that holds it, each register of A gathered from
 * two lanes of the quad (attention's P in f8: codegen/cg_layout.c, quad_shuffle). Like
 * ir_layout_in_registers, read by ir_op_scratch_bytes and codegen alone. */
bool ir_layout_quad_shuffle(const struct IrType *from, const struct IrType *to);
/* The warps that share the reduced axis of a tile t (a reduction's cross-warp partials
 * go through shared memory when there are several): a blocked layout's warps along
 * `axis` that the tile's extent uses; 1 for an mma layout or its slice (a row is in one
 * warp) and for a tile without a layout. codegen plans and lowers reductions by it;
 * passes/shared.c budgets the rings by it. */
struct IrType;
int ir_reduce_warps(const struct IrType *t, int axis);
/* Writes the layout's body, e.g. "blocked<spt = [1, 8], tpw = [4, 8], wpc = [4, 1],
 * order = [1, 0]>", with a parent written as parent_name (or inline when NULL). */
char *ir_layout_str(const IrLayout *l, const char *parent_name, char *buf, size_t n);
/* The K of the mma.sync m16n8kK instruction that computes dot(a, b) of `in` elements
 * into an `acc` accumulator at the given IrPrecision, or 0 when none does (the dot
 * stays on FMAs): 16 for f16/bf16 and f8 (converted to f16, exactly) into f32, 8 for
 * f32 with precision tf32, 32 for i8/u8 into i32. f32 without tf32 has no mma: it
 * stays exact. */
int ir_mma_sync_k(IrElem in, IrElem acc, int precision);
/* The K of the wgmma.mma_async m64nNkK instruction for `in` elements into an `acc`
 * accumulator, or 0 when wgmma takes none: 16 for f16/bf16, 32 for f8e4m3/f8e5m2
 * (natively, both operands K-major in shared memory), into f32. */
int ir_wgmma_k(IrElem in, IrElem acc);
/* Checks a layout on its own and against a tile shape of the given rank, for warps
 * warps; on failure writes the broken rule to why and returns false. */
bool ir_layout_check(const IrLayout *l, int rank, int warps, char *why, size_t n);

/* How the n CTAs of a cluster share a multicast copy into the ring
 * buffer bt ([stages, rows, cols], NVMMA): whole boxes (the stage's blocks of swizzle
 * bytes: CTA r issues boxes r, r + n, ...) where they divide among the CTAs, else each
 * box's rows r * R / n .. where those are whole 8-row swizzle atoms, else none (each CTA
 * copies the block itself). passes/shared.c plans the rings by it,
 * passes/plan.c describes the maps by it and codegen/cg_tma.c issues the copies by it. */
typedef enum { IR_MULTICAST_NONE, IR_MULTICAST_BOXES, IR_MULTICAST_ROWS } IrMulticast;
IrMulticast ir_multicast_share(const IrType *bt, int ctas);

#endif
