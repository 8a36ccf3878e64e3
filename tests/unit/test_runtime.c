/* libtileRT's logic against the mock CUDA driver (tests/mock): contexts, modules,
 * argument checking and packing, variant selection by divisibility and alignment,
 * the disk cache on the launch path, driver errors and the no-driver status.
 *
 * The mock records each launch (function, grid, block, every parameter at the width its
 * PTX declares), counts PTX loads, cubin loads and links, and injects faults through
 * environment variables. Cases that need a fresh driver or code generator state (each
 * is opened once per process) run in a child process. A .tile kernel is compiled by a
 * test double of the compile step (it returns hand-written PTX and counts its calls),
 * so the whole path from .tile source to a recorded launch runs without a code
 * generator; one case compiles for real through libtileCG.so, and two show that a warm
 * cache needs no code generator. */
#include <dlfcn.h>
#include <fcntl.h>
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


static MockCountsFn mock_counts;
static MockLastLaunchFn mock_last;
static MockResetFn mock_reset;

/* The case's context and cache directory; torn down also when an assertion fails. */
static struct {
    TrtContext *ctx;
    TrtModule *mod;
    char dir[256];
    int compiles;
} cur;

static int setup(void **state)
{
    (void)state;
    memset(&cur, 0, sizeof cur);
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-rt-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return -1;
    mock_reset();
    unsetenv("MOCKCUDA_LOAD_ERROR");
    unsetenv("MOCKCUDA_LAUNCH_ERROR");
    unsetenv("MOCKCUDA_SYNC_ERROR");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cur.dir);
    return system(cmd);
}

static TrtContext *make_ctx(void)
{
    TrtContext *c = NULL;
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &c));
    return c;
}

static TrtKernel *ptx_kernel(TrtContext *ctx, TrtModule **mod, const char *ptx)
{
    assert_ok(rt_module_load_ptx(ctx, ptx, &scale_kernel, 1, mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(*mod, "scale", NULL, 0, &k));
    return k;
}

static void scale_args(TrtArg a[4], CUdeviceptr x, int32_t n)
{
    a[0] = trt_arg_ptr(x);
    a[1] = trt_arg_i32(n);
    a[2] = trt_arg_f32(2.5f);
    a[3] = trt_arg_i64(-7);
}

/* ---- contexts ----------------------------------------------------------------------- */
static void test_context_shares_primary_context(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.retains, 1);
    assert_true(c.set_current >= 1);
    assert_string_equal(trt_context_cache_dir(cur.ctx), cur.dir);
    trt_context_destroy(cur.ctx);
    cur.ctx = NULL;
    mock_counts(&c);
    assert_int_equal(c.releases, 1);
}

static void test_context_bad_device(void **state)
{
    (void)state;
    TrtContext *c = (TrtContext *)&c;
    assert_int_equal(trt_context_create(3, TRT_MODE_DEFAULT, cur.dir, &c), TRT_ERROR_NO_DEVICE);
    assert_null(c);
    assert_non_null(strstr(trt_last_error(), "no CUDA device 3"));
    assert_non_null(strstr(trt_last_error(), "has 1"));
}

static void test_context_mode_from_env(void **state)
{
    (void)state;
    setenv("TILE_MODE", "reduce-overhead", 1);
    assert_ok(trt_context_create(0, TRT_MODE_FROM_ENV, cur.dir, &cur.ctx));
    assert_int_equal(trt_context_mode(cur.ctx), TRT_MODE_REDUCE_OVERHEAD);
    TrtContext *c2 = NULL;
    setenv("TILE_MODE", "fastest", 1);
    assert_int_equal(trt_context_create(0, TRT_MODE_FROM_ENV, cur.dir, &c2), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "TILE_MODE is 'fastest'"));
    unsetenv("TILE_MODE");
}

static void test_context_refuses_unsafe_cache(void **state)
{
    (void)state;
    assert_int_equal(chmod(cur.dir, 0777), 0);
    TrtContext *c = NULL;
    assert_int_equal(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &c), TRT_ERROR_CACHE_UNSAFE);
    assert_null(c);
    assert_non_null(strstr(trt_last_error(), "writable by group or others"));
    MockCounts n;
    mock_counts(&n);
    assert_int_equal(n.retains, 0);   /* refused before touching the device */
}

/* ---- modules and kernels ------------------------------------------------------------ */
static void test_module_syntax_error(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtModule *m = (TrtModule *)&m;
    TrtStatus s = trt_module_load_string(cur.ctx, "bad.tile", "kernel k(x: *f32 {\n}\n", &m);
    assert_int_equal(s, TRT_ERROR_COMPILE);
    assert_null(m);
    assert_non_null(strstr(trt_last_error(), "bad.tile:1:"));
}

static void test_module_kernel_signature(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL, *k2 = NULL, *k3 = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k));
    assert_string_equal(trt_kernel_name(k), "vector_add");
    assert_int_equal(trt_kernel_num_params(k), 4);   /* BLOCK is compile-time */
    assert_int_equal(trt_kernel_num_variants(k), 0);
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k2));
    assert_ptr_equal(k, k2);
    TrtConst block = {"BLOCK", 256};
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", &block, 1, &k3));
    assert_ptr_not_equal(k, k3);
}

/* The runtime's compile path checks what tilec checks: the autotune space (a where
 * that divides by zero), const values that do not fit, too many parameters. */
static void test_module_checks_autotune_and_consts(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    static const char src[] =
        "@autotune(key = [n], space = {B: [1, 2]}, where = B / 0 > 1, default = {B: 1})\n"
        "kernel tuned(p: *f32, n: i32, const B: i32) { }\n"
        "kernel narrow(p: *i8, const C: i8 = 1000) { store(p, C); }\n";
    assert_ok(trt_module_load_string(cur.ctx, "checks.tile", src, &cur.mod));
    TrtKernel *k = NULL;
    assert_int_equal(trt_module_get_kernel(cur.mod, "tuned", NULL, 0, &k), TRT_ERROR_COMPILE);
    assert_non_null(strstr(trt_last_error(), "autotune where divides by zero"));
    assert_int_equal(trt_module_get_kernel(cur.mod, "narrow", NULL, 0, &k), TRT_ERROR_COMPILE);
    assert_non_null(strstr(trt_last_error(), "the value 1000 does not fit in const parameter 'C' of type i8"));
    TrtConst c = {"C", 100};
    assert_ok(trt_module_get_kernel(cur.mod, "narrow", &c, 1, &k));
}

static void test_module_unknown_kernel(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL;
    assert_int_equal(trt_module_get_kernel(cur.mod, "vector_mul", NULL, 0, &k), TRT_ERROR_NOT_FOUND);
    assert_null(k);
    assert_string_equal(trt_last_error(),
                        "trt_module_get_kernel: module 'va.tile' has no kernel 'vector_mul' "
                        "(kernels: vector_add)");
}

/* A const the kernel does not declare is the caller's mistake, named in the API's words
 * (not the "-D BB does not name..." of tilec); "warps" and "stages" are consts of every
 * kernel. */
static void test_module_unknown_const(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    static const char src[] =
        "kernel k(p: *f32, const BM: i32 = 16, const BN: i32 = 16) { }\n"
        "kernel other(p: *f32, const BB: i32 = 1) { }\n";
    assert_ok(trt_module_load_string(cur.ctx, "x.tile", src, &cur.mod));
    TrtKernel *k = NULL;
    TrtConst bb = {"BB", 32};
    assert_int_equal(trt_module_get_kernel(cur.mod, "k", &bb, 1, &k), TRT_ERROR_NOT_FOUND);
    assert_null(k);
    assert_string_equal(trt_last_error(),
                        "trt_module_get_kernel: const 'BB' is not a parameter of kernel 'k' "
                        "(its consts: BM, BN, warps, stages, ws, persistent, overlap, cluster, pingpong)");
    TrtConst ok[] = {{"BN", 32}, {"warps", 8}};
    assert_ok(trt_module_get_kernel(cur.mod, "k", ok, 2, &k));
}

/* Fifty diagnostics (the frontend stops there) are all in the message, however long. */
static void test_long_error_message_is_whole(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    char src[8192];
    size_t n = (size_t)snprintf(src, sizeof src, "kernel many(p: *i32) {\n");
    for (int i = 0; i < 60; i++)
        n += (size_t)snprintf(src + n, sizeof src - n, "    store(p, undefined_%d);\n", i);
    snprintf(src + n, sizeof src - n, "}\n");
    assert_ok(trt_module_load_string(cur.ctx, "many.tile", src, &cur.mod));
    TrtKernel *k = NULL;
    assert_int_equal(trt_module_get_kernel(cur.mod, "many", NULL, 0, &k), TRT_ERROR_COMPILE);
    const char *msg = trt_last_error();
    assert_true(strlen(msg) > 4096);
    assert_non_null(strstr(msg, "'undefined_0'"));
    assert_non_null(strstr(msg, "'undefined_49'"));
    assert_non_null(strstr(msg, "too many errors (51), stopped after 50"));
    /* a message made from the previous one (as the driver's log is appended) */
    assert_int_equal(rt_fail(TRT_ERROR_DRIVER, "%s\n%s", trt_last_error(), "and more"), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "stopped after 50\n"));
    assert_non_null(strstr(trt_last_error(), "\nand more"));
}

static void test_module_load_missing_file(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtModule *m = NULL;
    assert_int_equal(trt_module_load_file(cur.ctx, "/nonexistent/x.tile", &m), TRT_ERROR_NOT_FOUND);
    assert_non_null(strstr(trt_last_error(), "/nonexistent/x.tile"));
}

static void test_module_load_example_file(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_int_equal(trt_module_load_file(cur.ctx, TILE_EXAMPLES_DIR "/softmax.tile", &cur.mod),
                     TRT_SUCCESS);
}

/* ---- introspection -------------------------------------------------------------------- */
static const char introspect_src[] =
    "fn helper(x: f32) -> f32 { return x; }\n"
    "kernel first(out: *bf16, x: *f8e4m3, s: f16, flag: bool, const B: i32 = 1024,\n"
    "             n: u64, const NEG: i32 = -3, const C: i32 = 2 * 4, const D: bool) { }\n"
    "kernel second(p: *f32) grid(1) { }\n";

static void test_module_introspection(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "intro.tile", introspect_src, &cur.mod));
    assert_int_equal(trt_module_num_kernels(cur.mod), 2);
    assert_string_equal(trt_module_kernel_name(cur.mod, 0), "first");
    assert_string_equal(trt_module_kernel_name(cur.mod, 1), "second");
    assert_null(trt_module_kernel_name(cur.mod, 2));
    TrtKernelInfo ki;
    assert_ok(trt_module_kernel_info(cur.mod, "first", &ki));
    assert_int_equal(ki.nparams, 9);
    assert_int_equal(ki.nruntime, 5);
    assert_int_equal(ki.has_grid, 0);
    assert_ok(trt_module_kernel_info(cur.mod, "second", &ki));
    assert_int_equal(ki.has_grid, 1);
    assert_int_equal(trt_module_kernel_info(cur.mod, "helper", &ki), TRT_ERROR_NOT_FOUND);
    assert_non_null(strstr(trt_last_error(), "no kernel named 'helper' in intro.tile"));
    TrtParamInfo p;
    assert_ok(trt_module_kernel_param(cur.mod, "first", 0, &p));
    assert_string_equal(p.name, "out");
    assert_true(p.is_pointer && !p.is_const && p.kind == TRT_ARG_PTR);
    assert_string_equal(p.elem, "bf16");
    assert_int_equal(p.elem_bytes, 2);
    assert_ok(trt_module_kernel_param(cur.mod, "first", 1, &p));
    assert_string_equal(p.elem, "f8e4m3");
    assert_ok(trt_module_kernel_param(cur.mod, "first", 2, &p));
    assert_true(!p.is_pointer && p.kind == TRT_ARG_F16);
    assert_ok(trt_module_kernel_param(cur.mod, "first", 3, &p));
    assert_int_equal(p.kind, TRT_ARG_BOOL);
    assert_int_equal(p.elem_bytes, 1);
    assert_ok(trt_module_kernel_param(cur.mod, "first", 4, &p));
    assert_true(p.is_const && p.has_default && p.default_value == 1024);
    assert_ok(trt_module_kernel_param(cur.mod, "first", 5, &p));
    assert_true(!p.is_const && p.kind == TRT_ARG_U64 && p.runtime_index == 4);
    assert_ok(trt_module_kernel_param(cur.mod, "first", 6, &p));
    assert_true(p.has_default && p.default_value == -3);
    assert_ok(trt_module_kernel_param(cur.mod, "first", 7, &p));
    assert_true(p.is_const && !p.has_default);   /* not a literal: the frontend evaluates it */
    assert_ok(trt_module_kernel_param(cur.mod, "first", 8, &p));
    assert_true(p.is_const && !p.has_default);
    assert_int_equal(trt_module_kernel_param(cur.mod, "first", 9, &p), TRT_ERROR_INVALID_ARGUMENT);
}

static void test_kernel_param_as_lowered(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k));
    TrtParamInfo p;
    assert_ok(trt_kernel_param(k, 1, &p));
    assert_string_equal(p.name, "a");
    assert_true(p.is_pointer && p.kind == TRT_ARG_PTR && p.runtime_index == 1);
    assert_string_equal(p.elem, "f32");
    assert_ok(trt_kernel_param(k, 3, &p));
    assert_true(!p.is_pointer && p.kind == TRT_ARG_I32);
    assert_int_equal(trt_kernel_param(k, 4, &p), TRT_ERROR_INVALID_ARGUMENT);
}

/* ---- the CPU context: the interpreter on host buffers ----------------------------------- */
static void test_cpu_context_runs_the_interpreter(void **state)
{
    (void)state;
    assert_ok(trt_context_create(TRT_DEVICE_CPU, TRT_MODE_DEFAULT, NULL, &cur.ctx));
    assert_int_equal(trt_context_device(cur.ctx), TRT_DEVICE_CPU);
    assert_null(trt_context_cache_dir(cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL;
    TrtConst block = {"BLOCK", 16};
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", &block, 1, &k));
    float a[40], b[40], c[40];
    for (int i = 0; i < 40; i++) a[i] = (float)i, b[i] = 0.5f, c[i] = -1;
    TrtArg args[4] = {trt_arg_ptr((CUdeviceptr)(uintptr_t)c), trt_arg_ptr((CUdeviceptr)(uintptr_t)a),
                      trt_arg_ptr((CUdeviceptr)(uintptr_t)b), trt_arg_i32(37)};
    uint64_t bytes[4] = {sizeof c, sizeof a, sizeof b, 0};
    assert_ok(trt_launch_host(k, args, bytes, 4, NULL));   /* grid(cdiv(37, 16)) = 3 */
    for (int i = 0; i < 37; i++) assert_true(c[i] == (float)i + 0.5f);
    assert_true(c[37] == -1);
    MockCounts mc;
    mock_counts(&mc);
    assert_int_equal(mc.launches, 0);
    assert_ok(trt_synchronize(cur.ctx));
    /* trt_launch is for GPU contexts; device memory does not exist here */
    assert_int_equal(trt_launch(k, args, 4, NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "trt_launch_host"));
    CUdeviceptr p;
    assert_int_equal(trt_mem_alloc(cur.ctx, 16, &p), TRT_ERROR_INVALID_ARGUMENT);
    /* the buffer sizes bound every access */
    bytes[0] = 36 * sizeof(float);
    assert_int_equal(trt_launch_host(k, args, bytes, 4, NULL), TRT_ERROR_KERNEL_FAILED);
    assert_non_null(strstr(trt_last_error(), "kernel 'vector_add' failed in the interpreter"));
    assert_non_null(strstr(trt_last_error(), "va.tile:6:"));
    assert_int_equal(trt_launch_host(k, args, NULL, 4, NULL), TRT_ERROR_INVALID_ARGUMENT);
    args[3] = trt_arg_i64(37);
    assert_int_equal(trt_launch_host(k, args, bytes, 4, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "argument 4 ('n') is TRT_ARG_I64"));
}

/* f16 and bf16 scalars arrive as their bits and are read as values. */
static void test_cpu_context_half_scalars(void **state)
{
    (void)state;
    assert_ok(trt_context_create(TRT_DEVICE_CPU, TRT_MODE_FROM_ENV, NULL, &cur.ctx));
    static const char src[] =
        "kernel axpb(out: *f32, h: f16, b: bf16, u: u8) grid(1) {\n"
        "    store(out + arange(0, 4), (h as f32) + (b as f32) + (u as f32) + arange(0, 4) as f32);\n"
        "}\n";
    assert_ok(trt_module_load_string(cur.ctx, "h.tile", src, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "axpb", NULL, 0, &k));
    float out[4] = {0};
    TrtArg args[4] = {trt_arg_ptr((CUdeviceptr)(uintptr_t)out), {TRT_ARG_F16, {.u16 = 0x3e00}},
                      {TRT_ARG_BF16, {.u16 = 0x4000}}, {TRT_ARG_U8, {.u8 = 200}}};
    uint64_t bytes[4] = {sizeof out};
    assert_ok(trt_launch_host(k, args, bytes, 4, NULL));   /* 1.5 + 2 + 200 */
    for (int i = 0; i < 4; i++) assert_true(out[i] == 203.5f + (float)i);
}

/* ---- argument checks ------------------------------------------------------------------ */
static void test_launch_checks_count_and_kinds(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    assert_int_equal(trt_launch(k, a, 3, grid, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_string_equal(trt_last_error(), "kernel 'scale' takes 4 arguments, got 3");
    a[2] = trt_arg_f64(2.5);
    assert_int_equal(trt_launch(k, a, 4, grid, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_string_equal(trt_last_error(), "kernel 'scale': argument 3 ('s') is TRT_ARG_F64, but "
                                          "the parameter is f32 and takes TRT_ARG_F32");
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.launches, 0);
}

static void test_launch_checks_pointer_alignment(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k));
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x1002), trt_arg_ptr(0x1000), trt_arg_i32(5)};
    assert_int_equal(trt_launch(k, a, 4, NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "argument 2 ('a') is the pointer 0x1002, not aligned"));
    assert_non_null(strstr(trt_last_error(), "f32 (4 bytes)"));
}

static void test_launch_without_grid(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    assert_int_equal(trt_launch(k, a, 4, NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "no grid(...) clause"));
    /* an empty grid launches nothing: no variant is built, the driver is not called */
    MockCounts before, after;
    mock_counts(&before);
    for (int axis = 0; axis < 3; axis++) {
        uint32_t empty[3] = {1, 1, 1};
        empty[axis] = 0;
        assert_ok(trt_launch(k, a, 4, empty, NULL));
    }
    mock_counts(&after);
    assert_int_equal(after.launches, before.launches);
    assert_int_equal(after.ptx_loads + after.cubin_loads, before.ptx_loads + before.cubin_loads);
    assert_int_equal(trt_kernel_num_variants(k), 0);
    uint32_t empty[3] = {0, 1, 1};   /* its arguments are still checked */
    assert_int_equal(trt_launch(k, a, 3, empty, NULL), TRT_ERROR_INVALID_ARGUMENT);
    uint32_t tall[3] = {1, 65536, 1}, wide[3] = {2147483648u, 1, 1};
    assert_int_equal(trt_launch(k, a, 4, tall, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "grid 1x65536x1 is larger than a GPU launches"));
    assert_int_equal(trt_launch(k, a, 4, wide, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "grid 2147483648x1x1 is larger"));
}

/* ---- packing and launching ------------------------------------------------------------ */
static void test_launch_packs_arguments(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    TrtArg a[4];
    scale_args(a, 0x12340, 1000);
    uint32_t grid[3] = {7, 2, 1};
    CUstream stream = (CUstream)(uintptr_t)0x5150;
    assert_ok(trt_launch(k, a, 4, grid, stream));
    MockLaunch l;
    mock_last(&l);
    assert_string_equal(l.func, "scale");
    assert_int_equal(l.grid[0], 7);
    assert_int_equal(l.grid[1], 2);
    assert_int_equal(l.block[0], 128);
    assert_ptr_equal(l.stream, stream);
    assert_int_equal(l.nparams, 4);
    assert_int_equal(l.param_bytes[0], 8);
    assert_int_equal(l.params[0], 0x12340);
    assert_int_equal(l.param_bytes[1], 4);
    assert_int_equal(l.params[1], 1000);
    float s;
    uint32_t bits = (uint32_t)l.params[2];
    memcpy(&s, &bits, 4);
    assert_true(s == 2.5f);
    assert_int_equal((int64_t)l.params[3], -7);
    assert_ptr_not_equal(trt_kernel_last_function(k), NULL);
}

static void test_variant_selection(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    uint32_t grid[3] = {1, 1, 1};
    TrtArg a[4];
    /* n: 17 (no class), 32 (divisible by 16), 48 (same class), 1 (equal to 1);
     * x: 0x1000 (aligned to 16), 0x1004 (not). */
    static const struct { CUdeviceptr x; int32_t n; unsigned variants; } steps[] = {
        {0x1000, 17, 1}, {0x1000, 32, 2}, {0x1000, 48, 2}, {0x1000, 1, 3},
        {0x1004, 1, 4}, {0x1000, 17, 4}, {0x1000, 0, 4}, {0x1000, -16, 4},
    };
    void *fns[8];
    for (unsigned i = 0; i < sizeof steps / sizeof *steps; i++) {
        scale_args(a, steps[i].x, steps[i].n);
        assert_ok(trt_launch(k, a, 4, grid, NULL));
        assert_int_equal(trt_kernel_num_variants(k), steps[i].variants);
        fns[i] = trt_kernel_last_function(k);
    }
    assert_ptr_equal(fns[5], fns[0]);   /* back to the first class: its variant */
    assert_ptr_equal(fns[6], fns[1]);   /* 0 and -16 divide by 16 */
    assert_ptr_equal(fns[7], fns[1]);
    assert_ptr_not_equal(fns[3], fns[1]);
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.launches, 8);
    assert_int_equal(c.links, 4);        /* each variant compiled and linked once */
    assert_int_equal(c.cubin_loads, 4);
}

/* n divisible by 8 and not 16 (a ragged GEMM's K = 4072) is a class of its own: not
 * 16's (whose variant assumes more), not the class with no bits (whose variant
 * assumes less). */
static void test_variant_selection_div8(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    uint32_t grid[3] = {1, 1, 1};
    TrtArg a[4];
    static const struct { int32_t n; unsigned variants, same_as; } steps[] = {
        {4072, 1, 0}, {24, 1, 0}, {-8, 1, 0}, {4096, 2, 3}, {4076, 3, 4}, {4136, 3, 0}, {8, 3, 0},
    };
    void *fns[7];
    for (unsigned i = 0; i < sizeof steps / sizeof *steps; i++) {
        scale_args(a, 0x1000, steps[i].n);
        assert_int_equal(rt_class_mask(k, a) >> 2 & 3, steps[i].n % 16 ? steps[i].n % 8 ? RT_SPEC_NONE : RT_SPEC_DIV8
                                                                       : RT_SPEC_DIV16);
        assert_ok(trt_launch(k, a, 4, grid, NULL));
        assert_int_equal(trt_kernel_num_variants(k), steps[i].variants);
        fns[i] = trt_kernel_last_function(k);
        assert_ptr_equal(fns[i], fns[steps[i].same_as]);
    }
    assert_ptr_not_equal(fns[3], fns[0]);
    assert_ptr_not_equal(fns[4], fns[0]);
    assert_string_equal(rt_spec_class_name(k, 1, rt_class_mask(k, a)), "divisible by 8, not 16");
}

static void test_variant_report(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    assert_ok(trt_context_set_flags(cur.ctx, TRT_FLAG_LOG_RECOMPILES));
    char path[300];
    snprintf(path, sizeof path, "%s/stderr.txt", cur.dir);
    int saved = dup(2), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    uint32_t grid[3] = {1, 1, 1};
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    TrtStatus s1 = trt_launch(k, a, 4, grid, NULL);
    a[1] = trt_arg_i32(1);
    TrtStatus s2 = trt_launch(k, a, 4, grid, NULL);
    a[1] = trt_arg_i32(4072);
    TrtStatus s2b = trt_launch(k, a, 4, grid, NULL);
    /* a new context finds the first class's cubin in the disk cache */
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.mod = NULL;
    cur.ctx = make_ctx();
    k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    assert_ok(trt_context_set_flags(cur.ctx, TRT_FLAG_LOG_RECOMPILES));
    a[1] = trt_arg_i32(32);
    TrtStatus s3 = trt_launch(k, a, 4, grid, NULL);
    /* and, with the cubins gone (another driver, say), the PTX, linked again */
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.mod = NULL;
    char rm[400];
    snprintf(rm, sizeof rm, "rm -f %s/*.cubin", cur.dir);
    int rc = system(rm);
    cur.ctx = make_ctx();
    k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    assert_ok(trt_context_set_flags(cur.ctx, TRT_FLAG_LOG_RECOMPILES));
    TrtStatus s4 = trt_launch(k, a, 4, grid, NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    assert_ok(s1);
    assert_ok(s2);
    assert_ok(s2b);
    assert_ok(s3);
    assert_int_equal(rc, 0);
    assert_ok(s4);
    char text[4096] = "";
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    assert_non_null(strstr(text, "kernel 'scale': compiled variant 1 (first launch)"));
    assert_non_null(strstr(text, "compiled variant 2; argument 'n' changed class: divisible by 16 -> equal to 1"));
    assert_non_null(strstr(text, "compiled variant 3; argument 'n' changed class: equal to 1 -> divisible by 8, not 16"));
    assert_non_null(strstr(text, "kernel 'scale': loaded variant 1 from the disk cache (first launch)"));
    assert_non_null(strstr(text, "kernel 'scale': linked variant 1 from PTX in the disk cache (first launch)"));
}

/* ---- the disk cache on the launch path ------------------------------------------------ */
static void launch_scale_once(TrtContext *ctx)
{
    TrtModule *m = NULL;
    TrtKernel *k = ptx_kernel(ctx, &m, ptx_src);
    TrtArg a[4];
    scale_args(a, 0x1000, 64);
    uint32_t grid[3] = {1, 1, 1};
    assert_ok(trt_launch(k, a, 4, grid, NULL));
    trt_module_destroy(m);
}

static void test_warm_cache_loads_cubin(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    launch_scale_once(cur.ctx);
    MockCounts cold, warm;
    mock_counts(&cold);
    assert_int_equal(cold.links, 1);
    assert_int_equal(cold.cubin_loads, 1);
    assert_int_equal(cold.ptx_loads, 0);
    trt_context_destroy(cur.ctx);
    cur.ctx = make_ctx();                  /* a new context reads the same directory */
    launch_scale_once(cur.ctx);
    mock_counts(&warm);
    assert_int_equal(warm.links, 1);       /* no new link: the cubin came from disk */
    assert_int_equal(warm.cubin_loads, 2);
    assert_int_equal(warm.ptx_loads, 0);
    assert_int_equal(warm.unloads, 2);
}

static void test_no_disk_cache_loads_ptx(void **state)
{
    (void)state;
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, "", &cur.ctx));
    assert_null(trt_context_cache_dir(cur.ctx));
    launch_scale_once(cur.ctx);
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.ptx_loads, 1);
    assert_int_equal(c.links, 0);
}

/* A test double of the compile step: PTX whose entry is the .tile kernel's name, and
 * launch facts as the code generator gives them (8 warps, 64 KiB of shared memory). */
static char *fake_compile(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st)
{
    cur.compiles++;
    meta->threads = 256;
    meta->shared_bytes = 64 * 1024;
    char *ptx = malloc(512);
    snprintf(ptx, 512, ".version 8.3\n.target sm_90a\n.address_size 64\n"
             ".visible .entry %s(.param .u64 c, .param .u64 a, .param .u64 b, .param .u32 n)\n"
             "{\n\tret;\n}\n", k->name);
    return ptx;
}

static TrtKernel *tile_kernel(TrtContext *ctx, TrtModule **m)
{
    assert_ok(trt_module_load_string(ctx, "va.tile", vector_add_src, m));
    (*m)->compile = fake_compile;
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(*m, "vector_add", NULL, 0, &k));
    return k;
}

static void test_tile_kernel_grid_clause(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = tile_kernel(cur.ctx, &cur.mod);
    static const int32_t sizes[] = {5000, 1024, 1, 5000, 70000};
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000),
                       trt_arg_i32(sizes[i])};
        assert_ok(trt_launch(k, a, 4, NULL, NULL));
        MockLaunch l;
        mock_last(&l);
        assert_int_equal(l.grid[0], (sizes[i] + 1023) / 1024);
        assert_int_equal(l.grid[1], 1);
        assert_int_equal(l.block[0], 256);   /* the compiler's launch facts */
        assert_int_equal(l.shmem, 64 * 1024);
        assert_int_equal((int32_t)l.params[3], sizes[i]);
    }
    /* 5000 and 70000 share a class, as do 1024; 1 has its own. */
    assert_int_equal(trt_kernel_num_variants(k), 3);
    assert_int_equal(cur.compiles, 3);
    /* a grid(...) of no programs (n = 0, an empty tensor) launches nothing */
    MockCounts before, after;
    mock_counts(&before);
    TrtArg none[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(0)};
    assert_ok(trt_launch(k, none, 4, NULL, NULL));
    mock_counts(&after);
    assert_int_equal(after.launches, before.launches);
    assert_int_equal(trt_kernel_num_variants(k), 3);
    /* one of fewer (an i32 that overflowed, a negative size) is refused */
    none[3] = trt_arg_i32(-5000);
    assert_int_equal(trt_launch(k, none, 4, NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "its grid(...) clause gives -3 programs on axis 0"));
}

static void test_tile_kernel_compiled_once_across_contexts(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        TrtContext *ctx = make_ctx();
        TrtModule *m = NULL;
        TrtKernel *k = tile_kernel(ctx, &m);
        TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000),
                       trt_arg_i32(4096)};
        assert_ok(trt_launch(k, a, 4, NULL, NULL));
        trt_module_destroy(m);
        trt_context_destroy(ctx);
    }
    assert_int_equal(cur.compiles, 1);
    MockLaunch warm;
    mock_last(&warm);   /* the warm start's launch facts came from the cache entry */
    assert_int_equal(warm.block[0], 256);
    assert_int_equal(warm.shmem, 64 * 1024);
    /* Another const set is another kernel: compiled anew. */
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    cur.mod->compile = fake_compile;
    TrtConst block = {"BLOCK", 512};
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", &block, 1, &k));
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(4096)};
    assert_ok(trt_launch(k, a, 4, NULL, NULL));
    assert_int_equal(cur.compiles, 2);
    MockLaunch l;
    mock_last(&l);
    assert_int_equal(l.grid[0], 8);
}

static void test_tile_kernel_real_compile_step(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k));
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(64)};
    /* The runtime dlopens libtileCG.so (TILECG_PATH); the mock receives its PTX. */
    assert_ok(trt_launch(k, a, 4, NULL, NULL));
    MockLaunch l;
    mock_last(&l);
    assert_string_equal(l.func, "vector_add");
    assert_int_equal(l.nparams, 4);
}

/* ---- the checked mode (TILE_DEBUG=bounds) ------------------------------------------- */
static TrtKernel *checked_vector_add(void)
{
    cur.ctx = make_ctx();
    assert_ok(trt_context_set_debug(cur.ctx, TRT_DEBUG_BOUNDS));
    assert_int_equal(trt_context_debug(cur.ctx), TRT_DEBUG_BOUNDS);
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k));
    return k;
}

/* A checked launch compiles the checked variant for real (libtileCG) and passes, after
 * the user's arguments, each pointer's element count (-1 where no size is known) and
 * the report buffer; the unchecked variant is another one, with the user's parameters
 * only, and neither is served to the other's launches. */
static void test_checked_launch_passes_sizes(void **state)
{
    (void)state;
    TrtKernel *k = checked_vector_add();
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(64)};
    uint64_t bytes[4] = {256, 260, TRT_BYTES_UNKNOWN, 0};
    assert_ok(trt_launch_sized(k, a, bytes, 4, NULL, NULL));
    MockLaunch l;
    mock_last(&l);
    assert_string_equal(l.func, "vector_add");
    assert_int_equal(l.nparams, 4 + 3 + 1);
    assert_int_equal((int64_t)l.params[4], 64);          /* 256 bytes of f32 */
    assert_int_equal((int64_t)l.params[5], 65);
    assert_int_equal((int64_t)l.params[6], -1);          /* unknown: not checked */
    assert_true(l.params[7] != 0 && l.param_bytes[7] == 8);   /* the report */
    assert_ok(trt_launch(k, a, 4, NULL, NULL));          /* no sizes at all */
    mock_last(&l);
    assert_int_equal(l.nparams, 8);
    assert_int_equal((int64_t)l.params[4], -1);
    assert_int_equal(trt_kernel_num_variants(k), 1);
    assert_ok(trt_context_set_debug(cur.ctx, 0));
    assert_ok(trt_launch(k, a, 4, NULL, NULL));
    mock_last(&l);
    assert_int_equal(l.nparams, 4);
    assert_int_equal(trt_kernel_num_variants(k), 2);
    assert_ok(trt_context_set_debug(cur.ctx, TRT_DEBUG_BOUNDS));
    assert_ok(trt_launch(k, a, 4, NULL, NULL));
    mock_last(&l);
    assert_int_equal(l.nparams, 8);
    assert_int_equal(trt_kernel_num_variants(k), 2);
    /* The disk cache keeps them apart too: a new process (context and module) finds
     * each kind's own entry. */
    trt_module_destroy(cur.mod);
    cur.mod = NULL;
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "vector_add", NULL, 0, &k));
    assert_ok(trt_context_set_debug(cur.ctx, 0));
    assert_ok(trt_launch(k, a, 4, NULL, NULL));
    mock_last(&l);
    assert_int_equal(l.nparams, 4);
    assert_ok(trt_context_set_debug(cur.ctx, TRT_DEBUG_BOUNDS));
    assert_ok(trt_launch(k, a, 4, NULL, NULL));
    mock_last(&l);
    assert_int_equal(l.nparams, 8);
    assert_int_equal(trt_context_set_debug(cur.ctx, 0x80), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "unknown bits 0x80"));
}

/* A report (written by the mock as a checked kernel writes it) becomes
 * TRT_ERROR_KERNEL_FAILED in the interpreter's words, at the op's line; the context
 * stays usable and the next launch, with the report zero again, succeeds. */
static void test_checked_launch_reports_out_of_bounds(void **state)
{
    (void)state;
    TrtKernel *k = checked_vector_add();
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(64)};
    uint64_t bytes[4] = {256, 256, 256, 0};
    char rep[128];
    snprintf(rep, sizeof rep, "0,%d,3,0,0,17,4100,64,6,5", (int)IR_OP_STORE);
    setenv("MOCKCUDA_BOUNDS_REPORT", rep, 1);
    TrtStatus s = trt_launch_sized(k, a, bytes, 4, NULL, NULL);
    unsetenv("MOCKCUDA_BOUNDS_REPORT");
    assert_int_equal(s, TRT_ERROR_KERNEL_FAILED);
    const char *m = trt_last_error();
    assert_non_null(strstr(m, "kernel 'vector_add' was stopped by its bounds check on the GPU"));
    assert_non_null(strstr(m, "va.tile:6:5: error: out-of-bounds store in kernel 'vector_add', program (3, 0, 0): "
                              "argument 'c' has 64 elements, lane 17 writes element 4100"));
    assert_non_null(strstr(m, "    store(c + offs"));   /* the source line, as the interpreter shows it */
    snprintf(rep, sizeof rep, "1,%d,0,2,1,3,-1,64,0,0", (int)IR_OP_LOAD);
    setenv("MOCKCUDA_BOUNDS_REPORT", rep, 1);
    assert_int_equal(trt_launch_sized(k, a, bytes, 4, NULL, NULL), TRT_ERROR_KERNEL_FAILED);
    unsetenv("MOCKCUDA_BOUNDS_REPORT");
    assert_non_null(strstr(trt_last_error(), "error: out-of-bounds load in kernel 'vector_add', program (0, 2, 1): "
                                             "argument 'a' has 64 elements, lane 3 reads element -1"));
    assert_ok(trt_launch_sized(k, a, bytes, 4, NULL, NULL));
    assert_ok(trt_synchronize(cur.ctx));
    TrtDevicePtr p = 0;
    assert_ok(trt_mem_alloc(cur.ctx, 64, &p));
    trt_mem_free(cur.ctx, p);
}

/* TILE_DEBUG sets the mode of new contexts; a word it does not know is an error. A
 * hand-written PTX kernel has no checked variant and launches as it is. */
static void test_checked_mode_from_env(void **state)
{
    (void)state;
    setenv("TILE_DEBUG", "none,bounds", 1);
    cur.ctx = make_ctx();
    assert_int_equal(trt_context_debug(cur.ctx), TRT_DEBUG_BOUNDS);
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    assert_ok(trt_launch(k, a, 4, grid, NULL));
    MockLaunch l;
    mock_last(&l);
    assert_int_equal(l.nparams, 4);
    TrtContext *c = NULL;
    setenv("TILE_DEBUG", "bound", 1);
    assert_int_equal(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &c), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "TILE_DEBUG is 'bound'; expected bounds or none"));
    assert_int_equal(trt_context_create(TRT_DEVICE_CPU, TRT_MODE_DEFAULT, NULL, &c), TRT_ERROR_INVALID_ARGUMENT);
    setenv("TILE_DEBUG", "", 1);
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &c));
    assert_int_equal(trt_context_debug(c), 0);
    trt_context_destroy(c);
    unsetenv("TILE_DEBUG");
}

/* Whether some cubin entry of the cache (the mock's cubin is its PTX) asks for
 * .minnctapersm. */
static bool cached_cubin_requests_occupancy(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "grep -l minnctapersm %s/*.cubin >/dev/null 2>&1", dir);
    return system(cmd) == 0;
}

/* softmax at 4096 columns and 8 warps asks for full occupancy (codegen's estimate);
 * an assembler that must spill to give it (the mock, with MOCKCUDA_SPILL_BYTES) gets
 * the variant rebuilt without the request, and the cache keeps that one. */
static void launch_softmax_4096(void)
{
    TrtConst consts[2] = {{"BLOCK", 4096}, {"warps", 8}};
    TrtKernel *k = NULL;
    assert_ok(trt_module_load_file(cur.ctx, TILE_EXAMPLES_DIR "/softmax.tile", &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "softmax", consts, 2, &k));
    TrtArg a[5] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_i64(4096),
                   trt_arg_i32(64), trt_arg_i32(4096)};
    assert_ok(trt_launch(k, a, 5, NULL, NULL));
}

static void test_occupancy_request_kept_without_spills(void **state)
{
    (void)state;
    setenv("MOCKCUDA_SPILL_BYTES", "0", 1);
    cur.ctx = make_ctx();
    launch_softmax_4096();
    assert_true(cached_cubin_requests_occupancy(cur.dir));
}

static void test_occupancy_request_dropped_when_it_spills(void **state)
{
    (void)state;
    setenv("MOCKCUDA_SPILL_BYTES", "12", 1);
    cur.ctx = make_ctx();
    MockCounts before, after;
    mock_counts(&before);
    launch_softmax_4096();
    mock_counts(&after);
    unsetenv("MOCKCUDA_SPILL_BYTES");
    assert_false(cached_cubin_requests_occupancy(cur.dir));
    assert_int_equal(after.links - before.links, 2);   /* with the request, then without */
}

/* ---- without the code generator: each case in a fresh process ------------------------ */
/* Launches vector_add with BLOCK = block from the cache in dir; returns its status. */
static TrtStatus launch_vector_add(const char *dir, int64_t block)
{
    TrtContext *c = NULL;
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtConst bc = {"BLOCK", block};
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(64)};
    TrtStatus s = trt_context_create(0, TRT_MODE_DEFAULT, dir, &c);
    if (!s) s = trt_module_load_string(c, "va.tile", vector_add_src, &m);
    if (!s) s = trt_module_get_kernel(m, "vector_add", &bc, 1, &k);
    if (!s) s = trt_launch(k, a, 4, NULL, NULL);
    trt_module_destroy(m);
    trt_context_destroy(c);
    return s;
}

/* The child (main's --child-codegen DIR TEXT), whose TILE_CODEGEN_LIBRARY cannot be
 * used: the kernel its parent compiled into DIR (BLOCK 1024) launches from the cache,
 * without a link; one not in the cache (BLOCK 512) fails, twice, with
 * TRT_ERROR_NO_CODEGEN and a message containing TEXT. Exits 0 if all of that holds. */
static int child_codegen(const char *dir, const char *text)
{
    TrtStatus s = launch_vector_add(dir, 1024);
    MockCounts c;
    mock_counts(&c);
    if (s || c.links != 0 || c.cubin_loads != 1) {
        fprintf(stderr, "warm: %s: %s (links %d)\n", trt_status_name(s), trt_last_error(), c.links);
        return 1;
    }
    for (int i = 0; i < 2; i++) {
        s = launch_vector_add(dir, 512);
        if (s != TRT_ERROR_NO_CODEGEN || !strstr(trt_last_error(), text) ||
            !strstr(trt_last_error(), "kernel 'vector_add' is not in the disk cache")) {
            fprintf(stderr, "cold: %s: %s\n", trt_status_name(s), trt_last_error());
            return 2;
        }
    }
    return 0;
}

/* Compiles vector_add (BLOCK 1024) into cur.dir here, then runs child_codegen with
 * TILE_CODEGEN_LIBRARY=lib; returns the child's exit status. */
static int warm_then_child(const char *lib, const char *text)
{
    assert_ok(launch_vector_add(cur.dir, 1024));
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.links, 1);   /* compiled and linked here, once */
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TILE_CODEGEN_LIBRARY", lib, 1);
        execl("/proc/self/exe", "test_runtime", "--child-codegen", cur.dir, text, (char *)NULL);
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static void test_no_codegen_library_warm_cache_works(void **state)
{
    (void)state;
    assert_int_equal(warm_then_child("/nonexistent/libtileCG.so",
                                     "tried: /nonexistent/libtileCG.so: cannot open shared "
                                     "object file"), 0);
}

static void test_codegen_library_without_entry_points(void **state)
{
    (void)state;
    /* A library that loads but is not the code generator: the mock driver. */
    char text[512];
    snprintf(text, sizeof text, "tried: %s has no cg_emit_ptx", MOCKCUDA_PATH);
    assert_int_equal(warm_then_child(MOCKCUDA_PATH, text), 0);
}

/* ---- driver errors -------------------------------------------------------------------- */
static void test_load_error_has_jit_log(void **state)
{
    (void)state;
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, "", &cur.ctx));
    char bad[sizeof ptx_src + 32];
    snprintf(bad, sizeof bad, "%s// MOCK_SYNTAX_ERROR\n", ptx_src);
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, bad);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    assert_int_equal(trt_launch(k, a, 4, grid, NULL), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218)"));
    assert_non_null(strstr(trt_last_error(), "mock syntax error"));
    assert_int_equal(trt_kernel_num_variants(k), 0);
}

static void test_link_error_is_not_cached(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    char bad[sizeof ptx_src + 32];
    snprintf(bad, sizeof bad, "%s// MOCK_SYNTAX_ERROR\n", ptx_src);
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, bad);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    assert_int_equal(trt_launch(k, a, 4, grid, NULL), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "cuLinkAddData failed: CUDA_ERROR_INVALID_PTX"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s/*.cubin >/dev/null 2>&1", cur.dir);
    assert_int_not_equal(system(cmd), 0);
}

static void test_launch_error(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    setenv("MOCKCUDA_LAUNCH_ERROR", "1", 1);
    TrtStatus s = trt_launch(k, a, 4, grid, NULL);
    unsetenv("MOCKCUDA_LAUNCH_ERROR");
    assert_int_equal(s, TRT_ERROR_DRIVER);
    assert_string_equal(trt_last_error(), "cuLaunchKernel failed: CUDA_ERROR_INVALID_VALUE (1)");
    assert_ok(trt_launch(k, a, 4, grid, NULL));
}

/* ---- kernel faults ------------------------------------------------------------------ */
static const char two_kernels_ptx[] =
    ".version 8.3\n.target sm_90a\n.address_size 64\n"
    ".visible .entry scale(.param .u64 x, .param .u32 n, .param .f32 s, .param .u64 m)\n"
    "{\n\tret;\n}\n"
    ".visible .entry shift(.param .u64 x, .param .u32 n, .param .f32 s, .param .u64 m)\n"
    "{\n\tret;\n}\n";

static void two_kernels(TrtKernel **scale, TrtKernel **shift)
{
    RtPtxKernel ks[2] = {scale_kernel, scale_kernel};
    ks[1].name = "shift";
    assert_ok(rt_module_load_ptx(cur.ctx, two_kernels_ptx, ks, 2, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "scale", NULL, 0, scale));
    assert_ok(trt_module_get_kernel(cur.mod, "shift", NULL, 0, shift));
}

/* The next synchronization faults as an out-of-bounds store would (700, sticky). */
static TrtStatus faulting_sync(void)
{
    setenv("MOCKCUDA_SYNC_ERROR", "700", 1);
    TrtStatus s = trt_synchronize(cur.ctx);
    unsetenv("MOCKCUDA_SYNC_ERROR");
    return s;
}

static void test_fault_names_kernels_since_last_sync(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *scale, *shift;
    two_kernels(&scale, &shift);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    assert_ok(trt_launch(shift, a, 4, grid, NULL));
    assert_ok(trt_synchronize(cur.ctx));          /* shift finished: not a suspect */
    assert_ok(trt_launch(scale, a, 4, grid, NULL));
    assert_ok(trt_launch(scale, a, 4, grid, NULL));
    assert_int_equal(faulting_sync(), TRT_ERROR_DRIVER);
    const char *m = trt_last_error();
    assert_non_null(strstr(m, "cuCtxSynchronize (a kernel failed) failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
    assert_non_null(strstr(m, "a kernel faulted on the GPU"));
    assert_non_null(strstr(m, "since the last successful synchronization: 'scale'."));
    assert_null(strstr(m, "'shift'"));
    assert_non_null(strstr(m, "CUDA context is now unusable"));
    assert_non_null(strstr(m, "the process must restart"));
}

static void test_fault_later_calls_fail_fast(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *scale, *shift;
    two_kernels(&scale, &shift);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    assert_ok(trt_launch(scale, a, 4, grid, NULL));
    assert_ok(trt_launch(shift, a, 4, grid, NULL));
    assert_ok(trt_launch(scale, a, 4, grid, NULL));
    assert_int_equal(faulting_sync(), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "synchronization: 'scale', 'shift'."));

    /* A launch of a known class, one of a new class (refused before building a variant),
     * copies, an allocation and a synchronization all give the earlier fault. */
    MockCounts before, after;
    mock_counts(&before);
    assert_int_equal(trt_launch(shift, a, 4, grid, NULL), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "cuLaunchKernel: the CUDA context is unusable since an earlier fault"));
    assert_non_null(strstr(trt_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS (700)"));
    assert_non_null(strstr(trt_last_error(), "'scale', 'shift'"));
    assert_non_null(strstr(trt_last_error(), "the process must restart"));
    scale_args(a, 0x1004, 33);
    assert_int_equal(trt_launch(scale, a, 4, grid, NULL), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "trt_launch: the CUDA context is unusable since an earlier fault"));
    mock_counts(&after);
    assert_int_equal(after.ptx_loads + after.cubin_loads, before.ptx_loads + before.cubin_loads);
    assert_int_equal(after.launches, before.launches);
    char buf[8] = {0};
    CUdeviceptr p = 1;
    assert_int_equal(trt_memcpy_htod(cur.ctx, 0x1000, buf, sizeof buf), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "trt_memcpy_htod: the CUDA context is unusable since an earlier fault"));
    assert_int_equal(trt_memcpy_dtoh(cur.ctx, buf, 0x1000, sizeof buf), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "earlier fault"));
    assert_int_equal(trt_mem_alloc(cur.ctx, 64, &p), TRT_ERROR_DRIVER);
    assert_int_equal(p, 0);
    assert_non_null(strstr(trt_last_error(), "earlier fault"));
    assert_int_equal(trt_synchronize(cur.ctx), TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "trt_synchronize: the CUDA context is unusable since an earlier fault"));
    assert_non_null(strstr(trt_last_error(), "'scale', 'shift'"));
}

/* Past the ring's size the message names the last ones and says there were more; a
 * destroyed module's kernels are dropped from it (their names are gone). */
static void test_fault_ring_bounds(void **state)
{
    (void)state;
    cur.ctx = make_ctx();
    TrtKernel *scale, *shift;
    two_kernels(&scale, &shift);
    TrtArg a[4];
    scale_args(a, 0x1000, 32);
    uint32_t grid[3] = {1, 1, 1};
    for (int i = 0; i < 3 * RT_RECENT_LAUNCHES; i++)
        assert_ok(trt_launch(i % 2 ? shift : scale, a, 4, grid, NULL));
    TrtModule *old = cur.mod;
    TrtKernel *k = ptx_kernel(cur.ctx, &cur.mod, ptx_src);
    assert_ok(trt_launch(k, a, 4, grid, NULL));
    trt_module_destroy(old);
    assert_int_equal(faulting_sync(), TRT_ERROR_DRIVER);
    const char *m = trt_last_error();
    assert_non_null(strstr(m, "synchronization: 'scale' (and earlier ones not recorded)."));
    assert_null(strstr(m, "'shift'"));
}

/* ---- no driver: each case in a fresh process ----------------------------------------- */
/* The driver is opened once per process, so each case runs in a new process: this
 * program again (main's --child), with one more variable in its environment. It calls
 * trt_context_create twice and exits 0 if both returned `want` with a message that
 * contains `text`. */
static int child_check(TrtStatus want, const char *text)
{
    for (int i = 0; i < 2; i++) {
        TrtContext *c = (TrtContext *)&c;
        if (trt_context_create(0, TRT_MODE_DEFAULT, "", &c) != want || c) return 1;
        if (!strstr(trt_last_error(), text)) {
            fprintf(stderr, "message: %s\n", trt_last_error());
            return 2;
        }
    }
    return 0;
}

static int child_status(const char *var, const char *value, TrtStatus want, const char *text)
{
    char wants[16];
    snprintf(wants, sizeof wants, "%d", (int)want);
    pid_t pid = fork();
    if (pid == 0) {
        setenv(var, value, 1);
        execl("/proc/self/exe", "test_runtime", "--child", wants, text, (char *)NULL);
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

/* rt_nvjitlink.c, in children (the library is opened once per process). The toolkit's
 * libnvJitLink assembles a PTX into an ELF cubin holding the kernel, and reports a bad
 * PTX with its log; a TILE_NVJITLINK that does not open leaves the driver to assemble. */
static bool has_bytes(const void *hay, size_t n, const char *needle)
{
    size_t m = strlen(needle);
    for (size_t i = 0; i + m <= n; i++)
        if (!memcmp((const char *)hay + i, needle, m)) return true;
    return false;
}

/* An assembler (rt_nvjitlink_assemble, rt_ptxas_assemble) turns a PTX into an ELF
 * cubin holding its kernel, and a bad PTX into TRT_ERROR_DRIVER with `why` and the
 * assembler's message naming the bad line. 0, or 11..13 for what failed. */
static int assembles(TrtStatus (*assemble)(const char *, const char *, RtBlob *), const char *why)
{
    static const char head[] = ".version 8.0\n.target sm_90a\n.address_size 64\n";
    char ptx[256];
    snprintf(ptx, sizeof ptx, "%s.visible .entry tile_probe()\n{\n\tret;\n}\n", head);
    RtBlob out = {0};
    if (assemble("sm_90a", ptx, &out)) return 11;
    bool elf = out.len > 4 && !memcmp(out.data, "\177ELF", 4) && has_bytes(out.data, out.len, "tile_probe");
    rt_blob_free(&out);
    if (!elf) return 12;
    snprintf(ptx, sizeof ptx, "%s.visible .entry bad()\n{\n\tnot_an_instruction;\n}\n", head);
    TrtStatus s = assemble("sm_90a", ptx, &out);
    if (s != TRT_ERROR_DRIVER || !strstr(trt_last_error(), why) || !strstr(trt_last_error(), "not_an_instruction"))
        return 13;
    return 0;
}

static int nvjitlink_child(const char *lib)
{
    setenv("TILE_ASSEMBLER", "nvjitlink", 1);
    if (lib) setenv("TILE_NVJITLINK", lib, 1);
    else unsetenv("TILE_NVJITLINK");
    if (!rt_nvjitlink_wanted()) return 10;
    return assembles(rt_nvjitlink_assemble, "nvJitLink could not assemble the PTX");
}

static int in_child(int (*fn)(const char *), const char *arg)
{
    pid_t pid = fork();
    if (pid == 0) _exit(fn(arg));
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static void test_nvjitlink_assembler(void **state)
{
    (void)state;
    /* the CUDA toolkit of this machine kind (/usr/local/cuda) carries it; without it,
     * the fallback is what is checked */
    bool present = !access("/usr/local/cuda/lib64/libnvJitLink.so.13", R_OK);
    assert_int_equal(in_child(nvjitlink_child, NULL), present ? 0 : 10);
    assert_int_equal(in_child(nvjitlink_child, "/nonexistent/libnvJitLink.so.13"), 10);
}

/* rt_ptxas.c, in children (ptxas is looked for once per process). The toolkit's ptxas
 * (this machine kind has /usr/local/cuda) assembles a PTX into an ELF cubin holding
 * the kernel and reports a bad PTX with its log. Through the launch path with a stand-in
 * (tests/mock/fake-ptxas.sh): the variant is assembled by it, not by cuLink, and cached;
 * a PTX error carries ptxas's message; a ptxas newer than the driver, or none, leaves
 * cuLink to assemble. */
static int ptxas_child(const char *arg)
{
    (void)arg;
    setenv("TILE_ASSEMBLER", "ptxas", 1);
    unsetenv("TILE_PTXAS");
    TrtContext *c = NULL;
    if (trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &c)) return 9;
    if (rt_assembler(c) != RT_ASM_PTXAS) return 10;
    if (rt_ptxas_version() < 12000) return 14;
    int r = assembles(rt_ptxas_assemble, "could not assemble the PTX");
    trt_context_destroy(c);
    return r;
}

static int fake_ptxas_child(const char *release)
{
    char log[300];
    snprintf(log, sizeof log, "%s/fake-ptxas.log", cur.dir);
    unlink(log);
    setenv("TILE_ASSEMBLER", "ptxas", 1);
    setenv("TILE_PTXAS", TILE_SOURCE_DIR "/tests/mock/fake-ptxas.sh", 1);
    setenv("FAKE_PTXAS_LOG", log, 1);
    setenv("TMPDIR", "/nonexistent", 1);   /* the temporary files fall back to /tmp */
    if (release) setenv("FAKE_PTXAS_RELEASE", release, 1);
    else unsetenv("FAKE_PTXAS_RELEASE");
    char dir[300];   /* a cache of its own: another child's cubin would stand in */
    snprintf(dir, sizeof dir, "%s/%s", cur.dir, release ? release : "found");
    TrtContext *c = NULL;
    if (trt_context_create(0, TRT_MODE_DEFAULT, dir, &c)) return 9;
    mock_reset();
    TrtModule *m = NULL;
    if (rt_module_load_ptx(c, ptx_src, &scale_kernel, 1, &m)) return 10;
    TrtKernel *k = NULL;
    if (trt_module_get_kernel(m, "scale", NULL, 0, &k)) return 11;
    TrtArg a[4];
    scale_args(a, 0x1000, 64);
    uint32_t grid[3] = {1, 1, 1};
    if (trt_launch(k, a, 4, grid, NULL)) return 12;
    MockCounts n;
    mock_counts(&n);
    FILE *f = fopen(log, "r");
    char line[64] = "";
    bool ran = f && fgets(line, sizeof line, f) && !strcmp(line, "sm_90a\n");
    if (f) fclose(f);
    if (release) return n.links == 1 && !ran ? 0 : 20;   /* too new or too old: cuLink assembled */
    if (!ran || n.links != 0 || n.cubin_loads != 1) return 13;
    char bad[sizeof ptx_src + 32];
    snprintf(bad, sizeof bad, "%s// MOCK_SYNTAX_ERROR\n", ptx_src);
    TrtModule *m2 = NULL;
    if (rt_module_load_ptx(c, bad, &scale_kernel, 1, &m2) || trt_module_get_kernel(m2, "scale", NULL, 0, &k)) return 14;
    if (trt_launch(k, a, 4, grid, NULL) != TRT_ERROR_DRIVER || !strstr(trt_last_error(), "fake-ptxas.sh) could not assemble") ||
        !strstr(trt_last_error(), "Unknown symbol 'MOCK_SYNTAX_ERROR'"))
        return 15;
    trt_module_destroy(m2);
    trt_module_destroy(m);
    trt_context_destroy(c);
    return 0;
}

static int missing_ptxas_child(const char *arg)
{
    (void)arg;
    unsetenv("TILE_ASSEMBLER");
    setenv("TILE_PTXAS", "/nonexistent/ptxas", 1);
    TrtContext *c = NULL;
    if (trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &c)) return 9;
    unsetenv("TILE_ASSEMBLER");   /* the mock's default (driver) undone: the search decides */
    RtAssembler a = rt_assembler(c);
    trt_context_destroy(c);
    return a == RT_ASM_DRIVER ? 0 : 10;
}

static void test_ptxas_assembler(void **state)
{
    (void)state;
    bool present = !access("/usr/local/cuda/bin/ptxas", X_OK);
    if (present) assert_int_equal(in_child(ptxas_child, NULL), 0);
    assert_int_equal(in_child(fake_ptxas_child, NULL), 0);
    assert_int_equal(in_child(fake_ptxas_child, "14.0"), 0);
    assert_int_equal(in_child(fake_ptxas_child, "12.2"), 0);   /* too old for PTX 8.3 */
    assert_int_equal(in_child(missing_ptxas_child, NULL), 0);
}

static void test_no_driver_library(void **state)
{
    (void)state;
    assert_int_equal(child_status("TILE_CUDA_LIBRARY", "/nonexistent/libcuda.so.1",
                                  TRT_ERROR_NO_DRIVER,
                                  "no CUDA driver: cannot open the CUDA driver /nonexistent/libcuda.so.1"),
                     0);
}

static void test_no_driver_cuinit_fails(void **state)
{
    (void)state;
    assert_int_equal(child_status("MOCKCUDA_INIT_ERROR", "100", TRT_ERROR_NO_DRIVER,
                                  "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"), 0);
}

static void test_no_driver_missing_entry_point(void **state)
{
    (void)state;
    assert_int_equal(child_status("MOCKCUDA_MISSING", "cuLinkCreate", TRT_ERROR_NO_DRIVER,
                                  "has no cuLinkCreate"), 0);
}

static void test_null_handles(void **state)
{
    (void)state;
    assert_int_equal(trt_launch(NULL, NULL, 0, NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_string_equal(trt_last_error(), "trt_launch: kernel is NULL");
    TrtModule *m = NULL;
    assert_int_equal(trt_module_load_string(NULL, "x", "", &m), TRT_ERROR_INVALID_ARGUMENT);
    assert_string_equal(trt_status_name(TRT_ERROR_NO_DRIVER), "TRT_ERROR_NO_DRIVER");
}

/* The library's version is the header's, and the macros spell the string. */
static void test_version(void **state)
{
    (void)state;
    char v[64];
    snprintf(v, sizeof v, "%d.%d.%d", TILE_RT_VERSION_MAJOR, TILE_RT_VERSION_MINOR,
             TILE_RT_VERSION_PATCH);
    assert_string_equal(TILE_RT_VERSION, v);
    assert_string_equal(trt_version(), TILE_RT_VERSION);
    assert_string_equal(TILE_RT_VERSION, TILE_PROJECT_VERSION);
}

/* Every kind has its helper, which sets the kind and the member the launch reads. */
static void test_arg_helpers(void **state)
{
    (void)state;
    assert_int_equal(trt_arg_i8(-3).kind, TRT_ARG_I8);
    assert_int_equal(trt_arg_i8(-3).v.i8, -3);
    assert_int_equal(trt_arg_i16(-300).kind, TRT_ARG_I16);
    assert_int_equal(trt_arg_i16(-300).v.i16, -300);
    assert_int_equal(trt_arg_u8(200).kind, TRT_ARG_U8);
    assert_int_equal(trt_arg_u8(200).v.u8, 200);
    assert_int_equal(trt_arg_u16(60000).kind, TRT_ARG_U16);
    assert_int_equal(trt_arg_u16(60000).v.u16, 60000);
    assert_int_equal(trt_arg_f16(0x3c00).kind, TRT_ARG_F16);
    assert_int_equal(trt_arg_f16(0x3c00).v.u16, 0x3c00);
    assert_int_equal(trt_arg_bf16(0x3f80).kind, TRT_ARG_BF16);
    assert_int_equal(trt_arg_bf16(0x3f80).v.u16, 0x3f80);
    assert_int_equal(trt_arg_bool(7).v.i8, 1);
}

static void bind_mock(void)
{
    void *h = dlopen(getenv("TILE_CUDA_LIBRARY"), RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cannot open the mock driver: %s\n", dlerror());
        exit(1);
    }
    mock_counts = (MockCountsFn)dlsym(h, "mockcuda_counts");
    mock_last = (MockLastLaunchFn)dlsym(h, "mockcuda_last_launch");
    mock_reset = (MockResetFn)dlsym(h, "mockcuda_reset");
}

int main(int argc, char **argv)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 0);
    if (argc == 4 && !strcmp(argv[1], "--child")) return child_check(atoi(argv[2]), argv[3]);
    unsetenv("TILE_LOG_RECOMPILES");
    bind_mock();
    if (argc == 4 && !strcmp(argv[1], "--child-codegen")) return child_codegen(argv[2], argv[3]);
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_context_shares_primary_context), T(test_context_bad_device),
        T(test_context_mode_from_env), T(test_context_refuses_unsafe_cache),
        T(test_module_syntax_error), T(test_module_kernel_signature),
        T(test_module_unknown_kernel), T(test_module_unknown_const),
        T(test_long_error_message_is_whole), T(test_module_checks_autotune_and_consts), T(test_module_load_missing_file),
        T(test_module_load_example_file), T(test_launch_checks_count_and_kinds),
        T(test_launch_checks_pointer_alignment), T(test_launch_without_grid),
        T(test_launch_packs_arguments), T(test_variant_selection), T(test_variant_selection_div8),
        T(test_variant_report),
        T(test_warm_cache_loads_cubin), T(test_no_disk_cache_loads_ptx),
        T(test_tile_kernel_grid_clause), T(test_tile_kernel_compiled_once_across_contexts),
        T(test_tile_kernel_real_compile_step), T(test_no_codegen_library_warm_cache_works),
        T(test_codegen_library_without_entry_points), T(test_load_error_has_jit_log),
        T(test_link_error_is_not_cached), T(test_launch_error), T(test_fault_names_kernels_since_last_sync),
        T(test_fault_later_calls_fail_fast), T(test_fault_ring_bounds), T(test_no_driver_library),
        T(test_no_driver_cuinit_fails), T(test_no_driver_missing_entry_point),
        T(test_null_handles), T(test_version), T(test_arg_helpers), T(test_occupancy_request_kept_without_spills),
        T(test_occupancy_request_dropped_when_it_spills),
        T(test_module_introspection), T(test_kernel_param_as_lowered),
        T(test_cpu_context_runs_the_interpreter), T(test_cpu_context_half_scalars),
        T(test_checked_launch_passes_sizes), T(test_checked_launch_reports_out_of_bounds),
        T(test_checked_mode_from_env), T(test_nvjitlink_assembler), T(test_ptxas_assembler),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
