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
bool pass_hoist(IrFunc *f);        /* hoist.c: loop invariants out of loops, shape ops to the leaves */
bool pass_hoist_invariants(IrFunc *f);   /* hoist.c: only the loop-invariant code motion */
bool pass_layout(IrFunc *f);       /* layout.c: a blocked layout for every tile */
bool pass_shared(IrFunc *f);       /* shared.c: dot operands in shared memory, pipelined by stages */
extern const PassInfo pass_gpu_table[];
extern const unsigned pass_gpu_count;
/* The blocked layout pass_layout gives tiles of t's shape in a kernel of `warps`. */
const IrLayout *pass_blocked_layout(IrCtx *c, int warps, const IrType *t);
const PassInfo *pass_find(const char *name);

typedef struct PassOptions {
    bool print_after_all;    /* print the IR after every pass to `dump` */
    bool verify_each;        /* run the verifier after every pass (abort on failure) */
    bool time_passes;        /* print the time of every pass to `dump` at the end */
    FILE *dump;              /* NULL: stderr */
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
 * after each (an invalid result is an internal error, as with verify_each). After it
 * every tile has a layout and codegen can run. */
bool pass_run_gpu(IrModule *m, const PassOptions *opt);
/* Verifies m after a stage that is not a pass (`stage`: "lowering"); run on every
 * compile, so a frontend bug that builds invalid IR can never pass silently. A failure
 * is an internal error: it prints the stage, the verifier's messages and the IR to
 * `dump` (NULL: stderr) and aborts. */
void pass_verify_stage(IrModule *m, const char *stage, FILE *dump);

#endif
