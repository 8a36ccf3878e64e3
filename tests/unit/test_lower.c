/* Lowering (frontend/lower*.c): small programs are parsed, lowered, verified and run in
 * the interpreter, and their results compared with what the source means; the IR is
 * checked where the shape of it is the point (promotion, broadcasting, consts); and
 * each rule's diagnostic is checked by its exact message and line:col. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "frontend/frontend.h"
#include "ir/interp.h"

/* ---- harness --------------------------------------------------------------------- */
typedef struct T {
    IrCtx *ctx;
    Source *src;
    DiagList *d;
    IrModule *m;
} T;

static void lower_with(T *t, const char *text, const FeOptions *opt)
{
    t->ctx = ir_ctx_create();
    t->src = source_from_string("t.tile", text);
    t->d = ir_ctx_diags(t->ctx);
    AstProgram *p = fe_parse(ir_ctx_arena(t->ctx), t->src, t->d);
    assert_non_null(p);
    if (t->d->nerrors) diag_print(t->d, stderr);
    assert_int_equal(t->d->nerrors, 0);
    t->m = fe_lower(t->ctx, p, opt, t->d);
}

/* Lowers text that must be correct; the result must pass the verifier. */
static void lower_ok(T *t, const char *text, const FeOptions *opt)
{
    lower_with(t, text, opt);
    if (!t->m) diag_print(t->d, stderr);
    assert_non_null(t->m);
    assert_true(ir_verify_module(t->m));
}

static void done(T *t)
{
    ir_ctx_destroy(t->ctx);
    source_free(t->src);
}

static char *ir_text(const IrFunc *f)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    ir_print_func(f, out);
    fclose(out);
    return buf;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++) n++;
    return n;
}

static InterpArg buf(IrElem e, void *data, int64_t n)
{
    return (InterpArg){.is_buffer = true, .u.buf = {e, data, n}};
}
static InterpArg ival(int64_t v) { return (InterpArg){.u.i = v}; }

static void run(T *t, const char *kernel, const InterpArg *args, uint32_t n, int64_t grid0)
{
    IrFunc *f = ir_module_find(t->m, kernel);
    assert_non_null(f);
    int64_t grid[3] = {grid0, 1, 1};
    bool ok = interp_run(f, args, n, grid, NULL, t->d);
    if (!ok) diag_print(t->d, stderr);
    assert_true(ok);
}

/* ---- kernels that run --------------------------------------------------------------- */
static void test_vector_add_runs(void **state)
{
    T t;
    lower_ok(&t,
             "kernel vadd(c: *f32, a: *f32, b: *f32, n: i32, const BLOCK: i32 = 8)\n"
             "    grid(cdiv(n, BLOCK)) {\n"
             "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
             "    let mask = offs < n;\n"
             "    store(c + offs, load(a + offs, mask) + load(b + offs, mask), mask);\n"
             "}\n",
             NULL);
    float a[20], b[20], c[20] = {0};
    for (int i = 0; i < 20; i++) a[i] = (float)i, b[i] = 0.5f * (float)i;
    InterpArg args[] = {buf(IR_F32, c, 20), buf(IR_F32, a, 20), buf(IR_F32, b, 20), ival(20)};
    IrFunc *k = ir_module_find(t.m, "vadd");
    int64_t grid[3];
    assert_int_equal(interp_eval_grid(k->grid, args, 4, grid, t.d), 1);
    assert_int_equal(grid[0], 3);
    run(&t, "vadd", args, 4, grid[0]);
    for (int i = 0; i < 20; i++) assert_true(c[i] == a[i] + b[i]);
    done(&t);
}

static void test_control_flow_runs(void **state)
{
    T t;
    lower_ok(&t,
             "fn twice(x) { return 2 * x; }\n"
             "fn sgn(x: i32) -> i32 { if x < 0 { return -1; } else if x == 0 { return 0; } else { return 1; } }\n"
             "fn divmod(a, b) { return (a / b, a % b); }\n"
             "kernel cf(out: *i32, n: i32) {\n"
             "    var s = 0;\n"
             "    for i in range(0, n) { s += i; }\n"
             "    store(out, s);\n"
             "    var w = 1;\n"
             "    while w < 100 { w = w * 3; }\n"
             "    store(out + 1, w);\n"
             "    var t = 5;\n"
             "    if n > 3 { t = 7; } else { t = 9; }\n"
             "    store(out + 2, t);\n"
             "    store(out + 3, twice(n));\n"
             "    store(out + 4, sgn(-n) + 10 * sgn(0) + 100 * sgn(n));\n"
             "    let (q, r) = divmod(17, 5);\n"
             "    store(out + 5, q * 10 + r);\n"
             "    var acc = zeros([4], i32);\n"
             "    for j in range(0, 8, 2) { acc = acc + j; }\n"
             "    store(out + 6 + arange(0, 4), acc);\n"
             "    if n > 1 { return; }\n"
             "    store(out + 10, 99);\n"
             "}\n",
             NULL);
    int32_t out[11] = {0};
    int32_t n = 5;
    InterpArg args[] = {buf(IR_I32, out, 11), ival(n)};
    run(&t, "cf", args, 2, 1);
    int s = 0, w = 1;
    for (int i = 0; i < n; i++) s += i;
    while (w < 100) w *= 3;
    assert_int_equal(out[0], s);
    assert_int_equal(out[1], w);
    assert_int_equal(out[2], 7);
    assert_int_equal(out[3], 2 * n);
    assert_int_equal(out[4], -1 + 0 + 100);
    assert_int_equal(out[5], (17 / 5) * 10 + 17 % 5);
    for (int i = 6; i < 10; i++) assert_int_equal(out[i], 0 + 2 + 4 + 6);
    assert_int_equal(out[10], 0);  /* after the early return */
    done(&t);
}

static void test_broadcast_outer_runs(void **state)
{
    T t;
    lower_ok(&t,
             "kernel outer(out: *i32) {\n"
             "    let r = arange(0, 4);\n"
             "    let c = arange(0, 8);\n"
             "    store(out + r[:, None] * 8 + c[None, :], r[:, None] * 10 + c);\n"
             "}\n",
             NULL);
    char *ir = ir_text(ir_module_find(t.m, "outer"));
    assert_true(count(ir, "expand_dims") >= 2);
    assert_true(count(ir, "broadcast") >= 2);
    free(ir);
    int32_t out[32];
    InterpArg args[] = {buf(IR_I32, out, 32)};
    run(&t, "outer", args, 1, 1);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++) assert_int_equal(out[i * 8 + j], i * 10 + j);
    done(&t);
}

static void test_reductions_run(void **state)
{
    T t;
    lower_ok(&t,
             "kernel red(out: *f32, idx: *i32, x: *f32) {\n"
             "    let v = load(x + arange(0, 8));\n"
             "    store(out, sum(v, 0));\n"
             "    store(out + 1, max(v, 0));\n"
             "    store(out + 2, min(v, 0));\n"
             "    store(idx, argmax(v, 0));\n"
             "    store(out + 8 + arange(0, 8), cumsum(v, 0));\n"
             "    let m = reshape(v, [2, 4]);\n"
             "    store(out + 16 + arange(0, 4), sum(m, 0));\n"
             "}\n",
             NULL);
    float x[8] = {3, -1, 7, 2, 7, 0, -5, 1}, out[20] = {0};
    int32_t idx[1];
    InterpArg args[] = {buf(IR_F32, out, 20), buf(IR_I32, idx, 1), buf(IR_F32, x, 8)};
    run(&t, "red", args, 3, 1);
    float s = 0, mx = x[0], mn = x[0];
    int am = 0;
    for (int i = 0; i < 8; i++) {
        s += x[i];
        if (x[i] > mx) mx = x[i], am = i;
        if (x[i] < mn) mn = x[i];
    }
    assert_true(out[0] == s && out[1] == mx && out[2] == mn);
    assert_int_equal(idx[0], am);
    float c = 0;
    for (int i = 0; i < 8; i++) assert_true(out[8 + i] == (c += x[i]));
    for (int j = 0; j < 4; j++) assert_true(out[16 + j] == x[j] + x[4 + j]);
    done(&t);
}

static void test_dot_runs(void **state)
{
    T t;
    lower_ok(&t,
             "kernel mm(c: *f32, a: *f32, b: *f32) {\n"
             "    let r = arange(0, 16);\n"
             "    let at = load(a + r[:, None] * 16 + r[None, :]);\n"
             "    let bt = load(b + r[:, None] * 16 + r[None, :]);\n"
             "    store(c + r[:, None] * 16 + r[None, :], dot(at, bt, precision = ieee));\n"
             "}\n",
             NULL);
    char *ir = ir_text(ir_module_find(t.m, "mm"));
    assert_int_equal(count(ir, "dot"), 1);
    free(ir);
    static float a[256], b[256], c[256];
    for (int i = 0; i < 256; i++) a[i] = (float)(i % 7), b[i] = (float)(i % 5) - 2;
    InterpArg args[] = {buf(IR_F32, c, 256), buf(IR_F32, a, 256), buf(IR_F32, b, 256)};
    run(&t, "mm", args, 3, 1);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = 0;
            for (int k = 0; k < 16; k++) s += a[i * 16 + k] * b[k * 16 + j];
            assert_true(c[i * 16 + j] == s);
        }
    done(&t);
}

/* ---- the IR's shape --------------------------------------------------------------------- */
static void test_literal_takes_other_type(void **state)
{
    T t;
    lower_ok(&t,
             "kernel k(y: *f16, x: *f16, i: *i32, o: *f32) {\n"
             "    let v = load(x + arange(0, 4));\n"
             "    store(y + arange(0, 4), v * 2);\n"
             "    let w = load(i + arange(0, 4)) + 1.5;\n"
             "    store(o + arange(0, 4), w);\n"
             "}\n",
             NULL);
    char *ir = ir_text(ir_module_find(t.m, "k"));
    assert_non_null(strstr(ir, "mul"));
    assert_non_null(strstr(ir, ": f16[4]"));          /* v * 2 stays f16 */
    assert_int_equal(count(ir, "convert"), 1);         /* only the i32 tile goes to f32 */
    free(ir);
    done(&t);
}

static void test_f16_bf16_promote_to_f32(void **state)
{
    T t;
    lower_ok(&t,
             "kernel k(o: *f32, a: *f16, b: *bf16) {\n"
             "    store(o, load(a) + load(b));\n"
             "}\n",
             NULL);
    IrFunc *f = ir_module_find(t.m, "k");
    char *ir = ir_text(f);
    assert_int_equal(count(ir, "convert"), 2);
    assert_non_null(strstr(ir, "add"));
    free(ir);
    done(&t);
}

static void test_consts_from_define_autotune_default(void **state)
{
    T t;
    FeDefine defs[] = {{"A", 32}, {"warps", 8}};
    FeOptions opt = {defs, 2, NULL};
    lower_ok(&t,
             "@launch(warps = 2, stages = 3)\n"
             "@autotune(key = [n], space = {B: [16, 32]}, default = {B: 16})\n"
             "kernel k(x: *f32, n: i32, const A: i32 = 4, const B: i32 = 8, const C: i32 = A * 2) {\n"
             "    store(x + arange(0, A), zeros([A], f32));\n"
             "}\n",
             &opt);
    IrFunc *f = ir_module_find(t.m, "k");
    assert_int_equal(f->nconsts, 3);
    assert_string_equal(f->consts[0].name, "A");
    assert_int_equal(f->consts[0].value, 32);     /* -D */
    assert_int_equal(f->consts[1].value, 16);     /* @autotune default */
    assert_int_equal(f->consts[2].value, 64);     /* its default, over A */
    assert_int_equal(f->warps, 8);                /* -D warps beats @launch */
    assert_int_equal(f->stages, 3);
    assert_int_equal(f->body.nargs, 2);           /* consts are no parameters */
    done(&t);
}

static void test_only_named_kernel(void **state)
{
    T t;
    FeOptions opt = {NULL, 0, "b"};
    lower_ok(&t, "kernel a(x: *f32) { }\nkernel b(x: *f32) { }\n", &opt);
    assert_null(ir_module_find(t.m, "a"));
    assert_non_null(ir_module_find(t.m, "b"));
    done(&t);
}

/* The repository root, from this file's path (CMake compiles it by absolute path). */
static void source_root(char *out, size_t n)
{
    snprintf(out, n, "%s", __FILE__);
    char *tail = strstr(out, "tests/unit/test_lower.c");
    if (tail) *tail = 0;
    else snprintf(out, n, "./");
}

static void test_examples_lower(void **state)
{
    char root[256];
    source_root(root, sizeof root);
    static const char *const files[] = {"adamw", "cumsum_argmax", "dropout", "gelu_bias", "histogram",
                                        "layernorm", "matmul", "rmsnorm", "softmax", "vector_add"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char path[512];
        snprintf(path, sizeof path, "%sexamples/%s.tile", root, files[i]);
        Source *src = source_read(path);
        assert_non_null(src);
        IrCtx *ctx = ir_ctx_create();
        AstProgram *p = fe_parse(ir_ctx_arena(ctx), src, ir_ctx_diags(ctx));
        IrModule *m = fe_lower(ctx, p, NULL, ir_ctx_diags(ctx));
        if (!m) diag_print(ir_ctx_diags(ctx), stderr);
        assert_non_null(m);
        assert_true(ir_verify_module(m));
        assert_non_null(m->funcs[0]->grid);
        ir_ctx_destroy(ctx);
        source_free(src);
    }
}

/* ---- diagnostics ------------------------------------------------------------------------ */
/* Asserts that lowering fails with exactly `msg` at line:col. */
static void expect_error_at(const char *text, const char *msg, unsigned line, unsigned col)
{
    T t;
    lower_with(&t, text, NULL);
    bool found = false;
    for (size_t i = 0; i < t.d->len && !found; i++) {
        const Diag *g = &t.d->items[i];
        found = g->level == DIAG_ERROR && !strcmp(g->msg, msg) && g->loc.line == line && g->loc.col == col;
    }
    if (!found) {
        fprintf(stderr, "expected %u:%u: %s\ngot:\n", line, col, msg);
        diag_print(t.d, stderr);
    }
    assert_true(found);
    assert_null(t.m);
    done(&t);
}

static const struct {
    const char *stmt;   /* line 2 of a kernel k(x: *f32, n: i32) */
    const char *mark;   /* where the error points in stmt */
    const char *msg;
} stmt_errors[] = {
    {"let c = arange(0, 64) + arange(0, 32);", "+", "cannot add a tile of shape [64] to one of shape [32]"},
    {"let c = arange(0, 64) - arange(0, 32);", "-", "cannot subtract a tile of shape [32] from one of shape [64]"},
    {"let c = arange(0, 4)[:, None] * arange(0, 8)[None, :] * arange(0, 2);", "* arange(0, 2)",
     "cannot multiply a tile of shape [4, 8] by one of shape [2]"},
    {"let y = foo + 1;", "foo", "unknown name 'foo'"},
    {"let z = 1; z = 2;", "z = 2", "cannot assign to 'z': it was declared with let (use var)"},
    {"n = 2;", "n", "cannot assign to 'n': it is a parameter (copy it into a var first)"},
    {"var acc = zeros([64], i32); acc = zeros([64], f32);", "acc = zeros([64], f32)",
     "cannot assign a value of type f32[64] to variable 'acc' of type i32[64]; declare it as `var acc = 0.0;` or "
     "convert with `as`"},
    {"let t = zeros([3], f32);", "[3]", "tile shape [3] is not a power of two: each size must be 1, 2, 4, ..."},
    {"let t = zeros([n], f32);", "n]", "the shape of zeros must be known at compile time"},
    {"let t = zeros([2048, 1024], f32);", "[2048", "tile of 2097152 elements is too large (at most 1048576)"},
    {"if arange(0, 4) < 2 { }", "<", "if needs a scalar condition; for tiles use where(c, a, b)"},
    {"if n { }", "n {", "if needs a boolean condition (a comparison), got i32"},
    {"let w = n && (n < 2);", "&&", "'&&' needs boolean operands (comparisons), got i32"},
    {"let q = lod(x);", "lod", "unknown function 'lod'; did you mean 'load'?"},
    {"let r = load(x, maks = n < 3);", "maks", "unknown argument 'maks' to load; did you mean 'mask'?"},
    {"let s = load(x, n < 1, 0.0, 1);", "load", "load takes 1 to 3 arguments, got 4"},
    {"let d = dot(zeros([8, 32], f16), zeros([16, 16], f16));", "dot",
     "dot needs [M, K] x [K, N], got [8, 32] x [16, 16]"},
    {"for i in range(0, 4) { i = 1; }", "i = 1", "cannot assign to 'i': it is the loop variable"},
    {"let p = x * 2;", "*", "'*' is not defined for pointers; a pointer moves with p + n and p - n"},
    {"let v = sum(arange(0, 4), 1);", "1)", "axis 1 of sum is out of range for a tile of rank 1"},
    {"let e = reshape(arange(0, 64), [8, 4]);", "reshape",
     "cannot reshape a tile of shape [64] to [8, 4]: the element counts differ"},
    {"return 1;", "1", "a kernel returns nothing; write `return;`"},
    {"let f = f32;", "f32", "'f32' is a type, not a value"},
    {"let v = store(x, 1.0);", "store", "store(...) gives no value"},
    {"let v = (load(x) as i8) + 300;", "300", "the literal 300 does not fit in i8"},
    {"store(x, 1.0, n);", "n)", "the mask of store must be boolean (a comparison), got i32"},
    {"let d = dot(zeros([16, 16], f16), zeros([16, 16], f16), zeros([16, 16], f16));", "zeros([16, 16], f16))",
     "the accumulator of dot must be f32[16, 16], got f16[16, 16]"},
    {"let d = dot(zeros([16, 16], f16), zeros([16, 16], f16), precision = tf32);", "tf32",
     "the precision of dot applies only to f32 inputs, got f16"},
    {"let p = program_id(3);", "3", "the axis of program_id must be 0, 1 or 2"},
    {"let a = arange(0, 12);", "arange", "tile shape [12] is not a power of two: each size must be 1, 2, 4, ..."},
    {"for i in range(0, 1.5) { }", "1.5", "range needs integer scalars, got a float literal"},
    {"let w = where(n, 1, 2);", "n,", "the condition of where must be boolean (a comparison), got i32"},
    {"k(x, n);", "k(", "cannot call kernel 'k': only fns can be called"},
    {"let p = x + 1.5;", "+", "cannot add *f32 and f32: a pointer moves by an integer number of elements"},
    {"let b = !n;", "!", "'!' needs a boolean (comparison) operand, got i32"},
    {"let s = load(x + arange(0, 4), arange(0, 8) < 2);", "< 2",
     "cannot broadcast the mask of load of shape [8] to shape [4]"},
};

static void test_statement_errors(void **state)
{
    for (size_t i = 0; i < sizeof stmt_errors / sizeof *stmt_errors; i++) {
        char text[512];
        snprintf(text, sizeof text, "kernel k(x: *f32, n: i32) {\n    %s\n}\n", stmt_errors[i].stmt);
        const char *at = strstr(stmt_errors[i].stmt, stmt_errors[i].mark);
        assert_non_null(at);
        expect_error_at(text, stmt_errors[i].msg, 2, (unsigned)(at - stmt_errors[i].stmt) + 5);
    }
}

static void test_item_errors(void **state)
{
    expect_error_at("kernel k(x: *f32, const B: i32) { }\n",
                    "kernel 'k' needs a value for const parameter 'B' (give it with -D B=...)", 1, 25);
    expect_error_at("@foo\nkernel k() { }\n", "unknown attribute '@foo'", 1, 1);
    expect_error_at("@launch(warps = 3)\nkernel k() { }\n", "warps must be a power of two from 1 to 32, got 3", 1, 17);
    expect_error_at("kernel k() { }\nkernel k() { }\n", "'k' is already defined at line 1", 2, 8);
    expect_error_at("fn f(x) { return f(x); }\nkernel k() { let a = f(1); }\n",
                    "recursive call of fn 'f' (recursion is not supported)", 1, 18);
    expect_error_at("fn f(x) { if x > 0 { return 1; } return 2; }\nkernel k() { let a = f(1); }\n",
                    "a return in fn 'f' must be its last statement, or end both branches of a final if/else", 1, 22);
    expect_error_at("fn f(x) { for i in range(0, 4) { return x; } return x; }\nkernel k() { let a = f(1); }\n",
                    "a return inside a loop is not supported in fn 'f'", 1, 34);
    expect_error_at("fn f(x) { return (x, x); }\nkernel k() { let (a, b, c) = f(1); }\n",
                    "fn 'f' returns 2 values but 3 names are given", 2, 14);
    expect_error_at("fn f(x) { return (x, x); }\nkernel k() { let a = f(1); }\n",
                    "fn 'f' returns 2 values; take them with `let (a, b) = f(...)`", 2, 22);
    expect_error_at("@autotune(key = [B], default = {B: 16})\nkernel k(const B: i32) { }\n",
                    "an autotune key must name a run-time scalar parameter of 'k'", 1, 18);
}

static void test_unknown_define_and_kernel(void **state)
{
    T t;
    FeDefine defs[] = {{"FOO", 3}};
    FeOptions opt = {defs, 1, "nope"};
    lower_with(&t, "kernel k(x: *f32, const B: i32 = 4) { }\n", &opt);
    assert_null(t.m);
    assert_int_equal(t.d->nerrors, 2);
    assert_string_equal(t.d->items[0].msg, "-D FOO does not name a const parameter");
    assert_null(t.d->items[0].loc.src);
    assert_string_equal(t.d->items[1].msg, "no kernel named 'nope'");
    done(&t);
}

static void test_errors_do_not_cascade(void **state)
{
    T t;
    lower_with(&t,
               "kernel k(x: *f32) {\n"
               "    let a = nothere * 2;\n"
               "    let b = a + arange(0, 4);\n"
               "    store(x + arange(0, 4), b);\n"
               "    let c = arange(0, 3);\n"
               "}\n",
               NULL);
    assert_null(t.m);
    assert_int_equal(t.d->nerrors, 2);   /* the unknown name, and line 5 */
    assert_int_equal(t.d->items[1].loc.line, 5);
    done(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vector_add_runs),
        cmocka_unit_test(test_control_flow_runs),
        cmocka_unit_test(test_broadcast_outer_runs),
        cmocka_unit_test(test_reductions_run),
        cmocka_unit_test(test_dot_runs),
        cmocka_unit_test(test_literal_takes_other_type),
        cmocka_unit_test(test_f16_bf16_promote_to_f32),
        cmocka_unit_test(test_consts_from_define_autotune_default),
        cmocka_unit_test(test_only_named_kernel),
        cmocka_unit_test(test_examples_lower),
        cmocka_unit_test(test_statement_errors),
        cmocka_unit_test(test_item_errors),
        cmocka_unit_test(test_unknown_define_and_kernel),
        cmocka_unit_test(test_errors_do_not_cascade),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
