"""The launch keys as the package sees them: read from libtileRT (trt_launch_key, whose
table is ir/launch.def), so that every key the compiler takes is taken by a Kernel's
config path and by torch_ops.register, and the library checks the ranges."""
import sys
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402
from tile import torch_ops  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
ALL_KEYS = ("warps", "stages", "ws", "persistent", "overlap", "cluster", "pingpong")


class LaunchKeys(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.k = tile.load(EXAMPLES / "vector_add.tile").vector_add

    def test_table(self):
        self.assertEqual(tuple(tile.LAUNCH_KEYS), ALL_KEYS)
        self.assertEqual(tile.LAUNCH_KEYS["warps"], (1, 32, 4))
        self.assertEqual(tile.LAUNCH_KEYS["stages"], (1, 8, 2))
        self.assertEqual(tile.LAUNCH_KEYS["cluster"], (1, 4, 1))
        self.assertEqual(tile.LAUNCH_KEYS["pingpong"], (0, 1, 0))

    def test_kernel_takes_every_key(self):
        for key, (lo, hi, default) in tile.LAUNCH_KEYS.items():
            for v in (lo, hi, default):
                with self.subTest(key=key, value=v):
                    a, b = np.arange(100, dtype=np.float32), np.ones(100, np.float32)
                    c = np.zeros(100, np.float32)
                    self.k(c, a, b, 100, BLOCK=64, **{key: v})
                    np.testing.assert_array_equal(c, a + b)

    def test_kernel_refuses_out_of_range(self):
        a = np.zeros(8, np.float32)
        for key, (lo, hi, _) in tile.LAUNCH_KEYS.items():
            with self.subTest(key=key):
                with self.assertRaisesRegex(tile.TileError, r"%s must be .*, got %d" % (key, hi + 1)):
                    self.k(a, a, a, 8, **{key: hi + 1})

    def test_torch_ops_takes_every_key(self):
        fixed = {key: default for key, (_, _, default) in tile.LAUNCH_KEYS.items()}
        torch_ops.check_consts(self.k, dict(fixed, BLOCK=256))
        with self.assertRaisesRegex(ValueError, r"has no const parameter 'wraps' \(nor a launch key: warps, stages"):
            torch_ops.check_consts(self.k, {"wraps": 4})
        self.assertEqual(torch_ops.schema(self.k, ["c"], dict(fixed, BLOCK=256)),
                         "(Tensor(a!) c, Tensor a, Tensor b, SymInt n) -> ()")


if __name__ == "__main__":
    unittest.main()
