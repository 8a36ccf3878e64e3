/* Expansion of @autotune into configs (frontend/autotune.c).
 *
 * The space of LANGUAGE.md 3.1 is expanded and compared with a cross product that the
 * test enumerates itself with nested loops (same order: the last key fastest);
 * explicit configs, duplicates, `where` over const defaults and every error message
 * with its line:col are checked on small kernels. */
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
    char text[4096];
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

/* The matmul kernel of LANGUAGE.md 3.1 under the attribute `attr` (line 1). */
static uint32_t configs_of(const char *attr, FeConfig **out)
{
    snprintf(cur.text, sizeof cur.text,
             "%s\n"
             "kernel matmul(a: *bf16, b: *bf16, c: *bf16, M: i32, N: i32, K: i32,\n"
             "              const BM: i32 = 128, const BN: i32 = 128, const BK: i32 = 64,\n"
             "              const GROUP: i32 = 8, const SPLIT: i32)\n"
             "{\n"
             "}\n", attr);
    cur.a = arena_create();
    cur.src = source_from_string("t.tile", cur.text);
    diag_init(&cur.d);
    AstProgram *p = fe_parse(cur.a, cur.src, &cur.d);
    assert_non_null(p);
    assert_int_equal(cur.d.nerrors, 0);          /* the tests' sources must parse */
    return fe_autotune_configs(cur.a, p, "matmul", out, &cur.d);
}

static int64_t value(const FeConfig *c, const char *name)
{
    for (uint32_t i = 0; i < c->nkeys; i++)
        if (strcmp(c->keys[i].name, name) == 0) return c->keys[i].value;
    fail_msg("config has no key %s", name);
    return 0;
}

/* Exactly one error, `msg` at line:col, and no configs. */
static void expect_error(const char *attr, uint32_t line, uint32_t col, const char *msg)
{
    FeConfig *c = (FeConfig *)&cur;
    assert_int_equal(configs_of(attr, &c), 0);
    assert_null(c);
    for (size_t i = 0; i < cur.d.len && cur.d.nerrors != 1; i++)
        fprintf(stderr, "got: %u:%u: %s\n", cur.d.items[i].loc.line, cur.d.items[i].loc.col,
                cur.d.items[i].msg);
    assert_int_equal(cur.d.nerrors, 1);
    assert_string_equal(cur.d.items[0].msg, msg);
    assert_int_equal(cur.d.items[0].loc.line, line);
    assert_int_equal(cur.d.items[0].loc.col, col);
}

#define MATMUL_SPACE "space = { BM: [64, 128, 256], BN: [64, 128, 256], BK: [32, 64], " \
                     "warps: [4, 8], stages: [2, 3, 4] }"

static void test_matmul_space(void **state)
{
    (void)state;
    static const int64_t bm[] = {64, 128, 256}, bn[] = {64, 128, 256}, bk[] = {32, 64},
                         warps[] = {4, 8}, stages[] = {2, 3, 4};
    FeConfig *c;
    uint32_t n = configs_of("@autotune(key = [M, N, K], " MATMUL_SPACE ",\n"
                            "          where = BM * BN <= 128 * 256,\n"
                            "          default = { BM: 128, BN: 128, BK: 64, warps: 4, stages: 3 })",
                            &c);
    assert_int_equal(cur.d.len, 0);
    uint32_t k = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int l = 0; l < 2; l++)
                for (int w = 0; w < 2; w++)
                    for (int s = 0; s < 3; s++) {
                        if (bm[i] * bn[j] > 128 * 256) continue;
                        assert_true(k < n);
                        assert_int_equal(c[k].nkeys, 5);
                        assert_string_equal(c[k].keys[0].name, "BM");   /* order written */
                        assert_string_equal(c[k].keys[4].name, "stages");
                        assert_int_equal(value(&c[k], "BM"), bm[i]);
                        assert_int_equal(value(&c[k], "BN"), bn[j]);
                        assert_int_equal(value(&c[k], "BK"), bk[l]);
                        assert_int_equal(value(&c[k], "warps"), warps[w]);
                        assert_int_equal(value(&c[k], "stages"), stages[s]);
                        k++;
                    }
    assert_int_equal(n, k);
    assert_true(n < 3 * 3 * 2 * 2 * 3);   /* where pruned something */
}

/* `where` sees const defaults not in the space (GROUP = 8) and cdiv. */
static void test_where_uses_defaults(void **state)
{
    (void)state;
    FeConfig *c;
    uint32_t n = configs_of("@autotune(space = {BM: [16, 32, 64, 128, 256]},\n"
                            "          where = cdiv(BM * GROUP, 100) <= 6 && !(BM == 32))", &c);
    assert_int_equal(cur.d.len, 0);
    int64_t want[] = {16, 64};      /* 64*8 = 512 needs 6 hundreds, 128*8 needs 11; 32 excluded */
    assert_int_equal(n, 2);
    for (uint32_t i = 0; i < n; i++) assert_int_equal(value(&c[i], "BM"), want[i]);
}

static void test_explicit_configs_dedup(void **state)
{
    (void)state;
    FeConfig *c;
    uint32_t n = configs_of("@autotune(configs = [{BM: 64, warps: 4}, {warps: 4, BM: 64},\n"
                            "                     {BM: 128, warps: 8}, {BM: 256, warps: 8}],\n"
                            "          where = BM <= 128)", &c);
    assert_int_equal(cur.d.len, 0);
    assert_int_equal(n, 2);
    assert_int_equal(value(&c[0], "BM"), 64);
    assert_int_equal(value(&c[0], "warps"), 4);
    assert_int_equal(value(&c[1], "BM"), 128);
    assert_int_equal(value(&c[1], "warps"), 8);
}

static void test_space_duplicate_values(void **state)
{
    (void)state;
    FeConfig *c;
    uint32_t n = configs_of("@autotune(space = {BM: [64, 64, 128], BK: [32, 32]})", &c);
    assert_int_equal(cur.d.len, 0);
    assert_int_equal(n, 2);
    assert_int_equal(value(&c[0], "BM"), 64);
    assert_int_equal(value(&c[1], "BM"), 128);
}

static void test_no_autotune(void **state)
{
    (void)state;
    FeConfig *c = (FeConfig *)&cur;
    assert_int_equal(configs_of("@launch(warps = 4)", &c), 0);
    assert_null(c);
    assert_int_equal(cur.d.len, 0);
}

/* The limit is checked before anything is expanded: 10^6 configs give one error. */
static void test_space_too_big(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [1,2,3,4,5,6,7,8,9,10], BN: [1,2,3,4,5,6,7,8,9,10],\n"
                 "  BK: [1,2,3,4,5,6,7,8,9,10], GROUP: [1,2,3,4,5,6,7,8,9,10], warps: [1,2,3,4,5,6,7,8,9,10],\n"
                 "  stages: [1,2,3,4,5,6,7,8,9,10]})",
                 1, 19, "the autotune space has more than 65536 configs");
}

static void test_bad_space_key(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64], BX: [32]})", 1, 30,
                 "autotune space key 'BX' is not a const parameter of kernel 'matmul'");
}

static void test_runtime_param_as_space_key(void **state)
{
    (void)state;
    expect_error("@autotune(space = {M: [64]})", 1, 20,
                 "autotune space key 'M' is not a const parameter of kernel 'matmul'");
}

static void test_bad_key(void **state)
{
    (void)state;
    expect_error("@autotune(key = [M, BM], space = {BM: [64]})", 1, 21,
                 "autotune key 'BM' is not a run-time scalar parameter of kernel 'matmul'");
}

static void test_pointer_key(void **state)
{
    (void)state;
    expect_error("@autotune(key = [a], space = {BM: [64]})", 1, 18,
                 "autotune key 'a' is not a run-time scalar parameter of kernel 'matmul'");
}

static void test_where_unknown_name(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, where = BM <= M)", 1, 45,
                 "unknown name 'M' in autotune where (it may use the config's keys and the "
                 "kernel's const parameters)");
}

static void test_where_const_without_default(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, where = SPLIT > 1)", 1, 39,
                 "'SPLIT' has no value in this autotune config (a const parameter without a default)");
}

static void test_where_division_by_zero(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, where = BM / (BK - 64) > 1)", 1, 42,
                 "autotune where divides by zero or shifts out of range here (64 / 0)");
}

/* where is compile-time arithmetic: exact i64, never wrapping (issue 38) */
static void test_where_overflow(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, where = BM * 4611686018427387904 > 1)", 1, 42,
                 "autotune where overflows i64 here (64 * 4611686018427387904)");
}

static void test_default_incomplete(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64, 128], warps: [4]},\n"
                 "          default = {BM: 64})", 2, 21,
                 "the autotune default lacks 'warps', a key of the configs");
}

static void test_default_rejected_by_where(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64, 128]}, where = BM < 100,\n"
                 "          default = {BM: 128})", 2, 21,
                 "the autotune default does not satisfy where");
}

static void test_bad_default_key(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, default = {BM: 64, BQ: 2})", 1, 50,
                 "autotune default key 'BQ' is not a const parameter of kernel 'matmul'");
}

static void test_space_and_configs(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, configs = [{BM: 64}])", 1, 41,
                 "autotune takes either space or configs, not both");
}

static void test_duplicate_key(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64], BM: [128]})", 1, 30,
                 "autotune space key 'BM' appears twice");
}

static void test_value_not_literal(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64, BN]})", 1, 29,
                 "an autotune value must be an integer literal");
}

static void test_unknown_argument(void **state)
{
    (void)state;
    expect_error("@autotune(spaces = {BM: [64]})", 1, 11,
                 "unknown autotune argument 'spaces' (expected key, space, where, configs or default)");
}

static void test_where_rejects_all(void **state)
{
    (void)state;
    expect_error("@autotune(space = {BM: [64]}, where = BM > 64)", 1, 42,
                 "autotune where rejects every config");
}

#define T(name) cmocka_unit_test_teardown(name, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_matmul_space),
        T(test_where_uses_defaults),
        T(test_explicit_configs_dedup),
        T(test_space_duplicate_values),
        T(test_no_autotune),
        T(test_space_too_big),
        T(test_bad_space_key),
        T(test_runtime_param_as_space_key),
        T(test_bad_key),
        T(test_pointer_key),
        T(test_where_unknown_name),
        T(test_where_const_without_default),
        T(test_where_division_by_zero),
        T(test_where_overflow),
        T(test_default_incomplete),
        T(test_default_rejected_by_where),
        T(test_bad_default_key),
        T(test_space_and_configs),
        T(test_duplicate_key),
        T(test_value_not_literal),
        T(test_unknown_argument),
        T(test_where_rejects_all),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
