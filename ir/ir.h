/* Tile IR: SSA values, typed ops, structured regions.
 *
 * A Module holds Funcs (kernels, and the host-side grid functions of kernels). A Func
 * has one body Block; ops live in doubly linked lists inside Blocks; control-flow ops
 * (for, if, while) own Regions, each one Block whose arguments are the region's
 * entry values and whose last op is a terminator (yield / condition / return).
 *
 * Values are 32-bit ids into the function's value table (IrFunc.values): each value
 * is either a block argument or the result of one op. Types are interned in the
 * IrCtx, so two types are equal exactly when their pointers are. A type carries a
 * layout slot that stays NULL until the GPU tiling pass assigns one (which thread
 * holds which element); the interpreter ignores it.
 *
 * Every op keeps its source location through every pass. All IR memory lives in the
 * IrCtx's arena and dies with it. */
#ifndef TILE_IR_IR_H
#define TILE_IR_IR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "arena.h"
#include "diag.h"
#include "knobs.h"
#include "plan.h"

/* ---- element types ------------------------------------------------------------ */
/*        NAME       text       bits class */
#define IR_ELEMS(X)                         \
    X(I1,     "i1",     1,  'i')            \
    X(I8,     "i8",     8,  'i')            \
    X(I16,    "i16",    16, 'i')            \
    X(I32,    "i32",    32, 'i')            \
    X(I64,    "i64",    64, 'i')            \
    X(U8,     "u8",     8,  'u')            \
    X(U16,    "u16",    16, 'u')            \
    X(U32,    "u32",    32, 'u')            \
    X(U64,    "u64",    64, 'u')            \
    X(F16,    "f16",    16, 'f')            \
    X(BF16,   "bf16",   16, 'f')            \
    X(F32,    "f32",    32, 'f')            \
    X(F64,    "f64",    64, 'f')            \
    X(F8E4M3, "f8e4m3", 8,  'f')            \
    X(F8E5M2, "f8e5m2", 8,  'f')            \
    X(PTR,    "ptr",    64, 'p')

typedef enum {
#define X(n, t, b, c) IR_##n,
    IR_ELEMS(X)
#undef X
    IR_NUM_ELEMS
} IrElem;

const char *ir_elem_name(IrElem e);     /* "f32"; "ptr" for IR_PTR */
int ir_elem_bits(IrElem e);             /* 1 for i1, 64 for pointers */
int ir_elem_bytes(IrElem e);            /* storage size in memory: i1 is 1 byte */
bool ir_elem_is_int(IrElem e);          /* i1..u64 */
bool ir_elem_is_signed(IrElem e);       /* i8..i64 (i1 counts as unsigned) */
bool ir_elem_is_float(IrElem e);
bool ir_elem_from_name(const char *s, size_t n, IrElem *out);  /* "bool" too */

/* ---- types ---------------------------------------------------------------------- */
#define IR_MAX_RANK 5
#define IR_MAX_TILE_ELEMS (1 << 20)     /* larger tiles are a user error */

typedef struct IrLayout IrLayout;       /* defined by the GPU tiling pass */

typedef struct IrType {
    IrElem elem;                 /* element kind; IR_PTR for pointers */
    IrElem pointee;              /* for IR_PTR: the pointed-to scalar kind */
    uint8_t rank;                /* 0: a scalar; 1..3: a tile */
    int32_t shape[IR_MAX_RANK];  /* rank entries, each a power of two; rest 0 */
    const IrLayout *layout;      /* NULL until the tiling pass */
} IrType;

typedef struct IrCtx IrCtx;

IrCtx *ir_ctx_create(void);
void ir_ctx_destroy(IrCtx *c);          /* frees every type, module, func and op */
Arena *ir_ctx_arena(IrCtx *c);
DiagList *ir_ctx_diags(IrCtx *c);       /* where passes and the IR parser report */

/* Interned constructors: the same arguments give the same pointer. */
const IrType *ir_type_scalar(IrCtx *c, IrElem e);        /* e != IR_PTR */
const IrType *ir_type_ptr(IrCtx *c, IrElem pointee);
const IrType *ir_type_tile(IrCtx *c, const IrType *scalar, int rank, const int32_t *shape);
const IrType *ir_type_elem(IrCtx *c, const IrType *t);   /* the scalar of a tile */
/* The same shape as `shape_of` (scalar or tile) with the element of `elem_of`. */
const IrType *ir_type_like(IrCtx *c, const IrType *shape_of, const IrType *elem_of);
const IrType *ir_type_with_layout(IrCtx *c, const IrType *t, const IrLayout *l);
int64_t ir_type_numel(const IrType *t);                  /* 1 for scalars */
bool ir_type_is_tile(const IrType *t);
/* Writes "f32", "*bf16", "f32[128, 64]", "*f16[64]" into buf; returns buf. */
char *ir_type_str(const IrType *t, char *buf, size_t n);

/* ---- ops -------------------------------------------------------------------------- */
enum { IR_P = 1, IR_C = 2, IR_E = 4, IR_R = 8, IR_W = 16, IR_S = 32, IR_T = 64, IR_K = 128, IR_G = 256 };

typedef enum {
#define OP(name, text, nops, nres, nreg, flags, attr) IR_OP_##name,
#include "ops.def"
#undef OP
    IR_NUM_OPS
} IrOpcode;

typedef struct IrOpInfo {
    const char *text;
    int nops, nres, nregions;
    unsigned flags;
} IrOpInfo;
extern const IrOpInfo ir_op_info[IR_NUM_OPS];
bool ir_op_from_name(const char *s, size_t n, IrOpcode *out);

typedef enum { IR_CMP_EQ, IR_CMP_NE, IR_CMP_LT, IR_CMP_LE, IR_CMP_GT, IR_CMP_GE } IrCmp;
extern const char *const ir_cmp_names[6];                /* "eq", "ne", ... */
typedef enum { IR_PREC_DEFAULT, IR_PREC_TF32, IR_PREC_IEEE } IrPrecision;
extern const char *const ir_precision_names[3];          /* "default", "tf32", "ieee" */
/* The memory order of an atomic (attr.i; LANGUAGE-REFERENCE.md "Memory model"). The
 * zero value is the default, acq_rel, so an atomic built without one is ordered. */
typedef enum { IR_SEM_ACQ_REL, IR_SEM_RELAXED, IR_SEM_ACQUIRE, IR_SEM_RELEASE } IrSem;
extern const char *const ir_sem_names[4];                /* "acq_rel", "relaxed", ... */
bool ir_op_is_atomic(IrOpcode code);

/* The attr.i of a scan (cumsum, cumprod, scan): the axis, plus IR_SCAN_REVERSE for a
 * scan from the last element to the first. */
enum { IR_AXIS_MASK = 0xff, IR_SCAN_REVERSE = 0x100 };
/* turn's attr.i (ops.def): the warpgroups' ping-pong */
enum { IR_TURN_WAIT = 0, IR_TURN_PASS = 1, IR_TURN_START = 2, IR_TURN_END = 3 };
extern const char *const ir_turn_names[4];   /* "wait", "pass", "start", "end" */
/* The cluster flags (passes/cluster.c): block_load's attr.i IR_BLOCK_MULTICAST, printed
 * `multicast` (the block is the same in every CTA of the cluster), tma_copy's 1 (printed
 * `multicast`: the CTAs copy shares of it into every CTA), mbarrier_arrive's 1 (printed
 * `cluster`: the arrival is on the barrier of every CTA of the cluster). */
enum { IR_BLOCK_MULTICAST = 1 };
/* block_load's and block_store's attr.i IR_BLOCK_UPPER, printed `upper`: only the upper
 * edges offsets[d] + i[d] < shape[d] are tested, a negative coordinate is read or written
 * as a pointer load or store would (the op came from one: passes/ptrblock.c). */
enum { IR_BLOCK_UPPER = 2 };
typedef uint32_t IrValue;
#define IR_NO_VALUE UINT32_MAX

typedef struct IrOp IrOp;
typedef struct IrBlock IrBlock;
typedef struct IrFunc IrFunc;

struct IrBlock {
    IrValue *args;
    uint32_t nargs;
    IrOp *first, *last;
    IrOp *parent_op;             /* the control-flow op owning it; NULL for a body */
    IrFunc *func;
};

typedef struct IrAttr {
    int64_t i;                   /* axis, predicate, lo, n, integer constant, ... */
    double f;                    /* float constant */
    const char *s;               /* assert/print message (arena-owned) */
} IrAttr;

struct IrOp {
    IrOpcode code;
    Loc loc;
    IrValue *operands;
    uint32_t noperands;
    IrValue *results;
    uint32_t nresults;
    IrBlock *regions;            /* nregions blocks */
    uint32_t nregions;
    IrAttr attr;
    IrOp *prev, *next;
    IrBlock *parent;
};

typedef struct IrValueInfo {
    const IrType *type;
    IrOp *def;                   /* NULL for a block argument */
    IrBlock *block;              /* for a block argument: its block */
    uint32_t index;              /* result index in def, or argument index */
    const char *name;            /* source name hint for printing, or NULL */
} IrValueInfo;

typedef enum { IR_FUNC_KERNEL, IR_FUNC_GRID } IrFuncKind;

typedef struct IrConstParam {
    const char *name;
    int64_t value;
} IrConstParam;

struct IrFunc {
    IrFuncKind kind;
    const char *name;
    Loc loc;
    IrBlock body;                /* args = the run-time parameters, in order */
    const char **param_names;    /* body.nargs names */
    IrConstParam *consts;        /* the values of the kernel's const parameters */
    uint32_t nconsts;
    int warps, stages;           /* @launch, or the config; defaults 4 and 2 */
    int ws;                      /* @launch(ws = 1): a producer warpgroup issues the
                                    TMA copies (passes/warpspec.c); default 0 */
    int persistent;              /* @launch(persistent = 1): the launch runs one program
                                    per SM slot, each walking the grid's tiles
                                    (passes/persistent.c); default 0 */
    int overlap;                 /* @launch(overlap = 1): attention's next block's softmax
                                    under this block's P V, a loop of several dots issued
                                    together (passes/rotate.c); default 0 */
    int pingpong;                /* @launch(pingpong = 1), with ws, persistent and 4 warps: two
                                    consumer warpgroups walk alternate tiles, one's main
                                    loop beside the other's epilogue (passes/persistent.c);
                                    default 0 */
    int cluster;                 /* @launch(cluster = 2): each program runs on a cluster of
                                    that many CTAs, its rows split among them, the operands
                                    they share multicast by TMA (passes/cluster.c);
                                    0 or 1: one CTA a program */
    /* Bit k (IrLaunchKey): key k was given by the program, a -D, a config or the IR
     * text (ir_launch_set, the IR parser); a key not given is the schedule pass's to
     * choose (passes/schedule.c). */
    uint32_t launch_set;
    /* Bit k: key k was chosen by passes/schedule.c (printed in the plan: chosen = [...]). */
    uint32_t launch_chosen;
    IrFunc *grid;                /* a kernel's grid(...) as a function: same params,
                                    returns 1..3 i32/i64 scalars; NULL if none */
    /* Bit i: pointer parameter i is 16-byte aligned (pass_specialize, for the variant
     * being compiled); the GPU passes may copy through the tensor-memory accelerator
     * only from such pointers. */
    uint64_t aligned_params;
    IrValueInfo *values;         /* the value table */
    uint32_t nvalues, cap_values;
    struct IrModule *module;
    /* The resource plan (ir/plan.h), written by the last GPU pass (passes/plan.c) and
     * read by codegen and the runtime; NULL before it. */
    struct IrPlan *plan;
};

typedef struct IrModule {
    IrCtx *ctx;
    IrFunc **funcs;
    uint32_t nfuncs, cap_funcs;
    /* What the GPU passes compile for (ir/target.h), set by the compile driver before
     * pass_run_gpu; NULL: the default target. */
    const struct TileTarget *target;
    /* The GPU passes copy dot operands with cp.async only, never by TMA (the checked
     * mode, or the knob tma = 0). */
    bool no_tma;
    /* The settings that change generated code (ir/knobs.def), set by the compile
     * driver; ir_module_create gives every knob its default. */
    TileKnobs knobs;
} IrModule;

/* ---- building --------------------------------------------------------------------- */
IrModule *ir_module_create(IrCtx *c);
/* A function with the given parameter types; their values are body.args. */
IrFunc *ir_func_create(IrModule *m, IrFuncKind kind, const char *name, Loc loc,
                       const IrType *const *param_types, const char *const *param_names,
                       uint32_t nparams);
IrFunc *ir_module_find(const IrModule *m, const char *name);
/* The launch keys every kernel has beside its const parameters (ir/launch.def: warps,
 * stages, ws, persistent, overlap, cluster, pingpong), each an int field of IrFunc that
 * ir_func_create sets to the table's default. ir_launch_find gives a name's key or -1;
 * ir_launch_key says whether `name` is one; ir_launch_value and ir_launch_set read and
 * write a kernel's value by name (set stores what it is given: the checks are
 * ir_launch_check's, the verifier's and the frontend's). ir_launch_check returns NULL
 * if `v` is a valid value of the key, else its rule ("warps must be a power of two from
 * 1 to 32"). ir_launch_shown: whether the printer and the runtime's config line write
 * the key (always for warps and stages, else when not the default). */
typedef enum IrLaunchKey {
#define LAUNCH(NAME, field, def, lo, hi, rule, shown, meaning) IR_LAUNCH_##NAME,
#include "launch.def"
#undef LAUNCH
    IR_NUM_LAUNCH_KEYS
} IrLaunchKey;

typedef struct IrLaunchInfo {
    const char *name;
    int def, min, max;
    bool pow2;            /* only the powers of two of [min, max] */
    bool shown;
    const char *rule;     /* "warps must be a power of two from 1 to 32" */
    const char *meaning;
} IrLaunchInfo;

extern const IrLaunchInfo ir_launch_info[IR_NUM_LAUNCH_KEYS];
/* "warps, stages, ws, persistent, overlap, cluster, pingpong", for messages */
extern const char *const ir_launch_names;

int ir_launch_find(const char *name);
bool ir_launch_key(const char *name);
int ir_launch_get(const IrFunc *f, IrLaunchKey k);
void ir_launch_put(IrFunc *f, IrLaunchKey k, int v);
int64_t ir_launch_value(const IrFunc *f, const char *name);
void ir_launch_set(IrFunc *f, const char *name, int64_t v);
/* Whether key k of f was given (IrFunc.launch_set), not left to its default. */
bool ir_launch_given(const IrFunc *f, IrLaunchKey k);
/* Keys passes/schedule.c chooses when not given: ws, persistent, overlap, pingpong. */
bool ir_launch_chosen_key(IrLaunchKey k);
bool ir_launch_valid(IrLaunchKey k, int64_t v);
const char *ir_launch_check(const char *name, int64_t v);
bool ir_launch_shown(const IrFunc *f, IrLaunchKey k);
/* Warps a program of f runs (its warps key): the one place that knows the default. */
int ir_func_warps(const IrFunc *f);
/* CTAs a program of f runs on: its cluster key, 1 when unset */
int ir_cluster_size(const IrFunc *f);
/* Consumer warpgroups that each run programs of f: 2 for a pingpong kernel (pingpong,
 * ws and persistent, 4 warps a program, a grid clause: passes/persistent.c), else 1.
 * Their shared-memory scratch and TMA-store staging are theirs (x 2). */
int ir_consumer_groups(const IrFunc *f);

/* The hidden parameters that passes/bounds.c appended to a checked kernel: one i64
 * element count `%NAME.n` per pointer parameter NAME, then the report `%bounds.report:
 * *i64` (docs/IR.md, "Checked kernels"). A kernel is checked when its last parameter
 * is `%bounds.report: *i64` (no source parameter has a '.' in its name); 0 for any
 * other function. */
#define IR_BOUNDS_REPORT_NAME "bounds.report"
uint32_t ir_func_hidden_params(const IrFunc *f);
/* The report of a checked kernel: IR_BOUNDS_WORDS i64 words, all 0 until the first
 * out-of-bounds lane sets FLAG to 1 (a compare-and-swap on the GPU) and fills the rest:
 * the pointer parameter's index, the guarded op (IrOpcode), the program id, the lane
 * (row-major index in the tile), the element index, the element count checked against,
 * and the op's source line and column (0: none). docs/CODEGEN.md has the ABI. */
enum {
    IR_BOUNDS_FLAG, IR_BOUNDS_PARAM, IR_BOUNDS_OP, IR_BOUNDS_PID_X, IR_BOUNDS_PID_Y, IR_BOUNDS_PID_Z,
    IR_BOUNDS_LANE, IR_BOUNDS_ELEM, IR_BOUNDS_COUNT, IR_BOUNDS_LINE, IR_BOUNDS_COL,
    IR_BOUNDS_WORDS = 16
};

IrValue ir_value_new(IrFunc *f, const IrType *t, const char *name);
static inline const IrType *ir_value_type(const IrFunc *f, IrValue v) { return f->values[v].type; }
/* A block op's outer pair (ops.def: block_load): block_load, block_store, tma_copy and
 * tma_store may end their block's operands (before a store's value, a copy's i1) with
 * (x, s), two scalar integers of one type, which may be another than the block's: the
 * block is that of the pointer ptr + x * s, computed in their type, with no test on x.
 * The index of x, or 0 where the op has no such pair. */
uint32_t ir_block_outer(const IrFunc *f, const IrOp *op);

/* A builder appends ops at its insertion point (the end of `block`, or before
 * `before` when that is set). */
typedef struct IrBuilder {
    IrFunc *func;
    IrBlock *block;
    IrOp *before;
    Loc loc;                     /* the location given to new ops */
} IrBuilder;

void ir_builder_at_end(IrBuilder *b, IrBlock *blk);
void ir_builder_before(IrBuilder *b, IrOp *op);
/* The general constructor: creates result values of the given types and the given
 * number of (empty, argument-less) regions, and inserts the op. */
IrOp *ir_build(IrBuilder *b, IrOpcode code, const IrValue *operands, uint32_t noperands,
               const IrType *const *result_types, uint32_t nresults, uint32_t nregions);
/* Shorthands for single-result ops. */
IrValue ir_build1(IrBuilder *b, IrOpcode code, const IrType *t, const IrValue *ops, uint32_t n);
IrValue ir_const_int(IrBuilder *b, const IrType *t, int64_t v);   /* scalar or splat tile */
/* `code` (an element-wise binary op) of x and y, of x's type; and the comparison `how`
 * of x and y, i1 of x's shape and layout. The passes that build index math share them. */
IrValue ir_build_binary(IrBuilder *b, IrOpcode code, IrValue x, IrValue y);
IrValue ir_build_cmp(IrBuilder *b, IrCmp how, IrValue x, IrValue y);
IrValue ir_const_float(IrBuilder *b, const IrType *t, double v);
IrValue ir_block_add_arg(IrBlock *blk, const IrType *t, const char *name);

/* ---- editing ---------------------------------------------------------------------- */
void ir_op_remove(IrOp *op);                 /* unlinks; its memory stays in the arena */
void ir_op_insert_before(IrOp *op, IrOp *before);
/* Walks the whole function: one call per replaced value makes a pass quadratic. A pass
 * that replaces values as it walks uses an IrForward instead. */
void ir_replace_all_uses(IrFunc *f, IrValue from, IrValue to);
/* Replacements made during one walk in program order, in linear time: a replaced value
 * is recorded (ir_forward_set) and each op's operands are rewritten when the walk reaches
 * it (ir_forward_operands), before the op is looked at. Every use comes after its
 * definition in that order, so every use is rewritten. Values created during the walk
 * (numbered from `n` on) are never replaced. Create/destroy: ir_forward_init/_free. */
typedef struct IrForward {
    IrValue *to;                 /* a replaced value -> its replacement (else itself) */
    uint32_t n;                  /* the function's values when the walk began */
} IrForward;
void ir_forward_init(IrForward *fw, const IrFunc *f);
void ir_forward_free(IrForward *fw);
void ir_forward_set(IrForward *fw, IrValue from, IrValue to);
void ir_forward_operands(const IrForward *fw, IrOp *op);
/* A copy of op (of function src; no regions, at most 32 operands and 4 results) at the
 * builder: each operand v is map[v] where v < nmap and map[v] is not IR_NO_VALUE, else v
 * itself; map[result] becomes the copy's result. The passes that clone loop bodies and
 * grid clauses (warpspec.c, persistent.c) share it. */
IrOp *ir_clone_op(IrBuilder *b, const IrFunc *src, const IrOp *op, IrValue *map, uint32_t nmap);
/* Calls fn on every op of the block and, depth-first, of its regions (pre-order).
 * fn may not remove the op it is given; collect first, then remove. */
void ir_walk(IrBlock *blk, void (*fn)(IrOp *op, void *ud), void *ud);
/* The ops of blk with opcode `code`, nested regions included (a loop's dots: the ring's
 * schedule in passes/shared.c and codegen's prefetch read the same count). */
int ir_count_ops(const IrBlock *blk, IrOpcode code);
/* v is computed inside blk: by an op of blk or of a region nested in it, or is an
 * argument of such a block. */
bool ir_value_defined_in(const IrFunc *f, IrValue v, const IrBlock *blk);
/* Number of uses of every value of f (array of f->nvalues, malloc'd by the callee). */
uint32_t *ir_use_counts(const IrFunc *f);

/* ---- text, checks ----------------------------------------------------------------- */
void ir_print_module(const IrModule *m, FILE *out);
void ir_print_func(const IrFunc *f, FILE *out);
void ir_print_op(const IrFunc *f, const IrOp *op, FILE *out);
/* Parses textual IR (the printer's output). Errors go to the ctx's diagnostics with
 * locations in `src`; returns NULL if there were any. */
IrModule *ir_parse(IrCtx *c, const Source *src);
/* Checks every rule of every op; reports each violation to the ctx's diagnostics and
 * returns false if there was one. */
bool ir_verify_module(const IrModule *m);
bool ir_verify_func(const IrFunc *f);

#endif
