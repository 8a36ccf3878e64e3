/* Inside the code generator: the state of one kernel's lowering and the helpers that
 * the per-family files (cg_*.c) share.
 *
 * A Tile IR value becomes a CgVal: the LLVM values of the elements this thread holds,
 * in the order of its layout's local index (cg_layout.c); a scalar is one value that
 * every thread computes (uniform). Ops are lowered one after another into LLVM IR by
 * cg_op (cg_control.c), which dispatches on the opcode to the family files. */
#ifndef TILE_CODEGEN_CG_INTERNAL_H
#define TILE_CODEGEN_CG_INTERNAL_H

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "codegen/codegen.h"
#include "ir/arena.h"
#include "ir/axisinfo.h"
#include "ir/layout_map.h"



typedef struct CgVal {
    uint32_t n;                  /* elements held by this thread (1 for scalars) */
    LLVMValueRef *v;
} CgVal;

/* The prefetch across iterations of a pipelined K loop of one dot (passes/shared.c
 * puts its async_wait at the end of the body): before the dot's last step of K, the
 * wait and barrier, then the first step of the next iteration's local_loads (their
 * registers reach the next iteration through phis at the loop head), then the last
 * step's mma: the tensor cores work while the next stage is read. */
typedef struct CgPrefetch {
    const IrOp *dot, *wait, *ll[2];
    int64_t stages;
    /* Step 0 of each local_load as 32-bit words (element pairs 2m, 2m + 1; NULL where
     * the step has none): in the preheader, then the phis; and for the back edge. */
    LLVMValueRef *first[2], *next[2];
    uint32_t nwords[2];
    CgVal elems[2];              /* the phis' elements, for the local_loads */
    bool waited;                 /* the wait was lowered inside the dot */
} CgPrefetch;

typedef struct Cg {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMBuilderRef b;
    const IrFunc *f;
    LLVMValueRef fn;             /* the kernel being built */
    CgVal *vals;                 /* f->nvalues entries; n == 0: not lowered yet */
    Arena *arena;                /* CgVal element arrays */
    DiagList *diags;
    bool failed;
    const struct TileTarget *target;   /* ir/target.h: which instructions exist */
    int warps, threads;
    LLVMValueRef tid, lane, warp;    /* i32, computed in the entry block */
    LLVMValueRef smem;           /* the dynamic shared memory, ptr addrspace(3) */
    uint32_t smem_buffers;       /* where the buffer area starts: after the scratch */
    const IrOp **lazy;           /* per value: the local_load whose ldmatrix waits for its dot */
    LLVMBasicBlockRef exit_bb;   /* `ret void`; where `return` branches */
    AxisInfo *ai;                /* facts per value (ir/axisinfo.h) */
    CgPrefetch *pf;              /* of the innermost loop being lowered, if it has one */
    bool wgmma;                  /* the kernel has wgmma dots: async_wait fences the async proxy */
    bool wgmma_in_flight;        /* a loop's last wgmma group may still run (cg_wgmma.c) */
    /* Values of the thread index alone (a layout's thread base along an axis), built
     * once in the entry block right after `warp` (cg_thread_value): the IR LLVM gets is
     * then a fraction of the size, and its O3 pipeline and ISel take less time. */
    struct CgMemo *memo;
    uint32_t nmemo, memo_cap;
    LLVMBuilderRef entry_b;
    LLVMValueRef anchor;
    /* The kernel's tensor maps (cg_tma.c), hidden parameters after the run-time ones. */
    CgTmaDesc tma[CG_MAX_TMA];
    uint32_t ntma;
    /* Warp specialization (a `producer` op, cg_tma.c): the producer warpgroup's threads
     * come after `threads`; after the split the program's barriers count the consumers
     * only (`consumers`), and inside the producer region one thread runs (`in_producer`). */
    uint32_t producer_threads;
    bool consumers, in_producer;
    /* A pingpong kernel's two consumer warpgroups (passes/persistent.c), each running
     * programs of `threads` threads: `tid` is the thread's index in its warpgroup,
     * `raw_tid` the block's, `group` (i32) which warpgroup, `scratch` (i32 bytes) where
     * its shared-memory scratch starts (cg_smem_ptr adds it); groups 1: NULLs, raw_tid
     * = tid. */
    int groups;
    uint32_t scratch_stride;
    LLVMValueRef raw_tid, group, scratch;
} Cg;

typedef struct CgMemo {
    int32_t key[8];
    LLVMValueRef v;
} CgMemo;

/* ---- cg_module.c: types, constants, intrinsics, errors ------------------------- */
bool cg_error(Cg *c, const IrOp *op, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
LLVMTypeRef cg_elem_type(Cg *c, IrElem e);          /* in registers: i1 for i1 */
LLVMTypeRef cg_mem_type(Cg *c, IrElem e);           /* in memory: i8 for i1 */
LLVMTypeRef cg_i32(Cg *c);
LLVMValueRef cg_int(Cg *c, LLVMTypeRef t, int64_t v);
LLVMValueRef cg_i32c(Cg *c, int64_t v);
LLVMValueRef cg_f32c(Cg *c, double v);
LLVMValueRef cg_f64c(Cg *c, double v);
/* Integer x op y that builds nothing where y (or x) is an identity or absorbing
 * constant: x + 0, x * 1, x * 0, x & -1, x & 0, x | 0, x / 1, x % 1, x << 0, x >> 0. */
LLVMValueRef cg_add(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_mul(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_and(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_or(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_udiv(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_urem(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_shl(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
LLVMValueRef cg_lshr(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y);
/* Calls intrinsic `name`, overloaded on the types tys[0..ntys). */
LLVMValueRef cg_intrinsic(Cg *c, const char *name, LLVMTypeRef *tys, unsigned ntys,
                          LLVMValueRef *args, unsigned nargs);
LLVMValueRef cg_call(Cg *c, LLVMValueRef fn, LLVMValueRef *args, unsigned n);
LLVMBasicBlockRef cg_block_new(Cg *c, const char *name);
void cg_barrier(Cg *c);
/* Adds !nvvm.annotations !{fn, key, i32 value} ("kernel", "maxntidx"). */
void cg_annotate(LLVMModuleRef mod, LLVMValueRef fn, const char *key, int value);
LLVMValueRef cg_sreg(Cg *c, const char *name);   /* "tid.x", "ctaid.y", ... */
/* The memoized value for key[0..8) (NULL if none yet), and the builder to build a new
 * one with: in the entry block, after the thread index (cg_thread_remember stores it). */
LLVMValueRef cg_thread_value(Cg *c, const int32_t key[8]);
LLVMValueRef cg_lane0(Cg *c, LLVMValueRef v);   /* through shfl.sync.idx from lane 0: uniform to ptxas */
LLVMBuilderRef cg_thread_builder(Cg *c);
LLVMValueRef cg_thread_remember(Cg *c, const int32_t key[8], LLVMValueRef v);
/* The shared memory at byte offset off (i32), typed for element e. */
LLVMValueRef cg_smem_ptr(Cg *c, LLVMValueRef index, LLVMTypeRef elem_ty, uint32_t byte_base);

/* A counted loop for (i = start; i < end; i += step) over i32 with carried values:
 * cg_loop_begin leaves the builder in the body (i and the carried phis set),
 * cg_loop_end takes the carried values' next versions and leaves it after the loop,
 * where `carried` holds the final values. */
typedef struct CgLoop {
    LLVMBasicBlockRef pre, head, exit;
    LLVMValueRef i;
    LLVMValueRef *carried;
    uint32_t n;
} CgLoop;
void cg_loop_begin(Cg *c, CgLoop *l, LLVMValueRef start, LLVMValueRef end, LLVMValueRef *init, uint32_t n);
void cg_loop_end(Cg *c, CgLoop *l, LLVMValueRef step, LLVMValueRef *next);

/* ---- values ----------------------------------------------------------------------- */
CgVal cg_val_new(Cg *c, uint32_t n);
CgVal cg_get(Cg *c, IrValue v);
void cg_set(Cg *c, IrValue v, CgVal x);
static inline LLVMValueRef cg_at(CgVal x, uint32_t k) { return x.v[x.n == 1 ? 0 : k]; }
const IrType *cg_type(Cg *c, IrValue v);

/* ---- cg_layout.c ------------------------------------------------------------------ */
bool cg_check_layouts(Cg *c, const IrFunc *k);
uint32_t cg_layout_elems(const IrLayoutMap *l);
/* Coordinates (i32 LLVM values) of local element k of this thread. */
void cg_layout_coords(Cg *c, const IrLayoutMap *l, uint32_t k, LLVMValueRef coords[IR_MAX_RANK]);
/* The same at compile time for thread t (wrapped), and whether t's copy is the owner. */
bool cg_layout_coords_at(const IrLayoutMap *l, uint32_t t, uint32_t k, int64_t coords[IR_MAX_RANK]);
/* i1: this thread's copies are the owners (no other thread writes them). */
LLVMValueRef cg_layout_owner(Cg *c, const IrLayoutMap *l);
/* i1: this thread's copy of local element k is its owner; the same as cg_layout_owner
 * but for accumulator layouts of narrow tiles, where copies sit in one thread too. */
LLVMValueRef cg_layout_owner_at(Cg *c, const IrLayoutMap *l, uint32_t k);
/* How many of a thread's elements lie side by side along the last axis, from every
 * local index that is a multiple of it (what a vector access may cover at most). */
uint32_t cg_layout_run(const IrLayoutMap *l);
bool cg_layout_replicated(const IrLayoutMap *l);
/* Row-major linear index of coords in l's shape (i32). */
LLVMValueRef cg_linear(Cg *c, const IrLayoutMap *l, LLVMValueRef coords[IR_MAX_RANK]);

/* A layout change: element k of `to` is the element of `from` at row-major index
 * sum_j coord_j(k) * weight[j] (weights express broadcast, expand_dims, trans, reshape
 * and the squeeze after a reduction). Direct when every thread already holds what it
 * needs, else through shared memory. */
CgVal cg_convert(Cg *c, const IrLayoutMap *from, CgVal src, IrElem e, const IrLayoutMap *to,
                 const int64_t weight[IR_MAX_RANK]);
bool cg_shape_op(Cg *c, const IrOp *op);              /* broadcast expand_dims reshape trans splat */

/* ---- per family --------------------------------------------------------------------- */
bool cg_elementwise(Cg *c, const IrOp *op);          /* cg_elementwise.c */
LLVMValueRef cg_to_f32(Cg *c, LLVMValueRef x, IrElem e);
LLVMValueRef cg_from_f32(Cg *c, LLVMValueRef x, IrElem e);
LLVMValueRef cg_convert_scalar(Cg *c, LLVMValueRef x, IrElem from, IrElem to);
/* x[0..n) from -> to into out; f32 -> f16/bf16 two at a time (cvt.rn.bf16x2.f32), so
 * x[2j] and x[2j + 1] should share a 32-bit word in memory (else unpacking costs movs). */
bool cg_converts_in_pairs(IrElem from, IrElem to);
void cg_convert_run(Cg *c, LLVMValueRef *x, uint32_t n, IrElem from, IrElem to, LLVMValueRef *out);
LLVMValueRef cg_fmaximum(Cg *c, LLVMValueRef a, LLVMValueRef b, bool is_max);
LLVMValueRef cg_int_minmax(Cg *c, bool is_max, bool is_signed, LLVMValueRef a, LLVMValueRef b);
LLVMValueRef cg_math(Cg *c, const IrOp *op, IrOpcode code, LLVMValueRef x, IrElem e);   /* cg_math.c */
LLVMValueRef cg_pow(Cg *c, LLVMValueRef x, LLVMValueRef y, IrElem e);
LLVMValueRef cg_frem(Cg *c, LLVMValueRef x, LLVMValueRef y, IrElem e);
LLVMValueRef cg_log_f32(Cg *c, LLVMValueRef x);
LLVMValueRef cg_cos_f32(Cg *c, LLVMValueRef x);
bool cg_memory(Cg *c, const IrOp *op);               /* cg_memory.c */
/* Elements per vector access of op's pointers (operand ptr_at) in layout l: what the
 * axis facts prove contiguous and aligned, with the mask (and other) constant over it,
 * at most 16 bytes; mask_at / other_at -1 when there is none. */
uint32_t cg_vector_width(Cg *c, const IrOp *op, int ptr_at, const IrLayoutMap *l, int mask_at, int other_at);
/* Inline PTX `text` with LLVM constraints `cons` over args (at most 8), returning ret. */
LLVMValueRef cg_call_asm(Cg *c, LLVMTypeRef ret, LLVMValueRef *args, unsigned n, const char *text,
                         const char *cons, bool side_effects);
/* Marks an asm call memory(read): ordered after stores and side effects, mergeable. */
void cg_reads_memory_only(Cg *c, LLVMValueRef call);
void cg_convergent(Cg *c, LLVMValueRef call);
/* cg_shared.c: local_alloc, async_copy, async_commit, async_wait, local_load. */
bool cg_shared(Cg *c, const IrOp *op);
/* cg_tma.c: mbarrier_init, tma_copy, tma_wait; the tensor-map parameters' attributes. */
bool cg_tma(Cg *c, const IrOp *op);
void cg_tma_params(Cg *c);
/* The kernel's tma_copy and tma_store ops (the plan has a use for each). */
uint32_t cg_tma_ops(const IrFunc *k);
/* A local_load into an mma operand emits its ldmatrix when the dot needs it: step ks of
 * K (cg_shared_fill), or everything still missing (cg_shared_fill_all, which cg_get
 * calls). Values that are not such loads are left alone. */
void cg_shared_fill(Cg *c, IrValue v, uint32_t ks);
void cg_shared_fill_all(Cg *c, IrValue v);
/* The prefetch of a for loop (CgPrefetch): begin in the preheader (false: the loop
 * does not have the pattern), phis at the head, next from the dot before its last
 * step, end at the latch. */
bool cg_prefetch_begin(Cg *c, const IrOp *loop, CgPrefetch *pf);
void cg_prefetch_phis(Cg *c, CgPrefetch *pf, LLVMBasicBlockRef pre);
void cg_prefetch_next(Cg *c, const IrOp *dot);
bool cg_prefetch_end(Cg *c, CgPrefetch *pf, LLVMBasicBlockRef latch);
/* Bytes of the buffer area (the end of the furthest local_alloc). */
bool cg_reduce(Cg *c, const IrOp *op);               /* cg_reduce.c */
bool cg_scan(Cg *c, const IrOp *op);
bool cg_reduce_region(Cg *c, const IrOp *op);        /* reduce/scan with a combine region */
bool cg_scan_region(Cg *c, const IrOp *op);
/* Emits the combine region blk (cg_control.c) on the scalars args (its 2n arguments);
 * out gets the n yielded scalars. */
bool cg_combine(Cg *c, const IrOp *op, const IrBlock *blk, const LLVMValueRef *args, LLVMValueRef *out);
bool cg_dot(Cg *c, const IrOp *op);                  /* cg_dot.c */
LLVMValueRef cg_round_tf32(Cg *c, LLVMValueRef x);   /* f32 to tf32, as the interpreter rounds */
/* cg_mma.c: the tensor-core layouts' element coordinates, and dot on mma.sync
 * (m16n8k8 tf32, m16n8k16 f16/bf16/f8, m16n8k32 i8/u8). */
uint32_t cg_mma_elems(const IrLayoutMap *l);
void cg_mma_coords(Cg *c, const IrLayoutMap *l, uint32_t k, LLVMValueRef coords[IR_MAX_RANK]);
bool cg_mma_coords_at(const IrLayoutMap *l, uint32_t t, uint32_t k, int64_t coords[IR_MAX_RANK]);
LLVMValueRef cg_mma_owner(Cg *c, const IrLayoutMap *l);
bool cg_mma_dot(Cg *c, const IrOp *op);
/* cg_wgmma.c: dot on wgmma.mma_async (mma version 3, operands views of NVMMA stages). */
bool cg_wgmma_dot(Cg *c, const IrOp *op);
/* dot_wait n (values...): wgmma.wait_group n with every wgmma accumulator among the
 * values passed through it (the others, and every value off wgmma, pass unchanged). */
bool cg_wgmma_wait(Cg *c, const IrOp *op);
/* At the async_wait 0 after a loop whose wgmma dot left its last group in flight: waits
 * for it, the loop's accumulators passed through the wait. */
void cg_wgmma_settle(Cg *c, const IrOp *wait);
const IrOp *cg_wgmma_loop_before(const IrOp *wait);
/* A loop's constant initial wgmma accumulator, in registers before the loop (a new
 * CgVal): a loop of at most one trip that LLVM folds into an `if` otherwise merges the
 * constant with the in-flight accumulator after the wgmma, and ptxas serializes it
 * (C7515: tma_fuzz seeds 1352, 2632). */
CgVal cg_wgmma_hold(Cg *c, CgVal v);
/* cg_shared.c: may a wgmma group reading local_load ll's ring stage stay in flight
 * (wait_group 1) past `dot` until the next iteration's dot retires it? Only when the stage
 * is refilled no sooner than that: by a copy S-1 iterations ahead behind a barrier or S-2
 * ahead before it (passes/shared.c), or released S-1 iterations later to a producer
 * warpgroup (passes/warpspec.c). */
bool cg_stage_outlives_group(Cg *c, const IrOp *ll, const IrOp *dot);
bool cg_misc(Cg *c, const IrOp *op);                 /* cg_misc.c: rand print assert hints */
bool cg_body(Cg *c, const IrBlock *body);            /* cg_control.c */
/* cg_occupancy.c: after LLVM's pipeline, asks for 2048 resident threads per SM
 * (`.minnctapersm`) where the kernel's register estimate says it fits without spills. */
int cg_register_estimate(LLVMValueRef fn);
void cg_occupancy(LLVMModuleRef mod, const IrModule *m, int *mincta);
char *cg_occupancy_directives(char *ptx, const IrModule *m, const int *mincta);

/* cg_sink.c: after cg_occupancy, pure instructions into the block that uses them
 * (LLVM's sink) and, in each block, just before their first use (an element's chain,
 * then the next's), never across a call with effects. */
void cg_sink(LLVMModuleRef mod, LLVMTargetMachineRef tm, const TileKnobs *knobs);
/* cg_ptxfix.c: textual rewrites of the PTX that steer around ptxas bugs; takes and
 * returns tl_malloc'd text. */
char *cg_ptx_workarounds(char *ptx);

#endif
