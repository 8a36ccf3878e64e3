/* Tensor maps at launch (runtime/rt_tma.c) against the mock driver, with the real code
 * generator: a GEMM whose operands are block loads (examples/matmul_bf16.tile) compiles,
 * for 16-byte aligned pointers and row strides that are multiples of 16, to the variant
 * that copies by TMA, and every launch passes, after the arguments, one CUtensorMap per
 * operand that the mock's cuTensorMapEncodeTiled filled (its arguments recorded:
 * address, extents innermost first, byte strides, box, swizzle, zero fill). Where the
 * class forbids TMA (a stride of 1000) the variant has no maps; where the class allows
 * it but the map cannot be made (a negative stride, a driver that refuses, a driver
 * without the entry point) the launch runs the cp.async variant instead. The recipes
 * survive the disk cache (a new context loads the cubin and still passes the maps),
 * and a captured CUDA graph replays its launch with the maps. Persistent kernels launch
 * a capped grid; cluster kernels (the launch key cluster) `cluster` CTAs a program along
 * x, a persistent one as many clusters as cuOccupancyMaxActiveClusters says (or the
 * device's limits without it). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/mock/mockcuda.h"
#include "rt_internal.h"
#include "tests/unit/rt_test.h"

static MockLastLaunchFn mock_last;
static MockResetFn mock_reset;
static MockLaunchLogFn mock_log;
static MockCountsFn mock_counts;
static MockLastClusterQueryFn mock_cluster_query;

static struct {
    TrtContext *ctx;
    TrtModule *mod;
    char dir[256];
} cur;

static int setup(void **state)
{
    (void)state;
    memset(&cur, 0, sizeof cur);
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-tma-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return -1;
    mock_reset();
    unsetenv("MOCKCUDA_TMA_ERROR");
    unsetenv("MOCKCUDA_ACTIVE_CLUSTERS");
    unsetenv("MOCKCUDA_ACTIVE_CLUSTERS_ERROR");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.mod = NULL;
    cur.ctx = NULL;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cur.dir);
    return system(cmd);
}

enum { M = 1024, N = 768, K = 512, BM = 128, BN = 256, BK = 64 };

static TrtKernel *gemm(void)
{
    if (!cur.ctx) assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_file(cur.ctx, TILE_EXAMPLES_DIR "/matmul_bf16.tile", &cur.mod));
    /* the plain ring (the example's default has ws and persistent); every key of the
     * space fixed, so the handle runs this config */
    TrtConst consts[9] = {{"BM", BM}, {"BN", BN}, {"BK", BK}, {"warps", 8}, {"stages", 3}, {"ws", 0},
                          {"persistent", 0}, {"cluster", 1}, {"pingpong", 0}};
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "matmul_bf16", consts, 9, &k));
    return k;
}

/* c, a, b, M, N, K, stride_am, stride_bk, stride_cm */
static void gemm_args(TrtArg a[9], uint64_t pa, int32_t sa, int32_t sb)
{
    a[0] = trt_arg_ptr(0x100000);
    a[1] = trt_arg_ptr(pa);
    a[2] = trt_arg_ptr(0x300000);
    a[3] = trt_arg_i32(M);
    a[4] = trt_arg_i32(N);
    a[5] = trt_arg_i32(K);
    a[6] = trt_arg_i32(sa);
    a[7] = trt_arg_i32(sb);
    a[8] = trt_arg_i32(N);
}

static void launch(TrtKernel *k, uint64_t pa, int32_t sa, int32_t sb, MockLaunch *l)
{
    TrtArg a[9];
    gemm_args(a, pa, sa, sb);
    assert_ok(trt_launch(k, a, 9, NULL, NULL));
    mock_last(l);
}

/* A 2-D map: its address, extents (contiguous first), the row's stride in bytes, its
 * box and swizzle mode (3: CU_TENSOR_MAP_SWIZZLE_128B). */
static void assert_map2d(const MockTensorMap *t, uint64_t address, int64_t d0, int64_t d1, int64_t stride,
                         int32_t box0, int32_t box1, int swizzle)
{
    assert_int_equal(t->address, address);
    assert_int_equal(t->dims[0], d0);
    assert_int_equal(t->dims[1], d1);
    assert_int_equal(t->strides[0], stride);
    assert_int_equal(t->box[0], box0);
    assert_int_equal(t->box[1], box1);
    assert_int_equal(t->swizzle, swizzle);
}

/* C [M, N] (store_block, passes/tmastore.c): boxes of one staging chunk, 64 columns
 * (128 bytes, the 128-byte swizzle) by BM rows. */
static void assert_c_map(const MockTensorMap *tc)
{
    assert_map2d(tc, 0x100000, N, M, 2 * N, 64, BM, 3);
}

static void assert_maps(const MockLaunch *l, int32_t sa, int32_t sb)
{
    assert_int_equal(l->nparams, 12);
    assert_int_equal(l->param_bytes[9], 128);
    assert_int_equal(l->param_bytes[10], 128);
    assert_int_equal(l->param_bytes[11], 128);
    assert_int_equal(l->ntma, 3);
    const MockTensorMap *ta = &l->tma[0], *tb = &l->tma[1];
    assert_c_map(&l->tma[2]);
    assert_string_equal(ta->magic, "mocktma");
    /* A [M, K], K contiguous: extents (K, M), the row's bytes, boxes of 64 x BM, 128 B */
    assert_map2d(ta, 0x200000, K, M, 2 * sa, 64, BM, 3);
    assert_int_equal(ta->rank, 2);
    assert_int_equal(ta->dtype, 1);                  /* 16-bit elements */
    assert_int_equal(ta->oob_fill, 0);               /* zeros outside */
    /* B [K, N], N contiguous: boxes of 64 columns by BK rows, four to a stage */
    assert_map2d(tb, 0x300000, N, K, 2 * sb, 64, BK, 3);
}

static void test_aligned_launch_passes_tensor_maps(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    MockLaunch l;
    launch(k, 0x200000, K, N, &l);
    assert_string_equal(l.func, "matmul_bf16");
    assert_maps(&l, K, N);
    assert_int_equal(l.grid[0], (M / BM) * (N / BN));
    /* a new tensor (another address, another stride) gets new maps from the same variant */
    launch(k, 0x400000, 2 * K, N, &l);
    assert_int_equal(l.ntma, 3);
    assert_int_equal(l.tma[0].address, 0x400000);
    assert_int_equal(l.tma[0].strides[0], 4 * K);
    assert_int_equal(k->nvariants, 1);
}

static void test_class_without_tma_has_no_maps(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    MockLaunch l;
    launch(k, 0x200000, 1004, N, &l);      /* 1004 is no multiple of 8: the cp.async ring */
    assert_int_equal(l.nparams, 10);       /* C's store keeps its map */
    assert_int_equal(l.ntma, 1);
    assert_c_map(&l.tma[0]);
    launch(k, 0x200008, K, N, &l);         /* a pointer 8-byte aligned: likewise */
    assert_int_equal(l.ntma, 1);
}

/* A ragged stride: 1000 is a multiple of 8, not 16, so A's bf16 rows are 2000 bytes
 * apart, a multiple of 16, and the variant of its class copies A by TMA as div16's does. */
static void test_div8_class_passes_tensor_maps(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    MockLaunch l;
    launch(k, 0x200000, 1000, N, &l);
    assert_maps(&l, 1000, N);
    assert_int_equal(k->variants[0].mask >> (2 * 6) & 3, RT_SPEC_DIV8);   /* stride_am */
    launch(k, 0x200000, K, N, &l);         /* K divisible by 16: another class, maps alike */
    assert_maps(&l, K, N);
    assert_int_equal(k->nvariants, 2);
}

/* The class promises what TMA needs except the sign: a negative stride (rows read
 * bottom-up) is a multiple of 16, and no tensor map takes it. */
static void test_refused_map_falls_back(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    MockLaunch l;
    launch(k, 0x200000 + (uint64_t)(M - 1) * K * 2, -K, N, &l);
    assert_int_equal(l.nparams, 10);       /* C's map only */
    assert_int_equal(l.ntma, 1);
    assert_int_equal(k->nvariants, 2);     /* the TMA variant, then the one without A's promise */
    /* a later launch the maps take runs the TMA variant again */
    launch(k, 0x200000, K, N, &l);
    assert_maps(&l, K, N);
}

static void test_driver_refusal_falls_back(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    setenv("MOCKCUDA_TMA_ERROR", "1", 1);
    MockLaunch l;
    launch(k, 0x200000, K, N, &l);
    unsetenv("MOCKCUDA_TMA_ERROR");
    assert_int_equal(l.nparams, 9);
    assert_int_equal(l.ntma, 0);
}

static void test_recipes_survive_the_disk_cache(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    MockLaunch l;
    launch(k, 0x200000, K, N, &l);
    assert_maps(&l, K, N);
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.mod = NULL;
    cur.ctx = NULL;
    mock_reset();
    setenv("TILE_CODEGEN_LIBRARY", "/nonexistent/libtileCG.so", 1);   /* a warm start compiles nothing */
    k = gemm();
    launch(k, 0x200000, K, N, &l);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 1);
    assert_int_equal(k->variants[0].origin, RT_FROM_DISK_CUBIN);
    assert_maps(&l, K, N);
}

static void test_graph_replay_passes_maps(void **state)
{
    (void)state;
    TrtKernel *k = gemm();
    TrtArg a[9];
    gemm_args(a, 0x200000, K, N);
    assert_ok(trt_launch(k, a, 9, NULL, NULL));    /* build the variant outside the capture */
    CUstream s = (CUstream)0x77;
    TrtGraph *g = NULL;
    assert_ok(trt_graph_begin(cur.ctx, s));
    assert_ok(trt_launch(k, a, 9, NULL, s));
    assert_ok(trt_graph_end(cur.ctx, s, &g));
    mock_reset();
    assert_ok(trt_graph_launch(g, s));
    MockLaunch l;
    assert_int_equal(mock_log(&l, 1), 1);
    assert_maps(&l, K, N);
    /* an update to another tensor re-encodes its map; one no map takes is refused */
    gemm_args(a, 0x500000, K, N);
    assert_ok(trt_graph_update(g, 0, a, 9));
    mock_reset();
    assert_ok(trt_graph_launch(g, s));
    assert_int_equal(mock_log(&l, 1), 1);
    assert_int_equal(l.tma[0].address, 0x500000);
    gemm_args(a, 0x500000 + (uint64_t)(M - 1) * K * 2, -K, N);
    assert_int_equal(trt_graph_update(g, 0, a, 9), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "cannot be copied by TMA"));
    trt_graph_destroy(g);
}

/* A persistent kernel (passes/persistent.c) launches at most SMs x resident programs
 * per SM along x, each walking the grid's tiles: the GEMM of 128 x 16 tiles (2048) on
 * the mock's 132 SMs (one 196 KiB program each) runs 132, on 4 SMs 4, a grid of 24
 * tiles 24, the same config without the key its whole grid; the flag survives the disk
 * cache, and a captured graph replays the capped grid. */
static TrtKernel *persistent_gemm(int persistent)
{
    if (!cur.ctx) assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &cur.ctx));
    if (!cur.mod) assert_ok(trt_module_load_file(cur.ctx, TILE_EXAMPLES_DIR "/matmul_bf16.tile", &cur.mod));
    TrtConst consts[9] = {{"BM", BM}, {"BN", BN}, {"BK", BK}, {"warps", 8}, {"stages", 3}, {"ws", 1},
                          {"persistent", persistent}, {"cluster", 1}, {"pingpong", 0}};
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "matmul_bf16", consts, 9, &k));
    return k;
}

static void launch_mn(TrtKernel *k, int32_t m, int32_t n, CUstream s, MockLaunch *l)
{
    TrtArg a[9];
    gemm_args(a, 0x200000, K, n);
    a[3] = trt_arg_i32(m);
    a[4] = trt_arg_i32(n);
    a[8] = trt_arg_i32(n);
    assert_ok(trt_launch(k, a, 9, NULL, s));
    if (l) mock_last(l);
}

static void assert_grid(const MockLaunch *l, unsigned x, unsigned y, unsigned z)
{
    assert_int_equal(l->grid[0], x);
    assert_int_equal(l->grid[1], y);
    assert_int_equal(l->grid[2], z);
}

static void test_persistent_launch_caps_the_grid(void **state)
{
    (void)state;
    MockLaunch l;
    TrtKernel *k = persistent_gemm(1);
    launch_mn(k, 16384, 4096, NULL, &l);
    assert_grid(&l, 132, 1, 1);
    assert_int_equal(l.ntma, 3);
    assert_int_equal(k->variants[0].max_programs, 132);
    launch_mn(k, 1024, 768, NULL, &l);           /* 8 x 3 tiles: fewer than the SMs */
    assert_grid(&l, 24, 1, 1);
    launch_mn(persistent_gemm(0), 16384, 4096, NULL, &l);
    assert_grid(&l, 2048, 1, 1);
    /* a warm start keeps the flag (the cache entry's meta) */
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.mod = NULL;
    cur.ctx = NULL;
    setenv("MOCKCUDA_SMS", "4", 1);
    setenv("TILE_CODEGEN_LIBRARY", "/nonexistent/libtileCG.so", 1);
    k = persistent_gemm(1);
    launch_mn(k, 16384, 4096, NULL, &l);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 1);
    unsetenv("MOCKCUDA_SMS");
    assert_int_equal(k->variants[0].origin, RT_FROM_DISK_CUBIN);
    assert_grid(&l, 4, 1, 1);
    /* a graph replays the capped grid */
    CUstream s = (CUstream)0x77;
    TrtGraph *g = NULL;
    assert_ok(trt_graph_begin(cur.ctx, s));
    launch_mn(k, 16384, 4096, s, NULL);
    assert_ok(trt_graph_end(cur.ctx, s, &g));
    mock_reset();
    assert_ok(trt_graph_launch(g, s));
    assert_int_equal(mock_log(&l, 1), 1);
    assert_grid(&l, 4, 1, 1);
    trt_graph_destroy(g);
}

/* A persistent kernel counts its walk in i32: a grid of more programs is refused at
 * launch, with the sizes, rather than walked wrong. */
static void test_persistent_grid_too_large(void **state)
{
    (void)state;
    static const char src[] =
        "@launch(persistent = true)\n"
        "kernel fill(y: *f32, n: i32) grid(n, n) {\n"
        "    store(y + program_id(0), 1.0);\n"
        "}\n";
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "fill.tile", src, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "fill", NULL, 0, &k));
    TrtArg a[2] = {trt_arg_ptr(0x100000), trt_arg_i32(1000)};
    MockLaunch l;
    assert_ok(trt_launch(k, a, 2, NULL, NULL));       /* 10^6 programs: 16 of 128 threads per SM */
    mock_last(&l);
    assert_grid(&l, 132 * 16, 1, 1);
    a[1] = trt_arg_i32(65535);
    assert_int_equal(trt_launch(k, a, 2, NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "its grid of 65535x65535x1 has 4294836225 programs"));
}

/* Without cuTensorMapEncodeTiled (an old driver) every launch takes cp.async; in a
 * child, since the driver table is read once per process. */
static int child_no_encoder(void)
{
    setenv("MOCKCUDA_MISSING", "cuTensorMapEncodeTiled", 1);
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-tma-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return 2;
    TrtKernel *k = gemm();
    MockLaunch l;
    launch(k, 0x200000, K, N, &l);
    int rc = l.ntma == 0 && l.nparams == 9 ? 0 : 1;
    teardown(NULL);
    return rc;
}

/* Runs this test binary again with `flag` (a child that hides a driver symbol before
 * the context exists); asserts that it passed. */
static void run_child(const char *flag)
{
    char cmd[512], self[256];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = 0;
    snprintf(cmd, sizeof cmd, "'%s' %s", self, flag);
    assert_int_equal(system(cmd), 0);
}

static void test_driver_without_encoder(void **state)
{
    (void)state;
    run_child("--child-no-encoder");
}

/* ---- clusters ---------------------------------------------------------------------- */
/* A GEMM whose dot the cluster pass can split: each program's BM = 128 rows of C, 64 a
 * CTA in a cluster of 2 (passes/cluster.c), over a 2-D grid of programs. The launch
 * keys cluster, persistent and ws come as consts. */
static const char cluster_src[] =
    "@launch(warps = 8, stages = 3, cluster = 2)\n"
    "kernel gemm_cluster(c: *bf16, a: *bf16, b: *bf16, M: i32, N: i32, K: i32,\n"
    "                    const BM: i32 = 128, const BN: i32 = 128, const BK: i32 = 64)\n"
    "    grid(cdiv(M, BM), cdiv(N, BN))\n"
    "{\n"
    "    let pm = program_id(0);\n"
    "    let pn = program_id(1);\n"
    "    var acc = zeros([BM, BN], f32);\n"
    "    for k in range(0, K, BK) {\n"
    "        let a_tile = load_block(a, [M, K], [K, 1], [pm * BM, k], [BM, BK]);\n"
    "        let b_tile = load_block(b, [K, N], [N, 1], [k, pn * BN], [BK, BN]);\n"
    "        acc = dot(a_tile, b_tile, acc);\n"
    "    }\n"
    "    store_block(c, [M, N], [N, 1], [pm * BM, pn * BN], acc as bf16);\n"
    "}\n";

static TrtKernel *cluster_gemm(int cluster, int persistent)
{
    if (!cur.ctx) assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &cur.ctx));
    if (!cur.mod) assert_ok(trt_module_load_string(cur.ctx, "gemm_cluster.tile", cluster_src, &cur.mod));
    /* a persistent TMA ring needs a producer warpgroup (passes/persistent.c) */
    TrtConst consts[3] = {{"cluster", cluster}, {"persistent", persistent}, {"ws", persistent}};
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "gemm_cluster", consts, 3, &k));
    return k;
}

/* Launches C [m, n] = A [m, K] B [K, n]: a grid of cdiv(m, 128) x cdiv(n, 128) programs. */
static TrtStatus cluster_launch(TrtKernel *k, int32_t m, int32_t n, const uint32_t *grid, CUstream s)
{
    TrtArg a[6] = {trt_arg_ptr(0x100000), trt_arg_ptr(0x200000), trt_arg_ptr(0x300000),
                   trt_arg_i32(m), trt_arg_i32(n), trt_arg_i32(K)};
    return trt_launch(k, a, 6, grid, s);
}

static void cluster_launch_ok(TrtKernel *k, int32_t m, int32_t n, MockLaunch *l)
{
    assert_ok(cluster_launch(k, m, n, NULL, NULL));
    mock_last(l);
}

static void drop_context(void)
{
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.mod = NULL;
    cur.ctx = NULL;
}

/* The grid counts programs; each runs on `cluster` CTAs along x: 8 x 6 programs launch
 * 16 x 6 CTAs in clusters of 2, 32 x 6 in clusters of 4, 8 x 6 without a cluster; an
 * explicit grid likewise. */
static void test_cluster_launch_runs_cluster_ctas_a_program(void **state)
{
    (void)state;
    MockLaunch l;
    TrtKernel *k = cluster_gemm(2, 0);
    cluster_launch_ok(k, 1024, 768, &l);
    assert_string_equal(l.func, "gemm_cluster");
    assert_grid(&l, 16, 6, 1);
    assert_int_equal(l.block[0], k->variants[0].threads);
    assert_int_equal(k->variants[0].cluster, 2);
    assert_int_equal(k->variants[0].max_programs, 0);
    assert_int_equal(l.ntma, 3);                  /* the launch is otherwise the same */
    assert_int_equal(l.cluster, 2);               /* the PTX's .reqnctapercluster: the mock checks the grid */
    uint32_t grid[3] = {3, 2, 1};
    assert_ok(cluster_launch(k, 1024, 768, grid, NULL));
    mock_last(&l);
    assert_grid(&l, 6, 2, 1);
    cluster_launch_ok(cluster_gemm(4, 0), 1024, 768, &l);
    assert_grid(&l, 32, 6, 1);
    k = cluster_gemm(1, 0);
    cluster_launch_ok(k, 1024, 768, &l);
    assert_grid(&l, 8, 6, 1);
    assert_int_equal(k->variants[0].cluster, 1);
}

/* The mock launches an .entry with .reqnctapercluster as the driver does: only with a
 * grid x that is a multiple of the cluster (so the tests above would see a launch of
 * the wrong size fail). */
static void test_mock_checks_the_cluster_of_the_ptx(void **state)
{
    (void)state;
    static const char ptx[] = ".version 8.3\n.target sm_90a\n.address_size 64\n"
                              ".visible .entry pair(.param .u64 x)\n.explicitcluster\n"
                              ".reqnctapercluster 2, 1, 1\n{\n\tret;\n}\n";
    static const IrElem params[] = {IR_PTR};
    static const RtPtxKernel pair = {"pair", params, NULL, 1, 128};
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &cur.ctx));
    assert_ok(rt_module_load_ptx(cur.ctx, ptx, &pair, 1, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "pair", NULL, 0, &k));
    TrtArg a = trt_arg_ptr(0x100000);
    uint32_t odd[3] = {3, 1, 1}, even[3] = {4, 1, 1};
    assert_int_equal(trt_launch(k, &a, 1, odd, NULL), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "CUDA_ERROR_INVALID_CLUSTER_SIZE (912)"));
    assert_ok(trt_launch(k, &a, 1, even, NULL));
    MockLaunch l;
    mock_last(&l);
    assert_int_equal(l.cluster, 2);
}

/* The CTAs along x must fit what a GPU launches, not only the programs. */
static void test_cluster_grid_too_large(void **state)
{
    (void)state;
    TrtKernel *k = cluster_gemm(2, 0);
    uint32_t grid[3] = {1u << 30, 1, 1};
    mock_reset();
    assert_int_equal(cluster_launch(k, 1024, 768, grid, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "kernel 'gemm_cluster' runs each program on a cluster of 2 CTAs "
                                             "along x: its grid of 1073741824x1x1 is 2147483648 CTAs along x"));
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.launches, 0);
    grid[0] = (1u << 30) - 1;
    assert_ok(cluster_launch(k, 1024, 768, grid, NULL));
}

/* A persistent cluster kernel launches min(its programs, the clusters the device runs
 * at once) clusters: the driver's count, asked once when the variant loads with the
 * variant's block, shared memory and cluster. */
static void test_persistent_cluster_launch_counts_clusters(void **state)
{
    (void)state;
    MockLaunch l;
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "50", 1);
    TrtKernel *k = cluster_gemm(2, 1);
    cluster_launch_ok(k, 16384, 4096, &l);        /* 128 x 32 programs */
    assert_grid(&l, 100, 1, 1);
    assert_int_equal(k->variants[0].max_programs, 50);
    MockClusterQuery q;
    mock_cluster_query(&q);
    assert_int_equal(q.cluster, 2);
    assert_int_equal(q.grid_x % 2, 0);
    assert_int_equal(q.block_x, k->variants[0].threads);
    assert_int_equal(q.shmem, k->variants[0].shared_bytes);
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.cluster_queries, 1);
    cluster_launch_ok(k, 1024, 768, &l);          /* 8 x 6 programs: fewer than 50 */
    assert_grid(&l, 96, 1, 1);
    cluster_launch_ok(k, 128, 128, &l);
    assert_grid(&l, 2, 1, 1);
    mock_counts(&c);
    assert_int_equal(c.cluster_queries, 1);       /* asked at load, not at launch */
    /* clusters of 4: the mock's default count, 132 SMs / 4 */
    unsetenv("MOCKCUDA_ACTIVE_CLUSTERS");
    k = cluster_gemm(4, 1);
    cluster_launch_ok(k, 16384, 4096, &l);
    assert_grid(&l, 4 * 33, 1, 1);
}

/* What a persistent cluster launch falls back to: the resident CTAs (SMs x blocks an SM
 * holds, of `regs` registers a thread as the mock says) over the cluster size. */
static uint32_t fallback_clusters(const RtVariant *v, uint32_t regs)
{
    RtLimits lim;
    assert_ok(rt_device_limits(cur.ctx, &lim));
    uint32_t per_sm = rt_blocks_per_sm(&lim, v->threads, regs, v->shared_bytes);
    uint32_t n = (uint32_t)lim.sms * (per_sm ? per_sm : 1) / v->cluster;
    return n ? n : 1;
}

static void test_persistent_cluster_query_fails(void **state)
{
    (void)state;
    MockLaunch l;
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "50", 1);
    setenv("MOCKCUDA_ACTIVE_CLUSTERS_ERROR", "912", 1);
    TrtKernel *k = cluster_gemm(2, 1);
    cluster_launch_ok(k, 16384, 4096, &l);
    uint32_t n = fallback_clusters(&k->variants[0], 32);
    assert_int_not_equal(n, 50);
    assert_int_equal(k->variants[0].max_programs, n);
    assert_grid(&l, 2 * n, 1, 1);
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.cluster_queries, 1);            /* asked, and it failed */
    /* on a device of 1 SM that holds fewer CTAs than a cluster (255 registers a
     * thread: one block at most): still one cluster */
    unsetenv("MOCKCUDA_ACTIVE_CLUSTERS_ERROR");
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "0", 1);   /* the driver says none fits: fall back too */
    setenv("MOCKCUDA_SMS", "1", 1);
    setenv("MOCKCUDA_REGS", "*:255", 1);
    k = cluster_gemm(4, 1);
    cluster_launch_ok(k, 16384, 4096, &l);
    assert_int_equal(fallback_clusters(&k->variants[0], 255), 1);
    unsetenv("MOCKCUDA_SMS");
    unsetenv("MOCKCUDA_REGS");
    assert_int_equal(k->variants[0].max_programs, 1);
    assert_grid(&l, 4, 1, 1);
}

/* A driver without cuOccupancyMaxActiveClusters still launches
 * persistent cluster kernels, sized from the device's limits; in a child, since the
 * driver table is read once per process. */
static int child_no_cluster_query(void)
{
    setenv("MOCKCUDA_MISSING", "cuOccupancyMaxActiveClusters", 1);
    if (setup(NULL)) return 2;
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "50", 1);   /* not asked */
    TrtKernel *k = cluster_gemm(2, 1);
    MockLaunch l;
    cluster_launch_ok(k, 16384, 4096, &l);
    MockCounts c;
    mock_counts(&c);
    uint32_t n = fallback_clusters(&k->variants[0], 32);
    int rc = !cur.ctx->drv->cuOccupancyMaxActiveClusters && c.cluster_queries == 0 &&
                     k->variants[0].max_programs == n && n != 50 && l.grid[0] == 2 * n && l.grid[1] == 1
                 ? 0 : 1;
    if (rc) fprintf(stderr, "child: grid %u, %u clusters, %d queries\n", l.grid[0], n, c.cluster_queries);
    teardown(NULL);
    return rc;
}

static void test_cluster_without_the_query(void **state)
{
    (void)state;
    run_child("--child-no-cluster-query");
}

/* A captured graph replays the launch's CTAs: a cluster kernel's and a persistent one's. */
static void test_cluster_graph_replay(void **state)
{
    (void)state;
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "50", 1);
    TrtKernel *k = cluster_gemm(2, 0), *p = cluster_gemm(2, 1);
    MockLaunch direct[2], replay[2];
    cluster_launch_ok(k, 1024, 768, &direct[0]);  /* builds the variants outside the capture */
    cluster_launch_ok(p, 16384, 4096, &direct[1]);
    assert_grid(&direct[0], 16, 6, 1);
    assert_grid(&direct[1], 100, 1, 1);
    CUstream s = (CUstream)0x77;
    TrtGraph *g = NULL;
    assert_ok(trt_graph_begin(cur.ctx, s));
    assert_ok(cluster_launch(k, 1024, 768, NULL, s));
    assert_ok(cluster_launch(p, 16384, 4096, NULL, s));
    assert_ok(trt_graph_end(cur.ctx, s, &g));
    mock_reset();
    assert_ok(trt_graph_launch(g, s));
    assert_int_equal(mock_log(replay, 2), 2);
    for (int i = 0; i < 2; i++) {
        assert_string_equal(replay[i].func, direct[i].func);
        assert_int_equal(replay[i].cluster, 2);
        assert_grid(&replay[i], direct[i].grid[0], direct[i].grid[1], direct[i].grid[2]);
        assert_int_equal(replay[i].block[0], direct[i].block[0]);
    }
    trt_graph_destroy(g);
}

/* A warm start (a new context, no code generator) loads the cluster size with the cubin
 * and launches the same grids, the persistent one sized by the driver's count again. */
static void test_cluster_survives_the_disk_cache(void **state)
{
    (void)state;
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "50", 1);
    MockLaunch cold[2], warm[2];
    cluster_launch_ok(cluster_gemm(2, 0), 1024, 768, &cold[0]);
    cluster_launch_ok(cluster_gemm(2, 1), 16384, 4096, &cold[1]);
    drop_context();
    mock_reset();
    setenv("MOCKCUDA_ACTIVE_CLUSTERS", "40", 1);
    setenv("TILE_CODEGEN_LIBRARY", "/nonexistent/libtileCG.so", 1);   /* a warm start compiles nothing */
    TrtKernel *k = cluster_gemm(2, 0), *p = cluster_gemm(2, 1);
    cluster_launch_ok(k, 1024, 768, &warm[0]);
    cluster_launch_ok(p, 16384, 4096, &warm[1]);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 1);
    assert_int_equal(k->variants[0].origin, RT_FROM_DISK_CUBIN);
    assert_int_equal(p->variants[0].origin, RT_FROM_DISK_CUBIN);
    assert_int_equal(k->variants[0].cluster, 2);
    assert_grid(&warm[0], cold[0].grid[0], cold[0].grid[1], cold[0].grid[2]);
    assert_grid(&cold[1], 100, 1, 1);
    assert_grid(&warm[1], 80, 1, 1);              /* this device's count: 40 clusters */
}

/* The cluster size is bits 8..15 of the payload's flags word (docs/CACHE.md); an entry
 * written before clusters (0 there) loads as no cluster. The test rewrites the cached
 * cubin's flags as an older runtime wrote them and starts again. */
typedef struct {
    RtKey key;
    int n;
} Found;

static void find_cubin(const RtCacheEntryInfo *e, void *ud)
{
    Found *f = ud;
    if (e->kind == RT_ENTRY_CUBIN) f->key = e->key, f->n++;
}

static void test_payload_without_cluster_bits(void **state)
{
    (void)state;
    MockLaunch l;
    cluster_launch_ok(cluster_gemm(2, 1), 16384, 4096, &l);
    assert_grid(&l, 2 * 66, 1, 1);                /* the mock's 132 SMs / 2 */
    drop_context();
    RtCache *c = NULL;
    assert_ok(rt_cache_open(cur.dir, 0, &c));
    Found f = {{{0}}, 0};
    rt_cache_foreach(c, find_cubin, &f);
    assert_int_equal(f.n, 1);
    RtBlob b = {0};
    assert_int_equal(rt_cache_get(c, RT_ENTRY_CUBIN, &f.key, &b), RT_GET_HIT);
    uint32_t w[4];
    memcpy(w, b.data, sizeof w);
    assert_int_equal(w[3], 2u << 8 | RT_META_PERSISTENT);
    w[3] = RT_META_PERSISTENT;
    memcpy(b.data, w, sizeof w);
    assert_ok(rt_cache_put(c, RT_ENTRY_CUBIN, &f.key, b.data, b.len));
    rt_blob_free(&b);
    rt_cache_close(c);
    setenv("TILE_CODEGEN_LIBRARY", "/nonexistent/libtileCG.so", 1);
    TrtKernel *k = cluster_gemm(2, 1);
    cluster_launch_ok(k, 16384, 4096, &l);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 1);
    assert_int_equal(k->variants[0].origin, RT_FROM_DISK_CUBIN);
    assert_int_equal(k->variants[0].cluster, 1);
    assert_int_equal(k->variants[0].max_programs, fallback_clusters(&k->variants[0], 32));   /* SMs x blocks */
    assert_grid(&l, k->variants[0].max_programs, 1, 1);
}

static void bind_mock(void)
{
    void *h = dlopen(getenv("TILE_CUDA_LIBRARY"), RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cannot open the mock driver: %s\n", dlerror());
        exit(1);
    }
    mock_last = (MockLastLaunchFn)dlsym(h, "mockcuda_last_launch");
    mock_reset = (MockResetFn)dlsym(h, "mockcuda_reset");
    mock_log = (MockLaunchLogFn)dlsym(h, "mockcuda_launch_log");
    mock_counts = (MockCountsFn)dlsym(h, "mockcuda_counts");
    mock_cluster_query = (MockLastClusterQueryFn)dlsym(h, "mockcuda_last_cluster_query");
}

int main(int argc, char **argv)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 0);
    unsetenv("TILE_LOG_RECOMPILES");
    unsetenv("TILE_TMA");
    bind_mock();
    if (argc == 2 && !strcmp(argv[1], "--child-no-encoder")) return child_no_encoder();
    if (argc == 2 && !strcmp(argv[1], "--child-no-cluster-query")) return child_no_cluster_query();
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_aligned_launch_passes_tensor_maps), T(test_class_without_tma_has_no_maps),
        T(test_div8_class_passes_tensor_maps),
        T(test_refused_map_falls_back), T(test_driver_refusal_falls_back),
        T(test_recipes_survive_the_disk_cache), T(test_graph_replay_passes_maps),
        T(test_driver_without_encoder), T(test_persistent_launch_caps_the_grid),
        T(test_persistent_grid_too_large), T(test_cluster_launch_runs_cluster_ctas_a_program),
        T(test_mock_checks_the_cluster_of_the_ptx), T(test_cluster_grid_too_large),
        T(test_persistent_cluster_launch_counts_clusters),
        T(test_persistent_cluster_query_fails), T(test_cluster_without_the_query),
        T(test_cluster_graph_replay), T(test_cluster_survives_the_disk_cache),
        T(test_payload_without_cluster_bits),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
