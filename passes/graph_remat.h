/* Recomputation planning over a graph with a grad (passes/graph_remat.c; docs/GRAPHS.md
 * "Recomputation"): which forward values the backward keeps in memory and which it
 * computes again, by a min cut under the graph's policy and memory budget. */
#ifndef TILE_PASSES_GRAPH_REMAT_H
#define TILE_PASSES_GRAPH_REMAT_H

#include <stdio.h>

#include "ir/graph.h"

#define PASS_REMAT_DEFAULT_SIZE 4096   /* a size name's value when the sizes are not given */

typedef struct PassRemat {
    IrRemat opt;
    const int64_t *sizes;    /* per size name of the graph, or NULL (PASS_REMAT_DEFAULT_SIZE each) */
    bool met;                /* the saved bytes fit the budget (true without one) */
    uint32_t nunbanned;      /* costly ops the budget made recomputable */
    uint32_t nsaved, nrecomputed;
    const uint32_t *saved;       /* forward values the backward reads from memory, in order */
    const uint32_t *recomputed;  /* forward values the backward computes again, in order */
    const uint32_t *copies;      /* per value (ids before the pass): its copy, or IR_GNONE */
    IrSize saved_bytes;      /* of the saved values, a polynomial of the size names */
    double saved_at, save_all_at, budget_at;   /* at the sizes (budget: HUGE_VAL without one) */
} PassRemat;

/* Rewrites g (a verified graph; nothing happens without a grad) so that the backward
 * reads only the values the policy and budget of opt save, recomputing the others just
 * before their first reader; g stays verified and computes the same values bit for bit.
 * sizes: per size name of g, or NULL. The report lives in a. */
PassRemat *pass_graph_remat(IrGraph *g, const IrRemat *opt, const int64_t *sizes, Arena *a);

/* The options a compile of g uses: g's attribute (g->remat), with policy (a name of
 * ir_remat_policy_names) and budget (ir_remat_parse_budget's forms) over it where not
 * NULL; false with *err (a static message) for a bad one. */
bool pass_remat_options(const IrGraph *g, const char *policy, const char *budget, IrRemat *out, const char **err);

/* s's value at the sizes (PASS_REMAT_DEFAULT_SIZE for each name when sizes is NULL). */
double pass_remat_eval(const IrGraph *g, const int64_t *sizes, IrSize s);

/* The bytes of every buffer of plan p, a polynomial of the size names: the memory its
 * intermediates take, forward and backward together (the runtime allocates each buffer
 * once), so the peak of the plan. A buffer with a rows condition (IrGBuffer.cond) counts
 * as its regime at sizes (PASS_REMAT_DEFAULT_SIZE each when NULL) chooses. */
IrSize pass_gplan_buffer_bytes(const IrGraph *g, const IrGPlan *p, const int64_t *sizes, Arena *a);

/* The report's lines for --emit=fusion: the policy, each saved value with its bytes, each
 * recomputed value with its copy, the totals, and the plan's buffer bytes. */
void pass_graph_remat_print(const IrGraph *g, const PassRemat *r, const IrGPlan *plan, FILE *out);

#endif
