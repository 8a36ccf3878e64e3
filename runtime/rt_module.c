/* Modules and kernels: from .tile text (or hand-written PTX) to handles with a
 * signature, and from a kernel and a specialization class to loaded code.
 *
 * Loading a module only parses it. Getting a kernel lowers it with its const set, which
 * gives the signature that launches are checked against and the normalized form of the
 * kernel (its printed Tile IR: what it calls is inlined, comments and layout are gone)
 * that the cache keys are made from. A variant is built on the first launch of its
 * class: its cubin comes from the disk cache, else is linked from PTX that comes from
 * the cache, else from the compiler (docs/CACHE.md gives the keys). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ast.h"
#include "frontend/frontend.h"
#include "ir/arena.h"
#include "passes/passes.h"
#include "rt_internal.h"
#include "rt_tune.h"

/* ---- diagnostics into the thread's message --------------------------------------- */
TrtStatus rt_fail_diags(TrtStatus s, const char *what, const DiagList *d)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f) {
        diag_print(d, f);
        fclose(f);
    }
    s = rt_fail(s, "%s:\n%s", what, text ? text : "");
    free(text);
    return s;
}

/* ---- loading ------------------------------------------------------------------------ */
static TrtModule *module_new(TrtContext *ctx, RtCompileFn compile)
{
    TrtModule *m = tl_calloc(1, sizeof *m);
    if (!m) return NULL;
    m->ctx = ctx;
    m->compile = compile;
    atomic_fetch_add(&ctx->modules_loaded, 1);   /* the knobs are fixed from now on */
    pthread_mutex_init(&m->lock, NULL);
    return m;
}

TrtStatus trt_module_load_string(TrtContext *ctx, const char *name, const char *text,
                                 TrtModule **out)
{
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_load_string: out is NULL");
    *out = NULL;
    if (!ctx || !text)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_load_string: ctx or text is NULL");
    TrtModule *m = module_new(ctx, rt_compile_tile);
    if (!m || !(m->src = source_from_string(name ? name : "<string>", text)) ||
        !(m->ast_ctx = ir_ctx_create())) {
        trt_module_destroy(m);
        return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    }
    DiagList *d = ir_ctx_diags(m->ast_ctx);
    m->prog = fe_parse(ir_ctx_arena(m->ast_ctx), m->src, d);
    if (!m->prog || d->nerrors) {
        TrtStatus s = rt_fail_diags(TRT_ERROR_COMPILE, "the module has syntax errors", d);
        trt_module_destroy(m);
        return s;
    }
    *out = m;
    return TRT_SUCCESS;
}

TrtStatus trt_module_load_file(TrtContext *ctx, const char *path, TrtModule **out)
{
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_load_file: out is NULL");
    *out = NULL;
    if (!path) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_load_file: path is NULL");
    Source *src = source_read(path);
    if (!src) return rt_fail(TRT_ERROR_NOT_FOUND, "cannot read %s", path);
    TrtStatus s = trt_module_load_string(ctx, path, src->text, out);
    source_free(src);
    return s;
}

static void variant_unload(TrtContext *ctx, RtVariant *v)
{
    if (v->mod) ctx->drv->cuModuleUnload(v->mod);
    tl_free(v->tma);
    v->tma = NULL;
}

static void kernel_destroy(TrtKernel *k)
{
    rt_tune_detach(k);
    unsigned n = atomic_load(&k->nvariants);
    for (unsigned i = 0; i < n; i++) variant_unload(k->module->ctx, &k->variants[i]);
    for (uint32_t i = 0; i < k->nconsts; i++) tl_free((void *)k->consts[i].name);
    for (uint32_t i = 0; k->params && i < k->nparams; i++) tl_free((void *)k->params[i].name);
    if (k->ir) ir_ctx_destroy(k->ir);
    pthread_mutex_destroy(&k->lock);
    pthread_mutex_destroy(&k->grid_lock);
    tl_free(k->consts);
    tl_free(k->params);
    tl_free(k->name);
    tl_free(k);
}

void trt_module_destroy(TrtModule *m)
{
    if (!m) return;
    if (m->nkernels && m->ctx->drv) m->ctx->drv->cuCtxSetCurrent(m->ctx->cuctx);
    if (m->nkernels) rt_ctx_forget_module(m->ctx, m);
    for (uint32_t i = 0; i < m->nkernels; i++) kernel_destroy(m->kernels[i]);
    tl_free(m->kernels);
    if (m->ast_ctx) ir_ctx_destroy(m->ast_ctx);
    source_free(m->src);
    tl_free(m->ptx);
    pthread_mutex_destroy(&m->lock);
    tl_free(m);
}

/* ---- kernels ------------------------------------------------------------------------ */
static TrtKernel *kernel_new(TrtModule *m, const char *name, uint32_t nparams)
{
    TrtKernel *k = tl_calloc(1, sizeof *k);
    if (!k) return NULL;
    k->module = m;
    pthread_mutex_init(&k->lock, NULL);
    pthread_mutex_init(&k->grid_lock, NULL);
    k->name = tl_strdup(name);
    k->nparams = nparams;
    k->params = tl_calloc(nparams ? nparams : 1, sizeof *k->params);
    if (!k->name || !k->params) {
        kernel_destroy(k);
        return NULL;
    }
    return k;
}

static bool add_kernel(TrtModule *m, TrtKernel *k)
{
    TrtKernel **nk = tl_realloc(m->kernels, (m->nkernels + 1) * sizeof *nk);
    if (!nk) return false;
    m->kernels = nk;
    m->kernels[m->nkernels++] = k;
    return true;
}

static bool same_consts(const TrtKernel *k, const TrtConst *c, uint32_t n)
{
    if (k->nconsts != n) return false;
    for (uint32_t i = 0; i < n; i++)
        if (strcmp(k->consts[i].name, c[i].name) || k->consts[i].value != c[i].value)
            return false;
    return true;
}

static TrtKernel *find_kernel(const TrtModule *m, const char *name, const TrtConst *c,
                              uint32_t n)
{
    for (uint32_t i = 0; i < m->nkernels; i++)
        if (!strcmp(m->kernels[i]->name, name) && same_consts(m->kernels[i], c, n))
            return m->kernels[i];
    return NULL;
}

static bool copy_consts(TrtKernel *k, const TrtConst *c, uint32_t n)
{
    k->consts = tl_calloc(n ? n : 1, sizeof *k->consts);
    if (!k->consts) return false;
    for (uint32_t i = 0; i < n; i++) {
        k->consts[i].value = c[i].value;
        if (!(k->consts[i].name = tl_strdup(c[i].name))) return false;
        k->nconsts = i + 1;
    }
    return true;
}

/* Lowers kernel `k->name` of m with k's consts into a new IrCtx. */
IrFunc *rt_lower_kernel(TrtKernel *k, IrCtx **ctx_out, TrtStatus *st)
{
    FeDefine defs[TRT_MAX_ARGS];
    uint32_t n = k->nconsts < TRT_MAX_ARGS ? k->nconsts : TRT_MAX_ARGS;
    for (uint32_t i = 0; i < n; i++) defs[i] = (FeDefine){k->consts[i].name, k->consts[i].value};
    IrCtx *ir = ir_ctx_create();
    *ctx_out = ir;
    if (!ir) return *st = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory"), NULL;
    FeOptions fo = {defs, n, k->name};
    DiagList *d = ir_ctx_diags(ir);
    IrModule *mod = fe_lower(ir, k->module->prog, &fo, d);
    if (mod && !d->nerrors) pass_verify_stage(mod, "lowering", stderr);
    IrFunc *f = mod && !d->nerrors ? ir_module_find(mod, k->name) : NULL;
    if (f && f->kind == IR_FUNC_KERNEL) return f;
    if (d->nerrors) *st = rt_fail_diags(TRT_ERROR_COMPILE, "the kernel has errors", d);
    else *st = rt_fail(TRT_ERROR_NOT_FOUND, "no kernel named '%s' in %s", k->name,
                       k->module->src->name);
    return NULL;
}

static bool read_signature(TrtKernel *k, const IrFunc *f)
{
    for (uint32_t i = 0; i < k->nparams; i++) {
        const IrType *t = ir_value_type(f, f->body.args[i]);
        k->params[i].elem = t->elem;
        k->params[i].pointee = t->pointee;
        k->params[i].name = tl_strdup(f->param_names && f->param_names[i] ? f->param_names[i] : "?");
        if (!k->params[i].name) return false;
    }
    k->block = (unsigned)ir_func_warps(f) * 32;
    return true;
}

/* The normalized kernel: its printed IR carries its body with everything it calls
 * inlined, its const values and its launch config. */
static bool hash_ir(TrtKernel *k, const IrFunc *f)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) return false;
    ir_print_func(f, out);
    fclose(out);
    RtHasher *h = rt_hasher_create();
    if (h) {
        rt_hash_str(h, "tile-ir");
        rt_hash_bytes(h, text, len);
        k->ir_key = rt_hasher_key(h);
    }
    rt_hasher_destroy(h);
    free(text);
    return h != NULL;
}

static TrtStatus make_tile_kernel(TrtModule *m, const char *name, const TrtConst *c,
                                  uint32_t n, bool attach, TrtKernel **out)
{
    TrtStatus s = TRT_SUCCESS;
    TrtKernel *k = kernel_new(m, name, 0);
    if (!k || !copy_consts(k, c, n)) goto oom;
    IrFunc *f = rt_lower_kernel(k, &k->ir, &s);
    if (!f) goto fail;
    k->func = f;
    k->nparams = f->body.nargs;
    tl_free(k->params);
    if (k->nparams > TRT_MAX_ARGS) {
        s = rt_fail(TRT_ERROR_COMPILE, "kernel '%s' has %u parameters; at most %d are supported",
                    name, k->nparams, TRT_MAX_ARGS);
        k->params = NULL;
        goto fail;
    }
    k->params = tl_calloc(k->nparams ? k->nparams : 1, sizeof *k->params);
    if (!k->params || !read_signature(k, f) || !hash_ir(k, f)) goto oom;
    if (attach && (s = rt_tune_attach(k))) goto fail;
    if (attach && !add_kernel(m, k)) goto oom;
    *out = k;
    return TRT_SUCCESS;
oom:
    s = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
fail:
    if (k) kernel_destroy(k);
    return s;
}

/* ---- the names a caller gives ---------------------------------------------------- */
/* An unknown kernel or const is the caller's mistake, not an error in the source:
 * TRT_ERROR_NOT_FOUND, in the API's words, listing what the caller could have meant. */
static const AstItem *declared_kernel(const TrtModule *m, const char *name)
{
    for (uint32_t i = 0; i < m->prog->nitems; i++)
        if (m->prog->items[i].kind == AST_KERNEL && !strcmp(m->prog->items[i].name, name))
            return &m->prog->items[i];
    return NULL;
}

static TrtStatus no_kernel(const TrtModule *m, const char *name)
{
    char *list = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&list, &len);
    if (!f) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    const char *sep = "";
    for (uint32_t i = 0; i < m->prog->nitems; i++)
        if (m->prog->items[i].kind == AST_KERNEL)
            fprintf(f, "%s%s", sep, m->prog->items[i].name), sep = ", ";
    fclose(f);
    TrtStatus s = rt_fail(TRT_ERROR_NOT_FOUND,
                          "trt_module_get_kernel: module '%s' has no kernel '%s' (kernels: %s)",
                          m->src->name, name, *list ? list : "none");
    free(list);
    return s;
}

static bool names_const(const AstItem *it, const char *name)
{
    if (ir_launch_key(name)) return true;
    for (uint32_t i = 0; i < it->nparams; i++)
        if (it->params[i].is_const && !strcmp(it->params[i].name, name)) return true;
    return false;
}

static TrtStatus no_const(const AstItem *it, const char *name)
{
    char *list = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&list, &len);
    if (!f) return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    for (uint32_t i = 0; i < it->nparams; i++)
        if (it->params[i].is_const) fprintf(f, "%s, ", it->params[i].name);
    fputs(ir_launch_names, f);
    fclose(f);
    TrtStatus s = rt_fail(TRT_ERROR_NOT_FOUND,
                          "trt_module_get_kernel: const '%s' is not a parameter of kernel '%s' "
                          "(its consts: %s)", name, it->name, list);
    free(list);
    return s;
}

static TrtStatus check_names(const TrtModule *m, const char *name, const TrtConst *c, uint32_t n)
{
    const AstItem *it = declared_kernel(m, name);
    if (!it) return no_kernel(m, name);
    for (uint32_t i = 0; i < n; i++) {
        if (!c[i].name)
            return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_get_kernel: const %u has no name", i);
        if (!names_const(it, c[i].name)) return no_const(it, c[i].name);
    }
    return TRT_SUCCESS;
}

TrtStatus trt_module_get_kernel(TrtModule *m, const char *name, const TrtConst *consts,
                                uint32_t nconsts, TrtKernel **out)
{
    if (!out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_get_kernel: out is NULL");
    *out = NULL;
    if (!m || !name || (nconsts && !consts))
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_module_get_kernel: NULL module, name or consts");
    pthread_mutex_lock(&m->lock);
    TrtStatus s = TRT_SUCCESS;
    if ((*out = find_kernel(m, name, consts, nconsts))) {
    } else if (m->prog) {
        if (!(s = check_names(m, name, consts, nconsts)))
            s = make_tile_kernel(m, name, consts, nconsts, true, out);
    } else {
        s = rt_fail(TRT_ERROR_NOT_FOUND, "no kernel named '%s' in this PTX module", name);
    }
    pthread_mutex_unlock(&m->lock);
    return s;
}

TrtStatus rt_kernel_create_detached(TrtModule *m, const char *name, const TrtConst *consts,
                                    uint32_t nconsts, TrtKernel **out)
{
    *out = NULL;
    if (!m->prog) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "not a .tile module");
    return make_tile_kernel(m, name, consts, nconsts, false, out);
}

void rt_kernel_free_detached(TrtKernel *k)
{
    if (!k) return;
    if (atomic_load(&k->nvariants)) k->module->ctx->drv->cuCtxSetCurrent(k->module->ctx->cuctx);
    kernel_destroy(k);
}

/* ---- hand-written PTX modules (tests, benchmarks) ---------------------------------- */
static char *compile_ptx_module(TrtKernel *k, uint64_t mask, bool checked, RtKernelMeta *meta, TrtStatus *st)
{
    char *ptx = tl_strdup(k->module->ptx);
    if (!ptx) *st = rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
    return ptx;
}

static TrtKernel *make_ptx_kernel(TrtModule *m, const RtPtxKernel *pk)
{
    TrtKernel *k = kernel_new(m, pk->name, pk->nparams);
    if (!k) return NULL;
    RtHasher *h = rt_hasher_create();
    if (!h) {
        kernel_destroy(k);
        return NULL;
    }
    rt_hash_str(h, "ptx-module");
    rt_hash_str(h, m->ptx);
    rt_hash_str(h, pk->name);
    for (uint32_t i = 0; i < pk->nparams; i++) {
        k->params[i].elem = pk->params[i];
        k->params[i].pointee = pk->params[i] == IR_PTR ? IR_I8 : pk->params[i];
        k->params[i].name = tl_strdup(pk->names ? pk->names[i] : "arg");
        rt_hash_u64(h, (uint64_t)pk->params[i]);
    }
    k->ir_key = rt_hasher_key(h);
    rt_hasher_destroy(h);
    k->block = pk->block;
    return k;
}

TrtStatus rt_module_load_ptx(TrtContext *ctx, const char *ptx, const RtPtxKernel *ks,
                             uint32_t n, TrtModule **out)
{
    *out = NULL;
    if (!ctx || !ptx) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "rt_module_load_ptx: NULL argument");
    TrtModule *m = module_new(ctx, compile_ptx_module);
    if (!m || !(m->ptx = tl_strdup(ptx))) goto oom;
    for (uint32_t i = 0; i < n; i++) {
        TrtKernel *k = ks[i].nparams <= TRT_MAX_ARGS ? make_ptx_kernel(m, &ks[i]) : NULL;
        if (!k) goto oom;
        if (!add_kernel(m, k)) {
            kernel_destroy(k);
            goto oom;
        }
    }
    *out = m;
    return TRT_SUCCESS;
oom:
    trt_module_destroy(m);
    return rt_fail(TRT_ERROR_OUT_OF_MEMORY, "out of memory");
}

/* ---- introspection ------------------------------------------------------------------ */
const char *trt_kernel_name(const TrtKernel *k)
{
    return k->name;
}

uint32_t trt_kernel_num_params(const TrtKernel *k)
{
    return k->nparams;
}

uint32_t trt_kernel_num_variants(const TrtKernel *k)
{
    return atomic_load(&((TrtKernel *)k)->nvariants);
}

int trt_kernel_last_config(const TrtKernel *k, char *buf, size_t n)
{
    const TrtKernel *ran = k ? atomic_load_explicit(&((TrtKernel *)k)->last_run, memory_order_relaxed) : NULL;
    if (!ran) {
        if (n) buf[0] = '\0';
        return -1;
    }
    /* then the keys the schedule chose for the variant that ran (passes/schedule.c) */
    size_t len = (size_t)rt_tune_config_text(ran, buf, n);
    uint32_t chosen = atomic_load(&ran->nvariants) ? ran->variants[atomic_load(&ran->last)].chosen : 0;
    for (int key = 0; key < IR_NUM_LAUNCH_KEYS; key++)
        if (chosen >> key & 1)
            len += (size_t)snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, "%s%s=1", len ? " " : "",
                                    ir_launch_info[key].name);
    return (int)len;
}

void *trt_kernel_last_function(const TrtKernel *k)
{
    TrtKernel *kk = (TrtKernel *)k;
    if (!atomic_load(&kk->nvariants)) return NULL;
    return kk->variants[atomic_load(&kk->last)].fn;
}
