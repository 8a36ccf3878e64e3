/* Layout assignment: gives every tile of a kernel its layout (ir/layout.h), the first
 * pass of the GPU level; code generation reads layouts from the types and never
 * chooses one.
 *
 * require:    verified IR without layouts (the tile level), a kernel's warps set
 * guarantees: every tile value (op results and region arguments) has a blocked
 *             layout; tiles of one shape share it, so element-wise ops and
 *             loop-carried values never convert; values are unchanged
 *
 *   %m = cmp lt %o, %n : i1[1024]   ->   %m = cmp lt %o, %n : i1[1024] #blocked
 *   layout #blocked = blocked<spt = [8], tpw = [32], wpc = [4], order = [0]>
 *
 * The blocked layout of a shape: per thread a run of up to 8 elements along the last
 * axis (16 bytes of f16, two 16-byte vectors of f32) so that loads and stores can be
 * 16-byte vectors; lanes fill the last axis first, then the next; warps go to the
 * first axis first (rows of a matrix to different warps); where the program has more
 * threads than the tile has elements, the last axis' lanes (and the first axis'
 * warps) hold copies. Shape changes (broadcast, expand_dims, trans, reshape, the
 * result of a reduction) are where two layouts meet; codegen converts there, directly
 * when every thread already holds what it needs, else through shared memory.
 *
 * Dots that a tensor-core instruction computes (mma_layout_for) get its layouts: the
 * accumulator an mma layout, the operands dot_operand layouts of it, with converts
 * around the dot (the loops keep the accumulator in the mma layout where they can). */
#include "passes.h"

#include <string.h>

#include "ir/arena.h"
#include "ir/layout.h"

static int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

const IrLayout *pass_blocked_layout(IrCtx *c, int warps, const IrType *t)
{
    int r = t->rank;
    int32_t spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK];
    int64_t per = ir_type_numel(t) / (warps * 32);
    for (int d = 0; d < r; d++) spt[d] = tpw[d] = wpc[d] = 1;
    spt[r - 1] = min32(t->shape[r - 1], per < 1 ? 1 : per > 8 ? 8 : (int32_t)per);
    int32_t lanes = 32;
    for (int d = r - 1; d >= 0; d--) {
        tpw[d] = min32(lanes, t->shape[d] / spt[d]);
        lanes /= tpw[d];
    }
    tpw[r - 1] *= lanes;                 /* too few elements: lanes hold copies */
    int32_t w = warps;
    for (int d = 0; d < r; d++) {
        int32_t room = t->shape[d] / (spt[d] * tpw[d]);
        wpc[d] = min32(w, room < 1 ? 1 : room);
        w /= wpc[d];
    }
    wpc[0] *= w;
    return ir_layout_blocked(c, r, spt, tpw, wpc, NULL);
}

/* ---- dots on tensor cores ------------------------------------------------------------- */

/* The warps of an mma.sync accumulator [M, N]: a WM x WN grid, each warp at least one
 * 16 x 8 instruction tile, the warps' tiles as square as the shape allows. False if
 * the warps do not fit. */
static bool mma_warps(int warps, int32_t M, int32_t N, int32_t wpc[2])
{
    wpc[0] = wpc[1] = 1;
    while (wpc[0] * wpc[1] < warps) {
        bool m_ok = M / (16 * wpc[0]) >= 2, n_ok = N / (8 * wpc[1]) >= 2;
        if (m_ok && (!n_ok || M / wpc[0] >= N / wpc[1])) wpc[0] *= 2;
        else if (n_ok) wpc[1] *= 2;
        else return false;
    }
    return true;
}

/* dot(a, b, acc) runs on mma.sync m16n8kK when an instruction takes its element types
 * (ir_mma_sync_k: f16/bf16/f8 K = 16, tf32 K = 8, i8/u8 K = 32), its K is a multiple of
 * the instruction's (M and N, powers of two of at least 16, always are of 16 and 8), and
 * the warps cover M x N. Anything else stays on FMAs. */
static const IrLayout *mma_layout_for(IrCtx *c, const IrFunc *f, const IrOp *dot)
{
    const IrType *a = ir_value_type(f, dot->operands[0]), *b = ir_value_type(f, dot->operands[1]);
    const IrType *r = ir_value_type(f, dot->results[0]);
    int32_t ik = b->elem == a->elem ? ir_mma_sync_k(a->elem, r->elem, (int)dot->attr.i) : 0;
    if (!ik) return NULL;
    int32_t M = r->shape[0], N = r->shape[1], K = a->shape[1], wpc[2];
    if (M % 16 || N % 8 || K % ik || !mma_warps(f->warps > 0 ? f->warps : 4, M, N, wpc)) return NULL;
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_MMA;
    k.rank = 2;
    k.version = 2;
    k.wpc[0] = wpc[0];
    k.wpc[1] = wpc[1];
    k.instr[0] = 16;
    k.instr[1] = 8;
    k.instr[2] = ik;
    return ir_layout_intern(c, &k);
}

static const IrLayout *operand_layout(IrCtx *c, const IrLayout *mma, int op)
{
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_DOT_OPERAND;
    k.rank = 2;
    k.op = op;
    k.kwidth = mma->instr[2] / 8;    /* K elements per 32-bit register: 1 tf32, 2 f16, 4 i8 */
    k.parent = mma;
    return ir_layout_intern(c, &k);
}

/* A new value: v converted to layout l, inserted before `at`. */
static IrValue convert_before(IrFunc *f, IrOp *at, IrValue v, const IrLayout *l)
{
    IrBuilder b;
    ir_builder_before(&b, at);
    b.loc = at->loc;
    const IrType *t = ir_value_type(f, v);
    return ir_build1(&b, IR_OP_CONVERT_LAYOUT, ir_type_with_layout(f->module->ctx, t, l), &v, 1);
}

/* Every use of v but in `except` now uses w. */
static void replace_uses_but(IrFunc *f, IrValue v, IrValue w, IrOp *except)
{
    ir_replace_all_uses(f, v, w);
    except->operands[0] = v;
}

/* The dot computes in the mma layout, its operands converted to it, and its result
 * converted back for the ops that use it (the loops below keep it where they can). */
static void lay_out_dot(IrFunc *f, IrOp *dot, const IrLayout *mma)
{
    IrCtx *c = f->module->ctx;
    const IrLayout *blocked = ir_value_type(f, dot->results[0])->layout;
    for (int i = 0; i < 3; i++)
        dot->operands[i] = convert_before(f, dot, dot->operands[i], i < 2 ? operand_layout(c, mma, i) : mma);
    IrValue r = dot->results[0];
    f->values[r].type = ir_type_with_layout(c, f->values[r].type, mma);
    IrValue back = convert_before(f, dot->next, r, blocked);
    replace_uses_but(f, r, back, f->values[back].def);
}

static void collect_dots(IrOp *op, void *ud)
{
    IrOp ***out = ud;
    if (op->code == IR_OP_DOT) *(*out)++ = op;
}

/* ---- loop-carried values ---------------------------------------------------------------- */

static IrOp *convert_def(const IrFunc *f, IrValue v)
{
    IrOp *d = f->values[v].def;
    return d && d->code == IR_OP_CONVERT_LAYOUT ? d : NULL;
}

/* A for whose body yields convert_layout(v) for iteration value i carries v's layout
 * instead: the body argument, the result and the init take it, and converts are put
 * where the old layout is still wanted (they cancel in fold_converts).
 *   %acc.1 = for ... iter(%z) { ^(%i, %acc): ... %r = dot ..: #mma;
 *                               %rb = convert_layout %r : #blocked; yield %rb }
 * becomes a loop over #mma values with converts at its edges. */
static bool carry_layout(IrFunc *f, IrOp *loop, uint32_t i)
{
    IrBlock *body = &loop->regions[0];
    IrOp *yield = body->last;
    IrOp *cv = convert_def(f, yield->operands[i]);
    if (!cv) return false;
    IrCtx *c = f->module->ctx;
    IrValue inner = cv->operands[0], arg = body->args[i + 1], res = loop->results[i];
    const IrLayout *l = ir_value_type(f, inner)->layout, *old = ir_value_type(f, arg)->layout;
    if (l == old) return false;
    f->values[arg].type = ir_type_with_layout(c, f->values[arg].type, l);
    IrValue arg_old = convert_before(f, body->first, arg, old);
    replace_uses_but(f, arg, arg_old, f->values[arg_old].def);
    yield->operands[i] = inner;
    f->values[res].type = ir_type_with_layout(c, f->values[res].type, l);
    IrValue res_old = convert_before(f, loop->next, res, old);
    replace_uses_but(f, res, res_old, f->values[res_old].def);
    loop->operands[3 + i] = convert_before(f, loop, loop->operands[3 + i], l);
    return true;
}

static void carry_visit(IrOp *op, void *ud)
{
    IrFunc *f = ud;
    if (op->code != IR_OP_FOR) return;
    for (uint32_t i = 0; i < op->nresults; i++) carry_layout(f, op, i);
}

/* convert_layout(convert_layout(x)) back to x's layout is x; a conversion to the same
 * layout is its operand; a constant converts by taking the new layout. */
static void fold_visit(IrOp *op, void *ud)
{
    IrFunc *f = ud;
    if (op->code != IR_OP_CONVERT_LAYOUT) return;
    IrValue x = op->operands[0], r = op->results[0];
    const IrType *rt = ir_value_type(f, r);
    IrOp *d = f->values[x].def;
    if (ir_value_type(f, x) == rt) {
        ir_replace_all_uses(f, r, x);
    } else if (d && d->code == IR_OP_CONVERT_LAYOUT && ir_value_type(f, d->operands[0]) == rt) {
        ir_replace_all_uses(f, r, d->operands[0]);
    } else if (d && (d->code == IR_OP_CONST || d->code == IR_OP_SPLAT)) {
        IrBuilder b;
        ir_builder_before(&b, op);
        b.loc = d->loc;
        IrOp *n = ir_build(&b, d->code, d->operands, d->noperands, &rt, 1, 0);
        n->attr = d->attr;
        ir_replace_all_uses(f, r, n->results[0]);
    }
}

bool pass_layout(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL) return false;
    IrCtx *c = f->module->ctx;
    int warps = f->warps > 0 ? f->warps : 4;
    bool changed = false;
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrType *t = f->values[v].type;
        if (!t || t->rank == 0 || t->layout) continue;
        f->values[v].type = ir_type_with_layout(c, t, pass_blocked_layout(c, warps, t));
        changed = true;
    }
    uint32_t ndots = 0;
    for (uint32_t v = 0; v < f->nvalues; v++) ndots += f->values[v].def && f->values[v].def->code == IR_OP_DOT;
    IrOp **dots = tl_calloc(ndots + 1, sizeof *dots), **end = dots;
    if (!dots) tl_oom();
    ir_walk(&f->body, collect_dots, &end);
    for (IrOp **d = dots; d < end; d++) {
        const IrLayout *mma = ir_value_type(f, (*d)->results[0])->layout->kind == IR_LAYOUT_BLOCKED
                                  ? mma_layout_for(c, f, *d) : NULL;
        if (mma) lay_out_dot(f, *d, mma);
        changed |= mma != NULL;
    }
    tl_free(dots);
    ir_walk(&f->body, carry_visit, f);
    ir_walk(&f->body, fold_visit, f);
    return changed;
}
