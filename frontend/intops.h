/* Integer arithmetic of compile-time expressions (const values, shapes, autotune's
 * `where`), shared by lowering and autotune: exact i64, never wrapping. Operators are
 * AstBinOp values, or '-', '~', '!' for unary. A result that i64 cannot hold is
 * FE_INT_OVERFLOW (INT64_MIN / -1 and -INT64_MIN too); the caller reports it where the
 * operator is, so a shape or a const is never a wrapped value. */
#ifndef TILE_FRONTEND_INTOPS_H
#define TILE_FRONTEND_INTOPS_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    FE_INT_OK,
    FE_INT_OVERFLOW,     /* the exact result is outside i64 */
    FE_INT_DIV_ZERO,     /* / or % by 0 */
    FE_INT_SHIFT,        /* a shift count outside 0..63 */
    FE_INT_NOT_INT,      /* not an integer operator (@) */
} FeIntStatus;

FeIntStatus fe_int_binop(int op, int64_t a, int64_t b, int64_t *out);
FeIntStatus fe_int_unop(int op, int64_t a, int64_t *out);

#endif
