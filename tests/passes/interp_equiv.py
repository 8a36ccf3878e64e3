"""The GPU passes checked in the interpreter: every `tilec run` of the interpreter tests
(tests/lit/run, tests/lit/cli) runs three ways and must print the same thing:

  as written                 the tile-level IR after the cleanup passes
  --gpu-ir                   the IR after the GPU pipeline (layouts, ...), which the
                             interpreter runs like any IR: a GPU pass must not change
                             what a program computes
  --check-axis-info          the kernel as the runtime compiles it (specialized, -O3,
                             GPU pipeline), with every fact of the axis analysis
                             checked against the values
  --gpu-ir --check-bounds    the checked variant (TILE_DEBUG=bounds): the GPU IR with
                             the bounds pass, its hidden sizes and report bound by the
                             interpreter

Lines whose plain run fails (error tests) are skipped, except those of an out-of-bounds
access: the checked variant must report the same first error (made from its report),
with and without the GPU passes. Exit 1 on any difference.

    python3 tests/passes/interp_equiv.py TILEC
"""
import os
import re
import shlex
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIRS = ["tests/lit/run", "tests/lit/cli"]
MODES = [["--gpu-ir"], ["--check-axis-info"], ["--gpu-ir", "--check-bounds"]]
CHECKED = [["--check-bounds"], ["--gpu-ir", "--check-bounds"]]


def first_error(text):
    return next((l for l in text.splitlines() if "error:" in l), "")


def run_lines(path):
    for line in open(path):
        m = re.match(r"\s*//\s*RUN:\s*(.*)", line)
        if not m:
            continue
        first = m.group(1).split("|")[0].strip()
        if first.startswith("%tilec run") and ";" not in first and "&&" not in first and ">" not in first:
            yield first.replace("%s", path)


def main():
    tilec = os.path.abspath(sys.argv[1])
    checked = failed = 0
    for d in DIRS:
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            if not name.endswith(".tile"):
                continue
            for line in run_lines(os.path.join(ROOT, d, name)):
                args = shlex.split(line.replace("%tilec", tilec))
                if "--device" in args or "--gpu-ir" in args or "--check-axis-info" in args or "--check-bounds" in args:
                    continue
                plain = subprocess.run(args, capture_output=True, text=True)
                if plain.returncode != 0 and "error: out-of-bounds" in plain.stderr:
                    for mode in CHECKED:
                        other = subprocess.run(args + mode, capture_output=True, text=True)
                        checked += 1
                        if other.returncode == 0 or first_error(other.stderr) != first_error(plain.stderr):
                            failed += 1
                            print("FAIL %s %s: %s" % (name, " ".join(mode), " ".join(args[2:])[:120]))
                            print("     want: " + first_error(plain.stderr))
                            print("     got:  " + (first_error(other.stderr) or other.stderr.strip()[-300:]))
                if plain.returncode != 0:
                    continue
                for mode in MODES:
                    other = subprocess.run(args + mode, capture_output=True, text=True)
                    checked += 1
                    if other.returncode != 0 or other.stdout != plain.stdout:
                        failed += 1
                        print("FAIL %s %s: %s" % (name, " ".join(mode), " ".join(args[2:])[:120]))
                        print("     " + (other.stderr.strip()[-300:] or "output differs"))
    print("interp-equiv: %d passed, %d failed" % (checked - failed, failed))
    return 1 if failed or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
