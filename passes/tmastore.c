/* Block stores by the tensor-memory accelerator (sm_90a): a GEMM's epilogue as a few
 * bulk copies instead of one store instruction per accumulator pair.
 *
 * Why: an accumulator layout gives each thread two adjacent columns per 8-column
 * group, so a warp's store writes eight rows of 16 bytes, half a sector each, and the
 * stores of a 128 x 256 tile take the consumers' time away from the next tile's dots
 * (measured on the H200: matmul_bf16 at 4096^3 runs 15% faster with its store left
 * out). Through shared memory, TMA writes whole lines while the warps go on.
 *
 * Which (tmastore_kept, asked by passes/blockload.c before the layouts): a block_store
 * of rank 2 whose contiguous axis is the last one (stride the constant 1), 2- or 4-byte
 * elements, i32 or i64 shapes, strides and offsets; the tensor describable on the host
 * at launch as block_load's (the pointer one of at most 4 parameters that the variant's
 * class makes 16-byte aligned, shapes and strides constants or parameters, the row
 * stride a multiple of 16 bytes); a row of the block a multiple of 32 bytes, at most 256
 * rows, a multiple of 8; and the store inside `for` and `if` only, not a `while` (its
 * barriers need every thread of the program; an `if`'s condition is a scalar, which every
 * thread computes alike), in a kernel without a `return` inside a region (the stores
 * must be waited for before the program ends).
 *
 * How (tmastore_lower, from passes/shared.c once the layouts and rings are placed): a
 * kept store whose value is in a tensor-core accumulator layout (every thread's
 * elements of one chunk of columns known at compile time) becomes
 *
 *   %st = local_alloc : bf16[2, 128, 64] #shared<... swizzle_bytes = 128>
 *   tma_store %st, %v, %p, %M, %N, %sm, 1, %om, %on
 *   ...
 *   tma_store_wait                      (once, before the kernel's return)
 *
 * The staging buffer holds two chunks of the value (a row of one chunk is the
 * swizzle's width: 128, 64 or 32 bytes; its rows the value's, halved above 128), so
 * that the threads write chunk j + 1 while TMA reads chunk j (codegen/cg_tma.c). It goes after the buffers the rings
 * took. Stores in the two branches of one `if` share one area (their local_allocs print
 * the same offset; the LM head's dw step stores bf16 or f32 sums): the first chunk of a
 * store through a shared area, or of one chunk only, waits until every earlier bulk
 * group has read its buffer. Where a buffer does not fit under the shared-memory limit, or the value's layout is
 * another, the store becomes the masked pointer store that blockload makes of every
 * other block_store. A kernel holds at most CG_MAX_TMA maps; stores that would exceed
 * it are expanded too. A store marked `upper` (a masked pointer store, passes/ptrblock.c)
 * would write negative coordinates that the TMA path drops (codegen/cg_tma.c stores a
 * block starting before the tensor element by element, inside it): they lie before the
 * start of the tensor the parameter points to, an out-of-bounds write of the source.
 *
 * Stores of one chunk each (the value is the buffer's half) in one block share one area
 * in sequence (`tma_store seq k`, half k % 2: a subtiled epilogue's chunks, passes/
 * epichunk.c), and stores through one parameter with the same shapes, strides and box
 * count one tensor map. */
#include "passes.h"

#include <string.h>


#include "ir/arena.h"
#include "ir/layout.h"
#include "ir/layout_map.h"
#include "ir/target.h"

#define MAX_MAPS 8   /* CG_MAX_TMA */

static bool const_is(const IrFunc *f, IrValue v, int64_t k)
{
    const IrOp *d = f->values[v].def;
    return d && d->code == IR_OP_CONST && !ir_value_type(f, v)->rank && d->attr.i == k;
}

/* A `return` inside a region of blk: a way out of the kernel that would pass by the
 * tma_store_wait before the final return. */
static bool inner_return(const IrBlock *blk, bool nested)
{
    for (const IrOp *o = blk->first; o; o = o->next) {
        if (o->code == IR_OP_RETURN && nested) return true;
        for (uint32_t r = 0; r < o->nregions; r++)
            if (inner_return(&o->regions[r], true)) return true;
    }
    return false;
}

bool tmastore_kept(const IrFunc *f, const IrOp *op)
{
    const TileTarget *tg = f->module->target ? f->module->target : tile_target_default();
    if (!tg->tma || f->module->no_tma || f->kind != IR_FUNC_KERNEL || op->code != IR_OP_BLOCK_STORE) return false;
    const IrType *vt = ir_value_type(f, op->operands[op->noperands - 1]);
    if (vt->rank != 2 || op->noperands != 8) return false;
    int eb = ir_elem_bytes(vt->elem);
    IrElem ie = ir_value_type(f, op->operands[1])->elem;
    if ((eb != 2 && eb != 4) || vt->elem == IR_I1 || (ie != IR_I32 && ie != IR_I64)) return false;
    uint32_t ps[4];
    int np = blockload_ptr_params(f, op->operands[0], ps, 4);
    if (!np) return false;
    for (int i = 0; i < np; i++)
        if (ps[i] >= 64 || !(f->aligned_params >> ps[i] & 1)) return false;
    int64_t m;
    if (!const_is(f, op->operands[4], 1)) return false;                      /* the last axis contiguous */
    for (int d = 0; d < 2; d++)
        if (!blockload_host_known(f, op->operands[1 + d], &m, true)) return false;
    if (!blockload_host_known(f, op->operands[3], &m, false) || m < 1 || (m * eb) % 16) return false;
    if (!pass_nvmma_swizzle(vt, 1) || vt->shape[0] > 256) return false;
    /* inside `for` and `if` only: an `if`'s condition is a scalar, the same for every
     * thread of the program, so all of them reach the store's barriers or none does */
    for (const IrBlock *b = op->parent; b && b->parent_op; b = b->parent_op->parent)
        if (b->parent_op->code != IR_OP_FOR && b->parent_op->code != IR_OP_IF) return false;
    return !inner_return(&f->body, false);
}

/* The value's layout is a tensor-core accumulator's (not a slice, not an operand). */
static bool stageable(const IrType *vt)
{
    const IrLayout *l = vt->layout;
    return l && l->kind == IR_LAYOUT_MMA && (l->version == 2 || l->version == 3);
}

typedef VEC(IrOp *) Stores;

static void collect(IrOp *op, void *ud)
{
    if (op->code == IR_OP_BLOCK_STORE) vec_push((Stores *)ud, op);
}

/* The maps of blk's tma_copy ops: one per ring buffer and parameter its pointer may be
 * (the copies of one buffer, before the loop and in it, share their maps). */
typedef struct Maps {
    IrValue buf[64];
    uint32_t param[64], n;
} Maps;

static void copy_maps(const IrFunc *f, const IrBlock *blk, Maps *m)
{
    uint32_t ps[4];
    for (const IrOp *op = blk->first; op; op = op->next) {
        for (uint32_t r = 0; r < op->nregions; r++) copy_maps(f, &op->regions[r], m);
        if (op->code != IR_OP_TMA_COPY) continue;
        int np = blockload_ptr_params(f, op->operands[3], ps, 4);
        for (int i = 0; i < np; i++) {
            bool seen = false;
            for (uint32_t j = 0; j < m->n && !seen; j++) seen = m->buf[j] == op->operands[0] && m->param[j] == ps[i];
            if (!seen && m->n < 64) m->buf[m->n] = op->operands[0], m->param[m->n++] = ps[i];
        }
    }
}

/* An expanded store goes through a convert_layout of its whole value (an f32 128 x 256
 * accumulator: 128 KB of scratch). Inside a loop or a persistent kernel (whose tiles
 * become a loop, passes/persistent.c), where
 * the rings stay live beside that scratch, and where the two do not fit together (the
 * graph compiler's GEMM with an epilogue writing bf16 and two f32 tensors on 128 x 256
 * tiles, 4 stages: 361 KB), the store writes from the accumulator's layout instead, its
 * pointers and mask made in that layout (less coalesced, but no scratch). */
static void expanded_fits(IrFunc *f, IrOp *st, const IrLayout *acc, uint32_t offset, uint32_t limit)
{
    const IrOp *cv = f->values[st->operands[1]].def;
    if (!acc || acc->kind != IR_LAYOUT_MMA || !cv || cv->code != IR_OP_CONVERT_LAYOUT ||
        (st->parent == &f->body && !f->persistent))
        return;
    uint32_t scratch = (ir_op_scratch_bytes(f, cv) + 127) & ~127u;
    if (scratch + ((offset + 1023) & ~1023u) > limit) pass_layout_store_in(f, st, acc);
}

/* Stores a and b never run in one execution of the program's code between them: the
 * innermost op holding both is an `if`, one in its `then`, the other in its `else`. */
static bool exclusive(const IrOp *a, const IrOp *b)
{
    for (const IrBlock *ba = a->parent; ba && ba->parent_op; ba = ba->parent_op->parent)
        for (const IrBlock *bb = b->parent; bb && bb->parent_op; bb = bb->parent_op->parent)
            if (ba->parent_op == bb->parent_op) return ba != bb && ba->parent_op->code == IR_OP_IF;
    return false;
}

/* A staging area: its byte offset and size, and the stores that stage through it, each
 * exclusive of the others (the two branches of an `if`: the LM head's dw step writes
 * bf16 or f32 sums, never both, passes/graph_lower.c). */
typedef struct Area {
    uint32_t at, bytes;
    IrOp *users[8];
    uint32_t nusers;
    const IrBlock *seq;          /* a sequence's block (its stores one chunk each), or NULL */
    uint32_t nseq;               /* the sequence's stores so far */
} Area;

/* An area of `areas` that the store can share (large enough, every user exclusive of
 * it), or NULL. */
static Area *shareable(Area *areas, uint32_t n, const IrOp *st, uint32_t bytes)
{
    for (uint32_t i = 0; i < n; i++) {
        Area *ar = &areas[i];
        bool ok = ar->bytes >= bytes && ar->nusers < 8 && ar->nseq <= 1;
        for (uint32_t u = 0; ok && u < ar->nusers; u++) ok = exclusive(ar->users[u], st);
        if (ok) return ar;
    }
    return NULL;
}

/* A store of one chunk (its value the buffer's one half) through an area of stores of
 * one chunk each in the same block: a sequence (tma_store seq k, one after the other in
 * program order, each in the other half of the area from the one before). The chunks of
 * a subtiled epilogue (passes/epichunk.c: 16 stores of [128, 32] at 128 x 256 with two
 * outputs) share one area of 16 KB instead of one each. */
static Area *sequence(Area *areas, uint32_t n, const IrOp *st, uint32_t bytes)
{
    for (uint32_t i = 0; i < n; i++)
        if (areas[i].seq == st->parent && areas[i].bytes == bytes) return &areas[i];
    return NULL;
}

/* The tensor maps of the stores so far (a map per parameter, shapes, strides and box):
 * the chunks' stores of one output share one (passes/plan.c merges equal recipes). */
typedef struct StoreMaps {
    uint32_t param[MAX_MAPS];
    IrValue dims[MAX_MAPS][4];
    int32_t rows[MAX_MAPS], sw[MAX_MAPS];
    uint32_t n;
} StoreMaps;

static bool store_map_seen(const StoreMaps *m, uint32_t param, const IrOp *op, int32_t rows, int32_t sw)
{
    for (uint32_t i = 0; i < m->n; i++)
        if (m->param[i] == param && m->rows[i] == rows && m->sw[i] == sw && !memcmp(m->dims[i], op->operands + 1, sizeof m->dims[i]))
            return true;
    return false;
}

bool tmastore_lower(IrFunc *f, uint32_t *offset, uint32_t limit)
{
    Stores s = {0};
    ir_walk(&f->body, collect, &s);
    if (!s.len) return false;
    IrCtx *c = f->module->ctx;
    Maps cm = {{0}, {0}, 0};
    copy_maps(f, &f->body, &cm);
    uint32_t maps = cm.n;
    StoreMaps sm = {.n = 0};
    bool any = false;
    Area *areas = s.len ? arena_alloc(ir_ctx_arena(c), s.len * sizeof *areas) : NULL;
    uint32_t nareas = 0;
    for (size_t i = 0; i < s.len; i++) {
        IrOp *op = s.data[i];
        IrValue v = op->operands[7];
        const IrType *vt = ir_value_type(f, v);
        int eb = ir_elem_bytes(vt->elem);
        int32_t sw = pass_nvmma_swizzle(vt, 1);
        uint32_t ps[4], np = (uint32_t)blockload_ptr_params(f, op->operands[0], ps, 4);
        /* chunks of at most 128 rows: a 256-row tile's two halves of 128 x 128 bytes fit
         * beside a ring of 4 stages of 48 KB, as a 128-row tile's do */
        int32_t rows = vt->shape[0] > 128 && vt->shape[0] % 16 == 0 ? vt->shape[0] / 2 : vt->shape[0];
        /* two chunks for each consumer warpgroup (a pingpong kernel's two store their own tiles) */
        uint32_t halves = 2u * (uint32_t)ir_consumer_groups(f);
        uint32_t at = (*offset + 1023) & ~1023u, bytes = halves * (uint32_t)rows * (uint32_t)sw;
        /* one chunk: its value the buffer's half (not a pingpong kernel's four) */
        bool one = halves == 2 && rows == vt->shape[0] && vt->shape[1] * eb == sw;
        Area *seq = stageable(vt) && one ? sequence(areas, nareas, op, bytes) : NULL;
        Area *shared = seq ? seq : stageable(vt) ? shareable(areas, nareas, op, bytes) : NULL;
        if (shared) at = shared->at;
        uint32_t newmaps = 0;
        for (uint32_t j = 0; j < np; j++) newmaps += !store_map_seen(&sm, ps[j], op, rows, sw);
        if (!stageable(vt) || maps + newmaps > MAX_MAPS || (!shared && at + bytes > limit)) {
            const IrLayout *acc = vt->layout;
            IrOp *st = blockstore_expand_laid_out(f, op);
            expanded_fits(f, st, acc, *offset, limit);
            continue;
        }
        maps += newmaps;
        for (uint32_t j = 0; j < np && sm.n < MAX_MAPS; j++)
            if (!store_map_seen(&sm, ps[j], op, rows, sw)) {
                sm.param[sm.n] = ps[j], sm.rows[sm.n] = rows, sm.sw[sm.n] = sw;
                memcpy(sm.dims[sm.n++], op->operands + 1, sizeof sm.dims[0]);
            }
        IrBuilder b;
        ir_builder_before(&b, op);
        b.loc = op->loc;
        /* the buffer: [2, rows, sw / eb] in the NVMMA form of one chunk, contiguous along
         * its last axis (a ring stage's layout: TMA boxes of that swizzle) */
        int32_t shape[3] = {(int32_t)halves, rows, sw / eb};
        const IrType *chunk = ir_type_tile(c, ir_type_elem(c, vt), 2, shape + 1);
        const IrType *bt = ir_type_with_layout(c, ir_type_tile(c, ir_type_elem(c, vt), 3, shape),
                                               pass_nvmma_layout(c, chunk, 1));
        IrOp *alloc = ir_build(&b, IR_OP_LOCAL_ALLOC, NULL, 0, &bt, 1, 0);
        alloc->attr.i = at;
        if (!shared) *offset = at + bytes;
        IrValue ops[9] = {alloc->results[0], v};
        for (int j = 0; j < 7; j++) ops[2 + j] = op->operands[j];     /* ptr, shapes, strides, offsets */
        IrOp *ts = ir_build(&b, IR_OP_TMA_STORE, ops, 9, NULL, 0, 0);
        if (seq) {   /* the sequence's first store learns it is one once a second comes */
            if (seq->nseq == 1) seq->users[0]->attr.i = 1;
            ts->attr.i = ++seq->nseq;
        } else if (shared) {   /* exclusive users: no longer a sequence's area */
            shared->users[shared->nusers++] = ts;
            shared->seq = NULL, shared->nseq = 0;
        } else {
            areas[nareas++] = (Area){.at = at, .bytes = bytes, .users = {ts}, .nusers = 1,
                                     .seq = one && stageable(vt) ? op->parent : NULL, .nseq = one ? 1 : 0};
        }
        ir_op_remove(op);
        any = true;
    }
    vec_free(&s);
    if (any) {   /* the stores complete before the kernel returns */
        IrOp *ret = f->body.last;
        IrBuilder b;
        if (ret && ret->code == IR_OP_RETURN) ir_builder_before(&b, ret);
        else ir_builder_at_end(&b, &f->body);
        b.loc = f->loc;
        ir_build(&b, IR_OP_TMA_STORE_WAIT, NULL, 0, NULL, 0, 0);
    }
    return true;
}
