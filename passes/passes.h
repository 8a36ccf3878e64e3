/* Passes over Tile IR.
 *
 * Every pass has one signature: it takes a function, rewrites it in place, and
 * returns true if it changed anything. Each pass lives in its own file whose banner
 * says what it requires, what it guarantees, and shows a before/after sketch. A pass
 * must leave IR that the verifier accepts and that the interpreter computes the same
 * results on (up to the float rounding the pass documents).
 *
 * The pipeline (pipeline.c) is a straight list of passes per compile mode. */
#ifndef TILE_PASSES_PASSES_H
#define TILE_PASSES_PASSES_H

#include <stdbool.h>
#include <stdio.h>

#include "ir/graph.h"
#include "ir/ir.h"

typedef bool (*PassFn)(IrFunc *f);

typedef struct PassInfo {
    const char *name;        /* as named on the command line: "canonicalize" */
    const char *summary;     /* one line for --help */
    PassFn run;
} PassInfo;

/*   name            file              summary */
bool pass_canonicalize(IrFunc *f); /* canonicalize.c: algebraic identities, constants to the right */
bool pass_fold(IrFunc *f);         /* fold.c: evaluates ops whose operands are constants */
bool pass_cse(IrFunc *f);          /* cse.c: merges identical pure ops (scoped to regions) */
bool pass_dce(IrFunc *f);          /* dce.c: removes pure ops whose results are unused */

extern const PassInfo pass_table[];
extern const unsigned pass_count;

/* The GPU level (after specialization, before codegen): */
bool pass_ptrblock(IrFunc *f);     /* ptrblock.c: block-shaped pointer loads and stores as block_load (block_store), first */
bool pass_cluster(IrFunc *f);      /* cluster.c: a program's rows split among the CTAs of a cluster (cluster = n) */
bool pass_block_load(IrFunc *f);   /* blockload.c: block_load (block_store) as the load (store) of a pointer tile */
bool pass_dot_pad(IrFunc *f);      /* dotpad.c: dots below 16 in a dimension padded to 16 */
bool pass_hoist(IrFunc *f);        /* hoist.c: loop invariants out of loops, shape ops to the leaves */
bool pass_hoist_invariants(IrFunc *f);   /* hoist.c: only the loop-invariant code motion */
bool pass_epichunk(IrFunc *f);     /* epichunk.c: a GEMM's epilogue in chunks of its accumulator's columns */
bool pass_layout(IrFunc *f);       /* layout.c: a blocked layout for every tile */
bool pass_rotate(IrFunc *f);       /* rotate.c: attention's softmax under the tensor cores (overlap = 1) */
bool pass_shared(IrFunc *f);       /* shared.c: dot operands in shared memory, pipelined by stages */
bool pass_warpspec(IrFunc *f);     /* warpspec.c: a producer warpgroup issues a TMA ring's copies (ws) */
bool pass_plan(IrFunc *f);         /* plan.c: the kernel's resource plan (ir/plan.h), last */
bool pass_persistent(IrFunc *f);   /* persistent.c: each program walks tiles of the grid (persistent) */
bool pass_schedule(IrFunc *f);     /* schedule.c: ws, persistent, overlap, pingpong where not given */
/* passes/ring.c: the stage, phase and predicate operands of the TMA ring ops in loop's
 * body (built by passes/shared.c from j = (iv - lo) / step) computed from j + base. */
void pass_ring_rebase(IrFunc *f, IrOp *loop, IrValue lo, IrValue step, IrValue base);
/* passes/ring.c: a `for` loop's trip count, max(0, cdiv(hi - lo, step)), built at b. */
IrValue pass_ring_trip_count(IrBuilder *b, const IrOp *loop);
bool pass_bounds(IrFunc *f);       /* bounds.c: checked mode; bounds checks from hidden size parameters */
extern const PassInfo pass_gpu_table[];
extern const unsigned pass_gpu_count;
/* The widest element that a kernel's loads (and its stores) of each tile shape move,
 * which sets a thread's run in the blocked layout of the shape (passes/layout.c). */
typedef struct PassRuns {
    IrFunc *f;
    bool on;                     /* the knob vector_run */
    uint32_t n, cap;
    struct { uint8_t rank; int32_t shape[IR_MAX_RANK]; int load_bytes, bytes; } *e;
} PassRuns;
void pass_runs_init(PassRuns *r, IrFunc *f);
void pass_runs_free(PassRuns *r);
/* The blocked layout pass_layout gives tiles of t's shape in a kernel of `warps` (runs:
 * of the kernel, from pass_runs_init; NULL: 8 elements a thread's run). */
const IrLayout *pass_blocked_layout(IrCtx *c, int warps, const IrType *t, const PassRuns *runs);
/* A block load (passes/blockload.c) that the GPU pipeline kept for TMA but did not
 * copy by TMA, expanded after the layout pass into a pointer load in blocked layouts. */
void blockload_expand_laid_out(IrFunc *f, IrOp *op);
/* A block store (passes/blockload.c) that tmastore_kept kept for TMA but that is not
 * stored by TMA, expanded after the layout pass into a masked pointer store in blocked
 * layouts (the stored value converted to the blocked layout of its shape). */
IrOp *blockstore_expand_laid_out(IrFunc *f, IrOp *op);
/* After the layout pass: the store's value, pointers and mask produced in layout l (an
 * mma layout the value was converted from), whatever the cost rule says (passes/layout.c:
 * a store root of the conversions' propagation); false if some operand cannot be. */
bool pass_layout_store_in(IrFunc *f, IrOp *store, const IrLayout *l);
/* Whether pass_block_load would keep each of the n block_load or block_store ops of f
 * for TMA (a copy into a ring, a tma_store), as f is now, with a producer warpgroup where
 * the kernel gives ws or leaves it to passes/schedule.c, into keep; decided once for all
 * of them (passes/ptrblock.c asks). */
void blockload_kept(IrFunc *f, IrOp *const *ops, size_t n, bool *keep);
/* The parameters pointer v may be (a parameter, or `if` results and selects of them),
 * at most max, into out; 0 if it may be anything else. */
int blockload_ptr_params(const IrFunc *f, IrValue v, uint32_t *out, int max);
/* A scalar the host knows at launch (a tensor map's extent or stride): the constant
 * *value (*param -1), or *value times parameter *param (through the specialization's
 * multiple_of hints; 3 * hidden); *mult is what it is a multiple of. False otherwise.
 * blockload decides by it and codegen/cg_tma.c describes by it. */
bool blockload_host_scalar(const IrFunc *f, IrValue v, int32_t *param, int64_t *value, int64_t *mult);
/* blockload_host_scalar, and >= 1 when `positive` and a constant. */
bool blockload_host_known(const IrFunc *f, IrValue v, int64_t *mult, bool positive);
/* passes/shared.c: the widest swizzle (128, 64 or 32 bytes) that divides a row of tile t
 * along its contiguous axis `fast`, 0 if none or if the other extent is no multiple of
 * 8; and the NVMMA shared layout of buffers [n, ...t] of that swizzle (what wgmma's
 * descriptors and TMA's boxes of that width read). */
int32_t pass_nvmma_swizzle(const IrType *t, int fast);
const IrLayout *pass_nvmma_layout(IrCtx *c, const IrType *t, int fast);
/* passes/cluster.c: the axis of op's result that axis a of its operand (of rank `rank`)
 * becomes (fwd), or the operand's axis that the result's axis a comes from (!fwd), for
 * expand_dims, trans, reductions and scans; -1 where op mixes that axis with others (a
 * reduction or scan over it; expand_dims' new axis, backwards); a for any other op.
 * passes/ptrblock.c follows a wrapped load's rows by it. */
int cluster_axis_map(const IrOp *op, int rank, int a, bool fwd);
/* passes/shared.c: may an f8 wgmma operand that is not K-major in its ring (B loaded
 * [K, N], A [K, M]) be transposed through shared memory into a K-major NVMMA buffer
 * (the knob fp8_transpose, sm_90a, no producer warpgroup, one consumer warpgroup, no
 * cluster)? blockload.c asks before keeping such a block load for TMA. */
bool pass_fp8_transpose_ok(const IrFunc *f);
/* v is never negative (a constant >= 0, a program id, a loop's induction variable from
 * such a value by a positive step, widenings, quotients, ... of such: blockload.c). */
bool blockload_nonneg(const IrFunc *f, IrValue v);
/* The axis of a block load whose stride is the constant 1 (its contiguous axis), or -1. */
int blockload_fast_axis(const IrFunc *f, const IrOp *op);
/* Whether the block load op would be copied by TMA (passes/blockload.c) if the kernel
 * had a producer warpgroup (ws = 1): passes/schedule.c asks before choosing ws. */
bool blockload_tma_with_ws(const IrFunc *f, const IrOp *op);
/* The load or block load behind a dot operand (through trans and converts), or NULL;
 * *trans counts the transposes on the way (passes/blockload.c, passes/schedule.c). */
const IrOp *blockload_operand_source(const IrFunc *f, IrValue v, int *trans);
/* A block_store the tensor-memory accelerator stores (passes/tmastore.c): blockload
 * leaves it for the shared pass, which gives it a staging buffer (tma_store); every
 * other block_store becomes a masked pointer store in blockload. */
bool tmastore_kept(const IrFunc *f, const IrOp *op);
/* After the layout pass (from passes/shared.c): each kept block_store becomes a tma_store
 * through a staging buffer placed at *offset in the buffer area (advanced past it), or,
 * where none fits under `limit` bytes or the value's layout cannot be staged, a masked
 * pointer store in blocked layouts. */
bool tmastore_lower(IrFunc *f, uint32_t *offset, uint32_t limit);
const PassInfo *pass_find(const char *name);

typedef struct PassOptions {
    bool print_after_all;    /* print the IR after every pass to `dump` */
    bool verify_each;        /* run the verifier after every pass (abort on failure) */
    bool verify_changed;     /* ... after every pass that reports a change (the GPU pipeline) */
    bool check_unchanged;    /* abort when a pass reports no change but the printed IR
                              * differs (a test mode: verify_changed relies on it) */
    bool time_passes;        /* print the time of every pass to `dump` at the end */
    FILE *dump;              /* NULL: stderr */
    bool check_bounds;       /* pass_run_gpu ends with `bounds` (the checked mode) */
} PassOptions;

/* Runs a comma-separated list of pass names ("canonicalize,fold,cse,dce") on every
 * function of m. Unknown names are reported to the ctx's diagnostics (false). A
 * verifier failure after a pass is an internal error: it aborts with the pass name
 * and the IR printed. */
bool pass_run_list(IrModule *m, const char *list, const PassOptions *opt);
/* The default pipeline for an -O level (0: none; 1..3: the cleanup passes to a fixed
 * point, at most a few rounds). */
bool pass_run_default(IrModule *m, int opt_level, const PassOptions *opt);
/* The GPU pipeline: the passes of pass_gpu_table in order, once, with the verifier
 * after each that changed the IR (an invalid result is an internal error, as with
 * verify_each; an unchanged IR is the one verified before). After it every tile has a
 * layout and codegen can run. */
bool pass_run_gpu(IrModule *m, const PassOptions *opt);
/* Verifies m after a stage that is not a pass (`stage`: "lowering"); run on every
 * compile, so a frontend bug that builds invalid IR can never pass silently. A failure
 * is an internal error: it prints the stage, the verifier's messages and the IR to
 * `dump` (NULL: stderr) and aborts. */
void pass_verify_stage(IrModule *m, const char *stage, FILE *dump);

/* The checked mode's host side (bounds.c). bounds_bind_args fills the hidden arguments
 * of checked kernel f after its nuser own ones in args (which has room for all
 * f->body.nargs): each pointer's element count (its buffer's count; -1 for a null
 * pointer) and `report`, IR_BOUNDS_WORDS zeroed words; returns the argument count.
 * bounds_report_diag adds the error that a report holds, in the interpreter's words
 * and at the op's line and column in src (NULL: no location), to d; false (nothing
 * added) for a report without one. param_names are the kernel's own parameters. */
struct InterpArg;
uint32_t bounds_bind_args(const IrFunc *f, struct InterpArg *args, uint32_t nuser, int64_t *report);
bool bounds_report_diag(const int64_t *w, const char *kernel, const char *const *param_names, uint32_t nparams,
                        const Source *src, DiagList *d);

/* Graph IR fusion (passes/graph_fuse.c): partitions a verified graph into kernels;
 * the plan lives in arena a. */
IrGPlan *pass_graph_fuse(const IrGraph *g, Arena *a);

/* The LM head fused with its cross-entropy (passes/graph_lmce.c, docs/GRAPHS.md "The LM
 * head"): each cross_entropy(x @ w) whose logits nothing else reads, under a grad, becomes
 * one linear_cross_entropy op (ir/graph.h) whose plan holds [chunk, V] logits at a time
 * (chunk < 1: PASS_LMCE_CHUNK rows). liger: in Liger's order where it can (the op in the
 * forward for a seed of 1, the backward scaling dx and dw by the seed: for a
 * forward/backward split), else reading the seed (dx and dw the gradients: the joint
 * run's). Before recomputation planning and fusion; g stays verified and computes the
 * same values bit for bit. Returns the number of rewrites. */
#define PASS_LMCE_CHUNK 1024
uint32_t pass_graph_lmce(IrGraph *g, int64_t chunk, bool liger, Arena *a);

#endif
