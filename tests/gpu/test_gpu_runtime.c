/* libtileRT on a real GPU: hand-written PTX through the runtime's module path.
 *
 * Skips with exit status 77 where there is no driver or no device (CI). On a GPU it
 * loads add_one through rt_module_load_ptx with a fresh cache directory, launches it on
 * a poisoned buffer with two argument classes (n divisible by 16, n == 1), checks every
 * element, and then starts itself again (--warm DIR) twice to time the first launch of
 * a cached kernel in a new process (DESIGN.md section 4: about a millisecond). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kernels.h"
#include "rt_internal.h"

#define SKIP 77

static const IrElem add_one_params[] = {IR_PTR, IR_U32};
static const char *const add_one_names[] = {"x", "n"};
static const RtPtxKernel add_one = {"add_one", add_one_params, add_one_names, 2, 128};

static int failures;

#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            failures++;                                                   \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);          \
            fprintf(stderr, __VA_ARGS__);                                 \
            fputc('\n', stderr);                                          \
        }                                                                 \
    } while (0)

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static TrtKernel *load(TrtContext *ctx, TrtModule **m)
{
    TrtKernel *k = NULL;
    TrtStatus s = rt_module_load_ptx(ctx, gpu_test_ptx, &add_one, 1, m);
    if (!s) s = trt_module_get_kernel(*m, "add_one", NULL, 0, &k);
    CHECK(!s, "loading add_one: %s", trt_last_error());
    return k;
}

/* Launches add_one on the first n of `count` elements poisoned with -7 + i. */
static void run_add_one(TrtContext *ctx, TrtKernel *k, uint32_t n, uint32_t count)
{
    const RtDriver *d = ctx->drv;
    float *h = malloc(count * sizeof *h);
    for (uint32_t i = 0; i < count; i++) h[i] = -7.0f + (float)i;
    CUdeviceptr x = 0;
    CHECK(!d->cuMemAlloc(&x, count * sizeof *h), "cuMemAlloc");
    CHECK(!d->cuMemcpyHtoD(x, h, count * sizeof *h), "cuMemcpyHtoD");
    TrtArg args[2] = {trt_arg_ptr(x), trt_arg_u32(n)};
    uint32_t grid[3] = {(n + 127) / 128, 1, 1};
    TrtStatus s = trt_launch(k, args, 2, grid, NULL);
    CHECK(!s, "trt_launch(n=%u): %s", n, trt_last_error());
    CHECK(!d->cuCtxSynchronize(), "cuCtxSynchronize after add_one");
    CHECK(!d->cuMemcpyDtoH(h, x, count * sizeof *h), "cuMemcpyDtoH");
    int bad = 0;
    for (uint32_t i = 0; i < count; i++) {
        float want = -7.0f + (float)i + (i < n ? 1.0f : 0.0f);
        if (h[i] != want && bad++ < 5) CHECK(0, "n=%u: x[%u] = %g, want %g", n, i, h[i], want);
    }
    d->cuMemFree(x);
    free(h);
}

static int warm_child(const char *dir)
{
    double t0 = now_ms();
    TrtContext *ctx = NULL;
    if (trt_context_create(0, TRT_MODE_DEFAULT, dir, &ctx)) return 1;
    double t1 = now_ms();
    TrtModule *m = NULL;
    TrtKernel *k = load(ctx, &m);
    if (k) run_add_one(ctx, k, 4096, 4096);
    double t2 = now_ms();
    printf("first launch in a new process: %.3f ms (context %.3f ms, load + launch + check %.3f ms)\n",
           t2 - t0, t1 - t0, t2 - t1);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    return failures != 0;
}

static void time_warm_starts(const char *dir)
{
    for (int i = 0; i < 2; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", "test_gpu_runtime", "--warm", dir, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the warm-start process failed");
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--warm")) return warm_child(argv[2]);
    TrtContext *ctx = NULL;
    char dir[] = "/tmp/tile-gpu-cache-XXXXXX";
    if (!mkdtemp(dir)) return 1;
    TrtStatus s = trt_context_create(0, TRT_MODE_DEFAULT, dir, &ctx);
    if (s == TRT_ERROR_NO_DRIVER || s == TRT_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", trt_last_error());
        return SKIP;
    }
    CHECK(!s, "trt_context_create: %s", trt_last_error());
    if (s) return 1;
    char name[128] = "?";
    ctx->drv->cuDeviceGetName(name, sizeof name, ctx->dev);
    printf("device: %s (sm_%d%d), driver %d\n", name, ctx->cc_major, ctx->cc_minor, ctx->drv->version);
    TrtModule *m = NULL;
    TrtKernel *k = load(ctx, &m);
    if (k) {
        double t0 = now_ms();
        run_add_one(ctx, k, 1000 * 16, 1000 * 16 + 100);
        printf("cold first launch (PTX linked by the driver): %.3f ms\n", now_ms() - t0);
        run_add_one(ctx, k, 1, 300);
        run_add_one(ctx, k, 1000, 1000);
        CHECK(trt_kernel_num_variants(k) == 3, "%u variants, want 3", trt_kernel_num_variants(k));
    }
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    time_warm_starts(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) failures++;
    printf("%s\n", failures ? "FAILED" : "1 passed, 0 failed");
    return failures != 0;
}
