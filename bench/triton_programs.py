"""Triton's tutorial programs written twice, in Triton as the tutorials write them
(bench/triton_tutorials.py) and in tile's pointer form (pointer arithmetic, edge masks,
load/store; bench/triton_programs/*.tile and bench/matmul_pointers.tile), run in one
process on one GPU with the same configs:

- gemm: bf16 GEMM, tutorial 03 (grouped order), at 4096^3, 8192^3 and the ragged
  4096x4136x4072, in tile twice: with masked edges (bench/matmul_pointers.tile) and as
  the tutorial writes it, rows and columns wrapped by `% M`, `% N`, and loop-carried
  pointers (bench/triton_programs/matmul_tutorial.tile, "tile tutorial"); peers cuBLAS
  (torch.matmul) and tile's own block-load GEMM (examples/matmul_bf16.tile: at the same
  configs, and at its @autotune default: ws, persistent);
- softmax: tutorial 02's fused row softmax, f32 (as the tutorial runs it), 16384 rows x
  1000, 4096 and 5000 columns; the grid is the tutorial's persistent loop over rows
  (a config's programs per SM; 0: one program a row); peer torch.softmax;
- layernorm: tutorial 05, f16 (as the tutorial), M = 4096 rows (the tutorial's) x N =
  1000, 4096, 8192: the forward, and the backward (dx with the partial dw/db under a
  spin lock per group row, then the dw/db reduction; each timed run also zeroes the
  locks, as the tutorial allocates them per call); peers torch's layer_norm and
  native_layer_norm_backward;
- attention: tutorial 06's forward (FA2 schedule) with pointer loads, bf16, B4 H32 d128
  at L = 4096 and the ragged 4000, non-causal and causal; peer SDPA;
- fp8: f8e4m3 GEMM with B [N, K] read K-major (dot(a, trans(b))) and per-tensor scales
  in the epilogue, bf16 out, at 4096^3, 8192^3 and the ragged 4000x4112x4080; peer
  torch._scaled_mm (with and without fast accumulation).

Every result is checked before it is timed, on NaN-poisoned outputs: against float64
(GEMMs, softmax, layernorm) or SDPA (attention; and at B1 H2 L1008 against float32
with the logsumexp); a failed check prints the relative and max errors and the entry is
not timed. A failing entry or program is a row, and the run goes on. Times are medians
of triton.testing.do_bench (the same for every peer); TFLOP/s count 2*M*N*K (attention
4*B*H*L*L*D, half when causal), GB/s the bytes each input read once and each output
written once; "% of peak" is of the card's dense bf16 / fp8 tensor-core peak or its HBM
bandwidth (named from torch.cuda.get_device_name()). tile/Triton is Triton's time over
tile's (above 1: tile is faster), per config and best against best.

    python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so [--quick] [--out FILE]
                                     [--programs gemm,softmax,attention,fp8,layernorm]
    python3 bench/triton_programs.py --dry-run [--tilec build-release/tools/tilec]

--quick: fewer shapes and configs, shorter timing (about two minutes on an H100,
compiles included). --dry-run needs no GPU, torch or Triton: it lists what would run
and compiles every tile kernel of it to PTX with tilec (both specializations), each
assembled by ptxas for sm_90a where one is found.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = os.path.join(HERE, "triton_programs")
MATMUL_POINTERS = os.path.join(HERE, "matmul_pointers.tile")
MATMUL_TUTORIAL = os.path.join(PROGRAMS, "matmul_tutorial.tile")
MATMUL_BLOCK = os.path.join(ROOT, "examples", "matmul_bf16.tile")
SOFTMAX = os.path.join(PROGRAMS, "softmax.tile")
LAYERNORM = os.path.join(PROGRAMS, "layernorm.tile")
ATTENTION = os.path.join(PROGRAMS, "attention.tile")
MATMUL_FP8 = os.path.join(PROGRAMS, "matmul_fp8.tile")

# Configs, the same list for Triton and tile. The first two are --quick's.
GEMM_CONFIGS = [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 32, 4, 4)]   # BM, BN, BK, warps, stages
GEMM_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4096, 4136, 4072)]         # M, N, K
BLOCK_DEFAULT = dict(BM=128, BN=256, BK=64, warps=8, stages=4, ws=1, persistent=1, cluster=1, pingpong=0)
SOFTMAX_CONFIGS = [(8, 4, 4), (8, 4, 0), (4, 2, 8)]        # warps, stages, programs per SM (0: one a row)
SOFTMAX_ROWS, SOFTMAX_COLS = 16384, [1000, 4096, 5000]
LN_CONFIGS = [(0, 0), (0, 16), (1024, 4)]   # BLOCK (0: next_pow2(N), the tutorial's), warps (0: the tutorial's)
LN_ROWS, LN_COLS = 4096, [1000, 4096, 8192]
ATTN_CONFIGS = [(128, 64, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3)]                 # BM, BN, warps, stages
ATTN_SHAPES = [(4, 32, 4096, 128), (4, 32, 4000, 128)]                             # B, H, L, D
ATTN_CHECK = (1, 2, 1008, 128)
FP8_CONFIGS = [(128, 256, 128, 8, 3), (128, 128, 128, 4, 4), (128, 64, 64, 4, 4)]  # BM, BN, BK, warps, stages
FP8_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (4000, 4112, 4080)]

PEAKS = [  # name contains, dense bf16 TFLOP/s, dense fp8 TFLOP/s, HBM TB/s (first match wins)
    ("H200", 989, 1979, 4.8), ("H100 PCIe", 756, 1513, 2.0), ("H100 NVL", 835, 1671, 3.9),
    ("H100", 989, 1979, 3.35),
]
TOL_BF16 = 5e-3      # relative (norm) error of a bf16 result
TOL_F16 = 5e-3
TOL_F32 = 1e-4
TOL_FP8 = 1e-2       # bf16 out, and Hopper's fast f8 accumulation
TOL_ATTN = 1e-2      # against SDPA, itself bf16
TOL_LSE = 1e-3       # absolute, log2 units

QUICK = False


def next_pow2(n):
    return 1 << (n - 1).bit_length()


def cdiv(a, b):
    return (a + b - 1) // b


def pick(items, quick_count):
    return items[:quick_count] if QUICK else items


# ---- what runs: each program's tile kernels and their consts ------------------------------
def gemm_consts(cfg):
    BM, BN, BK, warps, stages = cfg
    return dict(BM=BM, BN=BN, BK=BK, warps=warps, stages=stages, GROUP=8)


def block_consts(cfg):
    """examples/matmul_bf16.tile at a config of the list: no producer warpgroup, not
    persistent (its @autotune default would set both)."""
    return dict(gemm_consts(cfg), ws=0, persistent=0, cluster=1, pingpong=0)


def gemm_shapes():
    return [GEMM_SHAPES[0], GEMM_SHAPES[2]] if QUICK else GEMM_SHAPES


def softmax_consts(cfg, n_cols):
    warps, stages, _ = cfg
    return dict(BLOCK=next_pow2(n_cols), warps=warps, stages=stages)


def ln_resolve(cfg, N):
    """(BLOCK, warps) of a config at N: the tutorial's BLOCK = next_pow2(N) and warps =
    min(max(BLOCK // 256, 1), 8) where the config says 0."""
    block = cfg[0] or next_pow2(N)
    return block, cfg[1] or min(max(block // 256, 1), 8)


def ln_configs(N):
    seen = []
    for cfg in pick(LN_CONFIGS, 2):
        r = ln_resolve(cfg, N)
        if r not in seen:
            seen.append(r)
    return seen


def ln_group(N):
    """The tutorial's GROUP_SIZE_M: rows of partial dw/db."""
    return 256 if N <= 1024 else 128 if N <= 4096 else 96 if N <= 8192 else 64


def attn_consts(cfg, D, causal):
    BM, BN, warps, stages = cfg
    return dict(BM=BM, BN=BN, D=D, CAUSAL=causal, warps=warps, stages=stages)


def fp8_shapes():
    return [FP8_SHAPES[0], FP8_SHAPES[2]] if QUICK else FP8_SHAPES


def tile_builds(program):
    """(file, kernel, consts, what) for every tile kernel the program launches."""
    out = []
    if program == "gemm":
        for cfg in pick(GEMM_CONFIGS, 2):
            out.append((MATMUL_POINTERS, "matmul_bf16", gemm_consts(cfg), "pointers %s" % (cfg,)))
            out.append((MATMUL_TUTORIAL, "matmul_bf16", gemm_consts(cfg), "tutorial %s" % (cfg,)))
            out.append((MATMUL_BLOCK, "matmul_bf16", block_consts(cfg), "load_block %s" % (cfg,)))
        out.append((MATMUL_BLOCK, "matmul_bf16", BLOCK_DEFAULT, "load_block, @autotune default"))
    elif program == "softmax":
        for n_cols in SOFTMAX_COLS:
            for cfg in pick(SOFTMAX_CONFIGS, 2):
                out.append((SOFTMAX, "softmax", softmax_consts(cfg, n_cols), "%d cols %s" % (n_cols, cfg)))
    elif program == "layernorm":
        for N in LN_COLS:
            for block, warps in ln_configs(N):
                out.append((LAYERNORM, "layer_norm_fwd", dict(BLOCK=block, warps=warps), "N %d (%d, %d)" % (N, block, warps)))
                if block >= N:
                    out.append((LAYERNORM, "layer_norm_bwd_dx",
                                dict(GROUP_SIZE_M=ln_group(N), BLOCK_N=block, warps=warps), "N %d (%d, %d)" % (N, block, warps)))
        out.append((LAYERNORM, "layer_norm_bwd_dwdb", dict(BLOCK_M=32, BLOCK_N=128), ""))
    elif program == "attention":
        for cfg in pick(ATTN_CONFIGS, 2):
            for causal in (0, 1):
                out.append((ATTENTION, "attn_fwd", attn_consts(cfg, 128, causal), "%s causal %d" % (cfg, causal)))
    elif program == "fp8":
        for cfg in pick(FP8_CONFIGS, 2):
            out.append((MATMUL_FP8, "matmul_fp8", gemm_consts(cfg), "%s" % (cfg,)))
    return out


# layernorm last: its backward spins on locks, so a hang there would cost no other table
ALL_PROGRAMS = ["gemm", "softmax", "attention", "fp8", "layernorm"]


# ---- --dry-run: list, compile with tilec, assemble with ptxas ------------------------------
def find_tilec(given):
    if given:
        return given
    for d in ("build-release", "build-gpu", "build"):
        p = os.path.join(ROOT, d, "tools", "tilec")
        if os.path.isfile(p):
            return p
    return shutil.which("tilec")


def dry_run(programs, tilec):
    tilec = find_tilec(tilec)
    if not tilec:
        print("tilec not found (give --tilec)")
        return 1
    ptxas = os.environ.get("PTXAS") or shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    ptxas = ptxas if os.path.isfile(ptxas) else None
    failures = compiled = 0
    with tempfile.TemporaryDirectory() as tmp:
        for program in programs:
            print("## %s" % program)
            print("   " + describe(program))
            for path, kernel, consts, what in tile_builds(program):
                for spec in ("none", "div16"):
                    ptx = os.path.join(tmp, "k.ptx")
                    cmd = [tilec, path, "--kernel", kernel, "--emit=ptx", "--arch=sm_90a", "--spec=" + spec, "-o", ptx]
                    for k, v in consts.items():
                        cmd += ["-D", "%s=%d" % (k, v)]
                    r = subprocess.run(cmd, capture_output=True, text=True)
                    status = "ok" if r.returncode == 0 else "FAILED: " + (r.stderr.strip().splitlines() or ["?"])[0]
                    if r.returncode == 0 and ptxas:
                        a = subprocess.run([ptxas, "-arch=sm_90a", ptx, "-o", os.path.join(tmp, "k.cubin")],
                                           capture_output=True, text=True)
                        warn = [l for l in (a.stdout + a.stderr).splitlines() if l.strip()]
                        if a.returncode != 0:
                            status = "FAILED ptxas: " + (warn or ["?"])[0]
                        elif warn:
                            status = "ok, ptxas says: " + warn[0][:160]
                    failures += not status.startswith("ok")
                    compiled += r.returncode == 0
                    print("   %-60s %-6s %s" % ("%s %s %s" % (os.path.relpath(path, ROOT), kernel, what), spec, status))
                    sys.stdout.flush()
    print("%d compiled%s, %d failed" % (compiled, " and assembled (ptxas sm_90a)" if ptxas else " (no ptxas)", failures))
    return 1 if failures else 0


def describe(program):
    if program == "gemm":
        return "shapes %s; configs (BM, BN, BK, warps, stages) %s; peers cuBLAS, load_block" % (
            gemm_shapes(), pick(GEMM_CONFIGS, 2))
    if program == "softmax":
        return "%d rows x %s cols, f32; configs (warps, stages, programs/SM) %s; peer torch.softmax" % (
            SOFTMAX_ROWS, SOFTMAX_COLS, pick(SOFTMAX_CONFIGS, 2))
    if program == "layernorm":
        return "%d rows x %s, f16, fwd and bwd; configs (BLOCK, warps; 0: tutorial's) %s; peer torch" % (
            LN_ROWS, LN_COLS, pick(LN_CONFIGS, 2))
    if program == "attention":
        return "(B, H, L, D) %s, causal and not, bf16; configs (BM, BN, warps, stages) %s; peer SDPA" % (
            ATTN_SHAPES, pick(ATTN_CONFIGS, 2))
    return "shapes %s, f8e4m3, B [N, K]; configs (BM, BN, BK, warps, stages) %s; peer torch._scaled_mm" % (
        fp8_shapes(), pick(FP8_CONFIGS, 2))


# ---- measuring -----------------------------------------------------------------------------
torch = triton = tile = tt = None   # imported by main() unless --dry-run


class CheckFailed(Exception):
    pass


def bench(fn):
    warmup, rep = (25, 100) if QUICK else (50, 300)
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median") * 1e-3


def compare(name, x, ref, tol):
    """Relative (norm) error of x against ref; CheckFailed with it and the max error if
    it is not below tol (NaN, an element left poisoned, fails too)."""
    x, ref = x.double(), ref.double()
    rel = ((x - ref).norm() / ref.norm()).item()
    if not rel < tol:
        raise CheckFailed("%s: rel. err %.3g (tol %.0e), max abs err %.3g" % (name, rel, tol, (x - ref).abs().max().item()))
    return rel


def nan_like(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def failed(e):
    msg = str(e).strip().splitlines()
    return "FAILED: %s" % (msg[0][:160] if msg else type(e).__name__)


class Card:
    def __init__(self):
        self.name = torch.cuda.get_device_name()
        self.sms = torch.cuda.get_device_properties(0).multi_processor_count
        match = [p for p in PEAKS if p[0] in self.name]
        self.known = bool(match)
        _, bf16, fp8, hbm = (match or PEAKS[-1:])[0]
        self.peak = {"bf16": bf16 * 1e12, "fp8": fp8 * 1e12, "hbm": hbm * 1e12}

    def line(self):
        return "%s (%d SMs); peaks: dense bf16 %.0f TFLOP/s, dense fp8 %.0f TFLOP/s, HBM %.2f TB/s%s" % (
            self.name, self.sms, self.peak["bf16"] / 1e12, self.peak["fp8"] / 1e12, self.peak["hbm"] / 1e12,
            "" if self.known else " (card not in the table: H100 SXM figures)")


class Table:
    """One program's rows, and the best time of each implementation per shape."""

    def __init__(self, card, title, unit, peak):
        self.card, self.unit, self.peak = card, unit, card.peak[peak]
        self.lines = ["## " + title, "",
                      "| shape | implementation | config | check | time (ms) | %s | %% of peak | tile/Triton |" % unit,
                      "|---|---|---|---|---|---|---|---|"]
        self.times = {}   # (shape, impl, cfg) -> seconds
        self.best = {}    # (shape, impl) -> (seconds, cfg)
        self.amounts = {}

    def figure(self, amount, t):
        scale = 1e12 if self.unit == "TFLOP/s" else 1e9
        return "%.1f | %.1f%%" % (amount / t / scale, 100 * amount / t / self.peak)

    def entry(self, shape, impl, cfg, amount, make, triton_impl="triton"):
        """make() -> (run, check): run() launches; check() compares the outputs and gives
        the check's text. Times run only if the check passes."""
        cfg_text = "" if cfg is None else str(cfg)
        try:
            run, check = make()
            run()
            torch.cuda.synchronize()
            err = check()
            t = bench(run)
        except CheckFailed as e:
            print("WRONG: %s %s %s: %s" % (shape, impl, cfg_text, e), flush=True)
            self.lines.append("| %s | %s | %s | WRONG: %s | | | | |" % (shape, impl, cfg_text, e))
            return
        except Exception as e:
            traceback.print_exc()
            self.lines.append("| %s | %s | %s | %s | | | | |" % (shape, impl, cfg_text, failed(e)))
            return
        self.times[(shape, impl, cfg_text)] = t
        self.amounts[shape] = amount
        if (shape, impl) not in self.best or t < self.best[(shape, impl)][0]:
            self.best[(shape, impl)] = (t, cfg_text)
        ratio = ""
        t_tr = self.times.get((shape, triton_impl, cfg_text))
        if impl.startswith("tile") and t_tr:
            ratio = "%.3fx" % (t_tr / t)
        self.lines.append("| %s | %s | %s | %s | %.4f | %s | %s |" % (shape, impl, cfg_text, err, t * 1e3,
                                                                      self.figure(amount, t), ratio))
        print(self.lines[-1], flush=True)

    def summary(self, program, rows):
        """Best against best per shape: rows of the summary table."""
        shapes = []
        for (shape, _impl) in self.best:
            if shape not in shapes:
                shapes.append(shape)
        for shape in shapes:
            tr = self.best.get((shape, "triton"))
            ti = self.best.get((shape, "tile"))
            peers = ", ".join("%s %s" % (impl, self.figure(self.amounts[shape], t).split(" |")[0])
                              for (s, impl), (t, _) in self.best.items() if s == shape and impl not in ("triton", "tile"))
            rows.append("| %s | %s | %s | %s | %s | %s |" % (
                program, shape,
                "%s (%s)" % (self.figure(self.amounts[shape], tr[0]).split(" |")[0], tr[1]) if tr else "failed",
                "%s (%s)" % (self.figure(self.amounts[shape], ti[0]).split(" |")[0], ti[1]) if ti else "failed",
                "%.3fx" % (tr[0] / ti[0]) if tr and ti else "", peers))


_modules = {}


def kernel(path, name):
    if path not in _modules:
        _modules[path] = tile.load(path)
    return getattr(_modules[path], name)


# ---- gemm ----------------------------------------------------------------------------------
def program_gemm(card):
    tab = Table(card, "bf16 GEMM (tutorial 03; tile: bench/matmul_pointers.tile, tile tutorial: "
                "bench/triton_programs/matmul_tutorial.tile (`% M` wraps); peers cuBLAS and "
                "examples/matmul_bf16.tile's block loads), f32 accumulation, bf16 out", "TFLOP/s", "bf16")
    for (M, N, K) in gemm_shapes():
        shape = "%dx%dx%d" % (M, N, K)
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        ref = (a.double() @ b.double()).float()
        flops = 2.0 * M * N * K

        def out():
            return nan_like((M, N), torch.bfloat16)

        def make_cublas():
            return (lambda: torch.matmul(a, b)), (lambda: "%.1e" % compare("cuBLAS", torch.matmul(a, b), ref, TOL_BF16))
        tab.entry(shape, "cuBLAS", None, flops, make_cublas)
        for cfg in pick(GEMM_CONFIGS, 2):
            def make_triton(cfg=cfg):
                BM, BN, BK, warps, stages = cfg
                c = out()
                grid = (cdiv(M, BM) * cdiv(N, BN),)

                def run():
                    tt._matmul_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                            c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN,
                                            BLOCK_SIZE_K=BK, GROUP_SIZE_M=8, num_warps=warps, num_stages=stages)
                return run, (lambda: "%.1e" % compare("triton", c, ref, TOL_BF16))

            def make_tile(cfg=cfg, path=MATMUL_POINTERS, consts=None):
                c = out()
                run = kernel(path, "matmul_bf16").prepare(c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                                                          **(consts or gemm_consts(cfg)))
                return run, (lambda: "%.1e" % compare("tile", c, ref, TOL_BF16))
            tab.entry(shape, "triton", cfg, flops, make_triton)
            tab.entry(shape, "tile", cfg, flops, make_tile)
            tab.entry(shape, "tile tutorial", cfg, flops, lambda cfg=cfg: make_tile(cfg, MATMUL_TUTORIAL))
            tab.entry(shape, "tile load_block", cfg, flops,
                      lambda cfg=cfg: make_tile(cfg, MATMUL_BLOCK, block_consts(cfg)))
        tab.entry(shape, "tile load_block", "default: ws, persistent", flops,
                  lambda: make_tile(None, MATMUL_BLOCK, BLOCK_DEFAULT))
        torch.cuda.empty_cache()
    return tab


# ---- softmax -------------------------------------------------------------------------------
def program_softmax(card):
    tab = Table(card, "Fused softmax (tutorial 02), f32, %d rows; configs (warps, stages, programs per SM; "
                "0: one a row)" % SOFTMAX_ROWS, "GB/s", "hbm")
    for n_cols in SOFTMAX_COLS:
        shape = "%dx%d" % (SOFTMAX_ROWS, n_cols)
        x = torch.randn(SOFTMAX_ROWS, n_cols, device="cuda", dtype=torch.float32)
        ref = torch.softmax(x.double(), dim=-1)
        nbytes = 2.0 * x.numel() * 4

        def make_torch():
            return (lambda: torch.softmax(x, dim=-1)), (lambda: "%.1e" % compare("torch", torch.softmax(x, dim=-1),
                                                                                  ref, TOL_F32))
        tab.entry(shape, "torch.softmax", None, nbytes, make_torch)
        for cfg in pick(SOFTMAX_CONFIGS, 2):
            warps, stages, per_sm = cfg
            programs = min(SOFTMAX_ROWS, card.sms * per_sm) if per_sm else SOFTMAX_ROWS
            block = next_pow2(n_cols)

            def make_triton(warps=warps, stages=stages, programs=programs, block=block):
                y = nan_like(x.shape, torch.float32)

                def run():
                    tt.softmax_kernel[(programs,)](y, x, x.stride(0), y.stride(0), SOFTMAX_ROWS, n_cols, block, stages,
                                                   num_warps=warps)
                return run, (lambda: "%.1e" % compare("triton", y, ref, TOL_F32))

            def make_tile(cfg=cfg, programs=programs):
                y = nan_like(x.shape, torch.float32)
                run = kernel(SOFTMAX, "softmax")[(programs,)].prepare(y, x, x.stride(0), y.stride(0), SOFTMAX_ROWS,
                                                                      n_cols, **softmax_consts(cfg, n_cols))
                return run, (lambda: "%.1e" % compare("tile", y, ref, TOL_F32))
            tab.entry(shape, "triton", cfg, nbytes, make_triton)
            tab.entry(shape, "tile", cfg, nbytes, make_tile)
        torch.cuda.empty_cache()
    return tab


# ---- layernorm -----------------------------------------------------------------------------
def program_layernorm(card):
    M, eps = LN_ROWS, 1e-5
    tab = Table(card, "LayerNorm (tutorial 05), f16, M = %d; fwd moves x and y, bwd x, dy and dx; configs "
                "(BLOCK, warps); the backward's dw/db reduction runs BLOCK_M 32, BLOCK_N 128, 4 warps" % M,
                "GB/s", "hbm")
    for N in LN_COLS:
        x = -2.3 + 0.5 * torch.randn(M, N, device="cuda", dtype=torch.float16)
        w = torch.rand(N, device="cuda", dtype=torch.float16)
        b = torch.rand(N, device="cuda", dtype=torch.float16)
        dy = 0.1 * torch.randn(M, N, device="cuda", dtype=torch.float16)
        xd, wd, dyd = x.double(), w.double(), dy.double()
        mu = xd.mean(dim=1)
        rs = 1 / torch.sqrt(xd.var(dim=1, unbiased=False) + eps)
        xhat = (xd - mu[:, None]) * rs[:, None]
        ref_y = xhat * wd + b.double()
        wdy = wd * dyd
        ref_dx = (wdy - (xhat * (xhat * wdy).mean(dim=1, keepdim=True) + wdy.mean(dim=1, keepdim=True))) * rs[:, None]
        ref_dw, ref_db = (dyd * xhat).sum(dim=0), dyd.sum(dim=0)
        mean, rstd = mu.float(), rs.float()   # the backward's inputs, the same for every implementation
        G = ln_group(N)
        shape = "%dx%d" % (M, N)

        def fwd_outputs():
            return nan_like((M, N), torch.float16), nan_like((M,), torch.float32), nan_like((M,), torch.float32)

        def fwd_check(name, y, m, r):
            def check():
                e = compare(name + " y", y, ref_y, TOL_F16)
                compare(name + " mean", m, mu, TOL_F32)
                compare(name + " rstd", r, rs, TOL_F32)
                return "%.1e" % e
            return check

        def make_torch_fwd():
            def run():
                return torch.nn.functional.layer_norm(x, (N,), w, b, eps)
            return run, (lambda: "%.1e" % compare("torch y", run(), ref_y, TOL_F16))
        tab.entry(shape + " fwd", "torch", None, 2.0 * M * N * 2, make_torch_fwd)
        for block, warps in ln_configs(N):
            cfg = (block, warps)

            def make_triton_fwd(block=block, warps=warps):
                y, m, r = fwd_outputs()

                def run():
                    tt.layer_norm_fwd[(M,)](x, y, w, b, m, r, x.stride(0), N, eps, BLOCK_SIZE=block, num_warps=warps)
                return run, fwd_check("triton", y, m, r)

            def make_tile_fwd(block=block, warps=warps):
                y, m, r = fwd_outputs()
                run = kernel(LAYERNORM, "layer_norm_fwd")[(M,)].prepare(x, y, w, b, m, r, x.stride(0), N, eps,
                                                                        BLOCK=block, warps=warps)
                return run, fwd_check("tile", y, m, r)
            tab.entry(shape + " fwd", "triton", cfg, 2.0 * M * N * 2, make_triton_fwd)
            tab.entry(shape + " fwd", "tile", cfg, 2.0 * M * N * 2, make_tile_fwd)

        def bwd_buffers():
            return (nan_like((M, N), torch.float16), nan_like((G, N), torch.float16), nan_like((G, N), torch.float16),
                    torch.zeros(2 * G, device="cuda", dtype=torch.int32), nan_like((N,), torch.float16),
                    nan_like((N,), torch.float16))

        def bwd_check(name, dx, dw, db):
            def check():
                e = compare(name + " dx", dx, ref_dx, TOL_F16)
                compare(name + " dw", dw, ref_dw, 1e-2)   # partial sums kept in f16, as the tutorial keeps them
                compare(name + " db", db, ref_db, 1e-2)
                return "%.1e" % e
            return check

        def make_torch_bwd():
            def run():
                return torch.ops.aten.native_layer_norm_backward(dy, x, [N], mean[:, None], rstd[:, None], w, b,
                                                                 [True, True, True])

            def check():
                dx, dw, db = run()
                return bwd_check("torch", dx, dw, db)()
            return run, check
        tab.entry(shape + " bwd", "torch", None, 3.0 * M * N * 2, make_torch_bwd)
        for block, warps in ln_configs(N):
            if block < N:   # the tutorial's backward holds a whole row
                continue
            cfg = (block, warps)

            def make_triton_bwd(block=block, warps=warps):
                dx, pdw, pdb, locks, dw, db = bwd_buffers()

                def run():
                    locks.zero_()
                    tt.layer_norm_bwd_dx[(M,)](dx, dy, pdw, pdb, x, w, mean, rstd, locks, x.stride(0), N,
                                               GROUP_SIZE_M=G, BLOCK_SIZE_N=block, num_warps=warps)
                    tt.layer_norm_bwd_dwdb[(cdiv(N, 128),)](pdw, pdb, dw, db, G, N, BLOCK_SIZE_M=32, BLOCK_SIZE_N=128)
                return run, bwd_check("triton", dx, dw, db)

            def make_tile_bwd(block=block, warps=warps):
                dx, pdw, pdb, locks, dw, db = bwd_buffers()
                k1 = kernel(LAYERNORM, "layer_norm_bwd_dx")[(M,)].prepare(
                    dx, dy, pdw, pdb, x, w, mean, rstd, locks, x.stride(0), N, GROUP_SIZE_M=G, BLOCK_N=block,
                    warps=warps)
                k2 = kernel(LAYERNORM, "layer_norm_bwd_dwdb").prepare(pdw, pdb, dw, db, G, N, BLOCK_M=32, BLOCK_N=128)

                def run():
                    locks.zero_()
                    k1()
                    k2()
                return run, bwd_check("tile", dx, dw, db)
            tab.entry(shape + " bwd", "triton", cfg, 3.0 * M * N * 2, make_triton_bwd)
            tab.entry(shape + " bwd", "tile", cfg, 3.0 * M * N * 2, make_tile_bwd)
        torch.cuda.empty_cache()
    return tab


# ---- attention -----------------------------------------------------------------------------
def attn_launchers(cfg, causal, q, k, v, o, lse, scale):
    """(triton run, tile run) of the forward at one config, writing o and lse."""
    Z, H, L, D = q.shape
    BM, BN, warps, stages = cfg

    def run_triton():
        tt.attn_fwd[(cdiv(L, BM), Z * H)](q, k, v, scale, lse, o, q.stride(1), q.stride(2), Z, H, L,
                                          BLOCK_M=BM, BLOCK_N=BN, HEAD_DIM=D, CAUSAL=causal,
                                          num_warps=warps, num_stages=stages)

    def tile_run():
        return kernel(ATTENTION, "attn_fwd").prepare(q, k, v, scale, lse, o, q.stride(1), q.stride(2), Z, H, L,
                                                     **attn_consts(cfg, D, causal))
    return run_triton, tile_run


def attn_small_check(impl, cfg, causal):
    """The forward at ATTN_CHECK against float32, o and the log2-sum-exp2."""
    Z, H, L, D = ATTN_CHECK
    q, k, v = (torch.randn(Z, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = D ** -0.5
    o, lse = nan_like((Z, H, L, D), torch.bfloat16), nan_like((Z * H, L), torch.float32)
    run_triton, tile_run = attn_launchers(cfg, causal, q, k, v, o, lse, scale)
    (run_triton if impl == "triton" else tile_run())()
    torch.cuda.synchronize()
    s = (q.float() @ k.float().transpose(-1, -2)) * scale
    if causal:
        s = s.masked_fill(~torch.ones(L, L, device="cuda", dtype=torch.bool).tril(), float("-inf"))
    ref_o = torch.softmax(s, dim=-1) @ v.float()
    ref_lse = torch.logsumexp(s, dim=-1).reshape(Z * H, L) / 0.6931471805599453
    e = compare("%s at %s" % (impl, ATTN_CHECK), o, ref_o, TOL_BF16)
    lse_err = (lse.double() - ref_lse.double()).abs().max().item()
    if not lse_err < TOL_LSE:
        raise CheckFailed("%s lse at %s: max abs err %.3g (tol %.0e)" % (impl, ATTN_CHECK, lse_err, TOL_LSE))
    return e


def program_attention(card):
    tab = Table(card, "FlashAttention forward (tutorial 06, FA2, pointer loads), bf16; configs (BM, BN, warps, "
                "stages); check: at %s against f32 (O, logsumexp), then against SDPA" % (ATTN_CHECK,),
                "TFLOP/s", "bf16")
    for (Z, H, L, D) in ATTN_SHAPES:
        q, k, v = (torch.randn(Z, H, L, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        scale = D ** -0.5
        for causal in (0, 1):
            shape = "B%d H%d L%d d%d%s" % (Z, H, L, D, " causal" if causal else "")
            flops = 4.0 * Z * H * L * L * D * (0.5 if causal else 1.0)
            ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))

            def make_sdpa():
                def run():
                    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                return run, (lambda: "%.1e" % compare("sdpa", run(), ref, TOL_ATTN))
            tab.entry(shape, "SDPA", None, flops, make_sdpa)
            for cfg in pick(ATTN_CONFIGS, 2):
                def make(impl, cfg=cfg):
                    e1 = attn_small_check(impl, cfg, causal)
                    o, lse = nan_like(q.shape, torch.bfloat16), nan_like((Z * H, L), torch.float32)
                    run_triton, tile_run = attn_launchers(cfg, causal, q, k, v, o, lse, scale)
                    run = run_triton if impl == "triton" else tile_run()

                    def check():
                        e2 = compare("%s against SDPA" % impl, o, ref, TOL_ATTN)
                        if not torch.isfinite(lse).all():
                            raise CheckFailed("%s: lse has NaN or inf" % impl)
                        return "%.1e, %.1e" % (e1, e2)
                    return run, check
                tab.entry(shape, "triton", cfg, flops, lambda cfg=cfg: make("triton", cfg))
                tab.entry(shape, "tile", cfg, flops, lambda cfg=cfg: make("tile", cfg))
        torch.cuda.empty_cache()
    return tab


# ---- fp8 -----------------------------------------------------------------------------------
def program_fp8(card):
    tab = Table(card, "fp8 GEMM: f8e4m3 A [M, K] and B [N, K] (read K-major), per-tensor scales in the epilogue, "
                "bf16 out; configs (BM, BN, BK, warps, stages)", "TFLOP/s", "fp8")
    for (M, N, K) in fp8_shapes():
        shape = "%dx%dx%d" % (M, N, K)
        flops = 2.0 * M * N * K

        def quant(x):
            s = (x.abs().amax() / 448.0).clamp_min(1e-12).float().reshape(1)
            return (x / s).to(torch.float8_e4m3fn), s
        a, sa = quant(torch.randn(M, K, device="cuda"))
        b, sb = quant(torch.randn(N, K, device="cuda"))
        ref = ((a.double() * sa.double()) @ (b.double() * sb.double()).t()).float()

        def out():
            return nan_like((M, N), torch.bfloat16)
        for fast in (True, False):
            def make_scaled(fast=fast):
                def run():
                    return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                            use_fast_accum=fast)
                return run, (lambda: "%.1e" % compare("_scaled_mm", run(), ref, TOL_FP8))
            tab.entry(shape, "torch._scaled_mm%s" % (" fast accum" if fast else ""), None, flops, make_scaled)
        for cfg in pick(FP8_CONFIGS, 2):
            def make_triton(cfg=cfg):
                BM, BN, BK, warps, stages = cfg
                c = out()
                grid = (cdiv(M, BM) * cdiv(N, BN),)

                def run():
                    tt.matmul_fp8[grid](a, b, c, sa, sb, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                        c.stride(0), c.stride(1), BLOCK_SIZE_M=BM, BLOCK_SIZE_N=BN, BLOCK_SIZE_K=BK,
                                        GROUP_SIZE_M=8, num_warps=warps, num_stages=stages)
                return run, (lambda: "%.1e" % compare("triton", c, ref, TOL_FP8))

            def make_tile(cfg=cfg):
                c = out()
                run = kernel(MATMUL_FP8, "matmul_fp8").prepare(c, a, b, sa, sb, M, N, K, a.stride(0), b.stride(0),
                                                               c.stride(0), **gemm_consts(cfg))
                return run, (lambda: "%.1e" % compare("tile", c, ref, TOL_FP8))
            tab.entry(shape, "triton", cfg, flops, make_triton)
            tab.entry(shape, "tile", cfg, flops, make_tile)
        torch.cuda.empty_cache()
    return tab


PROGRAM_FNS = {"gemm": program_gemm, "softmax": program_softmax, "layernorm": program_layernorm,
               "attention": program_attention, "fp8": program_fp8}


def main():
    global QUICK, SOFTMAX_COLS, LN_COLS, torch, triton, tile, tt
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lib", help="libtileRT.so to load (TILE_LIB); e.g. build-gpu/runtime/libtileRT.so")
    ap.add_argument("--out", help="also write the tables to this markdown file")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and configs, shorter timing")
    ap.add_argument("--programs", default=",".join(ALL_PROGRAMS), help="comma-separated, of " + ",".join(ALL_PROGRAMS))
    ap.add_argument("--dry-run", action="store_true", help="no GPU: list what would run and compile the tile kernels")
    ap.add_argument("--tilec", help="tilec for --dry-run (default: build-release/, build-gpu/, build/, PATH)")
    ap.add_argument("--cols", help="softmax and LayerNorm row lengths instead of the built-in ones (comma-separated; "
                    "for a profiler: e.g. --cols 4096)")
    args = ap.parse_args()
    QUICK = args.quick
    if args.cols:
        SOFTMAX_COLS = LN_COLS = [int(c) for c in args.cols.split(",")]
    programs = [p for p in args.programs.split(",") if p]
    unknown = [p for p in programs if p not in PROGRAM_FNS]
    if unknown:
        ap.error("unknown program(s) %s; the programs are %s" % (",".join(unknown), ",".join(ALL_PROGRAMS)))
    if args.dry_run:
        return dry_run(programs, args.tilec)
    if args.lib:
        os.environ["TILE_LIB"] = os.path.abspath(args.lib)
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import torch as torch_
    import triton as triton_
    import triton.testing  # noqa: F401
    import tile as tile_
    import triton_tutorials
    torch, triton, tile, tt = torch_, triton_, tile_, triton_tutorials
    torch.manual_seed(0)
    card = Card()
    head = ["# Triton's tutorial programs in Triton and in tile (pointer form)", "",
            "GPU: %s. torch %s, triton %s, libtileRT %s (%s). Medians of do_bench%s." % (
                card.line(), torch.__version__, triton.__version__, tile.runtime_version(), tile.library_path,
                " (--quick: warmup 25 ms, rep 100 ms)" if QUICK else " (warmup 50 ms, rep 300 ms)"),
            "tile/Triton: Triton's time over tile's at the same config (above 1: tile is faster). check: relative "
            "(norm) error of the output.", ""]
    print("\n".join(head), flush=True)
    lines = list(head)
    summary = ["## Best config against best config", "",
               "| program | shape | Triton (best config) | tile (best config) | tile/Triton | peers (best) |",
               "|---|---|---|---|---|---|"]
    for p in programs:
        try:
            tab = PROGRAM_FNS[p](card)
            part = tab.lines
            tab.summary(p, summary)
        except Exception as e:   # a program that cannot even start is a line, not the end of the run
            traceback.print_exc()
            part = ["## %s" % p, "", failed(e)]
        print("\n".join(part) + "\n", flush=True)
        lines += part + [""]
        torch.cuda.empty_cache()
    print("\n".join(summary), flush=True)
    lines += summary
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
