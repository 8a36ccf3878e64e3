"""Paged decoding attention (examples/paged_attn_decode.tile) against PyTorch on the H200.

One new query token per sequence attends to that sequence's keys and values in a paged
cache (pages of PAGE tokens, a block table per sequence, pages shuffled over the cache).
Peers, in the same run:
  - "SDPA, gathered": what PyTorch offers for a paged cache: gather each sequence's
    pages into a padded [B, HKV, Lmax, D] tensor (k_cache[block_table]), then
    scaled_dot_product_attention with a key mask for the lengths (GQA by
    enable_gqa); the gather is part of its time.
  - "SDPA, contiguous": the same attention on K and V already contiguous and padded
    (no paging at all): the lower bound a paged kernel competes with.
Checks first (NaN-poisoned outputs): tile and both peers against an f32 reference on the
gathered data. The figure of merit is bandwidth: the bytes of K and V the sequences
hold (plus q and o) over the time, as a fraction of the H200's 4.8 TB/s.

    python3 bench/paged_attention.py [--lib build-gpu/runtime/libtileRT.so] [--out paged.md] [--quick]
                                     [--only MHA|GQA]
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilert  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "examples", "paged_attn_decode.tile")
HBM = 4.8e12   # H200 SXM HBM3e bytes/s
PAGE = 16
D = 128
# (label, batch, query heads, group, max length, lengths: "full" or "mixed")
CASES = [("MHA 7B", 32, 32, 1, 4096, "full"), ("MHA 7B", 32, 32, 1, 4096, "mixed"),
         ("GQA 8B", 32, 32, 4, 8192, "full"), ("GQA 8B", 64, 32, 4, 2048, "mixed")]
CONFIGS = [(128, 2), (256, 2), (128, 4), (256, 4)]   # BN, warps
TOL = 1e-2
QUICK = False


def bench(fn):
    warmup, rep = (10, 50) if QUICK else (25, 200)
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median") * 1e-3


def rel_err(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm()).item()


def make_case(B, H, group, Lmax, lens_kind, gen):
    HKV = H // group
    if lens_kind == "full":
        lens = torch.full((B,), Lmax, dtype=torch.int32)
    else:
        lens = torch.randint(1, Lmax + 1, (B,), generator=gen, dtype=torch.int32)
    max_pages = (Lmax + PAGE - 1) // PAGE
    need = [(int(n) + PAGE - 1) // PAGE for n in lens]
    npages = sum(need) + 8
    perm = torch.randperm(npages, generator=gen)
    table = torch.zeros((B, max_pages), dtype=torch.int32)
    at = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[at:at + n]
        at += n
    k_cache = torch.randn((npages, PAGE, HKV, D), dtype=torch.bfloat16, device="cuda")
    v_cache = torch.randn((npages, PAGE, HKV, D), dtype=torch.bfloat16, device="cuda")
    q = torch.randn((B, H, D), dtype=torch.bfloat16, device="cuda")
    return q, k_cache, v_cache, table.cuda(), lens.cuda(), max_pages


def gather(k_cache, table, Lmax):
    """[B, HKV, Lmax, D] from the pages (positions past a sequence's length hold junk)."""
    B = table.shape[0]
    g = k_cache[table.long()]                      # [B, max_pages, PAGE, HKV, D]
    g = g.reshape(B, -1, g.shape[3], D)[:, :Lmax]  # [B, L, HKV, D]
    return g.transpose(1, 2)


def sdpa(q, k, v, lens, scale, group):
    Lmax = k.shape[2]
    mask = (torch.arange(Lmax, device="cuda")[None, :] < lens[:, None].long())[:, None, None, :]
    return F.scaled_dot_product_attention(q[:, :, None, :], k, v, attn_mask=mask, scale=scale,
                                          enable_gqa=group > 1)[:, :, 0, :]


def reference(q, k, v, lens, scale, group):
    kf, vf = k.float(), v.float()
    if group > 1:
        kf, vf = kf.repeat_interleave(group, 1), vf.repeat_interleave(group, 1)
    s = torch.einsum("bhd,bhld->bhl", q.float(), kf) * scale
    Lmax = k.shape[2]
    s = s.masked_fill(~(torch.arange(Lmax, device="cuda")[None, None, :] < lens[:, None, None].long()), float("-inf"))
    return torch.einsum("bhl,bhld->bhd", torch.softmax(s, -1), vf)


def run_case(rt, label, B, H, group, Lmax, lens_kind, gen):
    q, kc, vc, table, lens, max_pages = make_case(B, H, group, Lmax, lens_kind, gen)
    HKV = H // group
    scale = 1 / math.sqrt(D)
    tokens = int(lens.sum())
    nbytes = 2 * tokens * HKV * D * 2 + 2 * B * H * D * 2
    kg, vg = gather(kc, table, Lmax), gather(vc, table, Lmax)
    ref = reference(q, kg, vg, lens, scale, group)
    name = "%s B=%d H=%d/%d L<=%d %s" % (label, B, H, HKV, Lmax, lens_kind)
    rows = []

    def row(impl, cfg, err, t, t_ref):
        rows.append("| %s | %s | %s | %.1e | %.3f | %.0f | %.1f%% | %s |" % (
            name, impl, cfg, err, t * 1e6, nbytes / t / 1e9, 100 * nbytes / t / HBM,
            "" if t_ref is None else "%.2fx" % (t_ref / t)))

    t_gather = None
    try:
        def sdpa_gathered():
            return sdpa(q, gather(kc, table, Lmax), gather(vc, table, Lmax), lens, scale, group)
        e = rel_err(sdpa_gathered(), ref)
        t_gather = bench(sdpa_gathered)
        kgc, vgc = kg.contiguous(), vg.contiguous()
        e2 = rel_err(sdpa(q, kgc, vgc, lens, scale, group), ref)
        t_contig = bench(lambda: sdpa(q, kgc, vgc, lens, scale, group))
        row("SDPA, gathered", "", e, t_gather, t_gather)
        row("SDPA, contiguous", "", e2, t_contig, t_gather)
        del kgc, vgc
    except Exception as ex:  # noqa: BLE001
        rows.append("| %s | SDPA | | FAILED: %s | | | | |" % (name, str(ex).splitlines()[0][:120]))
    for BN, warps in (CONFIGS[:1] if QUICK else CONFIGS):
        kname, impl, cfg = "paged_attn_decode", "tile", "BN=%d, %d warps" % (BN, warps)
        try:
            o = torch.full((B, H, D), float("nan"), dtype=torch.bfloat16, device="cuda")
            k = rt.kernel(SRC, kname, H=H, GROUP=group, D=D, PAGE=PAGE, BN=BN, warps=warps)
            run = k.prepare("ptr ptr ptr ptr ptr ptr i32 i32 f32", o, q, kc, vc, table, lens, B, max_pages, scale)
            run()
            torch.cuda.synchronize()
            e = rel_err(o, ref)
            if not e < TOL:
                raise AssertionError("error %.3g against the f32 reference" % e)
            row(impl, cfg, e, bench(run), t_gather)
        except Exception as ex:  # noqa: BLE001
            rows.append("| %s | %s | %s | FAILED: %s | | | | |" % (name, impl, cfg, str(ex).splitlines()[0][:120]))
    return rows


def main():
    global QUICK
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", "libtileRT.so"))
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", help="the cases whose label starts with this (MHA, GQA)")
    a = ap.parse_args()
    QUICK = a.quick
    rt = tilert.Runtime(a.lib)
    gen = torch.Generator().manual_seed(0)
    lines = ["GPU: %s; paged decoding attention, bf16, D=%d, pages of %d tokens; medians of do_bench; "
             "bandwidth = K and V bytes of the sequences (+ q, o) / time, against %.1f TB/s"
             % (torch.cuda.get_device_name(), D, PAGE, HBM / 1e12), "",
             "| case | implementation | config | rel. err (f32 ref) | time (us) | GB/s | % of HBM | vs SDPA gathered |",
             "|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    for c in CASES[:2] if QUICK else CASES:
        if a.only and not c[0].startswith(a.only):
            continue
        part = run_case(rt, *c, gen)
        print("\n".join(part), flush=True)
        lines += part
    if a.out:
        with open(a.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
