/* Block loads as loads of pointer tiles, block stores as stores (the first GPU pass).
 *
 * require:   Tile IR without layouts
 * guarantee: no block_load is left but those kept for TMA; each other became the load
 *            of a pointer tile with the mask of the coordinates inside the tensor and
 *            zeros elsewhere, which computes the same values (ops.def: block_load).
 *            No block_store is left but those tmastore_kept (passes/tmastore.c) keeps;
 *            each other became the store of a pointer tile under the same mask, which
 *            writes the same elements and drops the same ones (ops.def: block_store).
 *            The rest of the GPU pipeline (layouts, the shared-memory rings of K loops,
 *            cp.async with zero-filled edges) then treats them as the loads and stores
 *            a user would write.
 *
 *   %t = block_load %p, %M, %K, %sm, %sk, %om, %ok : bf16[128, 64]
 * ->
 *   %cm = add (splat %om), (arange 0 : i32[128])         one per axis: coordinates
 *   %in = and (cmp ge %cm, 0), (cmp lt %cm, %M)          the axis' mask, on the vector
 *   %pt = addptr (splat %p), (broadcast %cm[:, None] * %sm + broadcast %ck[None, :] * %sk)
 *   %t  = load %pt, broadcast %in_m[:, None] & broadcast %in_k[None, :], 0
 *
 *   block_store %p, %M, %N, %sm, %sn, %om, %on, %v       (%v : f32[128, 64])
 * ->
 *   (%pt and the mask %in as above, of %v's shape)
 *   store %pt, %v, %in
 *
 * A stride of constant 1 multiplies nothing, an offset of constant 0 adds nothing, and
 * an offset that cannot be negative (a program id, a K loop's induction variable
 * from 0) drops the `>= 0` test, so the contiguous axis of a block
 * looks to the axis analysis as a hand-written `k + arange(0, BK)` does; an op marked
 * `upper` (made from a pointer load or store by passes/ptrblock.c) has no `>= 0` test
 * at all, as the user's code had none. The index
 * math is in the operands' integer type, as the op's meaning says. The loads and the
 * stores share it (block_ptrs). After the layout pass (passes/shared.c, the blocks no
 * ring or staging buffer took), blockload_expand_laid_out and blockstore_expand_laid_out
 * make the same code in blocked layouts. */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/axisinfo.h"
#include "ir/layout.h"
#include "ir/target.h"

static bool const_of(const IrFunc *f, IrValue v, int64_t *out)
{
    const IrOp *d = f->values[v].def;
    if (!d || d->code != IR_OP_CONST || ir_value_type(f, v)->rank) return false;
    *out = d->attr.i;
    return true;
}

/* v is never negative: a constant >= 0, a program id or count, an induction variable
 * from a value >= 0 by a positive constant step (it stays below the loop's end, so it
 * never wraps), widening conversions, quotients, remainders and minima/maxima of such. Not sums or products:
 * those may wrap (pid * BM in i32 past 2^24 programs), and the test must then stay. */
static bool nonneg(const IrFunc *f, IrValue v, int depth)
{
    if (depth > 16) return false;
    const IrValueInfo *vi = &f->values[v];
    const IrOp *d = vi->def;
    if (!d) {          /* a block argument: the induction variable of a for? */
        const IrOp *loop = vi->block ? vi->block->parent_op : NULL;
        int64_t step;
        return loop && loop->code == IR_OP_FOR && vi->block == &loop->regions[0] && vi->block->args[0] == v &&
               const_of(f, loop->operands[2], &step) && step > 0 && nonneg(f, loop->operands[0], depth + 1);
    }
    switch (d->code) {
    case IR_OP_CONST: return d->attr.i >= 0;
    case IR_OP_PROGRAM_ID: case IR_OP_NUM_PROGRAMS: case IR_OP_LAUNCHED_PROGRAMS: return true;
    case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS: return nonneg(f, d->operands[0], depth + 1);
    case IR_OP_REM: return nonneg(f, d->operands[0], depth + 1);      /* the dividend's sign */
    case IR_OP_CONVERT: {   /* widening (or same-width) integers keep a value >= 0 */
        const IrType *from = ir_value_type(f, d->operands[0]), *to = ir_value_type(f, v);
        return ir_elem_is_int(from->elem) && ir_elem_is_int(to->elem) && from->elem != IR_I1 &&
               ir_elem_bytes(to->elem) >= ir_elem_bytes(from->elem) && nonneg(f, d->operands[0], depth + 1);
    }
    case IR_OP_MAXIMUM: return nonneg(f, d->operands[0], depth + 1) || nonneg(f, d->operands[1], depth + 1);
    case IR_OP_DIV: case IR_OP_MINIMUM:
        return nonneg(f, d->operands[0], depth + 1) && nonneg(f, d->operands[1], depth + 1);
    default: return false;
    }
}

bool blockload_nonneg(const IrFunc *f, IrValue v) { return nonneg(f, v, 0); }

static IrValue build1(IrBuilder *b, IrOpcode code, const IrType *t, IrValue *ops, uint32_t n, int64_t attr)
{
    IrOp *op = ir_build(b, code, ops, n, &t, 1, 0);
    op->attr.i = attr;
    return op->results[0];
}

static IrValue splat(IrBuilder *b, IrValue s, const IrType *t) { return build1(b, IR_OP_SPLAT, t, &s, 1, 0); }

/* v, a vector along axis d, as a tile of `shape` (rank r): size-1 axes around it, then
 * broadcast. */
static IrValue along(IrBuilder *b, IrValue v, int d, int r, const int32_t *shape)
{
    IrCtx *c = b->func->module->ctx;
    const IrType *el = ir_type_elem(c, ir_value_type(b->func, v));
    int32_t cur[IR_MAX_RANK];
    int n = 1;
    cur[0] = shape[d];
    for (int e = 0; e < r; e++) {
        if (e == d) continue;
        for (int i = n; i > e; i--) cur[i] = cur[i - 1];   /* the axes before e are in place */
        cur[e] = 1;
        n++;
        v = build1(b, IR_OP_EXPAND_DIMS, ir_type_tile(c, el, n, cur), &v, 1, e);
    }
    if (r == 1) return v;
    return build1(b, IR_OP_BROADCAST, ir_type_tile(c, el, r, shape), &v, 1, 0);
}

/* The pointer tile and the mask of a block op's elements (ptr, shape x R, strides x R,
 * offsets x R from operand 0, the block of type t, rank R), built at b: the coordinates
 * of each axis, their test against [0, shape), and the sum of coordinate times stride,
 * as the header says; an outer pair (x, s) adds x * s to ptr first, in its type. Shared by the block loads and the block stores. */
static IrValue block_ptrs(IrBuilder *b, const IrOp *op, const IrType *t, IrValue *mask)
{
    IrFunc *f = b->func;
    IrCtx *c = f->module->ctx;
    int r = t->rank;
    IrValue ptr = op->operands[0];
    const IrType *it = ir_value_type(f, op->operands[1]);
    IrValue off = IR_NO_VALUE;
    *mask = IR_NO_VALUE;
    for (int d = 0; d < r; d++) {
        IrValue shape = op->operands[1 + d], stride = op->operands[1 + r + d], o = op->operands[1 + 2 * r + d];
        const IrType *vt = ir_type_tile(c, it, 1, &t->shape[d]);
        IrValue co = build1(b, IR_OP_ARANGE, ir_type_tile(c, ir_type_scalar(c, IR_I32), 1, &t->shape[d]), NULL, 0, 0);
        if (it->elem != IR_I32) co = build1(b, IR_OP_CONVERT, vt, &co, 1, 0);
        int64_t k;
        bool zero_origin = const_of(f, o, &k) && k == 0;
        if (!zero_origin) co = ir_build_binary(b, IR_OP_ADD, splat(b, o, vt), co);
        IrValue in = ir_build_cmp(b, IR_CMP_LT, co, splat(b, shape, vt));
        if (!(op->attr.i & IR_BLOCK_UPPER) && !nonneg(f, o, 0)) in = ir_build_binary(b, IR_OP_AND, ir_build_cmp(b, IR_CMP_GE, co, splat(b, ir_const_int(b, it, 0), vt)), in);
        IrValue term = along(b, co, d, r, t->shape);
        if (!(const_of(f, stride, &k) && k == 1))
            term = ir_build_binary(b, IR_OP_MUL, term, splat(b, stride, ir_value_type(f, term)));
        off = off == IR_NO_VALUE ? term : ir_build_binary(b, IR_OP_ADD, off, term);
        IrValue m = along(b, in, d, r, t->shape);
        *mask = *mask == IR_NO_VALUE ? m : ir_build_binary(b, IR_OP_AND, *mask, m);
    }
    uint32_t ox = ir_block_outer(f, op);
    if (ox) ptr = ir_build_binary(b, IR_OP_ADDPTR, ptr, ir_build_binary(b, IR_OP_MUL, op->operands[ox], op->operands[ox + 1]));
    const IrType *pt = ir_type_like(c, t, ir_value_type(f, ptr));
    return ir_build_binary(b, IR_OP_ADDPTR, splat(b, ptr, pt), off);
}

/* block_load as `load ptrs, mask, 0`; the load's result. */
static IrValue expand_load(IrFunc *f, IrOp *op)
{
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    const IrType *rt = ir_value_type(f, op->results[0]);
    IrValue ops[3];
    ops[0] = block_ptrs(&b, op, rt, &ops[1]);
    ops[2] = ir_elem_is_float(rt->elem) ? ir_const_float(&b, rt, 0) : ir_const_int(&b, rt, 0);
    IrValue ld = build1(&b, IR_OP_LOAD, rt, ops, 3, 0);
    ir_replace_all_uses(f, op->results[0], ld);
    ir_op_remove(op);
    return ld;
}

/* block_store as `store ptrs, value, mask`: the elements outside the tensor are masked
 * off, so nothing is written there; the store. */
static IrOp *expand_store(IrFunc *f, IrOp *op)
{
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    IrValue v = op->operands[op->noperands - 1], ops[3];
    ops[0] = block_ptrs(&b, op, ir_value_type(f, v), &ops[2]);
    ops[1] = v;
    IrOp *st = ir_build(&b, IR_OP_STORE, ops, 3, NULL, 0, 0);
    ir_op_remove(op);
    return st;
}

/* ---- which block loads the tensor-memory accelerator copies ----------------------------
 * A block load stays for passes/shared.c to copy by TMA into a ring of NVMMA stages when
 * the target has TMA and all of this holds (else it becomes a pointer load here):
 *   - it is in the body of an innermost `for` with a positive constant step, whose body
 *     writes no memory and holds one dot, and every dot operand loaded in that body is
 *     such a block load (a loop's ring is all TMA or all cp.async);
 *   - its only uses are dot operands a or b, directly or through one trans;
 *   - rank 2, 2-byte or 1-byte elements, i32 or i64 shape, strides and offsets (TMA's
 *     coordinates are 32-bit: codegen clamps i64 ones, the runtime keeps their extents
 *     below 2^31); a 1-byte (f8) block only where its dot reads it K-major, the one
 *     order wgmma takes 8-bit operands in, or where passes/shared.c transposes it
 *     into a K-major buffer (pass_fp8_transpose_ok: no producer warpgroup);
 *   - the tensor is describable on the host at launch (the runtime encodes the
 *     descriptor, cuTensorMapEncodeTiled): the pointer a kernel parameter that the
 *     variant's class makes 16-byte aligned, or one of up to 4 such parameters that
 *     `if`s or selects choose (a map each; codegen picks the one whose address the
 *     pointer holds), each shape and stride a constant or a parameter (through the
 *     specialization's multiple_of);
 *   - one stride is the constant 1 (the contiguous axis), the other a multiple of 16
 *     bytes (a constant, or a parameter the class makes a multiple of 16);
 *   - the block's contiguous extent a multiple of 32 bytes and its other extent a
 *     multiple of 8 up to 256 (whole swizzle atoms; TMA boxes of at most 256 rows); its
 *     offset along the contiguous axis a known multiple of 16 bytes (a box starting
 *     elsewhere faults: fast_offset_aligned);
 *   - an outer pair (x, s) (ir_block_outer: the block is the slice x of a tensor one rank
 *     higher, passes/ptrblock.c's head offsets) only with x an s32 never negative (TMA's
 *     third coordinate, exact), s as the other stride (known on the host, a multiple of
 *     16 bytes; a constant or a parameter as wide as the block's integers at most where
 *     the pair's type is wider); the map is of rank 3 (ir/plan.h), the stage the same.
 * TMA zero-fills coordinates below 0 as block_load does; a block_load marked `upper`
 * would read them (passes/ptrblock.c): they lie before the start of the tensor the
 * kernel was given (the pointer is a parameter, the strides positive: the map's), an
 * out-of-bounds access of the source, so the copy may read zeros there. */
/* A parameter, through the specialization's multiple_of hints and widening integer
 * conversions (the runtime reads an argument as the int64_t of its value); *index is its
 * position, *mult what it is a multiple of. */
static bool widening(const IrFunc *f, const IrOp *d)
{
    const IrType *from = ir_value_type(f, d->operands[0]), *to = ir_value_type(f, d->results[0]);
    return d->code == IR_OP_CONVERT && !from->rank && ir_elem_is_int(from->elem) && from->elem != IR_I1 &&
           ir_elem_is_int(to->elem) && ir_elem_bytes(to->elem) >= ir_elem_bytes(from->elem);
}

static bool param_of(const IrFunc *f, IrValue v, uint32_t *index, int64_t *mult)
{
    *mult = 1;
    const IrOp *d = f->values[v].def;
    while (d && (d->code == IR_OP_MULTIPLE_OF || widening(f, d))) {   /* a widened parameter keeps its value */
        if (d->code == IR_OP_MULTIPLE_OF && d->attr.i > *mult) *mult = d->attr.i;
        v = d->operands[0];
        d = f->values[v].def;
    }
    *index = f->values[v].index;
    return !d && f->values[v].block == &f->body;
}

bool blockload_host_scalar(const IrFunc *f, IrValue v, int32_t *param, int64_t *value, int64_t *mult)
{
    const IrOp *d = f->values[v].def;
    int64_t k;
    uint32_t index;
    *param = -1;
    *value = 1;
    if (ir_value_type(f, v)->rank) return false;
    if (d && d->code == IR_OP_MUL && const_of(f, d->operands[1], &k) && k >= 1 && k <= (INT64_C(1) << 20)) {
        if (!param_of(f, d->operands[0], &index, mult)) return false;
        *param = (int32_t)index;
        *value = k;
        *mult *= k;
        return true;
    }
    if (param_of(f, v, &index, mult)) {
        *param = (int32_t)index;
        return true;
    }
    if (!d || d->code != IR_OP_CONST) return false;
    *value = *mult = d->attr.i;
    return true;
}

bool blockload_host_known(const IrFunc *f, IrValue v, int64_t *mult, bool positive)
{
    int32_t param;
    int64_t value;
    return blockload_host_scalar(f, v, &param, &value, mult) && (param >= 0 || !positive || value >= 1);
}

/* The axis whose stride is the constant 1, or -1. */
int blockload_fast_axis(const IrFunc *f, const IrOp *op)
{
    int r = ir_value_type(f, op->results[0])->rank, fast = -1;
    for (int d = 0; d < r; d++) {
        int64_t k;
        if (const_of(f, op->operands[1 + r + d], &k) && k == 1 && fast < 0) fast = d;
    }
    return fast;
}

/* The parameters a pointer may be: a parameter, or a result of `if`s (and selects)
 * whose every branch yields one; their count (at most max), or 0 if it may be
 * anything else. */
int blockload_ptr_params(const IrFunc *f, IrValue v, uint32_t *out, int max)
{
    const IrValueInfo *vi = &f->values[v];
    if (!vi->def) return vi->block == &f->body && max >= 1 ? (out[0] = vi->index, 1) : 0;
    const IrOp *d = vi->def;
    IrValue alt[2];
    if (d->code == IR_OP_SELECT && !ir_value_type(f, v)->rank) alt[0] = d->operands[1], alt[1] = d->operands[2];
    else if (d->code == IR_OP_IF && d->nregions == 2) {
        for (int r = 0; r < 2; r++) {
            const IrOp *y = d->regions[r].last;
            if (!y || y->code != IR_OP_YIELD || vi->index >= y->noperands) return 0;
            alt[r] = y->operands[vi->index];
        }
    } else
        return 0;
    int n = 0;
    for (int r = 0; r < 2; r++) {
        uint32_t got[4];
        int m = blockload_ptr_params(f, alt[r], got, 4);
        if (!m) return 0;
        for (int i = 0; i < m; i++) {
            bool seen = false;
            for (int j = 0; j < n; j++) seen |= out[j] == got[i];
            if (seen) continue;
            if (n == max) return 0;
            out[n++] = got[i];
        }
    }
    return n;
}

/* v is exactly an s32, TMA's coordinate: of a type of at most 32 bits, widened from one,
 * or a constant in range. */
static bool fits_s32(const IrFunc *f, IrValue v)
{
    const IrOp *d = f->values[v].def;
    int64_t k;
    if (ir_elem_bytes(ir_value_type(f, v)->elem) <= 4) return true;
    if (const_of(f, v, &k)) return k >= INT32_MIN && k <= INT32_MAX;
    return d && widening(f, d) && ir_elem_bytes(ir_value_type(f, d->operands[0])->elem) <= 4;
}

/* The outer pair (x, s) of a block op, if any, as a third dimension of its tensor map
 * (passes/plan.c): x an s32 that is never negative (TMA would fill a negative one with
 * zeros where the op reads before the block's pointer), s known on the host, a multiple
 * of 16 bytes, and where the pair's type is not the block's (the recipe wraps at the
 * block's width) a constant or a parameter no wider than the block's integers. */
static bool tma_outer(const IrFunc *f, const IrOp *op, int eb, IrElem ie)
{
    uint32_t ox = ir_block_outer(f, op);
    if (!ox) return true;
    IrValue x = op->operands[ox];
    int32_t param;
    int64_t value, m;
    if (!fits_s32(f, x) || !nonneg(f, x, 0)) return false;
    if (!blockload_host_scalar(f, op->operands[ox + 1], &param, &value, &m) || m < 1 || (m * eb) % 16) return false;
    if (ir_value_type(f, x)->elem == ie || param < 0) return true;
    return value == 1 && ir_elem_bytes(ir_value_type(f, f->body.args[param])->elem) <= ir_elem_bytes(ie);
}

/* The block starts 16-byte aligned along its contiguous axis (its offset there a known
 * multiple of 16 bytes: the axis analysis). A TMA box that does not faults: an f8 box
 * at column 8 of an M-major A (and one at column -8 of an N-major B) stopped the
 * kernel with CUDA_ERROR_ILLEGAL_INSTRUCTION on an H100 (tests/difftest/tma_fuzz.py
 * seeds 10 and 17; at column 16 or 0 they ran); such a block is copied by cp.async. */
typedef struct Axes {          /* the axis analysis of f, made on first need, for one decision
                                * (the IR does not change while it lasts) */
    AxisInfo *ai;
} Axes;

static void axes_free(Axes *ax)
{
    tl_free(ax->ai);
    ax->ai = NULL;
}

static bool fast_offset_aligned(const IrFunc *f, const IrOp *op, int fast, int eb, Axes *ax)
{
    IrValue off = op->operands[1 + 2 * 2 + fast];
    if (!ax->ai && !(ax->ai = axisinfo_analyze(f, f->aligned_params))) tl_oom();
    return ax->ai[off].divisibility[0] * eb % 16 == 0;
}

static bool tma_block(const IrFunc *f, const IrOp *op, Axes *ax)
{
    const IrType *t = ir_value_type(f, op->results[0]);
    IrElem ie = ir_value_type(f, op->operands[1])->elem;
    int eb = ir_elem_bytes(t->elem);
    if (t->rank != 2 || (eb != 2 && eb != 1) || (ie != IR_I32 && ie != IR_I64)) return false;
    uint32_t ps[4];
    int np = blockload_ptr_params(f, op->operands[0], ps, 4);
    if (!np) return false;
    for (int i = 0; i < np; i++)
        if (ps[i] >= 64 || !(f->aligned_params >> ps[i] & 1)) return false;
    int fast = blockload_fast_axis(f, op), slow = 1 - fast;
    if (fast < 0) return false;
    int64_t m;
    for (int d = 0; d < 2; d++)
        if (!blockload_host_known(f, op->operands[1 + d], &m, true)) return false;
    if (!blockload_host_known(f, op->operands[3 + slow], &m, false) || m < 1 || (m * eb) % 16) return false;
    int32_t row_bytes = t->shape[fast] * eb;
    return row_bytes % 32 == 0 && t->shape[slow] % 8 == 0 && t->shape[slow] <= 256 && tma_outer(f, op, eb, ie) &&
           fast_offset_aligned(f, op, fast, eb, ax);
}

/* u uses v as a dot's operand a or b (not the accumulator). */
static bool dot_operand_use(const IrOp *u, IrValue v)
{
    return u->code == IR_OP_DOT && (u->operands[0] == v || u->operands[1] == v) && u->operands[2] != v;
}

static bool uses_ok(const IrFunc *f, const IrBlock *body, IrValue v, int depth)
{
    int n = 0;
    for (const IrOp *u = body->first; u; u = u->next) {
        bool uses = false;
        for (uint32_t i = 0; i < u->noperands; i++) uses |= u->operands[i] == v;
        for (uint32_t r = 0; r < u->nregions; r++)
            for (const IrOp *w = u->regions[r].first; w; w = w->next)
                for (uint32_t i = 0; i < w->noperands; i++)
                    if (w->operands[i] == v) return false;
        if (!uses) continue;
        n++;
        if (dot_operand_use(u, v)) continue;
        if (u->code == IR_OP_TRANS && depth == 0 && uses_ok(f, body, u->results[0], 1)) continue;
        return false;
    }
    return n > 0;
}

/* A loop or a write in blk, but for relaxed atomics of another element type than the
 * block loads' (elem; IR_I1: no exception): as passes/shared.c's rings, a copy may run
 * ahead of those (LANGUAGE-REFERENCE.md "Memory model"; the fused attention backward's
 * dQ adds). */
static bool has_loop_or_write(const IrFunc *f, const IrBlock *blk, IrElem elem)
{
    for (const IrOp *op = blk->first; op; op = op->next) {
        bool atomic = op->code >= IR_OP_ATOMIC_ADD && op->code <= IR_OP_ATOMIC_CAS;
        bool other = atomic && elem != IR_I1 && op->attr.i == IR_SEM_RELAXED &&
                     ir_value_type(f, op->operands[0])->pointee != elem;
        if (op->code == IR_OP_FOR || op->code == IR_OP_WHILE || ((ir_op_info[op->code].flags & IR_W) && !other))
            return true;
        for (uint32_t r = 0; r < op->nregions; r++)
            if (has_loop_or_write(f, &op->regions[r], elem)) return true;
    }
    return false;
}

/* The load or block load behind a dot operand (through trans and converts), or NULL;
 * *trans counts the transposes on the way. */
const IrOp *blockload_operand_source(const IrFunc *f, IrValue v, int *trans)
{
    const IrOp *d = f->values[v].def;
    *trans = 0;
    while (d && (d->code == IR_OP_TRANS || d->code == IR_OP_CONVERT)) {
        *trans += d->code == IR_OP_TRANS;
        d = f->values[d->operands[0]].def;
    }
    return d && (d->code == IR_OP_LOAD || d->code == IR_OP_BLOCK_LOAD) ? d : NULL;
}

/* ws: a producer warpgroup feeds the ring (given, chosen, or, for passes/schedule.c's
 * question, supposed); ws_f8: the same for the f8 transpose, which works without one
 * only: where ptrblock asks before the schedule, a ring the transpose needs is no ring
 * loop for the schedule (blockload_tma_with_ws says no), so it chooses no ws for it. */
static bool kept_for_tma_ws(const IrFunc *f, const IrOp *op, bool ws, bool ws_f8, Axes *ax)
{
    const TileTarget *tg = f->module->target ? f->module->target : tile_target_default();
    if (!tg->tma || f->module->no_tma || f->kind != IR_FUNC_KERNEL || f->stages < 2) return false;
    const IrBlock *body = op->parent;
    const IrOp *loop = body->parent_op;
    int64_t step;
    if (!loop || loop->code != IR_OP_FOR || !const_of(f, loop->operands[2], &step) || step <= 0) return false;
    /* (strict here: beside relaxed atomics of another type only passes/shared.c's cp.async
     * rings run ahead. By TMA from a producer warpgroup, the fused attention backward's
     * attn_bwd_fused_tma gave a wrong dQ on an H100 (relative error 0.4, non-causal,
     * 2026-12-07) while its pointer form and the emulator agreed with float64) */
    if (has_loop_or_write(f, body, IR_I1) || !tma_block(f, op, ax) || !uses_ok(f, body, op->results[0], 0))
        return false;
    int dots = 0;
    for (const IrOp *u = body->first; u; u = u->next) dots += u->code == IR_OP_DOT;
    /* (a loop of two dots, the graph compiler's paired SwiGLU GEMM, ran 13% slower by TMA
     * than by cp.async on the H200, 2.078 against 1.839 ms, while its copies were issued
     * after the dots: with 2 stages nothing overlapped them; they now go at the top of
     * the body with the knob tma_early, passes/shared.c, not yet measured: until then
     * such loops stay on cp.async, unless a producer warpgroup issues the copies, ws,
     * which passes/schedule.c chooses for a loop of independent dots that fits) */
    if (dots < 1 || (dots > 1 && !ws && !f->module->knobs.tma_early)) return false;
    for (const IrOp *u = body->first; u; u = u->next) {
        if (u->code != IR_OP_DOT) continue;
        for (int i = 0; i < 2; i++) {
            int trans;
            const IrOp *src = blockload_operand_source(f, u->operands[i], &trans);
            if (!src || src->parent != body) continue;      /* loaded outside the loop: not copied */
            if (src->code != IR_OP_BLOCK_LOAD || !tma_block(f, src, ax) || !uses_ok(f, body, src->results[0], 0))
                return false;
            /* wgmma reads 8-bit operands K-major only: another 8-bit block goes through
             * a transpose in shared memory (passes/shared.c, pass_fp8_transpose_ok),
             * or stays a pointer load, which the dot reads through f16 on mma.sync */
            if (ir_elem_bytes(ir_value_type(f, src->results[0])->elem) == 1 &&
                (blockload_fast_axis(f, src) ^ (trans & 1)) != (i == 0 ? 1 : 0) && (ws_f8 || !pass_fp8_transpose_ok(f)))
                return false;
        }
    }
    return true;
}

bool blockload_tma_with_ws(const IrFunc *f, const IrOp *op)
{
    Axes ax = {0};
    bool kept = kept_for_tma_ws(f, op, true, true, &ax);
    axes_free(&ax);
    return kept;
}

typedef struct Found {
    VEC(IrOp *) ops;             /* the block loads */
    VEC(IrOp *) stores;          /* the block stores */
} Found;

static void collect(IrOp *op, void *ud)
{
    if (op->code == IR_OP_BLOCK_LOAD) vec_push(&((Found *)ud)->ops, op);
    if (op->code == IR_OP_BLOCK_STORE) vec_push(&((Found *)ud)->stores, op);
}

/* A kernel takes at most CG_MAX_TMA tensor maps (hidden parameters, codegen/cg_tma.c):
 * loops are kept for TMA in order while their block loads (each counted as a map of its
 * own) fit; the rest are expanded. */
#define MAX_MAPS 8   /* CG_MAX_TMA */

/* Each block op's fate in s (loads, then stores): 0 expand, 2 TMA (1 only while deciding:
 * TMA if its loop's maps fit); a tl_calloc'd array. */
static int *decide(IrFunc *f, const Found *s, bool ws, bool ws_f8)
{
    size_t n = s->ops.len, ns = s->stores.len;
    int *state = tl_calloc(n + ns + 1, sizeof *state);
    if (!state) tl_oom();
    Axes ax = {0};           /* one analysis for every block of the kernel */
    for (size_t i = 0; i < n; i++) state[i] = kept_for_tma_ws(f, s->ops.data[i], ws, ws_f8, &ax);   /* all decided first */
    axes_free(&ax);
    for (size_t i = 0; i < ns; i++) state[n + i] = tmastore_kept(f, s->stores.data[i]) ? 2 : 0;
    uint32_t maps = 0;
    for (size_t i = 0; i < n; i++) {
        if (state[i] != 1) continue;
        const IrBlock *loop = s->ops.data[i]->parent;
        uint32_t here = 0, ps[4];       /* a map per parameter the pointer may be */
        for (size_t j = i; j < n; j++)
            if (state[j] == 1 && s->ops.data[j]->parent == loop)
                here += (uint32_t)blockload_ptr_params(f, s->ops.data[j]->operands[0], ps, 4);
        bool fits = maps + here <= MAX_MAPS;
        maps += fits ? here : 0;
        for (size_t j = i; j < n; j++)
            if (state[j] == 1 && s->ops.data[j]->parent == loop) state[j] = fits ? 2 : 0;
    }
    return state;
}

void blockload_kept(IrFunc *f, IrOp *const *ops, size_t n, bool *keep)
{
    Found s = {{0}, {0}};
    ir_walk(&f->body, collect, &s);
    /* a producer warpgroup the kernel gives, or one the schedule may choose (it runs
     * between ptrblock and blockload: passes/schedule.c) */
    bool ws = f->ws || (!ir_launch_given(f, IR_LAUNCH_WS) && f->module->knobs.schedule);
    int *state = decide(f, &s, ws, f->ws);
    for (size_t j = 0; j < n; j++) {
        keep[j] = false;
        for (size_t i = 0; i < s.ops.len; i++) keep[j] |= s.ops.data[i] == ops[j] && state[i];
        for (size_t i = 0; i < s.stores.len; i++) keep[j] |= s.stores.data[i] == ops[j] && state[s.ops.len + i];
    }
    tl_free(state);
    vec_free(&s.ops);
    vec_free(&s.stores);
}

bool pass_block_load(IrFunc *f)
{
    Found s = {{0}, {0}};
    ir_walk(&f->body, collect, &s);
    size_t n = s.ops.len, ns = s.stores.len;
    int *state = decide(f, &s, f->ws, f->ws);
    bool changed = false;
    for (size_t i = 0; i < n; i++)
        if (!state[i]) expand_load(f, s.ops.data[i]), changed = true;
    for (size_t i = 0; i < ns; i++)
        if (!state[n + i]) expand_store(f, s.stores.data[i]), changed = true;
    tl_free(state);
    vec_free(&s.ops);
    vec_free(&s.stores);
    return changed;
}

/* After the layout pass: the values an expansion made (from value `first` on) get the
 * blocked layout of their shapes, what layout assignment starts from. */
static void lay_out_blocked(IrFunc *f, uint32_t first)
{
    IrCtx *c = f->module->ctx;
    int warps = ir_func_warps(f);
    PassRuns runs;
    pass_runs_init(&runs, f);
    for (uint32_t v = first; v < f->nvalues; v++) {
        const IrType *t = f->values[v].type;
        if (t && t->rank && !t->layout)
            f->values[v].type = ir_type_with_layout(c, t, pass_blocked_layout(c, warps, t, &runs));
    }
    pass_runs_free(&runs);
}

/* After the layout pass: every value the expansion made gets the blocked layout of its
 * shape (lay_out_blocked), and a convert_layout gives the users the block load's own
 * layout where that is another. */
void blockload_expand_laid_out(IrFunc *f, IrOp *op)
{
    IrCtx *c = f->module->ctx;
    uint32_t first = f->nvalues;
    const IrLayout *l = ir_value_type(f, op->results[0])->layout;
    IrValue ld = expand_load(f, op);
    lay_out_blocked(f, first);
    const IrType *lt = ir_value_type(f, ld);
    if (!l || lt->layout == l) return;
    IrOp *ldop = f->values[ld].def;
    IrBuilder b;
    if (ldop->next) ir_builder_before(&b, ldop->next);
    else ir_builder_at_end(&b, ldop->parent);
    b.loc = ldop->loc;
    const IrType *want = ir_type_with_layout(c, lt, l);
    IrValue cv = ir_build1(&b, IR_OP_CONVERT_LAYOUT, want, &ld, 1);
    ir_replace_all_uses(f, ld, cv);
    f->values[cv].def->operands[0] = ld;
}

/* After the layout pass: as blockload_expand_laid_out, and the stored value goes
 * through a convert_layout to the blocked layout of its shape where it has another (an
 * accumulator's), so that the store's pointers, value and mask have one layout. */
IrOp *blockstore_expand_laid_out(IrFunc *f, IrOp *op)
{
    IrCtx *c = f->module->ctx;
    uint32_t first = f->nvalues;
    IrOp *st = expand_store(f, op);
    lay_out_blocked(f, first);
    const IrType *vt = ir_value_type(f, st->operands[1]);
    const IrLayout *l = ir_value_type(f, st->operands[0])->layout;
    if (!vt->layout || vt->layout == l) return st;
    IrBuilder b;
    ir_builder_before(&b, st);
    b.loc = st->loc;
    st->operands[1] = ir_build1(&b, IR_OP_CONVERT_LAYOUT, ir_type_with_layout(c, vt, l), &st->operands[1], 1);
    return st;
}
