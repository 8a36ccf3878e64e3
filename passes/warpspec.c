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
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "passes/passes.h"
#include "ir/arena.h"
#include "ir/target.h"

static const TileTarget *target_of(const IrFunc *f)
{
    return f->module->target ? f->module->target : tile_target_default();
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
    IrOp *tail;                  /* the producer goes after it (the last mbarrier_init, then
                                  * the last op moved before the producer) */
    uint32_t nmap;               /* the values of the kernel as it was (map's length) */
    bool moved;                  /* available() moved an op: a change, even when the pass
                                  * then gives up */
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

/* A value the producer reads from outside the loop must be defined before the producer,
 * which goes right after w->tail; a pure scalar op of the kernel body after it moves
 * there (after the ops moved before it, so that operands come first) and becomes the
 * tail. */
static bool available(Ws *w, IrValue v)
{
    const IrValueInfo *vi = &w->f->values[v];
    if (!vi->def) return vi->block == &w->f->body;               /* a parameter */
    IrOp *d = vi->def;
    if (d->parent != &w->f->body) return false;
    if (w->before[v]) return true;
    if (!(ir_op_info[d->code].flags & IR_P) || d->nregions || ir_value_type(w->f, v)->rank) return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (!available(w, d->operands[i])) return false;
    if (w->tail->next != d) {
        ir_op_remove(d);
        ir_op_insert_before(d, w->tail->next);
        w->moved = true;
    }
    w->tail = d;
    for (uint32_t i = 0; i < d->nresults; i++) w->before[d->results[i]] = true;
    return true;
}

/* ---- one ring per loop ------------------------------------------------------------- */
#define MAX_RINGS 8
#define MAX_COPIES 8

typedef struct Ring {
    IrOp *loop;
    IrValue bars, empty;             /* the full and the empty barriers */
    IrValue bufs[MAX_COPIES];        /* the stages' buffers, in the order of the copies */
    int ncopy, slots;
} Ring;

/* The ring of a loop: every copy in it fills the barriers of the first, and the issuing
 * thread waits for an empty slot once per iteration. */
static bool ring_of(const IrFunc *f, IrOp *loop, Ring *r)
{
    memset(r, 0, sizeof *r);
    r->loop = loop;
    r->bars = r->empty = IR_NO_VALUE;
    int nwait = 0;
    for (const IrOp *o = loop->regions[0].first; o; o = o->next) {
        if (o->code == IR_OP_BARRIER || o->noperands > 32 || o->nresults > 4) return false;
        if (o->code == IR_OP_TMA_COPY) {
            if (r->bars == IR_NO_VALUE) {
                r->bars = o->operands[2];
                r->slots = ir_value_type(f, o->operands[0])->shape[0];
            }
            if (o->operands[2] != r->bars || r->ncopy == MAX_COPIES) return false;
            r->bufs[r->ncopy++] = o->operands[0];
        }
        if (o->code == IR_OP_TMA_WAIT && o->attr.i == 1) {
            nwait++;
            r->empty = o->operands[0];
        }
    }
    return nwait == 1 && r->ncopy > 0;
}

/* Ring r uses the same buffers and barriers as ring r0 could: as many copies, into
 * buffers of the same types, with as many stages. */
static bool same_shape(const IrFunc *f, const Ring *r0, const Ring *r)
{
    if (r->ncopy != r0->ncopy || r->slots != r0->slots) return false;
    for (int i = 0; i < r->ncopy; i++)
        if (ir_value_type(f, r->bufs[i]) != ir_value_type(f, r0->bufs[i])) return false;
    return ir_value_type(f, r->bars) == ir_value_type(f, r0->bars) &&
           ir_value_type(f, r->empty) == ir_value_type(f, r0->empty);
}

/* The copies before ring k's loop that fill its first S-1 stages (its prologue): those
 * between the loop before it (or the kernel's start) and it. */
static uint32_t prologue_copies(const IrFunc *f, const Ring *rs, int k, bool *ok)
{
    const IrOp *from = k ? rs[k - 1].loop->next : f->body.first;
    uint32_t n = 0;
    for (const IrOp *o = from; o && o != rs[k].loop; o = o->next)
        if (o->code == IR_OP_TMA_COPY) {
            n++;
            *ok &= o->operands[2] == rs[k].bars;
        }
    return n;
}

/* A ring's buffers, then its full and empty barriers, into out; their number. */
static int ring_values(const Ring *r, IrValue out[MAX_COPIES + 2])
{
    int n = 0;
    for (int i = 0; i < r->ncopy; i++) out[n++] = r->bufs[i];
    out[n++] = r->bars;
    out[n++] = r->empty;
    return n;
}

/* v is a buffer or barrier of one of the rings (of the first after merge_rings). */
static bool ring_value(const Ring *rs, int n, IrValue v)
{
    IrValue vs[MAX_COPIES + 2];
    for (int k = 0; k < n; k++)
        for (int i = 0, m = ring_values(&rs[k], vs); i < m; i++)
            if (v == vs[i]) return true;
    return false;
}

/* Marks the copy side of every ring loop and makes what it reads from outside available
 * before the producer; false if it cannot compute it. The rings' buffers and barriers
 * count as available: the first ring's are before the producer, and merge_rings gives
 * the others' uses the first's. */
static bool mark_rings(Ws *w, Ring *rs, int n)
{
    memset(w->need, 0, w->nmap * sizeof(bool));
    for (int k = 0; k < n; k++) {
        IrOp *loop = rs[k].loop;
        IrBlock *body = &loop->regions[0];
        w->loop = loop;
        for (const IrOp *o = body->first; o; o = o->next)
            if (copy_side(o))
                for (uint32_t i = 0; i < o->noperands; i++)
                    if (!mark(w, o->operands[i])) return false;
        /* the values from outside: the bounds, and what the marked ops and the copies read */
        for (uint32_t i = 0; i < 3; i++)
            if (!available(w, loop->operands[i])) return false;
        for (const IrOp *o = body->first; o; o = o->next) {
            if (!copy_side(o) && !(o->nresults && w->need[o->results[0]])) continue;
            for (uint32_t i = 0; i < o->noperands; i++) {
                const IrValueInfo *vi = &w->f->values[o->operands[i]];
                bool inside = vi->def ? vi->def->parent == body : vi->block == body;
                if (!inside && !ring_value(rs, n, o->operands[i]) && !available(w, o->operands[i])) return false;
            }
        }
    }
    return true;
}

/* A cluster barrier that followed the inits merge_rings removed (passes/shared.c put
 * one after each multicast ring's): the first ring's is enough. The last one, before
 * the kernel returns, stays. */
static void drop_orphan_syncs(IrFunc *f)
{
    for (IrOp *o = f->body.first, *next; o; o = next) {
        next = o->next;
        if (o->code != IR_OP_CLUSTER_SYNC || (o->prev && o->prev->code == IR_OP_MBARRIER_INIT)) continue;
        const IrOp *after = o->next;
        while (after && after->code == IR_OP_TMA_STORE_WAIT) after = after->next;
        if (!after || after->code != IR_OP_RETURN) ir_op_remove(o);
    }
}

/* Every loop after the first takes the first loop's ring: its ring ops number their
 * iterations after those of the loops before it (pass_ring_rebase by the trip counts
 * before it), and its own buffers, barriers and their initialization go. The stages
 * then run on from loop to loop, as the producer's copies do. */
static void merge_rings(IrFunc *f, Ring *rs, int n)
{
    IrValue base = IR_NO_VALUE;
    for (int k = 1; k < n; k++) {
        IrBuilder b;
        ir_builder_before(&b, rs[k].loop);
        b.loc = rs[k].loop->loc;
        IrValue t = pass_ring_trip_count(&b, rs[k - 1].loop);
        base = k == 1 ? t : ir_build_binary(&b, IR_OP_ADD, base, t);
        pass_ring_rebase(f, rs[k].loop, rs[k].loop->operands[0], rs[k].loop->operands[2], base);
        IrValue from[MAX_COPIES + 2], to[MAX_COPIES + 2];
        int m = ring_values(&rs[k], from);
        ring_values(&rs[0], to);                 /* same_shape: as many, in the same order */
        for (int i = 0; i < m; i++) {
            if (from[i] == to[i]) continue;
            IrOp *def = f->values[from[i]].def;
            for (IrOp *o = f->body.first, *next; o; o = next) {   /* its initialization */
                next = o->next;
                if (o->code == IR_OP_MBARRIER_INIT && o->operands[0] == from[i]) ir_op_remove(o);
            }
            ir_replace_all_uses(f, from[i], to[i]);
            if (def && def->code == IR_OP_LOCAL_ALLOC) ir_op_remove(def);
        }
    }
    drop_orphan_syncs(f);
}

/* The ops before `at` are pure, local_allocs, mbarrier_inits or the cluster barriers
 * after them (passes/shared.c): every warp may run them, the producer's too. */
static bool pure_before(const IrOp *at)
{
    const IrBlock *body = at->parent;
    for (const IrOp *o = body->first; o != at; o = o->next) {
        unsigned fl = ir_op_info[o->code].flags;
        if (!(fl & IR_P) && o->code != IR_OP_LOCAL_ALLOC && o->code != IR_OP_MBARRIER_INIT && o->code != IR_OP_CLUSTER_SYNC)
            return false;
    }
    return true;
}

/* An op hoist_ring moved, and the op it stood before (to put it back). */
typedef struct Moved {
    IrOp *op, *next;
} Moved;

static void move_to(IrOp *op, IrOp *before, Moved *log, int *n)
{
    log[*n].op = op;
    log[(*n)++].next = op->next;
    ir_op_remove(op);
    ir_op_insert_before(op, before);
}

/* The ring's buffers and barriers to the kernel's start, so that the producer can start
 * there, before the consumers' loads and conversions (attention's Q): those then run
 * while the ring is live, and codegen places their scratch before the ring's area
 * instead of over it (cg_module.c, smem_plan). Returns the moves, logged for
 * unhoist_ring. */
static int hoist_ring(IrFunc *f, const Ring *r, Moved *log)
{
    IrOp *first = f->body.first;
    IrValue vs[MAX_COPIES + 2];
    int n = ring_values(r, vs), nlog = 0;
    for (int i = 0; i < n; i++) {
        IrOp *d = f->values[vs[i]].def;
        if (!d || d->code != IR_OP_LOCAL_ALLOC || d->parent != &f->body) continue;
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= vs[j] == vs[i];
        if (seen) continue;
        if (d != first) move_to(d, first, log, &nlog);
        else first = d->next;
    }
    IrOp *sync = NULL;   /* a multicast ring's cluster barrier after its inits goes with them */
    for (IrOp *o = first, *next; o; o = next) {
        next = o->next;
        if (o->code == IR_OP_MBARRIER_INIT && (o->operands[0] == r->bars || o->operands[0] == r->empty)) {
            if (next && next->code == IR_OP_CLUSTER_SYNC) sync = next;
            move_to(o, first, log, &nlog);
        }
    }
    if (sync) move_to(sync, first, log, &nlog);
    return nlog;
}

/* Puts the ops hoist_ring moved back where they were (the pass gives up: the kernel
 * keeps the ring's place, and with it the shared-memory plan it was sized for). */
static void unhoist_ring(Moved *log, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        ir_op_remove(log[i].op);  /* its old next may have moved too: restored first */
        ir_op_insert_before(log[i].op, log[i].next);
    }
}

/* The ping-pong of two consumer warpgroups (FlashAttention-3's): in loops rotated by
 * passes/rotate.c each warpgroup issues both dots of an iteration (S of the next block,
 * P V of this one), then computes its softmax while they run; with `turn wait` before
 * the first dot and `turn pass` after the last, the two warpgroups issue in turns, so
 * that one's softmax runs while the other's dots use the tensor cores. `turn start`
 * after the producer lets warpgroup 0 go first; `turn end` after the last loop takes
 * back warpgroup 1's last pass. Only for 8 warps (two consumer warpgroups) and loops
 * with no barrier of the program (that would put the warpgroups in step again);
 * the knob pingpong = 0 leaves it out (for measuring). */
static void ping_pong(IrFunc *f, IrOp *prod, Ring *rs, int n)
{
    if (f->warps != 8 || !f->module->knobs.pingpong) return;
    for (int k = 0; k < n; k++) {
        bool rotated = false;
        int dots = 0;
        for (const IrOp *o = rs[k].loop->regions[0].first; o; o = o->next) {
            if (o->code == IR_OP_BARRIER) return;
            rotated |= o->code == IR_OP_DOT_WAIT;
            dots += o->code == IR_OP_DOT;
        }
        /* (a loop of more dots that rotate.c scheduled keeps its warpgroups apart: in
         * turns, one's softmax between its dots would stall the other's) */
        if (!rotated || dots != 2) return;
    }
    IrBuilder b;
    for (int k = 0; k < n; k++) {
        IrOp *first = NULL, *last = NULL;
        for (IrOp *o = rs[k].loop->regions[0].first; o; o = o->next)
            if (o->code == IR_OP_DOT) {
                if (!first) first = o;
                last = o;
            }
        ir_builder_before(&b, first);
        b.loc = first->loc;
        ir_build(&b, IR_OP_TURN, NULL, 0, NULL, 0, 0)->attr.i = IR_TURN_WAIT;
        ir_builder_before(&b, last->next);
        ir_build(&b, IR_OP_TURN, NULL, 0, NULL, 0, 0)->attr.i = IR_TURN_PASS;
    }
    ir_builder_before(&b, prod->next);
    b.loc = prod->loc;
    ir_build(&b, IR_OP_TURN, NULL, 0, NULL, 0, 0)->attr.i = IR_TURN_START;
    ir_builder_before(&b, rs[n - 1].loop->next);
    ir_build(&b, IR_OP_TURN, NULL, 0, NULL, 0, 0)->attr.i = IR_TURN_END;
}

/* The last mbarrier_init of the kernel's body before loop (or the cluster barrier
 * right after it: the producer starts after both), or NULL. */
static IrOp *last_init_before(IrFunc *f, const IrOp *loop)
{
    IrOp *last = NULL;
    for (IrOp *o = f->body.first; o && o != loop; o = o->next)
        if (o->code == IR_OP_MBARRIER_INIT) last = o;
    while (last && last->next && last->next->code == IR_OP_CLUSTER_SYNC) last = last->next;
    return last;
}

static bool specialize(IrFunc *f, Ring *rs, int n)
{
    for (int k = 1; k < n; k++)
        if (!same_shape(f, &rs[0], &rs[k]) ||
            ir_value_type(f, rs[k].loop->operands[0]) != ir_value_type(f, rs[0].loop->operands[0]))
            return false;
    /* each loop's prologue fills its first S-1 stages */
    for (int k = 0; k < n; k++) {
        bool ok = true;
        if (prologue_copies(f, rs, k, &ok) != (uint32_t)(rs[k].ncopy * (rs[k].slots - 1)) || !ok) return false;
    }
    IrOp *last_init = last_init_before(f, rs[0].loop);
    if (!last_init) return false;
    Moved moved[MAX_COPIES + 4];
    int nmoved = 0;
    if (!pure_before(last_init->next)) {
        nmoved = hoist_ring(f, &rs[0], moved);
        last_init = last_init_before(f, rs[0].loop);
        if (!pure_before(last_init->next)) {
            unhoist_ring(moved, nmoved);
            return false;
        }
    }
    Ws w = {.f = f, .loop = rs[0].loop, .need = tl_calloc(f->nvalues, sizeof(bool)),
            .before = tl_calloc(f->nvalues, sizeof(bool)), .nmap = f->nvalues, .tail = last_init};
    if (!w.need || !w.before) tl_oom();
    for (const IrOp *o = f->body.first; o != last_init->next; o = o->next)
        for (uint32_t i = 0; i < o->nresults; i++) w.before[o->results[i]] = true;
    bool ok = mark_rings(&w, rs, n);
    if (ok && n > 1) {
        /* the loops share the first's ring; then mark again (the rebased ring ops and the
         * trip counts are new values: the marks and the map grow with them) */
        merge_rings(f, rs, n);
        tl_free(w.need);
        bool *before = tl_calloc(f->nvalues, sizeof(bool));
        if (!before) tl_oom();
        memcpy(before, w.before, w.nmap * sizeof(bool));
        tl_free(w.before);
        w.before = before;
        w.nmap = f->nvalues;
        w.need = tl_calloc(f->nvalues, sizeof(bool));
        if (!w.need) tl_oom();
        ok = mark_rings(&w, rs, n);
        assert(ok);   /* the rebased ops compute from what the originals did */
    }
    if (!ok) {
        unhoist_ring(moved, nmoved);
        tl_free(w.need);
        tl_free(w.before);
        return w.moved;
    }
    w.map = tl_malloc(w.nmap * sizeof(IrValue));
    if (!w.map) tl_oom();
    memset(w.map, 0xff, w.nmap * sizeof(IrValue));
    IrBuilder b;
    ir_builder_before(&b, w.tail->next);
    b.loc = rs[0].loop->loc;
    IrOp *prod = ir_build(&b, IR_OP_PRODUCER, NULL, 0, NULL, 0, 1);
    const TileTarget *t = target_of(f);
    prod->attr.i = (int64_t)t->producer_regs | (int64_t)tile_target_consumer_regs(t, f->warps * ir_consumer_groups(f)) << 16;
    IrBlock *pr = &prod->regions[0];
    IrBuilder pb;
    ir_builder_at_end(&pb, pr);
    pb.loc = rs[0].loop->loc;
    for (int k = 0; k < n; k++) {
        IrOp *loop = rs[k].loop;
        IrBlock *body = &loop->regions[0];
        IrValue bounds[3] = {loop->operands[0], loop->operands[1], loop->operands[2]};
        IrOp *pf = ir_build(&pb, IR_OP_FOR, bounds, 3, NULL, 0, 1);
        IrBlock *pbody = &pf->regions[0];
        const IrType *ivt = ir_value_type(f, loop->operands[0]);
        IrValue iv2 = ir_block_add_arg(pbody, ivt, "k");
        IrBuilder lb;
        ir_builder_at_end(&lb, pbody);
        lb.loc = loop->loc;
        /* the consumers' iteration this one refills for: %k = %k2 - (S-1) * step */
        IrValue back = ir_build1(&lb, IR_OP_MUL, ivt, (IrValue[]){loop->operands[2], ir_const_int(&lb, ivt, rs[k].slots - 1)}, 2);
        w.map[body->args[0]] = ir_build1(&lb, IR_OP_SUB, ivt, (IrValue[]){iv2, back}, 2);
        for (IrOp *o = body->first, *next; o; o = next) {
            next = o->next;
            if (!copy_side(o) && !(o->nresults && w.need[o->results[0]])) continue;
            ir_clone_op(&lb, f, o, w.map, w.nmap);
            if (copy_side(o)) ir_op_remove(o);
        }
        ir_build(&lb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
    }
    ir_build(&pb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
    /* the prologues' copies: the producer's loops issue every iteration's */
    for (IrOp *o = f->body.first, *next; o && o != rs[n - 1].loop; o = next) {
        next = o->next;
        if (o->code == IR_OP_TMA_COPY) ir_op_remove(o);
    }
    tl_free(w.need);
    tl_free(w.before);
    tl_free(w.map);
    ping_pong(f, prod, rs, n);
    return true;
}

bool pass_warpspec(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL || !f->ws || ir_func_warps(f) % 4) return false;
    Ring rs[MAX_RINGS];
    int n = 0;
    for (IrOp *o = f->body.first; o; o = o->next) {
        if (o->code == IR_OP_PRODUCER) return false;
        if (o->code != IR_OP_FOR || !has_copy(o)) continue;
        if (n == MAX_RINGS || !ring_of(f, o, &rs[n])) return false;
        n++;
    }
    return n && specialize(f, rs, n);
}
