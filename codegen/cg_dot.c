/* dot(a[M,K], b[K,N], acc[M,N]) as plain FMAs, for the dots that the layout pass left
 * off the tensor cores (cg_mma.c): f32 without tf32, f64, shapes no mma.sync fits.
 *
 * a and b go to shared memory (as f32 for f32 and narrower floats, tf32-rounded when
 * asked; as the accumulator's integer type for integers), then each thread computes its
 * accumulator elements with one fma per k, k = 0..K-1 in order: the interpreter's
 * order and rounding, so f32/f16/bf16 results are bit-for-bit equal to it. */
#include "codegen/cg_internal.h"
#include "ir/layout.h"

/* tf32: 10 mantissa bits, round to nearest even (the interpreter's fp_round_tf32), by
 * adding 0xFFF plus the lowest kept bit and clearing the 13 dropped bits; a value
 * that rounds past the largest finite one becomes inf (as fp_round_tf32), inf stays
 * inf. A NaN becomes a quiet NaN with the dropped bits clear: mma.sync reads only
 * the top 19 bits, where a NaN whose payload lay below would read as inf.
 * Not cvt.rna.tf32.f32, which rounds ties away from zero. */
LLVMValueRef cg_round_tf32(Cg *c, LLVMValueRef x)
{
    LLVMValueRef b = LLVMBuildBitCast(c->b, x, cg_i32(c), "");
    LLVMValueRef lsb = cg_and(c->b, cg_lshr(c->b, b, cg_i32c(c, 13)), cg_i32c(c, 1));
    LLVMValueRef r = cg_add(c->b, b, cg_add(c->b, cg_i32c(c, 0xFFF), lsb));
    r = cg_and(c->b, r, cg_i32c(c, (int32_t)0xFFFFE000u));
    LLVMValueRef mag = cg_and(c->b, b, cg_i32c(c, 0x7FFFFFFF));
    LLVMValueRef nan = LLVMBuildICmp(c->b, LLVMIntUGT, mag, cg_i32c(c, 0x7F800000), "");
    LLVMValueRef qnan = cg_or(c->b, cg_and(c->b, b, cg_i32c(c, (int32_t)0xFFFFE000u)),
                              cg_i32c(c, 0x400000));
    return LLVMBuildBitCast(c->b, LLVMBuildSelect(c->b, nan, qnan, r, ""), LLVMFloatTypeInContext(c->ctx), "");
}

/* The type products run in: f32 for f32 and narrower floats, f64, or the result's integer. */
static IrElem compute_elem(IrElem in, IrElem out)
{
    if (!ir_elem_is_float(in)) return out;
    return in == IR_F64 ? IR_F64 : IR_F32;
}

static void stage(Cg *c, const IrOp *op, int which, IrElem ce, uint32_t byte_base)
{
    const IrType *t = cg_type(c, op->operands[which]);
    IrLayoutMap l = ir_layout_map(t);
    CgVal x = cg_get(c, op->operands[which]);
    bool tf32 = op->attr.i == IR_PREC_TF32 && t->elem == IR_F32;
    LLVMTypeRef ct = cg_elem_type(c, ce);
    for (uint32_t k = 0; k < x.n; k++) {
        LLVMValueRef co[IR_MAX_RANK], v = cg_convert_scalar(c, x.v[k], t->elem, ce);
        if (tf32) v = cg_round_tf32(c, v);
        cg_layout_coords(c, &l, k, co);
        LLVMBuildStore(c->b, v, cg_smem_ptr(c, cg_linear(c, &l, co), ct, byte_base));
    }
}

bool cg_dot(Cg *c, const IrOp *op)
{
    const IrType *at = cg_type(c, op->operands[0]), *rt = cg_type(c, op->results[0]);
    if (rt->layout->kind == IR_LAYOUT_MMA) return rt->layout->version == 3 ? cg_wgmma_dot(c, op) : cg_mma_dot(c, op);
    const IrType *acct = cg_type(c, op->operands[2]);
    int32_t K = at->shape[1], N = rt->shape[1];
    IrElem ce = compute_elem(at->elem, rt->elem);
    LLVMTypeRef ct = cg_elem_type(c, ce);
    uint32_t bbase = (uint32_t)(ir_type_numel(at) * ir_elem_bytes(ce));
    cg_barrier(c);
    stage(c, op, 0, ce, 0);
    stage(c, op, 1, ce, bbase);
    cg_barrier(c);
    IrLayoutMap l = ir_layout_map(rt);
    uint32_t n = cg_layout_elems(&l);
    CgVal acc = cg_get(c, op->operands[2]);
    LLVMValueRef *init = arena_alloc(c->arena, n * sizeof *init), *next = arena_alloc(c->arena, n * sizeof *next);
    LLVMValueRef *arow = arena_alloc(c->arena, n * sizeof *arow), *bcol = arena_alloc(c->arena, n * sizeof *bcol);
    for (uint32_t k = 0; k < n; k++) {
        LLVMValueRef co[IR_MAX_RANK];
        cg_layout_coords(c, &l, k, co);
        arow[k] = cg_mul(c->b, co[0], cg_i32c(c, K));
        bcol[k] = co[1];
        init[k] = cg_convert_scalar(c, cg_at(acc, k), acct->elem, ce);
    }
    CgLoop kl;
    cg_loop_begin(c, &kl, cg_i32c(c, 0), cg_i32c(c, K), init, n);
    LLVMValueRef brow = cg_mul(c->b, kl.i, cg_i32c(c, N));
    for (uint32_t k = 0; k < n; k++) {
        LLVMValueRef av = LLVMBuildLoad2(c->b, ct, cg_smem_ptr(c, cg_add(c->b, arow[k], kl.i), ct, 0), "");
        LLVMValueRef bv = LLVMBuildLoad2(c->b, ct, cg_smem_ptr(c, cg_add(c->b, brow, bcol[k]), ct, bbase), "");
        if (ir_elem_is_float(ce)) {
            LLVMValueRef args[3] = {av, bv, kl.carried[k]};
            next[k] = cg_intrinsic(c, "llvm.fma", &ct, 1, args, 3);
        } else {
            next[k] = cg_add(c->b, cg_mul(c->b, av, bv), kl.carried[k]);
        }
    }
    cg_loop_end(c, &kl, cg_i32c(c, 1), next);
    CgVal out = cg_val_new(c, n);
    for (uint32_t k = 0; k < n; k++) out.v[k] = cg_convert_scalar(c, kl.carried[k], ce, rt->elem);
    cg_set(c, op->results[0], out);
    return true;
}
