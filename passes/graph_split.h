/* The forward/backward split of a training graph (passes/graph_split.c; docs/GRAPHS.md
 * "The forward/backward split"): the backward's seed as an input, every op's phase, and
 * for a plan which kernels are the forward and the backward and which values cross. */
#ifndef TILE_PASSES_GRAPH_SPLIT_H
#define TILE_PASSES_GRAPH_SPLIT_H

#include <stdio.h>

#include "ir/graph.h"

/* Makes the seed of g's backward (the constant 1 of d(loss)/d(loss)) a parameter `dloss`
 * of the loss's type, appended after g's own (g->dloss), when the loss is a scalar; and
 * gives every op without a phase one (2 when it depends on the seed, else 1), so that
 * fusion keeps the two parts apart. Run after pass_graph_remat; nothing happens without
 * a grad. With dloss = 1 g computes what it did, bit for bit. */
void pass_graph_seed_input(IrGraph *g);

typedef enum { PASS_CROSS_SAVED, PASS_CROSS_RETURNED, PASS_CROSS_PARAM } PassCrossKind;

typedef struct PassCross {
    uint32_t value;          /* the root (ir_gplan_root) of what the backward reads */
    PassCrossKind kind;      /* saved: an intermediate; returned: a result the forward writes */
    uint32_t writer;         /* saved, returned: the forward kernel that writes it */
} PassCross;

typedef struct PassSplit {
    const uint8_t *phase;    /* per plan kernel: 1 forward, 2 backward */
    uint32_t nforward, nbackward;   /* the launched kernels of each part */
    uint32_t ncross;
    const PassCross *cross;  /* in value order */
    uint32_t nsaved;
    const uint32_t *saved;   /* the saved crossing values, in value order: the memory a caller
                              * binds (trt_tgraph_bind_saved) to carry a forward to its backward */
    IrSize saved_bytes;      /* of the saved values, a polynomial of the size names */
    uint32_t dloss;          /* g->dloss */
} PassSplit;

/* The split of plan p of g (after pass_graph_seed_input); NULL without a grad. A kernel
 * whose ops have both phases, or a forward kernel reading what the backward writes, is
 * an internal error: NULL with *err set. */
const PassSplit *pass_graph_split(const IrGraph *g, const IrGPlan *p, Arena *a, const char **err);

/* The split's lines for --emit=fusion: the parts' kernels, the seed, each crossing value
 * with its bytes and the saved total. */
void pass_graph_split_print(const IrGraph *g, const IrGPlan *p, const PassSplit *s, FILE *out);

#endif
