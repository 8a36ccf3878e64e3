/* Printing a generated program as .tile source. Every binary operation is
 * parenthesized, so precedence never matters; literals are written so that they take
 * the type of the other operand (docs/LANGUAGE-REFERENCE.md, "Literals"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void print_node(const DtProgram *p, int n, DtStr *o);

static void print_literal(IrElem e, double v, DtStr *o)
{
    if (!ir_elem_is_float(e) && v >= 0x1p63) dt_str_add(o, "%llu", (unsigned long long)v);
    else if (!ir_elem_is_float(e)) dt_str_add(o, "%lld", (long long)v);
    else if (v == floor(v) && fabs(v) < 1e15) dt_str_add(o, "%.1f", v);
    else dt_str_add(o, "%.17g", v);
}

static void print_shape(const DtType *t, DtStr *o)
{
    dt_str_add(o, "[");
    for (int k = 0; k < t->rank; k++) dt_str_add(o, "%s%d", k ? ", " : "", t->shape[k]);
    dt_str_add(o, "]");
}

/* [:, None] style indexing that puts a 1-D tile on axis `axis` of a rank-r tile. */
static void print_axis_index(int rank, int axis, DtStr *o)
{
    if (rank <= 1) return;
    dt_str_add(o, "[");
    for (int k = 0; k < rank; k++) dt_str_add(o, "%s%s", k ? ", " : "", k == axis ? ":" : "None");
    dt_str_add(o, "]");
}

static void print_plin(const DtProgram *p, DtStr *o)
{
    if (p->ngrid == 1) dt_str_add(o, "program_id(0)");
    else if (p->ngrid == 2) dt_str_add(o, "(program_id(0) + %d * program_id(1))", p->grid[0]);
    else dt_str_add(o, "(program_id(0) + %d * (program_id(1) + %d * program_id(2)))", p->grid[0], p->grid[1]);
}

/* The combine fns of reduce and associative_scan (K_COMBINE), printed before the
 * kernel where it calls them. */
static const struct { const char *name, *text; } dt_fns[DT_NFNS] = {
    [DT_FN_ADD] = {"dt_add", "fn dt_add(a, b) { return a + b; }"},
    [DT_FN_MAX] = {"dt_max", "fn dt_max(a, b) { return maximum(a, b); }"},
    [DT_FN_MIN] = {"dt_min", "fn dt_min(a, b) { return minimum(a, b); }"},
    [DT_FN_XOR] = {"dt_xor", "fn dt_xor(a, b) { return a ^ b; }"},
    [DT_FN_FIRST] = {"dt_first", "fn dt_first(a, b) { return a; }"},
};

static void print_call(const DtProgram *p, const char *name, const DtNode *x, DtStr *o)
{
    dt_str_add(o, "%s(", name);
    for (int k = 0; k < x->nkids; k++) {
        if (k) dt_str_add(o, ", ");
        print_node(p, x->kid[k], o);
    }
}

/* Half of the rank-2 block loads whose offsets are not negative (bit 20 of the seed)
 * print as the masked pointer load of the same block, which passes/ptrblock.c makes a
 * block load again: the same values, coordinates below the tensor's end only. */
static bool pointer_form(const DtNode *x, const DtBlock *b)
{
    return x->t.rank == 2 && b->offs[0] >= 0 && b->offs[1] >= 0 && (x->j >> 20 & 1);
}

/* The coordinate of axis d of the block: (offset + arange(0, n)) */
static void print_block_coord(const DtNode *x, const DtBlock *b, int d, DtStr *o)
{
    dt_str_add(o, "(%s%lld + arange(0, %d))", d == 0 && b->pid ? "program_id(0) + " : "", (long long)b->offs[d],
               x->t.shape[d]);
}

/* load(in + c0[:, None] * s0 + c1[None, :] * s1, mask = (c0[:, None] < d0) & (c1[None, :] < d1), other = 0) */
static void print_block_pointers(const DtProgram *p, const DtNode *x, const DtBlock *b, DtStr *o)
{
    static const char *const side[2] = {"[:, None]", "[None, :]"};
    dt_str_add(o, "load(%s", p->bufs[x->i].name);
    for (int d = 0; d < 2; d++) {
        dt_str_add(o, " + ");
        print_block_coord(x, b, d, o);
        dt_str_add(o, "%s * %lld", side[d], (long long)b->strides[d]);
    }
    for (int d = 0; d < 2; d++) {
        dt_str_add(o, d ? " & " : ", mask = ");
        dt_str_add(o, "(");
        print_block_coord(x, b, d, o);
        dt_str_add(o, "%s < %lld)", side[d], (long long)b->dims[d]);
    }
    dt_str_add(o, ", other = ");
    print_literal(x->t.elem, 0, o);
    dt_str_add(o, ")");
}

static void print_leaf(const DtProgram *p, const DtNode *x, int kind, DtStr *o)
{
    static const char *const params[3] = {"L", "M", "fs"};
    switch (kind) {
    case K_LOAD:
        dt_str_add(o, "load(%s + ", p->bufs[x->i].name);
        print_node(p, x->kid[0], o);
        if (x->nkids > 1) {
            dt_str_add(o, ", ");
            print_node(p, x->kid[1], o);
        }
        if (x->nkids > 1 && x->j) {
            dt_str_add(o, ", ");
            print_literal(x->t.elem, x->f, o);
        }
        dt_str_add(o, ")");
        break;
    case K_BLOCK: {
        DtBlock b = dt_block_of(x->t, x->j);
        if (pointer_form(x, &b)) {
            print_block_pointers(p, x, &b, o);
            break;
        }
        dt_str_add(o, "load_block(%s", p->bufs[x->i].name);
        for (int q = 0; q < 3; q++) {
            const int64_t *v = q == 0 ? b.dims : q == 1 ? b.strides : b.offs;
            dt_str_add(o, ", [");
            for (int d = 0; d < x->t.rank; d++)
                dt_str_add(o, "%s%s%lld", d ? ", " : "", q == 2 && d == 0 && b.pid ? "program_id(0) + " : "", (long long)v[d]);
            dt_str_add(o, "]");
        }
        dt_str_add(o, ", [");
        for (int d = 0; d < x->t.rank; d++) dt_str_add(o, "%s%d", d ? ", " : "", x->t.shape[d]);
        dt_str_add(o, "])");
        break;
    }
    case K_AXIS:
        if (x->j) dt_str_add(o, "(program_id(0) * %d + arange(0, %d))", x->t.shape[x->i], x->t.shape[x->i]);
        else dt_str_add(o, "arange(0, %d)", x->t.shape[x->i]);
        print_axis_index(x->t.rank, (int)x->i, o);
        break;
    case K_PID: dt_str_add(o, "program_id(%d)", (int)x->i); break;
    case K_PLIN: print_plin(p, o); break;
    case K_PARAM: dt_str_add(o, "%s", params[x->i]); break;
    case K_LOOPVAR:
        dt_str_add(o, p->stmts[x->i].style == DT_LOOP_STATIC ? "(i%d as i32)" : "i%d", (int)x->i);
        break;
    case K_REF: dt_str_add(o, "v%d", (int)x->i); break;
    case K_LIT: print_literal(x->t.elem, x->f, o); break;
    case K_CONST:
        if (x->t.rank == 0 && x->j && x->f == 0) {   /* a 0-d tile is a scalar */
            dt_str_add(o, "zeros([], %s)", ir_elem_name(x->t.elem));
            break;
        }
        if (x->t.rank == 0 && !x->j) {
            dt_str_add(o, "(");
            print_literal(x->t.elem, x->f, o);
            dt_str_add(o, " as %s)", ir_elem_name(x->t.elem));
            break;
        }
        dt_str_add(o, "full(");
        print_shape(&x->t, o);
        dt_str_add(o, ", ");
        print_literal(x->t.elem, x->f, o);
        dt_str_add(o, ", %s)", ir_elem_name(x->t.elem));
        break;
    default: abort();
    }
}

/* A reduction or scan with its options (internal.h, DT_OPT_*); keep_dims is undone by
 * a reshape to the node's own shape. */
static void print_reduction(const DtProgram *p, const DtForm *f, const DtNode *x, DtStr *o)
{
    const DtType *a = &p->nodes[x->kid[0]].t;
    bool keep = x->j & DT_OPT_KEEP;
    if (keep) dt_str_add(o, "reshape(");
    print_call(p, f->text, x, o);
    if (!(x->j & DT_OPT_NOAXIS)) dt_str_add(o, ", %d", (int)x->i - (x->j & DT_OPT_NEG ? a->rank : 0));
    if (keep) dt_str_add(o, ", keep_dims = true");
    if (x->j & DT_OPT_DTYPE) dt_str_add(o, ", dtype = %s", ir_elem_name(x->t.elem));
    if (x->j & DT_OPT_NONAN) dt_str_add(o, ", propagate_nan = false");
    if (x->j & DT_OPT_REVERSE) dt_str_add(o, ", reverse = true");
    dt_str_add(o, ")");
    if (!keep) return;
    dt_str_add(o, ", ");
    print_shape(&x->t, o);
    dt_str_add(o, ")");
}

static void print_node(const DtProgram *p, int n, DtStr *o)
{
    const DtNode *x = &p->nodes[n];
    const DtForm *f = &dt_forms[x->form];
    switch (f->kind) {
    case K_ARITH: case K_DIV: case K_REM: case K_BITWISE: case K_SHIFT: case K_CMP: case K_LOGIC:
        dt_str_add(o, "(");
        print_node(p, x->kid[0], o);
        dt_str_add(o, " %s ", f->text);
        print_node(p, x->kid[1], o);
        dt_str_add(o, ")");
        break;
    case K_NEG: case K_NOT: case K_LNOT:
        dt_str_add(o, "(%s", f->text);
        print_node(p, x->kid[0], o);
        dt_str_add(o, ")");
        break;
    case K_CAST:
        dt_str_add(o, "(");
        print_node(p, x->kid[0], o);
        dt_str_add(o, " as %s)", ir_elem_name(x->t.elem));
        break;
    case K_REDUCE: case K_SCAN: print_reduction(p, f, x, o); break;
    case K_COMBINE:
        print_call(p, f->text, x, o);
        dt_str_add(o, ", %d, %s%s)", (int)x->i, dt_fns[x->j & DT_COMB_FN].name,
                   x->j & DT_OPT_REVERSE ? ", reverse = true" : "");
        break;
    case K_EXPAND:
        dt_str_add(o, "(");
        print_node(p, x->kid[0], o);
        dt_str_add(o, ")[");
        for (int k = 0; k < x->t.rank; k++) dt_str_add(o, "%s%s", k ? ", " : "", k == x->i ? "None" : ":");
        dt_str_add(o, "]");
        break;
    case K_RESHAPE: case K_BROADCAST:
        print_call(p, f->text, x, o);
        dt_str_add(o, ", ");
        print_shape(&x->t, o);
        dt_str_add(o, ")");
        break;
    case K_DOT:
        print_call(p, f->text, x, o);
        dt_str_add(o, "%s%s%s)", x->i == 1 ? ", precision = tf32" : x->i == 2 ? ", precision = tf32x3" : "",
                   x->t.elem == IR_F16 ? ", out_dtype = f16" : "", x->j ? ", max_num_imprecise_acc = 16" : "");
        break;
    case K_RAND:
        dt_str_add(o, "%s(%d, ", f->text, (int)x->i);
        print_node(p, x->kid[0], o);
        dt_str_add(o, ")");
        break;
    case K_IFX:
        dt_str_add(o, "(if ");
        print_node(p, x->kid[0], o);
        dt_str_add(o, " { ");
        print_node(p, x->kid[1], o);
        dt_str_add(o, " } else { ");
        print_node(p, x->kid[2], o);
        dt_str_add(o, " })");
        break;
    case K_BITCAST:
        print_call(p, f->text, x, o);
        dt_str_add(o, ", %s)", ir_elem_name(x->t.elem));
        break;
    case K_ABS: case K_MATH1: case K_MINMAX: case K_POW: case K_FMA: case K_WHERE: case K_TRANS:
    case K_CLAMP: case K_UMULHI:
        print_call(p, f->text, x, o);
        dt_str_add(o, ")");
        break;
    default: print_leaf(p, x, f->kind, o); break;
    }
}

/* ---- statements ------------------------------------------------------------------------- */
static const int perms3[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};

/* out + pl * numel + a bijection of the tile's elements onto [0, numel): the axes laid
 * out in the statement's order (row-major for perm 0; for rank 3 to 5 the perm orders
 * the first three axes, the others stay innermost). */
static void print_store_offsets(const DtProgram *p, const DtStmt *s, const DtType *t, DtStr *o)
{
    int order[DT_MAX_RANK];
    for (int k = 0; k < DT_MAX_RANK; k++) order[k] = k;
    if (t->rank == 2 && s->perm) order[0] = 1, order[1] = 0;
    if (t->rank >= 3) memcpy(order, perms3[s->perm % 6], sizeof perms3[0]);
    int64_t stride[DT_MAX_RANK] = {1, 1, 1, 1, 1}, acc = 1;
    for (int k = t->rank - 1; k >= 0; k--) {
        stride[order[k]] = acc;
        acc *= t->shape[order[k]];
    }
    if (!s->rm_form) {
        print_plin(p, o);
        if (t->rank) dt_str_add(o, " * %lld", (long long)acc);
    }
    for (int k = 0; k < t->rank; k++) {
        dt_str_add(o, k || !s->rm_form ? " + " : "");
        if (k == 0 && s->rm_form) dt_str_add(o, "(program_id(0) * %d + arange(0, %d))", t->shape[0], t->shape[0]);
        else dt_str_add(o, "arange(0, %d)", t->shape[k]);
        print_axis_index(t->rank, k, o);
        if (stride[k] != 1) dt_str_add(o, " * %lld", (long long)stride[k]);
    }
}

/* A row-major store without a mask is printed, for a third of them (picked by the
 * program's seed and the statement's index, so that no draw of the generator changes),
 * as store_block of the program's block of a [programs * shape[0], shape[1], ...]
 * tensor: the same elements at the same places (passes/blockload.c expands it, sm_90a
 * stores an accumulator's by TMA). */
static bool as_block_store(const DtProgram *p, int i, const DtType *t)
{
    const DtStmt *s = &p->stmts[i];
    return s->kind == DT_STORE && t->rank > 0 && s->perm == 0 && !s->rm_form && s->mask < 0 &&
           (p->seed + (uint64_t)i) % 3 == 0;
}

static void print_block_store(const DtProgram *p, int i, const DtType *t, DtStr *o)
{
    const DtStmt *s = &p->stmts[i];
    int64_t programs = 1, stride[DT_MAX_RANK], acc = 1;
    for (int d = 0; d < p->ngrid; d++) programs *= p->grid[d];
    for (int k = t->rank - 1; k >= 0; k--) stride[k] = acc, acc *= t->shape[k];
    dt_str_add(o, "    store_block(%s, [", p->bufs[s->buf].name);
    for (int k = 0; k < t->rank; k++) dt_str_add(o, "%s%lld", k ? ", " : "", (long long)(k ? t->shape[k] : programs * t->shape[0]));
    dt_str_add(o, "], [");
    for (int k = 0; k < t->rank; k++) dt_str_add(o, "%s%lld", k ? ", " : "", (long long)stride[k]);
    dt_str_add(o, "], [");
    print_plin(p, o);
    dt_str_add(o, " * %d", t->shape[0]);
    for (int k = 1; k < t->rank; k++) dt_str_add(o, ", 0");
    dt_str_add(o, "], ");
    print_node(p, s->node, o);
    dt_str_add(o, ");\n");
}

static void print_stmt(const DtProgram *p, int i, DtStr *o)
{
    const DtStmt *s = &p->stmts[i];
    const DtType *t = &p->nodes[s->node].t;
    switch (s->kind) {
    case DT_LET:
        dt_str_add(o, "    let v%d = ", i);
        print_node(p, s->node, o);
        dt_str_add(o, ";\n");
        break;
    case DT_FOR: {
        static const char *const pre[DT_NCOMB] = {"v%d + ", "maximum(v%d, ", "minimum(v%d, ", "v%d ^ ", ""};
        dt_str_add(o, "    var v%d = ", i);
        print_node(p, s->node, o);
        if (s->style == DT_LOOP_DOWN) dt_str_add(o, ";\n    for i%d in range(%d, -1, -1) {\n        v%d = ", i, s->trips - 1, i);
        else dt_str_add(o, ";\n    for i%d in %s(0, %d) {\n        v%d = ", i, s->style == DT_LOOP_STATIC ? "static_range" : "range",
                        s->trips, i);
        dt_str_add(o, pre[s->op], i);
        print_node(p, s->body, o);
        dt_str_add(o, "%s;\n    }\n", s->op == DT_COMB_MAX || s->op == DT_COMB_MIN ? ")" : "");
        break;
    }
    case DT_STORE:
        if (as_block_store(p, i, t)) {
            print_block_store(p, i, t, o);
            return;
        }
        dt_str_add(o, "    store(%s + ", p->bufs[s->buf].name);
        print_store_offsets(p, s, t, o);
        dt_str_add(o, ", ");
        print_node(p, s->node, o);
        break;
    case DT_ATOMIC:
        dt_str_add(o, "    %s(%s + ", dt_atomics[s->op].text, p->bufs[s->buf].name);
        print_node(p, s->offs, o);
        dt_str_add(o, ", ");
        print_node(p, s->node, o);
        break;
    }
    if (s->kind == DT_STORE || s->kind == DT_ATOMIC) {
        if (s->mask >= 0) {
            dt_str_add(o, ", ");
            print_node(p, s->mask, o);
        }
        dt_str_add(o, ");\n");
    }
}

/* The combine fns that the expression n uses (only those are printed). */
static void mark_fns(const DtProgram *p, int n, bool *used)
{
    if (n < 0 || n >= p->nnodes) return;
    const DtNode *x = &p->nodes[n];
    if (dt_forms[x->form].kind == K_COMBINE) used[x->j & DT_COMB_FN] = true;
    for (int k = 0; k < x->nkids; k++) mark_fns(p, x->kid[k], used);
}

char *dt_print(const DtProgram *p)
{
    bool live[DT_MAX_STMTS], live_buf[DT_MAX_BUFS];
    dt_live(p, live, live_buf);
    DtStr o = {0};
    bool used[DT_NFNS] = {0};
    for (int i = 0; i < p->nstmts; i++) {
        const DtStmt *s = &p->stmts[i];
        if (!live[i]) continue;
        mark_fns(p, s->node, used);
        if (s->kind == DT_FOR) mark_fns(p, s->body, used);
        if (s->kind == DT_STORE || s->kind == DT_ATOMIC) mark_fns(p, s->mask, used);
        if (s->kind == DT_ATOMIC) mark_fns(p, s->offs, used);
    }
    for (int i = 0; i < DT_NFNS; i++)
        if (used[i]) dt_str_add(&o, "%s\n", dt_fns[i].text);
    dt_str_add(&o, "@launch(warps = %d%s)\nkernel k(", p->warps, p->persistent ? ", persistent = true" : "");
    for (int b = 0; b < p->nbufs; b++)
        if (live_buf[b]) dt_str_add(&o, "%s: *%s, ", p->bufs[b].name, ir_elem_name(p->bufs[b].elem));
    dt_str_add(&o, "L: i32, M: i32, fs: f32)\n    grid(");
    for (int d = 0; d < p->ngrid; d++) dt_str_add(&o, "%s%d", d ? ", " : "", p->grid[d]);
    dt_str_add(&o, ")\n{\n");
    for (int i = 0; i < p->nstmts; i++)
        if (live[i]) print_stmt(p, i, &o);
    dt_str_add(&o, "}\n");
    return o.s;
}
