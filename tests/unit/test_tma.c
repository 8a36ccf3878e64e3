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
 * and a captured CUDA graph replays its launch with the maps. */
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
    TrtConst consts[7] = {{"BM", BM}, {"BN", BN}, {"BK", BK}, {"warps", 8}, {"stages", 3}, {"ws", 0},
                          {"persistent", 0}};   /* the plain ring (the example's default has both) */
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "matmul_bf16", consts, 7, &k));
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
    launch(k, 0x200000, 1000, N, &l);      /* 1000 is no multiple of 16: the cp.async ring */
    assert_int_equal(l.nparams, 10);       /* C's store keeps its map */
    assert_int_equal(l.ntma, 1);
    assert_c_map(&l.tma[0]);
    launch(k, 0x200008, K, N, &l);         /* a pointer 8-byte aligned: likewise */
    assert_int_equal(l.ntma, 1);
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
    TrtConst consts[7] = {{"BM", BM}, {"BN", BN}, {"BK", BK}, {"warps", 8}, {"stages", 3}, {"ws", 1},
                          {"persistent", persistent}};
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "matmul_bf16", consts, 7, &k));
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

static void test_driver_without_encoder(void **state)
{
    (void)state;
    char cmd[512], self[256];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = 0;
    snprintf(cmd, sizeof cmd, "'%s' --child-no-encoder", self);
    assert_int_equal(system(cmd), 0);
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
}

int main(int argc, char **argv)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 0);
    unsetenv("TILE_LOG_RECOMPILES");
    unsetenv("TILE_TMA");
    bind_mock();
    if (argc == 2 && !strcmp(argv[1], "--child-no-encoder")) return child_no_encoder();
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_aligned_launch_passes_tensor_maps), T(test_class_without_tma_has_no_maps),
        T(test_refused_map_falls_back), T(test_driver_refusal_falls_back),
        T(test_recipes_survive_the_disk_cache), T(test_graph_replay_passes_maps),
        T(test_driver_without_encoder), T(test_persistent_launch_caps_the_grid),
        T(test_persistent_grid_too_large),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
