/* tile-tune-worker (docs/TUNING.md, "Fault containment"): the process in which
 * libtileRT's tuner runs the candidates of one tuning job, with its own CUDA context.
 * Started by the tuner (runtime/rt_tune.c), not by people; a program of tools/ since it
 * exits on a fault, which library code must not.
 *
 * The parent (rt_tune.c) cannot run candidates itself: a kernel that faults makes the
 * CUDA context of its process unusable for good, and one that hangs never returns. A
 * fork of the parent is no help (a CUDA context does not survive fork), so the parent
 * spawns this program (posix_spawn of tile-tune-worker), which opens the driver afresh.
 * The job file holds everything it needs: the arguments, a copy of every buffer they
 * point into, and each candidate's cubin. It writes "start I" before candidate I and
 * "done I STATUS ..." after it; after a fault it reports it and exits, and the parent
 * starts a new worker at I + 1; after a hang the parent kills it (SIGKILL) once the
 * timeout passes. The parent's buffers are never touched: candidates run on copies in
 * the worker's own memory.
 *
 * Per candidate: every buffer is reset from the job file, the candidate runs once and
 * the buffers it writes are read back and compared with the default config's (job
 * candidate 0, run first in every worker); then warm-up launches, then timed runs,
 * each after a memset of a buffer twice the L2's size (so no run finds the previous
 * one's data in L2), between two CUDA events, until max_runs, or min_runs and the
 * budget. The figure is the median. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ir/arena.h"
#include "ir/interp.h"
#include "rt_tune.h"

typedef struct W {
    const RtDriver *d;
    const char *base;          /* the job file, mapped */
    const RtJobHeader *h;
    const RtJobArg *args;
    const RtJobRegion *regions;
    const RtJobCand *cands;
    CUdeviceptr *dptr;
    void **ref;                /* the default config's written regions */
    void *out;                 /* scratch for a candidate's */
    CUdeviceptr flush;
    size_t flush_bytes;
    CUevent e0, e1;
    FILE *res;
} W;

static const char *err_name(const W *w, CUresult r)
{
    const char *n = NULL;
    if (w->d->cuGetErrorName(r, &n) || !n) n = "CUDA_ERROR_UNKNOWN";
    return n;
}

/* A failed call during candidate i: reported, and a fault ends the worker. */
static void fail(W *w, uint32_t i, CUresult r, const char *what)
{
    bool sticky = rt_sticky_error(r);
    fprintf(w->res, "done %u %s %s failed: %s (%d)\n", i, sticky ? "fault" : "launch", what,
            err_name(w, r), r);
    fflush(w->res);
    if (sticky) _exit(2);
}

static CUresult reset_buffers(W *w)
{
    CUresult r = 0;
    for (uint32_t j = 0; j < w->h->nregions && !r; j++)
        r = w->d->cuMemcpyHtoD(w->dptr[j], w->base + w->regions[j].data, w->regions[j].size);
    return r;
}

/* An integer argument's value from its bits (as trt_launch's union holds them). */
static int64_t int_value(const RtJobArg *a)
{
    switch (a->kind) {
    case TRT_ARG_BOOL: case TRT_ARG_I8: return (int8_t)a->bits;
    case TRT_ARG_I16: return (int16_t)a->bits;
    case TRT_ARG_I32: return (int32_t)a->bits;
    case TRT_ARG_U8: return (uint8_t)a->bits;
    case TRT_ARG_U16: return (uint16_t)a->bits;
    case TRT_ARG_U32: return (uint32_t)a->bits;
    default: return (int64_t)a->bits;
    }
}

/* A candidate's tensor maps (codegen/cg_tma.c) are encoded here, for this worker's
 * copies of the buffers; the parent checked that the arguments allow them (it launched
 * the default config, or would have fallen back). */
static CUresult launch(W *w, CUfunction f, const RtJobCand *c)
{
    uint64_t vals[TRT_MAX_ARGS];
    int64_t ints[TRT_MAX_ARGS];
    void *params[TRT_MAX_ARGS + CG_MAX_TMA];
    for (uint32_t i = 0; i < w->h->nargs; i++) {
        const RtJobArg *a = &w->args[i];
        vals[i] = a->region >= 0 ? w->dptr[a->region] + a->offset : a->bits;
        ints[i] = int_value(a);
        params[i] = &vals[i];
    }
    RtTmaMaps maps;
    const CgTmaDesc *t = (const CgTmaDesc *)(w->base + c->tma);
    for (uint32_t j = 0; j < c->ntma && j < CG_MAX_TMA; j++) {
        char why[200];
        CgTmaDesc d;
        memcpy(&d, &t[j], sizeof d);
        if (d.ptr_param >= w->h->nargs || !rt_tma_encode(w->d, &d, vals[d.ptr_param], ints, maps.map[j], why, sizeof why))
            return 1;   /* CUDA_ERROR_INVALID_VALUE: reported as a launch failure */
        params[w->h->nargs + j] = maps.map[j];
    }
    return w->d->cuLaunchKernel(f, c->grid[0], c->grid[1], c->grid[2], c->threads, 1, 1,
                                c->shared_bytes, NULL, params, NULL);
}

/* The relative tolerance of a comparison: a config may change the order of a sum. */
static double rtol_of(IrElem e)
{
    switch (e) {
    case IR_F64: return 1e-9;
    case IR_F32: return 1e-4;
    case IR_F16: return 4e-3;
    case IR_BF16: return 3e-2;
    case IR_F8E4M3: case IR_F8E5M2: return 0.25;
    default: return 0;
    }
}

static double value_at(const void *p, IrElem e, size_t i)
{
    const unsigned char *b = p;
    switch (e) {
    case IR_F64: { double v; memcpy(&v, b + 8 * i, 8); return v; }
    case IR_F32: { float v; memcpy(&v, b + 4 * i, 4); return v; }
    case IR_F16: { uint16_t v; memcpy(&v, b + 2 * i, 2); return fp_f16_to_f32(v); }
    case IR_BF16: { uint16_t v; memcpy(&v, b + 2 * i, 2); return fp_bf16_to_f32(v); }
    case IR_F8E4M3: return fp_f8e4m3_to_f32(b[i]);
    case IR_F8E5M2: return fp_f8e5m2_to_f32(b[i]);
    default: return 0;
    }
}

/* Whether got matches ref (floats within the tolerance, scaled by the mean magnitude,
 * NaN matching NaN; everything else bit for bit); else says where in msg. */
static bool same_output(const RtJobRegion *r, const void *got, const void *ref, char *msg, size_t n)
{
    IrElem e = (IrElem)r->elem;
    double rtol = rtol_of(e);
    size_t eb = (size_t)ir_elem_bytes(e), count = eb ? r->size / eb : 0;
    if (!rtol || !count) {
        if (!memcmp(got, ref, r->size)) return true;
        size_t i = 0;
        while (((const unsigned char *)got)[i] == ((const unsigned char *)ref)[i]) i++;
        snprintf(msg, n, "byte %zu of the buffer of '%s' differs from the default config's", i, r->name);
        return false;
    }
    double mean = 0;
    for (size_t i = 0; i < count; i++) {
        double v = fabs(value_at(ref, e, i));
        if (isfinite(v)) mean += v / (double)count;
    }
    for (size_t i = 0; i < count; i++) {
        double a = value_at(got, e, i), b = value_at(ref, e, i);
        if ((isnan(a) && isnan(b)) || a == b) continue;
        if (isfinite(a) && isfinite(b) && fabs(a - b) <= rtol * (mean + fabs(b))) continue;
        snprintf(msg, n, "element %zu of '%s' is %g against %g from the default config", i, r->name, a, b);
        return false;
    }
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Candidate i: load, check, time. Returns false if it could not run (reported). */
static bool run_candidate(W *w, uint32_t i, bool report)
{
    const RtJobCand *c = &w->cands[i];
    const RtDriver *d = w->d;
    CUmodule mod;
    CUfunction f;
    CUresult r = d->cuModuleLoadDataEx(&mod, w->base + c->image, 0, NULL, NULL);
    if (r) return report ? fail(w, i, r, "cuModuleLoadDataEx") : (void)0, false;
    if ((r = d->cuModuleGetFunction(&f, mod, w->h->kernel)) ||
        (c->shared_bytes > RT_STATIC_SHARED_LIMIT &&
         (r = d->cuFuncSetAttribute(f, RT_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED, (int)c->shared_bytes)))) {
        if (report) fail(w, i, r, "cuModuleGetFunction");
        d->cuModuleUnload(mod);
        return false;
    }
    bool ok = false;
    if ((r = reset_buffers(w)) || (r = launch(w, f, c)) || (r = d->cuCtxSynchronize())) {
        if (report) fail(w, i, r, "the check run");
        else if (rt_sticky_error(r)) _exit(4);
        goto out;
    }
    for (uint32_t j = 0; j < w->h->nregions; j++) {
        const RtJobRegion *rg = &w->regions[j];
        if (!rg->written) continue;
        void *dst = i == 0 ? w->ref[j] : w->out;
        if ((r = d->cuMemcpyDtoH(dst, w->dptr[j], rg->size))) {
            if (report) fail(w, i, r, "cuMemcpyDtoH");
            goto out;
        }
        char msg[200];
        if (i != 0 && !same_output(rg, w->out, w->ref[j], msg, sizeof msg)) {
            fprintf(w->res, "done %u wrong-output %s\n", i, msg);
            goto out;
        }
    }
    if (!report) {
        ok = true;
        goto out;
    }
    for (uint32_t k = 0; k < w->h->warmup; k++)
        if ((r = launch(w, f, c))) break;
    if (r || (r = d->cuCtxSynchronize())) {
        fail(w, i, r, "a warm-up run");
        goto out;
    }
    double *t = calloc(w->h->max_runs + 1, sizeof *t), sum = 0, begin = tl_now_ms();
    uint32_t n = 0;
    while (t && n < w->h->max_runs) {
        float ms = 0;
        if ((r = d->cuMemsetD8(w->flush, (unsigned char)n, w->flush_bytes)) ||
            (r = d->cuEventRecord(w->e0, NULL)) || (r = launch(w, f, c)) ||
            (r = d->cuEventRecord(w->e1, NULL)) || (r = d->cuEventSynchronize(w->e1)) ||
            (r = d->cuEventElapsedTime(&ms, w->e0, w->e1))) {
            free(t);
            fail(w, i, r, "a timed run");
            goto out;
        }
        t[n++] = ms;
        sum += ms;
        if (n >= w->h->min_runs && (sum >= w->h->budget_ms || tl_now_ms() - begin >= w->h->budget_ms)) break;
    }
    if (!t) goto out;
    double mn = t[0], mx = t[0];
    for (uint32_t k = 0; k < n; k++) mn = t[k] < mn ? t[k] : mn, mx = t[k] > mx ? t[k] : mx;
    qsort(t, n, sizeof *t, cmp_double);
    double median = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
    fprintf(w->res, "done %u ok %.6f %.6f %.6f %u\n", i, median, mn, mx, n);
    free(t);
    ok = true;
out:
    fflush(w->res);
    d->cuModuleUnload(mod);
    return ok;
}

static bool map_job(int fd, W *w)
{
    struct stat st;
    if (fstat(fd, &st) || (size_t)st.st_size < sizeof(RtJobHeader)) return false;
    size_t size = (size_t)st.st_size;
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) return false;
    w->base = p;
    w->h = p;
    if (memcmp(w->h->magic, RT_TUNE_JOB_MAGIC, 8) || w->h->header_bytes != sizeof *w->h ||
        w->h->nargs > TRT_MAX_ARGS || w->h->nregions > TRT_MAX_ARGS || !w->h->ncands ||
        w->h->ncands > 1u << 20 || w->h->max_runs == 0)
        return false;
    size_t need = sizeof *w->h + w->h->nargs * sizeof(RtJobArg) + w->h->nregions * sizeof(RtJobRegion) +
                  w->h->ncands * sizeof(RtJobCand);
    if (need > size) return false;
    w->args = (const RtJobArg *)(w->base + sizeof *w->h);
    w->regions = (const RtJobRegion *)(w->args + w->h->nargs);
    w->cands = (const RtJobCand *)(w->regions + w->h->nregions);
    for (uint32_t j = 0; j < w->h->nregions; j++)
        if (w->regions[j].data > size || w->regions[j].size > size - w->regions[j].data) return false;
    for (uint32_t i = 0; i < w->h->ncands; i++)
        if (w->cands[i].image > size || w->cands[i].image_len > size - w->cands[i].image ||
            w->cands[i].ntma > CG_MAX_TMA || w->cands[i].tma > size ||
            w->cands[i].ntma * sizeof(CgTmaDesc) > size - w->cands[i].tma ||
            !w->cands[i].image_len || w->cands[i].threads == 0 || w->cands[i].threads > 1024)
            return false;
    for (uint32_t i = 0; i < w->h->nargs; i++)
        if (w->args[i].region >= (int32_t)w->h->nregions ||
            (w->args[i].region >= 0 && w->args[i].offset >= w->regions[w->args[i].region].size))
            return false;
    return true;
}

static int setup(W *w)
{
    const RtDriver *d = w->d;
    CUdevice dev;
    CUcontext ctx;
    int l2 = 0;
    if (d->cuDeviceGet(&dev, w->h->device) || d->cuDevicePrimaryCtxRetain(&ctx, dev) ||
        d->cuCtxSetCurrent(ctx))
        return 3;
    d->cuDeviceGetAttribute(&l2, RT_CU_ATTR_L2_CACHE_SIZE, dev);
    w->flush_bytes = 2 * (size_t)(l2 > (1 << 20) ? l2 : (1 << 20));
    w->dptr = calloc(w->h->nregions + 1, sizeof *w->dptr);
    w->ref = calloc(w->h->nregions + 1, sizeof *w->ref);
    size_t most = 1;
    for (uint32_t j = 0; j < w->h->nregions; j++) most = w->regions[j].size > most ? w->regions[j].size : most;
    w->out = malloc(most);
    if (!w->dptr || !w->ref || !w->out || d->cuMemAlloc(&w->flush, w->flush_bytes) ||
        d->cuEventCreate(&w->e0, 0) || d->cuEventCreate(&w->e1, 0))
        return 3;
    for (uint32_t j = 0; j < w->h->nregions; j++) {
        /* a candidate may read a little past the end it was given: allocate round */
        if (d->cuMemAlloc(&w->dptr[j], (w->regions[j].size + 255) / 256 * 256)) return 3;
        if (w->regions[j].written && !(w->ref[j] = malloc(w->regions[j].size ? w->regions[j].size : 1))) return 3;
    }
    return 0;
}

static void teardown(W *w, size_t job_bytes)
{
    const RtDriver *d = w->d;
    for (uint32_t j = 0; w->dptr && j < w->h->nregions; j++) {
        if (w->dptr[j]) d->cuMemFree(w->dptr[j]);
        free(w->ref[j]);
    }
    if (w->flush) d->cuMemFree(w->flush);
    if (w->e0) d->cuEventDestroy(w->e0);
    if (w->e1) d->cuEventDestroy(w->e1);
    free(w->dptr);
    free(w->ref);
    free(w->out);
    munmap((void *)w->base, job_bytes);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tile-tune-worker JOB_FD RESULT_FD START\n"
                        "(started by libtileRT's tuner: docs/TUNING.md)\n");
        return 64;
    }
    W w = {0};
    unsigned start = (unsigned)atoi(argv[3]);
    if (!map_job(atoi(argv[1]), &w) || start >= w.h->ncands) {
        fprintf(stderr, "tile-tune-worker: the job file is malformed\n");
        return 65;
    }
    if (!(w.res = fdopen(atoi(argv[2]), "w"))) return 66;
    if (!(w.d = rt_driver())) {
        fprintf(stderr, "tile-tune-worker: %s\n", trt_last_error());
        return 3;
    }
    struct stat st;
    size_t job_bytes = fstat(atoi(argv[1]), &st) ? 0 : (size_t)st.st_size;
    int rc = setup(&w);
    if (rc) fprintf(stderr, "tile-tune-worker: cannot set up the device\n");
    /* The reference outputs first, when this worker starts after the default config. */
    else if (start > 0 && !run_candidate(&w, 0, false)) {
        fprintf(stderr, "tile-tune-worker: the default config no longer runs\n");
        rc = 4;
    }
    for (uint32_t i = start; !rc && i < w.h->ncands; i++) {
        fprintf(w.res, "start %u\n", i);
        fflush(w.res);
        run_candidate(&w, i, true);
    }
    fclose(w.res);
    teardown(&w, job_bytes);
    return rc;
}
