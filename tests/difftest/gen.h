/* The differential tester's program generator: random, well-typed .tile kernels.
 *
 * A program is kept as a structured representation (expression nodes in one pool,
 * statements that refer to them) so that the reducer can edit it and print it again.
 * The same seed gives the same program text. Every node is analysed bottom-up
 * (dt_analyze): an interval of its values, an absolute error bound against the
 * interpreter on the GPU (0 where both sides must agree bit for bit), and whether it
 * is valid at all (no undefined behaviour, no discontinuous op on an inexact value).
 * docs/DIFFTEST.md explains the rules. */
#ifndef TILE_DIFFTEST_GEN_H
#define TILE_DIFFTEST_GEN_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ir/ir.h"

enum {
    DT_MAX_NODES = 1536,
    DT_MAX_STMTS = 32,
    DT_MAX_BUFS = 24,
    DT_NIN = 4096,           /* elements of every input buffer (a power of two) */
    DT_MAX_RANK = 5,         /* IR_MAX_RANK: tiles of rank 4 and 5 get small extents */
};

typedef struct DtType {
    IrElem elem;             /* never IR_PTR */
    int rank;                /* 0: scalar */
    int shape[DT_MAX_RANK];
} DtType;

typedef struct DtNode {
    int form;                /* row of dt_forms */
    DtType t;
    int kid[3], nkids;
    int64_t i, j;            /* per form: literal, axis, position, statement, buffer */
    double f;                /* float literal */
    /* filled by dt_analyze */
    double lo, hi, err;      /* value interval; error bound against the GPU */
    bool exact, valid;
} DtNode;

typedef enum { DT_LET, DT_FOR, DT_STORE, DT_ATOMIC } DtStmtKind;

typedef struct DtStmt {
    DtStmtKind kind;
    int node;                /* LET: value; FOR: init; STORE/ATOMIC: value */
    int body;                /* FOR: the value combined into the var each trip */
    int mask;                /* STORE/ATOMIC: mask node, or -1 */
    int offs;                /* ATOMIC: offset node */
    int buf;                 /* STORE/ATOMIC: buffer */
    int op;                  /* FOR: DtCombine; ATOMIC: row of dt_atomics */
    int trips;               /* FOR */
    int perm;                /* STORE: axis order of the offsets (0: row-major) */
    int style;               /* FOR: DtLoopStyle, how the trips are written */
    bool rm_form;            /* STORE: offsets written as pid * BM + arange rows */
    bool dead;               /* dropped by the reducer */
    /* filled by dt_analyze (LET/FOR): the statement's value */
    double lo, hi, err;
    bool exact, valid;
} DtStmt;

/* FOR: range(0, trips), static_range(0, trips) (unrolled; the loop variable printed as
 * `i as i32`, since an unrolled one is a literal), range(trips - 1, -1, -1) (the same
 * values counting down). */
typedef enum { DT_LOOP_RANGE, DT_LOOP_STATIC, DT_LOOP_DOWN, DT_NLOOP } DtLoopStyle;
typedef enum { DT_COMB_ADD, DT_COMB_MAX, DT_COMB_MIN, DT_COMB_XOR, DT_COMB_SET, DT_NCOMB } DtCombine;
typedef enum { DT_BUF_IN, DT_BUF_OUT, DT_BUF_ACC } DtBufRole;

typedef struct DtBuf {
    IrElem elem;
    int64_t count;
    DtBufRole role;          /* IN: random data; OUT: poison; ACC: random, updated by atomics */
    char name[16];
} DtBuf;

typedef struct DtProgram {
    uint64_t seed;
    DtNode nodes[DT_MAX_NODES];
    int nnodes;
    DtStmt stmts[DT_MAX_STMTS];
    int nstmts;
    DtBuf bufs[DT_MAX_BUFS];
    int nbufs;
    int grid[3], ngrid, warps;
    bool persistent;         /* @launch(persistent = true): the GPU-level IR walks the grid */
    int32_t L, M;            /* run-time scalar parameters */
    double fs;
} DtProgram;

/* ---- the table of forms ------------------------------------------------------------- */
typedef struct DtGen DtGen;
typedef struct DtForm DtForm;
typedef int (*DtGenFn)(DtGen *g, const DtForm *f, DtType t, int depth);

/* One row per surface form the generator writes: an operator, a built-in, a leaf.
 * `elems`: the result element types it can give (bit 1 << IrElem); `gen` builds a node
 * of the asked type or returns -1 when the form does not fit (shape, rank). */
struct DtForm {
    const char *text;        /* as written in .tile: "+", "exp", "sum" */
    int kind;                /* DtKind: how it is generated, printed, analysed */
    unsigned elems;
    int weight;              /* relative frequency among the forms that fit */
    IrOpcode op;             /* the Tile IR op it reaches (coverage, --inject-bug) */
    DtGenFn gen;
};
extern const DtForm dt_forms[];
extern const int dt_nforms;

/* ---- generating, analysing, printing ------------------------------------------------ */
/* Fills *p with the program of `seed`. */
void dt_generate(DtProgram *p, uint64_t seed);
/* Recomputes every node's and statement's analysis; returns whether the live program
 * is valid (no UB, every discontinuous op on exact values, ranges finite where
 * rounding differences could grow). */
bool dt_analyze(DtProgram *p);
/* The live statements: the stores and atomics not dropped, and what they use. */
void dt_live(const DtProgram *p, bool *live_stmt, bool *live_buf);
/* The kernel's source text (malloc'd). */
char *dt_print(const DtProgram *p);
/* The absolute tolerance of buffer b against the GPU (0: bit for bit). */
double dt_buf_tolerance(const DtProgram *p, int b);
/* One rounding of element type e, relative (twice the unit roundoff; 0 for integers). */
double dt_ulp(IrElem e);

/* ---- reducing -------------------------------------------------------------------- */
/* Whether a candidate still fails the way the original did. */
typedef bool (*DtOracle)(const DtProgram *p, void *ud);
/* Shrinks p in place by delta debugging over its structure (drops stores, loops and
 * masks; replaces expressions by their operands or constants; shrinks the grid and the
 * warps) while `still_fails` holds and the program stays valid. At most max_tests
 * oracle calls and max_seconds; returns the number of calls. */
int dt_reduce(DtProgram *p, DtOracle still_fails, void *ud, int max_tests, double max_seconds);

/* A growable string. */
typedef struct DtStr {
    char *s;
    size_t len, cap;
} DtStr;
void dt_str_add(DtStr *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Seconds on the monotonic clock (reduce.c), for time limits. */
double dt_now_s(void);

#endif
