# Checks gelu_rows of epilogue.tile: n values of c (bf16), then the n pre-activation
# values x (f32): c = gelu(x) within bf16's rounding (2^-8 relative) plus 1e-6.
function erf(x,    t, s, y) {
    s = x < 0 ? -1 : 1; x = x < 0 ? -x : x
    t = 1 / (1 + 0.3275911 * x)
    y = 1 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x)
    return s * y
}
{ v[NR - 1] = $1 }
END {
    n = NR / 2; bad = 0
    for (i = 0; i < n; i++) {
        x = v[n + i]; g = 0.5 * x * (1 + erf(x / sqrt(2))); d = v[i] - g
        if ((d < 0 ? -d : d) > (g < 0 ? -g : g) / 256 + 1e-6) bad++
    }
    print bad " wrong of " n
}
