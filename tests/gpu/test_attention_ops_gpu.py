"""tile.ops.attention on the GPU against PyTorch (issue 40, the forms): every form's
forward and gradients first against a float64 reference (the same math in float64 on
the bf16 inputs, on the GPU), then against SDPA in bf16 with the same tolerance
SDPA's own result meets, and a tiny training loop whose loss falls as SDPA's does from
the same seed. Each through both kernel families: impl="pointer" (the plain pointer
kernels) and impl="tma" (the _tma kernels, on a device of compute capability 9.x, head
dims 64 to 256 at their blocks: BN 64 forward at 256, and the backward's dK and dV in
launches of their own (attn_bwd_dkv_split_tma, 128-key blocks) beside dQ's (128, 32); a
form they do not take runs as impl="auto", which must pick the pointer kernels there),
and impl="auto" must pick the _tma ones on 9.x. Exits 77 (skipped)
without torch or a CUDA device.

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


HOPPER = torch.cuda.get_device_capability()[0] == 9


class Launched:
    """the kernels tile.ops launches (its modules behind a spy), to check which family ran"""

    def __init__(self):
        self.names = set()

    def __enter__(self):
        real, names = tile.ops._kernels, self.names

        class Spy:
            def __init__(self, mod):
                self.mod = mod

            def __getattr__(self, name):
                names.add(name)
                return getattr(self.mod, name)

        self.real = real
        tile.ops._kernels = lambda elem: tuple(Spy(m) for m in real(elem))
        return self

    def __exit__(self, *exc):
        tile.ops._kernels = self.real

    def tma(self):
        return {n for n in self.names if "_tma" in n}


class Forms(unittest.TestCase):
    impl = "pointer"

    def impl_for(self, D):
        """this class's impl, or "auto" where the _tma kernels do not take the head dim
        (auto must then run the pointer kernels)"""
        if self.impl == "tma" and tile.ops._tma_refusal(torch.zeros(1, device=DEV), D):
            return "auto"
        return self.impl

    def attention(self, *args, **kw):
        """tile.ops.attention with this class's impl, checking the kernels it ran"""
        impl = self.impl_for(args[0].shape[-1])
        with Launched() as seen:
            o = tile.ops.attention(*args, impl=impl, **kw)
            o.backward = self.spied_backward(o, seen, impl)
        return o

    def spied_backward(self, o, seen, impl):
        run = o.backward

        def backward(*a, **kw):
            with Launched() as bseen:
                run(*a, **kw)
            names = seen.names | bseen.names
            tma = {n for n in names if "_tma" in n}
            if impl == "tma":
                self.assertEqual(len(tma), 3, "impl='tma' launched %s" % sorted(names))
            else:
                self.assertFalse(tma, "impl=%r launched %s" % (impl, sorted(tma)))
        return backward

    def padded(self, B, HQ, HKV, L, D, causal=False, window=(-1, -1), dtype=torch.bfloat16, Lk=None):
        torch.manual_seed(0)
        Lk = Lk or L
        q, k, v = rand(B, HQ, L, D, dtype=dtype), rand(B, HKV, Lk, D, dtype=dtype), rand(B, HKV, Lk, D, dtype=dtype)
        do = rand(B, HQ, L, D, dtype=dtype)
        scale = 1 / math.sqrt(D)
        want = grads(lambda a, b, c: reference(a, b, c, causal, window, scale), [q, k, v], do.double())
        got = grads(lambda a, b, c: self.attention(a, b, c, causal=causal, window=window), [q, k, v], do)
        # the peer: SDPA in the same dtype, where it has the form (equal lengths, or no
        # mask; a window as an explicit mask)
        peer = [None] * 4
        if window == (-1, -1) and (not causal or L == Lk):
            g = HQ // HKV
            peer = grads(lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
                a, b.repeat_interleave(g, 1), c.repeat_interleave(g, 1), is_causal=causal), [q, k, v], do)
        for name, a, b, p in zip(("O", "dQ", "dK", "dV"), got, want, peer):
            Close.check(self, "%s (B%d HQ%d HKV%d L%d Lk%d D%d causal=%d window=%s %s impl=%s)"
                        % (name, B, HQ, HKV, L, Lk, D, causal, window, dtype, self.impl_for(D)), a, b, p)

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
        # 256: past one block of 128 keys, a window cutting blocks, Lq != Lk (packed)
        self.padded(2, 4, 4, 300, 256, causal=True)
        self.padded(1, 4, 2, 260, 256, window=(70, 20))
        self.padded(1, 4, 2, 100, 256, causal=True, Lk=230)

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
        got = grads(lambda a, b, c: self.attention(a, b, c, causal=causal, window=window, cu_seqlens_q=cu_q,
                                                   cu_seqlens_k=cu_k, max_seqlen=max(lq)), [q, k, v], do)
        for name, a, b in zip(("O", "dQ", "dK", "dV"), got, want):
            Close.check(self, "%s varlen %s/%s causal=%d window=%s impl=%s" % (name, lq, lk, causal, window,
                                                                                self.impl), a, b)

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
        o = tile.ops.attention(q, k, v, causal=True, window=(70, -1), impl=self.impl)
        cu = torch.arange(0, 4, device=DEV, dtype=torch.int32) * 160
        pack = lambda t: t.transpose(1, 2).reshape(-1, t.shape[1], t.shape[3])
        ov = tile.ops.attention(pack(q), pack(k), pack(v), causal=True, window=(70, -1), cu_seqlens_q=cu,
                                cu_seqlens_k=cu, max_seqlen=160, impl=self.impl)
        self.assertLessEqual((ov.float() - pack(o).float()).abs().max().item(), 1e-2)

    def test_impls_agree(self):
        """the pointer and _tma kernels on the same inputs: the same O and gradients up to
        a rounding of the 16-bit results (the f32 sums in another order)"""
        if self.impl != "tma":
            return
        torch.manual_seed(3)
        q, k, v, do = rand(2, 8, 333, 128), rand(2, 2, 333, 128), rand(2, 2, 333, 128), rand(2, 8, 333, 128)
        for kw in (dict(causal=True), dict(window=(100, 30))):
            a = grads(lambda x, y, z: tile.ops.attention(x, y, z, impl="tma", **kw), [q, k, v], do)
            b = grads(lambda x, y, z: tile.ops.attention(x, y, z, impl="pointer", **kw), [q, k, v], do)
            for name, x, y in zip(("O", "dQ", "dK", "dV"), a, b):
                err = (x.float() - y.float()).abs().max().item()
                self.assertLessEqual(err, 1.5e-2 * max(1.0, y.float().abs().max().item()), "%s %s: %.3g" % (name, kw, err))


@unittest.skipUnless(HOPPER, "the _tma kernels need compute capability 9.x")
class FormsTma(Forms):
    """every form through impl="tma" (head dim 256 too, at its own blocks)"""
    impl = "tma"


class Choice(unittest.TestCase):
    def test_auto(self):
        """auto runs the _tma kernels on 9.x (head dims 64, 96, 128, 256), the pointer ones
        on other devices and at head dims that are no multiple of 8"""
        for D, want in ((64, HOPPER), (96, HOPPER), (128, HOPPER), (256, HOPPER), (100, False)):
            q = rand(1, 2, 64, D).requires_grad_(True)
            with Launched() as seen:
                tile.ops.attention(q, q, q, causal=True).sum().backward()
            self.assertEqual(bool(seen.tma()), want, "D%d: %s" % (D, sorted(seen.names)))

    def test_forced_errors(self):
        q = rand(1, 2, 64, 100)
        with self.assertRaisesRegex(ValueError, "impl='tma' cannot run"):
            tile.ops.attention(q, q, q, impl="tma")
        if not HOPPER:
            q = rand(1, 2, 64, 128)
            with self.assertRaisesRegex(ValueError, "compute capability 9.x"):
                tile.ops.attention(q, q, q, impl="tma")


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

        sdpa = run(lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(2, 1), v.repeat_interleave(2, 1), is_causal=True))
        for impl in ("pointer", "tma") if HOPPER else ("pointer",):
            ours = run(lambda q, k, v: tile.ops.attention(q, k, v, causal=True, impl=impl))
            self.assertLess(sum(ours[-10:]) / 10, 0.85 * ours[0], "tile's loss did not fall (%s): %s"
                            % (impl, ours[::10]))
            self.assertLess(abs(sum(ours[-10:]) - sum(sdpa[-10:])) / 10, 0.1 * sdpa[0],
                            "tile (%s) %s against SDPA %s" % (impl, ours[::10], sdpa[::10]))


if __name__ == "__main__":
    unittest.main()
