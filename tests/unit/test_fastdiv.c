/* The f32 division by a shared divisor (cg_elementwise.c, bounds in cg_fastdiv.h):
 * y = RN(1/s), q0 = RN(x*y), r = fma(-q0, s, x), q = RN(r*y + q0) with q0's sign (so
 * that -0 / s is -0: r*y + q0 would give +0). The GPU's div.rn,
 * mul.rn and fma.rn are IEEE binary32 as C's `/`, `*` and fmaf, so a C model of the
 * sequence and of its guard is the code the GPU runs. Wherever the guard admits the fast
 * path, q must equal RN(x/s), computed here as (float)((double)x / s) (the double
 * rounding is innocuous: 53 >= 2*24 + 2). Inputs: random bit patterns (every exponent,
 * NaN, inf, subnormals), quotients next to rounding midpoints (the hard cases for
 * Markstein's correction), exponents at both extremes, subnormal dividends, every
 * significand of the divisor, and products of special values. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "codegen/cg_fastdiv.h"

static float of_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

/* A float with a random sign and significand and a biased exponent in [1, 254]. */
static float rnd_normal(void)
{
    return of_bits((rnd() & 0x807FFFFFu) | ((rnd() % 254 + 1) << 23));
}

static bool in_range(float v, double lo, double hi) { return fabsf(v) >= (float)lo && fabsf(v) <= (float)hi; }

/* The generated code: the quotient of the fast path and whether the guard takes it. */
static float fast_div(float x, float s, bool *taken)
{
    float y = 1.0f / s;
    volatile float q0 = x * y;          /* rounded on its own, never contracted */
    float r = fmaf(-q0, s, x);
    float q = copysignf(fmaf(r, y, q0), q0);
    *taken = in_range(s, CG_FDIV_SMIN, CG_FDIV_SMAX) && (x == 0.0f || in_range(x, CG_FDIV_XMIN, CG_FDIV_XMAX));
    return q;
}

typedef struct Tally {
    long n, taken, wrong;
} Tally;

static void check(Tally *t, float x, float s)
{
    bool taken;
    float q = fast_div(x, s, &taken);
    float ref = (float)((double)x / (double)s);
    t->n++;
    if (!taken) return;
    t->taken++;
    if (bits(q) != bits(ref) && !(isnan(q) && isnan(ref))) t->wrong++;
}

static void test_random_bit_patterns(void **state)
{
    (void)state;
    Tally t = {0};
    for (long i = 0; i < 4000000; i++) check(&t, of_bits(rnd() ^ rnd() << 16), of_bits(rnd() ^ rnd() << 16));
    assert_int_equal(t.wrong, 0);
    assert_true(t.taken > t.n / 10);     /* the guard rejects the extremes, not the bulk */
}

/* x = s * (q + ulp(q)/2), rounded: quotients within an ulp of a rounding midpoint. */
static void test_quotients_next_to_midpoints(void **state)
{
    (void)state;
    Tally t = {0};
    for (long i = 0; i < 4000000; i++) {
        float s = rnd_normal(), q = rnd_normal();
        double mid = (double)q + (double)(nextafterf(q, INFINITY) - q) / 2;
        check(&t, (float)(mid * s), s);
        check(&t, nextafterf((float)(mid * s), 0.0f), s);
    }
    assert_int_equal(t.wrong, 0);
    assert_true(t.taken > t.n / 20);
}

static void test_extreme_exponents_and_subnormal_dividends(void **state)
{
    (void)state;
    Tally t = {0};
    for (long i = 0; i < 4000000; i++) {
        float s = rnd_normal();
        check(&t, rnd_normal(), s);
        check(&t, of_bits(rnd() & 0x807FFFFFu), s);      /* subnormal or zero */
    }
    assert_int_equal(t.wrong, 0);
}

/* Every divisor significand, a few dividends each. */
static void test_every_divisor_significand(void **state)
{
    (void)state;
    Tally t = {0};
    const float xs[] = {1.0f, -3.0f, of_bits(0x3FFFFFFFu), 0.7f};
    for (uint32_t m = 0; m < (1u << 23); m++)
        check(&t, xs[m % 4], of_bits(0x3F800000u | m));
    assert_int_equal(t.wrong, 0);
    assert_int_equal(t.taken, t.n);     /* ordinary operands: always the fast path */
}

/* Ordinary magnitudes (both in [2^-27, 2^28)) always take the fast path. */
static void test_ordinary_operands_take_the_fast_path(void **state)
{
    (void)state;
    Tally t = {0};
    for (long i = 0; i < 1000000; i++) {
        float x = of_bits((rnd() & 0x807FFFFFu) | ((rnd() % 55 + 100) << 23));
        float s = of_bits((rnd() & 0x807FFFFFu) | ((rnd() % 55 + 100) << 23));
        check(&t, x, s);
    }
    assert_int_equal(t.taken, t.n);
    assert_int_equal(t.wrong, 0);
}

static void test_special_values(void **state)
{
    (void)state;
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX,
                        FLT_TRUE_MIN, of_bits(0x007FFFFFu), 1.0f, -1.0f, 2.0f, 0.5f, 0x1p-126f, 0x1p126f,
                        0x1p127f, 0x1p-100f, 0x1p100f, of_bits(0x3FFFFFFFu), of_bits(0x3F7FFFFFu),
                        of_bits(0x7F7FFFFEu), 3.0f, 1.0f / 3.0f, 4096.0f};
    size_t n = sizeof sp / sizeof sp[0];
    Tally t = {0};
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) check(&t, sp[i], sp[j]);
    assert_int_equal(t.wrong, 0);
}

/* Without the guard the sequence is wrong, so the guard is what makes it exact: a
 * dividend below 2^-100 loses bits of the remainder, an infinite dividend gives NaN. */
static void test_the_guard_is_needed(void **state)
{
    (void)state;
    const float cases[][2] = {{-0x1.7f00bp-128f, 0x1.93c334p-98f}, {INFINITY, 2.0f}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool taken;
        float x = cases[i][0], s = cases[i][1];
        float q = fast_div(x, s, &taken), ref = (float)((double)x / (double)s);
        assert_false(taken);
        assert_true(bits(q) != bits(ref));
    }
}

/* Signed zeros: the sign comes from q0, so that -0 / s = -0 and 0 / -s = -0. */
static void test_signed_zeros(void **state)
{
    (void)state;
    const float s[] = {3.0f, -3.0f, 0x1p-28f, -0x1p28f};
    for (size_t i = 0; i < 4; i++) {
        bool taken;
        for (int neg = 0; neg < 2; neg++) {
            float x = neg ? -0.0f : 0.0f;
            assert_int_equal(bits(fast_div(x, s[i], &taken)), bits(x / s[i]));
            assert_true(taken);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_bit_patterns),
        cmocka_unit_test(test_quotients_next_to_midpoints),
        cmocka_unit_test(test_extreme_exponents_and_subnormal_dividends),
        cmocka_unit_test(test_every_divisor_significand),
        cmocka_unit_test(test_ordinary_operands_take_the_fast_path),
        cmocka_unit_test(test_special_values),
        cmocka_unit_test(test_the_guard_is_needed),
        cmocka_unit_test(test_signed_zeros),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
