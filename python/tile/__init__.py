"""tile: load .tile kernels and launch them on numpy arrays (the CPU, through the
reference interpreter) or torch tensors (the GPU, on PyTorch's current stream).

    import tile
    k = tile.load("softmax.tile").softmax
    k(out, x, x.stride(0), n_rows, n_cols, BLOCK=1024)        # grid from grid(...)
    k[(n_rows,)](out, x, x.stride(0), n_rows, n_cols, BLOCK=1024)
    ln = tile.load("residual_layernorm.tile").residual_layernorm   # a graph
    r, y = ln(x, res, w, b)                                          # new arrays

docs/PYTHON.md has the whole story."""
from ._lib import LAUNCH_KEYS, TileError, path as library_path
from ._args import ArgError, Bits, DTYPE_NAMES
from ._context import Context, default_context, set_default_context
from ._module import Kernel, Module, Param, load, loads
from ._graph import CudaGraph
from ._tensor_graph import GraphParam, TensorGraph
from ._autograd import GraphFunction
from . import ops

__version__ = "0.1.0"
__all__ = ["ArgError", "Context", "CudaGraph", "GraphFunction", "GraphParam", "Kernel", "LAUNCH_KEYS", "Module", "Param", "TileError", "bits", "default_context",
           "load", "loads", "register_torch_op", "set_default_context", "library_path", "TensorGraph",
           "runtime_version", "compiler_id", "ops"]


def runtime_version():
    """The version of the libtileRT this package loaded (trt_version(), "0.1.0"), which
    may differ from the package's own __version__ when TILE_LIB names another build."""
    from ._lib import lib
    return lib.trt_version().decode()


def compiler_id():
    """The identity of the compiler whose code the loaded libtileRT caches
    ("src-<hash of its sources>-llvm-<version>"; trt_compiler_id()): cache entries of
    any other build are never served to it (docs/CACHE.md)."""
    from ._lib import lib
    return lib.trt_compiler_id().decode()


def bits(array, elem):
    """Pass `array` (numpy or torch) for a *elem parameter whose elements it holds as
    bits of the same size: tile.bits(np_uint16_array, "bf16")."""
    return Bits(array, elem)


def register_torch_op(qualname, kernel, mutates_args, grid=None, **consts):
    """Registers `kernel` as the PyTorch operator `qualname` ("ns::name"); see
    tile.torch_ops.register."""
    from .torch_ops import register
    return register(qualname, kernel, mutates_args, grid=grid, **consts)
