"""Cold-compile time on the host, per stage, for the tensor-core examples and two
memory-bound ones: LLVM IR construction, LLVM's optimization pipeline and NVPTX codegen
(from `tilec --time-passes`), then ptxas on the PTX (CUDA 13's ptxas, the assembler the
driver's JIT runs). Medians of N runs (default 5); also the PTX's lines and what
`ptxas -v` reports (registers, spill bytes, stack frame). Needs no GPU.

    python3 bench/compile_time.py [--tilec build-release/tools/tilec] [--ptxas PATH] [-n 5]
                                  [--only matmul_bf16,attn_fwd] [--keep DIR]

`--keep DIR` writes each kernel's PTX there (to compare two builds' PTX).
The configs are the examples' @autotune defaults or bench/gemm.py's and
bench/attention.py's first configs; the runtime compiles with `--spec=div16`.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GEMM = dict(BM=128, BN=128, BK=64, warps=8, stages=3)
KERNELS = [
    # name, file, kernel, consts
    ("matmul_bf16", "matmul_bf16.tile", "matmul_bf16", GEMM),
    ("matmul_bf16_64", "matmul_bf16.tile", "matmul_bf16", dict(BM=64, BN=64, BK=64, warps=4, stages=3)),
    ("matmul_bf16_256", "matmul_bf16.tile", "matmul_bf16", dict(BM=128, BN=256, BK=64, warps=8, stages=3)),
    ("matmul_f16", "matmul.tile", "matmul", dict(BM=128, BN=128, BK=32, warps=4, stages=4)),
    ("gemm_bias_gelu", "gemm_bias_gelu.tile", "gemm_bias_gelu", GEMM),
    ("qkv_proj", "qkv_proj.tile", "qkv_proj", GEMM),
    ("attn_fwd", "flash_attn_fwd.tile", "attn_fwd", dict(BM=128, BN=64, D=128, warps=8, stages=2)),
    ("attn_bwd_dkdv", "flash_attn_bwd.tile", "attn_bwd_dkdv", dict(BM=32, BN=64, D=128, warps=8, stages=2)),
    ("attn_bwd_dq", "flash_attn_bwd.tile", "attn_bwd_dq", dict(BM=64, BN=32, D=128, warps=8, stages=2)),
    ("softmax", "softmax.tile", "softmax", dict()),
    ("rmsnorm", "rmsnorm.tile", "rms_norm", dict()),
]
STAGES = ("llvm-ir", "llvm-opt", "nvptx")


def tilec_run(tilec, file, kernel, consts, out):
    cmd = [tilec, os.path.join(ROOT, "examples", file), "--kernel", kernel, "--spec=div16",
           "--emit=ptx", "-o", out, "--time-passes"]
    for k, v in consts.items():
        cmd += ["-D", "%s=%s" % (k, v)]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    times = {}
    for line in (r.stdout + r.stderr).splitlines():
        m = re.match(r"//\s+(llvm-ir|llvm-O\d|llvm-opt|nvptx)\s+([0-9.]+)", line)
        if m:
            times["llvm-opt" if m.group(1).startswith("llvm-O") else m.group(1)] = float(m.group(2))
    return times


def ptxas_run(ptxas, ptx, cubin):
    t0 = time.perf_counter()
    r = subprocess.run([ptxas, "-arch=sm_90a", "-O3", "-v", ptx, "-o", cubin],
                       capture_output=True, text=True, check=True)
    ms = (time.perf_counter() - t0) * 1e3
    log = r.stdout + r.stderr
    regs = re.search(r"Used (\d+) registers", log)
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    return ms, "%s/%s/%s" % (regs.group(1) if regs else "?", spill.group(1) if spill else "?",
                             stack.group(1) if stack else "?")


def measure(args, name, file, kernel, consts, tmp):
    ptx = os.path.join(args.keep or tmp, name + ".ptx")
    cubin = os.path.join(tmp, name + ".cubin")
    runs = {s: [] for s in STAGES + ("ptxas",)}
    for _ in range(args.n):
        t = tilec_run(args.tilec, file, kernel, consts, ptx)
        for s in STAGES:
            runs[s].append(t.get(s, 0.0))
        ms, ptxas_v = ptxas_run(args.ptxas, ptx, cubin)
        runs["ptxas"].append(ms)
    with open(ptx) as f:
        lines = sum(1 for _ in f)
    med = {s: statistics.median(v) for s, v in runs.items()}
    return med, lines, ptxas_v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-release", "tools", "tilec"))
    ap.add_argument("--ptxas", default=os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas"))
    ap.add_argument("-n", type=int, default=5, help="runs per kernel (medians)")
    ap.add_argument("--only", default="", help="comma-separated names from the table")
    ap.add_argument("--keep", default="", help="directory to write the PTX to")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
    print("| kernel | config | LLVM IR | LLVM opt | NVPTX | ptxas | total (ms) | PTX lines | regs/spill B/stack B |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, file, kernel, consts in KERNELS:
            if only and name not in only:
                continue
            med, lines, ptxas_v = measure(args, name, file, kernel, consts, tmp)
            cfg = ",".join("%s=%s" % kv for kv in consts.items()) or "default"
            total = sum(med.values())
            print("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.1f | %d | %s |" % (
                name, cfg, med["llvm-ir"], med["llvm-opt"], med["nvptx"], med["ptxas"], total,
                lines, ptxas_v), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
