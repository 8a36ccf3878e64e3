"""The differential tester of block-load K loops (docs/DIFFTEST.md "Block loads"): random
GEMM kernels whose operands are load_block's, the form that sm_90a copies by TMA
(passes/shared.c pipeline_tma) when the arguments allow and by cp.async otherwise, run
in the interpreter as written and against either
  - on the CPU (default): the interpreter running the GPU-level IR the runtime compiles
    for the arguments' class (`tilec run --check-axis-info`: the TMA ring's tma_copy,
    tma_wait and stage arithmetic, every axis fact checked), and for some seeds the
    PTX through ptxas; or
  - with --device gpu: the kernel on the GPU through libtileRT (`tilec run --device gpu`).
The inputs are small integers (-4..4) in bf16, f16 or f8e4m3 and C is f32, so every
product and sum is exact and the results must agree bit for bit, whatever the order of
the sums. f8 operands are copied by TMA into wgmma's k32 f8 form when BK >= 32 and
either both are K-major (A [M, K], B read transposed from [N, K]) or the kernel has
neither a producer warpgroup nor a cluster (an N-major B or M-major A then goes through
a transpose in shared memory, passes/shared.c); other f8 programs check the fall-back
(pointer loads, mma.sync through f16).

A program is drawn from a seed: the block (BM, BN, BK), warps, stages, ws and persistent
(the interpreter launches 3 programs of a persistent kernel, each walking several tiles:
the TMA ring's stages and phases across tiles, with its mbarrier model); A as [M, K]
or read transposed from [K, M], B as [K, N] or read transposed from [N, K] (the
stages' layouts and wgmma's trans bits); the epilogue a masked store or store_block
(stored by TMA through a staging buffer: passes/tmastore.c); i32 or i64 sizes (i64 coordinates are
clamped to TMA's s32); M, N, K (multiples of 16 or not: TMA or
cp.async), row strides with padding (a multiple of 16 elements or not), the first K
step, offsets shifted before the tensor (negative coordinates read zeros), the K
loop whole or cut in two (the loops sharing one ring under ws), clusters of two CTAs
(the rows split between them, B multicast: the interpreter runs each CTA), and two
consumer warpgroups taking alternate tiles in turns (pingpong); and the operands (and
a store_block epilogue) as masked pointer loads (a store) of the same blocks, which
passes/ptrblock.c makes block ops (TMA_FUZZ_POINTERS: their share, default 0.5).

    python3 tests/difftest/tma_fuzz.py TILEC [--seeds A..B] [--device cpu|gpu]
                                        [--time-limit S] [--ptxas PATH] [--out DIR]

A failure prints the seed and keeps the program and its command in DIR (default
./tma-fuzz-failures); the exit status is 1 if any program failed.
"""
import os
import random
import struct
import sys

from fuzz_common import half_bits, main as fuzz_main, ptxas_check, run, run_both

# the share of programs (of those with i32 sizes and unshifted offsets) whose operands
# are pointer loads; TMA_FUZZ_POINTERS=1 draws only those
POINTER_SHARE = float(os.environ.get("TMA_FUZZ_POINTERS", "0.5"))


def f8e4m3_bits(v):
    """an integer of magnitude <= 8 as f8e4m3 (sign, 4 exponent bits biased by 7, 3 mantissa bits)"""
    if v == 0:
        return 0
    a, e = abs(v), abs(v).bit_length() - 1
    return (0x80 if v < 0 else 0) | (e + 7) << 3 | (a * 8 >> e) - 8


class Prog:
    def __init__(self, seed):
        r = random.Random(seed)
        self.seed = seed
        self.elem = r.choice(["bf16", "f16", "f8e4m3"])
        self.BM = r.choice([64, 64, 128])
        self.BN = r.choice([32, 64, 128, 256] if self.BM == 64 else [64, 128])
        self.BK = r.choice([16, 32, 64])
        self.warps = r.choice([4, 4, 8]) if self.BM >= 128 else 4
        self.stages = r.choice([2, 3, 3, 4])
        self.at = r.random() < 0.25          # A read transposed from [K, M]
        self.bt = r.random() < 0.35          # B read transposed from [N, K]
        self.index = "i64" if r.random() < 0.25 else "i32"   # i64: coordinates clamped to s32
        aligned = r.random() < 0.7
        def size(lo, hi):
            v = r.randint(lo, hi)
            return (v + 15) // 16 * 16 if aligned else v
        self.M, self.N, self.K = size(1, 300), size(1, 300), size(1, 200)
        def stride(inner):
            pad = r.choice([0, 0, 0, 16, 32]) if aligned else r.choice([0, 3, 8, 16])
            return inner + pad
        self.sa = stride(self.M if self.at else self.K)
        self.sb = stride(self.K if self.bt else self.N)
        self.k0 = self.BK if r.random() < 0.2 and self.K > self.BK else 0
        self.shift_m = 0 if r.random() < 0.8 else r.choice([-8, -16, 8])
        self.shift_n = 0 if r.random() < 0.85 else r.choice([-8, -32])
        self.fill_a = [r.randint(-4, 4) for _ in range(self.rows_a() * self.sa)]
        self.fill_b = [r.randint(-4, 4) for _ in range(self.rows_b() * self.sb)]
        self.ws = r.random() < 0.4           # a producer warpgroup issues the copies (drawn after
                                             # the rest: earlier seeds keep their programs)
        self.persistent = r.random() < 0.4   # each program walks tiles (drawn after the rest)
        self.store_block = r.random() < 0.5  # the epilogue as store_block: TMA stores
        # drawn last: the K loop cut in two at mid = k0 + BK * split_at (under ws the two
        # loops share one ring: passes/warpspec.c merge_rings)
        self.split = r.random() < 0.3
        self.split_at = r.randint(0, 4)
        # drawn after that: each program on a cluster of two CTAs, its rows split between
        # them, B's blocks multicast (passes/cluster.c); 64 rows a CTA at least, the
        # warpgroup's wgmma (f8 has no other TMA form)
        self.cluster = 2 if r.random() < 0.4 and self.BM == 128 else 1
        # last: two consumer warpgroups taking alternate tiles in turns (pingpong: with a
        # producer, persistent, 4 warps a program)
        self.pingpong = self.ws and self.persistent and self.warps == 4 and r.random() < 0.6
        # after that: the operands (and a store_block epilogue) written as masked pointer
        # loads (a store), which passes/ptrblock.c turns into the block ops; i32 sizes and
        # no shifted offsets (a pointer load before the tensor is out of bounds)
        self.pointers = (self.index == "i32" and not self.shift_m and not self.shift_n and
                         r.random() < POINTER_SHARE)
        # after that: a second dot of the same A with a B of its own, D (a horizontal GEMM:
        # one ring of A, B and D; passes/schedule.c gives it ws and persistent where the
        # kernel gives neither), C = acc + 3 * acc2; the two accumulators within 128
        # registers a thread (more serializes the wgmmas: ptxas C7512)
        self.horizontal = r.random() < 0.3 and 2 * self.BM * self.BN <= 4096 * self.warps
        self.fill_d = [r.randint(-4, 4) for _ in range(self.rows_b() * self.sb)] if self.horizontal else []

    def rows_a(self):
        return self.K if self.at else self.M

    def rows_b(self):
        return self.N if self.bt else self.K

    def pointer_operands(self, om, on, bp="b"):
        BM, BN, BK = self.BM, self.BN, self.BK
        rm, rn, ka = ("(%s + arange(0, %d))" % (om, BM), "(%s + arange(0, %d))" % (on, BN),
                      "(k + arange(0, %d))" % BK)
        def ld(p, rows, cols, s, rb, cb):
            return ("load(%s + %s[:, None] * %s + %s[None, :], mask = (%s[:, None] < %s) & (%s[None, :] < %s), "
                    "other = 0.0)" % (p, rows, s, cols, rows, rb, cols, cb))
        a = "trans(%s)" % ld("a", ka, rm, "sa", "K", "M") if self.at else ld("a", rm, ka, "sa", "M", "K")
        b = "trans(%s)" % ld(bp, rn, ka, "sb", "N", "K") if self.bt else ld(bp, ka, rn, "sb", "K", "N")
        return a, b

    def source(self):
        e, BM, BN, BK = self.elem, self.BM, self.BN, self.BK
        om = "pm * %d%s" % (BM, " + (%d)" % self.shift_m if self.shift_m else "")
        on = "pn * %d%s" % (BN, " + (%d)" % self.shift_n if self.shift_n else "")
        if self.pointers:
            a, b = self.pointer_operands(om, on)
        elif self.at:
            a = "trans(load_block(a, [K, M], [sa, 1], [k, %s], [%d, %d]))" % (om, BK, BM)
        else:
            a = "load_block(a, [M, K], [sa, 1], [%s, k], [%d, %d])" % (om, BM, BK)
        if self.bt:
            b = "trans(load_block(b, [N, K], [sb, 1], [%s, k], [%d, %d]))" % (on, BN, BK)
        else:
            b = "load_block(b, [K, N], [sb, 1], [k, %s], [%d, %d])" % (on, BK, BN)
        d = (self.pointer_operands(om, on, "d")[1] if self.pointers else b.replace("load_block(b,", "load_block(d,"))
        return """// tma_fuzz seed %d
@launch(warps = %d, stages = %d%s%s%s%s)
kernel gemm(c: *f32, a: *%s, b: *%s%s, M: %s, N: %s, K: %s, sa: %s, sb: %s)
    grid(cdiv(M, %d), cdiv(N, %d))
{
    let pm = program_id(0);
    let pn = program_id(1);
    var acc = zeros([%d, %d], f32);
%s%s%s}
""" % ((self.seed, self.warps, self.stages, ", ws = true" if self.ws else "",
        ", persistent = true" if self.persistent else "", ", cluster = 2" if self.cluster == 2 else "",
        ", pingpong = true" if self.pingpong else "", e, e, ", d: *%s" % e if self.horizontal else "") +
       (self.index,) * 5 + (BM, BN, BM, BN,
                            "    var acc2 = zeros([%d, %d], f32);\n" % (BM, BN) if self.horizontal else "",
                            self.loops(a, b, d), self.epilogue(om, on)))

    def loops(self, a, b, d):
        body = "        acc = dot(%s, %s, acc);\n" % (a, b)
        if self.horizontal:
            body = "        let at = %s;\n        acc = dot(at, %s, acc);\n        acc2 = dot(at, %s, acc2);\n" % (a, b, d)
        if not self.split:
            return "    for k in range(%d, K, %d) {\n%s    }\n" % (self.k0, self.BK, body)
        return ("    let mid = minimum(K, %d);\n    for k in range(%d, mid, %d) {\n%s    }\n"
                "    for k in range(mid, K, %d) {\n%s    }\n"
                % (self.k0 + self.BK * self.split_at, self.k0, self.BK, body, self.BK, body))

    def epilogue(self, om, on):
        if self.horizontal:
            e = self.epilogue1(om, on).replace(", acc,", ", res,").replace(", acc)", ", res)")
            return "    let res = acc + acc2 * 3.0;\n" + e
        return self.epilogue1(om, on)

    def epilogue1(self, om, on):
        if self.store_block and self.pointers:
            return ("    store(c + (%s + arange(0, %d))[:, None] * N + (%s + arange(0, %d))[None, :], acc, mask = "
                    "((%s + arange(0, %d))[:, None] < M) & ((%s + arange(0, %d))[None, :] < N));\n"
                    % (om, self.BM, on, self.BN, om, self.BM, on, self.BN))
        if self.store_block:
            return "    store_block(c, [M, N], [N, 1], [%s, %s], acc);\n" % (om, on)
        return """    let rm = %s + arange(0, %d);
    let rn = %s + arange(0, %d);
    store(c + rm[:, None] * N + rn[None, :], acc, mask = (rm[:, None] >= 0) & (rm[:, None] < M) & (rn[None, :] >= 0) & (rn[None, :] < N));
""" % (om, self.BM, on, self.BN)

    def write(self, d):
        src = os.path.join(d, "gemm.tile")
        with open(src, "w") as f:
            f.write(self.source())
        for name, vals in (("a", self.fill_a), ("b", self.fill_b)) + ((("d", self.fill_d),) if self.horizontal else ()):
            with open(os.path.join(d, name + ".bin"), "wb") as f:
                if self.elem == "f8e4m3":
                    f.write(bytes(f8e4m3_bits(v) for v in vals))
                else:
                    f.write(b"".join(struct.pack("<H", half_bits(v, self.elem)) for v in vals))
        return src

    def args(self, d):
        return ["--kernel", "gemm", "--arg", "c=zeros:%d" % (self.M * self.N),
                "--arg", "a=@" + os.path.join(d, "a.bin"), "--arg", "b=@" + os.path.join(d, "b.bin")] + \
               (["--arg", "d=@" + os.path.join(d, "d.bin")] if self.horizontal else []) + [
                "--arg", "M=%d" % self.M, "--arg", "N=%d" % self.N, "--arg", "K=%d" % self.K,
                "--arg", "sa=%d" % self.sa, "--arg", "sb=%d" % self.sb, "--print", "c"]


def tma_eligible(prog):
    """the runtime's variant for these arguments copies by TMA"""
    if prog.elem == "f8e4m3" and prog.BK < 32:
        return False   # 8-bit: 32-byte rows of K at least (docs/CODEGEN.md section 9)
    if prog.elem == "f8e4m3" and (prog.at or not prog.bt) and (prog.ws or prog.cluster > 1 or prog.pingpong):
        return False   # 8-bit operands that are not K-major go through a transpose in shared
                       # memory (passes/shared.c): without a producer warpgroup or a cluster
    if prog.elem == "f8e4m3" and (prog.BM // prog.cluster) % (16 * prog.warps):
        return False   # 8-bit TMA needs wgmma, whose warps all go along M: 64 rows a CTA of a
                       # cluster are too few for 8 warps (mma.sync and cp.async then; seed 838)
    if prog.horizontal and not prog.ws:
        return False   # a loop of two dots is copied by TMA with a producer warpgroup only:
                       # the schedule's (passes/schedule.c) where the accumulators fit
    eb = 1 if prog.elem == "f8e4m3" else 2
    if (prog.at and prog.shift_m * eb % 16) or (not prog.bt and prog.shift_n * eb % 16):
        return False   # a TMA box starts 16-byte aligned along its contiguous axis (M of an A
                       # read from [K, M], N of a B [K, N]): an f8 one at column 8 faulted
                       # (seeds 10 and 17 on an H100); passes/blockload.c fast_offset_aligned
    return all(v % 16 == 0 for v in (prog.M, prog.N, prog.K, prog.sa, prog.sb))


def check(tilec, prog, device, ptxas, d):
    src = prog.write(d)
    why, ref = run_both(tilec, src, prog.args(d), device)
    if why:
        return why
    eligible = tma_eligible(prog)
    if eligible:   # the runtime's variant for these arguments copies by TMA: no silent fall-back
        rc, ir, err = run([tilec, src, "--emit=ir-gpu", "--spec=div16"])
        if rc or "tma_copy" not in ir:
            return "the div16 variant does not copy by TMA" + (": " + err.strip()[-400:] if rc else "")
        if prog.ws and "producer" not in ir:
            return "ws = true, but the div16 variant has no producer warpgroup"
        if prog.ws and prog.persistent and "launched_programs" not in ir:
            return "ws and persistent, but the div16 variant does not walk tiles"
        # (a horizontal GEMM's ring of three tiles a stage may leave no room for the
        # staging buffer: a masked store then, seed 1427)
        if prog.store_block and "tma_store" not in ir and not prog.horizontal:
            return "store_block, but the div16 variant does not store by TMA"
        if prog.cluster > 1 and "cluster_rank" not in ir:
            return "cluster = 2, but the div16 variant does not split the rows"
        if prog.pingpong and "for pingpong" not in ir:
            return "pingpong, but the div16 variant's warpgroups do not take turns"
    if not prog.shift_m and not prog.shift_n and not any(x not in "0. \n[],-" for x in ref):
        return "C is all zeros: the program tests nothing"
    if ptxas and prog.seed % 8 == 0:
        return ptxas_check(tilec, src, "div16" if eligible else "none", ptxas, d, ("C75",))
    return None


if __name__ == "__main__":
    sys.exit(fuzz_main("tma-fuzz", Prog, check, lambda tilec, prog, d: tma_eligible(prog),
                       "with TMA-eligible arguments", "tma-fuzz-failures"))
