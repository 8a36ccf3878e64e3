/* Shared state of the lowering to Tile IR (lower*.c, consteval.c).
 *
 * Sema and lowering are one walk: every expression is type- and shape-checked as it
 * is turned into IR, so a value always has its IR type at hand. Values that failed to
 * check are "error values" (t == NULL): every operation on one yields another silently,
 * so one mistake gives one diagnostic. Literals stay unmaterialized (lit != LIT_NONE)
 * until an operator decides their type: a literal takes the type of the other operand. */
#ifndef TILE_FRONTEND_LOWER_INTERNAL_H
#define TILE_FRONTEND_LOWER_INTERNAL_H

#include <string.h>
#include "frontend/frontend.h"

enum { LIT_NONE, LIT_INT, LIT_FLOAT };

typedef struct Val {
    const IrType *t;     /* NULL: an error already reported */
    IrValue v;           /* IR_NO_VALUE while an unmaterialized literal */
    uint8_t lit;         /* LIT_INT / LIT_FLOAT: a literal, t its default type */
    bool big;            /* LIT_INT above INT64_MAX: i holds the u64 bits */
    int64_t i;
    double f;
    Loc loc;             /* where the literal was written */
} Val;

typedef enum { BIND_LET, BIND_VAR, BIND_PARAM, BIND_CONST, BIND_LOOP } BindKind;

typedef struct Binding {
    const char *name;
    Loc loc;
    BindKind kind;
    Val val;
    bool has_cval;       /* a compile-time integer (const param, let of one) */
    bool cval_error;     /* its compile-time value failed with an error already reported */
    int64_t cval;
    int64_t shadowed;    /* the binding of the same name below this one, or -1 */
    uint32_t slot;       /* the name's slot in the scope's name table */
} Binding;

/* Names in scope, for lookups in constant time: one slot per distinct name, holding
 * the index of its innermost binding (-1: none). Bindings chain to the ones they
 * shadow, so popping a scope restores the slots. */
typedef struct NameSlot {
    const char *name;    /* NULL: empty */
    int64_t top;
} NameSlot;
typedef struct NameTable {
    NameSlot *slots;
    size_t cap, len;     /* cap a power of two; len used slots */
} NameTable;

typedef struct Lower {
    IrCtx *ctx;
    Arena *arena;
    DiagList *diags;
    const AstProgram *prog;
    const FeOptions *opt;
    IrModule *mod;
    IrBuilder b;
    VEC(Binding) scope;
    NameTable names;             /* the innermost binding of each name in scope */
    NameTable items;             /* the first item of each name (top: its index) */
    size_t scope_base;           /* lookups stop here: a fn body sees only its params */
    const AstItem *fn_stack[FE_MAX_INSTANTIATION_DEPTH + 1];
    int depth;                   /* fns being inlined */
    bool in_grid;                /* lowering a kernel's grid(...) */
    bool returned;               /* the current block ended with `return;` */
    int64_t unrolled;            /* static_range iterations lowered so far (all loops) */
} Lower;

/* ---- lower.c: diagnostics, scopes, types ------------------------------------------ */
void lw_error(Lower *L, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void lw_warning(Lower *L, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
Binding *lw_lookup(Lower *L, const char *name);
size_t lw_bind(Lower *L, const char *name, Loc loc, BindKind kind, Val v);
size_t lw_push_binding(Lower *L, Binding bd);
void lw_scope_pop(Lower *L, size_t mark);
const AstItem *lw_find_item(const Lower *L, const char *name);
/* Levenshtein distance, for "did you mean" hints. */
int lw_edit_distance(const char *a, const char *b);
/* How far a misspelling may be from a name we suggest: 1 edit for names of up to 3
 * letters, else 2 (so "foo" suggests nothing, "lod" suggests "load", "maks" "mask"). */
static inline int lw_suggest_limit(const char *name) { return strlen(name) <= 3 ? 1 : 2; }
/* A scalar type written in the source (`f32`, `bool`, `*bf16`); NULL with an error. */
const IrType *lw_type(Lower *L, const AstType *t);
IrElem lw_dtype_of(Lower *L, const AstExpr *e);      /* dtype(e); IR_NUM_ELEMS after an error */
const IrType *lw_scalar(Lower *L, IrElem e);
const IrType *lw_like(Lower *L, const IrType *shape_of, IrElem e);
/* "f32[64, 32]" / "[64, 32]" into a static-lifetime arena string. */
const char *lw_tstr(Lower *L, const IrType *t);
const char *lw_shape_str(Lower *L, int rank, const int32_t *shape);
/* Whether v (the bits of a u64 when big) is a value of integer type e. */
bool lw_int_fits(int64_t v, bool big, IrElem e);
/* Checks a tile shape (rank 1..IR_MAX_RANK, powers of two, size limit); errors at loc. */
bool lw_check_shape(Lower *L, Loc loc, int rank, const int32_t *shape);

/* ---- consteval.c: compile-time integers (and intops.h) --------------------------------- */
#include "frontend/intops.h"
/* CE_OK: *out is the exact value; CE_NONE: not a compile-time integer (the caller says
 * which use needed one); CE_ERROR: overflow, division by zero or a bad shift, already
 * reported at the operator (the caller adds nothing). */
typedef enum { CE_NONE, CE_OK, CE_ERROR } CeStatus;
CeStatus ce_eval(Lower *L, const AstExpr *e, int64_t *out);
/* As ce_eval, in the types the expression has at run time: an intermediate outside
 * its type (i32 for `B * B` with an i32 B) is an error, since the run-time value of
 * a let would wrap where the compile-time value does not. */
CeStatus ce_eval_typed(Lower *L, const AstExpr *e, int64_t *out);
/* A shape `[a, b]` of compile-time integers, checked; errors name `what`. */
bool ce_shape(Lower *L, const AstExpr *e, const char *what, int *rank, int32_t *shape);

/* ---- lower_expr.c ------------------------------------------------------------------- */
extern const Val VERR;
extern const Val VVOID;          /* what store, assert, print and value-less fns give */
/* An expression whose value is used: a call giving no value is an error here. */
Val lower_expr(Lower *L, const AstExpr *e);
/* An expression statement: any expression, VVOID allowed. */
Val lower_expr_stmt(Lower *L, const AstExpr *e);
IrValue lw_ir(Lower *L, Val *v);                 /* materializes a literal */
Val lw_val(Lower *L, IrValue v);
Val lw_convert(Lower *L, Val v, IrElem e);        /* literal: a constant of e */
/* The common element type of vs (literals take the others' type; pointers join only
 * pointers of their type); false with an error at loc when a literal does not fit. */
bool lw_join_elems(Lower *L, Val *vs, int n, Loc loc, IrElem *out);
/* An operand that differs from vs[*ptr], the first pointer among vs, or -1 when vs are
 * all numbers or all pointers of one type. */
int lw_pointer_mismatch(const Val *vs, int n, int *ptr);
/* "f32[64]" for a value, its default type ("i32") for a literal. */
const char *lw_val_str(Lower *L, const Val *v);
IrElem lw_promote(IrElem a, IrElem b);
bool lw_shape_join(const IrType *a, const IrType *b, int *rank, int32_t *shape);
Val lw_broadcast_to(Lower *L, Val v, int rank, const int32_t *shape);
/* Broadcasts v to shape_of's shape one way; errors name `what`. */
Val lw_broadcast_like(Lower *L, Val v, const IrType *shape_of, Loc loc, const char *what);
/* Promotes and broadcasts n values together (where, fma, minimum). */
bool lw_unify(Lower *L, Val *vs, int n, Loc loc, const char *what);
/* A binary operator (AstBinOp) on two values; errors at loc (the operator). */
Val lw_binop(Lower *L, int op, Val a, Val b, Loc loc);
Val lw_build_unary(Lower *L, IrOpcode code, Val a);
Val lw_build_binary(Lower *L, IrOpcode code, const IrType *t, Val a, Val b);

/* ---- lower_builtins.c ------------------------------------------------------------------ */
/* Lowers a call of a built-in; false if `name` is no built-in. */
bool lower_builtin(Lower *L, const AstExpr *call, Val *out);
bool lw_is_builtin(const char *name);
/* A call of a built-in that may give several values (max with return_indices, reduce
 * and associative_scan over a tuple) in `let (a, b) = ...`: their count (-1 after an
 * error), or -2 if `call` is no such built-in. */
int lower_builtin_results(Lower *L, const AstExpr *call, Val *out, int max);
const char *lw_closest_builtin(const char *name);

/* ---- lower_stmt.c ------------------------------------------------------------------------ */
void lower_block(Lower *L, const AstStmt *blk);
/* if c { a } else { b } as an expression (scalars). */
Val lower_if_expr(Lower *L, const AstExpr *e);
/* Inlines fn `fn` at call; writes up to max results; returns the count or -1. */
int lower_fn_call(Lower *L, const AstExpr *call, const AstItem *fn, Val *out, int max);
/* Inlines fn with the values argv as its arguments (a combine fn); as lower_fn_call. */
int lw_inline_fn(Lower *L, const AstItem *fn, Loc loc, const Val *argv, uint32_t nargs, Val *out, int max);

#endif
