"""FlashAttention forward and backward of tile (examples/flash_attn_fwd.tile,
examples/flash_attn_bwd.tile: bf16 q, k, v, o, f32 softmax statistics, dots on tensor
cores) against PyTorch's scaled_dot_product_attention on its flash backend, at B = 4,
H = 32, L = 4096, D = 128, causal and not, in one run on one GPU.

Checks come first, on fresh random inputs with NaN-poisoned outputs: at B = 1, H = 16,
L = 1008 (not a multiple of any block, so the masked tails run; B*H and L in the same
specialization classes as the benchmark shape, so no extra compile) O, the logsumexp
and dQ, dK, dV against an f32 reference with autograd (SDPA's error shown beside);
then at the benchmark shape O and the gradients against SDPA flash. A config that fails
is a row with its error, and the run goes on. Times are medians of
triton.testing.do_bench; FLOPs: forward 4*B*H*L*L*D (half when causal), backward 2.5x
the forward; "% of peak" is the fraction of the H200 SXM's dense bf16 peak (989
TFLOP/s). The backward of tile is its three kernels (delta, dK/dV, dQ) in a row, or
with a "fused" config (--bwd-configs 'fused[+tma][+det]:BM,BN,warps') attn_bwd_preprocess_fused,
attn_bwd_fused (dQ by f32 atomic adds; tma: attn_bwd_fused_tma; det: in key-block order)
and attn_bwd_dq_convert.

    python3 bench/attention.py [--lib build-gpu/runtime/libtileRT.so] [--out attention.md] [--quick]
                               [--fwd-configs '[FLAG[+FLAG...]:]BM,BN,warps[,stages];...'] [--no-bwd] [--fp8]
                               [--bwd-configs '[tma[+ov][+pers][+lpt]:]BM,BN,warps/BM,BN,warps;...'
                                              or 'fused[+tma][+det]:BM,BN,warps;...']
(flags: tma names attn_fwd_tma, the block-load form (TILE_TMA_EARLY=1 gives its two-dot
loops TMA rings); ws launches it with ws = 1: TMA rings filled by a producer warpgroup,
passes/warpspec.c; rot launches with overlap = 1, the loops rotated so that the softmax
runs under the tensor cores' P V, passes/rotate.c; pers with persistent = 1; lpt with
LPT = 1: a causal head's query blocks longest first.)

--fp8 runs instead the fp8 forward (examples/flash_attn_fwd_fp8.tile, attn_fwd_fp8_tma:
e4m3 q, k, V^T with per-tensor descales) at B = 4, H = 32, L = 4096, D = 128 and 256,
full and causal, each beside tile's bf16 forward at that D (fp8_rows).
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
import triton
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilert  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FWD = os.path.join(ROOT, "examples", "flash_attn_fwd.tile")
BWD = os.path.join(ROOT, "examples", "flash_attn_bwd.tile")
PEAK = 989e12  # H200 SXM, dense bf16 on tensor cores
SHAPE = (4, 32, 4096, 128)       # B, H, L, D
CHECK_SHAPE = (1, 16, 1008, 128)
# BM, BN, warps[, stages], after flags: tma (attn_fwd_tma), ws (a producer warpgroup),
# rot (overlap = 1: softmax under P V; with ws and 8 warps the warpgroups ping-pong),
# pers (persistent = 1), lpt (LPT = 1: causal query blocks longest first)
FWD_CONFIGS = [(128, 64, 8, 3), ("tma", "ws", "rot", 128, 64, 8, 3), ("tma", "ws", 128, 64, 8, 3),
               ("tma", "ws", "rot", "pers", 128, 64, 8, 3), ("tma", "ws", "rot", 128, 128, 8, 2),
               ("tma", "ws", "rot", "lpt", 128, 128, 8, 2), ("tma", "ws", "rot", "pers", 128, 128, 8, 2),
               ("tma", "ws", "rot", "pers", "lpt", 128, 128, 8, 2), ("tma", "ws", "rot", 128, 128, 8, 3),
               ("tma", "ws", "cl", 256, 64, 8, 3), ("tma", "ws", "rot", "cl", 256, 64, 8, 3),
               ("rot", 128, 64, 8, 3), (128, 32, 8)]
# (dK/dV), (dQ); "tma": the _tma kernels (TMA rings filled by a producer warpgroup)
BWD_CONFIGS = [((32, 64, 4), (64, 64, 4)), ((64, 64, 4), (64, 32, 4)), ("tma", (32, 64, 4), (64, 64, 4)),
               ("tma", (32, 128, 8), (128, 64, 8)), ("tma", (64, 64, 4), (64, 64, 4)),
               ("tma", "ov", (64, 64, 4), (64, 64, 4)), ("tma", "ov", (64, 128, 8), (128, 64, 8)),
               ("tma", (64, 128, 8), (128, 64, 8)), ("tma", "pers", (64, 128, 8), (128, 64, 8)),
               ("tma", "lpt", (64, 128, 8), (128, 64, 8)),
               # "fused": attn_bwd_fused (one kernel: dQ by f32 atomic adds, then
               # attn_bwd_dq_convert), (BM, BN, warps); "det": DETERMINISTIC = 1
               ("fused", (64, 128, 8)), ("fused", (64, 64, 4)), ("fused", "det", (64, 128, 8)),
               ("fused", "tma", (64, 128, 8))]
TOL_O = 1e-2      # relative error (norm) of bf16 outputs
TOL_GRAD = 2e-2   # the gradients go through P and dS rounded to bf16
TOL_LSE = 1e-3    # absolute, f32 statistics

QUICK = False
GIVEN_FWD = False   # --fwd-configs given: run every one, also with --quick
GIVEN_BWD = False   # --bwd-configs given: likewise


def bench(fn, grad_to_none=None):
    warmup, rep = (25, 100) if QUICK else (50, 300)
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep, grad_to_none=grad_to_none,
                                   return_mode="median") * 1e-3


def rel_err(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm()).item()


def check(name, err, tol):
    if not (err < tol):  # NaN (an element left poisoned) fails too
        raise AssertionError("%s: error %.3g (tolerance %.1g)" % (name, err, tol))
    return err


def failed(e):
    msg = str(e).strip().splitlines()
    return "FAILED: %s" % (msg[0][:150] if msg else type(e).__name__)


def figures(flops, t, t_ref):
    vs = "" if t_ref is None else "%.3fx" % (t_ref / t)
    return "%.3f | %.1f | %.1f%% | %s" % (t * 1e3, flops / t / 1e12, 100 * flops / t / PEAK, vs)


def nan_like(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


# ---- tile ---------------------------------------------------------------------------------
def strides(t):
    """(stride_bh, stride_l) of a [B, H, L, D] tensor seen as [B*H, L, D]."""
    B, H, L, D = t.shape
    assert t.stride(3) == 1 and t.stride(0) == H * t.stride(1), "q, k, v, o need [B*H, L, D] strides"
    return t.stride(1), t.stride(2)


def split_flags(cfg):
    """A config tuple's flags (its strings) and the rest."""
    return [x for x in cfg if isinstance(x, str)], tuple(x for x in cfg if not isinstance(x, str))


def parse_flags(text):
    """The flags of a --fwd-configs/--bwd-configs entry: 'tma+ws:...' -> ('tma', 'ws')."""
    return tuple(text.split(":")[0].split("+")) if ":" in text else ()


def tile_fwd(rt, cfg, causal, q, k, v, scale):
    """(o, lse, run): run() computes o and lse (poisoned until then)."""
    flags, cfg = split_flags(cfg)
    overlap = "rot" in flags   # the loops rotated (overlap = 1)
    B, H, L, D = q.shape
    tma = "tma" in flags       # attn_fwd_tma: the heads as one [B * H * L, D] tensor
    BM, BN, warps = cfg[:3]
    extra = {"stages": cfg[3]} if len(cfg) > 3 else {}
    if "ws" in flags:          # a producer warpgroup issues the TMA copies (attn_fwd_tma)
        extra["ws"] = 1
    if "pers" in flags:        # persistent programs (with ws)
        extra["persistent"] = 1
    if "lpt" in flags:         # a causal head's query blocks longest first (attn_fwd_tma)
        extra["LPT"] = 1
    if "cl" in flags:          # each program (BM rows) on two CTAs, K and V multicast
        extra["cluster"] = 2
    o = nan_like(q.shape, torch.bfloat16)
    lse = nan_like((B, H, L), torch.float32)
    sbh, sl = strides(q)
    for t in (k, v, o):
        assert strides(t) == (sbh, sl)
    if overlap:
        extra["overlap"] = 1
    if tma:
        assert sbh == L * sl
        kern = rt.kernel(FWD, "attn_fwd_tma", BM=BM, BN=BN, D=D, CAUSAL=int(causal), warps=warps, **extra)
        run = kern.prepare("ptr ptr ptr ptr ptr i32 i32 f32 i32 i32", o, lse, q, k, v, B * H, L, scale, sl, B * H * L)
        return o, lse, run
    kern = rt.kernel(FWD, "attn_fwd", BM=BM, BN=BN, D=D, CAUSAL=int(causal), warps=warps, **extra)
    run = kern.prepare("ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", o, lse, q, k, v, B * H, L, scale, sbh, sl)
    return o, lse, run


def tile_bwd(rt, cfg, causal, q, k, v, o, lse, do, scale):
    """((dq, dk, dv), run): run() launches the three kernels of the backward. A config
    ('tma', (dK/dV), (dQ)) runs attn_bwd_dkdv_tma and attn_bwd_dq_tma (the heads as one
    [B * H * L, D] tensor: TMA rings that a producer warpgroup fills)."""
    B, H, L, D = q.shape
    flags, cfg = split_flags(cfg)
    tma = "tma" in flags
    # the launch keys of both _tma kernels: ov, overlap = 1 (the K loops' dots issued
    # together and waited for late, passes/rotate.c schedule); pers, persistent = 1
    # (causal too); lpt, dQ's causal query blocks longest first (LPT = 1, dQ only)
    keys = {**({"overlap": 1} if "ov" in flags else {}), **({"persistent": 1} if "pers" in flags else {})}
    lpt = {"LPT": 1} if "lpt" in flags else {}
    sbh, sl = strides(q)
    for t in (k, v, o, do):
        assert strides(t) == (sbh, sl)
    delta = nan_like((B, H, L), torch.float32)
    dq, dk, dv = (nan_like(q.shape, torch.bfloat16) for _ in range(3))
    if "fused" in flags:   # attn_bwd_preprocess_fused, attn_bwd_fused, attn_bwd_dq_convert
        ((bm, bn, w),) = cfg
        acc = nan_like((B, H, L, D), torch.float32)
        sem = torch.full((B, H, L), -1, device="cuda", dtype=torch.int32)
        pre = rt.kernel(BWD, "attn_bwd_preprocess_fused", BM=32, D=D).prepare(
            "ptr ptr ptr ptr ptr i32 i32 i64 i32", delta, acc, sem, o, do, B * H, L, sbh, sl)
        det = int("det" in flags)
        if tma:   # attn_bwd_fused_tma: Q and dO by TMA, a producer warpgroup
            assert sbh == L * sl
            fused = rt.kernel(BWD, "attn_bwd_fused_tma", BM=bm, BN=bn, D=D, CAUSAL=int(causal), warps=w,
                              DETERMINISTIC=det).prepare(
                "ptr ptr ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i32 i32", dk, dv, acc, sem, q, k, v, do, lse,
                delta, B * H, L, scale, sl, B * H * L)
        else:
            fused = rt.kernel(BWD, "attn_bwd_fused", BM=bm, BN=bn, D=D, CAUSAL=int(causal), warps=w,
                              DETERMINISTIC=det).prepare(
                "ptr ptr ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", dk, dv, acc, sem, q, k, v, do, lse,
                delta, B * H, L, scale, sbh, sl)
        conv = rt.kernel(BWD, "attn_bwd_dq_convert", BM=64, D=D).prepare(
            "ptr ptr i32 i32 f32 i64 i32", dq, acc, B * H, L, scale, sbh, sl)

        def run_fused():
            pre()
            fused()
            conv()
        return (dq, dk, dv), run_fused
    (kbm, kbn, kw), (qbm, qbn, qw) = cfg
    pre = rt.kernel(BWD, "attn_bwd_preprocess", BM=32, D=D).prepare(
        "ptr ptr ptr i32 i32 i64 i32", delta, o, do, B * H, L, sbh, sl)
    if tma:
        assert sbh == L * sl
        dkdv = rt.kernel(BWD, "attn_bwd_dkdv_tma", BM=kbm, BN=kbn, D=D, CAUSAL=int(causal), warps=kw, **keys).prepare(
            "ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i32 i32", dk, dv, q, k, v, do, lse, delta, B * H, L, scale,
            sl, B * H * L)
        dqk = rt.kernel(BWD, "attn_bwd_dq_tma", BM=qbm, BN=qbn, D=D, CAUSAL=int(causal), warps=qw, **keys, **lpt).prepare(
            "ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i32 i32", dq, q, k, v, do, lse, delta, B * H, L, scale,
            sl, B * H * L)
    else:
        dkdv = rt.kernel(BWD, "attn_bwd_dkdv", BM=kbm, BN=kbn, D=D, CAUSAL=int(causal), warps=kw).prepare(
            "ptr ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", dk, dv, q, k, v, do, lse, delta, B * H, L, scale,
            sbh, sl)
        dqk = rt.kernel(BWD, "attn_bwd_dq", BM=qbm, BN=qbn, D=D, CAUSAL=int(causal), warps=qw).prepare(
            "ptr ptr ptr ptr ptr ptr ptr i32 i32 f32 i64 i32", dq, q, k, v, do, lse, delta, B * H, L, scale, sbh, sl)

    def run():
        pre()
        dkdv()
        dqk()
    return (dq, dk, dv), run


# ---- references ----------------------------------------------------------------------------
def inputs(shape):
    q, k, v, do = (torch.randn(shape, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    return q, k, v, do


def math_ref(q, k, v, do, causal, scale):
    """o, lse, (dq, dk, dv) in f32 with autograd."""
    qf, kf, vf = (t.detach().float().requires_grad_() for t in (q, k, v))
    s = (qf @ kf.transpose(-1, -2)) * scale
    if causal:
        L = q.shape[2]
        s = s.masked_fill(torch.ones(L, L, device="cuda", dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ vf
    o.backward(do.float())
    return o.detach(), lse.detach(), (qf.grad, kf.grad, vf.grad)


def sdpa(q, k, v, causal, scale):
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def sdpa_grads(q, k, v, do, causal, scale):
    qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
    o = sdpa(qg, kg, vg, causal, scale)
    o.backward(do)
    return o.detach(), (qg.grad, kg.grad, vg.grad)


# ---- checks -----------------------------------------------------------------------------
_small = {}


def small_case(causal):
    """Inputs and references at CHECK_SHAPE, once per run and causal mode."""
    if causal not in _small:
        q, k, v, do = inputs(CHECK_SHAPE)
        scale = 1 / math.sqrt(CHECK_SHAPE[3])
        o, lse, grads = math_ref(q, k, v, do, causal, scale)
        try:
            so, sgrads = sdpa_grads(q, k, v, do, causal, scale)
            sdpa_err = (rel_err(so, o), max(rel_err(g, r) for g, r in zip(sgrads, grads)))
        except Exception:  # shown as nan; SDPA's own rows say why
            sdpa_err = (float("nan"), float("nan"))
        _small[causal] = (q, k, v, do, scale, o, lse, grads, sdpa_err)
    return _small[causal]


def check_fwd_small(rt, cfg, causal):
    q, k, v, do, scale, o_ref, lse_ref, _, _ = small_case(causal)
    o, lse, run = tile_fwd(rt, cfg, causal, q, k, v, scale)
    run()
    torch.cuda.synchronize()
    check("lse", (lse - lse_ref).abs().max().item(), TOL_LSE)
    return check("O at %s" % (CHECK_SHAPE,), rel_err(o, o_ref), TOL_O)


def check_bwd_small(rt, fcfg, bcfg, causal):
    q, k, v, do, scale, _, _, grads_ref, _ = small_case(causal)
    o, lse, fwd = tile_fwd(rt, fcfg, causal, q, k, v, scale)
    fwd()
    grads, run = tile_bwd(rt, bcfg, causal, q, k, v, o, lse, do, scale)
    run()
    torch.cuda.synchronize()
    return max(check("d%s at %s" % (n, CHECK_SHAPE), rel_err(g, r), TOL_GRAD)
               for n, g, r in zip("qkv", grads, grads_ref))


# ---- fp8 ------------------------------------------------------------------------------------
FP8 = os.path.join(ROOT, "examples", "flash_attn_fwd_fp8.tile")
# per head dim: tile's bf16 forward (the same flags as FWD_CONFIGS) and attn_fwd_fp8_tma's
# (BM, BN, warps, stages) with a producer warpgroup and overlap, its default at d128
FP8_CONFIGS = {128: (("tma", "ws", "rot", 128, 128, 8, 2), (128, 128, 8, 2)),
               256: (("tma", "ws", "rot", 128, 64, 8, 2), (128, 64, 8, 2))}
TOL_FP8 = 3e-2    # relative error (norm) of O against the same e4m3 inputs in bf16: P is rounded to e4m3


def quantize_e4m3(t):
    """(t as e4m3 with a per-tensor scale, the f32 descale): t ~ e4m3 * descale, the
    largest magnitude at 448 (FA3's and transformer engine's per-tensor recipe)."""
    d = (t.abs().amax().float() / 448.0).clamp(min=1e-12)
    return (t.float() / d).to(torch.float8_e4m3fn), float(d)


def fp8_rows(rt):
    """attn_fwd_fp8_tma (examples/flash_attn_fwd_fp8.tile) at B, H, L of SHAPE and head
    dims 128 and 256, full and causal: q, k, v quantized to e4m3 per tensor (V passed
    transposed, [B*H, D, L], K-major for P V), O checked against SDPA flash on the same
    e4m3 values in bf16 (exact) with the descales folded into the scale and O, and
    timed beside tile's own bf16 forward on the bf16 inputs; FLOPs as the bf16 rows
    (the ratio is the bf16 forward's time over the fp8 one's)."""
    B, H, L, _ = SHAPE
    lines = []
    for D, (bcfg, fcfg) in FP8_CONFIGS.items():
        scale = 1 / math.sqrt(D)
        q, k, v, _ = inputs((B, H, L, D))
        (q8, qd), (k8, kd), (v8, vd) = quantize_e4m3(q), quantize_e4m3(k), quantize_e4m3(v)
        vt8 = v8.transpose(2, 3).contiguous()   # [B, H, D, L]
        for causal in (False, True):
            mode = "causal" if causal else "full"
            flops = 4.0 * B * H * L * L * D * (0.5 if causal else 1.0)
            try:
                _, _, run_b = tile_fwd(rt, bcfg, causal, q, k, v, scale)
                t_b = bench(run_b)
                lines.append("| fwd bf16 d%d | %s | tile | %s | | %s |" % (D, mode, bcfg, figures(flops, t_b, None)))
            except Exception as e:
                t_b = None
                lines.append("| fwd bf16 d%d | %s | tile | %s | %s | | | | |" % (D, mode, bcfg, failed(e)))
            try:
                BM, BN, warps, stages = fcfg
                o = nan_like((B, H, L, D), torch.bfloat16)
                lse = nan_like((B, H, L), torch.float32)
                kern = rt.kernel(FP8, "attn_fwd_fp8_tma", BM=BM, BN=BN, D=D, CAUSAL=int(causal), warps=warps,
                                 stages=stages, ws=1, overlap=1)
                run = kern.prepare("ptr ptr ptr ptr ptr i32 i32 f32 f32 f32 f32 i32 i32", o, lse, q8, k8, vt8, B * H, L,
                                   scale, qd, kd, vd, B * H * L, B * H * D)
                run()
                torch.cuda.synchronize()
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    ref = F.scaled_dot_product_attention(q8.to(torch.bfloat16), k8.to(torch.bfloat16),
                                                         v8.to(torch.bfloat16), is_causal=causal,
                                                         scale=scale * qd * kd).float() * vd
                e = check("fp8 O vs SDPA on the e4m3 values", rel_err(o.float(), ref), TOL_FP8)
                t = bench(run)
                vs = "" if t_b is None else "%.3fx bf16" % (t_b / t)
                lines.append("| fwd fp8 d%d | %s | tile | %s | %.1e | %.3f | %.1f | %.1f%% | %s |"
                             % (D, mode, fcfg, e, t * 1e3, flops / t / 1e12, 100 * flops / t / PEAK, vs))
                del o, lse, ref
            except Exception as e:
                lines.append("| fwd fp8 d%d | %s | tile | %s | %s | | | | |" % (D, mode, fcfg, failed(e)))
        del q, k, v, q8, k8, v8, vt8
        torch.cuda.empty_cache()
    return lines


# ---- the benchmark --------------------------------------------------------------------------
def run_mode(rt, causal):
    B, H, L, D = SHAPE
    scale = 1 / math.sqrt(D)
    flops_fwd = 4.0 * B * H * L * L * D * (0.5 if causal else 1.0)
    flops_bwd = 2.5 * flops_fwd
    mode = "causal" if causal else "full"
    q, k, v, do = inputs(SHAPE)
    lines = []
    # --quick: the plain and the fastest built-in forms (configs given are all run)
    fcfgs = FWD_CONFIGS[:2] if QUICK and not GIVEN_FWD else FWD_CONFIGS
    bcfgs = [BWD_CONFIGS[0], BWD_CONFIGS[2]] if QUICK and not GIVEN_BWD and len(BWD_CONFIGS) > 2 else BWD_CONFIGS
    sdpa_small = small_case(causal)[8]

    # SDPA flash: the reference outputs at this shape, and its times.
    t_sf = t_sb = None
    try:
        o_s, grads_s = sdpa_grads(q, k, v, do, causal, scale)
        t_sf = bench(lambda: sdpa(q, k, v, causal, scale))
        lines.append("| fwd | %s | SDPA flash | | %.1e (f32 ref) | %s |" % (mode, sdpa_small[0], figures(flops_fwd, t_sf, t_sf)))
        qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            og = F.scaled_dot_product_attention(qg, kg, vg, is_causal=causal, scale=scale)
            t_sb = bench(lambda: og.backward(do, retain_graph=True), grad_to_none=[qg, kg, vg])
        lines.append("| bwd | %s | SDPA flash | | %.1e (f32 ref) | %s |" % (mode, sdpa_small[1], figures(flops_bwd, t_sb, t_sb)))
        del og, qg, kg, vg
    except Exception as e:
        o_s = grads_s = None
        lines.append("| fwd/bwd | %s | SDPA flash | | %s | | | | |" % (mode, failed(e)))
    # SDPA's other Hopper backends (cuDNN; and what it picks by itself): the ratio column
    # stays against flash, the fastest SDPA row is the peer (bench/attention.py's note).
    for name, backends in (("SDPA cuDNN", [SDPBackend.CUDNN_ATTENTION]), ("SDPA default", None)):
        try:
            def fwd_other(q=q, k=k, v=v):
                if backends is None:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
                with sdpa_kernel(backends):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)
            e = rel_err(fwd_other(), o_s) if o_s is not None else float("nan")
            t_of = bench(fwd_other)
            lines.append("| fwd | %s | %s | | %.1e (vs flash) | %s |" % (mode, name, e, figures(flops_fwd, t_of, t_sf)))
            qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))
            og = fwd_other(qg, kg, vg)
            t_ob = bench(lambda: og.backward(do, retain_graph=True), grad_to_none=[qg, kg, vg])
            lines.append("| bwd | %s | %s | | | %s |" % (mode, name, figures(flops_bwd, t_ob, t_sb)))
            del og, qg, kg, vg
        except Exception as e:
            lines.append("| fwd/bwd | %s | %s | | %s | | | | |" % (mode, name, failed(e)))

    for fcfg in fcfgs:
        try:
            e1 = check_fwd_small(rt, fcfg, causal)
            o, lse, run = tile_fwd(rt, fcfg, causal, q, k, v, scale)
            run()
            torch.cuda.synchronize()
            e2 = check("O vs SDPA", rel_err(o, o_s), TOL_O) if o_s is not None else float("nan")
            lines.append("| fwd | %s | tile | %s | %.1e, %.1e | %s |" % (mode, fcfg, e1, e2, figures(flops_fwd, bench(run), t_sf)))
        except Exception as e:
            lines.append("| fwd | %s | tile | %s | %s | | | | |" % (mode, fcfg, failed(e)))
    # The backward takes o and lse from the first forward config.
    for bcfg in bcfgs:
        try:
            e1 = check_bwd_small(rt, fcfgs[0], bcfg, causal)
            o, lse, fwd = tile_fwd(rt, fcfgs[0], causal, q, k, v, scale)
            fwd()
            grads, run = tile_bwd(rt, bcfg, causal, q, k, v, o, lse, do, scale)
            run()
            torch.cuda.synchronize()
            e2 = float("nan")
            if grads_s is not None:
                e2 = max(check("d%s vs SDPA" % n, rel_err(g, r), TOL_GRAD) for n, g, r in zip("qkv", grads, grads_s))
            lines.append("| bwd | %s | tile | %s | %.1e, %.1e | %s |" % (mode, bcfg, e1, e2, figures(flops_bwd, bench(run), t_sb)))
        except Exception as e:
            lines.append("| bwd | %s | tile | %s | %s | | | | |" % (mode, bcfg, failed(e)))
    return lines


def main():
    global QUICK
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", "libtileRT.so"))
    ap.add_argument("--out")
    ap.add_argument("--quick", action="store_true", help="two configs per pass (plain, TMA + ws), shorter timing")
    ap.add_argument("--fwd-configs", help="forward configs 'BM,BN,warps[,stages];...' instead of the built-in ones")
    ap.add_argument("--no-bwd", action="store_true", help="the forward pass only")
    ap.add_argument("--bwd-configs", help="backward configs 'BM,BN,warps/BM,BN,warps;...' (dK/dV / dQ)")
    ap.add_argument("--fp8", action="store_true", help="the fp8 forward's rows (d128, d256) only, beside tile's bf16")
    a_ = ap.parse_args()
    QUICK = a_.quick
    global GIVEN_FWD, GIVEN_BWD
    GIVEN_FWD = bool(a_.fwd_configs)
    GIVEN_BWD = bool(a_.bwd_configs)
    if a_.fwd_configs:   # 'tma:BM,BN,warps[,stages]' names attn_fwd_tma, 'rot:...' the rotated loops,
        # 'ws:' a producer warpgroup, 'cl:' clusters of two CTAs; flags combine with '+' ('tma+ws:128,64,8,3')
        FWD_CONFIGS[:] = [parse_flags(c) + tuple(int(x) for x in c.split(":")[-1].split(","))
                          for c in a_.fwd_configs.split(";") if c]
    if a_.bwd_configs:   # 'tma:' runs the _tma kernels (TMA rings, a producer warpgroup), 'tma+ov:'
        # with overlap = 1 (their dots issued together, waited for late)
        BWD_CONFIGS[:] = [parse_flags(c) +
                          tuple(tuple(int(x) for x in half.split(",")) for half in c.split(":")[-1].split("/"))
                          for c in a_.bwd_configs.split(";") if c]
    if a_.no_bwd:
        BWD_CONFIGS[:] = []
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False  # the f32 reference in f32
    rt = tilert.Runtime(a_.lib)
    B, H, L, D = SHAPE
    lines = ["GPU: %s; attention B=%d H=%d L=%d D=%d, bf16; medians of do_bench%s; peak %.0f TFLOP/s (H200 SXM dense bf16)"
             % (torch.cuda.get_device_name(), B, H, L, D, " (--quick)" if QUICK else "", PEAK / 1e12), "",
             "tile configs: fwd (BM, BN, warps); bwd ((BM, BN, warps) of dK/dV, (BM, BN, warps) of dQ). "
             "check: tile's relative error against f32 at B=%d H=%d L=%d D=%d (O, and the worst of dQ, dK, dV; "
             "the logsumexp within %.0e), then against SDPA flash at the benchmark shape; SDPA's rows show its "
             "own error against f32 at the small shape." % (CHECK_SHAPE + (TOL_LSE,)), "",
             "| pass | mask | implementation | config | check (rel. err) | time (ms) | TFLOP/s | % of peak | vs SDPA flash |",
             "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    if a_.fp8:   # the fp8 section instead of the bf16 table ("% of peak" still of the bf16 peak)
        part = fp8_rows(rt)
        print("\n".join(part), flush=True)
        lines += part
    for causal in ((False, True) if not a_.fp8 else ()):
        try:
            part = run_mode(rt, causal)
        except Exception as e:  # the small-shape references themselves failed
            part = ["| | %s | | | %s | | | | |" % ("causal" if causal else "full", failed(e))]
        print("\n".join(part), flush=True)
        lines += part
        torch.cuda.empty_cache()
    text = "\n".join(lines)
    if a_.out:
        with open(a_.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
