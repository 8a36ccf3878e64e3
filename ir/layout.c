/* Layouts (layout.h): constructors, text, and the rules the verifier checks. */
#include "layout.h"
#include "layout_map.h"
#include "ir.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const kind_names[] = {
#define X(n, t) t,
    IR_LAYOUT_KINDS(X)
#undef X
};

const char *ir_layout_kind_name(IrLayoutKind k) { return k < IR_NUM_LAYOUT_KINDS ? kind_names[k] : "?"; }

static IrLayout key_of(IrLayoutKind kind, int rank)
{
    IrLayout k;
    memset(&k, 0, sizeof k);   /* padding too: layouts are interned by memcmp */
    k.kind = kind;
    k.rank = rank;
    return k;
}

const IrLayout *ir_layout_blocked(IrCtx *c, int rank, const int32_t *spt, const int32_t *tpw,
                                  const int32_t *wpc, const int32_t *order)
{
    IrLayout k = key_of(IR_LAYOUT_BLOCKED, rank);
    for (int d = 0; d < rank; d++) {
        k.spt[d] = spt[d];
        k.tpw[d] = tpw[d];
        k.wpc[d] = wpc[d];
        k.order[d] = order ? order[d] : rank - 1 - d;
    }
    return ir_layout_intern(c, &k);
}

const IrLayout *ir_layout_slice(IrCtx *c, const IrLayout *parent, int dim)
{
    IrLayout k = key_of(IR_LAYOUT_SLICE, parent->rank - 1);
    k.dim = dim;
    k.parent = parent;
    return ir_layout_intern(c, &k);
}

static int product(const int32_t *v, int n)
{
    int p = 1;
    for (int i = 0; i < n; i++) p *= v[i];
    return p;
}

int ir_layout_warps(const IrLayout *l)
{
    switch (l->kind) {
    case IR_LAYOUT_BLOCKED: return product(l->wpc, l->rank);
    case IR_LAYOUT_MMA: return product(l->wpc, l->rank < 2 ? 2 : l->rank);
    case IR_LAYOUT_SLICE: case IR_LAYOUT_DOT_OPERAND: return l->parent ? ir_layout_warps(l->parent) : 0;
    default: return 0;
    }
}

static bool rows_v3(const IrLayout *l)
{
    return l && l->kind == IR_LAYOUT_MMA && l->version == 3 && l->wpc[1] == 1;
}

static bool mma_alike(const IrLayout *a, const IrLayout *b)
{
    return rows_v3(a) && rows_v3(b) && a->wpc[0] == b->wpc[0] && a->instr[0] == b->instr[0] &&
           a->instr[2] == b->instr[2];
}

bool ir_layout_alike(const IrLayout *a, const IrLayout *b)
{
    if (!a || !b || a == b) return false;
    if (a->kind == IR_LAYOUT_SLICE && b->kind == IR_LAYOUT_SLICE)
        return a->dim == b->dim && a->parent != b->parent && mma_alike(a->parent, b->parent);
    if (a->kind == IR_LAYOUT_MMA && b->kind == IR_LAYOUT_DOT_OPERAND)
        return b->op == 0 && b->kwidth == 2 && rows_v3(a) && (b->parent == a || mma_alike(a, b->parent));
    return mma_alike(a, b);
}

bool ir_layout_in_registers(int code, const IrLayout *from, const IrLayout *to)
{
    if (!from || !to) return false;
    if (code == IR_OP_CONVERT_LAYOUT) return ir_layout_alike(from, to);
    /* a chunk of columns of a wgmma accumulator in the accumulator layout of the chunk's
     * N: every element stays in its thread (ir_layout_alike) */
    if (code == IR_OP_EXTRACT)   /* mma.sync: the same layout (passes/layout.c keeps whole periods) */
        return from->kind == IR_LAYOUT_MMA && (ir_layout_alike(from, to) || (from == to && from->version == 2));
    if (code != IR_OP_BROADCAST && code != IR_OP_EXPAND_DIMS) return false;
    return to->kind == IR_LAYOUT_MMA && (from == to || (from->kind == IR_LAYOUT_SLICE && from->parent == to));
}

bool ir_layout_quad_shuffle(const IrType *from, const IrType *to)
{
    const IrLayout *a = from->layout, *b = to->layout;
    if (!a || !b || a->kind != IR_LAYOUT_MMA || b->kind != IR_LAYOUT_DOT_OPERAND || b->op != 0 || b->kwidth != 4)
        return false;
    const IrLayout *p = b->parent;
    if (!p || p->kind != IR_LAYOUT_MMA || a->wpc[1] != 1 || p->wpc[1] != 1 || a->wpc[0] != p->wpc[0]) return false;
    return from->rank == 2 && ir_elem_bytes(from->elem) == 1 && from->shape[0] % (16 * a->wpc[0]) == 0 &&
           from->shape[1] % 32 == 0;
}

int ir_reduce_warps(const IrType *t, int axis)
{
    const IrLayout *l = t->layout;
    if (!l || l->kind != IR_LAYOUT_BLOCKED || axis < 0 || axis >= t->rank) return 1;
    IrLayoutMap m = ir_layout_map(t);   /* the one rule: ir_layout_map_axis_warps */
    return ir_layout_map_axis_warps(&m, axis);
}

/*   a, b              acc   instruction          K   kwidth (layout.h)
 *   f16, bf16         f32   m16n8k16.f16/.bf16   16  2
 *   f8e4m3, f8e5m2    f32   m16n8k16.f16         16  2 (each element converted)
 *   f32 + tf32        f32   m16n8k8.tf32         8   1
 *   i8, u8            i32   m16n8k32.s8/.u8      32  4 */
int ir_mma_sync_k(IrElem in, IrElem acc, int precision)
{
    switch (in) {
    case IR_F16: case IR_BF16: case IR_F8E4M3: case IR_F8E5M2: return acc == IR_F32 ? 16 : 0;
    case IR_F32: return acc == IR_F32 && precision == IR_PREC_TF32 ? 8 : 0;
    case IR_I8: case IR_U8: return acc == IR_I32 ? 32 : 0;
    default: return 0;
    }
}

int ir_wgmma_k(IrElem in, IrElem acc)
{
    if (acc != IR_F32) return 0;
    if (in == IR_F16 || in == IR_BF16) return 16;
    return in == IR_F8E4M3 || in == IR_F8E5M2 ? 32 : 0;
}

/* ---- text ---------------------------------------------------------------------------- */
typedef struct Out {
    char *buf;
    size_t n, at;
} Out;

static void put(Out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(Out *o, const char *fmt, ...)
{
    if (o->at >= o->n) return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(o->buf + o->at, o->n - o->at, fmt, ap);
    va_end(ap);
    o->at = w < 0 ? o->n : o->at + (size_t)w;
}

static void put_list(Out *o, const char *name, const int32_t *v, int n)
{
    put(o, "%s = [", name);
    for (int i = 0; i < n; i++) put(o, "%s%d", i ? ", " : "", v[i]);
    put(o, "]");
}

static void put_parent(Out *o, const IrLayout *l, const char *parent_name)
{
    char inner[256];
    if (parent_name) put(o, ", parent = %s", parent_name);
    else put(o, ", parent = #%s", ir_layout_str(l->parent, NULL, inner, sizeof inner));
}

char *ir_layout_str(const IrLayout *l, const char *parent_name, char *buf, size_t n)
{
    Out o = {buf, n, 0};
    if (n) buf[0] = 0;
    put(&o, "%s<", ir_layout_kind_name(l->kind));
    switch (l->kind) {
    case IR_LAYOUT_BLOCKED:
        put_list(&o, "spt", l->spt, l->rank);
        put_list(&o, ", tpw", l->tpw, l->rank);
        put_list(&o, ", wpc", l->wpc, l->rank);
        put_list(&o, ", order", l->order, l->rank);
        break;
    case IR_LAYOUT_SLICE:
        put(&o, "dim = %d", l->dim);
        put_parent(&o, l, parent_name);
        break;
    case IR_LAYOUT_MMA:
        put(&o, "version = %d, ", l->version);
        put_list(&o, "wpc", l->wpc, l->rank);
        put_list(&o, ", instr", l->instr, 3);
        break;
    case IR_LAYOUT_DOT_OPERAND:
        put(&o, "op = %d, kwidth = %d", l->op, l->kwidth);
        put_parent(&o, l, parent_name);
        break;
    case IR_LAYOUT_SHARED:
        put(&o, "vec = %d, per_phase = %d, max_phase = %d, pad = %d, swizzle = %d, ", l->vec, l->per_phase,
            l->max_phase, l->pad, l->swizzle_bytes);
        put_list(&o, "order", l->order, l->rank);
        break;
    default: break;
    }
    put(&o, ">");
    return buf;
}

/* ---- rules ------------------------------------------------------------------------------ */
static bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

static bool fail(char *why, size_t n, const char *msg)
{
    snprintf(why, n, "%s", msg);
    return false;
}

static bool is_permutation(const int32_t *order, int rank)
{
    unsigned seen = 0;
    for (int d = 0; d < rank; d++) {
        if (order[d] < 0 || order[d] >= rank || (seen >> order[d] & 1)) return false;
        seen |= 1u << order[d];
    }
    return true;
}

static bool all_pow2(const int32_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!pow2(v[i])) return false;
    return true;
}

static bool check_blocked(const IrLayout *l, char *why, size_t n)
{
    if (!all_pow2(l->spt, l->rank) || !all_pow2(l->tpw, l->rank) || !all_pow2(l->wpc, l->rank))
        return fail(why, n, "blocked layout sizes must be powers of two");
    if (product(l->tpw, l->rank) != 32) return fail(why, n, "blocked layout lanes (tpw) must multiply to 32");
    if (!is_permutation(l->order, l->rank)) return fail(why, n, "blocked layout order must be a permutation of the axes");
    return true;
}

static bool check_mma(const IrLayout *l, char *why, size_t n)
{
    if (l->rank != 2) return fail(why, n, "mma layouts lay out rank-2 tiles");
    if (!all_pow2(l->wpc, 2)) return fail(why, n, "mma layout warps (wpc) must be powers of two");
    if (l->version == 2 && (l->instr[0] != 16 || l->instr[1] != 8 ||
                            (l->instr[2] != 8 && l->instr[2] != 16 && l->instr[2] != 32)))
        return fail(why, n, "mma version 2 (mma.sync) has instr = [16, 8, K] with K 8 (tf32), 16 (16-bit floats) "
                            "or 32 (8-bit integers)");
    if (l->version == 3 && (l->instr[0] != 64 || l->instr[1] < 8 || l->instr[1] > 256 || l->instr[1] % 8 ||
                            (l->instr[2] != 16 && l->instr[2] != 32) || l->wpc[0] % 4))
        return fail(why, n, "mma version 3 (wgmma) has instr = [64, N, K] with N a multiple of 8 up to 256, "
                            "K 16 (16-bit floats) or 32 (f8), and warps along M in groups of 4");
    if (l->version != 2 && l->version != 3) return fail(why, n, "mma version must be 2 (mma.sync) or 3 (wgmma)");
    return true;
}

static bool check_shared(const IrLayout *l, char *why, size_t n)
{
    if (!pow2(l->vec) || !pow2(l->per_phase) || !pow2(l->max_phase) || l->pad < 0)
        return fail(why, n, "shared layout vec, per_phase and max_phase must be powers of two, pad at least 0");
    if (l->swizzle_bytes && l->swizzle_bytes != 32 && l->swizzle_bytes != 64 && l->swizzle_bytes != 128)
        return fail(why, n, "shared layout swizzle must be 0, 32, 64 or 128 bytes");
    if (l->pad && (l->max_phase > 1 || l->swizzle_bytes))
        return fail(why, n, "a shared layout is either padded or swizzled, not both");
    if (!is_permutation(l->order, l->rank)) return fail(why, n, "shared layout order must be a permutation of the axes");
    return true;
}

static bool check_kind(const IrLayout *l, char *why, size_t n)
{
    switch (l->kind) {
    case IR_LAYOUT_BLOCKED: return check_blocked(l, why, n);
    case IR_LAYOUT_MMA: return check_mma(l, why, n);
    case IR_LAYOUT_SHARED: return check_shared(l, why, n);
    case IR_LAYOUT_SLICE:
        if (!l->parent || l->dim < 0 || l->dim >= l->parent->rank || l->rank != l->parent->rank - 1)
            return fail(why, n, "a slice removes one axis (dim) of its parent layout");
        return check_kind(l->parent, why, n);
    case IR_LAYOUT_DOT_OPERAND:
        if (!l->parent || (l->parent->kind != IR_LAYOUT_MMA && l->parent->kind != IR_LAYOUT_BLOCKED))
            return fail(why, n, "a dot_operand layout has an mma or blocked parent");
        if ((l->op != 0 && l->op != 1) || !pow2(l->kwidth) || l->rank != l->parent->rank)
            return fail(why, n, "a dot_operand layout is operand 0 (A) or 1 (B) with a power-of-two kwidth");
        if (!check_kind(l->parent, why, n)) return false;
        /* mma.sync m16n8kK: a thread holds K/2 elements of A in 4 registers (K/4 of B in
         * 2), so a register holds kwidth = K/8 consecutive K elements */
        if (l->parent->kind == IR_LAYOUT_MMA && l->parent->version == 2 && l->kwidth * 8 != l->parent->instr[2])
            return fail(why, n, "an operand of mma version 2 with instr = [16, 8, K] has kwidth = K / 8 "
                                "(K elements per 32-bit register)");
        return true;
    default: return fail(why, n, "unknown layout kind");
    }
}

bool ir_layout_check(const IrLayout *l, int rank, int warps, char *why, size_t n)
{
    if (l->rank != rank) return fail(why, n, "the layout's rank differs from the tile's");
    if (!check_kind(l, why, n)) return false;
    if (l->kind != IR_LAYOUT_SHARED && ir_layout_warps(l) != warps) {
        snprintf(why, n, "the layout spreads over %d warps, but the kernel has %d", ir_layout_warps(l), warps);
        return false;
    }
    return true;
}

IrMulticast ir_multicast_share(const IrType *bt, int ctas)
{
    const IrLayout *l = bt->layout;
    if (ctas < 2 || !l || !l->swizzle_bytes) return IR_MULTICAST_NONE;
    int fast = l->order[0] - 1, eb = ir_elem_bytes(bt->elem);
    int32_t boxes = bt->shape[1 + fast] * eb / l->swizzle_bytes, rows = bt->shape[2 - fast];
    if (boxes > 0 && boxes % ctas == 0) return IR_MULTICAST_BOXES;
    return boxes > 0 && rows % (8 * ctas) == 0 ? IR_MULTICAST_ROWS : IR_MULTICAST_NONE;
}
