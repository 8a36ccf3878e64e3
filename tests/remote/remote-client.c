/* remote-client: one process of a fleet sharing a remote cache (run.sh).
 *
 *   remote-client launch SRC.tile      loads SRC, launches its vector_add once (the mock
 *                                      driver) and synchronizes; exit 0 when it ran, and
 *                                      prints the remote tier's counts
 *   remote-client autotune MODE SRC    launches SRC's @autotune kernel scale once in MODE
 *                                      (max-autotune or default): the real tuner's path
 *   remote-client tune KEYHEX TEXT     gets the tune entry KEYHEX, building it as TEXT
 *   remote-client tune-fetch KEYHEX    looks the tune entry up without building
 *   remote-client tune-after GATE KEYHEX TEXT KEYHEX2 TEXT2
 *                                      tune KEYHEX, wait (at most 20 s) for the file GATE,
 *                                      then tune KEYHEX2: a server killed in between
 *
 * The tune commands print where the entry came from (local, remote, built or miss) and
 * its payload, through the calls the tuner makes (rt_cache_get_or_build_from in
 * max-autotune, rt_cache_fetch in the default mode). The cache is $TILE_CACHE_DIR;
 * the remote tier is whatever $TILE_REMOTE_CACHE says. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ir/arena.h"
#include "rt_internal.h"

static int fail(const char *what, TrtStatus s)
{
    fprintf(stderr, "remote-client: %s: %s: %s\n", what, trt_status_name(s), trt_last_error());
    return 1;
}

static int launch(const char *src)
{
    TrtContext *ctx = NULL;
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtDevicePtr buf = 0;
    enum { N = 1000 };
    TrtStatus s = trt_context_create(0, TRT_MODE_DEFAULT, NULL, &ctx);
    if (s) return fail("trt_context_create", s);
    if (!(s = trt_module_load_file(ctx, src, &m)) &&
        !(s = trt_module_get_kernel(m, "vector_add", NULL, 0, &k)) &&
        !(s = trt_mem_alloc(ctx, 3 * N * sizeof(float), &buf))) {
        TrtArg args[] = {trt_arg_ptr(buf), trt_arg_ptr(buf + N * 4), trt_arg_ptr(buf + 2 * N * 4),
                         trt_arg_i32(N)};
        if (!(s = trt_launch(k, args, 4, NULL, NULL))) s = trt_synchronize(ctx);
    }
    RtRemoteStats r = rt_remote_stats();
    int rc = s ? fail("launch", s) : 0;
    if (!s) printf("launched; remote hits %u misses %u puts %u refused %u\n", r.hits, r.misses, r.puts, r.refused);
    if (buf) trt_mem_free(ctx, buf);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    return rc;
}

/* x[i] = i, then scale(y, x, n) in a context of the given mode. */
static int autotune(const char *mode, const char *src)
{
    enum { N = 4096 };
    static float host[N];
    TrtContext *ctx = NULL;
    TrtModule *m = NULL;
    TrtKernel *k = NULL;
    TrtDevicePtr x = 0, y = 0;
    TrtMode md = !strcmp(mode, "max-autotune") ? TRT_MODE_MAX_AUTOTUNE : TRT_MODE_DEFAULT;
    for (int i = 0; i < N; i++) host[i] = (float)i;
    TrtStatus s = trt_context_create(0, md, NULL, &ctx);
    if (s) return fail("trt_context_create", s);
    if (!(s = trt_module_load_file(ctx, src, &m)) && !(s = trt_module_get_kernel(m, "scale", NULL, 0, &k)) &&
        !(s = trt_mem_alloc(ctx, sizeof host, &x)) && !(s = trt_mem_alloc(ctx, sizeof host, &y)) &&
        !(s = trt_memcpy_htod(ctx, x, host, sizeof host))) {
        TrtArg args[] = {trt_arg_ptr(y), trt_arg_ptr(x), trt_arg_i32(N)};
        if (!(s = trt_launch(k, args, 3, NULL, NULL))) s = trt_synchronize(ctx);
    }
    int rc = s ? fail("autotune", s) : (puts("launched"), 0);
    if (x) trt_mem_free(ctx, x);
    if (y) trt_mem_free(ctx, y);
    trt_module_destroy(m);
    trt_context_destroy(ctx);
    return rc;
}

static TrtStatus build_text(void *ud, RtBlob *out)
{
    const char *text = ud;
    out->len = strlen(text);
    out->data = tl_malloc(out->len + 1);
    if (!out->data) return TRT_ERROR_OUT_OF_MEMORY;
    memcpy(out->data, text, out->len + 1);
    return TRT_SUCCESS;
}

static int tune(const char *hex, const char *text)
{
    static const char *const tiers[] = {"local", "remote", "built"};
    RtKey key;
    RtCache *c = NULL;
    RtBlob b = {0};
    RtTier from = RT_TIER_LOCAL;
    if (!rt_key_from_hex(hex, &key)) return fprintf(stderr, "remote-client: bad key\n"), 2;
    TrtStatus s = rt_cache_open(NULL, 0, &c);
    if (s) return fail("rt_cache_open", s);
    bool got = true;
    if (text) s = rt_cache_get_or_build_from(c, RT_ENTRY_TUNE, &key, build_text, (void *)text, &b, &from);
    else got = rt_cache_fetch(c, RT_ENTRY_TUNE, &key, &b, &from) == RT_GET_HIT;
    if (s) return fail("rt_cache_get_or_build_from", s);
    if (got) printf("%s %.*s\n", tiers[from], (int)b.len, (char *)b.data);
    else puts("miss");
    fflush(stdout);   /* tune-after's first answer is read while it waits */
    rt_blob_free(&b);
    rt_cache_close(c);
    return 0;
}

/* Two lookups in one process with a pause between them, for a server that dies while
 * the process holds a connection to it. */
static int tune_after(const char *gate, char **rest)
{
    int rc = tune(rest[0], rest[1]);
    for (int i = 0; rc == 0 && i < 400 && access(gate, F_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
    return rc ? rc : tune(rest[2], rest[3]);
}

int main(int argc, char **argv)
{
    if (argc == 7 && !strcmp(argv[1], "tune-after")) return tune_after(argv[2], argv + 3);
    if (argc == 3 && !strcmp(argv[1], "launch")) return launch(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "autotune")) return autotune(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "tune")) return tune(argv[2], argv[3]);
    if (argc == 3 && !strcmp(argv[1], "tune-fetch")) return tune(argv[2], NULL);
    fprintf(stderr, "usage: remote-client launch SRC.tile | autotune MODE SRC.tile | tune KEYHEX TEXT | "
                    "tune-fetch KEYHEX | tune-after GATE KEYHEX TEXT KEYHEX2 TEXT2\n");
    return 2;
}
