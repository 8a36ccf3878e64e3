/* The abstract syntax tree of a .tile file, as the parser builds it.
 *
 * Every node lives in the compilation's arena and carries the location of its first
 * token (for binary operators: the operator). Lists are arena arrays with a count.
 * The parser checks only syntax; names, types and shapes are checked by sema while
 * lowering to Tile IR (frontend/lower.c) and by the graph checker (frontend/graph.c). */
#ifndef TILE_FRONTEND_AST_H
#define TILE_FRONTEND_AST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../ir/arena.h"
#include "../ir/diag.h"

typedef struct AstExpr AstExpr;
typedef struct AstStmt AstStmt;

/* ---- types as written ------------------------------------------------------------ */
typedef enum {
    AST_TYPE_SCALAR,     /* i32, bf16, bool, ...            name = "i32"          */
    AST_TYPE_PTR,        /* *T                               name = pointee name  */
    AST_TYPE_TENSOR,     /* T[d0, d1, ...] (graphs)          name = element name  */
    AST_TYPE_TUPLE,      /* (T1, T2) in a return type        elems                */
    AST_TYPE_OF,         /* dtype(e) after `as`: e's element type   of = e       */
} AstTypeKind;

typedef struct AstType {
    AstTypeKind kind;
    Loc loc;
    const char *name;
    AstExpr **dims;      /* AST_TYPE_TENSOR: each an INT or a NAME */
    uint32_t ndims;
    struct AstType **elems;   /* AST_TYPE_TUPLE */
    uint32_t nelems;
    AstExpr *of;              /* AST_TYPE_OF (never evaluated) */
} AstType;

/* ---- expressions ------------------------------------------------------------------ */
typedef enum {
    AST_INT,             /* ival (literal value as written, up to u64 range)        */
    AST_FLOAT,           /* fval; inf and nan too                                    */
    AST_BOOL,            /* ival 0/1                                                 */
    AST_NONE,            /* None (only inside an index)                              */
    AST_SLICE,           /* ':' inside an index                                      */
    AST_STRING,          /* sval (escapes resolved)                                  */
    AST_NAME,            /* name                                                     */
    AST_UNARY,           /* op: '-', '!', '~'; lhs                                   */
    AST_BINARY,          /* op: an AstBinOp; lhs, rhs                                */
    AST_CAST,            /* lhs as type                                              */
    AST_CALL,            /* name(args...); args may be named (arg_names[i] != NULL)  */
    AST_INDEX,           /* lhs[args...]; each arg AST_SLICE or AST_NONE             */
    AST_LIST,            /* [args...]                                                */
    AST_MAP,             /* {arg_names[i]: args[i], ...} (attributes only)          */
    AST_TUPLE,           /* (a, b) in a return statement                             */
    AST_IF_EXPR,         /* if args[0] { args[1] } else { args[2] } (scalars)         */
} AstExprKind;

typedef enum {
    AST_ADD, AST_SUB, AST_MUL, AST_DIV, AST_REM, AST_MATMUL, /* @ (graphs) */
    AST_SHL, AST_SHR, AST_BAND, AST_BXOR, AST_BOR,
    AST_EQ, AST_NE, AST_LT, AST_LE, AST_GT, AST_GE,
    AST_LAND, AST_LOR,
} AstBinOp;
extern const char *const ast_binop_text[];   /* "+", "-", ... indexed by AstBinOp */

struct AstExpr {
    AstExprKind kind;
    Loc loc;
    int op;              /* AstBinOp for BINARY; the character for UNARY */
    uint64_t ival;
    double fval;
    const char *sval;    /* STRING */
    const char *name;    /* NAME, CALL */
    AstExpr *lhs, *rhs;
    AstType *type;       /* CAST */
    AstExpr **args;      /* CALL, INDEX, LIST, MAP, TUPLE */
    const char **arg_names; /* CALL (named arguments), MAP (keys); NULL entries = positional */
    Loc *arg_name_locs;  /* locations of the names in arg_names (NULL-safe) */
    uint32_t nargs;
};

/* ---- statements --------------------------------------------------------------------- */
typedef enum {
    AST_LET,             /* let names[0] = value;  let (names...) = value;           */
    AST_VAR,             /* var names[0] = value;                                    */
    AST_ASSIGN,          /* names[0] op= value; op is 0 for '=', else '+','-','*','/'*/
    AST_FOR,             /* for names[0] in range(args[0..nargs)) body; static_range
                            when unrolled                                            */
    AST_WHILE,           /* while cond body                                          */
    AST_IF,              /* if cond body else else_body (a BLOCK or an IF), may be NULL */
    AST_RETURN,          /* return value?;                                           */
    AST_EXPR,            /* value;                                                   */
    AST_BLOCK,           /* { stmts }                                                */
} AstStmtKind;

struct AstStmt {
    AstStmtKind kind;
    Loc loc;
    const char **names;
    Loc *name_locs;
    uint32_t nnames;
    bool destructure;    /* LET with parentheses */
    bool unrolled;       /* FOR over static_range: unrolled at compile time */
    int op;
    AstExpr *value;      /* LET VAR ASSIGN RETURN EXPR */
    AstExpr *cond;       /* WHILE IF */
    AstExpr **args;      /* FOR: range arguments (2 or 3) */
    uint32_t nargs;
    AstStmt *body;       /* FOR WHILE IF: a BLOCK */
    AstStmt *else_body;  /* IF */
    AstStmt **stmts;     /* BLOCK */
    uint32_t nstmts;
};

/* ---- items ---------------------------------------------------------------------------- */
typedef struct AstParam {
    const char *name;
    Loc loc;
    bool is_const;       /* const NAME: T [= default] */
    AstType *type;       /* NULL for a generic fn parameter */
    AstExpr *default_value;
} AstParam;

typedef struct AstAttr {  /* @name(args) */
    const char *name;
    Loc loc;
    AstExpr **args;
    const char **arg_names;
    Loc *arg_name_locs;
    uint32_t nargs;
} AstAttr;

typedef enum { AST_KERNEL, AST_FN, AST_GRAPH } AstItemKind;

typedef struct AstItem {
    AstItemKind kind;
    Loc loc;             /* the keyword */
    const char *name;
    Loc name_loc;
    AstAttr *attrs;
    uint32_t nattrs;
    AstParam *params;
    uint32_t nparams;
    AstType *ret;        /* fn/graph return type, or NULL */
    AstExpr **grid;      /* kernel grid(...) expressions, or NULL */
    uint32_t ngrid;
    AstStmt *body;       /* a BLOCK */
} AstItem;

typedef struct AstProgram {
    const Source *src;
    AstItem *items;
    uint32_t nitems;
} AstProgram;

/* Parses src; every syntax error goes to diags (several per run where the parser can
 * recover). Returns the program (partial if there were errors), never NULL unless
 * out of memory. */
AstProgram *fe_parse(Arena *a, const Source *src, DiagList *diags);
/* Prints the tokens one per line: "line:col KIND text". */
bool fe_dump_tokens(const Source *src, FILE *out, DiagList *diags);
/* Prints the AST as an indented S-expression (stable; used by golden tests). */
void ast_print(const AstProgram *p, FILE *out);

/* Limits that keep malformed or hostile input from exhausting the compiler. */
#define FE_MAX_NESTING 256       /* nested expressions, blocks, brackets */
#define FE_MAX_CHAIN 8192        /* operators in a left-associative chain (tree height) */
#define FE_MAX_INSTANTIATION_DEPTH 64
#define FE_MAX_KERNEL_PARAMS 64  /* run-time parameters of a kernel: TRT_MAX_ARGS */

#endif
