/* Tile IR core: type interning, printer/parser round trips, parser errors, and the
 * verifier's rules (one broken IR per rule, each with the message it must give). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/ir.h"

/* ---- helpers ------------------------------------------------------------------- */
static char *print_module(const IrModule *m)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ir_print_module(m, f);
    fclose(f);
    return buf;
}

static const IrType *ty(IrCtx *c, IrElem e) { return ir_type_scalar(c, e); }

static const IrType *tile1(IrCtx *c, IrElem e, int32_t n) { return ir_type_tile(c, ty(c, e), 1, &n); }

/* The first diagnostic's message, or "" if there is none. */
static const char *first_diag(IrCtx *c)
{
    DiagList *d = ir_ctx_diags(c);
    return d->len ? d->items[0].msg : "";
}

/* A kernel with the given parameters and a builder at the end of its body. */
static IrFunc *kernel(IrModule *m, IrBuilder *b, const IrType *const *params, uint32_t n)
{
    IrFunc *f = ir_func_create(m, IR_FUNC_KERNEL, "k", (Loc){0}, params, NULL, n);
    memset(b, 0, sizeof *b);
    ir_builder_at_end(b, &f->body);
    return f;
}

static void finish(IrBuilder *b) { ir_build(b, IR_OP_RETURN, NULL, 0, NULL, 0, 0); }

/* ---- types --------------------------------------------------------------------- */
static void test_type_interning(void **state)
{
    IrCtx *c = ir_ctx_create();
    int32_t s[2] = {128, 64};
    const IrType *a = ir_type_tile(c, ty(c, IR_F32), 2, s), *b = ir_type_tile(c, ty(c, IR_F32), 2, s);
    assert_ptr_equal(a, b);
    assert_ptr_not_equal(a, ir_type_tile(c, ty(c, IR_F16), 2, s));
    assert_ptr_equal(ir_type_ptr(c, IR_BF16), ir_type_ptr(c, IR_BF16));
    assert_ptr_not_equal(ir_type_ptr(c, IR_BF16), ir_type_ptr(c, IR_F16));
    assert_ptr_equal(ir_type_elem(c, a), ty(c, IR_F32));
    char buf[64];
    assert_string_equal(ir_type_str(a, buf, sizeof buf), "f32[128, 64]");
    assert_string_equal(ir_type_str(ir_type_tile(c, ir_type_ptr(c, IR_F16), 1, s + 1), buf, sizeof buf), "*f16[64]");
    ir_ctx_destroy(c);
}

/* ---- round trips ---------------------------------------------------------------- */
/* A kernel with a loop carrying a tile, an if, a while, a grid function, a const
 * float that needs all 17 digits, name hints that collide and unnamed values. */
static IrModule *build_sample(IrCtx *c)
{
    IrModule *m = ir_module_create(c);
    const IrType *i32 = ty(c, IR_I32), *f32 = ty(c, IR_F32), *t64 = tile1(c, IR_F32, 64);
    const IrType *params[] = {ir_type_ptr(c, IR_F32), i32};
    const char *names[] = {"out", "n"};
    IrFunc *g = ir_func_create(m, IR_FUNC_GRID, "k.grid", (Loc){0}, params, names, 2);
    IrBuilder b = {0};
    ir_builder_at_end(&b, &g->body);
    ir_build(&b, IR_OP_RETURN, &g->body.args[1], 1, NULL, 0, 0);
    IrFunc *f = ir_func_create(m, IR_FUNC_KERNEL, "k", (Loc){0}, params, names, 2);
    f->grid = g;
    ir_builder_at_end(&b, &f->body);
    IrValue lo = ir_const_int(&b, i32, 0), step = ir_const_int(&b, i32, 1);
    IrValue init = ir_const_float(&b, t64, 0.1);
    f->values[init].name = "acc";
    IrValue ops[] = {lo, f->body.args[1], step, init};
    IrOp *loop = ir_build(&b, IR_OP_FOR, ops, 4, &t64, 1, 1);
    f->values[loop->results[0]].name = "acc";
    IrValue iv = ir_block_add_arg(&loop->regions[0], i32, "i");
    IrValue acc = ir_block_add_arg(&loop->regions[0], t64, "acc");
    IrBuilder lb = {0};
    ir_builder_at_end(&lb, &loop->regions[0]);
    IrValue ivf = ir_build1(&lb, IR_OP_CONVERT, f32, &iv, 1);
    IrValue spl = ir_build1(&lb, IR_OP_SPLAT, t64, &ivf, 1);
    IrValue sum_ops[] = {acc, spl};
    IrValue next = ir_build1(&lb, IR_OP_ADD, t64, sum_ops, 2);
    ir_build(&lb, IR_OP_YIELD, &next, 1, NULL, 0, 0);
    IrOp *s = ir_build(&b, IR_OP_SUM, &loop->results[0], 1, &f32, 1, 0);
    IrOp *pr = ir_build(&b, IR_OP_PRINT, s->results, 1, NULL, 0, 0);
    pr->attr.s = "sum \"is\"\n";
    finish(&b);
    return m;
}

static void test_roundtrip_built(void **state)
{
    IrCtx *c = ir_ctx_create();
    IrModule *m = build_sample(c);
    assert_true(ir_verify_module(m));
    char *text = print_module(m);
    assert_non_null(strstr(text, "%acc.1 = for %0, %n, %1 iter(%acc) : f32[64] {"));
    assert_non_null(strstr(text, "^(%i: i32, %acc.2: f32[64]):"));
    assert_non_null(strstr(text, "const 0.10000000000000001 : f32[64]"));
    assert_non_null(strstr(text, "print \"sum \\\"is\\\"\\n\" %"));
    assert_non_null(strstr(text, "grid @k.grid {"));
    Source *src = source_from_string("rt.tir", text);
    IrModule *m2 = ir_parse(c, src);
    assert_non_null(m2);
    assert_true(ir_verify_module(m2));
    char *text2 = print_module(m2);
    assert_string_equal(text, text2);
    assert_ptr_equal(ir_module_find(m2, "k")->grid, ir_module_find(m2, "k.grid"));
    free(text);
    free(text2);
    source_free(src);
    ir_ctx_destroy(c);
}

/* Parsed ops carry their position in the .tir text. */
static void test_parse_locations(void **state)
{
    IrCtx *c = ir_ctx_create();
    Source *src = source_from_string("l.tir", "kernel @k(%x: f32) {\n  %a = neg %x : f32\n    return\n}\n");
    IrModule *m = ir_parse(c, src);
    assert_non_null(m);
    IrOp *neg = m->funcs[0]->body.first;
    assert_int_equal(neg->code, IR_OP_NEG);
    assert_int_equal(neg->loc.line, 2);
    assert_int_equal(neg->loc.col, 3);
    assert_int_equal(neg->next->loc.line, 3);
    assert_int_equal(neg->next->loc.col, 5);
    assert_ptr_equal(neg->loc.src, src);
    source_free(src);
    ir_ctx_destroy(c);
}

/* Floats that need care: specials, -0, the smallest subnormal, 17 digits. */
static void test_float_constants_exact(void **state)
{
    const double vals[] = {0.1, -0.0, 4.9406564584124654e-324, 1.0 / 3.0, 1e300, 65504.0};
    IrCtx *c = ir_ctx_create();
    IrModule *m = ir_module_create(c);
    IrBuilder b;
    IrFunc *f = kernel(m, &b, NULL, 0);
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) ir_const_float(&b, ty(c, IR_F64), vals[i]);
    ir_const_float(&b, ty(c, IR_F32), -__builtin_inf());
    finish(&b);
    char *text = print_module(m);
    Source *src = source_from_string("f.tir", text);
    IrModule *m2 = ir_parse(c, src);
    assert_non_null(m2);
    IrOp *op = m2->funcs[0]->body.first;
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++, op = op->next)
        assert_memory_equal(&op->attr.f, &vals[i], sizeof(double));
    assert_true(op->attr.f < 0 && op->attr.f * 0.5 == op->attr.f);
    (void)f;
    free(text);
    source_free(src);
    ir_ctx_destroy(c);
}

/* ---- parser errors ---------------------------------------------------------------- */
typedef struct BadText {
    const char *text, *msg;
    uint32_t line, col;
} BadText;

static void test_parse_errors(void **state)
{
    static const BadText cases[] = {
        {"kernel @k() {\n  %a = add %b, %b : i32\n  return\n}", "use of undefined value '%b'", 2, 12},
        {"kernel @k(%x: f33) {\n  return\n}", "expected a type like f32, *bf16 or f32[64, 64], got 'f33'", 1, 15},
        {"kernel @k(%x: f32) {\n  %a = frob %x : f32\n}", "unknown op 'frob'", 2, 8},
        {"kernel @k(%x: f32) {\n  %a = add %x : f32\n}", "'add' takes 2 operand(s), got 1", 2, 3},
        {"kernel @k(%x: f32) {\n  %x = neg %x : f32\n}", "redefinition of value '%x'", 2, 3},
        {"kernel @k(%x: f32[0]) {\n}", "tile dimension 0 is out of range", 1, 19},
        {"kernel @k(%x: f32[2, 2, 2, 2, 2, 2]) {\n}", "tile types have at most 5 dimensions", 1, 34},
        {"kernel @k() {\n  %a = const 99999999999999999999 : i64\n}", "invalid integer constant '99999999999999999999' for an integer type", 2, 14},
        {"kernel @k(%x: i1) {\n  assert %x \"a\\q\"\n}", "unknown escape '\\q' in string", 2, 13},
        {"kernel @k", "expected '(', got end of file", 1, 10},
        {"\x01\xff", "expected 'kernel', got '\x01'", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        IrCtx *c = ir_ctx_create();
        Source *src = source_from_string("bad.tir", cases[i].text);
        assert_null(ir_parse(c, src));
        assert_int_equal(ir_ctx_diags(c)->nerrors, 1);
        assert_string_equal(first_diag(c), cases[i].msg);
        assert_int_equal(ir_ctx_diags(c)->items[0].loc.line, cases[i].line);
        assert_int_equal(ir_ctx_diags(c)->items[0].loc.col, cases[i].col);
        source_free(src);
        ir_ctx_destroy(c);
    }
}

/* Every prefix of a valid text is handled without a crash (and rejected unless it
 * happens to end at a function boundary). */
static void test_parse_truncated(void **state)
{
    IrCtx *c0 = ir_ctx_create();
    char *text = print_module(build_sample(c0));
    size_t len = strlen(text);
    for (size_t n = 0; n < len; n += 7) {
        char *cut = strndup(text, n);
        IrCtx *c = ir_ctx_create();
        Source *src = source_from_string("cut.tir", cut);
        IrModule *m = ir_parse(c, src);
        assert_true(m == NULL ? ir_ctx_diags(c)->nerrors == 1 : ir_ctx_diags(c)->nerrors == 0);
        source_free(src);
        ir_ctx_destroy(c);
        free(cut);
    }
    free(text);
    ir_ctx_destroy(c0);
}

/* ---- verifier ------------------------------------------------------------------------ */
/* Parses text (which must parse) and checks that the verifier rejects it with `msg`. */
static void expect_verify_error(const char *text, const char *msg)
{
    IrCtx *c = ir_ctx_create();
    Source *src = source_from_string("v.tir", text);
    IrModule *m = ir_parse(c, src);
    if (!m) fail_msg("does not parse: %s\n%s", first_diag(c), text);
    assert_false(ir_verify_module(m));
    if (strcmp(first_diag(c), msg)) fail_msg("expected '%s'\n     got '%s'", msg, first_diag(c));
    source_free(src);
    ir_ctx_destroy(c);
}

static void test_verify_rules(void **state)
{
    static const char *const cases[][2] = {
        {"kernel @k(%x: f32[64], %y: f16[64]) {\n %a = add %x, %y : f32[64]\n return\n}",
         "verifier: 'add' operands must have the same type, got f32[64] and f16[64]"},
        {"kernel @k(%x: f32, %y: f32) {\n %a = cmp lt %x, %y : f32\n return\n}",
         "verifier: 'cmp' result must be i1 of the operands' shape, got f32"},
        {"kernel @k(%x: f32) {\n %a = shl %x, %x : f32\n return\n}", "verifier: 'shl' needs integers, got f32"},
        {"kernel @k(%x: i32) {\n %a = sqrt %x : i32\n return\n}", "verifier: 'sqrt' needs floats, got i32"},
        {"kernel @k(%c: i32, %x: f32) {\n %a = select %c, %x, %x : f32\n return\n}",
         "verifier: 'select' condition must be i1 of the result's shape, got i32"},
        {"kernel @k(%x: f32[64]) {\n %a = splat %x : f32[64]\n return\n}",
         "verifier: 'splat' makes a tile of a scalar of the same element type, got f32[64] -> f32[64]"},
        {"kernel @k(%x: f32[2, 64]) {\n %a = broadcast %x : f32[4, 64]\n return\n}",
         "verifier: 'broadcast' grows size-1 dims of the same rank and element type, got f32[2, 64] -> f32[4, 64]"},
        {"kernel @k(%x: f32[64]) {\n %a = reshape %x : f32[32]\n return\n}",
         "verifier: 'reshape' keeps the element type and count, got f32[64] -> f32[32]"},
        {"kernel @k(%x: f32[2, 4]) {\n %a = trans %x : f32[2, 4]\n return\n}",
         "verifier: 'trans' reverses the axes, got f32[2, 4] -> f32[2, 4]"},
        {"kernel @k(%p: *f32[64], %o: f32[64]) {\n %a = addptr %p, %o : *f32[64]\n return\n}",
         "verifier: 'addptr' needs a pointer and an integer offset, got *f32[64] and f32[64]"},
        {"kernel @k(%p: *f32[64], %m: i1[32]) {\n %a = load %p, %m : f32[64]\n return\n}",
         "verifier: 'load' mask must be i1 of the pointer's shape *f32[64], got i1[32]"},
        {"kernel @k(%p: *f32, %v: f16) {\n store %p, %v\n return\n}",
         "verifier: 'store' value must be the pointee of *f32, got f16"},
        {"kernel @k(%a: f32[16, 16]) {\n %d = dot default %a, %a, %a : f16[16, 16]\n return\n}",
         "verifier: 'dot' result must have the accumulator type f32[16, 16], got f16[16, 16]"},
        {"kernel @k(%a: f32[16]) {\n %d = argmax 0 %a : f32\n return\n}",
         "verifier: 'argmax' result must be the i32 shape of the operand without axis 0, got f32"},
        {"kernel @k() {\n %d = program_id 3 : i32\n return\n}", "verifier: 'program_id' axis 3 is out of range 0..2"},
        {"kernel @k() {\n %d = arange 0 : i64[16]\n return\n}",
         "verifier: 'arange' result must be a rank-1 i32 tile, got i64[16]"},
        {"kernel @k(%s: f32, %o: i32[16]) {\n %d = rand %s, %o : f32[16]\n return\n}",
         "verifier: 'rand' needs a scalar integer seed and integer offsets, got f32 and i32[16]"},
        {"kernel @k(%c: i32) {\n if %c {\n }\n return\n}", "verifier: 'if' condition must be an i1 scalar, got i32"},
        {"kernel @k(%n: i32, %x: f32) {\n %r = for %n, %n, %n iter(%x) : f32 {\n ^(%i: i32, %a: f32):\n %b = convert %a : f16\n yield %b\n }\n return\n}",
         "verifier: 'yield' value 0 must have type f32 (the body), got f16"},
        {"kernel @k(%x: i32) {\n %w = while %x : i32 {\n ^(%a: i32):\n condition %a, %a\n } do {\n ^(%b: i32):\n yield %b\n }\n return\n}",
         "verifier: 'condition' needs an i1 scalar first operand"},
        {"kernel @k(%x: i32) {\n return %x\n}", "verifier: 'return' of a kernel takes no operands, got 1"},
        {"kernel @k(%p: *f16, %x: f16) {\n %o = atomic_or relaxed %p, %x : f16\n return\n}",
         "verifier: 'atomic_or' needs integers, got f16"},
        {"kernel @k(%x: i32) {\n %a = neg %x : i32\n}", "verifier: function '@k' must end in 'return'"},
        {"kernel @k() {\n %a = const 300 : i8\n return\n}", "verifier: 'const' value 300 does not fit i8"},
        {"kernel @k(%c: i1) {\n %r = if %c : i32 {\n %a = const 1 : i32\n yield %a\n } else {\n yield %a\n }\n return\n}",
         "verifier: 'yield' operand 0 is used where its definition does not dominate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_verify_error(cases[i][0], cases[i][1]);
}

/* IR built in memory can break rules the parser never lets through. */
static void test_verify_built_ir(void **state)
{
    IrCtx *c = ir_ctx_create();
    IrModule *m = ir_module_create(c);
    IrBuilder b;
    const IrType *i32 = ty(c, IR_I32);
    IrFunc *f = kernel(m, &b, &i32, 1);
    IrValue x = f->body.args[0];
    IrOp *neg = ir_build(&b, IR_OP_NEG, &x, 1, &i32, 1, 0);
    IrValue y = ir_build1(&b, IR_OP_NEG, i32, &x, 1);
    neg->operands[0] = y;        /* a use before its definition */
    finish(&b);
    assert_false(ir_verify_func(f));
    assert_string_equal(first_diag(c), "verifier: 'neg' operand 0 is used where its definition does not dominate");
    ir_ctx_destroy(c);
}

/* An atomic's memory order must be one of the four (the parser only reads those). */
static void test_verify_memory_order(void **state)
{
    IrCtx *c = ir_ctx_create();
    IrModule *m = ir_module_create(c);
    IrBuilder b;
    const IrType *tp[2] = {ir_type_ptr(c, IR_I32), ty(c, IR_I32)};
    IrFunc *f = kernel(m, &b, tp, 2);
    IrOp *op = ir_build(&b, IR_OP_ATOMIC_ADD, f->body.args, 2, &tp[1], 1, 0);
    op->attr.i = 7;
    finish(&b);
    assert_false(ir_verify_func(f));
    assert_string_equal(first_diag(c), "verifier: 'atomic_add' has an unknown memory order 7");
    ir_ctx_destroy(c);
}

static void test_verify_accepts_sample(void **state)
{
    IrCtx *c = ir_ctx_create();
    assert_true(ir_verify_module(build_sample(c)));
    assert_int_equal(ir_ctx_diags(c)->len, 0);
    ir_ctx_destroy(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_interning),
        cmocka_unit_test(test_roundtrip_built),
        cmocka_unit_test(test_parse_locations),
        cmocka_unit_test(test_float_constants_exact),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_parse_truncated),
        cmocka_unit_test(test_verify_rules),
        cmocka_unit_test(test_verify_built_ir),
        cmocka_unit_test(test_verify_memory_order),
        cmocka_unit_test(test_verify_accepts_sample),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
