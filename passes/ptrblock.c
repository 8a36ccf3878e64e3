/* Block-shaped pointer loads and stores as block_load and block_store (the first GPU
 * pass), so that the kernels users write with pointer arithmetic and edge masks, as
 * Triton's tutorials do, reach the tensor-memory accelerator as load_block's do.
 *
 * require:   Tile IR without layouts
 * guarantee: every rank-2 load and store of the form below that passes/blockload.c
 *            would keep for TMA (blockload_kept, asked with every match converted) is
 *            a block_load (a block_store) marked `upper`, which reads (writes) the same
 *            elements as it did and gives zeros where its mask was false (ops.def:
 *            block_load), or, on a wrapped axis, zeros past its edge where no value
 *            made of them is stored ("Wrapped rows"); every other op is as it was
 *            (the address and mask tiles of a converted op stay for DCE). So a kernel
 *            that gets no TMA from the conversion (sm_80, loads outside K loops,
 *            TILE_TMA=0, the checked mode) compiles to the code it did before:
 *            blockload's expansion of a block op is equivalent to the user's code but
 *            not the same instructions.
 *
 *   %rm = add (splat %om), (arange 0 : i32[128])        %ka = add (splat %k), (arange ...)
 *   %p  = addptr (broadcast (addptr (splat %a), %rm[:, None] * splat %sm)), %ka[None, :]
 *   %t  = load %p, (%rm[:, None] < splat %M) & (%ka[None, :] < splat %K), 0
 * ->
 *   %t  = block_load upper %a, %M, %K, %sm, 1, %om, %k : bf16[128, 64]
 *
 *   %h  = mul (convert %bh : i64), (convert %sh : i64)    Triton's attention: a head's
 *   %kv = add %rn[:, None] * splat %sl, %rd[None, :]      offset, keys from %n >= 0 and
 *   %t  = load (addptr (splat (addptr %k, %h)), %kv)      D unmasked
 * ->
 *   %t  = block_load upper %k, 2147483392, 64, %sl, 1, %n, 0, %bh64, %sh64 : bf16[64, 64]
 *
 * Which: the pointer tile is addptr(splat(base), off), possibly through a chain of
 * addptrs, broadcasts and expand_dims, where the sum of the offsets is, by the linear
 * analysis below (adds, subs, muls by scalars or splats, broadcast, expand_dims, splat),
 *     u + (o_0 + i_0) * st_0 + (o_1 + i_1) * st_1
 * with u and o_d scalars (linear forms over SSA scalars with integer coefficients), one
 * stride st_d the constant 1 and the other a constant or a constant times one scalar,
 * and all offsets of one integer type. The mask is an `and` of exactly one edge test
 * per axis, `c_d < B_d` (or `B_d > c_d`) with c_d = o'_d + i_d on that axis and B_d a
 * scalar, where o'_d may differ from the address's o_d by any scalar: the block's shape
 * is S_d = B_d - o'_d + o_d, which the linear forms simplify (Triton's `rk < K - k`
 * beside the address's `k + rk` gives K). A load's `other` is 0 or absent; a store's
 * value is a tensor-core accumulator or made of one element-wise (a GEMM's epilogue: the
 * values tmastore can stage). A load's axis may have no test, and a load no mask at all
 * (see "Unmasked axes"); a store needs a test on each axis (its unmasked forms are left
 * as written: TMA stores of them were not asked for nor measured). A mask with another
 * condition, `<=`, or a test of another coordinate than the address's is left alone; an
 * offset with a loaded index (a gather) or a non-unit inner stride does not decompose so.
 * A load's untested axis may instead be wrapped, `(o + i) % B` (see "Wrapped rows").
 *
 * Where u goes: a term x * st_d of it (x a scalar, st_d the stride scalar of axis d)
 * may be moved into the block's offset o_d, and any other term into the contiguous
 * axis' (stride 1); what is not moved is added to the base pointer. A term is moved
 * when S_d does not get more terms by it: the address's coordinate `k` moves into the
 * contiguous axis because the mask tested `k + rk < K`, a batch-and-head row offset
 * `(bh * L) * stride_l` moves into the rows when the mask tests rows of the whole
 * [BH * L, D] tensor (`rn < rows - bh * L`), and stays in the base when the mask tests
 * rows of one head (`rn < L`). Only with the base a parameter and S_d, strides and
 * offsets as passes/blockload.c's TMA rules want (a shape a constant or a parameter)
 * is the block copied by TMA.
 *
 * A third dimension: what stays of u after that, when it is one term x * s with s a
 * scalar the host knows (a parameter, through multiple_of and widenings, or a
 * constant), or the base is addptr(b0, x * s) with the offset of another integer type
 * (Triton's `head = (off_hz as i64) * stride_h` beside i32 block offsets), becomes the
 * block op's outer pair (x, s) (ir_block_outer) instead of a move of the base: a head
 * offset with its own stride is a third axis of the tensor, and blockload copies such
 * a block through a rank-3 tensor map, x its third coordinate, box 1 (when x is an s32
 * never negative and s a multiple of 16 bytes: blockload.c). The op reads ptr + x * s
 * computed in the pair's type, exactly what the source's addptr computed.
 *
 * Unmasked axes: a load's axis without a test (the user asserts its coordinates are inside the
 * tensor by not masking them) takes the extent o + n when its offset is a constant
 * o >= 0 (n its length: exact, the block is [o, o + n)), and EXTENT_ANY = 2^31 - 256 when
 * it is the strided axis of an i32 block and its offset is never negative (a sum of
 * positive multiples of values blockload_nonneg knows, a loop's induction variable from
 * 0); any other untested axis (the contiguous one at a varying offset, an i64 block, an
 * offset that may be negative) leaves the op alone. EXTENT_ANY is no smaller than any
 * coordinate the program can form: the strided axis' coordinate c times its stride st
 * (>= 8 elements in every map the runtime encodes: 16 bytes) is part of an i32 element
 * offset that does not overflow, so c <= (2^31 - 1) / 8; and 256 below 2^31 so that
 * passes/rotate.c's masked copies, placed at the extent, do not wrap. The outer x needs
 * no extent (no test); its map's dimension is 2^31, every s32 >= 0.
 *
 * Wrapped rows: Triton's matmul tutorial does not mask the rows of A and the columns
 * of B past M and N; it wraps them, `offs_am = (pid_m * BM + arange(0, BM)) % M`, and
 * reads real rows 0.. there, whose products land in accumulator rows that its C store
 * masks off. An axis coordinate `(o + i) % B` (rem by a scalar B, of one axis o + i with
 * stride 1 before the rem; any stride after it) of a load whose mask does not test that
 * axis is read as the axis o + i with the edge o + i < B, the same block op as the
 * masked form's (TMA gives zeros past B instead of the wrapped rows), only where that
 * changes no value the program stores. wrap_safe follows the positions o + i >= B
 * forward from the load, as the axes of each value along which they may differ:
 * through element-wise ops, broadcasts, expand_dims, reductions and scans over other
 * axes (cluster_axis_map, as passes/cluster.c follows a dot's rows), loops and ifs,
 * and a dot (A's rows become its rows, B's columns its columns, an accumulator's
 * stay). Every store of such a value must mask exactly those positions,
 * an edge o' + i < B' on each such axis with B' - o' = B - o (Triton's `offs_cm < M`
 * beside `offs_cm = pid_m * BM + arange`), and nothing else may see them: a reduction
 * or scan over the axis, a dot along K (the wrapped rows summed into every element),
 * trans, reshape, a load or store addressed or masked by them, an atomic, a print, any
 * other op, or a store without that mask leaves the load as written. The rows past B
 * then reach memory nowhere, and the rows below B are read where the source read them
 * ((o + i) % B = o + i for 0 <= o + i < B; a negative o + i reads before the tensor, an
 * out-of-bounds access as below). The interpreter runs the program as written (`%`);
 * the block op, where it is kept, reads zeros (tests/lit/passes/ptrblock_wrap.tile).
 *
 * Why the values are the same: a marked block op tests only c_d < S_d, which is the
 * user's c'_d < B_d shifted by the same scalar on both sides, and reads base +
 * sum c_d * st_d, the user's address summed in another order; the two agree as long
 * as the index arithmetic does not overflow its integer type (the whole element offset
 * must fit in it; TMA's coordinates are 32-bit anyway). `upper` leaves out block_load's
 * `c_d >= 0` test, so passes/blockload.c expands the op back into the same pointer load
 * whenever it is not copied by TMA. TMA zero-fills negative coordinates, which the
 * source would have read: before the start of the tensor a parameter points to (TMA
 * needs the base to be a parameter and positive strides), an out-of-bounds access. No
 * condition on the signs of the offsets is needed (blockload.c's `nonneg` exists for
 * load_block, whose meaning tests `>= 0`). An axis without a test is read where the source
 * read it as long as no coordinate reaches its extent, which a program without
 * out-of-bounds accesses does not (above); on the GPU its coordinates lie inside the
 * map's extent, so TMA fills nothing with zeros there. The outer pair adds x * s to the
 * pointer in the type the source added it in; TMA's coordinate x is that x exactly (an
 * s32 >= 0), and its stride the same s. */
#include "passes.h"

#include <math.h>
#include <string.h>

#include "ir/arena.h"

#define LIN_MAX 8
#define DEPTH 32

/* k + sum c[i] * x[i] over integer scalars x; src: a value equal to the whole form. */
typedef struct Lin {
    int64_t k;
    int n;
    IrValue x[LIN_MAX];
    int64_t c[LIN_MAX];
    IrValue src;
} Lin;

/* (o + i) * k * s along an axis (s IR_NO_VALUE: the constant k), i the axis' index;
 * ((o + i) % wb) * k * s where `wrap` (the header's "Wrapped rows"). */
typedef struct Axis {
    bool on, wrap;
    Lin o, wb;
    int64_t k;
    IrValue s;
} Axis;

/* An integer tile of rank <= 2 as u (the same in every element) plus its axes' terms. */
typedef struct Aff {
    Lin u;
    Axis ax[2];
} Aff;

/* The edge test o + i < b of one axis of the mask. */
typedef struct Edge {
    bool on;
    Lin o, b;
} Edge;

/* What a matched load or store becomes. */
typedef struct Block {
    IrValue base;
    Lin rest;                    /* added to the base pointer */
    Lin shape[2], off[2];
    int64_t k[2];
    IrValue s[2];
    IrElem ie;
    bool untested[2];            /* the axis has no edge test (its extent: fix_untested) */
    int wrapped;                 /* the axis whose edge is a wrap (o + i) % B, or -1 */
    Lin wo, wb;                  /* that edge: o + i < B */
    IrValue ox, os;              /* the outer pair x * os (ox IR_NO_VALUE: none; os IR_NO_VALUE: */
    int64_t ok;                  /* the constant ok), in the integer type oe */
    IrElem oe;
} Block;

/* The extent of an axis without a test whose offset is not a constant (fix_untested):
 * above every coordinate an i32 offset can form with a stride >= 2, and low enough that
 * a block of up to 256 rows placed at it (passes/rotate.c's masked copies) does not wrap. */
#define EXTENT_ANY (INT32_MAX - 255)

static const Lin lin_zero = {.src = IR_NO_VALUE};

static bool const_of(const IrFunc *f, IrValue v, int64_t *out)
{
    const IrOp *d = f->values[v].def;
    if (!d || d->code != IR_OP_CONST || ir_value_type(f, v)->rank) return false;
    *out = d->attr.i;
    return true;
}

static bool lin_is_zero(const Lin *a) { return !a->k && !a->n; }

/* *acc += x * y; false where that leaves int64_t (no form is made of such constants). */
static bool mad(int64_t *acc, int64_t x, int64_t y)
{
    int64_t p;
    return !__builtin_mul_overflow(x, y, &p) && !__builtin_add_overflow(*acc, p, acc);
}

/* a += scale * b; false when a would hold more than LIN_MAX terms. */
static bool lin_add(Lin *a, const Lin *b, int64_t scale)
{
    if (lin_is_zero(a) && scale == 1) {
        *a = *b;
        return true;
    }
    a->src = IR_NO_VALUE;
    if (!mad(&a->k, scale, b->k)) return false;
    for (int i = 0; i < b->n; i++) {
        int j = 0;
        while (j < a->n && a->x[j] != b->x[i]) j++;
        if (j == a->n) {
            if (a->n == LIN_MAX) return false;
            a->x[a->n] = b->x[i];
            a->c[a->n++] = 0;
        }
        if (!mad(&a->c[j], scale, b->c[i])) return false;
        if (!a->c[j]) {
            a->n--;
            a->x[j] = a->x[a->n];
            a->c[j] = a->c[a->n];
        }
    }
    return true;
}

static Lin lin_atom(IrValue v, int64_t c)
{
    Lin l = lin_zero;
    l.n = 1, l.x[0] = v, l.c[0] = c;
    l.src = c == 1 ? v : IR_NO_VALUE;
    return l;
}

/* The scalar v as a linear form: through adds, subs and muls by constants. */
static Lin lin_of(const IrFunc *f, IrValue v, int depth)
{
    const IrOp *d = f->values[v].def;
    int64_t k;
    Lin l = lin_zero, r;
    if (!d || depth > DEPTH || ir_value_type(f, v)->rank) return lin_atom(v, 1);
    if (d->code == IR_OP_CONST) l.k = d->attr.i;
    else if (d->code == IR_OP_ADD || d->code == IR_OP_SUB) {
        l = lin_of(f, d->operands[0], depth + 1);
        r = lin_of(f, d->operands[1], depth + 1);
        if (!lin_add(&l, &r, d->code == IR_OP_SUB ? -1 : 1)) return lin_atom(v, 1);
    } else if (d->code == IR_OP_MUL && (const_of(f, d->operands[1], &k) || const_of(f, d->operands[0], &k))) {
        r = lin_of(f, d->operands[const_of(f, d->operands[1], &k) ? 0 : 1], depth + 1);
        if (!lin_add(&l, &r, k)) return lin_atom(v, 1);
    } else
        return lin_atom(v, 1);
    l.src = v;
    return l;
}

/* Coefficients and constant far from int64_t's ends (lin_build negates them). */
static bool lin_small(const Lin *a)
{
    const int64_t lim = INT64_C(1) << 62;
    bool ok = a->k > -lim && a->k < lim;
    for (int i = 0; i < a->n; i++) ok &= a->c[i] > -lim && a->c[i] < lim;
    return ok;
}

/* The terms of a form: what materializing it costs and what says how simple it is. */
static int lin_terms(const Lin *a) { return a->n; }

/* The one value a form is (its src, or a single term x), or IR_NO_VALUE. */
static IrValue lin_value(const Lin *a)
{
    if (a->src != IR_NO_VALUE) return a->src;
    return a->n == 1 && a->c[0] == 1 && !a->k ? a->x[0] : IR_NO_VALUE;
}

/* ---- the offset tiles ---------------------------------------------------------------- */

static bool aff_of(const IrFunc *f, IrValue v, Aff *a, int depth);

static Aff aff_zero(void)
{
    Aff a;
    memset(&a, 0, sizeof a);
    a.u = lin_zero;
    for (int d = 0; d < 2; d++) a.ax[d].o = a.ax[d].wb = lin_zero, a.ax[d].s = IR_NO_VALUE;
    return a;
}

static int aff_axes(const Aff *a) { return a->ax[0].on + a->ax[1].on; }

/* expand_dims or broadcast op d applied to a, the form of its operand. */
static bool aff_shape(const IrFunc *f, const IrOp *d, Aff *a)
{
    const IrType *from = ir_value_type(f, d->operands[0]), *to = ir_value_type(f, d->results[0]);
    if (to->rank > 2) return false;
    if (d->code == IR_OP_EXPAND_DIMS) {
        if (from->rank != 1 || d->attr.i > 1) return false;
        if (d->attr.i == 0) a->ax[1] = a->ax[0], a->ax[0] = aff_zero().ax[0];
        return true;
    }
    for (int e = 0; e < to->rank; e++)
        if (a->ax[e].on && from->shape[e] != to->shape[e]) return false;
    return from->rank == to->rank;
}

/* a +/- b, axis by axis; an axis in both is no block. */
static bool aff_sum(Aff *a, const Aff *b, int64_t sign)
{
    if (!lin_add(&a->u, &b->u, sign)) return false;
    for (int d = 0; d < 2; d++) {
        if (!b->ax[d].on) continue;
        if (a->ax[d].on) return false;
        a->ax[d] = b->ax[d];
        if (__builtin_mul_overflow(a->ax[d].k, sign, &a->ax[d].k)) return false;
    }
    return true;
}

/* u moved into the one axis of a whose stride is a constant dividing it (not into a
 * wrapped one: (o + i) % B + u is not (o + u + i) % B). */
static void aff_absorb(Aff *a)
{
    if (aff_axes(a) != 1 || lin_is_zero(&a->u)) return;
    Axis *x = &a->ax[a->ax[0].on ? 0 : 1];
    if (x->wrap || x->s != IR_NO_VALUE || x->k <= 0 || a->u.k % x->k) return;
    for (int i = 0; i < a->u.n; i++)
        if (a->u.c[i] % x->k) return;
    Lin q = a->u;
    q.src = x->k == 1 ? q.src : IR_NO_VALUE;
    q.k /= x->k;
    for (int i = 0; i < q.n; i++) q.c[i] /= x->k;
    Lin o = x->o;
    if (lin_add(&o, &q, 1)) x->o = o, a->u = lin_zero;
}

/* a * m, m the same in every element: a constant scales; a scalar becomes the stride of
 * a's axes, once u is in them. */
static bool aff_scale(Aff *a, const Aff *m)
{
    if (!m->u.n) {
        Lin u = lin_zero;
        if (!lin_add(&u, &a->u, m->u.k)) return false;
        a->u = u;
        for (int d = 0; d < 2; d++)
            if (__builtin_mul_overflow(a->ax[d].k, m->u.k, &a->ax[d].k)) return false;
        return true;
    }
    IrValue s = lin_value(&m->u);
    aff_absorb(a);
    if (s == IR_NO_VALUE || !lin_is_zero(&a->u) || !aff_axes(a)) return false;
    for (int d = 0; d < 2; d++) {
        if (!a->ax[d].on) continue;
        if (a->ax[d].s != IR_NO_VALUE) return false;
        a->ax[d].s = s;
    }
    return true;
}

static bool aff_product(const IrFunc *f, const IrOp *d, Aff *a, int depth)
{
    Aff b;
    if (!aff_of(f, d->operands[0], a, depth + 1) || !aff_of(f, d->operands[1], &b, depth + 1)) return false;
    if (aff_axes(a) && aff_axes(&b)) return false;
    if (aff_axes(&b) || (!aff_axes(a) && !a->u.n)) {   /* the varying one (or the constant's partner) first */
        Aff t = *a;
        *a = b;
        b = t;
    }
    return (aff_axes(a) || !b.u.n) && aff_scale(a, &b);
}

/* (o + i) % B, B a scalar (the header's "Wrapped rows"): the axis o + i, wrapped at B. */
static bool aff_wrap(const IrFunc *f, const IrOp *d, Aff *a, int depth)
{
    Aff m;
    if (!aff_of(f, d->operands[0], a, depth + 1) || !aff_of(f, d->operands[1], &m, depth + 1)) return false;
    aff_absorb(a);
    if (aff_axes(a) != 1 || aff_axes(&m) || !lin_is_zero(&a->u) || lin_is_zero(&m.u)) return false;
    Axis *x = &a->ax[a->ax[0].on ? 0 : 1];
    if (x->wrap || x->k != 1 || x->s != IR_NO_VALUE) return false;
    x->wrap = true;
    x->wb = m.u;
    return true;
}

/* The integer tile v (rank <= 2) as an Aff. */
static bool aff_of(const IrFunc *f, IrValue v, Aff *a, int depth)
{
    const IrOp *d = f->values[v].def;
    const IrType *t = ir_value_type(f, v);
    Aff b;
    *a = aff_zero();
    if (!d || depth > DEPTH || t->rank > 2 || !ir_elem_is_int(t->elem) || t->elem == IR_I1) return false;
    switch (d->code) {
    case IR_OP_CONST: a->u.k = d->attr.i; return true;
    case IR_OP_SPLAT: a->u = lin_of(f, d->operands[0], depth + 1); return true;
    case IR_OP_ARANGE:
        a->ax[0].on = true, a->ax[0].o.k = d->attr.i, a->ax[0].k = 1;
        return true;
    case IR_OP_ADD: case IR_OP_SUB:
        return aff_of(f, d->operands[0], a, depth + 1) && aff_of(f, d->operands[1], &b, depth + 1) &&
               aff_sum(a, &b, d->code == IR_OP_SUB ? -1 : 1);
    case IR_OP_MUL: return aff_product(f, d, a, depth);
    case IR_OP_REM: return aff_wrap(f, d, a, depth);
    case IR_OP_EXPAND_DIMS: case IR_OP_BROADCAST:
        return aff_of(f, d->operands[0], a, depth + 1) && aff_shape(f, d, a);
    default: return false;
    }
}

/* The pointer tile v as splat(base) moved by *off (of integer type *ie). */
static bool ptr_of(const IrFunc *f, IrValue v, IrValue *base, Aff *off, IrElem *ie, int depth)
{
    const IrOp *d = f->values[v].def;
    Aff b;
    if (!d || depth > DEPTH) return false;
    switch (d->code) {
    case IR_OP_SPLAT:
        *base = d->operands[0];
        *off = aff_zero();
        return true;
    case IR_OP_ADDPTR: {
        IrElem e = ir_value_type(f, d->operands[1])->elem;
        if (!ptr_of(f, d->operands[0], base, off, ie, depth + 1) || !aff_of(f, d->operands[1], &b, 0)) return false;
        if (*ie != IR_NUM_ELEMS && *ie != e) return false;
        *ie = e;
        return aff_sum(off, &b, 1);
    }
    case IR_OP_EXPAND_DIMS: case IR_OP_BROADCAST:
        return ptr_of(f, d->operands[0], base, off, ie, depth + 1) && aff_shape(f, d, off);
    default: return false;
    }
}

/* ---- the mask ------------------------------------------------------------------------ */

/* The edge test `x < y` (x one axis' coordinate with stride 1, y a scalar), recorded on
 * the mask's axis map[axis]. */
static bool edge_of(const IrFunc *f, IrValue x, IrValue y, const int *map, IrElem ie, const int32_t *shape, Edge *e)
{
    Aff a, b;
    const IrType *t = ir_value_type(f, x);
    if (t->elem != ie || !aff_of(f, x, &a, 0) || !aff_of(f, y, &b, 0)) return false;
    if (aff_axes(&a) != 1 || aff_axes(&b)) return false;
    int d = a.ax[0].on ? 0 : 1;
    if (a.ax[d].wrap || a.ax[d].k != 1 || a.ax[d].s != IR_NO_VALUE || map[d] < 0 || e[map[d]].on) return false;
    if (t->shape[d] != shape[map[d]]) return false;     /* the coordinate of the whole axis */
    Edge *g = &e[map[d]];
    g->on = true;
    g->o = a.ax[d].o;
    g->b = b.u;
    return lin_add(&g->o, &a.u, 1);
}

/* The mask m as one edge test per axis, anded (through broadcasts and expand_dims:
 * map[axis of m] is the load's axis). */
static bool mask_of(const IrFunc *f, IrValue m, const int *map, IrElem ie, const int32_t *shape, Edge *e, int depth)
{
    const IrOp *d = f->values[m].def;
    const IrType *t = ir_value_type(f, m);
    if (!d || depth > DEPTH || t->rank > 2) return false;
    switch (d->code) {
    case IR_OP_AND:
        return mask_of(f, d->operands[0], map, ie, shape, e, depth + 1) &&
               mask_of(f, d->operands[1], map, ie, shape, e, depth + 1);
    case IR_OP_BROADCAST: return mask_of(f, d->operands[0], map, ie, shape, e, depth + 1);
    case IR_OP_EXPAND_DIMS: {
        int sub[2] = {-1, -1};
        if (t->rank != 2 || d->attr.i > 1) return false;
        sub[0] = map[d->attr.i == 0 ? 1 : 0];
        return mask_of(f, d->operands[0], sub, ie, shape, e, depth + 1);
    }
    case IR_OP_CMP: {
        IrValue x = d->operands[0], y = d->operands[1];
        if (d->attr.i != IR_CMP_LT && d->attr.i != IR_CMP_GT) return false;
        if (d->attr.i == IR_CMP_GT) x = d->operands[1], y = d->operands[0];
        return edge_of(f, x, y, map, ie, shape, e);
    }
    default: return false;
    }
}

/* ---- matching ------------------------------------------------------------------------- */

/* Moves term j of b->rest (coefficient c, value x) into axis d as `add` when the shape
 * of d does not get more terms by it. */
static bool try_move(Block *b, int d, int j, const Lin *add)
{
    Lin s = b->shape[d];
    if (!lin_add(&s, add, 1) || lin_terms(&s) > lin_terms(&b->shape[d])) return false;
    Lin o = b->off[d];
    if (!lin_add(&o, add, 1)) return false;
    Lin rest = b->rest, t = lin_atom(b->rest.x[j], b->rest.c[j]);
    if (!lin_add(&rest, &t, -1)) return false;
    b->shape[d] = s, b->off[d] = o, b->rest = rest;
    return true;
}

/* Term j of b->rest as a multiple of axis d's stride: c * y for c * (y * s), c for c * s,
 * c / k * x for c * x with a constant stride k dividing c. */
static bool stride_multiple(const IrFunc *f, const Block *b, int d, int j, Lin *out)
{
    IrValue x = b->rest.x[j];
    int64_t c = b->rest.c[j];
    if (b->s[d] == IR_NO_VALUE) {
        if (b->k[d] <= 0 || c % b->k[d]) return false;
        *out = lin_atom(x, c / b->k[d]);
        return true;
    }
    if (b->k[d] != 1) return false;
    if (x == b->s[d]) {
        *out = lin_zero;
        out->k = c;
        return true;
    }
    const IrOp *m = f->values[x].def;
    if (!m || m->code != IR_OP_MUL || (m->operands[0] != b->s[d] && m->operands[1] != b->s[d])) return false;
    Lin y = lin_of(f, m->operands[m->operands[0] == b->s[d] ? 1 : 0], 0);
    *out = lin_zero;
    return lin_add(out, &y, c);
}

/* The uniform part of the address into the axes where that keeps their shapes simple
 * (the header's "Where u goes"); the rest stays for the base pointer. */
static void place_rest(const IrFunc *f, Block *b, int fast)
{
    for (int j = 0; j < b->rest.n;) {
        Lin add = lin_zero;
        bool moved = false;
        for (int d = 0; d < 2 && !moved; d++)
            moved = d != fast && stride_multiple(f, b, d, j, &add) && try_move(b, d, j, &add);
        if (!moved) {
            add = lin_atom(b->rest.x[j], b->rest.c[j]);
            moved = try_move(b, fast, j, &add);
        }
        if (!moved) j++;
    }
    int64_t o, s;
    if (!b->rest.k || __builtin_add_overflow(b->off[fast].k, b->rest.k, &o) ||
        __builtin_add_overflow(b->shape[fast].k, b->rest.k, &s))
        return;
    b->off[fast].k = o, b->shape[fast].k = s;
    b->off[fast].src = b->shape[fast].src = IR_NO_VALUE;
    b->rest.k = 0;
}

/* Peels scalar addptrs of the offsets' type off the base into b->rest. */
static bool peel_base(const IrFunc *f, Block *b)
{
    for (const IrOp *d = f->values[b->base].def; d && d->code == IR_OP_ADDPTR; d = f->values[b->base].def) {
        if (ir_value_type(f, d->operands[1])->elem != b->ie) break;
        Lin l = lin_of(f, d->operands[1], 0);
        if (!lin_add(&b->rest, &l, 1)) return false;
        b->base = d->operands[0];
    }
    return true;
}

/* The form is never negative: a constant >= 0 plus positive multiples of values that
 * are not (blockload_nonneg), as long as it does not wrap. */
static bool lin_nonneg(const IrFunc *f, const Lin *a)
{
    bool ok = a->k >= 0;
    for (int i = 0; i < a->n; i++) ok &= a->c[i] > 0 && blockload_nonneg(f, a->x[i]);
    return ok;
}

/* The extents of the axes without a test (the header's "Unmasked axes"): o + n for a
 * constant offset o >= 0, EXTENT_ANY for the strided axis of an i32 block whose offset
 * is never negative; false for any other. */
static bool fix_untested(const IrFunc *f, Block *b, int fast, const int32_t *shape)
{
    for (int d = 0; d < 2; d++) {
        if (!b->untested[d]) continue;
        b->shape[d] = lin_zero;
        if (!b->off[d].n) {
            if (b->off[d].k < 0) return false;
            b->shape[d].k = b->off[d].k + shape[d];
            continue;
        }
        if (d == fast || b->ie != IR_I32 || !lin_nonneg(f, &b->off[d])) return false;
        b->shape[d].k = EXTENT_ANY;
    }
    return true;
}

/* x * s for the one term c * v of l: v = x * s (c 1) with s a scalar the host knows
 * (blockload_host_scalar: a parameter, a constant), or x = v and the constant c (>= 2). */
static bool outer_term(const IrFunc *f, const Lin *l, Block *b, IrElem e)
{
    if (l->n != 1 || l->k) return false;
    IrValue v = l->x[0];
    const IrOp *m = f->values[v].def;
    int32_t param;
    int64_t value, mult;
    b->oe = e;
    if (m && m->code == IR_OP_MUL && l->c[0] == 1) {
        for (int i = 1; i >= 0; i--)
            if (blockload_host_scalar(f, m->operands[i], &param, &value, &mult)) {
                b->ox = m->operands[1 - i], b->os = m->operands[i], b->ok = 1;
                return true;
            }
        return false;
    }
    if (l->c[0] < 2) return false;
    b->ox = v, b->os = IR_NO_VALUE, b->ok = l->c[0];
    return true;
}

/* What the address adds to the block beside its axes, as the outer pair where it is one
 * term x * s (the header's "A third dimension"): the rest of u, or a scalar addptr of
 * another integer type on the base. */
static void find_outer(const IrFunc *f, Block *b)
{
    b->ox = IR_NO_VALUE;
    const IrOp *d = f->values[b->base].def;
    if (!lin_is_zero(&b->rest)) {
        if (outer_term(f, &b->rest, b, b->ie)) b->rest = lin_zero;
        return;
    }
    if (!d || d->code != IR_OP_ADDPTR) return;
    IrElem e = ir_value_type(f, d->operands[1])->elem;
    Lin y = lin_of(f, d->operands[1], 0);
    if (e != b->ie && outer_term(f, &y, b, e)) b->base = d->operands[0];
}

/* The pointer tile ptr under mask (IR_NO_VALUE: none) as a block of shape `shape`; a
 * store's axes must all be tested (`load`: a load's may be untested). */
static bool match(const IrFunc *f, IrValue ptr, IrValue mask, const int32_t *shape, bool load, Block *b)
{
    Aff off;
    Edge e[2] = {{0}, {0}};
    static const int map[2] = {0, 1};
    b->ie = IR_NUM_ELEMS;
    if (!ptr_of(f, ptr, &b->base, &off, &b->ie, 0) || aff_axes(&off) != 2) return false;
    if (b->ie != IR_I32 && b->ie != IR_I64) return false;
    if (mask != IR_NO_VALUE && !mask_of(f, mask, map, b->ie, shape, e, 0)) return false;
    b->wrapped = -1;
    for (int d = 0; d < 2; d++) {           /* a wrap is the edge of an untested axis */
        if (!off.ax[d].wrap) continue;
        if (!load || e[d].on || b->wrapped >= 0) return false;
        e[d] = (Edge){true, off.ax[d].o, off.ax[d].wb};
        b->wrapped = d, b->wo = e[d].o, b->wb = e[d].b;
    }
    if (!load && (!e[0].on || !e[1].on)) return false;
    int fast = -1;
    for (int d = 0; d < 2; d++) {
        b->k[d] = off.ax[d].k, b->s[d] = off.ax[d].s, b->off[d] = off.ax[d].o;
        if (b->k[d] == 1 && b->s[d] == IR_NO_VALUE) fast = fast < 0 ? d : 2;
        b->untested[d] = !e[d].on;
        b->shape[d] = e[d].on ? e[d].b : lin_zero;          /* S = B - o' + o */
        if (e[d].on && (!lin_add(&b->shape[d], &e[d].o, -1) || !lin_add(&b->shape[d], &b->off[d], 1))) return false;
    }
    if (fast < 0 || fast > 1 || !b->k[1 - fast]) return false;
    b->rest = off.u;
    if (!peel_base(f, b)) return false;
    place_rest(f, b, fast);
    find_outer(f, b);
    return fix_untested(f, b, fast, shape) && lin_small(&b->rest) && lin_small(&b->shape[0]) &&
           lin_small(&b->shape[1]) && lin_small(&b->off[0]) && lin_small(&b->off[1]);
}

/* ---- building ------------------------------------------------------------------------- */

static IrValue lin_build(IrBuilder *b, const Lin *l, const IrType *it)
{
    IrValue v = lin_value(l);
    if (v != IR_NO_VALUE) return v;
    IrValue acc = IR_NO_VALUE;
    for (int pass = 0; pass < 2; pass++)        /* positive terms, then the negative ones */
        for (int i = 0; i < l->n; i++) {
            int64_t c = l->c[i];
            if ((c > 0) != (pass == 0)) continue;
            bool sub = c < 0 && acc != IR_NO_VALUE;
            int64_t m = sub ? -c : c;
            IrValue t = m == 1 ? l->x[i] : ir_build_binary(b, IR_OP_MUL, l->x[i], ir_const_int(b, it, m));
            acc = acc == IR_NO_VALUE ? t : ir_build_binary(b, sub ? IR_OP_SUB : IR_OP_ADD, acc, t);
        }
    if (acc == IR_NO_VALUE) return ir_const_int(b, it, l->k);
    if (l->k) acc = ir_build_binary(b, l->k > 0 ? IR_OP_ADD : IR_OP_SUB, acc, ir_const_int(b, it, l->k > 0 ? l->k : -l->k));
    return acc;
}

static IrValue stride_build(IrBuilder *b, int64_t k, IrValue s, const IrType *it)
{
    if (s == IR_NO_VALUE) return ir_const_int(b, it, k);
    return k == 1 ? s : ir_build_binary(b, IR_OP_MUL, s, ir_const_int(b, it, k));
}

/* The operands of the block op (ptr, shape x 2, strides x 2, offsets x 2[, x, s]) into
 * ops, built before op; their count. */
static uint32_t block_operands(IrFunc *f, IrOp *op, const Block *blk, IrValue *ops)
{
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    const IrType *it = ir_type_scalar(f->module->ctx, blk->ie);
    ops[0] = blk->base;
    if (!lin_is_zero(&blk->rest)) ops[0] = ir_build_binary(&b, IR_OP_ADDPTR, blk->base, lin_build(&b, &blk->rest, it));
    for (int d = 0; d < 2; d++) {
        ops[1 + d] = lin_build(&b, &blk->shape[d], it);
        ops[3 + d] = stride_build(&b, blk->k[d], blk->s[d], it);
        ops[5 + d] = lin_build(&b, &blk->off[d], it);
    }
    if (blk->ox == IR_NO_VALUE) return 7;
    ops[7] = blk->ox;
    ops[8] = stride_build(&b, blk->ok, blk->os, ir_type_scalar(f->module->ctx, blk->oe));
    return 9;
}

/* The tile is 0 in every element (+0.0 for floats). */
static bool is_zero(const IrFunc *f, IrValue v)
{
    const IrOp *d = f->values[v].def;
    if (d && d->code == IR_OP_SPLAT) return is_zero(f, d->operands[0]);
    if (!d || d->code != IR_OP_CONST) return false;
    IrElem e = ir_value_type(f, v)->elem;
    return ir_elem_is_float(e) ? d->attr.f == 0 && !signbit(d->attr.f) : d->attr.i == 0;
}

static bool block_elem(const IrType *t) { return t->rank == 2 && t->elem != IR_I1 && t->elem != IR_PTR; }

/* A block op built beside the load or store it may replace: the ops from `first` to
 * `block` are new. */
typedef struct Made {
    IrOp *orig, *first, *block;
} Made;

static IrOp *first_after(IrOp *prev, IrOp *op) { return prev ? prev->next : op->parent->first; }

/* The block_load (block_store) of blk with op's value, built before op; op stays. */
static Made build_block(IrFunc *f, IrOp *op, const Block *blk)
{
    bool load = op->code == IR_OP_LOAD;
    IrOp *prev = op->prev;
    IrValue ops[10];
    uint32_t n = block_operands(f, op, blk, ops);
    if (!load) ops[n++] = op->operands[1];
    IrBuilder b;
    ir_builder_before(&b, op);
    b.loc = op->loc;
    const IrType *t = load ? ir_value_type(f, op->results[0]) : NULL;
    IrOp *bl = ir_build(&b, load ? IR_OP_BLOCK_LOAD : IR_OP_BLOCK_STORE, ops, n, load ? &t : NULL, load, 0);
    bl->attr.i = IR_BLOCK_UPPER;
    if (load) ir_replace_all_uses(f, op->results[0], bl->results[0]);
    return (Made){op, first_after(prev, op), bl};
}

/* v is a tensor-core dot's accumulator (a dot of 1- or 2-byte operands, or the loop
 * result it yields) or made of one by element-wise ops: the values whose layout lets
 * tmastore stage them (an accumulator's); a store of another is expanded late, after the
 * layouts, into code unlike the user's, so such stores are not converted. */
static bool from_tensor_cores(const IrFunc *f, IrValue v, int depth)
{
    const IrOp *d = f->values[v].def;
    if (!d || depth > DEPTH) return false;
    if (d->code == IR_OP_FOR) {
        const IrOp *y = d->regions[0].last;
        uint32_t i = f->values[v].index;
        return y && y->code == IR_OP_YIELD && i < y->noperands && from_tensor_cores(f, y->operands[i], depth + 1);
    }
    if (d->code == IR_OP_DOT)
        return ir_elem_bytes(ir_value_type(f, d->operands[0])->elem) <= 2 &&
               ir_elem_bytes(ir_value_type(f, d->operands[1])->elem) <= 2;
    if (!(ir_op_info[d->code].flags & IR_E)) return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (ir_value_type(f, d->operands[i])->rank == 2 && from_tensor_cores(f, d->operands[i], depth + 1)) return true;
    return false;
}

/* ---- wrapped rows (the header's "Wrapped rows") ---------------------------------------
 * Which values the wrapped load's rows past its edge reach, by propagation forward from
 * the load: bit a of rows[v] says that v's elements may differ at the coordinates along
 * axis a where the load's did (o + i >= B), and no others (the same positions i). */
typedef struct Wrap {
    const IrFunc *f;
    uint8_t *rows;
    uint32_t nv;
    Lin o, b;                    /* the load's edge o + i < B */
    bool changed, bad;
} Wrap;

static unsigned rows_of(const Wrap *w, IrValue v) { return v < w->nv ? w->rows[v] : 0; }

static void wrap_add(Wrap *w, IrValue v, unsigned bits)
{
    if (!bits) return;
    if (v >= w->nv || !ir_value_type(w->f, v)->rank || bits > 0xff) {
        w->bad = true;
        return;
    }
    if ((w->rows[v] | bits) == w->rows[v]) return;
    w->rows[v] |= (uint8_t)bits;
    w->changed = true;
}

/* The store op's mask tests, on every axis of `bits`, its coordinate o' + i < B' with
 * B' - o' = B - o: the positions the load's edge leaves out are exactly those it masks. */
static bool wrap_masked(const Wrap *w, const IrOp *op, unsigned bits)
{
    static const int map[2] = {0, 1};
    const IrType *t = ir_value_type(w->f, op->operands[1]);
    if (op->noperands < 3 || t->rank > 2) return false;
    for (IrElem ie = IR_I32; ie != IR_NUM_ELEMS; ie = ie == IR_I32 ? IR_I64 : IR_NUM_ELEMS) {
        Edge e[2] = {{0}, {0}};
        if (!mask_of(w->f, op->operands[2], map, ie, t->shape, e, 0)) continue;
        for (int a = 0; a < t->rank; a++) {
            Lin d = e[a].b;
            if (!(bits >> a & 1)) continue;
            if (!e[a].on || !lin_add(&d, &e[a].o, -1) || !lin_add(&d, &w->b, -1) || !lin_add(&d, &w->o, 1) ||
                !lin_is_zero(&d))
                return false;
        }
        return true;
    }
    return false;
}

/* The axes of op's result that the bits of its operand's axes map to (cluster's map:
 * expand_dims, reductions and scans); bad where it mixes them. */
static void wrap_map(Wrap *w, const IrOp *op, unsigned bits)
{
    const IrType *t = ir_value_type(w->f, op->operands[0]);
    unsigned out = 0;
    for (int a = 0; a < t->rank; a++) {
        if (!(bits >> a & 1)) continue;
        int m = cluster_axis_map(op, t->rank, a, true);
        if (m < 0 || (op->code == IR_OP_BROADCAST && t->shape[a] != ir_value_type(w->f, op->results[0])->shape[a])) {
            w->bad = true;
            return;
        }
        out |= 1u << m;
    }
    wrap_add(w, op->results[0], out);
}

static void wrap_block(Wrap *w, const IrBlock *blk);

/* A loop's or if's yielded values: yield operand i, result i (and for a loop its init
 * and body argument i + 1) carry the same rows. Any other op's region yields none. */
static void wrap_regions(Wrap *w, const IrOp *op)
{
    bool known = op->code == IR_OP_FOR || op->code == IR_OP_IF;
    for (uint32_t r = 0; r < op->nregions; r++) {
        wrap_block(w, &op->regions[r]);
        const IrOp *y = op->regions[r].last;
        if (!y || (y->code != IR_OP_YIELD && y->code != IR_OP_CONDITION)) continue;
        for (uint32_t i = 0; i < y->noperands; i++) {
            unsigned bits = rows_of(w, y->operands[i]);
            if (bits && (!known || i >= op->nresults)) w->bad = true;
            if (!known || i >= op->nresults) continue;
            if (op->code == IR_OP_FOR) bits |= rows_of(w, op->operands[3 + i]) | rows_of(w, op->regions[0].args[1 + i]);
            wrap_add(w, op->results[i], bits);
            if (op->code == IR_OP_FOR) wrap_add(w, op->regions[0].args[1 + i], bits);
        }
    }
}

static void wrap_visit(Wrap *w, const IrOp *op)
{
    unsigned in = 0;
    for (uint32_t i = 0; i < op->noperands; i++) in |= rows_of(w, op->operands[i]);
    switch (op->code) {
    case IR_OP_DOT: {                       /* rows of A are the result's, columns of B its */
        unsigned x = rows_of(w, op->operands[0]), y = rows_of(w, op->operands[1]);
        if ((x & 2) || (y & 1)) w->bad = true;          /* along K: summed into every row */
        if (in && ir_value_type(w->f, op->results[0])->rank != 2) w->bad = true;
        wrap_add(w, op->results[0], (x & 1) | (y & 2) | rows_of(w, op->operands[2]));
        return;
    }
    case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS: case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN:
    case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_XOR_SUM: case IR_OP_CUMSUM: case IR_OP_CUMPROD:
        wrap_map(w, op, in);
        return;
    case IR_OP_STORE: {
        unsigned v = rows_of(w, op->operands[1]);       /* a loaded address or mask: a gather */
        bool addr = rows_of(w, op->operands[0]) || (op->noperands > 2 && rows_of(w, op->operands[2]));
        if (addr || (v && !wrap_masked(w, op, v))) w->bad = true;
        return;
    }
    case IR_OP_YIELD: case IR_OP_CONDITION: return;        /* wrap_regions */
    case IR_OP_FOR: case IR_OP_IF: wrap_regions(w, op); return;   /* bounds and conditions: scalars */
    default:
        wrap_regions(w, op);
        if (!in) return;
        if (!(ir_op_info[op->code].flags & IR_E)) {
            w->bad = true;                  /* loads, trans, reshapes, prints, atomics, ... */
            return;
        }
        for (uint32_t i = 0; i < op->nresults; i++) wrap_add(w, op->results[i], in);
    }
}

static void wrap_block(Wrap *w, const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op && !w->bad; op = op->next) wrap_visit(w, op);
}

/* The wrapped load op's rows past the edge reach memory only through stores masked on
 * them (or nowhere): reading zeros there instead changes no value the program stores. */
static bool wrap_safe(const IrFunc *f, const IrOp *op, const Block *blk)
{
    Wrap w = {.f = f, .nv = f->nvalues, .o = blk->wo, .b = blk->wb};
    w.rows = tl_calloc(w.nv ? w.nv : 1, 1);
    if (!w.rows) tl_oom();
    w.rows[op->results[0]] = (uint8_t)(1u << blk->wrapped);
    do {
        w.changed = false;
        wrap_block(&w, &f->body);
    } while (w.changed && !w.bad);
    tl_free(w.rows);
    return !w.bad;
}

static bool match_op(const IrFunc *f, const IrOp *op, Block *blk)
{
    if (op->code == IR_OP_LOAD) {
        const IrType *t = ir_value_type(f, op->results[0]);
        if (!block_elem(t) || (op->noperands == 3 && !is_zero(f, op->operands[2]))) return false;
        return match(f, op->operands[0], op->noperands > 1 ? op->operands[1] : IR_NO_VALUE, t->shape, true, blk) &&
               (blk->wrapped < 0 || wrap_safe(f, op, blk));
    }
    const IrType *t = ir_value_type(f, op->operands[1]);
    return block_elem(t) && from_tensor_cores(f, op->operands[1], 0) &&
           match(f, op->operands[0], op->noperands > 2 ? op->operands[2] : IR_NO_VALUE, t->shape, false, blk);
}

/* The block op stays and the pointer op goes, or the other way round. */
static void settle(IrFunc *f, const Made *m, bool keep)
{
    if (keep) {
        ir_op_remove(m->orig);
        return;
    }
    if (m->block->nresults) ir_replace_all_uses(f, m->block->results[0], m->orig->results[0]);
    for (IrOp *o = m->first, *next; o; o = next) {
        next = o == m->block ? NULL : o->next;
        ir_op_remove(o);
    }
}

typedef VEC(IrOp *) Ops;
typedef VEC(Made) Mades;
typedef VEC(Block) Blocks;

/* ---- loop-carried pointer tiles (Triton's `a_ptrs += BLOCK_K * stride_ak`) -------------
 * A pointer tile p carried by a `for` of constant step s, yielded as addptr(p, splat(c))
 * with c the same in every iteration (and, for s > 1, a constant multiple of s), is
 * p0 + (iv - lo) / s * c = p0 + (iv - lo) * (c / s) in iteration iv (p0 its initial
 * value). Before matching, the loads and stores of p in the body read q = addptr(p0,
 * splat((iv - lo) * c)), built at the top of the body, which the matcher sees through
 * (with c = x * K, K a constant, built as ((iv - lo) * x) * K, so that a stride x of an
 * axis moves the step into that axis' offset). After: ops that were not converted read
 * p again (the code as written), and a p then read by nothing but its increment, whose
 * loop result is unused, is no longer carried. */
typedef struct Carried {
    IrOp *loop;
    IrValue p, q;
    IrOp *first;                 /* the first op built for q (q's def the last) */
} Carried;
typedef VEC(Carried) Carrieds;

/* v is defined outside the loop op (a parameter, or an op or block argument not
 * inside its region). */
static bool outside(const IrFunc *f, IrValue v, const IrOp *loop)
{
    const IrValueInfo *vi = &f->values[v];
    const IrBlock *blk = vi->def ? vi->def->parent : vi->block;
    for (; blk; blk = blk->parent_op ? blk->parent_op->parent : NULL)
        if (blk->parent_op == loop) return false;
    return true;
}

/* The scalar c is the same in every iteration: defined outside the loop, or a product
 * in its body of two values defined outside (an increment `BK * stride` the hoisting
 * pass has not moved yet); carry_loop builds it anew from those. */
static bool invariant(const IrFunc *f, IrValue c, const IrOp *loop)
{
    if (outside(f, c, loop)) return true;
    const IrOp *d = f->values[c].def;
    return d && d->code == IR_OP_MUL && outside(f, d->operands[0], loop) && outside(f, d->operands[1], loop);
}

static void carry_loop(IrFunc *f, IrOp *loop, Carrieds *out)
{
    int64_t step;
    IrBlock *body = &loop->regions[0];
    const IrOp *y = body->last;
    if (!const_of(f, loop->operands[2], &step) || step < 1 || !y || y->code != IR_OP_YIELD) return;
    IrValue iv = body->args[0];
    const IrType *ivt = ir_value_type(f, iv);
    for (uint32_t j = 0; j + 1 < body->nargs && j < y->noperands; j++) {
        IrValue p = body->args[j + 1];
        const IrType *pt = ir_value_type(f, p);
        const IrOp *inc = f->values[y->operands[j]].def;
        if (pt->elem != IR_PTR || pt->rank != 2 || !inc || inc->code != IR_OP_ADDPTR || inc->operands[0] != p)
            continue;
        const IrOp *sp = f->values[inc->operands[1]].def;
        int64_t kc = 0;
        bool konst = sp && sp->code == IR_OP_CONST && ir_elem_is_int(ir_value_type(f, sp->results[0])->elem);
        if (konst) kc = sp->attr.i;
        else if (!sp || sp->code != IR_OP_SPLAT || !invariant(f, sp->operands[0], loop)) continue;
        IrValue c = konst ? IR_NO_VALUE : sp->operands[0];
        if (ir_value_type(f, inc->operands[1])->elem != ivt->elem) continue;
        /* iteration iv is step (iv - lo) / step: the increment must hold step whole */
        if (step > 1) {
            const IrOp *m = konst ? NULL : f->values[c].def;
            int64_t km;
            bool whole = konst ? kc % step == 0
                               : m && m->code == IR_OP_MUL &&
                                     ((const_of(f, m->operands[1], &km) && km % step == 0) ||
                                      (const_of(f, m->operands[0], &km) && km % step == 0));
            if (!whole) continue;
        }
        bool read = false;
        for (const IrOp *o = body->first; o; o = o->next)
            read |= (o->code == IR_OP_LOAD || o->code == IR_OP_STORE) && o->operands[0] == p;
        if (!read) continue;
        IrBuilder b;
        if (body->first) ir_builder_before(&b, body->first);
        else ir_builder_at_end(&b, body);
        b.loc = loop->loc;
        int64_t lo;
        IrValue t = const_of(f, loop->operands[0], &lo) && lo == 0 ? iv : ir_build_binary(&b, IR_OP_SUB, iv, loop->operands[0]);
        const IrOp *cm = konst ? NULL : f->values[c].def;
        int64_t k;
        IrValue prod;
        if (konst)
            prod = ir_build_binary(&b, IR_OP_MUL, t, ir_const_int(&b, ivt, kc / step));
        else if (cm && cm->code == IR_OP_MUL && (const_of(f, cm->operands[1], &k) || const_of(f, cm->operands[0], &k))) {
            IrValue x = cm->operands[const_of(f, cm->operands[1], &k) ? 0 : 1];
            prod = ir_build_binary(&b, IR_OP_MUL, ir_build_binary(&b, IR_OP_MUL, t, x), ir_const_int(&b, ivt, k / step));
        } else {
            if (!outside(f, c, loop)) c = ir_build_binary(&b, IR_OP_MUL, cm->operands[0], cm->operands[1]);
            prod = ir_build_binary(&b, IR_OP_MUL, t, c);
        }
        const IrType *ot = ir_type_like(f->module->ctx, pt, ivt);
        IrValue off = ir_build1(&b, IR_OP_SPLAT, ot, &prod, 1);
        IrValue init = loop->operands[3 + j];
        IrValue q = ir_build_binary(&b, IR_OP_ADDPTR, init, off);
        /* the body's uses of p but its increment now read q */
        for (IrOp *o = body->first; o; o = o->next)
            if (o->code == IR_OP_LOAD || o->code == IR_OP_STORE)
                if (o->operands[0] == p) o->operands[0] = q;
        vec_push(out, ((Carried){loop, p, q, body->first}));
    }
}

static void collect_loops(IrOp *op, void *ud)
{
    if (op->code == IR_OP_FOR) vec_push((Ops *)ud, op);
}

/* Argument j + 1 of the loop's body (operand 3 + j, result j) is no longer carried. */
static void drop_carried(IrFunc *f, IrOp *loop, uint32_t j)
{
    IrBlock *body = &loop->regions[0];
    IrOp *y = body->last;
    IrOp *inc = f->values[y->operands[j]].def;
    for (uint32_t i = j; i + 1 < y->noperands; i++) y->operands[i] = y->operands[i + 1];
    y->noperands--;
    ir_op_remove(inc);
    for (uint32_t i = 3 + j; i + 1 < loop->noperands; i++) loop->operands[i] = loop->operands[i + 1];
    loop->noperands--;
    for (uint32_t i = j + 1; i + 1 < body->nargs; i++) {
        body->args[i] = body->args[i + 1];
        f->values[body->args[i]].index = i;
    }
    body->nargs--;
    for (uint32_t i = j; i + 1 < loop->nresults; i++) {
        loop->results[i] = loop->results[i + 1];
        f->values[loop->results[i]].index = i;
    }
    loop->nresults--;
}

/* After the conversions: p back where q was not converted away; p dropped from the
 * loop where nothing reads it any more. */
static bool carry_finish(IrFunc *f, Carrieds *cs)
{
    bool changed = false;
    for (size_t i = 0; i < cs->len; i++) {
        const Carried *c = &cs->data[i];
        uint32_t *uses = ir_use_counts(f);
        if (uses[c->q]) ir_replace_all_uses(f, c->q, c->p);
        tl_free(uses);
        /* what q's recomputation left unread goes (a converted block op may read some) */
        uses = ir_use_counts(f);
        bool all = true;
        for (IrOp *o = f->values[c->q].def, *prev; o; o = prev) {
            prev = o == c->first ? NULL : o->prev;
            if (uses[o->results[0]]) {
                all = false;
                continue;
            }
            for (uint32_t k = 0; k < o->noperands; k++) uses[o->operands[k]]--;
            ir_op_remove(o);
        }
        tl_free(uses);
        changed |= !all;
    }
    for (size_t i = cs->len; i-- > 0;) {
        const Carried *c = &cs->data[i];
        IrBlock *body = &c->loop->regions[0];
        uint32_t j = f->values[c->p].index - 1;
        uint32_t *uses = ir_use_counts(f);
        const IrOp *y = body->last;
        bool dead = uses[c->p] == 1 && uses[y->operands[j]] == 1 && !uses[c->loop->results[j]];
        tl_free(uses);
        if (dead) drop_carried(f, c->loop, j), changed = true;
    }
    return changed;
}

static void collect(IrOp *op, void *ud)
{
    if (op->code == IR_OP_LOAD || op->code == IR_OP_STORE) vec_push((Ops *)ud, op);
}

/* Every match becomes a block op first, so that blockload decides each as it will (a
 * loop's dots are copied by TMA only when all their loads are block loads); those it
 * would keep for TMA stay, the others become the user's loads and stores again. */
bool pass_ptrblock(IrFunc *f)
{
    if (!f->module->knobs.ptrblock) return false;
    Ops ops = {0}, loops = {0};
    Mades made = {0};
    Carrieds carried = {0};
    bool changed = false;
    ir_walk(&f->body, collect_loops, &loops);
    for (size_t i = 0; i < loops.len; i++) carry_loop(f, loops.data[i], &carried);
    vec_free(&loops);
    ir_walk(&f->body, collect, &ops);
    Ops matched = {0};
    Blocks blks = {0};
    for (size_t i = 0; i < ops.len; i++) {      /* all matched before any is built (wrap_safe) */
        Block blk;
        if (!match_op(f, ops.data[i], &blk)) continue;
        vec_push(&matched, ops.data[i]);
        vec_push(&blks, blk);
    }
    for (size_t i = 0; i < matched.len; i++) vec_push(&made, build_block(f, matched.data[i], &blks.data[i]));
    vec_free(&matched);
    vec_free(&blks);
    bool *keep = tl_calloc(made.len + 1, sizeof *keep);
    if (!keep) tl_oom();
    IrOp **blocks = tl_calloc(made.len + 1, sizeof *blocks);
    if (!blocks) tl_oom();
    for (size_t i = 0; i < made.len; i++) blocks[i] = made.data[i].block;
    blockload_kept(f, blocks, made.len, keep);
    tl_free(blocks);
    for (size_t i = 0; i < made.len; i++) {
        settle(f, &made.data[i], keep[i]);
        changed |= keep[i];
    }
    tl_free(keep);
    vec_free(&made);
    vec_free(&ops);
    changed |= carry_finish(f, &carried);
    vec_free(&carried);
    return changed;
}
