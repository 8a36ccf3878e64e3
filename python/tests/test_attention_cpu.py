"""tile.ops.attention on CPU torch tensors (the kernels in the interpreter) against a
float64 reference: forward and gradients of each form (GQA, causal, windows, packed
sequences with an empty one, Lq != Lk, head dim 96, bf16 and f16) at small odd shapes.
Skipped where torch is not installed; tests/gpu/test_attention_ops_gpu.py is the same
on the GPU against PyTorch's SDPA, with a training loop."""
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

    def check(self, B, HQ, HKV, Lq, D, causal=False, window=(-1, -1), dtype=None, Lk=None):
        dtype = dtype or torch.bfloat16
        g = torch.Generator().manual_seed(0)
        Lk = Lk or Lq
        r = lambda *s: torch.randn(*s, generator=g).to(dtype)
        q, k, v, do = r(B, HQ, Lq, D), r(B, HKV, Lk, D), r(B, HKV, Lk, D), r(B, HQ, Lq, D)
        scale = 1 / math.sqrt(D)
        want = grads(lambda a, b, c: reference(a, b, c, causal, window, scale), [q, k, v], do.double())
        got = grads(lambda a, b, c: tile.ops.attention(a, b, c, causal=causal, window=window), [q, k, v], do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, want):
            self.close("%s B%d HQ%d HKV%d Lq%d Lk%d D%d causal=%d window=%s" % (name, B, HQ, HKV, Lq, Lk, D, causal,
                                                                                 window), a, b)

    def test_gqa_causal(self):
        self.check(2, 4, 2, 45, 64, causal=True)

    def test_window(self):
        self.check(1, 2, 1, 150, 64, window=(40, 9))

    def test_head_dim_96_f16(self):
        self.check(1, 2, 2, 37, 96, causal=True, window=(20, -1), dtype=torch.float16)

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
        got = grads(lambda a, b, c: tile.ops.attention(a, b, c, causal=True, window=window, cu_seqlens_q=cu_q,
                                                       cu_seqlens_k=cu_k), [q, k, v], do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, want):
            self.close("varlen " + name, a, b)

    def test_errors(self):
        q = torch.zeros(1, 3, 16, 64, dtype=torch.bfloat16)
        with self.assertRaisesRegex(ValueError, "3 query heads are not a multiple of 2"):
            tile.ops.attention(q, torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16),
                               torch.zeros(1, 2, 16, 64, dtype=torch.bfloat16))
        with self.assertRaisesRegex(TypeError, "bfloat16 or all float16"):
            tile.ops.attention(q.float(), q.float(), q.float())


if __name__ == "__main__":
    unittest.main()
