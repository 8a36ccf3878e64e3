/* Epilogue subtiling: a GEMM's epilogue in chunks of the accumulator's columns, so that
 * the registers hold the accumulator and one chunk of each tile the epilogue loads, not
 * every such tile whole beside it.
 *
 * Why: at 128 x 256 on 8 warps the f32 accumulator takes 128 registers a thread; an
 * epilogue that loads two [128, 256] bf16 tiles (the SwiGLU backward's dX GEMM loads the
 * gate's and the up projection's pre-activations) issued them whole in the
 * accumulator's layout, 128 registers more, and ptxas spilled 2 KB (the Llama training
 * step's k29). In chunks of 32 columns a bf16 load is 8 registers, and the chunk's f32
 * temporaries (the SwiGLU backward keeps three alive) 16 each: k29 at 128 x 256 then
 * compiles without spills (in chunks of 64 it still spilled 268 bytes).
 *
 * require:    the tile level (before passes/layout.c), a kernel's warps set
 * guarantees: a kernel of one top-level `for` that accumulates a dot into a [BM, BN]
 *             tile (BN a multiple of 32, at least 128, BM not BN, at least 128 f32 a
 *             thread), followed by an epilogue that loads [BM, BN] (or [1, BN], [BN])
 *             tiles, more than fit beside the accumulator (its registers and theirs
 *             whole over 200 a thread; knob epichunk = 2: any), computes element-wise
 *             and stores, is rewritten as that epilogue once
 *             per chunk of 32 columns, in order: chunk j's values are `extract` of the
 *             accumulator's columns [32 j, 32 j + 32), its loads and stores of the
 *             chunk's columns (block loads and stores at the column offset + 32 j, an
 *             arange from lo + 32 j), then chunk j + 1's. Values are unchanged.
 *
 *   %acc = for ... iter(...) : f32[128, 256] { ... dot ... }
 *   %g = load %p, %m : bf16[128, 256]          %c0 = extract 0 %acc : f32[128, 32]
 *   %y = mul %acc, %g                    ->    %g0 = load %p0, %m0 : bf16[128, 32]
 *   store %q, %y, %m                           store %q0, (mul %c0, %g0), %m0
 *                                              %c1 = extract 32 %acc ... (chunks 1..7)
 *
 * What the epilogue may hold (else the pass leaves the kernel as it is): element-wise
 * ops, consts, splats, broadcasts, expand_dims, aranges, loads, block loads, stores and
 * block stores; a wide value (its last axis the tile's BN columns) derives from those,
 * the accumulator, and wide values made before the loop (a column sum, a kernel
 * argument's...: each chunk takes its columns by `extract`, through shared memory where
 * the layouts differ), not from another result of the loop. Values of other shapes
 * ([BM, 1] rows, scalars) are shared by the chunks.
 *
 * Where the accumulator is a wgmma accumulator (warps along M), the layout pass lays
 * each chunk out in the alike mma layout of N 32, and an mma.sync accumulator's chunk
 * (sm_80) in its own layout (whole periods of the warps' columns): the extract moves no
 * data (ir_layout_in_registers). The chunks' block stores are TMA stores through one
 * staging area in sequence (passes/tmastore.c, `tma_store seq k`) where it fits, else
 * masked stores. The knob epichunk (TILE_EPICHUNK): 0 never, 1 as above, 2 wherever
 * the epilogue loads a wide tile. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#include "ir/target.h"

#define CHUNK 32   /* columns a chunk */

typedef struct Chunker {
    IrFunc *f;
    const IrOp *loop;
    IrValue acc;                 /* the loop result that is the accumulator */
    int32_t bn, lo;              /* the tile's columns; this chunk's first */
    IrValue *map;                /* wide value -> its chunk (IR_NO_VALUE: not yet) */
    IrBuilder b;
    bool ok;
} Chunker;

static bool wide(const Chunker *k, IrValue v)
{
    const IrType *t = ir_value_type(k->f, v);
    return t->rank >= 1 && t->shape[t->rank - 1] == k->bn;
}

static const IrType *chunk_type(const Chunker *k, const IrType *t)
{
    int32_t s[IR_MAX_RANK];
    memcpy(s, t->shape, sizeof s);
    s[t->rank - 1] = CHUNK;
    return ir_type_tile(k->f->module->ctx, ir_type_elem(k->f->module->ctx, t), t->rank, s);
}

static bool chunkable(const IrOp *op)
{
    switch (op->code) {
    case IR_OP_CONST: case IR_OP_SPLAT: case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS: case IR_OP_ARANGE:
    case IR_OP_LOAD: case IR_OP_BLOCK_LOAD: case IR_OP_STORE: case IR_OP_BLOCK_STORE:
    case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS:
        return true;
    default: return op->nregions == 0 && op->nresults == 1 && (ir_op_info[op->code].flags & IR_E);
    }
}

/* The last offset operand of a block op (the column offset) moved by the chunk's lo. */
static IrValue shifted_offset(Chunker *k, IrValue off)
{
    if (!k->lo) return off;
    IrValue lo = ir_const_int(&k->b, ir_value_type(k->f, off), k->lo);
    return ir_build_binary(&k->b, IR_OP_ADD, off, lo);
}

static IrValue chunk_of(Chunker *k, IrValue v, int depth);

/* a comes before b in their block */
static bool op_before(const IrOp *a, const IrOp *b)
{
    for (const IrOp *o = a->next; o; o = o->next)
        if (o == b) return true;
    return false;
}

/* A copy of op at the builder with its wide operands chunked (result: the chunk type). */
static IrOp *clone_chunked(Chunker *k, const IrOp *op, int depth)
{
    IrValue ops[32];
    if (op->noperands > 32) return k->ok = false, NULL;
    for (uint32_t i = 0; i < op->noperands; i++) {
        ops[i] = wide(k, op->operands[i]) ? chunk_of(k, op->operands[i], depth + 1) : op->operands[i];
        if (!k->ok) return NULL;
    }
    bool block = op->code == IR_OP_BLOCK_LOAD || op->code == IR_OP_BLOCK_STORE;
    if (block) {   /* (ptr, shape x R, strides x R, offsets x R[, x, s][, value]) */
        const IrType *bt = ir_value_type(k->f, op->code == IR_OP_BLOCK_LOAD ? op->results[0]
                                                                             : op->operands[op->noperands - 1]);
        uint32_t r = (uint32_t)bt->rank;
        if (bt->rank < 1 || bt->shape[r - 1] != k->bn) return k->ok = false, NULL;
        ops[3 * r] = shifted_offset(k, op->operands[3 * r]);
    }
    const IrType *rt[4];
    for (uint32_t i = 0; i < op->nresults && i < 4; i++) {
        const IrType *t = ir_value_type(k->f, op->results[i]);
        rt[i] = wide(k, op->results[i]) ? chunk_type(k, t) : t;
    }
    IrOp *c = ir_build(&k->b, op->code, ops, op->noperands, rt, op->nresults, 0);
    c->attr = op->attr;
    if (op->code == IR_OP_ARANGE) c->attr.i += k->lo;
    return c;
}

/* The chunk of wide value v: the accumulator's extract, or its defining op cloned. */
static IrValue chunk_of(Chunker *k, IrValue v, int depth)
{
    if (k->map[v] != IR_NO_VALUE) return k->map[v];
    IrOp *d = k->f->values[v].def;
    /* the accumulator, and a wide value made before the loop by an op that has no
     * chunks of its own (a reduction, a block argument): the chunk's columns of it */
    bool before = d && d->parent == k->loop->parent && op_before(d, k->loop);
    if (v == k->acc || (!d && k->f->values[v].block != &k->loop->regions[0]) ||
        (before && (!chunkable(d) || d->nresults != 1))) {
        IrOp *x = ir_build(&k->b, IR_OP_EXTRACT, &v, 1, (const IrType *[]){chunk_type(k, ir_value_type(k->f, v))}, 1, 0);
        x->attr.i = k->lo;
        return k->map[v] = x->results[0];
    }
    if (!d || d == k->loop || depth > 256 || !chunkable(d) || d->nresults != 1) return k->ok = false, IR_NO_VALUE;
    if (d->code == IR_OP_MULTIPLE_OF || d->code == IR_OP_MAX_CONTIGUOUS)   /* hints of the whole tile */
        return k->map[v] = chunk_of(k, d->operands[0], depth + 1);
    IrOp *c = clone_chunked(k, d, depth);
    if (!c) return IR_NO_VALUE;
    k->f->values[c->results[0]].name = k->f->values[v].name;
    return k->map[v] = c->results[0];
}

/* The loop result that a dot accumulates into (the iter argument the dot updates and
 * the body yields), or IR_NO_VALUE. */
static IrValue accumulator(const IrFunc *f, const IrOp *loop)
{
    const IrBlock *body = &loop->regions[0];
    const IrOp *y = body->last;
    if (!y || y->code != IR_OP_YIELD) return IR_NO_VALUE;
    for (uint32_t i = 0; i < loop->nresults && i < y->noperands; i++) {
        const IrOp *d = f->values[y->operands[i]].def;
        if (d && d->code == IR_OP_DOT && d->parent == body && d->operands[2] == body->args[i + 1] &&
            ir_value_type(f, loop->results[i])->rank == 2)
            return loop->results[i];
    }
    return IR_NO_VALUE;
}

static bool is_store(const IrOp *op) { return op->code == IR_OP_STORE || op->code == IR_OP_BLOCK_STORE; }

bool pass_epichunk(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL || !f->module || !f->module->knobs.epichunk) return false;
    const TileTarget *tg = f->module->target ? f->module->target : tile_target_default();
    if (!tg->wgmma && !tg->mma_sync) return false;
    IrOp *loop = NULL;
    for (IrOp *op = f->body.first; op; op = op->next) {
        if (op->nregions && op->code != IR_OP_FOR) return false;
        if (op->code == IR_OP_FOR) {
            if (loop) return false;   /* one loop: the GEMM's */
            loop = op;
        }
    }
    if (!loop) return false;
    IrValue acc = accumulator(f, loop);
    if (acc == IR_NO_VALUE) return false;
    const IrType *at = ir_value_type(f, acc);
    int32_t bm = at->shape[0], bn = at->shape[1];
    int64_t threads = 32 * (int64_t)ir_func_warps(f);
    if (bn % CHUNK || bn < 128 || bm == bn || (int64_t)bm * bn / threads < 128 || ir_elem_bytes(at->elem) != 4)
        return false;
    Chunker k = {.f = f, .loop = loop, .acc = acc, .bn = bn, .ok = true};
    /* the epilogue: every op after the loop that touches a wide value is chunkable, and
     * it loads some wide tile (an epilogue of the accumulator alone gains nothing) */
    int64_t loaded = 0;   /* bytes a thread of the wide tiles the epilogue loads */
    IrOp *last = NULL;
    uint32_t nroots = 0;
    for (IrOp *op = loop->next; op; op = op->next) {
        bool touches = false;
        for (uint32_t i = 0; i < op->noperands; i++) touches |= wide(&k, op->operands[i]);
        for (uint32_t i = 0; i < op->nresults; i++) touches |= wide(&k, op->results[i]);
        if (!touches) continue;
        if (!chunkable(op)) return false;
        if (op->code == IR_OP_LOAD || op->code == IR_OP_BLOCK_LOAD) {
            const IrType *lt = ir_value_type(f, op->results[0]);
            loaded += ir_type_numel(lt) * ir_elem_bytes(lt->elem) / threads;
        }
        if (is_store(op)) last = op, nroots++;
    }
    for (uint32_t i = 0; i < loop->nresults; i++)   /* the accumulator the one wide result */
        if (loop->results[i] != acc && wide(&k, loop->results[i])) return false;
    /* the whole tiles' registers beside the accumulator's: over 200 of a thread's 232
     * (a consumer warpgroup's with a producer) they spilled (k29: 128 + 2 x 64); below,
     * the whole epilogue stays (knob epichunk = 2 chunks it anyway) */
    int64_t regs = (int64_t)bm * bn / threads + loaded / 4;
    if (!loaded || !nroots || (f->module->knobs.epichunk < 2 && regs <= 200)) return false;
    IrOp **roots = tl_calloc(nroots, sizeof *roots);
    uint32_t n = 0, cap = f->nvalues;   /* the original values: the only ones looked up */
    k.map = tl_malloc(cap * sizeof *k.map);
    if (!roots || !k.map) tl_oom();
    for (IrOp *op = loop->next; op; op = op->next) {
        bool touches = false;
        for (uint32_t i = 0; i < op->noperands; i++) touches |= wide(&k, op->operands[i]);
        if (is_store(op) && touches) roots[n++] = op;
    }
    /* the chunks' copies go after the last store, in order; a chunk that cannot be
     * made (a wide value of another origin) removes them again */
    IrOp *after = last->next;
    if (after) ir_builder_before(&k.b, after);
    else ir_builder_at_end(&k.b, &f->body);
    for (int32_t lo = 0; lo < bn && k.ok; lo += CHUNK) {
        k.lo = lo;
        for (uint32_t i = 0; i < cap; i++) k.map[i] = IR_NO_VALUE;
        for (uint32_t r = 0; r < nroots && k.ok; r++) {
            k.b.loc = roots[r]->loc;
            clone_chunked(&k, roots[r], 0);
        }
    }
    IrOp *first = last->next;   /* the first copy (after, where none was made) */
    if (!k.ok) {
        for (IrOp *op = first, *next; op && op != after; op = next) {
            next = op->next;
            ir_op_remove(op);
        }
        tl_free(roots);
        tl_free(k.map);
        return false;
    }
    for (uint32_t r = 0; r < nroots; r++) ir_op_remove(roots[r]);
    /* the whole tiles' loads and the rest of the epilogue are dead now: removed, last
     * first (loads read memory, so dce keeps them) */
    uint32_t *uses = ir_use_counts(f);
    for (IrOp *op = first ? first->prev : f->body.last, *prev; op && op != loop; op = prev) {
        prev = op->prev;
        bool dead = op->nregions == 0 && op->nresults > 0 &&
                    ((ir_op_info[op->code].flags & IR_P) || op->code == IR_OP_LOAD || op->code == IR_OP_BLOCK_LOAD);
        for (uint32_t i = 0; dead && i < op->nresults; i++) dead = uses[op->results[i]] == 0;
        if (!dead) continue;
        for (uint32_t i = 0; i < op->noperands; i++) uses[op->operands[i]]--;
        ir_op_remove(op);
    }
    free(uses);
    tl_free(roots);
    tl_free(k.map);
    pass_dce(f);
    return true;
}
