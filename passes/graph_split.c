/* graph_split: a training graph's forward and backward as two runnable parts (issue 42).
 *
 * require:   a verified graph with a grad (g->nfwd > 0), after pass_graph_remat;
 *            nothing happens without a grad.
 * guarantee: pass_graph_seed_input: the backward's seed, the constant 1 that d(loss)/
 *            d(loss) is, becomes a parameter `dloss` of the loss's type (after the
 *            graph's own parameters; read through a cast to the backward's f32/f64),
 *            so the backward computes dloss * d(loss)/dw, the chain rule's
 *            step for a loss that feeds more computation; with dloss = 1 the graph
 *            computes what it did, bit for bit (x * 1 is x). Every op without a phase
 *            that depends on dloss gets 2, every forward op 1 (recomputed copies
 *            already have 2), and fusion never puts the two phases into one kernel;
 *            the backward's seed-free ops (save-all's casts up) may join either.
 *            pass_graph_split: given the plan, the forward is its phase-1 kernels and
 *            the backward the others (phase 2, or seed-free ops only), and the
 *            crossing values are the roots of what the backward's kernels read that
 *            the forward wrote (saved: an
 *            intermediate, which a caller keeps in memory of its own between the parts;
 *            returned: a result) or that is a parameter. Running every forward kernel
 *            in plan order, then every backward kernel, is the joint run reordered: no
 *            forward kernel reads a backward value (checked), and two values of one
 *            buffer stay apart (both in one part: their plan order is kept; one in each:
 *            the forward's part runs first entirely; a crossing value is not in the
 *            buffer in a split run, it is in the caller's memory).
 *
 *   %s = const 1.0 : f32                      %dloss : f32          (the last parameter)
 *                                             %s2 = cast %dloss : f32
 *   %6 = mul %s, %x : f32[T, 4]      ==>      %6 = mul %s2, %x : f32[T, 4]
 *
 * A loss of one element but of rank 1 or more (`f32[1]`) keeps the constant seed for
 * now (its dloss would be a tensor input; the split itself is the same). */
#include "passes/graph_split.h"

#include <string.h>

/* ---- the seed as an input ------------------------------------------------------------ */

/* Puts op at index at, moving the later ops up one and their results' definitions. */
static void insert_op(IrGraph *g, uint32_t at, IrGOp op)
{
    vec_push(&g->ops, op);
    memmove(&g->ops.data[at + 1], &g->ops.data[at], (g->ops.len - 1 - at) * sizeof op);
    g->ops.data[at] = op;
    for (uint32_t o = at; o < g->ops.len; o++)
        for (uint32_t r = 0; r < g->ops.data[o].nout; r++) g->values.data[g->ops.data[o].out[r]].def = o;
}

/* The parameter dloss, and what the backward reads for the seed: its cast to the seed's
 * type placed just after the seed's constant. A cast even of one type: the seed's readers
 * (a reshape to the loss's broadcast shape) then read a kernel's write, as they read any
 * value; a scalar parameter is passed by value and has no memory to reshape. */
static uint32_t add_dloss(IrGraph *g)
{
    IrTensorType lt = g->values.data[g->loss].type, st = g->values.data[g->seed].type;
    g->dloss = ir_graph_param(g, &lt, "dloss");
    uint32_t *in = arena_alloc(g->arena, sizeof *in), *out = arena_alloc(g->arena, sizeof *out);
    uint32_t sd = g->values.data[g->seed].def;
    in[0] = g->dloss;
    out[0] = (uint32_t)g->values.len;
    vec_push(&g->values, ((IrGValue){st, NULL, sd + 1, 0}));
    insert_op(g, sd + 1, (IrGOp){.kind = IR_GOP_CAST, .loc = g->ops.data[sd].loc, .nin = 1, .nout = 1, .in = in,
                                 .out = out, .phase = 2});
    return out[0];
}

/* Every reader of the seed reads `by` instead (new operand arrays: a clone shares them). */
static void replace_seed(IrGraph *g, uint32_t by)
{
    for (uint32_t o = 0; o < g->ops.len; o++) {
        IrGOp *op = &g->ops.data[o];
        bool reads = false;
        for (uint32_t i = 0; i < op->nin; i++) reads |= op->in[i] == g->seed;
        if (!reads || op->out[0] == by) continue;
        uint32_t *in = arena_alloc(g->arena, (op->nin + 1) * sizeof *in);
        for (uint32_t i = 0; i < op->nin; i++) in[i] = op->in[i] == g->seed ? by : op->in[i];
        op->in = in;
    }
}

/* Phase 2 for the ops that depend on `from` (a value; IR_GNONE: on op nfwd, the seed of a
 * graph read from text), 1 for the forward's ops; ops with a phase keep it. The backward's
 * ops on forward values only (casts up, an activation's derivative) keep none when the
 * recomputation pass gave none (save-all): they may run on either side, and fusion puts
 * them with what they fuse with, as it always did. */
static void set_phases(IrGraph *g, uint32_t from)
{
    bool *dep = arena_alloc(g->arena, g->values.len + 1);
    if (from != IR_GNONE) dep[from] = true;
    for (uint32_t o = 0; o < g->ops.len; o++) {
        IrGOp *op = &g->ops.data[o];
        bool d = from == IR_GNONE && o == g->nfwd;
        for (uint32_t i = 0; i < op->nin; i++) d |= dep[op->in[i]];
        for (uint32_t r = 0; r < op->nout; r++) dep[op->out[r]] = d;
        if (!op->phase) op->phase = d ? 2 : o < g->nfwd ? 1 : 0;
    }
}

void pass_graph_seed_input(IrGraph *g)
{
    if (!g->nfwd) return;
    if (g->dloss == IR_GNONE && g->seed != IR_GNONE && g->values.data[g->loss].type.rank == 0)
        replace_seed(g, add_dloss(g));
    set_phases(g, g->dloss != IR_GNONE ? g->dloss : g->seed);
}

/* ---- the split of a plan ------------------------------------------------------------------- */

/* The phase of kernel K's ops (the backward for ops of neither: the backward's work on
 * forward values, which needs nothing of the forward's kernels but their writes); 0
 * when they mix the two. */
static uint8_t kernel_phase(const IrGraph *g, const IrGKernel *K)
{
    uint8_t ph = 0;
    for (uint32_t i = 0; i < K->nops; i++) {
        uint8_t p = g->ops.data[K->ops[i]].phase;
        if (p && ph && p != ph) return 0;
        if (p) ph = p;
    }
    return ph ? ph : 2;
}

static bool value_bytes(Arena *a, const IrTensorType *t, IrSize *out)
{
    IrSize n;
    return ir_size_numel(a, t->rank, t->dims, &n) && ir_size_mul(a, n, ir_size_const(ir_elem_bytes(t->elem)), out);
}

typedef struct Split {
    const IrGraph *g;
    const IrGPlan *p;
    Arena *a;
    PassSplit *s;
    uint8_t *phase;
    uint32_t *writer;        /* per value: the launched kernel writing its memory (roots), or IR_GNONE */
    int8_t *cross;           /* per value: its PassCrossKind + 1 when it crosses, else 0 */
} Split;

static const char *phases_and_writers(Split *S)
{
    const IrGPlan *p = S->p;
    for (uint32_t k = 0; k < p->nkernels; k++) {
        const IrGKernel *K = &p->kernels[k];
        if (!(S->phase[k] = kernel_phase(S->g, K))) return "a kernel mixes forward and backward ops";
        if (K->view) continue;
        if (S->phase[k] == 1) S->s->nforward++;
        else S->s->nbackward++;
        for (uint32_t i = 0; i < K->nwrites; i++) S->writer[ir_gplan_root(p, K->writes[i])] = k;
    }
    return NULL;
}

/* Marks what backward kernel k reads from the forward. */
static void mark_reads(Split *S, uint32_t k, const bool *returned)
{
    const IrGKernel *K = &S->p->kernels[k];
    for (uint32_t i = 0; i < K->nreads; i++) {
        uint32_t u = ir_gplan_root(S->p, K->reads[i]), w = S->writer[u];
        if (u == S->g->dloss) continue;
        if (S->g->values.data[u].def == IR_GNONE) S->cross[u] = PASS_CROSS_PARAM + 1;
        else if (w != IR_GNONE && S->phase[w] == 1)
            S->cross[u] = (int8_t)((returned[u] ? PASS_CROSS_RETURNED : PASS_CROSS_SAVED) + 1);
    }
}

static bool forward_reads_backward(const Split *S, uint32_t k)
{
    const IrGKernel *K = &S->p->kernels[k];
    for (uint32_t i = 0; i < K->nreads; i++) {
        uint32_t w = S->writer[ir_gplan_root(S->p, K->reads[i])];
        if (w != IR_GNONE && S->phase[w] == 2) return true;
    }
    return false;
}

static void collect(Split *S)
{
    uint32_t nv = (uint32_t)S->g->values.len, n = 0, ns = 0;
    PassCross *cross = arena_alloc(S->a, (nv + 1) * sizeof *cross);
    uint32_t *saved = arena_alloc(S->a, (nv + 1) * sizeof *saved);
    S->s->saved_bytes = ir_size_const(0);
    for (uint32_t v = 0; v < nv; v++) {
        if (!S->cross[v]) continue;
        cross[n++] = (PassCross){v, (PassCrossKind)(S->cross[v] - 1), S->writer[v]};
        IrSize b;
        if (S->cross[v] - 1 != PASS_CROSS_SAVED) continue;
        saved[ns++] = v;
        if (value_bytes(S->a, &S->g->values.data[v].type, &b)) ir_size_add(S->a, S->s->saved_bytes, b, 1, &S->s->saved_bytes);
    }
    S->s->cross = cross, S->s->ncross = n;
    S->s->saved = saved, S->s->nsaved = ns;
}

const PassSplit *pass_graph_split(const IrGraph *g, const IrGPlan *p, Arena *a, const char **err)
{
    *err = NULL;
    if (!g->nfwd) return NULL;
    uint32_t nv = (uint32_t)g->values.len;
    Split S = {g, p, a, arena_alloc(a, sizeof(PassSplit)), arena_alloc(a, p->nkernels + 1),
               arena_alloc(a, (nv + 1) * sizeof(uint32_t)), arena_alloc(a, nv + 1)};
    memset(S.writer, 0xff, (nv + 1) * sizeof *S.writer);
    S.s->phase = S.phase;
    S.s->dloss = g->dloss;
    if ((*err = phases_and_writers(&S))) return NULL;
    bool *returned = arena_alloc(a, nv + 1);
    const IrGOp *ret = &g->ops.data[g->ops.len - 1];
    for (uint32_t i = 0; i < ret->nin; i++) returned[ir_gplan_root(p, ret->in[i])] = true;
    for (uint32_t k = 0; k < p->nkernels; k++) {
        if (p->kernels[k].view) continue;
        if (S.phase[k] == 2) mark_reads(&S, k, returned);
        else if (forward_reads_backward(&S, k)) return *err = "a forward kernel reads what the backward writes", NULL;
    }
    collect(&S);
    return S.s;
}

/* ---- printing ------------------------------------------------------------------------------ */

static void print_part(const IrGPlan *p, const PassSplit *s, uint8_t phase, FILE *out)
{
    uint32_t n = phase == 1 ? s->nforward : s->nbackward;
    fprintf(out, "%s %u kernel%s:", phase == 1 ? "forward" : "backward", n, n == 1 ? "" : "s");
    for (uint32_t k = 0; k < p->nkernels; k++)
        if (!p->kernels[k].view && s->phase[k] == phase) fprintf(out, " k%u", k);
}

void pass_graph_split_print(const IrGraph *g, const IrGPlan *p, const PassSplit *s, FILE *out)
{
    static const char *const kinds[] = {"saved", "returned", "parameter"};
    Arena *a = arena_create();
    if (!a) tl_oom();
    const char **names = ir_graph_value_names(a, g);
    fprintf(out, "split @%s: ", g->name);
    print_part(p, s, 1, out);
    fputs("; ", out);
    print_part(p, s, 2, out);
    fputc('\n', out);
    if (s->dloss != IR_GNONE)
        fprintf(out, "seed %%%s : %s (the incoming gradient of %%%s, an input of the backward)\n", names[s->dloss],
                ir_ttype_str(a, &g->values.data[s->dloss].type), names[g->loss]);
    else
        fputs("seed: the constant 1 (the loss is not a scalar)\n", out);
    for (uint32_t i = 0; i < s->ncross; i++) {
        const PassCross *c = &s->cross[i];
        const IrTensorType *t = &g->values.data[c->value].type;
        IrSize b;
        fprintf(out, "crossing %%%s : %s (%s bytes): %s", names[c->value], ir_ttype_str(a, t),
                value_bytes(a, t, &b) ? ir_size_str(a, b) : "?", kinds[c->kind]);
        if (c->kind != PASS_CROSS_PARAM) fprintf(out, ", written by k%u", c->writer);
        fputc('\n', out);
    }
    fprintf(out, "crossing: %u saved value%s, %s bytes\n", s->nsaved, s->nsaved == 1 ? "" : "s",
            ir_size_str(a, s->saved_bytes));
    arena_destroy(a);
}
