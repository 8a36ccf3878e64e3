"""The graphs of examples/graphs/ on the GPU through libtileRT's tensor-graph API,
against PyTorch computing the same function in f64: the FFN (bf16), the transformer
block written out (additive causal mask, dropout 0) and with the attention op,
residual + LayerNorm, Conv + BatchNorm + ReLU, an AdamW step. Each at a T (or N) that
leaves partial blocks and at one that fills them; checked normwise per result (max
|tile - torch| within TOL of max |torch|: f32 1e-4, bf16 3e-2). Exits 77 (skipped)
without torch or a CUDA device.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 tests/gpu/test_graph_examples_gpu.py
"""
import math
import os
import sys

from graph_gpu_util import ROOT, check_normwise, runtime, torch_or_skip

torch = torch_or_skip()

TOL = {torch.float32: 1e-4, torch.bfloat16: 3e-2}
G = os.path.join(ROOT, "examples", "graphs")


def rnd(*shape, dtype=torch.float32, scale=1.0, shift=0.0):
    return (torch.randn(*shape, device="cuda", dtype=torch.float64) * scale + shift).to(dtype)


def rms(x, g):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g


def block_ref(p, causal_op):
    x, T = p["x"], p["x"].shape[0]
    h = rms(x, p["g1"])
    q, k, v = ((h @ p[w]).view(T, 4, 16).transpose(0, 1) for w in ("wq", "wk", "wv"))
    s = q @ k.transpose(-1, -2) * 0.25
    s = s + (torch.full((T, T), float("-inf"), device="cuda", dtype=torch.float64).triu(1) if causal_op else p["mask"])
    a = (torch.softmax(s, -1) @ v).transpose(0, 1).reshape(T, 64)
    x1 = x + a @ p["wo"]
    h2 = rms(x1, p["g2"])
    up = h2 @ p["wg"]
    return [x1 + ((up * torch.sigmoid(up)) * (h2 @ p["wu"])) @ p["wd"]]


def cases(T, N):
    bf = torch.bfloat16
    ffn = dict(x=rnd(T, 1024, dtype=bf), w1=rnd(1024, 4096, dtype=bf, scale=1 / 32), b1=rnd(4096, dtype=bf, scale=0.1),
               w2=rnd(4096, 1024, dtype=bf, scale=1 / 64), b2=rnd(1024, dtype=bf, scale=0.1))

    def ffn_ref(p):
        d = {k: v.double() for k, v in p.items()}
        a = d["x"] @ d["w1"] + d["b1"]
        return [(0.5 * a * (1 + torch.erf(a / math.sqrt(2)))) @ d["w2"] + d["b2"]]

    blk = dict(x=rnd(T, 64), g1=rnd(64, scale=0.1, shift=1), wq=rnd(64, 64, scale=0.125), wk=rnd(64, 64, scale=0.125),
               wv=rnd(64, 64, scale=0.125), wo=rnd(64, 64, scale=0.125), g2=rnd(64, scale=0.1, shift=1),
               wg=rnd(64, 128, scale=0.125), wu=rnd(64, 128, scale=0.125), wd=rnd(128, 64, scale=0.09))
    mask = torch.full((T, T), float("-inf"), device="cuda").triu(1)
    blk_masked = dict(blk, mask=mask)
    rl = dict(x=rnd(T, 256), y=rnd(T, 256), w=rnd(256, shift=1), b=rnd(256))

    def rl_ref(p):
        d = {k: v.double() for k, v in p.items()}
        r = d["x"] + d["y"]
        return [r, torch.nn.functional.layer_norm(r, (256,), d["w"], d["b"], 1e-5)]

    conv = dict(x=rnd(N, 3, 16, 16), w=rnd(8, 3, 3, 3, scale=0.3), mean=rnd(8, scale=0.1),
                variance=rnd(8, scale=0.1, shift=1).abs(), gamma=rnd(8, shift=1), beta=rnd(8, scale=0.1))

    def conv_ref(p):
        d = {k: v.double() for k, v in p.items()}
        scale = d["gamma"] * torch.rsqrt(d["variance"] + 1e-5)
        y = torch.nn.functional.conv2d(d["x"], d["w"], stride=1, padding=1)
        return [torch.relu(y * scale[:, None, None] + (d["beta"] - d["mean"] * scale)[:, None, None])]

    n = N * 1000 + 3
    adam = dict(p=rnd(n), g=rnd(n), m=rnd(n, scale=0.1), v=rnd(n, scale=0.1).abs())
    hyper = dict(lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, wd=0.01, bc1=0.1, bc2=0.05)

    def adam_ref(p):
        d = {k: v.double() for k, v in p.items()}
        m2 = hyper["beta1"] * d["m"] + (1 - hyper["beta1"]) * d["g"]
        v2 = hyper["beta2"] * d["v"] + (1 - hyper["beta2"]) * d["g"] * d["g"]
        upd = (m2 / hyper["bc1"]) / (torch.sqrt(v2 / hyper["bc2"]) + hyper["eps"]) + hyper["wd"] * d["p"]
        return [d["p"] - hyper["lr"] * upd, m2, v2]

    dbl = lambda p: {k: v.double() for k, v in p.items()}
    return [
        ("ffn.tile", "ffn", ffn, {}, {"T": T}, [(T, 1024)], bf, lambda: ffn_ref(ffn)),
        ("block.tile", "block", blk_masked, {"pdrop": 0.0, "seed": ("i64", 1)}, {"T": T}, [(T, 64)], torch.float32,
         lambda: block_ref(dbl(blk_masked), False)),
        ("block.tile", "block_op", blk, {}, {"T": T}, [(T, 64)], torch.float32, lambda: block_ref(dbl(blk), True)),
        ("residual_layernorm.tile", "residual_layernorm", rl, {}, {"T": T}, [(T, 256)] * 2, torch.float32,
         lambda: rl_ref(rl)),
        ("conv_bn_relu.tile", "conv_bn_relu", conv, {}, {"N": N}, [(N, 8, 16, 16)], torch.float32, lambda: conv_ref(conv)),
        ("adamw.tile", "adamw", adam, hyper, {"N": n}, [(n,)] * 3, torch.float32, lambda: adam_ref(adam)),
    ]


def main():
    rt = runtime("tile-graph-examples-")
    torch.manual_seed(0)
    bad = ran = 0
    for T, N in ((37, 3), (256, 4)):
        for path, name, tensors, scalars, sizes, outs, dtype, ref in cases(T, N):
            label = "%s %s %s" % (path, name, " ".join("%s=%d" % kv for kv in sizes.items()))
            try:
                g = rt.graph(os.path.join(G, path), name)
                for k, v in tensors.items():
                    g.bind(k, v)
                for k, v in scalars.items():
                    if isinstance(v, tuple):
                        g.bind(k, v[1], kind=v[0])
                    else:
                        g.bind(k, v)
                for k, v in sizes.items():
                    g.bind_size(k, v)
                got = [torch.full(s, float("nan"), device="cuda", dtype=dtype) for s in outs]
                for i, t in enumerate(got):
                    g.bind_output(i, t)
                g.run()
                torch.cuda.synchronize()
                want = ref()
                check_normwise(got, want, TOL[dtype])
                print("ok   %s (%d kernels)" % (label, g.num_kernels()))
            except Exception as e:  # every case runs; the failures are listed
                bad += 1
                print("FAIL %s: %s" % (label, str(e).splitlines()[0] if str(e) else type(e).__name__))
            ran += 1
    print("graph examples on the GPU: %d passed, %d failed" % (ran - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
