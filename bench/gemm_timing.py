"""Times tile's default bf16 GEMM (4096^3) and cuBLAS three ways, for a gap that ncu
does not show (do_bench 0.90x, ncu 179 against 176 us at a48d243): do_bench with its L2
flush, 100 launches back to back between two events, and the host time of a launch.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 bench/gemm_timing.py
"""
import os
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm  # noqa: E402
import tilert  # noqa: E402


def main():
    rt = tilert.Runtime(os.environ.get("TILE_LIB", "libtileRT.so"))
    S = 4096
    a = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
    _, run = gemm.tile_gemm_bf16(rt, (128, 256, 64, 8, 4, 1, 1), a, b)
    flops = 2 * S ** 3
    for name, fn in (("tile", run), ("cublas", lambda: a @ b)) * 2:
        fn()
        torch.cuda.synchronize()
        t_db = triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median") * 1e-3
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        for _ in range(100):
            fn()
        e1.record()
        torch.cuda.synchronize()
        t_loop = e0.elapsed_time(e1) * 1e-3 / 100
        h0 = time.perf_counter()
        for _ in range(200):
            fn()
        h1 = time.perf_counter()
        torch.cuda.synchronize()
        print("%-7s do_bench %.1f us (%.0f TFLOP/s)  back to back %.1f us (%.0f TFLOP/s)  host %.1f us a call" % (
            name, t_db * 1e6, flops / t_db / 1e12, t_loop * 1e6, flops / t_loop / 1e12, (h1 - h0) / 200 * 1e6))


if __name__ == "__main__":
    main()
