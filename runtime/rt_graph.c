/* CUDA graphs: trt_graph_begin / trt_graph_end / trt_graph_launch / trt_graph_update.
 *
 * A capture is the runtime's own, not the driver's stream capture: between begin and
 * end, trt_launch on the captured stream of the context resolves its variant and grid
 * as usual (compiling or loading a new variant if it must) and then records the launch
 * (kernel, variant, class mask, grid, arguments) instead of calling cuLaunchKernel.
 * trt_graph_end builds a graph of one kernel node per recorded launch, each depending
 * on the one before (the stream's order), with cuGraphCreate / cuGraphAddKernelNode,
 * and instantiates it. Because the graph's nodes are the recorded launches, in order,
 * node i is launch i, and trt_graph_update can set one node's parameters in the
 * instantiated graph (cuGraphExecKernelNodeSetParams) after checking that the new
 * arguments select the same variant and the same grid. Work that is not a trt_launch on
 * that stream (a memcpy, another library's kernel) is not captured: it runs when it is
 * issued. */
#include <stdio.h>
#include <string.h>

#include "rt_internal.h"
#include "rt_tune.h"

typedef struct RtGraphLaunch {
    TrtKernel *handle;         /* what the caller launched */
    TrtKernel *k;              /* what ran (a config of handle's @autotune, or handle) */
    unsigned variant;
    uint64_t mask;             /* the arguments' class mask when captured */
    uint32_t grid[3];
    bool grid_given;           /* an explicit grid (else the grid(...) clause's) */
    uint32_t nargs;
    TrtArg args[TRT_MAX_ARGS];
} RtGraphLaunch;

struct RtCapture {
    CUstream stream;
    RtGraphLaunch *launches;
    uint32_t n, cap;
};

struct TrtGraph {
    TrtContext *ctx;
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode *nodes;
    RtGraphLaunch *launches;
    uint32_t n;
    pthread_mutex_t lock;      /* trt_graph_update and trt_graph_launch */
};

static TrtStatus graphs_available(TrtContext *ctx, const char *what)
{
    if (!ctx) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: the context is NULL", what);
    if (!ctx->drv)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: a CPU context has no CUDA graphs", what);
    if (!ctx->drv->has_graphs)
        return rt_fail(TRT_ERROR_DRIVER, "%s: CUDA graphs are not available: %s (trt_launch still works)",
                       what, ctx->drv->no_graphs_why);
    return rt_ctx_check_fault(ctx, what);
}

TrtStatus trt_graph_begin(TrtContext *ctx, TrtStream stream)
{
    TrtStatus s = graphs_available(ctx, "trt_graph_begin");
    if (s) return s;
    struct RtCapture *c = tl_calloc(1, sizeof *c);
    if (!c) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    c->stream = stream;
    pthread_mutex_lock(&ctx->graph_lock);
    if (ctx->capture) {
        pthread_mutex_unlock(&ctx->graph_lock);
        tl_free(c);
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "trt_graph_begin: the context is capturing already (one capture per context at a "
                       "time: call trt_graph_end first)");
    }
    ctx->capture = c;
    atomic_store_explicit(&ctx->capturing, 1, memory_order_release);
    pthread_mutex_unlock(&ctx->graph_lock);
    return TRT_SUCCESS;
}

bool rt_graph_capturing(TrtContext *ctx, CUstream stream)
{
    if (!atomic_load_explicit(&ctx->capturing, memory_order_acquire)) return false;
    pthread_mutex_lock(&ctx->graph_lock);
    bool yes = ctx->capture && ctx->capture->stream == stream;
    pthread_mutex_unlock(&ctx->graph_lock);
    return yes;
}

TrtStatus rt_graph_record(TrtContext *ctx, CUstream stream, TrtKernel *handle, TrtKernel *k, unsigned index,
                          uint64_t mask, const uint32_t g[3], bool grid_given, const TrtArg *args,
                          uint32_t nargs, bool *taken)
{
    *taken = false;
    pthread_mutex_lock(&ctx->graph_lock);
    struct RtCapture *c = ctx->capture;
    TrtStatus s = TRT_SUCCESS;
    if (!c || c->stream != stream) goto out;
    *taken = true;
    if (c->n == c->cap) {
        uint32_t cap = c->cap ? 2 * c->cap : 8;
        RtGraphLaunch *p = tl_realloc(c->launches, cap * sizeof *p);
        if (!p) {
            s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory recording a launch into a graph");
            goto out;
        }
        c->launches = p;
        c->cap = cap;
    }
    RtGraphLaunch *l = &c->launches[c->n++];
    memset(l, 0, sizeof *l);
    l->handle = handle;
    l->k = k;
    l->variant = index;
    l->mask = mask;
    memcpy(l->grid, g, sizeof l->grid);
    l->grid_given = grid_given;
    l->nargs = nargs;
    if (nargs) memcpy(l->args, args, nargs * sizeof *args);
out:
    pthread_mutex_unlock(&ctx->graph_lock);
    return s;
}

static void free_capture(struct RtCapture *c)
{
    if (!c) return;
    tl_free(c->launches);
    tl_free(c);
}

void rt_graph_discard(TrtContext *ctx)
{
    free_capture(ctx->capture);
    ctx->capture = NULL;
    atomic_store(&ctx->capturing, 0);
}

/* The node parameters of launch l with its arguments (params must hold l->nargs and
 * the variant's tensor maps, which are encoded into maps; the driver copies both when
 * it makes or updates the node). False, with the thread's error set, when a map cannot
 * be encoded for these arguments (an update that needs another variant). */
static bool node_params(const RtGraphLaunch *l, void **params, RtTmaMaps *maps, RtKernelNodeParams *out)
{
    const RtVariant *v = &l->k->variants[l->variant];
    for (uint32_t i = 0; i < l->nargs; i++) params[i] = (void *)&l->args[i].v;
    char why[200];
    uint64_t refused = v->ntma ? rt_tma_encode_all(l->k->module->ctx->drv, v->tma, v->ntma, l->args, l->nargs, maps,
                                                   why, sizeof why) : 0;
    if (refused) {
        uint32_t p = 0;
        while (!(refused >> p & 1)) p++;
        rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s': argument '%s' cannot be copied by TMA (%s), which the "
                "captured variant does: capture the launch again", l->k->name, l->k->params[p].name, why);
        return false;
    }
    for (uint32_t j = 0; j < v->ntma; j++) params[l->nargs + j] = maps->map[j];
    RtKernelNodeParams p;
    memset(&p, 0, sizeof p);
    p.func = v->fn;
    uint32_t g[3];
    rt_variant_grid(v, l->grid, g);
    p.grid_x = g[0];
    p.grid_y = g[1];
    p.grid_z = g[2];
    p.block_x = v->threads;
    p.block_y = p.block_z = 1;
    p.shared_bytes = v->shared_bytes;
    p.params = params;
    *out = p;
    return true;
}

void trt_graph_destroy(TrtGraph *g)
{
    if (!g) return;
    const RtDriver *d = g->ctx->drv;
    if (g->exec) d->cuGraphExecDestroy(g->exec);
    if (g->graph) d->cuGraphDestroy(g->graph);
    pthread_mutex_destroy(&g->lock);
    tl_free(g->nodes);
    tl_free(g->launches);
    tl_free(g);
}

TrtStatus trt_graph_end(TrtContext *ctx, TrtStream stream, TrtGraph **out)
{
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_graph_end: out is NULL");
    *out = NULL;
    if (!ctx) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_graph_end: the context is NULL");
    if (!ctx->drv) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_graph_end: a CPU context has no CUDA graphs");
    pthread_mutex_lock(&ctx->graph_lock);
    struct RtCapture *c = ctx->capture;
    if (!c || c->stream != stream) {
        pthread_mutex_unlock(&ctx->graph_lock);
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, c ? "trt_graph_end: the context captures another stream"
                                                     : "trt_graph_end: no capture in progress (trt_graph_begin)");
    }
    ctx->capture = NULL;
    atomic_store_explicit(&ctx->capturing, 0, memory_order_release);
    pthread_mutex_unlock(&ctx->graph_lock);

    const RtDriver *d = ctx->drv;
    TrtGraph *g = tl_calloc(1, sizeof *g);
    if (!g || (c->n && !(g->nodes = tl_calloc(c->n, sizeof *g->nodes)))) {
        tl_free(g);
        free_capture(c);
        return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    pthread_mutex_init(&g->lock, NULL);
    g->ctx = ctx;
    g->launches = c->launches;
    g->n = c->n;
    c->launches = NULL;
    free_capture(c);
    CUresult r = d->cuGraphCreate(&g->graph, 0);
    const char *what = "cuGraphCreate";
    for (uint32_t i = 0; !r && i < g->n; i++) {
        void *params[TRT_MAX_ARGS + CG_MAX_TMA];
        RtTmaMaps maps;
        RtKernelNodeParams p;
        if (!node_params(&g->launches[i], params, &maps, &p)) {   /* the launch encoded them: cannot fail */
            TrtStatus s = TRT_ERROR_INVALID_ARGUMENT;
            trt_graph_destroy(g);
            return s;
        }
        what = "cuGraphAddKernelNode";
        r = d->cuGraphAddKernelNode(&g->nodes[i], g->graph, i ? &g->nodes[i - 1] : NULL, i ? 1 : 0, &p);
    }
    if (!r) {
        what = "cuGraphInstantiateWithFlags";
        r = d->cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
    }
    if (r) {
        TrtStatus s = rt_ctx_driver_error(ctx, r, what);
        trt_graph_destroy(g);
        return s;
    }
    *out = g;
    return TRT_SUCCESS;
}

uint32_t trt_graph_num_launches(const TrtGraph *g)
{
    return g ? g->n : 0;
}

TrtStatus trt_graph_launch(TrtGraph *g, TrtStream stream)
{
    if (!g) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_graph_launch: the graph is NULL");
    TrtStatus s = rt_ctx_check_fault(g->ctx, "trt_graph_launch");
    if (s) return s;
    pthread_mutex_lock(&g->lock);
    CUresult r = g->ctx->drv->cuGraphLaunch(g->exec, stream);
    if (!r)
        for (uint32_t i = 0; i < g->n; i++) rt_ctx_note_launch(g->ctx, g->launches[i].k);
    pthread_mutex_unlock(&g->lock);
    return r ? rt_ctx_driver_error(g->ctx, r, "cuGraphLaunch") : TRT_SUCCESS;
}

/* Whether args keep launch l on its variant and grid; else the error says what changed. */
static TrtStatus same_variant(const RtGraphLaunch *l, uint32_t index, const TrtArg *args)
{
    const TrtKernel *k = l->k;
    uint64_t mask = rt_class_mask(k, args);
    if (mask != l->mask)
        for (uint32_t i = 0; i < k->nparams && i < 32; i++)
            if ((mask ^ l->mask) >> (2 * i) & 3)
                return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                               "trt_graph_update: launch %u (kernel '%s'): argument %u ('%s') changed class: "
                               "%s -> %s, which selects another variant: capture the graph again",
                               index, k->name, i + 1, k->params[i].name, rt_spec_class_name(k, i, l->mask),
                               rt_spec_class_name(k, i, mask));
    /* A tuned kernel's config depends on its key's values: only pointers may change. */
    if (l->handle->tune && !l->grid_given)
        for (uint32_t i = 0; i < l->nargs; i++)
            if (args[i].kind != TRT_ARG_PTR && memcmp(&args[i].v, &l->args[i].v, sizeof args[i].v))
                return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                               "trt_graph_update: launch %u (kernel '%s' with @autotune): scalar argument %u "
                               "('%s') changed, which may choose another config: capture the graph again",
                               index, l->handle->name, i + 1, l->handle->params[i].name);
    if (l->grid_given) return TRT_SUCCESS;
    uint32_t g[3];
    TrtStatus s = rt_kernel_grid(l->k, args, g);
    if (s) return s;
    if (memcmp(g, l->grid, sizeof g))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT,
                       "trt_graph_update: launch %u (kernel '%s'): the grid changes from %ux%ux%u to %ux%ux%u: "
                       "capture the graph again", index, k->name, l->grid[0], l->grid[1], l->grid[2], g[0],
                       g[1], g[2]);
    return TRT_SUCCESS;
}

TrtStatus trt_graph_update(TrtGraph *g, uint32_t launch_index, const TrtArg *args, uint32_t nargs)
{
    if (!g) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_graph_update: the graph is NULL");
    if (launch_index >= g->n)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_graph_update: launch %u is out of range (the graph has %u)",
                       launch_index, g->n);
    RtGraphLaunch *l = &g->launches[launch_index];
    TrtStatus s = rt_check_args(l->handle, args, nargs);
    if (s) return s;
    pthread_mutex_lock(&g->lock);   /* l->args may be changing in another thread's update */
    if ((s = same_variant(l, launch_index, args))) {
        pthread_mutex_unlock(&g->lock);
        return s;
    }
    RtGraphLaunch next = *l;
    memcpy(next.args, args, nargs * sizeof *args);
    void *params[TRT_MAX_ARGS + CG_MAX_TMA];
    RtTmaMaps maps;
    RtKernelNodeParams p;
    if (!node_params(&next, params, &maps, &p)) {
        pthread_mutex_unlock(&g->lock);
        return TRT_ERROR_INVALID_ARGUMENT;
    }
    CUresult r = g->ctx->drv->cuGraphExecKernelNodeSetParams(g->exec, g->nodes[launch_index], &p);
    if (!r) memcpy(l->args, args, nargs * sizeof *args);
    pthread_mutex_unlock(&g->lock);
    return r ? rt_ctx_driver_error(g->ctx, r, "cuGraphExecKernelNodeSetParams") : TRT_SUCCESS;
}
