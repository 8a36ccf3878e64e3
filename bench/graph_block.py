"""A pre-norm transformer block, forward, as a tile graph against PyTorch eager and
torch.compile (default and max-autotune), at Llama-7B sizes: model 4096, 32 heads of
128, SwiGLU hidden 11008, bf16, T = 4096 tokens (one sequence), causal attention.

The graph is examples/graphs/block.tile's `block_op` (and, with --dropout P, its
`block`, attention written out with an additive causal mask and dropout of the
probabilities) with the sizes put in; PyTorch runs the same ops as that file defines
them, op by op (rms_norm: x / sqrt(mean(x*x) + 1e-5) * g; attention: softmax(q k^T *
scale + mask) v; silu(a) = a * sigmoid(a)), so that both compute one function.

For each of tile, eager, torch.compile and torch.compile(mode="max-autotune") a row:
  - time: median of triton.testing.do_bench over the forward (ms);
  - kernels: CUDA kernels launched per forward (torch.profiler, every row alike);
  - bytes: bytes moved to and from global memory per forward. For tile the fusion
    plan's own count (tilec --emit=fusion: each kernel's reads and writes, sizes
    evaluated at T); for PyTorch the sum of the profiler's kernels' DRAM bytes when
    --ncu is given (Nsight Compute's dram__bytes.sum, slow), else "-";
  - compile: tile's compile time (tilec, the whole graph to kernels) against the
    first call of the torch.compile'd module (its compile), in seconds.
A check comes first: tile's output against eager's in f32 (max abs error relative to
max |eager|, must be < 2e-2 in bf16), on the benchmark's inputs.

tile's row runs the graph through libtileRT's tensor-graph API (bench/tilert.py
Graph) on PyTorch's stream: its compile is the first run on an empty kernel cache
(source to every kernel ready), its kernels those the plan launches (views launch
nothing). Needs a CUDA GPU, torch and triton.

    python3 bench/graph_block.py [--tilec build-gpu/tilec] [--lib LIBTILERT] [--tokens 4096]
                                 [--dropout 0.0] [--ncu] [--quick] [--kernels] [--tune] [--tile-only]
                                 [--out graph_block.md]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

DIMS = dict(D=4096, H=32, E=128, F=11008)
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def block_source(D, H, E, F):
    """examples/graphs/block.tile at other sizes: its two graphs with the model size D,
    H heads of E, the MLP hidden size F, in bf16."""
    with open(os.path.join(ROOT, "examples", "graphs", "block.tile")) as f:
        src = f.read()
    src = "\n".join(l for l in src.splitlines() if not l.startswith("//"))
    new = {"f32": "bf16", "64": str(D), "128": str(F), "0.25": repr(E ** -0.5)}
    src = src.replace("[T, 4, 16]", "[T, @H, @E]")
    src = re.sub(r"(?<![\w.])(f32|64|128|0\.25)(?![\w.])", lambda m: new[m.group(1)], src)
    return src.replace("@H", str(H)).replace("@E", str(E))


def plan_bytes(plan_text, sizes):
    """Bytes the fusion plan moves: every kernel's reads and writes, each value's type
    evaluated at `sizes` (the plan prints the types on its buffer and output lines; the
    parameters' types come from the graph IR)."""
    types = {}
    for name, ty in re.findall(r"(%[\w.]+) ?: (\w+\[[^\]]*\]|\w+)", plan_text):
        types[name] = ty
    width = {"bf16": 2, "f16": 2, "f32": 4, "f64": 8, "i64": 8, "i32": 4, "i1": 1}

    def nbytes(ty):
        m = re.match(r"(\w+)(?:\[(.*)\])?$", ty)
        n = 1
        for d in (m.group(2) or "").split(","):
            if d.strip():
                n *= eval(d.strip(), {}, dict(sizes))  # sizes like 2*T+1
        return n * width[m.group(1)]

    total = 0
    for line in plan_text.splitlines():
        m = re.match(r"kernel k\d+ \w+: .*; reads ([^;]*); writes (.*)$", line)
        if not m:
            continue
        for v in [x.strip() for x in (m.group(1) + "," + m.group(2)).split(",") if x.strip()]:
            if v in types:
                total += nbytes(types[v])
    return total


def tile_compile(tilec, path, graph):
    """The graph IR and the plan (printing types of every value), and the time to get
    the plan; the GPU compile joins when `tilec run --device gpu` exists."""
    t0 = time.perf_counter()
    ir = subprocess.run([tilec, path, "--emit=graph-ir"], capture_output=True, text=True, check=True).stdout
    plan = subprocess.run([tilec, path, "--emit=fusion"], capture_output=True, text=True, check=True).stdout
    secs = time.perf_counter() - t0
    head = re.search(r"graph @%s\((.*)\) \{" % graph, ir).group(1)
    block = plan.split("graph @%s:" % graph)[1].split("\ngraph @")[0]
    return head + "\n" + block, plan, secs


def tile_row(args, path, graph, params, mask, ref, T, nk, moved, plan_secs, triton, kernel_times=None, breakdown=None,
             tune=False):
    """The graph through libtileRT's tensor-graph API on PyTorch's stream: compile
    (source to every kernel ready, on an empty kernel cache: the first run) and time.
    tune: in max-autotune mode, so the first run tunes every kernel over its @autotune
    space (its compile column is then the tuning's time; the winners are in the log)."""
    import torch
    sys.path.insert(0, HERE)
    import tilert
    lib = args.lib or os.environ.get("TILE_LIB") or os.path.join(ROOT, "build-gpu", "runtime", "libtileRT.so")
    if kernel_times is not None:   # where the compile time goes, kernel by kernel, on stderr
        os.environ["TILE_LOG_RECOMPILES"] = "1"
    rt = tilert.Runtime(lib, cache_dir=tempfile.mkdtemp(prefix="tile-graph-block-"),
                        mode=tilert.MODE_MAX_AUTOTUNE if tune else 0)
    label = "tile, max-autotune" if tune else "tile"
    out = torch.empty_like(params["x"])
    t0 = time.perf_counter()
    g = rt.graph(path, graph)
    for name, v in params.items():
        g.bind(name, v)
    if graph == "block":
        g.bind("mask", mask)
        g.bind("pdrop", args.dropout)
        g.bind("seed", 1, kind="i64")
    g.bind_size("T", T)
    g.bind_output(0, out)
    g.run()
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - t0
    err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    if args.dropout == 0 and not err < 2e-2:
        raise RuntimeError("tile's block differs from eager's: relative error %.2e" % err)
    ms = triton.testing.do_bench(g.run)
    if kernel_times is not None:
        breakdown.append((label, kernel_times(g.run)))
    return (label, ms, g.num_kernels(), f"{moved / 1e9:.2f} GB", f"{compile_s:.2f} (plan {plan_secs:.2f})", f"{err:.2e}")


def cuda_events(fn, reps):
    """The CUDA kernels (torch.profiler events) of reps calls of fn, after one warm call."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return [e for e in prof.events() if e.device_type.name == "CUDA"]


def kernel_times(fn, reps=5):
    """(kernel name, launches per call, GPU ms per call), the slowest first."""
    acc = {}
    for e in cuda_events(fn, reps):
        n, t = acc.get(e.name, (0, 0.0))
        acc[e.name] = (n + 1, t + e.device_time_total / 1e3)
    return sorted(((k[:70], n // reps, t / reps) for k, (n, t) in acc.items()), key=lambda r: -r[2])


def pytorch_rows(fn_eager, params, ref, quick, kernels, rows, breakdown):
    """Rows for eager, torch.compile and (without quick) its max-autotune: median time,
    kernels per call, the first call's time (the compile), the error against ref."""
    import torch
    import triton
    modes = (("eager", None), ("torch.compile", "default"), ("torch.compile max-autotune", "max-autotune"))
    for name, mode in modes[:2] if quick else modes:
        torch._dynamo.reset()
        fn = fn_eager if mode is None else torch.compile(fn_eager, mode=mode)
        t0 = time.perf_counter()
        out = fn(**params)
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        err = ((out.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
        ms = triton.testing.do_bench(lambda: fn(**params))
        rows.append((name, ms, len(cuda_events(lambda: fn(**params), 1)), "-", f"{first:.1f}" if mode else "-",
                     f"{err:.2e}"))
        if kernels and mode:
            breakdown.append((name, kernel_times(lambda: fn(**params))))


def report(title, rows, breakdown, out):
    """The table (and each breakdown), printed and written to out."""
    lines = [title, "", "| | time (ms) | kernels | bytes moved | compile (s) | max err vs eager |", "|---|---|---|---|---|---|"]
    lines += ["| %s | %.3f | %d | %s | %s | %s |" % r for r in rows]
    for name, ks in breakdown:
        lines += ["", f"{name}: GPU time per call by kernel", "", "| kernel | launches | ms |", "|---|---|---|"]
        lines += ["| %s | %d | %.3f |" % k for k in ks]
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-gpu", "tilec"))
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--dropout", type=float, default=0.0)
    ap.add_argument("--ncu", action="store_true")
    ap.add_argument("--quick", action="store_true", help="leave out torch.compile max-autotune (minutes of tuning)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--lib", default=None, help="libtileRT.so (default TILE_LIB, else build-gpu's)")
    ap.add_argument("--kernels", action="store_true", help="also each kernel's GPU time per call (torch.profiler)")
    ap.add_argument("--tune", action="store_true", help="also a tile row in max-autotune mode (tunes every kernel)")
    ap.add_argument("--tile-only", action="store_true",
                    help="only tile's row (its compile and time; eager still gives the reference)")
    args = ap.parse_args()

    import torch
    import triton

    T, D, H, E, F = args.tokens, DIMS["D"], DIMS["H"], DIMS["E"], DIMS["F"]
    graph = "block" if args.dropout > 0 else "block_op"
    dev = "cuda"
    torch.manual_seed(0)
    bf = torch.bfloat16

    def rnd(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, device=dev) * scale + shift).to(bf)

    params = dict(x=rnd(T, D), g1=rnd(D, scale=0.1, shift=1), wq=rnd(D, D, scale=D ** -0.5),
                  wk=rnd(D, D, scale=D ** -0.5), wv=rnd(D, D, scale=D ** -0.5), wo=rnd(D, D, scale=D ** -0.5),
                  g2=rnd(D, scale=0.1, shift=1), wg=rnd(D, F, scale=D ** -0.5), wu=rnd(D, F, scale=D ** -0.5),
                  wd=rnd(F, D, scale=F ** -0.5))
    mask = torch.full((T, T), float("-inf"), device=dev).triu(1).to(bf)

    def rms(x, g):  # examples/graphs/block.tile: rms_norm(t, w, eps)
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5) * g.float()).to(bf)

    def block(x, g1, wq, wk, wv, wo, g2, wg, wu, wd):
        h = rms(x, g1)
        q, k, v = ((h @ w).view(T, H, E).transpose(0, 1) for w in (wq, wk, wv))
        s = (q @ k.transpose(-1, -2)).float() * E ** -0.5 + mask.float()
        p = torch.softmax(s, -1).to(bf)
        if args.dropout > 0:
            p = torch.nn.functional.dropout(p, args.dropout)
        a = (p @ v).transpose(0, 1).reshape(T, D)
        x1 = x + a @ wo
        h2 = rms(x1, g2)
        up = h2 @ wg
        return x1 + ((up * torch.sigmoid(up)) * (h2 @ wu)) @ wd

    breakdown = []
    rows = []
    ref = block(**params)
    if not args.tile_only:
        pytorch_rows(block, params, ref, args.quick, args.kernels, rows, breakdown)

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "block.tile")
        with open(path, "w") as f:
            f.write(block_source(D, H, E, F))
        typed, plan, secs = tile_compile(args.tilec, path, graph)
        nk = int(re.search(r"graph @%s: (\d+) kernel" % graph, plan).group(1))
        moved = plan_bytes(typed, {"T": T})
        try:
            rows.append(tile_row(args, path, graph, params, mask, ref, T, nk, moved, secs, triton,
                                 kernel_times if args.kernels else None, breakdown))
            if args.tune:
                rows.append(tile_row(args, path, graph, params, mask, ref, T, nk, moved, secs, triton,
                                     kernel_times if args.kernels else None, breakdown, tune=True))
        except Exception as e:  # the PyTorch rows still print
            rows.append(("tile (failed: %s)" % str(e).splitlines()[0][:120], float("nan"), nk,
                         f"{moved / 1e9:.2f} GB", f"{secs:.2f} (plan)", "-"))

    report(f"Transformer block forward, T = {T}, D = {D}, {H} heads of {E}, SwiGLU {F}, bf16, "
           f"dropout {args.dropout} ({torch.cuda.get_device_name()})", rows, breakdown, args.out)


if __name__ == "__main__":
    sys.exit(main())
