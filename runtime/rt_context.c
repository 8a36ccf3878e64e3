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
    TrtStatus s = check_mode(&mode);
    if (s) return s;
    TrtContext *c = tl_calloc(1, sizeof *c);
    if (!c) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    c->device = TRT_DEVICE_CPU;
    c->mode = mode;
    snprintf(c->arch, sizeof c->arch, "cpu");
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
    TrtStatus s = check_mode(&mode);
    if (s) return s;
    TrtContext *c = tl_calloc(1, sizeof *c);
    if (!c) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    c->drv = d;
    c->device = device;
    c->mode = mode;
    if (getenv("TILE_LOG_RECOMPILES") && !strcmp(getenv("TILE_LOG_RECOMPILES"), "1"))
        atomic_store(&c->flags, TRT_FLAG_LOG_RECOMPILES);
    if (!cache_dir || *cache_dir) s = rt_cache_open(cache_dir, 0, &c->cache);
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
    if (c->cuctx) c->drv->cuDevicePrimaryCtxRelease(c->dev);
    rt_cache_close(c->cache);
    tl_free(c);
}

TrtStatus trt_context_set_flags(TrtContext *c, unsigned flags)
{
    if (!c) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_context_set_flags: ctx is NULL");
    atomic_store(&c->flags, flags);
    return TRT_SUCCESS;
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
