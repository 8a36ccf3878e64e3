"""The attention kernels' training forms (examples/flash_attn_fwd.tile and
flash_attn_bwd.tile: GQA groups, sliding windows, variable lengths, head dims padded to
the tiles' width, bf16 and f16) against a float64 reference, in the interpreter (`tilec
run`) or on the GPU-level IR (`--gpu-ir`, the GPU passes' output on sm_90a, TMA rings
where a kernel has block loads):

    python3 attn_forms.py TILEC [--family plain|varlen|tma|tma-varlen] [--gpu-ir]
        [--B 2] [--hq 4] [--hkv 2] [--lq 37,0,70] [--lk ...] [--dh 64] [--d 64]
        [--elem bf16|f16] [--causal] [--wl -1] [--wr -1] [--bm 32] [--bn 16] [--bwd]
        [--fused [--det] | --split [--dv-bm N]] [-D NAME=V]...

-D sets a const of every kernel run ahead of the case's (the first -D of a name wins:
`-D WL=5` without --wl shows that a wrong window fails).

--lq gives one query length per sequence (varlen; the padded families take the first,
B of them); --lk the key lengths (default: --lq). Inputs are multiples of 1/64 in
[-1, 1], exact in bf16 and f16. The forward's O and lse (a row that sees no key: O = 0
and lse = +inf), and with --bwd the kernels' dQ, dK and dV (delta from the
preprocess kernel on the kernel's O), are checked element by element: the tolerance of
each is a multiple of the sum of the magnitudes of its terms (the kernels round P and
dS to 16 bits), so a lost or extra key block, a wrong mask or a wrong head is far
outside it. --split (tma families) computes dK and dV by attn_bwd_dkv_split_tma(_varlen)
instead of attn_bwd_dkdv_tma(_varlen): a launch for dK (PART 0, BM = --bn) and one for
dV (PART 1, BM = --dv-bm or --bn), BN = --bm as for dK/dV. Prints one line per output;
exit status 1 on a mismatch."""
import argparse
import math
import operator
import os
import random
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
FWD = os.path.join(ROOT, "examples", "flash_attn_fwd.tile")
BWD = os.path.join(ROOT, "examples", "flash_attn_bwd.tile")


def half_bits(x, elem):
    if elem == "f16":
        return struct.unpack("<H", struct.pack("<e", x))[0]
    return struct.unpack("<I", struct.pack("<f", x))[0] >> 16   # exact: x has few bits


def read(path, elem, n):
    data = open(path, "rb").read()
    if elem == "f32":
        return list(struct.unpack("<%df" % n, data[:4 * n]))
    if elem == "f16":
        return list(struct.unpack("<%de" % n, data[:2 * n]))
    return [struct.unpack("<f", struct.pack("<I", h << 16))[0] for h in struct.unpack("<%dH" % n, data[:2 * n])]


class Case:
    def __init__(self, o):
        self.o = o
        self.varlen = o.family in ("varlen", "tma-varlen")
        self.lq = [int(x) for x in o.lq.split(",")]
        self.lk = [int(x) for x in o.lk.split(",")] if o.lk else list(self.lq)
        if not self.varlen:
            self.lq = [self.lq[0]] * o.B
            self.lk = [self.lk[0]] * o.B
        self.B, self.HQ, self.HKV, self.DH = len(self.lq), o.hq, o.hkv, o.dh
        self.G = self.HQ // self.HKV
        self.scale = 1 / math.sqrt(self.DH)
        r = random.Random(1)
        def t(n, h):   # [b][h][i] -> a row of DH values
            return [[[[r.randint(-64, 64) / 64 for _ in range(self.DH)] for _ in range(ln)]
                     for _ in range(h)] for ln in n]
        self.q, self.k, self.v = t(self.lq, self.HQ), t(self.lk, self.HKV), t(self.lk, self.HKV)
        self.do = t(self.lq, self.HQ)

    def seen(self, b, i, j):
        o = self.o
        d = j - i - (self.lk[b] - self.lq[b])
        if o.causal and d > 0:
            return False
        if not o.causal and o.wr >= 0 and d > o.wr:
            return False
        return not (o.wl >= 0 and d < -o.wl)

    # ---- layouts: a tensor [b][h][i][d] as the family's flat buffer -------------------------
    def total(self, lens):
        return sum(lens)

    def flat(self, t, lens, H):
        out = []
        if self.o.family == "plain" or self.o.family == "tma":       # [B * H, L, DH]
            for b in range(self.B):
                for h in range(H):
                    for row in t[b][h]:
                        out += row
        elif self.o.family == "varlen":                            # [total, H, DH]
            for b in range(self.B):
                for i in range(lens[b]):
                    for h in range(H):
                        out += t[b][h][i]
        else:                                                      # [H, total, DH]
            for h in range(H):
                for b in range(self.B):
                    for row in t[b][h]:
                        out += row
        return out

    def unflat(self, vals, lens, H):
        t = [[[None] * lens[b] for _ in range(H)] for b in range(self.B)]
        DH, pos = self.DH, 0
        def take():
            nonlocal pos
            pos += DH
            return vals[pos - DH:pos]
        if self.o.family in ("plain", "tma"):
            for b in range(self.B):
                for h in range(H):
                    for i in range(lens[b]):
                        t[b][h][i] = take()
        elif self.o.family == "varlen":
            for b in range(self.B):
                for i in range(lens[b]):
                    for h in range(H):
                        t[b][h][i] = take()
        else:
            for h in range(H):
                for b in range(self.B):
                    for i in range(lens[b]):
                        t[b][h][i] = take()
        return t

    def stats_index(self, b, h, i):
        """lse and delta: [B * HQ, L] padded, [HQ, total_q] packed"""
        if not self.varlen:
            return (b * self.HQ + h) * self.lq[0] + i
        return h * sum(self.lq) + sum(self.lq[:b]) + i

    # ---- the reference ----------------------------------------------------------------
    def reference(self):
        self.ref = {"o": {}, "lse": {}, "otol": {}}
        self.p = {}
        for b in range(self.B):
            for h in range(self.HQ):
                kh = h // self.G
                for i in range(self.lq[b]):
                    js = [j for j in range(self.lk[b]) if self.seen(b, i, j)]
                    s = {j: self.scale * sum(map(operator.mul, self.q[b][h][i], self.k[b][kh][j])) for j in js}
                    if not js:
                        self.ref["o"][b, h, i] = [0.0] * self.DH
                        self.ref["otol"][b, h, i] = [0.0] * self.DH
                        self.ref["lse"][b, h, i] = math.inf
                        self.p[b, h, i] = {}
                        continue
                    m = max(s.values())
                    lse = m + math.log(sum(math.exp(x - m) for x in s.values()))
                    p = {j: math.exp(s[j] - lse) for j in js}
                    self.p[b, h, i] = p
                    self.ref["lse"][b, h, i] = lse
                    self.ref["o"][b, h, i] = [sum(p[j] * self.v[b][kh][j][d] for j in js) for d in range(self.DH)]
                    self.ref["otol"][b, h, i] = [sum(p[j] * abs(self.v[b][kh][j][d]) for j in js) for d in range(self.DH)]

    def reference_bwd(self):
        DH, sc = self.DH, self.scale
        self.dq = {}
        self.dk = {(b, h, j): [0.0] * DH for b in range(self.B) for h in range(self.HKV) for j in range(self.lk[b])}
        self.dv = {key: [0.0] * DH for key in self.dk}
        self.dkt = {key: [0.0] * DH for key in self.dk}
        self.dvt = {key: [0.0] * DH for key in self.dk}
        self.dqt = {}
        for b in range(self.B):
            for h in range(self.HQ):
                kh = h // self.G
                for i in range(self.lq[b]):
                    dq, dqt = [0.0] * DH, [0.0] * DH
                    do = self.do[b][h][i]
                    delta = sum(map(operator.mul, do, self.ref["o"][b, h, i]))
                    for j, p in self.p[b, h, i].items():
                        dp = sum(map(operator.mul, do, self.v[b][kh][j]))
                        ds = p * (dp - delta)
                        dst = p * (abs(dp) + abs(delta))
                        kj, qi = self.k[b][kh][j], self.q[b][h][i]
                        dk, dkt, dv, dvt = self.dk[b, kh, j], self.dkt[b, kh, j], self.dv[b, kh, j], self.dvt[b, kh, j]
                        for d in range(DH):
                            dq[d] += sc * ds * kj[d]
                            dqt[d] += sc * dst * abs(kj[d])
                            dk[d] += sc * ds * qi[d]
                            dkt[d] += sc * dst * abs(qi[d])
                            dv[d] += p * do[d]
                            dvt[d] += p * abs(do[d])
                    self.dq[b, h, i], self.dqt[b, h, i] = dq, dqt


def tilec_run(o, path, kernel, consts, args, prints, d):
    # the runtime's variant: div16 when every integer argument is a multiple of 16
    ints = [v for _, v in args if isinstance(v, int)]
    spec = "div16" if all(v % 16 == 0 for v in ints) else "none"
    cmd = [o.tilec, "run", path, "--kernel", kernel] + (["--gpu-ir", "--spec=" + spec] if o.gpu_ir else [])
    for extra in o.D:   # before the case's own: the first -D of a name wins
        cmd += ["-D", extra]
    for k, v in consts.items():
        cmd += ["-D", "%s=%d" % (k, v)]
    for k, v in args:
        cmd += ["--arg", "%s=%s" % (k, v)]
    for p in prints:
        cmd += ["--print", p]
    cmd += ["--print-to", d, "--max-ops", "8000000000"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit("FAIL: %s\n%s" % (" ".join(cmd), r.stderr[-2000:]))


def write(d, name, vals, elem):
    path = os.path.join(d, name + ".bin")
    with open(path, "wb") as f:
        if elem == "i32":
            f.write(struct.pack("<%di" % len(vals), *vals))
        else:
            f.write(b"".join(struct.pack("<H", half_bits(x, elem)) for x in vals))
    return "@" + path


def compare(what, got, want, tol, err):
    """got, want, tol: dicts of key -> list of floats (or a float); returns the count of
    mismatches after printing the first few"""
    bad, worst = 0, 0.0
    for key, w in want.items():
        g, t = got[key], tol[key]
        ws, gs, ts = (w, g, t) if isinstance(w, list) else ([w], [g], [t])
        for x, y, z in zip(ws, gs, ts):
            if math.isinf(x):
                ok = math.isinf(y) and y > 0
                e = 0.0 if ok else math.inf
            else:
                e = abs(x - y)
                ok = e <= err(z, x)
            worst = max(worst, e / max(err(z, x), 1e-30))
            if not ok:
                bad += 1
                if bad <= 5:
                    print("  %s%s: got %r, want %r" % (what, key, y, x))
    print("%s: %d values, %d outside the tolerance (worst %.2f of it)" % (what, sum(
        len(w) if isinstance(w, list) else 1 for w in want.values()), bad, worst))
    return bad


def fused_bwd(o, c, d, bwd, consts, bufs, pre, shape, D, nq, nk, tq):
    """The fused backward: attn_bwd_preprocess_fused (delta, dq_accum and sem zeroed),
    attn_bwd_fused (dK, dV, and dQ's partials added into dq_accum: atomically, or in
    turn with --det), attn_bwd_dq_convert; writes dq.bin, dk.bin, dv.bin in d."""
    if o.family not in ("plain", "tma", "varlen"):
        sys.exit("--fused: the plain, tma and varlen families only")
    if o.family == "varlen":   # the key blocks of the longest key sequence
        shape = [x for x in shape if x[0] != "max_seqlen"] + [("max_seqlen_k", max(c.lk))]
    nacc = tq * c.HQ * D
    tilec_run(o, bwd, "attn_bwd_preprocess_fused", {"D": D, "DH": o.dh},
              [("delta", "zeros:%d" % (tq * c.HQ)), ("dq_accum", "rand:%d:7" % nacc), ("sem", "rand:%d:8" % (tq * c.HQ)),
               ("o", "@" + os.path.join(d, "o.bin")), ("do", bufs["do"])] + pre, ["delta", "dq_accum", "sem"], d)
    common = [("q", bufs["q"]), ("k", bufs["k"]), ("v", bufs["v"]), ("do", bufs["do"]),
              ("lse", "@" + os.path.join(d, "lse.bin")), ("delta", "@" + os.path.join(d, "delta.bin"))]
    tilec_run(o, bwd, "attn_bwd_fused" + {"plain": "", "tma": "_tma", "varlen": "_varlen"}[o.family],
              dict(consts, BM=o.bn, BN=o.bm, DETERMINISTIC=int(o.det)),
              [("dk", "zeros:%d" % nk), ("dv", "zeros:%d" % nk), ("dq_accum", "@" + os.path.join(d, "dq_accum.bin")),
               ("sem", "@" + os.path.join(d, "sem.bin"))] + common + shape, ["dk", "dv", "dq_accum"], d)
    tilec_run(o, bwd, "attn_bwd_dq_convert", {"D": D, "DH": o.dh, "BM": o.bm},
              [("dq", "zeros:%d" % nq), ("dq_accum", "@" + os.path.join(d, "dq_accum.bin"))] + pre[:2] +
              [("scale", "%.9g" % c.scale)] + pre[2:], ["dq"], d)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tilec")
    ap.add_argument("--family", default="plain", choices=["plain", "varlen", "tma", "tma-varlen"])
    ap.add_argument("--gpu-ir", action="store_true")
    ap.add_argument("--B", type=int, default=2)
    ap.add_argument("--hq", type=int, default=4)
    ap.add_argument("--hkv", type=int, default=2)
    ap.add_argument("--lq", default="45")
    ap.add_argument("--lk", default="")
    ap.add_argument("--dh", type=int, default=64)
    ap.add_argument("--d", type=int, default=0)
    ap.add_argument("--elem", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--wl", type=int, default=-1)
    ap.add_argument("--wr", type=int, default=-1)
    ap.add_argument("--bm", type=int, default=32)
    ap.add_argument("--bn", type=int, default=16)
    ap.add_argument("--bwd", action="store_true")
    ap.add_argument("--fused", action="store_true", help="--bwd by attn_bwd_fused(_tma, _varlen): plain, tma, varlen families")
    ap.add_argument("--det", action="store_true", help="--fused with DETERMINISTIC = 1")
    ap.add_argument("--split", action="store_true",
                    help="--bwd with dK and dV by attn_bwd_dkv_split_tma(_varlen) (PART 0, then 1): tma families")
    ap.add_argument("--dv-bm", type=int, default=0, help="--split: dV's query block (default --bn, as dK's)")
    ap.add_argument("-D", action="append", default=[])
    o = ap.parse_args()
    c = Case(o)
    c.reference()
    D = o.d or max(o.dh, 16)
    fwd, bwd = FWD, BWD
    with tempfile.TemporaryDirectory() as d:
        if o.elem == "f16":   # the f16 kernels: the same text with the element type replaced
            for name in ("fwd", "bwd"):
                src = open(FWD if name == "fwd" else BWD).read()
                path = os.path.join(d, name + ".tile")
                open(path, "w").write(__import__("re").sub(r"\bbf16\b", "f16", src))
                fwd, bwd = (path, bwd) if name == "fwd" else (fwd, path)
        consts = {"D": D, "DH": o.dh, "CAUSAL": int(o.causal), "GROUP": c.G, "WL": o.wl, "WR": o.wr}
        tq, tk = sum(c.lq), sum(c.lk)
        nq, nk = tq * c.HQ * c.DH, tk * c.HKV * c.DH
        bufs = {"q": write(d, "q", c.flat(c.q, c.lq, c.HQ), o.elem), "k": write(d, "k", c.flat(c.k, c.lk, c.HKV), o.elem),
                "v": write(d, "v", c.flat(c.v, c.lk, c.HKV), o.elem), "do": write(d, "do", c.flat(c.do, c.lq, c.HQ), o.elem)}
        cu_q = write(d, "cuq", [sum(c.lq[:b]) for b in range(c.B + 1)], "i32")
        cu_k = write(d, "cuk", [sum(c.lk[:b]) for b in range(c.B + 1)], "i32")
        L, BH, scale = c.lq[0], c.B * c.HQ, "%.9g" % c.scale
        fam = o.family
        if fam == "plain":
            shape = [("BH", BH), ("L", L), ("scale", scale), ("stride_bh", L * c.DH), ("stride_l", c.DH)]
        elif fam == "tma":
            shape = [("BH", BH), ("L", L), ("scale", scale), ("stride_l", c.DH), ("rows", tk * c.HKV)]
        elif fam == "varlen":
            shape = [("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k), ("max_seqlen", max(c.lq)), ("B", c.B),
                     ("H", c.HQ), ("total_q", tq), ("scale", scale), ("stride_qt", c.HQ * c.DH),
                     ("stride_qh", c.DH), ("stride_kt", c.HKV * c.DH), ("stride_kh", c.DH)]
        else:
            shape = [("cu_seqlens_q", cu_q), ("cu_seqlens_k", cu_k), ("max_seqlen", max(c.lq)), ("B", c.B),
                     ("H", c.HQ), ("total_q", tq), ("total_k", tk), ("scale", scale),
                     ("rows_q", tq * c.HQ), ("rows", tk * c.HKV)]
        suffix = {"plain": "", "varlen": "_varlen", "tma": "_tma", "tma-varlen": "_tma_varlen"}[fam]
        fc = dict(consts, BM=o.bm, BN=o.bn)
        tilec_run(o, fwd, "attn_fwd" + suffix, fc,
                  [("o", "zeros:%d" % nq), ("lse", "zeros:%d" % (tq * c.HQ)), ("q", bufs["q"]), ("k", bufs["k"]),
                   ("v", bufs["v"])] + shape, ["o", "lse"], d)
        got_o = c.unflat(read(os.path.join(d, "o.bin"), o.elem, nq), c.lq, c.HQ)
        lse = read(os.path.join(d, "lse.bin"), "f32", tq * c.HQ)
        keys = list(c.ref["o"])
        ulp = 2 ** -8 if o.elem == "bf16" else 2 ** -11
        bad = compare("O", {k: got_o[k[0]][k[1]][k[2]] for k in keys}, c.ref["o"], c.ref["otol"],
                      lambda t, x: 2 * ulp * t + ulp * abs(x) + 1e-6)
        bad += compare("lse", {k: lse[c.stats_index(*k)] for k in keys}, c.ref["lse"],
                       {k: 1.0 for k in keys}, lambda t, x: 1e-4 * (1 + abs(x)))
        if o.bwd:
            c.reference_bwd()
            # delta = rowsum(dO * O) of the kernel's O, by the preprocess kernel (packed
            # rows: BH = H, L = total_q and the strides of a token and a head)
            write(d, "o", c.flat(got_o, c.lq, c.HQ), o.elem)
            if fam in ("plain", "tma"):
                pre = [("BH", BH), ("L", L), ("stride_bh", L * c.DH), ("stride_l", c.DH)]
            elif fam == "varlen":
                pre = [("BH", c.HQ), ("L", tq), ("stride_bh", c.DH), ("stride_l", c.HQ * c.DH)]
            else:
                pre = [("BH", c.HQ), ("L", tq), ("stride_bh", tq * c.DH), ("stride_l", c.DH)]
            if o.fused:
                fused_bwd(o, c, d, bwd, consts, bufs, pre, shape, D, nq, nk, tq)
            else:
                tilec_run(o, bwd, "attn_bwd_preprocess", {"D": D, "DH": o.dh},
                          [("delta", "zeros:%d" % (tq * c.HQ)), ("o", "@" + os.path.join(d, "o.bin")),
                           ("do", bufs["do"])] + pre, ["delta"], d)
                lse_in = "@" + os.path.join(d, "lse.bin")
                delta_in = "@" + os.path.join(d, "delta.bin")
                bshape = [x for x in shape if x[0] not in ("max_seqlen",)]
                kshape = bshape + ([("max_seqlen_k", max(c.lk))] if fam in ("varlen", "tma-varlen") else [])
                qshape = bshape + ([("max_seqlen", max(c.lq))] if fam in ("varlen", "tma-varlen") else [])
                common = [("q", bufs["q"]), ("k", bufs["k"]), ("v", bufs["v"]), ("do", bufs["do"]), ("lse", lse_in),
                          ("delta", delta_in)]
                bc = dict(consts, BM=o.bn, BN=o.bm) if fam in ("plain", "varlen") else dict(consts, BM=o.bn, BN=o.bm)
                if o.split:   # dK and dV by attn_bwd_dkv_split_tma(_varlen), a launch each
                    if fam not in ("tma", "tma-varlen"):
                        sys.exit("--split: the tma and tma-varlen families only")
                    for name, part, bm in (("dk", 0, o.bn), ("dv", 1, o.dv_bm or o.bn)):
                        tilec_run(o, bwd, "attn_bwd_dkv_split" + suffix, dict(bc, BM=bm, PART=part),
                                  [("out", "zeros:%d" % nk)] + common + kshape, ["out"], d)
                        os.replace(os.path.join(d, "out.bin"), os.path.join(d, name + ".bin"))
                else:
                    tilec_run(o, bwd, "attn_bwd_dkdv" + suffix, bc,
                              [("dk", "zeros:%d" % nk), ("dv", "zeros:%d" % nk)] + common + kshape, ["dk", "dv"], d)
                tilec_run(o, bwd, "attn_bwd_dq" + suffix, dict(consts, BM=o.bm, BN=o.bn),
                          [("dq", "zeros:%d" % nq)] + common + qshape, ["dq"], d)
            got = {n: read(os.path.join(d, n + ".bin"), o.elem, nq if n == "dq" else nk) for n in ("dq", "dk", "dv")}
            err = lambda t, x: 4 * ulp * t + ulp * abs(x) + 1e-5
            gq = c.unflat(got["dq"], c.lq, c.HQ)
            bad += compare("dQ", {k: gq[k[0]][k[1]][k[2]] for k in c.dq}, c.dq, c.dqt, err)
            for name, want, tol in (("dk", c.dk, c.dkt), ("dv", c.dv, c.dvt)):
                g = c.unflat(got[name], c.lk, c.HKV)
                bad += compare(name[0] + name[1].upper(), {k: g[k[0]][k[1]][k[2]] for k in want}, want, tol, err)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
