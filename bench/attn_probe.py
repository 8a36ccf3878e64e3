"""Runs tile's attention forward (and SDPA's cuDNN forward) a few times for a profiler to
catch, and writes tile's SASS from its cache (OUT, default /tmp):

    ncu --clock-control none --section SpeedOfLight --section WarpStateStats \
        --section SourceCounters -k regex:attn -c 1 \
        python3 bench/attn_probe.py [FLAG[+FLAG...]:]BM,BN,warps[,stages] [causal]

(flags as bench/attention.py's --fwd-configs: tma, ws, rot)

B 4, H 32, L 4096, D 128 as bench/attention.py.
"""
import glob
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attention  # noqa: E402
import tilert  # noqa: E402


def main():
    spec = sys.argv[1] if len(sys.argv) > 1 else "128,64,8,3"
    causal = len(sys.argv) > 2 and sys.argv[2] == "causal"
    flags = tuple(spec.split(":")[0].split("+")) if ":" in spec else ()
    cfg = flags + tuple(int(x) for x in spec.split(":")[-1].split(","))
    out = os.environ.get("OUT", "/tmp")
    rt = tilert.Runtime(os.environ.get("TILE_LIB", "libtileRT.so"))
    q, k, v, _ = attention.inputs(attention.SHAPE)
    scale = attention.SHAPE[3] ** -0.5
    _, _, run = attention.tile_fwd(rt, cfg, causal, q, k, v, scale)
    for _ in range(3):
        run()
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        for _ in range(2):
            F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
    torch.cuda.synchronize()
    # cache entries: a 56-byte header, 16 bytes of launch facts (the third word: n tensor
    # maps), n recipes of 128 bytes, then the cubin (docs/CACHE.md)
    for i, f in enumerate(glob.glob(os.path.join(os.environ.get("TILE_CACHE_DIR", "/nonexistent"), "*.cubin"))):
        dst = os.path.join(out, "attn_%d.cubin" % i)
        with open(f, "rb") as s, open(dst, "wb") as d:
            img = s.read()
            d.write(img[72 + 128 * int.from_bytes(img[64:68], "little"):])
        sass = subprocess.run(["cuobjdump", "-sass", dst], capture_output=True, text=True).stdout
        with open(dst + ".sass", "w") as g:
            g.write(sass)


if __name__ == "__main__":
    main()
