/* max-autotune on a real GPU (docs/TUNING.md): examples/matmul_bf16.tile at one shape.
 *
 *   test_tune_gpu tune   EXAMPLES_DIR   tunes (TRT_MODE_MAX_AUTOTUNE) on the first launch,
 *                                       checks the winner's output against a CPU
 *                                       reference on sampled elements, and prints every
 *                                       config's status, time, compile and benchmark time,
 *                                       the winner and its speed against the default
 *   test_tune_gpu reuse  EXAMPLES_DIR   a second process in default mode: the winner from
 *                                       the cache, no benchmarking (rt_tune_runs stays 0)
 * The cache is $TILE_CACHE_DIR (tests/gpu/test_tune_gpu.sh makes a fresh one). The
 * space is kept small by pinning BK and stages (TUNE_BK, TUNE_STAGES; default 64 and 3:
 * 16 configs of BM x BN x warps); the shape is TUNE_SIZE (default 2048). Exit status
 * 77 where there is no driver or no device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"   /* fp_f32_to_bf16 and back */
#include "rt_tune.h"

#define SKIP 77

static int env_int(const char *name, int def)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : def;
}

static void print_result(const RtTuneResult *r)
{
    const RtCandidate *w = &r->cands[r->winner], *d = NULL;
    printf("%-44s %-13s %10s %10s %10s  %s\n", "config", "status", "median ms", "compile ms",
           "bench ms", "why");
    for (uint32_t i = 0; i < r->ncands; i++) {
        const RtCandidate *c = &r->cands[i];
        char cfg[256] = "";
        size_t n = 0;
        for (uint32_t j = 0; j < c->nkeys; j++)
            n += (size_t)snprintf(cfg + n, sizeof cfg - n, "%s%s=%lld", j ? " " : "", c->keys[j].name,
                                  (long long)c->keys[j].value);
        if (c->is_default) d = c;
        printf("%-44s %-13s %10.4f %10.1f %10.1f  %s%s\n", cfg, rt_cand_status_name(c->status),
               c->median_ms, c->compile_ms, c->bench_ms, c == w ? "<- winner " : "",
               c->is_default ? "(default) " : "");
        if (c->why[0]) printf("    %s\n", c->why);
    }
    printf("tuning: %.0f ms for %u configs (%u measured)\n", r->total_ms, r->ncands, r->removed[RT_CAND_OK]);
    if (d && d->status == RT_CAND_OK)
        printf("winner %.4f ms, default config %.4f ms: %.2fx\n", w->median_ms, d->median_ms,
               d->median_ms / w->median_ms);
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "tune") && strcmp(argv[1], "reuse"))) {
        fprintf(stderr, "usage: test_tune_gpu tune|reuse EXAMPLES_DIR\n");
        return 2;
    }
    bool tune = !strcmp(argv[1], "tune");
    TrtContext *ctx = NULL;
    TrtStatus s = trt_context_create(0, tune ? TRT_MODE_MAX_AUTOTUNE : TRT_MODE_DEFAULT, NULL, &ctx);
    if (s == TRT_ERROR_NO_DRIVER || s == TRT_ERROR_NO_DEVICE) {
        printf("skipped: %s\n", trt_last_error());
        return SKIP;
    }
    if (s) return fprintf(stderr, "context: %s\n", trt_last_error()), 1;
    trt_context_set_flags(ctx, TRT_FLAG_LOG_RECOMPILES);
    char path[4096];
    snprintf(path, sizeof path, "%s/matmul_bf16.tile", argv[2]);
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtConst pins[] = {{"BK", env_int("TUNE_BK", 64)}, {"stages", env_int("TUNE_STAGES", 3)}};
    if ((s = trt_module_load_file(ctx, path, &m)) || (s = trt_module_get_kernel(m, "matmul_bf16", pins, 2, &k)))
        return fprintf(stderr, "%s: %s\n", path, trt_last_error()), 1;
    int n = env_int("TUNE_SIZE", 2048);
    size_t bytes = (size_t)n * n * 2;
    uint16_t *a = malloc(bytes), *b = malloc(bytes), *c = malloc(bytes);
    srand(1);
    for (size_t i = 0; i < (size_t)n * n; i++) {
        a[i] = fp_f32_to_bf16((float)(rand() % 17 - 8) / 8.0f);
        b[i] = fp_f32_to_bf16((float)(rand() % 17 - 8) / 8.0f);
    }
    TrtDevicePtr da, db, dc;
    if (trt_mem_alloc(ctx, bytes, &da) || trt_mem_alloc(ctx, bytes, &db) || trt_mem_alloc(ctx, bytes, &dc) ||
        trt_memcpy_htod(ctx, da, a, bytes) || trt_memcpy_htod(ctx, db, b, bytes))
        return fprintf(stderr, "memory: %s\n", trt_last_error()), 1;
    TrtArg args[] = {trt_arg_ptr(dc), trt_arg_ptr(da), trt_arg_ptr(db), trt_arg_i32(n), trt_arg_i32(n),
                     trt_arg_i32(n), trt_arg_i32(n), trt_arg_i32(n), trt_arg_i32(n)};
    if ((s = trt_launch(k, args, 9, NULL, NULL)) || (s = trt_synchronize(ctx)) ||
        (s = trt_memcpy_dtoh(ctx, c, dc, bytes)))
        return fprintf(stderr, "launch: %s\n", trt_last_error()), 1;
    int failures = 0;
    for (int t = 0; t < 256; t++) {   /* sampled elements against the CPU */
        int i = (t * 7919) % n, j = (t * 104729) % n;
        double ref = 0;
        for (int q = 0; q < n; q++) ref += (double)fp_bf16_to_f32(a[(size_t)i * n + q]) * fp_bf16_to_f32(b[(size_t)q * n + j]);
        double got = fp_bf16_to_f32(c[(size_t)i * n + j]);
        if (got - ref > 0.02 * (1 + (ref < 0 ? -ref : ref)) || ref - got > 0.02 * (1 + (ref < 0 ? -ref : ref))) {
            if (failures++ < 5) fprintf(stderr, "FAIL c[%d][%d] = %g, expected %g\n", i, j, got, ref);
        }
    }
    unsigned runs = atomic_load(&rt_tune_runs);
    RtKey key = rt_tune_cache_key_for(k, args);
    RtBlob blob = {0};
    RtTuneResult r;
    if (!ctx->cache || rt_cache_get(ctx->cache, RT_ENTRY_TUNE, &key, &blob) != RT_GET_HIT ||
        !rt_tune_result_parse(blob.data, blob.len, &r)) {
        fprintf(stderr, "FAIL: no tuning result in the cache %s\n", trt_context_cache_dir(ctx));
        return 1;
    }
    rt_blob_free(&blob);
    if (tune) {
        print_result(&r);
        if (runs != 1) fprintf(stderr, "FAIL: %u tunings, expected 1\n", runs), failures++;
    } else {
        printf("reused: the winner from the cache, %u tunings in this process\n", runs);
        if (runs != 0) fprintf(stderr, "FAIL: default mode benchmarked (%u tunings)\n", runs), failures++;
    }
    rt_tune_result_free(&r);
    trt_mem_free(ctx, da);
    trt_mem_free(ctx, db);
    trt_mem_free(ctx, dc);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    free(a), free(b), free(c);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
