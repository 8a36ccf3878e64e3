/* The reference interpreter (ir/interp.c): kernels built with the IR builder, run on
 * small grids, their buffers checked against plain C loops, and every run-time error
 * checked by its message. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ir/interp.h"
#include "ir/layout.h"
#include "ir/scalar.h"

/* ---- a small kernel-building kit ------------------------------------------------- */

typedef struct K {
    IrCtx *ctx;
    IrModule *m;
    IrFunc *f;
    IrBuilder b;
    DiagList d;
} K;

static const IrType *sc(K *k, IrElem e) { return ir_type_scalar(k->ctx, e); }
static const IrType *pt(K *k, IrElem e) { return ir_type_ptr(k->ctx, e); }
static const IrType *t1(K *k, const IrType *s, int32_t n) { return ir_type_tile(k->ctx, s, 1, &n); }
static const IrType *t2(K *k, const IrType *s, int32_t r, int32_t c)
{
    int32_t sh[2] = {r, c};
    return ir_type_tile(k->ctx, s, 2, sh);
}

/* Starts kernel `name` with parameters given as "name" / type pairs. */
static void k_begin(K *k, const char *name, uint32_t n, const char *const *names, const IrType *const *types)
{
    k->f = ir_func_create(k->m, IR_FUNC_KERNEL, name, (Loc){0}, types, names, n);
    ir_builder_at_end(&k->b, &k->f->body);
}

static IrValue P(K *k, uint32_t i) { return k->f->body.args[i]; }
static const IrType *ty(K *k, IrValue v) { return ir_value_type(k->b.func, v); }

static IrValue op1(K *k, IrOpcode c, const IrType *t, IrValue a) { return ir_build1(&k->b, c, t, &a, 1); }
static IrValue op2(K *k, IrOpcode c, IrValue a, IrValue b)
{
    IrValue o[2] = {a, b};
    return ir_build1(&k->b, c, ty(k, a), o, 2);
}
static IrValue op_attr(K *k, IrOpcode c, const IrType *t, const IrValue *o, uint32_t n, int64_t attr)
{
    IrOp *op = ir_build(&k->b, c, o, n, &t, 1, 0);
    op->attr.i = attr;
    return op->results[0];
}
static IrValue cmp(K *k, IrCmp p, IrValue a, IrValue b)
{
    IrValue o[2] = {a, b};
    return op_attr(k, IR_OP_CMP, ir_type_like(k->ctx, ty(k, a), sc(k, IR_I1)), o, 2, p);
}
static IrValue ci(K *k, const IrType *t, int64_t v) { return ir_const_int(&k->b, t, v); }
static IrValue cf(K *k, const IrType *t, double v) { return ir_const_float(&k->b, t, v); }
static IrValue arange(K *k, int32_t n) { return op_attr(k, IR_OP_ARANGE, t1(k, sc(k, IR_I32), n), NULL, 0, 0); }
static IrValue splat(K *k, IrValue v, const IrType *shape_of)
{
    return op1(k, IR_OP_SPLAT, ir_type_like(k->ctx, shape_of, ty(k, v)), v);
}
static IrValue pid(K *k) { return op_attr(k, IR_OP_PROGRAM_ID, sc(k, IR_I32), NULL, 0, 0); }

/* p + off for a scalar pointer p and an offset tile. */
static IrValue addptr(K *k, IrValue p, IrValue off)
{
    const IrType *pty = ir_type_like(k->ctx, ty(k, off), ir_type_elem(k->ctx, ty(k, p)));
    if (ty(k, p)->rank == 0 && ty(k, off)->rank) p = splat(k, p, ty(k, off));
    IrValue o[2] = {p, off};
    return ir_build1(&k->b, IR_OP_ADDPTR, pty, o, 2);
}
static IrValue load(K *k, IrValue p, IrValue mask, IrValue other)
{
    IrValue o[3] = {p, mask, other};
    const IrType *t = ir_type_like(k->ctx, ty(k, p), sc(k, ty(k, p)->pointee));
    return ir_build1(&k->b, IR_OP_LOAD, t, o, other != IR_NO_VALUE ? 3 : mask != IR_NO_VALUE ? 2 : 1);
}
static void store(K *k, IrValue p, IrValue v, IrValue mask)
{
    IrValue o[3] = {p, v, mask};
    ir_build(&k->b, IR_OP_STORE, o, mask != IR_NO_VALUE ? 3 : 2, NULL, 0, 0);
}
/* load(base + arange(n)), store(base + arange(n), v): whole small buffers. */
static IrValue load_all(K *k, IrValue base, int32_t n) { return load(k, addptr(k, base, arange(k, n)), IR_NO_VALUE, IR_NO_VALUE); }
static void store_all(K *k, IrValue base, IrValue v)
{
    if (ty(k, v)->rank == 0) {
        store(k, base, v, IR_NO_VALUE);
        return;
    }
    if (ty(k, v)->rank == 2) {
        int32_t n = (int32_t)ir_type_numel(ty(k, v));
        v = op1(k, IR_OP_RESHAPE, t1(k, ir_type_elem(k->ctx, ty(k, v)), n), v);
    }
    store(k, addptr(k, base, arange(k, ty(k, v)->shape[0])), v, IR_NO_VALUE);
}
/* A [r, c] tile loaded row-major from base. */
static IrValue load_2d(K *k, IrValue base, int32_t r, int32_t c)
{
    IrValue flat = load_all(k, base, r * c);
    return op1(k, IR_OP_RESHAPE, t2(k, ir_type_elem(k->ctx, ty(k, flat)), r, c), flat);
}
static void ret(K *k) { ir_build(&k->b, IR_OP_RETURN, NULL, 0, NULL, 0, 0); }

static InterpArg buf(IrElem e, void *data, int64_t n)
{
    return (InterpArg){.is_buffer = true, .u.buf = {.elem = e, .data = data, .count = n}};
}
static InterpArg ival(int64_t v) { return (InterpArg){.u.i = v}; }
static InterpArg fval(double v) { return (InterpArg){.u.f = v}; }

/* Prints the verifier's complaints: the tests' IR must be valid IR. */
static void verify(K *k)
{
    if (ir_verify_func(k->f)) return;
    diag_print(ir_ctx_diags(k->ctx), stderr);
    ir_print_func(k->f, stderr);
    fail_msg("kernel '%s' does not verify", k->f->name);
}

static bool run(K *k, const InterpArg *args, int64_t gx)
{
    int64_t g[3] = {gx, 1, 1};
    verify(k);
    return interp_run(k->f, args, k->f->body.nargs, g, NULL, &k->d);
}

/* The first diagnostic must contain `want`. */
static void expect_error(K *k, const char *want)
{
    assert_true(k->d.nerrors >= 1);
    if (!strstr(k->d.items[0].msg, want)) fail_msg("got '%s', want '%s'", k->d.items[0].msg, want);
}

static int setup(void **state)
{
    K *k = calloc(1, sizeof *k);
    k->ctx = ir_ctx_create();
    k->m = ir_module_create(k->ctx);
    diag_init(&k->d);
    *state = k;
    return 0;
}

static int teardown(void **state)
{
    K *k = *state;
    diag_free(&k->d);
    ir_ctx_destroy(k->ctx);
    free(k);
    return 0;
}

#define NONE IR_NO_VALUE

/* ---- element-wise, load and store -------------------------------------------------- */

/* out[i] = x[i] + y[i] for i < n; BLOCK = 64 per program; a grid function gives cdiv. */
static void build_vadd(K *k)
{
    const char *nm[] = {"x", "y", "out", "n"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32), pt(k, IR_F32), sc(k, IR_I32)};
    k_begin(k, "vadd", 4, nm, tp);
    const IrType *ti = t1(k, sc(k, IR_I32), 64);
    IrValue offs = op2(k, IR_OP_ADD, splat(k, op2(k, IR_OP_MUL, pid(k), ci(k, sc(k, IR_I32), 64)), ti), arange(k, 64));
    IrValue mask = cmp(k, IR_CMP_LT, offs, splat(k, P(k, 3), ti));
    IrValue x = load(k, addptr(k, P(k, 0), offs), mask, NONE);
    IrValue y = load(k, addptr(k, P(k, 1), offs), mask, NONE);
    store(k, addptr(k, P(k, 2), offs), op2(k, IR_OP_ADD, x, y), mask);
    ret(k);
}

static void test_vector_add(void **state)
{
    K *k = *state;
    build_vadd(k);
    enum { N = 1000 };
    float x[N], y[N], out[N];
    for (int i = 0; i < N; i++) x[i] = (float)i * 0.37f, y[i] = 1.0f / (float)(i + 1), out[i] = -7;
    InterpArg a[] = {buf(IR_F32, x, N), buf(IR_F32, y, N), buf(IR_F32, out, N), ival(N)};
    assert_true(run(k, a, (N + 63) / 64));
    assert_int_equal(k->d.nerrors, 0);
    for (int i = 0; i < N; i++) assert_true(out[i] == x[i] + y[i]);
}

static void test_masked_load_other(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out", "n"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32), sc(k, IR_I32)};
    k_begin(k, "other", 3, nm, tp);
    IrValue offs = arange(k, 16);
    IrValue mask = cmp(k, IR_CMP_LT, offs, splat(k, P(k, 2), ty(k, offs)));
    IrValue v = load(k, addptr(k, P(k, 0), offs), mask, cf(k, t1(k, sc(k, IR_F32), 16), -1.5));
    store_all(k, P(k, 1), v);
    ret(k);
    float x[10], out[16];
    for (int i = 0; i < 10; i++) x[i] = (float)i;
    InterpArg a[] = {buf(IR_F32, x, 10), buf(IR_F32, out, 16), ival(10)};
    assert_true(run(k, a, 1));
    for (int i = 0; i < 16; i++) assert_true(out[i] == (i < 10 ? (float)i : -1.5f));
}

static void test_out_of_bounds_message(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32)};
    k_begin(k, "oob", 2, nm, tp);
    IrValue offs = op2(k, IR_OP_ADD, splat(k, op2(k, IR_OP_MUL, pid(k), ci(k, sc(k, IR_I32), 64)),
                                          t1(k, sc(k, IR_I32), 64)), arange(k, 64));
    IrValue v = load(k, addptr(k, P(k, 0), offs), NONE, NONE);
    store(k, addptr(k, P(k, 1), offs), v, NONE);
    ret(k);
    float x[100] = {0}, out[128] = {0};
    InterpArg a[] = {buf(IR_F32, x, 100), buf(IR_F32, out, 128)};
    assert_false(run(k, a, 2));
    expect_error(k, "out-of-bounds load in kernel 'oob', program (1, 0, 0): argument 'x' has 100 elements, "
                    "lane 36 reads element 100");
    assert_true(out[63] == 0 && out[64] == 0);   /* program 0 ran, program 1 stopped */
}

static void test_store_out_of_bounds(void **state)
{
    K *k = *state;
    const char *nm[] = {"out"};
    const IrType *tp[] = {pt(k, IR_I32)};
    k_begin(k, "st", 1, nm, tp);
    IrValue offs = op2(k, IR_OP_SUB, arange(k, 8), ci(k, t1(k, sc(k, IR_I32), 8), 2));
    store(k, addptr(k, P(k, 0), offs), offs, NONE);
    ret(k);
    int32_t out[8];
    InterpArg a[] = {buf(IR_I32, out, 8)};
    assert_false(run(k, a, 1));
    expect_error(k, "out-of-bounds store in kernel 'st', program (0, 0, 0): argument 'out' has 8 elements, "
                    "lane 0 writes element -2");
}

static void test_division_by_zero(void **state)
{
    K *k = *state;
    const char *nm[] = {"out", "a", "b"};
    const IrType *tp[] = {pt(k, IR_I32), sc(k, IR_I32), sc(k, IR_I32)};
    k_begin(k, "divz", 3, nm, tp);
    store(k, P(k, 0), op2(k, IR_OP_DIV, P(k, 1), P(k, 2)), NONE);
    ret(k);
    int32_t out[1] = {0};
    InterpArg a[] = {buf(IR_I32, out, 1), ival(-7), ival(2)};
    assert_true(run(k, a, 1));
    assert_int_equal(out[0], -3);                       /* truncates toward zero */
    a[2] = ival(0);
    assert_false(run(k, a, 1));
    expect_error(k, "integer division by zero in kernel 'divz', program (0, 0, 0)");
}

/* The mbarrier model (docs/INTERPRETER.md "Memory"): a slot counts its completed phases;
 * a wait for a parity the slot's current phase has would never pass on a GPU. */
static void bar_op(K *k, IrOpcode c, int64_t attr, const IrValue *o, uint32_t n)
{
    IrOp *op = ir_build(&k->b, c, o, n, NULL, 0, 0);
    op->attr.i = attr;
}

static void build_barriers(K *k, int64_t wait_parity)
{
    const char *nm[] = {"out"};
    const IrType *tp[] = {pt(k, IR_I32)};
    k_begin(k, "bars", 1, nm, tp);
    int32_t sh[3] = {2, 1, 1};
    IrLayout l;                       /* the barriers' layout, as passes/shared.c gives it */
    memset(&l, 0, sizeof l);
    l.kind = IR_LAYOUT_SHARED;
    l.rank = 3;
    l.order[0] = 2, l.order[1] = 1, l.order[2] = 0;
    l.vec = l.per_phase = l.max_phase = 1;
    const IrType *bt = ir_type_with_layout(k->ctx, ir_type_tile(k->ctx, sc(k, IR_I64), 3, sh),
                                           ir_layout_intern(k->ctx, &l));
    IrValue bars = op_attr(k, IR_OP_LOCAL_ALLOC, bt, NULL, 0, 0);
    bar_op(k, IR_OP_MBARRIER_INIT, 1, &bars, 1);
    IrValue s1 = ci(k, sc(k, IR_I32), 1), p0 = ci(k, sc(k, IR_I32), 0), p1 = ci(k, sc(k, IR_I32), wait_parity);
    bar_op(k, IR_OP_TMA_WAIT, 1, (IrValue[]){bars, s1, s1}, 3);          /* fresh: parity 1 passes */
    bar_op(k, IR_OP_MBARRIER_ARRIVE, 0, (IrValue[]){bars, s1}, 2);       /* slot 1 completes phase 0 */
    bar_op(k, IR_OP_TMA_WAIT, 1, (IrValue[]){bars, s1, p0}, 3);          /* so parity 0 passes */
    bar_op(k, IR_OP_TMA_WAIT, 1, (IrValue[]){bars, s1, p1}, 3);          /* parity 1 again: never */
    store(k, P(k, 0), s1, NONE);
    ret(k);
}

static void test_mbarrier_phases(void **state)
{
    K *k = *state;
    int32_t out[1] = {0};
    InterpArg a[] = {buf(IR_I32, out, 1)};
    build_barriers(k, 0);
    assert_true(run(k, a, 1));
    assert_int_equal(out[0], 1);
    build_barriers(k, 1);
    assert_false(run(k, a, 1));
    expect_error(k, "waits for phase parity 1 of barrier slot 1, which has completed 1 phases: on a GPU it would "
                    "wait forever in kernel 'bars', program (0, 0, 0)");
}

static void test_assert_failure(void **state)
{
    K *k = *state;
    const char *nm[] = {"n"};
    const IrType *tp[] = {sc(k, IR_I32)};
    k_begin(k, "chk", 1, nm, tp);
    IrValue offs = arange(k, 8);
    IrValue c = cmp(k, IR_CMP_LT, offs, splat(k, P(k, 0), ty(k, offs)));
    IrValue o[1] = {c};
    ir_build(&k->b, IR_OP_ASSERT, o, 1, NULL, 0, 0)->attr.s = "offsets below n";
    ret(k);
    InterpArg a[] = {ival(8)};
    assert_true(run(k, a, 3));
    a[0] = ival(5);
    assert_false(run(k, a, 3));
    expect_error(k, "assertion failed in kernel 'chk', program (0, 0, 0): offsets below n");
}

/* Runs out[0] = a OP b on scalars of type e through a kernel. */
static int64_t int_op(K *k, IrElem e, IrOpcode code, int64_t x, int64_t y)
{
    const char *nm[] = {"out", "a", "b"};
    const IrType *tp[] = {pt(k, e), sc(k, e), sc(k, e)};
    k_begin(k, "iop", 3, nm, tp);
    store(k, P(k, 0), op2(k, code, P(k, 1), P(k, 2)), NONE);
    ret(k);
    int64_t out = 0;
    InterpArg a[] = {buf(e, &out, 1), ival(x), ival(y)};
    assert_true(run(k, a, 1));
    int8_t i8;
    uint8_t u8;
    int32_t i32;
    uint32_t u32;
    memcpy(&i8, &out, 1), memcpy(&u8, &out, 1), memcpy(&i32, &out, 4), memcpy(&u32, &out, 4);
    switch (e) {
    case IR_I8: return i8;
    case IR_U8: return u8;
    case IR_I32: return i32;
    case IR_U32: return u32;
    default: return out;
    }
}

static void test_integer_semantics(void **state)
{
    K *k = *state;
    assert_int_equal(int_op(k, IR_I8, IR_OP_ADD, 127, 1), -128);
    assert_int_equal(int_op(k, IR_U8, IR_OP_SUB, 0, 1), 255);
    assert_int_equal(int_op(k, IR_I32, IR_OP_MUL, 65536, 65536), 0);
    assert_int_equal(int_op(k, IR_U32, IR_OP_SHR, 0x80000000u, 4), 0x08000000);
    assert_int_equal(int_op(k, IR_I32, IR_OP_SHR, -16, 2), -4);
    assert_int_equal(int_op(k, IR_I32, IR_OP_SHR, -16, 40), -1);   /* sign fill */
    assert_int_equal(int_op(k, IR_U32, IR_OP_SHR, 0xFFFFFFFFu, 32), 0);
    assert_int_equal(int_op(k, IR_I32, IR_OP_SHL, 1, 31), INT32_MIN);
    assert_int_equal(int_op(k, IR_I32, IR_OP_SHL, 1, 32), 0);
    assert_int_equal(int_op(k, IR_I32, IR_OP_REM, -7, 2), -1);
    assert_int_equal(int_op(k, IR_I32, IR_OP_DIV, INT32_MIN, -1), INT32_MIN);
    assert_int_equal(int_op(k, IR_U32, IR_OP_DIV, 0xFFFFFFFEu, 2), 0x7FFFFFFF);
    assert_int_equal(int_op(k, IR_U32, IR_OP_MAXIMUM, 0xFFFFFFFFu, 1), 0xFFFFFFFFu);
    assert_int_equal(int_op(k, IR_I32, IR_OP_MAXIMUM, -1, 1), 1);
    assert_int_equal(int_op(k, IR_I64, IR_OP_ADD, INT64_MAX, 1), INT64_MIN);
}

/* ---- floats ---------------------------------------------------------------------- */

static void test_f16_add_rounds(void **state)
{
    K *k = *state;
    const char *nm[] = {"a", "b", "out"};
    const IrType *tp[] = {pt(k, IR_F16), pt(k, IR_F16), pt(k, IR_F16)};
    k_begin(k, "hadd", 3, nm, tp);
    store_all(k, P(k, 2), op2(k, IR_OP_ADD, load_all(k, P(k, 0), 4), load_all(k, P(k, 1), 4)));
    ret(k);
    float av[4] = {1.0f, 1.0f, 2048.0f, 65504.0f}, bv[4] = {0x1p-11f, 3 * 0x1p-11f, 1.0f, 32.0f};
    uint16_t a[4], b[4], out[4];
    for (int i = 0; i < 4; i++) a[i] = fp_f32_to_f16(av[i]), b[i] = fp_f32_to_f16(bv[i]);
    InterpArg args[] = {buf(IR_F16, a, 4), buf(IR_F16, b, 4), buf(IR_F16, out, 4)};
    assert_true(run(k, args, 1));
    for (int i = 0; i < 4; i++) assert_int_equal(out[i], fp_f32_to_f16(av[i] + bv[i]));
    assert_int_equal(out[0], 0x3C00);                 /* 1 + 2^-11: tie to even */
    assert_int_equal(out[1], fp_f32_to_f16(1.0f + 0x1p-9f));
    assert_int_equal(out[2], fp_f32_to_f16(2048.0f)); /* 2049 is not an f16 */
    assert_int_equal(out[3], 0x7C00);                 /* overflow */
}

static void test_convert(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "bf", "i", "u8", "f8"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_BF16), pt(k, IR_I32), pt(k, IR_U8), pt(k, IR_F8E4M3)};
    k_begin(k, "cvt", 5, nm, tp);
    IrValue xv = load_all(k, P(k, 0), 8);
    store_all(k, P(k, 1), op1(k, IR_OP_CONVERT, t1(k, sc(k, IR_BF16), 8), xv));
    store_all(k, P(k, 2), op1(k, IR_OP_CONVERT, t1(k, sc(k, IR_I32), 8), xv));
    store_all(k, P(k, 3), op1(k, IR_OP_CONVERT, t1(k, sc(k, IR_U8), 8), xv));
    store_all(k, P(k, 4), op1(k, IR_OP_CONVERT, t1(k, sc(k, IR_F8E4M3), 8), xv));
    ret(k);
    float x[8] = {3.14159f, -2.7f, 1e10f, -1e10f, NAN, 255.9f, -0.5f, 500.0f};
    uint16_t bf[8];
    int32_t iv[8];
    uint8_t u8[8], f8[8];
    InterpArg a[] = {buf(IR_F32, x, 8), buf(IR_BF16, bf, 8), buf(IR_I32, iv, 8), buf(IR_U8, u8, 8), buf(IR_F8E4M3, f8, 8)};
    assert_true(run(k, a, 1));
    for (int i = 0; i < 8; i++) {
        assert_int_equal(bf[i], fp_f32_to_bf16(x[i]));
        assert_int_equal(f8[i], fp_f32_to_f8e4m3(x[i]));
    }
    int32_t want_i[8] = {3, -2, INT32_MAX, INT32_MIN, 0, 255, 0, 500};
    uint8_t want_u[8] = {3, 0, 255, 0, 0, 255, 0, 255};
    for (int i = 0; i < 8; i++) {
        assert_int_equal(iv[i], want_i[i]);
        assert_int_equal(u8[i], want_u[i]);
    }
    assert_int_equal(f8[7], 0x7F);                     /* 500 is past e4m3fn's 448: NaN */
}

static void test_float_math(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32)};
    k_begin(k, "math", 2, nm, tp);
    IrValue xv = load_all(k, P(k, 0), 4);
    const IrType *t = ty(k, xv);
    IrOpcode codes[] = {IR_OP_EXP, IR_OP_LOG, IR_OP_SQRT, IR_OP_RSQRT, IR_OP_SIGMOID, IR_OP_ERF, IR_OP_TANH, IR_OP_FLOOR};
    for (int c = 0; c < 8; c++) store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), c * 4)), op1(k, codes[c], t, xv));
    IrValue three[3] = {xv, xv, xv};
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 32)), ir_build1(&k->b, IR_OP_FMA, t, three, 3));
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 36)), op2(k, IR_OP_MINIMUM, xv, cf(k, t, NAN)));
    ret(k);
    float x[4] = {0.5f, 1.7f, 3.0f, 10.25f}, out[40];
    InterpArg a[] = {buf(IR_F32, x, 4), buf(IR_F32, out, 40)};
    assert_true(run(k, a, 1));
    for (int i = 0; i < 4; i++) {
        float v = x[i];
        float want[8] = {expf(v), logf(v), sqrtf(v), 1.0f / sqrtf(v), 1.0f / (1.0f + expf(-v)), erff(v), tanhf(v), floorf(v)};
        for (int c = 0; c < 8; c++) assert_true(out[c * 4 + i] == want[c]);
        assert_true(out[32 + i] == fmaf(v, v, v));
        assert_true(isnan(out[36 + i]));
    }
}

/* ---- dot ----------------------------------------------------------------------------- */

static void build_dot(K *k, IrElem in, int32_t M, int32_t KK, int32_t N, IrPrecision prec)
{
    const char *nm[] = {"a", "b", "c"};
    const IrType *tp[] = {pt(k, in), pt(k, in), pt(k, IR_F32)};
    k_begin(k, "dot", 3, nm, tp);
    IrValue a = load_2d(k, P(k, 0), M, KK), b = load_2d(k, P(k, 1), KK, N);
    IrValue acc = cf(k, t2(k, sc(k, IR_F32), M, N), 0.25);
    IrValue o[3] = {a, b, acc};
    store_all(k, P(k, 2), op_attr(k, IR_OP_DOT, ty(k, acc), o, 3, prec));
    ret(k);
}

static void test_dot_f32(void **state)
{
    K *k = *state;
    enum { M = 16, KK = 8, N = 32 };
    build_dot(k, IR_F32, M, KK, N, IR_PREC_IEEE);
    float a[M * KK], b[KK * N], c[M * N];
    for (int i = 0; i < M * KK; i++) a[i] = sinf((float)i);
    for (int i = 0; i < KK * N; i++) b[i] = cosf((float)i * 0.3f);
    InterpArg args[] = {buf(IR_F32, a, M * KK), buf(IR_F32, b, KK * N), buf(IR_F32, c, M * N)};
    assert_true(run(k, args, 1));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.25f;
            for (int x = 0; x < KK; x++) acc = fmaf(a[i * KK + x], b[x * N + j], acc);
            assert_true(c[i * N + j] == acc);
        }
}

static void test_dot_tf32(void **state)
{
    K *k = *state;
    enum { M = 16, KK = 16, N = 16 };
    build_dot(k, IR_F32, M, KK, N, IR_PREC_TF32);
    float a[M * KK], b[KK * N], c[M * N];
    /* steps of 2^-14 in [1, 2): tf32 keeps steps of 2^-10, ties at odd multiples of 2^-11 */
    for (int i = 0; i < M * KK; i++) a[i] = 1.0f + (float)i * 0x1p-14f;
    for (int i = 0; i < KK * N; i++) b[i] = 1.0f;
    InterpArg args[] = {buf(IR_F32, a, M * KK), buf(IR_F32, b, KK * N), buf(IR_F32, c, M * N)};
    assert_true(run(k, args, 1));
    int differs = 0;
    for (int i = 0; i < M; i++) {
        float acc = 0.25f, exact = 0.25f;
        for (int x = 0; x < KK; x++) {
            acc = fmaf(nearbyintf(a[i * KK + x] * 1024.0f) / 1024.0f, 1.0f, acc);
            exact = fmaf(a[i * KK + x], 1.0f, exact);
        }
        assert_true(c[i * N] == acc && c[i * N + N - 1] == acc);
        differs += acc != exact;
    }
    assert_true(differs > 0);
}

static void test_dot_f16(void **state)
{
    K *k = *state;
    enum { M = 16, KK = 32, N = 16 };
    build_dot(k, IR_F16, M, KK, N, IR_PREC_DEFAULT);
    uint16_t a[M * KK], b[KK * N];
    float c[M * N];
    for (int i = 0; i < M * KK; i++) a[i] = fp_f32_to_f16(sinf((float)i) * 3.0f);
    for (int i = 0; i < KK * N; i++) b[i] = fp_f32_to_f16(cosf((float)i) / 3.0f);
    InterpArg args[] = {buf(IR_F16, a, M * KK), buf(IR_F16, b, KK * N), buf(IR_F32, c, M * N)};
    assert_true(run(k, args, 1));
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float acc = 0.25f;
            for (int x = 0; x < KK; x++) acc = fmaf(fp_f16_to_f32(a[i * KK + x]), fp_f16_to_f32(b[x * N + j]), acc);
            assert_true(c[i * N + j] == acc);
        }
}

/* A 256 x 256 x 256 matmul in 32 x 32 tiles, a K loop carrying the accumulator. */
/* extract: columns [lo, lo + n) of each row (passes/epichunk.c's chunks of an
 * accumulator); the verifier rejects a range past the operand's last axis. */
static void test_extract(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32)};
    k_begin(k, "ext", 2, nm, tp);
    IrValue x = load_2d(k, P(k, 0), 4, 16);
    IrValue c = op_attr(k, IR_OP_EXTRACT, t2(k, sc(k, IR_F32), 4, 4), &x, 1, 8);
    store_all(k, P(k, 1), c);
    ret(k);
    float in[64], out[16];
    for (int i = 0; i < 64; i++) in[i] = (float)i;
    InterpArg a[] = {buf(IR_F32, in, 64), buf(IR_F32, out, 16)};
    assert_true(run(k, a, 1));
    for (int r = 0; r < 4; r++)
        for (int j = 0; j < 4; j++) assert_true(out[r * 4 + j] == in[r * 16 + 8 + j]);
    IrOp *bad = k->f->values[c].def;
    bad->attr.i = 13;   /* columns 13..16 of 16 */
    assert_false(ir_verify_func(k->f));
}

static void test_tiled_matmul(void **state)
{
    K *k = *state;
    enum { S = 256, B = 32 };
    const char *nm[] = {"a", "b", "c"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32), pt(k, IR_F32)};
    k_begin(k, "mm", 3, nm, tp);
    const IrType *i32 = sc(k, IR_I32), *tb = t2(k, i32, B, B), *tf = t2(k, sc(k, IR_F32), B, B);
    IrValue p = pid(k);
    IrValue bm = op2(k, IR_OP_MUL, op2(k, IR_OP_DIV, p, ci(k, i32, S / B)), ci(k, i32, B));
    IrValue bn = op2(k, IR_OP_MUL, op2(k, IR_OP_REM, p, ci(k, i32, S / B)), ci(k, i32, B));
    IrValue ar = arange(k, B);
    IrValue col = op1(k, IR_OP_BROADCAST, tb, op_attr(k, IR_OP_EXPAND_DIMS, t2(k, i32, 1, B), &ar, 1, 0));
    IrValue row = op1(k, IR_OP_BROADCAST, tb, op_attr(k, IR_OP_EXPAND_DIMS, t2(k, i32, B, 1), &ar, 1, 1));
    IrValue rowS = op2(k, IR_OP_MUL, row, ci(k, tb, S));
    IrValue ops[4] = {ci(k, i32, 0), ci(k, i32, S), ci(k, i32, B), cf(k, tf, 0.0)};
    IrOp *loop = ir_build(&k->b, IR_OP_FOR, ops, 4, &tf, 1, 1);
    IrValue kk = ir_block_add_arg(&loop->regions[0], i32, "k");
    IrValue acc = ir_block_add_arg(&loop->regions[0], tf, "acc");
    IrBuilder outer = k->b;
    ir_builder_at_end(&k->b, &loop->regions[0]);
    IrValue aoff = op2(k, IR_OP_ADD, op2(k, IR_OP_ADD, rowS, splat(k, op2(k, IR_OP_MUL, bm, ci(k, i32, S)), tb)),
                       op2(k, IR_OP_ADD, col, splat(k, kk, tb)));
    IrValue boff = op2(k, IR_OP_ADD, op2(k, IR_OP_ADD, rowS, splat(k, op2(k, IR_OP_MUL, kk, ci(k, i32, S)), tb)),
                       op2(k, IR_OP_ADD, col, splat(k, bn, tb)));
    IrValue d[3] = {load(k, addptr(k, P(k, 0), aoff), NONE, NONE), load(k, addptr(k, P(k, 1), boff), NONE, NONE), acc};
    IrValue next = op_attr(k, IR_OP_DOT, tf, d, 3, IR_PREC_IEEE);
    ir_build(&k->b, IR_OP_YIELD, &next, 1, NULL, 0, 0);
    k->b = outer;
    IrValue coff = op2(k, IR_OP_ADD, op2(k, IR_OP_ADD, rowS, splat(k, op2(k, IR_OP_MUL, bm, ci(k, i32, S)), tb)),
                       op2(k, IR_OP_ADD, col, splat(k, bn, tb)));
    store(k, addptr(k, P(k, 2), coff), loop->results[0], NONE);
    ret(k);
    float *a = malloc(sizeof(float) * S * S), *b = malloc(sizeof(float) * S * S), *c = malloc(sizeof(float) * S * S);
    for (int i = 0; i < S * S; i++) a[i] = (float)(i % 7) - 3.0f, b[i] = (float)(i % 5) * 0.5f;
    InterpArg args[] = {buf(IR_F32, a, S * S), buf(IR_F32, b, S * S), buf(IR_F32, c, S * S)};
    assert_true(run(k, args, (S / B) * (S / B)));
    for (int i = 0; i < S; i += 17)
        for (int j = 0; j < S; j += 13) {
            float want = 0;                              /* small integers: exact in any order */
            for (int x = 0; x < S; x++) want += a[i * S + x] * b[x * S + j];
            assert_true(c[i * S + j] == want);
        }
    free(a), free(b), free(c);
}

/* ---- reductions and scans ---------------------------------------------------------- */

static void test_reductions_and_scans(void **state)
{
    K *k = *state;
    enum { R = 4, C = 8 };
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32)};
    k_begin(k, "red", 2, nm, tp);
    IrValue xv = load_2d(k, P(k, 0), R, C);
    IrOpcode reds[] = {IR_OP_SUM, IR_OP_MAX, IR_OP_MIN, IR_OP_ARGMAX, IR_OP_ARGMIN};
    int at = 0;
    for (int axis = 0; axis < 2; axis++) {
        int32_t n = axis == 0 ? C : R;
        for (int r = 0; r < 5; r++) {
            bool arg = reds[r] == IR_OP_ARGMAX || reds[r] == IR_OP_ARGMIN;
            IrValue v = op_attr(k, reds[r], t1(k, sc(k, arg ? IR_I32 : IR_F32), n), &xv, 1, axis);
            if (arg) v = op1(k, IR_OP_CONVERT, t1(k, sc(k, IR_F32), n), v);
            store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), at)), v);
            at += n;
        }
        for (int s = 0; s < 2; s++) {
            store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), at)),
                      op_attr(k, s ? IR_OP_CUMPROD : IR_OP_CUMSUM, ty(k, xv), &xv, 1, axis));
            at += R * C;
        }
    }
    ret(k);
    float x[R * C], out[2 * (5 * 8 + 2 * R * C)];
    for (int i = 0; i < R * C; i++) x[i] = (float)((i * 5) % 11) * 0.5f - 2.0f;
    x[3] = x[1] = 9.0f;                                 /* a tie for argmax in row 0 */
    InterpArg a[] = {buf(IR_F32, x, R * C), buf(IR_F32, out, (int64_t)(sizeof out / 4))};
    assert_true(run(k, a, 1));
    at = 0;
    for (int axis = 0; axis < 2; axis++) {
        int n = axis == 0 ? C : R, len = axis == 0 ? R : C;
        for (int r = 0; r < 5; r++, at += n)
            for (int o = 0; o < n; o++) {
                float sum = 0, mx = -INFINITY, mn = INFINITY;
                int amx = 0, amn = 0;
                for (int l = 0; l < len; l++) {
                    float v = axis == 0 ? x[l * C + o] : x[o * C + l];
                    sum += v;
                    if (v > mx) mx = v, amx = l;
                    if (v < mn) mn = v, amn = l;
                }
                float want[5] = {sum, mx, mn, (float)amx, (float)amn};
                assert_true(out[at + o] == want[r]);
            }
        for (int s = 0; s < 2; s++, at += R * C)
            for (int o = 0; o < n; o++) {
                float acc = s ? 1.0f : 0.0f;
                for (int l = 0; l < len; l++) {
                    int idx = axis == 0 ? l * C + o : o * C + l;
                    acc = s ? acc * x[idx] : acc + x[idx];
                    assert_true(out[at + idx] == acc);
                }
            }
    }
    /* axis 0 took 5 * 8 + 2 * 32 = 104 slots; then sum, max, min of 4, then argmax */
    assert_true(out[104 + 3 * 4 + 0] == 1.0f);            /* row 0: the first of the tie */
}

static void test_int_reductions_wrap(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_I8), pt(k, IR_I8)};
    k_begin(k, "ired", 2, nm, tp);
    IrValue xv = load_all(k, P(k, 0), 4);
    store_all(k, P(k, 1), op_attr(k, IR_OP_SUM, sc(k, IR_I8), &xv, 1, 0));
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 1)), op_attr(k, IR_OP_CUMSUM, ty(k, xv), &xv, 1, 0));
    ret(k);
    int8_t x[4] = {100, 100, -50, 3}, out[5];
    InterpArg a[] = {buf(IR_I8, x, 4), buf(IR_I8, out, 5)};
    assert_true(run(k, a, 1));
    assert_int_equal(out[0], (int8_t)(100 + 100 - 50 + 3));
    assert_int_equal(out[1], 100);
    assert_int_equal(out[2], -56);                       /* 200 wraps */
    assert_int_equal(out[3], -106);
}

/* xor_sum along both axes and a reversed cumsum, against C loops. */
static void test_xor_sum_and_reverse_scan(void **state)
{
    K *k = *state;
    enum { R = 4, C = 8 };
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_I32), pt(k, IR_I32)};
    k_begin(k, "xr", 2, nm, tp);
    IrValue xv = load_2d(k, P(k, 0), R, C);
    store_all(k, P(k, 1), op_attr(k, IR_OP_XOR_SUM, t1(k, sc(k, IR_I32), C), &xv, 1, 0));
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), C)), op_attr(k, IR_OP_XOR_SUM, t1(k, sc(k, IR_I32), R), &xv, 1, 1));
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), C + R)),
              op_attr(k, IR_OP_CUMSUM, ty(k, xv), &xv, 1, 1 | IR_SCAN_REVERSE));
    ret(k);
    verify(k);
    int32_t x[R * C], out[C + R + R * C];
    for (int i = 0; i < R * C; i++) x[i] = (i * 37) % 101 - 20;
    InterpArg a[] = {buf(IR_I32, x, R * C), buf(IR_I32, out, C + R + R * C)};
    assert_true(run(k, a, 1));
    for (int c = 0; c < C; c++) {
        int32_t want = 0;
        for (int r = 0; r < R; r++) want ^= x[r * C + c];
        assert_int_equal(out[c], want);
    }
    for (int r = 0; r < R; r++) {
        int32_t want = 0, acc = 0;
        for (int c = 0; c < C; c++) want ^= x[r * C + c];
        assert_int_equal(out[C + r], want);
        for (int c = C - 1; c >= 0; c--) {
            acc += x[r * C + c];
            assert_int_equal(out[C + R + r * C + c], acc);
        }
    }
}

/* reduce and scan with a combine region over two tiles (v, i): keep the pair with the
 * larger v, the earlier one on ties: a reduce gives argmax with its value, a scan the
 * running maximum and where it was; a non-commutative "first" combine keeps order. */
static IrOp *combine_op(K *k, IrOpcode code, const IrValue *ops, uint32_t n, const IrType *const *rt, int64_t attr)
{
    IrOp *op = ir_build(&k->b, code, ops, n, rt, n, 1);
    op->attr.i = attr;
    IrValue args[4];
    for (uint32_t i = 0; i < 2 * n; i++) args[i] = ir_block_add_arg(&op->regions[0], ir_type_elem(k->ctx, ty(k, ops[i % n])), NULL);
    IrBuilder saved = k->b;
    ir_builder_at_end(&k->b, &op->regions[0]);
    IrValue ys[2];
    if (n == 2) {
        IrValue gt = cmp(k, IR_CMP_GT, args[2], args[0]);
        for (int i = 0; i < 2; i++) {
            IrValue o[3] = {gt, args[2 + i], args[i]};
            ys[i] = ir_build1(&k->b, IR_OP_SELECT, ty(k, args[i]), o, 3);
        }
    } else {
        ys[0] = args[0];                                   /* first(a, b) = a */
    }
    ir_build(&k->b, IR_OP_YIELD, ys, n, NULL, 0, 0);
    k->b = saved;
    return op;
}

static void test_combine_reduce_and_scan(void **state)
{
    K *k = *state;
    enum { N = 16 };
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32)};
    k_begin(k, "comb", 2, nm, tp);
    IrValue xv = load_all(k, P(k, 0), N), iv = arange(k, N);
    IrValue pair[2] = {xv, iv};
    const IrType *st[2] = {sc(k, IR_F32), sc(k, IR_I32)}, *tt[2] = {ty(k, xv), ty(k, iv)};
    IrOp *red = combine_op(k, IR_OP_REDUCE, pair, 2, st, 0);
    IrOp *scn = combine_op(k, IR_OP_SCAN, pair, 2, tt, 0);
    IrOp *fst = combine_op(k, IR_OP_SCAN, &xv, 1, tt, IR_SCAN_REVERSE);
    store_all(k, P(k, 1), red->results[0]);
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 1)), op1(k, IR_OP_CONVERT, sc(k, IR_F32), red->results[1]));
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 2)), scn->results[0]);
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 2 + N)), op1(k, IR_OP_CONVERT, t1(k, sc(k, IR_F32), N), scn->results[1]));
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 2 + 2 * N)), fst->results[0]);
    ret(k);
    verify(k);
    float x[N], out[2 + 3 * N];
    for (int i = 0; i < N; i++) x[i] = (float)((i * 7) % 11);
    InterpArg a[] = {buf(IR_F32, x, N), buf(IR_F32, out, 2 + 3 * N)};
    assert_true(run(k, a, 1));
    float best = x[0];
    int at = 0;
    for (int i = 0; i < N; i++) {
        if (x[i] > best) best = x[i], at = i;
        assert_true(out[2 + i] == best && out[2 + N + i] == (float)at);
        assert_true(out[2 + 2 * N + i] == x[N - 1]);       /* reversed first: the last element */
    }
    assert_true(out[0] == best && out[1] == (float)at);
}

/* f16 sums accumulate in f32: 2048 + 1 + 1 is 2050, not 2048 + 1 -> 2048 twice. */
static void test_f16_sum_accumulates_in_f32(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_F16), pt(k, IR_F16)};
    k_begin(k, "hsum", 2, nm, tp);
    IrValue xv = load_all(k, P(k, 0), 4);
    store_all(k, P(k, 1), op_attr(k, IR_OP_SUM, sc(k, IR_F16), &xv, 1, 0));
    ret(k);
    uint16_t x[4] = {fp_f32_to_f16(2048), fp_f32_to_f16(1), fp_f32_to_f16(1), 0}, out[1];
    InterpArg a[] = {buf(IR_F16, x, 4), buf(IR_F16, out, 1)};
    assert_true(run(k, a, 1));
    assert_true(fp_f16_to_f32(out[0]) == 2050.0f);
}

/* ---- atomics ----------------------------------------------------------------------- */

static void test_atomic_histogram(void **state)
{
    K *k = *state;
    enum { N = 256, BINS = 16 };
    const char *nm[] = {"x", "hist"};
    const IrType *tp[] = {pt(k, IR_I32), pt(k, IR_I32)};
    k_begin(k, "hist", 2, nm, tp);
    IrValue offs = op2(k, IR_OP_ADD, splat(k, op2(k, IR_OP_MUL, pid(k), ci(k, sc(k, IR_I32), 64)),
                                          t1(k, sc(k, IR_I32), 64)), arange(k, 64));
    IrValue v = load(k, addptr(k, P(k, 0), offs), NONE, NONE);
    IrValue o[2] = {addptr(k, P(k, 1), v), ci(k, ty(k, v), 1)};
    ir_build1(&k->b, IR_OP_ATOMIC_ADD, ty(k, v), o, 2);
    ret(k);
    int32_t x[N], hist[BINS] = {0}, want[BINS] = {0};
    for (int i = 0; i < N; i++) x[i] = (i * 7 + i / 3) % BINS, want[x[i]]++;
    InterpArg a[] = {buf(IR_I32, x, N), buf(IR_I32, hist, BINS)};
    assert_true(run(k, a, N / 64));
    for (int i = 0; i < BINS; i++) assert_int_equal(hist[i], want[i]);
}

/* Lanes of atomic_cas go in lane order: lane i finds i and leaves i + 1. */
static void test_atomic_cas_and_old_values(void **state)
{
    K *k = *state;
    const char *nm[] = {"ctr", "old", "fl"};
    const IrType *tp[] = {pt(k, IR_I32), pt(k, IR_I32), pt(k, IR_F32)};
    k_begin(k, "cas", 3, nm, tp);
    IrValue ar = arange(k, 8);
    IrValue o[3] = {splat(k, P(k, 0), ty(k, ar)), ar, op2(k, IR_OP_ADD, ar, ci(k, ty(k, ar), 1))};
    store_all(k, P(k, 1), ir_build1(&k->b, IR_OP_ATOMIC_CAS, ty(k, ar), o, 3));
    const IrType *tf = t1(k, sc(k, IR_F32), 8);
    IrValue m[2] = {splat(k, P(k, 2), tf), op1(k, IR_OP_CONVERT, tf, ar)};
    ir_build1(&k->b, IR_OP_ATOMIC_MAX, tf, m, 2);
    ret(k);
    int32_t ctr = 0, old[8];
    float fl = 3.5f;
    InterpArg a[] = {buf(IR_I32, &ctr, 1), buf(IR_I32, old, 8), buf(IR_F32, &fl, 1)};
    assert_true(run(k, a, 1));
    assert_int_equal(ctr, 8);
    for (int i = 0; i < 8; i++) assert_int_equal(old[i], i);
    assert_true(fl == 7.0f);
}

/* and/or/xor combine bits (u8 wraps nothing: the old values come back exactly); the
 * memory order is an attribute the interpreter needs not look at, and barrier does
 * nothing to a program that runs alone. */
static void test_atomic_bitwise(void **state)
{
    K *k = *state;
    const char *nm[] = {"a", "old"};
    const IrType *tp[] = {pt(k, IR_U32), pt(k, IR_U32)};
    k_begin(k, "bits", 2, nm, tp);
    const IrType *tu = t1(k, sc(k, IR_U32), 4);
    IrValue pa = splat(k, P(k, 0), tu), lane = op1(k, IR_OP_CONVERT, tu, arange(k, 4));
    IrValue one = ci(k, tu, 1);
    IrValue bit[3] = {op2(k, IR_OP_SHL, one, lane), op2(k, IR_OP_SHL, one, op2(k, IR_OP_ADD, lane, ci(k, tu, 4))),
                      op2(k, IR_OP_SHL, one, op2(k, IR_OP_ADD, lane, ci(k, tu, 8)))};
    IrOpcode code[3] = {IR_OP_ATOMIC_OR, IR_OP_ATOMIC_XOR, IR_OP_ATOMIC_AND};
    IrValue last = 0;
    for (int i = 0; i < 3; i++) {
        IrValue o[2] = {pa, i == 2 ? ci(k, tu, 0xff0) : bit[i]};
        IrOp *op = ir_build(&k->b, code[i], o, 2, &tu, 1, 0);
        op->attr.i = i == 0 ? IR_SEM_RELAXED : i == 1 ? IR_SEM_RELEASE : IR_SEM_ACQUIRE;
        last = op->results[0];
        ir_build(&k->b, IR_OP_BARRIER, NULL, 0, NULL, 0, 0);
    }
    store_all(k, P(k, 1), last);
    ret(k);
    uint32_t a = 0x10000, old[4];
    InterpArg args[] = {buf(IR_U32, &a, 1), buf(IR_U32, old, 4)};
    assert_true(run(k, args, 1));
    assert_int_equal(a, 0xf0);                           /* ((0x10000 | 0xf) ^ 0xf0) & 0xff0 */
    assert_int_equal(old[0], 0x100ff);                   /* the and's first lane sees or and xor */
    for (int i = 1; i < 4; i++) assert_int_equal(old[i], 0xf0);
}

/* ---- control flow ------------------------------------------------------------------- */

/* out[0] = sum of i for i in range(lo, hi, step), a loop-carried value. */
static void build_for_sum(K *k)
{
    const char *nm[] = {"out", "lo", "hi", "step"};
    const IrType *i32 = sc(k, IR_I32), *tp[] = {pt(k, IR_I32), i32, i32, i32};
    k_begin(k, "forsum", 4, nm, tp);
    IrValue ops[4] = {P(k, 1), P(k, 2), P(k, 3), ci(k, i32, 0)};
    IrOp *loop = ir_build(&k->b, IR_OP_FOR, ops, 4, &i32, 1, 1);
    IrValue iv = ir_block_add_arg(&loop->regions[0], i32, "i");
    IrValue acc = ir_block_add_arg(&loop->regions[0], i32, "acc");
    IrBuilder outer = k->b;
    ir_builder_at_end(&k->b, &loop->regions[0]);
    IrValue next = op2(k, IR_OP_ADD, acc, iv);
    ir_build(&k->b, IR_OP_YIELD, &next, 1, NULL, 0, 0);
    k->b = outer;
    store(k, P(k, 0), loop->results[0], NONE);
    ret(k);
}

static void test_for_loop(void **state)
{
    K *k = *state;
    build_for_sum(k);
    int32_t out = -1;
    int64_t cases[][3] = {{0, 10, 1}, {3, 20, 4}, {10, 0, -3}, {5, 5, 1}};
    for (int c = 0; c < 4; c++) {
        InterpArg a[] = {buf(IR_I32, &out, 1), ival(cases[c][0]), ival(cases[c][1]), ival(cases[c][2])};
        assert_true(run(k, a, 1));
        int32_t want = 0;
        for (int64_t i = cases[c][0]; cases[c][2] > 0 ? i < cases[c][1] : i > cases[c][1]; i += cases[c][2]) want += (int32_t)i;
        assert_int_equal(out, want);
    }
    InterpArg z[] = {buf(IR_I32, &out, 1), ival(0), ival(10), ival(0)};
    assert_false(run(k, z, 1));
    expect_error(k, "step of 0");
}

/* x = 1; while x < limit { x = x * 3 }; out[0] = x. */
static void build_while(K *k, bool forever)
{
    const char *nm[] = {"out", "limit"};
    const IrType *i32 = sc(k, IR_I32), *tp[] = {pt(k, IR_I32), i32};
    k_begin(k, "wh", 2, nm, tp);
    IrValue init = ci(k, i32, 1);
    IrOp *w = ir_build(&k->b, IR_OP_WHILE, &init, 1, &i32, 1, 2);
    IrBuilder outer = k->b;
    IrValue x = ir_block_add_arg(&w->regions[0], i32, "x");
    ir_builder_at_end(&k->b, &w->regions[0]);
    IrValue c = forever ? ci(k, sc(k, IR_I1), 1) : cmp(k, IR_CMP_LT, x, P(k, 1));
    IrValue co[2] = {c, x};
    ir_build(&k->b, IR_OP_CONDITION, co, 2, NULL, 0, 0);
    IrValue y = ir_block_add_arg(&w->regions[1], i32, "y");
    ir_builder_at_end(&k->b, &w->regions[1]);
    IrValue next = op2(k, IR_OP_MUL, y, ci(k, i32, 3));
    ir_build(&k->b, IR_OP_YIELD, &next, 1, NULL, 0, 0);
    k->b = outer;
    store(k, P(k, 0), w->results[0], NONE);
    ret(k);
}

static void test_while_loop(void **state)
{
    K *k = *state;
    build_while(k, false);
    int32_t out = 0;
    InterpArg a[] = {buf(IR_I32, &out, 1), ival(100)};
    assert_true(run(k, a, 1));
    assert_int_equal(out, 243);
    a[1] = ival(-5);
    assert_true(run(k, a, 1));
    assert_int_equal(out, 1);
}

static void test_loop_limit(void **state)
{
    K *k = *state;
    build_while(k, true);
    int32_t out = 0;
    InterpArg a[] = {buf(IR_I32, &out, 1), ival(0)};
    InterpOptions opt = {.max_loop_iterations = 50};
    int64_t g[3] = {1, 1, 1};
    assert_false(interp_run(k->f, a, 2, g, &opt, &k->d));
    expect_error(k, "loop ran past 50 iterations in kernel 'wh', program (0, 0, 0)");
}

/* out[pid] = n > 5 ? 10 * pid : 20 * pid, by an if with a result; program 1 returns
 * early from inside the if. */
static void test_if_and_early_return(void **state)
{
    K *k = *state;
    const char *nm[] = {"out", "n"};
    const IrType *i32 = sc(k, IR_I32), *tp[] = {pt(k, IR_I32), i32};
    k_begin(k, "br", 2, nm, tp);
    IrValue p = pid(k);
    IrValue c = cmp(k, IR_CMP_GT, P(k, 1), ci(k, i32, 5));
    IrOp *iff = ir_build(&k->b, IR_OP_IF, &c, 1, &i32, 1, 2);
    IrBuilder outer = k->b;
    for (int r = 0; r < 2; r++) {
        ir_builder_at_end(&k->b, &iff->regions[r]);
        IrValue v = op2(k, IR_OP_MUL, p, ci(k, i32, r ? 20 : 10));
        ir_build(&k->b, IR_OP_YIELD, &v, 1, NULL, 0, 0);
    }
    k->b = outer;
    IrValue is1 = cmp(k, IR_CMP_EQ, p, ci(k, i32, 1));
    IrOp *early = ir_build(&k->b, IR_OP_IF, &is1, 1, NULL, 0, 2);
    ir_builder_at_end(&k->b, &early->regions[0]);
    ret(k);
    k->b = outer;
    store(k, addptr(k, P(k, 0), p), iff->results[0], NONE);
    ret(k);
    int32_t out[3] = {-1, -1, -1};
    InterpArg a[] = {buf(IR_I32, out, 3), ival(9)};
    assert_true(run(k, a, 3));
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], -1);
    assert_int_equal(out[2], 20);
    a[1] = ival(1);
    assert_true(run(k, a, 3));
    assert_int_equal(out[2], 40);
}

/* A for loop carrying a tile; at i == stop the body returns (or fails an assert):
 * the run unwinds through the if and the loop, freeing what they hold. */
static void build_unwind(K *k, bool by_assert)
{
    const char *nm[] = {"out", "stop"};
    const IrType *i32 = sc(k, IR_I32), *tp[] = {pt(k, IR_I32), i32}, *tt = t1(k, i32, 8);
    k_begin(k, "unw", 2, nm, tp);
    IrValue ops[4] = {ci(k, i32, 0), ci(k, i32, 10), ci(k, i32, 1), arange(k, 8)};
    IrOp *loop = ir_build(&k->b, IR_OP_FOR, ops, 4, &tt, 1, 1);
    IrValue iv = ir_block_add_arg(&loop->regions[0], i32, "i");
    IrValue acc = ir_block_add_arg(&loop->regions[0], tt, "acc");
    IrBuilder outer = k->b;
    ir_builder_at_end(&k->b, &loop->regions[0]);
    IrValue hit = cmp(k, IR_CMP_EQ, iv, P(k, 1));
    if (by_assert) {
        IrValue ok = op1(k, IR_OP_NOT, sc(k, IR_I1), hit);
        ir_build(&k->b, IR_OP_ASSERT, &ok, 1, NULL, 0, 0)->attr.s = "i reached stop";
    } else {
        IrOp *iff = ir_build(&k->b, IR_OP_IF, &hit, 1, NULL, 0, 2);
        IrBuilder body = k->b;
        ir_builder_at_end(&k->b, &iff->regions[0]);
        ret(k);
        k->b = body;
    }
    IrValue next = op2(k, IR_OP_ADD, acc, splat(k, iv, tt));
    ir_build(&k->b, IR_OP_YIELD, &next, 1, NULL, 0, 0);
    k->b = outer;
    store_all(k, P(k, 0), loop->results[0]);
    ret(k);
}

static void test_unwind_from_loop(void **state)
{
    K *k = *state;
    int32_t out[8] = {0};
    build_unwind(k, false);
    InterpArg a[] = {buf(IR_I32, out, 8), ival(3)};
    assert_true(run(k, a, 2));
    for (int i = 0; i < 8; i++) assert_int_equal(out[i], 0);      /* returned before the store */
    a[1] = ival(99);
    assert_true(run(k, a, 1));
    for (int i = 0; i < 8; i++) assert_int_equal(out[i], i + 45);
    build_unwind(k, true);
    a[1] = ival(5);
    assert_false(run(k, a, 1));
    expect_error(k, "assertion failed in kernel 'unw', program (0, 0, 0): i reached stop");
}

/* ---- rand, grid, print, hints, arguments ------------------------------------------- */

static void test_rand_randn(void **state)
{
    K *k = *state;
    enum { N = 4096 };
    const char *nm[] = {"u", "g", "seed"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_F32), sc(k, IR_I64)};
    k_begin(k, "rng", 3, nm, tp);
    IrValue offs = op2(k, IR_OP_ADD, splat(k, op2(k, IR_OP_MUL, pid(k), ci(k, sc(k, IR_I32), 1024)),
                                          t1(k, sc(k, IR_I32), 1024)), arange(k, 1024));
    const IrType *tf = t1(k, sc(k, IR_F32), 1024);
    IrValue o[2] = {P(k, 2), offs};
    store(k, addptr(k, P(k, 0), offs), ir_build1(&k->b, IR_OP_RAND, tf, o, 2), NONE);
    store(k, addptr(k, P(k, 1), offs), ir_build1(&k->b, IR_OP_RANDN, tf, o, 2), NONE);
    ret(k);
    float *u = malloc(N * sizeof *u), *g = malloc(N * sizeof *g);
    InterpArg a[] = {buf(IR_F32, u, N), buf(IR_F32, g, N), ival(1234)};
    assert_true(run(k, a, N / 1024));
    double mean = 0, gm = 0, gv = 0;
    for (int i = 0; i < N; i++) {
        assert_true(u[i] == tile_rand(1234, i));
        assert_true(g[i] == tile_randn(1234, i));
        assert_true(u[i] >= 0 && u[i] < 1);
        mean += u[i] / N;
        gm += g[i] / N;
        gv += (double)g[i] * g[i] / N;
    }
    assert_true(mean > 0.45 && mean < 0.55);
    assert_true(fabs(gm) < 0.1 && gv > 0.9 && gv < 1.1);
    free(u), free(g);
}

static void test_grid_function(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "n"};
    const IrType *i32 = sc(k, IR_I32), *tp[] = {pt(k, IR_F32), i32};
    IrFunc *gf = ir_func_create(k->m, IR_FUNC_GRID, "g", (Loc){0}, tp, nm, 2);
    ir_builder_at_end(&k->b, &gf->body);
    IrValue n = gf->body.args[1];
    IrValue v[2] = {op2(k, IR_OP_DIV, op2(k, IR_OP_ADD, n, ci(k, i32, 63)), ci(k, i32, 64)), ci(k, i32, 4)};
    ir_build(&k->b, IR_OP_RETURN, v, 2, NULL, 0, 0);
    int64_t grid[3] = {0, 0, 0};
    InterpArg a[] = {ival(0), ival(1000)};
    assert_int_equal(interp_eval_grid(gf, a, 2, grid, &k->d), 2);
    assert_int_equal(grid[0], 16);
    assert_int_equal(grid[1], 4);
    assert_int_equal(grid[2], 1);
    assert_int_equal(k->d.nerrors, 0);
}

static void test_print(void **state)
{
    K *k = *state;
    const char *nm[] = {"s"};
    const IrType *tp[] = {sc(k, IR_F32)};
    k_begin(k, "pr", 1, nm, tp);
    IrValue v[2] = {arange(k, 4), P(k, 0)};
    ir_build(&k->b, IR_OP_PRINT, v, 2, NULL, 0, 0)->attr.s = "vals";
    ret(k);
    char text[256] = {0};
    FILE *f = fmemopen(text, sizeof text - 1, "w");
    InterpOptions opt = {.print_out = f};
    InterpArg a[] = {fval(0.5)};
    int64_t g[3] = {2, 1, 1};
    assert_true(interp_run(k->f, a, 1, g, &opt, &k->d));
    fclose(f);
    assert_string_equal(text, "pid (0, 0, 0) vals [0, 1, 2, 3] 0.5\npid (1, 0, 0) vals [0, 1, 2, 3] 0.5\n");
}

static void test_hint_violation(void **state)
{
    K *k = *state;
    const char *nm[] = {"base"};
    const IrType *tp[] = {sc(k, IR_I32)};
    k_begin(k, "hint", 1, nm, tp);
    IrValue offs = op2(k, IR_OP_ADD, splat(k, P(k, 0), t1(k, sc(k, IR_I32), 16)), arange(k, 16));
    IrValue h = op_attr(k, IR_OP_MULTIPLE_OF, ty(k, offs), &offs, 1, 16);
    op_attr(k, IR_OP_MAX_CONTIGUOUS, ty(k, offs), &h, 1, 16);
    ret(k);
    InterpArg a[] = {ival(32)};
    assert_true(run(k, a, 1));
    a[0] = ival(8);
    assert_false(run(k, a, 1));
    expect_error(k, "multiple_of hint violated in kernel 'hint', program (0, 0, 0): lane 0 holds 8, not a multiple of 16");
}

static void test_argument_checks(void **state)
{
    K *k = *state;
    build_vadd(k);
    float x[4];
    int32_t xi[4];
    InterpArg wrong_count[] = {buf(IR_F32, x, 4)};
    int64_t g[3] = {1, 1, 1};
    assert_false(interp_run(k->f, wrong_count, 1, g, NULL, &k->d));
    expect_error(k, "kernel 'vadd' takes 4 arguments, got 1");
    diag_free(&k->d);
    diag_init(&k->d);
    InterpArg wrong_elem[] = {buf(IR_I32, xi, 4), buf(IR_F32, x, 4), buf(IR_F32, x, 4), ival(4)};
    assert_false(run(k, wrong_elem, 1));
    expect_error(k, "argument 'x' of kernel 'vadd' is a buffer of i32, but the parameter is *f32");
    diag_free(&k->d);
    diag_init(&k->d);
    InterpArg scalar_for_buf[] = {ival(0), buf(IR_F32, x, 4), buf(IR_F32, x, 4), ival(4)};
    assert_false(run(k, scalar_for_buf, 1));
    expect_error(k, "argument 'x' of kernel 'vadd' must be a buffer");
}

static void test_shapes(void **state)
{
    K *k = *state;
    const char *nm[] = {"x", "out"};
    const IrType *tp[] = {pt(k, IR_I32), pt(k, IR_I32)};
    k_begin(k, "shp", 2, nm, tp);
    IrValue xv = load_2d(k, P(k, 0), 2, 4);
    store_all(k, P(k, 1), op1(k, IR_OP_TRANS, t2(k, sc(k, IR_I32), 4, 2), xv));
    IrValue row = load_2d(k, P(k, 0), 1, 4);
    store_all(k, addptr(k, P(k, 1), ci(k, sc(k, IR_I32), 8)), op1(k, IR_OP_BROADCAST, t2(k, sc(k, IR_I32), 4, 4), row));
    ret(k);
    int32_t x[8] = {0, 1, 2, 3, 4, 5, 6, 7}, out[24];
    InterpArg a[] = {buf(IR_I32, x, 8), buf(IR_I32, out, 24)};
    assert_true(run(k, a, 1));
    int32_t want_t[8] = {0, 4, 1, 5, 2, 6, 3, 7};
    for (int i = 0; i < 8; i++) assert_int_equal(out[i], want_t[i]);
    for (int i = 0; i < 16; i++) assert_int_equal(out[8 + i], i % 4);
}

/* bitcast (issue 13): every bit pattern of the 8- and 16-bit floats comes back from an
 * integer and back again (NaNs as NaNs), f32 and f64 as memcpy would, and the kernel op
 * reads a tile's bits. */
static void check_bits_roundtrip(IrElem fl, IrElem in, int bits)
{
    for (uint32_t u = 0; u < 1u << bits; u++) {
        Slot x = interp_bitcast(in, fl, (Slot){.i = (int64_t)u});
        Slot back = interp_bitcast(fl, in, x);
        if (isnan(x.f)) continue;
        assert_int_equal((uint64_t)back.i, u);
    }
}

static void test_bitcast(void **state)
{
    check_bits_roundtrip(IR_F16, IR_U16, 16);
    check_bits_roundtrip(IR_BF16, IR_U16, 16);
    check_bits_roundtrip(IR_F8E4M3, IR_U8, 8);
    check_bits_roundtrip(IR_F8E5M2, IR_U8, 8);
    assert_true(isnan(interp_bitcast(IR_U16, IR_F16, (Slot){.i = 0x7e01}).f));
    assert_int_equal(interp_bitcast(IR_F16, IR_I16, (Slot){.f = -2.0}).i, (int16_t)0xc000);   /* sign-extended */
    assert_int_equal(interp_bitcast(IR_F64, IR_I64, (Slot){.f = 1.0}).i, INT64_C(0x3ff0000000000000));
    assert_true(interp_bitcast(IR_U32, IR_F32, (Slot){.i = 0xff800000}).f == -INFINITY);
    assert_int_equal(interp_bitcast(IR_U32, IR_I32, (Slot){.i = 0xffffffff}).i, -1);
    K *k = *state;
    const char *nm[] = {"x", "o"};
    const IrType *tp[] = {pt(k, IR_F32), pt(k, IR_I32)};
    k_begin(k, "bc", 2, nm, tp);
    IrValue xv = load_all(k, P(k, 0), 8);
    store_all(k, P(k, 1), op1(k, IR_OP_BITCAST, t1(k, sc(k, IR_I32), 8), xv));
    ret(k);
    float x[8] = {0.0f, -0.0f, 1.0f, -2.5f, INFINITY, 1e-45f, 3.4e38f, NAN};
    int32_t o[8];
    InterpArg a[] = {buf(IR_F32, x, 8), buf(IR_I32, o, 8)};
    assert_true(run(k, a, 1));
    for (int i = 0; i < 8; i++) {
        int32_t want;
        memcpy(&want, &x[i], sizeof want);
        assert_int_equal(o[i], want);
    }
}

int main(void)
{
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_vector_add),        T(test_masked_load_other),  T(test_out_of_bounds_message),
        T(test_store_out_of_bounds), T(test_division_by_zero), T(test_mbarrier_phases), T(test_assert_failure),
        T(test_integer_semantics), T(test_f16_add_rounds),     T(test_convert),
        T(test_float_math),        T(test_dot_f32),            T(test_dot_tf32),
        T(test_dot_f16),           T(test_extract), T(test_tiled_matmul),       T(test_reductions_and_scans),
        T(test_int_reductions_wrap), T(test_f16_sum_accumulates_in_f32), T(test_xor_sum_and_reverse_scan),
        T(test_combine_reduce_and_scan),
        T(test_atomic_histogram),  T(test_atomic_cas_and_old_values), T(test_atomic_bitwise),
        T(test_for_loop),          T(test_while_loop),         T(test_loop_limit),
        T(test_if_and_early_return), T(test_unwind_from_loop), T(test_rand_randn),       T(test_grid_function),
        T(test_print),             T(test_hint_violation),     T(test_argument_checks),
        T(test_shapes),            T(test_bitcast),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
