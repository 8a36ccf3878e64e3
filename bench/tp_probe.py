"""One program of bench/triton_programs.py, launched a few times in one implementation,
for a profiler to catch (Triton's and tile's kernels have the same names, so each side
runs in its own process):

    ncu -k regex:layer_norm_bwd -c 2 python3 bench/tp_probe.py lnbwd 4096 tile
    ncu -k regex:softmax -c 1 python3 bench/tp_probe.py softmax 4096 triton

PROGRAM: lnfwd (the LayerNorm forward; 4096 rows), lnbwd (the LayerNorm backward's two
kernels, dx with the partial dw/db under locks, then the dw/db reduction) or softmax (16384 rows, f32); N: the row
length; IMPL: tile or triton. The first config of bench/triton_programs.py's list.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

import torch  # noqa: E402

import tile  # noqa: E402
import triton_programs as tp  # noqa: E402
import triton_tutorials as tt  # noqa: E402


def main():
    prog, N, impl = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    tp.torch, tp.tile, tp.tt = torch, tile, tt
    if prog == "lnbwd":
        M = tp.LN_ROWS
        G = tp.ln_group(N)
        block, warps = tp.ln_resolve(tp.LN_CONFIGS[0], N)
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        w = torch.rand(N, device="cuda", dtype=torch.float16)
        dy = torch.randn(M, N, device="cuda", dtype=torch.float16)
        mean = x.float().mean(dim=1)
        rstd = 1 / torch.sqrt(x.float().var(dim=1, unbiased=False) + 1e-5)
        dx = torch.empty_like(x)
        pdw, pdb = (torch.zeros(G, N, device="cuda", dtype=torch.float16) for _ in range(2))
        dw, db = (torch.empty(N, device="cuda", dtype=torch.float16) for _ in range(2))
        locks = torch.zeros(2 * G, device="cuda", dtype=torch.int32)
        if impl == "triton":
            def run():
                tt.layer_norm_bwd_dx[(M,)](dx, dy, pdw, pdb, x, w, mean, rstd, locks, x.stride(0), N,
                                           GROUP_SIZE_M=G, BLOCK_SIZE_N=block, num_warps=warps)
                tt.layer_norm_bwd_dwdb[(tp.cdiv(N, 128),)](pdw, pdb, dw, db, G, N, BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)
        else:
            k1 = tp.kernel(tp.LAYERNORM, "layer_norm_bwd_dx")[(M,)].prepare(
                dx, dy, pdw, pdb, x, w, mean, rstd, locks, x.stride(0), N, GROUP_SIZE_M=G, BLOCK_N=block, warps=warps)
            k2 = tp.kernel(tp.LAYERNORM, "layer_norm_bwd_dwdb").prepare(pdw, pdb, dw, db, G, N, BLOCK_M=32, BLOCK_N=128)

            def run():
                k1()
                k2()
    elif prog == "lnfwd":
        M = tp.LN_ROWS
        block, warps = tp.ln_resolve(tp.LN_CONFIGS[0], N)
        x = torch.randn(M, N, device="cuda", dtype=torch.float16)
        w, b = (torch.rand(N, device="cuda", dtype=torch.float16) for _ in range(2))
        y = torch.empty_like(x)
        mean, rstd = (torch.empty(M, device="cuda", dtype=torch.float32) for _ in range(2))
        if impl == "triton":
            def run():
                tt.layer_norm_fwd[(M,)](x, y, w, b, mean, rstd, x.stride(0), N, 1e-5, BLOCK_SIZE=block, num_warps=warps)
        else:
            run = tp.kernel(tp.LAYERNORM, "layer_norm_fwd")[(M,)].prepare(x, y, w, b, mean, rstd, x.stride(0), N, 1e-5,
                                                                          BLOCK=block, warps=warps)
    elif prog == "softmax":
        rows = tp.SOFTMAX_ROWS
        cfg = tp.SOFTMAX_CONFIGS[0]
        warps, stages, per_sm = cfg
        programs = min(rows, torch.cuda.get_device_properties(0).multi_processor_count * per_sm) if per_sm else rows
        x = torch.randn(rows, N, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        if impl == "triton":
            def run():
                tt.softmax_kernel[(programs,)](y, x, x.stride(0), y.stride(0), rows, N, tp.next_pow2(N), stages,
                                               num_warps=warps)
        else:
            run = tp.kernel(tp.SOFTMAX, "softmax")[(programs,)].prepare(y, x, x.stride(0), y.stride(0), rows, N,
                                                                        **tp.softmax_consts(cfg, N))
    else:
        sys.exit("tp_probe.py: PROGRAM is lnfwd, lnbwd or softmax, not %r" % prog)
    for _ in range(3):
        if prog == "lnbwd":
            locks.zero_()
        run()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
