"""The matmul of Triton's tutorial (03-matrix-multiplication.py), as the peer of tile's
GEMM in bench/gemm.py: grouped program order (GROUP_SIZE_M), K-loop with masked tails,
f32 accumulation, the output in the inputs' type, autotuned over the tutorial's
get_cuda_autotune_config() list (its f16 configs and its fp8 ones, as the tutorial
tunes over both), keyed on M, N, K.

    from triton_matmul import matmul
    c = matmul(a, b)                  # a [M, K], b [K, N], both f16 or bf16, on CUDA
    c = matmul(a, b, configs=QUICK)   # a shorter list, for time-limited runs
"""
import torch
import triton
import triton.language as tl


def get_cuda_autotune_config():
    def cfg(bm, bn, bk, stages, warps):
        return triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8},
                             num_stages=stages, num_warps=warps)
    return [
        cfg(128, 256, 64, 3, 8), cfg(64, 256, 32, 4, 4), cfg(128, 128, 32, 4, 4), cfg(128, 64, 32, 4, 4),
        cfg(64, 128, 32, 4, 4), cfg(128, 32, 32, 4, 4), cfg(64, 32, 32, 5, 2), cfg(32, 64, 32, 5, 2),
        # the tutorial's "good config for fp8 inputs"
        cfg(128, 256, 128, 3, 8), cfg(256, 128, 128, 3, 8), cfg(256, 64, 128, 4, 4), cfg(64, 256, 128, 4, 4),
        cfg(128, 128, 128, 4, 4), cfg(128, 64, 64, 4, 4), cfg(64, 128, 64, 4, 4), cfg(128, 32, 64, 4, 4),
    ]


# The two of the list that win on the H100/H200 for large bf16 GEMMs, for --quick.
QUICK = get_cuda_autotune_config()[:1] + get_cuda_autotune_config()[2:3]


@triton.jit
def _matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr, BLOCK_SIZE_K: tl.constexpr,
                   GROUP_SIZE_M: tl.constexpr):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = pid // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((pid % num_pid_in_group) % group_size_m)
    pid_n = (pid % num_pid_in_group) // group_size_m

    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
    b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)
    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_SIZE_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_SIZE_K, other=0.0)
        accumulator = tl.dot(a, b, accumulator)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk
    c = accumulator.to(c_ptr.dtype.element_ty)
    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
    tl.store(c_ptrs, c, mask=c_mask)


_tuned = {}  # one autotuner per config list, so each keeps its own tuning cache


def kernel_for(configs=None):
    key = "full" if configs is None else tuple(str(c) for c in configs)
    if key not in _tuned:
        _tuned[key] = triton.autotune(configs=configs or get_cuda_autotune_config(),
                                      key=["M", "N", "K"])(_matmul_kernel)
    return _tuned[key]


def matmul(a, b, c=None, configs=None):
    """c = a @ b (c allocated in a's type if not given). The chosen config is
    kernel_for(configs).best_config after the first call for a shape."""
    assert a.shape[1] == b.shape[0], "incompatible dimensions"
    M, K = a.shape
    N = b.shape[1]
    if c is None:
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    kern = kernel_for(configs)
    grid = lambda META: (triton.cdiv(M, META["BLOCK_SIZE_M"]) * triton.cdiv(N, META["BLOCK_SIZE_N"]),)  # noqa: E731
    kern[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return c
