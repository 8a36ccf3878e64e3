"""Looks inside one memory-bound kernel of tile and its Triton twin on the GPU: runs each
a few times (for ncu to catch), and writes their SASS for reading offline. (Not named
profile.py: that would shadow the standard library module torch.compile imports.)

    ncu --clock-control none --section SpeedOfLight --section Occupancy \
        --section LaunchStats -k regex:softmax python3 bench/kernel_probe.py softmax
"""
import glob
import os
import shutil
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import tilert  # noqa: E402


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "softmax"
    out = os.environ.get("OUT", "/tmp")
    rt = tilert.Runtime(os.environ.get("TILE_LIB", "libtileRT.so"))
    make = dict(softmax=bench.case_softmax, rmsnorm=bench.case_rmsnorm,
                layernorm=bench.case_layernorm, gelu=bench.case_gelu)[which]
    _, impls = make(rt)
    for name in ("tile", "triton"):
        for _ in range(3):
            impls[name]()
    torch.cuda.synchronize()
    # SASS of Triton's kernel from its cache, and of tile's from a cubin made with ptxas
    for f in glob.glob(os.path.expanduser("~/.triton/cache/**/tr_%s*.cubin" % which.replace("layernorm", "add_layernorm").replace("gelu", "gelu_bias").replace("rmsnorm", "rms_norm")), recursive=True):
        shutil.copy(f, os.path.join(out, "triton_%s.cubin" % which))
    # tile's variants from its cache: entries are a 56-byte header, 16 bytes of launch
    # facts, then the cubin image (docs/CACHE.md)
    for i, f in enumerate(glob.glob(os.path.join(os.environ.get("TILE_CACHE_DIR", "/nonexistent"), "*.cubin"))):
        with open(f, "rb") as src, open(os.path.join(out, "tile_%s_%d.cubin" % (which, i)), "wb") as dst:
            dst.write(src.read()[72:])
    for f in glob.glob(os.path.join(out, "*.cubin")):
        sass = subprocess.run(["cuobjdump", "-sass", f], capture_output=True, text=True).stdout
        with open(f + ".sass", "w") as g:
            g.write(sass)


if __name__ == "__main__":
    main()
