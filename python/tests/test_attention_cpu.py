"""tile.ops.attention on CPU torch tensors (the kernels in the interpreter) against a
float64 reference: forward and gradients of each form (GQA, causal, windows, packed
sequences with an empty one, Lq != Lk, head dim 96, bf16 and f16) at small odd shapes.
The _tma kernels (impl="tma": the interpreter runs them on CPU tensors) take the same
forms and are compared with float64 and with the pointer kernels; then which impl
"auto" picks and the errors of a forced one. Skipped where torch is not installed;
tests/gpu/test_attention_ops_gpu.py is the same on the GPU against PyTorch's SDPA, with
a training loop."""
import math
import sys
import unittest
from pathlib import Path

try:
    import torch
except ImportError:
    torch = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402


def reference(q, k, v, causal, window, scale):
    """float64 attention of (B, H, Lq, D) against (B, H', Lk, D), bottom-right aligned"""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    lq, lk = q.shape[2], k.shape[2]
    d = torch.arange(lk)[None, :] - torch.arange(lq)[:, None] - (lk - lq)
    seen = torch.ones(lq, lk, dtype=torch.bool)
    if causal:
        seen &= d <= 0
    elif window[1] >= 0:
        seen &= d <= window[1]
    if window[0] >= 0:
        seen &= d >= -window[0]
    s = (torch.einsum("bhid,bhjd->bhij", q, k) * scale).masked_fill(~seen, -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.einsum("bhij,bhjd->bhid", p, v)


def grads(fn, inputs, do):
    xs = [x.detach().clone().requires_grad_(True) for x in inputs]
    o = fn(*xs)
    o.backward(do)
    return [o.detach()] + [x.grad.detach() for x in xs]


@unittest.skipIf(torch is None, "torch is not installed")
class AttentionCpu(unittest.TestCase):
    def close(self, name, got, want):
        err = (got.double() - want).abs().max().item()
        bound = 1.5e-2 * max(1.0, want.abs().max().item())
        self.assertLessEqual(err, bound, "%s: max error %.3g, bound %.3g" % (name, err, bound))

    impl = "auto"

    def check(self, B, HQ, HKV, Lq, D, causal=False, window=(-1, -1), dtype=None, Lk=None):
        dtype = dtype or torch.bfloat16
        g = torch.Generator().manual_seed(0)
        Lk = Lk or Lq
        r = lambda *s: torch.randn(*s, generator=g).to(dtype)
        q, k, v, do = r(B, HQ, Lq, D), r(B, HKV, Lk, D), r(B, HKV, Lk, D), r(B, HQ, Lq, D)
        scale = 1 / math.sqrt(D)
        want = grads(lambda a, b, c: reference(a, b, c, causal, window, scale), [q, k, v], do.double())
        got = grads(lambda a, b, c: tile.ops.attention(a, b, c, causal=causal, window=window, impl=self.impl),
                    [q, k, v], do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, want):
            self.close("%s B%d HQ%d HKV%d Lq%d Lk%d D%d causal=%d window=%s impl=%s"
                       % (name, B, HQ, HKV, Lq, Lk, D, causal, window, self.impl), a, b)
        self.against_pointer(got, [q, k, v], do, dict(causal=causal, window=window))

    def setUp(self):
        """record the kernels the op launches (tile.ops._kernels' modules behind a spy)"""
        self.launched = set()
        real = tile.ops._kernels
        launched = self.launched

        class Spy:
            def __init__(self, mod):
                self.mod = mod

            def __getattr__(self, name):
                launched.add(name)
                return getattr(self.mod, name)

        tile.ops._kernels = lambda elem: tuple(Spy(m) for m in real(elem))
        self.addCleanup(setattr, tile.ops, "_kernels", real)

    def tearDown(self):
        """each form ran the kernels of its impl: the _tma ones forward and backward, or
        none of them"""
        if not self.launched:
            return
        tma = {n for n in self.launched if "_tma" in n}
        if self.impl == "tma":
            # dK and dV: attn_bwd_dkdv_tma, or at head dim 256 attn_bwd_dkv_split_tma
            ok = lambda sfx: tma >= {"attn_fwd_tma" + sfx, "attn_bwd_dq_tma" + sfx} and (
                "attn_bwd_dkdv_tma" + sfx in tma or "attn_bwd_dkv_split_tma" + sfx in tma)
            self.assertTrue(ok("") or ok("_varlen"), "impl='tma' launched %s" % sorted(self.launched))
        else:
            self.assertFalse(tma, "impl='auto' on CPU launched %s" % sorted(tma))

    def against_pointer(self, got, inputs, do, kw):
        """(the _tma run) the pointer kernels' results on the same inputs, within a
        rounding of the 16-bit outputs"""
        if self.impl != "tma":
            return
        ptr = grads(lambda a, b, c: tile.ops.attention(a, b, c, impl="pointer", **kw), inputs, do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, ptr):
            err = (a.double() - b.double()).abs().max().item()
            self.assertLessEqual(err, 1e-2 * max(1.0, b.double().abs().max().item()),
                                 "%s: tma against pointer %.3g (%s)" % (name, err, kw))

    def test_gqa_causal(self):
        self.check(2, 4, 2, 45, 64, causal=True)

    def test_window(self):
        self.check(1, 2, 1, 150, 64, window=(40, 9))

    def test_head_dim_96_f16(self):
        self.check(1, 2, 2, 37, 96, causal=True, window=(20, -1), dtype=torch.float16)

    def test_head_dim_256(self):
        """head dim 256: the _tma backward's dK and dV in launches of their own
        (attn_bwd_dkv_split_tma; _tma_bwd_cfg); past one block of 128 keys, causal with
        the tails masked, then Lq != Lk (the packed kernels) and a window with GQA"""
        self.check(1, 2, 1, 150, 256, causal=True)
        self.check(1, 2, 2, 70, 256, causal=True, Lk=140)
        self.check(1, 4, 2, 45, 200, window=(20, 5), dtype=torch.float16)
        if self.impl == "tma":
            self.assertIn("attn_bwd_dkv_split_tma", self.launched)
            self.assertIn("attn_bwd_dkv_split_tma_varlen", self.launched)

    def test_blocks(self):
        """lengths past one block of the _tma kernels (128 query rows forward and dQ,
        128 keys dK/dV): unmasked middle blocks, causal tails, a window cutting blocks"""
        self.check(1, 2, 1, 300, 64, causal=True)
        self.check(1, 2, 2, 260, 64, window=(70, 20))

    def test_lengths_differ(self):
        self.check(2, 2, 1, 30, 64, causal=True, Lk=70)
        self.check(1, 2, 2, 70, 64, causal=True, Lk=30)   # the first 40 queries see nothing: 0

    def test_varlen(self):
        lq, lk = [37, 0, 70, 5], [50, 9, 70, 0]
        g = torch.Generator().manual_seed(1)
        r = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)
        q, k, v, do = r(sum(lq), 4, 64), r(sum(lk), 2, 64), r(sum(lk), 2, 64), r(sum(lq), 4, 64)
        cu = lambda ls: torch.tensor([0] + [sum(ls[:i + 1]) for i in range(len(ls))], dtype=torch.int32)
        cu_q, cu_k = cu(lq), cu(lk)
        window = (11, -1)

        def ref(a, b, c):
            outs = []
            for i in range(len(lq)):
                qs, ks, vs = (t[s[i]:s[i + 1]].transpose(0, 1)[None] for t, s in ((a, cu_q), (b, cu_k), (c, cu_k)))
                outs.append(reference(qs, ks, vs, True, window, 0.125)[0].transpose(0, 1))
            return torch.cat(outs, 0)

        want = grads(ref, [q, k, v], do.double())
        kw = dict(causal=True, window=window, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k)
        got = grads(lambda a, b, c: tile.ops.attention(a, b, c, impl=self.impl, **kw), [q, k, v], do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, want):
            self.close("varlen " + name, a, b)
        self.against_pointer(got, [q, k, v], do, kw)

    def test_errors(self):
        if self.impl != "auto":
            return
        q = torch.zeros(1, 3, 16, 64, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "3 query heads are not a multiple of 2"):
            tile.ops.attention(q, torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16),
                               torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16))
        with self.assertRaisesRegex(TypeError, "bfloat16 or all float16"):
            tile.ops.attention(q.float(), q.float(), q.float())


@unittest.skipIf(torch is None, "torch is not installed")
class AttentionTmaCpu(AttentionCpu):
    """every form of AttentionCpu through the _tma kernels (forced: the interpreter runs
    them), each also against the pointer kernels"""
    impl = "tma"


class TmaBackwardBlocks(unittest.TestCase):
    """the _tma backward's dK/dV launches per head dim (no torch needed: a stand-in for
    the kernels' module records the calls)"""

    def launches(self, d, varlen):
        calls = []

        class Kernels:
            def __getattr__(self, name):
                return lambda *a, **kw: calls.append((name, a, kw))

        kv_cfg, _ = tile.ops._tma_bwd_cfg(d)
        tile.ops._tma_dkdv(Kernels(), varlen, "dk", "dv", ("q", "k"), {"D": d, "CAUSAL": 1}, kv_cfg)
        return calls

    def test_up_to_128_one_launch(self):
        for d in (64, 128):
            self.assertEqual(tile.ops._tma_bwd_cfg(d), ({}, {}))
            self.assertEqual(self.launches(d, False),
                             [("attn_bwd_dkdv_tma", ("dk", "dv", "q", "k"), {"D": d, "CAUSAL": 1})])

    def test_256_split(self):
        """dK (PART 0) then dV (PART 1), each a launch with one output and its blocks;
        the blocks are those that ptxas -v assembles without spills"""
        (dk, dv), dq = tile.ops._tma_bwd_cfg(256)
        self.assertEqual((dk, dv, dq), (dict(BM=32, BN=128, warps=8, stages=3), dict(BM=64, BN=128, warps=8, stages=2),
                                        dict(BM=128, BN=32, warps=8, stages=3)))
        for varlen, sfx in ((False, ""), (True, "_varlen")):
            self.assertEqual(self.launches(256, varlen),
                             [("attn_bwd_dkv_split_tma" + sfx, ("dk", "q", "k"), dict(D=256, CAUSAL=1, PART=0, **dk)),
                              ("attn_bwd_dkv_split_tma" + sfx, ("dv", "q", "k"), dict(D=256, CAUSAL=1, PART=1, **dv))])


@unittest.skipIf(torch is None, "torch is not installed")
class AttentionImpl(unittest.TestCase):
    """which kernels impl="auto" picks, and why a forced impl="tma" cannot run"""

    def test_auto_on_cpu_is_pointer(self):
        self.assertEqual(tile.ops._choose("auto", torch.zeros(1, 1, 1, 64), 64), "pointer")
        self.assertEqual(tile.ops._choose("tma", torch.zeros(1, 1, 1, 64), 64), "tma")
        self.assertEqual(tile.ops._choose("pointer", torch.zeros(1, 1, 1, 64), 64), "pointer")

    def test_head_dims(self):
        for dh, ok in ((64, True), (128, True), (96, True), (40, True), (32, False), (100, False),
                       (256, True), (136, True), (252, False)):
            why = tile.ops._tma_refusal(torch.zeros(1), dh)
            self.assertEqual(why is None, ok, "head dim %d: %s" % (dh, why))

    def test_forced_errors(self):
        z = lambda *s: torch.zeros(*s, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "impl='tma' cannot run: .*head dims that are multiples of 8.*not 100"):
            tile.ops.attention(z(1, 2, 16, 100), z(1, 2, 16, 100), z(1, 2, 16, 100), impl="tma")
        with self.assertRaisesRegex(ValueError, "impl is one of"):
            tile.ops.attention(z(1, 2, 16, 64), z(1, 2, 16, 64), z(1, 2, 16, 64), impl="fast")
        # q at an offset of 2 bytes: contiguous, but not 16-byte aligned
        buf = z(1 + 2 * 16 * 64)
        q = buf[1:].view(1, 2, 16, 64)
        with self.assertRaisesRegex(ValueError, "impl='tma' cannot run: q not 16-byte aligned"):
            tile.ops.attention(q, z(1, 2, 16, 64), z(1, 2, 16, 64), impl="tma")
        self.assertEqual(tile.ops._aligned("tma", False, (("q", q),)), "pointer")   # auto: the pointer kernels

    def test_misaligned_do(self):
        """a dO view off 16 bytes is copied for the _tma backward"""
        g = torch.Generator().manual_seed(3)
        r = lambda *s: torch.randn(*s, generator=g).to(torch.bfloat16)
        q, k, v = r(1, 2, 20, 64), r(1, 2, 20, 64), r(1, 2, 20, 64)
        do = r(1 + 2 * 20 * 64)[1:].view(1, 2, 20, 64)
        a = grads(lambda x, y, z: tile.ops.attention(x, y, z, impl="tma"), [q, k, v], do)
        b = grads(lambda x, y, z: tile.ops.attention(x, y, z, impl="pointer"), [q, k, v], do)
        for x, y in zip(a, b):
            self.assertLessEqual((x.double() - y.double()).abs().max().item(), 1e-2)


if __name__ == "__main__":
    unittest.main()
