"""The tile package on CPU torch tensors (the interpreter) and as a PyTorch operator.
Skipped where torch is not installed; tests/gpu/test_python_gpu.py does the same on
CUDA tensors and under torch.compile."""
import sys
import unittest
from pathlib import Path

try:
    import torch
except ImportError:
    torch = None

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import tile  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"


@unittest.skipIf(torch is None, "torch is not installed")
class TorchCpu(unittest.TestCase):
    def test_softmax_bf16_tensors(self):
        k = tile.load(EXAMPLES / "softmax.tile").softmax
        x = torch.randn(5, 77, dtype=torch.float32).to(torch.bfloat16)
        out = torch.empty_like(x)
        k(out, x, x.stride(0), x.shape[0], x.shape[1], BLOCK=128)
        torch.testing.assert_close(out.float(), torch.softmax(x.float(), 1), rtol=1e-2, atol=1e-3)
        with self.assertRaisesRegex(TypeError, r"argument 'inp' is a tensor of float32 on cpu, but the parameter is \*bf16"):
            k(out, x.float(), x.stride(0), x.shape[0], x.shape[1], BLOCK=128)

    def test_strided_view(self):
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        a = torch.arange(20, dtype=torch.float32)
        b = torch.ones(10)
        c = torch.zeros(30)
        k(c[10:20], a[10:], b, 10)
        torch.testing.assert_close(c[10:20], a[10:] + 1)
        self.assertTrue((c[:10] == 0).all() and (c[20:] == 0).all())

    def test_operator(self):
        k = tile.load(EXAMPLES / "vector_add.tile").vector_add
        op = tile.register_torch_op("tiletest_cpu::vector_add", k, mutates_args=["c"], BLOCK=256)
        self.assertEqual(tile.torch_ops.schema(k, ["c"], {"BLOCK": 256}),
                         "(Tensor(a!) c, Tensor a, Tensor b, SymInt n) -> ()")
        a, b = torch.randn(1000), torch.randn(1000)
        c = torch.empty(1000)
        op(c, a, b, 1000)
        torch.testing.assert_close(c, a + b)
        torch.ops.tiletest_cpu.vector_add(c, a, b, n=1000)
        torch.testing.assert_close(c, a + b)
        with self.assertRaisesRegex(ValueError, "'x' in mutates_args is not a pointer parameter"):
            tile.register_torch_op("tiletest_cpu::bad", k, mutates_args=["x"])


if __name__ == "__main__":
    unittest.main()
