"""tile.ops.attention on the GPU against PyTorch (issue 40, the forms): every form's
forward and gradients first against a float64 reference (the same math in float64 on
the bf16 inputs, on the GPU), then against SDPA in bf16 with the same tolerance
SDPA's own result meets, and a tiny training loop whose loss falls as SDPA's does from
the same seed. Exits 77 (skipped) without torch or a CUDA device.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 tests/gpu/test_attention_ops_gpu.py -v

Forms: GQA (32/8 as Llama 3, and MQA), causal (bottom-right; Lq != Lk through the
packed kernels), sliding windows (left, right, both, with causal), packed sequences
(cu_seqlens; an empty sequence, lengths not multiples of the blocks, more queries than
keys), head dims 64, 96, 128, 256, bf16 and f16."""
import math
import sys
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "python"))

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("skipped: needs torch with a CUDA device")
    sys.exit(77)

import tile  # noqa: E402

DEV = "cuda"


def mask_of(lq, lk, causal, window):
    """[lq, lk] bool: query i sees key j (bottom-right alignment, tile.ops' rule)"""
    i = torch.arange(lq, device=DEV)[:, None]
    j = torch.arange(lk, device=DEV)[None, :]
    d = j - i - (lk - lq)
    wl, wr = window
    seen = torch.ones(lq, lk, dtype=torch.bool, device=DEV)
    if causal:
        seen &= d <= 0
    elif wr >= 0:
        seen &= d <= wr
    if wl >= 0:
        seen &= d >= -wl
    return seen


def reference(q, k, v, causal, window, scale):
    """float64 attention of one padded batch (B, H, L, D); rows that see no key give 0"""
    q, k, v = q.double(), k.double(), v.double()
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = torch.einsum("bhid,bhjd->bhij", q, k) * scale
    seen = mask_of(q.shape[2], k.shape[2], causal, window)
    s = s.masked_fill(~seen, -math.inf)
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return torch.einsum("bhij,bhjd->bhid", p, v)


def reference_varlen(q, k, v, cu_q, cu_k, causal, window, scale):
    outs = []
    for b in range(len(cu_q) - 1):
        qs, ks = q[cu_q[b]:cu_q[b + 1]], k[cu_k[b]:cu_k[b + 1]]
        vs = v[cu_k[b]:cu_k[b + 1]]
        o = reference(qs.transpose(0, 1)[None], ks.transpose(0, 1)[None], vs.transpose(0, 1)[None],
                      causal, window, scale)
        outs.append(o[0].transpose(0, 1))
    return torch.cat(outs, 0)


def grads(fn, inputs, do):
    xs = [x.detach().clone().requires_grad_(True) for x in inputs]
    o = fn(*xs)
    o.backward(do)
    return [o.detach()] + [x.grad.detach() for x in xs]


class Close:
    """tile's error against the float64 reference: at most 1.5% of the largest value
    (at least 1.5e-2: 16-bit results of values near 1 round by 2^-8 and the kernels
    round P and dS to 16 bits), or 3 times SDPA's own error in the same dtype where SDPA
    has the form. A lost key block or a wrong mask is far outside it."""

    @staticmethod
    def check(tc, name, got, want, peer=None):
        err = (got.double() - want).abs().max().item()
        bound = 1.5e-2 * max(1.0, want.abs().max().item())
        if peer is not None:
            bound = max(bound, 3 * (peer.double() - want).abs().max().item())
        tc.assertTrue(err <= bound, "%s: max error %.3g against float64, bound %.3g" % (name, err, bound))


def rand(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device=DEV, dtype=torch.float32).to(dtype)


class Forms(unittest.TestCase):
    def padded(self, B, HQ, HKV, L, D, causal=False, window=(-1, -1), dtype=torch.bfloat16, Lk=None):
        torch.manual_seed(0)
        Lk = Lk or L
        q, k, v = rand(B, HQ, L, D, dtype=dtype), rand(B, HKV, Lk, D, dtype=dtype), rand(B, HKV, Lk, D, dtype=dtype)
        do = rand(B, HQ, L, D, dtype=dtype)
        scale = 1 / math.sqrt(D)
        want = grads(lambda a, b, c: reference(a, b, c, causal, window, scale), [q, k, v], do.double())
        got = grads(lambda a, b, c: tile.ops.attention(a, b, c, causal=causal, window=window), [q, k, v], do)
        # the peer: SDPA in the same dtype, where it has the form (equal lengths, or no
        # mask; a window as an explicit mask)
        peer = [None] * 4
        if window == (-1, -1) and (not causal or L == Lk):
            g = HQ // HKV
            peer = grads(lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
                a, b.repeat_interleave(g, 1), c.repeat_interleave(g, 1), is_causal=causal), [q, k, v], do)
        for name, a, b, p in zip(("O", "dQ", "dK", "dV"), got, want, peer):
            Close.check(self, "%s (B%d HQ%d HKV%d L%d Lk%d D%d causal=%d window=%s %s)"
                        % (name, B, HQ, HKV, L, Lk, D, causal, window, dtype, ), a, b, p)

    def test_plain(self):
        self.padded(2, 4, 4, 200, 64)
        self.padded(2, 4, 4, 200, 128, causal=True)

    def test_gqa(self):
        self.padded(1, 32, 8, 257, 128, causal=True)      # Llama 3's group of 4
        self.padded(2, 8, 1, 129, 64)                     # MQA

    def test_windows(self):
        self.padded(2, 4, 2, 300, 64, window=(70, -1))
        self.padded(2, 4, 2, 300, 64, window=(33, 17))
        self.padded(1, 4, 4, 300, 128, causal=True, window=(100, -1))
        self.padded(1, 4, 4, 300, 128, window=(-1, 0))

    def test_head_dims(self):
        for D in (64, 96, 128, 256):
            self.padded(1, 4, 2, 150, D, causal=True)
        self.padded(1, 4, 2, 150, 96, window=(40, 40))

    def test_f16(self):
        self.padded(2, 4, 2, 200, 128, causal=True, dtype=torch.float16)
        self.padded(1, 4, 4, 200, 96, window=(50, 0), dtype=torch.float16)

    def test_lengths_differ(self):
        self.padded(2, 4, 2, 100, 64, causal=True, Lk=230)
        self.padded(2, 4, 2, 230, 64, causal=True, Lk=100)   # the first 130 queries see nothing

    def varlen(self, lq, lk, HQ, HKV, D, causal=False, window=(-1, -1), dtype=torch.bfloat16):
        torch.manual_seed(1)
        cu_q = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32, device=DEV)
        cu_k = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32, device=DEV)
        tq, tk = sum(lq), sum(lk)
        q, k, v = rand(tq, HQ, D, dtype=dtype), rand(tk, HKV, D, dtype=dtype), rand(tk, HKV, D, dtype=dtype)
        do = rand(tq, HQ, D, dtype=dtype)
        scale = 1 / math.sqrt(D)
        cq, ck = cu_q.tolist(), cu_k.tolist()
        want = grads(lambda a, b, c: reference_varlen(a, b, c, cq, ck, causal, window, scale), [q, k, v], do.double())
        got = grads(lambda a, b, c: tile.ops.attention(a, b, c, causal=causal, window=window, cu_seqlens_q=cu_q,
                                                       cu_seqlens_k=cu_k, max_seqlen=max(lq)), [q, k, v], do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, want):
            Close.check(self, "%s varlen %s/%s causal=%d window=%s" % (name, lq, lk, causal, window), a, b)

    def test_varlen(self):
        self.varlen([300, 0, 77, 1, 129], [300, 0, 77, 1, 129], 8, 2, 128, causal=True)
        self.varlen([300, 0, 77, 1, 129], [300, 0, 77, 1, 129], 4, 4, 64)
        self.varlen([100, 50, 7], [230, 0, 90], 4, 2, 64, causal=True)      # more keys, no keys
        self.varlen([200, 64, 130], [200, 64, 130], 4, 1, 96, window=(64, 8))
        self.varlen([200, 64, 130], [150, 64, 300], 4, 2, 128, causal=True, window=(50, -1), dtype=torch.float16)

    def test_padded_matches_varlen(self):
        """the padded and packed kernels give the same O on the same batch"""
        torch.manual_seed(2)
        q, k, v = rand(3, 8, 160, 128), rand(3, 2, 160, 128), rand(3, 2, 160, 128)
        o = tile.ops.attention(q, k, v, causal=True, window=(70, -1))
        cu = torch.arange(0, 4, device=DEV, dtype=torch.int32) * 160
        pack = lambda t: t.transpose(1, 2).reshape(-1, t.shape[1], t.shape[3])
        ov = tile.ops.attention(pack(q), pack(k), pack(v), causal=True, window=(70, -1), cu_seqlens_q=cu,
                                cu_seqlens_k=cu, max_seqlen=160)
        self.assertLessEqual((ov.float() - pack(o).float()).abs().max().item(), 1e-2)


class Training(unittest.TestCase):
    def test_loss_falls_as_with_sdpa(self):
        """a one-layer attention model (token and position embeddings, GQA 4/2, causal,
        a residual) learns to predict the previous token: tile's op and SDPA from the same
        seed and data, the loss falling and the two within bf16's noise of each other"""
        def run(attn):
            torch.manual_seed(0)
            B, L, H, HKV, D, V = 8, 64, 4, 2, 64, 32
            emb = torch.nn.Embedding(V, H * D).to(DEV, torch.bfloat16)
            pos = torch.nn.Embedding(L, H * D).to(DEV, torch.bfloat16)
            wq = torch.nn.Linear(H * D, H * D, bias=False).to(DEV, torch.bfloat16)
            wkv = torch.nn.Linear(H * D, 2 * HKV * D, bias=False).to(DEV, torch.bfloat16)
            out = torch.nn.Linear(H * D, V, bias=False).to(DEV, torch.bfloat16)
            params = list(emb.parameters()) + list(pos.parameters()) + list(wq.parameters()) + list(wkv.parameters()) + list(out.parameters())
            opt = torch.optim.Adam(params, lr=3e-3)
            g = torch.Generator(device="cpu").manual_seed(1)
            losses = []
            for _ in range(60):
                x = torch.randint(0, V, (B, L), generator=g).to(DEV)
                y = torch.roll(x, 1, 1)    # predict the previous token: needs attention
                h = emb(x) + pos(torch.arange(L, device=DEV))[None]
                q = wq(h).view(B, L, H, D).transpose(1, 2)
                kv = wkv(h).view(B, L, 2, HKV, D)
                k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
                a = attn(q, k, v).transpose(1, 2).reshape(B, L, H * D)
                loss = torch.nn.functional.cross_entropy(out(h + a).float().view(-1, V), y.view(-1))
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
            return losses

        ours = run(lambda q, k, v: tile.ops.attention(q, k, v, causal=True))
        sdpa = run(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), is_causal=True))
        self.assertLess(sum(ours[-10:]) / 10, 0.85 * ours[0], "tile's loss did not fall: %s" % ours[::10])
        self.assertLess(abs(sum(ours[-10:]) - sum(sdpa[-10:])) / 10, 0.1 * sdpa[0],
                        "tile %s against SDPA %s" % (ours[::10], sdpa[::10]))


if __name__ == "__main__":
    unittest.main()
