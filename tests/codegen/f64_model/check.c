/* The f64 math of the GPU code against glibc: f64_model.sh compiles the LLVM IR that
 * codegen emits for kernels.tile for the host and links it with this file, which calls
 * every kernel over random arguments in several ranges and over special values and
 * fails if one differs from glibc by more than its bound in ulp (docs/CODEGEN.md
 * section 4). The IR is the GPU's up to instruction selection, and f64 + - * / fma
 * sqrt round the same on both, so this checks the GPU's numerics without a GPU. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The kernels' predicated store of one f64 (two 32-bit words). */
void st(int32_t m, int64_t addr, int32_t lo, int32_t hi);
void st(int32_t m, int64_t addr, int32_t lo, int32_t hi)
{
    uint32_t w[2] = {(uint32_t)lo, (uint32_t)hi};
    if (m) memcpy((void *)(intptr_t)addr, w, sizeof w);
}

typedef void (*K1)(double *, double);
typedef void (*K2)(double *, double, double);
#define DECL1(n) void k_##n(double *, double);
#define DECL2(n) void k_##n(double *, double, double);
DECL1(exp) DECL1(exp2) DECL1(log) DECL1(log2) DECL1(sqrt) DECL1(rsqrt) DECL1(sin) DECL1(cos)
DECL1(tanh) DECL1(erf) DECL1(sigmoid) DECL1(floor) DECL1(ceil)
DECL2(pow) DECL2(rem) DECL2(fma) DECL2(div)

static double r_rsqrt(double x) { return 1.0 / sqrt(x); }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_fma(double x, double y) { return fma(x, y, -1.0); }
static double r_div(double x, double y) { return x / y; }

static double ulps(double got, double want)
{
    if (isnan(got) || isnan(want)) return isnan(got) && isnan(want) ? 0 : INFINITY;
    if (got == want) return signbit(got) == signbit(want) ? 0 : INFINITY;
    if (isinf(got) || isinf(want)) return INFINITY;
    double u = fabs(nextafter(want, INFINITY) - want);
    return fabs(got - want) / (u > 0 ? u : 0x1p-1074);
}

static uint64_t rng = 0x9E3779B97F4A7C15u;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) * 0x1p-53;
}

/* lo..hi uniformly, or (log) magnitudes log-uniform in [lo, hi] with either sign. */
static double pick(double lo, double hi, int log_scale)
{
    if (!log_scale) return lo + (hi - lo) * uniform();
    double x = exp(log(lo) + (log(hi) - log(lo)) * uniform());
    return uniform() < 0.5 ? -x : x;
}

static int failures;

static void report(const char *name, double bound, double worst, double x, double y)
{
    printf("%-8s worst %5.2f ulp (bound %.0f) at %.17g %.17g\n", name, worst, bound, x, y);
    if (!(worst <= bound)) failures++;
}

/* big: also the special values beyond 2^50 (sin and cos reduce those by Payne-Hanek). */
static void check1(const char *name, K1 k, double (*ref)(double), double bound, double lo, double hi, int log_scale,
                   int big)
{
    double worst = 0, wx = 0;
    for (int i = 0; i < 100000; i++) {
        double x = pick(lo, hi, log_scale), got;
        k(&got, x);
        double e = ulps(got, ref(x));
        if (e > worst || e != e) worst = e, wx = x;
    }
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0x1p-1074, -0x1p-1074, 0x1p-1022, 1.0,
                                     -1.0, 0.5, 6.0, -6.0, 710.0, -746.0, 1e300, -1e300, 0x1p50, -0x1.fffffffffffffp49,
                                     0x1.fffffffffffffp1023, 1e22, 0x1p1023};
    for (size_t i = 0; i < sizeof special / sizeof *special; i++) {
        double got, x = special[i];
        if (!big && fabs(x) > 0x1p50 && !isinf(x)) continue;
        k(&got, x);
        double e = ulps(got, ref(x));
        if (e > worst || e != e) worst = e, wx = x;
    }
    report(name, bound, worst, wx, 0);
}

static void check2(const char *name, K2 k, double (*ref)(double, double), double bound, double xlo, double xhi,
                   double ylo, double yhi)
{
    double worst = 0, wx = 0, wy = 0;
    for (int i = 0; i < 100000; i++) {
        double x = pick(xlo, xhi, 1), y = pick(ylo, yhi, 1), got;
        if (k == k_pow) x = fabs(x), y = y * 700 / fmax(fabs(log(x)), 1e-3) / yhi;   /* up to the range's edge */
        k(&got, x, y);
        double e = ulps(got, ref(x, y));
        if (e > worst || e != e) worst = e, wx = x, wy = y;
    }
    report(name, bound, worst, wx, wy);
}

/* C99's special cases of pow, exactly. */
static void check_pow_special(void)
{
    static const double xy[][2] = {{2, 0.0}, {NAN, -0.0}, {1, NAN}, {-1, INFINITY}, {-1, -INFINITY}, {-8, 1.0 / 3},
                                   {-2, 3}, {-2, 2}, {-0.0, -3}, {0.0, -1}, {-0.0, 3}, {INFINITY, -1}, {-INFINITY, 3},
                                   {-INFINITY, 2}, {0.5, INFINITY}, {2, -INFINITY}, {2, INFINITY}, {0.5, -INFINITY},
                                   {-0.5, 1e300}, {2, 1024}, {2, -1075}, {0x1p-1074, 0.5}, {10, 308}};
    double worst = 0, wx = 0, wy = 0;
    for (size_t i = 0; i < sizeof xy / sizeof *xy; i++) {
        double got;
        k_pow(&got, xy[i][0], xy[i][1]);
        double e = ulps(got, pow(xy[i][0], xy[i][1]));
        if (e > worst || e != e) worst = e, wx = xy[i][0], wy = xy[i][1];
    }
    report("pow spec", 1, worst, wx, wy);
}

/* The double closest to a multiple of pi/2 (6381956970095103 * 2^797, found by Kahan and
 * McDonald): cos is -4.6871659242546276111e-19 (mpmath, 3000 bits), which needs the
 * reduction to 61 bits below the point beyond the 53 of the result. glibc's cos here
 * is 8 ulp off (-4.68716592425462e-19), so this value is checked against mpmath's. */
static void check_hardest_reduction(void)
{
    double x = 0x1.6ac5b262ca1ffp+849, c, s;
    k_cos(&c, x);
    k_sin(&s, x);
    report("cos hard", 1, ulps(c, -4.6871659242546276111e-19), x, 0);
    report("sin hard", 0, ulps(s, 1.0), x, 0);
}

int main(void)
{
    check1("exp", k_exp, exp, 2, -745, 710, 0, 1);
    check1("exp2", k_exp2, exp2, 2, -1075, 1024, 0, 1);
    check1("log", k_log, log, 3, 1e-310, 1e308, 1, 1);
    check1("log2", k_log2, log2, 2, 1e-310, 1e308, 1, 1);
    check1("sqrt", k_sqrt, sqrt, 0, 1e-310, 1e308, 1, 1);
    check1("rsqrt", k_rsqrt, r_rsqrt, 0, 1e-310, 1e308, 1, 1);
    check1("sin", k_sin, sin, 3, 1e-20, 1e15, 1, 1);
    check1("cos", k_cos, cos, 3, 1e-20, 1e15, 1, 1);
    check1("sin", k_sin, sin, 3, 1e15, 1.7e308, 1, 1);
    check1("cos", k_cos, cos, 3, 1e15, 1.7e308, 1, 1);
    check1("tanh", k_tanh, tanh, 4, 1e-300, 40, 1, 1);
    check1("erf", k_erf, erf, 5, 1e-300, 8, 1, 1);
    check1("erf", k_erf, erf, 5, -7, 7, 0, 1);
    check1("sigmoid", k_sigmoid, r_sigmoid, 3, 1e-300, 800, 1, 1);
    check1("floor", k_floor, floor, 0, 1e-300, 1e300, 1, 1);
    check1("ceil", k_ceil, ceil, 0, 1e-300, 1e300, 1, 1);
    check2("pow", k_pow, pow, 2, 1e-5, 1e5, 1e-3, 1);
    check_pow_special();
    check_hardest_reduction();
    check2("rem", k_rem, fmod, 0, 1e-300, 1e300, 1e-300, 1e300);
    check2("fma", k_fma, r_fma, 0, 1e-150, 1e150, 1e-150, 1e150);
    check2("div", k_div, r_div, 0, 1e-300, 1e300, 1e-300, 1e300);
    printf("%s\n", failures ? "FAILED" : "all within their bounds");
    return failures != 0;
}
