"""The feed-forward block of LANGUAGE.md section 7 (examples/graphs/ffn.tile: GEMM,
bias, GELU, GEMM, bias) as a tile graph against PyTorch eager and torch.compile
(default and max-autotune), at a transformer's sizes: model 4096, hidden 16384, bf16,
T = 4096 tokens.

The graph is ffn.tile's with the sizes put in; PyTorch runs the same ops (gelu(a) =
0.5 a (1 + erf(a / sqrt 2)) on the bf16 sum). Rows and columns as bench/graph_block.py:
median time (triton.testing.do_bench), kernels per forward (torch.profiler), the fusion
plan's bytes through global memory (tile), compile time (tile: source to both kernels
ready on an empty cache; torch.compile: its first call), the error against eager.
--kernels adds each kernel's GPU time per call.

    python3 bench/graph_ffn.py [--tilec build-gpu/tilec] [--lib LIBTILERT] [--tokens 4096]
                               [--model 4096] [--hidden 16384] [--quick] [--kernels] [--out FILE]
"""
import argparse
import os
import re
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from graph_block import kernel_times, plan_bytes, pytorch_rows, report, tile_compile, tile_row  # noqa: E402


def ffn_source(D, F):
    with open(os.path.join(ROOT, "examples", "graphs", "ffn.tile")) as f:
        src = "\n".join(l for l in f.read().splitlines() if not l.startswith("//"))
    new = {"1024": str(D), "4096": str(F)}
    return re.sub(r"(?<![\w.])(1024|4096)(?![\w.])", lambda m: new[m.group(1)], src)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-gpu", "tilec"))
    ap.add_argument("--lib", default=None, help="libtileRT.so (default TILE_LIB, else build-gpu's)")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--model", type=int, default=4096)
    ap.add_argument("--hidden", type=int, default=16384)
    ap.add_argument("--quick", action="store_true", help="leave out torch.compile max-autotune (minutes of tuning)")
    ap.add_argument("--kernels", action="store_true", help="also each kernel's GPU time per call (torch.profiler)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    args.dropout = 0.0   # tile_row's check

    import torch
    import triton

    T, D, F = args.tokens, args.model, args.hidden
    torch.manual_seed(0)
    bf = torch.bfloat16
    params = dict(x=torch.randn(T, D, device="cuda").to(bf), w1=(torch.randn(D, F, device="cuda") * D ** -0.5).to(bf),
                  b1=(torch.randn(F, device="cuda") * 0.1).to(bf), w2=(torch.randn(F, D, device="cuda") * F ** -0.5).to(bf),
                  b2=(torch.randn(D, device="cuda") * 0.1).to(bf))

    def ffn(x, w1, b1, w2, b2):
        a = x @ w1 + b1
        h = 0.5 * a * (1.0 + torch.erf(a * 0.7071067811865476))
        return h @ w2 + b2

    rows, breakdown = [], []
    ref = ffn(**params)
    pytorch_rows(ffn, params, ref, args.quick, args.kernels, rows, breakdown)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ffn.tile")
        with open(path, "w") as f:
            f.write(ffn_source(D, F))
        typed, plan, secs = tile_compile(args.tilec, path, "ffn")
        nk = int(re.search(r"graph @ffn: (\d+) kernel", plan).group(1))
        moved = plan_bytes(typed, {"T": T})
        try:
            rows.append(tile_row(args, path, "ffn", params, None, ref, T, nk, moved, secs, triton,
                                 kernel_times if args.kernels else None, breakdown))
        except Exception as e:  # the PyTorch rows still print
            rows.append(("tile (failed: %s)" % str(e).splitlines()[0][:120], float("nan"), nk,
                         f"{moved / 1e9:.2f} GB", f"{secs:.2f} (plan)", "-"))

    flops = 2 * 2 * T * D * F
    report(f"FFN forward (GEMM, bias, GELU, GEMM, bias), T = {T}, model {D}, hidden {F}, bf16 "
           f"({torch.cuda.get_device_name()}; {flops / 1e12:.2f} TFLOP a forward)", rows, breakdown, args.out)


if __name__ == "__main__":
    sys.exit(main())
