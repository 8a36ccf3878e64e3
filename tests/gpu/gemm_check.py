"""What the GPU GEMM tests share (test_wgmma_gpu.py, test_tma_gpu.py): the runtime from
the command line's library, tilec beside it (or $TILEC), a config's PTX, and the
comparison with a float64 product that counts failures."""
import os
import subprocess
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch
import tilert

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
lib = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("TILE_LIB", "build-gpu/runtime/libtileRT.so")
rt = tilert.Runtime(lib)
tilec = os.environ.get("TILEC", os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(lib))), "tilec"))
failed = 0


def check(name, c, ref, what):
    """c against ref (float64): relative error under 1e-2 and every element finite."""
    global failed
    err = ((c.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    ok = err < 1e-2 and torch.isfinite(c).all().item()
    failed += not ok
    print("%s %s rel err %.2e%s" % ("OK  " if ok else "FAIL", what, err, "" if ok else "  <-- " + name))


def ptx_of(path, cfg, *extra):
    """The PTX of config cfg (BM, BN, BK, warps, stages[, ws]: tilert.gemm_consts)."""
    defs = [a for k, v in tilert.gemm_consts(cfg).items() for a in ("-D", "%s=%d" % (k, v))]
    return subprocess.run([tilec, path, "--emit=ptx"] + defs + list(extra),
                          capture_output=True, text=True, check=True).stdout


def fail(msg):
    global failed
    failed += 1
    print("FAIL " + msg)
