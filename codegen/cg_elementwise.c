/* Element-wise ops: constants, ids, arange, conversions, arithmetic, comparisons,
 * select, fma, addptr. Each result element is computed from the operand elements of
 * the same local index (all operands of an element-wise op share the result's shape,
 * hence its layout); a scalar operand stands for every element.
 *
 * Exactness, as the interpreter (ir/interp_ops.c) defines it: f16/bf16 arithmetic runs
 * in f32 and is rounded once (the double rounding is innocuous: 24 >= 2*11 + 2), float
 * division and sqrt are correctly rounded (no fast-math flags anywhere), integer
 * division truncates and INT_MIN / -1 wraps, shifts past the width give 0 (or the sign
 * fill), float-to-int conversions saturate with NaN -> 0 (llvm.fpto*i.sat). Integer
 * division by zero is undefined on the GPU (LANGUAGE.md); it is kept free of LLVM
 * undefined behaviour by dividing by 1 instead. */
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/target.h"
#include "ir/interp.h"

static bool is_f8(IrElem e) { return e == IR_F8E4M3 || e == IR_F8E5M2; }
static bool is_narrow_float(IrElem e) { return e == IR_F16 || e == IR_BF16 || is_f8(e); }

/* ---- f8 (held as its byte): decoding is exact; encoding rounds once, to nearest
 * even, from f32, as ir/fp.c does (overflow: inf for e5m2, NaN for e4m3fn). -------- */

typedef LLVMValueRef V;

static V i32c(Cg *c, uint32_t v) { return LLVMConstInt(cg_i32(c), v, 0); }
static V f32_of_bits(Cg *c, V b) { return LLVMBuildBitCast(c->b, b, LLVMFloatTypeInContext(c->ctx), ""); }
static V bits_of_f32(Cg *c, V f) { return LLVMBuildBitCast(c->b, f, cg_i32(c), ""); }

/* 2^k as an f32, for k in [-126, 127]. */
static V pow2f(Cg *c, V k) { return f32_of_bits(c, LLVMBuildShl(c->b, LLVMBuildAdd(c->b, k, i32c(c, 127), ""), i32c(c, 23), "")); }

static V f8_decode(Cg *c, V b, IrElem e)
{
    V w = LLVMBuildZExt(c->b, b, cg_i32(c), "");
    if (e == IR_F8E5M2) {             /* the top byte of an f16 */
        V h = LLVMBuildTrunc(c->b, LLVMBuildShl(c->b, w, i32c(c, 8), ""), LLVMInt16TypeInContext(c->ctx), "");
        return LLVMBuildFPExt(c->b, LLVMBuildBitCast(c->b, h, LLVMHalfTypeInContext(c->ctx), ""),
                              LLVMFloatTypeInContext(c->ctx), "");
    }
    V sign = LLVMBuildShl(c->b, LLVMBuildLShr(c->b, w, i32c(c, 7), ""), i32c(c, 31), "");
    V ex = LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, w, i32c(c, 3), ""), i32c(c, 15), "");
    V mant = LLVMBuildAnd(c->b, w, i32c(c, 7), "");
    V normal = LLVMBuildOr(c->b, LLVMBuildShl(c->b, LLVMBuildAdd(c->b, ex, i32c(c, 120), ""), i32c(c, 23), ""),
                           LLVMBuildShl(c->b, mant, i32c(c, 20), ""), "");
    V sub = bits_of_f32(c, LLVMBuildFMul(c->b, LLVMBuildUIToFP(c->b, mant, LLVMFloatTypeInContext(c->ctx), ""),
                                         cg_f32c(c, 0x1p-9), ""));
    V mag = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntEQ, ex, i32c(c, 0), ""), sub, normal, "");
    V nan = LLVMBuildICmp(c->b, LLVMIntEQ, LLVMBuildAnd(c->b, w, i32c(c, 0x7F), ""), i32c(c, 0x7F), "");
    mag = LLVMBuildSelect(c->b, nan, i32c(c, 0x7FC00000), mag, "");
    return f32_of_bits(c, LLVMBuildOr(c->b, sign, mag, ""));
}

static V f8_encode(Cg *c, V f, IrElem e)
{
    int mbits = e == IR_F8E5M2 ? 2 : 3, bias = e == IR_F8E5M2 ? 15 : 7;
    double maxv = e == IR_F8E5M2 ? 57344.0 : 448.0;
    V bits = bits_of_f32(c, f);
    V sign = LLVMBuildAnd(c->b, LLVMBuildLShr(c->b, bits, i32c(c, 24), ""), i32c(c, 0x80), "");
    LLVMTypeRef ft = LLVMFloatTypeInContext(c->ctx);
    V a = cg_intrinsic(c, "llvm.fabs", &ft, 1, &f, 1);
    V big = LLVMBuildFCmp(c->b, LLVMRealUGT, a, cg_f32c(c, 2 * maxv), "");   /* inf, NaN: kept finite */
    a = LLVMBuildSelect(c->b, big, cg_f32c(c, 2 * maxv), a, "");
    V ex = LLVMBuildSub(c->b, LLVMBuildLShr(c->b, bits_of_f32(c, a), i32c(c, 23), ""), i32c(c, 127), "");
    V q = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, ex, i32c(c, 1 - bias), ""), i32c(c, (uint32_t)(1 - bias)), ex, "");
    V r = LLVMBuildFMul(c->b, a, pow2f(c, LLVMBuildSub(c->b, i32c(c, (uint32_t)mbits), q, "")), "");
    r = cg_intrinsic(c, "llvm.rint", &ft, 1, &r, 1);            /* units: the last mantissa bit */
    V rounded = LLVMBuildFMul(c->b, r, pow2f(c, LLVMBuildSub(c->b, q, i32c(c, (uint32_t)mbits), "")), "");
    V ir = LLVMBuildFPToUI(c->b, r, cg_i32(c), "");             /* (1 << mbits | mant) or a subnormal */
    V carry = LLVMBuildICmp(c->b, LLVMIntUGE, ir, i32c(c, 2u << mbits), "");   /* rounded up a binade */
    q = LLVMBuildAdd(c->b, q, LLVMBuildZExt(c->b, carry, cg_i32(c), ""), "");
    ir = LLVMBuildSelect(c->b, carry, LLVMBuildLShr(c->b, ir, i32c(c, 1), ""), ir, "");
    V isnorm = LLVMBuildICmp(c->b, LLVMIntUGE, ir, i32c(c, 1u << mbits), "");
    V field = LLVMBuildSelect(c->b, isnorm, LLVMBuildAdd(c->b, q, i32c(c, (uint32_t)bias), ""), i32c(c, 0), "");
    V code = LLVMBuildOr(c->b, LLVMBuildShl(c->b, field, i32c(c, (uint32_t)mbits), ""),
                         LLVMBuildAnd(c->b, ir, i32c(c, (1u << mbits) - 1), ""), "");
    V over = LLVMBuildFCmp(c->b, LLVMRealOGT, rounded, cg_f32c(c, maxv), "");
    V special = e == IR_F8E5M2 ? i32c(c, 0x7C) : i32c(c, 0x7F);
    code = LLVMBuildSelect(c->b, over, special, code, "");
    V nanc = e == IR_F8E5M2 ? LLVMBuildOr(c->b, i32c(c, 0x7C), LLVMBuildSelect(c->b,
                 LLVMBuildICmp(c->b, LLVMIntEQ, LLVMBuildAnd(c->b, bits, i32c(c, 0x600000), ""), i32c(c, 0), ""),
                 i32c(c, 2), LLVMBuildLShr(c->b, LLVMBuildAnd(c->b, bits, i32c(c, 0x600000), ""), i32c(c, 21), ""), ""), "")
                            : i32c(c, 0x7F);
    code = LLVMBuildSelect(c->b, LLVMBuildFCmp(c->b, LLVMRealUNO, f, f, ""), nanc, code, "");
    return LLVMBuildTrunc(c->b, LLVMBuildOr(c->b, code, sign, ""), LLVMInt8TypeInContext(c->ctx), "");
}

LLVMValueRef cg_to_f32(Cg *c, LLVMValueRef x, IrElem e)
{
    if (is_f8(e)) return f8_decode(c, x, e);
    return is_narrow_float(e) ? LLVMBuildFPExt(c->b, x, LLVMFloatTypeInContext(c->ctx), "") : x;
}

LLVMValueRef cg_from_f32(Cg *c, LLVMValueRef x, IrElem e)
{
    if (is_f8(e)) return f8_encode(c, x, e);
    return is_narrow_float(e) ? LLVMBuildFPTrunc(c->b, x, cg_elem_type(c, e), "") : x;
}

/* ---- conversions ---------------------------------------------------------------------- */

static LLVMValueRef float_to_float(Cg *c, LLVMValueRef x, IrElem from, IrElem to)
{
    int fb = ir_elem_bits(from), tb = ir_elem_bits(to);
    if (from == to) return x;
    if (fb == 16 && tb == 16) x = LLVMBuildFPExt(c->b, x, LLVMFloatTypeInContext(c->ctx), "");   /* f16 <-> bf16 */
    if (tb > fb) return LLVMBuildFPExt(c->b, x, cg_elem_type(c, to), "");
    return LLVMBuildFPTrunc(c->b, x, cg_elem_type(c, to), "");
}

static LLVMValueRef float_to_int(Cg *c, LLVMValueRef x, IrElem from, IrElem to)
{
    x = cg_to_f32(c, x, from);
    LLVMTypeRef tys[2] = {cg_elem_type(c, to), LLVMTypeOf(x)};
    return cg_intrinsic(c, ir_elem_is_signed(to) ? "llvm.fptosi.sat" : "llvm.fptoui.sat", tys, 2, &x, 1);
}

/* Integers of up to 32 bits are exact in f64, so the one rounding is f64 -> target. */
static LLVMValueRef int_to_float(Cg *c, LLVMValueRef x, IrElem from, IrElem to)
{
    bool s = ir_elem_is_signed(from);
    LLVMTypeRef via = is_narrow_float(to) && ir_elem_bits(from) <= 32 ? LLVMDoubleTypeInContext(c->ctx) : cg_elem_type(c, to);
    LLVMValueRef r = s ? LLVMBuildSIToFP(c->b, x, via, "") : LLVMBuildUIToFP(c->b, x, via, "");
    return via == cg_elem_type(c, to) ? r : LLVMBuildFPTrunc(c->b, r, cg_elem_type(c, to), "");
}

static LLVMValueRef int_to_int(Cg *c, LLVMValueRef x, IrElem from, IrElem to)
{
    int fb = ir_elem_bits(from), tb = ir_elem_bits(to);
    LLVMTypeRef t = cg_elem_type(c, to);
    if (fb == tb) return x;
    if (tb < fb) return LLVMBuildTrunc(c->b, x, t, "");
    return ir_elem_is_signed(from) ? LLVMBuildSExt(c->b, x, t, "") : LLVMBuildZExt(c->b, x, t, "");
}

LLVMValueRef cg_convert_scalar(Cg *c, LLVMValueRef x, IrElem from, IrElem to)
{
    bool ff = ir_elem_is_float(from), tf = ir_elem_is_float(to);
    if (from == to || (from == IR_PTR && to == IR_PTR)) return x;
    if (is_f8(from)) return cg_convert_scalar(c, cg_to_f32(c, x, from), IR_F32, to);   /* exact */
    if (is_f8(to)) {
        if (!ff) x = cg_convert_scalar(c, x, from, IR_F64);   /* integers: exact up to 53 bits */
        if (from == IR_F64 || !ff) x = LLVMBuildFPTrunc(c->b, x, LLVMFloatTypeInContext(c->ctx), "");
        return cg_from_f32(c, cg_to_f32(c, x, ff && from != IR_F64 ? from : IR_F32), to);
    }
    if (to == IR_I1) {
        if (ff) return LLVMBuildFCmp(c->b, LLVMRealUNE, x, LLVMConstNull(LLVMTypeOf(x)), "");
        return LLVMBuildICmp(c->b, LLVMIntNE, x, LLVMConstNull(LLVMTypeOf(x)), "");
    }
    if (ff && tf) return float_to_float(c, x, from, to);
    if (ff) return float_to_int(c, x, from, to);
    if (tf) return int_to_float(c, x, from, to);
    return int_to_int(c, x, from, to);
}

/* An inline-asm conversion of the f32 pair (lo, hi) into one register of type ret (PTX
 * names the high half first), marked memory(none), nounwind, willreturn: the optimizer
 * may merge or drop it as any pure op. */
static LLVMValueRef pure_pair_asm(Cg *c, const char *text, const char *constraints, LLVMTypeRef ret, V lo, V hi)
{
    LLVMTypeRef ft = LLVMFloatTypeInContext(c->ctx), tys[2] = {ft, ft};
    LLVMTypeRef fty = LLVMFunctionType(ret, tys, 2, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), constraints, strlen(constraints), 0, 0,
                                       LLVMInlineAsmDialectATT, 0);
    LLVMValueRef args[2] = {hi, lo};
    LLVMValueRef w = LLVMBuildCall2(c->b, fty, fn, args, 2, "");
    const char *names[3] = {"memory", "nounwind", "willreturn"};    /* memory(none): may be merged or dropped */
    for (int i = 0; i < 3; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(names[i], strlen(names[i]));
        LLVMAddCallSiteAttribute(w, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, 0));
    }
    return w;
}

/* Two f32 -> one word of two f16/bf16, lo in the low half: cvt.rn.{bf16,f16}x2.f32
 * (sm_80+) is one instruction where two scalar cvts and a mov packing them were (LLVM 19
 * splits fptrunc <2 x float> that way, hence inline asm). It rounds as the scalar
 * cvt.rn: to nearest even, NaN stays NaN, -0 stays -0, f16 overflows to inf. PTX names
 * the high half first. Returned as <2 x bf16/f16>, so that a vector store takes the
 * word as it is. */
static V pack_pair(Cg *c, V lo, V hi, IrElem to)
{
    const char *text = to == IR_BF16 ? "cvt.rn.bf16x2.f32 $0, $1, $2;" : "cvt.rn.f16x2.f32 $0, $1, $2;";
    LLVMValueRef w = pure_pair_asm(c, text, "=r,f,f", cg_i32(c), lo, hi);
    return LLVMBuildBitCast(c->b, w, LLVMVectorType(cg_elem_type(c, to), 2), "");
}

bool cg_converts_in_pairs(IrElem from, IrElem to) { return from == IR_F32 && (to == IR_BF16 || to == IR_F16); }

/* Two f32 -> two e4m3 bytes by cvt.rn.satfinite.e4m3x2.f32 (sm_89+; one instruction
 * where f8_encode takes some twenty a byte: attention's P in f8). It rounds to nearest
 * even as f8_encode does, but saturates: past e4m3's largest finite value the language
 * gives NaN (e4m3fn, ir/fp.c), so |x| > 464 (the midpoint above 448, which rounds to
 * 448) and NaN become sign | 0x7f here as there. */
static void pack_pair_e4m3(Cg *c, V lo, V hi, V out[2])
{
    LLVMTypeRef ft = LLVMFloatTypeInContext(c->ctx), i16 = LLVMInt16TypeInContext(c->ctx), i8 = LLVMInt8TypeInContext(c->ctx);
    LLVMValueRef w = pure_pair_asm(c, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", i16, lo, hi);
    V x[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        V byte = LLVMBuildTrunc(c->b, i ? LLVMBuildLShr(c->b, w, LLVMConstInt(i16, 8, 0), "") : w, i8, "");
        V a = cg_intrinsic(c, "llvm.fabs", &ft, 1, &x[i], 1);
        V bad = LLVMBuildFCmp(c->b, LLVMRealUGT, a, cg_f32c(c, 464.0), "");
        V top = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, bits_of_f32(c, x[i]), i32c(c, 24), ""), i8, "");
        V nan = LLVMBuildOr(c->b, top, LLVMConstInt(i8, 0x7F, 0), "");   /* sign | 0x7f */
        out[i] = LLVMBuildSelect(c->b, bad, nan, byte, "");
    }
}

/* The 32-bit word that holds bf16 elements lo and hi, where they are elements 2j and
 * 2j + 1 of one vector (a vector load's result); NULL otherwise. */
static V shared_word(Cg *c, V lo, V hi)
{
    if (!LLVMIsAExtractElementInst(lo) || !LLVMIsAExtractElementInst(hi)) return NULL;
    V vec = LLVMGetOperand(lo, 0), i = LLVMGetOperand(lo, 1), j = LLVMGetOperand(hi, 1);
    if (LLVMGetOperand(hi, 0) != vec || !LLVMIsAConstantInt(i) || !LLVMIsAConstantInt(j)) return NULL;
    unsigned long long at = LLVMConstIntGetZExtValue(i), n = LLVMGetVectorSize(LLVMTypeOf(vec));
    if (at % 2 || LLVMConstIntGetZExtValue(j) != at + 1) return NULL;
    V words = LLVMBuildBitCast(c->b, vec, LLVMVectorType(cg_i32(c), (unsigned)n / 2), "");
    return LLVMBuildExtractElement(c->b, words, cg_i32c(c, at / 2), "");
}

/* bf16 -> f32 of two elements that share a word w, exactly: lo = w << 16, hi = w &
 * 0xffff0000. Two instructions where splitting the word (mov.b32 {lo, hi}) and two
 * cvt.f32.bf16 were three. */
static bool widen_pair(Cg *c, V lo, V hi, V *out)
{
    V w = shared_word(c, lo, hi);
    if (!w) return false;
    out[0] = f32_of_bits(c, LLVMBuildShl(c->b, w, i32c(c, 16), ""));
    out[1] = f32_of_bits(c, LLVMBuildAnd(c->b, w, i32c(c, 0xFFFF0000u), ""));
    return true;
}

void cg_convert_run(Cg *c, LLVMValueRef *x, uint32_t n, IrElem from, IrElem to, LLVMValueRef *out)
{
    uint32_t k = 0;
    for (; cg_converts_in_pairs(from, to) && k + 1 < n; k += 2) {
        V w = pack_pair(c, x[k], x[k + 1], to);
        out[k] = LLVMBuildExtractElement(c->b, w, cg_i32c(c, 0), "");
        out[k + 1] = LLVMBuildExtractElement(c->b, w, cg_i32c(c, 1), "");
    }
    for (; k < n; k++) out[k] = cg_convert_scalar(c, x[k], from, to);
}

/* ---- integer and float arithmetic ------------------------------------------------------ */

static LLVMValueRef int_divrem(Cg *c, IrOpcode code, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef zero = LLVMConstNull(t), one = cg_int(c, t, 1), m1 = LLVMConstAllOnes(t);
    bool s = ir_elem_is_signed(e);
    LLVMValueRef bad = LLVMBuildICmp(c->b, LLVMIntEQ, b, zero, "");
    if (s) bad = LLVMBuildOr(c->b, bad, LLVMBuildICmp(c->b, LLVMIntEQ, b, m1, ""), "");
    LLVMValueRef d = LLVMBuildSelect(c->b, bad, one, b, "");
    LLVMValueRef r = code == IR_OP_DIV ? (s ? LLVMBuildSDiv(c->b, a, d, "") : LLVMBuildUDiv(c->b, a, d, ""))
                                       : (s ? LLVMBuildSRem(c->b, a, d, "") : LLVMBuildURem(c->b, a, d, ""));
    if (!s) return r;
    LLVMValueRef by_m1 = LLVMBuildICmp(c->b, LLVMIntEQ, b, m1, "");   /* a / -1 = -a (wrapping), a % -1 = 0 */
    return LLVMBuildSelect(c->b, by_m1, code == IR_OP_DIV ? LLVMBuildSub(c->b, zero, a, "") : zero, r, "");
}

static LLVMValueRef int_shift(Cg *c, IrOpcode code, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    unsigned w = (unsigned)ir_elem_bits(e);
    LLVMValueRef out = LLVMBuildICmp(c->b, LLVMIntUGE, b, cg_int(c, t, w), "");
    LLVMValueRef amt = LLVMBuildSelect(c->b, out, cg_int(c, t, w - 1), b, "");
    if (code == IR_OP_SHR && ir_elem_is_signed(e)) return LLVMBuildAShr(c->b, a, amt, "");
    LLVMValueRef r = code == IR_OP_SHL ? LLVMBuildShl(c->b, a, amt, "") : LLVMBuildLShr(c->b, a, amt, "");
    return LLVMBuildSelect(c->b, out, LLVMConstNull(t), r, "");
}

/* Integer max and min of up to 32 bits are a compare and a select in one asm block,
 * not max.s32: ptxas 13.0 (sm_90a) fuses max(max(a, -b), -c) into a three-input
 * VIMNMX3 and drops one operand's negation (found by the differential tester; SASS
 * in docs/DECISIONS.md). It keeps the compare and select apart. 64-bit ones, which
 * have no three-input form, stay LLVM's intrinsics. */
LLVMValueRef cg_int_minmax(Cg *c, bool is_max, bool is_signed, LLVMValueRef a, LLVMValueRef b)
{
    LLVMTypeRef t = LLVMTypeOf(a), i32 = cg_i32(c);
    unsigned bits = LLVMGetIntTypeWidth(t);
    if (bits > 32) {
        const char *name = is_max ? (is_signed ? "llvm.smax" : "llvm.umax") : (is_signed ? "llvm.smin" : "llvm.umin");
        LLVMValueRef args[2] = {a, b};
        return cg_intrinsic(c, name, &t, 1, args, 2);
    }
    if (bits == 1) return is_max ? LLVMBuildOr(c->b, a, b, "") : LLVMBuildAnd(c->b, a, b, "");   /* i1: 0 < 1 */
    LLVMValueRef x[2] = {a, b};
    for (int i = 0; i < 2 && bits < 32; i++)
        x[i] = is_signed ? LLVMBuildSExt(c->b, x[i], i32, "") : LLVMBuildZExt(c->b, x[i], i32, "");
    char text[96];
    snprintf(text, sizeof text, "{ .reg .pred p; setp.%s.%s32 p, $1, $2; selp.b32 $0, $1, $2, p; }",
             is_max ? "gt" : "lt", is_signed ? "s" : "u");
    LLVMTypeRef tys[2] = {i32, i32};
    LLVMTypeRef fty = LLVMFunctionType(i32, tys, 2, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), "=r,r,r", 6, 0, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef r = LLVMBuildCall2(c->b, fty, fn, x, 2, "");
    return bits < 32 ? LLVMBuildTrunc(c->b, r, t, "") : r;
}

static LLVMValueRef int_minmax(Cg *c, bool is_max, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    return cg_int_minmax(c, is_max, ir_elem_is_signed(e), a, b);
}

static LLVMValueRef int_binary(Cg *c, IrOpcode code, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    switch (code) {
    case IR_OP_ADD: return LLVMBuildAdd(c->b, a, b, "");
    case IR_OP_SUB: return LLVMBuildSub(c->b, a, b, "");
    case IR_OP_MUL: return LLVMBuildMul(c->b, a, b, "");
    case IR_OP_DIV: case IR_OP_REM: return int_divrem(c, code, e, a, b);
    case IR_OP_AND: return LLVMBuildAnd(c->b, a, b, "");
    case IR_OP_OR: return LLVMBuildOr(c->b, a, b, "");
    case IR_OP_XOR: return LLVMBuildXor(c->b, a, b, "");
    case IR_OP_SHL: case IR_OP_SHR: return int_shift(c, code, e, a, b);
    case IR_OP_MINIMUM: case IR_OP_MAXIMUM: return int_minmax(c, code == IR_OP_MAXIMUM, e, a, b);
    default: return NULL;
    }
}

/* IEEE maximum/minimum: NaN wins, -0 < +0. f32 has it in hardware (max.NaN); LLVM 19
 * lowers the f64 intrinsic to a max.f64 that drops NaNs, so f64 is spelled out. */
LLVMValueRef cg_fmaximum(Cg *c, LLVMValueRef a, LLVMValueRef b, bool is_max)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    LLVMValueRef args[2] = {a, b};
    if (t != LLVMDoubleTypeInContext(c->ctx))
        return cg_intrinsic(c, is_max ? "llvm.maximum" : "llvm.minimum", &t, 1, args, 2);
    LLVMValueRef m = cg_intrinsic(c, is_max ? "llvm.maxnum" : "llvm.minnum", &t, 1, args, 2);
    LLVMValueRef eq = LLVMBuildFCmp(c->b, LLVMRealOEQ, a, b, "");
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef ai = LLVMBuildBitCast(c->b, a, i64, ""), bi = LLVMBuildBitCast(c->b, b, i64, "");
    LLVMValueRef z = is_max ? LLVMBuildAnd(c->b, ai, bi, "") : LLVMBuildOr(c->b, ai, bi, "");   /* signs of +-0 */
    m = LLVMBuildSelect(c->b, eq, LLVMBuildBitCast(c->b, z, t, ""), m, "");
    LLVMValueRef uno = LLVMBuildFCmp(c->b, LLVMRealUNO, a, b, "");
    return LLVMBuildSelect(c->b, uno, LLVMBuildFAdd(c->b, a, b, ""), m, "");
}

static LLVMValueRef float_binary(Cg *c, IrOpcode code, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    if (code == IR_OP_POW) return cg_pow(c, a, b, e);
    if (code == IR_OP_REM) return cg_frem(c, a, b, e);
    a = cg_to_f32(c, a, e);
    b = cg_to_f32(c, b, e);
    LLVMValueRef r;
    switch (code) {
    case IR_OP_ADD: r = LLVMBuildFAdd(c->b, a, b, ""); break;
    case IR_OP_SUB: r = LLVMBuildFSub(c->b, a, b, ""); break;
    case IR_OP_MUL: r = LLVMBuildFMul(c->b, a, b, ""); break;
    case IR_OP_DIV: r = LLVMBuildFDiv(c->b, a, b, ""); break;
    case IR_OP_MINIMUM: case IR_OP_MAXIMUM: r = cg_fmaximum(c, a, b, code == IR_OP_MAXIMUM); break;
    default: return NULL;
    }
    return cg_from_f32(c, r, e);
}

static LLVMValueRef compare(Cg *c, IrCmp p, IrElem e, LLVMValueRef a, LLVMValueRef b)
{
    if (ir_elem_is_float(e)) {
        a = cg_to_f32(c, a, e);
        b = cg_to_f32(c, b, e);
        static const LLVMRealPredicate fp[6] = {LLVMRealOEQ, LLVMRealUNE, LLVMRealOLT, LLVMRealOLE, LLVMRealOGT, LLVMRealOGE};
        return LLVMBuildFCmp(c->b, fp[p], a, b, "");
    }
    static const LLVMIntPredicate sp[6] = {LLVMIntEQ, LLVMIntNE, LLVMIntSLT, LLVMIntSLE, LLVMIntSGT, LLVMIntSGE};
    static const LLVMIntPredicate up[6] = {LLVMIntEQ, LLVMIntNE, LLVMIntULT, LLVMIntULE, LLVMIntUGT, LLVMIntUGE};
    return LLVMBuildICmp(c->b, ir_elem_is_signed(e) ? sp[p] : up[p], a, b, "");
}

static LLVMValueRef unary(Cg *c, const IrOp *op, IrElem e, LLVMValueRef x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    if (!ir_elem_is_float(e)) {
        if (op->code == IR_OP_NEG) return LLVMBuildNeg(c->b, x, "");
        if (op->code == IR_OP_NOT) return LLVMBuildNot(c->b, x, "");
        if (op->code != IR_OP_ABS) return NULL;
        if (!ir_elem_is_signed(e)) return x;
        LLVMValueRef args[2] = {x, LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 0, 0)};
        return cg_intrinsic(c, "llvm.abs", &t, 1, args, 2);
    }
    if (op->code == IR_OP_NOT) return NULL;
    if (is_f8(e) && (op->code == IR_OP_NEG || op->code == IR_OP_ABS))   /* the sign bit */
        return op->code == IR_OP_NEG ? LLVMBuildXor(c->b, x, cg_int(c, t, 0x80), "") : LLVMBuildAnd(c->b, x, cg_int(c, t, 0x7F), "");
    if (op->code == IR_OP_NEG) return LLVMBuildFNeg(c->b, x, "");
    if (op->code == IR_OP_ABS) return cg_intrinsic(c, "llvm.fabs", &t, 1, &x, 1);
    return cg_math(c, op, op->code, x, e);
}

/* ---- constants and ids ------------------------------------------------------------------ */

static LLVMValueRef constant(Cg *c, const IrOp *op, IrElem e)
{
    LLVMTypeRef t = cg_elem_type(c, e);
    if (e == IR_F8E4M3) return LLVMConstInt(t, fp_f32_to_f8e4m3((float)fp_round(e, op->attr.f)), 0);
    if (e == IR_F8E5M2) return LLVMConstInt(t, fp_f32_to_f8e5m2((float)fp_round(e, op->attr.f)), 0);
    if (ir_elem_is_float(e)) return LLVMConstReal(t, op->attr.f);
    if (e == IR_PTR) return LLVMConstNull(t);
    return LLVMConstInt(t, (unsigned long long)op->attr.i, 1);
}

/* A program is a CTA, or in a kernel of clusters (passes/cluster.c) a cluster of CTAs
 * along x: its id along x is the cluster's, its rank among them cluster_rank. */
static LLVMValueRef program_axis(Cg *c, const IrOp *op)
{
    bool cl = ir_cluster_size(c->f) > 1;
    if (op->code == IR_OP_CLUSTER_RANK) return cg_sreg(c, "cluster.ctarank");
    if (op->code == IR_OP_LAUNCHED_PROGRAMS) return cg_sreg(c, cl ? "nclusterid.x" : "nctaid.x");
    if (cl && op->attr.i == 0) return cg_sreg(c, op->code == IR_OP_NUM_PROGRAMS ? "nclusterid.x" : "clusterid.x");
    static const char *const ids[2][3] = {{"ctaid.x", "ctaid.y", "ctaid.z"}, {"nctaid.x", "nctaid.y", "nctaid.z"}};
    return cg_sreg(c, ids[op->code == IR_OP_NUM_PROGRAMS][op->attr.i]);
}

static LLVMValueRef elem_op(Cg *c, const IrOp *op, IrElem e, LLVMValueRef *x)
{
    switch (op->code) {
    case IR_OP_CONVERT: return cg_convert_scalar(c, x[0], e, ir_value_type(c->f, op->results[0])->elem);
    case IR_OP_BITCAST: return LLVMBuildBitCast(c->b, x[0], cg_elem_type(c, ir_value_type(c->f, op->results[0])->elem), "");
    case IR_OP_CMP: return compare(c, (IrCmp)op->attr.i, e, x[0], x[1]);
    case IR_OP_SELECT: return LLVMBuildSelect(c->b, x[0], x[1], x[2], "");
    case IR_OP_ADDPTR: {
        IrElem oe = ir_value_type(c->f, op->operands[1])->elem, pe = ir_value_type(c->f, op->results[0])->pointee;
        LLVMValueRef off = cg_convert_scalar(c, x[1], oe, ir_elem_is_signed(oe) ? IR_I64 : IR_U64);
        return LLVMBuildGEP2(c->b, cg_mem_type(c, pe), x[0], &off, 1, "");
    }
    case IR_OP_FMA:
        if (!ir_elem_is_float(e)) return LLVMBuildAdd(c->b, LLVMBuildMul(c->b, x[0], x[1], ""), x[2], "");
        if (is_f8(e)) {
            LLVMValueRef y[3];
            for (int i = 0; i < 3; i++) y[i] = cg_to_f32(c, x[i], e);
            LLVMTypeRef t = LLVMFloatTypeInContext(c->ctx);
            return cg_from_f32(c, cg_intrinsic(c, "llvm.fma", &t, 1, y, 3), e);
        } else {
            LLVMTypeRef t = LLVMTypeOf(x[0]);
            return cg_intrinsic(c, "llvm.fma", &t, 1, x, 3);
        }
    default: break;
    }
    if (op->noperands == 1) return unary(c, op, e, x[0]);
    return ir_elem_is_float(e) ? float_binary(c, op->code, e, x[0], x[1]) : int_binary(c, op->code, e, x[0], x[1]);
}

/* The operand whose element type decides the op's arithmetic (select: the values). */
static IrElem op_elem(Cg *c, const IrOp *op)
{
    return cg_type(c, op->operands[op->code == IR_OP_SELECT ? 1 : 0])->elem;
}

/* How many neighbouring elements of a thread's run along the last axis are proven
 * equal (an aligned group of the result's constancy, ir/axisinfo.h): a power of two
 * dividing both the constancy and the run. Only the group's first element is computed;
 * so `cols < n` with n a multiple of 16 is one compare per vector, not one per element
 * (ptxas kept 16 such predicates per thread alive in layernorm, as ISETP and P2R). */
static uint32_t equal_run(Cg *c, const IrOp *op, const IrLayoutMap *l)
{
    if (l->rank == 0 || l->kind != IR_LMAP_BLOCKED) return 1;
    int last = l->rank - 1;
    int64_t k = c->ai[op->results[0]].constancy[last];
    uint32_t g = 1;
    while ((uint32_t)l->spt[last] % (g * 2) == 0 && k % (g * 2) == 0) g *= 2;
    return g;
}

/* A conversion f32 -> f16/bf16 or bf16 -> f32 whose element pairs (2j, 2j + 1) share a
 * 32-bit word: the thread's run along the last axis has even length, so the words are
 * those a vector store writes; bf16 pairs widen from their word where a vector load
 * read them. Not where neighbours are proven equal (one conversion serves them) nor
 * for a scalar operand. */
static bool convert_in_pairs(Cg *c, const IrOp *op, const IrLayoutMap *l, CgVal *out)
{
    IrElem from = op_elem(c, op), to = cg_type(c, op->results[0])->elem;
    bool widen = from == IR_BF16 && to == IR_F32;
    bool e4m3 = from == IR_F32 && to == IR_F8E4M3 && c->target && c->target->sm >= 89;
    CgVal x = cg_get(c, op->operands[0]);
    if (op->code != IR_OP_CONVERT || !(widen || e4m3 || cg_converts_in_pairs(from, to)) || l->rank == 0 ||
        l->spt[l->rank - 1] % 2 || equal_run(c, op, l) > 1 || x.n != out->n)
        return false;
    for (uint32_t k = 0; k < out->n; k += 2)
        if (e4m3) pack_pair_e4m3(c, x.v[k], x.v[k + 1], out->v + k);
        else if (!widen || !widen_pair(c, x.v[k], x.v[k + 1], out->v + k))
            cg_convert_run(c, x.v + k, 2, from, to, out->v + k);
    return true;
}

bool cg_elementwise(Cg *c, const IrOp *op)
{
    const IrType *rt = cg_type(c, op->results[0]);
    IrLayoutMap l = ir_layout_map(rt);
    CgVal out = cg_val_new(c, cg_layout_elems(&l));
    if (op->code == IR_OP_CONST || op->code == IR_OP_PROGRAM_ID || op->code == IR_OP_NUM_PROGRAMS ||
        op->code == IR_OP_LAUNCHED_PROGRAMS || op->code == IR_OP_CLUSTER_RANK) {
        LLVMValueRef v = op->code == IR_OP_CONST ? constant(c, op, rt->elem) : program_axis(c, op);
        for (uint32_t k = 0; k < out.n; k++) out.v[k] = v;
    } else if (op->code == IR_OP_ARANGE) {
        for (uint32_t k = 0; k < out.n; k++) {
            LLVMValueRef co[IR_MAX_RANK];
            cg_layout_coords(c, &l, k, co);
            out.v[k] = cg_add(c->b, co[0], cg_i32c(c, op->attr.i));
        }
    } else if (!convert_in_pairs(c, op, &l, &out)) {
        IrElem e = op_elem(c, op);
        uint32_t g = equal_run(c, op, &l), along = l.rank ? (uint32_t)(l.spt[l.rank - 1] * l.reps[l.rank - 1]) : 1;
        for (uint32_t k = 0; k < out.n; k++) {
            uint32_t from = (k % along) % g;      /* local elements of one run are adjacent */
            if (from) {
                out.v[k] = out.v[k - from];
                continue;
            }
            LLVMValueRef x[3];
            for (uint32_t i = 0; i < op->noperands && i < 3; i++) x[i] = cg_at(cg_get(c, op->operands[i]), k);
            out.v[k] = elem_op(c, op, e, x);
            if (!out.v[k])
                return cg_error(c, op, "'%s' is not defined on %s", ir_op_info[op->code].text, ir_elem_name(e));
            if (c->failed) return false;
        }
    }
    cg_set(c, op->results[0], out);
    return true;
}
