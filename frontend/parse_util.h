/* Shared state of the lexer (lexer.l) and the parser (parser.y), and the node
 * constructors the grammar actions call.
 *
 * Everything the parser builds lives in the compilation's arena, lists included, so
 * that aborting a parse half-way (nesting limit, bison's stack limit) leaks nothing.
 * The constructors compute the depth of every expression and statement tree and refuse
 * trees deeper than FE_MAX_NESTING: later stages walk the AST recursively. */
#ifndef TILE_FRONTEND_PARSE_UTIL_H
#define TILE_FRONTEND_PARSE_UTIL_H

#include <stdbool.h>
#include <stdint.h>

#include "ast.h"

/* A growable array of pointers in the arena (growth copies; the old array is waste,
 * at most as large as the new one). */
typedef struct FeList {
    void **items;
    uint32_t len, cap;
} FeList;

/* One argument of a call or an attribute: `value` or `name = value`. */
typedef struct FeArg {
    const char *name;    /* NULL when positional */
    Loc name_loc;
    AstExpr *value;
} FeArg;

typedef struct ParseCtx {
    Arena *arena;
    const Source *src;
    DiagList *diags;
    /* lexer */
    uint32_t line, col;  /* position of the next byte to scan */
    int depth;           /* open ( [ { */
    int brace_depth;     /* open { only: tells "inside a block" */
    Loc comment_start;
    bool fatal;          /* nesting limit hit: stop parsing, report nothing more */
    /* the lookahead token and the one before it, for syntax error messages */
    uint32_t ntokens;    /* tokens returned so far */
    uint32_t quiet_tok;  /* no syntax error at this token: a lexical error explains it */
    int tok, prev_tok;
    const char *tok_text;
    size_t tok_len;
    Loc prev_end;        /* just past the token before the lookahead */
    Loc tok_end;
    /* parser */
    FeList *items;       /* AstItem* */
} ParseCtx;

void fe_ctx_init(ParseCtx *c, Arena *a, const Source *src, DiagList *diags);
Loc fe_loc(const ParseCtx *c, uint32_t line, uint32_t col);
void fe_err(ParseCtx *c, Loc loc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Reports the nesting limit once and makes the rest of the parse silent. */
void fe_too_deep(ParseCtx *c, Loc loc);

FeList *fe_list(ParseCtx *c);
FeList *fe_push(ParseCtx *c, FeList *l, void *x);   /* l may be NULL; returns l */

/* Expressions; each returns NULL (after reporting) when the tree gets too deep. */
AstExpr *fe_leaf(ParseCtx *c, AstExprKind k, Loc loc);
AstExpr *fe_name(ParseCtx *c, const char *name, Loc loc);
AstExpr *fe_unary(ParseCtx *c, int op, AstExpr *x, Loc loc);
AstExpr *fe_binary(ParseCtx *c, AstBinOp op, AstExpr *l, AstExpr *r, Loc loc);
AstExpr *fe_cast(ParseCtx *c, AstExpr *x, AstType *t, Loc loc);
/* CALL, INDEX, LIST, MAP, TUPLE over a list of FeArg* (CALL, MAP) or AstExpr*. */
AstExpr *fe_call(ParseCtx *c, const char *name, FeList *args, Loc loc);
AstExpr *fe_map(ParseCtx *c, FeList *entries, Loc loc);
AstExpr *fe_exprs(ParseCtx *c, AstExprKind k, AstExpr *lhs, FeList *elems, Loc loc);
FeArg *fe_arg(ParseCtx *c, const char *name, Loc name_loc, AstExpr *value);

/* Types. fe_scalar_type reports "unknown type" and still returns a node. */
AstType *fe_scalar_type(ParseCtx *c, const char *name, Loc loc);
AstType *fe_ptr_type(ParseCtx *c, const char *name, Loc star, Loc name_loc);
AstType *fe_dtype_type(ParseCtx *c, const char *name, AstExpr *of, Loc loc);   /* as dtype(e) */
AstType *fe_tensor_type(ParseCtx *c, const char *name, FeList *dims, Loc loc);
AstType *fe_tuple_type(ParseCtx *c, FeList *elems, Loc loc);

/* Statements; NULL (after reporting) when too deep. */
AstStmt *fe_stmt(ParseCtx *c, AstStmtKind k, Loc loc);
/* LET / VAR over a list of FeArg* (name and location; value unused). */
AstStmt *fe_let(ParseCtx *c, AstStmtKind k, FeList *names, AstExpr *v, Loc loc);
AstStmt *fe_assign(ParseCtx *c, const char *name, Loc name_loc, int op, AstExpr *v);
AstStmt *fe_for(ParseCtx *c, const char *var, Loc var_loc, FeList *range, Loc range_loc,
                AstStmt *body, Loc loc);
/* for VAR in static_range(ARGS) BODY (unrolled); fname must be static_range. */
AstStmt *fe_static_for(ParseCtx *c, const char *fname, Loc fname_loc, const char *var, Loc var_loc,
                       FeList *range, AstStmt *body, Loc loc);
/* if cond { a } else { b } as an expression. */
AstExpr *fe_if_expr(ParseCtx *c, AstExpr *cond, AstExpr *a, AstExpr *b, Loc loc);
AstStmt *fe_if(ParseCtx *c, AstExpr *cond, AstStmt *then, AstStmt *els, Loc loc);
AstStmt *fe_while(ParseCtx *c, AstExpr *cond, AstStmt *body, Loc loc);
AstStmt *fe_block(ParseCtx *c, FeList *stmts, Loc loc);

/* Items. */
AstParam *fe_param(ParseCtx *c, bool is_const, const char *name, Loc loc, AstType *t,
                   AstExpr *def);
AstAttr *fe_attr(ParseCtx *c, const char *name, FeList *args, Loc loc);
AstItem *fe_item(ParseCtx *c, AstItemKind k, Loc loc, const char *name, Loc name_loc,
                 FeList *attrs, FeList *params);
void fe_set_grid(ParseCtx *c, AstItem *it, const char *kw, Loc kw_loc, FeList *exprs);

#endif
