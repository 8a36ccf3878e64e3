/* Attention's K loop rotated, so that the tensor cores compute one block's P V while
 * the warps compute the next block's softmax (FlashAttention-3's overlap within a
 * warpgroup), on wgmma (sm_90a), for kernels launched with overlap = 1 (a launch key
 * like ws and persistent: `@launch(overlap = true)`, `-D overlap=1`, tuner spaces; off
 * by default until the H200 says when it pays). A kernel whose loops do not have the
 * shape below compiles as without it, and its printed launch keys drop it.
 *
 * require:   the GPU-level IR after passes/layout.c, before passes/shared.c
 * guarantee: a loop of the form
 *              for j in [lo, hi) step s iter(acc, x...) {
 *                  S = dot(Q, K(j), 0)              A: the scores and the softmax, which
 *                  ... x' = f(S, x), P, alpha ...      read no acc
 *                  O = dot(P, V(j), acc * alpha)    B: reads P, alpha, acc and V(j) only
 *                  yield O, x'... }
 *            (two wgmma dots, no stores, acc's rescale a product by a broadcast row
 *            vector or none) becomes
 *              for j in [lo - s, hi) step s iter(acc, x..., Pc = 0, ac = 1) {
 *                  a = acc * ac, V(j) masked to j >= lo           B of block j, but its dot
 *                  Sn = dot(Q, K(j + s) masked to j + s < hi, 0)  A of block j + 1: issued
 *                  O = dot(Pc, V(j), a)                           B's dot: issued
 *                  S = dot_wait 1 (Sn)                            S(j + 1) retired
 *                  ... x'' = f(S, x), alpha', P' in f32 ...      under the tensor cores' P V
 *                  O' = dot_wait 0 (O)                            P V(j) retired
 *                  P' = P' as bf16                 (P V(j) read the registers it takes)
 *                  yield O', select(j + s < hi, x'', x)..., P', alpha' }
 *            The loop starts one block early: that iteration's B adds P = 0 times a V of
 *            zeros to acc scaled by 1, exactly nothing; its last iteration's A is of a
 *            block past hi, whose statistics the selects drop. A masked block_load
 *            (the TMA form) reads past the tensor's end instead: zeros as well. Nothing is in flight
 *            between iterations, so the ring (passes/shared.c) is as for any loop of two
 *            dots. A dot whose result only dot_waits read leaves its group in flight
 *            (codegen/cg_wgmma.c). Every value is the one the original computes, in the
 *            same order per block: the interpreter (dot_wait is the identity there) runs
 *            both alike, bit for bit. */
#include "passes.h"

#include <stdint.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/layout.h"
#include "ir/target.h"

static bool const_of(const IrFunc *f, IrValue v, int64_t *out)
{
    const IrOp *d = f->values[v].def;
    if (!d || d->code != IR_OP_CONST || ir_value_type(f, v)->rank) return false;
    *out = d->attr.i;
    return true;
}

static bool is_zero_const(const IrFunc *f, IrValue v)
{
    const IrOp *d = f->values[v].def;
    if (!d || d->code != IR_OP_CONST) return false;
    const IrType *t = ir_value_type(f, v);
    return ir_elem_is_float(t->elem) ? d->attr.f == 0.0 : d->attr.i == 0;
}

static bool wgmma_acc(const IrType *t) { return t->layout && t->layout->kind == IR_LAYOUT_MMA && t->layout->version == 3; }

/* Uses of v in blk (and its regions) other than by `except`. */
static bool used(const IrBlock *blk, IrValue v, const IrOp *except)
{
    for (const IrOp *u = blk->first; u; u = u->next) {
        if (u != except)
            for (uint32_t i = 0; i < u->noperands; i++)
                if (u->operands[i] == v) return true;
        for (uint32_t r = 0; r < u->nregions; r++)
            if (used(&u->regions[r], v, except)) return true;
    }
    return false;
}

static IrValue splat_to(IrBuilder *b, IrValue s, const IrType *like, IrElem e)
{
    IrCtx *c = b->func->module->ctx;
    const IrType *t = ir_type_with_layout(c, ir_type_like(c, like, ir_type_scalar(c, e)), like->layout);
    return ir_build1(b, IR_OP_SPLAT, t, &s, 1);
}

/* ld (a load of the body) masked further by the scalar i1 `cond`: its mask and cond,
 * zeros where either is false. */
static void mask_load(IrFunc *f, IrOp *ld, IrValue cond)
{
    IrBuilder b;
    ir_builder_before(&b, ld);
    b.loc = ld->loc;
    const IrType *t = ir_value_type(f, ld->results[0]);
    IrValue m = splat_to(&b, cond, t, IR_I1);
    if (ld->noperands >= 2) m = ir_build_binary(&b, IR_OP_AND, ld->operands[1], m);
    IrValue other = ld->noperands >= 3 ? ld->operands[2]
                  : ir_elem_is_float(t->elem) ? ir_const_float(&b, t, 0) : ir_const_int(&b, t, 0);
    IrValue ops[3] = {ld->operands[0], m, other};
    IrValue *mem = arena_alloc(ir_ctx_arena(f->module->ctx), 3 * sizeof *mem);
    memcpy(mem, ops, sizeof ops);
    ld->operands = mem;
    ld->noperands = 3;
}

/* A block_load (bl, of the body) masked further by the scalar i1 `cond`: where cond is
 * false its first offset is the tensor's first extent, so that the whole block lies
 * past the tensor's end and is zeros (block_load's rule; TMA fills such a box with
 * zeros), as a masked load gives. */
static void mask_block_load(IrFunc *f, IrOp *bl, IrValue cond)
{
    IrBuilder b;
    ir_builder_before(&b, bl);
    b.loc = bl->loc;
    uint32_t rank = (uint32_t)ir_value_type(f, bl->results[0])->rank;
    IrValue off = bl->operands[1 + 2 * rank], end = bl->operands[1];
    const IrType *ot = ir_value_type(f, off);
    if (ir_value_type(f, end) != ot) end = ir_build1(&b, IR_OP_CONVERT, ot, &end, 1);
    IrValue so[3] = {cond, off, end};
    IrValue *mem = arena_alloc(ir_ctx_arena(f->module->ctx), bl->noperands * sizeof *mem);
    memcpy(mem, bl->operands, bl->noperands * sizeof *mem);
    mem[1 + 2 * rank] = ir_build1(&b, IR_OP_SELECT, ot, so, 3);
    bl->operands = mem;
}

typedef struct Rot {
    IrFunc *f;
    IrOp *loop, *d1, *d2;
    int ka;                          /* the yield operand (iter index) that d2's result is */
    IrValue bp, ba;                  /* what B reads of A: P (before its conversion) and alpha */
    bool *inA, *inB;                 /* per value (an op's first result): the op is in A, B */
} Rot;

/* v is read in blk by an op other than `except` and those marked in `skip` (by first
 * result). */
static bool used_but(const IrBlock *blk, IrValue v, const bool *skip, const IrOp *except)
{
    for (const IrOp *u = blk->first; u; u = u->next) {
        if (u == except || (u->nresults && skip[u->results[0]])) continue;
        for (uint32_t i = 0; i < u->noperands; i++)
            if (u->operands[i] == v) return true;
    }
    return false;
}

static IrValue wait1(IrBuilder *b, int n, IrValue v)
{
    const IrType *t = ir_value_type(b->func, v);
    IrOp *w = ir_build(b, IR_OP_DOT_WAIT, &v, 1, &t, 1, 0);
    w->attr.i = n;
    return w->results[0];
}

static IrOp *def_in(const IrFunc *f, IrValue v, const IrBlock *body)
{
    IrOp *d = f->values[v].def;
    return d && d->parent == body ? d : NULL;
}

/* Marks in `in` the ops of body that v depends on, stopping at `stop` values (those
 * are read, not computed); false if one reads `avoid` (a carried value that must not
 * be read) or writes memory or has regions. */
static bool mark(const IrFunc *f, const IrBlock *body, IrValue v, bool *in, const IrValue *stop, int nstop,
                 IrValue avoid, int depth)
{
    if (depth > 512) return false;
    if (v == avoid) return false;
    for (int i = 0; i < nstop; i++)
        if (stop[i] == v) return true;
    IrOp *d = def_in(f, v, body);
    if (!d || in[d->results[0]]) return true;
    if (d->nregions || (ir_op_info[d->code].flags & IR_W)) return false;
    in[d->results[0]] = true;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!mark(f, body, d->operands[i], in, stop, nstop, avoid, depth + 1)) return false;
    return true;
}

/* The loop's shape (see the file's comment), and the two groups of its body. */
static bool matches(IrFunc *f, IrOp *loop, Rot *r)
{
    IrBlock *body = &loop->regions[0];
    int64_t step;
    if (!const_of(f, loop->operands[2], &step) || step <= 0) return false;
    IrOp *dots[3];
    int nd = 0;
    const IrOp *y = body->last;
    if (!y || y->code != IR_OP_YIELD) return false;
    for (IrOp *op = body->first; op; op = op->next) {
        if (op->nregions || (ir_op_info[op->code].flags & IR_W) || op->code == IR_OP_DOT_WAIT)
            return false;
        if (op->code == IR_OP_DOT && nd < 3) dots[nd++] = op;
    }
    if (nd != 2) return false;
    IrOp *d1 = dots[0], *d2 = dots[1];
    if (!wgmma_acc(ir_value_type(f, d1->results[0])) || !wgmma_acc(ir_value_type(f, d2->results[0]))) return false;
    if (!is_zero_const(f, d1->operands[2])) return false;
    /* d2's result is yielded once and read by nothing else */
    int ka = -1;
    for (uint32_t i = 0; i < y->noperands; i++)
        if (y->operands[i] == d2->results[0]) {
            if (ka >= 0) return false;
            ka = (int)i;
        }
    if (ka < 0 || used(body, d2->results[0], y)) return false;
    IrValue acc = body->args[1 + ka];
    /* B: d2, V's chain (the induction variable and invariants only), acc's rescale by a
     * broadcast row vector alpha, P's conversion */
    IrValue bp = d2->operands[0], ba = IR_NO_VALUE;
    IrOp *pc = def_in(f, bp, body);
    if (pc && pc->code == IR_OP_CONVERT_LAYOUT) bp = pc->operands[0];
    IrValue a2 = d2->operands[2];
    if (a2 != acc) {
        IrOp *scale = def_in(f, a2, body);
        if (!scale || scale->code != IR_OP_MUL || (scale->operands[0] != acc && scale->operands[1] != acc)) return false;
        ba = scale->operands[scale->operands[0] == acc ? 1 : 0];
        for (IrOp *d; (d = def_in(f, ba, body)) &&
                      (d->code == IR_OP_BROADCAST || d->code == IR_OP_EXPAND_DIMS || d->code == IR_OP_CONVERT_LAYOUT);)
            ba = d->operands[0];
        if (!def_in(f, ba, body) && !ir_value_defined_in(f, ba, body)) ba = IR_NO_VALUE;   /* an invariant */
        if (ba != IR_NO_VALUE && !ir_elem_is_float(ir_value_type(f, ba)->elem)) return false;
    }
    bool *inA = tl_calloc(f->nvalues + 1, sizeof *inA), *inB = tl_calloc(f->nvalues + 1, sizeof *inB);
    if (!inA || !inB) tl_oom();
    IrValue stops[2] = {bp, ba};
    int nstop = ba != IR_NO_VALUE ? 2 : 1;
    bool ok = mark(f, body, d2->results[0], inB, stops, nstop, IR_NO_VALUE, 0);
    /* B reads no carried value but acc (V's chain: the induction variable and invariants) */
    for (IrOp *op = body->first; ok && op; op = op->next)
        if (op->nresults && inB[op->results[0]])
            for (uint32_t k = 0; k < op->noperands; k++)
                for (uint32_t i = 1; i < body->nargs; i++)
                    if (op->operands[k] == body->args[i] && (int)i != 1 + ka) ok = false;
    /* A: what the other carried values and B's reads of it need; it reads no acc */
    for (uint32_t i = 0; ok && i < y->noperands; i++)
        if ((int)i != ka) ok = mark(f, body, y->operands[i], inA, NULL, 0, acc, 0);
    if (ok) ok = mark(f, body, bp, inA, NULL, 0, acc, 0);
    if (ok && ba != IR_NO_VALUE) ok = mark(f, body, ba, inA, NULL, 0, acc, 0);
    ok = ok && inA[d1->results[0]] && !inA[d2->results[0]] && !inB[d1->results[0]];
    if (!ok) {
        tl_free(inA);
        tl_free(inB);
        return false;
    }
    *r = (Rot){f, loop, d1, d2, ka, bp, ba, inA, inB};
    return true;
}

static IrValue mapped(const IrValue *map, IrValue v) { return map[v] != IR_NO_VALUE ? map[v] : v; }

static bool rotate(Rot *r)
{
    IrFunc *f = r->f;
    IrCtx *c = f->module->ctx;
    IrOp *loop = r->loop;
    IrBlock *ob = &loop->regions[0];
    IrOp *oy = ob->last;
    IrValue lo = loop->operands[0], hi = loop->operands[1], step = loop->operands[2];
    uint32_t nold = f->nvalues, nargs = ob->nargs;
    /* the new loop: from lo - s, with P (zeros) and alpha (ones) carried */
    IrBuilder b;
    ir_builder_before(&b, loop);
    b.loc = loop->loc;
    IrValue lo2 = ir_build_binary(&b, IR_OP_SUB, lo, step);
    const IrType *pt = ir_value_type(f, r->bp);
    IrValue p0 = ir_elem_is_float(pt->elem) ? ir_const_float(&b, pt, 0) : ir_const_int(&b, pt, 0);
    IrValue a0 = r->ba != IR_NO_VALUE ? ir_const_float(&b, ir_value_type(f, r->ba), 1.0) : IR_NO_VALUE;
    uint32_t extra = a0 != IR_NO_VALUE ? 2 : 1, nin = loop->noperands + extra, nres = loop->nresults + extra;
    IrValue *ops = tl_calloc(nin, sizeof *ops);
    const IrType **rt = tl_calloc(nres, sizeof *rt);
    if (!ops || !rt) tl_oom();
    for (uint32_t i = 0; i < loop->noperands; i++) ops[i] = loop->operands[i];
    ops[0] = lo2;
    ops[loop->noperands] = p0;
    if (extra == 2) ops[loop->noperands + 1] = a0;
    for (uint32_t i = 0; i < loop->nresults; i++) rt[i] = ir_value_type(f, loop->results[i]);
    rt[loop->nresults] = pt;
    if (extra == 2) rt[loop->nresults + 1] = ir_value_type(f, a0);
    IrOp *nl = ir_build(&b, IR_OP_FOR, ops, nin, rt, nres, 1);
    nl->attr = loop->attr;
    IrBlock *nb = &nl->regions[0];
    IrValue *mapA = tl_malloc((nold + 1) * sizeof *mapA), *mapB = tl_malloc((nold + 1) * sizeof *mapB);
    if (!mapA || !mapB) tl_oom();
    for (uint32_t v = 0; v < nold; v++) mapA[v] = mapB[v] = IR_NO_VALUE;
    for (uint32_t i = 0; i < nargs; i++) {
        IrValue a = ir_block_add_arg(nb, ir_value_type(f, ob->args[i]), f->values[ob->args[i]].name);
        mapA[ob->args[i]] = mapB[ob->args[i]] = a;
    }
    IrValue pc = ir_block_add_arg(nb, pt, "p"), ac = extra == 2 ? ir_block_add_arg(nb, ir_value_type(f, a0), "alpha") : IR_NO_VALUE;
    IrValue iv = nb->args[0];
    mapB[r->bp] = pc;
    if (ac != IR_NO_VALUE) mapB[r->ba] = ac;
    IrBuilder e;
    ir_builder_at_end(&e, nb);
    e.loc = loop->loc;
    IrValue ivn = ir_build_binary(&e, IR_OP_ADD, iv, step);
    IrValue more = ir_build_cmp(&e, IR_CMP_LT, ivn, hi), later = ir_build_cmp(&e, IR_CMP_GE, iv, lo);
    mapA[ob->args[0]] = ivn;
    /* A's part up to S(j + 1), then B (block j), then the rest of A */
    bool *inS = tl_calloc(nold + 1, sizeof *inS);
    if (!inS) tl_oom();
    for (int i = 0; i < 3; i++) mark(f, ob, r->d1->operands[i], inS, NULL, 0, IR_NO_VALUE, 0);
    inS[r->d1->results[0]] = true;
    IrValue sn = IR_NO_VALUE, o = IR_NO_VALUE, od = IR_NO_VALUE;
    /* phases: B but its dot (V's view, acc's rescale, P's conversion: no instruction
     * but the wgmmas' own may define a wgmma's inputs between the two issues, or ptxas
     * serializes them, C7513); A up to S(j + 1); B's dot; then the rest of A */
    /* P's last op (its rounding to the dots' type) writes the registers that the
     * in-flight P V(j) reads as its A operand: it goes after P V(j)'s wait */
    IrOp *plast = def_in(f, r->bp, ob);
    if (plast && (plast->code != IR_OP_CONVERT || inS[plast->results[0]] || used_but(ob, r->bp, r->inB, oy)))
        plast = NULL;
    for (int phase = 0; phase < 5; phase++) {
        if (phase == 4) od = wait1(&e, 0, o);
        for (IrOp *op = ob->first; op && op != oy; op = op->next) {
            if (!op->nresults) continue;
            IrValue k = op->results[0];
            bool a = r->inA[k], bb = r->inB[k] || op == r->d2, b_side = phase == 0 || phase == 2;
            bool take = phase == 0 ? bb && op != r->d2
                      : phase == 1 ? a && inS[k]
                      : phase == 2 ? op == r->d2
                      : phase == 3 ? a && !inS[k] && op != plast : op == plast;
            if (!take) continue;
            IrOp *cl = ir_clone_op(&e, f, op, b_side ? mapB : mapA, nold);
            if (cl->code == IR_OP_LOAD || cl->code == IR_OP_BLOCK_LOAD) {
                if (cl->code == IR_OP_LOAD) mask_load(f, cl, b_side ? later : more);
                else mask_block_load(f, cl, b_side ? later : more);
                ir_builder_at_end(&e, nb);
            }
            if (op == r->d1) sn = cl->results[0];
            if (op == r->d2) o = cl->results[0];
        }
        if (phase == 2) {   /* S(j + 1) retired, P V(j) still in flight */
            IrValue sw = wait1(&e, 1, sn);
            mapA[r->d1->results[0]] = sw;
        }
    }
    /* the yield: O, the statistics of block j + 1 where it exists, P and alpha */
    IrValue *yops = arena_alloc(ir_ctx_arena(c), (oy->noperands + extra) * sizeof *yops);
    for (uint32_t i = 0; i < oy->noperands; i++) {
        if ((int)i == r->ka) {
            yops[i] = od;
            continue;
        }
        IrValue v = mapped(mapA, oy->operands[i]), old = nb->args[1 + i];
        const IrType *vt = ir_value_type(f, v);
        IrValue cnd = vt->rank ? splat_to(&e, more, vt, IR_I1) : more;
        IrValue so[3] = {cnd, v, old};
        yops[i] = ir_build1(&e, IR_OP_SELECT, vt, so, 3);
    }
    yops[oy->noperands] = mapped(mapA, r->bp);
    if (extra == 2) yops[oy->noperands + 1] = mapped(mapA, r->ba);
    ir_build(&e, IR_OP_YIELD, yops, oy->noperands + extra, NULL, 0, 0);
    for (uint32_t i = 0; i < loop->nresults; i++) ir_replace_all_uses(f, loop->results[i], nl->results[i]);
    ir_op_remove(loop);
    tl_free(ops);
    tl_free(rt);
    tl_free(mapA);
    tl_free(mapB);
    tl_free(inS);
    tl_free(r->inA);
    tl_free(r->inB);
    return true;
}

/* ---- loops of several dots: each issued as soon as its operands are ready, waited for
 * where its result is first read ------------------------------------------------------
 *
 * guarantee: an innermost loop of 3 or more wgmma dots (attention's backward: S and dP
 *            of a block, then dV and dK, or dQ) that `rotate` does not take, whose body
 *            writes no memory and has no regions, is reordered, each op moved, none
 *            changed: a dot goes as soon as its operands are computed; the other ops keep
 *            their order, except that those a dot not yet issued needs go first (so dV's
 *            P is converted, and dV issued, before dS is computed under it); an op that
 *            reads a dot in flight gets `dot_wait n` before it, n the dots issued since
 *            (they stay in flight; the wait passes every earlier dot still in flight
 *            through, and later reads take its results); the yield gets `dot_wait 0` of
 *            the rest, so nothing is in flight between iterations and the ring
 *            (passes/shared.c) is as for any loop of several dots. Every value is the one
 *            the original computes (dot_wait is the identity in the interpreter). Loops of
 *            two dots are rotate's (or ping-pong's: passes/warpspec.c turns only those). */
typedef struct Sched {
    IrFunc *f;
    IrOp **ops;                      /* the body's ops but the yield, in order */
    bool *placed;                    /* per op index */
    uint32_t *index;                 /* per value (first result): the op's index + 1, or 0 */
    IrOp **flight;                   /* dots issued and not yet waited for, in issue order */
    uint32_t nflight;
    IrOp *yield;
} Sched;

static bool placed_value(const Sched *s, IrValue v)
{
    uint32_t k = v < s->f->nvalues ? s->index[v] : 0;
    return !k || s->placed[k - 1];
}

static bool ready(const Sched *s, const IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++)
        if (!placed_value(s, op->operands[i])) return false;
    return true;
}

/* Marks in `need` the ops (by index) that the unplaced op k depends on, itself included. */
static void cone(const Sched *s, uint32_t k, bool *need)
{
    if (need[k] || s->placed[k]) return;
    need[k] = true;
    for (uint32_t i = 0; i < s->ops[k]->noperands; i++) {
        uint32_t d = s->ops[k]->operands[i] < s->f->nvalues ? s->index[s->ops[k]->operands[i]] : 0;
        if (d) cone(s, d - 1, need);
    }
}

/* The position in flight of the last dot in flight that op reads, or -1. */
static int waits(const Sched *s, const IrOp *op)
{
    int last = -1;
    for (uint32_t q = 0; q < s->nflight; q++)
        for (uint32_t i = 0; i < op->noperands; i++)
            if (op->operands[i] == s->flight[q]->results[0]) last = (int)q;
    return last;
}

/* Before `op` (placed next): a dot_wait for the dots in flight it reads, retiring them
 * and every dot issued before them. */
static void wait_for(Sched *s, const IrOp *op)
{
    int last = op ? waits(s, op) : (int)s->nflight - 1;
    if (last < 0) return;
    IrValue vs[8];
    const IrType *ts[8];
    uint32_t n = 0;
    for (int q = 0; q <= last; q++) {
        vs[n] = s->flight[q]->results[0];
        ts[n] = ir_value_type(s->f, vs[n]);
        n++;
    }
    IrBuilder b;
    ir_builder_before(&b, s->yield);
    b.loc = op ? op->loc : s->yield->loc;
    IrOp *w = ir_build(&b, IR_OP_DOT_WAIT, vs, n, ts, n, 0);
    w->attr.i = (int64_t)s->nflight - 1 - last;
    for (uint32_t i = 0; i < n; i++) {
        ir_replace_all_uses(s->f, vs[i], w->results[i]);
        w->operands[i] = vs[i];
    }
    memmove(s->flight, s->flight + last + 1, (s->nflight - (uint32_t)last - 1) * sizeof *s->flight);
    s->nflight -= (uint32_t)last + 1;
}

static void place(Sched *s, uint32_t k)
{
    IrOp *op = s->ops[k];
    wait_for(s, op);   /* (a dot reading one in flight, as its accumulator, waits too) */
    ir_op_remove(op);
    ir_op_insert_before(op, s->yield);
    s->placed[k] = true;
    if (op->code == IR_OP_DOT) s->flight[s->nflight++] = op;
}

static bool schedule(IrFunc *f, IrOp *loop)
{
    IrBlock *body = &loop->regions[0];
    int64_t step;
    IrOp *y = body->last;
    if (!const_of(f, loop->operands[2], &step) || step <= 0 || !y || y->code != IR_OP_YIELD) return false;
    uint32_t n = 0, ndots = 0;
    for (IrOp *op = body->first; op != y; op = op->next) {
        if (op->nregions || (ir_op_info[op->code].flags & IR_W) || op->code == IR_OP_DOT_WAIT || op->nresults > 1)
            return false;
        if (op->code == IR_OP_DOT) {
            if (!wgmma_acc(ir_value_type(f, op->results[0]))) return false;
            ndots++;
        }
        n++;
    }
    if (ndots < 3 || ndots > 8) return false;
    Sched s = {f, tl_calloc(n, sizeof(IrOp *)), tl_calloc(n, sizeof(bool)),
               tl_calloc(f->nvalues + 1, sizeof(uint32_t)), tl_calloc(ndots, sizeof(IrOp *)), 0, y};
    bool *need = tl_calloc(n, sizeof *need);
    if (!s.ops || !s.placed || !s.index || !s.flight || !need) tl_oom();
    uint32_t k = 0;
    for (IrOp *op = body->first; op != y; op = op->next) {
        s.ops[k] = op;
        if (op->nresults) s.index[op->results[0]] = k + 1;
        k++;
    }
    for (uint32_t left = n; left > 0; left--) {
        /* the cone of the dots not yet issued */
        memset(need, 0, n * sizeof *need);
        for (uint32_t i = 0; i < n; i++)
            if (!s.placed[i] && s.ops[i]->code == IR_OP_DOT) cone(&s, i, need);
        /* in this order: a dot that waits for none in flight; an op of the cone that
         * waits for none; any op that waits for none; the op of the cone, then any op,
         * whose wait retires the fewest dots */
        int pick = -1, best = INT32_MAX;
        for (int pass = 0; pass < 3 && pick < 0; pass++)
            for (uint32_t i = 0; i < n && pick < 0; i++)
                if (!s.placed[i] && ready(&s, s.ops[i]) && waits(&s, s.ops[i]) < 0 &&
                    (pass == 0 ? s.ops[i]->code == IR_OP_DOT : pass == 1 ? need[i] : true))
                    pick = (int)i;
        for (int pass = 0; pass < 2 && pick < 0; pass++)
            for (uint32_t i = 0; i < n; i++) {
                int w = !s.placed[i] && (pass || need[i]) && ready(&s, s.ops[i]) ? waits(&s, s.ops[i]) : INT32_MAX;
                if (w < best) {
                    best = w;
                    pick = (int)i;
                }
            }
        if (pick < 0) break;   /* (cannot happen: the body is in order) */
        place(&s, (uint32_t)pick);
    }
    wait_for(&s, NULL);
    tl_free(s.ops);
    tl_free(s.placed);
    tl_free(s.index);
    tl_free(s.flight);
    tl_free(need);
    return true;
}

typedef struct Loops {
    IrOp **v;
    uint32_t n, cap;
} Loops;

static bool inner(const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next)
        if (op->code == IR_OP_FOR || op->code == IR_OP_WHILE || op->nregions) return false;
    return true;
}

static void collect(IrOp *op, void *ud)
{
    Loops *l = ud;
    if (op->code != IR_OP_FOR || !inner(&op->regions[0])) return;
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = tl_realloc(l->v, l->cap * sizeof *l->v);
        if (!l->v) tl_oom();
    }
    l->v[l->n++] = op;
}

bool pass_rotate(IrFunc *f)
{
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    if (!f->overlap || f->kind != IR_FUNC_KERNEL) return false;
    bool changed = false;
    if (t->wgmma && t->cp_async && f->stages >= 2) {   /* wgmma needs the ring's views */
        Loops loops = {0};
        ir_walk(&f->body, collect, &loops);
        for (uint32_t i = 0; i < loops.n; i++) {
            Rot r;
            if (matches(f, loops.v[i], &r)) changed |= rotate(&r);
            else changed |= schedule(f, loops.v[i]);
        }
        tl_free(loops.v);
    }
    if (changed) return true;
    f->overlap = 0;   /* the printed launch keys say what was done: a change too */
    return true;
}
