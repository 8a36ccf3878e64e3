/* The scalar arithmetic of Tile IR, as the interpreter defines it, for the places that
 * must compute exactly the same thing at compile time: constant folding (passes/fold.c)
 * and the conversion of literals (frontend/lower_expr.c).
 *
 * A scalar is a Slot: integers and i1 as int64 normalized to the type's width (sign- or
 * zero-extended), floats as a double holding a value of the element type. */
#ifndef TILE_IR_SCALAR_H
#define TILE_IR_SCALAR_H

#include <stdbool.h>
#include <stdint.h>

#include "ir.h"

typedef union Slot {
    int64_t i;                   /* integers; pointers: element offset */
    double f;                    /* floats */
} Slot;

int64_t interp_int_norm(IrElem e, int64_t v);          /* wrap to the type's width */
/* Rounds an element of type `from` to a value of type `to` (the convert op). */
Slot interp_convert(IrElem from, IrElem to, Slot v);
/* The bits of an element of type `from` read as type `to` of the same width (the
 * bitcast op). A NaN's payload is kept where the host's float conversions keep it
 * (signaling NaNs of f32 and f64 may come back quiet). */
Slot interp_bitcast(IrElem from, IrElem to, Slot v);
/* Comparison as the cmp op defines it: the order of a and b as -1, 0, 1, or 2 when
 * unordered (a NaN); and whether predicate p holds for that order. */
int interp_cmp_slots(IrElem e, Slot a, Slot b);
bool interp_cmp_holds(IrCmp p, int c);

#endif
