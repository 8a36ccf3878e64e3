/* Axis analysis (see axisinfo.h): contiguity, divisibility and constancy per value and
 * axis, computed forward over the ops in program order, as Triton's AxisInfo does.
 *
 * Every fact is a power of two. Values nothing is known about (loads, loop-carried
 * values, results of ops without a rule) get the neutral facts: contiguity 1,
 * divisibility 1, constancy 1 (a scalar is trivially constant). Example:
 *   %pid = program_id 0          div 1
 *   %b   = mul %pid, 1024        div 1024
 *   %o   = add splat(%b), arange contiguity 1024, divisibility 1024
 *   %p   = addptr splat(%x), %o  %x aligned to 16: contiguity 1024, divisibility 16 (bytes)
 *   %m   = cmp lt %o, splat(%n)  %n a multiple of 16: constancy 16 */
#include "ir/axisinfo.h"

#include "ir/arena.h"

static int64_t pow2_floor(int64_t v)
{
    int64_t p = 1;
    while (p <= v / 2) p *= 2;
    return p;
}

/* The largest power of two dividing v (AXIS_MAX_DIV for 0). */
static int64_t pow2_div(int64_t v)
{
    if (v == 0) return AXIS_MAX_DIV;
    uint64_t u = (uint64_t)v;
    int64_t p = (int64_t)(u & (~u + 1));
    return p > AXIS_MAX_DIV || p <= 0 ? AXIS_MAX_DIV : p;
}

static int64_t gcd2(int64_t a, int64_t b) { return a < b ? a : b; }   /* powers of two */
static int64_t max2(int64_t a, int64_t b) { return a > b ? a : b; }

/* Where c is at least the contiguity, positions that are multiples of c are group
 * starts and the divisibility holds there; inside a contiguous group the values at
 * multiples of c are start + m*c, multiples of gcd(divisibility, c). */
int64_t axisinfo_div_at(const AxisInfo *a, int d, int64_t c)
{
    return c >= a->contiguity[d] ? a->divisibility[d] : gcd2(a->divisibility[d], c);
}

/* What holds for every element: a divisibility along an axis of contiguity 1. */
static int64_t elem_div(const AxisInfo *a, int naxes)
{
    int64_t g = 1;
    for (int d = 0; d < naxes; d++)
        if (a->contiguity[d] == 1) g = max2(g, a->divisibility[d]);
    return g;
}

static int64_t dim(const IrType *t, int d) { return t->rank ? t->shape[d] : 1; }
static int nax(const IrType *t) { return t->rank ? t->rank : 1; }

static AxisInfo neutral(const IrType *t)
{
    AxisInfo a;
    for (int d = 0; d < IR_MAX_RANK; d++) {
        a.contiguity[d] = 1;
        a.divisibility[d] = 1;
        a.constancy[d] = 1;
    }
    return a;
}

static AxisInfo splat_of(const AxisInfo *s, const IrType *t)
{
    AxisInfo a = neutral(t);
    for (int d = 0; d < nax(t); d++) {
        a.divisibility[d] = s->divisibility[0];
        a.constancy[d] = dim(t, d);
    }
    return a;
}

typedef struct Ctx {
    const IrFunc *f;
    AxisInfo *ai;
} Ctx;

static const AxisInfo *opnd(const Ctx *c, const IrOp *op, uint32_t k) { return &c->ai[op->operands[k]]; }

/* add, sub, addptr: a contiguous side plus a side constant over the same groups stays
 * contiguous; the divisibility at the result's group starts is the gcd of both sides'
 * there (axisinfo_div_at; the offset scaled to bytes for pointers). */
static AxisInfo add_like(const Ctx *c, const IrOp *op, const IrType *t, int64_t scale)
{
    const AxisInfo *x = opnd(c, op, 0), *y = opnd(c, op, 1);
    AxisInfo a = neutral(t);
    bool sub = op->code == IR_OP_SUB;
    for (int d = 0; d < nax(t); d++) {
        int64_t cx = gcd2(x->contiguity[d], y->constancy[d]);
        int64_t cy = sub ? 1 : gcd2(x->constancy[d], y->contiguity[d]);
        a.contiguity[d] = max2(cx, cy);
        int64_t yd = axisinfo_div_at(y, d, a.contiguity[d]);
        int64_t dy = yd >= AXIS_MAX_DIV / scale ? AXIS_MAX_DIV : yd * scale;
        a.divisibility[d] = gcd2(axisinfo_div_at(x, d, a.contiguity[d]), dy);
        a.constancy[d] = gcd2(x->constancy[d], y->constancy[d]);
    }
    return a;
}

/* A product is contiguous nowhere, so its divisibility speaks of every element: the
 * product of what holds for every element of each side ([64, 65, ...] * 2 is only
 * even, whatever divides 64). */
static AxisInfo mul_info(const Ctx *c, const IrOp *op, const IrType *t)
{
    const AxisInfo *x = opnd(c, op, 0), *y = opnd(c, op, 1);
    AxisInfo a = neutral(t);
    for (int d = 0; d < nax(t); d++) {
        int64_t p = axisinfo_div_at(x, d, 1) * axisinfo_div_at(y, d, 1);   /* both <= 2^30 */
        a.divisibility[d] = p > AXIS_MAX_DIV ? AXIS_MAX_DIV : p;
        a.constancy[d] = gcd2(x->constancy[d], y->constancy[d]);
    }
    return a;
}

/* A comparison of a side contiguous over aligned groups of g with a side constant over
 * them is constant over those groups when both the contiguous run's start and the
 * constant are multiples of g, and the comparison splits at the constant itself: the
 * run a, a+1, ..., a+g-1 lies wholly below b or wholly at or above it, so `run < b` and
 * `run >= b` (`b > run`, `b <= run`) hold for all of it or none. `run <= b` and `run >
 * b` split at b + 1, which is no multiple of g: [0..63] <= 0 changes at its second
 * element. Both divisibilities count: [1..64] < 64 and [0..63] < 63 change inside a
 * group of 64 too. */
static int64_t cmp_group(const AxisInfo *run, const AxisInfo *cst, int d)
{
    int64_t g = gcd2(run->contiguity[d], cst->constancy[d]);
    return gcd2(g, gcd2(axisinfo_div_at(run, d, g), axisinfo_div_at(cst, d, g)));
}

static AxisInfo cmp_info(const Ctx *c, const IrOp *op, const IrType *t)
{
    const AxisInfo *x = opnd(c, op, 0), *y = opnd(c, op, 1);
    AxisInfo a = neutral(t);
    bool splits_at_run_left = op->attr.i == IR_CMP_LT || op->attr.i == IR_CMP_GE;    /* x < y, x >= y */
    bool splits_at_run_right = op->attr.i == IR_CMP_GT || op->attr.i == IR_CMP_LE;   /* y > x, y <= x */
    for (int d = 0; d < nax(t); d++) {
        int64_t k = gcd2(x->constancy[d], y->constancy[d]);
        if (splits_at_run_left) k = max2(k, cmp_group(x, y, d));
        if (splits_at_run_right) k = max2(k, cmp_group(y, x, d));
        a.constancy[d] = k;
    }
    return a;
}

/* Element-wise ops without a better rule keep only the common constancy. */
static AxisInfo ew_info(const Ctx *c, const IrOp *op, const IrType *t)
{
    AxisInfo a = neutral(t);
    /* an integer minimum, maximum or select is one of its operands: a multiple of what
     * both are multiples of (attention's loop bounds, minimum((pn + 1) * BN, ...): the
     * loop from there keeps its index a multiple of the block, and its loads vectors) */
    bool pick = ir_elem_is_int(t->elem) && (op->code == IR_OP_MINIMUM || op->code == IR_OP_MAXIMUM);
    if (t->rank == 0) {
        if (pick || (op->code == IR_OP_SELECT && ir_elem_is_int(t->elem))) {
            int k = op->code == IR_OP_SELECT;
            a.divisibility[0] = gcd2(opnd(c, op, k)->divisibility[0], opnd(c, op, k + 1)->divisibility[0]);
        }
        return a;
    }
    if (pick)   /* element by element: contiguity none, each element's divisibility */
        for (int d = 0; d < nax(t); d++)
            a.divisibility[d] = gcd2(axisinfo_div_at(opnd(c, op, 0), d, 1), axisinfo_div_at(opnd(c, op, 1), d, 1));
    for (int d = 0; d < nax(t); d++) {
        int64_t k = dim(t, d);
        for (uint32_t i = 0; i < op->noperands; i++) k = gcd2(k, opnd(c, op, i)->constancy[d]);
        a.constancy[d] = k;
    }
    if (op->code != IR_OP_SELECT) return a;
    const AxisInfo *cond = opnd(c, op, 0), *x = opnd(c, op, 1), *y = opnd(c, op, 2);
    for (int d = 0; d < nax(t); d++) {   /* either side, switched only between groups */
        a.contiguity[d] = gcd2(gcd2(x->contiguity[d], y->contiguity[d]), cond->constancy[d]);
        a.divisibility[d] = gcd2(axisinfo_div_at(x, d, a.contiguity[d]), axisinfo_div_at(y, d, a.contiguity[d]));
    }
    return a;
}

static AxisInfo shape_info(const Ctx *c, const IrOp *op, const IrType *t)
{
    const AxisInfo *x = opnd(c, op, 0);
    const IrType *st = ir_value_type(c->f, op->operands[0]);
    AxisInfo a = neutral(t);
    switch (op->code) {
    case IR_OP_SPLAT: return splat_of(x, t);
    case IR_OP_EXPAND_DIMS: {   /* the new axis has size 1: its facts are every element's */
        int p = (int)op->attr.i, s = 0;
        for (int d = 0; d < t->rank; d++) {
            if (d == p) {
                a.divisibility[d] = elem_div(x, nax(st));
                continue;
            }
            a.contiguity[d] = x->contiguity[s];
            a.divisibility[d] = x->divisibility[s];
            a.constancy[d] = x->constancy[s];
            s++;
        }
        return a;
    }
    case IR_OP_BROADCAST:
        for (int d = 0; d < t->rank; d++) {
            bool grown = st->shape[d] == 1 && t->shape[d] != 1;
            a.contiguity[d] = grown ? 1 : x->contiguity[d];
            a.divisibility[d] = x->divisibility[d];
            a.constancy[d] = grown ? t->shape[d] : x->constancy[d];
        }
        return a;
    default: return a;
    }
}

static AxisInfo hint_info(const Ctx *c, const IrOp *op, const IrType *t)
{
    AxisInfo a = *opnd(c, op, 0);
    int64_t n = pow2_div(op->attr.i);
    int last = nax(t) - 1;
    if (op->code == IR_OP_MULTIPLE_OF) {
        for (int d = 0; d < nax(t); d++) a.divisibility[d] = max2(a.divisibility[d], n);
    } else {
        a.contiguity[last] = max2(a.contiguity[last], pow2_floor(op->attr.i < dim(t, last) ? op->attr.i : dim(t, last)));
    }
    return a;
}

static AxisInfo op_info(const Ctx *c, const IrOp *op, const IrType *t)
{
    AxisInfo a = neutral(t);
    switch (op->code) {
    case IR_OP_CONST:
        for (int d = 0; d < nax(t); d++) {
            a.divisibility[d] = ir_elem_is_int(t->elem) ? pow2_div(op->attr.i) : 1;
            a.constancy[d] = dim(t, d);
        }
        return a;
    case IR_OP_ARANGE:
        a.contiguity[0] = t->shape[0];
        a.divisibility[0] = pow2_div(op->attr.i);
        return a;
    case IR_OP_SPLAT: case IR_OP_EXPAND_DIMS: case IR_OP_BROADCAST: return shape_info(c, op, t);
    case IR_OP_ADD: case IR_OP_SUB:
        return ir_elem_is_int(t->elem) ? add_like(c, op, t, 1) : ew_info(c, op, t);
    case IR_OP_ADDPTR: return add_like(c, op, t, ir_elem_bytes(t->pointee));
    case IR_OP_MUL: return ir_elem_is_int(t->elem) ? mul_info(c, op, t) : ew_info(c, op, t);
    case IR_OP_CMP: return cmp_info(c, op, t);
    case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS: return hint_info(c, op, t);
    case IR_OP_CONVERT:
        if (ir_elem_is_int(t->elem) && ir_elem_is_int(ir_value_type(c->f, op->operands[0])->elem) &&
            ir_elem_bits(t->elem) >= ir_elem_bits(ir_value_type(c->f, op->operands[0])->elem))
            return *opnd(c, op, 0);               /* widening keeps every fact */
        return ew_info(c, op, t);
    default:
        if (ir_op_info[op->code].flags & IR_E) return ew_info(c, op, t);
        return a;
    }
}

/* What holds for both of two values: the weaker contiguity and constancy, and the
 * divisibility both have at the group starts of that contiguity (an arange, contiguous
 * from a multiple of 64, or 64 * arange: contiguous by 1, so divisible by 1). */
static AxisInfo meet(const AxisInfo *x, const AxisInfo *y)
{
    AxisInfo a;
    for (int d = 0; d < IR_MAX_RANK; d++) {
        a.contiguity[d] = gcd2(x->contiguity[d], y->contiguity[d]);
        a.divisibility[d] = gcd2(axisinfo_div_at(x, d, a.contiguity[d]), axisinfo_div_at(y, d, a.contiguity[d]));
        a.constancy[d] = gcd2(x->constancy[d], y->constancy[d]);
    }
    return a;
}

/* Result i of an `if`: what holds for the values both regions yield (a pointer chosen
 * among aligned parameters stays aligned: a horizontal GEMM's weight, graph_lower.c). */
static AxisInfo if_result(const Ctx *c, const IrOp *op, uint32_t i, const IrType *t)
{
    const IrOp *y0 = op->regions[0].last, *y1 = op->nregions > 1 ? op->regions[1].last : NULL;
    if (!y0 || !y1 || y0->code != IR_OP_YIELD || y1->code != IR_OP_YIELD || i >= y0->noperands || i >= y1->noperands)
        return neutral(t);
    return meet(&c->ai[y0->operands[i]], &c->ai[y1->operands[i]]);
}

/* In program order: a control-flow op's region arguments (neutral, but a for loop's
 * induction variable), its regions, then its results (an `if`'s from its yields). */
static void walk(Ctx *c, const IrBlock *body)
{
    for (const IrOp *op = body->first; op; op = op->next) {
        for (uint32_t r = 0; r < op->nregions; r++) {
            const IrBlock *blk = &op->regions[r];
            for (uint32_t i = 0; i < blk->nargs; i++) c->ai[blk->args[i]] = neutral(ir_value_type(c->f, blk->args[i]));
        }
        if (op->code == IR_OP_FOR && op->regions[0].nargs > 0) {   /* iv = lo + k * step */
            int64_t dv = gcd2(opnd(c, op, 0)->divisibility[0], opnd(c, op, 2)->divisibility[0]);
            c->ai[op->regions[0].args[0]].divisibility[0] = dv;
        }
        for (uint32_t r = 0; r < op->nregions; r++) walk(c, &op->regions[r]);
        for (uint32_t i = 0; i < op->nresults; i++) {
            const IrType *t = ir_value_type(c->f, op->results[i]);
            c->ai[op->results[i]] = op->code == IR_OP_IF ? if_result(c, op, i, t)
                                    : op->nresults == 1 && !(ir_op_info[op->code].flags & IR_K) ? op_info(c, op, t)
                                                                                                 : neutral(t);
        }
    }
}

AxisInfo *axisinfo_analyze(const IrFunc *f, uint64_t aligned_params)
{
    AxisInfo *ai = tl_calloc(f->nvalues ? f->nvalues : 1, sizeof *ai);
    if (!ai) return NULL;
    for (uint32_t v = 0; v < f->nvalues; v++) ai[v] = neutral(f->values[v].type);
    for (uint32_t i = 0; i < f->body.nargs; i++) {
        IrValue p = f->body.args[i];
        if (ir_value_type(f, p)->elem == IR_PTR && i < 64 && (aligned_params >> i & 1))
            ai[p].divisibility[0] = 16;
    }
    Ctx c = {f, ai};
    walk(&c, &f->body);
    return ai;
}
