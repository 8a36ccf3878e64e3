/* trt_launch: the hot path.
 *
 * Once a kernel's variant for an argument class exists, a launch checks the argument
 * kinds and pointer alignment, computes the class codes (2 bits per parameter: integer
 * equal to 1, divisible by 16, divisible by 8 but not 16, or none of those; pointer
 * aligned to 16 bytes or not), finds the variant by a
 * linear scan of a few (the last one used first), points the driver at the caller's
 * argument values and calls cuLaunchKernel: no hashing, no allocation, no driver query.
 * A new class takes the slow path under the kernel's lock (rt_variant_build).
 *
 * A grid given by the kernel's grid(...) clause is evaluated on the host by the
 * interpreter, and memoized on the scalar arguments, so repeated shapes cost a compare. */
#include <stdio.h>
#include <string.h>

#include "ir/interp.h"
#include "passes/passes.h"
#include "rt_internal.h"
#include "rt_tune.h"

/* The argument kind that each element type takes (f8 values are passed as their bits). */
TrtArgKind rt_arg_kind(IrElem e)
{
    switch (e) {
    case IR_I1: return TRT_ARG_BOOL;
    case IR_I8: return TRT_ARG_I8;
    case IR_I16: return TRT_ARG_I16;
    case IR_I32: return TRT_ARG_I32;
    case IR_I64: return TRT_ARG_I64;
    case IR_U8: case IR_F8E4M3: case IR_F8E5M2: return TRT_ARG_U8;
    case IR_U16: return TRT_ARG_U16;
    case IR_U32: return TRT_ARG_U32;
    case IR_U64: return TRT_ARG_U64;
    case IR_F16: return TRT_ARG_F16;
    case IR_BF16: return TRT_ARG_BF16;
    case IR_F32: return TRT_ARG_F32;
    case IR_F64: return TRT_ARG_F64;
    default: return TRT_ARG_PTR;
    }
}

static const char *kind_name(TrtArgKind k)
{
    static const char *const names[] = {
        "TRT_ARG_PTR", "TRT_ARG_BOOL", "TRT_ARG_I8", "TRT_ARG_I16", "TRT_ARG_I32",
        "TRT_ARG_I64", "TRT_ARG_U8", "TRT_ARG_U16", "TRT_ARG_U32", "TRT_ARG_U64",
        "TRT_ARG_F16", "TRT_ARG_BF16", "TRT_ARG_F32", "TRT_ARG_F64",
    };
    return (unsigned)k < sizeof names / sizeof *names ? names[k] : "an unknown kind";
}

/* An integer argument's value, for specialization, grid evaluation and tensor maps. */
bool rt_arg_int(const TrtArg *a, int64_t *v)
{
    switch (a->kind) {
    case TRT_ARG_BOOL: *v = a->v.i8 != 0; return true;
    case TRT_ARG_I8: *v = a->v.i8; return true;
    case TRT_ARG_I16: *v = a->v.i16; return true;
    case TRT_ARG_I32: *v = a->v.i32; return true;
    case TRT_ARG_I64: *v = a->v.i64; return true;
    case TRT_ARG_U8: *v = a->v.u8; return true;
    case TRT_ARG_U16: *v = a->v.u16; return true;
    case TRT_ARG_U32: *v = a->v.u32; return true;
    case TRT_ARG_U64: *v = (int64_t)a->v.u64; return true;
    default: return false;
    }
}

static TrtStatus check_arg(const TrtKernel *k, uint32_t i, const TrtArg *a)
{
    const RtParam *p = &k->params[i];
    TrtArgKind want = rt_arg_kind(p->elem);
    if (a->kind != want)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "kernel '%s': argument %u ('%s') is %s, but the parameter is %s and "
                       "takes %s", k->name, i + 1, p->name, kind_name(a->kind),
                       ir_elem_name(p->elem), kind_name(want));
    unsigned align = p->elem == IR_PTR ? (unsigned)ir_elem_bytes(p->pointee) : 1;
    if (a->v.ptr % align)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "kernel '%s': argument %u ('%s') is the pointer 0x%llx, not aligned to "
                       "its element type %s (%u bytes)", k->name, i + 1, p->name, a->v.ptr,
                       ir_elem_name(p->pointee), align);
    return TRT_SUCCESS;
}

TrtStatus rt_check_args(const TrtKernel *k, const TrtArg *args, uint32_t nargs)
{
    if (nargs != k->nparams || (nargs && !args))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' takes %u arguments, got %u",
                       k->name, k->nparams, nargs);
    for (uint32_t i = 0; i < nargs; i++) {
        TrtStatus s = check_arg(k, i, &args[i]);
        if (s) return s;
    }
    return TRT_SUCCESS;
}

/* ---- specialization classes ------------------------------------------------------- */
static uint64_t class_code(const TrtArg *a)
{
    int64_t v;
    if (a->kind == TRT_ARG_PTR) return a->v.ptr % 16 == 0 ? RT_SPEC_DIV16 : RT_SPEC_NONE;
    if (a->kind == TRT_ARG_BOOL || !rt_arg_int(a, &v)) return RT_SPEC_NONE;
    if (v == 1) return RT_SPEC_ONE;
    return v % 16 == 0 ? RT_SPEC_DIV16 : v % 8 == 0 ? RT_SPEC_DIV8 : RT_SPEC_NONE;
}

uint64_t rt_class_mask(const TrtKernel *k, const TrtArg *args)
{
    uint64_t m = 0;
    uint32_t n = k->nparams < 32 ? k->nparams : 32;   /* 2 bits each in 64 */
    for (uint32_t i = 0; i < n; i++) m |= class_code(&args[i]) << (2 * i);
    return m;
}

const char *rt_spec_class_name(const TrtKernel *k, uint32_t i, uint64_t mask)
{
    uint64_t b = mask >> (2 * i) & 3;
    if (k->params[i].elem == IR_PTR) return b ? "aligned to 16 bytes" : "not aligned to 16 bytes";
    switch (b) {
    case RT_SPEC_ONE: return "equal to 1";
    case RT_SPEC_DIV16: return "divisible by 16";
    case RT_SPEC_DIV8: return "divisible by 8, not 16";
    default: return "not 1 nor divisible by 8";
    }
}

/* A checked variant is never served to an unchecked launch, nor the other way round. */
static int find_variant(TrtKernel *k, uint64_t mask, bool checked)
{
    unsigned n = atomic_load_explicit(&k->nvariants, memory_order_acquire);
    unsigned last = atomic_load_explicit(&k->last, memory_order_relaxed);
    if (last < n && k->variants[last].mask == mask && k->variants[last].checked == checked) return (int)last;
    for (unsigned i = 0; i < n; i++)
        if (k->variants[i].mask == mask && k->variants[i].checked == checked) return (int)i;
    return -1;
}

/* Where a variant's build time went, the steps that ran in order. */
static void report_times(const TrtKernel *k, unsigned index)
{
    const RtBuildTimes *t = &k->variants[index].times;
    const struct { const char *what; double ms; } steps[] = {
        {"front end", t->front_ms}, {"GPU passes", t->passes_ms}, {"LLVM IR", t->llvm_ms},
        {"LLVM opt", t->opt_ms}, {"NVPTX", t->emit_ms}, {"assembler", t->jit_ms}, {"load", t->load_ms},
    };
    fprintf(stderr, "tile: kernel '%s': variant %u took %.1f ms:", k->name, index + 1, t->total_ms);
    double rest = t->total_ms;
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
        if (steps[i].ms <= 0) continue;
        fprintf(stderr, " %s %.1f,", steps[i].what, steps[i].ms);
        rest -= steps[i].ms;
    }
    if (t->links > 1) fprintf(stderr, " (the assembler ran %u times)", t->links);
    fprintf(stderr, " cache and the rest %.1f\n", rest > 0 ? rest : 0);
}

bool rt_kernel_checked(const TrtKernel *k)
{
    return (atomic_load_explicit(&k->module->ctx->debug, memory_order_relaxed) & TRT_DEBUG_BOUNDS) &&
           k->module->src;
}

static void report_variant(const TrtKernel *k, uint64_t mask, unsigned index)
{
    static const char *const how[] = {
        [RT_FROM_DISK_CUBIN] = "loaded variant %u from the disk cache",
        [RT_FROM_REMOTE_CUBIN] = "loaded variant %u from the remote cache",
        [RT_FROM_DISK_PTX] = "linked variant %u from PTX in the disk cache",
        [RT_FROM_REMOTE_PTX] = "linked variant %u from PTX in the remote cache",
        [RT_FROM_COMPILER] = "compiled variant %u",
    };
    fprintf(stderr, "tile: kernel '%s': ", k->name);
    fprintf(stderr, how[k->variants[index].origin], index + 1);
    if (k->variants[index].checked) fputs(" (checked: TILE_DEBUG=bounds)", stderr);
    if (index == 0) {
        fputs(" (first launch)\n", stderr);
        report_times(k, index);
        return;
    }
    uint64_t prev = k->variants[atomic_load(&((TrtKernel *)k)->last)].mask;
    for (uint32_t i = 0; i < k->nparams && i < 32; i++)
        if ((prev ^ mask) >> (2 * i) & 3)
            fprintf(stderr, "; argument '%s' changed class: %s -> %s", k->params[i].name,
                    rt_spec_class_name(k, i, prev), rt_spec_class_name(k, i, mask));
    fputc('\n', stderr);
    report_times(k, index);
}

/* The slow path: build the variant of a new class (once, under the kernel's lock). A
 * full table falls back to the class with no bits, which is valid for every argument. */
static TrtStatus resolve_variant(TrtKernel *k, uint64_t mask, bool checked, unsigned *index)
{
    pthread_mutex_lock(&k->lock);
    if (atomic_load(&k->nvariants) >= RT_MAX_VARIANTS - 2) mask = 0;   /* room for both kinds */
    int found = find_variant(k, mask, checked);
    TrtStatus s = TRT_SUCCESS;
    if (found >= 0) *index = (unsigned)found;
    else if (!(s = rt_variant_build(k, mask, checked, index)) && rt_log_recompiles(k->module->ctx))
        report_variant(k, mask, *index);
    pthread_mutex_unlock(&k->lock);
    return s;
}

/* ---- the grid ----------------------------------------------------------------------- */
static bool memo_matches(const TrtKernel *k, const TrtArg *args)
{
    if (!k->grid_memo_valid) return false;
    for (uint32_t i = 0; i < k->nparams; i++) {
        int64_t v = 0;
        if (args[i].kind != TRT_ARG_PTR && !rt_arg_int(&args[i], &v)) memcpy(&v, &args[i].v, 8);
        if (args[i].kind != TRT_ARG_PTR && v != k->grid_memo_args[i]) return false;
    }
    return true;
}

static void memo_store(TrtKernel *k, const TrtArg *args, const int64_t g[3])
{
    for (uint32_t i = 0; i < k->nparams; i++) {
        int64_t v = 0;
        if (args[i].kind != TRT_ARG_PTR && !rt_arg_int(&args[i], &v)) memcpy(&v, &args[i].v, 8);
        k->grid_memo_args[i] = v;
    }
    for (int i = 0; i < 3; i++) k->grid_memo[i] = (uint32_t)g[i];
    k->grid_memo_valid = true;
}

/* The grid function reads only scalars: a pointer becomes an empty buffer. */
static void to_interp(const TrtArg *a, const RtParam *p, InterpArg *out)
{
    memset(out, 0, sizeof *out);
    if (p->elem == IR_PTR) {
        out->is_buffer = true;
        out->u.buf.elem = p->pointee;
    } else if (p->elem == IR_F32) out->u.f = a->v.f32;
    else if (p->elem == IR_F64) out->u.f = a->v.f64;
    else rt_arg_int(a, &out->u.i);
}

static TrtStatus eval_grid(TrtKernel *k, const TrtArg *args, int64_t g[3])
{
    InterpArg ia[TRT_MAX_ARGS];
    for (uint32_t i = 0; i < k->nparams; i++) to_interp(&args[i], &k->params[i], &ia[i]);
    DiagList d;
    diag_init(&d);
    int n = interp_eval_grid(k->func->grid, ia, k->nparams, g, &d);
    TrtStatus s = TRT_SUCCESS;
    if (n < 0)
        s = rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s': its grid(...) clause failed: %s",
                    k->name, d.len ? d.items[0].msg : "unknown error");
    for (int i = 0; !s && i < 3; i++)
        if (g[i] < 0 || g[i] > (i ? 65535 : 2147483647))
            s = rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                        "kernel '%s': its grid(...) clause gives %lld programs on axis %d (each size "
                        "must be at least 0, at most 2147483647 x 65535 x 65535)", k->name, (long long)g[i], i);
    diag_free(&d);
    return s;
}

TrtStatus rt_kernel_grid(TrtKernel *k, const TrtArg *args, uint32_t out[3])
{
    if (!k->func || !k->func->grid)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "kernel '%s' has no grid(...) clause: pass an explicit grid", k->name);
    pthread_mutex_lock(&k->grid_lock);
    TrtStatus s = TRT_SUCCESS;
    if (!memo_matches(k, args)) {
        int64_t g[3];
        if (!(s = eval_grid(k, args, g))) memo_store(k, args, g);
    }
    if (!s) memcpy(out, k->grid_memo, sizeof k->grid_memo);
    pthread_mutex_unlock(&k->grid_lock);
    return s;
}

/* ---- launching ---------------------------------------------------------------------- */
/* An empty grid (a size 0, as cdiv(n, BLOCK) gives for n = 0) launches nothing: it is
 * checked like any other, then the launch returns before building a variant. The grid
 * counts programs; a cluster kernel runs each on `cluster` CTAs along x (its
 * program_id(0) is the cluster's index), so the CUDA grid's x is that many times
 * larger. */
void rt_variant_grid(const RtVariant *v, const uint32_t g[3], uint32_t out[3])
{
    uint32_t cluster = v->cluster > 1 ? v->cluster : 1;
    if (!v->max_programs) memcpy(out, g, 3 * sizeof *g);
    else {
        uint64_t n = (uint64_t)g[0] * g[1] * g[2];
        out[0] = (uint32_t)(n < v->max_programs ? n : v->max_programs);
        out[1] = out[2] = 1;
    }
    out[0] *= cluster;
}

TrtStatus rt_launch_grid(const TrtKernel *k, const RtVariant *v, const uint32_t g[3], uint32_t out[3])
{
    uint64_t programs = (uint64_t)g[0] * g[1] * g[2];
    if (v->max_programs && programs > INT32_MAX)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' is persistent (it walks its grid's programs in "
                       "i32) and its grid of %ux%ux%u has %llu programs: at most 2147483647", k->name, g[0], g[1],
                       g[2], (unsigned long long)programs);
    uint64_t x = v->max_programs ? (programs < v->max_programs ? programs : v->max_programs) : g[0];
    if (v->cluster > 1 && x * v->cluster > INT32_MAX)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' runs each program on a cluster of %u CTAs along x: "
                       "its grid of %ux%ux%u is %llu CTAs along x, more than a GPU launches (2147483647)", k->name,
                       v->cluster, g[0], g[1], g[2], (unsigned long long)(x * v->cluster));
    rt_variant_grid(v, g, out);
    return TRT_SUCCESS;
}

bool rt_grid_empty(const uint32_t g[3])
{
    return !g[0] || !g[1] || !g[2];
}

TrtStatus rt_check_grid(const TrtKernel *k, const uint32_t g[3])
{
    if (g[0] > 2147483647u || g[1] > 65535 || g[2] > 65535)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s': grid %ux%ux%u is larger than a GPU launches "
                       "(at most 2147483647 x 65535 x 65535)", k->name, g[0], g[1], g[2]);
    return TRT_SUCCESS;
}

/* ---- the checked mode ----------------------------------------------------------------- */
/* A checked launch: the user's arguments, then each pointer's element count (-1 where
 * the size is unknown) and the report buffer (passes/bounds.c's ABI, docs/CODEGEN.md);
 * then a wait for the kernel and a look at the report. One at a time per context (the
 * report is shared); the report is zero again when it returns. */
static TrtStatus report_error(TrtKernel *k, const int64_t *w)
{
    const char *names[TRT_MAX_ARGS];
    for (uint32_t i = 0; i < k->nparams; i++) names[i] = k->params[i].name;
    DiagList d;
    diag_init(&d);
    bounds_report_diag(w, k->name, names, k->nparams, k->module->src, &d);
    char what[200];
    snprintf(what, sizeof what, "kernel '%s' was stopped by its bounds check on the GPU (the access was not made)",
             k->name);
    TrtStatus s = rt_fail_diags(TRT_ERROR_KERNEL_FAILED, what, &d);
    diag_free(&d);
    return s;
}

static TrtStatus launch_checked(TrtKernel *k, const RtVariant *v, const TrtArg *args, const uint64_t *bytes,
                                const uint32_t g[3], CUstream stream)
{
    TrtContext *ctx = k->module->ctx;
    const RtDriver *d = ctx->drv;
    static const int64_t zeros[IR_BOUNDS_WORDS];
    int64_t counts[TRT_MAX_ARGS], w[IR_BOUNDS_WORDS];
    void *params[2 * TRT_MAX_ARGS + 1];
    uint32_t n = 0;
    for (uint32_t i = 0; i < k->nparams; i++) params[n++] = (void *)&args[i].v;
    for (uint32_t i = 0, j = 0; i < k->nparams; i++) {
        if (k->params[i].elem != IR_PTR) continue;
        uint64_t b = bytes ? bytes[i] : TRT_BYTES_UNKNOWN, size = (uint64_t)ir_elem_bytes(k->params[i].pointee);
        counts[j] = b == TRT_BYTES_UNKNOWN || b / size > (uint64_t)INT64_MAX ? -1 : (int64_t)(b / size);
        params[n++] = &counts[j++];
    }
    pthread_mutex_lock(&ctx->check_lock);
    CUresult r = 0;
    const char *what = "cuMemAlloc";
    if (!ctx->report && !(r = d->cuMemAlloc(&ctx->report, sizeof zeros))) {
        what = "cuMemcpyHtoD";
        if ((r = d->cuMemcpyHtoD(ctx->report, zeros, sizeof zeros))) {
            d->cuMemFree(ctx->report);
            ctx->report = 0;
        }
    }
    params[n++] = &ctx->report;
    if (!r && !(r = d->cuLaunchKernel(v->fn, g[0], g[1], g[2], v->threads, 1, 1, v->shared_bytes, stream, params,
                                      NULL)))
        rt_ctx_note_launch(ctx, k);
    else if (r) what = ctx->report ? "cuLaunchKernel" : what;
    if (!r && (r = d->cuStreamSynchronize(stream))) what = "cuStreamSynchronize";
    if (!r && (r = d->cuMemcpyDtoH(w, ctx->report, sizeof w))) what = "cuMemcpyDtoH";
    if (!r && w[IR_BOUNDS_FLAG] && (r = d->cuMemcpyHtoD(ctx->report, zeros, sizeof zeros))) what = "cuMemcpyHtoD";
    TrtStatus s = r ? rt_ctx_driver_error(ctx, r, what) : w[IR_BOUNDS_FLAG] ? report_error(k, w) : TRT_SUCCESS;
    pthread_mutex_unlock(&ctx->check_lock);
    return s;
}

/* The variant for a launch: the one of the arguments' class, with its tensor maps
 * encoded into maps. Where the arguments do not allow a map (rt_tma.c), the class of
 * its pointer is dropped, which gives the variant that copies that tensor with cp.async
 * (blockload keeps a block for TMA only from an aligned pointer), until one encodes.
 * *mask becomes the class used. */
TrtStatus rt_pick_variant(TrtKernel *k, const TrtArg *args, uint32_t nargs, uint64_t *mask, bool checked,
                          unsigned *index, RtTmaMaps *maps)
{
    for (;;) {
        int found = find_variant(k, *mask, checked);
        TrtStatus s;
        if (found >= 0) *index = (unsigned)found;
        else if ((s = rt_ctx_check_fault(k->module->ctx, "trt_launch")) ||
                 (s = resolve_variant(k, *mask, checked, index)))
            return s;
        const RtVariant *v = &k->variants[*index];
        if (!v->ntma) return TRT_SUCCESS;
        char why[200];
        uint64_t refused = rt_tma_encode_all(k->module->ctx->drv, v->tma, v->ntma, args, nargs, maps, why, sizeof why);
        if (!refused) return TRT_SUCCESS;
        for (uint32_t p = 0; p < 64; p++) {
            if (!(refused >> p & 1)) continue;
            if (p >= 32 || !(*mask >> (2 * p) & 3))
                return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                               "internal error: kernel '%s': a tensor map of argument %u without its class", k->name, p + 1);
            if (rt_log_recompiles(k->module->ctx))
                fprintf(stderr, "tile: kernel '%s': argument '%s' cannot be copied by TMA (%s): running the variant "
                                "that copies it with cp.async\n", k->name, k->params[p].name, why);
            *mask &= ~(UINT64_C(3) << (2 * p));
        }
    }
}

TrtStatus rt_launch_target(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs, CUstream stream,
                           RtLaunchTarget *t)
{
    TrtStatus s = rt_check_args(k, args, nargs);
    if (s) return s;
    if (k->tune && ((s = rt_ctx_check_fault(k->module->ctx, "trt_launch")) ||
                    (s = rt_tune_select(k, args, bytes, nargs, stream, rt_class_mask(k, args), &k))))
        return s;
    uint32_t g[3];
    if ((s = rt_kernel_grid(k, args, g))) return s;
    *t = (RtLaunchTarget){k, rt_class_mask(k, args), rt_kernel_checked(k), false};
    t->ready = rt_grid_empty(g) || find_variant(k, t->mask, t->checked) >= 0;
    return TRT_SUCCESS;
}

TrtStatus rt_launch_target_build(const RtLaunchTarget *t)
{
    unsigned index;
    return resolve_variant(t->k, t->mask, t->checked, &index);
}

static TrtStatus launch(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs,
                        const uint32_t grid[3], CUstream stream)
{
    if (!k) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_launch: kernel is NULL");
    if (!k->module->ctx->drv)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "kernel '%s' belongs to a CPU context: launch it with trt_launch_host", k->name);
    TrtStatus s = rt_check_args(k, args, nargs);
    if (s) return s;
    TrtContext *ctx = k->module->ctx;
    TrtKernel *handle = k;
    bool capturing = atomic_load_explicit(&ctx->capturing, memory_order_relaxed) &&
                     rt_graph_capturing(ctx, stream);
    if (capturing && k->tune && !grid && ctx->mode == TRT_MODE_MAX_AUTOTUNE &&
        !rt_tune_known(k, args, rt_class_mask(k, args)))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "kernel '%s': max-autotune would tune this key now, which cannot happen inside a graph "
                       "capture (trt_graph_begin): launch it once before the capture", k->name);
    /* A kernel with @autotune and a grid(...) clause runs the config its mode chooses
     * for the key (rt_tune.c); an explicit grid is for k's own config only. */
    if (k->tune && !grid) {
        TrtKernel *chosen = k;
        if ((s = rt_ctx_check_fault(k->module->ctx, "trt_launch")) ||
            (s = rt_tune_select(k, args, bytes, nargs, stream, rt_class_mask(k, args), &chosen)))
            return s;
        k = chosen;
    }
    atomic_store_explicit(&handle->last_run, k, memory_order_relaxed);
    uint32_t g[3];
    if (grid) memcpy(g, grid, sizeof g);
    else if ((s = rt_kernel_grid(k, args, g))) return s;
    if ((s = rt_check_grid(k, g))) return s;
    if (rt_grid_empty(g)) return TRT_SUCCESS;
    uint64_t mask = rt_class_mask(k, args);
    bool checked = rt_kernel_checked(k);
    unsigned index;
    RtTmaMaps maps;
    if ((s = rt_pick_variant(k, args, nargs, &mask, checked, &index, &maps))) return s;
    atomic_store_explicit(&k->last, index, memory_order_relaxed);
    const RtVariant *v = &k->variants[index];
    uint32_t lg[3];            /* a persistent kernel runs fewer programs, each walking */
    if ((s = rt_launch_grid(k, v, g, lg))) return s;
    if (capturing) {
        if (checked)
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                           "kernel '%s': a checked launch (TILE_DEBUG=bounds) waits for the kernel and reads its "
                           "report, which cannot happen inside a graph capture (trt_graph_begin)", k->name);
        bool taken = false;
        if ((s = rt_graph_record(ctx, stream, handle, k, index, mask, g, grid != NULL, args, nargs, &taken)) ||
            taken)
            return s;
    }
    if (checked) return launch_checked(k, v, args, bytes, lg, stream);
    void *params[TRT_MAX_ARGS + CG_MAX_TMA];
    for (uint32_t i = 0; i < nargs; i++) params[i] = (void *)&args[i].v;
    for (uint32_t j = 0; j < v->ntma; j++) params[nargs + j] = maps.map[j];
    const RtDriver *d = k->module->ctx->drv;
    CUresult r = d->cuLaunchKernel(v->fn, lg[0], lg[1], lg[2], v->threads, 1, 1, v->shared_bytes,
                                   stream, params, NULL);
    if (r) return rt_ctx_driver_error(k->module->ctx, r, "cuLaunchKernel");
    rt_ctx_note_launch(k->module->ctx, k);
    return TRT_SUCCESS;
}

TrtStatus trt_launch(TrtKernel *k, const TrtArg *args, uint32_t nargs, const uint32_t grid[3],
                     CUstream stream)
{
    return launch(k, args, NULL, nargs, grid, stream);
}

TrtStatus trt_launch_sized(TrtKernel *k, const TrtArg *args, const uint64_t *bytes, uint32_t nargs,
                           const uint32_t grid[3], CUstream stream)
{
    return launch(k, args, bytes, nargs, grid, stream);
}
