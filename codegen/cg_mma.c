/* Tensor cores through mma.sync (sm_80 and later; the H200 runs it too): the layouts
 * of the accumulator and of the operands (ir/layout.h kinds mma and dot_operand, read
 * into IrLayoutMap kinds MMA, DOT_A, DOT_B), and dot on m16n8k8 (tf32), m16n8k16 (f16,
 * bf16, f8 converted to f16) and m16n8k32 (i8, u8).
 *
 * One m16n8kK instruction per warp takes 4 registers of A, 2 of B and 4 of C, a
 * register holding W = K / 8 consecutive K elements (kwidth: 1 tf32, 2 16-bit, 4
 * 8-bit). PTX ISA, "Matrix Fragments for mma.m16n8k8 / k16 / k32" (g = lane / 4,
 * t = lane % 4; register r, element j < W of it):
 *   C, D [16 x 8]       c_i at row g + 8*(i >= 2), column 2t + (i & 1)       (f32 or s32)
 *   A [16 x K]          a_(r,j) at row g + 8*(r & 1), column W*t + j + 4W*(r >> 1)
 *   B [K x 8]           b_(r,j) at row (k) W*t + j + 4W*r, column g
 * A program's warps form a WM x WN grid (warp w: wm = w / WN, wn = w % WN); warp (wm,
 * wn) owns the instruction tiles at rows rm*16*WM + wm*16 and columns rn*8*WN + wn*8,
 * rm < RM, rn < RN. Element k of a thread, in order:
 *   accumulator  k = (rm * RN + rn) * 4 + i
 *   A            k = (rm * KS + ks) * 4W + r*W + j      (ks: the K-wide step of K)
 *   B            k = (rn * KS + ks) * 2W + r*W + j
 * so each run of W elements of an operand is one register of the instruction (for
 * W = 2, A's element (rm*KS + ks)*8 + i and B's (rn*KS + ks)*4 + i, as ldmatrix loads
 * them). A is held by every warp of a row of the grid (copies across wn, owned at
 * wn = 0), B by every warp of a column (owned at wm = 0). */
#include <stdio.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"

uint32_t cg_mma_elems(const IrLayoutMap *l)
{
    switch (l->kind) {
    case IR_LMAP_MMA: return (uint32_t)(l->reps[0] * l->reps[1] * 4);
    case IR_LMAP_DOT_A: return (uint32_t)(l->reps[0] * l->ks * 4 * l->kwidth);
    default: return (uint32_t)(l->reps[1] * l->ks * 2 * l->kwidth);
    }
}

/* Where element k sits relative to its thread's first (the part that does not depend
 * on the lane or the warp). */
static void elem_offset(const IrLayoutMap *l, uint32_t k, int64_t off[2])
{
    int64_t WM = l->wpc[0], WN = l->wpc[1], W = l->kwidth;
    if (l->kind == IR_LMAP_MMA) {
        uint32_t i = k % 4, rn = (k / 4) % (uint32_t)l->reps[1], rm = k / 4 / (uint32_t)l->reps[1];
        off[0] = rm * 16 * WM + 8 * (i >> 1);
        off[1] = rn * 8 * WN + (i & 1);
    } else if (l->kind == IR_LMAP_DOT_A) {
        uint32_t per = 4 * (uint32_t)W, i = k % per, ks = (k / per) % (uint32_t)l->ks, rm = k / per / (uint32_t)l->ks;
        int64_t r = i / W, j = i % W;
        off[0] = rm * 16 * WM + 8 * (r & 1);
        off[1] = ks * 8 * W + j + 4 * W * (r >> 1);
    } else {
        uint32_t per = 2 * (uint32_t)W, i = k % per, ks = (k / per) % (uint32_t)l->ks, rn = k / per / (uint32_t)l->ks;
        int64_t r = i / W, j = i % W;
        off[0] = ks * 8 * W + j + 4 * W * r;
        off[1] = rn * 8 * WN;
    }
}

/* A thread's first element: from g = lane / 4, t = lane % 4 and its warp's place. */
static void base_at(const IrLayoutMap *l, int64_t lane, int64_t warp, int64_t base[2])
{
    int64_t g = lane / 4, t = lane % 4, wm = warp / l->wpc[1] % l->wpc[0], wn = warp % l->wpc[1];
    if (l->kind == IR_LMAP_DOT_B) {
        base[0] = l->kwidth * t;
        base[1] = wn * 8 + g;
    } else {
        base[0] = wm * 16 + g;
        base[1] = l->kind == IR_LMAP_MMA ? wn * 8 + 2 * t : l->kwidth * t;
    }
}

bool cg_mma_coords_at(const IrLayoutMap *l, uint32_t t, uint32_t k, int64_t coords[IR_MAX_RANK])
{
    int64_t base[2], off[2];
    base_at(l, t % 32, t / 32, base);
    elem_offset(l, k, off);
    coords[0] = base[0] + off[0];
    coords[1] = base[1] + off[1];
    uint32_t wm = t / 32 / (uint32_t)l->wpc[1] % (uint32_t)l->wpc[0], wn = t / 32 % (uint32_t)l->wpc[1];
    return l->kind == IR_LMAP_MMA || (l->kind == IR_LMAP_DOT_A ? wn == 0 : wm == 0);
}

/* base_at in LLVM values. */
void cg_mma_coords(Cg *c, const IrLayoutMap *l, uint32_t k, LLVMValueRef coords[IR_MAX_RANK])
{
    /* the thread's base, once per kernel and layout (cg_thread_value) */
    int32_t key0[8] = {2, (int32_t)l->kind, l->wpc[0], l->wpc[1], l->kwidth, 0, 0, 0}, key1[8];
    memcpy(key1, key0, sizeof key1);
    key1[5] = 1;
    LLVMValueRef b0 = cg_thread_value(c, key0), b1 = cg_thread_value(c, key1);
    if (!b0 || !b1) {
        LLVMBuilderRef b = cg_thread_builder(c);
        LLVMValueRef g = cg_lshr(b, c->lane, cg_i32c(c, 2)), t = cg_and(b, c->lane, cg_i32c(c, 3));
        LLVMValueRef wn = cg_urem(b, c->warp, cg_i32c(c, l->wpc[1]));
        LLVMValueRef wm = cg_urem(b, cg_udiv(b, c->warp, cg_i32c(c, l->wpc[1])), cg_i32c(c, l->wpc[0]));
        LLVMValueRef tw = cg_mul(b, t, cg_i32c(c, l->kind == IR_LMAP_MMA ? 2 : l->kwidth));
        if (l->kind == IR_LMAP_DOT_B) {
            b0 = tw;
            b1 = cg_add(b, cg_mul(b, wn, cg_i32c(c, 8)), g);
        } else {
            b0 = cg_add(b, cg_mul(b, wm, cg_i32c(c, 16)), g);
            b1 = l->kind == IR_LMAP_MMA ? cg_add(b, cg_mul(b, wn, cg_i32c(c, 8)), tw) : tw;
        }
        cg_thread_remember(c, key0, b0);
        cg_thread_remember(c, key1, b1);
    }
    int64_t off[2];
    elem_offset(l, k, off);
    coords[0] = cg_add(c->b, b0, cg_i32c(c, off[0]));
    coords[1] = cg_add(c->b, b1, cg_i32c(c, off[1]));
}

LLVMValueRef cg_mma_owner(Cg *c, const IrLayoutMap *l)
{
    if (l->kind == IR_LMAP_MMA) return LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0);
    LLVMValueRef wn = cg_urem(c->b, c->warp, cg_i32c(c, l->wpc[1]));
    LLVMValueRef wm = cg_urem(c->b, cg_udiv(c->b, c->warp, cg_i32c(c, l->wpc[1])), cg_i32c(c, l->wpc[0]));
    return LLVMBuildICmp(c->b, LLVMIntEQ, l->kind == IR_LMAP_DOT_A ? wn : wm, cg_i32c(c, 0), "");
}

/* ---- dot ----------------------------------------------------------------------------------- */

/* The instruction of a dot, by its input element type. */
typedef struct MmaKind {
    const char *shape_types;     /* after "mma.sync.aligned." */
    IrElem reg_elem;             /* what its registers hold: f8 inputs go in as f16 */
    bool int_acc;                /* s32 accumulators ("=r"), else f32 ("=f") */
} MmaKind;

static MmaKind mma_kind(IrElem in)
{
    switch (in) {
    case IR_BF16: return (MmaKind){"m16n8k16.row.col.f32.bf16.bf16.f32", IR_BF16, false};
    case IR_F32: return (MmaKind){"m16n8k8.row.col.f32.tf32.tf32.f32", IR_F32, false};
    case IR_I8: return (MmaKind){"m16n8k32.row.col.s32.s8.s8.s32", IR_I8, true};
    case IR_U8: return (MmaKind){"m16n8k32.row.col.s32.u8.u8.s32", IR_U8, true};
    default: return (MmaKind){"m16n8k16.row.col.f32.f16.f16.f32", IR_F16, false};   /* f16, f8 */
    }
}

/* W register elements x[0..W) as one 32-bit register, x[0] in the low bits. */
static LLVMValueRef pack(Cg *c, const LLVMValueRef *x, int W)
{
    if (W == 1) return LLVMBuildBitCast(c->b, x[0], cg_i32(c), "");
    LLVMValueRef v = LLVMGetUndef(LLVMVectorType(LLVMTypeOf(x[0]), (unsigned)W));
    for (int j = 0; j < W; j++) v = LLVMBuildInsertElement(c->b, v, x[j], cg_i32c(c, j), "");
    return LLVMBuildBitCast(c->b, v, cg_i32(c), "");
}

/* An operand element as its instruction reads it: f8 as f16 (exact), f32 rounded to
 * tf32 as the interpreter rounds it (cg_round_tf32), others as they are. */
static LLVMValueRef reg_elem(Cg *c, LLVMValueRef x, IrElem in, const MmaKind *k)
{
    if (in == IR_F32) return cg_round_tf32(c, x);
    return cg_convert_scalar(c, x, in, k->reg_elem);
}

/* An operand's registers, in element order (register q holds elements q*W..q*W+W-1),
 * each built at its first use: the f16/bf16 PTX stays what it was before kwidth was
 * more than 2. */
typedef struct Operand {
    CgVal x;
    IrElem in;
    int W;
    LLVMValueRef *regs;          /* NULL until built */
} Operand;

static Operand operand(Cg *c, CgVal x, const IrLayoutMap *l, IrElem in)
{
    uint32_t n = cg_mma_elems(l) / (uint32_t)l->kwidth;
    Operand o = {x, in, l->kwidth, arena_alloc(c->arena, n * sizeof *o.regs)};
    memset(o.regs, 0, n * sizeof *o.regs);
    return o;
}

static LLVMValueRef operand_reg(Cg *c, Operand *o, uint32_t q, const MmaKind *k)
{
    if (o->regs[q]) return o->regs[q];
    LLVMValueRef e[4] = {0};
    for (int j = 0; j < o->W; j++) e[j] = reg_elem(c, cg_at(o->x, q * (uint32_t)o->W + (uint32_t)j), o->in, k);
    return o->regs[q] = pack(c, e, o->W);
}

/* d = a * b + d for one m16n8kK tile: a 4 registers, b 2, d 4 f32 or i32. */
static void mma_sync(Cg *c, const MmaKind *k, const LLVMValueRef a[4], const LLVMValueRef b[2], LLVMValueRef d[4])
{
    LLVMTypeRef at = k->int_acc ? cg_i32(c) : LLVMFloatTypeInContext(c->ctx), i32 = cg_i32(c);
    LLVMTypeRef fields[4] = {at, at, at, at}, args_t[10];
    LLVMValueRef args[10];
    for (int i = 0; i < 4; i++) args[i] = a[i], args_t[i] = i32;
    for (int i = 0; i < 2; i++) args[4 + i] = b[i], args_t[4 + i] = i32;
    for (int i = 0; i < 4; i++) args[6 + i] = d[i], args_t[6 + i] = at;
    LLVMTypeRef ret = LLVMStructTypeInContext(c->ctx, fields, 4, 0);
    LLVMTypeRef fty = LLVMFunctionType(ret, args_t, 10, 0);
    char text[192];
    snprintf(text, sizeof text, "mma.sync.aligned.%s {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
             k->shape_types);
    const char *cons = k->int_acc ? "=r,=r,=r,=r,r,r,r,r,r,r,0,1,2,3" : "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3";
    LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), (char *)cons, strlen(cons), 0, 0,
                                       LLVMInlineAsmDialectATT, 0);
    LLVMValueRef r = LLVMBuildCall2(c->b, fty, fn, args, 10, "");
    cg_convergent(c, r);
    for (int i = 0; i < 4; i++) d[i] = LLVMBuildExtractValue(c->b, r, (unsigned)i, "");
}

/* Every instruction tile of the accumulator, for each K step: A's registers
 * (rm*KS + ks)*4 + r, B's (rn*KS + ks)*2 + r (the element order above, W at a time).
 * Integer sums wrap, as the interpreter's (no .satfinite). */
bool cg_mma_dot(Cg *c, const IrOp *op)
{
    const IrType *at = cg_type(c, op->operands[0]), *rt = cg_type(c, op->results[0]);
    IrLayoutMap la = ir_layout_map(at), lb = ir_layout_map(cg_type(c, op->operands[1])), lr = ir_layout_map(rt);
    CgVal acc = cg_get(c, op->operands[2]);
    uint32_t RM = (uint32_t)lr.reps[0], RN = (uint32_t)lr.reps[1], KS = (uint32_t)la.ks;
    MmaKind k = mma_kind(at->elem);
    /* operands read from shared memory arrive step by step of K, one step ahead
     * (cg_shared_fill); their element arrays fill in place */
    Operand a = operand(c, c->vals[op->operands[0]], &la, at->elem), b = operand(c, c->vals[op->operands[1]], &lb, at->elem);
    CgVal out = cg_val_new(c, RM * RN * 4);
    for (uint32_t q = 0; q < out.n; q++) out.v[q] = cg_at(acc, q);
    for (int i = 0; i < 2; i++) cg_shared_fill(c, op->operands[i], 0);
    for (uint32_t ks = 0; ks < KS; ks++)
        for (uint32_t rm = 0; rm < RM; rm++) {
            if (rm == 0 && ks + 1 == KS) cg_prefetch_next(c, op);
            if (rm == 0)
                for (int i = 0; i < 2; i++) cg_shared_fill(c, op->operands[i], ks + 1);
            LLVMValueRef ar[4], br[2];
            for (uint32_t r = 0; r < 4; r++) ar[r] = operand_reg(c, &a, (rm * KS + ks) * 4 + r, &k);
            for (uint32_t rn = 0; rn < RN; rn++) {
                for (uint32_t r = 0; r < 2; r++) br[r] = operand_reg(c, &b, (rn * KS + ks) * 2 + r, &k);
                mma_sync(c, &k, ar, br, out.v + (rm * RN + rn) * 4);
            }
        }
    cg_set(c, op->results[0], out);
    return true;
}
