/* Persistent kernels: the launch runs one program per SM slot, and each walks the
 * programs of the grid (@launch(persistent = true)).
 *
 * requires:   the GPU-level IR after passes/warpspec.c; a kernel with a grid(...) clause
 * guarantees: the kernel's body runs once per program t of the clause's grid that this
 *             program is given: t = launched id, + launched_programs, ... (in grid order,
 *             x fastest, so that the programs running at one time are the grid's
 *             consecutive ones, as without the pass). program_id(a) becomes t's
 *             coordinate a and num_programs(a) the clause's size a. What does not depend
 *             on the program (constants, the shared buffers and their barriers, the
 *             arithmetic of the parameters) is done once, before the walk.
 *
 *   before                                   after
 *   %0 = program_id 0                        %g = (the grid clause, inlined)
 *   ... body ...                             %p = program_id 0
 *                                            %n = launched_programs
 *                                            %my = (%g - %p + %n - 1) / %n
 *                                            for %i = 0, %my, 1 {
 *                                              %t = %p + %i * %n
 *                                              ... body, program_id 0 -> %t ...
 *                                            }
 *
 * A TMA ring (mbarriers) must have a producer warpgroup (passes/warpspec.c, ws = true):
 * its phases then run on across tiles. The producer walks the same tiles, each with its
 * own loop of copies (so that it copies the next tile's first stages while the
 * consumers run this tile's epilogue), and both sides number the ring's iterations
 * from the kernel's start: the stage, phase and predicates of every ring op are
 * rebased by the ring iterations of the tiles walked before: the tiles times the ring
 * loops' trip count where their bounds are the same for every tile, else a count that
 * the walk carries (`for ... iter(%base)`: each tile adds its own trip counts, computed
 * from its bounds by the producer and the consumers alike; causal attention, whose key
 * loop ends at the query block's diagonal). Ping-pong needs the same bounds for every
 * tile (a warpgroup rebases without walking the other's tiles).
 *
 * Ping-pong (pingpong = 1, with a producer and 4 warps a program: CUTLASS's ping-pong
 * GEMM): two consumer warpgroups run the walk, each its own program: the tile loop is
 * `for pingpong` (warpgroup g takes the iterations g, g + 2, ...: codegen), and they
 * take turns at the ring loops (`turn wait` before them, `turn pass` after, `turn
 * start` before the walk, `turn end %my` after it), so that one's main loop runs while
 * the other computes its epilogue, and a warpgroup waits on the ring only for the
 * stages of its own tile (the phases it waits for are then the next ones). The
 * interpreter runs the loop as a plain one: the iterations in order, as the ring's
 * order has them. Without a producer or with other than 4 warps the key is dropped.
 *
 *   turn start
 *   for pingpong %i = 0, %my, 1 {
 *     ... turn wait; the ring loops; turn pass; the epilogue ...
 *   }
 *   turn end %my
 *
 * Not made persistent (the kernel compiles as without the key, and the printed launch
 * keys drop it): no grid clause, one that is not plain scalar arithmetic, a `return`
 * inside a region, a TMA ring without a producer, or a kernel already persistent. The runtime launches min(programs,
 * SMs x resident programs per SM) programs along x for a kernel with launched_programs
 * (codegen.h: CgKernelInfo.persistent). */
#include <string.h>

#include "passes/passes.h"
#include "ir/arena.h"

typedef struct Pk {
    IrFunc *f;
    bool *vary;                  /* per value: depends on the program */
    bool *need;                  /* per value of the kernel as it was: the producer reads it */
    IrValue *map;                /* per value of the kernel as it was: its clone (producer) */
    uint32_t nmap;
    IrValue g[3];                /* the clause's sizes, i32 */
    int ng;
    IrValue total, pid, nprog, my, trip;   /* trip: a tile's ring iterations, if the same for all */
    bool carry;                  /* the ring loops' bounds depend on the tile: the walk carries base */
    const IrType *i32;
    const IrType *rt;            /* the ring loop's integer type (i32 or i64) */
} Pk;

static bool any_op(const IrBlock *b, bool (*pred)(const IrOp *))
{
    for (const IrOp *o = b->first; o; o = o->next) {
        if (pred(o)) return true;
        for (uint32_t r = 0; r < o->nregions; r++)
            if (any_op(&o->regions[r], pred)) return true;
    }
    return false;
}

static bool is_launched(const IrOp *o) { return o->code == IR_OP_LAUNCHED_PROGRAMS; }
static bool is_return(const IrOp *o) { return o->code == IR_OP_RETURN; }
static bool is_init(const IrOp *o) { return o->code == IR_OP_MBARRIER_INIT; }

/* Marks the results of ops that depend on the program: program_id, num_programs, ops
 * reading such a value, and ops whose regions hold one. */
static bool mark_vary(Pk *p, const IrBlock *b)
{
    bool any = false;
    for (const IrOp *o = b->first; o; o = o->next) {
        bool v = o->code == IR_OP_PROGRAM_ID || o->code == IR_OP_NUM_PROGRAMS;
        for (uint32_t i = 0; i < o->noperands; i++) v |= p->vary[o->operands[i]];
        for (uint32_t r = 0; r < o->nregions; r++) v |= mark_vary(p, &o->regions[r]);
        for (uint32_t i = 0; i < o->nresults; i++) p->vary[o->results[i]] = v;
        any |= v;
    }
    return any;
}

/* x code y, of x's type (y's is the same) */
static IrValue bin(IrBuilder *b, Pk *p, IrOpcode code, IrValue x, IrValue y)
{
    return ir_build1(b, code, ir_value_type(p->f, x), (IrValue[]){x, y}, 2);
}

/* v as type t (a conversion between integer widths where they differ) */
static IrValue as(IrBuilder *b, Pk *p, IrValue v, const IrType *t)
{
    return ir_value_type(p->f, v) == t ? v : ir_build1(b, IR_OP_CONVERT, t, &v, 1);
}

/* The grid clause's ops, cloned at the builder (its parameters are the kernel's). */
static void inline_grid(Pk *p, IrBuilder *b)
{
    const IrFunc *g = p->f->grid;
    IrValue *map = tl_malloc((g->nvalues ? g->nvalues : 1) * sizeof *map);
    if (!map) tl_oom();
    memset(map, 0xff, (g->nvalues ? g->nvalues : 1) * sizeof *map);
    for (uint32_t i = 0; i < g->body.nargs; i++) map[g->body.args[i]] = p->f->body.args[i];
    for (const IrOp *o = g->body.first; o; o = o->next) {
        if (o->code == IR_OP_RETURN) {
            p->ng = (int)o->noperands;
            for (uint32_t i = 0; i < o->noperands; i++) {
                IrValue v = map[o->operands[i]];
                p->g[i] = ir_value_type(p->f, v)->elem == IR_I32 ? v : ir_build1(b, IR_OP_CONVERT, p->i32, &v, 1);
            }
            break;
        }
        ir_clone_op(b, g, o, map, g->nvalues);
    }
    tl_free(map);
}

static bool grid_ok(const IrFunc *g, const IrFunc *k)
{
    if (g->body.nargs != k->body.nargs) return false;
    for (const IrOp *o = g->body.first; o; o = o->next) {
        if (o->code == IR_OP_RETURN) {
            if (o->next || o->noperands < 1 || o->noperands > 3) return false;
            for (uint32_t i = 0; i < o->noperands; i++)
                if (!ir_elem_is_int(ir_value_type(g, o->operands[i])->elem) || ir_value_type(g, o->operands[i])->rank)
                    return false;
            return true;
        }
        if (!(ir_op_info[o->code].flags & IR_P) || o->nregions || o->noperands > 8 || o->nresults > 2) return false;
        for (uint32_t i = 0; i < o->nresults; i++)
            if (ir_value_type(g, o->results[i])->rank) return false;
    }
    return false;
}

/* Program t's coordinates (x fastest) for program_id 0..2. */
static void coords(Pk *p, IrBuilder *b, IrValue t, IrValue out[3])
{
    out[0] = p->ng > 1 ? bin(b, p, IR_OP_REM, t, p->g[0]) : t;
    if (p->ng > 1) {
        IrValue q = bin(b, p, IR_OP_DIV, t, p->g[0]);
        out[1] = p->ng > 2 ? bin(b, p, IR_OP_REM, q, p->g[1]) : q;
        if (p->ng > 2) out[2] = bin(b, p, IR_OP_DIV, q, p->g[1]);
    }
}

#define MAX_RINGS 8

/* The ring loops of a block, in order: the `for`s with a consumer's tma_wait 0 in their
 * bodies (several when they share one ring: passes/warpspec.c). At most max; -1 if
 * there are more. */
static int ring_loops(IrBlock *b, IrOp **out, int max)
{
    int n = 0;
    for (IrOp *o = b->first; o; o = o->next) {
        if (o->code != IR_OP_FOR) continue;
        for (const IrOp *u = o->regions[0].first; u; u = u->next)
            if (u->code == IR_OP_TMA_WAIT && u->attr.i == 0) {
                if (n == max) return -1;
                out[n++] = o;
                break;
            }
    }
    return n;
}

/* At b: `for %tile = 0, my, 1` with, at the start of its body (*lb builds on at its
 * end), the walked program t = pid + tile * launched_programs, its coordinates into
 * pc, and into *base (if asked) the ring iterations of the tiles before: tile * trip,
 * or with p->carry the loop's carried value (from 0), which the body's yield must
 * advance by the tile's trip count (end_tile). */
static IrOp *tile_loop(Pk *p, IrBuilder *b, Loc loc, IrBuilder *lb, IrValue pc[3], IrValue *base)
{
    bool carry = base && p->carry;
    IrValue ops[4] = {ir_const_int(b, p->i32, 0), p->my, ir_const_int(b, p->i32, 1)};
    if (carry) ops[3] = ir_const_int(b, p->rt, 0);
    IrOp *loop = ir_build(b, IR_OP_FOR, ops, carry ? 4 : 3, carry ? &p->rt : NULL, carry ? 1 : 0, 1);
    IrValue n = ir_block_add_arg(&loop->regions[0], p->i32, "tile");
    if (carry) *base = ir_block_add_arg(&loop->regions[0], p->rt, "base");
    ir_builder_at_end(lb, &loop->regions[0]);
    lb->loc = loc;
    IrValue t = bin(lb, p, IR_OP_ADD, p->pid, bin(lb, p, IR_OP_MUL, n, p->nprog));
    coords(p, lb, t, pc);
    if (base && !carry) *base = bin(lb, p, IR_OP_MUL, as(lb, p, n, p->rt), p->trip);
    return loop;
}

/* The tile loop's yield at b (the end of its body, after the ring loops): with
 * p->carry, base plus this tile's ring iterations, the sum of the loops' trip counts
 * from their bounds (the tile's own), computed before the first loop in a producer
 * (its tile is scalars, its loops, yield: all the bounds come before the loops), at
 * the yield in the consumers (a loop's bounds may be computed after the loop before). */
static void end_tile(Pk *p, IrBuilder *b, IrOp **loops, int n, IrValue base, bool producer)
{
    if (!p->carry || base == IR_NO_VALUE || n == 0) {
        ir_build(b, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
        return;
    }
    IrBuilder tb = *b;
    if (producer) ir_builder_before(&tb, loops[0]), tb.loc = loops[0]->loc;
    IrValue next = base;
    for (int k = 0; k < n; k++) next = bin(&tb, p, IR_OP_ADD, next, pass_ring_trip_count(&tb, loops[k]));
    ir_build(b, IR_OP_YIELD, &next, 1, NULL, 0, 0);
}

/* ---- the producer's walk --------------------------------------------------------- */
static IrValue mapped(const Pk *p, IrValue v) { return v < p->nmap && p->map[v] != IR_NO_VALUE ? p->map[v] : v; }

static void clone_op(Pk *p, IrBuilder *b, const IrOp *o) { ir_clone_op(b, p->f, o, p->map, p->nmap); }

static bool small_scalar_op(const IrFunc *f, const IrOp *o)
{
    if (o->nregions || o->noperands > 32 || o->nresults > 4) return false;
    for (uint32_t i = 0; i < o->nresults; i++)
        if (ir_value_type(f, o->results[i])->rank) return false;
    return true;
}

/* Marks v in need if it is a program-dependent value of the kernel's body. */
static void need_value(const Pk *p, IrValue v, bool *need)
{
    const IrOp *d = p->f->values[v].def;
    if (p->vary[v] && d && d->parent == &p->f->body) need[v] = true;
}

/* Marks in need the varying values of the kernel's body that block b's ops read. */
static void need_outer(Pk *p, const IrBlock *b, bool *need)
{
    for (const IrOp *o = b->first; o; o = o->next) {
        for (uint32_t i = 0; i < o->noperands; i++) need_value(p, o->operands[i], need);
        for (uint32_t r = 0; r < o->nregions; r++) need_outer(p, &o->regions[r], need);
    }
}

/* The producer's loops, in order (one per ring loop of the consumers), at most max;
 * -1 if there are more. */
static int producer_loops(IrOp *prod, IrOp **out, int max)
{
    int n = 0;
    for (IrOp *o = prod->regions[0].first; o; o = o->next)
        if (o->code == IR_OP_FOR) {
            if (n == max) return -1;
            out[n++] = o;
        }
    return n;
}

/* The program-dependent values of the kernel's body that the producer reads, and the
 * ones those read, into need; false if one is not a pure scalar op. */
static bool producer_needs(Pk *p, const IrOp *prod, bool *need)
{
    IrFunc *f = p->f;
    need_outer(p, &prod->regions[0], need);
    for (const IrOp *o = f->body.last; o; o = o->prev) {
        if (o->nresults != 1 || !need[o->results[0]]) continue;
        if (!small_scalar_op(f, o) || !(ir_op_info[o->code].flags & IR_P)) return false;
        for (uint32_t i = 0; i < o->noperands; i++) need_value(p, o->operands[i], need);
    }
    return true;
}

/* Whether rebuild_producer can walk the producer: scalars, then its loops (one per
 * ring loop: several share one ring, passes/warpspec.c) of the ring's integer type whose
 * bodies have no regions, reading program-dependent values that are pure scalars (those,
 * into need: producer_needs). */
static bool producer_ok(Pk *p, IrOp *prod, bool *need)
{
    IrFunc *f = p->f;
    bool loops = false;
    for (const IrOp *o = prod->regions[0].first; o; o = o->next) {
        if (o->code == IR_OP_YIELD) continue;
        if (o->code != IR_OP_FOR) {
            if (loops || !small_scalar_op(f, o)) return false;   /* scalars only before the loops */
            continue;
        }
        loops = true;
        if (o->nresults || ir_value_type(f, o->operands[0]) != p->rt) return false;
        for (const IrOp *u = o->regions[0].first; u; u = u->next)
            if (u->code != IR_OP_YIELD && (u->nregions || u->noperands > 32 || u->nresults > 4)) return false;
    }
    return loops && producer_needs(p, prod, need);
}

/* The producer's region again: its scalars, then a loop over the my tiles this program
 * walks, each computing the program-dependent values of the kernel's body it reads
 * for its tile and base = tile * trip, then the old loops of copies with the ring
 * rebased by base (producer_ok holds and filled need). */
static void rebuild_producer(Pk *p, IrOp *prod, const bool *need)
{
    IrFunc *f = p->f;
    IrBlock *pr = &prod->regions[0];
    IrOp *loops[MAX_RINGS];
    int nl = producer_loops(prod, loops, MAX_RINGS);
    IrOp *loop = loops[0];
    IrBuilder b;
    ir_builder_before(&b, prod);
    b.loc = prod->loc;
    IrOp *np = ir_build(&b, IR_OP_PRODUCER, NULL, 0, NULL, 0, 1);
    np->attr = prod->attr;
    IrBuilder pb;
    ir_builder_at_end(&pb, &np->regions[0]);
    pb.loc = loop->loc;
    for (const IrOp *o = pr->first; o != loop; o = o->next) clone_op(p, &pb, o);
    IrBuilder tl;
    IrValue pc[3], base = IR_NO_VALUE;
    tile_loop(p, &pb, loop->loc, &tl, pc, &base);
    for (const IrOp *o = f->body.first; o; o = o->next) {
        if (o->nresults != 1 || o->results[0] >= p->nmap || !need[o->results[0]]) continue;
        if (o->code == IR_OP_PROGRAM_ID) p->map[o->results[0]] = pc[o->attr.i];
        else if (o->code == IR_OP_NUM_PROGRAMS) p->map[o->results[0]] = p->g[o->attr.i];
        else clone_op(p, &tl, o);
    }
    IrOp *walked[MAX_RINGS];
    for (int k = 0; k < nl; k++) {
        IrOp *pl = loops[k];
        IrValue kb[3] = {mapped(p, pl->operands[0]), mapped(p, pl->operands[1]), mapped(p, pl->operands[2])};
        IrOp *fl = ir_build(&tl, IR_OP_FOR, kb, 3, NULL, 0, 1);
        walked[k] = fl;
        p->map[pl->regions[0].args[0]] = ir_block_add_arg(&fl->regions[0], p->rt, "k");
        IrBuilder lb;
        ir_builder_at_end(&lb, &fl->regions[0]);
        lb.loc = pl->loc;
        for (const IrOp *o = pl->regions[0].first; o; o = o->next)
            if (o->code != IR_OP_YIELD) clone_op(p, &lb, o);
        ir_build(&lb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
        pass_ring_rebase(p->f, fl, kb[0], kb[2], base);
    }
    end_tile(p, &tl, walked, nl, base, true);
    ir_build(&pb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);
    ir_op_remove(prod);
}

/* ---- the pass -------------------------------------------------------------------------- */
static bool applicable(const IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL || !f->persistent || !f->grid || !grid_ok(f->grid, f)) return false;
    if (!f->body.last || f->body.last->code != IR_OP_RETURN || f->body.last->noperands) return false;
    if (any_op(&f->body, is_launched)) return false;
    for (const IrOp *o = f->body.first; o; o = o->next)
        for (uint32_t r = 0; r < o->nregions; r++)
            if (any_op(&o->regions[r], is_return)) return false;
    return true;
}

/* Done once before the walk: ops of the kernel's body that do not depend on the
 * program and have no effect (or make the shared buffers and their barriers, and the
 * cluster's barrier after them), reading only parameters and such ops. */
static bool is_setup(const Pk *p, const IrOp *o, const bool *setup_val)
{
    unsigned fl = ir_op_info[o->code].flags;
    if (o->nregions || (!(fl & IR_P) && o->code != IR_OP_LOCAL_ALLOC && o->code != IR_OP_MBARRIER_INIT &&
                        o->code != IR_OP_CLUSTER_SYNC))
        return false;
    for (uint32_t i = 0; i < o->nresults; i++)
        if (p->vary[o->results[i]]) return false;
    for (uint32_t i = 0; i < o->noperands; i++) {
        IrValue v = o->operands[i];
        if (p->vary[v] || (p->f->values[v].def && !setup_val[v])) return false;
    }
    return true;
}

typedef struct Ids {
    Pk *p;
    const IrValue *cc;
} Ids;

static void replace_ids(IrOp *o, void *ud)
{
    const Ids *ids = ud;
    if (o->code != IR_OP_PROGRAM_ID && o->code != IR_OP_NUM_PROGRAMS) return;
    IrValue to = o->code == IR_OP_PROGRAM_ID ? ids->cc[o->attr.i] : ids->p->g[o->attr.i];
    ir_replace_all_uses(ids->p->f, o->results[0], to);
    ir_op_remove(o);
}

static void turn(IrBuilder *b, int kind, const IrValue *n)
{
    ir_build(b, IR_OP_TURN, n, n ? 1 : 0, NULL, 0, 0)->attr.i = kind;
}

/* The ring loops' releases (mbarrier_arrive: each iteration releases the stage of the
 * one before it, from the tile's second iteration on), whose predicates ping_pong keeps
 * per tile. */
static int ring_releases(IrOp **rings, int nr, IrOp **out, IrValue *preds, int max)
{
    int n = 0;
    for (int k = 0; k < nr; k++)
        for (IrOp *o = rings[k]->regions[0].first; o && n < max; o = o->next)
            if (o->code == IR_OP_MBARRIER_ARRIVE && o->noperands == 3) out[n] = o, preds[n++] = o->operands[2];
    return n;
}

/* The consumers' walk `tl` taken in turns by two warpgroups (pingpong = 1). A tile's
 * first iteration does not release the stage of the ring iteration before it, which
 * the other warpgroup read and whose dots may still read it: each warpgroup releases
 * its tile's last stage itself once its dots are done (after the async_wait 0 that
 * follows the ring loops), and the ring loops' releases keep their predicates per tile
 * (`rel`, `preds`: as before the rebase). */
static void ping_pong(Pk *p, IrOp *tl, IrOp **rings, int nr, IrOp **rel, const IrValue *preds, int nrel, IrValue base)
{
    IrFunc *f = p->f;
    IrBuilder b;
    for (int i = 0; i < nrel; i++) rel[i]->operands[2] = preds[i];
    IrOp *settle = rings[nr - 1]->next;
    while (settle && !(settle->code == IR_OP_ASYNC_WAIT && settle->attr.i == 0)) settle = settle->next;
    if (nrel && settle) {   /* the loops share one ring: its last stage, released once */
        const IrOp *a = rel[0];
        const IrType *bt = ir_value_type(f, a->operands[0]);
        ir_builder_before(&b, settle->next);
        b.loc = a->loc;
        /* the tile's last ring iteration: base + trip - 1, its stage, if the tile has one */
        IrValue one = ir_const_int(&b, p->rt, 1), zero = ir_const_int(&b, p->rt, 0);
        IrValue last = bin(&b, p, IR_OP_SUB, bin(&b, p, IR_OP_ADD, base, p->trip), one);
        const IrType *st = ir_value_type(f, a->operands[1]);
        IrValue s = as(&b, p, last, st);
        s = ir_build_binary(&b, IR_OP_REM, s, ir_const_int(&b, st, bt->shape[0]));
        IrValue any = ir_build_cmp(&b, IR_CMP_LT, zero, p->trip);
        IrValue ops[3] = {a->operands[0], s, any};
        ir_build(&b, IR_OP_MBARRIER_ARRIVE, ops, 3, NULL, 0, 0)->attr = a->attr;
    }
    tl->attr.i = 1;
    ir_builder_before(&b, tl);
    b.loc = tl->loc;
    turn(&b, IR_TURN_START, NULL);
    ir_builder_before(&b, tl->next);
    turn(&b, IR_TURN_END, &p->my);
    ir_builder_before(&b, rings[0]);
    turn(&b, IR_TURN_WAIT, NULL);
    ir_builder_before(&b, rings[nr - 1]->next);
    turn(&b, IR_TURN_PASS, NULL);
}

static bool walk(Pk *p)
{
    IrFunc *f = p->f;
    IrOp *prod = NULL, *rings[MAX_RINGS], *ret = f->body.last;
    int nr = ring_loops(&f->body, rings, MAX_RINGS);
    /* the wait for the TMA stores (passes/tmastore.c) stays after the walk: the stores
     * of one tile drain while the next is computed; so does the cluster's last barrier
     * (passes/shared.c) */
    while (ret->prev && (ret->prev->code == IR_OP_TMA_STORE_WAIT || ret->prev->code == IR_OP_CLUSTER_SYNC)) ret = ret->prev;
    for (IrOp *o = f->body.first; o; o = o->next)
        if (o->code == IR_OP_PRODUCER) prod = o;
    if (any_op(&f->body, is_init)) {
        /* a TMA ring: its phases run on across tiles, which needs the producer (a loop for
         * each ring loop, in order) and bounds of the ring loops that are the same for
         * every tile */
        IrOp *pls[MAX_RINGS];
        int np = prod ? producer_loops(prod, pls, MAX_RINGS) : 0;
        if (!prod || nr < 1 || np != nr) return false;
        p->rt = ir_value_type(f, rings[0]->operands[0]);
        for (int k = 0; k < nr; k++) {
            if (rings[k]->operands[0] != pls[k]->operands[0] || ir_value_type(f, rings[k]->operands[0]) != p->rt)
                return false;
            for (int i = 0; i < 3; i++) p->carry |= p->vary[rings[k]->operands[i]];
        }
        if (p->rt != p->i32 && p->rt != ir_type_scalar(f->module->ctx, IR_I64)) return false;
        if (!producer_ok(p, prod, p->need)) return false;
    } else if (prod) {
        return false;
    }
    /* which ops walk the tiles (in order), which are set up once */
    uint32_t nvalues = f->nvalues, nmoved = 0, cap = 0;
    bool *setup_val = tl_calloc(nvalues, sizeof(bool));
    if (!setup_val) tl_oom();
    for (IrOp *o = f->body.first; o != ret; o = o->next) cap++;
    IrOp **moved = tl_malloc((cap ? cap : 1) * sizeof *moved);
    if (!moved) tl_oom();
    for (IrOp *o = f->body.first; o != ret; o = o->next) {
        if (o == prod) continue;
        if (is_setup(p, o, setup_val))
            for (uint32_t i = 0; i < o->nresults; i++) setup_val[o->results[i]] = true;
        else moved[nmoved++] = o;
    }
    tl_free(setup_val);
    /* the clause's grid, this program's id and the launched count, the tiles it walks */
    IrBuilder b;
    ir_builder_before(&b, f->body.first);
    b.loc = f->loc;
    inline_grid(p, &b);
    p->total = p->g[0];
    for (int i = 1; i < p->ng; i++) p->total = bin(&b, p, IR_OP_MUL, p->total, p->g[i]);
    p->pid = ir_build1(&b, IR_OP_PROGRAM_ID, p->i32, NULL, 0);
    f->values[p->pid].def->attr.i = 0;
    p->nprog = ir_build1(&b, IR_OP_LAUNCHED_PROGRAMS, p->i32, NULL, 0);
    IrValue one = ir_const_int(&b, p->i32, 1);
    p->my = bin(&b, p, IR_OP_DIV, bin(&b, p, IR_OP_SUB, bin(&b, p, IR_OP_ADD, p->total, p->nprog),
                                      bin(&b, p, IR_OP_ADD, p->pid, one)), p->nprog);
    if (prod && !p->carry) {
        /* a tile's ring iterations: the ring loops' trip counts max(0, cdiv(hi - lo, step)) */
        IrBuilder tb;
        ir_builder_before(&tb, prod);
        tb.loc = rings[0]->loc;
        p->trip = IR_NO_VALUE;
        for (int k = 0; k < nr; k++) {
            IrValue c = pass_ring_trip_count(&tb, rings[k]);
            p->trip = k ? bin(&tb, p, IR_OP_ADD, p->trip, c) : c;
        }
    }
    if (prod) rebuild_producer(p, prod, p->need);
    /* the consumers' walk */
    IrBuilder cb, lb;
    ir_builder_before(&cb, ret);
    cb.loc = f->loc;
    IrValue cc[3], base = IR_NO_VALUE;
    IrOp *tl = tile_loop(p, &cb, f->loc, &lb, cc, prod ? &base : NULL);
    IrOp *y = ir_build(&lb, IR_OP_YIELD, NULL, 0, NULL, 0, 0);   /* a place holder */
    for (uint32_t i = 0; i < nmoved; i++) {
        ir_op_remove(moved[i]);
        ir_op_insert_before(moved[i], y);
    }
    ir_builder_before(&lb, y);
    end_tile(p, &lb, rings, prod ? nr : 0, base, false);
    ir_op_remove(y);
    /* every program_id and num_programs of the walked body, also inside its regions, now
     * asks for the walked program's (the loop's own ids come from before it) */
    Ids ids = {p, cc};
    ir_walk(&tl->regions[0], replace_ids, &ids);
    IrOp *rel[2 * MAX_RINGS];
    IrValue preds[2 * MAX_RINGS];
    int nrel = prod && nr > 0 ? ring_releases(rings, nr, rel, preds, 2 * MAX_RINGS) : 0;
    for (int k = 0; prod && k < nr; k++) pass_ring_rebase(p->f, rings[k], rings[k]->operands[0], rings[k]->operands[2], base);
    if (f->pingpong && prod && nr > 0 && f->warps == 4 && !p->carry) ping_pong(p, tl, rings, nr, rel, preds, nrel, base);
    else f->pingpong = 0;
    tl_free(moved);
    return true;
}

/* The keys are dropped where the kernel is not walked: the printed IR says so (and
 * says so to the pipeline: a change). */
static bool drop_keys(IrFunc *f)
{
    int persistent = f->persistent, pingpong = f->pingpong;
    if (f->kind == IR_FUNC_KERNEL && f->persistent && !any_op(&f->body, is_launched)) f->persistent = 0;
    if (f->kind == IR_FUNC_KERNEL && !any_op(&f->body, is_launched)) f->pingpong = 0;
    return f->persistent != persistent || f->pingpong != pingpong;
}

bool pass_persistent(IrFunc *f)
{
    if (!applicable(f)) return drop_keys(f);
    Pk p = {.f = f, .vary = tl_calloc(f->nvalues, sizeof(bool)), .need = tl_calloc(f->nvalues, sizeof(bool)),
            .map = tl_malloc(f->nvalues * sizeof(IrValue)), .nmap = f->nvalues,
            .i32 = ir_type_scalar(f->module->ctx, IR_I32)};
    if (!p.vary || !p.need || !p.map) tl_oom();
    memset(p.map, 0xff, f->nvalues * sizeof(IrValue));
    mark_vary(&p, &f->body);
    int keys = f->persistent | f->pingpong;
    bool ok = walk(&p);
    if (!ok) f->persistent = f->pingpong = 0;
    tl_free(p.vary);
    tl_free(p.need);
    tl_free(p.map);
    return ok || keys;
}
