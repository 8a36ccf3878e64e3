/* Unit tests of the lexer and the parser: the program shapes of LANGUAGE.md, operator
 * precedence, node locations, and the exact text and position of syntax errors. ASTs
 * are compared through ast_print, whose S-expressions make the tree shape visible. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/ast.h"

/* One parse: everything it needs and produces, freed by done(). */
typedef struct {
    Source src;
    Arena *arena;
    DiagList diags;
    AstProgram *prog;
} Parse;

static Parse *parse_bytes(const char *text, size_t len)
{
    Parse *p = calloc(1, sizeof *p);
    p->src = (Source){"t.tile", text, len};
    p->arena = arena_create();
    diag_init(&p->diags);
    p->prog = fe_parse(p->arena, &p->src, &p->diags);
    assert_non_null(p->prog);
    return p;
}

static Parse *parse(const char *text) { return parse_bytes(text, strlen(text)); }

static void done(Parse *p)
{
    diag_free(&p->diags);
    arena_destroy(p->arena);
    free(p);
}

/* The AST of `text` as printed by ast_print; asserts there were no errors. */
static char *ast_of(const char *text)
{
    Parse *p = parse(text);
    for (size_t i = 0; i < p->diags.len; i++) print_message("unexpected: %s\n", p->diags.items[i].msg);
    assert_int_equal(p->diags.nerrors, 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    ast_print(p->prog, f);
    fclose(f);
    done(p);
    return buf;
}

/* The AST of `e` written as the value of `let v = e;` in a kernel, e.g. "(+ a b)". */
static char *expr_ast(const char *e)
{
    char src[512], *ast = NULL;
    snprintf(src, sizeof src, "kernel k() { let v = %s; }", e);
    char *full = ast_of(src);
    char *start = strstr(full, "(let v ");
    assert_non_null(start);
    start += strlen("(let v ");
    size_t n = strlen(start);
    ast = strndup(start, n - strlen(")))\n"));    /* drop the let, body and kernel closers */
    free(full);
    return ast;
}

#define assert_expr(src, want)                       \
    do {                                             \
        char *got_ = expr_ast(src);                  \
        assert_string_equal(got_, want);             \
        free(got_);                                  \
    } while (0)

#define assert_ast_contains(src, want)               \
    do {                                             \
        char *got_ = ast_of(src);                    \
        if (!strstr(got_, want)) print_message("AST:\n%s\n", got_); \
        assert_non_null(strstr(got_, want));         \
        free(got_);                                  \
    } while (0)

/* All diagnostics of a parse, one "line:col: message" per line. */
static char *errors_of_bytes(const char *text, size_t len)
{
    Parse *p = parse_bytes(text, len);
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    for (size_t i = 0; i < p->diags.len; i++) {
        const Diag *d = &p->diags.items[i];
        fprintf(f, "%u:%u: %s\n", d->loc.line, d->loc.col, d->msg);
    }
    fclose(f);
    done(p);
    return buf;
}

static char *errors_of(const char *text) { return errors_of_bytes(text, strlen(text)); }

#define assert_errors(src, want)                     \
    do {                                             \
        char *got_ = errors_of(src);                 \
        assert_string_equal(got_, want);             \
        free(got_);                                  \
    } while (0)

/* ---- the programs of LANGUAGE.md ------------------------------------------------- */

static const char softmax_src[] =
    "@launch(warps = 4)\n"
    "kernel softmax(out: *bf16, inp: *bf16, stride: i64, n_rows: i32, n_cols: i32,\n"
    "               const BLOCK: i32 = 1024)\n"
    "    grid(n_rows)\n"
    "{\n"
    "    let row = program_id(0);\n"
    "    let cols = arange(0, BLOCK);\n"
    "    let mask = cols < n_cols;\n"
    "    let x = load(inp + row * stride + cols, mask, -inf) as f32;\n"
    "    let e = exp(x - max(x, 0));\n"
    "    store(out + row * stride + cols, (e / sum(e, 0)) as bf16, mask);\n"
    "}\n";

static void test_softmax_ast(void **state)
{
    (void)state;
    char *got = ast_of(softmax_src);
    assert_string_equal(got,
        "(kernel softmax\n"
        "  (@launch (= warps 4))\n"
        "  (params\n"
        "    (out (ptr bf16))\n"
        "    (inp (ptr bf16))\n"
        "    (stride i64)\n"
        "    (n_rows i32)\n"
        "    (n_cols i32)\n"
        "    (const BLOCK i32 1024))\n"
        "  (grid n_rows)\n"
        "  (body\n"
        "    (let row (call program_id 0))\n"
        "    (let cols (call arange 0 BLOCK))\n"
        "    (let mask (< cols n_cols))\n"
        "    (let x (as (call load (+ (+ inp (* row stride)) cols) mask (- inf)) f32))\n"
        "    (let e (call exp (- x (call max x 0))))\n"
        "    (expr (call store (+ (+ out (* row stride)) cols) (as (/ e (call sum e 0)) bf16) mask))))\n");
    free(got);
}

static void test_softmax_structure(void **state)
{
    (void)state;
    Parse *p = parse(softmax_src);
    assert_int_equal(p->diags.nerrors, 0);
    assert_int_equal(p->prog->nitems, 1);
    const AstItem *k = &p->prog->items[0];
    assert_int_equal(k->kind, AST_KERNEL);
    assert_string_equal(k->name, "softmax");
    assert_int_equal(k->nparams, 6);
    assert_true(k->params[5].is_const);
    assert_int_equal(k->params[5].default_value->ival, 1024);
    assert_int_equal(k->params[0].type->kind, AST_TYPE_PTR);
    assert_string_equal(k->params[0].type->name, "bf16");
    assert_int_equal(k->ngrid, 1);
    assert_int_equal(k->grid[0]->kind, AST_NAME);
    assert_int_equal(k->body->kind, AST_BLOCK);
    assert_int_equal(k->body->nstmts, 6);
    assert_int_equal(k->body->stmts[5]->kind, AST_EXPR);
    assert_null(k->ret);
    done(p);
}

static const char autotune_src[] =
    "@autotune(key = [M, N, K],\n"
    "          space = { BM: [64, 128, 256], BN: [64, 128, 256], BK: [32, 64],\n"
    "                    warps: [4, 8], stages: [2, 3, 4] },\n"
    "          where = BM * BN <= 128 * 256,\n"
    "          default = { BM: 128, BN: 128, BK: 64, warps: 4, stages: 3 },\n"
    "          configs = [ {BM: 64}, {BM: 128, warps: 8} ])\n"
    "@launch(stages = 3)\n"
    "kernel matmul(a: *f16, M: i32, N: i32, K: i32, const BM: i32, const BN: i32)\n"
    "    grid(cdiv(M, BM), cdiv(N, BN)) { }\n";

static void test_autotune_attr(void **state)
{
    (void)state;
    Parse *p = parse(autotune_src);
    assert_int_equal(p->diags.nerrors, 0);
    const AstItem *k = &p->prog->items[0];
    assert_int_equal(k->nattrs, 2);
    const AstAttr *at = &k->attrs[0];
    assert_string_equal(at->name, "autotune");
    assert_int_equal(at->nargs, 5);
    assert_string_equal(at->arg_names[0], "key");
    assert_int_equal(at->args[0]->kind, AST_LIST);
    assert_int_equal(at->args[0]->nargs, 3);
    assert_int_equal(at->args[1]->kind, AST_MAP);
    assert_int_equal(at->args[1]->nargs, 5);
    assert_string_equal(at->args[1]->arg_names[3], "warps");
    assert_int_equal(at->args[1]->args[3]->kind, AST_LIST);
    assert_int_equal(at->args[2]->kind, AST_BINARY);
    assert_int_equal(at->args[2]->op, AST_LE);
    assert_int_equal(at->args[4]->kind, AST_LIST);
    assert_int_equal(at->args[4]->args[1]->kind, AST_MAP);
    assert_int_equal(at->args[4]->args[1]->args[1]->ival, 8);
    assert_string_equal(k->attrs[1].name, "launch");
    assert_int_equal(k->ngrid, 2);
    done(p);
}

static void test_autotune_print(void **state)
{
    (void)state;
    assert_ast_contains(autotune_src,
        "(@autotune (= key (list M N K)) (= space (map (= BM (list 64 128 256)) (= BN (list 64 128 256))"
        " (= BK (list 32 64)) (= warps (list 4 8)) (= stages (list 2 3 4)))) (= where (<= (* BM BN)"
        " (* 128 256))) (= default (map (= BM 128) (= BN 128) (= BK 64) (= warps 4) (= stages 3)))"
        " (= configs (list (map (= BM 64)) (map (= BM 128) (= warps 8)))))\n  (@launch (= stages 3))");
    assert_ast_contains(autotune_src, "(grid (call cdiv M BM) (call cdiv N BN))");
}

static void test_attr_positional_and_bare(void **state)
{
    (void)state;
    assert_ast_contains("@inline @tag(1, {}, x = 2) fn f() {}",
                        "(fn f\n  (@inline)\n  (@tag 1 (map) (= x 2))");
}

static void test_fn_examples(void **state)
{
    (void)state;
    char *got = ast_of(
        "fn gelu(x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }\n"
        "fn swizzle(pid: i32, m: i32, n: i32, const G: i32) -> (i32, i32) { return (pid, m); }\n"
        "fn one(x: f32) -> f32 { return x; }\n");
    assert_string_equal(got,
        "(fn gelu\n  (params\n    (x))\n  (body\n"
        "    (return (* (* 0.5 x) (+ 1.0 (call erf (* x 0.7071067811865476)))))))\n"
        "(fn swizzle\n  (params\n    (pid i32)\n    (m i32)\n    (n i32)\n    (const G i32))\n"
        "  (ret (tuple i32 i32))\n  (body\n    (return (tuple pid m))))\n"
        "(fn one\n  (params\n    (x f32))\n  (ret f32)\n  (body\n    (return x)))\n");
    free(got);
}

static void test_ffn_graph(void **state)
{
    (void)state;
    const char *src =
        "graph ffn(x: bf16[T, 1024], w1: bf16[1024, 4096], b1: bf16[4096],\n"
        "          w2: bf16[4096, 1024], b2: bf16[1024]) -> bf16[T, 1024]\n"
        "{\n"
        "    let h = gelu(x @ w1 + b1);\n"
        "    return h @w2 + b2;\n"
        "}\n";
    char *got = ast_of(src);
    assert_string_equal(got,
        "(graph ffn\n  (params\n    (x (tensor bf16 T 1024))\n    (w1 (tensor bf16 1024 4096))\n"
        "    (b1 (tensor bf16 4096))\n    (w2 (tensor bf16 4096 1024))\n    (b2 (tensor bf16 1024)))\n"
        "  (ret (tensor bf16 T 1024))\n  (body\n    (let h (call gelu (+ (@ x w1) b1)))\n"
        "    (return (+ (@ h w2) b2))))\n");
    free(got);
    Parse *p = parse(src);
    const AstType *t = p->prog->items[0].params[0].type;
    assert_int_equal(t->kind, AST_TYPE_TENSOR);
    assert_int_equal(t->ndims, 2);
    assert_int_equal(t->dims[0]->kind, AST_NAME);
    assert_int_equal(t->dims[1]->kind, AST_INT);
    done(p);
}

static void test_graph_tuple_return(void **state)
{
    (void)state;
    assert_ast_contains("graph g(x: f32[T]) -> (f32[T], f32[T]) { return (x, x); }",
                        "(ret (tuple (tensor f32 T) (tensor f32 T)))");
}

/* ---- precedence ------------------------------------------------------------------- */

static void test_prec_arith(void **state)
{
    (void)state;
    assert_expr("a + b * c", "(+ a (* b c))");
    assert_expr("a * b + c", "(+ (* a b) c)");
    assert_expr("a - b - c", "(- (- a b) c)");
    assert_expr("a / b % c * d", "(* (% (/ a b) c) d)");
    assert_expr("a @ b * c", "(* (@ a b) c)");
    assert_expr("(a + b) * c", "(* (+ a b) c)");
}

static void test_prec_bitwise_vs_compare(void **state)
{
    (void)state;
    /* comparisons bind looser than bitwise operators (LANGUAGE.md section 2) */
    assert_expr("a < n & b < m", "(< (< a (& n b)) m)");
    assert_expr("(a < n) & (b < m)", "(& (< a n) (< b m))");
    assert_expr("a | b ^ c & d", "(| a (^ b (& c d)))");
    assert_expr("a << b + c", "(<< a (+ b c))");
    assert_expr("a & b << c", "(& a (<< b c))");
    assert_expr("a >> 1 >> 2", "(>> (>> a 1) 2)");
}

static void test_prec_logical(void **state)
{
    (void)state;
    assert_expr("a || b && c", "(|| a (&& b c))");
    assert_expr("a == b && c != d", "(&& (== a b) (!= c d))");
    assert_expr("a <= b || c >= d", "(|| (<= a b) (>= c d))");
    assert_expr("!a && ~b", "(&& (! a) (~ b))");
}

static void test_prec_cast_and_unary(void **state)
{
    (void)state;
    assert_expr("x as f32 * y", "(* (as x f32) y)");
    assert_expr("a * b as f32", "(* a (as b f32))");
    assert_expr("-x as f32", "(as (- x) f32)");
    assert_expr("x as i32 as f16", "(as (as x i32) f16)");
    assert_expr("- - x", "(- (- x))");
    assert_expr("p as *bf16", "(as p (ptr bf16))");
    assert_expr("c as bool", "(as c i1)");
}

static void test_postfix(void **state)
{
    (void)state;
    assert_expr("t[:, None]", "(index t : None)");
    assert_expr("-t[None, :]", "(- (index t None :))");
    assert_expr("f(x)[:, None] * g()", "(* (index (call f x) : None) (call g))");
    assert_expr("(a + b)[None, :]", "(index (+ a b) None :)");
    assert_expr("load(p, mask = m, other = 0.0)", "(call load p (= mask m) (= other 0.0))");
    assert_expr("zeros([BM, BN], f32)", "(call zeros (list BM BN) f32)");
    assert_expr("f(a, b,)", "(call f a b)");
    assert_expr("[]", "(list)");
}

static void test_literals(void **state)
{
    (void)state;
    assert_expr("0x2A + 1_000_000", "(+ 42 1000000)");
    assert_expr("18446744073709551615", "18446744073709551615");
    assert_expr("0xFFFF_FFFF_FFFF_FFFF", "18446744073709551615");
    assert_expr("[1.0, .5, 1e-5, 6.02e23, 1., 2.5E+3]", "(list 1.0 0.5 0.00001 6.02e+23 1.0 2500.0)");
    assert_expr("[inf, -inf, nan, true, false, None]", "(list inf (- inf) nan true false None)");
    assert_expr("print(\"a\\tb\\n\\\\ \\\"q\\\"\", 1)", "(call print \"a\\tb\\n\\\\ \\\"q\\\"\" 1)");
    Parse *p = parse("kernel k() { print(\"x\\ny\"); }");
    const AstExpr *s = p->prog->items[0].body->stmts[0]->value->args[0];
    assert_int_equal(s->kind, AST_STRING);
    assert_string_equal(s->sval, "x\ny");
    done(p);
}

/* ---- statements ------------------------------------------------------------------- */

static void test_statements(void **state)
{
    (void)state;
    char *got = ast_of(
        "kernel k() {\n"
        "    var acc = 0;\n"
        "    acc = acc + 1; acc += 1; acc -= 2; acc *= 3; acc /= 4;\n"
        "    for i in range(0, n, 2) { acc += i; }\n"
        "    for j in range(0, n) { }\n"
        "    while acc < 10 { acc += 1; }\n"
        "    if a { x(); } else if b { y(); } else { z(); }\n"
        "    if c { }\n"
        "    let (p, q) = f();\n"
        "    { let inner = 1; }\n"
        "    ;\n"
        "    return;\n"
        "}\n");
    assert_string_equal(got,
        "(kernel k\n  (params)\n  (body\n"
        "    (var acc 0)\n"
        "    (= acc (+ acc 1))\n    (+= acc 1)\n    (-= acc 2)\n    (*= acc 3)\n    (/= acc 4)\n"
        "    (for i (range 0 n 2)\n      (+= acc i))\n"
        "    (for j (range 0 n))\n"
        "    (while (< acc 10)\n      (+= acc 1))\n"
        "    (if a\n      (then\n        (expr (call x)))\n      (else\n"
        "        (if b\n          (then\n            (expr (call y)))\n"
        "          (else\n            (expr (call z))))))\n"
        "    (if c\n      (then))\n"
        "    (let (p q) (call f))\n"
        "    (block\n      (let inner 1))\n"
        "    (return)))\n");
    free(got);
}

static void test_statement_structure(void **state)
{
    (void)state;
    Parse *p = parse("fn f() { let (a, b) = g(); if x { } else if y { } for i in range(0, 4) { } "
                     "a -= 1; return (a, b); }");
    assert_int_equal(p->diags.nerrors, 0);
    AstStmt **s = p->prog->items[0].body->stmts;
    assert_int_equal(s[0]->kind, AST_LET);
    assert_true(s[0]->destructure);
    assert_int_equal(s[0]->nnames, 2);
    assert_string_equal(s[0]->names[1], "b");
    assert_int_equal(s[1]->kind, AST_IF);
    assert_int_equal(s[1]->else_body->kind, AST_IF);
    assert_null(s[1]->else_body->else_body);
    assert_int_equal(s[2]->kind, AST_FOR);
    assert_int_equal(s[2]->nargs, 2);
    assert_int_equal(s[3]->kind, AST_ASSIGN);
    assert_int_equal(s[3]->op, '-');
    assert_int_equal(s[4]->kind, AST_RETURN);
    assert_int_equal(s[4]->value->kind, AST_TUPLE);
    assert_int_equal(s[4]->value->nargs, 2);
    done(p);
}

static void test_comments_and_empty(void **state)
{
    (void)state;
    Parse *p = parse("");
    assert_int_equal(p->prog->nitems, 0);
    assert_int_equal(p->diags.nerrors, 0);
    done(p);
    p = parse("// only a comment\n/* and\n   another */\n");
    assert_int_equal(p->prog->nitems, 0);
    assert_int_equal(p->diags.nerrors, 0);
    done(p);
    assert_ast_contains("kernel k(/* none */) { // x\n let /* here */ a = 1 /* * */ * 2; }",
                        "(let a (* 1 2))");
}

static void test_trailing_commas(void **state)
{
    (void)state;
    assert_ast_contains("@launch(warps = 4,) fn f(a, b,) -> (i32, f32,) { let (x, y,) = g(a,); "
                        "return [1, 2,][:, None,]; }",
                        "(return (index (list 1 2) : None))");
}

static void test_attribute_vs_matmul(void **state)
{
    (void)state;
    /* '@' + letter is an attribute only at item level, where no bracket is open */
    assert_ast_contains("graph g(x: f32[4, 4]) -> f32[4, 4] { return x @x; } @launch kernel k() {}",
                        "(return (@ x x))");
    assert_ast_contains("graph g(x: f32[4, 4]) -> f32[4, 4] { return x @x; } @launch kernel k() {}",
                        "(kernel k\n  (@launch)");
    assert_expr("(x@w)", "(@ x w)");
}

/* ---- locations -------------------------------------------------------------------- */

static void assert_loc(Loc l, uint32_t line, uint32_t col)
{
    assert_non_null(l.src);
    assert_int_equal(l.line, line);
    assert_int_equal(l.col, col);
}

static void test_locations_items(void **state)
{
    (void)state;
    Parse *p = parse(softmax_src);
    const AstItem *k = &p->prog->items[0];
    assert_ptr_equal(k->loc.src, &p->src);
    assert_loc(k->loc, 2, 1);
    assert_loc(k->name_loc, 2, 8);
    assert_loc(k->attrs[0].loc, 1, 1);
    assert_loc(k->attrs[0].arg_name_locs[0], 1, 9);
    assert_loc(k->params[1].loc, 2, 28);
    assert_loc(k->params[1].type->loc, 2, 33);
    assert_loc(k->params[5].loc, 3, 22);
    assert_loc(k->grid[0]->loc, 4, 10);
    assert_loc(k->body->loc, 5, 1);
    done(p);
}

static void test_locations_exprs(void **state)
{
    (void)state;
    Parse *p = parse(softmax_src);
    AstStmt **s = p->prog->items[0].body->stmts;
    assert_loc(s[0]->loc, 6, 5);                       /* let */
    assert_loc(s[0]->name_locs[0], 6, 9);              /* row */
    assert_loc(s[0]->value->loc, 6, 15);               /* program_id */
    assert_loc(s[0]->value->args[0]->loc, 6, 26);      /* 0 */
    assert_loc(s[2]->value->loc, 8, 21);               /* '<' */
    const AstExpr *cast = s[3]->value;
    assert_int_equal(cast->kind, AST_CAST);
    assert_loc(cast->loc, 9, 57);                      /* 'as' */
    assert_loc(cast->type->loc, 9, 60);                /* f32 */
    assert_loc(cast->lhs->args[2]->loc, 9, 51);        /* unary '-' */
    assert_loc(s[5]->loc, 11, 5);                      /* store */
    done(p);
}

static void test_locations_tabs_and_comments(void **state)
{
    (void)state;
    Parse *p = parse("/* one\n two */ kernel\tk() {\n\t\tx[:, None];\n}");
    const AstItem *k = &p->prog->items[0];
    assert_loc(k->loc, 2, 9);
    assert_loc(k->name_loc, 2, 16);
    const AstExpr *ix = k->body->stmts[0]->value;
    assert_loc(ix->loc, 3, 4);                         /* '[' */
    assert_loc(ix->lhs->loc, 3, 3);
    assert_loc(ix->args[1]->loc, 3, 8);
    done(p);
}

static void test_dump_tokens(void **state)
{
    (void)state;
    const char *text = "@launch kernel k(a: *f32) {\n  x @ w <<= 0x1F 1.5e3 \"s\\n\";\n}";
    Source src = {"t.tile", text, strlen(text)};
    DiagList d;
    diag_init(&d);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_true(fe_dump_tokens(&src, f, &d));
    fclose(f);
    assert_string_equal(buf,
        "1:1 ATTR @launch\n1:9 KEYWORD kernel\n1:16 IDENT k\n1:17 PUNCT (\n1:18 IDENT a\n"
        "1:19 PUNCT :\n1:21 PUNCT *\n1:22 IDENT f32\n1:25 PUNCT )\n1:27 PUNCT {\n"
        "2:3 IDENT x\n2:5 PUNCT @\n2:7 IDENT w\n2:9 PUNCT <<\n2:11 PUNCT =\n2:13 INT 0x1F\n"
        "2:18 FLOAT 1.5e3\n2:24 STRING \"s\\n\"\n2:29 PUNCT ;\n3:1 PUNCT }\n3:2 EOF\n");
    free(buf);
    assert_int_equal(d.nerrors, 0);
    diag_free(&d);
}

/* ---- syntax errors ------------------------------------------------------------------ */

static void test_err_missing_semicolon(void **state)
{
    (void)state;
    assert_errors("kernel k() {\n    let x = a + 1\n    let y = 2;\n}", "2:18: expected ';' after expression\n");
    assert_errors("fn f() { return x }", "1:18: expected ';' after expression\n");
    assert_errors("fn f() { g(a) h(b); }", "1:14: expected ';' after expression\n");
}

static void test_err_expected_expression(void **state)
{
    (void)state;
    assert_errors("fn f() { return }", "1:17: expected an expression, found '}'\n");
    assert_errors("fn f() { let y = ; }", "1:18: expected an expression, found ';'\n");
    assert_errors("fn f() { let y = 1 + * 2; }", "1:22: expected an expression, found '*'\n");
    assert_errors("fn f() { g(1, ); h(,); }", "1:20: expected an expression, found ','\n");
}

static void test_err_unclosed(void **state)
{
    (void)state;
    assert_errors("fn f() { let z = (1 + 2; }", "1:24: expected ',' or ')', found ';'\n");  /* ',': a tuple */
    assert_errors("fn f() { g(a b); }", "1:14: expected ',' or ')', found 'b'\n");
    assert_errors("fn f() { let z = [1, 2; }", "1:23: expected ',' or ']', found ';'\n");
}

static void test_err_item_inside_block(void **state)
{
    (void)state;
    assert_errors("fn f() {\n    let q = 1;\nkernel g() { }\n",
                  "3:1: unexpected 'kernel' inside a block\n");
}

static void test_err_item_level(void **state)
{
    (void)state;
    assert_errors("let x = 1;", "1:1: expected 'kernel', 'fn' or 'graph', found 'let'\n");
    assert_errors("@launch let", "1:9: expected 'kernel', 'fn' or 'graph', found 'let'\n");
    assert_errors("kernel () {}", "1:8: expected a name, found '('\n");
    assert_errors("fn f(a: ) {}", "1:9: expected a type, found ')'\n");
    assert_errors("fn f(x) -> {}", "1:12: expected a type, found '{'\n");
    assert_errors("kernel k() -> i32 {}", "1:12: expected a name or '{', found '->'\n");
}

static void test_err_types(void **state)
{
    (void)state;
    assert_errors("kernel k(a: foo, b: *i33) { let c = x as f31; }",
                  "1:13: unknown type 'foo'\n1:22: unknown type 'i33'\n1:42: unknown type 'f31'\n");
    assert_errors("graph g(x: bf17[T]) { }", "1:12: unknown type 'bf17'\n");
    assert_errors("kernel k(a) { }", "1:10: parameter 'a' of a kernel needs a type\n");
    assert_errors("graph g(x: f32[4], y) { }", "1:20: parameter 'y' of a graph needs a type\n");
}

static void test_err_semantic_syntax(void **state)
{
    (void)state;
    assert_errors("fn f() { let t = x[1, :]; }", "1:20: only ':' and 'None' are allowed in an index\n");
    assert_errors("fn f() { g(a = 1, 2); }", "1:19: positional argument after a named one\n");
    assert_errors("fn f() { for i in range(1) { } }",
                  "1:19: range takes 2 or 3 arguments (lo, hi[, step]), not 1\n");
    assert_errors("kernel k() grod(1) { }",
                  "1:12: expected 'grid(...)' or '{' after the parameters, found 'grod'\n");
    assert_errors("kernel k() grid(1, 2, 3, 4) { }", "1:12: grid takes 1 to 3 expressions, not 4\n");
}

static void test_err_several_per_run(void **state)
{
    (void)state;
    assert_errors(
        "kernel k(a: i32, b: foo) {\n"
        "    let x = a b;\n"
        "    let y = ;\n"
        "    x = 3\n"
        "    let w = 4;\n"
        "    if x { let v = (1; }\n"
        "    return }\n"
        "fn g(x) { return x; }\n"
        "fn h() { $ }\n",
        "1:21: unknown type 'foo'\n"
        "2:14: expected ';' after expression\n"
        "3:13: expected an expression, found ';'\n"
        "4:10: expected ';' after expression\n"
        "6:22: expected ',' or ')', found ';'\n"
        "7:12: expected an expression, found '}'\n"
        "9:10: unexpected character '$'\n");
    Parse *p = parse("fn a() { let x = ; }\nfn b() { }\nkernel c( { }\nfn d() { }\n");
    assert_int_equal(p->diags.nerrors, 2);
    assert_int_equal(p->prog->nitems, 3);          /* a (recovered), b, d */
    assert_string_equal(p->prog->items[2].name, "d");
    done(p);
}

/* ---- lexical errors ----------------------------------------------------------------- */

static void test_err_lexical(void **state)
{
    (void)state;
    assert_errors("fn f() { let x = 99999999999999999999; }", "1:18: integer literal is too large\n");
    assert_errors("fn f() { let x = 0x1_0000_0000_0000_0000; }", "1:18: integer literal is too large\n");
    assert_errors("fn f() { let x = 0x; }", "1:18: hexadecimal literal has no digits\n");
    assert_errors("fn f() { let x = 1e999; }", "1:18: floating-point literal is too large\n");
    /* the token after a bad character gets no syntax error of its own */
    assert_errors("fn f() { let x = 1 # 2; }", "1:20: unexpected character '#'\n");
    assert_errors("fn f() { let \xc3\xa9 = 1; }", "1:14: unexpected character '\xc3\xa9'\n");
    assert_errors("fn f() { let x = \x7f; }", "1:18: unexpected character '\\x7f'\n");
    assert_errors("fn f() { print(\"a\\qb\"); }", "1:18: unknown escape sequence '\\q'\n");
}

static void test_err_nul_byte(void **state)
{
    (void)state;
    static const char text[] = "fn f() {\n  let x = 1;\0\n}\nfn g() { }";
    char *got = errors_of_bytes(text, sizeof text - 1);
    assert_string_equal(got, "2:13: unexpected character '\\0'\n");
    free(got);
    Parse *p = parse_bytes(text, sizeof text - 1);
    assert_int_equal(p->prog->nitems, 2);           /* the NUL did not end the input */
    done(p);
}

static void test_err_unterminated(void **state)
{
    (void)state;
    assert_errors("fn f() { }\n  /* never\n closed", "2:3: unterminated comment\n");
    assert_errors("fn f() {\n  print(\"abc);\n}", "2:9: unterminated string\n");
    assert_errors("fn f() { print(\"abc\\", "1:16: unterminated string\n");
}

/* ---- limits ------------------------------------------------------------------------- */

static char *repeat(const char *head, const char *unit, size_t n, const char *tail)
{
    size_t hl = strlen(head), ul = strlen(unit), tl = strlen(tail);
    char *s = malloc(hl + ul * n + tl + 1), *q = s;
    memcpy(q, head, hl);
    q += hl;
    for (size_t i = 0; i < n; i++, q += ul) memcpy(q, unit, ul);
    memcpy(q, tail, tl + 1);
    return s;
}

static void assert_one_error(const char *head, const char *unit, size_t n, const char *tail, const char *msg)
{
    char *src = repeat(head, unit, n, tail);
    Parse *p = parse(src);
    assert_int_equal(p->diags.nerrors, 1);
    assert_string_equal(p->diags.items[0].msg, msg);
    done(p);
    free(src);
}

static void assert_too_deep(const char *head, const char *unit, size_t n, const char *tail)
{
    assert_one_error(head, unit, n, tail, "nesting is too deep (more than 256 levels)");
}

static void test_deep_parens(void **state)
{
    (void)state;
    assert_too_deep("kernel k() { let x = ", "(", 100000, "1;}");
    char *src = repeat("kernel k() { let x = ", "(", 100000, "1;}");
    char *got = errors_of(src);
    assert_string_equal(got, "1:277: nesting is too deep (more than 256 levels)\n");
    free(got);
    free(src);
}

static void test_deep_other(void **state)
{
    (void)state;
    assert_too_deep("kernel k() { let x = ", "[", 100000, "");
    assert_too_deep("kernel k() ", "{", 100000, "");
    assert_too_deep("kernel k() { let x = ", "-", 100000, "1;}");
    assert_too_deep("kernel k() { let x = ", "!", 300, "1;}");
    /* a left-associative chain is no nesting, but its length is limited */
    assert_one_error("kernel k() { let x = 1", "+1", 100000, ";}",
                     "this expression is too long (more than 8192 operators in a chain); split it with let");
    assert_too_deep("kernel k() { let x = 1", "+(1", 300, "");
    assert_too_deep("kernel k() { let x = 1", " as f32", 300, ";}");
    assert_too_deep("kernel k() { if a {}", " else if a {}", 100000, "}");
    assert_too_deep("kernel k() { let x = ", "f(", 300, "");
}

static void test_deep_but_allowed(void **state)
{
    (void)state;
    char *chain = repeat("kernel k() { let x = 1", " + 1", 8000, "; }");
    Parse *pc = parse(chain);
    assert_int_equal(pc->diags.nerrors, 0);
    done(pc);
    free(chain);
    char *src = repeat("kernel k() { let x = ", "(", 200, "1");
    char *full = repeat(src, ")", 200, "; }");
    Parse *p = parse(full);
    assert_int_equal(p->diags.nerrors, 0);
    done(p);
    free(full);
    free(src);
    src = repeat("kernel k() { if a {}", " else if a {}", 200, "}");
    p = parse(src);
    assert_int_equal(p->diags.nerrors, 0);
    done(p);
    free(src);
}

static void test_many_errors_terminate(void **state)
{
    (void)state;
    char *src = repeat("fn f() {", " let = ;", 10000, "}");
    Parse *p = parse(src);
    assert_true(p->diags.nerrors >= 10000);
    assert_int_equal(p->diags.len, 50);            /* recorded up to the limit, counted after */
    done(p);
    free(src);
}

/* ---- inputs the fuzzer found --------------------------------------------------------- */

/* Every file in tests/fuzz/regressions/ once crashed or hung the parser: it must now
 * parse to a list of errors. */
static void test_fuzz_regressions(void **state)
{
    (void)state;
    /* CMake compiles this file by its absolute path: tests/unit/test_parser.c */
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strstr(dir, "/unit/test_parser.c");
    assert_non_null(slash);
    snprintf(slash, sizeof dir - (size_t)(slash - dir), "/fuzz/regressions");
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        Source *s = source_read(path);
        assert_non_null(s);
        Parse *p = parse_bytes(s->text, s->len);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        ast_print(p->prog, f);
        fclose(f);
        free(buf);
        /* A finding may be a valid program (it crashed a later stage): what must hold is
         * that the parse ends and every diagnostic points into the file. */
        assert_non_null(p->prog);
        for (size_t i = 0; i < p->diags.len; i++) assert_true(p->diags.items[i].loc.line > 0);
        done(p);
        source_free(s);
    }
    closedir(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_ast),
        cmocka_unit_test(test_softmax_structure),
        cmocka_unit_test(test_autotune_attr),
        cmocka_unit_test(test_autotune_print),
        cmocka_unit_test(test_attr_positional_and_bare),
        cmocka_unit_test(test_fn_examples),
        cmocka_unit_test(test_ffn_graph),
        cmocka_unit_test(test_graph_tuple_return),
        cmocka_unit_test(test_prec_arith),
        cmocka_unit_test(test_prec_bitwise_vs_compare),
        cmocka_unit_test(test_prec_logical),
        cmocka_unit_test(test_prec_cast_and_unary),
        cmocka_unit_test(test_postfix),
        cmocka_unit_test(test_literals),
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_statement_structure),
        cmocka_unit_test(test_comments_and_empty),
        cmocka_unit_test(test_trailing_commas),
        cmocka_unit_test(test_attribute_vs_matmul),
        cmocka_unit_test(test_locations_items),
        cmocka_unit_test(test_locations_exprs),
        cmocka_unit_test(test_locations_tabs_and_comments),
        cmocka_unit_test(test_dump_tokens),
        cmocka_unit_test(test_err_missing_semicolon),
        cmocka_unit_test(test_err_expected_expression),
        cmocka_unit_test(test_err_unclosed),
        cmocka_unit_test(test_err_item_inside_block),
        cmocka_unit_test(test_err_item_level),
        cmocka_unit_test(test_err_types),
        cmocka_unit_test(test_err_semantic_syntax),
        cmocka_unit_test(test_err_several_per_run),
        cmocka_unit_test(test_err_lexical),
        cmocka_unit_test(test_err_nul_byte),
        cmocka_unit_test(test_err_unterminated),
        cmocka_unit_test(test_deep_parens),
        cmocka_unit_test(test_deep_other),
        cmocka_unit_test(test_deep_but_allowed),
        cmocka_unit_test(test_many_errors_terminate),
        cmocka_unit_test(test_fuzz_regressions),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
