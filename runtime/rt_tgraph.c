/* Tensor graphs: a module's `graph` compiled into launches of Tile kernels.
 *
 * trt_module_get_graph builds the graph IR from the module's syntax tree (the checker's
 * walk, frontend/graph.c), fuses it (passes/graph_fuse.c), lowers every plan kernel to
 * a Tile kernel (passes/graph_lower.c) and loads their source as an inner module, so
 * they compile, cache and tune as hand-written kernels do. A run evaluates the memory
 * plan's buffer sizes for the bound sizes, (re)allocates what grew, and launches the
 * kernels in plan order, each with pointers to its reads and writes, its scalars and
 * the sizes. Before the launches of a run whose kernels need variants not built yet
 * (the first run, a size or pointer of a new class), those variants are built at once,
 * a thread per kernel up to the cores: a cold graph compiles in about the time of its
 * slowest kernel, not the sum. A graph with a grad also runs in two parts
 * (trt_tgraph_run_forward, trt_tgraph_run_backward; passes/graph_split.c): the saved
 * values that cross from one to the other live in memory the caller binds, so the
 * graph's buffers hold nothing from a forward that its backward needs. The two parts
 * are a build of their own (the LM head in Liger's order, whose forward computes the
 * loss before the seed is known; the joint run's reads the seed and needs no scaling
 * kernel: docs/GRAPHS.md "The LM head"), a TrtTensorGraph made on the first call of
 * the split's API, sharing nothing mutable with the joint one; the joint one's
 * bindings of parameters, sizes and results are copied into it before each part.
 * (Not rt_graph.c, which captures CUDA graphs.) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "frontend/ast.h"
#include "frontend/frontend.h"
#include "ir/arena.h"
#include "ir/graph.h"
#include "passes/graph_lower.h"
#include "passes/graph_remat.h"
#include "passes/graph_split.h"
#include "passes/passes.h"
#include "rt_internal.h"

struct TrtTensorGraph {
    TrtContext *ctx;
    IrCtx *ir;               /* owns the graph IR, the plan and the lowering */
    IrGraphModule *gm;
    IrGraph *g;
    const IrGPlan *plan;
    const PassGLowered *low;
    const IrGOp *ret;        /* the return op: its operands are the results */
    TrtModule *kmod;         /* the lowered kernels */
    TrtKernel **kernels;
    TrtKernel ***steps;      /* per plan kernel: a chunked one's step kernels (PassGKernel.steps) */
    int64_t *sizes;          /* per size name */
    TrtArg *params;          /* per parameter */
    TrtDevicePtr *outs;      /* per result */
    bool *size_set, *param_set, *out_set;
    TrtDevicePtr *bufs;      /* per buffer of the plan */
    uint64_t *buf_bytes;
    uint32_t prebuilt, prebuild_threads;   /* the last run's (rt_tgraph_prebuilt) */
    bool rebound;            /* a binding changed since the last prebuild: classes may be new */
    TrtGraphValueInfo *info; /* per parameter, then per result (introspection) */
    uint32_t nuser;          /* the caller's parameters: every one but the seed's (dloss, the last) */
    const PassSplit *split;  /* with a grad: the parts and what crosses, else NULL */
    TrtDevicePtr *saved;     /* per saved value of the split: the caller's memory */
    bool *saved_set;
    TrtGraphValueInfo *saved_info;
    TrtGraphValueInfo seed_info;
    TrtArg seed;             /* the backward part's seed (trt_tgraph_bind_seed; 1 unbound) */
    uint8_t running;         /* the part being launched (1, 2), 0 for the joint run: a saved
                              * value is in the caller's memory in a part, in its buffer joint */
    /* the joint graph (split NULL) with a grad: what its split's build needs, and that
     * build once made (a slot, so that the split's const getters can make it) */
    TrtModule *module;       /* outlives the graph (trt_module_get_graph) */
    const AstItem *item;
    TrtGraphOptions opts;    /* the strings in ir's arena */
    struct SplitSlot *later;
};

typedef struct SplitSlot {
    pthread_mutex_t lock;    /* two threads asking for the split at once build it once */
    TrtTensorGraph *g;       /* the split's build (its split non-NULL), NULL until asked for */
} SplitSlot;

static const AstItem *find_graph(const AstProgram *p, const char *name)
{
    for (uint32_t i = 0; p && i < p->nitems; i++)
        if (p->items[i].kind == AST_GRAPH && p->items[i].name && !strcmp(p->items[i].name, name)) return &p->items[i];
    return NULL;
}

/* The sizes of opts->sizes ("T=4096,V=32000") per size name of g, or NULL without any. */
static bool parse_sizes(const IrGraph *g, const char *spec, Arena *a, const int64_t **out)
{
    *out = NULL;
    if (!spec || !*spec) return true;
    int64_t *sizes = arena_alloc(a, (g->nsizes + 1) * sizeof *sizes);
    for (uint32_t k = 0; k < g->nsizes; k++) sizes[k] = PASS_REMAT_DEFAULT_SIZE;
    for (const char *p = spec; *p;) {
        size_t n = strcspn(p, "="), k;
        if (!p[n]) return false;
        char *end;
        long long v = strtoll(p + n + 1, &end, 10);
        if (end == p + n + 1 || v < 1 || (*end && *end != ',')) return false;
        for (k = 0; k < g->nsizes && (strlen(g->sizes[k]) != n || strncmp(g->sizes[k], p, n)); k++) {}
        if (k < g->nsizes) sizes[k] = v;
        p = *end ? end + 1 : end;
    }
    *out = sizes;
    return true;
}

/* The recomputation pass (passes/graph_remat.c) with the graph's options under opts; the
 * LM head (passes/graph_lmce.c) in Liger's order for the split's build. */
static TrtStatus remat(TrtTensorGraph *G, const TrtGraphOptions *opts, bool split)
{
    Arena *a = ir_ctx_arena(G->ir);
    IrGraph *g = G->g;
    IrRemat r;
    const char *err;
    const int64_t *sizes;
    if (!pass_remat_options(g, opts ? opts->recompute : NULL, opts ? opts->memory_budget : NULL, &r, &err))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': %s", g->name, err);
    if (!parse_sizes(g, opts ? opts->sizes : NULL, a, &sizes))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': the sizes must read NAME=N,NAME=N (N >= 1), not '%s'",
                       g->name, opts->sizes);
    if (g->lce_chunk) pass_graph_lmce(g, g->lce_chunk, split, a);   /* @linear_cross_entropy: before the cut */
    pass_graph_remat(g, &r, sizes, a);
    pass_graph_seed_input(g);
    return ir_graph_verify(g, a, ir_ctx_diags(G->ir)) ? TRT_SUCCESS
           : rt_fail_diags(TRT_ERROR_COMPILE, "internal error: the graph does not verify after recomputation",
                           ir_ctx_diags(G->ir));
}

/* The graph IR, plan and lowering of item `it`, for the joint run or (split) for the
 * forward/backward split, with its PassSplit; TRT_ERROR_COMPILE with the reason. */
static TrtStatus build(TrtTensorGraph *G, const TrtModule *m, const AstItem *it, const TrtGraphOptions *opts,
                       bool split)
{
    Arena *a = ir_ctx_arena(G->ir);
    DiagList *d = ir_ctx_diags(G->ir);
    FeGraphNoIr why = {0};
    G->gm = ir_gmodule_create(a);
    G->g = G->gm ? fe_build_graph(a, m->prog, it, G->gm, d, &why) : NULL;
    if (!G->g && why.what)
        return rt_fail(TRT_ERROR_COMPILE, "graph '%s' cannot be compiled yet: %s (the graph IR has no control flow)",
                       it->name, why.what);
    if (!G->g || !ir_graph_verify(G->g, a, d)) return rt_fail_diags(TRT_ERROR_COMPILE, "the graph has errors", d);
    TrtStatus st = remat(G, opts, split);
    if (st) return st;
    G->plan = pass_graph_fuse(G->g, a);
    const char *err = NULL;
    if (split) G->split = pass_graph_split(G->g, G->plan, a, &err);
    if (err || (split && !G->split))
        return rt_fail(TRT_ERROR_COMPILE, "internal error: graph '%s': the split of its plan: %s", it->name,
                       err ? err : "none");
    G->low = pass_graph_lower(G->g, G->plan, a);
    const char *reason;
    uint32_t k = pass_graph_unlowered(G->low, &reason);
    if (k != UINT32_MAX)
        return rt_fail(TRT_ERROR_COMPILE, "kernel k%u (%s) cannot be lowered to Tile yet: %s", k,
                       G->plan->kernels[k].kind, reason);
    G->ret = &G->g->ops.data[G->g->ops.len - 1];
    for (uint32_t i = 0; i < G->ret->nin; i++) {
        const IrGValue *v = &G->g->values.data[G->ret->in[i]];
        if (v->def == IR_GNONE || G->g->ops.data[v->def].kind == IR_GOP_CONST || G->g->ops.data[v->def].kind == IR_GOP_SIZE)
            return rt_fail(TRT_ERROR_COMPILE, "graph '%s': result %u is a parameter or a constant, which no kernel "
                           "computes (not supported yet)", it->name, i);
    }
    return TRT_SUCCESS;
}

/* 1 as a scalar argument of a float type. */
static TrtArg one_of(IrElem e)
{
    switch (e) {
    case IR_F64: return trt_arg_f64(1.0);
    case IR_F16: return trt_arg_f16(0x3c00);
    case IR_BF16: return trt_arg_bf16(0x3f80);
    default: return trt_arg_f32(1.0f);
    }
}

static TrtStatus alloc_tables(TrtTensorGraph *G)
{
    uint32_t np = (uint32_t)G->g->params.len, ns = G->g->nsizes, no = G->ret->nin, nk = G->plan->nkernels,
             nb = G->plan->nbuffers;
    G->sizes = tl_calloc(ns + 1, sizeof *G->sizes);
    G->size_set = tl_calloc(ns + 1, 1);
    G->params = tl_calloc(np + 1, sizeof *G->params);
    G->param_set = tl_calloc(np + 1, 1);
    G->outs = tl_calloc(no + 1, sizeof *G->outs);
    G->out_set = tl_calloc(no + 1, 1);
    G->kernels = tl_calloc(nk + 1, sizeof *G->kernels);
    G->steps = tl_calloc(nk + 1, sizeof *G->steps);
    G->bufs = tl_calloc(nb + 1, sizeof *G->bufs);
    G->buf_bytes = tl_calloc(nb + 1, sizeof *G->buf_bytes);
    uint32_t nsv = G->split ? G->split->nsaved : 0;
    G->saved = tl_calloc(nsv + 1, sizeof *G->saved);
    G->saved_set = tl_calloc(nsv + 1, 1);
    bool ok = G->sizes && G->size_set && G->params && G->param_set && G->outs && G->out_set && G->kernels && G->steps && G->bufs &&
              G->buf_bytes && G->saved && G->saved_set;
    if (!ok) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    G->nuser = np;
    if (G->g->dloss != IR_GNONE) {   /* the seed: 1, the joint run's, until trt_tgraph_bind_seed */
        G->nuser = np - 1;
        G->params[np - 1] = G->seed = one_of(G->g->values.data[G->g->dloss].type.elem);
        G->param_set[np - 1] = true;
    }
    return TRT_SUCCESS;
}

/* Value v described, its strings in the graph's arena. */
static bool describe(TrtTensorGraph *G, uint32_t v, const char *name, TrtGraphValueInfo *out)
{
    Arena *a = ir_ctx_arena(G->ir);
    const IrTensorType *t = &G->g->values.data[v].type;
    const char **dims = arena_alloc(a, (t->rank + 1) * sizeof *dims);
    if (!dims) return false;
    for (uint32_t d = 0; d < t->rank; d++)
        if (!(dims[d] = ir_size_str(a, t->dims[d]))) return false;
    *out = (TrtGraphValueInfo){.name = name, .kind = t->rank ? TRT_ARG_PTR : rt_arg_kind(t->elem),
                               .elem = ir_elem_name(t->elem), .elem_bytes = (uint32_t)ir_elem_bytes(t->elem),
                               .rank = t->rank, .dims = dims, .type = ir_ttype_str(a, t)};
    return out->type != NULL;
}

static TrtStatus describe_all(TrtTensorGraph *G)
{
    uint32_t np = (uint32_t)G->g->params.len, no = G->ret->nin;
    Arena *a = ir_ctx_arena(G->ir);
    bool ok = (G->info = arena_alloc(a, (np + no + 1) * sizeof *G->info)) != NULL;
    for (uint32_t p = 0; ok && p < np; p++)
        ok = describe(G, G->g->params.data[p], G->g->values.data[G->g->params.data[p]].name, &G->info[p]);
    for (uint32_t i = 0; ok && i < no; i++) {
        char *name = arena_alloc(a, 16);
        ok = name && (snprintf(name, 16, "ret%u", i), describe(G, G->ret->in[i], name, &G->info[np + i]));
    }
    uint32_t ns = G->split ? G->split->nsaved : 0;
    const char **names = ok ? ir_graph_value_names(a, G->g) : NULL;
    ok = ok && names && (G->saved_info = arena_alloc(a, (ns + 1) * sizeof *G->saved_info)) != NULL;
    for (uint32_t i = 0; ok && i < ns; i++)
        ok = describe(G, G->split->saved[i], names[G->split->saved[i]], &G->saved_info[i]);
    if (ok && G->g->dloss != IR_GNONE) ok = describe(G, G->g->dloss, "dloss", &G->seed_info);
    return ok ? TRT_SUCCESS : rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
}

static TrtStatus load_kernels(TrtTensorGraph *G)
{
    char name[256];
    snprintf(name, sizeof name, "graph %s (lowered)", G->g->name);
    TrtStatus s = trt_module_load_string(G->ctx, name, G->low->source, &G->kmod);
    for (uint32_t k = 0; !s && k < G->plan->nkernels; k++) {
        const PassGKernel *pk = &G->low->kernels[k];
        if (G->plan->kernels[k].view) continue;
        if (!pk->nsteps) {
            s = trt_module_get_kernel(G->kmod, pk->name, NULL, 0, &G->kernels[k]);
            continue;
        }
        if (!(G->steps[k] = tl_calloc(pk->nsteps + 1, sizeof *G->steps[k])))
            return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
        for (uint32_t i = 0; !s && i < pk->nsteps; i++)
            s = trt_module_get_kernel(G->kmod, pk->steps[i].name, NULL, 0, &G->steps[k][i]);
    }
    return s;
}

TrtStatus trt_module_get_graph(TrtModule *m, const char *name, TrtTensorGraph **out)
{
    return trt_module_get_graph_with(m, name, NULL, out);
}

/* A joint graph with a grad keeps its module, item and options for its split's build. */
static TrtStatus keep_for_split(TrtTensorGraph *G, TrtModule *m, const AstItem *it, const TrtGraphOptions *opts)
{
    if (!G->g->nfwd) return TRT_SUCCESS;
    Arena *a = ir_ctx_arena(G->ir);
    G->module = m, G->item = it;
    const char *const from[3] = {opts ? opts->recompute : NULL, opts ? opts->memory_budget : NULL, opts ? opts->sizes : NULL};
    const char **to[3] = {&G->opts.recompute, &G->opts.memory_budget, &G->opts.sizes};
    for (uint32_t i = 0; i < 3; i++)
        if (from[i] && !(*to[i] = arena_strdup(a, from[i]))) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    if (!(G->later = tl_calloc(1, sizeof *G->later))) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    pthread_mutex_init(&G->later->lock, NULL);
    return TRT_SUCCESS;
}

/* Graph `it` of m built for the joint run, or (split) for the forward/backward split. */
static TrtStatus create(TrtModule *m, const AstItem *it, const TrtGraphOptions *opts, bool split, TrtTensorGraph **out)
{
    TrtTensorGraph *G = tl_calloc(1, sizeof *G);
    if (!G || !(G->ir = ir_ctx_create())) {
        tl_free(G);
        return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    G->ctx = m->ctx;
    pthread_mutex_lock(&m->lock);
    TrtStatus s = build(G, m, it, opts, split);
    pthread_mutex_unlock(&m->lock);
    if (!s) s = alloc_tables(G);
    if (!s) s = describe_all(G);
    if (!s) s = load_kernels(G);
    if (!s && !split) s = keep_for_split(G, m, it, opts);
    if (s) {
        trt_tgraph_destroy(G);
        return s;
    }
    *out = G;
    return TRT_SUCCESS;
}

TrtStatus trt_module_get_graph_with(TrtModule *m, const char *name, const TrtGraphOptions *opts,
                                    TrtTensorGraph **out)
{
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_get_graph: out is NULL");
    *out = NULL;
    if (!m || !name) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_get_graph: m or name is NULL");
    const AstItem *it = find_graph(m->prog, name);
    if (!it) return rt_fail(TRT_ERROR_NOT_FOUND, "no graph named '%s' in the module", name);
    return create(m, it, opts, false, out);
}

static void free_buffer(TrtTensorGraph *G, uint32_t b)
{
    if (!G->bufs[b]) return;
    if (G->ctx->drv) trt_mem_free(G->ctx, G->bufs[b]);
    else free((void *)(uintptr_t)G->bufs[b]);
    G->bufs[b] = 0;
    G->buf_bytes[b] = 0;
}

void trt_tgraph_destroy(TrtTensorGraph *g)
{
    if (!g) return;
    for (uint32_t b = 0; g->plan && g->bufs && b < g->plan->nbuffers; b++) free_buffer(g, b);
    trt_module_destroy(g->kmod);
    for (uint32_t k = 0; g->plan && g->steps && k < g->plan->nkernels; k++) tl_free(g->steps[k]);
    tl_free(g->steps);
    tl_free(g->sizes);
    tl_free(g->size_set);
    tl_free(g->params);
    tl_free(g->param_set);
    tl_free(g->outs);
    tl_free(g->out_set);
    tl_free(g->kernels);
    tl_free(g->bufs);
    tl_free(g->buf_bytes);
    tl_free(g->saved);
    tl_free(g->saved_set);
    if (g->later) {
        trt_tgraph_destroy(g->later->g);
        pthread_mutex_destroy(&g->later->lock);
        tl_free(g->later);
    }
    if (g->gm) ir_gmodule_destroy(g->gm);
    ir_ctx_destroy(g->ir);
    tl_free(g);
}

/* ---- binding ----------------------------------------------------------------------------- */

TrtStatus trt_tgraph_bind(TrtTensorGraph *g, const char *name, TrtArg value)
{
    if (!g || !name) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind: g or name is NULL");
    for (uint32_t p = 0; p < g->nuser; p++) {
        const IrGValue *v = &g->g->values.data[g->g->params.data[p]];
        if (!v->name || strcmp(v->name, name)) continue;
        TrtArgKind want = v->type.rank ? TRT_ARG_PTR : rt_arg_kind(v->type.elem);
        if (value.kind != want)
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind: parameter '%s' of graph '%s' takes a %s", name,
                           g->g->name, v->type.rank ? "pointer (TRT_ARG_PTR)" : "scalar of its type's kind");
        g->params[p] = value;
        g->param_set[p] = g->rebound = true;
        return TRT_SUCCESS;
    }
    return rt_fail(TRT_ERROR_NOT_FOUND, "graph '%s' has no parameter '%s'", g->g->name, name);
}

TrtStatus trt_tgraph_bind_size(TrtTensorGraph *g, const char *name, int64_t value)
{
    if (!g || !name) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind_size: g or name is NULL");
    for (uint32_t i = 0; i < g->g->nsizes; i++) {
        if (strcmp(g->g->sizes[i], name)) continue;
        if (value < 1 || value > IR_SIZE_MAX)
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind_size: size '%s' must be in 1 .. 2^40, not %lld",
                           name, (long long)value);
        g->sizes[i] = value;
        g->size_set[i] = g->rebound = true;
        return TRT_SUCCESS;
    }
    return rt_fail(TRT_ERROR_NOT_FOUND, "graph '%s' has no size named '%s'", g->g->name, name);
}

uint32_t trt_tgraph_num_outputs(const TrtTensorGraph *g) { return g ? g->ret->nin : 0; }

TrtStatus trt_tgraph_bind_output(TrtTensorGraph *g, uint32_t i, TrtDevicePtr p)
{
    if (!g || i >= g->ret->nin)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind_output: no graph or no result %u", i);
    g->outs[i] = p;
    g->out_set[i] = g->rebound = true;
    return TRT_SUCCESS;
}

/* The bytes of value v for the bound sizes; false past 2^63 or with a size unbound. */
static bool value_bytes(const TrtTensorGraph *G, uint32_t v, uint64_t *out)
{
    const IrTensorType *t = &G->g->values.data[v].type;
    int64_t n = ir_elem_bytes(t->elem), d;
    for (uint32_t i = 0; i < t->rank; i++) {
        if (!ir_size_eval(t->dims[i], G->g->sizes, G->sizes, G->g->nsizes, &d) || d < 0 ||
            __builtin_mul_overflow(n, d, &n))
            return false;
    }
    *out = (uint64_t)n;
    return true;
}

static TrtStatus check_bound(const TrtTensorGraph *G)
{
    for (uint32_t i = 0; i < G->g->nsizes; i++)
        if (!G->size_set[i]) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': size '%s' is not bound", G->g->name, G->g->sizes[i]);
    for (uint32_t p = 0; p < G->g->params.len; p++)
        if (!G->param_set[p])
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': parameter '%s' is not bound", G->g->name,
                           G->g->values.data[G->g->params.data[p]].name);
    for (uint32_t i = 0; i < G->ret->nin; i++)
        if (!G->out_set[i]) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': result %u is not bound", G->g->name, i);
    return TRT_SUCCESS;
}

TrtStatus trt_tgraph_output_bytes(const TrtTensorGraph *g, uint32_t i, uint64_t *bytes)
{
    if (!g || !bytes || i >= g->ret->nin)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_output_bytes: no graph, no result %u or bytes NULL", i);
    if (!value_bytes(g, g->ret->in[i], bytes))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': result %u needs every size bound", g->g->name, i);
    return TRT_SUCCESS;
}

/* ---- running ------------------------------------------------------------------------------ */

/* Grows the buffers that the bound sizes need larger than they are. */
static TrtStatus plan_buffers(TrtTensorGraph *G)
{
    for (uint32_t b = 0; b < G->plan->nbuffers; b++) {
        uint64_t need;
        int64_t sb;   /* a buffer of no value: a chunked kernel's scratch, its bytes in the plan */
        const IrGBuffer *B = &G->plan->buffers[b];
        bool scratch = !B->nvalues, known = ir_gbuffer_bytes(B, G->g->sizes, G->sizes, G->g->nsizes, &sb);
        if (B->cond && known && !sb) continue;   /* a chunked dw's sums with one chunk: no memory */
        if (scratch && known && sb > 0)
            need = (uint64_t)sb;
        else if (scratch || !value_bytes(G, G->plan->buffers[b].values[0], &need))
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': buffer b%u is too large", G->g->name, b);
        if (G->bufs[b] && need <= G->buf_bytes[b]) continue;
        if (G->bufs[b] && G->ctx->drv) {
            TrtStatus s = trt_synchronize(G->ctx);   /* an earlier run may still use it */
            if (s) return s;
        }
        free_buffer(G, b);
        if (G->ctx->drv) {
            TrtStatus s = trt_mem_alloc(G->ctx, need, &G->bufs[b]);
            if (s) return s;
        } else {
            void *p = calloc(1, need ? need : 1);
            if (!p) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "graph '%s': out of memory for buffer b%u", G->g->name, b);
            G->bufs[b] = (TrtDevicePtr)(uintptr_t)p;
        }
        G->buf_bytes[b] = need;
        G->rebound = true;   /* a new pointer for the kernels that use the buffer */
    }
    return TRT_SUCCESS;
}

/* Where value v lives: a parameter's or result's bound memory, else its buffer. */
static bool value_ptr(const TrtTensorGraph *G, uint32_t v, TrtDevicePtr *out)
{
    v = ir_gplan_root(G->plan, v);   /* a view's value is its root's memory */
    for (uint32_t i = 0; G->running && i < G->split->nsaved; i++)
        if (G->split->saved[i] == v) return *out = G->saved[i], true;
    const IrGValue *gv = &G->g->values.data[v];
    if (gv->def == IR_GNONE) return *out = G->params[gv->index].v.ptr, true;
    for (uint32_t i = 0; i < G->ret->nin; i++)
        if (G->ret->in[i] == v) return *out = G->outs[i], true;
    for (uint32_t b = 0; b < G->plan->nbuffers; b++)
        for (uint32_t j = 0; j < G->plan->buffers[b].nvalues; j++)
            if (G->plan->buffers[b].values[j] == v) return *out = G->bufs[b], true;
    return false;
}

/* A lowered kernel's arguments: pointers to its writes and reads (with the bytes from
 * each to the end of its memory), its scalars, the sizes; a chunked kernel's step also
 * its scratch, off (the chunk's first row), end (the row after its last) and, the LM
 * head's, the chunk's rows. */
/* Scratch buffer b as an argument; one the bound sizes do not need (the LM head's dw sums
 * at one chunk: never read or written) is another buffer's memory, so that the tensor map
 * the kernel's block store of it takes is encoded from a real address: the driver may
 * refuse a null one, and the launch would fall back to a variant compiled for it. */
static TrtArg scratch_arg(const TrtTensorGraph *G, uint32_t b, uint64_t *bytes)
{
    for (uint32_t j = 0; !G->bufs[b] && j < G->plan->nbuffers; j++)
        if (G->bufs[j]) return *bytes = G->buf_bytes[j], trt_arg_ptr(G->bufs[j]);
    *bytes = G->buf_bytes[b];
    return trt_arg_ptr(G->bufs[b]);
}

static TrtStatus kernel_args_of(const TrtTensorGraph *G, const PassGKernel *pk, int64_t off, int64_t end, TrtArg *args,
                                uint64_t *bytes)
{
    if (pk->nargs > TRT_MAX_ARGS)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': kernel %s has more than %d arguments", G->g->name,
                       pk->name, TRT_MAX_ARGS);
    for (uint32_t i = 0; i < pk->nargs; i++) {
        const PassGArg *a = &pk->args[i];
        TrtDevicePtr p = 0;
        bytes[i] = TRT_BYTES_UNKNOWN;
        if (a->kind == PASS_GARG_SIZE) args[i] = trt_arg_i64(G->sizes[a->index]);
        else if (a->kind == PASS_GARG_OFFSET) args[i] = trt_arg_i64(off);
        else if (a->kind == PASS_GARG_END) args[i] = trt_arg_i64(end);
        else if (a->kind == PASS_GARG_ROWS) args[i] = trt_arg_i64(end - off);
        else if (a->kind == PASS_GARG_SCRATCH) args[i] = scratch_arg(G, a->index, &bytes[i]);
        else if (a->kind == PASS_GARG_SCALAR) args[i] = G->params[G->g->values.data[a->index].index];
        else if (!value_ptr(G, a->index, &p) || !value_bytes(G, a->index, &bytes[i]))
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': kernel %s: a value has no memory", G->g->name, pk->name);
        else args[i] = trt_arg_ptr(p);
    }
    return TRT_SUCCESS;
}

static TrtStatus launch_one(TrtTensorGraph *G, TrtKernel *kern, const PassGKernel *pk, int64_t off, int64_t end,
                            TrtStream stream)
{
    TrtArg args[TRT_MAX_ARGS];
    uint64_t bytes[TRT_MAX_ARGS];
    TrtStatus s = kernel_args_of(G, pk, off, end, args, bytes);
    if (s) return s;
    if (!G->ctx->drv) return trt_launch_host(kern, args, bytes, pk->nargs, NULL);
    return trt_launch_sized(kern, args, bytes, pk->nargs, NULL, stream);
}

/* The rows of chunked kernel pk's chunks at the bound sizes: all of them while they are
 * at most pk->whole (one chunk, no dw sums: IrGKernel.whole), else pk->chunk. */
static int64_t chunk_rows(const TrtTensorGraph *G, const PassGKernel *pk, int64_t rows)
{
    return ir_lce_one_chunk(pk->rows, pk->whole, G->g->sizes, G->sizes, G->g->nsizes) && rows > 0 ? rows : pk->chunk;
}

/* Plan kernel k; a chunked one (linear_cross_entropy) runs its steps in order once per
 * chunk of rows (chunk_rows), each launch given the chunk's first row, all on the stream;
 * one of steps but no chunk (grad_stats' partial sums, then their sum) runs its steps
 * once. */
static TrtStatus launch(TrtTensorGraph *G, uint32_t k, TrtStream stream)
{
    const PassGKernel *pk = &G->low->kernels[k];
    if (!pk->nsteps) return launch_one(G, G->kernels[k], pk, 0, 0, stream);
    if (pk->chunk <= 0) {
        TrtStatus s = TRT_SUCCESS;
        for (uint32_t i = 0; !s && i < pk->nsteps; i++) s = launch_one(G, G->steps[k][i], &pk->steps[i], 0, 0, stream);
        return s;
    }
    int64_t rows;
    if (!ir_size_eval(pk->rows, G->g->sizes, G->sizes, G->g->nsizes, &rows))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': kernel k%u: its rows need every size bound", G->g->name, k);
    TrtStatus s = TRT_SUCCESS;
    int64_t C = chunk_rows(G, pk, rows);
    for (int64_t off = 0; !s && off < rows; off += C) {
        int64_t end = rows - off > C ? off + C : rows;
        for (uint32_t i = 0; !s && i < pk->nsteps; i++) s = launch_one(G, G->steps[k][i], &pk->steps[i], off, end, stream);
    }
    return s;
}

typedef struct Prebuild {
    RtLaunchTarget *todo;
    uint32_t n;
    atomic_uint next;
} Prebuild;

static void *prebuild_thread(void *p)
{
    Prebuild *b = p;
    for (uint32_t i; (i = atomic_fetch_add(&b->next, 1)) < b->n;)
        (void)rt_launch_target_build(&b->todo[i]);   /* a failure is the launch's to report */
    return NULL;
}

#define PREBUILD_MAX 256

/* What building t's variant costs, roughly: LLVM's and ptxas's time grows with the
 * kernel's dots (each a wgmma or mma loop with its ring of copies) times the ring's
 * stages, and with its ops. The largest go first, so that the slowest kernel is never
 * the last one started (longest processing time first: a cold step's compile is its
 * slowest kernel's, not that plus the tail). */
static uint64_t build_cost(const RtLaunchTarget *t)
{
    const IrFunc *f = t->k->func;
    if (!f) return 0;
    uint64_t dots = (uint64_t)ir_count_ops(&f->body, IR_OP_DOT);
    uint64_t stages = f->stages > 0 ? (uint64_t)f->stages : 1;
    return (dots * stages << 32) + (uint64_t)f->nvalues;
}

static int by_cost(const void *a, const void *b)
{
    uint64_t x = build_cost(a), y = build_cost(b);
    return x < y ? 1 : x > y ? -1 : 0;
}

/* Adds the variant that a launch of kern (of lowered kernel pk, given off and end) runs
 * to todo when it is not built yet and not there already. */
static void prebuild_add(TrtTensorGraph *G, TrtKernel *kern, const PassGKernel *pk, int64_t off, int64_t end,
                         TrtStream stream, RtLaunchTarget *todo, uint32_t *n)
{
    TrtArg args[TRT_MAX_ARGS];
    uint64_t bytes[TRT_MAX_ARGS];
    RtLaunchTarget t;
    if (*n >= PREBUILD_MAX || kernel_args_of(G, pk, off, end, args, bytes) ||
        rt_launch_target(kern, args, bytes, pk->nargs, stream, &t) || t.ready)
        return;
    for (uint32_t i = 0; i < *n; i++)
        if (todo[i].k == t.k && todo[i].mask == t.mask && todo[i].checked == t.checked) return;
    todo[(*n)++] = t;
}

/* The variants this run's launches need and that are not built, built at once (a GPU
 * context, no capture in progress: a capture's launches report their own errors), a
 * thread per variant up to the cores, the costliest first. A kernel of steps (the LM
 * head's chunks, attention's backward, grad_stats) is built with the others: its steps
 * for the first, second and last chunk of the regime the bound rows choose (chunk_rows),
 * whose off and end cover every class a chunk's launch can have (0, multiples of the
 * chunk, the rows; one chunk: 0 and the rows alone). Choosing the configs stays
 * serial (max-autotune benchmarks on the stream); any error here is left for the
 * launch, which retries and reports it. */
static void prebuild(TrtTensorGraph *G, TrtStream stream, uint8_t part)
{
    G->prebuilt = G->prebuild_threads = 0;
    /* the same bindings as the last run: its launches built what they need (a run
     * repeated in a loop pays nothing here) */
    if (!G->rebound || !G->ctx->drv || atomic_load(&G->ctx->capturing)) return;
    G->rebound = false;
    RtLaunchTarget *todo = malloc(PREBUILD_MAX * sizeof *todo);
    if (!todo) return;
    uint32_t n = 0;
    for (uint32_t k = 0; k < G->plan->nkernels; k++) {
        const PassGKernel *pk = &G->low->kernels[k];
        if (G->plan->kernels[k].view || (part && G->split->phase[k] != part)) continue;
        if (!pk->nsteps) {
            prebuild_add(G, G->kernels[k], pk, 0, 0, stream, todo, &n);
            continue;
        }
        int64_t rows = 0, C = 0;
        if (pk->chunk > 0 && !ir_size_eval(pk->rows, G->g->sizes, G->sizes, G->g->nsizes, &rows)) continue;
        if (pk->chunk > 0) C = chunk_rows(G, pk, rows);
        int64_t offs[3] = {0, C, rows > C ? (rows - 1) / C * C : 0};
        for (uint32_t c = 0; c < (pk->chunk > 0 ? 3u : 1u); c++) {
            int64_t off = offs[c], end = 0;
            if (pk->chunk > 0 && off >= rows) continue;
            if (pk->chunk > 0) end = rows - off > C ? off + C : rows;
            for (uint32_t i = 0; i < pk->nsteps; i++)
                prebuild_add(G, G->steps[k][i], &pk->steps[i], off, end, stream, todo, &n);
        }
    }
    if (n < 2) {   /* one: its launch builds it */
        free(todo);
        return;
    }
    qsort(todo, n, sizeof *todo, by_cost);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    uint32_t nt = cores < 1 ? 1 : cores < (long)n ? (uint32_t)cores : n;
    if (nt > 64) nt = 64;
    Prebuild b = {todo, n, 0};
    pthread_t th[64];
    uint32_t started = 0;
    for (; started + 1 < nt; started++)
        if (pthread_create(&th[started], NULL, prebuild_thread, &b)) break;
    prebuild_thread(&b);   /* this thread works too */
    for (uint32_t i = 0; i < started; i++) pthread_join(th[i], NULL);
    free(todo);
    G->prebuilt = n;
    G->prebuild_threads = started + 1;
}

void rt_tgraph_prebuilt(const TrtTensorGraph *g, uint32_t *variants, uint32_t *threads)
{
    *variants = g ? g->prebuilt : 0;
    *threads = g ? g->prebuild_threads : 0;
}

TrtStatus trt_tgraph_run(TrtTensorGraph *g, TrtStream stream)
{
    if (!g) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_run: g is NULL");
    TrtStatus s = check_bound(g);
    if (!s) s = plan_buffers(g);
    if (g->g->dloss != IR_GNONE) g->params[g->nuser] = one_of(g->g->values.data[g->g->dloss].type.elem);
    if (!s) prebuild(g, stream, 0);
    for (uint32_t k = 0; !s && k < g->plan->nkernels; k++)
        if (!g->plan->kernels[k].view) s = launch(g, k, stream);
    return s;
}

/* ---- the forward/backward split ---------------------------------------------------------- */

static TrtStatus no_split(const TrtTensorGraph *g, const char *fn)
{
    if (!g) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: g is NULL", fn);
    return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: graph '%s' has no grad, so no forward and backward parts (run it "
                   "whole: trt_tgraph_run)", fn, g->g->name);
}

/* The split's build of joint graph g into *out, made on the first call (g's module
 * locked while it builds, as trt_module_get_graph locks it); no_split without a grad. */
static TrtStatus split_of(const TrtTensorGraph *g, const char *fn, TrtTensorGraph **out)
{
    *out = NULL;
    if (!g || !g->later) return no_split(g, fn);
    TrtStatus s = TRT_SUCCESS;
    pthread_mutex_lock(&g->later->lock);
    if (!g->later->g && !(s = create(g->module, g->item, &g->opts, true, &g->later->g)))
        g->later->g->kmod->compile = g->kmod->compile;   /* as the joint's (a test's replacement) */
    TrtTensorGraph *S = g->later->g;
    pthread_mutex_unlock(&g->later->lock);
    if (!s && (S->g->params.len != g->g->params.len || S->g->nsizes != g->g->nsizes || S->ret->nin != g->ret->nin))
        s = rt_fail(TRT_ERROR_COMPILE, "internal error: graph '%s': its split's build has other parameters, sizes or "
                    "results than its joint one", g->g->name);
    *out = s ? NULL : S;
    return s;
}

/* dst's n bytes become src's; *changed when they differ. */
static void copy_marking(void *dst, const void *src, size_t n, bool *changed)
{
    if (!memcmp(dst, src, n)) return;
    memcpy(dst, src, n);
    *changed = true;
}

/* The split's bindings of parameters, sizes and results become joint graph g's (the
 * seed and the saved values are the split's own); a change is a rebinding there. */
static void sync_bindings(TrtTensorGraph *S, const TrtTensorGraph *g)
{
    uint32_t np = g->nuser, ns = g->g->nsizes, no = g->ret->nin;
    bool changed = false;
    copy_marking(S->params, g->params, np * sizeof *S->params, &changed);
    copy_marking(S->param_set, g->param_set, np, &changed);
    copy_marking(S->sizes, g->sizes, ns * sizeof *S->sizes, &changed);
    copy_marking(S->size_set, g->size_set, ns, &changed);
    copy_marking(S->outs, g->outs, no * sizeof *S->outs, &changed);
    copy_marking(S->out_set, g->out_set, no, &changed);
    S->rebound |= changed;
}

uint32_t trt_tgraph_num_saved(const TrtTensorGraph *g)
{
    TrtTensorGraph *S = NULL;
    return g && g->later && !split_of(g, "trt_tgraph_num_saved", &S) ? S->split->nsaved : 0;
}

TrtStatus trt_tgraph_saved(const TrtTensorGraph *g, uint32_t i, TrtGraphValueInfo *out)
{
    TrtTensorGraph *S = NULL;
    TrtStatus s = split_of(g, "trt_tgraph_saved", &S);
    if (s) return s;
    if (!out || i >= S->split->nsaved)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_saved: no graph, no saved value %u or out NULL", i);
    *out = S->saved_info[i];
    return TRT_SUCCESS;
}

TrtStatus trt_tgraph_saved_bytes(const TrtTensorGraph *g, uint32_t i, uint64_t *bytes)
{
    TrtTensorGraph *S = NULL;
    TrtStatus s = split_of(g, "trt_tgraph_saved_bytes", &S);
    if (s) return s;
    if (!bytes || i >= S->split->nsaved)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_saved_bytes: no graph, no saved value %u or bytes NULL", i);
    sync_bindings(S, g);
    if (!value_bytes(S, S->split->saved[i], bytes))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "graph '%s': saved value %u needs every size bound", g->g->name, i);
    return TRT_SUCCESS;
}

TrtStatus trt_tgraph_bind_saved(TrtTensorGraph *g, uint32_t i, TrtDevicePtr p)
{
    TrtTensorGraph *S = NULL;
    TrtStatus s = split_of(g, "trt_tgraph_bind_saved", &S);
    if (s) return s;
    if (i >= S->split->nsaved)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind_saved: no graph, or graph '%s' has no saved value %u",
                       g ? g->g->name : "?", i);
    S->saved[i] = p;
    S->saved_set[i] = S->rebound = true;
    return TRT_SUCCESS;
}

TrtStatus trt_tgraph_bind_seed(TrtTensorGraph *g, TrtArg value)
{
    TrtTensorGraph *S = NULL;
    TrtStatus s = split_of(g, "trt_tgraph_bind_seed", &S);
    if (s) return s;
    if (S->g->dloss == IR_GNONE)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind_seed: graph '%s' differentiates a value that is not a "
                       "scalar: its seed is the constant 1 (not supported yet)", g->g->name);
    const IrTensorType *t = &S->g->values.data[S->g->dloss].type;
    if (value.kind != rt_arg_kind(t->elem))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_bind_seed: the seed of graph '%s' is %s and takes a scalar "
                       "of its kind", g->g->name, ir_elem_name(t->elem));
    S->seed = value;
    return TRT_SUCCESS;
}

TrtStatus trt_tgraph_seed(const TrtTensorGraph *g, TrtGraphValueInfo *out)
{
    TrtTensorGraph *S = NULL;
    TrtStatus s = split_of(g, "trt_tgraph_seed", &S);
    if (s) return s;
    if (!out || S->g->dloss == IR_GNONE)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_seed: no graph, out NULL, or graph '%s' has no seed input "
                       "(no grad, or a loss that is not a scalar)", g ? g->g->name : "?");
    *out = S->seed_info;
    return TRT_SUCCESS;
}

uint32_t trt_tgraph_output_part(const TrtTensorGraph *g, uint32_t i)
{
    TrtTensorGraph *S = NULL;
    if (!g || !g->later || i >= g->ret->nin || split_of(g, "trt_tgraph_output_part", &S)) return 0;
    uint32_t v = ir_gplan_root(S->plan, S->ret->in[i]);
    for (uint32_t k = 0; k < S->plan->nkernels; k++)
        for (uint32_t w = 0; !S->plan->kernels[k].view && w < S->plan->kernels[k].nwrites; w++)
            if (ir_gplan_root(S->plan, S->plan->kernels[k].writes[w]) == v) return S->split->phase[k];
    return 0;
}

/* What value v (a root) of a part's kernel needs bound: its parameter or result. */
static TrtStatus check_value(const TrtTensorGraph *G, uint32_t v, const char *fn)
{
    const IrGValue *gv = &G->g->values.data[v];
    if (gv->def == IR_GNONE && gv->index < G->nuser && !G->param_set[gv->index])
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: graph '%s': parameter '%s' is not bound", fn, G->g->name, gv->name);
    for (uint32_t i = 0; i < G->ret->nin; i++)
        if (ir_gplan_root(G->plan, G->ret->in[i]) == v && !G->out_set[i])
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: graph '%s': result %u is not bound", fn, G->g->name, i);
    return TRT_SUCCESS;
}

/* Every size, every saved value, and the parameters and results that part's kernels use. */
static TrtStatus check_part_bound(const TrtTensorGraph *G, uint8_t part, const char *fn)
{
    for (uint32_t i = 0; i < G->g->nsizes; i++)
        if (!G->size_set[i])
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: graph '%s': size '%s' is not bound", fn, G->g->name, G->g->sizes[i]);
    for (uint32_t i = 0; i < G->split->nsaved; i++)
        if (!G->saved_set[i])
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "%s: graph '%s': saved value %u (%s : %s) is not bound "
                           "(trt_tgraph_bind_saved)", fn, G->g->name, i, G->saved_info[i].name, G->saved_info[i].type);
    TrtStatus s = TRT_SUCCESS;
    for (uint32_t k = 0; !s && k < G->plan->nkernels; k++) {
        const IrGKernel *K = &G->plan->kernels[k];
        if (K->view || G->split->phase[k] != part) continue;
        for (uint32_t i = 0; !s && i < K->nreads; i++) s = check_value(G, ir_gplan_root(G->plan, K->reads[i]), fn);
        for (uint32_t i = 0; !s && i < K->nwrites; i++) s = check_value(G, ir_gplan_root(G->plan, K->writes[i]), fn);
    }
    return s;
}

/* Part 1 or 2 of joint graph g: its split's build, with g's bindings, launched. */
static TrtStatus run_part(TrtTensorGraph *g, uint8_t part, TrtStream stream, const char *fn)
{
    TrtTensorGraph *S = NULL;
    TrtStatus s = split_of(g, fn, &S);
    if (s) return s;
    sync_bindings(S, g);
    s = check_part_bound(S, part, fn);
    if (!s) s = plan_buffers(S);
    if (S->g->dloss != IR_GNONE) S->params[S->nuser] = S->seed;
    S->running = part;
    if (!s) prebuild(S, stream, part);
    for (uint32_t k = 0; !s && k < S->plan->nkernels; k++)
        if (!S->plan->kernels[k].view && S->split->phase[k] == part) s = launch(S, k, stream);
    S->running = 0;
    return s;
}

TrtStatus trt_tgraph_run_forward(TrtTensorGraph *g, TrtStream stream)
{
    return run_part(g, 1, stream, "trt_tgraph_run_forward");
}

TrtStatus trt_tgraph_run_backward(TrtTensorGraph *g, TrtStream stream)
{
    return run_part(g, 2, stream, "trt_tgraph_run_backward");
}

/* For tests: every buffer of the plan overwritten with 0xff bytes (NaN in every float
 * type), so a backward that read an intermediate of its forward not bound as saved
 * gives NaN instead of the right answer by luck. */
TrtStatus rt_tgraph_poison_buffers(TrtTensorGraph *g)
{
    if (g && g->later && g->later->g) {   /* the split's build, when a part ran */
        TrtStatus s = rt_tgraph_poison_buffers(g->later->g);
        if (s) return s;
    }
    for (uint32_t b = 0; g && b < g->plan->nbuffers; b++) {
        if (!g->bufs[b]) continue;
        if (!g->ctx->drv) {
            memset((void *)(uintptr_t)g->bufs[b], 0xff, g->buf_bytes[b]);
            continue;
        }
        void *h = malloc(g->buf_bytes[b]);
        if (!h) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
        memset(h, 0xff, g->buf_bytes[b]);
        TrtStatus s = trt_memcpy_htod(g->ctx, g->bufs[b], h, g->buf_bytes[b]);
        free(h);
        if (s) return s;
    }
    return TRT_SUCCESS;
}

TrtModule *rt_tgraph_module(TrtTensorGraph *g) { return g ? g->kmod : NULL; }

bool rt_tgraph_split_built(const TrtTensorGraph *g)
{
    if (!g || !g->later) return false;
    pthread_mutex_lock(&g->later->lock);
    bool built = g->later->g != NULL;
    pthread_mutex_unlock(&g->later->lock);
    return built;
}

/* The kernels that run, in order (the plan's views launch nothing). */
uint32_t trt_tgraph_num_kernels(const TrtTensorGraph *g) { return g ? ir_gplan_num_launched(g->plan) : 0; }
TrtKernel *trt_tgraph_kernel(const TrtTensorGraph *g, uint32_t i)
{
    for (uint32_t k = 0; g && k < g->plan->nkernels; k++)
        if (!g->plan->kernels[k].view && i-- == 0) return g->kernels[k] ? g->kernels[k] : g->steps[k] ? g->steps[k][0] : NULL;
    return NULL;
}
uint32_t trt_tgraph_num_buffers(const TrtTensorGraph *g) { return g ? g->plan->nbuffers : 0; }
uint64_t trt_tgraph_buffer_bytes(const TrtTensorGraph *g, uint32_t i)
{
    return g && i < g->plan->nbuffers ? g->buf_bytes[i] : 0;
}

/* ---- introspection ------------------------------------------------------------------------ */

static const AstItem *graph_item(const TrtModule *m, uint32_t index)
{
    for (uint32_t i = 0; m && m->prog && i < m->prog->nitems; i++)
        if (m->prog->items[i].kind == AST_GRAPH && index-- == 0) return &m->prog->items[i];
    return NULL;
}

uint32_t trt_module_num_graphs(const TrtModule *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; m && m->prog && i < m->prog->nitems; i++) n += m->prog->items[i].kind == AST_GRAPH;
    return n;
}

const char *trt_module_graph_name(const TrtModule *m, uint32_t i)
{
    const AstItem *it = graph_item(m, i);
    return it ? it->name : NULL;
}

uint32_t trt_tgraph_num_params(const TrtTensorGraph *g) { return g ? g->nuser : 0; }

TrtStatus trt_tgraph_param(const TrtTensorGraph *g, uint32_t i, TrtGraphValueInfo *out)
{
    if (!g || !out || i >= g->nuser)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_param: no graph, no parameter %u or out NULL", i);
    *out = g->info[i];
    return TRT_SUCCESS;
}

TrtStatus trt_tgraph_output(const TrtTensorGraph *g, uint32_t i, TrtGraphValueInfo *out)
{
    if (!g || !out || i >= g->ret->nin)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_tgraph_output: no graph, no result %u or out NULL", i);
    *out = g->info[g->g->params.len + i];
    return TRT_SUCCESS;
}

uint32_t trt_tgraph_num_sizes(const TrtTensorGraph *g) { return g ? g->g->nsizes : 0; }
const char *trt_tgraph_size_name(const TrtTensorGraph *g, uint32_t i)
{
    return g && i < g->g->nsizes ? g->g->sizes[i] : NULL;
}
