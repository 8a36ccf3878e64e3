"""A Llama-style block's training step (forward, cross-entropy loss over the vocabulary,
backward to every weight) as a tile graph against PyTorch eager and torch.compile
(default and mode="max-autotune") of the same module, in one run, at Llama-7B sizes:
T = 4096 tokens, model D = 4096, 32 query heads and 8 KV heads of 128 (GQA), SwiGLU
width 11008, vocabulary 32000, bf16 (issue 42 item 7).

The graph is examples/graphs/llama_block_train.tile's `llama_block_train` with the sizes
put in; PyTorch runs the same function (rms_norm: x / sqrt(mean(x*x) + 1e-5) * g in f32;
RoPE "rotate half"; SDPA causal with GQA; silu(gate) * up; F.cross_entropy on f32
logits) and its autograd. For tile, one row per recomputation policy (save-all,
selective, checkpoint: TensorGraph.with_options(recompute=...)); for PyTorch eager,
torch.compile and (without --quick) torch.compile max-autotune, each a row of:
  - time: median of triton.testing.do_bench over the step (ms);
  - kernels: CUDA kernels launched per step (torch.profiler; tile: the plan's count,
    g.plan_stats(), which the profiler count follows);
  - peak memory: torch.cuda.max_memory_allocated during a step, weights and inputs
    included (GiB); for tile also the plan's buffers (plan_stats: every buffer of the
    forward and the backward, allocated by libtileRT outside PyTorch's allocator), so
    tile's peak is the two added;
  - compile: the first step's time (tile: the graph on an empty kernel cache, source to
    every kernel ready; torch.compile: its compile), in seconds;
  - error: the loss's and a few gradients' (g1, wq, wk, wo, wd, wlm) max abs error
    relative to max |eager|; tile's must be < 3e-2 (bf16) or the row fails.
--csv writes time and peak memory per row (a time-vs-memory plot).
Needs a CUDA GPU, torch and triton; --dry-run needs neither: it compiles the graph at
tiny sizes through tilec and the Python package (CPU), prints each policy's plan, and
what would run.

    python3 bench/graph_train_step.py --lib build-gpu/runtime/libtileRT.so --tilec build-gpu/tilec
        [--tokens 4096] [--vocab 32000] [--quick] [--out train_step.md] [--csv train_step.csv] [--dry-run]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

LLAMA = dict(D=4096, H=32, HKV=8, E=128, F=11008)
TINY = dict(D=32, H=4, HKV=2, E=8, F=48)    # what the example file is written at
POLICIES = ("save-all", "selective", "checkpoint")
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
GRAPH = "llama_block_train"
EXAMPLE = os.path.join(ROOT, "examples", "graphs", "llama_block_train.tile")


def train_source(D, H, HKV, E, F):
    """examples/graphs/llama_block_train.tile with other sizes (its comments dropped): the
    literals 32 (D), 16 (HKV*E), 48 (F), the heads' reshapes, the RoPE tables' E/2 and
    the attention's scale."""
    with open(EXAMPLE) as f:
        src = "\n".join(l for l in f.read().splitlines() if not l.lstrip().startswith("//"))
    src = src.replace("[T, 4, 8]", "[T, @H, @E]").replace("[T, 2, 8]", "[T, @HKV, @E]")
    src = src.replace("bf16[T, 4]", "bf16[T, @HALF]").replace("0.35355339059327373", repr(E ** -0.5))
    new = {"32": "@D", "16": "@KV", "48": "@F"}
    src = re.sub(r"(?<![\w.])(32|16|48)(?![\w.])", lambda m: new[m.group(1)], src)
    for k, v in (("@HKV", HKV), ("@HALF", E // 2), ("@H", H), ("@E", E), ("@D", D), ("@KV", HKV * E), ("@F", F)):
        src = src.replace(k, str(v))
    return src


def plan_summary(tilec, path, policy):
    """tilec --emit=fusion's summary line of the graph and its memory line."""
    out = subprocess.run([tilec, path, "--emit=fusion", "--recompute", policy], capture_output=True, text=True,
                         check=True).stdout
    block = out.split("graph @%s:" % GRAPH)[1].split("\ngraph @")[0]
    mem = re.search(r"^memory: .*$", block, re.M)
    return "graph @%s:%s" % (GRAPH, block.splitlines()[0]), mem.group(0) if mem else ""


def make_inputs(torch, T, V, D, H, HKV, E, F, dev):
    """Weights (requires_grad, bf16), x, the RoPE tables [T, E/2], the labels."""
    g = torch.Generator(device="cpu").manual_seed(0)
    bf = torch.bfloat16

    def rnd(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g) * scale + shift).to(bf).to(dev)

    w = dict(g1=rnd(D, scale=0.1, shift=1), wq=rnd(D, H * E, scale=D ** -0.5), wk=rnd(D, HKV * E, scale=D ** -0.5),
             wv=rnd(D, HKV * E, scale=D ** -0.5), wo=rnd(H * E, D, scale=(H * E) ** -0.5),
             g2=rnd(D, scale=0.1, shift=1), wg=rnd(D, F, scale=D ** -0.5), wu=rnd(D, F, scale=D ** -0.5),
             wd=rnd(F, D, scale=F ** -0.5), gf=rnd(D, scale=0.1, shift=1), wlm=rnd(D, V, scale=D ** -0.5))
    for t in w.values():
        t.requires_grad_(True)
    inv = 10000.0 ** (-torch.arange(0, E // 2, dtype=torch.float64) / (E // 2))
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    data = dict(x=rnd(T, D), cos=ang.cos().to(bf).to(dev), sin=ang.sin().to(bf).to(dev),
                lab=torch.randint(0, V, (T,), generator=g).to(dev))
    return w, data


def make_step(torch, T, D, H, HKV, E):
    """The block's loss in PyTorch, as the graph computes it."""
    F_ = torch.nn.functional
    bf = torch.bfloat16

    def rms(x, g):
        xf = x.float()
        return (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + 1e-5) * g.float()).to(bf)

    def rope(x, cos, sin):  # x [heads, T, E]; rotate half: pairs (i, i + E/2)
        x1, x2 = x[..., : E // 2], x[..., E // 2:]
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)

    def loss_fn(x, cos, sin, lab, g1, wq, wk, wv, wo, g2, wg, wu, wd, gf, wlm):
        h = rms(x, g1)
        q = rope((h @ wq).view(T, H, E).transpose(0, 1), cos, sin)
        k = rope((h @ wk).view(T, HKV, E).transpose(0, 1), cos, sin)
        v = (h @ wv).view(T, HKV, E).transpose(0, 1)
        k, v = k.repeat_interleave(H // HKV, 0), v.repeat_interleave(H // HKV, 0)  # query head h: KV head h / (H/HKV)
        a = F_.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True, scale=E ** -0.5)[0]
        x1 = x + a.transpose(0, 1).reshape(T, H * E) @ wo
        h2 = rms(x1, g2)
        y = x1 + (F_.silu(h2 @ wg) * (h2 @ wu)) @ wd
        return F_.cross_entropy((rms(y, gf) @ wlm).float(), lab)

    return loss_fn


WEIGHTS = ("g1", "wq", "wk", "wv", "wo", "g2", "wg", "wu", "wd", "gf", "wlm")
CHECKED = ("g1", "wq", "wk", "wo", "wd", "wlm")


def rel_err(got, ref):
    """The largest of the loss's and the checked gradients' max abs error relative to max |ref|."""
    worst = 0.0
    for name in ("loss",) + CHECKED:
        a, b = got[name].float(), ref[name].float()
        worst = max(worst, ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item())
    return worst


def cuda_kernels(torch, fn):
    """CUDA kernels (torch.profiler events) of one call of fn, after a warm call."""
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type.name == "CUDA")


def peak_bytes(torch, fn):
    """torch.cuda.max_memory_allocated during one call of fn."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated()


def pytorch_rows(torch, triton, loss_fn, w, data, quick, rows):
    """eager, torch.compile and (without quick) max-autotune: the step is the loss and its
    backward to every weight. Returns eager's loss and gradients (the reference)."""
    modes = (("PyTorch eager", None), ("torch.compile", "default"), ("torch.compile max-autotune", "max-autotune"))
    ref = None
    for name, mode in modes[:2] if quick else modes:
        torch._dynamo.reset()
        fn = loss_fn if mode is None else torch.compile(loss_fn, mode=mode)

        def step():
            for t in w.values():
                t.grad = None
            loss = fn(**data, **w)
            loss.backward()
            return loss

        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        got = dict(loss=loss.detach(), **{k: w[k].grad.detach().clone() for k in WEIGHTS})
        if ref is None:
            ref = got
        err = rel_err(got, ref)
        ms = triton.testing.do_bench(step)
        rows.append((name, ms, cuda_kernels(torch, step), peak_bytes(torch, step), None,
                     f"{first:.1f}" if mode else "-", f"{err:.2e}"))
        del fn
    for t in w.values():
        t.grad = None
    return ref


def tile_rows(torch, triton, path, w, data, ref, T, V, rows):
    """One row per recomputation policy, through the Python package on the CUDA tensors
    (PyTorch's stream)."""
    import tile
    m = tile.load(path)
    base = getattr(m, GRAPH)
    args = dict(x=data["x"], cos=data["cos"], sin=data["sin"], lab=data["lab"],
                **{k: v.detach() for k, v in w.items()})
    for policy in POLICIES:
        label = "tile, " + policy
        try:
            t0 = time.perf_counter()
            g = base.with_options(recompute=policy, sizes={"T": T, "V": V})   # the plan (CPU), then the GPU's kernels
            out = g(**args)
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
            got = dict(loss=out[0], **{k: out[1 + i] for i, k in enumerate(WEIGHTS)})
            err = rel_err(got, ref)
            if not err < 3e-2:
                raise RuntimeError("differs from eager: relative error %.2e" % err)
            del out, got
            ms = triton.testing.do_bench(lambda: g(**args))
            stats = g.plan_stats(device="cuda:%d" % torch.cuda.current_device())
            rows.append((label, ms, stats["kernels"], peak_bytes(torch, lambda: g(**args)), sum(stats["buffers"]),
                         f"{first:.2f}", f"{err:.2e}"))
        except Exception as e:  # the other rows still print
            rows.append(("%s (failed: %s)" % (label, str(e).splitlines()[0][:120] if str(e) else type(e).__name__),
                         float("nan"), 0, 0, None, "-", "-"))


def report(title, rows, out, csv):
    gib = 2.0 ** 30
    lines = [title, "", "| | time (ms) | kernels | peak memory (GiB) | compile (s) | max rel err vs eager |",
             "|---|---|---|---|---|---|"]
    for name, ms, nk, peak, plan, comp, err in rows:
        mem = "%.2f" % (peak / gib) if plan is None else "%.2f (allocator %.2f + plan %.2f)" % (
            (peak + plan) / gib, peak / gib, plan / gib)
        lines.append("| %s | %.2f | %d | %s | %s | %s |" % (name, ms, nk, mem, comp, err))
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
    if csv:
        with open(csv, "w") as f:
            f.write("row,time_ms,peak_bytes,kernels\n")
            for name, ms, nk, peak, plan, _, _ in rows:
                f.write('"%s",%.4f,%d,%d\n' % (name, ms, peak + (plan or 0), nk))


def dry_run(args, sizes):
    """No GPU: the graph at tiny sizes through tilec and the package (CPU), and what would run."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "llama_block_train.tile")
        for label, dims in (("tiny (the example's sizes)", TINY), ("the benchmark's", sizes)):
            src = train_source(**dims)
            with open(path, "w") as f:
                f.write(src)
            print("%s: %s, T = %d, V = %d" % (label, dims, args.tokens, args.vocab))
            for p in POLICIES:
                head, mem = plan_summary(args.tilec, path, p)
                print("  tilec --recompute %-10s %s\n  %s" % (p, head, " " * 24 + mem))
        with open(path, "w") as f:
            f.write(train_source(**TINY))
        try:
            import tile
        except ImportError as e:
            print("the Python package is not importable (%s): PYTHONPATH=python and TILE_LIB" % e)
            return 1
        base = getattr(tile.load(path), GRAPH)
        print("package: graph %s(%s) -> %d results" % (GRAPH, ", ".join(p.name for p in base.params),
                                                      len(base.outputs)))
        for p in POLICIES:
            g = base.with_options(recompute=p, sizes={"T": 8, "V": 37})
            print("  with_options(recompute=%r): %d kernels on the CPU" % (p, g.plan_stats("cpu")["kernels"]))
    try:
        import torch
        loss_fn = make_step(torch, 8, **{k: TINY[k] for k in ("D", "H", "HKV", "E")})
        w, data = make_inputs(torch, 8, 37, **TINY, dev="cpu")
        loss = loss_fn(**data, **w)
        loss.backward()
        print("PyTorch module at tiny sizes on the CPU: loss %.4f, |d wq| %.3e" % (loss.item(), w["wq"].grad.norm()))
    except ImportError:
        print("torch is not installed here: the PyTorch module was not built")
    rows = ["PyTorch eager", "torch.compile"] + ([] if args.quick else ["torch.compile max-autotune"])
    print("would run at T = %d, V = %d, %s, bf16: %s, then tile with each of %s; check loss and d%s "
          "against eager (< 3e-2 relative), then time each step" % (args.tokens, args.vocab, sizes, ", ".join(rows),
                                                                    ", ".join(POLICIES), ", d".join(CHECKED)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-gpu", "tilec"))
    ap.add_argument("--lib", default=None, help="libtileRT.so (default TILE_LIB, else the package's search)")
    ap.add_argument("--tokens", type=int, default=None, help="T (default 4096; 1024 with --quick)")
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--quick", action="store_true", help="T = 1024 and no torch.compile max-autotune")
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    ap.add_argument("--csv", default=None, help="time and peak memory per row, for a plot")
    ap.add_argument("--dry-run", action="store_true", help="no GPU: compile at tiny sizes, print what would run")
    args = ap.parse_args()
    if args.tokens is None:
        args.tokens = 1024 if args.quick else 4096
    if args.lib:
        os.environ["TILE_LIB"] = os.path.abspath(args.lib)
    os.environ.setdefault("TILE_CACHE_DIR", tempfile.mkdtemp(prefix="tile-train-step-"))  # cold compiles
    sys.path.insert(0, os.path.join(ROOT, "python"))
    if args.dry_run:
        return dry_run(args, LLAMA)

    import torch
    import triton
    T, V = args.tokens, args.vocab
    D, H, HKV, E, F = (LLAMA[k] for k in ("D", "H", "HKV", "E", "F"))
    w, data = make_inputs(torch, T, V, D, H, HKV, E, F, "cuda")
    rows = []
    ref = pytorch_rows(torch, triton, make_step(torch, T, D, H, HKV, E), w, data, args.quick, rows)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "llama_block_train.tile")
        with open(path, "w") as f:
            f.write(train_source(D, H, HKV, E, F))
        for p in POLICIES:
            head, mem = plan_summary(args.tilec, path, p)
            print("%s: %s; %s" % (p, head, mem))
        tile_rows(torch, triton, path, w, data, ref, T, V, rows)
    report(f"Llama block training step (forward, loss, backward), T = {T}, D = {D}, {H} heads / {HKV} KV heads "
           f"of {E}, SwiGLU {F}, V = {V}, bf16 ({torch.cuda.get_device_name()})", rows, args.out, args.csv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
