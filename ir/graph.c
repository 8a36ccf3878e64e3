/* The graph IR's data: symbolic sizes, tensor types, the one promotion rule, the op
 * table, construction, and the per-op type rules that the verifier and the builder
 * share (ir_gop_check). See ir/graph.h. */
#include "graph.h"

#include <stdlib.h>
#include <string.h>

/* ---- sizes ------------------------------------------------------------------------ */

/* Monomials in print order: by their names lexicographically (a prefix first, so
 * S < S*T < T), the constant last. */
static int mono_cmp(const IrMono *x, const IrMono *y)
{
    if (!x->n || !y->n) return (int)!x->n - (int)!y->n;
    for (uint32_t i = 0; i < x->n && i < y->n; i++) {
        int c = strcmp(x->names[i], y->names[i]);
        if (c) return c;
    }
    return (x->n > y->n) - (x->n < y->n);
}

static int mono_qcmp(const void *x, const void *y) { return mono_cmp(x, y); }

/* c + ms[0..n): sorts, adds up equal monomials, folds constant ones into c and drops
 * zero ones; false on overflow. */
static bool normalize(int64_t c, IrMono *ms, uint32_t n, IrSize *out)
{
    qsort(ms, n, sizeof *ms, mono_qcmp);
    uint32_t w = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!ms[i].n) {
            if (__builtin_add_overflow(c, ms[i].k, &c)) return false;
            continue;
        }
        if (w && mono_cmp(&ms[w - 1], &ms[i]) == 0) {
            if (__builtin_add_overflow(ms[w - 1].k, ms[i].k, &ms[w - 1].k)) return false;
        } else ms[w++] = ms[i];
        if (ms[w - 1].k == 0) w--;
    }
    *out = (IrSize){c, w, ms};
    return true;
}

IrSize ir_size_const(int64_t c) { return (IrSize){c, 0, NULL}; }

IrSize ir_size_name(Arena *a, const char *name)
{
    IrMono *m = arena_alloc(a, sizeof *m);
    const char **nm = arena_alloc(a, sizeof *nm);
    nm[0] = name;
    *m = (IrMono){1, 1, nm};
    return (IrSize){0, 1, m};
}

bool ir_size_add(Arena *a, IrSize x, IrSize y, int64_t k, IrSize *out)
{
    IrMono *ms = arena_alloc(a, (x.n + y.n + 1) * sizeof *ms);
    if (x.n) memcpy(ms, x.m, x.n * sizeof *ms);
    for (uint32_t i = 0; i < y.n; i++) {
        ms[x.n + i] = y.m[i];
        if (__builtin_mul_overflow(y.m[i].k, k, &ms[x.n + i].k)) return false;
    }
    int64_t c;
    if (__builtin_mul_overflow(y.c, k, &c) || __builtin_add_overflow(x.c, c, &c)) return false;
    return normalize(c, ms, x.n + y.n, out);
}

static bool mono_mul(Arena *a, const IrMono *x, const IrMono *y, IrMono *out)
{
    const char **nm = arena_alloc(a, (x->n + y->n + 1) * sizeof *nm);
    uint32_t i = 0, j = 0, n = 0;
    while (i < x->n || j < y->n)
        nm[n++] = j == y->n || (i < x->n && strcmp(x->names[i], y->names[j]) <= 0) ? x->names[i++]
                                                                                  : y->names[j++];
    *out = (IrMono){0, n, nm};
    return !__builtin_mul_overflow(x->k, y->k, &out->k);
}

/* (x.c + sum x.m) * (y.c + sum y.m), the constant parts as monomials without names. */
bool ir_size_mul(Arena *a, IrSize x, IrSize y, IrSize *out)
{
    IrMono *xs = arena_alloc(a, (x.n + 1) * sizeof *xs), *ys = arena_alloc(a, (y.n + 1) * sizeof *ys);
    if (x.n) memcpy(xs, x.m, x.n * sizeof *xs);
    if (y.n) memcpy(ys, y.m, y.n * sizeof *ys);
    xs[x.n] = (IrMono){x.c, 0, NULL};
    ys[y.n] = (IrMono){y.c, 0, NULL};
    uint32_t nx = x.n + 1, ny = y.n + 1;
    IrMono *ms = arena_alloc(a, nx * ny * sizeof *ms);
    for (uint32_t i = 0; i < nx; i++)
        for (uint32_t j = 0; j < ny; j++)
            if (!mono_mul(a, &xs[i], &ys[j], &ms[i * ny + j])) return false;
    return normalize(0, ms, nx * ny, out);
}

bool ir_size_eq(IrSize x, IrSize y)
{
    if (x.c != y.c || x.n != y.n) return false;
    for (uint32_t i = 0; i < x.n; i++)
        if (x.m[i].k != y.m[i].k || mono_cmp(&x.m[i], &y.m[i]) != 0) return false;
    return true;
}

bool ir_size_is_const(IrSize x, int64_t *c)
{
    if (x.n) return false;
    *c = x.c;
    return true;
}

bool ir_size_numel(Arena *a, uint32_t rank, const IrSize *dims, IrSize *out)
{
    IrSize p = ir_size_const(1);
    for (uint32_t i = 0; i < rank; i++)
        if (!ir_size_mul(a, p, dims[i], &p)) return false;
    *out = p;
    return true;
}

const char *ir_size_str(Arena *a, IrSize x)
{
    if (x.n == 0) return arena_printf(a, "%lld", (long long)x.c);
    const char *s = "";
    for (uint32_t i = 0; i < x.n; i++) {
        const IrMono *m = &x.m[i];
        int64_t k = m->k < 0 ? -m->k : m->k;
        const char *sign = m->k < 0 ? "-" : i ? "+" : "";
        const char *t = m->n && k == 1 ? "" : arena_printf(a, "%lld%s", (long long)k, m->n ? "*" : "");
        for (uint32_t j = 0; j < m->n; j++) t = arena_printf(a, "%s%s%s", t, j ? "*" : "", m->names[j]);
        s = arena_printf(a, "%s%s%s", s, sign, t);
    }
    return x.c ? arena_printf(a, "%s%+lld", s, (long long)x.c) : s;
}

static bool lookup(const char *name, const char *const *names, const int64_t *vals, uint32_t n,
                   int64_t *v)
{
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return *v = vals[i], true;
    return false;
}

bool ir_size_eval(IrSize x, const char *const *names, const int64_t *vals, uint32_t n,
                  int64_t *out)
{
    int64_t s = x.c;
    for (uint32_t i = 0; i < x.n; i++) {
        int64_t t = x.m[i].k, v;
        for (uint32_t j = 0; j < x.m[i].n; j++)
            if (!lookup(x.m[i].names[j], names, vals, n, &v) || __builtin_mul_overflow(t, v, &t))
                return false;
        if (__builtin_add_overflow(s, t, &s)) return false;
    }
    *out = s;
    return true;
}

/* ---- tensor types ------------------------------------------------------------------ */

bool ir_ttype_eq(const IrTensorType *x, const IrTensorType *y)
{
    if (x->elem != y->elem || x->rank != y->rank) return false;
    for (uint32_t i = 0; i < x->rank; i++)
        if (!ir_size_eq(x->dims[i], y->dims[i])) return false;
    return true;
}

const char *ir_shape_str(Arena *a, uint32_t rank, const IrSize *dims)
{
    const char *s = "[";
    for (uint32_t i = 0; i < rank; i++)
        s = arena_printf(a, "%s%s%s", s, i ? ", " : "", ir_size_str(a, dims[i]));
    return arena_printf(a, "%s]", s);
}

const char *ir_ttype_str(Arena *a, const IrTensorType *t)
{
    const char *e = ir_elem_name(t->elem);
    return t->rank ? arena_printf(a, "%s%s", e, ir_shape_str(a, t->rank, t->dims)) : e;
}

static bool size_is_one(IrSize x)
{
    int64_t c;
    return ir_size_is_const(x, &c) && c == 1;
}

bool ir_broadcast_shapes(Arena *a, uint32_t na, const IrSize *da, uint32_t nb,
                         const IrSize *db, uint32_t *n, const IrSize **out)
{
    uint32_t r = na > nb ? na : nb;
    IrSize *d = arena_alloc(a, (r + 1) * sizeof *d);
    for (uint32_t i = 0; i < r; i++) {
        const IrSize *x = i < na ? &da[na - 1 - i] : NULL, *y = i < nb ? &db[nb - 1 - i] : NULL;
        if (!x || (y && size_is_one(*x))) d[r - 1 - i] = *y;
        else if (!y || size_is_one(*y) || ir_size_eq(*x, *y)) d[r - 1 - i] = *x;
        else return false;
    }
    *n = r;
    *out = d;
    return true;
}

/* ---- promotion ----------------------------------------------------------------------- */

static IrElem promote_floats(IrElem a, IrElem b)
{
    int ba = ir_elem_bits(a), bb = ir_elem_bits(b);
    if ((a == IR_F16 && b == IR_BF16) || (a == IR_BF16 && b == IR_F16)) return IR_F32;
    if (ba == 8 && bb == 8) return IR_F16;   /* e4m3 with e5m2: f16 holds both exactly */
    return ba >= bb ? a : b;
}

IrElem ir_promote(IrElem a, IrElem b)
{
    if (a == b) return a;
    bool fa = ir_elem_is_float(a), fb = ir_elem_is_float(b);
    if (fa != fb) return fa ? a : b;
    if (fa) return promote_floats(a, b);
    if (a == IR_I1 || b == IR_I1) return a == IR_I1 ? b : a;
    int ba = ir_elem_bits(a), bb = ir_elem_bits(b);
    if (ba != bb) return ba > bb ? a : b;
    return ir_elem_is_signed(a) ? b : a;    /* same width: unsigned wins */
}

char ir_elementwise_kind(const char *name, int *arity)
{
    static const struct { const char *name; int arity; char kind; } ew[] = {
#define EW(n, ar, top, gop, kind) {n, ar, kind},
#include "elementwise.def"
#undef EW
    };
    for (size_t i = 0; i < sizeof ew / sizeof *ew; i++)
        if (!strcmp(ew[i].name, name)) return *arity = ew[i].arity, ew[i].kind;
    return 0;
}

/* ---- the op table ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int nin, nout;
    IrGAttrKind attr;
    char family;
} gops[] = {
#define GOP(n, t, i, o, a, f) {t, i, o, a, f},
#include "graph_ops.def"
#undef GOP
};

const char *const ir_gcmp_names[6] = {"eq", "ne", "lt", "le", "gt", "ge"};

const char *ir_gop_name(IrGOpKind k) { return gops[k].name; }
int ir_gop_nin(IrGOpKind k) { return gops[k].nin; }
int ir_gop_nout(IrGOpKind k) { return gops[k].nout; }
IrGAttrKind ir_gop_attr(IrGOpKind k) { return gops[k].attr; }
char ir_gop_family(IrGOpKind k) { return gops[k].family; }

bool ir_gop_from_name(const char *s, IrGOpKind *out)
{
    for (int k = 0; k < IR_GOP_COUNT; k++)
        if (strcmp(gops[k].name, s) == 0) return *out = (IrGOpKind)k, true;
    return false;
}

/* ---- construction ------------------------------------------------------------------------- */

IrGraphModule *ir_gmodule_create(Arena *a)
{
    IrGraphModule *m = arena_alloc(a, sizeof *m);
    m->arena = a;
    return m;
}

void ir_gmodule_destroy(IrGraphModule *m)
{
    if (!m) return;
    for (size_t i = 0; i < m->graphs.len; i++) {
        vec_free(&m->graphs.data[i]->values);
        vec_free(&m->graphs.data[i]->ops);
        vec_free(&m->graphs.data[i]->params);
    }
    vec_free(&m->graphs);
}

IrGraph *ir_graph_create(IrGraphModule *m, const char *name, Loc loc)
{
    IrGraph *g = arena_alloc(m->arena, sizeof *g);
    g->arena = m->arena;
    g->name = arena_strdup(m->arena, name);
    g->loc = loc;
    g->loss = g->seed = g->dloss = IR_GNONE;
    vec_push(&m->graphs, g);
    return g;
}

IrGraph *ir_gmodule_find(const IrGraphModule *m, const char *name)
{
    for (size_t i = 0; i < m->graphs.len; i++)
        if (strcmp(m->graphs.data[i]->name, name) == 0) return m->graphs.data[i];
    return NULL;
}

uint32_t ir_graph_param(IrGraph *g, const IrTensorType *t, const char *name)
{
    uint32_t id = (uint32_t)g->values.len;
    vec_push(&g->values, ((IrGValue){*t, name, IR_GNONE, (uint32_t)g->params.len}));
    vec_push(&g->params, id);
    return id;
}

uint32_t ir_graph_op(IrGraph *g, IrGOpKind k, Loc loc, const uint32_t *in, uint32_t nin,
                     const IrTensorType *out, uint32_t nout)
{
    uint32_t idx = (uint32_t)g->ops.len, *ins = arena_alloc(g->arena, (nin + 1) * sizeof *ins);
    uint32_t *outs = arena_alloc(g->arena, (nout + 1) * sizeof *outs);
    if (nin) memcpy(ins, in, nin * sizeof *ins);
    for (uint32_t i = 0; i < nout; i++) {
        outs[i] = (uint32_t)g->values.len;
        vec_push(&g->values, ((IrGValue){out[i], NULL, idx, i}));
    }
    vec_push(&g->ops, ((IrGOp){.kind = k, .loc = loc, .nin = nin, .nout = nout, .in = ins, .out = outs}));
    return idx;
}

static bool has_size(const IrGraph *g, const char *name)
{
    for (uint32_t i = 0; i < g->nsizes; i++)
        if (strcmp(g->sizes[i], name) == 0) return true;
    return false;
}

void ir_graph_collect_sizes(IrGraph *g, Arena *a)
{
    uint32_t cap = 0;
    for (size_t p = 0; p < g->params.len; p++) {
        const IrTensorType *t = &g->values.data[g->params.data[p]].type;
        for (uint32_t i = 0; i < t->rank; i++)
            for (uint32_t j = 0; j < t->dims[i].n; j++) cap += t->dims[i].m[j].n;
    }
    g->sizes = arena_alloc(a, (cap + 1) * sizeof *g->sizes);
    g->nsizes = 0;
    for (size_t p = 0; p < g->params.len; p++) {
        const IrTensorType *t = &g->values.data[g->params.data[p]].type;
        for (uint32_t i = 0; i < t->rank; i++)
            for (uint32_t j = 0; j < t->dims[i].n; j++)
                for (uint32_t k = 0; k < t->dims[i].m[j].n; k++)
                    if (!has_size(g, t->dims[i].m[j].names[k])) g->sizes[g->nsizes++] = t->dims[i].m[j].names[k];
    }
}

bool ir_conv2d_shape(Arena *a, const IrTensorType *x, const IrTensorType *w, const uint32_t stride[2],
                     const uint32_t pad[2], bool nhwc, IrSize out[4], const char **err)
{
    if (x->rank != 4 || w->rank != 4) {
        *err = arena_printf(a, "conv2d needs a rank-4 input and weight, not %s and %s", ir_ttype_str(a, x),
                            ir_ttype_str(a, w));
        return false;
    }
    uint32_t cx = nhwc ? 3 : 1, cw = nhwc ? 3 : 1, hx = nhwc ? 1 : 2, hw = nhwc ? 1 : 2;
    if (!ir_size_eq(x->dims[cx], w->dims[cw])) {
        *err = arena_printf(a, "conv2d: the input has %s channels, the weight %s (%s layout: %s)",
                            ir_size_str(a, x->dims[cx]), ir_size_str(a, w->dims[cw]), nhwc ? "NHWC" : "NCHW",
                            nhwc ? "x [N, H, W, C], w [K, R, S, C]" : "x [N, C, H, W], w [K, C, R, S]");
        return false;
    }
    IrSize o[2];
    for (int i = 0; i < 2; i++) {
        IrSize n;
        int64_t c;
        const char *axis = i ? "width" : "height";
        if (stride[i] < 1 || !ir_size_add(a, x->dims[hx + i], ir_size_const(2 * (int64_t)pad[i]), 1, &n) ||
            !ir_size_add(a, n, w->dims[hw + i], -1, &n)) {
            *err = arena_printf(a, "conv2d: the %s overflows", axis);
            return false;
        }
        if (ir_size_is_const(n, &c)) {
            if (c < 0) {
                *err = arena_printf(a, "conv2d: the filter's %s %s exceeds the padded input's %s", axis,
                                    ir_size_str(a, w->dims[hw + i]), ir_size_str(a, x->dims[hx + i]));
                return false;
            }
            o[i] = ir_size_const(c / stride[i] + 1);
        } else if (stride[i] == 1) {
            if (!ir_size_add(a, n, ir_size_const(1), 1, &o[i])) return *err = "conv2d: the size overflows", false;
        } else {
            *err = arena_printf(a, "conv2d with a stride of %u needs a known input %s (and filter %s), not %s",
                                stride[i], axis, axis, ir_size_str(a, x->dims[hx + i]));
            return false;
        }
    }
    out[0] = x->dims[0];
    out[nhwc ? 1 : 2] = o[0];
    out[nhwc ? 2 : 3] = o[1];
    out[nhwc ? 3 : 1] = w->dims[0];
    return true;
}

IrGraph *ir_graph_clone(IrGraphModule *m, const IrGraph *g)
{
    IrGraph *c = ir_graph_create(m, g->name, g->loc);
    c->nsizes = g->nsizes;
    c->sizes = g->sizes;
    c->nfwd = g->nfwd;
    c->nregions = g->nregions;
    c->remat = g->remat;
    c->lce_chunk = g->lce_chunk;
    c->bwd_split_rows = g->bwd_split_rows;
    c->loss = g->loss, c->seed = g->seed, c->dloss = g->dloss;
    for (size_t i = 0; i < g->params.len; i++) vec_push(&c->params, g->params.data[i]);
    for (size_t i = 0; i < g->values.len; i++) vec_push(&c->values, g->values.data[i]);
    for (size_t i = 0; i < g->ops.len; i++) vec_push(&c->ops, g->ops.data[i]);
    return c;
}

/* ---- recomputation options ------------------------------------------------------------- */

const char *const ir_remat_policy_names[3] = {"save-all", "selective", "checkpoint"};

bool ir_remat_policy_from_name(const char *s, IrRematPolicy *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, ir_remat_policy_names[i])) return *out = (IrRematPolicy)i, true;
    return false;
}

/* A byte count's unit suffix, as a factor; 0 for an unknown one. */
static double unit_factor(const char *u)
{
    static const struct { const char *s; double f; } units[] = {
        {"", 1}, {"B", 1}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
        {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcmp(u, units[i].s)) return units[i].f;
    return 0;
}

bool ir_remat_parse_budget(const char *s, IrRemat *r)
{
    char *end;
    if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
    double v = strtod(s, &end);
    if (end == s || !(v >= 0) || v > 1e18) return false;
    bool point = memchr(s, '.', (size_t)(end - s)) != NULL && !strpbrk(s, "eE");
    if (!*end && point) {   /* a fraction of save-all's saved bytes */
        if (!(v > 0 && v <= 1)) return false;
        r->budget_kind = IR_BUDGET_FRACTION;
        r->budget = v;
        return true;
    }
    double f = unit_factor(end);
    if (f == 0) return false;
    r->budget_kind = IR_BUDGET_BYTES;
    r->budget = v * f;
    return true;
}

const char *ir_remat_str(Arena *a, const IrRemat *r)
{
    const char *p = ir_remat_policy_names[r->policy];
    if (r->budget_kind == IR_BUDGET_FRACTION) return arena_printf(a, "%s, budget %g of save-all", p, r->budget);
    if (r->budget_kind == IR_BUDGET_BYTES) return arena_printf(a, "%s, budget %.0f bytes", p, r->budget);
    return p;
}

IrElem ir_lce_grad_elem(const IrGraph *g, const IrGOp *op)
{
    if (g->values.data[op->in[IR_LCE_X]].type.elem == IR_BF16) return IR_BF16;
    return g->values.data[op->in[IR_LCE_DY]].type.elem;
}

IrElem ir_lce_scratch_elem(const IrGraph *g, const IrGOp *op) { return ir_lce_grad_elem(g, op); }

IrElem ir_gstats_elem(const IrGraph *g, const IrGKernel *K)
{
    for (uint32_t i = 0; i < K->nops; i++) {
        const IrGOp *op = &g->ops.data[K->ops[i]];
        if (op->kind == IR_GOP_GLOBAL_NORM) return g->values.data[op->out[0]].type.elem;
    }
    return IR_F32;
}

int64_t ir_bwd_split_rows(const IrGraph *g)
{
    return g->bwd_split_rows ? (g->bwd_split_rows - 1 ? g->bwd_split_rows - 1 : -1) : IR_BWD_SPLIT_ROWS;
}
