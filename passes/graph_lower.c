/* graph_lower: each kernel of a fusion plan becomes a Tile kernel (Tile source text).
 *
 * require:   a verified graph and a plan of it (pass_graph_fuse).
 * guarantee: every plan kernel of a kind in `kinds` below (and of supported shapes) is
 *            one Tile kernel "<graph>_k<i>" computing its ops, reading its reads and
 *            writing its writes (row-major, contiguous); the others say why not.
 *
 * One idea carries every kind: a kernel has an iteration space (a shape) and, in each
 * scope of its body, an expression per axis giving the coordinates that the scope
 * computes (tiles or scalars). A value is computed at the coordinates projected onto
 * its own shape as numpy broadcasting aligns them (leading axes dropped, a size-1 axis
 * at 0), so a value read from memory is a load at that projection and an element-wise
 * op is the same op on its operands' tiles. Values are emitted on demand (`val`), once
 * per scope: a loop over a row's blocks recomputes the element-wise producers it needs.
 *   elementwise  1-D blocks over the space's elements (coordinates by div/mod).
 *   row ops      one program per row of the operand (all axes but the op's), looping
 *                over the row in blocks: one loop per statistic, then the output loop
 *                (consumers and stores); a reduction's consumers are scalars.
 *   matmul       a tiled GEMM (dot over K blocks, f32 accumulator) with the epilogue on
 *                the accumulator tile; leading axes of the left operand fold into M.
 *   horizontal   ONE GEMM over the products' N blocks laid end to end: a program picks
 *                its product (weight, epilogue, outputs) by its N block. Weights are
 *                not concatenated at bind time: that would copy them on every bind.
 *   adamw        the same idea for the optimizer: every parameter's 1-D blocks laid end
 *                to end, a program picks its parameter by its block; grad_stats (the
 *                gradients' norm and inf check) one program looping over every tensor.
 * Tile sizes: @autotune spaces for the tuner, defaults chosen from the shape. Sizes
 * named at run time are i64 parameters "s_NAME" (specialized like any scalar). */
#include "passes/graph_lower.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Space {       /* the coordinates a scope computes */
    uint32_t rank;
    const char *const *coord;  /* per axis: an expression (scalar or tile) */
    const char *mask;        /* the lanes in range, NULL in a scalar scope */
    const char *zero;        /* a zero tile of the scope's shape, NULL in a scalar scope */
    bool row;                /* a row's scalars: a value with one more axis, of size 1, is
                              * at the row's coordinates (m[:, None]) */
    const char *flat;        /* the row-major index of the coordinates (an element-wise
                              * kernel's offs), or NULL */
    const IrSize *dims;      /* with flat: the space's shape */
} Space;

typedef struct Low {
    const IrGraph *g;
    const IrGPlan *plan;
    const IrGKernel *K;
    Arena *a;
    FILE *o;
    bool *mine;              /* per op: in this kernel */
    bool *done;              /* per value: named in the current scope */
    bool *kept;              /* per value: named at a rows program's top level, so in every scope */
    bool top;                /* the current scope is that top level: what it names is kept */
    bool multi;              /* lowering a kernel of several row ops (lower_rows_multi) */
    const bool *chan;        /* conv2d: per value, a per-channel vector (at offset rn2), else NULL */
    const char *const *ptr;  /* per value: the name of the pointer it is at, else NULL: p<v> */
    const Space *sp;
    const char *why;
    const char *indent;
    const char *kw, *vw;     /* a flash kernel's K and V as block loads of their key rows
                                (flash_block_load): the expression, else NULL (pointer loads) */
    PassGKernel *out;        /* the kernel being lowered (a chunked one fills its steps) */
    const char *const **frame;  /* an element-wise kernel: per value computed through a
                                 * permutation (graph_fuse rule 9), its coordinates, else NULL */
} Low;

/* ---- text helpers ----------------------------------------------------------------------- */

static const IrTensorType *vt(const Low *L, uint32_t v) { return &L->g->values.data[v].type; }
static const IrGOp *defop(const Low *L, uint32_t v)
{
    uint32_t d = L->g->values.data[v].def;
    return d == IR_GNONE ? NULL : &L->g->ops.data[d];
}
static const char *ename(IrElem e) { return ir_elem_name(e); }

static bool fail(Low *L, const char *why)
{
    if (!L->why) L->why = why;
    return false;
}

/* A size as an i64 expression of the size parameters: "(64 * s_T + 2)". */
static const char *size_expr(Low *L, IrSize s)
{
    int64_t c;
    if (ir_size_is_const(s, &c)) return arena_printf(L->a, "%lld", (long long)c);
    const char *t = "";
    for (uint32_t i = 0; i < s.n; i++) {
        const char *m = s.m[i].k == 1 ? "" : arena_printf(L->a, "%lld", (long long)s.m[i].k);
        for (uint32_t j = 0; j < s.m[i].n; j++) m = arena_printf(L->a, "%s%ss_%s", m, *m ? " * " : "", s.m[i].names[j]);
        t = arena_printf(L->a, "%s%s%s", t, i ? " + " : "", m);
    }
    if (s.c) t = arena_printf(L->a, "%s + %lld", t, (long long)s.c);
    return s.n == 1 && !s.c && s.m[0].k == 1 && s.m[0].n == 1 ? t : arena_printf(L->a, "(%s)", t);
}

static bool is_one(IrSize s)
{
    int64_t c;
    return ir_size_is_const(s, &c) && c == 1;
}

/* The product of axes from..rank-1 of t. */
static IrSize numel(Low *L, const IrTensorType *t, uint32_t from, uint32_t to)
{
    IrSize n = ir_size_const(1);
    for (uint32_t d = from; d < to; d++)
        if (!ir_size_mul(L->a, n, t->dims[d], &n)) fail(L, "a size that overflows");
    return n;
}

static const char *numel_expr(Low *L, const IrTensorType *t, uint32_t from)
{
    return size_expr(L, numel(L, t, from, t->rank));
}

/* The trans op whose result v is when v is a view of the plan made by a transposition
 * (its operand's memory read with permuted strides), else NULL. */
static const IrGOp *trans_view(const Low *L, uint32_t v)
{
    for (uint32_t k = 0; L->plan && k < L->plan->nkernels; k++) {
        const IrGKernel *K = &L->plan->kernels[k];
        if (K->view && !K->store_view && K->writes[0] == v) {
            const IrGOp *op = &L->g->ops.data[K->ops[0]];
            return op->kind == IR_GOP_TRANS ? op : NULL;
        }
    }
    return NULL;
}

/* The distance in elements between neighbours along axis d of value v in the memory
 * the kernel reads it from: row-major in its shape, or for a transposition view the
 * stride of the operand's axis it came from (views of views compose). */
static IrSize stride_size(Low *L, uint32_t v, uint32_t d)
{
    const IrGOp *t = trans_view(L, v);
    if (t) return stride_size(L, t->in[0], (uint32_t)t->attr.perm[d]);
    for (uint32_t k = 0; L->plan && k < L->plan->nkernels; k++) {
        const IrGKernel *K = &L->plan->kernels[k];
        const IrGOp *op = &L->g->ops.data[K->ops[0]];
        if (!K->store_view || K->reads[0] != v || op->kind != IR_GOP_TRANS) continue;
        /* v is written into the trans's result: its axis d is the result's axis i with
         * perm[i] = d (a reshape's operand is written row-major in its own shape) */
        for (uint32_t i = 0; i < vt(L, v)->rank; i++)
            if ((uint32_t)op->attr.perm[i] == d) return stride_size(L, K->writes[0], i);
    }
    return numel(L, vt(L, v), d + 1, vt(L, v)->rank);
}

static const char *stride_of(Low *L, uint32_t v, uint32_t d)
{
    return size_expr(L, stride_size(L, v, d));
}

/* x * s, or x when s is 1 */
static const char *times(Low *L, const char *x, const char *s)
{
    return strcmp(s, "1") ? arena_printf(L->a, "%s * %s", x, s) : x;
}

/* The pointer value v is read from or written to: its parameter p<v>, or the variable a
 * uniform horizontal GEMM selects it into (L->ptr). */
static const char *pname(const Low *L, uint32_t v)
{
    return L->ptr && L->ptr[v] ? L->ptr[v] : arena_printf(L->a, "p%u", v);
}

/* The element offset of value v at the scope's coordinates, through its strides; NULL
 * when v has more axes than the scope. */
static const char *offset(Low *L, uint32_t v)
{
    const IrTensorType *t = vt(L, v);
    if (L->chan && L->chan[v]) return "rn2";
    uint32_t rank = t->rank;
    if (L->sp->row && rank == L->sp->rank + 1 && is_one(t->dims[rank - 1])) rank--;
    if (rank > L->sp->rank) return NULL;
    /* a row-major value of the space's whole shape is at the flat index: no coordinates
     * (their divisions by the sizes cost an element-wise kernel more than its memory) */
    bool flat = L->sp->flat && rank == L->sp->rank;
    for (uint32_t d = 0; flat && d < rank; d++)
        flat = ir_size_eq(t->dims[d], L->sp->dims[d]) && ir_size_eq(stride_size(L, v, d), numel(L, t, d + 1, rank));
    if (flat) return L->sp->flat;
    const char *off = NULL;
    for (uint32_t d = 0; d < rank; d++) {
        const char *stride = stride_of(L, v, d), *c = L->sp->coord[L->sp->rank - rank + d];
        if (is_one(t->dims[d]) || !strcmp(c, "0")) continue;
        const char *term = strcmp(stride, "1") ? arena_printf(L->a, "%s * %s", c, stride) : c;
        off = off ? arena_printf(L->a, "%s + %s", off, term) : term;
    }
    return off ? off : "0";
}

/* The coordinate of an axis of size `dim` whose elements are `stride` apart in `flat`. */
static const char *coord_at(Low *L, const char *flat, IrSize stride, IrSize dim)
{
    const char *q = is_one(stride) ? flat : arena_printf(L->a, "(%s / %s)", flat, size_expr(L, stride));
    return arena_printf(L->a, "(%s %% %s)", q, size_expr(L, dim));
}

/* ---- values ------------------------------------------------------------------------------ */

static const char *val(Low *L, uint32_t v);
static const char *row_output(Low *L, const IrGOp *op, const char *const *x);
static const char *rope_expr(Low *L, const IrGOp *op);

static const char *literal(Low *L, const IrGOp *op, IrElem e)
{
    if (!ir_elem_is_float(e)) return arena_printf(L->a, "(%lld as %s)", (long long)op->attr.c.i, ename(e));
    double f = op->attr.c.f;
    if (isinf(f)) return arena_printf(L->a, "(%sinf as %s)", f < 0 ? "-" : "", ename(e));
    if (isnan(f)) return arena_printf(L->a, "((0.0 * inf) as %s)", ename(e));
    return arena_printf(L->a, "(%.17g as %s)", f, ename(e));
}

static const char *binop_text(IrGOpKind k)
{
    switch (k) {
    case IR_GOP_ADD: return "+";
    case IR_GOP_SUB: return "-";
    case IR_GOP_MUL: return "*";
    case IR_GOP_DIV: return "/";
    case IR_GOP_REM: return "%";
    case IR_GOP_AND: return "&";
    case IR_GOP_OR: return "|";
    case IR_GOP_XOR: return "^";
    case IR_GOP_SHL: return "<<";
    case IR_GOP_SHR: return ">>";
    case IR_GOP_LAND: return "&&";
    case IR_GOP_LOR: return "||";
    default: return NULL;   /* minimum maximum pow cdiv: calls */
    }
}

static const char *const cmp_text[6] = {"==", "!=", "<", "<=", ">", ">="};

static const char *unary_expr(Low *L, const IrGOp *op, const char *x)
{
    switch (op->kind) {
    case IR_GOP_NEG: return arena_printf(L->a, "(-%s)", x);
    case IR_GOP_NOT: return arena_printf(L->a, "(!%s)", x);
    case IR_GOP_BNOT: return arena_printf(L->a, "(~%s)", x);
    default: return arena_printf(L->a, "%s(%s)", ir_gop_name(op->kind), x);
    }
}

/* dropout(x, p, seed): the graph interpreter's rule, tile_rand(seed, flat index) < p. */
static const char *dropout_expr(Low *L, const IrGOp *op, const char *const *x)
{
    const char *off = offset(L, op->out[0]);
    if (!off || !L->sp->zero) return fail(L, "dropout outside a tiled scope"), NULL;
    IrElem e = vt(L, op->out[0])->elem;
    return arena_printf(L->a, "where(rand(%s, %s + %s) < %s, 0.0, %s / (1.0 - %s)) as %s", x[2], L->sp->zero, off,
                        x[1], x[0], x[1], ename(e));
}

/* The expression of an element-wise op (families u b c t x d, full, broadcast). */
static const char *op_expr(Low *L, const IrGOp *op)
{
    const char *x[3] = {0};
    if (op->kind == IR_GOP_ROPE) return rope_expr(L, op);   /* its operands at other coordinates */
    for (uint32_t i = 0; i < op->nin && i < 3; i++)
        if (!(x[i] = val(L, op->in[i]))) return NULL;
    IrElem e = vt(L, op->out[0])->elem;
    if (op->kind == IR_GOP_SWIGLU) {   /* silu(g) * u, in f32 (f64 for f64), rounded once */
        const char *A = ename(e == IR_F64 ? IR_F64 : IR_F32);
        return arena_printf(L->a, "((%s as %s) * sigmoid(%s as %s) * (%s as %s)) as %s", x[0], A, x[0], A, x[1], A, ename(e));
    }
    switch (ir_gop_family(op->kind)) {
    case 'u': return unary_expr(L, op, x[0]);
    case 'b':
        if (binop_text(op->kind)) return arena_printf(L->a, "(%s %s %s)", x[0], binop_text(op->kind), x[1]);
        return arena_printf(L->a, "%s(%s, %s)", ir_gop_name(op->kind), x[0], x[1]);
    case 'c': return arena_printf(L->a, "(%s %s %s)", x[0], cmp_text[op->attr.cmp], x[1]);
    case 't': return arena_printf(L->a, "%s(%s, %s, %s)", ir_gop_name(op->kind), x[0], x[1], x[2]);
    case 'x': return arena_printf(L->a, "(%s as %s)", x[0], ename(e));
    case 'd': return dropout_expr(L, op, x);
    default: break;
    }
    if (op->kind == IR_GOP_FULL || op->kind == IR_GOP_BROADCAST) return x[0];
    if (op->kind == IR_GOP_RESHAPE && L->chan && L->chan[op->out[0]]) return x[0];
    /* in a rows kernel a reshape only adds or drops a row's unit axis (graph_fuse); in an
     * element-wise kernel a permutation keeps the lanes and changes their coordinates
     * (frames) */
    if (op->kind == IR_GOP_RESHAPE || op->kind == IR_GOP_TRANS) return x[0];
    if (op->kind == IR_GOP_SOFTMAX || ir_gop_family(op->kind) == 'n') return row_output(L, op, x);
    return fail(L, arena_printf(L->a, "'%s' is not element-wise", ir_gop_name(op->kind))), NULL;
}

static bool scalar_param(const Low *L, uint32_t v)
{
    return L->g->values.data[v].def == IR_GNONE && vt(L, v)->rank == 0;
}

/* A value read from global memory, at the scope's coordinates. */
static const char *load_expr(Low *L, uint32_t v)
{
    if (scalar_param(L, v)) return arena_printf(L->a, "a%u", v);
    if (vt(L, v)->rank == 0) return arena_printf(L->a, "load(p%u)", v);
    const char *off = offset(L, v);
    if (!off) return fail(L, "a value with more axes than its kernel's space"), NULL;
    if (!L->sp->zero) return arena_printf(L->a, "load(p%u + %s)", v, off);
    return arena_printf(L->a, "load(p%u + %s + %s, %s, 0)", v, L->sp->zero, off, L->sp->mask);
}

/* The name of value v in the current scope, emitting its `let` (and those of what it
 * needs) first; NULL with L->why when it cannot be computed here. */
static const char *val(Low *L, uint32_t v)
{
    const IrGOp *op = defop(L, v);
    if (op && op->kind == IR_GOP_CONST) return literal(L, op, vt(L, v)->elem);
    if (op && op->kind == IR_GOP_SIZE) return size_expr(L, op->attr.size);
    if (L->done[v] || L->kept[v]) return arena_printf(L->a, "v%u", v);
    bool inside = op && L->mine[op - L->g->ops.data];
    const char *e = inside ? op_expr(L, op) : load_expr(L, v);
    if (!e) return NULL;
    if (scalar_param(L, v)) return e;
    fprintf(L->o, "%slet v%u = %s;\n", L->indent, v, e);
    L->done[v] = true;
    L->kept[v] |= L->top;
    return arena_printf(L->a, "v%u", v);
}

/* A new scope: nothing of the kernel is named in it yet. */
static void scope(Low *L, const Space *sp, const char *indent)
{
    memset(L->done, 0, L->g->values.len * sizeof *L->done);
    L->sp = sp;
    L->indent = indent;
    L->top = false;
}

/* Stores value v at the scope's coordinates; lanes where v's own coordinates repeat
 * (axes v does not have, or has of size 1) are masked off so one lane writes each
 * element. */
static bool store(Low *L, uint32_t v)
{
    if (L->frame && L->frame[v]) {   /* at its own coordinates, one lane an element */
        const char *x = val(L, v);
        const Space *was = L->sp;
        Space fs = *was;
        fs.rank = vt(L, v)->rank, fs.coord = L->frame[v], fs.flat = NULL, fs.dims = vt(L, v)->dims;
        L->sp = &fs;
        const char *off = x ? offset(L, v) : NULL;
        L->sp = was;
        if (!off) return false;
        fprintf(L->o, "%sstore(%s + %s + %s, %s, %s);\n", L->indent, pname(L, v), was->zero, off, x, was->mask);
        return true;
    }
    const char *x = val(L, v), *off = x ? offset(L, v) : NULL;
    if (!off) return fail(L, "a written value with more axes than its kernel's space");
    const IrTensorType *t = vt(L, v);
    if (!L->sp->zero) {
        fprintf(L->o, "%sstore(%s + %s, %s);\n", L->indent, pname(L, v), off, x);
        return true;
    }
    const char *m = L->sp->mask;
    for (uint32_t d = 0; d < L->sp->rank; d++) {
        int64_t vd = (int64_t)d - (int64_t)(L->sp->rank - t->rank);
        if (vd < 0 || is_one(t->dims[vd])) m = arena_printf(L->a, "%s & (%s == 0)", m, L->sp->coord[d]);
    }
    fprintf(L->o, "%sstore(%s + %s + %s, %s, %s);\n", L->indent, pname(L, v), L->sp->zero, off, x, m);
    return true;
}

/* Every value the kernel writes, stored, and the kernel closed: the end of a kernel
 * whose writes all live in the one space in scope. */
static bool store_writes(Low *L)
{
    for (uint32_t i = 0; i < L->K->nwrites; i++)
        if (!store(L, L->K->writes[i])) return false;
    fputs("}\n", L->o);
    return true;
}

/* ---- the kernel's signature ------------------------------------------------------------- */

typedef struct Sig {
    VEC(PassGArg) args;
} Sig;

/* Writes (pointers), reads (pointers; scalar parameters by value), then every size. */
static void signature(Low *L, Sig *s, const char *name)
{
    fprintf(L->o, "kernel %s(", name);
    const char *sep = "";
    for (uint32_t i = 0; i < L->K->nwrites; i++, sep = ", ") {
        uint32_t v = L->K->writes[i];
        fprintf(L->o, "%sp%u: *%s", sep, v, ename(vt(L, v)->elem));
        vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, v}));
    }
    for (uint32_t i = 0; i < L->K->nreads; i++, sep = ", ") {
        uint32_t v = L->K->reads[i];
        bool sc = scalar_param(L, v);
        fprintf(L->o, "%s%s%u: %s%s", sep, sc ? "a" : "p", v, sc ? "" : "*", ename(vt(L, v)->elem));
        vec_push(&s->args, ((PassGArg){sc ? PASS_GARG_SCALAR : PASS_GARG_PTR, v}));
    }
    for (uint32_t i = 0; i < L->g->nsizes; i++, sep = ", ") {
        fprintf(L->o, "%ss_%s: i64", sep, L->g->sizes[i]);
        vec_push(&s->args, ((PassGArg){PASS_GARG_SIZE, i}));
    }
}

/* `@autotune(key = [sizes], space = {...}, where = ..., default = {...})`. */
static void autotune(Low *L, const char *space, const char *where, const char *dflt)
{
    fputs("@autotune(", L->o);
    if (L->g->nsizes) {
        fputs("key = [", L->o);
        for (uint32_t i = 0; i < L->g->nsizes; i++) fprintf(L->o, "%ss_%s", i ? ", " : "", L->g->sizes[i]);
        fputs("], ", L->o);
    }
    fprintf(L->o, "space = {%s}, where = %s, default = {%s})\n", space, where, dflt);
}

static int64_t pow2_at_least(int64_t n, int64_t lo, int64_t hi)
{
    int64_t p = lo;
    while (p < n && p < hi) p *= 2;
    return p;
}

/* The default block for a size: the next power of two in [lo, hi], hi when unknown. */
static int64_t block_for(IrSize s, int64_t lo, int64_t hi)
{
    int64_t c;
    return ir_size_is_const(s, &c) ? pow2_at_least(c, lo, hi) : hi;
}

/* ---- elementwise: 1-D blocks ------------------------------------------------------------- */

/* The values of the kernel computed through a permutation (graph_fuse rule 9): a trans
 * or reshape in a kernel of several ops, and the element-wise ops on such values. */
static bool *permuted_values(Low *L)
{
    bool *p = arena_alloc(L->a, L->g->values.len + 1);
    memset(p, 0, L->g->values.len + 1);
    for (uint32_t i = 0; i < L->K->nops && L->K->nops > 1; i++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[i]];
        bool perm = op->kind == IR_GOP_TRANS || op->kind == IR_GOP_RESHAPE;
        for (uint32_t j = 0; j < op->nin; j++) perm |= p[op->in[j]];
        p[op->out[0]] = perm;
    }
    return p;
}

/* The coordinates of value u (of the kernel, not permuted) at the space's: aligned at
 * the right, 0 on a size-1 axis. */
static const char *const *plain_frame(Low *L, uint32_t u)
{
    const IrTensorType *t = vt(L, u);
    const char **c = arena_alloc(L->a, (t->rank + 1) * sizeof *c);
    for (uint32_t d = 0; d < t->rank; d++) c[d] = is_one(t->dims[d]) ? "0" : L->sp->coord[L->sp->rank - t->rank + d];
    return c;
}

/* The coordinates in shape `to` of the element at coordinates c of shape `from` (a
 * reshape: the same row-major index). The axes go in groups of equal products, found
 * from the right (in[i0, i) and out[j0, j), the earliest boundary first); in a group the
 * index over its in axes is split into its out axes: a merge ([T, H, D] to [T, H * D]) is
 * h * D + d, an axis kept is itself. */
/* Is there a group boundary at in axis i0 (<= i) and some out axis *j0 <= j, other than
 * (i, j): equal products of the axes after them? The latest such out axis. */
static bool group_start(Low *L, const IrTensorType *from, const IrTensorType *to, uint32_t i, uint32_t j, uint32_t i0,
                        uint32_t *j0)
{
    IrSize n = numel(L, from, i0, from->rank);
    for (uint32_t e = j + 1; e-- > 0;)
        if ((i0 != i || e != j) && ir_size_eq(n, numel(L, to, e, to->rank))) return *j0 = e, true;
    return false;
}

static const char *const *reshape_frame(Low *L, const IrTensorType *from, const char *const *c, const IrTensorType *to)
{
    const char **o = arena_alloc(L->a, (to->rank + 1) * sizeof *o);
    uint32_t i = from->rank, j = to->rank;
    while (i > 0 || j > 0) {
        uint32_t i0 = i, j0 = j;
        while (!group_start(L, from, to, i, j, i0, &j0)) i0--;
        const char *g = "0";
        for (uint32_t d = i0; d < i; d++) {
            if (is_one(from->dims[d])) continue;
            const char *term = times(L, c[d], size_expr(L, numel(L, from, d + 1, i)));
            g = strcmp(g, "0") ? arena_printf(L->a, "(%s + %s)", g, term) : term;
        }
        for (uint32_t e = j0; e < j; e++) {
            IrSize st = numel(L, to, e + 1, j);
            const char *q = is_one(st) ? g : arena_printf(L->a, "(%s / %s)", g, size_expr(L, st));
            o[e] = is_one(to->dims[e]) ? "0" : e == j0 ? q : arena_printf(L->a, "(%s %% %s)", q, size_expr(L, to->dims[e]));
        }
        i = i0, j = j0;
    }
    return o;
}

/* Each permuted value's coordinates at the space's (lets f<v>_<axis>): a trans's are its
 * operand's permuted, a reshape's reshape_frame's, an element-wise op's its permuted
 * operand's. */
static void frames(Low *L, const bool *perm)
{
    L->frame = arena_alloc(L->a, (L->g->values.len + 1) * sizeof *L->frame);
    memset(L->frame, 0, (L->g->values.len + 1) * sizeof *L->frame);
    for (uint32_t i = 0; i < L->K->nops; i++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[i]];
        uint32_t v = op->out[0], x = op->in[0];
        if (!perm[v]) continue;
        const IrTensorType *t = vt(L, v);
        const char *const *c = L->frame[x] ? L->frame[x] : plain_frame(L, x);
        const char **f = arena_alloc(L->a, (t->rank + 1) * sizeof *f);
        if (op->kind == IR_GOP_TRANS) {
            for (uint32_t d = 0; d < t->rank; d++) f[d] = c[op->attr.perm[d]];
        } else if (op->kind == IR_GOP_RESHAPE) {
            const char *const *r = reshape_frame(L, vt(L, x), c, t);
            for (uint32_t d = 0; d < t->rank; d++) {
                bool simple = !strchr(r[d], ' ');
                f[d] = simple ? r[d] : arena_printf(L->a, "f%u_%u", v, d);
                if (!simple) fprintf(L->o, "    let %s = %s;\n", f[d], r[d]);
            }
        } else {
            for (uint32_t j = 0; j < op->nin; j++)
                if (L->frame[op->in[j]]) x = op->in[j];
            memcpy(f, L->frame[x], t->rank * sizeof *f);
        }
        L->frame[v] = f;
    }
}

/* The broadcast shape of every op of the kernel (but those computed through a
 * permutation, whose lanes are their chain's first value's). */
static bool kernel_shape(Low *L, IrTensorType *out, const bool *perm)
{
    uint32_t n = 0;
    const IrSize *d = NULL;
    for (uint32_t i = 0; i < L->K->nops; i++) {
        const IrTensorType *t = &L->g->values.data[L->g->ops.data[L->K->ops[i]].out[0]].type;
        if (perm[L->g->ops.data[L->K->ops[i]].out[0]]) continue;
        if (!ir_broadcast_shapes(L->a, n, d, t->rank, t->dims, &n, &d)) return fail(L, "shapes that do not broadcast");
    }
    *out = (IrTensorType){.rank = n, .dims = d};
    return true;
}

/* Coordinates c0..c{n-1} of the flat index `flat` in shape t, as lets. */
static const char *const *coords_of(Low *L, const IrTensorType *t, const char *flat, const char *pre)
{
    const char **c = arena_alloc(L->a, (t->rank + 1) * sizeof *c);
    for (uint32_t d = 0; d < t->rank; d++) {
        IrSize st = numel(L, t, d + 1, t->rank);
        const char *e = d ? coord_at(L, flat, st, t->dims[d])
                          : is_one(st) ? flat : arena_printf(L->a, "(%s / %s)", flat, size_expr(L, st));
        c[d] = arena_printf(L->a, "%s%u", pre, d);
        fprintf(L->o, "    let %s = %s;\n", c[d], e);
    }
    return c;
}

/* The space is the shape of the values not permuted: loads in their order, and a
 * permuted value's stores through its frame. graph_fuse lets only a trans that keeps the
 * last axis last into such a chain, so both are contiguous along that axis (the
 * backward's dK [H, T, D] read and [T, H * D] written, runs of D elements). */
static bool lower_elementwise(Low *L, Sig *s, const char *name)
{
    IrTensorType sh;
    const bool *perm = permuted_values(L);
    if (!kernel_shape(L, &sh, perm)) return false;
    const char *count = numel_expr(L, &sh, 0);
    int64_t blk = block_for(numel(L, &sh, 0, sh.rank), 128, 1024);
    autotune(L, "BLOCK: [128, 256, 512, 1024, 2048], warps: [1, 2, 4, 8]", "BLOCK >= 32 * warps",
             arena_printf(L->a, "BLOCK: %lld, warps: 4", (long long)blk));
    signature(L, s, name);
    fprintf(L->o, ", const BLOCK: i32 = %lld)\n    grid(cdiv(%s, BLOCK as i64))\n{\n", (long long)blk, count);
    fputs("    let offs = (program_id(0) as i64) * (BLOCK as i64) + arange(0, BLOCK);\n", L->o);
    fprintf(L->o, "    let mask = offs < %s;\n    let z = offs * 0;\n", count);
    Space sp = {.rank = sh.rank, .mask = "mask", .zero = "z", .flat = "offs", .dims = sh.dims};
    sp.coord = coords_of(L, &sh, "offs", "c");
    scope(L, &sp, "    ");
    frames(L, perm);
    bool ok = store_writes(L);
    L->frame = NULL;
    return ok;
}

/* ---- row ops: one program per row ---------------------------------------------------------- */

typedef struct Row {
    const IrGOp *r;
    uint32_t axis, x;        /* the op's axis and operand */
    IrElem acc;              /* the element type statistics are computed in */
    const char *len;         /* the row's length */
    Space full;              /* the operand's axes, the op's axis a tile "ca" */
    Space red;               /* a reduction's result axes, scalars */
    bool multi;              /* one of several row ops of the kernel (lower_rows_multi) */
    const char *sfx;         /* multi: the suffix of its statistics' names ("_r<out>") */
} Row;

static uint32_t row_op_index(const Low *L)
{
    for (uint32_t i = 0; i < L->K->nops; i++) {
        char f = ir_gop_family(L->g->ops.data[L->K->ops[i]].kind);
        if (f == 'r' || f == 'n' || L->g->ops.data[L->K->ops[i]].kind == IR_GOP_SOFTMAX) return L->K->ops[i];
    }
    return IR_GNONE;
}

/* Scalar coordinates of every axis but the row's, from the program's row index. */
static void row_coords(Low *L, Row *R)
{
    const IrTensorType *t = vt(L, R->x);
    const char **c = arena_alloc(L->a, (t->rank + 1) * sizeof *c), **rc = arena_alloc(L->a, (t->rank + 1) * sizeof *rc);
    IrSize st = ir_size_const(1);
    for (uint32_t d = t->rank; d-- > 0;) {
        c[d] = d == R->axis ? "ca" : arena_printf(L->a, "c%u", d);
        if (d == R->axis) continue;
        fprintf(L->o, "    let c%u = %s;\n", d, coord_at(L, "row", st, t->dims[d]));
        ir_size_mul(L->a, st, t->dims[d], &st);
    }
    for (uint32_t d = 0, k = 0; d < t->rank; d++)
        if (d != R->axis) rc[k++] = c[d];
    R->full = (Space){.rank = t->rank, .coord = c, .mask = "mask", .zero = "z"};
    R->red = (Space){.rank = t->rank - 1, .coord = rc, .row = true};
}

static void loop_open(Low *L, Row *R)
{
    scope(L, &R->full, "        ");
    fprintf(L->o, "    for k in range(0, %s, BLOCK as i64) {\n", R->len);
    fputs("        let ca = k + arange(0, BLOCK);\n", L->o);
    fprintf(L->o, "        let mask = ca < %s;\n        let z = ca * 0;\n", R->len);
}

static void loop_close(Low *L) { fputs("    }\n", L->o); }

/* The operand as the accumulator type, masked lanes replaced by `fill`. */
static const char *row_x(Low *L, Row *R, const char *fill)
{
    const char *x = val(L, R->x);
    if (!x) return NULL;
    return arena_printf(L->a, "where(mask, %s as %s, %s)", x, ename(R->acc), fill);
}

static bool stores_of(Low *L, uint32_t r, bool before)
{
    for (uint32_t i = 0; i < L->K->nwrites; i++) {
        uint32_t v = L->K->writes[i], d = L->g->values.data[v].def;
        if ((d < r) == before && !store(L, v)) return false;
    }
    return true;
}

static const char *ident(Low *L, IrElem e, bool max)
{
    if (ir_elem_is_float(e)) return arena_printf(L->a, "(%sinf as %s)", max ? "-" : "", ename(e));
    int b = ir_elem_bits(e);
    if (e == IR_I1) return max ? "false" : "true";
    if (!ir_elem_is_signed(e))
        return max ? "0" : arena_printf(L->a, "(%llu as %s)", b == 64 ? ~0ull : (1ull << b) - 1, ename(e));
    unsigned long long m = (1ull << (b - 1)) - 1;
    return max ? arena_printf(L->a, "((-%llu - 1) as %s)", m, ename(e)) : arena_printf(L->a, "(%llu as %s)", m, ename(e));
}

/* sum mean max min argmax argmin any all: one loop, then the scalar result. */
static bool reduction(Low *L, Row *R)
{
    IrGOpKind k = R->r->kind;
    IrElem xe = vt(L, R->x)->elem, re = vt(L, R->r->out[0])->elem;
    bool mx = k == IR_GOP_MAX || k == IR_GOP_ARGMAX, arg = k == IR_GOP_ARGMAX || k == IR_GOP_ARGMIN;
    bool sum = k == IR_GOP_SUM || k == IR_GOP_MEAN, logic = k == IR_GOP_ANY || k == IR_GOP_ALL;
    R->acc = sum ? (ir_elem_is_float(xe) ? (xe == IR_F64 ? IR_F64 : IR_F32) : IR_I64) : xe;
    if (k == IR_GOP_MEAN && !ir_elem_is_float(xe)) R->acc = IR_F64;
    const char *id = sum ? "0" : logic ? (k == IR_GOP_ANY ? "false" : "true") : ident(L, xe, mx);
    const char *S = R->sfx;
    if (logic) fprintf(L->o, "    var acc%s = %s;\n", S, id);
    else fprintf(L->o, "    var acc%s = %s as %s;\n", S, id, ename(R->acc));
    if (arg) fprintf(L->o, "    var at%s = 0 as i64;\n", S);
    loop_open(L, R);
    const char *x = logic ? NULL : row_x(L, R, id);
    if (logic) {
        const char *v = val(L, R->x);
        x = v ? arena_printf(L->a, "where(mask, %s != 0, %s)", v, id) : NULL;
    }
    if (!x) return false;
    if (sum) fprintf(L->o, "        acc%s = acc%s + sum(%s, 0);\n", S, S, x);
    else if (logic)
        fprintf(L->o, "        acc%s = acc%s %s %s(%s, 0);\n", S, S, k == IR_GOP_ANY ? "||" : "&&", ir_gop_name(k), x);
    else if (!arg)
        fprintf(L->o, "        acc%s = %s(acc%s, %s(%s, 0));\n", S, mx ? "maximum" : "minimum", S, mx ? "max" : "min", x);
    else {
        fprintf(L->o, "        let xb = %s;\n        let bm = %s(xb, 0);\n", x, mx ? "max" : "min");
        fprintf(L->o, "        if bm %s acc%s {\n            acc%s = bm;\n            at%s = k + (%s(xb, 0) as i64);\n        }\n",
                mx ? ">" : "<", S, S, S, ir_gop_name(k));
    }
    if (!R->multi && !stores_of(L, (uint32_t)(R->r - L->g->ops.data), true)) return false;
    loop_close(L);
    scope(L, &R->red, "    ");
    L->top = R->multi;
    const char *acc = arena_printf(L->a, "acc%s", S);
    const char *res = arg ? arena_printf(L->a, "at%s", S)
                    : k == IR_GOP_MEAN ? arena_printf(L->a, "%s / (%s as %s)", acc, R->len, ename(R->acc)) : acc;
    fprintf(L->o, "    let v%u = (%s) as %s;\n", R->r->out[0], res, ename(re));
    L->done[R->r->out[0]] = true;
    L->kept[R->r->out[0]] |= R->multi;
    return R->multi || stores_of(L, (uint32_t)(R->r - L->g->ops.data), false);
}

/* The element type a row op's statistics are computed in, and their names' suffix. */
static IrElem row_acc(const Low *L, const IrGOp *op) { return vt(L, op->in[0])->elem == IR_F64 ? IR_F64 : IR_F32; }
static const char *row_sfx(Low *L, const IrGOp *op) { return L->multi ? arena_printf(L->a, "_r%u", op->out[0]) : ""; }

/* softmax's or a norm's output at the scope's coordinates, from its statistics (named
 * before, at the program's top level) and its operands x (input, weight, bias). */
static const char *row_output(Low *L, const IrGOp *op, const char *const *x)
{
    const char *A = ename(row_acc(L, op)), *S = row_sfx(L, op), *E = ename(vt(L, op->out[0])->elem);
    if (op->kind == IR_GOP_SOFTMAX) return arena_printf(L->a, "(exp((%s as %s) - m%s) / s%s) as %s", x[0], A, S, S, E);
    const char *b = arena_printf(L->a, "(%s as %s)", op->kind == IR_GOP_LAYER_NORM ? x[2] : "0", A);
    return arena_printf(L->a, "(((%s as %s) - mean%s) * rstd%s * (%s as %s) + %s) as %s", x[0], A, S, S, x[1], A, b, E);
}

/* softmax: a loop for the running max and sum (online), then the output loop (multi:
 * the output is computed where it is used, by row_output). */
static bool softmax(Low *L, Row *R)
{
    const char *S = R->sfx, *A = ename(R->acc);
    fprintf(L->o, "    var m%s = -inf as %s;\n    var s%s = 0 as %s;\n", S, A, S, A);
    loop_open(L, R);
    const char *x = row_x(L, R, "-inf");
    if (!x) return false;
    fprintf(L->o, "        let xb = %s;\n        let mn = maximum(m%s, max(xb, 0));\n", x, S);
    fprintf(L->o, "        s%s = s%s * exp(m%s - mn) + sum(exp(xb - mn), 0);\n        m%s = mn;\n", S, S, S, S);
    loop_close(L);
    if (R->multi) return true;
    loop_open(L, R);
    if (!(x = val(L, R->x))) return false;
    fprintf(L->o, "        let v%u = (exp((%s as %s) - m) / s) as %s;\n", R->r->out[0], x, ename(R->acc),
            ename(vt(L, R->r->out[0])->elem));
    L->done[R->r->out[0]] = true;
    if (!stores_of(L, UINT32_MAX, true)) return false;
    loop_close(L);
    return true;
}

/* layer_norm (mean, then variance) and rms_norm (mean square), then the output loop
 * (multi: as softmax). */
static bool norm(Low *L, Row *R)
{
    bool ln = R->r->kind == IR_GOP_LAYER_NORM;
    const char *A = ename(R->acc), *x, *S = R->sfx;
    fprintf(L->o, "    var s1%s = 0 as %s;\n    var s2%s = 0 as %s;\n", S, A, S, A);
    if (ln) {
        loop_open(L, R);
        if (!(x = row_x(L, R, "0"))) return false;
        fprintf(L->o, "        s1%s = s1%s + sum(%s, 0);\n", S, S, x);
        loop_close(L);
    }
    fprintf(L->o, "    let mean%s = s1%s / (%s as %s);\n", S, S, R->len, A);
    loop_open(L, R);
    if (!(x = row_x(L, R, arena_printf(L->a, "mean%s", S)))) return false;
    fprintf(L->o, "        let d = %s - mean%s;\n        s2%s = s2%s + sum(d * d, 0);\n", x, S, S, S);
    loop_close(L);
    const char *eps = (scope(L, &R->red, "    "), L->top = R->multi, val(L, R->r->in[ln ? 3 : 2]));
    if (!eps) return false;
    fprintf(L->o, "    let rstd%s = 1.0 / sqrt(s2%s / (%s as %s) + (%s as %s));\n", S, S, R->len, A, eps, A);
    if (R->multi) return true;
    loop_open(L, R);
    const char *w = (x = val(L, R->x)) ? val(L, R->r->in[1]) : NULL, *b = ln && w ? val(L, R->r->in[2]) : "0";
    if (!b || !w) return false;
    fprintf(L->o, "        let v%u = (((%s as %s) - mean) * rstd * (%s as %s) + (%s as %s)) as %s;\n", R->r->out[0], x, A, w,
            A, b, A, ename(vt(L, R->r->out[0])->elem));
    L->done[R->r->out[0]] = true;
    if (!stores_of(L, UINT32_MAX, true)) return false;
    loop_close(L);
    return true;
}

/* A reduction (sum, mean, max, min) over an axis that is not the innermost: a norm's
 * weight gradient or a bias gradient, summing [T, D] over T. One program per outer index
 * and block of BN inner positions (the axes after the reduced one, contiguous in
 * row-major order), looping over the reduced axis BM rows at a time: each load is a
 * [BM, BN] tile whose rows are BN consecutive elements. (One program per column, as a
 * row op runs, read one element a row, D apart: a [1024, 4096] column sum at a few
 * percent of the memory's bandwidth.) */
static void step_signature(Low *L, Sig *s, const char *name, const uint32_t *vs, uint32_t n, const char *S);

/* A column program's coordinates from pid (its outer index ob and block of BN inner
 * positions cn, nbn named before): the loop's space R->full (rows ca) and the result's
 * R->red. */
static void columns_head(Low *L, Row *R, const IrTensorType *t, const char *I)
{
    fputs("    let ob = pid / nbn;\n    let cn = (pid % nbn) * (BN as i64) + arange(0, BN);\n", L->o);
    fprintf(L->o, "    let cmask = cn < %s;\n    let zn = cn * 0;\n", I);
    const char **c = arena_alloc(L->a, (t->rank + 1) * sizeof *c), **rc = arena_alloc(L->a, (t->rank + 1) * sizeof *rc);
    for (uint32_t d = 0, j = 0; d < t->rank; d++) {
        if (d == R->axis) {
            c[d] = "ca";
            continue;
        }
        bool in = d > R->axis;
        IrSize st = in ? numel(L, t, d + 1, t->rank) : numel(L, t, d + 1, R->axis);
        fprintf(L->o, "    let c%u = %s;\n", d, coord_at(L, in ? "cn" : "ob", st, t->dims[d]));
        rc[j++] = arena_printf(L->a, "c%u", d);
        c[d] = in ? arena_printf(L->a, "c%u[None, :]", d) : rc[j - 1];
    }
    R->full = (Space){.rank = t->rank, .coord = c, .mask = "mask", .zero = "z"};
    R->red = (Space){.rank = t->rank - 1, .coord = rc, .mask = "cmask", .zero = "zn"};
}

/* The loop over rows [from, to) of the column program, accumulating into acc. */
static bool columns_loop(Low *L, Row *R, const char *from, const char *to, const char *id, bool sum, bool mx)
{
    scope(L, &R->full, "        ");
    fprintf(L->o, "    for k in range(%s, %s, BM as i64) {\n", from, to);
    fputs("        let ra = k + arange(0, BM);\n        let ca = ra[:, None];\n", L->o);
    fprintf(L->o, "        let mask = (ca < %s) & cmask[None, :];\n        let z = ca * 0 + zn[None, :];\n", R->len);
    const char *x = row_x(L, R, id);
    if (!x) return false;
    if (sum) fprintf(L->o, "        acc = acc + sum(%s, 0);\n", x);
    else fprintf(L->o, "        acc = %s(acc, %s(%s, 0));\n", mx ? "maximum" : "minimum", mx ? "max" : "min", x);
    if (!stores_of(L, (uint32_t)(R->r - L->g->ops.data), true)) return false;
    loop_close(L);
    return true;
}

/* A step named sn with args's arguments (freed here). */
static void step_of(Low *L, PassGKernel *step, const char *sn, Sig *args)
{
    PassGArg *a = arena_alloc(L->a, (args->args.len + 1) * sizeof *a);
    memcpy(a, args->args.data, args->args.len * sizeof *a);
    *step = (PassGKernel){.name = sn, .nargs = (uint32_t)args->args.len, .args = a};
    vec_free(&args->args);
}

/* The kernel as two steps: steps[0] already made, steps[1] named sn with targs's
 * arguments, each launched once over all rows. */
static bool two_steps(Low *L, PassGKernel *steps, const char *sn, Sig *targs)
{
    step_of(L, &steps[1], sn, targs);
    L->out->steps = steps;
    L->out->nsteps = 2;
    L->out->chunk = 0;
    L->out->rows = ir_size_const(1);
    return true;
}

/* A column sum in two steps (IrGKernel.columns): `_partial`, partials programs per block
 * of columns, program `part` summing rows [part * rlen, (part + 1) * rlen) (rlen a
 * multiple of BM) into row `part` of the scratch; `_total`, one program per block of
 * columns adding the partials rows in order, then the result and its store. */
static bool lower_columns_split(Low *L, Row *R, const char *name, const IrTensorType *t, IrSize outer, const char *I)
{
    uint32_t P = L->K->partials;
    const char *A = ename(R->acc), *O = size_expr(L, outer);
    IrSize tot;
    if (!ir_size_mul(L->a, outer, numel(L, t, R->axis + 1, t->rank), &tot)) return fail(L, "a size that overflows");
    const char *TOT = size_expr(L, tot);
    PassGKernel *steps = arena_alloc(L->a, 3 * sizeof *steps);
    const char *sn = arena_printf(L->a, "%s_partial", name);
    Sig args = {0};
    fprintf(L->o, "// step partial: %u row blocks' sums per block of columns\n", P);
    autotune(L, "BM: [8, 16, 32, 64, 128], BN: [16, 32, 64, 128, 256], warps: [1, 2, 4, 8]",
             "BM * BN >= 32 * warps && BM * BN <= 16384", "BM: 64, BN: 32, warps: 4");
    step_signature(L, &args, sn, L->K->reads, L->K->nreads, A);
    fprintf(L->o, ", const BM: i32 = 64, const BN: i32 = 32)\n    grid(%u * %s * cdiv(%s, BN as i64))\n{\n", P, O, I);
    fprintf(L->o, "    let nbn = cdiv(%s, BN as i64);\n    let npb = %s * nbn;\n", I, O);
    fputs("    let part = (program_id(0) as i64) / npb;\n    let pid = (program_id(0) as i64) % npb;\n", L->o);
    columns_head(L, R, t, I);
    fprintf(L->o, "    let rlen = cdiv(cdiv(%s, %u), BM as i64) * (BM as i64);\n", R->len, P);
    fprintf(L->o, "    let r0 = part * rlen;\n    let r1 = minimum(r0 + rlen, %s);\n", R->len);
    fprintf(L->o, "    var acc = zeros([BN], %s);\n", A);
    if (!columns_loop(L, R, "r0", "r1", "0", true, false)) return false;
    fprintf(L->o, "    store(ps + part * %s + ob * %s + cn, acc, cmask);\n}\n", TOT, I);
    step_of(L, &steps[0], sn, &args);
    sn = arena_printf(L->a, "%s_total", name);
    Sig targs = {0};
    fprintf(L->o, "\n// step total: the %u partial sums of each column, in order\n", P);
    autotune(L, "BN: [32, 64, 128, 256, 512], warps: [1, 2, 4]", "BN >= 32 * warps", "BN: 128, warps: 4");
    step_signature(L, &targs, sn, L->K->writes, L->K->nwrites, A);
    fprintf(L->o, ", const BN: i32 = 128)\n    grid(%s * cdiv(%s, BN as i64))\n{\n", O, I);
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let nbn = cdiv(%s, BN as i64);\n", I);
    columns_head(L, R, t, I);
    fprintf(L->o, "    var acc = zeros([BN], %s);\n    for j in range(0, %u) {\n", A, P);
    fprintf(L->o, "        acc = acc + load(ps + (j as i64) * %s + ob * %s + cn, cmask, 0);\n    }\n", TOT, I);
    scope(L, &R->red, "    ");
    const char *res = R->r->kind == IR_GOP_MEAN ? arena_printf(L->a, "acc / (%s as %s)", R->len, A) : "acc";
    fprintf(L->o, "    let v%u = (%s) as %s;\n", R->r->out[0], res, ename(vt(L, R->r->out[0])->elem));
    L->done[R->r->out[0]] = true;
    if (!stores_of(L, (uint32_t)(R->r - L->g->ops.data), false)) return false;
    fputs("}\n", L->o);
    return two_steps(L, steps, sn, &targs);
}

static bool lower_columns(Low *L, Sig *s, const char *name, Row *R)
{
    const IrTensorType *t = vt(L, R->x);
    IrGOpKind k = R->r->kind;
    bool mx = k == IR_GOP_MAX, sum = k == IR_GOP_SUM || k == IR_GOP_MEAN;
    IrElem xe = t->elem, re = vt(L, R->r->out[0])->elem;
    R->acc = sum ? (ir_elem_is_float(xe) ? (xe == IR_F64 ? IR_F64 : IR_F32) : IR_I64) : xe;
    if (k == IR_GOP_MEAN && !ir_elem_is_float(xe)) R->acc = IR_F64;
    const char *A = ename(R->acc), *id = sum ? "0" : ident(L, xe, mx);
    IrSize outer = numel(L, t, 0, R->axis), inner = numel(L, t, R->axis + 1, t->rank);
    const char *I = size_expr(L, inner);
    if (L->K->columns && L->K->partials && sum && ir_elem_is_float(xe)) return lower_columns_split(L, R, name, t, outer, I);
    autotune(L, "BM: [8, 16, 32, 64, 128], BN: [16, 32, 64, 128, 256], warps: [1, 2, 4, 8]",
             "BM * BN >= 32 * warps && BM * BN <= 16384", "BM: 64, BN: 32, warps: 4");
    signature(L, s, name);
    fprintf(L->o, ", const BM: i32 = 64, const BN: i32 = 32)\n    grid(%s * cdiv(%s, BN as i64))\n{\n",
            size_expr(L, outer), I);
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let nbn = cdiv(%s, BN as i64);\n", I);
    columns_head(L, R, t, I);
    fprintf(L->o, "    var acc = zeros([BN], %s) + (%s as %s);\n", A, id, A);
    if (!columns_loop(L, R, "0", R->len, id, sum, mx)) return false;
    scope(L, &R->red, "    ");
    const char *res = k == IR_GOP_MEAN ? arena_printf(L->a, "acc / (%s as %s)", R->len, A) : "acc";
    fprintf(L->o, "    let v%u = (%s) as %s;\n", R->r->out[0], res, ename(re));
    L->done[R->r->out[0]] = true;
    if (!stores_of(L, (uint32_t)(R->r - L->g->ops.data), false)) return false;
    fputs("}\n", L->o);
    return true;
}

static bool lower_rows_one(Low *L, Sig *s, const char *name)
{
    uint32_t ri = row_op_index(L);
    if (ri == IR_GNONE) return fail(L, "no row op");
    Row R = {.r = &L->g->ops.data[ri], .x = L->g->ops.data[ri].in[0], .sfx = ""};
    const IrTensorType *t = vt(L, R.x);
    if (t->rank == 0) return fail(L, "a row op on a scalar");
    R.axis = ir_gop_family(R.r->kind) == 'n' ? t->rank - 1 : (uint32_t)R.r->attr.axis;
    R.len = size_expr(L, t->dims[R.axis]);
    R.acc = t->elem == IR_F64 ? IR_F64 : IR_F32;
    IrGOpKind k = R.r->kind;
    if ((k == IR_GOP_SUM || k == IR_GOP_MEAN || k == IR_GOP_MAX || k == IR_GOP_MIN) && R.axis + 1 < t->rank &&
        !is_one(numel(L, t, R.axis + 1, t->rank)))
        return lower_columns(L, s, name, &R);
    IrSize nrows;
    if (!ir_size_mul(L->a, numel(L, t, 0, R.axis), numel(L, t, R.axis + 1, t->rank), &nrows))
        return fail(L, "a size that overflows");
    const char *rows = size_expr(L, nrows);
    int64_t blk = block_for(t->dims[R.axis], 16, 1024);
    autotune(L, "BLOCK: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096], warps: [1, 2, 4, 8, 16]", "BLOCK >= 16 * warps",
             arena_printf(L->a, "BLOCK: %lld, warps: %d", (long long)blk, blk >= 1024 ? 8 : blk >= 256 ? 4 : 1));
    signature(L, s, name);
    fprintf(L->o, ", const BLOCK: i32 = %lld)\n    grid(%s)\n{\n    let row = program_id(0) as i64;\n", (long long)blk,
            rows);
    row_coords(L, &R);
    bool ok = R.r->kind == IR_GOP_SOFTMAX ? softmax(L, &R) : ir_gop_family(R.r->kind) == 'n' ? norm(L, &R) : reduction(L, &R);
    fputs("}\n", L->o);
    return ok;
}

/* Whether value v holds one element per row of shape S (rank n): S without its last
 * axis, or S with a last axis of 1. */
static bool per_row(const Low *L, uint32_t v, const IrTensorType *S)
{
    const IrTensorType *t = vt(L, v);
    if (t->rank != S->rank - 1 && !(t->rank == S->rank && is_one(t->dims[t->rank - 1]))) return false;
    for (uint32_t d = 0; d + 1 < S->rank; d++)
        if (!ir_size_eq(t->dims[d], S->dims[d])) return false;
    return true;
}

/* Several row ops along the last axis of operands of one shape S (graph_fuse rule 3):
 * one program per row; each row op in kernel order gets its statistics' loops, its
 * per-row results (and what is computed from them) named at the program's top level
 * where every later loop sees them; then the per-row values written are stored, and
 * one output loop stores the rest (softmax's and the norms' outputs by row_output). */
static bool lower_rows_multi(Low *L, Sig *s, const char *name, const uint32_t *ops, uint32_t n)
{
    const IrTensorType *S = vt(L, L->g->ops.data[ops[0]].in[0]);
    if (S->rank == 0) return fail(L, "a row op on a scalar");
    for (uint32_t i = 0; i < n; i++) {
        const IrGOp *op = &L->g->ops.data[ops[i]];
        const IrTensorType *t = vt(L, op->in[0]);
        bool last = ir_gop_family(op->kind) == 'n' || op->attr.axis == (int64_t)t->rank - 1;
        bool same = t->rank == S->rank && last;
        for (uint32_t d = 0; same && d < S->rank; d++) same = ir_size_eq(t->dims[d], S->dims[d]);
        if (!same) return fail(L, "row ops of a kernel along different rows");
        if (ir_gop_family(op->kind) == 'r' && vt(L, op->out[0])->rank != S->rank - 1)
            return fail(L, "a reduction that keeps its axis");
    }
    L->multi = true;
    Row R = {.r = &L->g->ops.data[ops[0]], .x = L->g->ops.data[ops[0]].in[0], .axis = S->rank - 1, .multi = true};
    R.len = size_expr(L, S->dims[R.axis]);
    const char *rows = size_expr(L, numel(L, S, 0, R.axis));
    int64_t blk = block_for(S->dims[R.axis], 16, 1024);
    autotune(L, "BLOCK: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096], warps: [1, 2, 4, 8, 16]", "BLOCK >= 16 * warps",
             arena_printf(L->a, "BLOCK: %lld, warps: %d", (long long)blk, blk >= 1024 ? 8 : blk >= 256 ? 4 : 1));
    signature(L, s, name);
    fprintf(L->o, ", const BLOCK: i32 = %lld)\n    grid(%s)\n{\n    let row = program_id(0) as i64;\n", (long long)blk,
            rows);
    row_coords(L, &R);
    for (uint32_t i = 0; i < n; i++) {
        R.r = &L->g->ops.data[ops[i]];
        R.x = R.r->in[0];
        R.sfx = row_sfx(L, R.r);
        R.acc = row_acc(L, R.r);
        bool ok = R.r->kind == IR_GOP_SOFTMAX ? softmax(L, &R) : ir_gop_family(R.r->kind) == 'n' ? norm(L, &R) : reduction(L, &R);
        if (!ok) return false;
    }
    scope(L, &R.red, "    ");
    L->top = true;
    bool rest = false;
    for (uint32_t i = 0; i < L->K->nwrites; i++) {
        uint32_t v = L->K->writes[i];
        if (!per_row(L, v, S)) rest = true;
        else if (!store(L, v)) return false;
    }
    if (rest) {
        loop_open(L, &R);
        for (uint32_t i = 0; i < L->K->nwrites; i++)
            if (!per_row(L, L->K->writes[i], S) && !store(L, L->K->writes[i])) return false;
        loop_close(L);
    }
    fputs("}\n", L->o);
    return true;
}

/* A kernel of one row op whose consumers are all per-row or of its own output's shape
 * is lower_rows_one's; a kernel of several (or whose reduction's result is broadcast
 * back over its row, m[:, None]) is lower_rows_multi's. */
static bool lower_rows(Low *L, Sig *s, const char *name)
{
    uint32_t *ops = arena_alloc(L->a, (L->K->nops + 1) * sizeof *ops), n = 0;
    for (uint32_t i = 0; i < L->K->nops; i++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[i]];
        char f = ir_gop_family(op->kind);
        if (f == 'r' || f == 'n' || op->kind == IR_GOP_SOFTMAX) ops[n++] = L->K->ops[i];
    }
    bool back = false;   /* a reduction's result used on its operand's shape */
    if (n == 1 && ir_gop_family(L->g->ops.data[ops[0]].kind) == 'r') {
        const IrGOp *r = &L->g->ops.data[ops[0]];
        for (uint32_t i = 0; i < L->K->nops; i++) {
            const IrGOp *op = &L->g->ops.data[L->K->ops[i]];
            if (op > r && op->kind == IR_GOP_RESHAPE) back = true;
        }
    }
    L->multi = false;
    return n > 1 || back ? lower_rows_multi(L, s, name, ops, n) : lower_rows_one(L, s, name);
}

/* ---- matmul with epilogue; horizontal GEMMs ------------------------------------------------ */

typedef struct Gemm {
    const IrGOp *mm;
    const char *M, *N, *K;   /* M: the left operand's rows (unbatched: its leading axes folded in) */
    const char *nbatch;      /* batched (a right operand of rank 3 or more): the batch count */
    const char *aoff, *boff; /* batched: the operands' offsets at the program's batch "b0, b1, ..." */
    Space sp;                /* the output's axes: rm2, rn2 and the batch coordinates */
} Gemm;

/* The batched product's shape: one GEMM per batch element (of the output's leading
 * axes, "b0", "b1", ...), each operand at its broadcast batch offset. */
static bool gemm_batched(Low *L, Gemm *G, const IrTensorType *a, const IrTensorType *o)
{
    if (a->rank < 2) return fail(L, "a batched matmul with a vector left operand");
    uint32_t nb = o->rank - 2;
    const char **c = arena_alloc(L->a, (o->rank + 1) * sizeof *c);
    for (uint32_t d = 0; d < nb; d++) c[d] = arena_printf(L->a, "b%u", d);
    c[nb] = c[nb + 1] = "0";
    Space bs = {.rank = o->rank, .coord = c};
    L->sp = &bs;
    G->aoff = offset(L, G->mm->in[0]);
    G->boff = offset(L, G->mm->in[1]);
    if (!G->aoff || !G->boff) return fail(L, "matmul operands of unexpected shapes");
    G->M = size_expr(L, a->dims[a->rank - 2]);
    G->nbatch = size_expr(L, numel(L, o, 0, nb));
    c = arena_alloc(L->a, (o->rank + 1) * sizeof *c);
    for (uint32_t d = 0; d < nb; d++) c[d] = bs.coord[d];
    c[nb] = "rm2";
    c[nb + 1] = "rn2";
    G->sp = (Space){.rank = o->rank, .coord = c, .mask = "mask", .zero = "z"};
    return true;
}

static bool gemm_shape(Low *L, const IrGOp *mm, Gemm *G)
{
    const IrTensorType *a = vt(L, mm->in[0]), *b = vt(L, mm->in[1]), *o = vt(L, mm->out[0]);
    if (!ir_elem_is_float(a->elem)) return fail(L, "an integer matmul");
    if (defop(L, mm->in[0]) && L->mine[defop(L, mm->in[0]) - L->g->ops.data]) return fail(L, "a matmul prologue");
    G->mm = mm;
    bool vec = b->rank == 1;   /* a column: N = 1, and the output has no N axis */
    G->K = size_expr(L, b->dims[vec ? 0 : b->rank - 2]);
    G->N = vec ? "1" : size_expr(L, b->dims[b->rank - 1]);
    if (b->rank > 2) return gemm_batched(L, G, a, o);
    G->M = size_expr(L, numel(L, a, 0, a->rank - 1));
    const char **c = arena_alloc(L->a, (o->rank + 1) * sizeof *c);
    uint32_t rows = vec ? o->rank : o->rank - 1;   /* the output's axes that M folds */
    if (!vec) c[o->rank - 1] = "rn2";
    IrSize st = ir_size_const(1);
    for (uint32_t d = rows; d-- > 0;) {
        c[d] = d ? coord_at(L, "rm2", st, o->dims[d]) : arena_printf(L->a, "(rm2 / %s)", size_expr(L, st));
        if (!d && is_one(st)) c[d] = "rm2";
        ir_size_mul(L->a, st, o->dims[d], &st);
    }
    G->sp = (Space){.rank = o->rank, .coord = c, .mask = "mask", .zero = "z"};
    return true;
}

/* Which product each value of the kernel derives from (-1: none); *paired when an op
 * combines two products (fusion rule 4b: one program then computes the same tile of
 * every product). */
static int *products(Low *L, const IrGOp **mms, uint32_t *nmm, bool *paired)
{
    int *prod = arena_alloc(L->a, (L->g->values.len + 1) * sizeof *prod);
    for (size_t v = 0; v < L->g->values.len; v++) prod[v] = -1;
    *nmm = 0;
    *paired = false;
    for (uint32_t i = 0; i < L->K->nops; i++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[i]];
        int p = -1;
        if (op->kind == IR_GOP_MATMUL) mms[p = (int)(*nmm)++] = op;
        for (uint32_t j = 0; op->kind != IR_GOP_MATMUL && j < op->nin; j++) {
            int q = prod[op->in[j]];
            if (q >= 0 && p >= 0 && q != p) *paired = true;
            if (p < 0) p = q;
        }
        for (uint32_t j = 0; j < op->nout; j++) prod[op->out[j]] = p;
    }
    /* one product: an epilogue value that does not derive from it (a chain of loads,
     * rule 2b's recomputed values) is computed at its tile's coordinates all the same */
    for (uint32_t i = 0; *nmm == 1 && i < L->K->nops; i++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[i]];
        for (uint32_t j = 0; j < op->nout; j++) prod[op->out[j]] = 0;
    }
    return prod;
}

/* The tiles of products G[0..n) at (pm, pn): one K loop loading the shared left
 * operand's tile once and each right operand's into an accumulator of its own, then
 * the epilogue and the stores of the kernel's writes that derive from product p (all
 * of them when p < 0: paired products, rule 4b, whose shapes are one). One product's
 * names have no suffix (acc, bt), several are numbered (acc0, bt0, acc1, ...). */
/* A value the GEMM's epilogue writes whole as the block (om, on) of a row-major
 * [M, N]: the product's own shape (no batch, not broadcast, not a per-channel vector),
 * every axis at its row-major stride (so the leading axes fold into M rows of N). Such
 * a write is a store_block, which sm_90a stores by TMA from shared memory
 * (passes/tmastore.c); the other writes are masked stores. */
static bool block_write(Low *L, const Gemm *G, uint32_t v)
{
    const IrTensorType *t = vt(L, v), *o = vt(L, G->mm->out[0]);
    if (G->nbatch || (L->chan && L->chan[v]) || t->rank != o->rank || t->rank < 2) return false;
    for (uint32_t d = 0; d < t->rank; d++)
        if (!ir_size_eq(t->dims[d], o->dims[d]) || strcmp(stride_of(L, v, d), numel_expr(L, t, d + 1))) return false;
    return true;
}

/* Tile t of a GEMM grid of nbm row blocks by nbn column blocks (nbn already named) as its
 * row block pm and column block q, in Triton's grouped order: groups of 8 row blocks, the
 * rows fastest within a group. The programs resident at once then share B's tiles, so a
 * B that L2 does not hold (the LM head's [D, V] weight, the SwiGLU weights) is read from
 * memory about once per 8 row blocks, not once per row block as in row-major order. */
static void tile_order(Low *L, const char *t, const char *nbm, const char *in)
{
    fprintf(L->o, "%slet nbm = %s;\n%slet gsz = 8 * nbn;\n", in, nbm, in);
    fprintf(L->o, "%slet fm = (%s / gsz) * 8;\n%slet gm = minimum(nbm - fm, 8 as i64);\n", in, t, in);
    fprintf(L->o, "%slet pm = fm + (%s %% gsz) %% gm;\n%slet q = (%s %% gsz) / gm;\n", in, t, in, t);
}

static bool gemm_body(Low *L, Gemm *G, uint32_t n, const int *prod, int p, const char *pn, const char *in)
{
    for (uint32_t i = 1; i < n; i++)
        if (strcmp(G[i].M, G[0].M) || strcmp(G[i].N, G[0].N) || strcmp(G[i].K, G[0].K) || G[i].nbatch)
            return fail(L, "paired products of different shapes");
    const char **sfx = arena_alloc(L->a, (n + 1) * sizeof *sfx);
    for (uint32_t i = 0; i < n; i++) sfx[i] = n == 1 ? "" : arena_printf(L->a, "%u", i);
    fprintf(L->o, "%slet om = pm * (BM as i64);\n%slet on = %s * (BN as i64);\n", in, in, pn);
    fprintf(L->o, "%slet rm = om + arange(0, BM);\n%slet rn = on + arange(0, BN);\n", in, in);
    fprintf(L->o, "%slet rk = arange(0, BK);\n", in);
    for (uint32_t i = 0; i < n; i++)
        fprintf(L->o, "%svar acc%s = zeros([BM, BN], %s);\n", in, sfx[i], vt(L, G[i].mm->in[0])->elem == IR_F64 ? "f64" : "f32");
    fprintf(L->o, "%sfor k in range(0, %s, BK as i64) {\n%s    let ka = k + rk;\n", in, G->K, in);
    /* Operands that start at a parameter are block loads (zeros outside, the same
     * values as the masked loads): TMA copies them on sm_90a where the arguments allow
     * (docs/CODEGEN.md section 9); an operand at an offset (a batch's slice) stays a
     * pointer load. */
    bool a_plain = !G->aoff || !strcmp(G->aoff, "0");
    const char *ao = a_plain ? "" : arena_printf(L->a, "%s + ", G->aoff);
    uint32_t av = G->mm->in[0];
    const char *sa = vt(L, av)->rank == 2 && a_plain ? stride_of(L, av, 1) : "1";
    if (strcmp(sa, "1") && !strcmp(stride_of(L, av, 0), "1"))   /* a transposition view (trans(x) @ dy: a dW
                                                                  * GEMM): x's [K, M] rows, read M-major */
        fprintf(L->o, "%s    let at = trans(load_block(p%u, [%s, %s], [%s, 1], [k, om], [BK, BM]));\n", in, av, G->K, G->M, sa);
    else if (a_plain)
        fprintf(L->o, "%s    let at = load_block(p%u, [%s, %s], [%s, 1], [om, k], [BM, BK]);\n", in, G->mm->in[0], G->M, G->K,
                G->K);
    else
        fprintf(L->o, "%s    let at = load(p%u + %srm[:, None] * %s + ka[None, :], mask = (rm[:, None] < %s) & (ka[None, :] < %s), other = 0);\n",
                in, G->mm->in[0], ao, G->K, G->M, G->K);
    for (uint32_t i = 0; i < n; i++) {
        bool b_plain = !G[i].boff || !strcmp(G[i].boff, "0");
        const char *bo = b_plain ? "" : arena_printf(L->a, "%s + ", G[i].boff);
        uint32_t b = G[i].mm->in[1], br = vt(L, b)->rank;
        const char *sk = br >= 2 ? stride_of(L, b, br - 2) : "1", *sn = br >= 2 ? stride_of(L, b, br - 1) : "1";
        const char *bmask = arena_printf(L->a, "(ka[:, None] < %s) & (rn[None, :] < %s)", G[i].K, G[i].N);
        if (strcmp(sn, "1") && !strcmp(sk, "1") && b_plain)   /* a transposed weight ([N, K] rows): K-major tiles */
            fprintf(L->o, "%s    let bt%s = trans(load_block(%s, [%s, %s], [%s, 1], [on, k], [BN, BK]));\n", in, sfx[i],
                    pname(L, b), G[i].N, G[i].K, sn);
        else if (strcmp(sn, "1") && !strcmp(sk, "1"))
            fprintf(L->o, "%s    let bt%s = trans(load(%s + %s%s + ka[None, :], mask = (rn[:, None] < %s) & (ka[None, :] < %s), other = 0));\n",
                    in, sfx[i], pname(L, b), bo, times(L, "rn[:, None]", sn), G[i].N, G[i].K);
        else if (br >= 2 && b_plain)
            fprintf(L->o, "%s    let bt%s = load_block(%s, [%s, %s], [%s, %s], [k, on], [BK, BN]);\n", in, sfx[i], pname(L, b),
                    G[i].K, G[i].N, sk, sn);
        else if (br < 2)   /* a column: N = 1 */
            fprintf(L->o, "%s    let bt%s = load(%s + %ska[:, None] * 1 + rn[None, :], mask = %s, other = 0);\n", in, sfx[i],
                    pname(L, b), bo, bmask);
        else
            fprintf(L->o, "%s    let bt%s = load(%s + %s%s + %s, mask = %s, other = 0);\n", in, sfx[i], pname(L, b), bo,
                    times(L, "ka[:, None]", sk), times(L, "rn[None, :]", sn), bmask);
        fprintf(L->o, "%s    acc%s = dot(at, bt%s, acc%s);\n", in, sfx[i], sfx[i], sfx[i]);
    }
    fprintf(L->o, "%s}\n%slet rm2 = rm[:, None];\n%slet rn2 = rn[None, :];\n", in, in, in);
    fprintf(L->o, "%slet mask = (rm2 < %s) & (rn2 < %s);\n%slet z = rm2 * 0 + rn2 * 0;\n", in, G->M, G->N, in);
    scope(L, &G->sp, in);
    for (uint32_t i = 0; i < n; i++) {
        fprintf(L->o, "%slet v%u = acc%s as %s;\n", in, G[i].mm->out[0], sfx[i], ename(vt(L, G[i].mm->out[0])->elem));
        L->done[G[i].mm->out[0]] = true;
    }
    for (uint32_t i = 0; i < L->K->nwrites; i++) {
        uint32_t v = L->K->writes[i];
        if (p >= 0 && prod[v] != p) continue;
        if (block_write(L, G, v)) {   /* the tile as a block of the [M, N] output: TMA stores on sm_90a */
            const char *x = val(L, v);
            if (!x) return fail(L, "a written value the epilogue cannot compute");
            fprintf(L->o, "%sstore_block(%s, [%s, %s], [%s, 1], [om, on], %s);\n", in, pname(L, v), G->M, G->N, G->N, x);
        } else if (!store(L, v)) {
            return false;
        }
    }
    return true;
}

/* Horizontal products that differ only in their weight and output: one shape, no
 * epilogue but the cast of the accumulator (the kernel is its matmuls), one output
 * type, weights of the same strides (the Q, K, V projections of one x with heads of one
 * size; with grouped-query attention, K and V of one width and Q of another). A run of
 * such neighbours shares ONE GEMM body, the program selecting its weight and output
 * pointers by its product index within the run: a third of the code of three bodies
 * (compile time), the loop and its layouts as one product's. */
static bool alike(const Low *L, const Gemm *G, uint32_t n, uint32_t i, uint32_t j)
{
    if (L->K->nops != n || L->K->nwrites != n) return false;   /* the kernel is its n matmuls */
    const Gemm *x = &G[i], *y = &G[j];
    if (x->nbatch || y->nbatch || strcmp(x->M, y->M) || strcmp(x->N, y->N) || strcmp(x->K, y->K)) return false;
    if (L->K->writes[i] != x->mm->out[0] || L->K->writes[j] != y->mm->out[0]) return false;
    if (vt(L, x->mm->out[0])->elem != vt(L, y->mm->out[0])->elem) return false;
    if (vt(L, x->mm->in[1])->rank != 2 || vt(L, y->mm->in[1])->rank != 2) return false;
    for (uint32_t d = 0; d < 2; d++)   /* one load for all: the weights' strides alike */
        if (strcmp(stride_of((Low *)L, x->mm->in[1], d), stride_of((Low *)L, y->mm->in[1], d))) return false;
    return true;
}

/* Products [i, i + cnt) of one run, in the N blocks from `first` on ("0": the whole
 * kernel is the run), at indentation `in`. */
static bool uniform_run(Low *L, Gemm *G, uint32_t i, uint32_t cnt, const int *prod, const char *first, const char *in)
{
    const char **ptr = arena_alloc(L->a, (L->g->values.len + 1) * sizeof *ptr);
    memset(ptr, 0, (L->g->values.len + 1) * sizeof *ptr);
    const char *qr = strcmp(first, "0") ? arena_printf(L->a, "(q - (%s))", first) : "q";
    fprintf(L->o, "%slet nq = cdiv(%s, BN as i64);\n%slet pb = %s / nq;\n", in, G[i].N, in, qr);
    /* selects, not ifs: pure scalar ops, so the warp-specialized form keeps them before
     * its ring (passes/warpspec.c; the Llama block's QKV GEMM at 128 x 256 spilled 1 KB
     * without a producer warpgroup's register split) */
    const char *wp = arena_printf(L->a, "p%u", G[i].mm->in[1]), *op = arena_printf(L->a, "p%u", G[i].mm->out[0]);
    for (uint32_t j = 1; j < cnt; j++) {
        wp = arena_printf(L->a, "where(pb == %u, p%u, %s)", j, G[i + j].mm->in[1], wp);
        op = arena_printf(L->a, "where(pb == %u, p%u, %s)", j, G[i + j].mm->out[0], op);
    }
    fprintf(L->o, "%slet wp = %s;\n%slet op = %s;\n", in, wp, in, op);
    ptr[G[i].mm->in[1]] = "wp";
    ptr[G[i].mm->out[0]] = "op";
    L->ptr = ptr;
    bool ok = gemm_body(L, &G[i], 1, prod, (int)i, arena_printf(L->a, "(%s %% nq)", qr), in);
    L->ptr = NULL;
    return ok;
}

static bool lower_matmul(Low *L, Sig *s, const char *name)
{
    const IrGOp **mms = arena_alloc(L->a, (L->K->nops + 1) * sizeof *mms);
    uint32_t n;
    bool paired;
    int *prod = products(L, mms, &n, &paired);
    Gemm *G = arena_alloc(L->a, (n + 1) * sizeof *G);
    for (uint32_t i = 0; i < n; i++)
        if (!gemm_shape(L, mms[i], &G[i])) return false;
    for (uint32_t i = 0; i < L->K->nwrites; i++)
        if (prod[L->K->writes[i]] < 0) return fail(L, "a written value of no product");
    const IrTensorType *a = vt(L, mms[0]->in[0]), *b = vt(L, mms[0]->in[1]);
    IrSize m = numel(L, a, 0, a->rank - 1);
    bool vec = b->rank == 1;
    int64_t bm = block_for(m, 16, 128), bn = vec ? 16 : block_for(b->dims[b->rank - 1], 16, 128);
    int64_t bk = block_for(b->dims[vec ? 0 : b->rank - 2], 16, 64);
    /* one product over 128 rows: up to 256 columns (measured on the H200, 4096 x 4096 x
     * 11008 bf16: 128 x 256 is 1.13x 128 x 128; docs/PERFORMANCE.md), where the kernel is
     * one GEMM body (the schedule's producer warpgroup takes one ring: a horizontal kernel
     * of two bodies at 128 x 256 without it spilled 1 KB, ptxas -v) whose epilogue reads at
     * most one other tile (three beside a 128 x 256 accumulator spilled 508 bytes, whole) */
    uint32_t epi = 0, bodies = 1;
    for (uint32_t i = 0; i < L->K->nreads; i++) {
        uint32_t v = L->K->reads[i];
        bool operand = false;
        for (uint32_t j = 0; j < n; j++) operand |= v == mms[j]->in[0] || v == mms[j]->in[1];
        epi += !operand && vt(L, v)->rank >= 2;
    }
    for (uint32_t i = 1; i < n && !paired; i++) bodies += !alike(L, G, n, i - 1, i);
    /* an epilogue that reads two tiles or more at 128 x 256 too where every write is a
     * whole tile of the product (an element-wise epilogue): passes/epichunk.c runs it in
     * chunks of 32 columns beside the accumulator, without spills (the SwiGLU backward's
     * dX GEMM reads the gate's and the up projection's pre-activations: at 128 x 256 its
     * whole tiles spilled 2 KB, ptxas -v; chunked, none) */
    bool tiles = n == 1 && L->K->nwrites > 0;
    for (uint32_t i = 0; tiles && i < L->K->nwrites; i++) tiles = block_write(L, &G[0], L->K->writes[i]);
    if (!paired && !vec && bm == 128 && bodies == 1 && (epi <= 1 || tiles)) bn = block_for(b->dims[b->rank - 1], 16, 256);
    /* paired products: an accumulator each, so their tiles together stay at one
     * 128 x 128 accumulator's registers (two of 128 x 128 took 255 registers and spilled;
     * on the schedule's producer ring too, about 500 bytes with SwiGLU's epilogue) */
    if (paired)   /* a power of two: n * BN within the one accumulator's columns */
        while (bn * (int64_t)n > block_for(b->dims[b->rank - 1], 16, 128) && bn > 16) bn /= 2;
    /* one product of a 128 x 256 tile: 4 stages (with its TMA stores' staging, 230 KB of
     * shared memory; 0.98-0.99x cuBLAS on the H200 against 0.85-0.91x with 3,
     * docs/PERFORMANCE.md 2026-12-04); the shared pass takes fewer where they do not fit */
    /* one product of a 128 x 128 tile (its epilogue reads two tiles or more), or paired
     * products of 128 x 128 together (SwiGLU's gate and up, 128 x 64 each: a stage is 32
     * KB as for one 128 x 128 product; 230 KB with the three outputs' staging, ptxas
     * without spills): 4 stages too (the SwiGLU backward's dX GEMM, [1024, 4096] x
     * [4096, 11008] on an H100: 0.229 ms against 0.268 with 3; its main loop alone 0.149
     * against 0.203) */
    int stages = !vec && bm * bn * (paired ? (int64_t)n : 1) >= 128 * 128 ? 4 : 3;
    autotune(L, "BM: [16, 32, 64, 128, 256], BN: [16, 32, 64, 128, 256], BK: [16, 32, 64], warps: [4, 8], stages: [2, 3, 4]",
             paired ? arena_printf(L->a, "%u * BM * BN <= 128 * 128", n) : "BM * BN <= 128 * 256",
             arena_printf(L->a, "BM: %lld, BN: %lld, BK: %lld, warps: %d, stages: %d", (long long)bm, (long long)bn,
                          (long long)bk, bm * bn * (paired ? (int64_t)n : 1) >= 128 * 128 ? 8 : 4, stages));
    signature(L, s, name);
    const char *nb = "0";
    for (uint32_t i = 0; i < (paired ? 1 : n); i++) nb = arena_printf(L->a, "%s + cdiv(%s, BN as i64)", nb, G[i].N);
    fprintf(L->o, ", const BM: i32 = %lld, const BN: i32 = %lld, const BK: i32 = %lld)\n", (long long)bm, (long long)bn,
            (long long)bk);
    const char *per = arena_printf(L->a, "cdiv(%s, BM as i64) * (%s)", G[0].M, nb);
    fprintf(L->o, "    grid(%s%s)\n{\n", per, G[0].nbatch ? arena_printf(L->a, " * %s", G[0].nbatch) : "");
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let nbn = %s;\n", nb);
    if (G[0].nbatch) {
        const IrTensorType *o = vt(L, mms[0]->out[0]);
        fprintf(L->o, "    let batch = pid / (%s);\n", per);
        IrSize st = ir_size_const(1);
        for (uint32_t d = o->rank - 2; d-- > 0;) {
            fprintf(L->o, "    let b%u = %s;\n", d, coord_at(L, "batch", st, o->dims[d]));
            ir_size_mul(L->a, st, o->dims[d], &st);
        }
        fprintf(L->o, "    let tile = pid %% (%s);\n", per);
        tile_order(L, "tile", arena_printf(L->a, "cdiv(%s, BM as i64)", G[0].M), "    ");
    } else {
        tile_order(L, "pid", arena_printf(L->a, "cdiv(%s, BM as i64)", G[0].M), "    ");
    }
    const char *first = "0";
    for (uint32_t i = 0, run; i < n && !paired; i += run) {   /* each product in its own N blocks */
        for (run = 1; i + run < n && alike(L, G, n, i, i + run);) run++;
        const char *end = first;
        for (uint32_t j = 0; j < run; j++) end = arena_printf(L->a, "%s + cdiv(%s, BN as i64)", end, G[i].N);
        bool whole = run == n;   /* one run: no test of q */
        if (n > 1 && !whole) fprintf(L->o, "    if (q >= %s) && (q < %s) {\n", first, end);
        const char *in = n > 1 && !whole ? "        " : "    ";
        if (run > 1 ? !uniform_run(L, G, i, run, prod, first, in)
                    : !gemm_body(L, &G[i], 1, prod, (int)i, arena_printf(L->a, "(q - (%s))", first), in))
            return false;
        if (n > 1 && !whole) fputs("    }\n", L->o);
        first = end;
    }
    if (paired && !gemm_body(L, G, n, prod, -1, "q", "    ")) return false;   /* every product's tile at q */
    fputs("}\n", L->o);
    return true;
}

/* ---- shape changes: a gather per element ------------------------------------------------- */

/* The offset of an element of shape t at coordinates c (one per axis, no broadcasting). */
static const char *offset_at(Low *L, const IrTensorType *t, const char *const *c)
{
    const char *off = NULL;
    for (uint32_t d = 0; d < t->rank; d++) {
        const char *stride = numel_expr(L, t, d + 1);
        const char *term = strcmp(stride, "1") ? arena_printf(L->a, "%s * %s", c[d], stride) : c[d];
        off = off ? arena_printf(L->a, "%s + %s", off, term) : term;
    }
    return off ? off : "0";
}

/* Where piece j of a concat or split lies along the axis: [*lo, *lo + its size). */
static const char *const *shifted(Low *L, const Space *sp, uint32_t axis, const char *lo)
{
    const char **c = arena_alloc(L->a, (sp->rank + 1) * sizeof *c);
    for (uint32_t d = 0; d < sp->rank; d++) c[d] = sp->coord[d];
    c[axis] = arena_printf(L->a, "(%s - (%s))", sp->coord[axis], lo);
    return c;
}

/* The value of the shape op at the space's coordinates (the output's). */
static const char *gather(Low *L, const IrGOp *op, const Space *sp)
{
    const IrTensorType *x = vt(L, op->in[0]);
    const IrGOp *d = defop(L, op->in[0]);
    /* a constant's reshape or transposition (grad's seed, reshaped to [1]) is the constant */
    if (d && (d->kind == IR_GOP_CONST || d->kind == IR_GOP_SIZE) && op->kind != IR_GOP_CONCAT) return val(L, op->in[0]);
    if (op->kind == IR_GOP_RESHAPE) return arena_printf(L->a, "load(p%u + offs, mask, 0)", op->in[0]);
    if (op->kind == IR_GOP_TRANS) {
        const char **c = arena_alloc(L->a, (x->rank + 1) * sizeof *c);
        for (uint32_t i = 0; i < x->rank; i++) c[op->attr.perm[i]] = sp->coord[i];
        return arena_printf(L->a, "load(p%u + z + %s, mask, 0)", op->in[0], offset_at(L, x, c));
    }
    const char *e = "0", *lo = "0";
    uint32_t ax = (uint32_t)op->attr.axis;
    for (uint32_t j = 0; j < op->nin; j++) {
        const IrTensorType *t = vt(L, op->in[j]);
        const char *hi = arena_printf(L->a, "%s + %s", lo, size_expr(L, t->dims[ax]));
        const char *in = arena_printf(L->a, "(%s >= %s) & (%s < %s)", sp->coord[ax], lo, sp->coord[ax], hi);
        e = arena_printf(L->a, "where(%s, load(p%u + z + %s, mask & %s, 0), %s)", in, op->in[j],
                         offset_at(L, t, shifted(L, sp, ax, lo)), in, e);
        lo = hi;
    }
    return e;
}

static bool lower_shape(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    if (L->K->nops != 1) return fail(L, "a shape change fused with other ops");
    bool split = op->kind == IR_GOP_SPLIT;
    const IrTensorType *sh = vt(L, split ? op->in[0] : op->out[0]);
    const char *count = numel_expr(L, sh, 0);
    int64_t blk = block_for(numel(L, sh, 0, sh->rank), 128, 1024);
    autotune(L, "BLOCK: [128, 256, 512, 1024, 2048], warps: [1, 2, 4, 8]", "BLOCK >= 32 * warps",
             arena_printf(L->a, "BLOCK: %lld, warps: 4", (long long)blk));
    signature(L, s, name);
    fprintf(L->o, ", const BLOCK: i32 = %lld)\n    grid(cdiv(%s, BLOCK as i64))\n{\n", (long long)blk, count);
    fputs("    let offs = (program_id(0) as i64) * (BLOCK as i64) + arange(0, BLOCK);\n", L->o);
    fprintf(L->o, "    let mask = offs < %s;\n    let z = offs * 0;\n", count);
    Space sp = {.rank = sh->rank, .mask = "mask", .zero = "z"};
    sp.coord = coords_of(L, sh, "offs", "c");
    if (!split) {
        fprintf(L->o, "    store(p%u + offs, %s, mask);\n}\n", op->out[0], gather(L, op, &sp));
        return true;
    }
    const char *lo = "0";
    uint32_t ax = (uint32_t)op->attr.axis;
    for (uint32_t j = 0; j < op->nout; j++) {
        const IrTensorType *t = vt(L, op->out[j]);
        const char *hi = arena_printf(L->a, "%s + %s", lo, size_expr(L, t->dims[ax]));
        bool w = false;
        for (uint32_t i = 0; i < L->K->nwrites; i++) w |= L->K->writes[i] == op->out[j];
        if (w)
            fprintf(L->o, "    store(p%u + z + %s, load(p%u + offs, mask, 0), mask & (c%u >= %s) & (c%u < %s));\n", op->out[j],
                    offset_at(L, t, shifted(L, &sp, ax, lo)), op->in[0], ax, lo, ax, hi);
        lo = hi;
    }
    fputs("}\n", L->o);
    return true;
}

/* ---- scans: cumsum, cumprod along an axis, one program per row ------------------------------ */

static bool lower_scan(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    if (L->K->nops != 1) return fail(L, "a scan fused with other ops");
    Row R = {.r = op, .x = op->in[0], .axis = (uint32_t)op->attr.axis};
    const IrTensorType *t = vt(L, R.x);
    bool sum = op->kind == IR_GOP_CUMSUM;
    R.len = size_expr(L, t->dims[R.axis]);
    R.acc = ir_elem_is_float(t->elem) ? (t->elem == IR_F64 ? IR_F64 : IR_F32) : t->elem;
    IrSize nrows;
    if (!ir_size_mul(L->a, numel(L, t, 0, R.axis), numel(L, t, R.axis + 1, t->rank), &nrows))
        return fail(L, "a size that overflows");
    int64_t blk = block_for(t->dims[R.axis], 16, 1024);
    autotune(L, "BLOCK: [16, 32, 64, 128, 256, 512, 1024, 2048], warps: [1, 2, 4, 8]", "BLOCK >= 16 * warps",
             arena_printf(L->a, "BLOCK: %lld, warps: %d", (long long)blk, blk >= 512 ? 4 : 1));
    signature(L, s, name);
    fprintf(L->o, ", const BLOCK: i32 = %lld)\n    grid(%s)\n{\n    let row = program_id(0) as i64;\n", (long long)blk,
            size_expr(L, nrows));
    row_coords(L, &R);
    const char *A = ename(R.acc);
    fprintf(L->o, "    var carry = %d as %s;\n", sum ? 0 : 1, A);
    loop_open(L, &R);
    const char *x = row_x(L, &R, sum ? "0" : "1");
    if (!x) return false;
    fprintf(L->o, "        let cs = %s(%s, 0) %s carry;\n", ir_gop_name(op->kind), x, sum ? "+" : "*");
    fprintf(L->o, "        let v%u = cs as %s;\n", op->out[0], ename(vt(L, op->out[0])->elem));
    L->done[op->out[0]] = true;
    if (!store(L, op->out[0])) return false;
    fprintf(L->o, "        carry = sum(where(arange(0, BLOCK) == BLOCK - 1, cs, 0 as %s), 0);\n", A);
    loop_close(L);
    fputs("}\n", L->o);
    return true;
}

/* ---- attention's grouped heads ------------------------------------------------------------- */

/* G when k or v (x) is grouped over the H heads (axis -3) of an attention's result o:
 * x has H / G heads, G > 1 (grouped-query attention: query head h reads x's head h / G;
 * one head broadcast is the group of all, G = H); 1 otherwise. */
static int64_t heads_group(Low *L, uint32_t x, const IrTensorType *o)
{
    const IrTensorType *t = vt(L, x);
    int64_t h, hx;
    if (t->rank < 3 || o->rank < 3) return 1;
    if (!ir_size_is_const(o->dims[o->rank - 3], &h) || !ir_size_is_const(t->dims[t->rank - 3], &hx) || hx <= 0)
        return 1;
    return h / hx;
}

/* x's offset at scope sp's coordinates (b..., then the rows), its head axis (sp's axis
 * rank - 3) at b / G when grouped: K and V read at their own heads, never repeated. */
static const char *group_offset(Low *L, uint32_t x, const IrTensorType *o, const Space *sp)
{
    int64_t G = heads_group(L, x, o);
    if (G == 1) return offset(L, x);
    const char **c = (const char **)sp->coord, *keep = c[sp->rank - 3];
    c[sp->rank - 3] = arena_printf(L->a, "(%s / %lld)", keep, (long long)G);
    const char *off = offset(L, x);
    c[sp->rank - 3] = keep;
    return off;
}

/* ---- attention: one program per query row, online softmax over key blocks ------------------ */

static bool op_window(const Low *L, const IrGOp *op, int64_t *wl, int64_t *wr);

static bool lower_attention(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    if (L->K->nops != 1) return fail(L, "attention fused with other ops");
    if (op->nout > 1) return fail(L, "attention with its logsumexp outside a flash kernel");
    const IrTensorType *q = vt(L, op->in[0]), *k = vt(L, op->in[1]), *v = vt(L, op->in[2]), *o = vt(L, op->out[0]);
    for (uint32_t i = 1; i < 3; i++)
        if (heads_group(L, op->in[i], o) > 1) return fail(L, "grouped-query attention outside a flash kernel");
    int64_t D, Dv;
    if (!ir_size_is_const(q->dims[q->rank - 1], &D) || !ir_size_is_const(v->dims[v->rank - 1], &Dv) || D > 1024 || Dv > 1024)
        return fail(L, "attention whose head sizes are not known constants up to 1024");
    const char *Lq = size_expr(L, q->dims[q->rank - 2]), *Lk = size_expr(L, k->dims[k->rank - 2]);
    IrSize nb = numel(L, o, 0, o->rank - 2), rows;
    if (!ir_size_mul(L->a, nb, q->dims[q->rank - 2], &rows)) return fail(L, "a size that overflows");
    int64_t bd = pow2_at_least(D, 16, 1024), bdv = pow2_at_least(Dv, 16, 1024), bn = block_for(k->dims[k->rank - 2], 16, 64);
    autotune(L, "BN: [16, 32, 64, 128], warps: [1, 2, 4, 8]", "BN >= 4 * warps",
             arena_printf(L->a, "BN: %lld, warps: 4", (long long)bn));
    signature(L, s, name);
    fprintf(L->o, ", const BN: i32 = %lld)\n    grid(%s)\n{\n    let row = program_id(0) as i64;\n", (long long)bn,
            size_expr(L, rows));
    fprintf(L->o, "    let i = row %% %s;\n    let bt = row / %s;\n", Lq, Lq);
    const char **c = arena_alloc(L->a, (o->rank + 1) * sizeof *c);
    IrSize st = ir_size_const(1);
    for (uint32_t d = o->rank - 2; d-- > 0;) {
        c[d] = arena_printf(L->a, "b%u", d);
        fprintf(L->o, "    let b%u = %s;\n", d, coord_at(L, "bt", st, o->dims[d]));
        ir_size_mul(L->a, st, o->dims[d], &st);
    }
    c[o->rank - 2] = "0";
    c[o->rank - 1] = "0";
    Space base = {.rank = o->rank, .coord = c};
    scope(L, &base, "    ");
    const char *ko = offset(L, op->in[1]), *vo = offset(L, op->in[2]), *causal = val(L, op->in[3]), *scale = val(L, op->in[4]);
    c[o->rank - 2] = "i";
    const char *qo = offset(L, op->in[0]), *oo = offset(L, op->out[0]);
    if (!ko || !vo || !qo || !oo || !causal || !scale) return fail(L, "attention operands of unexpected shapes");
    fprintf(L->o, "    let dq = arange(0, %lld);\n    let dmask = dq < %lld;\n", (long long)bd, (long long)D);
    fprintf(L->o, "    let dv = arange(0, %lld);\n    let vmask = dv < %lld;\n", (long long)bdv, (long long)Dv);
    fprintf(L->o, "    let qv = load(p%u + %s + dq, dmask, 0) as f32;\n", op->in[0], qo);
    fprintf(L->o, "    var m = -inf;\n    var l = 0.0;\n    var acc = zeros([%lld], f32);\n", (long long)bdv);
    fprintf(L->o, "    for j in range(0, %s, BN as i64) {\n        let kj = j + arange(0, BN);\n", Lk);
    int64_t wl, wr;
    op_window(L, op, &wl, &wr);
    fprintf(L->o, "        let ok = (kj < %s) & ((kj <= i + %s - %s) | !%s)%s%s;\n", Lk, Lk, Lq, causal,
            wl >= 0 ? arena_printf(L->a, " & (kj >= i + %s - %s - %lld)", Lk, Lq, (long long)wl) : "",
            wr >= 0 ? arena_printf(L->a, " & (kj <= i + %s - %s + %lld)", Lk, Lq, (long long)wr) : "");
    fprintf(L->o, "        let kt = load(p%u + %s + kj[:, None] * %lld + dq[None, :], ok[:, None] & dmask[None, :], 0) as f32;\n",
            op->in[1], ko, (long long)D);
    fprintf(L->o, "        let sc = where(ok, sum(kt * qv[None, :], 1) * (%s as f32), -inf);\n", scale);
    fputs("        let mn = maximum(m, max(sc, 0));\n        let pj = where(ok, exp(sc - mn), 0.0);\n", L->o);
    fputs("        let alpha = where(m == -inf, 0.0, exp(m - mn));\n        l = l * alpha + sum(pj, 0);\n", L->o);
    fprintf(L->o, "        let vt = load(p%u + %s + kj[:, None] * %lld + dv[None, :], ok[:, None] & vmask[None, :], 0) as f32;\n",
            op->in[2], vo, (long long)Dv);
    fputs("        acc = acc * alpha + sum(pj[:, None] * vt, 0);\n        m = mn;\n    }\n", L->o);
    fprintf(L->o, "    store(p%u + %s + dv, where(l > 0.0, acc / l, 0.0) as %s, vmask);\n}\n", op->out[0], oo,
            ename(o->elem));
    return true;
}

/* ---- conv2d: an implicit GEMM ---------------------------------------------------------------- */

/* M = N*P*Q output pixels (rm: n, p, q), N = K output channels (rn), the reduction over
 * C*R*S (ka: c, r, s in the weight's own order, so w is a [K, C*R*S] matrix in both
 * layouts); x is gathered at h = p*stride + r - pad (likewise w), masked off outside the
 * input: the zero padding. The channel ops and the epilogue are element-wise on the
 * accumulator, as a GEMM's (a per-channel vector projects onto rn2). */
typedef struct ConvDims {
    const char *N, *C, *H, *W, *K, *R, *S, *P, *Q, *CRS, *M;
} ConvDims;

static bool conv_dims(Low *L, const IrGOp *op, ConvDims *d)
{
    const IrTensorType *x = vt(L, op->in[0]), *w = vt(L, op->in[1]), *o = vt(L, op->out[0]);
    bool nhwc = op->attr.conv.nhwc;
    if (x->rank != 4 || w->rank != 4 || o->rank != 4) return fail(L, "a conv2d of unexpected rank");
    if (!ir_elem_is_float(x->elem) || x->elem != w->elem) return fail(L, "a conv2d not of one float type");
    d->N = size_expr(L, x->dims[0]);
    d->C = size_expr(L, x->dims[nhwc ? 3 : 1]);
    d->H = size_expr(L, x->dims[nhwc ? 1 : 2]);
    d->W = size_expr(L, x->dims[nhwc ? 2 : 3]);
    d->K = size_expr(L, w->dims[0]);
    d->R = size_expr(L, w->dims[nhwc ? 1 : 2]);
    d->S = size_expr(L, w->dims[nhwc ? 2 : 3]);
    d->P = size_expr(L, o->dims[nhwc ? 1 : 2]);
    d->Q = size_expr(L, o->dims[nhwc ? 2 : 3]);
    d->CRS = size_expr(L, numel(L, w, 1, 4));
    d->M = arena_printf(L->a, "(%s * %s * %s)", d->N, d->P, d->Q);
    return true;
}

/* The K loop: the gathered x tile [BM, BK] and the weight tile [BK, BN]. */
static void conv_loop(Low *L, const IrGOp *op, const ConvDims *d)
{
    bool nhwc = op->attr.conv.nhwc;
    const uint32_t *st = op->attr.conv.stride, *pd = op->attr.conv.pad;
    FILE *o = L->o;
    fprintf(o, "    let rm = pm * (BM as i64) + arange(0, BM);\n    let rn = pn * (BN as i64) + arange(0, BN);\n");
    fprintf(o, "    let n = (rm / (%s * %s))[:, None];\n    let pp = ((rm / %s) %% %s)[:, None];\n", d->P, d->Q, d->Q, d->P);
    fprintf(o, "    let qq = (rm %% %s)[:, None];\n    let mm = (rm < %s)[:, None];\n", d->Q, d->M);
    fprintf(o, "    var acc = zeros([BM, BN], %s);\n", vt(L, op->in[0])->elem == IR_F64 ? "f64" : "f32");
    fprintf(o, "    for k in range(0, %s, BK as i64) {\n        let ka = k + arange(0, BK);\n", d->CRS);
    if (nhwc)
        fprintf(o, "        let c = (ka %% %s)[None, :];\n        let s = ((ka / %s) %% %s)[None, :];\n"
                   "        let r = (ka / (%s * %s))[None, :];\n", d->C, d->C, d->S, d->C, d->S);
    else
        fprintf(o, "        let c = (ka / (%s * %s))[None, :];\n        let r = ((ka / %s) %% %s)[None, :];\n"
                   "        let s = (ka %% %s)[None, :];\n", d->R, d->S, d->S, d->R, d->S);
    fprintf(o, "        let h = pp * %u + r - %u;\n        let w = qq * %u + s - %u;\n", st[0], pd[0], st[1], pd[1]);
    fprintf(o, "        let inx = mm & (ka < %s)[None, :] & (h >= 0) & (h < %s) & (w >= 0) & (w < %s);\n", d->CRS, d->H, d->W);
    if (nhwc)
        fprintf(o, "        let xo = ((n * %s + h) * %s + w) * %s + c;\n", d->H, d->W, d->C);
    else
        fprintf(o, "        let xo = ((n * %s + c) * %s + h) * %s + w;\n", d->C, d->H, d->W);
    fprintf(o, "        let at = load(p%u + xo, mask = inx, other = 0);\n", op->in[0]);
    fprintf(o, "        let bt = load(p%u + rn[None, :] * %s + ka[:, None], mask = (ka[:, None] < %s) & (rn[None, :] < %s), other = 0);\n",
            op->in[1], d->CRS, d->CRS, d->K);
    fputs("        acc = dot(at, bt, acc);\n    }\n", o);
}

/* The per-channel vectors of a conv2d kernel: its channel ops' results and operands
 * (BatchNorm's [K] statistics); each holds channel rn2 at element offset rn2, whatever
 * its rank, so a reshape among them ([K] to [K, 1, 1]) computes nothing. */
static const bool *channel_values(Low *L)
{
    bool *chan = arena_alloc(L->a, L->g->values.len + 1);
    memset(chan, 0, L->g->values.len + 1);
    for (uint32_t i = 0; i < L->K->conv->nchannel; i++) {
        const IrGOp *op = &L->g->ops.data[L->K->conv->channel[i]];
        for (uint32_t j = 0; j < op->nin; j++)
            if (vt(L, op->in[j])->rank) chan[op->in[j]] = true;
        for (uint32_t j = 0; j < op->nout; j++) chan[op->out[j]] = true;
    }
    return chan;
}

static bool lower_conv(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->conv->op];
    ConvDims d;
    if (!conv_dims(L, op, &d)) return false;
    const IrTensorType *w = vt(L, op->in[1]), *o = vt(L, op->out[0]);
    IrSize m;
    if (!ir_size_mul(L->a, numel(L, o, 0, 1), numel(L, o, op->attr.conv.nhwc ? 1 : 2, op->attr.conv.nhwc ? 3 : 4), &m))
        return fail(L, "a size that overflows");
    int64_t bm = block_for(m, 16, 128), bn = block_for(w->dims[0], 16, 128), bk = block_for(numel(L, w, 1, 4), 16, 64);
    autotune(L, "BM: [16, 32, 64, 128], BN: [16, 32, 64, 128], BK: [16, 32, 64], warps: [4, 8], stages: [2, 3, 4]",
             "BM * BN <= 128 * 128",
             arena_printf(L->a, "BM: %lld, BN: %lld, BK: %lld, warps: 4, stages: 3", (long long)bm, (long long)bn, (long long)bk));
    signature(L, s, name);
    fprintf(L->o, ", const BM: i32 = %lld, const BN: i32 = %lld, const BK: i32 = %lld)\n", (long long)bm, (long long)bn,
            (long long)bk);
    fprintf(L->o, "    grid(cdiv(%s, BM as i64) * cdiv(%s, BN as i64))\n{\n", d.M, d.K);
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let pm = pid / cdiv(%s, BN as i64);\n", d.K);
    fprintf(L->o, "    let pn = pid %% cdiv(%s, BN as i64);\n", d.K);
    conv_loop(L, op, &d);
    fputs("    let rm2 = rm[:, None];\n    let rn2 = rn[None, :];\n", L->o);
    fprintf(L->o, "    let mask = (rm2 < %s) & (rn2 < %s);\n    let z = rm2 * 0 + rn2 * 0;\n", d.M, d.K);
    const char **c = arena_alloc(L->a, 5 * sizeof *c);
    const char *pix[3] = {arena_printf(L->a, "(rm2 / (%s * %s))", d.P, d.Q), arena_printf(L->a, "((rm2 / %s) %% %s)", d.Q, d.P),
                          arena_printf(L->a, "(rm2 %% %s)", d.Q)};
    bool nhwc = op->attr.conv.nhwc;
    c[0] = pix[0];
    c[nhwc ? 1 : 2] = pix[1];
    c[nhwc ? 2 : 3] = pix[2];
    c[nhwc ? 3 : 1] = "rn2";
    Space sp = {.rank = 4, .coord = c, .mask = "mask", .zero = "z"};
    L->chan = channel_values(L);
    scope(L, &sp, "    ");
    fprintf(L->o, "    let v%u = acc as %s;\n", op->out[0], ename(o->elem));
    L->done[op->out[0]] = true;
    return store_writes(L);
}

/* ---- flash_attention: a block of query rows per program, dots over key blocks ------------- */

/* A block of BM query rows of one batch index per program (program_id: the row block,
 * then the batch axes), as FlashAttention's forward: S = Q K^T and P V are dots over
 * key blocks of BN (bf16/f16 inputs accumulate in f32 on tensor cores; f32 in f32), the
 * online softmax keeps per-row statistics m and l in f32. The score space is
 * (b..., rm2, kj2), [BM, BN] tiles: the score ops and the prob ops are element-wise on
 * it (dropout at the probabilities' row-major index, the interpreter's rand stream);
 * the prob ops act on the unnormalized probabilities (every prob op is linear in them
 * or a cast), and the output space (b..., rm2, dv2) divides by l. A causal attention
 * op with a constant `causal = true` stops at the last key block a row of the program
 * sees. */
static Space flash_space(Low *L, const IrTensorType *o, const char *last, const char *mask, const char *zero)
{
    const char **c = arena_alloc(L->a, (o->rank + 1) * sizeof *c);
    for (uint32_t d = 0; d + 2 < o->rank; d++) c[d] = arena_printf(L->a, "b%u", d);
    c[o->rank - 2] = "rm2";
    c[o->rank - 1] = last;
    return (Space){.rank = o->rank, .coord = c, .mask = mask, .zero = zero};
}

/* An operand tile at rows `rows` and the head axis `cols`: its two last axes' strides
 * (swapped: axis `ax_r` holds the rows). */
static const char *tile_at(Low *L, uint32_t v, uint32_t ax_r, uint32_t ax_c, const char *rows, const char *cols)
{
    return arena_printf(L->a, "%s + %s", times(L, rows, stride_of(L, v, ax_r)), times(L, cols, stride_of(L, v, ax_c)));
}

/* The attention op's `causal` operand: 1 a constant true, 0 a constant false, -1 known
 * only at run time (so no key block is known to be unmasked). */
/* The conjunction of two masks, either of which may be absent (NULL). */
static const char *both(Low *L, const char *a, const char *b)
{
    return !a ? b : !b ? a : arena_printf(L->a, "%s & %s", a, b);
}

/* " + Lk - Lq", the causal diagonal's offset (a query row sees the keys up to its own
 * row plus Lk - Lq), or "" when both lengths are one size (self-attention): the masked
 * loop then compares the indices without 64-bit arithmetic around them. */
static const char *diag_offset(Low *L, const char *Lk, const char *Lq)
{
    return strcmp(Lk, Lq) ? arena_printf(L->a, " + %s - %s", Lk, Lq) : "";
}

/* The attention op's window (operands 5 and 6, constants; -1 a side unbounded): false
 * when it has none. */
static bool op_window(const Low *L, const IrGOp *op, int64_t *wl, int64_t *wr)
{
    *wl = *wr = -1;
    if (!op || op->nin < 7) return false;
    const IrGOp *l = defop(L, op->in[5]), *r = defop(L, op->in[6]);
    if (l && l->kind == IR_GOP_CONST) *wl = l->attr.c.i;
    if (r && r->kind == IR_GOP_CONST) *wr = r->attr.c.i;
    return *wl >= 0 || *wr >= 0;
}

static bool attn_window(const Low *L, const IrGAttention *A, int64_t *wl, int64_t *wr)
{
    return op_window(L, A->op == IR_GNONE ? NULL : &L->g->ops.data[A->op], wl, wr);
}

static int causal_const(const Low *L, const IrGAttention *A)
{
    int64_t wl, wr;
    if (attn_window(L, A, &wl, &wr)) return -1;   /* every key block masked */
    const IrGOp *c = A->op == IR_GNONE ? NULL : defop(L, A->causal);
    if (A->op == IR_GNONE) return 0;
    return c && c->kind == IR_GOP_CONST ? c->attr.c.i != 0 : -1;
}

static bool flash_pv(Low *L, const IrGAttention *A, const char *vo, const char *dot_in, bool dfull, bool masked,
                     uint32_t vr);

/* The attention op's scale when it is a constant > 0 (then max(s * scale) is
 * max(s) * scale, and the softmax's exponent folds into one fma), else 0. */
static double scale_positive(const Low *L, const IrGAttention *A)
{
    const IrGOp *c = A->op == IR_GNONE ? NULL : defop(L, A->scale);
    if (!c || c->kind != IR_GOP_CONST) return 0;
    double x = ir_elem_is_float(vt(L, A->scale)->elem) ? c->attr.c.f : (double)c->attr.c.i;
    return x > 0 && x < 1e30 ? x : 0;
}

/* `cz`: a masked key block's keys in range, of rows in range, seen by the causal
 * diagonal (one select for the attention op's masks). */
static void causal_select(Low *L, const IrGAttention *A, const char *Lk, const char *causal)
{
    const IrTensorType *q = vt(L, A->q);
    const char *off = diag_offset(L, Lk, size_expr(L, q->dims[q->rank - 2]));
    int64_t wl, wr;
    attn_window(L, A, &wl, &wr);
    fprintf(L->o, "        let cz = ok & ((kj2 <= rm2%s) | !%s)%s%s;\n", off, causal,
            wl >= 0 ? arena_printf(L->a, " & (kj2 >= rm2%s - (WL as i64))", off) : "",
            wr >= 0 ? arena_printf(L->a, " & (kj2 <= rm2%s + (WR as i64))", off) : "");
}

/* K or V of a flash kernel as blocks of the 2-D tensor [Lk, W] of its key rows: when
 * its elements are 16-bit floats that both dots take as they are, its head axis is
 * whole (no padding lanes) and contiguous, and its memory holds nothing but its Lk key
 * rows of W elements (numel = Lk * W, W the key rows' stride: every other axis, batch
 * or head, lies inside a row, at a column offset; a [T, H, D] projection read as
 * [H, T, D] is such a tensor, [B, H, T, D] is not), a block of BN keys is
 * load_block(p, [Lk, W], [W, 1], [j, offset], [BN, D]): exactly the masked load, its
 * zeros past Lk being the tensor's end (flash_block_load's first form). Returns W's
 * expression, or NULL. */
static const char *flash_rows(Low *L, uint32_t v, bool whole)
{
    const IrTensorType *t = vt(L, v);
    if (!whole || t->rank < 2 || ir_elem_bytes(t->elem) != 2 || !ir_elem_is_float(t->elem)) return NULL;
    if (!is_one(stride_size(L, v, t->rank - 1))) return NULL;
    IrSize w = stride_size(L, v, t->rank - 2), n;
    if (!ir_size_mul(L->a, t->dims[t->rank - 2], w, &n) || !ir_size_eq(n, numel(L, t, 0, t->rank))) return NULL;
    return size_expr(L, w);
}

/* Q, K or V of a flash kernel (value v, 16-bit float, its head axis whole and
 * contiguous) as the block load of `blk` rows from row `r0` of one batch element, whose
 * element offset is `off` (offset(): the batch coordinates' terms), a 2-D tensor map
 * on sm_90a. Two forms:
 *   - flash_rows' (v's memory is its Lk rows of W elements, heads at column offsets):
 *     load_block(p, [Lk, W], [W, 1], [r0, off], [blk, D]), exactly the masked load,
 *     its zeros past Lk being the tensor's end;
 *   - v dense and row-major ([.., Lk, D] of its own: GQA's K read at head h / G): its
 *     N * Lk rows of D as one matrix, load_block(p, [N * Lk, D], [D, 1],
 *     [c * Lk + r0, 0], [blk, D]) (c the batch coordinates' flat index, the head's
 *     divided by G), as examples/flash_attn_fwd.tile's attn_fwd_tma
 *     reads its heads: a key block past Lk reads the next batch element's first rows
 *     (zeros past the last), which the masked block keeps out of S (where) and out of
 *     O (P = 0 there; a non-finite value in those rows of V would make O NaN, as in
 *     attn_fwd_tma).
 * On sm_90a TMA copies K and V into rings that a producer warpgroup fills and the
 * schedule chooses ws and overlap (attention: ring loops of two chained dots), as for
 * attn_fwd_tma; Q, loaded once before the loops, stays a pointer load there, as
 * attn_fwd_tma's. NULL when v is no such operand. */
static const char *flash_block_load(Low *L, uint32_t v, const char *off, const char *r0, const char *blk)
{
    const IrTensorType *t = vt(L, v);
    const char *R = size_expr(L, t->dims[t->rank - 2]), *D = size_expr(L, t->dims[t->rank - 1]);
    const char *w = flash_rows(L, v, true);
    if (w) return arena_printf(L->a, "load_block(p%u, [%s, %s], [%s, 1], [%s, %s], [%s, %s])", v, R, w, w, r0, off, blk, D);
    if (t->rank < 2 || ir_elem_bytes(t->elem) != 2 || !ir_elem_is_float(t->elem)) return NULL;
    for (uint32_t d = 0; d < t->rank; d++)   /* dense row-major: each stride the axes' inside it */
        if (!is_one(t->dims[d]) && !ir_size_eq(stride_size(L, v, d), numel(L, t, d + 1, t->rank))) return NULL;
    const IrTensorType *o = vt(L, L->K->attn->out);
    if (t->rank > o->rank) return NULL;
    int64_t G = heads_group(L, v, o);
    const char *row = r0;   /* the batch element's first row: its coordinates (GQA's head h / G) times their rows */
    for (uint32_t d = 0; d + 2 < t->rank; d++) {
        if (is_one(t->dims[d])) continue;
        uint32_t od = d + o->rank - t->rank;
        const char *c = arena_printf(L->a, "b%u", od);
        if (G > 1 && od + 3 == o->rank) c = arena_printf(L->a, "(b%u / %lld)", od, (long long)G);
        row = arena_printf(L->a, "%s + %s", times(L, c, size_expr(L, numel(L, t, d + 1, t->rank - 1))), row);
    }
    const char *rows = size_expr(L, numel(L, t, 0, t->rank - 1));
    return arena_printf(L->a, "load_block(p%u, [%s, %s], [%s, 1], [%s, 0], [%s, %s])", v, rows, D, D, row, blk, D);
}

/* One key block: S, the score ops, the online max and sum, the prob ops, P V. A masked
 * block checks every key against Lk, every row against Lq and the causal diagonal; an
 * unmasked one (the keys all in range and, if causal, seen by every row of the
 * program) loads K and V whole and masks only the reads of graph values by row. */
static bool flash_block(Low *L, const IrGAttention *A, const char *ko, const char *vo, const char *dot_in, bool dfull,
                        bool masked)
{
    const IrTensorType *o_t = vt(L, A->out), *k = vt(L, A->k), *v = vt(L, A->v);
    const char *Lk = size_expr(L, v->dims[v->rank - 2]);
    FILE *o = L->o;
    fputs("        let kj = j + arange(0, BN);\n", o);
    if (masked) fprintf(o, "        let kin = kj < %s;\n", Lk);
    fputs("        let kj2 = kj[None, :];\n", o);
    if (masked) fputs("        let ok = rows_in[:, None] & kin[None, :];\n", o);
    fputs("        let zk = rm2 * 0 + kj2 * 0;\n", o);
    uint32_t kr = k->rank, vr = v->rank;   /* k: [.., Lk, D], or [.., D, Lk] when k_t */
    /* K's mask: the keys in range (masked blocks), the head axis' lanes (a padded head) */
    const char *kin_k = masked ? (A->k_t ? "kin[None, :]" : "kin[:, None]") : NULL;
    const char *dm_k = dfull ? NULL : A->k_t ? "dmask[:, None]" : "dmask[None, :]";
    const char *kmask = A->k_t ? both(L, dm_k, kin_k) : both(L, kin_k, dm_k);
    const char *kt_at = A->k_t ? tile_at(L, A->k, kr - 2, kr - 1, "dq[:, None]", "kj[None, :]")
                               : tile_at(L, A->k, kr - 2, kr - 1, "kj[:, None]", "dq[None, :]");
    if (L->kw) fprintf(o, "        let kt = %s;\n", L->kw);
    else if (kmask) fprintf(o, "        let kt = load(p%u + %s + %s, %s, 0)%s;\n", A->k, ko, kt_at, kmask, dot_in);
    else fprintf(o, "        let kt = load(p%u + %s + %s)%s;\n", A->k, ko, kt_at, dot_in);
    fprintf(o, "        let s0 = dot(qt, %s);\n", A->k_t ? "kt" : "trans(kt)");
    Space sp = flash_space(L, o_t, "kj2", masked ? "ok" : "okr", "zk");
    scope(L, &sp, "        ");
    /* e^(s - m) as exp2((s - m) log2 e): one MUFU.EX2 an element (exp is eight
     * instructions, for its last ulps). The difference is taken first, in the scores'
     * own units: folding log2 e into rounded scores (Triton's tutorial) rounds large
     * scores to an absolute error that exp2 turns into relative errors of 1e-5 and
     * more. The attention op with a constant positive scale folds it exactly instead, as
     * flash_attn_fwd.tile does: the statistics m in log2 units of the scaled scores,
     * m = max(m, max(s) * qk), p = exp2(fma(s, qk, -m)), the product inside the fma
     * never rounded: one fma an element where the scale, the difference and log2 e
     * took three (the graph's attention ran 1.2x slower than the example's). exp2 with
     * ftz: a p or alpha below 2^-126 is 0, far below the resolution of a row sum that
     * holds the max's 1; keeping those subnormals costs a compare and two multiplies an
     * element. */
    const char *sm = "s0";
    bool finite = false;   /* the scores cannot be -inf: no guards on the online max */
    if (scale_positive(L, A) > 0) {
        const char *causal = val(L, A->causal);
        if (!causal) return false;
        if (masked) {
            causal_select(L, A, Lk, causal);
            fputs("        let sc = where(cz, s0, -inf);\n"
                  "        let mn = maximum(m, max(sc, 1) * qk);\n"
                  "        let pj = where(sc == -inf, 0.0, exp2(fma(sc, qk, -mn[:, None]), ftz = true));\n"
                  "        let alpha = where(m == -inf, 0.0, exp2(m - mn, ftz = true));\n", o);
        } else {
            fputs("        let mn = maximum(m, max(s0, 1) * qk);\n"
                  "        let pj = exp2(fma(s0, qk, -mn[:, None]), ftz = true);\n"
                  "        let alpha = exp2(m - mn, ftz = true);\n", o);
        }
        fputs("        l = l * alpha + sum(pj, 1);\n", o);
        return flash_pv(L, A, vo, dot_in, dfull, masked, vr);
    }
    if (A->op == IR_GNONE) {
        fprintf(o, "        let v%u = s0 as %s;\n", L->g->ops.data[A->qk].out[0], ename(vt(L, L->g->ops.data[A->qk].out[0])->elem));
        L->done[L->g->ops.data[A->qk].out[0]] = true;
        if (!(sm = val(L, L->g->ops.data[A->softmax].in[0]))) return false;
        sm = arena_printf(L->a, "%s as f32", sm);
    } else {
        const char *causal = val(L, A->causal), *scale = val(L, A->scale);
        if (!causal || !scale) return false;
        const char *s1 = arena_printf(L->a, "s0 * (%s as f32)", scale);
        if (masked) {   /* one select: the causal mask and the bounds' together */
            causal_select(L, A, Lk, causal);
            fprintf(o, "        let sc = where(cz, %s, -inf);\n", s1);
            sm = NULL;
        } else {
            sm = s1;
            finite = true;
        }
    }
    if (sm && masked) fprintf(o, "        let sc = where(ok, %s, -inf);\n", sm);
    else if (sm) fprintf(o, "        let sc = %s;\n", sm);   /* (a causal op's masked sc is written above) */
    fputs("        let mn = maximum(m, max(sc, 1));\n", o);
    if (finite) fputs("        let pj = exp2((sc - mn[:, None]) * 1.4426950408889634, ftz = true);\n"
                      "        let alpha = exp2((m - mn) * 1.4426950408889634, ftz = true);\n", o);
    else fputs("        let pj = where(sc == -inf, 0.0, exp2((sc - mn[:, None]) * 1.4426950408889634, ftz = true));\n"
               "        let alpha = where(m == -inf, 0.0, exp2((m - mn) * 1.4426950408889634, ftz = true));\n", o);
    fputs("        l = l * alpha + sum(pj, 1);\n", o);
    return flash_pv(L, A, vo, dot_in, dfull, masked, vr);
}

/* The end of a key block: the prob ops on pj, V's load, acc = P V + acc * alpha. */
static bool flash_pv(Low *L, const IrGAttention *A, const char *vo, const char *dot_in, bool dfull, bool masked,
                     uint32_t vr)
{
    FILE *o = L->o;
    const IrTensorType *v = vt(L, A->v);
    const char *pd = "pj";
    if (A->op == IR_GNONE) {
        uint32_t sv = L->g->ops.data[A->softmax].out[0];
        fprintf(o, "        let v%u = pj as %s;\n", sv, ename(vt(L, sv)->elem));
        L->done[sv] = true;
        if (!(pd = val(L, L->g->ops.data[A->pv].in[0]))) return false;
    }
    const char *vmask = both(L, masked ? "kin[:, None]" : NULL, dfull ? NULL : "vmask[None, :]");
    const char *vt_at = tile_at(L, A->v, vr - 2, vr - 1, "kj[:, None]", "dv[None, :]");
    if (L->vw) fprintf(o, "        let vt = %s;\n", L->vw);
    else if (vmask) fprintf(o, "        let vt = load(p%u + %s + %s, %s, 0)%s;\n", A->v, vo, vt_at, vmask, dot_in);
    else fprintf(o, "        let vt = load(p%u + %s + %s)%s;\n", A->v, vo, vt_at, dot_in);
    fprintf(o, "        acc = dot(%s as %s, vt, acc * alpha[:, None]);\n        m = mn;\n", pd, *dot_in ? "f32" : ename(v->elem));
    return true;
}

/* The attention op's logsumexp (its second result, when the kernel writes it, for the
 * backward): per row, in natural log units of the scaled scores, (m + log2 l) ln 2 when
 * m is in log2 units (the folded scale), else m + log l; -inf for a row that saw no
 * key. Stored in the row space (b..., rm). */
static bool flash_lse(Low *L, const IrGAttention *A, const IrTensorType *o, bool folded)
{
    bool written = false;
    for (uint32_t i = 0; i < L->K->nwrites; i++) written |= L->K->writes[i] == A->lse;
    if (!written) return true;
    const char **c = arena_alloc(L->a, o->rank * sizeof *c);
    for (uint32_t d = 0; d + 2 < o->rank; d++) c[d] = arena_printf(L->a, "b%u", d);
    c[o->rank - 2] = "rm";
    Space sp = {.rank = o->rank - 1, .coord = c, .mask = "rows_in", .zero = "zr"};
    scope(L, &sp, "    ");
    fprintf(L->o, "    let zr = rm * 0;\n    let v%u = where(l > 0.0, %s, -inf) as %s;\n", A->lse,
            folded ? "(m + log2(l)) * 0.6931471805599453" : "m + log(l)", ename(vt(L, A->lse)->elem));
    L->done[A->lse] = true;
    return store(L, A->lse);
}

static bool lower_flash(Low *L, Sig *s, const char *name)
{
    const IrGAttention *A = L->K->attn;
    const IrTensorType *q = vt(L, A->q), *k = vt(L, A->k), *v = vt(L, A->v), *o = vt(L, A->out);
    int64_t D, Dv;
    if (o->rank < 2 || q->rank < 2 || v->rank < 2) return fail(L, "attention of vectors");
    if (!ir_size_is_const(q->dims[q->rank - 1], &D) || !ir_size_is_const(v->dims[v->rank - 1], &Dv) || D > 512 || Dv > 512)
        return fail(L, "attention whose head sizes are not known constants up to 512");
    /* one element type into both dots, else both in f32 */
    const char *dot_in = q->elem == k->elem && k->elem == v->elem && ir_elem_is_float(q->elem) ? "" : " as f32";
    const char *Lq = size_expr(L, q->dims[q->rank - 2]), *Lk = size_expr(L, v->dims[v->rank - 2]);
    int64_t bd = pow2_at_least(D, 16, 512), bdv = pow2_at_least(Dv, 16, 512);
    bool dfull = bd == D && bdv == Dv;   /* the head axes need no mask */
    /* K (not transposed) and V as block loads (flash_block_load), both or neither: TMA
     * rings filled by a producer warpgroup on sm_90a, the schedule's ws and overlap (not
     * keys of the configs, so that the schedule chooses them, as for attn_fwd_tma); Q
     * too. Heads up to 256 (TMA's box). */
    bool tma = !A->k_t && !*dot_in && dfull && bd <= 256 && bdv <= 256 && flash_block_load(L, A->k, "0", "j", "BN") &&
               flash_block_load(L, A->v, "0", "j", "BN");
    /* Blocks: with block loads attn_fwd_tma's (python/tile/ops.py _tma_fwd_cfg): its
     * defaults 128 x 128, 8 warps, 2 stages for heads up to 128; 128 x 64, 2 stages at
     * 256. Else, measured on the H200 (docs/PERFORMANCE.md): 128 x 64 with 8 warps for
     * heads up to 128; 64 query rows with 8 warps is 4x slower than with 4. */
    bool wide = bd <= 128 && bdv <= 128;
    int64_t bm = block_for(q->dims[q->rank - 2], 16, wide || tma ? 128 : 64),
            bn = block_for(v->dims[v->rank - 2], 16, tma ? (wide ? 128 : 64) : wide ? 64 : 32);
    L->kw = L->vw = NULL;
    autotune(L, "BM: [16, 32, 64, 128], BN: [16, 32, 64, 128], warps: [4, 8], stages: [1, 2, 3]", "BM * BN <= 128 * 128",
             arena_printf(L->a, "BM: %lld, BN: %lld, warps: %d, stages: 2", (long long)bm, (long long)bn,
                          bm >= 128 ? 8 : 4));
    signature(L, s, name);
    IrSize nb = numel(L, o, 0, o->rank - 2);
    int64_t wl, wr;
    if (attn_window(L, A, &wl, &wr))   /* the window's sides as flash_attn_fwd.tile's consts */
        fprintf(L->o, ", const WL: i32 = %lld, const WR: i32 = %lld", (long long)wl, (long long)wr);
    fprintf(L->o, ", const BM: i32 = %lld, const BN: i32 = %lld)\n    grid(cdiv(%s, BM as i64) * %s)\n{\n", (long long)bm,
            (long long)bn, Lq, size_expr(L, nb));
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let nqb = cdiv(%s, BM as i64);\n", Lq);
    fputs("    let pm = pid % nqb;\n    let bt = pid / nqb;\n", L->o);
    IrSize st = ir_size_const(1);
    for (uint32_t d = o->rank - 2; d-- > 0;) {
        fprintf(L->o, "    let b%u = %s;\n", d, coord_at(L, "bt", st, o->dims[d]));
        ir_size_mul(L->a, st, o->dims[d], &st);
    }
    Space base = flash_space(L, o, "0", NULL, NULL);
    ((const char **)base.coord)[o->rank - 2] = "0";
    scope(L, &base, "    ");
    const char *ko = group_offset(L, A->k, o, &base), *vo = group_offset(L, A->v, o, &base), *qo = offset(L, A->q);
    if (!ko || !vo || !qo) return fail(L, "attention operands of unexpected shapes");
    fprintf(L->o, "    let rm = pm * (BM as i64) + arange(0, BM);\n    let rows_in = rm < %s;\n    let rm2 = rm[:, None];\n", Lq);
    if (A->op == IR_GNONE)   /* the row mask of graph values read in the unmasked blocks */
        fputs("    let okr = rows_in[:, None] & (arange(0, BN)[None, :] >= 0);\n", L->o);
    fprintf(L->o, "    let dq = arange(0, %lld);\n    let dv = arange(0, %lld);\n", (long long)bd, (long long)bdv);
    if (!dfull) fprintf(L->o, "    let dmask = dq < %lld;\n    let vmask = dv < %lld;\n", (long long)D, (long long)Dv);
    if (tma) {
        L->kw = flash_block_load(L, A->k, ko, "j", "BN");
        L->vw = flash_block_load(L, A->v, vo, "j", "BN");
    }
    const char *qb = tma ? flash_block_load(L, A->q, qo, "pm * (BM as i64)", "BM") : NULL;
    if (qb) fprintf(L->o, "    let qt = %s;\n", qb);
    else fprintf(L->o, "    let qt = load(p%u + %s + %s, %s, 0)%s;\n", A->q, qo,
            tile_at(L, A->q, q->rank - 2, q->rank - 1, "rm[:, None]", "dq[None, :]"),
            dfull ? "rows_in[:, None]" : "rows_in[:, None] & dmask[None, :]", dot_in);
    fprintf(L->o, "    var m = full([BM], -inf, f32);\n    var l = zeros([BM], f32);\n    var acc = zeros([BM, %lld], f32);\n",
            (long long)bdv);
    double sc = scale_positive(L, A);
    if (sc > 0)   /* the scale and log2 e in one factor (flash_block) */
        fprintf(L->o, "    let qk = %.17g as f32;\n", sc * 1.4426950408889634);
    /* the key blocks before `mid` need no mask (inside Lk and, if causal, wholly seen by
     * the program's first row), those from `mid` to `hi` do */
    int causal = causal_const(L, A);
    const char *full = arena_printf(L->a, "(%s / (BN as i64)) * (BN as i64)", Lk);
    const char *mid = causal < 0 ? "0"
        : causal ? arena_printf(L->a, "minimum(%s, maximum(0, (pm * (BM as i64)%s + 1) / (BN as i64) * (BN as i64)))",
                                full, diag_offset(L, Lk, Lq))
                 : full;
    const char *hi = causal == 1 ? arena_printf(L->a, "minimum(%s, (pm + 1) * (BM as i64)%s)", Lk, diag_offset(L, Lk, Lq)) : Lk;
    fprintf(L->o, "    let mid = %s;\n    for j in range(0, mid, BN as i64) {\n", mid);
    if (!flash_block(L, A, ko, vo, dot_in, dfull, false)) return false;
    fprintf(L->o, "    }\n    for j in range(mid, %s, BN as i64) {\n", hi);
    if (!flash_block(L, A, ko, vo, dot_in, dfull, true)) return false;
    fputs("    }\n    let dv2 = dv[None, :];\n", L->o);
    fprintf(L->o, "    let omask = %s;\n    let zv = rm2 * 0 + dv2 * 0;\n",
            dfull ? "rows_in[:, None] & (dv2 >= 0)" : "rows_in[:, None] & vmask[None, :]");
    Space out = flash_space(L, o, "dv2", "omask", "zv");
    scope(L, &out, "    ");
    /* one reciprocal a row and a multiply an element: a division an element is a
     * dozen instructions and a slow path each (64 of them a thread at d = 128), the
     * largest part of the kernel ptxas assembles; a row that saw no key (l = 0) is 0 */
    fputs("    let rl = where(l > 0.0, 1.0 / l, 0.0);\n", L->o);
    fprintf(L->o, "    let v%u = (acc * rl[:, None]) as %s;\n", A->out, ename(o->elem));
    L->done[A->out] = true;
    for (uint32_t i = 0; i < L->K->nwrites; i++)
        if (L->K->writes[i] != A->lse && !store(L, L->K->writes[i])) return false;
    if (!flash_lse(L, A, o, sc > 0)) return false;
    fputs("}\n", L->o);
    return true;
}

/* ---- attention_bwd: FlashAttention-2's backward, two kinds of programs -------------------- */

/* attention_bwd q, k, v, o, do, lse, causal, scale[, left, right] -> dq, dk, dv as two
 * kinds of programs, as examples/flash_attn_bwd.tile's attn_bwd_dkdv and attn_bwd_dq:
 *   - cdiv(Lk, BN) * NKV programs: a block of BN keys of one KV batch element (its head
 *     when grouped), K and V loaded once; for each of the G query heads of its group in
 *     turn, a walk over the query blocks: P^T = exp(scale K Q^T - lse) (masked: keys and
 *     rows in range, causal bottom-right aligned, the window), dV += P^T dO, dK += (P^T *
 *     (V dO^T - delta)) Q; dK and dV summed over the group in registers, in a fixed
 *     order, without atomics; then dK * scale and dV stored;
 *   - cdiv(Lq, BM) * NB programs: a block of BM query rows of one batch element, a walk
 *     over the key blocks: dQ += dS K, stored times scale.
 * P is never in memory. Only the blocks the causal diagonal and the window can reach
 * are visited (bwd_query_lo and the like), each masked. Refused (the plan interpreter
 * runs it): f64 operands, batch shapes other than q's = o's with k and v's equal or
 * grouped along the head axis, a window or causal flag that is not a constant.
 * f32 operands: one launch whose grid holds both kinds (the dK/dV ones first), every dot
 * in f32, delta = rowsum(dO * O) computed where a query block is loaded (BM * Dv
 * products beside its BN * BM * (D + Dv) in the dots), so no preprocessing kernel and no
 * delta buffer. q, k and v of one 16-bit float type (bf16, f16) and an f32 dO
 * (IrGKernel.bwd_scratch): examples/flash_attn_bwd.tile's _tma kernels in three steps
 * over a scratch (lower_attention_bwd16): bwd_pre writes dO in q's type and delta (its
 * preprocess), then bwd_dkdv16 and bwd_dq16, each one loop over block loads that TMA
 * copies, with dots of 16-bit operands into f32 accumulators (wgmma on sm_90a: dO must
 * be a 16-bit tile in memory for that, hence the scratch), P and dS rounded to q's type
 * before the dots that read them, exp2 with the scale and log2 e in one fma. */
typedef struct Bwd {
    const IrGOp *op;
    uint32_t q, k, v, o, dout, lse, dq, dk, dv;   /* value ids */
    const IrTensorType *qt, *kt, *ot;
    int64_t G, D, Dv, bd, bdv;
    uint32_t nb;             /* the batch rank */
    const char *Lq, *Lk, *off, *causal, *scale;
    int64_t wl, wr;
    const char *half;        /* the 16-bit path: the dots' operand type ("bf16", "f16"), else NULL */
    const char *mLq, *mLk, *moff;   /* Lq, Lk and off in the masks: i32 copies when half (rm and rn
                                     * are i32 there: i64 index vectors made the dK/dV loop spill) */
} Bwd;

static bool kernel_writes(const Low *L, uint32_t v)
{
    for (uint32_t i = 0; i < L->K->nwrites; i++)
        if (L->K->writes[i] == v) return true;
    return false;
}

/* The offset of value v of batch rank `nb` + 2 (or + 1: lse) at the batch coordinates
 * c[0..nb) (expressions), its rows at `rows` and its columns at `cols` (NULL: none). */
static const char *bwd_at(Low *L, uint32_t v, uint32_t nb, const char *const *c, const char *rows, const char *cols)
{
    const char *off = "0";
    for (uint32_t d = 0; d < nb; d++)
        if (!is_one(vt(L, v)->dims[d])) off = arena_printf(L->a, "%s + %s", off, times(L, c[d], stride_of(L, v, d)));
    off = arena_printf(L->a, "%s + %s", off, times(L, rows, stride_of(L, v, nb)));
    return cols ? arena_printf(L->a, "%s + %s", off, times(L, cols, stride_of(L, v, nb + 1))) : off;
}

/* Checks the op's shapes for this lowering and fills B. */
static bool bwd_read(Low *L, const IrGOp *op, Bwd *B)
{
    *B = (Bwd){.op = op, .q = op->in[0], .k = op->in[1], .v = op->in[2], .o = op->in[3], .dout = op->in[4],
               .lse = op->in[5], .dq = op->out[0], .dk = op->out[1], .dv = op->out[2]};
    B->qt = vt(L, B->q), B->kt = vt(L, B->k), B->ot = vt(L, B->o);
    const IrTensorType *v = vt(L, B->v);
    if (B->qt->elem == IR_F64 || vt(L, B->dq)->elem == IR_F64) return fail(L, "attention_bwd in f64");
    B->nb = B->ot->rank - 2;
    if (B->qt->rank != B->ot->rank || B->kt->rank != B->ot->rank || v->rank != B->ot->rank)
        return fail(L, "attention_bwd whose q, k, v have batch axes of their own ranks");
    B->G = B->nb ? heads_group(L, B->k, B->ot) : 1;
    if (B->nb && heads_group(L, B->v, B->ot) != B->G) return fail(L, "attention_bwd whose k and v group differently");
    for (uint32_t d = 0; d < B->nb; d++) {
        bool head = d + 1 == B->nb && B->G > 1;
        if (!ir_size_eq(B->qt->dims[d], B->ot->dims[d]) ||
            (!head && (!ir_size_eq(B->kt->dims[d], B->ot->dims[d]) || !ir_size_eq(v->dims[d], B->ot->dims[d]))))
            return fail(L, "attention_bwd with broadcast batch axes");
    }
    if (!ir_size_is_const(B->qt->dims[B->qt->rank - 1], &B->D) || !ir_size_is_const(v->dims[v->rank - 1], &B->Dv) ||
        B->D > 256 || B->Dv > 256)
        return fail(L, "attention_bwd whose head sizes are not known constants up to 256");
    B->bd = pow2_at_least(B->D, 16, 256), B->bdv = pow2_at_least(B->Dv, 16, 256);
    B->Lq = size_expr(L, B->qt->dims[B->qt->rank - 2]), B->Lk = size_expr(L, B->kt->dims[B->kt->rank - 2]);
    B->off = diag_offset(L, B->Lk, B->Lq);
    B->wl = B->wr = -1;
    for (uint32_t i = 8; i < op->nin; i++) {
        const IrGOp *w = defop(L, op->in[i]);
        if (!w || w->kind != IR_GOP_CONST) return fail(L, "attention_bwd with a window that is not constant");
        *(i == 8 ? &B->wl : &B->wr) = w->attr.c.i;
    }
    const IrGOp *c = defop(L, op->in[6]);
    if (!c || c->kind != IR_GOP_CONST) return fail(L, "attention_bwd whose causal flag is not constant");
    B->causal = c->attr.c.i ? "1" : "0";
    B->half = L->K->bwd_scratch ? ename(B->qt->elem) : NULL;   /* passes/graph_fuse.c bwd_half */
    B->mLq = B->half ? "lq32" : B->Lq, B->mLk = B->half ? "lk32" : B->Lk;
    B->moff = B->half && *B->off ? " + lk32 - lq32" : B->off;
    return (B->scale = val(L, op->in[7])) != NULL;
}

/* The first row of the query rows of batch coordinates c in the scratch's dO [rows, Dv]
 * and delta [rows] (o's batch axes row-major, Lq rows each). */
static const char *bwd_row(Low *L, const Bwd *B, const char *const *c)
{
    const char *row = "0";
    for (uint32_t d = 0; d < B->nb; d++)
        if (!is_one(B->ot->dims[d]))
            row = arena_printf(L->a, "%s + %s", row, times(L, c[d], size_expr(L, numel(L, B->ot, d + 1, B->nb + 1))));
    return row;
}

/* The first row of batch coordinates c in the rows of a tensor of type t whose batch
 * axes and rows are flattened row-major (sum c[d] times the rows of one index of d). */
static const char *bwd_flat_row(Low *L, const IrTensorType *t, uint32_t nb, const char *const *c)
{
    const char *row = "0";
    for (uint32_t d = 0; d < nb; d++)
        if (!is_one(t->dims[d])) row = arena_printf(L->a, "%s + %s", row, times(L, c[d], size_expr(L, numel(L, t, d + 1, nb + 1))));
    return row;
}

/* The 16-bit path's load of value v's block of `blk` rows from row `r0` of batch
 * coordinates c (all its head columns, `width` of them in a tile `bw` wide) as a
 * `load_block` from the parameter itself, the form passes/blockload.c copies by TMA
 * from a producer warpgroup (a block whose pointer is moved is not: its tensor map is
 * made on the host from the parameter): the batch axes and the rows of v flattened into
 * one row axis [rows, width] when they are laid out row-major (stride of a batch axis
 * = its inner axis' length times that axis' stride), the block at that batch element's
 * first row + r0, as examples/flash_attn_bwd.tile's _tma kernels read q, k, v and dO;
 * or, for one batch axis laid out inside the rows ([L, H, D] memory: the head's stride
 * is its width), the [L, row stride] matrix at column c * width. Rows past the batch
 * element's L read the next element's rows instead of zeros: every use masks them
 * (P and dS are 0 at rows and keys out of range, the stores test rows; as the example).
 * Otherwise (a padded head in the column form, other strides) the pointer form: the
 * batch element's [L, width] from p + its offset, i32 coordinates (zeros past L),
 * copied by cp.async. NULL when v's head axis is strided. */
static const char *bwd_block(Low *L, const Bwd *B, uint32_t v, const char *const *c, const char *r0, const char *blk,
                             int64_t width, int64_t bw)
{
    const IrTensorType *t = vt(L, v);
    uint32_t r = t->rank;
    if (!B->half || !is_one(stride_size(L, v, r - 1))) return NULL;
    const char *W = stride_of(L, v, r - 2);
    bool flat = true;
    for (uint32_t d = 0; d < B->nb; d++) {
        IrSize in;
        if (!is_one(t->dims[d]) &&
            (!ir_size_mul(L->a, t->dims[d + 1], stride_size(L, v, d + 1), &in) || !ir_size_eq(in, stride_size(L, v, d))))
            flat = false;
    }
    if (flat)
        return arena_printf(L->a, "load_block(p%u, [%s, %lld], [%s, 1], [%s + %s, 0], [%s, %lld])", v,
                            size_expr(L, numel(L, t, 0, B->nb + 1)), (long long)width, W, bwd_flat_row(L, t, B->nb, c), r0,
                            blk, (long long)bw);
    if (B->nb == 1 && width == bw && ir_size_eq(stride_size(L, v, 0), ir_size_const(width)))
        return arena_printf(L->a, "load_block(p%u, [%s, %s], [%s, 1], [%s, %s], [%s, %lld])", v, size_expr(L, t->dims[r - 2]),
                            W, W, r0, times(L, c[0], arena_printf(L->a, "%lld", (long long)width)), blk, (long long)bw);
    const char *off = "";
    for (uint32_t d = 0; d < B->nb; d++)
        if (!is_one(t->dims[d])) off = arena_printf(L->a, "%s + %s", off, times(L, c[d], stride_of(L, v, d)));
    return arena_printf(L->a, "load_block(p%u%s, [%s as i32, %lld], [%s as i32, 1], [(%s) as i32, 0], [%s, %lld])", v, off,
                        size_expr(L, t->dims[r - 2]), (long long)width, W, r0, blk, (long long)bw);
}

/* `seen`: query rows `i` see keys `j` (tiles that broadcast to one another). */
static const char *bwd_seen(Low *L, const Bwd *B, const char *i, const char *j)
{
    const char *m = arena_printf(L->a, "(%s < %s) & (%s < %s)", i, B->mLq, j, B->mLk);
    if (*B->causal == '1') m = arena_printf(L->a, "%s & (%s <= %s%s)", m, j, i, B->moff);
    if (B->wl >= 0) m = arena_printf(L->a, "%s & (%s >= %s%s - %lld)", m, j, i, B->moff, (long long)B->wl);
    if (B->wr >= 0) m = arena_printf(L->a, "%s & (%s <= %s%s + %lld)", m, j, i, B->moff, (long long)B->wr);
    return m;
}

/* The loads of a query block (rows rm from r0, `blk` of them, `qin` in range) of batch
 * coordinates c: qt, ot, dot_ (f32; the 16-bit path: qt and dot_ of the dots' type),
 * lr (its logsumexp) and delta. */
static void bwd_query_block(Low *L, const Bwd *B, const char *const *c, const char *r0, const char *blk, const char *ind)
{
    FILE *o = L->o;
    const char *dm = B->bd == B->D ? "" : " & dmask[None, :]", *vm = B->bdv == B->Dv ? "" : " & vmask[None, :]";
    fprintf(o, "%slet qin = rm < %s;\n", ind, B->mLq);
    if (B->half) {   /* dO (in q's type) and delta from the scratch (bwd_pre) */
        const char *qb = bwd_block(L, B, B->q, c, r0, blk, B->D, B->bd), *row = bwd_row(L, B, c);
        if (qb) fprintf(o, "%slet qt = %s;\n", ind, qb);
        else fprintf(o, "%slet qt = load(p%u + %s, qin[:, None]%s, 0);\n", ind, B->q,
                     bwd_at(L, B->q, B->nb, c, "rm[:, None]", "ed[None, :]"), dm);
        fprintf(o, "%slet dot_ = load_block(ps, [%s, %lld], [%lld, 1], [%s + %s, 0], [%s, %lld]);\n", ind,
                size_expr(L, numel(L, B->ot, 0, B->nb + 1)), (long long)B->Dv, (long long)B->Dv, row, r0, blk,
                (long long)B->bdv);
        fprintf(o, "%slet lr = load(p%u + %s, qin, 0) as f32;\n", ind, B->lse, bwd_at(L, B->lse, B->nb, c, "rm", NULL));
        fprintf(o, "%slet lq = lr * 1.4426950408889634;\n", ind);
        fprintf(o, "%slet delta = load(pd + doff + %s + rm, qin, 0);\n", ind, row);
        return;
    }
    fprintf(o, "%slet qt = load(p%u + %s, qin[:, None]%s, 0) as f32;\n", ind, B->q,
            bwd_at(L, B->q, B->nb, c, "rm[:, None]", "ed[None, :]"), dm);
    fprintf(o, "%slet ot = load(p%u + %s, qin[:, None]%s, 0) as f32;\n", ind, B->o,
            bwd_at(L, B->o, B->nb, c, "rm[:, None]", "ev[None, :]"), vm);
    fprintf(o, "%slet dot_ = load(p%u + %s, qin[:, None]%s, 0) as f32;\n", ind, B->dout,
            bwd_at(L, B->dout, B->nb, c, "rm[:, None]", "ev[None, :]"), vm);
    fprintf(o, "%slet lr = load(p%u + %s, qin, 0) as f32;\n", ind, B->lse, bwd_at(L, B->lse, B->nb, c, "rm", NULL));
    fprintf(o, "%slet delta = sum(ot * dot_, 1);\n", ind);
}

/* The key block rn from r0 (`blk` keys, `kin` in range) of KV batch coordinates c: kt,
 * vt (f32; the 16-bit path: of the dots' type). */
static void bwd_key_block(Low *L, const Bwd *B, const char *const *c, const char *r0, const char *blk, const char *ind)
{
    FILE *o = L->o;
    const char *dm = B->bd == B->D ? "" : " & dmask[None, :]", *vm = B->bdv == B->Dv ? "" : " & vmask[None, :]";
    fprintf(o, "%slet kin = rn < %s;\n", ind, B->mLk);
    if (B->half) {
        const char *kb = bwd_block(L, B, B->k, c, r0, blk, B->D, B->bd);
        const char *vb = bwd_block(L, B, B->v, c, r0, blk, B->Dv, B->bdv);
        if (kb) fprintf(o, "%slet kt = %s;\n", ind, kb);
        else fprintf(o, "%slet kt = load(p%u + %s, kin[:, None]%s, 0);\n", ind, B->k,
                     bwd_at(L, B->k, B->nb, c, "rn[:, None]", "ed[None, :]"), dm);
        if (vb) fprintf(o, "%slet vt = %s;\n", ind, vb);
        else fprintf(o, "%slet vt = load(p%u + %s, kin[:, None]%s, 0);\n", ind, B->v,
                     bwd_at(L, B->v, B->nb, c, "rn[:, None]", "ev[None, :]"), vm);
        return;
    }
    fprintf(o, "%slet kt = load(p%u + %s, kin[:, None]%s, 0) as f32;\n", ind, B->k,
            bwd_at(L, B->k, B->nb, c, "rn[:, None]", "ed[None, :]"), dm);
    fprintf(o, "%slet vt = load(p%u + %s, kin[:, None]%s, 0) as f32;\n", ind, B->v,
            bwd_at(L, B->v, B->nb, c, "rn[:, None]", "ev[None, :]"), vm);
}

/* `let NAME0 = ..., NAME1 = ...`: the coordinates of flat index `flat` over the batch
 * axes of t (row-major); their names in c. */
static void bwd_coords(Low *L, const IrTensorType *t, uint32_t nb, const char *flat, const char *name, const char **c,
                       const char *ind)
{
    IrSize st = ir_size_const(1);
    for (uint32_t d = nb; d-- > 0;) {
        c[d] = arena_printf(L->a, "%s%u", name, d);
        fprintf(L->o, "%slet %s = %s;\n", ind, c[d], coord_at(L, flat, st, t->dims[d]));
        ir_size_mul(L->a, st, t->dims[d], &st);
    }
}

/* The query blocks a key block (keys kb * BN ..) visits, [lo, hi): query i sees key j
 * only when j <= i + Lk - Lq (causal; j <= i + Lk - Lq + WR with a window's right side)
 * and j >= i + Lk - Lq - WL (its left side), so lo starts at the first block that can
 * see the block's first key and hi ends after the last row that can see its last (the
 * masks inside still decide each element). */
static const char *bwd_query_lo(Low *L, const Bwd *B)
{
    const char *noff = *B->off ? arena_printf(L->a, " - (%s - %s)", B->Lk, B->Lq) : "";
    if (*B->causal == '1') return arena_printf(L->a, "maximum(0, kb * (BN as i64)%s) / (BM as i64) * (BM as i64)", noff);
    if (B->wr < 0) return "0";
    return arena_printf(L->a, "maximum(0, kb * (BN as i64)%s - %lld) / (BM as i64) * (BM as i64)", noff, (long long)B->wr);
}

static const char *bwd_query_hi(Low *L, const Bwd *B)
{
    if (B->wl < 0) return B->Lq;
    const char *noff = *B->off ? arena_printf(L->a, " - (%s - %s)", B->Lk, B->Lq) : "";
    return arena_printf(L->a, "minimum(%s, (kb + 1) * (BN as i64)%s + %lld)", B->Lq, noff, (long long)B->wl);
}

/* The key blocks a query block (rows qb * BM ..) visits, [lo, hi), likewise. */
static const char *bwd_key_lo(Low *L, const Bwd *B)
{
    if (B->wl < 0) return "0";
    return arena_printf(L->a, "maximum(0, qb * (%s as i64)%s - %lld) / (%s as i64) * (%s as i64)", "BM", B->off,
                        (long long)B->wl, "BN", "BN");
}

static const char *bwd_key_hi(Low *L, const Bwd *B)
{
    if (*B->causal == '1') return arena_printf(L->a, "minimum(%s, (qb + 1) * (%s as i64)%s)", B->Lk, "BM", B->off);
    if (B->wr < 0) return B->Lk;
    return arena_printf(L->a, "minimum(%s, (qb + 1) * (%s as i64)%s + %lld)", B->Lk, "BM", B->off, (long long)B->wr);
}

/* The stores of a dK/dV program's results (key rows at kc), and of a dQ program's
 * (query rows at qc), in the values' types; both paths' programs end so. */
static void bwd_store_dkdv(Low *L, const Bwd *B, const char *const *kc, const char *ind)
{
    const char *dm = B->bd == B->D ? "" : " & dmask[None, :]", *vm = B->bdv == B->Dv ? "" : " & vmask[None, :]";
    if (kernel_writes(L, B->dk))
        fprintf(L->o, "%sstore(p%u + %s, (dka * sc) as %s, kin[:, None]%s);\n", ind, B->dk,
                bwd_at(L, B->dk, B->nb, kc, "rn[:, None]", "ed[None, :]"), ename(vt(L, B->dk)->elem), dm);
    if (kernel_writes(L, B->dv))
        fprintf(L->o, "%sstore(p%u + %s, dva as %s, kin[:, None]%s);\n", ind, B->dv,
                bwd_at(L, B->dv, B->nb, kc, "rn[:, None]", "ev[None, :]"), ename(vt(L, B->dv)->elem), vm);
}

static void bwd_store_dq(Low *L, const Bwd *B, const char *const *qc, const char *ind)
{
    if (kernel_writes(L, B->dq))
        fprintf(L->o, "%sstore(p%u + %s, (dqa * sc) as %s, qin[:, None]%s);\n", ind, B->dq,
                bwd_at(L, B->dq, B->nb, qc, "rm[:, None]", "ed[None, :]"), ename(vt(L, B->dq)->elem),
                B->bd == B->D ? "" : " & dmask[None, :]");
}

/* The dK/dV programs (the first nkb * NKV). */
static void bwd_dkdv(Low *L, const Bwd *B)
{
    FILE *o = L->o;
    const char **kc = arena_alloc(L->a, (B->nb + 1) * sizeof *kc), **qc = arena_alloc(L->a, (B->nb + 1) * sizeof *qc);
    fputs("        let kb = pid % nkb;\n        let kvb = pid / nkb;\n", o);
    bwd_coords(L, B->kt, B->nb, "kvb", "c", kc, "        ");
    fputs("        let rn = kb * (BN as i64) + arange(0, BN);\n", o);
    bwd_key_block(L, B, kc, "kb * (BN as i64)", "BN", "        ");
    fprintf(o, "        var dka = zeros([BN, %lld], f32);\n        var dva = zeros([BN, %lld], f32);\n", (long long)B->bd,
            (long long)B->bdv);
    for (uint32_t d = 0; d < B->nb; d++) qc[d] = kc[d];
    if (B->G > 1) {
        qc[B->nb - 1] = "qh";
        fprintf(o, "        for g in range(0, %lld) {\n            let qh = c%u * %lld + (g as i64);\n", (long long)B->G,
                B->nb - 1, (long long)B->G);
    } else {
        fputs("        {\n", o);
    }
    fprintf(o, "            for i0 in range(%s, %s, BM as i64) {\n                let rm = i0 + arange(0, BM);\n",
            bwd_query_lo(L, B), bwd_query_hi(L, B));
    bwd_query_block(L, B, qc, "i0", "BM", "                ");
    fprintf(o, "                let seen = %s & (lr > -inf)[None, :];\n", bwd_seen(L, B, "rm[None, :]", "rn[:, None]"));
    fputs("                let pt = where(seen, exp(dot(kt, trans(qt)) * sc - lr[None, :]), 0.0);\n"
              "                let dst = pt * (dot(vt, trans(dot_)) - delta[None, :]);\n"
              "                dka = dot(dst, qt, dka);\n"
              "                dva = dot(pt, dot_, dva);\n            }\n        }\n", o);
    bwd_store_dkdv(L, B, kc, "        ");
}

/* The dQ programs (after the dK/dV ones). */
static void bwd_dq(Low *L, const Bwd *B)
{
    FILE *o = L->o;
    const char **qc = arena_alloc(L->a, (B->nb + 1) * sizeof *qc), **kc = arena_alloc(L->a, (B->nb + 1) * sizeof *kc);
    fputs("        let pq = pid - nkb * NKV;\n        let qb = pq % nqb;\n        let bt = pq / nqb;\n", o);
    bwd_coords(L, B->ot, B->nb, "bt", "b", qc, "        ");
    for (uint32_t d = 0; d < B->nb; d++) kc[d] = qc[d];
    if (B->G > 1) kc[B->nb - 1] = arena_printf(L->a, "(b%u / %lld)", B->nb - 1, (long long)B->G);
    fputs("        let rm = qb * (BM as i64) + arange(0, BM);\n", o);
    bwd_query_block(L, B, qc, "qb * (BM as i64)", "BM", "        ");
    fprintf(o, "        var dqa = zeros([BM, %lld], f32);\n", (long long)B->bd);
    fprintf(o, "        for j in range(%s, %s, BN as i64) {\n            let rn = j + arange(0, BN);\n", bwd_key_lo(L, B),
            bwd_key_hi(L, B));
    bwd_key_block(L, B, kc, "j", "BN", "            ");
    fprintf(o, "            let seen = %s & (lr > -inf)[:, None];\n", bwd_seen(L, B, "rm[:, None]", "rn[None, :]"));
    fputs("            let p = where(seen, exp(dot(qt, trans(kt)) * sc - lr[:, None]), 0.0);\n"
              "            let ds = p * (dot(dot_, trans(vt)) - delta[:, None]);\n"
              "            dqa = dot(ds, kt, dqa);\n        }\n", o);
    bwd_store_dq(L, B, qc, "        ");
}

/* A step's scratch parameters: dO in q's type at ps, delta (f32) at pd + doff. */
static void bwd_scratch_params(Low *L, const Bwd *B, Sig *s)
{
    fprintf(L->o, ", ps: *%s, pd: *f32", B->half);
    vec_push(&s->args, ((PassGArg){PASS_GARG_SCRATCH, L->K->scratch}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_SCRATCH, L->K->scratch}));
}

/* The 16-bit path's first step (examples/flash_attn_bwd.tile's attn_bwd_preprocess):
 * dO rounded to q's type and delta = rowsum(dO * o) in f32 of that rounded dO (the one
 * the dots read: dP - delta then cancels as it does in exact arithmetic; the f32 dO's
 * delta left errors of 2^-9 |dP| in dS), into the scratch: dO
 * row-major [rows, Dv] at ps, delta [rows] at pd + doff (past dO, 16-byte aligned),
 * rows o's batch axes row-major times Lq; a program per BM rows. The main step reads dO
 * there as blocks (a 16-bit dot operand straight from memory, which wgmma takes from
 * shared memory) and delta a vector a query block. */
static void bwd_pre(Low *L, const Bwd *B, const char *name, Sig *s)
{
    FILE *o = L->o;
    const char *NR = size_expr(L, numel(L, B->ot, 0, B->nb + 1));
    autotune(L, "BM: [8, 16, 32, 64, 128], warps: [1, 2, 4, 8]", "BM >= warps", "BM: 32, warps: 4");
    fprintf(o, "kernel %s(p%u: *%s, p%u: *%s", name, B->o, ename(B->ot->elem), B->dout, ename(vt(L, B->dout)->elem));
    vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, B->o}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, B->dout}));
    bwd_scratch_params(L, B, s);
    for (uint32_t i = 0; i < L->g->nsizes; i++) {
        fprintf(o, ", s_%s: i64", L->g->sizes[i]);
        vec_push(&s->args, ((PassGArg){PASS_GARG_SIZE, i}));
    }
    fprintf(o, ", const BM: i32 = 32)\n    grid(cdiv(%s, BM as i64))\n{\n", NR);
    fprintf(o, "    let r = (program_id(0) as i64) * (BM as i64) + arange(0, BM);\n    let rin = r < %s;\n", NR);
    fprintf(o, "    let doff = cdiv(%s, 8) * 4;\n", size_expr(L, numel(L, B->ot, 0, B->ot->rank)));
    fprintf(o, "    let ev = arange(0, %lld);\n    let bt = r / %s;\n    let rm = r %% %s;\n", (long long)B->bdv, B->Lq, B->Lq);
    const char **c = arena_alloc(L->a, (B->nb + 1) * sizeof *c);
    bwd_coords(L, B->ot, B->nb, "bt", "c", c, "    ");
    for (uint32_t d = 0; d < B->nb; d++) c[d] = arena_printf(L->a, "%s[:, None]", c[d]);
    fprintf(o, "    let m = rin[:, None] & %s;\n",
            B->bdv == B->Dv ? "(ev >= 0)[None, :]" : arena_printf(L->a, "(ev < %lld)[None, :]", (long long)B->Dv));
    fprintf(o, "    let ot = load(p%u + %s, m, 0) as f32;\n", B->o, bwd_at(L, B->o, B->nb, c, "rm[:, None]", "ev[None, :]"));
    fprintf(o, "    let dof = load(p%u + %s, m, 0) as %s;\n", B->dout,
            bwd_at(L, B->dout, B->nb, c, "rm[:, None]", "ev[None, :]"), B->half);
    fprintf(o, "    store(pd + doff + r, sum(ot * (dof as f32), 1), rin);\n");
    fprintf(o, "    store(ps + r[:, None] * %lld + ev[None, :], dof, m);\n}\n\n", (long long)B->Dv);
}

/* The 16-bit path's dK/dV step (examples/flash_attn_bwd.tile's attn_bwd_dkdv_tma): a
 * program per key block of a KV batch element, K and V loaded once, then ONE loop over
 * the query blocks of its G query heads, t in [0, G * nqi) for nqi blocks a head (g = t
 * / nqi, the block t % nqi of [lo, hi)): a top-level loop whose dot operands are the
 * parameters' block loads, which passes/warpspec.c feeds from a TMA ring (nested loops
 * or an `if` around it are no ring loop: passes/schedule.c). Its four dots are neither
 * the schedule's gemm (independent dots) nor its attention (two chained dots), so the
 * schedule does not choose ws for it; the default config gives ws as the example's
 * @launch does. The sums over the group run in the same order as before (g, then the
 * blocks).
 * With IrGKernel.bwd_split (G > 1), `sp` (the KV rows at most ir_bwd_split_rows: too few
 * key blocks to fill the GPU) makes it a program per query head g0 and key block, in
 * key-block-major order (causal: the first key blocks walk the most query blocks, so
 * they start first), its loop over one head (ng 1), its f32 sums stored as partials
 * into the scratch for _sum (bwd_dkdv_sum); else as above (ng G). */
static void bwd_dkdv16(Low *L, const Bwd *B)
{
    FILE *o = L->o;
    const char **kc = arena_alloc(L->a, (B->nb + 1) * sizeof *kc), **qc = arena_alloc(L->a, (B->nb + 1) * sizeof *qc);
    int64_t S = L->K->bwd_split;
    if (S) {   /* sp: the split regime, programs in key-block-major order (the longest first) */
        const char *nkv = size_expr(L, numel(L, B->kt, 0, B->nb));
        fprintf(o, "    let sp = (%s <= %lld) as i64;\n    let ng = %lld - %lld * sp;\n", size_expr(L, numel(L, B->kt, 0, B->nb + 1)),
                (long long)ir_bwd_split_rows(L->g), (long long)S, (long long)(S - 1));
        fprintf(o, "    let kb = sp * (pid / (%s * %lld)) + (1 - sp) * (pid %% nkb);\n", nkv, (long long)S);
        fprintf(o, "    let kvb = sp * (pid / %lld %% %s) + (1 - sp) * (pid / nkb);\n", (long long)S, nkv);
        fprintf(o, "    let g0 = sp * (pid %% %lld);\n", (long long)S);
    } else {
        fputs("    let kb = pid % nkb;\n    let kvb = pid / nkb;\n", o);
    }
    bwd_coords(L, B->kt, B->nb, "kvb", "c", kc, "    ");
    fputs("    let rn = (kb as i32) * BN + arange(0, BN);\n", o);
    bwd_key_block(L, B, kc, "kb * (BN as i64)", "BN", "    ");
    fprintf(o, "    var dka = zeros([BN, %lld], f32);\n    var dva = zeros([BN, %lld], f32);\n", (long long)B->bd,
            (long long)B->bdv);
    for (uint32_t d = 0; d < B->nb; d++) qc[d] = kc[d];
    fprintf(o, "    let lo = %s;\n    let nqi = cdiv(maximum(%s - lo, 0), BM as i64);\n", bwd_query_lo(L, B),
            bwd_query_hi(L, B));
    if (S) {   /* ng query heads from g0 */
        qc[B->nb - 1] = "qh";
        fprintf(o, "    for t in range(0, nqi * ng) {\n        let g = t / nqi;\n"
                   "        let i0 = lo + (t - g * nqi) * (BM as i64);\n        let qh = c%u * %lld + g0 + g;\n",
                B->nb - 1, (long long)B->G);
    } else if (B->G > 1) {
        qc[B->nb - 1] = "qh";
        fprintf(o, "    for t in range(0, nqi * %lld) {\n        let g = t / nqi;\n"
                   "        let i0 = lo + (t - g * nqi) * (BM as i64);\n        let qh = c%u * %lld + g;\n",
                (long long)B->G, B->nb - 1, (long long)B->G);
    } else {
        fputs("    for t in range(0, nqi) {\n        let i0 = lo + t * (BM as i64);\n", o);
    }
    fputs("        let rm = (i0 as i32) + arange(0, BM);\n", o);
    bwd_query_block(L, B, qc, "i0", "BM", "        ");
    fprintf(o, "        let seen = %s & (lr > -inf)[None, :];\n", bwd_seen(L, B, "rm[None, :]", "rn[:, None]"));
    fprintf(o, "        let pt = where(seen, exp2(fma(dot(kt, trans(qt)), qk, -lq[None, :]), ftz = true), 0.0);\n"
               "        let dst = pt * (dot(vt, trans(dot_)) - delta[None, :]);\n"
               "        dka = dot(dst as %s, qt, dka);\n"
               "        dva = dot(pt as %s, dot_, dva);\n    }\n", B->half, B->half);
    if (!S) {
        bwd_store_dkdv(L, B, kc, "    ");
        return;
    }
    /* split: the f32 sums of head g0 as rows g0 * NK + the batch element's first row + rn
     * of the partials [S, NK, D] at pd + poff, dV's [S, NK, Dv] after them */
    const char *NK = size_expr(L, numel(L, B->kt, 0, B->nb + 1)), *row = bwd_flat_row(L, B->kt, B->nb, kc);
    const char *dm = B->bd == B->D ? "" : " & dmask[None, :]", *vm = B->bdv == B->Dv ? "" : " & vmask[None, :]";
    fprintf(o, "    if sp == 1 {\n        let pr = g0 * %s + %s + (rn as i64);\n", NK, row);
    fprintf(o, "        store(pd + poff + pr[:, None] * %lld + ed[None, :], dka, kin[:, None]%s);\n", (long long)B->D, dm);
    fprintf(o, "        store(pd + poff + %lld * %s + pr[:, None] * %lld + ev[None, :], dva, kin[:, None]%s);\n    } else {\n",
            (long long)(S * B->D), NK, (long long)B->Dv, vm);
    bwd_store_dkdv(L, B, kc, "        ");
    fputs("    }\n", o);
}

/* The split regime's last step: dK and dV of the KV rows r (BR a program, over every
 * batch element's Lk rows) as the sums of the S heads' partials in their order (g 0
 * first, a fixed order: the same sums every run), dK times the scale, in dk's and dv's
 * types; no programs outside the regime. */
static void bwd_dkdv_sum(Low *L, const Bwd *B)
{
    FILE *o = L->o;
    int64_t S = L->K->bwd_split;
    const char *NK = size_expr(L, numel(L, B->kt, 0, B->nb + 1));
    const char *dm = B->bd == B->D ? "" : " & dmask[None, :]", *vm = B->bdv == B->Dv ? "" : " & vmask[None, :]";
    fprintf(o, "    let r = pid * (BR as i64) + arange(0, BR);\n    let kin = r < %s;\n    let bt = r / %s;\n    let rn = r %% %s;\n",
            NK, B->Lk, B->Lk);
    const char **c = arena_alloc(L->a, (B->nb + 1) * sizeof *c);
    bwd_coords(L, B->kt, B->nb, "bt", "c", c, "    ");
    for (uint32_t d = 0; d < B->nb; d++) c[d] = arena_printf(L->a, "%s[:, None]", c[d]);
    fprintf(o, "    var dka = zeros([BR, %lld], f32);\n    var dva = zeros([BR, %lld], f32);\n", (long long)B->bd,
            (long long)B->bdv);
    fprintf(o, "    for g in range(0, %lld) {\n        let pr = g * %s + r;\n", (long long)S, NK);
    fprintf(o, "        dka = dka + load(pd + poff + pr[:, None] * %lld + ed[None, :], kin[:, None]%s, 0.0);\n",
            (long long)B->D, dm);
    fprintf(o, "        dva = dva + load(pd + poff + %lld * %s + pr[:, None] * %lld + ev[None, :], kin[:, None]%s, 0.0);\n    }\n",
            (long long)(S * B->D), NK, (long long)B->Dv, vm);
    bwd_store_dkdv(L, B, c, "    ");
}

/* The 16-bit path's dQ step (attn_bwd_dq_tma): a program per block of BM query rows,
 * Q and dO loaded once, one loop over the key blocks (K and V the ring's blocks); three
 * dots: as dK/dV's, ws by the default config. */
static void bwd_dq16(Low *L, const Bwd *B)
{
    FILE *o = L->o;
    const char **qc = arena_alloc(L->a, (B->nb + 1) * sizeof *qc), **kc = arena_alloc(L->a, (B->nb + 1) * sizeof *kc);
    fputs("    let qb = pid % nqb;\n    let bt = pid / nqb;\n", o);
    bwd_coords(L, B->ot, B->nb, "bt", "b", qc, "    ");
    for (uint32_t d = 0; d < B->nb; d++) kc[d] = qc[d];
    if (B->G > 1) kc[B->nb - 1] = arena_printf(L->a, "(b%u / %lld)", B->nb - 1, (long long)B->G);
    fputs("    let rm = (qb as i32) * BM + arange(0, BM);\n", o);
    bwd_query_block(L, B, qc, "qb * (BM as i64)", "BM", "    ");
    fprintf(o, "    var dqa = zeros([BM, %lld], f32);\n", (long long)B->bd);
    fprintf(o, "    for j in range(%s, %s, BN as i64) {\n        let rn = (j as i32) + arange(0, BN);\n", bwd_key_lo(L, B),
            bwd_key_hi(L, B));
    bwd_key_block(L, B, kc, "j", "BN", "        ");
    fprintf(o, "        let seen = %s & (lr > -inf)[:, None];\n", bwd_seen(L, B, "rm[:, None]", "rn[None, :]"));
    fprintf(o, "        let p = where(seen, exp2(fma(dot(qt, trans(kt)), qk, -lq[:, None]), ftz = true), 0.0);\n"
               "        let ds = p * (dot(dot_, trans(vt)) - delta[:, None]);\n"
               "        dqa = dot(ds as %s, kt, dqa);\n    }\n", B->half);
    bwd_store_dq(L, B, qc, "    ");
}

/* The scalars every program of a step uses. */
static void bwd_prelude(Low *L, const Bwd *B)
{
    fprintf(L->o, "    let sc = %s as f32;\n    let ed = arange(0, %lld);\n    let ev = arange(0, %lld);\n", B->scale,
            (long long)B->bd, (long long)B->bdv);
    if (B->half)
        fprintf(L->o, "    let qk = sc * 1.4426950408889634;\n    let doff = cdiv(%s, 8) * 4;\n    let lq32 = %s as i32;\n"
                      "    let lk32 = %s as i32;\n", size_expr(L, numel(L, B->ot, 0, B->ot->rank)), B->Lq, B->Lk);
    if (B->half && L->K->bwd_split)   /* the split regime's partials: past delta, 16-byte aligned */
        fprintf(L->o, "    let poff = doff + cdiv(%s, 4) * 4;\n", size_expr(L, numel(L, B->ot, 0, B->nb + 1)));
    if (B->bd != B->D) fprintf(L->o, "    let dmask = ed < %lld;\n", (long long)B->D);
    if (B->bdv != B->Dv) fprintf(L->o, "    let vmask = ev < %lld;\n", (long long)B->Dv);
}

/* The 16-bit path: three steps, run once each in order (a chunk of one row of one,
 * PassGKernel.steps, runtime/rt_tgraph.c): _pre writes the scratch (dO in q's type,
 * delta) that _dkdv and _dq read; with IrGKernel.bwd_split a fourth, _sum, which adds
 * the partials _dkdv leaves in the split regime (an empty grid outside it). Block sizes and launch as examples/flash_attn_bwd.tile's
 * _tma defaults at d 128: dK/dV 64 queries a step for 128 keys, dQ 128 queries for 64
 * keys, 8 warps, 3 stages, ws (a producer warpgroup filling the TMA rings). */
static bool lower_attention_bwd16(Low *L, const Bwd *B, const char *name)
{
    IrSize nb = numel(L, B->ot, 0, B->nb), nkv = numel(L, B->kt, 0, B->nb);
    Sig sg[4];
    memset(sg, 0, sizeof sg);
    static const char *const sfx[4] = {"pre", "dkdv", "dq", "sum"};
    bwd_pre(L, B, arena_printf(L->a, "%s_pre", name), &sg[0]);
    const char *nkb = arena_printf(L->a, "cdiv(%s, BN as i64)", B->Lk);
    const char *nqb = arena_printf(L->a, "cdiv(%s, BM as i64)", B->Lq);
    for (int k = 1; k < 3; k++) {
        autotune(L, "BM: [16, 32, 64, 128], BN: [16, 32, 64, 128], warps: [4, 8], stages: [1, 2, 3], ws: [0, 1]",
                 "BM * BN <= 128 * 128",
                 k == 1 ? "BM: 64, BN: 128, warps: 8, stages: 3, ws: 1" : "BM: 128, BN: 64, warps: 8, stages: 3, ws: 1");
        signature(L, &sg[k], arena_printf(L->a, "%s_%s", name, sfx[k]));
        bwd_scratch_params(L, B, &sg[k]);
        const char *more = k == 1 && L->K->bwd_split   /* the split regime: S programs a key block */
                               ? arena_printf(L->a, " * (1 + %lld * ((%s <= %lld) as i64))", (long long)(L->K->bwd_split - 1),
                                              size_expr(L, numel(L, B->kt, 0, B->nb + 1)),
                                              (long long)ir_bwd_split_rows(L->g))
                               : "";
        fprintf(L->o, ", const BM: i32 = %d, const BN: i32 = %d)\n    grid(%s * %s%s)\n{\n", k == 1 ? 64 : 128, k == 1 ? 128 : 64,
                k == 1 ? nkb : nqb, size_expr(L, k == 1 ? nkv : nb), more);
        fprintf(L->o, "    let pid = program_id(0) as i64;\n    let %s = %s;\n", k == 1 ? "nkb" : "nqb", k == 1 ? nkb : nqb);
        bwd_prelude(L, B);
        if (k == 1) bwd_dkdv16(L, B);
        else bwd_dq16(L, B);
        fputs("}\n\n", L->o);
    }
    uint32_t ns = 3;
    if (L->K->bwd_split) {   /* the split regime's sums of the partials */
        const char *NK = size_expr(L, numel(L, B->kt, 0, B->nb + 1));
        autotune(L, "BR: [16, 32, 64, 128], warps: [2, 4, 8]", "BR >= warps", "BR: 32, warps: 4");
        signature(L, &sg[3], arena_printf(L->a, "%s_sum", name));
        bwd_scratch_params(L, B, &sg[3]);
        fprintf(L->o, ", const BR: i32 = 32)\n    grid(cdiv(%s, BR as i64) * ((%s <= %lld) as i64))\n{\n", NK, NK,
                (long long)ir_bwd_split_rows(L->g));
        fputs("    let pid = program_id(0) as i64;\n", L->o);
        bwd_prelude(L, B);
        bwd_dkdv_sum(L, B);
        fputs("}\n\n", L->o);
        ns = 4;
    }
    PassGKernel *steps = arena_alloc(L->a, ns * sizeof *steps);
    for (uint32_t i = 0; i < ns; i++) {
        step_of(L, &steps[i], arena_printf(L->a, "%s_%s", name, sfx[i]), &sg[i]);
    }
    L->out->steps = steps;
    L->out->nsteps = ns;
    L->out->chunk = 1;
    L->out->rows = ir_size_const(1);
    return true;
}

static bool lower_attention_bwd(Low *L, Sig *sig, const char *name)
{
    if (L->K->nops != 1) return fail(L, "attention_bwd fused with other ops");
    Space top = {.rank = 0};
    scope(L, &top, "    ");
    Bwd B;
    long pos = ftell(L->o);
    if (!bwd_read(L, &L->g->ops.data[L->K->ops[0]], &B)) return false;
    if (ftell(L->o) != pos) return fail(L, "attention_bwd whose scale is computed");
    if (B.half) return lower_attention_bwd16(L, &B, name);
    IrSize nb = numel(L, B.ot, 0, B.nb), nkv = numel(L, B.kt, 0, B.nb);
    autotune(L, "BM: [16, 32, 64], BN: [16, 32, 64], warps: [4, 8]", "BM * BN <= 64 * 64", "BM: 32, BN: 32, warps: 4");
    signature(L, sig, name);
    const char *nkb = arena_printf(L->a, "cdiv(%s, BN as i64)", B.Lk);
    const char *nqb = arena_printf(L->a, "cdiv(%s, BM as i64)", B.Lq);
    fprintf(L->o, ", const BM: i32 = 32, const BN: i32 = 32)\n    grid(%s * %s + %s * %s)\n{\n", nkb, size_expr(L, nkv), nqb,
            size_expr(L, nb));
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let nkb = %s;\n    let nqb = %s;\n    let NKV = %s;\n", nkb, nqb,
            size_expr(L, nkv));
    bwd_prelude(L, &B);
    fputs("    if pid < nkb * NKV {\n", L->o);
    bwd_dkdv(L, &B);
    fputs("    } else {\n", L->o);
    bwd_dq(L, &B);
    fputs("    }\n}\n", L->o);
    return true;
}

/* ---- cross_entropy: every row's logsumexp and label logit, never its softmax ------------------ */

/* A program per block of BM rows (grid cdiv(N, BM)); for its rows it loops over the
 * vocabulary BV columns at a time keeping, per row, the running max m, the sum s of
 * exp(x - m) (rescaled when m grows, as flash attention does) and the label's logit
 * (rows: the loss) - a program never holds a whole row. cross_entropy_rows stores each
 * row's loss log(s) + m - x[label] (0 on an ignored row; the mean is the graph's sum /
 * count after it, a fixed-order reduction, no atomics); cross_entropy_grad loops over
 * the vocabulary a second time and stores (exp(x - m) / s - onehot(label)) * dy[row] (0
 * on an ignored row). A label outside [0, V) matches no column: its logit counts as 0
 * (the interpreter reports it). */
static void ce_stats(Low *L, uint32_t x, const char *V, const char *A, bool label)
{
    fprintf(L->o, "    var m = full([BM], -inf, %s);\n    var s = zeros([BM], %s);\n", A, A);
    if (label) fprintf(L->o, "    var xl = zeros([BM], %s);\n", A);
    fprintf(L->o, "    for j in range(0, %s, BV as i64) {\n        let cj = j + arange(0, BV);\n", V);
    fprintf(L->o, "        let ok = rin[:, None] & (cj[None, :] < %s);\n", V);
    fprintf(L->o, "        let xb = where(ok, load(p%u + %s + %s, ok, 0) as %s, -inf as %s);\n", x,
            times(L, "rm[:, None]", stride_of(L, x, 0)), times(L, "cj[None, :]", stride_of(L, x, 1)), A, A);
    fputs("        let mn = maximum(m, max(xb, 1));\n", L->o);
    fprintf(L->o, "        let alpha = where(m == (-inf as %s), 0 as %s, exp(m - mn));\n", A, A);
    fprintf(L->o, "        s = s * alpha + sum(where(ok, exp(xb - mn[:, None]), 0 as %s), 1);\n", A);
    if (label) fprintf(L->o, "        xl = xl + sum(where(cj[None, :] == (lab as i64)[:, None], xb, 0 as %s), 1);\n", A);
    fputs("        m = mn;\n    }\n", L->o);
}

static void ce_grad_loop(Low *L, const IrGOp *op, const char *V, const char *A, const char *E)
{
    uint32_t x = op->in[0], d = op->in[3], o = op->out[0];
    fprintf(L->o, "    let dr = where(kept, load(p%u + %s, rin, 0) as %s / s, 0 as %s);\n", d, times(L, "rm", stride_of(L, d, 0)),
            A, A);
    fprintf(L->o, "    for j in range(0, %s, BV as i64) {\n        let cj = j + arange(0, BV);\n", V);
    fprintf(L->o, "        let ok = rin[:, None] & (cj[None, :] < %s);\n", V);
    fprintf(L->o, "        let xb = load(p%u + %s + %s, ok, 0) as %s;\n", x, times(L, "rm[:, None]", stride_of(L, x, 0)),
            times(L, "cj[None, :]", stride_of(L, x, 1)), A);
    fprintf(L->o, "        let hot = where(cj[None, :] == (lab as i64)[:, None], s[:, None], 0 as %s);\n", A);
    fprintf(L->o, "        let g = where(kept[:, None], (exp(xb - m[:, None]) - hot) * dr[:, None], 0 as %s);\n", A);
    fprintf(L->o, "        store(%s + rm[:, None] * %s + cj[None, :], g as %s, ok);\n    }\n", pname(L, o), V, E);
}

static bool lower_cross_entropy(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    if (L->K->nops != 1) return fail(L, "cross_entropy fused with other ops");
    bool rows = op->kind == IR_GOP_CROSS_ENTROPY_ROWS;
    uint32_t x = op->in[0], lab = op->in[1];
    const IrTensorType *tx = vt(L, x);
    const char *N = size_expr(L, tx->dims[0]), *V = size_expr(L, tx->dims[1]);
    const char *E = ename(vt(L, op->out[0])->elem);
    const char *A = ename(rows ? vt(L, op->out[0])->elem : vt(L, op->in[3])->elem);
    int64_t bv = block_for(tx->dims[1], 16, 1024), bm = 4096 / bv > 16 ? 16 : 4096 / bv;
    autotune(L, "BM: [1, 2, 4, 8, 16], BV: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096], warps: [1, 2, 4, 8]",
             "BM * BV <= 16384", arena_printf(L->a, "BM: %lld, BV: %lld, warps: %d", (long long)bm, (long long)bv,
                                               bv >= 1024 ? 8 : 4));
    signature(L, s, name);
    fprintf(L->o, ", const BM: i32 = %lld, const BV: i32 = %lld)\n    grid(cdiv(%s, BM as i64))\n{\n", (long long)bm,
            (long long)bv, N);
    Space base = {.rank = 0};
    scope(L, &base, "    ");
    const char *ign = val(L, op->in[2]);
    if (!ign) return false;
    fputs("    let rm = (program_id(0) as i64) * (BM as i64) + arange(0, BM);\n", L->o);
    fprintf(L->o, "    let rin = rm < %s;\n", N);
    fprintf(L->o, "    let lab = load(p%u + %s, rin, 0);\n", lab, times(L, "rm", stride_of(L, lab, 0)));
    fprintf(L->o, "    let kept = rin & (lab != %s);\n", ign);
    ce_stats(L, x, V, A, rows);
    if (rows)
        fprintf(L->o, "    store(%s + rm, where(kept, log(s) + m - xl, 0 as %s) as %s, rin);\n", pname(L, op->out[0]), A, E);
    else
        ce_grad_loop(L, op, V, A, E);
    fputs("}\n", L->o);
    return true;
}

/* ---- rope: an element-wise kernel (rope is a root, graph_fuse: its element-wise
 * consumers are its epilogue) ---------------------------------------------------------------- */

/* y at the scope's coordinates (..., c): x there and at its partner in the pair (c + h
 * mod D), the tables at (..., c mod h), all loaded from memory (rope takes no prologue). */
static const char *rope_expr(Low *L, const IrGOp *op)
{
    for (uint32_t i = 0; i < 3; i++) {
        const IrGOp *d = defop(L, op->in[i]);
        if (d && L->mine[d - L->g->ops.data]) return fail(L, "rope's operand computed in its kernel"), NULL;
    }
    const IrTensorType *t = vt(L, op->out[0]);
    int64_t D = 0;
    ir_size_is_const(t->dims[t->rank - 1], &D);
    const Space *was = L->sp;
    const char *cl = was->coord[was->rank - 1], **pc = arena_alloc(L->a, was->rank * sizeof *pc),
               **tc = arena_alloc(L->a, was->rank * sizeof *tc);
    memcpy(pc, was->coord, was->rank * sizeof *pc);
    memcpy(tc, was->coord, was->rank * sizeof *tc);
    pc[was->rank - 1] = arena_printf(L->a, "((%s + %lld) %% %lld)", cl, (long long)(D / 2), (long long)D);
    tc[was->rank - 1] = arena_printf(L->a, "(%s %% %lld)", cl, (long long)(D / 2));
    Space part = *was, tab = *was;
    part.coord = pc;
    tab.coord = tc;
    part.flat = tab.flat = NULL;   /* other coordinates than the flat index's */
    const char *x = val(L, op->in[0]);
    L->sp = &part;
    const char *xp = x ? load_expr(L, op->in[0]) : NULL;
    L->sp = &tab;
    const char *c = xp ? load_expr(L, op->in[1]) : NULL, *s = c ? load_expr(L, op->in[2]) : NULL;
    L->sp = was;
    if (!s) return NULL;
    const char *A = ename(t->elem == IR_F64 ? IR_F64 : IR_F32), *E = ename(t->elem);
    uint32_t o = op->out[0];
    fprintf(L->o, "%slet rp%u = %s as %s;\n", L->indent, o, xp, A);
    return arena_printf(L->a, "((%s as %s) * (%s as %s) + where(%s < %lld, -rp%u, rp%u) * (%s as %s)) as %s", x, A, c, A, cl,
                        (long long)(D / 2), o, o, s, A, E);
}

/* ---- the optimizer step: lists of tensors in one launch ------------------------------------- */

static bool written(const Low *L, uint32_t v)
{
    for (uint32_t i = 0; i < L->K->nwrites; i++)
        if (L->K->writes[i] == v) return true;
    return false;
}

/* A block of parameter i of adamw (the lets of the scalars above): programs [lo, lo +
 * cdiv(n, BLOCK)) walk it, each its BLOCK elements, in the torch.optim.AdamW order. */
static void adamw_block(Low *L, const IrGOp *op, uint32_t n, uint32_t i, const char *lo, const char *hi, const char *E)
{
    const uint32_t b = IR_ADAMW_NSCALARS, p = op->in[b + i], g = op->in[b + n + i];
    const uint32_t m = op->in[b + 2 * n + i], v = op->in[b + 3 * n + i];
    fprintf(L->o, "    if pid >= %s && pid < %s {\n", lo, hi);
    fprintf(L->o, "        let offs = (pid - %s) * (BLOCK as i64) + arange(0, BLOCK);\n", lo);
    fprintf(L->o, "        let mask = offs < %s;\n", numel_expr(L, vt(L, p), 0));
    fprintf(L->o, "        let xp = load(%s + offs, mask, 0);\n        let xm = load(%s + offs, mask, 0);\n", pname(L, p), pname(L, m));
    fprintf(L->o, "        let xv = load(%s + offs, mask, 0);\n", pname(L, v));
    fprintf(L->o, "        let xg = (load(%s + offs, mask, 0) as %s) * gs;\n", pname(L, g), E);
    fputs("        let nm = where(w1 < 0.5, xm + w1 * (xg - xm), xg - (xg - xm) * (1 - w1));\n", L->o);
    fputs("        let nv = xv * b2 + (1 - b2) * xg * xg;\n", L->o);
    fputs("        let np = xp * decay - step_size * nm / (sqrt(nv) / bc2s + eps);\n", L->o);
    const char *res[3] = {"where(skip, xp, np)", "where(skip, xm, nm)", "where(skip, xv, nv)"};
    for (uint32_t k = 0; k < 3; k++) {
        uint32_t o = op->out[k * n + i];
        if (written(L, o)) fprintf(L->o, "        store(%s + offs, %s, mask);\n", pname(L, o), res[k]);
    }
    fputs("    }\n", L->o);
}

/* adamw: one program per BLOCK elements of one parameter, the parameters' blocks laid end
 * to end (a concatenated index space: one launch for every parameter, whatever their
 * sizes); a program finds its parameter by comparing its id with the running sums. */
static bool lower_adamw(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    const uint32_t n = (op->nin - IR_ADAMW_NSCALARS) / 4;
    const char *E = ename(vt(L, op->in[0])->elem), **ends = arena_alloc(L->a, (n + 1) * sizeof *ends);
    ends[0] = "0";
    for (uint32_t i = 0; i < n; i++) {
        const char *nb = arena_printf(L->a, "cdiv(%s, BLOCK as i64)", numel_expr(L, vt(L, op->in[IR_ADAMW_NSCALARS + i]), 0));
        ends[i + 1] = i ? arena_printf(L->a, "%s + %s", ends[i], nb) : nb;
    }
    autotune(L, "BLOCK: [256, 512, 1024, 2048], warps: [2, 4, 8]", "BLOCK >= 32 * warps", "BLOCK: 1024, warps: 4");
    signature(L, s, name);
    fprintf(L->o, ", const BLOCK: i32 = 1024)\n    grid(%s)\n{\n", ends[n]);
    Space base = {.rank = 0};
    scope(L, &base, "    ");
    static const char *const sc[IR_ADAMW_NSCALARS] = {"lr", "b1", "b2", "eps", "wd", "t", "gs", "skip"};
    for (uint32_t k = 0; k < IR_ADAMW_NSCALARS; k++) {
        const char *x = val(L, op->in[k]);
        if (!x) return false;
        fprintf(L->o, "    let %s = %s;\n", sc[k], x);
    }
    fputs("    let pid = program_id(0) as i64;\n    let w1 = 1 - b1;\n    let decay = 1 - lr * wd;\n", L->o);
    fputs("    let step_size = lr / (1 - pow(b1, t));\n    let bc2s = sqrt(1 - pow(b2, t));\n", L->o);
    for (uint32_t i = 0; i < n; i++) adamw_block(L, op, n, i, ends[i], ends[i + 1], E);
    fputs("}\n", L->o);
    return true;
}

/* A step kernel's parameters (the LM head's chunk steps, grad_stats' two steps): the
 * values vs (pointers p<v>; scalar parameters by value, a<v>), the scratch ps of element
 * type S, the chunk's first row (off) and the row after its last (end), a chunk's rows
 * (cn = end - off: the LM head's), every size; its arguments in s. */
static void step_signature(Low *L, Sig *s, const char *name, const uint32_t *vs, uint32_t n, const char *S)
{
    fprintf(L->o, "kernel %s(", name);
    for (uint32_t i = 0; i < n; i++) {
        bool sc = scalar_param(L, vs[i]);
        fprintf(L->o, "%s%s%u: %s%s", i ? ", " : "", sc ? "a" : "p", vs[i], sc ? "" : "*", ename(vt(L, vs[i])->elem));
        vec_push(&s->args, ((PassGArg){sc ? PASS_GARG_SCALAR : PASS_GARG_PTR, vs[i]}));
    }
    fprintf(L->o, ", ps: *%s, off: i64, end: i64%s", S, L->K->chunk > 0 ? ", cn: i64" : "");
    vec_push(&s->args, ((PassGArg){PASS_GARG_SCRATCH, L->K->scratch}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_OFFSET, 0}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_END, 0}));
    if (L->K->chunk > 0) vec_push(&s->args, ((PassGArg){PASS_GARG_ROWS, 0}));
    for (uint32_t i = 0; i < L->g->nsizes; i++) {
        fprintf(L->o, ", s_%s: i64", L->g->sizes[i]);
        vec_push(&s->args, ((PassGArg){PASS_GARG_SIZE, i}));
    }
}

/* The loop of a grad_stats kernel's first step over tensor g: this program's blocks of
 * it (pid, pid + P, pid + 2P, ... of BLOCK elements), each global_norm's sum of squares
 * of g times its scale (rounded to g's type, as unscaled gradients are stored) and the
 * count of elements that are not finite. */
static void stats_loop(Low *L, uint32_t g, const char *A, bool norm, bool inf)
{
    const char *n = numel_expr(L, vt(L, g), 0);
    fprintf(L->o, "    for k in range(pid * (BLOCK as i64), %s, %u * (BLOCK as i64)) {\n", n, L->K->partials);
    fprintf(L->o, "        let offs = k + arange(0, BLOCK);\n        let mask = offs < %s;\n", n);
    fprintf(L->o, "        let x = load(%s + offs, mask, 0);\n", pname(L, g));
    if (inf) fprintf(L->o, "        bad = bad + sum(where(isfinite(x as f32), 0 as %s, 1 as %s), 0);\n", A, A);
    for (uint32_t j = 0; norm && j < L->K->nops; j++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[j]];
        if (op->kind != IR_GOP_GLOBAL_NORM) continue;
        fprintf(L->o, "        let y%u = ((x as %s) * s%u) as %s as %s;\n", j, A, j, ename(vt(L, g)->elem), A);
        fprintf(L->o, "        acc%u = acc%u + sum(y%u * y%u, 0);\n", j, j, j, j);
    }
    fputs("    }\n", L->o);
}

/* found_inf and global_norm over one list (fusion rule 8), in two steps: `_partial`, P =
 * IrGKernel.partials programs, each walking a strided share of every tensor and storing
 * its count of non-finite elements and each norm's sum of squares in its column of the
 * scratch ([stats, P], the result's type); `_total`, one program adding each row of P in
 * a fixed order (a tree sum): the same sums on every run, and the whole GPU reads the
 * gradients (one program read them at one SM's bandwidth). */
static bool lower_grad_stats(Low *L, Sig *sig, const char *name)
{
    (void)sig;
    const IrGOp *op0 = &L->g->ops.data[L->K->ops[0]];
    const uint32_t *list = op0->in + (op0->kind == IR_GOP_GLOBAL_NORM);
    uint32_t n = op0->nin - (op0->kind == IR_GOP_GLOBAL_NORM), P = L->K->partials;
    if (!P) return fail(L, "a grad_stats kernel without its partial sums");
    const char *A = ename(ir_gstats_elem(L->g, L->K));
    bool norm = false, inf = false;
    for (uint32_t j = 0; j < L->K->nops; j++) inf |= L->g->ops.data[L->K->ops[j]].kind == IR_GOP_FOUND_INF;
    PassGKernel *steps = arena_alloc(L->a, 3 * sizeof *steps);
    /* step 1: the partial sums */
    const char *sn = arena_printf(L->a, "%s_partial", name);
    Sig args = {0};
    fprintf(L->o, "// step partial: %u programs' sums\n", P);
    autotune(L, "BLOCK: [256, 512, 1024, 2048, 4096], warps: [4, 8, 16]", "BLOCK >= 32 * warps", "BLOCK: 2048, warps: 8");
    step_signature(L, &args, sn, L->K->reads, L->K->nreads, A);
    fprintf(L->o, ", const BLOCK: i32 = 2048)\n    grid(%u)\n{\n    let pid = program_id(0) as i64;\n", P);
    if (inf) fprintf(L->o, "    var bad = 0 as %s;\n", A);
    Space base = {.rank = 0};
    scope(L, &base, "    ");
    for (uint32_t j = 0; j < L->K->nops; j++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[j]];
        if (op->kind != IR_GOP_GLOBAL_NORM) continue;
        const char *x = val(L, op->in[0]);
        if (!x) return false;
        norm = true;
        fprintf(L->o, "    let s%u = %s;\n    var acc%u = 0 as %s;\n", j, x, j, A);
    }
    for (uint32_t i = 0; i < n; i++) stats_loop(L, list[i], A, norm, inf);
    for (uint32_t j = 0; j < L->K->nops; j++)
        fprintf(L->o, "    store(ps + %u + pid, %s);\n", j * P,
                L->g->ops.data[L->K->ops[j]].kind == IR_GOP_GLOBAL_NORM ? arena_printf(L->a, "acc%u", j) : "bad");
    fputs("}\n", L->o);
    step_of(L, &steps[0], sn, &args);
    /* step 2: their sums, in one program */
    sn = arena_printf(L->a, "%s_total", name);
    Sig targs = {0};
    fprintf(L->o, "\n// step total: the sum of each row of %u partial sums\n", P);
    step_signature(L, &targs, sn, L->K->writes, L->K->nwrites, A);
    fprintf(L->o, ")\n    grid(1)\n{\n    let r = arange(0, %u);\n", P);
    for (uint32_t j = 0; j < L->K->nops; j++) {
        const IrGOp *op = &L->g->ops.data[L->K->ops[j]];
        if (!written(L, op->out[0])) continue;
        const char *t = arena_printf(L->a, "sum(load(ps + %u + r), 0)", j * P);
        if (op->kind == IR_GOP_GLOBAL_NORM) fprintf(L->o, "    store(%s, sqrt(%s));\n", pname(L, op->out[0]), t);
        else fprintf(L->o, "    store(%s, %s > (0 as %s));\n", pname(L, op->out[0]), t, A);
    }
    fputs("}\n", L->o);
    return two_steps(L, steps, sn, &targs);
}

/* ---- linear_cross_entropy: the LM head in chunks of rows, never all [N, V] logits ----------- */

#define LCE_GEMM_SPACE_ROWS "BM: [16, 32, 64, 128], BV: [16, 32, 64, 128], BK: [16, 32, 64], warps: [4, 8], stages: [2, 3, 4]"
#define LCE_GEMM_SPACE "BM: [16, 32, 64, 128], BN: [16, 32, 64, 128, 256], BK: [16, 32, 64], warps: [4, 8], stages: [2, 3, 4]"

/* A [BK, BN] block at rows k and columns c of w [D, V] (wt false), or of trans(w) [V, D]
 * (wt true), read through w's strides as a block load: the contiguous axis last (a torch
 * Linear weight [V, D] seen as w through a transposition is read as its own rows), so
 * that TMA can copy it (docs/CODEGEN.md section 9). */
static const char *lce_w_block(Low *L, uint32_t w, const char *D, const char *V, bool wt, const char *k, const char *c)
{
    const char *w0 = stride_of(L, w, 0), *w1 = stride_of(L, w, 1);
    if (!strcmp(w1, "1") && strcmp(w0, "1"))   /* rows of V contiguous: w's block, or its transposition */
        return wt ? arena_printf(L->a, "trans(load_block(p%u, [%s, %s], [%s, 1], [%s, %s], [BN, BK]))", w, D, V, w0, c, k)
                  : arena_printf(L->a, "load_block(p%u, [%s, %s], [%s, 1], [%s, %s], [BK, BN])", w, D, V, w0, k, c);
    if (!strcmp(w0, "1") && strcmp(w1, "1"))   /* columns contiguous: the [V, D] rows of a Linear weight */
        return wt ? arena_printf(L->a, "load_block(p%u, [%s, %s], [%s, 1], [%s, %s], [BK, BN])", w, V, D, w1, k, c)
                  : arena_printf(L->a, "trans(load_block(p%u, [%s, %s], [%s, 1], [%s, %s], [BN, BK]))", w, V, D, w1, c, k);
    return wt ? arena_printf(L->a, "trans(load_block(p%u, [%s, %s], [%s, %s], [%s, %s], [BN, BK]))", w, D, V, w0, w1, c, k)
              : arena_printf(L->a, "load_block(p%u, [%s, %s], [%s, %s], [%s, %s], [BK, BN])", w, D, V, w0, w1, k, c);
}

/* The three GEMM steps on bf16 x and w, every operand a block load (TMA rings on sm_90a):
 * st 0 the chunk's logits x[off:end] @ w into the bf16 scratch [cn, V] (cn = end - off,
 * the chunk's rows: C, or every row as one chunk), st 2 its dx = g @ trans(w) into rows
 * off..end of the bf16 dx, st 3 dw += trans(x[off:end]) @ g. Rows past the chunk read
 * zeros (x's block shape ends at `end`; the scratch's at cn) and are never written (dx's
 * block shape ends at `end`). Products on bf16 operands with f32 accumulators, rounded as
 * the bf16 gradient rules round theirs (ir/graph.h): dx each chunk, dw once, the earlier
 * chunks' sums kept in f32 at pa (IrGKernel.dw_sum: only where the rows may be more than
 * IrGKernel.whole; one chunk, off 0 and end the rows, stores the bf16 dw at once). */
static void lce_gemm_half(Low *L, int st, uint32_t x, uint32_t w, uint32_t out, const char *N, const char *D,
                          const char *V, const char *C_s)
{
    FILE *o = L->o;
    const char *x0 = stride_of(L, x, 0), *Cn = st == 2 ? D : V;
    fprintf(o, "    let pid = program_id(0) as i64;\n    let nbn = cdiv(%s, BN as i64);\n", Cn);
    tile_order(L, "pid", arena_printf(L->a, "cdiv(%s, BM as i64)", st == 3 ? D : C_s), "    ");
    fputs("    let om = pm * (BM as i64);\n    let on = q * (BN as i64);\n", o);
    fputs("    var acc = zeros([BM, BN], f32);\n", o);
    if (st == 0) {
        fprintf(o, "    for k in range(0, %s, BK as i64) {\n", D);
        fprintf(o, "        let at = load_block(p%u, [end, %s], [%s, 1], [off + om, k], [BM, BK]);\n", x, D, x0);
        fprintf(o, "        let bt = %s;\n", lce_w_block(L, w, D, V, false, "k", "on"));
    } else if (st == 2) {
        fprintf(o, "    for j in range(0, %s, BK as i64) {\n", V);
        fprintf(o, "        let at = load_block(ps, [%s, %s], [%s, 1], [om, j], [BM, BK]);\n", C_s, V, V);
        fprintf(o, "        let bt = %s;\n", lce_w_block(L, w, D, V, true, "j", "on"));
    } else {
        fputs("    for i in range(0, end - off, BK as i64) {\n", o);
        fprintf(o, "        let at = trans(load_block(p%u, [end, %s], [%s, 1], [off + i, om], [BK, BM]));\n", x, D, x0);
        fprintf(o, "        let bt = load_block(ps, [%s, %s], [%s, 1], [i, on], [BK, BN]);\n", C_s, V, V);
    }
    fputs("        acc = dot(at, bt, acc);\n    }\n", o);
    if (st == 0) {
        fprintf(o, "    store_block(ps, [%s, %s], [%s, 1], [om, on], acc as bf16);\n}\n", C_s, V, V);
    } else if (st == 2) {   /* dx, bf16 (ir_lce_grad_elem) */
        fprintf(o, "    store_block(p%u, [end, %s], [%s, 1], [off + om, on], acc as bf16);\n}\n", out, D, D);
    } else if (!L->K->dw_sum) {   /* dw of the one chunk there is: bf16 at once */
        fprintf(o, "    store_block(p%u, [%s, %s], [%s, 1], [om, on], acc as bf16);\n}\n", out, D, V, V);
    } else {   /* dw: what the earlier chunks left (f32 sums at pa) plus this chunk's, bf16 after the last */
        /* the first chunk stores its sum as it is (one chunk: the common case, without
         * a second [BM, BN] tile beside the accumulator, which spilled 64 bytes), by
         * block stores (TMA through one staging area for both branches,
         * passes/tmastore.c: on an H100, 1024 rows, D 4096, V 32000, 0.403 ms against
         * 0.536 with the pointer stores, level with cuBLAS); the later chunks add what
         * the earlier ones left element by element (the f32 tile loaded whole beside the
         * accumulator spilled) */
        fprintf(o, "    if off == 0 {\n        if end >= %s {\n", N);
        fprintf(o, "            store_block(p%u, [%s, %s], [%s, 1], [om, on], acc as bf16);\n", out, D, V, V);
        fprintf(o, "        } else {\n            store_block(pa, [%s, %s], [%s, 1], [om, on], acc);\n        }\n", D, V, V);
        fputs("    } else {\n", o);
        fprintf(o, "        let rd = om + arange(0, BM);\n        let rn = on + arange(0, BN);\n");
        fprintf(o, "        let mk = (rd[:, None] < %s) & (rn[None, :] < %s);\n", D, V);
        fprintf(o, "        let ix = rd[:, None] * %s + rn[None, :];\n", V);
        fputs("        let tot = load(pa + ix, mk, 0) + acc;\n", o);
        fprintf(o, "        if end >= %s {\n            store(p%u + ix, tot as bf16, mk);\n", N, out);
        fputs("        } else {\n            store(pa + ix, tot, mk);\n        }\n    }\n}\n", o);
    }
}

/* The GEMM steps' common top: program pid's [BM, BN] tile over columns Cn, a its row
 * and b its column coordinates, mb the columns' mask. */
static void lce_tile(Low *L, const char *Cn, const char *a, const char *b)
{
    fprintf(L->o, "    let pid = program_id(0) as i64;\n    let nbn = cdiv(%s, BN as i64);\n", Cn);
    fprintf(L->o, "    let %s = (pid / nbn) * (BM as i64) + arange(0, BM);\n", a);
    fprintf(L->o, "    let %s = (pid %% nbn) * (BN as i64) + arange(0, BN);\n", b);
    fprintf(L->o, "    let rk = arange(0, BK);\n    let mb = %s < %s;\n", b, Cn);
}

/* The steps of a chunk of C rows (off its first): logits (x_c @ w into the scratch,
 * rounded to x's type as the matmul it replaces), loss (each row's logsumexp by an online
 * max and sum over BV columns at a time, its loss stored, then its gradient (softmax -
 * onehot) * dy written over its logits), dx (dx_c = g @ trans(w)), dw (trans(x_c) @ g
 * added to what the earlier chunks left: every dw tile belongs to one program, the
 * chunks run in order, no atomics). The scratch is of ir_lce_scratch_elem's type, dx and dw
 * of ir_lce_grad_elem's (bf16 for a bf16 head: lce_gemm_half). */
static bool lower_lce(Low *L, Sig *sig, const char *name)
{
    (void)sig;
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    if (L->K->nops != 1 || L->K->chunk <= 0) return fail(L, "linear_cross_entropy fused with other ops");
    uint32_t x = op->in[IR_LCE_X], w = op->in[IR_LCE_W], lab = op->in[IR_LCE_LABELS], dy = op->in[IR_LCE_DY];
    const IrGOp *ig = defop(L, op->in[IR_LCE_IGNORE]);
    if (!ig || ig->kind != IR_GOP_CONST) return fail(L, "linear_cross_entropy: an ignore_index that is not a constant");
    const IrTensorType *tx = vt(L, x), *tw = vt(L, w);
    const char *N = size_expr(L, tx->dims[0]), *D = size_expr(L, tx->dims[1]), *V = size_expr(L, tw->dims[1]);
    const char *E = ename(tx->elem), *A = ename(vt(L, dy)->elem), *LT = ename(vt(L, lab)->elem);
    /* the chunk's rows from its bounds: chunks of C rows, or one of every row (at most
     * IrGKernel.whole: the scratch then [N, V]) */
    long long C = (long long)L->K->chunk;
    const char *C_s = "cn";
    /* bf16 x and w: g rounded to bf16 in the scratch, dx and dw products on bf16 operands
     * (tensor cores), rounded to bf16 as the gradient rules' bf16 products (ir/graph.h) */
    bool half = tx->elem == IR_BF16;
    const char *S = ename(ir_lce_scratch_elem(L->g, op)), *up = half ? arena_printf(L->a, " as %s", A) : "";
    /* x and w through their strides: w may be a transposition view of a torch Linear
     * weight [V, D] (fusion: the trans is no kernel) */
    const char *x0 = stride_of(L, x, 0), *x1 = stride_of(L, x, 1), *w0 = stride_of(L, w, 0), *w1 = stride_of(L, w, 1);
    int64_t bn = block_for(tw->dims[1], 16, 128), bkd = block_for(tx->dims[1], 16, 64), bd = block_for(tx->dims[1], 16, 128);
    int64_t bm = L->K->chunk >= 64 ? 64 : pow2_at_least(L->K->chunk, 16, 64), bkc = L->K->chunk >= 32 ? 32 : 16;
    int64_t bv = block_for(tw->dims[1], 16, 1024), bmr = 4096 / bv > 16 ? 16 : 4096 / bv;
    PassGKernel *steps = arena_alloc(L->a, 5 * sizeof *steps);
    uint32_t n = 0;
    static const char *const what[4] = {"logits", "loss", "dx", "dw"};
    for (uint32_t st = 0; st < 4; st++) {
        uint32_t out = st == 1 ? op->out[0] : st == 2 ? op->out[1] : st == 3 ? op->out[2] : IR_GNONE;
        if (st >= 2 && !written(L, out)) continue;   /* a gradient nothing reads */
        const char *sn = arena_printf(L->a, "%s_%s", name, what[st]);
        Sig args = {0};
        fprintf(L->o, "%s// step %s of the chunks of %lld rows (one chunk up to %s rows)\n", st ? "\n" : "", what[st], C,
                ir_size_str(L->a, L->K->whole));
        if (st == 1) {
            autotune(L, "BM: [1, 2, 4, 8, 16], BV: [16, 32, 64, 128, 256, 512, 1024, 2048, 4096], warps: [1, 2, 4, 8]",
                     "BM * BV <= 16384", arena_printf(L->a, "BM: %lld, BV: %lld, warps: %d", (long long)bmr, (long long)bv,
                                                       bv >= 1024 ? 8 : 4));
            bool rows = written(L, out);
            uint32_t vs[3] = {out, lab, dy}, nv = 3;
            step_signature(L, &args, sn, rows ? vs : vs + 1, rows ? nv : nv - 1, S);
            fprintf(L->o, ", const BM: i32 = %lld, const BV: i32 = %lld)\n    grid(cdiv(%s, BM as i64))\n{\n",
                    (long long)bmr, (long long)bv, C_s);
            fprintf(L->o, "    let rc = (program_id(0) as i64) * (BM as i64) + arange(0, BM);\n    let rm = off + rc;\n");
            fprintf(L->o, "    let rin = (rc < %s) & (rm < %s);\n    let lab = load(p%u + rm, rin, 0);\n", C_s, N, lab);
            fprintf(L->o, "    let kept = rin & (lab != (%lld as %s));\n", (long long)ig->attr.c.i, LT);
            fprintf(L->o, "    var m = full([BM], -inf, %s);\n    var s = zeros([BM], %s);\n    var xl = zeros([BM], %s);\n", A, A, A);
            fprintf(L->o, "    for j in range(0, %s, BV as i64) {\n        let cj = j + arange(0, BV);\n", V);
            fprintf(L->o, "        let ok = rin[:, None] & (cj[None, :] < %s);\n", V);
            fprintf(L->o, "        let xb = where(ok, load(ps + rc[:, None] * %s + cj[None, :], ok, 0)%s, -inf as %s);\n", V, up, A);
            fputs("        let mn = maximum(m, max(xb, 1));\n", L->o);
            fprintf(L->o, "        let alpha = where(m == (-inf as %s), 0 as %s, exp(m - mn));\n", A, A);
            fprintf(L->o, "        s = s * alpha + sum(where(ok, exp(xb - mn[:, None]), 0 as %s), 1);\n", A);
            fprintf(L->o, "        xl = xl + sum(where(cj[None, :] == (lab as i64)[:, None], xb, 0 as %s), 1);\n", A);
            fputs("        m = mn;\n    }\n", L->o);
            if (rows) fprintf(L->o, "    store(p%u + rm, where(kept, log(s) + m - xl, 0 as %s), rin);\n", out, A);
            fprintf(L->o, "    let dr = where(kept, load(p%u + rm, rin, 0) / s, 0 as %s);\n", dy, A);
            fprintf(L->o, "    for j in range(0, %s, BV as i64) {\n        let cj = j + arange(0, BV);\n", V);
            fprintf(L->o, "        let ok = rin[:, None] & (cj[None, :] < %s);\n", V);
            fprintf(L->o, "        let xb = load(ps + rc[:, None] * %s + cj[None, :], ok, 0)%s;\n", V, up);
            fprintf(L->o, "        let hot = where(cj[None, :] == (lab as i64)[:, None], s[:, None], 0 as %s);\n", A);
            fprintf(L->o, "        let g = where(kept[:, None], (exp(xb - m[:, None]) - hot) * dr[:, None], 0 as %s);\n", A);
            fprintf(L->o, "        store(ps + rc[:, None] * %s + cj[None, :], %s, ok);\n    }\n}\n", V, half ? "g as bf16" : "g");
        } else if (half) {
            /* one product per program at lower_matmul's tiles: 128 x 256 on 8 warps, 4 stages
             * (TMA rings), fewer rows for a chunk under 128 */
            int64_t hm = st == 3 ? block_for(tx->dims[1], 16, 128) : pow2_at_least(C, 16, 128);
            int64_t hn = block_for(st == 2 ? tx->dims[1] : tw->dims[1], 16, 256);
            int64_t hk = st == 3 ? pow2_at_least(C, 16, 64) : block_for(st == 0 ? tx->dims[1] : tw->dims[1], 16, 64);
            autotune(L, LCE_GEMM_SPACE, "BM * BN <= 128 * 256",
                     arena_printf(L->a, "BM: %lld, BN: %lld, BK: %lld, warps: %d, stages: %d", (long long)hm, (long long)hn,
                                  (long long)hk, hm * hn >= 128 * 128 ? 8 : 4, hm * hn >= 128 * 256 ? 4 : 3));
            uint32_t vs[2] = {st == 0 ? x : out, st == 3 ? x : w};
            step_signature(L, &args, sn, vs, 2, S);
            if (st == 3 && L->K->dw_sum) {   /* dw's f32 sums between the chunks (IrGKernel.sum) */
                fputs(", pa: *f32", L->o);
                vec_push(&args.args, ((PassGArg){PASS_GARG_SCRATCH, L->K->sum}));
            }
            fprintf(L->o, ", const BM: i32 = %lld, const BN: i32 = %lld, const BK: i32 = %lld)\n", (long long)hm,
                    (long long)hn, (long long)hk);
            fprintf(L->o, "    grid(cdiv(%s, BM as i64) * cdiv(%s, BN as i64))\n{\n", st == 3 ? D : C_s, st == 2 ? D : V);
            lce_gemm_half(L, (int)st, x, w, out, N, D, V, C_s);
        } else {
            /* f16, f32, f64 (pointer loads; the logits rounded to x's type, the gradient's
             * products in dy's): defaults without spills at Llama's sizes (D 4096, V 32000;
             * ptxas -v): the logits on tensor cores 64 x 128 with 8 warps, the f32 gradient's
             * GEMMs (FFMA) 64 x 64 */
            int64_t dbn = st == 0 ? bn : 64, dbm = st == 3 ? (bd < 64 ? bd : 64) : bm;
            int64_t dbk = st == 0 ? (bkd < 32 ? bkd : 32) : st == 2 ? 32 : bkc;
            if (st == 2 && dbn > bd) dbn = bd;
            if (st == 3 && dbn > bn) dbn = bn;
            autotune(L, LCE_GEMM_SPACE, "BM * BN <= 128 * 256",
                     arena_printf(L->a, "BM: %lld, BN: %lld, BK: %lld, warps: %d, stages: %d", (long long)dbm, (long long)dbn,
                                  (long long)dbk, st == 0 && dbm * dbn >= 64 * 64 ? 8 : 4, st == 0 ? 3 : 2));
            uint32_t vs[2] = {st == 0 ? x : out, st == 3 ? x : w};   /* logits: x, w; dx: dx, w; dw: dw, x */
            step_signature(L, &args, sn, vs, 2, A);
            const char *R = st == 3 ? D : C_s, *Cn = st == 2 ? D : V;
            fprintf(L->o, ", const BM: i32 = %lld, const BN: i32 = %lld, const BK: i32 = %lld)\n", (long long)dbm,
                    (long long)dbn, (long long)dbk);
            fprintf(L->o, "    grid(cdiv(%s, BM as i64) * cdiv(%s, BN as i64))\n{\n", R, Cn);
            lce_tile(L, Cn, st == 3 ? "rd" : "rc", "rn");
            if (st != 3) fprintf(L->o, "    let rm = off + rc;\n    let ma = (rc < %s) & (rm < %s);\n", C_s, N);
            else fprintf(L->o, "    let ma = rd < %s;\n", D);
            fprintf(L->o, "    var acc = zeros([BM, BN], %s);\n", A);
            if (st == 0) {
                fprintf(L->o, "    for k in range(0, %s, BK as i64) {\n        let ka = k + rk;\n", D);
                fprintf(L->o, "        let at = load(p%u + %s + %s, ma[:, None] & (ka[None, :] < %s), 0);\n", x,
                        times(L, "rm[:, None]", x0), times(L, "ka[None, :]", x1), D);
                fprintf(L->o, "        let bt = load(p%u + %s + %s, (ka[:, None] < %s) & mb[None, :], 0);\n", w,
                        times(L, "ka[:, None]", w0), times(L, "rn[None, :]", w1), D);
            } else if (st == 2) {
                fprintf(L->o, "    for j in range(0, %s, BK as i64) {\n        let ka = j + rk;\n", V);
                fprintf(L->o, "        let at = load(ps + rc[:, None] * %s + ka[None, :], ma[:, None] & (ka[None, :] < %s), 0);\n",
                        V, V);
                fprintf(L->o, "        let bt = load(p%u + %s + %s, (ka[:, None] < %s) & mb[None, :], 0) as %s;\n", w,
                        times(L, "rn[None, :]", w0), times(L, "ka[:, None]", w1), V, A);
            } else {
                fprintf(L->o, "    for i in range(0, %s, BK as i64) {\n        let ka = i + rk;\n        let gi = off + ka;\n", C_s);
                fprintf(L->o, "        let mi = (ka < %s) & (gi < %s);\n", C_s, N);
                fprintf(L->o, "        let at = load(p%u + %s + %s, ma[:, None] & mi[None, :], 0) as %s;\n", x,
                        times(L, "gi[None, :]", x0), times(L, "rd[:, None]", x1), A);
                fprintf(L->o, "        let bt = load(ps + ka[:, None] * %s + rn[None, :], mi[:, None] & mb[None, :], 0);\n", V);
            }
            fputs("        acc = dot(at, bt, acc);\n    }\n    let mk = ma[:, None] & mb[None, :];\n", L->o);
            if (st == 0)
                fprintf(L->o, "    store(ps + rc[:, None] * %s + rn[None, :], (acc as %s) as %s, mk);\n}\n", V, E, A);
            else if (st == 2)
                fprintf(L->o, "    store(p%u + rm[:, None] * %s + rn[None, :], acc, mk);\n}\n", out, D);
            else {
                fprintf(L->o, "    let at_dw = p%u + rd[:, None] * %s + rn[None, :];\n", out, V);
                fputs("    store(at_dw, load(at_dw, mk & (off > 0), 0) + acc, mk);\n}\n", L->o);
            }
        }
        step_of(L, &steps[n++], sn, &args);
    }
    L->out->steps = steps;
    L->out->nsteps = n;
    L->out->chunk = L->K->chunk;
    L->out->rows = tx->dims[0];
    L->out->whole = L->K->whole;
    return true;
}

/* linear_cross_entropy_rows (the forward alone): a program per BM rows walks the
 * vocabulary BV columns at a time; each block of logits is a GEMM over D (x's rows by
 * w's columns, in BK steps, rounded to x's type as the matmul it replaces), then the
 * online max, sum and label logit of cross_entropy_rows: the logits are never stored. */
static bool lower_lce_rows(Low *L, Sig *s, const char *name)
{
    const IrGOp *op = &L->g->ops.data[L->K->ops[0]];
    if (L->K->nops != 1) return fail(L, "linear_cross_entropy_rows fused with other ops");
    uint32_t x = op->in[IR_LCE_X], w = op->in[IR_LCE_W], lab = op->in[IR_LCE_LABELS], out = op->out[0];
    const IrGOp *ig = defop(L, op->in[IR_LCE_IGNORE]);
    if (!ig || ig->kind != IR_GOP_CONST) return fail(L, "linear_cross_entropy_rows: an ignore_index that is not a constant");
    const IrTensorType *tx = vt(L, x), *tw = vt(L, w);
    const char *N = size_expr(L, tx->dims[0]), *D = size_expr(L, tx->dims[1]), *V = size_expr(L, tw->dims[1]);
    const char *E = ename(tx->elem), *A = ename(vt(L, out)->elem), *LT = ename(vt(L, lab)->elem);
    int64_t bv = block_for(tw->dims[1], 16, 128), bk = block_for(tx->dims[1], 16, 32);
    autotune(L, LCE_GEMM_SPACE_ROWS, "BM * BV <= 128 * 128",
             arena_printf(L->a, "BM: 64, BV: %lld, BK: %lld, warps: 8, stages: 3", (long long)bv, (long long)bk));
    fprintf(L->o, "kernel %s(p%u: *%s, p%u: *%s, p%u: *%s, p%u: *%s", name, out, A, x, E, w, E, lab, LT);
    vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, out}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, x}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, w}));
    vec_push(&s->args, ((PassGArg){PASS_GARG_PTR, lab}));
    for (uint32_t i = 0; i < L->g->nsizes; i++) {
        fprintf(L->o, ", s_%s: i64", L->g->sizes[i]);
        vec_push(&s->args, ((PassGArg){PASS_GARG_SIZE, i}));
    }
    fprintf(L->o, ", const BM: i32 = 64, const BV: i32 = %lld, const BK: i32 = %lld)\n    grid(cdiv(%s, BM as i64))\n{\n",
            (long long)bv, (long long)bk, N);
    fputs("    let rm = (program_id(0) as i64) * (BM as i64) + arange(0, BM);\n    let rk = arange(0, BK);\n", L->o);
    fprintf(L->o, "    let rin = rm < %s;\n    let lab = load(p%u + rm, rin, 0);\n", N, lab);
    fprintf(L->o, "    let kept = rin & (lab != (%lld as %s));\n", (long long)ig->attr.c.i, LT);
    fprintf(L->o, "    var m = full([BM], -inf, %s);\n    var s = zeros([BM], %s);\n    var xl = zeros([BM], %s);\n", A, A, A);
    fprintf(L->o, "    for j in range(0, %s, BV as i64) {\n        let cj = j + arange(0, BV);\n", V);
    fprintf(L->o, "        let ok = rin[:, None] & (cj[None, :] < %s);\n        var acc = zeros([BM, BV], %s);\n", V, A);
    fprintf(L->o, "        for k in range(0, %s, BK as i64) {\n            let ka = k + rk;\n", D);
    fprintf(L->o, "            let at = load(p%u + %s + %s, rin[:, None] & (ka[None, :] < %s), 0);\n", x,
            times(L, "rm[:, None]", stride_of(L, x, 0)), times(L, "ka[None, :]", stride_of(L, x, 1)), D);
    fprintf(L->o, "            let bt = load(p%u + %s + %s, (ka[:, None] < %s) & (cj[None, :] < %s), 0);\n", w,
            times(L, "ka[:, None]", stride_of(L, w, 0)), times(L, "cj[None, :]", stride_of(L, w, 1)), D, V);
    fputs("            acc = dot(at, bt, acc);\n        }\n", L->o);
    fprintf(L->o, "        let xb = where(ok, (acc as %s) as %s, -inf as %s);\n", E, A, A);
    fputs("        let mn = maximum(m, max(xb, 1));\n", L->o);
    fprintf(L->o, "        let alpha = where(m == (-inf as %s), 0 as %s, exp(m - mn));\n", A, A);
    fprintf(L->o, "        s = s * alpha + sum(where(ok, exp(xb - mn[:, None]), 0 as %s), 1);\n", A);
    fprintf(L->o, "        xl = xl + sum(where(cj[None, :] == (lab as i64)[:, None], xb, 0 as %s), 1);\n", A);
    fputs("        m = mn;\n    }\n", L->o);
    fprintf(L->o, "    store(p%u + rm, where(kept, log(s) + m - xl, 0 as %s), rin);\n}\n", out, A);
    return true;
}

/* ---- the kinds ------------------------------------------------------------------------------ */

/* One row per plan kernel kind (IrGKernel.kind): a new kind is one function here. */
static const struct {
    const char *kind;
    bool (*lower)(Low *L, Sig *s, const char *name);
} kinds[] = {
    {"elementwise", lower_elementwise},
    {"matmul", lower_matmul},
    {"horizontal_matmul", lower_matmul},
    {"sum", lower_rows}, {"mean", lower_rows}, {"max", lower_rows}, {"min", lower_rows},
    {"argmax", lower_rows}, {"argmin", lower_rows}, {"any", lower_rows}, {"all", lower_rows},
    {"softmax", lower_rows}, {"layer_norm", lower_rows}, {"rms_norm", lower_rows},
    {"reshape", lower_shape}, {"trans", lower_shape}, {"concat", lower_shape}, {"split", lower_shape},
    {"cumsum", lower_scan}, {"cumprod", lower_scan},
    {"attention", lower_attention},
    {"conv2d", lower_conv},
    {"flash_attention", lower_flash},
    {"attention_bwd", lower_attention_bwd},
    {"cross_entropy_rows", lower_cross_entropy},
    {"cross_entropy_grad", lower_cross_entropy},
    {"linear_cross_entropy", lower_lce},
    {"linear_cross_entropy_rows", lower_lce_rows},
    {"rope", lower_elementwise},
    {"adamw", lower_adamw},
    {"found_inf", lower_grad_stats}, {"global_norm", lower_grad_stats}, {"grad_stats", lower_grad_stats},
};

static void lower_kernel(Low *L, uint32_t k, PassGKernel *out, FILE *module)
{
    char *text = NULL;
    size_t len = 0;
    L->o = open_memstream(&text, &len);
    if (!L->o) {
        out->why = "out of memory";
        return;
    }
    memset(L->mine, 0, L->g->ops.len * sizeof *L->mine);
    memset(L->kept, 0, L->g->values.len * sizeof *L->kept);
    L->top = false;
    for (uint32_t i = 0; i < L->K->nops; i++) L->mine[L->K->ops[i]] = true;
    Sig s = {0};
    bool ok = false, known = false;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0] && !known; i++)
        if (!strcmp(kinds[i].kind, L->K->kind)) known = true, ok = kinds[i].lower(L, &s, out->name);
    fclose(L->o);
    if (!known) L->why = arena_printf(L->a, "no lowering for kernels of kind '%s' yet", L->K->kind);
    out->why = ok ? NULL : L->why ? L->why : "not lowered";
    if (ok) fprintf(module, "\n// kernel k%u %s\n%s", k, L->K->kind, text);
    else fprintf(module, "\n// kernel k%u %s: not lowered (%s)\n", k, L->K->kind, out->why);
    PassGArg *args = arena_alloc(L->a, (s.args.len + 1) * sizeof *args);
    if (s.args.len) memcpy(args, s.args.data, s.args.len * sizeof *args);
    out->args = args;
    out->nargs = ok ? (uint32_t)s.args.len : 0;
    vec_free(&s.args);
    free(text);
}

const PassGLowered *pass_graph_lower(const IrGraph *g, const IrGPlan *plan, Arena *a)
{
    PassGLowered *l = arena_alloc(a, sizeof *l);
    PassGKernel *ks = arena_alloc(a, (plan->nkernels + 1) * sizeof *ks);
    char *text = NULL;
    size_t len = 0;
    FILE *module = open_memstream(&text, &len);
    Low L = {.g = g, .plan = plan, .a = a, .mine = arena_alloc(a, g->ops.len + 1), .done = arena_alloc(a, g->values.len + 1),
             .kept = arena_alloc(a, g->values.len + 1)};
    if (module) fprintf(module, "// The kernels of graph '%s' (passes/graph_lower.c).\n", g->name);
    for (uint32_t k = 0; k < plan->nkernels; k++) {
        if (plan->kernels[k].view) continue;   /* the operand's memory: no kernel */
        ks[k].name = arena_printf(a, "%s_k%u", g->name, k);
        L.K = &plan->kernels[k];
        L.why = NULL;
        L.chan = NULL;
        L.out = &ks[k];
        if (module) lower_kernel(&L, k, &ks[k], module);
        else ks[k].why = "out of memory";
    }
    if (module) fclose(module);
    *l = (PassGLowered){.source = arena_strdup(a, text ? text : ""), .nkernels = plan->nkernels, .kernels = ks};
    free(text);
    return l;
}

uint32_t pass_graph_unlowered(const PassGLowered *l, const char **why)
{
    for (uint32_t k = 0; k < l->nkernels; k++)
        if (l->kernels[k].why) return *why = l->kernels[k].why, k;
    return UINT32_MAX;
}
