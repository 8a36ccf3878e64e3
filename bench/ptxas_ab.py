#!/usr/bin/env python3
"""What ptxas makes of tile's kernels under two settings, side by side: registers,
spill stores and ptxas's time per kernel, for the examples' kernels at the configs the
benchmarks time and the graph compiler's kernels of the Llama block and the FFN. No GPU
needed: it is how a code-generation change is checked on a machine without one (the
GPU suite then times the kernels).

    python3 bench/ptxas_ab.py [--tilec build-release/tools/tilec] [--tilec-a OTHER] [--ptxas PTXAS]
                              [--a TILE_SINK=0] [--b ''] [--only REGEX] [--jobs 2]

--a and --b are environment settings (NAME=VALUE, comma-separated; '' for none) under
which tilec compiles each kernel (div16 variant, sm_90a); the table lists A -> B.
--tilec-a names another tilec for A (a build of an earlier commit: `git worktree add
/tmp/old REV`, then `cmake -S /tmp/old -B /tmp/old/build -G Ninja
-DCMAKE_BUILD_TYPE=Release && ninja -C /tmp/old/build tilec`), to compare two builds.
"""
import argparse
import concurrent.futures as cf
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

GEMM = "-D BM={} -D BN={} -D BK={} -D warps={} -D stages={} -D ws={} -D persistent={} -D pingpong={}"
CASES = [
    ("examples/matmul_bf16.tile", "matmul_bf16", ""),
    ("examples/matmul_bf16.tile", "matmul_bf16", GEMM.format(128, 256, 64, 8, 4, 0, 0, 0)),
    ("examples/matmul_bf16.tile", "matmul_bf16", GEMM.format(128, 128, 64, 4, 4, 1, 1, 1)),
    ("examples/matmul_bf16.tile", "matmul_bf16", GEMM.format(256, 128, 64, 8, 4, 1, 1, 0) + " -D cluster=2"),
    ("examples/gemm_bias_gelu.tile", "gemm_bias_gelu", ""),
    ("examples/gemm_bias_gelu.tile", "gemm_bias_gelu", GEMM.format(128, 256, 64, 8, 4, 1, 1, 0)),
    ("examples/gemm_bias_gelu.tile", "gemm_bias_gelu", GEMM.format(128, 128, 64, 4, 4, 1, 1, 1)),
    ("examples/gemm_bias_gelu.tile", "gemm_bias_gelu", GEMM.format(128, 64, 64, 4, 5, 1, 1, 1)),
    ("examples/matmul_fp8.tile", "", ""),
    ("examples/flash_attn_fwd.tile", "attn_fwd", ""),
    ("examples/flash_attn_fwd.tile", "attn_fwd", "-D overlap=1"),
    ("examples/flash_attn_fwd.tile", "attn_fwd_tma", "-D ws=1"),
    ("examples/flash_attn_fwd.tile", "attn_fwd_tma", "-D ws=1 -D overlap=1"),
    ("examples/flash_attn_fwd.tile", "attn_fwd_tma", "-D ws=1 -D overlap=1 -D BN=128 -D stages=2"),
    ("examples/flash_attn_fwd.tile", "attn_fwd_tma", "-D ws=1 -D BM=256 -D cluster=2"),
    ("examples/flash_attn_bwd.tile", "attn_bwd_dkdv", ""),
    ("examples/flash_attn_bwd.tile", "attn_bwd_dq", ""),
    ("examples/flash_attn_bwd.tile", "attn_bwd_dkdv_tma", ""),
    ("examples/flash_attn_bwd.tile", "attn_bwd_dq_tma", ""),
    ("examples/softmax.tile", "", ""),
    ("examples/layernorm.tile", "", ""),
    ("examples/rmsnorm.tile", "", ""),
    ("examples/adamw.tile", "", ""),
    ("examples/dropout.tile", "", ""),
    ("examples/paged_attn_decode.tile", "", ""),
    ("examples/qkv_proj.tile", "", ""),
    ("@block", "*", ""),
    ("@ffn", "*", ""),
]


def graph_kernels(tilec, name, tmp):
    """The graph compiler's kernels of the block (Llama-7B sizes) or the FFN, as a file."""
    if name == "@block":
        import graph_block
        src = graph_block.block_source(**graph_block.DIMS)
    else:
        import graph_ffn
        src = graph_ffn.ffn_source(4096, 16384)
    path = os.path.join(tmp, name[1:] + ".tile")
    with open(path, "w") as f:
        f.write(src)
    out = os.path.join(tmp, name[1:] + "_kernels.tile")
    subprocess.run([tilec, path, "--emit=graph-kernels", "-o", out], check=True)
    with open(out) as f:
        names = re.findall(r"^kernel (\w+)", f.read(), re.M)
    return out, names


def env_of(spec):
    env = dict(os.environ)
    for kv in filter(None, spec.split(",")):
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def one(args, tilec, path, kernel, defs, spec, tmp, tag):
    ptx = os.path.join(tmp, tag + ".ptx")
    cmd = [tilec, path, "--spec=div16", "--emit=ptx", "-o", ptx] + defs.split()
    if kernel:
        cmd += ["--kernel", kernel]
    r = subprocess.run(cmd, env=env_of(spec), capture_output=True, text=True)
    if r.returncode:
        return None
    t0 = time.perf_counter()
    r = subprocess.run([args.ptxas, "-arch=sm_90a", "-O3", "-v", ptx, "-o", ptx + ".cubin"], capture_output=True, text=True)
    ms = (time.perf_counter() - t0) * 1e3
    regs = max(map(int, re.findall(r"Used (\d+) registers", r.stderr)), default=0)
    spill = sum(map(int, re.findall(r"(\d+) bytes spill stores", r.stderr)))
    return regs, spill, ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-release", "tools", "tilec"))
    ap.add_argument("--tilec-a", help="the tilec of column A (default: --tilec)")
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--a", default="TILE_SINK=0")
    ap.add_argument("--b", default="")
    ap.add_argument("--only", default="")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        todo = []
        for path, kernel, defs in CASES:
            if path.startswith("@"):
                gpath, names = graph_kernels(args.tilec, path, tmp)
                todo += [(gpath, n, defs, f"{path[1:]}:{n}") for n in names]
            else:
                todo.append((os.path.join(ROOT, path), kernel, defs, f"{os.path.basename(path)} {kernel} {defs}".strip()))
        todo = [t for t in todo if re.search(args.only, t[3])]
        with cf.ThreadPoolExecutor(args.jobs) as ex:
            ta = args.tilec_a or args.tilec
            futs = [(t, ex.submit(one, args, ta, t[0], t[1], t[2], args.a, tmp, f"a{i}"),
                     ex.submit(one, args, args.tilec, t[0], t[1], t[2], args.b, tmp, f"b{i}")) for i, t in enumerate(todo)]
            for t, fa, fb in futs:
                rows.append((t[3], fa.result(), fb.result()))
    print(f"A: {args.tilec_a or args.tilec} {args.a or '(default)'}   B: {args.tilec} {args.b or '(default)'}"
          "   (ptxas -arch=sm_90a -O3 -v, div16)")
    print("| kernel | registers A -> B | spill stores A -> B (bytes) | ptxas A -> B (ms) |")
    print("|---|---|---|---|")
    for name, a, b in rows:
        if not a or not b:
            print(f"| {name} | compile failed ({'A' if not a else 'B'}) | | |")
            continue
        print(f"| {name} | {a[0]} -> {b[0]} | {a[1]} -> {b[1]} | {a[2]:.0f} -> {b[2]:.0f} |")


if __name__ == "__main__":
    sys.exit(main())
