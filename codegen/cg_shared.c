/* Shared-memory buffers (passes/shared.c): local_alloc, async_copy on cp.async,
 * async_commit / async_wait, and local_load, on ldmatrix for the 16-bit operands of
 * mma.sync.
 *
 * A buffer [S, R, C] lives in the kernel's buffer area (c->smem_buffers, after the
 * scratch that conversions and reductions use) at its local_alloc offset. Its shared
 * layout (ir/layout.h) puts the tile axis order[0]-1 ("fast") contiguous in rows of the
 * other ("slow"), and XORs each 16-byte chunk of a row with the row's phase:
 *   elem(s, slow, fast) = s*R*C + slow*F + ((fast/vec ^ (slow/per_phase) % max_phase) * vec) + fast % vec
 * with F the fast axis' size. Addresses are 32-bit shared-window addresses.
 *
 * ldmatrix (PTX ISA "Warp-level matrix load instruction: ldmatrix"): each of up to 4
 * 8x8 matrices of b16 comes from 8 rows of 16 bytes whose addresses lanes 8q..8q+7
 * give; lane l receives, per matrix, a 32-bit register with row l/4, columns 2(l%4) and
 * +1 (.trans: column l/4, rows 2(l%4) and +1). An mma operand register holds two
 * elements consecutive along K at (o = o0 + g, k = k0 + 2t) (g = lane/4, t = lane%4,
 * o the operand's other axis): without .trans when K is the buffer's fast axis (the
 * rows are o0 .. o0+7 from k0), with .trans when o is (the rows are k0 .. k0+7 from
 * o0). Consecutive registers of the operand's order go four to an instruction. */
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"
#include "ir/target.h"

static LLVMTypeRef i32t(Cg *c) { return cg_i32(c); }
static LLVMValueRef k32(Cg *c, int64_t v) { return cg_i32c(c, v); }
static LLVMValueRef add(Cg *c, LLVMValueRef a, LLVMValueRef b) { return cg_add(c->b, a, b); }
static LLVMValueRef mul(Cg *c, LLVMValueRef a, int64_t b) { return cg_mul(c->b, a, k32(c, b)); }

/* The shared-window address of byte 0 of the kernel's shared memory (i32). */
static LLVMValueRef smem_base32(Cg *c)
{
    LLVMValueRef p = LLVMBuildPtrToInt(c->b, c->smem, LLVMInt64TypeInContext(c->ctx), "");
    return LLVMBuildTrunc(c->b, p, i32t(c), "");
}

typedef struct Buf {
    const IrType *t;
    const IrLayout *l;
    int fast, slow;              /* axes (0 or 1) of the tile read or written */
    int32_t F, stage_elems, bytes;
    int32_t rows;                /* the stage's extent along its slow axis */
    LLVMValueRef base;           /* i32 shared address of stage 0 */
} Buf;

/* transposed: the tile read is the stage's transpose, so its axis d is the stage's 1-d. */
static Buf buf_of(Cg *c, IrValue v, bool transposed)
{
    Buf b;
    b.t = cg_type(c, v);
    b.l = b.t->layout;
    b.fast = b.l->order[0] - 1;
    b.slow = b.l->order[1] - 1;
    b.F = b.t->shape[1 + b.fast];
    b.rows = b.t->shape[1 + b.slow];
    b.stage_elems = b.t->shape[1] * b.t->shape[2];
    if (transposed) {
        b.fast = 1 - b.fast;
        b.slow = 1 - b.slow;
    }
    b.bytes = ir_elem_bytes(b.t->elem);
    b.base = cg_get(c, v).v[0];
    return b;
}

static int log2i(int32_t v)
{
    int r = 0;
    while ((1 << r) < v) r++;
    return r;
}

/* The address of element (stage, co[0], co[1]) of buffer b (i32, shared window). In
 * the NVMMA form (swizzle_bytes SW) the fast axis is cut into blocks of SW bytes, each
 * block the stage's rows of SW bytes, one block after the other:
 *   elem = (fast / E) * rows * E + slow * E + swizzled(fast % E),  E = SW / element bytes */
static LLVMValueRef elem_addr(Cg *c, const Buf *b, LLVMValueRef stage, LLVMValueRef co[2])
{
    LLVMValueRef slow = co[b->slow], fast = co[b->fast];
    const IrLayout *l = b->l;
    int32_t row = b->F;
    LLVMValueRef block = NULL;
    if (l->swizzle_bytes && l->swizzle_bytes / b->bytes < b->F) {
        row = l->swizzle_bytes / b->bytes;
        block = mul(c, cg_lshr(c->b, fast, k32(c, log2i(row))), (int64_t)row * b->rows);
        fast = cg_and(c->b, fast, k32(c, row - 1));
    }
    LLVMValueRef chunk = cg_lshr(c->b, fast, k32(c, log2i(l->vec)));
    LLVMValueRef within = cg_and(c->b, fast, k32(c, l->vec - 1));
    LLVMValueRef phase = cg_and(c->b, cg_lshr(c->b, slow, k32(c, log2i(l->per_phase))),
                                k32(c, l->max_phase - 1));
    chunk = LLVMBuildXor(c->b, chunk, phase, "");
    LLVMValueRef e = add(c, mul(c, slow, row), add(c, cg_shl(c->b, chunk, k32(c, log2i(l->vec))), within));
    if (block) e = add(c, e, block);
    e = add(c, e, mul(c, stage, b->stage_elems));
    return add(c, b->base, mul(c, e, b->bytes));
}

/* ---- async copies ------------------------------------------------------------------------ */

/* 16 zero bytes in global memory: where a copy's mask is false its source is this, so
 * that it never names an address that may be unmapped (a masked-off copy of a K loop's
 * last stages points past the end of B, and a cp.async of source size 0 is still an
 * access of its address: on the H200 the GEMM at 16384 x 11008 x 4096 faulted with
 * misaligned and illegal addresses, by what was mapped after B). */
static LLVMValueRef zero_source(Cg *c)
{
    const char *name = "__tile_zero16";
    LLVMValueRef g = LLVMGetNamedGlobal(c->mod, name);
    if (!g) {
        LLVMTypeRef ty = LLVMArrayType2(LLVMInt8TypeInContext(c->ctx), 16);
        g = LLVMAddGlobalInAddressSpace(c->mod, ty, name, 1);
        LLVMSetInitializer(g, LLVMConstNull(ty));
        LLVMSetLinkage(g, LLVMInternalLinkage);
        LLVMSetGlobalConstant(g, true);
        LLVMSetAlignment(g, 16);
    }
    return LLVMBuildPtrToInt(c->b, g, LLVMInt64TypeInContext(c->ctx), "");
}

/* One cp.async of `bytes` (4, 8 or 16) from global p to shared dst, zero-filled where m
 * is false; only where `own` holds (NULL: everywhere). Every lane owning its chunk (a
 * GEMM's rings): one unpredicated cp.async whose source size is `bytes` or 0 and whose
 * source is p or the zero bytes above, as Triton's; ptxas precedes each predicated
 * cp.async with three idle slots, and the zeros stored beside it cost another (on the
 * H200 the bf16 GEMM's loop was 229 instructions against Triton's 118). Otherwise the
 * copy is issued where m and own hold and zeros are stored where own holds and m not. */
static void cp_async(Cg *c, LLVMValueRef dst, LLVMValueRef p, LLVMValueRef m, uint32_t bytes, LLVMValueRef own)
{
    LLVMValueRef src = LLVMBuildPtrToInt(c->b, p, LLVMInt64TypeInContext(c->ctx), "");
    const char *kind = bytes == 16 ? "cg" : "ca";
    char text[320];
    if (!own) {
        src = LLVMBuildSelect(c->b, m, src, zero_source(c), "");
        LLVMValueRef size = LLVMBuildSelect(c->b, m, k32(c, bytes), k32(c, 0), "");
        snprintf(text, sizeof text, "cp.async.%s.shared.global [$0], [$1], %u, $2;", kind, bytes);
        LLVMValueRef args[3] = {dst, src, size};
        cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), args, 3, text, "r,l,r,~{memory}", true);
        return;
    }
    LLVMValueRef go = cg_and(c->b, m, own);
    LLVMValueRef zero = cg_and(c->b, LLVMBuildNot(c->b, m, ""), own);
    const char *zeros = bytes == 16 ? "st.shared.v4.b32 [$0], {z, z, z, z};"
                        : bytes == 8 ? "st.shared.v2.b32 [$0], {z, z};" : "st.shared.b32 [$0], z;";
    snprintf(text, sizeof text,
             "{ .reg .pred p, q; .reg .b32 z; mov.b32 z, 0; setp.ne.b32 p, $2, 0; setp.ne.b32 q, $3, 0; "
             "@p cp.async.%s.shared.global [$0], [$1], %u; @q %s }", kind, bytes, zeros);
    LLVMValueRef args[4] = {dst, src, LLVMBuildZExt(c->b, go, i32t(c), ""), LLVMBuildZExt(c->b, zero, i32t(c), "")};
    cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), args, 4, text, "r,l,r,r,~{memory}", true);
}

/* Where a vector is too narrow for cp.async: a guarded load and a shared store. */
static void copy_elem(Cg *c, LLVMValueRef dst, LLVMValueRef p, LLVMValueRef m, IrElem e, LLVMValueRef own)
{
    LLVMTypeRef mt = cg_mem_type(c, e);
    LLVMBasicBlockRef from = LLVMGetInsertBlock(c->b), on = cg_block_new(c, "copy"), join = cg_block_new(c, "copied");
    LLVMBuildCondBr(c->b, m, on, join);
    LLVMPositionBuilderAtEnd(c->b, on);
    LLVMValueRef x = LLVMBuildLoad2(c->b, mt, p, "");
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
    LLVMValueRef phi = LLVMBuildPhi(c->b, mt, "");
    LLVMValueRef vals[2] = {x, LLVMConstNull(mt)};
    LLVMBasicBlockRef bbs[2] = {on, from};
    LLVMAddIncoming(phi, vals, bbs, 2);
    LLVMBasicBlockRef st = cg_block_new(c, "put"), done = cg_block_new(c, "put.done");
    LLVMBuildCondBr(c->b, own ? own : LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0), st, done);
    LLVMPositionBuilderAtEnd(c->b, st);
    LLVMValueRef sp = LLVMBuildIntToPtr(c->b, dst, LLVMPointerTypeInContext(c->ctx, 3), "");
    LLVMBuildStore(c->b, phi, sp);
    LLVMBuildBr(c->b, done);
    LLVMPositionBuilderAtEnd(c->b, done);
}

static bool lower_async_copy(Cg *c, const IrOp *op)
{
    Buf b = buf_of(c, op->operands[0], false);
    LLVMValueRef stage = cg_get(c, op->operands[1]).v[0];
    const IrType *pt = cg_type(c, op->operands[2]);
    IrLayoutMap l = ir_layout_map(pt);
    if (l.kind != IR_LMAP_BLOCKED) return cg_error(c, op, "async_copy needs its pointers in a blocked layout");
    CgVal p = cg_get(c, op->operands[2]);
    CgVal m = op->noperands > 3 ? cg_get(c, op->operands[3]) : (CgVal){0};
    uint32_t vw = cg_vector_width(c, op, 2, &l, 3, -1);
    if (pt->layout->order[0] != b.fast) vw = 1;        /* the thread's run is not along the rows */
    uint32_t bytes = vw * (uint32_t)b.bytes;
    LLVMValueRef own = cg_layout_replicated(&l) ? cg_layout_owner(c, &l) : NULL;
    uint32_t n = cg_layout_elems(&l);
    for (uint32_t k = 0; k < n; k += vw) {
        LLVMValueRef co[IR_MAX_RANK];
        cg_layout_coords(c, &l, k, co);
        LLVMValueRef mk = m.n ? cg_at(m, k) : LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0);
        if (bytes >= 4) {
            cp_async(c, elem_addr(c, &b, stage, co), cg_at(p, k), mk, bytes, own);
            continue;
        }
        for (uint32_t j = 0; j < vw; j++) {
            if (j) cg_layout_coords(c, &l, k + j, co);
            copy_elem(c, elem_addr(c, &b, stage, co), cg_at(p, k + j), m.n ? cg_at(m, k + j) : mk, pt->pointee, own);
        }
    }
    return true;
}

/* ---- local_load -------------------------------------------------------------------------- */

static LLVMValueRef elem_from_word(Cg *c, LLVMValueRef w, IrElem e, int half)
{
    LLVMTypeRef et = cg_elem_type(c, e);
    LLVMValueRef v = LLVMBuildBitCast(c->b, w, LLVMVectorType(et, 2), "");
    return LLVMBuildExtractElement(c->b, v, k32(c, half), "");
}

/* n (1, 2 or 4) registers of an mma operand by one ldmatrix; regs[i]: register index
 * of the operand (elements 2*regs[i], +1). */
static void ldmatrix(Cg *c, const Buf *b, LLVMValueRef stage, const IrLayoutMap *l, IrElem e, const uint32_t *regs,
                     uint32_t n, CgVal *out)
{
    int kaxis = l->kind == IR_LMAP_DOT_A ? 1 : 0, oaxis = 1 - kaxis;
    bool trans = b->fast != kaxis;
    LLVMValueRef q = cg_and(c->b, cg_lshr(c->b, c->lane, k32(c, 3)), k32(c, n - 1));
    LLVMValueRef j = cg_and(c->b, c->lane, k32(c, 7));
    /* this lane's matrix origin, chosen among the n registers' */
    LLVMValueRef org[2] = {NULL, NULL};
    for (uint32_t i = 0; i < n; i++) {
        int64_t co[IR_MAX_RANK];
        cg_mma_coords_at(l, 0, 2 * regs[i], co);
        for (int d = 0; d < 2; d++) {
            LLVMValueRef v = k32(c, co[d]);
            if (!i || v == org[d]) org[d] = v;      /* constants are unique: no select of equal arms */
            else org[d] = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, q, k32(c, i), ""), v, org[d], "");
        }
    }
    /* the warp's place: A rows wm*16, B columns wn*8 */
    LLVMValueRef wn = cg_urem(c->b, c->warp, k32(c, l->wpc[1]));
    LLVMValueRef wm = cg_urem(c->b, cg_udiv(c->b, c->warp, k32(c, l->wpc[1])), k32(c, l->wpc[0]));
    if (l->kind == IR_LMAP_DOT_A) org[0] = add(c, org[0], mul(c, wm, 16));
    else org[1] = add(c, org[1], mul(c, wn, 8));
    int row_axis = trans ? kaxis : oaxis;
    org[row_axis] = add(c, org[row_axis], j);
    LLVMValueRef addr = elem_addr(c, b, stage, org);
    char text[160], cons[64];
    int at = 0;
    for (uint32_t i = 0; i < n; i++) at += snprintf(cons + at, sizeof cons - (size_t)at, "=r,");
    snprintf(cons + at, sizeof cons - (size_t)at, "r");
    char list[48];
    int lt = snprintf(list, sizeof list, "{");
    for (uint32_t i = 0; i < n; i++) lt += snprintf(list + lt, sizeof list - (size_t)lt, "%s$%u", i ? ", " : "", i);
    snprintf(list + lt, sizeof list - (size_t)lt, "}");
    snprintf(text, sizeof text, "ldmatrix.sync.aligned.m8n8.x%u%s.shared.b16 %s, [$%u];", n, trans ? ".trans" : "", list, n);
    LLVMTypeRef fields[4] = {i32t(c), i32t(c), i32t(c), i32t(c)};
    LLVMTypeRef ret = n == 1 ? i32t(c) : LLVMStructTypeInContext(c->ctx, fields, n, 0);
    LLVMValueRef r = cg_call_asm(c, ret, &addr, 1, text, cons, false);
    cg_reads_memory_only(c, r);
    cg_convergent(c, r);
    for (uint32_t i = 0; i < n; i++) {
        LLVMValueRef w = n == 1 ? r : LLVMBuildExtractValue(c->b, r, i, "");
        out->v[2 * regs[i]] = elem_from_word(c, w, e, 0);
        out->v[2 * regs[i] + 1] = elem_from_word(c, w, e, 1);
    }
}

/* The registers of step ks of K of an mma operand, by ldmatrix: A four per rm (one
 * x4), B two per rn, paired across rn (x4, or x2 for the last odd one). */
static void fill_step_at(Cg *c, const IrOp *ll, LLVMValueRef stage, const IrLayoutMap *l, uint32_t ks, CgVal *out)
{
    Buf b = buf_of(c, ll->operands[0], ll->attr.i == 1);
    IrElem e = cg_type(c, ll->results[0])->elem;
    uint32_t KS = (uint32_t)l->ks, regs[4];
    if (l->kind == IR_LMAP_DOT_A) {
        for (uint32_t rm = 0; rm < (uint32_t)l->reps[0]; rm++) {
            uint32_t r0 = (rm * KS + ks) * 4;
            if (out->v[2 * r0]) continue;
            for (uint32_t i = 0; i < 4; i++) regs[i] = r0 + i;
            ldmatrix(c, &b, stage, l, e, regs, 4, out);
        }
        return;
    }
    uint32_t RN = (uint32_t)l->reps[1];
    for (uint32_t rn = 0; rn < RN; rn += 2) {
        uint32_t n = 0;
        for (uint32_t q = rn; q < rn + 2 && q < RN; q++)
            for (uint32_t i = 0; i < 2; i++) regs[n++] = (q * KS + ks) * 2 + i;
        if (!out->v[2 * regs[0]]) ldmatrix(c, &b, stage, l, e, regs, n, out);
    }
}

static void fill_step(Cg *c, const IrOp *ll, const IrLayoutMap *l, uint32_t ks, CgVal *out)
{
    fill_step_at(c, ll, c->vals[ll->operands[1]].v[0], l, ks, out);
}

void cg_shared_fill(Cg *c, IrValue v, uint32_t ks)
{
    const IrOp *ll = c->lazy ? c->lazy[v] : NULL;
    if (!ll) return;
    IrLayoutMap l = ir_layout_map(cg_type(c, v));
    if (ks < (uint32_t)l.ks) fill_step(c, ll, &l, ks, &c->vals[v]);
}

void cg_shared_fill_all(Cg *c, IrValue v)
{
    const IrOp *ll = c->lazy ? c->lazy[v] : NULL;
    if (!ll) return;
    c->lazy[v] = NULL;
    IrLayoutMap l = ir_layout_map(cg_type(c, v));
    for (uint32_t ks = 0; ks < (uint32_t)l.ks; ks++) fill_step(c, ll, &l, ks, &c->vals[v]);
}

/* s1 and s2 are different stages: rem(x, S) and rem(add(x, d), S), 0 < d < S constants. */
static bool is_rem_of(const IrFunc *f, IrValue v, IrValue *x, int64_t *d, int64_t *S)
{
    const IrOp *r = f->values[v].def;
    if (!r || r->code != IR_OP_REM) return false;
    const IrOp *k = f->values[r->operands[1]].def;
    if (!k || k->code != IR_OP_CONST) return false;
    *S = k->attr.i;
    *x = r->operands[0];
    *d = 0;
    const IrOp *a = f->values[*x].def;
    const IrOp *ka = a && a->code == IR_OP_ADD ? f->values[a->operands[1]].def : NULL;
    if (ka && ka->code == IR_OP_CONST) {
        *x = a->operands[0];
        *d = ka->attr.i;
    }
    return true;
}

static bool distinct_stages(const IrFunc *f, IrValue s1, IrValue s2)
{
    IrValue x1, x2;
    int64_t d1, d2, S1, S2;
    if (!is_rem_of(f, s1, &x1, &d1, &S1) || !is_rem_of(f, s2, &x2, &d2, &S2)) return false;
    int64_t d = d1 - d2;
    return x1 == x2 && S1 == S2 && S1 > 1 && d % S1 != 0;
}

/* The ldmatrix of a local_load may wait until its dot needs each step of K (and the
 * next step is loaded while this one multiplies), when the dot is its only use, in the
 * same block, and nothing between can change the stage it reads: no wait, barrier or
 * store, and copies only into other buffers or provably other stages. */
static bool deferrable(Cg *c, const IrOp *ll)
{
    const IrFunc *f = c->f;
    IrValue v = ll->results[0];
    for (const IrOp *op = ll->next; op; op = op->next) {
        bool uses = false;
        for (uint32_t i = 0; i < op->noperands; i++) uses |= op->operands[i] == v;
        if (uses) {
            for (const IrOp *o = op->next; o; o = o->next)
                for (uint32_t i = 0; i < o->noperands; i++)
                    if (o->operands[i] == v) return false;
            return op->code == IR_OP_DOT && op->operands[2] != v;
        }
        if (op->nregions || op->code == IR_OP_ASYNC_WAIT || op->code == IR_OP_BARRIER) return false;
        if (op->code == IR_OP_ASYNC_COPY) {
            if (op->operands[0] == ll->operands[0] && !distinct_stages(f, op->operands[1], ll->operands[1])) return false;
        } else if (ir_op_info[op->code].flags & IR_W) {
            return false;
        }
    }
    return false;
}

static bool lower_local_load(Cg *c, const IrOp *op)
{
    Buf b = buf_of(c, op->operands[0], op->attr.i == 1);
    LLVMValueRef stage = cg_get(c, op->operands[1]).v[0];
    const IrType *rt = cg_type(c, op->results[0]);
    if (rt->layout->kind == IR_LAYOUT_SHARED) {    /* a view of the stage, for wgmma: its address */
        CgVal view = cg_val_new(c, 1);
        view.v[0] = add(c, b.base, cg_mul(c->b, stage, k32(c, (int64_t)b.stage_elems * b.bytes)));
        cg_set(c, op->results[0], view);
        return true;
    }
    IrLayoutMap l = ir_layout_map(rt);
    uint32_t n = cg_layout_elems(&l);
    CgVal out = cg_val_new(c, n);
    if ((l.kind == IR_LMAP_DOT_A || l.kind == IR_LMAP_DOT_B) && b.bytes == 2 && c->target->ldmatrix) {
        for (uint32_t k = 0; k < n; k++) out.v[k] = NULL;
        for (int i = 0; i < 2; i++)
            if (c->pf && c->pf->ll[i] == op)
                for (uint32_t k = 0; k < n && k < c->pf->elems[i].n; k++) out.v[k] = c->pf->elems[i].v[k];
        cg_set(c, op->results[0], out);
        c->lazy[op->results[0]] = op;
        if (!deferrable(c, op)) cg_shared_fill_all(c, op->results[0]);
        return true;
    }
    LLVMTypeRef mt = cg_mem_type(c, rt->elem);
    for (uint32_t k = 0; k < n; k++) {
        LLVMValueRef co[IR_MAX_RANK];
        cg_layout_coords(c, &l, k, co);
        LLVMValueRef sp = LLVMBuildIntToPtr(c->b, elem_addr(c, &b, stage, co), LLVMPointerTypeInContext(c->ctx, 3), "");
        LLVMValueRef x = LLVMBuildLoad2(c->b, mt, sp, "");
        out.v[k] = rt->elem == IR_I1 ? LLVMBuildICmp(c->b, LLVMIntNE, x, LLVMConstNull(mt), "") : x;
    }
    cg_set(c, op->results[0], out);
    return true;
}

/* local_store: each thread writes the elements it holds at their addresses in the
 * stage's layout (elem_addr: an NVMMA buffer's swizzle), a run of a blocked layout along
 * the stage's fast axis in 16-byte stores (one swizzled chunk each: the fp8 transpose of
 * passes/shared.c holds 16 consecutive K a thread, read from the N-major ring one byte
 * at a time), other elements one at a time. A layout that replicates elements writes
 * each copy: the same value at the same address. */
static bool lower_local_store(Cg *c, const IrOp *op)
{
    Buf b = buf_of(c, op->operands[0], op->attr.i == 1);
    LLVMValueRef stage = cg_get(c, op->operands[1]).v[0];
    const IrType *vt = cg_type(c, op->operands[2]);
    IrLayoutMap l = ir_layout_map(vt);
    uint32_t n = cg_layout_elems(&l);
    CgVal v = cg_get(c, op->operands[2]);
    LLVMTypeRef mt = cg_mem_type(c, vt->elem);
    /* a blocked tile whose thread holds runs along its last axis, the stage's fast one:
     * each run's 16-byte chunks (vec elements, one swizzled chunk each) in one store */
    uint32_t run = vt->elem != IR_I1 && l.kind == IR_LMAP_BLOCKED && vt->layout->order[0] == vt->rank - 1 &&
                   b.fast == vt->rank - 1 ? cg_layout_run(&l) : 1;
    uint32_t w = run < (uint32_t)b.l->vec ? run : (uint32_t)b.l->vec;
    uint32_t words = w * (uint32_t)b.bytes / 4;
    if (w > 1 && n % w == 0 && b.bytes <= 4 && (words == 1 || words == 2 || words == 4)) {
        /* by inline PTX: LLVM 19 splits a 16-byte vector store of i8 into 4-byte ones */
        const char *text = words == 4 ? "st.shared.v4.b32 [$0], {$1, $2, $3, $4};"
                           : words == 2 ? "st.shared.v2.b32 [$0], {$1, $2};" : "st.shared.b32 [$0], $1;";
        const char *cons = words == 4 ? "r,r,r,r,r,~{memory}" : words == 2 ? "r,r,r,~{memory}" : "r,r,~{memory}";
        uint32_t per = 4 / (uint32_t)b.bytes;     /* elements a word */
        LLVMTypeRef wt = LLVMVectorType(mt, per);
        for (uint32_t k = 0; k < n; k += w) {
            LLVMValueRef co[IR_MAX_RANK], args[5];
            cg_layout_coords(c, &l, k, co);
            args[0] = elem_addr(c, &b, stage, co);
            for (uint32_t q = 0; q < words; q++) {
                LLVMValueRef x = LLVMGetUndef(wt);
                for (uint32_t i = 0; i < per; i++)
                    x = LLVMBuildInsertElement(c->b, x, cg_at(v, k + q * per + i), cg_i32c(c, i), "");
                args[1 + q] = LLVMBuildBitCast(c->b, x, cg_i32(c), "");
            }
            cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), args, 1 + words, text, cons, true);
        }
        return true;
    }
    for (uint32_t k = 0; k < n; k++) {
        LLVMValueRef co[IR_MAX_RANK];
        cg_layout_coords(c, &l, k, co);
        LLVMValueRef sp = LLVMBuildIntToPtr(c->b, elem_addr(c, &b, stage, co), LLVMPointerTypeInContext(c->ctx, 3), "");
        LLVMValueRef x = cg_at(v, k);
        if (vt->elem == IR_I1) x = LLVMBuildZExt(c->b, x, mt, "");
        LLVMBuildStore(c->b, x, sp);
    }
    return true;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

bool cg_shared(Cg *c, const IrOp *op)
{
    switch (op->code) {
    case IR_OP_LOCAL_ALLOC: {
        /* The buffer area may overlap the scratch of ops before the buffers' live range
         * (cg_module.c smem_plan): those ops end with shared loads that a warp may not
         * have executed when another warp's first copy lands there. One barrier when a
         * loop's area begins (its first buffer is at offset 0). */
        if (op->attr.i == 0) cg_barrier(c);
        CgVal v = cg_val_new(c, 1);
        v.v[0] = add(c, smem_base32(c), k32(c, c->smem_buffers + (uint32_t)op->attr.i));
        cg_set(c, op->results[0], v);
        return true;
    }
    case IR_OP_ASYNC_COPY: return lower_async_copy(c, op);
    case IR_OP_ASYNC_COMMIT:
        cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, "cp.async.commit_group;", "~{memory}", true);
        return true;
    case IR_OP_ASYNC_WAIT: {
        if (c->pf && c->pf->wait == op && c->pf->waited) return true;   /* done inside the dot */
        if (c->wgmma_in_flight && cg_wgmma_loop_before(op)) cg_wgmma_settle(c, op);
        char text[48];
        snprintf(text, sizeof text, "cp.async.wait_group %d;", (int)op->attr.i);
        cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, text, "~{memory}", true);
        if (c->wgmma)   /* the copies (generic proxy) become visible to wgmma (async proxy) */
            cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, "fence.proxy.async.shared::cta;", "~{memory}", true);
        cg_barrier(c);
        return true;
    }
    case IR_OP_LOCAL_LOAD: return lower_local_load(c, op);
    case IR_OP_LOCAL_STORE: return lower_local_store(c, op);
    case IR_OP_FENCE_ASYNC:   /* generic-proxy writes (local_store) before wgmma reads them */
        cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, "fence.proxy.async.shared::cta;", "~{memory}", true);
        return true;
    default: return cg_error(c, op, "not a shared-memory op");
    }
}

/* ---- the prefetch across iterations (CgPrefetch) ------------------------------------------ */

static bool is_const(const IrFunc *f, IrValue v, int64_t *out)
{
    const IrOp *d = f->values[v].def;
    if (!d || d->code != IR_OP_CONST) return false;
    *out = d->attr.i;
    return true;
}

/* stage = rem(div(sub(iv, lo), step), S) with the loop's own iv, lo and constant step,
 * so iteration 0 reads stage 0 and each next iteration stage + 1 mod S. */
static bool stage_of_iteration(const IrFunc *f, const IrOp *loop, IrValue stage, int64_t *S)
{
    IrValue x;
    int64_t d, step, div;
    if (!is_rem_of(f, stage, &x, &d, S) || d != 0 || *S < 2) return false;
    const IrOp *dv = f->values[x].def;
    if (!dv || dv->code != IR_OP_DIV || !is_const(f, dv->operands[1], &div)) return false;
    const IrOp *sb = f->values[dv->operands[0]].def;
    if (!sb || sb->code != IR_OP_SUB || !is_const(f, loop->operands[2], &step) || step != div) return false;
    return sb->operands[0] == loop->regions[0].args[0] && sb->operands[1] == loop->operands[0];
}

static bool ldmatrix_operand(Cg *c, const IrOp *ll)
{
    const IrType *rt = cg_type(c, ll->results[0]);
    IrLayoutMap l = ir_layout_map(rt);
    return (l.kind == IR_LMAP_DOT_A || l.kind == IR_LMAP_DOT_B) &&
           ir_elem_bytes(cg_type(c, ll->operands[0])->elem) == 2 && c->target->ldmatrix;
}


/* Step 0 of ll read from `stage`, as words (pairs of 16-bit elements). */
static LLVMValueRef *first_step_words(Cg *c, const IrOp *ll, LLVMValueRef stage, uint32_t *nwords)
{
    IrLayoutMap l = ir_layout_map(cg_type(c, ll->results[0]));
    uint32_t n = cg_layout_elems(&l);
    CgVal x = cg_val_new(c, n);
    for (uint32_t k = 0; k < n; k++) x.v[k] = NULL;
    fill_step_at(c, ll, stage, &l, 0, &x);
    LLVMValueRef *w = arena_alloc(c->arena, (n / 2 + 1) * sizeof *w);
    for (uint32_t m = 0; m < n / 2; m++) {
        w[m] = NULL;
        if (!x.v[2 * m]) continue;
        LLVMTypeRef et = LLVMTypeOf(x.v[2 * m]);
        LLVMValueRef v = LLVMGetUndef(LLVMVectorType(et, 2));
        v = LLVMBuildInsertElement(c->b, v, x.v[2 * m], k32(c, 0), "");
        v = LLVMBuildInsertElement(c->b, v, x.v[2 * m + 1], k32(c, 1), "");
        w[m] = LLVMBuildBitCast(c->b, v, i32t(c), "");
    }
    *nwords = n / 2;
    return w;
}

/* How many iterations ahead the ring that local_load ll reads is copied: the copy into
 * ll's buffer in ll's block at stage rem(add(x, d), S) against ll's rem(x, S); 0 when
 * there is none or it is not of that form. */
static int ring_distance(const IrFunc *f, const IrOp *ll)
{
    IrValue x, y;
    int64_t d0, S0, d, S;
    if (!is_rem_of(f, ll->operands[1], &x, &d0, &S0)) return 0;
    for (const IrOp *op = ll->parent ? ll->parent->first : NULL; op; op = op->next)
        if ((op->code == IR_OP_ASYNC_COPY || op->code == IR_OP_TMA_COPY) && op->operands[0] == ll->operands[0] &&
            is_rem_of(f, op->operands[1], &y, &d, &S) && y == x && S == S0)
            return (int)(d - d0);
    return 0;
}

/* For a warp-specialized ring (no copies in the loop, passes/warpspec.c): how many
 * iterations after the one ll reads the first mbarrier_arrive after `after` releases
 * (mod S: S-1 is the previous iteration's stage); -1 if none. */
static int release_distance(const IrFunc *f, const IrOp *ll, const IrOp *after)
{
    IrValue x, y;
    int64_t d0, S0, d, S;
    if (!is_rem_of(f, ll->operands[1], &x, &d0, &S0)) return -1;
    for (const IrOp *op = after->next; op; op = op->next)
        if (op->code == IR_OP_MBARRIER_ARRIVE && is_rem_of(f, op->operands[1], &y, &d, &S) && y == x && S == S0)
            return (int)(((d - d0) % S + S) % S);
    return -1;
}

/* Does a barrier come between the dot and the first copy into ring `buf` after it (a
 * barrier of the program, or the issuing thread's wait for every warp's release of the
 * stage: passes/shared.c's TMA rings)? */
static bool barrier_before_copy(const IrOp *dot, IrValue buf)
{
    bool bar = false;
    for (const IrOp *u = dot->next; u; u = u->next) {
        if (u->code == IR_OP_BARRIER || (u->code == IR_OP_TMA_WAIT && u->attr.i == 1)) bar = true;
        if ((u->code == IR_OP_ASYNC_COPY || u->code == IR_OP_TMA_COPY) && u->operands[0] == buf) return bar;
    }
    return false;
}

bool cg_stage_outlives_group(Cg *c, const IrOp *ll, const IrOp *dot)
{
    int64_t S = cg_type(c, ll->operands[0])->shape[0];
    int d = ring_distance(c->f, ll);
    /* a producer warpgroup's ring: the stage iteration j-1 read is released after this
     * dot, whose wait has retired j-1's group */
    if (!d && c->consumers) return S >= 2 && release_distance(c->f, ll, dot) == S - 1;
    /* copied S-1 iterations ahead after the dot and a barrier (every warpgroup has then
     * retired the previous iteration's group), or S-2 ahead before it */
    return S >= 3 && d == (barrier_before_copy(dot, ll->operands[0]) ? S - 1 : S - 2);
}

bool cg_prefetch_begin(Cg *c, const IrOp *loop, CgPrefetch *pf)
{
    const IrFunc *f = c->f;
    const IrBlock *body = &loop->regions[0];
    memset(pf, 0, sizeof *pf);
    if (ir_count_ops(body, IR_OP_DOT) != 1) return false;
    const IrOp *dot = NULL;
    for (const IrOp *op = body->first; op; op = op->next)
        if (op->code == IR_OP_DOT) dot = op;
    if (!dot || !dot->next || dot->next->code != IR_OP_ASYNC_WAIT) return false;
    if (dot->next->next && dot->next->next->code != IR_OP_YIELD) return false;
    const IrType *rt = cg_type(c, dot->results[0]);
    if (!rt->layout || rt->layout->kind != IR_LAYOUT_MMA || dot->operands[0] == dot->operands[1]) return false;
    for (int i = 0; i < 2; i++) {
        const IrOp *ll = f->values[dot->operands[i]].def;
        int64_t S;
        if (!ll || ll->code != IR_OP_LOCAL_LOAD || ll->parent != body || !ldmatrix_operand(c, ll) ||
            !stage_of_iteration(f, loop, ll->operands[1], &S))
            return false;
        if (i && S != pf->stages) return false;
        pf->stages = S;
        pf->ll[i] = ll;
    }
    pf->dot = dot;
    pf->wait = dot->next;
    /* the first iteration's first step, read in the preheader (after the wait before
     * the loop) */
    for (int i = 0; i < 2; i++) pf->first[i] = first_step_words(c, pf->ll[i], k32(c, 0), &pf->nwords[i]);
    return true;
}

/* Builder at the loop head's phis (the preheader's values come in from pre): the
 * phis, then the elements the local_loads take from them. */
void cg_prefetch_phis(Cg *c, CgPrefetch *pf, LLVMBasicBlockRef pre)
{
    for (int i = 0; i < 2; i++)
        for (uint32_t m = 0; m < pf->nwords[i]; m++) {
            LLVMValueRef v = pf->first[i][m];
            if (!v) continue;
            LLVMValueRef ph = LLVMBuildPhi(c->b, i32t(c), "");
            LLVMAddIncoming(ph, &v, &pre, 1);
            pf->first[i][m] = ph;
        }
    for (int i = 0; i < 2; i++) {
        IrElem e = cg_type(c, pf->ll[i]->results[0])->elem;
        pf->elems[i] = cg_val_new(c, 2 * pf->nwords[i]);
        for (uint32_t m = 0; m < pf->nwords[i]; m++) {
            LLVMValueRef w = pf->first[i][m];
            pf->elems[i].v[2 * m] = w ? elem_from_word(c, w, e, 0) : NULL;
            pf->elems[i].v[2 * m + 1] = w ? elem_from_word(c, w, e, 1) : NULL;
        }
    }
}

/* In the dot, before its last step's mma: the wait and barrier of the next iteration,
 * then its first step of each operand, from the next stage. */
void cg_prefetch_next(Cg *c, const IrOp *dot)
{
    CgPrefetch *pf = c->pf;
    if (!pf || pf->dot != dot || pf->waited) return;
    char text[48];
    snprintf(text, sizeof text, "cp.async.wait_group %d;", (int)pf->wait->attr.i);
    cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, text, "~{memory}", true);
    cg_barrier(c);
    pf->waited = true;
    for (int i = 0; i < 2; i++) {
        LLVMValueRef cur = c->vals[pf->ll[i]->operands[1]].v[0];
        LLVMValueRef inc = add(c, cur, k32(c, 1));
        LLVMValueRef wrap = LLVMBuildICmp(c->b, LLVMIntEQ, inc, k32(c, pf->stages), "");
        uint32_t nw;
        pf->next[i] = first_step_words(c, pf->ll[i], LLVMBuildSelect(c->b, wrap, k32(c, 0), inc, ""), &nw);
    }
}

bool cg_prefetch_end(Cg *c, CgPrefetch *pf, LLVMBasicBlockRef latch)
{
    if (!pf->waited) return cg_error(c, pf->dot, "internal error: the pipelined dot did not prefetch");
    for (int i = 0; i < 2; i++)
        for (uint32_t m = 0; m < pf->nwords[i]; m++) {
            LLVMValueRef ph = pf->first[i][m], v = pf->next[i][m];
            if (!ph) continue;
            if (!v) return cg_error(c, pf->dot, "internal error: a prefetched register is missing");
            LLVMAddIncoming(ph, &v, &latch, 1);
        }
    return true;
}
