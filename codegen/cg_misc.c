/* rand/randn (Philox4x32-10), print (vprintf), assert (__assertfail) and the hints.
 *
 * rand reproduces ir/philox.c bit for bit: key = {lo32(seed), hi32(seed)}, counter =
 * {lo32(offset), hi32(offset), 0, 0}, ten rounds with the key bumped between them, the
 * 32x32 -> 64-bit products done as 64-bit multiplies; rand = (c0 >> 8) * 2^-24. randn
 * is Box-Muller in f32 as in the interpreter, with this generator's log and cos (a few
 * ulp, so randn may differ from the interpreter in the last bits).
 *
 * print: a line per call with scalars only, printed by thread 0 in the interpreter's
 * form "pid (x, y, z) msg v..."; with tiles, every element's owner prints a line
 * "pid (x, y, z) msg [i, j] v" per operand element (the order of lines between threads
 * is the GPU's). assert: every owner of a false element calls __assertfail (which
 * prints the message and traps the kernel). */
#include <string.h>

#include "codegen/cg_internal.h"

enum { PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u, PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u };

static LLVMValueRef u32c(Cg *c, uint32_t v) { return LLVMConstInt(cg_i32(c), v, 0); }

/* hi and lo halves of a * b (32 x 32 -> 64 bits). */
static void mul_wide(Cg *c, uint32_t a, LLVMValueRef b, LLVMValueRef *hi, LLVMValueRef *lo)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef p = LLVMBuildMul(c->b, LLVMConstInt(i64, a, 0), LLVMBuildZExt(c->b, b, i64, ""), "");
    *lo = LLVMBuildTrunc(c->b, p, cg_i32(c), "");
    *hi = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, p, LLVMConstInt(i64, 32, 0), ""), cg_i32(c), "");
}

static void philox(Cg *c, LLVMValueRef ctr[4], LLVMValueRef k0, LLVMValueRef k1)
{
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 = LLVMBuildAdd(c->b, k0, u32c(c, PHILOX_W0), "");
            k1 = LLVMBuildAdd(c->b, k1, u32c(c, PHILOX_W1), "");
        }
        LLVMValueRef h0, l0, h1, l1;
        mul_wide(c, PHILOX_M0, ctr[0], &h0, &l0);
        mul_wide(c, PHILOX_M1, ctr[2], &h1, &l1);
        LLVMValueRef n0 = LLVMBuildXor(c->b, LLVMBuildXor(c->b, h1, ctr[1], ""), k0, "");
        LLVMValueRef n2 = LLVMBuildXor(c->b, LLVMBuildXor(c->b, h0, ctr[3], ""), k1, "");
        ctr[0] = n0;
        ctr[1] = l1;
        ctr[2] = n2;
        ctr[3] = l0;
    }
}

static LLVMValueRef to_u64(Cg *c, LLVMValueRef x, IrElem e)
{
    return cg_convert_scalar(c, x, e, ir_elem_is_signed(e) ? IR_I64 : IR_U64);
}

static LLVMValueRef unit24(Cg *c, LLVMValueRef w, uint32_t plus)
{
    LLVMValueRef top = LLVMBuildAdd(c->b, LLVMBuildLShr(c->b, w, u32c(c, 8), ""), u32c(c, plus), "");
    return LLVMBuildFMul(c->b, LLVMBuildUIToFP(c->b, top, LLVMFloatTypeInContext(c->ctx), ""), cg_f32c(c, 0x1p-24), "");
}

static bool lower_rand(Cg *c, const IrOp *op)
{
    IrElem se = cg_type(c, op->operands[0])->elem, oe = cg_type(c, op->operands[1])->elem;
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx), i32 = cg_i32(c);
    LLVMValueRef seed = to_u64(c, cg_get(c, op->operands[0]).v[0], se);
    LLVMValueRef k0 = LLVMBuildTrunc(c->b, seed, i32, "");
    LLVMValueRef k1 = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, seed, LLVMConstInt(i64, 32, 0), ""), i32, "");
    IrLayoutMap l = ir_layout_map(cg_type(c, op->results[0]));
    CgVal out = cg_val_new(c, cg_layout_elems(&l)), offs = cg_get(c, op->operands[1]);
    for (uint32_t k = 0; k < out.n; k++) {
        LLVMValueRef off = to_u64(c, cg_at(offs, k), oe);
        LLVMValueRef ctr[4] = {LLVMBuildTrunc(c->b, off, i32, ""),
                               LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, off, LLVMConstInt(i64, 32, 0), ""), i32, ""),
                               u32c(c, 0), u32c(c, 0)};
        philox(c, ctr, k0, k1);
        if (op->code == IR_OP_RAND) {
            out.v[k] = unit24(c, ctr[0], 0);
            continue;
        }
        LLVMValueRef u1 = unit24(c, ctr[0], 1), u2 = unit24(c, ctr[1], 0);
        LLVMValueRef rad = LLVMBuildFMul(c->b, cg_f32c(c, -2.0), cg_log_f32(c, u1), "");
        LLVMTypeRef f32 = LLVMFloatTypeInContext(c->ctx);
        rad = cg_intrinsic(c, "llvm.sqrt", &f32, 1, &rad, 1);
        out.v[k] = LLVMBuildFMul(c->b, rad, cg_cos_f32(c, LLVMBuildFMul(c->b, cg_f32c(c, 6.2831855), u2, "")), "");
    }
    cg_set(c, op->results[0], out);
    return true;
}

/* ---- print and assert ---------------------------------------------------------------------- */

static LLVMValueRef declare(Cg *c, const char *name, LLVMTypeRef ret, LLVMTypeRef *params, unsigned n)
{
    LLVMValueRef f = LLVMGetNamedFunction(c->mod, name);
    return f ? f : LLVMAddFunction(c->mod, name, LLVMFunctionType(ret, params, n, 0));
}

static LLVMValueRef string_ptr(Cg *c, const char *s) { return LLVMBuildGlobalStringPtr(c->b, s, "str"); }

/* The printf conversion of an element type, and the value as vprintf reads it. */
static const char *conv(Cg *c, IrElem e, LLVMValueRef *v)
{
    if (e == IR_PTR) return "%p";
    if (ir_elem_is_float(e)) {      /* varargs promote floats to double */
        if (e != IR_F64) *v = LLVMBuildFPExt(c->b, cg_to_f32(c, *v, e), LLVMDoubleTypeInContext(c->ctx), "");
        return e == IR_F64 ? "%.17g" : e == IR_F32 ? "%.9g" : e == IR_F16 ? "%.5g" : "%.4g";
    }
    *v = cg_convert_scalar(c, *v, e, ir_elem_is_signed(e) ? IR_I64 : IR_U64);
    return ir_elem_is_signed(e) ? "%lld" : "%llu";
}

/* vprintf(fmt, args) with args packed in a local buffer (8 bytes each). */
static void vprintf_call(Cg *c, const char *fmt, LLVMValueRef *args, unsigned n)
{
    LLVMTypeRef ptr = LLVMPointerTypeInContext(c->ctx, 0), i32 = cg_i32(c);
    LLVMTypeRef pts[2] = {ptr, ptr};
    LLVMValueRef fn = declare(c, "vprintf", i32, pts, 2);
    LLVMTypeRef *fields = arena_alloc(c->arena, (n ? n : 1) * sizeof *fields);
    for (unsigned i = 0; i < n; i++) fields[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef st = LLVMStructTypeInContext(c->ctx, fields, n ? n : 0, 0);
    LLVMBasicBlockRef here = LLVMGetInsertBlock(c->b);
    LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(c->fn);
    LLVMPositionBuilderBefore(c->b, LLVMGetFirstInstruction(entry));   /* static allocas only */
    LLVMValueRef buf = LLVMBuildAlloca(c->b, n ? st : LLVMInt64TypeInContext(c->ctx), "printf.args");
    LLVMPositionBuilderAtEnd(c->b, here);
    for (unsigned i = 0; i < n; i++) LLVMBuildStore(c->b, args[i], LLVMBuildStructGEP2(c->b, st, buf, i, ""));
    LLVMValueRef call_args[2] = {string_ptr(c, fmt), buf};
    cg_call(c, fn, call_args, 2);
}

static char *appendf(Cg *c, const char *a, const char *b) { return arena_printf(c->arena, "%s%s", a, b); }

/* "%"-signs of the user's message would be read as conversions. */
static const char *escape_percent(Cg *c, const char *s)
{
    char *out = arena_alloc(c->arena, 2 * strlen(s) + 1), *o = out;
    for (; *s; s++) {
        if (*s == '%') *o++ = '%';
        *o++ = *s;
    }
    return out;
}

static void print_prefix(Cg *c, LLVMValueRef *args, const char **fmt, const IrOp *op)
{
    /* the program's id: a kernel of clusters' programs are its clusters */
    const char *const ids[3] = {ir_cluster_size(c->f) > 1 ? "clusterid.x" : "ctaid.x", "ctaid.y", "ctaid.z"};
    for (int d = 0; d < 3; d++) args[d] = cg_sreg(c, ids[d]);
    *fmt = arena_printf(c->arena, "pid (%%d, %%d, %%d) %s", escape_percent(c, op->attr.s ? op->attr.s : ""));
}

static bool lower_print(Cg *c, const IrOp *op)
{
    bool tiles = false;
    for (uint32_t i = 0; i < op->noperands; i++) tiles |= cg_type(c, op->operands[i])->rank > 0;
    LLVMValueRef *args = arena_alloc(c->arena, (op->noperands + 6) * sizeof *args);
    const char *fmt;
    if (!tiles) {
        print_prefix(c, args, &fmt, op);
        for (uint32_t i = 0; i < op->noperands; i++) {
            args[3 + i] = cg_get(c, op->operands[i]).v[0];
            fmt = appendf(c, appendf(c, fmt, " "), conv(c, cg_type(c, op->operands[i])->elem, &args[3 + i]));
        }
        LLVMValueRef t0 = LLVMBuildICmp(c->b, LLVMIntEQ, c->tid, cg_i32c(c, 0), "");
        LLVMBasicBlockRef on = cg_block_new(c, "print"), join = cg_block_new(c, "print.done");
        LLVMBuildCondBr(c->b, t0, on, join);
        LLVMPositionBuilderAtEnd(c->b, on);
        vprintf_call(c, appendf(c, fmt, "\n"), args, 3 + op->noperands);
        LLVMBuildBr(c->b, join);
        LLVMPositionBuilderAtEnd(c->b, join);
        return true;
    }
    for (uint32_t i = 0; i < op->noperands; i++) {
        const IrType *t = cg_type(c, op->operands[i]);
        IrLayoutMap l = ir_layout_map(t);
        CgVal x = cg_get(c, op->operands[i]);
        for (uint32_t k = 0; k < cg_layout_elems(&l); k++) {
            LLVMValueRef owner = cg_layout_owner_at(c, &l, k);
            LLVMValueRef co[IR_MAX_RANK];
            unsigned n = 3;
            print_prefix(c, args, &fmt, op);
            cg_layout_coords(c, &l, k, co);
            fmt = appendf(c, fmt, " [");
            for (int d = 0; d < l.rank; d++) {
                args[n++] = co[d];
                fmt = appendf(c, fmt, d ? ", %d" : "%d");
            }
            args[n] = cg_at(x, k);
            fmt = appendf(c, appendf(c, fmt, "] "), conv(c, t->elem, &args[n]));
            n++;
            LLVMBasicBlockRef on = cg_block_new(c, "print"), join = cg_block_new(c, "print.done");
            LLVMBuildCondBr(c->b, owner, on, join);
            LLVMPositionBuilderAtEnd(c->b, on);
            vprintf_call(c, appendf(c, fmt, "\n"), args, n);
            LLVMBuildBr(c->b, join);
            LLVMPositionBuilderAtEnd(c->b, join);
        }
    }
    return true;
}

static bool lower_assert(Cg *c, const IrOp *op)
{
    const IrType *t = cg_type(c, op->operands[0]);
    IrLayoutMap l = ir_layout_map(t);
    CgVal x = cg_get(c, op->operands[0]);
    LLVMTypeRef ptr = LLVMPointerTypeInContext(c->ctx, 0), i32 = cg_i32(c), i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMTypeRef pts[5] = {ptr, ptr, i32, ptr, i64};
    LLVMValueRef fn = declare(c, "__assertfail", LLVMVoidTypeInContext(c->ctx), pts, 5);
    LLVMValueRef failed = LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 0, 0);
    bool per_elem = l.rank > 0 && l.kind != IR_LMAP_BLOCKED;     /* owners report, not their copies */
    for (uint32_t k = 0; k < x.n; k++) {
        LLVMValueRef bad = LLVMBuildNot(c->b, x.v[k], "");
        failed = LLVMBuildOr(c->b, failed, per_elem ? LLVMBuildAnd(c->b, bad, cg_layout_owner_at(c, &l, k), "") : bad, "");
    }
    if (!per_elem) failed = LLVMBuildAnd(c->b, failed, cg_layout_owner(c, &l), "");
    LLVMBasicBlockRef on = cg_block_new(c, "assert"), join = cg_block_new(c, "assert.ok");
    LLVMBuildCondBr(c->b, failed, on, join);
    LLVMPositionBuilderAtEnd(c->b, on);
    const char *file = op->loc.src && op->loc.src->name ? op->loc.src->name : "<tile>";
    LLVMValueRef args[5] = {string_ptr(c, op->attr.s ? op->attr.s : "assertion failed"), string_ptr(c, file),
                            cg_i32c(c, op->loc.line), string_ptr(c, c->f->name), LLVMConstInt(i64, 1, 0)};
    cg_call(c, fn, args, 5);
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
    return true;
}

bool cg_misc(Cg *c, const IrOp *op)
{
    switch (op->code) {
    case IR_OP_RAND: case IR_OP_RANDN: return lower_rand(c, op);
    case IR_OP_PRINT: return lower_print(c, op);
    case IR_OP_ASSERT: return lower_assert(c, op);
    default:                          /* multiple_of, max_contiguous: facts for axisinfo only */
        cg_set(c, op->results[0], cg_get(c, op->operands[0]));
        return true;
    }
}
