/* The kernel's resource plan: what it asks of the GPU, decided once by the last GPU
 * pass (passes/plan.c), printed and parsed with the IR (`plan {...}` after `launch
 * {...}`), read by codegen, the runtime and the tuner, which decide none of it.
 *
 *   kernel @mm(...) launch {warps = 4, stages = 3, ws = 1} plan {
 *       threads = 256, groups = 1, group_threads = 128, producer_threads = 128,
 *       regs = {producer = 40, consumers = 232},
 *       smem = {bytes = 197632, scratch = 0, stride = 0, buffers_at = 0, align = 1024},
 *       map = [{kind = buffer, at = 0, bytes = 98304, align = 1024}, ...],
 *       tma = [{param = 0, elem = 2, swizzle = 128, box = [64, 128], index = 32,
 *               dims = [[3, 1], [-1, 64]], strides = [[-1, 1], [5, 1]]}, ...],
 *       tma_uses = [[[0, 0]], [[1, 1]]],
 *       persistent = 1, cluster = 1, min_ctas = 1, occupancy = {ctas = 0, max_regs = 0}
 *   } { ...
 *
 * threads: the block (groups consumer warpgroups of group_threads, then the producer
 * warpgroup's). regs: setmaxnreg's budgets of a kernel with a producer (0: none).
 * smem: the dynamic shared memory to launch with; the scratch (the largest need of one
 * op, ir_op_scratch_bytes; each consumer warpgroup of a ping-pong kernel its own,
 * `stride` apart) at 0, then the buffer area at buffers_at, aligned to `align` (1024
 * when it holds NVMMA stages). map: every region, the scratch and each local_alloc
 * buffer (at: its offset in the shared memory). tma: the tensor maps the runtime builds
 * (IrTmaRecipe; dims and strides as [parameter or -1, multiplier]), passed after the
 * kernel's parameters; tma_uses: for each tma_copy / tma_store in program order, its
 * [pointer parameter, map] pairs. persistent: launch at most the resident programs.
 * cluster: CTAs a program. min_ctas: `.minnctapersm` always (setmaxnreg needs it);
 * occupancy: `.minnctapersm ctas` when codegen's register count of the optimized code is
 * at most max_regs (0: no request). */
#ifndef TILE_IR_PLAN_H
#define TILE_IR_PLAN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define IR_PLAN_MAX_TMA 8
/* The extent of a rank-3 map's outer dimension: every s32 coordinate >= 0 is inside. */
#define IR_TMA_OUTER_EXTENT (INT64_C(1) << 31)

/* One tensor map (a 2-D box of a tensor in global memory), as the runtime encodes it
 * at launch. Dimensions innermost (contiguous) first. Each extent and stride is
 * *_value times run-time parameter *_param when that is >= 0, wrapped to index_bits as
 * the kernel's arithmetic does, else the constant *_value. Rank 3 for a block op with
 * an outer pair (x, s) (ir_block_outer): dimension 2 is x's, of extent 2^31 (every s32
 * coordinate >= 0), stride s and box 1; the box lands as the 2-D one does. 128 bytes, no
 * padding: cache entries store it as it is (docs/CACHE.md). */
typedef struct IrTmaRecipe {
    uint32_t ptr_param;          /* the pointer parameter: the tensor's address */
    uint32_t elem_bytes;         /* 1, 2 or 4 */
    uint32_t rank;               /* 2, or 3 with an outer dimension */
    uint32_t swizzle;            /* bytes: 32, 64 or 128 (the stages' NVMMA swizzle) */
    uint16_t box[4];             /* the box: swizzle / elem_bytes, then the stage's rows (, 1) */
    uint32_t index_bits;         /* 32 or 64: the block load's integer type */
    uint32_t reserved;
    int32_t dim_param[4];
    int32_t stride_param[4];     /* element strides; dimension 0's is the constant 1 */
    int64_t dim_value[4];
    int64_t stride_value[4];
} IrTmaRecipe;

typedef enum { IR_SMEM_SCRATCH, IR_SMEM_BUFFER, IR_SMEM_BARRIERS } IrSmemKind;

typedef struct IrSmemRegion {
    IrSmemKind kind;
    uint32_t at, bytes, align;
} IrSmemRegion;

typedef struct IrTmaUse {
    uint32_t n;                  /* the parameters the op's pointer may be (1..4) */
    uint32_t param[4], map[4];
} IrTmaUse;

typedef struct IrPlan {
    uint32_t threads, groups, group_threads, producer_threads;
    uint32_t producer_regs, consumer_regs;
    uint32_t shared_bytes, scratch, scratch_stride, buffers_at, buffer_align;
    uint32_t nregions;
    IrSmemRegion *regions;
    uint32_t ntma;
    IrTmaRecipe tma[IR_PLAN_MAX_TMA];
    uint32_t nuses;
    IrTmaUse *uses;
    bool persistent;
    uint32_t cluster, min_ctas, occupancy, occupancy_max_regs;
    uint32_t chosen;       /* launch keys passes/schedule.c chose (IrFunc.launch_chosen) */
} IrPlan;

struct IrFunc;
/* Prints f's plan as ` plan {...}` (nothing when f has none). */
void ir_plan_print(const struct IrFunc *f, FILE *out);
/* The region kinds' names ("scratch", "buffer", "barriers"); -1 for another word. */
const char *ir_smem_kind_name(IrSmemKind k);
int ir_smem_kind_of(const char *name, size_t n);

#endif
