"""The fp8 attention forward (examples/flash_attn_fwd_fp8.tile: attn_fwd_fp8 and
attn_fwd_fp8_tma) against a float64 reference built from the same e4m3 inputs, in the
interpreter (`tilec run`) or on the GPU-level IR (`--gpu-ir`: the GPU passes' output on
sm_90a, P converted to wgmma's 8-bit A fragment, TMA rings in the _tma kernel):

    python3 attn_fp8.py TILEC [--tma] [--gpu-ir] [--bh 3] [--l 45] [--d 64] [--causal]
        [--bm 32] [--bn 16] [-D NAME=V]...

q, k and v are random e4m3 bytes (normal and subnormal, both signs, |x| <= 8; no NaN)
with descales 0.5, 0.25 and 1.5; vt is v transposed per head. The reference computes
O = softmax(scale * q_descale * k_descale * Q K^T) (V * v_descale) and lse in float64
from the decoded values. The kernel rounds P (in [0, 1]) to e4m3: 2^-4 relative, or
2^-10 absolute below e4m3's normal range, per term, so O's tolerance is that bound over
the terms (sum of (2^-4 p + 2^-10) |v| / l) plus O's bf16 rounding; lse's is f32's.
A wrong descale, a lost or extra key block or a wrong mask is far outside it: -D
k_descale... is not a const; --break-vd checks that a wrong v_descale fails.
Prints one line per output; exit status 1 on a mismatch."""
import argparse
import math
import os
import random
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FWD = os.path.join(ROOT, "examples", "flash_attn_fwd_fp8.tile")


def e4m3(b):
    s = -1.0 if b & 0x80 else 1.0
    e, m = (b >> 3) & 15, b & 7
    if e == 0:
        return s * m / 8 * 2.0 ** -6
    return s * (1 + m / 8) * 2.0 ** (e - 7)


def bf16(h):
    return struct.unpack("<f", struct.pack("<I", h << 16))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tilec")
    ap.add_argument("--tma", action="store_true")
    ap.add_argument("--gpu-ir", action="store_true")
    ap.add_argument("--bh", type=int, default=3)
    ap.add_argument("--l", type=int, default=45)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--bm", type=int, default=32)
    ap.add_argument("--bn", type=int, default=16)
    ap.add_argument("--break-vd", action="store_true", help="pass a wrong v_descale (the check must fail)")
    ap.add_argument("-D", action="append", default=[])
    o = ap.parse_args()
    BH, L, D = o.bh, o.l, o.d
    qd, kd, vd = 0.5, 0.25, 1.5
    scale = 1 / math.sqrt(D)
    r = random.Random(3)
    # bytes of |x| <= 8 (exponent field <= 10), both signs; 0x7f / 0xff (NaN) never
    byte = lambda: r.choice((0, 0x80)) | r.randint(0, 0x57)
    q = [[[byte() for _ in range(D)] for _ in range(L)] for _ in range(BH)]
    k = [[[byte() for _ in range(D)] for _ in range(L)] for _ in range(BH)]
    v = [[[byte() for _ in range(D)] for _ in range(L)] for _ in range(BH)]
    want_o, tol_o, want_lse = {}, {}, {}
    for b in range(BH):
        qf = [[e4m3(x) * qd for x in row] for row in q[b]]
        kf = [[e4m3(x) * kd for x in row] for row in k[b]]
        vf = [[e4m3(x) * vd for x in row] for row in v[b]]
        for i in range(L):
            js = [j for j in range(L) if not o.causal or j <= i]
            s = [scale * sum(x * y for x, y in zip(qf[i], kf[j])) for j in js]
            m = max(s)
            p = [math.exp(x - m) for x in s]
            l = sum(p)
            want_lse[b, i] = m + math.log(l)
            for d in range(D):
                want_o[b, i, d] = sum(pj * vf[j][d] for pj, j in zip(p, js)) / l
                tol_o[b, i, d] = sum((2 ** -4 * pj + 2 ** -10) * abs(vf[j][d]) for pj, j in zip(p, js)) / l
    with tempfile.TemporaryDirectory() as tmp:
        def put(name, data):
            path = os.path.join(tmp, name + ".bin")
            open(path, "wb").write(bytes(data))
            return "@" + path
        flat = lambda t: [x for head in t for row in head for x in row]
        vt = [[[v[b][j][d] for j in range(L)] for d in range(D)] for b in range(BH)]
        args = [("o", "zeros:%d" % (BH * L * D)), ("lse", "zeros:%d" % (BH * L)), ("q", put("q", flat(q))),
                ("k", put("k", flat(k))), ("vt", put("vt", flat(vt))), ("BH", BH), ("L", L),
                ("scale", "%.9g" % scale), ("q_descale", qd), ("k_descale", kd),
                ("v_descale", vd * (1.25 if o.break_vd else 1))]
        if o.tma:
            args += [("rows", BH * L), ("vrows", BH * D)]
        else:
            args += [("stride_bh", L * D), ("stride_l", D), ("stride_vbh", D * L), ("stride_vt", L)]
        ints = [x for _, x in args if isinstance(x, int)]
        spec = "div16" if all(x % 16 == 0 for x in ints) else "none"
        cmd = [o.tilec, "run", FWD, "--kernel", "attn_fwd_fp8" + ("_tma" if o.tma else "")]
        cmd += ["--gpu-ir", "--spec=" + spec] if o.gpu_ir else []
        for x in o.D:
            cmd += ["-D", x]
        cmd += ["-D", "D=%d" % D, "-D", "CAUSAL=%d" % int(o.causal), "-D", "BM=%d" % o.bm, "-D", "BN=%d" % o.bn]
        for name, x in args:
            cmd += ["--arg", "%s=%s" % (name, x)]
        cmd += ["--print-to", tmp, "--max-ops", "8000000000"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode:
            sys.exit("FAIL: %s\n%s" % (" ".join(cmd), res.stderr[-2000:]))
        ob = open(os.path.join(tmp, "o.bin"), "rb").read()
        got_o = [bf16(h) for h in struct.unpack("<%dH" % (BH * L * D), ob[:2 * BH * L * D])]
        lb = open(os.path.join(tmp, "lse.bin"), "rb").read()
        got_lse = list(struct.unpack("<%df" % (BH * L), lb[:4 * BH * L]))
    bad = 0
    for what, want, got, tol in (
            ("O", want_o, lambda key: got_o[(key[0] * L + key[1]) * D + key[2]],
             lambda key, x: tol_o[key] + 2 ** -8 * abs(x) + 1e-6),
            ("lse", want_lse, lambda key: got_lse[key[0] * L + key[1]], lambda key, x: 1e-5 * (1 + abs(x)))):
        nbad, worst = 0, 0.0
        for key, x in want.items():
            y, t = got(key), tol(key, x)
            worst = max(worst, abs(x - y) / t)
            if not abs(x - y) <= t:
                nbad += 1
                if nbad <= 5:
                    print("  %s%s: got %r, want %r (tolerance %.3g)" % (what, key, y, x, t))
        print("%s: %d values, %d outside the tolerance (worst %.2f of it)" % (what, len(want), nbad, worst))
        bad += nbad
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
