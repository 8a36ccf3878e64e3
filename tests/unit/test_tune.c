/* The tuner and the modes (runtime/rt_tune.c, docs/TUNING.md) against the mock driver.
 *
 * The kernel is compiled for real (libtileCG.so), so each config's PTX carries its
 * "// tile-config:" line, on which the mock keys its fake timings (MOCKCUDA_TIMES),
 * faults, hangs, wrong results, link errors, registers and spills; the benchmarks
 * run in the real worker process (tile-tune-worker), which loads the same mock.
 *
 * The space: BLOCK in 64, 128, 256, 512 times warps in 1, 2, 4 where BLOCK >= 32 *
 * warps (so 64/4 goes): 11 configs, in this order (the last key fastest):
 *   0: 64/1  1: 64/2  2: 128/1  3: 128/2  4: 128/4 (the default)  5: 256/1  6: 256/2
 *   7: 256/4  8: 512/1  9: 512/2  10: 512/4 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "tests/mock/mockcuda.h"
#include "rt_tune.h"
#include "tests/unit/rt_test.h"


static MockLastLaunchFn mock_last;
static MockResetFn mock_reset;

static const char scale_src[] =
    "@autotune(key = [n], space = {BLOCK: [64, 128, 256, 512], warps: [1, 2, 4]},\n"
    "          where = BLOCK >= warps * 32, default = {BLOCK: 128, warps: 4})\n"
    "kernel scale(y: *f32, x: *f32, n: i32, const BLOCK: i32 = 128)\n"
    "    grid(cdiv(n, BLOCK))\n"
    "{\n"
    "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    let m = offs < n;\n"
    "    store(y + offs, load(x + offs, m) * 2.0, m);\n"
    "}\n";

enum { N = 4096 };

static struct {
    TrtContext *ctx;
    TrtModule *mod;
    TrtKernel *k;
    TrtDevicePtr x, y;
    char dir[256];
    RtTuneResult r;
} cur;

static const char *const mock_vars[] = {
    "MOCKCUDA_TIMES", "MOCKCUDA_FAULT_CONFIG", "MOCKCUDA_HANG_CONFIG", "MOCKCUDA_WRONG_CONFIG",
    "MOCKCUDA_LINK_ERROR_CONFIG", "MOCKCUDA_REGS", "MOCKCUDA_SPILL_CONFIG", "MOCKCUDA_SMEM_OPTIN",
    "MOCKCUDA_MAX_THREADS",
    "TILE_TUNE_TIMEOUT_MS", "TILE_TUNE_MAX_CONFIGS", "TILE_MODE",
};

static int setup(void **state)
{
    (void)state;
    memset(&cur, 0, sizeof cur);
    snprintf(cur.dir, sizeof cur.dir, "/tmp/tile-tune-test-XXXXXX");
    if (!mkdtemp(cur.dir)) return -1;
    for (size_t i = 0; i < sizeof mock_vars / sizeof *mock_vars; i++) unsetenv(mock_vars[i]);
    mock_reset();
    return 0;
}

static void close_all(void)
{
    if (cur.ctx && cur.x) trt_mem_free(cur.ctx, cur.x);
    if (cur.ctx && cur.y) trt_mem_free(cur.ctx, cur.y);
    trt_module_destroy(cur.mod);
    trt_context_destroy(cur.ctx);
    cur.ctx = NULL, cur.mod = NULL, cur.k = NULL, cur.x = cur.y = 0;
}

static int teardown(void **state)
{
    (void)state;
    rt_tune_result_free(&cur.r);
    close_all();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", cur.dir);
    return system(cmd);
}

/* A context in `mode` on the case's cache, the scale kernel (with the consts given) and
 * its buffers: x[i] = i, y = 0. */
static void open_kernel(TrtMode mode, const TrtConst *consts, uint32_t n)
{
    assert_ok(trt_context_create(0, mode, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "scale.tile", scale_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "scale", consts, n, &cur.k));
    assert_ok(trt_mem_alloc(cur.ctx, N * sizeof(float), &cur.x));
    assert_ok(trt_mem_alloc(cur.ctx, N * sizeof(float), &cur.y));
    float host[N];
    for (int i = 0; i < N; i++) host[i] = (float)i;
    assert_ok(trt_memcpy_htod(cur.ctx, cur.x, host, sizeof host));
    memset(host, 0, sizeof host);
    assert_ok(trt_memcpy_htod(cur.ctx, cur.y, host, sizeof host));
}

static void args_for(TrtArg a[3], int32_t n)
{
    a[0] = trt_arg_ptr(cur.y);
    a[1] = trt_arg_ptr(cur.x);
    a[2] = trt_arg_i32(n);
}

static void tune(void)
{
    TrtArg a[3];
    args_for(a, N);
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    assert_ok(rt_tune_run(cur.k, a, 3, NULL, &o, &cur.r));
}

/* With the sizes of trt_launch_sized, the worker's copy of an allocation spans the
 * arguments' buffers, not the rest of the allocation (a tensor in a PyTorch segment). */
static void test_copies_only_the_given_bytes(void **state)
{
    (void)state;
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    TrtDevicePtr big;
    assert_ok(trt_mem_alloc(cur.ctx, 8 * N * sizeof(float), &big));
    TrtArg a[3] = {trt_arg_ptr(big), trt_arg_ptr(big + 2 * N * sizeof(float)), trt_arg_i32(N)};
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    assert_ok(rt_tune_run(cur.k, a, 3, NULL, &o, &cur.r));
    assert_int_equal(cur.r.copy_bytes, 8 * N * sizeof(float));          /* y to the allocation's end */
    rt_tune_result_free(&cur.r);
    uint64_t bytes[3] = {N * sizeof(float), N * sizeof(float), 0};
    o.bytes = bytes;
    assert_ok(rt_tune_run(cur.k, a, 3, NULL, &o, &cur.r));
    assert_int_equal(cur.r.copy_bytes, 3 * N * sizeof(float));          /* y's start to x's end */
    assert_int_equal(cur.r.cands[cur.r.winner].status, RT_CAND_OK);
    rt_tune_result_free(&cur.r);
    bytes[0] = TRT_BYTES_UNKNOWN;                                         /* unknown: to the end */
    assert_ok(rt_tune_run(cur.k, a, 3, NULL, &o, &cur.r));
    assert_int_equal(cur.r.copy_bytes, 8 * N * sizeof(float));
    trt_mem_free(cur.ctx, big);
}

static int64_t key_of(const RtCandidate *c, const char *name)
{
    for (uint32_t i = 0; i < c->nkeys; i++)
        if (!strcmp(c->keys[i].name, name)) return c->keys[i].value;
    fail_msg("candidate has no key %s", name);
    return -1;
}

/* The candidate of BLOCK=b, warps=w. */
static const RtCandidate *cand(int64_t b, int64_t w)
{
    for (uint32_t i = 0; i < cur.r.ncands; i++)
        if (key_of(&cur.r.cands[i], "BLOCK") == b && key_of(&cur.r.cands[i], "warps") == w)
            return &cur.r.cands[i];
    fail_msg("no candidate BLOCK=%lld warps=%lld", (long long)b, (long long)w);
    return NULL;
}

static void assert_winner(int64_t b, int64_t w)
{
    assert_true(cur.r.winner >= 0);
    const RtCandidate *c = &cur.r.cands[cur.r.winner];
    if (key_of(c, "BLOCK") != b || key_of(c, "warps") != w)
        fail_msg("winner BLOCK=%lld warps=%lld, expected %lld/%lld", (long long)key_of(c, "BLOCK"),
                 (long long)key_of(c, "warps"), (long long)b, (long long)w);
}

/* The config the mock saw launched last: its block and grid. */
static void assert_launched(int64_t b, int64_t w, int32_t n)
{
    MockLaunch l;
    mock_last(&l);
    assert_int_equal(l.block[0], (unsigned)(32 * w));
    assert_int_equal(l.grid[0], (unsigned)((n + b - 1) / b));
}

static void launch(int32_t n)
{
    TrtArg a[3];
    args_for(a, n);
    assert_ok(trt_launch(cur.k, a, 3, NULL, NULL));
}

/* ---- the tuner ---------------------------------------------------------------------- */
static void test_space_and_where_counts(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cur.r.expanded, 12);
    assert_int_equal(cur.r.where_removed, 1);
    assert_int_equal(cur.r.ncands, 11);
    assert_int_equal(cur.r.removed[RT_CAND_OK], 11);
    assert_string_equal(cur.r.key, "n=4096");
    /* The default config is a candidate of the space, index 4, and marked. */
    assert_true(cand(128, 4)->is_default);
    assert_int_equal(cand(128, 4)->index, 4);
    assert_int_equal(cand(64, 1)->index, 0);
    assert_winner(256, 2);
    assert_true(cand(256, 2)->median_ms > 0.2499 && cand(256, 2)->median_ms < 0.2501);
    assert_true(cand(64, 1)->median_ms > 0.999 && cand(64, 1)->median_ms < 1.001);
    for (uint32_t i = 0; i < cur.r.ncands; i++) {
        assert_true(cur.r.cands[i].runs >= 5);
        assert_true(cur.r.cands[i].compile_ms > 0);
    }
}

/* The median ignores an outlier: 0.1, 0.1, 5.0, 0.1, ... has median 0.1, max 5. */
static void test_median_of_runs(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=512,warps=1:0.1/0.1/5.0;BLOCK=64,warps=2:0.2", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_winner(512, 1);
    assert_true(cand(512, 1)->median_ms < 0.1001);
    assert_true(cand(512, 1)->max_ms > 4.99);
}

/* Equal times: the default config keeps its place; among equal non-defaults the lower
 * index in the space wins. */
static void test_ties_go_to_default_then_lower_index(void **state)
{
    (void)state;
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();                                   /* every config 1.0 ms */
    assert_winner(128, 4);
    rt_tune_result_free(&cur.r);
    setenv("MOCKCUDA_TIMES", "BLOCK=512,warps=1:0.5;BLOCK=128,warps=2:0.5;BLOCK=256,warps=4:0.5", 1);
    tune();
    assert_winner(128, 2);                    /* index 3, before 7 and 8 */
}

/* The same measurements give the same winner, run after run. */
static void test_deterministic(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=64,warps=1:0.7;BLOCK=256,warps=1:0.6;BLOCK=512,warps=4:0.6", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    for (int i = 0; i < 3; i++) {
        tune();
        assert_winner(256, 1);
        rt_tune_result_free(&cur.r);
    }
}

/* Each rule's exclusions are counted, with a reason: link failure, spills, registers,
 * and shared memory over the device's opt-in limit. */
static void test_exclusions_and_reasons(void **state)
{
    (void)state;
    setenv("MOCKCUDA_LINK_ERROR_CONFIG", "BLOCK=256,warps=1:1", 1);
    setenv("MOCKCUDA_SPILL_CONFIG", "BLOCK=64,warps=1:1", 1);
    setenv("MOCKCUDA_REGS", "BLOCK=512,warps=4:1000", 1);
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=1:0.1;BLOCK=64,warps=1:0.1;BLOCK=512,warps=4:0.1", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cand(256, 1)->status, RT_CAND_COMPILE);
    assert_non_null(strstr(cand(256, 1)->why, "CUDA_ERROR_INVALID_PTX"));
    assert_int_equal(cand(64, 1)->status, RT_CAND_SPILLS);
    assert_non_null(strstr(cand(64, 1)->why, "64 bytes of local memory"));
    assert_int_equal(cand(512, 4)->status, RT_CAND_REGISTERS);
    assert_non_null(strstr(cand(512, 4)->why, "1000 registers x 128 threads"));
    assert_int_equal(cur.r.removed[RT_CAND_COMPILE], 1);
    assert_int_equal(cur.r.removed[RT_CAND_SPILLS], 1);
    assert_int_equal(cur.r.removed[RT_CAND_REGISTERS], 1);
    assert_int_equal(cur.r.removed[RT_CAND_OK], 8);
    assert_winner(128, 4);                    /* the fast ones were all excluded */
    /* The pinned count comes from the kernel's state; the others from the statuses. */
    assert_int_equal(cur.r.removed[RT_CAND_PINNED], 0);
}

/* A sum over warps needs shared memory: 16 bytes per warp as the pipeline plans it. */
static const char rsum_src[] =
    "@autotune(key = [n], space = {warps: [1, 2, 4, 8]}, default = {warps: 1})\n"
    "kernel rsum(y: *f32, x: *f32, n: i32, const BLOCK: i32 = 1024)\n"
    "    grid(1)\n"
    "{\n"
    "    let offs = arange(0, BLOCK);\n"
    "    store(y, sum(load(x + offs, offs < n, other = 0.0), 0));\n"
    "}\n";

static int count_entries(const char *ext)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c '\\.%s$'", cur.dir, ext);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

/* Threads and shared memory are checked before compiling (the GPU pipeline's plan
 * against the device's limits): what they exclude never reaches the code generator. */
static void test_resources_pruned_before_compiling(void **state)
{
    (void)state;
    setenv("MOCKCUDA_MAX_THREADS", "128", 1);
    setenv("MOCKCUDA_SMEM_OPTIN", "16", 1);
    assert_ok(trt_context_create(0, TRT_MODE_MAX_AUTOTUNE, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "rsum.tile", rsum_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "rsum", NULL, 0, &cur.k));
    assert_ok(trt_mem_alloc(cur.ctx, 1024 * sizeof(float), &cur.x));
    assert_ok(trt_mem_alloc(cur.ctx, 1024 * sizeof(float), &cur.y));
    tune();
    assert_int_equal(cur.r.cands[0].status, RT_CAND_OK);        /* warps 1 */
    assert_int_equal(cur.r.cands[1].status, RT_CAND_SHARED);    /* warps 2 */
    assert_non_null(strstr(cur.r.cands[1].why, "bytes of shared memory per block; the device allows 16"));
    assert_int_equal(cur.r.cands[2].status, RT_CAND_SHARED);    /* warps 4 */
    assert_int_equal(cur.r.cands[3].status, RT_CAND_THREADS);   /* warps 8: 256 threads */
    assert_non_null(strstr(cur.r.cands[3].why, "256 threads per block; the device runs at most 128"));
    assert_int_equal(cur.r.removed[RT_CAND_SHARED], 2);
    assert_int_equal(cur.r.removed[RT_CAND_THREADS], 1);
    assert_int_equal(count_entries("ptx"), 1);                 /* only warps 1 was compiled */
}

/* The default config is the reference: it is measured even when it spills, and says so. */
static void test_spilling_default_is_kept(void **state)
{
    (void)state;
    setenv("MOCKCUDA_SPILL_CONFIG", "BLOCK=128,warps=4:1;BLOCK=64,warps=2:1", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cand(128, 4)->status, RT_CAND_OK);
    assert_non_null(strstr(cand(128, 4)->why, "kept although the assembler spills 64 bytes"));
    assert_int_equal(cand(64, 2)->status, RT_CAND_SPILLS);
    assert_winner(128, 4);
}

/* A loop that carries B floats: each thread holds B / threads of them in registers, so
 * B = 16384 on 32 threads (512 registers) is excluded before compiling; on 128 it is not. */
static const char acc_src[] =
    "@autotune(key = [n], space = {B: [1024, 16384], warps: [1, 4]}, default = {B: 1024, warps: 4})\n"
    "kernel acc(y: *f32, x: *f32, n: i32, const B: i32 = 1024) grid(1) {\n"
    "    var a = zeros([B], f32);\n"
    "    for i in range(0, n, B) {\n"
    "        let o = i + arange(0, B);\n"
    "        a = a + load(x + o, o < n, other = 0.0);\n"
    "    }\n"
    "    store(y + arange(0, B), a);\n"
    "}\n";

static void test_registers_bounded_before_compiling(void **state)
{
    (void)state;
    assert_ok(trt_context_create(0, TRT_MODE_MAX_AUTOTUNE, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "acc.tile", acc_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "acc", NULL, 0, &cur.k));
    assert_ok(trt_mem_alloc(cur.ctx, 16384 * sizeof(float), &cur.x));
    assert_ok(trt_mem_alloc(cur.ctx, 16384 * sizeof(float), &cur.y));
    tune();
    const RtCandidate *big1 = &cur.r.cands[2];                 /* B=16384 warps=1 */
    assert_int_equal(key_of(big1, "B"), 16384);
    assert_int_equal(key_of(big1, "warps"), 1);
    assert_int_equal(big1->status, RT_CAND_REGISTERS);
    assert_non_null(strstr(big1->why, "at least 512 registers per thread (of 32 threads)"));
    assert_int_equal(cur.r.cands[3].status, RT_CAND_OK);        /* B=16384 warps=4 */
    assert_int_equal(cur.r.removed[RT_CAND_REGISTERS], 1);
    assert_int_equal(count_entries("ptx"), 3);                 /* not compiled */
}

/* The caller's consts fix those keys: the other configs are not candidates. */
static void test_pinned_consts(void **state)
{
    (void)state;
    TrtConst w2 = {"warps", 2};
    setenv("MOCKCUDA_TIMES", "BLOCK=512,warps=1:0.1;BLOCK=256,warps=2:0.5", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, &w2, 1);
    tune();
    assert_int_equal(cur.r.removed[RT_CAND_PINNED], 7);
    assert_int_equal(cur.r.ncands, 4);        /* 64/2 128/2 256/2 512/2 */
    assert_true(cand(128, 2)->is_default);    /* BLOCK from the autotune default */
    assert_winner(256, 2);
    /* The count survives the cache entry. */
    size_t len;
    char *text = rt_tune_result_format(&cur.r, &len);
    RtTuneResult back;
    assert_true(rt_tune_result_parse(text, len, &back));
    assert_int_equal(back.removed[RT_CAND_PINNED], 7);
    assert_int_equal(back.expanded, 12);
    assert_int_equal(back.where_removed, 1);
    rt_tune_result_free(&back);
    tl_free(text);
}

/* A config that faults on the GPU kills only the worker: it is excluded, the configs
 * after it are still measured (in a new worker), and the caller's context works. */
static void test_fault_is_contained(void **state)
{
    (void)state;
    setenv("MOCKCUDA_FAULT_CONFIG", "BLOCK=256,warps=2:1", 1);
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.01;BLOCK=512,warps=4:0.5", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cand(256, 2)->status, RT_CAND_FAULT);
    assert_non_null(strstr(cand(256, 2)->why, "CUDA_ERROR_ILLEGAL_ADDRESS"));
    assert_int_equal(cand(512, 4)->status, RT_CAND_OK);
    assert_int_equal(cand(512, 2)->status, RT_CAND_OK);
    assert_winner(512, 4);
    assert_ok(trt_synchronize(cur.ctx));
}

/* A config that never finishes is killed after the timeout; the others are measured. */
static void test_hang_is_killed(void **state)
{
    (void)state;
    setenv("MOCKCUDA_HANG_CONFIG", "BLOCK=128,warps=1:1", 1);
    setenv("TILE_TUNE_TIMEOUT_MS", "1000", 1);
    setenv("MOCKCUDA_TIMES", "BLOCK=128,warps=1:0.01;BLOCK=64,warps=2:0.5", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cand(128, 1)->status, RT_CAND_TIMEOUT);
    assert_int_equal(cand(128, 2)->status, RT_CAND_OK);
    assert_winner(64, 2);
    assert_ok(trt_synchronize(cur.ctx));
}

/* A fast config whose outputs differ from the default config's loses. */
static void test_wrong_output_loses(void **state)
{
    (void)state;
    setenv("MOCKCUDA_WRONG_CONFIG", "BLOCK=512,warps=2:1", 1);
    setenv("MOCKCUDA_TIMES", "BLOCK=512,warps=2:0.01;BLOCK=512,warps=1:0.5", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cand(512, 2)->status, RT_CAND_WRONG);
    assert_non_null(strstr(cand(512, 2)->why, "'y'"));
    assert_winner(512, 1);
    /* The caller's buffers were not written: y is still zero (mock memory is host). */
    float y0;
    assert_ok(trt_memcpy_dtoh(cur.ctx, &y0, cur.y, sizeof y0));
    assert_true(y0 == 0.0f);
}

/* Only y is stored to: x is an input, so the comparison reads y alone. */
static void test_written_params(void **state)
{
    (void)state;
    open_kernel(TRT_MODE_DEFAULT, NULL, 0);
    assert_int_equal(rt_written_params(cur.k->func), 1);
}

/* A result survives formatting and parsing (the cache entry), every candidate's time
 * and status included; a damaged payload is refused. */
static void test_result_round_trip(void **state)
{
    (void)state;
    setenv("MOCKCUDA_SPILL_CONFIG", "BLOCK=64,warps=1:1", 1);
    setenv("MOCKCUDA_TIMES", "BLOCK=512,warps=2:0.3", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    size_t len;
    char *text = rt_tune_result_format(&cur.r, &len);
    assert_non_null(text);
    RtTuneResult back;
    assert_true(rt_tune_result_parse(text, len, &back));
    assert_int_equal(back.ncands, cur.r.ncands);
    assert_int_equal(back.winner, cur.r.winner);
    assert_string_equal(back.key, "n=4096");
    for (uint32_t i = 0; i < back.ncands; i++) {
        assert_int_equal(back.cands[i].status, cur.r.cands[i].status);
        assert_int_equal(back.cands[i].index, cur.r.cands[i].index);
        assert_true(back.cands[i].median_ms - cur.r.cands[i].median_ms < 1e-6);
        assert_int_equal(key_of(&back.cands[i], "BLOCK"), key_of(&cur.r.cands[i], "BLOCK"));
    }
    assert_string_equal(back.cands[0].why, cur.r.cands[0].why);
    rt_tune_result_free(&back);
    assert_false(rt_tune_result_parse(text, len / 2, &back));     /* cut: the winner is lost */
    text[5] = 'X';
    assert_false(rt_tune_result_parse(text, len, &back));
    tl_free(text);
}

/* ---- the modes ---------------------------------------------------------------------- */
/* default: no tuning result in the cache, so the default config; nothing benchmarks. */
static void test_default_mode_never_benchmarks(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    unsigned runs = atomic_load(&rt_tune_runs);
    open_kernel(TRT_MODE_DEFAULT, NULL, 0);
    char cfg[64];
    assert_int_equal(trt_kernel_last_config(cur.k, cfg, sizeof cfg), -1);   /* nothing launched yet */
    assert_string_equal(cfg, "");
    launch(N);
    launch(1000);
    assert_int_equal(atomic_load(&rt_tune_runs), runs);
    assert_launched(128, 4, 1000);
    assert_int_equal(trt_kernel_last_config(cur.k, cfg, sizeof cfg), (int)strlen("BLOCK=128 warps=4"));
    assert_string_equal(cfg, "BLOCK=128 warps=4");
}

/* A GEMM that gives no schedule keys: the schedule (passes/schedule.c) chose a producer
 * warpgroup and the persistent walk for the sm_90a variant that ran, and the handle's
 * config says so after the consts; a variant it chose nothing for says nothing more. */
/* A GEMM's body after its header's BN (BN_DEFAULT): the kernels of the schedule tests. */
#define GEMM_KERNEL(BN_DEFAULT)                                                                  \
    "kernel mm(c: *bf16, a: *bf16, b: *bf16, M: i32, N: i32, K: i32, const BM: i32 = 128,\n"     \
    "          const BN: i32 = " BN_DEFAULT ", const BK: i32 = 64) grid(cdiv(M, BM) * cdiv(N, BN))\n" \
    "{\n"                                                                                        \
    "    let pm = program_id(0) / cdiv(N, BN);\n"                                                \
    "    let pn = program_id(0) % cdiv(N, BN);\n"                                                \
    "    var acc = zeros([BM, BN], f32);\n"                                                      \
    "    for k in range(0, K, BK) {\n"                                                           \
    "        let x = load_block(a, [M, K], [K, 1], [pm * BM, k], [BM, BK]);\n"                   \
    "        let y = load_block(b, [K, N], [N, 1], [k, pn * BN], [BK, BN]);\n"                   \
    "        acc = dot(x, y, acc);\n"                                                            \
    "    }\n"                                                                                    \
    "    store_block(c, [M, N], [N, 1], [pm * BM, pn * BN], acc as bf16);\n"                     \
    "}\n"
static const char gemm_src[] = GEMM_KERNEL("256");

static void test_last_config_names_chosen_keys(void **state)
{
    (void)state;
    const TrtConst warps = {"warps", 8};
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "mm.tile", gemm_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "mm", &warps, 1, &cur.k));
    TrtDevicePtr a, b, c;
    assert_ok(trt_mem_alloc(cur.ctx, 256 * 256 * 2, &a));
    assert_ok(trt_mem_alloc(cur.ctx, 256 * 256 * 2, &b));
    assert_ok(trt_mem_alloc(cur.ctx, 256 * 256 * 2, &c));
    TrtArg args[6] = {trt_arg_ptr(c), trt_arg_ptr(a), trt_arg_ptr(b), trt_arg_i32(256), trt_arg_i32(256), trt_arg_i32(256)};
    assert_ok(trt_launch(cur.k, args, 6, NULL, NULL));
    char cfg[128];
    trt_kernel_last_config(cur.k, cfg, sizeof cfg);
    assert_string_equal(cfg, "warps=8 ws=1 persistent=1");
    MockLaunch l;
    mock_last(&l);
    assert_int_equal(l.block[0], 384);                   /* 8 consumer warps and the producer's 128 */
    args[5] = trt_arg_i32(250);                          /* K: the variant without TMA */
    assert_ok(trt_launch(cur.k, args, 6, NULL, NULL));
    trt_kernel_last_config(cur.k, cfg, sizeof cfg);
    assert_string_equal(cfg, "warps=8");
    trt_mem_free(cur.ctx, a);
    trt_mem_free(cur.ctx, b);
    trt_mem_free(cur.ctx, c);
}

/* The schedule's twins: a space that does not give ws and persistent has each config
 * the schedule chose them for tried also with them given 0 (runtime/rt_tune.c
 * add_twins); here the plain schedule is faster and wins, and the handle says so. */
static const char gemm_space_src[] =
    "@autotune(key = [K], space = {BM: [64, 128], warps: [8]}, default = {BM: 128, warps: 8})\n" GEMM_KERNEL("128");

static void test_schedule_twins(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BM=64,ws=0:0.25;*:1.0", 1);
    assert_ok(trt_context_create(0, TRT_MODE_MAX_AUTOTUNE, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "mm.tile", gemm_space_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "mm", NULL, 0, &cur.k));
    TrtDevicePtr a, b, c;
    assert_ok(trt_mem_alloc(cur.ctx, 256 * 256 * 2, &a));
    assert_ok(trt_mem_alloc(cur.ctx, 256 * 256 * 2, &b));
    assert_ok(trt_mem_alloc(cur.ctx, 256 * 256 * 2, &c));
    TrtArg args[6] = {trt_arg_ptr(c), trt_arg_ptr(a), trt_arg_ptr(b), trt_arg_i32(256), trt_arg_i32(256), trt_arg_i32(256)};
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    assert_ok(rt_tune_run(cur.k, args, 6, NULL, &o, &cur.r));
    assert_int_equal(cur.r.ncands, 4);                   /* BM 64 and 128, and a twin of each */
    char cfg[128];
    rt_tune_candidate_text(&cur.r.cands[2], cfg, sizeof cfg);
    assert_string_equal(cfg, "BM=64 warps=8 ws=0 persistent=0");
    assert_int_equal(cur.r.cands[2].index, 2 + 1 + 0);   /* past the space's 2 configs */
    assert_int_equal(cur.r.cands[2].threads, 256);       /* no producer warpgroup */
    assert_int_equal(cur.r.cands[0].threads, 384);
    rt_tune_candidate_text(&cur.r.cands[cur.r.winner], cfg, sizeof cfg);
    assert_string_equal(cfg, "BM=64 warps=8 ws=0 persistent=0");
    rt_tune_result_free(&cur.r);
    assert_ok(trt_launch(cur.k, args, 6, NULL, NULL));  /* max-autotune: tunes, runs the winner */
    trt_kernel_last_config(cur.k, cfg, sizeof cfg);
    assert_string_equal(cfg, "BM=64 warps=8 ws=0 persistent=0");
    trt_mem_free(cur.ctx, a);
    trt_mem_free(cur.ctx, b);
    trt_mem_free(cur.ctx, c);
}

/* max-autotune tunes a key once, on its first launch, and each new key once. */
static void test_max_autotune_once_per_key(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    unsigned runs = atomic_load(&rt_tune_runs);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    launch(N);
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 1);
    assert_launched(256, 2, N);
    char cfg[64];                             /* the tuned config, as the handle reports it */
    trt_kernel_last_config(cur.k, cfg, sizeof cfg);
    assert_string_equal(cfg, "BLOCK=256 warps=2");
    assert_int_equal(trt_kernel_last_config(cur.k, cfg, 6), (int)strlen("BLOCK=256 warps=2"));
    assert_string_equal(cfg, "BLOCK");       /* truncated like snprintf */
    launch(N);
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 1);
    launch(2048);                             /* a new key */
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 2);
    assert_launched(256, 2, 2048);
    launch(N);
    launch(2048);
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 2);
}

/* Run in a child: a new process, default mode, the same cache: the tuned winner. */
static int child_reuses(void)
{
    unsigned runs = atomic_load(&rt_tune_runs);
    open_kernel(TRT_MODE_DEFAULT, NULL, 0);
    launch(N);
    MockLaunch l;
    mock_last(&l);
    int ok = atomic_load(&rt_tune_runs) == runs && l.block[0] == 64 && l.grid[0] == N / 256;
    close_all();
    return ok ? 0 : 1;
}

/* The winner is persisted: a later context (max-autotune: no tuning again) and a later
 * process in default mode use it without benchmarking. */
static void test_winner_persisted_and_reused(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    unsigned runs = atomic_load(&rt_tune_runs);
    launch(N);
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 1);
    close_all();
    unsetenv("MOCKCUDA_TIMES");               /* a re-tune would now pick the default */
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    launch(N);
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 1);
    assert_launched(256, 2, N);
    close_all();
    pid_t pid = fork();
    if (pid == 0) _exit(child_reuses());
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* Two processes that miss the same key at once tune it once: the cache's per-key lock
 * makes the second wait and read the first's result. Each child exits with the number
 * of tunings it ran (and 100 if it launched the wrong config). */
static int child_tunes(void)
{
    unsigned runs = atomic_load(&rt_tune_runs);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    launch(N);
    MockLaunch l;
    mock_last(&l);
    int ran = (int)(atomic_load(&rt_tune_runs) - runs);
    int wrong = l.block[0] != 64 || l.grid[0] != N / 256;
    close_all();
    return wrong ? 100 : ran;
}

static void test_two_processes_tune_once(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    pid_t a = fork();
    if (a == 0) _exit(child_tunes());
    pid_t b = fork();
    if (b == 0) _exit(child_tunes());
    int sa, sb;
    assert_int_equal(waitpid(a, &sa, 0), a);
    assert_int_equal(waitpid(b, &sb, 0), b);
    assert_true(WIFEXITED(sa) && WIFEXITED(sb));
    assert_int_equal(WEXITSTATUS(sa) + WEXITSTATUS(sb), 1);
}

/* Threads launching a new key at once: one tunes, the others wait for its choice. */
static void *launch_thread(void *p)
{
    TrtArg a[3];
    args_for(a, N);
    *(TrtStatus *)p = trt_launch(cur.k, a, 3, NULL, NULL);
    return NULL;
}

static void test_threads_tune_once(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    unsigned runs = atomic_load(&rt_tune_runs);
    pthread_t th[4];
    TrtStatus st[4];
    for (int i = 0; i < 4; i++) assert_int_equal(pthread_create(&th[i], NULL, launch_thread, &st[i]), 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 4; i++) assert_int_equal(st[i], TRT_SUCCESS);
    assert_int_equal(atomic_load(&rt_tune_runs), runs + 1);
    assert_launched(256, 2, N);
}

/* TILE_TUNE_MAX_CONFIGS keeps the first N configs, and the default config. */
static void test_max_configs(void **state)
{
    (void)state;
    setenv("TILE_TUNE_MAX_CONFIGS", "3", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    tune();
    assert_int_equal(cur.r.ncands, 4);
    assert_int_equal(cur.r.cands[2].index, 2);
    assert_true(cur.r.cands[3].is_default);
    assert_int_equal(cur.r.cands[3].index, 4);
}

/* TILE_LOG_RECOMPILES says which config runs and why. */
static void test_log_says_why(void **state)
{
    (void)state;
    setenv("MOCKCUDA_TIMES", "BLOCK=256,warps=2:0.25", 1);
    char path[300];
    snprintf(path, sizeof path, "%s/log", cur.dir);
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    dup2(fileno(f), 2);
    open_kernel(TRT_MODE_DEFAULT, NULL, 0);
    assert_ok(trt_context_set_flags(cur.ctx, TRT_FLAG_LOG_RECOMPILES));
    launch(N);                                /* default: nothing cached */
    close_all();
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    assert_ok(trt_context_set_flags(cur.ctx, TRT_FLAG_LOG_RECOMPILES));
    launch(N);                                /* tuned now */
    close_all();
    open_kernel(TRT_MODE_DEFAULT, NULL, 0);
    assert_ok(trt_context_set_flags(cur.ctx, TRT_FLAG_LOG_RECOMPILES));
    launch(N);                                /* from the cache */
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    char text[8192] = "";
    f = fopen(path, "r");
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    assert_non_null(strstr(text, "kernel 'scale' n=4096: default config (no tuning result in the cache)"));
    assert_non_null(strstr(text, "kernel 'scale' n=4096: config BLOCK=256 warps=2 (tuned now: 0.2500 ms against 1.0000 ms for the default"));
    assert_non_null(strstr(text, "kernel 'scale' n=4096: config BLOCK=256 warps=2 (from the cache"));
    assert_non_null(strstr(text, "space 12 configs; removed: where 1, duplicates 0, pinned by the caller 0\n"));
}

/* No worker to be found: max-autotune says so once and runs the default config. */
static void test_missing_worker_falls_back(void **state)
{
    (void)state;
    char *saved = strdup(getenv("TILE_TUNE_WORKER"));
    setenv("TILE_TUNE_WORKER", "/nonexistent/tile-tune-worker", 1);
    open_kernel(TRT_MODE_MAX_AUTOTUNE, NULL, 0);
    TrtArg a[3];
    args_for(a, N);
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    TrtStatus s = rt_tune_run(cur.k, a, 3, NULL, &o, &cur.r);
    setenv("TILE_TUNE_WORKER", saved, 1);
    free(saved);
    assert_int_not_equal(s, TRT_SUCCESS);
    assert_non_null(strstr(trt_last_error(), "/nonexistent/tile-tune-worker"));
}

/* A kernel that copies by TMA, tuned with arguments its class admits but no tensor map
 * takes (A read bottom-up: a negative row stride, a multiple of 16): the candidates are
 * compiled again for the class a launch falls back to (cp.async), and the tuning runs
 * instead of failing at the worker's first launch. */
static const char tma_src[] =
    "@autotune(key = [K], space = {BM: [64, 128], warps: [4, 8]}, default = {BM: 64, warps: 4})\n"
    "kernel mm(c: *f32, a: *bf16, b: *bf16, K: i32, sa: i32, const BM: i32 = 64)\n"
    "    grid(1)\n"
    "{\n"
    "    var acc = zeros([BM, 64], f32);\n"
    "    for k in range(0, K, 32) {\n"
    "        acc = dot(load_block(a, [BM, K], [sa, 1], [0, k], [BM, 32]),\n"
    "                  load_block(b, [K, 64], [64, 1], [k, 0], [32, 64]), acc);\n"
    "    }\n"
    "    store(c + arange(0, BM)[:, None] * 64 + arange(0, 64)[None, :], acc);\n"
    "}\n";

static void test_tma_refused_args_retune_without_tma(void **state)
{
    (void)state;
    assert_ok(trt_context_create(0, TRT_MODE_MAX_AUTOTUNE, cur.dir, &cur.ctx));
    assert_ok(trt_module_load_string(cur.ctx, "mm.tile", tma_src, &cur.mod));
    assert_ok(trt_module_get_kernel(cur.mod, "mm", NULL, 0, &cur.k));
    enum { K = 64 };
    assert_ok(trt_mem_alloc(cur.ctx, 128 * 64 * sizeof(float), &cur.y));
    assert_ok(trt_mem_alloc(cur.ctx, 128 * K * 2 + 64 * K * 2, &cur.x));
    TrtArg a[5] = {trt_arg_ptr(cur.y), trt_arg_ptr(cur.x + 127 * K * 2), trt_arg_ptr(cur.x + 128 * K * 2),
                   trt_arg_i32(K), trt_arg_i32(-K)};
    RtTuneOptions o;
    rt_tune_options_from_env(&o);
    assert_ok(rt_tune_run(cur.k, a, 5, NULL, &o, &cur.r));
    assert_true(cur.r.winner >= 0);
    for (uint32_t i = 0; i < cur.r.ncands; i++) {
        assert_int_equal(cur.r.cands[i].status, RT_CAND_OK);
        assert_null(strstr(cur.r.cands[i].why, "TMA"));
    }
    /* the same kernel with a stride a map takes keeps its TMA variants: no candidate dropped */
    rt_tune_result_free(&cur.r);
    memset(&cur.r, 0, sizeof cur.r);
    a[1] = trt_arg_ptr(cur.x);
    a[4] = trt_arg_i32(K);
    assert_ok(rt_tune_run(cur.k, a, 5, NULL, &o, &cur.r));
    for (uint32_t i = 0; i < cur.r.ncands; i++) assert_int_equal(cur.r.cands[i].status, RT_CAND_OK);
}

int main(void)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 0);
    setenv("TILE_TUNE_WORKER", TUNE_WORKER_PATH, 0);
    setenv("TILE_TUNE_MIN_RUNS", "5", 1);
    setenv("TILE_TUNE_MAX_RUNS", "20", 1);
    setenv("TILE_TUNE_WARMUP", "1", 1);
    setenv("TILE_TUNE_JOBS", "2", 1);
    unsetenv("TILE_LOG_RECOMPILES");
    void *h = dlopen(getenv("TILE_CUDA_LIBRARY"), RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cannot open the mock driver: %s\n", dlerror());
        return 1;
    }
    mock_last = (MockLastLaunchFn)dlsym(h, "mockcuda_last_launch");
    mock_reset = (MockResetFn)dlsym(h, "mockcuda_reset");
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_space_and_where_counts), T(test_median_of_runs),
        T(test_ties_go_to_default_then_lower_index), T(test_deterministic),
        T(test_exclusions_and_reasons), T(test_resources_pruned_before_compiling), T(test_spilling_default_is_kept), T(test_registers_bounded_before_compiling), T(test_pinned_consts), T(test_fault_is_contained),
        T(test_hang_is_killed), T(test_wrong_output_loses), T(test_written_params),
        T(test_result_round_trip), T(test_default_mode_never_benchmarks), T(test_last_config_names_chosen_keys), T(test_schedule_twins),
        T(test_max_autotune_once_per_key), T(test_winner_persisted_and_reused),
        T(test_two_processes_tune_once), T(test_threads_tune_once), T(test_max_configs),
        T(test_copies_only_the_given_bytes),
        T(test_log_says_why), T(test_missing_worker_falls_back), T(test_tma_refused_args_retune_without_tma),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
