/* tilec tune's manifest (tools/tune_manifest.c, docs/TUNING.md "The manifest"): the
 * expression evaluator's values, precedence and errors with their columns, and the
 * reader's entries and FILE:LINE:COL errors for a JSON manifest and JSON Lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tools/tune_manifest.h"

static const TmScope scope = {{"M", "K", "BK"}, {3, 4, 64}, 3};

static int64_t eval_int(const char *e)
{
    TmValue v;
    char err[200];
    size_t col;
    if (!tm_eval(e, &scope, false, &v, err, sizeof err, &col)) fail_msg("'%s': %s at %zu", e, err, col);
    return v.i;
}

static void test_values(void **state)
{
    (void)state;
    assert_int_equal(eval_int("M*K"), 12);
    assert_int_equal(eval_int("1 + 2 * 3"), 7);
    assert_int_equal(eval_int("(1 + 2) * 3"), 9);
    assert_int_equal(eval_int("7 / 2"), 3);
    assert_int_equal(eval_int("-7 / 2"), -3);
    assert_int_equal(eval_int("M - -K"), 7);
    assert_int_equal(eval_int("BK * M * K"), 768);
    assert_int_equal(eval_int("  10  "), 10);
    TmValue v;
    char err[200];
    size_t col;
    assert_true(tm_eval("1 / 4 + 0.5", &scope, true, &v, err, sizeof err, &col));
    assert_true(v.d == 0.75);
}

/* Each error: its message and the column (0-based) it points at. */
static void expect_error(const char *e, bool real, const char *msg, size_t at)
{
    TmValue v;
    char err[200];
    size_t col = 99;
    assert_false(tm_eval(e, &scope, real, &v, err, sizeof err, &col));
    if (!strstr(err, msg)) fail_msg("'%s': got '%s', expected '%s'", e, err, msg);
    assert_int_equal(col, at);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("M / (K - 4)", false, "division by zero", 2);
    expect_error("M *", false, "ends too soon", 3);
    expect_error("M * Q", false, "unknown name 'Q'", 4);
    expect_error("9223372036854775807 + 1", false, "overflow", 20);
    expect_error("3037000500 * 3037000500", false, "overflow", 11);
    expect_error("2 3", false, "unexpected '3'", 2);
    expect_error("1.5", false, "an integer is expected", 1);
    expect_error("(M + 1", false, "expected ')'", 6);
    expect_error("M $ K", false, "unexpected '$'", 2);
    expect_error("", false, "ends too soon", 0);
    expect_error("1 / 0.0", true, "division by zero", 2);
}

static char dir[64];

static void write_file(const char *name, const char *text)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static const char kernel[] =
    "@autotune(key = [n], space = {BLOCK: [64, 128]}, default = {BLOCK: 64})\n"
    "kernel scale(y: *f32, x: *f32, n: i32, s: f32, const BLOCK: i32 = 64) grid(cdiv(n, BLOCK)) {\n"
    "    let offs = program_id(0) * BLOCK + arange(0, BLOCK);\n"
    "    store(y + offs, load(x + offs, offs < n) * s, offs < n);\n"
    "}\n";

/* Reads NAME; the errors printed go to *errs (caller frees). */
static void read_manifest(const char *name, TmManifest *m, char **errs)
{
    char path[128];
    size_t n;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *err = open_memstream(errs, &n);
    assert_true(tm_read(path, m, err));
    fclose(err);
}

static void test_manifest(void **state)
{
    (void)state;
    write_file("m.json",
               "{\"kernels\": [\n"
               "  {\"file\": \"scale.tile\", \"kernel\": \"scale\", \"consts\": {\"BLOCK\": 128},\n"
               "   \"keys\": [{\"n\": 4096}, {\"n\": 64}],\n"
               "   \"args\": {\"y\": {\"dtype\": \"f32\", \"numel\": \"n\"}, \"x\": {\"dtype\": \"f32\", \"numel\": \"n * 2\"},\n"
               "            \"s\": \"0.5\"}}\n"
               "]}\n");
    TmManifest m;
    char *errs = NULL;
    read_manifest("m.json", &m, &errs);
    assert_string_equal(errs, "");
    assert_int_equal(m.nerrors, 0);
    assert_int_equal(m.nentries, 1);
    const TmEntry *e = &m.entries[0];
    assert_string_equal(e->kernel, "scale");
    assert_non_null(strstr(e->file, "/scale.tile"));
    assert_int_equal(e->nconsts, 1);
    assert_int_equal(e->consts[0].value, 128);
    assert_int_equal(e->nkeys, 2);
    assert_int_equal(e->keys[1].vals[0].value, 64);
    assert_int_equal(e->keys[1].loc.line, 3);
    assert_int_equal(e->nargs, 3);
    assert_string_equal(e->args[1].expr, "n * 2");
    assert_int_equal(e->args[1].loc.line, 4);
    assert_null(e->args[2].dtype);
    free(errs);
    tm_free(&m);
}

static void test_manifest_errors(void **state)
{
    (void)state;
    write_file("e.json",
               "{\"kernels\": [\n"
               "  {\"file\": \"scale.tile\", \"kernel\": \"scale\", \"key\": [],\n"
               "   \"keys\": [{\"n\": 1.5}],\n"
               "   \"args\": {\"y\": {\"dtype\": \"f32\", \"numel\": \"n\"}, \"x\": \"n\", \"s\": {\"dtype\": \"f32\", \"numel\": \"1\"}}}\n"
               "]}\n");
    TmManifest m;
    char *errs = NULL;
    read_manifest("e.json", &m, &errs);
    assert_non_null(strstr(errs, "e.json:2:45: error: unknown field \"key\""));
    assert_non_null(strstr(errs, "e.json:3:14: error: key value 'n' must be an integer"));
    assert_int_equal(m.nerrors, 2);
    free(errs);
    tm_free(&m);
    /* The checks against the kernel run once the structure is sound. */
    write_file("k.json",
               "{\"kernels\": [\n"
               "  {\"file\": \"scale.tile\", \"kernel\": \"scale\", \"keys\": [{\"n\": 8}],\n"
               "   \"args\": {\"y\": {\"dtype\": \"f32\", \"numel\": \"n\"}, \"x\": \"n\",\n"
               "            \"s\": {\"dtype\": \"f32\", \"numel\": \"1\"}, \"t\": \"1\"}}\n"
               "]}\n");
    read_manifest("k.json", &m, &errs);
    assert_non_null(strstr(errs, "k.json:3:56: error: argument 'x' is a buffer"));
    assert_non_null(strstr(errs, "k.json:4:45: error: argument 's' is a scalar (f32), not a buffer"));
    assert_non_null(strstr(errs, "k.json:4:56: error: kernel 'scale' has no run-time parameter 't'"));
    assert_int_equal(m.nerrors, 3);
    free(errs);
    tm_free(&m);
}

/* JSON Lines: one entry a line; a bad line is an error at that line. */
static void test_json_lines(void **state)
{
    (void)state;
    write_file("r.jsonl",
               "{\"file\": \"scale.tile\", \"kernel\": \"scale\", \"keys\": [{\"n\": 64}], \"args\": {\"y\": {\"dtype\": \"f32\", \"numel\": \"64\"}, \"x\": {\"dtype\": \"f32\", \"numel\": \"64\"}, \"n\": \"n\", \"s\": \"2\"}}\n"
               "\n"
               "{\"file\": \"scale.tile\", \"kernel\": \"scale\", \"keys\": [{\"n\": 128}], \"args\": {\"y\": {\"dtype\": \"f32\", \"numel\": \"128\"}, \"x\": {\"dtype\": \"f32\", \"numel\": \"128\"}, \"n\": \"n\", \"s\": \"2\"}}\n");
    TmManifest m;
    char *errs = NULL;
    read_manifest("r.jsonl", &m, &errs);
    assert_string_equal(errs, "");
    assert_int_equal(m.nentries, 2);
    assert_int_equal(m.entries[1].keys[0].vals[0].value, 128);
    assert_int_equal(m.entries[1].loc.line, 3);
    free(errs);
    tm_free(&m);
    write_file("bad.jsonl",
               "{\"file\": \"scale.tile\", \"kernel\": \"scale\", \"keys\": [{\"n\": 64}], \"args\": {\"y\": {\"dtype\": \"f32\", \"numel\": \"64\"}, \"x\": {\"dtype\": \"f32\", \"numel\": \"64\"}, \"s\": \"2\"}}\n"
               "{\"file\": \"scale.tile\", \"kernel\": \n");
    read_manifest("bad.jsonl", &m, &errs);
    assert_non_null(strstr(errs, "bad.jsonl:2:"));
    assert_non_null(strstr(errs, "malformed JSON"));
    free(errs);
    tm_free(&m);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/tile-manifest-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    write_file("scale.tile", kernel);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_manifest),
        cmocka_unit_test(test_manifest_errors),
        cmocka_unit_test(test_json_lines),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
