/* The generator of random kernels (gen.h): the table of forms, building nodes of an
 * asked type, and the top-level statements. Each form's gen builds one node whose
 * kids it asks for recursively; dt_check (analyse.c) then says whether the node is
 * valid, and an invalid one is taken back and another form tried, down to a leaf. */
#include "gen.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- random numbers: splitmix64, one state per generator ------------------------- */
static uint64_t rng_next(DtGen *g)
{
    uint64_t z = (g->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int rnd(DtGen *g, int n) { return n > 0 ? (int)(rng_next(g) % (uint64_t)n) : 0; }
static bool chance(DtGen *g, int pct) { return rnd(g, 100) < pct; }

/* ---- element types and shapes -------------------------------------------------------- */
/*        element     weight */
static const struct { IrElem e; int w; } elem_weights[] = {
    {IR_I32, 20}, {IR_F32, 20}, {IR_F16, 8}, {IR_BF16, 8}, {IR_I1, 6}, {IR_I8, 4},
    {IR_I16, 3}, {IR_I64, 4}, {IR_U8, 3}, {IR_U16, 2}, {IR_U32, 4}, {IR_U64, 3},
    {IR_F64, 4}, {IR_F8E4M3, 3}, {IR_F8E5M2, 3},
};

static IrElem pick_elem_in(DtGen *g, unsigned mask)
{
    int total = 0;
    for (size_t i = 0; i < sizeof elem_weights / sizeof *elem_weights; i++)
        if (mask & DT_BIT(elem_weights[i].e)) total += elem_weights[i].w;
    int r = rnd(g, total);
    for (size_t i = 0; i < sizeof elem_weights / sizeof *elem_weights; i++) {
        if (!(mask & DT_BIT(elem_weights[i].e))) continue;
        if ((r -= elem_weights[i].w) < 0) return elem_weights[i].e;
    }
    return IR_I32;
}

int64_t dt_numel(DtType t)
{
    int64_t n = 1;
    for (int k = 0; k < t.rank; k++) n *= t.shape[k];
    return n;
}

static DtType type_of(IrElem e, int rank, const int *shape)
{
    DtType t = {e, rank, {0}};
    for (int k = 0; k < rank; k++) t.shape[k] = shape[k];
    return t;
}

static bool same_type(DtType a, DtType b)
{
    if (a.elem != b.elem || a.rank != b.rank) return false;
    for (int k = 0; k < a.rank; k++)
        if (a.shape[k] != b.shape[k]) return false;
    return true;
}

/* A random shape of the given rank with at most g->max_numel elements. */
static void rand_shape(DtGen *g, int rank, int *shape)
{
    static const int max_log[DT_MAX_RANK + 1] = {0, 10, 6, 4, 3, 2};
    int budget = 0;
    while ((2 << budget) <= g->max_numel) budget++;
    for (int k = 0; k < rank; k++) {
        int l = rnd(g, max_log[rank] + 1);
        if (rank == 1 && chance(g, 60)) l = 4 + rnd(g, 5);
        if (l > budget) l = budget;
        budget -= l;
        shape[k] = 1 << l;
    }
}

/* The main shape with some axes set to 1, or a fresh shape. */
static DtType pick_type(DtGen *g, unsigned elems)
{
    DtType t = g->main;
    t.elem = pick_elem_in(g, elems);
    if (chance(g, 25)) {
        for (int k = 0; k < t.rank; k++)
            if (chance(g, 40)) t.shape[k] = 1;
    } else if (chance(g, 15)) {
        t.rank = 1 + rnd(g, DT_MAX_RANK);
        rand_shape(g, t.rank, t.shape);
    } else if (chance(g, 5)) {
        t.rank = 0;
    }
    return t;
}

/* Operand shapes a and b whose broadcast is t's shape (numpy rules: a lower rank gets
 * leading size-1 axes). */
static void bcast_pair(DtGen *g, DtType t, DtType *a, DtType *b)
{
    *a = *b = t;
    for (int k = 0; k < t.rank; k++) {
        if (t.shape[k] == 1) continue;
        int r = rnd(g, 10);
        if (r < 2) a->shape[k] = 1;
        else if (r < 4) b->shape[k] = 1;
    }
    DtType *v[2] = {a, b};
    for (int s = 0; s < 2; s++) {
        if (!chance(g, 30)) continue;
        int drop = 0;
        while (drop < v[s]->rank && v[s]->shape[drop] == 1) drop++;
        drop = rnd(g, drop + 1);
        for (int k = 0; k + drop < v[s]->rank; k++) v[s]->shape[k] = v[s]->shape[k + drop];
        v[s]->rank -= drop;
    }
    if (a->rank < t.rank && b->rank < t.rank) *a = t;   /* the result keeps t's rank */
}

/* ---- nodes ------------------------------------------------------------------------ */
int dt_form_find(int kind, const char *text)
{
    for (int i = 0; i < dt_nforms; i++)
        if (dt_forms[i].kind == kind && (!text || !strcmp(dt_forms[i].text, text))) return i;
    abort();   /* a generator bug: every form asked for is in the table */
}

static int node_new(DtGen *g, int kind, const char *text, DtType t)
{
    DtProgram *p = g->p;
    if (p->nnodes >= DT_MAX_NODES - 1) return -1;
    DtNode *n = &p->nodes[p->nnodes];
    memset(n, 0, sizeof *n);
    n->form = dt_form_find(kind, text);
    n->t = t;
    return p->nnodes++;
}

#define NONE (-3)

/* A literal that fits element type e (the other operand of a binary op gives it e). */
static double rand_literal(DtGen *g, IrElem e)
{
    static const double floats[] = {0.5, 1.5, -2.0, 0.25, 3.0, -0.75, 2.0, -1.0};
    if (ir_elem_is_float(e)) return floats[rnd(g, 8)];
    if (e == IR_I1) return rnd(g, 2);
    int v = rnd(g, 9) - (ir_elem_is_signed(e) ? 4 : 0);
    if (chance(g, 10)) return ir_elem_is_signed(e) ? -ldexp(1.0, ir_elem_bits(e) - 2) : ldexp(1.0, ir_elem_bits(e) - 1);
    return v;
}

static int leaf_literal(DtGen *g, IrElem e, double v)
{
    int n = node_new(g, K_LIT, NULL, type_of(e, 0, NULL));
    if (n >= 0) g->p->nodes[n].f = v;
    if (n >= 0) dt_check_node(g->p, n);
    return n;
}

static int leaf_const(DtGen *g, DtType t, double v)
{
    int n = node_new(g, K_CONST, NULL, t);
    if (n >= 0) g->p->nodes[n].f = v;
    if (n >= 0) dt_check_node(g->p, n);
    return n;
}

/* Builds the node of kind/text with kids a, b, c (NONE: absent), or -1 if a kid
 * failed. */
static int mk(DtGen *g, int kind, const char *text, DtType t, int a, int b, int c)
{
    if (a < 0 || b == -1 || c == -1) return -1;
    int n = node_new(g, kind, text, t);
    if (n < 0) return -1;
    DtNode *x = &g->p->nodes[n];
    int k[3] = {a, b, c};
    for (int i = 0; i < 3 && k[i] >= 0; i++) x->kid[x->nkids++] = k[i];
    dt_check_node(g->p, n);   /* again by keep_if_valid once attributes are set */
    return n;
}

/* ---- the expression generator ---------------------------------------------------- */
static int gen_leaf(DtGen *g, DtType t);

/* Validates node n; an invalid node and everything built for it since `mark` is
 * taken back. */
static int keep_if_valid(DtGen *g, int n, int mark)
{
    if (n >= 0 && dt_check_node(g->p, n)) return n;
    g->p->nnodes = mark;
    return -1;
}

static int pick_form(DtGen *g, DtType t, bool leaves)
{
    int total = 0;
    for (int i = 0; i < dt_nforms; i++)
        if ((dt_forms[i].elems & DT_BIT(t.elem)) && (dt_forms[i].kind >= K_FIRST_LEAF) == leaves)
            total += dt_forms[i].weight;
    int r = rnd(g, total);
    for (int i = 0; i < dt_nforms; i++) {
        if (!(dt_forms[i].elems & DT_BIT(t.elem)) || (dt_forms[i].kind >= K_FIRST_LEAF) != leaves) continue;
        if ((r -= dt_forms[i].weight) < 0) return i;
    }
    return -1;
}

int dt_gen_expr(DtGen *g, DtType t, int depth)
{
    for (int attempt = 0; depth > 0 && attempt < 8; attempt++) {
        if (chance(g, 12 + 10 * (4 - depth))) break;
        int f = pick_form(g, t, false);
        int mark = g->p->nnodes;
        int n = f >= 0 && dt_forms[f].gen ? dt_forms[f].gen(g, &dt_forms[f], t, depth - 1) : -1;
        if ((n = keep_if_valid(g, n, mark)) >= 0) return n;
    }
    return gen_leaf(g, t);
}

static int gen_leaf(DtGen *g, DtType t)
{
    for (int attempt = 0; attempt < 12; attempt++) {
        int f = pick_form(g, t, true);
        int mark = g->p->nnodes;
        int n = f >= 0 && dt_forms[f].gen ? dt_forms[f].gen(g, &dt_forms[f], t, 0) : -1;
        if ((n = keep_if_valid(g, n, mark)) >= 0) return n;
    }
    int mark = g->p->nnodes;
    return keep_if_valid(g, leaf_const(g, t, rand_literal(g, t.elem)), mark);
}

/* An operand of element e and shape s: usually generated, sometimes a literal (rank 0,
 * right-hand side only). */
static int operand(DtGen *g, IrElem e, DtType s, int depth, bool literal_ok)
{
    s.elem = e;
    if (literal_ok && s.rank == 0 && e != IR_I1 && chance(g, 40)) return leaf_literal(g, e, rand_literal(g, e));
    return dt_gen_expr(g, s, depth);
}

/* Two element types whose promotion (docs/LANGUAGE-REFERENCE.md) is e, or e twice. */
static void promote_pair(DtGen *g, IrElem e, IrElem *a, IrElem *b)
{
    *a = *b = e;
    if (!chance(g, 20)) return;
    for (int tries = 0; tries < 6; tries++) {
        IrElem x = pick_elem_in(g, DT_NUM | DT_BIT(IR_I1));
        if (dt_promote(e, x) == e && x != IR_I1) {
            if (chance(g, 50)) *b = x;
            else *a = x;
            return;
        }
    }
}

static int gen_binary(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.elem == IR_I1 && f->kind == K_ARITH) return -1;
    if (f->kind == K_MINMAX && t.elem == IR_I1) return -1;
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    IrElem ea = t.elem, eb = t.elem;
    if (f->kind != K_LOGIC && t.elem != IR_I1) promote_pair(g, t.elem, &ea, &eb);
    int x = operand(g, ea, a, depth, false);
    int y = operand(g, eb, b, depth, f->kind != K_LOGIC && ea == eb);
    return mk(g, f->kind, f->text, t, x, y, NONE);
}

/* Division: integer divisors are (d & 15) | 1 (never 0, never -1, so neither UB nor
 * INT_MIN / -1); float divisors are exact values or abs(d) + 1. */
static int divisor(DtGen *g, DtType b, int depth)
{
    if (ir_elem_is_int(b.elem)) {
        int d = dt_gen_expr(g, b, depth);
        int m = mk(g, K_BITWISE, "&", b, d, leaf_literal(g, b.elem, 15), NONE);
        return mk(g, K_BITWISE, "|", b, m, leaf_literal(g, b.elem, 1), NONE);
    }
    int d = dt_gen_expr(g, b, depth);
    if (d >= 0 && g->p->nodes[d].exact && chance(g, 40)) return d;
    return mk(g, K_ARITH, "+", b, mk(g, K_ABS, "abs", b, d, NONE, NONE), leaf_literal(g, b.elem, 1.0), NONE);
}

static int gen_div(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.elem == IR_I1) return -1;
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    a.elem = b.elem = t.elem;
    int x = dt_gen_expr(g, a, depth);
    return mk(g, f->kind, f->text, t, x, divisor(g, b, depth), NONE);
}

static int gen_shift(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    a.elem = b.elem = t.elem;
    int x = dt_gen_expr(g, a, depth);
    int y = b.rank == 0 && chance(g, 50) ? leaf_literal(g, t.elem, rnd(g, ir_elem_bits(t.elem) + 2))
                                         : dt_gen_expr(g, b, depth);
    return mk(g, f->kind, f->text, t, x, y, NONE);
}

static int gen_cmp(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    IrElem e = pick_elem_in(g, DT_NUM), ea, eb;
    promote_pair(g, e, &ea, &eb);
    int x = operand(g, ea, a, depth, false);
    return mk(g, f->kind, f->text, t, x, operand(g, eb, b, depth, ea == eb), NONE);
}

static int gen_unary(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (f->kind == K_NEG && t.elem == IR_I1) return -1;
    if (f->kind == K_ABS && t.elem == IR_I1) return -1;
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, t, depth), NONE, NONE);
}

/* Math functions: a float argument of the result's type (f32 results may also take an
 * integer argument, which the language converts to f32). log, sqrt and rsqrt usually
 * get abs(x) + 0.5, so that their argument stays away from 0 and negatives. */
static int gen_math1(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a = t;
    if (t.elem == IR_I1) a.elem = pick_elem_in(g, DT_FLOATS);   /* a predicate: isnan ... */
    if (t.elem == IR_F32 && chance(g, 10)) a.elem = pick_elem_in(g, DT_INTS);
    int x = dt_gen_expr(g, a, depth);
    bool positive = f->op == IR_OP_LOG || f->op == IR_OP_LOG2 || f->op == IR_OP_RSQRT ||
                    (f->op == IR_OP_SQRT && chance(g, 70));
    if (positive && ir_elem_is_float(a.elem))
        x = mk(g, K_ARITH, "+", a, mk(g, K_ABS, "abs", a, x, NONE, NONE), leaf_literal(g, a.elem, 0.5), NONE);
    return mk(g, f->kind, f->text, t, x, NONE, NONE);
}

static int gen_pow(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    a.elem = b.elem = t.elem;
    int x = dt_gen_expr(g, a, depth);
    x = mk(g, K_ARITH, "+", a, mk(g, K_ABS, "abs", a, x, NONE, NONE), leaf_literal(g, t.elem, 0.5), NONE);
    int y = b.rank == 0 && chance(g, 50) ? leaf_const(g, b, rnd(g, 7) - 3) : dt_gen_expr(g, b, depth);
    return mk(g, f->kind, f->text, t, x, y, NONE);
}

static int gen_fma(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a, b, c, d;
    bcast_pair(g, t, &a, &b);
    bcast_pair(g, t, &c, &d);
    a.elem = b.elem = c.elem = t.elem;
    int x = dt_gen_expr(g, a, depth), y = dt_gen_expr(g, b, depth);
    return mk(g, f->kind, f->text, t, x, y, dt_gen_expr(g, c, depth));
}

static int gen_where(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a, b, c, d;
    bcast_pair(g, t, &a, &b);
    bcast_pair(g, t, &c, &d);
    c.elem = IR_I1;
    int m = dt_gen_mask(g, c, depth);
    return mk(g, f->kind, f->text, t, m, dt_gen_expr(g, a, depth), dt_gen_expr(g, b, depth));
}

static int gen_cast(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a = t;
    a.elem = pick_elem_in(g, DT_NUM | DT_BIT(IR_I1));
    if (a.elem == t.elem) return -1;
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
}

/* t's shape with an axis of size `size` inserted at `axis`. */
static DtType insert_axis(DtType t, int axis, int size)
{
    DtType a = t;
    a.rank = t.rank + 1;
    for (int k = 0; k < a.rank; k++) a.shape[k] = k < axis ? t.shape[k] : k == axis ? size : t.shape[k - 1];
    return a;
}

static int gen_reduce(DtGen *g, const DtForm *f, DtType t, int depth)
{
    bool arg = f->op == IR_OP_ARGMAX || f->op == IR_OP_ARGMIN;
    if (t.rank >= DT_MAX_RANK || (arg && t.elem != IR_I32)) return -1;
    int axis = rnd(g, t.rank + 1), size = 1 << rnd(g, 7);
    while (size > 1 && dt_numel(t) * size > g->max_numel) size /= 2;
    DtType a = insert_axis(t, axis, size);
    if (arg) a.elem = pick_elem_in(g, DT_NUM);
    else if (t.elem == IR_I1) a.elem = IR_I1;   /* any, all */
    else if (f->op == IR_OP_SUM && t.elem == IR_I32 && chance(g, 30))
        a.elem = pick_elem_in(g, DT_BIT(IR_I1) | DT_BIT(IR_I8) | DT_BIT(IR_I16) | DT_BIT(IR_U8) | DT_BIT(IR_U16));
    else if (f->op == IR_OP_SUM && dt_sum_elem(t.elem) != t.elem) return -1;
    int n = mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
    if (n < 0) return n;
    g->p->nodes[n].i = axis;
    g->p->nodes[n].j = (chance(g, 25) ? DT_OPT_NEG : 0) | (t.rank > 0 && chance(g, 20) ? DT_OPT_KEEP : 0) |
                       (a.rank == 1 && chance(g, 30) ? DT_OPT_NOAXIS : 0) |
                       (f->op == IR_OP_SUM && a.elem != t.elem && chance(g, 30) ? DT_OPT_DTYPE : 0) |
                       ((f->op == IR_OP_MAX || f->op == IR_OP_MIN) && ir_elem_is_float(t.elem) && chance(g, 25)
                            ? DT_OPT_NONAN : 0);
    return n;
}

/* reduce(x, axis, fn) / associative_scan(x, axis, fn, reverse?) with one of print.c's
 * combine fns (xor on integers only). */
static int gen_combine(DtGen *g, const DtForm *f, DtType t, int depth)
{
    bool scan = f->op == IR_OP_SCAN;
    if (t.elem == IR_I1 || (scan && t.rank == 0) || (!scan && t.rank >= DT_MAX_RANK)) return -1;
    int fn = rnd(g, DT_NFNS);
    if (fn == DT_FN_XOR && !ir_elem_is_int(t.elem)) fn = DT_FN_FIRST;
    int axis = rnd(g, scan ? t.rank : t.rank + 1), size = 1 << rnd(g, 7);
    while (size > 1 && dt_numel(t) * size > g->max_numel) size /= 2;
    DtType a = scan ? t : insert_axis(t, axis, size);
    int n = mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
    if (n < 0) return n;
    g->p->nodes[n].i = axis;
    g->p->nodes[n].j = fn | (scan && chance(g, 30) ? DT_OPT_REVERSE : 0);
    return n;
}

static int gen_scan(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank == 0 || t.elem == IR_I1) return -1;
    DtType a = t;
    if (t.elem == IR_I32 && chance(g, 20)) a.elem = pick_elem_in(g, DT_BIT(IR_I8) | DT_BIT(IR_I16) | DT_BIT(IR_U8));
    else if (dt_sum_elem(t.elem) != t.elem) return -1;
    int n = mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
    if (n < 0) return n;
    g->p->nodes[n].i = rnd(g, t.rank);
    g->p->nodes[n].j = (chance(g, 25) ? DT_OPT_NEG : 0) | (chance(g, 30) ? DT_OPT_REVERSE : 0);
    return n;
}

static int gen_expand(DtGen *g, const DtForm *f, DtType t, int depth)
{
    int ones[DT_MAX_RANK], n1 = 0;
    for (int k = 0; k < t.rank; k++)
        if (t.shape[k] == 1) ones[n1++] = k;
    if (t.rank < 1 || !n1) return -1;   /* rank 1: s[None], a scalar to a [1] tile */
    int pos = ones[rnd(g, n1)];
    DtType a = t;
    a.rank = t.rank - 1;
    for (int k = pos; k < a.rank; k++) a.shape[k] = t.shape[k + 1];
    int n = mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
    if (n >= 0) g->p->nodes[n].i = pos;
    return n;
}

static int gen_trans(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank < 2) return -1;
    DtType a = t;
    for (int k = 0; k < t.rank; k++) a.shape[k] = t.shape[t.rank - 1 - k];
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
}

static int gen_reshape(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank == 0) return -1;
    int64_t n = dt_numel(t);
    int logn = 0;
    while ((1 << logn) < n) logn++;
    DtType a = t;
    a.rank = 1 + rnd(g, DT_MAX_RANK);
    for (int k = 0; k < a.rank; k++) {
        int l = k == a.rank - 1 ? logn : rnd(g, logn + 1);
        a.shape[k] = 1 << l;
        logn -= l;
    }
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
}

static int gen_broadcast(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank == 0) return -1;
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    if (a.rank == 0) return -1;
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
}

/* dot: [M,K] x [K,N], usually every size at least 16, sometimes smaller (padded on the
 * GPU: passes/dotpad.c); f32 results from every float input type (f32 with or without
 * tf32, or tf32x3), f64 from f64, i32 from i8 or u8, f16 (out_dtype = f16) from f16 and
 * the f8s (which may say max_num_imprecise_acc). */
static int gen_dot(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank != 2 || t.shape[0] > 64 || t.shape[1] > 64) return -1;
    if ((t.shape[0] < 16 || t.shape[1] < 16) && !chance(g, 40)) return -1;
    static const IrElem f32_inputs[] = {IR_F16, IR_BF16, IR_F32, IR_F32, IR_F8E4M3, IR_F8E5M2};
    static const IrElem f16_inputs[] = {IR_F16, IR_F16, IR_F8E4M3, IR_F8E5M2};
    IrElem in = t.elem == IR_F64 ? IR_F64 : t.elem == IR_I32 ? (chance(g, 50) ? IR_I8 : IR_U8)
              : t.elem == IR_F16 ? f16_inputs[rnd(g, 4)] : f32_inputs[rnd(g, 6)];
    int K = chance(g, 20) ? 1 << rnd(g, 4) : 16 << rnd(g, 3);
    /* f32 and f64 dots may run on FMAs, unrolled per thread: half the work, or ptxas
     * takes a minute (a [64, 64] x [64, 16] f64 dot on 2 warps took 13 s) */
    int64_t budget = (in == IR_F32 || in == IR_F64 ? 1024 * 16 : 1024 * 32) * (int64_t)g->p->warps;
    while (K > 16 && (int64_t)t.shape[0] * t.shape[1] * K > budget) K /= 2;
    if ((int64_t)t.shape[0] * t.shape[1] * K > budget) return -1;
    int sa[2] = {t.shape[0], K}, sb[2] = {K, t.shape[1]};
    int a = dt_gen_expr(g, type_of(in, 2, sa), depth), b = dt_gen_expr(g, type_of(in, 2, sb), depth);
    int acc = chance(g, 50) ? dt_gen_expr(g, t, depth) : NONE;
    int n = mk(g, f->kind, f->text, t, a, b, acc);
    if (n >= 0 && in == IR_F32 && chance(g, 50)) g->p->nodes[n].i = 1 + rnd(g, 2);   /* tf32, tf32x3 */
    if (n >= 0 && (in == IR_F8E4M3 || in == IR_F8E5M2) && chance(g, 50)) g->p->nodes[n].j = 1;
    return n;
}

/* clamp(x, lo, hi): three operands broadcast to t (numbers, not i1). */
static int gen_clamp(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.elem == IR_I1) return -1;
    return gen_fma(g, f, t, depth);
}

/* umulhi(a, b): integers of t's type. */
static int gen_umulhi(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType a, b;
    bcast_pair(g, t, &a, &b);
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), dt_gen_expr(g, b, depth), NONE);
}

/* bitcast(x, T) to an integer type: from the other integer of its width, or from the
 * float of its width loaded from memory (random bits the GPU reads as the interpreter
 * does; computed floats may differ in the sign of a zero or a NaN's payload). */
static int gen_bitcast(DtGen *g, const DtForm *f, DtType t, int depth)
{
    static const IrElem other[IR_NUM_ELEMS] = {
        [IR_I8] = IR_U8, [IR_U8] = IR_I8, [IR_I16] = IR_U16, [IR_U16] = IR_I16, [IR_I32] = IR_U32,
        [IR_U32] = IR_I32, [IR_I64] = IR_U64, [IR_U64] = IR_I64};
    static const IrElem floats[IR_NUM_ELEMS] = {
        [IR_I8] = IR_F8E4M3, [IR_U8] = IR_F8E5M2, [IR_I16] = IR_F16, [IR_U16] = IR_BF16, [IR_I32] = IR_F32,
        [IR_U32] = IR_F32, [IR_I64] = IR_F64, [IR_U64] = IR_F64};
    DtType a = t;
    if (!other[t.elem]) return -1;
    if (chance(g, 50)) {
        a.elem = floats[t.elem];
        return mk(g, f->kind, f->text, t, dt_gen_leaf_kind(g, K_LOAD, a), NONE, NONE);
    }
    a.elem = other[t.elem];
    return mk(g, f->kind, f->text, t, dt_gen_expr(g, a, depth), NONE, NONE);
}

/* (if c { a } else { b }): a scalar condition, branches of t's type. */
static int gen_ifx(DtGen *g, const DtForm *f, DtType t, int depth)
{
    int c = dt_gen_mask(g, (DtType){IR_I1, 0, {0}}, depth);
    int a = dt_gen_expr(g, t, depth);
    return mk(g, f->kind, f->text, t, c, a, dt_gen_expr(g, t, depth));
}

static int gen_rand(DtGen *g, const DtForm *f, DtType t, int depth)
{
    DtType o = t;
    o.elem = IR_I32;
    int n = mk(g, f->kind, f->text, t, dt_gen_expr(g, o, depth), NONE, NONE);
    if (n >= 0) g->p->nodes[n].i = rnd(g, 1000);
    return n;
}

/* ---- masks and offsets ----------------------------------------------------------- */
/* An index tile along one axis of t: arange(0, s) there, size 1 elsewhere; along axis
 * 0 sometimes program_id(0) * s + arange(0, s), the rows of this program. */
static int axis_leaf(DtGen *g, DtType t, int axis)
{
    DtType a = {IR_I32, t.rank, {0}};
    for (int k = 0; k < t.rank; k++) a.shape[k] = 1;
    a.shape[axis] = t.shape[axis];
    int n = node_new(g, K_AXIS, NULL, a);
    if (n >= 0) {
        g->p->nodes[n].i = axis;
        g->p->nodes[n].j = axis == 0 && chance(g, 50);
        dt_check_node(g->p, n);
    }
    return n;
}

/* A scalar bound for index comparisons: L, M, program_id or a literal. */
static int scalar_bound(DtGen *g)
{
    DtType s = {IR_I32, 0, {0, 0, 0}};
    int r = rnd(g, 4);
    if (r == 0) return dt_gen_leaf_kind(g, K_PARAM, s);
    if (r == 1 && g->loop_stmt >= 0) return dt_gen_leaf_kind(g, K_LOOPVAR, s);
    if (r == 1) return dt_gen_leaf_kind(g, K_PID, s);
    return leaf_literal(g, IR_I32, rnd(g, 70));
}

static const char *const cmp_ops[6] = {"<", "<=", ">", ">=", "==", "!="};

/* Masks built the way kernels build them: indices along axes compared with run-time
 * bounds or with each other (the 2-D causal mask), combined with & | ^; or any i1
 * expression. t is i1 with the mask's shape. */
int dt_gen_mask(DtGen *g, DtType t, int depth)
{
    if (t.rank == 0 || chance(g, 30)) return dt_gen_expr(g, t, depth);
    const char *op = cmp_ops[rnd(g, 6)];
    int ax = rnd(g, t.rank), x = axis_leaf(g, t, ax), y;
    if (t.rank >= 2 && chance(g, 40)) y = axis_leaf(g, t, (ax + 1 + rnd(g, t.rank - 1)) % t.rank);
    else y = scalar_bound(g);
    if (x < 0 || y < 0) return -1;
    DtType mt = dt_bcast(g->p->nodes[x].t, g->p->nodes[y].t);
    mt.elem = IR_I1;
    int m = mk(g, K_CMP, op, mt, x, y, NONE);
    if (m < 0 || same_type(mt, t)) return m;
    if (depth > 0 && chance(g, 70)) {
        static const char *const logic[3] = {"&", "|", "^"};
        return mk(g, K_BITWISE, logic[rnd(g, 3)], t, m, dt_gen_mask(g, t, depth - 1), NONE);
    }
    return mk(g, K_BROADCAST, "broadcast", t, m, NONE, NONE);
}

/* Offsets into an input buffer, in [0, DT_NIN): a row-major or strided index over the
 * tile (some axes of stride 0: the same address along them), the loop variable, an
 * arbitrary i32 expression, or a gather through loaded indices; then & (DT_NIN - 1). */
/* pl * numel(t) + the sum over axes of arange * stride, row-major, with some strides
 * (never the last axis's) left out: the same address along those axes. */
static int linear_index(DtGen *g, DtType t)
{
    DtType s0 = {IR_I32, 0, {0, 0, 0}}, it = t;
    it.elem = IR_I32;
    int idx = mk(g, K_ARITH, "*", s0, dt_gen_leaf_kind(g, K_PLIN, s0), leaf_literal(g, IR_I32, (double)dt_numel(t)), NONE);
    int64_t stride = 1;
    for (int k = t.rank - 1; k >= 0 && idx >= 0; k--) {
        if (k == t.rank - 1 || !chance(g, 15)) {
            int ax = axis_leaf(g, t, k);
            int term = stride == 1 || ax < 0 ? ax : mk(g, K_ARITH, "*", g->p->nodes[ax].t, ax, leaf_literal(g, IR_I32, (double)stride), NONE);
            if (term < 0) return -1;
            DtType sum = dt_bcast(g->p->nodes[idx].t, g->p->nodes[term].t);
            idx = mk(g, K_ARITH, "+", sum, idx, term, NONE);
        }
        stride *= t.shape[k];
    }
    if (idx >= 0 && !same_type(g->p->nodes[idx].t, it)) idx = mk(g, K_BROADCAST, "broadcast", it, idx, NONE, NONE);
    return idx;
}

static int gen_offsets(DtGen *g, DtType t, int depth)
{
    DtType it = t;
    it.elem = IR_I32;
    int idx, r = rnd(g, 10);
    if (r < 6 && t.rank > 0) idx = linear_index(g, t);
    else if (r < 8 || t.rank == 0) idx = dt_gen_expr(g, it, depth > 1 ? 1 : depth);
    else idx = dt_gen_leaf_kind(g, K_LOAD, it);
    if (g->loop_stmt >= 0 && chance(g, 50)) {
        int iv = dt_gen_leaf_kind(g, K_LOOPVAR, (DtType){IR_I32, 0, {0}});
        idx = mk(g, K_ARITH, "+", it, idx, mk(g, K_ARITH, "*", (DtType){IR_I32, 0, {0}}, iv,
                                              leaf_literal(g, IR_I32, 1 + rnd(g, 64)), NONE), NONE);
    }
    return mk(g, K_BITWISE, "&", it, idx, leaf_literal(g, IR_I32, DT_NIN - 1), NONE);
}

/* ---- leaves ------------------------------------------------------------------------ */
static int buf_find(DtProgram *p, DtBufRole role, IrElem e, const char *name)
{
    for (int b = 0; b < p->nbufs; b++)
        if (!strcmp(p->bufs[b].name, name)) return b;
    if (p->nbufs == DT_MAX_BUFS) return -1;
    DtBuf *b = &p->bufs[p->nbufs];
    b->elem = e;
    b->role = role;
    b->count = DT_NIN;
    snprintf(b->name, sizeof b->name, "%s", name);
    return p->nbufs++;
}

static int gen_load(DtGen *g, const DtForm *f, DtType t, int depth)
{
    char name[16];
    snprintf(name, sizeof name, "in_%s", ir_elem_name(t.elem));
    int b = buf_find(g->p, DT_BUF_IN, t.elem, name);
    if (b < 0 || g->load_depth > 1) return -1;
    g->load_depth++;
    int offs = gen_offsets(g, t, 2);
    int mask = NONE;
    if (t.rank > 0 && chance(g, 50)) {
        DtType m, unused;
        bcast_pair(g, t, &m, &unused);
        m.elem = IR_I1;
        mask = dt_gen_mask(g, m, 1);
    }
    g->load_depth--;
    int n = mk(g, f->kind, f->text, t, offs, mask, NONE);
    if (n >= 0) {
        g->p->nodes[n].i = b;
        g->p->nodes[n].j = mask != NONE && chance(g, 60);
        g->p->nodes[n].f = rand_literal(g, t.elem);
    }
    return n;
}

DtBlock dt_block_of(DtType t, int64_t seed)
{
    uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15u + 1;
    DtBlock b;
    memset(&b, 0, sizeof b);
#define NEXT(n) (x ^= x << 13, x ^= x >> 7, x ^= x << 17, (int64_t)(x % (uint64_t)(n)))
    for (int d = 0; d < t.rank; d++) b.dims[d] = 1 + NEXT(2 * t.shape[d] + 3);
    for (;;) {   /* row-major strides, sometimes padded; shrink until the tensor fits */
        int64_t span = 0, s = 1 + (NEXT(6) == 0);
        for (int d = t.rank - 1; d >= 0; d--) {
            b.strides[d] = s;
            span += (b.dims[d] - 1) * s;
            s = s * b.dims[d] + (NEXT(4) == 0 ? NEXT(3) : 0);
        }
        if (span < DT_NIN) break;
        for (int d = 0; d < t.rank; d++) b.dims[d] = b.dims[d] > 1 ? b.dims[d] / 2 : 1;
    }
    for (int d = 0; d < t.rank; d++) b.offs[d] = NEXT(b.dims[d] + t.shape[d] + 1) - t.shape[d];
    b.pid = NEXT(3) == 0;
#undef NEXT
    return b;
}

/* load_block(in_T, [dims], [strides], [offsets], [shape]): a block of a tensor in an
 * input buffer, zeros outside it (LANGUAGE-REFERENCE.md "Block loads"). */
static int gen_block(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank < 1) return -1;
    char name[16];
    snprintf(name, sizeof name, "in_%s", ir_elem_name(t.elem));
    int b = buf_find(g->p, DT_BUF_IN, t.elem, name);
    if (b < 0) return -1;
    int n = node_new(g, f->kind, f->text, t);
    if (n >= 0) {
        g->p->nodes[n].i = b;
        g->p->nodes[n].j = (int64_t)(rnd(g, 1 << 30));
        dt_check_node(g->p, n);
    }
    return n;
}

static int gen_axis(DtGen *g, const DtForm *f, DtType t, int depth)
{
    int ax = -1, wide = 0;
    for (int k = 0; k < t.rank; k++)
        if (t.shape[k] > 1) ax = k, wide++;
    if (t.rank == 0 || wide > 1) return -1;
    if (ax < 0) ax = rnd(g, t.rank);
    int n = axis_leaf(g, t, ax);
    if (n < 0 || t.elem == IR_I32) return n;
    return mk(g, K_CAST, "as", t, n, NONE, NONE);
}

static int gen_scalar_leaf(DtGen *g, const DtForm *f, DtType t, int depth)
{
    if (t.rank != 0) return -1;
    if (f->kind == K_PID || f->kind == K_PLIN) {
        if (t.elem != IR_I32) return -1;
        int n = node_new(g, f->kind, NULL, t);
        if (n >= 0) g->p->nodes[n].i = rnd(g, g->p->ngrid);
        return n;
    }
    if (f->kind == K_LOOPVAR) {
        if (g->loop_stmt < 0 || t.elem != IR_I32) return -1;
        int n = node_new(g, f->kind, NULL, t);
        if (n >= 0) g->p->nodes[n].i = g->loop_stmt;
        return n;
    }
    if (t.elem != IR_I32 && t.elem != IR_F32) return -1;
    int n = node_new(g, K_PARAM, NULL, t);
    if (n >= 0) g->p->nodes[n].i = t.elem == IR_F32 ? 2 : rnd(g, 2);
    return n;
}

int dt_gen_leaf_kind(DtGen *g, int kind, DtType t)
{
    const DtForm *f = &dt_forms[dt_form_find(kind, NULL)];
    int mark = g->p->nnodes;
    return keep_if_valid(g, f->gen(g, f, t, 0), mark);
}

/* full([shape], v, T); a scalar is `(v as T)`, or sometimes the 0-d tile
 * full([], v, T) / zeros([], T) (j = 1), which the language takes as a scalar. */
static int gen_const(DtGen *g, const DtForm *f, DtType t, int depth)
{
    double v = t.rank == 0 && chance(g, 20) ? 0 : rand_literal(g, t.elem);
    int n = leaf_const(g, t, v);
    if (n >= 0 && t.rank == 0 && chance(g, 50)) g->p->nodes[n].j = 1;
    return n;
}

/* A let or loop result of exactly type t, from the statements so far. */
static int gen_ref(DtGen *g, const DtForm *f, DtType t, int depth)
{
    int cand[DT_MAX_STMTS], nc = 0;
    for (int s = 0; s < g->p->nstmts; s++) {
        const DtStmt *st = &g->p->stmts[s];
        if ((st->kind == DT_LET || st->kind == DT_FOR) && same_type(g->p->nodes[st->node].t, t)) cand[nc++] = s;
    }
    if (!nc) return -1;
    int n = node_new(g, K_REF, NULL, t);
    if (n >= 0) g->p->nodes[n].i = cand[rnd(g, nc)];
    return n;
}

/* ---- the table ---------------------------------------------------------------------- */
#define I1 DT_BIT(IR_I1)
#define F32 DT_BIT(IR_F32)
#define I32 DT_BIT(IR_I32)
#define ALL (DT_NUM | I1)
/* Column header: text, kind, result element types, weight, Tile IR op, generator.
 * A new op of an existing kind is one row: isnan/isinf/isfinite are K_MATH1 rows with
 * result type I1 (their argument is then a float), any/all K_REDUCE rows with result
 * type I1 (their input is then i1), atomic_and/or/xor rows of dt_atomics. */
const DtForm dt_forms[] = {
    {"+",          K_ARITH,     DT_NUM,         10, IR_OP_ADD,            gen_binary},
    {"-",          K_ARITH,     DT_NUM,          6, IR_OP_SUB,            gen_binary},
    {"*",          K_ARITH,     DT_NUM,          6, IR_OP_MUL,            gen_binary},
    {"/",          K_DIV,       DT_NUM,          3, IR_OP_DIV,            gen_div},
    {"%",          K_REM,       DT_NUM,          2, IR_OP_REM,            gen_div},
    {"&",          K_BITWISE,   DT_INTS | I1,    3, IR_OP_AND,            gen_binary},
    {"|",          K_BITWISE,   DT_INTS | I1,    3, IR_OP_OR,             gen_binary},
    {"^",          K_BITWISE,   DT_INTS | I1,    3, IR_OP_XOR,            gen_binary},
    {"<<",         K_SHIFT,     DT_INTS,         2, IR_OP_SHL,            gen_shift},
    {">>",         K_SHIFT,     DT_INTS,         2, IR_OP_SHR,            gen_shift},
    {"<",          K_CMP,       I1,              3, IR_OP_CMP,            gen_cmp},
    {"<=",         K_CMP,       I1,              2, IR_OP_CMP,            gen_cmp},
    {">",          K_CMP,       I1,              2, IR_OP_CMP,            gen_cmp},
    {">=",         K_CMP,       I1,              2, IR_OP_CMP,            gen_cmp},
    {"==",         K_CMP,       I1,              2, IR_OP_CMP,            gen_cmp},
    {"!=",         K_CMP,       I1,              2, IR_OP_CMP,            gen_cmp},
    {"&&",         K_LOGIC,     I1,              1, IR_OP_AND,            gen_binary},
    {"||",         K_LOGIC,     I1,              1, IR_OP_OR,             gen_binary},
    {"-",          K_NEG,       DT_NUM,          2, IR_OP_NEG,            gen_unary},
    {"~",          K_NOT,       DT_INTS,         1, IR_OP_NOT,            gen_unary},
    {"!",          K_LNOT,      I1,              1, IR_OP_NOT,            gen_unary},
    {"abs",        K_ABS,       DT_NUM,          2, IR_OP_ABS,            gen_unary},
    {"exp",        K_MATH1,     DT_FLOATS,       2, IR_OP_EXP,            gen_math1},
    {"exp2",       K_MATH1,     DT_FLOATS,       2, IR_OP_EXP2,           gen_math1},
    {"log",        K_MATH1,     DT_FLOATS,       2, IR_OP_LOG,            gen_math1},
    {"log2",       K_MATH1,     DT_FLOATS,       2, IR_OP_LOG2,           gen_math1},
    {"sqrt",       K_MATH1,     DT_FLOATS,       2, IR_OP_SQRT,           gen_math1},
    {"rsqrt",      K_MATH1,     DT_FLOATS,       2, IR_OP_RSQRT,          gen_math1},
    {"sin",        K_MATH1,     DT_FLOATS,       2, IR_OP_SIN,            gen_math1},
    {"cos",        K_MATH1,     DT_FLOATS,       2, IR_OP_COS,            gen_math1},
    {"tanh",       K_MATH1,     DT_FLOATS,       2, IR_OP_TANH,           gen_math1},
    {"erf",        K_MATH1,     DT_FLOATS,       2, IR_OP_ERF,            gen_math1},
    {"sigmoid",    K_MATH1,     DT_FLOATS,       2, IR_OP_SIGMOID,        gen_math1},
    {"floor",      K_MATH1,     DT_FLOATS,       2, IR_OP_FLOOR,          gen_math1},
    {"ceil",       K_MATH1,     DT_FLOATS,       2, IR_OP_CEIL,           gen_math1},
    {"minimum",    K_MINMAX,    DT_NUM,          2, IR_OP_MINIMUM,        gen_binary},
    {"maximum",    K_MINMAX,    DT_NUM,          2, IR_OP_MAXIMUM,        gen_binary},
    {"pow",        K_POW,       DT_FLOATS,       1, IR_OP_POW,            gen_pow},
    {"fma",        K_FMA,       DT_FLOATS,       1, IR_OP_FMA,            gen_fma},
    {"where",      K_WHERE,     ALL,             4, IR_OP_SELECT,         gen_where},
    {"as",         K_CAST,      ALL,             6, IR_OP_CONVERT,        gen_cast},
    {"sum",        K_REDUCE,    DT_NUM,          3, IR_OP_SUM,            gen_reduce},
    {"max",        K_REDUCE,    DT_NUM,          2, IR_OP_MAX,            gen_reduce},
    {"min",        K_REDUCE,    DT_NUM,          2, IR_OP_MIN,            gen_reduce},
    {"argmax",     K_REDUCE,    I32,             2, IR_OP_ARGMAX,         gen_reduce},
    {"argmin",     K_REDUCE,    I32,             2, IR_OP_ARGMIN,         gen_reduce},
    {"cumsum",     K_SCAN,      DT_NUM,          2, IR_OP_CUMSUM,         gen_scan},
    {"cumprod",    K_SCAN,      DT_NUM,          1, IR_OP_CUMPROD,        gen_scan},
    {"xor_sum",    K_REDUCE,    DT_INTS,         1, IR_OP_XOR_SUM,        gen_reduce},
    {"reduce",     K_COMBINE,   DT_NUM,          2, IR_OP_REDUCE,         gen_combine},
    {"associative_scan", K_COMBINE, DT_NUM,      2, IR_OP_SCAN,           gen_combine},
    {"[None]",     K_EXPAND,    ALL,             4, IR_OP_EXPAND_DIMS,    gen_expand},
    {"trans",      K_TRANS,     ALL,             2, IR_OP_TRANS,          gen_trans},
    {"reshape",    K_RESHAPE,   ALL,             2, IR_OP_RESHAPE,        gen_reshape},
    {"broadcast",  K_BROADCAST, ALL,             2, IR_OP_BROADCAST,      gen_broadcast},
    {"dot",        K_DOT,       F32 | DT_BIT(IR_F64) | I32 | DT_BIT(IR_F16), 4, IR_OP_DOT, gen_dot},
    {"clamp",      K_CLAMP,     DT_NUM,          2, IR_OP_MINIMUM,        gen_clamp},
    {"umulhi",     K_UMULHI,    DT_INTS,         1, IR_OP_MUL,            gen_umulhi},
    {"bitcast",    K_BITCAST,   DT_INTS,         1, IR_OP_BITCAST,        gen_bitcast},
    {"if",         K_IFX,       ALL,             2, IR_OP_IF,             gen_ifx},
    {"rand",       K_RAND,      F32,             1, IR_OP_RAND,           gen_rand},
    {"randn",      K_RAND,      F32,             1, IR_OP_RANDN,          gen_rand},
    /* leaves */
    {"load",       K_LOAD,      ALL,            10, IR_OP_LOAD,           gen_load},
    {"load_block", K_BLOCK,     ALL,             3, IR_OP_BLOCK_LOAD,     gen_block},
    {"arange",     K_AXIS,      ALL,             6, IR_OP_ARANGE,         gen_axis},
    {"program_id", K_PID,       I32,             2, IR_OP_PROGRAM_ID,     gen_scalar_leaf},
    {"plin",       K_PLIN,      I32,             0, IR_OP_PROGRAM_ID,     gen_scalar_leaf},
    {"param",      K_PARAM,     I32 | F32,       3, IR_OP_CONST,          gen_scalar_leaf},
    {"loopvar",    K_LOOPVAR,   I32,             3, IR_OP_FOR,            gen_scalar_leaf},
    {"full",       K_CONST,     ALL,             2, IR_OP_CONST,          gen_const},
    {"ref",        K_REF,       ALL,            12, IR_OP_CONST,          gen_ref},
    {"literal",    K_LIT,       ALL,             0, IR_OP_CONST,          NULL},
};
const int dt_nforms = sizeof dt_forms / sizeof *dt_forms;

/* ---- statements -------------------------------------------------------------------- */
static int stmt_new(DtProgram *p, DtStmtKind kind)
{
    if (p->nstmts == DT_MAX_STMTS) return -1;
    DtStmt *s = &p->stmts[p->nstmts];
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->mask = s->body = s->offs = -1;
    return p->nstmts++;
}

/* Some lets are a dot product: its shapes are rarely asked for otherwise. */
static int gen_dot_let(DtGen *g)
{
    static const IrElem elems[] = {IR_F32, IR_F32, IR_F32, IR_F32, IR_I32, IR_F64, IR_F16};
    DtType t = {elems[rnd(g, 7)], 2, {16 << rnd(g, 3), 16 << rnd(g, 3), 0}};
    if (chance(g, 25)) t.shape[rnd(g, 2)] = 1 << rnd(g, 4);      /* below 16: padded */
    const DtForm *f = &dt_forms[dt_form_find(K_DOT, NULL)];
    int mark = g->p->nnodes;
    return keep_if_valid(g, f->gen(g, f, t, 2), mark);
}

static void gen_let(DtGen *g)
{
    DtType t = pick_type(g, ALL);
    int n = chance(g, 12) ? gen_dot_let(g) : -1;
    if (n < 0) n = dt_gen_expr(g, t, 2 + rnd(g, 3));
    int s = n >= 0 ? stmt_new(g->p, DT_LET) : -1;
    if (s >= 0) g->p->stmts[s].node = n;
    if (s >= 0) dt_check_stmt(g->p, s);
}

/* var v = init; for i in range(0, trips) { v = combine(v, body); } */
static void gen_for(DtGen *g)
{
    DtType t = pick_type(g, ALL);
    int init = dt_gen_expr(g, t, 2);
    int s = init >= 0 ? stmt_new(g->p, DT_FOR) : -1;
    if (s < 0) return;
    DtStmt *st = &g->p->stmts[s];
    st->node = init;
    st->trips = 1 + rnd(g, 6);
    st->style = chance(g, 50) ? DT_LOOP_RANGE : rnd(g, DT_NLOOP);
    st->op = rnd(g, DT_NCOMB);
    if (t.elem == IR_I1 && (st->op == DT_COMB_ADD || st->op == DT_COMB_MAX || st->op == DT_COMB_MIN)) st->op = DT_COMB_XOR;
    if (ir_elem_is_float(t.elem) && st->op == DT_COMB_XOR) st->op = DT_COMB_ADD;
    g->loop_stmt = s;
    int mark = g->p->nnodes;
    st->body = dt_gen_expr(g, t, 3);
    g->loop_stmt = -1;
    if (st->body < 0 || !dt_check_stmt(g->p, s)) {   /* an invalid loop is not kept */
        g->p->nnodes = mark;
        g->p->nstmts--;
    }
}

/* A value to store: a let of the program (usually) or a new expression. */
static int store_value(DtGen *g)
{
    int lets[DT_MAX_STMTS], nl = 0;
    for (int s = 0; s < g->p->nstmts; s++)
        if (g->p->stmts[s].kind == DT_LET || g->p->stmts[s].kind == DT_FOR) lets[nl++] = s;
    if (nl && chance(g, 75)) {
        int s = lets[rnd(g, nl)];
        int n = node_new(g, K_REF, NULL, g->p->nodes[g->p->stmts[s].node].t);
        if (n >= 0) g->p->nodes[n].i = s;
        return n;
    }
    return dt_gen_expr(g, pick_type(g, ALL), 3);
}

static void gen_store(DtGen *g)
{
    int v = store_value(g);
    if (v < 0) return;
    DtType t = g->p->nodes[v].t;
    int s = stmt_new(g->p, DT_STORE);
    if (s < 0) return;
    DtStmt *st = &g->p->stmts[s];
    st->node = v;
    IrElem e = chance(g, 12) ? pick_elem_in(g, ALL) : t.elem;
    char name[16];
    snprintf(name, sizeof name, "out%d", s);
    st->buf = buf_find(g->p, DT_BUF_OUT, e, name);
    g->p->bufs[st->buf].count = g->programs * dt_numel(t);
    st->perm = t.rank >= 2 && chance(g, 25) ? 1 + rnd(g, t.rank >= 3 ? 5 : 1) : 0;
    st->rm_form = g->p->ngrid == 1 && st->perm == 0 && t.rank > 0 && chance(g, 50);
    if (t.rank > 0 && chance(g, 50)) {
        DtType m, unused;
        bcast_pair(g, t, &m, &unused);
        m.elem = IR_I1;
        st->mask = dt_gen_mask(g, m, 2);
    }
    if (!dt_check_stmt(g->p, s) && e != t.elem) {   /* a conversion the value cannot take */
        g->p->bufs[st->buf].elem = t.elem;
        dt_check_stmt(g->p, s);
    }
}

/* atomic_add/max/min into a small buffer, addresses shared between lanes and
 * programs: only the final memory is compared, which no order changes. */
/* The atomics whose final memory no order of the updates changes, and the element
 * types they take (atomic_and/or/xor on integers would be one row each). */
const DtAtomic dt_atomics[] = {
    {"atomic_add", DT_BIT(IR_I32) | DT_BIT(IR_U32) | DT_BIT(IR_I64) | DT_BIT(IR_U64)},
    {"atomic_max", DT_BIT(IR_I32) | DT_BIT(IR_U32) | DT_BIT(IR_I64) | DT_BIT(IR_U64) | DT_BIT(IR_F32) | DT_BIT(IR_F64)},
    {"atomic_min", DT_BIT(IR_I32) | DT_BIT(IR_U32) | DT_BIT(IR_I64) | DT_BIT(IR_U64) | DT_BIT(IR_F32) | DT_BIT(IR_F64)},
};
const int dt_natomics = sizeof dt_atomics / sizeof *dt_atomics;

static void gen_atomic(DtGen *g)
{
    int op = rnd(g, dt_natomics);
    IrElem e = pick_elem_in(g, dt_atomics[op].elems);
    DtType t = pick_type(g, DT_BIT(e));
    int v = dt_gen_expr(g, t, 2);
    int s = v >= 0 ? stmt_new(g->p, DT_ATOMIC) : -1;
    if (s < 0) return;
    DtStmt *st = &g->p->stmts[s];
    st->node = v;
    st->op = op;
    char name[16];
    snprintf(name, sizeof name, "acc%d", s);
    st->buf = buf_find(g->p, DT_BUF_ACC, e, name);
    int cnt = 1 << rnd(g, 9);
    g->p->bufs[st->buf].count = cnt;
    DtType it = t;
    it.elem = IR_I32;
    int offs = gen_offsets(g, it, 2);
    st->offs = mk(g, K_BITWISE, "&", it, offs, leaf_literal(g, IR_I32, cnt - 1), NONE);
    if (t.rank > 0 && chance(g, 40)) {
        DtType m = t;
        m.elem = IR_I1;
        st->mask = dt_gen_mask(g, m, 1);
    }
    if (st->offs < 0 || !dt_check_stmt(g->p, s)) g->p->nstmts--;
}

static void gen_grid(DtGen *g)
{
    DtProgram *p = g->p;
    int r = rnd(g, 100);
    p->ngrid = r < 60 ? 1 : r < 85 ? 2 : 3;
    p->grid[0] = p->grid[1] = p->grid[2] = 1;
    int total = 1;
    for (int d = 0; d < p->ngrid; d++) {
        p->grid[d] = 1 + rnd(g, d == 0 ? 4 : 2);
        if (total * p->grid[d] > 6) p->grid[d] = 1;
        total *= p->grid[d];
    }
    g->programs = total;
    /* Tiles of more than 512 elements per warp unroll into PTX that takes ptxas (and
     * the driver's JIT) seconds to minutes: keep the per-thread work small. */
    static const int warps[] = {1, 2, 4, 4, 4, 8};
    p->warps = warps[rnd(g, 6)];
    g->max_numel = 512 * p->warps;
}

void dt_generate(DtProgram *p, uint64_t seed)
{
    memset(p, 0, sizeof *p);
    p->seed = seed;
    DtGen g = {.rng = seed * 0x2545F4914F6CDD1Dull + 1, .p = p, .loop_stmt = -1};
    gen_grid(&g);
    int r = rnd(&g, 100);                  /* 1: 38%, 2: 38%, 3: 14%, 4: 6%, 5: 4% */
    g.main.rank = r < 38 ? 1 : r < 76 ? 2 : r < 90 ? 3 : r < 96 ? 4 : 5;
    rand_shape(&g, g.main.rank, g.main.shape);
    p->L = rnd(&g, 80);
    p->M = rnd(&g, 80);
    p->fs = (rnd(&g, 17) - 8) * 0.25;
    int nlets = 1 + rnd(&g, 4);
    for (int i = 0; i < nlets; i++) gen_let(&g);
    if (chance(&g, 35)) gen_for(&g);
    int nstores = 1 + rnd(&g, 3);
    for (int i = 0; i < nstores; i++) gen_store(&g);
    if (chance(&g, 25)) gen_atomic(&g);
    /* drawn last, so that the seeds before it keep their programs */
    p->persistent = chance(&g, 20);
    dt_analyze(p);
}

/* ---- strings ----------------------------------------------------------------------- */
void dt_str_add(DtStr *s, const char *fmt, ...)
{
    va_list ap, aq;
    va_start(ap, fmt);
    va_copy(aq, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (s->len + (size_t)n + 1 > s->cap) {
        s->cap = (s->len + (size_t)n + 1) * 2;
        s->s = realloc(s->s, s->cap);
        if (!s->s) abort();
    }
    vsnprintf(s->s + s->len, (size_t)n + 1, fmt, aq);
    va_end(aq);
    s->len += (size_t)n;
}
