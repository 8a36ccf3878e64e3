/* Layout assignment: gives every tile of a kernel its layout (ir/layout.h), the first
 * pass of the GPU level; code generation reads layouts from the types and never
 * chooses one.
 *
 * require:    verified IR without layouts (the tile level), a kernel's warps set
 * guarantees: every tile value (op results and region arguments) has a layout:
 *             the blocked layout of its shape, or, around tensor-core dots, an mma
 *             layout (the dot, loop-carried accumulators, and the values that
 *             layout propagation below produces in it: epilogues, their stores'
 *             pointers and masks, slices for row and column vectors); every change
 *             of layout is an explicit convert_layout, and none is left dead; values
 *             are unchanged
 *
 *   %m = cmp lt %o, %n : i1[1024]   ->   %m = cmp lt %o, %n : i1[1024] #blocked
 *   layout #blocked = blocked<spt = [8], tpw = [32], wpc = [4], order = [0]>
 *
 * The blocked layout of a shape: per thread a run along the last axis of one 16-byte
 * vector of the widest element that the kernel's loads of that shape move (its stores'
 * where none loads it; 8 f16, 4 f32; 8 elements where no load or store has the shape;
 * the other side of a conversion, f32 stored from bf16 loaded, moves other widths),
 * so that each
 * thread's access is one vector and a warp's is 512 contiguous bytes (a run of two
 * vectors had each warp instruction touch every other 16 bytes of 1 KiB: half of each
 * sector, twice the L1 wavefronts; the knob vector_run = 0 keeps 8 elements whatever
 * their size, as before); lanes fill the last axis first, then the next; warps go to the
 * first axis first (rows of a matrix to different warps); where the program has more
 * threads than the tile has elements, the last axis' lanes (and the first axis'
 * warps) hold copies. Shape changes (broadcast, expand_dims, trans, reshape, the
 * result of a reduction) are where two layouts meet; codegen converts there, directly
 * when every thread already holds what it needs, else through shared memory.
 *
 * Dots that a tensor-core instruction computes (mma_layout_for) get its layouts: the
 * accumulator an mma layout, the operands dot_operand layouts of it, with converts
 * around the dot (the loops keep the accumulator in the mma layout where they can). */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/layout.h"
#include "ir/target.h"

static int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

/* The widest element (bytes) each shape's loads move, and its stores' and atomics':
 * pointer tiles of loads, stores and atomics, block loads' results and block stores'
 * values. */
static void note_run(PassRuns *r, const IrType *t, int bytes, bool load)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (r->e[i].rank == t->rank && !memcmp(r->e[i].shape, t->shape, sizeof t->shape)) {
            int *b = load ? &r->e[i].load_bytes : &r->e[i].bytes;
            if (bytes > *b) *b = bytes;
            return;
        }
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->e = tl_realloc(r->e, r->cap * sizeof *r->e);
        if (!r->e) tl_oom();
    }
    r->e[r->n].rank = t->rank;
    memcpy(r->e[r->n].shape, t->shape, sizeof t->shape);
    r->e[r->n].load_bytes = load ? bytes : 0;
    r->e[r->n++].bytes = load ? 0 : bytes;
}

static void collect_runs(IrOp *op, void *ctx)
{
    PassRuns *r = ctx;
    const IrFunc *f = r->f;
    const IrType *t = NULL;
    int bytes = 0;
    if (op->code == IR_OP_BLOCK_LOAD) {
        t = ir_value_type(f, op->results[0]);
        bytes = ir_elem_bytes(t->elem);
    } else if (op->code == IR_OP_BLOCK_STORE) {
        t = ir_value_type(f, op->operands[op->noperands - 1]);
        bytes = ir_elem_bytes(t->elem);
    } else if (op->code == IR_OP_LOAD || op->code == IR_OP_STORE ||
               (op->code >= IR_OP_ATOMIC_ADD && op->code <= IR_OP_ATOMIC_CAS)) {
        t = ir_value_type(f, op->operands[0]);
        bytes = t->rank ? ir_elem_bytes(t->pointee) : 0;
    }
    if (t && t->rank && bytes > 0) note_run(r, t, bytes, op->code == IR_OP_LOAD || op->code == IR_OP_BLOCK_LOAD);
}

void pass_runs_init(PassRuns *r, IrFunc *f)
{
    memset(r, 0, sizeof *r);
    r->f = f;
    r->on = f->module->knobs.vector_run;
    if (r->on) ir_walk(&f->body, collect_runs, r);
}

void pass_runs_free(PassRuns *r)
{
    tl_free(r->e);
    memset(r, 0, sizeof *r);
}

/* A thread's run along the last axis of t's shape: 16 bytes of the widest element its
 * loads move (as Triton's layouts follow the loads), of its stores' and atomics' where
 * it has no load; at most 8 elements; 8 without such an access (or runs NULL or off). */
static int32_t run_of(const PassRuns *r, const IrType *t)
{
    if (!r || !r->on) return 8;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->e[i].rank == t->rank && !memcmp(r->e[i].shape, t->shape, sizeof t->shape)) {
            int bytes = r->e[i].load_bytes ? r->e[i].load_bytes : r->e[i].bytes;
            return bytes >= 16 ? 1 : min32(8, 16 / bytes);
        }
    return 8;
}

const IrLayout *pass_blocked_layout(IrCtx *c, int warps, const IrType *t, const PassRuns *runs)
{
    int r = t->rank;
    int32_t spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK];
    int64_t per = ir_type_numel(t) / (warps * 32), run = run_of(runs, t);
    for (int d = 0; d < r; d++) spt[d] = tpw[d] = wpc[d] = 1;
    spt[r - 1] = min32(t->shape[r - 1], per < 1 ? 1 : per > run ? (int32_t)run : (int32_t)per);
    int32_t lanes = 32;
    for (int d = r - 1; d >= 0; d--) {
        tpw[d] = min32(lanes, t->shape[d] / spt[d]);
        lanes /= tpw[d];
    }
    tpw[r - 1] *= lanes;                 /* too few elements: lanes hold copies */
    int32_t w = warps;
    for (int d = 0; d < r; d++) {
        int32_t room = t->shape[d] / (spt[d] * tpw[d]);
        wpc[d] = min32(w, room < 1 ? 1 : room);
        w /= wpc[d];
    }
    wpc[0] *= w;
    return ir_layout_blocked(c, r, spt, tpw, wpc, NULL);
}

/* ---- dots on tensor cores ------------------------------------------------------------- */

/* The warps of an mma.sync accumulator [M, N]: a WM x WN grid, each warp at least one
 * 16 x 8 instruction tile, the warps' tiles as square as the shape allows. False if
 * the warps do not fit. */
static bool mma_warps(int warps, int32_t M, int32_t N, int32_t wpc[2])
{
    wpc[0] = wpc[1] = 1;
    while (wpc[0] * wpc[1] < warps) {
        bool m_ok = M / (16 * wpc[0]) >= 2, n_ok = N / (8 * wpc[1]) >= 2;
        if (m_ok && (!n_ok || M / wpc[0] >= N / wpc[1])) wpc[0] *= 2;
        else if (n_ok) wpc[1] *= 2;
        else return false;
    }
    return true;
}

/* Row-wise dots (attention's S = Q K^T and O = P V): a result reduced along its rows or
 * fed to another dot as A, or an A that another dot computed. Their warps all go along
 * M (WN = 1) as far as M allows, so that a row lives in one warp: row reductions are
 * shuffles within groups of four lanes, and the accumulator of one dot is the next
 * one's A operand without moving (cg_convert finds every element in place). */
static bool passes_through(const IrOp *d)
{
    unsigned fl = ir_op_info[d->code].flags;
    return d->nresults == 1 && ((fl & IR_E) || d->code == IR_OP_CONVERT_LAYOUT);
}

/* (at most *budget ops looked at, so that a huge kernel stays linear) */
static bool feeds_rowwise(const IrFunc *f, const IrBlock *blk, IrValue v, int depth, int *budget)
{
    if (depth > 12) return false;
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (--*budget < 0) return false;
        for (uint32_t r = 0; r < op->nregions; r++)
            if (feeds_rowwise(f, &op->regions[r], v, depth, budget)) return true;
        for (uint32_t i = 0; i < op->noperands; i++) {
            if (op->operands[i] != v) continue;
            bool red = op->code == IR_OP_SUM || op->code == IR_OP_MAX || op->code == IR_OP_MIN;
            if ((red && op->attr.i == 1) || (op->code == IR_OP_DOT && i == 0)) return true;
            if (passes_through(op) && feeds_rowwise(f, &f->body, op->results[0], depth + 1, budget)) return true;
        }
    }
    return false;
}

static bool computed_by_dot(const IrFunc *f, IrValue v, int depth)
{
    const IrOp *d = f->values[v].def;
    if (!d || depth > 12) return false;
    if (d->code == IR_OP_DOT) return true;
    if (!passes_through(d)) return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (ir_value_type(f, d->operands[i])->rank == 2 && computed_by_dot(f, d->operands[i], depth + 1)) return true;
    return false;
}

static bool rowwise_warps(int warps, int32_t M, int32_t wpc[2])
{
    wpc[0] = warps <= M / 16 ? warps : M / 16;
    wpc[1] = warps / wpc[0];
    return wpc[0] >= 1;
}

/* A dot that wgmma (mma version 3) may compute on sm_90a: f16 or bf16 (K steps of 16)
 * or f8e4m3/f8e5m2 (K steps of 32) into f32, every warpgroup of 4 warps owning whole
 * m64 blocks of rows (warps along M only: M a multiple of 16 * warps), the whole of N in
 * one instruction (N <= 256), and operand tiles whose rows the 32/64/128-byte swizzles
 * can hold (every extent a multiple of 16). Returns the instruction's K, or 0. Its B
 * must then come from a shared-memory ring, its A from a ring or from registers (a Q
 * loaded once; attention's P, whose f8 form converts from S's accumulator by quad
 * shuffles: ir_layout_quad_shuffle); f8 operands must be K-major where wgmma reads them
 * (wgmma transposes only 16-bit ones): the shared pass transposes an N-major f8 B (or
 * M-major A) through a K-major buffer of its own (passes/shared.c, the f8 transpose).
 * The shared pass makes ring operands views of their stages, or, where one cannot be,
 * turns the dot back into mma.sync (version 2 with the same warps has the same
 * accumulator layout, and A in registers the same operand layout; f8 then goes through
 * f16 again). Row-wise dots (attention's S = Q K^T and
 * O = P V) run on wgmma too: S's layout (N = BN) and O's (N = D) are alike (rows_alike:
 * the same element in the same thread and register), so the rows rewrite below keeps
 * the softmax in S's layout and P, A from registers, converts to O's operand in place.
 * The knob wgmma = 0 (TILE_WGMMA=0) keeps every dot on mma.sync, wgmma_rows = 0 only
 * the row-wise ones (switches for measuring one against the other; cache keys name
 * every knob). */
static int32_t wgmma_fits(const IrFunc *f, IrElem in, IrElem acc, int32_t M, int32_t N, int32_t K, int warps)
{
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    int32_t ik = ir_wgmma_k(in, acc);
    if (!t->wgmma || !f->module->knobs.wgmma || !ik || warps % 4) return 0;
    return M % (16 * warps) == 0 && N % 16 == 0 && N <= 256 && K % ik == 0 ? ik : 0;
}

/* dot(a, b, acc) runs on mma.sync m16n8kK when an instruction takes its element types
 * (ir_mma_sync_k: f16/bf16/f8 K = 16, tf32 K = 8, i8/u8 K = 32), its K is a multiple of
 * the instruction's (M and N, powers of two of at least 16, always are of 16 and 8), and
 * the warps cover M x N. Anything else stays on FMAs. */
static const IrLayout *mma_layout_for(IrCtx *c, const IrFunc *f, const IrOp *dot)
{
    const IrType *a = ir_value_type(f, dot->operands[0]), *b = ir_value_type(f, dot->operands[1]);
    const IrType *r = ir_value_type(f, dot->results[0]);
    int32_t ik = b->elem == a->elem ? ir_mma_sync_k(a->elem, r->elem, (int)dot->attr.i) : 0;
    if (!ik) return NULL;
    int32_t M = r->shape[0], N = r->shape[1], K = a->shape[1], wpc[2];
    int warps = ir_func_warps(f);
    int budget = 1 << 16;
    bool rows = feeds_rowwise(f, &f->body, dot->results[0], 0, &budget) || computed_by_dot(f, dot->operands[0], 0);
    if (M % 16 || N % 8 || K % ik) return NULL;
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_MMA;
    k.rank = 2;
    int32_t wk = rows && !f->module->knobs.wgmma_rows ? 0 : wgmma_fits(f, a->elem, r->elem, M, N, K, warps);
    if (wk) {
        k.version = 3;
        k.wpc[0] = warps;
        k.wpc[1] = 1;
        k.instr[0] = 64;
        k.instr[1] = N;
        k.instr[2] = wk;
        return ir_layout_intern(c, &k);
    }
    if (!(rows && rowwise_warps(warps, M, wpc) && N / (8 * wpc[1]) >= 1) && !mma_warps(warps, M, N, wpc)) return NULL;
    k.version = 2;
    k.wpc[0] = wpc[0];
    k.wpc[1] = wpc[1];
    k.instr[0] = 16;
    k.instr[1] = 8;
    k.instr[2] = ik;
    return ir_layout_intern(c, &k);
}

static const IrLayout *operand_layout(IrCtx *c, const IrLayout *mma, int op)
{
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_DOT_OPERAND;
    k.rank = 2;
    k.op = op;
    k.kwidth = mma->instr[2] / 8;    /* K elements per 32-bit register: 1 tf32, 2 f16, 4 i8 */
    k.parent = mma;
    return ir_layout_intern(c, &k);
}

/* A new value: v converted to layout l, inserted before `at`. */
static IrValue convert_before(IrFunc *f, IrOp *at, IrValue v, const IrLayout *l)
{
    IrBuilder b;
    ir_builder_before(&b, at);
    b.loc = at->loc;
    const IrType *t = ir_value_type(f, v);
    return ir_build1(&b, IR_OP_CONVERT_LAYOUT, ir_type_with_layout(f->module->ctx, t, l), &v, 1);
}

/* Every use of v but in `except` now uses w. */
static void replace_uses_but(IrFunc *f, IrValue v, IrValue w, IrOp *except)
{
    ir_replace_all_uses(f, v, w);
    except->operands[0] = v;
}

/* The dot computes in the mma layout, its operands converted to it, and its result
 * converted back for the ops that use it (the loops below keep it where they can). */
static void lay_out_dot(IrFunc *f, IrOp *dot, const IrLayout *mma)
{
    IrCtx *c = f->module->ctx;
    const IrLayout *blocked = ir_value_type(f, dot->results[0])->layout;
    for (int i = 0; i < 3; i++)
        dot->operands[i] = convert_before(f, dot, dot->operands[i], i < 2 ? operand_layout(c, mma, i) : mma);
    IrValue r = dot->results[0];
    f->values[r].type = ir_type_with_layout(c, f->values[r].type, mma);
    IrValue back = convert_before(f, dot->next, r, blocked);
    replace_uses_but(f, r, back, f->values[back].def);
}

static void collect_dots(IrOp *op, void *ud)
{
    IrOp ***out = ud;
    if (op->code == IR_OP_DOT) *(*out)++ = op;
}

/* ---- loop-carried values ---------------------------------------------------------------- */

static IrOp *convert_def(const IrFunc *f, IrValue v)
{
    IrOp *d = f->values[v].def;
    return d && d->code == IR_OP_CONVERT_LAYOUT ? d : NULL;
}

/* A for whose body yields convert_layout(v) for iteration value i carries v's layout
 * instead: the body argument, the result and the init take it, and converts are put
 * where the old layout is still wanted (they cancel in fold_converts).
 *   %acc.1 = for ... iter(%z) { ^(%i, %acc): ... %r = dot ..: #mma;
 *                               %rb = convert_layout %r : #blocked; yield %rb }
 * becomes a loop over #mma values with converts at its edges. */
static bool carry_layout(IrFunc *f, IrOp *loop, uint32_t i)
{
    IrBlock *body = &loop->regions[0];
    IrOp *yield = body->last;
    IrOp *cv = convert_def(f, yield->operands[i]);
    if (!cv) return false;
    IrCtx *c = f->module->ctx;
    IrValue inner = cv->operands[0], arg = body->args[i + 1], res = loop->results[i];
    const IrLayout *l = ir_value_type(f, inner)->layout, *old = ir_value_type(f, arg)->layout;
    if (l == old) return false;
    f->values[arg].type = ir_type_with_layout(c, f->values[arg].type, l);
    IrValue arg_old = convert_before(f, body->first, arg, old);
    replace_uses_but(f, arg, arg_old, f->values[arg_old].def);
    yield->operands[i] = inner;
    f->values[res].type = ir_type_with_layout(c, f->values[res].type, l);
    IrValue res_old = convert_before(f, loop->next, res, old);
    replace_uses_but(f, res, res_old, f->values[res_old].def);
    loop->operands[3 + i] = convert_before(f, loop, loop->operands[3 + i], l);
    return true;
}

static void carry_visit(IrOp *op, void *ud)
{
    IrFunc *f = ud;
    if (op->code != IR_OP_FOR) return;
    for (uint32_t i = 0; i < op->nresults; i++) carry_layout(f, op, i);
}

/* An mma layout that keeps each row in one warp (WN = 1). */
static bool rows_layout(const IrLayout *l)
{
    return l && l->kind == IR_LAYOUT_MMA && (l->version == 2 || l->version == 3) && l->wpc[1] == 1;
}

/* Two rows layouts that give every thread the same elements of a tile: equal, or
 * alike (ir_layout_alike: version 3 differing only in the instruction's N). */
static bool rows_alike(const IrLayout *a, const IrLayout *b)
{
    return a == b || (rows_layout(a) && rows_layout(b) && ir_layout_alike(a, b));
}

/* Alike and not the same: a conversion that moves nothing (mma or slice layouts; the A
 * operand case is the rows rewrite's own). */
static bool layouts_alike(const IrLayout *a, const IrLayout *b)
{
    return a && b && a->kind == b->kind && ir_layout_alike(a, b);
}

/* convert_layout(convert_layout(x)) back to x's layout is x, and into a layout alike
 * x's it converts x itself; a conversion to the same layout is its operand; a constant
 * converts by taking the new layout. */
static void fold_visit(IrOp *op, void *ud)
{
    IrFunc *f = ud;
    if (op->code != IR_OP_CONVERT_LAYOUT) return;
    IrValue x = op->operands[0], r = op->results[0];
    const IrType *rt = ir_value_type(f, r);
    IrOp *d = f->values[x].def;
    if (ir_value_type(f, x) == rt) {
        ir_replace_all_uses(f, r, x);
    } else if (d && d->code == IR_OP_CONVERT_LAYOUT && ir_value_type(f, d->operands[0]) == rt) {
        ir_replace_all_uses(f, r, d->operands[0]);
    } else if (d && d->code == IR_OP_CONVERT_LAYOUT && layouts_alike(ir_value_type(f, d->operands[0])->layout, rt->layout)) {
        op->operands[0] = d->operands[0];   /* in place, not through d's layout */
    } else if (d && (d->code == IR_OP_CONST || d->code == IR_OP_SPLAT)) {
        IrBuilder b;
        ir_builder_before(&b, op);
        b.loc = d->loc;
        IrOp *n = ir_build(&b, d->code, d->operands, d->noperands, &rt, 1, 0);
        n->attr = d->attr;
        ir_replace_all_uses(f, r, n->results[0]);
    }
}

/* ---- layout propagation: conversions removed by rematerialization ----------------------
 *
 * After the dots are anchored, a conversion sits wherever an accumulator meets the
 * blocked world: after the loop (mma -> blocked, a whole f32 tile through shared
 * memory) before the epilogue and the store, and before a dot whose accumulator starts
 * from a loaded tile. Both are removed by producing values in the accumulator layout
 * instead (after Triton's RemoveLayoutConversions, which was the model):
 *
 *   store root   a store whose value comes, through element-wise ops and dtype casts,
 *                from convert_layout(x) with x in an mma layout L: the value, the
 *                pointers and the mask are all produced in L, so the epilogue runs in
 *                L and the store writes the accumulator's column pairs (forward).
 *   convert root convert_layout(x) into an mma layout L (or a slice of one): x is
 *                produced in L instead (backward), e.g. a bias row loaded, expanded
 *                and broadcast is loaded in slice(L) and expanded in L.
 *
 * Producing v in L (plan_value) walks back from v: a value already in L is itself; a
 * convert_layout is transparent (its operand in L); a cheap op (element-wise, convert,
 * select, const, splat, arange, expand_dims, broadcast, the hints) is produced from its
 * operands in L (expand_dims from slice(L, axis)); a load may change its layout only if
 * it is moved, never copied. Anything else (reductions, dots, scans, rand, block
 * arguments, loop results in another layout) stops the plan. An op of the plan is
 * *moved* (retyped in place) when every use of it wants it in L, else *cloned* next to
 * the original, which keeps serving its other uses.
 *
 * The cost rule (docs/DECISIONS.md): a plan is applied only if the conversions it
 * removes cost more than the work it adds. A conversion through shared memory costs
 * 64 + 4 (n_src + n_dst) units, n the distinct elements per thread on each side (a
 * shared store or load with its address arithmetic per element, two barriers); an op
 * costs its distinct elements per thread in the layout it computes in, times 4 for
 * math functions and division, 2 for loads, 0 for const, splat, broadcast, expand_dims
 * and hints (register copies); a moved op costs only what its new layout adds over its
 * old one. Loads, reductions and dots are never duplicated. */

typedef struct Use {
    IrOp *op;
    uint32_t i;
} Use;

typedef struct Node {
    IrValue v;                   /* wanted in layout l */
    const IrLayout *l;
    IrOp *def;
    IrValue ops[3];              /* def's operands when planned (moving rewrites them) */
    uint32_t nops;
    bool through;                /* def is a convert_layout: v in l is its operand in l */
    bool moved;                  /* every use wants v in l: def is retyped in place */
    bool alike;                  /* v's layout is alike l (rows_alike): a conversion in place */
    IrValue done;                /* v in l, once applied */
} Node;

#define REMAT_MAX_NODES 256

typedef struct Remat {
    IrFunc *f;
    int threads;
    Node nodes[REMAT_MAX_NODES];
    uint32_t n;
    IrOp **roots;                /* the stores or the convert_layout whose operands are wanted */
    uint32_t nroots;
    const IrLayout *root_l;      /* in this layout */
    uint32_t *use_at;            /* CSR use lists: uses of v are use[use_at[v] .. use_at[v + 1]) */
    Use *use;
} Remat;

static bool in_mma_family(const IrLayout *l)
{
    return l && (l->kind == IR_LAYOUT_MMA || (l->kind == IR_LAYOUT_SLICE && l->parent->kind == IR_LAYOUT_MMA));
}

/* Distinct elements a thread holds of a tile of t's shape in layout l (mma.sync: rows g
 * and g + 8, columns 2t and 2t + 1 of each instruction tile; narrow tiles wrap). */
static int64_t distinct_elems(const IrType *t, const IrLayout *l, int threads)
{
    int64_t n = 1;
    switch (l->kind) {
    case IR_LAYOUT_BLOCKED:
        for (int d = 0; d < t->rank; d++) {
            int64_t span = (int64_t)l->spt[d] * l->tpw[d] * l->wpc[d];
            n *= l->spt[d] * (span >= t->shape[d] ? 1 : t->shape[d] / span);
        }
        return n;
    case IR_LAYOUT_MMA:
        if (l->version == 2 || l->version == 3) {   /* version 3 holds its elements as 2 does */
            int64_t rm = t->shape[0] / (16 * l->wpc[0]), rn = t->shape[1] / (8 * l->wpc[1]);
            return (rm < 1 ? 1 : rm) * (t->shape[0] >= 16 ? 2 : 1) * (rn < 1 ? 1 : rn) * (t->shape[1] >= 2 ? 2 : 1);
        }
        break;
    case IR_LAYOUT_SLICE: {
        IrType pt = *t;
        pt.rank = (uint8_t)(t->rank + 1);
        for (int d = t->rank; d > l->dim; d--) pt.shape[d] = t->shape[d - 1];
        pt.shape[l->dim] = 1;
        return distinct_elems(&pt, l->parent, threads);
    }
    default: break;
    }
    n = ir_type_numel(t) / threads;
    return n < 1 ? 1 : n;
}

static int64_t convert_cost(Remat *r, const IrOp *cv)
{
    const IrType *s = ir_value_type(r->f, cv->operands[0]), *d = ir_value_type(r->f, cv->results[0]);
    return 64 + 4 * (distinct_elems(s, s->layout, r->threads) + distinct_elems(d, d->layout, r->threads));
}

static int op_weight(IrOpcode code)
{
    switch (code) {
    case IR_OP_CONST: case IR_OP_SPLAT: case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS:
    case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS: case IR_OP_CONVERT_LAYOUT:
        return 0;
    case IR_OP_EXP: case IR_OP_EXP2: case IR_OP_LOG: case IR_OP_LOG2: case IR_OP_SQRT: case IR_OP_RSQRT:
    case IR_OP_SIN: case IR_OP_COS: case IR_OP_TANH: case IR_OP_ERF: case IR_OP_SIGMOID: case IR_OP_POW:
    case IR_OP_DIV: case IR_OP_REM:
        return 4;
    case IR_OP_LOAD: return 2;
    default: return 1;
    }
}

/* Whether def can be produced in layout l from its operands (loads: if moved). */
static bool cheap(const IrOp *d, const IrLayout *l)
{
    switch (d->code) {
    case IR_OP_CONST: case IR_OP_SPLAT: case IR_OP_BROADCAST: case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS:
    case IR_OP_LOAD:
        return true;
    case IR_OP_ARANGE: return l->rank == 1;
    case IR_OP_EXPAND_DIMS: return l->kind == IR_LAYOUT_MMA;
    default: return (ir_op_info[d->code].flags & IR_E) != 0;
    }
}

/* The layout in which a planned op wants operand i when it computes in l; NULL for
 * scalars. */
static const IrLayout *want(Remat *r, const IrOp *d, uint32_t i, const IrLayout *l)
{
    if (ir_value_type(r->f, d->operands[i])->rank == 0) return NULL;
    if (d->code == IR_OP_EXPAND_DIMS) return ir_layout_slice(r->f->module->ctx, l, (int)d->attr.i);
    return l;
}

static Node *find_node(Remat *r, IrValue v, const IrLayout *l)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (r->nodes[i].v == v && r->nodes[i].l == l) return &r->nodes[i];
    return NULL;
}

/* A new node: v wanted in l (the caller has checked there is room). */
static Node *add_node(Remat *r, IrValue v, const IrLayout *l)
{
    Node *n = &r->nodes[r->n++];
    memset(n, 0, sizeof *n);
    n->v = v;
    n->l = l;
    n->done = IR_NO_VALUE;
    return n;
}

/* Plans v in layout l; false if some value on the way cannot be produced there. */
static bool plan_value(Remat *r, IrValue v, const IrLayout *l, int depth)
{
    const IrType *t = ir_value_type(r->f, v);
    if (t->rank == 0 || t->layout == l || find_node(r, v, l)) return true;
    if (layouts_alike(t->layout, l) && r->n < REMAT_MAX_NODES) {
        add_node(r, v, l)->alike = true;
        return true;
    }
    IrOp *d = r->f->values[v].def;
    bool through = d && d->code == IR_OP_CONVERT_LAYOUT;
    if (!d || depth > 64 || r->n == REMAT_MAX_NODES || d->nresults != 1 || d->noperands > 3 ||
        (!through && !cheap(d, l)))
        return false;
    Node *n = add_node(r, v, l);
    n->def = d;
    n->through = through;
    n->nops = d->noperands;
    memcpy(n->ops, d->operands, d->noperands * sizeof *d->operands);
    for (uint32_t i = 0; i < d->noperands; i++) {
        const IrLayout *wl = want(r, d, i, l);
        if (wl && !plan_value(r, d->operands[i], wl, depth + 1)) return false;
    }
    return true;
}

/* ---- uses, and which planned ops move ---- */

static void count_use(IrOp *op, void *ud)
{
    Remat *r = ud;
    for (uint32_t i = 0; i < op->noperands; i++) r->use_at[op->operands[i] + 1]++;
}

static void fill_use(IrOp *op, void *ud)
{
    Remat *r = ud;
    for (uint32_t i = 0; i < op->noperands; i++) r->use[r->use_at[op->operands[i]]++] = (Use){op, i};
}

static void build_uses(Remat *r)
{
    uint32_t nv = r->f->nvalues;
    r->use_at = tl_calloc(nv + 1, sizeof *r->use_at);
    if (!r->use_at) tl_oom();
    ir_walk(&r->f->body, count_use, r);
    for (uint32_t v = 0; v < nv; v++) r->use_at[v + 1] += r->use_at[v];
    r->use = tl_calloc(r->use_at[nv] + 1, sizeof *r->use);
    if (!r->use) tl_oom();
    ir_walk(&r->f->body, fill_use, r);          /* leaves use_at[v] at the end of v's uses */
    for (uint32_t v = nv; v > 0; v--) r->use_at[v] = r->use_at[v - 1];
    r->use_at[0] = 0;
}

/* Whether use u of a value wants it in layout l, after the plan: the root, or a moved
 * op of the plan that computes in a layout wanting l there. */
static bool use_wants(Remat *r, Use u, const IrLayout *l)
{
    for (uint32_t i = 0; i < r->nroots; i++)
        if (u.op == r->roots[i]) return r->root_l == l;
    for (uint32_t i = 0; i < r->n; i++) {
        Node *m = &r->nodes[i];
        if (m->def == u.op && m->moved) return want(r, m->def, u.i, m->l) == l;
    }
    return false;
}

static void decide_moves(Remat *r)
{
    for (uint32_t i = 0; i < r->n; i++) r->nodes[i].moved = true;
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t i = 0; i < r->n; i++) {
            Node *n = &r->nodes[i];
            n->moved &= !n->alike;
            for (uint32_t u = r->use_at[n->v]; n->moved && u < r->use_at[n->v + 1]; u++)
                if (!use_wants(r, r->use[u], n->l)) {
                    n->moved = false;
                    changed = true;
                }
        }
    }
}

/* The plan's balance: conversions it removes minus work it adds (> 0: worth it), or
 * -1 if it would copy a load. */
static int64_t balance(Remat *r)
{
    int64_t gain = 0, cost = 0;
    for (uint32_t i = 0; i < r->nroots; i++)
        if (r->roots[i]->code == IR_OP_CONVERT_LAYOUT) gain += convert_cost(r, r->roots[i]);
    for (uint32_t i = 0; i < r->n; i++) {
        Node *n = &r->nodes[i];
        const IrType *t = ir_value_type(r->f, n->v);
        if (n->alike) continue;
        if (n->through) {
            if (n->moved) gain += convert_cost(r, n->def);
            continue;
        }
        if (n->def->code == IR_OP_LOAD && !n->moved) return -1;
        int64_t w = op_weight(n->def->code), now = w * distinct_elems(t, n->l, r->threads);
        int64_t before = n->moved ? w * distinct_elems(t, t->layout, r->threads) : 0;
        cost += now > before ? now - before : 0;
    }
    return gain - cost;
}

/* ---- applying a plan ---- */

static IrValue value_in(Remat *r, IrValue v, const IrLayout *l)
{
    IrFunc *f = r->f;
    if (ir_value_type(f, v)->rank == 0 || ir_value_type(f, v)->layout == l) return v;
    Node *n = find_node(r, v, l);
    if (n->done != IR_NO_VALUE) return n->done;
    if (n->through) return n->done = value_in(r, n->ops[0], l);
    if (n->alike) {   /* right after v's definition (a block argument: the block's start) */
        IrOp *d = f->values[v].def;
        return n->done = convert_before(f, d ? d->next : f->values[v].block->first, v, l);
    }
    IrValue ops[3];
    for (uint32_t i = 0; i < n->nops; i++) {
        bool expand = n->def->code == IR_OP_EXPAND_DIMS;
        ops[i] = value_in(r, n->ops[i], expand ? ir_layout_slice(f->module->ctx, l, (int)n->def->attr.i) : l);
    }
    const IrType *t = ir_type_with_layout(f->module->ctx, ir_value_type(f, v), l);
    if (n->moved) {
        memcpy(n->def->operands, ops, n->nops * sizeof *ops);
        f->values[v].type = t;
        return n->done = v;
    }
    IrBuilder b;
    ir_builder_before(&b, n->def->next);
    b.loc = n->def->loc;
    IrOp *c = ir_build(&b, n->def->code, ops, n->nops, &t, 1, 0);
    c->attr = n->def->attr;
    f->values[c->results[0]].name = f->values[v].name;
    return n->done = c->results[0];
}

static bool has_uses(const Remat *r, IrValue v) { return r->use_at[v + 1] > r->use_at[v]; }

/* Plans the roots' operands (all of them in l), and applies the plan if it pays (or,
 * forced, whenever it can be made). */
static bool try_roots(IrFunc *f, IrOp **roots, uint32_t nroots, const IrLayout *l, bool force)
{
    Remat *r = tl_calloc(1, sizeof *r);
    if (!r) tl_oom();
    r->f = f;
    r->threads = 32 * ir_func_warps(f);
    r->roots = roots;
    r->nroots = nroots;
    r->root_l = l;
    build_uses(r);
    bool ok = true;
    for (uint32_t k = 0; ok && k < nroots; k++) {
        IrOp *root = roots[k];
        ok = root->code != IR_OP_CONVERT_LAYOUT || has_uses(r, root->results[0]);
        for (uint32_t i = 0; ok && i < root->noperands; i++) ok = plan_value(r, root->operands[i], l, 0);
    }
    if (ok) {
        decide_moves(r);
        ok = balance(r) > 0 || force;
    }
    for (uint32_t k = 0; ok && k < nroots; k++) {
        IrOp *root = roots[k];
        if (root->code == IR_OP_CONVERT_LAYOUT)
            ir_replace_all_uses(f, root->results[0], value_in(r, root->operands[0], l));
        else
            for (uint32_t i = 0; i < root->noperands; i++) root->operands[i] = value_in(r, root->operands[i], l);
    }
    tl_free(r->use_at);
    tl_free(r->use);
    tl_free(r);
    return ok;
}

/* The mma layout a store's value was converted from, looking back through element-wise
 * ops of the value's shape; NULL if none. */
static const IrLayout *converted_from(const IrFunc *f, IrValue v, int depth)
{
    const IrOp *d = f->values[v].def;
    if (!d || depth > 32 || ir_value_type(f, v)->rank == 0) return NULL;
    if (d->code == IR_OP_CONVERT_LAYOUT) {
        const IrLayout *src = ir_value_type(f, d->operands[0])->layout;
        return src->kind == IR_LAYOUT_MMA ? src : NULL;
    }
    if (!(ir_op_info[d->code].flags & IR_E)) return NULL;
    for (uint32_t i = 0; i < d->noperands; i++) {
        const IrLayout *l = converted_from(f, d->operands[i], depth + 1);
        if (l) return l;
    }
    return NULL;
}

typedef struct Roots {
    IrOp **ops;
    uint32_t n, cap;
} Roots;

static void collect_roots(IrOp *op, void *ud)
{
    Roots *rs = ud;
    if (op->code != IR_OP_STORE && op->code != IR_OP_BLOCK_STORE && op->code != IR_OP_CONVERT_LAYOUT) return;
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 16;
        rs->ops = tl_realloc(rs->ops, rs->cap * sizeof *rs->ops);
        if (!rs->ops) tl_oom();
    }
    rs->ops[rs->n++] = op;
}

/* The value a store or block_store writes (NO_VALUE for other roots). */
static IrValue stored_value(const IrOp *op)
{
    if (op->code == IR_OP_STORE) return op->operands[1];
    return op->code == IR_OP_BLOCK_STORE ? op->operands[op->noperands - 1] : IR_NO_VALUE;
}

/* One round over the kernel's conversions into mma layouts and its stores (a
 * block_store's value too: passes/tmastore.c stages an accumulator layout): the stores
 * of values converted from one mma layout together (an epilogue that stores twice
 * keeps its shared ops in that layout only if both stores move), else one by one. */
static bool propagate(IrFunc *f)
{
    Roots rs = {0};
    ir_walk(&f->body, collect_roots, &rs);
    bool changed = false;
    IrOp **group = tl_calloc(rs.n + 1, sizeof *group);
    if (!group) tl_oom();
    for (uint32_t i = 0; i < rs.n; i++) {
        IrOp *op = rs.ops[i];
        if (op->code != IR_OP_CONVERT_LAYOUT) continue;
        const IrLayout *l = ir_value_type(f, op->results[0])->layout;
        if (in_mma_family(l)) changed |= try_roots(f, &op, 1, l, false);
    }
    for (uint32_t i = 0; i < rs.n; i++) {
        IrValue sv = stored_value(rs.ops[i]);
        const IrLayout *l = sv != IR_NO_VALUE ? converted_from(f, sv, 0) : NULL;
        if (!l) continue;
        uint32_t n = 0;
        for (uint32_t j = i; j < rs.n; j++) {
            IrValue w = stored_value(rs.ops[j]);
            if (w != IR_NO_VALUE && converted_from(f, w, 0) == l) group[n++] = rs.ops[j];
        }
        if (try_roots(f, group, n, l, false)) changed = true;
        else if (n > 1)
            for (uint32_t j = 0; j < n; j++) changed |= try_roots(f, &group[j], 1, l, false);
    }
    tl_free(group);
    tl_free(rs.ops);
    return changed;
}

bool pass_layout_store_in(IrFunc *f, IrOp *store, const IrLayout *l)
{
    return try_roots(f, &store, 1, l, true);
}

/* ---- rows in one warp: attention's softmax in the accumulator layout ------------------
 * Where an mma layout keeps each row in one warp (WN = 1), the row-wise work around it
 * is rebuilt in that layout instead of converting through shared memory: a row
 * reduction of a value computed (element-wise) from the accumulator reduces in #mma
 * into slice(#mma, 1); the A operand of the next dot (P of attention) is computed in
 * the accumulator layout, which holds every element of the operand in place; a value
 * converted into #mma (the rescaled O) is computed there. Values are rebuilt through
 * element-wise ops, constants, splats, aranges, expand_dims, broadcast and rand (a
 * counter-based function of each element's offset: dropout); loads of rows and tiles
 * (an additive mask) are issued again in the layout when no store comes between; a
 * 1-D value that cannot be rebuilt (a loop-carried row statistic) is converted, and
 * the loop then carries it in the slice layout (carry_layout). */
typedef struct RowsCache {
    IrValue from[1024], to[1024];
    const IrLayout *l[1024];
    int n;
} RowsCache;

/* The op of block b that is `at` or holds it in one of its regions; NULL if none. */
static const IrOp *op_in_block(const IrOp *at, const IrBlock *b)
{
    while (at && at->parent != b) at = at->parent ? at->parent->parent_op : NULL;
    return at;
}

/* r (built by in_layout before an earlier op) is there at `at`: its definition is in
 * at's block, or one around it, before at. The cache then serves every later
 * conversion of the kernel: dV's P and dK's dS of attention's backward share P, whose
 * exp2 was computed twice (and lse loaded three times) when each conversion rebuilt its
 * own chain. */
static bool available_at(const IrFunc *f, IrValue r, const IrOp *at)
{
    const IrOp *d = f->values[r].def, *top = d ? op_in_block(at, d->parent) : NULL;
    for (const IrOp *o = d ? d->next : NULL; top && o; o = o->next)
        if (o == top) return true;
    return false;
}

/* No store, atomic or barrier from ld to at (at in ld's block, later; or in a block
 * nested in it): a second load of ld's pointers at `at` reads what ld read. */
static bool no_store_between(const IrOp *ld, const IrOp *at)
{
    const IrOp *top = op_in_block(at, ld->parent);
    if (!top) return false;
    for (const IrOp *op = ld->next; op && op != top; op = op->next)
        if ((ir_op_info[op->code].flags & IR_W) && !(ir_op_info[op->code].flags & IR_G)) return false;
    /* inside `top` (a loop or if holding at), before at: only plain ops */
    if (top != at)
        for (const IrOp *op = at->parent->first; op && op != at; op = op->next)
            if (ir_op_info[op->code].flags & IR_W) return false;
    return top == at || !(ir_op_info[top->code].flags & IR_W);
}

/* v in layout l, built before `at`. `mixed`: v meets another value in an element-wise op
 * on the way (a tile loaded again there is combined with the accumulator, not a dot's
 * operand, which keeps its blocked load and its shared-memory path). */
static IrValue in_layout(IrFunc *f, RowsCache *rc, IrValue v, const IrLayout *l, IrOp *at, int depth, bool mixed)
{
    const IrType *t = ir_value_type(f, v);
    if (t->rank == 0 || t->layout == l) return v;
    for (int i = 0; i < rc->n; i++)
        if (rc->from[i] == v && rc->l[i] == l && available_at(f, rc->to[i], at)) return rc->to[i];
    if (depth > 16 || rc->n == 1024) return IR_NO_VALUE;
    IrCtx *c = f->module->ctx;
    IrOp *d = f->values[v].def;
    const IrType *nt = ir_type_with_layout(c, t, l);
    IrBuilder b;
    ir_builder_before(&b, at);
    b.loc = d ? d->loc : at->loc;
    IrValue r = IR_NO_VALUE;
    if (layouts_alike(t->layout, l)) {
        r = ir_build1(&b, IR_OP_CONVERT_LAYOUT, nt, &v, 1);   /* in place: no data moves */
    } else if (d && d->code == IR_OP_CONVERT_LAYOUT) {
        r = in_layout(f, rc, d->operands[0], l, at, depth + 1, mixed);
    } else if (d && (d->code == IR_OP_CONST || d->code == IR_OP_SPLAT || (d->code == IR_OP_ARANGE && t->rank == 1))) {
        IrOp *n = ir_build(&b, d->code, d->operands, d->noperands, &nt, 1, 0);
        n->attr = d->attr;
        r = n->results[0];
    } else if (d && d->nresults == 1 && !d->nregions && (ir_op_info[d->code].flags & IR_P) &&
               ((ir_op_info[d->code].flags & IR_E) || d->code == IR_OP_BROADCAST ||
                d->code == IR_OP_RAND || d->code == IR_OP_RANDN ||   /* counter-based: per element */
                (d->code == IR_OP_EXPAND_DIMS && t->rank == 2))) {
        IrValue ops[3];
        bool ok = d->noperands <= 3;
        for (uint32_t i = 0; ok && i < d->noperands; i++) {
            const IrLayout *want = d->code == IR_OP_EXPAND_DIMS ? ir_layout_slice(c, l, (int)d->attr.i) : l;
            ops[i] = in_layout(f, rc, d->operands[i], want, at, depth + 1,
                               mixed || ((ir_op_info[d->code].flags & IR_E) && d->noperands > 1));
            ok = ops[i] != IR_NO_VALUE;
        }
        if (ok) {
            IrOp *n = ir_build(&b, d->code, ops, d->noperands, &nt, 1, 0);
            n->attr = d->attr;
            r = n->results[0];
        }
    }
    if (r == IR_NO_VALUE && (t->rank == 1 || (t->rank == 2 && mixed)) && d && d->code == IR_OP_LOAD &&
        no_store_between(d, at)) {
        /* a row of statistics (attention's lse, delta) or a tile combined with the
         * accumulator (an additive attention mask): loaded again, in the layout its
         * users want, instead of converting it or the accumulator through shared
         * memory (the original load goes when nothing else uses it) */
        IrValue ops[3];
        bool ok = true;
        for (uint32_t i = 0; ok && i < d->noperands; i++) {
            ops[i] = in_layout(f, rc, d->operands[i], l, at, depth + 1, mixed);
            ok = ops[i] != IR_NO_VALUE;
        }
        if (ok) {
            IrOp *n = ir_build(&b, IR_OP_LOAD, ops, d->noperands, &nt, 1, 0);
            n->attr = d->attr;
            r = n->results[0];
        }
    }
    if (r == IR_NO_VALUE && t->rank == 1) r = ir_build1(&b, IR_OP_CONVERT_LAYOUT, nt, &v, 1);
    if (r != IR_NO_VALUE) {
        rc->from[rc->n] = v;
        rc->to[rc->n] = r;
        rc->l[rc->n++] = l;
    }
    return r;
}

/* The rows layout v was computed from (through element-wise ops and conversions). */
static const IrLayout *rows_source(const IrFunc *f, IrValue v, int depth)
{
    const IrOp *d = f->values[v].def;
    if (rows_layout(ir_value_type(f, v)->layout)) return ir_value_type(f, v)->layout;
    if (!d || depth > 16 || d->nresults != 1 || d->nregions) return NULL;
    if (d->code != IR_OP_CONVERT_LAYOUT && !(ir_op_info[d->code].flags & IR_E)) return NULL;
    for (uint32_t i = 0; i < d->noperands; i++) {
        if (ir_value_type(f, d->operands[i])->rank != 2) continue;
        const IrLayout *l = rows_source(f, d->operands[i], depth + 1);
        if (l) return l;
    }
    return NULL;
}

/* The slice of a rows layout a 1-D value was computed from (through element-wise ops). */
static const IrLayout *slice_source(const IrFunc *f, IrValue v, int depth)
{
    const IrLayout *l = ir_value_type(f, v)->layout;
    if (l && l->kind == IR_LAYOUT_SLICE && rows_layout(l->parent)) return l;
    const IrOp *d = f->values[v].def;
    if (!d || depth > 16 || d->nresults != 1 || d->nregions) return NULL;
    if (d->code != IR_OP_CONVERT_LAYOUT && !(ir_op_info[d->code].flags & IR_E)) return NULL;
    for (uint32_t i = 0; i < d->noperands; i++) {
        if (ir_value_type(f, d->operands[i])->rank != 1) continue;
        const IrLayout *s = slice_source(f, d->operands[i], depth + 1);
        if (s) return s;
    }
    return NULL;
}

typedef struct RowsWalk {
    IrFunc *f;
    IrOp **ops;
    uint32_t n, cap;
} RowsWalk;

static void rows_collect(IrOp *op, void *ud)
{
    RowsWalk *w = ud;
    bool red = (op->code == IR_OP_SUM || op->code == IR_OP_MAX || op->code == IR_OP_MIN) && op->attr.i == 1;
    if (!red && op->code != IR_OP_CONVERT_LAYOUT && op->code != IR_OP_YIELD) return;
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 32;
        w->ops = tl_realloc(w->ops, w->cap * sizeof *w->ops);
        if (!w->ops) tl_oom();
    }
    w->ops[w->n++] = op;
}

static bool rows_rewrite(IrFunc *f, IrOp *op, RowsCache *rc)
{
    IrCtx *c = f->module->ctx;
    if (op->code == IR_OP_CONVERT_LAYOUT) {
        const IrLayout *to = ir_value_type(f, op->results[0])->layout;
        const IrLayout *p = to->kind == IR_LAYOUT_DOT_OPERAND && to->op == 0 ? to->parent : to;
        if (!rows_layout(p)) return false;
        /* P of attention on wgmma: S's layout and O's differ only in the instruction's N
         * (the same element of each thread); P is computed in S's and converted in place */
        const IrLayout *src = rows_source(f, op->operands[0], 0);
        const IrLayout *q = src && rows_alike(src, p) ? src : p;
        if (ir_value_type(f, op->operands[0])->layout == q) return false;
        IrValue x = in_layout(f, rc, op->operands[0], q, op, 0, false);
        if (x == IR_NO_VALUE) return false;
        if (q == to) ir_replace_all_uses(f, op->results[0], x);
        else op->operands[0] = x;
        return true;
    }
    if (op->code == IR_OP_YIELD) {
        /* a carried row statistic the body converts to a slice: yield it in that slice */
        IrOp *loop = op->parent->parent_op;
        if (!loop || loop->code != IR_OP_FOR) return false;
        bool changed = false;
        for (uint32_t i = 0; i < op->noperands; i++) {
            IrValue arg = loop->regions[0].args[i + 1];
            const IrLayout *want = NULL;
            for (const IrOp *u = loop->regions[0].first; u && !want; u = u->next)
                if (u->code == IR_OP_CONVERT_LAYOUT && u->operands[0] == arg &&
                    ir_value_type(f, u->results[0])->layout->kind == IR_LAYOUT_SLICE)
                    want = ir_value_type(f, u->results[0])->layout;
            const IrType *yt = ir_value_type(f, op->operands[i]);
            if (yt->rank != 1) continue;
            if (!want) want = slice_source(f, op->operands[i], 0);
            if (!want || yt->layout == want) continue;
            IrValue x = in_layout(f, rc, op->operands[i], want, op, 0, false);
            if (x == IR_NO_VALUE) continue;
            op->operands[i] = convert_before(f, op, x, yt->layout);
            changed = true;
        }
        return changed;
    }
    /* a row reduction */
    const IrLayout *l = rows_source(f, op->operands[0], 0);
    if (!l || ir_value_type(f, op->operands[0])->layout == l) return false;
    IrValue x = in_layout(f, rc, op->operands[0], l, op, 0, false);
    if (x == IR_NO_VALUE) return false;
    IrValue r = op->results[0];
    const IrLayout *old = ir_value_type(f, r)->layout;
    op->operands[0] = x;
    f->values[r].type = ir_type_with_layout(c, f->values[r].type, ir_layout_slice(c, l, 1));
    IrValue back = convert_before(f, op->next, r, old);
    replace_uses_but(f, r, back, f->values[back].def);
    return true;
}

static bool rows_in_one_warp(IrFunc *f)
{
    RowsWalk w = {f, NULL, 0, 0};
    ir_walk(&f->body, rows_collect, &w);
    bool changed = false;
    RowsCache *rc = tl_calloc(1, sizeof *rc);
    if (!rc) tl_oom();
    /* reductions and conversions first, then yields; the cache is kept from one to the
     * next (what a later one finds built before it is reused: available_at), emptied
     * only when it is half full */
    for (int yields = 0; yields < 2; yields++)
        for (uint32_t i = 0; i < w.n; i++) {
            if ((w.ops[i]->code == IR_OP_YIELD) != yields) continue;
            if (rc->n > 512) rc->n = 0;
            changed |= rows_rewrite(f, w.ops[i], rc);
        }
    tl_free(rc);
    tl_free(w.ops);
    return changed;
}

/* ---- the axis in each thread: reduce and scan with a combine, reversed scans ------------- */

/* The blocked layout of t with axis a wholly in each thread (spt[a] = shape[a]); the
 * other axes spread over lanes and warps as in pass_blocked_layout, spare lanes and
 * warps holding copies. codegen/cg_reduce.c folds and scans such an axis in order,
 * which a combine that is only associative (or a reversed scan) needs. */
static const IrLayout *axis_local_layout(IrCtx *c, int warps, const IrType *t, int a)
{
    int r = t->rank;
    int32_t spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK], lanes = 32, w = warps;
    for (int d = 0; d < r; d++) spt[d] = tpw[d] = wpc[d] = 1;
    spt[a] = t->shape[a];
    for (int d = r - 1; d >= 0; d--)
        if (d != a) lanes /= (tpw[d] = min32(lanes, t->shape[d]));
    tpw[r - 1] *= lanes;
    for (int d = 0; d < r; d++)
        if (d != a) {
            int32_t room = t->shape[d] / tpw[d];
            w /= (wpc[d] = min32(w, room < 1 ? 1 : room));
        }
    wpc[0] *= w;
    return ir_layout_blocked(c, r, spt, tpw, wpc, NULL);
}

/* The blocked layout of t with each thread's part of axis a one contiguous run
 * (reps[a] = 1: spt[a] grows instead): the order in which reduce and scan with a
 * combine meet the elements (codegen/cg_reduce.c). */
static const IrLayout *axis_run_layout(IrCtx *c, int warps, const IrType *t, int a, const PassRuns *runs)
{
    const IrLayout *b = pass_blocked_layout(c, warps, t, runs);
    int32_t spt[IR_MAX_RANK], span = b->spt[a] * b->tpw[a] * b->wpc[a];
    memcpy(spt, b->spt, sizeof spt);
    if (t->shape[a] > span) spt[a] *= t->shape[a] / span;
    return ir_layout_blocked(c, t->rank, spt, b->tpw, b->wpc, NULL);
}

static bool needs_local_axis(const IrOp *op)
{
    return op->code == IR_OP_REDUCE || op->code == IR_OP_SCAN ||
           ((op->code == IR_OP_CUMSUM || op->code == IR_OP_CUMPROD) && (op->attr.i & IR_SCAN_REVERSE));
}

typedef struct LocalOps {
    IrOp **ops;
    uint32_t n, cap;
} LocalOps;

static void collect_local(IrOp *op, void *ud)
{
    LocalOps *lo = ud;
    if (!needs_local_axis(op)) return;
    if (lo->n == lo->cap) {
        lo->cap = lo->cap ? 2 * lo->cap : 8;
        if (!(lo->ops = tl_realloc(lo->ops, lo->cap * sizeof *lo->ops))) tl_oom();
    }
    lo->ops[lo->n++] = op;
}

/* The operands converted to the axis-local layout; a scan's results in it too, with
 * conversions back for their uses (a reduction's results keep their own layouts:
 * codegen converts them from the collapsed layout, as for sum). */
static void lay_out_local(IrFunc *f, IrOp *op, int warps, const PassRuns *runs)
{
    IrCtx *c = f->module->ctx;
    const IrType *t = ir_value_type(f, op->operands[0]);
    int a = (int)(op->attr.i & IR_AXIS_MASK);
    bool region = op->code == IR_OP_REDUCE || op->code == IR_OP_SCAN;
    const IrLayout *l = region ? axis_run_layout(c, warps, t, a, runs) : axis_local_layout(c, warps, t, a);
    for (uint32_t i = 0; i < op->noperands; i++)
        if (ir_value_type(f, op->operands[i])->layout != l) op->operands[i] = convert_before(f, op, op->operands[i], l);
    if (op->code == IR_OP_REDUCE) return;
    for (uint32_t i = 0; i < op->nresults; i++) {
        IrValue r = op->results[i];
        const IrLayout *own = ir_value_type(f, r)->layout;
        f->values[r].type = ir_type_with_layout(c, f->values[r].type, l);
        IrValue back = convert_before(f, op->next, r, own);
        ir_replace_all_uses(f, r, back);
        f->values[back].def->operands[0] = r;
    }
}

static bool lay_out_locals(IrFunc *f, int warps, const PassRuns *runs)
{
    LocalOps lo = {0};
    ir_walk(&f->body, collect_local, &lo);
    for (uint32_t i = 0; i < lo.n; i++) lay_out_local(f, lo.ops[i], warps, runs);
    tl_free(lo.ops);
    return lo.n > 0;
}

/* ---- extracts of an accumulator's columns (passes/epichunk.c) -------------------------
 * An extract whose operand converts a wgmma accumulator (warps along M) out of its mma
 * layout takes the accumulator itself, its chunk in the alike mma layout of the chunk's
 * N (the same threads and registers: no data moves, ir_layout_in_registers), converted
 * back for its users; propagation then keeps the chunk's epilogue in that layout. */
static void chunk_visit(IrOp *op, void *ud)
{
    IrFunc *f = ud;
    if (op->code != IR_OP_EXTRACT) return;
    const IrOp *d = f->values[op->operands[0]].def;
    if (!d || d->code != IR_OP_CONVERT_LAYOUT) return;
    const IrType *src = ir_value_type(f, d->operands[0]), *rt = ir_value_type(f, op->results[0]);
    const IrLayout *l = src->layout;
    int32_t n = rt->shape[rt->rank - 1];
    if (rt->rank != 2 || l->kind != IR_LAYOUT_MMA) return;
    const IrLayout *ml = l, *back = rt->layout;
    if (l->version == 3) {   /* the alike layout of N n */
        if (l->wpc[1] != 1 || n % 8 || n > 256 || op->attr.i % 8) return;
        IrLayout key = *l;
        key.instr[1] = n;
        ml = ir_layout_intern(f->module->ctx, &key);
    } else {   /* mma.sync: the same layout, where the chunk is whole periods of its columns
                * (8 a warp along N): column c of the chunk sits where c + lo did */
        int32_t period = 8 * l->wpc[1];
        if (n % period || op->attr.i % period || rt->shape[0] % (16 * l->wpc[0])) return;
    }
    op->operands[0] = d->operands[0];
    IrValue r = op->results[0];
    f->values[r].type = ir_type_with_layout(f->module->ctx, rt, ml);
    IrValue cv = convert_before(f, op->next, r, back);
    replace_uses_but(f, r, cv, f->values[cv].def);
}

bool pass_layout(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL) return false;
    IrCtx *c = f->module->ctx;
    int warps = ir_func_warps(f);
    bool changed = false;
    PassRuns runs;
    pass_runs_init(&runs, f);
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrType *t = f->values[v].type;
        if (!t || t->rank == 0 || t->layout) continue;
        f->values[v].type = ir_type_with_layout(c, t, pass_blocked_layout(c, warps, t, &runs));
        changed = true;
    }
    changed |= lay_out_locals(f, warps, &runs);
    pass_runs_free(&runs);
    uint32_t ndots = 0;
    for (uint32_t v = 0; v < f->nvalues; v++) ndots += f->values[v].def && f->values[v].def->code == IR_OP_DOT;
    IrOp **dots = tl_calloc(ndots + 1, sizeof *dots), **end = dots;
    if (!dots) tl_oom();
    ir_walk(&f->body, collect_dots, &end);
    for (IrOp **d = dots; d < end; d++) {
        const IrLayout *mma = ir_value_type(f, (*d)->results[0])->layout->kind == IR_LAYOUT_BLOCKED
                                  ? mma_layout_for(c, f, *d) : NULL;
        if (mma) lay_out_dot(f, *d, mma);
        changed |= mma != NULL;
    }
    tl_free(dots);
    ir_walk(&f->body, carry_visit, f);
    ir_walk(&f->body, fold_visit, f);
    ir_walk(&f->body, chunk_visit, f);
    if (rows_in_one_warp(f)) {
        ir_walk(&f->body, carry_visit, f);
        ir_walk(&f->body, fold_visit, f);
        pass_dce(f);
        changed = true;
    }
    for (int round = 0; round < 4 && propagate(f); round++) {
        ir_walk(&f->body, fold_visit, f);
        ir_walk(&f->body, carry_visit, f);
        ir_walk(&f->body, fold_visit, f);
        changed = true;
    }
    if (changed) pass_dce(f);   /* the conversions folding left dead (shared sizes rings by what is live) */
    return changed;
}
