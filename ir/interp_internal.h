/* Inside the interpreter: run-time tile values and the state of one function run.
 *
 * A value (scalar or tile) is its IR type and a flat row-major array of 8-byte slots:
 * integers and i1 as int64 normalized to the type's width (sign- or zero-extended),
 * floats as double always holding a value of the element type (rounded after every
 * op), pointers as (buffer, element offset) where the buffer is the index of the
 * kernel argument it came from, or -1 for a null pointer. A scalar is a tile of one
 * element. Files: interp.c (driver, control flow, memory, assert, print),
 * interp_ops.c (pure tile ops), fp.c (number formats), philox.c (rand). */
#ifndef TILE_IR_INTERP_INTERNAL_H
#define TILE_IR_INTERP_INTERNAL_H

#include "interp.h"
#include "scalar.h"

typedef struct Tile {
    const IrType *type;          /* NULL: not yet defined */
    int64_t n;                   /* number of elements, 1 for scalars */
    Slot *s;
    int32_t *buf;                /* pointers only: argument index of the buffer, or -1 */
} Tile;

typedef struct Interp {
    const IrFunc *fn;
    const InterpArg *args;
    Tile *vals;                  /* fn->nvalues entries */
    int64_t pid[3], grid[3];
    int64_t rank;                /* cluster_rank: the CTA of the program's cluster running */
    int64_t max_iters;
    InterpObserver observe;
    void *observe_ud;
    int64_t work, max_work;      /* elements processed so far in the run, and the bound */
    FILE *out;
    DiagList *diags;
    const IrOp *ret;             /* the return op that ended the run */
    const IrOp *term;            /* the terminator of the region run last */
    /* A warp-specialized kernel's producer loop (passes/warpspec.c), run one iteration
     * (one stage's copies) at each consumer `tma_wait 0`: the order in which a GPU may
     * run them, with the copies as late as they can be. */
    struct {
        const IrOp *loop;        /* NULL: none in this program */
        int64_t iv, hi, step, count;
        /* a persistent kernel's producer (passes/persistent.c): loop is then the tile
         * loop's inner loop, run for each iteration of `outer` in turn */
        const IrOp *outer;
        int64_t oiv, ohi, ostep, ocount;
        /* the region's ops after the loop under way (passes/warpspec.c gives loops that
         * share one ring a loop each, in order): run when it has no iteration left */
        const IrOp *rest;
    } prod;
} Interp;

/* Records "msg" at the op's location (or the function's when op is NULL); returns
 * false so that callers can write `return interp_fail(...)`. */
bool interp_fail(Interp *I, const IrOp *op, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* " in kernel 'K', program (x, y, z)", for messages. */
const char *interp_where(Interp *I, char *buf, size_t n);

bool tile_alloc(Interp *I, const IrOp *op, const IrType *t, Tile *out);
void tile_free(Tile *t);
bool tile_copy(Interp *I, const IrOp *op, const Tile *src, Tile *dst);
static inline const Tile *interp_opnd(const Interp *I, const IrOp *op, uint32_t k)
{
    return &I->vals[op->operands[k]];
}
static inline const IrType *interp_result_type(const Interp *I, const IrOp *op, uint32_t k)
{
    return I->fn->values[op->results[k]].type;
}
/* Index into an operand that may be a scalar standing for a whole tile. */
static inline int64_t bidx(const Tile *t, int64_t k) { return t->n == 1 ? 0 : k; }
/* The same as a stride (0 or 1), for hot loops: lane k is at k * bstride(t). */
static inline int64_t bstride(const Tile *t) { return t->n == 1 ? 0 : 1; }

float fp_round_tf32(float f);               /* tf32: 10 mantissa bits, nearest even */
/* The pure ops (ops.def flag P, and the hints): computes op's result into *res. */
bool interp_exec_pure(Interp *I, const IrOp *op, Tile *res);

#endif
