"""Every `tilec run` of the interpreter tests, again on the GPU: for each RUN line under
tests/lit/run and tests/lit/cli that runs a kernel (and succeeds in the interpreter),
run it with --device cpu and --device gpu and compare every printed value.

Values must be equal, except within the tolerance of the printed buffer's element type
(f32: 4 ulp-ish relative 5e-7 plus sums reassociated, f16/bf16: one unit in the last
place), math functions (a few ulp) and the cases listed in NONDETERMINISTIC, whose
results depend on the order in which programs run (atomics' old values).

    python3 tests/gpu/lit_on_gpu.py TILEC [--out report.txt]
"""
import math
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRS = ["tests/lit/run", "tests/lit/cli"]
# The old values an atomic returns depend on which program got there first.
NONDETERMINISTIC = {"atomics.tile"}
RTOL = {"f64": 1e-12, "f32": 2e-6, "f16": 2 ** -10, "bf16": 2 ** -7, "f8e4m3": 2 ** -3, "f8e5m2": 2 ** -2}


def run_lines(path):
    for line in open(path):
        m = re.match(r"\s*//\s*RUN:\s*(.*)", line)
        if not m:
            continue
        cmd = m.group(1)
        first = cmd.split("|")[0].strip()
        if not first.startswith("%tilec run") or ";" in first or "&&" in first:
            continue
        yield first.replace("%s", path)


def param_types(tilec, args, path):
    """Element type of each pointer parameter of the kernel the command runs."""
    kernel = args[args.index("--kernel") + 1]
    defs = [a for i, a in enumerate(args) if args[i - 1] == "-D" or a.startswith("-D")]
    cmd = [tilec, path, "--emit=ir", "--kernel", kernel] + [d if d.startswith("-D") else "-D" + d for d in defs]
    ir = subprocess.run(cmd, capture_output=True, text=True).stdout
    return dict(re.findall(r"%(\w+): \*(\w+)", ir.split("\n")[0] if ir else ""))


def values(out):
    res = []
    for tok in out.split():
        try:
            res.append(float(tok))
        except ValueError:
            return None  # print() output or text: not comparable value by value
    return res


def close(a, b, rtol):
    if math.isnan(a) and math.isnan(b):
        return True
    if math.isinf(a) or math.isinf(b):
        return a == b
    atol = 1e-7 if rtol else 0.0  # near zero, relative error means little (sin(pi))
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + atol


def main():
    tilec = os.path.abspath(sys.argv[1])
    report = []
    ok = bad = skipped = 0
    for d in DIRS:
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            path = os.path.join(ROOT, d, name)
            if not name.endswith(".tile"):
                continue
            for line in run_lines(path):
                args = shlex.split(line.replace("%tilec", tilec))
                if "--device" in args:
                    continue
                cpu = subprocess.run(args + ["--device", "cpu"], capture_output=True, text=True)
                if cpu.returncode != 0:
                    continue  # an error test: the interpreter's diagnostics are the point
                gpu = subprocess.run(args + ["--device", "gpu"], capture_output=True, text=True, timeout=120)
                label = "%s: %s" % (name, " ".join(args[2:])[:110])
                if gpu.returncode != 0:
                    bad += 1
                    report.append("FAIL %s\n     gpu exit %d: %s" % (label, gpu.returncode, gpu.stderr.strip()[-400:]))
                    continue
                vc, vg = values(cpu.stdout), values(gpu.stdout)
                if vc is None or name in NONDETERMINISTIC:
                    skipped += 1
                    report.append("RAN  %s (output not compared: %s)" % (
                        label, "order-dependent" if name in NONDETERMINISTIC else "printed text"))
                    continue
                types = param_types(tilec, args, path)
                prints = [args[i + 1] for i, a in enumerate(args) if a == "--print"]
                rtol = max([RTOL.get(types.get(p, "f32"), 0.0) for p in prints] or [0.0])
                if len(vc) != len(vg) or not all(close(a, b, rtol) for a, b in zip(vc, vg)):
                    bad += 1
                    diffs = [(i, a, b) for i, (a, b) in enumerate(zip(vc, vg)) if not close(a, b, rtol)][:5]
                    report.append("FAIL %s\n     cpu %d values, gpu %d; first differences (index, cpu, gpu): %s"
                                  % (label, len(vc), len(vg), diffs))
                else:
                    ok += 1
    report.append("lit-on-gpu: %d passed, %d failed, %d ran without a value comparison" % (ok, bad, skipped))
    text = "\n".join(report)
    print(text)
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            f.write(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
