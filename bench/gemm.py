"""GEMM of tile (examples/matmul.tile: f16 inputs, f32 accumulation and output) against
cuBLAS (torch.matmul) in one run on one GPU, for several tile configs. Each tile
config is first checked against torch on odd sizes (masked edges) and at the benchmark
size, on fresh random inputs with a NaN-poisoned output. Times are medians of
triton.testing.do_bench; TFLOP/s counts 2*M*N*K.

    python3 bench/gemm.py [--lib build-gpu/runtime/libtileRT.so] [--out gemm.md] [--size 4096]
"""
import argparse
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilert  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATMUL = os.path.join(ROOT, "examples", "matmul.tile")
CONFIGS = [  # BM, BN, BK, warps, stages
    (64, 64, 32, 4, 2), (128, 128, 32, 4, 3), (128, 128, 32, 4, 4), (128, 128, 64, 4, 3), (128, 128, 32, 8, 3),
    (128, 128, 64, 8, 3), (128, 256, 32, 8, 3), (128, 256, 64, 8, 3), (256, 128, 32, 8, 3), (256, 128, 64, 8, 3),
    (64, 128, 32, 4, 4), (128, 64, 64, 4, 4),
]


def bench(fn):
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e-3


def tile_gemm(rt, cfg, a, b):
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[1]
    c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.float32)
    k = rt.kernel(MATMUL, "matmul", BM=BM, BN=BN, BK=BK, warps=warps, stages=stages)
    run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    return c, run


def check(rt, cfg, M, N, K):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c, run = tile_gemm(rt, cfg, a, b)
    run()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    err = ((c.double() - ref).norm() / ref.norm()).item()
    if not (err < 1e-5):  # f16 products are exact in f32; only the sums round
        raise AssertionError("config %s at %dx%dx%d: relative error %.3g" % (cfg, M, N, K, err))
    return err


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", "libtileRT.so"))
    ap.add_argument("--out")
    ap.add_argument("--size", type=int, default=4096)
    a_ = ap.parse_args()
    torch.manual_seed(0)
    rt = tilert.Runtime(a_.lib)
    S = a_.size
    flops = 2.0 * S * S * S
    a = torch.randn(S, S, device="cuda", dtype=torch.float16)
    b = torch.randn(S, S, device="cuda", dtype=torch.float16)
    t_cublas = bench(lambda: torch.matmul(a, b))
    lines = ["GPU: %s; %dx%dx%d, f16 inputs; medians of do_bench" % (torch.cuda.get_device_name(), S, S, S), "",
             "| implementation | config (BM, BN, BK, warps, stages) | check (rel. err) | time (ms) | TFLOP/s | vs cuBLAS |",
             "|---|---|---|---|---|---|",
             "| cuBLAS (torch.matmul, f16 out) | | | %.3f | %.1f | 1.00x |" % (t_cublas * 1e3, flops / t_cublas / 1e12)]
    for cfg in CONFIGS:
        try:
            e1 = check(rt, cfg, 1000, 520, 700)
            e2 = check(rt, cfg, S, S, S)
            _, run = tile_gemm(rt, cfg, a, b)
            t = bench(run)
            lines.append("| tile | %s | %.1e, %.1e | %.3f | %.1f | %.3fx |" % (
                cfg, e1, e2, t * 1e3, flops / t / 1e12, t_cublas / t))
        except Exception as e:
            lines.append("| tile | %s | FAILED: %s | | | |" % (cfg, str(e).splitlines()[0][:150]))
    text = "\n".join(lines)
    print(text)
    if a_.out:
        with open(a_.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
