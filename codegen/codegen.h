/* The GPU code generator: Tile IR kernels -> LLVM IR -> NVPTX PTX (LLVM 19 C API).
 *
 * Every kernel of a module becomes one `.entry` of the same name; grid functions stay
 * on the host. Tiles are spread over the threads of a program with a distributed
 * layout chosen per tile shape (docs/CODEGEN.md), and global accesses become 16-byte
 * vector accesses where the axis analysis (ir/axisinfo.h) proves contiguity and
 * alignment.
 *
 * Kernel ABI (what a launcher passes, docs/CODEGEN.md section 1):
 *   - parameters in the kernel's run-time parameter order (IrFunc.body.args);
 *   - pointers: 64-bit global addresses; integers: their width, i1 as one byte
 *     (0 or 1; any non-zero byte reads as true); f16/bf16: 16 bits; f32/f64 as is;
 *   - block: the plan's threads (ir/plan.h) along x only;
 *   - grid: 1 to 3 dimensions, program_id(d) = blockIdx.{x,y,z};
 *   - dynamic shared memory: the plan's shared_bytes.
 * The returned strings are malloc'd (tl_malloc) and owned by the caller (tl_free). */
#ifndef TILE_CODEGEN_CODEGEN_H
#define TILE_CODEGEN_CODEGEN_H

#include <stdbool.h>
#include <stdint.h>

#include "ir/diag.h"
#include "ir/ir.h"

typedef struct CgOptions {
    const char *arch;            /* "sm_90a" (NULL: default) or "sm_80" */
    int opt_level;               /* 0: no LLVM optimization; 1..3: default<O3> */
    bool emit_llvm_only;         /* stop before the NVPTX backend (cg_emit_llvm) */
    /* Bit i set: kernel parameter i, a pointer, is promised 16-byte aligned (the
     * runtime checks it at launch and compiles one variant per promise set). */
    uint64_t aligned_params;
    /* When set, the milliseconds each step took (tilec --time-passes, the runtime's
     * TILE_LOG_RECOMPILES report). */
    struct CgTimes *times;
} CgOptions;

typedef struct CgTimes {
    double lower_ms;             /* Tile IR -> LLVM IR, verified */
    double opt_ms;               /* LLVM's default<O3> pipeline */
    double emit_ms;              /* the NVPTX backend and the PTX rewrites */
} CgTimes;

/* The LLVM IR of every kernel of m, optimized as o says (text, malloc'd); NULL with a
 * diagnostic in d when an op cannot be compiled or the target is unknown. */
char *cg_emit_llvm(const IrModule *m, const CgOptions *o, DiagList *d);
/* The PTX of every kernel of m (text, malloc'd); NULL with a diagnostic on failure. */
char *cg_emit_ptx(const IrModule *m, const CgOptions *o, DiagList *d);

/* A tensor map (CUtensorMap) that a kernel takes as a hidden parameter: the plan's
 * recipe (ir/plan.h IrTmaRecipe, made by passes/plan.c), which the launcher encodes
 * from the arguments (cuTensorMapEncodeTiled). The kernel's launch facts (threads,
 * shared memory, tensor maps, persistent, cluster) are its plan's: the runtime reads
 * them from the IR, never from here. */
#define CG_MAX_TMA IR_PLAN_MAX_TMA
typedef IrTmaRecipe CgTmaDesc;
/* The identity of the compiler this library was built from (tile_compiler_id: a hash
 * of its sources and the LLVM version). The runtime's cache keys name it. */
const char *cg_compiler_id(void);

/* true for the architectures the generator targets ("sm_90a", "sm_80"). */
bool cg_arch_supported(const char *arch);

#endif
