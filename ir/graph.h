/* The graph IR: whole-tensor programs (LANGUAGE.md section 7) before fusion.
 *
 * A graph is a straight list of ops over SSA values; each value is a tensor (or a
 * rank-0 scalar) of an element type and a shape whose sizes may be known only at run
 * time. A size (IrSize) is a polynomial over size names with integer coefficients,
 * kept normalized (monomials sorted, names in a monomial sorted, no zero terms), so
 * two sizes are equal exactly when their structs are: `16*T*4` and `T*64` are one
 * size, and so are the element counts of `[4, T, 16]` and `[4, 16*T]`.
 *
 * The ops are the rows of ir/graph_ops.def. Element-wise ops take operands of one
 * element type (the builder inserts casts; promotion is ir_promote) and broadcast
 * their shapes numpy-style. Graphs live in an IrGraphModule, all in one arena.
 * Text form, verifier rules and interpreter: docs/IR.md section "Graph IR". */
#ifndef TILE_IR_GRAPH_H
#define TILE_IR_GRAPH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir.h"

/* ---- sizes ------------------------------------------------------------------------ */
typedef struct IrMono {      /* k * names[0] * names[1] * ... (names sorted, may repeat) */
    int64_t k;
    uint32_t n;
    const char *const *names;
} IrMono;

typedef struct IrSize {      /* c + the monomials (each with a name), sorted as printed */
    int64_t c;
    uint32_t n;
    const IrMono *m;
} IrSize;

#define IR_SIZE_MAX ((int64_t)1 << 40)   /* a written size; arithmetic checks overflow */

IrSize ir_size_const(int64_t c);
IrSize ir_size_name(Arena *a, const char *name);   /* name is kept, not copied */
/* x + k*y and x*y; false on integer overflow. */
bool ir_size_add(Arena *a, IrSize x, IrSize y, int64_t k, IrSize *out);
bool ir_size_mul(Arena *a, IrSize x, IrSize y, IrSize *out);
bool ir_size_eq(IrSize x, IrSize y);
bool ir_size_is_const(IrSize x, int64_t *c);        /* true for a known size */
/* The element count of a shape as one size; false on overflow. */
bool ir_size_numel(Arena *a, uint32_t rank, const IrSize *dims, IrSize *out);
/* "T", "1024", "T+1024", "2*S+T", "64*T", "S*T-1". */
const char *ir_size_str(Arena *a, IrSize x);
/* The value for the sizes `names[i] = vals[i]`; false if a name is unbound or on overflow. */
bool ir_size_eval(IrSize x, const char *const *names, const int64_t *vals, uint32_t n,
                  int64_t *out);

/* ---- tensor types ----------------------------------------------------------------- */
typedef struct IrTensorType {
    IrElem elem;
    uint32_t rank;           /* 0: a scalar */
    const IrSize *dims;
} IrTensorType;

bool ir_ttype_eq(const IrTensorType *x, const IrTensorType *y);
const char *ir_ttype_str(Arena *a, const IrTensorType *t);   /* "bf16[T, 1024]", "f32" */
const char *ir_shape_str(Arena *a, uint32_t rank, const IrSize *dims);  /* "[T, 1024]" */
/* Numpy broadcasting aligned at the right; false if two sizes clash. */
bool ir_broadcast_shapes(Arena *a, uint32_t na, const IrSize *da, uint32_t nb,
                         const IrSize *db, uint32_t *n, const IrSize **out);

/* ---- element-wise promotion and names, shared by kernels and graphs --------------- */
/* LANGUAGE.md section 2: float beats integer; the wider type wins; f16 with bf16 gives
 * f32, f8e4m3 with f8e5m2 f16; i1 yields to any other integer; of one width unsigned
 * wins. The one promotion rule of the compiler (frontend/lower_expr.c and
 * frontend/graph.c both call it). */
IrElem ir_promote(IrElem a, IrElem b);
/* The kind column of ir/elementwise.def for a built-in name ('f', 'n', 'c'), 0 for a
 * name that is not an element-wise built-in; its arity in *arity. */
char ir_elementwise_kind(const char *name, int *arity);

/* ---- ops ------------------------------------------------------------------------------ */
typedef enum {
#define GOP(n, t, i, o, a, f) IR_GOP_##n,
#include "graph_ops.def"
#undef GOP
    IR_GOP_COUNT
} IrGOpKind;

typedef enum { GA_NONE, GA_AXIS, GA_PERM, GA_CMP, GA_CONST, GA_SIZE, GA_CONV } IrGAttrKind;
typedef enum { IR_GCMP_EQ, IR_GCMP_NE, IR_GCMP_LT, IR_GCMP_LE, IR_GCMP_GT, IR_GCMP_GE } IrGCmp;

const char *ir_gop_name(IrGOpKind k);
int ir_gop_nin(IrGOpKind k);          /* -1: variadic */
int ir_gop_nout(IrGOpKind k);         /* -1: one or more */
IrGAttrKind ir_gop_attr(IrGOpKind k);
char ir_gop_family(IrGOpKind k);      /* the family column of graph_ops.def */
bool ir_gop_from_name(const char *s, IrGOpKind *out);
extern const char *const ir_gcmp_names[6];   /* "eq" ... "ge" */

#define IR_GNONE UINT32_MAX

/* The optimizer step's multi-tensor ops (family 'O', LANGUAGE-REFERENCE.md section 7.5):
 *   found_inf g0, ..., g{n-1} -> i1: some element of some g is inf or NaN.
 *   global_norm s, g0, ..., g{n-1} -> E: sqrt of the sum over every g of (g * s)^2, each
 *     g * s rounded to g's type first (GradScaler's unscale); E (f32 or f64) is s's type.
 *   adamw lr, beta1, beta2, eps, weight_decay, step, grad_scale, skip, p0..p{n-1},
 *     g0..g{n-1}, m0..m{n-1}, v0..v{n-1} -> p'0..p'{n-1}, m'0.., v'0..: PyTorch's AdamW
 *     (decoupled weight decay) on each p with the gradient g * grad_scale (rounded to
 *     E); p, m, v of one type E (f32 or f64) each, g any float type of p's shape; the
 *     first seven operands E scalars (step the step number t >= 1 of the bias
 *     corrections 1 - beta^t), skip an i1 scalar: when true every result is its input. */
#define IR_ADAMW_NSCALARS 8

/* linear_cross_entropy x [N, D], w [D, V], labels [N], ignore_index, dy [N], chunk ->
 * rows [N], dx [N, D], dw [D, V] (passes/graph_lmce.c, docs/GRAPHS.md "The LM head"):
 * the logits z = x @ w (x and w of one float type E, z rounded to E as the matmul
 * rounds it), row i's loss rows[i] = logsumexp(z[i]) - z[i, labels[i]] (0 on an ignored
 * row, as cross_entropy_rows), and with g = (softmax(z) - onehot(labels)) * dy[:, None]
 * (0 on ignored rows; rounded to dy's type, as cross_entropy_grad), dx = g @ trans(w)
 * and dw = trans(x) @ g. dy (f32 or f64) is the gradient of whatever the rows feed, so
 * the backward's seed scales dx and dw exactly. chunk: an i64 scalar, the rows whose
 * [chunk, V] logits are live at once (the plan's chunk loop); the values do not depend
 * on it. rows are of dy's type, dx and dw too except for bf16 x and w: the products then
 * run as the gradient rules' bf16 products (g rounded to bf16, dx and dw rounded to bf16
 * once, dw after the sum over every row) and dx and dw are bf16 (which the graph casts
 * up where an f32 gradient is read). */
/* linear_cross_entropy_rows x [N, D], w [D, V], labels [N], ignore_index -> rows [N]:
 * the forward alone (no grad), rows as above, f64 for f64 x, else f32. */
#define IR_LCE_X 0
#define IR_LCE_W 1
#define IR_LCE_LABELS 2
#define IR_LCE_IGNORE 3
#define IR_LCE_DY 4
#define IR_LCE_CHUNK 5

/* The programs of a grad_stats kernel's first step (IrGKernel.partials): enough to fill
 * a Hopper GPU several times over (132 SMs), a power of two for the second step's sum. */
#define IR_GSTATS_PARTIALS 512

/* The row blocks of a column sum's first step (IrGKernel.columns): [T, D] summed over T
 * by 32 programs a block of columns, each over T / 32 rows (D 4096: 4096 programs, not
 * 128), then one program a block of columns adds the 32 partial sums in order. */
#define IR_GCOL_PARTIALS 32

typedef struct IrGValue {
    IrTensorType type;
    const char *name;        /* a hint for printing, or NULL */
    uint32_t def;            /* the defining op, or IR_GNONE for a parameter */
    uint32_t index;          /* which result of def, or which parameter */
} IrGValue;

typedef struct IrGOp {
    IrGOpKind kind;
    Loc loc;
    uint32_t nin, nout;
    const uint32_t *in;      /* value ids */
    const uint32_t *out;
    union {
        int64_t axis;        /* GA_AXIS: 0 .. rank-1 of the first operand */
        IrGCmp cmp;          /* GA_CMP */
        struct { double f; int64_t i; } c;   /* GA_CONST: f for a float result, i otherwise */
        IrSize size;         /* GA_SIZE */
        const uint32_t *perm;   /* GA_PERM: rank entries, result axis i is operand axis perm[i] */
        struct {             /* GA_CONV (conv2d): strides and zero padding along H and W, the layout */
            uint32_t stride[2], pad[2];
            bool nhwc;       /* x [N, H, W, C], w [K, R, S, C]; else x [N, C, H, W], w [K, C, R, S] */
        } conv;
    } attr;
    uint32_t region;         /* a forward op inlined from a call of a @checkpoint fn: that
                              * call's region (1, 2, ...); 0 outside every region */
    uint8_t phase;           /* set by recomputation planning: 1 computed in the forward, 2 in
                              * the backward (fusion keeps them apart); 0 unset */
} IrGOp;

/* Recomputation (passes/graph_remat.c, docs/GRAPHS.md "Recomputation"): which forward
 * values the backward of a grad reads from memory (saved) and which it computes again.
 * save-all keeps every value the backward reads; selective recomputes element-wise ops,
 * shape changes, reductions and norms and keeps GEMM, attention, conv2d and loss rows;
 * checkpoint recomputes the ops of checkpoint regions (the calls of @checkpoint fns, or
 * the whole forward when the graph has none) from the region's inputs. A budget lets
 * the pass recompute more (cheap ops first, then the costly ones, largest first) until
 * the saved bytes fit. */
typedef enum { IR_REMAT_SAVE_ALL, IR_REMAT_SELECTIVE, IR_REMAT_CHECKPOINT } IrRematPolicy;
typedef enum { IR_BUDGET_NONE, IR_BUDGET_BYTES, IR_BUDGET_FRACTION } IrBudgetKind;

typedef struct IrRemat {
    IrRematPolicy policy;
    IrBudgetKind budget_kind;
    double budget;           /* bytes, or a fraction of save-all's saved bytes (0 .. 1] */
} IrRemat;

extern const char *const ir_remat_policy_names[3];   /* "save-all" "selective" "checkpoint" */
bool ir_remat_policy_from_name(const char *s, IrRematPolicy *out);
/* "1073741824", "1.5e9", "64MiB", "2GB", "0.5" (a fraction: at most 1, with a point) into
 * *r's budget; false (r unchanged) for anything else. */
bool ir_remat_parse_budget(const char *s, IrRemat *r);
/* "save-all", "selective, budget 0.5", "checkpoint, budget 1048576 bytes". */
const char *ir_remat_str(Arena *a, const IrRemat *r);

typedef struct IrGraph {
    Arena *arena;            /* the module's */
    const char *name;
    Loc loc;
    VEC(uint32_t) params;    /* value ids */
    VEC(IrGValue) values;
    VEC(IrGOp) ops;          /* in order; the last one is the return */
    uint32_t nsizes;         /* the size names of the parameters, in order of appearance */
    const char **sizes;
    uint32_t nfwd;           /* with a grad: the ops before its backward (the forward), the
                              * first grad's; 0 without one */
    uint32_t nregions;       /* checkpoint regions (IrGOp.region 1 .. nregions) */
    IrRemat remat;           /* the graph's @recompute attribute (save-all without one) */
    int64_t lce_chunk;       /* the graph's @linear_cross_entropy(chunk = N): the LM head fused
                              * by passes/graph_lmce.c, N rows a chunk; 0 without it */
    int64_t bwd_split_rows;  /* the graph's @attention_bwd_split(rows = N): the KV rows up to
                              * which an attention_bwd kernel's dK/dV step splits over the
                              * query heads (IrGKernel.bwd_split), N + 1 (1: never); 0
                              * without it (IR_BWD_SPLIT_ROWS) */
    uint32_t loss, seed;     /* with a grad: the differentiated value y of the first grad and
                              * its backward's seed (the constant 1 that dy/dy is); else IR_GNONE */
    uint32_t dloss;          /* after pass_graph_seed_input: the parameter that replaced the
                              * seed (the incoming gradient of the loss), else IR_GNONE */
} IrGraph;

typedef struct IrGraphModule {
    Arena *arena;
    VEC(IrGraph *) graphs;
} IrGraphModule;

/* A module in the caller's arena (which owns every graph); destroy frees the vectors. */
IrGraphModule *ir_gmodule_create(Arena *a);
void ir_gmodule_destroy(IrGraphModule *m);
IrGraph *ir_graph_create(IrGraphModule *m, const char *name, Loc loc);
IrGraph *ir_gmodule_find(const IrGraphModule *m, const char *name);

/* The element type of a linear_cross_entropy op's dx and dw: bf16 for bf16 x (the
 * gradient rules' bf16 products, rounded once), else dy's type. */
IrElem ir_lce_grad_elem(const IrGraph *g, const IrGOp *op);

/* The element type of linear_cross_entropy op's [chunk, V] scratch (its logits, then their
 * gradient in place): bf16 when x is bf16 (the logits are rounded to bf16 as the matmul
 * rounds them, g to bf16 as the bf16 products read it: nothing is lost, half the bytes,
 * and the GEMMs read it by TMA), else dy's type. */
IrElem ir_lce_scratch_elem(const IrGraph *g, const IrGOp *op);

uint32_t ir_graph_param(IrGraph *g, const IrTensorType *t, const char *name);
/* Appends an op with `nout` results of the given types; returns the op's index. */
uint32_t ir_graph_op(IrGraph *g, IrGOpKind k, Loc loc, const uint32_t *in, uint32_t nin,
                     const IrTensorType *out, uint32_t nout);
static inline uint32_t ir_graph_result(const IrGraph *g, uint32_t op, uint32_t i)
{
    return g->ops.data[op].out[i];
}
/* A copy of g in m (the same values, ops and options; ops' arrays shared), for a pass
 * that rewrites a graph to try on a copy. */
IrGraph *ir_graph_clone(IrGraphModule *m, const IrGraph *g);
/* Fills g->sizes from the parameters' types (every name, first appearance first). */
void ir_graph_collect_sizes(IrGraph *g, Arena *a);

/* Whether op's result types follow from its operands and attribute as the verifier
 * requires (for ops whose result shape is not in their operands, reshape broadcast
 * full split const size cast, the result types are checked against the operands
 * instead); false with a message in *err when the op is ill-formed. */
bool ir_gop_check(Arena *a, const IrGraph *g, const IrGOp *op, const char **err);

/* conv2d's result shape (docs/GRAPHS.md): x [N, C, H, W] and w [K, C, R, S] give
 * [N, K, P, Q] (NHWC: x [N, H, W, C], w [K, R, S, C] give [N, P, Q, K]), P = (H + 2*pad -
 * R) / stride + 1 rounded down (likewise Q); with a stride above 1 that needs H + 2*pad
 * - R known. False with a message in *err when x and w do not fit. */
bool ir_conv2d_shape(Arena *a, const IrTensorType *x, const IrTensorType *w, const uint32_t stride[2],
                     const uint32_t pad[2], bool nhwc, IrSize out[4], const char **err);

/* ---- fusion plans ------------------------------------------------------------------------ */
/* A partition of a graph's ops into kernels (passes/graph_fuse.c makes one). Each kernel
 * runs its ops in graph order; it reads `reads` from global memory (parameters or what
 * an earlier kernel wrote) and writes `writes` there (what a later kernel or the return
 * uses). `const` and `size` ops belong to no kernel: they are immediates. */
/* A flash_attention kernel (fusion rule 5): softmax(scores) @ v in one pass over the
 * keys, never writing the scores or the probabilities. Either the graph's attention op
 * (op; q, k, v, causal and scale its operands) or attention written out (op IR_GNONE):
 * scores = qk's result (q @ kt, kt = trans(k) in the kernel, or k as given with k_t);
 * the score ops, in order, turn them into softmax's operand (mul or div by a scalar,
 * add of a mask that broadcasts to the scores, where, casts); the prob ops, in order,
 * turn softmax's result into pv's left operand (casts, dropout: element i of the
 * probabilities, row-major over [..., Lq, Lk], is dropped when rand(seed, i) < p); pv
 * multiplies by v. out is the attention's result; the kernel's other ops after it are
 * its epilogue (as a GEMM's). K and V may have fewer heads than q (axis -3, grouped-
 * query attention): query head h reads their head h / G. */
typedef struct IrGAttention {
    uint32_t op;             /* the attention op, or IR_GNONE */
    uint32_t q, k, v;        /* values: q [..., Lq, D], k [..., Lk, D] (k_t: [..., D, Lk]), v [..., Lk, Dv] */
    bool k_t;
    uint32_t causal, scale;  /* the attention op's operands (an i1 and a float scalar), else IR_GNONE */
    uint32_t qk, softmax, pv;   /* written out: the ops; else IR_GNONE */
    uint32_t nscore, nprob;
    const uint32_t *score, *prob;   /* op indices, in graph order */
    uint32_t out;
    uint32_t lse;            /* the attention op's logsumexp (its second result), else IR_GNONE */
} IrGAttention;

/* A conv2d kernel (fusion rule 6): an implicit GEMM (M = N*P*Q output pixels, N = K
 * channels, K = C*R*S) of the conv op (its attribute: layout, strides, padding), then
 * its epilogue ops. The channel ops are the kernel's ops on per-channel vectors (every
 * axis but the channel axis of size 1: BatchNorm's folded scale and shift); they read
 * no pixel, so a program computes them once for its channel range. */
typedef struct IrGConv {
    uint32_t op, x, w, out;
    uint32_t nchannel;
    const uint32_t *channel; /* op indices, ascending */
} IrGConv;

typedef struct IrGKernel {
    const char *kind;        /* "elementwise", "matmul", "flash_attention", "conv2d", ... */
    uint32_t nops, nreads, nwrites;
    const uint32_t *ops;     /* op indices, ascending */
    const uint32_t *reads;   /* value ids */
    const uint32_t *writes;
    const IrGAttention *attn;   /* kind flash_attention, else NULL */
    const IrGConv *conv;        /* kind conv2d, else NULL */
    bool view;               /* a reshape of a value in memory (a parameter or a kernel's
                              * write) that is not returned: nothing runs, its result is
                              * that memory, read row-major in the new shape (ir_gplan_root) */
    int64_t chunk;           /* kind linear_cross_entropy: the rows of a chunk (its op's chunk
                              * operand): the kernel runs once per chunk of rows, holding
                              * [chunk, V] logits in its scratch buffer (or once, [rows, V],
                              * up to `whole` rows); else 0 */
    uint32_t scratch;        /* with chunk: the buffer of those logits (memory of the kernel's
                              * own, no value: its IrGBuffer has nvalues 0); with partials
                              * that buffer holds the partial sums, with bwd_scratch dO and
                              * delta */
    uint32_t partials;       /* kinds grad_stats, global_norm, found_inf: the programs of its
                              * first step, each summing a strided share of every tensor into
                              * its row of the scratch ([stats, partials] of the result's
                              * type), which a second step adds in a fixed order; else 0 */
    IrSize whole;            /* with chunk: the most rows that run as one chunk of all of
                              * them (the scratch then [rows, V]): chunk + (4 / s) * D, s the
                              * scratch's element bytes, where dw's f32 sums would be needed
                              * (dw_sum's condition: s*rows*V <= s*chunk*V + 4*D*V, one chunk
                              * holds no more memory than several and their sums), else chunk */
    bool dw_sum;             /* kind linear_cross_entropy on bf16 x whose dw is written and
                              * whose rows may be more than `whole`: buffer sum holds dw's
                              * f32 partial sums [D, V] between the chunks (the last chunk
                              * writes the bf16 dw); without it one chunk writes dw at once */
    uint32_t sum;            /* with dw_sum: that buffer (no value; IrGBuffer.over) */
    bool columns;            /* kind sum or mean over an axis that is not the last, of more
                              * than IR_GCOL_PARTIALS * 64 rows or a run-time count (a norm's
                              * weight gradient), the kernel's last op and only write: with
                              * partials, a first step of partials programs a block of
                              * columns, each summing its share of the rows into its row of
                              * the scratch (f32 [partials, result], f64 for f64), then a
                              * second step adding the partials in order (no atomics: the
                              * same bits every run) */
    bool bwd_scratch;        /* kind attention_bwd on 16-bit q, k, v and an f32 dO: a scratch
                              * buffer holds dO in q's type and delta = rowsum(dO * o) (f32),
                              * which a first step writes (passes/graph_lower.c) */
    int64_t bwd_split;       /* with bwd_scratch, where the query heads group G > 1 to a KV
                              * head: G, the dK/dV step's split regime (while the KV rows
                              * batch * Lk are at most ir_bwd_split_rows, too few key blocks
                              * of 128 to fill the GPU, a program per query head and key
                              * block writes f32 partial dK and dV into the scratch, which a
                              * fourth step adds in the order of the heads); else 0 */
    bool store_view;         /* with view, a trans whose operand its producer (a
                              * flash_attention kernel) writes straight into this result's
                              * memory, through permuted strides: the operand's root is
                              * the result's */
} IrGKernel;

/* The KV rows (the batch axes of k times its Lk) up to which an attention_bwd kernel of
 * 16-bit operands and grouped query heads runs its dK/dV step split over the query heads
 * (IrGKernel.bwd_split): 132 SMs (an H100) times 128 keys a program. Below it one program
 * per (KV head, key block) leaves SMs idle (8 KV heads at T 1024: 64 programs). */
#define IR_BWD_SPLIT_ROWS 16896

/* The KV rows up to which g's attention_bwd kernels split (IrGraph.bwd_split_rows), -1:
 * never. */
int64_t ir_bwd_split_rows(const IrGraph *g);

/* A buffer in global memory (memory planning): it holds the intermediates values[i]
 * one after another, each from the kernel that writes it (first[i]) to the last kernel
 * that reads it (last[i]), first[i+1] > last[i]; bytes is the size of values[0], and no
 * later value needs more (for every value of the sizes). Returned values are outputs,
 * in no buffer; values that stay inside a kernel need none. A buffer of no values is a
 * chunked kernel's scratch or an attention_bwd kernel's (IrGKernel.scratch). */
typedef struct IrGBuffer {
    IrSize bytes;
    uint32_t nvalues;
    const uint32_t *values, *first, *last;
    /* A rows condition (a chunked LM head's regimes, IrGKernel.whole): while the size rows
     * is at most upto, the buffer holds `one` bytes instead of bytes (the scratch: one
     * chunk of every row; dw's f32 sums: 0, no memory, a null pointer nothing reads). */
    bool cond;
    IrSize rows, upto, one;
} IrGBuffer;

/* Buffer B's bytes for the sizes `names[i] = vals[i]` (its rows condition decided);
 * false if a size is unbound or on overflow. */
bool ir_gbuffer_bytes(const IrGBuffer *B, const char *const *names, const int64_t *vals, uint32_t n, int64_t *out);
/* Whether a chunked kernel of rows `rows` and threshold `whole` (IrGKernel.whole) runs
 * one chunk of every row at these sizes; false too where a size is unbound. */
bool ir_lce_one_chunk(IrSize rows, IrSize whole, const char *const *names, const int64_t *vals, uint32_t n);

typedef struct IrGPlan {
    uint32_t nkernels;
    const IrGKernel *kernels;
    const uint32_t *root;    /* per value: ir_gplan_root, worked out once from the views */
    uint32_t nbuffers;       /* 0 with buffers NULL: no memory plan (not checked) */
    const IrGBuffer *buffers;
} IrGPlan;

/* One line per kernel (`kernel k1 elementwise: add %1, erf %6; reads %0, %b1; writes %h`),
 * then one per buffer (`buffer b0 (8192*T bytes): %h : bf16[T, 4096] (k0 to k1), ...`),
 * then one per output (`output %10 : bf16[T, 1024] (written by k1)`). */
void ir_gplan_print(const IrGraph *g, const IrGPlan *p, FILE *out);
/* The value whose memory value v is: v itself; for the result of a view kernel the root
 * of the view's operand; for the operand of a store view the root of its result. */
uint32_t ir_gplan_root(const IrGPlan *p, uint32_t v);
/* The plan's kernels that run (its views do not). */
uint32_t ir_gplan_num_launched(const IrGPlan *p);
/* The type of a grad_stats kernel's partial sums (IrGKernel.partials): its global_norm's
 * result type (f32 or f64), f32 for found_inf alone (counts, exact in f32 per program). */
IrElem ir_gstats_elem(const IrGraph *g, const IrGKernel *K);
/* Each value's printed name (as ir_graph_print prints it), in arena a. */
const char **ir_graph_value_names(Arena *a, const IrGraph *g);

/* ---- text and verifier -------------------------------------------------------------- */
void ir_graph_print(const IrGraph *g, FILE *out);
void ir_gmodule_print(const IrGraphModule *m, FILE *out);
/* Parses graph IR text into m; false with the first error in diags. */
bool ir_gmodule_parse(IrGraphModule *m, const Source *src, DiagList *diags);
/* Checks every op (types, arity, attributes, definition before use, one return at the
 * end, sizes named by parameters); false with errors in diags at the ops' locations. */
bool ir_graph_verify(const IrGraph *g, Arena *a, DiagList *diags);
bool ir_gmodule_verify(const IrGraphModule *m, DiagList *diags);

#endif
