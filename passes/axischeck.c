/* The axis analysis checked against the interpreter (axisinfo.h): runs a kernel and,
 * after every op, tests each fact the analysis claims for the op's result on the
 * values the interpreter computed. The analysis feeds vector widths and the one
 * compare per group of equal mask elements in codegen, so a fact that does not hold
 * is a miscompile waiting for an input: it once claimed `rn[None, :] <= rm[:, None]`
 * constant along its rows, and a causal mask came out wrong on the GPU while every
 * CPU test passed. Pointers are modelled as 16 + offset * element size: a base that
 * is a multiple of 16 and of nothing larger, the weakest promise an aligned pointer
 * argument makes. Only the first failed claim is reported. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "passes/axischeck.h"

#include "ir/arena.h"
#include "ir/scalar.h"

#define PTR_BASE 16

typedef struct Check {
    const IrFunc *f;
    const AxisInfo *ai;
    DiagList *diags;
    bool failed;
} Check;

static int64_t stride_of(const IrType *t, int d)
{
    int64_t s = 1;
    for (int e = d + 1; e < t->rank; e++) s *= t->shape[e];
    return s;
}

/* The value at row-major index k as an integer (pointers: their byte address). */
static int64_t int_at(const InterpValue *v, int64_t k)
{
    if (v->type->elem != IR_PTR) return v->ints[k];
    return PTR_BASE + v->ints[k] * ir_elem_bytes(v->type->pointee);
}

static bool same_elem(const InterpValue *v, int64_t a, int64_t b)
{
    if (v->floats) {
        double x = v->floats[a], y = v->floats[b];
        return (x != x && y != y) || !memcmp(&x, &y, sizeof x);
    }
    return v->ints[a] == v->ints[b] && (!v->bufs || v->bufs[a] == v->bufs[b]);
}

/* v[k] + j as the value's own type computes it (integers wrap, pointers step by an
 * element). */
static bool is_successor(const InterpValue *v, int64_t k, int64_t j, int64_t want_at)
{
    if (v->type->elem == IR_PTR)
        return v->bufs[k] == v->bufs[want_at] && v->ints[want_at] == v->ints[k] + j;
    int64_t want = (int64_t)((uint64_t)v->ints[k] + (uint64_t)j);
    return v->ints[want_at] == interp_int_norm(v->type->elem, want);
}

static void coords_str(const IrType *t, int64_t k, char *buf, size_t n)
{
    size_t at = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < t->rank && at < n; d++)
        at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, d ? ", " : "", (k / stride_of(t, d)) % t->shape[d]);
    if (at < n) snprintf(buf + at, n - at, "]");
}

static void report(Check *c, const IrOp *op, uint32_t r, const InterpValue *v, const char *fact,
                   int d, int64_t claim, int64_t k, const int64_t pid[3])
{
    char at[96], ty[64];
    coords_str(v->type, k, at, sizeof at);
    ir_type_str(v->type, ty, sizeof ty);
    diag_add(c->diags, DIAG_ERROR, op->loc,
               "axis analysis claims %s %" PRId64 " along axis %d of %%%u (%s, %s), but it fails at element %s in program (%" PRId64 ", %" PRId64 ", %" PRId64 ")",
               fact, claim, d, op->results[r], ir_op_info[op->code].text, ty, at, pid[0], pid[1], pid[2]);
    c->failed = true;
}

/* The group starts along axis d for groups of size g: every k whose coordinate along d
 * is a multiple of g. Returns the first element that breaks `ok` for some j < g, or -1. */
typedef bool (*GroupTest)(const InterpValue *v, int64_t start, int64_t j, int64_t at);

static bool test_const(const InterpValue *v, int64_t start, int64_t j, int64_t at)
{
    (void)j;
    return same_elem(v, start, at);
}

static int64_t first_break(const InterpValue *v, int d, int64_t g, GroupTest ok)
{
    int64_t size = v->type->rank ? v->type->shape[d] : 1, st = v->type->rank ? stride_of(v->type, d) : 1;
    for (int64_t k = 0; k < v->n; k++) {
        if ((k / st) % size % g) continue;
        for (int64_t j = 1; j < g; j++)
            if (!ok(v, k, j, k + j * st)) return k + j * st;
    }
    return -1;
}

static int64_t first_indivisible(const InterpValue *v, int d, int64_t c, int64_t g)
{
    int64_t size = v->type->rank ? v->type->shape[d] : 1, st = v->type->rank ? stride_of(v->type, d) : 1;
    for (int64_t k = 0; k < v->n; k++)
        if ((k / st) % size % c == 0 && int_at(v, k) % g) return k;
    return -1;
}

static void check_value(Check *c, const IrOp *op, uint32_t r, const InterpValue *v, const int64_t pid[3])
{
    const AxisInfo *a = &c->ai[op->results[r]];
    int naxes = v->type->rank ? v->type->rank : 1;
    bool integral = !v->floats && v->type->elem != IR_I1;
    for (int d = 0; d < naxes && !c->failed; d++) {
        int64_t k = first_break(v, d, a->constancy[d], test_const);
        if (k >= 0) return report(c, op, r, v, "constancy", d, a->constancy[d], k, pid);
        if (!integral) continue;
        k = first_break(v, d, a->contiguity[d], is_successor);
        if (k >= 0) return report(c, op, r, v, "contiguity", d, a->contiguity[d], k, pid);
        k = first_indivisible(v, d, a->contiguity[d], a->divisibility[d]);
        if (k >= 0) return report(c, op, r, v, "divisibility", d, a->divisibility[d], k, pid);
    }
}

static void observe(void *ud, const IrOp *op, uint32_t r, const InterpValue *v, const int64_t pid[3])
{
    Check *c = ud;
    if (!c->failed && op->results[r] < c->f->nvalues) check_value(c, op, r, v, pid);
}

bool axisinfo_check_facts(const IrFunc *f, const AxisInfo *ai, const InterpArg *args, uint32_t nargs,
                          const int64_t grid[3], const InterpOptions *base, DiagList *diags)
{
    Check c = {f, ai, diags, false};
    InterpOptions io = base ? *base : (InterpOptions){0};
    io.observe = observe;
    io.observe_ud = &c;
    return interp_run(f, args, nargs, grid, &io, diags) && !c.failed;
}

bool axisinfo_check_run(const IrFunc *f, uint64_t aligned_params, const InterpArg *args, uint32_t nargs,
                        const int64_t grid[3], const InterpOptions *base, DiagList *diags)
{
    AxisInfo *ai = axisinfo_analyze(f, aligned_params);
    if (!ai) {
        diag_add(diags, DIAG_ERROR, f->loc, "out of memory in the axis analysis");
        return false;
    }
    bool ok = axisinfo_check_facts(f, ai, args, nargs, grid, base, diags);
    tl_free(ai);
    return ok;
}
