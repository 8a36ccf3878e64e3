/* tilec run --graph through the lowered kernels (tools/tilec_graph.c). */
#ifndef TILE_TOOLS_TILEC_GRAPH_H
#define TILE_TOOLS_TILEC_GRAPH_H

#include <stdbool.h>
#include <stddef.h>

#include "ir/graph_interp.h"
#include "tile/tile_rt.h"

/* Runs graph g of the program `src` through libtileRT (trt_module_get_graph_with, opts
 * its compile options or NULL): the
 * Tile kernels of its fusion plan, in the interpreter (gpu false) or on GPU 0. params
 * and sizes as for ir_graph_interp; outs (zeroed by the caller, freed by it after, also
 * on failure) get the results. False with a message in err. */
bool tilec_graph_run_lowered(const Source *src, const IrGraph *g, const IrGTensor *params, const int64_t *sizes,
                             bool gpu, const TrtGraphOptions *opts, IrGTensor *outs, char *err, size_t errlen);

/* tilec run --graph --split: as tilec_graph_run_lowered, the whole plan (trt_tgraph_run),
 * then its forward part, the graph's buffers overwritten, and its backward part through
 * saved values in memory of its own (trt_tgraph_run_forward, _backward); outs get the
 * split run's results, and a result whose bytes differ from the joint run's is an error. */
bool tilec_graph_run_split(const Source *src, const IrGraph *g, const IrGTensor *params, const int64_t *sizes,
                           bool gpu, const TrtGraphOptions *opts, IrGTensor *outs, char *err, size_t errlen);

/* Whether x and y are equal within the rounding of their element type (integers
 * exactly; floats relatively, with NaN equal to NaN): a lowered kernel accumulates in
 * f32 where the graph interpreter uses doubles. The first difference in *at. */
bool tilec_graph_close(const IrGTensor *x, const IrGTensor *y, int64_t *at);

#endif
