/* Tensor cores through mma.sync (sm_80 and later; the H200 runs it too): the layouts
 * of the accumulator and of the operands (ir/layout.h kinds mma and dot_operand, read
 * into CgLayout kinds MMA, DOT_A, DOT_B), and dot on m16n8k16.
 *
 * One m16n8k16 instruction per warp (PTX ISA, "Matrix Fragments for mma.m16n8k16";
 * g = lane / 4, t = lane % 4):
 *   C, D [16 x 8] f32   c_i at row g + 8*(i >= 2), column 2t + (i & 1)      (4 regs)
 *   A [16 x 16]         a_i at row g + 8*((i >> 1) & 1), column 2t + (i & 1) + 8*(i >= 4)
 *                       (8 halves, two per 32-bit register)
 *   B [16 x 8]          b_i at row (k) 2t + (i & 1) + 8*(i >= 2), column g    (4 halves)
 * A program's warps form a WM x WN grid (warp w: wm = w / WN, wn = w % WN); warp (wm,
 * wn) owns the instruction tiles at rows rm*16*WM + wm*16 and columns rn*8*WN + wn*8,
 * rm < RM, rn < RN. Element k of a thread, in order:
 *   accumulator  k = (rm * RN + rn) * 4 + i
 *   A            k = (rm * KS + ks) * 8 + i      (ks: the 16-wide step of K)
 *   B            k = (rn * KS + ks) * 4 + i
 * so each pair (2j, 2j+1) of an operand is one register of the instruction. A is held
 * by every warp of a row of the grid (copies across wn, owned at wn = 0), B by every
 * warp of a column (owned at wm = 0). */
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"

CgLayout cg_mma_layout(const IrType *t)
{
    const IrLayout *il = t->layout, *mma = il->kind == IR_LAYOUT_MMA ? il : il->parent;
    CgLayout l = {.rank = 2};
    l.shape[0] = t->shape[0];
    l.shape[1] = t->shape[1];
    l.wpc[0] = mma->wpc[0];
    l.wpc[1] = mma->wpc[1];
    l.spt[0] = l.spt[1] = 1;
    if (il->kind == IR_LAYOUT_MMA) {
        l.kind = CG_LAYOUT_MMA;
        l.reps[0] = t->shape[0] / (16 * l.wpc[0]);
        l.reps[1] = t->shape[1] / (8 * l.wpc[1]);
        l.spt[1] = 2;
    } else if (il->op == 0) {
        l.kind = CG_LAYOUT_DOT_A;
        l.reps[0] = t->shape[0] / (16 * l.wpc[0]);
        l.ks = t->shape[1] / 16;
    } else {
        l.kind = CG_LAYOUT_DOT_B;
        l.reps[1] = t->shape[1] / (8 * l.wpc[1]);
        l.ks = t->shape[0] / 16;
    }
    return l;
}

uint32_t cg_mma_elems(const CgLayout *l)
{
    switch (l->kind) {
    case CG_LAYOUT_MMA: return (uint32_t)(l->reps[0] * l->reps[1] * 4);
    case CG_LAYOUT_DOT_A: return (uint32_t)(l->reps[0] * l->ks * 8);
    default: return (uint32_t)(l->reps[1] * l->ks * 4);
    }
}

/* Where element k sits relative to its thread's first (the part that does not depend
 * on the lane or the warp). */
static void elem_offset(const CgLayout *l, uint32_t k, int64_t off[2])
{
    int64_t WM = l->wpc[0], WN = l->wpc[1];
    if (l->kind == CG_LAYOUT_MMA) {
        uint32_t i = k % 4, rn = (k / 4) % (uint32_t)l->reps[1], rm = k / 4 / (uint32_t)l->reps[1];
        off[0] = rm * 16 * WM + 8 * (i >> 1);
        off[1] = rn * 8 * WN + (i & 1);
    } else if (l->kind == CG_LAYOUT_DOT_A) {
        uint32_t i = k % 8, ks = (k / 8) % (uint32_t)l->ks, rm = k / 8 / (uint32_t)l->ks;
        off[0] = rm * 16 * WM + 8 * ((i >> 1) & 1);
        off[1] = ks * 16 + (i & 1) + 8 * (i >= 4);
    } else {
        uint32_t i = k % 4, ks = (k / 4) % (uint32_t)l->ks, rn = k / 4 / (uint32_t)l->ks;
        off[0] = ks * 16 + (i & 1) + 8 * (i >= 2);
        off[1] = rn * 8 * WN;
    }
}

/* A thread's first element: from g = lane / 4, t = lane % 4 and its warp's place. */
static void base_at(const CgLayout *l, int64_t lane, int64_t warp, int64_t base[2])
{
    int64_t g = lane / 4, t = lane % 4, wm = warp / l->wpc[1] % l->wpc[0], wn = warp % l->wpc[1];
    if (l->kind == CG_LAYOUT_DOT_B) {
        base[0] = 2 * t;
        base[1] = wn * 8 + g;
    } else {
        base[0] = wm * 16 + g;
        base[1] = (l->kind == CG_LAYOUT_MMA ? wn * 8 : 0) + 2 * t;
    }
}

bool cg_mma_coords_at(const CgLayout *l, uint32_t t, uint32_t k, int64_t coords[IR_MAX_RANK])
{
    int64_t base[2], off[2];
    base_at(l, t % 32, t / 32, base);
    elem_offset(l, k, off);
    coords[0] = base[0] + off[0];
    coords[1] = base[1] + off[1];
    uint32_t wm = t / 32 / (uint32_t)l->wpc[1] % (uint32_t)l->wpc[0], wn = t / 32 % (uint32_t)l->wpc[1];
    return l->kind == CG_LAYOUT_MMA || (l->kind == CG_LAYOUT_DOT_A ? wn == 0 : wm == 0);
}

void cg_mma_coords(Cg *c, const CgLayout *l, uint32_t k, LLVMValueRef coords[IR_MAX_RANK])
{
    LLVMValueRef g = LLVMBuildLShr(c->b, c->lane, cg_i32c(c, 2), ""), t = LLVMBuildAnd(c->b, c->lane, cg_i32c(c, 3), "");
    LLVMValueRef wn = LLVMBuildURem(c->b, c->warp, cg_i32c(c, l->wpc[1]), "");
    LLVMValueRef wm = LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, c->warp, cg_i32c(c, l->wpc[1]), ""), cg_i32c(c, l->wpc[0]), "");
    LLVMValueRef t2 = LLVMBuildShl(c->b, t, cg_i32c(c, 1), "");
    LLVMValueRef b0, b1;
    if (l->kind == CG_LAYOUT_DOT_B) {
        b0 = t2;
        b1 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, wn, cg_i32c(c, 8), ""), g, "");
    } else {
        b0 = LLVMBuildAdd(c->b, LLVMBuildMul(c->b, wm, cg_i32c(c, 16), ""), g, "");
        b1 = l->kind == CG_LAYOUT_MMA ? LLVMBuildAdd(c->b, LLVMBuildMul(c->b, wn, cg_i32c(c, 8), ""), t2, "") : t2;
    }
    int64_t off[2];
    elem_offset(l, k, off);
    coords[0] = LLVMBuildAdd(c->b, b0, cg_i32c(c, off[0]), "");
    coords[1] = LLVMBuildAdd(c->b, b1, cg_i32c(c, off[1]), "");
}

LLVMValueRef cg_mma_owner(Cg *c, const CgLayout *l)
{
    if (l->kind == CG_LAYOUT_MMA) return LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0);
    LLVMValueRef wn = LLVMBuildURem(c->b, c->warp, cg_i32c(c, l->wpc[1]), "");
    LLVMValueRef wm = LLVMBuildURem(c->b, LLVMBuildUDiv(c->b, c->warp, cg_i32c(c, l->wpc[1]), ""), cg_i32c(c, l->wpc[0]), "");
    return LLVMBuildICmp(c->b, LLVMIntEQ, l->kind == CG_LAYOUT_DOT_A ? wn : wm, cg_i32c(c, 0), "");
}

/* ---- dot ----------------------------------------------------------------------------------- */

/* Two 16-bit elements as one 32-bit register, x[0] in the low half. */
static LLVMValueRef pack(Cg *c, LLVMValueRef lo, LLVMValueRef hi)
{
    LLVMTypeRef v2 = LLVMVectorType(LLVMTypeOf(lo), 2);
    LLVMValueRef v = LLVMBuildInsertElement(c->b, LLVMGetUndef(v2), lo, cg_i32c(c, 0), "");
    v = LLVMBuildInsertElement(c->b, v, hi, cg_i32c(c, 1), "");
    return LLVMBuildBitCast(c->b, v, cg_i32(c), "");
}

/* d = a * b + d for one m16n8k16 tile: a 4 registers, b 2, d 4 floats. */
static void mma_16816(Cg *c, IrElem e, const LLVMValueRef a[4], const LLVMValueRef b[2], LLVMValueRef d[4])
{
    LLVMTypeRef f32 = LLVMFloatTypeInContext(c->ctx), i32 = cg_i32(c);
    LLVMTypeRef fields[4] = {f32, f32, f32, f32}, args_t[10];
    LLVMValueRef args[10];
    for (int i = 0; i < 4; i++) args[i] = a[i], args_t[i] = i32;
    for (int i = 0; i < 2; i++) args[4 + i] = b[i], args_t[4 + i] = i32;
    for (int i = 0; i < 4; i++) args[6 + i] = d[i], args_t[6 + i] = f32;
    LLVMTypeRef ret = LLVMStructTypeInContext(c->ctx, fields, 4, 0);
    LLVMTypeRef fty = LLVMFunctionType(ret, args_t, 10, 0);
    const char *text = e == IR_BF16
        ? "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};"
        : "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};";
    const char *cons = "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3";
    LLVMValueRef fn = LLVMGetInlineAsm(fty, (char *)text, strlen(text), (char *)cons, strlen(cons), 0, 0,
                                       LLVMInlineAsmDialectATT, 0);
    LLVMValueRef r = LLVMBuildCall2(c->b, fty, fn, args, 10, "");
    for (int i = 0; i < 4; i++) d[i] = LLVMBuildExtractValue(c->b, r, (unsigned)i, "");
}

bool cg_mma_dot(Cg *c, const IrOp *op)
{
    const IrType *at = cg_type(c, op->operands[0]), *rt = cg_type(c, op->results[0]);
    CgLayout la = cg_layout_of(at), lr = cg_layout_of(rt);
    /* operands read from shared memory come step by step of K, one step ahead */
    CgVal a = c->vals[op->operands[0]], b = c->vals[op->operands[1]], acc = cg_get(c, op->operands[2]);
    uint32_t RM = (uint32_t)lr.reps[0], RN = (uint32_t)lr.reps[1], KS = (uint32_t)la.ks;
    CgVal out = cg_val_new(c, RM * RN * 4);
    for (uint32_t k = 0; k < out.n; k++) out.v[k] = cg_at(acc, k);
    for (int i = 0; i < 2; i++) cg_shared_fill(c, op->operands[i], 0);
    for (uint32_t ks = 0; ks < KS; ks++)
        for (uint32_t rm = 0; rm < RM; rm++) {
            if (rm == 0)
                for (int i = 0; i < 2; i++) cg_shared_fill(c, op->operands[i], ks + 1);
            LLVMValueRef ar[4];
            for (uint32_t r = 0; r < 4; r++) {
                uint32_t k = (rm * KS + ks) * 8 + 2 * r;
                ar[r] = pack(c, cg_at(a, k), cg_at(a, k + 1));
            }
            for (uint32_t rn = 0; rn < RN; rn++) {
                LLVMValueRef br[2];
                for (uint32_t r = 0; r < 2; r++) {
                    uint32_t k = (rn * KS + ks) * 4 + 2 * r;
                    br[r] = pack(c, cg_at(b, k), cg_at(b, k + 1));
                }
                mma_16816(c, at->elem, ar, br, out.v + (rm * RN + rn) * 4);
            }
        }
    cg_set(c, op->results[0], out);
    return true;
}
