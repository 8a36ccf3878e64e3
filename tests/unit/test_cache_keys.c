/* What the cache serves (docs/CACHE.md): only code this compiler, with these settings,
 * built. libtileRT against the mock driver (tests/mock), compiling vector_add for real
 * through libtileCG.so:
 * - every knob of ir/knobs.def is in the keys: a setting other than the default never
 *   shares an entry, whether set through the API or its environment variable;
 * - a code generator of another build (tests/mock/cg_other.c: the same library with a
 *   changed output and so another identity) never shares an entry either way;
 * - a required cache (TRT_CACHE_REQUIRE, TILE_CACHE_MODE=require) never compiles: a
 *   miss fails naming the kernel, its variant and its keys; require-cubin never links.
 * Cases that need a fresh code generator state run in a child process. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ir/knobs.h"
#include "rt_internal.h"
#include "tests/unit/rt_test.h"

static char dir[256];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tile-keys-test-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

/* The entries of kind `ext` ("ptx", "cubin") in the cache. */
static int entries(const char *ext)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *dot = strrchr(e->d_name, '.');
        n += dot && !strcmp(dot + 1, ext);
    }
    if (d) closedir(d);
    return n;
}

/* Removes every entry of kind `ext`. */
static void remove_entries(const char *ext)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -f %s/*.%s", dir, ext);
    assert_int_equal(system(cmd), 0);
}

/* Launches vector_add (BLOCK 1024) on c; its status. */
static TrtStatus launch_on(TrtContext *c)
{
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(64)};
    TrtStatus s = trt_module_load_string(c, "va.tile", vector_add_src, &m);
    if (!s) s = trt_module_get_kernel(m, "vector_add", NULL, 0, &k);
    if (!s) s = trt_launch(k, a, 4, NULL, NULL);
    trt_module_destroy(m);
    return s;
}

/* A context on the test's cache with knob name = value (NULL: none set). */
static TrtContext *context_with(const char *name, const char *value)
{
    TrtContext *c = NULL;
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, dir, &c));
    if (name) assert_ok(trt_context_set_knob(c, name, value));
    return c;
}

static TrtStatus launch_with(const char *name, const char *value)
{
    TrtContext *c = context_with(name, value);
    TrtStatus s = launch_on(c);
    trt_context_destroy(c);
    return s;
}

/* ---- knobs ------------------------------------------------------------------------- */
typedef struct KnobCase {
    const char *name, *env;
    int def, other;              /* a value other than the default */
} KnobCase;

static const KnobCase knobs[] = {
#define TILE_KNOB(name, env, def, min, max, words, doc) {#name, env, def, (def) == (max) ? (min) : (max)},
#include "ir/knobs.def"
#undef TILE_KNOB
};
enum { NKNOBS = sizeof knobs / sizeof *knobs };

static void test_each_knob_has_its_own_entries(void **state)
{
    (void)state;
    assert_ok(launch_with(NULL, NULL));
    assert_int_equal(entries("ptx"), 1);
    for (int i = 0; i < NKNOBS; i++) {
        char v[16];
        snprintf(v, sizeof v, "%d", knobs[i].other);
        assert_ok(launch_with(knobs[i].name, v));
        if (entries("ptx") != 2 + i) fail_msg("knob %s=%s was served another setting's entry", knobs[i].name, v);
        assert_ok(launch_with(knobs[i].name, v));   /* and its own entry serves it again */
        assert_int_equal(entries("ptx"), 2 + i);
    }
    assert_ok(launch_with(NULL, NULL));   /* the defaults' entry is still theirs */
    assert_int_equal(entries("ptx"), 1 + NKNOBS);
}

/* The environment's TILE_SINK=0 is the API's sink = 0: the same entry. */
static void test_knob_from_environment_is_the_same_setting(void **state)
{
    (void)state;
    assert_ok(launch_with("sink", "0"));
    assert_int_equal(entries("ptx"), 1);
    setenv("TILE_SINK", "0", 1);
    TrtContext *c = context_with(NULL, NULL);
    unsetenv("TILE_SINK");
    assert_ok(launch_on(c));
    trt_context_destroy(c);
    assert_int_equal(entries("ptx"), 1);
    assert_ok(launch_with(NULL, NULL));
    assert_int_equal(entries("ptx"), 2);
}

static void test_knob_errors(void **state)
{
    (void)state;
    TrtContext *c = context_with(NULL, NULL);
    assert_int_equal(trt_context_set_knob(c, "snk", "0"), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "no knob is named 'snk' (knobs: tma, tma_early"));
    assert_int_equal(trt_context_set_knob(c, "sink", "2"), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "knob sink is '2'; it takes an integer from 0 to 1"));
    assert_int_equal(trt_context_set_knob(c, "tma_release", "fence"), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "or one of mbarrier,barrier"));
    assert_ok(trt_context_set_knob(c, "tma_release", "barrier"));
    TrtModule *m = NULL;
    assert_ok(trt_module_load_string(c, "va.tile", vector_add_src, &m));
    assert_int_equal(trt_context_set_knob(c, "sink", "0"), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "after a module was loaded"));
    trt_module_destroy(m);
    trt_context_destroy(c);
    setenv("TILE_WGMMA", "yes", 1);
    c = (TrtContext *)&c;
    assert_int_equal(trt_context_create(0, TRT_MODE_DEFAULT, dir, &c), TRT_ERROR_INVALID_ARGUMENT);
    unsetenv("TILE_WGMMA");
    assert_null(c);
    assert_non_null(strstr(trt_last_error(), "TILE_WGMMA is 'yes'; it takes an integer from 0 to 1"));
}

/* ---- specialization classes ------------------------------------------------------- */
/* Launches vector_add with n on the test's cache. */
static TrtStatus launch_n(int32_t n)
{
    TrtContext *c = context_with(NULL, NULL);
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtArg a[4] = {trt_arg_ptr(0x1000), trt_arg_ptr(0x2000), trt_arg_ptr(0x3000), trt_arg_i32(n)};
    TrtStatus s = trt_module_load_string(c, "va.tile", vector_add_src, &m);
    if (!s) s = trt_module_get_kernel(m, "vector_add", NULL, 0, &k);
    if (!s) s = trt_launch(k, a, 4, NULL, NULL);
    trt_module_destroy(m);
    trt_context_destroy(c);
    return s;
}

/* The class is part of the variant's keys: n = 4072 (divisible by 8, not 16) gets its
 * own entry, with 16-byte vectors (f32: 8 elements are 32 bytes), served again to 4088;
 * n = 4071 (no class) its own, without them; 4096 (divisible by 16) and 1 theirs. */
static void test_each_class_has_its_own_entries(void **state)
{
    (void)state;
    char cmd[400];
    assert_ok(launch_n(4072));
    assert_int_equal(entries("ptx"), 1);
    snprintf(cmd, sizeof cmd, "grep -q 'ld.global.v4' %s/*.ptx", dir);
    assert_int_equal(system(cmd), 0);
    assert_ok(launch_n(4088));
    assert_int_equal(entries("ptx"), 1);
    assert_ok(launch_n(4071));
    assert_int_equal(entries("ptx"), 2);
    snprintf(cmd, sizeof cmd, "grep -L 'ld.global.v4' %s/*.ptx | wc -l | grep -qx 1", dir);
    assert_int_equal(system(cmd), 0);
    assert_ok(launch_n(4096));
    assert_ok(launch_n(1));
    assert_int_equal(entries("ptx"), 4);
    assert_ok(launch_n(-8));   /* a multiple of 8: 4072's class */
    assert_int_equal(entries("ptx"), 4);
}

/* ---- another build's code generator ----------------------------------------------- */
/* The child (main's --child-other): TILE_CODEGEN_LIBRARY names libtileCG_other. Its
 * launch must compile (the parent's entry is another build's) and store an entry whose
 * PTX is its own; a second launch is served that entry. Exit 0 if so. */
static int child_other(void)
{
    if (!strstr(trt_compiler_id(), "other+")) return 1;
    if (entries("ptx") != 1 || launch_with(NULL, NULL) || entries("ptx") != 2) return 2;
    if (launch_with(NULL, NULL) || entries("ptx") != 2) return 3;
    char cmd[400];
    snprintf(cmd, sizeof cmd, "grep -l 'emitted by the other build' %s/*.ptx | wc -l | grep -qx 1", dir);
    return system(cmd) ? 4 : 0;
}

static void test_other_build_never_shares_entries(void **state)
{
    (void)state;
    assert_ok(launch_with(NULL, NULL));
    assert_int_equal(entries("ptx"), 1);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TILE_OTHER_CODEGEN", TILECG_PATH, 1);
        setenv("TILE_CODEGEN_LIBRARY", TILECG_OTHER_PATH, 1);
        execl("/proc/self/exe", "test_cache_keys", "--child-other", dir, (char *)NULL);
        _exit(100);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_int_equal(WIFEXITED(st) ? WEXITSTATUS(st) : 101, 0);
    assert_ok(launch_with(NULL, NULL));   /* this build is still served its own */
    assert_int_equal(entries("ptx"), 2);
}

/* ---- the tuner's resource model --------------------------------------------------------- */
/* The child (main's --child-resources): no code generator can be loaded, yet the
 * tuner's resource model (rt_kernel_resources) answers from the GPU passes' plan alone:
 * a matmul config's threads (a producer warpgroup too) and shared memory. Exit 0 if so. */
static const char mm_src[] =
    "kernel mm(c: *bf16, a: *bf16, b: *bf16, M: i32, N: i32, K: i32, const BM: i32 = 128,\n"
    "          const BN: i32 = 128, const BK: i32 = 64) grid(cdiv(M, BM), cdiv(N, BN))\n"
    "{\n"
    "    var acc = zeros([BM, BN], f32);\n"
    "    for k in range(0, K, BK) {\n"
    "        let x = load_block(a, [M, K], [K, 1], [program_id(0) * BM, k], [BM, BK]);\n"
    "        let y = load_block(b, [K, N], [N, 1], [k, program_id(1) * BN], [BK, BN]);\n"
    "        acc = dot(x, y, acc);\n"
    "    }\n"
    "    store_block(c, [M, N], [N, 1], [program_id(0) * BM, program_id(1) * BN], acc as bf16);\n"
    "}\n";

static int child_resources(void)
{
    TrtContext *c = NULL;
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtConst keys[2] = {{"ws", 1}, {"pingpong", 0}};   /* pingpong given: not chosen (passes/schedule.c) */
    uint32_t threads = 0, shared = 0, regs = 0;
    if (trt_context_create(0, TRT_MODE_DEFAULT, "", &c) || trt_module_load_string(c, "mm.tile", mm_src, &m) ||
        trt_module_get_kernel(m, "mm", keys, 2, &k))
        return fprintf(stderr, "%s\n", trt_last_error()), 1;
    uint64_t mask = 0;
    for (int i = 0; i < 6; i++) mask |= (uint64_t)RT_SPEC_DIV16 << (2 * i);   /* aligned, multiples of 16 */
    TrtStatus s = rt_kernel_resources(k, mask, &threads, &shared, &regs);
    if (s) return fprintf(stderr, "%s: %s\n", trt_status_name(s), trt_last_error()), 2;
    /* 4 consumer warps and the producer warpgroup; a ring of at least 2 stages of A and B */
    if (threads != 256 || shared < 2 * (128 * 64 + 64 * 128) * 2) return fprintf(stderr, "%u %u\n", threads, shared), 3;
    /* a ragged GEMM, 4096 x 4136 x 4072: N and K divisible by 8, not 16, so their bf16
     * rows are 16 bytes apart and the variant of their class copies by TMA, as div16's */
    TrtArg a[6] = {trt_arg_ptr(0x10000), trt_arg_ptr(0x20000), trt_arg_ptr(0x30000), trt_arg_i32(4096),
                   trt_arg_i32(4136), trt_arg_i32(4072)};
    mask = rt_class_mask(k, a);
    if ((mask >> 6 & 3) != RT_SPEC_DIV16 || (mask >> 8 & 3) != RT_SPEC_DIV8 || (mask >> 10 & 3) != RT_SPEC_DIV8)
        return fprintf(stderr, "mask 0x%llx\n", (unsigned long long)mask), 4;
    if (strcmp(rt_spec_class_name(k, 5, mask), "divisible by 8, not 16") ||
        strcmp(rt_spec_class_name(k, 3, mask), "divisible by 16") ||
        strcmp(rt_spec_class_name(k, 5, 0), "not 1 nor divisible by 8"))
        return 5;
    threads = 0;
    if ((s = rt_kernel_resources(k, mask, &threads, &shared, &regs)) || threads != 256) return 6;
    /* K = 4076, a multiple of 4 only: no TMA, so no producer warpgroup */
    a[5] = trt_arg_i32(4076);
    mask = rt_class_mask(k, a);
    if ((mask >> 10 & 3) != RT_SPEC_NONE) return 7;
    if ((s = rt_kernel_resources(k, mask, &threads, &shared, &regs)) || threads != 128)
        return fprintf(stderr, "%u threads\n", threads), 8;
    trt_module_destroy(m);
    trt_context_destroy(c);
    return 0;
}

static void test_resources_without_code_generator(void **state)
{
    (void)state;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TILE_CODEGEN_LIBRARY", "/nonexistent/libtileCG.so", 1);
        execl("/proc/self/exe", "test_cache_keys", "--child-resources", (char *)NULL);
        _exit(100);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    assert_int_equal(WIFEXITED(st) ? WEXITSTATUS(st) : 101, 0);
}

/* ---- a required cache ---------------------------------------------------------------- */
static TrtStatus launch_required(TrtCacheMode mode)
{
    TrtContext *c = context_with(NULL, NULL);
    assert_ok(trt_context_set_cache_mode(c, mode));
    assert_int_equal(trt_context_cache_mode(c), mode);
    TrtStatus s = launch_on(c);
    trt_context_destroy(c);
    return s;
}

static void test_required_cache_never_compiles(void **state)
{
    (void)state;
    assert_int_equal(launch_required(TRT_CACHE_REQUIRE), TRT_ERROR_CACHE_MISS);
    const char *e = trt_last_error();
    assert_non_null(strstr(e, "kernel 'vector_add' (variant: BLOCK=1024 warps=4 stages=2 specialization 0x"));
    assert_non_null(strstr(e, "is not in the cache (PTX key "));
    assert_non_null(strstr(e, ", cubin key "));
    assert_non_null(strstr(e, "the cache mode require forbids compiling it"));
    assert_int_equal(entries("ptx") + entries("cubin"), 0);
    assert_ok(launch_with(NULL, NULL));            /* warmed in the default mode */
    assert_ok(launch_required(TRT_CACHE_REQUIRE));
    assert_ok(launch_required(TRT_CACHE_REQUIRE_CUBIN));
    remove_entries("cubin");                       /* as on a machine with another driver */
    assert_int_equal(launch_required(TRT_CACHE_REQUIRE_CUBIN), TRT_ERROR_CACHE_MISS);
    assert_non_null(strstr(trt_last_error(), "the cache mode require-cubin forbids linking it"));
    assert_ok(launch_required(TRT_CACHE_REQUIRE));   /* links the cached PTX */
    assert_int_equal(entries("cubin"), 1);
}

static void test_required_cache_settings(void **state)
{
    (void)state;
    TrtContext *c = NULL;
    setenv("TILE_CACHE_MODE", "require", 1);
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, dir, &c));
    assert_int_equal(trt_context_cache_mode(c), TRT_CACHE_REQUIRE);
    assert_int_equal(launch_on(c), TRT_ERROR_CACHE_MISS);
    trt_context_destroy(c);
    c = (TrtContext *)&c;
    assert_int_equal(trt_context_create(0, TRT_MODE_DEFAULT, "", &c), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "TILE_CACHE_MODE=require needs a disk cache"));
    setenv("TILE_CACHE_MODE", "must", 1);
    assert_int_equal(trt_context_create(0, TRT_MODE_DEFAULT, dir, &c), TRT_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(trt_last_error(), "TILE_CACHE_MODE is 'must'; expected default, require or require-cubin"));
    unsetenv("TILE_CACHE_MODE");
    assert_ok(trt_context_create(0, TRT_MODE_DEFAULT, "", &c));
    assert_int_equal(trt_context_set_cache_mode(c, TRT_CACHE_REQUIRE), TRT_ERROR_INVALID_ARGUMENT);
    assert_int_equal(trt_context_set_cache_mode(c, (TrtCacheMode)7), TRT_ERROR_INVALID_ARGUMENT);
    trt_context_destroy(c);
}

/* ---- packs (tilec cache export / import) ------------------------------------------- */
/* A pack whose frame is sound (its checksum recomputed) but one of whose entries was
 * changed imports nothing, not even the entries before the bad one. */
static void test_pack_with_a_bad_entry_imports_nothing(void **state)
{
    (void)state;
    RtCache *c = NULL;
    char src[300], dst[300], pack[300], paths[2][400];
    snprintf(src, sizeof src, "%s/src", dir);
    snprintf(dst, sizeof dst, "%s/dst", dir);
    snprintf(pack, sizeof pack, "%s/p.pack", dir);
    assert_ok(rt_cache_open(src, 0, &c));
    RtKey k1 = rt_hash_buf("one", 3), k2 = rt_hash_buf("two", 3);
    assert_ok(rt_cache_put(c, RT_ENTRY_TUNE, &k1, "tile-tune 1\nkernel a\n", 20));
    assert_ok(rt_cache_put(c, RT_ENTRY_TUNE, &k2, "tile-tune 1\nkernel b\n", 20));
    rt_cache_close(c);
    for (int i = 0; i < 2; i++) {
        char hex[33];
        rt_key_hex(i ? &k2 : &k1, hex);
        snprintf(paths[i], sizeof paths[i], "%s/%s.tune", src, hex);
    }
    const char *list[2] = {paths[0], paths[1]};
    assert_ok(rt_pack_write(list, 2, pack));
    RtPackInfo r;
    assert_ok(rt_pack_read(NULL, pack, &r));
    assert_int_equal(r.entries, 2);
    assert_int_equal(r.count[RT_ENTRY_TUNE], 2);
    assert_string_equal(r.compiler, trt_compiler_id());
    FILE *f = fopen(pack, "rb");
    uint8_t buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    buf[n - 16 - 3] ^= 1;                       /* the last entry's payload */
    RtKey sum = rt_hash_buf(buf, n - 16);
    memcpy(buf + n - 16, sum.b, 16);
    f = fopen(pack, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    assert_ok(rt_cache_open(dst, 0, &c));
    assert_int_equal(rt_pack_read(c, pack, &r), TRT_ERROR_CACHE_IO);
    assert_non_null(strstr(trt_last_error(), "entry 2 of 2 is bad: checksum mismatch"));
    RtBlob b;
    assert_int_equal(rt_cache_get(c, RT_ENTRY_TUNE, &k1, &b), RT_GET_MISS);
    rt_cache_close(c);
}

int main(int argc, char **argv)
{
    setenv("TILE_CUDA_LIBRARY", MOCKCUDA_PATH, 0);
    setenv("TILE_CODEGEN_LIBRARY", TILECG_PATH, 0);
    unsetenv("TILE_LOG_RECOMPILES");
    unsetenv("TILE_CACHE_MODE");
    for (int i = 0; i < NKNOBS; i++) unsetenv(knobs[i].env);
    if (argc == 2 && !strcmp(argv[1], "--child-resources")) return child_resources();
    if (argc == 3 && !strcmp(argv[1], "--child-other")) {
        snprintf(dir, sizeof dir, "%s", argv[2]);
        return child_other();
    }
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_each_knob_has_its_own_entries), T(test_knob_from_environment_is_the_same_setting),
        T(test_knob_errors), T(test_other_build_never_shares_entries),
        T(test_required_cache_never_compiles), T(test_required_cache_settings),
        T(test_pack_with_a_bad_entry_imports_nothing), T(test_resources_without_code_generator),
        T(test_each_class_has_its_own_entries),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
