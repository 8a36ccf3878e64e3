/* cluster: a program on a cluster of CTAs, its rows split among them (the launch key
 * `cluster = n`, sm_90a).
 *
 * A program of a kernel launched with cluster = n runs on n CTAs of a thread-block
 * cluster (codegen: `.reqnctapercluster n, 1, 1`; program_id along x is the cluster's
 * id). The program's rows are the M axis of its dots: every tile that carries them
 * (the dots' A operands, accumulators and results, what is computed from them row by
 * row, the row indices they are loaded and stored at) is cut into n slices of R / n rows,
 * and CTA r (`cluster_rank`) computes slice r. Tiles that do not carry the rows (a dot's
 * B operand, a bias row, column indices) are the same in every CTA; a block_load of one
 * is flagged `multicast`, and the shared pass lets the CTAs copy shares of it into each
 * other's rings by TMA multicast (each CTA reads 1/n of it from L2): what Hopper GEMMs in
 * clusters of 2 gain.
 *
 * Which values carry the rows is found by propagation from the dots: each tile value
 * gets its row axis (or none), through element-wise ops, broadcasts, expand_dims,
 * reductions over other axes, loads and stores, loops and ifs. The program is left as it
 * is, with an error at the op that stops the split, when its rows do not split: an op
 * that mixes rows (a reduction or scan over them, a reshape, a gather-like op), a dot
 * whose B operand carries rows, rows of another extent, a print of split values, an
 * atomic or barrier (the CTAs would each do it), or R not a multiple of 16 n.
 *
 *   before (BM = 256, cluster = 2)              after (CTA r of 2)
 *     %a = block_load %pa, ..., %m0, %k         %r = cluster_rank
 *          : bf16[256, 64]                      %o = mul %r, 128
 *     %b = block_load %pb, ..., %k, %n0         %a = block_load %pa, ..., add(%m0, %o), %k
 *          : bf16[64, 256]                           : bf16[128, 64]
 *     %c = dot %a, %b, %acc : f32[256, 256]     %b = block_load multicast %pb, ... : bf16[64, 256]
 *                                               %c = dot %a, %b, %acc : f32[128, 256]
 *
 * Runs first among the GPU passes, on tiles without layouts. */
#include <stdio.h>
#include <string.h>

#include "passes/passes.h"
#include "ir/arena.h"
#include "ir/diag.h"
#include "ir/target.h"

enum { UNKNOWN = -2, NONE = -1 };

typedef struct Split {
    IrFunc *f;
    int8_t *axis;                /* per value of the program as it came: its row axis, NONE
                                    or UNKNOWN (the values the rewrite makes: NONE) */
    uint32_t nv;
    int32_t rows;                /* R: the dots' M, 0 until a dot is seen */
    int n;                       /* CTAs a program */
    bool changed;
    const IrOp *bad;             /* the op that stops the split, with why */
    const char *why;
} Split;

static const IrType *vtype(const Split *s, IrValue v) { return ir_value_type(s->f, v); }
static int axis_of(const Split *s, IrValue v) { return v < s->nv ? s->axis[v] : NONE; }

static bool stop(Split *s, const IrOp *op, const char *why)
{
    if (!s->bad) s->bad = op, s->why = why;
    return false;
}

/* v's row axis is ax (NONE: it has none); a scalar has none. */
static bool set(Split *s, const IrOp *op, IrValue v, int ax)
{
    if (!vtype(s, v)->rank) return ax == NONE || ax == UNKNOWN ? true : stop(s, op, "a scalar cannot carry the rows");
    if (ax == UNKNOWN || s->axis[v] == ax) return true;
    if (s->axis[v] != UNKNOWN)
        return stop(s, op, s->axis[v] == NONE || ax == NONE ? "a tile both carries the program's rows and is the "
                                                              "same in every CTA (a dot's B operand, a broadcast row)"
                                                            : "a tile would carry the rows along two axes");
    s->axis[v] = (int8_t)ax;
    s->changed = true;
    return true;
}

/* Values of one shape that carry the rows along the same axis: the operands of rank
 * `rank` of op (the others are scalars) and its results. */
static bool same_axis(Split *s, const IrOp *op, uint32_t first_operand)
{
    uint32_t rank = op->nresults ? vtype(s, op->results[0])->rank : 0;
    int ax = UNKNOWN;
    for (uint32_t i = first_operand; i < op->noperands; i++)
        if (vtype(s, op->operands[i])->rank && s->axis[op->operands[i]] != UNKNOWN) ax = s->axis[op->operands[i]];
    for (uint32_t i = 0; i < op->nresults; i++)
        if (s->axis[op->results[i]] != UNKNOWN) ax = s->axis[op->results[i]];
    if (ax == UNKNOWN) return true;
    for (uint32_t i = first_operand; i < op->noperands; i++) {
        const IrType *t = vtype(s, op->operands[i]);
        if (t->rank && (!rank || t->rank == rank) && !set(s, op, op->operands[i], ax)) return false;
    }
    for (uint32_t i = 0; i < op->nresults; i++)
        if (!set(s, op, op->results[i], ax)) return false;
    return true;
}

/* x and y carry the rows at axes related by cluster_axis_map (x's axis a is y's
 * map(a)); NONE to NONE in both directions. */
static bool related(Split *s, const IrOp *op, IrValue x, IrValue y)
{
    int ax = s->axis[x], ay = s->axis[y], rank = vtype(s, x)->rank;
    if (ax >= 0) {
        int m = cluster_axis_map(op, rank, ax, true);
        if (m < 0) return stop(s, op, "mixes the program's rows with another axis");
        if (!set(s, op, y, m)) return false;
    } else if (ax == NONE && !set(s, op, y, NONE)) {
        return false;
    }
    if (ay >= 0) {
        int m = cluster_axis_map(op, rank, ay, false);
        if (m < 0) return stop(s, op, "mixes the program's rows with another axis");
        return set(s, op, x, m);
    }
    return ay == NONE ? set(s, op, x, NONE) : true;
}

int cluster_axis_map(const IrOp *op, int rank, int a, bool fwd)
{
    int k = (int)(op->attr.i & IR_AXIS_MASK);
    switch (op->code) {
    case IR_OP_EXPAND_DIMS:         /* the new axis k: x's a is the result's a (a < k) or a + 1 */
        k = (int)op->attr.i;
        if (fwd) return a < k ? a : a + 1;
        return a == k ? -1 : a < k ? a : a - 1;
    case IR_OP_TRANS: return rank - 1 - a;
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_XOR_SUM:
        if (fwd) return a == k ? -1 : a < k ? a : a - 1;     /* over k (removed) */
        return a < k ? a : a + 1;
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: return a == k ? -1 : a;
    default: return a;
    }
}

static bool visit_block(Split *s, const IrBlock *blk);

/* A region's yield and the values it carries: yield operand i, result i (and, for a
 * loop, its init and region argument i + 1). */
static bool carried(Split *s, const IrOp *op)
{
    for (uint32_t r = 0; r < op->nregions; r++) {
        const IrOp *y = op->regions[r].last;
        if (!y || y->code != IR_OP_YIELD) continue;
        for (uint32_t i = 0; i < y->noperands && i < op->nresults; i++) {
            IrValue group[4] = {y->operands[i], op->results[i], IR_NO_VALUE, IR_NO_VALUE};
            if (op->code == IR_OP_FOR) group[2] = op->operands[3 + i], group[3] = op->regions[0].args[1 + i];
            int ax = UNKNOWN;
            for (int g = 0; g < 4; g++)
                if (group[g] != IR_NO_VALUE && s->axis[group[g]] != UNKNOWN) ax = s->axis[group[g]];
            for (int g = 0; g < 4 && ax != UNKNOWN; g++)
                if (group[g] != IR_NO_VALUE && !set(s, op, group[g], ax)) return false;
        }
    }
    return true;
}

/* Any tile of op that carries rows stops the split (an op that cannot be split). */
static bool no_rows(Split *s, const IrOp *op, const char *why)
{
    for (uint32_t i = 0; i < op->noperands; i++)
        if (s->axis[op->operands[i]] >= 0) return stop(s, op, why);
    for (uint32_t i = 0; i < op->nresults; i++)
        if (s->axis[op->results[i]] >= 0) return stop(s, op, why);
    return true;
}

static bool visit(Split *s, const IrOp *op)
{
    unsigned flags = ir_op_info[op->code].flags;
    switch (op->code) {
    case IR_OP_DOT: {
        int32_t m = vtype(s, op->results[0])->shape[0];
        if (vtype(s, op->results[0])->rank != 2) return stop(s, op, "a dot of rank other than 2");
        if (s->rows && s->rows != m) return stop(s, op, "dots of different row counts");
        s->rows = m;
        return set(s, op, op->results[0], 0) && set(s, op, op->operands[0], 0) && set(s, op, op->operands[2], 0) &&
               set(s, op, op->operands[1], NONE);
    }
    case IR_OP_BROADCAST: {
        IrValue x = op->operands[0], y = op->results[0];
        if (s->axis[x] >= 0 && !set(s, op, y, s->axis[x])) return false;
        if (s->axis[y] == NONE && !set(s, op, x, NONE)) return false;
        if (s->axis[y] >= 0) return set(s, op, x, vtype(s, x)->shape[s->axis[y]] == 1 ? NONE : s->axis[y]);
        return true;
    }
    case IR_OP_EXPAND_DIMS: return related(s, op, op->operands[0], op->results[0]);
    case IR_OP_TRANS:
        return related(s, op, op->operands[0], op->results[0]);
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_XOR_SUM:
        if (s->axis[op->operands[0]] == (int)(op->attr.i & IR_AXIS_MASK)) return stop(s, op, "reduces over the program's rows");
        return related(s, op, op->operands[0], op->results[0]);
    case IR_OP_CUMSUM: case IR_OP_CUMPROD:
        if (s->axis[op->operands[0]] == (int)(op->attr.i & IR_AXIS_MASK)) return stop(s, op, "scans over the program's rows");
        return related(s, op, op->operands[0], op->results[0]);
    case IR_OP_SPLAT: case IR_OP_CONST: case IR_OP_ARANGE: case IR_OP_BLOCK_LOAD: case IR_OP_BLOCK_STORE:
    case IR_OP_ASSERT: case IR_OP_PROGRAM_ID: case IR_OP_NUM_PROGRAMS: case IR_OP_MULTIPLE_OF:
    case IR_OP_MAX_CONTIGUOUS:
        return true;
    case IR_OP_LOAD: case IR_OP_STORE: case IR_OP_RAND: case IR_OP_RANDN:
        return same_axis(s, op, 0);
    case IR_OP_PRINT: return no_rows(s, op, "prints a tile whose rows the CTAs of a cluster split");
    case IR_OP_BARRIER: return stop(s, op, "a barrier of the program (the CTAs of a cluster would each wait alone)");
    case IR_OP_FOR: case IR_OP_IF:
        for (uint32_t r = 0; r < op->nregions; r++)
            if (!visit_block(s, &op->regions[r])) return false;
        return carried(s, op);
    case IR_OP_YIELD: case IR_OP_RETURN: return true;
    default:
        if (ir_op_is_atomic(op->code)) return same_axis(s, op, 0);
        if (flags & IR_E) return same_axis(s, op, 0);
        for (uint32_t r = 0; r < op->nregions; r++)
            if (!visit_block(s, &op->regions[r])) return false;
        return no_rows(s, op, "an op that mixes the program's rows");
    }
}

static bool visit_block(Split *s, const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next)
        if (!visit(s, op)) return false;
    return true;
}

/* What the fixpoint leaves that the split cannot do: rows of another extent, an atomic
 * on a tile every CTA computes whole (it would apply n times; a plain store of one
 * writes the same values n times, which is harmless). */
static bool check_block(Split *s, const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        for (uint32_t r = 0; r < op->nregions; r++)
            if (!check_block(s, &op->regions[r])) return false;
        for (uint32_t i = 0; i < op->nresults; i++) {
            IrValue v = op->results[i];
            if (s->axis[v] >= 0 && vtype(s, v)->shape[s->axis[v]] != s->rows)
                return stop(s, op, "a tile that carries the rows has another number of them than the dots");
        }
        if (ir_op_is_atomic(op->code) && s->axis[op->operands[0]] < 0)
            return stop(s, op, "an atomic that every CTA of the cluster would do");
    }
    return true;
}

/* ---- the rewrite ----------------------------------------------------------------------- */

typedef struct Rewrite {
    Split *s;
    IrValue rank;                /* cluster_rank */
    IrValue off32, off64;        /* rank * R / n, i32 and i64 (built on first use) */
    IrOp *top;                   /* the first op of the body: offsets are built before it */
} Rewrite;

static IrValue row_offset(Rewrite *w, IrElem e)
{
    IrFunc *f = w->s->f;
    IrCtx *c = f->module->ctx;
    IrBuilder b;
    ir_builder_before(&b, w->top);
    if (w->off32 == IR_NO_VALUE) {
        IrValue slice = ir_const_int(&b, ir_type_scalar(c, IR_I32), w->s->rows / w->s->n);
        w->off32 = ir_build_binary(&b, IR_OP_MUL, w->rank, slice);
    }
    if (e == IR_I32) return w->off32;
    if (w->off64 == IR_NO_VALUE) w->off64 = ir_build1(&b, IR_OP_CONVERT, ir_type_scalar(c, e), &w->off32, 1);
    return w->off64;
}

static const IrType *sliced(Rewrite *w, const IrType *t, int ax)
{
    int32_t shape[IR_MAX_RANK];
    memcpy(shape, t->shape, sizeof shape);
    shape[ax] /= w->s->n;
    IrCtx *c = w->s->f->module->ctx;
    return ir_type_tile(c, ir_type_elem(c, t), t->rank, shape);
}

/* offsets[ax] of a block load or store (operand `at`) + this CTA's first row. */
static void shift_offset(Rewrite *w, IrOp *op, uint32_t at)
{
    IrValue o = op->operands[at];
    IrBuilder b;
    ir_builder_before(&b, op);
    op->operands[at] = ir_build_binary(&b, IR_OP_ADD, o, row_offset(w, vtype(w->s, o)->elem));
}

static void rewrite_block(Rewrite *w, IrBlock *blk);

static void rewrite_op(Rewrite *w, IrOp *op)
{
    Split *s = w->s;
    IrFunc *f = s->f;
    for (uint32_t r = 0; r < op->nregions; r++) {
        for (uint32_t i = 0; i < op->regions[r].nargs; i++) {
            IrValue a = op->regions[r].args[i];
            if (axis_of(s, a) >= 0) f->values[a].type = sliced(w, vtype(s, a), axis_of(s, a));
        }
        rewrite_block(w, &op->regions[r]);
    }
    if (op->code == IR_OP_BLOCK_STORE) {
        IrValue v = op->operands[op->noperands - 1];
        uint32_t rank = vtype(s, v)->rank;
        if (axis_of(s, v) >= 0) shift_offset(w, op, 1 + 2 * rank + (uint32_t)axis_of(s, v));
        return;
    }
    for (uint32_t i = 0; i < op->nresults; i++) {
        IrValue v = op->results[i];
        if (axis_of(s, v) < 0) continue;
        f->values[v].type = sliced(w, vtype(s, v), axis_of(s, v));
    }
    if (op->code == IR_OP_BLOCK_LOAD) {
        IrValue v = op->results[0];
        if (axis_of(s, v) >= 0) shift_offset(w, op, 1 + 2 * vtype(s, v)->rank + (uint32_t)axis_of(s, v));
        else op->attr.i |= IR_BLOCK_MULTICAST;
    } else if (op->code == IR_OP_ARANGE && axis_of(s, op->results[0]) >= 0) {
        /* lo + i of the CTA's slice: lo + rank * R / n + i */
        IrValue old = op->results[0];
        IrBuilder b;
        ir_builder_before(&b, op->next);
        IrValue off = row_offset(w, IR_I32);
        IrValue at = ir_build1(&b, IR_OP_SPLAT, vtype(s, old), &off, 1);
        IrValue now = ir_build_binary(&b, IR_OP_ADD, old, at);
        ir_replace_all_uses(f, old, now);
        IrOp *add = f->values[now].def;
        add->operands[0] = old;
    }
}

static void rewrite_block(Rewrite *w, IrBlock *blk)
{
    for (IrOp *op = blk->first, *next; op; op = next) {
        next = op->next;
        rewrite_op(w, op);
    }
}

/* ---- index tiles shared by CSE ----------------------------------------------------------
 * CSE merges equal index tiles: `arange(0, BM)` for the rows and `arange(0, BN)` for the
 * columns are one value when BM = BN, which would then both carry the rows and not.
 * Before the analysis, every tile computed from indices and constants alone (aranges,
 * constant and splat tiles, and pure ops of them and of scalars) gets its own copy for
 * each use; the CSE at the end of the GPU pipeline merges again what stays equal. */
typedef VEC(IrOp *) OpList;

static void collect_ops(IrOp *op, void *ud) { vec_push((OpList *)ud, op); }

/* op as a user of each of its operands (once per operand value) that the index marks
 * cover (values below nv) */
static void add_uses(OpList *uses, uint32_t nv, IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++) {
        IrValue v = op->operands[i];
        if (v < nv && !(uses[v].len && uses[v].data[uses[v].len - 1] == op)) vec_push(&uses[v], op);
    }
}

static bool index_tile(const IrFunc *f, const IrOp *op, const bool *index)
{
    if (op->nregions || op->nresults != 1 || !(ir_op_info[op->code].flags & IR_P) || op->code == IR_OP_DOT ||
        !ir_value_type(f, op->results[0])->rank)
        return false;
    for (uint32_t i = 0; i < op->noperands; i++)
        if (ir_value_type(f, op->operands[i])->rank && !index[op->operands[i]]) return false;
    return true;
}

static void unshare_indices(IrFunc *f)
{
    OpList all = {0};
    ir_walk(&f->body, collect_ops, &all);   /* every op, defs before uses */
    uint32_t nv = f->nvalues;
    bool *index = tl_calloc(nv ? nv : 1, sizeof *index);
    OpList *uses = tl_calloc(nv ? nv : 1, sizeof *uses);
    if (!index || !uses) tl_oom();
    for (size_t i = 0; i < all.len; i++) {
        add_uses(uses, nv, all.data[i]);
        if (index_tile(f, all.data[i], index)) index[all.data[i]->results[0]] = true;
    }
    for (size_t i = all.len; i-- > 0;) {    /* users first: their copies add uses above */
        IrOp *op = all.data[i];
        if (op->nresults != 1 || op->results[0] >= nv || !index[op->results[0]]) continue;
        IrValue v = op->results[0];
        for (size_t k = 1; k < uses[v].len; k++) {
            IrOp *user = uses[v].data[k];
            IrBuilder b;
            ir_builder_before(&b, user);
            IrOp *copy = ir_clone_op(&b, f, op, NULL, 0);
            for (uint32_t j = 0; j < user->noperands; j++)
                if (user->operands[j] == v) user->operands[j] = copy->results[0];
            add_uses(uses, nv, copy);
        }
    }
    for (uint32_t v = 0; v < nv; v++) vec_free(&uses[v]);
    tl_free(uses);
    tl_free(index);
    vec_free(&all);
}

bool pass_cluster(IrFunc *f)
{
    int n = ir_cluster_size(f);
    if (f->kind != IR_FUNC_KERNEL || n < 2) return false;
    for (const IrOp *o = f->body.first; o; o = o->next)   /* split already (it reads its rank) */
        if (o->code == IR_OP_CLUSTER_RANK) return false;
    DiagList *d = ir_ctx_diags(f->module->ctx);
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    if (!t->tma) {
        diag_error(d, f->loc, "kernel '%s': cluster = %d needs thread-block clusters (sm_90a), not %s", f->name, n,
                   t->name);
        f->cluster = 1;
        return false;
    }
    unshare_indices(f);
    Split s = {.f = f, .n = n, .nv = f->nvalues};
    s.axis = tl_malloc(f->nvalues ? f->nvalues : 1);
    if (!s.axis) tl_oom();
    memset(s.axis, UNKNOWN, f->nvalues);
    bool ok = true;
    do {
        s.changed = false;
        ok = visit_block(&s, &f->body);
    } while (ok && s.changed);
    if (ok && !s.rows) ok = stop(&s, NULL, "the program has no dot whose rows the CTAs could split");
    if (ok && (s.rows % (16 * n))) ok = stop(&s, NULL, "the dots' rows are no multiple of 16 for each CTA");
    if (ok) ok = check_block(&s, &f->body);
    if (!ok) {
        diag_error(d, s.bad ? s.bad->loc : f->loc, "kernel '%s': cluster = %d cannot split the program's %d rows among "
                   "the CTAs: %s%s%s", f->name, n, s.rows, s.bad ? ir_op_info[s.bad->code].text : "", s.bad ? ": " : "",
                   s.why);
        tl_free(s.axis);
        f->cluster = 1;
        return false;
    }
    IrBuilder b;
    ir_builder_before(&b, f->body.first);
    Rewrite w = {.s = &s, .off32 = IR_NO_VALUE, .off64 = IR_NO_VALUE};
    w.rank = ir_build1(&b, IR_OP_CLUSTER_RANK, ir_type_scalar(f->module->ctx, IR_I32), NULL, 0);
    w.top = f->values[w.rank].def->next;
    for (uint32_t v = 0; v < s.nv; v++)   /* what carries no rows is the same in every CTA */
        if (s.axis[v] == UNKNOWN) s.axis[v] = NONE;
    rewrite_block(&w, &f->body);
    tl_free(s.axis);
    return true;
}
