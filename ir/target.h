/* The targets the GPU level compiles for: what a pass or codegen may assume of an
 * architecture (shared memory per block, which tensor-core and copy instructions
 * exist). One table (ir/target.c); passes read it through the module
 * (IrModule.target, set by the compile driver; NULL means the default target), codegen
 * through CgOptions.arch. Adding an architecture is adding a row.
 *
 *   name      smem_optin  mma_sync cp_async ldmatrix wgmma tma
 *   sm_90a    232448      yes      yes      yes      yes   yes
 *   sm_80     166912      yes      yes      yes      no    no
 * and the numbers of an SM the plans are made against (both: 65,536 registers, 2,048
 * threads, 255 registers a thread; a producer warpgroup's 40 registers, consumers' at
 * most 240; occupancy requested up to 44 registers a thread, calibrated with ptxas). Every
 * GPU number a pass, codegen or the runtime plans with is here. */
#ifndef TILE_IR_TARGET_H
#define TILE_IR_TARGET_H

#include <stdbool.h>
#include <stdint.h>

/* A warpgroup: the 4 warps a wgmma and setmaxnreg act on together (sm_90a). */
#define IR_WARPGROUP_THREADS 128u
/* The most threads a block may have (both targets). */
#define IR_MAX_BLOCK_THREADS 1024u

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
    uint32_t regs_per_sm;        /* the register file: 32-bit registers an SM holds */
    uint32_t threads_per_sm;     /* resident threads an SM runs at once */
    uint32_t producer_regs;      /* a producer warpgroup's registers a thread (setmaxnreg.dec) */
    uint32_t consumer_regs_max;  /* the most setmaxnreg.inc gives a consumer thread */
    /* Occupancy: `.minnctapersm threads_per_sm / threads` is requested for a kernel whose
     * optimized code holds at most this many registers a thread (more spills: calibrated
     * with ptxas -v, docs/CODEGEN.md section 6). */
    uint32_t occupancy_max_regs;
} TileTarget;

/* The registers a thread of the consumer warpgroups (`warps` warps) of a kernel with a
 * producer warpgroup gets: what the register file leaves after the producer's, in
 * multiples of 8, at most consumer_regs_max. */
uint32_t tile_target_consumer_regs(const TileTarget *t, int warps);

/* The target named arch ("sm_90a", "sm_80"); NULL when unknown. */
const TileTarget *tile_target(const char *arch);
/* The default target (sm_90a: the H100/H200). */
const TileTarget *tile_target_default(void);
/* The names of all targets, for messages: "sm_90a or sm_80". */
const char *tile_target_names(void);

#endif
