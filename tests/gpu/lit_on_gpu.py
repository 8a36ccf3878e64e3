"""Every `tilec run` of the interpreter tests, again on the GPU: for each RUN line under
tests/lit/run and tests/lit/cli that runs a kernel (and succeeds in the interpreter),
run it with --device cpu and --device gpu and compare every printed value. Each line
runs twice: as written, and with fresh random inputs (every iota:N becomes rand:N with
a new seed) and poisoned outputs (a printed zeros:N buffer becomes poison:N wherever
the interpreter shows the kernel overwrites all of it).

Values must be equal, except within the tolerance of the printed buffer's element type
(f32: 4 ulp-ish relative 5e-7 plus sums reassociated, f16/bf16: one unit in the last
place, f64: relative 1e-13 and no absolute slack), math functions (a few ulp) and the
cases listed in NONDETERMINISTIC, whose
results depend on the order in which programs run (atomics' old values).

    python3 tests/gpu/lit_on_gpu.py TILEC [--out report.txt] [--only NAME]

--only NAME runs the files whose name contains NAME (a quick check of one area).
--shard I/N and TILE_TEST_SAMPLE / TILE_TEST_SEED choose a part of the runs
(tests/sample.py); with a seed, the fresh inputs come from it too.
"""
import math
import os
import random
import re
import shlex
import subprocess
import sys

# seconds a `tilec run --device gpu` may take: 120 on a GPU; the emulated GPU (tests/emu/emulate.py
# --lit) sets more, since 2000 programs spinning on one lock (memory_model.tile) run as host
# threads, in the sanitizer build, beside another test on a 2-core machine
RUN_TIMEOUT = int(os.environ.get("LIT_ON_GPU_TIMEOUT", "120"))

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
from sample import Sample  # noqa: E402  (tests/sample.py: TILE_TEST_SAMPLE, TILE_TEST_SEED, --shard)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRS = ["tests/lit/run", "tests/lit/cli"]
# The old values an atomic returns depend on which program got there first.
NONDETERMINISTIC = {"atomics.tile"}
# Bit for bit on every target (rand): compared exactly.
EXACT = {"rand_exact.tile"}
# f64: math functions within a few hundred ulp (they are computed in f64 on the GPU,
# within 4 ulp of libm: tests/lit/run/math_f64.tile), and no absolute slack, so an f64
# result computed at f32 precision anywhere fails.
RTOL = {"f64": 1e-13, "f32": 2e-6, "f16": 2 ** -10, "bf16": 2 ** -7, "f8e4m3": 2 ** -3, "f8e5m2": 2 ** -2}
ATOL = {"f64": 1e-300}
# A graph's kernels reduce rows of thousands of elements and GEMMs in another order on
# the GPU (trees, mma) than the interpreter (tests/lit/run/graph_lowered.tile); the
# printed values' types are not looked up (f32 is assumed), so bf16 and f16 results of
# graphs are printed only where they are exact.
GRAPH_RTOL = 1e-5


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
    kernel = ["--kernel", args[args.index("--kernel") + 1]] if "--kernel" in args else []  # else the only one
    defs = [a for i, a in enumerate(args) if a != "-D" and (args[i - 1] == "-D" or a.startswith("-D"))]
    cmd = [tilec, path, "--emit=ir"] + kernel + [d if d.startswith("-D") else "-D" + d for d in defs]
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


def close(a, b, rtol, atol=1e-7):
    if math.isnan(a) and math.isnan(b):
        return True
    if math.isinf(a) or math.isinf(b):
        return a == b
    atol = atol if rtol else 0.0  # near zero, relative error means little (sin(pi))
    return abs(a - b) <= rtol * max(abs(a), abs(b)) + atol


def variant(args, seed):
    """The fresh-input, poisoned-output version of a command's arguments."""
    out = []
    for i, a in enumerate(args):
        m = re.match(r"(\w+)=iota:(\d+)$", a)
        out.append("%s=rand:%s:%d" % (m.group(1), m.group(2), seed + i) if m else a)
    printed = {args[i + 1] for i, a in enumerate(args) if a == "--print"}
    poisoned = [re.sub(r"^(\w+)=zeros:", r"\1=poison:", a) if a.split("=")[0] in printed else a for a in out]
    return out, poisoned


def compare(tilec, name, path, args, label, report):
    """Runs args on both devices; returns 'ok', 'bad' or 'skip' and reports."""
    graph = "--graph" in args
    # A graph runs on the GPU as its lowered kernels; the interpreter runs the same
    # kernels with --fused (the op-by-op reference accumulates in double).
    cpu = subprocess.run(args + ["--device", "cpu"] + (["--fused"] if graph else []), capture_output=True, text=True)
    if cpu.returncode != 0:
        return None  # an error test: the interpreter's diagnostics are the point
    gpu = subprocess.run(args + ["--device", "gpu"], capture_output=True, text=True, timeout=RUN_TIMEOUT)
    if gpu.returncode != 0:
        report.append("FAIL %s\n     gpu exit %d: %s" % (label, gpu.returncode, gpu.stderr.strip()[-400:]))
        return "bad"
    vc, vg = values(cpu.stdout), values(gpu.stdout)
    if vc is None or name in NONDETERMINISTIC:
        report.append("RAN  %s (output not compared: %s)" % (
            label, "order-dependent" if name in NONDETERMINISTIC else "printed text"))
        return "skip"
    types = param_types(tilec, args, path)
    prints = [args[i + 1] for i, a in enumerate(args) if a == "--print"]
    ptypes = [types.get(p, "f32") for p in prints]
    rtol = 0.0 if name in EXACT else max([RTOL.get(t, 0.0) for t in ptypes] or [0.0])
    if graph:
        rtol = max(rtol, GRAPH_RTOL)
    atol = max([ATOL.get(t, 1e-7) for t in ptypes if t in RTOL] or [1e-7])
    if len(vc) != len(vg) or not all(close(a, b, rtol, atol) for a, b in zip(vc, vg)):
        diffs = [(i, a, b) for i, (a, b) in enumerate(zip(vc, vg)) if not close(a, b, rtol, atol)][:5]
        report.append("FAIL %s\n     cpu %d values, gpu %d; first differences (index, cpu, gpu): %s"
                      % (label, len(vc), len(vg), diffs))
        return "bad"
    return "ok"


def pick_variant(args, seed):
    """The random-input variant, with poisoned outputs when the interpreter shows they
    are fully overwritten (same output as with zeros), else with zeros."""
    plain, poisoned = variant(args, seed)
    a = subprocess.run(plain + ["--device", "cpu"], capture_output=True, text=True)
    b = subprocess.run(poisoned + ["--device", "cpu"], capture_output=True, text=True)
    if a.returncode == 0 and b.returncode == 0 and a.stdout == b.stdout:
        return poisoned
    return plain


def have_gpu(tilec):
    """Whether tilec can run a kernel on a GPU here (else the suite is skipped)."""
    probe = os.path.join(ROOT, "tests/lit/cli/run.tile")
    r = subprocess.run([tilec, "run", probe, "--kernel", "add", "--device", "gpu", "--arg", "n=3",
                        "--arg", "a=iota:3", "--arg", "b=iota:3", "--arg", "c=zeros:3"],
                       capture_output=True, text=True)
    return not ("TRT_ERROR_NO_DRIVER" in r.stderr or "TRT_ERROR_NO_DEVICE" in r.stderr)


def main():
    tilec = os.path.abspath(sys.argv[1])
    if not have_gpu(tilec):
        print("lit-on-gpu: no GPU here; skipped")
        return 77
    report = []
    ok = bad = skipped = 0
    items = []   # (name in the sample, file name, path, command line)
    for d in DIRS:
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            path = os.path.join(ROOT, d, name)
            if not name.endswith(".tile"):
                continue
            if "--only" in sys.argv and sys.argv[sys.argv.index("--only") + 1] not in name:
                continue
            for i, line in enumerate(run_lines(path)):
                items.append(("%s/%s:%d" % (d, name, i + 1), name, path, line))
    picked = set(Sample(sys.argv, "tilec runs").select(item[0] for item in items))
    # fresh inputs from the sample's seed: a failing run is repeated with it
    rng = random.Random(os.environ.get("TILE_TEST_SEED")) if os.environ.get("TILE_TEST_SEED") else random
    items = [item for item in items if item[0] in picked]
    for n, (key, name, path, line) in enumerate(items):
        args = shlex.split(line.replace("%tilec", tilec))
        if "--device" in args:
            continue
        # The axis-analysis checker is the interpreter's: the GPU runs the kernel.
        args = [a for a in args if a != "--check-axis-info"]
        seed = rng.randrange(1 << 31)
        results = []
        for kind, a in (("as written", args), ("fresh inputs seed %d" % seed, pick_variant(args, seed))):
            label = "%s (%s): %s" % (name, kind, " ".join(a[2:])[:100])
            r = compare(tilec, name, path, a, label, report)
            ok += r == "ok"
            bad += r == "bad"
            skipped += r == "skip"
            results.append(r or "error test")
        print("[%d/%d] %s: %s" % (n + 1, len(items), key, ", ".join(results)), flush=True)   # progress
    report.append("lit-on-gpu: %d passed, %d failed, %d ran without a value comparison" % (ok, bad, skipped))
    text = "\n".join(report)
    print(text)
    if "--out" in sys.argv:
        with open(sys.argv[sys.argv.index("--out") + 1], "w") as f:
            f.write(text + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
