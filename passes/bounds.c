/* Bounds checks: the checked mode (TILE_DEBUG=bounds, tilec run --check-bounds). Makes
 * every access to global memory through a pointer parameter check its element index
 * against the buffer's size, which the caller passes in hidden parameters; a lane
 * outside is masked off (a load gives `other` or 0, a store or atomic does nothing) and
 * the first one is recorded in a report buffer that the host turns into the
 * interpreter's message. The kernel never faults on such an access.
 *
 * require:    verified IR of a kernel, at either level (normally the last GPU pass,
 *             after layout and shared: the checks then guard the accesses that codegen
 *             emits, async_copy included)
 * guarantees: the kernel has the hidden parameters of ir_func_hidden_params (one i64
 *             element count `%NAME.n` per pointer parameter, then `%bounds.report: *i64`);
 *             every load, store, atomic and async_copy whose pointer is computed from
 *             a pointer parameter P (through addptr, splat, broadcast, expand_dims,
 *             reshape, trans, convert_layout, hints, select, and loop-carried and if
 *             values that come from P alone) takes as its mask a check_bounds of that
 *             pointer against P and %P.n, the op's own mask folded in; values of
 *             lanes inside are unchanged. Pointers of unknown origin (loaded from
 *             memory, or mixing two parameters) are not checked. A count below 0
 *             checks nothing (the caller gave no size). Running it twice changes
 *             nothing.
 *
 *   %p = addptr %out, %offs : *f32[128]          %ok = check_bounds store %p, %out, %out.n,
 *   store %p, %v, %m                       ->                 %bounds.report, %m : i1[128]
 *                                                store %p, %v, %ok
 *
 * (kernel @k(%out: *f32, %n: i32) becomes @k(%out: *f32, %n: i32, %out.n: i64,
 * %bounds.report: *i64).) The interpreter runs checked IR (it writes the report as the GPU
 * does), so the pass is tested on the CPU. */
#include "passes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "ir/interp.h"
#include "ir/layout.h"

/* ---- where pointers come from ------------------------------------------------------- */
enum { ORIGIN_UNSET = -2, ORIGIN_UNKNOWN = -1 };

typedef struct Origins {
    const IrFunc *f;
    int32_t *of;           /* per value: a parameter index, or ORIGIN_* */
    bool changed;
} Origins;

static void join(Origins *o, IrValue v, int32_t x)
{
    int32_t *at = &o->of[v];
    int32_t n = *at == ORIGIN_UNSET ? x : x == ORIGIN_UNSET || x == *at ? *at : ORIGIN_UNKNOWN;
    if (n != *at) {
        *at = n;
        o->changed = true;
    }
}

static int32_t origin(const Origins *o, IrValue v) { return o->of[v]; }

static const IrOp *terminator(const IrBlock *b) { return b->last; }

static void flow_block(Origins *o, const IrBlock *blk);

static void flow_op(Origins *o, const IrOp *op)
{
    const IrFunc *f = o->f;
    switch (op->code) {
    case IR_OP_ADDPTR: case IR_OP_SPLAT: case IR_OP_BROADCAST: case IR_OP_EXPAND_DIMS: case IR_OP_RESHAPE:
    case IR_OP_TRANS: case IR_OP_CONVERT_LAYOUT: case IR_OP_MULTIPLE_OF: case IR_OP_MAX_CONTIGUOUS: case IR_OP_EXTRACT:
        join(o, op->results[0], origin(o, op->operands[0]));
        return;
    case IR_OP_SELECT:
        join(o, op->results[0], origin(o, op->operands[1]));
        join(o, op->results[0], origin(o, op->operands[2]));
        return;
    case IR_OP_FOR: {
        const IrBlock *body = &op->regions[0];
        const IrOp *y = terminator(body);
        for (uint32_t i = 0; i + 3 < op->noperands && i + 1 < body->nargs; i++) {
            join(o, body->args[i + 1], origin(o, op->operands[i + 3]));
            if (y && i < y->noperands) join(o, body->args[i + 1], origin(o, y->operands[i]));
            if (i < op->nresults) join(o, op->results[i], origin(o, body->args[i + 1]));
        }
        flow_block(o, body);
        return;
    }
    case IR_OP_IF:
        for (uint32_t r = 0; r < op->nregions; r++) {
            flow_block(o, &op->regions[r]);
            const IrOp *y = terminator(&op->regions[r]);
            for (uint32_t i = 0; y && i < op->nresults && i < y->noperands; i++)
                join(o, op->results[i], origin(o, y->operands[i]));
        }
        return;
    case IR_OP_WHILE: {
        const IrBlock *before = &op->regions[0], *after = &op->regions[1];
        const IrOp *cond = terminator(before), *y = terminator(after);
        for (uint32_t i = 0; i < before->nargs; i++) {
            if (i < op->noperands) join(o, before->args[i], origin(o, op->operands[i]));
            if (y && i < y->noperands) join(o, before->args[i], origin(o, y->operands[i]));
        }
        flow_block(o, before);
        for (uint32_t i = 0; cond && i + 1 < cond->noperands; i++) {
            if (i < after->nargs) join(o, after->args[i], origin(o, cond->operands[i + 1]));
            if (i < op->nresults) join(o, op->results[i], origin(o, cond->operands[i + 1]));
        }
        flow_block(o, after);
        return;
    }
    default:
        for (uint32_t i = 0; i < op->nresults; i++)
            if (ir_value_type(f, op->results[i])->elem == IR_PTR) join(o, op->results[i], ORIGIN_UNKNOWN);
        for (uint32_t r = 0; r < op->nregions; r++) flow_block(o, &op->regions[r]);
        return;
    }
}

static void flow_block(Origins *o, const IrBlock *blk)
{
    for (const IrOp *op = blk->first; op; op = op->next) flow_op(o, op);
}

/* ---- the rewrite -------------------------------------------------------------------- */
/* Where an access op keeps its pointer and its mask (the mask may be absent). */
static bool access_slots(const IrOp *op, uint32_t *ptr_at, uint32_t *mask_at)
{
    switch (op->code) {
    case IR_OP_LOAD: *ptr_at = 0; *mask_at = 1; return true;
    case IR_OP_STORE: *ptr_at = 0; *mask_at = 2; return true;
    case IR_OP_ATOMIC_CAS: *ptr_at = 0; *mask_at = 3; return true;
    case IR_OP_ASYNC_COPY: *ptr_at = 2; *mask_at = 3; return true;
    default:
        if (!ir_op_is_atomic(op->code)) return false;
        *ptr_at = 0;
        *mask_at = 2;
        return true;
    }
}

typedef struct Collect {
    IrOp **ops;
    uint32_t n, cap;
} Collect;

static void collect(IrOp *op, void *ud)
{
    Collect *c = ud;
    uint32_t p, m;
    if (!access_slots(op, &p, &m)) return;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        c->ops = realloc(c->ops, c->cap * sizeof *c->ops);
        if (!c->ops) abort();
    }
    c->ops[c->n++] = op;
}

/* Appends the hidden parameters; returns the value of each pointer parameter's count
 * (counts[i], for parameter i) and the report. */
static IrValue add_hidden_params(IrFunc *f, IrValue *counts)
{
    IrCtx *c = f->module->ctx;
    Arena *a = ir_ctx_arena(c);
    uint32_t nuser = f->body.nargs, nptr = 0;
    for (uint32_t i = 0; i < nuser; i++) nptr += ir_value_type(f, f->body.args[i])->elem == IR_PTR;
    const char **names = arena_alloc(a, (nuser + nptr + 1) * sizeof *names);
    memcpy(names, f->param_names, nuser * sizeof *names);
    uint32_t at = nuser;
    for (uint32_t i = 0; i < nuser; i++) {
        counts[i] = IR_NO_VALUE;
        if (ir_value_type(f, f->body.args[i])->elem != IR_PTR) continue;
        names[at] = arena_printf(a, "%s.n", f->param_names[i]);
        counts[i] = ir_block_add_arg(&f->body, ir_type_scalar(c, IR_I64), names[at]);
        at++;
    }
    names[at] = IR_BOUNDS_REPORT_NAME;
    IrValue report = ir_block_add_arg(&f->body, ir_type_ptr(c, IR_I64), names[at]);
    f->param_names = names;
    return report;
}

static void set_mask(IrFunc *f, IrOp *op, uint32_t mask_at, IrValue ok)
{
    if (mask_at < op->noperands) {
        op->operands[mask_at] = ok;
        return;
    }
    /* load (ptr) -> (ptr, ok); the other ops' masks are their last operand */
    IrValue *ops = arena_alloc(ir_ctx_arena(f->module->ctx), (op->noperands + 1) * sizeof *ops);
    memcpy(ops, op->operands, op->noperands * sizeof *ops);
    ops[op->noperands++] = ok;
    op->operands = ops;
}

static void guard(IrFunc *f, IrOp *op, uint32_t ptr_at, uint32_t mask_at, IrValue base, IrValue count,
                  IrValue report)
{
    IrCtx *c = f->module->ctx;
    IrValue p = op->operands[ptr_at];
    const IrType *pt = ir_value_type(f, p);
    const IrType *rt = ir_type_like(c, pt, ir_type_scalar(c, IR_I1));
    if (pt->layout) rt = ir_type_with_layout(c, rt, pt->layout);
    IrBuilder b;
    ir_builder_before(&b, op);
    b.func = f;
    b.loc = op->loc;
    IrValue ops[5] = {p, base, count, report, IR_NO_VALUE};
    uint32_t n = 4;
    if (mask_at < op->noperands) {
        IrValue m = op->operands[mask_at];
        if (ir_value_type(f, m)->layout != rt->layout)
            m = ir_build1(&b, IR_OP_CONVERT_LAYOUT, rt, &m, 1);
        ops[n++] = m;
    }
    IrOp *chk = ir_build(&b, IR_OP_CHECK_BOUNDS, ops, n, &rt, 1, 0);
    chk->attr.i = op->code;
    set_mask(f, op, mask_at, chk->results[0]);
}

bool pass_bounds(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL || ir_func_hidden_params(f)) return false;
    uint32_t nuser = f->body.nargs;
    Origins o = {f, malloc((f->nvalues ? f->nvalues : 1) * sizeof *o.of), true};
    IrValue *counts = malloc((nuser ? nuser : 1) * sizeof *counts);
    if (!o.of || !counts) abort();
    for (uint32_t v = 0; v < f->nvalues; v++) o.of[v] = ORIGIN_UNSET;
    for (uint32_t i = 0; i < nuser; i++)
        if (ir_value_type(f, f->body.args[i])->elem == IR_PTR) o.of[f->body.args[i]] = (int32_t)i;
    for (int round = 0; o.changed && round < 64; round++) {   /* 3 levels per value: a few rounds */
        o.changed = false;
        flow_block(&o, &f->body);
    }
    Collect acc = {0};
    ir_walk(&f->body, collect, &acc);
    IrValue report = add_hidden_params(f, counts);
    for (uint32_t i = 0; i < acc.n; i++) {
        IrOp *op = acc.ops[i];
        uint32_t ptr_at = 0, mask_at = 0;
        access_slots(op, &ptr_at, &mask_at);
        int32_t from = origin(&o, op->operands[ptr_at]);
        if (from < 0) continue;
        guard(f, op, ptr_at, mask_at, f->body.args[from], counts[from], report);
    }
    free(acc.ops);
    free(counts);
    free(o.of);
    return true;
}

/* ---- the host's side ---------------------------------------------------------------- */
uint32_t bounds_bind_args(const IrFunc *f, InterpArg *args, uint32_t nuser, int64_t *report)
{
    uint32_t at = nuser;
    for (uint32_t i = 0; i < nuser; i++) {
        if (ir_value_type(f, f->body.args[i])->elem != IR_PTR) continue;
        args[at] = (InterpArg){0};
        args[at++].u.i = args[i].is_buffer && args[i].u.buf.data ? args[i].u.buf.count : -1;
    }
    memset(report, 0, IR_BOUNDS_WORDS * sizeof *report);
    args[at] = (InterpArg){.is_buffer = true};
    args[at].u.buf = (InterpBuffer){IR_I64, report, IR_BOUNDS_WORDS};
    return at + 1;
}

static const char *verb_of(IrOpcode g)
{
    if (g == IR_OP_LOAD || g == IR_OP_ASYNC_COPY) return "reads";
    return g == IR_OP_STORE ? "writes" : "updates";
}

bool bounds_report_diag(const int64_t *w, const char *kernel, const char *const *param_names, uint32_t nparams,
                        const Source *src, DiagList *d)
{
    if (!w[IR_BOUNDS_FLAG]) return false;
    int64_t g = w[IR_BOUNDS_OP], p = w[IR_BOUNDS_PARAM];
    IrOpcode op = g >= 0 && g < IR_NUM_OPS ? (IrOpcode)g : IR_OP_LOAD;
    const char *name = p >= 0 && (uint64_t)p < nparams && param_names ? param_names[p] : "?";
    Loc loc = {0};
    if (src && w[IR_BOUNDS_LINE] > 0)
        loc = (Loc){src, (uint32_t)w[IR_BOUNDS_LINE], (uint32_t)(w[IR_BOUNDS_COL] > 0 ? w[IR_BOUNDS_COL] : 1)};
    diag_error(d, loc,
               "out-of-bounds %s in kernel '%s', program (%" PRId64 ", %" PRId64 ", %" PRId64 "): argument '%s' has %"
               PRId64 " elements, lane %" PRId64 " %s element %" PRId64,
               ir_op_info[op == IR_OP_ASYNC_COPY ? IR_OP_LOAD : op].text, kernel, w[IR_BOUNDS_PID_X], w[IR_BOUNDS_PID_Y],
               w[IR_BOUNDS_PID_Z], name, w[IR_BOUNDS_COUNT], w[IR_BOUNDS_LANE], verb_of(op), w[IR_BOUNDS_ELEM]);
    return true;
}
