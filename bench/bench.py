"""Memory-bound kernels of tile against PyTorch eager, torch.compile and Triton, in one
run on one GPU. Each row: the median time of many timed runs after warm-up
(triton.testing.do_bench), the bytes the kernel must move (each input read once, each
output written once), the bandwidth that gives, and its fraction of the copy bandwidth
measured in the same run. Every tile result is checked against PyTorch first. softmax
and rmsnorm also get a "tile (max-autotune: ...)" row: the example with its @autotune
(warps) left to the tuner, which tunes the key on the first launch; the row names the
winner. (The plain "tile" row pins warps = 8.)

    python3 bench/bench.py [--lib build-gpu/runtime/libtileRT.so] [--out results.md]
"""
import argparse
import os
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tilert  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EX = os.path.join(ROOT, "examples")
ROWS, COLS = 32768, 4096
N_ADAM = 64 * 1024 * 1024


def bench(fn):
    return triton.testing.do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e-3


def copy_bandwidth():
    a = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    t = bench(lambda: b.copy_(a))
    return 2 * a.numel() / t


# ---- Triton peers -------------------------------------------------------------------
@triton.jit
def tr_softmax(out, inp, stride, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(inp + row * stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out + row * stride + cols, (e / tl.sum(e, 0)).to(tl.bfloat16), mask=mask)


@triton.jit
def tr_add_layernorm(y, h, x, r, w, b, n_cols, eps, BLOCK: tl.constexpr):
    base = tl.program_id(0) * n_cols
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    s = tl.load(x + base + cols, mask=mask).to(tl.float32) + tl.load(r + base + cols, mask=mask).to(tl.float32)
    tl.store(h + base + cols, s.to(tl.float16), mask=mask)
    mean = tl.sum(s, 0) / n_cols
    d = tl.where(mask, s - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, 0) / n_cols + eps)
    out = d * rstd * tl.load(w + cols, mask=mask) + tl.load(b + cols, mask=mask)
    tl.store(y + base + cols, out.to(tl.float16), mask=mask)


@triton.jit
def tr_rms_norm(y, x, w, n_cols, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    p = tl.program_id(0).to(tl.int64) * n_cols + cols
    xv = tl.load(x + p, mask=mask).to(tl.float32)
    ms = tl.sum(xv * xv, 0) / n_cols
    out = xv * (1.0 / tl.sqrt(ms + eps)) * tl.load(w + cols, mask=mask).to(tl.float32)
    tl.store(y + p, out.to(tl.bfloat16), mask=mask)


@triton.jit
def tr_gelu_bias(y, x, bias, n_cols, BLOCK: tl.constexpr):
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n_cols
    p = tl.program_id(0) * n_cols + cols
    v = tl.load(x + p, mask=mask).to(tl.float32) + tl.load(bias + cols, mask=mask).to(tl.float32)
    g = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y + p, g.to(tl.bfloat16), mask=mask)


@triton.jit
def tr_adamw(param, grad, m, v, n, lr, beta1, beta2, eps, wd, bias1, bias2, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    g = tl.load(grad + offs, mask=mask).to(tl.float32)
    m_new = beta1 * tl.load(m + offs, mask=mask) + (1.0 - beta1) * g
    v_new = beta2 * tl.load(v + offs, mask=mask) + (1.0 - beta2) * g * g
    tl.store(m + offs, m_new, mask=mask)
    tl.store(v + offs, v_new, mask=mask)
    p = tl.load(param + offs, mask=mask) * (1.0 - lr * wd)
    p = p - lr * (m_new / bias1) / (tl.sqrt(v_new / bias2) + eps)
    tl.store(param + offs, p, mask=mask)


# ---- the cases ---------------------------------------------------------------------------
LIB = None


def tuned(path, name, sig, *args, **consts):
    """The kernel with its @autotune keys left open, in a max-autotune context on an
    empty cache: the first launch tunes the key (docs/TUNING.md). Returns the row's
    name, with the config that won, and the launch."""
    k = tilert.tuning_runtime(LIB).kernel(path, name, **consts)
    run = k.prepare(sig, *args)
    run()
    torch.cuda.synchronize()
    return "tile (max-autotune: %s)" % k.last_config(), run


def case_softmax(rt):
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.bfloat16)
    out = torch.full_like(x, float("nan"))
    k = rt.kernel(os.path.join(EX, "softmax.tile"), "softmax", BLOCK=COLS, warps=8)
    tile = k.prepare("ptr ptr i64 i32 i32", out, x, COLS, ROWS, COLS)
    tile()
    torch.testing.assert_close(out, torch.softmax(x.float(), -1).to(x.dtype), atol=1e-3, rtol=1e-2)
    eager = lambda: torch.softmax(x, -1)  # noqa: E731
    comp = torch.compile(lambda t: torch.softmax(t.float(), -1).to(t.dtype))
    tr = lambda: tr_softmax[(ROWS,)](out, x, COLS, COLS, BLOCK=COLS, num_warps=8)  # noqa: E731
    out.fill_(float("nan"))
    label, tuned_run = tuned(os.path.join(EX, "softmax.tile"), "softmax", "ptr ptr i64 i32 i32", out, x, COLS, ROWS, COLS,
                             BLOCK=COLS)
    torch.testing.assert_close(out, torch.softmax(x.float(), -1).to(x.dtype), atol=1e-3, rtol=1e-2)
    return 2 * x.numel() * 2, {"tile": tile, label: tuned_run, "torch": eager, "torch.compile": lambda: comp(x),
                               "triton": tr}


def case_layernorm(rt):
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.float16)
    r = torch.randn_like(x)
    w = torch.rand(COLS, device="cuda") + 0.5
    b = torch.randn(COLS, device="cuda")
    y, h = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    k = rt.kernel(os.path.join(EX, "layernorm.tile"), "add_layernorm", BLOCK=COLS, warps=8)
    tile = k.prepare("ptr ptr ptr ptr ptr ptr i32 i32 f32", y, h, x, r, w, b, ROWS, COLS, 1e-5)
    tile()
    s = x.float() + r.float()
    torch.testing.assert_close(h, s.half(), atol=2e-3, rtol=1e-3)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(s, (COLS,), w, b, 1e-5).half(), atol=1e-2, rtol=1e-2)

    def eager():
        hh = x + r
        return torch.nn.functional.layer_norm(hh.float(), (COLS,), w, b, 1e-5).half(), hh
    comp = torch.compile(eager)
    tr = lambda: tr_add_layernorm[(ROWS,)](y, h, x, r, w, b, COLS, 1e-5, BLOCK=COLS, num_warps=8)  # noqa: E731
    return 4 * x.numel() * 2, {"tile": tile, "torch": eager, "torch.compile": comp, "triton": tr}


def case_rmsnorm(rt):
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.bfloat16)
    w = (torch.rand(COLS, device="cuda") + 0.5).to(torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    k = rt.kernel(os.path.join(EX, "rmsnorm.tile"), "rms_norm", BLOCK=COLS, warps=8)
    tile = k.prepare("ptr ptr ptr i32 i32 f32", y, x, w, ROWS, COLS, 1e-6)
    tile()

    def eager():
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
    torch.testing.assert_close(y, eager(), atol=1e-2, rtol=1e-2)
    comp = torch.compile(eager)
    tr = lambda: tr_rms_norm[(ROWS,)](y, x, w, COLS, 1e-6, BLOCK=COLS, num_warps=8)  # noqa: E731
    y.fill_(float("nan"))
    label, tuned_run = tuned(os.path.join(EX, "rmsnorm.tile"), "rms_norm", "ptr ptr ptr i32 i32 f32", y, x, w, ROWS,
                             COLS, 1e-6, BLOCK=COLS)
    torch.testing.assert_close(y, eager(), atol=1e-2, rtol=1e-2)
    return 2 * x.numel() * 2, {"tile": tile, label: tuned_run, "torch": eager, "torch.compile": comp, "triton": tr}


def case_gelu(rt):
    x = torch.randn(ROWS, COLS, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(COLS, device="cuda", dtype=torch.bfloat16)
    y = torch.full_like(x, float("nan"))
    k = rt.kernel(os.path.join(EX, "gelu_bias.tile"), "gelu_bias", BLOCK=1024)
    tile = k.prepare("ptr ptr ptr i32 i32", y, x, bias, ROWS, COLS)
    tile()
    eager = lambda: torch.nn.functional.gelu(x + bias)  # noqa: E731
    torch.testing.assert_close(y, torch.nn.functional.gelu(x.float() + bias.float()).to(x.dtype), atol=2e-2, rtol=1e-2)
    comp = torch.compile(lambda: torch.nn.functional.gelu(x + bias))
    tr = lambda: tr_gelu_bias[(ROWS, COLS // 1024)](y, x, bias, COLS, BLOCK=1024, num_warps=4)  # noqa: E731
    return 2 * x.numel() * 2, {"tile": tile, "torch": eager, "torch.compile": comp, "triton": tr}


def case_adamw(rt):
    n, step = N_ADAM, 10
    lr, b1, b2, eps, wd = 1e-3, 0.9, 0.999, 1e-8, 0.01
    p = torch.randn(n, device="cuda")
    g = (torch.randn(n, device="cuda") * 0.1).to(torch.bfloat16)
    m = torch.randn(n, device="cuda") * 0.01
    v = torch.rand(n, device="cuda") * 1e-4
    p0, m0, v0 = p.clone(), m.clone(), v.clone()
    k = rt.kernel(os.path.join(EX, "adamw.tile"), "adamw", BLOCK=1024)
    tile = k.prepare("ptr ptr ptr ptr i32 f32 f32 f32 f32 f32 i32", p, g, m, v, n, lr, b1, b2, eps, wd, step)
    tile()
    gf = g.float()
    mr = b1 * m0 + (1 - b1) * gf
    vr = b2 * v0 + (1 - b2) * gf * gf
    pr = p0 * (1 - lr * wd) - lr * (mr / (1 - b1 ** step)) / (torch.sqrt(vr / (1 - b2 ** step)) + eps)
    torch.testing.assert_close(p, pr, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(m, mr, atol=1e-6, rtol=1e-4)
    opt = torch.optim.AdamW([torch.nn.Parameter(p.clone())], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, fused=True)
    opt.param_groups[0]["params"][0].grad = gf
    eager = lambda: opt.step()  # noqa: E731

    def stepfn(p_, g_, m_, v_):
        m_.mul_(b1).add_(g_.float(), alpha=1 - b1)
        v_.mul_(b2).addcmul_(g_.float(), g_.float(), value=1 - b2)
        p_.mul_(1 - lr * wd).sub_(lr * (m_ / (1 - b1 ** step)) / (torch.sqrt(v_ / (1 - b2 ** step)) + eps))
    comp_fn = torch.compile(stepfn)
    comp = lambda: comp_fn(p, g, m, v)  # noqa: E731
    tr = lambda: tr_adamw[(triton.cdiv(n, 1024),)](p, g, m, v, n, lr, b1, b2, eps, wd,  # noqa: E731
                                                   1 - b1 ** step, 1 - b2 ** step, BLOCK=1024, num_warps=4)
    # reads param, grad, m, v; writes param, m, v
    return n * (4 + 2 + 4 + 4 + 4 + 4 + 4), {"tile": tile, "torch (fused AdamW)": eager,
                                             "torch.compile": comp, "triton": tr}


CASES = [("softmax bf16 %dx%d" % (ROWS, COLS), case_softmax),
         ("add+layernorm f16 %dx%d" % (ROWS, COLS), case_layernorm),
         ("rmsnorm bf16 %dx%d" % (ROWS, COLS), case_rmsnorm),
         ("gelu(x+b) bf16 %dx%d" % (ROWS, COLS), case_gelu),
         ("adamw f32/bf16 n=%dM" % (N_ADAM >> 20), case_adamw)]


def compile_times(rt_lib):
    """Cold and warm first launch of a small kernel in a new process: tile and Triton."""
    import subprocess
    res = {}
    for which in ("tile", "triton"):
        for state in ("cold", "warm"):
            env = dict(os.environ)
            d = "/tmp/compile-bench-%s" % which
            if state == "cold":
                subprocess.run(["rm", "-rf", d])
            env["TILE_CACHE_DIR"] = d
            env["TRITON_CACHE_DIR"] = d
            t0 = time.time()
            out = subprocess.run([sys.executable, __file__, "--first-launch", which, "--lib", rt_lib],
                                 env=env, capture_output=True, text=True)
            if out.returncode:
                res[(which, state)] = "error: " + out.stderr[-300:]
            else:
                res[(which, state)] = float(out.stdout.strip().split()[-1])
    return res


def first_launch(which, lib):
    x = torch.randn(4096, device="cuda")
    y = torch.empty_like(x)
    torch.cuda.synchronize()
    if which == "tile":
        t0 = time.perf_counter()
        rt = tilert.Runtime(lib)
        k = rt.kernel(os.path.join(EX, "vector_add.tile"), "vector_add")
        k("ptr ptr ptr i32", y, x, x, x.numel())
    else:
        @triton.jit
        def add(c, a, b, n, BLOCK: tl.constexpr):
            o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            m = o < n
            tl.store(c + o, tl.load(a + o, mask=m) + tl.load(b + o, mask=m), mask=m)
        t0 = time.perf_counter()
        add[(4,)](y, x, x, x.numel(), BLOCK=1024)
    torch.cuda.synchronize()
    print("first-launch-ms %.3f" % ((time.perf_counter() - t0) * 1e3))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", default=os.environ.get("TILE_LIB", "libtileRT.so"))
    ap.add_argument("--out")
    ap.add_argument("--first-launch")
    a = ap.parse_args()
    if a.first_launch:
        return first_launch(a.first_launch, a.lib)
    torch.manual_seed(0)
    global LIB
    LIB = a.lib
    rt = tilert.Runtime(a.lib)
    bw = copy_bandwidth()
    lines = ["GPU: %s; copy bandwidth measured now: %.2f TB/s; medians of do_bench (warmup 50 ms, rep 300 ms)"
             % (torch.cuda.get_device_name(), bw / 1e12), "",
             "| kernel | implementation | time (us) | GB moved | TB/s | % of copy bw | speed vs tile |",
             "|---|---|---|---|---|---|---|"]
    for name, make in CASES:
        try:
            nbytes, impls = make(rt)
        except Exception as e:  # a failed check is a row, not a crash of the whole run
            lines.append("| %s | tile | FAILED: %s | | | | |" % (name, str(e).splitlines()[0][:120]))
            continue
        times = {}
        for impl, fn in impls.items():
            try:
                times[impl] = bench(fn)
            except Exception as e:
                lines.append("| %s | %s | error: %s | | | | |" % (name, impl, str(e).splitlines()[0][:100]))
        for impl, t in times.items():
            rel = times.get("tile", float("nan")) / t
            lines.append("| %s | %s | %.1f | %.3f | %.2f | %.1f%% | %.2fx |" % (
                name, impl, t * 1e6, nbytes / 1e9, nbytes / t / 1e12, 100 * nbytes / t / bw, rel))
    ct = compile_times(a.lib)
    lines += ["", "| first launch of a small kernel in a new process | cold cache (ms) | warm cache (ms) |",
              "|---|---|---|"]
    for which in ("tile", "triton"):
        lines.append("| %s | %s | %s |" % (which, ct[(which, "cold")], ct[(which, "warm")]))
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
