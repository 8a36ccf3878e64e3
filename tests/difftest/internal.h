/* Shared between the generator's files (gen.c, analyse.c, print.c, reduce.c). */
#ifndef TILE_DIFFTEST_INTERNAL_H
#define TILE_DIFFTEST_INTERNAL_H

#include "gen.h"

#define DT_BIT(e) (1u << (e))
#define DT_INTS (DT_BIT(IR_I8) | DT_BIT(IR_I16) | DT_BIT(IR_I32) | DT_BIT(IR_I64) | DT_BIT(IR_U8) | \
                 DT_BIT(IR_U16) | DT_BIT(IR_U32) | DT_BIT(IR_U64))
#define DT_FLOATS (DT_BIT(IR_F16) | DT_BIT(IR_BF16) | DT_BIT(IR_F32) | DT_BIT(IR_F64) | \
                   DT_BIT(IR_F8E4M3) | DT_BIT(IR_F8E5M2))
#define DT_NUM (DT_INTS | DT_FLOATS)

/* How a form is generated, printed and analysed. Leaves come last. */
enum {
    K_ARITH, K_DIV, K_REM, K_BITWISE, K_SHIFT, K_CMP, K_LOGIC, K_NEG, K_NOT, K_LNOT,
    K_ABS, K_MATH1, K_MINMAX, K_POW, K_FMA, K_WHERE, K_CAST, K_REDUCE, K_SCAN,
    K_EXPAND, K_TRANS, K_RESHAPE, K_BROADCAST, K_DOT, K_RAND,
    K_CLAMP, K_UMULHI, K_BITCAST,   /* issue 13: clamp(x, lo, hi), umulhi(a, b), bitcast(x, T) */
    K_IFX,                          /* (if c { a } else { b }), c a scalar i1 */
    K_COMBINE,             /* reduce/associative_scan: i axis; j DT_COMB_FN bits, DT_OPT_REVERSE */
    K_FIRST_LEAF,
    K_LOAD = K_FIRST_LEAF, /* kid 0 offsets, kid 1 mask; i buffer, j other given, f other */
    K_AXIS,                /* i axis; j: program_id(0) * s + arange(0, s) */
    K_PID,                 /* i axis */
    K_PLIN,                /* the linear program id */
    K_PARAM,               /* i: 0 L, 1 M, 2 fs */
    K_LOOPVAR,             /* i: the FOR statement */
    K_CONST,               /* f: value; full([shape], f, T) */
    K_REF,                 /* i: the LET/FOR statement */
    K_LIT,                 /* f: value; an untyped literal beside a typed operand */
    K_BLOCK,               /* load_block: i buffer, j the seed of its tensor (dt_block_of) */
};

/* A block load's tensor, from its node's seed (so the printer and the analysis agree
 * without storing it): per axis of the block the tensor's extent, stride and the
 * block's offset (negative or past the end at times: zeros), and whether axis 0's
 * offset adds program_id(0). Every element of the tensor lies in the buffer. */
typedef struct DtBlock {
    int64_t dims[IR_MAX_RANK], strides[IR_MAX_RANK], offs[IR_MAX_RANK];
    bool pid;
} DtBlock;
DtBlock dt_block_of(DtType t, int64_t seed);

/* DtNode.j of K_REDUCE and K_SCAN: options printed as keyword arguments that keep the
 * value (the axis counted from the end; keep_dims with a reshape back; no axis for a
 * rank-1 reduction; dtype = the type it widens to anyway; propagate_nan = false), and
 * reverse scans. For K_COMBINE, the low bits pick the combine fn (print.c's dt_fns). */
enum {
    DT_OPT_NEG = 1, DT_OPT_KEEP = 2, DT_OPT_NOAXIS = 4, DT_OPT_DTYPE = 8, DT_OPT_NONAN = 16,
    DT_OPT_REVERSE = 32, DT_COMB_FN = 7
};
enum { DT_FN_ADD, DT_FN_MAX, DT_FN_MIN, DT_FN_XOR, DT_FN_FIRST, DT_NFNS };

struct DtGen {
    uint64_t rng;
    DtProgram *p;
    DtType main;           /* the program's main shape */
    int loop_stmt;         /* the FOR whose body is being generated, or -1 */
    int load_depth;        /* loads nested in load offsets */
    int programs;          /* grid[0] * grid[1] * grid[2] */
    int max_numel;         /* the largest tile: 512 elements per warp */
};

/* Atomic statements: one row per op (gen.c). */
typedef struct DtAtomic {
    const char *text;
    unsigned elems;          /* the element types it takes */
} DtAtomic;
extern const DtAtomic dt_atomics[];
extern const int dt_natomics;

int dt_form_find(int kind, const char *text);
int dt_gen_expr(DtGen *g, DtType t, int depth);
int dt_gen_mask(DtGen *g, DtType t, int depth);
int dt_gen_leaf_kind(DtGen *g, int kind, DtType t);

int64_t dt_numel(DtType t);
DtType dt_bcast(DtType a, DtType b);       /* numpy broadcast of shapes; a's element */
IrElem dt_promote(IrElem a, IrElem b);     /* LANGUAGE-REFERENCE.md "Promotion" */
IrElem dt_sum_elem(IrElem e);              /* sum/cumsum's result element */
/* Analyses node n (its kids already analysed); returns n's validity. */
bool dt_check_node(DtProgram *p, int n);
/* Analyses statement s (its nodes already analysed); returns its validity. */
bool dt_check_stmt(DtProgram *p, int s);

#endif
