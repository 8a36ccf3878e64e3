/* Axis analysis: what is known, per value and per axis, about the integers (and
 * pointers) a kernel computes; the facts behind vectorized loads and stores.
 *
 * For each axis d of a value (a scalar has one entry, d = 0), as in Triton's AxisInfo:
 *   contiguity[d]   aligned groups of this many elements along d hold consecutive
 *                   values (v, v+1, ...); pointers: consecutive elements
 *   divisibility[d] the first value of each such group is a multiple of this;
 *                   pointers: the address, in bytes
 *   constancy[d]    aligned groups of this many elements along d are equal
 * All are powers of two, at least 1, at most the axis size for contiguity and
 * constancy. Facts come from constants, arange, program_id * BLOCK, the hints
 * multiple_of / max_contiguous (which specialization inserts for parameters), and the
 * pointer-alignment promises of kernel parameters. */
#ifndef TILE_PASSES_AXISINFO_H
#define TILE_PASSES_AXISINFO_H

#include <stdint.h>

#include "ir/ir.h"

#define AXIS_MAX_DIV (INT64_C(1) << 30)   /* "divisible by anything" (0, huge constants) */

typedef struct AxisInfo {
    int64_t contiguity[IR_MAX_RANK];
    int64_t divisibility[IR_MAX_RANK];
    int64_t constancy[IR_MAX_RANK];
} AxisInfo;

/* Analyzes f. aligned_params: bit i set promises that parameter i (a pointer) is
 * 16-byte aligned. Returns an array of f->nvalues entries (tl_malloc'd; the caller
 * frees it with tl_free), or NULL when out of memory. */
AxisInfo *axisinfo_analyze(const IrFunc *f, uint64_t aligned_params);

#endif
