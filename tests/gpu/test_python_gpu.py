"""The tile Python package on the GPU: CUDA tensors, PyTorch's current stream, the same
answers as the CPU interpreter on the same call, argument checks, a Context with its
own cache, a kernel registered as a PyTorch operator inside torch.compile with
fullgraph=True (no graph break), and a training graph's forward and backward parts. Exits 77 (skipped) without torch or a CUDA device.

    TILE_LIB=build-gpu/runtime/libtileRT.so python3 tests/gpu/test_python_gpu.py -v"""
import os
import sys
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT / "python"))
EXAMPLES = ROOT / "examples"

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("skipped: needs torch with a CUDA device")
    sys.exit(77)

try:
    import numpy as np
except ImportError:
    np = None
import tile  # noqa: E402

SCALARS = """
kernel scalars(out: *f32, h: f16, b: bf16, i: i64, u: u8, flag: bool, d: f64) grid(1) {
    let v = (h as f32) + (b as f32) + (i as f32) + (u as f32) + (d as f32);
    store(out + arange(0, 2), where(arange(0, 2) == 0, v, flag as f32));
}
"""


def softmax_module():
    return tile.load(EXAMPLES / "softmax.tile")


class Gpu(unittest.TestCase):
    def test_softmax_triton_style(self):
        k = softmax_module().softmax
        x = torch.randn(300, 1000, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        n_rows, n_cols = x.shape
        k(out, x, x.stride(0), n_rows, n_cols, BLOCK=1024)
        ref = torch.softmax(x.float(), dim=1)
        torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-3)
        out.zero_()
        k[(n_rows,)](out, x, x.stride(0), n_rows, n_cols, BLOCK=1024)
        torch.testing.assert_close(out.float(), ref, rtol=1e-2, atol=1e-3)

    def test_gemm_masked_copies_past_the_end(self):
        # The K loop's copies of the last stages point past the end of B (S - 1 tiles of
        # K: 2 MB here) and are masked off; before they were guarded, they still
        # accessed those addresses, and with an allocator that had unmapped what lay
        # after B (the L2 flush between benchmark runs did) the kernel faulted with a
        # misaligned or illegal address (found on the H200 at this shape).
        m = tile.load(EXAMPLES / "matmul_bf16.tile")
        M, N, K = 16384, 11008, 4096
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        c = torch.full((M, N), float("nan"), device="cuda", dtype=torch.bfloat16)
        flush = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device="cuda")
        for _ in range(10):
            flush.zero_()
            m.matmul_bf16(c, a, b, M, N, K, a.stride(0), b.stride(0), c.stride(0),
                          BM=128, BN=128, BK=32, warps=4, stages=4)
        torch.cuda.synchronize()
        rows = torch.randint(0, M, (64,), device="cuda")
        ref = a[rows].double() @ b.double()
        err = ((c[rows].double() - ref).norm() / ref.norm()).item()
        self.assertLess(err, 1e-2)

    def test_current_stream(self):
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        n = 1 << 20
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.zeros(n, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            k(c, a, b, n)
        s.synchronize()
        torch.testing.assert_close(c, a + b, rtol=0, atol=0)

    def test_cuda_graph_replays_with_updated_arguments(self):
        # Three launches captured into a tile.CudaGraph compute nothing until replayed;
        # a replay computes them in order; update() points launch 0 at other inputs and
        # launch 2 at another output, and the next replay reads and writes those.
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        n = 1 << 16
        a, b, a2 = (torch.randn(n, device="cuda") for _ in range(3))
        c, d, e, e2 = (torch.zeros(n, device="cuda") for _ in range(4))
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            g = tile.CudaGraph()
            with g.capture():
                k(c, a, b, n)              # c = a + b
                k(d, c, c, n)              # d = 2c
                k(e, d, a, n)              # e = d + a
            s.synchronize()
            self.assertEqual(len(g), 3)
            self.assertEqual(float(e.abs().sum()), 0.0)        # captured, not run
            g.replay()
            s.synchronize()
            torch.testing.assert_close(e, 2 * (a + b) + a, rtol=1e-6, atol=1e-5)
            g.update(0, c, a2, b, n)
            g.update(2, e2, d, a, n)
            g.replay()
            s.synchronize()
        torch.testing.assert_close(e2, 2 * (a2 + b) + a, rtol=1e-6, atol=1e-5)
        torch.testing.assert_close(e, 2 * (a + b) + a, rtol=1e-6, atol=1e-5)  # no longer written

    def test_tile_kernels_inside_a_torch_cuda_graph(self):
        # PyTorch's stream capture takes tile launches (compiled beforehand) as they are.
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        n = 4096
        a, b = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
        c = torch.zeros(n, device="cuda")
        k(c, a, b, n)
        torch.cuda.synchronize()
        c.zero_()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            k(c, a, b, n)
            c.mul_(2.0)
        torch.cuda.synchronize()
        g.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(c, 2 * (a + b), rtol=1e-6, atol=1e-6)

    @unittest.skipIf(np is None, "numpy is not installed")
    def test_same_answers_as_the_interpreter(self):
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        rng = np.random.default_rng(3)
        a, b = (rng.standard_normal(5000).astype(np.float32) for _ in range(2))
        c_cpu = np.zeros(5000, np.float32)
        k(c_cpu, a, b, 5000, BLOCK=512)
        c_gpu = torch.zeros(5000, device="cuda")
        k(c_gpu, torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda(), 5000, BLOCK=512)
        np.testing.assert_array_equal(c_gpu.cpu().numpy(), c_cpu)
        m = tile.loads(SCALARS, name="scalars.tile")
        o_cpu, o_gpu = np.zeros(2, np.float32), torch.zeros(2, device="cuda")
        for out in (o_cpu, o_gpu):
            m.scalars(out, 1.5, 2.0, -7, 200, True, 0.25)
        np.testing.assert_array_equal(o_gpu.cpu().numpy(), o_cpu)
        np.testing.assert_array_equal(o_cpu, [1.5 + 2 - 7 + 200 + 0.25, 1.0])

    def test_argument_checks(self):
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        a = torch.randn(100, device="cuda")
        with self.assertRaisesRegex(TypeError, r"argument 'b' is a tensor of float32 on cpu, but the launch runs on cuda:0"):
            k(a, a, a.cpu(), 100)
        if np is not None:
            with self.assertRaisesRegex(TypeError, r"argument 'a' is a numpy array of float32, but the launch runs on cuda:0"):
                k(a, a.cpu().numpy(), a, 100)
        with self.assertRaisesRegex(TypeError, r"argument 'a' is a tensor of float16 on cuda:0, but the parameter is \*f32"):
            k(a, a.half(), a, 100)
        with self.assertRaisesRegex(TypeError, r"kernel 'vector_add' has no grid\(...\) clause|missing argument 'n'"):
            k(a, a, a)

    def test_context_with_its_own_cache(self):
        with tempfile.TemporaryDirectory() as d:
            ctx = tile.Context("cuda", mode="default", cache_dir=d)
            self.assertEqual(ctx.cache_dir, d)
            self.assertEqual(ctx.device, "cuda:%d" % torch.cuda.current_device())
            k = ctx.load(EXAMPLES / "vector_add.tile").vector_add
            a = torch.randn(1000, device="cuda")
            c = torch.empty_like(a)
            k(c, a, a, 1000)
            torch.cuda.synchronize()
            torch.testing.assert_close(c, 2 * a)
            self.assertTrue(any(Path(d).rglob("*")), "nothing in the context's cache")
            with self.assertRaisesRegex(ValueError, "loaded into the cuda:0 context, but the arguments are on cpu"):
                k(c.cpu(), a.cpu(), a.cpu(), 1000)


class TorchOp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        k = softmax_module().softmax
        cls.op = tile.register_torch_op("tiletest::softmax", k, mutates_args=["out"], BLOCK=1024)

    @staticmethod
    def softmax(x):
        out = torch.empty_like(x)
        torch.ops.tiletest.softmax(out, x, x.stride(0), x.shape[0], x.shape[1])
        return out

    def test_eager(self):
        x = torch.randn(64, 1000, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(self.softmax(x).float(), torch.softmax(x.float(), 1),
                                   rtol=1e-2, atol=1e-3)

    def test_compiled_without_graph_break(self):
        def f(x):
            return self.softmax(x * 2).float() + 1
        compiled = torch.compile(f, fullgraph=True)
        x = torch.randn(128, 1000, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(compiled(x), torch.softmax((x * 2).float(), 1) + 1,
                                   rtol=1e-2, atol=1e-2)
        explain = torch._dynamo.explain(f)(x)
        self.assertEqual(explain.graph_break_count, 0)

    def test_opcheck(self):
        x = torch.randn(16, 1000, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        torch.library.opcheck(torch.ops.tiletest.softmax.default, (out, x, 1000, 16, 1000),
                              test_utils=("test_schema", "test_faketensor"))


class TrainingSplit(unittest.TestCase):
    """A training graph's forward and backward parts on the GPU (docs/GRAPHS.md "The
    forward/backward split"): the parts give the joint call's bits, two forwards before
    their backwards keep their own saved tensors, and tile.GraphFunction accumulates
    gradients as float64 autograd does."""

    SRC = """
graph mlp(x: f32[T, 64], w1: f32[64, 128], w2: f32[128, 32], y: f32[T, 32]) -> (f32, f32[64, 128], f32[128, 32]) {
    let h = tanh(x @ w1);
    let e = h @ w2 - y;
    let loss = mean(mean(e * e, 1), 0);
    let (dw1, dw2) = grad(loss, [w1, w2]);
    return (loss, dw1, dw2);
}
"""

    def setUp(self):
        torch.manual_seed(0)
        self.g = tile.loads(self.SRC).graphs["mlp"]
        self.w1 = torch.randn(64, 128, device="cuda") * 0.2
        self.w2 = torch.randn(128, 32, device="cuda") * 0.2
        self.data = [(torch.randn(t, 64, device="cuda"), torch.randn(t, 32, device="cuda")) for t in (100, 257)]

    def test_parts_give_the_joint_bits(self):
        for p in ("save-all", "selective", "checkpoint"):
            with self.subTest(policy=p):
                g = self.g.with_options(recompute=p)
                joint = [g(x, self.w1, self.w2, y) for x, y in self.data]
                steps = [g.forward(x, self.w1, self.w2, y) for x, y in self.data]
                for s, j in zip(reversed(steps), reversed(joint)):
                    for a, b in zip(g.backward(s), j):
                        self.assertTrue(torch.equal(a, b))

    def test_gradient_accumulation(self):
        fn = self.g.with_options(recompute="selective").autograd(grads={"w1": 1, "w2": 2})
        w1, w2 = self.w1.clone().requires_grad_(), self.w2.clone().requires_grad_()
        losses = [fn(x, w1, w2, y) for x, y in self.data]
        (losses[0] + 0.5 * losses[1]).backward()
        a = self.w1.double().requires_grad_()
        b = self.w2.double().requires_grad_()
        ref = sum(c * ((torch.tanh(x.double() @ a) @ b - y.double()) ** 2).mean()
                  for c, (x, y) in zip((1.0, 0.5), self.data))
        ref.backward()
        torch.testing.assert_close(w1.grad.double(), a.grad, rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(w2.grad.double(), b.grad, rtol=1e-4, atol=1e-6)


class LmHeadSplit(unittest.TestCase):
    """@linear_cross_entropy in a GraphFunction (Liger's order, docs/GRAPHS.md "The LM
    head"): the forward part computes the loss, dx and dw for a seed of 1, the backward
    scales them by the incoming gradient. The head against float64 autograd; the Llama
    block's training graph (examples/graphs/llama_block_train.tile) trained through
    GraphFunction, its loss and gradients the joint call's (within a bf16 rounding: the
    attention backward's dQ sums by atomics, in no fixed order)."""

    HEAD = """
@linear_cross_entropy(chunk = 128)
graph head(x: f32[T, 64], w: f32[64, V], lab: i64[T]) -> (f32, f32[T, 64], f32[64, V]) {
    let l = cross_entropy(x @ w, lab) * 0.5;
    let (dx, dw) = grad(l, [x, w]);
    return (l, dx, dw);
}
"""

    def test_head_against_autograd(self):
        torch.manual_seed(1)
        T, V = 300, 1000
        x, w = torch.randn(T, 64, device="cuda"), torch.randn(64, V, device="cuda") * 0.1
        lab = torch.randint(0, V, (T,), device="cuda")
        lab[::7] = -100
        g = tile.loads(self.HEAD).graphs["head"]
        for p in ("save-all", "selective", "checkpoint"):
            with self.subTest(policy=p):
                fn = g.with_options(recompute=p).autograd(grads={"x": 1, "w": 2})
                xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
                loss = fn(xt, wt, lab)
                (3.0 * loss).backward()
                xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
                ref = torch.nn.functional.cross_entropy(xr @ wr, lab, ignore_index=-100) * 0.5
                (3.0 * ref).backward()
                torch.testing.assert_close(loss.double(), ref.detach(), rtol=1e-4, atol=1e-6)
                torch.testing.assert_close(xt.grad.double(), xr.grad, rtol=1e-3, atol=1e-6)
                torch.testing.assert_close(wt.grad.double(), wr.grad, rtol=1e-3, atol=1e-6)

    def test_llama_block_train(self):
        torch.manual_seed(2)
        T, V = 300, 1000
        shapes = {"g1": (32,), "wq": (32, 32), "wk": (32, 16), "wv": (32, 16), "wo": (32, 32), "g2": (32,),
                  "wg": (32, 48), "wu": (32, 48), "wd": (48, 32), "gf": (32,), "wlm": (32, V)}
        ws = {n: ((1.0 + 0.1 * torch.randn(s)) if len(s) == 1 else 0.2 * torch.randn(s)).to("cuda", torch.bfloat16)
              for n, s in shapes.items()}
        x = torch.randn(T, 32, device="cuda").to(torch.bfloat16)
        ang = torch.arange(T, device="cuda")[:, None] * torch.tensor([1.0, 0.1, 0.01, 0.001], device="cuda")
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        lab = torch.randint(0, V, (T,), device="cuda")
        g = tile.load(EXAMPLES / "graphs" / "llama_block_train.tile").graphs["llama_block_train"]
        names = list(shapes)
        args = lambda w: [x, w["g1"], w["wq"], w["wk"], w["wv"], w["wo"], cos, sin, w["g2"], w["wg"], w["wu"],
                          w["wd"], w["gf"], w["wlm"], lab]
        for p in ("save-all", "selective", "checkpoint"):
            with self.subTest(policy=p):
                gp = g.with_options(recompute=p)
                joint = gp(*args(ws))
                close = lambda a, b: torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=1e-4)
                step = gp.forward(*args(ws))
                close(step.results[0], joint[0])   # the loss is the forward part's
                for a, b in zip(gp.backward(step), joint):
                    close(a, b)
                fn = gp.autograd(grads={n: i + 1 for i, n in enumerate(names)})
                wt = {n: t.clone().requires_grad_() for n, t in ws.items()}
                loss = fn(*args(wt))
                close(loss, joint[0])
                loss.backward()   # a seed of 1: the joint call's gradients
                for i, n in enumerate(names):
                    close(wt[n].grad, joint[i + 1])


if __name__ == "__main__":
    unittest.main()
