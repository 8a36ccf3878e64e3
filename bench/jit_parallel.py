#!/usr/bin/env python3
"""Does PTX-to-cubin assembly run in parallel? The graph compiler builds a graph's
kernels on a thread each (runtime/rt_tgraph.c prebuild), so a cold graph compiles in
about its slowest kernel's time only if the assembler of each thread runs beside the
others. This assembles the Llama block's kernels (bench/graph_block.py's source, the
graph compiler's kernels, tilec's PTX of each, div16) one after another and then all at
once, by each assembler found:
  - driver: cuLinkCreate / cuLinkAddData / cuLinkComplete (libtileRT's path; needs a GPU),
  - nvjitlink: libnvJitLink (the CUDA toolkit's or a pip package's; no GPU needed),
  - ptxas: the ptxas program, one process per kernel.
and prints, per assembler, each kernel's time alone, the sum, the longest, and the wall
time of all at once (threads; ctypes releases the GIL). Parallel assembly shows as a
wall time near the longest; a lock inside as a wall time near the sum.

    CUDA_CACHE_DISABLE=1 python3 bench/jit_parallel.py [--tilec build-gpu/tilec] [--out FILE]
"""
import argparse
import concurrent.futures as cf
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)


def block_ptx(tilec, tmp):
    import graph_block
    src = os.path.join(tmp, "block.tile")
    with open(src, "w") as f:
        f.write(graph_block.block_source(**graph_block.DIMS))
    kern = os.path.join(tmp, "kernels.tile")
    subprocess.run([tilec, src, "--emit=graph-kernels", "-o", kern], check=True)
    names = [n for n in re.findall(r"^kernel (\w+)", open(kern).read(), re.M) if n.startswith("block_op_")]
    out = []
    for n in names:
        p = os.path.join(tmp, n + ".ptx")
        subprocess.run([tilec, kern, "--kernel", n, "--spec=div16", "--emit=ptx", "-o", p], check=True)
        out.append((n, p, open(p, "rb").read() + b"\0"))
    return out


class Driver:
    name = "driver"

    def __init__(self):
        self.cu = ctypes.CDLL("libcuda.so.1")
        self.ck(self.cu.cuInit(0))
        dev = ctypes.c_int()
        self.ck(self.cu.cuDeviceGet(ctypes.byref(dev), 0))
        self.ctx = ctypes.c_void_p()
        self.ck(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(self.ctx), dev))

    @staticmethod
    def ck(r):
        if r:
            raise RuntimeError("CUresult %d" % r)

    def assemble(self, ptx):
        cu = self.cu
        self.ck(cu.cuCtxSetCurrent(self.ctx))
        st = ctypes.c_void_p()
        self.ck(cu.cuLinkCreate_v2(0, None, None, ctypes.byref(st)))
        self.ck(cu.cuLinkAddData_v2(st, 1, ptx, len(ptx), b"tile.ptx", 0, None, None))
        cubin, size = ctypes.c_void_p(), ctypes.c_size_t()
        self.ck(cu.cuLinkComplete(st, ctypes.byref(cubin), ctypes.byref(size)))
        n = size.value
        cu.cuLinkDestroy(st)
        return n


class NvJitLink:
    name = "nvjitlink"

    def __init__(self):
        cands = ([os.environ["TILE_NVJITLINK"]] if os.environ.get("TILE_NVJITLINK") else []) + \
            ["libnvJitLink.so.13", "libnvJitLink.so.12", "/usr/local/cuda/lib64/libnvJitLink.so.13"]
        try:
            import nvidia.nvjitlink  # pip's nvidia-nvjitlink, PyTorch's dependency
            cands += glob.glob(os.path.join(os.path.dirname(nvidia.nvjitlink.__file__), "lib", "libnvJitLink.so*"))
        except ImportError:
            pass
        self.lib = None
        for c in cands:
            try:
                self.lib = ctypes.CDLL(c)
                break
            except OSError:
                continue
        if not self.lib:
            raise RuntimeError("libnvJitLink not found")

    def assemble(self, ptx):
        L = self.lib
        h = ctypes.c_void_p()
        opts = (ctypes.c_char_p * 2)(b"-arch=sm_90a", b"-O3")
        if L.nvJitLinkCreate(ctypes.byref(h), 2, opts):
            raise RuntimeError("nvJitLinkCreate")
        try:
            if L.nvJitLinkAddData(h, 2, ptx, len(ptx) - 1, b"tile.ptx") or L.nvJitLinkComplete(h):   # 2: PTX
                raise RuntimeError("nvJitLink failed")
            size = ctypes.c_size_t()
            L.nvJitLinkGetLinkedCubinSize(h, ctypes.byref(size))
            return size.value
        finally:
            L.nvJitLinkDestroy(ctypes.byref(h))


class Ptxas:
    name = "ptxas"

    def __init__(self):
        self.exe = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
        if not os.access(self.exe, os.X_OK):
            raise RuntimeError("no ptxas")
        self.tmp = tempfile.mkdtemp()

    def assemble(self, ptx):
        fd, p = tempfile.mkstemp(suffix=".ptx", dir=self.tmp)
        os.write(fd, ptx[:-1])
        os.close(fd)
        subprocess.run([self.exe, "-arch=sm_90a", "-O3", p, "-o", p + ".cubin"], check=True)
        return os.path.getsize(p + ".cubin")


def timed(asm, ptx):
    t0 = time.perf_counter()
    asm.assemble(ptx)
    return (time.perf_counter() - t0) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tilec", default=os.path.join(ROOT, "build-gpu", "tilec"))
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        kernels = block_ptx(args.tilec, tmp)
        lines.append(f"Llama block kernels ({len(kernels)}), {os.cpu_count()} CPUs; times in ms")
        lines.append("| assembler | " + " | ".join(n for n, _, _ in kernels) + " | sum | longest | all at once |")
        lines.append("|---|" + "---|" * (len(kernels) + 3))
        for cls in (Driver, NvJitLink, Ptxas):
            try:
                asm = cls()
                asm.assemble(kernels[0][2])          # warm: the library's own start
            except Exception as e:                   # noqa: BLE001 (a missing assembler is a row)
                lines.append(f"| {cls.name} | not available: {e} |")
                continue
            alone = [timed(asm, p) for _, _, p in kernels]
            t0 = time.perf_counter()
            with cf.ThreadPoolExecutor(len(kernels)) as ex:
                list(ex.map(lambda k: asm.assemble(k[2]), kernels))
            wall = (time.perf_counter() - t0) * 1e3
            lines.append(f"| {asm.name} | " + " | ".join(f"{t:.0f}" for t in alone) +
                         f" | {sum(alone):.0f} | {max(alone):.0f} | {wall:.0f} |")
    print("\n".join(lines))
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
