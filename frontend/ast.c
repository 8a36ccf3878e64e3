/* The parser's entry points and the AST printer (see ast.h).
 *
 * ast_print writes an indented S-expression: one line per item field and per
 * statement, expressions on one line. It is the format of `tilec --emit=ast` and of
 * the golden tests, so changes to it change those files. */
#include "ast.h"

#include <limits.h>
#include <math.h>
#include <string.h>

#include "parse_util.h"
#include "parser.h"
/* flex's header names the bison types without bison's prefix */
#define YYSTYPE FE_YYSTYPE
#define YYLTYPE FE_YYLTYPE
#include "lexer.h"

const char *const ast_binop_text[] = {
    "+", "-", "*", "/", "%", "@",
    "<<", ">>", "&", "^", "|",
    "==", "!=", "<", "<=", ">", ">=",
    "&&", "||",
};

int fe_yyparse(void *scanner, ParseCtx *ctx);

/* Runs the parser over the whole of src (flex takes the length as an int). */
static void parse_source(ParseCtx *ctx, const Source *src)
{
    if (src->len > INT_MAX) {
        fe_err(ctx, fe_loc(ctx, 1, 1), "file is too large (more than %d bytes)", INT_MAX);
        return;
    }
    yyscan_t scanner;
    if (fe_yylex_init_extra(ctx, &scanner) != 0) tl_oom();
    YY_BUFFER_STATE buf = fe_yy_scan_bytes(src->text, (int)src->len, scanner);
    fe_yyparse(scanner, ctx);
    fe_yy_delete_buffer(buf, scanner);
    fe_yylex_destroy(scanner);
}

AstProgram *fe_parse(Arena *a, const Source *src, DiagList *diags)
{
    ParseCtx ctx;
    fe_ctx_init(&ctx, a, src, diags);
    parse_source(&ctx, src);
    AstProgram *p = arena_alloc(a, sizeof *p);
    p->src = src;
    p->nitems = ctx.items->len;
    p->items = arena_alloc(a, (p->nitems ? p->nitems : 1) * sizeof *p->items);
    for (uint32_t i = 0; i < p->nitems; i++) p->items[i] = *(AstItem *)ctx.items->items[i];
    return p;
}

/* ---- tokens ----------------------------------------------------------------------- */

static const char *token_kind(int tok)
{
    switch (tok) {
    case IDENT: return "IDENT";
    case AT_IDENT: return "ATTR";
    case INT: return "INT";
    case FLOAT: return "FLOAT";
    case STRING: return "STRING";
    default: return tok >= KW_KERNEL && tok <= KW_NAN ? "KEYWORD" : "PUNCT";
    }
}

bool fe_dump_tokens(const Source *src, FILE *out, DiagList *diags)
{
    if (src->len > INT_MAX) {
        diag_error(diags, ((Loc){src, 1, 1}), "file is too large (more than %d bytes)", INT_MAX);
        return false;
    }
    Arena *a = arena_create();
    if (!a) tl_oom();
    ParseCtx ctx;
    fe_ctx_init(&ctx, a, src, diags);
    yyscan_t scanner;
    if (fe_yylex_init_extra(&ctx, &scanner) != 0) tl_oom();
    YY_BUFFER_STATE buf = fe_yy_scan_bytes(src->text, (int)src->len, scanner);
    size_t errors = diags->nerrors;
    FE_YYSTYPE val;
    Loc loc;
    for (int tok; (tok = fe_yylex(&val, &loc, scanner)) != 0;)
        fprintf(out, "%u:%u %s %.*s\n", loc.line, loc.col, token_kind(tok),
                (int)ctx.tok_len, ctx.tok_text);
    fprintf(out, "%u:%u EOF\n", loc.line, loc.col);
    fe_yy_delete_buffer(buf, scanner);
    fe_yylex_destroy(scanner);
    arena_destroy(a);
    return diags->nerrors == errors;
}

/* ---- printing ---------------------------------------------------------------------- */

static void print_expr(const AstExpr *e, FILE *out);

static void indent(int n, FILE *out) { fprintf(out, "%*s", 2 * n, ""); }

/* The shortest decimal that reads back as the same double: fixed-point in the range
 * people write that way, else with an exponent; always with a '.' or an 'e', so a
 * float never looks like an integer. */
static void print_float(double v, FILE *out)
{
    if (isnan(v)) { fputs("nan", out); return; }
    if (isinf(v)) { fputs(v < 0 ? "-inf" : "inf", out); return; }
    bool fixed = v == 0 || (fabs(v) >= 1e-5 && fabs(v) < 1e16);
    char buf[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, fixed ? "%.*f" : "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, out);
    if (!strpbrk(buf, ".e")) fputs(".0", out);
}

static void print_string(const char *s, FILE *out)
{
    fputc('"', out);
    for (; *s; s++) {
        switch (*s) {
        case '\n': fputs("\\n", out); break;
        case '\t': fputs("\\t", out); break;
        case '\\': fputs("\\\\", out); break;
        case '"': fputs("\\\"", out); break;
        default:
            if ((unsigned char)*s < 0x20) fprintf(out, "\\x%02x", (unsigned char)*s);
            else fputc(*s, out);
        }
    }
    fputc('"', out);
}

static void print_type(const AstType *t, FILE *out)
{
    if (!t) { fputs("?", out); return; }
    switch (t->kind) {
    case AST_TYPE_SCALAR: fputs(t->name, out); break;
    case AST_TYPE_PTR: fprintf(out, "(ptr %s)", t->name); break;
    case AST_TYPE_TENSOR:
        fprintf(out, "(tensor %s", t->name);
        for (uint32_t i = 0; i < t->ndims; i++) {
            fputc(' ', out);
            print_expr(t->dims[i], out);
        }
        fputc(')', out);
        break;
    case AST_TYPE_OF:
        fputs("(dtype ", out);
        print_expr(t->of, out);
        fputc(')', out);
        break;
    case AST_TYPE_TUPLE:
        fputs("(tuple", out);
        for (uint32_t i = 0; i < t->nelems; i++) {
            fputc(' ', out);
            print_type(t->elems[i], out);
        }
        fputc(')', out);
        break;
    }
}

/* " a b (= name c)": arguments, named ones as (= name value). */
static void print_args(AstExpr *const *args, const char *const *names, uint32_t n, FILE *out)
{
    for (uint32_t i = 0; i < n; i++) {
        fputc(' ', out);
        if (names && names[i]) fprintf(out, "(= %s ", names[i]);
        print_expr(args[i], out);
        if (names && names[i]) fputc(')', out);
    }
}

static const char *const expr_heads[] = {
    [AST_CALL] = "call", [AST_INDEX] = "index", [AST_LIST] = "list",
    [AST_MAP] = "map", [AST_TUPLE] = "tuple", [AST_IF_EXPR] = "if",
};

static void print_expr(const AstExpr *e, FILE *out)
{
    if (!e) { fputs("?", out); return; }
    switch (e->kind) {
    case AST_INT: fprintf(out, "%llu", (unsigned long long)e->ival); break;
    case AST_FLOAT: print_float(e->fval, out); break;
    case AST_BOOL: fputs(e->ival ? "true" : "false", out); break;
    case AST_NONE: fputs("None", out); break;
    case AST_SLICE: fputs(":", out); break;
    case AST_STRING: print_string(e->sval, out); break;
    case AST_NAME: fputs(e->name, out); break;
    case AST_UNARY:
        fprintf(out, "(%c ", e->op);
        print_expr(e->lhs, out);
        fputc(')', out);
        break;
    case AST_BINARY:
        fprintf(out, "(%s ", ast_binop_text[e->op]);
        print_expr(e->lhs, out);
        fputc(' ', out);
        print_expr(e->rhs, out);
        fputc(')', out);
        break;
    case AST_CAST:
        fputs("(as ", out);
        print_expr(e->lhs, out);
        fputc(' ', out);
        print_type(e->type, out);
        fputc(')', out);
        break;
    case AST_CALL:
    case AST_INDEX:
    case AST_LIST:
    case AST_MAP:
    case AST_TUPLE:
    case AST_IF_EXPR:
        fprintf(out, "(%s", expr_heads[e->kind]);
        if (e->kind == AST_CALL) fprintf(out, " %s", e->name);
        if (e->kind == AST_INDEX) {
            fputc(' ', out);
            print_expr(e->lhs, out);
        }
        print_args(e->args, e->arg_names, e->nargs, out);
        fputc(')', out);
        break;
    }
}

static void print_stmt(const AstStmt *s, int depth, FILE *out);

/* The statements of a block, each on its own line, then the closing parenthesis. */
static void print_body(const AstStmt *b, int depth, FILE *out)
{
    for (uint32_t i = 0; b && i < b->nstmts; i++) {
        fputc('\n', out);
        print_stmt(b->stmts[i], depth, out);
    }
    fputc(')', out);
}

static void print_names(const AstStmt *s, FILE *out)
{
    if (s->destructure) fputc('(', out);
    for (uint32_t i = 0; i < s->nnames; i++) fprintf(out, "%s%s", i ? " " : "", s->names[i]);
    if (s->destructure) fputc(')', out);
}

static void print_if(const AstStmt *s, int depth, FILE *out)
{
    fputs("(if ", out);
    print_expr(s->cond, out);
    fputc('\n', out);
    indent(depth + 1, out);
    fputs("(then", out);
    print_body(s->body, depth + 2, out);
    if (s->else_body) {
        fputc('\n', out);
        indent(depth + 1, out);
        fputs("(else", out);
        if (s->else_body->kind == AST_IF) {
            fputc('\n', out);
            print_stmt(s->else_body, depth + 2, out);
            fputc(')', out);
        } else {
            print_body(s->else_body, depth + 2, out);
        }
    }
    fputc(')', out);
}

static const char *const assign_heads[128] = {
    [0] = "=", ['+'] = "+=", ['-'] = "-=", ['*'] = "*=", ['/'] = "/=",
};

static void print_stmt(const AstStmt *s, int depth, FILE *out)
{
    indent(depth, out);
    switch (s->kind) {
    case AST_LET:
    case AST_VAR:
    case AST_ASSIGN:
        if (s->kind == AST_ASSIGN)
            fprintf(out, "(%s ", s->op >= 0 && s->op < 128 && assign_heads[s->op] ? assign_heads[s->op] : "?=");
        else
            fputs(s->kind == AST_LET ? "(let " : "(var ", out);
        print_names(s, out);
        fputc(' ', out);
        print_expr(s->value, out);
        fputc(')', out);
        break;
    case AST_FOR:
        fprintf(out, "(for %s (%s", s->names[0], s->unrolled ? "static_range" : "range");
        print_args(s->args, NULL, s->nargs, out);
        fputc(')', out);
        print_body(s->body, depth + 1, out);
        break;
    case AST_WHILE:
        fputs("(while ", out);
        print_expr(s->cond, out);
        print_body(s->body, depth + 1, out);
        break;
    case AST_IF: print_if(s, depth, out); break;
    case AST_RETURN:
        fputs("(return", out);
        if (s->value) {
            fputc(' ', out);
            print_expr(s->value, out);
        }
        fputc(')', out);
        break;
    case AST_EXPR:
        fputs("(expr ", out);
        print_expr(s->value, out);
        fputc(')', out);
        break;
    case AST_BLOCK:
        fputs("(block", out);
        print_body(s, depth + 1, out);
        break;
    }
}

static void print_param(const AstParam *p, FILE *out)
{
    fprintf(out, "(%s%s", p->is_const ? "const " : "", p->name);
    if (p->type) {
        fputc(' ', out);
        print_type(p->type, out);
    }
    if (p->default_value) {
        fputc(' ', out);
        print_expr(p->default_value, out);
    }
    fputc(')', out);
}

static void print_attr(const AstAttr *at, FILE *out)
{
    fprintf(out, "(@%s", at->name);
    print_args(at->args, at->arg_names, at->nargs, out);
    fputc(')', out);
}

static const char *const item_heads[] = {"kernel", "fn", "graph"};

static void print_item(const AstItem *it, FILE *out)
{
    fprintf(out, "(%s %s", item_heads[it->kind], it->name);
    for (uint32_t i = 0; i < it->nattrs; i++) {
        fputs("\n  ", out);
        print_attr(&it->attrs[i], out);
    }
    fputs("\n  (params", out);
    for (uint32_t i = 0; i < it->nparams; i++) {
        fputs("\n    ", out);
        print_param(&it->params[i], out);
    }
    fputc(')', out);
    if (it->ret) {
        fputs("\n  (ret ", out);
        print_type(it->ret, out);
        fputc(')', out);
    }
    if (it->grid) {
        fputs("\n  (grid", out);
        print_args(it->grid, NULL, it->ngrid, out);
        fputc(')', out);
    }
    fputs("\n  (body", out);
    print_body(it->body, 2, out);
    fputs(")\n", out);
}

void ast_print(const AstProgram *p, FILE *out)
{
    for (uint32_t i = 0; i < p->nitems; i++) print_item(&p->items[i], out);
}
