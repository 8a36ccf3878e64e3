/* launch_overhead: host time per launch of an empty kernel, trt_launch against a raw
 * cuLaunchKernel of the same CUfunction (issue 3: at most 1.1 times the raw launch),
 * and the first launch in a new process with a cold and a warm cache.
 *
 *   launch_overhead [LAUNCHES_PER_BATCH [BATCHES]]      (defaults 10000 and 21)
 *
 * Each batch issues N launches on the default stream and synchronizes; the time per
 * launch is the batch's wall time over N. Raw and trt batches alternate, so drift in
 * clocks or queue state hits both alike; the table gives the median and the spread
 * (min, max) of each. Exits 77 without a GPU. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"
#include "bench/bench_util.h"

static double median(double *v, int n)
{
    sort_samples(v, n);
    return v[n / 2];
}

/* One batch through trt_launch; returns µs per launch, or -1 on an error. */
static double batch_trt(TrtKernel *k, const TrtArg *args, int n, const RtDriver *d)
{
    static const uint32_t grid[3] = {1, 1, 1};
    double t0 = now_us();
    for (int i = 0; i < n; i++)
        if (trt_launch(k, args, 2, grid, NULL)) return -1;
    d->cuCtxSynchronize();
    return (now_us() - t0) / n;
}

static double batch_raw(CUfunction f, CUdeviceptr x, uint32_t len, int n, const RtDriver *d)
{
    void *params[2] = {&x, &len};
    double t0 = now_us();
    for (int i = 0; i < n; i++)
        if (d->cuLaunchKernel(f, 1, 1, 1, 128, 1, 1, 0, NULL, params, NULL)) return -1;
    d->cuCtxSynchronize();
    return (now_us() - t0) / n;
}

static void row(const char *what, double *v, int n)
{
    double med = median(v, n);
    printf("| %-26s | %8.3f | %8.3f | %8.3f |\n", what, med, v[0], v[n - 1]);
}

static int load_empty(TrtContext *ctx, TrtModule **m, TrtKernel **k)
{
    TrtStatus s = rt_module_load_ptx(ctx, gpu_test_ptx, &empty_kernel, 1, m);
    if (!s) s = trt_module_get_kernel(*m, "empty", NULL, 0, k);
    if (s) fprintf(stderr, "launch_overhead: %s\n", trt_last_error());
    return s != TRT_SUCCESS;
}

/* --first DIR: a new process's first launch (context, load, launch, sync). */
static int first_launch(const char *dir)
{
    double t0 = now_us();
    TrtContext *ctx = NULL;
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    if (trt_context_create(0, TRT_MODE_DEFAULT, dir, &ctx) || load_empty(ctx, &m, &k)) return 1;
    double t1 = now_us();
    TrtArg args[2] = {trt_arg_ptr(0), trt_arg_u32(0)};
    uint32_t grid[3] = {1, 1, 1};
    if (trt_launch(k, args, 2, grid, NULL) || ctx->drv->cuCtxSynchronize()) return 1;
    double t2 = now_us();
    printf("%.3f %.3f\n", (t2 - t0) / 1e3, (t2 - t1) / 1e3);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    return 0;
}

static void first_launches(void)
{
    char dir[] = "/tmp/tile-bench-cache-XXXXXX";
    if (!mkdtemp(dir)) return;
    printf("\nfirst launch in a new process (ms): total (with context creation), after the context\n");
    for (int i = 0; i < 3; i++) {
        printf("%-5s ", i ? "warm:" : "cold:");
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", "launch_overhead", "--first", dir, (char *)NULL);
            _exit(127);
        }
        waitpid(pid, NULL, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd)) fprintf(stderr, "cannot remove %s\n", dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--first")) return first_launch(argv[2]);
    int n = argc > 1 ? atoi(argv[1]) : 10000, batches = argc > 2 ? atoi(argv[2]) : 21;
    if (n < 1 || batches < 1 || batches > 1000) return 2;
    TrtContext *ctx = NULL;
    TrtStatus s = trt_context_create(0, TRT_MODE_REDUCE_OVERHEAD, "", &ctx);
    if (s == TRT_ERROR_NO_DRIVER || s == TRT_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", trt_last_error());
        return 77;
    }
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    if (s || load_empty(ctx, &m, &k)) return 1;
    const RtDriver *d = ctx->drv;
    TrtArg args[2] = {trt_arg_ptr(0), trt_arg_u32(0)};
    if (batch_trt(k, args, 100, d) < 0) {   /* builds the variant; warms both paths */
        fprintf(stderr, "launch_overhead: %s\n", trt_last_error());
        return 1;
    }
    CUfunction f = trt_kernel_last_function(k);
    batch_raw(f, 0, 0, 100, d);
    double *raw = calloc((size_t)batches, sizeof *raw), *trt = calloc((size_t)batches, sizeof *trt);
    for (int b = 0; b < batches; b++) {
        raw[b] = batch_raw(f, 0, 0, n, d);
        trt[b] = batch_trt(k, args, n, d);
    }
    char name[128] = "?";
    d->cuDeviceGetName(name, sizeof name, ctx->dev);
    printf("GPU: %s, driver %d; %d batches of %d launches of an empty kernel\n\n", name,
           d->version, batches, n);
    printf("| %-26s | %8s | %8s | %8s |\n", "us per launch (host)", "median", "min", "max");
    printf("|----------------------------|----------|----------|----------|\n");
    row("cuLaunchKernel (raw)", raw, batches);
    row("trt_launch", trt, batches);
    printf("\ntrt_launch / cuLaunchKernel = %.3f (target <= 1.10)\n", trt[batches / 2] / raw[batches / 2]);
    free(raw);
    free(trt);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    first_launches();
    return 0;
}
