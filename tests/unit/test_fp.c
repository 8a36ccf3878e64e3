/* Number formats (ir/fp.c) and Philox4x32-10 (ir/philox.c).
 *
 * Every f16/bf16/f8 bit pattern must survive decode+encode; conversions from f32 are
 * checked against independent oracles (the compiler's _Float16, the classic bf16
 * bit trick) on many pseudo-random floats, and on the halfway, subnormal, overflow
 * and NaN cases by hand. Philox is checked against the Random123 known answers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/interp.h"

static uint32_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 32);
}

/* ---- exhaustive round trips ---------------------------------------------------- */

static void test_f16_roundtrip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp_f16_to_f32((uint16_t)h);
        assert_int_equal(fp_f32_to_f16(f), h);
        bool nan_bits = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
        assert_int_equal(isnan(f) != 0, nan_bits);
        if (!isnan(f)) assert_true(fp_round(IR_F16, f) == f);
    }
}

static void test_bf16_roundtrip(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fp_bf16_to_f32((uint16_t)h);
        assert_int_equal(fp_f32_to_bf16(f), h);
        if (!isnan(f)) assert_int_equal(fp_f32_bits(f), h << 16);   /* bf16 is the top half */
    }
}

static void test_f8_roundtrip(void **state)
{
    (void)state;
    int nans4 = 0, nans5 = 0, infs5 = 0;
    for (uint32_t b = 0; b < 256; b++) {
        float f4 = fp_f8e4m3_to_f32((uint8_t)b), f5 = fp_f8e5m2_to_f32((uint8_t)b);
        assert_int_equal(fp_f32_to_f8e4m3(f4), b);
        assert_int_equal(fp_f32_to_f8e5m2(f5), b);
        nans4 += isnan(f4) != 0;
        nans5 += isnan(f5) != 0;
        infs5 += isinf(f5) != 0;
        assert_false(isinf(f4));                    /* e4m3fn has no infinities */
        if (!isnan(f4)) assert_true(fp_round(IR_F8E4M3, f4) == f4);
        if (!isnan(f5)) assert_true(fp_round(IR_F8E5M2, f5) == f5);
    }
    assert_int_equal(nans4, 2);                     /* 0x7F and 0xFF */
    assert_true(isnan(fp_f8e4m3_to_f32(0x7F)) && isnan(fp_f8e4m3_to_f32(0xFF)));
    assert_int_equal(nans5, 6);
    assert_int_equal(infs5, 2);
}

/* ---- against independent oracles ------------------------------------------------ */

static uint16_t bf16_oracle(float f)
{
    uint32_t u = fp_f32_bits(f);
    return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}

static void test_random_floats(void **state)
{
    (void)state;
    uint64_t s = 42;
    for (int i = 0; i < 400000; i++) {
        float f = fp_bits_f32(lcg(&s));
        if (isnan(f)) continue;
        assert_int_equal(fp_f32_to_bf16(f), bf16_oracle(f));
        assert_true(fp_round(IR_BF16, f) == (double)fp_bf16_to_f32(fp_f32_to_bf16(f)));
#ifdef __FLT16_MAX__
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        assert_int_equal(fp_f32_to_f16(f), hb);
#endif
        assert_true(fp_round(IR_F16, f) == (double)fp_f16_to_f32(fp_f32_to_f16(f)));
        double r4 = fp_round(IR_F8E4M3, f), d4 = fp_f8e4m3_to_f32(fp_f32_to_f8e4m3(f));
        assert_true(r4 == d4 || (isnan(r4) && isnan(d4)));
    }
}

/* ---- the edges by hand ------------------------------------------------------------ */

static void test_halfway_cases(void **state)
{
    (void)state;
    /* f16 near 1: spacing 2^-10; ties go to the even mantissa. */
    assert_true(fp_round(IR_F16, 1.0 + 0x1p-11) == 1.0);
    assert_true(fp_round(IR_F16, 1.0 + 3 * 0x1p-11) == 1.0 + 0x1p-9);
    assert_true(fp_round(IR_F16, 1.0 + 0x1p-11 + 0x1p-40) == 1.0 + 0x1p-10);
    assert_true(fp_round(IR_BF16, 1.0 + 0x1p-8) == 1.0);
    assert_true(fp_round(IR_BF16, 1.0 + 3 * 0x1p-8) == 1.0 + 0x1p-6);
    assert_true(fp_round(IR_F8E4M3, 1.0625) == 1.0);   /* spacing 1/8 */
    assert_true(fp_round(IR_F8E4M3, 1.1875) == 1.25);
    assert_true(fp_round(IR_F8E5M2, 1.125) == 1.0);    /* spacing 1/4 */
    /* double -> f32 is round to nearest even too */
    assert_true(fp_round(IR_F32, 1.0 + 0x1p-24) == 1.0);
    assert_true(fp_round(IR_F32, 1.0 + 0x1p-24 + 0x1p-50) == 1.0 + 0x1p-23);
    assert_true(fp_round(IR_F64, 1.0 + 0x1p-50) == 1.0 + 0x1p-50);
    /* rounding straight from double: no double rounding through f32 */
    assert_true(fp_round(IR_F16, 1.0 + 0x1p-11 + 0x1p-30) == 1.0 + 0x1p-10);
}

static void test_subnormals(void **state)
{
    (void)state;
    assert_int_equal(fp_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(fp_f32_to_f16(0x1p-25f), 0x0000);          /* tie -> even (zero) */
    assert_int_equal(fp_f32_to_f16(0x1.8p-25f), 0x0001);
    assert_int_equal(fp_f32_to_f16(3 * 0x1p-25f), 0x0002);      /* tie -> even */
    assert_int_equal(fp_f32_to_f16(-0x1p-24f), 0x8001);
    assert_int_equal(fp_f32_to_f16(0x1p-14f - 0x1p-25f), 0x0400); /* up into the normals */
    assert_true(fp_f16_to_f32(0x03FF) == 0x3FFp-24f);
    assert_true(fp_f8e4m3_to_f32(0x01) == 0x1p-9f);
    assert_true(fp_f8e5m2_to_f32(0x01) == 0x1p-16f);
    assert_true(fp_bf16_to_f32(0x0001) == 0x1p-133f);
    assert_int_equal(fp_f32_to_f16(-0.0f), 0x8000);
    assert_true(signbit(fp_round(IR_F16, -0x1p-30)));           /* -0 keeps its sign */
}

static void test_overflow(void **state)
{
    (void)state;
    assert_int_equal(fp_f32_to_f16(65504.0f), 0x7BFF);
    assert_int_equal(fp_f32_to_f16(65519.0f), 0x7BFF);
    assert_int_equal(fp_f32_to_f16(65520.0f), 0x7C00);          /* rounds past the max */
    assert_int_equal(fp_f32_to_f16(-1e6f), 0xFC00);
    assert_int_equal(fp_f32_to_bf16(3.4e38f), 0x7F80);
    assert_int_equal(fp_f32_to_bf16(INFINITY), 0x7F80);
    assert_int_equal(fp_f32_to_f8e4m3(448.0f), 0x7E);
    assert_int_equal(fp_f32_to_f8e4m3(464.0f), 0x7E);           /* tie -> even 448 */
    assert_int_equal(fp_f32_to_f8e4m3(465.0f), 0x7F);           /* would round to 480: NaN */
    assert_int_equal(fp_f32_to_f8e4m3(-1000.0f), 0xFF);
    assert_int_equal(fp_f32_to_f8e4m3(INFINITY), 0x7F);
    assert_true(isnan(fp_round(IR_F8E4M3, 1e9)));
    assert_int_equal(fp_f32_to_f8e5m2(57344.0f), 0x7B);
    assert_int_equal(fp_f32_to_f8e5m2(61439.0f), 0x7B);
    assert_int_equal(fp_f32_to_f8e5m2(61440.0f), 0x7C);         /* tie -> even = inf */
    assert_true(isinf(fp_round(IR_F16, 1e300)));
    assert_true(fp_round(IR_F32, 1e300) == INFINITY);
}

static void test_nan(void **state)
{
    (void)state;
    assert_true(isnan(fp_f16_to_f32(fp_f32_to_f16(NAN))));
    assert_int_equal(fp_f32_to_f16(fp_bits_f32(0x7F800001)) & 0x7C00, 0x7C00);
    assert_true(fp_f32_to_f16(fp_bits_f32(0x7F800001)) & 0x3FF);   /* stays a NaN */
    assert_true(isnan(fp_bf16_to_f32(fp_f32_to_bf16(fp_bits_f32(0xFF800001)))));
    assert_int_equal(fp_f32_to_f8e4m3(NAN) & 0x7F, 0x7F);
    assert_true(isnan(fp_f8e5m2_to_f32(fp_f32_to_f8e5m2(NAN))));
    assert_true(isnan(fp_round(IR_F16, NAN)));
    assert_true(isnan(fp_round(IR_BF16, NAN)));
    assert_true(isinf(fp_round(IR_F8E5M2, INFINITY)));
}

static void test_known_values(void **state)
{
    (void)state;
    assert_int_equal(fp_f32_to_f16(1.0f), 0x3C00);
    assert_int_equal(fp_f32_to_f16(-2.0f), 0xC000);
    assert_int_equal(fp_f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(fp_f32_to_f8e4m3(1.0f), 0x38);
    assert_int_equal(fp_f32_to_f8e5m2(1.0f), 0x3C);
    assert_true(fp_f8e4m3_to_f32(0x7E) == 448.0f);
    assert_true(fp_f8e5m2_to_f32(0x7B) == 57344.0f);
    assert_true(fp_f16_to_f32(0x3555) == 0x1.554p-2f);
}

/* ---- Philox --------------------------------------------------------------------- */

static void check_philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1,
                         const uint32_t want[4])
{
    uint32_t ctr[4] = {c0, c1, c2, c3}, key[2] = {k0, k1};
    philox4x32_10(ctr, key);
    for (int i = 0; i < 4; i++) assert_int_equal(ctr[i], want[i]);
}

static void test_philox_known_answers(void **state)
{
    (void)state;
    static const uint32_t zero[4] = {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8};
    static const uint32_t ones[4] = {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd};
    static const uint32_t pi[4] = {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1};
    check_philox(0, 0, 0, 0, 0, 0, zero);
    check_philox(~0u, ~0u, ~0u, ~0u, ~0u, ~0u, ones);
    check_philox(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, pi);
}

static void test_rand_contract(void **state)
{
    (void)state;
    uint64_t seed = 0x123456789abcdefull;
    for (int64_t off = -5; off < 2000; off++) {
        uint32_t ctr[4] = {(uint32_t)off, (uint32_t)((uint64_t)off >> 32), 0, 0};
        uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
        philox4x32_10(ctr, key);
        float r = tile_rand(seed, off);
        assert_true(r == (float)(ctr[0] >> 8) / 16777216.0f);
        assert_true(r >= 0.0f && r < 1.0f);
        float n = tile_randn(seed, off);
        assert_true(isfinite(n) && fabsf(n) < 7.0f);
    }
    assert_true(tile_rand(1, 7) == tile_rand(1, 7));
    assert_true(tile_rand(1, 7) != tile_rand(2, 7));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_roundtrip),   cmocka_unit_test(test_bf16_roundtrip),
        cmocka_unit_test(test_f8_roundtrip),    cmocka_unit_test(test_random_floats),
        cmocka_unit_test(test_halfway_cases),   cmocka_unit_test(test_subnormals),
        cmocka_unit_test(test_overflow),        cmocka_unit_test(test_nan),
        cmocka_unit_test(test_known_values),    cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_rand_contract),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
