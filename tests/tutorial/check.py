#!/usr/bin/env python3
"""Runs every step of docs/TUTORIAL.md, so the tutorial cannot drift from the tools.

usage: check.py SOURCE_DIR TILEC PYTHON [--doc FILE]

Each fenced block whose info string begins with `sh` is a step, run in order by
`bash -e -o pipefail` in one fresh directory (where `examples` links to the checkout's
and files written by earlier steps stay), with `tilec` (TILEC) and `python3` (PYTHON,
one with numpy) first on PATH, PYTHONPATH at the checkout's python/ and a fresh kernel
cache; TILE_LIB and TILE_CODEGEN_LIBRARY come from the environment, as for the other
Python tests. A ```text block right after a step is its expected output (stdout and
stderr together, trailing spaces ignored; a line `...` matches any lines). Tags after
`sh`: `fails` (the step must exit non-zero), `gpu` (run only where `nvidia-smi -L`
finds a GPU), `torch` (only where PYTHON imports torch), `setup` (never: the build
that the checker is given is the setup). Exit 0 when every step that ran passed."""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def steps(doc):
    """[(line, tags, command, expected or None)] of the doc's sh blocks."""
    lines = doc.split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*(.*)$", lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and not lines[j].startswith("```"):
            j += 1
        blocks.append((i + 1, m.group(1), m.group(2).split(), "\n".join(lines[i + 1:j])))
        i = j + 1
        blocks[-1] += (i,)
    out = []
    for k, (line, lang, tags, body, end) in enumerate(blocks):
        if lang != "sh":
            continue
        expected = None
        if k + 1 < len(blocks) and blocks[k + 1][1] == "text":
            between = lines[end:blocks[k + 1][0] - 1]
            if all(not l.strip() for l in between):
                expected = blocks[k + 1][3]
        out.append((line, tags, body, expected))
    return out


def matches(want, got):
    """Line by line; a `...` line of want matches any number of lines of got."""
    if not want:
        return not got
    if want[0] == "...":
        return any(matches(want[1:], got[i:]) for i in range(len(got) + 1))
    return bool(got) and want[0] == got[0] and matches(want[1:], got[1:])


def clean(text):
    lines = [l.rstrip() for l in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def has_gpu():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def main():
    args = sys.argv[1:]
    doc_path = None
    if "--doc" in args:
        k = args.index("--doc")
        doc_path = args[k + 1]
        del args[k:k + 2]
    src, tilec, python = (os.path.abspath(a) for a in args)
    doc_path = doc_path or os.path.join(src, "docs", "TUTORIAL.md")
    with open(doc_path, encoding="utf-8") as f:
        todo = steps(f.read())
    if not todo:
        print("error: no ```sh steps in %s" % doc_path)
        return 1
    gpu = has_gpu() and os.environ.get("TILE_TUTORIAL_GPU", "1") != "0"
    torch = subprocess.run([python, "-c", "import torch"], capture_output=True).returncode == 0

    work = tempfile.mkdtemp(prefix="tile-tutorial-")
    try:
        bindir = os.path.join(work, ".bin")
        os.mkdir(bindir)
        os.symlink(tilec, os.path.join(bindir, "tilec"))
        # A sanitizer build's library needs its runtime preloaded into python (ctest's
        # LD_PRELOAD), and only there: tilec links its own, and two refuse to mix.
        preload = os.environ.get("LD_PRELOAD")
        if preload:
            with open(os.path.join(bindir, "python3"), "w") as w:
                w.write('#!/bin/sh\nLD_PRELOAD="%s" exec "%s" "$@"\n' % (preload, python))
            os.chmod(os.path.join(bindir, "python3"), 0o755)
        else:
            os.symlink(python, os.path.join(bindir, "python3"))
        os.symlink(os.path.join(src, "examples"), os.path.join(work, "examples"))
        env = dict((k, v) for k, v in os.environ.items() if k != "LD_PRELOAD")
        env.update(PATH=bindir + os.pathsep + os.environ.get("PATH", ""),
                   PYTHONPATH=os.path.join(src, "python"), PYTHONDONTWRITEBYTECODE="1",
                   TILE_CACHE_DIR=os.path.join(work, ".cache"), NO_COLOR="1")
        failed = ran = 0
        for line, tags, body, expected in todo:
            where = "%s:%d" % (os.path.relpath(doc_path, src), line)
            skip = ("setup" in tags and "setup step (the build under test stands for it)" or
                    "gpu" in tags and not gpu and "GPU step, no GPU here (nvidia-smi -L)" or
                    "torch" in tags and not torch and "needs PyTorch, which %s does not import" % python)
            if skip:
                print("skip %s: %s" % (where, skip))
                continue
            ran += 1
            try:
                r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
                rc, out = r.returncode, r.stdout.decode("utf-8", "replace")
            except subprocess.TimeoutExpired:
                rc, out = 124, "(timed out after 900 s)"
            bad = []
            if ("fails" in tags) != (rc != 0):
                bad.append("exit status %d%s" % (rc, ", expected a failure" if "fails" in tags else ""))
            if expected is not None and not matches(clean(expected), clean(out)):
                bad.append("output differs from the ```text block")
            if bad:
                failed += 1
                print("FAIL %s: %s\n--- command\n%s\n--- expected\n%s\n--- got\n%s---"
                      % (where, "; ".join(bad), body, expected if expected is not None else "(not compared)",
                         out))
            else:
                print("ok   %s" % where)
        print("%d steps run, %d failed, %d skipped" % (ran, failed, len(todo) - ran))
        return 1 if failed else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
