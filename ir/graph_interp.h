/* The graph IR interpreter: runs a graph op by op on the CPU, the reference that fused
 * execution is compared with (docs/IR.md section 6).
 *
 * A tensor holds its elements as doubles (float types) or int64s (integer types), each
 * rounded to its element type after every op (fp_round; integers wrap to their width),
 * so an f16 value is an f16 value. Float math is computed in double and rounded; sums,
 * matrix products and norms accumulate in double. */
#ifndef TILE_IR_GRAPH_INTERP_H
#define TILE_IR_GRAPH_INTERP_H

#include "graph.h"

typedef struct IrGTensor {
    IrElem elem;
    uint32_t rank;
    int64_t *dims;           /* rank entries (malloc'd) */
    int64_t n;               /* the element count */
    double *f;               /* float types: n values, else NULL */
    int64_t *i;              /* integer types: n values, else NULL */
} IrGTensor;

/* A zeroed tensor of this type and shape; false on out-of-memory. */
bool ir_gtensor_alloc(IrGTensor *t, IrElem elem, uint32_t rank, const int64_t *dims);
void ir_gtensor_free(IrGTensor *t);
/* From / to n elements of raw little-endian memory of the tensor's element type. */
void ir_gtensor_load(IrGTensor *t, const void *data);
void ir_gtensor_store(const IrGTensor *t, void *data);

/* Runs g. params: one tensor per parameter, of its type with the sizes of `sizes`
 * (one value per g->sizes name, in order). outs: one per returned value, allocated
 * here: the caller zeroes them before and frees them after, also on failure. False
 * with a message in err (a shape that does not match, a division by zero of integers,
 * out of memory). */
bool ir_graph_interp(const IrGraph *g, const IrGTensor *params, const int64_t *sizes,
                     IrGTensor *outs, char *err, size_t errlen);

/* Runs g through a fusion plan (ir/graph.h): kernel after kernel, each running its ops
 * in graph order. A kernel may use only parameters, immediates (const, size), values
 * of its own ops and what earlier kernels wrote; after it, the values it did not write
 * are gone. So a plan that reads what no kernel wrote fails (with a message in err)
 * instead of giving a result, and one that is right gives ir_graph_interp's result. */
bool ir_graph_interp_plan(const IrGraph *g, const IrGPlan *plan, const IrGTensor *params,
                          const int64_t *sizes, IrGTensor *outs, char *err, size_t errlen);

#endif
