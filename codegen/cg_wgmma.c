/* Tensor cores through wgmma (sm_90a): dot(a, b, acc) with the accumulator in an mma
 * layout of version 3 and both operands views of ring stages in shared memory
 * (passes/shared.c: local_load into an NVMMA shared layout copies nothing; the value
 * is the stage's shared address).
 *
 * The accumulator's element order is mma.sync's with the warps along M (cg_mma.c,
 * wpc = [W, 1]): warpgroup g (warps 4g..4g+3) owns, in each band of 16*W rows, the 64
 * rows from 64g, and one wgmma.mma_async m64nNkK per band and K step (K = 16 for f16
 * and bf16, 32 for f8 e4m3/e5m2: the layout's instr[2]) computes them: its register j
 * is element (rm * N/8 + j/4) * 4 + j % 4 of the thread, which
 * is what PTX's m64nNkK D fragment holds (row 16*(warp%4) + lane/4 + 8*(j/2 % 2), col
 * 8*(j/4) + 2*(lane%4) + j%2).
 *
 * Shared-memory descriptors (PTX ISA "Matrix Descriptor Format", ../shared/TENSOR-
 * CORES.md): bits 0-13 the start address >> 4, 16-29 the leading byte offset >> 4,
 * 32-45 the stride byte offset >> 4, 62-63 the swizzle mode (1: 128 B, 2: 64 B, 3: 32
 * B). A stage in the NVMMA form of swizzle SW keeps rows of SW bytes, its fast axis cut
 * into blocks of SW bytes, each block [rows x SW] after the other. An operand whose
 * fast axis is K (K-major: A as loaded, B = W^T) steps along K inside a block by
 * moving the start (32 bytes per K step) and jumps blocks by rows * SW; 8 rows are SW * 8
 * bytes apart (SBO), LBO is unused. An operand whose fast axis is M or N (MN-major: B
 * as loaded, trans-b; A transposed, trans-a) has 8-row groups of K SW * 8 bytes apart
 * (SBO) and its 64-wide blocks of M or N K * SW bytes apart (LBO).
 *
 * A dot is: wgmma.fence (the accumulator registers are final), every wgmma, one
 * commit_group and wait_group 0, the accumulators passed through the wait (tied asm
 * operands) so that nothing reads them before it. The async_wait that makes a stage's
 * cp.async data visible adds fence.proxy.async before its barrier (cg_shared.c): the
 * copies are generic-proxy writes, wgmma reads through the async proxy. */
#include <stdio.h>
#include <math.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"

typedef struct Operand {
    LLVMValueRef base;           /* i32 shared address of the stage */
    int32_t shape[2];
    int kax, fast;               /* the K axis and the stage's contiguous axis (0 or 1) */
    int32_t sw;                  /* swizzle bytes */
    int elem_bytes;
} Operand;

static Operand operand(Cg *c, const IrOp *op, int i)
{
    const IrType *t = cg_type(c, op->operands[i]);
    Operand o;
    o.base = cg_get(c, op->operands[i]).v[0];
    o.shape[0] = t->shape[0];
    o.shape[1] = t->shape[1];
    o.kax = i == 0 ? 1 : 0;
    o.fast = t->layout->order[0];
    o.sw = t->layout->swizzle_bytes;
    o.elem_bytes = ir_elem_bytes(t->elem);
    return o;
}

static bool k_major(const Operand *o) { return o->fast == o->kax; }

/* The low word of the descriptor of the operand's 64 (A) or N (B) rows from o0 (an
 * i32 value) at K element 0: the start address >> 4 (14 bits). */
static LLVMValueRef descriptor_lo(Cg *c, const Operand *o, LLVMValueRef o0)
{
    LLVMBuilderRef b = c->b;
    int32_t swe = o->sw / o->elem_bytes;          /* elements per block row */
    int shift = 0;
    while ((1 << shift) < swe) shift++;
    LLVMValueRef addr;
    if (k_major(o)) {
        addr = cg_add(b, o->base, cg_mul(b, o0, cg_i32c(c, o->sw)));
    } else {
        int32_t krows = o->shape[o->kax];
        LLVMValueRef blk = cg_lshr(b, o0, cg_i32c(c, shift)), in = cg_and(b, o0, cg_i32c(c, swe - 1));
        addr = cg_add(b, o->base, cg_mul(b, blk, cg_i32c(c, (int64_t)krows * o->sw)));
        addr = cg_add(b, addr, cg_mul(b, in, cg_i32c(c, o->elem_bytes)));
    }
    return cg_and(b, cg_lshr(b, addr, cg_i32c(c, 4)), cg_i32c(c, 0x3FFF));
}

/* The descriptor of the same rows at K element k0, from descriptor_lo's lo: the byte
 * offset of k0 (a multiple of 16) >> 4 added to the start field. Shared addresses stay
 * below 2^18, so the field never carries and this is the descriptor of base + offset:
 * one add a K step where recomputing it took four (shift, mask, or, add; SASS of the
 * attention forward on the H200, as cuDNN's kernel adds to its descriptors). */
static LLVMValueRef descriptor_at(Cg *c, const Operand *o, LLVMValueRef lo, int32_t k0)
{
    LLVMBuilderRef b = c->b;
    int32_t swe = o->sw / o->elem_bytes;
    int64_t off, lbo, sbo = 8 * (int64_t)o->sw;
    if (k_major(o)) {
        int32_t rows = o->shape[1 - o->kax];
        off = (int64_t)(k0 / swe) * rows * o->sw + (int64_t)(k0 % swe) * o->elem_bytes;
        lbo = 16;
    } else {
        int32_t krows = o->shape[o->kax];
        off = (int64_t)k0 * o->sw;
        lbo = (int64_t)krows * o->sw;
    }
    uint64_t mode = o->sw == 128 ? 1 : o->sw == 64 ? 2 : 3;
    uint64_t hi = (((uint64_t)lbo >> 4) & 0x3FFF) << 16 | (((uint64_t)sbo >> 4) & 0x3FFF) << 32 | mode << 62;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    if (off) lo = cg_add(b, lo, cg_i32c(c, off >> 4));
    return LLVMBuildOr(b, LLVMBuildZExt(b, lo, i64, ""), LLVMConstInt(i64, hi, 0), "");
}

static void simple_asm(Cg *c, const char *text)
{
    cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, text, "~{memory}", true);
}

/* d[0..R) = A * B + d by one wgmma.mma_async m64nNkK (d = A * B, its input unread, when
 * not `accumulate`: the instruction's scale-d is 0): A by descriptor da, or (ra not
 * NULL) from 4 registers of the mma.sync A fragment (then no trans-a; m16n8k32's for
 * f8, 4 bytes a register). K = 16 for f16 and bf16; K = 32 for f8 (e4m3, e5m2), whose
 * form has no transpose immediates: both operands are K-major (the shared pass and the
 * verifier see to it). */
static void wgmma(Cg *c, int32_t N, int32_t K, const char *in, LLVMValueRef da, const LLVMValueRef *ra, LLVMValueRef db,
                  int ta, int tb, bool accumulate, LLVMValueRef *d)
{
    uint32_t R = (uint32_t)N / 2, na = ra ? 4 : 1, nargs = na + 2 + R;
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c->ctx), i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMTypeRef *fields = arena_alloc(c->arena, R * sizeof *fields), *argt = arena_alloc(c->arena, nargs * sizeof *argt);
    LLVMValueRef *args = arena_alloc(c->arena, nargs * sizeof *args);
    for (uint32_t j = 0; j < R; j++) fields[j] = f32;
    for (uint32_t i = 0; i < na; i++) args[i] = ra ? ra[i] : da, argt[i] = ra ? cg_i32(c) : i64;
    args[na] = db, argt[na] = i64;
    args[na + 1] = cg_i32c(c, accumulate), argt[na + 1] = cg_i32(c);
    for (uint32_t j = 0; j < R; j++) args[na + 2 + j] = d[j], argt[na + 2 + j] = f32;
    size_t tn = 96 + 6 * R + 160, cn = 4 * R + 8 * R + 24;
    char *text = arena_alloc(c->arena, tn), *cons = arena_alloc(c->arena, cn);
    int at = snprintf(text, tn, "{ .reg .pred p; setp.ne.b32 p, $%u, 0; wgmma.mma_async.sync.aligned.m64n%dk%d.f32.%s.%s {",
                      R + na + 1, N, K, in, in);
    for (uint32_t j = 0; j < R; j++) at += snprintf(text + at, tn - (size_t)at, "%s$%u", j ? ", " : "", j);
    if (ra && K == 32)   /* f8 A from registers: no transpose immediate (B is K-major) */
        snprintf(text + at, tn - (size_t)at, "}, {$%u, $%u, $%u, $%u}, $%u, p, 1, 1; }", R, R + 1, R + 2, R + 3, R + 4);
    else if (ra)
        snprintf(text + at, tn - (size_t)at, "}, {$%u, $%u, $%u, $%u}, $%u, p, 1, 1, %d; }", R, R + 1, R + 2, R + 3, R + 4, tb);
    else if (K == 32)
        snprintf(text + at, tn - (size_t)at, "}, $%u, $%u, p, 1, 1; }", R, R + 1);
    else
        snprintf(text + at, tn - (size_t)at, "}, $%u, $%u, p, 1, 1, %d, %d; }", R, R + 1, ta, tb);
    int cat = 0;
    for (uint32_t j = 0; j < R; j++) cat += snprintf(cons + cat, cn - (size_t)cat, "=f,");
    cat += snprintf(cons + cat, cn - (size_t)cat, ra ? "r,r,r,r,l,r" : "l,l,r");
    for (uint32_t j = 0; j < R; j++) cat += snprintf(cons + cat, cn - (size_t)cat, ",%u", j);
    LLVMTypeRef ret = LLVMStructTypeInContext(c->ctx, fields, R, 0);
    LLVMTypeRef fty = LLVMFunctionType(ret, argt, nargs, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), cons, strlen(cons), 1, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef r = LLVMBuildCall2(c->b, fty, fn, args, nargs, "");
    cg_convergent(c, r);
    for (uint32_t j = 0; j < R; j++) d[j] = LLVMBuildExtractValue(c->b, r, j, "");
}

/* The one-line asm `text` with v[0..n) (f32 accumulators or i32 A registers) passed
 * through it as tied operands: whatever computes them runs before it, whatever reads
 * them after it. wgmma.wait_group takes the accumulators so that nothing reads them
 * early; wgmma.fence takes what wgmma reads so that nothing writes them after it (else
 * ptxas injects the fence, C7519). */
static void asm_through(Cg *c, const char *text, LLVMValueRef *v, uint32_t n)
{
    LLVMTypeRef *ty = arena_alloc(c->arena, (n ? n : 1) * sizeof *ty);
    LLVMTypeRef i8 = LLVMInt8TypeInContext(c->ctx), i16 = LLVMInt16TypeInContext(c->ctx);
    bool *narrow = arena_alloc(c->arena, (n ? n : 1) * sizeof *narrow);
    size_t cn = 12 * n + 16;
    char *cons = arena_alloc(c->arena, cn);
    int cat = 0;
    for (uint32_t j = 0; j < n; j++) {
        /* 8-bit values (f8 held as bytes: a rotated loop's P) go through as 16 bits: PTX
         * has no 8-bit registers */
        narrow[j] = LLVMTypeOf(v[j]) == i8;
        if (narrow[j]) v[j] = LLVMBuildZExt(c->b, v[j], i16, "");
        ty[j] = LLVMTypeOf(v[j]);
        cat += snprintf(cons + cat, cn - (size_t)cat, "=%s,", ty[j] == cg_i32(c) ? "r" : ty[j] == i16 ? "h" : "f");
    }
    for (uint32_t j = 0; j < n; j++) cat += snprintf(cons + cat, cn - (size_t)cat, "%s%u", j ? "," : "", j);
    snprintf(cons + cat, cn - (size_t)cat, ",~{memory}");
    LLVMTypeRef ret = LLVMStructTypeInContext(c->ctx, ty, n, 0);
    LLVMTypeRef fty = LLVMFunctionType(ret, ty, n, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), cons, strlen(cons), 1, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef r = LLVMBuildCall2(c->b, fty, fn, v, n, "");
    cg_convergent(c, r);
    for (uint32_t j = 0; j < n; j++) {
        v[j] = LLVMBuildExtractValue(c->b, r, j, "");
        if (narrow[j]) v[j] = LLVMBuildTrunc(c->b, v[j], i8, "");
    }
}

/* asm_through over v[0..n) in groups of at most 128 (the operands of one asm). */
static void all_through(Cg *c, const char *text, LLVMValueRef *v, uint32_t n)
{
    for (uint32_t q = 0; q < n; q += 128) asm_through(c, text, v + q, n - q < 128 ? n - q : 128);
}

/* wgmma.wait_group n, with d[0..R) passed through it. */
static void wait_through(Cg *c, int n, LLVMValueRef *d, uint32_t R)
{
    char text[64];
    snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", n);
    asm_through(c, text, d, R);
}

/* The dot may leave its group in flight (wait_group 1): it is the only dot of a for
 * loop's body, its result is only yielded, both views read ring stages that are reused
 * no sooner than the next iteration's wait has retired this group (cg_shared.c,
 * cg_stage_outlives_group); and the loop is followed (past ping-pong turns) by the
 * async_wait 0 that settles it (cg_wgmma_settle). A ping-pong GEMM's K loop waited for
 * every group before (wait_group 0 each step: 17% of its stall samples on the H200). */
static bool in_flight_ok(Cg *c, const IrOp *op)
{
    const IrBlock *body = op->parent;
    if (!body || !body->parent_op || body->parent_op->code != IR_OP_FOR) return false;
    const IrOp *after = body->parent_op->next;
    while (after && after->code == IR_OP_TURN) after = after->next;
    if (!after || after->code != IR_OP_ASYNC_WAIT) return false;
    for (int i = 0; i < 2; i++) {
        const IrOp *ll = c->f->values[op->operands[i]].def;
        if (!ll || ll->code != IR_OP_LOCAL_LOAD) return false;
        if (!cg_stage_outlives_group(c, ll, op)) return false;
    }
    IrValue r = op->results[0];
    for (const IrOp *u = body->first; u; u = u->next)
        for (uint32_t i = 0; i < u->noperands; i++)
            if (u->operands[i] == r && u->code != IR_OP_YIELD) return false;
    return true;
}

/* A's registers for band rm and K step ks: 4 words of W elements (W = 2 for f16 and
 * bf16, K step 16; W = 4 for f8, K step 32, the bytes in K order), the mma.sync A
 * fragment of m16n8k16 or m16n8k32 (cg_mma.c: elements (rm * KS + ks) * 4W + rW + j). */
static void a_words(Cg *c, CgVal a, uint32_t W, uint32_t rm, uint32_t KS, uint32_t ks, LLVMValueRef w[4])
{
    for (uint32_t r = 0; r < 4; r++) {
        uint32_t e = (rm * KS + ks) * 4 * W + W * r;
        LLVMValueRef v = LLVMGetUndef(LLVMVectorType(LLVMTypeOf(cg_at(a, e)), W));
        for (uint32_t j = 0; j < W; j++) v = LLVMBuildInsertElement(c->b, v, cg_at(a, e + j), cg_i32c(c, j), "");
        w[r] = LLVMBuildBitCast(c->b, v, cg_i32(c), "");
    }
}

/* The first row of this thread's warpgroup, 64 * (warp / 4), once per kernel in the
 * entry block and through shfl.sync.idx from lane 0: ptxas then knows it is the same
 * in every lane and keeps it and the A descriptors made from it in uniform registers
 * (computed from the thread index alone it is a vector value, and each wgmma waited
 * for an R2UR of its descriptor: 8 in the bf16 GEMM's loop on the H200, none in
 * Triton's, which takes its warp index the same way). */
static LLVMValueRef warpgroup_row(Cg *c)
{
    int32_t key[8] = {7, 64, 0, 0, 0, 0, 0, 0};
    LLVMValueRef v = cg_thread_value(c, key);
    if (v) return v;
    LLVMBuilderRef b = cg_thread_builder(c);
    LLVMValueRef row = cg_mul(b, cg_lshr(b, c->warp, cg_i32c(c, 2)), cg_i32c(c, 64));
    LLVMBuilderRef saved = c->b;
    c->b = b;
    v = cg_lane0(c, row);
    c->b = saved;
    return cg_thread_remember(c, key, v);
}

/* Counts in *waits the dot_waits of blk (and its regions) that read r; false if
 * another op reads it. */
static bool waits_only(const IrBlock *blk, IrValue r, int *waits)
{
    for (const IrOp *u = blk->first; u; u = u->next) {
        for (uint32_t i = 0; i < u->noperands; i++)
            if (u->operands[i] == r) {
                if (u->code != IR_OP_DOT_WAIT) return false;
                (*waits)++;
            }
        for (uint32_t g = 0; g < u->nregions; g++)
            if (!waits_only(&u->regions[g], r, waits)) return false;
    }
    return true;
}

/* Every use of the dot's result is a dot_wait (passes/rotate.c): its group stays in
 * flight, the waits retire it. */
static bool only_waited(Cg *c, const IrOp *op)
{
    int waits = 0;
    return waits_only(&c->f->body, op->results[0], &waits) && waits > 0;
}

/* A value a wgmma wait concerns: a version-3 accumulator on a wgmma target. */
static bool in_wgmma(Cg *c, IrValue v)
{
    const IrLayout *l = cg_type(c, v)->layout;
    return c->wgmma && l && l->kind == IR_LAYOUT_MMA && l->version == 3;
}

bool cg_wgmma_wait(Cg *c, const IrOp *op)
{
    uint32_t total = 0;
    for (uint32_t i = 0; i < op->noperands; i++)
        if (in_wgmma(c, op->operands[i])) total += cg_get(c, op->operands[i]).n;
    LLVMValueRef *regs = arena_alloc(c->arena, (total ? total : 1) * sizeof *regs);
    uint32_t at = 0;
    for (uint32_t i = 0; i < op->noperands; i++)
        if (in_wgmma(c, op->operands[i])) {
            CgVal v = cg_get(c, op->operands[i]);
            for (uint32_t q = 0; q < v.n; q++) regs[at++] = v.v[q];
        }
    char text[64];
    snprintf(text, sizeof text, "wgmma.wait_group.sync.aligned %d;", (int)op->attr.i);
    all_through(c, text, regs, total);
    at = 0;
    for (uint32_t i = 0; i < op->noperands; i++) {
        CgVal v = cg_get(c, op->operands[i]);
        if (in_wgmma(c, op->operands[i])) {   /* the tied registers, in the same order */
            CgVal w = cg_val_new(c, v.n);
            for (uint32_t q = 0; q < v.n; q++) w.v[q] = regs[at++];
            v = w;
        }
        cg_set(c, op->results[i], v);
    }
    return true;
}

/* An f32 constant +0.0 (a -0.0 start would give -0.0 where every product is +0.0). */
static bool positive_zero(LLVMValueRef v)
{
    LLVMBool lossy;
    if (!LLVMIsAConstantFP(v)) return false;
    double x = LLVMConstRealGetDouble(v, &lossy);
    return x == 0.0 && !signbit(x);
}

bool cg_wgmma_dot(Cg *c, const IrOp *op)
{
    const IrType *rt = cg_type(c, op->results[0]), *at = cg_type(c, op->operands[0]);
    const IrLayout *m = rt->layout;
    int32_t M = rt->shape[0], N = rt->shape[1], K = at->shape[1], W = m->wpc[0];
    uint32_t RM = (uint32_t)(M / (16 * W)), R = (uint32_t)N / 2;
    const IrLayout *al = at->layout;
    bool a_regs = al && al->kind == IR_LAYOUT_DOT_OPERAND;
    for (int i = a_regs ? 1 : 0; i < 2; i++) {
        const IrLayout *l = cg_type(c, op->operands[i])->layout;
        if (!l || l->kind != IR_LAYOUT_SHARED || !l->swizzle_bytes)
            return cg_error(c, op, "internal error: a wgmma dot's operand %d is not a view of an NVMMA stage", i);
    }
    Operand a = {0}, b = operand(c, op, 1);
    if (!a_regs) a = operand(c, op, 0);
    int32_t IK = m->instr[2];     /* 16, or 32 for f8 */
    uint32_t KS = (uint32_t)(K / IK);
    const char *in = at->elem == IR_BF16 ? "bf16" : at->elem == IR_F16 ? "f16" : at->elem == IR_F8E4M3 ? "e4m3" : "e5m2";
    if (IK == 32 && ((!a_regs && !k_major(&a)) || !k_major(&b)))
        return cg_error(c, op, "internal error: an f8 wgmma dot whose operands are not K-major (B a view, A a view or "
                        "registers)");
    CgVal acc = cg_get(c, op->operands[2]);
    CgVal out = cg_val_new(c, RM * R);
    bool fresh = out.n > 0;   /* zeros: the first step of K ignores them (scale-d 0) */
    for (uint32_t q = 0; q < out.n; q++) out.v[q] = cg_at(acc, q), fresh &= positive_zero(out.v[q]);
    /* nothing to copy into the registers: attention's S = Q K^T started from 32 moves of
     * zero an iteration (a thread of 128 x 64 with 8 warps) */
    for (uint32_t q = 0; fresh && q < out.n; q++) out.v[q] = LLVMGetUndef(LLVMFloatTypeInContext(c->ctx));
    LLVMValueRef row0 = warpgroup_row(c);
    LLVMValueRef *aw = NULL;
    if (a_regs) {   /* A's words and the accumulators are final before the fence */
        CgVal av = cg_get(c, op->operands[0]);
        uint32_t nw = RM * KS * 4, nv = nw + out.n;
        LLVMValueRef *v = arena_alloc(c->arena, nv * sizeof *v);
        for (uint32_t rm = 0; rm < RM; rm++)
            for (uint32_t ks = 0; ks < KS; ks++) a_words(c, av, (uint32_t)IK / 8, rm, KS, ks, v + (rm * KS + ks) * 4);
        for (uint32_t q = 0; q < out.n; q++) v[nw + q] = out.v[q];
        asm_through(c, "wgmma.fence.sync.aligned;", v, nv);
        aw = v;
        for (uint32_t q = 0; q < out.n; q++) out.v[q] = v[nw + q];
    } else {   /* the accumulators are final before the fence (a constant initial value,
                * once a loop of one trip is folded away, is otherwise copied into them
                * between the wgmmas: C7519); in tied groups of at most 128 */
        all_through(c, "wgmma.fence.sync.aligned;", out.v, out.n);
        if (!out.n) simple_asm(c, "wgmma.fence.sync.aligned;");
    }
    LLVMValueRef b_lo = descriptor_lo(c, &b, cg_i32c(c, 0));
    LLVMValueRef *a_lo = arena_alloc(c->arena, RM * sizeof *a_lo);
    for (uint32_t rm = 0; rm < RM && !a_regs; rm++)
        a_lo[rm] = descriptor_lo(c, &a, cg_add(c->b, row0, cg_i32c(c, (int64_t)rm * 16 * W)));
    for (uint32_t ks = 0; ks < KS; ks++)
        for (uint32_t rm = 0; rm < RM; rm++) {
            int32_t k0 = (int32_t)ks * IK;
            LLVMValueRef db = descriptor_at(c, &b, b_lo, k0);
            bool accumulate = ks > 0 || !fresh;
            if (a_regs) wgmma(c, N, IK, in, NULL, aw + (rm * KS + ks) * 4, db, 0, !k_major(&b), accumulate, out.v + rm * R);
            else
                wgmma(c, N, IK, in, descriptor_at(c, &a, a_lo[rm], k0), NULL, db, !k_major(&a), !k_major(&b), accumulate,
                      out.v + rm * R);
        }
    simple_asm(c, "wgmma.commit_group.sync.aligned;");
    if (only_waited(c, op)) {   /* the dot_waits retire the group (passes/rotate.c) */
        cg_set(c, op->results[0], out);
        return true;
    }
    int keep = in_flight_ok(c, op) ? 1 : 0;
    for (uint32_t rm = 0; rm < RM; rm++) wait_through(c, keep, out.v + rm * R, R);
    c->wgmma_in_flight |= keep;
    cg_set(c, op->results[0], out);
    return true;
}

CgVal cg_wgmma_hold(Cg *c, CgVal v)
{
    CgVal w = cg_val_new(c, v.n);
    for (uint32_t q = 0; q < v.n; q++) w.v[q] = v.v[q];
    all_through(c, "", w.v, w.n);
    return w;
}

/* The for loop right before an async_wait, past the ping-pong turns between them (`turn
 * pass` hands the tensor cores to the other warpgroup while this one's last group is
 * still in flight: a named barrier's arrive, which touches no accumulator); NULL if
 * there is none. */
const IrOp *cg_wgmma_loop_before(const IrOp *wait)
{
    const IrOp *p = wait->prev;
    while (p && p->code == IR_OP_TURN) p = p->prev;
    return p && p->code == IR_OP_FOR ? p : NULL;
}

void cg_wgmma_settle(Cg *c, const IrOp *wait)
{
    const IrOp *loop = cg_wgmma_loop_before(wait);
    c->wgmma_in_flight = false;
    simple_asm(c, "wgmma.wait_group.sync.aligned 0;");
    if (!loop) return;
    for (uint32_t i = 0; i < loop->nresults; i++) {
        const IrLayout *l = cg_type(c, loop->results[i])->layout;
        if (!l || l->kind != IR_LAYOUT_MMA || l->version != 3) continue;
        CgVal v = cg_get(c, loop->results[i]), w = cg_val_new(c, v.n);
        for (uint32_t q = 0; q < v.n; q++) w.v[q] = v.v[q];
        all_through(c, "wgmma.wait_group.sync.aligned 0;", w.v, w.n);
        cg_set(c, loop->results[i], w);
    }
}
