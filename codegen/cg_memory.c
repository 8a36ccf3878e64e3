/* Global memory: load, store and the atomics.
 *
 * A thread's elements come in runs of consecutive elements along the last axis
 * (cg_layout_run: spt of a blocked layout; the column pairs c0 c1, c2 c3 of an mma
 * accumulator, so f32 pairs are 8-byte and bf16/f16 pairs 4-byte stores). Where the axis analysis proves that the pointers of a run are
 * consecutive, that the first is aligned to the vector's size, and that the mask (and
 * `other`) are constant over the vector, the run is accessed with vectors of up to 16
 * bytes (ld.global.v4.f32, v4.b32 for 8 halves, ...); otherwise element by element.
 * Masked-off elements touch no memory, and a load's result there is `other` (0 without
 * one). An access of 4, 8 or 16 bytes under a mask not known at compile time is one
 * predicated PTX instruction (inline asm: `@p ld.global.v4.b32` into registers preset
 * to `other`, `@p st.global.v4.b32`): a branch around each access, as LLVM would
 * build it, becomes BSSY/BRA pairs in ptxas and keeps the predicates alive as
 * registers (P2R), which cost layernorm 21 P2R and 38 branches. Smaller accesses
 * (one f16 or byte element) sit in a block entered only when the mask holds.
 *
 * Copies of an element held by several threads (small tiles, scalars) are written by
 * the owner only; atomics too, since a duplicated atomic would apply twice, and the
 * owner's old value then reaches the copies through shared memory.
 *
 * The memory order of an atomic (its sem, LANGUAGE-REFERENCE.md "Memory model") is
 * about the whole program, every thread of the CTA, while PTX orders one thread's
 * accesses. So a releasing atomic is `bar.sync; fence.acq_rel.gpu; atom` (the barrier
 * makes every thread's earlier accesses happen before the fence of the threads that
 * perform the atomic) and an acquiring one `atom; fence.acq_rel.gpu; bar.sync`; a
 * fence followed by a relaxed atom is PTX's release pattern, an atom followed by a
 * fence its acquire pattern (the fences in the performing threads only: see
 * lower_atomic). The atom itself stays relaxed (`atom.global.add`): LLVM
 * 19's NVPTX backend drops the ordering of atomicrmw/cmpxchg and cannot select a
 * fence, so the fences are inline PTX, which LLVM also keeps in place against every
 * other memory access. relaxed is exactly the plain atom. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/cg_internal.h"
#include "ir/target.h"

static LLVMValueRef true_(Cg *c) { return LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 1, 0); }

/* Elements per vector access of a load or store whose pointers are operand 0. */
static uint32_t vector_width(Cg *c, const IrOp *op, const IrLayoutMap *l, int mask_at, int other_at)
{
    return cg_vector_width(c, op, 0, l, mask_at, other_at);
}

uint32_t cg_vector_width(Cg *c, const IrOp *op, int ptr_at, const IrLayoutMap *l, int mask_at, int other_at)
{
    const IrType *pt = cg_type(c, op->operands[ptr_at]);
    if (pt->rank == 0 || l->rank == 0) return 1;
    int last = pt->rank - 1, bytes = ir_elem_bytes(pt->pointee);
    const AxisInfo *pa = &c->ai[op->operands[ptr_at]];
    int64_t v = cg_layout_run(l);
    if (pa->contiguity[last] < v) v = pa->contiguity[last];
    if (pa->divisibility[last] / bytes < v) v = pa->divisibility[last] / bytes;
    if (16 / bytes < v) v = 16 / bytes;
    int at[2] = {mask_at, other_at};
    for (int i = 0; i < 2; i++)
        if (at[i] >= 0 && (uint32_t)at[i] < op->noperands && cg_type(c, op->operands[at[i]])->rank > 0 &&
            c->ai[op->operands[at[i]]].constancy[last] < v)
            v = c->ai[op->operands[at[i]]].constancy[last];
    return v < 1 ? 1 : (uint32_t)v;
}

static LLVMValueRef mask_at(Cg *c, const IrOp *op, int at, uint32_t k)
{
    return (uint32_t)at < op->noperands ? cg_at(cg_get(c, op->operands[at]), k) : true_(c);
}

/* Runs the code that `emit` builds only where cond holds; returns the block it left. */
typedef struct Guard {
    LLVMBasicBlockRef from, body, join;
} Guard;

static Guard guard_begin(Cg *c, LLVMValueRef cond)
{
    Guard g = {LLVMGetInsertBlock(c->b), cg_block_new(c, "on"), cg_block_new(c, "join")};
    LLVMBuildCondBr(c->b, cond, g.body, g.join);
    LLVMPositionBuilderAtEnd(c->b, g.body);
    return g;
}

/* Closes the guard; with a value, returns phi(value from the body, dflt from outside). */
static LLVMValueRef guard_end(Cg *c, Guard *g, LLVMValueRef value, LLVMValueRef dflt)
{
    LLVMBasicBlockRef body_end = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, g->join);
    LLVMPositionBuilderAtEnd(c->b, g->join);
    if (!value) return NULL;
    LLVMValueRef phi = LLVMBuildPhi(c->b, LLVMTypeOf(value), "");
    LLVMValueRef vals[2] = {value, dflt};
    LLVMBasicBlockRef bbs[2] = {body_end, g->from};
    LLVMAddIncoming(phi, vals, bbs, 2);
    return phi;
}

static LLVMValueRef from_mem(Cg *c, LLVMValueRef x, IrElem e)
{
    return e == IR_I1 ? LLVMBuildICmp(c->b, LLVMIntNE, x, cg_int(c, LLVMTypeOf(x), 0), "") : x;
}

static LLVMValueRef to_mem(Cg *c, LLVMValueRef x, IrElem e)
{
    return e == IR_I1 ? LLVMBuildZExt(c->b, x, LLVMInt8TypeInContext(c->ctx), "") : x;
}

/* ---- load -------------------------------------------------------------------------------- */

/* The predicated form needs whole 32-bit words: 4, 8 or 16 bytes. */
static uint32_t access_words(IrElem e, uint32_t n)
{
    uint32_t bytes = (uint32_t)ir_elem_bytes(e) * n;
    return bytes == 4 || bytes == 8 || bytes == 16 ? bytes / 4 : 0;
}

static const char *const vec_suffix[5] = {"", "", ".v2", "", ".v4"};

/* "{$0, $1, ...}" or "$0": w word operands starting at operand first. */
static void word_list(char *buf, size_t size, uint32_t w, uint32_t first)
{
    int at = snprintf(buf, size, w > 1 ? "{" : "");
    for (uint32_t i = 0; i < w; i++) at += snprintf(buf + at, size - (size_t)at, "%s$%u", i ? ", " : "", first + i);
    snprintf(buf + at, size - (size_t)at, w > 1 ? "}" : "");
}

LLVMValueRef cg_call_asm(Cg *c, LLVMTypeRef ret, LLVMValueRef *args, unsigned n, const char *text,
                             const char *constraints, bool side_effects)
{
    LLVMTypeRef tys[8];
    for (unsigned i = 0; i < n; i++) tys[i] = LLVMTypeOf(args[i]);
    LLVMTypeRef fty = LLVMFunctionType(ret, tys, n, 0);
    LLVMValueRef fn = LLVMGetInlineAsm(fty, text, strlen(text), constraints, strlen(constraints), side_effects, 0,
                                       LLVMInlineAsmDialectATT, 0);
    return LLVMBuildCall2(c->b, fty, fn, args, n, "");
}

/* Marks an asm call as reading memory only (memory(read): every location Ref), so
 * that LLVM orders it after stores and atomics that may alias but may still merge
 * identical loads or drop an unused one. */
void cg_reads_memory_only(Cg *c, LLVMValueRef call)
{
    const char *names[3] = {"memory", "nounwind", "willreturn"};
    uint64_t vals[3] = {1 | 1 << 2 | 1 << 4, 0, 0};
    for (int i = 0; i < 3; i++) {
        unsigned kind = LLVMGetEnumAttributeKindForName(names[i], strlen(names[i]));
        LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, vals[i]));
    }
}

/* Marks an asm call as convergent: a warp- or warpgroup-collective instruction
 * (mma.sync, ldmatrix, wgmma) that every lane must execute together. Without it LLVM
 * treats a side-effect-free asm as an ordinary value and sinks it into the branch of
 * the lanes that use its result (a store masked to some lanes), where the others
 * never reach it: a dot stored through a column mask got garbage (the differential
 * tester, seed 1073; tests/lit/codegen/convergent.tile). */
void cg_convergent(Cg *c, LLVMValueRef call)
{
    unsigned kind = LLVMGetEnumAttributeKindForName("convergent", 10);
    LLVMAddCallSiteAttribute(call, LLVMAttributeFunctionIndex, LLVMCreateEnumAttribute(c->ctx, kind, 0));
}

static LLVMValueRef mask_word(Cg *c, LLVMValueRef m) { return LLVMBuildZExt(c->b, m, cg_i32(c), ""); }

static LLVMValueRef addr_of(Cg *c, LLVMValueRef p) { return LLVMBuildPtrToInt(c->b, p, LLVMInt64TypeInContext(c->ctx), ""); }

/* `@p ld.global` of w words into registers that hold dflt's words beforehand. */
static LLVMValueRef predicated_load(Cg *c, LLVMValueRef m, LLVMValueRef p, LLVMValueRef dflt, uint32_t w)
{
    LLVMTypeRef i32 = cg_i32(c), wt = w > 1 ? LLVMVectorType(i32, w) : i32;
    LLVMValueRef words = LLVMBuildBitCast(c->b, dflt, wt, ""), args[6];
    args[0] = addr_of(c, p);
    args[1] = mask_word(c, m);
    char list[64], text[192], cons[64];
    word_list(list, sizeof list, w, 0);
    snprintf(text, sizeof text, "{ .reg .pred p; setp.ne.b32 p, $%u, 0; @p ld.global%s.b32 %s, [$%u]; }", w + 1,
             vec_suffix[w], list, w);
    int at = 0;
    for (uint32_t i = 0; i < w; i++) at += snprintf(cons + at, sizeof cons - (size_t)at, "=r,");
    at += snprintf(cons + at, sizeof cons - (size_t)at, "l,r");
    for (uint32_t i = 0; i < w; i++) {
        args[2 + i] = w > 1 ? LLVMBuildExtractElement(c->b, words, cg_i32c(c, i), "") : words;
        at += snprintf(cons + at, sizeof cons - (size_t)at, ",%u", i);
    }
    LLVMTypeRef rt = i32;
    if (w > 1) {
        LLVMTypeRef fields[4] = {i32, i32, i32, i32};
        rt = LLVMStructTypeInContext(c->ctx, fields, w, 0);
    }
    LLVMValueRef call = cg_call_asm(c, rt, args, 2 + w, text, cons, false);
    cg_reads_memory_only(c, call);
    LLVMValueRef out = w > 1 ? LLVMGetUndef(wt) : call;
    for (uint32_t i = 0; w > 1 && i < w; i++)
        out = LLVMBuildInsertElement(c->b, out, LLVMBuildExtractValue(c->b, call, i, ""), cg_i32c(c, i), "");
    return LLVMBuildBitCast(c->b, out, LLVMTypeOf(dflt), "");
}

/* `@p st.global` of v's w words (m NULL: a plain `st.global`). */
static void predicated_store(Cg *c, LLVMValueRef m, LLVMValueRef p, LLVMValueRef v, uint32_t w)
{
    LLVMTypeRef wt = w > 1 ? LLVMVectorType(cg_i32(c), w) : cg_i32(c);
    LLVMValueRef words = LLVMBuildBitCast(c->b, v, wt, ""), args[6];
    uint32_t a = 0;
    if (m) args[a++] = mask_word(c, m);
    args[a++] = addr_of(c, p);
    char list[64], text[192], cons[64];
    snprintf(cons, sizeof cons, "%sl", m ? "r," : "");
    for (uint32_t i = 0; i < w; i++) {
        args[a + i] = w > 1 ? LLVMBuildExtractElement(c->b, words, cg_i32c(c, i), "") : words;
        strcat(cons, ",r");
    }
    word_list(list, sizeof list, w, a);
    if (m)
        snprintf(text, sizeof text, "{ .reg .pred p; setp.ne.b32 p, $0, 0; @p st.global%s.b32 [$1], %s; }", vec_suffix[w],
                 list);
    else
        snprintf(text, sizeof text, "st.global%s.b32 [$0], %s;", vec_suffix[w], list);
    cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), args, a + w, text, cons, true);
}

/* Loads elements k..k+n-1 (one vector when n > 1) into out. */
static void load_run(Cg *c, const IrOp *op, IrElem e, CgVal ptr, uint32_t k, uint32_t n, CgVal *out)
{
    LLVMTypeRef mt = cg_mem_type(c, e), vt = n > 1 ? LLVMVectorType(mt, n) : mt;
    LLVMValueRef dflt = LLVMGetUndef(vt);
    for (uint32_t i = 0; i < n; i++) {
        LLVMValueRef o = op->noperands > 2 ? to_mem(c, cg_at(cg_get(c, op->operands[2]), k + i), e) : LLVMConstNull(mt);
        dflt = n > 1 ? LLVMBuildInsertElement(c->b, dflt, o, cg_i32c(c, i), "") : o;
    }
    LLVMValueRef m = mask_at(c, op, 1, k), v = dflt;
    bool known = LLVMIsAConstantInt(m) != NULL;
    uint32_t w = access_words(e, n);
    if (!known && w) {
        v = predicated_load(c, m, cg_at(ptr, k), dflt, w);
    } else if (!known || LLVMConstIntGetZExtValue(m)) {        /* a mask known false loads nothing */
        Guard g = {0};
        if (!known) g = guard_begin(c, m);
        LLVMValueRef ld = LLVMBuildLoad2(c->b, vt, cg_at(ptr, k), "");
        LLVMSetAlignment(ld, (unsigned)(ir_elem_bytes(e) * n));
        v = known ? ld : guard_end(c, &g, ld, dflt);
    }
    for (uint32_t i = 0; i < n; i++)
        out->v[k + i] = from_mem(c, n > 1 ? LLVMBuildExtractElement(c->b, v, cg_i32c(c, i), "") : v, e);
}

static bool lower_load(Cg *c, const IrOp *op)
{
    const IrType *rt = cg_type(c, op->results[0]);
    IrLayoutMap l = ir_layout_map(rt);
    CgVal ptr = cg_get(c, op->operands[0]), out = cg_val_new(c, cg_layout_elems(&l));
    uint32_t vw = vector_width(c, op, &l, 1, 2);
    for (uint32_t k = 0; k < out.n; k += vw) load_run(c, op, rt->elem, ptr, k, vw, &out);
    cg_set(c, op->results[0], out);
    return true;
}

/* ---- store ------------------------------------------------------------------------------- */

static void store_run(Cg *c, const IrOp *op, IrElem e, const IrLayoutMap *l, uint32_t k, uint32_t n)
{
    CgVal ptr = cg_get(c, op->operands[0]), val = cg_get(c, op->operands[1]);
    IrElem ve = cg_type(c, op->operands[1])->elem;
    LLVMTypeRef mt = cg_mem_type(c, e), vt = n > 1 ? LLVMVectorType(mt, n) : mt;
    LLVMValueRef v = LLVMGetUndef(vt), x[16];
    for (uint32_t i = 0; i < n; i++) x[i] = cg_at(val, k + i);
    cg_convert_run(c, x, n, ve, e, x);                  /* f32 -> bf16 pairs: the vector's words */
    for (uint32_t i = 0; i < n; i++) {
        LLVMValueRef m = to_mem(c, x[i], e);
        v = n > 1 ? LLVMBuildInsertElement(c->b, v, m, cg_i32c(c, i), "") : m;
    }
    LLVMValueRef cond = cg_layout_owner_at(c, l, k);     /* the same for every element of a vector */
    if (op->noperands > 2) cond = LLVMBuildAnd(c->b, cond, cg_at(cg_get(c, op->operands[2]), k), "");
    bool known = LLVMIsAConstantInt(cond) != NULL;
    if (known && !LLVMConstIntGetZExtValue(cond)) return;
    uint32_t w = access_words(e, n);
    if (!known && w) {
        predicated_store(c, cond, cg_at(ptr, k), v, w);
        return;
    }
    /* a run of 16-bit (8-bit) elements in whole words is stored as words, the packed
     * pairs as they are (st.global.v2.b32 for 4 bf16; LLVM would store a <4 x bfloat>
     * as v4.b16, splitting them into halves) */
    if (w && ir_elem_bytes(e) < 4 && n > 1) {
        predicated_store(c, NULL, cg_at(ptr, k), v, w);     /* known: a masked one took the path above */
        return;
    }
    Guard g = {0};
    if (!known) g = guard_begin(c, cond);
    LLVMValueRef st = LLVMBuildStore(c->b, v, cg_at(ptr, k));
    LLVMSetAlignment(st, (unsigned)(ir_elem_bytes(e) * n));
    if (!known) guard_end(c, &g, NULL, NULL);
}

static bool lower_store(Cg *c, const IrOp *op)
{
    const IrType *pt = cg_type(c, op->operands[0]);
    IrLayoutMap l = ir_layout_map(pt);
    uint32_t vw = vector_width(c, op, &l, 2, -1), n = cg_layout_elems(&l);
    for (uint32_t k = 0; k < n; k += vw) store_run(c, op, pt->pointee, &l, k, vw);
    return true;
}

/* ---- atomics ------------------------------------------------------------------------------ */

static void fence_gpu(Cg *c) { cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), NULL, 0, "fence.acq_rel.gpu;", "~{memory}", true); }

static bool releases(const IrOp *op) { return op->attr.i == IR_SEM_ACQ_REL || op->attr.i == IR_SEM_RELEASE; }
static bool acquires(const IrOp *op) { return op->attr.i == IR_SEM_ACQ_REL || op->attr.i == IR_SEM_ACQUIRE; }

static LLVMAtomicRMWBinOp rmw_op(IrOpcode code, IrElem e)
{
    bool fl = ir_elem_is_float(e), s = ir_elem_is_signed(e);
    switch (code) {
    case IR_OP_ATOMIC_ADD: return fl ? LLVMAtomicRMWBinOpFAdd : LLVMAtomicRMWBinOpAdd;
    case IR_OP_ATOMIC_MAX: return s ? LLVMAtomicRMWBinOpMax : LLVMAtomicRMWBinOpUMax;
    case IR_OP_ATOMIC_MIN: return s ? LLVMAtomicRMWBinOpMin : LLVMAtomicRMWBinOpUMin;
    case IR_OP_ATOMIC_AND: return LLVMAtomicRMWBinOpAnd;
    case IR_OP_ATOMIC_OR: return LLVMAtomicRMWBinOpOr;
    case IR_OP_ATOMIC_XOR: return LLVMAtomicRMWBinOpXor;
    default: return LLVMAtomicRMWBinOpXchg;
    }
}

/* Float max/min with the interpreter's NaN rule, as a compare-and-swap loop. */
static LLVMValueRef float_minmax_cas(Cg *c, LLVMValueRef p, LLVMValueRef v, IrElem e, bool is_max)
{
    LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, (unsigned)ir_elem_bits(e)), ft = cg_elem_type(c, e);
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), loop = cg_block_new(c, "cas"), done = cg_block_new(c, "cas.done");
    LLVMValueRef first = LLVMBuildLoad2(c->b, it, p, "");
    LLVMSetVolatile(first, 1);
    LLVMBuildBr(c->b, loop);
    LLVMPositionBuilderAtEnd(c->b, loop);
    LLVMValueRef old = LLVMBuildPhi(c->b, it, "");
    LLVMValueRef of = cg_to_f32(c, LLVMBuildBitCast(c->b, old, ft, ""), e), vf = cg_to_f32(c, v, e);
    LLVMValueRef nf = cg_fmaximum(c, of, vf, is_max);
    LLVMValueRef onan = LLVMBuildFCmp(c->b, LLVMRealUNO, of, of, "");
    nf = LLVMBuildSelect(c->b, onan, of, nf, "");       /* a NaN in memory stays */
    LLVMValueRef nv = LLVMBuildBitCast(c->b, cg_from_f32(c, nf, e), it, "");
    LLVMValueRef pair = LLVMBuildAtomicCmpXchg(c->b, p, old, nv, LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
    LLVMValueRef seen = LLVMBuildExtractValue(c->b, pair, 0, "");
    LLVMValueRef ok = LLVMBuildExtractValue(c->b, pair, 1, "");
    LLVMValueRef vals[2] = {first, seen};
    LLVMBasicBlockRef bbs[2] = {pre, LLVMGetInsertBlock(c->b)};
    LLVMAddIncoming(old, vals, bbs, 2);
    LLVMBuildCondBr(c->b, ok, done, loop);
    LLVMPositionBuilderAtEnd(c->b, done);
    return LLVMBuildBitCast(c->b, seen, ft, "");
}

static LLVMValueRef atomic_one(Cg *c, const IrOp *op, IrElem e, uint32_t k)
{
    LLVMValueRef p = cg_at(cg_get(c, op->operands[0]), k);
    bool cas = op->code == IR_OP_ATOMIC_CAS, fl = ir_elem_is_float(e);
    LLVMValueRef v = cg_at(cg_get(c, op->operands[cas ? 2 : 1]), k);
    if (cas) {
        LLVMTypeRef it = LLVMIntTypeInContext(c->ctx, (unsigned)ir_elem_bits(e));
        LLVMValueRef cmp = cg_at(cg_get(c, op->operands[1]), k);
        if (fl) {
            cmp = LLVMBuildBitCast(c->b, cmp, it, "");
            v = LLVMBuildBitCast(c->b, v, it, "");
        }
        LLVMValueRef pair = LLVMBuildAtomicCmpXchg(c->b, p, to_mem(c, cmp, e), to_mem(c, v, e),
                                                   LLVMAtomicOrderingMonotonic, LLVMAtomicOrderingMonotonic, 0);
        LLVMValueRef old = LLVMBuildExtractValue(c->b, pair, 0, "");
        return fl ? LLVMBuildBitCast(c->b, old, cg_elem_type(c, e), "") : from_mem(c, old, e);
    }
    if (fl && (op->code == IR_OP_ATOMIC_MAX || op->code == IR_OP_ATOMIC_MIN))
        return float_minmax_cas(c, p, v, e, op->code == IR_OP_ATOMIC_MAX);
    LLVMValueRef old = LLVMBuildAtomicRMW(c->b, rmw_op(op->code, e), p, to_mem(c, v, e), LLVMAtomicOrderingMonotonic, 0);
    return from_mem(c, old, e);
}

/* ---- check_bounds (passes/bounds.c) ------------------------------------------------- */
/* Per element: mask and 0 <= (ptr - base) / sizeof(T) < n (every lane when n < 0). Of a
 * thread's elements outside, the lowest local index is its candidate; a thread with one
 * takes the report by a compare-and-swap of word 0 from 0 to 1 and, if it won, writes
 * the other words (the host reads them after synchronizing). */
static void report_word(Cg *c, LLVMValueRef rep, int word, LLVMValueRef v)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    LLVMValueRef idx = LLVMConstInt(i64, (unsigned long long)word, 0);
    LLVMValueRef at = LLVMBuildGEP2(c->b, i64, rep, &idx, 1, "");
    LLVMBuildStore(c->b, LLVMTypeOf(v) == i64 ? v : LLVMBuildSExt(c->b, v, i64, ""), at);
}

static bool lower_check_bounds(Cg *c, const IrOp *op)
{
    const IrType *pt = cg_type(c, op->operands[0]);
    IrLayoutMap l = ir_layout_map(pt);
    CgVal p = cg_get(c, op->operands[0]);
    LLVMValueRef base = cg_get(c, op->operands[1]).v[0], n = cg_get(c, op->operands[2]).v[0];
    LLVMValueRef rep = cg_get(c, op->operands[3]).v[0];
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    uint32_t ne = pt->rank ? cg_layout_elems(&l) : 1;
    CgVal out = cg_val_new(c, ne);
    LLVMValueRef zero = LLVMConstInt(i64, 0, 0), bi = LLVMBuildPtrToInt(c->b, base, i64, "");
    LLVMValueRef unchecked = LLVMBuildICmp(c->b, LLVMIntSLT, n, zero, "");
    LLVMValueRef size = LLVMConstInt(i64, (unsigned long long)ir_elem_bytes(pt->pointee), 0);
    LLVMValueRef any = LLVMConstInt(LLVMInt1TypeInContext(c->ctx), 0, 0), elem = zero, lane = cg_i32c(c, 0);
    for (uint32_t k = ne; k-- > 0;) {         /* the lowest bad index ends up selected */
        LLVMValueRef d = LLVMBuildSub(c->b, LLVMBuildPtrToInt(c->b, cg_at(p, k), i64, ""), bi, "");
        LLVMValueRef e = LLVMBuildSDiv(c->b, d, size, "");
        LLVMValueRef in = LLVMBuildOr(c->b, unchecked, LLVMBuildICmp(c->b, LLVMIntULT, e, n, ""), "");
        LLVMValueRef on = mask_at(c, op, 4, k);
        out.v[k] = LLVMBuildAnd(c->b, on, in, "");
        LLVMValueRef bad = LLVMBuildAnd(c->b, on, LLVMBuildNot(c->b, in, ""), "");
        LLVMValueRef ln = cg_i32c(c, 0);
        if (pt->rank) {
            LLVMValueRef co[IR_MAX_RANK];
            cg_layout_coords(c, &l, k, co);
            ln = cg_linear(c, &l, co);
        }
        elem = LLVMBuildSelect(c->b, bad, e, elem, "");
        lane = LLVMBuildSelect(c->b, bad, ln, lane, "");
        any = LLVMBuildOr(c->b, any, bad, "");
    }
    Guard g = guard_begin(c, any);
    LLVMValueRef pair = LLVMBuildAtomicCmpXchg(c->b, rep, zero, LLVMConstInt(i64, 1, 0), LLVMAtomicOrderingMonotonic,
                                               LLVMAtomicOrderingMonotonic, 0);
    Guard won = guard_begin(c, LLVMBuildExtractValue(c->b, pair, 1, ""));
    /* the program's id: a kernel of clusters' programs are its clusters */
    const char *const ids[3] = {ir_cluster_size(c->f) > 1 ? "clusterid.x" : "ctaid.x", "ctaid.y", "ctaid.z"};
    const IrValueInfo *bv = &c->f->values[op->operands[1]];
    report_word(c, rep, IR_BOUNDS_PARAM, LLVMConstInt(i64, bv->index, 0));
    report_word(c, rep, IR_BOUNDS_OP, LLVMConstInt(i64, (unsigned long long)op->attr.i, 0));
    for (int d = 0; d < 3; d++) report_word(c, rep, IR_BOUNDS_PID_X + d, LLVMBuildZExt(c->b, cg_sreg(c, ids[d]), i64, ""));
    report_word(c, rep, IR_BOUNDS_LANE, lane);
    report_word(c, rep, IR_BOUNDS_ELEM, elem);
    report_word(c, rep, IR_BOUNDS_COUNT, n);
    report_word(c, rep, IR_BOUNDS_LINE, LLVMConstInt(i64, op->loc.line, 0));
    report_word(c, rep, IR_BOUNDS_COL, LLVMConstInt(i64, op->loc.col, 0));
    guard_end(c, &won, NULL, NULL);
    guard_end(c, &g, NULL, NULL);
    cg_set(c, op->results[0], out);
    return true;
}

/* Is v used by no op of the kernel? */
static bool unused(const Cg *c, IrValue v)
{
    uint32_t *uses = ir_use_counts(c->f);
    bool none = uses[v] == 0;
    free(uses);
    return none;
}

/* A relaxed f32 atomic_add whose old values nothing reads, in a blocked layout without
 * copies, on sm_90: where the axis analysis proves runs of consecutive pointers, aligned
 * to the vector, under one mask value (cg_vector_width, as for a store), each run is one
 * `red.global.add.v2.f32` / `.v4.f32` (PTX ISA 8.1, sm_90), predicated by the mask.
 * Returns false, emitting nothing, where the runs are single elements: the plain atomic
 * below (LLVM's atomicrmw, which ptxas makes a RED when its result is dead). */
static bool lower_red_vector(Cg *c, const IrOp *op, const IrLayoutMap *l)
{
    if (op->code != IR_OP_ATOMIC_ADD || op->attr.i != IR_SEM_RELAXED || c->target->sm < 90 || l->rank == 0 ||
        l->kind != IR_LMAP_BLOCKED || cg_layout_replicated(l) || cg_type(c, op->results[0])->elem != IR_F32 ||
        !unused(c, op->results[0]))
        return false;
    uint32_t w = cg_vector_width(c, op, 0, l, 2, -1), n = cg_layout_elems(l);
    if (w > 4) w = 4;
    if (w == 3) w = 2;
    if (w < 2 || n % w) return false;
    CgVal ptr = cg_get(c, op->operands[0]), val = cg_get(c, op->operands[1]);
    for (uint32_t k = 0; k < n; k += w) {
        LLVMValueRef args[6];
        char cons[32] = "r,l", text[160], list[64];
        args[0] = mask_word(c, mask_at(c, op, 2, k));
        args[1] = addr_of(c, cg_at(ptr, k));
        for (uint32_t i = 0; i < w; i++) {
            args[2 + i] = cg_at(val, k + i);
            strcat(cons, ",f");
        }
        word_list(list, sizeof list, w, 2);
        snprintf(text, sizeof text, "{ .reg .pred p; setp.ne.b32 p, $0, 0; @p red.global.add%s.f32 [$1], %s; }",
                 vec_suffix[w], list);
        cg_call_asm(c, LLVMVoidTypeInContext(c->ctx), args, 2 + w, text, cons, true);
    }
    cg_set(c, op->results[0], cg_val_new(c, n));   /* never read */
    return true;
}

static bool lower_atomic(Cg *c, const IrOp *op)
{
    const IrType *rt = cg_type(c, op->results[0]);
    IrElem e = rt->elem;
    if (e == IR_I1 || ir_elem_bits(e) < 16 || (ir_elem_bits(e) == 16 && !ir_elem_is_float(e)))
        return cg_error(c, op, "'%s' on %s is not supported on the GPU (atomics need 16-bit floats or 32/64-bit values)",
                        ir_op_info[op->code].text, ir_elem_name(e));
    if (ir_elem_bits(e) == 16 && op->code != IR_OP_ATOMIC_ADD && op->code != IR_OP_ATOMIC_MAX && op->code != IR_OP_ATOMIC_MIN)
        return cg_error(c, op, "'%s' on %s is not supported on the GPU", ir_op_info[op->code].text, ir_elem_name(e));
    IrLayoutMap l = ir_layout_map(rt);
    if (lower_red_vector(c, op, &l)) return true;
    CgVal out = cg_val_new(c, cg_layout_elems(&l));
    LLVMValueRef owner = cg_layout_owner(c, &l);
    bool per_elem = l.rank > 0 && l.kind != IR_LMAP_BLOCKED;    /* narrow mma tiles: copies in one thread */
    bool cas = op->code == IR_OP_ATOMIC_CAS;
    /* One atomic a thread at most (a scalar's owner): its fences are inside its guard,
     * so the other threads skip them (each fence waits for all of its thread's
     * outstanding accesses: in a spin lock's loop, every warp's fences cost the
     * LayerNorm backward a fifth of its time); the barriers still order the other
     * threads' accesses around the owner's fences. */
    bool one = out.n == 1;
    if (releases(op)) {
        cg_barrier(c);
        if (!one) fence_gpu(c);
    }
    for (uint32_t k = 0; k < out.n; k++) {
        LLVMValueRef cond = per_elem ? cg_layout_owner_at(c, &l, k) : owner;
        uint32_t m_at = cas ? 3 : 2;       /* a masked cas comes from passes/bounds.c */
        if (op->noperands > m_at) cond = LLVMBuildAnd(c->b, cond, cg_at(cg_get(c, op->operands[m_at]), k), "");
        Guard g = guard_begin(c, cond);
        if (one && releases(op)) fence_gpu(c);
        LLVMValueRef old = atomic_one(c, op, e, k);
        if (one && acquires(op)) fence_gpu(c);
        out.v[k] = guard_end(c, &g, old, LLVMConstNull(LLVMTypeOf(old)));
    }
    if (acquires(op)) {
        if (!one) fence_gpu(c);
        if (!cg_layout_replicated(&l)) cg_barrier(c);      /* else the copies' barrier below */
    }
    if (cg_layout_replicated(&l)) {          /* copies take the owner's old value */
        LLVMTypeRef mt = cg_mem_type(c, e);
        cg_barrier(c);
        Guard g = {0};
        if (!per_elem) g = guard_begin(c, owner);
        for (uint32_t k = 0; k < out.n; k++) {
            LLVMValueRef co[IR_MAX_RANK];
            Guard ge = {0};
            if (per_elem) ge = guard_begin(c, cg_layout_owner_at(c, &l, k));
            cg_layout_coords(c, &l, k, co);
            LLVMBuildStore(c->b, to_mem(c, out.v[k], e), cg_smem_ptr(c, cg_linear(c, &l, co), mt, 0));
            if (per_elem) guard_end(c, &ge, NULL, NULL);
        }
        if (!per_elem) guard_end(c, &g, NULL, NULL);
        cg_barrier(c);
        for (uint32_t k = 0; k < out.n; k++) {
            LLVMValueRef co[IR_MAX_RANK];
            cg_layout_coords(c, &l, k, co);
            out.v[k] = from_mem(c, LLVMBuildLoad2(c->b, mt, cg_smem_ptr(c, cg_linear(c, &l, co), mt, 0), ""), e);
        }
    }
    cg_set(c, op->results[0], out);
    return true;
}

bool cg_memory(Cg *c, const IrOp *op)
{
    switch (op->code) {
    case IR_OP_LOAD: return lower_load(c, op);
    case IR_OP_STORE: return lower_store(c, op);
    case IR_OP_CHECK_BOUNDS: return lower_check_bounds(c, op);
    case IR_OP_BARRIER:                      /* bar.sync orders the CTA's memory accesses too */
        cg_barrier(c);
        return true;
    default: return lower_atomic(c, op);
    }
}
