#!/usr/bin/env python3
"""The PTX of every example, lit kernel and benchmark config, into one directory, to
show that a refactor changed no generated code (or exactly which):

    python3 scripts/ptx-snapshot.py TILEC OUTDIR [-j N]
    diff -r OLD NEW          # nothing: byte-identical

What it compiles: every kernel of examples/ and tests/lit/ (as tests/codegen/ptxas-all.sh
does: files the front end rejects are skipped) for sm_90a and sm_80, each kernel alone,
with --spec=none, div8 and div16 (the runtime's variants when integers are multiples of
8, and of 16); the kernels the files' graphs lower to; and every config bench/attention.py and
bench/gemm.py time (tests/emu/emulate.py's bench cases) with --spec=div16. A compile
that fails writes its message instead of PTX, so failures are compared too."""
import concurrent.futures
import glob
import os
import subprocess
import sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(root, "tests", "emu"))
import emulate  # noqa: E402  (its bench cases; it imports nothing heavy)


def run(tilec, args):
    r = subprocess.run([tilec] + args, capture_output=True, text=True)
    return r.stdout if r.returncode == 0 else "FAILED (%d)\n%s" % (r.returncode, r.stderr)


def kernels(tilec, path):
    r = subprocess.run([tilec, path, "--emit=ir"], capture_output=True, text=True)
    if r.returncode:
        return []
    return [l.split("@", 1)[1].split("(", 1)[0] for l in r.stdout.splitlines() if l.startswith("kernel @")]


def jobs(tilec, tmp):
    files = sorted(glob.glob(os.path.join(root, "examples", "**", "*.tile"), recursive=True) +
                   glob.glob(os.path.join(root, "tests", "lit", "**", "*.tile"), recursive=True))
    for f in files:
        if "// ptxas-all: none" in open(f, errors="replace").read():
            continue
        rel = os.path.relpath(f, root).replace("/", "_")
        g = os.path.join(tmp, rel + ".graph.tile")
        if subprocess.run([tilec, f, "--emit=graph-kernels", "-o", g], capture_output=True).returncode == 0 \
                and "\nkernel" in "\n" + open(g).read():
            for k in kernels(tilec, g):
                yield rel + ".graph." + k + ".sm_90a.ptx", [g, "--kernel", k, "--emit=ptx", "--spec=div16"]
        for k in kernels(tilec, f):
            for arch in ("sm_90a", "sm_80"):
                for spec in ("none", "div8", "div16"):
                    yield "%s.%s.%s.%s.ptx" % (rel, k, arch, spec), \
                        [f, "--kernel", k, "--emit=ptx", "--arch=" + arch, "--spec=" + spec]
    for case in emulate.bench_cases():
        name, path, kernel, defs = case[0], case[1], case[2], case[3]
        args = [path, "--kernel", kernel, "--emit=ptx", "--spec=div16"]
        for d in defs:
            args += ["-D", d]
        yield "bench." + "".join(c if c.isalnum() else "_" for c in name) + ".ptx", args


def main():
    tilec, out = os.path.abspath(sys.argv[1]), sys.argv[2]
    n = int(sys.argv[sys.argv.index("-j") + 1]) if "-j" in sys.argv else os.cpu_count()
    os.makedirs(out, exist_ok=True)
    tmp = os.path.join(out, ".graphs")
    os.makedirs(tmp, exist_ok=True)
    todo = list(jobs(tilec, tmp))
    with concurrent.futures.ThreadPoolExecutor(n) as ex:
        for name, text in zip([j[0] for j in todo], ex.map(lambda j: run(tilec, j[1]), todo)):
            with open(os.path.join(out, name), "w") as f:
                f.write(text)
    failed = sum(1 for name, _ in todo if open(os.path.join(out, name)).read().startswith("FAILED"))
    print("%d PTX files in %s (%d compiles failed, their messages kept)" % (len(todo), out, failed))


if __name__ == "__main__":
    main()
