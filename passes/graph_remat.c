/* graph_remat: which forward values the backward keeps, chosen by a min cut (issue 42 part 3).
 *
 * require:   a verified graph; with a grad (g->nfwd > 0: ops [0, nfwd) are the forward,
 *            the rest the backward and what follows it).
 * guarantee: the graph computes the same values, bit for bit: every forward value the
 *            backward reads is either kept from the forward (saved: it stays in memory
 *            from its kernel to the backward's reader) or computed again by a copy of
 *            its op placed just before the first backward op that needs it (recomputed:
 *            the copy reads saved values, parameters or other copies). The forward is
 *            unchanged; a forward op no one reads any more gets no kernel (fusion skips
 *            dead ops). Copies fuse like any op: a recomputed element-wise op joins the
 *            backward kernel that consumes it. Under every policy, a column sum of the
 *            backward whose element-wise operand chain other kernels read too gets a
 *            copy of that chain from its 16-bit sources (copy_column_chains: a norm's
 *            weight gradient computed in its column tiles, no f32 [T, D] dy * xhat).
 *
 * The choice is AOTAutograd's min-cut partitioner, on the graph IR: each forward value
 * v (not a parameter, constant or returned value: those cost nothing to keep) is an edge
 * v_in -> v_out of capacity bytes(v); an op's operands feed it (u_out -> v_in, infinite);
 * a value the backward reads feeds the sink (v_out -> T); a value that must not be
 * recomputed hangs from the source (S -> v_in). A minimum S-T cut is then a set of values
 * to save of least bytes such that everything the backward reads is saved or recomputed
 * from saved values; the nodes on the sink's side are recomputed.
 *   save-all:   every forward op's value hangs from the source, and so does a costly
 *               seed-free op of the backward: the cut is what the backward reads, except
 *               that the backward's cheap seed-free ops (an activation's derivative, a
 *               cast up: the SwiGLU's silu'(g), silu(g) and u in f32) are computed in the
 *               backward from the forward values they read where that saves bytes (the
 *               bf16 g and u, 4 bytes an element, not the three f32 values, 12). No
 *               forward op runs twice.
 *   (any policy: the fused LM head's values, in the forward in Liger's order, hang from the
 *   source and a budget never lifts them: passes/graph_lmce.c)
 *   selective:  matmul, attention, conv2d and cross_entropy_rows hang from the source
 *               (their outputs are saved); element-wise ops, casts, shape changes,
 *               reductions, softmax, norms, rope, dropout (its mask drawn again from the
 *               seed, never stored: the mask is no value of the graph) are recomputed
 *               when that saves bytes.
 *   checkpoint: the values of a region that only the region reads cannot be saved
 *               (infinite edge), so the backward recomputes the region from its inputs;
 *               the region's outputs and the forward's ops outside regions are saved
 *               (save-all), the backward's seed-free cheap ops (a cast or transposition
 *               of a parameter) recomputed.
 * A budget (bytes, or a fraction of save-all's bytes) is met by recomputing more: first
 * every cheap op (selective's rules), then the costly ops one at a time, the largest
 * saved value first, each time cutting again; when nothing more can be recomputed the
 * report says the budget is not met. Bytes are polynomials of the size names; the cut
 * and the budget compare them at the sizes given, or at 4096 for a size name not given.
 *
 *   %a = matmul %x, %w      (saved: selective keeps GEMM outputs)
 *   %h = erf %a             ==>  backward:  %h.1 = erf %a      (recomputed, fuses into
 *   ... backward reads %h                   ... reads %h.1      the kernel that reads it)
 *
 * Cost: O(n) nodes and edges for n forward ops; Dinic's max flow, O(V^2 E) at worst and
 * a few passes in practice; a budget cuts again at most once per costly op. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes/graph_remat.h"

#define INF HUGE_VAL
#define NOT_NODE UINT32_MAX

typedef struct Edge {
    uint32_t to, next;
    double cap;
} Edge;

typedef struct Net {         /* the flow network: node 0 the source, 1 the sink */
    uint32_t nn;
    VEC(Edge) e;
    uint32_t *head, *level, *iter, *queue;
} Net;

typedef struct Remat {
    IrGraph *g;
    Arena *a;
    const int64_t *sizes;    /* per size name of g, or NULL: 4096 each */
    uint32_t nv, nfwd;
    bool *dep;               /* per op: it depends on the backward's seed (an adjoint's op) */
    uint32_t *region;        /* per op: its checkpoint region (a seed-free op of the backward:
                              * its operands' last one) */
    uint32_t *node;          /* per value: its node pair index k (nodes 2+2k, 3+2k), or NOT_NODE */
    uint32_t nk;
    uint32_t *value;         /* per node pair: the value */
    double *bytes;           /* per node pair: its bytes at the sizes */
    bool *ban;               /* per node pair: must not be recomputed (from the source) */
    bool *nosave;            /* per node pair: must not be saved (a checkpoint region's inside) */
    bool *cheap;             /* per node pair: selective would recompute it */
    bool *bw_reads;          /* per node pair: a backward op reads it */
    bool *src_side;          /* per node (after a cut): reachable from the source */
} Remat;

/* ---- bytes at the sizes ------------------------------------------------------------------ */

static bool value_bytes(Arena *a, const IrTensorType *t, IrSize *out)
{
    IrSize n;
    return ir_size_numel(a, t->rank, t->dims, &n) && ir_size_mul(a, n, ir_size_const(ir_elem_bytes(t->elem)), out);
}

double pass_remat_eval(const IrGraph *g, const int64_t *sizes, IrSize s)
{
    int64_t vals[64], v;
    uint32_t n = g->nsizes < 64 ? g->nsizes : 64;
    for (uint32_t i = 0; i < n; i++) vals[i] = sizes ? sizes[i] : PASS_REMAT_DEFAULT_SIZE;
    return ir_size_eval(s, g->sizes, vals, n, &v) ? (double)v : 1e30;
}

/* ---- which values are nodes, and their constraints ---------------------------------------- */

static bool costly(IrGOpKind k)
{
    char f = ir_gop_family(k);
    return f == 'm' || f == 'A' || f == 'C' || k == IR_GOP_CROSS_ENTROPY_ROWS || k == IR_GOP_LINEAR_CROSS_ENTROPY_ROWS;
}

static const IrGOp *def_op(const Remat *R, uint32_t v)
{
    uint32_t d = R->g->values.data[v].def;
    return d == IR_GNONE ? NULL : &R->g->ops.data[d];
}

/* The fused LM head in the forward (Liger's order, passes/graph_lmce.c): its dx and dw are
 * kept under every policy and budget, never computed again (the head's GEMMs twice). */
static bool pinned(const Remat *R, uint32_t k)
{
    return def_op(R, R->value[k])->kind == IR_GOP_LINEAR_CROSS_ENTROPY;
}

/* Whether forward value v costs nothing to keep: a parameter, an immediate, a result. */
static bool free_to_keep(const Remat *R, uint32_t v, const bool *returned)
{
    const IrGOp *op = def_op(R, v);
    return !op || op->kind == IR_GOP_CONST || op->kind == IR_GOP_SIZE || returned[v];
}

/* Which ops depend on the seed (op nfwd, the first of the backward): the rest, forward
 * ops and the backward's ops on forward values only (casts up, an activation's
 * derivative), may run in the forward and be saved, or be recomputed: AOTAutograd's
 * split of the joint graph, where only what needs the tangents must be backward. */
static void mark_dependent(Remat *R, bool whole)
{
    const IrGraph *g = R->g;
    uint32_t n = (uint32_t)g->ops.len;
    R->dep = arena_alloc(R->a, n + 1);
    R->region = arena_alloc(R->a, (n + 1) * sizeof *R->region);
    for (uint32_t o = 0; o < n; o++) {
        const IrGOp *op = &g->ops.data[o];
        bool dep = o == R->nfwd;
        uint32_t region = o < R->nfwd ? (whole ? 1 : op->region) : 0;
        for (uint32_t i = 0; i < op->nin && o > R->nfwd; i++) {
            uint32_t d = g->values.data[op->in[i]].def;
            if (d == IR_GNONE) continue;
            /* a bf16 head's cast up of its dx or dw (graph_lmce) stays with the seed's
             * scaling: never a value to save (twice the bytes of the head's own) */
            dep |= R->dep[d] || (g->ops.data[d].kind == IR_GOP_LINEAR_CROSS_ENTROPY && op->in[i] != g->ops.data[d].out[0]);
            if (R->region[d] > region) region = R->region[d];
        }
        R->dep[o] = dep;
        R->region[o] = dep ? 0 : region;
    }
}

static void make_nodes(Remat *R)
{
    const IrGraph *g = R->g;
    bool *returned = arena_alloc(R->a, R->nv + 1);
    memset(returned, 0, R->nv + 1);
    const IrGOp *ret = &g->ops.data[g->ops.len - 1];
    for (uint32_t i = 0; i < ret->nin; i++) returned[ret->in[i]] = true;
    R->node = arena_alloc(R->a, (R->nv + 1) * sizeof *R->node);
    R->value = arena_alloc(R->a, (R->nv + 1) * sizeof *R->value);
    R->nk = 0;
    for (uint32_t v = 0; v < R->nv; v++) {
        uint32_t d = g->values.data[v].def;
        bool node = d != IR_GNONE && !R->dep[d] && !free_to_keep(R, v, returned);
        R->node[v] = node ? R->nk : NOT_NODE;
        if (node) R->value[R->nk++] = v;
    }
}

/* Whether region value v is read outside its region by the forward (a region's output). */
static bool region_output(const Remat *R, uint32_t v, uint32_t region)
{
    for (uint32_t o = 0; o < R->nfwd; o++) {
        const IrGOp *op = &R->g->ops.data[o];
        for (uint32_t i = 0; R->region[o] != region && i < op->nin; i++)
            if (op->in[i] == v) return true;
    }
    return false;
}

static void classify(Remat *R, const IrRemat *opt)
{
    uint32_t nk = R->nk;
    R->bytes = arena_alloc(R->a, (nk + 1) * sizeof *R->bytes);
    R->ban = arena_alloc(R->a, nk + 1);
    R->nosave = arena_alloc(R->a, nk + 1);
    R->cheap = arena_alloc(R->a, nk + 1);
    R->bw_reads = arena_alloc(R->a, nk + 1);
    memset(R->bw_reads, 0, nk + 1);
    for (uint32_t k = 0; k < nk; k++) {
        uint32_t v = R->value[k];
        const IrGOp *op = def_op(R, v);
        IrSize b;
        R->bytes[k] = value_bytes(R->a, &R->g->values.data[v].type, &b) ? pass_remat_eval(R->g, R->sizes, b) : 1e30;
        R->cheap[k] = !costly(op->kind);
        uint32_t region = R->region[R->g->values.data[v].def];
        bool inside = opt->policy == IR_REMAT_CHECKPOINT && region, out = inside && region_output(R, v, region);
        bool fwd_op = R->g->values.data[v].def < R->nfwd;   /* not a seed-free op of the backward */
        R->ban[k] = (opt->policy == IR_REMAT_SAVE_ALL && (fwd_op || !R->cheap[k])) ||
                    (opt->policy == IR_REMAT_SELECTIVE && !R->cheap[k]) ||
                    (opt->policy == IR_REMAT_CHECKPOINT && ((!inside && (fwd_op || !R->cheap[k])) || out));
        R->nosave[k] = inside && !out;
        if (pinned(R, k)) R->ban[k] = true, R->nosave[k] = false;
    }
    for (uint32_t o = R->nfwd; o < R->g->ops.len; o++)
        for (uint32_t i = 0; R->dep[o] && i < R->g->ops.data[o].nin; i++) {
            uint32_t k = R->node[R->g->ops.data[o].in[i]];
            if (k != NOT_NODE) R->bw_reads[k] = true;
        }
}

/* ---- Dinic's max flow --------------------------------------------------------------------- */

static void add_edge(Net *N, uint32_t u, uint32_t v, double cap)
{
    vec_push(&N->e, ((Edge){v, N->head[u], cap}));
    N->head[u] = (uint32_t)N->e.len - 1;
    vec_push(&N->e, ((Edge){u, N->head[v], 0}));
    N->head[v] = (uint32_t)N->e.len - 1;
}

static bool bfs(Net *N)
{
    for (uint32_t i = 0; i < N->nn; i++) N->level[i] = UINT32_MAX;
    uint32_t qh = 0, qt = 0;
    N->level[0] = 0;
    N->queue[qt++] = 0;
    while (qh < qt) {
        uint32_t u = N->queue[qh++];
        for (uint32_t e = N->head[u]; e != UINT32_MAX; e = N->e.data[e].next)
            if (N->e.data[e].cap > 0 && N->level[N->e.data[e].to] == UINT32_MAX) {
                N->level[N->e.data[e].to] = N->level[u] + 1;
                N->queue[qt++] = N->e.data[e].to;
            }
    }
    return N->level[1] != UINT32_MAX;
}

/* Pushes at most f from u to the sink along level-increasing edges; the amount pushed. */
static double push(Net *N, uint32_t u, double f)
{
    if (u == 1) return f;
    for (; N->iter[u] != UINT32_MAX; N->iter[u] = N->e.data[N->iter[u]].next) {
        Edge *e = &N->e.data[N->iter[u]];
        if (e->cap <= 0 || N->level[e->to] != N->level[u] + 1) continue;
        double d = push(N, e->to, f < e->cap ? f : e->cap);
        if (d <= 0) continue;
        if (e->cap != INF) e->cap -= d;
        if (N->e.data[N->iter[u] ^ 1].cap != INF) N->e.data[N->iter[u] ^ 1].cap += d;
        return d;
    }
    return 0;
}

static void max_flow(Net *N)
{
    while (bfs(N)) {
        memcpy(N->iter, N->head, N->nn * sizeof *N->iter);
        for (double f; (f = push(N, 0, INF)) > 0;)
            if (f == INF) return;   /* unreachable: no value is both unsavable and banned */
    }
}

/* The network of R's constraints, its max flow, and the source's side in R->src_side. */
static void cut(Remat *R)
{
    Net N = {.nn = 2 + 2 * R->nk};
    N.head = arena_alloc(R->a, N.nn * sizeof *N.head);
    N.level = arena_alloc(R->a, N.nn * sizeof *N.level);
    N.iter = arena_alloc(R->a, N.nn * sizeof *N.iter);
    N.queue = arena_alloc(R->a, N.nn * sizeof *N.queue);
    memset(N.head, 0xff, N.nn * sizeof *N.head);
    for (uint32_t k = 0; k < R->nk; k++) {
        const IrGOp *op = def_op(R, R->value[k]);
        add_edge(&N, 2 + 2 * k, 3 + 2 * k, R->nosave[k] ? INF : R->bytes[k]);
        if (R->ban[k]) add_edge(&N, 0, 2 + 2 * k, INF);
        if (R->bw_reads[k]) add_edge(&N, 3 + 2 * k, 1, INF);
        for (uint32_t i = 0; i < op->nin; i++)
            if (R->node[op->in[i]] != NOT_NODE) add_edge(&N, 3 + 2 * R->node[op->in[i]], 2 + 2 * k, INF);
    }
    max_flow(&N);
    bfs(&N);   /* no path to the sink now: the levels mark the source's side */
    R->src_side = arena_alloc(R->a, N.nn);
    for (uint32_t i = 0; i < N.nn; i++) R->src_side[i] = N.level[i] != UINT32_MAX;
    vec_free(&N.e);
}

static bool saved(const Remat *R, uint32_t k) { return R->src_side[2 + 2 * k] && !R->src_side[3 + 2 * k]; }
static bool recomputed(const Remat *R, uint32_t k) { return !R->src_side[2 + 2 * k]; }

/* Per node pair: the backward needs it, directly or through values it recomputes. */
static bool *needed(const Remat *R)
{
    bool *need = arena_alloc(R->a, R->nk + 1);
    memcpy(need, R->bw_reads, R->nk + 1);
    for (uint32_t k = R->nk; k-- > 0;) {   /* node pairs are in definition order */
        if (!need[k] || !recomputed(R, k)) continue;
        const IrGOp *op = def_op(R, R->value[k]);
        for (uint32_t i = 0; i < op->nin; i++)
            if (R->node[op->in[i]] != NOT_NODE) need[R->node[op->in[i]]] = true;
    }
    return need;
}

static double saved_at(const Remat *R, const bool *need)
{
    double s = 0;
    for (uint32_t k = 0; k < R->nk; k++)
        if (need[k] && saved(R, k)) s += R->bytes[k];
    return s;
}

/* ---- the budget -------------------------------------------------------------------------- */

/* Lifts the ban of the largest costly value saved now; false when none is left. */
static bool unban_one(Remat *R, const bool *need)
{
    uint32_t best = NOT_NODE;
    for (uint32_t k = 0; k < R->nk; k++)
        if (R->ban[k] && need[k] && saved(R, k) && !pinned(R, k) && (best == NOT_NODE || R->bytes[k] > R->bytes[best]))
            best = k;
    if (best == NOT_NODE) return false;
    R->ban[best] = false;
    return true;
}

static void unban_cheap(Remat *R)
{
    for (uint32_t k = 0; k < R->nk; k++)
        if (R->cheap[k] && !R->nosave[k] && !pinned(R, k)) R->ban[k] = false;
}

/* Cuts until the saved bytes fit the budget (or nothing more can be recomputed). */
static bool *meet_budget(Remat *R, double budget, PassRemat *rep)
{
    cut(R);
    bool *need = needed(R);
    bool lifted_cheap = false;
    while (saved_at(R, need) > budget) {
        if (!lifted_cheap) unban_cheap(R), lifted_cheap = true;
        else if (unban_one(R, need)) rep->nunbanned++;
        else break;
        cut(R);
        need = needed(R);
    }
    rep->met = saved_at(R, need) <= budget;
    return need;
}

/* ---- the rewrite: copies of the recomputed ops before their first backward reader ---------- */

typedef struct Rewrite {
    Remat *R;
    VEC(IrGOp) ops;
    uint32_t *copy;          /* per value: its copy, or IR_GNONE */
    const bool *recomp;      /* per node pair: recomputed and needed */
} Rewrite;

static uint32_t copy_of(Rewrite *W, uint32_t v);

static void copy_op(Rewrite *W, const IrGOp *op)
{
    IrGraph *g = W->R->g;
    uint32_t *in = arena_alloc(g->arena, (op->nin + 1) * sizeof *in), *out = arena_alloc(g->arena, (op->nout + 1) * sizeof *out);
    for (uint32_t i = 0; i < op->nin; i++) in[i] = copy_of(W, op->in[i]);
    for (uint32_t r = 0; r < op->nout; r++) {
        IrGValue val = g->values.data[op->out[r]];
        out[r] = (uint32_t)g->values.len;
        vec_push(&g->values, val);
        W->copy[op->out[r]] = out[r];
    }
    IrGOp c = *op;
    c.in = in;
    c.out = out;
    c.phase = 2;
    vec_push(&W->ops, c);
}

/* v as the backward reads it: its copy (made now if needed) when it is recomputed. */
static uint32_t copy_of(Rewrite *W, uint32_t v)
{
    uint32_t k = v < W->R->nv ? W->R->node[v] : NOT_NODE;
    if (k == NOT_NODE || !W->recomp[k]) return v;
    if (W->copy[v] == IR_GNONE) copy_op(W, def_op(W->R, v));
    return W->copy[v];
}

static void rewrite(Remat *R, const bool *recomp, PassRemat *rep)
{
    IrGraph *g = R->g;
    Rewrite W = {.R = R, .recomp = recomp};
    W.copy = arena_alloc(R->a, (R->nv + 1) * sizeof *W.copy);
    memset(W.copy, 0xff, (R->nv + 1) * sizeof *W.copy);
    for (uint32_t o = 0; o < g->ops.len; o++) {
        IrGOp op = g->ops.data[o];
        if (R->dep[o]) {
            uint32_t *in = arena_alloc(g->arena, (op.nin + 1) * sizeof *in);
            for (uint32_t i = 0; i < op.nin; i++) in[i] = copy_of(&W, op.in[i]);
            op.in = in;
        }
        op.phase = R->dep[o] ? 2 : 1;
        vec_push(&W.ops, op);
    }
    vec_free(&g->ops);   /* the definitions move only now: copy_of reads the old ones */
    g->ops.data = W.ops.data, g->ops.len = W.ops.len, g->ops.cap = W.ops.cap;
    for (uint32_t o = 0; o < g->ops.len; o++)
        for (uint32_t r = 0; r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = o;
    rep->copies = W.copy;
}

/* ---- column sums computed from their sources (docs/GRAPHS.md "Recomputation" item 7) ---- */

/* A column sum of the backward (a sum or mean over an axis that is not the last: a norm's
 * weight gradient, sum(dy * xhat) over the rows) whose operand v comes from an
 * element-wise chain that other kernels read too (the norm's row kernel computes dy and
 * xhat for dx) would read v as an f32 [T, D] value written by the row kernel (fusion puts
 * no op in two kernels). When the chain's sources of v's shape are 16-bit values in
 * memory (dy's bf16 GEMM outputs or the LM head's dx, x) and the rest are values of other
 * shapes (the per-row rstd, a weight vector), the sum gets a copy of the chain of its own,
 * placed just before it: fusion's column reduction takes the copy's element-wise ops into
 * its column tiles, reading the 16-bit sources (6 or 8 bytes an element) instead of an
 * f32 value written and read back (8), and no [T, D] buffer is held. */

#define CHAIN_MAX 12   /* ops of one copied chain */

static bool same_dims(const IrTensorType *a, const IrTensorType *b)
{
    if (a->rank != b->rank) return false;
    for (uint32_t i = 0; i < a->rank; i++)
        if (!ir_size_eq(a->dims[i], b->dims[i])) return false;
    return true;
}

static bool chain_op(const IrGOp *op) { return op && op->nout == 1 && strchr("ubx", ir_gop_family(op->kind)); }

/* Collects into ch the ops of v's chain of shape S (post-order, each once); false when a
 * source of shape S is wider than 16 bits or the chain is too long. */
static bool chain_of(const IrGraph *g, uint32_t v, const IrTensorType *S, uint32_t *ch, uint32_t *n, bool *in_ch)
{
    const IrTensorType *t = &g->values.data[v].type;
    if (!same_dims(t, S)) return true;
    uint32_t d = g->values.data[v].def;
    const IrGOp *op = d == IR_GNONE ? NULL : &g->ops.data[d];
    if (ir_elem_bytes(t->elem) <= 2)   /* a 16-bit source, read as it is, if in memory for sure */
        return !op || d < g->nfwd || !(strchr("ubctxd", ir_gop_family(op->kind)) || op->kind == IR_GOP_FULL ||
                                       op->kind == IR_GOP_BROADCAST);
    if (!chain_op(op) || d < g->nfwd) return false;
    if (in_ch[d]) return true;
    for (uint32_t i = 0; i < op->nin; i++)
        if (!chain_of(g, op->in[i], S, ch, n, in_ch)) return false;
    if (*n == CHAIN_MAX) return false;
    in_ch[d] = true;
    ch[(*n)++] = d;
    return true;
}

static void copy_column_chains(IrGraph *g, Arena *a)
{
    uint32_t nops = (uint32_t)g->ops.len, nv = (uint32_t)g->values.len;
    uint32_t *nuse = arena_alloc(a, (nv + 1) * sizeof *nuse), ch[CHAIN_MAX];
    bool *in_ch = arena_alloc(a, nops + 1);
    memset(nuse, 0, (nv + 1) * sizeof *nuse);
    for (uint32_t o = 0; o < nops; o++)
        for (uint32_t i = 0; i < g->ops.data[o].nin; i++) nuse[g->ops.data[o].in[i]]++;
    VEC(IrGOp) ops = {0};
    bool any = false;
    for (uint32_t o = 0; o < nops; o++) {
        IrGOp op = g->ops.data[o];
        const IrTensorType *S = op.nin == 1 ? &g->values.data[op.in[0]].type : NULL;
        uint32_t n = 0, inner = 0;
        bool column = o >= g->nfwd && (op.kind == IR_GOP_SUM || op.kind == IR_GOP_MEAN) && S->rank >= 2 &&
                      (uint32_t)op.attr.axis + 1 < S->rank;
        if (column) memset(in_ch, 0, nops + 1);
        if (column && chain_of(g, op.in[0], S, ch, &n, in_ch) && n) {
            /* worth it when a value of the chain has a reader outside it (else fusion
             * puts the whole chain in the sum's kernel already) */
            for (uint32_t k = 0; k < n; k++)
                for (uint32_t i = 0; i < g->ops.data[ch[k]].nin; i++) {
                    uint32_t dd = g->values.data[g->ops.data[ch[k]].in[i]].def;
                    inner += dd != IR_GNONE && in_ch[dd];
                }
            uint32_t uses = 0;
            for (uint32_t k = 0; k < n; k++) uses += nuse[g->ops.data[ch[k]].out[0]];
            if (uses > inner + 1) {
                uint32_t *map = arena_alloc(a, (n + 1) * sizeof *map);
                for (uint32_t k = 0; k < n; k++) {
                    IrGOp c = g->ops.data[ch[k]];
                    uint32_t *in = arena_alloc(g->arena, (c.nin + 1) * sizeof *in), *out = arena_alloc(g->arena, 2 * sizeof *out);
                    for (uint32_t i = 0; i < c.nin; i++) {
                        in[i] = c.in[i];
                        for (uint32_t j = 0; j < k; j++)
                            if (g->ops.data[ch[j]].out[0] == c.in[i]) in[i] = map[j];
                    }
                    IrGValue val = g->values.data[c.out[0]];
                    val.name = NULL;
                    out[0] = map[k] = (uint32_t)g->values.len;
                    vec_push(&g->values, val);
                    c.in = in, c.out = out, c.phase = op.phase;
                    vec_push(&ops, c);
                }
                uint32_t *in = arena_alloc(g->arena, 2 * sizeof *in);
                in[0] = map[n - 1];
                op.in = in;
                any = true;
            }
        }
        vec_push(&ops, op);
    }
    if (!any) {
        vec_free(&ops);
        return;
    }
    vec_free(&g->ops);
    g->ops.data = ops.data, g->ops.len = ops.len, g->ops.cap = ops.cap;
    for (uint32_t o = 0; o < g->ops.len; o++)
        for (uint32_t r = 0; r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = o;
}

/* ---- the pass ------------------------------------------------------------------------------ */

static void report_lists(Remat *R, const bool *need, PassRemat *rep)
{
    uint32_t *sv = arena_alloc(R->a, (R->nk + 1) * sizeof *sv), *rc = arena_alloc(R->a, (R->nk + 1) * sizeof *rc);
    rep->saved = sv;
    rep->recomputed = rc;
    rep->saved_bytes = ir_size_const(0);
    for (uint32_t k = 0; k < R->nk; k++) {
        IrSize b;
        if (need[k] && saved(R, k)) {
            sv[rep->nsaved++] = R->value[k];
            if (value_bytes(R->a, &R->g->values.data[R->value[k]].type, &b))
                ir_size_add(R->a, rep->saved_bytes, b, 1, &rep->saved_bytes);
        } else if (need[k] && recomputed(R, k)) rc[rep->nrecomputed++] = R->value[k];
    }
    rep->saved_at = saved_at(R, need);
}

/* Save-all's bytes at the sizes (what a fraction budget is a fraction of): its own cut,
 * on a network of its own. */
static double save_all_at(IrGraph *g, const int64_t *sizes, Arena *a)
{
    Remat R = {.g = g, .a = a, .sizes = sizes, .nv = (uint32_t)g->values.len, .nfwd = g->nfwd};
    IrRemat all = {.policy = IR_REMAT_SAVE_ALL};
    PassRemat scratch;
    memset(&scratch, 0, sizeof scratch);
    mark_dependent(&R, false);
    make_nodes(&R);
    classify(&R, &all);
    return saved_at(&R, meet_budget(&R, INF, &scratch));
}

PassRemat *pass_graph_remat(IrGraph *g, const IrRemat *opt, const int64_t *sizes, Arena *a)
{
    PassRemat *rep = arena_alloc(a, sizeof *rep);
    memset(rep, 0, sizeof *rep);
    rep->opt = *opt;
    rep->met = true;
    rep->sizes = sizes;
    if (!g->nfwd) return rep;
    Remat R = {.g = g, .a = a, .sizes = sizes, .nv = (uint32_t)g->values.len, .nfwd = g->nfwd};
    mark_dependent(&R, opt->policy == IR_REMAT_CHECKPOINT && g->nregions == 0);
    make_nodes(&R);
    classify(&R, opt);
    rep->save_all_at = save_all_at(g, sizes, a);
    rep->budget_at = opt->budget_kind == IR_BUDGET_BYTES ? opt->budget
                     : opt->budget_kind == IR_BUDGET_FRACTION ? opt->budget * rep->save_all_at : INF;
    bool *need = meet_budget(&R, rep->budget_at, rep);
    report_lists(&R, need, rep);
    bool *recomp = arena_alloc(a, R.nk + 1);
    for (uint32_t k = 0; k < R.nk; k++) recomp[k] = need[k] && recomputed(&R, k);
    if (rep->nrecomputed) rewrite(&R, recomp, rep);   /* else the graph is as built (save-all: today's plan) */
    copy_column_chains(g, a);
    return rep;
}

bool pass_remat_options(const IrGraph *g, const char *policy, const char *budget, IrRemat *out, const char **err)
{
    *out = g->remat;
    if (policy && !ir_remat_policy_from_name(policy, &out->policy))
        return *err = "the recomputation policy must be save-all, selective or checkpoint", false;
    if (budget && !ir_remat_parse_budget(budget, out))
        return *err = "a memory budget is a byte count (1073741824, 2GiB, 1.5e9) or a fraction of save-all's "
                      "saved bytes in (0, 1] (0.5)", false;
    return true;
}

/* ---- printing ---------------------------------------------------------------------------- */

IrSize pass_gplan_buffer_bytes(const IrGraph *g, const IrGPlan *p, const int64_t *sizes, Arena *a)
{
    int64_t vals[64];
    uint32_t n = g->nsizes < 64 ? g->nsizes : 64;
    for (uint32_t i = 0; i < n; i++) vals[i] = sizes ? sizes[i] : PASS_REMAT_DEFAULT_SIZE;
    IrSize s = ir_size_const(0);
    for (uint32_t b = 0; b < p->nbuffers; b++) {   /* a rows condition: its regime at these sizes */
        const IrGBuffer *B = &p->buffers[b];
        bool one = B->cond && ir_lce_one_chunk(B->rows, B->upto, g->sizes, vals, n);
        ir_size_add(a, s, one ? B->one : B->bytes, 1, &s);
    }
    return s;
}

static const char *at_sizes(Arena *a, const IrGraph *g, const int64_t *sizes)
{
    const char *s = "";
    for (uint32_t i = 0; i < g->nsizes; i++)
        s = arena_printf(a, "%s%s%s=%lld", s, i ? ", " : "", g->sizes[i],
                         (long long)(sizes ? sizes[i] : PASS_REMAT_DEFAULT_SIZE));
    return g->nsizes ? arena_printf(a, " at %s%s", s, sizes ? "" : " (not given)") : "";
}

static void print_values_bytes(Arena *a, const IrGraph *g, const char **names, const PassRemat *r, FILE *out)
{
    for (uint32_t i = 0; i < r->nsaved; i++) {
        const IrTensorType *t = &g->values.data[r->saved[i]].type;
        IrSize b;
        fprintf(out, "saved %%%s : %s (%s bytes)\n", names[r->saved[i]], ir_ttype_str(a, t),
                value_bytes(a, t, &b) ? ir_size_str(a, b) : "?");
    }
    for (uint32_t i = 0; i < r->nrecomputed; i++) {
        uint32_t v = r->recomputed[i], c = r->copies ? r->copies[v] : IR_GNONE;
        fprintf(out, "recomputed %%%s = %s", names[v], ir_gop_name(g->ops.data[g->values.data[v].def].kind));
        if (c != IR_GNONE) fprintf(out, " (as %%%s in the backward)", names[c]);
        fputc('\n', out);
    }
}

void pass_graph_remat_print(const IrGraph *g, const PassRemat *r, const IrGPlan *plan, FILE *out)
{
    if (!g->nfwd) return;
    Arena *a = arena_create();
    if (!a) tl_oom();
    const char **names = ir_graph_value_names(a, g);
    fprintf(out, "recompute @%s: %s\n", g->name, ir_remat_str(a, &r->opt));
    print_values_bytes(a, g, names, r, out);
    const char *sz = at_sizes(a, g, r->sizes);
    fprintf(out, "saved: %u value%s, %s bytes (%.0f%s; save-all %.0f)", r->nsaved, r->nsaved == 1 ? "" : "s",
            ir_size_str(a, r->saved_bytes), r->saved_at, sz, r->save_all_at);
    if (r->opt.budget_kind != IR_BUDGET_NONE)
        fprintf(out, "; budget %.0f %s", r->budget_at, r->met ? "met" : "NOT met: nothing more can be recomputed");
    fprintf(out, "; recomputed: %u value%s\n", r->nrecomputed, r->nrecomputed == 1 ? "" : "s");
    if (plan) {
        IrSize m = pass_gplan_buffer_bytes(g, plan, r->sizes, a);
        fprintf(out, "memory: %u buffer%s, %s bytes (%.0f%s), forward and backward\n", plan->nbuffers,
                plan->nbuffers == 1 ? "" : "s", ir_size_str(a, m), pass_remat_eval(g, r->sizes, m), sz);
    }
    arena_destroy(a);
}
