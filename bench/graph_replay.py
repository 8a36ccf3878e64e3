"""reduce-overhead from Python: 100 small kernels launched one by one, replayed as a
tile.CudaGraph (also with every launch's arguments updated first), the same tile
kernels captured by PyTorch's torch.cuda.CUDAGraph, and PyTorch's own small op
(x.add_(1)) eagerly and as a torch.cuda.CUDAGraph, in one run on one GPU. Each figure
is microseconds per kernel: the wall time of a batch of 100 (launched and synchronized)
over 100, the median of --batches batches after warm-up. Every variant is checked: each
kernel adds 1 to a 32-element tensor, so after R batches it holds 100 R.
(bench/graph_replay.c measures the C API's side of the same.)

    python3 bench/graph_replay.py [--out graph_replay_py.md] [--batches 51]
"""
import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))
import tile  # noqa: E402

N_KERNELS = 100
SRC = """
kernel bump(x: *f32) grid(1) {
    let i = arange(0, 32);
    store(x + i, load(x + i) + 1.0);
}
"""


def per_kernel_us(step, batches, check):
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    check(5)
    times = []
    for _ in range(batches):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6 / N_KERNELS)
    check(5 + batches)
    return statistics.median(times), min(times), max(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--batches", type=int, default=51)
    args = ap.parse_args()
    k = tile.loads(SRC, name="bump.tile").bump
    stream = torch.cuda.Stream()
    rows = []

    def measure(name, make):
        x = torch.zeros(32, device="cuda")
        with torch.cuda.stream(stream):
            step = make(x)

            def check(batches):
                torch.cuda.synchronize()
                want = float(N_KERNELS * batches)
                got = x.cpu()
                if not bool((got == want).all()):
                    raise AssertionError("%s: x holds %s after %d batches, want %s" % (name, got[:4].tolist(), batches, want))
            try:
                rows.append((name,) + per_kernel_us(step, args.batches, check))
            except Exception as e:  # a failing variant is a row, the run goes on
                rows.append((name, "FAILED: %s" % str(e).splitlines()[0][:120]))

    def tile_one_by_one(x):
        run = k.prepare(x)
        k(x)                                   # compiled before the clock starts
        x.zero_()

        def step():
            for _ in range(N_KERNELS):
                run()
        return step

    def captured(x):
        k(x)                                    # compiled before the capture
        x.zero_()
        g = tile.CudaGraph()
        with g.capture():
            for _ in range(N_KERNELS):
                k(x)
        return g

    def tile_graph(x):
        return captured(x).replay

    def tile_graph_updated(x):
        g = captured(x)

        def step():
            for i in range(N_KERNELS):
                g.update(i, x)
            g.replay()
        return step

    def tile_in_torch_graph(x):
        k(x)                                    # compiled and loaded outside the capture
        torch.cuda.synchronize()
        x.zero_()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(N_KERNELS):
                k(x)
        torch.cuda.synchronize()
        x.zero_()                               # the capture ran nothing
        return g.replay

    def torch_eager(x):
        def step():
            for _ in range(N_KERNELS):
                x.add_(1.0)
        return step

    def torch_graph(x):
        x.add_(1.0)
        torch.cuda.synchronize()
        x.zero_()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=stream):
            for _ in range(N_KERNELS):
                x.add_(1.0)
        torch.cuda.synchronize()
        x.zero_()
        return g.replay

    measure("tile k.prepare(x)() one by one", tile_one_by_one)
    measure("tile.CudaGraph replay", tile_graph)
    measure("tile.CudaGraph update(i, x) of each launch + replay", tile_graph_updated)
    measure("tile kernels in a torch.cuda.CUDAGraph, replay", tile_in_torch_graph)
    measure("torch x.add_(1) one by one", torch_eager)
    measure("torch.cuda.CUDAGraph of x.add_(1), replay", torch_graph)

    lines = ["GPU: %s, torch %s; %d kernels per batch, %d batches (us per kernel: wall, synchronized)" % (
        torch.cuda.get_device_name(), torch.__version__, N_KERNELS, args.batches), "",
        "| launches | median | min | max |", "|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s |" % (r[0], r[1]) if len(r) == 2 else "| %s | %.3f | %.3f | %.3f |" % r)
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
