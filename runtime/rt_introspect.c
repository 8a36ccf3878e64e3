/* Introspection: a module's kernels and their parameters as declared, and a kernel
 * handle's run-time parameters as lowered.
 *
 * The declared view comes from the parsed program, before any const value is chosen,
 * so a binding can tell compile-time from run-time arguments, and knows each pointer's
 * element type, before it asks for a kernel. A const default is reported when it is an
 * integer or bool literal (the frontend evaluates other defaults when it lowers). The
 * launch keys come from ir/launch.def, so that bindings take every key the compiler
 * does. */
#include <string.h>

#include "frontend/ast.h"
#include "rt_internal.h"
#include "rt_tune.h"

static const AstItem *kernel_item(const TrtModule *m, uint32_t index, const char *name)
{
    if (!m || !m->prog) return NULL;
    uint32_t n = 0;
    for (uint32_t i = 0; i < m->prog->nitems; i++) {
        const AstItem *it = &m->prog->items[i];
        if (it->kind != AST_KERNEL) continue;
        if (name ? !strcmp(it->name, name) : n == index) return it;
        n++;
    }
    return NULL;
}

uint32_t trt_module_num_kernels(const TrtModule *m)
{
    uint32_t n = 0;
    for (uint32_t i = 0; m && m->prog && i < m->prog->nitems; i++)
        n += m->prog->items[i].kind == AST_KERNEL;
    return n;
}

const char *trt_module_kernel_name(const TrtModule *m, uint32_t i)
{
    const AstItem *it = kernel_item(m, i, NULL);
    return it ? it->name : NULL;
}

static TrtStatus find_item(const TrtModule *m, const char *name, const void *out,
                           const AstItem **it)
{
    if (!m || !name || !out)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel introspection: NULL module, name or out");
    if (!(*it = kernel_item(m, 0, name)))
        return rt_fail(TRT_ERROR_NOT_FOUND, "no kernel named '%s' in %s", name,
                       m->src ? m->src->name : "this module");
    return TRT_SUCCESS;
}

TrtStatus trt_module_kernel_info(const TrtModule *m, const char *name, TrtKernelInfo *out)
{
    const AstItem *it;
    TrtStatus s = find_item(m, name, out, &it);
    if (s) return s;
    memset(out, 0, sizeof *out);
    out->name = it->name;
    out->nparams = it->nparams;
    for (uint32_t i = 0; i < it->nparams; i++) out->nruntime += !it->params[i].is_const;
    out->has_grid = it->ngrid > 0;
    return TRT_SUCCESS;
}

/* An integer or bool literal, possibly negated. */
static bool literal_value(const AstExpr *e, int64_t *v)
{
    if (!e) return false;
    if (e->kind == AST_INT || e->kind == AST_BOOL) return *v = (int64_t)e->ival, true;
    if (e->kind == AST_UNARY && e->op == '-' && e->lhs && e->lhs->kind == AST_INT)
        return *v = -(int64_t)e->lhs->ival, true;
    return false;
}

static void describe_elem(IrElem e, TrtParamInfo *out)
{
    out->elem = ir_elem_name(e);
    out->elem_bytes = (uint32_t)ir_elem_bytes(e);
}

TrtStatus trt_module_kernel_param(const TrtModule *m, const char *name, uint32_t i,
                                  TrtParamInfo *out)
{
    const AstItem *it;
    TrtStatus s = find_item(m, name, out, &it);
    if (s) return s;
    if (i >= it->nparams)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' has %u parameters, not %u",
                       name, it->nparams, i + 1);
    const AstParam *p = &it->params[i];
    memset(out, 0, sizeof *out);
    out->name = p->name;
    out->is_const = p->is_const;
    out->has_default = p->is_const && literal_value(p->default_value, &out->default_value);
    for (uint32_t j = 0; j < i; j++) out->runtime_index += !it->params[j].is_const;
    IrElem e = IR_I32;
    if (p->type && !ir_elem_from_name(p->type->name, strlen(p->type->name), &e))
        return rt_fail(TRT_ERROR_COMPILE, "kernel '%s': parameter '%s' has the unknown type '%s'",
                       name, p->name, p->type->name);
    out->is_pointer = p->type && p->type->kind == AST_TYPE_PTR;
    out->kind = out->is_pointer ? TRT_ARG_PTR : rt_arg_kind(e);
    describe_elem(e, out);
    return TRT_SUCCESS;
}

TrtStatus trt_kernel_param(const TrtKernel *k, uint32_t i, TrtParamInfo *out)
{
    if (!k || !out) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_kernel_param: NULL kernel or out");
    if (i >= k->nparams)
        return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "kernel '%s' has %u run-time parameters, not %u",
                       k->name, k->nparams, i + 1);
    const RtParam *p = &k->params[i];
    memset(out, 0, sizeof *out);
    out->name = p->name;
    out->is_pointer = p->elem == IR_PTR;
    out->kind = rt_arg_kind(p->elem);
    out->runtime_index = i;
    describe_elem(out->is_pointer ? p->pointee : p->elem, out);
    return TRT_SUCCESS;
}

TrtStatus trt_kernel_writes(const TrtKernel *k, uint64_t *mask)
{
    if (!k || !mask) return rt_fail(TRT_ERROR_INVALID_ARGUMENT, "trt_kernel_writes: NULL kernel or mask");
    *mask = k->func ? rt_written_params(k->func) : ~0ull;
    return TRT_SUCCESS;
}

TrtStatus trt_launch_key(uint32_t i, const char **name, int64_t *min, int64_t *max, int64_t *def)
{
    if (i >= IR_NUM_LAUNCH_KEYS)
        return rt_fail(TRT_ERROR_NOT_FOUND, "trt_launch_key: there are %d launch keys, not %u", IR_NUM_LAUNCH_KEYS, i + 1);
    const IrLaunchInfo *k = &ir_launch_info[i];
    if (name) *name = k->name;
    if (min) *min = k->min;
    if (max) *max = k->max;
    if (def) *def = k->def;
    return TRT_SUCCESS;
}
