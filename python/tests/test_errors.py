"""The package's refusals (docs/PYTHON.md): a read-only array for a parameter the kernel
writes, grids that do not fit or are not grids, sources that are not text, and the
exported tile.ArgError."""
import sys
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"

ATOMIC = """
kernel count(hist: *i32, x: *i32) grid(1) {
    atomic_add(hist + load(x + arange(0, 4)), 1);
}
"""


class ReadOnly(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.add = tile.load(EXAMPLES / "vector_add.tile").vector_add

    def test_output_of_bytes_refused(self):
        frozen = np.frombuffer(bytes(64), np.float32)   # a view of an immutable bytes object
        a = np.ones(16, np.float32)
        with self.assertRaisesRegex(ValueError, r"kernel 'vector_add': argument 'c' is a read-only numpy "
                                    r"array, but the kernel may write through parameter 'c'"):
            self.add(frozen, a, a, 16)
        self.assertEqual(bytes(frozen), bytes(64))

    def test_read_only_inputs_taken(self):
        a = np.arange(16, dtype=np.float32)
        a.flags.writeable = False
        b = np.frombuffer(np.ones(16, np.float32).tobytes(), np.float32)
        c = np.zeros(16, np.float32)
        self.add(c, a, b, 16)
        np.testing.assert_array_equal(c, a + 1)

    def test_atomic_target_refused(self):
        k = tile.loads(ATOMIC).count
        hist = np.zeros(4, np.int32)
        hist.flags.writeable = False
        with self.assertRaisesRegex(ValueError, "argument 'hist' is a read-only numpy array"):
            k(hist, np.arange(4, dtype=np.int32))

    def test_bits_output_refused(self):
        k = tile.load(EXAMPLES / "softmax.tile").softmax
        x = np.zeros((2, 8), np.uint16)
        out = np.frombuffer(bytes(32), np.uint16).reshape(2, 8)
        with self.assertRaisesRegex(ValueError, "argument 'out' is a read-only numpy array"):
            k(tile.bits(out, "bf16"), tile.bits(x, "bf16"), 8, 2, 8, BLOCK=8)


class Grids(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.add = tile.load(EXAMPLES / "vector_add.tile").vector_add
        cls.a = np.zeros(4, np.float32)

    def test_too_large(self):
        for g in ((2**32 + 1,), 2**32, (1, 2**40)):
            with self.subTest(grid=g):
                with self.assertRaisesRegex(OverflowError, r"each size must be at most 2\*\*32 - 1 = 4294967295"):
                    self.add[g](self.a, self.a, self.a, 4)

    def test_not_a_grid(self):
        for g in (2.0, "4", (1.5,), {1: 2}, np.float64(3)):
            with self.subTest(grid=g):
                with self.assertRaisesRegex(TypeError, r"a grid is an int, a tuple of 1 to 3 ints, or a function"):
                    self.add[g](self.a, self.a, self.a, 4)
        with self.assertRaisesRegex(TypeError, r"the grid is 2.0 \(float\)"):
            self.add[lambda meta: 2.0](self.a, self.a, self.a, 4)

    def test_shape(self):
        for g in ((), (1, 1, 1, 1), (-1,)):
            with self.subTest(grid=g):
                with self.assertRaisesRegex(ValueError, "expected 1 to 3 non-negative ints"):
                    self.add[g](self.a, self.a, self.a, 4)


class Sources(unittest.TestCase):
    SRC = "kernel k(p: *f32) grid(1) { store(p, 1.0); }\n"

    def test_bytes_are_utf8(self):
        m = tile.loads(self.SRC.encode())
        p = np.zeros(1, np.float32)
        m.k(p)
        self.assertEqual(p[0], 1.0)
        with self.assertRaises(UnicodeDecodeError):
            tile.loads(b"kernel k() { } \xff")

    def test_not_text(self):
        with self.assertRaisesRegex(TypeError, "the source must be str or bytes"):
            tile.loads(42)

    def test_nul(self):
        with self.assertRaisesRegex(ValueError, r"<string>:2:7: the source has a NUL character \(offset 51\)"):
            tile.loads(self.SRC + "kernel\0 j() { }")
        with self.assertRaisesRegex(ValueError, r"x.tile:1:1: the source has a NUL"):
            tile.loads(b"\0", name="x.tile")


class Exports(unittest.TestCase):
    def test_arg_error(self):
        self.assertTrue(issubclass(tile.ArgError, TypeError))
        add = tile.load(EXAMPLES / "vector_add.tile").vector_add
        a = np.zeros(4, np.float32)
        with self.assertRaises(tile.ArgError):
            add(a, a, a.astype(np.float64), 4)


if __name__ == "__main__":
    unittest.main()
