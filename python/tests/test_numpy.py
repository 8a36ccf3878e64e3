"""The tile package on numpy arrays: kernels run by libtileRT's CPU context (the
reference interpreter), so every call here is the call a GPU user makes, checked
against numpy. Run with the built library: TILE_LIB=.../libtileRT.so (ctest sets it)."""
import os
import sys
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


def cdiv(a, b):
    return (a + b - 1) // b


def to_bf16_bits(x):
    """float32 -> bf16 bits (uint16), rounded to nearest even."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (b.astype(np.uint32) << 16).view(np.float32)


SCALARS = """
kernel scalars(out: *f32, h: f16, b: bf16, i: i64, u: u8, flag: bool, d: f64) grid(1) {
    let v = (h as f32) + (b as f32) + (i as f32) + (u as f32) + (d as f32);
    store(out + arange(0, 2), where(arange(0, 2) == 0, v, flag as f32));
}
kernel twod(out: *i32, ncols: i32) {
    store(out + program_id(1) * ncols + program_id(0), program_id(0) + 10 * program_id(1));
}
kernel noptr(const N: i32 = 3) grid(1) { }
"""


class VectorAdd(unittest.TestCase):
    def setUp(self):
        self.k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        rng = np.random.default_rng(1)
        self.a = rng.standard_normal(1000).astype(np.float32)
        self.b = rng.standard_normal(1000).astype(np.float32)

    def test_grid_clause(self):
        c = np.zeros(1000, np.float32)
        self.k(c, self.a, self.b, 1000)
        np.testing.assert_array_equal(c, self.a + self.b)

    def test_explicit_grid_and_const(self):
        c = np.zeros(1000, np.float32)
        self.k[(cdiv(1000, 256),)](c, self.a, self.b, 1000, BLOCK=256)
        np.testing.assert_array_equal(c, self.a + self.b)
        c[:] = 0
        self.k[lambda meta: (cdiv(meta["n"], meta["BLOCK"]),)](c, self.a, self.b, n=1000, BLOCK=128)
        np.testing.assert_array_equal(c, self.a + self.b)

    def test_partial_grid_leaves_the_rest(self):
        c = np.zeros(1000, np.float32)
        self.k[1](c, self.a, self.b, 1000, BLOCK=256)
        np.testing.assert_array_equal(c[:256], (self.a + self.b)[:256])
        self.assertTrue((c[256:] == 0).all())

    def test_plan_cached_per_const_set(self):
        c = np.zeros(1000, np.float32)
        for _ in range(3):
            self.k(c, self.a, self.b, 1000)
        self.assertEqual(len(self.k._plans), 1)
        self.k(c, self.a, self.b, 1000, BLOCK=512)
        self.assertEqual(len(self.k._plans), 2)

    def test_prepared_launch(self):
        c = np.zeros(1000, np.float32)
        run = self.k[(4,)].prepare(c, self.a, self.b, 1000, BLOCK=256)
        self.assertTrue((c == 0).all())
        run()
        np.testing.assert_array_equal(c, self.a + self.b)
        c[:] = 0
        run()
        np.testing.assert_array_equal(c, self.a + self.b)
        with self.assertRaisesRegex(TypeError, "missing argument 'n'"):
            self.k.prepare(c, self.a, self.b)

    def test_keywords_and_positional_const(self):
        c = np.zeros(1000, np.float32)
        self.k(c, self.a, self.b, 1000, 256)
        np.testing.assert_array_equal(c, self.a + self.b)
        c[:] = 0
        self.k(b=self.b, a=self.a, c=c, n=1000)
        np.testing.assert_array_equal(c, self.a + self.b)

    def test_views(self):
        c = np.zeros(2000, np.float32)
        self.k(c[1000:], self.a, self.b, 1000)
        np.testing.assert_array_equal(c[1000:], self.a + self.b)
        self.assertTrue((c[:1000] == 0).all())

    def test_argument_errors_name_the_parameter(self):
        c = np.zeros(1000, np.float32)
        with self.assertRaisesRegex(TypeError, r"argument 'a' is a numpy array of float64, but the parameter is \*f32"):
            self.k(c, self.a.astype(np.float64), self.b, 1000)
        with self.assertRaisesRegex(TypeError, r"argument 'b' is 3 \(int\), but the parameter is \*f32"):
            self.k(c, self.a, 3, 1000)
        with self.assertRaisesRegex(TypeError, r"argument 'n' is a numpy array of float32, but the parameter is i32"):
            self.k(c, self.a, self.b, self.a)
        with self.assertRaisesRegex(TypeError, r"argument 'n' is 2.5 \(float\), but the parameter is i32"):
            self.k(c, self.a, self.b, 2.5)
        with self.assertRaisesRegex(OverflowError, r"argument 'n' = 4294967296 does not fit in i32"):
            self.k(c, self.a, self.b, 1 << 32)
        with self.assertRaisesRegex(TypeError, "missing argument 'n'"):
            self.k(c, self.a, self.b)
        with self.assertRaisesRegex(TypeError, "has no parameter 'm'"):
            self.k(c, self.a, self.b, 1000, m=3)
        with self.assertRaisesRegex(TypeError, "const parameter 'BLOCK' takes an integer"):
            self.k(c, self.a, self.b, 1000, BLOCK=256.0)
        with self.assertRaisesRegex(TypeError, "argument 'n' given twice"):
            self.k(c, self.a, self.b, 1000, n=1000)
        with self.assertRaisesRegex(TypeError, "argument .a. is .*negative strides cannot be passed"):
            self.k(c, self.a[::-1], self.b, 1000)

    def test_out_of_bounds_is_an_error(self):
        c = np.zeros(999, np.float32)
        with self.assertRaises(tile.TileError) as e:
            self.k(c, self.a, self.b, 1000)
        self.assertEqual(e.exception.status, "TRT_ERROR_KERNEL_FAILED")
        self.assertIn("kernel 'vector_add' failed in the interpreter", str(e.exception))

    def test_compile_errors(self):
        with self.assertRaises(tile.TileError) as e:
            tile.loads("kernel broken(x: *f32 { }", name="broken.tile")
        self.assertEqual(e.exception.status, "TRT_ERROR_COMPILE")
        self.assertIn("broken.tile:1:", str(e.exception))
        m = tile.loads("kernel bad(x: *f32) grid(1) { store(x, undefined_name); }", name="bad.tile")
        with self.assertRaisesRegex(tile.TileError, "bad.tile:1:.*undefined_name"):
            m.bad(np.zeros(1, np.float32))
        with self.assertRaisesRegex(AttributeError, "has no kernel or graph 'nope' \\(kernels: bad; graphs: none\\)"):
            m.nope


class Softmax(unittest.TestCase):
    """The Triton tutorial's call: k(out, x, x.stride(0), n_rows, n_cols, BLOCK=...)."""

    def test_bf16_rows(self):
        k = tile.load(EXAMPLES / "softmax.tile").softmax
        rng = np.random.default_rng(2)
        n_rows, n_cols = 6, 100
        x = to_bf16_bits(rng.standard_normal((n_rows, n_cols)).astype(np.float32) * 3)
        out = np.zeros_like(x)
        k(tile.bits(out, "bf16"), tile.bits(x, "bf16"), x.strides[0] // x.itemsize, n_rows,
          n_cols, BLOCK=128)
        xf = from_bf16_bits(x).astype(np.float64)
        ref = np.exp(xf - xf.max(1, keepdims=True))
        ref /= ref.sum(1, keepdims=True)
        np.testing.assert_allclose(from_bf16_bits(out), ref, rtol=1e-2, atol=1e-3)
        with self.assertRaisesRegex(TypeError, r"argument 'out' is a numpy array of uint16, but the parameter is \*bf16"):
            k(out, tile.bits(x, "bf16"), n_cols, n_rows, n_cols, BLOCK=128)
        with self.assertRaisesRegex(TypeError, r"parameter is \*bf16"):
            k(tile.bits(out, "f16"), tile.bits(x, "bf16"), n_cols, n_rows, n_cols, BLOCK=128)


class Scalars(unittest.TestCase):
    def setUp(self):
        self.m = tile.loads(SCALARS, name="scalars.tile")

    def test_half_int_bool_double(self):
        out = np.zeros(2, np.float32)
        self.m.scalars(out, 1.5, 2.0, -7, 200, True, 0.25)
        np.testing.assert_array_equal(out, [1.5 + 2 - 7 + 200 + 0.25, 1.0])
        self.m.scalars(out, h=0.1, b=1e10, i=0, u=0, flag=False, d=0)
        self.assertAlmostEqual(out[0], np.float32(np.float16(0.1)) + 9999220736.0, delta=1024)
        self.assertEqual(out[1], 0)
        with self.assertRaisesRegex(TypeError, r"argument 'flag' is 2 \(int\), but the parameter is bool"):
            self.m.scalars(out, 1.5, 2.0, -7, 200, 2, 0.25)
        with self.assertRaisesRegex(OverflowError, "argument 'u' = 256 does not fit in u8"):
            self.m.scalars(out, 1.5, 2.0, -7, 256, True, 0.25)

    def test_numpy_scalars(self):
        out = np.zeros(2, np.float32)
        self.m.scalars(out, np.float16(1.5), np.float32(2), np.int64(-7), np.uint8(200), np.bool_(True), 0.25)
        np.testing.assert_array_equal(out, [1.5 + 2 - 7 + 200 + 0.25, 1.0])

    def test_2d_grid(self):
        out = np.zeros((3, 4), np.int32)
        self.m.twod[(4, 3)](out, 4)
        np.testing.assert_array_equal(out, np.arange(4)[None, :] + 10 * np.arange(3)[:, None])
        with self.assertRaisesRegex(TypeError, r"kernel 'twod' has no grid\(...\) clause"):
            self.m.twod(out, 4)
        out[:] = -1   # an empty grid launches nothing
        self.m.twod[0](out, 4)
        self.m.twod[(4, 0)](out, 4)
        np.testing.assert_array_equal(out, np.full((3, 4), -1, np.int32))

    def test_introspection(self):
        k = self.m.scalars
        self.assertEqual([p.name for p in k.params], ["out", "h", "b", "i", "u", "flag", "d"])
        self.assertEqual([p.type for p in k.params], ["*f32", "f16", "bf16", "i64", "u8", "bool", "f64"])
        self.assertTrue(k.has_grid)
        n = self.m.noptr.params[0]
        self.assertTrue(n.is_const)
        self.assertEqual(n.default, 3)
        self.m.noptr()   # no array argument: the CPU
        self.assertEqual(sorted(self.m.kernels), ["noptr", "scalars", "twod"])


class Contexts(unittest.TestCase):
    def test_context_options(self):
        ctx = tile.Context("cpu", mode="max-autotune")
        self.assertEqual(ctx.mode, "max-autotune")
        self.assertEqual(ctx.device, "cpu")
        self.assertIsNone(ctx.cache_dir)
        k = ctx.loads(SCALARS).twod
        out = np.zeros((1, 2), np.int32)
        k[(2,)](out, 2)
        np.testing.assert_array_equal(out, [[0, 1]])
        self.assertIs(k._plans[(("cpu", -1), ())].ctx, ctx)
        with self.assertRaisesRegex(ValueError, "unknown mode 'fast'"):
            tile.Context("cpu", mode="fast")
        with self.assertRaisesRegex(ValueError, "unknown device 'tpu'"):
            tile.Context("tpu")
        self.assertEqual(tile.default_context("cpu").device, "cpu")

    def test_mode_from_env(self):
        os.environ["TILE_MODE"] = "reduce-overhead"
        try:
            self.assertEqual(tile.Context("cpu").mode, "reduce-overhead")
        finally:
            del os.environ["TILE_MODE"]


class Examples(unittest.TestCase):
    def test_rmsnorm_or_layernorm_loads(self):
        for f in sorted(EXAMPLES.glob("*.tile")):
            m = tile.load(f)
            self.assertTrue(m.kernels, f)
            for k in m.kernels.values():
                self.assertTrue(all(p.elem in tile.DTYPE_NAMES for p in k.params), k)


if __name__ == "__main__":
    unittest.main()
