"""The differential tester of row-wise dot loops (docs/DIFFTEST.md "Attention loops"):
random kernels shaped like FlashAttention's forward (S = Q K^T, a row maximum, P from S,
row statistics carried across the key blocks, the output rescaled per row and
accumulated by P V), the form that passes/layout.c lays out with rows in one warp and,
on sm_90a, puts on wgmma with S's and O's alike layouts (P converted in place into O's
A operand, the statistics between the two slices). Run in the interpreter as written
and against either
  - on the CPU (default): the interpreter running the GPU-level IR the runtime compiles
    (`tilec run --check-axis-info`: the layouts, the rings, every axis fact checked),
    and for some seeds the PTX through ptxas (no serialized wgmma); or
  - with --device gpu: the kernel on the GPU through libtileRT (`tilec run --device gpu`).

Every value is exact, so the results must agree bit for bit (a zero's sign aside: tensor
cores may add products to -0 where IEEE gives +0): Q and K hold -1, 0 or 1 and D <= 64,
so |S| <= 64 and P = S - rowmax + 1 (0 where masked; the 1 keeps a row that sees one
key from being all zeros) is an integer in [-127, 1], exact in bf16 and f16; V holds -2..2, so P V sums stay integers far below 2^24; the per-row
rescale is by -1 or 1 (where the row maximum grew), which is exact, and still moves
every row's own value: a statistic or a factor on the wrong row changes the result.

A program is drawn from a seed: BM, BN, D (of Q and K), DV (of V and O), warps, stages,
bf16 or f16, a causal mask or not, the length L (a multiple of BN or not: masked
tails), padded row strides; a third are shaped like the backward's dK/dV kernel
instead (one program per key block; S^T = K Q^T and dP^T = V dO^T per query block, dK
+= (P^T - dP^T) Q and dV += P^T dO: A operands computed by dots, Q and dO read as they
are and transposed; all inputs in -1..1, so every value stays exact).

    python3 tests/difftest/attn_fuzz.py TILEC [--seeds A..B] [--device cpu|gpu]
                                         [--time-limit S] [--ptxas PATH] [--out DIR]

A failure prints the seed and keeps the program and its command in DIR (default
./attn-fuzz-failures); the exit status is 1 if any program failed.
"""
import os
import random
import struct
import sys

from fuzz_common import half_bits, main as fuzz_main, ptxas_check, run, run_both


def step_body(BN, kv, seen, elem):
    """One key block of the online softmax, every form's loop body: the K and V loads
    kv, the mask `seen`, the dots in elem."""
    return """        let rn = j + arange(0, %d);
%s        let seen = %s;
        let s = where(seen, dot(qt, trans(kt)), -1000.0);
        let mn = maximum(m, max(s, 1));
        let p = where(seen, s - mn[:, None] + 1.0, 0.0);
        let alpha = where(mn > m, -1.0, 1.0);
        l = l * alpha + sum(p, 1);
        acc = dot(p as %s, vt, acc * alpha[:, None]);
        m = mn;
""" % (BN, kv, seen, elem)


class Prog:
    def __init__(self, seed):
        r = random.Random(seed)
        self.seed = seed
        self.elem = r.choice(["bf16", "f16"])
        self.BM = r.choice([64, 64, 128])
        self.warps = r.choice([4, 8]) if self.BM == 128 else 4
        self.BN = r.choice([16, 32, 64, 64, 128] if self.BM == 64 else [32, 64, 64, 128])
        self.D = r.choice([16, 32, 64, 64])
        self.DV = r.choice([16, 32, 64, 128])
        self.stages = r.choice([1, 2, 2, 3])
        self.causal = r.random() < 0.4
        aligned = r.random() < 0.7
        self.L = r.randint(1, 300)
        if aligned:
            self.L = (self.L + 15) // 16 * 16
        self.sq = self.D + (r.choice([0, 0, 16]) if aligned else r.choice([0, 8, 3]))
        self.sv = self.DV + (r.choice([0, 0, 16]) if aligned else r.choice([0, 8, 5]))
        self.q = [r.randint(-1, 1) for _ in range(self.L * self.sq)]
        self.k = [r.randint(-1, 1) for _ in range(self.L * self.sq)]
        self.v = [r.randint(-2, 2) for _ in range(self.L * self.sv)]
        # drawn last, so that earlier seeds keep their forward programs: a third are
        # shaped like the backward's dK/dV kernel (its own inputs in -1..1)
        self.bwd = r.random() < 0.33
        if self.bwd:
            self.DV = self.D                  # dO and dV have the width of V, here D
            self.sv = self.sq
            self.v = [r.randint(-1, 1) for _ in range(self.L * self.sq)]
            self.do = [r.randint(-1, 1) for _ in range(self.L * self.sq)]
        # drawn after everything else, likewise: half the programs ask for the rotated
        # loop (@launch(overlap = true), passes/rotate.c)
        self.overlap = r.random() < 0.5
        # drawn after that (earlier seeds keep their programs): the forward's K and V as
        # block loads (load_block: TMA rings on sm_90a where strides allow), half of those
        # with a producer warpgroup (ws), and the key loop cut in two at `mid` (the
        # unmasked and masked loops of the examples: one ring shared across both)
        self.tma = not self.bwd and r.random() < 0.5
        self.ws = self.tma and self.warps % 4 == 0 and r.random() < 0.5
        self.split = not self.bwd and r.random() < 0.5
        # last: a third compile with every loop-invariant A operand in shared memory
        # (TILE_RESIDENT_A=1, passes/shared.c; by itself the pass moves them only where a
        # loop's registers would not fit, which these small tiles never reach)
        self.resident = r.random() < 0.33
        # after that: the forward's query rows on a cluster of two CTAs (passes/cluster.c:
        # 64 rows each; K and V multicast where they come by TMA)
        self.cluster = 2 if not self.bwd and self.BM == 128 and r.random() < 0.35 else 1
        # then: half the forwards with a producer walk their tiles persistently
        # (passes/persistent.c; causal tiles' loops differ in length: the walks carry the
        # ring's count from tile to tile)
        self.persistent = self.ws and r.random() < 0.5
        # last (earlier seeds keep their programs): the training forms of the
        # examples' kernels on forward programs (docs/DIFFTEST.md): "gqa" (query heads
        # sharing the K and V of their group: K and V at head h / G), "window" (keys
        # j with i - wl <= j <= i + wr; the blocks outside the window skipped by the
        # loop bounds, the ones it cuts masked) or "varlen" (packed sequences of a
        # cu_seqlens array, some empty or shorter than a block; a program past its
        # sequence returns at once)
        self.form = "none"
        if not self.bwd and self.cluster == 1 and not self.persistent:
            self.form = r.choice(["none", "none", "gqa", "window", "varlen"])
        self.gqa = self.form == "gqa"
        self.window = self.form == "window"
        self.varlen = self.form == "varlen"
        self.heads, self.group, self.wl, self.wr, self.lens = 1, 1, -1, -1, [self.L]
        if self.gqa:
            self.group = r.choice([2, 4])
            self.heads = self.group * r.choice([1, 2])
            kvh = self.heads // self.group
            self.q = [r.randint(-1, 1) for _ in range(self.heads * self.L * self.sq)]
            self.k = [r.randint(-1, 1) for _ in range(kvh * self.L * self.sq)]
            self.v = [r.randint(-2, 2) for _ in range(kvh * self.L * self.sv)]
        if self.window:
            self.wl = r.choice([-1, r.randint(0, 150)])
            self.wr = -1 if self.causal else r.choice([-1, r.randint(0, 100)])
            if self.wl < 0 and self.wr < 0:
                self.wl = r.randint(0, 150)
        if self.varlen:
            n = r.randint(2, 4)
            cuts = sorted(r.randint(0, self.L) for _ in range(n - 1))
            self.lens = [b - a for a, b in zip([0] + cuts, cuts + [self.L])]
            if r.random() < 0.5:
                self.lens.insert(r.randint(0, len(self.lens)), 0)   # an empty sequence

    def env(self):
        return {"TILE_RESIDENT_A": "1"} if self.resident else None

    def env_note(self):
        return "; compiled with TILE_RESIDENT_A=1" if self.resident else ""

    def keys(self):
        """the @launch keys after warps and stages"""
        return ((", overlap = true" if self.overlap else "") + (", ws = true" if self.ws else "") +
                (", cluster = 2" if self.cluster == 2 else "") + (", persistent = true" if self.persistent else ""))

    def source(self):
        if self.form != "none":
            return self.source_form()
        e, BM, BN, D, DV = self.elem, self.BM, self.BN, self.D, self.DV
        hi = "minimum(L, (pm + 1) * %d)" % BM if self.causal else "L"
        return """// attn_fuzz seed %d%s
@launch(warps = %d, stages = %d%s)
kernel attn(o: *f32, st: *f32, q: *%s, k: *%s, v: *%s, L: i32, sq: i32, sv: i32)
    grid(cdiv(L, %d))
{
    let pm = program_id(0);
    let rm = pm * %d + arange(0, %d);
    let rd = arange(0, %d);
    let rv = arange(0, %d);
    let qt = load(q + rm[:, None] * sq + rd[None, :], mask = rm[:, None] < L, other = 0.0);
    var m = full([%d], -1000.0, f32);
    var l = zeros([%d], f32);
    var acc = zeros([%d, %d], f32);
%s    let rows_in = rm < L;
    store(o + rm[:, None] * %d + rv[None, :], acc, mask = rows_in[:, None]);
    store(st + rm, m * 1024.0 + l, mask = rows_in);
}
""" % (self.seed, self.env_note(), self.warps, self.stages, self.keys(), e, e, e, BM, BM, BM, D, DV, BM, BM, BM, DV,
       self.loops(hi), DV)

    def loops(self, hi):
        """the key loop over [0, hi), or two loops over [0, mid) and [mid, hi)"""
        BM, BN, D, DV = self.BM, self.BN, self.D, self.DV
        if self.tma:
            kv = """        let kt = load_block(k, shape = [L, %d], strides = [sq, 1], offsets = [j, 0], block = [%d, %d]);
        let vt = load_block(v, shape = [L, %d], strides = [sv, 1], offsets = [j, 0], block = [%d, %d]);
""" % (D, BN, D, DV, BN, DV)
        else:
            kv = """        let kt = load(k + rn[:, None] * sq + rd[None, :], mask = rn[:, None] < L, other = 0.0);
        let vt = load(v + rn[:, None] * sv + rv[None, :], mask = rn[:, None] < L, other = 0.0);
"""
        seen = "(rn[None, :] < L)" + (" & (rn[None, :] <= rm[:, None])" if self.causal else "")
        body = step_body(BN, kv, seen, self.elem)
        if not self.split:
            return "    for j in range(0, %s, %d) {\n%s    }\n" % (hi, BN, body)
        mid = "minimum(pm * %d, %s)" % (BM, hi) if self.causal else "(L / %d) * %d" % (BN, BN)
        return ("    let mid = %s;\n    for j in range(0, mid, %d) {\n%s    }\n"
                "    for j in range(mid, %s, %d) {\n%s    }\n" % (mid, BN, body, hi, BN, body))

    def source_form(self):
        """the forward with a training form: per program a head (gqa) or a sequence
        (varlen) of rows [r0, r0 + Ls) of q, o and st, keys [k0, k0 + Ls) of k and v
        (k0 = kv head * L for gqa), and the key loop over key_bounds' range (window)"""
        e, BM, BN, D, DV = self.elem, self.BM, self.BN, self.D, self.DV
        if self.gqa:
            pre = ("    let hq = program_id(1);\n    let Ls = L;\n    let r0 = hq * L;\n"
                   "    let k0 = (hq / %d) * L;\n" % self.group)
            grid, params, kshape = "cdiv(L, %d), %d" % (BM, self.heads), "", "L * %d" % (self.heads // self.group)
        elif self.varlen:
            pre = ("    let b = program_id(1);\n    let r0 = load(cu + b);\n    let Ls = load(cu + b + 1) - r0;\n"
                   "    if pm * %d >= Ls {\n        return;\n    }\n    let k0 = r0;\n" % BM)
            grid, params, kshape = "cdiv(Lmax, %d), %d" % (BM, len(self.lens)), ", cu: *i32, Lmax: i32", "L"
        else:
            pre = "    let Ls = L;\n    let r0 = 0;\n    let k0 = 0;\n"
            grid, params, kshape = "cdiv(L, %d)" % BM, "", "L"
        # the window's key range of rows [pm * BM, pm * BM + BM) (all of [0, Ls) without one)
        lo, hi = "0", "Ls"
        if self.causal:
            hi = "minimum(Ls, (pm + 1) * %d)" % BM
        elif self.wr >= 0:
            hi = "minimum(Ls, pm * %d + %d + %d)" % (BM, BM, self.wr)
        if self.wl >= 0:
            lo = "maximum(0, pm * %d - %d) / %d * %d" % (BM, self.wl, BN, BN)
        if self.tma:
            kv = """        let kt = load_block(k, shape = [%s, %d], strides = [sq, 1], offsets = [k0 + j, 0], block = [%d, %d]);
        let vt = load_block(v, shape = [%s, %d], strides = [sv, 1], offsets = [k0 + j, 0], block = [%d, %d]);
""" % (kshape, D, BN, D, kshape, DV, BN, DV)
        else:
            kv = """        let kt = load(k + (k0 + rn)[:, None] * sq + rd[None, :], mask = rn[:, None] < Ls, other = 0.0);
        let vt = load(v + (k0 + rn)[:, None] * sv + rv[None, :], mask = rn[:, None] < Ls, other = 0.0);
"""
        seen = "(rn[None, :] < Ls)" + (" & (rn[None, :] <= rm[:, None])" if self.causal else "")
        if self.wr >= 0:
            seen += " & (rn[None, :] <= rm[:, None] + %d)" % self.wr
        if self.wl >= 0:
            seen += " & (rn[None, :] >= rm[:, None] - %d)" % self.wl
        body = step_body(BN, kv, seen, e)
        if self.split:
            mid = "minimum(maximum(pm * %d, %s), %s)" % (BM, lo, hi) if self.causal else \
                  "minimum(maximum((Ls / %d) * %d, %s), %s)" % (BN, BN, lo, hi)
            loops = ("    let mid = %s;\n    for j in range(%s, mid, %d) {\n%s    }\n"
                     "    for j in range(mid, %s, %d) {\n%s    }\n" % (mid, lo, BN, body, hi, BN, body))
        else:
            loops = "    for j in range(%s, %s, %d) {\n%s    }\n" % (lo, hi, BN, body)
        return """// attn_fuzz seed %d (%s%s)%s
@launch(warps = %d, stages = %d%s)
kernel attn(o: *f32, st: *f32, q: *%s, k: *%s, v: *%s, L: i32, sq: i32, sv: i32%s)
    grid(%s)
{
    let pm = program_id(0);
%s    let rm = pm * %d + arange(0, %d);
    let rd = arange(0, %d);
    let rv = arange(0, %d);
    let qt = load(q + (r0 + rm)[:, None] * sq + rd[None, :], mask = rm[:, None] < Ls, other = 0.0);
    var m = full([%d], -1000.0, f32);
    var l = zeros([%d], f32);
    var acc = zeros([%d, %d], f32);
%s    let rows_in = rm < Ls;
    store(o + (r0 + rm)[:, None] * %d + rv[None, :], acc, mask = rows_in[:, None]);
    store(st + r0 + rm, m * 1024.0 + l, mask = rows_in);
}
""" % (self.seed, self.form, self.form_note(), self.env_note(), self.warps, self.stages, self.keys(), e, e, e,
       params, grid, pre, BM, BM, D, DV, BM, BM, BM, DV, loops, DV)

    def form_note(self):
        if self.gqa:
            return ": %d query heads, groups of %d" % (self.heads, self.group)
        if self.window:
            return ": window (%d, %d)" % (self.wl, self.wr)
        return ": lengths %s" % self.lens if self.varlen else ""

    def source_bwd(self):
        # one program per key block: S^T = K Q^T and dP^T = V dO^T against each query
        # block, dS^T = P^T - dP^T, dK += dS^T Q and dV += P^T dO (A operands computed
        # by dots, Q and dO read both as they are and transposed); |P^T|, |dP^T| <= 64
        e, BM, BN, D = self.elem, self.BM, self.BN, self.D
        seen = "(rm[None, :] < L)" + (" & (rm[None, :] >= rn[:, None])" if self.causal else "")
        lo = "pn * %d" % BN if self.causal else "0"
        return """// attn_fuzz seed %d (backward)%s
@launch(warps = %d, stages = %d%s)
kernel attn(o: *f32, st: *f32, q: *%s, k: *%s, v: *%s, dout: *%s, L: i32, sq: i32, sv: i32)
    grid(cdiv(L, %d))
{
    let pn = program_id(0);
    let rn = pn * %d + arange(0, %d);
    let rd = arange(0, %d);
    let keys_in = rn < L;
    let kt = load(k + rn[:, None] * sq + rd[None, :], mask = keys_in[:, None], other = 0.0);
    let vt = load(v + rn[:, None] * sq + rd[None, :], mask = keys_in[:, None], other = 0.0);
    var dk = zeros([%d, %d], f32);
    var dv = zeros([%d, %d], f32);
    for i in range(%s, L, %d) {
        let rm = i + arange(0, %d);
        let qt = load(q + rm[:, None] * sq + rd[None, :], mask = rm[:, None] < L, other = 0.0);
        let dot_ = load(dout + rm[:, None] * sq + rd[None, :], mask = rm[:, None] < L, other = 0.0);
        let pt = where(%s, dot(kt, trans(qt)), 0.0);
        let dpt = dot(vt, trans(dot_));
        let dst = pt - dpt;
        dk = dot(dst as %s, qt, dk);
        dv = dot(pt as %s, dot_, dv);
    }
    store(o + rn[:, None] * %d + rd[None, :], dk, mask = keys_in[:, None]);
    store(st + rn, sum(dv, 1), mask = keys_in);
}
""" % (self.seed, self.env_note(), self.warps, self.stages, self.keys(), e, e, e, e, BN, BN, BN, D, BN, D, BN, D, lo, BM, BM,
       seen, e, e, D)

    def write(self, d):
        src = os.path.join(d, "attn.tile")
        with open(src, "w") as f:
            f.write(self.source_bwd() if self.bwd else self.source())
        inputs = [("q", self.q), ("k", self.k), ("v", self.v)] + ([("do", self.do)] if self.bwd else [])
        for name, vals in inputs:
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                f.write(b"".join(struct.pack("<H", half_bits(x, self.elem)) for x in vals))
        return src

    def args(self, d):
        ins = [("q", "q"), ("k", "k"), ("v", "v")] + ([("dout", "do")] if self.bwd else [])
        rows = self.L * self.heads
        extra = []
        if self.varlen:
            cu = os.path.join(d, "cu.bin")
            with open(cu, "wb") as f:
                f.write(struct.pack("<%di" % (len(self.lens) + 1), *[sum(self.lens[:i]) for i in range(len(self.lens) + 1)]))
            extra = ["--arg", "cu=@" + cu, "--arg", "Lmax=%d" % max(self.lens)]
        return ["--kernel", "attn", "--arg", "o=zeros:%d" % (rows * self.DV),
                "--arg", "st=zeros:%d" % rows] + extra + \
               [a for n, f in ins for a in ("--arg", "%s=@%s" % (n, os.path.join(d, f + ".bin")))] + \
               ["--arg", "L=%d" % self.L, "--arg", "sq=%d" % self.sq, "--arg", "sv=%d" % self.sv,
                "--print", "o", "--print", "st"]

    def div16(self):
        return all(x % 16 == 0 for x in (self.L, self.sq, self.sv)) and not self.varlen


def unsigned_zeros(text):
    return "\n".join("0" if line.strip() in ("-0", "-0.0") else line for line in text.split("\n"))


def check(tilec, prog, device, ptxas, d):
    src = prog.write(d)
    why, ref = run_both(tilec, src, prog.args(d), device, lambda a, b: unsigned_zeros(a) == unsigned_zeros(b),
                        env=prog.env())
    if why:
        return why
    o_lines = ref.split("\n")[:prog.L * prog.heads * prog.DV]   # --print o, then st, a value a line
    if all(x.strip() in ("0", "-0") for x in o_lines):
        return "O is all zeros: the program tests nothing"
    if ptxas and prog.seed % 6 == 0:   # serialized wgmma fails; C7512 (registers) is the config's
        return ptxas_check(tilec, src, "div16" if prog.div16() else "none", ptxas, d, ("C7514", "C7515", "C7517", "C7519"),
                           env=prog.env())
    return None


def on_wgmma(tilec, prog, d):
    """whether the div16 (or plain) variant computes both dots on wgmma"""
    rc, ir, _ = run([tilec, os.path.join(d, "attn.tile"), "--emit=ir-gpu",
                     "--spec=" + ("div16" if prog.div16() else "none")])
    return rc == 0 and ir.count("mma<version = 3") >= 1 and "version = 2" not in ir


if __name__ == "__main__":
    sys.exit(fuzz_main("attn-fuzz", Prog, check, on_wgmma, "on wgmma", "attn-fuzz-failures"))
