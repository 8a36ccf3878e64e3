/* The CUDA toolkit's assembler library, nvJitLink, as an alternative to the driver's
 * cuLink* for turning a variant's PTX into a cubin (TILE_ASSEMBLER=nvjitlink).
 *
 * Why: a cold graph builds its kernels on a thread each (rt_tgraph.c prebuild) and is
 * ready when the slowest is, but only if the assembler of each thread runs beside the
 * others. nvJitLink's handles are independent and its compiles run in parallel; so does
 * the driver's cuLink, as measured on the H200's 16 cores (bench/jit_parallel.py: the
 * Llama block's 7 kernels 318 ms at once, 929 in a row; nvJitLink 398 at once). So this
 * stays off by default: for measurements, and for a driver older than the toolkit.
 *
 * Like the driver, the library is opened with dlopen on first use ($TILE_NVJITLINK alone
 * when set, else libnvJitLink.so.13 then .so.12 on the search path, else the toolkit's
 * /usr/local/cuda/lib64): libtileRT never links it. Only with a disk cache: without
 * one, the driver assembles the PTX as it loads it. When it cannot be opened the driver
 * assembles, with one warning on stderr. Its cubins carry their own cache keys (the
 * library's version beside the driver's), so they never stand in for the driver's. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

typedef struct NvJitLink {
    void *lib;
    int (*create)(void **h, uint32_t n, const char **opts);
    int (*destroy)(void **h);
    int (*add)(void *h, int type, const void *data, size_t size, const char *name);
    int (*complete)(void *h);
    int (*cubin_size)(void *h, size_t *size);
    int (*cubin)(void *h, void *out);
    int (*log_size)(void *h, size_t *size);
    int (*log)(void *h, char *out);
    int (*version)(unsigned *major, unsigned *minor);
    unsigned major, minor;
    char why[256];                 /* why it is not there */
} NvJitLink;

enum { NVJITLINK_INPUT_PTX = 2 };

static NvJitLink nj;
static pthread_once_t nj_once = PTHREAD_ONCE_INIT;

/* name, or its versioned export (__nvJitLinkCreate_13_0, the header's static inline
 * wrappers call those) */
static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    char v[96];
    for (const char *ver = "13_0\0" "12_0\0"; !p && *ver; ver += strlen(ver) + 1) {
        snprintf(v, sizeof v, "__%s_%s", name, ver);
        p = dlsym(lib, v);
    }
    return p;
}

static void open_nvjitlink(void)
{
    const char *env = getenv("TILE_NVJITLINK");   /* a path given is the only one tried */
    const char *tries[] = {"libnvJitLink.so.13", "libnvJitLink.so.12", "/usr/local/cuda/lib64/libnvJitLink.so.13"};
    if (env && env[0]) nj.lib = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; !(env && env[0]) && i < sizeof tries / sizeof *tries && !nj.lib; i++)
        nj.lib = dlopen(tries[i], RTLD_NOW | RTLD_LOCAL);
    if (!nj.lib) {
        snprintf(nj.why, sizeof nj.why, "libnvJitLink could not be opened (%s)%s", env ? env : "libnvJitLink.so.13",
                 env ? "" : "; TILE_NVJITLINK names its path");
        return;
    }
    *(void **)&nj.create = sym(nj.lib, "nvJitLinkCreate");
    *(void **)&nj.destroy = sym(nj.lib, "nvJitLinkDestroy");
    *(void **)&nj.add = sym(nj.lib, "nvJitLinkAddData");
    *(void **)&nj.complete = sym(nj.lib, "nvJitLinkComplete");
    *(void **)&nj.cubin_size = sym(nj.lib, "nvJitLinkGetLinkedCubinSize");
    *(void **)&nj.cubin = sym(nj.lib, "nvJitLinkGetLinkedCubin");
    *(void **)&nj.log_size = sym(nj.lib, "nvJitLinkGetErrorLogSize");
    *(void **)&nj.log = sym(nj.lib, "nvJitLinkGetErrorLog");
    *(void **)&nj.version = dlsym(nj.lib, "nvJitLinkVersion");
    if (!nj.create || !nj.destroy || !nj.add || !nj.complete || !nj.cubin_size || !nj.cubin || !nj.log_size || !nj.log) {
        snprintf(nj.why, sizeof nj.why, "libnvJitLink lacks the functions libtileRT calls");
        dlclose(nj.lib);
        nj.lib = NULL;
        return;
    }
    if (nj.version) nj.version(&nj.major, &nj.minor);
}

bool rt_nvjitlink_wanted(void)
{
    const char *a = getenv("TILE_ASSEMBLER");
    if (!a || strcmp(a, "nvjitlink")) return false;
    pthread_once(&nj_once, open_nvjitlink);
    if (nj.lib) return true;
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&warned))
        fprintf(stderr, "tile: TILE_ASSEMBLER=nvjitlink: %s; the driver assembles instead\n", nj.why);
    return false;
}

uint64_t rt_nvjitlink_version(void) { return (uint64_t)nj.major << 32 | nj.minor; }

TrtStatus rt_nvjitlink_assemble(const char *arch, const char *ptx, RtBlob *out)
{
    char opt[32];
    snprintf(opt, sizeof opt, "-arch=%s", arch);
    const char *opts[1] = {opt};
    void *h = NULL;
    if (nj.create(&h, 1, opts) || !h) return rt_fail(TRT_ERROR_DRIVER, "nvJitLinkCreate failed (%s)", opt);
    TrtStatus s = TRT_SUCCESS;
    size_t size = 0;
    if (nj.add(h, NVJITLINK_INPUT_PTX, ptx, strlen(ptx), "tile.ptx") || nj.complete(h)) {
        char log[4096] = "";
        size_t n = 0;
        if (!nj.log_size(h, &n) && n > 0 && n <= sizeof log) nj.log(h, log);
        s = rt_fail(TRT_ERROR_DRIVER, "nvJitLink could not assemble the PTX%s%s", log[0] ? ":\n" : "", log);
    } else if (nj.cubin_size(h, &size) || !size) {
        s = rt_fail(TRT_ERROR_DRIVER, "nvJitLink gave no cubin");
    } else if (!(out->data = tl_malloc(size))) {
        s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    } else if (nj.cubin(h, out->data)) {
        tl_free(out->data);
        out->data = NULL;
        s = rt_fail(TRT_ERROR_DRIVER, "nvJitLink gave no cubin");
    } else {
        out->len = size;
    }
    nj.destroy(&h);
    return s;
}
