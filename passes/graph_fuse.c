/* graph_fuse: partitions a graph into kernels (issue 10's fusion, rules 1 to 7).
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
 * matmul (rule 4 aside). Attention (rule 5) and conv2d (rule 6) kernels take epilogues
 * the same way, and so does rope (an element-wise kernel that reads each lane's partner
 * in the pair from memory, so its operands come from memory: no prologue either).
 * Rule 2b, recomputed chains into the consuming GEMM (backward ops only, after
 * recomputation planning): an element-wise kernel of the backward whose values a
 * backward GEMM's epilogue reads joins that GEMM when all its ops are on the GEMM's
 * output shape and none feeds the matmul itself (sink_chains, after placement); and an
 * element-wise op whose chain is bound for a later GEMM's epilogue stays out of an
 * earlier GEMM's epilogue when that makes the earlier GEMM write less (bound_elsewhere).
 * Rule 3, reductions and row ops (families r and n, and softmax): the op joins the
 * element-wise kernels of its producers when they compute within its operand's shape.
 * A kernel whose row ops all work along the last axis of operands of one shape S (one
 * program holds whole rows of S) goes on with the rows: an element-wise op that is
 * alone so far joins it when it computes row by row (on S, on S without its last axis,
 * or on S with a last axis of 1; operands from the kernel of the row shapes, and a
 * per-row value reaches an op on S only through the unit axis: `x - max(x, 1)[:, None]`),
 * a reshape that only adds or drops that unit axis joins, and so does another row op
 * along the last axis of an operand of shape S (several reductions of one row, also of
 * one operand: `sum(x, 1)` and `max(x, 1)`). A kernel holds no matmul with row ops.
 * Rule 4, horizontal GEMMs: a matmul joins an earlier matmul's kernel when all its
 * matmuls share the left operand, have weight matrices of one element type and results
 * of one shape (one GEMM against the concatenated weights); epilogues stay on one
 * product each.
 * Rule 5, attention: `attention` is a flash_attention kernel, and so is attention
 * written out by hand, found before placement (find_attention): matmul(q, kt) [with
 * kt = trans(k) of the last two axes], then any of scale by a scalar (mul, div), an
 * additive mask (add), casts, then softmax along the last axis, then casts or dropout,
 * then matmul(., v), each value used once by the next; the kernel never writes the
 * scores or the probabilities.
 * Rule 6, conv2d: a conv2d is an implicit-GEMM kernel (kind conv2d) with epilogues as in
 * rule 2; an element-wise chain on per-channel vectors (shapes whose only axis larger
 * than 1 is the channel axis: BatchNorm's mean, variance, scale and shift, reshaped to
 * [K, 1, 1]) that only this kernel uses joins it: the folded scale and shift, computed
 * per output tile. That is the one recomputation fusion does (rule 7).
 * Rule 7, the cost model: a join or merge is refused when it would make a cycle (a value
 * of one kernel flows out through another kernel and back in), past GF_MAX_OPS ops per
 * kernel (register pressure) or GF_MAX_READS tensors read from global memory (pointer
 * arguments and load streams). No op is in two kernels: a value that two kernels use is
 * computed once, written once and read by each, unless recomputing it is cheaper, which
 * is the case of rule 6's per-channel vectors only (K elements per output tile against a
 * launch and a round trip through memory), and then only when no other kernel uses them.
 * Every other op is a kernel of its own (shape changes, scans, matmuls' prologues).
 * Rule 8, the optimizer step (family O): found_inf and global_norm over the same list
 * of tensors are one kernel (grad_stats: one pass over the gradients, however many);
 * adamw is one kernel over all its parameters. Neither takes other ops, and the
 * GF_MAX_READS bound does not apply to them (they read their tensors through one
 * concatenated index space, not as streams of one tile).
 * Rule 9, permutations (issue 42): a trans that keeps the last axis, and then reshapes
 * and element-wise ops on scalars, join the element-wise or rope kernel that computes
 * their operand (may_join_permuted): the kernel writes the permuted value, no copy
 * kernel. A trans of a value in memory that only strided readers read (attention, GEMMs,
 * element-wise and rope kernels) is a view (is_trans_view), and a flash_attention or
 * attention_bwd kernel writes its result through the trans after it (is_store_view).
 * Rule 10, casts up by the reader (issue 42): a cast of the backward to a wider float,
 * of a value in memory anyway (a GEMM, attention or rope reads it, or it is returned),
 * stays out of its operand's kernel (which would write the f32 copy too) and joins the
 * one kernel that reads it after placement (sink_casts): the residual stream's bf16
 * gradient is cast up by the next norm's row kernel.
 * Phases: after recomputation planning (graph_remat.c) an op computed in the forward
 * (phase 1) and one of the backward (phase 2, recomputed copies included) never share
 * a kernel, so a recomputed value is not pulled back into the forward's kernels.
 *
 * Cost: O(n) space and about O(n log n) time for n ops (pass_graph_fuse): groups keep
 * their member lists, and a topological order of the groups is kept up to date while
 * they merge (the Pearce-Kelly rule for contracting two nodes of a DAG), so the cycle
 * check only visits the groups between the two that merge, and the plan is that order.
 * Memory planning: each intermediate that a later kernel reads (and the return does not)
 * gets a buffer, reused by liveness in kernel order (plan_memory).
 *
 *   %0 = matmul %x, %w1
 *   %1 = add %0, %b1      ==>   kernel k0 matmul: matmul %0, add %1, mul %2, erf %3;
 *   %2 = mul %c, %1                        reads %x, %w1, %b1; writes %3
 *   %3 = erf %2
 */
#include <stdlib.h>
#include <string.h>

#include "ir/graph.h"
#include "passes/passes.h"

#define GF_MAX_OPS 64
#define GF_MAX_READS 16
#define NONE IR_GNONE
#define GF_MIXED (IR_GNONE - 1)
#define GF_UNKNOWN (IR_GNONE - 2)

typedef struct Fuse {
    const IrGraph *g;
    Arena *a;
    uint32_t nops, nvals;
    uint32_t *grp;           /* per op: its group, or NONE (const, size, return; not placed yet) */
    uint32_t *next;          /* per op: the next member of its group (ascending), NONE at the end */
    uint32_t *head, *size;   /* per group: its first member and its member count */
    uint8_t *phase;          /* per group: the phase of its ops (IrGOp.phase), 0 for none */
    uint32_t *pos, *order;   /* per group its position in a topological order; per position its group */
    uint32_t npos;
    uint32_t *use_at, *uses; /* the ops using value v: uses[use_at[v] .. use_at[v + 1]), ascending */
    uint32_t *gmark, *gside, *vmark, stamp;
    uint32_t *stack, *cand, *fw, *bw, *slots;   /* scratch */
    uint32_t *slice;         /* per op: scratch of epilogue_slice */
    uint32_t *attn;          /* per op: the last matmul of the attention written out it is part of */
    uint32_t *attn_first;    /* per such matmul: the first op of its attention placed, or NONE */
    bool *attn_broken;       /* per such matmul: one of its ops could not join the others */
    uint32_t *bound;         /* per op: bound_gemm's answer, GF_UNKNOWN before it is asked */
} Fuse;

static const IrGOp *opat(const Fuse *F, uint32_t o) { return &F->g->ops.data[o]; }
static uint32_t def_of(const Fuse *F, uint32_t v) { return F->g->values.data[v].def; }
static const IrTensorType *vtype(const Fuse *F, uint32_t v) { return &F->g->values.data[v].type; }

static bool immediate(IrGOpKind k) { return k == IR_GOP_CONST || k == IR_GOP_SIZE || k == IR_GOP_RETURN; }

static bool fusable(IrGOpKind k)
{
    return strchr("ubctxd", ir_gop_family(k)) || k == IR_GOP_FULL || k == IR_GOP_BROADCAST;
}

static bool row_op(IrGOpKind k) { return strchr("rn", ir_gop_family(k)) || k == IR_GOP_SOFTMAX; }

/* A matmul, attention, conv2d or rope: the op an epilogue follows. */
static bool root_op(IrGOpKind k)
{
    return k == IR_GOP_MATMUL || k == IR_GOP_ATTENTION || k == IR_GOP_CONV2D || k == IR_GOP_ROPE;
}

static bool is_one(IrSize d)
{
    int64_t c;
    return ir_size_is_const(d, &c) && c == 1;
}

/* Whether shape t broadcasts to exactly shape `to` (aligned at the right). */
static bool broadcasts_to(const IrTensorType *t, const IrTensorType *to)
{
    if (t->rank > to->rank) return false;
    for (uint32_t i = 0; i < t->rank; i++) {
        IrSize d = t->dims[t->rank - 1 - i];
        if (!ir_size_eq(d, to->dims[to->rank - 1 - i]) && !is_one(d)) return false;
    }
    return true;
}

static bool same_shape(const IrTensorType *a, const IrTensorType *b)
{
    IrTensorType s = {b->elem, a->rank, a->dims};
    return ir_ttype_eq(&s, b);
}

/* A reshape that only adds or drops axes of size 1 (`m[:, None]`): it only indexes. */
static bool unit_reshape(const Fuse *F, uint32_t o)
{
    const IrGOp *op = opat(F, o);
    if (op->kind != IR_GOP_RESHAPE) return false;
    const IrTensorType *a = vtype(F, op->in[0]), *b = vtype(F, op->out[0]);
    uint32_t i = 0, j = 0;
    for (;;) {
        while (i < a->rank && is_one(a->dims[i])) i++;
        while (j < b->rank && is_one(b->dims[j])) j++;
        if (i == a->rank || j == b->rank) return i == a->rank && j == b->rank;
        if (!ir_size_eq(a->dims[i++], b->dims[j++])) return false;
    }
}

/* Whether row op r computes along the last axis of its operand (norms always do), so
 * that one program holds whole rows and can go on with them after r. */
static bool along_last_axis(const Fuse *F, uint32_t r)
{
    const IrGOp *op = opat(F, r);
    return ir_gop_family(op->kind) == 'n' || op->attr.axis == (int64_t)vtype(F, op->in[0])->rank - 1;
}

/* The op that uses value v if exactly one op does (the return does not count as one). */
static uint32_t single_user(const Fuse *F, uint32_t v)
{
    uint32_t n = F->use_at[v + 1] - F->use_at[v];
    if (n != 1) return NONE;
    uint32_t u = F->uses[F->use_at[v]];
    return opat(F, u)->kind == IR_GOP_RETURN ? NONE : u;
}

/* ---- groups: member lists and a topological order kept while they merge -------------- */

static void new_group(Fuse *F, uint32_t o)
{
    F->grp[o] = o;
    F->head[o] = o;
    F->next[o] = NONE;
    F->size[o] = 1;
    F->phase[o] = opat(F, o)->phase;
    F->pos[o] = F->npos;
    F->order[F->npos++] = o;
}

#define MEMBERS(F, G, m) for (uint32_t m = (F)->head[G]; m != NONE; m = (F)->next[m])

/* Whether groups X and Y together stay within the cost model's caps. */
static bool grad_stats(IrGOpKind k) { return k == IR_GOP_FOUND_INF || k == IR_GOP_GLOBAL_NORM; }

static bool within_cost(Fuse *F, uint32_t X, uint32_t Y)
{
    if (F->size[X] + F->size[Y] > GF_MAX_OPS) return false;
    if (grad_stats(opat(F, F->head[X])->kind) && grad_stats(opat(F, F->head[Y])->kind)) return true;   /* rule 8 */
    if (F->phase[X] && F->phase[Y] && F->phase[X] != F->phase[Y]) return false;   /* forward and backward */
    uint32_t st = ++F->stamp, nreads = 0, G[2] = {X, Y};
    for (int i = 0; i < 2; i++)
        MEMBERS(F, G[i], m) {
            const IrGOp *op = opat(F, m);
            for (uint32_t j = 0; j < op->nin; j++) {
                uint32_t v = op->in[j], d = def_of(F, v);
                if (d != NONE && (F->grp[d] == X || F->grp[d] == Y || immediate(opat(F, d)->kind))) continue;
                if (F->vmark[v] == st) continue;
                F->vmark[v] = st;
                if (++nreads > GF_MAX_READS) return false;
            }
        }
    return true;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

/* Positions to groups: sorts the positions of list l (n groups) and maps them back. */
static void sort_by_pos(Fuse *F, uint32_t *l, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) l[i] = F->pos[l[i]];
    qsort(l, n, sizeof *l, cmp_u32);
    for (uint32_t i = 0; i < n; i++) l[i] = F->order[l[i]];
}

/* Makes groups X and Y one when no path leads from one through a third group to the
 * other (which would be a cycle between kernels); returns the group, or NONE. With A
 * the earlier of the two in the order and B the later, only groups between them can be
 * on such a path: fw holds those that A reaches, bw those that reach B; the merged
 * group takes bw's places first, then itself, then fw's (Pearce and Kelly's reordering),
 * which keeps every edge forward. */
static uint32_t contract(Fuse *F, uint32_t X, uint32_t Y)
{
    uint32_t A = F->pos[X] < F->pos[Y] ? X : Y, B = A == X ? Y : X;
    uint32_t lo = F->pos[A], hi = F->pos[B], st = ++F->stamp, nf = 0, nb = 0, sp = 0;
    F->stack[sp++] = A;
    while (sp) {
        uint32_t G = F->stack[--sp];
        MEMBERS(F, G, m) {
            const IrGOp *op = opat(F, m);
            for (uint32_t r = 0; r < op->nout; r++)
                for (uint32_t u = F->use_at[op->out[r]]; u < F->use_at[op->out[r] + 1]; u++) {
                    uint32_t C = F->grp[F->uses[u]];
                    if (C == NONE || C == A || C == B || F->pos[C] > hi || F->gmark[C] == st) continue;
                    F->gmark[C] = st;
                    F->gside[C] = 1;
                    F->fw[nf++] = F->stack[sp++] = C;
                }
        }
    }
    F->stack[sp++] = B;
    while (sp) {
        uint32_t G = F->stack[--sp];
        MEMBERS(F, G, m) {
            const IrGOp *op = opat(F, m);
            for (uint32_t j = 0; j < op->nin; j++) {
                uint32_t d = def_of(F, op->in[j]), C = d == NONE ? NONE : F->grp[d];
                if (C == NONE || C == A || C == B || F->pos[C] < lo) continue;
                if (F->gmark[C] == st) {
                    if (F->gside[C] == 1) return NONE;   /* A reaches C, C reaches B */
                    continue;
                }
                F->gmark[C] = st;
                F->gside[C] = 2;
                F->bw[nb++] = F->stack[sp++] = C;
            }
        }
    }
    /* The places of A, B, fw and bw, in order. */
    uint32_t ns = 0;
    F->slots[ns++] = lo;
    F->slots[ns++] = hi;
    for (uint32_t i = 0; i < nf; i++) F->slots[ns++] = F->pos[F->fw[i]];
    for (uint32_t i = 0; i < nb; i++) F->slots[ns++] = F->pos[F->bw[i]];
    qsort(F->slots, ns, sizeof *F->slots, cmp_u32);
    sort_by_pos(F, F->fw, nf);
    sort_by_pos(F, F->bw, nb);
    /* The members: the smaller group's go to the larger, merged in ascending order. */
    uint32_t keep = F->size[A] >= F->size[B] ? A : B, gone = keep == A ? B : A, h = NONE, *tail = &h;
    MEMBERS(F, gone, m) F->grp[m] = keep;
    for (uint32_t p = F->head[keep], q = F->head[gone]; p != NONE || q != NONE; tail = &F->next[*tail]) {
        if (q == NONE || (p != NONE && p < q)) *tail = p, p = F->next[p];
        else *tail = q, q = F->next[q];
    }
    *tail = NONE;
    F->head[keep] = h;
    F->size[keep] += F->size[gone];
    F->size[gone] = 0;
    F->phase[keep] |= F->phase[gone];
    F->head[gone] = NONE;
    uint32_t k = 0;
    for (uint32_t i = 0; i < nb; i++) F->order[F->slots[k]] = F->bw[i], F->pos[F->bw[i]] = F->slots[k++];
    F->order[F->slots[k]] = keep, F->pos[keep] = F->slots[k++];
    for (uint32_t i = 0; i < nf; i++) F->order[F->slots[k]] = F->fw[i], F->pos[F->fw[i]] = F->slots[k++];
    F->order[F->slots[k]] = NONE;
    return keep;
}

static uint32_t try_join(Fuse *F, uint32_t X, uint32_t Y)
{
    if (X == Y) return X;
    return within_cost(F, X, Y) ? contract(F, X, Y) : NONE;
}

/* ---- what a group holds -------------------------------------------------------------------- */

/* Its op count, whether all are element-wise, its (last) matmul, its first row op (a
 * reduction, softmax or norm), its first matmul, attention or conv2d (what an epilogue
 * follows), its conv2d, whether it is attention (rule 5), and whether its row ops all
 * work along the last axis of operands of one shape S. NONE where it has none. */
typedef struct GroupInfo {
    uint32_t n, mm, row, root, conv;
    bool ew, flash, rows_last;
    const IrTensorType *S;
} GroupInfo;

static bool flash_member(const Fuse *F, uint32_t m)
{
    return opat(F, m)->kind == IR_GOP_ATTENTION || (F->attn[m] != NONE && !F->attn_broken[F->attn[m]]);
}

static GroupInfo group_info(const Fuse *F, uint32_t G)
{
    GroupInfo gi = {0, NONE, NONE, NONE, NONE, true, false, true, NULL};
    MEMBERS(F, G, m) {
        const IrGOp *op = opat(F, m);
        gi.n++;
        gi.ew &= fusable(op->kind);
        gi.flash |= flash_member(F, m);
        if (op->kind == IR_GOP_MATMUL) gi.mm = m;
        if (op->kind == IR_GOP_CONV2D) gi.conv = m;
        if (root_op(op->kind) && gi.root == NONE) gi.root = m;
        if (!row_op(op->kind)) continue;
        const IrTensorType *t = vtype(F, op->in[0]);
        if (gi.row == NONE) gi.row = m, gi.S = t;
        gi.rows_last &= along_last_axis(F, m) && same_shape(t, gi.S);
    }
    gi.rows_last &= gi.row != NONE;
    return gi;
}

/* Whether every op of group G computes on a shape that broadcasts to t's. */
static bool group_within(const Fuse *F, uint32_t G, const IrTensorType *t)
{
    MEMBERS(F, G, m) {
        const IrGOp *op = opat(F, m);
        for (uint32_t r = 0; r < op->nout; r++)
            if (!broadcasts_to(vtype(F, op->out[r]), t)) return false;
    }
    return true;
}

/* For rows of shape S: 2 for S itself, 1 for a per-row shape (S without its last axis,
 * or with a last axis of 1), 0 for neither. */
static int row_class(const IrTensorType *t, const IrTensorType *S)
{
    if (S->rank == 0) return 0;
    if (same_shape(t, S)) return 2;
    uint32_t n = S->rank - 1;
    if (t->rank != n && !(t->rank == S->rank && is_one(t->dims[n]))) return 0;
    for (uint32_t i = 0; i < n; i++)
        if (!ir_size_eq(t->dims[i], S->dims[i])) return 0;
    return 1;
}

/* Whether op o computes row by row on rows of S: its result and its operands from group
 * P of row shapes, and a per-row operand of an op on S with the unit axis (so that it
 * broadcasts along the row, not across the rows). */
static bool row_aligned(const Fuse *F, uint32_t o, uint32_t P, const IrTensorType *S)
{
    const IrGOp *op = opat(F, o);
    int rc = row_class(vtype(F, op->out[0]), S);
    if (!rc) return false;
    for (uint32_t i = 0; i < op->nin; i++) {
        uint32_t d = def_of(F, op->in[i]);
        if (d == NONE || F->grp[d] != P) continue;
        const IrTensorType *t = vtype(F, op->in[i]);
        int c = row_class(t, S);
        if (!c || (c == 2 && rc == 1) || (c == 1 && rc == 2 && t->rank != S->rank)) return false;
    }
    return true;
}

/* The root (matmul, attention, conv2d) of group P whose result op o's operands from P
 * derive from: NONE when none is from P, GF_MIXED when they derive from two of them (a
 * horizontal group's outputs are column slices of one GEMM; an epilogue works on one). */
/* Op d's slice (F->slice[d]) from those of its operands' ops in P, which are known:
 * d itself when it is a root of P (as_root), else the one root they derive from. */
static uint32_t slice_step(const Fuse *F, uint32_t d, uint32_t P, bool as_root)
{
    const IrGOp *op = opat(F, d);
    uint32_t t = as_root && root_op(op->kind) ? d : NONE;
    for (uint32_t i = 0; t != d && i < op->nin && t != GF_MIXED; i++) {
        uint32_t q = def_of(F, op->in[i]);
        if (q == NONE || F->grp[q] != P || F->slice[q] == NONE) continue;
        t = t == NONE || t == F->slice[q] ? F->slice[q] : GF_MIXED;
    }
    return F->slice[d] = t;
}

static uint32_t epilogue_slice(const Fuse *F, uint32_t o, uint32_t P)
{
    MEMBERS(F, P, m) slice_step(F, m, P, true);
    return slice_step(F, o, P, false);
}

/* May op o's results pair the products of horizontal group P (rule 4b): every product
 * of P is a 2-D GEMM whose result has o's shape (the tiles of all of them then line up,
 * and one program computes the same tile of each), and o is element-wise. */
static bool pairs_products(const Fuse *F, uint32_t o, uint32_t P)
{
    const IrTensorType *t = vtype(F, opat(F, o)->out[0]);
    uint32_t nmm = 0;
    if (t->rank != 2) return false;
    MEMBERS(F, P, d) {
        const IrGOp *m = opat(F, d);
        if (m->kind != IR_GOP_MATMUL) continue;
        nmm++;
        if (vtype(F, m->in[1])->rank != 2 || !same_shape(vtype(F, m->out[0]), t)) return false;
    }
    return nmm >= 2;
}

/* Rule 4, horizontal GEMMs: matmul o joins GEMM group P when every matmul of P has o's
 * left operand and a weight matrix (rank 2) of o's element type, and o's weight does not
 * come from P. */
static bool may_join_horizontal(const Fuse *F, uint32_t o, uint32_t P)
{
    const IrGOp *op = opat(F, o);
    uint32_t w = def_of(F, op->in[1]);
    if (vtype(F, op->in[1])->rank != 2 || (w != NONE && F->grp[w] == P)) return false;
    MEMBERS(F, P, d) {
        const IrGOp *m = opat(F, d);
        if (m->kind != IR_GOP_MATMUL) continue;
        if (m->in[0] != op->in[0] || vtype(F, m->in[1])->rank != 2 ||
            vtype(F, m->in[1])->elem != vtype(F, op->in[1])->elem)
            return false;
        /* products of one shape only: a group of unlike products lowers to one body per
         * shape under `if`s, whose several ring loops take no producer warpgroup
         * (passes/schedule.c); apart, each kernel gets its fast schedule (Llama's Q and
         * K, V projections: [T, 4096] beside two [T, 1024], 0.12 ms together on an H100,
         * 430 TFLOP/s) */
        if (!same_shape(vtype(F, m->out[0]), vtype(F, op->out[0]))) return false;
    }
    return true;
}

/* Whether the results of groups X and Y broadcast to one shape (an element-wise kernel's
 * shape): two chains of unrelated shapes that share a scalar operand (the seed scaling
 * the fused LM head's dx [T, D] and dw [D, V]) stay two kernels. */
static bool shapes_meet(const Fuse *F, uint32_t X, uint32_t Y)
{
    uint32_t n = 0;
    const IrSize *d = NULL;
    for (int side = 0; side < 2; side++) {
        MEMBERS(F, side ? Y : X, m) {
            const IrGOp *op = opat(F, m);
            for (uint32_t r = 0; r < op->nout; r++) {
                const IrTensorType *t = vtype(F, op->out[r]);
                if (!ir_broadcast_shapes(F->a, n, d, t->rank, t->dims, &n, &d)) return false;
            }
        }
    }
    return true;
}

/* ---- rule 9: permuted epilogues -------------------------------------------------------- */

static bool permutation(IrGOpKind k) { return k == IR_GOP_TRANS || k == IR_GOP_RESHAPE; }

/* Is value v computed in group P through a permutation: a trans or reshape of P, or an
 * element-wise op of P on such a value? (graph_lower.c indexes it through the
 * permutation: its lanes are those of the value the chain started from.) */
static bool permuted(const Fuse *F, uint32_t v, uint32_t P)
{
    uint32_t d = def_of(F, v);
    if (d == NONE || F->grp[d] != P) return false;
    const IrGOp *op = opat(F, d);
    if (permutation(op->kind)) return F->size[P] > 1 && d != F->head[P];
    if (!fusable(op->kind)) return false;
    for (uint32_t i = 0; i < op->nin; i++)
        if (permuted(F, op->in[i], P)) return true;
    return false;
}

static bool plain_group(const Fuse *F, uint32_t P);

static bool uses_permuted(const Fuse *F, uint32_t o, uint32_t P)
{
    const IrGOp *op = opat(F, o);
    if (!plain_group(F, P)) return false;   /* a rows kernel's unit reshapes (rule 3) */
    for (uint32_t i = 0; i < op->nin; i++)
        if (permuted(F, op->in[i], P)) return true;
    return false;
}

/* An element-wise or rope kernel: every op element-wise, rope, or a permutation of its
 * epilogue. */
static bool plain_group(const Fuse *F, uint32_t P)
{
    MEMBERS(F, P, m) {
        IrGOpKind k = opat(F, m)->kind;
        if (!fusable(k) && k != IR_GOP_ROPE && !(permutation(k) && m != F->head[P])) return false;
    }
    return true;
}

/* A trans that keeps the last axis last: the runs along it stay contiguous. */
static bool keeps_last(const Fuse *F, uint32_t t)
{
    const IrGOp *op = opat(F, t);
    uint32_t r = vtype(F, op->in[0])->rank;
    return op->kind != IR_GOP_TRANS || r == 0 || op->attr.perm[r - 1] == (int64_t)r - 1;
}

/* Are all users of value v ops that read it through its strides when it is a view
 * (attention, attention_bwd, matmul: is_trans_view's readers)? Then a trans of v stays a
 * view for them rather than a permuted write. */
static bool strided_users(const Fuse *F, uint32_t v)
{
    for (uint32_t u = F->use_at[v]; u < F->use_at[v + 1]; u++) {
        IrGOpKind k = opat(F, F->uses[u])->kind;
        if (k != IR_GOP_ATTENTION && k != IR_GOP_ATTENTION_BWD && k != IR_GOP_MATMUL && F->attn[F->uses[u]] == NONE)
            return false;
    }
    return F->use_at[v + 1] > F->use_at[v];
}

/* Rule 9: may op o join element-wise or rope group P through a permutation (issue 42)?
 * A trans that keeps the last axis last, or a reshape of a permuted value, when its
 * operand is P's and nothing else uses it, and every other op of P broadcasts to that
 * operand's shape (each lane of the kernel then holds one element of it); not a trans
 * that only strided readers use (a view serves them: strided_users). Or an element-wise
 * op on permuted values of P of its own shape and on scalars (any other operand would
 * be loaded at permuted coordinates). The kernel then writes the chain's last value
 * through the permutation instead of a copy kernel doing it: rope -> trans -> reshape
 * -> cast, the backward's dK and dQ going back to [T, H * D] bf16 rows. Loads stay in
 * the kernel's own order and stores go through the permutation; both are contiguous
 * along the last axis, which the trans keeps, so the loop order is the producer's. */
static bool may_join_permuted(const Fuse *F, uint32_t o, uint32_t P, const GroupInfo *mine)
{
    const IrGOp *op = opat(F, o);
    if (mine->n != 1 || !plain_group(F, P)) return false;
    if (permutation(op->kind)) {
        uint32_t x = op->in[0];
        if (single_user(F, x) != o || !keeps_last(F, o) || (op->kind == IR_GOP_TRANS && strided_users(F, op->out[0])))
            return false;
        if (permuted(F, x, P)) return true;
        if (op->kind == IR_GOP_RESHAPE) return false;
        MEMBERS(F, P, m)
            if (!permuted(F, opat(F, m)->out[0], P) && !broadcasts_to(vtype(F, opat(F, m)->out[0]), vtype(F, x))) return false;
        return true;
    }
    if (!fusable(op->kind) || ir_gop_family(op->kind) == 'd') return false;
    for (uint32_t i = 0; i < op->nin; i++) {
        const IrTensorType *t = vtype(F, op->in[i]);
        if (t->rank && !(permuted(F, op->in[i], P) && same_shape(t, vtype(F, op->out[0])))) return false;
    }
    return true;
}

/* Whether op o (in its group so far) may join group P under rules 1 to 4 (and the
 * epilogues of rules 5 and 6). */
static bool may_join(const Fuse *F, uint32_t o, uint32_t P)
{
    GroupInfo p = group_info(F, P), mine = group_info(F, F->grp[o]);
    const IrGOp *op = opat(F, o);
    if (permutation(op->kind) || uses_permuted(F, o, P)) {   /* rule 9 */
        if (may_join_permuted(F, o, P, &mine)) return true;
        if (!unit_reshape(F, o)) return false;
    }
    if (op->kind == IR_GOP_MATMUL)
        return mine.n == 1 && p.mm != NONE && !p.flash && p.conv == NONE && may_join_horizontal(F, o, P);
    if (row_op(op->kind)) {
        if (p.root != NONE || mine.root != NONE) return false;
        if (p.row == NONE) return mine.row == o && p.ew && group_within(F, P, vtype(F, op->in[0]));
        return mine.n == 1 && p.rows_last && along_last_axis(F, o) && same_shape(vtype(F, op->in[0]), p.S);
    }
    if (unit_reshape(F, o))
        return mine.n == 1 && p.root == NONE && p.rows_last && row_aligned(F, o, P, p.S);
    if (!fusable(op->kind) || mine.root != NONE || !mine.ew) return false;
    if (p.root != NONE) {
        uint32_t s = mine.n == 1 ? epilogue_slice(F, o, P) : GF_MIXED;
        if (s == GF_MIXED) return mine.n == 1 && !p.flash && p.conv == NONE && pairs_products(F, o, P);
        return s != NONE && same_shape(vtype(F, op->out[0]), vtype(F, opat(F, s)->out[0]));
    }
    if (p.row != NONE) return mine.n == 1 && p.rows_last && row_aligned(F, o, P, p.S);
    return p.ew && shapes_meet(F, F->grp[o], P);
}

/* ---- rule 5: attention written out ----------------------------------------------------- */

static bool swaps_last_two(const Fuse *F, uint32_t t)
{
    const IrGOp *op = opat(F, t);
    uint32_t r = vtype(F, op->in[0])->rank;
    if (op->kind != IR_GOP_TRANS || r < 2) return false;
    for (uint32_t i = 0; i < r; i++)
        if (op->attr.perm[i] != (i == r - 2 ? r - 1 : i == r - 1 ? r - 2 : i)) return false;
    return true;
}

#define GF_MAX_CHAIN 24

/* Walks back from value v, used by op `user` only, through the ops on the scores (scale
 * by a scalar, additive or `where` mask, casts) to matmul(q, kt) (and trans(k) when kt
 * is that and used once); pushes them on chain. */
static bool score_chain(const Fuse *F, uint32_t v, uint32_t user, uint32_t *chain, uint32_t *n)
{
    uint32_t d = def_of(F, v), save = *n;
    if (d == NONE || *n >= GF_MAX_CHAIN - 2 || single_user(F, v) != user || F->attn[d] != NONE) return false;
    const IrGOp *op = opat(F, d);
    chain[(*n)++] = d;
    switch (op->kind) {
    case IR_GOP_MATMUL: {
        if (vtype(F, op->in[0])->rank < 2 || vtype(F, op->in[1])->rank < 2) break;
        uint32_t t = def_of(F, op->in[1]);
        if (t != NONE && swaps_last_two(F, t) && single_user(F, op->in[1]) == d && F->attn[t] == NONE)
            chain[(*n)++] = t;
        return true;
    }
    case IR_GOP_CAST:
        if (ir_elem_is_float(vtype(F, op->in[0])->elem) && score_chain(F, op->in[0], d, chain, n)) return true;
        break;
    case IR_GOP_DIV:
        if (vtype(F, op->in[1])->rank == 0 && score_chain(F, op->in[0], d, chain, n)) return true;
        break;
    case IR_GOP_MUL: case IR_GOP_ADD: case IR_GOP_WHERE:
        for (uint32_t i = op->kind == IR_GOP_WHERE; i < op->nin; i++) {
            uint32_t other = op->in[op->kind == IR_GOP_WHERE ? 3 - i : 1 - i];
            if (op->kind == IR_GOP_MUL && vtype(F, other)->rank != 0) continue;
            if (!same_shape(vtype(F, op->in[i]), vtype(F, op->out[0]))) continue;
            if (score_chain(F, op->in[i], d, chain, n)) return true;
            *n = save + 1;
        }
        break;
    default: break;
    }
    *n = save;
    return false;
}

/* Marks the ops of every attention written out: matmul(., v) whose left operand is,
 * through casts and dropout, softmax along the last axis of scores (score_chain). */
static void find_attention(Fuse *F)
{
    uint32_t chain[GF_MAX_CHAIN];
    for (uint32_t pv = 0; pv < F->nops; pv++) {
        const IrGOp *op = opat(F, pv);
        if (op->kind != IR_GOP_MATMUL || F->attn[pv] != NONE || vtype(F, op->in[0])->rank < 2 ||
            vtype(F, op->in[1])->rank < 2)
            continue;
        uint32_t n = 0, v = op->in[0], user = pv;
        chain[n++] = pv;
        bool found = false;
        while (n < GF_MAX_CHAIN - 2) {
            uint32_t d = def_of(F, v);
            if (d == NONE || single_user(F, v) != user || F->attn[d] != NONE) break;
            const IrGOp *dop = opat(F, d);
            if (dop->kind == IR_GOP_CAST || dop->kind == IR_GOP_DROPOUT) {
                chain[n++] = user = d;
                v = dop->in[0];
                continue;
            }
            if (dop->kind == IR_GOP_SOFTMAX && along_last_axis(F, d)) {
                chain[n++] = d;
                found = score_chain(F, dop->in[0], d, chain, &n);
            }
            break;
        }
        if (!found) continue;
        for (uint32_t i = 0; i < n; i++) F->attn[chain[i]] = pv;
    }
}

/* ---- rule 6: a conv2d's per-channel operands ----------------------------------------------- */

/* The channel axis of a conv2d's result: 1 (NCHW) or 3 (NHWC). */
static uint32_t channel_axis(const IrGOp *conv) { return conv->attr.conv.nhwc ? 3 : 1; }

/* Whether t is a per-channel vector of conv c's result: all its sizes are 1 but at most
 * one, the channel count ([K], [K, 1, 1], [1, K]). */
static bool per_channel(const Fuse *F, const IrTensorType *t, uint32_t c)
{
    const IrGOp *op = opat(F, c);
    IrSize K = vtype(F, op->out[0])->dims[channel_axis(op)];
    uint32_t nk = 0;
    for (uint32_t i = 0; i < t->rank; i++)
        if (!is_one(t->dims[i]) && (!ir_size_eq(t->dims[i], K) || nk++)) return false;
    return true;
}

/* Whether group Q is an element-wise chain (with unit reshapes) on per-channel vectors
 * of conv c's result that only group K (c's) and Q itself use: then it is cheaper
 * computed in K, once per output tile, than in a kernel of its own. */
static bool per_channel_chain(const Fuse *F, uint32_t Q, uint32_t c, uint32_t K)
{
    MEMBERS(F, Q, m) {
        const IrGOp *op = opat(F, m);
        if (!fusable(op->kind) && !unit_reshape(F, m)) return false;
        for (uint32_t r = 0; r < op->nout; r++) {
            if (!per_channel(F, vtype(F, op->out[r]), c)) return false;
            for (uint32_t u = F->use_at[op->out[r]]; u < F->use_at[op->out[r] + 1]; u++) {
                uint32_t G = F->grp[F->uses[u]];
                if (G != Q && G != K) return false;
            }
        }
    }
    return true;
}

/* ---- placement ----------------------------------------------------------------------------- */

static void join_attention(Fuse *F, uint32_t o)
{
    uint32_t pv = F->attn[o], first = F->attn_first[pv];
    if (first == NONE) {
        F->attn_first[pv] = o;
        return;
    }
    if (F->attn_broken[pv] || try_join(F, F->grp[o], F->grp[first]) == NONE) F->attn_broken[pv] = true;
}

/* ---- rule 8: the gradients' checks in one pass -------------------------------------------- */

static const uint32_t *stats_list(const IrGOp *op, uint32_t *n)
{
    uint32_t s = op->kind == IR_GOP_GLOBAL_NORM;   /* its scale first */
    *n = op->nin - s;
    return op->in + s;
}

/* found_inf or global_norm o joins an earlier one over the same tensors. */
static void join_grad_stats(Fuse *F, uint32_t o)
{
    uint32_t n, m;
    const uint32_t *l = stats_list(opat(F, o), &n);
    for (uint32_t u = F->use_at[l[0]]; u < F->use_at[l[0] + 1]; u++) {
        uint32_t p = F->uses[u];
        if (p >= o || F->grp[p] == NONE || F->grp[p] == F->grp[o] || !grad_stats(opat(F, p)->kind)) continue;
        const uint32_t *pl = stats_list(opat(F, p), &m);
        if (m == n && !memcmp(pl, l, n * sizeof *l) && try_join(F, F->grp[o], F->grp[p]) != NONE) return;
    }
}

/* ---- rule 2b at placement: a chain bound for a later GEMM's epilogue --------------------- */

/* The backward matmul that value v derives from through element-wise ops of v's shape
 * (an epilogue value of that matmul), looking at most depth ops back; NONE if none. */
static uint32_t gemm_source(const Fuse *F, uint32_t v, int depth)
{
    uint32_t d = def_of(F, v);
    if (d == NONE) return NONE;
    const IrGOp *op = opat(F, d);
    if (op->kind == IR_GOP_MATMUL) return op->phase == 2 ? d : NONE;
    if (!depth || !fusable(op->kind)) return NONE;
    for (uint32_t j = 0; j < op->nin; j++) {
        uint32_t r = same_shape(vtype(F, op->in[j]), vtype(F, v)) ? gemm_source(F, op->in[j], depth - 1) : NONE;
        if (r != NONE) return r;
    }
    return NONE;
}

/* Whether value v derives from op mm through element-wise ops, at most depth back. */
static bool derives_from(const Fuse *F, uint32_t v, uint32_t mm, int depth)
{
    uint32_t d = def_of(F, v);
    if (d == mm) return true;
    if (d == NONE || !depth || !fusable(opat(F, d)->kind)) return false;
    for (uint32_t j = 0; j < opat(F, d)->nin; j++)
        if (derives_from(F, opat(F, d)->in[j], mm, depth - 1)) return true;
    return false;
}

/* The backward matmul whose epilogue is the only consumer of element-wise op o's value,
 * through element-wise ops of o's shape (o's chain is bound for that epilogue); NONE
 * when its uses go elsewhere (another kernel kind, the return, two GEMMs, the GEMM o
 * itself derives from). */
static uint32_t bound_gemm(Fuse *F, uint32_t o)
{
    if (F->bound[o] != GF_UNKNOWN) return F->bound[o];
    const IrGOp *op = opat(F, o);
    uint32_t t = NONE;
    F->bound[o] = NONE;
    if (op->phase != 2 || !fusable(op->kind) || op->nout != 1) return NONE;
    const IrTensorType *sh = vtype(F, op->out[0]);
    for (uint32_t u = F->use_at[op->out[0]]; u < F->use_at[op->out[0] + 1]; u++) {
        const IrGOp *q = opat(F, F->uses[u]);
        uint32_t b = NONE;
        if (!fusable(q->kind) || q->phase != 2 || !same_shape(vtype(F, q->out[0]), sh)) return NONE;
        for (uint32_t j = 0; j < q->nin && b == NONE; j++)   /* an epilogue op of a matmul */
            if (q->in[j] != op->out[0] && same_shape(vtype(F, q->in[j]), sh)) {
                b = gemm_source(F, q->in[j], 8);
                if (b != NONE && derives_from(F, op->out[0], b, 8)) b = NONE;   /* o's own GEMM */
            }
        if (b == NONE) b = bound_gemm(F, F->uses[u]);
        if (b == NONE || (t != NONE && t != b)) return NONE;
        t = b;
    }
    return F->bound[o] = t;
}

/* Whether element-wise op o stays out of GEMM group P's epilogue because its chain is
 * bound for a later backward GEMM's epilogue (rule 2b then puts it there): P writes o's
 * operands instead of o's value, which must be larger than they are together (a cast
 * up to f32 of GELU's pieces). The recomputed forward GEMM of a checkpointed block thus writes its bf16
 * values, and the dX GEMM computes the f32 derivative pieces as it consumes them. */
static bool bound_elsewhere(Fuse *F, uint32_t o, uint32_t P)
{
    GroupInfo p = group_info(F, P);
    const IrGOp *op = opat(F, o);
    if (p.mm == NONE || p.root != p.mm || F->phase[P] != 2 || !fusable(op->kind)) return false;
    uint32_t b = bound_gemm(F, o);
    if (b == NONE || F->grp[b] == P) return false;
    int bytes = 0;
    for (uint32_t j = 0; j < op->nin; j++) {
        uint32_t d = def_of(F, op->in[j]);
        if (d != NONE && F->grp[d] == P) bytes += ir_elem_bytes(vtype(F, op->in[j])->elem);
    }
    return bytes < ir_elem_bytes(vtype(F, op->out[0])->elem);
}

/* ---- rule 10: a cast up of a 16-bit value in memory is computed by its reader ------------- */

/* Whether op o casts a float value up to a wider float type (bf16 to f32: exact). */
static bool widening(const Fuse *F, uint32_t o)
{
    const IrGOp *op = opat(F, o);
    if (op->kind != IR_GOP_CAST) return false;
    IrElem a = vtype(F, op->in[0])->elem, b = vtype(F, op->out[0])->elem;
    return ir_elem_is_float(a) && ir_elem_is_float(b) && ir_elem_bytes(b) > ir_elem_bytes(a);
}

/* Whether value v is in memory whatever fusion decides: a root (a GEMM, attention, rope)
 * reads it, which takes no prologue, or it is returned. */
static bool written_anyway(const Fuse *F, uint32_t v)
{
    for (uint32_t u = F->use_at[v]; u < F->use_at[v + 1]; u++)
        if (root_op(opat(F, F->uses[u])->kind) || opat(F, F->uses[u])->kind == IR_GOP_RETURN) return true;
    return false;
}

/* Rule 10: a cast up of a value that is written anyway (the bf16 gradient a GEMM reads,
 * held for a later kernel: the residual stream's gradient) is no part of its operand's
 * kernel, which would write the f32 copy as well and keep it alive until the reader: it
 * stays alone at placement, and sink_casts puts it into the kernel of its readers, which
 * read the 16-bit value and cast it up in registers; where they cannot (readers in
 * several kernels), it joins its operand's kernel as placement would have put it. */
static bool cast_for_reader(const Fuse *F, uint32_t o)
{
    const IrGOp *op = opat(F, o);
    return op->phase == 2 && widening(F, o) && def_of(F, op->in[0]) != NONE && written_anyway(F, op->in[0]);
}

static void sink_casts(Fuse *F)
{
    for (uint32_t o = 0; o < F->nops; o++) {
        uint32_t E = F->grp[o], C = NONE;
        if (E == NONE || F->size[E] != 1 || !cast_for_reader(F, o)) continue;
        uint32_t v = opat(F, o)->out[0];
        bool one = true;
        for (uint32_t u = F->use_at[v]; u < F->use_at[v + 1] && one; u++) {
            uint32_t U = F->grp[F->uses[u]];
            one = U != NONE && (C == NONE || C == U);
            C = U;
        }
        if (one && C != NONE && C != E && may_join(F, o, C) && try_join(F, E, C) != NONE) continue;
        uint32_t P = F->grp[def_of(F, opat(F, o)->in[0])];   /* else where placement would put it */
        if (P != NONE && P != E && may_join(F, o, P)) try_join(F, E, P);
    }
}

/* Op o joins the groups its rules allow (its producers', an earlier matmul's with its
 * left operand, an earlier row op's on its operand), or stays a group of its own. */
static void place(Fuse *F, uint32_t o)
{
    const IrGOp *op = opat(F, o);
    new_group(F, o);
    if (F->attn[o] != NONE) {
        join_attention(F, o);
        return;
    }
    if (grad_stats(op->kind)) {
        join_grad_stats(F, o);
        return;
    }
    bool mm = op->kind == IR_GOP_MATMUL, row = row_op(op->kind);
    if (!fusable(op->kind) && !row && !mm && !permutation(op->kind)) return;
    if (cast_for_reader(F, o)) return;   /* rule 10: sink_casts places it */
    uint32_t ncand = 0, *cand = F->cand;
    if (mm || (row && along_last_axis(F, o)))   /* matmuls, row ops of one operand */
        for (uint32_t u = F->use_at[op->in[0]]; u < F->use_at[op->in[0] + 1]; u++) {
            uint32_t p = F->uses[u];
            const IrGOp *q = opat(F, p);
            if (p >= o || F->attn[p] != NONE || q->in[0] != op->in[0]) continue;
            if (mm ? q->kind == IR_GOP_MATMUL : row_op(q->kind) && along_last_axis(F, p)) cand[ncand++] = p;
        }
    if (!mm)
        for (uint32_t i = 0; i < op->nin; i++) cand[ncand++] = def_of(F, op->in[i]);
    for (uint32_t i = 0; i < ncand; i++) {
        uint32_t p = cand[i];
        if (p == NONE || F->grp[p] == NONE || F->grp[p] == F->grp[o] || !may_join(F, o, F->grp[p])) continue;
        if (F->size[F->grp[o]] == 1 && bound_elsewhere(F, o, F->grp[p])) continue;   /* rule 2b */
        try_join(F, F->grp[o], F->grp[p]);
    }
    /* Rule 6: per-channel operands of a conv2d's epilogue, and theirs in turn. */
    uint32_t G = F->grp[o], c = group_info(F, G).conv;
    for (bool grew = c != NONE; grew;) {
        grew = false;
        MEMBERS(F, G, m) {
            const IrGOp *mop = opat(F, m);
            for (uint32_t i = 0; i < mop->nin && !grew; i++) {
                uint32_t d = def_of(F, mop->in[i]), J;
                if (d == NONE || F->grp[d] == NONE || F->grp[d] == G || !per_channel_chain(F, F->grp[d], c, G)) continue;
                if ((J = try_join(F, G, F->grp[d])) != NONE) G = J, grew = true;
            }
            if (grew) break;
        }
    }
}

/* ---- rule 2b: recomputed chains into the consuming GEMM's epilogue ----------------------- */

/* The matmul of group M when M is one plain GEMM of the backward (one matmul, no
 * attention, conv2d or rope), else NONE. */
static uint32_t backward_gemm(const Fuse *F, uint32_t M)
{
    if (F->phase[M] != 2) return NONE;
    GroupInfo gi = group_info(F, M);
    uint32_t nmm = 0;
    MEMBERS(F, M, m) nmm += opat(F, m)->kind == IR_GOP_MATMUL;
    return nmm == 1 && !gi.flash && gi.root == gi.mm ? gi.mm : NONE;
}

/* Whether element-wise group E may become part of the epilogue of matmul mm: E is of
 * the backward, every op of E computes on mm's output shape (so each of its values is
 * computed at the epilogue's coordinates from loads there), and no value of E is an
 * operand of mm (that would be a prologue). */
static bool chain_fits(const Fuse *F, uint32_t E, uint32_t mm)
{
    if (F->phase[E] != 2 || !group_info(F, E).ew) return false;
    const IrGOp *mop = opat(F, mm);
    const IrTensorType *t = vtype(F, mop->out[0]);
    MEMBERS(F, E, m) {
        const IrGOp *op = opat(F, m);
        for (uint32_t r = 0; r < op->nout; r++)
            if (!same_shape(vtype(F, op->out[r]), t)) return false;
    }
    for (uint32_t j = 0; j < mop->nin; j++) {
        uint32_t d = def_of(F, mop->in[j]);
        if (d != NONE && F->grp[d] == E) return false;
    }
    return true;
}

/* Rule 2b: an element-wise kernel of the backward (recomputed values: GELU's pieces
 * from a saved pre-activation) whose values an epilogue op of a backward GEMM reads
 * joins that GEMM, so the chain is computed where it is consumed instead of being
 * written in f32 and read back. Runs after placement, when the chain's kernel and its
 * consumer both exist (rule 2 places in graph order and takes no chain that began
 * elsewhere). */
static void sink_chains(Fuse *F)
{
    for (uint32_t o = 0; o < F->nops; o++) {
        uint32_t E = F->grp[o];
        if (E == NONE || F->phase[E] != 2 || !fusable(opat(F, o)->kind)) continue;
        const IrGOp *op = opat(F, o);
        bool joined = false;
        for (uint32_t r = 0; r < op->nout && !joined; r++)
            for (uint32_t u = F->use_at[op->out[r]]; u < F->use_at[op->out[r] + 1] && !joined; u++) {
                uint32_t c = F->uses[u], M = F->grp[c], mm;
                if (M == NONE || M == E || (mm = backward_gemm(F, M)) == NONE || c == mm) continue;
                if (chain_fits(F, E, mm) && try_join(F, E, M) != NONE) joined = true;
            }
    }
}

/* ---- the plan: kernels in the groups' order ------------------------------------------------ */

/* A column sum in two steps (IrGKernel.columns): kernel K's last op, its only write, is a
 * float sum or mean over an axis that is not the last (the axes after it not all of
 * size 1), of a run-time count of rows or more than IR_GCOL_PARTIALS * 64, and every
 * other op of K is element-wise (its producers, computed in the column tiles). */
static bool column_sum(const Fuse *F, const IrGKernel *K)
{
    if (K->view || !K->nops || K->nwrites != 1) return false;
    const IrGOp *op = opat(F, K->ops[K->nops - 1]);
    if ((op->kind != IR_GOP_SUM && op->kind != IR_GOP_MEAN) || K->writes[0] != op->out[0]) return false;
    const IrTensorType *t = vtype(F, op->in[0]);
    uint32_t ax = (uint32_t)op->attr.axis;
    bool inner = false;
    for (uint32_t d = ax + 1; d < t->rank; d++) inner |= !is_one(t->dims[d]);
    int64_t n;
    if (!ir_elem_is_float(t->elem) || ax + 1 >= t->rank || !inner ||
        (ir_size_is_const(t->dims[ax], &n) && n <= IR_GCOL_PARTIALS * 64))
        return false;
    for (uint32_t i = 0; i + 1 < K->nops; i++)
        if (!fusable(opat(F, K->ops[i])->kind)) return false;
    return true;
}

static const char *kind_of(const Fuse *F, uint32_t G)
{
    GroupInfo gi = group_info(F, G);
    uint32_t nmm = 0;
    MEMBERS(F, G, m) nmm += opat(F, m)->kind == IR_GOP_MATMUL;
    if (gi.flash) return "flash_attention";
    if (gi.conv != NONE) return "conv2d";
    if (nmm > 1) return "horizontal_matmul";
    if (F->size[G] > 1 && grad_stats(opat(F, F->head[G])->kind)) return "grad_stats";
    MEMBERS(F, G, m)   /* a permutation in a kernel of several ops only indexes (rules 3, 9) */
        if (!fusable(opat(F, m)->kind) && !(permutation(opat(F, m)->kind) && F->size[G] > 1))
            return ir_gop_name(opat(F, m)->kind);
    return "elementwise";
}

typedef struct WriteKey {
    uint64_t key;
    uint32_t v;
} WriteKey;

static int cmp_key(const void *a, const void *b)
{
    uint64_t x = ((const WriteKey *)a)->key, y = ((const WriteKey *)b)->key;
    return (x > y) - (x < y);
}

/* Kernel K's reads (the values from outside it that it uses, in the order its ops use
 * them) and writes (its values that ops outside it or the return use, in the order of
 * their first such use). */
static void kernel_io(Fuse *F, uint32_t G, IrGKernel *K)
{
    uint32_t nr = 0, nw = 0, st = ++F->stamp;
    MEMBERS(F, G, m) {
        const IrGOp *op = opat(F, m);
        for (uint32_t i = 0; i < op->nin; i++) {
            uint32_t d = def_of(F, op->in[i]);
            if ((d == NONE || (F->grp[d] != G && !immediate(opat(F, d)->kind))) && F->vmark[op->in[i]] != st)
                F->vmark[op->in[i]] = st, nr++;
        }
        nw += op->nout;
    }
    uint32_t *reads = arena_alloc(F->a, (nr + 1) * sizeof *reads), *writes;
    WriteKey *keys = arena_alloc(F->a, (nw + 1) * sizeof *keys);
    nr = nw = 0;
    st = ++F->stamp;
    MEMBERS(F, G, m) {
        const IrGOp *op = opat(F, m);
        for (uint32_t i = 0; i < op->nin; i++) {
            uint32_t d = def_of(F, op->in[i]);
            if ((d == NONE || (F->grp[d] != G && !immediate(opat(F, d)->kind))) && F->vmark[op->in[i]] != st)
                F->vmark[op->in[i]] = st, reads[nr++] = op->in[i];
        }
        for (uint32_t r = 0; r < op->nout; r++) {
            uint32_t v = op->out[r];
            uint64_t best = UINT64_MAX;
            for (uint32_t u = F->use_at[v]; u < F->use_at[v + 1]; u++) {
                uint32_t user = F->uses[u];
                if (F->grp[user] == G) continue;
                const IrGOp *uop = opat(F, user);
                uint32_t j = 0;
                while (uop->in[j] != v) j++;
                uint64_t key = (uint64_t)user << 32 | j;
                if (key < best) best = key;
            }
            if (best != UINT64_MAX) keys[nw++] = (WriteKey){best, v};
        }
    }
    qsort(keys, nw, sizeof *keys, cmp_key);
    writes = arena_alloc(F->a, (nw + 1) * sizeof *writes);
    for (uint32_t i = 0; i < nw; i++) writes[i] = keys[i].v;
    K->nreads = nr;
    K->reads = reads;
    K->nwrites = nw;
    K->writes = writes;
}

/* Rule 5's description of a flash_attention kernel for lowering (ir/graph.h). */
static const IrGAttention *attention_info(Fuse *F, uint32_t G)
{
    IrGAttention *at = arena_alloc(F->a, sizeof *at);
    uint32_t n = 0;
    MEMBERS(F, G, m) n++;
    uint32_t *score = arena_alloc(F->a, (n + 1) * sizeof *score), *prob = arena_alloc(F->a, (n + 1) * sizeof *prob);
    *at = (IrGAttention){.op = NONE, .q = NONE, .k = NONE, .v = NONE, .causal = NONE, .scale = NONE,
                         .qk = NONE, .softmax = NONE, .pv = NONE, .out = NONE, .lse = NONE, .score = score,
                         .prob = prob};
    MEMBERS(F, G, m) {
        const IrGOp *op = opat(F, m);
        if (op->kind == IR_GOP_ATTENTION) {
            at->op = m;
            at->q = op->in[0], at->k = op->in[1], at->v = op->in[2], at->causal = op->in[3], at->scale = op->in[4];
            at->out = op->out[0];
            at->lse = op->nout > 1 ? op->out[1] : NONE;
            return at;
        }
        if (F->attn[m] == NONE) continue;
        if (m == F->attn[m]) at->pv = m, at->v = op->in[1], at->out = op->out[0];
        else if (op->kind == IR_GOP_MATMUL) at->qk = m, at->q = op->in[0];
        else if (op->kind == IR_GOP_SOFTMAX) at->softmax = m;
        else if (op->kind != IR_GOP_TRANS) {
            if (at->softmax == NONE) score[at->nscore++] = m;
            else prob[at->nprob++] = m;
        }
    }
    uint32_t kt = opat(F, at->qk)->in[1], t = def_of(F, kt);
    at->k_t = !(t != NONE && F->grp[t] == G);
    at->k = at->k_t ? kt : opat(F, t)->in[0];
    return at;
}

/* Rule 6's description of a conv2d kernel: the conv and its per-channel ops. */
static const IrGConv *conv_info(Fuse *F, uint32_t G, uint32_t c)
{
    IrGConv *cv = arena_alloc(F->a, sizeof *cv);
    const IrGOp *op = opat(F, c);
    uint32_t n = 0;
    MEMBERS(F, G, m) n++;
    uint32_t *chan = arena_alloc(F->a, (n + 1) * sizeof *chan);
    *cv = (IrGConv){.op = c, .x = op->in[0], .w = op->in[1], .out = op->out[0], .channel = chan};
    MEMBERS(F, G, m)
        if (m != c && opat(F, m)->nout == 1 && per_channel(F, vtype(F, opat(F, m)->out[0]), c)) chan[cv->nchannel++] = m;
    return cv;
}

/* Kernel K's op when K is that one op of kind k or k2 on the value it reads, writing
 * one value, else NULL: what a view may be. */
static const IrGOp *lone_op(const Fuse *F, const IrGKernel *K, IrGOpKind k, IrGOpKind k2)
{
    if (K->view || K->nops != 1 || K->nreads != 1 || K->nwrites != 1) return NULL;
    const IrGOp *op = opat(F, K->ops[0]);
    return (op->kind == k || op->kind == k2) && op->nin == 1 && op->in[0] == K->reads[0] ? op : NULL;
}

static bool is_returned(const Fuse *F, uint32_t v)
{
    const IrGOp *ret = &F->g->ops.data[F->g->ops.len - 1];
    for (uint32_t i = 0; i < ret->nin; i++)
        if (ret->in[i] == v) return true;
    return false;
}

/* Is value v in memory: a tensor parameter, or a kernel's write (not an immediate)? A
 * scalar parameter is passed by value, so it has no memory to view. */
static bool in_memory(const Fuse *F, uint32_t v)
{
    uint32_t d = def_of(F, v);
    return d == NONE ? F->g->values.data[v].type.rank > 0 : !immediate(opat(F, d)->kind);
}

/* Is kernel K a view: one reshape (not of unit axes only, which fuse into their
 * neighbours) of a value in memory, a parameter or another kernel's write, whose result
 * is not returned (a result gets the caller's memory, so it is copied there)? Buffers
 * hold whole tensors row-major, and a reshape keeps the row-major order: its result is
 * the operand's memory. */
static bool is_view(const Fuse *F, const IrGKernel *K)
{
    return lone_op(F, K, IR_GOP_RESHAPE, IR_GOP_RESHAPE) && !is_returned(F, K->writes[0]) && in_memory(F, K->reads[0]);
}

/* Does GEMM kernel K use value v only as an operand of its 2-D matmuls, which
 * graph_lower.c loads through v's strides: the right operand (a transposed weight as
 * torch.nn.Linear's, [N, K] row-major, is read K-major, the layout wgmma takes without a
 * copy), or the left operand of the kernel's one matmul with a 2-D right operand
 * (trans(x) @ dy, the backward's dW GEMMs: x's rows read M-major, which wgmma takes for
 * 16-bit operands)? The LM head's linear_cross_entropy(_rows) reads its w so too. */
static bool gemm_weight_only(const Fuse *F, const IrGKernel *K, uint32_t v)
{
    if (K->attn || K->conv || vtype(F, v)->rank != 2) return false;
    bool used = false;
    uint32_t nmm = 0;
    for (uint32_t i = 0; i < K->nops; i++) nmm += opat(F, K->ops[i])->kind == IR_GOP_MATMUL;
    for (uint32_t i = 0; i < K->nops; i++) {
        const IrGOp *op = opat(F, K->ops[i]);
        for (uint32_t j = 0; j < op->nin; j++) {
            if (op->in[j] != v) continue;
            bool lce = op->kind == IR_GOP_LINEAR_CROSS_ENTROPY || op->kind == IR_GOP_LINEAR_CROSS_ENTROPY_ROWS;
            bool left = op->kind == IR_GOP_MATMUL && j == 0 && nmm == 1 && vtype(F, op->in[1])->rank == 2;
            if (lce ? j != IR_LCE_W : op->kind != IR_GOP_MATMUL || (j != 1 && !left)) return false;
            used = true;
        }
    }
    return used;
}

/* Is kernel K an attention_bwd op's (which graph_lower.c reads and writes through
 * strides, every operand and result)? */
static bool attention_bwd_kernel(const Fuse *F, const IrGKernel *K)
{
    return K->nops == 1 && opat(F, K->ops[0])->kind == IR_GOP_ATTENTION_BWD;
}

/* Does kernel K read value v through v's strides (graph_lower.c stride_of), so that v
 * may be a view of other memory: a flash_attention kernel as its q, k or v, an
 * attention_bwd kernel, a GEMM kernel as gemm_weight_only's operand, or an element-wise
 * or rope kernel (graph_lower.c offset: a load at the coordinates times the strides; a
 * trans that moves the last axis makes those loads strided, as a gather kernel's were,
 * without the gather's write and the reader's second read)? */
static bool strided_reader(const Fuse *F, const IrGKernel *K, uint32_t v)
{
    const IrGAttention *A = K->attn;
    if (A) return v == A->q || v == A->k || v == A->v;
    if (K->view) return false;
    return attention_bwd_kernel(F, K) || gemm_weight_only(F, K, v) || !strcmp(K->kind, "elementwise") ||
           !strcmp(K->kind, "rope");
}

/* Is kernel k a view made by a transposition: one trans of a value in memory, not
 * returned, read only by strided readers (strided_reader)? Its result is the operand's
 * memory with permuted strides: the forward's q and k go from [T, H, D] rows to [H, T, D]
 * as rope reads them, with no copy kernel. Other readers (a reshape, which needs
 * row-major memory; a rows kernel) keep it a gather kernel. */
static bool is_trans_view(const Fuse *F, const IrGKernel *ks, uint32_t nk, uint32_t k)
{
    const IrGKernel *K = &ks[k];
    uint32_t v = K->writes[0];
    if (!lone_op(F, K, IR_GOP_TRANS, IR_GOP_TRANS) || !in_memory(F, K->reads[0]) || is_returned(F, v)) return false;
    for (uint32_t r = 0; r < nk; r++)
        for (uint32_t i = 0; i < ks[r].nreads; i++)
            if (ks[r].reads[i] == v && !strided_reader(F, &ks[r], v)) return false;
    return true;
}

/* Is kernel k a store view: one trans of a flash_attention kernel's result (its output
 * or an epilogue's, which it stores alike; not the logsumexp) or of an attention_bwd
 * kernel's, that other kernels read only through strides
 * (strided_reader: attention's output that attention_bwd reads again), or one reshape of
 * any kernel's result that nothing else reads; neither returned? That kernel then writes
 * its result straight into the view's memory: a trans's through its strides
 * (graph_lower.c stride_of), as the heads of an attention go back to [T, H, D] rows; a
 * reshape's row-major as it is, which is the reshape's row-major order (a returned
 * reshape then costs no copy). */
static bool is_store_view(const Fuse *F, const IrGKernel *ks, uint32_t nk, uint32_t k)
{
    const IrGKernel *K = &ks[k];
    const IrGOp *op = lone_op(F, K, IR_GOP_TRANS, IR_GOP_RESHAPE);
    uint32_t a = K->reads[0];
    if (!op || is_returned(F, a)) return false;
    bool made = false, trans = op->kind == IR_GOP_TRANS;
    for (uint32_t r = 0; r < nk; r++) {
        for (uint32_t i = 0; i < ks[r].nreads; i++)
            if (r != k && ks[r].reads[i] == a && (!trans || !strided_reader(F, &ks[r], a))) return false;
        for (uint32_t i = 0; i < ks[r].nwrites; i++)
            if (ks[r].writes[i] == a)
                made = !ks[r].view && (!trans || (ks[r].attn && ks[r].attn->lse != a) || attention_bwd_kernel(F, &ks[r]));
    }
    return made;
}

static IrGPlan *make_plan(Fuse *F)
{
    uint32_t nk = 0;
    for (uint32_t p = 0; p < F->npos; p++) nk += F->order[p] != NONE;
    IrGKernel *ks = arena_alloc(F->a, (nk + 1) * sizeof *ks);
    nk = 0;
    for (uint32_t p = 0; p < F->npos; p++) {
        uint32_t G = F->order[p], n = 0;
        if (G == NONE) continue;
        uint32_t *ops = arena_alloc(F->a, (F->size[G] + 1) * sizeof *ops);
        MEMBERS(F, G, m) ops[n++] = m;
        IrGKernel *K = &ks[nk++];
        *K = (IrGKernel){.kind = kind_of(F, G), .nops = n, .ops = ops};
        kernel_io(F, G, K);
        GroupInfo gi = group_info(F, G);
        if (gi.flash) K->attn = attention_info(F, G);
        if (gi.conv != NONE) K->conv = conv_info(F, G, gi.conv);
        K->view = is_view(F, K);
        const IrGOp *lce = opat(F, ops[0]);
        uint32_t cdef = lce->kind == IR_GOP_LINEAR_CROSS_ENTROPY ? def_of(F, lce->in[IR_LCE_CHUNK]) : NONE;
        if (n == 1 && cdef != NONE && opat(F, cdef)->kind == IR_GOP_CONST && opat(F, cdef)->attr.c.i > 0)
            K->chunk = opat(F, cdef)->attr.c.i;
        if (grad_stats(lce->kind)) K->partials = IR_GSTATS_PARTIALS;
        if (column_sum(F, K)) K->columns = true, K->partials = IR_GCOL_PARTIALS;
    }
    /* store views first: a producer that writes through strides spares its readers them */
    for (uint32_t k = 0; k < nk; k++)
        if (is_store_view(F, ks, nk, k)) ks[k].view = ks[k].store_view = true;
    for (uint32_t k = 0; k < nk; k++) ks[k].view |= is_trans_view(F, ks, nk, k);
    /* each value's root: a store view's operand is its result's memory (the result is
     * written after it), a view's result its operand's (from an earlier kernel) */
    uint32_t *root = arena_alloc(F->a, (F->nvals + 1) * sizeof *root);
    for (uint32_t v = 0; v < F->nvals; v++) root[v] = v;
    for (uint32_t k = 0; k < nk; k++)   /* views in kernel order: an operand's root is final */
        if (ks[k].view && !ks[k].store_view) root[ks[k].writes[0]] = root[ks[k].reads[0]];
    for (uint32_t k = 0; k < nk; k++)   /* a store view's result is no view's result */
        if (ks[k].store_view) root[ks[k].reads[0]] = root[ks[k].writes[0]];
    IrGPlan *plan = arena_alloc(F->a, sizeof *plan);
    *plan = (IrGPlan){.nkernels = nk, .kernels = ks, .root = root};
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

/* An attention_bwd kernel whose q, k and v are of one 16-bit float type and whose dO is
 * f32: its lowering's first step writes dO in q's type and delta into a scratch
 * (IrGKernel.bwd_scratch). */
/* A chunked linear_cross_entropy kernel K: how many rows it runs as one chunk, and its
 * buffers (the logits' scratch, dw's f32 sums). A bf16 dw is rounded once after the sum
 * over every row, so when the rows span several chunks the partial sums wait between
 * them in f32, a [D, V] buffer of K's own (IrGKernel.sum). One chunk of all N rows needs
 * no sums and holds s*N*V bytes of logits (s the scratch's element bytes) against
 * s*C*V + 4*D*V for chunks of C rows: so N rows run as one chunk whenever N <= C +
 * (4 / s) * D (IrGKernel.whole: 9216 rows at D 4096 for bf16 logits), and the buffers
 * follow that regime (IrGBuffer.cond: known sizes decide here, symbolic ones at run
 * time). Without the sums (an f32 head adds into dw itself, or no dw) one chunk holds
 * less only up to C rows. */
static void lce_whole(Fuse *F, IrGKernel *K)
{
    const IrGOp *op = opat(F, K->ops[0]);
    const IrTensorType *x = vtype(F, op->in[IR_LCE_X]), *dw = vtype(F, op->out[2]);
    int64_t s = ir_elem_bytes(ir_lce_scratch_elem(F->g, op));
    bool writes = false;
    for (uint32_t i = 0; i < K->nwrites; i++) writes |= K->writes[i] == op->out[2];
    K->whole = ir_size_const(K->chunk);
    if (dw->elem != IR_BF16 || !writes || 4 % s || !ir_size_add(F->a, K->whole, x->dims[1], 4 / s, &K->whole))
        K->whole = ir_size_const(K->chunk);
}

/* Buffer B with the rows condition of K's regimes, or decided where the sizes are known:
 * `one` bytes with one chunk, B's own with several. */
static IrGBuffer lce_regime(Fuse *F, const IrGKernel *K, IrGBuffer B, IrSize one)
{
    IrSize rows = vtype(F, opat(F, K->ops[0])->in[IR_LCE_X])->dims[0];
    int64_t r, w;
    if (ir_size_is_const(rows, &r) && ir_size_is_const(K->whole, &w)) {
        if (r <= w) B.bytes = one;
        return B;
    }
    B.cond = true, B.rows = rows, B.upto = K->whole, B.one = one;
    return B;
}

static void lce_dw_sum(Fuse *F, IrGKernel *K, IrGBuffer *out, uint32_t *nb)
{
    const IrGOp *op = opat(F, K->ops[0]);
    const IrTensorType *x = vtype(F, op->in[IR_LCE_X]), *dw = vtype(F, op->out[2]);
    bool writes = false;
    for (uint32_t i = 0; i < K->nwrites; i++) writes |= K->writes[i] == op->out[2];
    int64_t rows, whole;
    if (dw->elem != IR_BF16 || !writes ||
        (ir_size_is_const(x->dims[0], &rows) && ir_size_is_const(K->whole, &whole) && rows <= whole))
        return;
    IrSize bytes;
    if (!ir_size_mul(F->a, dw->dims[0], dw->dims[1], &bytes) || !ir_size_mul(F->a, bytes, ir_size_const(4), &bytes))
        bytes = ir_size_const(0);
    out[*nb] = lce_regime(F, K, (IrGBuffer){.bytes = bytes}, ir_size_const(0));
    K->dw_sum = true;
    K->sum = (*nb)++;
}

static bool bwd_half(const Fuse *F, const IrGKernel *K)
{
    if (K->view || K->nops != 1 || F->g->ops.data[K->ops[0]].kind != IR_GOP_ATTENTION_BWD) return false;
    const IrGOp *op = &F->g->ops.data[K->ops[0]];
    IrElem q = vtype(F, op->in[0])->elem;
    return ir_elem_is_float(q) && ir_elem_bytes(q) == 2 && vtype(F, op->in[1])->elem == q && vtype(F, op->in[2])->elem == q &&
           vtype(F, op->in[4])->elem == IR_F32;
}

/* The split regime of attention_bwd kernel K's dK/dV step (IrGKernel.bwd_split): with
 * G > 1 query heads a KV head (constant head axes, as passes/graph_lower.c groups them),
 * while the KV rows R (k's batch axes times Lk) are at most IR_BWD_SPLIT_ROWS (the graph's
 * @attention_bwd_split: ir_bwd_split_rows), its scratch
 * B also holds the f32 partial dK and dV of each query head, G * R * (D + Dv) floats past
 * dO and delta (16 bytes of alignment), as B's rows condition (known rows decide here,
 * symbolic ones at run time, as the LM head's regimes). */
static void bwd_split(Fuse *F, IrGKernel *K, IrGBuffer *B)
{
    const IrGOp *op = &F->g->ops.data[K->ops[0]];
    const IrTensorType *o = vtype(F, op->in[3]), *k = vtype(F, op->in[1]), *v = vtype(F, op->in[2]);
    int64_t h, hk, D, Dv, rows;
    if (o->rank < 3 || k->rank != o->rank || v->rank != o->rank || !ir_size_is_const(o->dims[o->rank - 3], &h) ||
        !ir_size_is_const(k->dims[k->rank - 3], &hk) || hk <= 0 || h / hk <= 1 ||
        !ir_size_is_const(k->dims[k->rank - 1], &D) || !ir_size_is_const(v->dims[v->rank - 1], &Dv))
        return;
    int64_t upto = ir_bwd_split_rows(F->g);
    IrSize R, one;
    if (upto < 0 || !ir_size_numel(F->a, k->rank - 1, k->dims, &R) || !ir_size_add(F->a, B->bytes, ir_size_const(16), 1, &one) ||
        !ir_size_add(F->a, one, R, 4 * (h / hk) * (D + Dv), &one))
        return;
    if (ir_size_is_const(R, &rows)) {
        if (rows > upto) return;
        B->bytes = one;
    } else {
        B->cond = true, B->rows = R, B->upto = ir_size_const(upto), B->one = one;
    }
    K->bwd_split = h / hk;
}

typedef struct Buf {
    IrSize bytes;
    bool sized;              /* false: the byte count overflows; never shared */
    uint32_t n, cap, free_after;  /* free_after: the last reader of its latest value */
    uint32_t *values, *first, *last;
} Buf;

static uint32_t *grow(Arena *a, const uint32_t *old, uint32_t n, uint32_t cap)
{
    uint32_t *p = arena_alloc(a, cap * sizeof *p);
    if (n) memcpy(p, old, n * sizeof *p);
    return p;
}

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
    for (uint32_t k = 0; k < nk; k++)   /* a view's readers read its root's memory */
        for (uint32_t i = 0; i < plan->kernels[k].nreads; i++) last[ir_gplan_root(plan, plan->kernels[k].reads[i])] = k;
    uint32_t cap = 0;
    for (uint32_t k = 0; k < nk; k++) cap += plan->kernels[k].nwrites;
    Buf *bufs = arena_alloc(F->a, (cap + 1) * sizeof *bufs);
    for (uint32_t k = 0; k < nk; k++)
        for (uint32_t w = 0; w < plan->kernels[k].nwrites; w++) {
            /* a value written into another's memory (a store view's operand) is that
             * root's first write: the root's buffer starts here */
            uint32_t v = ir_gplan_root(plan, plan->kernels[k].writes[w]);
            if (returned[v] || g->values.data[v].def == IR_GNONE || plan->kernels[k].view) continue;
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
            }
            if (B->n == B->cap) {
                B->cap = B->cap ? 2 * B->cap : 4;
                B->values = grow(F->a, B->values, B->n, B->cap);
                B->first = grow(F->a, B->first, B->n, B->cap);
                B->last = grow(F->a, B->last, B->n, B->cap);
            }
            B->values[B->n] = v;
            B->first[B->n] = k;
            B->last[B->n++] = B->free_after = last[v];
        }
    /* a chunked kernel's [chunk, V] logits (its dlogits in place): memory of its own, once
     * for every chunk, of ir_lce_scratch_elem's type (linear_cross_entropy, ir/graph.h); a
     * grad_stats kernel's [stats, partials] partial sums */
    uint32_t nscratch = 0;
    for (uint32_t k = 0; k < nk; k++)
        nscratch += plan->kernels[k].chunk > 0 ? 2 : plan->kernels[k].partials > 0 || bwd_half(F, &plan->kernels[k]);
    IrGBuffer *out = arena_alloc(F->a, (nb + nscratch + 1) * sizeof *out);
    for (uint32_t b = 0; b < nb; b++)
        out[b] = (IrGBuffer){.bytes = bufs[b].bytes, .nvalues = bufs[b].n, .values = bufs[b].values,
                             .first = bufs[b].first, .last = bufs[b].last};
    for (uint32_t k = 0; k < nk; k++) {
        const IrGKernel *K = &plan->kernels[k];
        if (K->chunk <= 0 && !K->partials) continue;
        const IrGOp *op = &g->ops.data[K->ops[0]];
        IrSize bytes = ir_size_const(0), one = ir_size_const(0);
        if (K->columns) {   /* [partials, result] in the sums' type */
            const IrGOp *c = &g->ops.data[K->ops[K->nops - 1]];
            const IrTensorType *r = vtype(F, c->out[0]);
            int64_t s = vtype(F, c->in[0])->elem == IR_F64 ? 8 : 4;
            if (!ir_size_numel(F->a, r->rank, r->dims, &bytes) ||
                !ir_size_mul(F->a, bytes, ir_size_const((int64_t)K->partials * s), &bytes))
                bytes = ir_size_const(0);
            out[nb++] = (IrGBuffer){.bytes = bytes};
        } else if (K->partials) {
            bytes = ir_size_const((int64_t)K->partials * K->nops * ir_elem_bytes(ir_gstats_elem(g, K)));
            out[nb++] = (IrGBuffer){.bytes = bytes};
        } else {
            const IrTensorType *w = vtype(F, op->in[IR_LCE_W]), *x = vtype(F, op->in[IR_LCE_X]);
            int64_t s = ir_elem_bytes(ir_lce_scratch_elem(g, op));
            lce_whole(F, (IrGKernel *)K);
            if (!ir_size_mul(F->a, w->dims[1], ir_size_const(K->chunk * s), &bytes)) bytes = ir_size_const(0);
            if (!ir_size_mul(F->a, w->dims[1], x->dims[0], &one) || !ir_size_mul(F->a, one, ir_size_const(s), &one))
                one = ir_size_const(0);
            out[nb++] = lce_regime(F, K, (IrGBuffer){.bytes = bytes}, one);
        }
        ((IrGKernel *)K)->scratch = nb - 1;   /* make_plan's kernels, in F's arena: ours to fill */
        if (K->chunk > 0) lce_dw_sum(F, (IrGKernel *)K, out, &nb);
    }
    /* an attention_bwd kernel on 16-bit q, k, v: dO in q's type (2 bytes an element), 16
     * bytes of alignment, delta in f32 (one a row of the logsumexp) */
    for (uint32_t k = 0; k < nk; k++) {
        IrGKernel *K = (IrGKernel *)&plan->kernels[k];
        if (!bwd_half(F, K)) continue;
        const IrGOp *op = &g->ops.data[K->ops[0]];
        const IrTensorType *o = vtype(F, op->in[3]), *lse = vtype(F, op->in[5]);
        IrSize no, nl, bytes = ir_size_const(0);
        if (!ir_size_numel(F->a, o->rank, o->dims, &no) || !ir_size_numel(F->a, lse->rank, lse->dims, &nl) ||
            !ir_size_add(F->a, ir_size_const(16), no, 2, &bytes) || !ir_size_add(F->a, bytes, nl, 4, &bytes))
            bytes = ir_size_const(0);
        out[nb++] = (IrGBuffer){.bytes = bytes};
        K->scratch = nb - 1;
        K->bwd_scratch = true;
        bwd_split(F, K, &out[nb - 1]);
    }
    plan->nbuffers = nb;
    plan->buffers = out;
}

static uint32_t *nones(Arena *a, size_t n)
{
    uint32_t *p = arena_alloc(a, (n + 1) * sizeof *p);
    memset(p, 0xFF, (n + 1) * sizeof *p);
    return p;
}

IrGPlan *pass_graph_fuse(const IrGraph *g, Arena *a)
{
    uint32_t n = (uint32_t)g->ops.len, nv = (uint32_t)g->values.len, nuses = 0;
    Fuse F = {.g = g, .a = a, .nops = n, .nvals = nv};
    F.grp = nones(a, n);
    F.next = nones(a, n);
    F.head = nones(a, n);
    F.size = arena_alloc(a, (n + 1) * sizeof *F.size);
    F.phase = arena_alloc(a, n + 1);
    F.pos = arena_alloc(a, (n + 1) * sizeof *F.pos);
    F.order = nones(a, n);
    F.gmark = arena_alloc(a, (n + 1) * sizeof *F.gmark);
    F.gside = arena_alloc(a, (n + 1) * sizeof *F.gside);
    F.vmark = arena_alloc(a, (nv + 1) * sizeof *F.vmark);
    F.stack = arena_alloc(a, (n + 1) * sizeof *F.stack);
    F.cand = arena_alloc(a, (n + 9) * sizeof *F.cand);
    F.fw = arena_alloc(a, (n + 1) * sizeof *F.fw);
    F.bw = arena_alloc(a, (n + 1) * sizeof *F.bw);
    F.slots = arena_alloc(a, (n + 3) * sizeof *F.slots);
    F.slice = arena_alloc(a, (n + 1) * sizeof *F.slice);
    F.attn = nones(a, n);
    F.attn_first = nones(a, n);
    F.attn_broken = arena_alloc(a, n + 1);
    F.bound = arena_alloc(a, (n + 1) * sizeof *F.bound);
    for (uint32_t o = 0; o <= n; o++) F.bound[o] = GF_UNKNOWN;
    memset(F.attn_broken, 0, n + 1);
    memset(F.gmark, 0, (n + 1) * sizeof *F.gmark);
    memset(F.vmark, 0, (nv + 1) * sizeof *F.vmark);
    /* The live ops: those the return needs (ops are in definition order, the return
     * last). A value nothing returned depends on (`let h = ...` never used) gets no
     * kernel, and its uses count for no fusion decision. */
    bool *live = arena_alloc(a, n + 1);
    memset(live, 0, n + 1);
    if (n) live[n - 1] = true;
    for (uint32_t o = n; o-- > 0;)
        for (uint32_t i = 0; live[o] && i < g->ops.data[o].nin; i++) {
            uint32_t d = def_of(&F, g->ops.data[o].in[i]);
            if (d != NONE) live[d] = true;
        }
    /* The uses of each value by live ops, in op order (CSR). */
    F.use_at = arena_alloc(a, (nv + 2) * sizeof *F.use_at);
    memset(F.use_at, 0, (nv + 2) * sizeof *F.use_at);
    for (uint32_t o = 0; o < n; o++)
        for (uint32_t i = 0; live[o] && i < g->ops.data[o].nin; i++) F.use_at[g->ops.data[o].in[i] + 1]++, nuses++;
    for (uint32_t v = 0; v < nv; v++) F.use_at[v + 1] += F.use_at[v];
    F.uses = arena_alloc(a, (nuses + 1) * sizeof *F.uses);
    uint32_t *fill = arena_alloc(a, (nv + 1) * sizeof *fill);
    memcpy(fill, F.use_at, nv * sizeof *fill);
    for (uint32_t o = 0; o < n; o++)
        for (uint32_t i = 0; live[o] && i < g->ops.data[o].nin; i++) {
            uint32_t v = g->ops.data[o].in[i];
            if (fill[v] == F.use_at[v] || F.uses[fill[v] - 1] != o) F.uses[fill[v]++] = o;
        }
    /* An op using a value twice is one use: close the gaps. */
    uint32_t w = 0;
    for (uint32_t v = 0; v < nv; v++) {
        uint32_t from = F.use_at[v];
        F.use_at[v] = w;
        for (uint32_t u = from; u < fill[v]; u++) F.uses[w++] = F.uses[u];
    }
    F.use_at[nv] = w;
    find_attention(&F);
    for (uint32_t o = 0; o < n; o++)
        if (live[o] && !immediate(g->ops.data[o].kind)) place(&F, o);
    sink_chains(&F);
    sink_casts(&F);
    IrGPlan *plan = make_plan(&F);
    plan_memory(&F, plan);
    return plan;
}
