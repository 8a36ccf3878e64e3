"""The driver's PTX assembler on tile's PTX, by JIT option: how long cuLink* takes for
each .ptx file in a directory with no options, CU_JIT_SPLIT_COMPILE (0 = all cores, 8),
CU_JIT_OPTIMIZATION_LEVEL 3 and CU_JIT_FAST_COMPILE, three times each, and whether the
cubin is the default's. Run with CUDA_CACHE_DISABLE=1, or the driver's own cache answers.

    tilec examples/matmul_bf16.tile --spec=div16 --emit=ptx -o ptx/mm.ptx
    CUDA_CACHE_DISABLE=1 python3 bench/jit_options.py ptx/
"""
import ctypes
import glob
import os
import sys
import time

OPTIONS = (("default", []), ("split0", [(34, 0)]), ("split8", [(34, 8)]), ("O3", [(7, 3)]), ("fast", [(16, 1)]))


def main():
    cu = ctypes.CDLL("libcuda.so.1")

    def ck(r, what):
        if r:
            raise RuntimeError("%s: CUresult %d" % (what, r))
    ck(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")

    def link(ptx, opts):
        n = len(opts)
        keys = (ctypes.c_int * max(n, 1))(*[k for k, _ in opts])
        vals = (ctypes.c_void_p * max(n, 1))(*[v for _, v in opts])
        st = ctypes.c_void_p()
        t0 = time.perf_counter()
        ck(cu.cuLinkCreate_v2(n, keys, vals, ctypes.byref(st)), "cuLinkCreate")
        ck(cu.cuLinkAddData_v2(st, 1, ptx, len(ptx), b"tile.ptx", 0, None, None), "cuLinkAddData")
        cubin, size = ctypes.c_void_p(), ctypes.c_size_t()
        ck(cu.cuLinkComplete(st, ctypes.byref(cubin), ctypes.byref(size)), "cuLinkComplete")
        ms = (time.perf_counter() - t0) * 1e3
        data = ctypes.string_at(cubin, size.value)
        cu.cuLinkDestroy(st)
        return ms, data

    for path in sorted(glob.glob(os.path.join(sys.argv[1] if len(sys.argv) > 1 else ".", "*.ptx"))):
        ptx = open(path, "rb").read() + b"\0"
        base = link(ptx, [])[1]
        row = [os.path.basename(path)]
        for name, opts in OPTIONS:
            try:
                runs = [link(ptx, opts) for _ in range(3)]
                row.append("%s %s ms%s" % (name, "/".join("%.1f" % ms for ms, _ in runs),
                                           "" if runs[0][1] == base else " (other cubin)"))
            except RuntimeError as e:
                row.append("%s: %s" % (name, e))
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()
