/* Contexts: a device's primary context, the compile mode and the disk cache.
 *
 * The primary context (cuDevicePrimaryCtxRetain) is the one the CUDA runtime and
 * PyTorch use, so tile kernels, torch tensors and cudaMalloc'd pointers live in one
 * address space and one process can mix them freely. It is retained once per
 * TrtContext and released by trt_context_destroy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "rt_internal.h"

static TrtStatus mode_from_env(TrtMode *mode)
{
    const char *v = getenv("TILE_MODE");
    if (!v || !*v || !strcmp(v, "default")) *mode = TRT_MODE_DEFAULT;
    else if (!strcmp(v, "reduce-overhead")) *mode = TRT_MODE_REDUCE_OVERHEAD;
    else if (!strcmp(v, "max-autotune")) *mode = TRT_MODE_MAX_AUTOTUNE;
    else
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "TILE_MODE is '%s'; expected default, reduce-overhead or max-autotune", v);
    return TRT_SUCCESS;
}

/* TILE_DEBUG: words separated by commas; "bounds" is the checked mode. */
static TrtStatus debug_from_env(unsigned *out)
{
    const char *v = getenv("TILE_DEBUG");
    *out = 0;
    for (const char *p = v ? v : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (n == 6 && !strncmp(p, "bounds", n)) *out |= TRT_DEBUG_BOUNDS;
        else if (n && !(n == 4 && !strncmp(p, "none", n)))
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                           "TILE_DEBUG is '%s'; expected bounds or none (words separated by commas)", v);
        p += n + (p[n] == ',');
    }
    return TRT_SUCCESS;
}

/* TILE_CACHE_MODE: default, require or require-cubin. */
static TrtStatus cache_mode_from_env(int *out)
{
    const char *v = getenv("TILE_CACHE_MODE");
    if (!v || !*v || !strcmp(v, "default")) *out = TRT_CACHE_DEFAULT;
    else if (!strcmp(v, "require")) *out = TRT_CACHE_REQUIRE;
    else if (!strcmp(v, "require-cubin")) *out = TRT_CACHE_REQUIRE_CUBIN;
    else
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "TILE_CACHE_MODE is '%s'; expected default, require or require-cubin", v);
    return TRT_SUCCESS;
}

/* The knobs of the environment (TILE_SINK=0, ...), and TILE_CACHE_MODE. */
static TrtStatus settings_from_env(TrtContext *c)
{
    char why[256];
    int mode = TRT_CACHE_DEFAULT;
    c->knobs = tile_knobs_default();
    if (!tile_knobs_from_env(&c->knobs, why, sizeof why)) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s", why);
    tile_knobs_text(&c->knobs, c->knobs_text, sizeof c->knobs_text);
    TrtStatus s = cache_mode_from_env(&mode);
    if (!s && mode != TRT_CACHE_DEFAULT && !c->cache && c->device != TRT_DEVICE_CPU)
        s = rt_fail(TRT_ERROR_INVALID_ARGUMENT, "TILE_CACHE_MODE=%s needs a disk cache, and this context has none",
                    getenv("TILE_CACHE_MODE"));
    atomic_store(&c->cache_mode, mode);
    return s;
}

static TrtStatus check_mode(TrtMode *mode)
{
    if (*mode == TRT_MODE_FROM_ENV) return mode_from_env(mode);
    if (*mode < TRT_MODE_DEFAULT || *mode > TRT_MODE_MAX_AUTOTUNE)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "unknown compile mode %d", (int)*mode);
    return TRT_SUCCESS;
}

static TrtStatus open_device(TrtContext *c, int ordinal)
{
    const RtDriver *d = c->drv;
    int n = 0;
    CUresult r = d->cuDeviceGetCount(&n);
    if (r) return rt_driver_error(d, r, "cuDeviceGetCount");
    if (ordinal < 0 || ordinal >= n)
        return rt_fail(TRT_ERROR_NO_DEVICE, "no CUDA device %d: this machine has %d", ordinal, n);
    if ((r = d->cuDeviceGet(&c->dev, ordinal))) return rt_driver_error(d, r, "cuDeviceGet");
    if ((r = d->cuDeviceGetAttribute(&c->cc_major, RT_CU_ATTR_CC_MAJOR, c->dev)) ||
        (r = d->cuDeviceGetAttribute(&c->cc_minor, RT_CU_ATTR_CC_MINOR, c->dev)))
        return rt_driver_error(d, r, "cuDeviceGetAttribute");
    if ((r = d->cuDevicePrimaryCtxRetain(&c->cuctx, c->dev)))
        return rt_driver_error(d, r, "cuDevicePrimaryCtxRetain");
    if ((r = d->cuCtxSetCurrent(c->cuctx))) {
        d->cuDevicePrimaryCtxRelease(c->dev);
        c->cuctx = NULL;
        return rt_driver_error(d, r, "cuCtxSetCurrent");
    }
    return TRT_SUCCESS;
}

TrtStatus rt_device_limits(TrtContext *ctx, RtLimits *l)
{
    struct { int *v; int attr; } q[] = {
        {&l->max_threads, RT_CU_ATTR_MAX_THREADS_PER_BLOCK},
        {&l->smem_optin, RT_CU_ATTR_MAX_SHARED_PER_BLOCK_OPTIN},
        {&l->regs_per_block, RT_CU_ATTR_MAX_REGS_PER_BLOCK},
        {&l->threads_per_sm, RT_CU_ATTR_MAX_THREADS_PER_SM},
        {&l->smem_per_sm, RT_CU_ATTR_MAX_SHARED_PER_SM},
        {&l->regs_per_sm, RT_CU_ATTR_MAX_REGS_PER_SM},
        {&l->blocks_per_sm, RT_CU_ATTR_MAX_BLOCKS_PER_SM},
        {&l->sms, RT_CU_ATTR_MULTIPROCESSOR_COUNT},
    };
    for (size_t i = 0; i < sizeof q / sizeof *q; i++) {
        CUresult r = ctx->drv->cuDeviceGetAttribute(q[i].v, q[i].attr, ctx->dev);
        if (r) return rt_ctx_driver_error(ctx, r, "cuDeviceGetAttribute");
    }
    return TRT_SUCCESS;
}

uint32_t rt_blocks_per_sm(const RtLimits *l, uint32_t threads, uint32_t regs, uint32_t shared)
{
    uint32_t warps = (threads + 31) / 32;
    uint32_t regs_warp = (regs * 32 + 255) / 256 * 256;
    uint32_t b = (uint32_t)l->blocks_per_sm;
    if (threads) b = b < (uint32_t)l->threads_per_sm / threads ? b : (uint32_t)l->threads_per_sm / threads;
    if (regs_warp && warps) {
        uint32_t by = (uint32_t)l->regs_per_sm / (regs_warp * warps);
        b = b < by ? b : by;
    }
    if (shared) {
        uint32_t by = (uint32_t)l->smem_per_sm / (shared + 1024);
        b = b < by ? b : by;
    }
    return b;
}

/* The code generator's targets: sm_90 (Hopper) gets sm_90a (wgmma, TMA); every other
 * device since Ampere gets sm_80 PTX, which its driver compiles forward. */
static void pick_arch(TrtContext *c)
{
    if (c->cc_major == 9 && c->cc_minor == 0) snprintf(c->arch, sizeof c->arch, "sm_90a");
    else if (c->cc_major >= 8) snprintf(c->arch, sizeof c->arch, "sm_80");
    else snprintf(c->arch, sizeof c->arch, "sm_%d%d", c->cc_major, c->cc_minor);
}

/* A CPU context runs kernels in the interpreter (rt_host.c): it opens no driver and
 * no cache, since nothing is compiled past Tile IR. */
static TrtStatus cpu_context_create(TrtMode mode, TrtContext **out)
{
    unsigned debug = 0;
    TrtStatus s = check_mode(&mode);
    if (!s) s = debug_from_env(&debug);
    if (s) return s;
    TrtContext *c = tl_calloc(1, sizeof *c);
    if (!c) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&c->check_lock, NULL);
    atomic_store(&c->debug, debug);
    c->device = TRT_DEVICE_CPU;
    c->mode = mode;
    snprintf(c->arch, sizeof c->arch, "cpu");
    if ((s = settings_from_env(c))) {
        trt_context_destroy(c);
        return s;
    }
    *out = c;
    return TRT_SUCCESS;
}

TrtStatus trt_context_create(int device, TrtMode mode, const char *cache_dir, TrtContext **out)
{
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_create: out is NULL");
    *out = NULL;
    if (device == TRT_DEVICE_CPU) return cpu_context_create(mode, out);
    const RtDriver *d = rt_driver();
    if (!d) return TRT_ERROR_NO_DRIVER;
    unsigned debug = 0;
    TrtStatus s = check_mode(&mode);
    if (!s) s = debug_from_env(&debug);
    if (s) return s;
    TrtContext *c = tl_calloc(1, sizeof *c);
    if (!c) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    c->drv = d;
    pthread_mutex_init(&c->fault_lock, NULL);
    pthread_mutex_init(&c->graph_lock, NULL);
    pthread_mutex_init(&c->check_lock, NULL);
    atomic_store(&c->debug, debug);
    c->device = device;
    c->mode = mode;
    if (getenv("TILE_LOG_RECOMPILES") && !strcmp(getenv("TILE_LOG_RECOMPILES"), "1"))
        atomic_store(&c->flags, TRT_FLAG_LOG_RECOMPILES);
    if (!cache_dir || *cache_dir) s = rt_cache_open(cache_dir, 0, &c->cache);
    if (!s) s = settings_from_env(c);
    if (!s) s = open_device(c, device);
    if (s) {
        trt_context_destroy(c);
        return s;
    }
    pick_arch(c);
    *out = c;
    return TRT_SUCCESS;
}

void trt_context_destroy(TrtContext *c)
{
    if (!c) return;
    if (c->report && !atomic_load(&c->fault)) c->drv->cuMemFree(c->report);
    if (c->cuctx) c->drv->cuDevicePrimaryCtxRelease(c->dev);
    if (c->drv) {
        rt_graph_discard(c);
        pthread_mutex_destroy(&c->graph_lock);
        pthread_mutex_destroy(&c->fault_lock);
    }
    pthread_mutex_destroy(&c->check_lock);
    rt_cache_close(c->cache);
    tl_free(c);
}

TrtStatus trt_context_set_flags(TrtContext *c, unsigned flags)
{
    if (!c) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_flags: ctx is NULL");
    atomic_store(&c->flags, flags);
    return TRT_SUCCESS;
}

TrtStatus trt_context_set_cache_mode(TrtContext *c, TrtCacheMode mode)
{
    if (!c) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_cache_mode: ctx is NULL");
    if (mode < TRT_CACHE_DEFAULT || mode > TRT_CACHE_REQUIRE_CUBIN)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_cache_mode: unknown mode %d", (int)mode);
    if (mode != TRT_CACHE_DEFAULT && !c->cache && c->device != TRT_DEVICE_CPU)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "trt_context_set_cache_mode: a required cache needs a disk cache, and this context has none");
    atomic_store(&c->cache_mode, (int)mode);
    return TRT_SUCCESS;
}

TrtCacheMode trt_context_cache_mode(const TrtContext *c)
{
    return c ? (TrtCacheMode)atomic_load(&((TrtContext *)c)->cache_mode) : TRT_CACHE_DEFAULT;
}

TrtStatus trt_context_set_knob(TrtContext *c, const char *name, const char *value)
{
    char why[256];
    if (!c || !name || !value) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_knob: a NULL argument");
    if (atomic_load(&c->modules_loaded))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "trt_context_set_knob: knob %s is set after a module was loaded; set knobs "
                       "first (variants built before would mix settings)", name);
    TileKnobs k = c->knobs;
    if (!tile_knobs_set(&k, name, value, why, sizeof why))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_knob: %s", why);
    c->knobs = k;
    tile_knobs_text(&c->knobs, c->knobs_text, sizeof c->knobs_text);
    return TRT_SUCCESS;
}

const char *trt_compiler_id(void) { return rt_compiler_identity(); }

TrtStatus trt_context_set_debug(TrtContext *c, unsigned debug)
{
    if (!c) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_debug: ctx is NULL");
    if (debug & ~(unsigned)TRT_DEBUG_BOUNDS)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_debug: unknown bits 0x%x", debug & ~(unsigned)TRT_DEBUG_BOUNDS);
    atomic_store(&c->debug, debug);
    return TRT_SUCCESS;
}

unsigned trt_context_debug(const TrtContext *c)
{
    return c ? atomic_load(&((TrtContext *)c)->debug) : 0;
}

TrtMode trt_context_mode(const TrtContext *c)
{
    return c->mode;
}

int trt_context_device(const TrtContext *c)
{
    return c->device;
}

const char *trt_context_cache_dir(const TrtContext *c)
{
    return c->cache ? rt_cache_dir(c->cache) : NULL;
}

bool rt_log_recompiles(const TrtContext *c)
{
    return atomic_load(&((TrtContext *)c)->flags) & TRT_FLAG_LOG_RECOMPILES;
}

/* ---- kernel faults ------------------------------------------------------------------ */
/* After a kernel faults, the driver makes the context unusable: every later call fails
 * with the same error, and only a new process gets a working one. The first call that
 * reports it records a message naming the kernels launched since the last successful
 * synchronization (one of them faulted); later calls give that message. */
bool rt_sticky_error(CUresult r)
{
    switch (r) {
    case 700: case 702: case 710: case 714: case 715: case 716: case 717: case 718: case 719:
        return true;
    default:
        return false;
    }
}

static void record_fault(TrtContext *c, CUresult r)
{
    char names[600] = "";
    size_t len = 0;
    unsigned n = atomic_load_explicit(&c->nrecent, memory_order_relaxed);
    unsigned first = n > RT_RECENT_LAUNCHES ? n - RT_RECENT_LAUNCHES : 0;
    unsigned named = 0;
    for (unsigned i = first; i < n; i++) {
        TrtKernel *k = atomic_load_explicit(&c->recent[i % RT_RECENT_LAUNCHES], memory_order_relaxed);
        if (!k) continue;
        bool seen = false;   /* each name once */
        for (unsigned j = first; j < i && !seen; j++)
            seen = atomic_load_explicit(&c->recent[j % RT_RECENT_LAUNCHES], memory_order_relaxed) == k;
        if (seen || len >= sizeof names - 1) continue;
        int w = snprintf(names + len, sizeof names - len, "%s'%s'", named ? ", " : "", k->name);
        if (w > 0) len += (size_t)w < sizeof names - len ? (size_t)w : sizeof names - 1 - len;
        named++;
    }
    const char *call = trt_last_error();   /* rt_driver_error's "WHAT failed: CUDA_ERROR_X (r)" */
    if (named)
        snprintf(c->fault_msg, sizeof c->fault_msg,
                 "%s: a kernel faulted on the GPU; launched since the last successful "
                 "synchronization: %s%s. The CUDA context is now unusable: every later call "
                 "on this device fails, and the process must restart", call, names,
                 first ? " (and earlier ones not recorded)" : "");
    else
        snprintf(c->fault_msg, sizeof c->fault_msg,
                 "%s: a kernel faulted on the GPU (none was launched through this context "
                 "since its last successful synchronization). The CUDA context is now "
                 "unusable: every later call on this device fails, and the process must "
                 "restart", call);
    atomic_store_explicit(&c->fault, r, memory_order_release);
}

TrtStatus rt_ctx_driver_error(TrtContext *c, CUresult r, const char *what)
{
    if (atomic_load_explicit(&c->fault, memory_order_acquire)) return rt_ctx_check_fault(c, what);
    TrtStatus s = rt_driver_error(c->drv, r, what);
    if (!rt_sticky_error(r)) return s;
    pthread_mutex_lock(&c->fault_lock);
    if (!atomic_load_explicit(&c->fault, memory_order_relaxed)) record_fault(c, r);
    pthread_mutex_unlock(&c->fault_lock);
    return rt_fail(TRT_ERROR_DRIVER, "%s", c->fault_msg);
}

TrtStatus rt_ctx_check_fault(TrtContext *c, const char *what)
{
    if (!c || !atomic_load_explicit(&c->fault, memory_order_acquire)) return TRT_SUCCESS;
    return rt_fail(TRT_ERROR_DRIVER, "%s: the CUDA context is unusable since an earlier fault: %s", what, c->fault_msg);
}

void rt_ctx_synchronized(TrtContext *c)
{
    atomic_store_explicit(&c->nrecent, 0, memory_order_relaxed);
}

void rt_ctx_forget_module(TrtContext *c, const TrtModule *m)
{
    if (!c || !c->drv) return;
    for (unsigned i = 0; i < RT_RECENT_LAUNCHES; i++) {
        TrtKernel *k = atomic_load_explicit(&c->recent[i], memory_order_relaxed);
        if (k && k->module == m) atomic_store_explicit(&c->recent[i], NULL, memory_order_relaxed);
    }
}
