"""The graph differential tester (docs/DIFFTEST.md "Graphs"): random whole-tensor graphs (LANGUAGE.md section 7)
run op by op in the graph interpreter and through their fusion plan's lowered Tile
kernels (`tilec run --graph --fused`), in the Tile interpreter or, with --device gpu,
on the GPU, compared normwise per result (see `check`); then `--compare-fused` for the
plan interpreter, which must give the op-by-op bits.

A program is built from a seed: parameters [T, D] (T a size name bound at run time to
one of 1, 5, 16, 37, 130) and weights, then a few steps, each one of the graph forms
the fusion and the lowering treat apart: element-wise chains with broadcast vectors,
columns and scalars; GEMMs with epilogues, on plain or transposed ([N, K], as
torch.nn.Linear's) weights; horizontal GEMMs sharing their left operand, of one width
or not, and SwiGLU's paired product; row reductions, softmax, layer_norm and rms_norm
with their producers and consumers; reshapes and transpositions of heads; attention,
the op (causal or not) or written out (scale, additive mask, dropout). It returns one
to three of its values. A program is f32, or (one in four) bf16 throughout: its GEMMs
and attention then run on tensor cores on the GPU (mma.sync, wgmma), compared within
bf16's tolerance.

    python3 tests/difftest/graph_fuzz.py TILEC [--seeds A..B] [--device cpu|gpu]
                                          [--time-limit S] [--out DIR] [--print SEED]

A failure prints the seed and the command and keeps the program in DIR (default
./graph-fuzz-failures); the exit status is 1 if any program failed.
"""
import os
import random
import subprocess
import sys
import tempfile
import time

SIZES_T = [1, 5, 16, 37, 130]
DIMS = [1, 3, 8, 16, 20, 33, 64, 100]
# The inputs are in [0, 1) and GEMMs grow them by their K; scores of hundreds make exp's
# relative error 1e-5 from an absolute rounding of the scores, which f32's tolerance
# cannot tell from a bug. So the generator follows each value's magnitude (Gen.mag) and
# scales attention's scores (and softmax's input) to a few units, as real models do.
SCALES = [0.5, 1.0, 2.0, 4.0]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.params = []   # (name, shape)
        self.lets = []     # text lines
        self.vals = []     # (name, shape) of [T, ...] values to build on
        self.mag = {}      # name: about the largest |value| (inputs are in [0, 1))
        self.elem = "bf16" if self.r.random() < 0.25 else "f32"
        self.ints = set()  # values of i32 (argmax)
        self.n = 0

    def fresh(self, p="v"):
        self.n += 1
        return "%s%d" % (p, self.n)

    def param(self, shape, p="w"):
        name = self.fresh(p)
        self.params.append((name, shape))
        return name

    def let(self, expr, shape, mag):
        name = self.fresh()
        self.lets.append("    let %s = %s;" % (name, expr))
        self.vals.append((name, shape))
        self.mag[name] = mag
        return name

    def m(self, name):
        return self.mag.get(name, 1.0)

    def pick(self, rank=None):
        c = [v for v in self.vals if (rank is None or len(v[1]) == rank) and v[1][0] == "T"
             and all(isinstance(d, int) for d in v[1][1:])]
        return self.r.choice(c) if c else None

    # ---- the steps -------------------------------------------------------------------
    def elementwise(self):
        x, s = self.pick(2)
        D = s[1]
        r = self.r.random()
        if r < 0.3:
            e = "%s * %s + %s" % (x, self.param([D], "g"), self.param([D], "b"))
        elif r < 0.5:
            other = [v for v in self.vals if v[1] == s and v[0] != x]
            e = "%s - %s" % (x, other[0][0]) if other else "%s * 0.5" % x
        elif r < 0.7:
            e = self.r.choice(["maximum(%s, 0.0)", "tanh(%s)", "sigmoid(%s) * %s", "abs(%s) + 1.0", "where(%s > 0.0, %s, %s * 0.1)"])
            e = e.replace("%s", x)
        else:
            e = "%s * %s" % (x, self.param(["T", 1], "c"))
        return self.let(e, s, 2 * self.m(x) + 1)

    def gemm(self):
        x, s = self.pick(2)
        K, N = s[1], self.r.choice(DIMS[2:])
        if self.r.random() < 0.4:
            w = "trans(%s)" % self.param([N, K])
        else:
            w = self.param([K, N])
        e = "%s @ %s" % (x, w)
        r = self.r.random()
        if r < 0.3:
            e = "maximum(%s + %s, 0.0)" % (e, self.param([N], "b"))
        elif r < 0.5:
            e = "(%s) * 0.5" % e
        return self.let(e, ["T", N], self.m(x) * K * 0.5 + 1)

    def horizontal(self):
        x, s = self.pick(2)
        K = s[1]
        same = self.r.random() < 0.5
        N0 = self.r.choice(DIMS[2:])
        out = []
        for i in range(self.r.choice([2, 3])):
            N = N0 if same else self.r.choice(DIMS[2:])
            w = "trans(%s)" % self.param([N, K]) if self.r.random() < 0.3 else self.param([K, N])
            out.append(self.let("%s @ %s" % (x, w), ["T", N], self.m(x) * K * 0.5))
        return out[-1]

    def swiglu(self):
        x, s = self.pick(2)
        K, N = s[1], self.r.choice(DIMS[2:])
        a, b = self.param([K, N]), self.param([K, N])
        return self.let("(%s @ %s) * sigmoid(%s @ %s) * (%s @ %s)" % (x, a, x, a, x, b), ["T", N],
                        (self.m(x) * K * 0.5) ** 2)

    def rows(self):
        x, s = self.pick(2)
        D = s[1]
        r = self.r.random()
        mx = self.m(x)
        if r < 0.25:   # scaled to a few units: exp turns a large input's rounding into relative error
            return self.let("softmax(%s * %r, -1)" % (x, 2.0 / mx), s, 1.0)
        if r < 0.45:
            return self.let("layer_norm(%s, %s, %s, 1e-5)" % (x, self.param([D], "g"), self.param([D], "b")), s, 4.0)
        if r < 0.65:
            return self.let("rms_norm(%s, %s, 1e-5) * 2.0" % (x, self.param([D], "g")), s, 8.0)
        if r < 0.75:
            red = self.r.choice(["sum", "max", "mean"])
            m = self.let("%s(%s, 1)" % (red, x), ["T"], mx * (D if red == "sum" else 1))
            return self.let("%s - %s[:, None]" % (x, m), s, mx * (D + 1))
        if r < 0.85:   # an index per row (i32), and the row's maximum through it
            a = self.let("argmax(%s, 1)" % x, ["T"], float(D))
            self.ints.add(a)
            return a
        return self.let("%s - max(%s, 1)[:, None]" % (x, x), s, 2 * mx)

    def attention(self):
        x, s = self.pick(2)
        K = s[1]
        H, E = self.r.choice([(1, 8), (2, 8), (2, 16), (4, 16)])
        heads = []
        mp = self.m(x) * K * 0.5
        for _ in range(3):
            p = self.let("%s @ %s" % (x, self.param([K, H * E])), ["T", H * E], mp)
            heads.append(self.let("trans(reshape(%s, [T, %d, %d]), [1, 0, 2])" % (p, H, E), [H, "T", E], mp))
        q, k, v = heads
        # scores of a few units, as real attention's (q . k is about E mp^2 / 4 here)
        scale = float("%.3g" % (self.r.choice(SCALES) / (E * mp * mp)))
        if self.r.random() < 0.5:
            a = self.let("attention(%s, %s, %s, causal = %s, scale = %r)"
                         % (q, k, v, self.r.choice(["true", "false"]), scale), [H, "T", E], mp)
        else:
            mask = self.param(["T", "T"], "m")
            sc = "%s @ trans(%s) * %r + %s" % (q, k, scale, mask)
            p = "softmax(%s, -1)" % sc
            if self.r.random() < 0.4:
                p = "dropout(%s, 0.25, %s)" % (p, self.param_scalar())
            a = self.let("%s @ %s" % (p, v), [H, "T", E], 2 * mp)
        if self.r.random() < 0.3:   # the heads back to [T, H, E] (a store view when returned alone)
            self.let("trans(%s, [1, 0, 2])" % a, ["T", H, E], 2 * mp)
        return self.let("reshape(trans(%s, [1, 0, 2]), [T, %d])" % (a, H * E), ["T", H * E], 2 * mp)

    def shapes(self):
        """Shape changes: a transposition or a reshape into heads and back (gathers or
        views), concat and split along the last axis, a returned reshape (written
        straight into the caller's memory), cumsum along the rows."""
        x, s = self.pick(2)
        D = s[1]
        mx = self.m(x)
        r = self.r.random()
        if r < 0.2:
            t = self.let("trans(%s)" % x, [D, "T"], mx)
            return self.let("trans(%s * 2.0)" % t, s, 2 * mx)
        if r < 0.4:
            other = self.pick(2)
            return self.let("concat([%s, %s], 1)" % (x, other[0]), ["T", D + other[1][1]], max(mx, self.m(other[0])))
        if r < 0.6 and D >= 2:
            a = self.r.randint(1, D - 1)
            name = self.fresh()
            b = self.fresh()
            self.lets.append("    let (%s, %s) = split(%s, [%d, %d], 1);" % (name, b, x, a, D - a))
            self.vals.append((name, ["T", a]))
            self.vals.append((b, ["T", D - a]))
            self.mag[name] = self.mag[b] = mx
            return name
        if r < 0.8 and D % 2 == 0:
            return self.let("reshape(%s + 1.0, [T, 2, %d])" % (x, D // 2), ["T", 2, D // 2], mx + 1)
        return self.let("cumsum(%s, 1) * 0.1" % x, s, mx * D * 0.1)

    def batched(self):
        """Heads split from rows, a batched GEMM per head ([H, T, E] @ [H, E, F]), back to
        rows; or dropout of an element-wise value."""
        x, s = self.pick(2)
        D, mx = s[1], self.m(x)
        if self.r.random() < 0.4:
            return self.let("dropout(%s * 2.0, 0.3, %s)" % (x, self.param_scalar()), s, 4 * mx)
        H = next((h for h in (4, 2, 1) if D % h == 0), 1)
        E, F = D // H, self.r.choice([8, 16, 20])
        hx = self.let("trans(reshape(%s, [T, %d, %d]), [1, 0, 2])" % (x, H, E), [H, "T", E], mx)
        y = self.let("%s @ %s" % (hx, self.param([H, E, F])), [H, "T", F], mx * E * 0.5)
        return self.let("reshape(trans(%s, [1, 0, 2]), [T, %d])" % (y, H * F), ["T", H * F], mx * E * 0.5)

    def images(self):
        """Rows of a [T, D] value as images [T, 1, S, S] (D = S * S): conv2d (stride 1 or
        2, padding 0 or 1, NCHW), BatchNorm's folded per-channel scale and shift and a
        ReLU; or a row op over the last axis of a 3-D view of the rows."""
        x, s = self.pick(2)
        D, mx = s[1], self.m(x)
        S = {16: 4, 64: 8, 100: 10}.get(D)
        if S and self.r.random() < 0.6:
            C, R = self.r.choice([2, 4]), 3
            st, pad = self.r.choice([1, 2]), self.r.choice([0, 1])
            P = (S + 2 * pad - R) // st + 1
            img = self.let("reshape(%s, [T, 1, %d, %d])" % (x, S, S), ["T", 1, S, S], mx)
            y = self.let("conv2d(%s, %s, stride = %d, padding = %d)" % (img, self.param([C, 1, R, R]), st, pad),
                         ["T", C, P, P], mx * R * R * 0.5)
            sc, sh = self.param([C], "g"), self.param([C], "b")
            z = self.let("maximum(%s * %s[:, None, None] + %s[:, None, None], 0.0)" % (y, sc, sh), ["T", C, P, P],
                         mx * R * R * 0.5 + 1)
            return self.let("reshape(%s, [T, %d])" % (z, C * P * P), ["T", C * P * P], mx * R * R * 0.5 + 1)
        if D % 2:
            return self.let("%s * 0.5" % x, s, mx)
        h = self.let("reshape(%s, [T, 2, %d])" % (x, D // 2), ["T", 2, D // 2], mx)
        if self.r.random() < 0.5:
            r = self.let("softmax(%s * %r, -1)" % (h, 2.0 / mx), ["T", 2, D // 2], 1.0)
        else:
            r = self.let("layer_norm(%s, %s, %s, 1e-5)" % (h, self.param([D // 2], "g"), self.param([D // 2], "b")),
                         ["T", 2, D // 2], 4.0)
        return self.let("reshape(%s, [T, %d])" % (r, D), s, self.m(r))

    def param_scalar(self):
        name = self.fresh("seed")
        self.params.append((name, "i64"))
        return name

    def build(self):
        D = self.r.choice(DIMS[1:])
        self.vals.append((self.param(["T", D], "x"), ["T", D]))
        steps = [self.elementwise, self.gemm, self.horizontal, self.swiglu, self.rows, self.attention, self.shapes,
                 self.batched, self.images]
        weights = [3, 3, 2, 1, 3, 2, 2, 2, 2]
        for _ in range(self.r.randint(1, 5)):
            self.r.choices(steps, weights)[0]()
        made = [v for v in self.vals if v not in self.vals[:1]] or self.vals
        rets = self.r.sample(made, min(len(made), self.r.randint(1, 3)))
        self.rets = rets
        return rets

    def text(self):
        rets = self.build()
        def ty(s):
            return "i64" if s == "i64" else "%s[%s]" % (self.elem, ", ".join(str(d) for d in s))
        ps = ", ".join("%s: %s" % (n, ty(s)) for n, s in self.params)
        rt = ", ".join(ty(s).replace(self.elem, "i32", 1) if n in self.ints else ty(s) for n, s in rets)
        body = "\n".join(self.lets)
        ret = ", ".join(n for n, _ in rets)
        if len(rets) > 1:
            rt, ret = "(%s)" % rt, "(%s)" % ret
        return "graph g(%s) -> %s {\n%s\n    return %s;\n}\n" % (ps, rt, body, ret)

    def args(self, T):
        out = ["--arg", "T=%d" % T]
        for i, (n, s) in enumerate(self.params):
            if s == "i64":
                out += ["--arg", "%s=%d" % (n, self.r.randrange(1 << 20))]
                continue
            count = 1
            for d in s:
                count *= T if d == "T" else d
            out += ["--arg", "%s=rand:%d:%d" % (n, count, i + 1)]
        return out


def program(seed):
    """(text, args, the element count of each result, each result's magnitude, the
    element type)."""
    g = Gen(seed)
    text = g.text()
    T = g.r.choice(SIZES_T)
    counts = []
    mags = [g.m(n) for n, _ in g.rets]
    for _, shp in g.rets:
        n = 1
        for d in shp:
            n *= T if d == "T" else d
        counts.append(n)
    return text, g.args(T), counts, mags, g.elem


def floats(out):
    vals = []
    for line in out.split():
        try:
            vals.append(float(line))
        except ValueError:
            pass
    return vals


TOL = {"f32": 1e-4, "bf16": 3e-2}


def check(tilec, path, args, counts, mags, elem, device):
    """None, or what went wrong: --compare-fused's own verdict on everything but the
    lowered kernels' rounding (the plan interpreter must give the op-by-op bits), then
    the kernels' results against the op-by-op ones, normwise per result (max |a - b|
    within 1e-4 of max |a|): a subtraction of near-equal values (x - max(x)) leaves the
    GEMMs' reordered sums' rounding in a small result, which an elementwise f32
    tolerance would call a bug; a wrong index or mask is off by the data's own size.
    The scale is at least the generator's estimate of the result's magnitude, so a
    result that is all cancellation (sum(x - mean(x))) is noise against its inputs'
    size, not against its own."""
    prints = []
    for i in range(len(counts)):
        prints += ["--print", "ret%d" % i]
    base = [tilec, "run", path, "--graph", "g"] + args + prints
    ops = subprocess.run(base, capture_output=True, text=True, timeout=300)
    if ops.returncode:
        return "op by op: " + (ops.stderr.strip().splitlines() or ["exit %d" % ops.returncode])[-1]
    low = subprocess.run(base + ["--fused", "--device", device], capture_output=True, text=True, timeout=300)
    if low.returncode or "error" in low.stderr:
        return "fused: " + (low.stderr.strip().splitlines() or ["exit %d" % low.returncode])[-1]
    a, b = floats(ops.stdout), floats(low.stdout)
    if len(a) != sum(counts) or len(b) != len(a):
        return "printed %d and %d values, expected %d" % (len(a), len(b), sum(counts))
    at = 0
    for i, n in enumerate(counts):
        x, y = a[at:at + n], b[at:at + n]
        at += n
        big = max([abs(v) for v in x if v == v and abs(v) != float("inf")] + [mags[i]])
        for j, (u, v) in enumerate(zip(x, y)):
            if u != v and not (u != u and v != v) and not abs(u - v) <= TOL[elem] * big:
                return "ret%d[%d]: op by op %r, the kernels %r (max |ret%d| %g)" % (i, j, u, v, i, big)
    cf = subprocess.run([tilec, "run", path, "--compare-fused", "--graph", "g"] + args, capture_output=True, text=True,
                        timeout=300)
    msg = cf.stderr.strip()
    if cf.returncode and "between the op-by-op and the fused run" in msg:
        return msg.splitlines()[-1]
    return None


def main():
    argv = sys.argv[1:]
    if not argv:
        print(__doc__)
        return 2
    tilec = os.path.abspath(argv[0])
    def opt(name, default):
        return argv[argv.index(name) + 1] if name in argv else default
    if "--print" in argv:
        text, args, _, _, _ = program(int(opt("--print", "1")))
        print(text)
        print(" ".join(args))
        return 0
    a, b = (int(x) for x in opt("--seeds", "1..200").split(".."))
    device = opt("--device", "cpu")
    limit = float(opt("--time-limit", "0"))
    outdir = opt("--out", "graph-fuzz-failures")
    t0 = time.time()
    ran = bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(a, b + 1):
            if limit and time.time() - t0 > limit:
                break
            text, args, counts, mags, elem = program(seed)
            path = os.path.join(tmp, "g%d.tile" % seed)
            with open(path, "w") as f:
                f.write(text)
            why = check(tilec, path, args, counts, mags, elem, device)
            ran += 1
            if why:
                bad += 1
                os.makedirs(outdir, exist_ok=True)
                keep = os.path.join(outdir, "seed%d.tile" % seed)
                with open(keep, "w") as f:
                    f.write(text + "// " + " ".join(args) + "\n")
                print("graph-fuzz: seed %d FAILED: %s\n  tilec run %s --graph g --fused --device %s %s"
                      % (seed, why, keep, device, " ".join(args)))
    print("graph-fuzz: %d programs, %d failed (seeds %d.., %s, %.0f s)" % (ran, bad, a, device, time.time() - t0))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
