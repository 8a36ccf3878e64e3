/* Warp specialization: a producer warpgroup issues a TMA ring's copies (sm_90a,
 * @launch(ws = true)).
 *
 * requires:   the GPU-level IR after passes/shared.c: a kernel-body `for` whose ring is
 *             filled by tma_copy (the prologue's copies before it, the copies of
 *             iteration j + S-1 and the issuing thread's empty-slot `tma_wait 1` in it)
 * guarantees: those copies and waits move into one `producer` op right after the last
 *             mbarrier_init, as its own `for` over the same range (one iteration per
 *             stage, S slots ahead of the consumers, paced by the empty barriers; no
 *             prologue); the consumers keep the full-slot `tma_wait 0`, the dots and the
 *             `mbarrier_arrive` that release a slot. The arithmetic that only the copies
 *             used becomes dead (the pipeline's dce removes it).
 *
 *   before                                   after
 *   mbarrier_init 2 %full                    mbarrier_init 2 %full
 *   mbarrier_init 8 %empty                   mbarrier_init 8 %empty
 *   tma_copy %a, 0, %full, ... (k = lo)      producer 40 232 {
 *   ...      (iterations 1 .. S-2)             for %k2 = lo, hi, step {
 *   for %k = lo, hi, step iter(%acc) {           (iteration j of %k2, as %k + (S-1) step)
 *     tma_wait 0 %full, j % S, j / S % 2         tma_wait 1 %empty, j % S, ..., j >= S
 *     ... dot ...                                tma_copy %a, j % S, %full, ... %k2
 *     mbarrier_arrive %empty, (j-1) % S, j > 0 }
 *     tma_wait 1 %empty, (j-1) % S, ...        yield
 *     tma_copy %a, (j-1) % S, %full, ...     }
 *   }                                        for %k = lo, hi, step iter(%acc) {
 *                                              tma_wait 0 ...; ... dot ...; mbarrier_arrive ...
 *                                            }
 *
 * The producer's iteration for %k2 is the consumers' iteration %k = %k2 - (S-1) step
 * refilling a slot: its ops are the loop's copy side cloned with %k replaced by that
 * value, so the slot, the phase it waits for and the predicates are the ones the
 * single-warpgroup ring computes (for %k2 < lo + (S-1) step the wait's predicate is
 * false: the slot was never used). Codegen (cg_control.c, cg_producer) runs the region
 * on one thread of an extra warpgroup after the program's warps, with setmaxnreg giving
 * it the registers of the attribute's first count and the consumers the second; the
 * program's barriers after the producer count the consumers only.
 *
 * Not specialized (the kernel compiles as without ws): no TMA ring in the kernel body,
 * more than one, warps not a multiple of 4 (setmaxnreg is per warpgroup), a copy side
 * that reads a value the loop carries, or an op before the ring that is not pure,
 * local_alloc or mbarrier_init (the producer's warps run everything before it). */
#include <string.h>

#include "passes/passes.h"
#include "ir/arena.h"

#define PRODUCER_REGS 40

/* The consumers' registers: what the register file (64K) leaves after the producer
 * warpgroup's, per consumer thread, in multiples of 8, at most 240. */
static int consumer_regs(int warps)
{
    int r = (65536 - PRODUCER_REGS * 128) / (32 * warps) / 8 * 8;
    return r > 240 ? 240 : r;
}

static bool has_copy(const IrOp *loop)
{
    for (const IrOp *o = loop->regions[0].first; o; o = o->next)
        if (o->code == IR_OP_TMA_COPY) return true;
    return false;
}

typedef struct Ws {
    IrFunc *f;
    IrOp *loop;
    bool *need;                  /* per value: the copy side computes it (in the body) */
    bool *before;                /* per value: defined in the kernel body before the producer */
    IrValue *map;                /* per value: its clone in the producer */
    uint32_t nmap;               /* the values of the kernel as it was (map's length) */
} Ws;

/* The map and the marks are indexed by the values of the loop as it was (clones get
 * new ids past them, never looked up). Marks the body op defining v and its operands; false if the copy side would read a
 * carried value or an op that is not pure and scalar. */
static bool mark(Ws *w, IrValue v)
{
    const IrValueInfo *vi = &w->f->values[v];
    const IrBlock *body = &w->loop->regions[0];
    if (!vi->def) return vi->block != body || vi->index == 0;    /* outside, or the iv */
    if (vi->def->parent != body) return true;                    /* defined outside the loop */
    if (w->need[v]) return true;
    const IrOp *d = vi->def;
    if (!(ir_op_info[d->code].flags & IR_P) || d->nregions || ir_value_type(w->f, v)->rank) return false;
    w->need[v] = true;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!mark(w, d->operands[i])) return false;
    return true;
}

static bool copy_side(const IrOp *op) { return op->code == IR_OP_TMA_COPY || (op->code == IR_OP_TMA_WAIT && op->attr.i == 1); }

/* A value the producer reads from outside the loop must be defined before `at` (the
 * producer's place); a pure scalar op of the kernel body after it moves before it. */
static bool available(Ws *w, IrValue v, IrOp *at)
{
    const IrValueInfo *vi = &w->f->values[v];
    if (!vi->def) return vi->block == &w->f->body;               /* a parameter */
    IrOp *d = vi->def;
    if (d->parent != &w->f->body) return false;
    if (w->before[v]) return true;
    if (!(ir_op_info[d->code].flags & IR_P) || d->nregions || ir_value_type(w->f, v)->rank) return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!available(w, d->operands[i], at)) return false;
    ir_op_remove(d);
    ir_op_insert_before(d, at);
    for (uint32_t i = 0; i < d->nresults; i++) w->before[d->results[i]] = true;
    return true;
}

static bool specialize(IrFunc *f, IrOp *loop)
{
    IrBlock *body = &loop->regions[0];
    /* one ring: every copy in the loop fills the barriers of the first, and the issuing
     * thread waits for an empty slot once per iteration */
    IrValue bars = IR_NO_VALUE;
    int slots = 0;
    uint32_t nloop = 0, npro = 0, nwait = 0;
    for (const IrOp *o = body->first; o; o = o->next) {
        if (o->code == IR_OP_BARRIER || o->noperands > 32 || o->nresults > 4) return false;
        if (o->code == IR_OP_TMA_COPY) {
            if (bars == IR_NO_VALUE) {
                bars = o->operands[2];
                slots = ir_value_type(f, o->operands[0])->shape[0];
            }
            if (o->operands[2] != bars) return false;
            nloop++;
        }
        nwait += o->code == IR_OP_TMA_WAIT && o->attr.i == 1;
    }
    IrOp *last_init = NULL;
    for (IrOp *o = f->body.first; o && o != loop; o = o->next) {
        if (o->code == IR_OP_TMA_COPY) {
            if (o->operands[2] != bars) return false;
            npro++;
        }
        if (o->code == IR_OP_MBARRIER_INIT) last_init = o;
    }
    if (!last_init || nwait != 1 || npro != nloop * (uint32_t)(slots - 1)) return false;
    for (IrOp *o = f->body.first; o != last_init->next; o = o->next) {
        unsigned fl = ir_op_info[o->code].flags;
        if (!(fl & IR_P) && o->code != IR_OP_LOCAL_ALLOC && o->code != IR_OP_MBARRIER_INIT) return false;
    }
    IrOp *at = last_init->next;
    Ws w = {f, loop, tl_calloc(f->nvalues, sizeof(bool)), tl_calloc(f->nvalues, sizeof(bool)),
            tl_malloc(f->nvalues * sizeof(IrValue)), f->nvalues};
    if (!w.need || !w.before || !w.map) tl_oom();
    memset(w.map, 0xff, f->nvalues * sizeof(IrValue));
    for (const IrOp *o = f->body.first; o != at; o = o->next)
        for (uint32_t i = 0; i < o->nresults; i++) w.before[o->results[i]] = true;
    bool ok = true;
    for (const IrOp *o = body->first; o && ok; o = o->next)
        if (copy_side(o))
            for (uint32_t i = 0; i < o->noperands && ok; i++) ok = mark(&w, o->operands[i]);
    /* the values from outside: the bounds, and what the marked ops and the copies read */
    for (uint32_t i = 0; i < 3 && ok; i++) ok = available(&w, loop->operands[i], at);
    for (const IrOp *o = body->first; o && ok; o = o->next) {
        if (!copy_side(o) && !(o->nresults && w.need[o->results[0]])) continue;
        for (uint32_t i = 0; i < o->noperands && ok; i++) {
            const IrValueInfo *vi = &f->values[o->operands[i]];
            bool inside = vi->def ? vi->def->parent == body : vi->block == body;
            if (!inside) ok = available(&w, o->operands[i], at);
        }
    }
    if (!ok) {
        tl_free(w.need);
        tl_free(w.before);
        tl_free(w.map);
        return false;
    }
    IrBuilder b;
    ir_builder_before(&b, at);
    b.loc = loop->loc;
    IrOp *prod = ir_build(&b, IR_OP_PRODUCER, NULL, 0, NULL, 0, 1);
    prod->attr.i = PRODUCER_REGS | (int64_t)consumer_regs(f->warps) << 16;
    IrBlock *pr = &prod->regions[0];
    IrBuilder pb;
    ir_builder_at_end(&pb, pr);
    pb.loc = loop->loc;
    IrValue bounds[3] = {loop->operands[0], loop->operands[1], loop->operands[2]};
    IrOp *pf = ir_build(&pb, IR_OP_FOR, bounds, 3, NULL, 0, 1);
    IrBlock *pbody = &pf->regions[0];
    const IrType *ivt = ir_value_type(f, loop->operands[0]);
    IrValue iv2 = ir_block_add_arg(pbody, ivt, "k");
    IrBuilder lb;
    ir_builder_at_end(&lb, pbody);
    lb.loc = loop->loc;
    /* the consumers' iteration this one refills for: %k = %k2 - (S-1) * step */
    IrValue back = ir_build1(&lb, IR_OP_MUL, ivt, (IrValue[]){loop->operands[2], ir_const_int(&lb, ivt, slots - 1)}, 2);
    w.map[body->args[0]] = ir_build1(&lb, IR_OP_SUB, ivt, (IrValue[]){iv2, back}, 2);
    for (IrOp *o = body->first, *next; o; o = next) {
        next = o->next;
        if (!copy_side(o) && !(o->nresults && w.need[o->results[0]])) continue;
        ir_clone_op(&lb, f, o, w.map, w.nmap);
        if (copy_side(o)) ir_op_remove(o);
    }
    ir_build(&lb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
    ir_build(&pb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
    for (IrOp *o = f->body.first, *next; o && o != loop; o = next) {
        next = o->next;
        if (o->code == IR_OP_TMA_COPY) ir_op_remove(o);
    }
    tl_free(w.need);
    tl_free(w.before);
    tl_free(w.map);
    return true;
}

bool pass_warpspec(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL || !f->ws || (f->warps > 0 ? f->warps : 4) % 4) return false;
    IrOp *loop = NULL;
    for (IrOp *o = f->body.first; o; o = o->next) {
        if (o->code == IR_OP_PRODUCER) return false;
        if (o->code != IR_OP_FOR || !has_copy(o)) continue;
        if (loop) return false;          /* two rings: not yet */
        loop = o;
    }
    return loop && specialize(f, loop);
}
