/* The bounds of the fast f32 division by a shared divisor, apart from the LLVM headers
 * so that tests/unit/test_fastdiv.c can check them against a C model. */
#ifndef TILE_CODEGEN_CG_FASTDIV_H
#define TILE_CODEGEN_CG_FASTDIV_H

/* f32 division by a divisor s shared by several elements (cg_fastdiv.c): y = RN(1/s)
 * once (div.rn), then per element q0 = x*y, r = fma(-q0, s, x), q = fma(r, y, q0) with
 * q0's sign, which is RN(x/s) (Markstein) while CG_FDIV_SMIN <= |s| <= CG_FDIV_SMAX and
 * x = 0 or CG_FDIV_XMIN <= |x| <= CG_FDIV_XMAX: then |x/s| lies in [2^-124, 2^124] (no
 * subnormal or overflowing quotient) and |x| >= 2^-96 keeps the remainder r exact.
 * Elsewhere div.rn. tests/unit/test_fastdiv.c checks this against a model with fmaf. */
#define CG_FDIV_SMIN 0x1p-28
#define CG_FDIV_SMAX 0x1p28
#define CG_FDIV_XMIN 0x1p-96
#define CG_FDIV_XMAX 0x1p96

#endif
