/* The code generator's driver: the NVPTX target machine, one LLVM module per Tile IR
 * module, one kernel entry per kernel (parameters, thread ids, shared memory, launch
 * bounds), LLVM's pipeline (CG_PASSES) and PTX emission; plus the small helpers every
 * family file uses (types, constants, intrinsics, integer index arithmetic, errors).
 *
 * Why through the C API and in memory: the compiler runs inside a library (the JIT),
 * so nothing goes through files or child processes. LLVM 19 only warns about an
 * unknown CPU, so the architecture is checked here first (GPU-NOTES.md). */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "codegen/cg_internal.h"
#include "ir/layout.h"
#include "ir/target.h"

#define CG_TRIPLE "nvptx64-nvidia-cuda"
#define CG_PTX_FEATURES "+ptx83"     /* PTX 8.3: what LLVM 19 knows well and the driver loads */

/* The targets are ir/target.h's table. */
bool cg_arch_supported(const char *arch) { return arch && tile_target(arch) != NULL; }

const char *cg_compiler_id(void) { return tile_compiler_id(); }

static uint32_t smem_limit(const char *arch)
{
    const TileTarget *t = tile_target(arch);
    return t ? t->smem_optin : 0;
}

/* ---- helpers shared by the family files --------------------------------------------- */

bool cg_error(Cg *c, const IrOp *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    diag_vadd(c->diags, DIAG_ERROR, op ? op->loc : c->f->loc, fmt, ap);
    va_end(ap);
    c->failed = true;
    return false;
}

LLVMTypeRef cg_elem_type(Cg *c, IrElem e)
{
    switch (e) {
    case IR_I1: return LLVMInt1TypeInContext(c->ctx);
    case IR_I8: case IR_U8: case IR_F8E4M3: case IR_F8E5M2: return LLVMInt8TypeInContext(c->ctx);
    case IR_I16: case IR_U16: return LLVMInt16TypeInContext(c->ctx);
    case IR_I32: case IR_U32: return LLVMInt32TypeInContext(c->ctx);
    case IR_I64: case IR_U64: return LLVMInt64TypeInContext(c->ctx);
    case IR_F16: return LLVMHalfTypeInContext(c->ctx);
    case IR_BF16: return LLVMBFloatTypeInContext(c->ctx);
    case IR_F32: return LLVMFloatTypeInContext(c->ctx);
    case IR_F64: return LLVMDoubleTypeInContext(c->ctx);
    default: return LLVMPointerTypeInContext(c->ctx, 1);
    }
}

LLVMTypeRef cg_mem_type(Cg *c, IrElem e)
{
    return e == IR_I1 ? LLVMInt8TypeInContext(c->ctx) : cg_elem_type(c, e);
}

LLVMTypeRef cg_i32(Cg *c) { return LLVMInt32TypeInContext(c->ctx); }
LLVMValueRef cg_int(Cg *c, LLVMTypeRef t, int64_t v) { return LLVMConstInt(t, (unsigned long long)v, 1); }
LLVMValueRef cg_i32c(Cg *c, int64_t v) { return cg_int(c, cg_i32(c), v); }

/* ---- integer index arithmetic ------------------------------------------------------ */
/* Index math (layout coordinates, swizzles, shared-memory offsets) multiplies by
 * strides of 1, adds offsets of 0 and masks axes of extent 1, once per element; these
 * build nothing for such identities, so that LLVM's pipeline, NVPTX's and the time
 * they take start from less (docs/DECISIONS.md, "Cold compile"). Integers only (a
 * float x + 0.0 is not x for x = -0.0); exact, and flag-free like what they replace. */
static bool is_int(LLVMValueRef v, int64_t k)
{
    return LLVMIsAConstantInt(v) && LLVMConstIntGetSExtValue(v) == k;
}

LLVMValueRef cg_add(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    if (is_int(x, 0)) return y;
    return is_int(y, 0) ? x : LLVMBuildAdd(b, x, y, "");
}

LLVMValueRef cg_mul(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    if (is_int(x, 0) || is_int(y, 0)) return LLVMConstNull(LLVMTypeOf(x));
    if (is_int(x, 1)) return y;
    return is_int(y, 1) ? x : LLVMBuildMul(b, x, y, "");
}

/* -1 is every bit set at any width (true for i1). */
LLVMValueRef cg_and(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    if (is_int(x, 0) || is_int(y, 0)) return LLVMConstNull(LLVMTypeOf(x));
    if (is_int(x, -1)) return y;
    return is_int(y, -1) ? x : LLVMBuildAnd(b, x, y, "");
}

LLVMValueRef cg_or(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    if (is_int(x, 0)) return y;
    return is_int(y, 0) ? x : LLVMBuildOr(b, x, y, "");
}

LLVMValueRef cg_udiv(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    return is_int(y, 1) ? x : LLVMBuildUDiv(b, x, y, "");
}

LLVMValueRef cg_urem(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    return is_int(y, 1) ? LLVMConstNull(LLVMTypeOf(x)) : LLVMBuildURem(b, x, y, "");
}

LLVMValueRef cg_shl(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    return is_int(y, 0) ? x : LLVMBuildShl(b, x, y, "");
}

LLVMValueRef cg_lshr(LLVMBuilderRef b, LLVMValueRef x, LLVMValueRef y)
{
    return is_int(y, 0) ? x : LLVMBuildLShr(b, x, y, "");
}
LLVMValueRef cg_f32c(Cg *c, double v) { return LLVMConstReal(LLVMFloatTypeInContext(c->ctx), v); }
LLVMValueRef cg_f64c(Cg *c, double v) { return LLVMConstReal(LLVMDoubleTypeInContext(c->ctx), v); }

LLVMValueRef cg_intrinsic(Cg *c, const char *name, LLVMTypeRef *tys, unsigned ntys,
                          LLVMValueRef *args, unsigned nargs)
{
    unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
    LLVMValueRef fn = LLVMGetIntrinsicDeclaration(c->mod, id, tys, ntys);
    LLVMTypeRef fty = LLVMIntrinsicGetType(c->ctx, id, tys, ntys);
    return LLVMBuildCall2(c->b, fty, fn, args, nargs, "");
}

LLVMValueRef cg_call(Cg *c, LLVMValueRef fn, LLVMValueRef *args, unsigned n)
{
    return LLVMBuildCall2(c->b, LLVMGlobalGetValueType(fn), fn, args, n, "");
}

LLVMBasicBlockRef cg_block_new(Cg *c, const char *name) { return LLVMAppendBasicBlockInContext(c->ctx, c->fn, name); }

/* A barrier of the program: every thread, or after a producer warpgroup split off
 * (cg_tma.c) the consumers' named barrier 1. */
void cg_barrier(Cg *c)
{
    if (!c->consumers) {
        cg_intrinsic(c, "llvm.nvvm.barrier0", NULL, 0, NULL, 0);
        return;
    }
    /* a pingpong kernel's warpgroups: named barriers 1 and 2, one each */
    LLVMValueRef id = c->groups > 1 ? LLVMBuildAdd(c->b, c->group, cg_i32c(c, 1), "") : cg_i32c(c, 1);
    LLVMValueRef args[2] = {id, cg_i32c(c, c->threads)};
    cg_intrinsic(c, "llvm.nvvm.barrier.sync.cnt", NULL, 0, args, 2);
}

LLVMValueRef cg_thread_value(Cg *c, const int32_t key[8])
{
    for (uint32_t i = 0; i < c->nmemo; i++)
        if (!memcmp(c->memo[i].key, key, sizeof c->memo[i].key)) return c->memo[i].v;
    return NULL;
}

LLVMBuilderRef cg_thread_builder(Cg *c)
{
    if (!c->entry_b) {
        c->entry_b = LLVMCreateBuilderInContext(c->ctx);
        LLVMPositionBuilderBefore(c->entry_b, c->anchor);
    }
    return c->entry_b;
}

LLVMValueRef cg_thread_remember(Cg *c, const int32_t key[8], LLVMValueRef v)
{
    if (c->nmemo == c->memo_cap) {
        c->memo_cap = c->memo_cap ? 2 * c->memo_cap : 32;
        void *p = tl_realloc(c->memo, c->memo_cap * sizeof *c->memo);
        if (!p) tl_oom();
        c->memo = p;
    }
    memcpy(c->memo[c->nmemo].key, key, sizeof c->memo[c->nmemo].key);
    c->memo[c->nmemo++].v = v;
    return v;
}

/* Plain (not inbounds) GEPs: the buffer is declared with size 0, its real size is the
 * launch's dynamic shared memory. */
LLVMValueRef cg_smem_ptr(Cg *c, LLVMValueRef index, LLVMTypeRef elem_ty, uint32_t byte_base)
{
    LLVMTypeRef i8 = LLVMInt8TypeInContext(c->ctx);
    LLVMValueRef base = c->smem;
    if (c->scratch) base = LLVMBuildGEP2(c->b, i8, base, &c->scratch, 1, "");   /* this warpgroup's scratch */
    if (byte_base) {
        LLVMValueRef off = cg_i32c(c, byte_base);
        base = LLVMBuildGEP2(c->b, i8, base, &off, 1, "");
    }
    return LLVMBuildGEP2(c->b, elem_ty, base, &index, 1, "");
}

void cg_loop_begin(Cg *c, CgLoop *l, LLVMValueRef start, LLVMValueRef end, LLVMValueRef *init, uint32_t n)
{
    l->pre = LLVMGetInsertBlock(c->b);
    l->head = cg_block_new(c, "loop");
    l->exit = cg_block_new(c, "loop.end");
    LLVMBasicBlockRef body = cg_block_new(c, "loop.body");
    l->n = n;
    l->carried = arena_alloc(c->arena, (n ? n : 1) * sizeof *l->carried);
    LLVMBuildBr(c->b, l->head);
    LLVMPositionBuilderAtEnd(c->b, l->head);
    l->i = LLVMBuildPhi(c->b, cg_i32(c), "i");
    LLVMAddIncoming(l->i, &start, &l->pre, 1);
    for (uint32_t k = 0; k < n; k++) {
        l->carried[k] = LLVMBuildPhi(c->b, LLVMTypeOf(init[k]), "");
        LLVMAddIncoming(l->carried[k], &init[k], &l->pre, 1);
    }
    LLVMBuildCondBr(c->b, LLVMBuildICmp(c->b, LLVMIntSLT, l->i, end, ""), body, l->exit);
    LLVMPositionBuilderAtEnd(c->b, body);
}

void cg_loop_end(Cg *c, CgLoop *l, LLVMValueRef step, LLVMValueRef *next)
{
    LLVMValueRef ni = LLVMBuildAdd(c->b, l->i, step, "");
    LLVMBasicBlockRef latch = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, l->head);
    LLVMAddIncoming(l->i, &ni, &latch, 1);
    for (uint32_t k = 0; k < l->n; k++) LLVMAddIncoming(l->carried[k], &next[k], &latch, 1);
    LLVMPositionBuilderAtEnd(c->b, l->exit);
}

CgVal cg_val_new(Cg *c, uint32_t n)
{
    CgVal x = {n, arena_alloc(c->arena, (n ? n : 1) * sizeof(LLVMValueRef))};
    return x;
}

CgVal cg_get(Cg *c, IrValue v)
{
    if (c->lazy && c->lazy[v]) cg_shared_fill_all(c, v);
    return c->vals[v];
}
void cg_set(Cg *c, IrValue v, CgVal x) { c->vals[v] = x; }
const IrType *cg_type(Cg *c, IrValue v) { return ir_value_type(c->f, v); }

/* ---- the plan's shared memory ----------------------------------------------------------- */
/* passes/plan.c decided the kernel's shared memory (ir/plan.h); codegen reads where the
 * buffer area starts and each warpgroup's scratch, and says so, at the op that needs
 * the most, when the kernel needs more than a block may have (it would only fail at
 * launch: cuFuncSetAttribute, CUDA_ERROR_INVALID_VALUE). */
typedef struct SmemWalk {
    const IrFunc *f;
    uint32_t bytes;
    const IrOp *op;
} SmemWalk;

static void smem_visit(IrOp *op, void *ud)
{
    SmemWalk *w = ud;
    uint32_t b = ir_op_scratch_bytes(w->f, op);
    if (b > w->bytes) w->bytes = b, w->op = op;
}

static bool check_smem(Cg *c, const IrFunc *k, const char *arch)
{
    const IrPlan *p = k->plan;
    c->f = k;
    if (!p) return cg_error(c, NULL, "internal error: kernel '%s' has no resource plan: run the GPU pipeline "
                            "(pass_run_gpu) first", k->name);
    c->f = k;
    c->smem_buffers = p->buffers_at;
    c->scratch_stride = p->scratch_stride;
    uint32_t need = p->shared_bytes, limit = smem_limit(arch), buffers = ir_buffer_area_bytes(k);
    if (need <= limit) return true;
    if (buffers)
        return cg_error(c, NULL, "kernel '%s' needs %u bytes of shared memory (%u of buffers for pipelined dot "
                        "operands after %u of scratch), more than the %u bytes a block may use on %s; use smaller "
                        "tiles or fewer stages", k->name, need, buffers, p->buffers_at, limit, arch);
    SmemWalk w = {k, 0, NULL};
    ir_walk((IrBlock *)&k->body, smem_visit, &w);
    const char *what = w.op ? ir_op_info[w.op->code].text : "kernel";
    return cg_error(c, w.op, "kernel '%s' needs %u bytes of shared memory for this %s, more than the %u bytes a "
                    "block may use on %s; use smaller tiles%s", k->name, need, what, limit, arch,
                    w.op && w.op->code == IR_OP_DOT ? " (the dot stages a and b there as 32-bit values)" : "");
}

/* ---- kernels ------------------------------------------------------------------------------ */

/* i1 travels as a byte (C has no 1-bit argument); everything else as its width. */
static LLVMTypeRef param_type(Cg *c, const IrType *t)
{
    return t->elem == IR_I1 ? LLVMInt8TypeInContext(c->ctx) : cg_elem_type(c, t->elem);
}

void cg_annotate(LLVMModuleRef mod, LLVMValueRef fn, const char *key, int value)
{
    LLVMContextRef ctx = LLVMGetModuleContext(mod);
    LLVMMetadataRef ops[3] = {
        LLVMValueAsMetadata(fn),
        LLVMMDStringInContext2(ctx, key, strlen(key)),
        LLVMValueAsMetadata(LLVMConstInt(LLVMInt32TypeInContext(ctx), (unsigned long long)value, 1)),
    };
    LLVMMetadataRef node = LLVMMDNodeInContext2(ctx, ops, 3);
    LLVMAddNamedMetadataOperand(mod, "nvvm.annotations", LLVMMetadataAsValue(ctx, node));
}

LLVMValueRef cg_sreg(Cg *c, const char *name)
{
    char full[64];
    snprintf(full, sizeof full, "llvm.nvvm.read.ptx.sreg.%s", name);
    return cg_intrinsic(c, full, NULL, 0, NULL, 0);
}

static void bind_params(Cg *c)
{
    const IrBlock *body = &c->f->body;
    for (uint32_t i = 0; i < body->nargs; i++) {
        LLVMValueRef p = LLVMGetParam(c->fn, i);
        const IrType *t = cg_type(c, body->args[i]);
        const char *name = c->f->param_names ? c->f->param_names[i] : NULL;
        if (name) LLVMSetValueName2(p, name, strlen(name));
        CgVal x = cg_val_new(c, 1);
        x.v[0] = t->elem == IR_I1 ? LLVMBuildICmp(c->b, LLVMIntNE, p, cg_int(c, LLVMTypeOf(p), 0), "") : p;
        cg_set(c, body->args[i], x);
    }
}

static LLVMValueRef shared_memory(Cg *c)
{
    const char *name = "__tile_smem";
    LLVMValueRef g = LLVMGetNamedGlobal(c->mod, name);
    if (g) return g;
    LLVMTypeRef ty = LLVMArrayType2(LLVMInt8TypeInContext(c->ctx), 0);
    g = LLVMAddGlobalInAddressSpace(c->mod, ty, name, 3);
    LLVMSetLinkage(g, LLVMExternalLinkage);
    LLVMSetAlignment(g, 128);              /* swizzled buffers repeat every 128 bytes */
    return g;
}

/* Code after a `return` was emitted into blocks without predecessors; they end in
 * `unreachable` and LLVM deletes them. */
static void terminate_dead_blocks(Cg *c)
{
    for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(c->fn); bb; bb = LLVMGetNextBasicBlock(bb))
        if (!LLVMGetBasicBlockTerminator(bb)) {
            LLVMPositionBuilderAtEnd(c->b, bb);
            LLVMBuildUnreachable(c->b);
        }
}

static bool build_kernel(Cg *c, const IrFunc *k, uint64_t aligned)
{
    uint32_t np = k->body.nargs;
    LLVMTypeRef *pts = tl_calloc(np ? np : 1, sizeof *pts);
    if (!pts) tl_oom();
    const IrPlan *plan = k->plan;
    c->f = k;
    c->warps = (int)plan->group_threads / 32;
    c->threads = (int)plan->group_threads;
    c->producer_threads = plan->producer_threads;
    c->consumers = c->in_producer = false;
    c->groups = (int)plan->groups;
    c->raw_tid = c->group = c->scratch = NULL;
    if (plan->nuses != cg_tma_ops(k)) {
        tl_free(pts);
        return cg_error(c, NULL, "internal error: kernel '%s' copies by TMA from a tensor not known on the host, or "
                        "from more than %d", k->name, IR_PLAN_MAX_TMA);
    }
    c->ntma = plan->ntma;
    memcpy(c->tma, plan->tma, sizeof plan->tma);
    pts = tl_realloc(pts, (np + c->ntma + 1) * sizeof *pts);
    if (!pts) tl_oom();
    for (uint32_t i = 0; i < np; i++) pts[i] = param_type(c, cg_type(c, k->body.args[i]));
    for (uint32_t j = 0; j < c->ntma; j++) pts[np + j] = LLVMPointerTypeInContext(c->ctx, 0);
    LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(c->ctx), pts, np + c->ntma, 0);
    tl_free(pts);
    c->fn = LLVMAddFunction(c->mod, k->name, fty);
    cg_tma_params(c);
    LLVMSetFunctionCallConv(c->fn, LLVMPTXKernelCallConv);
    cg_annotate(c->mod, c->fn, "kernel", 1);
    cg_annotate(c->mod, c->fn, "maxntidx", (int)plan->threads);
    if (plan->min_ctas) cg_annotate(c->mod, c->fn, "minctasm", (int)plan->min_ctas);
    c->vals = tl_calloc(k->nvalues ? k->nvalues : 1, sizeof *c->vals);
    c->lazy = tl_calloc(k->nvalues ? k->nvalues : 1, sizeof *c->lazy);
    c->ai = axisinfo_analyze(k, aligned);
    if (!c->vals || !c->lazy || !c->ai) tl_oom();
    LLVMPositionBuilderAtEnd(c->b, cg_block_new(c, "entry"));
    c->exit_bb = cg_block_new(c, "exit");
    c->tid = c->raw_tid = cg_sreg(c, "tid.x");
    if (c->groups > 1) {   /* warpgroup 0, 1 (the producer's threads with 1: setup ops only) */
        LLVMValueRef g = LLVMBuildLShr(c->b, c->raw_tid, cg_i32c(c, 7), "");
        g = LLVMBuildSelect(c->b, LLVMBuildICmp(c->b, LLVMIntUGT, g, cg_i32c(c, 1), ""), cg_i32c(c, 1), g, "");
        /* through shfl.sync.idx from lane 0, as cg_wgmma.c's warpgroup_row: ptxas then
         * knows the group is one value in each warp and keeps what is made from it (the
         * warpgroup's K iterations, its stages' addresses, the wgmma descriptors) in
         * uniform registers; from the thread index alone they were vector values and a
         * ping-pong GEMM's K loop moved 32 descriptors a step to uniform registers
         * (R2UR), each wgmma waiting for its own */
        c->group = cg_lane0(c, g);
        c->tid = LLVMBuildAnd(c->b, c->raw_tid, cg_i32c(c, c->threads - 1), "tid");
        c->scratch = LLVMBuildMul(c->b, c->group, cg_i32c(c, (int32_t)c->scratch_stride), "scratch");
    }
    c->lane = LLVMBuildAnd(c->b, c->tid, cg_i32c(c, 31), "lane");
    c->warp = LLVMBuildLShr(c->b, c->tid, cg_i32c(c, 5), "warp");
    /* where the thread-index values go (cg_thread_builder): before this dead add, which
     * stays in the entry block however the block grows (the pipeline removes it) */
    c->anchor = LLVMBuildAdd(c->b, c->warp, cg_i32c(c, 0), "anchor");
    c->smem = shared_memory(c);
    c->wgmma = plan->buffer_align == IR_NVMMA_ALIGN;   /* NVMMA stages: wgmma reads them */
    if (c->wgmma) LLVMSetAlignment(c->smem, IR_NVMMA_ALIGN);
    bind_params(c);
    bool ok = cg_check_layouts(c, k) && cg_body(c, &k->body);
    if (!LLVMGetBasicBlockTerminator(LLVMGetInsertBlock(c->b))) LLVMBuildBr(c->b, c->exit_bb);
    LLVMPositionBuilderAtEnd(c->b, c->exit_bb);
    LLVMBuildRetVoid(c->b);
    terminate_dead_blocks(c);
    tl_free(c->vals);
    tl_free(c->lazy);
    tl_free(c->ai);
    tl_free(c->memo);
    if (c->entry_b) LLVMDisposeBuilder(c->entry_b);
    c->lazy = NULL;
    c->vals = NULL;
    c->ai = NULL;
    c->memo = NULL;
    c->nmemo = c->memo_cap = 0;
    c->entry_b = NULL;
    return ok && !c->failed;
}

/* ---- the target and the pipeline ---------------------------------------------------------- */

/* Once per process, also when several threads compile at once (the tuner does). */
static void init_nvptx(void)
{
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
}

static LLVMTargetMachineRef target_machine(const char *arch, DiagList *d)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_nvptx);
    LLVMTargetRef t;
    char *err = NULL;
    if (LLVMGetTargetFromTriple(CG_TRIPLE, &t, &err)) {
        diag_error(d, (Loc){0}, "the NVPTX target is not available in this LLVM: %s", err ? err : "");
        LLVMDisposeMessage(err);
        return NULL;
    }
    return LLVMCreateTargetMachine(t, CG_TRIPLE, arch, CG_PTX_FEATURES, LLVMCodeGenLevelAggressive,
                                   LLVMRelocDefault, LLVMCodeModelDefault);
}

typedef struct Job {
    LLVMContextRef ctx;
    LLVMModuleRef mod;
    LLVMTargetMachineRef tm;
    int *mincta;                 /* per m->funcs entry: `.minnctapersm` to write, 0: none */
} Job;

static void job_free(Job *j)
{
    if (j->mod) LLVMDisposeModule(j->mod);
    if (j->tm) LLVMDisposeTargetMachine(j->tm);
    if (j->ctx) LLVMContextDispose(j->ctx);
    tl_free(j->mincta);
}

static bool lower_module(Job *j, const IrModule *m, const CgOptions *o, DiagList *d)
{
    Cg c = {.ctx = j->ctx, .mod = j->mod, .diags = d, .arena = arena_create()};
    if (!c.arena) tl_oom();
    c.target = tile_target(o->arch);
    const char *arch = c.target->name;
    c.b = LLVMCreateBuilderInContext(j->ctx);
    bool ok = true;
    for (uint32_t i = 0; i < m->nfuncs && ok; i++)
        if (m->funcs[i]->kind == IR_FUNC_KERNEL)
            ok = check_smem(&c, m->funcs[i], arch) && build_kernel(&c, m->funcs[i], o->aligned_params);
    LLVMDisposeBuilder(c.b);
    arena_destroy(c.arena);
    return ok;
}

static bool verify(Job *j, DiagList *d)
{
    char *msg = NULL;
    if (!LLVMVerifyModule(j->mod, LLVMReturnStatusAction, &msg)) {
        LLVMDisposeMessage(msg);
        return true;
    }
    diag_error(d, (Loc){0}, "internal error: the generated LLVM IR does not verify: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
    return false;
}

/* LLVM's pipeline: the passes of default<O3> that change tile's kernels, in O3's order
 * (docs/DECISIONS.md, "Cold compile"). The others were removed one at a time while the
 * PTX of every example, every lit kernel and the benchmarks' tensor-core configs stayed
 * byte for byte O3's (but two multi-kernel lit files, whose kernels O3 visits in
 * another order: same instructions, other register numbers). A module is its
 * kernels, without calls, so the inliner and most interprocedural passes have nothing
 * to do; instcombine runs 5 times instead of 8; no loop vectorizer. The bf16 GEMM's
 * optimization: 31% fewer instructions executed. tests/lit/codegen/llvm_pipeline.tile
 * holds what it must keep giving the GEMM. */
static const char CG_PASSES[] =
    "function(nvvm-intr-range,simplifycfg,early-cse),ipsccp,"
    "function(instcombine<no-verify-fixpoint>,simplifycfg<switch-range-to-icmp>,early-cse<memssa>,"
    "speculative-execution<only-if-divergent-target>,instcombine<no-verify-fixpoint>,reassociate,"
    "loop-mssa(loop-instsimplify,loop-simplifycfg,licm<no-allowspeculation>,loop-rotate,licm,"
    "simple-loop-unswitch<nontrivial;trivial>),"
    "simplifycfg<switch-range-to-icmp>,instcombine<no-verify-fixpoint>,"
    "loop(loop-idiom,indvars,simple-loop-unswitch<nontrivial;trivial>,loop-deletion,loop-unroll-full),"
    "vector-combine,mldst-motion<no-split-footer-bb>,gvn,instcombine<no-verify-fixpoint>,"
    "correlated-propagation,simplifycfg<switch-range-to-icmp;hoist-common-insts;sink-common-insts>),"
    "globalopt,"
    "function(slp-vectorizer,loop-unroll<O3>,infer-alignment,instcombine<no-verify-fixpoint>,"
    "loop-mssa(licm),div-rem-pairs),"
    "constmerge";

static bool optimize(Job *j, const CgOptions *o, DiagList *d)
{
    if (o->opt_level <= 0) return true;
    LLVMPassBuilderOptionsRef po = LLVMCreatePassBuilderOptions();
    LLVMErrorRef e = LLVMRunPasses(j->mod, CG_PASSES, j->tm, po);
    LLVMDisposePassBuilderOptions(po);
    if (!e) return true;
    char *msg = LLVMGetErrorMessage(e);
    diag_error(d, (Loc){0}, "internal error: the LLVM pipeline failed: %s", msg);
    LLVMDisposeErrorMessage(msg);
    return false;
}

/* v (an i32 or i64 value that every lane of the warp holds) through shfl.sync.idx from
 * lane 0, at the builder's position, where every lane of the warp runs: ptxas then
 * knows it is one value in the warp and keeps it, and what is computed from it, in
 * uniform registers (wgmma descriptors, ring stages: cg_wgmma.c warpgroup_row, the
 * ping-pong group, the K index of loops that issue TMA copies). */
LLVMValueRef cg_lane0(Cg *c, LLVMValueRef v)
{
    LLVMTypeRef t = LLVMTypeOf(v), i32 = LLVMInt32TypeInContext(c->ctx);
    bool wide = LLVMGetIntTypeWidth(t) == 64;
    LLVMValueRef parts[2] = {wide ? LLVMBuildTrunc(c->b, v, i32, "") : v,
                             wide ? LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, v, LLVMConstInt(t, 32, 0), ""), i32, "") : NULL};
    for (int i = 0; i < (wide ? 2 : 1); i++) {
        LLVMValueRef args[4] = {cg_i32c(c, -1), parts[i], cg_i32c(c, 0), cg_i32c(c, 31)};
        parts[i] = cg_intrinsic(c, "llvm.nvvm.shfl.sync.idx.i32", NULL, 0, args, 4);
    }
    if (!wide) return parts[0];
    LLVMValueRef lo = LLVMBuildZExt(c->b, parts[0], t, ""), hi = LLVMBuildZExt(c->b, parts[1], t, "");
    return LLVMBuildOr(c->b, lo, LLVMBuildShl(c->b, hi, LLVMConstInt(t, 32, 0), ""), "");
}

/* Builds, verifies and optimizes the LLVM module of m's kernels. */
/* sitofp of i1 is -1.0 for true (i1's one bit is its sign), but LLVM 19's NVPTX
 * backend lowers it as selp 1, 0 and cvt.rn.f32.s32, giving +1.0. instcombine makes
 * it of its own (the high word of -1 * x, narrowed to a compare): the differential
 * tester's seed 16340 stored 1 where -1 is right (tests/lit/codegen/sitofp_i1.tile).
 * After the optimizer, each one becomes select x, -1.0, 0.0. */
static void fix_sitofp_i1(LLVMModuleRef mod)
{
    for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
        for (LLVMBasicBlockRef bb = LLVMGetFirstBasicBlock(f); bb; bb = LLVMGetNextBasicBlock(bb))
            for (LLVMValueRef in = LLVMGetFirstInstruction(bb); in;) {
                LLVMValueRef next = LLVMGetNextInstruction(in);
                LLVMValueRef x = LLVMGetInstructionOpcode(in) == LLVMSIToFP ? LLVMGetOperand(in, 0) : NULL;
                LLVMTypeRef xt = x ? LLVMTypeOf(x) : NULL, ft = LLVMTypeOf(in);
                bool vec = xt && LLVMGetTypeKind(xt) == LLVMVectorTypeKind;
                LLVMTypeRef et = vec ? LLVMGetElementType(xt) : xt;
                if (et && LLVMGetTypeKind(et) == LLVMIntegerTypeKind && LLVMGetIntTypeWidth(et) == 1) {
                    LLVMTypeRef fe = vec ? LLVMGetElementType(ft) : ft;
                    LLVMValueRef m1 = LLVMConstReal(fe, -1.0), z = LLVMConstReal(fe, 0.0);
                    if (vec) {
                        unsigned n = LLVMGetVectorSize(xt);
                        LLVMValueRef *a = tl_malloc(2 * n * sizeof *a);
                        if (!a) tl_oom();
                        for (unsigned i = 0; i < n; i++) a[i] = m1, a[n + i] = z;
                        m1 = LLVMConstVector(a, n), z = LLVMConstVector(a + n, n);
                        tl_free(a);
                    }
                    LLVMBuilderRef b = LLVMCreateBuilderInContext(LLVMGetTypeContext(ft));
                    LLVMPositionBuilderBefore(b, in);
                    LLVMValueRef sel = LLVMBuildSelect(b, x, m1, z, "");
                    LLVMDisposeBuilder(b);
                    LLVMReplaceAllUsesWith(in, sel);
                    LLVMInstructionEraseFromParent(in);
                }
                in = next;
            }
}

static bool build(Job *j, const IrModule *m, const CgOptions *o, DiagList *d)
{
    const char *arch = o->arch ? o->arch : "sm_90a";
    double t0 = tl_now_ms();
    *j = (Job){0};
    /* a GPU pass refused what the kernel asks for (passes/cluster.c: rows that do not
     * split): the error stands, and there is no code for the kernel */
    if (d->nerrors) return false;
    if (!cg_arch_supported(arch)) {
        diag_error(d, (Loc){0}, "unknown GPU architecture '%s' (supported: sm_90a, sm_80)", arch);
        return false;
    }
    j->tm = target_machine(arch, d);
    if (!j->tm) return false;
    j->ctx = LLVMContextCreate();
    j->mod = LLVMModuleCreateWithNameInContext("tile", j->ctx);
    LLVMSetTarget(j->mod, CG_TRIPLE);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(j->tm);
    LLVMSetModuleDataLayout(j->mod, dl);
    LLVMDisposeTargetData(dl);
    if (!lower_module(j, m, o, d) || !verify(j, d)) return false;
    double t1 = tl_now_ms();
    if (!optimize(j, o, d)) return false;
    fix_sitofp_i1(j->mod);
    j->mincta = tl_calloc(m->nfuncs ? m->nfuncs : 1, sizeof *j->mincta);
    if (!j->mincta) tl_oom();
    if (o->opt_level > 0) cg_occupancy(j->mod, m, j->mincta), cg_sink(j->mod, j->tm, &m->knobs);
    if (o->times) o->times->lower_ms = t1 - t0, o->times->opt_ms = tl_now_ms() - t1;
    return true;
}

static char *dup_text(const char *s, size_t n)
{
    char *r = tl_malloc(n + 1);
    if (!r) tl_oom();
    memcpy(r, s, n);
    r[n] = 0;
    return r;
}

/* The module's LLVM IR after the pipeline. The NVPTX backend then runs too, its output
 * dropped: LLVM caches each module's nvvm.annotations (maxntidx, ...) by the Module's
 * address (NVPTXUtilities), the optimizer fills that cache (nvvm-intr-range) and only the
 * backend's finalization clears it, so without it a later module allocated at the same
 * address was optimized with this one's thread count (the emulated differential tester,
 * tests/emu, compiling kernel after kernel in one process: a kernel of 256 threads given
 * tid.x's range of 128). */
char *cg_emit_llvm(const IrModule *m, const CgOptions *o, DiagList *d)
{
    Job j;
    char *out = NULL;
    if (build(&j, m, o, d)) {
        char *s = LLVMPrintModuleToString(j.mod);
        out = dup_text(s, strlen(s));
        LLVMDisposeMessage(s);
        LLVMMemoryBufferRef buf = NULL;
        char *err = NULL;
        if (!LLVMTargetMachineEmitToMemoryBuffer(j.tm, j.mod, LLVMAssemblyFile, &err, &buf)) LLVMDisposeMemoryBuffer(buf);
        LLVMDisposeMessage(err);
    }
    job_free(&j);
    return out;
}

char *cg_emit_ptx(const IrModule *m, const CgOptions *o, DiagList *d)
{
    Job j;
    char *out = NULL;
    if (build(&j, m, o, d)) {
        double t0 = tl_now_ms();
        LLVMMemoryBufferRef buf = NULL;
        char *err = NULL;
        if (LLVMTargetMachineEmitToMemoryBuffer(j.tm, j.mod, LLVMAssemblyFile, &err, &buf)) {
            diag_error(d, (Loc){0}, "internal error: the NVPTX backend failed: %s", err ? err : "");
            LLVMDisposeMessage(err);
        } else {
            out = dup_text(LLVMGetBufferStart(buf), LLVMGetBufferSize(buf));
            LLVMDisposeMemoryBuffer(buf);
            out = cg_occupancy_directives(out, m, j.mincta);
            out = cg_ptx_workarounds(out);
            if (o->times) o->times->emit_ms = tl_now_ms() - t0;
        }
    }
    job_free(&j);
    return out;
}
