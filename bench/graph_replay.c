/* graph_replay: host+GPU time per kernel of a sequence of 100 small launches, issued one
 * by one with trt_launch against replayed from a CUDA graph (trt_graph_launch), and a
 * replay after updating every launch's pointer (trt_graph_update) (issue 9 item 2:
 * target at most 1.0 us per kernel on replay).
 *
 *   graph_replay [KERNELS [BATCHES]]      (defaults 100 and 51)
 *
 * Each batch issues the KERNELS launches (or one replay of them) on a stream and
 * synchronizes; the time per kernel is the batch's wall time over KERNELS. The modes
 * alternate batch by batch; the table gives the median and the spread. The kernel is
 * the empty kernel of tests/gpu/kernels.h, so the figure is launch overhead only.
 * Exits 77 without a GPU. (PyTorch's torch.cuda.CUDAGraph of the same sequence is not
 * measured here yet.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_internal.h"
#include "bench/bench_util.h"

static void row(const char *what, double *v, int n)
{
    sort_samples(v, n);
    printf("| %-34s | %8.3f | %8.3f | %8.3f |\n", what, v[n / 2], v[0], v[n - 1]);
}

static int fail(const char *what)
{
    fprintf(stderr, "graph_replay: %s: %s\n", what, trt_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 100, batches = argc > 2 ? atoi(argv[2]) : 51;
    if (n < 1 || n > 100000 || batches < 1 || batches > 1000) return 2;
    TrtContext *ctx = NULL;
    TrtStatus s = trt_context_create(0, TRT_MODE_REDUCE_OVERHEAD, "", &ctx);
    if (s == TRT_ERROR_NO_DRIVER || s == TRT_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", trt_last_error());
        return 77;
    }
    if (s) return fail("trt_context_create");
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    if (rt_module_load_ptx(ctx, gpu_test_ptx, &empty_kernel, 1, &m) ||
        trt_module_get_kernel(m, "empty", NULL, 0, &k))
        return fail("loading the empty kernel");
    const RtDriver *d = ctx->drv;
    static const uint32_t grid[3] = {1, 1, 1};
    TrtArg args[2] = {trt_arg_ptr(0), trt_arg_u32(0)};
    CUstream stream = NULL;   /* the legacy default stream */
    for (int i = 0; i < 100; i++)   /* builds the variant, warms the path */
        if (trt_launch(k, args, 2, grid, stream)) return fail("trt_launch");
    if (trt_graph_begin(ctx, stream)) return fail("trt_graph_begin");
    for (int i = 0; i < n; i++)
        if (trt_launch(k, args, 2, grid, stream)) return fail("trt_launch (captured)");
    TrtGraph *g = NULL;
    if (trt_graph_end(ctx, stream, &g)) return fail("trt_graph_end");
    if (trt_graph_launch(g, stream) || d->cuCtxSynchronize()) return fail("trt_graph_launch");
    double *plain = calloc((size_t)batches, sizeof *plain), *replay = calloc((size_t)batches, sizeof *replay),
           *updated = calloc((size_t)batches, sizeof *updated), *update_only = calloc((size_t)batches, sizeof *update_only);
    if (!plain || !replay || !updated || !update_only) return 1;
    for (int b = 0; b < batches; b++) {
        double t0 = now_us();
        for (int i = 0; i < n; i++)
            if (trt_launch(k, args, 2, grid, stream)) return fail("trt_launch");
        d->cuCtxSynchronize();
        double t1 = now_us();
        if (trt_graph_launch(g, stream)) return fail("trt_graph_launch");
        d->cuCtxSynchronize();
        double t2 = now_us();
        TrtArg next[2] = {trt_arg_ptr((CUdeviceptr)(b % 2) * 256), trt_arg_u32(16u * (uint32_t)b)};   /* the class of 0 */
        for (int i = 0; i < n; i++)
            if (trt_graph_update(g, (uint32_t)i, next, 2)) return fail("trt_graph_update");
        double t3 = now_us();
        if (trt_graph_launch(g, stream)) return fail("trt_graph_launch");
        d->cuCtxSynchronize();
        double t4 = now_us();
        plain[b] = (t1 - t0) / n;
        replay[b] = (t2 - t1) / n;
        update_only[b] = (t3 - t2) / n;
        updated[b] = (t4 - t2) / n;
    }
    char name[128] = "?";
    d->cuDeviceGetName(name, sizeof name, ctx->dev);
    printf("GPU: %s, driver %d; %d batches of %d launches of an empty kernel\n\n", name, d->version, batches, n);
    printf("| %-34s | %8s | %8s | %8s |\n", "us per kernel (wall, synchronized)", "median", "min", "max");
    printf("|------------------------------------|----------|----------|----------|\n");
    row("trt_launch one by one", plain, batches);
    row("trt_graph_launch (replay)", replay, batches);
    row("trt_graph_update (each launch)", update_only, batches);
    row("update every launch + replay", updated, batches);
    printf("\nreplay: %.3f us per kernel (target <= 1.0)\n", replay[batches / 2]);
    free(plain);
    free(replay);
    free(updated);
    free(update_only);
    trt_graph_destroy(g);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    return 0;
}
