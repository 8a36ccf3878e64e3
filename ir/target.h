/* The targets the GPU level compiles for: what a pass or codegen may assume of an
 * architecture (shared memory per block, which tensor-core and copy instructions
 * exist). One table (ir/target.c); passes read it through the module
 * (IrModule.target, set by the compile driver; NULL means the default target), codegen
 * through CgOptions.arch. Adding an architecture is adding a row.
 *
 *   name      smem_optin  mma_sync cp_async ldmatrix wgmma tma
 *   sm_90a    232448      yes      yes      yes      yes   yes
 *   sm_80     166912      yes      yes      yes      no    no
 */
#ifndef TILE_IR_TARGET_H
#define TILE_IR_TARGET_H

#include <stdbool.h>
#include <stdint.h>

typedef struct TileTarget {
    const char *name;            /* "sm_90a": what ptxas and the driver call it */
    int sm;                      /* compute capability * 10: 90, 80 */
    uint32_t smem_optin;         /* dynamic shared memory one block may opt in to (bytes) */
    uint32_t regs_per_thread;    /* the most registers a thread may have */
    bool mma_sync;               /* mma.sync m16n8k16 (f16/bf16), m16n8k8 tf32, m16n8k32 s8 */
    bool cp_async;               /* cp.async global -> shared, commit/wait groups */
    bool ldmatrix;               /* ldmatrix (.trans) from shared memory */
    bool wgmma;                  /* wgmma.mma_async (warpgroup MMA, sm_90a) */
    bool tma;                    /* cp.async.bulk.tensor with tensor maps, mbarriers */
} TileTarget;

/* The target named arch ("sm_90a", "sm_80"); NULL when unknown. */
const TileTarget *tile_target(const char *arch);
/* The default target (sm_90a: the H100/H200). */
const TileTarget *tile_target_default(void);
/* The names of all targets, for messages: "sm_90a or sm_80". */
const char *tile_target_names(void);

#endif
