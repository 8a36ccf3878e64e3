/* tilec run --graph --fused / --compare-fused / --device gpu: a graph's lowered kernels
 * run through libtileRT's graph API (runtime/rt_tgraph.c), on a CPU context (the Tile
 * IR interpreter) or on the GPU. Tensors travel as raw little-endian bytes of their
 * element type (ir_gtensor_store / ir_gtensor_load). */
#include "tools/tilec_graph.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/arena.h"
#include "runtime/rt_internal.h"
#include "tile/tile_rt.h"

typedef struct Run {
    TrtContext *ctx;
    TrtModule *mod;
    TrtTensorGraph *tg;
    bool gpu;
    void **host;             /* per parameter and result: host bytes */
    TrtDevicePtr *dev;       /* per parameter and result: device memory (gpu) */
    uint64_t *bytes;
    uint32_t n;
} Run;

static bool failed(TrtStatus s, char *err, size_t errlen)
{
    if (s) snprintf(err, errlen, "%s", trt_last_error());
    return s != TRT_SUCCESS;
}

/* A scalar parameter as its TrtArg: the element's bytes in the union (little-endian). */
static TrtArg scalar_arg(const IrGTensor *t)
{
    TrtArg a;
    memset(&a, 0, sizeof a);
    a.kind = rt_arg_kind(t->elem);   /* the runtime's own mapping (rt_launch.c) */
    ir_gtensor_store(t, &a.v);
    return a;
}

/* Memory for slot i of n bytes, holding `t` when it is given. */
static TrtStatus place(Run *R, uint32_t i, uint64_t bytes, const IrGTensor *t, TrtDevicePtr *out)
{
    R->bytes[i] = bytes;
    R->host[i] = calloc(1, bytes ? bytes : 1);
    if (!R->host[i]) return TRT_ERROR_OUT_OF_MEMORY;
    if (t) ir_gtensor_store(t, R->host[i]);
    if (!R->gpu) return *out = (TrtDevicePtr)(uintptr_t)R->host[i], TRT_SUCCESS;
    TrtStatus s = trt_mem_alloc(R->ctx, bytes, &R->dev[i]);
    if (!s && t) s = trt_memcpy_htod(R->ctx, R->dev[i], R->host[i], bytes);
    *out = R->dev[i];
    return s;
}

static TrtStatus bind_all(Run *R, const IrGraph *g, const IrGTensor *params, const int64_t *sizes)
{
    TrtStatus s = TRT_SUCCESS;
    for (uint32_t k = 0; !s && k < g->nsizes; k++) s = trt_tgraph_bind_size(R->tg, g->sizes[k], sizes[k]);
    for (uint32_t p = 0; !s && p < g->params.len; p++) {
        if (g->params.data[p] == g->dloss) continue;   /* the seed: 1 unless bound (trt_tgraph_bind_seed) */
        const IrGTensor *t = &params[p];
        TrtDevicePtr d = 0;
        const char *name = g->values.data[g->params.data[p]].name;
        if (!t->rank) s = trt_tgraph_bind(R->tg, name, scalar_arg(t));
        else if (!(s = place(R, p, (uint64_t)t->n * (uint64_t)ir_elem_bytes(t->elem), t, &d)))
            s = trt_tgraph_bind(R->tg, name, trt_arg_ptr(d));
    }
    for (uint32_t i = 0; !s && i < trt_tgraph_num_outputs(R->tg); i++) {
        uint64_t bytes = 0;
        TrtDevicePtr d = 0;
        s = trt_tgraph_output_bytes(R->tg, i, &bytes);
        if (!s) s = place(R, (uint32_t)g->params.len + i, bytes, NULL, &d);
        if (!s) s = trt_tgraph_bind_output(R->tg, i, d);
    }
    return s;
}

/* The results into outs, shaped by the graph's return types. */
static TrtStatus fetch(Run *R, const IrGraph *g, const int64_t *sizes, IrGTensor *outs)
{
    const IrGOp *ret = &g->ops.data[g->ops.len - 1];
    for (uint32_t i = 0; i < ret->nin; i++) {
        const IrTensorType *t = &g->values.data[ret->in[i]].type;
        int64_t dims[64] = {0};
        uint32_t slot = (uint32_t)g->params.len + i;
        for (uint32_t d = 0; d < t->rank && d < 64; d++) ir_size_eval(t->dims[d], g->sizes, sizes, g->nsizes, &dims[d]);
        if (t->rank > 64 || !ir_gtensor_alloc(&outs[i], t->elem, t->rank, dims)) return TRT_ERROR_OUT_OF_MEMORY;
        TrtStatus s = R->gpu ? trt_memcpy_dtoh(R->ctx, R->host[slot], R->dev[slot], R->bytes[slot]) : TRT_SUCCESS;
        if (s) return s;
        ir_gtensor_load(&outs[i], R->host[slot]);
    }
    return TRT_SUCCESS;
}

static void run_free(Run *R)
{
    for (uint32_t i = 0; i < R->n; i++) {
        if (R->dev && R->dev[i]) trt_mem_free(R->ctx, R->dev[i]);
        if (R->host) free(R->host[i]);
    }
    free(R->host);
    free(R->dev);
    free(R->bytes);
    trt_tgraph_destroy(R->tg);
    trt_module_destroy(R->mod);
    trt_context_destroy(R->ctx);
}

bool tilec_graph_run_lowered(const Source *src, const IrGraph *g, const IrGTensor *params, const int64_t *sizes,
                             bool gpu, const TrtGraphOptions *opts, IrGTensor *outs, char *err, size_t errlen)
{
    Run R = {.gpu = gpu, .n = (uint32_t)g->params.len + g->ops.data[g->ops.len - 1].nin};
    R.host = calloc(R.n + 1, sizeof *R.host);
    R.dev = calloc(R.n + 1, sizeof *R.dev);
    R.bytes = calloc(R.n + 1, sizeof *R.bytes);
    if (!R.host || !R.dev || !R.bytes) tl_oom();
    TrtStatus s = trt_context_create(gpu ? 0 : TRT_DEVICE_CPU, TRT_MODE_FROM_ENV, NULL, &R.ctx);
    if (!s) s = trt_module_load_string(R.ctx, src->name, src->text, &R.mod);
    if (!s) s = trt_module_get_graph_with(R.mod, g->name, opts, &R.tg);
    if (!s) s = bind_all(&R, g, params, sizes);
    if (!s) s = trt_tgraph_run(R.tg, NULL);
    if (!s) s = trt_synchronize(R.ctx);
    if (!s) s = fetch(&R, g, sizes, outs);
    bool ok = !failed(s, err, errlen);
    if (s == TRT_ERROR_OUT_OF_MEMORY && !*trt_last_error()) snprintf(err, errlen, "out of memory");
    run_free(&R);
    return ok;
}

/* Results zeroed, in host and device memory. */
static TrtStatus zero_outputs(Run *R, uint32_t first, uint32_t n)
{
    TrtStatus s = TRT_SUCCESS;
    for (uint32_t i = first; !s && i < first + n; i++) {
        memset(R->host[i], 0, R->bytes[i]);
        if (R->gpu) s = trt_memcpy_htod(R->ctx, R->dev[i], R->host[i], R->bytes[i]);
    }
    return s;
}

/* Memory of the caller's for every saved value, in slots from `first`. */
static TrtStatus bind_saved(Run *R, uint32_t first)
{
    TrtStatus s = TRT_SUCCESS;
    for (uint32_t i = 0; !s && i < trt_tgraph_num_saved(R->tg); i++) {
        uint64_t bytes = 0;
        TrtDevicePtr d = 0;
        s = trt_tgraph_saved_bytes(R->tg, i, &bytes);
        if (!s) s = place(R, first + i, bytes, NULL, &d);
        if (!s) s = trt_tgraph_bind_saved(R->tg, i, d);
    }
    return s;
}

/* The forward part, the graph's buffers overwritten (only bound memory may carry a value
 * to the backward), the backward part. */
static TrtStatus run_parts(Run *R)
{
    TrtStatus s = trt_tgraph_run_forward(R->tg, NULL);
    if (!s) s = trt_synchronize(R->ctx);
    if (!s) s = rt_tgraph_poison_buffers(R->tg);
    if (!s) s = trt_tgraph_run_backward(R->tg, NULL);
    if (!s) s = trt_synchronize(R->ctx);
    return s;
}

/* The first result whose bytes differ from joint's, or UINT32_MAX. */
static uint32_t first_difference(const Run *R, uint32_t first, uint32_t n, void *const *joint)
{
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(R->host[first + i], joint[i], R->bytes[first + i])) return i;
    return UINT32_MAX;
}

static bool grow_slots(Run *R, uint32_t n)
{
    void **h = realloc(R->host, (n + 1) * sizeof *h);
    if (h) R->host = h;
    TrtDevicePtr *d = realloc(R->dev, (n + 1) * sizeof *d);
    if (d) R->dev = d;
    uint64_t *b = realloc(R->bytes, (n + 1) * sizeof *b);
    if (b) R->bytes = b;
    if (!h || !d || !b) return false;
    for (uint32_t i = R->n; i <= n; i++) R->host[i] = NULL, R->dev[i] = 0, R->bytes[i] = 0;
    R->n = n;
    return true;
}

bool tilec_graph_run_split(const Source *src, const IrGraph *g, const IrGTensor *params, const int64_t *sizes,
                           bool gpu, const TrtGraphOptions *opts, IrGTensor *outs, char *err, size_t errlen)
{
    uint32_t np = (uint32_t)g->params.len, nouts = g->ops.data[g->ops.len - 1].nin;
    Run R = {.gpu = gpu, .n = np + nouts};
    R.host = calloc(R.n + 1, sizeof *R.host);
    R.dev = calloc(R.n + 1, sizeof *R.dev);
    R.bytes = calloc(R.n + 1, sizeof *R.bytes);
    void **joint = calloc(nouts + 1, sizeof *joint);
    if (!R.host || !R.dev || !R.bytes || !joint) tl_oom();
    TrtStatus s = trt_context_create(gpu ? 0 : TRT_DEVICE_CPU, TRT_MODE_FROM_ENV, NULL, &R.ctx);
    if (!s) s = trt_module_load_string(R.ctx, src->name, src->text, &R.mod);
    if (!s) s = trt_module_get_graph_with(R.mod, g->name, opts, &R.tg);
    if (!s && !grow_slots(&R, np + nouts + trt_tgraph_num_saved(R.tg))) tl_oom();
    if (!s) s = bind_all(&R, g, params, sizes);
    if (!s) s = trt_tgraph_run(R.tg, NULL);
    if (!s) s = trt_synchronize(R.ctx);
    if (!s) s = fetch(&R, g, sizes, outs);
    for (uint32_t i = 0; !s && i < nouts; i++) {
        if (!(joint[i] = malloc(R.bytes[np + i] + 1))) tl_oom();
        memcpy(joint[i], R.host[np + i], R.bytes[np + i]);
    }
    if (!s) s = zero_outputs(&R, np, nouts);
    if (!s) s = bind_saved(&R, np + nouts);
    if (!s) s = run_parts(&R);
    for (uint32_t i = 0; !s && i < nouts; i++) ir_gtensor_free(&outs[i]);
    if (!s) s = fetch(&R, g, sizes, outs);
    bool ok = !failed(s, err, errlen);
    if (s == TRT_ERROR_OUT_OF_MEMORY && !*trt_last_error()) snprintf(err, errlen, "out of memory");
    uint32_t d = ok ? first_difference(&R, np, nouts, joint) : UINT32_MAX;
    if (d != UINT32_MAX)
        snprintf(err, errlen, "ret%u differs between the joint run and the split run (the forward, then the backward "
                 "through the %u saved values)", d, trt_tgraph_num_saved(R.tg));
    ok &= d == UINT32_MAX;
    for (uint32_t i = 0; i < nouts; i++) free(joint[i]);
    free(joint);
    run_free(&R);
    return ok;
}

static double rel_tol(IrElem e)
{
    switch (e) {
    case IR_F64: return 1e-12;
    case IR_F32: return 1e-5;
    case IR_F16: return 1.0 / 512;
    case IR_BF16: return 1.0 / 64;
    default: return 0.25;   /* f8 */
    }
}

bool tilec_graph_close(const IrGTensor *x, const IrGTensor *y, int64_t *at)
{
    if (x->elem != y->elem || x->n != y->n) return *at = -1, false;
    for (int64_t e = 0; e < x->n; e++) {
        *at = e;
        if (x->i && x->i[e] != y->i[e]) return false;
        if (!x->f || (isnan(x->f[e]) && isnan(y->f[e])) || x->f[e] == y->f[e]) continue;
        double tol = rel_tol(x->elem), m = fmax(fabs(x->f[e]), fabs(y->f[e]));
        if (!(fabs(x->f[e] - y->f[e]) <= tol * m + tol)) return false;
    }
    return true;
}
