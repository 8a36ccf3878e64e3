"""What one launch costs on the host from Python: tile's `k(...)` (argument checks,
packing, trt_launch) against Triton's `kernel[grid](...)` and torch.add(out=) for the
same vector add, in the same process, as medians of batches after warm-up. The GPU
work is tiny (4096 floats), so the figures are the host's per-call cost (the launches
queue; the stream is synchronized around each batch).

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 bench/python_launch.py [--out FILE]
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python"))
import tile  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


def per_call_us(fn, batch=2000, batches=7):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(batch):
            fn()
        runs.append((time.perf_counter() - t) / batch * 1e6)
        torch.cuda.synchronize()
    return statistics.median(runs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    args = ap.parse_args()
    n = 4096
    a = torch.randn(n, device="cuda")
    c = torch.empty_like(a)
    k = tile.load(ROOT / "examples" / "vector_add.tile").vector_add
    run = k.prepare(c, a, a, n)
    rows = [
        ("tile k(c, a, a, n) (grid from grid(...), every argument checked)", per_call_us(lambda: k(c, a, a, n))),
        ("tile k.prepare(...)() (packed once)", per_call_us(run)),
        ("triton add_kernel[grid](...)", per_call_us(lambda: add_kernel[(triton.cdiv(n, 1024),)](a, a, c, n, BLOCK=1024))),
        ("torch.add(a, a, out=c)", per_call_us(lambda: torch.add(a, a, out=c))),
    ]
    lines = ["Host cost of one launch from Python (us, median of 7 batches of 2000), %s, torch %s, triton %s" %
             (torch.cuda.get_device_name(), torch.__version__, triton.__version__), "",
             "| call | us per launch |", "|---|---|"] + ["| %s | %.1f |" % r for r in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
