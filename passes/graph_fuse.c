/* graph_fuse: partitions a graph into kernels (issue 10's fusion, rules 1 to 4).
 *
 * require:   a verified graph (ir_graph_verify).
 * guarantee: every op except const, size and return is in exactly one kernel; the
 *            kernels are in an order in which each reads only parameters and values
 *            that earlier kernels wrote (no cycle between kernels).
 *
 * Rule 1, element-wise chains: an element-wise op (families u b c t x d of
 * ir/graph_ops.def, and full and broadcast, which only index) joins the kernel of an
 * element-wise producer, and kernels of several element-wise producers merge, with
 * broadcasting.
 * Rule 2, GEMM epilogues: an element-wise op that consumes a matmul's result, on the
 * matmul's output shape (bias, activation, residual add, cast, dropout), joins the
 * matmul's kernel, and so do the element-wise ops after it; an element-wise chain that
 * started elsewhere is not pulled into a GEMM (no prologues), and a kernel holds one
 * matmul (rule 4 aside).
 * Rule 3, reductions and row ops (families r and n, and softmax): the op joins the
 * element-wise kernels of its producers when they compute within its operand's shape;
 * an element-wise op that is alone so far joins the row op's kernel when the row op
 * works along the last axis and the op computes on its output shape, and so do the
 * element-wise ops after it. A kernel holds one row op and no matmul.
 * Rule 4, horizontal GEMMs: a matmul joins an earlier matmul's kernel when all its
 * matmuls share the left operand and have weight matrices of one element type (one GEMM
 * against the concatenated weights); epilogues stay on one product each.
 * Every other op is a kernel of its own for now (attention, shape changes, scans,
 * matmuls' prologues). A join or merge is refused when it would make a
 * cycle (a value of the kernel that flows out through another kernel and back in) or
 * when the cost model says no: at most GF_MAX_OPS ops per kernel (register pressure)
 * and GF_MAX_READS tensors read from global memory (pointer arguments and load streams).
 * Nothing is recomputed, so rule 1 never trades memory traffic for recomputation.
 * Memory planning: each intermediate that a later kernel reads (and the return does not)
 * gets a buffer, reused by liveness in kernel order (plan_memory).
 *
 *   %0 = matmul %x, %w1
 *   %1 = add %0, %b1      ==>   kernel k0 matmul: matmul %0, add %1, mul %2, erf %3;
 *   %2 = mul %c, %1                        reads %x, %w1, %b1; writes %3
 *   %3 = erf %2
 */
#include <string.h>

#include "ir/graph.h"
#include "passes/passes.h"

#define GF_MAX_OPS 64
#define GF_MAX_READS 16

typedef struct Fuse {
    const IrGraph *g;
    Arena *a;
    uint32_t *grp;           /* per op: its kernel group, or IR_GNONE (const, size, return) */
    uint32_t *seen;          /* per op: a DFS stamp */
    uint32_t *slice;         /* per op: scratch of epilogue_slice */
    uint32_t stamp, ngroups;
} Fuse;

static bool immediate(IrGOpKind k) { return k == IR_GOP_CONST || k == IR_GOP_SIZE || k == IR_GOP_RETURN; }

static bool fusable(IrGOpKind k)
{
    return strchr("ubctxd", ir_gop_family(k)) || k == IR_GOP_FULL || k == IR_GOP_BROADCAST;
}

/* The op that defines value v, or IR_GNONE for a parameter. */
static uint32_t def_of(const Fuse *F, uint32_t v) { return F->g->values.data[v].def; }

/* Whether op p (outside group G) depends on an op of G. */
static bool reaches(Fuse *F, uint32_t p, uint32_t G)
{
    if (p == IR_GNONE || F->seen[p] == F->stamp) return false;
    F->seen[p] = F->stamp;
    const IrGOp *op = &F->g->ops.data[p];
    for (uint32_t i = 0; i < op->nin; i++) {
        uint32_t q = def_of(F, op->in[i]);
        if (q != IR_GNONE && (F->grp[q] == G || reaches(F, q, G))) return true;
    }
    return false;
}

/* No value leaves G and comes back into it through another group; within the cost model. */
static bool group_ok(Fuse *F, uint32_t G)
{
    uint32_t nops = 0, nreads = 0, reads[GF_MAX_READS + 1];
    F->stamp++;
    for (size_t o = 0; o < F->g->ops.len; o++) {
        if (F->grp[o] != G) continue;
        const IrGOp *op = &F->g->ops.data[o];
        nops++;
        for (uint32_t i = 0; i < op->nin; i++) {
            uint32_t p = def_of(F, op->in[i]);
            if (p != IR_GNONE && (F->grp[p] == G || immediate(F->g->ops.data[p].kind))) continue;
            if (reaches(F, p, G)) return false;
            bool dup = false;
            for (uint32_t r = 0; r < nreads && !dup; r++) dup = reads[r] == op->in[i];
            if (!dup && nreads++ == GF_MAX_READS) return false;
            if (!dup) reads[nreads - 1] = op->in[i];
        }
    }
    return nops <= GF_MAX_OPS;
}

/* Moves the ops of group `from` into `to`; the caller undoes it when this says no. */
static bool try_merge(Fuse *F, uint32_t from, uint32_t to)
{
    for (size_t o = 0; o < F->g->ops.len; o++)
        if (F->grp[o] == from) F->grp[o] = to;
    return group_ok(F, to);
}

/* What group G holds: its op count, whether all are element-wise, its matmul and its
 * row op (a reduction, softmax or norm), IR_GNONE where it has none. */
typedef struct GroupInfo {
    uint32_t n, mm, row;
    bool ew;
} GroupInfo;

static bool row_op(IrGOpKind k) { return strchr("rn", ir_gop_family(k)) || k == IR_GOP_SOFTMAX; }

static GroupInfo group_info(const Fuse *F, uint32_t G)
{
    GroupInfo gi = {0, IR_GNONE, IR_GNONE, true};
    for (size_t o = 0; o < F->g->ops.len; o++)
        if (F->grp[o] == G) {
            IrGOpKind k = F->g->ops.data[o].kind;
            gi.n++;
            gi.ew &= fusable(k);
            if (k == IR_GOP_MATMUL) gi.mm = (uint32_t)o;
            if (row_op(k)) gi.row = (uint32_t)o;
        }
    return gi;
}

static const IrTensorType *vtype(const Fuse *F, uint32_t v) { return &F->g->values.data[v].type; }

/* Whether shape t broadcasts to exactly shape `to` (aligned at the right). */
static bool broadcasts_to(const IrTensorType *t, const IrTensorType *to)
{
    if (t->rank > to->rank) return false;
    for (uint32_t i = 0; i < t->rank; i++) {
        IrSize d = t->dims[t->rank - 1 - i];
        int64_t c;
        if (!ir_size_eq(d, to->dims[to->rank - 1 - i]) && !(ir_size_is_const(d, &c) && c == 1)) return false;
    }
    return true;
}

static bool same_shape(const IrTensorType *a, const IrTensorType *b)
{
    IrTensorType s = {b->elem, a->rank, a->dims};
    return ir_ttype_eq(&s, b);
}

/* Whether row op r computes along the last axis of its operand (norms always do), so
 * that one program holds whole rows and can go on with them after r. */
static bool along_last_axis(const Fuse *F, uint32_t r)
{
    const IrGOp *op = &F->g->ops.data[r];
    return ir_gop_family(op->kind) == 'n' || op->attr.axis == (int64_t)vtype(F, op->in[0])->rank - 1;
}

/* Whether every op of group G computes on a shape that broadcasts to t's. */
static bool group_within(const Fuse *F, uint32_t G, const IrTensorType *t)
{
    for (size_t o = 0; o < F->g->ops.len; o++)
        if (F->grp[o] == G) {
            const IrGOp *op = &F->g->ops.data[o];
            for (uint32_t r = 0; r < op->nout; r++)
                if (!broadcasts_to(vtype(F, op->out[r]), t)) return false;
        }
    return true;
}

/* Whether op o may join group P: element-wise groups merge (rule 1); an element-wise op
 * that is alone so far joins a GEMM's kernel as its epilogue when it computes on the
 * GEMM's output shape (rule 2); a row op joins the element-wise kernels of its
 * producers when they compute within its operand's shape, and an element-wise op that
 * is alone so far joins a row op's kernel when the row op works along the last axis
 * and the op computes on the row op's output shape (rule 3). */
#define GF_MIXED (IR_GNONE - 1)

/* The matmul of GEMM group P whose result op o's operands from P derive from: IR_GNONE
 * when none is from P, GF_MIXED when they derive from two of its matmuls (a horizontal
 * group's outputs are column slices of one GEMM; an epilogue works on one slice). */
static uint32_t epilogue_slice(const Fuse *F, uint32_t o, uint32_t P)
{
    uint32_t *slice = F->slice, s = IR_GNONE;
    for (uint32_t d = 0; d <= o; d++) {
        const IrGOp *op = &F->g->ops.data[d];
        if (d < o && F->grp[d] != P) continue;
        uint32_t t = op->kind == IR_GOP_MATMUL && d < o ? d : IR_GNONE;
        for (uint32_t i = 0; t != d && i < op->nin && t != GF_MIXED; i++) {
            uint32_t q = def_of(F, op->in[i]);
            if (q == IR_GNONE || F->grp[q] != P || slice[q] == IR_GNONE) continue;
            t = t == IR_GNONE || t == slice[q] ? slice[q] : GF_MIXED;
        }
        slice[d] = s = t;
    }
    return s;
}

/* Rule 4, horizontal GEMMs: matmul o joins GEMM group P when every matmul of P has o's
 * left operand and a weight matrix (rank 2) of o's element type, and o's weight does not
 * come from P. */
static bool may_join_horizontal(const Fuse *F, uint32_t o, uint32_t P)
{
    const IrGOp *op = &F->g->ops.data[o];
    uint32_t w = def_of(F, op->in[1]);
    if (vtype(F, op->in[1])->rank != 2 || (w != IR_GNONE && F->grp[w] == P)) return false;
    for (size_t d = 0; d < F->g->ops.len; d++) {
        const IrGOp *m = &F->g->ops.data[d];
        if (F->grp[d] != P || m->kind != IR_GOP_MATMUL) continue;
        if (m->in[0] != op->in[0] || vtype(F, m->in[1])->rank != 2 ||
            vtype(F, m->in[1])->elem != vtype(F, op->in[1])->elem)
            return false;
    }
    return true;
}

static bool may_join(const Fuse *F, uint32_t o, uint32_t P)
{
    GroupInfo p = group_info(F, P), mine = group_info(F, F->grp[o]);
    const IrGOp *op = &F->g->ops.data[o];
    if (op->kind == IR_GOP_MATMUL) return mine.n == 1 && p.mm != IR_GNONE && may_join_horizontal(F, o, P);
    if (row_op(op->kind))   /* rule 3, producers: o's group is o and its producers so far */
        return mine.row == o && p.ew && group_within(F, P, vtype(F, op->in[0]));
    if (mine.mm != IR_GNONE || !mine.ew) return false;
    const IrTensorType *r = vtype(F, op->out[0]);
    if (p.mm != IR_GNONE) {
        uint32_t s = mine.n == 1 ? epilogue_slice(F, o, P) : GF_MIXED;
        return s != GF_MIXED && s != IR_GNONE && same_shape(r, vtype(F, F->g->ops.data[s].out[0]));
    }
    if (p.row != IR_GNONE)  /* rule 3, consumers */
        return mine.n == 1 && along_last_axis(F, p.row) && same_shape(r, vtype(F, F->g->ops.data[p.row].out[0]));
    return p.ew;
}

/* Op o joins the groups of its element-wise producers or a GEMM's, or starts its own. */
static void place(Fuse *F, uint32_t o)
{
    const IrGOp *op = &F->g->ops.data[o];
    F->grp[o] = F->ngroups++;
    if (!fusable(op->kind) && !row_op(op->kind) && op->kind != IR_GOP_MATMUL) return;
    /* A matmul looks for an earlier matmul with the same left operand (rule 4), the
     * others for their operands' producers. */
    uint32_t n = op->kind == IR_GOP_MATMUL ? o : op->nin;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t p = op->kind != IR_GOP_MATMUL ? def_of(F, op->in[i])
                     : F->g->ops.data[i].kind == IR_GOP_MATMUL && F->g->ops.data[i].in[0] == op->in[0] ? i
                                                                                                     : IR_GNONE;
        if (p == IR_GNONE || F->grp[p] == IR_GNONE || F->grp[p] == F->grp[o] || !may_join(F, o, F->grp[p]))
            continue;
        uint32_t mine = F->grp[o], theirs = F->grp[p];
        uint32_t *saved = arena_alloc(F->a, F->g->ops.len * sizeof *saved);
        memcpy(saved, F->grp, F->g->ops.len * sizeof *saved);
        if (!try_merge(F, mine, theirs)) memcpy(F->grp, saved, F->g->ops.len * sizeof *saved);
    }
}

/* ---- the plan: kernels in dependency order ------------------------------------------------ */

static const char *kind_of(const Fuse *F, const uint32_t *ops, uint32_t n)
{
    uint32_t nmm = 0;
    for (uint32_t i = 0; i < n; i++) nmm += F->g->ops.data[ops[i]].kind == IR_GOP_MATMUL;
    if (nmm > 1) return "horizontal_matmul";
    for (uint32_t i = 0; i < n; i++)
        if (!fusable(F->g->ops.data[ops[i]].kind)) return ir_gop_name(F->g->ops.data[ops[i]].kind);
    return "elementwise";
}

/* The values of kernel K that ops outside it (or the return) use: its writes; the
 * values from outside that it uses: its reads. */
static void kernel_io(const Fuse *F, uint32_t G, IrGKernel *K)
{
    uint32_t n = (uint32_t)F->g->values.len, *reads = arena_alloc(F->a, (n + 1) * sizeof *reads),
             *writes = arena_alloc(F->a, (n + 1) * sizeof *writes);
    bool *in_r = arena_alloc(F->a, n + 1), *in_w = arena_alloc(F->a, n + 1);
    for (size_t o = 0; o < F->g->ops.len; o++) {
        const IrGOp *op = &F->g->ops.data[o];
        for (uint32_t i = 0; i < op->nin; i++) {
            uint32_t v = op->in[i], p = def_of(F, v);
            bool inside = p != IR_GNONE && F->grp[p] == G, imm = p != IR_GNONE && immediate(F->g->ops.data[p].kind);
            if (F->grp[o] == G && !inside && !imm && !in_r[v]) in_r[v] = true, reads[K->nreads++] = v;
            if (F->grp[o] != G && inside && !in_w[v]) in_w[v] = true, writes[K->nwrites++] = v;
        }
    }
    K->reads = reads;
    K->writes = writes;
}

/* Kahn's order over the groups: a group comes after every group it reads from. */
static IrGPlan *make_plan(Fuse *F)
{
    uint32_t ng = F->ngroups, nops = (uint32_t)F->g->ops.len, nk = 0;
    uint32_t *count = arena_alloc(F->a, (ng + 1) * sizeof *count), *order = arena_alloc(F->a, (ng + 1) * sizeof *order);
    bool *done = arena_alloc(F->a, ng + 1), *used = arena_alloc(F->a, ng + 1);
    for (uint32_t o = 0; o < nops; o++)
        if (F->grp[o] != IR_GNONE) count[F->grp[o]]++, used[F->grp[o]] = true;
    for (bool progress = true; progress;) {
        progress = false;
        for (uint32_t G = 0; G < ng; G++) {
            if (!used[G] || done[G]) continue;
            bool ready = true;
            for (uint32_t o = 0; o < nops && ready; o++) {
                const IrGOp *op = &F->g->ops.data[o];
                for (uint32_t i = 0; F->grp[o] == G && i < op->nin && ready; i++) {
                    uint32_t p = def_of(F, op->in[i]);
                    ready = p == IR_GNONE || F->grp[p] == IR_GNONE || F->grp[p] == G || done[F->grp[p]];
                }
            }
            if (ready) done[G] = progress = true, order[nk++] = G;
        }
    }
    IrGKernel *ks = arena_alloc(F->a, (nk + 1) * sizeof *ks);
    for (uint32_t k = 0; k < nk; k++) {
        uint32_t G = order[k], *ops = arena_alloc(F->a, (count[G] + 1) * sizeof *ops), n = 0;
        for (uint32_t o = 0; o < nops; o++)
            if (F->grp[o] == G) ops[n++] = o;
        ks[k] = (IrGKernel){.kind = kind_of(F, ops, n), .nops = n, .ops = ops};
        kernel_io(F, G, &ks[k]);
    }
    IrGPlan *plan = arena_alloc(F->a, sizeof *plan);
    *plan = (IrGPlan){.nkernels = nk, .kernels = ks};
    return plan;
}

/* ---- memory planning: buffers reused by liveness -------------------------------------- */

/* Whether x <= y for every value of the sizes (all at least 1): y - x has no negative
 * coefficient. */
static bool size_le(Arena *a, IrSize x, IrSize y)
{
    IrSize d;
    if (!ir_size_add(a, y, x, -1, &d) || d.c < 0) return false;
    for (uint32_t i = 0; i < d.n; i++)
        if (d.m[i].k < 0) return false;
    return true;
}

typedef struct Buf {
    IrSize bytes;
    bool sized;              /* false: the byte count overflows; never shared */
    uint32_t n, free_after;  /* free_after: the last reader of its latest value */
    uint32_t *values, *first, *last;
} Buf;

/* Each intermediate that a kernel writes and a later kernel reads (and the return does
 * not) gets a buffer: in kernel order, the first buffer of the same size whose last
 * reader ran, else the first of a larger size, else a new one. */
static void plan_memory(Fuse *F, IrGPlan *plan)
{
    const IrGraph *g = F->g;
    uint32_t nv = (uint32_t)g->values.len, nk = plan->nkernels, nb = 0;
    uint32_t *last = arena_alloc(F->a, (nv + 1) * sizeof *last);
    bool *returned = arena_alloc(F->a, nv + 1);
    const IrGOp *ret = &g->ops.data[g->ops.len - 1];
    for (uint32_t i = 0; i < ret->nin; i++) returned[ret->in[i]] = true;
    for (uint32_t k = 0; k < nk; k++)
        for (uint32_t i = 0; i < plan->kernels[k].nreads; i++) last[plan->kernels[k].reads[i]] = k;
    uint32_t cap = 0;
    for (uint32_t k = 0; k < nk; k++) cap += plan->kernels[k].nwrites;
    Buf *bufs = arena_alloc(F->a, (cap + 1) * sizeof *bufs);
    for (uint32_t k = 0; k < nk; k++)
        for (uint32_t w = 0; w < plan->kernels[k].nwrites; w++) {
            uint32_t v = plan->kernels[k].writes[w];
            if (returned[v] || g->values.data[v].def == IR_GNONE) continue;
            const IrTensorType *t = vtype(F, v);
            IrSize n, bytes = ir_size_const(0);
            bool sized = ir_size_numel(F->a, t->rank, t->dims, &n) &&
                         ir_size_mul(F->a, n, ir_size_const(ir_elem_bytes(t->elem)), &bytes);
            uint32_t pick = nb;
            for (uint32_t b = 0; sized && b < nb && pick == nb; b++)
                if (bufs[b].sized && bufs[b].free_after < k && ir_size_eq(bytes, bufs[b].bytes)) pick = b;
            for (uint32_t b = 0; sized && b < nb && pick == nb; b++)
                if (bufs[b].sized && bufs[b].free_after < k && size_le(F->a, bytes, bufs[b].bytes)) pick = b;
            Buf *B = &bufs[pick];
            if (pick == nb) {
                nb++;
                *B = (Buf){.bytes = bytes, .sized = sized};
                B->values = arena_alloc(F->a, (cap + 1) * sizeof *B->values);
                B->first = arena_alloc(F->a, (cap + 1) * sizeof *B->first);
                B->last = arena_alloc(F->a, (cap + 1) * sizeof *B->last);
            }
            B->values[B->n] = v;
            B->first[B->n] = k;
            B->last[B->n++] = B->free_after = last[v];
        }
    IrGBuffer *out = arena_alloc(F->a, (nb + 1) * sizeof *out);
    for (uint32_t b = 0; b < nb; b++)
        out[b] = (IrGBuffer){bufs[b].bytes, bufs[b].n, bufs[b].values, bufs[b].first, bufs[b].last};
    plan->nbuffers = nb;
    plan->buffers = out;
}

IrGPlan *pass_graph_fuse(const IrGraph *g, Arena *a)
{
    size_t n = g->ops.len;
    Fuse F = {.g = g, .a = a};
    F.grp = arena_alloc(a, (n + 1) * sizeof *F.grp);
    F.seen = arena_alloc(a, (n + 1) * sizeof *F.seen);
    F.slice = arena_alloc(a, (n + 1) * sizeof *F.slice);
    memset(F.grp, 0xFF, (n + 1) * sizeof *F.grp);   /* IR_GNONE: not placed yet */
    for (size_t o = 0; o < n; o++) {
        if (immediate(g->ops.data[o].kind)) F.grp[o] = IR_GNONE;
        else place(&F, (uint32_t)o);
    }
    IrGPlan *plan = make_plan(&F);
    plan_memory(&F, plan);
    return plan;
}
