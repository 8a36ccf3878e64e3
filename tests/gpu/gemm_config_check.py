"""One bf16 GEMM config at one shape on the GPU, checked against f64 (a repro for a
config that faults: run it in its own process, a fault ends the CUDA context).

    LD_LIBRARY_PATH=build-gpu/runtime CUDA_LAUNCH_BLOCKING=1 \
        python3 tests/gpu/gemm_config_check.py BM,BN,BK,warps,stages M,N,K

Known (2026-12-01, docs/STATUS.md): configs with a 32x32 warp tile (64x64 at 4 or 8
warps, 64x128 and 128x64 at 8) fault with a misaligned or illegal address at
2048^3 on the H200."""
import os
import sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import torch, tilert
cfg = tuple(int(v) for v in sys.argv[1].split(","))
M, N, K = (int(v) for v in sys.argv[2].split(","))
rt = tilert.Runtime(os.environ.get("TILE_LIB", "build-gpu/runtime/libtileRT.so"))  # bench/tilert.py
src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", sys.argv[3] if len(sys.argv) > 3 else "matmul_bf16.tile")
a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
BM, BN, BK, w, s = cfg
k = rt.kernel(src, "matmul_bf16", BM=BM, BN=BN, BK=BK, warps=w, stages=s, ws=0, persistent=0)
run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))
run()
torch.cuda.synchronize()
ref = a.double() @ b.double()
err = ((c.double() - ref).norm() / ref.norm()).item()
print("OK", cfg, (M, N, K), "rel err %.2e" % err)
