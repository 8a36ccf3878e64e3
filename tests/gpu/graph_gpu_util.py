"""What the tensor-graph GPU tests share (test_graph_examples_gpu.py,
test_linear_ce_gpu.py, test_graph_attention_bwd_gpu.py): torch with a CUDA device or
exit 77 (ctest's skip), bench/tilert.py's runtime on TILE_LIB, and the normwise check of
a graph's results against PyTorch's."""
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))


def torch_or_skip():
    """torch, or exit 77 (skipped) without it or without a CUDA device."""
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        print("skipped: needs torch with a CUDA device")
        sys.exit(77)
    return torch


def runtime(prefix):
    """A tilert.Runtime on TILE_LIB (build-gpu's by default) with a fresh kernel cache."""
    import tilert
    lib = os.environ.get("TILE_LIB", os.path.join(ROOT, "build-gpu", "runtime", "libtileRT.so"))
    return tilert.Runtime(lib, cache_dir=tempfile.mkdtemp(prefix=prefix))


def check_normwise(got, want, tol, floor=0.0):
    """Each result i within tol(i) (or tol) of max |want[i]| (at least floor), in max
    abs error; an AssertionError naming the first that is not."""
    for i, (a, b) in enumerate(zip(got, want)):
        big = b.abs().max().item()
        err = (a.double() - b).abs().max().item()
        t = tol(i) if callable(tol) else tol
        if not err <= t * max(big, floor):
            raise AssertionError("ret%d: max error %.3g against max |torch| %.3g" % (i, err, big))
