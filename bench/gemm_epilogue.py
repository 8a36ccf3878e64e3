"""What the epilogue of examples/matmul_bf16.tile costs: the same kernel with C written
by the masked pointer store, by store_block (TMA stores through a staging buffer on
sm_90a, passes/tmastore.c), and with the store left out (never taken: `if K < 0`),
against cuBLAS, at 4096^3 and 8192^3, medians of triton.testing.do_bench.

    python3 bench/gemm_epilogue.py [--lib LIB] [--configs 'BM,BN,BK,w,s[,ws[,persistent]];...']
"""
import argparse
import os
import sys
import tempfile

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilert  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def variants():
    src = open(os.path.join(ROOT, "examples", "matmul_bf16.tile")).read()
    i = src.index("    store_block(c,")
    j = src.index(";", i) + 1
    plain = ("    let rm = pm * BM + arange(0, BM);\n    let rn = pn * BN + arange(0, BN);\n"
             "    store(c + rm[:, None] * stride_cm + rn[None, :], acc as bf16,\n"
             "          mask = (rm[:, None] < M) & (rn[None, :] < N));")
    return {"store": src[:i] + plain + src[j:], "store_block": src,
            "none": src[:i] + "    if K < 0 {\n" + plain + "\n    }" + src[j:]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", "libtileRT.so"))
    ap.add_argument("--configs", default="128,256,64,8,4,1,1;128,256,64,8,4,0,0;128,256,64,8,3,1,1")
    a_ = ap.parse_args()
    rt = tilert.Runtime(a_.lib)
    cfgs = [tuple(int(x) for x in c.split(",")) for c in a_.configs.split(";") if c]
    d = tempfile.mkdtemp()
    paths = {}
    for name, text in variants().items():
        paths[name] = os.path.join(d, name + ".tile")
        with open(paths[name], "w") as f:
            f.write(text)

    def bench(fn):
        return triton.testing.do_bench(fn, warmup=100, rep=400, return_mode="median") * 1e-3

    print("| M = N = K | epilogue | config | TFLOP/s | vs cuBLAS | max rel. err |")
    print("|---|---|---|---|---|---|")
    for S in (4096, 8192):
        a = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(S, S, device="cuda", dtype=torch.bfloat16)
        ref = a.float() @ b.float()
        fl = 2.0 * S ** 3
        t0 = bench(lambda: a @ b)
        print("| %d | cuBLAS | | %.1f | 1.000x | |" % (S, fl / t0 / 1e12), flush=True)
        for name, p in paths.items():
            for cfg in cfgs:
                c = torch.full((S, S), float("nan"), device="cuda", dtype=torch.bfloat16)
                k = rt.kernel(p, "matmul_bf16", **tilert.gemm_consts(cfg))
                run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, S, S, S, S, S, S)
                run()
                torch.cuda.synchronize()
                err = "" if name == "none" else "%.1e" % ((c.float() - ref).abs().max() / ref.abs().max()).item()
                t = bench(run)
                print("| %d | %s | %s | %.1f | %.3fx | %s |" % (S, name, cfg, fl / t / 1e12, t0 / t, err), flush=True)


if __name__ == "__main__":
    main()
