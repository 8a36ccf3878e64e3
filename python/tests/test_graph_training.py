"""Training graphs from Python (docs/PYTHON.md "Training graphs"): the compile options
(TensorGraph.with_options: recompute policy, memory budget, sizes) reach the compiler
(every policy gives the same results, and on examples/graphs/mlp_grad.tile selective and
checkpoint plans allocate fewer buffer bytes than save-all's, fusion rule 2b), and
tile.GraphFunction trains through a graph in a PyTorch loop on CPU tensors (the plan's
kernels in the interpreter) against torch autograd in float64. The torch tests are
skipped where torch is not installed."""
import sys
import unittest
from pathlib import Path

import numpy as np

try:
    import torch
except ImportError:
    torch = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402

GRAPHS = Path(__file__).resolve().parent.parent.parent / "examples" / "graphs"

MLP = """
graph mlp(x: f32[T, 8], w1: f32[8, 16], w2: f32[16, 4], y: f32[T, 4]) -> (f32, f32[8, 16], f32[16, 4]) {
    let h = tanh(x @ w1);
    let e = h @ w2 - y;
    let loss = mean(mean(e * e, 1), 0);
    let (dw1, dw2) = grad(loss, [w1, w2]);
    return (loss, dw1, dw2);
}

graph mlp_extra(x: f32[T, 8], w1: f32[8, 16], w2: f32[16, 4], y: f32[T, 4]) -> (f32, f32[16, 4], f32[T, 4]) {
    let p = tanh(x @ w1) @ w2;
    let loss = mean(mean((p - y) * (p - y), 1), 0);
    let (dw2) = grad(loss, [w2]);
    return (loss, dw2, p);
}
"""

POLICIES = ("save-all", "selective", "checkpoint")

# The LM head fused with its cross-entropy (@linear_cross_entropy): in Liger's order the
# forward part computes the loss, dx and dw for a seed of 1, the backward scales them.
HEAD = """
@linear_cross_entropy(chunk = 4)
graph head(x: f32[T, 8], w: f32[8, V], lab: i64[T]) -> (f32, f32[T, 8], f32[8, V]) {
    let l = cross_entropy(x @ w, lab) * 0.5;
    let (dx, dw) = grad(l, [x, w]);
    return (l, dx, dw);
}
"""


def head_data(rng, T=10, V=13):
    x = rng.standard_normal((T, 8)).astype(np.float32)
    w = (rng.standard_normal((8, V)) * 0.5).astype(np.float32)
    lab = rng.integers(0, V, T).astype(np.int64)
    lab[[1, 6]] = -100   # ignored rows
    return x, w, lab


def bf16_bits(a):
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


class Options(unittest.TestCase):
    def test_policies_on_mlp_grad(self):
        g = tile.load(GRAPHS / "mlp_grad.tile").graphs["mlp_step"]
        rng = np.random.default_rng(1)
        T = 64
        args = [tile.bits(bf16_bits(rng.standard_normal(s) * 0.5), "bf16") for s in ((T, 8), (8, 12), (12, 3), (T, 3))]
        results, buffers = {}, {}
        for p in POLICIES:
            gp = g.with_options(recompute=p, sizes={"T": T})
            self.assertEqual(gp.options["recompute"], p)
            results[p] = gp(*args, 0.5)
            buffers[p] = sum(gp.plan_stats()["buffers"])
        self.assertGreater(buffers["save-all"], 0)
        # rule 2b: the recomputed GELU pieces go into the dX GEMM's epilogue; checkpoint
        # recomputes the forward in the backward, whose copies need buffers of their own:
        # on a graph this small more than save-all keeps (save-all computes GELU's
        # derivative in the backward from its bf16 pieces too)
        self.assertLess(buffers["selective"], buffers["save-all"])
        self.assertLess(buffers["save-all"], buffers["checkpoint"])
        for p in POLICIES[1:]:
            np.testing.assert_allclose(results[p][0], results["save-all"][0], rtol=1e-5)
            for k in (1, 2):
                np.testing.assert_allclose(bf16_values(results[p][k]), bf16_values(results["save-all"][k]),
                                           rtol=2e-2, atol=1e-3)

    def test_same_options_same_graph(self):
        g = tile.loads(MLP).graphs["mlp"]
        self.assertIs(g.with_options(), g)
        a = g.with_options(recompute="selective", memory_budget=0.5)
        self.assertIs(g.with_options(recompute="selective", memory_budget=0.5), a)
        self.assertEqual(a.options, {"recompute": "selective", "memory_budget": "0.5"})
        self.assertIsNot(g.with_options(recompute="checkpoint"), a)
        b = a.with_options(memory_budget="1MiB", sizes={"T": 128})
        self.assertEqual(b.options, {"recompute": "selective", "memory_budget": "1MiB", "sizes": "T=128"})

    def test_refusals(self):
        g = tile.loads(MLP).graphs["mlp"]
        with self.assertRaisesRegex(ValueError, r"graph 'mlp': recompute takes save-all, selective, checkpoint, got 'all'"):
            g.with_options(recompute="all")
        with self.assertRaisesRegex(TypeError, r"memory_budget takes bytes"):
            g.with_options(memory_budget=[1])
        with self.assertRaisesRegex(ValueError, r"sizes takes size names and positive integers"):
            g.with_options(sizes={"T": 0})
        with self.assertRaises(tile.TileError):   # the compiler's check: a fraction above 1
            g.with_options(memory_budget=1.5)


class Split(unittest.TestCase):
    """TensorGraph.forward / backward (the C API's trt_tgraph_run_forward, _backward) on
    numpy arrays: the same bits as the joint call, each forward's saved arrays its own."""

    def setUp(self):
        self.g = tile.loads(MLP).graphs["mlp"]
        rng = np.random.default_rng(2)
        self.w1 = rng.standard_normal((8, 16)).astype(np.float32)
        self.w2 = rng.standard_normal((16, 4)).astype(np.float32)
        self.steps = [(rng.standard_normal((t, 8)).astype(np.float32), rng.standard_normal((t, 4)).astype(np.float32))
                      for t in (5, 7)]

    def test_two_forwards_then_two_backwards(self):
        for p in POLICIES:
            with self.subTest(policy=p):
                g = self.g.with_options(recompute=p)
                joint = [g(x, self.w1, self.w2, y) for x, y in self.steps]
                fwd = [g.forward(x, self.w1, self.w2, y) for x, y in self.steps]
                for f, j in zip(fwd, joint):
                    self.assertIsNone(f.results[1])   # no gradient before the backward
                    np.testing.assert_array_equal(f.results[0], j[0])
                for f, j in zip(reversed(fwd), reversed(joint)):
                    for a, b in zip(g.backward(f), j):
                        np.testing.assert_array_equal(a, b)

    def test_seed_scales_the_gradients(self):
        x, y = self.steps[0]
        joint = self.g(x, self.w1, self.w2, y)
        loss, d1, d2 = self.g.backward(self.g.forward(x, self.w1, self.w2, y), seed=0.25)
        np.testing.assert_array_equal(d1, joint[1] * np.float32(0.25))
        np.testing.assert_array_equal(d2, joint[2] * np.float32(0.25))
        np.testing.assert_array_equal(self.g(x, self.w1, self.w2, y)[2], joint[2])   # a call's seed stays 1

    def test_lm_head_loss_in_the_forward(self):
        """@linear_cross_entropy: the forward part returns the loss (the joint call's bits),
        the backward the gradients (the joint's bits at seed 1, exactly scaled at 0.25);
        a GraphFunction over it is no longer refused."""
        g0 = tile.loads(HEAD).graphs["head"]
        x, w, lab = head_data(np.random.default_rng(3))
        for p in POLICIES:
            with self.subTest(policy=p):
                g = g0.with_options(recompute=p)
                self.assertEqual(g._split_meta()[1], [1, 2, 2])   # the loss is the forward's
                joint = g(x, w, lab)
                f = g.forward(x, w, lab)
                np.testing.assert_array_equal(f.results[0], joint[0])
                self.assertIsNone(f.results[1])
                for a, b in zip(g.backward(f), joint):
                    np.testing.assert_array_equal(a, b)
                _, dx, dw = g.backward(g.forward(x, w, lab), seed=0.25)
                np.testing.assert_array_equal(dx, joint[1] * np.float32(0.25))
                np.testing.assert_array_equal(dw, joint[2] * np.float32(0.25))
                g.autograd(grads={"x": 1, "w": 2})

    def test_refusals(self):
        plain = tile.loads("graph f(x: f32[4]) -> f32 { return sum(x, 0); }").graphs["f"]
        with self.assertRaisesRegex(ValueError, r"graph 'f': has no grad, so no forward and backward parts"):
            plain.forward(np.ones(4, np.float32))
        with self.assertRaisesRegex(TypeError, r"backward takes what this graph's forward returned"):
            self.g.backward(None)


@unittest.skipIf(torch is None, "torch is not installed")
class Autograd(unittest.TestCase):
    def setUp(self):
        self.m = tile.loads(MLP)
        torch.manual_seed(0)
        self.x, self.y = torch.randn(6, 8), torch.randn(6, 4)

    def reference(self, w1, w2, scale=1.0):
        a = w1.detach().double().requires_grad_()
        b = w2.detach().double().requires_grad_()
        loss = ((torch.tanh(self.x.double() @ a) @ b - self.y.double()) ** 2).mean()
        (scale * loss).backward()
        return loss.item(), a.grad, b.grad

    def test_gradients_every_policy(self):
        for p in POLICIES:
            with self.subTest(policy=p):
                fn = self.m.graphs["mlp"].with_options(recompute=p).autograd(grads={"w1": 1, "w2": "ret2"})
                w1 = torch.randn(8, 16, requires_grad=True)
                w2 = torch.randn(16, 4, requires_grad=True)
                loss = fn(self.x, w1, w2, self.y)
                self.assertIsNotNone(loss.grad_fn)
                (3.0 * loss).backward()   # the incoming gradient is the backward's seed
                ref, g1, g2 = self.reference(w1, w2, 3.0)
                self.assertAlmostEqual(loss.item(), ref, places=4)
                torch.testing.assert_close(w1.grad.double(), g1, rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(w2.grad.double(), g2, rtol=1e-4, atol=1e-5)

    def test_training_loop(self):
        """SGD through the graph against the same loop in float64 autograd."""
        fn = self.m.mlp.with_options(recompute="selective").autograd(grads={"w1": 1, "w2": 2})
        w1 = (torch.randn(8, 16) * 0.3).requires_grad_()
        w2 = (torch.randn(16, 4) * 0.3).requires_grad_()
        r1 = w1.detach().double().requires_grad_()
        r2 = w2.detach().double().requires_grad_()
        opt, ropt = torch.optim.SGD([w1, w2], lr=0.1), torch.optim.SGD([r1, r2], lr=0.1)
        losses = []
        for step in range(20):
            opt.zero_grad()
            loss = fn(self.x, w1, w2, self.y)
            loss.backward()
            opt.step()
            ropt.zero_grad()
            rl = ((torch.tanh(self.x.double() @ r1) @ r2 - self.y.double()) ** 2).mean()
            rl.backward()
            ropt.step()
            self.assertAlmostEqual(loss.item(), rl.item(), delta=1e-4 * max(1.0, rl.item()))
            losses.append(loss.item())
        self.assertLess(losses[-1], losses[0])

    def test_gradient_accumulation(self):
        """Two forwards, then their backwards: each step's own saved tensors, the sum of
        both steps' gradients in .grad, as float64 autograd gives."""
        for p in POLICIES:
            with self.subTest(policy=p):
                fn = self.m.mlp.with_options(recompute=p).autograd(grads={"w1": 1, "w2": 2})
                w1 = torch.randn(8, 16, requires_grad=True)
                w2 = torch.randn(16, 4, requires_grad=True)
                x2, y2 = torch.randn(3, 8), torch.randn(3, 4)
                l1 = fn(self.x, w1, w2, self.y)
                l2 = fn(x2, w1, w2, y2)
                (0.5 * l2).backward()
                l1.backward()
                a = w1.detach().double().requires_grad_()
                b = w2.detach().double().requires_grad_()
                ref = lambda x, y: ((torch.tanh(x.double() @ a) @ b - y.double()) ** 2).mean()
                (ref(self.x, self.y) + 0.5 * ref(x2, y2)).backward()
                torch.testing.assert_close(w1.grad.double(), a.grad, rtol=1e-4, atol=1e-5)
                torch.testing.assert_close(w2.grad.double(), b.grad, rtol=1e-4, atol=1e-5)

    def test_lm_head(self):
        """GraphFunction through @linear_cross_entropy (the loss in the forward part, dx and
        dw scaled by the incoming gradient in the backward) against float64 autograd."""
        x, w, lab = (torch.from_numpy(a) for a in head_data(np.random.default_rng(4)))
        g = tile.loads(HEAD).graphs["head"]
        for p in POLICIES:
            with self.subTest(policy=p):
                fn = g.with_options(recompute=p).autograd(grads={"x": 1, "w": 2})
                xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
                loss = fn(xt, wt, lab)
                (3.0 * loss).backward()
                xr, wr = x.double().requires_grad_(), w.double().requires_grad_()
                ref = torch.nn.functional.cross_entropy(xr @ wr, lab, ignore_index=-100) * 0.5
                (3.0 * ref).backward()
                self.assertAlmostEqual(loss.item(), ref.item(), places=5)
                torch.testing.assert_close(xt.grad.double(), xr.grad, rtol=1e-4, atol=1e-6)
                torch.testing.assert_close(wt.grad.double(), wr.grad, rtol=1e-4, atol=1e-6)

    def test_changed_argument_refused(self):
        fn = self.m.mlp.autograd(grads={"w1": 1, "w2": 2})
        w1 = torch.randn(8, 16, requires_grad=True)
        w2 = torch.randn(16, 4, requires_grad=True)
        loss = fn(self.x, w1, w2, self.y)
        with torch.no_grad():
            w2.add_(1.0)   # the backward would read the new weights
        with self.assertRaisesRegex(RuntimeError, r"modified by an inplace operation"):
            loss.backward()

    def test_other_results_and_partial_grads(self):
        fn = self.m.graphs["mlp_extra"].autograd(grads={"w2": 1})
        w1 = torch.randn(8, 16)
        w2 = torch.randn(16, 4, requires_grad=True)
        loss, p = fn(self.x, w1, w2, self.y)
        self.assertFalse(p.requires_grad)
        torch.testing.assert_close(p.double(), torch.tanh(self.x.double() @ w1.double()) @ w2.detach().double(),
                                   rtol=1e-4, atol=1e-5)
        loss.backward()
        _, _, g2 = self.reference(w1, w2)
        torch.testing.assert_close(w2.grad.double(), g2, rtol=1e-4, atol=1e-5)

    def test_refusals(self):
        g = self.m.graphs["mlp"]
        with self.assertRaisesRegex(ValueError, r"grads names 'w3', which is no parameter"):
            g.autograd(grads={"w3": 1})
        with self.assertRaisesRegex(ValueError, r"result 2 \(f32\[16, 4\]\) cannot be the gradient of 'w1'"):
            g.autograd(grads={"w1": 2})
        with self.assertRaisesRegex(ValueError, r"the loss \(result 1, f32\[8, 16\]\) must be a scalar"):
            g.autograd(grads={}, loss=1)
        with self.assertRaisesRegex(ValueError, r"is result 7, but the graph has 3 results"):
            g.autograd(grads={"w1": 7})
        fn = g.autograd(grads={"w1": 1, "w2": 2})
        x = self.x.clone().requires_grad_()
        with self.assertRaisesRegex(ValueError, r"argument 'x' requires grad, but the graph returns no gradient for it"):
            fn(x, torch.randn(8, 16), torch.randn(16, 4), self.y)


if __name__ == "__main__":
    unittest.main()
