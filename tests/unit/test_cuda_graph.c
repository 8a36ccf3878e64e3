/* CUDA graphs (runtime/rt_graph.c) against the mock driver (tests/mock): a capture
 * records trt_launch calls instead of running them, a replay runs them all through one
 * cuGraphLaunch (the mock records each node as a launch), trt_graph_update changes one
 * launch's arguments in place and refuses arguments that would select another variant
 * or grid, and a driver without the graph entry points gives a clear error (in a child
 * process, since the driver is opened once per process). */
#include <dlfcn.h>
#include <pthread.h>
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
static MockLaunchLogFn mock_log;
static MockResetFn mock_reset;

static struct {
    TrtContext *ctx;
    TrtModule *ptx_mod, *tile_mod;
    TrtGraph *graph;
    char dir[256];
} cur;

static int setup(void **state)
{
    (void)state;
    memset(&cur, 0, sizeof cur);
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-graph-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return -1;
    mock_reset();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    trt_graph_destroy(cur.graph);
    trt_module_destroy(cur.ptx_mod);
    trt_module_destroy(cur.tile_mod);
    trt_context_destroy(cur.ctx);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cur.dir);
    return system(cmd);
}

static char *fake_compile(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st)
{
    (void)mask, (void)checked, (void)st;
    meta->threads = 256;
    meta->shared_bytes = 0;
    char *ptx = malloc(1024);
    int n = snprintf(ptx, 1024, ".version 8.3\n.target sm_90a\n.address_size 64\n.visible .entry %s(", k->name);
    for (uint32_t i = 0; i < k->nparams; i++)   /* pointers and i32s only, in these tests */
        n += snprintf(ptx + n, 1024 - (size_t)n, "%s.param .%s p%u", i ? ", " : "",
                      k->params[i].elem == IR_PTR ? "u64" : "u32", i);
    snprintf(ptx + n, 1024 - (size_t)n, ")\n{\n\tret;\n}\n");
    return ptx;
}

static TrtKernel *scale(void)
{
    if (!cur.ctx) assert_ok(trt_context_create(0, TRT_MODE_REDUCE_OVERHEAD, cur.dir, &cur.ctx));
    assert_ok(rt_module_load_ptx(cur.ctx, ptx_src, &scale_kernel, 1, &cur.ptx_mod));
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.ptx_mod, "scale", NULL, 0, &k));
    return k;
}

static TrtKernel *vector_add(void)
{
    if (!cur.ctx) assert_ok(trt_context_create(0, TRT_MODE_REDUCE_OVERHEAD, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "va.tile", vector_add_src, &cur.tile_mod));
    cur.tile_mod->compile = fake_compile;
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.tile_mod, "vector_add", NULL, 0, &k));
    return k;
}

static void scale_args(TrtArg a[4], CUdeviceptr x, int32_t n, float s, int64_t m)
{
    a[0] = trt_arg_ptr(x);
    a[1] = trt_arg_i32(n);
    a[2] = trt_arg_f32(s);
    a[3] = trt_arg_i64(m);
}

static void va_args(TrtArg a[4], CUdeviceptr c, int32_t n)
{
    a[0] = trt_arg_ptr(c);
    a[1] = trt_arg_ptr(0x20000);
    a[2] = trt_arg_ptr(0x30000);
    a[3] = trt_arg_i32(n);
}

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static CUstream const stream = (CUstream)0x5000;

/* Captures scale (grid 3x2x1) then vector_add (grid from n = 5000: 5 programs). */
static void capture_two(TrtKernel *s, TrtKernel *v)
{
    TrtArg a[4], b[4];
    scale_args(a, 0x1000, 32, 2.0f, 7);
    va_args(b, 0x10000, 5000);
    uint32_t grid[3] = {3, 2, 1};
    assert_ok(trt_graph_begin(cur.ctx, stream));
    assert_ok(trt_launch(s, a, 4, grid, stream));
    assert_ok(trt_launch(v, b, 4, NULL, stream));
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.launches, 0);     /* recorded, not run */
    assert_ok(trt_graph_end(cur.ctx, stream, &cur.graph));
    assert_int_equal(trt_graph_num_launches(cur.graph), 2);
}

static void test_capture_and_replay(void **state)
{
    (void)state;
    TrtKernel *s = scale(), *v = vector_add();
    capture_two(s, v);
    assert_ok(trt_graph_launch(cur.graph, stream));
    assert_ok(trt_graph_launch(cur.graph, stream));
    MockLaunch log[8];
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.graph_launches, 2);
    assert_int_equal(mock_log(log, 8), 4);
    for (int r = 0; r < 2; r++) {
        const MockLaunch *l = &log[2 * r];
        assert_string_equal(l->func, "scale");
        assert_int_equal(l->grid[0], 3);
        assert_int_equal(l->grid[1], 2);
        assert_int_equal(l->grid[2], 1);
        assert_int_equal(l->block[0], 128);
        assert_true(l->stream == stream);
        assert_int_equal(l->params[0], 0x1000);
        assert_int_equal(l->params[1], 32);
        assert_int_equal(l->params[2], f32_bits(2.0f));
        assert_int_equal(l->params[3], 7);
        l = &log[2 * r + 1];
        assert_string_equal(l->func, "vector_add");
        assert_int_equal(l->grid[0], 5);     /* cdiv(5000, 1024) */
        assert_int_equal(l->block[0], 256);
        assert_int_equal(l->params[0], 0x10000);
        assert_int_equal(l->params[3], 5000);
    }
}

static void test_update_pointer_and_scalar(void **state)
{
    (void)state;
    TrtKernel *s = scale(), *v = vector_add();
    capture_two(s, v);
    TrtArg a[4], b[4];
    scale_args(a, 0x2000, 48, 3.5f, 9);   /* same classes: aligned, divisible by 16 */
    assert_ok(trt_graph_update(cur.graph, 0, a, 4));
    va_args(b, 0x40000, 4904);             /* still 5 programs, same class (5000's: divisible by 8) */
    assert_ok(trt_graph_update(cur.graph, 1, b, 4));
    assert_ok(trt_graph_launch(cur.graph, stream));
    MockLaunch log[4];
    assert_int_equal(mock_log(log, 4), 2);
    assert_int_equal(log[0].params[0], 0x2000);
    assert_int_equal(log[0].params[1], 48);
    assert_int_equal(log[0].params[2], f32_bits(3.5f));
    assert_int_equal(log[0].params[3], 9);
    assert_int_equal(log[0].grid[0], 3);
    assert_int_equal(log[1].params[0], 0x40000);
    assert_int_equal(log[1].params[3], 4904);
    assert_int_equal(log[1].grid[0], 5);
}

static void test_update_refuses_another_variant(void **state)
{
    (void)state;
    TrtKernel *s = scale(), *v = vector_add();
    capture_two(s, v);
    TrtArg a[4], b[4];
    scale_args(a, 0x1000, 17, 2.0f, 7);   /* n: divisible by 16 -> odd */
    assert_int_equal(trt_graph_update(cur.graph, 0, a, 4), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "argument 2 ('n') changed class: divisible by 16 -> "
                                             "not 1 nor divisible by 8"));
    assert_non_null(strstr(trt_last_error(), "capture the graph again"));
    scale_args(a, 0x1004, 32, 2.0f, 7);   /* x loses its 16-byte alignment */
    assert_int_equal(trt_graph_update(cur.graph, 0, a, 4), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "argument 1 ('x') changed class: aligned to 16 bytes -> not aligned to 16 bytes"));
    va_args(b, 0x10000, 7000);             /* same class, but 7 programs */
    assert_int_equal(trt_graph_update(cur.graph, 1, b, 4), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "the grid changes from 5x1x1 to 7x1x1"));
    assert_int_equal(trt_graph_update(cur.graph, 2, b, 4), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "out of range"));
    b[3] = trt_arg_i64(5000);               /* the wrong kind */
    assert_int_equal(trt_graph_update(cur.graph, 1, b, 4), TRT_ERROR_INVALID_ARGUMENT);
    /* Nothing changed: the replay sees the captured values. */
    assert_ok(trt_graph_launch(cur.graph, stream));
    MockLaunch log[4];
    assert_int_equal(mock_log(log, 4), 2);
    assert_int_equal(log[0].params[0], 0x1000);
    assert_int_equal(log[0].params[1], 32);
    assert_int_equal(log[1].params[3], 5000);
    assert_int_equal(log[1].grid[0], 5);
}

static void test_capture_rules(void **state)
{
    (void)state;
    TrtKernel *s = scale();
    TrtArg a[4];
    scale_args(a, 0x1000, 32, 2.0f, 7);
    uint32_t grid[3] = {1, 1, 1};
    assert_ok(trt_graph_begin(cur.ctx, stream));
    assert_int_equal(trt_graph_begin(cur.ctx, stream), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "capturing already"));
    /* Another stream runs as usual. */
    assert_ok(trt_launch(s, a, 4, grid, NULL));
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.launches, 1);
    /* An empty grid records nothing. */
    uint32_t empty[3] = {0, 1, 1};
    assert_ok(trt_launch(s, a, 4, empty, stream));
    /* The checked mode cannot be captured. */
    assert_ok(trt_context_set_debug(cur.ctx, TRT_DEBUG_BOUNDS));
    TrtKernel *v = vector_add();
    TrtArg b[4];
    va_args(b, 0x10000, 5000);
    assert_int_equal(trt_launch(v, b, 4, NULL, stream), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "TILE_DEBUG=bounds"));
    assert_non_null(strstr(trt_last_error(), "graph capture"));
    assert_ok(trt_context_set_debug(cur.ctx, 0));
    assert_int_equal(trt_graph_end(cur.ctx, (CUstream)0x6000, &cur.graph), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "another stream"));
    assert_ok(trt_graph_end(cur.ctx, stream, &cur.graph));
    assert_int_equal(trt_graph_num_launches(cur.graph), 0);
    assert_ok(trt_graph_launch(cur.graph, stream));
    TrtGraph *none = (TrtGraph *)&none;
    assert_int_equal(trt_graph_end(cur.ctx, stream, &none), TRT_ERROR_INVALID_ARGUMENT);
    assert_null(none);
    assert_non_null(strstr(trt_last_error(), "no capture in progress"));
    /* A capture left open is freed with its context (ASan sees no leak). */
    assert_ok(trt_graph_begin(cur.ctx, stream));
    assert_ok(trt_launch(s, a, 4, grid, stream));
    assert_ok(trt_launch(s, a, 4, grid, stream));
}

static const char tuned_src[] =
    "@autotune(key = [n], space = {BLOCK: [64, 128, 256, 512], warps: [1, 2, 4]},\n"
    "          where = BLOCK >= warps * 32, default = {BLOCK: 128, warps: 4})\n"
    "kernel tscale(y: *f32, x: *f32, n: i32, const BLOCK: i32 = 128)\n"
    "    grid(cdiv(n, BLOCK))\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    let m = offs < n;\n"
    "    store(y + offs, load(x + offs, m) * 2.0, m);\n"
    "}\n";

static TrtKernel *tuned(TrtMode mode)
{
    assert_ok(trt_context_create(0, mode, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "t.tile", tuned_src, &cur.tile_mod));
    cur.tile_mod->compile = fake_compile;
    TrtKernel *k = NULL;
    assert_ok(trt_module_get_kernel(cur.tile_mod, "tscale", NULL, 0, &k));
    return k;
}

/* max-autotune cannot tune inside a capture; the default config can be captured, and a
 * scalar of a tuned launch cannot be updated (its config may depend on it). */
static void test_capture_autotune(void **state)
{
    (void)state;
    TrtKernel *k = tuned(TRT_MODE_MAX_AUTOTUNE);
    TrtArg a[3] = {trt_arg_ptr(0x10000), trt_arg_ptr(0x20000), trt_arg_i32(1000)};
    assert_ok(trt_graph_begin(cur.ctx, stream));
    assert_int_equal(trt_launch(k, a, 3, NULL, stream), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "max-autotune would tune this key now"));
    assert_non_null(strstr(trt_last_error(), "launch it once before the capture"));
    assert_ok(trt_graph_end(cur.ctx, stream, &cur.graph));
    assert_int_equal(trt_graph_num_launches(cur.graph), 0);
    trt_graph_destroy(cur.graph);
    cur.graph = NULL;
    trt_module_destroy(cur.tile_mod);
    cur.tile_mod = NULL;
    trt_context_destroy(cur.ctx);
    cur.ctx = NULL;

    k = tuned(TRT_MODE_REDUCE_OVERHEAD);
    assert_ok(trt_graph_begin(cur.ctx, stream));
    assert_ok(trt_launch(k, a, 3, NULL, stream));
    assert_ok(trt_graph_end(cur.ctx, stream, &cur.graph));
    a[0] = trt_arg_ptr(0x30000);
    assert_ok(trt_graph_update(cur.graph, 0, a, 3));
    a[2] = trt_arg_i32(1016);   /* 1000's class (divisible by 8), another value */
    assert_int_equal(trt_graph_update(cur.graph, 0, a, 3), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "scalar argument 3 ('n') changed"));
    assert_ok(trt_graph_launch(cur.graph, stream));
    MockLaunch log[2];
    assert_int_equal(mock_log(log, 2), 1);
    assert_int_equal(log[0].params[0], 0x30000);
    assert_int_equal(log[0].params[2], 1000);
    assert_int_equal(log[0].grid[0], 8);    /* cdiv(1000, 128): the default config */
    assert_int_equal(log[0].block[0], 256);
}

/* A driver error of the replay is reported as such. */
static void test_replay_error(void **state)
{
    (void)state;
    TrtKernel *s = scale(), *v = vector_add();
    capture_two(s, v);
    setenv("MOCKCUDA_LAUNCH_ERROR", "1", 1);
    TrtStatus st = trt_graph_launch(cur.graph, stream);
    unsetenv("MOCKCUDA_LAUNCH_ERROR");
    assert_int_equal(st, TRT_ERROR_DRIVER);
    assert_non_null(strstr(trt_last_error(), "cuGraphLaunch failed: CUDA_ERROR_INVALID_VALUE"));
    assert_ok(trt_graph_launch(cur.graph, stream));
}

/* Threads updating and replaying one graph at once (its lock serializes them): every
 * replay sees whole argument sets: n and m (n + 7) written together. */
#define UPDATERS 4
#define ROUNDS 200
static void *updater(void *arg)
{
    intptr_t t = (intptr_t)arg;
    for (int r = 0; r < ROUNDS; r++) {
        TrtArg a[4];
        int64_t val = 16 * (t * ROUNDS + r);
        scale_args(a, 0x1000, (int32_t)val, 2.0f, val + 7);   /* the captured classes */
        if (trt_graph_update(cur.graph, 0, a, 4) || trt_graph_launch(cur.graph, stream)) {
            fprintf(stderr, "updater %d, round %d: %s\n", (int)t, r, trt_last_error());
            return (void *)1;
        }
    }
    return NULL;
}

static void test_update_from_threads(void **state)
{
    (void)state;
    TrtKernel *s = scale(), *v = vector_add();
    capture_two(s, v);
    pthread_t th[UPDATERS];
    for (intptr_t t = 0; t < UPDATERS; t++) assert_int_equal(pthread_create(&th[t], NULL, updater, (void *)t), 0);
    int failed = 0;
    for (int t = 0; t < UPDATERS; t++) {   /* all joined before an assertion can end the case */
        void *rc = NULL;
        pthread_join(th[t], &rc);
        failed += rc != NULL;
    }
    assert_int_equal(failed, 0);
    MockCounts c;
    mock_counts(&c);
    assert_int_equal(c.graph_launches, UPDATERS * ROUNDS);
    static MockLaunch log[256];
    assert_int_equal(mock_log(log, 256), 2 * UPDATERS * ROUNDS);
    for (int i = 0; i < 256; i += 2) {
        assert_string_equal(log[i].func, "scale");
        assert_int_equal(log[i].params[1] + 7, log[i].params[3]);
    }
}

static void test_cpu_context_has_no_graphs(void **state)
{
    (void)state;
    assert_ok(trt_context_create(TRT_DEVICE_CPU, TRT_MODE_DEFAULT, "", &cur.ctx));
    assert_int_equal(trt_graph_begin(cur.ctx, NULL), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "CPU context"));
    assert_int_equal(trt_graph_launch(NULL, NULL), TRT_ERROR_INVALID_ARGUMENT);
    trt_graph_destroy(NULL);
}

/* The child: the driver lacks one graph entry point. */
static int child_no_graphs(void)
{
    TrtContext *ctx = NULL;
    if (trt_context_create(0, TRT_MODE_DEFAULT, "", &ctx)) return 10;
    int rc = 0;
    if (trt_graph_begin(ctx, NULL) != TRT_ERROR_DRIVER) rc = 11;
    else if (!strstr(trt_last_error(), "CUDA graphs are not available: the CUDA driver has no "
                                        "cuGraphExecKernelNodeSetParams"))
        rc = 12;
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtArg a[4];
    scale_args(a, 0x1000, 32, 2.0f, 7);
    uint32_t grid[3] = {1, 1, 1};
    if (!rc && (rt_module_load_ptx(ctx, ptx_src, &scale_kernel, 1, &m) ||
                trt_module_get_kernel(m, "scale", NULL, 0, &k) || trt_launch(k, a, 4, grid, NULL)))
        rc = 13;   /* everything else works */
    if (rc) fprintf(stderr, "child: %d: %s\n", rc, trt_last_error());
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    return rc;
}

static void test_driver_without_graphs(void **state)
{
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("MOCKCUDA_MISSING", "cuGraphExecKernelNodeSetParams", 1);
        execl("/proc/self/exe", "test_cuda_graph", "--child-no-graphs", (char *)NULL);
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(int argc, char **argv)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    unsetenv("TILE_LOG_RECOMPILES");
    unsetenv("TILE_DEBUG");
    unsetenv("TILE_MODE");
    if (argc == 2 && !strcmp(argv[1], "--child-no-graphs")) return child_no_graphs();
    void *h = dlopen(getenv("TILE_CUDA_LIBRARY"), RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cannot open the mock driver: %s\n", dlerror());
        return 1;
    }
    mock_counts = (MockCountsFn)dlsym(h, "mockcuda_counts");
    mock_log = (MockLaunchLogFn)dlsym(h, "mockcuda_launch_log");
    mock_reset = (MockResetFn)dlsym(h, "mockcuda_reset");
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_capture_and_replay), T(test_update_pointer_and_scalar), T(test_update_refuses_another_variant),
        T(test_capture_rules), T(test_capture_autotune), T(test_replay_error),
        T(test_update_from_threads), T(test_cpu_context_has_no_graphs), T(test_driver_without_graphs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
