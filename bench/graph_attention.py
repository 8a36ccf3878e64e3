"""The attention kernel a tile graph lowers to (passes/graph_lower.c lower_flash)
against the hand-written examples/flash_attn_fwd.tile and SDPA, causal, at the sizes of
bench/graph_block.py's block (T = 4096 tokens, 32 heads of 128, bf16), over tile configs.

The graph is graph_block.py's `block_op` (its attention op reads q, k, v as views of
the [T, 4096] projections: heads 128 apart, rows 4096); `tilec --emit=graph-kernels`
writes its kernels, and the flash_attention one runs alone on those [T, 4096] tensors
with each (BM, BN, warps, stages). The example reads the same memory through its
strides. SDPA gets contiguous [32, T, 128] copies (its flash kernel; on the strided
views it falls back to a slower one). Rows: median ms (triton.testing.do_bench),
TFLOP/s (4 T^2 E H / 2 for causal) and the max abs error against SDPA.

    python3 bench/graph_attention.py [--tilec build-gpu/tilec] [--lib LIBTILERT]
                                     [--configs "128,64,8,2;64,64,4,2;128,64,8,3,1"] [--out FILE]

A config's fifth field, when given, is the graph kernel's `ws` (its Q, K and V are
block loads of the [T, 4096] rows, K and V TMA rings that a producer warpgroup fills);
without it the schedule chooses (ws and overlap: `chosen = [ws, overlap]`, as for
attn_fwd_tma, whose defaults the kernel's @autotune takes: 128 x 128, 8 warps, 2
stages; the first config). A sixth
is its `overlap` (the softmax under the tensor cores' P V, passes/rotate.c: with ws and
8 warps the warpgroups take turns), the launch key of attn_fwd_tma's default.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_CONFIGS = "128,128,8,2;128,64,8,3,1;128,64,8,2,1;128,64,8,2,0;128,64,8,3,0;128,128,8,2,1;64,64,4,3,1;128,32,8,2,0"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-gpu", "tilec"))
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", os.path.join(ROOT, "build-gpu", "runtime", "libtileRT.so")))
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--configs", default=DEFAULT_CONFIGS, help="BM,BN,warps,stages;...")
    ap.add_argument("--out")
    args = ap.parse_args()

    import torch
    import triton
    sys.path.insert(0, HERE)
    import tilert
    from graph_block import DIMS, block_source

    T, H, E = args.tokens, DIMS["H"], DIMS["E"]
    tmp = tempfile.mkdtemp(prefix="tile-graph-attention-")
    src, kernels = os.path.join(tmp, "block.tile"), os.path.join(tmp, "kernels.tile")
    with open(src, "w") as f:
        f.write(block_source(DIMS["D"], H, E, DIMS["F"]))
    subprocess.run([args.tilec, src, "--emit=graph-kernels", "-o", kernels], check=True)
    text = open(kernels).read()
    name = re.search(r"// kernel k\d+ flash_attention\n@autotune[^\n]*\nkernel (block_op_k\d+)\(", text).group(1)
    default = "BM %s, BN %s" % re.search(r"kernel %s\(.*?const BM: i32 = (\d+), const BN: i32 = (\d+)\)" % name, text).groups()

    rt = tilert.Runtime(args.lib, cache_dir=tempfile.mkdtemp(prefix="tile-graph-attention-cache-"))
    q, k, v = (torch.randn(T, H * E, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    # [1, H, T, E]: SDPA picks its flash backend only for 4-D inputs (3-D falls back to
    # the math path, 20x slower)
    heads = [t.view(T, H, E).transpose(0, 1).contiguous()[None] for t in (q, k, v)]
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
    ref = sdpa()[0].transpose(0, 1).reshape(T, H * E).float()
    flops = 4 * T * T * E * H / 2
    rows = [("SDPA (contiguous heads)", "", triton.testing.do_bench(sdpa), 0.0)]

    def timed(label, cfg, kern, sig, *vals):
        o = vals[0]
        run = kern.prepare(sig, *vals)
        run()
        torch.cuda.synchronize()
        err = (o.float() - ref).abs().max().item()
        rows.append((label, cfg, triton.testing.do_bench(run), err))

    example = os.path.join(ROOT, "examples", "flash_attn_fwd.tile")
    for c in args.configs.split(";"):
        BM, BN, w, s, *ws = (int(x) for x in c.split(","))
        cfg = "(%d, %d, %d, %d%s%s)" % (BM, BN, w, s, ", ws %d" % ws[0] if ws else "",
                                        ", overlap %d" % ws[1] if len(ws) > 1 else "")
        wsk = {"ws": ws[0]} if ws else {}
        if len(ws) > 1:
            wsk["overlap"] = ws[1]
        for label, run in (
                ("tile graph kernel", lambda: timed("tile graph kernel", cfg,
                                                    rt.kernel(kernels, name, BM=BM, BN=BN, warps=w, stages=s, **wsk),
                                                    "ptr ptr ptr ptr i64", torch.empty_like(q), q, k, v, T)),
                ("flash_attn_fwd.tile", lambda: timed("flash_attn_fwd.tile", cfg,
                                                      rt.kernel(example, "attn_fwd", BM=BM, BN=BN, D=E, CAUSAL=1,
                                                                warps=w, stages=s),
                                                      "ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", torch.empty_like(q),
                                                      torch.empty(H, T, device="cuda"), q, k, v, H, T, E ** -0.5, E,
                                                      H * E))):
            try:
                run()
            except Exception as e:  # a config that does not compile or launch: its row says so
                rows.append((label + " (failed: %s)" % str(e).splitlines()[0][:80], cfg, float("nan"), float("nan")))

    lines = ["Causal attention forward, T = %d, %d heads of %d, bf16 (%s); the graph's kernel %s, its default %s"
             % (T, H, E, torch.cuda.get_device_name(), name, default), "",
             "| implementation | config (BM, BN, warps, stages[, ws[, overlap]]) | time (ms) | TFLOP/s | max abs err vs SDPA |",
             "|---|---|---|---|---|"]
    lines += ["| %s | %s | %.3f | %.1f | %.2e |" % (l, c, ms, flops / ms / 1e9, e) for l, c, ms, e in rows]
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    sys.exit(main())
