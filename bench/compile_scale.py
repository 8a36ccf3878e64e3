"""Compile time against program size: `tilec --emit=ptx` on generated kernels of N
statements, to show that compiling is linear in the input (docs/PERFORMANCE.md,
"Compile time at scale"; docs/LANGUAGE-REFERENCE.md, "Limits"). Needs no GPU.

    python3 bench/compile_scale.py [--tilec build-release/tools/tilec] [-n 3]
                                   [--sizes 10000,50000,100000,200000] [--kinds fold,nofold]

Kinds, each one statement repeated N times in one kernel:
  fold       `acc = acc * 3 + i;` from `var acc = 1;`: the cleanup passes fold it all
  identity   `acc = (acc + 1) * 1 + 0;` from a parameter: canonicalize removes * 1 + 0
  nofold     `acc = acc * 3 + i;` from a parameter: nothing folds in tile (LLVM's
             InstCombine still combines the constants)
  dead       `let xi = n * i;`, all unused but one: DCE removes them
Prints a table of N against seconds (medians of n runs, wall clock) and the time
per 1000 statements, which stays flat when compiling is linear.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

KINDS = {
    # name: (first lines, statement i, last lines)
    "fold": ("    var acc = 1;", "    acc = acc * 3 + {i};", "    store(p, (acc + n) as f32);"),
    "identity": ("    var acc = n;", "    acc = (acc + 1) * 1 + 0;", "    store(p, acc as f32);"),
    "nofold": ("    var acc = n;", "    acc = acc * 3 + {i};", "    store(p, acc as f32);"),
    "dead": ("", "    let x{i} = n * {i};", "    store(p, x7 as f32);"),
}


def kernel(kind, n):
    first, stmt, last = KINDS[kind]
    lines = ["kernel k(p: *f32, n: i32) {"] + ([first] if first else [])
    lines += [stmt.format(i=i) for i in range(n)]
    return "\n".join(lines + [last, "}", ""])


def seconds(tilec, path, runs):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([tilec, path, "--emit=ptx", "-o", os.devnull], check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-release", "tools", "tilec"))
    ap.add_argument("-n", type=int, default=3, help="runs per size (medians)")
    ap.add_argument("--sizes", default="10000,50000,100000,200000")
    ap.add_argument("--kinds", default="fold,identity,nofold,dead")
    args = ap.parse_args()
    print("| kind | N | seconds | ms per 1000 statements |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            for n in map(int, args.sizes.split(",")):
                path = os.path.join(tmp, "%s_%d.tile" % (kind, n))
                with open(path, "w") as f:
                    f.write(kernel(kind, n))
                s = seconds(args.tilec, path, args.n)
                print("| %s | %d | %.2f | %.1f |" % (kind, n, s, 1e6 * s / n), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
