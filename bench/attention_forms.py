"""Attention's training forms (issue 40's targets) through tile.ops.attention, the op a
PyTorch user calls, against PyTorch's own kernels in one run on one GPU, forward and
backward, bf16:

  d64, d256     B 4, H 32 (16 at d256), L 4096, causal and not: against SDPA's cuDNN
                backend and its default choice;
  gqa           B 4, 32 query heads over 8 KV heads, L 4096, d128, causal and not:
                against SDPA with enable_gqa (its default choice) and cuDNN on K and V
                repeated to 32 heads (what a model without enable_gqa does);
  varlen        16 sequences of lengths drawn from 128 to 4096 (seeded), about 32k tokens,
                H 32, d128, causal: tile's packed kernels (cu_seqlens) against SDPA over
                the batch padded to its longest sequence (causal and right-padded, so
                the valid rows are exact without a mask) and PyTorch's jagged nested
                tensors (torch.nested, layout=torch.jagged) where its SDPA runs.

Every case is checked first: tile's output and gradients against SDPA's on the same
inputs (relative error of the norm below 1e-2 for O, 2e-2 for the gradients; for varlen
each sequence against SDPA on that sequence alone). A failed check makes the row an
error and the run goes on. Times: medians of triton.testing.do_bench; the backward is
timed alone (torch.autograd.grad over a retained forward). FLOPs: forward 4*B*H*L*L*D
(causal half), backward 2.5x that; for varlen the sum over the sequences. "% of peak"
is of 989 TFLOP/s (dense bf16, H100/H200 SXM).

    PYTHONPATH=python TILE_LIB=build-gpu/runtime/libtileRT.so python3 bench/attention_forms.py
        [--forms d64,d256,gqa,varlen] [--quick] [--out forms.md]
        [--d256-bwd 'BM,BN,warps,stages[,KEY=V...]/.../...;...']

--d256-bwd adds to the d256 case a tile row per config given, with the _tma backward's
blocks at D = 256 (tile.ops._tma_bwd_cfg) replaced: dK's / dV's (attn_bwd_dkv_split_tma,
PART 0 and 1) / dQ's (attn_bwd_dq_tma), each checked as the default row is; KEY=V adds a
launch key or const (overlap=1: the dots issued together, passes/rotate.c).
"""
import contextlib
import argparse
import os
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import tile  # noqa: E402
import tile.ops  # noqa: E402

PEAK = 989e12
TOL_O, TOL_GRAD = 1e-2, 2e-2
QUICK = False


def bench(fn):
    return triton.testing.do_bench(fn, warmup=10 if QUICK else 25, rep=30 if QUICK else 100, return_mode="median")


def rel(x, ref):
    return ((x.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()


def leaf(*shape, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16, generator=g).requires_grad_(True)


def fwd_bwd_times(fn, args, do):
    """(forward ms, backward ms) of o = fn(*args): the backward alone over a retained graph."""
    with torch.no_grad():
        t_f = bench(lambda: fn(*args))
    o = fn(*args)
    t_b = bench(lambda: torch.autograd.grad(o, args, do, retain_graph=True))
    return t_f, t_b


def sdpa_fn(backend, causal, scale, gqa=False):
    def f(q, k, v):
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=gqa)
    return f


def repeat_fn(inner, group):
    def f(q, k, v):
        return inner(q, k.repeat_interleave(group, 1), v.repeat_interleave(group, 1))
    return f


D256_BWD = []   # --d256-bwd: ((dK, dV, dQ) blocks as dicts), each a tile row of the d256 case


@contextlib.contextmanager
def bwd_blocks(blocks):
    """tile.ops' _tma backward at D = 256 on blocks (dK, dV, dQ), None: as it is"""
    real = tile.ops._tma_bwd_cfg
    if blocks is not None:
        tile.ops._tma_bwd_cfg = lambda d: real(d) if d <= 128 else ((blocks[0], blocks[1]), blocks[2])
    try:
        yield
    finally:
        tile.ops._tma_bwd_cfg = real


def blocks_name(blocks):
    return "tile bwd %s" % " / ".join(",".join(str(v) if k in ("BM", "BN", "warps", "stages") else "%s=%d" % (k, v)
                                                for k, v in b.items()) for b in blocks)


def dense_case(name, B, H, HKV, L, D, causal, rows):
    """One (B, H, L, D) case: tile against SDPA's backends (and at D = 256 a tile row per
    --d256-bwd config)."""
    scale = D ** -0.5
    q, k, v = leaf(B, H, L, D, seed=1), leaf(B, HKV, L, D, seed=2), leaf(B, HKV, L, D, seed=3)
    do = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16, generator=torch.Generator("cuda").manual_seed(4))
    flops = 4.0 * B * H * L * L * D * (0.5 if causal else 1.0)
    group = H // HKV
    peers = []
    if HKV == H:
        peers = [("SDPA cuDNN", sdpa_fn(SDPBackend.CUDNN_ATTENTION, causal, scale)),
                 ("SDPA default", sdpa_fn(None, causal, scale))]
    else:
        peers = [("SDPA enable_gqa", sdpa_fn(None, causal, scale, gqa=True)),
                 ("SDPA cuDNN, K/V repeated", repeat_fn(sdpa_fn(SDPBackend.CUDNN_ATTENTION, causal, scale), group))]
    tile_fn = lambda q, k, v: tile.ops.attention(q, k, v, causal=causal, scale=scale)
    variants = {blocks_name(b): b for b in (D256_BWD if D == 256 else [])}
    label = "%s B%d H%d/%d L%d d%d%s" % (name, B, H, HKV, L, D, " causal" if causal else "")
    ref = None
    results = []
    for pname, fn in [("tile", tile_fn)] + [(n, tile_fn) for n in variants] + peers:
        try:
            with bwd_blocks(variants.get(pname)):
                o = fn(q, k, v)
                grads = torch.autograd.grad(o, (q, k, v), do)
            if ref is None and not pname.startswith("tile"):
                ref = (o.detach(), grads)
            results.append((pname, fn, o.detach(), grads, None))
        except Exception as e:  # a peer that does not support the form is a row saying so
            results.append((pname, fn, None, None, str(e).splitlines()[0][:100] if str(e) else type(e).__name__))
    times = {}
    for pname, fn, o, grads, err in results:
        if err is None and pname.startswith("tile"):
            if ref is None:
                err = "no peer ran: unchecked"
            else:
                eo = rel(o, ref[0])
                eg = max(rel(a, b) for a, b in zip(grads, ref[1]))
                if not (eo < TOL_O and eg < TOL_GRAD):
                    err = "differs from %s: O %.2e, grads %.2e" % (results[1 + len(variants)][0], eo, eg)
        if err is None:
            try:
                with bwd_blocks(variants.get(pname)):
                    times[pname] = fwd_bwd_times(fn, (q, k, v), do)
            except Exception as e:
                err = str(e).splitlines()[0][:100]
        if err is not None:
            times[pname] = None
            rows.append((label, pname, None, None, flops, err))
    for pname, t in times.items():
        if t is not None:
            rows.append((label, pname, t[0], t[1], flops, None))


def varlen_lengths(n, lo, hi, total, seed):
    g = torch.Generator().manual_seed(seed)
    x = lo + (hi - lo) * torch.rand(n, generator=g, dtype=torch.float64)
    x = (x * total / x.sum()).round().clamp(lo, hi).long()
    x[-1] = max(lo, min(hi, total - int(x[:-1].sum())))
    return [int(t) for t in x]


def varlen_case(rows, n=16, lo=128, hi=4096, total=32768, H=32, D=128, causal=True):
    lens = varlen_lengths(n, lo, hi, total, seed=7)
    T, Lmax = sum(lens), max(lens)
    scale = D ** -0.5
    cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), device="cuda", dtype=torch.int32)
    q, k, v = leaf(T, H, D, seed=1), leaf(T, H, D, seed=2), leaf(T, H, D, seed=3)
    do = torch.randn(T, H, D, device="cuda", dtype=torch.bfloat16, generator=torch.Generator("cuda").manual_seed(4))
    flops = sum(4.0 * H * L * L * D * (0.5 if causal else 1.0) for L in lens)
    label = "varlen %d seqs %d-%d (T %d, max %d) H%d d%d%s" % (n, min(lens), max(lens), T, Lmax, H, D,
                                                               " causal" if causal else "")

    def tile_fn(q, k, v):
        return tile.ops.attention(q, k, v, causal=causal, scale=scale, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                  max_seqlen=Lmax)

    def padded(t):   # (T, H, D) -> (n, H, Lmax, D), right-padded with zeros
        out = t.new_zeros(n, Lmax, H, D)
        for i, L in enumerate(lens):
            out[i, :L] = t[cu[i]:cu[i] + L]
        return out.transpose(1, 2)

    def pad_fn(q, k, v):   # the padding copies are part of what a padded batch costs: not timed here
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)

    # the check: each sequence against SDPA on that sequence alone
    err = None
    try:
        o = tile_fn(q, k, v)
        gq, gk, gv = torch.autograd.grad(o, (q, k, v), do)
        worst_o = worst_g = 0.0
        for i, L in enumerate(lens[:4]):
            s = slice(int(cu[i]), int(cu[i]) + L)
            qs, ks, vs = (t.detach()[s].transpose(0, 1)[None].requires_grad_(True) for t in (q, k, v))
            r = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=scale)
            rg = torch.autograd.grad(r, (qs, ks, vs), do[s].transpose(0, 1)[None])
            worst_o = max(worst_o, rel(o[s].transpose(0, 1)[None], r))
            worst_g = max(worst_g, max(rel(a[s].transpose(0, 1)[None], b) for a, b in zip((gq, gk, gv), rg)))
        if not (worst_o < TOL_O and worst_g < TOL_GRAD):
            err = "differs from SDPA per sequence: O %.2e, grads %.2e" % (worst_o, worst_g)
    except Exception as e:
        err = str(e).splitlines()[0][:100]
    if err:
        rows.append((label, "tile varlen", None, None, flops, err))
    else:
        t = fwd_bwd_times(tile_fn, (q, k, v), do)
        rows.append((label, "tile varlen", t[0], t[1], flops, None))
    # SDPA over the padded batch (its default backend), timed on padded leaves
    qp, kp, vp = (padded(t.detach()).contiguous().requires_grad_(True) for t in (q, k, v))
    dop = padded(do).contiguous()
    t = fwd_bwd_times(pad_fn, (qp, kp, vp), dop)
    rows.append((label, "SDPA padded to %d" % Lmax, t[0], t[1], flops, None))
    # jagged nested tensors
    try:
        offs = cu.long()

        def njt_fn(q, k, v):
            nq, nk, nv = (torch.nested.nested_tensor_from_jagged(t, offs).transpose(1, 2) for t in (q, k, v))
            return F.scaled_dot_product_attention(nq, nk, nv, is_causal=causal, scale=scale).transpose(1, 2).values()
        o = njt_fn(q, k, v)
        torch.autograd.grad(o, (q, k, v), do)
        t = fwd_bwd_times(njt_fn, (q, k, v), do)
        rows.append((label, "SDPA jagged (torch.nested)", t[0], t[1], flops, None))
    except Exception as e:
        rows.append((label, "SDPA jagged (torch.nested)", None, None, flops, str(e).splitlines()[0][:100]))


def report(rows, out):
    lines = ["GPU: %s; torch %s; medians of do_bench; %% of 989 TFLOP/s" % (torch.cuda.get_device_name(),
                                                                          torch.__version__), "",
             "| case | impl | fwd ms | fwd TFLOP/s (% peak) | tile/this fwd | bwd ms | bwd TFLOP/s (% peak) | "
             "tile/this bwd |", "|---|---|---|---|---|---|---|---|"]
    tile_t = {}
    for case, impl, tf, tb, flops, err in rows:
        if impl.startswith("tile") and err is None and case not in tile_t:   # the first tile row
            tile_t[case] = (tf, tb)
    for case, impl, tf, tb, flops, err in rows:
        if err is not None:
            lines.append("| %s | %s | error: %s | | | | | |" % (case, impl, err))
            continue
        tt = tile_t.get(case)
        rf = "%.3fx" % (tf / tt[0]) if tt and not impl.startswith("tile") else "-"
        rb = "%.3fx" % (tb / tt[1]) if tt and not impl.startswith("tile") else "-"
        lines.append("| %s | %s | %.3f | %.1f (%.1f%%) | %s | %.3f | %.1f (%.1f%%) | %s |" % (
            case, impl, tf, flops / tf / 1e9, 100 * flops / tf / 1e9 / (PEAK / 1e12), rf, tb,
            2.5 * flops / tb / 1e9, 100 * 2.5 * flops / tb / 1e9 / (PEAK / 1e12), rb))
    text = "\n".join(lines)
    print(text, flush=True)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")


def main():
    global QUICK
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--forms", default="d64,d256,gqa,varlen")
    ap.add_argument("--quick", action="store_true", help="shorter timing, causal only for the dense forms")
    ap.add_argument("--out")
    ap.add_argument("--d256-bwd", default="", help="extra d256 backward blocks: dK/dV/dQ as BM,BN,warps,stages; ...")
    args = ap.parse_args()
    QUICK = args.quick
    for cfg in filter(None, args.d256_bwd.split(";")):
        try:
            blocks = []
            for half in cfg.split("/"):
                items = half.split(",")
                b = dict(zip(("BM", "BN", "warps", "stages"), (int(x) for x in items[:4])))
                b.update((k, int(x)) for k, x in (kv.split("=") for kv in items[4:]))
                assert len(b) >= 4
                blocks.append(b)
            assert len(blocks) == 3
        except (ValueError, AssertionError):
            ap.error("--d256-bwd: dK/dV/dQ blocks as BM,BN,warps,stages[,KEY=V...] each, not %r" % cfg)
        D256_BWD.append(tuple(blocks))
    forms = args.forms.split(",")
    rows = []
    modes = (True,) if QUICK else (False, True)
    for causal in modes:
        if "d64" in forms:
            dense_case("d64", 4, 32, 32, 4096, 64, causal, rows)
        if "d256" in forms:
            dense_case("d256", 4, 16, 16, 4096, 256, causal, rows)
        if "gqa" in forms:
            dense_case("gqa", 4, 32, 8, 4096, 128, causal, rows)
        torch.cuda.empty_cache()
    if "varlen" in forms:
        varlen_case(rows)
    report(rows, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
