/* The grammar of .tile files (LANGUAGE.md), building the AST of ast.h.
 *
 * A pure bison parser with LAC, so the tokens listed in "expected ..." messages are
 * exact. Operator precedence comes from the %left table below, which is LANGUAGE.md
 * section 2 read bottom-up. Syntax errors are reported in words (yyreport_syntax_error)
 * and the parser recovers at three levels: a statement (skip to ';'), a block (skip to
 * '}'), an item (skip to the next 'kernel', 'fn', 'graph' or attribute).
 *
 * Bounds: the lexer stops at FE_MAX_NESTING open brackets, the node constructors at
 * trees deeper than that (long unary chains, `else if` chains), and bison's own stack
 * at YYMAXDEPTH; all three end the parse with the same "nesting is too deep" error. */
%define api.pure full
%define api.prefix {fe_yy}
%define api.location.type {Loc}
%define parse.error custom
%define parse.lac full
%locations
%lex-param {void *scanner}
%parse-param {void *scanner} {ParseCtx *ctx}

%code requires {
#include "frontend/parse_util.h"
}

%code provides {
int fe_yylex(FE_YYSTYPE *yylval_param, FE_YYLTYPE *yylloc_param, void *yyscanner);
}

%code {
#include <math.h>
#include <string.h>

/* A node's location is its first token's (actions override it where the AST wants
 * the operator's). */
#define YYLLOC_DEFAULT(cur, rhs, n) ((cur) = (n) ? YYRHSLOC(rhs, 1) : YYRHSLOC(rhs, 0))
/* Bison's stacks live on the heap and stop growing here. Input within the other
 * limits needs a few entries per level; only thousands of pending unary operators
 * get this far. */
#define YYMAXDEPTH 20000

/* Builds a node; a NULL means the nesting limit was hit and reported: stop. */
#define TRY(lhs, e) do { if (!((lhs) = (e))) YYABORT; } while (0)

static void fe_yyerror(Loc *loc, void *scanner, ParseCtx *ctx, const char *msg);
static AstExpr *index_elem(ParseCtx *ctx, AstExpr *e);
static AstStmt *return_stmt(ParseCtx *ctx, AstExpr *v, Loc loc);
static AstStmt *expr_stmt(ParseCtx *ctx, AstExpr *v, Loc loc);
static FeList *one_name(ParseCtx *ctx, const char *name, Loc loc);
static void no_annotation(ParseCtx *ctx, const char *kw, const char *name, const AstType *t, Loc colon);
}

%union {
    uint64_t ival;
    double fval;
    const char *str;
    int op;
    AstExpr *expr;
    AstStmt *stmt;
    AstType *type;
    AstParam *param;
    AstAttr *attr;
    AstItem *item;
    FeArg *arg;
    FeList *list;
}

%token <str> IDENT "name" AT_IDENT "attribute" STRING "string"
%token <ival> INT "integer"
%token <fval> FLOAT "floating-point number"
%token KW_KERNEL "'kernel'" KW_FN "'fn'" KW_GRAPH "'graph'" KW_LET "'let'" KW_VAR "'var'"
       KW_CONST "'const'" KW_FOR "'for'" KW_IN "'in'" KW_RANGE "'range'" KW_IF "'if'"
       KW_ELSE "'else'" KW_WHILE "'while'" KW_RETURN "'return'" KW_AS "'as'"
       KW_TRUE "'true'" KW_FALSE "'false'" KW_NONE "'None'" KW_INF "'inf'" KW_NAN "'nan'"
%token SHL "'<<'" SHR "'>>'" EQ "'=='" NE "'!='" LE "'<='" GE "'>='" ANDAND "'&&'"
       OROR "'||'" ADD_ASSIGN "'+='" SUB_ASSIGN "'-='" MUL_ASSIGN "'*='" DIV_ASSIGN "'/='"
       ARROW "'->'"

/* Loosest first (LANGUAGE.md section 2 lists tightest first). */
%left OROR
%left ANDAND
%left EQ NE '<' LE '>' GE
%left '|'
%left '^'
%left '&'
%left SHL SHR
%left '+' '-'
%left '*' '/' '%' '@'
%precedence KW_AS
%precedence UNARY

%type <item> item kernel_sig kernel_head fn_head graph_head
%type <list> attrs attr_args attr_arg_list map_entries map_list params param_list
%type <list> type_list dims stmts names args arg_list exprs index_list
%type <attr> attr
%type <arg> attr_arg map_entry arg
%type <expr> attr_value map dim dim_term dim_atom expr postfix primary index_elem
%type <expr> value if_expr
%type <param> param
%type <type> type cast_type ret_opt
%type <stmt> block stmt if_stmt
%type <op> assign_op

%%

program
    : items
    ;

items
    : %empty
    | items item                { fe_push(ctx, ctx->items, $2); }
    | items error
    ;

/* ---- items ------------------------------------------------------------------------ */

/* item: attrs 'kernel' NAME '(' params ')' [NAME '(' exprs ')'] block
 *     | attrs ('fn' | 'graph') NAME '(' params ')' ['->' type] block */
item
    : kernel_sig block          { $$ = $1; $$->body = $2; }
    | fn_head block             { $$ = $1; $$->body = $2; }
    | graph_head block          { $$ = $1; $$->body = $2; }
    ;

kernel_sig
    : kernel_head
    | kernel_head IDENT '(' exprs ')' { $$ = $1; fe_set_grid(ctx, $$, $2, @2, $4); }
    ;

kernel_head
    : attrs KW_KERNEL IDENT '(' params ')'
                                { $$ = fe_item(ctx, AST_KERNEL, @2, $3, @3, $1, $5); }
    ;

fn_head
    : attrs KW_FN IDENT '(' params ')' ret_opt
                                { $$ = fe_item(ctx, AST_FN, @2, $3, @3, $1, $5); $$->ret = $7; }
    ;

graph_head
    : attrs KW_GRAPH IDENT '(' params ')' ret_opt
                                { $$ = fe_item(ctx, AST_GRAPH, @2, $3, @3, $1, $5); $$->ret = $7; }
    ;

attrs
    : %empty                    { $$ = NULL; }
    | attrs attr                { $$ = fe_push(ctx, $1, $2); }
    ;

/* attr: '@' NAME ['(' [attr_arg {',' attr_arg} [',']] ')'] */
attr
    : AT_IDENT                  { $$ = fe_attr(ctx, $1, NULL, @1); }
    | AT_IDENT '(' attr_args ')' { $$ = fe_attr(ctx, $1, $3, @1); }
    ;

attr_args
    : %empty                    { $$ = NULL; }
    | attr_arg_list opt_comma
    ;

attr_arg_list
    : attr_arg                  { $$ = fe_push(ctx, NULL, $1); }
    | attr_arg_list ',' attr_arg { $$ = fe_push(ctx, $1, $3); }
    ;

/* attr_arg: [NAME '='] attr_value */
attr_arg
    : attr_value                { $$ = fe_arg(ctx, NULL, @1, $1); }
    | IDENT '=' attr_value      { $$ = fe_arg(ctx, $1, @1, $3); }
    ;

/* Maps appear only in attributes: `{ BM: [64, 128] }`, `configs = [ {BM: 64}, ... ]`.
 * Inside bodies a '{' always opens a block. */
attr_value
    : expr
    | map
    | '[' map_list opt_comma ']' { TRY($$, fe_exprs(ctx, AST_LIST, NULL, $2, @1)); }
    ;

map
    : '{' '}'                   { TRY($$, fe_map(ctx, NULL, @1)); }
    | '{' map_entries opt_comma '}' { TRY($$, fe_map(ctx, $2, @1)); }
    ;

map_entries
    : map_entry                 { $$ = fe_push(ctx, NULL, $1); }
    | map_entries ',' map_entry { $$ = fe_push(ctx, $1, $3); }
    ;

map_entry
    : IDENT ':' attr_value      { $$ = fe_arg(ctx, $1, @1, $3); }
    ;

map_list
    : map                       { $$ = fe_push(ctx, NULL, $1); }
    | map_list ',' map          { $$ = fe_push(ctx, $1, $3); }
    ;

opt_comma
    : %empty
    | ','
    ;

/* ---- parameters and types -------------------------------------------------------- */

params
    : %empty                    { $$ = NULL; }
    | param_list opt_comma
    ;

param_list
    : param                     { $$ = fe_push(ctx, NULL, $1); }
    | param_list ',' param      { $$ = fe_push(ctx, $1, $3); }
    ;

/* param: NAME [':' type] | 'const' NAME ':' type ['=' expr] */
param
    : IDENT                     { $$ = fe_param(ctx, false, $1, @1, NULL, NULL); }
    | IDENT ':' type            { $$ = fe_param(ctx, false, $1, @1, $3, NULL); }
    | KW_CONST IDENT ':' type   { $$ = fe_param(ctx, true, $2, @2, $4, NULL); }
    | KW_CONST IDENT ':' type '=' expr
                                { $$ = fe_param(ctx, true, $2, @2, $4, $6); }
    ;

ret_opt
    : %empty                    { $$ = NULL; }
    | ARROW type                { $$ = $2; }
    | ARROW '(' type_list opt_comma ')' { $$ = fe_tuple_type(ctx, $3, @2); }
    ;

type_list
    : type                      { $$ = fe_push(ctx, NULL, $1); }
    | type_list ',' type        { $$ = fe_push(ctx, $1, $3); }
    ;

/* type: NAME | '*' NAME | NAME '[' dim {',' dim} ']' */
type
    : cast_type
    | IDENT '[' dims opt_comma ']' { $$ = fe_tensor_type(ctx, $1, $3, @1); }
    ;

cast_type
    : IDENT                     { $$ = fe_scalar_type(ctx, $1, @1); }
    | '*' IDENT                 { $$ = fe_ptr_type(ctx, $2, @1, @2); }
    ;

dims
    : dim                       { $$ = fe_push(ctx, NULL, $1); }
    | dims ',' dim              { $$ = fe_push(ctx, $1, $3); }
    ;

/* dim: sums and products of integers and size names (LANGUAGE.md section 7) */
dim
    : dim_term
    | dim '+' dim_term          { TRY($$, fe_binary(ctx, AST_ADD, $1, $3, @2)); }
    | dim '-' dim_term          { TRY($$, fe_binary(ctx, AST_SUB, $1, $3, @2)); }
    ;

dim_term
    : dim_atom
    | dim_term '*' dim_atom     { TRY($$, fe_binary(ctx, AST_MUL, $1, $3, @2)); }
    ;

dim_atom
    : INT                       { TRY($$, fe_leaf(ctx, AST_INT, @1)); $$->ival = $1; }
    | IDENT                     { TRY($$, fe_name(ctx, $1, @1)); }
    | '(' dim ')'               { $$ = $2; }
    ;

/* ---- statements ------------------------------------------------------------------- */

block
    : '{' stmts '}'             { TRY($$, fe_block(ctx, $2, @1)); }
    | '{' stmts error '}'       { TRY($$, fe_block(ctx, $2, @1)); yyerrok; }
    ;

stmts
    : %empty                    { $$ = NULL; }
    | stmts stmt                { $$ = $2 ? fe_push(ctx, $1, $2) : $1; }
    | stmts error ';'           { $$ = $1; yyerrok; }
    ;

stmt
    : KW_LET IDENT '=' value ';' { $$ = fe_let(ctx, AST_LET, one_name(ctx, $2, @2), $4, @1); }
    | KW_LET '(' names opt_comma ')' '=' expr ';'
                                { $$ = fe_let(ctx, AST_LET, $3, $7, @1); $$->destructure = true; }
    | KW_VAR IDENT '=' value ';' { $$ = fe_let(ctx, AST_VAR, one_name(ctx, $2, @2), $4, @1); }
    /* not in the language, and said so: a binding's type is its value's */
    | KW_LET IDENT ':' type '=' value ';'
                                { no_annotation(ctx, "let", $2, $4, @3);
                                  $$ = fe_let(ctx, AST_LET, one_name(ctx, $2, @2), $6, @1); }
    | KW_VAR IDENT ':' type '=' value ';'
                                { no_annotation(ctx, "var", $2, $4, @3);
                                  $$ = fe_let(ctx, AST_VAR, one_name(ctx, $2, @2), $6, @1); }
    | IDENT assign_op value ';' { $$ = fe_assign(ctx, $1, @1, $2, $3); }
    | KW_FOR IDENT KW_IN KW_RANGE '(' exprs ')' block
                                { TRY($$, fe_for(ctx, $2, @2, $6, @4, $8, @1)); }
    /* range() is lowering's error (it counts the arguments); a malformed argument
     * list recovers at its ')', so the loop's block still parses as a block */
    | KW_FOR IDENT KW_IN KW_RANGE '(' ')' block
                                { TRY($$, fe_for(ctx, $2, @2, NULL, @4, $7, @1)); }
    | KW_FOR IDENT KW_IN KW_RANGE '(' error ')' block
                                { $$ = NULL; yyerrok; }
    /* for NAME in static_range(lo, hi[, step]) block: unrolled at compile time */
    | KW_FOR IDENT KW_IN IDENT '(' exprs ')' block
                                { TRY($$, fe_static_for(ctx, $4, @4, $2, @2, $6, $8, @1)); }
    | KW_WHILE expr block       { TRY($$, fe_while(ctx, $2, $3, @1)); }
    | if_stmt
    | KW_RETURN ';'             { $$ = return_stmt(ctx, NULL, @1); }
    | KW_RETURN value ';'       { $$ = return_stmt(ctx, $2, @1); }
    | expr ';'                  { $$ = expr_stmt(ctx, $1, @1); }
    | block
    | ';'                       { $$ = NULL; }
    ;

names
    : IDENT                     { $$ = one_name(ctx, $1, @1); }
    | names ',' IDENT           { $$ = fe_push(ctx, $1, fe_arg(ctx, $3, @3, NULL)); }
    ;

assign_op
    : '='                       { $$ = 0; }
    | ADD_ASSIGN                { $$ = '+'; }
    | SUB_ASSIGN                { $$ = '-'; }
    | MUL_ASSIGN                { $$ = '*'; }
    | DIV_ASSIGN                { $$ = '/'; }
    ;

/* if_stmt: 'if' expr block ['else' (block | if_stmt)] */
if_stmt
    : KW_IF expr block          { TRY($$, fe_if(ctx, $2, $3, NULL, @1)); }
    | KW_IF expr block KW_ELSE block { TRY($$, fe_if(ctx, $2, $3, $5, @1)); }
    | KW_IF expr block KW_ELSE if_stmt { TRY($$, fe_if(ctx, $2, $3, $5, @1)); }
    ;

/* ---- expressions ------------------------------------------------------------------ */
/* value: expr | if_expr -- where a value is bound, assigned or returned; elsewhere an
 * if expression stands in parentheses (a statement starting with `if` is an if_stmt).
 * if_expr: 'if' expr '{' value '}' 'else' ('{' value '}' | if_expr) */
value
    : expr
    | if_expr
    ;
if_expr
    : KW_IF expr '{' value '}' KW_ELSE '{' value '}'
                                { TRY($$, fe_if_expr(ctx, $2, $4, $8, @1)); }
    | KW_IF expr '{' value '}' KW_ELSE if_expr
                                { TRY($$, fe_if_expr(ctx, $2, $4, $7, @1)); }
    ;

expr
    : postfix
    | '-' expr %prec UNARY      { TRY($$, fe_unary(ctx, '-', $2, @1)); }
    | '!' expr %prec UNARY      { TRY($$, fe_unary(ctx, '!', $2, @1)); }
    | '~' expr %prec UNARY      { TRY($$, fe_unary(ctx, '~', $2, @1)); }
    | expr KW_AS cast_type      { TRY($$, fe_cast(ctx, $1, $3, @2)); }
    | expr KW_AS IDENT '(' expr ')' { TRY($$, fe_cast(ctx, $1, fe_dtype_type(ctx, $3, $5, @3), @2)); }
    | expr '*' expr             { TRY($$, fe_binary(ctx, AST_MUL, $1, $3, @2)); }
    | expr '/' expr             { TRY($$, fe_binary(ctx, AST_DIV, $1, $3, @2)); }
    | expr '%' expr             { TRY($$, fe_binary(ctx, AST_REM, $1, $3, @2)); }
    | expr '@' expr             { TRY($$, fe_binary(ctx, AST_MATMUL, $1, $3, @2)); }
    | expr '+' expr             { TRY($$, fe_binary(ctx, AST_ADD, $1, $3, @2)); }
    | expr '-' expr             { TRY($$, fe_binary(ctx, AST_SUB, $1, $3, @2)); }
    | expr SHL expr             { TRY($$, fe_binary(ctx, AST_SHL, $1, $3, @2)); }
    | expr SHR expr             { TRY($$, fe_binary(ctx, AST_SHR, $1, $3, @2)); }
    | expr '&' expr             { TRY($$, fe_binary(ctx, AST_BAND, $1, $3, @2)); }
    | expr '^' expr             { TRY($$, fe_binary(ctx, AST_BXOR, $1, $3, @2)); }
    | expr '|' expr             { TRY($$, fe_binary(ctx, AST_BOR, $1, $3, @2)); }
    | expr EQ expr              { TRY($$, fe_binary(ctx, AST_EQ, $1, $3, @2)); }
    | expr NE expr              { TRY($$, fe_binary(ctx, AST_NE, $1, $3, @2)); }
    | expr '<' expr             { TRY($$, fe_binary(ctx, AST_LT, $1, $3, @2)); }
    | expr LE expr              { TRY($$, fe_binary(ctx, AST_LE, $1, $3, @2)); }
    | expr '>' expr             { TRY($$, fe_binary(ctx, AST_GT, $1, $3, @2)); }
    | expr GE expr              { TRY($$, fe_binary(ctx, AST_GE, $1, $3, @2)); }
    | expr ANDAND expr          { TRY($$, fe_binary(ctx, AST_LAND, $1, $3, @2)); }
    | expr OROR expr            { TRY($$, fe_binary(ctx, AST_LOR, $1, $3, @2)); }
    ;

/* postfix: primary {'[' index_elem {',' index_elem} ']'} */
postfix
    : primary
    | postfix '[' index_list opt_comma ']' { TRY($$, fe_exprs(ctx, AST_INDEX, $1, $3, @2)); }
    ;

index_list
    : index_elem                { $$ = fe_push(ctx, NULL, $1); }
    | index_list ',' index_elem { $$ = fe_push(ctx, $1, $3); }
    ;

index_elem
    : ':'                       { TRY($$, fe_leaf(ctx, AST_SLICE, @1)); }
    | expr                      { $$ = index_elem(ctx, $1); }
    ;

primary
    : INT                       { TRY($$, fe_leaf(ctx, AST_INT, @1)); $$->ival = $1; }
    | FLOAT                     { TRY($$, fe_leaf(ctx, AST_FLOAT, @1)); $$->fval = $1; }
    | KW_INF                    { TRY($$, fe_leaf(ctx, AST_FLOAT, @1)); $$->fval = (double)INFINITY; }
    | KW_NAN                    { TRY($$, fe_leaf(ctx, AST_FLOAT, @1)); $$->fval = (double)NAN; }
    | KW_TRUE                   { TRY($$, fe_leaf(ctx, AST_BOOL, @1)); $$->ival = 1; }
    | KW_FALSE                  { TRY($$, fe_leaf(ctx, AST_BOOL, @1)); }
    | KW_NONE                   { TRY($$, fe_leaf(ctx, AST_NONE, @1)); }
    | STRING                    { TRY($$, fe_leaf(ctx, AST_STRING, @1)); $$->sval = $1; }
    | IDENT                     { TRY($$, fe_name(ctx, $1, @1)); }
    | IDENT '(' args ')'        { TRY($$, fe_call(ctx, $1, $3, @1)); }
    | '(' expr ')'              { $$ = $2; }
    | '(' if_expr ')'           { $$ = $2; }
    /* a tuple: the value of `return (a, b);`, the tiles of reduce((a, b), ...) */
    | '(' expr ',' exprs opt_comma ')'
                                { FeList *l = fe_push(ctx, NULL, $2);
                                  for (uint32_t i = 0; i < $4->len; i++) fe_push(ctx, l, $4->items[i]);
                                  TRY($$, fe_exprs(ctx, AST_TUPLE, NULL, l, @1)); }
    | '[' ']'                   { TRY($$, fe_exprs(ctx, AST_LIST, NULL, NULL, @1)); }
    | '[' exprs opt_comma ']'   { TRY($$, fe_exprs(ctx, AST_LIST, NULL, $2, @1)); }
    ;

/* args: [arg {',' arg} [',']]; arg: [NAME '='] expr */
args
    : %empty                    { $$ = NULL; }
    | arg_list opt_comma
    ;

arg_list
    : arg                       { $$ = fe_push(ctx, NULL, $1); }
    | arg_list ',' arg          { $$ = fe_push(ctx, $1, $3); }
    ;

arg
    : expr                      { $$ = fe_arg(ctx, NULL, @1, $1); }
    | IDENT '=' expr            { $$ = fe_arg(ctx, $1, @1, $3); }
    ;

exprs
    : expr                      { $$ = fe_push(ctx, NULL, $1); }
    | exprs ',' expr            { $$ = fe_push(ctx, $1, $3); }
    ;

%%

/* Only ':' and None may index a tile (they insert axes). */
static AstExpr *index_elem(ParseCtx *ctx, AstExpr *e)
{
    if (e->kind != AST_NONE)
        fe_err(ctx, e->loc, "only ':' and 'None' are allowed in an index");
    return e;
}

static AstStmt *return_stmt(ParseCtx *ctx, AstExpr *v, Loc loc)
{
    AstStmt *s = fe_stmt(ctx, AST_RETURN, loc);
    s->value = v;
    return s;
}

static AstStmt *expr_stmt(ParseCtx *ctx, AstExpr *v, Loc loc)
{
    AstStmt *s = fe_stmt(ctx, AST_EXPR, loc);
    s->value = v;
    return s;
}

static FeList *one_name(ParseCtx *ctx, const char *name, Loc loc)
{
    return fe_push(ctx, NULL, fe_arg(ctx, name, loc, NULL));
}

/* bison calls this only when its stack is full ("memory exhausted"): that takes a
 * nesting the other limits did not catch, e.g. thousands of unary operators. */
static void fe_yyerror(Loc *loc, void *scanner, ParseCtx *ctx, const char *msg)
{
    (void)scanner;
    (void)msg;
    fe_too_deep(ctx, *loc);
}

/* ---- syntax error messages ---------------------------------------------------------- */

/* How an expected token reads in a message. */
static const char *expected_text(yysymbol_kind_t k, char buf[32])
{
    switch (k) {
    case YYSYMBOL_YYEOF: return "end of file";
    case YYSYMBOL_IDENT: return "a name";
    case YYSYMBOL_AT_IDENT: return "an attribute";
    case YYSYMBOL_STRING: return "a string";
    case YYSYMBOL_INT: return "an integer";
    case YYSYMBOL_FLOAT: return "a number";
    default: break;
    }
    const char *n = yysymbol_name(k);
    size_t len = strlen(n);
    if (len >= 2 && n[0] == '"' && n[len - 1] == '"') {     /* aliases come quoted */
        snprintf(buf, 32, "%.*s", (int)(len - 2), n + 1);
        return buf;
    }
    return n;
}

/* How the unexpected token reads: its own text, quoted. */
static const char *found_text(const ParseCtx *ctx, yysymbol_kind_t k, char buf[64])
{
    if (k == YYSYMBOL_YYEOF) return "end of file";
    if (k == YYSYMBOL_STRING) return "a string";
    if (ctx->tok_len > 40) snprintf(buf, 64, "'%.40s...'", ctx->tok_text);
    else snprintf(buf, 64, "'%.*s'", (int)ctx->tok_len, ctx->tok_text);
    return buf;
}

static bool expects(const yysymbol_kind_t *exp, int n, yysymbol_kind_t k)
{
    for (int i = 0; i < n; i++)
        if (exp[i] == k) return true;
    return false;
}

/* Tokens that can end an expression: a missing ';' is the likely mistake after one. */
static bool ends_expr(int tok)
{
    switch (tok) {
    case IDENT: case INT: case FLOAT: case STRING: case ')': case ']':
    case KW_TRUE: case KW_FALSE: case KW_NONE: case KW_INF: case KW_NAN:
        return true;
    default:
        return false;
    }
}

/* `let a: f32 = ...`: the language has no annotations on bindings (LANGUAGE.md); a
 * conversion is written with `as`, which takes an element type. */
static void no_annotation(ParseCtx *ctx, const char *kw, const char *name, const AstType *t, Loc colon)
{
    const char *to = t && t->kind == AST_TYPE_SCALAR && t->name ? t->name : "f32";
    fe_err(ctx, colon, "'%s' takes no type annotation: '%s' has the type of its value; to convert the value, "
           "write '%s %s = value as %s'", kw, name, kw, name, to);
}

static bool is_item_kw(yysymbol_kind_t k)
{
    return k == YYSYMBOL_KW_KERNEL || k == YYSYMBOL_KW_FN || k == YYSYMBOL_KW_GRAPH;
}

/* Tokens that close or separate something; when an expression could also go on, they
 * are the ones worth naming ("expected ',' or ')'"), the operators are not. */
static int keep_closers(yysymbol_kind_t *exp, int n)
{
    static const char closers[] = ",;)]}";
    int k = 0;
    for (const char *c = closers; *c; c++) {
        int ch = (unsigned char)*c;   /* an int: YYTRANSLATE's range test is no tautology */
        for (int i = 0; i < n; i++)
            if (exp[i] == YYTRANSLATE(ch)) exp[k++] = exp[i];
    }
    return k;
}

/* "expected A, B or C, found X" for up to four expected tokens; "unexpected X"
 * beyond (a long list helps nobody). */
static void report_expected(ParseCtx *ctx, Loc loc, yysymbol_kind_t *exp, int n,
                            const char *found)
{
    if (n > 4) n = keep_closers(exp, n);
    if (n == 0 || n > 4) {
        fe_err(ctx, loc, "unexpected %s", found);
        return;
    }
    char list[256] = "", buf[32];
    for (int i = 0; i < n; i++) {
        const char *sep = i == 0 ? "" : i == n - 1 ? " or " : ", ";
        size_t used = strlen(list);
        snprintf(list + used, sizeof list - used, "%s%s", sep, expected_text(exp[i], buf));
    }
    fe_err(ctx, loc, "expected %s, found %s", list, found);
}

static int yyreport_syntax_error(const yypcontext_t *yc, void *scanner, ParseCtx *ctx)
{
    (void)scanner;
    if (ctx->fatal || ctx->ntokens == ctx->quiet_tok) return 0;
    yysymbol_kind_t exp[YYNTOKENS];
    int n = yypcontext_expected_tokens(yc, exp, YYNTOKENS);
    if (n < 0) n = 0;
    yysymbol_kind_t la = yypcontext_token(yc);
    Loc loc = *yypcontext_location(yc);
    char buf[64];
    const char *found = found_text(ctx, la, buf);

    if (is_item_kw(la) && ctx->brace_depth > 0)
        fe_err(ctx, loc, "unexpected %s inside a block", found);
    else if (expects(exp, n, YYTRANSLATE(';')) && ends_expr(ctx->prev_tok))
        fe_err(ctx, ctx->prev_end, "expected ';' after expression");
    else if (expects(exp, n, YYSYMBOL_INT))
        fe_err(ctx, loc, "expected an expression, found %s", found);
    else if (expects(exp, n, YYSYMBOL_KW_KERNEL))
        fe_err(ctx, loc, "expected 'kernel', 'fn' or 'graph', found %s", found);
    else if (expects(exp, n, YYSYMBOL_IDENT) && expects(exp, n, YYTRANSLATE('*')))
        fe_err(ctx, loc, "expected a type, found %s", found);
    else
        report_expected(ctx, loc, exp, n, found);
    return 0;
}
