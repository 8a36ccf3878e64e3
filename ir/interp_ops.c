/* The interpreter's pure ops: constants, shapes, element-wise arithmetic and math,
 * conversions, dot, reductions, scans, rand/randn and the checked hints.
 *
 * Floats are computed in double and rounded to the element type after every op.
 * For + - * / and sqrt this gives the correctly rounded result of the narrow type:
 * double rounding through a format of p bits is innocuous when p >= 2q + 2 for a
 * target of q bits (Figueroa, "When is double rounding innocuous?", SIGNUM 1995), and
 * 53 >= 2 * 24 + 2. Math functions compute in f32 (expf, ...) for f32 and narrower
 * types, in double for f64. docs/INTERPRETER.md lists every decision. */
#include <math.h>
#include <string.h>

#include "interp_internal.h"

int64_t interp_int_norm(IrElem e, int64_t v)
{
    uint64_t u = (uint64_t)v;
    switch (e) {
    case IR_I1: return (int64_t)(u & 1);
    case IR_I8: return (int8_t)(u & 0xFF);
    case IR_I16: return (int16_t)(u & 0xFFFF);
    case IR_I32: return (int32_t)(u & 0xFFFFFFFFu);
    case IR_U8: return (int64_t)(u & 0xFF);
    case IR_U16: return (int64_t)(u & 0xFFFF);
    case IR_U32: return (int64_t)(u & 0xFFFFFFFFu);
    default: return v;
    }
}

/* ---- scalar helpers ------------------------------------------------------------- */

/* IEEE 754-2019 minimum/maximum: NaN wins, -0 < +0. */
static double fminimum_(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) ? a : b;
    if (a != b) return a < b ? a : b;
    return signbit(a) ? a : b;
}

static double fmaximum_(double a, double b)
{
    if (isnan(a) || isnan(b)) return isnan(a) ? a : b;
    if (a != b) return a > b ? a : b;
    return signbit(a) ? b : a;
}

/* -1, 0, 1 as a < b, ==, >; 2 when unordered (a NaN). */
int interp_cmp_slots(IrElem e, Slot a, Slot b)
{
    if (ir_elem_is_float(e)) {
        if (isnan(a.f) || isnan(b.f)) return 2;
        return (a.f > b.f) - (a.f < b.f);
    }
    if (ir_elem_is_signed(e) || e == IR_PTR) return (a.i > b.i) - (a.i < b.i);
    return ((uint64_t)a.i > (uint64_t)b.i) - ((uint64_t)a.i < (uint64_t)b.i);
}

/* Unordered compares are false except `ne`, as in C. */
bool interp_cmp_holds(IrCmp p, int c)
{
    switch (p) {
    case IR_CMP_EQ: return c == 0;
    case IR_CMP_NE: return c != 0;
    case IR_CMP_LT: return c == -1;
    case IR_CMP_LE: return c == -1 || c == 0;
    case IR_CMP_GT: return c == 1;
    case IR_CMP_GE: return c == 1 || c == 0;
    }
    return false;
}

/* a * b + c rounded to odd at 53 bits: a later rounding to at most 51 bits is then
 * the correctly rounded fma (the product of two values of <= 24 bits is exact). */
static double fma_round_odd(double a, double b, double c)
{
    double p = a * b, r = p + c;
    double bb = r - p, err = (p - (r - bb)) + (c - bb);   /* TwoSum: exact error */
    uint64_t bits;
    memcpy(&bits, &r, 8);
    if (err != 0 && isfinite(r) && !(bits & 1)) r = nextafter(r, err > 0 ? INFINITY : -INFINITY);
    return r;
}

/* 64-bit integers to double, rounded to odd: exact up to 2^53, and safe to round
 * again to any narrower float format. */
static double int64_to_double_odd(bool is_signed, int64_t v)
{
    bool neg = is_signed && v < 0;
    uint64_t u = neg ? 0 - (uint64_t)v : (uint64_t)v;
    int shift = 0;
    while ((u >> shift) >= (1ull << 53)) shift++;
    uint64_t m = (u >> shift) | ((u & ((1ull << shift) - 1)) != 0);
    double d = ldexp((double)m, shift);
    return neg ? -d : d;
}

static double int_to_float(IrElem from, IrElem to, int64_t v)
{
    bool s = ir_elem_is_signed(from);
    if (to == IR_F32) return s ? (double)(float)v : (double)(float)(uint64_t)v;
    if (to == IR_F64) return s ? (double)v : (double)(uint64_t)v;
    return fp_round(to, int64_to_double_odd(s, v));
}

/* Truncates toward zero; NaN gives 0 and out-of-range values saturate (as PTX cvt). */
static int64_t float_to_int(IrElem to, double d)
{
    if (isnan(d)) return 0;
    double t = trunc(d);
    int w = ir_elem_bits(to);
    if (ir_elem_is_signed(to)) {
        if (t < -ldexp(1.0, w - 1)) return interp_int_norm(to, (int64_t)((uint64_t)1 << (w - 1)));
        if (t >= ldexp(1.0, w - 1)) return (int64_t)(((uint64_t)1 << (w - 1)) - 1);
        return (int64_t)t;
    }
    if (t <= 0) return 0;
    if (t >= ldexp(1.0, w)) return interp_int_norm(to, -1);
    return (int64_t)(uint64_t)t;
}

Slot interp_convert(IrElem from, IrElem to, Slot v)
{
    Slot r;
    bool ff = ir_elem_is_float(from), tf = ir_elem_is_float(to);
    if (to == IR_I1) r.i = ff ? v.f != 0 : v.i != 0;
    else if (ff && tf) r.f = fp_round(to, v.f);
    else if (ff) r.i = float_to_int(to, v.f);
    else if (tf) r.f = int_to_float(from, to, v.i);
    else r.i = interp_int_norm(to, v.i);
    return r;
}

/* The storage bits of a scalar (ir_elem_bits wide, zero-extended). */
static uint64_t slot_bits(IrElem e, Slot v)
{
    switch (e) {
    case IR_F16: return fp_f32_to_f16((float)v.f);
    case IR_BF16: return fp_f32_to_bf16((float)v.f);
    case IR_F8E4M3: return fp_f32_to_f8e4m3((float)v.f);
    case IR_F8E5M2: return fp_f32_to_f8e5m2((float)v.f);
    case IR_F32: return fp_f32_bits((float)v.f);
    case IR_F64: {
        uint64_t u;
        memcpy(&u, &v.f, sizeof u);
        return u;
    }
    default: {
        int w = ir_elem_bits(e);
        return w == 64 ? (uint64_t)v.i : (uint64_t)v.i & ((1ull << w) - 1);
    }
    }
}

static Slot bits_slot(IrElem e, uint64_t u)
{
    Slot r;
    switch (e) {
    case IR_F16: r.f = fp_f16_to_f32((uint16_t)u); break;
    case IR_BF16: r.f = fp_bf16_to_f32((uint16_t)u); break;
    case IR_F8E4M3: r.f = fp_f8e4m3_to_f32((uint8_t)u); break;
    case IR_F8E5M2: r.f = fp_f8e5m2_to_f32((uint8_t)u); break;
    case IR_F32: r.f = fp_bits_f32((uint32_t)u); break;
    case IR_F64: memcpy(&r.f, &u, sizeof r.f); break;
    default: r.i = interp_int_norm(e, (int64_t)u); break;
    }
    return r;
}

Slot interp_bitcast(IrElem from, IrElem to, Slot v) { return bits_slot(to, slot_bits(from, v)); }

/* ---- element-wise ops ------------------------------------------------------------ */

static bool div_by_zero(Interp *I, const IrOp *op)
{
    char w[160];
    return interp_fail(I, op, "integer division by zero%s", interp_where(I, w, sizeof w));
}

/* Shifts by a negative amount or by >= the width give 0 (shl, logical shr) or the
 * sign fill (arithmetic shr). */
static int64_t int_shift(IrOpcode c, IrElem e, int64_t a, int64_t b)
{
    bool out = (uint64_t)b >= (uint64_t)ir_elem_bits(e);
    if (c == IR_OP_SHL) return out ? 0 : (int64_t)((uint64_t)a << b);
    if (ir_elem_is_signed(e)) return out ? (a < 0 ? -1 : 0) : a >> b;
    return out ? 0 : (int64_t)((uint64_t)a >> b);
}

static int64_t int_divrem(IrOpcode c, IrElem e, int64_t a, int64_t b)
{
    if (!ir_elem_is_signed(e))
        return (int64_t)(c == IR_OP_DIV ? (uint64_t)a / (uint64_t)b : (uint64_t)a % (uint64_t)b);
    if (a == INT64_MIN && b == -1) return c == IR_OP_DIV ? a : 0;   /* wraps */
    return c == IR_OP_DIV ? a / b : a % b;
}

static bool int_binary(Interp *I, const IrOp *op, IrElem e, int64_t a, int64_t b, int64_t *out)
{
    uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
    int64_t r;
    switch (op->code) {
    case IR_OP_ADD: r = (int64_t)(ua + ub); break;
    case IR_OP_SUB: r = (int64_t)(ua - ub); break;
    case IR_OP_MUL: r = (int64_t)(ua * ub); break;
    case IR_OP_DIV: case IR_OP_REM:
        if (b == 0) return div_by_zero(I, op);
        r = int_divrem(op->code, e, a, b);
        break;
    case IR_OP_AND: r = a & b; break;
    case IR_OP_OR: r = a | b; break;
    case IR_OP_XOR: r = a ^ b; break;
    case IR_OP_SHL: case IR_OP_SHR: r = int_shift(op->code, e, a, b); break;
    case IR_OP_MINIMUM: r = interp_cmp_slots(e, (Slot){.i = a}, (Slot){.i = b}) <= 0 ? a : b; break;
    case IR_OP_MAXIMUM: r = interp_cmp_slots(e, (Slot){.i = a}, (Slot){.i = b}) >= 0 ? a : b; break;
    default: return interp_fail(I, op, "'%s' is not defined on integers", ir_op_info[op->code].text);
    }
    *out = interp_int_norm(e, r);
    return true;
}

static bool float_binary(Interp *I, const IrOp *op, IrElem e, double a, double b, double *out)
{
    double r;
    switch (op->code) {
    case IR_OP_ADD: r = a + b; break;
    case IR_OP_SUB: r = a - b; break;
    case IR_OP_MUL: r = a * b; break;
    case IR_OP_DIV: r = a / b; break;
    case IR_OP_REM: r = fmod(a, b); break;
    case IR_OP_MINIMUM: r = fminimum_(a, b); break;
    case IR_OP_MAXIMUM: r = fmaximum_(a, b); break;
    case IR_OP_POW: r = e == IR_F64 ? pow(a, b) : powf((float)a, (float)b); break;
    default: return interp_fail(I, op, "'%s' is not defined on floats", ir_op_info[op->code].text);
    }
    *out = fp_round(e, r);
    return true;
}

static bool ew_binary(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0), *b = interp_opnd(I, op, 1);
    IrElem e = a->type->elem;
    bool fl = ir_elem_is_float(e);
    int64_t sa = bstride(a), sb = bstride(b);
    for (int64_t k = 0; k < res->n; k++) {
        Slot x = a->s[k * sa], y = b->s[k * sb];
        bool ok = fl ? float_binary(I, op, e, x.f, y.f, &res->s[k].f)
                     : int_binary(I, op, e, x.i, y.i, &res->s[k].i);
        if (!ok) return false;
    }
    return true;
}

static double float_unary64(IrOpcode c, double x)
{
    switch (c) {
    case IR_OP_NEG: return -x;
    case IR_OP_EXP: return exp(x);
    case IR_OP_EXP2: return exp2(x);
    case IR_OP_LOG: return log(x);
    case IR_OP_LOG2: return log2(x);
    case IR_OP_SQRT: return sqrt(x);
    case IR_OP_RSQRT: return 1.0 / sqrt(x);
    case IR_OP_SIN: return sin(x);
    case IR_OP_COS: return cos(x);
    case IR_OP_TANH: return tanh(x);
    case IR_OP_ERF: return erf(x);
    case IR_OP_ABS: return fabs(x);
    case IR_OP_FLOOR: return floor(x);
    case IR_OP_CEIL: return ceil(x);
    case IR_OP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    default: return NAN;
    }
}

static float float_unary32(IrOpcode c, float x)
{
    switch (c) {
    case IR_OP_NEG: return -x;
    case IR_OP_EXP: return expf(x);
    case IR_OP_EXP2: return exp2f(x);
    case IR_OP_LOG: return logf(x);
    case IR_OP_LOG2: return log2f(x);
    case IR_OP_SQRT: return sqrtf(x);
    case IR_OP_RSQRT: return 1.0f / sqrtf(x);
    case IR_OP_SIN: return sinf(x);
    case IR_OP_COS: return cosf(x);
    case IR_OP_TANH: return tanhf(x);
    case IR_OP_ERF: return erff(x);
    case IR_OP_ABS: return fabsf(x);
    case IR_OP_FLOOR: return floorf(x);
    case IR_OP_CEIL: return ceilf(x);
    case IR_OP_SIGMOID: return 1.0f / (1.0f + expf(-x));
    default: return NAN;
    }
}

/* exp2 ftz (f32 math): a subnormal argument counts as 0, a subnormal result is +0, as
 * the hardware's ex2.approx.ftz.f32 does. */
static float exp2_ftz(double xd)
{
    float x = (float)xd;
    if (fpclassify(x) == FP_SUBNORMAL) x = 0.0f;
    float r = exp2f(x);
    return fpclassify(r) == FP_SUBNORMAL ? 0.0f : r;
}

static bool int_unary(Interp *I, const IrOp *op, IrElem e, int64_t a, int64_t *out)
{
    uint64_t ua = (uint64_t)a;
    switch (op->code) {
    case IR_OP_NEG: *out = interp_int_norm(e, (int64_t)(0 - ua)); return true;
    case IR_OP_NOT: *out = interp_int_norm(e, (int64_t)~ua); return true;
    case IR_OP_ABS:
        *out = ir_elem_is_signed(e) && a < 0 ? interp_int_norm(e, (int64_t)(0 - ua)) : a;
        return true;
    default: return interp_fail(I, op, "'%s' is not defined on integers", ir_op_info[op->code].text);
    }
}

static bool ew_unary(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    IrElem e = a->type->elem;
    if (ir_elem_is_float(e) && op->code == IR_OP_NOT)
        return interp_fail(I, op, "'not' is not defined on floats");
    for (int64_t k = 0; k < res->n; k++) {
        Slot x = a->s[bidx(a, k)];
        if (!ir_elem_is_float(e)) {
            if (!int_unary(I, op, e, x.i, &res->s[k].i)) return false;
        } else if (e == IR_F64) {
            res->s[k].f = float_unary64(op->code, x.f);
        } else {
            res->s[k].f = fp_round(e, op->code == IR_OP_EXP2 && op->attr.i ? exp2_ftz(x.f) : float_unary32(op->code, (float)x.f));
        }
    }
    return true;
}

static void ew_fma(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0), *b = interp_opnd(I, op, 1), *c = interp_opnd(I, op, 2);
    IrElem e = a->type->elem;
    for (int64_t k = 0; k < res->n; k++) {
        Slot x = a->s[bidx(a, k)], y = b->s[bidx(b, k)], z = c->s[bidx(c, k)];
        if (!ir_elem_is_float(e))
            res->s[k].i = interp_int_norm(e, (int64_t)((uint64_t)x.i * (uint64_t)y.i + (uint64_t)z.i));
        else if (e == IR_F64) res->s[k].f = fma(x.f, y.f, z.f);
        else if (e == IR_F32) res->s[k].f = fmaf((float)x.f, (float)y.f, (float)z.f);
        else res->s[k].f = fp_round(e, fma_round_odd(x.f, y.f, z.f));
    }
}

static void ew_cmp(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0), *b = interp_opnd(I, op, 1);
    IrElem e = a->type->elem;
    for (int64_t k = 0; k < res->n; k++) {
        int64_t ka = bidx(a, k), kb = bidx(b, k);
        int c = interp_cmp_slots(e, a->s[ka], b->s[kb]);
        if (e == IR_PTR && a->buf[ka] != b->buf[kb]) c = a->buf[ka] < b->buf[kb] ? -1 : 1;
        res->s[k].i = interp_cmp_holds((IrCmp)op->attr.i, c);
    }
}

static void ew_select(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *c = interp_opnd(I, op, 0), *a = interp_opnd(I, op, 1), *b = interp_opnd(I, op, 2);
    for (int64_t k = 0; k < res->n; k++) {
        const Tile *t = c->s[bidx(c, k)].i ? a : b;
        res->s[k] = t->s[bidx(t, k)];
        if (res->buf) res->buf[k] = t->buf[bidx(t, k)];
    }
}

static bool ew_convert(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    IrElem from = a->type->elem, to = res->type->elem;
    if ((from == IR_PTR) != (to == IR_PTR))
        return interp_fail(I, op, "cannot convert between pointers and numbers");
    for (int64_t k = 0; k < res->n; k++) {
        if (to == IR_PTR) {
            res->s[k] = a->s[bidx(a, k)];
            res->buf[k] = a->buf[bidx(a, k)];
        } else {
            res->s[k] = interp_convert(from, to, a->s[bidx(a, k)]);
        }
    }
    return true;
}

static void ew_bitcast(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    for (int64_t k = 0; k < res->n; k++) res->s[k] = interp_bitcast(a->type->elem, res->type->elem, a->s[bidx(a, k)]);
}

static void ew_addptr(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *p = interp_opnd(I, op, 0), *o = interp_opnd(I, op, 1);
    int64_t sp = bstride(p), so = bstride(o);
    for (int64_t k = 0; k < res->n; k++) {
        res->buf[k] = p->buf[k * sp];
        res->s[k].i = (int64_t)((uint64_t)p->s[k * sp].i + (uint64_t)o->s[k * so].i);
    }
}

/* ---- constants and shapes ---------------------------------------------------------- */

static bool op_const(Interp *I, const IrOp *op, Tile *res)
{
    IrElem e = res->type->elem;
    Slot v;
    if (ir_elem_is_float(e)) v.f = fp_round(e, op->attr.f);
    else if (e == IR_PTR) v.i = 0;
    else v.i = interp_int_norm(e, op->attr.i);
    for (int64_t k = 0; k < res->n; k++) {
        res->s[k] = v;
        if (res->buf) res->buf[k] = -1;
    }
    return true;
}

static bool op_program_axis(Interp *I, const IrOp *op, Tile *res)
{
    if (op->attr.i < 0 || op->attr.i > 2)
        return interp_fail(I, op, "program axis %lld is not 0, 1 or 2", (long long)op->attr.i);
    const int64_t *src = op->code == IR_OP_PROGRAM_ID ? I->pid : I->grid;
    res->s[0].i = interp_int_norm(res->type->elem, src[op->attr.i]);
    return true;
}

static void op_arange(Interp *I, const IrOp *op, Tile *res)
{
    for (int64_t k = 0; k < res->n; k++) res->s[k].i = interp_int_norm(res->type->elem, (int64_t)((uint64_t)op->attr.i + (uint64_t)k));
}

/* Same data in the same row-major order: splat of a scalar, expand_dims, reshape. */
static void op_copy_data(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    if (a->n == res->n) {
        memcpy(res->s, a->s, (size_t)a->n * sizeof *a->s);
        if (res->buf) memcpy(res->buf, a->buf, (size_t)a->n * sizeof *a->buf);
        return;
    }
    for (int64_t k = 0; k < res->n; k++) res->s[k] = a->s[0];
    for (int64_t k = 0; res->buf && k < res->n; k++) res->buf[k] = a->buf[0];
}

/* extract: the columns [attr.i, attr.i + n) of the operand's last axis. */
static void op_extract(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    const IrType *at = a->type, *rt = res->type;
    int64_t an = at->shape[at->rank - 1], n = rt->shape[rt->rank - 1];
    for (int64_t k = 0; k < res->n; k++) {
        int64_t src = (k / n) * an + op->attr.i + k % n;
        res->s[k] = a->s[src];
        if (res->buf) res->buf[k] = a->buf[src];
    }
}

/* Multi-index of linear index k in a row-major shape. */
static void unravel(const IrType *t, int64_t k, int64_t idx[IR_MAX_RANK])
{
    for (int d = t->rank - 1; d >= 0; d--) {
        idx[d] = k % t->shape[d];
        k /= t->shape[d];
    }
}

static void op_broadcast(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    for (int64_t k = 0; k < res->n; k++) {
        int64_t idx[IR_MAX_RANK], src = 0;
        unravel(res->type, k, idx);
        for (int d = 0; d < a->type->rank; d++)
            src = src * a->type->shape[d] + (a->type->shape[d] == 1 ? 0 : idx[d]);
        res->s[k] = a->s[a->n == 1 ? 0 : src];
        if (res->buf) res->buf[k] = a->buf[a->n == 1 ? 0 : src];
    }
}

static void op_trans(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    int r = a->type->rank;
    for (int64_t k = 0; k < a->n; k++) {
        int64_t idx[IR_MAX_RANK], dst = 0;
        unravel(a->type, k, idx);
        for (int d = r - 1; d >= 0; d--) dst = dst * a->type->shape[d] + idx[d];
        res->s[dst] = a->s[k];
        if (res->buf) res->buf[dst] = a->buf[k];
    }
}

/* ---- dot ------------------------------------------------------------------------------ */

typedef struct DotDims { int64_t m, k, n; } DotDims;

static void dot_f64(const Tile *a, const Tile *b, Tile *res, DotDims d)
{
    for (int64_t i = 0; i < d.m; i++)
        for (int64_t j = 0; j < d.n; j++) {
            double acc = res->s[i * d.n + j].f;
            for (int64_t k = 0; k < d.k; k++) acc = fma(a->s[i * d.k + k].f, b->s[k * d.n + j].f, acc);
            res->s[i * d.n + j].f = acc;
        }
}

static void dot_int(const Tile *a, const Tile *b, Tile *res, DotDims d)
{
    for (int64_t i = 0; i < d.m; i++)
        for (int64_t j = 0; j < d.n; j++) {
            uint64_t acc = (uint64_t)res->s[i * d.n + j].i;
            for (int64_t k = 0; k < d.k; k++)
                acc += (uint64_t)a->s[i * d.k + k].i * (uint64_t)b->s[k * d.n + j].i;
            res->s[i * d.n + j].i = interp_int_norm(res->type->elem, (int64_t)acc);
        }
}

/* One row of C += A[i, k] * B[k, :], an fmaf per element. With the FMA clone the
 * compiler turns fmaf into one vectorized instruction (same result: fmaf is exactly
 * rounded either way); without it, this is a libm call per element. */
#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
__attribute__((target_clones("fma", "default")))
#endif
#endif
static void fma_row(float *restrict acc, float a, const float *restrict b, int64_t n)
{
    for (int64_t j = 0; j < n; j++) acc[j] = fmaf(a, b[j], acc[j]);
}

/* f32 (and narrower) inputs: f32 products and sums, for every output element one
 * fmaf per k in the order k = 0, 1, ...; the loops run i, k, j so that the j loop
 * is a vector loop over a row of B. tf32 rounds the inputs first. */
static bool dot_f32(Interp *I, const IrOp *op, const Tile *a, const Tile *b, Tile *res, DotDims d)
{
    float *fa = tl_malloc(sizeof(float) * (size_t)(d.m * d.k));
    float *fb = tl_malloc(sizeof(float) * (size_t)(d.k * d.n));
    float *row = tl_malloc(sizeof(float) * (size_t)d.n);
    if (!fa || !fb || !row) {
        tl_free(fa), tl_free(fb), tl_free(row);
        return interp_fail(I, op, "out of memory in the interpreter");
    }
    bool tf32 = op->attr.i == IR_PREC_TF32 && a->type->elem == IR_F32;
    for (int64_t x = 0; x < d.m * d.k; x++) fa[x] = tf32 ? fp_round_tf32((float)a->s[x].f) : (float)a->s[x].f;
    for (int64_t x = 0; x < d.k * d.n; x++) fb[x] = tf32 ? fp_round_tf32((float)b->s[x].f) : (float)b->s[x].f;
    for (int64_t i = 0; i < d.m; i++) {
        Slot *out = res->s + i * d.n;
        for (int64_t j = 0; j < d.n; j++) row[j] = (float)out[j].f;
        for (int64_t k = 0; k < d.k; k++) fma_row(row, fa[i * d.k + k], fb + k * d.n, d.n);
        for (int64_t j = 0; j < d.n; j++) out[j].f = fp_round(res->type->elem, row[j]);
    }
    tl_free(fa), tl_free(fb), tl_free(row);
    return true;
}

static bool op_dot(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0), *b = interp_opnd(I, op, 1), *c = interp_opnd(I, op, 2);
    if (a->type->rank != 2 || b->type->rank != 2 || res->type->rank != 2)
        return interp_fail(I, op, "dot needs rank-2 tiles");
    DotDims d = {a->type->shape[0], a->type->shape[1], b->type->shape[1]};
    IrElem in = a->type->elem, out = res->type->elem;
    for (int64_t x = 0; x < res->n; x++) res->s[x] = interp_convert(c->type->elem, out, c->s[bidx(c, x)]);
    if (!ir_elem_is_float(in)) dot_int(a, b, res, d);
    else if (in == IR_F64) dot_f64(a, b, res, d);
    else return dot_f32(I, op, a, b, res, d);
    return true;
}

/* ---- reductions and scans ---------------------------------------------------------- */

/* A tile seen as [outer, len, inner] around the reduced axis. */
typedef struct AxisView { int64_t outer, len, inner; } AxisView;

static bool axis_view(Interp *I, const IrOp *op, const Tile *a, AxisView *v)
{
    int r = a->type->rank;
    int64_t axis = op->attr.i & IR_AXIS_MASK;
    if (op->attr.i < 0 || axis >= r)
        return interp_fail(I, op, "axis %lld is out of range for a tile of rank %d", (long long)axis, r);
    *v = (AxisView){1, a->type->shape[axis], 1};
    for (int d = 0; d < r; d++) {
        if (d < axis) v->outer *= a->type->shape[d];
        if (d > axis) v->inner *= a->type->shape[d];
    }
    return true;
}

/* Sums and products run in the accumulator type: f32 for f32 and narrower floats
 * (each step one f32 rounding), double for f64, wrapping 64-bit for integers. */
typedef struct Acc { IrElem e; Slot v; } Acc;

static Acc acc_start(IrElem e, bool prod)
{
    Acc a = {e, {.i = prod}};
    if (ir_elem_is_float(e)) a.v.f = prod ? 1.0 : 0.0;
    return a;
}

static void acc_step(Acc *a, bool prod, Slot x)
{
    if (!ir_elem_is_float(a->e)) {
        uint64_t u = (uint64_t)a->v.i, y = (uint64_t)x.i;
        a->v.i = (int64_t)(prod ? u * y : u + y);
    } else if (a->e == IR_F64) {
        a->v.f = prod ? a->v.f * x.f : a->v.f + x.f;
    } else {
        a->v.f = (float)(prod ? a->v.f * x.f : a->v.f + x.f);
    }
}

static Slot acc_result(const Acc *a, IrElem out)
{
    Slot r;
    if (ir_elem_is_float(out)) r.f = fp_round(out, a->v.f);
    else r.i = interp_int_norm(out, a->v.i);
    return r;
}

/* max/min: NaN-propagating, and -0 below +0 as minimum/maximum order them (so the
 * result does not depend on the order of the elements, and the GPU's tree of
 * llvm.minimum/maximum gives the same zero); argmax/argmin: the first NaN, else the
 * first extreme (a zero of either sign ties). */
static bool better(IrOpcode c, IrElem e, Slot x, Slot best)
{
    bool is_max = c == IR_OP_MAX || c == IR_OP_ARGMAX;
    if (ir_elem_is_float(e)) {
        if (isnan(best.f)) return false;
        if (isnan(x.f)) return true;
        if ((c == IR_OP_MAX || c == IR_OP_MIN) && x.f == 0 && best.f == 0 && signbit(x.f) != signbit(best.f))
            return is_max ? !signbit(x.f) : signbit(x.f);
    }
    int r = interp_cmp_slots(e, x, best);
    return is_max ? r > 0 : r < 0;
}

static void reduce_line(IrOpcode c, IrElem e, const Slot *s, int64_t len, int64_t stride,
                        IrElem out, Slot *dst)
{
    if (c == IR_OP_XOR_SUM) {
        uint64_t x = 0;
        for (int64_t k = 0; k < len; k++) x ^= (uint64_t)s[k * stride].i;
        dst->i = interp_int_norm(out, (int64_t)x);
        return;
    }
    if (c == IR_OP_SUM) {
        Acc a = acc_start(e, false);
        for (int64_t k = 0; k < len; k++) acc_step(&a, false, s[k * stride]);
        *dst = acc_result(&a, out);
        return;
    }
    int64_t bi = 0;
    for (int64_t k = 1; k < len; k++)
        if (better(c, e, s[k * stride], s[bi * stride])) bi = k;
    if (c == IR_OP_ARGMAX || c == IR_OP_ARGMIN) dst->i = interp_int_norm(out, bi);
    else *dst = s[bi * stride];
}

static bool op_reduce(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    AxisView v = {0};
    if (!axis_view(I, op, a, &v)) return false;
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t i = 0; i < v.inner; i++)
            reduce_line(op->code, a->type->elem, a->s + o * v.len * v.inner + i, v.len, v.inner,
                        res->type->elem, &res->s[o * v.inner + i]);
    return true;
}

static bool op_scan(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    AxisView v = {0};
    if (!axis_view(I, op, a, &v)) return false;
    bool prod = op->code == IR_OP_CUMPROD, rev = op->attr.i & IR_SCAN_REVERSE;
    for (int64_t o = 0; o < v.outer; o++)
        for (int64_t i = 0; i < v.inner; i++) {
            Acc acc = acc_start(a->type->elem, prod);
            for (int64_t j = 0; j < v.len; j++) {
                int64_t k = rev ? v.len - 1 - j : j, x = (o * v.len + k) * v.inner + i;
                acc_step(&acc, prod, a->s[x]);
                res->s[x] = acc_result(&acc, res->type->elem);
            }
        }
    return true;
}

/* ---- rand and hints ------------------------------------------------------------------ */

static void op_rand(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *seed = interp_opnd(I, op, 0), *off = interp_opnd(I, op, 1);
    uint64_t s = (uint64_t)seed->s[0].i;
    for (int64_t k = 0; k < res->n; k++) {
        int64_t o = off->s[bidx(off, k)].i;
        float r = op->code == IR_OP_RAND ? tile_rand(s, o) : tile_randn(s, o);
        res->s[k].f = fp_round(res->type->elem, r);
    }
}

static int64_t last_dim(const Tile *t) { return t->type->rank ? t->type->shape[t->type->rank - 1] : 1; }

/* multiple_of(x, n) on a tile speaks of the first value of each run of consecutive
 * values along the last axis (as Triton's divisibility does): offs = pid * B +
 * arange(0, B) is a multiple of B although offs[1] is not. */
static bool check_multiple_of(Interp *I, const IrOp *op, const Tile *a)
{
    int64_t n = op->attr.i, row = last_dim(a);
    if (n <= 0 || a->type->elem == IR_PTR || ir_elem_is_float(a->type->elem)) return true;
    for (int64_t k = 0; k < a->n; k++) {
        bool starts = k % row == 0 || (uint64_t)a->s[k].i != (uint64_t)a->s[k - 1].i + 1;
        if (starts && a->s[k].i % n != 0) {
            char w[160];
            return interp_fail(I, op, "multiple_of hint violated%s: lane %lld holds %lld, not a multiple of %lld",
                               interp_where(I, w, sizeof w), (long long)k, (long long)a->s[k].i, (long long)n);
        }
    }
    return true;
}

/* max_contiguous(x, n): each aligned group of n lanes along the last axis holds
 * consecutive values (the same buffer, for pointers). */
static bool check_max_contiguous(Interp *I, const IrOp *op, const Tile *a)
{
    int64_t n = op->attr.i, row = last_dim(a);
    if (n <= 1 || ir_elem_is_float(a->type->elem)) return true;
    if (n > row) n = row;
    for (int64_t k = 0; k < a->n; k++) {
        if (k % n == 0) continue;
        bool same = !a->buf || a->buf[k] == a->buf[k - 1];
        if (!same || (uint64_t)a->s[k].i != (uint64_t)a->s[k - 1].i + 1) {
            char w[160];
            return interp_fail(I, op, "max_contiguous hint violated%s: lanes %lld and %lld are not consecutive",
                               interp_where(I, w, sizeof w), (long long)(k - 1), (long long)k);
        }
    }
    return true;
}

static bool op_hint(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *a = interp_opnd(I, op, 0);
    bool ok = op->code == IR_OP_MULTIPLE_OF ? check_multiple_of(I, op, a) : check_max_contiguous(I, op, a);
    op_copy_data(I, op, res);
    return ok;
}

/* ---- dispatch ------------------------------------------------------------------------- */

bool interp_exec_pure(Interp *I, const IrOp *op, Tile *res)
{
    if (!tile_alloc(I, op, interp_result_type(I, op, 0), res)) return false;
    switch (op->code) {
    case IR_OP_CONST: return op_const(I, op, res);
    case IR_OP_PROGRAM_ID: case IR_OP_NUM_PROGRAMS: return op_program_axis(I, op, res);
    case IR_OP_LAUNCHED_PROGRAMS: res->s[0].i = I->grid[0]; return true;
    case IR_OP_CLUSTER_RANK: res->s[0].i = I->rank; return true;
    case IR_OP_ARANGE: op_arange(I, op, res); return true;
    case IR_OP_SPLAT: case IR_OP_EXPAND_DIMS: case IR_OP_RESHAPE: op_copy_data(I, op, res); return true;
    case IR_OP_BROADCAST: op_broadcast(I, op, res); return true;
    case IR_OP_TRANS: op_trans(I, op, res); return true;
    case IR_OP_EXTRACT: op_extract(I, op, res); return true;
    case IR_OP_CONVERT: return ew_convert(I, op, res);
    case IR_OP_BITCAST: ew_bitcast(I, op, res); return true;
    case IR_OP_ADD: case IR_OP_SUB: case IR_OP_MUL: case IR_OP_DIV: case IR_OP_REM:
    case IR_OP_AND: case IR_OP_OR: case IR_OP_XOR: case IR_OP_SHL: case IR_OP_SHR:
    case IR_OP_MINIMUM: case IR_OP_MAXIMUM: case IR_OP_POW:
        return ew_binary(I, op, res);
    case IR_OP_CMP: ew_cmp(I, op, res); return true;
    case IR_OP_SELECT: ew_select(I, op, res); return true;
    case IR_OP_FMA: ew_fma(I, op, res); return true;
    case IR_OP_NEG: case IR_OP_NOT: case IR_OP_EXP: case IR_OP_EXP2: case IR_OP_LOG:
    case IR_OP_LOG2: case IR_OP_SQRT: case IR_OP_RSQRT: case IR_OP_SIN: case IR_OP_COS:
    case IR_OP_TANH: case IR_OP_ERF: case IR_OP_ABS: case IR_OP_FLOOR: case IR_OP_CEIL:
    case IR_OP_SIGMOID:
        return ew_unary(I, op, res);
    case IR_OP_ADDPTR: ew_addptr(I, op, res); return true;
    case IR_OP_DOT: return op_dot(I, op, res);
    case IR_OP_SUM: case IR_OP_MAX: case IR_OP_MIN: case IR_OP_ARGMAX: case IR_OP_ARGMIN: case IR_OP_XOR_SUM:
        return op_reduce(I, op, res);
    case IR_OP_CUMSUM: case IR_OP_CUMPROD: return op_scan(I, op, res);
    case IR_OP_RAND: case IR_OP_RANDN: op_rand(I, op, res); return true;
    case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS: return op_hint(I, op, res);
    case IR_OP_CONVERT_LAYOUT: op_copy_data(I, op, res); return true;   /* a layout changes no value */
    default:
        return interp_fail(I, op, "the interpreter cannot run '%s' here", ir_op_info[op->code].text);
    }
}
