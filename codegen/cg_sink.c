/* Arithmetic where it is used: into the block of its uses, and there just before the
 * first of them. Runs on the optimized LLVM IR, after cg_occupancy's register estimate
 * (calibrated on the optimizer's order).
 *
 * Codegen lowers a Tile IR op for all of a thread's elements before the next op
 * (cg_elementwise.c), so an epilogue such as GEMM + bias + GELU reaches LLVM stage by
 * stage: 128 `x + bias`, then 128 `x * 0.5`, 128 `x / sqrt 2`, 128 erfs, ..., every
 * stage's values live at once beside the next's. LLVM's NVPTX backend keeps the order
 * (source-order scheduling) and ptxas does not undo it; worse, the backend's machine
 * sinking moved the tail of each chain into the block of the TMA-store staging and left
 * its head behind, so the heads of all 128 chains were live across the branch. The
 * 128 x 128 GEMM + GELU of ping-pong spilled 384 bytes a thread, matmul_bf16-sized GEMM
 * + GELU (128 x 256, 8 warps) 56 bytes at 255 registers. Two steps:
 *   1. LLVM's `sink` pass: an instruction without effects whose uses are all in one
 *      successor's dominance region moves there (never into a loop), whole chains at once.
 *   2. In each block, a pure instruction (arithmetic, compares, casts, selects, address
 *      arithmetic, intrinsics and inline assembly without effects) is placed right after
 *      its operands and just before its first use: an element's whole chain, then the
 *      next element's. Values used after the block (or after a fence, below) are placed
 *      in their original order, each pulling its chain with it.
 * What does not move, and what nothing crosses: everything else keeps its order (loads,
 * stores, calls and inline assembly with effects, phis, the terminator), and no pure
 * instruction is pulled across a call or inline assembly with effects (a barrier, a
 * wgmma or its wait, an mbarrier wait, a TMA copy): those are fences. So the softmax that
 * passes/rotate.c puts between a wgmma's issue and its wait stays between them, and the
 * memory accesses keep their order. Only the order changes: the instructions and their
 * operands are the same (docs/DECISIONS.md, "Arithmetic where it is used").
 *
 * ptxas -v on sm_90a, before and after: GEMM + bias + GELU (128, 256, 64, 8, 4) 255
 * registers and 56 bytes of spills -> 193 and none (ptxas 482 -> 276 ms); its ping-pong
 * 128 x 128 form 384 -> 32 bytes; fp8 GEMM 254 -> 179 registers; the graph compiler's
 * GEMMs 188 -> 169 (docs/CODEGEN.md section 6). TILE_SINK=0 keeps the optimizer's
 * order (an A/B knob for the GPU benchmarks; the kernel cache does not see it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/cg_internal.h"

typedef enum { SK_PURE, SK_ANCHOR, SK_FENCE } SinkKind;

typedef struct Sink {
    LLVMValueRef *ins;               /* the block's instructions, original order */
    uint8_t *kind, *done;
    uint8_t *inner;                  /* a pure instruction of the block uses it */
    uint32_t n;
    LLVMValueRef *keys;              /* open addressing: instruction -> index + 1 */
    uint32_t *vals, cap;
    uint32_t *stack;                 /* the operand walk: index, next operand */
    uint32_t *opnd;
    LLVMBuilderRef b;
    unsigned memory_kind, convergent_kind;
} Sink;

static uint32_t slot(const Sink *s, LLVMValueRef v)
{
    uint64_t x = (uint64_t)(uintptr_t)v;
    x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 29;
    return (uint32_t)x & (s->cap - 1);
}

static uint32_t lookup(const Sink *s, LLVMValueRef v)
{
    for (uint32_t h = slot(s, v);; h = (h + 1) & (s->cap - 1)) {
        if (!s->keys[h]) return 0;
        if (s->keys[h] == v) return s->vals[h];
    }
}

/* A call without effects: its own or its callee's `memory` attribute is none (codegen
 * marks inline assembly that only computes so, e.g. cvt.rn.bf16x2; the predicated
 * loads in assembly read memory and stay anchors), not convergent (shuffles, barriers),
 * and no inline assembly with side effects. */
static bool pure_call(const Sink *s, LLVMValueRef call)
{
    LLVMValueRef f = LLVMGetCalledValue(call);
    if (!f || LLVMGetCallSiteEnumAttribute(call, LLVMAttributeFunctionIndex, s->convergent_kind)) return false;
    LLVMAttributeRef mem = LLVMGetCallSiteEnumAttribute(call, LLVMAttributeFunctionIndex, s->memory_kind);
    if (LLVMIsAInlineAsm(f)) return !LLVMGetInlineAsmHasSideEffects(f) && mem && LLVMGetEnumAttributeValue(mem) == 0;
    if (!LLVMIsAFunction(f) || LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, s->convergent_kind)) return false;
    if (!mem) mem = LLVMGetEnumAttributeAtIndex(f, LLVMAttributeFunctionIndex, s->memory_kind);
    return mem && LLVMGetEnumAttributeValue(mem) == 0;
}

static SinkKind kind_of(const Sink *s, LLVMValueRef in)
{
    switch (LLVMGetInstructionOpcode(in)) {
    case LLVMAdd: case LLVMFAdd: case LLVMSub: case LLVMFSub: case LLVMMul: case LLVMFMul:
    case LLVMUDiv: case LLVMSDiv: case LLVMFDiv: case LLVMURem: case LLVMSRem: case LLVMFRem:
    case LLVMShl: case LLVMLShr: case LLVMAShr: case LLVMAnd: case LLVMOr: case LLVMXor: case LLVMFNeg:
    case LLVMTrunc: case LLVMZExt: case LLVMSExt: case LLVMFPToUI: case LLVMFPToSI: case LLVMUIToFP:
    case LLVMSIToFP: case LLVMFPTrunc: case LLVMFPExt: case LLVMPtrToInt: case LLVMIntToPtr:
    case LLVMBitCast: case LLVMAddrSpaceCast: case LLVMICmp: case LLVMFCmp: case LLVMSelect:
    case LLVMGetElementPtr: case LLVMExtractElement: case LLVMInsertElement: case LLVMShuffleVector:
    case LLVMExtractValue: case LLVMInsertValue: case LLVMFreeze:
        return SK_PURE;
    case LLVMCall:
        return pure_call(s, in) ? SK_PURE : SK_FENCE;
    case LLVMRet: case LLVMBr: case LLVMSwitch: case LLVMIndirectBr: case LLVMUnreachable: case LLVMFence:
    case LLVMAtomicCmpXchg: case LLVMAtomicRMW:
        return SK_FENCE;
    default:                           /* loads, stores, phis, allocas */
        return SK_ANCHOR;
    }
}

/* Places instruction i after the pure instructions of this block it uses that are not
 * placed yet (depth first, in operand order). */
static void pull(Sink *s, uint32_t i)
{
    uint32_t top = 0;
    s->stack[top] = i, s->opnd[top++] = 0;
    s->done[i] = 1;                    /* on the walk: a use never reaches it again (SSA) */
    while (top) {
        uint32_t x = s->stack[top - 1], k = s->opnd[top - 1];
        LLVMValueRef in = s->ins[x];
        if (k < (uint32_t)LLVMGetNumOperands(in)) {
            s->opnd[top - 1] = k + 1;
            LLVMValueRef o = LLVMGetOperand(in, k);
            uint32_t j = o && LLVMIsAInstruction(o) ? lookup(s, o) : 0;
            if (j-- && s->kind[j] == SK_PURE && !s->done[j]) {
                s->done[j] = 1;
                s->stack[top] = j, s->opnd[top++] = 0;
            }
            continue;
        }
        LLVMInsertIntoBuilder(s->b, in);
        top--;
    }
}

static void sink_block(Sink *s, LLVMBasicBlockRef bb)
{
    uint32_t n = 0;
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) n++;
    if (n < 3) return;
    s->ins = tl_malloc(n * sizeof *s->ins);
    s->kind = tl_malloc(n);
    s->done = tl_calloc(n, 1);
    s->inner = tl_calloc(n, 1);
    s->stack = tl_malloc(n * sizeof *s->stack);
    s->opnd = tl_malloc(n * sizeof *s->opnd);
    s->cap = 16;
    while (s->cap < 2 * n) s->cap *= 2;
    s->keys = tl_calloc(s->cap, sizeof *s->keys);
    s->vals = tl_malloc(s->cap * sizeof *s->vals);
    if (!s->ins || !s->kind || !s->done || !s->inner || !s->stack || !s->opnd || !s->keys || !s->vals) tl_oom();
    s->n = 0;
    bool any = false;
    for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in; in = LLVMGetNextInstruction(in)) {
        uint32_t h = slot(s, in);
        while (s->keys[h]) h = (h + 1) & (s->cap - 1);
        s->keys[h] = in, s->vals[h] = s->n + 1;
        s->kind[s->n] = (uint8_t)kind_of(s, in);
        any |= s->kind[s->n] == SK_PURE;
        s->ins[s->n++] = in;
    }
    if (any) {
        for (uint32_t i = 0; i < n; i++)
            for (LLVMUseRef u = LLVMGetFirstUse(s->ins[i]); u && !s->inner[i]; u = LLVMGetNextUse(u)) {
                uint32_t j = lookup(s, LLVMGetUser(u));
                s->inner[i] = j && s->kind[j - 1] == SK_PURE;
            }
        for (uint32_t i = 0; i < n; i++) LLVMInstructionRemoveFromParent(s->ins[i]);
        LLVMPositionBuilderAtEnd(s->b, bb);
        uint32_t lo = 0;                 /* every pure instruction before lo is placed */
        for (uint32_t i = 0; i < n; i++) {
            if (s->kind[i] == SK_PURE) continue;
            if (s->kind[i] == SK_FENCE) {   /* what is still waiting goes before the fence: */
                for (uint32_t k = lo; k < i; k++)   /* the values used after it, each with its chain */
                    if (s->kind[k] == SK_PURE && !s->done[k] && !s->inner[k]) pull(s, k);
                for (; lo < i; lo++)
                    if (s->kind[lo] == SK_PURE && !s->done[lo]) pull(s, lo);
            }
            if (LLVMIsAPHINode(s->ins[i])) {   /* its operands come from the edges */
                s->done[i] = 1;
                LLVMInsertIntoBuilder(s->b, s->ins[i]);
            } else {
                pull(s, i);
            }
        }
    }
    tl_free(s->ins), tl_free(s->kind), tl_free(s->done), tl_free(s->inner), tl_free(s->stack), tl_free(s->opnd);
    tl_free(s->keys), tl_free(s->vals);
}

void cg_sink(LLVMModuleRef mod, LLVMTargetMachineRef tm, const TileKnobs *knobs)
{
    if (!knobs->sink) return;
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(mod, "function(sink)", tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (e) LLVMConsumeError(e);        /* a pass that cannot run leaves the order as it was */
    Sink s = {0};
    s.b = LLVMCreateBuilderInContext(LLVMGetModuleContext(mod));
    s.memory_kind = LLVMGetEnumAttributeKindForName("memory", 6);
    s.convergent_kind = LLVMGetEnumAttributeKindForName("convergent", 10);
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb)) sink_block(&s, bb);
    LLVMDisposeBuilder(s.b);
}
