/* The graph checker (frontend/graph.c, rules in docs/GRAPHS.md).
 *
 * Each case parses a small .tile text, checks its last graph item and compares the
 * diagnostics: well-formed graphs must give none, each malformed one exactly the
 * expected message at the expected line:col. Sources are written one construct per
 * line so that the columns in the expectations can be read off the text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"

/* The case being checked; freed by teardown, also when an assertion fails. */
static struct {
    Arena *a;
    Source *src;
    DiagList d;
} cur;

static int teardown(void **state)
{
    (void)state;
    diag_free(&cur.d);
    arena_destroy(cur.a);
    source_free(cur.src);
    memset(&cur, 0, sizeof cur);
    return 0;
}

/* Parses text and checks its last graph; the diagnostics land in cur.d. */
static bool check(const char *text)
{
    cur.a = arena_create();
    cur.src = source_from_string("t.tile", text);
    diag_init(&cur.d);
    AstProgram *p = fe_parse(cur.a, cur.src, &cur.d);
    assert_non_null(p);
    assert_int_equal(cur.d.nerrors, 0);        /* the tests' sources must parse */
    const AstItem *g = NULL;
    for (uint32_t i = 0; i < p->nitems; i++)
        if (p->items[i].kind == AST_GRAPH) g = &p->items[i];
    assert_non_null(g);
    bool ok = fe_check_graph(cur.a, p, g, &cur.d);
    assert_int_equal(ok, cur.d.nerrors == 0);
    return ok;
}

static void dump(const char *what)
{
    for (size_t i = 0; i < cur.d.len; i++)
        fprintf(stderr, "%s: %u:%u: %s\n", what, cur.d.items[i].loc.line, cur.d.items[i].loc.col,
                cur.d.items[i].msg);
}

static void expect_clean(const char *text)
{
    bool ok = check(text);
    dump("unexpected");
    assert_true(ok);
    assert_int_equal(cur.d.len, 0);
}

/* Exactly one error, `msg` at line:col (notes allowed after it). */
static void expect_error(const char *text, uint32_t line, uint32_t col, const char *msg)
{
    assert_false(check(text));
    if (cur.d.nerrors != 1 || strcmp(cur.d.items[0].msg, msg) != 0) dump("got");
    assert_int_equal(cur.d.nerrors, 1);
    assert_int_equal(cur.d.items[0].level, DIAG_ERROR);
    assert_string_equal(cur.d.items[0].msg, msg);
    assert_int_equal(cur.d.items[0].loc.line, line);
    assert_int_equal(cur.d.items[0].loc.col, col);
}

#define GELU "fn gelu(x) { return 0.5 * x * (1.0 + erf(x * 0.7071067811865476)); }\n"
#define FFN_PARAMS "graph ffn(x: bf16[T, 1024], w1: bf16[1024, 4096], b1: bf16[4096],\n" \
                   "          w2: bf16[4096, 1024], b2: bf16[1024]) -> bf16[T, 1024]\n"

/* ---- well-formed graphs -------------------------------------------------------------- */

static void test_ffn(void **state)
{
    (void)state;
    expect_clean(GELU FFN_PARAMS "{\n    let h = gelu(x @ w1 + b1);\n    return h @ w2 + b2;\n}\n");
}

static void test_transformer_block(void **state)
{
    (void)state;
    expect_clean(
        "fn residual(x, y) { return x + y; }\n"
        "graph block(x: bf16[B, L, 512], wq: bf16[512, 512], wk: bf16[512, 512],\n"
        "            wv: bf16[512, 512], g: f32[512], b: f32[512], eps: f32, seed: i64)\n"
        "    -> (bf16[B, L, 512], f32[B, L])\n"
        "{\n"
        "    let n = layer_norm(x, g, b, eps);\n"
        "    let q = reshape(n @ wq, [B, L, 8, 64]);\n"
        "    let k = reshape(n @ wk, [B, L, 8, 64]);\n"
        "    let v = reshape(n @ wv, [B, L, 8, 64]);\n"
        "    let a = attention(q, k, v, causal = true);\n"
        "    let o = dropout(reshape(a, [B, L, 512]), 0.1, seed);\n"
        "    let m = mean(residual(x, o) as f32, -1);\n"
        "    return (residual(x, o), m);\n"
        "}\n");
}

static void test_split_concat(void **state)
{
    (void)state;
    expect_clean("graph g(x: f32[T, 1024], y: f32[S, 1024]) -> (f32[T, 256], f32[768])\n"
                 "{\n"
                 "    let (a, b) = split(x, [256, 768], 1);\n"
                 "    let (c, d) = split(y, [256, 768], axis = 1);\n"
                 "    return (a, sum(concat([b, d, d], 0), 0));\n"
                 "}\n");
}

/* Concatenated symbolic sizes add up: [T] ++ [S] ++ [S] is [2*S+T]. */
static void test_concat_symbolic_sum(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T], y: f32[S]) -> f32[T]\n"
                 "{\n"
                 "    return concat([x, y, y], 0);\n"
                 "}\n",
                 3, 5, "graph 'g' returns f32[2*S+T], but its declared return type is f32[T]");
}

static void test_reductions_and_vars(void **state)
{
    (void)state;
    expect_clean("graph g(x: f16[T, 64], y: bf16[64]) -> f32[T]\n"
                 "{\n"
                 "    var acc = sum(x + y, axis = 1);\n"
                 "    acc += max(softmax(x, -1), 1) as f32;\n"
                 "    let r = rms_norm(x, y, 1e-5);\n"
                 "    return acc + sum(maximum(r, 0.0), 1);\n"
                 "}\n");
}

/* ---- errors --------------------------------------------------------------------------- */

static void test_add_shape_mismatch(void **state)
{
    (void)state;
    expect_error("graph g(x: bf16[T, 1024], z: bf16[512]) -> bf16[T, 1024]\n"
                 "{\n"
                 "    return x + z;\n"
                 "}\n",
                 3, 14, "cannot add a tensor of shape [T, 1024] to one of shape [512]");
}

static void test_symbols_differ(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T], y: f32[S]) -> f32[T]\n"
                 "{\n"
                 "    return x * y;\n"
                 "}\n",
                 3, 14, "cannot multiply a tensor of shape [T] by one of shape [S]");
}

static void test_matmul_inner(void **state)
{
    (void)state;
    expect_error("graph g(x: bf16[T, 1024], w: bf16[512, 4096]) -> bf16[T, 4096]\n"
                 "{\n"
                 "    return x @ w;\n"
                 "}\n",
                 3, 14, "cannot multiply a tensor of shape [T, 1024] by one of shape [512, 4096]: "
                 "inner sizes 1024 and 512 differ");
}

static void test_wrong_return_shape(void **state)
{
    (void)state;
    expect_error(GELU "graph ffn(x: bf16[T, 1024], w1: bf16[1024, 4096]) -> bf16[T, 1024]\n"
                 "{\n"
                 "    return gelu(x @ w1);\n"
                 "}\n",
                 4, 5, "graph 'ffn' returns bf16[T, 4096], but its declared return type is bf16[T, 1024]");
}

static void test_wrong_return_elem(void **state)
{
    (void)state;
    expect_error("graph g(x: bf16[T, 8]) -> bf16[T, 8]\n"
                 "{\n"
                 "    return x as f32;\n"
                 "}\n",
                 3, 5, "graph 'g' returns f32[T, 8], but its declared return type is bf16[T, 8]");
}

static void test_wrong_return_count(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> (f32[T], f32[T])\n"
                 "{\n"
                 "    return x;\n"
                 "}\n",
                 3, 5, "graph 'g' returns f32[T], but its declared return type is (f32[T], f32[T])");
}

static void test_unknown_fn(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    return gelu(x);\n"
                 "}\n",
                 3, 12, "unknown function 'gelu'");
}

static void test_unknown_name(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    return x + y;\n"
                 "}\n",
                 3, 16, "unknown name 'y'");
}

static void test_kernel_builtin(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    let p = program_id(0);\n"
                 "    return x;\n"
                 "}\n",
                 3, 13, "program_id is not available in a graph (graphs work on whole tensors; use a kernel)");
}

static void test_kernel_builtin_in_fn(void **state)
{
    (void)state;
    assert_false(check("fn f(p) { return load(p); }\n"
                       "graph g(x: f32[T]) -> f32[T]\n"
                       "{\n"
                       "    return f(x);\n"
                       "}\n"));
    assert_int_equal(cur.d.nerrors, 1);
    assert_string_equal(cur.d.items[0].msg,
                        "load is not available in a graph (graphs work on whole tensors; use a kernel)");
    assert_int_equal(cur.d.items[0].loc.line, 1);
    assert_int_equal(cur.d.items[0].loc.col, 18);
    assert_int_equal(cur.d.len, 2);                        /* and a note at the call */
    assert_int_equal(cur.d.items[1].level, DIAG_NOTE);
    assert_string_equal(cur.d.items[1].msg, "in fn 'f' called here with (f32[T])");
    assert_int_equal(cur.d.items[1].loc.line, 4);
}

static void test_bad_axis(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 64]) -> f32[T]\n"
                 "{\n"
                 "    return sum(x, 2);\n"
                 "}\n",
                 3, 19, "axis 2 is out of range for a tensor of shape [T, 64] (rank 2)");
}

static void test_bad_negative_axis(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 64]) -> f32[T, 64]\n"
                 "{\n"
                 "    return softmax(x, -3);\n"
                 "}\n",
                 3, 23, "axis -3 is out of range for a tensor of shape [T, 64] (rank 2)");
}

static void test_max_two_tensors(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T], y: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    return max(x, y);\n"
                 "}\n",
                 3, 19, "the axis of max must be an integer literal (use maximum(a, b) for the element-wise maximum)");
}

static void test_layer_norm_weight(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 1024], w: f32[512], b: f32[1024]) -> f32[T, 1024]\n"
                 "{\n"
                 "    return layer_norm(x, w, b, 1e-5);\n"
                 "}\n",
                 3, 26, "the weight of layer_norm must be a float tensor of shape [1024] "
                 "(the last size of the input [T, 1024]), not f32[512]");
}

static void test_split_sizes(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 1024]) -> f32[T, 512]\n"
                 "{\n"
                 "    let (a, b) = split(x, [512, 256], 1);\n"
                 "    return a;\n"
                 "}\n",
                 3, 27, "split sizes [512, 256] add up to 768, but axis 1 of the tensor of shape "
                 "[T, 1024] has size 1024");
}

static void test_unpack_count(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 1024]) -> f32[T, 512]\n"
                 "{\n"
                 "    let (a, b) = split(x, [512, 256, 256], 1);\n"
                 "    return a;\n"
                 "}\n",
                 3, 5, "cannot unpack (f32[T, 512], f32[T, 256], f32[T, 256]) into 2 names");
}

static void test_attention_head_size(void **state)
{
    (void)state;
    expect_error("graph g(q: bf16[B, L, 64], k: bf16[B, L, 128], v: bf16[B, L, 64]) -> bf16[B, L, 64]\n"
                 "{\n"
                 "    return attention(q, k, v, true);\n"
                 "}\n",
                 3, 12, "attention: q of shape [B, L, 64] and k of shape [B, L, 128] have different "
                 "head sizes (64 and 128)");
}

static void test_attention_lengths(void **state)
{
    (void)state;
    expect_error("graph g(q: bf16[L, 64], k: bf16[S, 64], v: bf16[L, 32]) -> bf16[L, 32]\n"
                 "{\n"
                 "    return attention(q, k, v, false);\n"
                 "}\n",
                 3, 12, "attention: k of shape [S, 64] and v of shape [L, 32] have different "
                 "sequence lengths (S and L)");
}

static void test_reshape_count(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 1024]) -> f32[T, 8, 64]\n"
                 "{\n"
                 "    return reshape(x, [T, 8, 64]);\n"
                 "}\n",
                 3, 12, "cannot reshape a tensor of shape [T, 1024] (1024*T elements) to "
                 "[T, 8, 64] (512*T elements)");
}

static void test_concat_mismatch(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T, 1024], y: f32[T, 512]) -> f32[T, 1536]\n"
                 "{\n"
                 "    return concat([x, y], 0);\n"
                 "}\n",
                 3, 23, "cannot concatenate a tensor of shape [T, 1024] with one of shape "
                 "[T, 512] along axis 0");
}

static void test_generic_fn_error(void **state)
{
    (void)state;
    expect_error("fn addb(x, b) { return x + b; }\n"
                 "graph g(x: f32[T, 64], b: f32[32]) -> f32[T, 64]\n"
                 "{\n"
                 "    return addb(x, b);\n"
                 "}\n",
                 1, 26, "cannot add a tensor of shape [T, 64] to one of shape [32]");
}

static void test_typed_fn_param(void **state)
{
    (void)state;
    expect_error("fn proj(x: f32[N, 64], w: f32[64, M]) -> f32[N, M] { return x @ w; }\n"
                 "graph g(x: f32[T, 32], w: f32[64, 16]) -> f32[T, 16]\n"
                 "{\n"
                 "    return proj(x, w);\n"
                 "}\n",
                 4, 12, "argument 'x' of fn 'proj' must be f32[N, 64], not f32[T, 32]");
}

static void test_recursive_fn(void **state)
{
    (void)state;
    expect_error("fn f(x) { return f(x); }\n"
                 "graph g(x: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    return f(x);\n"
                 "}\n",
                 1, 18, "fn 'f' calls itself; fns are inlined, so they cannot be recursive");
}

static void test_let_reassign(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    let y = x;\n"
                 "    y = x + 1.0;\n"
                 "    return y;\n"
                 "}\n",
                 4, 5, "cannot assign to 'y', which is not a var (it was bound with let)");
}

static void test_return_size_unknown(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> f32[S]\n"
                 "{\n"
                 "    return x;\n"
                 "}\n",
                 1, 27, "unknown size 'S' (sizes are named in the parameters' shapes)");
}

static void test_where_condition(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T], y: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    return where(x, x, y);\n"
                 "}\n",
                 3, 18, "the condition of where must be bool, not f32[T]");
}

static void test_missing_return(void **state)
{
    (void)state;
    expect_error("graph g(x: f32[T]) -> f32[T]\n"
                 "{\n"
                 "    let y = x;\n"
                 "}\n",
                 1, 7, "graph 'g' never returns its result of type f32[T]");
}

/* Several independent mistakes give several errors, one each. */
static void test_many_errors(void **state)
{
    (void)state;
    assert_false(check("graph g(x: f32[T, 64], y: f32[32]) -> f32[T, 64]\n"
                       "{\n"
                       "    let a = x + y;\n"
                       "    let b = a * 2.0;\n"
                       "    let c = store(x, y);\n"
                       "    return sum(x, 5);\n"
                       "}\n"));
    assert_int_equal(cur.d.nerrors, 3);
    assert_int_equal(cur.d.items[0].loc.line, 3);
    assert_int_equal(cur.d.items[1].loc.line, 5);
    assert_int_equal(cur.d.items[2].loc.line, 6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_ffn, teardown),
        cmocka_unit_test_teardown(test_transformer_block, teardown),
        cmocka_unit_test_teardown(test_split_concat, teardown),
        cmocka_unit_test_teardown(test_concat_symbolic_sum, teardown),
        cmocka_unit_test_teardown(test_reductions_and_vars, teardown),
        cmocka_unit_test_teardown(test_add_shape_mismatch, teardown),
        cmocka_unit_test_teardown(test_symbols_differ, teardown),
        cmocka_unit_test_teardown(test_matmul_inner, teardown),
        cmocka_unit_test_teardown(test_wrong_return_shape, teardown),
        cmocka_unit_test_teardown(test_wrong_return_elem, teardown),
        cmocka_unit_test_teardown(test_wrong_return_count, teardown),
        cmocka_unit_test_teardown(test_unknown_fn, teardown),
        cmocka_unit_test_teardown(test_unknown_name, teardown),
        cmocka_unit_test_teardown(test_kernel_builtin, teardown),
        cmocka_unit_test_teardown(test_kernel_builtin_in_fn, teardown),
        cmocka_unit_test_teardown(test_bad_axis, teardown),
        cmocka_unit_test_teardown(test_bad_negative_axis, teardown),
        cmocka_unit_test_teardown(test_max_two_tensors, teardown),
        cmocka_unit_test_teardown(test_layer_norm_weight, teardown),
        cmocka_unit_test_teardown(test_split_sizes, teardown),
        cmocka_unit_test_teardown(test_unpack_count, teardown),
        cmocka_unit_test_teardown(test_attention_head_size, teardown),
        cmocka_unit_test_teardown(test_attention_lengths, teardown),
        cmocka_unit_test_teardown(test_reshape_count, teardown),
        cmocka_unit_test_teardown(test_concat_mismatch, teardown),
        cmocka_unit_test_teardown(test_generic_fn_error, teardown),
        cmocka_unit_test_teardown(test_typed_fn_param, teardown),
        cmocka_unit_test_teardown(test_recursive_fn, teardown),
        cmocka_unit_test_teardown(test_let_reassign, teardown),
        cmocka_unit_test_teardown(test_return_size_unknown, teardown),
        cmocka_unit_test_teardown(test_where_condition, teardown),
        cmocka_unit_test_teardown(test_missing_return, teardown),
        cmocka_unit_test_teardown(test_many_errors, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
