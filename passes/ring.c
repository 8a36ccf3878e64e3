/* A TMA ring's iteration numbers counted from another start (passes/persistent.c: from
 * the kernel's start across the tiles a program walks; passes/warpspec.c: across the
 * loops that share one ring).
 *
 * passes/shared.c numbers a ring loop's iterations j = (iv - lo) / step and computes
 * every ring op's stage (j % S), phase (j / S % 2) and predicates from j.
 * pass_ring_rebase gives those operands the number j + base instead: the ops between
 * j and each operand are cloned after their originals, with j + base in j's place; the
 * originals stay for whatever else reads them (the pipeline's dce removes the rest). */
#include <string.h>

#include "passes/passes.h"
#include "ir/arena.h"

typedef struct Rebase {
    IrFunc *f;
    IrBlock *body;
    IrValue lo, step, base;
    IrValue *memo;               /* per value: its rebased value (IR_NO_VALUE: not yet) */
} Rebase;

/* a and b are the same value, or equal integer constants */
static bool same_value(const IrFunc *f, IrValue a, IrValue b)
{
    if (a == b) return true;
    const IrOp *x = f->values[a].def, *y = f->values[b].def;
    return x && y && x->code == IR_OP_CONST && y->code == IR_OP_CONST && x->attr.i == y->attr.i &&
           ir_value_type(f, a) == ir_value_type(f, b);
}

/* v with the loop's iteration number (div(sub(x, lo), step)) plus base in its place */
static IrValue rebased(Rebase *r, IrValue v)
{
    IrFunc *f = r->f;
    IrOp *d = f->values[v].def;
    if (!d || d->parent != r->body || d->nresults != 1 || d->nregions) return v;
    if (r->memo[v] != IR_NO_VALUE) return r->memo[v];
    r->memo[v] = v;
    IrBuilder b;
    ir_builder_before(&b, d->next);
    b.loc = d->loc;
    const IrOp *s = d->code == IR_OP_DIV ? f->values[d->operands[0]].def : NULL;
    if (s && s->code == IR_OP_SUB && same_value(f, s->operands[1], r->lo) && same_value(f, d->operands[1], r->step)) {
        IrValue base = r->base;
        if (ir_value_type(f, base) != ir_value_type(f, v))
            base = ir_build1(&b, IR_OP_CONVERT, ir_value_type(f, v), &base, 1);
        r->memo[v] = ir_build_binary(&b, IR_OP_ADD, v, base);
        return r->memo[v];
    }
    IrValue ops[8];
    bool changed = false;
    if (d->noperands > 8) return v;
    for (uint32_t i = 0; i < d->noperands; i++) {
        ops[i] = rebased(r, d->operands[i]);
        changed |= ops[i] != d->operands[i];
    }
    if (!changed) return v;
    const IrType *t = ir_value_type(f, v);
    IrOp *n = ir_build(&b, d->code, ops, d->noperands, &t, 1, 0);
    n->attr = d->attr;
    r->memo[v] = n->results[0];
    return r->memo[v];
}

IrValue pass_ring_trip_count(IrBuilder *b, const IrOp *loop)
{
    const IrType *t = ir_value_type(b->func, loop->operands[0]);
    IrValue lo = loop->operands[0], hi = loop->operands[1], step = loop->operands[2];
    IrValue span = ir_build_binary(b, IR_OP_ADD, ir_build_binary(b, IR_OP_SUB, hi, lo), step);
    IrValue c = ir_build_binary(b, IR_OP_DIV, ir_build_binary(b, IR_OP_SUB, span, ir_const_int(b, t, 1)), step);
    return ir_build_binary(b, IR_OP_MAXIMUM, c, ir_const_int(b, t, 0));
}

void pass_ring_rebase(IrFunc *f, IrOp *loop, IrValue lo, IrValue step, IrValue base)
{
    Rebase r = {f, &loop->regions[0], lo, step, base, tl_malloc(f->nvalues * sizeof(IrValue))};
    if (!r.memo) tl_oom();
    uint32_t nvalues = f->nvalues;
    memset(r.memo, 0xff, nvalues * sizeof(IrValue));
    for (IrOp *o = r.body->first; o; o = o->next) {
        uint32_t from, to;
        switch (o->code) {
        case IR_OP_TMA_WAIT: case IR_OP_MBARRIER_ARRIVE: from = 1, to = o->noperands; break;
        case IR_OP_LOCAL_LOAD: case IR_OP_TMA_COPY: from = 1, to = 2; break;
        default: continue;
        }
        for (uint32_t i = from; i < to; i++)
            if (o->operands[i] < nvalues) o->operands[i] = rebased(&r, o->operands[i]);
    }
    tl_free(r.memo);
}
