"""attention's backward in a graph on the GPU (issues 40 and 42): the graphs of
tests/lit/graph/attention-bwd.tile (loss = sum(attention(q, k, v) * t) or with a * a,
and grad to q, k, v: the forward flash kernel writing its logsumexp, the lowered
attention_bwd kernel) through libtileRT's tensor-graph API, against PyTorch's autograd
in f64 on the same masks: GQA 4/2 causal, MQA 4/1 with a window, Lq < Lk with Dv != D,
Lq > Lk (rows that see no key). Lengths off the blocks and on them; checked normwise
per result (max |tile - torch| within 1e-4 of max |torch|; f32 throughout). Exits 77
(skipped) without torch or a CUDA device.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 tests/gpu/test_graph_attention_bwd_gpu.py
"""
import os
import sys

from graph_gpu_util import ROOT, check_normwise, runtime, torch_or_skip

torch = torch_or_skip()

TOL = 1e-4
SRC = os.path.join(ROOT, "tests", "lit", "graph", "attention-bwd.tile")


def attention(q, k, v, causal, scale, wl=-1, wr=-1):
    """The graph op's meaning: KV head h // (Hq / Hkv), the causal diagonal bottom-right
    aligned (query i sees key j <= i + Lk - Lq), a window around it, a row that sees no
    key gives 0."""
    if q.dim() == 3 and k.shape[0] != q.shape[0]:
        g = q.shape[0] // k.shape[0]
        k, v = k.repeat_interleave(g, 0), v.repeat_interleave(g, 0)
    Lq, Lk = q.shape[-2], k.shape[-2]
    i = torch.arange(Lq, device="cuda")[:, None] + (Lk - Lq)
    j = torch.arange(Lk, device="cuda")[None, :]
    vis = torch.ones(Lq, Lk, dtype=torch.bool, device="cuda")
    if causal:
        vis &= j <= i
    if wl >= 0:
        vis &= j >= i - wl
    if wr >= 0:
        vis &= j <= i + wr
    s = torch.where(vis, q @ k.transpose(-1, -2) * scale, torch.full_like(vis, -1e30, dtype=q.dtype))
    p = torch.softmax(s, -1) * vis.to(q.dtype) * vis.any(-1, keepdim=True).to(q.dtype)
    return p @ v


def forms(T, S):
    return [
        ("gqa_causal", dict(q=(4, T, 16), k=(2, T, 16), v=(2, T, 16), t=(4, T, 16)), {"T": T},
         lambda a, t: (a * t).sum(), dict(causal=True, scale=0.25)),
        ("mqa_window", dict(q=(4, T, 8), k=(1, T, 8), v=(1, T, 8), t=(4, T, 8)), {"T": T},
         lambda a, t: (a * t).sum(), dict(causal=False, scale=0.5, wl=5, wr=2)),
        ("cross_causal", dict(q=(2, S, 8), k=(2, T, 8), v=(2, T, 12), t=(2, S, 12)), {"S": S, "T": T},
         lambda a, t: (a * a * t).sum(), dict(causal=True, scale=0.35)),
        ("rows_more", dict(q=(T, 8), k=(S, 8), v=(S, 8), t=(T, 8)), {"S": T, "T": S},
         lambda a, t: (a * t).sum(), dict(causal=True, scale=0.3)),
    ]


def main():
    rt = runtime("tile-graph-attn-bwd-")
    torch.manual_seed(0)
    bad = ran = 0
    for T, S in ((37, 19), (256, 128), (300, 77)):
        for name, shapes, sizes, loss_fn, kw in forms(T, S):
            label = "%s %s" % (name, " ".join("%s=%d" % kv for kv in sizes.items()))
            try:
                x = {n: torch.randn(*s, device="cuda", dtype=torch.float64) for n, s in shapes.items()}
                g = rt.graph(SRC, name)
                for n, t in x.items():
                    g.bind(n, t.float().contiguous())
                for n, v in sizes.items():
                    g.bind_size(n, v)
                outs = [torch.full((), float("nan"), device="cuda")] + \
                       [torch.full(shapes[n], float("nan"), device="cuda") for n in ("q", "k", "v")]
                for i, t in enumerate(outs):
                    g.bind_output(i, t)
                g.run()
                torch.cuda.synchronize()
                ref = {n: x[n].clone().requires_grad_(n != "t") for n in x}
                loss = loss_fn(attention(ref["q"], ref["k"], ref["v"], **kw), ref["t"])
                loss.backward()
                want = [loss.detach()] + [ref[n].grad for n in ("q", "k", "v")]
                check_normwise(outs, want, TOL, floor=1e-30)
                print("ok   %s (%d kernels)" % (label, g.num_kernels()))
            except Exception as e:  # every case runs; the failures are listed
                bad += 1
                print("FAIL %s: %s" % (label, str(e).splitlines()[0] if str(e) else type(e).__name__))
            ran += 1
    print("graph attention backward on the GPU: %d passed, %d failed" % (ran - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
