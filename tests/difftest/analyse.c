/* The analysis of generated programs: for every node an interval of its values, an
 * error bound against the GPU, and validity.
 *
 * "exact" means the interpreter and the GPU must agree bit for bit: integers,
 * + - * / and sqrt on floats (correctly rounded on both), fma on f32/f64, conversions,
 * min/max, select, shape ops, max/min/argmax reductions, rand, loads and stores.
 * Anything else (math functions, float sums, scans and dots, whose order differs) is
 * inexact: its error bound grows as the rules below say, and every op adds a rounding
 * of its type (dt_ulp * magnitude). Invalid: a discontinuous op (comparison, floor,
 * float -> int, argmax, fmod) on an inexact value; an inexact value whose interval
 * is not well inside its type's range; math functions outside a safe domain. */
#include <math.h>
#include <string.h>

#include "internal.h"

/* ---- element types ----------------------------------------------------------------- */
static double float_max(IrElem e)
{
    switch (e) {
    case IR_F16: return 65504.0;
    case IR_BF16: return 3.38e38;
    case IR_F32: return 3.4e38;
    case IR_F8E4M3: return 448.0;
    case IR_F8E5M2: return 57344.0;
    default: return 1.7e308;
    }
}

static double elem_min(IrElem e)
{
    if (ir_elem_is_float(e)) return -INFINITY;
    if (!ir_elem_is_signed(e)) return 0;
    return -ldexp(1.0, ir_elem_bits(e) - 1);
}

static double elem_max(IrElem e)
{
    if (ir_elem_is_float(e)) return INFINITY;
    if (e == IR_I1) return 1;
    return ldexp(1.0, ir_elem_bits(e) - ir_elem_is_signed(e)) - 1;
}

/* One rounding of type e, relative (twice the unit roundoff). */
double dt_ulp(IrElem e)
{
    switch (e) {
    case IR_F16: return ldexp(1.0, -10);
    case IR_BF16: return ldexp(1.0, -7);
    case IR_F32: return ldexp(1.0, -23);
    case IR_F64: return ldexp(1.0, -52);
    case IR_F8E4M3: return ldexp(1.0, -3);
    case IR_F8E5M2: return ldexp(1.0, -2);
    default: return 0;
    }
}

IrElem dt_promote(IrElem a, IrElem b)
{
    if (a == b) return a;
    bool fa = ir_elem_is_float(a), fb = ir_elem_is_float(b);
    if (fa != fb) return fa ? a : b;
    int ba = ir_elem_bits(a), bb = ir_elem_bits(b);
    if (fa) {
        if ((a == IR_F16 && b == IR_BF16) || (a == IR_BF16 && b == IR_F16)) return IR_F32;
        if (ba == 8 && bb == 8) return IR_F16;
        return ba > bb ? a : b;
    }
    if (a == IR_I1 || b == IR_I1) return a == IR_I1 ? b : a;
    if (ba != bb) return ba > bb ? a : b;
    return ir_elem_is_signed(a) ? b : a;
}

IrElem dt_sum_elem(IrElem e)
{
    switch (e) {
    case IR_I1: case IR_I8: case IR_I16: case IR_U8: case IR_U16: return IR_I32;
    default: return e;
    }
}

DtType dt_bcast(DtType a, DtType b)
{
    DtType r = a.rank >= b.rank ? a : b;
    r.elem = a.elem;
    for (int k = 0; k < r.rank; k++) {
        int ka = k - (r.rank - a.rank), kb = k - (r.rank - b.rank);
        int sa = ka >= 0 ? a.shape[ka] : 1, sb = kb >= 0 ? b.shape[kb] : 1;
        r.shape[k] = sa > sb ? sa : sb;
    }
    return r;
}

/* ---- intervals ---------------------------------------------------------------------- */
static double mag(const DtNode *n) { return fmax(fabs(n->lo), fabs(n->hi)); }

/* Sets n's interval, clamped to its type: integers that may wrap get the whole range,
 * floats beyond the largest finite value become infinite. */
static void set_iv(DtNode *n, double lo, double hi)
{
    IrElem e = n->t.elem;
    if (isnan(lo) || isnan(hi)) lo = -INFINITY, hi = INFINITY;
    if (!ir_elem_is_float(e) && (lo < elem_min(e) || hi > elem_max(e))) lo = elem_min(e), hi = elem_max(e);
    if (ir_elem_is_float(e)) {
        if (lo < -float_max(e)) lo = -INFINITY;
        if (hi > float_max(e)) hi = INFINITY;
    }
    n->lo = lo;
    n->hi = hi;
}

static void iv_mul(const DtNode *a, const DtNode *b, double *lo, double *hi)
{
    double c[4] = {a->lo * b->lo, a->lo * b->hi, a->hi * b->lo, a->hi * b->hi};
    *lo = *hi = c[0];
    for (int i = 1; i < 4; i++) {
        if (isnan(c[i])) c[i] = 0;   /* 0 * inf: the bound comes from the others */
        *lo = fmin(*lo, c[i]);
        *hi = fmax(*hi, c[i]);
    }
}

/* Finishes an op: exact results have no error; inexact ones add one rounding of the
 * result type and must stay finite, well inside the type's range. */
static bool finish(DtNode *n, double err, bool exact)
{
    n->err = 0;
    n->exact = exact || !ir_elem_is_float(n->t.elem);
    if (n->exact) return n->valid = true;
    n->err = err + dt_ulp(n->t.elem) * mag(n);
    n->valid = isfinite(n->err) && mag(n) <= float_max(n->t.elem) / 4;
    return n->valid;
}

/* n stays valid only if cond holds (a discontinuous op needs exact operands). */
static bool need(DtNode *n, bool cond)
{
    if (!cond) n->valid = false;
    return n->valid;
}

/* ---- per kind -------------------------------------------------------------------------- */
static bool an_arith(DtNode *n, const DtNode *a, const DtNode *b, const char *op)
{
    double lo, hi, err;
    if (op[0] == '*') {
        iv_mul(a, b, &lo, &hi);
        err = a->err * mag(b) + b->err * mag(a);
    } else if (op[0] == '+') {
        lo = a->lo + b->lo, hi = a->hi + b->hi, err = a->err + b->err;
    } else {
        lo = a->lo - b->hi, hi = a->hi - b->lo, err = a->err + b->err;
    }
    set_iv(n, lo, hi);
    return finish(n, err, a->exact && b->exact);
}

static bool an_div(DtNode *n, const DtNode *a, const DtNode *b)
{
    bool exact = a->exact && b->exact;
    if (!ir_elem_is_float(n->t.elem)) {
        set_iv(n, -mag(a), mag(a));
        return finish(n, 0, true);
    }
    double dmin = b->lo > 0 ? b->lo : b->hi < 0 ? -b->hi : 0;
    if (!exact && dmin < 0.5) return n->valid = false;
    double m = dmin > 0 ? mag(a) / dmin : INFINITY;
    set_iv(n, -m, m);
    return finish(n, dmin > 0 ? (a->err + m * b->err) / dmin : INFINITY, exact);
}

static bool an_rem(DtNode *n, const DtNode *a, const DtNode *b)
{
    double m = fmin(mag(a), mag(b));
    set_iv(n, a->lo < 0 ? -m : 0, m);
    finish(n, 0, true);
    return need(n, a->exact && b->exact);
}

static bool an_bitwise(DtNode *n, const DtNode *a, const DtNode *b, const char *op)
{
    if (n->t.elem == IR_I1) set_iv(n, 0, 1);
    else if (op[0] == '&' && b->lo >= 0 && b->lo == b->hi) set_iv(n, 0, b->hi);
    else if (op[0] == '|' && a->lo >= 0 && b->lo >= 0 && a->hi < 16 && b->hi < 16) set_iv(n, 0, 15);
    else set_iv(n, elem_min(n->t.elem), elem_max(n->t.elem));
    return finish(n, 0, true);
}

static bool an_cmp(DtNode *n, const DtNode *a, const DtNode *b)
{
    set_iv(n, 0, 1);
    finish(n, 0, true);
    return need(n, a->exact && b->exact);
}

/* Math functions: the GPU's may differ from libm by a few ulp (16 allowed), and the
 * argument's error is propagated through the derivative's bound. */
static bool an_math(DtNode *n, const DtNode *a, IrOpcode op)
{
    double lo = a->lo, hi = a->hi, e = a->err, d = 1;
    bool exact = false;
    if (n->t.elem == IR_I1) {   /* float predicates (isnan, isinf, ...): exact */
        set_iv(n, 0, 1);
        return finish(n, 0, true);
    }
    switch (op) {
    case IR_OP_EXP: if (hi > 20) return n->valid = false; lo = exp(lo), hi = exp(hi), d = hi; break;
    case IR_OP_EXP2: if (hi > 28) return n->valid = false; lo = exp2(lo), hi = exp2(hi), d = hi; break;
    case IR_OP_LOG: case IR_OP_LOG2:
        if (lo < 0.25) return n->valid = false;
        d = 1 / lo, lo = log2(lo) - 1, hi = log2(hi) + 1;
        break;
    case IR_OP_SQRT:
        exact = a->exact;
        if (!exact && lo < 0.25) return n->valid = false;
        d = lo > 0 ? 0.5 / sqrt(lo) : 0, lo = 0, hi = sqrt(fmax(hi, 0));
        break;
    case IR_OP_RSQRT: if (lo < 0.25) return n->valid = false; d = 0.5 * pow(lo, -1.5), hi = 1 / sqrt(lo), lo = 0; break;
    case IR_OP_SIN: case IR_OP_COS: if (fmax(fabs(lo), fabs(hi)) > 64) return n->valid = false; lo = -1, hi = 1; break;
    case IR_OP_TANH: case IR_OP_ERF: lo = -1, hi = 1, d = 1.2; break;
    case IR_OP_SIGMOID: lo = 0, hi = 1, d = 0.25; break;
    case IR_OP_FLOOR: case IR_OP_CEIL:
        if (!a->exact) return n->valid = false;
        lo = floor(lo), hi = ceil(hi), exact = true;
        break;
    default: return n->valid = false;
    }
    set_iv(n, lo, hi);
    /* f64's tanh, pow and erf on the GPU are less precise (docs/CODEGEN.md): 1e-11. */
    double few_ulp = n->t.elem == IR_F64 ? 1e-11 * mag(n) + 1e-300 : 16 * dt_ulp(IR_F32) * mag(n) + 1e-6;
    return finish(n, d * e + few_ulp, exact);
}

static bool an_pow(DtNode *n, const DtNode *a, const DtNode *b)
{
    if (a->lo < 0.25 || mag(b) > 4) return n->valid = false;
    double c[4] = {pow(a->lo, b->lo), pow(a->lo, b->hi), pow(a->hi, b->lo), pow(a->hi, b->hi)};
    double lo = fmin(fmin(c[0], c[1]), fmin(c[2], c[3])), hi = fmax(fmax(c[0], c[1]), fmax(c[2], c[3]));
    set_iv(n, lo, hi);
    double la = fmax(fabs(log(a->lo)), fabs(log(a->hi)));
    double err = hi * (mag(b) / a->lo * a->err + la * b->err) + (n->t.elem == IR_F64 ? 1e-11 : 16 * dt_ulp(IR_F32)) * hi;
    return finish(n, err, false);
}

static bool an_fma(DtNode *n, const DtNode *a, const DtNode *b, const DtNode *c)
{
    double lo, hi;
    iv_mul(a, b, &lo, &hi);
    set_iv(n, lo + c->lo, hi + c->hi);
    bool exact = a->exact && b->exact && c->exact && (n->t.elem == IR_F32 || n->t.elem == IR_F64);
    return finish(n, a->err * mag(b) + b->err * mag(a) + c->err, exact);
}

static bool an_minmax(DtNode *n, const DtNode *a, const DtNode *b, bool is_max)
{
    if (is_max) set_iv(n, fmax(a->lo, b->lo), fmax(a->hi, b->hi));
    else set_iv(n, fmin(a->lo, b->lo), fmin(a->hi, b->hi));
    return finish(n, fmax(a->err, b->err), a->exact && b->exact);
}

static bool an_cast(DtNode *n, const DtNode *a)
{
    IrElem to = n->t.elem, from = a->t.elem;
    if (to == IR_I1) {
        set_iv(n, 0, 1);
        finish(n, 0, true);
        return need(n, a->exact);
    }
    if (ir_elem_is_float(from) && !ir_elem_is_float(to)) {
        set_iv(n, fmax(trunc(a->lo), elem_min(to)), fmin(trunc(a->hi), elem_max(to)));
        finish(n, 0, true);
        return need(n, a->exact);
    }
    set_iv(n, a->lo, a->hi);
    return finish(n, a->err, a->exact);
}

/* The size of the reduced or scanned axis. */
static int axis_size(const DtNode *a, int axis) { return a->t.shape[axis]; }

static bool an_reduce(DtNode *n, const DtNode *a, IrOpcode op)
{
    int k = axis_size(a, (int)n->i);
    bool fl = ir_elem_is_float(n->t.elem);
    double lg = 2 + log2(k);
    switch (op) {
    case IR_OP_SUM:
        set_iv(n, k * fmin(a->lo, 0) + (a->lo > 0 ? a->lo : 0), k * fmax(a->hi, 0));
        return finish(n, k * a->err + k * mag(a) * lg * dt_ulp(IR_F32) * (n->t.elem == IR_F64 ? 1e-9 : 1),
                      a->exact && (!fl || k == 1));
    case IR_OP_MAX: case IR_OP_MIN:
        set_iv(n, a->lo, a->hi);
        return finish(n, a->err, a->exact);
    case IR_OP_ARGMAX: case IR_OP_ARGMIN:
        set_iv(n, 0, k - 1);
        finish(n, 0, true);
        return need(n, a->exact);
    case IR_OP_XOR_SUM: {       /* any bits below the highest of the operand's magnitude */
        double m = ldexp(1.0, ilogb(fmax(mag(a), 1)) + 1);
        set_iv(n, a->lo < 0 ? -m : 0, m);
        return finish(n, 0, true);
    }
    default:   /* boolean reductions (any, all): a row of dt_forms is enough */
        set_iv(n, 0, 1);
        finish(n, 0, true);
        return need(n, n->t.elem == IR_I1 && a->exact);
    }
}

static bool an_scan(DtNode *n, const DtNode *a, IrOpcode op)
{
    int k = axis_size(a, (int)n->i);
    bool fl = ir_elem_is_float(n->t.elem);
    double lg = 2 + log2(k), acc = n->t.elem == IR_F64 ? dt_ulp(IR_F64) : dt_ulp(IR_F32);
    if (op == IR_OP_CUMSUM) {
        set_iv(n, fmin(a->lo, k * a->lo), fmax(a->hi, k * a->hi));
        return finish(n, k * a->err + k * mag(a) * lg * acc, a->exact && (!fl || k == 1));
    }
    double m = mag(a), mk = m >= 1 ? pow(m, k) : m;
    if (fl && (m > 2 || k > 16)) return n->valid = false;
    set_iv(n, -mk, mk);
    return finish(n, k * mk * (a->err / fmax(m, 1e-30) + lg * acc), a->exact && (!fl || k == 1));
}

/* reduce/associative_scan: add as sum or cumsum (the GPU keeps the interpreter's order
 * here, but the bound of the reassociating sum is kept), the others exact. */
static bool an_combine(DtNode *n, const DtNode *a, IrOpcode op)
{
    switch (n->j & DT_COMB_FN) {
    case DT_FN_ADD: {
        /* the built-in sums accumulate in f32; a combine fn adds in the element type,
         * so in f16/bf16 every partial sum rounds there, and the GPU's tree of partial
         * sums and the interpreter's fold differ by up to k - 1 of the element's ulps of
         * the sum (512 bf16 ones: the fold stops at 256, the tree reaches 512) */
        bool ok = op == IR_OP_SCAN ? an_scan(n, a, IR_OP_CUMSUM) : an_reduce(n, a, IR_OP_SUM);
        if (ok && ir_elem_is_float(n->t.elem) && ir_elem_bytes(n->t.elem) < 4) {
            int k = axis_size(a, (int)n->i);
            n->err += (double)k * k * mag(a) * dt_ulp(n->t.elem);
            n->valid = isfinite(n->err);
        }
        return ok;
    }
    case DT_FN_XOR: return an_reduce(n, a, IR_OP_XOR_SUM);
    default:
        set_iv(n, a->lo, a->hi);
        return finish(n, a->err, a->exact);
    }
}

static bool an_dot(DtNode *n, const DtNode *a, const DtNode *b, const DtNode *c)
{
    int K = a->t.shape[1];
    double lo, hi;
    iv_mul(a, b, &lo, &hi);
    double clo = c ? c->lo : 0, chi = c ? c->hi : 0, cerr = c ? c->err : 0;
    set_iv(n, K * lo + clo, K * hi + chi);
    bool fl = ir_elem_is_float(n->t.elem);
    double prod = mag(a) * mag(b), acc = n->t.elem == IR_F64 ? dt_ulp(IR_F64) : dt_ulp(IR_F32);
    double err = K * (a->err * mag(b) + b->err * mag(a)) + cerr + K * prod * (2 + log2(K)) * acc;
    /* tf32 inputs: the GPU rounds them as the interpreter does (cg_round_tf32), so
     * this is room for a tensor core that did not (it could shrink to the f16 term
     * once the H200 agrees). Tensor cores may add with fewer bits than f32 (fp8 on
     * Hopper keeps about 14): f16, bf16, f8 and tf32 dots run on mma.sync. */
    if (n->i == 1) err += 2 * K * prod * ldexp(1.0, -10);
    /* tf32x3: the dropped lo * lo term (< 2^-22 of each product) and the tf32 rounding of
     * the lo halves, the same on both sides, with room as for tf32 */
    if (n->i == 2) err += 4 * K * prod * ldexp(1.0, -20);
    IrElem in = a->t.elem;
    if (in == IR_F8E4M3 || in == IR_F8E5M2) err += K * prod * ldexp(1.0, -12);
    if (in == IR_F16 || in == IR_BF16) err += K * prod * ldexp(1.0, -20);
    return finish(n, err, !fl && a->exact && b->exact && (!c || c->exact));
}

static bool an_load(const DtProgram *p, DtNode *n)
{
    IrElem e = n->t.elem;
    double lo = e == IR_I1 ? 0 : ir_elem_is_float(e) ? -1 : ir_elem_is_signed(e) ? -100 : 0;
    double hi = e == IR_I1 ? 1 : ir_elem_is_float(e) ? 1 : ir_elem_is_signed(e) ? 100 : 200;
    if (n->nkids > 1) lo = fmin(lo, n->j ? n->f : 0), hi = fmax(hi, n->j ? n->f : 0);
    set_iv(n, lo, hi);
    return finish(n, 0, true);
}

static bool an_leaf(const DtProgram *p, DtNode *n)
{
    int total = p->grid[0] * p->grid[1] * p->grid[2];
    switch (dt_forms[n->form].kind) {
    case K_LOAD: case K_BLOCK: return an_load(p, n);
    case K_AXIS: set_iv(n, 0, n->j ? (double)p->grid[0] * n->t.shape[n->i] - 1 : n->t.shape[n->i] - 1); break;
    case K_PID: set_iv(n, 0, p->grid[n->i] - 1); break;
    case K_PLIN: set_iv(n, 0, total - 1); break;
    case K_PARAM: {
        double v = n->i == 0 ? p->L : n->i == 1 ? p->M : p->fs;
        set_iv(n, v, v);
        break;
    }
    case K_LOOPVAR: set_iv(n, 0, p->stmts[n->i].trips - 1); break;
    case K_CONST: case K_LIT: set_iv(n, n->f, n->f); break;
    case K_REF: {
        const DtStmt *s = &p->stmts[n->i];
        n->lo = s->lo, n->hi = s->hi, n->err = s->err, n->exact = s->exact;
        return n->valid = s->valid;
    }
    default: return n->valid = false;
    }
    return finish(n, 0, true);
}

bool dt_check_node(DtProgram *p, int i)
{
    DtNode *n = &p->nodes[i];
    const DtForm *f = &dt_forms[n->form];
    const DtNode *a = n->nkids > 0 ? &p->nodes[n->kid[0]] : NULL;
    const DtNode *b = n->nkids > 1 ? &p->nodes[n->kid[1]] : NULL;
    const DtNode *c = n->nkids > 2 ? &p->nodes[n->kid[2]] : NULL;
    for (int k = 0; k < n->nkids; k++)
        if (!p->nodes[n->kid[k]].valid) return n->valid = false;
    switch (f->kind) {
    case K_ARITH: return an_arith(n, a, b, f->text);
    case K_DIV: return an_div(n, a, b);
    case K_REM: return an_rem(n, a, b);
    case K_BITWISE: case K_SHIFT: return an_bitwise(n, a, b, f->kind == K_SHIFT ? "<" : f->text);
    case K_CMP: return an_cmp(n, a, b);
    case K_LOGIC: case K_LNOT: set_iv(n, 0, 1); return finish(n, 0, true);
    case K_NEG: set_iv(n, -a->hi, -a->lo); return finish(n, a->err, a->exact);
    case K_NOT: set_iv(n, elem_min(n->t.elem), elem_max(n->t.elem)); return finish(n, 0, true);
    case K_ABS:
        set_iv(n, a->lo > 0 ? a->lo : a->hi < 0 ? -a->hi : 0, mag(a));
        if (!ir_elem_is_float(n->t.elem) && a->lo <= elem_min(n->t.elem)) set_iv(n, elem_min(n->t.elem), elem_max(n->t.elem));
        return finish(n, a->err, a->exact);
    case K_MATH1: return an_math(n, a, f->op);
    case K_MINMAX: return an_minmax(n, a, b, f->op == IR_OP_MAXIMUM);
    case K_POW: return an_pow(n, a, b);
    case K_FMA: return an_fma(n, a, b, c);
    case K_WHERE: set_iv(n, fmin(b->lo, c->lo), fmax(b->hi, c->hi)); return finish(n, fmax(b->err, c->err), b->exact && c->exact);
    case K_CAST: return an_cast(n, a);
    case K_REDUCE: return an_reduce(n, a, f->op);
    case K_SCAN: return an_scan(n, a, f->op);
    case K_COMBINE: return an_combine(n, a, f->op);
    case K_EXPAND: case K_TRANS: case K_RESHAPE: case K_BROADCAST:
        set_iv(n, a->lo, a->hi);
        n->err = a->err, n->exact = a->exact;
        return n->valid = true;
    case K_DOT: return an_dot(n, a, b, c);
    case K_CLAMP:   /* min(max(x, lo), hi): monotone in each operand, 1-Lipschitz */
        set_iv(n, fmin(fmax(a->lo, b->lo), c->lo), fmin(fmax(a->hi, b->hi), c->hi));
        return finish(n, fmax(a->err, fmax(b->err, c->err)), a->exact && b->exact && c->exact);
    case K_IFX: set_iv(n, fmin(b->lo, c->lo), fmax(b->hi, c->hi)); return finish(n, fmax(b->err, c->err), b->exact && c->exact);
    case K_UMULHI: set_iv(n, elem_min(n->t.elem), elem_max(n->t.elem)); return finish(n, 0, true);
    case K_BITCAST: set_iv(n, elem_min(n->t.elem), elem_max(n->t.elem)); return finish(n, 0, a->exact);
    case K_RAND:
        set_iv(n, f->op == IR_OP_RAND ? 0 : -6, f->op == IR_OP_RAND ? 1 : 6);
        return finish(n, f->op == IR_OP_RAND ? 0 : 1e-5, f->op == IR_OP_RAND);
    default: return an_leaf(p, n);
    }
}

/* ---- statements ------------------------------------------------------------------------ */
/* A loop's value after its trips: init combined with the body `trips` times. */
static bool an_for(DtProgram *p, DtStmt *s)
{
    const DtNode *init = &p->nodes[s->node], *body = &p->nodes[s->body];
    DtNode r = *init;
    double t = s->trips;
    switch (s->op) {
    case DT_COMB_ADD: set_iv(&r, init->lo + t * fmin(body->lo, 0), init->hi + t * fmax(body->hi, 0)); break;
    case DT_COMB_MAX: set_iv(&r, fmax(init->lo, body->lo), fmax(init->hi, body->hi)); break;
    case DT_COMB_MIN: set_iv(&r, fmin(init->lo, body->lo), fmin(init->hi, body->hi)); break;
    case DT_COMB_XOR: set_iv(&r, elem_min(r.t.elem), elem_max(r.t.elem)); break;
    default: set_iv(&r, body->lo, body->hi); break;
    }
    finish(&r, init->err + t * (body->err + dt_ulp(r.t.elem) * mag(&r)), init->exact && body->exact);
    s->lo = r.lo, s->hi = r.hi, s->err = r.err, s->exact = r.exact;
    return init->valid && body->valid && r.valid;
}

/* A stored value is converted to the buffer's type: an inexact float cannot become an
 * integer. Atomic max/min on floats need values that cannot be NaN. */
static bool an_store(DtProgram *p, DtStmt *s)
{
    const DtNode *v = &p->nodes[s->node];
    IrElem to = p->bufs[s->buf].elem;
    bool ok = v->valid && (s->mask < 0 || p->nodes[s->mask].valid);
    if (s->kind == DT_ATOMIC) ok = ok && v->exact && isfinite(v->lo) && isfinite(v->hi) && p->nodes[s->offs].valid;
    if (!v->exact && !ir_elem_is_float(to)) ok = false;
    if (!v->exact && ir_elem_is_float(to) && mag(v) > float_max(to) / 4) ok = false;
    s->lo = v->lo, s->hi = v->hi, s->exact = v->exact;
    s->err = v->exact ? 0 : v->err + dt_ulp(to) * mag(v);
    return ok;
}

bool dt_check_stmt(DtProgram *p, int i)
{
    DtStmt *s = &p->stmts[i];
    switch (s->kind) {
    case DT_LET: {
        const DtNode *v = &p->nodes[s->node];
        s->lo = v->lo, s->hi = v->hi, s->err = v->err, s->exact = v->exact;
        return s->valid = v->valid;
    }
    case DT_FOR: return s->valid = an_for(p, s);
    default: return s->valid = an_store(p, s);
    }
}

/* Analyses every node reachable from statement s, kids first. */
static void analyse_tree(DtProgram *p, int n, bool *done)
{
    if (n < 0 || done[n]) return;
    for (int k = 0; k < p->nodes[n].nkids; k++) analyse_tree(p, p->nodes[n].kid[k], done);
    dt_check_node(p, n);
    done[n] = true;
}

bool dt_analyze(DtProgram *p)
{
    bool done[DT_MAX_NODES] = {0}, live[DT_MAX_STMTS], live_buf[DT_MAX_BUFS], ok = true;
    dt_live(p, live, live_buf);
    for (int i = 0; i < p->nstmts; i++) {
        DtStmt *s = &p->stmts[i];
        if (s->dead) continue;
        analyse_tree(p, s->node, done);
        analyse_tree(p, s->body, done);
        analyse_tree(p, s->mask, done);
        analyse_tree(p, s->offs, done);
        bool v = dt_check_stmt(p, i);
        if (live[i]) ok &= v;
    }
    return ok;
}

double dt_buf_tolerance(const DtProgram *p, int b)
{
    double tol = 0;
    for (int i = 0; i < p->nstmts; i++) {
        const DtStmt *s = &p->stmts[i];
        if ((s->kind == DT_STORE || s->kind == DT_ATOMIC) && !s->dead && s->buf == b)
            tol = fmax(tol, s->exact ? 0 : 2 * s->err);
    }
    return tol;
}

/* ---- liveness ------------------------------------------------------------------------ */
static void mark_tree(const DtProgram *p, int n, bool *live, bool *live_buf)
{
    if (n < 0) return;
    const DtNode *x = &p->nodes[n];
    int kind = dt_forms[x->form].kind;
    if (kind == K_LOAD || kind == K_BLOCK) live_buf[x->i] = true;
    if ((kind == K_REF || kind == K_LOOPVAR) && !live[x->i]) {
        const DtStmt *s = &p->stmts[x->i];
        live[x->i] = true;
        mark_tree(p, s->node, live, live_buf);
        if (s->kind == DT_FOR) mark_tree(p, s->body, live, live_buf);
    }
    for (int k = 0; k < x->nkids; k++) mark_tree(p, x->kid[k], live, live_buf);
}

void dt_live(const DtProgram *p, bool *live, bool *live_buf)
{
    memset(live, 0, sizeof(bool) * DT_MAX_STMTS);
    memset(live_buf, 0, sizeof(bool) * DT_MAX_BUFS);
    for (int i = 0; i < p->nstmts; i++) {
        const DtStmt *s = &p->stmts[i];
        if (s->dead || (s->kind != DT_STORE && s->kind != DT_ATOMIC)) continue;
        live[i] = live_buf[s->buf] = true;
        mark_tree(p, s->node, live, live_buf);
        mark_tree(p, s->mask, live, live_buf);
        mark_tree(p, s->offs, live, live_buf);
    }
}
