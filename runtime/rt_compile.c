/* Building a variant: the slow path of a launch, taken once per specialization class.
 *
 *   cubin key = H("cubin", PTX key, driver version, device compute capability, assembler)
 *   PTX key   = H("ptx", compiler identity, knobs, normalized kernel, class bits, arch,
 *                 PTX version)
 *
 * The compiler identity is a hash of the compiler's sources taken at build time
 * (rt_compiler_identity), the knobs every setting that changes generated code (ir/
 * knobs.def): no entry of another build or other settings is ever served.
 *
 * With a disk cache the variant's cubin is looked up first: a warm start loads it
 * directly (no compilation, no driver PTX JIT, no code generator loaded). On a miss the
 * PTX is looked up, else compiled (loading libtileCG.so the first time), then linked to
 * a cubin by the toolkit's ptxas (rt_ptxas.c: whole-program code; else the driver's
 * cuLink*, or nvJitLink: rt_nvjitlink.c), and both are stored. Each step runs under the key's lock, so
 * concurrent processes compile and link each key once. Without a disk cache the PTX
 * goes straight to cuModuleLoadDataEx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen/codegen.h"   /* the types only: the code is in libtileCG (rt_codegen.c) */
#include "ir/arena.h"
#include "ir/target.h"
#include "passes/passes.h"
#include "passes/specialize.h"
#include "rt_internal.h"

/* ---- the compiler ------------------------------------------------------------------- */
/* The specialization class of each run-time parameter, from the variant's mask (a
 * 2-bit RT_SPEC_* code per parameter; for pointers DIV16 means 16-byte aligned). */
static void classes_of(const TrtKernel *k, uint64_t mask, SpecClass *out)
{
    static const SpecClass ints[4] = {
        [RT_SPEC_NONE] = SPEC_NONE, [RT_SPEC_DIV16] = SPEC_DIV16, [RT_SPEC_ONE] = SPEC_ONE, [RT_SPEC_DIV8] = SPEC_DIV8,
    };
    for (uint32_t i = 0; i < k->nparams; i++) {
        unsigned code = i < 32 ? (unsigned)(mask >> (2 * i)) & 3u : RT_SPEC_NONE;
        if (k->params[i].elem == IR_PTR) out[i] = code == RT_SPEC_DIV16 ? SPEC_ALIGN16 : SPEC_NONE;
        else out[i] = ints[code];
    }
}

/* A comment line naming the kernel's config: its const values and launch keys ("//
 * tile-config: BM=64 BN=128 warps=4 stages=2"), before the PTX. It names the variant
 * in a cubin dump or a profiler, and the mock driver's tuning tests key their fake
 * timings on it. The cache keys hash the IR, not the PTX, so they do not change. */
static void print_config(const IrFunc *f, FILE *out)
{
    for (uint32_t i = 0; i < f->nconsts; i++)
        fprintf(out, " %s=%lld", f->consts[i].name, (long long)f->consts[i].value);
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++)
        if (ir_launch_shown(f, (IrLaunchKey)k))
            fprintf(out, " %s=%d", ir_launch_info[k].name, ir_launch_get(f, (IrLaunchKey)k));
}

static char *with_config_line(const IrFunc *f, char *ptx, TrtStatus *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        tl_free(ptx);
        *st = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
        return NULL;
    }
    fputs("// tile-config:", out);
    print_config(f, out);
    fprintf(out, "\n%s", ptx);
    fclose(out);
    tl_free(ptx);
    char *r = text ? tl_strdup(text) : NULL;
    free(text);
    if (!r) *st = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    return r;
}

/* The launch facts of the plan passes/plan.c made (ir/plan.h). */
static void meta_of_plan(const IrPlan *p, RtKernelMeta *meta)
{
    meta->threads = p->threads;
    meta->shared_bytes = p->shared_bytes;
    meta->ntma = p->ntma;
    meta->flags = (p->persistent ? RT_META_PERSISTENT : 0) | (p->chosen << RT_META_CHOSEN_SHIFT & RT_META_CHOSEN_MASK);
    meta->cluster = p->cluster;
    memcpy(meta->tma, p->tma, sizeof meta->tma);
}

static char *generate(const RtCodegen *cg, TrtKernel *k, IrFunc *f, uint64_t mask, bool checked,
                      RtKernelMeta *meta, TrtStatus *st)
{
    SpecClass classes[TRT_MAX_ARGS];
    classes_of(k, mask, classes);
    PassOptions po = {.check_bounds = checked};   /* the bounds pass ends the GPU pipeline */
    RtBuildTimes *bt = k->building;
    double t0 = tl_now_ms();
    f->module->target = tile_target(k->module->ctx->arch);
    f->module->knobs = k->module->ctx->knobs;
    uint64_t aligned = pass_prepare_gpu(f, classes, &po);
    if (bt) bt->passes_ms += tl_now_ms() - t0;
    CgTimes ct = {0};
    CgOptions o = {.arch = k->module->ctx->arch, .opt_level = 3, .aligned_params = aligned, .times = &ct};
    DiagList *d = ir_ctx_diags(f->module->ctx);
    char *ptx = cg->emit_ptx(f->module, &o, d);
    if (bt) bt->llvm_ms += ct.lower_ms, bt->opt_ms += ct.opt_ms, bt->emit_ms += ct.emit_ms;
    if (!ptx) *st = rt_fail_diags(TRT_ERROR_COMPILE, "code generation failed", d);
    else meta_of_plan(f->plan, meta);
    return ptx ? with_config_line(f, ptx, st) : NULL;
}

/* The code generator is loaded first: without it there is nothing to lower for. */
char *rt_compile_tile(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st)
{
    const RtCodegen *cg = rt_codegen(k->name);
    if (!cg) {
        *st = TRT_ERROR_NO_CODEGEN;
        return NULL;
    }
    IrCtx *ir = NULL;
    double t0 = tl_now_ms();
    IrFunc *f = rt_lower_kernel(k, &ir, st);
    if (k->building) k->building->front_ms += tl_now_ms() - t0;
    char *ptx = f ? generate(cg, k, f, mask, checked, meta, st) : NULL;
    if (ir) ir_ctx_destroy(ir);
    return ptx;
}

/* Bytes of the values loops carry (a matmul's accumulator): each thread holds its share
 * of them in registers for the whole loop. */
static uint64_t carried_bytes(const IrBlock *b)
{
    uint64_t n = 0;
    for (const IrOp *op = b->first; op; op = op->next) {
        if (op->code == IR_OP_FOR || op->code == IR_OP_WHILE) {
            uint64_t here = 0;
            for (uint32_t i = 0; i < op->nresults; i++) {
                const IrType *t = ir_value_type(b->func, op->results[i]);
                uint64_t e = (uint64_t)ir_elem_bytes(t->elem);
                for (uint8_t d = 0; d < t->rank; d++) e *= (uint64_t)t->shape[d];
                here += e;
            }
            n = here > n ? here : n;
        }
        for (uint32_t r = 0; r < op->nregions; r++) {
            uint64_t inner = carried_bytes(&op->regions[r]);
            n = inner > n ? inner : n;
        }
    }
    return n;
}

TrtStatus rt_kernel_resources(TrtKernel *k, uint64_t mask, uint32_t *threads, uint32_t *shared,
                              uint32_t *min_regs)
{
    IrCtx *ir = NULL;
    TrtStatus st = TRT_SUCCESS;
    IrFunc *f = rt_lower_kernel(k, &ir, &st);
    if (f) {
        SpecClass classes[TRT_MAX_ARGS];
        classes_of(k, mask, classes);
        PassOptions po = {0};
        f->module->target = tile_target(k->module->ctx->arch);
        f->module->knobs = k->module->ctx->knobs;
        pass_prepare_gpu(f, classes, &po);   /* the GPU passes alone: no code generator, no LLVM */
        *threads = f->plan->threads, *shared = f->plan->shared_bytes;
        uint64_t regs = *threads ? (carried_bytes(&f->body) + 4ull * *threads - 1) / (4ull * *threads) : 0;
        *min_regs = regs > UINT32_MAX ? UINT32_MAX : (uint32_t)regs;
    }
    if (ir) ir_ctx_destroy(ir);
    return st;
}

/* ---- the driver's part -------------------------------------------------------------- */
/* A driver error with the JIT's log (ptxas's message) appended. */
static TrtStatus fail_with_log(TrtContext *ctx, CUresult r, const char *what, const char *log)
{
    TrtStatus s = rt_ctx_driver_error(ctx, r, what);
    if (log[0]) rt_fail(s, "%s\n%s", trt_last_error(), log);
    return s;
}

TrtStatus rt_load_image(TrtContext *ctx, const void *image, CUmodule *out)
{
    char log[4096] = "";
    int opts[] = {RT_CU_JIT_ERROR_LOG_BUFFER, RT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    CUresult r = ctx->drv->cuModuleLoadDataEx(out, image, 2, opts, vals);
    return r ? fail_with_log(ctx, r, "cuModuleLoadDataEx", log) : TRT_SUCCESS;
}

TrtStatus rt_link_cubin(TrtContext *ctx, const char *ptx, RtBlob *out)
{
    switch (rt_assembler(ctx)) {
    case RT_ASM_PTXAS: return rt_ptxas_assemble(ctx->arch, ptx, out);           /* rt_ptxas.c */
    case RT_ASM_NVJITLINK: return rt_nvjitlink_assemble(ctx->arch, ptx, out);   /* rt_nvjitlink.c */
    case RT_ASM_DRIVER: break;
    }
    const RtDriver *d = ctx->drv;
    char log[4096] = "";
    int opts[] = {RT_CU_JIT_ERROR_LOG_BUFFER, RT_CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof log};
    CUlinkState st;
    CUresult r = d->cuLinkCreate(2, opts, vals, &st);
    if (r) return fail_with_log(ctx, r, "cuLinkCreate", "");
    void *cubin = NULL;
    size_t size = 0;
    TrtStatus s = TRT_SUCCESS;
    if ((r = d->cuLinkAddData(st, RT_CU_JIT_INPUT_PTX, (void *)ptx, strlen(ptx) + 1, "tile.ptx",
                              0, NULL, NULL)))
        s = fail_with_log(ctx, r, "cuLinkAddData", log);
    else if ((r = d->cuLinkComplete(st, &cubin, &size)))
        s = fail_with_log(ctx, r, "cuLinkComplete", log);
    /* The cubin belongs to the link state: copy it before destroying that. */
    else if (!(out->data = tl_malloc(size)))
        s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    else {
        memcpy(out->data, cubin, size);
        out->len = size;
    }
    d->cuLinkDestroy(st);
    return s;
}

/* ---- the occupancy request ----------------------------------------------------------- */
/* Codegen asks for full occupancy (.minnctapersm, codegen/cg_occupancy.c) when its
 * estimate says the registers allow it; only the driver's assembler knows for sure.
 * Where it must spill to meet the request (rmsnorm at 4096 columns on the H200: 12
 * spill stores per thread, 62% of copy bandwidth against 88% without the request),
 * the variant is built again without it. */
static bool spills(TrtContext *ctx, const void *image, const char *name)
{
    CUmodule m;
    CUfunction f;
    int local = 0;
    if (ctx->drv->cuModuleLoadDataEx(&m, image, 0, NULL, NULL)) return false;
    if (!ctx->drv->cuModuleGetFunction(&f, m, name))
        ctx->drv->cuFuncGetAttribute(&local, RT_CU_FUNC_ATTR_LOCAL_SIZE_BYTES, f);
    ctx->drv->cuModuleUnload(m);
    return local > 0;
}

/* Whether the variant built from `ptx` (loaded as `image`: a cubin, or the PTX
 * itself) spills under the occupancy request; if so, blanks the request's directives
 * in ptx (in place: the length stays) for the caller to build again. */
static bool drop_if_spilling(TrtContext *ctx, const TrtKernel *k, char *ptx, const void *image)
{
    if (!strstr(ptx, ".minnctapersm") || !spills(ctx, image, k->name)) return false;
    if (atomic_load(&ctx->flags) & TRT_FLAG_LOG_RECOMPILES)
        fprintf(stderr, "tile: kernel '%s': the assembler spills at full occupancy; "
                        "building it without .minnctapersm\n", k->name);
    for (char *p = ptx; (p = strstr(p, ".minnctapersm"));) {
        size_t n = strcspn(p, "\n");
        memset(p, ' ', n);
        p += n;
    }
    return true;
}

/* ---- keys and the cache ------------------------------------------------------------- */
typedef struct Job {
    TrtKernel *k;
    uint64_t mask;
    bool checked;
    RtKey ptx_key, cubin_key;
    RtOrigin origin;           /* raised by each build step that runs */
} Job;

static void make_keys(Job *j)
{
    TrtContext *ctx = j->k->module->ctx;
    RtHasher *h = rt_hasher_create();
    if (!h) return;   /* a zero key still works: only sharing is lost */
    rt_hash_str(h, "ptx");
    rt_hash_str(h, rt_compiler_identity());
    rt_hash_str(h, ctx->knobs_text);
    rt_hash_bytes(h, j->k->ir_key.b, sizeof j->k->ir_key.b);
    rt_hash_u64(h, j->mask);
    if (j->checked) rt_hash_str(h, "bounds");   /* unchecked keys stay what they were */
    rt_hash_str(h, ctx->arch);
    rt_hash_str(h, RT_PTX_VERSION);
    j->ptx_key = rt_hasher_key(h);
    rt_hasher_destroy(h);
    if (!(h = rt_hasher_create())) return;
    rt_hash_str(h, "cubin");
    rt_hash_bytes(h, j->ptx_key.b, sizeof j->ptx_key.b);
    rt_hash_u64(h, (uint64_t)ctx->drv->version);
    rt_hash_u64(h, (uint64_t)(ctx->cc_major * 10 + ctx->cc_minor));
    switch (rt_assembler(ctx)) {   /* one assembler's cubins never stand in for another's */
    case RT_ASM_PTXAS:
        rt_hash_str(h, "ptxas");
        rt_hash_u64(h, rt_ptxas_version());
        break;
    case RT_ASM_NVJITLINK:
        rt_hash_str(h, "nvjitlink");
        rt_hash_u64(h, rt_nvjitlink_version());
        break;
    case RT_ASM_DRIVER: break;
    }
    j->cubin_key = rt_hasher_key(h);
    rt_hasher_destroy(h);
}

/* Payloads (rt_internal.h): the launch facts and tensor-map recipes, then the PTX (with
 * its NUL) or the cubin. The cluster size rides in the flags word's bits 8..15, so the
 * header keeps its 16 bytes and older entries (0 there) read as no cluster. */
static bool put_payload(RtBlob *out, const RtKernelMeta *meta, const void *p, size_t n)
{
    size_t head = RT_META_BYTES + (size_t)meta->ntma * sizeof(CgTmaDesc);
    if (!(out->data = tl_calloc(1, head + n))) return false;
    uint32_t cluster = meta->cluster > 1 ? meta->cluster << RT_META_CLUSTER_SHIFT & RT_META_CLUSTER_MASK : 0;
    uint32_t w[4] = {meta->threads, meta->shared_bytes, meta->ntma, (meta->flags & ~RT_META_CLUSTER_MASK) | cluster};
    memcpy(out->data, w, sizeof w);
    memcpy((char *)out->data + RT_META_BYTES, meta->tma, (size_t)meta->ntma * sizeof(CgTmaDesc));
    memcpy((char *)out->data + head, p, n);
    out->len = head + n;
    return true;
}

size_t rt_meta_size(const RtBlob *b)
{
    uint32_t w[4];
    if (b->len <= RT_META_BYTES) return 0;
    memcpy(w, b->data, sizeof w);
    size_t head = RT_META_BYTES + (size_t)w[2] * sizeof(CgTmaDesc);
    return w[2] <= CG_MAX_TMA && b->len > head ? head : 0;
}

static bool get_meta(const RtBlob *b, RtKernelMeta *meta)
{
    uint32_t w[4];
    if (!rt_meta_size(b)) return false;
    memcpy(w, b->data, sizeof w);
    memset(meta, 0, sizeof *meta);
    meta->threads = w[0];
    meta->shared_bytes = w[1];
    meta->ntma = w[2];
    meta->flags = w[3] & ~RT_META_CLUSTER_MASK;
    meta->cluster = (w[3] & RT_META_CLUSTER_MASK) >> RT_META_CLUSTER_SHIFT;
    if (!meta->cluster) meta->cluster = 1;
    memcpy(meta->tma, (const char *)b->data + RT_META_BYTES, (size_t)meta->ntma * sizeof(CgTmaDesc));
    return meta->threads > 0 && meta->threads <= 1024 && meta->cluster <= 16;
}

/* The refusal of a required cache (TRT_CACHE_REQUIRE*): the kernel, its variant (consts
 * and specialization bits) and both keys, so that whoever warms the cache knows what
 * was missing, and what `step` (compile, link) the mode forbids. */
static TrtStatus refuse_miss(const Job *j, const char *step)
{
    const TrtKernel *k = j->k;
    char consts[512] = "", ptx[33], cubin[33];
    FILE *out = k->func ? fmemopen(consts, sizeof consts, "w") : NULL;
    if (out) print_config(k->func, out), fclose(out);
    rt_key_hex(&j->ptx_key, ptx);
    rt_key_hex(&j->cubin_key, cubin);
    int mode = atomic_load(&k->module->ctx->cache_mode);
    return rt_fail(TRT_ERROR_CACHE_MISS,
                   "kernel '%s' (variant:%s specialization 0x%llx%s) is not in the cache "
                   "(PTX key %s, cubin key %s), and the cache mode %s forbids %s it; warm the "
                   "cache with this variant (a run in the default mode, or tilec cache import)",
                   k->name, consts, (unsigned long long)j->mask, j->checked ? ", checked" : "", ptx, cubin,
                   mode == TRT_CACHE_REQUIRE_CUBIN ? "require-cubin" : "require", step);
}

static TrtStatus build_ptx(void *ud, RtBlob *out)
{
    Job *j = ud;
    TrtStatus s = TRT_SUCCESS;
    if (atomic_load(&j->k->module->ctx->cache_mode) != TRT_CACHE_DEFAULT) return refuse_miss(j, "compiling");
    RtKernelMeta meta = {.threads = j->k->block};
    j->origin = RT_FROM_COMPILER;
    char *ptx = j->k->module->compile(j->k, j->mask, j->checked, &meta, &s);
    if (!ptx) return s;
    bool ok = put_payload(out, &meta, ptx, strlen(ptx) + 1);
    tl_free(ptx);
    return ok ? TRT_SUCCESS : rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
}

/* rt_link_cubin, timed. */
static TrtStatus link_timed(TrtKernel *k, const char *ptx, RtBlob *out)
{
    double t0 = tl_now_ms();
    TrtStatus s = rt_link_cubin(k->module->ctx, ptx, out);
    if (k->building) k->building->jit_ms += tl_now_ms() - t0, k->building->links++;
    return s;
}

static TrtStatus build_cubin(void *ud, RtBlob *out)
{
    Job *j = ud;
    RtBlob ptx = {0}, cubin = {0};
    RtKernelMeta meta = {0};
    RtTier from;
    if (atomic_load(&j->k->module->ctx->cache_mode) == TRT_CACHE_REQUIRE_CUBIN) return refuse_miss(j, "linking");
    j->origin = RT_FROM_DISK_PTX;
    TrtStatus s = rt_cache_get_or_build_from(j->k->module->ctx->cache, RT_ENTRY_PTX, &j->ptx_key,
                                             build_ptx, j, &ptx, &from);
    if (s) return s;
    if (from == RT_TIER_REMOTE) j->origin = RT_FROM_REMOTE_PTX;
    const char *text = (const char *)ptx.data + rt_meta_size(&ptx);
    if (!get_meta(&ptx, &meta) || ((char *)ptx.data)[ptx.len - 1])
        s = rt_fail(TRT_ERROR_CACHE_IO, "a cached PTX entry of '%s' is malformed", j->k->name);
    if (!s) s = link_timed(j->k, text, &cubin);
    if (!s && drop_if_spilling(j->k->module->ctx, j->k, (char *)text, cubin.data)) {
        rt_blob_free(&cubin);
        s = link_timed(j->k, text, &cubin);
    }
    if (!s && !put_payload(out, &meta, cubin.data, cubin.len))
        s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    rt_blob_free(&ptx);
    rt_blob_free(&cubin);
    return s;
}

static bool use_disk(const TrtContext *ctx)
{
    return ctx->cache && !(atomic_load(&((TrtContext *)ctx)->flags) & TRT_FLAG_NO_DISK_CACHE);
}

/* The image to load: a cubin from (or for) the cache, or PTX without one. */
static TrtStatus variant_image(Job *j, RtBlob *img)
{
    TrtContext *ctx = j->k->module->ctx;
    if (!use_disk(ctx)) {
        TrtStatus s = build_ptx(j, img);
        char *text = s ? NULL : (char *)img->data + rt_meta_size(img);
        double t0 = tl_now_ms();
        if (text) drop_if_spilling(ctx, j->k, text, text);
        if (j->k->building) j->k->building->jit_ms += tl_now_ms() - t0, j->k->building->links++;
        return s;
    }
    RtTier from;
    TrtStatus s = rt_cache_get_or_build_from(ctx->cache, RT_ENTRY_CUBIN, &j->cubin_key, build_cubin,
                                             j, img, &from);
    if (!s && from == RT_TIER_REMOTE) j->origin = RT_FROM_REMOTE_CUBIN;
    return s;
}

TrtStatus rt_variant_image(TrtKernel *k, uint64_t mask, bool checked, RtBlob *img, RtOrigin *origin)
{
    Job j = {k, mask, checked, {{0}}, {{0}}, RT_FROM_DISK_CUBIN};
    make_keys(&j);
    TrtStatus s = variant_image(&j, img);
    *origin = j.origin;
    return s;
}

/* The clusters of v the device runs at once, as the driver counts them: a cluster's
 * CTAs must share a GPC, so this can be less than the resident CTAs over the cluster
 * size. 0 when the driver cannot say (it lacks cuOccupancyMaxActiveClusters, or the
 * query failed). */
static uint32_t active_clusters(const TrtContext *ctx, const RtVariant *v)
{
    if (!ctx->drv->cuOccupancyMaxActiveClusters) return 0;
    RtLaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = RT_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.cluster_dim.x = v->cluster;
    attr.value.cluster_dim.y = attr.value.cluster_dim.z = 1;
    /* the grid only has to be a multiple of the cluster: one cluster asks the question */
    RtLaunchConfig c = {v->cluster, 1, 1, v->threads, 1, 1, v->shared_bytes, NULL, &attr, 1};
    int n = 0;
    return ctx->drv->cuOccupancyMaxActiveClusters(&n, v->fn, &c) || n <= 0 ? 0 : (uint32_t)n;
}

/* A persistent variant's launch: as many programs as the device holds at once (at
 * least one per SM). A cluster kernel's programs are clusters: the driver's count, else
 * the resident CTAs over the cluster size (at least one), which may overestimate it
 * (the clusters beyond run later: the walk is still right). */
static TrtStatus persistent_size(TrtContext *ctx, RtVariant *v)
{
    RtLimits l;
    int regs = 0;
    TrtStatus s = rt_device_limits(ctx, &l);
    if (s) return s;
    CUresult r = ctx->drv->cuFuncGetAttribute(&regs, RT_CU_FUNC_ATTR_NUM_REGS, v->fn);
    if (r) return rt_ctx_driver_error(ctx, r, "cuFuncGetAttribute(NUM_REGS)");
    uint32_t per_sm = rt_blocks_per_sm(&l, v->threads, (uint32_t)regs, v->shared_bytes);
    v->max_programs = (uint32_t)(l.sms > 0 ? l.sms : 1) * (per_sm ? per_sm : 1);
    if (v->cluster > 1) {
        uint32_t n = active_clusters(ctx, v);
        v->max_programs = n ? n : v->max_programs / v->cluster ? v->max_programs / v->cluster : 1;
    }
    return TRT_SUCCESS;
}

TrtStatus rt_variant_load(TrtKernel *k, const RtBlob *img, RtVariant *v)
{
    TrtContext *ctx = k->module->ctx;
    RtKernelMeta meta = {0};
    if (!get_meta(img, &meta))
        return rt_fail(TRT_ERROR_CACHE_IO, "the compiled code of '%s' is malformed", k->name);
    double t0 = tl_now_ms();
    TrtStatus s = rt_load_image(ctx, (const char *)img->data + rt_meta_size(img), &v->mod);
    if (s) return s;
    v->threads = meta.threads;
    v->shared_bytes = meta.shared_bytes;
    v->ntma = 0;
    v->tma = NULL;
    v->max_programs = 0;
    v->cluster = meta.cluster;
    v->chosen = (meta.flags & RT_META_CHOSEN_MASK) >> RT_META_CHOSEN_SHIFT;
    if (meta.ntma) {
        if (!(v->tma = tl_malloc(meta.ntma * sizeof *v->tma))) {
            ctx->drv->cuModuleUnload(v->mod);
            v->mod = NULL;
            return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
        }
        memcpy(v->tma, meta.tma, meta.ntma * sizeof *v->tma);
        v->ntma = meta.ntma;
    }
    CUresult r = ctx->drv->cuModuleGetFunction(&v->fn, v->mod, k->name);
    if (r) s = rt_ctx_driver_error(ctx, r, "cuModuleGetFunction");
    else if (v->shared_bytes > RT_STATIC_SHARED_LIMIT &&
             (r = ctx->drv->cuFuncSetAttribute(v->fn, RT_CU_FUNC_ATTR_MAX_DYNAMIC_SHARED,
                                               (int)v->shared_bytes)))
        s = rt_ctx_driver_error(ctx, r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
    if (!s && (meta.flags & RT_META_PERSISTENT)) s = persistent_size(ctx, v);
    if (s) {
        ctx->drv->cuModuleUnload(v->mod);
        v->mod = NULL;
        tl_free(v->tma);
        v->tma = NULL;
        v->ntma = 0;
    }
    v->times.load_ms = tl_now_ms() - t0;
    return s;
}

TrtStatus rt_variant_build(TrtKernel *k, uint64_t mask, bool checked, unsigned *index)
{
    TrtContext *ctx = k->module->ctx;
    unsigned n = atomic_load(&k->nvariants);
    if (n == RT_MAX_VARIANTS)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' has %d variants already",
                       k->name, RT_MAX_VARIANTS);
    CUresult r = ctx->drv->cuCtxSetCurrent(ctx->cuctx);
    if (r) return rt_driver_error(ctx->drv, r, "cuCtxSetCurrent");
    double t0 = tl_now_ms();
    RtBlob img = {0};
    RtOrigin origin = RT_FROM_DISK_CUBIN;
    RtBuildTimes times = {0};
    k->building = &times;
    TrtStatus s = rt_variant_image(k, mask, checked, &img, &origin);
    k->building = NULL;
    RtVariant v = {mask, checked, NULL, NULL, 0, 0, origin, times, 0, NULL, 0, 1, 0};
    if (!s) s = rt_variant_load(k, &img, &v);
    rt_blob_free(&img);
    v.times.total_ms = tl_now_ms() - t0;
    if (s) return s;
    k->variants[n] = v;
    atomic_store(&k->nvariants, n + 1);   /* publishes the complete variant to launchers */
    *index = n;
    return TRT_SUCCESS;
}
