/* graph_lmce: the LM head's GEMM and its cross-entropy fused into one op, so that the
 * [N, V] logits are never held (docs/GRAPHS.md "The LM head"; issue 42).
 *
 * require:   a verified graph; ops in definition order, the return last.
 * guarantee: the graph computes the same values, bit for bit (the interpreter's
 *            linear_cross_entropy rounds as the ops it replaces), and verifies; with
 *            liger and a scalar loss the op is in the forward (ops before nfwd),
 *            Liger's order, else where the gradient was.
 *
 * The pattern, as the frontend and the gradient rules build it:
 *   z  = matmul x, w                      x [N, D], w [D, V] (w may be trans(W))
 *  [z' = cast z]                           a widening cast (bf16 to f32: exact)
 *   r  = cross_entropy_rows z', lab, ign   the rows' losses, read by the forward only
 *   g  = cross_entropy_grad z', lab, ign, dy
 *   dx = matmul g, trans(w or cast(w))     for x's gradient (any number, also none)
 *   dw = matmul trans(x or cast(x)), g     for w's gradient (any number, also none)
 * (bf16 x and w: g is cast to bf16 once and each product, of bf16, is cast up: the
 * gradient rules' mixed precision, ir/graph_grad.c r_matmul; the op then computes so,
 * its dx and dw the bf16 products, ir_lce_grad_elem, which the casts up read)
 * with z, z' and g used by nothing else, and dy not computed from r. It becomes
 *   r', dx', dw' = linear_cross_entropy x, w, lab, ign, dy, chunk
 * placed where g was; the ops that read r (the loss's sum and mean) move after it, the
 * replaced ops and what only they read (w's cast and trans for dx) go. The seed of the
 * backward reaches the op through dy, so any scale of the loss is exact, and dx and dw
 * are the final gradients: a bf16 head's casts up of them whose only readers cast back
 * to bf16 (the gradient of a bf16 parameter) go too, so that a dw returned as it is is
 * written by the op into the result's memory (the joint run's form):
 *   %ce_rows, %dx, %dw = linear_cross_entropy %x, %w, %lab, %ign, %dy, %chunk
 *   return %l, %dx, %dw                       (no `cast up`, `cast %dw` kernel, no buffer)
 * chunk: the rows whose [chunk, V] logits the plan holds at a time (a decision of this
 * pass, an i64 constant operand, printed in the IR and the plan; the plan runs fewer rows
 * than IrGKernel.whole as one chunk, where that holds less memory: passes/graph_fuse.c).
 *
 * Liger's order (liger set, liger_plan; so that a forward/backward split computes the
 * loss in its forward part, passes/graph_split.c; the runtime builds the split so, not
 * the joint run, which knows its seed, 1, from the start): dy is linear in the seed, so
 * the backward's ops computing it are cloned into the forward from a constant 1 of
 * their own, and the op, with the rows' readers, ends the forward; the backward
 * multiplies dx and dw by the seed where the gradient's products were read:
 *   forward:  %one = const 1.0 ... dy1 = (dy's ops on %one)
 *             r', dx', dw' = linear_cross_entropy x, w, lab, ign, dy1, chunk; loss = ...
 *   backward: %s = const 1.0 (the seed); dxs = mul %s, dx'; dws = mul %s, dw'
 *             (a bf16 head: mul %s, cast dx' to f32, the cast replacing the casts up)
 * With the seed 1 every value is the same bits; pass_graph_seed_input then makes %s the
 * input dloss (the op's dy no longer depends on it), and the recomputation pass never
 * recomputes the op (its dx and dw are saved).
 *
 * Without a gradient (inference, or a loss the grad does not differentiate), the same
 * head with z read only by the rows becomes
 *   r' = linear_cross_entropy_rows x, w, lab, ign
 * in the rows' place: a kernel that computes each block of rows' logits a block of the
 * vocabulary at a time, keeping only the online max, sum and label logit. */
#include <string.h>

#include "passes.h"

typedef struct Lce {
    IrGraph *g;
    Arena *a;
    uint32_t nops, nv;
    uint32_t *uses;          /* per value: the ops (and the return) that read it, counted once each */
} Lce;

static const IrGOp *def_op(const Lce *L, uint32_t v)
{
    uint32_t d = L->g->values.data[v].def;
    return d == IR_GNONE ? NULL : &L->g->ops.data[d];
}

static const IrTensorType *vt(const Lce *L, uint32_t v) { return &L->g->values.data[v].type; }

static bool is_trans2(const IrGOp *op)
{
    return op && op->kind == IR_GOP_TRANS && op->attr.perm[0] == 1 && op->attr.perm[1] == 0;
}

/* Whether v is u, or a cast of u that loses nothing (to a float type at least as wide). */
static bool same_or_widened(const Lce *L, uint32_t v, uint32_t u)
{
    if (v == u) return true;
    const IrGOp *op = def_op(L, v);
    if (!op || op->kind != IR_GOP_CAST || op->in[0] != u) return false;
    IrElem from = vt(L, u)->elem, to = vt(L, v)->elem;
    return ir_elem_is_float(to) && ir_elem_is_float(from) &&
           (from == to || to == IR_F64 || (to == IR_F32 && (from == IR_BF16 || from == IR_F16)));
}

static void count_uses(Lce *L)
{
    memset(L->uses, 0, (L->nv + 1) * sizeof *L->uses);
    for (uint32_t o = 0; o < L->nops; o++) {
        const IrGOp *op = &L->g->ops.data[o];
        for (uint32_t i = 0; i < op->nin; i++) {
            bool seen = false;
            for (uint32_t j = 0; j < i; j++) seen |= op->in[j] == op->in[i];
            if (!seen) L->uses[op->in[i]]++;
        }
    }
}

typedef struct Match {
    uint32_t mm, cast, rows, grad;   /* op indices (cast: IR_GNONE without one) */
    uint32_t x, w, lab, ign, dy;
    uint32_t ndx, ndw;
    uint32_t dx[4], dw[4];           /* op indices of the gradient matmuls */
    uint32_t half;                   /* bf16 x: the cast of g to bf16 (else IR_GNONE) */
    uint32_t dxup[4], dwup[4];       /* bf16 x: the casts of the products up to dy's type */
} Match;

/* Op `o` (a cross_entropy_rows) as the pattern's rows, filled into *m. */
static bool match(const Lce *L, uint32_t o, Match *m)
{
    const IrGraph *g = L->g;
    const IrGOp *rows = &g->ops.data[o];
    uint32_t z = rows->in[0];
    const IrGOp *zop = def_op(L, z);
    *m = (Match){.rows = o, .cast = IR_GNONE, .grad = IR_GNONE, .half = IR_GNONE, .lab = rows->in[1], .ign = rows->in[2]};
    if (zop && zop->kind == IR_GOP_CAST) {
        m->cast = g->values.data[z].def;
        if (!same_or_widened(L, z, zop->in[0]) || L->uses[zop->in[0]] != 1) return false;
        zop = def_op(L, zop->in[0]);
    }
    if (!zop || zop->kind != IR_GOP_MATMUL) return false;
    m->mm = g->values.data[zop->out[0]].def;
    m->x = zop->in[0], m->w = zop->in[1];
    const IrTensorType *tx = vt(L, m->x), *tw = vt(L, m->w), *tz = vt(L, zop->out[0]);
    if (tx->rank != 2 || tw->rank != 2 || tx->elem != tw->elem || tz->elem != tx->elem || !ir_elem_is_float(tx->elem))
        return false;
    if (L->uses[z] > 2) return false;   /* the rows and their gradient, nothing else */
    for (uint32_t k = o + 1; k < L->nops; k++) {
        const IrGOp *op = &g->ops.data[k];
        if (op->kind == IR_GOP_CROSS_ENTROPY_GRAD && op->in[0] == z) {
            if (op->in[1] != m->lab || op->in[2] != m->ign) return false;
            m->grad = k;
            m->dy = op->in[3];
            break;
        }
    }
    if (m->grad == IR_GNONE)   /* the forward alone: linear_cross_entropy_rows, its rows f32 (f64 for f64 x) */
        return L->uses[z] == 1 && vt(L, rows->out[0])->elem == (tx->elem == IR_F64 ? IR_F64 : IR_F32);
    const IrGOp *gop = &g->ops.data[m->grad];
    uint32_t gv = gop->out[0], found = 0;
    if (vt(L, rows->out[0])->elem != vt(L, m->dy)->elem) return false;
    /* bf16 x and w: the gradient rules' products run on bf16 (ir/graph_grad.c r_matmul):
     * g is cast to bf16 once, each product is bf16 and is cast up to dy's type */
    bool half = tx->elem == IR_BF16;
    if (half) {
        const IrGOp *c = NULL;
        for (uint32_t k = m->grad + 1; k < L->nops && !c; k++)
            if (g->ops.data[k].nin && g->ops.data[k].in[0] == gv) c = &g->ops.data[k];
        if (L->uses[gv] != 1 || !c || c->kind != IR_GOP_CAST || vt(L, c->out[0])->elem != IR_BF16) return false;
        m->half = g->values.data[c->out[0]].def;
        gv = c->out[0];
    }
    for (uint32_t k = (half ? m->half : m->grad) + 1; k < L->nops; k++) {
        const IrGOp *op = &g->ops.data[k];
        bool reads = false;
        for (uint32_t i = 0; i < op->nin; i++) reads |= op->in[i] == gv;
        if (!reads) continue;
        found++;
        if (op->kind != IR_GOP_MATMUL || op->in[0] == op->in[1]) return false;
        const IrTensorType *tr = vt(L, op->out[0]);
        uint32_t up = IR_GNONE;   /* half: the cast of the product up to dy's type, its one reader */
        if (half) {
            for (uint32_t j = k + 1; j < L->nops && up == IR_GNONE; j++)
                if (g->ops.data[j].nin && g->ops.data[j].in[0] == op->out[0]) up = j;
            if (L->uses[op->out[0]] != 1 || up == IR_GNONE || g->ops.data[up].kind != IR_GOP_CAST) return false;
            tr = vt(L, g->ops.data[up].out[0]);
        }
        if (op->in[0] == gv && is_trans2(def_op(L, op->in[1])) && same_or_widened(L, def_op(L, op->in[1])->in[0], m->w)) {
            IrTensorType want = {vt(L, m->dy)->elem, 2, tx->dims};
            if (!ir_ttype_eq(tr, &want) || m->ndx == 4) return false;
            m->dxup[m->ndx] = up;
            m->dx[m->ndx++] = k;
        } else if (op->in[1] == gv && is_trans2(def_op(L, op->in[0])) &&
                   same_or_widened(L, def_op(L, op->in[0])->in[0], m->x)) {
            IrTensorType want = {vt(L, m->dy)->elem, 2, tw->dims};
            if (!ir_ttype_eq(tr, &want) || m->ndw == 4) return false;
            m->dwup[m->ndw] = up;
            m->dw[m->ndw++] = k;
        } else {
            return false;
        }
    }
    return found == L->uses[gv];
}

/* op reading map's values (new operand arrays when any changes: the ops' arrays may be
 * shared with a clone). */
static IrGOp mapped(IrGOp op, const uint32_t *map, Arena *a)
{
    bool changed = false;
    for (uint32_t i = 0; i < op.nin; i++) changed |= map[op.in[i]] != op.in[i];
    if (changed) {
        uint32_t *ni = arena_alloc(a, (op.nin + 1) * sizeof *ni);
        for (uint32_t i = 0; i < op.nin; i++) ni[i] = map[op.in[i]];
        op.in = ni;
    }
    return op;
}

/* Liger's order (docs/GRAPHS.md "The LM head", issue 42): the fused op runs in the
 * forward with the dy it has for a seed of 1, and the backward scales its dx and dw by the
 * seed. dy is linear in the seed (the chain rule's ops on it: the mean's division, a
 * scale, a broadcast), so the ops of the backward that compute dy (the seed's constant
 * among them) are cloned into the forward, the clone of the seed a constant 1 of its own
 * that pass_graph_seed_input leaves alone; with the seed 1, dy is the same bits, dx and
 * dw are (1 * dx is dx). The originals no one reads any more go (dead), the seed stays. */
typedef struct Liger {
    IrGOp *clones;
    uint32_t nclones;
    uint32_t *clone;         /* per value: its clone's value, or IR_GNONE */
    bool *dead;              /* per op: an original of the chain that nothing reads now */
} Liger;

static uint32_t liger_clone_map(const Liger *lg, uint32_t v) { return lg->clone[v] != IR_GNONE ? lg->clone[v] : v; }

/* Whether the match can run in Liger's order, its clones in *lg: a scalar loss whose seed
 * is op nfwd, the head in the forward, dy computed by single-result ops of the backward
 * before the gradient, and the seed of dx's type (the multiply's). */
static bool liger_plan(Lce *L, const Match *m, const bool *gone, const bool *after, Liger *lg)
{
    IrGraph *g = L->g;
    uint32_t n = L->nops, nv = (uint32_t)g->values.len, f = g->nfwd;
    if (!f || g->seed == IR_GNONE || g->loss == IR_GNONE || vt(L, g->loss)->rank != 0 ||
        g->values.data[g->seed].def != f || m->mm >= f || m->rows >= f || m->grad < f ||
        vt(L, g->seed)->elem != vt(L, m->dy)->elem || (!m->ndx && !m->ndw))
        return false;
    bool *chain = arena_alloc(L->a, n + 1);
    memset(chain, 0, n + 1);
    uint32_t d = g->values.data[m->dy].def;
    if (d == IR_GNONE || d < f) return false;
    chain[d] = true;
    for (uint32_t o = m->grad; o-- > f;) {
        if (!chain[o]) continue;
        const IrGOp *op = &g->ops.data[o];
        if (op->nout != 1 || gone[o] || after[o] || op->kind == IR_GOP_RETURN) return false;
        for (uint32_t i = 0; i < op->nin; i++) {
            uint32_t di = g->values.data[op->in[i]].def;
            if (di != IR_GNONE && di >= f) chain[di] = true;
        }
    }
    lg->clones = arena_alloc(L->a, (n + 1) * sizeof *lg->clones);
    lg->nclones = 0;
    lg->clone = arena_alloc(L->a, (nv + n + 1) * sizeof *lg->clone);
    memset(lg->clone, 0xff, (nv + n + 1) * sizeof *lg->clone);
    for (uint32_t o = f; o < m->grad; o++) {
        if (!chain[o]) continue;
        IrGOp c = g->ops.data[o];
        uint32_t *ci = arena_alloc(g->arena, (c.nin + 1) * sizeof *ci), *co = arena_alloc(g->arena, sizeof *co);
        for (uint32_t i = 0; i < c.nin; i++) ci[i] = liger_clone_map(lg, c.in[i]);
        IrGValue val = g->values.data[c.out[0]];
        val.name = c.out[0] == g->seed ? "one" : val.name;
        co[0] = (uint32_t)g->values.len;
        vec_push(&g->values, val);
        lg->clone[c.out[0]] = co[0];
        c.in = ci, c.out = co, c.phase = 0, c.region = 0;
        lg->clones[lg->nclones++] = c;
    }
    /* the originals that only the gradient (gone) or other dead originals read */
    uint32_t nvv = (uint32_t)g->values.len, *reads = arena_alloc(L->a, (nvv + 1) * sizeof *reads);
    memset(reads, 0, (nvv + 1) * sizeof *reads);
    for (uint32_t o = 0; o < n; o++)
        for (uint32_t i = 0; !gone[o] && i < g->ops.data[o].nin; i++) reads[g->ops.data[o].in[i]]++;
    lg->dead = arena_alloc(L->a, n + 1);
    memset(lg->dead, 0, n + 1);
    for (uint32_t o = m->grad; o-- > f;) {
        const IrGOp *op = &g->ops.data[o];
        if (!chain[o] || reads[op->out[0]] || op->out[0] == g->seed) continue;
        lg->dead[o] = true;
        for (uint32_t i = 0; i < op->nin; i++) reads[op->in[i]]--;
    }
    return true;
}

/* Value `by` takes v's name, if v has one (a product or cast it replaces). */
static void take_name(IrGraph *g, uint32_t by, uint32_t v)
{
    if (!g->values.data[v].name) return;
    g->values.data[by].name = g->values.data[v].name;
    g->values.data[v].name = NULL;
}

/* Without Liger's order the op's dx and dw are the final gradients. A bf16 head's cast up
 * of a product (ups) whose every reader casts it back to bf16 (the gradient returned in
 * the parameter's type) is a round trip, bit for bit the product (bf16 to f32 is exact):
 * the casts go and their readers' values become the op's (by, named as they were), so
 * a gradient that is only a result is written by the op into the result's memory. */
static void drop_round_trips(const Lce *L, const uint32_t *ups, uint32_t nups, uint32_t by, bool *gone, uint32_t *map)
{
    IrGraph *g = L->g;
    for (uint32_t i = 0; i < nups; i++) {
        uint32_t u = g->ops.data[ups[i]].out[0], nreaders = 0;
        bool back = true;
        for (int drop = 0; drop < 2 && back && (!drop || nreaders); drop++)
            for (uint32_t o = ups[i] + 1; o < L->nops; o++) {
                const IrGOp *op = &g->ops.data[o];
                bool reads = false;
                for (uint32_t j = 0; j < op->nin; j++) reads |= op->in[j] == u;
                if (!reads) continue;
                nreaders += !drop;
                back &= op->kind == IR_GOP_CAST && vt(L, op->out[0])->elem == IR_BF16;
                if (!drop) continue;
                gone[o] = true, map[op->out[0]] = by;
                take_name(g, by, op->out[0]);
            }
        if (back && nreaders) gone[ups[i]] = true;
    }
}

/* Rewrites the match: the fused op where the gradient was, the rows' readers after it,
 * the replaced ops and what only they read dropped. False (g unchanged) when dy is
 * computed from the rows. */
static bool rewrite(Lce *L, const Match *m, int64_t chunk, bool liger_order)
{
    IrGraph *g = L->g;
    uint32_t n = L->nops, nv0 = (uint32_t)g->values.len;
    bool *after = arena_alloc(L->a, n + 1), *gone = arena_alloc(L->a, n + 1);
    memset(after, 0, n + 1);
    memset(gone, 0, n + 1);
    /* the ops before the gradient that read the rows, directly or not: they move after it */
    bool *vdep = arena_alloc(L->a, nv0 + 1);
    memset(vdep, 0, nv0 + 1);
    vdep[g->ops.data[m->rows].out[0]] = true;
    for (uint32_t o = m->rows + 1; o < m->grad; o++) {
        const IrGOp *op = &g->ops.data[o];
        for (uint32_t i = 0; i < op->nin; i++) after[o] |= vdep[op->in[i]];
        for (uint32_t r = 0; r < op->nout; r++) vdep[op->out[r]] = after[o];
    }
    if (vdep[m->dy]) return false;
    /* the fused op's values: chunk, then rows, dx, dw (appended); dx and dw bf16 for a bf16
     * head (ir_lce_grad_elem: the products' own type, cast up where they were) */
    uint32_t rows_v = g->ops.data[m->rows].out[0];
    bool half = m->half != IR_GNONE;
    IrElem ge = half ? IR_BF16 : vt(L, rows_v)->elem;
    IrTensorType tc = {IR_I64, 0, NULL}, tr = *vt(L, rows_v), tdx = {ge, 2, vt(L, m->x)->dims},
                 tdw = {ge, 2, vt(L, m->w)->dims};
    const IrTensorType types[4] = {tc, tr, tdx, tdw};
    const char *hints[4] = {"chunk", "ce_rows", "ce_dx", "ce_dw"};
    uint32_t nvals[4];
    for (uint32_t i = 0; i < 4; i++) {
        nvals[i] = (uint32_t)g->values.len;
        vec_push(&g->values, ((IrGValue){types[i], hints[i], IR_GNONE, i ? i - 1 : 0}));
    }
    /* what each replaced value becomes */
    uint32_t *map = arena_alloc(L->a, (g->values.len + 1) * sizeof *map);
    for (uint32_t v = 0; v < g->values.len; v++) map[v] = v;
    map[rows_v] = nvals[1];
    /* the products become the op's dx and dw; a bf16 head's casts up stay, reading them */
    for (uint32_t i = 0; i < m->ndx; i++) map[g->ops.data[m->dx[i]].out[0]] = nvals[2];
    for (uint32_t i = 0; i < m->ndw; i++) map[g->ops.data[m->dw[i]].out[0]] = nvals[3];
    gone[m->mm] = gone[m->rows] = gone[m->grad] = true;
    if (m->cast != IR_GNONE) gone[m->cast] = true;
    if (half) gone[m->half] = true;
    for (uint32_t i = 0; i < m->ndx; i++) gone[m->dx[i]] = true;
    for (uint32_t i = 0; i < m->ndw; i++) gone[m->dw[i]] = true;
    /* the operands that only the dropped ops read go too (w's cast and trans for dx) */
    for (uint32_t o = n; o-- > 0;) {
        if (!gone[o]) continue;
        const IrGOp *op = &g->ops.data[o];
        for (uint32_t i = 0; i < op->nin; i++) {
            uint32_t v = op->in[i], d = g->values.data[v].def;
            bool seen = false;
            for (uint32_t j = 0; j < i; j++) seen |= op->in[j] == v;
            if (seen || !L->uses[v]) continue;
            if (--L->uses[v] == 0 && d != IR_GNONE && g->ops.data[d].nout == 1 && g->ops.data[d].kind != IR_GOP_RETURN &&
                v != m->x && v != m->w && v != m->lab && v != m->ign && v != m->dy)
                gone[d] = true;
        }
    }
    /* Liger's order: dy's seed-dependent ops cloned into the forward from a constant 1 */
    Liger lg = {0};
    bool liger = liger_order && liger_plan(L, m, gone, after, &lg);
    uint32_t *in = arena_alloc(g->arena, 7 * sizeof *in), *out = arena_alloc(g->arena, 4 * sizeof *out);
    in[IR_LCE_X] = m->x, in[IR_LCE_W] = m->w, in[IR_LCE_LABELS] = m->lab, in[IR_LCE_IGNORE] = m->ign,
    in[IR_LCE_DY] = m->dy, in[IR_LCE_CHUNK] = nvals[0];
    out[0] = nvals[1], out[1] = nvals[2], out[2] = nvals[3];
    uint32_t *cout = arena_alloc(g->arena, 2 * sizeof *cout);
    cout[0] = nvals[0];
    Loc loc = g->ops.data[m->rows].loc;
    IrGOp cop = {.kind = IR_GOP_CONST, .loc = loc, .nout = 1, .out = cout};
    cop.attr.c.i = chunk, cop.attr.c.f = (double)chunk;
    IrGOp fop = {.kind = IR_GOP_LINEAR_CROSS_ENTROPY, .loc = loc, .nin = 6, .nout = 3, .in = in, .out = out};
    VEC(IrGOp) ops = {0};
    uint32_t nfwd = g->nfwd;
    if (liger) {
        /* the forward, then the clones, the fused op, the rows' readers of the forward (the
         * loss); the backward's ops before the gradient (the seed first), the scaling
         * multiplies (a bf16 head's dx and dw cast up to the seed's type first), the rest;
         * the scaled dx and dw replace the gradient's products (a bf16 head's casts up
         * of them, which go) */
        uint32_t scaled[2] = {IR_GNONE, IR_GNONE}, up[2] = {IR_GNONE, IR_GNONE};
        for (uint32_t i = 0; i < 2; i++)
            if (i ? m->ndw : m->ndx) {
                IrTensorType t = {tr.elem, 2, types[2 + i].dims};
                if (half) {
                    up[i] = (uint32_t)g->values.len;
                    vec_push(&g->values, ((IrGValue){t, i ? "ce_dw_f32" : "ce_dx_f32", IR_GNONE, 0}));
                }
                scaled[i] = (uint32_t)g->values.len;
                vec_push(&g->values, ((IrGValue){t, i ? "ce_dw_scaled" : "ce_dx_scaled", IR_GNONE, 0}));
            }
        for (uint32_t i = 0; half && i < m->ndx; i++) gone[m->dxup[i]] = true, map[g->ops.data[m->dxup[i]].out[0]] = nvals[2];
        for (uint32_t i = 0; half && i < m->ndw; i++) gone[m->dwup[i]] = true, map[g->ops.data[m->dwup[i]].out[0]] = nvals[3];
        for (uint32_t v = 0; v < nv0; v++)
            if (map[v] == nvals[2] || map[v] == nvals[3]) map[v] = scaled[map[v] == nvals[3]];
        in[IR_LCE_DY] = liger_clone_map(&lg, m->dy);
        for (uint32_t o = 0; o < g->nfwd; o++)
            if (!gone[o] && !after[o]) vec_push(&ops, mapped(g->ops.data[o], map, g->arena));
        for (uint32_t i = 0; i < lg.nclones; i++) vec_push(&ops, lg.clones[i]);
        vec_push(&ops, cop);
        vec_push(&ops, fop);
        for (uint32_t o = 0; o < g->nfwd; o++)
            if (!gone[o] && after[o]) vec_push(&ops, mapped(g->ops.data[o], map, g->arena));
        nfwd = (uint32_t)ops.len;
        for (uint32_t o = g->nfwd; o < m->grad; o++)
            if (!gone[o] && !lg.dead[o]) vec_push(&ops, mapped(g->ops.data[o], map, g->arena));
        for (uint32_t i = 0; i < 2; i++) {
            if (scaled[i] == IR_GNONE) continue;
            if (up[i] != IR_GNONE) {
                uint32_t *ci = arena_alloc(g->arena, 2 * sizeof *ci), *co = arena_alloc(g->arena, sizeof *co);
                ci[0] = nvals[2 + i], co[0] = up[i];
                vec_push(&ops, ((IrGOp){.kind = IR_GOP_CAST, .loc = loc, .nin = 1, .nout = 1, .in = ci, .out = co}));
            }
            uint32_t *mi = arena_alloc(g->arena, 2 * sizeof *mi), *mo = arena_alloc(g->arena, sizeof *mo);
            mi[0] = g->seed, mi[1] = up[i] != IR_GNONE ? up[i] : nvals[2 + i], mo[0] = scaled[i];
            vec_push(&ops, ((IrGOp){.kind = IR_GOP_MUL, .loc = loc, .nin = 2, .nout = 1, .in = mi, .out = mo}));
        }
        for (uint32_t o = m->grad + 1; o < n; o++)
            if (!gone[o]) vec_push(&ops, mapped(g->ops.data[o], map, g->arena));
        for (uint32_t o = 0; o < n; o++)
            for (uint32_t r = 0; lg.dead[o] && r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = IR_GNONE;
    } else {
        for (uint32_t i = 0; i < m->ndx; i++) take_name(g, nvals[2], g->ops.data[m->dx[i]].out[0]);
        for (uint32_t i = 0; i < m->ndw; i++) take_name(g, nvals[3], g->ops.data[m->dw[i]].out[0]);
        if (half) {
            drop_round_trips(L, m->dxup, m->ndx, nvals[2], gone, map);
            drop_round_trips(L, m->dwup, m->ndw, nvals[3], gone, map);
        }
        for (int pass = 0; pass < 3; pass++)   /* before the gradient; the fused op and the rows' readers; the rest */
            for (uint32_t o = pass == 2 ? m->grad + 1 : 0; o < (pass == 2 ? n : m->grad); o++) {
                if (pass == 1 && o == 0) {
                    vec_push(&ops, cop);
                    vec_push(&ops, fop);
                }
                if (gone[o] || after[o] != (pass == 1)) continue;
                if (o == g->nfwd) nfwd = (uint32_t)ops.len;
                vec_push(&ops, mapped(g->ops.data[o], map, g->arena));
            }
    }
    for (uint32_t o = 0; o < n; o++)   /* the dropped ops' values are defined by nothing now */
        for (uint32_t r = 0; gone[o] && r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = IR_GNONE;
    vec_free(&g->ops);
    g->ops.data = ops.data, g->ops.len = ops.len, g->ops.cap = ops.cap;
    g->nfwd = nfwd;
    for (uint32_t o = 0; o < g->ops.len; o++)
        for (uint32_t r = 0; r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = o;
    return true;
}

/* The forward alone: the rows op becomes linear_cross_entropy_rows in place, the matmul
 * (and cast) go. */
static void rewrite_rows(Lce *L, const Match *m)
{
    IrGraph *g = L->g;
    uint32_t *in = arena_alloc(g->arena, 5 * sizeof *in);
    in[IR_LCE_X] = m->x, in[IR_LCE_W] = m->w, in[IR_LCE_LABELS] = m->lab, in[IR_LCE_IGNORE] = m->ign;
    IrGOp rows = g->ops.data[m->rows];
    rows.kind = IR_GOP_LINEAR_CROSS_ENTROPY_ROWS;
    rows.in = in;
    rows.nin = 4;
    VEC(IrGOp) ops = {0};
    uint32_t nfwd = g->nfwd;
    for (uint32_t o = 0; o < L->nops; o++) {
        bool gone = o == m->mm || o == m->cast;
        if (gone) {
            g->values.data[g->ops.data[o].out[0]].def = IR_GNONE;
            continue;
        }
        if (o == g->nfwd) nfwd = (uint32_t)ops.len;
        vec_push(&ops, o == m->rows ? rows : g->ops.data[o]);
    }
    vec_free(&g->ops);
    g->ops.data = ops.data, g->ops.len = ops.len, g->ops.cap = ops.cap;
    g->nfwd = nfwd;
    for (uint32_t o = 0; o < g->ops.len; o++)
        for (uint32_t r = 0; r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = o;
}

uint32_t pass_graph_lmce(IrGraph *g, int64_t chunk, bool liger, Arena *a)
{
    uint32_t done = 0;
    if (chunk < 1) chunk = PASS_LMCE_CHUNK;
    for (bool again = true; again;) {
        again = false;
        Lce L = {.g = g, .a = a, .nops = (uint32_t)g->ops.len, .nv = (uint32_t)g->values.len};
        L.uses = arena_alloc(a, (L.nv + 1) * sizeof *L.uses);
        count_uses(&L);
        for (uint32_t o = 0; o < L.nops && !again; o++) {
            Match m;
            if (g->ops.data[o].kind != IR_GOP_CROSS_ENTROPY_ROWS || !match(&L, o, &m)) continue;
            if (m.grad == IR_GNONE) rewrite_rows(&L, &m);
            else if (!rewrite(&L, &m, chunk, liger)) continue;
            again = true, done++;
        }
    }
    return done;
}
