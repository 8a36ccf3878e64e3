/* Layout assignment: gives every tile of a kernel its layout (ir/layout.h), the first
 * pass of the GPU level; code generation reads layouts from the types and never
 * chooses one.
 *
 * require:    verified IR without layouts (the tile level), a kernel's warps set
 * guarantees: every tile value (op results and region arguments) has a blocked
 *             layout; tiles of one shape share it, so element-wise ops and
 *             loop-carried values never convert; values are unchanged
 *
 *   %m = cmp lt %o, %n : i1[1024]   ->   %m = cmp lt %o, %n : i1[1024] #blocked
 *   layout #blocked = blocked<spt = [8], tpw = [32], wpc = [4], order = [0]>
 *
 * The blocked layout of a shape: per thread a run of up to 8 elements along the last
 * axis (16 bytes of f16, two 16-byte vectors of f32) so that loads and stores can be
 * 16-byte vectors; lanes fill the last axis first, then the next; warps go to the
 * first axis first (rows of a matrix to different warps); where the program has more
 * threads than the tile has elements, the last axis' lanes (and the first axis'
 * warps) hold copies. Shape changes (broadcast, expand_dims, trans, reshape, the
 * result of a reduction) are where two layouts meet; codegen converts there, directly
 * when every thread already holds what it needs, else through shared memory. */
#include "passes.h"

#include "ir/layout.h"

static int32_t min32(int32_t a, int32_t b) { return a < b ? a : b; }

const IrLayout *pass_blocked_layout(IrCtx *c, int warps, const IrType *t)
{
    int r = t->rank;
    int32_t spt[IR_MAX_RANK], tpw[IR_MAX_RANK], wpc[IR_MAX_RANK];
    int64_t per = ir_type_numel(t) / (warps * 32);
    for (int d = 0; d < r; d++) spt[d] = tpw[d] = wpc[d] = 1;
    spt[r - 1] = min32(t->shape[r - 1], per < 1 ? 1 : per > 8 ? 8 : (int32_t)per);
    int32_t lanes = 32;
    for (int d = r - 1; d >= 0; d--) {
        tpw[d] = min32(lanes, t->shape[d] / spt[d]);
        lanes /= tpw[d];
    }
    tpw[r - 1] *= lanes;                 /* too few elements: lanes hold copies */
    int32_t w = warps;
    for (int d = 0; d < r; d++) {
        int32_t room = t->shape[d] / (spt[d] * tpw[d]);
        wpc[d] = min32(w, room < 1 ? 1 : room);
        w /= wpc[d];
    }
    wpc[0] *= w;
    return ir_layout_blocked(c, r, spt, tpw, wpc, NULL);
}

bool pass_layout(IrFunc *f)
{
    if (f->kind != IR_FUNC_KERNEL) return false;
    IrCtx *c = f->module->ctx;
    int warps = f->warps > 0 ? f->warps : 4;
    bool changed = false;
    for (uint32_t v = 0; v < f->nvalues; v++) {
        const IrType *t = f->values[v].type;
        if (!t || t->rank == 0 || t->layout) continue;
        f->values[v].type = ir_type_with_layout(c, t, pass_blocked_layout(c, warps, t));
        changed = true;
    }
    return changed;
}
