/* Axis analysis: what is known, per value and per axis, about the integers (and
 * pointers) a kernel computes; the facts behind vectorized loads and stores.
 *
 * For each axis d of a value (a scalar has one entry, d = 0), as in Triton's AxisInfo,
 * where a "position" is an element's coordinates and p + j along d steps its d-th one:
 *   contiguity[d] = c   at every position p whose coordinate along d is a multiple of
 *                       c, v[p + j] = v[p] + j for 0 <= j < c (pointers: the next
 *                       element's address)
 *   constancy[d] = k    at every p whose coordinate along d is a multiple of k,
 *                       v[p + j] = v[p] for 0 <= j < k
 *   divisibility[d] = g at every p whose coordinate along d is a multiple of
 *                       contiguity[d], v[p] is a multiple of g (pointers: the address,
 *                       in bytes). With contiguity 1 that is every element, so on an
 *                       axis of size 1 (after expand_dims) divisibility speaks of every
 *                       element, and a new axis can only inherit what holds for all.
 * All are powers of two, at least 1, at most the axis size for contiguity and
 * constancy. Integer facts hold as long as the values do not wrap around. Facts come
 * from constants, arange, program_id * BLOCK, the hints multiple_of / max_contiguous
 * (which specialization inserts for parameters), and the
 * pointer-alignment promises of kernel parameters. An analysis of the IR, not a pass:
 * the passes (vector widths, TMA recognition) and codegen read it; passes/axischeck.h
 * checks its facts on the interpreter's values. */
#ifndef TILE_IR_AXISINFO_H
#define TILE_IR_AXISINFO_H

#include <stdint.h>

#include "ir/interp.h"
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

/* The largest power of two dividing every element of a value with facts a whose
 * coordinate along d is a multiple of c (c a power of two). */
int64_t axisinfo_div_at(const AxisInfo *a, int d, int64_t c);

#endif
