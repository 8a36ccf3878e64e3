/* Hoisting: the first GPU pass, on tiles without layouts. Moves what does not change
 * inside a loop out of it, so that a K loop computes only what depends on k.
 *
 * require:    verified IR of the tile level
 * guarantees: (1) an integer add of a splat scalar under expand_dims or broadcast is
 *             done after them: expand_dims(add(splat(s), x)) -> add(splat(s),
 *             expand_dims(x)), the same for broadcast and with the splat on the right
 *             (the same wrapping add of the same two values per element, so results
 *             are bit-identical); (2) a pure op in a `for` body whose operands are all
 *             defined outside the loop is moved before the loop (innermost loops first,
 *             so an invariant climbs as far as it can). Integer div and rem stay where
 *             they are: hoisted out of a loop that runs zero times, a division by zero
 *             would be evaluated where the program never evaluated it.
 *
 *   for %k ... {                                   %rkb = broadcast (expand_dims %rk)
 *     %ka = add (splat %k), %rk : i32[32]          %p0 = addptr %base, %rkb   (pointers of k = 0)
 *     %kb = broadcast (expand_dims %ka)      ->    for %k ... {
 *     %p  = addptr %base, %kb                        %kb = add (splat %k), %rkb
 *     ... }                                          %p  = addptr %base, %kb ... }
 *
 * Why here: the layout pass gives a 1-D tile and its 2-D broadcast different layouts,
 * and the broadcast then moves data through shared memory (with barriers). Done once
 * before the loop instead of every iteration, the loop's pointer arithmetic is
 * element-wise in one layout. */
#include "passes.h"

#include <stdlib.h>

#include "ir/arena.h"

static IrOp *def_of(const IrFunc *f, IrValue v) { return f->values[v].def; }

/* A shape op S (expand_dims, broadcast) in a loop body whose operand is computed
 * element-wise goes to the operands instead: S(E(x, y)) -> E(S(x), S(y)) (E stays for
 * its other uses: an element-wise op more per iteration costs less than the shared-
 * memory round trip, with two barriers, that a shape op between layouts costs; only
 * integer, i1 and pointer ops, the address and mask arithmetic: float math, exp2 of a
 * row statistic say, would be done once per element of the broadcast instead of once),
 * S(splat(s)) -> splat(s) of S's shape. Recursively, so shape ops end at the leaves,
 * which are loop-invariant (hoisted next) or splats of a scalar. The same op of the same
 * values per element: bit-identical. */
typedef struct Push {
    IrFunc *f;
    bool changed;
} Push;

static bool in_loop(const IrOp *op)
{
    for (const IrBlock *b = op->parent; b && b->parent_op; b = b->parent_op->parent)
        if (b->parent_op->code == IR_OP_FOR) return true;
    return false;
}

/* The value of shape op `s` (code, attr) applied to x, with result shape of rt, before `at`. */
static IrValue shape_of(Push *p, IrOp *at, IrOpcode code, IrAttr attr, IrValue x, const IrType *rt);

static IrValue push_through(Push *p, IrOp *s)
{
    IrFunc *f = p->f;
    IrOp *e = def_of(f, s->operands[0]);
    if (!e || e->parent != s->parent || !(ir_op_info[e->code].flags & IR_E) || !(ir_op_info[e->code].flags & IR_P) ||
        e->nresults != 1 || e->noperands > 3 || ir_elem_is_float(ir_value_type(f, e->results[0])->elem))
        return IR_NO_VALUE;
    IrCtx *c = f->module->ctx;
    const IrType *st = ir_value_type(f, s->results[0]);
    IrValue ops[3];
    for (uint32_t i = 0; i < e->noperands; i++) {
        const IrType *xt = ir_value_type(f, e->operands[i]);
        if (xt->rank == 0) ops[i] = e->operands[i];
        else ops[i] = shape_of(p, s, s->code, s->attr, e->operands[i], ir_type_like(c, st, ir_type_elem(c, xt)));
    }
    IrBuilder b;
    ir_builder_before(&b, s);
    b.loc = e->loc;
    IrOp *n = ir_build(&b, e->code, ops, e->noperands, &st, 1, 0);
    n->attr = e->attr;
    ir_replace_all_uses(f, s->results[0], n->results[0]);
    ir_op_remove(s);
    p->changed = true;
    return n->results[0];
}

static IrValue shape_of(Push *p, IrOp *at, IrOpcode code, IrAttr attr, IrValue x, const IrType *rt)
{
    IrFunc *f = p->f;
    IrOp *d = def_of(f, x);
    IrBuilder b;
    ir_builder_before(&b, at);
    b.loc = at->loc;
    if (d && d->code == IR_OP_SPLAT) return ir_build1(&b, IR_OP_SPLAT, rt, &d->operands[0], 1);
    if (d && d->code == IR_OP_CONST) {
        IrOp *k = ir_build(&b, IR_OP_CONST, NULL, 0, &rt, 1, 0);
        k->attr = d->attr;
        return k->results[0];
    }
    IrOp *s = ir_build(&b, code, &x, 1, &rt, 1, 0);
    s->attr = attr;
    IrValue v = push_through(p, s);
    return v != IR_NO_VALUE ? v : s->results[0];
}

typedef struct Ops {
    IrOp **v;
    uint32_t n, cap;
} Ops;

static void shape_visit(IrOp *op, void *ud)
{
    Ops *o = ud;
    if ((op->code != IR_OP_EXPAND_DIMS && op->code != IR_OP_BROADCAST) || !in_loop(op)) return;
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 16;
        o->v = tl_realloc(o->v, o->cap * sizeof *o->v);
        if (!o->v) tl_oom();
    }
    o->v[o->n++] = op;
}

static void collect_shape_ops(IrBlock *body, Push *p)
{
    Ops o = {0};
    ir_walk(body, shape_visit, &o);
    for (uint32_t i = 0; i < o.n; i++) push_through(p, o.v[i]);
    tl_free(o.v);
}

/* ---- loop-invariant code motion ---------------------------------------------------- */

static bool hoistable(const IrFunc *f, const IrOp *op, const IrBlock *body)
{
    if (!(ir_op_info[op->code].flags & IR_P) || op->nregions || op->nresults != 1) return false;
    if ((op->code == IR_OP_DIV || op->code == IR_OP_REM) && ir_elem_is_int(ir_value_type(f, op->results[0])->elem))
        return false;
    for (uint32_t i = 0; i < op->noperands; i++)
        if (ir_value_defined_in(f, op->operands[i], body)) return false;
    return true;
}

static bool hoist_loop(IrFunc *f, IrOp *loop)
{
    bool changed = false;
    IrBlock *body = &loop->regions[0];
    for (IrOp *op = body->first, *next; op; op = next) {
        next = op->next;
        if (!hoistable(f, op, body)) continue;
        ir_op_remove(op);
        ir_op_insert_before(op, loop);
        changed = true;
    }
    return changed;
}

static bool hoist_block(IrFunc *f, IrBlock *blk)
{
    bool changed = false;
    for (IrOp *op = blk->first, *next; op; op = next) {
        next = op->next;
        for (uint32_t r = 0; r < op->nregions; r++) changed |= hoist_block(f, &op->regions[r]);
        if (op->code == IR_OP_FOR) changed |= hoist_loop(f, op);
    }
    return changed;
}

bool pass_hoist_invariants(IrFunc *f) { return hoist_block(f, &f->body); }

bool pass_hoist(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL) return false;
    Push p = {f, false};
    collect_shape_ops(&f->body, &p);
    return hoist_block(f, &f->body) | p.changed;
}
