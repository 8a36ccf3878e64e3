/* Integer arithmetic of compile-time expressions (const values, shapes, autotune's
 * `where`), shared by lowering and autotune: i64 that wraps (computed in u64, so
 * overflow is defined). Operators are AstBinOp values, or '-', '~', '!' for unary.
 * false: an operator that is not integer arithmetic, a division by zero, INT64_MIN / -1,
 * or a shift out of 0..63. */
#ifndef TILE_FRONTEND_INTOPS_H
#define TILE_FRONTEND_INTOPS_H

#include <stdbool.h>
#include <stdint.h>

bool fe_int_binop(int op, int64_t a, int64_t b, int64_t *out);
bool fe_int_unop(int op, int64_t a, int64_t *out);

#endif
