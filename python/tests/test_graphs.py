"""Tensor graphs from Python (docs/PYTHON.md "Tensor graphs"): module.graphs[name] and
module.name called on numpy arrays run the fusion plan's kernels in the interpreter (the
CPU context); the results are checked against the graph IR interpreter's, op by op
(`tilec run --graph`, $TILEC), and against numpy; then every refusal: a wrong count,
name, dtype, rank, dimension or size, each naming the parameter."""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402

GRAPHS = Path(__file__).resolve().parent.parent.parent / "examples" / "graphs"


def _tilec():
    """tilec of the build whose libtileRT the package loaded."""
    t = os.environ.get("TILEC") or str(Path(tile.library_path).resolve().parent.parent / "tools" / "tilec")
    return t if os.access(t, os.X_OK) else None


def op_by_op(path, graph, sizes, args, nresults):
    """The graph's results from the graph IR interpreter (tilec run --graph, op by op,
    in doubles), each as float64 values in row-major order."""
    with tempfile.TemporaryDirectory() as d:
        cmd = [_tilec(), "run", str(path), "--graph", graph, "--max-ops", "4000000000"]
        cmd += ["--arg=%s=%d" % kv for kv in sizes.items()]
        for name, a in args.items():
            a.tofile(os.path.join(d, name))
            cmd += ["--arg", "%s=@%s" % (name, os.path.join(d, name))]
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)    # a sanitizer build's tilec has its own runtime linked in
        out = []
        for i in range(nresults):
            r = subprocess.run(cmd + ["--print", "ret%d" % i], capture_output=True, text=True, env=env)
            if r.returncode:
                raise AssertionError("%s failed:\n%s" % (" ".join(cmd), r.stderr))
            out.append(np.array([float(x) for x in r.stdout.split()]))
        return out


def bf16_bits(a):
    """float32 -> bf16 bits (round to nearest even), as a uint16 array."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def layernorm(r, w, b):
    mu = r.mean(1, keepdims=True)
    return (r - mu) / np.sqrt(((r - mu) ** 2).mean(1, keepdims=True) + 1e-5) * w + b


@unittest.skipIf(_tilec() is None, "no tilec beside the library (set TILEC)")
class AgainstTheInterpreter(unittest.TestCase):
    def test_residual_layernorm(self):
        g = tile.load(GRAPHS / "residual_layernorm.tile").graphs["residual_layernorm"]
        rng = np.random.default_rng(3)
        x, y = (rng.standard_normal((3, 256)).astype(np.float32) for _ in range(2))
        w, b = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
        r, ln = g(x, y, w, b)
        self.assertEqual((r.shape, ln.shape, r.dtype, ln.dtype), ((3, 256), (3, 256), np.float32, np.float32))
        ref = op_by_op(GRAPHS / "residual_layernorm.tile", "residual_layernorm", {"T": 3},
                       dict(x=x, y=y, w=w, b=b), 2)
        np.testing.assert_allclose(r.ravel(), ref[0], rtol=1e-6)
        np.testing.assert_allclose(ln.ravel(), ref[1], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(ln, layernorm(x + y, w, b), rtol=1e-4, atol=1e-5)

    def test_ffn_bf16_through_bits(self):
        """bf16 in numpy: tile.bits(uint16 array) in, uint16 bits out."""
        os.environ.setdefault("TILE_INTERP_MAX_OPS", "4000000000")   # two GEMMs of 2x1024x4096
        m = tile.load(GRAPHS / "ffn.tile")
        rng = np.random.default_rng(1)
        args = dict(x=bf16_bits(rng.standard_normal((2, 1024)) * 0.5),
                    w1=bf16_bits(rng.standard_normal((1024, 4096)) * 0.03),
                    b1=bf16_bits(rng.standard_normal(4096) * 0.1),
                    w2=bf16_bits(rng.standard_normal((4096, 1024)) * 0.03),
                    b2=bf16_bits(rng.standard_normal(1024) * 0.1))
        out = m.ffn(**{k: tile.bits(v, "bf16") for k, v in args.items()})
        self.assertEqual((out.dtype, out.shape), (np.uint16, (2, 1024)))
        ref = op_by_op(GRAPHS / "ffn.tile", "ffn", {"T": 2}, args, 1)[0]
        np.testing.assert_allclose(bf16_values(out).ravel(), ref, rtol=1 / 64, atol=1 / 64)


ROWS = """
graph rows(x: f32[T, 3], s: f32) -> (f32[T, 3], f32[T]) {
    return (softmax(x * s, 1), sum(x, 1));
}
graph pair(a: f32[S, T], b: f32[T]) -> f32[S, T] { return a * b; }
graph twice(n: f32[N], a: f32[2 * N]) -> f32[2 * N] { return a + 1.0; }
kernel rows_k(x: *f32) grid(1) { store(x + arange(0, 4), load(x + arange(0, 4))); }
"""


class Calls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = tile.loads(ROWS, "rows.tile")

    def test_module_lists_graphs_beside_kernels(self):
        m = self.m
        self.assertEqual(list(m.graphs), ["rows", "pair", "twice"])
        self.assertIs(m.rows, m.graphs["rows"])
        self.assertIn("rows_k", m.kernels)
        self.assertIn("pair", dir(m))
        self.assertEqual([p.name for p in m.rows.params], ["x", "s"])
        self.assertEqual([p.type for p in m.rows.outputs], ["f32[T, 3]", "f32[T]"])
        self.assertEqual(m.pair.sizes, ["S", "T"])
        self.assertIn("rows(x: f32[T, 3], s: f32) -> (f32[T, 3], f32[T])", repr(m.rows))

    def test_scalar_and_two_results(self):
        x = np.arange(12, dtype=np.float32).reshape(4, 3)
        y, s = self.m.rows(x, 0.5)
        e = np.exp(x * 0.5 - (x * 0.5).max(1, keepdims=True))
        np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-6)
        np.testing.assert_allclose(s, x.sum(1), rtol=1e-6)
        y2, _ = self.m.rows(x=x[:2], s=2)              # by name, another T, an int for f32
        self.assertEqual(y2.shape, (2, 3))

    def test_results_are_new_and_inputs_untouched(self):
        a, b = np.ones((2, 3), np.float32), np.arange(3, dtype=np.float32)
        r1 = self.m.pair(a, b)
        r2 = self.m.pair(a, b)
        self.assertIsNot(r1, r2)
        np.testing.assert_array_equal(r1, r2)
        np.testing.assert_array_equal(a, np.ones((2, 3), np.float32))

    def test_strided_input_copied(self):
        a = np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))
        np.testing.assert_array_equal(self.m.pair(a, np.ones(3, np.float32)), a)

    def test_size_in_an_expression(self):
        n, a = np.zeros(4, np.float32), np.arange(8, dtype=np.float32)
        np.testing.assert_array_equal(self.m.twice(n, a), a + 1)
        np.testing.assert_array_equal(self.m.twice(n, a, N=4), a + 1)
        with self.assertRaisesRegex(ValueError, r"graph 'twice': argument 'a' has shape \(8,\), but the parameter "
                                    r"is f32\[2\*N\]: dimension 0 is 8, not 2\*N = 10 \(N = 5 from argument 'n' "
                                    r"dimension 0\)"):
            self.m.twice(np.zeros(5, np.float32), a)


class Refusals(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = tile.loads(ROWS, "rows.tile")
        cls.a, cls.b = np.ones((2, 3), np.float32), np.ones(3, np.float32)

    def test_unknown_attribute(self):
        with self.assertRaisesRegex(AttributeError, r"rows.tile has no kernel or graph 'head' \(kernels: rows_k; "
                                    r"graphs: rows, pair, twice\)$"):
            self.m.head
        with self.assertRaisesRegex(AttributeError, r"did you mean 'pair'\?"):
            self.m.pairs

    def test_count(self):
        with self.assertRaisesRegex(TypeError, r"graph 'pair' takes 2 arguments \(a, b\), got 3"):
            self.m.pair(self.a, self.b, self.b)
        with self.assertRaisesRegex(TypeError, r"graph 'pair': missing argument 'b' \(of type f32\[T\]\)"):
            self.m.pair(self.a)
        with self.assertRaisesRegex(TypeError, r"graph 'pair': argument 'a' given twice"):
            self.m.pair(self.a, self.b, a=self.a)

    def test_unknown_name(self):
        with self.assertRaisesRegex(TypeError, r"graph 'pair' has no parameter or size 'bb' \(it has a, b, S, T\); "
                                    r"did you mean 'b'\?"):
            self.m.pair(self.a, bb=self.b)

    def test_dtype_and_kind(self):
        with self.assertRaisesRegex(tile.ArgError, r"graph 'pair': argument 'b' is a numpy array of float64, but the "
                                    r"parameter is f32\[T\] \(a float32 array or tensor\)"):
            self.m.pair(self.a, np.ones(3))
        with self.assertRaisesRegex(tile.ArgError, r"graph 'pair': argument 'a' is 1.0 \(float\), but the parameter "
                                    r"is f32\[S, T\]: pass a numpy array or a tensor"):
            self.m.pair(1.0, self.b)
        with self.assertRaisesRegex(tile.ArgError, r"graph 'rows': argument 's' is 'x' \(str\), but the parameter "
                                    r"is f32"):
            self.m.rows(self.a, "x")

    def test_shapes(self):
        with self.assertRaisesRegex(ValueError, r"graph 'pair': argument 'a' has 1 dimensions \(shape \(3,\)\), but "
                                    r"the parameter is f32\[S, T\]"):
            self.m.pair(self.b, self.b)
        with self.assertRaisesRegex(ValueError, r"graph 'pair': argument 'b' has shape \(4,\), but the parameter is "
                                    r"f32\[T\]: dimension 0 is 4, not T = 3 \(T from argument 'a' dimension 1\)"):
            self.m.pair(self.a, np.ones(4, np.float32))
        with self.assertRaisesRegex(ValueError, r"graph 'rows': argument 'x' has shape \(2, 4\), but the parameter "
                                    r"is f32\[T, 3\]: dimension 1 is 4, not 3$"):
            self.m.rows(np.ones((2, 4), np.float32), 1.0)
        with self.assertRaisesRegex(ValueError, r"graph 'pair': size S is 0 \(from argument 'a' dimension 0\); a "
                                    r"size is 1 to 2\*\*40"):
            self.m.pair(np.ones((0, 3), np.float32), self.b)

    def test_size_by_name_disagrees(self):
        with self.assertRaisesRegex(ValueError, r"dimension 1 is 3, not T = 4 \(T given as T=4\)"):
            self.m.pair(self.a, self.b, T=4)
        with self.assertRaisesRegex(TypeError, r"graph 'pair': size 'T' takes an integer, got 2.0 \(float\)"):
            self.m.pair(self.a, self.b, T=2.0)


if __name__ == "__main__":
    unittest.main()
