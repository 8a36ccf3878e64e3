"""attention's backward in a graph on the GPU (issues 40 and 42): the graphs of
tests/lit/graph/attention-bwd.tile (loss = sum(attention(q, k, v) * t) or with a * a,
and grad to q, k, v: the forward flash kernel writing its logsumexp, the lowered
attention_bwd kernel) through libtileRT's tensor-graph API, against PyTorch's autograd
in f64 on the same masks: GQA 4/2 causal, MQA 4/1 with a window, Lq < Lk with Dv != D,
Lq > Lk (rows that see no key). Lengths off the blocks and on them; checked normwise
per result (max |tile - torch| within 1e-4 of max |torch|; f32 throughout). Then the
bf16 graphs of tests/lit/graph/attention-bwd-bf16.tile (the kernel's 16-bit path: dots
on bf16 operands, P, dS and dO rounded to bf16; the same masks, d 128 in Llama's layout)
against autograd in f64 on the same bf16 inputs, within 3e-2 of max |torch| (bf16
results). Exits 77 (skipped) without torch or a CUDA device.

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


SRC_BF16 = os.path.join(ROOT, "tests", "lit", "graph", "attention-bwd-bf16.tile")
TOL_BF16 = 3e-2


def forms_bf16(T, S):
    """attention-bwd-bf16.tile's graphs: loss = 32 sum(attention(q - 0.5, k - 0.5,
    v - 0.5) * (t - 0.5)), results dq, dk, dv / 8 in bf16."""
    c = lambda a, t: (a * (t - 0.5)).sum() * 32
    return [
        ("gqa_causal", dict(q=(4, T, 16), k=(2, T, 16), v=(2, T, 16), t=(4, T, 16)), {"T": T}, c, lambda v: v,
         dict(causal=True, scale=0.25)),
        ("mqa_window", dict(q=(4, T, 8), k=(1, T, 8), v=(1, T, 8), t=(4, T, 8)), {"T": T}, c, lambda v: v,
         dict(causal=False, scale=0.5, wl=5, wr=2)),
        ("cross_causal", dict(q=(2, S, 8), k=(2, T, 8), v=(2, T, 12), t=(2, S, 12)), {"S": S, "T": T}, c,
         lambda v: v, dict(causal=True, scale=0.35)),
        ("rows_more", dict(q=(T, 8), k=(S, 8), v=(S, 8), t=(T, 8)), {"S": T, "T": S}, c, lambda v: v,
         dict(causal=True, scale=0.3)),
        ("llama_attn", dict(q=(4, T, 128), k=(2, T, 128), vp=(T, 2, 128), t=(T, 4, 128)), {"T": T},
         lambda a, t: c(a.transpose(0, 1), t), lambda v: v.transpose(0, 1), dict(causal=True, scale=128 ** -0.5)),
    ]


def run_bf16(rt, T, S):
    bad = ran = 0
    for name, shapes, sizes, loss_fn, vview, kw in forms_bf16(T, S):
        label = "bf16 %s %s" % (name, " ".join("%s=%d" % kv for kv in sizes.items()))
        try:
            x = {n: torch.rand(*s, device="cuda").to(torch.bfloat16 if n != "t" else torch.float32)
                 for n, s in shapes.items()}
            g = rt.graph(SRC_BF16, name)
            for n, t in x.items():
                g.bind(n, t.contiguous())
            for n, v in sizes.items():
                g.bind_size(n, v)
            ins = [n for n in shapes if n != "t"]
            outs = [torch.full(shapes[n], float("nan"), device="cuda", dtype=torch.bfloat16) for n in ins]
            for i, t in enumerate(outs):
                g.bind_output(i, t)
            g.run()
            torch.cuda.synchronize()
            ref = {n: x[n].double().requires_grad_(n != "t") for n in x}
            a = attention(ref[ins[0]] - 0.5, ref[ins[1]] - 0.5, vview(ref[ins[2]] - 0.5), **kw)
            loss_fn(a, ref["t"]).backward()
            want = [ref[ins[0]].grad, ref[ins[1]].grad, ref[ins[2]].grad / 8]
            check_normwise(outs, want, TOL_BF16, floor=1e-30)
            print("ok   %s (%d kernels)" % (label, g.num_kernels()))
        except Exception as e:  # every case runs; the failures are listed
            bad += 1
            print("FAIL %s: %s" % (label, str(e).splitlines()[0] if str(e) else type(e).__name__))
        ran += 1
    return ran, bad


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
        r, b = run_bf16(rt, T, S)
        ran, bad = ran + r, bad + b
    print("graph attention backward on the GPU: %d passed, %d failed" % (ran - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
