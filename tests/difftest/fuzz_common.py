"""What the seeded kernel testers of tests/difftest share (tma_fuzz.py, attn_fuzz.py): a
program drawn from each seed is written to a scratch directory, run by `tilec run` in the
interpreter as written and against either the GPU-level IR (CPU) or the GPU, and kept
with its inputs when it fails (docs/DIFFTEST.md)."""
import argparse
import os
import struct
import subprocess
import tempfile
import time


def half_bits(v, elem):
    """a small integer as bf16 or f16 bits (exact)"""
    f = struct.unpack("<I", struct.pack("<f", float(v)))[0]
    if elem == "bf16":
        return f >> 16
    return struct.unpack("<H", struct.pack("<e", float(v)))[0]


def run(cmd, timeout=300, env=None):
    """env: variables set for the command beside the environment's"""
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, **env) if env else None)
    return p.returncode, p.stdout, p.stderr


def run_both(tilec, src, args, device, same=None, env=None):
    """(why, the interpreter's output): why is None when the GPU-level IR (device "cpu",
    every axis fact checked) or the GPU gives what the interpreter gives (same(a, b)
    decides, default equality); env: variables for the compiling run (a pass's switch)"""
    base = [tilec, "run", src] + args
    rc, ref, err = run(base)
    if rc:
        return "the interpreter failed: " + err.strip()[-400:], ref
    rc, got, err = run(base + (["--device", "gpu"] if device == "gpu" else ["--check-axis-info"]), env=env)
    if rc:
        return "%s failed: %s" % (device, err.strip()[-400:]), ref
    if not (same(got, ref) if same else got == ref):
        return "%s differs from the interpreter" % ("the GPU" if device == "gpu" else "the GPU-level IR"), ref
    return None, ref


def ptxas_check(tilec, src, spec, ptxas, d, fatal, env=None):
    """None when the kernel's PTX for `spec` assembles and ptxas says none of `fatal`"""
    ptx = os.path.join(d, "k.ptx")
    rc, _, err = run([tilec, src, "--emit=ptx", "--spec=" + spec, "-o", ptx], env=env)
    if rc:
        return "PTX failed: " + err.strip()[-400:]
    rc, _, err = run([ptxas, "-arch=sm_90a", ptx, "-o", os.path.join(d, "k.cubin")])
    if rc or any(c in err for c in fatal):
        return "ptxas: " + err.strip()[-400:]
    return None


def main(name, make, check, tally, tally_what, default_out):
    """The command line of a tester: TILEC [--seeds A..B] [--device cpu|gpu] [--time-limit S]
    [--ptxas PATH] [--out DIR] [--where ATTR]. make(seed) draws a program, check(tilec, prog, device,
    ptxas, dir) returns why it failed or None, tally(tilec, prog, dir) counts what the
    summary line reports as tally_what. Exit status 1 if any program failed."""
    ap = argparse.ArgumentParser()
    ap.add_argument("tilec")
    ap.add_argument("--seeds", default="1..40")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--time-limit", type=float, default=0)
    ap.add_argument("--ptxas")
    ap.add_argument("--out", default=default_out)
    ap.add_argument("--where", metavar="ATTR", help="only the programs whose drawn attribute ATTR is true "
                    "(attn_fuzz: persistent, ws, tma, causal, ...), the other seeds skipped")
    o = ap.parse_args()
    lo, hi = (int(x) for x in o.seeds.split(".."))
    t0 = time.time()
    n = failed = counted = 0
    for seed in range(lo, hi + 1):
        if o.time_limit and time.time() - t0 > o.time_limit:
            break
        prog = make(seed)
        if o.where and not getattr(prog, o.where, False):
            continue
        with tempfile.TemporaryDirectory() as d:
            why = check(o.tilec, prog, o.device, o.ptxas, d)
            n += 1
            counted += tally(o.tilec, prog, d)
            if why:
                failed += 1
                keep = os.path.join(o.out, "seed%d" % seed)
                os.makedirs(keep, exist_ok=True)
                for f in os.listdir(d):
                    os.replace(os.path.join(d, f), os.path.join(keep, f))
                print("FAIL seed %d: %s (kept in %s)" % (seed, why, keep))
    print("%s: %d programs (%d %s), %d failed (seeds %d.., %s, %.0f s)"
          % (name, n, counted, tally_what, failed, lo, o.device, time.time() - t0))
    return 1 if failed else 0
