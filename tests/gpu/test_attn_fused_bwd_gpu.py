"""The fused attention backward (examples/flash_attn_bwd.tile: attn_bwd_preprocess_fused,
attn_bwd_fused, attn_bwd_dq_convert) on the GPU: dQ, dK and dV against PyTorch's float64
autograd of the same attention (on the bf16 inputs) and against the three-kernel
backward (attn_bwd_preprocess, attn_bwd_dkdv, attn_bwd_dq), causal and not, GQA groups
of 1 and 4, at a length that is no multiple of the blocks, for each config below, with
the atomic dQ (DETERMINISTIC = 0) and the deterministic one. The deterministic dQ must
be bit-identical over repeated runs (and equal to the atomic one within rounding); the
atomic one need not be. Each config's PTX must add dQ with red.global.add.v4.f32
(the _tma form's Q and dO by cp.async rings: by TMA its dQ was wrong on an H100). Both forms: attn_bwd_fused (pointers) and
attn_bwd_fused_tma (block loads).
Exits 77 (skipped) without torch or a CUDA device.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 tests/gpu/test_attn_fused_bwd_gpu.py [-v]
"""
import math
import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "bench"))

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("skipped: needs torch with a CUDA device")
    sys.exit(77)

import tilert  # noqa: E402

BWD = os.path.join(ROOT, "examples", "flash_attn_bwd.tile")
LIB = os.environ.get("TILE_LIB", "build-gpu/runtime/libtileRT.so")
TILEC = os.environ.get("TILEC", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(LIB))), "tools", "tilec"))
rt = tilert.Runtime(LIB)
# (BM, BN, warps): two consumer warpgroups with dK, dV [128, 128] resident; one with [64, 64]
# (BM, BN, warps); ("tma", ...) attn_bwd_fused_tma
CONFIGS = [(64, 128, 8), (64, 64, 4), ("tma", 64, 128, 8)]
B, HQ, L, D = 2, 8, 333, 128
TOL = 2e-2   # relative error (norm) of a bf16 gradient against float64: P and dS go through bf16


def rel_err(x, ref):
    return ((x.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30)).item()


def reference(q, k, v, do, group, causal, scale):
    """o (bf16), lse (f32, natural log), (dq, dk, dv) in float64 with autograd"""
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    kr, vr = kd.repeat_interleave(group, 1), vd.repeat_interleave(group, 1)
    s = torch.einsum("bhid,bhjd->bhij", qd, kr) * scale
    if causal:
        s = s.masked_fill(torch.ones(L, L, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1)
    o = torch.einsum("bhij,bhjd->bhid", torch.softmax(s, -1), vr)
    o.backward(do.double())
    return o.detach().bfloat16(), lse.detach().float(), (qd.grad, kd.grad, vd.grad)


def fused(cfg, q, k, v, o, lse, do, group, causal, det, scale):
    """(dq, dk, dv, dq_accum) of the fused backward; cfg ("tma", BM, BN, warps) runs
    attn_bwd_fused_tma (the heads as one [rows, D] tensor, TMA rings, a producer warpgroup)"""
    tma = cfg[0] == "tma"
    bm, bn, warps = cfg[1:] if tma else cfg
    BH = B * HQ
    sbh, sl = L * D, D
    delta = torch.full((BH, L), float("nan"), device="cuda")
    acc = torch.full((BH, L, D), float("nan"), device="cuda")        # zeroed by the preprocess kernel
    sem = torch.full((BH, L), -1, device="cuda", dtype=torch.int32)
    dq, dk, dv = torch.full_like(q, float("nan")), torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
    rt.kernel(BWD, "attn_bwd_preprocess_fused", BM=32, D=D).prepare(
        "ptr ptr ptr ptr ptr i32 i32 i64 i32", delta, acc, sem, o, do, BH, L, sbh, sl)()
    if tma:
        rt.kernel(BWD, "attn_bwd_fused_tma", BM=bm, BN=bn, D=D, CAUSAL=int(causal), GROUP=group, warps=warps,
                  DETERMINISTIC=int(det)).prepare(
            "ptr ptr ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i32 i32", dk, dv, acc, sem, q, k, v, do, lse, delta,
            BH, L, scale, sl, B * (HQ // group) * L)()
    else:
        rt.kernel(BWD, "attn_bwd_fused", BM=bm, BN=bn, D=D, CAUSAL=int(causal), GROUP=group, warps=warps,
                  DETERMINISTIC=int(det)).prepare(
            "ptr ptr ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", dk, dv, acc, sem, q, k, v, do, lse, delta,
            BH, L, scale, sbh, sl)()
    rt.kernel(BWD, "attn_bwd_dq_convert", BM=64, D=D).prepare(
        "ptr ptr i32 i32 f32 i64 i32", dq, acc, BH, L, scale, sbh, sl)()
    torch.cuda.synchronize()
    return dq, dk, dv, acc


def split(q, k, v, o, lse, do, group, causal, scale):
    """(dq, dk, dv) of the three-kernel backward"""
    BH = B * HQ
    sbh, sl = L * D, D
    delta = torch.empty((BH, L), device="cuda")
    dq, dk, dv = torch.full_like(q, float("nan")), torch.full_like(k, float("nan")), torch.full_like(v, float("nan"))
    rt.kernel(BWD, "attn_bwd_preprocess", BM=32, D=D).prepare(
        "ptr ptr ptr i32 i32 i64 i32", delta, o, do, BH, L, sbh, sl)()
    rt.kernel(BWD, "attn_bwd_dkdv", BM=32, BN=64, D=D, CAUSAL=int(causal), GROUP=group, warps=4).prepare(
        "ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", dk, dv, q, k, v, do, lse, delta, BH, L, scale, sbh, sl)()
    rt.kernel(BWD, "attn_bwd_dq", BM=64, BN=32, D=D, CAUSAL=int(causal), GROUP=group, warps=4).prepare(
        "ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", dq, q, k, v, do, lse, delta, BH, L, scale, sbh, sl)()
    torch.cuda.synchronize()
    return dq, dk, dv


class FusedBackward(unittest.TestCase):
    def case(self, cfg, group, causal):
        torch.manual_seed(sum(map(ord, repr((cfg, group, causal)))))   # the same inputs every run
        scale = 1 / math.sqrt(D)
        q, do = (torch.randn(B, HQ, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        k, v = (torch.randn(B, HQ // group, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        o, lse, ref = reference(q, k, v, do, group, causal, scale)
        base = split(q, k, v, o, lse, do, group, causal, scale)
        runs = {}
        for det in (False, True):
            dq, dk, dv, acc = fused(cfg, q, k, v, o, lse, do, group, causal, det, scale)
            for name, g, r, b in zip(("dq", "dk", "dv"), (dq, dk, dv), ref, base):
                what = "%s %s group %d causal %d det %d" % (name, cfg, group, causal, det)
                self.assertFalse(torch.isnan(g).any().item(), what + ": NaN (an element not written)")
                self.assertLess(rel_err(g, r), TOL, what + " vs float64")
                self.assertLess(rel_err(g, b), TOL, what + " vs the three-kernel backward")
            runs[det] = (dq, acc)
        # the deterministic dQ: the same bits every run; the atomic one equal within rounding
        for _ in range(3):
            dq2, _, _, acc2 = fused(cfg, q, k, v, o, lse, do, group, causal, True, scale)
            self.assertTrue(torch.equal(acc2, runs[True][1]), "deterministic dq_accum differs between runs")
            self.assertTrue(torch.equal(dq2, runs[True][0]), "deterministic dq differs between runs")
        self.assertLess(rel_err(runs[False][1], runs[True][1]), 1e-5, "atomic vs deterministic dq_accum")

    def test_configs(self):
        for cfg in CONFIGS:
            for group in (1, 4):
                for causal in (False, True):
                    with self.subTest(cfg=cfg, group=group, causal=causal):
                        self.case(cfg, group, causal)

    def test_ptx_red_vector(self):
        if not os.path.exists(TILEC):
            self.skipTest("no tilec at %s (set TILEC)" % TILEC)
        for cfg in CONFIGS:
            tma = cfg[0] == "tma"
            bm, bn, warps = cfg[1:] if tma else cfg
            ptx = subprocess.run([TILEC, BWD, "--kernel", "attn_bwd_fused" + ("_tma" if tma else ""),
                                  "-D", "BM=%d" % bm, "-D", "BN=%d" % bn,
                                  "-D", "warps=%d" % warps, "--spec=div16", "--emit=ptx", "-o", "-"],
                                 capture_output=True, text=True, check=True).stdout
            self.assertIn("red.global.add.v4.f32", ptx)
            self.assertIn("wgmma.mma_async", ptx)
            # the _tma form's blocks go by cp.async rings, not TMA, beside the dQ atomics:
            # by TMA its dQ was wrong on an H100 (passes/blockload.c)
            self.assertNotIn("cp.async.bulk.tensor", ptx)
            self.assertIn("cp.async", ptx)


if __name__ == "__main__":
    unittest.main()
