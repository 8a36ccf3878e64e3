/* The CUDA driver, opened at run time.
 *
 * libtileRT never links -lcuda: it dlopens the driver ($TILE_CUDA_LIBRARY, which the
 * tests point at the mock driver, else libcuda.so.1) and looks every entry point up
 * with cuGetProcAddress_v2 at the CUDA version of the ABI it was written against
 * (GPU-NOTES.md), so a newer driver keeps giving it the signatures it expects. Without
 * a driver the library still loads; rt_driver() then fails with TRT_ERROR_NO_DRIVER
 * and a message that says why, every time it is asked. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

typedef CUresult (*GetProcFn)(const char *sym, void **fn, int version, uint64_t flags,
                              int *status);

static RtDriver driver;
static bool driver_ok;
static char driver_why[512];
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static bool lookup(GetProcFn get, const char *name, int version, void **fn)
{
    int found = 0;
    *fn = NULL;
    /* An unknown symbol returns success with a NULL pointer: check both. */
    if (get(name, fn, version, 0, &found) != 0 || !*fn) {
        snprintf(driver_why, sizeof driver_why,
                 "the CUDA driver has no %s (version %d): the driver is too old", name, version);
        return false;
    }
    return true;
}

/* CUDA 12.8 added cuEventElapsedTime_v2 (same signature, and CUDA 13's cuda.h names
 * it); should a driver ever drop the first version, take the second. */
static bool lookup_versions(GetProcFn get, const char *name, int version, void **fn)
{
    if (!strcmp(name, "cuEventElapsedTime") && lookup(get, name, 12080, fn)) return true;
    return lookup(get, name, version, fn);
}

static bool lookup_all(GetProcFn get)
{
#define X(name, ver, params) if (!lookup_versions(get, #name, ver, (void **)&driver.name)) return false;
    RT_DRIVER_FNS(X)
#undef X
    /* The graph entry points are optional: a missing one disables the graph API only. */
    driver.has_graphs = true;
#define X(name, ver, params)                                                                  \
    if (driver.has_graphs) {                                                                  \
        int found_ = 0;                                                                       \
        driver.name = NULL;                                                                   \
        if (get(#name, (void **)&driver.name, ver, 0, &found_) != 0 || !driver.name) {        \
            driver.name = NULL;                                                               \
            driver.has_graphs = false;                                                        \
            snprintf(driver.no_graphs_why, sizeof driver.no_graphs_why,                       \
                     "the CUDA driver has no %s (version %d)", #name, ver);                   \
        }                                                                                     \
    }
    RT_DRIVER_GRAPH_FNS(X)
#undef X
    /* Optional too (RT_DRIVER_OPTIONAL_FNS): NULL when missing, and the runtime does without. */
#define X(name, ver, params)                                                                  \
    {                                                                                         \
        int found_ = 0;                                                                       \
        if (get(#name, (void **)&driver.name, ver, 0, &found_) != 0) driver.name = NULL;      \
    }
    RT_DRIVER_OPTIONAL_FNS(X)
#undef X
    return true;
}

static bool start_driver(void)
{
    CUresult r = driver.cuInit(0);
    if (r != 0) {
        const char *n = NULL;
        driver.cuGetErrorName(r, &n);
        snprintf(driver_why, sizeof driver_why, "cuInit failed: %s (%d)", n ? n : "?", r);
        return false;
    }
    if (driver.cuDriverGetVersion(&driver.version) != 0) {
        snprintf(driver_why, sizeof driver_why, "cuDriverGetVersion failed");
        return false;
    }
    return true;
}

static const char *driver_path(void)
{
    const char *path = getenv("TILE_CUDA_LIBRARY");
    return path && *path ? path : "libcuda.so.1";
}

bool rt_driver_loadable(char *why, size_t n)
{
    void *h = dlopen(driver_path(), RTLD_NOW | RTLD_LOCAL);
    if (!h) snprintf(why, n, "cannot open the CUDA driver: %s", dlerror());
    else dlclose(h);
    return h != NULL;
}

static void open_driver(void)
{
    const char *path = driver_path();
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(driver_why, sizeof driver_why, "cannot open the CUDA driver %s: %s", path,
                 dlerror());
        return;
    }
    GetProcFn get = (GetProcFn)dlsym(h, "cuGetProcAddress_v2");
    if (!get) {
        snprintf(driver_why, sizeof driver_why,
                 "%s has no cuGetProcAddress_v2: a CUDA 12 or newer driver is needed", path);
        return;
    }
    driver_ok = lookup_all(get) && start_driver();
}

const RtDriver *rt_driver(void)
{
    pthread_once(&driver_once, open_driver);
    if (driver_ok) return &driver;
    rt_fail(TRT_ERROR_NO_DRIVER,
            "no CUDA driver: %s (the CPU interpreter, tilec run --device cpu, runs the same "
            "kernels)", driver_why);
    return NULL;
}

TrtStatus rt_driver_error(const RtDriver *d, CUresult r, const char *what)
{
    const char *n = NULL;
    if (d->cuGetErrorName(r, &n) != 0 || !n) n = "CUDA_ERROR_UNKNOWN";
    return rt_fail(TRT_ERROR_DRIVER, "%s failed: %s (%d)", what, n, r);
}

/* ---- status codes and the thread's message --------------------------------------- */
/* The message is as long as it needs to be (60 compile errors are all there). It is
 * formatted into a new buffer before the old one is freed, so an argument may point into
 * the previous message (trt_last_error()). A pthread key frees a thread's buffer when
 * the thread exits. If the allocation fails the message is cut to fit `spare`. */
static _Thread_local char *last_error;
static _Thread_local char spare[256];
static pthread_key_t error_key;
static pthread_once_t error_once = PTHREAD_ONCE_INIT;

static void free_message(void *p)
{
    tl_free(p);
}

static void make_error_key(void)
{
    pthread_key_create(&error_key, free_message);
}

static void set_message(char *text)
{
    pthread_once(&error_once, make_error_key);
    if (last_error != spare) tl_free(last_error);
    last_error = text;
    pthread_setspecific(error_key, text == spare ? NULL : text);
}

TrtStatus rt_fail(TrtStatus s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? tl_malloc((size_t)n + 1) : NULL;
    va_start(ap, fmt);
    if (text) vsnprintf(text, (size_t)n + 1, fmt, ap);
    else {
        char cut[sizeof spare];
        vsnprintf(cut, sizeof cut, fmt, ap);
        memcpy(spare, cut, sizeof spare);
        text = spare;
    }
    va_end(ap);
    set_message(text);
    return s;
}

const char *trt_last_error(void)
{
    return last_error ? last_error : "";
}

const char *trt_version(void)
{
    return TILE_RT_VERSION;
}

const char *trt_status_name(TrtStatus s)
{
    static const char *const names[] = {
        "TRT_SUCCESS", "TRT_ERROR_NO_DRIVER", "TRT_ERROR_NO_DEVICE",
        "TRT_ERROR_INVALID_ARGUMENT", "TRT_ERROR_NOT_FOUND", "TRT_ERROR_COMPILE",
        "TRT_ERROR_NO_CODEGEN", "TRT_ERROR_CACHE_UNSAFE", "TRT_ERROR_CACHE_IO",
        "TRT_ERROR_DRIVER", "TRT_ERROR_OUT_OF_MEMORY", "TRT_ERROR_KERNEL_FAILED",
        "TRT_ERROR_CACHE_MISS",
    };
    if ((unsigned)s >= sizeof names / sizeof *names) return "TRT_ERROR_UNKNOWN";
    return names[s];
}
