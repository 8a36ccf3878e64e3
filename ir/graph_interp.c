/* The graph IR interpreter (ir/graph_interp.h): one function per op family of
 * ir/graph_ops.def, over tensors of doubles or int64s. */
#include "graph_interp.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "interp.h"

/* ---- tensors -------------------------------------------------------------------------- */

bool ir_gtensor_alloc(IrGTensor *t, IrElem elem, uint32_t rank, const int64_t *dims)
{
    int64_t n = 1;
    for (uint32_t k = 0; k < rank; k++)
        if (dims[k] < 0 || __builtin_mul_overflow(n, dims[k], &n) || n > ((int64_t)1 << 34)) return false;
    *t = (IrGTensor){.elem = elem, .rank = rank, .n = n};
    t->dims = tl_malloc((rank + 1) * sizeof *t->dims);
    if (rank) memcpy(t->dims, dims, rank * sizeof *dims);
    if (ir_elem_is_float(elem)) t->f = tl_calloc((size_t)(n ? n : 1), sizeof *t->f);
    else t->i = tl_calloc((size_t)(n ? n : 1), sizeof *t->i);
    if (t->dims && (t->f || t->i)) return true;
    ir_gtensor_free(t);
    return false;
}

void ir_gtensor_free(IrGTensor *t)
{
    tl_free(t->dims);
    tl_free(t->f);
    tl_free(t->i);
    memset(t, 0, sizeof *t);
}

/* An integer wrapped to the width and signedness of e (i1: 0 or 1). */
static int64_t wrap(IrElem e, int64_t v)
{
    int bits = ir_elem_bits(e);
    if (e == IR_I1) return v != 0;
    if (bits >= 64) return v;
    uint64_t m = ((uint64_t)1 << bits) - 1, u = (uint64_t)v & m;
    if (ir_elem_is_signed(e) && (u >> (bits - 1))) u |= ~m;
    return (int64_t)u;
}

void ir_gtensor_load(IrGTensor *t, const void *data)
{
    int b = ir_elem_bytes(t->elem);
    for (int64_t k = 0; k < t->n; k++) {
        const unsigned char *p = (const unsigned char *)data + k * b;
        uint64_t raw = 0;
        memcpy(&raw, p, (size_t)b);
        switch (t->elem) {
        case IR_F16: t->f[k] = fp_f16_to_f32((uint16_t)raw); break;
        case IR_BF16: t->f[k] = fp_bf16_to_f32((uint16_t)raw); break;
        case IR_F32: t->f[k] = fp_bits_f32((uint32_t)raw); break;
        case IR_F64: memcpy(&t->f[k], p, 8); break;
        case IR_F8E4M3: t->f[k] = fp_f8e4m3_to_f32((uint8_t)raw); break;
        case IR_F8E5M2: t->f[k] = fp_f8e5m2_to_f32((uint8_t)raw); break;
        default: t->i[k] = wrap(t->elem, (int64_t)raw); break;
        }
    }
}

void ir_gtensor_store(const IrGTensor *t, void *data)
{
    int b = ir_elem_bytes(t->elem);
    for (int64_t k = 0; k < t->n; k++) {
        unsigned char *p = (unsigned char *)data + k * b;
        uint64_t raw = t->i ? (uint64_t)t->i[k] : 0;
        double d = t->f ? t->f[k] : 0;
        switch (t->elem) {
        case IR_F16: raw = fp_f32_to_f16((float)d); break;
        case IR_BF16: raw = fp_f32_to_bf16((float)d); break;
        case IR_F32: raw = fp_f32_bits((float)d); break;
        case IR_F64: memcpy(&raw, &d, 8); break;
        case IR_F8E4M3: raw = fp_f32_to_f8e4m3((float)d); break;
        case IR_F8E5M2: raw = fp_f32_to_f8e5m2((float)d); break;
        default: break;
        }
        memcpy(p, &raw, (size_t)b);
    }
}

/* ---- the run ----------------------------------------------------------------------------- */

typedef struct Run {
    const IrGraph *g;
    const int64_t *sizes;
    IrGTensor *vals;         /* one per value */
    bool *have;
    const IrGOp *op;
    char *err;
    size_t errlen;
    int64_t whole;           /* > 0: a plan's linear_cross_entropy kernel runs its rows as
                              * chunks of this many (IrGKernel.whole's regime), not its chunk */
} Run;

static bool fail(Run *R, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(R->err, R->errlen, "%s: ", R->op ? ir_gop_name(R->op->kind) : "graph");
    if (n >= 0 && (size_t)n < R->errlen) vsnprintf(R->err + n, R->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return false;
}

static const IrGTensor *in(const Run *R, uint32_t k) { return &R->vals[R->op->in[k]]; }

static double getf(const IrGTensor *t, int64_t k) { return t->f ? t->f[k] : (double)t->i[k]; }
/* An element as an integer: a float one truncated and saturated (0 for NaN), so that
 * copying a float tensor that holds infinities (an attention mask) is defined. */
static int64_t geti(const IrGTensor *t, int64_t k)
{
    if (t->i) return t->i[k];
    double v = t->f[k];
    return v != v ? 0 : v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v;
}

/* Sets element k of t to the float v or the integer w (whichever t holds), rounded. */
static void setv(IrGTensor *t, int64_t k, double v, int64_t w)
{
    if (t->f) t->f[k] = fp_round(t->elem, v);
    else t->i[k] = wrap(t->elem, w);
}

/* Evaluates the result type's sizes; allocates result `r` of the op. */
static bool alloc_result(Run *R, uint32_t r, IrGTensor *out)
{
    const IrTensorType *t = &R->g->values.data[R->op->out[r]].type;
    int64_t dims[64];
    if (t->rank > 64) return fail(R, "rank %u is too large for the interpreter", t->rank);
    for (uint32_t k = 0; k < t->rank; k++)
        if (!ir_size_eval(t->dims[k], R->g->sizes, R->sizes, R->g->nsizes, &dims[k]) || dims[k] < 0)
            return fail(R, "size %s cannot be evaluated", ir_size_str(R->g->arena, t->dims[k]));
    return ir_gtensor_alloc(out, t->elem, t->rank, dims) || fail(R, "out of memory");
}

/* The flat index into t of element k of a tensor of shape (rank, dims) that t
 * broadcasts to (aligned at the right; size-1 axes of t repeat). */
static int64_t bcast_at(const IrGTensor *t, uint32_t rank, const int64_t *dims, int64_t k)
{
    int64_t idx = 0, stride = 1;
    for (uint32_t a = rank; a-- > 0;) {
        int64_t c = k % dims[a];
        k /= dims[a];
        uint32_t ta = a + t->rank - rank;   /* the axis of t, when a >= rank - t->rank */
        if (a + t->rank < rank) continue;
        if (t->dims[ta] != 1) idx += c * stride;
        stride *= t->dims[ta];
    }
    return idx;
}

/* ---- element-wise ---------------------------------------------------------------------- */

static double unary_f(IrGOpKind k, double x)
{
    switch (k) {
    case IR_GOP_NEG: return -x;
    case IR_GOP_EXP: return exp(x);
    case IR_GOP_EXP2: return exp2(x);
    case IR_GOP_LOG: return log(x);
    case IR_GOP_LOG2: return log2(x);
    case IR_GOP_SQRT: return sqrt(x);
    case IR_GOP_RSQRT: return 1.0 / sqrt(x);
    case IR_GOP_SIN: return sin(x);
    case IR_GOP_COS: return cos(x);
    case IR_GOP_TANH: return tanh(x);
    case IR_GOP_ERF: return erf(x);
    case IR_GOP_ABS: return fabs(x);
    case IR_GOP_FLOOR: return floor(x);
    case IR_GOP_CEIL: return ceil(x);
    case IR_GOP_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case IR_GOP_ISNAN: return isnan(x);
    case IR_GOP_ISINF: return isinf(x);
    case IR_GOP_ISFINITE: return isfinite(x);
    default: return x;
    }
}

static bool run_unary(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    IrGOpKind k = R->op->kind;
    for (int64_t e = 0; e < o->n; e++) {
        if (x->f) {
            double v = unary_f(k, x->f[e]);   /* an integer result only from isnan & co: 0 or 1 */
            setv(o, e, v, o->i ? (int64_t)v : 0);
            continue;
        }
        int64_t v = x->i[e];
        int64_t w = k == IR_GOP_NEG ? (int64_t)(0 - (uint64_t)v) : k == IR_GOP_BNOT ? ~v : k == IR_GOP_NOT ? !v
                  : k == IR_GOP_ABS ? (v < 0 ? (int64_t)(0 - (uint64_t)v) : v) : v;
        setv(o, e, (double)w, w);
    }
    return true;
}

static bool cmp_of(IrGCmp c, double x, double y)
{
    switch (c) {
    case IR_GCMP_EQ: return x == y;
    case IR_GCMP_NE: return x != y;
    case IR_GCMP_LT: return x < y;
    case IR_GCMP_LE: return x <= y;
    case IR_GCMP_GT: return x > y;
    default: return x >= y;
    }
}

static bool cmp_int(IrGCmp c, int64_t x, int64_t y, bool uns)
{
    int o = uns ? ((uint64_t)x > (uint64_t)y) - ((uint64_t)x < (uint64_t)y) : (x > y) - (x < y);
    return cmp_of(c, (double)o, 0.0);
}

static double binary_f(IrGOpKind k, double x, double y)
{
    switch (k) {
    case IR_GOP_ADD: return x + y;
    case IR_GOP_SUB: return x - y;
    case IR_GOP_MUL: return x * y;
    case IR_GOP_DIV: return x / y;
    case IR_GOP_REM: return fmod(x, y);
    case IR_GOP_MINIMUM: return x < y ? x : y;
    case IR_GOP_MAXIMUM: return x > y ? x : y;
    case IR_GOP_POW: return pow(x, y);
    case IR_GOP_SWIGLU: return x / (1.0 + exp(-x)) * y;
    default: return 0;
    }
}

/* Integer ops wrap (computed on uint64); division by zero is an error. */
static bool binary_i(Run *R, IrGOpKind k, IrElem e, int64_t x, int64_t y, int64_t *out)
{
    uint64_t a = (uint64_t)x, b = (uint64_t)y;
    bool uns = !ir_elem_is_signed(e);
    int bits = ir_elem_bits(e);
    if ((k == IR_GOP_DIV || k == IR_GOP_REM || k == IR_GOP_CDIV) && y == 0) return fail(R, "integer division by zero");
    switch (k) {
    case IR_GOP_ADD: *out = (int64_t)(a + b); break;
    case IR_GOP_SUB: *out = (int64_t)(a - b); break;
    case IR_GOP_MUL: *out = (int64_t)(a * b); break;
    case IR_GOP_DIV: *out = uns ? (int64_t)(a / b) : (x == INT64_MIN && y == -1) ? x : x / y; break;
    case IR_GOP_REM: *out = uns ? (int64_t)(a % b) : (y == -1) ? 0 : x % y; break;
    case IR_GOP_CDIV: *out = uns ? (int64_t)((a + b - 1) / b) : (x + y - 1) / y; break;
    case IR_GOP_AND: case IR_GOP_LAND: *out = k == IR_GOP_LAND ? (x && y) : (int64_t)(a & b); break;
    case IR_GOP_OR: case IR_GOP_LOR: *out = k == IR_GOP_LOR ? (x || y) : (int64_t)(a | b); break;
    case IR_GOP_XOR: *out = (int64_t)(a ^ b); break;
    case IR_GOP_SHL: *out = y < 0 || y >= bits ? 0 : (int64_t)(a << y); break;
    case IR_GOP_SHR: *out = y < 0 || y >= bits ? (uns || x >= 0 ? 0 : -1) : uns ? (int64_t)(a >> y) : x >> y; break;
    case IR_GOP_MINIMUM: *out = uns ? (int64_t)(a < b ? a : b) : x < y ? x : y; break;
    case IR_GOP_MAXIMUM: *out = uns ? (int64_t)(a > b ? a : b) : x > y ? x : y; break;
    case IR_GOP_POW: *out = (int64_t)pow((double)x, (double)y); break;
    default: *out = 0; break;
    }
    return true;
}

static bool run_binary(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0), *y = in(R, 1);
    IrGOpKind k = R->op->kind;
    IrElem e = x->elem;
    for (int64_t n = 0; n < o->n; n++) {
        int64_t a = bcast_at(x, o->rank, o->dims, n), b = bcast_at(y, o->rank, o->dims, n), w = 0;
        if (k == IR_GOP_CMP) {
            bool c = x->f ? cmp_of(R->op->attr.cmp, x->f[a], y->f[b])
                          : cmp_int(R->op->attr.cmp, x->i[a], y->i[b], !ir_elem_is_signed(e));
            setv(o, n, c, c);
        } else if (x->f) {
            setv(o, n, binary_f(k, x->f[a], y->f[b]), 0);   /* a float result */
        } else {
            if (!binary_i(R, k, e, x->i[a], y->i[b], &w)) return false;
            setv(o, n, (double)w, w);
        }
    }
    return true;
}

static bool run_ternary(Run *R, IrGTensor *o)
{
    const IrGTensor *a = in(R, 0), *b = in(R, 1), *c = in(R, 2);
    for (int64_t n = 0; n < o->n; n++) {
        int64_t ia = bcast_at(a, o->rank, o->dims, n), ib = bcast_at(b, o->rank, o->dims, n),
                ic = bcast_at(c, o->rank, o->dims, n);
        if (R->op->kind == IR_GOP_WHERE) setv(o, n, a->i[ia] ? getf(b, ib) : getf(c, ic), a->i[ia] ? geti(b, ib) : geti(c, ic));
        else setv(o, n, fma(getf(a, ia), getf(b, ib), getf(c, ic)), geti(a, ia) * geti(b, ib) + geti(c, ic));
    }
    return true;
}

static bool run_cast(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    for (int64_t n = 0; n < o->n; n++) {
        double v = getf(x, n);
        int64_t w = x->i ? x->i[n] : isfinite(v) ? (v >= 9.2e18 ? INT64_MAX : v <= -9.2e18 ? INT64_MIN : (int64_t)v) : 0;
        if (x->f && o->elem == IR_I1) w = v != 0;
        setv(o, n, x->i && !ir_elem_is_signed(x->elem) ? (double)(uint64_t)x->i[n] : v, w);
    }
    return true;
}

/* ---- reductions and ops along an axis --------------------------------------------------- */

/* The operand split around `axis`: outer * len * inner elements. */
static void around(const IrGTensor *t, int64_t axis, int64_t *outer, int64_t *len, int64_t *inner)
{
    *outer = *inner = 1;
    for (int64_t a = 0; a < (int64_t)t->rank; a++) {
        if (a < axis) *outer *= t->dims[a];
        if (a > axis) *inner *= t->dims[a];
    }
    *len = t->dims[axis];
}

static bool run_reduce(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    IrGOpKind k = R->op->kind;
    int64_t outer, len, inner;
    around(x, R->op->attr.axis, &outer, &len, &inner);
    for (int64_t p = 0; p < outer; p++)
        for (int64_t q = 0; q < inner; q++) {
            double acc = k == IR_GOP_ALL, best = 0;
            int64_t iacc = k == IR_GOP_ALL, arg = 0;
            for (int64_t j = 0; j < len; j++) {
                int64_t at = (p * len + j) * inner + q;
                double v = getf(x, at);
                int64_t w = geti(x, at);
                bool better = j == 0 || ((k == IR_GOP_MAX || k == IR_GOP_ARGMAX) ? (x->f ? v > best : w > iacc)
                                                                               : (x->f ? v < best : w < iacc));
                if (k == IR_GOP_SUM || k == IR_GOP_MEAN) acc += v, iacc = (int64_t)((uint64_t)iacc + (uint64_t)w);
                else if (k == IR_GOP_ANY) iacc = iacc || w;
                else if (k == IR_GOP_ALL) iacc = iacc && w;
                else if (better) best = v, iacc = w, arg = j;
            }
            int64_t r = p * inner + q;
            if (k == IR_GOP_ARGMAX || k == IR_GOP_ARGMIN) setv(o, r, (double)arg, arg);
            else if (k == IR_GOP_MAX || k == IR_GOP_MIN) setv(o, r, best, iacc);
            else if (k == IR_GOP_MEAN) setv(o, r, acc / (double)len, 0);
            else if (k == IR_GOP_SUM) setv(o, r, acc, iacc);
            else setv(o, r, (double)iacc, iacc);
        }
    return true;
}

static bool run_along(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    IrGOpKind k = R->op->kind;
    int64_t outer, len, inner;
    around(x, R->op->attr.axis, &outer, &len, &inner);
    for (int64_t p = 0; p < outer; p++)
        for (int64_t q = 0; q < inner; q++) {
            double m = -INFINITY, s = 0, acc = k == IR_GOP_CUMPROD;
            int64_t iacc = k == IR_GOP_CUMPROD;
            for (int64_t j = 0; j < len && k == IR_GOP_SOFTMAX; j++) m = fmax(m, getf(x, (p * len + j) * inner + q));
            for (int64_t j = 0; j < len && k == IR_GOP_SOFTMAX; j++) s += exp(getf(x, (p * len + j) * inner + q) - m);
            for (int64_t j = 0; j < len; j++) {
                int64_t at = (p * len + j) * inner + q;
                if (k == IR_GOP_SOFTMAX) setv(o, at, exp(getf(x, at) - m) / s, 0);
                else if (k == IR_GOP_CUMSUM) acc += getf(x, at), iacc = (int64_t)((uint64_t)iacc + (uint64_t)geti(x, at)), setv(o, at, acc, iacc);
                else acc *= getf(x, at), iacc = (int64_t)((uint64_t)iacc * (uint64_t)geti(x, at)), setv(o, at, acc, iacc);
                if (k != IR_GOP_SOFTMAX && o->f) acc = o->f[at];   /* a scan rounds each partial result */
            }
        }
    return true;
}

/* layer_norm and rms_norm over the last axis (population variance). */
static bool run_norm(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0), *w = in(R, 1);
    bool ln = R->op->kind == IR_GOP_LAYER_NORM;
    const IrGTensor *b = ln ? in(R, 2) : NULL;
    double eps = getf(in(R, ln ? 3 : 2), 0);
    int64_t len = x->dims[x->rank - 1], rows = len ? x->n / len : 0;
    for (int64_t r = 0; r < rows; r++) {
        const double *row = x->f + r * len;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < len; j++) mean += row[j];
        mean = ln ? mean / (double)len : 0;
        for (int64_t j = 0; j < len; j++) var += (row[j] - mean) * (row[j] - mean);
        double inv = 1.0 / sqrt(var / (double)len + eps);
        for (int64_t j = 0; j < len; j++)
            setv(o, r * len + j, (row[j] - mean) * inv * getf(w, j) + (ln ? getf(b, j) : 0), 0);
    }
    return true;
}

/* ---- matrix products and attention ---------------------------------------------------------- */

static bool run_matmul(Run *R, IrGTensor *o)
{
    const IrGTensor *l = in(R, 0), *r = in(R, 1);
    int64_t K = l->dims[l->rank - 1], M = l->rank >= 2 ? l->dims[l->rank - 2] : 1;
    int64_t N = r->rank >= 2 ? r->dims[r->rank - 1] : 1, mn = M * N, batches = mn ? o->n / mn : 0;
    uint32_t bl = l->rank >= 2 ? l->rank - 2 : 0, br = r->rank >= 2 ? r->rank - 2 : 0;
    uint32_t nb = o->rank - (l->rank >= 2) - (r->rank >= 2);
    IrGTensor lb = {.rank = bl, .dims = l->dims}, rb = {.rank = br, .dims = r->dims};
    for (int64_t bt = 0; bt < batches; bt++) {
        int64_t lo = bcast_at(&lb, nb, o->dims, bt) * M * K, ro = bcast_at(&rb, nb, o->dims, bt) * K * N;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double acc = 0;
                int64_t iacc = 0;
                for (int64_t k = 0; k < K; k++) {
                    acc += getf(l, lo + m * K + k) * getf(r, ro + k * N + n);
                    iacc = (int64_t)((uint64_t)iacc + (uint64_t)geti(l, lo + m * K + k) * (uint64_t)geti(r, ro + k * N + n));
                }
                setv(o, bt * mn + m * N + n, acc, iacc);
            }
    }
    return true;
}

/* Whether query i sees key j: with d = i + Lk - Lq (the diagonal, bottom-right aligned),
 * j <= d when causal, d - wl <= j <= d + wr with a window (-1: that side unbounded). */
static bool attn_sees(int64_t i, int64_t j, int64_t off, bool causal, int64_t wl, int64_t wr)
{
    int64_t d = i + off;
    return !(causal && j > d) && !(wl >= 0 && j < d - wl) && !(wr >= 0 && j > d + wr);
}

/* The flat index into t of the batch element k of an attention's result batch shape
 * (rank, dims): bcast_at's, except that an axis of t smaller than the result's and
 * dividing it is grouped (grouped-query attention's KV heads: result index c reads
 * c / (dims / t's)); a size-1 axis is the group of all. */
static int64_t group_at(const IrGTensor *t, uint32_t rank, const int64_t *dims, int64_t k)
{
    int64_t idx = 0, stride = 1;
    for (uint32_t a = rank; a-- > 0;) {
        int64_t c = k % dims[a];
        k /= dims[a];
        if (a + t->rank < rank) continue;
        int64_t td = t->dims[a + t->rank - rank];
        idx += c / (dims[a] / td) * stride;
        stride *= td;
    }
    return idx;
}

/* An attention's operands as the interpreter reads them: the sizes, the mask, and per
 * batch element of the result the offsets of q, k and v. */
typedef struct Attn {
    const IrGTensor *q, *k, *v;
    bool causal;
    double scale;
    int64_t wl, wr, Lq, Lk, D, Dv, batches;
    uint32_t nb;             /* the result's batch rank */
    const int64_t *bdims;    /* the result's batch sizes */
} Attn;

static Attn attn_read(Run *R, const IrGTensor *out, uint32_t at)
{
    Attn A = {.q = in(R, 0), .k = in(R, 1), .v = in(R, 2), .causal = in(R, at)->i[0] != 0,
              .scale = getf(in(R, at + 1), 0), .wl = -1, .wr = -1};
    if (R->op->nin == at + 4) A.wl = geti(in(R, at + 2), 0), A.wr = geti(in(R, at + 3), 0);
    A.Lq = A.q->dims[A.q->rank - 2], A.D = A.q->dims[A.q->rank - 1];
    A.Lk = A.k->dims[A.k->rank - 2], A.Dv = A.v->dims[A.v->rank - 1];
    A.nb = out->rank - 2, A.bdims = out->dims;
    A.batches = A.Lq != 0 && A.Dv != 0 ? out->n / (A.Lq * A.Dv) : 0;
    return A;
}

/* The offsets of batch element bt in q, k and v. */
static void attn_offsets(const Attn *A, int64_t bt, int64_t *qo, int64_t *ko, int64_t *vo)
{
    IrGTensor qb = {.rank = A->q->rank - 2, .dims = A->q->dims}, kb = {.rank = A->k->rank - 2, .dims = A->k->dims},
              vb = {.rank = A->v->rank - 2, .dims = A->v->dims};
    *qo = group_at(&qb, A->nb, A->bdims, bt) * A->Lq * A->D;
    *ko = group_at(&kb, A->nb, A->bdims, bt) * A->Lk * A->D;
    *vo = group_at(&vb, A->nb, A->bdims, bt) * A->Lk * A->Dv;
}

/* Row i's masked scaled scores into s (-inf where masked); their max. */
static double attn_scores(const Attn *A, int64_t qo, int64_t ko, int64_t i, double *s)
{
    double m = -INFINITY;
    for (int64_t j = 0; j < A->Lk; j++) {
        double d = 0;
        for (int64_t c = 0; c < A->D; c++) d += A->q->f[qo + i * A->D + c] * A->k->f[ko + j * A->D + c];
        s[j] = !attn_sees(i, j, A->Lk - A->Lq, A->causal, A->wl, A->wr) ? -INFINITY : d * A->scale;
        m = fmax(m, s[j]);
    }
    return m;
}

/* softmax(q @ trans(k) * scale [masked: attn_sees]) @ v, and with a second result the
 * logsumexp of each row's masked scaled scores (natural log); a query that sees no key
 * gives zeros and a logsumexp of -inf. */
static bool run_attention(Run *R, IrGTensor *outs)
{
    IrGTensor *o = &outs[0], *lse = R->op->nout > 1 ? &outs[1] : NULL;
    Attn A = attn_read(R, o, 3);
    double *s = tl_malloc((size_t)(A.Lk ? A.Lk : 1) * sizeof *s);
    if (!s) return fail(R, "out of memory");
    for (int64_t bt = 0; bt < A.batches; bt++) {
        int64_t qo, ko, vo;
        attn_offsets(&A, bt, &qo, &ko, &vo);
        for (int64_t i = 0; i < A.Lq; i++) {
            double m = attn_scores(&A, qo, ko, i, s), sum = 0;
            for (int64_t j = 0; j < A.Lk; j++) sum += s[j] = m == -INFINITY ? 0 : exp(s[j] - m);
            for (int64_t c = 0; c < A.Dv; c++) {
                double acc = 0;
                for (int64_t j = 0; j < A.Lk; j++) acc += s[j] * A.v->f[vo + j * A.Dv + c];
                setv(o, bt * A.Lq * A.Dv + i * A.Dv + c, sum > 0 ? acc / sum : 0, 0);
            }
            if (lse) setv(lse, bt * A.Lq + i, sum > 0 ? m + log(sum) : -INFINITY, 0);
        }
    }
    tl_free(s);
    return true;
}

/* attention_bwd (FlashAttention-2's backward, in double): P = exp(s - lse) recomputed
 * from the saved logsumexp (0 where masked or for a row that sees no key), delta =
 * rowsum(dO * O), dS = P (dO V^T - delta); dQ = dS K scale, dK = dS^T Q scale, dV = P^T
 * dO, each summed over the batch elements of the result that read it (broadcast, and
 * the query heads of a KV head's group). */
static bool run_attention_bwd(Run *R, IrGTensor *outs)
{
    const IrGTensor *o = in(R, 3), *dout = in(R, 4), *lse = in(R, 5);
    IrGTensor *dq = &outs[0], *dk = &outs[1], *dv = &outs[2];
    Attn A = attn_read(R, o, 6);
    double *s = tl_malloc((size_t)(A.Lk ? A.Lk : 1) * sizeof *s);
    if (!s) return fail(R, "out of memory");
    for (int64_t bt = 0; bt < A.batches; bt++) {
        int64_t qo, ko, vo, oo = bt * A.Lq * A.Dv;
        attn_offsets(&A, bt, &qo, &ko, &vo);
        for (int64_t i = 0; i < A.Lq; i++) {
            double l = lse->f[bt * A.Lq + i], delta = 0;
            attn_scores(&A, qo, ko, i, s);
            for (int64_t c = 0; c < A.Dv; c++) delta += dout->f[oo + i * A.Dv + c] * o->f[oo + i * A.Dv + c];
            for (int64_t j = 0; j < A.Lk; j++) {
                double p = s[j] == -INFINITY || l == -INFINITY ? 0 : exp(s[j] - l), dp = 0;
                if (p == 0) continue;
                for (int64_t c = 0; c < A.Dv; c++) {
                    double g = dout->f[oo + i * A.Dv + c];
                    dp += g * A.v->f[vo + j * A.Dv + c];
                    dv->f[vo + j * A.Dv + c] += p * g;
                }
                double ds = p * (dp - delta) * A.scale;
                for (int64_t c = 0; c < A.D; c++) {
                    dq->f[qo + i * A.D + c] += ds * A.k->f[ko + j * A.D + c];
                    dk->f[ko + j * A.D + c] += ds * A.q->f[qo + i * A.D + c];
                }
            }
        }
    }
    tl_free(s);
    for (int r = 0; r < 3; r++)
        for (int64_t e = 0; e < outs[r].n; e++) setv(&outs[r], e, outs[r].f[e], 0);
    return true;
}

/* conv2d (docs/GRAPHS.md): out[n][k][p][q] = sum over c, r, s of x[n][c][p*sh + r - ph]
 * [q*sw + s - pw] * w[k][c][r][s], zero outside the input (NCHW; NHWC permutes the axes);
 * accumulated in double. */
static bool run_conv2d(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0), *w = in(R, 1);
    bool nhwc = R->op->attr.conv.nhwc;
    const uint32_t *st = R->op->attr.conv.stride, *pd = R->op->attr.conv.pad;
    int64_t N = x->dims[0], C = x->dims[nhwc ? 3 : 1], H = x->dims[nhwc ? 1 : 2], W = x->dims[nhwc ? 2 : 3];
    int64_t K = w->dims[0], RR = w->dims[nhwc ? 1 : 2], S = w->dims[nhwc ? 2 : 3];
    int64_t P = o->dims[nhwc ? 1 : 2], Q = o->dims[nhwc ? 2 : 3];
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++)
            for (int64_t p = 0; p < P; p++)
                for (int64_t q = 0; q < Q; q++) {
                    double acc = 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t r = 0; r < RR; r++)
                            for (int64_t s = 0; s < S; s++) {
                                int64_t h = p * st[0] + r - pd[0], ww = q * st[1] + s - pd[1];
                                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                                int64_t xi = nhwc ? ((n * H + h) * W + ww) * C + c : ((n * C + c) * H + h) * W + ww;
                                int64_t wi = nhwc ? ((k * RR + r) * S + s) * C + c : ((k * C + c) * RR + r) * S + s;
                                acc += x->f[xi] * w->f[wi];
                            }
                    int64_t oi = nhwc ? ((n * P + p) * Q + q) * K + k : ((n * K + k) * P + p) * Q + q;
                    setv(o, oi, acc, 0);
                }
    return true;
}

/* cross_entropy over rows: row i's logsumexp(x[i]) and, for a label that is not
 * ignore_index, its loss logsumexp(x[i]) - x[i, label], in double with the row's max
 * subtracted first. A label outside [0, V) that is not ignored is an error, as an
 * access out of bounds would be. */
static bool row_lse(Run *R, int64_t i, double *lse, int64_t *label)
{
    const IrGTensor *x = in(R, 0), *lab = in(R, 1);
    int64_t V = x->dims[1], l = lab->i[i], ign = in(R, 2)->i[0];
    *label = l == ign ? -1 : l;
    if (l != ign && (l < 0 || l >= V)) {   /* named as the user wrote it, not as the op that reads it */
        snprintf(R->err, R->errlen, "cross_entropy: label %lld of row %lld is outside [0, %lld) and is not the ignore_index %lld",
                 (long long)l, (long long)i, (long long)V, (long long)ign);
        return false;
    }
    const double *row = x->f + i * V;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < V; j++) m = fmax(m, row[j]);
    for (int64_t j = 0; j < V; j++) s += exp(row[j] - m);
    *lse = log(s) + m;
    return true;
}

/* cross_entropy_rows: each row's loss, 0 on an ignored row. */
static bool run_cross_entropy_rows(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    for (int64_t i = 0; i < x->dims[0]; i++) {
        double lse;
        int64_t l;
        if (!row_lse(R, i, &lse, &l)) return false;
        setv(o, i, l < 0 ? 0.0 : lse - x->f[i * x->dims[1] + l], 0);
    }
    return true;
}

/* cross_entropy_grad: (softmax(x[i]) - onehot(label)) * dy[i] on a kept row, 0 on an
 * ignored one. */
static bool run_cross_entropy_grad(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0), *d = in(R, 3);
    int64_t V = x->dims[1];
    for (int64_t i = 0; i < x->dims[0]; i++) {
        double lse;
        int64_t l;
        if (!row_lse(R, i, &lse, &l)) return false;
        for (int64_t j = 0; j < V; j++)
            setv(o, i * V + j, l < 0 ? 0.0 : (exp(x->f[i * V + j] - lse) - (j == l)) * d->f[i], 0);
    }
    return true;
}

/* linear_cross_entropy (ir/graph.h), chunk rows at a time as the plan runs it: the
 * chunk's logits x_c @ w rounded to x's type (as the matmul it replaces), each row's
 * loss and gradient g rounded to dy's type (as cross_entropy_rows and _grad), dx_c = g
 * @ trans(w); dw = trans(x) @ g summed in double over every row in order and rounded
 * once at the end, so that every value is bit for bit the op-by-op graph's (whose
 * matmuls sum in double). bf16 x: g rounded to bf16 and dx and dw bf16 values (each
 * product rounded once, as the gradient rules' bf16 products: ir/graph_grad.c r_matmul).
 * Only a [chunk, V] block of logits is held at a time; through a plan, the chunks its
 * kernel runs (all rows as one while they are at most IrGKernel.whole). */
static bool run_linear_cross_entropy(Run *R, IrGTensor *outs)
{
    const IrGTensor *x = in(R, IR_LCE_X), *w = in(R, IR_LCE_W), *lab = in(R, IR_LCE_LABELS), *d = in(R, IR_LCE_DY);
    int64_t N = x->dims[0], D = x->dims[1], V = w->dims[1], ign = in(R, IR_LCE_IGNORE)->i[0];
    int64_t C = in(R, IR_LCE_CHUNK)->i[0];
    if (C < 1) return fail(R, "the chunk must be at least 1 row, not %lld", (long long)C);
    if (R->whole > 0) C = R->whole;   /* the plan's regime: one chunk of every row */
    if (C > N) C = N ? N : 1;
    bool half = x->elem == IR_BF16;   /* the products on bf16: g and each product rounded to bf16 */
    IrGTensor z, *rows = &outs[0], *dx = &outs[1], *dw = &outs[2];
    if (!ir_gtensor_alloc(&z, x->elem, 2, (int64_t[]){C, V})) return fail(R, "out of memory");
    double *acc = tl_calloc((size_t)(D * V + 1), sizeof *acc);
    if (!acc) {
        ir_gtensor_free(&z);
        return fail(R, "out of memory");
    }
    bool ok = true;
    for (int64_t c0 = 0; ok && c0 < N; c0 += C) {
        int64_t n = N - c0 < C ? N - c0 : C;
        for (int64_t i = 0; i < n; i++)   /* the chunk's logits */
            for (int64_t j = 0; j < V; j++) {
                double s = 0;
                for (int64_t k = 0; k < D; k++) s += x->f[(c0 + i) * D + k] * w->f[k * V + j];
                z.f[i * V + j] = fp_round(z.elem, s);
            }
        for (int64_t i = 0; ok && i < n; i++) {   /* each row's loss, then its gradient in place */
            int64_t r = c0 + i, l = lab->i[r];
            if (l != ign && (l < 0 || l >= V)) {
                snprintf(R->err, R->errlen, "cross_entropy: label %lld of row %lld is outside [0, %lld) and is not the "
                         "ignore_index %lld", (long long)l, (long long)r, (long long)V, (long long)ign);
                ok = false;
                break;
            }
            double *row = z.f + i * V, m = -INFINITY, s = 0;
            for (int64_t j = 0; j < V; j++) m = fmax(m, row[j]);
            for (int64_t j = 0; j < V; j++) s += exp(row[j] - m);
            double lse = log(s) + m;
            setv(rows, r, l == ign ? 0.0 : lse - row[l], 0);
            for (int64_t j = 0; j < V; j++) {
                row[j] = l == ign ? 0.0 : fp_round(d->elem, (exp(row[j] - lse) - (j == l)) * d->f[r]);
                if (half) row[j] = fp_round(IR_BF16, row[j]);
            }
        }
        for (int64_t i = 0; ok && i < n; i++)   /* dx_c = g @ trans(w) */
            for (int64_t k = 0; k < D; k++) {
                double s = 0;
                for (int64_t j = 0; j < V; j++) s += z.f[i * V + j] * w->f[k * V + j];
                setv(dx, (c0 + i) * D + k, half ? fp_round(IR_BF16, s) : s, 0);
            }
        for (int64_t i = 0; ok && i < n; i++)   /* dw += trans(x_c) @ g, row by row in order */
            for (int64_t k = 0; k < D; k++)
                for (int64_t j = 0; j < V; j++) acc[k * V + j] += x->f[(c0 + i) * D + k] * z.f[i * V + j];
    }
    for (int64_t k = 0; ok && k < D * V; k++) setv(dw, k, half ? fp_round(IR_BF16, acc[k]) : acc[k], 0);
    tl_free(acc);
    ir_gtensor_free(&z);
    return ok;
}

/* linear_cross_entropy_rows: each row's logits (rounded to x's type), then its loss as
 * cross_entropy_rows; one row of logits at a time. */
static bool run_linear_cross_entropy_rows(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, IR_LCE_X), *w = in(R, IR_LCE_W), *lab = in(R, IR_LCE_LABELS);
    int64_t N = x->dims[0], D = x->dims[1], V = w->dims[1], ign = in(R, IR_LCE_IGNORE)->i[0];
    double *row = tl_calloc((size_t)(V + 1), sizeof *row);
    if (!row) return fail(R, "out of memory");
    bool ok = true;
    for (int64_t r = 0; ok && r < N; r++) {
        int64_t l = lab->i[r];
        if (l != ign && (l < 0 || l >= V)) {
            snprintf(R->err, R->errlen, "cross_entropy: label %lld of row %lld is outside [0, %lld) and is not the "
                     "ignore_index %lld", (long long)l, (long long)r, (long long)V, (long long)ign);
            ok = false;
            break;
        }
        double m = -INFINITY, s = 0;
        for (int64_t j = 0; j < V; j++) {
            double a = 0;
            for (int64_t k = 0; k < D; k++) a += x->f[r * D + k] * w->f[k * V + j];
            row[j] = fp_round(x->elem, a);
            m = fmax(m, row[j]);
        }
        for (int64_t j = 0; j < V; j++) s += exp(row[j] - m);
        setv(o, r, l == ign ? 0.0 : log(s) + m - row[l], 0);
    }
    tl_free(row);
    return ok;
}

static bool run_cross_entropy(Run *R, IrGTensor *outs)
{
    if (R->op->kind == IR_GOP_LINEAR_CROSS_ENTROPY) return run_linear_cross_entropy(R, outs);
    if (R->op->kind == IR_GOP_LINEAR_CROSS_ENTROPY_ROWS) return run_linear_cross_entropy_rows(R, &outs[0]);
    return R->op->kind == IR_GOP_CROSS_ENTROPY_ROWS ? run_cross_entropy_rows(R, &outs[0]) : run_cross_entropy_grad(R, &outs[0]);
}

/* rope(x, cos, sin), pairs (i, i + D/2) of the last axis rotated: y[i] = x[i] cos[i] -
 * x[i + h] sin[i], y[i + h] = x[i + h] cos[i] + x[i] sin[i] (h = D/2), the tables at x's
 * position with the last axis halved, broadcast. */
static bool run_rope(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0), *c = in(R, 1), *sn = in(R, 2);
    int64_t D = x->dims[x->rank - 1], h = D / 2, hd[64];
    memcpy(hd, x->dims, x->rank * sizeof *hd);
    hd[x->rank - 1] = h;
    for (int64_t n = 0; n < o->n; n++) {
        int64_t j = n % D, k = n / D * h + j % h;
        double cv = getf(c, bcast_at(c, x->rank, hd, k)), sv = getf(sn, bcast_at(sn, x->rank, hd, k));
        double y = j < h ? x->f[n] * cv - x->f[n + h] * sv : x->f[n] * cv + x->f[n - h] * sv;
        setv(o, n, y, 0);
    }
    return true;
}

/* ---- shapes ------------------------------------------------------------------------------------ */

static bool run_trans(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    const uint32_t *perm = R->op->attr.perm;
    int64_t stride[64];
    for (int64_t a = (int64_t)x->rank - 1, s = 1; a >= 0; a--) stride[a] = s, s *= x->dims[a];
    for (int64_t n = 0; n < o->n; n++) {
        int64_t k = n, at = 0;
        for (uint32_t a = o->rank; a-- > 0;) {
            at += (k % o->dims[a]) * stride[perm[a]];
            k /= o->dims[a];
        }
        setv(o, n, getf(x, at), geti(x, at));
    }
    return true;
}

/* concat (operands) and split (results) along the axis. */
static bool run_pieces(Run *R, IrGTensor *outs)
{
    bool split = R->op->kind == IR_GOP_SPLIT;
    const IrGTensor *whole = split ? in(R, 0) : &outs[0];
    int64_t outer, len, inner, off = 0;
    around(whole, R->op->attr.axis, &outer, &len, &inner);
    uint32_t n = split ? R->op->nout : R->op->nin;
    for (uint32_t p = 0; p < n; p++) {
        const IrGTensor *piece = split ? &outs[p] : in(R, p);
        int64_t pl = piece->dims[R->op->attr.axis];
        for (int64_t a = 0; a < outer; a++)
            for (int64_t j = 0; j < pl * inner; j++) {
                int64_t wi = (a * len + off) * inner + j, pi = a * pl * inner + j;
                if (split) setv(&outs[p], pi, getf(whole, wi), geti(whole, wi));
                else setv(&outs[0], wi, getf(piece, pi), geti(piece, pi));
            }
        off += pl;
    }
    return true;
}

static bool run_shape(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    switch (R->op->kind) {
    case IR_GOP_TRANS: return run_trans(R, o);
    case IR_GOP_FULL: case IR_GOP_BROADCAST:
        for (int64_t n = 0; n < o->n; n++) {
            int64_t at = bcast_at(x, o->rank, o->dims, n);
            setv(o, n, getf(x, at), geti(x, at));
        }
        return true;
    case IR_GOP_RESHAPE:
        if (x->n != o->n) return fail(R, "%lld elements cannot become %lld", (long long)x->n, (long long)o->n);
        for (int64_t n = 0; n < o->n; n++) setv(o, n, getf(x, n), geti(x, n));
        return true;
    default: return run_pieces(R, o);
    }
}

static bool run_dropout(Run *R, IrGTensor *o)
{
    const IrGTensor *x = in(R, 0);
    double p = getf(in(R, 1), 0);
    uint64_t seed = (uint64_t)geti(in(R, 2), 0);
    for (int64_t n = 0; n < o->n; n++)
        setv(o, n, tile_rand(seed, n) < p ? 0.0 : x->f[n] / (1.0 - p), 0);
    return true;
}

/* ---- the optimizer step (family 'O'): lists of tensors --------------------------------- */

static bool run_found_inf(Run *R, IrGTensor *o)
{
    bool any = false;
    for (uint32_t k = 0; k < R->op->nin && !any; k++)
        for (int64_t n = 0; n < in(R, k)->n && !any; n++) any = !isfinite(in(R, k)->f[n]);
    o->i[0] = any;
    return true;
}

/* sqrt(sum (g * s)^2), each g * s rounded to g's type (unscaled as GradScaler stores it). */
static bool run_global_norm(Run *R, IrGTensor *o)
{
    double s = getf(in(R, 0), 0), acc = 0;
    for (uint32_t k = 1; k < R->op->nin; k++) {
        const IrGTensor *g = in(R, k);
        for (int64_t n = 0; n < g->n; n++) {
            double x = fp_round(g->elem, g->f[n] * s);
            acc += x * x;
        }
    }
    setv(o, 0, sqrt(acc), 0);
    return true;
}

typedef struct AdamW {
    IrElem e;
    double lr, b1, b2, eps, wd, gs, bc1, bc2;
} AdamW;

/* One element, as torch.optim.AdamW (foreach=False, capturable=False) computes it:
 * p *= 1 - lr*wd; m = lerp(m, g, 1 - b1); v = v*b2 + (1 - b2)*g*g;
 * p -= lr/bc1 * m / (sqrt(v)/sqrt(bc2) + eps); m and v rounded as stored. */
static void adamw_elem(const AdamW *A, double g0, double *p, double *m, double *v)
{
    double g = fp_round(A->e, g0 * A->gs), w = 1.0 - A->b1;
    double p1 = fp_round(A->e, *p * (1.0 - A->lr * A->wd));
    *m = fp_round(A->e, w < 0.5 ? *m + w * (g - *m) : g - (g - *m) * (1.0 - w));
    *v = fp_round(A->e, *v * A->b2 + (1.0 - A->b2) * g * g);
    *p = fp_round(A->e, p1 - A->lr / A->bc1 * *m / (sqrt(*v) / sqrt(A->bc2) + A->eps));
}

static bool run_adamw(Run *R, IrGTensor *outs)
{
    const uint32_t b = IR_ADAMW_NSCALARS, n = (R->op->nin - b) / 4;
    double sc[IR_ADAMW_NSCALARS];
    for (uint32_t k = 0; k < b; k++) sc[k] = getf(in(R, k), 0);
    AdamW A = {in(R, b)->elem, sc[0], sc[1], sc[2], sc[3], sc[4], sc[6], 1.0 - pow(sc[1], sc[5]), 1.0 - pow(sc[2], sc[5])};
    bool skip = geti(in(R, b - 1), 0) != 0;
    for (uint32_t i = 0; i < n; i++) {
        const IrGTensor *p = in(R, b + i), *g = in(R, b + n + i), *m = in(R, b + 2 * n + i), *v = in(R, b + 3 * n + i);
        for (int64_t e = 0; e < p->n; e++) {
            double pe = p->f[e], me = m->f[e], ve = v->f[e];
            if (!skip) adamw_elem(&A, g->f[e], &pe, &me, &ve);
            outs[i].f[e] = pe, outs[n + i].f[e] = me, outs[2 * n + i].f[e] = ve;
        }
    }
    return true;
}

/* ---- dispatch ----------------------------------------------------------------------------------- */

static bool run_op(Run *R, IrGTensor *outs)
{
    const IrGOp *op = R->op;
    switch (ir_gop_family(op->kind)) {
    case 'k':
        if (op->kind == IR_GOP_SIZE) {
            int64_t v;
            if (!ir_size_eval(op->attr.size, R->g->sizes, R->sizes, R->g->nsizes, &v)) return fail(R, "unknown size");
            return setv(&outs[0], 0, (double)v, v), true;
        }
        return setv(&outs[0], 0, op->attr.c.f, op->attr.c.i), true;
    case 'x': return run_cast(R, &outs[0]);
    case 'u': return run_unary(R, &outs[0]);
    case 'b': case 'c': return run_binary(R, &outs[0]);
    case 't': return run_ternary(R, &outs[0]);
    case 'm': return run_matmul(R, &outs[0]);
    case 'r': return run_reduce(R, &outs[0]);
    case 'a': return run_along(R, &outs[0]);
    case 'n': return run_norm(R, &outs[0]);
    case 's': return run_shape(R, outs);
    case 'd': return run_dropout(R, &outs[0]);
    case 'A': return R->op->kind == IR_GOP_ATTENTION ? run_attention(R, outs) : run_attention_bwd(R, outs);
    case 'C': return run_conv2d(R, &outs[0]);
    case 'L': return run_cross_entropy(R, outs);
    case 'P': return run_rope(R, &outs[0]);
    case 'O':
        if (op->kind == IR_GOP_ADAMW) return run_adamw(R, outs);
        return op->kind == IR_GOP_FOUND_INF ? run_found_inf(R, &outs[0]) : run_global_norm(R, &outs[0]);
    default: return fail(R, "cannot be interpreted");
    }
}

/* Checks that the parameters have the shapes of their types under the sizes. */
static bool bind_params(Run *R, const IrGTensor *params)
{
    for (size_t p = 0; p < R->g->params.len; p++) {
        uint32_t v = R->g->params.data[p];
        const IrTensorType *t = &R->g->values.data[v].type;
        const IrGTensor *x = &params[p];
        bool ok = x->elem == t->elem && x->rank == t->rank;
        for (uint32_t k = 0; ok && k < t->rank; k++) {
            int64_t d;
            ok = ir_size_eval(t->dims[k], R->g->sizes, R->sizes, R->g->nsizes, &d) && d == x->dims[k];
        }
        if (!ok) return fail(R, "parameter %zu is not of type %s", p, ir_ttype_str(R->g->arena, t));
        R->vals[v] = *x;     /* borrowed: not freed */
        R->have[v] = true;
    }
    return true;
}

static bool exec_op(Run *R, uint32_t idx, IrGTensor *outs)
{
    R->op = &R->g->ops.data[idx];
    if (R->op->kind == IR_GOP_RETURN) {
        for (uint32_t k = 0; k < R->op->nin; k++) {
            const IrGTensor *x = in(R, k);
            if (!ir_gtensor_alloc(&outs[k], x->elem, x->rank, x->dims)) return fail(R, "out of memory");
            for (int64_t n = 0; n < x->n; n++) setv(&outs[k], n, getf(x, n), geti(x, n));
        }
        return true;
    }
    IrGTensor *res = tl_calloc(R->op->nout + 1, sizeof *res);   /* adamw: 3 per parameter */
    if (!res) return fail(R, "out of memory");
    bool ok = true;
    for (uint32_t r = 0; r < R->op->nout && ok; r++) ok = alloc_result(R, r, &res[r]);
    if (ok) ok = run_op(R, res);
    for (uint32_t r = 0; r < R->op->nout; r++) {
        R->vals[R->op->out[r]] = res[r];
        R->have[R->op->out[r]] = true;
    }
    tl_free(res);
    return ok;
}

bool ir_graph_interp(const IrGraph *g, const IrGTensor *params, const int64_t *sizes,
                     IrGTensor *outs, char *err, size_t errlen)
{
    Run R = {.g = g, .sizes = sizes, .err = err, .errlen = errlen};
    R.vals = tl_calloc(g->values.len + 1, sizeof *R.vals);
    R.have = tl_calloc(g->values.len + 1, sizeof *R.have);
    bool ok = R.vals && R.have && bind_params(&R, params);
    for (size_t i = 0; ok && i < g->ops.len; i++) ok = exec_op(&R, (uint32_t)i, outs);
    for (size_t v = 0; R.vals && v < g->values.len; v++)
        if (R.have[v] && g->values.data[v].def != IR_GNONE) ir_gtensor_free(&R.vals[v]);
    tl_free(R.vals);
    tl_free(R.have);
    return ok;
}

/* ---- through a fusion plan ------------------------------------------------------------------ */

/* Which values a kernel may read: 1 global memory (parameters, immediates, writes of
 * earlier kernels), 2 produced by the running kernel, 0 not there. With a memory plan,
 * buf[v] is value v's buffer (IR_GNONE: none) and holder[b] the value buffer b holds
 * now: a kernel that reads a value whose buffer a later value took is refused. */
static bool run_kernel(Run *R, const IrGPlan *plan, uint32_t k, char *where, IrGTensor *outs,
                       const uint32_t *buf, uint32_t *holder)
{
    const IrGKernel *K = &plan->kernels[k];
    for (uint32_t i = 0; buf && i < K->nreads; i++) {   /* a view's value is its root's memory */
        uint32_t v = ir_gplan_root(plan, K->reads[i]), b = buf[v];
        if (b != IR_GNONE && holder[b] != v) {
            R->op = &R->g->ops.data[K->ops[0]];
            return fail(R, "kernel k%u reads value %u from buffer b%u, which holds value %u now", k, v, b, holder[b]);
        }
    }
    for (uint32_t i = 0; buf && i < K->nwrites; i++) {   /* into its root's memory */
        uint32_t r = ir_gplan_root(plan, K->writes[i]);
        if (buf[r] != IR_GNONE) holder[buf[r]] = r;
    }
    /* A kernel of several matmuls is one GEMM against their concatenated weights (fusion
     * rule 4); here each product is computed on its own, but they must share the input.
     * (A flash_attention kernel's two products are attention's, rule 5.) */
    uint32_t lhs = IR_GNONE;
    for (uint32_t i = 0; !K->attn && i < K->nops; i++) {
        const IrGOp *op = &R->g->ops.data[K->ops[i]];
        if (op->kind != IR_GOP_MATMUL) continue;
        if (lhs != IR_GNONE && op->in[0] != lhs) {
            R->op = op;
            return fail(R, "kernel k%u: its matmuls do not share their left operand", k);
        }
        lhs = op->in[0];
    }
    for (uint32_t i = 0; i < K->nops; i++) {
        const IrGOp *op = &R->g->ops.data[K->ops[i]];
        for (uint32_t j = 0; j < op->nin; j++)
            if (!R->have[op->in[j]]) {
                R->op = op;
                return fail(R, "kernel k%u reads value %u, which no earlier kernel wrote", k, op->in[j]);
            }
        int64_t rows;   /* a chunked kernel's regime at these sizes (IrGKernel.whole) */
        R->whole = K->chunk > 0 && ir_lce_one_chunk(R->g->values.data[op->in[IR_LCE_X]].type.dims[0], K->whole, R->g->sizes,
                                                    R->sizes, R->g->nsizes) &&
                   ir_size_eval(R->g->values.data[op->in[IR_LCE_X]].type.dims[0], R->g->sizes, R->sizes, R->g->nsizes, &rows)
                       ? rows : 0;
        bool ok = exec_op(R, K->ops[i], outs);
        R->whole = 0;
        if (!ok) return false;
        for (uint32_t r = 0; r < op->nout; r++) where[op->out[r]] = 2;
    }
    for (uint32_t i = 0; i < K->nwrites; i++) where[K->writes[i]] = 1;
    for (size_t v = 0; v < R->g->values.len; v++)
        if (where[v] == 2) {           /* stayed inside the kernel: gone */
            ir_gtensor_free(&R->vals[v]);
            R->have[v] = false;
            where[v] = 0;
        }
    return true;
}

bool ir_graph_interp_plan(const IrGraph *g, const IrGPlan *plan, const IrGTensor *params,
                          const int64_t *sizes, IrGTensor *outs, char *err, size_t errlen)
{
    Run R = {.g = g, .sizes = sizes, .err = err, .errlen = errlen};
    R.vals = tl_calloc(g->values.len + 1, sizeof *R.vals);
    R.have = tl_calloc(g->values.len + 1, sizeof *R.have);
    char *where = tl_calloc(g->values.len + 1, 1);
    bool ok = R.vals && R.have && where && bind_params(&R, params);
    for (size_t i = 0; ok && i < g->ops.len; i++) {
        IrGOpKind k = g->ops.data[i].kind;
        if (k == IR_GOP_CONST || k == IR_GOP_SIZE) ok = exec_op(&R, (uint32_t)i, outs);
    }
    uint32_t *buf = NULL, *holder = NULL;
    if (ok && plan->nbuffers) {
        buf = tl_calloc(g->values.len + 1, sizeof *buf);
        holder = tl_calloc(plan->nbuffers, sizeof *holder);
        ok = buf && holder;
        for (size_t v = 0; ok && v < g->values.len; v++) buf[v] = IR_GNONE;
        for (uint32_t b = 0; ok && b < plan->nbuffers; b++) {
            holder[b] = IR_GNONE;
            for (uint32_t i = 0; i < plan->buffers[b].nvalues; i++) buf[plan->buffers[b].values[i]] = b;
        }
        if (!ok) fail(&R, "out of memory");
    }
    for (uint32_t k = 0; ok && k < plan->nkernels; k++)
        ok = run_kernel(&R, plan, k, where, outs, buf, holder);
    tl_free(buf);
    tl_free(holder);
    const IrGOp *ret = ok ? &g->ops.data[g->ops.len - 1] : NULL;
    for (uint32_t j = 0; ret && j < ret->nin && ok; j++)
        if (!R.have[ret->in[j]]) {
            R.op = ret;
            ok = fail(&R, "returned value %u was written by no kernel", ret->in[j]);
        }
    if (ok) ok = exec_op(&R, (uint32_t)g->ops.len - 1, outs);
    for (size_t v = 0; R.vals && v < g->values.len; v++)
        if (R.have[v] && g->values.data[v].def != IR_GNONE) ir_gtensor_free(&R.vals[v]);
    tl_free(R.vals);
    tl_free(R.have);
    tl_free(where);
    return ok;
}
