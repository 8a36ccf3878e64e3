"""tile.ops: ready-made operators over the repository's kernels, for PyTorch tensors.

    o = tile.ops.attention(q, k, v, causal=True)              # q, k, v: (B, H, L, D)
    o = tile.ops.attention(q, k, v, window=(4096, 0))          # sliding window
    o = tile.ops.attention(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen=m)
                                                               # packed: (total, H, D)

attention is a drop-in for torch.nn.functional.scaled_dot_product_attention with
autograd: the forward runs examples/flash_attn_fwd.tile and saves O and the logsumexp,
the backward runs examples/flash_attn_bwd.tile (delta = rowsum(dO * O) by its
preprocess kernel, then dK/dV and dQ). On a GPU of compute capability 9.x it runs the
_tma kernels (TMA rings, a producer warpgroup: the fast ones on sm_90a) where the
layout allows, the plain pointer kernels elsewhere; impl="tma" / "pointer" forces one.
docs/PYTHON.md has the details. torch is imported on first use only."""
import math
import re
from pathlib import Path

_FWD, _BWD = "flash_attn_fwd.tile", "flash_attn_bwd.tile"
_modules = {}      # "bf16" / "f16" -> (forward module, backward module)
_Function = None   # the torch.autograd.Function, made on first use


def _example(name):
    """examples/NAME of the source checkout this package sits in or was built from."""
    roots = [Path(__file__).resolve().parent.parent.parent]
    try:
        from . import _paths
        roots += [Path(p) for p in _paths.SOURCE_ROOTS]
    except ImportError:
        pass
    for r in roots:
        if (r / "examples" / name).is_file():
            return r / "examples" / name
    raise FileNotFoundError("tile.ops: examples/%s not found beside the package (looked in %s)"
                            % (name, ", ".join(str(r) for r in roots)))


def _kernels(elem):
    """The attention modules for bf16 or f16: the files are written for bf16, and the
    f16 ones are the same text with the word bf16 replaced (the language has no type
    parameters)."""
    if elem not in _modules:
        from ._module import loads
        mods = []
        for name in (_FWD, _BWD):
            path = _example(name)
            text = path.read_text(encoding="utf-8")
            if elem != "bf16":
                text = re.sub(r"\bbf16\b", elem, text)
            mods.append(loads(text, name=str(path) if elem == "bf16" else "%s (%s)" % (path, elem)))
        _modules[elem] = tuple(mods)
    return _modules[elem]


def _tile_width(dh):
    """The kernels' tile width D for a head dim: a power of two from 16 (96 runs on 128,
    the columns past it masked)."""
    if not 1 <= dh <= 256:
        raise ValueError("tile.ops.attention: head dim %d is not supported (1 to 256)" % dh)
    return max(16, 1 << (dh - 1).bit_length())


def _consts(dh, causal, window, group):
    wl, wr = (int(window[0]), int(window[1]))
    if wl < -1 or wr < -1:
        raise ValueError("tile.ops.attention: window sides are -1 (unbounded) or >= 0, got %r" % (window,))
    c = dict(D=_tile_width(dh), DH=dh, CAUSAL=int(bool(causal)), GROUP=group, WL=wl, WR=-1 if causal else wr)
    return c


def _fwd_cfg(d):
    """Block sizes: the kernels' defaults up to D = 128; smaller blocks at 256 (the
    tiles of K, V and the accumulators grow with D)."""
    return {} if d <= 128 else dict(BM=64, BN=32, stages=2)


def _bwd_cfg(d):
    return ({}, {}) if d <= 128 else (dict(BM=16, BN=32, stages=2), dict(BM=32, BN=16, stages=2))


def _tma_fwd_cfg(d):
    """The _tma forward's blocks: its default (BM = BN = 128, 2 stages) up to D = 128; at
    256 BN = 64 (Q [128, 256] and two stages of K and V fit shared memory; on an H100
    647 TFLOP/s, 1.02x cuDNN at B4 H16 L4096 causal off, docs/PERFORMANCE.md)."""
    return {} if d <= 128 else dict(BN=64, stages=2)


def _tma_bwd_cfg(d):
    """The _tma backward's blocks (dK/dV, dQ): their defaults up to D = 128. At 256 dK and
    dV are two launches of attn_bwd_dkv_split_tma (one [BN, 256] f32 accumulator a
    program: attn_bwd_dkdv_tma's two spilled at every block causal takes, 32 x 32 on
    mma.sync at best), so the dK/dV entry is a pair of blocks (dK's, dV's): dK (32
    queries, 128 keys, 8 warps, 3 stages), dV (64, 128, 8, 2), dQ (128, 32, 8, 3), all on
    wgmma with a producer warpgroup and no spills under ptxas -v, causal or not (shared
    memory: dK's K and V resident, 64 KB each, beside three 32-row stages of Q and dO,
    225 KB of the 227; dV 192 KB, dQ 225). bench/attention_forms.py --d256-bwd times
    others."""
    if d <= 128:
        return ({}, {})
    return ((dict(BM=32, BN=128, warps=8, stages=3), dict(BM=64, BN=128, warps=8, stages=2)),
            dict(BM=128, BN=32, warps=8, stages=3))


def _tma_dkdv(bwd, varlen, dk, dv, args, c, kv_cfg):
    """dK and dV by the _tma kernels (varlen: the _tma_varlen ones) on args (what follows
    dk and dv in attn_bwd_dkdv_tma's arguments): one launch of attn_bwd_dkdv_tma, or, where
    kv_cfg is a pair (_tma_bwd_cfg at D = 256), attn_bwd_dkv_split_tma for dK (PART 0)
    and again for dV (PART 1)."""
    suffix = "_varlen" if varlen else ""
    if isinstance(kv_cfg, tuple):
        split = getattr(bwd, "attn_bwd_dkv_split_tma" + suffix)
        split(dk, *args, **c, PART=0, **kv_cfg[0])
        split(dv, *args, **c, PART=1, **kv_cfg[1])
    else:
        getattr(bwd, "attn_bwd_dkdv_tma" + suffix)(dk, dv, *args, **c, **kv_cfg)


def _elem(q, k, v):
    import torch
    names = {torch.bfloat16: "bf16", torch.float16: "f16"}
    if q.dtype not in names or k.dtype != q.dtype or v.dtype != q.dtype:
        raise TypeError("tile.ops.attention: q, k and v must all be bfloat16 or all float16, got %s, %s, %s"
                        % (q.dtype, k.dtype, v.dtype))
    return names[q.dtype]


def _check_heads(hq, hkv, what):
    if hkv < 1 or hq % hkv:
        raise ValueError("tile.ops.attention: %s: %d query heads are not a multiple of %d key/value heads"
                         % (what, hq, hkv))
    return hq // hkv


IMPLS = ("auto", "tma", "pointer")


def _tma_refusal(q, dh):
    """Why the _tma kernels cannot take q's device and head dim (None: they can). They
    read Q, K, V and dO as blocks of [rows, DH] tensors, by TMA on sm_90a: rows of 16
    bytes or more (DH a multiple of 8), tiles of 64 or 128 columns (their block sizes,
    BM = BN = 128 forward, are for those; 256 would not fit shared memory). On CPU
    tensors the interpreter runs them (the same program, plain loads)."""
    if q.device.type == "cuda":
        import torch
        cc = torch.cuda.get_device_capability(q.device)
        if cc[0] != 9:
            return ("the _tma kernels are for compute capability 9.x (sm_90a: TMA, wgmma, a producer "
                    "warpgroup); %s is %d.%d" % (q.device, cc[0], cc[1]))
    elif q.device.type != "cpu":
        return "the _tma kernels run on CUDA devices of compute capability 9.x or CPU tensors, not %s" % q.device
    if dh % 8 or _tile_width(dh) not in (64, 128, 256):
        return ("the _tma kernels take head dims that are multiples of 8 from 40 to 256 (rows of 16-byte "
                "multiples, tiles of 64, 128 or 256 columns), not %d" % dh)
    return None


def _misaligned(ts):
    """The names of the tensors whose data is not 16-byte aligned (TMA's tensor maps need
    it; a view at an odd storage offset)."""
    return [n for n, t in ts if t.data_ptr() % 16]


def _choose(impl, q, dh):
    """"tma" or "pointer" for impl "auto", "tma" or "pointer": auto takes the _tma kernels
    on a CUDA device of compute capability 9.x where _tma_refusal has nothing to say;
    tma raises ValueError with the reason where it cannot run."""
    if impl not in IMPLS:
        raise ValueError("tile.ops.attention: impl is one of %s, got %r" % (", ".join(map(repr, IMPLS)), impl))
    if impl == "pointer":
        return "pointer"
    why = _tma_refusal(q, dh)
    if impl == "tma":
        if why:
            raise ValueError("tile.ops.attention: impl='tma' cannot run: " + why)
        return "tma"
    return "tma" if why is None and q.device.type == "cuda" else "pointer"


def _aligned(impl, forced, ts):
    """impl, or "pointer" when a tensor of ts is not 16-byte aligned (auto); forced
    (impl='tma' given) raises instead."""
    if impl != "tma":
        return impl
    bad = _misaligned(ts)
    if bad and forced:
        raise ValueError("tile.ops.attention: impl='tma' cannot run: %s not 16-byte aligned (TMA's tensor maps "
                         "need it; a view at an odd storage offset: clone it)" % ", ".join(bad))
    return "pointer" if bad else impl


def _aligned_copy(t):
    """t, or a copy of it at a fresh (aligned) address when it is not 16-byte aligned."""
    return t.clone() if t.data_ptr() % 16 else t


# ---- the padded form: (B, H, L, D), one length --------------------------------------------
def _forward_padded(q, k, v, causal, window, scale, impl):
    """impl "tma": attn_fwd_tma on the heads as rows of one [B * H * L, DH] tensor (the
    contiguous (B, H, L, DH) tensors are that), rows = k's B * HKV * L; its @autotune
    default is bench/attention.py's tma+ws+rot:128,128,8,2 (a producer warpgroup, the
    softmax under P V)."""
    import torch
    B, HQ, L, DH = q.shape
    group = _check_heads(HQ, k.shape[1], "q and k")
    fwd, _ = _kernels(_elem(q, k, v))
    o = torch.empty_like(q)
    lse = torch.empty((B * HQ, L), device=q.device, dtype=torch.float32)
    c = _consts(DH, causal, window, group)
    if B * HQ and L:
        if impl == "tma":
            fwd.attn_fwd_tma(o, lse, q, k, v, B * HQ, L, scale, DH, B * k.shape[1] * L, **c, **_tma_fwd_cfg(c["D"]))
        else:
            fwd.attn_fwd(o, lse, q, k, v, B * HQ, L, scale, L * DH, DH, **c, **_fwd_cfg(c["D"]))
    return o, lse


def _backward_padded(do, q, k, v, o, lse, causal, window, scale, impl):
    """impl "tma": attn_bwd_dkdv_tma and attn_bwd_dq_tma at their @launch defaults
    (bench/attention.py's tma:64,128,8/128,64,8, 3 stages, a producer warpgroup)."""
    import torch
    B, HQ, L, DH = q.shape
    group = HQ // k.shape[1]
    _, bwd = _kernels(_elem(q, k, v))
    c = _consts(DH, causal, window, group)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    if B * HQ and L:
        delta = torch.empty((B * HQ, L), device=q.device, dtype=torch.float32)
        bwd.attn_bwd_preprocess(delta, o, do, B * HQ, L, L * DH, DH, D=c["D"], DH=DH)
        if impl == "tma":
            rows = B * k.shape[1] * L
            kv_cfg, q_cfg = _tma_bwd_cfg(c["D"])
            _tma_dkdv(bwd, False, dk, dv, (q, k, v, do, lse, delta, B * HQ, L, scale, DH, rows), c, kv_cfg)
            bwd.attn_bwd_dq_tma(dq, q, k, v, do, lse, delta, B * HQ, L, scale, DH, rows, **c, **q_cfg)
        else:
            kv_cfg, q_cfg = _bwd_cfg(c["D"])
            bwd.attn_bwd_dkdv(dk, dv, q, k, v, do, lse, delta, B * HQ, L, scale, L * DH, DH, **c, **kv_cfg)
            bwd.attn_bwd_dq(dq, q, k, v, do, lse, delta, B * HQ, L, scale, L * DH, DH, **c, **q_cfg)
    else:
        dk.zero_()
        dv.zero_()
    return dq, dk, dv


# ---- the packed form: (total, H, D) with cu_seqlens -------------------------------------
def _lengths_max(cu):
    return int((cu[1:] - cu[:-1]).max().item()) if cu.numel() > 1 else 0


def _forward_varlen(q, k, v, cu_q, cu_k, max_q, causal, window, scale):
    import torch
    total_q, HQ, DH = q.shape
    group = _check_heads(HQ, k.shape[1], "q and k")
    fwd, _ = _kernels(_elem(q, k, v))
    B = cu_q.numel() - 1
    o = torch.zeros_like(q)
    lse = torch.full((HQ, total_q), math.inf, device=q.device, dtype=torch.float32)
    c = _consts(DH, causal, window, group)
    if B > 0 and max_q > 0 and HQ:
        fwd.attn_fwd_varlen(o, lse, q, k, v, cu_q, cu_k, max_q, B, HQ, total_q, scale,
                            HQ * DH, DH, k.shape[1] * DH, DH, **c, **_fwd_cfg(c["D"]))
    return o, lse


def _forward_varlen_tma(qh, kh, vh, cu_q, cu_k, max_q, causal, window, scale):
    """attn_fwd_tma_varlen on head-major tensors: qh (HQ, total_q, DH) and kh, vh (HKV,
    total_k, DH), contiguous (the heads one after the other: rows_q = HQ * total_q, rows =
    HKV * total_k); returns oh (HQ, total_q, DH) and lse [HQ, total_q]."""
    import torch
    HQ, total_q, DH = qh.shape
    HKV, total_k = kh.shape[0], kh.shape[1]
    group = _check_heads(HQ, HKV, "q and k")
    fwd, _ = _kernels(_elem(qh, kh, vh))
    B = cu_q.numel() - 1
    oh = torch.zeros_like(qh)
    lse = torch.full((HQ, total_q), math.inf, device=qh.device, dtype=torch.float32)
    c = _consts(DH, causal, window, group)
    if B > 0 and max_q > 0 and HQ:
        fwd.attn_fwd_tma_varlen(oh, lse, qh, kh, vh, cu_q, cu_k, max_q, B, HQ, total_q, total_k, scale,
                                HQ * total_q, HKV * total_k, **c, **_tma_fwd_cfg(c["D"]))
    return oh, lse


def _backward_varlen_tma(doh, qh, kh, vh, oh, lse, cu_q, cu_k, max_q, causal, window, scale):
    """The _tma_varlen backward on _forward_varlen_tma's layouts; dO head-major too.
    Returns dQ, dK, dV head-major."""
    import torch
    HQ, total_q, DH = qh.shape
    HKV, total_k = kh.shape[0], kh.shape[1]
    _, bwd = _kernels(_elem(qh, kh, vh))
    B = cu_q.numel() - 1
    c = _consts(DH, causal, window, HQ // HKV)
    dqh, dkh, dvh = torch.zeros_like(qh), torch.zeros_like(kh), torch.zeros_like(vh)
    max_k = _lengths_max(cu_k)
    if B > 0 and HQ and total_q:
        # delta [HQ, total_q] of the head-major rows: BH = HQ, L = total_q
        delta = torch.empty((HQ, total_q), device=qh.device, dtype=torch.float32)
        bwd.attn_bwd_preprocess(delta, oh, doh, HQ, total_q, total_q * DH, DH, D=c["D"], DH=DH)
        rows_q, rows = HQ * total_q, HKV * total_k
        kv_cfg, q_cfg = _tma_bwd_cfg(c["D"])
        if max_k > 0:
            _tma_dkdv(bwd, True, dkh, dvh, (qh, kh, vh, doh, lse, delta, cu_q, cu_k, max_k, B, HQ, total_q, total_k,
                                            scale, rows_q, rows), c, kv_cfg)
        if max_q > 0:
            bwd.attn_bwd_dq_tma_varlen(dqh, qh, kh, vh, doh, lse, delta, cu_q, cu_k, max_q, B, HQ, total_q,
                                       total_k, scale, rows_q, rows, **c, **q_cfg)
    return dqh, dkh, dvh


def _backward_varlen(do, q, k, v, o, lse, cu_q, cu_k, max_q, causal, window, scale):
    import torch
    total_q, HQ, DH = q.shape
    HKV = k.shape[1]
    _, bwd = _kernels(_elem(q, k, v))
    B = cu_q.numel() - 1
    c = _consts(DH, causal, window, HQ // HKV)
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    max_k = _lengths_max(cu_k)
    if B > 0 and HQ and total_q:
        # delta of every packed row: the preprocess kernel with BH = H, L = total_q and the
        # strides of a head (DH) and a token (H * DH): delta is [H, total_q], as lse
        delta = torch.empty((HQ, total_q), device=q.device, dtype=torch.float32)
        bwd.attn_bwd_preprocess(delta, o, do, HQ, total_q, DH, HQ * DH, D=c["D"], DH=DH)
        kv_cfg, q_cfg = _bwd_cfg(c["D"])
        if max_k > 0:
            bwd.attn_bwd_dkdv_varlen(dk, dv, q, k, v, do, lse, delta, cu_q, cu_k, max_k, B, HQ, total_q, scale,
                                     HQ * DH, DH, HKV * DH, DH, **c, **kv_cfg)
        if max_q > 0:
            bwd.attn_bwd_dq_varlen(dq, q, k, v, do, lse, delta, cu_q, cu_k, max_q, B, HQ, total_q, scale,
                                   HQ * DH, DH, HKV * DH, DH, **c, **q_cfg)
    return dq, dk, dv


def _function():
    global _Function
    if _Function is None:
        import torch

        class Attention(torch.autograd.Function):
            """forward(q, k, v, causal, window, scale, cu_q, cu_k, max_q, impl, forced) -> o;
            saves O and the logsumexp; backward runs the backward kernels of the same
            impl ("tma" or "pointer"; forced: impl='tma' was given, so a misaligned
            tensor is an error instead of the pointer kernels)."""

            @staticmethod
            def forward(ctx, q, k, v, causal, window, scale, cu_q, cu_k, max_q, impl, forced):
                # the kernels take rows of DH contiguous elements, heads and tokens
                # (or sequences) at the strides of a contiguous tensor; the packed _tma
                # kernels take the heads one after the other ((H, total, DH): a copy,
                # none when the caller's tensors are head-major views)
                if cu_q is not None and impl == "tma":
                    q, k, v = (_aligned_copy(t.transpose(0, 1).contiguous()) for t in (q, k, v))
                else:
                    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
                    impl = _aligned(impl, forced, (("q", q), ("k", k), ("v", v)))
                if cu_q is None:
                    o, lse = _forward_padded(q, k, v, causal, window, scale, impl)
                    out = o
                elif impl == "tma":
                    o, lse = _forward_varlen_tma(q, k, v, cu_q, cu_k, max_q, causal, window, scale)
                    out = o.transpose(0, 1)
                else:
                    o, lse = _forward_varlen(q, k, v, cu_q, cu_k, max_q, causal, window, scale)
                    out = o
                ctx.save_for_backward(q, k, v, o, lse, cu_q, cu_k)
                ctx.args = (causal, window, scale, max_q, impl)
                return out

            @staticmethod
            def backward(ctx, do):
                q, k, v, o, lse, cu_q, cu_k = ctx.saved_tensors
                causal, window, scale, max_q, impl = ctx.args
                if cu_q is None:
                    do = do.contiguous()
                    if impl == "tma":
                        do = _aligned_copy(do)
                    dq, dk, dv = _backward_padded(do, q, k, v, o, lse, causal, window, scale, impl)
                elif impl == "tma":
                    do = _aligned_copy(do.transpose(0, 1).contiguous())
                    dq, dk, dv = (t.transpose(0, 1) for t in _backward_varlen_tma(
                        do, q, k, v, o, lse, cu_q, cu_k, max_q, causal, window, scale))
                else:
                    do = do.contiguous()
                    dq, dk, dv = _backward_varlen(do, q, k, v, o, lse, cu_q, cu_k, max_q, causal, window, scale)
                return dq, dk, dv, None, None, None, None, None, None, None, None

        _Function = Attention
    return _Function


def attention(q, k, v, causal=False, window=(-1, -1), scale=None, cu_seqlens_q=None, cu_seqlens_k=None,
              max_seqlen=None, impl="auto"):
    """softmax(scale * q k^T + mask) v, differentiable in q, k and v.

    q: (B, HQ, Lq, D) and k, v: (B, HKV, Lk, D), as scaled_dot_product_attention takes
    them; or packed, q: (total_q, HQ, D) and k, v: (total_k, HKV, D) with cu_seqlens_q,
    cu_seqlens_k (int32 [B + 1], the sequences' starts, 0 first) and max_seqlen (the
    longest query sequence; computed from cu_seqlens_q when None, which waits for the
    GPU). bfloat16 or float16; D from 1 to 256 (64, 96, 128, 256 in practice).
    HKV may divide HQ (grouped-query attention, as SDPA's enable_gqa: query head h reads
    key/value head h // (HQ // HKV)). causal: query i sees keys j <= i + Lk - Lq (aligned
    at the bottom right, as FlashAttention; the same as SDPA's is_causal when Lq == Lk).
    window = (left, right): query i sees keys from i + Lk - Lq - left to i + Lk - Lq +
    right, -1 unbounded (right is 0 with causal). A query that sees no key gets 0 (SDPA
    gives NaN there). scale: 1 / sqrt(D) when None.
    impl: "auto" runs the _tma kernels (TMA, a producer warpgroup) on CUDA tensors of a
    device of compute capability 9.x with D a multiple of 8 from 40 to 128 and 16-byte
    aligned data, the pointer kernels otherwise; "tma" forces them (ValueError saying why
    where they cannot run; on CPU tensors the interpreter runs them), "pointer" the
    pointer kernels. The same results either way (up to the order of f32 sums)."""
    import torch
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    window = (int(window[0]), int(window[1]))
    if (cu_seqlens_q is None) != (cu_seqlens_k is None):
        raise ValueError("tile.ops.attention: give both cu_seqlens_q and cu_seqlens_k, or neither")
    if k.shape != v.shape:
        raise ValueError("tile.ops.attention: k and v differ in shape: %s and %s" % (tuple(k.shape), tuple(v.shape)))
    fn = _function()
    forced = impl == "tma"
    impl = _choose(impl, q, q.shape[-1])
    if cu_seqlens_q is None:
        if q.dim() != 4 or k.dim() != 4 or q.shape[0] != k.shape[0] or q.shape[3] != k.shape[3]:
            raise ValueError("tile.ops.attention: q (B, H, L, D) and k, v (B, H', L', D) expected, got %s and %s"
                             % (tuple(q.shape), tuple(k.shape)))
        B, HQ, Lq, D = q.shape
        Lk = k.shape[2]
        if Lq == Lk:
            return fn.apply(q, k, v, causal, window, float(scale), None, None, None, impl, forced)
        # lengths that differ: the packed kernels on the batch as B sequences (autograd
        # carries the gradients through the reshapes); for the _tma ones (which take the
        # heads one after the other) views of head-major copies, which they take as is
        cu_q = torch.arange(0, B + 1, device=q.device, dtype=torch.int32) * Lq
        cu_k = torch.arange(0, B + 1, device=q.device, dtype=torch.int32) * Lk
        if impl == "tma":
            pack = lambda t: t.transpose(0, 1).reshape(t.shape[1], -1, D).transpose(0, 1)
        else:
            pack = lambda t: t.transpose(1, 2).reshape(-1, t.shape[1], D)
        o = fn.apply(pack(q), pack(k), pack(v), causal, window, float(scale), cu_q, cu_k, Lq, impl, forced)
        return o.reshape(B, Lq, HQ, D).transpose(1, 2)
    if q.dim() != 3 or k.dim() != 3 or q.shape[2] != k.shape[2]:
        raise ValueError("tile.ops.attention: packed q (total, H, D) and k, v (total, H', D) expected, got %s and %s"
                         % (tuple(q.shape), tuple(k.shape)))
    cu_q = cu_seqlens_q.to(device=q.device, dtype=torch.int32).contiguous()
    cu_k = cu_seqlens_k.to(device=q.device, dtype=torch.int32).contiguous()
    if cu_q.numel() != cu_k.numel() or cu_q.numel() < 1:
        raise ValueError("tile.ops.attention: cu_seqlens_q and cu_seqlens_k must both have B + 1 entries")
    if max_seqlen is None:
        max_seqlen = _lengths_max(cu_q)
    return fn.apply(q, k, v, causal, window, float(scale), cu_q, cu_k, int(max_seqlen), impl, forced)
