/* Number formats: f16, bf16, f8e4m3 (e4m3fn), f8e5m2 and tf32 from and to f32/f64.
 *
 * One code path serves every narrow format: a format is (exponent bits, mantissa
 * bits, has infinities), and fmt_round rounds a double to it with round-to-nearest-
 * even by scaling the value so that the format's last mantissa bit becomes the units
 * bit (an exact power-of-two scaling) and calling rint. Rounding straight from double
 * never double-rounds: every f32 (and every exact sum or product the interpreter
 * forms) is already a double, so the only rounding is the one into the format.
 *
 * Overflow: formats with infinities give +-inf; e4m3fn has none and gives NaN, as
 * PyTorch's (non-saturating) float8_e4m3fn cast does for |x| >= 480, i.e. for every
 * value that rounds past 448. NaN payloads keep their top bits, so every f16, bf16
 * and f8 bit pattern survives a round trip through f32. */
#include <math.h>
#include <string.h>

#include "interp_internal.h"

typedef struct FpFormat {
    int ebits, mbits;
    bool has_inf;    /* false: e4m3fn, whose top exponent holds normals, NaN = all ones */
} FpFormat;

static const FpFormat fmt_f16 = {5, 10, true};
static const FpFormat fmt_bf16 = {8, 7, true};
static const FpFormat fmt_e4m3 = {4, 3, false};
static const FpFormat fmt_e5m2 = {5, 2, true};
static const FpFormat fmt_tf32 = {8, 10, true};

static int fmt_bias(const FpFormat *f) { return (1 << (f->ebits - 1)) - 1; }
static int fmt_emin(const FpFormat *f) { return 1 - fmt_bias(f); }
static uint32_t fmt_emask(const FpFormat *f) { return (1u << f->ebits) - 1; }

/* The largest finite value: e4m3fn uses the all-ones exponent for normals too, except
 * for the all-ones mantissa (NaN), so its top is 1.110b * 2^8 = 448. */
static double fmt_max(const FpFormat *f)
{
    int emax = (int)fmt_emask(f) - 1 - fmt_bias(f);
    if (!f->has_inf) return ldexp(2.0 - ldexp(1.0, 1 - f->mbits), emax + 1);
    return ldexp(2.0 - ldexp(1.0, -f->mbits), emax);
}

static double fmt_round(const FpFormat *f, double v)
{
    if (isnan(v)) return v;
    if (isinf(v)) return f->has_inf ? v : copysign(NAN, v);
    if (v == 0) return v;
    int e;
    frexp(v, &e);                       /* |v| in [2^(e-1), 2^e) */
    int x = e - 1 < fmt_emin(f) ? fmt_emin(f) : e - 1;  /* subnormals: fixed quantum */
    double r = ldexp(rint(ldexp(v, f->mbits - x)), x - f->mbits);
    if (fabs(r) > fmt_max(f)) return f->has_inf ? copysign(INFINITY, v) : copysign(NAN, v);
    return r;
}

uint32_t fp_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float fp_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* NaN: the payload's top bits move over; a payload that would vanish becomes quiet. */
static uint32_t fmt_encode_nan(const FpFormat *f, uint32_t sign, float v)
{
    uint32_t all = (fmt_emask(f) << f->mbits) | ((1u << f->mbits) - 1);
    if (!f->has_inf) return sign | all;
    uint32_t mant = (fp_f32_bits(v) & 0x7FFFFF) >> (23 - f->mbits);
    if (!mant) mant = 1u << (f->mbits - 1);
    return sign | (fmt_emask(f) << f->mbits) | mant;
}

static uint32_t fmt_encode(const FpFormat *f, float v)
{
    uint32_t sign = signbit(v) ? 1u << (f->ebits + f->mbits) : 0;
    double r = fmt_round(f, v);
    if (isnan(r)) return fmt_encode_nan(f, sign, isnan(v) ? v : NAN);
    if (isinf(r)) return sign | (fmt_emask(f) << f->mbits);
    double a = fabs(r);
    if (a == 0) return sign;
    int e;
    frexp(a, &e);
    int x = e - 1;
    if (x < fmt_emin(f)) return sign | (uint32_t)ldexp(a, f->mbits - fmt_emin(f));
    uint32_t mant = (uint32_t)ldexp(a, f->mbits - x) - (1u << f->mbits);
    return sign | ((uint32_t)(x + fmt_bias(f)) << f->mbits) | mant;
}

static float fmt_decode(const FpFormat *f, uint32_t b)
{
    uint32_t sign = (b >> (f->ebits + f->mbits)) & 1;
    uint32_t exp = (b >> f->mbits) & fmt_emask(f);
    uint32_t mant = b & ((1u << f->mbits) - 1);
    bool top = exp == fmt_emask(f);
    if (top && f->has_inf)
        return fp_bits_f32((sign << 31) | 0x7F800000 | (mant << (23 - f->mbits)));
    if (top && mant == (1u << f->mbits) - 1) return fp_bits_f32((sign << 31) | 0x7FC00000);
    double m = exp ? ldexp((double)(mant | (1u << f->mbits)), (int)exp - fmt_bias(f) - f->mbits)
                   : ldexp((double)mant, fmt_emin(f) - f->mbits);
    return (float)(sign ? -m : m);
}

uint16_t fp_f32_to_f16(float f) { return (uint16_t)fmt_encode(&fmt_f16, f); }
float fp_f16_to_f32(uint16_t h) { return fmt_decode(&fmt_f16, h); }
uint16_t fp_f32_to_bf16(float f) { return (uint16_t)fmt_encode(&fmt_bf16, f); }
float fp_bf16_to_f32(uint16_t h) { return fmt_decode(&fmt_bf16, h); }
uint8_t fp_f32_to_f8e4m3(float f) { return (uint8_t)fmt_encode(&fmt_e4m3, f); }
float fp_f8e4m3_to_f32(uint8_t b) { return fmt_decode(&fmt_e4m3, b); }
uint8_t fp_f32_to_f8e5m2(float f) { return (uint8_t)fmt_encode(&fmt_e5m2, f); }
float fp_f8e5m2_to_f32(uint8_t b) { return fmt_decode(&fmt_e5m2, b); }

float fp_round_tf32(float f) { return (float)fmt_round(&fmt_tf32, f); }

/* Double to f32 is one IEEE conversion, itself round-to-nearest-even. */
double fp_round(IrElem e, double v)
{
    switch (e) {
    case IR_F32: return (double)(float)v;
    case IR_F16: return fmt_round(&fmt_f16, v);
    case IR_BF16: return fmt_round(&fmt_bf16, v);
    case IR_F8E4M3: return fmt_round(&fmt_e4m3, v);
    case IR_F8E5M2: return fmt_round(&fmt_e5m2, v);
    default: return v;
    }
}
