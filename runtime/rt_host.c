/* trt_launch_host: kernels of a CPU context, run by the reference interpreter.
 *
 * The kernel is the one trt_module_get_kernel lowered (its Tile IR, before the GPU
 * passes): the interpreter gives it its meaning (docs/INTERPRETER.md), so a binding's
 * tests get the same answers without a GPU. Arguments are checked as trt_launch checks
 * them; each pointer becomes a buffer of the size the caller gives, so an access past
 * it stops the run with a diagnostic instead of touching other memory. Runs of one
 * kernel are serialized (the kernel's lock); the interpreter itself is single-threaded. */
#include <stdlib.h>
#include <string.h>

#include "ir/interp.h"
#include "rt_internal.h"

/* A scalar argument as the interpreter holds it: integers in i, floats (f16, bf16 and
 * f8 given as their bits) in f. */
static void scalar_value(const TrtArg *a, IrElem e, InterpArg *out)
{
    switch (e) {
    case IR_F16: out->u.f = fp_f16_to_f32(a->v.u16); break;
    case IR_BF16: out->u.f = fp_bf16_to_f32(a->v.u16); break;
    case IR_F8E4M3: out->u.f = fp_f8e4m3_to_f32(a->v.u8); break;
    case IR_F8E5M2: out->u.f = fp_f8e5m2_to_f32(a->v.u8); break;
    case IR_F32: out->u.f = a->v.f32; break;
    case IR_F64: out->u.f = a->v.f64; break;
    case IR_I1: out->u.i = a->v.i8 != 0; break;
    case IR_I8: out->u.i = a->v.i8; break;
    case IR_I16: out->u.i = a->v.i16; break;
    case IR_I32: out->u.i = a->v.i32; break;
    case IR_U8: out->u.i = a->v.u8; break;
    case IR_U16: out->u.i = a->v.u16; break;
    case IR_U32: out->u.i = a->v.u32; break;
    default: out->u.i = a->v.i64; break;   /* i64, u64 */
    }
}

static void to_interp(const TrtArg *a, uint64_t bytes, const RtParam *p, InterpArg *out)
{
    memset(out, 0, sizeof *out);
    if (p->elem != IR_PTR) {
        scalar_value(a, p->elem, out);
        return;
    }
    int size = ir_elem_bytes(p->pointee);
    out->is_buffer = true;
    out->u.buf.elem = p->pointee;
    out->u.buf.data = (void *)(uintptr_t)a->v.ptr;
    out->u.buf.count = a->v.ptr ? (int64_t)(bytes / (uint64_t)(size > 0 ? size : 1)) : 0;
}

static TrtStatus run(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, const uint32_t g[3])
{
    InterpArg ia[TRT_MAX_ARGS];
    for (uint32_t i = 0; i < k->nparams; i++)
        to_interp(&args[i], bytes ? bytes[i] : 0, &k->params[i], &ia[i]);
    int64_t grid[3] = {g[0], g[1], g[2]};
    InterpOptions o = {0};
    /* TILE_INTERP_MAX_OPS: the interpreter's work bound for host launches (tilec run
     * --max-ops passes it on to a graph's kernels); 0 or unset: the default */
    const char *mo = getenv("TILE_INTERP_MAX_OPS");
    if (mo) o.max_work = strtoll(mo, NULL, 10);
    DiagList d;
    diag_init(&d);
    pthread_mutex_lock(&k->lock);
    bool ok = interp_run(k->func, ia, k->nparams, grid, &o, &d);
    pthread_mutex_unlock(&k->lock);
    char what[160];
    snprintf(what, sizeof what, "kernel '%s' failed in the interpreter", k->name);
    TrtStatus s = ok ? TRT_SUCCESS : rt_fail_diags(TRT_ERROR_KERNEL_FAILED, what, &d);
    diag_free(&d);
    return s;
}

TrtStatus trt_launch_host(TrtKernel *k, const TrtArg *args, const uint64_t *bytes,
                          uint32_t nargs, const uint32_t grid[3])
{
    if (!k) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_launch_host: kernel is NULL");
    if (k->module->ctx->drv || !k->func)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "kernel '%s' belongs to a GPU context: launch it with trt_launch", k->name);
    TrtStatus s = rt_check_args(k, args, nargs);
    if (s) return s;
    for (uint32_t i = 0; i < nargs; i++)
        if (k->params[i].elem == IR_PTR && args[i].v.ptr && !bytes)
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': trt_launch_host needs the buffer sizes (bytes is NULL)", k->name);
    uint32_t g[3];
    if (grid) memcpy(g, grid, sizeof g);
    else if ((s = rt_kernel_grid(k, args, g))) return s;
    if ((s = rt_check_grid(k, g))) return s;
    if (rt_grid_empty(g)) return TRT_SUCCESS;
    return run(k, args, bytes, g);
}
