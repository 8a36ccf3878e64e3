/* The reference interpreter's driver: argument checks, the grid loop, values,
 * structured control flow, memory (load, store, atomics), assert and print.
 *
 * Programs run one after another with x fastest, then y, then z. Each program gets a
 * fresh value table; each op computes whole tiles (interp_ops.c for the pure ones).
 * Control flow walks the structured regions: a region's block arguments are bound to
 * copies of the incoming values, and its terminator's operands are the outgoing ones.
 * A `return` anywhere unwinds every region of the program (EX_RETURN). Every error
 * goes to the DiagList at the op's location and unwinds the same way (EX_ERROR). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "interp_internal.h"

enum { OP_OVERHEAD = 16 };   /* an op's fixed cost against the work bound, in elements */

typedef enum { EX_OK, EX_RETURN, EX_ERROR } ExecStatus;

/* ---- errors and values ------------------------------------------------------------- */

bool interp_fail(Interp *I, const IrOp *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(I->diags, DIAG_ERROR, op ? op->loc : I->fn->loc, fmt, ap);
    va_end(ap);
    return false;
}

const char *interp_where(Interp *I, char *buf, size_t n)
{
    snprintf(buf, n, " in kernel '%s', program (%" PRId64 ", %" PRId64 ", %" PRId64 ")",
             I->fn->name, I->pid[0], I->pid[1], I->pid[2]);
    return buf;
}

bool tile_alloc(Interp *I, const IrOp *op, const IrType *t, Tile *out)
{
    int64_t n = ir_type_numel(t);
    *out = (Tile){.type = t, .n = n};
    out->s = tl_malloc((size_t)n * sizeof *out->s);
    if (t->elem == IR_PTR) out->buf = tl_malloc((size_t)n * sizeof *out->buf);
    if (!out->s || (t->elem == IR_PTR && !out->buf)) {
        tile_free(out);
        return interp_fail(I, op, "out of memory in the interpreter");
    }
    return true;
}

void tile_free(Tile *t)
{
    tl_free(t->s);
    tl_free(t->buf);
    *t = (Tile){0};
}

bool tile_copy(Interp *I, const IrOp *op, const Tile *src, Tile *dst)
{
    if (!tile_alloc(I, op, src->type, dst)) return false;
    memcpy(dst->s, src->s, (size_t)src->n * sizeof *src->s);
    if (src->buf) memcpy(dst->buf, src->buf, (size_t)src->n * sizeof *src->buf);
    return true;
}

/* Takes ownership of *t. */
static void set_value(Interp *I, IrValue v, Tile *t)
{
    tile_free(&I->vals[v]);
    I->vals[v] = *t;
    *t = (Tile){0};
}

static void free_tiles(Tile *ts, uint32_t n)
{
    if (!ts) return;
    for (uint32_t i = 0; i < n; i++) tile_free(&ts[i]);
    tl_free(ts);
}

/* Copies of the values ops[0..n) (a terminator's outgoing values), so that binding
 * them to block arguments cannot clobber a value still being read. */
static Tile *collect(Interp *I, const IrOp *op, const IrValue *ops, uint32_t n)
{
    Tile *ts = tl_calloc(n ? n : 1, sizeof *ts);
    if (!ts) {
        interp_fail(I, op, "out of memory in the interpreter");
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        if (!tile_copy(I, op, &I->vals[ops[i]], &ts[i])) {
            free_tiles(ts, n);
            return NULL;
        }
    return ts;
}

/* Moves ts[0..n) into the values dst[0..n). */
static void bind(Interp *I, const IrValue *dst, Tile *ts, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) set_value(I, dst[i], &ts[i]);
}

/* ---- memory ------------------------------------------------------------------------- */

static Slot mem_read(IrElem e, const void *p)
{
    Slot r = {0};
    union { int8_t i8; int16_t i16; int32_t i32; int64_t i64; uint8_t u8; uint16_t u16;
            uint32_t u32; uint64_t u64; float f; double d; } m;
    memcpy(&m, p, (size_t)ir_elem_bytes(e));
    switch (e) {
    case IR_I1: r.i = m.u8 != 0; break;
    case IR_I8: r.i = m.i8; break;
    case IR_I16: r.i = m.i16; break;
    case IR_I32: r.i = m.i32; break;
    case IR_I64: case IR_U64: r.i = m.i64; break;
    case IR_U8: r.i = m.u8; break;
    case IR_U16: r.i = m.u16; break;
    case IR_U32: r.i = m.u32; break;
    case IR_F16: r.f = fp_f16_to_f32(m.u16); break;
    case IR_BF16: r.f = fp_bf16_to_f32(m.u16); break;
    case IR_F32: r.f = m.f; break;
    case IR_F64: r.f = m.d; break;
    case IR_F8E4M3: r.f = fp_f8e4m3_to_f32(m.u8); break;
    case IR_F8E5M2: r.f = fp_f8e5m2_to_f32(m.u8); break;
    default: break;
    }
    return r;
}

static void mem_write(IrElem e, void *p, Slot v)
{
    union { uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64; float f; double d; } m;
    switch (e) {
    case IR_I1: m.u8 = v.i != 0; break;
    case IR_I8: case IR_U8: m.u8 = (uint8_t)v.i; break;
    case IR_I16: case IR_U16: m.u16 = (uint16_t)v.i; break;
    case IR_I32: case IR_U32: m.u32 = (uint32_t)v.i; break;
    case IR_I64: case IR_U64: m.u64 = (uint64_t)v.i; break;
    case IR_F16: m.u16 = fp_f32_to_f16((float)v.f); break;
    case IR_BF16: m.u16 = fp_f32_to_bf16((float)v.f); break;
    case IR_F32: m.f = (float)v.f; break;
    case IR_F64: m.d = v.f; break;
    case IR_F8E4M3: m.u8 = fp_f32_to_f8e4m3((float)v.f); break;
    case IR_F8E5M2: m.u8 = fp_f32_to_f8e5m2((float)v.f); break;
    default: return;
    }
    memcpy(p, &m, (size_t)ir_elem_bytes(e));
}

/* The in-memory bits of a value, for atomic_cas (which compares bits). */
static uint64_t slot_bits(IrElem e, Slot v)
{
    uint64_t b = 0;
    mem_write(e, &b, v);
    return b;
}

/* The address of lane k of pointer tile p, after the null and bounds checks. */
static void *lane_addr(Interp *I, const IrOp *op, const Tile *p, int64_t k, const char *verb)
{
    int64_t pk = k * bstride(p), off = p->s[pk].i;
    int32_t b = p->buf[pk];
    const InterpBuffer *buf = b >= 0 ? &I->args[b].u.buf : NULL;
    if (buf && off >= 0 && off < buf->count) return (char *)buf->data + off * ir_elem_bytes(buf->elem);
    char w[160];
    interp_where(I, w, sizeof w);
    if (!buf)
        interp_fail(I, op, "null pointer dereference%s: lane %" PRId64 " %s through a null pointer", w, k, verb);
    else
        interp_fail(I, op, "out-of-bounds %s%s: argument '%s' has %" PRId64 " elements, lane %" PRId64 " %s element %" PRId64,
                    ir_op_info[op->code].text, w, I->fn->param_names[b], buf->count, k, verb, off);
    return NULL;
}

static bool lane_on(const IrOp *op, const Interp *I, uint32_t mask_at, int64_t k);
static void observe(Interp *I, const IrOp *op, uint32_t result, const Tile *t);

/* check_bounds (passes/bounds.c): the mask of the lanes whose pointer lies in the
 * base parameter's first n elements; the first lane outside (in lane order, in the
 * first program that has one) goes to the report buffer, as the GPU records it. A lane
 * whose pointer came from another buffer is left to the interpreter's own check. */
static bool exec_check_bounds(Interp *I, const IrOp *op)
{
    const Tile *p = interp_opnd(I, op, 0), *base = interp_opnd(I, op, 1);
    const Tile *n = interp_opnd(I, op, 2), *rep = interp_opnd(I, op, 3);
    Tile res;
    if (!tile_alloc(I, op, interp_result_type(I, op, 0), &res)) return false;
    int32_t rb = rep->buf[0], bb = base->buf[0];
    const InterpBuffer *report = rb >= 0 ? &I->args[rb].u.buf : NULL;
    if (!report || report->count < IR_BOUNDS_WORDS || bb < 0) {
        tile_free(&res);
        return interp_fail(I, op, "check_bounds needs its parameter and a report of %d i64 words", IR_BOUNDS_WORDS);
    }
    int64_t count = n->s[0].i, *w = report->data;
    for (int64_t k = 0; k < res.n; k++) {
        int64_t pk = k * bstride(p), elem = p->s[pk].i - base->s[0].i;
        bool on = lane_on(op, I, 4, k);
        bool in = count < 0 || p->buf[pk] != bb || (elem >= 0 && elem < count);
        res.s[k].i = on && in;
        if (!on || in || w[IR_BOUNDS_FLAG]) continue;
        int64_t rec[IR_BOUNDS_WORDS] = {[IR_BOUNDS_FLAG] = 1, [IR_BOUNDS_PARAM] = bb, [IR_BOUNDS_OP] = op->attr.i,
                                        [IR_BOUNDS_PID_X] = I->pid[0], [IR_BOUNDS_PID_Y] = I->pid[1],
                                        [IR_BOUNDS_PID_Z] = I->pid[2], [IR_BOUNDS_LANE] = k, [IR_BOUNDS_ELEM] = elem,
                                        [IR_BOUNDS_COUNT] = count, [IR_BOUNDS_LINE] = op->loc.line,
                                        [IR_BOUNDS_COL] = op->loc.col};
        memcpy(w, rec, sizeof rec);
    }
    if (I->observe) observe(I, op, 0, &res);
    set_value(I, op->results[0], &res);
    return true;
}

static bool lane_on(const IrOp *op, const Interp *I, uint32_t mask_at, int64_t k)
{
    if (op->noperands <= mask_at) return true;
    const Tile *m = interp_opnd(I, op, mask_at);
    return m->s[bidx(m, k)].i != 0;
}

static bool exec_load(Interp *I, const IrOp *op, Tile *res)
{
    const Tile *p = interp_opnd(I, op, 0);
    const Tile *other = op->noperands > 2 ? interp_opnd(I, op, 2) : NULL;
    IrElem e = res->type->elem;
    for (int64_t k = 0; k < res->n; k++) {
        if (!lane_on(op, I, 1, k)) {
            res->s[k] = other ? other->s[bidx(other, k)] : (Slot){0};
            continue;
        }
        void *a = lane_addr(I, op, p, k, "reads");
        if (!a) return false;
        res->s[k] = mem_read(e, a);
    }
    return true;
}

/* block_load: element i is ptr[sum (offsets[d] + i[d]) * strides[d]] where every
 * coordinate lies in [0, shape[d]), else 0; coordinates, the test and the index in the
 * operands' integer type, wrapping as its arithmetic does (LANGUAGE-REFERENCE.md).
 * block_store writes element i there under the same test and drops it elsewhere. With
 * IR_BLOCK_UPPER (`upper`) only coordinate < shape[d] is tested. */
/* The block whose operands (ptr, shape x R, strides x R, offsets x R) begin at operand
 * `at` of op (block_load and block_store: 0; tma_store: 2; tma_copy: 3), of io's type: read into io
 * (zeros outside the tensor), or with `write` written from io (nothing outside). An outer
 * pair (x, s) (ir_block_outer) moves ptr by x * s first, in its own integer type. */
static bool block_at(Interp *I, const IrOp *op, uint32_t at, Tile *io, bool write)
{
    Tile moved = *interp_opnd(I, op, at);
    Slot base = moved.s[0];
    uint32_t ox = ir_block_outer(I->fn, op);
    if (ox) {
        IrElem xe = interp_opnd(I, op, ox)->type->elem;
        uint64_t xs = (uint64_t)interp_opnd(I, op, ox)->s[0].i * (uint64_t)interp_opnd(I, op, ox + 1)->s[0].i;
        base.i += interp_int_norm(xe, (int64_t)xs);
        moved.s = &base;
    }
    const Tile *p = &moved;
    const IrType *t = io->type;
    int r = t->rank;
    IrElem ie = interp_opnd(I, op, at + 1)->type->elem;
    int64_t shape[IR_MAX_RANK], stride[IR_MAX_RANK], off[IR_MAX_RANK];
    for (int d = 0; d < r; d++) {
        shape[d] = interp_opnd(I, op, at + 1 + d)->s[0].i;
        stride[d] = interp_opnd(I, op, at + 1 + r + d)->s[0].i;
        off[d] = interp_opnd(I, op, at + 1 + 2 * r + d)->s[0].i;
    }
    IrElem e = t->elem;
    bool lower = !(at == 0 && (op->attr.i & IR_BLOCK_UPPER));
    for (int64_t k = 0, n = ir_type_numel(t); k < n; k++) {
        int64_t rest = k, elem = 0;
        bool in = true;
        for (int d = r - 1; d >= 0; d--) {
            int64_t c = interp_int_norm(ie, (int64_t)((uint64_t)off[d] + (uint64_t)(rest % t->shape[d])));
            rest /= t->shape[d];
            in &= (c >= 0 || !lower) && c < shape[d];
            elem = interp_int_norm(ie, (int64_t)((uint64_t)elem + (uint64_t)c * (uint64_t)stride[d]));
        }
        if (!in) {
            if (!write) io->s[k] = (Slot){0};
            continue;
        }
        Tile lane = *p;                 /* the element's pointer: p's, moved by elem */
        Slot s = {.i = p->s[0].i + elem};
        lane.s = &s;
        void *a = lane_addr(I, op, &lane, k, write ? "writes" : "reads");
        if (!a) return false;
        if (write) mem_write(e, a, io->s[bidx(io, k)]);
        else io->s[k] = mem_read(e, a);
    }
    return true;
}

static bool exec_block_load(Interp *I, const IrOp *op, Tile *res) { return block_at(I, op, 0, res, false); }

static bool exec_block_store(Interp *I, const IrOp *op)
{
    Tile v = *interp_opnd(I, op, op->noperands - 1);   /* the value, which block_at only reads */
    return block_at(I, op, 0, &v, true);
}

/* tma_store (buf, value, ptr, ...): the block_store of the value (the staging buffer
 * and the order of its chunks are the GPU's business). */
static bool exec_tma_store(Interp *I, const IrOp *op)
{
    Tile v = *interp_opnd(I, op, 1);
    return block_at(I, op, 2, &v, true);
}

static bool exec_store(Interp *I, const IrOp *op)
{
    const Tile *p = interp_opnd(I, op, 0), *v = interp_opnd(I, op, 1);
    IrElem e = p->type->pointee;
    int64_t n = p->n > v->n ? p->n : v->n;
    for (int64_t k = 0; k < n; k++) {
        if (!lane_on(op, I, 2, k)) continue;
        void *a = lane_addr(I, op, p, k, "writes");
        if (!a) return false;
        mem_write(e, a, interp_convert(v->type->elem, e, v->s[bidx(v, k)]));
    }
    return true;
}

static Slot atomic_combine(IrOpcode c, IrElem e, Slot old, Slot v)
{
    bool fl = ir_elem_is_float(e);
    Slot r = v;
    switch (c) {
    case IR_OP_ADD: case IR_OP_ATOMIC_ADD:
        if (fl) r.f = fp_round(e, old.f + v.f);
        else r.i = interp_int_norm(e, (int64_t)((uint64_t)old.i + (uint64_t)v.i));
        break;
    case IR_OP_ATOMIC_MAX: case IR_OP_ATOMIC_MIN: {
        bool mx = c == IR_OP_ATOMIC_MAX;
        if (fl) r.f = (isnan(old.f) || isnan(v.f)) ? (isnan(old.f) ? old.f : v.f)
                      : (mx ? (v.f > old.f ? v.f : old.f) : (v.f < old.f ? v.f : old.f));
        else if (ir_elem_is_signed(e)) r.i = mx ? (v.i > old.i ? v.i : old.i) : (v.i < old.i ? v.i : old.i);
        else r.i = (mx ? (uint64_t)v.i > (uint64_t)old.i : (uint64_t)v.i < (uint64_t)old.i) ? v.i : old.i;
        break;
    }
    case IR_OP_ATOMIC_AND: r.i = old.i & v.i; break;
    case IR_OP_ATOMIC_OR: r.i = old.i | v.i; break;
    case IR_OP_ATOMIC_XOR: r.i = old.i ^ v.i; break;
    default: break;                     /* xchg: the new value */
    }
    return r;
}

/* Lanes update memory one after another in lane order; masked-off lanes give 0. */
static bool exec_atomic(Interp *I, const IrOp *op, Tile *res)
{
    bool cas = op->code == IR_OP_ATOMIC_CAS;
    const Tile *p = interp_opnd(I, op, 0), *v = interp_opnd(I, op, cas ? 2 : 1);
    const Tile *cmp = cas ? interp_opnd(I, op, 1) : NULL;
    IrElem e = res->type->elem;
    for (int64_t k = 0; k < res->n; k++) {
        res->s[k] = (Slot){0};
        if (!lane_on(op, I, cas ? 3 : 2, k)) continue;
        void *a = lane_addr(I, op, p, k, "updates");
        if (!a) return false;
        Slot old = mem_read(e, a), val = v->s[bidx(v, k)];
        if (cas && slot_bits(e, old) != slot_bits(e, cmp->s[bidx(cmp, k)])) val = old;
        else if (!cas) val = atomic_combine(op->code, e, old, val);
        mem_write(e, a, val);
        res->s[k] = old;
    }
    return true;
}

/* ---- shared-memory buffers (the GPU level) -------------------------------------------------
 * A buffer is a tile [stages, ...] of the program, zeros at first; async_copy writes one
 * stage at once (the wait that a GPU needs before reading it changes nothing here) and
 * local_load reads one. A stage out of range is an error, not a wrap. */
static bool stage_of(Interp *I, const IrOp *op, int64_t *first, int64_t *n)
{
    const Tile *b = interp_opnd(I, op, 0), *s = interp_opnd(I, op, 1);
    int64_t stages = b->type->shape[0], k = s->s[0].i;
    if (k < 0 || k >= stages)
        return interp_fail(I, op, "stage %" PRId64 " of a buffer of %" PRId64 " stages", k, stages);
    *n = b->n / stages;
    *first = k * *n;
    return true;
}

static bool exec_local_alloc(Interp *I, const IrOp *op)
{
    Tile t;
    if (!tile_alloc(I, op, interp_result_type(I, op, 0), &t)) return false;
    memset(t.s, 0, (size_t)t.n * sizeof *t.s);
    set_value(I, op->results[0], &t);
    return true;
}

static bool exec_async_copy(Interp *I, const IrOp *op)
{
    int64_t first = 0, n = 0;
    if (!stage_of(I, op, &first, &n)) return false;
    Tile *b = &I->vals[op->operands[0]];
    const Tile *p = interp_opnd(I, op, 2);
    for (int64_t k = 0; k < n; k++) {
        if (!lane_on(op, I, 3, k)) {
            b->s[first + k] = (Slot){0};
            continue;
        }
        void *a = lane_addr(I, op, p, k, "reads");
        if (!a) return false;
        b->s[first + k] = mem_read(b->type->elem, a);
    }
    return true;
}

/* tma_copy: the block into one stage at once, as async_copy (the barrier that a GPU
 * waits on changes nothing here: tma_wait and mbarrier_init do nothing). */
/* ---- mbarriers --------------------------------------------------------------------------
 * Each slot of a barrier buffer (i64[S, 1, 1]) holds the phases it has completed (bits
 * 0..31) and whether copies have landed in its current phase (bit 32). A TMA copy marks
 * its slot; the consumers' wait on it completes that phase (the copies land at once
 * here) and an mbarrier_arrive completes one (it stands for every consumer warp's
 * arrival). A wait for parity p passes when the slot's current phase has the other
 * parity, as mbarrier.try_wait.parity does; any other wait would never pass on a GPU,
 * and the interpreter says so: a ring whose stages or phases are numbered wrongly
 * (passes/shared.c, passes/warpspec.c, passes/persistent.c) fails here. */
#define BAR_LANDED (INT64_C(1) << 32)
#define BAR_PHASES (BAR_LANDED - 1)

static int64_t *bar_slot(Interp *I, const IrOp *op, uint32_t bars, uint32_t slot)
{
    Tile *b = &I->vals[op->operands[bars]];
    int64_t k = interp_opnd(I, op, slot)->s[0].i;
    if (k < 0 || k >= b->n) {
        interp_fail(I, op, "barrier slot %" PRId64 " of %" PRId64, k, b->n);
        return NULL;
    }
    return &b->s[k].i;
}

static bool pred_of(Interp *I, const IrOp *op, uint32_t i) { return op->noperands <= i || interp_opnd(I, op, i)->s[0].i; }

static bool exec_mbarrier(Interp *I, const IrOp *op)
{
    if (op->code == IR_OP_MBARRIER_INIT) {
        Tile *b = &I->vals[op->operands[0]];
        for (int64_t k = 0; k < b->n; k++) b->s[k].i = 0;
        return true;
    }
    bool wait = op->code == IR_OP_TMA_WAIT;
    if (!pred_of(I, op, wait ? 3 : 2)) return true;
    int64_t *s = bar_slot(I, op, 0, 1);
    if (!s) return false;
    int64_t done = *s & BAR_PHASES;
    if (!wait || (op->attr.i == 0 && (*s & BAR_LANDED))) {
        /* an arrival, or the landed copies of a consumer's wait, complete the phase */
        done = (done + 1) & BAR_PHASES;
        *s = (wait ? 0 : *s & BAR_LANDED) | done;
        if (!wait) return true;
    }
    int64_t parity = interp_opnd(I, op, 2)->s[0].i;
    if (done % 2 != parity % 2) return true;
    char w[160];
    return interp_fail(I, op, "waits for phase parity %" PRId64 " of barrier slot %" PRId64 ", which has completed %"
                       PRId64 " phases: on a GPU it would wait forever%s", parity, interp_opnd(I, op, 1)->s[0].i, done,
                       interp_where(I, w, sizeof w));
}

static bool exec_tma_copy(Interp *I, const IrOp *op)
{
    int64_t first = 0, n = 0;
    if (!stage_of(I, op, &first, &n)) return false;
    Tile *b = &I->vals[op->operands[0]];
    const IrType *bt = b->type;
    uint32_t r = bt->rank - 1u;
    bool pred = op->noperands == 5 + 3 * r || op->noperands == 7 + 3 * r;
    if (pred && !interp_opnd(I, op, op->noperands - 1)->s[0].i) return true;
    int64_t *slot = bar_slot(I, op, 2, 1);
    if (!slot) return false;
    *slot |= BAR_LANDED;
    IrCtx *c = I->fn->module->ctx;
    Tile blk;
    const IrType *st = ir_type_tile(c, ir_type_scalar(c, bt->elem), (int)bt->rank - 1, bt->shape + 1);
    if (!tile_alloc(I, op, st, &blk)) return false;
    bool ok = block_at(I, op, 3, &blk, false);
    if (ok) memcpy(b->s + first, blk.s, (size_t)n * sizeof *b->s);
    tile_free(&blk);
    return ok;
}

static bool exec_local_load(Interp *I, const IrOp *op, Tile *res)
{
    int64_t first = 0, n = 0;
    if (!stage_of(I, op, &first, &n)) return false;
    const Tile *b = interp_opnd(I, op, 0);
    if (op->attr.i != 1) {
        memcpy(res->s, b->s + first, (size_t)n * sizeof *res->s);
        return true;
    }
    int64_t R = b->type->shape[1], C = b->type->shape[2];    /* res[c][r] = stage[r][c] */
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) res->s[c * R + r] = b->s[first + r * C + c];
    return true;
}

/* local_store: the value into one stage (res[r][c] of a transposed store is the
 * value's [c][r]). */
static bool exec_local_store(Interp *I, const IrOp *op)
{
    int64_t first = 0, n = 0;
    if (!stage_of(I, op, &first, &n)) return false;
    Tile *b = &I->vals[op->operands[0]];
    const Tile *v = interp_opnd(I, op, 2);
    if (op->attr.i != 1) {
        memcpy(b->s + first, v->s, (size_t)n * sizeof *b->s);
        return true;
    }
    int64_t R = b->type->shape[1], C = b->type->shape[2];    /* stage[r][c] = value[c][r] */
    for (int64_t r = 0; r < R; r++)
        for (int64_t c = 0; c < C; c++) b->s[first + r * C + c] = v->s[c * R + r];
    return true;
}

/* ---- assert and print ------------------------------------------------------------------ */

static bool exec_assert(Interp *I, const IrOp *op)
{
    const Tile *c = interp_opnd(I, op, 0);
    for (int64_t k = 0; k < c->n; k++)
        if (!c->s[k].i) {
            char w[160];
            return interp_fail(I, op, "assertion failed%s: %s", interp_where(I, w, sizeof w),
                               op->attr.s ? op->attr.s : "");
        }
    return true;
}

static void print_elem(Interp *I, FILE *out, const Tile *t, int64_t k)
{
    IrElem e = t->type->elem;
    Slot v = t->s[k];
    if (e == IR_PTR) {
        if (t->buf[k] < 0) fprintf(out, "null");
        else fprintf(out, "%s+%" PRId64, I->fn->param_names[t->buf[k]], v.i);
    } else if (ir_elem_is_float(e)) {
        int digits = e == IR_F64 ? 17 : e == IR_F32 ? 9 : e == IR_F16 ? 5 : e == IR_BF16 ? 4 : 3;
        fprintf(out, "%.*g", digits, v.f);
    } else if (ir_elem_is_signed(e)) {
        fprintf(out, "%" PRId64, v.i);
    } else {
        fprintf(out, "%" PRIu64, (uint64_t)v.i);
    }
}

/* Tiles print as nested lists: [[a, b], [c, d]]. */
static void print_tile(Interp *I, FILE *out, const Tile *t, int dim, int64_t *k)
{
    if (dim >= t->type->rank || dim >= IR_MAX_RANK) {
        print_elem(I, out, t, (*k)++);
        return;
    }
    fputc('[', out);
    for (int32_t i = 0; i < t->type->shape[dim]; i++) {
        if (i) fputs(", ", out);
        print_tile(I, out, t, dim + 1, k);
    }
    fputc(']', out);
}

static void exec_print(Interp *I, const IrOp *op)
{
    FILE *out = I->out;
    fprintf(out, "pid (%" PRId64 ", %" PRId64 ", %" PRId64 ") %s", I->pid[0], I->pid[1], I->pid[2],
            op->attr.s ? op->attr.s : "");
    for (uint32_t i = 0; i < op->noperands; i++) {
        int64_t k = 0;
        fputc(' ', out);
        print_tile(I, out, interp_opnd(I, op, i), 0, &k);
    }
    fputc('\n', out);
}

/* ---- control flow ------------------------------------------------------------------------ */

static ExecStatus exec_op(Interp *I, const IrOp *op);

/* Runs a block up to its terminator, which goes to *term (NULL if it has none). */
static ExecStatus exec_block(Interp *I, const IrBlock *blk, const IrOp **term)
{
    *term = NULL;
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (op->code == IR_OP_RETURN) {
            I->ret = op;
            return EX_RETURN;
        }
        if (ir_op_info[op->code].flags & IR_T) {
            *term = op;
            return EX_OK;
        }
        ExecStatus st = exec_op(I, op);
        if (st != EX_OK) return st;
    }
    return EX_OK;
}

/* Runs a region: binds its arguments from `skip` on to the incoming values *ts (nin
 * of them, consumed), runs it, and replaces *ts with copies of the values its
 * terminator hands on (operands from `first` on; their count goes to *nout). */
static ExecStatus run_region(Interp *I, const IrOp *op, const IrBlock *blk, uint32_t skip,
                             Tile **ts, uint32_t *n, uint32_t first)
{
    uint32_t room = blk->nargs > skip ? blk->nargs - skip : 0;
    if (room) bind(I, blk->args + skip, *ts, *n < room ? *n : room);
    free_tiles(*ts, *n);
    *ts = NULL;
    *n = 0;
    const IrOp *term;
    ExecStatus st = exec_block(I, blk, &term);
    if (st != EX_OK) return st;
    I->term = term;
    uint32_t nout = term && term->noperands > first ? term->noperands - first : 0;
    *ts = collect(I, op, nout ? term->operands + first : NULL, nout);
    *n = nout;
    return *ts ? EX_OK : EX_ERROR;
}

static bool charge(Interp *I, const IrOp *op, int64_t work);

/* An iteration costs an op (its branch back) against the work bound too. */
static bool count_iteration(Interp *I, const IrOp *op, int64_t *count)
{
    if (!charge(I, op, OP_OVERHEAD)) return false;
    if (++*count <= I->max_iters) return true;
    char w[160];
    return interp_fail(I, op, "loop ran past %" PRId64 " iterations%s", I->max_iters, interp_where(I, w, sizeof w));
}

/* Ends a control-flow op: on success its results take the carried values. */
static ExecStatus finish(Interp *I, const IrOp *op, Tile *ts, uint32_t n, ExecStatus st)
{
    if (st == EX_OK) bind(I, op->results, ts, n < op->nresults ? n : op->nresults);
    free_tiles(ts, n);
    return st;
}

static bool bind_iv(Interp *I, const IrOp *op, IrValue v, int64_t iv)
{
    Tile t;
    if (!tile_alloc(I, op, ir_value_type(I->fn, v), &t)) return false;
    t.s[0].i = interp_int_norm(t.type->elem, iv);
    set_value(I, v, &t);
    return true;
}

/* (lo, hi, step, inits...); the body's arguments are the induction variable, then
 * the carried values. A negative step counts down, as Python's range. */
static ExecStatus exec_for(Interp *I, const IrOp *op)
{
    int64_t lo = interp_opnd(I, op, 0)->s[0].i, hi = interp_opnd(I, op, 1)->s[0].i;
    int64_t step = interp_opnd(I, op, 2)->s[0].i, count = 0;
    if (step == 0) return interp_fail(I, op, "for loop with a step of 0"), EX_ERROR;
    const IrBlock *body = &op->regions[0];
    if (body->nargs < 1) return interp_fail(I, op, "for loop without an induction variable"), EX_ERROR;
    uint32_t n = op->noperands - 3;
    Tile *cur = collect(I, op, op->operands + 3, n);
    if (!cur) return EX_ERROR;
    for (int64_t iv = lo; step > 0 ? iv < hi : iv > hi;) {
        if (!count_iteration(I, op, &count) || !bind_iv(I, op, body->args[0], iv))
            return finish(I, op, cur, n, EX_ERROR);
        ExecStatus st = run_region(I, op, body, 1, &cur, &n, 0);
        if (st != EX_OK) return finish(I, op, cur, n, st);
        if (__builtin_add_overflow(iv, step, &iv)) break;
    }
    return finish(I, op, cur, n, EX_OK);
}

static ExecStatus exec_if(Interp *I, const IrOp *op)
{
    const IrBlock *blk = &op->regions[interp_opnd(I, op, 0)->s[0].i ? 0 : 1];
    Tile *ts = NULL;
    uint32_t n = 0;
    ExecStatus st = run_region(I, op, blk, 0, &ts, &n, 0);
    return finish(I, op, ts, n, st);
}

/* (inits...); before: args -> condition(c, values...); if c, after: values -> yield;
 * else the values are the results. */
static ExecStatus exec_while(Interp *I, const IrOp *op)
{
    uint32_t n = op->noperands;
    Tile *cur = collect(I, op, op->operands, n);
    int64_t count = 0;
    if (!cur) return EX_ERROR;
    for (;;) {
        ExecStatus st = run_region(I, op, &op->regions[0], 0, &cur, &n, 1);
        if (st != EX_OK) return finish(I, op, cur, n, st);
        const IrOp *cond = I->term;
        if (!cond || cond->code != IR_OP_CONDITION)
            return interp_fail(I, op, "while loop without a condition"), finish(I, op, cur, n, EX_ERROR);
        if (!interp_opnd(I, cond, 0)->s[0].i) return finish(I, op, cur, n, EX_OK);
        if (!count_iteration(I, op, &count)) return finish(I, op, cur, n, EX_ERROR);
        st = run_region(I, op, &op->regions[1], 0, &cur, &n, 0);
        if (st != EX_OK) return finish(I, op, cur, n, st);
    }
}

/* ---- reduce and scan with a combine region ---------------------------------------------- */

/* Element `at` of operand i as a scalar of the region's argument type. */
/* ---- warp specialization ------------------------------------------------------------------
 * `producer` runs its region's scalar ops and keeps its first loop for later; each
 * consumer `tma_wait 0` first runs that loop's next iteration, which copies the stage
 * the wait is for (the producer is S stages ahead on a GPU, never behind: the copies
 * land before the wait passes). A loop with no iteration left gives way to the next
 * loop of its block (loops that share one ring, passes/warpspec.c), the scalar ops
 * before it run first; a wait with no iteration left anywhere waits for a copy that
 * never comes. A persistent kernel's producer loop walks tiles, each with its own inner
 * loops of copies: an iteration of it runs the tile's scalar ops and starts its first
 * inner loop, whose iterations are then the steps, then the next inner loop, then the
 * next tile; after the last tile, the region's ops after the tile loop. */
static bool loop_bounds(Interp *I, const IrOp *o, int64_t *iv, int64_t *hi, int64_t *step)
{
    *iv = interp_opnd(I, o, 0)->s[0].i;
    *hi = interp_opnd(I, o, 1)->s[0].i;
    *step = interp_opnd(I, o, 2)->s[0].i;
    return *step > 0 || interp_fail(I, o, "a producer loop needs a positive step");
}

static bool has_inner_loop(const IrOp *loop)
{
    for (const IrOp *o = loop->regions[0].first; o; o = o->next)
        if (o->code == IR_OP_FOR) return true;
    return false;
}

/* Runs the ops of a block from `from` up to its next loop of copies, which becomes the
 * loop under way (rest: the op after it); none (loop NULL) if the block ends first. In
 * the producer's region (tiles true) a loop holding loops is the tile loop: it becomes
 * the outer loop, no tile started yet. */
static ExecStatus next_loop_from(Interp *I, const IrOp *from, bool tiles)
{
    I->prod.loop = NULL;
    I->prod.rest = NULL;
    for (const IrOp *o = from; o && o->code != IR_OP_YIELD; o = o->next) {
        if (o->code != IR_OP_FOR) {
            ExecStatus st = exec_op(I, o);
            if (st != EX_OK) return st;
            continue;
        }
        I->prod.rest = o->next;
        I->prod.count = 0;
        if (tiles && has_inner_loop(o)) {
            I->prod.outer = o;
            I->prod.ocount = 0;
            if (!loop_bounds(I, o, &I->prod.oiv, &I->prod.ohi, &I->prod.ostep)) return EX_ERROR;
            return EX_OK;
        }
        I->prod.loop = o;
        return loop_bounds(I, o, &I->prod.iv, &I->prod.hi, &I->prod.step) ? EX_OK : EX_ERROR;
    }
    return EX_OK;
}

static ExecStatus exec_producer(Interp *I, const IrOp *op)
{
    I->prod.outer = NULL;
    return next_loop_from(I, op->regions[0].first, true);
}

static ExecStatus never_issued(Interp *I, const IrOp *wait)
{
    char w[160];
    return interp_fail(I, wait, "waits for a copy that the producer never issues (its loop has ended)%s",
                       interp_where(I, w, sizeof w)), EX_ERROR;
}

/* The tile loop's next iteration: its scalar ops up to its first loop of copies. A
 * tile loop carrying scalars (the ring iterations of the tiles before, when their
 * bounds differ: passes/persistent.c) binds its init on the first tile, then what the
 * yield gives (its operands are computed by the scalar ops before the loops). */
static ExecStatus next_tile(Interp *I)
{
    const IrOp *outer = I->prod.outer;
    const IrBlock *body = &outer->regions[0];
    for (uint32_t i = 0; i < outer->nresults; i++) {
        const IrOp *y = body->last;
        IrValue from = I->prod.ocount == 0 ? outer->operands[3 + i]
                                           : (y && y->code == IR_OP_YIELD && i < y->noperands ? y->operands[i] : IR_NO_VALUE);
        if (from == IR_NO_VALUE || from >= I->fn->nvalues || !I->vals[from].s)
            return interp_fail(I, outer, "a producer's tile loop carries a value that is not defined"), EX_ERROR;
        if (!bind_iv(I, outer, body->args[1 + i], I->vals[from].s[0].i)) return EX_ERROR;
    }
    if (!count_iteration(I, outer, &I->prod.ocount) || !bind_iv(I, outer, body->args[0], I->prod.oiv))
        return EX_ERROR;
    I->prod.oiv += I->prod.ostep;
    return next_loop_from(I, outer->regions[0].first, false);
}

static ExecStatus producer_step(Interp *I, const IrOp *wait)
{
    while (!(I->prod.loop && I->prod.iv < I->prod.hi)) {
        ExecStatus st = EX_OK;
        if (I->prod.outer) {
            if (I->prod.loop) {                      /* a loop of the tile is done: its next one */
                if (I->prod.rest) st = next_loop_from(I, I->prod.rest, false);
                else I->prod.loop = NULL;
                if (st != EX_OK) return st;
                if (I->prod.loop) continue;
            }
            if (I->prod.oiv < I->prod.ohi) {         /* the tile is done: the next tile */
                if ((st = next_tile(I)) != EX_OK) return st;
                continue;
            }
            const IrOp *after = I->prod.outer->next; /* the tiles are done: the region goes on */
            I->prod.outer = NULL;
            st = next_loop_from(I, after, true);
        } else {
            if (!I->prod.loop) return never_issued(I, wait);
            st = next_loop_from(I, I->prod.rest, true);   /* the region's next loop */
        }
        if (st != EX_OK) return st;
        if (!I->prod.loop && !I->prod.outer) return never_issued(I, wait);
    }
    const IrOp *loop = I->prod.loop;
    if (!count_iteration(I, loop, &I->prod.count) || !bind_iv(I, loop, loop->regions[0].args[0], I->prod.iv))
        return EX_ERROR;
    Tile *none = NULL;
    uint32_t n = 0;
    ExecStatus st = run_region(I, loop, &loop->regions[0], 1, &none, &n, 0);
    free_tiles(none, n);
    I->prod.iv += I->prod.step;
    return st;
}

static bool scalar_at(Interp *I, const IrOp *op, uint32_t i, int64_t at, Tile *out)
{
    const IrBlock *blk = &op->regions[0];
    if (!tile_alloc(I, op, ir_value_type(I->fn, blk->args[op->noperands + i]), out)) return false;
    out->s[0] = interp_opnd(I, op, i)->s[at];
    return true;
}

/* acc = combine(acc, element `at` of the operands): the region's arguments are
 * (acc..., x...), its yield the new acc (n scalars, replacing *acc). */
static ExecStatus combine_step(Interp *I, const IrOp *op, Tile **acc, int64_t at)
{
    uint32_t n = op->noperands, m = 2 * n;
    Tile *ts = tl_calloc(m, sizeof *ts);
    if (!ts) return interp_fail(I, op, "out of memory in the interpreter"), EX_ERROR;
    memcpy(ts, *acc, n * sizeof *ts);
    tl_free(*acc);
    *acc = ts;
    for (uint32_t i = 0; i < n; i++)
        if (!scalar_at(I, op, i, at, &ts[n + i])) return EX_ERROR;
    ExecStatus st = run_region(I, op, &op->regions[0], 0, acc, &m, 0);
    return st == EX_OK && m != n ? (interp_fail(I, op, "the combine gave %u values, not %u", m, n), EX_ERROR) : st;
}

static ExecStatus combine_start(Interp *I, const IrOp *op, Tile **acc, int64_t at)
{
    uint32_t n = op->noperands;
    if (!(*acc = tl_calloc(n, sizeof **acc))) return interp_fail(I, op, "out of memory in the interpreter"), EX_ERROR;
    for (uint32_t i = 0; i < n; i++)
        if (!scalar_at(I, op, i, at, &(*acc)[i])) return EX_ERROR;
    return EX_OK;
}

/* One line along the axis (its first element at `base`, `stride` apart): reduce
 * folds from the left (acc = f(acc, x[k])); scan writes acc at every k, from the last
 * element down when reversed (Triton's: flip, scan, flip). */
static ExecStatus combine_line(Interp *I, const IrOp *op, Tile *res, int64_t len, int64_t base, int64_t stride,
                               int64_t out_at)
{
    bool scan = op->code == IR_OP_SCAN, rev = scan && (op->attr.i & IR_SCAN_REVERSE);
    uint32_t n = op->noperands;
    Tile *acc = NULL;
    ExecStatus st = EX_OK;
    for (int64_t j = 0; j < len && st == EX_OK; j++) {
        int64_t at = base + (rev ? len - 1 - j : j) * stride;
        st = j == 0 ? combine_start(I, op, &acc, at) : combine_step(I, op, &acc, at);
        for (uint32_t i = 0; st == EX_OK && scan && i < n; i++) res[i].s[at] = acc[i].s[0];
    }
    for (uint32_t i = 0; st == EX_OK && !scan && i < n; i++) res[i].s[out_at] = acc[i].s[0];
    free_tiles(acc, n);
    return st;
}

static ExecStatus exec_combine(Interp *I, const IrOp *op)
{
    uint32_t n = op->noperands;
    const IrType *t = interp_opnd(I, op, 0)->type;
    int axis = (int)(op->attr.i & IR_AXIS_MASK);
    int64_t outer = 1, inner = 1, len = t->shape[axis];
    for (int d = 0; d < t->rank; d++) {
        if (d < axis) outer *= t->shape[d];
        if (d > axis) inner *= t->shape[d];
    }
    Tile *res = tl_calloc(n, sizeof *res);
    if (!res) return interp_fail(I, op, "out of memory in the interpreter"), EX_ERROR;
    ExecStatus st = EX_OK;
    for (uint32_t i = 0; i < n && st == EX_OK; i++)
        if (!tile_alloc(I, op, interp_result_type(I, op, i), &res[i])) st = EX_ERROR;
    for (int64_t o = 0; o < outer && st == EX_OK; o++)
        for (int64_t k = 0; k < inner && st == EX_OK; k++)
            st = combine_line(I, op, res, len, o * len * inner + k, inner, o * inner + k);
    for (uint32_t i = 0; st == EX_OK && I->observe && i < n; i++) observe(I, op, i, &res[i]);
    if (st == EX_OK) bind(I, op->results, res, n);
    free_tiles(res, n);
    return st;
}

/* ---- dispatch --------------------------------------------------------------------------- */

static bool operands_defined(Interp *I, const IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++)
        if (op->operands[i] >= I->fn->nvalues || !I->vals[op->operands[i]].s)
            return interp_fail(I, op, "'%s' uses a value that is not defined here", ir_op_info[op->code].text);
    return true;
}

/* Slots are a union of int64 and double: the view points into them directly. */
_Static_assert(sizeof(Slot) == sizeof(int64_t) && sizeof(Slot) == sizeof(double), "Slot is 8 bytes");

static void observe(Interp *I, const IrOp *op, uint32_t result, const Tile *t)
{
    bool fl = ir_elem_is_float(t->type->elem);
    InterpValue v = {t->type, t->n, fl ? NULL : &t->s[0].i, fl ? &t->s[0].f : NULL, t->buf};
    I->observe(I->observe_ud, op, result, &v, I->pid);
}

static bool exec_result_op(Interp *I, const IrOp *op)
{
    Tile res;
    bool ok;
    unsigned fl = ir_op_info[op->code].flags;
    if (fl & IR_R) {
        if (!tile_alloc(I, op, interp_result_type(I, op, 0), &res)) return false;
        ok = op->code == IR_OP_LOAD ? exec_load(I, op, &res)
           : op->code == IR_OP_BLOCK_LOAD ? exec_block_load(I, op, &res)
           : op->code == IR_OP_LOCAL_LOAD ? exec_local_load(I, op, &res) : exec_atomic(I, op, &res);
    } else {
        res = (Tile){0};
        ok = interp_exec_pure(I, op, &res);
    }
    if (!ok) {
        tile_free(&res);
        return false;
    }
    if (I->observe) observe(I, op, 0, &res);
    set_value(I, op->results[0], &res);
    return true;
}

static int64_t op_elements(const Interp *I, const IrOp *op);

/* What an op costs against the work bound: the elements it processes, plus a fixed
 * part, so that a loop of scalar ops and a few large tiles both count their time. */
static int64_t op_work(const Interp *I, const IrOp *op)
{
    return OP_OVERHEAD + op_elements(I, op);
}

static int64_t op_elements(const Interp *I, const IrOp *op)
{
    if (op->code == IR_OP_DOT && op->noperands >= 2) {
        const IrType *a = interp_opnd(I, op, 0)->type, *b = interp_opnd(I, op, 1)->type;
        return ir_type_numel(a) * (b->rank ? b->shape[b->rank - 1] : 1);
    }
    if (op->nresults) return ir_type_numel(interp_result_type(I, op, 0));
    if (op->code == IR_OP_BLOCK_STORE) return ir_type_numel(interp_opnd(I, op, op->noperands - 1)->type);
    if (op->code == IR_OP_TMA_STORE) return ir_type_numel(interp_opnd(I, op, 1)->type);
    return op->noperands ? interp_opnd(I, op, 0)->n : 1;
}

static bool charge(Interp *I, const IrOp *op, int64_t work)
{
    I->work += work;
    if (I->work <= I->max_work) return true;
    char w[160];
    return interp_fail(I, op, "the run did more than %" PRId64 " operations (elements processed, over all "
                       "programs)%s; raise the bound with --max-ops", I->max_work, interp_where(I, w, sizeof w));
}

static ExecStatus exec_op(Interp *I, const IrOp *op)
{
    if (!operands_defined(I, op) || !charge(I, op, op_work(I, op))) return EX_ERROR;
    bool ok;
    switch (op->code) {
    case IR_OP_FOR: return exec_for(I, op);
    case IR_OP_IF: return exec_if(I, op);
    case IR_OP_WHILE: return exec_while(I, op);
    case IR_OP_REDUCE: case IR_OP_SCAN: return exec_combine(I, op);
    case IR_OP_STORE: ok = exec_store(I, op); break;
    case IR_OP_BLOCK_STORE: ok = exec_block_store(I, op); break;
    case IR_OP_ASSERT: ok = exec_assert(I, op); break;
    case IR_OP_CHECK_BOUNDS: ok = exec_check_bounds(I, op); break;
    case IR_OP_PRINT: exec_print(I, op); ok = true; break;
    case IR_OP_BARRIER: ok = true; break;      /* one program runs at a time, lanes in step */
    case IR_OP_LOCAL_ALLOC: ok = exec_local_alloc(I, op); break;
    case IR_OP_ASYNC_COPY: ok = exec_async_copy(I, op); break;
    case IR_OP_LOCAL_STORE: ok = exec_local_store(I, op); break;
    case IR_OP_FENCE_ASYNC: ok = true; break;   /* one proxy here */
    case IR_OP_ASYNC_COMMIT: case IR_OP_ASYNC_WAIT: ok = true; break;
    case IR_OP_TMA_COPY: ok = exec_tma_copy(I, op); break;
    case IR_OP_TMA_STORE: ok = exec_tma_store(I, op); break;
    case IR_OP_TMA_STORE_WAIT: ok = true; break;   /* stores are done when they are executed */
    case IR_OP_DOT_WAIT: {   /* dots are done when they are executed: the values pass through */
        Tile *ts = collect(I, op, op->operands, op->noperands);
        if (!ts) return EX_ERROR;
        bind(I, op->results, ts, op->nresults);
        tl_free(ts);
        ok = true;
        break;
    }
    case IR_OP_PRODUCER: return exec_producer(I, op);
    case IR_OP_TURN: return EX_OK;   /* it orders the warpgroups' dots; computes nothing */
    case IR_OP_CLUSTER_SYNC: return EX_OK;   /* the CTAs of a cluster run one after another here */
    case IR_OP_TMA_WAIT:
        if (op->attr.i == 0 && (I->prod.loop || I->prod.outer)) {
            ExecStatus st = producer_step(I, op);
            if (st != EX_OK) return st;
        }
        ok = exec_mbarrier(I, op);
        break;
    case IR_OP_MBARRIER_INIT: case IR_OP_MBARRIER_ARRIVE: ok = exec_mbarrier(I, op); break;
    default: ok = exec_result_op(I, op); break;
    }
    return ok ? EX_OK : EX_ERROR;
}

/* ---- arguments and the grid ---------------------------------------------------------- */

static bool check_arg(Interp *I, uint32_t i, const InterpArg *a, bool buffers_needed)
{
    const IrType *t = ir_value_type(I->fn, I->fn->body.args[i]);
    const char *name = I->fn->param_names[i], *fn = I->fn->name;
    char tb[64];
    ir_type_str(t, tb, sizeof tb);
    if (t->rank != 0)
        return interp_fail(I, NULL, "parameter '%s' of kernel '%s' is a tile (%s); arguments are scalars or buffers", name, fn, tb);
    if (t->elem != IR_PTR && a->is_buffer)
        return interp_fail(I, NULL, "argument '%s' of kernel '%s' must be a scalar of type %s, got a buffer", name, fn, tb);
    if (t->elem == IR_PTR && !a->is_buffer && buffers_needed)
        return interp_fail(I, NULL, "argument '%s' of kernel '%s' must be a buffer (%s), got a scalar", name, fn, tb);
    if (t->elem == IR_PTR && a->is_buffer && a->u.buf.elem != t->pointee)
        return interp_fail(I, NULL, "argument '%s' of kernel '%s' is a buffer of %s, but the parameter is %s",
                           name, fn, ir_elem_name(a->u.buf.elem), tb);
    if (a->is_buffer && (a->u.buf.count < 0 || (a->u.buf.count > 0 && !a->u.buf.data)))
        return interp_fail(I, NULL, "argument '%s' of kernel '%s' is a buffer without memory", name, fn);
    return true;
}

/* Binds the function's parameters (its body's arguments) to the arguments. */
static bool bind_params(Interp *I)
{
    const IrBlock *body = &I->fn->body;
    for (uint32_t i = 0; i < body->nargs; i++) {
        const InterpArg *a = &I->args[i];
        Tile t;
        if (!tile_alloc(I, NULL, ir_value_type(I->fn, body->args[i]), &t)) return false;
        IrElem e = t.type->elem;
        if (e == IR_PTR) {
            t.buf[0] = a->is_buffer ? (int32_t)i : -1;
            t.s[0].i = 0;
        } else if (ir_elem_is_float(e)) {
            t.s[0].f = fp_round(e, a->u.f);
        } else {
            t.s[0].i = interp_int_norm(e, a->u.i);
        }
        set_value(I, body->args[i], &t);
    }
    return true;
}

static bool interp_setup(Interp *I, const IrFunc *fn, const InterpArg *args, uint32_t nargs,
                         DiagList *diags, bool buffers_needed)
{
    *I = (Interp){.fn = fn, .args = args, .diags = diags, .max_iters = INT64_C(1) << 31,
                  .max_work = INTERP_DEFAULT_MAX_WORK};
    I->grid[0] = I->grid[1] = I->grid[2] = 1;
    if (nargs != fn->body.nargs)
        return interp_fail(I, NULL, "kernel '%s' takes %u arguments, got %u", fn->name, fn->body.nargs, nargs);
    for (uint32_t i = 0; i < nargs; i++)
        if (!check_arg(I, i, &args[i], buffers_needed)) return false;
    I->vals = tl_calloc(fn->nvalues ? fn->nvalues : 1, sizeof *I->vals);
    return I->vals ? true : interp_fail(I, NULL, "out of memory in the interpreter");
}

static void clear_values(Interp *I)
{
    for (uint32_t v = 0; v < I->fn->nvalues; v++) tile_free(&I->vals[v]);
}

/* One program: fresh values, the body, then everything freed. */
static bool run_program(Interp *I)
{
    const IrOp *term;
    I->work++;
    I->prod.loop = I->prod.outer = NULL;
    I->prod.rest = NULL;
    bool ok = bind_params(I) && exec_block(I, &I->fn->body, &term) != EX_ERROR;
    clear_values(I);
    return ok;
}

/* A persistent kernel (passes/persistent.c: its body asks for launched_programs) walks
 * the grid's programs itself: the interpreter launches INTERP_PERSISTENT_PROGRAMS of
 * them (fewer for a smaller grid), so that each walks several, as on a GPU. */
#define INTERP_PERSISTENT_PROGRAMS 3

static bool is_persistent(const IrFunc *k)
{
    for (const IrOp *o = k->body.first; o; o = o->next)
        if (o->code == IR_OP_LAUNCHED_PROGRAMS) return true;
    return false;
}

/* The CTAs each program runs on: a kernel whose rows passes/cluster.c split among the
 * CTAs of a cluster (it reads cluster_rank) runs each program once per rank, one after
 * another: each CTA computes its share, and what the CTAs share (a multicast block,
 * barriers counting every CTA's arrivals) the interpreter's model gives each whole. */
static int64_t cluster_ranks(const IrFunc *k)
{
    for (const IrOp *o = k->body.first; o; o = o->next)
        if (o->code == IR_OP_CLUSTER_RANK) return ir_cluster_size(k);
    return 1;
}

bool interp_run(const IrFunc *kernel, const InterpArg *args, uint32_t nargs,
                const int64_t given[3], const InterpOptions *opt, DiagList *diags)
{
    int64_t grid[3] = {given[0], given[1], given[2]};
    if (is_persistent(kernel) && grid[0] > 0 && grid[1] > 0 && grid[2] > 0) {
        int64_t n = grid[0];
        if (n <= INTERP_PERSISTENT_PROGRAMS) n *= grid[1] < INTERP_PERSISTENT_PROGRAMS ? grid[1] : INTERP_PERSISTENT_PROGRAMS;
        if (n <= INTERP_PERSISTENT_PROGRAMS) n *= grid[2] < INTERP_PERSISTENT_PROGRAMS ? grid[2] : INTERP_PERSISTENT_PROGRAMS;
        grid[0] = n < INTERP_PERSISTENT_PROGRAMS ? n : INTERP_PERSISTENT_PROGRAMS;
        grid[1] = grid[2] = 1;
    }
    Interp I;
    if (!interp_setup(&I, kernel, args, nargs, diags, true)) return false;
    int64_t ranks = cluster_ranks(kernel);
    I.out = opt && opt->print_out ? opt->print_out : stdout;
    if (opt && opt->max_loop_iterations > 0) I.max_iters = opt->max_loop_iterations;
    if (opt) {
        I.observe = opt->observe;
        I.observe_ud = opt->observe_ud;
    }
    if (opt && opt->max_work > 0) I.max_work = opt->max_work;
    bool ok = true;
    for (int d = 0; d < 3; d++) I.grid[d] = grid[d];
    for (int d = 0; d < 3 && ok; d++)
        if (grid[d] < 1 || grid[d] > (d ? INTERP_MAX_GRID_YZ : INTERP_MAX_GRID_X))
            ok = interp_fail(&I, NULL, "grid of kernel '%s' is %" PRId64 " x %" PRId64 " x %" PRId64
                             ": each size must be at least 1 and at most 2147483647 x 65535 x 65535",
                             kernel->name, grid[0], grid[1], grid[2]);
    /* each program costs at least one operation: refuse a grid that cannot finish */
    if (ok && grid[0] * grid[1] > I.max_work / grid[2])
        ok = interp_fail(&I, NULL, "grid of kernel '%s' is %" PRId64 " x %" PRId64 " x %" PRId64
                         ": more programs than the work bound of %" PRId64 " operations (--max-ops)",
                         kernel->name, grid[0], grid[1], grid[2], I.max_work);
    for (I.pid[2] = 0; ok && I.pid[2] < grid[2]; I.pid[2]++)
        for (I.pid[1] = 0; ok && I.pid[1] < grid[1]; I.pid[1]++)
            for (I.pid[0] = 0; ok && I.pid[0] < grid[0]; I.pid[0]++)
                for (I.rank = 0; ok && I.rank < ranks; I.rank++) ok = run_program(&I);
    tl_free(I.vals);
    return ok;
}

static int grid_result(Interp *I, int64_t grid[3])
{
    const IrOp *r = I->ret;
    if (!r || r->noperands < 1 || r->noperands > 3)
        return interp_fail(I, r, "grid function '%s' must return 1 to 3 values", I->fn->name), -1;
    for (uint32_t i = 0; i < r->noperands; i++) {
        const Tile *t = interp_opnd(I, r, i);
        if (t->type->rank != 0 || !ir_elem_is_int(t->type->elem))
            return interp_fail(I, r, "grid function '%s' must return integer scalars", I->fn->name), -1;
        grid[i] = t->s[0].i;
    }
    return (int)r->noperands;
}

int interp_eval_grid(const IrFunc *grid_fn, const InterpArg *args, uint32_t nargs,
                     int64_t grid[3], DiagList *diags)
{
    Interp I;
    int n = -1;
    grid[0] = grid[1] = grid[2] = 1;
    if (!interp_setup(&I, grid_fn, args, nargs, diags, false)) return -1;
    I.out = stdout;
    const IrOp *term;
    ExecStatus st = bind_params(&I) ? exec_block(&I, &grid_fn->body, &term) : EX_ERROR;
    if (st == EX_RETURN) n = grid_result(&I, grid);
    else if (st == EX_OK) interp_fail(&I, NULL, "grid function '%s' ends without a return", grid_fn->name);
    clear_values(&I);
    tl_free(I.vals);
    return n;
}
