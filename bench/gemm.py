"""GEMMs of tile on tensor cores against cuBLAS (torch.matmul), Triton's tutorial matmul
(bench/triton_matmul.py, autotuned over the tutorial's configs) and torch.compile, in
one run on one GPU:

- f16 GEMM (examples/matmul.tile: f16 inputs, f32 accumulation and output) at 4096^3;
- bf16 GEMM (examples/matmul_bf16.tile: bf16 in, f32 accumulation, bf16 out) at 4096^3,
  8192^3 and the 7B training shapes M = 16384 tokens, K = 4096 hidden, N = 4096, 11008,
  3 * 4096, for several tile configs;
- fp8 GEMM (examples/matmul_fp8.tile: f8e4m3 in, rowwise scales, bf16 out) at 4096^3,
  8192^3 and 16384 x 11008 x 4096 against torch._scaled_mm (rowwise scales, with and
  without fast accumulation);
- C = gelu(A @ B + bias) (examples/gemm_bias_gelu.tile, erf GELU, bf16 out) at
  16384 x 11008 x 4096 against torch eager and torch.compile;
- the fused QKV projection (examples/qkv_proj.tile) at T = 16384, hidden = 4096
  against torch.matmul (not with --quick).

Every tile config is first checked against torch in f64 on odd sizes (masked edges)
and at the benchmark size, on fresh random inputs with NaN-poisoned outputs; the peers'
errors at the benchmark size are shown beside. A config that fails is a row with its
error, and the run goes on. Times are medians of triton.testing.do_bench; TFLOP/s
counts 2*M*N*K, and "% of peak" is the fraction of the H200 SXM's dense bf16/f16
tensor-core peak (989 TFLOP/s).

Each bf16 shape also gets a "tile (max-autotune)" row: the kernel with no config
given, in a max-autotune context on an empty cache, tunes the key over its @autotune
space on its first launch (the row names the winner and the tuning time), and a
summary table puts the tuned winner against Triton's autotuned kernel.

    python3 bench/gemm.py [--lib build-gpu/runtime/libtileRT.so] [--out gemm.md] [--quick]
                          [--sections bf16,...] [--configs 'BM,BN,BK,w,s;...'] [--shapes 'M,N,K;...']

--quick (for a time-limited run): two bf16 shapes, one tile config each, two Triton
configs, no QKV section, shorter timing.
"""
import argparse
import os
import sys
import traceback

# The cold compile must include the driver's PTX assembler: its own cache
# (~/.nv/ComputeCache) would answer for PTX an earlier process compiled (the suite's
# examples compile the same GEMM), and the figure would be 50 ms short.
os.environ.setdefault("CUDA_CACHE_DISABLE", "1")

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilert  # noqa: E402
import triton_matmul  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
MATMUL = os.path.join(EX, "matmul.tile")
MATMUL_BF16 = os.path.join(EX, "matmul_bf16.tile")
MATMUL_POINTERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "matmul_pointers.tile")
GEMM_GELU = os.path.join(EX, "gemm_bias_gelu.tile")
QKV = os.path.join(EX, "qkv_proj.tile")
PEAK = 989e12  # H200 SXM, dense bf16 / f16 on tensor cores

F16_CONFIGS = [  # BM, BN, BK, warps, stages
    (64, 64, 32, 4, 2), (128, 128, 32, 4, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 3),
]
BF16_CONFIGS = [  # BM, BN, BK, warps, stages[, ws[, persistent[, cluster]]]
    (128, 128, 32, 4, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 3),
    (128, 256, 64, 8, 4, 1, 1),
    # clusters of two CTAs of 128 rows each, B multicast (cuBLAS's 4096^3 kernel runs in
    # clusters of 2)
    (256, 256, 64, 8, 4, 1, 1, 2), (256, 128, 64, 8, 4, 1, 1, 2), (256, 256, 64, 8, 4, 0, 0, 2),
    # ping-pong: two consumer warpgroups of 128 x 128 tiles, one's main loop beside the
    # other's epilogue (CUTLASS's ping-pong kernel); and on clusters of two
    (128, 128, 64, 4, 4, 1, 1, 1, 1), (128, 128, 64, 4, 5, 1, 1, 1, 1), (256, 128, 64, 4, 4, 1, 1, 2, 1),
]
BF16_SHAPES = [  # M, N, K
    (4096, 4096, 4096), (8192, 8192, 8192),
    (16384, 4096, 4096), (16384, 11008, 4096), (16384, 3 * 4096, 4096),
]
ODD = (1000, 520, 700)   # masked edges in M, N and K
TOL_F32_OUT = 1e-5       # f16 products are exact in f32; only the sums round
TOL_BF16_OUT = 5e-3      # rounding the output to bf16: about 1.5e-3 relative (rms)

QUICK = False
NO_TUNE = False


def bench(fn):
    warmup, rep = (25, 100) if QUICK else (50, 300)
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median") * 1e-3


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def figures(flops, t, t_ref=None):
    """time (ms) | TFLOP/s | % of peak | vs the reference time."""
    vs = "" if t_ref is None else "%.3fx" % (t_ref / t)
    return "%.3f | %.1f | %.1f%% | %s" % (t * 1e3, flops / t / 1e12, 100 * flops / t / PEAK, vs)


def failed(e):
    msg = str(e).strip().splitlines()
    return "FAILED: %s" % (msg[0][:150] if msg else type(e).__name__)


def check(name, err, tol):
    if not (err < tol):  # NaN (an element left poisoned) fails too
        raise AssertionError("%s: relative error %.3g (tolerance %.1g)" % (name, err, tol))
    return err


def nan_like(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


# ---- f16: examples/matmul.tile ------------------------------------------------------------
def tile_gemm_f16(rt, cfg, a, b):
    BM, BN, BK, warps, stages = cfg
    M, K = a.shape
    N = b.shape[1]
    c = nan_like((M, N), torch.float32)
    k = rt.kernel(MATMUL, "matmul", BM=BM, BN=BN, BK=BK, warps=warps, stages=stages)
    run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    return c, run


def check_f16(rt, cfg, M, N, K):
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c, run = tile_gemm_f16(rt, cfg, a, b)
    run()
    torch.cuda.synchronize()
    return check("config %s at %dx%dx%d" % (cfg, M, N, K), rel_err(c, a.double() @ b.double()), TOL_F32_OUT)


def section_f16(rt):
    S = 4096
    flops = 2.0 * S * S * S
    a = torch.randn(S, S, device="cuda", dtype=torch.float16)
    b = torch.randn(S, S, device="cuda", dtype=torch.float16)
    t_cublas = bench(lambda: torch.matmul(a, b))
    lines = ["## f16 GEMM (examples/matmul.tile, f32 out), %dx%dx%d" % (S, S, S), "",
             "| implementation | config (BM, BN, BK, warps, stages) | check (rel. err) | time (ms) | TFLOP/s | % of peak | vs cuBLAS |",
             "|---|---|---|---|---|---|---|",
             "| cuBLAS (torch.matmul, f16 out) | | | %s |" % figures(flops, t_cublas, t_cublas)]
    for cfg in (F16_CONFIGS[1:2] if QUICK and not CUSTOM else F16_CONFIGS):
        try:
            e1 = check_f16(rt, cfg, *ODD)
            e2 = check_f16(rt, cfg, S, S, S)
            _, run = tile_gemm_f16(rt, cfg, a, b)
            lines.append("| tile | %s | %.1e, %.1e | %s |" % (cfg, e1, e2, figures(flops, bench(run), t_cublas)))
        except Exception as e:
            lines.append("| tile | %s | %s | | | | |" % (cfg, failed(e)))
    return lines


# ---- bf16: examples/matmul_bf16.tile --------------------------------------------------------
def tile_gemm_bf16(rt, cfg, a, b, path=MATMUL_BF16):
    M, K = a.shape
    N = b.shape[1]
    c = nan_like((M, N), torch.bfloat16)
    k = rt.kernel(path, "matmul_bf16", **tilert.gemm_consts(cfg))
    run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))
    return c, run


def rand_bf16(*shape):
    return torch.randn(*shape, device="cuda", dtype=torch.bfloat16)


_odd_checked = {}


def check_odd_bf16(rt, cfg):
    """The config on ODD, once per run: its relative error."""
    if cfg not in _odd_checked:
        M, N, K = ODD
        a, b = rand_bf16(M, K), rand_bf16(K, N)
        c, run = tile_gemm_bf16(rt, cfg, a, b)
        run()
        torch.cuda.synchronize()
        _odd_checked[cfg] = check("config %s at %dx%dx%d" % (cfg, M, N, K),
                                  rel_err(c, a.double() @ b.double()), TOL_BF16_OUT)
    return _odd_checked[cfg]


def triton_row(flops, a, b, ref, t_cublas):
    configs = triton_matmul.QUICK if QUICK else None
    try:
        c = nan_like((a.shape[0], b.shape[1]), torch.bfloat16)
        triton_matmul.matmul(a, b, c, configs=configs)  # tunes on the first call for a shape
        torch.cuda.synchronize()
        e = rel_err(c, ref)
        t = bench(lambda: triton_matmul.matmul(a, b, c, configs=configs))
        best = triton_matmul.kernel_for(configs).best_config
        kw = best.kwargs
        cfg = "(%d, %d, %d, %d, %d) of %d" % (kw["BLOCK_SIZE_M"], kw["BLOCK_SIZE_N"], kw["BLOCK_SIZE_K"],
                                              best.num_warps, best.num_stages,
                                              len(configs or triton_matmul.get_cuda_autotune_config()))
        return "| triton (tutorial, autotuned) | %s | %.1e | %s |" % (cfg, e, figures(flops, t, t_cublas)), t
    except Exception as e:
        return "| triton (tutorial, autotuned) | | %s | | | | |" % failed(e), None


def tuned_row(shape, flops, a, b, ref, t_cublas):
    """examples/matmul_bf16.tile with no config given, in a max-autotune context on an
    empty cache: its first launch tunes the key over the kernel's @autotune space
    (docs/TUNING.md), and the winner runs. The row names the winner and the tuning time."""
    import time
    M, K = a.shape
    N = b.shape[1]
    try:
        c = nan_like((M, N), torch.bfloat16)
        k = tilert.tuning_runtime(LIB).kernel(MATMUL_BF16, "matmul_bf16")
        run = k.prepare("ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0))
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run()
        torch.cuda.synchronize()
        tuning = time.perf_counter() - t0
        e = check("the tuned config at %s" % shape, rel_err(c, ref), TOL_BF16_OUT)
        t = bench(run)
        return "| %s | tile (max-autotune) | %s, tuned in %.1f s | %.1e | %s |" % (
            shape, k.last_config(), tuning, e, figures(flops, t, t_cublas)), t
    except Exception as e:
        return "| %s | tile (max-autotune) | | %s | | | | |" % (shape, failed(e)), None


def progress(lines):
    """The rows so far on stderr: a fault that ends the run (the CUDA context is lost
    with it) still shows how far it got."""
    sys.stderr.write("\n".join(lines) + "\n")
    sys.stderr.flush()


def section_bf16(rt):
    shapes = [BF16_SHAPES[0], BF16_SHAPES[3]] if QUICK and not CUSTOM_SHAPES else BF16_SHAPES
    configs = BF16_CONFIGS[4:5] if QUICK and not CUSTOM else BF16_CONFIGS   # quick: the example's default
    lines = ["## bf16 GEMM (examples/matmul_bf16.tile: block loads, by TMA where the arguments allow; "
             "bench/matmul_pointers.tile: the same with pointer loads, by cp.async; f32 accumulation, bf16 out)", "",
             "tile configs are (BM, BN, BK, warps, stages); Triton's are the autotuner's pick, same order. "
             "check: relative error against f64 (tile: on %dx%dx%d, then at the shape)." % ODD, "",
             "| M x N x K | implementation | config | check (rel. err) | time (ms) | TFLOP/s | % of peak | vs cuBLAS |",
             "|---|---|---|---|---|---|---|---|"]
    against_triton = []
    for (M, N, K) in shapes:
        shape = "%dx%dx%d" % (M, N, K)
        flops = 2.0 * M * N * K
        progress(lines)
        a, b = rand_bf16(M, K), rand_bf16(K, N)
        ref = a.double() @ b.double()
        try:
            e = rel_err(torch.matmul(a, b), ref)
            t_cublas = bench(lambda: torch.matmul(a, b))
            lines.append("| %s | cuBLAS (torch.matmul) | | %.1e | %s |" % (shape, e, figures(flops, t_cublas, t_cublas)))
        except Exception as e:
            t_cublas = None
            lines.append("| %s | cuBLAS (torch.matmul) | | %s | | | | |" % (shape, failed(e)))
        row, t_triton = triton_row(flops, a, b, ref, t_cublas)
        lines.append("| %s %s" % (shape, row))
        for cfg in configs:
            try:
                e1 = check_odd_bf16(rt, cfg)
                c, run = tile_gemm_bf16(rt, cfg, a, b)
                run()
                torch.cuda.synchronize()
                e2 = check("config %s at %s" % (cfg, shape), rel_err(c, ref), TOL_BF16_OUT)
                lines.append("| %s | tile | %s | %.1e, %.1e | %s |" % (shape, cfg, e1, e2, figures(flops, bench(run), t_cublas)))
            except Exception as e:
                lines.append("| %s | tile | %s | %s | | | | |" % (shape, cfg, failed(e)))
            try:   # the same kernel with pointer loads: cp.async instead of TMA
                c, run = tile_gemm_bf16(rt, cfg, a, b, MATMUL_POINTERS)
                run()
                torch.cuda.synchronize()
                e2 = check("pointer-load config %s at %s" % (cfg, shape), rel_err(c, ref), TOL_BF16_OUT)
                lines.append("| %s | tile, pointer loads (cp.async) | %s | %.1e | %s |" % (
                    shape, cfg, e2, figures(flops, bench(run), t_cublas)))
            except Exception as e:
                lines.append("| %s | tile, pointer loads (cp.async) | %s | %s | | | | |" % (shape, cfg, failed(e)))
        t_tuned = None
        if not NO_TUNE:
            row, t_tuned = tuned_row(shape, flops, a, b, ref, t_cublas)
            lines.append(row)
        if t_tuned and t_triton:
            against_triton.append("| %s | %.1f | %.1f | %.3fx |" % (shape, flops / t_tuned / 1e12,
                                                                    flops / t_triton / 1e12, t_triton / t_tuned))
        del ref
        progress(lines[-2 * len(configs) - 3:])
        torch.cuda.empty_cache()
    if against_triton:
        lines += ["", "Tuned against tuned: tile's max-autotune winner against Triton's autotuned tutorial kernel", "",
                  "| M x N x K | tile tuned (TFLOP/s) | Triton (TFLOP/s) | tile vs Triton |", "|---|---|---|---|"]
        lines += against_triton
    return lines


# ---- fp8: examples/matmul_fp8.tile against torch._scaled_mm ---------------------------------
MATMUL_FP8 = os.path.join(EX, "matmul_fp8.tile")
PEAK_FP8 = 1979e12   # H200 SXM, dense fp8 on tensor cores
FP8_CONFIGS = [  # BM, BN, BK, warps, stages[, ws, persistent, cluster]
    (128, 256, 128, 8, 4), (128, 256, 128, 8, 3), (128, 128, 128, 8, 4), (128, 256, 64, 8, 5),
    (256, 256, 128, 8, 4, 0, 0, 2),   # two CTAs of 128 rows, B multicast
]
FP8_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 11008, 4096)]
TOL_FP8 = 1e-2   # bf16 output plus Hopper's fast f8 accumulation


def fp8_inputs(M, N, K):
    """f8e4m3 A [M, K] and W [N, K] with rowwise f32 scales (amax / 448 per row, as a
    quantizer would make them), and the f64 product of what they represent."""
    def quant(x):
        s = x.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 448.0
        return (x / s).to(torch.float8_e4m3fn), s.float()
    a, sa = quant(torch.randn(M, K, device="cuda"))
    w, sw = quant(torch.randn(N, K, device="cuda"))
    ref = (a.double() * sa.double()) @ (w.double() * sw.double()).t()
    return a, sa, w, sw, ref


def tile_gemm_fp8(rt, cfg, a, w, sa, sw, rowwise=True):
    M, K = a.shape
    N = w.shape[0]
    c = nan_like((M, N), torch.bfloat16)
    k = rt.kernel(MATMUL_FP8, "matmul_fp8", ROWWISE=1 if rowwise else 0, **tilert.gemm_consts(cfg))
    run = k.prepare("ptr ptr ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, w, sa, sw, M, N, K,
                    a.stride(0), w.stride(0), c.stride(0))
    return c, run


def figures_fp8(flops, t, t_ref=None):
    vs = "" if t_ref is None else "%.3fx" % (t_ref / t)
    return "%.3f | %.1f | %.1f%% | %s" % (t * 1e3, flops / t / 1e12, 100 * flops / t / PEAK_FP8, vs)


def section_fp8(rt):
    shapes = FP8_SHAPES[:1] if QUICK and not CUSTOM_SHAPES else (BF16_SHAPES if CUSTOM_SHAPES else FP8_SHAPES)
    configs = FP8_CONFIGS[:2] if QUICK and not CUSTOM_FP8 else FP8_CONFIGS
    lines = ["## fp8 GEMM (examples/matmul_fp8.tile: f8e4m3 A [M, K] and W [N, K], rowwise f32 scales in the "
             "epilogue, bf16 out; wgmma k32, TMA)", "",
             "Peers: torch._scaled_mm with the same operands and rowwise scales, with fast accumulation (as tile and "
             "Triton on sm_90 add f8 products) and without. %% of peak: of %.0f TFLOP/s (dense fp8). check: relative "
             "error against f64 of the dequantized operands (tile: on %dx%dx%d, then at the shape)." % (
                 PEAK_FP8 / 1e12, ODD[0], ODD[1], ODD[2] - ODD[2] % 16), "",
             "| M x N x K | implementation | config | check (rel. err) | time (ms) | TFLOP/s | % of peak | vs _scaled_mm |",
             "|---|---|---|---|---|---|---|---|"]
    Mo, No, Ko = ODD[0], ODD[1], ODD[2] - ODD[2] % 16
    odd = fp8_inputs(Mo, No, Ko)
    for (M, N, K) in shapes:
        shape = "%dx%dx%d" % (M, N, K)
        flops = 2.0 * M * N * K
        progress(lines)
        a, sa, w, sw, ref = fp8_inputs(M, N, K)
        t_ref = None
        for fast in (True, False):
            name = "torch._scaled_mm%s" % (" (fast accum)" if fast else "")
            try:
                f = lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sw.t().contiguous(), out_dtype=torch.bfloat16,
                                             use_fast_accum=fast)
                e = rel_err(f(), ref)
                t = bench(f)
                t_ref = t_ref or t
                lines.append("| %s | %s | | %.1e | %s |" % (shape, name, e, figures_fp8(flops, t, t_ref)))
            except Exception as e:
                lines.append("| %s | %s | | %s | | | | |" % (shape, name, failed(e)))
        for cfg in configs:
            try:
                c, run = tile_gemm_fp8(rt, cfg, odd[0], odd[2], odd[1], odd[3])
                run()
                torch.cuda.synchronize()
                e1 = check("fp8 config %s at %dx%dx%d" % (cfg, Mo, No, Ko), rel_err(c, odd[4]), TOL_FP8)
                c, run = tile_gemm_fp8(rt, cfg, a, w, sa, sw)
                run()
                torch.cuda.synchronize()
                e2 = check("fp8 config %s at %s" % (cfg, shape), rel_err(c, ref), TOL_FP8)
                lines.append("| %s | tile | %s | %.1e, %.1e | %s |" % (shape, cfg, e1, e2,
                                                                        figures_fp8(flops, bench(run), t_ref)))
            except Exception as e:
                lines.append("| %s | tile | %s | %s | | | | |" % (shape, cfg, failed(e)))
        del ref, a, w
        progress(lines[-len(configs) - 2:])
        torch.cuda.empty_cache()
    return lines


# ---- gelu(A @ B + bias): examples/gemm_bias_gelu.tile ------------------------------------------
def tile_gemm_gelu(rt, cfg, a, b, bias):
    M, K = a.shape
    N = b.shape[1]
    c = nan_like((M, N), torch.bfloat16)
    k = rt.kernel(GEMM_GELU, "gemm_bias_gelu", **tilert.gemm_consts(cfg))
    run = k.prepare("ptr ptr ptr ptr i32 i32 i32 i32 i32 i32", c, a, b, bias, M, N, K,
                    a.stride(0), b.stride(0), c.stride(0))
    return c, run


def gelu_ref(a, b, bias):
    return torch.nn.functional.gelu(a.double() @ b.double() + bias.double())


def section_gelu(rt):
    M, N, K = 16384, 11008, 4096
    flops = 2.0 * M * N * K
    configs = [(128, 256, 64, 8, 3)] if QUICK else [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 8, 3),
                                                    (128, 256, 32, 8, 3), (128, 256, 64, 8, 4, 1, 1),
                                                    (256, 256, 64, 8, 4, 0, 0, 2), (256, 256, 64, 8, 4, 1, 1, 2),
                                                    # ping-pong: the GELU of one warpgroup's tile
                                                    # beside the other's main loop
                                                    (128, 128, 64, 4, 4, 1, 1, 1, 1), (128, 64, 64, 4, 5, 1, 1, 1, 1),
                                                    (64, 128, 64, 4, 5, 1, 1, 1, 1)]
    if CUSTOM:
        configs = BF16_CONFIGS
    a, b, bias = rand_bf16(M, K), rand_bf16(K, N), rand_bf16(N)
    ref = gelu_ref(a, b, bias)
    lines = ["## gelu(A @ B + bias), erf GELU, bf16 in and out, %dx%dx%d (TFLOP/s count the GEMM)" % (M, N, K), "",
             "| implementation | config | check (rel. err) | time (ms) | TFLOP/s | % of peak | vs torch.compile |",
             "|---|---|---|---|---|---|---|"]

    def f(x, w, bb):
        return torch.nn.functional.gelu(x @ w + bb)
    t_comp = None
    try:
        comp = torch.compile(f)
        e = rel_err(comp(a, b, bias), ref)
        t_comp = bench(lambda: comp(a, b, bias))
        lines.append("| torch.compile(gelu(x @ w + b)) | | %.1e | %s |" % (e, figures(flops, t_comp, t_comp)))
    except Exception as e:
        lines.append("| torch.compile(gelu(x @ w + b)) | | %s | | | | |" % failed(e))
    try:
        e = rel_err(f(a, b, bias), ref)
        lines.append("| torch eager | | %.1e | %s |" % (e, figures(flops, bench(lambda: f(a, b, bias)), t_comp)))
    except Exception as e:
        lines.append("| torch eager | | %s | | | | |" % failed(e))
    for cfg in configs:
        try:
            Mo, No, Ko = ODD
            ao, bo, biaso = rand_bf16(Mo, Ko), rand_bf16(Ko, No), rand_bf16(No)
            co, runo = tile_gemm_gelu(rt, cfg, ao, bo, biaso)
            runo()
            torch.cuda.synchronize()
            e1 = check("config %s at %dx%dx%d" % (cfg, Mo, No, Ko), rel_err(co, gelu_ref(ao, bo, biaso)), TOL_BF16_OUT)
            c, run = tile_gemm_gelu(rt, cfg, a, b, bias)
            run()
            torch.cuda.synchronize()
            e2 = check("config %s" % (cfg,), rel_err(c, ref), TOL_BF16_OUT)
            lines.append("| tile | %s | %.1e, %.1e | %s |" % (cfg, e1, e2, figures(flops, bench(run), t_comp)))
        except Exception as e:
            lines.append("| tile | %s | %s | | | | |" % (cfg, failed(e)))
    return lines


# ---- the QKV projection: examples/qkv_proj.tile ------------------------------------------------
def tile_qkv(rt, cfg, x, w):
    T, H = x.shape
    outs = [nan_like((T, H), torch.bfloat16) for _ in range(3)]
    k = rt.kernel(QKV, "qkv_proj", **tilert.gemm_consts(cfg))
    run = k.prepare("ptr ptr ptr ptr ptr i32 i32 i32 i32 i32", *outs, x, w, T, H,
                    x.stride(0), w.stride(0), outs[0].stride(0))
    return outs, run


def check_qkv(rt, cfg, T, H):
    x, w = rand_bf16(T, H), rand_bf16(H, 3 * H)
    outs, run = tile_qkv(rt, cfg, x, w)
    run()
    torch.cuda.synchronize()
    ref = x.double() @ w.double()
    err = max(rel_err(o, r) for o, r in zip(outs, ref.split(H, dim=1)))
    return check("config %s at T=%d hidden=%d" % (cfg, T, H), err, TOL_BF16_OUT)


def section_qkv(rt):
    T, H = 16384, 4096
    flops = 2.0 * T * 3 * H * H
    x, w = rand_bf16(T, H), rand_bf16(H, 3 * H)
    lines = ["## QKV projection, x [%d, %d] @ w [%d, %d] into q, k, v" % (T, H, H, 3 * H), "",
             "| implementation | config | check (rel. err) | time (ms) | TFLOP/s | % of peak | vs cuBLAS |",
             "|---|---|---|---|---|---|---|"]
    t_cublas = bench(lambda: torch.matmul(x, w))
    lines.append("| cuBLAS (torch.matmul, then views) | | | %s |" % figures(flops, t_cublas, t_cublas))
    for cfg in [(128, 128, 64, 8, 3), (128, 256, 32, 8, 3)]:
        try:
            e1 = check_qkv(rt, cfg, 1000, 200)  # 200 columns: tiles straddle q|k and k|v
            e2 = check_qkv(rt, cfg, T, H)
            _, run = tile_qkv(rt, cfg, x, w)
            lines.append("| tile | %s | %.1e, %.1e | %s |" % (cfg, e1, e2, figures(flops, bench(run), t_cublas)))
        except Exception as e:
            lines.append("| tile | %s | %s | | | | |" % (cfg, failed(e)))
    return lines


COLD_CONFIG = (128, 256, 64, 8, 4, 1, 1)  # matmul_bf16's @autotune default: what a user's first call gets


def captured_stderr(fn):
    """Runs fn() with the process's fd 2 (where libtileRT reports) sent to a temporary
    file; returns (fn's result, what was written there)."""
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            r = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        return r, f.read().decode(errors="replace")


def section_cold_compile(rt_unused):
    """The first call of the bf16 GEMM (matmul_bf16's default config: ws, persistent)
    in a fresh runtime with an empty cache: front end, GPU passes, LLVM, NVPTX and the
    driver's assembler (the target: under 150 ms), split by TILE_LOG_RECOMPILES=1; then
    the same kernel from the persistent cache by a new runtime."""
    import tempfile
    import time
    lines = ["## Cold compile of the bf16 GEMM through libtileRT (BM, BN, BK, warps, stages, ws, persistent = %s)"
             % (COLD_CONFIG,), ""]
    M = N = K = 1024
    a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
    old = os.environ.get("TILE_LOG_RECOMPILES")
    os.environ["TILE_LOG_RECOMPILES"] = "1"
    try:
        with tempfile.TemporaryDirectory() as d:
            rows = []
            for what in ("cold (empty cache)", "warm cache, new runtime"):
                def first_call():
                    rt = tilert.Runtime(LIB, cache_dir=d)
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    _, run = tile_gemm_bf16(rt, COLD_CONFIG, a, b)
                    run()
                    torch.cuda.synchronize()
                    return (time.perf_counter() - t0) * 1e3
                ms, log = captured_stderr(first_call)
                split = [l.split(" took ", 1)[1] for l in log.splitlines() if "matmul_bf16" in l and " took " in l]
                rows.append("| %s | %.1f | %s |" % (what, ms, "; ".join(split) or "(from the cache)"))
    finally:
        if old is None:
            del os.environ["TILE_LOG_RECOMPILES"]
        else:
            os.environ["TILE_LOG_RECOMPILES"] = old
    return lines + ["| compile | first call (ms: load, compile, launch) | the runtime's split |", "|---|---|---|"] + rows


def section_mma_peak(rt):
    """bench/mma_peak.tile: dots of register-resident tiles, no memory traffic in the
    loop: the rate of mma.sync m16n8k16 through tile's code generator, the ceiling of
    the GEMMs above (part 2's wgmma is what goes past it)."""
    path = os.path.join(ROOT, "bench", "mma_peak.tile")
    lines = ["## mma.sync ceiling (bench/mma_peak.tile: register-resident tiles, f16 in, f32 acc)", "",
             "| config (BM, BN, BK, warps) | programs | TFLOP/s | % of peak |", "|---|---|---|---|"]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    iters = 2048
    for BM, BN, BK, warps in ((128, 128, 32, 4), (128, 256, 32, 8), (64, 64, 32, 4)):
        try:
            progs = sms * (2 if warps == 4 else 1)
            a = torch.randn(BM, BK, device="cuda", dtype=torch.float16)
            b = torch.randn(BK, BN, device="cuda", dtype=torch.float16)
            out = torch.empty(progs * BM * BN, device="cuda", dtype=torch.float32)
            k = rt.kernel(path, "mma_peak", BM=BM, BN=BN, BK=BK, warps=warps)
            run = k.prepare("ptr ptr ptr i32", out, a, b, iters, grid=(progs,))
            t = bench(run)
            flops = 2.0 * BM * BN * BK * iters * progs
            lines.append("| %s | %d | %.1f | %.1f%% |" % ((BM, BN, BK, warps), progs, flops / t / 1e12, 100 * flops / t / PEAK))
        except Exception as e:
            lines.append("| %s | | %s | |" % ((BM, BN, BK, warps), failed(e)))
    return lines


LIB = None
CUSTOM = False
CUSTOM_SHAPES = False
CUSTOM_FP8 = False


def main():
    global QUICK, LIB
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", "libtileRT.so"))
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and configs, shorter timing")
    ap.add_argument("--sections", help="run only these sections (comma-separated: cold, peak, f16, bf16, fp8, gelu, qkv)")
    ap.add_argument("--configs", help="tile configs to time instead of the built-in ones (every one, also "
                    "with --quick): 'BM,BN,BK,warps,stages;...'")
    ap.add_argument("--no-tune", action="store_true", help="leave out the max-autotune rows (about 100 s a shape)")
    ap.add_argument("--shapes", help="bf16 (and fp8) shapes instead of the built-in ones: 'M,N,K;...'")
    ap.add_argument("--fp8-configs", help="fp8 tile configs instead of the built-in ones: 'BM,BN,BK,warps,stages;...'")
    a_ = ap.parse_args()
    QUICK = a_.quick
    global NO_TUNE
    NO_TUNE = a_.no_tune
    if a_.shapes:
        global BF16_SHAPES, CUSTOM_SHAPES
        BF16_SHAPES = [tuple(int(v) for v in c.split(",")) for c in a_.shapes.split(";") if c]
        CUSTOM_SHAPES = True
    if a_.configs:
        global F16_CONFIGS, BF16_CONFIGS, CUSTOM
        F16_CONFIGS = BF16_CONFIGS = [tuple(int(v) for v in c.split(",")) for c in a_.configs.split(";") if c]
        CUSTOM = True
    if a_.fp8_configs:
        global FP8_CONFIGS, CUSTOM_FP8
        FP8_CONFIGS = [tuple(int(v) for v in c.split(",")) for c in a_.fp8_configs.split(";") if c]
        CUSTOM_FP8 = True
    LIB = a_.lib
    torch.manual_seed(0)
    rt = tilert.Runtime(a_.lib)
    lines = ["GPU: %s; medians of do_bench%s; peak %.0f TFLOP/s (H200 SXM dense bf16)" % (
        torch.cuda.get_device_name(), " (--quick)" if QUICK else "", PEAK / 1e12), ""]
    sections = [section_cold_compile, section_mma_peak, section_f16, section_bf16, section_fp8, section_gelu] + (
        [] if QUICK else [section_qkv])
    if a_.sections:
        wanted = set(a_.sections.split(","))
        sections = [s for s in sections if s.__name__.replace("section_", "").replace("cold_compile", "cold")
                    .replace("mma_peak", "peak") in wanted]
    print("\n".join(lines), flush=True)
    for section in sections:
        try:
            part = section(rt)
        except Exception as e:  # a section that cannot even start is a line, not a crash
            traceback.print_exc()
            part = ["%s: %s" % (section.__name__, failed(e))]
        print("\n".join(part) + "\n", flush=True)
        lines += part + [""]
    text = "\n".join(lines)
    if a_.out:
        with open(a_.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
