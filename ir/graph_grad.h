/* Reverse-mode differentiation over the graph IR (docs/GRAPHS.md "Gradients"): the
 * expansion of `grad(y, [x1, x2, ...])` (LANGUAGE-REFERENCE.md section 7.3). */
#ifndef TILE_IR_GRAPH_GRAD_H
#define TILE_IR_GRAPH_GRAD_H

#include "graph.h"

typedef enum {
    IR_GRAD_OK,
    IR_GRAD_NO_RULE,     /* op, on a path from an x to y, has no rule yet */
    IR_GRAD_UNUSED,      /* y does not depend on xs[which] (through float values) */
} IrGradStatus;

typedef struct IrGradFail {
    IrGradStatus status;
    uint32_t op;         /* IR_GRAD_NO_RULE: the op's index */
    uint32_t which;      /* IR_GRAD_UNUSED: the index into xs */
} IrGradFail;

/* Appends to g the ops that compute the gradient of y (a float value of one element)
 * with respect to each of xs[0..n) (float values of g defined before y's uses end),
 * and puts the gradients' value ids in grads[0..n): each of its x's type. Every new op
 * gets loc. Returns false with *fail set, and g unchanged, when an op on the way has
 * no rule or y does not depend on an x. */
bool ir_graph_grad(IrGraph *g, uint32_t y, const uint32_t *xs, uint32_t n, Loc loc, uint32_t *grads,
                   IrGradFail *fail);

/* Whether op kind k has a gradient rule (ops that carry no gradient count as having one). */
bool ir_gop_has_grad(IrGOpKind k);

#endif
