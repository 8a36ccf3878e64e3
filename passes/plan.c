/* plan: the kernel's resource plan (ir/plan.h), the last GPU pass.
 *
 * Requires: the GPU pipeline ran (every tile has its layout, the rings and staging
 * buffers are placed: local_alloc offsets, the producer op holds its register budgets).
 * Guarantees: f->plan says everything the kernel asks of the GPU, decided here once:
 * codegen lowers by it, the runtime launches by it and the tuner prunes by it, and none
 * of them recomputes a figure. The IR is not changed otherwise.
 *
 *   kernel @mm(...) launch {warps = 4, stages = 3, ws = 1} {        (no plan)
 * becomes
 *   kernel @mm(...) launch {warps = 4, stages = 3, ws = 1} plan {threads = 256, ...} {
 *
 * Shared memory: the scratch first, the largest need of one op (ir_op_scratch_bytes;
 * ops while the buffers are live count against the area's start, those outside may
 * reuse it); a ping-pong kernel's consumer warpgroups each their own, 128-byte aligned;
 * then the buffer area at the next 128 bytes, or 1024 when it holds NVMMA stages
 * (ir_buffer_area_at: wgmma's swizzle patterns repeat every 1024 bytes, and the
 * descriptors assume a stage starts on a repeat); the total rounded to 16. */
#include <string.h>

#include "ir/arena.h"
#include "ir/layout.h"
#include "ir/layout_map.h"
#include "ir/target.h"
#include "passes/passes.h"

/* ---- shared memory ---------------------------------------------------------------------- */
typedef struct Smem {
    uint32_t live, free_;        /* scratch while buffers are live, and elsewhere */
} Smem;

/* op (or an op of its regions) reads or writes a buffer: uses a local_alloc's value. */
static bool uses_buffer(const IrFunc *k, const IrOp *op)
{
    for (uint32_t i = 0; i < op->noperands; i++) {
        const IrOp *d = k->values[op->operands[i]].def;
        if (d && d->code == IR_OP_LOCAL_ALLOC) return true;
    }
    for (uint32_t r = 0; r < op->nregions; r++)
        for (const IrOp *o = op->regions[r].first; o; o = o->next)
            if (uses_buffer(k, o)) return true;
    return false;
}

/* In a block, buffers are live from the first local_alloc to the last op that uses
 * one (a loop using them counts whole); outside, scratch may reuse the area. */
static void scratch_of(const IrFunc *k, const IrBlock *blk, bool live, Smem *s)
{
    const IrOp *last = NULL;
    for (const IrOp *op = blk->first; op; op = op->next)
        if (op->code == IR_OP_LOCAL_ALLOC || uses_buffer(k, op)) last = op;
    bool here = false;
    for (const IrOp *op = blk->first; op; op = op->next) {
        if (op->code == IR_OP_LOCAL_ALLOC) here = true;
        uint32_t b = ir_op_scratch_bytes(k, op);
        uint32_t *slot = live || here ? &s->live : &s->free_;
        if (b > *slot) *slot = b;
        for (uint32_t r = 0; r < op->nregions; r++) scratch_of(k, &op->regions[r], live || here, s);
        if (op == last) here = false;
    }
}

/* A local_alloc of an NVMMA buffer (swizzle_bytes: read by wgmma). */
static bool has_nvmma_buffer(const IrFunc *k)
{
    for (uint32_t v = 0; v < k->nvalues; v++) {
        const IrOp *d = k->values[v].def;
        if (d && d->code == IR_OP_LOCAL_ALLOC && k->values[v].type->layout && k->values[v].type->layout->swizzle_bytes)
            return true;
    }
    return false;
}

static bool is_barriers(const IrType *t)
{
    return t->elem == IR_I64 && t->rank == 3 && t->shape[1] == 1 && t->shape[2] == 1;
}

static bool same_region(const IrSmemRegion *a, const IrSmemRegion *b)
{
    return a->kind == b->kind && a->at == b->at && a->bytes == b->bytes;
}

/* The map: the scratch, then every buffer in offset order (once: loops that share a
 * ring each have their local_alloc of it). */
static void map_regions(IrFunc *f, IrPlan *p)
{
    Arena *a = ir_ctx_arena(f->module->ctx);
    uint32_t n = 1;
    for (uint32_t v = 0; v < f->nvalues; v++) n += f->values[v].def && f->values[v].def->code == IR_OP_LOCAL_ALLOC;
    p->regions = arena_alloc(a, n * sizeof *p->regions);
    p->regions[0] = (IrSmemRegion){IR_SMEM_SCRATCH, 0, p->scratch, 128};
    p->nregions = 1;
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrOp *d = f->values[v].def;
        if (!d || d->code != IR_OP_LOCAL_ALLOC) continue;
        const IrType *t = f->values[v].type;
        IrSmemRegion r = {is_barriers(t) ? IR_SMEM_BARRIERS : IR_SMEM_BUFFER, p->buffers_at + (uint32_t)d->attr.i,
                          (uint32_t)(ir_type_numel(t) * ir_elem_bytes(t->elem)),
                          is_barriers(t) ? 8 : t->layout && t->layout->swizzle_bytes ? 1024 : 16};
        bool seen = false;
        for (uint32_t j = 1; j < p->nregions && !seen; j++) seen = same_region(&p->regions[j], &r);
        if (seen) continue;
        uint32_t i = p->nregions++;
        while (i > 1 && p->regions[i - 1].at > r.at) p->regions[i] = p->regions[i - 1], i--;
        p->regions[i] = r;
    }
}

static void plan_smem(IrFunc *f, IrPlan *p)
{
    Smem s = {0, 0};
    scratch_of(f, &f->body, false, &s);
    if (p->groups > 1) {   /* each warpgroup its own scratch, one after the other */
        uint32_t one = s.live > s.free_ ? s.live : s.free_;
        p->scratch_stride = (one + 127) & ~127u;
        s.live = s.free_ = p->scratch_stride * p->groups;
    }
    uint32_t buffers = ir_buffer_area_bytes(f);
    p->scratch = s.live > s.free_ ? s.live : s.free_;
    p->buffer_align = has_nvmma_buffer(f) ? 1024 : 128;
    p->buffers_at = buffers ? ir_buffer_area_at(s.live, has_nvmma_buffer(f)) : 0;
    uint32_t end = p->buffers_at + buffers;
    p->shared_bytes = ((end > p->scratch ? end : p->scratch) + 15) & ~15u;
    map_regions(f, p);
}

/* ---- tensor maps -------------------------------------------------------------------------- */
/* Where the pointer operand of a tma_copy or tma_store is; its shapes, strides and
 * offsets follow it (x 2 each), then its outer pair where it has one. */
static uint32_t ptr_operand(const IrOp *op) { return op->code == IR_OP_TMA_STORE ? 2 : 3; }

/* The recipe of one tma_copy's or tma_store's map for pointer parameter `param` (one of
 * those its pointer may be); false if an operand is not known on the host. The
 * buffer's NVMMA form gives the box: swizzle / element bytes along the contiguous axis,
 * all of the buffer's rows across it (a store's staging chunk is one box; a multicast
 * copy shared by rows, each CTA's rows of it). */
static bool recipe_of(const IrFunc *f, const IrOp *op, uint32_t param, IrTmaRecipe *out)
{
    const IrType *bt = ir_value_type(f, op->operands[0]);
    const IrLayout *l = bt->layout;
    int fast = l->order[0] - 1, slow = 1 - fast, eb = ir_elem_bytes(bt->elem);
    memset(out, 0, sizeof *out);
    if (bt->rank != 3 || !l->swizzle_bytes) return false;
    out->ptr_param = param;
    out->elem_bytes = (uint32_t)eb;
    out->rank = 2;
    out->swizzle = (uint32_t)l->swizzle_bytes;
    out->box[0] = (uint16_t)(l->swizzle_bytes / eb);
    out->box[1] = (uint16_t)bt->shape[1 + slow];
    int n = ir_cluster_size(f);
    if (op->code == IR_OP_TMA_COPY && op->attr.i && ir_multicast_share(bt, n) == IR_MULTICAST_ROWS)
        out->box[1] = (uint16_t)(out->box[1] / n);
    uint32_t sh = ptr_operand(op) + 1;
    out->index_bits = (uint32_t)ir_elem_bytes(ir_value_type(f, op->operands[sh])->elem) * 8;
    int axes[2] = {fast, slow};
    int64_t mult;
    for (int d = 0; d < 2; d++) {
        if (!blockload_host_scalar(f, op->operands[sh + axes[d]], &out->dim_param[d], &out->dim_value[d], &mult) ||
            !blockload_host_scalar(f, op->operands[sh + 2 + axes[d]], &out->stride_param[d], &out->stride_value[d], &mult))
            return false;
    }
    uint32_t ox = ir_block_outer(f, op);
    if (ox) {   /* the outer dimension: x's coordinate, box 1 (blockload.c's tma_outer) */
        out->rank = 3;
        out->box[2] = 1;
        out->dim_param[2] = -1;
        out->dim_value[2] = IR_TMA_OUTER_EXTENT;
        if (!blockload_host_scalar(f, op->operands[ox + 1], &out->stride_param[2], &out->stride_value[2], &mult))
            return false;
    }
    return out->stride_param[0] < 0 && out->stride_value[0] == 1;
}

typedef struct Maps {
    const IrFunc *f;
    IrPlan *p;
    IrTmaUse *uses;
    uint32_t nuses, cap;
    bool ok;
} Maps;

/* Op's maps, added to the plan where new, and its use. */
static void add_maps(IrOp *op, void *ud)
{
    Maps *m = ud;
    if (!m->ok || (op->code != IR_OP_TMA_COPY && op->code != IR_OP_TMA_STORE)) return;
    uint32_t ps[4];
    IrTmaUse u = {0, {0}, {0}};
    int np = blockload_ptr_params(m->f, op->operands[ptr_operand(op)], ps, 4);
    m->ok = np > 0;
    for (int i = 0; i < np && m->ok; i++) {
        IrTmaRecipe d;
        uint32_t j = 0;
        if (!(m->ok = recipe_of(m->f, op, ps[i], &d))) break;
        while (j < m->p->ntma && memcmp(&m->p->tma[j], &d, sizeof d)) j++;
        if (j == m->p->ntma && !(m->ok = j < IR_PLAN_MAX_TMA)) break;
        if (j == m->p->ntma) m->p->tma[m->p->ntma++] = d;
        u.param[u.n] = ps[i], u.map[u.n++] = j;
    }
    if (m->ok && m->nuses < m->cap) m->uses[m->nuses++] = u;
}

static void count_tma(IrOp *op, void *ud) { *(uint32_t *)ud += op->code == IR_OP_TMA_COPY || op->code == IR_OP_TMA_STORE; }

/* The maps of the kernel's tma_copy and tma_store ops, in program order (codegen finds
 * an op's use by the same order, ir_walk's). A map that cannot be described on the host
 * leaves the plan with none: codegen reports it. */
static void plan_tma(IrFunc *f, IrPlan *p)
{
    uint32_t n = 0;
    ir_walk(&f->body, count_tma, &n);
    Maps m = {f, p, arena_alloc(ir_ctx_arena(f->module->ctx), (n + 1) * sizeof(IrTmaUse)), 0, n, true};
    ir_walk(&f->body, add_maps, &m);
    p->uses = m.uses;
    p->nuses = m.ok ? m.nuses : 0;
    if (!m.ok) p->ntma = 0;
}

/* ---- threads, registers, occupancy ---------------------------------------------------------- */
typedef struct Scan {
    const IrOp *producer;
    bool persistent, heavy;      /* heavy: a dot or a loop (register needs the estimate cannot see) */
} Scan;

static void scan_op(IrOp *op, void *ud)
{
    Scan *s = ud;
    if (op->code == IR_OP_PRODUCER) s->producer = op;
    s->persistent |= op->code == IR_OP_LAUNCHED_PROGRAMS;
    s->heavy |= op->code == IR_OP_DOT || op->code == IR_OP_FOR || op->code == IR_OP_WHILE;
}

/* Occupancy: ptxas picks a kernel's registers alone, so a memory-bound kernel of few
 * registers may run too few threads to keep enough loads in flight; `.minnctapersm
 * threads_per_sm / threads` caps its registers so that the SM fills. Only for kernels
 * without dots and loops (their register needs are their live tiles, which codegen's
 * count of the optimized code sees), and only where that count is at most the target's
 * occupancy_max_regs (more would spill: codegen measures, the rule is here). */
static void plan_threads(IrFunc *f, IrPlan *p, const TileTarget *t)
{
    Scan s = {NULL, false, false};
    ir_walk(&f->body, scan_op, &s);
    p->groups = (uint32_t)ir_consumer_groups(f);
    p->group_threads = (uint32_t)ir_func_warps(f) * 32;
    p->producer_threads = s.producer ? IR_WARPGROUP_THREADS : 0;
    p->threads = p->group_threads * p->groups + p->producer_threads;
    p->producer_regs = s.producer ? (uint32_t)(s.producer->attr.i & 0xffff) : 0;
    p->consumer_regs = s.producer ? (uint32_t)(s.producer->attr.i >> 16) : 0;
    p->persistent = s.persistent;
    p->cluster = (uint32_t)ir_cluster_size(f);
    p->min_ctas = s.producer ? 1 : 0;   /* setmaxnreg needs .maxntid with .minnctapersm */
    if (!s.heavy && t->threads_per_sm % p->threads == 0)
        p->occupancy = t->threads_per_sm / p->threads, p->occupancy_max_regs = t->occupancy_max_regs;
}

bool pass_plan(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL) return false;
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    IrPlan *p = arena_alloc(ir_ctx_arena(f->module->ctx), sizeof *p);
    memset(p, 0, sizeof *p);
    plan_threads(f, p, t);
    plan_smem(f, p);
    plan_tma(f, p);
    for (int k = 0; k < IR_NUM_LAUNCH_KEYS; k++)   /* chosen and still on (a pass may drop one) */
        if (f->launch_chosen >> k & 1 && ir_launch_get(f, (IrLaunchKey)k) == 1) p->chosen |= 1u << k;
    f->plan = p;
    return true;
}
