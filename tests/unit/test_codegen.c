/* The GPU code generator (codegen/), the axis analysis and specialization, on kernels
 * written in textual Tile IR: PTX contents per op family, launch facts, target checks,
 * the layouts' ownership invariant, and the facts that drive vectorization. ptxas
 * itself runs in the codegen/ptxas-all ctest and in tests/lit/codegen. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <llvm-c/Analysis.h>

#include "codegen/cg_internal.h"
#include "codegen/codegen.h"
#include "ir/interp_internal.h"
#include "ir/ir.h"
#include "ir/layout.h"
#include "passes/axischeck.h"
#include "passes/passes.h"
#include "passes/specialize.h"

static const char *const vadd_ir =
    "kernel @vadd(%out: *f32, %a: *f32, %n: i32) launch {warps = 4, stages = 2} {\n"
    "  %pid = program_id 0 : i32\n"
    "  %blk = const 1024 : i32\n"
    "  %base = mul %pid, %blk : i32\n"
    "  %r = arange 0 : i32[1024]\n"
    "  %b = splat %base : i32[1024]\n"
    "  %offs = add %b, %r : i32[1024]\n"
    "  %nh = multiple_of 16 %n : i32\n"
    "  %ns = splat %nh : i32[1024]\n"
    "  %mask = cmp lt %offs, %ns : i1[1024]\n"
    "  %pa = splat %a : *f32[1024]\n"
    "  %ptr = addptr %pa, %offs : *f32[1024]\n"
    "  %x = load %ptr, %mask : f32[1024]\n"
    "  %po = splat %out : *f32[1024]\n"
    "  %optr = addptr %po, %offs : *f32[1024]\n"
    "  store %optr, %x, %mask\n"
    "  return\n"
    "}\n";

static const char *const rowsum_ir =
    "kernel @rowsum(%out: *f32, %a: *f32) launch {warps = 8, stages = 2} {\n"
    "  %r = arange 0 : i32[2048]\n"
    "  %pa = splat %a : *f32[2048]\n"
    "  %ptr = addptr %pa, %r : *f32[2048]\n"
    "  %x = load %ptr : f32[2048]\n"
    "  %s = sum 0 %x : f32\n"
    "  %i = argmax 0 %x : i32\n"
    "  %f = convert %i : f32\n"
    "  %t = add %s, %f : f32\n"
    "  store %out, %t\n"
    "  return\n"
    "}\n";

typedef struct Fx {
    IrCtx *c;
    Source *src;
    IrModule *m;
    DiagList d;
} Fx;

static IrModule *parse(Fx *x, const char *text)
{
    memset(x, 0, sizeof *x);
    x->c = ir_ctx_create();
    x->src = source_from_string("test.tir", text);
    x->m = ir_parse(x->c, x->src);
    diag_init(&x->d);
    assert_non_null(x->m);
    assert_true(ir_verify_module(x->m));
    return x->m;
}

static void fx_free(Fx *x)
{
    diag_free(&x->d);
    ir_ctx_destroy(x->c);
    source_free(x->src);
}

static char *ptx_of(Fx *x, const char *arch, uint64_t aligned)
{
    CgOptions o = {.arch = arch, .opt_level = 3, .aligned_params = aligned};
    pass_run_gpu(x->m, NULL);
    return cg_emit_ptx(x->m, &o, &x->d);
}

static void test_vadd_vectorized_when_aligned(void **state)
{
    Fx x;
    parse(&x, vadd_ir);
    char *vec = ptx_of(&x, "sm_90a", ~UINT64_C(0));
    char *scalar = ptx_of(&x, "sm_90a", 0);
    assert_non_null(vec);
    assert_non_null(scalar);
    assert_non_null(strstr(vec, ".entry vadd("));
    assert_non_null(strstr(vec, ".target sm_90a"));
    assert_non_null(strstr(vec, "@p ld.global.v4.b32"));    /* masked: predicated, no branch */
    assert_non_null(strstr(vec, "@p st.global.v4.b32"));
    assert_null(strstr(vec, "bra"));
    assert_null(strstr(scalar, "ld.global.v4"));      /* no alignment promise */
    assert_non_null(strstr(scalar, "@p ld.global.b32"));
    tl_free(vec);
    tl_free(scalar);
    fx_free(&x);
}

static void test_sm80_and_unknown_arch(void **state)
{
    Fx x;
    parse(&x, vadd_ir);
    char *p = ptx_of(&x, "sm_80", 0);
    assert_non_null(p);
    assert_non_null(strstr(p, ".target sm_80"));
    tl_free(p);
    assert_null(ptx_of(&x, "sm_75", 0));
    assert_int_equal(x.d.nerrors, 1);
    assert_non_null(strstr(x.d.items[0].msg, "sm_75"));
    assert_false(cg_arch_supported("sm_90"));
    fx_free(&x);
}

static void test_llvm_ir_kernel_abi(void **state)
{
    Fx x;
    parse(&x, vadd_ir);
    CgOptions o = {.arch = "sm_90a", .opt_level = 0};
    pass_run_gpu(x.m, NULL);
    char *ll = cg_emit_llvm(x.m, &o, &x.d);
    assert_non_null(ll);
    assert_non_null(strstr(ll, "define ptx_kernel void @vadd(ptr addrspace(1)"));
    assert_non_null(strstr(ll, "!\"maxntidx\", i32 128"));
    tl_free(ll);
    fx_free(&x);
}

/* LLVM caches nvvm.annotations by the Module's address (NVPTXUtilities) and only the
 * NVPTX backend's finalization clears the cache; cg_emit_llvm runs the backend too, so a
 * module allocated where the last one was gets its own thread count: tid.x's range
 * (nvvm-intr-range, from maxntidx) is 128 for vadd at 4 warps and 256 at 8, compile after
 * compile in one process (the same kernel, so that the allocations repeat; under ASan's
 * quarantine they do not, and only the optimized builds fail here without it). */
static void test_llvm_ir_thread_count_per_module(void **state)
{
    (void)state;
    Fx x;
    parse(&x, vadd_ir);
    pass_run_gpu(x.m, NULL);
    for (int i = 0; i < 12; i++) {
        bool wide = i % 2;
        x.m->funcs[0]->warps = wide ? 8 : 4;   /* the same kernel, so that the allocations repeat */
        assert_true(pass_run_list(x.m, "plan", NULL));   /* its threads are the plan's */
        CgOptions o = {.arch = "sm_90a", .opt_level = 3};
        char *ll = cg_emit_llvm(x.m, &o, &x.d);
        assert_non_null(ll);
        assert_non_null(strstr(ll, wide ? "range(i32 0, 256) i32 @llvm.nvvm.read.ptx.sreg.tid.x"
                                        : "range(i32 0, 128) i32 @llvm.nvvm.read.ptx.sreg.tid.x"));
        tl_free(ll);
    }
    fx_free(&x);
}

static void test_reduction_shuffles_and_shared_memory(void **state)
{
    Fx x;
    parse(&x, rowsum_ir);
    char *p = ptx_of(&x, "sm_90a", 0);
    assert_non_null(p);
    assert_non_null(strstr(p, "shfl.sync.bfly.b32"));
    assert_non_null(strstr(p, "bar.sync"));
    assert_non_null(strstr(p, "st.shared"));
    const IrPlan *ki = ir_module_find(x.m, "rowsum")->plan;   /* passes/plan.c's */
    assert_non_null(ki);
    assert_int_equal(ki->threads, 256);
    assert_true(ki->shared_bytes >= 8 * 2 * 4);       /* 8 warps' partials, value and index */
    assert_int_equal(ki->shared_bytes % 16, 0);
    assert_int_equal(ki->scratch, ki->shared_bytes);   /* no buffers: the scratch is all */
    tl_free(p);
    fx_free(&x);
}

static void test_kernel_info_without_shared_memory(void **state)
{
    Fx x;
    parse(&x, vadd_ir);
    assert_null(ir_module_find(x.m, "vadd")->plan);   /* none before the GPU pipeline */
    pass_run_gpu(x.m, NULL);
    const IrPlan *ki = ir_module_find(x.m, "vadd")->plan;
    assert_non_null(ki);
    assert_int_equal(ki->threads, 128);
    assert_int_equal(ki->shared_bytes, 0);
    assert_int_equal(ki->ntma, 0);
    assert_int_equal(ki->nregions, 1);                 /* the scratch, empty */
    fx_free(&x);
}

/* Every element of a tile has exactly one owner among the program's threads. */
static void check_owned_once(IrCtx *c, int warps, int rank, const int32_t *shape)
{
    const IrType *t = ir_type_tile(c, ir_type_scalar(c, IR_F32), rank, shape);
    IrLayoutMap l = ir_layout_map(ir_type_with_layout(c, t, pass_blocked_layout(c, warps, t, NULL)));
    int64_t n = ir_type_numel(t);
    int *seen = calloc((size_t)n, sizeof *seen);
    for (uint32_t th = 0; th < (uint32_t)warps * 32; th++)
        for (uint32_t k = 0; k < cg_layout_elems(&l); k++) {
            int64_t co[IR_MAX_RANK] = {0}, lin = 0;
            bool own = cg_layout_coords_at(&l, th, k, co);
            for (int d = 0; d < rank; d++) lin = lin * shape[d] + co[d];
            if (own) seen[lin]++;
        }
    for (int64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1);
    free(seen);
}

static void test_layouts_own_each_element_once(void **state)
{
    IrCtx *c = ir_ctx_create();
    /* ranks 4 and 5: attention's batch, head, query, key, dim (issue 13) */
    static const int32_t shapes[][5] = {{1024}, {16}, {1}, {64, 64}, {2, 8}, {128, 1}, {4, 8, 16}, {32, 32},
                                        {2, 4, 8, 16}, {2, 2, 4, 8, 16}, {1, 2, 1, 4, 2}, {8, 1, 1, 1, 64}};
    static const int ranks[] = {1, 1, 1, 2, 2, 2, 3, 2, 4, 5, 5, 5};
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks; i++) {
        check_owned_once(c, 4, ranks[i], shapes[i]);
        check_owned_once(c, 8, ranks[i], shapes[i]);
    }
    const int32_t big[1] = {1024};
    const IrType *bt = ir_type_tile(c, ir_type_scalar(c, IR_F32), 1, big);
    IrLayoutMap l = ir_layout_map(ir_type_with_layout(c, bt, pass_blocked_layout(c, 4, bt, NULL)));
    assert_int_equal(l.spt[0], 8);                      /* two 16-byte f32 vectors */
    ir_ctx_destroy(c);
}

/* The accumulator family (cg_layout.c): mma.sync layouts of full and narrow tiles and
 * their slices own each element once, and a run that cg_layout_run reports lies side by
 * side along the last axis in every thread (what a vector store writes). */
static void check_mma_owned_once(IrCtx *c, const IrLayout *il, int rank, const int32_t *shape, int warps)
{
    const IrType *t = ir_type_with_layout(c, ir_type_tile(c, ir_type_scalar(c, IR_F32), rank, shape), il);
    IrLayoutMap l = ir_layout_map(t);
    int64_t n = ir_type_numel(t);
    uint32_t run = cg_layout_run(&l);
    int *seen = calloc((size_t)n, sizeof *seen);
    for (uint32_t th = 0; th < (uint32_t)warps * 32; th++)
        for (uint32_t k = 0; k < cg_layout_elems(&l); k++) {
            int64_t co[IR_MAX_RANK] = {0}, first[IR_MAX_RANK] = {0}, lin = 0;
            bool own = cg_layout_coords_at(&l, th, k, co);
            cg_layout_coords_at(&l, th, k - k % run, first);
            for (int d = 0; d < rank; d++) {
                assert_true(co[d] >= 0 && co[d] < shape[d]);
                lin = lin * shape[d] + co[d];
                assert_int_equal(co[d], first[d] + (d == rank - 1 ? k % run : 0));
            }
            if (own) seen[lin]++;
        }
    for (int64_t i = 0; i < n; i++) assert_int_equal(seen[i], 1);
    free(seen);
}

static void test_mma_layouts_own_each_element_once(void **state)
{
    IrCtx *c = ir_ctx_create();
    static const int32_t wpcs[][2] = {{2, 2}, {4, 2}, {1, 4}, {2, 1}};
    static const int32_t shapes[][2] = {{64, 64}, {64, 1}, {1, 64}, {16, 1}, {1, 8}, {128, 32}};
    for (size_t w = 0; w < sizeof wpcs / sizeof *wpcs; w++) {
        IrLayout k;
        memset(&k, 0, sizeof k);
        k.kind = IR_LAYOUT_MMA;
        k.rank = 2;
        k.version = 2;
        k.wpc[0] = wpcs[w][0];
        k.wpc[1] = wpcs[w][1];
        k.instr[0] = 16;
        k.instr[1] = 8;
        k.instr[2] = 16;
        const IrLayout *mma = ir_layout_intern(c, &k);
        int warps = wpcs[w][0] * wpcs[w][1];
        for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) check_mma_owned_once(c, mma, 2, shapes[i], warps);
        for (int dim = 0; dim < 2; dim++)
            for (int32_t len = 1; len <= 128; len *= 4)
                check_mma_owned_once(c, ir_layout_slice(c, mma, dim), 1, &len, warps);
    }
    ir_ctx_destroy(c);
}

/* ---- the mma.sync fragments ------------------------------------------------------------ */
/* The PTX ISA's tables ("Matrix Fragments for mma.m16n8k8 / k16 / k32"), written as the
 * ISA writes them: fragment element i of lane l (g = l / 4, t = l % 4) of one warp's
 * instruction, as (row, col) of A [16 x K], B [K x 8] or C [16 x 8]. */
typedef enum { FRAG_A, FRAG_B, FRAG_C } FragKind;

static void isa_fragment(int K, FragKind f, int lane, int i, int64_t rc[2])
{
    int g = lane / 4, t = lane % 4;
    if (f == FRAG_C) {                         /* c0..c3, every shape: f32 or s32 */
        rc[0] = i < 2 ? g : g + 8;
        rc[1] = t * 2 + (i & 1);
    } else if (K == 8 && f == FRAG_A) {        /* tf32 a0..a3 */
        rc[0] = i == 0 || i == 2 ? g : g + 8;
        rc[1] = i < 2 ? t : t + 4;
    } else if (K == 8) {                       /* tf32 b0, b1 */
        rc[0] = i == 0 ? t : t + 4;
        rc[1] = g;
    } else if (K == 16 && f == FRAG_A) {       /* f16/bf16 a0..a7 */
        rc[0] = i == 0 || i == 1 || i == 4 || i == 5 ? g : g + 8;
        rc[1] = t * 2 + (i & 1) + (i >= 4 ? 8 : 0);
    } else if (K == 16) {                      /* f16/bf16 b0..b3 */
        rc[0] = t * 2 + (i & 1) + (i >= 2 ? 8 : 0);
        rc[1] = g;
    } else if (f == FRAG_A) {                  /* s8/u8 a0..a15 */
        rc[0] = i < 4 || (i >= 8 && i < 12) ? g : g + 8;
        rc[1] = t * 4 + (i & 3) + (i >= 8 ? 16 : 0);
    } else {                                   /* s8/u8 b0..b7 */
        rc[0] = t * 4 + (i & 3) + (i >= 4 ? 16 : 0);
        rc[1] = g;
    }
}

static const IrLayout *mma_of(IrCtx *c, int version, int wm, int wn, int im, int in, int ik)
{
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_MMA;
    k.rank = 2;
    k.version = version;
    k.wpc[0] = wm;
    k.wpc[1] = wn;
    k.instr[0] = im;
    k.instr[1] = in;
    k.instr[2] = ik;
    return ir_layout_intern(c, &k);
}

static const IrLayout *mma_v2(IrCtx *c, int wm, int wn, int K) { return mma_of(c, 2, wm, wn, 16, 8, K); }

/* wgmma's accumulator: warps along M, m64nNk16 */
static const IrLayout *mma_v3(IrCtx *c, int warps, int n) { return mma_of(c, 3, warps, 1, 64, n, 16); }

static const IrLayout *operand_of(IrCtx *c, const IrLayout *mma, int op)
{
    IrLayout k;
    memset(&k, 0, sizeof k);
    k.kind = IR_LAYOUT_DOT_OPERAND;
    k.rank = 2;
    k.op = op;
    k.kwidth = mma->instr[2] / 8;
    k.parent = mma;
    return ir_layout_intern(c, &k);
}

static IrLayoutMap frag_layout(IrCtx *c, const IrLayout *l, IrElem e, int32_t rows, int32_t cols)
{
    const int32_t shape[2] = {rows, cols};
    const IrType *t = ir_type_tile(c, ir_type_scalar(c, e), 2, shape);
    char why[160];
    assert_true(ir_layout_check(l, 2, ir_layout_warps(l), why, sizeof why));
    return ir_layout_map(ir_type_with_layout(c, t, l));
}

/* One warp, one instruction: element i of a thread is fragment element i, for every
 * lane and every element of A, B and C of m16n8k8 (tf32), k16 (f16) and k32 (i8). */
static void test_mma_fragments_match_the_isa(void **state)
{
    IrCtx *c = ir_ctx_create();
    static const int Ks[3] = {8, 16, 32};
    static const IrElem ins[3] = {IR_F32, IR_F16, IR_I8};
    for (int s = 0; s < 3; s++) {
        int K = Ks[s];
        const IrLayout *m = mma_v2(c, 1, 1, K);
        IrLayoutMap l[3] = {frag_layout(c, operand_of(c, m, 0), ins[s], 16, K),
                         frag_layout(c, operand_of(c, m, 1), ins[s], K, 8),
                         frag_layout(c, m, K == 32 ? IR_I32 : IR_F32, 16, 8)};
        const uint32_t n[3] = {(uint32_t)K / 2, (uint32_t)K / 4, 4};   /* a thread's elements */
        for (int f = 0; f < 3; f++) {
            assert_int_equal(cg_layout_elems(&l[f]), n[f]);
            for (int lane = 0; lane < 32; lane++)
                for (uint32_t i = 0; i < n[f]; i++) {
                    int64_t got[IR_MAX_RANK] = {0}, want[2];
                    assert_true(cg_layout_coords_at(&l[f], (uint32_t)lane, i, got));
                    isa_fragment(K, (FragKind)f, lane, (int)i, want);
                    if (got[0] != want[0] || got[1] != want[1])
                        fail_msg("m16n8k%d %c lane %d element %u: (%lld, %lld), the ISA says (%lld, %lld)", K,
                                 "ABC"[f], lane, i, (long long)got[0], (long long)got[1], (long long)want[0],
                                 (long long)want[1]);
                }
        }
    }
    ir_ctx_destroy(c);
}

/* Many warps and instruction tiles: element k of a thread is fragment element i of the
 * tile its place names (A: k = (rm*KS + ks)*4W + i, B: (rn*KS + ks)*2W + i, C: (rm*RN +
 * rn)*4 + i; for W = 2 the order ldmatrix loads rely on), and every element has one
 * owner (A's copies across the warps of a row, B's down a column). */
static void check_tiles(IrCtx *c, int wm, int wn, int K, int32_t M, int32_t N, int32_t KD)
{
    const IrLayout *m = mma_v2(c, wm, wn, K);
    IrElem in = K == 8 ? IR_F32 : K == 16 ? IR_BF16 : IR_U8;
    IrLayoutMap l[3] = {frag_layout(c, operand_of(c, m, 0), in, M, KD), frag_layout(c, operand_of(c, m, 1), in, KD, N),
                     frag_layout(c, m, K == 32 ? IR_I32 : IR_F32, M, N)};
    const int32_t rows[3] = {M, KD, M}, cols[3] = {KD, N, N};
    int W = K / 8, KS = KD / K, RM = M / (16 * wm), RN = N / (8 * wn);
    for (int f = 0; f < 3; f++) {
        int *seen = calloc((size_t)rows[f] * (size_t)cols[f], sizeof *seen);
        int per = f == 0 ? 4 * W : f == 1 ? 2 * W : 4;
        for (uint32_t th = 0; th < (uint32_t)(wm * wn * 32); th++)
            for (uint32_t k = 0; k < cg_layout_elems(&l[f]); k++) {
                int64_t got[IR_MAX_RANK] = {0}, frag[2];
                bool own = cg_layout_coords_at(&l[f], th, k, got);
                int warp = (int)th / 32, w_m = warp / wn, w_n = warp % wn, i = (int)k % per, tile = (int)k / per;
                isa_fragment(K, (FragKind)f, (int)th % 32, i, frag);
                int64_t r0, c0;
                if (f == 0) r0 = (tile / KS) * 16 * wm + w_m * 16, c0 = (tile % KS) * K;
                else if (f == 1) r0 = (tile % KS) * K, c0 = (tile / KS) * 8 * wn + w_n * 8;
                else r0 = (tile / RN) * 16 * wm + w_m * 16, c0 = (tile % RN) * 8 * wn + w_n * 8;
                assert_int_equal(got[0], r0 + frag[0]);
                assert_int_equal(got[1], c0 + frag[1]);
                assert_int_equal(own, f == 2 || (f == 0 ? w_n == 0 : w_m == 0));
                if (own) seen[got[0] * cols[f] + got[1]]++;
            }
        for (int32_t e = 0; e < rows[f] * cols[f]; e++) assert_int_equal(seen[e], 1);
        free(seen);
        assert_int_equal(cg_layout_elems(&l[f]), (uint32_t)(f == 0 ? RM * KS * per : f == 1 ? RN * KS * per : RM * RN * 4));
    }
}

static void test_mma_tiles_and_owners(void **state)
{
    IrCtx *c = ir_ctx_create();
    for (int K = 8; K <= 32; K *= 2) {
        check_tiles(c, 2, 2, K, 64, 32, 2 * K);
        check_tiles(c, 4, 2, K, 64, 64, 4 * K);
        check_tiles(c, 1, 4, K, 32, 64, K);
        check_tiles(c, 1, 1, K, 16, 8, K);
    }
    ir_ctx_destroy(c);
}

static IrLayoutMap tile_layout(IrCtx *c, const IrLayout *l, IrElem e, int rank, int32_t rows, int32_t cols)
{
    const int32_t shape[2] = {rows, cols};
    const IrType *t = ir_type_tile(c, ir_type_scalar(c, e), rank, rank == 1 ? &rows : shape);
    return ir_layout_map(ir_type_with_layout(c, t, l));
}

/* Whether thread th holds element coords of layout l (in any slot). */
static bool thread_holds(const IrLayoutMap *l, uint32_t th, const int64_t coords[2], int rank)
{
    for (uint32_t k = 0; k < cg_layout_elems(l); k++) {
        int64_t got[IR_MAX_RANK] = {0};
        cg_layout_coords_at(l, th, k, got);
        if (got[0] == coords[0] && (rank == 1 || got[1] == coords[1])) return true;
    }
    return false;
}

/* ir_layout_alike's promise, checked on codegen's element maps: two version-3
 * accumulators that differ only in N hold every element of a tile in the same thread
 * and slot, so do their row slices, and every element of P as the A operand of a dot
 * with the other accumulator is in the thread that holds it in the first (attention's
 * conversions that move nothing); layouts with other warps, warps along N or version 2
 * are not alike. */
static void test_alike_layouts_hold_the_same_elements(void **state)
{
    IrCtx *c = ir_ctx_create();
    static const int pairs[][2] = {{64, 128}, {32, 64}, {128, 256}, {64, 16}};
    for (int warps = 4; warps <= 8; warps += 4)
        for (size_t p = 0; p < sizeof pairs / sizeof *pairs; p++) {
            const IrLayout *a = mma_v3(c, warps, pairs[p][0]), *b = mma_v3(c, warps, pairs[p][1]);
            int32_t M = 16 * warps * 2, N = pairs[p][0];
            assert_true(ir_layout_alike(a, b));
            assert_true(ir_layout_alike(b, a));
            assert_false(ir_layout_alike(a, a));
            assert_true(ir_layout_alike(ir_layout_slice(c, a, 1), ir_layout_slice(c, b, 1)));
            assert_false(ir_layout_alike(ir_layout_slice(c, a, 1), ir_layout_slice(c, b, 0)));
            assert_true(ir_layout_alike(a, operand_of(c, b, 0)));
            assert_true(ir_layout_alike(a, operand_of(c, a, 0)));
            assert_false(ir_layout_alike(a, operand_of(c, b, 1)));
            IrLayoutMap la = tile_layout(c, a, IR_F32, 2, M, N), lb = tile_layout(c, b, IR_F32, 2, M, N);
            IrLayoutMap sa = tile_layout(c, ir_layout_slice(c, a, 1), IR_F32, 1, M, 0);
            IrLayoutMap sb = tile_layout(c, ir_layout_slice(c, b, 1), IR_F32, 1, M, 0);
            IrLayoutMap pa = tile_layout(c, a, IR_BF16, 2, M, N), pb = tile_layout(c, operand_of(c, b, 0), IR_BF16, 2, M, N);
            assert_int_equal(cg_layout_elems(&la), cg_layout_elems(&lb));
            assert_int_equal(cg_layout_elems(&sa), cg_layout_elems(&sb));
            for (uint32_t th = 0; th < (uint32_t)(32 * warps); th++) {
                for (uint32_t k = 0; k < cg_layout_elems(&la); k++) {
                    int64_t x[IR_MAX_RANK] = {0}, y[IR_MAX_RANK] = {0};
                    cg_layout_coords_at(&la, th, k, x);
                    cg_layout_coords_at(&lb, th, k, y);
                    if (x[0] != y[0] || x[1] != y[1])
                        fail_msg("N %d vs %d, %d warps: thread %u slot %u holds (%lld, %lld) and (%lld, %lld)",
                                 pairs[p][0], pairs[p][1], warps, th, k, (long long)x[0], (long long)x[1],
                                 (long long)y[0], (long long)y[1]);
                }
                for (uint32_t k = 0; k < cg_layout_elems(&sa); k++) {
                    int64_t x[IR_MAX_RANK] = {0}, y[IR_MAX_RANK] = {0};
                    cg_layout_coords_at(&sa, th, k, x);
                    cg_layout_coords_at(&sb, th, k, y);
                    assert_int_equal(x[0], y[0]);
                }
                for (uint32_t k = 0; k < cg_layout_elems(&pb); k++) {
                    int64_t x[IR_MAX_RANK] = {0};
                    cg_layout_coords_at(&pb, th, k, x);
                    if (!thread_holds(&pa, th, x, 2))
                        fail_msg("P as A of N = %d: thread %u needs (%lld, %lld), which N = %d puts elsewhere",
                                 pairs[p][1], th, (long long)x[0], (long long)x[1], pairs[p][0]);
                }
            }
        }
    assert_false(ir_layout_alike(mma_v3(c, 4, 64), mma_v3(c, 8, 128)));
    assert_false(ir_layout_alike(mma_v2(c, 4, 1, 16), mma_v2(c, 8, 1, 16)));
    assert_false(ir_layout_alike(mma_v2(c, 4, 1, 16), operand_of(c, mma_v2(c, 4, 1, 16), 0)));
    assert_false(ir_layout_alike(mma_v2(c, 2, 2, 16), operand_of(c, mma_v2(c, 2, 2, 16), 0)));
    ir_ctx_destroy(c);
}

/* ir_layout_in_registers' promise (passes/shared.c budgets the rings and codegen plans
 * its scratch by it, with nothing for such ops): a row or a column of an mma layout (its
 * slice along 1 or 0) broadcast into that layout needs only elements its own thread
 * holds, checked on codegen's element maps for wgmma's and mma.sync's layouts; equal
 * layouts broadcast in place; a conversion is in registers exactly when the layouts are
 * alike; a slice of another layout, or no layout, is not. */
static void test_in_register_broadcasts_need_no_other_thread(void **state)
{
    (void)state;
    IrCtx *c = ir_ctx_create();
    const IrLayout *ms[] = {mma_v3(c, 4, 128), mma_v3(c, 8, 64), mma_v2(c, 4, 1, 16), mma_v2(c, 2, 2, 16)};
    const int32_t M = 128, N = 128;
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        const IrLayout *m = ms[i];
        IrLayoutMap lm = tile_layout(c, m, IR_F32, 2, M, N);
        uint32_t threads = 32 * (uint32_t)ir_layout_warps(m);
        for (int dim = 0; dim < 2; dim++) {
            const IrLayout *sl = ir_layout_slice(c, m, dim);
            assert_true(ir_layout_in_registers(IR_OP_BROADCAST, sl, m));
            assert_true(ir_layout_in_registers(IR_OP_EXPAND_DIMS, sl, m));
            IrLayoutMap lv = tile_layout(c, sl, IR_F32, 1, dim == 1 ? M : N, 0);
            for (uint32_t th = 0; th < threads; th++)
                for (uint32_t k = 0; k < cg_layout_elems(&lm); k++) {
                    int64_t x[IR_MAX_RANK] = {0};
                    cg_layout_coords_at(&lm, th, k, x);
                    const int64_t want[2] = {dim == 1 ? x[0] : x[1], 0};
                    if (!thread_holds(&lv, th, want, 1))
                        fail_msg("layout %zu, slice %d: thread %u needs element %lld of the vector, held elsewhere", i,
                                 dim, th, (long long)want[0]);
                }
        }
        assert_true(ir_layout_in_registers(IR_OP_BROADCAST, m, m));
        assert_false(ir_layout_in_registers(IR_OP_RESHAPE, m, m));
        assert_false(ir_layout_in_registers(IR_OP_CONVERT_LAYOUT, m, m));
    }
    assert_true(ir_layout_in_registers(IR_OP_CONVERT_LAYOUT, mma_v3(c, 8, 64), mma_v3(c, 8, 128)));
    assert_true(ir_layout_in_registers(IR_OP_CONVERT_LAYOUT, mma_v3(c, 8, 128), operand_of(c, mma_v3(c, 8, 128), 0)));
    assert_false(ir_layout_in_registers(IR_OP_CONVERT_LAYOUT, mma_v2(c, 4, 1, 16), operand_of(c, mma_v2(c, 4, 1, 16), 0)));
    assert_false(ir_layout_in_registers(IR_OP_BROADCAST, ir_layout_slice(c, mma_v3(c, 8, 64), 1), mma_v3(c, 8, 128)));
    assert_false(ir_layout_in_registers(IR_OP_BROADCAST, NULL, mma_v3(c, 8, 64)));
    ir_ctx_destroy(c);
}

/* cg_round_tf32's integer rounding, modelled in C, against the interpreter's
 * fp_round_tf32 (nearest even): every 4099th bit pattern, every tie and neighbour
 * of one, around the overflow to inf and the subnormals; NaNs stay NaN. */
static uint32_t tf32_model(uint32_t b)
{
    uint32_t r = (b + 0xFFF + ((b >> 13) & 1)) & 0xFFFFE000u;
    return (b & 0x7FFFFFFF) > 0x7F800000 ? (b & 0xFFFFE000u) | 0x400000 : r;
}

static void check_tf32(uint32_t b)
{
    float want = fp_round_tf32(fp_bits_f32(b)), got = fp_bits_f32(tf32_model(b));
    if (isnan(want)) {
        assert_true(isnan(got));
        assert_int_equal(tf32_model(b) & 0x1FFF, 0);
        return;
    }
    if (fp_f32_bits(want) != fp_f32_bits(got)) fail_msg("tf32 of 0x%08x: 0x%08x, want 0x%08x", b, fp_f32_bits(got), fp_f32_bits(want));
}

static void test_tf32_rounding_as_the_interpreter(void **state)
{
    for (uint64_t b = 0; b <= 0xFFFFFFFFu; b += 4099) check_tf32((uint32_t)b);
    for (uint32_t hi = 0; hi < 0x80000; hi += 37)
        for (uint32_t lo = 0xFFF; lo <= 0x1001; lo++) {
            check_tf32(hi << 13 | lo);
            check_tf32(0x80000000u | hi << 13 | lo);
        }
    for (uint32_t b = 0x7F7FE000; b <= 0x7F800000; b++) check_tf32(b);
    for (uint32_t b = 0; b < 0x4000; b++) check_tf32(b);
    check_tf32(0x7F800001);
    check_tf32(0xFFC00000);
}

static void test_axisinfo_facts(void **state)
{
    Fx x;
    parse(&x, vadd_ir);
    IrFunc *f = ir_module_find(x.m, "vadd");
    AxisInfo *ai = axisinfo_analyze(f, UINT64_C(1) << 1);   /* %a aligned, %out not */
    assert_non_null(ai);
    const IrOp *load = NULL, *store = NULL, *cmp = NULL;
    for (const IrOp *op = f->body.first; op; op = op->next) {
        if (op->code == IR_OP_LOAD) load = op;
        if (op->code == IR_OP_STORE) store = op;
        if (op->code == IR_OP_CMP) cmp = op;
    }
    const AxisInfo *pl = &ai[load->operands[0]], *ps = &ai[store->operands[0]], *m = &ai[cmp->results[0]];
    assert_int_equal(pl->contiguity[0], 1024);
    assert_int_equal(pl->divisibility[0], 16);           /* bytes: aligned base + 1024*k*4 */
    assert_int_equal(ps->divisibility[0], 1);
    assert_int_equal(m->constancy[0], 16);               /* n is a multiple of 16 */
    tl_free(ai);
    fx_free(&x);
}

/* An `if`'s results hold what both regions yield: a pointer chosen between two aligned
 * parameters stays aligned (a uniform horizontal GEMM's weight, graph_lower.c), one
 * that may be the unaligned %c does not; tiles keep the weaker of each fact. */
static const char *const if_ir =
    "kernel @k(%a: *f32, %b: *f32, %c: *f32, %n: i32) launch {warps = 4, stages = 2} {\n"
    "  %pid = program_id 0 : i32\n"
    "  %one = const 1 : i32\n"
    "  %is1 = cmp eq %pid, %one : i1\n"
    "  %pab = if %is1 : *f32 {\n"
    "    yield %b\n"
    "  } else {\n"
    "    yield %a\n"
    "  }\n"
    "  %pac = if %is1 : *f32 {\n"
    "    yield %c\n"
    "  } else {\n"
    "    yield %a\n"
    "  }\n"
    "  %r = arange 0 : i32[64]\n"
    "  %c64 = const 64 : i32[64]\n"
    "  %r64 = mul %r, %c64 : i32[64]\n"
    "  %t = if %is1 : i32[64] {\n"
    "    yield %r\n"
    "  } else {\n"
    "    yield %r64\n"
    "  }\n"
    "  return\n"
    "}\n";

static const AxisInfo *fact_of(const IrFunc *f, const AxisInfo *ai, const char *name);

static void test_axisinfo_if(void **state)
{
    (void)state;
    Fx x;
    parse(&x, if_ir);
    IrFunc *f = ir_module_find(x.m, "k");
    AxisInfo *ai = axisinfo_analyze(f, UINT64_C(1) << 0 | UINT64_C(1) << 1);   /* %a, %b aligned; %c not */
    assert_non_null(ai);
    assert_int_equal(fact_of(f, ai, "pab")->divisibility[0], 16);
    assert_int_equal(fact_of(f, ai, "pac")->divisibility[0], 1);
    const AxisInfo *t = fact_of(f, ai, "t");   /* arange (contiguous 64) or 64 * arange (div 64) */
    assert_int_equal(t->contiguity[0], 1);
    assert_int_equal(t->divisibility[0], 1);
    tl_free(ai);
    fx_free(&x);
}

/* An integer minimum, maximum or select is one of its operands: a multiple of what both
 * are multiples of, and a loop from there keeps its index so (the backward's loop from
 * mid = minimum((pn + 1) * BN, ...): its lse and delta loads are vectors of 2). A float
 * minimum knows nothing; a tile's minimum is no longer contiguous. */
static const char *const pick_ir =
    "kernel @k(%n: i32, %x: f32) launch {warps = 4, stages = 2} {\n"
    "  %pid = program_id 0 : i32\n"
    "  %c64 = const 64 : i32\n"
    "  %c32 = const 32 : i32\n"
    "  %a = mul %pid, %c64 : i32\n"
    "  %n16 = multiple_of 16 %n : i32\n"
    "  %b = mul %n16, %c32 : i32\n"
    "  %mn = minimum %a, %b : i32\n"
    "  %mx = maximum %a, %n16 : i32\n"
    "  %mo = minimum %a, %n : i32\n"
    "  %t = cmp lt %a, %b : i1\n"
    "  %sel = select %t, %a, %b : i32\n"
    "  %fm = minimum %x, %x : f32\n"
    "  %r = arange 0 : i32[64]\n"
    "  %as = splat %a : i32[64]\n"
    "  %ra = add %as, %r : i32[64]\n"
    "  %bs = splat %b : i32[64]\n"
    "  %tmin = minimum %ra, %bs : i32[64]\n"
    "  %s = for %mn, %b, %c64 iter(%c64) : i32 {\n"
    "  ^(%iv: i32, %acc: i32):\n"
    "    yield %acc\n"
    "  }\n"
    "  return\n"
    "}\n";

static void test_axisinfo_minimum_maximum_select(void **state)
{
    (void)state;
    Fx x;
    parse(&x, pick_ir);
    IrFunc *f = ir_module_find(x.m, "k");
    AxisInfo *ai = axisinfo_analyze(f, 0);
    assert_non_null(ai);
    assert_int_equal(fact_of(f, ai, "mn")->divisibility[0], 64);    /* 64 pid and 512 n */
    assert_int_equal(fact_of(f, ai, "mx")->divisibility[0], 16);
    assert_int_equal(fact_of(f, ai, "mo")->divisibility[0], 1);     /* n: nothing known */
    assert_int_equal(fact_of(f, ai, "sel")->divisibility[0], 64);
    assert_int_equal(fact_of(f, ai, "fm")->divisibility[0], 1);
    assert_int_equal(fact_of(f, ai, "iv")->divisibility[0], 64);    /* from mn, step 64 */
    const AxisInfo *t = fact_of(f, ai, "tmin");
    assert_int_equal(t->contiguity[0], 1);
    assert_int_equal(t->divisibility[0], 1);   /* element by element: ra's elements are not multiples */
    tl_free(ai);
    fx_free(&x);
}

/* The facts behind the 2-D causal-mask miscompile (issue 6), one op at a time. */
static const char *const mask2d_ir =
    "kernel @k(%out: *i32, %n: i32) launch {warps = 4, stages = 2} {\n"
    "  %pid = program_id 0 : i32\n"
    "  %c64 = const 64 : i32\n"
    "  %base = mul %pid, %c64 : i32\n"
    "  %r = arange 0 : i32[64]\n"
    "  %bs = splat %base : i32[64]\n"
    "  %rm = add %bs, %r : i32[64]\n"
    "  %col = expand_dims 1 %rm : i32[64, 1]\n"
    "  %row = expand_dims 0 %r : i32[1, 64]\n"
    "  %cb = broadcast %col : i32[64, 64]\n"
    "  %rb = broadcast %row : i32[64, 64]\n"
    "  %le = cmp le %rb, %cb : i1[64, 64]\n"
    "  %one = const 1 : i32[64]\n"
    "  %r1 = add %r, %one : i32[64]\n"
    "  %c16 = const 16 : i32\n"
    "  %nh = multiple_of 16 %n : i32\n"
    "  %ns = splat %nh : i32[64]\n"
    "  %lt = cmp lt %r1, %ns : i1[64]\n"
    "  %two = const 2 : i32[64]\n"
    "  %r2 = mul %r, %two : i32[64]\n"
    "  %lt0 = cmp lt %r, %ns : i1[64]\n"
    "  %le0 = cmp le %r, %ns : i1[64]\n"
    "  %gt0 = cmp gt %ns, %r : i1[64]\n"
    "  %zero = const 0 : i32[64]\n"
    "  %gtz = cmp gt %r, %zero : i1[64]\n"
    "  return\n"
    "}\n";

static const AxisInfo *fact_of(const IrFunc *f, const AxisInfo *ai, const char *name)
{
    for (uint32_t v = 0; v < f->nvalues; v++)
        if (f->values[v].name && !strcmp(f->values[v].name, name)) return &ai[v];
    fail_msg("no value %%%s", name);
    return NULL;
}

static void test_axisinfo_new_axis_and_compare(void **state)
{
    Fx x;
    parse(&x, mask2d_ir);
    IrFunc *f = ir_module_find(x.m, "k");
    AxisInfo *ai = axisinfo_analyze(f, 0);
    assert_non_null(ai);
    /* rm[:, None]: only the first row is a multiple of 64; the new axis speaks of all */
    assert_int_equal(fact_of(f, ai, "col")->divisibility[1], 1);
    assert_int_equal(fact_of(f, ai, "col")->divisibility[0], 64);
    assert_int_equal(fact_of(f, ai, "row")->divisibility[0], 1);
    /* rn[None, :] <= rm[:, None] changes along a row */
    assert_int_equal(fact_of(f, ai, "le")->constancy[1], 1);
    assert_int_equal(fact_of(f, ai, "le")->constancy[0], 1);
    /* 1..64 < n (n % 16 == 0) can change inside any group; 0..63 < n cannot */
    assert_int_equal(fact_of(f, ai, "lt")->constancy[0], 1);
    assert_int_equal(fact_of(f, ai, "lt0")->constancy[0], 16);
    /* run <= b and run > b split at b + 1: [0..63] > 0 changes at its second element */
    assert_int_equal(fact_of(f, ai, "le0")->constancy[0], 1);
    assert_int_equal(fact_of(f, ai, "gtz")->constancy[0], 1);
    assert_int_equal(fact_of(f, ai, "gt0")->constancy[0], 16);   /* b > run is run < b */
    /* 0, 2, 4, ...: only even, whatever divides the arange's start */
    assert_int_equal(fact_of(f, ai, "r2")->divisibility[0], 2);
    assert_int_equal(fact_of(f, ai, "r2")->contiguity[0], 1);
    tl_free(ai);
    fx_free(&x);
}

/* The checker runs the kernel and reports a fact the values break, at its op: here
 * the constancy the old analysis claimed for the causal mask, put back by hand. */
static void test_axisinfo_checker(void **state)
{
    Fx x;
    IrFunc *f = ir_module_find(parse(&x, mask2d_ir), "k");
    int32_t out[1] = {0};
    InterpArg args[2] = {{.is_buffer = true, .u.buf = {IR_I32, out, 1}}, {.u.i = 48}};
    const int64_t grid[3] = {2, 1, 1};
    AxisInfo *ai = axisinfo_analyze(f, 0);
    assert_true(axisinfo_check_facts(f, ai, args, 2, grid, NULL, &x.d));   /* n = 48 */
    assert_int_equal(x.d.nerrors, 0);
    AxisInfo *le = (AxisInfo *)fact_of(f, ai, "le");
    le->constancy[1] = 64;
    assert_false(axisinfo_check_facts(f, ai, args, 2, grid, NULL, &x.d));
    assert_int_equal(x.d.nerrors, 1);
    assert_non_null(strstr(x.d.items[0].msg, "claims constancy 64 along axis 1"));
    assert_non_null(strstr(x.d.items[0].msg, "element [0, 1] in program (0, 0, 0)"));
    assert_int_equal(x.d.items[0].loc.line, 12);
    tl_free(ai);
    fx_free(&x);
}

/* Layouts change no value: the interpreter runs laid-out IR, convert_layout included,
 * and a tile without a layout never reaches code generation. */
static void test_layouts_in_the_interpreter(void **state)
{
    Fx x;
    parse(&x, "layout #a = blocked<spt = [1, 4], tpw = [4, 8], wpc = [4, 1], order = [1, 0]>\n"
              "layout #b = blocked<spt = [4, 1], tpw = [8, 4], wpc = [1, 4], order = [0, 1]>\n"
              "layout #r = blocked<spt = [2], tpw = [32], wpc = [4], order = [0]>\n"
              "kernel @k(%out: *i32) launch {warps = 4, stages = 2} {\n"
              "  %i = arange 0 : i32[256] #r\n"
              "  %t = reshape %i : i32[16, 16] #a\n"
              "  %u = convert_layout %t : i32[16, 16] #b\n"
              "  %v = add %u, %u : i32[16, 16] #b\n"
              "  %w = convert_layout %v : i32[16, 16] #a\n"
              "  %f = reshape %w : i32[256] #r\n"
              "  %ps = splat %out : *i32[256] #r\n"
              "  %p = addptr %ps, %i : *i32[256] #r\n"
              "  store %p, %f\n"
              "  return\n"
              "}\n");
    int32_t out[256] = {0};
    InterpArg arg = {.is_buffer = true, .u.buf = {IR_I32, out, 256}};
    const int64_t grid[3] = {1, 1, 1};
    assert_true(interp_run(ir_module_find(x.m, "k"), &arg, 1, grid, NULL, &x.d));
    for (int i = 0; i < 256; i++) assert_int_equal(out[i], 2 * i);
    CgOptions o = {.arch = "sm_90a", .opt_level = 3};
    assert_true(pass_run_list(x.m, "plan", NULL));   /* hand-laid-out IR: its resource plan */
    char *ptx = cg_emit_ptx(x.m, &o, &x.d);   /* order [0, 1] is not lowered yet: a clear error */
    assert_null(ptx);
    assert_non_null(strstr(x.d.items[x.d.len - 1].msg, "does not lower the layout blocked<spt = [4, 1]"));
    fx_free(&x);
    parse(&x, vadd_ir);
    ptx = cg_emit_ptx(x.m, &o, &x.d);          /* no GPU pipeline: no plan, no layouts */
    assert_null(ptx);
    assert_non_null(strstr(x.d.items[x.d.len - 1].msg, "kernel 'vadd' has no resource plan: run the GPU pipeline"));
    fx_free(&x);
    parse(&x, vadd_ir);
    assert_true(pass_run_list(x.m, "plan", NULL));   /* a plan, but still no layouts */
    ptx = cg_emit_ptx(x.m, &o, &x.d);
    assert_null(ptx);
    assert_non_null(strstr(x.d.items[x.d.len - 1].msg, "a tile without a layout reached code generation"));
    fx_free(&x);
}

static void test_specialize(void **state)
{
    Fx x;
    parse(&x, "kernel @k(%p: *f32, %s: i32, %n: i32) launch {warps = 4, stages = 2} {\n"
              "  %r = arange 0 : i32[16]\n"
              "  %ss = splat %s : i32[16]\n"
              "  %o = mul %r, %ss : i32[16]\n"
              "  %ns = splat %n : i32[16]\n"
              "  %m = cmp lt %o, %ns : i1[16]\n"
              "  %ps = splat %p : *f32[16]\n"
              "  %q = addptr %ps, %o : *f32[16]\n"
              "  %v = load %q, %m : f32[16]\n"
              "  store %q, %v, %m\n"
              "  return\n"
              "}\n");
    IrFunc *f = ir_module_find(x.m, "k");
    SpecClass cls[3] = {SPEC_ALIGN16, SPEC_ONE, SPEC_DIV16};
    assert_int_equal(pass_specialize(f, cls), 1);
    assert_true(ir_verify_module(x.m));
    uint32_t *uses = ir_use_counts(f);
    assert_int_equal(uses[f->body.args[1]], 0);          /* %s == 1 became a constant */
    assert_int_equal(uses[f->body.args[2]], 1);          /* %n is read by its hint only */
    tl_free(uses);
    assert_true(f->body.first->code == IR_OP_MULTIPLE_OF || f->body.first->next->code == IR_OP_MULTIPLE_OF);
    assert_int_equal(spec_class_int(1), SPEC_ONE);
    assert_int_equal(spec_class_int(48), SPEC_DIV16);
    assert_int_equal(spec_class_int(24), SPEC_DIV8);      /* a multiple of 8, not of 16 */
    assert_int_equal(spec_class_int(-8), SPEC_DIV8);
    assert_int_equal(spec_class_int(12), SPEC_NONE);
    assert_int_equal(spec_class_int(0), SPEC_DIV16);
    assert_int_equal(spec_class_ptr(0x1000), SPEC_ALIGN16);
    assert_int_equal(spec_class_ptr(0x1004), SPEC_NONE);
    fx_free(&x);
}

/* A parameter of class DIV8 is read through `multiple_of 8`, and the axis analysis
 * takes it from there: f32 offsets row * n are 32 bytes apart, the mask `arange < n`
 * constant over 8 lanes. */
static void test_specialize_div8(void **state)
{
    Fx x;
    parse(&x, "kernel @k(%p: *f32, %n: i32) launch {warps = 4, stages = 2} {\n"
              "  %pid = program_id 0 : i32\n"
              "  %b = mul %pid, %n : i32\n"
              "  %r = arange 0 : i32[16]\n"
              "  %bs = splat %b : i32[16]\n"
              "  %o = add %bs, %r : i32[16]\n"
              "  %ns = splat %n : i32[16]\n"
              "  %m = cmp lt %r, %ns : i1[16]\n"
              "  %ps = splat %p : *f32[16]\n"
              "  %q = addptr %ps, %o : *f32[16]\n"
              "  %v = load %q, %m : f32[16]\n"
              "  store %q, %v, %m\n"
              "  return\n"
              "}\n");
    IrFunc *f = ir_module_find(x.m, "k");
    SpecClass cls[2] = {SPEC_ALIGN16, SPEC_DIV8};
    assert_int_equal(pass_specialize(f, cls), 1);
    assert_true(ir_verify_module(x.m));
    const IrOp *h = f->body.first;
    assert_int_equal(h->code, IR_OP_MULTIPLE_OF);
    assert_int_equal(h->attr.i, 8);
    AxisInfo *ai = axisinfo_analyze(f, f->aligned_params);
    const IrOp *load = NULL;
    for (const IrOp *op = f->body.first; op; op = op->next)
        if (op->code == IR_OP_LOAD) load = op;
    assert_non_null(load);
    assert_int_equal(ai[load->operands[0]].contiguity[0], 16);
    assert_int_equal(ai[load->operands[0]].divisibility[0], 16);   /* bytes: capped by the pointer's 16 */
    assert_int_equal(ai[load->operands[1]].constancy[0], 8);
    tl_free(ai);
    fx_free(&x);
}

/* cg_sink (codegen/cg_sink.c): in one block, two element chains whose values two
 * stores write, an inline-assembly value without a memory attribute (a fence, as a
 * barrier is), a load, a store to the loaded location. A chain moves to just before its
 * first use, but no pure instruction crosses a fence (they wait before it); the load,
 * the stores, the assembly and the barrier keep their order. */
static void test_sink_orders_chains_not_fences(void **state)
{
    (void)state;
    LLVMContextRef ctx = LLVMContextCreate();
    LLVMModuleRef mod = LLVMModuleCreateWithNameInContext("sink", ctx);
    LLVMTypeRef f32 = LLVMFloatTypeInContext(ctx), ptr = LLVMPointerTypeInContext(ctx, 1);
    LLVMTypeRef params[3] = {ptr, ptr, f32};
    LLVMValueRef fn = LLVMAddFunction(mod, "k", LLVMFunctionType(LLVMVoidTypeInContext(ctx), params, 3, 0));
    LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
    LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, fn, "entry"));
    LLVMValueRef p = LLVMGetParam(fn, 0), q = LLVMGetParam(fn, 1), x = LLVMGetParam(fn, 2);
    LLVMValueRef a0 = LLVMBuildFMul(b, x, LLVMConstReal(f32, 2.0), "a0");
    LLVMValueRef a1 = LLVMBuildFMul(b, x, LLVMConstReal(f32, 3.0), "a1");
    LLVMValueRef b0 = LLVMBuildFAdd(b, a0, LLVMConstReal(f32, 1.0), "b0");
    LLVMValueRef b1 = LLVMBuildFAdd(b, a1, LLVMConstReal(f32, 1.0), "b1");
    LLVMTypeRef asm_ty = LLVMFunctionType(f32, &f32, 1, 0);
    LLVMValueRef asm_fn = LLVMGetInlineAsm(asm_ty, "mov.b32 $0, $1;", 15, "=f,f", 4, 0, 0, LLVMInlineAsmDialectATT, 0);
    LLVMValueRef s0 = LLVMBuildStore(b, b0, p);
    LLVMValueRef m = LLVMBuildCall2(b, asm_ty, asm_fn, &x, 1, "m");
    LLVMValueRef l = LLVMBuildLoad2(b, f32, q, "l");
    LLVMValueRef s1 = LLVMBuildStore(b, LLVMConstReal(f32, 0.0), q);
    LLVMValueRef c = LLVMBuildFAdd(b, l, m, "c");
    unsigned id = LLVMLookupIntrinsicID("llvm.nvvm.barrier0", 18);
    LLVMValueRef bar_fn = LLVMGetIntrinsicDeclaration(mod, id, NULL, 0);
    LLVMValueRef bar = LLVMBuildCall2(b, LLVMIntrinsicGetType(ctx, id, NULL, 0), bar_fn, NULL, 0, "");
    LLVMValueRef one = LLVMConstInt(LLVMInt64TypeInContext(ctx), 1, 0);
    LLVMValueRef s2 = LLVMBuildStore(b, b1, LLVMBuildGEP2(b, f32, q, &one, 1, "q1"));
    LLVMValueRef s3 = LLVMBuildStore(b, c, p);
    LLVMBuildRetVoid(b);
    LLVMDisposeBuilder(b);

    TileKnobs kn = tile_knobs_default();
    cg_sink(mod, NULL, &kn);
    char *err = NULL;
    assert_false(LLVMVerifyModule(mod, LLVMReturnStatusAction, &err));
    LLVMDisposeMessage(err);
    LLVMValueRef order[16];
    int n = 0;
    for (LLVMValueRef in = LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(fn)); in && n < 16; in = LLVMGetNextInstruction(in))
        order[n++] = in;
    /* chain 0 at its store; chain 1 waits before the first fence after its definition
     * (the assembly, a call without a memory attribute), c before the barrier; the
     * gep of s2 stays after the barrier, where it was built */
    LLVMValueRef want[] = {a0, b0, s0, a1, b1, m, l, s1, c, bar};
    assert_int_equal(n, 14);   /* and the ret */
    for (int i = 0; i < 10; i++) assert_ptr_equal(order[i], want[i]);
    assert_int_equal(LLVMGetInstructionOpcode(order[10]), LLVMGetElementPtr);
    assert_ptr_equal(order[11], s2);
    assert_ptr_equal(order[12], s3);
    LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vadd_vectorized_when_aligned),
        cmocka_unit_test(test_sm80_and_unknown_arch),
        cmocka_unit_test(test_llvm_ir_kernel_abi),
        cmocka_unit_test(test_llvm_ir_thread_count_per_module),
        cmocka_unit_test(test_reduction_shuffles_and_shared_memory),
        cmocka_unit_test(test_kernel_info_without_shared_memory),
        cmocka_unit_test(test_layouts_own_each_element_once),
        cmocka_unit_test(test_mma_layouts_own_each_element_once),
        cmocka_unit_test(test_mma_fragments_match_the_isa),
        cmocka_unit_test(test_mma_tiles_and_owners),
        cmocka_unit_test(test_alike_layouts_hold_the_same_elements),
        cmocka_unit_test(test_in_register_broadcasts_need_no_other_thread),
        cmocka_unit_test(test_tf32_rounding_as_the_interpreter),
        cmocka_unit_test(test_axisinfo_facts),
        cmocka_unit_test(test_axisinfo_if),
        cmocka_unit_test(test_axisinfo_minimum_maximum_select),
        cmocka_unit_test(test_axisinfo_new_axis_and_compare),
        cmocka_unit_test(test_axisinfo_checker),
        cmocka_unit_test(test_layouts_in_the_interpreter),
        cmocka_unit_test(test_specialize),
        cmocka_unit_test(test_specialize_div8),
        cmocka_unit_test(test_sink_orders_chains_not_fences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
