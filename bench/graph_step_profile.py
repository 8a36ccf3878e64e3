"""The Llama block's training step (bench/graph_train_step.py's graph and inputs) through
tile (or, with --peer, torch.compile) at T = 1024 (--tokens): CUDA time per kernel under torch.profiler, the largest first, so the
next step of issue 42 is chosen from a measurement.

    python3 bench/graph_step_profile.py --lib build-gpu/runtime/libtileRT.so [--policy save-all] [--top 25]
        [--bwd-split-rows N]

--bwd-split-rows N puts @attention_bwd_split(rows = N) on the graph: attention's backward
splits its dK/dV step over the query heads while the KV rows (8 * T) are at most N (0:
never; default 16896, T up to 2048), so both regimes can be timed at one T.
"""
import argparse
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import graph_train_step as gts  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tokens", type=int, default=1024)
    ap.add_argument("--policy", default="save-all")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--bwd-split-rows", type=int, default=None,
                    help="@attention_bwd_split(rows = N) on the graph (0: the dK/dV step never split)")
    ap.add_argument("--peer", action="store_true",
                    help="profile torch.compile's step (loss and backward) on the same inputs instead of tile's")
    a = ap.parse_args()
    os.environ["TILE_LIB"] = os.path.abspath(a.lib)
    sys.path.insert(0, os.path.join(gts.ROOT, "python"))
    import torch
    from torch.profiler import ProfilerActivity, profile
    import tile
    T, V = a.tokens, 32000
    L = gts.LLAMA
    w, data = gts.make_inputs(torch, T, V, L["D"], L["H"], L["HKV"], L["E"], L["F"], "cuda")
    if a.peer:
        loss_fn = torch.compile(gts.make_step(torch, T, L["D"], L["H"], L["HKV"], L["E"]))
        w = {k: t.detach().requires_grad_(t.is_floating_point() and t.dim() > 0) for k, t in w.items()}

        def step():
            for t in w.values():
                t.grad = None
            loss_fn(**data, **w).backward()
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            step()
            torch.cuda.synchronize()
        a.policy = "torch.compile"
        return show(torch, prof, T, a)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "llama_block_train.tile")
        with open(path, "w") as f:
            src = gts.train_source(**L)
            if a.bwd_split_rows is not None:
                src = src.replace("graph %s(" % gts.GRAPH, "@attention_bwd_split(rows = %d)\ngraph %s(" % (a.bwd_split_rows, gts.GRAPH), 1)
            f.write(src)
        base = getattr(tile.load(path), gts.GRAPH)
        g = base.with_options(recompute=a.policy, sizes={"T": T, "V": V})
        args = dict(x=data["x"], cos=data["cos"], sin=data["sin"], lab=data["lab"], **{k: v.detach() for k, v in w.items()})
        for _ in range(2):
            g(**args)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            g(**args)
            torch.cuda.synchronize()
    return show(torch, prof, T, a)


def show(torch, prof, T, a):
    rows = {}
    for e in prof.events():
        if e.device_type.name != "CUDA":
            continue
        r = rows.setdefault(e.name, [0.0, 0])
        r[0] += e.device_time_total if hasattr(e, "device_time_total") else e.cuda_time_total
        r[1] += 1
    total = sum(r[0] for r in rows.values())
    print("T = %d, %s: %.2f ms of CUDA time in %d kernels (%s)" % (T, a.policy, total / 1e3, len(rows),
                                                                   torch.cuda.get_device_name()))
    for name, (us, n) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print("%8.3f ms %5.1f%%  x%-3d %s" % (us / 1e3, 100 * us / total, n, name[:90]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
