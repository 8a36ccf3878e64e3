"""The LM head fused with its cross-entropy (@linear_cross_entropy, docs/GRAPHS.md "The
LM head") on the GPU through libtileRT's tensor-graph API: the chunked plan's four step
kernels (logits, loss, dx, dw once per chunk, dw accumulated over the chunks) against
PyTorch computing the loss and both gradients in f64, and against the same graph
without the attribute (the [T, V] logits in memory). bf16 and f32 heads, both forms
(w [D, V] and x @ trans(w) with torch's Linear weight [V, D]), a vocabulary that is no
multiple of a block (V = 1000 and 32001), T one chunk and several, a multiple of the
chunk and not (a bf16 head runs up to 256 + 2*256 = 768 rows as one chunk, its dw
stored at once without f32 sums: T 200, 300, 512 and 700; chunks of 256 with the sums
at T 1000; an f32 head in chunks past 256), rows
ignored, a scaled loss; and the forward alone (no grad: linear_cross_entropy_rows, the
logits a block at a time inside an online logsumexp). Checked normwise per result (max |tile - torch| within TOL of
max |torch|). Exits 77 (skipped) without torch or a CUDA device.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 tests/gpu/test_linear_ce_gpu.py
"""
import os
import sys
import tempfile

from graph_gpu_util import check_normwise, runtime, torch_or_skip

torch = torch_or_skip()

TOL = {torch.float32: 1e-4, torch.bfloat16: 3e-2}

SRC = """
@linear_cross_entropy(chunk = 256)
graph head(x: {E}[T, {D}], w: {E}[{D}, V], lab: i64[T]) -> (f32, {E}[T, {D}], {E}[{D}, V]) {{
    let l = cross_entropy(x @ w, lab) * 0.75;
    let (dx, dw) = grad(l, [x, w]);
    return (l, dx, dw);
}}

graph plain(x: {E}[T, {D}], w: {E}[{D}, V], lab: i64[T]) -> (f32, {E}[T, {D}], {E}[{D}, V]) {{
    let l = cross_entropy(x @ w, lab) * 0.75;
    let (dx, dw) = grad(l, [x, w]);
    return (l, dx, dw);
}}

@linear_cross_entropy
graph infer(x: {E}[T, {D}], w: {E}[V, {D}], lab: i64[T]) -> f32 {{
    return cross_entropy(x @ trans(w), lab);
}}

@linear_cross_entropy(chunk = 256)
graph linear(x: {E}[T, {D}], w: {E}[V, {D}], lab: i64[T]) -> (f32, {E}[T, {D}], {E}[V, {D}]) {{
    let l = cross_entropy(x @ trans(w), lab);
    let (dx, dw) = grad(l, [x, w]);
    return (l, dx, dw);
}}
"""


def reference(x, w, lab, scale, transposed):
    xd = x.double().requires_grad_()
    wd = w.double().requires_grad_()
    logits = xd @ (wd.t() if transposed else wd)
    loss = torch.nn.functional.cross_entropy(logits, lab, ignore_index=-100) * scale
    loss.backward()
    return [loss.detach().reshape(()), xd.grad, wd.grad]


def main():
    rt = runtime("tile-linear-ce-")
    torch.manual_seed(0)
    bad = ran = 0
    tmp = tempfile.mkdtemp(prefix="tile-linear-ce-src-")
    for dtype, E in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        D = 256
        path = os.path.join(tmp, "head_%s.tile" % E)
        with open(path, "w") as f:
            f.write(SRC.format(E=E, D=D))
        for T, V in ((200, 1000), (300, 1000), (512, 1000), (700, 32001), (1000, 1000)):
            for name in ("head", "plain", "linear", "infer"):
                label = "%s %s T=%d V=%d" % (E, name, T, V)
                try:
                    transposed = name in ("linear", "infer")
                    x = (torch.randn(T, D, device="cuda", dtype=torch.float64) * 0.5).to(dtype)
                    w = (torch.randn(*((V, D) if transposed else (D, V)), device="cuda", dtype=torch.float64) * 0.05).to(dtype)
                    lab = torch.randint(0, V, (T,), device="cuda", dtype=torch.int64)
                    lab[::7] = -100
                    g = rt.graph(path, name)
                    g.bind("x", x)
                    g.bind("w", w)
                    g.bind("lab", lab)
                    g.bind_size("T", T)
                    g.bind_size("V", V)
                    got = [torch.full((), float("nan"), device="cuda", dtype=torch.float32),
                           torch.full((T, D), float("nan"), device="cuda", dtype=dtype),
                           torch.full(tuple(w.shape), float("nan"), device="cuda", dtype=dtype)]
                    if name == "infer":
                        got = got[:1]
                    for i, t in enumerate(got):
                        g.bind_output(i, t)
                    g.run()
                    torch.cuda.synchronize()
                    want = reference(x, w, lab, 1.0 if transposed else 0.75, transposed)
                    # zip: the loss alone for infer
                    check_normwise(got, want, lambda i: TOL[torch.float32 if i == 0 else dtype])
                    print("ok   %s (%d kernels)" % (label, g.num_kernels()))
                except Exception as e:  # every case runs; the failures are listed
                    bad += 1
                    print("FAIL %s: %s" % (label, str(e).splitlines()[0] if str(e) else type(e).__name__))
                ran += 1
    print("linear cross-entropy on the GPU: %d passed, %d failed" % (ran - bad, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
