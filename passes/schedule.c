/* The schedule: the launch keys a kernel does not give, chosen from its shape.
 *
 * require:   Tile IR without layouts, block loads still block loads (before blockload)
 * guarantee: the same IR; each of ws, persistent, overlap and pingpong that the program,
 *            a -D, a config or the IR text did not give (IrFunc.launch_set) is set where
 *            the rules below say so, and its bit set in IrFunc.launch_chosen (the plan
 *            prints `chosen = [ws, persistent]`). A key given, even at its default, is
 *            never changed; with the knob schedule = 0 nothing is.
 *
 * A user who writes a GEMM or an attention loop as Triton's tutorials do gets the
 * schedule the tuned examples set by hand (examples/matmul_bf16.tile: ws and persistent;
 * examples/flash_attn_fwd.tile: ws and overlap; examples/gemm_bias_gelu.tile at 4 warps:
 * ws, persistent and pingpong). The rules, on a target with TMA and wgmma (sm_90a):
 *
 *   ring loop  a top-level `for` of the kernel body whose dot operands loaded in its body
 *              are all block loads the tensor-memory accelerator would copy with a
 *              producer warpgroup (blockload_tma_with_ws: the TMA ring that
 *              passes/warpspec.c feeds);
 *   gemm       one ring loop, of independent dots, and no other loop holding a dot:
 *              one dot, or several (a horizontal GEMM: the graph compiler's SwiGLU pair,
 *              `acc0 = dot(at, bg, acc0); acc1 = dot(at, bu, acc1)`, A shared or not)
 *              of which none reads another's result, not even as its accumulator; the
 *              ring then holds every operand of an iteration, and the copied block
 *              loads take at most 8 tensor maps (CG_MAX_TMA, passes/blockload.c);
 *   attention  every loop holding a dot is a ring loop of two dots, the second reading
 *              the first's result (P V after softmax(Q K^T));
 *   ws         gemm or attention, warps a multiple of 4, and the accumulators fit the
 *              consumers' register budget (tile_target_consumer_regs) with 48
 *              registers to spare: otherwise the producer's registers are taken from
 *              consumers that would spill. A gemm's accumulators are all live at once
 *              (their sum counts); attention's largest;
 *   persistent ws and gemm, with a grid clause: the next tile's loads overlap this
 *              one's epilogue (passes/persistent.c drops it where it cannot walk);
 *   pingpong   ws, persistent, a gemm of one dot and 4 warps (and the knob pingpong):
 *              two consumer warpgroups, one's main loop beside the other's epilogue
 *              (not measured for a horizontal GEMM, so not chosen for it);
 *   overlap    ws and attention: the next block's softmax under this block's P V
 *              (passes/rotate.c drops it where the loop is not attention's).
 *
 * The number of tiles against the SM count is not known when the grid depends on the
 * arguments; a persistent kernel of fewer tiles than SM slots runs one tile a program,
 * which costs one loop test (the measured cases: docs/PERFORMANCE.md). */
#include "passes.h"

#include "ir/target.h"

typedef struct Shape {
    int ring_loops;      /* loops whose dot operands are all TMA-copied block loads */
    int dot_loops;       /* top-level loops holding a dot */
    int gemm_loops;      /* ring loops of independent dots (one, or several: horizontal) */
    int gemm_dots;       /* the dots of the last such loop */
    int attn_loops;      /* ring loops of two chained dots */
    int64_t acc_elems;   /* a gemm loop's accumulators together (all live at once), an
                          * attention loop's largest: the most of the ring loops */
} Shape;

#define MAX_DOTS 8       /* a horizontal GEMM's dots (each B a tensor map of its own) */
#define MAX_MAPS 8       /* CG_MAX_TMA: the tensor maps of the copied block loads */

/* v is computed from `from` inside body (through the operands of ops of body). */
static bool reaches(const IrFunc *f, const IrBlock *body, IrValue v, IrValue from, int depth)
{
    if (v == from) return true;
    const IrOp *d = f->values[v].def;
    if (!d || d->parent != body || depth > 64) return false;
    for (uint32_t i = 0; i < d->noperands; i++)
        if (reaches(f, body, d->operands[i], from, depth + 1)) return true;
    return false;
}

/* No dot of dots[0..n) reads another's result (its operands, its accumulator too). */
static bool independent(const IrFunc *f, const IrBlock *body, const IrOp *const *dots, int n)
{
    for (int j = 1; j < n; j++)
        for (int i = 0; i < j; i++)
            for (int k = 0; k < 3; k++)
                if (reaches(f, body, dots[j]->operands[k], dots[i]->results[0], 0)) return false;
    return true;
}

static void scan_loop(const IrFunc *f, const IrOp *loop, Shape *s)
{
    const IrBlock *body = &loop->regions[0];
    if (!ir_count_ops(body, IR_OP_DOT)) return;
    s->dot_loops++;
    const IrOp *dots[MAX_DOTS], *loads[2 * MAX_DOTS];
    int n = 0, copied = 0, maps = 0;
    int64_t largest = 0, sum = 0;
    for (const IrOp *o = body->first; o; o = o->next) {
        if (o->nregions) return;                          /* not a plain loop body */
        if (o->code != IR_OP_DOT) continue;
        if (n == MAX_DOTS) return;
        dots[n++] = o;
        for (int i = 0; i < 2; i++) {
            int trans;
            const IrOp *src = blockload_operand_source(f, o->operands[i], &trans);
            if (!src || src->parent != body) continue;    /* loaded before the loop */
            if (src->code != IR_OP_BLOCK_LOAD || !blockload_tma_with_ws(f, src)) return;
            bool seen = false;                            /* a shared A: one copy, one map */
            for (int j = 0; j < copied; j++) seen |= loads[j] == src;
            if (seen) continue;
            uint32_t ps[4];
            loads[copied++] = src;
            maps += blockload_ptr_params(f, src->operands[0], ps, 4);
        }
        const IrType *t = ir_value_type(f, o->results[0]);
        int64_t elems = 1;
        for (int d = 0; d < t->rank; d++) elems *= t->shape[d];
        if (elems > largest) largest = elems;
        sum += elems;
    }
    if (!copied || maps > MAX_MAPS) return;
    s->ring_loops++;
    bool attn = n == 2 && (reaches(f, body, dots[1]->operands[0], dots[0]->results[0], 0) ||
                           reaches(f, body, dots[1]->operands[1], dots[0]->results[0], 0));
    bool gemm = !attn && independent(f, body, dots, n);
    if (gemm) {
        s->gemm_loops++;
        s->gemm_dots = n;
    }
    s->attn_loops += attn;
    int64_t acc = gemm ? sum : largest;
    if (acc > s->acc_elems) s->acc_elems = acc;
}

static bool choose(IrFunc *f, IrLaunchKey k, bool want)
{
    if (ir_launch_given(f, k) || !want || ir_launch_get(f, k) == 1) return false;
    ir_launch_put(f, k, 1);
    f->launch_chosen |= 1u << k;
    return true;
}

bool pass_schedule(IrFunc *f)
{
    const TileTarget *t = f->module->target ? f->module->target : tile_target_default();
    if (f->kind != IR_FUNC_KERNEL || !f->module->knobs.schedule || !t->tma || !t->wgmma || f->module->no_tma)
        return false;
    Shape s = {0, 0, 0, 0, 0, 0};
    for (const IrOp *o = f->body.first; o; o = o->next)
        if (o->code == IR_OP_FOR) scan_loop(f, o, &s);
        else if (o->nregions)
            for (uint32_t r = 0; r < o->nregions; r++)
                if (ir_count_ops(&o->regions[r], IR_OP_DOT)) s.dot_loops++;   /* a dot under an if or while: none of these */
    bool gemm = s.ring_loops == 1 && s.gemm_loops == 1 && s.dot_loops == 1;
    bool attention = s.ring_loops >= 1 && s.attn_loops == s.ring_loops && s.dot_loops == s.ring_loops;
    int warps = ir_func_warps(f);
    int64_t acc_regs = s.acc_elems / (warps * 32);         /* f32 accumulators, one register each */
    bool fits = acc_regs + 48 <= (int64_t)tile_target_consumer_regs(t, warps);
    bool changed = false;
    changed |= choose(f, IR_LAUNCH_WS, (gemm || attention) && warps % 4 == 0 &&
                                           (uint32_t)warps * 32 + IR_WARPGROUP_THREADS <= IR_MAX_BLOCK_THREADS && fits);
    changed |= choose(f, IR_LAUNCH_PERSISTENT, f->ws && gemm && f->grid);
    changed |= choose(f, IR_LAUNCH_PINGPONG,
                      f->ws && f->persistent && gemm && s.gemm_dots == 1 && warps == 4 && f->module->knobs.pingpong);
    changed |= choose(f, IR_LAUNCH_OVERLAP, f->ws && attention);
    return changed;
}
