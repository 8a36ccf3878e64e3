/* Float math without libdevice: exp exp2 log log2 sqrt rsqrt sin cos tanh erf floor
 * ceil sigmoid pow and float remainder, written as LLVM IR.
 *
 * LANGUAGE.md allows math functions a few units in the last place. The ones that
 * memory-bound kernels use (exp: softmax; erf: GELU; sigmoid: SiLU; exp2) have short
 * f32 versions, since a bf16 element must cost about 20 instructions to keep up with
 * HBM: exp is the hardware's ex2.approx with the rounding error of x*log2(e) folded
 * back in, erf a minimax polynomial or 1 - exp(polynomial), sigmoid an approximate
 * reciprocal of 1 + exp(-x), tanh a polynomial or (1 - e)/(1 + e) with e = exp(-2|x|).
 * The others compute in f64 and round once to f32, which
 * makes simple formulas accurate: log by the atanh series of the reduced mantissa,
 * sin/cos by reduction modulo pi/2 (three-part pi/2 below 2^50, Payne-Hanek above) and
 * Taylor polynomials. pow in f32 is 2^(y log2|x|) with log2 in two f32 parts
 * (uniform scalars in AdamW's bias corrections made f64 pow a hundred f64 instructions
 * per thread), in f64 e^(y log|x|) with log|x| and the product in two parts; both with
 * C99's special cases. f16/bf16 compute in f32. f64 computes in f64 throughout, each
 * function within 4 ulp of libm (a model of the emitted IR against glibc over 200,000
 * arguments per range): exp by Cody-Waite and a degree-13 Taylor polynomial, exp2 with f ln2 in two parts, log/log2 by the same
 * reduction as f32 pow's log2, tanh from expm1, erf by three expansions (Taylor, a
 * series of positive terms, Laplace's continued fraction for erfc), fmod exactly for
 * any operands by reducing 50 quotient bits a turn. sqrt is sqrt.rn and rsqrt is
 * 1/sqrt, both correctly rounded as in the interpreter. */
#include <math.h>

#include "codegen/cg_internal.h"

/* C11 has no M_PI and friends. */
#define K_LOG2E 1.4426950408889634074
#define K_LN2 0.69314718055994530942
#define K_SQRT2 1.41421356237309504880
#define K_2_PI 0.63661977236758134308
#define K_2_SQRTPI 1.12837916709551257390

typedef LLVMValueRef V;

static LLVMTypeRef f64t(Cg *c) { return LLVMDoubleTypeInContext(c->ctx); }
static LLVMTypeRef f32t(Cg *c) { return LLVMFloatTypeInContext(c->ctx); }
static V fconst(LLVMTypeRef t, double v) { return LLVMConstReal(t, v); }
static V fadd(Cg *c, V a, V b) { return LLVMBuildFAdd(c->b, a, b, ""); }
static V fsub(Cg *c, V a, V b) { return LLVMBuildFSub(c->b, a, b, ""); }
static V fmul(Cg *c, V a, V b) { return LLVMBuildFMul(c->b, a, b, ""); }
static V fdiv(Cg *c, V a, V b) { return LLVMBuildFDiv(c->b, a, b, ""); }
static V sel(Cg *c, V cond, V a, V b) { return LLVMBuildSelect(c->b, cond, a, b, ""); }
static V fcmp(Cg *c, LLVMRealPredicate p, V a, V b) { return LLVMBuildFCmp(c->b, p, a, b, ""); }

static V intr1(Cg *c, const char *name, V x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return cg_intrinsic(c, name, &t, 1, &x, 1);
}

static V fmaf_(Cg *c, V a, V b, V d)
{
    LLVMTypeRef t = LLVMTypeOf(a);
    V args[3] = {a, b, d};
    return cg_intrinsic(c, "llvm.fma", &t, 1, args, 3);
}

static V copysign_(Cg *c, V mag, V sign)
{
    LLVMTypeRef t = LLVMTypeOf(mag);
    V args[2] = {mag, sign};
    return cg_intrinsic(c, "llvm.copysign", &t, 1, args, 2);
}

/* Horner: k[0] + x*(k[1] + x*(... k[n-1])). */
static V poly(Cg *c, V x, const double *k, int n)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    V r = fconst(t, k[n - 1]);
    for (int i = n - 2; i >= 0; i--) r = fmaf_(c, r, x, fconst(t, k[i]));
    return r;
}

static V is_nan(Cg *c, V x) { return fcmp(c, LLVMRealUNO, x, x); }

/* x * 2^n for an integer n (i32) in [-2*(emax+1), 2*(emax+1)], in two steps. */
static V scale2(Cg *c, V x, V n, bool dbl)
{
    LLVMTypeRef it = dbl ? LLVMInt64TypeInContext(c->ctx) : cg_i32(c), ft = LLVMTypeOf(x);
    V n1 = LLVMBuildAShr(c->b, n, cg_i32c(c, 1), ""), n2 = LLVMBuildSub(c->b, n, n1, "");
    V pw[2];
    V parts[2] = {n1, n2};
    for (int i = 0; i < 2; i++) {
        V e = LLVMBuildAdd(c->b, parts[i], cg_i32c(c, dbl ? 1023 : 127), "");
        if (dbl) e = LLVMBuildSExt(c->b, e, it, "");
        pw[i] = LLVMBuildBitCast(c->b, LLVMBuildShl(c->b, e, cg_int(c, it, dbl ? 52 : 23), ""), ft, "");
    }
    return fmul(c, fmul(c, x, pw[0]), pw[1]);
}

static V clamp(Cg *c, V x, double lo, double hi)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    x = sel(c, fcmp(c, LLVMRealOLT, x, fconst(t, lo)), fconst(t, lo), x);   /* NaN stays */
    return sel(c, fcmp(c, LLVMRealOGT, x, fconst(t, hi)), fconst(t, hi), x);
}

/* ---- exp ------------------------------------------------------------------------------ */

/* 2^x by the hardware's ex2.approx.f32 (MUFU.EX2: 2 ulp, subnormal results kept). */
static V ex2_approx(Cg *c, V x) { return cg_intrinsic(c, "llvm.nvvm.ex2.approx.f", NULL, 0, &x, 1); }

/* e^x in f32 as 2^hi * 2^lo: hi = x*log2(e) rounded, lo its rounding error (from an
 * fma and the low part of log2(e)), 2^lo = 1 + lo*ln2 (|lo| < 2^-17). Without lo the
 * rounding of x*log2(e) costs up to 45 ulp near |x| = 88; with it the result is
 * within 2 ulp of e^x beyond ex2's own 2 ulp (checked against exp() over every 13th
 * f32). The clamp (NaN-preserving) keeps lo finite: e^89 is inf, e^-104 is 0. */
static V exp_f32(Cg *c, V x)
{
    LLVMTypeRef t = f32t(c);
    const float l2e = (float)K_LOG2E, l2e_lo = (float)(K_LOG2E - (double)(float)K_LOG2E);
    V xc = cg_fmaximum(c, cg_fmaximum(c, x, fconst(t, 89.0), false), fconst(t, -104.0), true);
    V hi = fmul(c, xc, fconst(t, l2e));
    V lo = fmaf_(c, xc, fconst(t, l2e), LLVMBuildFNeg(c->b, hi, ""));
    lo = fmaf_(c, xc, fconst(t, l2e_lo), lo);
    return fmul(c, ex2_approx(c, hi), fmaf_(c, lo, fconst(t, K_LN2), fconst(t, 1.0)));
}

static const double exp_taylor[14] = {1, 1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                      1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
                                      1.0 / 479001600, 1.0 / 6227020800.0};
#define K_LN2_HI 6.93147180369123816490e-01    /* ln 2 in 32 bits: n * K_LN2_HI is exact */
#define K_LN2_LO 1.90821492927058770002e-10

/* e^(y + lo) in f64 for any y (overflow to inf, underflow to 0); lo (NULL: 0) is a
 * small correction, |lo| <= ulp(y), that the reduced argument takes in:
 * y = n ln2 + r, |r| <= ln2/2, e^r by its Taylor polynomial of degree 13 (within 1 ulp). */
static V exp_f64_ext(Cg *c, V y, V lo)
{
    LLVMTypeRef t = f64t(c);
    V yc = clamp(c, y, -746.0, 710.0);
    V n = intr1(c, "llvm.rint", fmul(c, yc, fconst(t, K_LOG2E)));
    V r = fmaf_(c, LLVMBuildFNeg(c->b, n, ""), fconst(t, K_LN2_HI), yc);
    r = fmaf_(c, LLVMBuildFNeg(c->b, n, ""), fconst(t, K_LN2_LO), r);
    if (lo) r = fadd(c, r, lo);
    V p = scale2(c, poly(c, r, exp_taylor, 14), LLVMBuildFPToSI(c->b, n, cg_i32(c), ""), true);
    return sel(c, is_nan(c, y), y, p);
}

static V exp_f64(Cg *c, V y) { return exp_f64_ext(c, y, NULL); }

/* 2^x in f64: x = n + f (exact, |f| <= 1/2), 2^f = e^(f ln2) with f ln2 in two parts
 * (one rounding of x * ln2 alone costs |x| ulp: 700 ulp at x = 1000). */
static V exp2_f64(Cg *c, V x)
{
    LLVMTypeRef t = f64t(c);
    V xc = clamp(c, x, -1100.0, 1100.0);
    V n = intr1(c, "llvm.rint", xc), f = fsub(c, xc, n);
    const double ln2 = 0.6931471805599453, ln2_lo = 2.3190468138462996e-17;
    V hi = fmul(c, f, fconst(t, ln2));
    V lo = fmaf_(c, f, fconst(t, ln2_lo), fmaf_(c, f, fconst(t, ln2), LLVMBuildFNeg(c->b, hi, "")));
    V p = poly(c, hi, exp_taylor, 14);
    p = fmaf_(c, p, lo, p);                                   /* e^(hi + lo) = e^hi (1 + lo) */
    p = scale2(c, p, LLVMBuildFPToSI(c->b, n, cg_i32(c), ""), true);
    return sel(c, is_nan(c, x), x, p);
}

/* e^y - 1 in f64 for y <= 0 (tanh's argument): y = n ln2 + r, e^r - 1 = r q(r) by
 * Taylor, e^y - 1 = 2^n (r q(r)) + (2^n - 1) in one fma (2^n - 1 is exact for n >= -53;
 * below, e^y - 1 is -1 anyway). No cancellation: within 2 ulp, also near 0. */
static V expm1_neg_f64(Cg *c, V y)
{
    static const double k[14] = {1, 1.0 / 2, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040,
                                 1.0 / 40320, 1.0 / 362880, 1.0 / 3628800, 1.0 / 39916800,
                                 1.0 / 479001600, 1.0 / 6227020800.0, 1.0 / 87178291200.0};
    LLVMTypeRef t = f64t(c);
    V yc = clamp(c, y, -60.0, 0.0);
    V n = intr1(c, "llvm.rint", fmul(c, yc, fconst(t, K_LOG2E)));
    V r = fmaf_(c, LLVMBuildFNeg(c->b, n, ""), fconst(t, K_LN2_HI), yc);
    r = fmaf_(c, LLVMBuildFNeg(c->b, n, ""), fconst(t, K_LN2_LO), r);
    V pm = fmul(c, r, poly(c, r, k, 14));
    V two_n = scale2(c, fconst(t, 1.0), LLVMBuildFPToSI(c->b, n, cg_i32(c), ""), true);
    return fmaf_(c, two_n, pm, fsub(c, two_n, fconst(t, 1.0)));
}

/* ---- log ------------------------------------------------------------------------------- */

/* a + b = *hi + *lo exactly (TwoSum: either may be larger). */
static void two_sum(Cg *c, V a, V b, V *hi, V *lo)
{
    *hi = fadd(c, a, b);
    V bb = fsub(c, *hi, a);
    *lo = fadd(c, fsub(c, a, fsub(c, *hi, bb)), fsub(c, b, bb));
}

/* a + b as hi + lo exactly when |a| >= |b| (Fast2Sum). */
static void fast_two_sum(Cg *c, V a, V b, V *hi, V *lo)
{
    *hi = fadd(c, a, b);
    *lo = fsub(c, b, fsub(c, *hi, a));
}

/* log of a positive finite f64 as e + l, e an integer (exactly an f64) and
 * l = log(1 + f) = *lh + *ll (|error| < 2^-60 |l|): x = m 2^e with m in
 * [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f) in two parts,
 * log(1 + f) = 2s + 2s^3 (1/3 + s^2/5 + ...), the leading 2s carried in two parts. The
 * f64 version of log2_ext_f32 below; pow needs the low part. */
static void log_parts_f64(Cg *c, V x, bool two_part_s, V *ef, V *lh, V *ll)
{
    static const double k[11] = {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13,
                                 2.0 / 15, 2.0 / 17, 2.0 / 19, 2.0 / 21, 2.0 / 23};
    LLVMTypeRef t = f64t(c), i64 = LLVMInt64TypeInContext(c->ctx);
    V sub = fcmp(c, LLVMRealOLT, x, fconst(t, 0x1p-1022));
    V xs = sel(c, sub, fmul(c, x, fconst(t, 0x1p54)), x);
    V bits = LLVMBuildBitCast(c->b, xs, i64, "");
    V e = LLVMBuildSub(c->b, LLVMBuildLShr(c->b, bits, cg_int(c, i64, 52), ""), cg_int(c, i64, 1023), "");
    e = LLVMBuildSub(c->b, e, sel(c, sub, cg_int(c, i64, 54), cg_int(c, i64, 0)), "");
    V mbits = LLVMBuildOr(c->b, LLVMBuildAnd(c->b, bits, cg_int(c, i64, 0x000FFFFFFFFFFFFFLL), ""),
                          cg_int(c, i64, 0x3FF0000000000000LL), "");
    V m = LLVMBuildBitCast(c->b, mbits, t, "");
    V big = fcmp(c, LLVMRealOGT, m, fconst(t, K_SQRT2));
    m = sel(c, big, fmul(c, m, fconst(t, 0.5)), m);
    *ef = LLVMBuildSIToFP(c->b, LLVMBuildAdd(c->b, e, LLVMBuildZExt(c->b, big, i64, ""), ""), t, "");
    V f = fsub(c, m, fconst(t, 1.0));
    V u = fadd(c, fconst(t, 2.0), f), ulo = fsub(c, f, fsub(c, u, fconst(t, 2.0)));
    V s = fdiv(c, f, u);
    V rem = fsub(c, fmaf_(c, LLVMBuildFNeg(c->b, s, ""), u, f), fmul(c, s, ulo));
    V slo = two_part_s ? fdiv(c, rem, u) : fconst(t, 0.0), z = fmul(c, s, s);
    V s3 = fmul(c, s, z);
    if (!two_part_s) {
        fast_two_sum(c, fmul(c, s, fconst(t, 2.0)), fmul(c, s3, poly(c, z, k, 11)), lh, ll);
        return;
    }
    /* The low part to ~2^-70: pow's error is |y log x| times log's. The leading
     * (2/3) s^3 with s^2, s^3 and 2/3 in two parts, every sum after it exact, and the
     * tail's change for s + slo: slo 2s^2 / (1 - s^2). */
    const double c1 = 2.0 / 3, c1_lo = 3.700743415417188e-17;
    V zlo = fmaf_(c, s, s, LLVMBuildFNeg(c->b, z, ""));
    V s3lo = fmaf_(c, s, zlo, fmaf_(c, s, z, LLVMBuildFNeg(c->b, s3, "")));
    V lead = fmul(c, s3, fconst(t, c1));
    V lead_lo = fmaf_(c, s3, fconst(t, c1), LLVMBuildFNeg(c->b, lead, ""));
    lead_lo = fmaf_(c, s3lo, fconst(t, c1), fmaf_(c, s3, fconst(t, c1_lo), lead_lo));
    V th, te, bh, be, l0;
    fast_two_sum(c, lead, fmaf_(c, fmul(c, s3, z), poly(c, z, k + 1, 10), lead_lo), &th, &te);
    two_sum(c, fmul(c, slo, fconst(t, 2.0)), th, &bh, &be);
    fast_two_sum(c, fmul(c, s, fconst(t, 2.0)), bh, lh, &l0);
    V dtail = fmul(c, fmul(c, slo, fmul(c, z, fconst(t, 2.0))), fmaf_(c, z, fmaf_(c, z, z, z), fconst(t, 1.0)));
    *ll = fadd(c, l0, fadd(c, be, fadd(c, te, dtail)));
}

static V positive_finite(Cg *c, V x)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    return LLVMBuildAnd(c->b, fcmp(c, LLVMRealOGT, x, fconst(t, 0.0)), fcmp(c, LLVMRealOLT, x, fconst(t, INFINITY)), "");
}

/* r for a positive finite x; log(0) = -inf, log(inf) = inf, NaN for x < 0 or NaN. */
static V log_special(Cg *c, V x, V r)
{
    LLVMTypeRef t = LLVMTypeOf(x);
    V s = sel(c, fcmp(c, LLVMRealOEQ, x, fconst(t, 0.0)), fconst(t, -INFINITY), fconst(t, NAN));
    s = sel(c, fcmp(c, LLVMRealOEQ, x, fconst(t, INFINITY)), x, s);
    return sel(c, positive_finite(c, x), r, sel(c, is_nan(c, x), x, s));
}

/* log(x) in f64 as the result + *lo (lo NULL: one part; with it |error| ~ 2^-60 |log
 * x|): e ln2 in two parts (e K_LN2_HI is exact) plus log(1 + f). lo is 0 at the
 * special values. */
static V log_ext_f64(Cg *c, V x, V *lo_out)
{
    LLVMTypeRef t = f64t(c);
    V ef, lh, ll, sh, sl, hi, lo;
    log_parts_f64(c, x, lo_out != NULL, &ef, &lh, &ll);
    if (!lo_out) {
        V l1p = fadd(c, lh, ll);
        return log_special(c, x, fmaf_(c, ef, fconst(t, K_LN2_HI), fmaf_(c, ef, fconst(t, K_LN2_LO), l1p)));
    }
    two_sum(c, fmul(c, ef, fconst(t, K_LN2_HI)), lh, &sh, &sl);
    fast_two_sum(c, sh, fadd(c, sl, fmaf_(c, ef, fconst(t, K_LN2_LO), ll)), &hi, &lo);
    *lo_out = sel(c, positive_finite(c, x), lo, fconst(t, 0.0));
    return log_special(c, x, hi);
}

static V log_f64(Cg *c, V x) { return log_ext_f64(c, x, NULL); }

/* log2(x) in f64: e + log(1 + f) log2(e), the product in two parts, so that powers of
 * two give their exponent exactly. */
static V log2_f64(Cg *c, V x)
{
    LLVMTypeRef t = f64t(c);
    const double l2e = 1.4426950408889634, l2e_lo = 2.0355273740931033e-17;
    V ef, lh, ll, sh, sl;
    log_parts_f64(c, x, true, &ef, &lh, &ll);
    V ph = fmul(c, lh, fconst(t, l2e));
    V pl = fmaf_(c, lh, fconst(t, l2e), LLVMBuildFNeg(c->b, ph, ""));
    pl = fmaf_(c, lh, fconst(t, l2e_lo), fmaf_(c, ll, fconst(t, l2e), pl));
    two_sum(c, ef, ph, &sh, &sl);
    return log_special(c, x, fadd(c, sh, fadd(c, sl, pl)));
}

/* ---- sin, cos ------------------------------------------------------------------------------ */

/* The bits of 2/pi after 64 zero bits, 64 to a word, most significant first: word i
 * holds bits 64i .. 64i + 63 of floor(2/pi * 2^(64 * 22 - 65)) (computed with mpmath;
 * the first word after the zeros is 0x517cc1b7... = 0xa2f9836e... >> 1). */
static const uint64_t two_over_pi_bits[22] = {
    0x0000000000000000ull, 0x517cc1b727220a94ull, 0xfe13abe8fa9a6ee0ull, 0x6db14acc9e21c820ull,
    0xff28b1d5ef5de2b0ull, 0xdb92371d2126e970ull, 0x0324977504e8c90eull, 0x7f0ef58e5894d39full,
    0x74411afa975da242ull, 0x74ce38135a2fbf20ull, 0x9cc8eb1cc1a99cfaull, 0x4e422fc5defc941dull,
    0x8ffc4bffef02cc07ull, 0xf79788c5ad05368full, 0xb69b3f6793e584dbull, 0xa7a31fb34f2ff516ull,
    0xba93dd63f5f2f8bdull, 0x9e839cfbc5294975ull, 0x35fdafd88fc6ae84ull, 0x2b0198237e3db5d5ull,
    0xf867de104d7a1b0eull, 0xd4f1c8b0af730d84ull,
};

static V i64c(Cg *c, uint64_t v) { return LLVMConstInt(LLVMInt64TypeInContext(c->ctx), v, 0); }

/* The table as a constant global of the module, made once. */
static V two_over_pi_table(Cg *c)
{
    LLVMTypeRef at = LLVMArrayType(LLVMInt64TypeInContext(c->ctx), 22);
    V g = LLVMGetNamedGlobal(c->mod, "__tile_two_over_pi");
    if (g) return g;
    V words[22];
    for (int i = 0; i < 22; i++) words[i] = i64c(c, two_over_pi_bits[i]);
    g = LLVMAddGlobalInAddressSpace(c->mod, at, "__tile_two_over_pi", 1);
    LLVMSetInitializer(g, LLVMConstArray(LLVMInt64TypeInContext(c->ctx), words, 22));
    LLVMSetGlobalConstant(g, 1);
    LLVMSetLinkage(g, LLVMInternalLinkage);
    return g;
}

static V table_word(Cg *c, V index)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx), at = LLVMArrayType(i64, 22);
    V idx[2] = {cg_i32c(c, 0), index};
    return LLVMBuildLoad2(c->b, i64, LLVMBuildInBoundsGEP2(c->b, at, two_over_pi_table(c), idx, 2, ""), "");
}

/* 64 bits of the table from bit s on: word j = s / 64 shifted left by s % 64, the next
 * word's top bits below (a shift by 64 is undefined in LLVM: sh = 0 takes word j). */
static V table_bits(Cg *c, V j, V sh, int k)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    V a = table_word(c, LLVMBuildAdd(c->b, j, cg_i32c(c, k), "")), b = table_word(c, LLVMBuildAdd(c->b, j, cg_i32c(c, k + 1), ""));
    V sh64 = LLVMBuildZExt(c->b, sh, i64, "");
    V lo = LLVMBuildLShr(c->b, b, LLVMBuildSub(c->b, i64c(c, 64), sh64, ""), "");
    lo = sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, sh, cg_i32c(c, 0), ""), i64c(c, 0), lo);
    return LLVMBuildOr(c->b, LLVMBuildShl(c->b, a, sh64, ""), lo, "");
}

static V mul_wide(Cg *c, V a, V b)
{
    LLVMTypeRef i128 = LLVMIntTypeInContext(c->ctx, 128);
    return LLVMBuildMul(c->b, LLVMBuildZExt(c->b, a, i128, ""), LLVMBuildZExt(c->b, b, i128, ""), "");
}

static V lo64(Cg *c, V x) { return LLVMBuildTrunc(c->b, x, LLVMInt64TypeInContext(c->ctx), ""); }
static V hi64(Cg *c, V x) { return lo64(c, LLVMBuildLShr(c->b, x, LLVMConstInt(LLVMTypeOf(x), 64, 0), "")); }

/* The 192-bit product of m and the window of 2/pi for an exponent field e, as the
 * quadrant (2 bits above the point, plus 1 when the fraction is >= 1/2), f (the 64 bits
 * below the point, read signed: the fraction minus that 1) and g (the next 64). */
static void huge_product(Cg *c, V m, V e, V *quad, V *f, V *g)
{
    V s = LLVMBuildSub(c->b, e, cg_i32c(c, 1075 + 1 - 64), "");          /* bit k - 1 of 2/pi */
    V j = LLVMBuildLShr(c->b, s, cg_i32c(c, 6), ""), sh = LLVMBuildAnd(c->b, s, cg_i32c(c, 63), "");
    V w0 = table_bits(c, j, sh, 0), w1 = table_bits(c, j, sh, 1), w2 = table_bits(c, j, sh, 2);
    V a2 = mul_wide(c, m, w2);
    V s1 = LLVMBuildAdd(c->b, mul_wide(c, m, w1), LLVMBuildLShr(c->b, a2, LLVMConstInt(LLVMTypeOf(a2), 64, 0), ""), "");
    V l1 = lo64(c, s1), l2 = LLVMBuildAdd(c->b, hi64(c, s1), lo64(c, mul_wide(c, m, w0)), "");
    *f = LLVMBuildOr(c->b, LLVMBuildShl(c->b, l2, i64c(c, 2), ""), LLVMBuildLShr(c->b, l1, i64c(c, 62), ""), "");
    *g = LLVMBuildOr(c->b, LLVMBuildShl(c->b, l1, i64c(c, 2), ""), LLVMBuildLShr(c->b, lo64(c, a2), i64c(c, 62), ""), "");
    *quad = LLVMBuildAdd(c->b, LLVMBuildLShr(c->b, l2, i64c(c, 62), ""), LLVMBuildLShr(c->b, *f, i64c(c, 63), ""), "");
}

/* (f + g 2^-64) 2^-64 pi/2, f signed: f's top 53 bits and the rest exactly in two
 * doubles, then the product with pi/2 in two parts. */
static V huge_fraction_times_pio2(Cg *c, V f, V g)
{
    LLVMTypeRef t = f64t(c);
    V fh = LLVMBuildAnd(c->b, f, i64c(c, ~0x7FFull), ""), fl = LLVMBuildAnd(c->b, f, i64c(c, 0x7FF), "");
    V hi = LLVMBuildSIToFP(c->b, fh, t, "");
    V lo = fmaf_(c, LLVMBuildUIToFP(c->b, g, t, ""), fconst(t, 0x1p-64), LLVMBuildUIToFP(c->b, fl, t, ""));
    V th, tl;
    fast_two_sum(c, hi, lo, &th, &tl);
    th = fmul(c, th, fconst(t, 0x1p-64));
    tl = fmul(c, tl, fconst(t, 0x1p-64));
    const double p1 = 1.5707963267948966, p2 = 6.123233995736766e-17;
    V rh = fmul(c, th, fconst(t, p1));
    V rl = fmaf_(c, th, fconst(t, p1), LLVMBuildFNeg(c->b, rh, ""));
    return fadd(c, rh, fadd(c, rl, fmaf_(c, th, fconst(t, p2), fmul(c, tl, fconst(t, p1)))));
}

/* Payne-Hanek: |x| = m 2^k (m the 53-bit integer significand) times 2/pi, modulo 4,
 * from the 192 bits of 2/pi that matter (bits k - 1 .. k + 190; the earlier ones give
 * multiples of 4): the 2 bits above the point are the quadrant, the 128 below it the
 * fraction, rounded to the nearest quadrant (a fraction >= 1/2 counts as the next
 * quadrant minus the rest). For any finite |x| >= 2^50 (k >= -2); *q is the quadrant
 * of x and the result r, |r| <= pi/4, with x = q pi/2 + r. */
static V reduce_huge(Cg *c, V x, V *q)
{
    LLVMTypeRef t = f64t(c), i64 = LLVMInt64TypeInContext(c->ctx), i32 = cg_i32(c);
    V bits = LLVMBuildBitCast(c->b, intr1(c, "llvm.fabs", x), i64, "");
    V m = LLVMBuildOr(c->b, LLVMBuildAnd(c->b, bits, i64c(c, 0x000FFFFFFFFFFFFFull), ""), i64c(c, 1ull << 52), "");
    V e = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, bits, i64c(c, 52), ""), i32, "");
    V quad, f, g;
    huge_product(c, m, e, &quad, &f, &g);
    V r = huge_fraction_times_pio2(c, f, g);
    V negx = fcmp(c, LLVMRealOLT, x, fconst(t, 0.0));
    V qi = LLVMBuildTrunc(c->b, quad, i32, "");
    *q = sel(c, negx, LLVMBuildNeg(c->b, qi, ""), qi);
    return sel(c, negx, LLVMBuildFNeg(c->b, r, ""), r);
}

/* *r, *q from reduce_huge for the elements with |x| >= 2^50, in a block of its own. */
static void reduce_if_huge(Cg *c, V x, V *r, V *q)
{
    LLVMTypeRef t = f64t(c);
    V huge = LLVMBuildAnd(c->b, fcmp(c, LLVMRealOGE, intr1(c, "llvm.fabs", x), fconst(t, 0x1p50)),
                          fcmp(c, LLVMRealOLT, intr1(c, "llvm.fabs", x), fconst(t, INFINITY)), "");
    LLVMBasicBlockRef from = LLVMGetInsertBlock(c->b), slow = cg_block_new(c, "sincos.huge");
    LLVMBasicBlockRef join = cg_block_new(c, "sincos.reduced");
    LLVMBuildCondBr(c->b, huge, slow, join);
    LLVMPositionBuilderAtEnd(c->b, slow);
    V qh, rh = reduce_huge(c, x, &qh);
    LLVMBasicBlockRef slow_end = LLVMGetInsertBlock(c->b);
    LLVMBuildBr(c->b, join);
    LLVMPositionBuilderAtEnd(c->b, join);
    V rp = LLVMBuildPhi(c->b, t, ""), qp = LLVMBuildPhi(c->b, cg_i32(c), "");
    V rin[2] = {*r, rh}, qin[2] = {*q, qh};
    LLVMBasicBlockRef bbs[2] = {from, slow_end};
    LLVMAddIncoming(rp, rin, bbs, 2);
    LLVMAddIncoming(qp, qin, bbs, 2);
    *r = rp, *q = qp;
}

/* sin (cos when want_cos) in f64: x = j * pi/2 + r, |r| <= pi/4, quadrant j mod 4; j
 * and r by a three-part pi/2 while |x| < 2^50, beyond by reduce_huge (in a block of
 * its own, entered only by the elements that need it). */
static V sincos_f64(Cg *c, V x, bool want_cos, bool may_be_huge)
{
    static const double ks[9] = {1, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                                 1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0};
    static const double kc[10] = {1, -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800,
                                  1.0 / 479001600, -1.0 / 87178291200.0, 1.0 / 20922789888000.0,
                                  -1.0 / 6402373705728000.0};
    LLVMTypeRef t = f64t(c);
    V j = intr1(c, "llvm.rint", fmul(c, x, fconst(t, K_2_PI)));
    V nj = LLVMBuildFNeg(c->b, j, "");
    V r = fmaf_(c, nj, fconst(t, 1.5707963267948966), x);
    r = fmaf_(c, nj, fconst(t, 6.123233995736766e-17), r);
    r = fmaf_(c, nj, fconst(t, -1.4973849048591698e-33), r);
    V q = LLVMBuildFPToSI(c->b, clamp(c, j, -1e18, 1e18), LLVMInt64TypeInContext(c->ctx), "");
    q = LLVMBuildTrunc(c->b, q, cg_i32(c), "");
    if (may_be_huge) reduce_if_huge(c, x, &r, &q);
    V z = fmul(c, r, r);
    V sn = fmul(c, r, poly(c, z, ks, 9)), cs = poly(c, z, kc, 10);
    if (want_cos) q = LLVMBuildAdd(c->b, q, cg_i32c(c, 1), "");   /* cos x = sin(x + pi/2) */
    V odd = LLVMBuildTrunc(c->b, q, LLVMInt1TypeInContext(c->ctx), "");
    V neg = LLVMBuildICmp(c->b, LLVMIntNE, LLVMBuildAnd(c->b, q, cg_i32c(c, 2), ""), cg_i32c(c, 0), "");
    V v = sel(c, odd, cs, sn);
    v = sel(c, neg, LLVMBuildFNeg(c->b, v, ""), v);
    return want_cos ? v : sel(c, fcmp(c, LLVMRealOEQ, x, fconst(t, 0.0)), x, v);   /* sin(-0) = -0 */
}

/* ---- tanh, erf ------------------------------------------------------------------------------- */

/* tanh in f64: with em = e^(-2|x|) - 1 (expm1_neg_f64, no cancellation near 0),
 * tanh|x| = -em / (2 + em); the sign of x. Within 3 ulp; tanh(-0) = -0, NaN stays. */
static V tanh_f64(Cg *c, V x)
{
    LLVMTypeRef t = f64t(c);
    V em = expm1_neg_f64(c, fmul(c, intr1(c, "llvm.fabs", x), fconst(t, -2.0)));
    V th = fdiv(c, LLVMBuildFNeg(c->b, em, ""), fadd(c, fconst(t, 2.0), em));
    return sel(c, is_nan(c, x), x, copysign_(c, th, x));
}

/* erf in f64, from three expansions that need no fitted coefficients (all three are
 * computed and one selected; within 3.5 ulp of the exact erf by a model of this code
 * checked with mpmath over [0, 6]):
 * - |x| < 1: Taylor, erf(x) = 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)), 18 terms;
 * - 1 <= |x| < 2.5: the series of positive terms 2x/sqrt(pi) e^(-x^2) sum
 *   (2x^2)^n / (2n+1)!!, 40 terms by Horner (no cancellation);
 * - 2.5 <= |x| < 6: 1 - erfc(x), erfc(x) = e^(-x^2) / sqrt(pi) / (x + (1/2) / (x + 1 / (x +
 *   (3/2) / (x + ...)))), Laplace's continued fraction, 25 terms by the forward
 *   recurrence (its numerators and denominators: no division until the end);
 * - |x| >= 6: +-1 (erfc(6) = 2e-17 is below half an ulp of 1).
 * The old single series stopped at |x| = 4 with +-1, which is 1.5e-8 off. */
/* 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) for |x| < 1 (x2 = x^2). */
static V erf_taylor(Cg *c, V ax, V x2)
{
    double k[18], fact = 1;
    for (int n = 0; n < 18; n++) {
        fact *= n ? n : 1;
        k[n] = K_2_SQRTPI / (fact * (2 * n + 1)) * (n % 2 ? -1 : 1);
    }
    return fmul(c, ax, poly(c, x2, k, 18));
}

/* 2x/sqrt(pi) e^(-x^2) sum (2x^2)^n / (2n+1)!! for 1 <= |x| < 2.5 (e = e^(-x^2)). */
static V erf_positive_series(Cg *c, V ax, V x2, V e)
{
    LLVMTypeRef t = f64t(c);
    double k[40], dfact = 1;
    for (int n = 0; n < 40; n++) k[n] = 1 / (dfact *= 2 * n + 1);
    V sum = poly(c, fmul(c, x2, fconst(t, 2.0)), k, 40);
    return fmul(c, fmul(c, fconst(t, K_2_SQRTPI), ax), fmul(c, e, sum));
}

/* erfc for 2.5 <= x < 6 (clamped there): e / sqrt(pi) times 1 / (x + (1/2) / (x + 1 /
 * (x + ...))), 25 terms by the forward recurrence of numerators and denominators. */
static V erfc_continued_fraction(Cg *c, V ax, V e)
{
    LLVMTypeRef t = f64t(c);
    V xc = clamp(c, ax, 2.5, 6.0);
    V a0 = fconst(t, 1.0), a1 = xc, b0 = fconst(t, 0.0), b1 = fconst(t, 1.0);
    for (int k = 1; k <= 25; k++) {
        V ak = fconst(t, k * 0.5);
        V a2 = fmaf_(c, xc, a1, fmul(c, ak, a0)), b2 = fmaf_(c, xc, b1, fmul(c, ak, b0));
        a0 = a1, a1 = a2, b0 = b1, b1 = b2;
    }
    return fmul(c, fmul(c, e, fconst(t, 0.5641895835477563)), fdiv(c, b1, a1));
}

static V erf_f64(Cg *c, V x)
{
    LLVMTypeRef t = f64t(c);
    V ax = intr1(c, "llvm.fabs", x), x2 = fmul(c, ax, ax);
    V e = exp_f64(c, LLVMBuildFNeg(c->b, x2, ""));
    V big = fsub(c, fconst(t, 1.0), erfc_continued_fraction(c, ax, e));
    V r = sel(c, fcmp(c, LLVMRealOLT, ax, fconst(t, 1.0)), erf_taylor(c, ax, x2),
              sel(c, fcmp(c, LLVMRealOLT, ax, fconst(t, 2.5)), erf_positive_series(c, ax, x2, e), big));
    r = sel(c, fcmp(c, LLVMRealOGE, ax, fconst(t, 6.0)), fconst(t, 1.0), r);
    return sel(c, is_nan(c, x), x, copysign_(c, r, x));
}

/* tanh in f32 (N. Juffa's fit): x + x^3 p(x^2) below 0.55, else (1 - e) / (1 + e)
 * with e = exp(-2|x|) and the sign of x; 2 ulp with an exact exp (checked over every
 * 11th f32), a few more with exp_f32. tanh(+-inf) = +-1, NaN stays. */
static V tanh_f32(Cg *c, V x)
{
    static const double k[4] = {-3.33327681e-1, 1.33152470e-1, -5.23025580e-2, 1.57394409e-2};
    LLVMTypeRef t = f32t(c);
    V ax = intr1(c, "llvm.fabs", x), s = fmul(c, x, x);
    V small = fmaf_(c, fmaf_(c, poly(c, s, k, 4), s, fconst(t, 0.0)), x, x);   /* + 0: tanh(-0) = -0 */
    V e = exp_f32(c, fmul(c, ax, fconst(t, -2.0)));
    V rr = fdiv(c, fconst(t, 1.0), fadd(c, e, fconst(t, 1.0)));
    V big = copysign_(c, fmaf_(c, e, LLVMBuildFNeg(c->b, rr, ""), rr), x);
    return sel(c, fcmp(c, LLVMRealOLT, ax, fconst(t, 0.55)), small, big);
}

/* erf in f32 (N. Juffa's minimax fit, the form CUDA's erff uses): for |x| <= 475/512
 * x + x * p(x^2), else 1 - e^q(|x|) with the sign of x; within 1 ulp with an exact
 * e^x, 1.5 ulp with exp_f32 (checked over every 7th f32). Both halves are computed
 * and one selected: no divergence, and the unused half's overflow is harmless. */
static V erf_f32(Cg *c, V x)
{
    static const double ks[6] = {1.28379166e-1, -3.76125336e-1, 1.12819925e-1, -2.67681349e-2,
                                 4.99119423e-3, -5.96761703e-4};
    static const double kl[5] = {-1.28717512e-1, -6.34846687e-1, -1.06777877e-1, 2.42546219e-2, -3.88396438e-3};
    LLVMTypeRef t = f32t(c);
    V ax = intr1(c, "llvm.fabs", x), s = fmul(c, x, x);
    V small = fmaf_(c, poly(c, s, ks, 6), x, x);
    V r = fmaf_(c, fconst(t, -1.72853470e-5), ax, fconst(t, 3.83197126e-4));
    r = fmaf_(c, r, s, fmaf_(c, fconst(t, kl[4]), ax, fconst(t, kl[3])));
    for (int i = 2; i >= 0; i--) r = fmaf_(c, r, ax, fconst(t, kl[i]));
    r = fmaf_(c, r, ax, LLVMBuildFNeg(c->b, ax, ""));
    V big = copysign_(c, fsub(c, fconst(t, 1.0), exp_f32(c, r)), x);
    return sel(c, fcmp(c, LLVMRealOGT, ax, fconst(t, 0.927734375)), big, small);
}

/* ---- pow, rem ------------------------------------------------------------------------------------ */

/* C99 pow's special cases around r = 2^(y log2|x|) (either width): pow(x, +-0) = 1,
 * pow(1, y) = 1, pow(-1, +-inf) = 1, x < 0 needs an integer y (odd y keeps the sign),
 * zeros and infinities follow from r. */
static V pow_special(Cg *c, V x, V y, V r)
{
    LLVMTypeRef t = LLVMTypeOf(x), it = LLVMIntTypeInContext(c->ctx, LLVMGetTypeKind(t) == LLVMDoubleTypeKind ? 64 : 32);
    V ax = intr1(c, "llvm.fabs", x);
    V yint = fcmp(c, LLVMRealOEQ, intr1(c, "llvm.floor", y), y);
    V half = fmul(c, y, fconst(t, 0.5));
    V yodd = LLVMBuildAnd(c->b, yint, fcmp(c, LLVMRealUNE, intr1(c, "llvm.floor", half), half), "");
    V xneg = fcmp(c, LLVMRealOLT, x, fconst(t, 0.0));
    V negz = LLVMBuildAnd(c->b, fcmp(c, LLVMRealOEQ, x, fconst(t, 0.0)),
                          LLVMBuildICmp(c->b, LLVMIntSLT, LLVMBuildBitCast(c->b, x, it, ""), cg_int(c, it, 0), ""), "");
    V signed_base = LLVMBuildOr(c->b, xneg, negz, "");
    r = sel(c, LLVMBuildAnd(c->b, signed_base, yodd, ""), LLVMBuildFNeg(c->b, r, ""), r);
    V bad = LLVMBuildAnd(c->b, xneg, LLVMBuildNot(c->b, yint, ""), "");
    bad = LLVMBuildAnd(c->b, bad, fcmp(c, LLVMRealONE, ax, fconst(t, INFINITY)), "");
    r = sel(c, LLVMBuildAnd(c->b, bad, fcmp(c, LLVMRealONE, intr1(c, "llvm.fabs", y), fconst(t, INFINITY)), ""),
            fconst(t, NAN), r);
    V one = LLVMBuildOr(c->b, fcmp(c, LLVMRealOEQ, y, fconst(t, 0.0)), fcmp(c, LLVMRealOEQ, x, fconst(t, 1.0)), "");
    V m1inf = LLVMBuildAnd(c->b, fcmp(c, LLVMRealOEQ, x, fconst(t, -1.0)),
                           fcmp(c, LLVMRealOEQ, intr1(c, "llvm.fabs", y), fconst(t, INFINITY)), "");
    return sel(c, LLVMBuildOr(c->b, one, m1inf, ""), fconst(t, 1.0), r);
}

static V finite_or_zero(Cg *c, V hi, V lo);

/* pow in f64: e^(y log|x|) with log|x| = hi + lo and the product y (hi + lo) in two
 * parts, so the result keeps f64 precision where y log|x| is large (one rounding of it
 * alone costs |y log x| ulp: 700 ulp near overflow). */
static V pow_f64(Cg *c, V x, V y)
{
    V ax = intr1(c, "llvm.fabs", x), lo;
    V hi = log_ext_f64(c, ax, &lo);
    V th = fmul(c, y, hi);
    V tl = fmaf_(c, y, lo, fmaf_(c, y, hi, LLVMBuildFNeg(c->b, th, "")));
    return pow_special(c, x, y, exp_f64_ext(c, th, finite_or_zero(c, th, tl)));
}

/* log2 of a finite positive f32 as hi + lo (|error| < 2^-28), in f32 only: x = m 2^e
 * with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), s = f / (2 + f) with its
 * remainder, ln(1 + f) = 2s + 2s^3 (1/3 + s^2/5 + ...) with the leading 2s carried in
 * two parts, then times log2(e) in two parts, plus e. tests/unit/test_codegen_pow.c
 * models exactly this sequence. */
static void log2_ext_f32(Cg *c, V ax, V *hi, V *lo)
{
    static const double k[6] = {2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13};
    LLVMTypeRef t = f32t(c), i32 = cg_i32(c);
    V sub = fcmp(c, LLVMRealOLT, ax, fconst(t, 0x1p-126));
    V b = LLVMBuildBitCast(c->b, sel(c, sub, fmul(c, ax, fconst(t, 0x1p24)), ax), i32, "");
    V e = LLVMBuildAShr(c->b, LLVMBuildAnd(c->b, LLVMBuildSub(c->b, b, cg_i32c(c, 0x3f3504f3), ""), cg_i32c(c, (int32_t)0xff800000u), ""),
                        cg_i32c(c, 23), "");
    V m = LLVMBuildBitCast(c->b, LLVMBuildSub(c->b, b, LLVMBuildShl(c->b, e, cg_i32c(c, 23), ""), ""), t, "");
    V ef = LLVMBuildSIToFP(c->b, LLVMBuildSub(c->b, e, sel(c, sub, cg_i32c(c, 24), cg_i32c(c, 0)), ""), t, "");
    V f = fsub(c, m, fconst(t, 1.0));
    V u = fadd(c, fconst(t, 2.0), f), ulo = fsub(c, f, fsub(c, u, fconst(t, 2.0)));
    V s = fdiv(c, f, u);
    V r = fsub(c, fmaf_(c, LLVMBuildFNeg(c->b, s, ""), u, f), fmul(c, s, ulo));
    V slo = fdiv(c, r, u), z = fmul(c, s, s);
    V tail = fmul(c, fmul(c, s, z), poly(c, z, k, 6));
    V lh, ll;
    fast_two_sum(c, fmul(c, s, fconst(t, 2.0)), fadd(c, fmul(c, slo, fconst(t, 2.0)), tail), &lh, &ll);
    const float c_hi = (float)K_LOG2E, c_lo = (float)(K_LOG2E - (double)(float)K_LOG2E);
    V ph = fmul(c, lh, fconst(t, c_hi));
    V pl = fadd(c, fmaf_(c, lh, fconst(t, c_hi), LLVMBuildFNeg(c->b, ph, "")),
                fmaf_(c, lh, fconst(t, c_lo), fmul(c, ll, fconst(t, c_hi))));
    V sh = fadd(c, ef, ph);
    V big = fcmp(c, LLVMRealOGE, intr1(c, "llvm.fabs", ef), intr1(c, "llvm.fabs", ph));
    V sl = sel(c, big, fsub(c, ph, fsub(c, sh, ef)), fsub(c, ef, fsub(c, sh, ph)));
    fast_two_sum(c, sh, fadd(c, sl, pl), hi, lo);
}

/* lo where |hi| < 2^100, else 0: an infinite t (y infinite, or y log2|x| overflowing)
 * would make the error terms inf - inf = NaN. */
static V finite_or_zero(Cg *c, V hi, V lo)
{
    LLVMTypeRef t = LLVMTypeOf(hi);
    return sel(c, fcmp(c, LLVMRealOLT, intr1(c, "llvm.fabs", hi), fconst(t, 0x1p100)), lo, fconst(t, 0.0));
}

/* pow in f32: 2^(y log2|x|) = 2^n 2^f (1 + t_lo ln2), n = rint(t), f = t - n (exact),
 * with log2 in two parts (log2_ext_f32), t_lo the rounding error of t, 2^f by
 * ex2.approx and 2^n by two exact scalings (so pow(FLT_MAX, 1) does not round t up to
 * 128 and overflow). Within POW_MAX_ULP of tests/unit/test_codegen_pow.c of the exact
 * pow before ex2's own 2 ulp. The clamp keeps n in range (2^200 is inf, 2^-200 is 0);
 * zero and infinite |x| are set apart. */
static V pow_f32(Cg *c, V x, V y)
{
    LLVMTypeRef t = f32t(c);
    V ax = intr1(c, "llvm.fabs", x), hi, lo;
    log2_ext_f32(c, ax, &hi, &lo);
    V th = fmul(c, y, hi);
    V tl = fadd(c, fmaf_(c, y, hi, LLVMBuildFNeg(c->b, th, "")), fmul(c, y, lo));
    tl = finite_or_zero(c, th, tl);
    V tt, tlo;
    fast_two_sum(c, th, tl, &tt, &tlo);
    tlo = finite_or_zero(c, tt, tlo);
    V tc = clamp(c, tt, -200.0, 200.0), n = intr1(c, "llvm.rint", tc);
    V r = fmul(c, ex2_approx(c, fsub(c, tc, n)), fmaf_(c, tlo, fconst(t, K_LN2), fconst(t, 1.0)));
    r = scale2(c, r, LLVMBuildFPToSI(c->b, n, cg_i32(c), ""), false);
    V neg_y = fcmp(c, LLVMRealOLT, y, fconst(t, 0.0)), inf = fconst(t, INFINITY), zero = fconst(t, 0.0);
    r = sel(c, fcmp(c, LLVMRealOEQ, ax, zero), sel(c, neg_y, inf, zero), r);
    r = sel(c, fcmp(c, LLVMRealOEQ, ax, inf), sel(c, neg_y, zero, inf), r);
    r = sel(c, LLVMBuildOr(c->b, is_nan(c, x), is_nan(c, y), ""), fconst(t, NAN), r);
    return pow_special(c, x, y, r);
}

static V to64(Cg *c, V x, IrElem e) { return e == IR_F64 ? x : LLVMBuildFPExt(c->b, cg_to_f32(c, x, e), f64t(c), ""); }

static V from64(Cg *c, V x, IrElem e)
{
    if (e == IR_F64) return x;
    return cg_from_f32(c, LLVMBuildFPTrunc(c->b, x, f32t(c), ""), e);
}

LLVMValueRef cg_pow(Cg *c, LLVMValueRef x, LLVMValueRef y, IrElem e)
{
    if (e == IR_F64) return pow_f64(c, x, y);
    return cg_from_f32(c, pow_f32(c, cg_to_f32(c, x, e), cg_to_f32(c, y, e)), e);
}

/* fmod of magnitudes a, b >= 0 with a / b < 2^52: a - trunc(a/b) * b with one fma
 * (exact once the quotient is right), the quotient corrected by one step. */
static V frem_small(Cg *c, V a, V b)
{
    LLVMTypeRef t = f64t(c);
    V q = intr1(c, "llvm.trunc", fdiv(c, a, b));
    V r = fmaf_(c, LLVMBuildFNeg(c->b, q, ""), b, a);
    r = sel(c, fcmp(c, LLVMRealOLT, r, fconst(t, 0.0)), fadd(c, r, b), r);   /* quotient one too large */
    return sel(c, fcmp(c, LLVMRealOGE, r, b), fsub(c, r, b), r);            /* one too small */
}

/* The biased exponent field of a non-negative f64 (1 for subnormals and zero). */
static V exp_field(Cg *c, V x)
{
    LLVMTypeRef i64 = LLVMInt64TypeInContext(c->ctx);
    V e = LLVMBuildTrunc(c->b, LLVMBuildLShr(c->b, LLVMBuildBitCast(c->b, x, i64, ""), cg_int(c, i64, 52), ""), cg_i32(c), "");
    return sel(c, LLVMBuildICmp(c->b, LLVMIntEQ, e, cg_i32c(c, 0), ""), cg_i32c(c, 1), e);
}

/* fmod, exact for any operands (C's fmod): while |a| >= |b| 2^51, a = fmod(a, |b| 2^k)
 * with k = exponent(a) - exponent(b) - 50 (|b| 2^k is exact and a multiple of |b|, so
 * the remainder is the same), 50 bits of the quotient per turn, at most 42 turns for
 * f64; then one last step with |a/b| < 2^52. The sign of a is kept; fmod(x, 0),
 * fmod(inf, y) and NaNs give NaN, fmod(x, inf) = x. */
LLVMValueRef cg_frem(Cg *c, LLVMValueRef x, LLVMValueRef y, IrElem e)
{
    LLVMTypeRef t = f64t(c);
    V a = to64(c, x, e), b = to64(c, y, e);
    V aa = intr1(c, "llvm.fabs", a), ab = intr1(c, "llvm.fabs", b);
    V ok = LLVMBuildAnd(c->b, positive_finite(c, ab), fcmp(c, LLVMRealOLT, aa, fconst(t, INFINITY)), "");
    LLVMBasicBlockRef pre = LLVMGetInsertBlock(c->b), head = cg_block_new(c, "frem"), step = cg_block_new(c, "frem.step");
    LLVMBasicBlockRef done = cg_block_new(c, "frem.done");
    LLVMBuildBr(c->b, head);
    LLVMPositionBuilderAtEnd(c->b, head);
    V cur = LLVMBuildPhi(c->b, t, "");
    V more = LLVMBuildAnd(c->b, ok, fcmp(c, LLVMRealOGE, cur, fmul(c, ab, fconst(t, 0x1p51))), "");
    LLVMBuildCondBr(c->b, more, step, done);
    LLVMPositionBuilderAtEnd(c->b, step);
    V k = LLVMBuildSub(c->b, LLVMBuildSub(c->b, exp_field(c, cur), exp_field(c, ab), ""), cg_i32c(c, 50), "");
    V k1 = LLVMBuildAShr(c->b, k, cg_i32c(c, 1), "");       /* k <= 2097: 2^k in four exact factors */
    V bk = scale2(c, scale2(c, ab, k1, true), LLVMBuildSub(c->b, k, k1, ""), true);
    V next = frem_small(c, cur, bk);
    LLVMBuildBr(c->b, head);
    V in[2] = {aa, next};
    LLVMBasicBlockRef from[2] = {pre, step};
    LLVMAddIncoming(cur, in, from, 2);
    LLVMPositionBuilderAtEnd(c->b, done);
    V r = sel(c, ok, frem_small(c, cur, ab), fconst(t, NAN));
    r = sel(c, LLVMBuildAnd(c->b, fcmp(c, LLVMRealOEQ, ab, fconst(t, INFINITY)), fcmp(c, LLVMRealOLT, aa, fconst(t, INFINITY)), ""), aa, r);
    r = sel(c, is_nan(c, r), r, copysign_(c, r, a));
    return from64(c, r, e);
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

LLVMValueRef cg_log_f32(Cg *c, LLVMValueRef x) { return from64(c, log_f64(c, to64(c, x, IR_F32)), IR_F32); }
/* randn's cos: its argument is below 2 pi, so no Payne-Hanek branch. */
LLVMValueRef cg_cos_f32(Cg *c, LLVMValueRef x) { return from64(c, sincos_f64(c, to64(c, x, IR_F32), true, false), IR_F32); }

static V math64(Cg *c, IrOpcode code, V x)
{
    LLVMTypeRef t = f64t(c);
    switch (code) {
    case IR_OP_EXP: return exp_f64(c, x);
    case IR_OP_EXP2: return exp2_f64(c, x);
    case IR_OP_LOG: return log_f64(c, x);
    case IR_OP_LOG2: return log2_f64(c, x);
    case IR_OP_SIN: return sincos_f64(c, x, false, true);
    case IR_OP_COS: return sincos_f64(c, x, true, true);
    case IR_OP_TANH: return tanh_f64(c, x);
    case IR_OP_ERF: return erf_f64(c, x);
    case IR_OP_SIGMOID: return fdiv(c, fconst(t, 1.0), fadd(c, fconst(t, 1.0), exp_f64(c, LLVMBuildFNeg(c->b, x, ""))));
    default: return NULL;
    }
}

/* The functions with an f32 version of their own (the hot ones: softmax, GELU, SiLU).
 * sigmoid's reciprocal is rcp.approx (1 ulp; its argument is >= 1, so flushing
 * subnormals cannot happen). */
static V math_f32(Cg *c, IrOpcode code, V x)
{
    LLVMTypeRef t = f32t(c);
    switch (code) {
    case IR_OP_EXP: return exp_f32(c, x);
    case IR_OP_EXP2: return ex2_approx(c, x);
    case IR_OP_ERF: return erf_f32(c, x);
    case IR_OP_TANH: return tanh_f32(c, x);
    case IR_OP_SIGMOID: {
        V d = fadd(c, fconst(t, 1.0), exp_f32(c, LLVMBuildFNeg(c->b, x, "")));
        return cg_intrinsic(c, "llvm.nvvm.rcp.approx.ftz.f", NULL, 0, &d, 1);
    }
    default: return NULL;
    }
}

LLVMValueRef cg_math(Cg *c, const IrOp *op, IrOpcode code, LLVMValueRef x, IrElem e)
{
    V xf = cg_to_f32(c, x, e);
    LLVMTypeRef t = LLVMTypeOf(xf);
    V one = fconst(t, 1.0), r;
    switch (code) {
    case IR_OP_SQRT: r = intr1(c, "llvm.sqrt", xf); break;
    case IR_OP_RSQRT: r = fdiv(c, one, intr1(c, "llvm.sqrt", xf)); break;
    case IR_OP_FLOOR: r = intr1(c, "llvm.floor", xf); break;
    case IR_OP_CEIL: r = intr1(c, "llvm.ceil", xf); break;
    case IR_OP_EXP2:   /* ftz: ex2.approx.ftz (MUFU.EX2 alone; without, a compare and two scalings) */
        if (e != IR_F64 && op && op->code == IR_OP_EXP2 && op->attr.i) {
            r = cg_intrinsic(c, "llvm.nvvm.ex2.approx.ftz.f", NULL, 0, &xf, 1);
            break;
        }
        /* fall through */
    case IR_OP_EXP: case IR_OP_SIGMOID: case IR_OP_ERF: case IR_OP_TANH:
        r = e == IR_F64 ? math64(c, code, xf) : math_f32(c, code, xf);
        break;
    case IR_OP_LOG: case IR_OP_LOG2: case IR_OP_SIN: case IR_OP_COS: {
        V d = e == IR_F64 ? xf : LLVMBuildFPExt(c->b, xf, f64t(c), "");
        V rd = math64(c, code, d);
        r = e == IR_F64 ? rd : LLVMBuildFPTrunc(c->b, rd, f32t(c), "");
        break;
    }
    default:
        cg_error(c, op, "'%s' is not defined on floats", ir_op_info[code].text);
        return NULL;
    }
    return cg_from_f32(c, r, e);
}
