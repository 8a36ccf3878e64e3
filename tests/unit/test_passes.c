/* The cleanup passes (canonicalize, fold, cse, dce) on IR built in memory: each test
 * checks the ops left afterwards, that the IR still verifies, and the returned
 * "changed" flag (true on the first run, false on a second run: a fixed point). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/interp.h"
#include "ir/ir.h"
#include "ir/layout.h"
#include "passes/passes.h"

typedef struct Fx {
    IrCtx *c;
    IrModule *m;
    IrFunc *f;
    IrBuilder b;
    const IrType *i32, *f32, *i1, *f16;
} Fx;

/* A kernel with parameters (%a: i32, %x: f32, %p: *f32, %c: i1). */
static void fx_init(Fx *x)
{
    memset(x, 0, sizeof *x);
    x->c = ir_ctx_create();
    x->m = ir_module_create(x->c);
    x->i32 = ir_type_scalar(x->c, IR_I32);
    x->f32 = ir_type_scalar(x->c, IR_F32);
    x->i1 = ir_type_scalar(x->c, IR_I1);
    x->f16 = ir_type_scalar(x->c, IR_F16);
    const IrType *params[] = {x->i32, x->f32, ir_type_ptr(x->c, IR_F32), x->i1};
    const char *names[] = {"a", "x", "p", "c"};
    x->f = ir_func_create(x->m, IR_FUNC_KERNEL, "k", (Loc){0}, params, names, 4);
    ir_builder_at_end(&x->b, &x->f->body);
}

static IrValue arg(const Fx *x, int i) { return x->f->body.args[i]; }

static IrValue bin(Fx *x, IrOpcode code, const IrType *t, IrValue l, IrValue r)
{
    IrValue ops[] = {l, r};
    return ir_build1(&x->b, code, t, ops, 2);
}

/* print "v" of the values (keeps them alive), then return; the IR must verify. */
static void fx_finish(Fx *x, const IrValue *keep, uint32_t n)
{
    IrOp *p = ir_build(&x->b, IR_OP_PRINT, keep, n, NULL, 0, 0);
    p->attr.s = "v";
    ir_build(&x->b, IR_OP_RETURN, NULL, 0, NULL, 0, 0);
    assert_true(ir_verify_func(x->f));
}

static IrOp *printed(const Fx *x) { return x->f->body.last->prev; }

static IrOp *def_of(const Fx *x, IrValue v) { return x->f->values[v].def; }

static int count_ops(const IrBlock *blk, IrOpcode code)
{
    int n = 0;
    for (const IrOp *op = blk->first; op; op = op->next) {
        n += op->code == code;
        for (uint32_t r = 0; r < op->nregions; r++) n += count_ops(&op->regions[r], code);
    }
    return n;
}

/* Runs the pass: it must change the IR, keep it valid, and be at a fixed point. */
static void run_pass(Fx *x, PassFn pass)
{
    assert_true(pass(x->f));
    assert_true(ir_verify_func(x->f));
    assert_false(pass(x->f));
}

/* ---- fold ------------------------------------------------------------------------ */
static void test_fold_int_wraps(void **state)
{
    Fx x;
    fx_init(&x);
    const IrType *i8 = ir_type_scalar(x.c, IR_I8), *u8 = ir_type_scalar(x.c, IR_U8);
    IrValue s = bin(&x, IR_OP_ADD, i8, ir_const_int(&x.b, i8, 100), ir_const_int(&x.b, i8, 100));
    IrValue u = bin(&x, IR_OP_SUB, u8, ir_const_int(&x.b, u8, 1), ir_const_int(&x.b, u8, 2));
    IrValue d = bin(&x, IR_OP_DIV, x.i32, ir_const_int(&x.b, x.i32, -7), ir_const_int(&x.b, x.i32, 2));
    IrValue z = bin(&x, IR_OP_DIV, x.i32, arg(&x, 0), ir_const_int(&x.b, x.i32, 0));
    IrValue zz = bin(&x, IR_OP_REM, x.i32, ir_const_int(&x.b, x.i32, 5), ir_const_int(&x.b, x.i32, 0));
    IrValue keep[] = {s, u, d, z, zz};
    fx_finish(&x, keep, 5);
    run_pass(&x, pass_fold);
    const IrValue *p = printed(&x)->operands;
    assert_int_equal(def_of(&x, p[0])->code, IR_OP_CONST);
    assert_int_equal(def_of(&x, p[0])->attr.i, -56);                  /* 200 wraps in i8 */
    assert_int_equal(def_of(&x, p[1])->attr.i, 255);                  /* 1 - 2 in u8 */
    assert_int_equal(def_of(&x, p[2])->attr.i, -3);                   /* truncates */
    assert_int_equal(def_of(&x, p[3])->code, IR_OP_DIV);              /* x / 0 stays */
    assert_int_equal(def_of(&x, p[4])->code, IR_OP_REM);              /* 5 % 0 stays */
    ir_ctx_destroy(x.c);
}

static void test_fold_float_rounds_like_interp(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue a = ir_const_float(&x.b, x.f16, 1000.0), b = ir_const_float(&x.b, x.f16, 0.3);
    IrValue h = bin(&x, IR_OP_ADD, x.f16, a, b);
    IrValue f = bin(&x, IR_OP_DIV, x.f32, ir_const_float(&x.b, x.f32, 1.0), ir_const_float(&x.b, x.f32, 3.0));
    IrValue cv = ir_build1(&x.b, IR_OP_CONVERT, x.i32, &a, 1);
    IrValue e = ir_build1(&x.b, IR_OP_EXP, x.f32, &f, 1);
    IrValue keep[] = {h, f, cv, e};
    fx_finish(&x, keep, 4);
    run_pass(&x, pass_fold);
    const IrValue *p = printed(&x)->operands;
    assert_true(def_of(&x, p[0])->attr.f == fp_round(IR_F16, 1000.0 + fp_round(IR_F16, 0.3)));
    assert_true(def_of(&x, p[0])->attr.f == 1000.5);
    assert_true(def_of(&x, p[1])->attr.f == (double)(1.0f / 3.0f));
    assert_int_equal(def_of(&x, p[2])->attr.i, 1000);
    assert_int_equal(def_of(&x, p[3])->code, IR_OP_EXP);             /* libm-dependent: stays */
    ir_ctx_destroy(x.c);
}

static void test_fold_cmp_select_splat(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue two = ir_const_int(&x.b, x.i32, 2), three = ir_const_int(&x.b, x.i32, 3);
    IrValue c = bin(&x, IR_OP_CMP, x.i1, two, three);
    def_of(&x, c)->attr.i = IR_CMP_LT;
    IrValue ops[] = {c, two, three};
    IrValue s = ir_build1(&x.b, IR_OP_SELECT, x.i32, ops, 3);
    int32_t n = 16;
    IrValue t = ir_build1(&x.b, IR_OP_SPLAT, ir_type_tile(x.c, x.i32, 1, &n), &s, 1);
    IrValue keep[] = {t};
    fx_finish(&x, keep, 1);
    run_pass(&x, pass_fold);
    const IrOp *k = def_of(&x, printed(&x)->operands[0]);
    assert_int_equal(k->code, IR_OP_CONST);
    assert_int_equal(k->attr.i, 2);
    assert_int_equal(ir_value_type(x.f, k->results[0])->rank, 1);
    assert_int_equal(count_ops(&x.f->body, IR_OP_SPLAT), 0);
    ir_ctx_destroy(x.c);
}

/* if true: the then-region's ops move out and its yield replaces the result. */
static void test_fold_if_inlines(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue t = ir_const_int(&x.b, x.i1, 1);
    IrOp *iff = ir_build(&x.b, IR_OP_IF, &t, 1, &x.i32, 1, 2);
    IrBuilder rb = {0};
    ir_builder_at_end(&rb, &iff->regions[0]);
    IrValue n = ir_build1(&rb, IR_OP_NEG, x.i32, (IrValue[]){arg(&x, 0)}, 1);
    ir_build(&rb, IR_OP_YIELD, &n, 1, NULL, 0, 0);
    ir_builder_at_end(&rb, &iff->regions[1]);
    ir_build(&rb, IR_OP_YIELD, (IrValue[]){arg(&x, 0)}, 1, NULL, 0, 0);
    fx_finish(&x, iff->results, 1);
    run_pass(&x, pass_fold);
    assert_int_equal(count_ops(&x.f->body, IR_OP_IF), 0);
    assert_int_equal(printed(&x)->operands[0], n);
    assert_ptr_equal(def_of(&x, n)->parent, &x.f->body);
    ir_ctx_destroy(x.c);
}

static void test_fold_empty_for(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue ops[] = {ir_const_int(&x.b, x.i32, 5), ir_const_int(&x.b, x.i32, 5), ir_const_int(&x.b, x.i32, 1),
                     arg(&x, 1)};
    IrOp *loop = ir_build(&x.b, IR_OP_FOR, ops, 4, &x.f32, 1, 1);
    ir_block_add_arg(&loop->regions[0], x.i32, "i");
    IrValue acc = ir_block_add_arg(&loop->regions[0], x.f32, "acc");
    IrBuilder rb = {0};
    ir_builder_at_end(&rb, &loop->regions[0]);
    ir_build(&rb, IR_OP_YIELD, &acc, 1, NULL, 0, 0);
    fx_finish(&x, loop->results, 1);
    run_pass(&x, pass_fold);
    assert_int_equal(count_ops(&x.f->body, IR_OP_FOR), 0);
    assert_int_equal(printed(&x)->operands[0], arg(&x, 1));
    ir_ctx_destroy(x.c);
}

/* ---- canonicalize ---------------------------------------------------------------- */
static void test_canonicalize_identities(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue a = arg(&x, 0), fx = arg(&x, 1);
    IrValue zero = ir_const_int(&x.b, x.i32, 0), one = ir_const_int(&x.b, x.i32, 1);
    IrValue add0 = bin(&x, IR_OP_ADD, x.i32, zero, a);                 /* 0 + a -> a */
    IrValue mul1 = bin(&x, IR_OP_MUL, x.i32, add0, one);               /* a * 1 -> a */
    IrValue mul0 = bin(&x, IR_OP_MUL, x.i32, mul1, zero);              /* a * 0 -> 0 */
    IrValue fz = ir_const_float(&x.b, x.f32, 0.0);
    IrValue fadd = bin(&x, IR_OP_ADD, x.f32, fx, fz);                  /* x + 0.0 stays */
    IrValue n1 = ir_build1(&x.b, IR_OP_NEG, x.f32, &fx, 1);
    IrValue n2 = ir_build1(&x.b, IR_OP_NEG, x.f32, &n1, 1);           /* -(-x) -> x */
    IrValue sel_ops[] = {arg(&x, 3), a, a};
    IrValue sel = ir_build1(&x.b, IR_OP_SELECT, x.i32, sel_ops, 3);     /* c ? a : a -> a */
    IrValue hint = ir_build1(&x.b, IR_OP_MULTIPLE_OF, x.i32, &a, 1);
    def_of(&x, hint)->attr.i = 16;
    IrValue keep[] = {mul1, mul0, fadd, n2, sel, hint};
    fx_finish(&x, keep, 6);
    run_pass(&x, pass_canonicalize);
    const IrValue *p = printed(&x)->operands;
    assert_int_equal(p[0], a);
    assert_int_equal(p[1], zero);
    assert_int_equal(p[2], fadd);
    assert_int_equal(p[3], fx);
    assert_int_equal(p[4], a);
    assert_int_equal(p[5], hint);
    assert_int_equal(count_ops(&x.f->body, IR_OP_MULTIPLE_OF), 1);
    ir_ctx_destroy(x.c);
}

static void test_canonicalize_constant_right(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue seven = ir_const_int(&x.b, x.i32, 7);
    IrValue m = bin(&x, IR_OP_MAXIMUM, x.i32, seven, arg(&x, 0));
    IrValue s = bin(&x, IR_OP_SUB, x.i32, seven, arg(&x, 0));          /* not commutative */
    IrValue keep[] = {m, s};
    fx_finish(&x, keep, 2);
    run_pass(&x, pass_canonicalize);
    assert_int_equal(def_of(&x, m)->operands[0], arg(&x, 0));
    assert_int_equal(def_of(&x, m)->operands[1], seven);
    assert_int_equal(def_of(&x, s)->operands[0], seven);
    ir_ctx_destroy(x.c);
}

/* ---- cse ---------------------------------------------------------------------------- */
static void test_cse_scoped(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue a = arg(&x, 0);
    IrValue s1 = bin(&x, IR_OP_ADD, x.i32, a, a), s2 = bin(&x, IR_OP_ADD, x.i32, a, a);
    IrValue l1 = ir_build1(&x.b, IR_OP_LOAD, x.f32, (IrValue[]){arg(&x, 2)}, 1);
    IrValue l2 = ir_build1(&x.b, IR_OP_LOAD, x.f32, (IrValue[]){arg(&x, 2)}, 1);
    IrOp *iff = ir_build(&x.b, IR_OP_IF, (IrValue[]){arg(&x, 3)}, 1, &x.i32, 1, 2);
    IrBuilder rb = {0};
    ir_builder_at_end(&rb, &iff->regions[0]);
    ir_build1(&rb, IR_OP_ADD, x.i32, (IrValue[]){a, a}, 2);                  /* = s1 */
    IrValue only_inside = ir_build1(&rb, IR_OP_MUL, x.i32, (IrValue[]){a, a}, 2);
    ir_build(&rb, IR_OP_YIELD, &only_inside, 1, NULL, 0, 0);
    ir_builder_at_end(&rb, &iff->regions[1]);
    ir_build(&rb, IR_OP_YIELD, &a, 1, NULL, 0, 0);
    IrValue after = bin(&x, IR_OP_MUL, x.i32, a, a);                    /* not = only_inside */
    IrValue keep[] = {s1, s2, l1, l2, iff->results[0], after};
    fx_finish(&x, keep, 6);
    run_pass(&x, pass_cse);
    const IrValue *p = printed(&x)->operands;
    assert_int_equal(p[1], s1);
    assert_int_not_equal(p[2], p[3]);                                    /* loads stay apart */
    assert_int_equal(p[5], after);
    assert_int_equal(count_ops(&iff->regions[0], IR_OP_ADD), 0);         /* reused s1 */
    assert_int_equal(count_ops(&x.f->body, IR_OP_MUL), 2);
    ir_ctx_destroy(x.c);
}

/* ---- dce ---------------------------------------------------------------------------- */
static void test_dce_fixed_point(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue a = arg(&x, 0);
    IrValue d1 = bin(&x, IR_OP_ADD, x.i32, a, a);
    bin(&x, IR_OP_MUL, x.i32, d1, d1);                                  /* dead chain */
    ir_build1(&x.b, IR_OP_LOAD, x.f32, (IrValue[]){arg(&x, 2)}, 1);       /* dead load stays */
    IrOp *as = ir_build(&x.b, IR_OP_ASSERT, (IrValue[]){arg(&x, 3)}, 1, NULL, 0, 0);
    as->attr.s = "kept";
    IrValue live = bin(&x, IR_OP_SUB, x.i32, a, a);
    fx_finish(&x, &live, 1);
    run_pass(&x, pass_dce);
    assert_int_equal(count_ops(&x.f->body, IR_OP_ADD), 0);
    assert_int_equal(count_ops(&x.f->body, IR_OP_MUL), 0);
    assert_int_equal(count_ops(&x.f->body, IR_OP_LOAD), 1);
    assert_int_equal(count_ops(&x.f->body, IR_OP_ASSERT), 1);
    assert_int_equal(count_ops(&x.f->body, IR_OP_SUB), 1);
    ir_ctx_destroy(x.c);
}

/* The default pipeline folds a whole chain down to one constant. */
static void test_pipeline_O2(void **state)
{
    Fx x;
    fx_init(&x);
    IrValue two = ir_const_int(&x.b, x.i32, 2);
    IrValue s = bin(&x, IR_OP_MUL, x.i32, bin(&x, IR_OP_ADD, x.i32, two, two), ir_const_int(&x.b, x.i32, 1));
    IrValue t = bin(&x, IR_OP_ADD, x.i32, arg(&x, 0), bin(&x, IR_OP_SUB, x.i32, s, s));
    fx_finish(&x, &t, 1);
    PassOptions opt = {.verify_each = true};
    assert_true(pass_run_default(x.m, 2, &opt));
    assert_int_equal(printed(&x)->operands[0], arg(&x, 0));
    assert_ptr_equal(x.f->body.first, printed(&x));
    ir_ctx_destroy(x.c);
}

/* ---- dotpad ------------------------------------------------------------------------ */
/* A [4, 8] x [8, 2] f16 dot with an acc, B holding an inf and A a -0.0: after dotpad
 * every dot is at least 16 in each dimension and the interpreter gives the same bits. */
static IrValue iota_tile(Fx *x, IrElem e, int32_t r, int32_t c, double scale)
{
    int32_t n = r * c, sh[2] = {r, c};
    const IrType *it = ir_type_tile(x->c, x->i32, 1, &n), *ft = ir_type_tile(x->c, ir_type_scalar(x->c, e), 1, &n);
    IrOp *ar = ir_build(&x->b, IR_OP_ARANGE, NULL, 0, &it, 1, 0);
    IrValue v = ir_build1(&x->b, IR_OP_CONVERT, ft, &ar->results[0], 1);
    v = bin(x, IR_OP_MUL, ft, v, ir_const_float(&x->b, ft, scale));
    return ir_build1(&x->b, IR_OP_RESHAPE, ir_type_tile(x->c, ir_type_scalar(x->c, e), 2, sh), &v, 1);
}

static void run_pad_kernel(Fx *x, float *out)
{
    InterpArg args[4] = {{.u.i = 0}, {.u.f = 0}, {.is_buffer = true, .u.buf = {IR_F32, out, 8}}, {.u.i = 0}};
    DiagList d;
    diag_init(&d);
    assert_true(interp_run(x->f, args, 4, (int64_t[3]){1, 1, 1}, NULL, &d));
    diag_free(&d);
}

static void test_dotpad_keeps_values(void **state)
{
    Fx x;
    fx_init(&x);
    IrElem h = IR_F16;
    IrValue a = iota_tile(&x, h, 4, 8, -0.25);              /* a[0][0] = -0.0 */
    IrValue b = iota_tile(&x, h, 8, 2, 0.5);
    const IrType *bt = ir_value_type(x.f, b), *mt = ir_type_like(x.c, bt, x.i1);
    IrOp *eq = ir_build(&x.b, IR_OP_CMP, (IrValue[]){b, ir_const_float(&x.b, bt, 1.5)}, 2, &mt, 1, 0);
    eq->attr.i = IR_CMP_EQ;
    b = ir_build1(&x.b, IR_OP_SELECT, bt, (IrValue[]){eq->results[0], ir_const_float(&x.b, bt, INFINITY), b}, 3);
    int32_t cs[2] = {4, 2}, n = 8;
    const IrType *ct = ir_type_tile(x.c, x.f32, 2, cs);
    IrValue acc = iota_tile(&x, IR_F32, 4, 2, -1.0);
    IrOp *d = ir_build(&x.b, IR_OP_DOT, (IrValue[]){a, b, acc}, 3, &ct, 1, 0);
    IrValue r = ir_build1(&x.b, IR_OP_RESHAPE, ir_type_tile(x.c, x.f32, 1, &n), &d->results[0], 1);
    IrValue off = ir_build1(&x.b, IR_OP_ARANGE, ir_type_tile(x.c, x.i32, 1, &n), NULL, 0);
    const IrType *pt = ir_type_tile(x.c, ir_type_ptr(x.c, IR_F32), 1, &n);
    IrValue p = ir_build1(&x.b, IR_OP_SPLAT, pt, (IrValue[]){arg(&x, 2)}, 1);
    p = bin(&x, IR_OP_ADDPTR, pt, p, off);
    ir_build(&x.b, IR_OP_STORE, (IrValue[]){p, r}, 2, NULL, 0, 0);
    ir_build(&x.b, IR_OP_RETURN, NULL, 0, NULL, 0, 0);
    assert_true(ir_verify_func(x.f));
    float before[8], after[8];
    run_pad_kernel(&x, before);
    run_pass(&x, pass_dot_pad);
    assert_int_equal(count_ops(&x.f->body, IR_OP_DOT), 1);
    for (IrOp *op = x.f->body.first; op; op = op->next)
        if (op->code == IR_OP_DOT) {
            assert_int_equal(ir_value_type(x.f, op->results[0])->shape[0], 16);
            assert_int_equal(ir_value_type(x.f, op->operands[0])->shape[1], 16);
            assert_int_equal(ir_value_type(x.f, op->results[0])->shape[1], 16);
        }
    run_pad_kernel(&x, after);
    assert_memory_equal(before, after, sizeof before);
    assert_true(isinf(before[1]) && !isnan(before[1]));    /* column 1 of B holds the inf */
    ir_ctx_destroy(x.c);
}

/* ---- blockload after the layouts ----------------------------------------------------------- */
/* A block_store of a 64 x 64 dot's accumulator (an mma layout after pass_layout) into a
 * 20 x 24 tensor at (8, -4) (rows 8..19 written, every column), expanded by
 * blockstore_expand_laid_out as passes/tmastore.c asks: a masked store whose pointers,
 * value (through a convert_layout) and mask share the blocked layout of the shape; the
 * IR verifies and writes the same elements. */
static const char blockstore_ir[] =
    "kernel @k(%c: *f32, %a: *f16, %M: i32, %N: i32, %om: i32, %on: i32) {\n"
    "  %0 = arange 0 : i32[4096]\n"
    "  %1 = reshape %0 : i32[64, 64]\n"
    "  %2 = splat %a : *f16[64, 64]\n"
    "  %3 = addptr %2, %1 : *f16[64, 64]\n"
    "  %4 = load %3 : f16[64, 64]\n"
    "  %5 = const 0.0 : f32[64, 64]\n"
    "  %6 = dot default %4, %4, %5 : f32[64, 64]\n"
    "  %7 = const 1 : i32\n"
    "  block_store %c, %M, %N, %N, %7, %om, %on, %6\n"
    "  return\n"
    "}\n";

static void run_blockstore(IrFunc *f, float *c, uint16_t *a)
{
    InterpArg args[6] = {{.is_buffer = true, .u.buf = {IR_F32, c, 480}}, {.is_buffer = true, .u.buf = {IR_F16, a, 4096}},
                         {.u.i = 20}, {.u.i = 24}, {.u.i = 8}, {.u.i = -4}};
    DiagList d;
    diag_init(&d);
    assert_true(interp_run(f, args, 6, (int64_t[3]){1, 1, 1}, NULL, &d));
    diag_free(&d);
}

static void test_blockstore_expand_laid_out(void **state)
{
    IrCtx *c = ir_ctx_create();
    Source *src = source_from_string("blockstore.tir", blockstore_ir);
    IrModule *m = ir_parse(c, src);
    assert_non_null(m);
    IrFunc *f = m->funcs[0];
    static float before[480], after[480];
    static const uint16_t halves[7] = {0xC200, 0xC000, 0xBC00, 0, 0x3C00, 0x4000, 0x4200};   /* -3 .. 3 */
    static uint16_t a[4096];
    for (int i = 0; i < 4096; i++) a[i] = halves[i % 7];
    run_blockstore(f, before, a);
    pass_layout(f);
    assert_true(ir_verify_func(f));
    IrOp *bs = f->body.last->prev;
    assert_int_equal(bs->code, IR_OP_BLOCK_STORE);
    const IrOp *cv = f->values[bs->operands[7]].def;      /* store the accumulator itself */
    if (cv->code == IR_OP_CONVERT_LAYOUT) bs->operands[7] = cv->operands[0];
    assert_int_equal(ir_value_type(f, bs->operands[7])->layout->kind, IR_LAYOUT_MMA);
    blockstore_expand_laid_out(f, bs);
    assert_true(ir_verify_func(f));
    assert_int_equal(count_ops(&f->body, IR_OP_BLOCK_STORE), 0);
    IrOp *st = f->body.last->prev;
    assert_int_equal(st->code, IR_OP_STORE);
    const IrLayout *l = ir_value_type(f, st->operands[0])->layout;
    assert_non_null(l);
    assert_int_equal(l->kind, IR_LAYOUT_BLOCKED);
    assert_ptr_equal(ir_value_type(f, st->operands[1])->layout, l);
    assert_ptr_equal(ir_value_type(f, st->operands[2])->layout, l);
    assert_int_equal(f->values[st->operands[1]].def->code, IR_OP_CONVERT_LAYOUT);
    run_blockstore(f, after, a);
    assert_memory_equal(before, after, sizeof before);
    int written = 0;
    for (int i = 0; i < 480; i++) written += before[i] != 0;
    assert_true(written > 12 * 20 && written <= 12 * 24);
    for (int i = 0; i < 8 * 24; i++) assert_true(before[i] == 0);
    ir_ctx_destroy(c);
    source_free(src);
}

/* passes/cluster.c: a 256-row program on a cluster of two CTAs. */
static const char cluster_ir[] =
    "kernel @k(%c: *f32, %a: *bf16, %b: *bf16, %K: i32) launch {warps = 8, stages = 2, cluster = 2} {\n"
    "  %0 = const 0 : i32\n"
    "  %1 = const 1 : i32\n"
    "  %m = const 256 : i32\n"
    "  %n = const 128 : i32\n"
    "  %x = block_load %a, %m, %K, %K, %1, %0, %0 : bf16[256, 32]\n"
    "  %y = block_load %b, %K, %n, %n, %1, %0, %0 : bf16[32, 128]\n"
    "  %z = const 0.0 : f32[256, 128]\n"
    "  %d = dot default %x, %y, %z : f32[256, 128]\n"
    "  %REDUCE\n"
    "  block_store %c, %m, %n, %n, %1, %0, %0, %d\n"
    "  return\n"
    "}\n";

static IrFunc *cluster_kernel(IrCtx *c, Source **src, const char *extra)
{
    char text[sizeof cluster_ir + 128];
    const char *at = strstr(cluster_ir, "%REDUCE");
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - cluster_ir), cluster_ir, extra, at + strlen("%REDUCE"));
    *src = source_from_string("cluster.tir", text);
    IrModule *m = ir_parse(c, *src);
    assert_non_null(m);
    return m->funcs[0];
}

static const IrOp *op_from_end(const IrFunc *f, int index_from_end_of_body)
{
    const IrOp *op = f->body.last;
    for (int i = 0; i < index_from_end_of_body; i++) op = op->prev;
    return op;
}

/* The dot's A operand, accumulator and result carry the rows: cut to 128 at this CTA's
 * offset (cluster_rank * 128 added to A's and the store's row offsets); B is the same in
 * every CTA: its block load multicast, its shape whole. */
static void test_cluster_splits_rows(void **state)
{
    (void)state;
    IrCtx *c = ir_ctx_create();
    Source *src;
    IrFunc *f = cluster_kernel(c, &src, "");
    assert_true(pass_cluster(f));
    assert_true(ir_verify_func(f));
    assert_int_equal(f->body.first->code, IR_OP_CLUSTER_RANK);
    const IrOp *st = op_from_end(f, 1), *dot = f->values[st->operands[7]].def;
    assert_int_equal(st->code, IR_OP_BLOCK_STORE);
    assert_int_equal(dot->code, IR_OP_DOT);
    assert_int_equal(ir_value_type(f, dot->results[0])->shape[0], 128);
    assert_int_equal(ir_value_type(f, dot->results[0])->shape[1], 128);
    const IrOp *a = f->values[dot->operands[0]].def, *b = f->values[dot->operands[1]].def;
    assert_int_equal(ir_value_type(f, a->results[0])->shape[0], 128);
    assert_int_equal(ir_value_type(f, b->results[0])->shape[0], 32);
    assert_int_equal(ir_value_type(f, b->results[0])->shape[1], 128);
    assert_int_equal(a->attr.i & IR_BLOCK_MULTICAST, 0);
    assert_int_equal(b->attr.i & IR_BLOCK_MULTICAST, IR_BLOCK_MULTICAST);
    /* row offsets: block_load (ptr, shapes x2, strides x2, offsets x2) operand 5 */
    assert_int_equal(f->values[a->operands[5]].def->code, IR_OP_ADD);
    assert_int_equal(f->values[st->operands[5]].def->code, IR_OP_ADD);
    assert_int_equal(f->values[b->operands[5]].def->code, IR_OP_CONST);
    assert_false(pass_cluster(f));   /* the kernel's rows are split already: nothing to do */
    ir_ctx_destroy(c);
    source_free(src);
}

/* A reduction over the rows would need the CTAs to talk: refused at the op, with the
 * kernel left on one CTA a program. */
static void test_cluster_refuses_row_reduction(void **state)
{
    (void)state;
    IrCtx *c = ir_ctx_create();
    Source *src;
    IrFunc *f = cluster_kernel(c, &src, "%s = sum 0 %d : f32[128]\n  block_store %c, %n, %n, %1, %0, %s\n");
    assert_false(pass_cluster(f));
    DiagList *d = ir_ctx_diags(c);
    assert_int_equal(d->nerrors, 1);
    assert_non_null(strstr(d->items[0].msg, "reduces over the program's rows"));
    assert_int_equal(ir_cluster_size(f), 1);
    ir_ctx_destroy(c);
    source_free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_int_wraps),
        cmocka_unit_test(test_fold_float_rounds_like_interp),
        cmocka_unit_test(test_fold_cmp_select_splat),
        cmocka_unit_test(test_fold_if_inlines),
        cmocka_unit_test(test_fold_empty_for),
        cmocka_unit_test(test_canonicalize_identities),
        cmocka_unit_test(test_canonicalize_constant_right),
        cmocka_unit_test(test_cse_scoped),
        cmocka_unit_test(test_dce_fixed_point),
        cmocka_unit_test(test_pipeline_O2),
        cmocka_unit_test(test_dotpad_keeps_values),
        cmocka_unit_test(test_blockstore_expand_laid_out),
        cmocka_unit_test(test_cluster_splits_rows),
        cmocka_unit_test(test_cluster_refuses_row_reduction),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
