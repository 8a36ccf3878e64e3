/* The resource plan's text form (ir/plan.h): printed after `launch {...}`; irparse.c
 * reads it back. */
#include "ir/plan.h"

#include <inttypes.h>
#include <string.h>

#include "ir/ir.h"

static const char *const kind_names[] = {"scratch", "buffer", "barriers"};

const char *ir_smem_kind_name(IrSmemKind k) { return kind_names[k]; }

int ir_smem_kind_of(const char *name, size_t n)
{
    for (int k = 0; k < 3; k++)
        if (strlen(kind_names[k]) == n && !strncmp(kind_names[k], name, n)) return k;
    return -1;
}

/* [[param, value], ...] of the recipe's first `rank` dimensions or strides */
static void print_terms(FILE *out, const int32_t *param, const int64_t *value, uint32_t rank)
{
    fputc('[', out);
    for (uint32_t d = 0; d < rank; d++)
        fprintf(out, "%s[%" PRId32 ", %" PRId64 "]", d ? ", " : "", param[d], value[d]);
    fputc(']', out);
}

static void print_recipe(FILE *out, const IrTmaRecipe *r)
{
    fprintf(out, "{param = %u, elem = %u, swizzle = %u, box = [", r->ptr_param, r->elem_bytes, r->swizzle);
    for (uint32_t d = 0; d < r->rank && d < 4; d++) fprintf(out, "%s%u", d ? ", " : "", r->box[d]);
    fprintf(out, "], index = %u, dims = ", r->index_bits);
    print_terms(out, r->dim_param, r->dim_value, r->rank);
    fputs(", strides = ", out);
    print_terms(out, r->stride_param, r->stride_value, r->rank);
    fputc('}', out);
}

static void print_map(FILE *out, const IrPlan *p)
{
    fputs("    map = [", out);
    for (uint32_t i = 0; i < p->nregions; i++)
        fprintf(out, "%s{kind = %s, at = %u, bytes = %u, align = %u}", i ? ",\n           " : "",
                ir_smem_kind_name(p->regions[i].kind), p->regions[i].at, p->regions[i].bytes, p->regions[i].align);
    fputs("],\n", out);
}

static void print_tma(FILE *out, const IrPlan *p)
{
    fputs("    tma = [", out);
    for (uint32_t i = 0; i < p->ntma; i++) {
        if (i) fputs(",\n           ", out);
        print_recipe(out, &p->tma[i]);
    }
    fputs("],\n    tma_uses = [", out);
    for (uint32_t i = 0; i < p->nuses; i++) {
        fputs(i ? ", [" : "[", out);
        for (uint32_t j = 0; j < p->uses[i].n; j++) fprintf(out, "%s[%u, %u]", j ? ", " : "", p->uses[i].param[j], p->uses[i].map[j]);
        fputc(']', out);
    }
    fputs("],\n", out);
}

void ir_plan_print(const IrFunc *f, FILE *out)
{
    const IrPlan *p = f->plan;
    if (!p) return;
    fprintf(out, " plan {\n    threads = %u, groups = %u, group_threads = %u, producer_threads = %u,\n", p->threads,
            p->groups, p->group_threads, p->producer_threads);
    fprintf(out, "    regs = {producer = %u, consumers = %u},\n", p->producer_regs, p->consumer_regs);
    fprintf(out, "    smem = {bytes = %u, scratch = %u, stride = %u, buffers_at = %u, align = %u},\n", p->shared_bytes,
            p->scratch, p->scratch_stride, p->buffers_at, p->buffer_align);
    print_map(out, p);
    print_tma(out, p);
    fprintf(out, "    persistent = %d, cluster = %u, min_ctas = %u, occupancy = {ctas = %u, max_regs = %u}",
            p->persistent ? 1 : 0, p->cluster, p->min_ctas, p->occupancy, p->occupancy_max_regs);
    if (p->chosen) {   /* the keys the schedule chose (passes/schedule.c) */
        const char *sep = "";
        fputs(",\n    chosen = [", out);
        for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++)
            if (p->chosen >> k & 1) fprintf(out, "%s%s", sep, ir_launch_info[k].name), sep = ", ";
        fputc(']', out);
    }
    fputs("\n}", out);
}
