/* Device memory for host programs that have no CUDA runtime of their own (tilec run,
 * tests, small tools): thin checked wrappers over the driver. Programs that use
 * PyTorch or cudart pass their own device pointers instead. */
#include "rt_internal.h"

static TrtStatus need_ctx(const TrtContext *ctx, const char *fn)
{
    if (!ctx) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: ctx is NULL", fn);
    if (!ctx->drv)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: a CPU context has no device memory", fn);
    return rt_ctx_check_fault((TrtContext *)ctx, fn);
}

TrtStatus trt_mem_alloc(TrtContext *ctx, size_t bytes, CUdeviceptr *out)
{
    if (out) *out = 0;
    TrtStatus s = need_ctx(ctx, "trt_mem_alloc");
    if (s) return s;
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_mem_alloc: out is NULL");
    CUresult r = ctx->drv->cuMemAlloc(out, bytes ? bytes : 1);
    return r ? rt_ctx_driver_error(ctx, r, "cuMemAlloc") : TRT_SUCCESS;
}

void trt_mem_free(TrtContext *ctx, CUdeviceptr p)
{
    if (ctx && ctx->drv && p) ctx->drv->cuMemFree(p);
}

TrtStatus trt_memcpy_htod(TrtContext *ctx, CUdeviceptr dst, const void *src, size_t bytes)
{
    TrtStatus s = need_ctx(ctx, "trt_memcpy_htod");
    if (s || !bytes) return s;
    CUresult r = ctx->drv->cuMemcpyHtoD(dst, src, bytes);
    return r ? rt_ctx_driver_error(ctx, r, "cuMemcpyHtoD") : TRT_SUCCESS;
}

TrtStatus trt_memcpy_dtoh(TrtContext *ctx, void *dst, CUdeviceptr src, size_t bytes)
{
    TrtStatus s = need_ctx(ctx, "trt_memcpy_dtoh");
    if (s || !bytes) return s;
    CUresult r = ctx->drv->cuMemcpyDtoH(dst, src, bytes);
    return r ? rt_ctx_driver_error(ctx, r, "cuMemcpyDtoH") : TRT_SUCCESS;
}

TrtStatus trt_synchronize(TrtContext *ctx)
{
    if (ctx && !ctx->drv) return TRT_SUCCESS;   /* CPU runs are synchronous */
    TrtStatus s = need_ctx(ctx, "trt_synchronize");
    if (s) return s;
    CUresult r = ctx->drv->cuCtxSynchronize();
    if (r) return rt_ctx_driver_error(ctx, r, "cuCtxSynchronize (a kernel failed)");
    rt_ctx_synchronized(ctx);
    return TRT_SUCCESS;
}
