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
 *   - block: cg_kernel_info's threads (warps * 32) along x only;
 *   - grid: 1 to 3 dimensions, program_id(d) = blockIdx.{x,y,z};
 *   - dynamic shared memory: cg_kernel_info's shared_bytes.
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

/* A tensor map (CUtensorMap) that a kernel takes as a hidden parameter: how the
 * launcher encodes it from the arguments (cuTensorMapEncodeTiled; codegen/cg_tma.c).
 * Dimensions innermost (contiguous) first, as TMA numbers them. Each extent and stride
 * is *_value times run-time parameter *_param when that is >= 0 (3 * hidden), wrapped
 * to index_bits as the kernel's arithmetic does, else the constant *_value.
 * 128 bytes, no padding: the runtime stores it in cache entries as it is. */
#define CG_MAX_TMA 8
typedef struct CgTmaDesc {
    uint32_t ptr_param;          /* the pointer parameter: the tensor's address */
    uint32_t elem_bytes;         /* 2 (f16, bf16) */
    uint32_t rank;               /* 2 */
    uint32_t swizzle;            /* bytes: 32, 64 or 128 (the stages' NVMMA swizzle) */
    uint16_t box[4];             /* the box: swizzle / elem_bytes, then the stage's rows */
    uint32_t index_bits;         /* 32 or 64: the block load's integer type */
    uint32_t reserved;
    int32_t dim_param[4];
    int32_t stride_param[4];     /* element strides; dimension 0's is the constant 1 */
    int64_t dim_value[4];
    int64_t stride_value[4];
} CgTmaDesc;

typedef struct CgKernelInfo {
    uint32_t threads;            /* block size along x: warps * 32 */
    uint32_t shared_bytes;       /* dynamic shared memory to launch with */
    uint32_t ntma;               /* hidden tensor-map parameters after the run-time ones */
    /* The kernel walks its grid's programs (passes/persistent.c: it reads
     * launched_programs): launch at most as many as the device holds at once, along x. */
    bool persistent;
    /* CTAs of a cluster (the launch key cluster, passes/cluster.c): the PTX requires
     * that many along x (.reqnctapercluster); the grid's programs are clusters, so a
     * launch runs this many CTAs a program. 1: no cluster. */
    uint32_t cluster;
    CgTmaDesc tma[CG_MAX_TMA];
} CgKernelInfo;

/* The tensor maps of laid-out kernel k's tma_copy ops, in parameter order, into out
 * (at most max); their count, or -1 if one cannot be described on the host. */
int cg_tma_descs(const IrFunc *k, CgTmaDesc *out, uint32_t max);

/* Launch facts of a kernel (false if k is not a kernel). */
bool cg_kernel_info(const IrFunc *k, CgKernelInfo *out);
/* The identity of the compiler this library was built from (tile_compiler_id: a hash
 * of its sources and the LLVM version). The runtime's cache keys name it. */
const char *cg_compiler_id(void);

/* true for the architectures the generator targets ("sm_90a", "sm_80"). */
bool cg_arch_supported(const char *arch);

#endif
