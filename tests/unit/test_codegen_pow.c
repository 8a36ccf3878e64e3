/* f32 pow on the GPU (codegen/cg_math.c, pow_f32 and log2_ext_f32): a C model of
 * exactly the emitted sequence, checked against libm's double pow.
 *
 * C's float `+ - * /`, fmaf and the int/bit steps are the GPU's add.rn, mul.rn, div.rn,
 * fma.rn; the one difference is ex2.approx.f32, modelled here by exp2f: the bound
 * below is the model's, the GPU adds ex2's own 2 ulp (docs/CODEGEN.md section 4).
 * Inputs: random bit patterns of x with integer, small fractional and random y, x near
 * 1 (where log2 x is small and its relative accuracy matters), results up to the
 * overflow and underflow edges; and every pair of special values, where the model
 * must give C99's powf result exactly. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ir/interp.h"

#define POW_MAX_ULP 4.5       /* the model's worst error: 3.71 measured here */

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* a + b as hi + lo, |a| >= |b|. */
static void fast_two_sum(float a, float b, float *hi, float *lo)
{
    *hi = a + b;
    *lo = b - (*hi - a);
}

static float poly(float z)
{
    static const double k[6] = {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13};
    float r = (float)k[5];
    for (int i = 4; i >= 0; i--) r = fmaf(r, z, (float)k[i]);
    return r;
}

static void log2_ext(float ax, float *hi, float *lo)
{
    int sub = ax < 0x1p-126f;
    uint32_t b = fp_f32_bits(sub ? ax * 0x1p24f : ax);
    int32_t e = (int32_t)((b - 0x3f3504f3u) & 0xff800000u) >> 23;
    float m = fp_bits_f32(b - ((uint32_t)e << 23));
    float ef = (float)(e - (sub ? 24 : 0));
    float f = m - 1.0f;
    float u = 2.0f + f, ulo = f - (u - 2.0f);
    float s = f / u;
    float r = fmaf(-s, u, f) - s * ulo;
    float slo = r / u, z = s * s;
    float tail = s * z * poly(z), lh, ll;
    fast_two_sum(s * 2.0f, slo * 2.0f + tail, &lh, &ll);
    const float c_hi = (float)1.4426950408889634074;
    const float c_lo = (float)(1.4426950408889634074 - (double)(float)1.4426950408889634074);
    float ph = lh * c_hi;
    float pl = fmaf(lh, c_hi, -ph) + fmaf(lh, c_lo, ll * c_hi);
    float sh = ef + ph;
    float sl = fabsf(ef) >= fabsf(ph) ? ph - (sh - ef) : ef - (sh - ph);
    fast_two_sum(sh, sl + pl, hi, lo);
}

static float clampf(float x, float lo, float hi) { return x < lo ? lo : x > hi ? hi : x; }

/* C99's special cases around r (pow_special). */
static float special(float x, float y, float r)
{
    float ax = fabsf(x), half = y * 0.5f;
    int yint = floorf(y) == y, yodd = yint && floorf(half) != half;
    int xneg = x < 0, negz = x == 0 && signbit(x);
    if ((xneg || negz) && yodd) r = -r;
    if (xneg && !yint && ax != INFINITY && fabsf(y) != INFINITY) r = NAN;
    if (y == 0 || x == 1 || (x == -1 && fabsf(y) == INFINITY)) r = 1.0f;
    return r;
}

static float pow_model(float x, float y)
{
    float ax = fabsf(x), hi, lo, t, tlo;
    log2_ext(ax, &hi, &lo);
    float th = y * hi;
    float tl = fmaf(y, hi, -th) + y * lo;
    tl = fabsf(th) < 0x1p100f ? tl : 0.0f;           /* t infinite: no inf - inf */
    fast_two_sum(th, tl, &t, &tlo);
    tlo = fabsf(t) < 0x1p100f ? tlo : 0.0f;
    float tc = clampf(t, -200.0f, 200.0f), n = rintf(tc);
    float r = exp2f(tc - n) * fmaf(tlo, (float)0.69314718055994530942, 1.0f);
    int ni = isnan(n) ? 0 : (int)n;                        /* cvt.rni.s32 of NaN is 0 */
    int n1 = ni >> 1, n2 = ni - n1;                        /* 2^n in two exact steps */
    r = r * fp_bits_f32((uint32_t)(n1 + 127) << 23) * fp_bits_f32((uint32_t)(n2 + 127) << 23);
    if (ax == 0) r = y < 0 ? INFINITY : 0.0f;
    if (ax == INFINITY) r = y < 0 ? 0.0f : INFINITY;
    if (isnan(x) || isnan(y)) r = NAN;
    return special(x, y, r);
}

/* Error of r in units of the last place of the exact value (subnormal ulp below). */
static double ulp_error(float r, double exact)
{
    int ex = exact == 0 ? -149 : ilogb(exact) - 23;
    return fabs((double)r - exact) / ldexp(1.0, ex < -149 ? -149 : ex);
}

static float random_y(int mode)
{
    switch (mode) {
    case 0: return (float)((int)(next() % 4001) - 2000) / 7.0f;
    case 1: return (float)((int)(next() % 257) - 128);
    default: return fp_bits_f32(next() & 0xc3ffffffu);        /* |y| below 2^9 */
    }
}

static void test_accuracy(void **state)
{
    (void)state;
    double worst = 0;
    long checked = 0;
    for (long i = 0; i < 3000000; i++) {
        float x = fp_bits_f32(next() & 0x7fffffffu);
        if (i % 4 == 3) x = 1.0f + (float)((int)(next() % 2000001) - 1000000) * 0x1p-30f;
        float y = random_y((int)(i % 3));
        if (!isfinite(x) || x == 0 || !isfinite(y)) continue;
        double exact = pow((double)x, (double)y);
        if (exact > 0x1.fffffep127) continue;          /* overflows: checked below */
        double err = ulp_error(pow_model(x, y), exact);
        if (err > worst) worst = err;
        checked++;
    }
    assert_true(checked > 2000000);
    assert_true(worst <= POW_MAX_ULP);
    assert_true(worst > 1.0);                          /* the bound is not vacuous */
}

/* Negative x with integer y, and the overflow / underflow edges. */
static void test_signs_and_edges(void **state)
{
    (void)state;
    for (int i = 0; i < 200000; i++) {
        float x = -fp_bits_f32(0x3f000000u + (next() & 0x00ffffffu));      /* -[0.5, 2) */
        float y = (float)((int)(next() % 401) - 200);
        double exact = pow((double)x, (double)y);
        float r = pow_model(x, y);
        assert_true(!signbit(r) == !signbit(exact));
        if (fabs(exact) <= 0x1.fffffep127) assert_true(ulp_error(fabsf(r), fabs(exact)) <= POW_MAX_ULP);
        else assert_true(isinf(r));
    }
    assert_true(isinf(pow_model(2.0f, 128.0f)) && pow_model(2.0f, 127.0f) == 0x1p127f);
    assert_true(pow_model(2.0f, -149.0f) == 0x1p-149f && pow_model(2.0f, -151.0f) == 0.0f);
}

static void test_special_values(void **state)
{
    (void)state;
    const float v[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, -0.5f, 2.0f, -2.0f, 3.0f, -3.0f, 2.5f, -2.5f,
                       INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-149f, 0x1.fffffep127f, 1e30f, 1e-30f};
    size_t n = sizeof v / sizeof *v;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            float x = v[i], y = v[j], want = powf(x, y), got = pow_model(x, y);
            if (isnan(want)) {
                assert_true(isnan(got));
            } else if (isinf(want) || want == 0 || fabsf(want) == 1) {
                assert_true(fp_f32_bits(got) == fp_f32_bits(want));          /* sign of zero too */
            } else {
                assert_true(!signbit(got) == !signbit(want));
                assert_true(ulp_error(fabsf(got), fabs(pow((double)x, (double)y))) <= POW_MAX_ULP);
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_signs_and_edges),
        cmocka_unit_test(test_special_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
