/* Lowering a fusion plan to Tile kernels (passes/graph_lower.c).
 *
 * Each kernel of an IrGPlan becomes one Tile kernel, written as Tile source text, so
 * that it goes through the one compile driver of hand-written kernels (frontend, the
 * passes, the interpreter, codegen, the runtime) and can be read, tuned and FileChecked
 * like them. A PassGLowered says what each kernel's run-time parameters are: a graph
 * value (a pointer to its memory, or a scalar parameter of the graph passed by value)
 * or a size name of the graph (an i64). docs/GRAPHS.md "Lowering". */
#ifndef TILE_PASSES_GRAPH_LOWER_H
#define TILE_PASSES_GRAPH_LOWER_H

#include "ir/graph.h"

/* OFFSET: a chunked kernel's step, the first row of the chunk it runs on (an i64); END:
 * the row after the chunk's last (min(OFFSET + chunk, rows), an i64: the rows its block
 * loads and stores see, so a TMA copy reads zeros past the chunk); ROWS: the chunk's rows
 * (END - OFFSET, an i64 of its own: the scratch's block shape, which a TMA map takes from
 * a parameter); SCRATCH: the plan's buffer `index`, the chunked kernel's own memory
 * (IrGKernel.scratch). */
typedef enum {
    PASS_GARG_PTR, PASS_GARG_SCALAR, PASS_GARG_SIZE, PASS_GARG_OFFSET, PASS_GARG_END, PASS_GARG_ROWS, PASS_GARG_SCRATCH
} PassGArgKind;

typedef struct PassGArg {
    PassGArgKind kind;
    uint32_t index;          /* PTR, SCALAR: a value id of the graph; SIZE: g->sizes[index];
                              * SCRATCH: a buffer of the plan */
} PassGArg;

typedef struct PassGKernel {
    const char *name;        /* the Tile kernel's name: "<graph>_k<i>"; NULL for the plan's
                              * views (IrGKernel.view), which run nothing */
    const char *why;         /* NULL when lowered; else why this plan kernel is not */
    uint32_t nargs;
    const PassGArg *args;    /* one per run-time parameter, in order */
    /* A chunked plan kernel (IrGKernel.chunk, linear_cross_entropy): no Tile kernel of its
     * own (name, args unused) but nsteps of them, "<graph>_k<i>_<step>", run in order once
     * per chunk: for off = 0, chunk, 2 * chunk, ... below rows (each step's OFFSET
     * argument), or once for every row (off 0, end rows) while rows <= whole
     * (IrGKernel.whole: the steps take the chunk's rows from off and end, never from
     * chunk). With steps and chunk 0 (grad_stats: IrGKernel.partials) the steps run in
     * order once. */
    uint32_t nsteps;
    const struct PassGKernel *steps;
    int64_t chunk;
    IrSize rows, whole;
} PassGKernel;

typedef struct PassGLowered {
    const char *source;      /* the Tile source of every lowered kernel of the plan */
    uint32_t nkernels;       /* plan->nkernels */
    const PassGKernel *kernels;
} PassGLowered;

/* Lowers every kernel of plan (a plan of g made by pass_graph_fuse) into arena a. A
 * kernel that cannot be lowered yet gets `why` and no source; the others are lowered
 * regardless. Never NULL. */
const PassGLowered *pass_graph_lower(const IrGraph *g, const IrGPlan *plan, Arena *a);

/* The first kernel that is not lowered (its why in *why), or UINT32_MAX. */
uint32_t pass_graph_unlowered(const PassGLowered *l, const char **why);

#endif
