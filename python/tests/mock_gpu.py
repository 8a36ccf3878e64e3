"""The package's GPU path against the mock CUDA driver (tests/mock), with a stand-in
for torch: CUDA "tensors" are numpy arrays that say they live on a device. The kernels
compile for real (libtileCG), and the mock records each launch, so this checks what
reaches cuLaunchKernel from a Python call: the function, the grid, PyTorch's current
stream, and every parameter's bytes at the width the PTX declares. Run in a process of
its own (it replaces sys.modules["torch"]); ctest python/mock-gpu sets
TILE_CUDA_LIBRARY to the mock and TILE_LIB to the library."""
import ctypes
import os
import struct
import sys
import tempfile
import types
import unittest
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


class _Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class _Device:
    def __init__(self, index):
        self.type, self.index = "cuda", index

    def __str__(self):
        return "cuda:%d" % self.index


class Tensor:
    """What the package reads of a CUDA tensor."""
    is_cuda = True

    def __init__(self, array, device=0):
        self.array, self.dtype, self.device = array, _Dtype(array.dtype.name), _Device(device)

    def get_device(self):
        return self.device.index

    def data_ptr(self):
        return self.array.ctypes.data

    def element_size(self):
        return self.array.itemsize

    def is_contiguous(self):
        return self.array.flags.c_contiguous

    def numel(self):
        return self.array.size

    @property
    def shape(self):
        return self.array.shape

    def stride(self):
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def contiguous(self):
        return self if self.array.flags.c_contiguous else Tensor(np.ascontiguousarray(self.array), self.device.index)


def _empty(shape, dtype, device):
    """torch.empty for the dtypes below on "cuda:N"."""
    return Tensor(np.empty(shape, dtype.name), int(str(device).split(":")[1]))


class _Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


class _Cuda:
    current, stream = 0, 0

    @staticmethod
    def init():
        pass

    @classmethod
    def current_device(cls):
        return cls.current

    @classmethod
    def current_stream(cls, index=None):
        return _Stream(cls.stream)


fake_torch = types.ModuleType("torch")
fake_torch.Tensor, fake_torch.cuda, fake_torch.empty = Tensor, _Cuda, _empty
fake_torch.float32, fake_torch.float16 = _Dtype("float32"), _Dtype("float16")
sys.modules["torch"] = fake_torch
os.environ.setdefault("TILE_CACHE_DIR", tempfile.mkdtemp(prefix="tile-mock-gpu-"))
import tile  # noqa: E402


class MockLaunch(ctypes.Structure):
    _fields_ = [("func", ctypes.c_char * 64), ("grid", ctypes.c_uint * 3),
                ("block", ctypes.c_uint * 3), ("shmem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("nparams", ctypes.c_int),
                ("param_bytes", ctypes.c_int * 64), ("params", ctypes.c_uint64 * 64),
                ("ntma", ctypes.c_int), ("tma", (ctypes.c_uint64 * 16) * 4)]   # MockTensorMap: 128 bytes


mock = ctypes.CDLL(os.environ["TILE_CUDA_LIBRARY"])


class MockCounts(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("init", "retains", "releases", "set_current", "ptx_loads",
                                            "cubin_loads", "unloads", "links", "launches",
                                            "graph_launches")]


def last_launch():
    m = MockLaunch()
    mock.mockcuda_last_launch(ctypes.byref(m))
    return m


# IR_OP_STORE, the guarded op's code in a report (ir/ops.def: its row's index).
STORE_OPCODE = next(i for i, l in enumerate(
    l for l in (Path(__file__).resolve().parent.parent.parent / "ir" / "ops.def").read_text().splitlines()
    if l.startswith("OP(")) if l.startswith("OP(STORE,"))
VECTOR_ADD = Path(__file__).resolve().parent.parent.parent / "examples" / "vector_add.tile"
SCALARS = """
kernel scalars(out: *f32, h: f16, b: bf16, i: i64, u: u8, flag: bool, d: f64) grid(1) {
    let v = (h as f32) + (b as f32) + (i as f32) + (u as f32) + (d as f32);
    store(out + arange(0, 2), where(arange(0, 2) == 0, v, flag as f32));
}
"""


SCALE = """
@autotune(key = [n], space = {BLOCK: [64, 128, 256], warps: [1, 2]},
          default = {BLOCK: 128, warps: 2})
kernel scale(y: *f32, x: *f32, n: i32, const BLOCK: i32 = 128) grid(cdiv(n, BLOCK)) {
    let offs = program_id(0) * BLOCK + arange(0, BLOCK);
    store(y + offs, load(x + offs, offs < n) * 2.0, offs < n);
}
"""
rt = ctypes.CDLL(os.environ["TILE_LIB"])


def device_tensor(ctx, n):
    """A "tensor" in the mock's device memory (host memory it allocated), so the tuner
    can find its allocation as it finds a CUDA tensor's."""
    p = ctypes.c_uint64()
    assert rt.trt_mem_alloc(ctx.handle, ctypes.c_size_t(4 * n), ctypes.byref(p)) == 0
    arr = np.ctypeslib.as_array((ctypes.c_float * n).from_address(p.value))
    arr[:] = 0
    return Tensor(arr)


class MockGpu(unittest.TestCase):
    def test_max_autotune_through_the_package(self):
        # The mock's fake time of BLOCK=256 warps=1 is the lowest: the tuner (its worker
        # found beside libtileRT) picks it, and a default-mode context reuses it.
        os.environ["MOCKCUDA_TIMES"] = "BLOCK=256,warps=1:0.2"
        try:
            cache = tempfile.mkdtemp(prefix="tile-mock-tune-")
            ctx = tile.Context("cuda", mode="max-autotune", cache_dir=cache)
            k = ctx.loads(SCALE, name="scale.tile").scale
            x, y = device_tensor(ctx, 1000), device_tensor(ctx, 1000)
            k(y, x, 1000)
            m = last_launch()
            self.assertEqual((m.grid[0], m.block[0]), (4, 32))     # cdiv(1000, 256), 1 warp
            again = tile.Context("cuda", mode="default", cache_dir=cache)
            k2 = again.loads(SCALE, name="scale.tile").scale
            k2(y, x, 1000)
            m = last_launch()
            self.assertEqual((m.grid[0], m.block[0]), (4, 32))
            self.assertEqual(k.last_config(), {"BLOCK": 256, "warps": 1})   # what the tuner chose
            self.assertEqual(k2.last_config(), {"BLOCK": 256, "warps": 1})  # from the cache
            # Memory the driver does not know (numpy's): the tuner cannot copy it, says
            # so, and the launch runs the default config.
            k(Tensor(np.zeros(500, np.float32)), Tensor(np.zeros(500, np.float32)), 500)
            m = last_launch()
            self.assertEqual((m.grid[0], m.block[0]), (4, 64))     # cdiv(500, 128), 2 warps
            self.assertEqual(k.last_config(), {"BLOCK": 128, "warps": 2})
            self.assertIsNone(again.loads(SCALE, name="scale.tile").scale.last_config())
        finally:
            del os.environ["MOCKCUDA_TIMES"]

    def test_required_cache_and_knobs(self):
        # A required cache never compiles: the miss is a TileError naming the kernel;
        # warmed in the default mode, the same launch is served. A knob is part of the
        # key, so a context with sink = 0 misses the warmed entry.
        cache = tempfile.mkdtemp(prefix="tile-mock-require-")
        a, b, c = (Tensor(np.zeros(64, np.float32)) for _ in range(3))
        req = tile.Context("cuda", cache_dir=cache, cache_mode="require")
        self.assertEqual(req.cache_mode, "require")
        with self.assertRaises(tile.TileError) as e:
            req.load(VECTOR_ADD).vector_add(c, a, b, 64)
        self.assertEqual(e.exception.status, "TRT_ERROR_CACHE_MISS")
        self.assertIn("kernel 'vector_add' (variant: BLOCK=1024", str(e.exception))
        tile.Context("cuda", cache_dir=cache).load(VECTOR_ADD).vector_add(c, a, b, 64)
        tile.Context("cuda", cache_dir=cache, cache_mode="require").load(VECTOR_ADD).vector_add(c, a, b, 64)
        other = tile.Context("cuda", cache_dir=cache, cache_mode="require", knobs={"sink": 0})
        with self.assertRaises(tile.TileError) as e:
            other.load(VECTOR_ADD).vector_add(c, a, b, 64)
        self.assertEqual(e.exception.status, "TRT_ERROR_CACHE_MISS")
        with self.assertRaises(ValueError):
            tile.Context("cuda", cache_dir=cache, cache_mode="always")
        with self.assertRaises(tile.TileError) as e:
            tile.Context("cuda", cache_dir=cache, knobs={"snk": 0})
        self.assertIn("no knob is named 'snk'", str(e.exception))
        self.assertRegex(tile.compiler_id(), r"^src-[0-9a-f]{32}-llvm-")

    def test_vector_add_reaches_the_driver(self):
        k = tile.load(VECTOR_ADD).vector_add
        a, b, c = (Tensor(np.zeros(5000, np.float32)) for _ in range(3))
        _Cuda.stream = 0x5000
        k(c, a, b, 5000)
        m = last_launch()
        self.assertEqual(m.func, b"vector_add")
        self.assertEqual(list(m.grid), [5, 1, 1])                 # grid(cdiv(n, BLOCK))
        self.assertEqual(m.stream, 0x5000)                         # the current stream
        self.assertEqual(list(m.param_bytes[:4]), [8, 8, 8, 4])
        self.assertEqual(list(m.params[:4]), [c.data_ptr(), a.data_ptr(), b.data_ptr(), 5000])
        _Cuda.stream = 0
        k[(7, 2)](c, a, b, 5000, BLOCK=256)
        m = last_launch()
        self.assertEqual(list(m.grid), [7, 2, 1])
        self.assertIsNone(m.stream)                                # the legacy default stream
        self.assertEqual(len(k._plans), 2)
        self.assertEqual(k._plans[(("cuda", 0), (("BLOCK", 256),))].ctx.device, "cuda:0")

    def test_prepared_launch_reads_the_stream_each_time(self):
        k = tile.load(VECTOR_ADD).vector_add
        a = Tensor(np.zeros(100, np.float32))
        run = k.prepare(a, a, a, 100)
        for stream in (0x7000, 0x8000):
            _Cuda.stream = stream
            run()
            m = last_launch()
            self.assertEqual(m.stream, stream)
            self.assertEqual(list(m.params[:4]), [a.data_ptr()] * 3 + [100])
        _Cuda.stream = 0

    def test_scalar_bytes(self):
        k = tile.loads(SCALARS, name="scalars.tile").scalars
        out = Tensor(np.zeros(2, np.float32))
        k(out, 1.5, 2.0, -7, 200, True, 0.25)
        m = last_launch()
        self.assertEqual(list(m.param_bytes[:7]), [8, 2, 2, 8, 1, 1, 8])
        want = [out.data_ptr(), 0x3E00, 0x4000, (1 << 64) - 7, 200, 1,
                struct.unpack("=Q", struct.pack("=d", 0.25))[0]]
        self.assertEqual(list(m.params[:7]), want)

    def test_fault_names_the_kernel_and_later_calls_fail(self):
        """A kernel fault seen at a synchronization (the mock returns 700, as an
        out-of-bounds store makes the driver do) raises TileError naming the kernels
        launched since the last synchronization and saying the process must restart;
        every later launch on that context raises the same explanation. The mock's
        fault is sticky for its process, as the driver's is: the test runs in a child."""
        if not os.environ.get("MOCK_GPU_FAULT_CHILD"):
            import subprocess
            r = subprocess.run([sys.executable, __file__, "-v",
                                "MockGpu.test_fault_names_the_kernel_and_later_calls_fail"],
                               env=dict(os.environ, MOCK_GPU_FAULT_CHILD="1"),
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertIn("ok", r.stderr)
            return
        ctx = tile.Context("cuda:0")
        k = ctx.load(VECTOR_ADD).vector_add
        a = Tensor(np.zeros(100, np.float32))
        k(a, a, a, 100)
        os.environ["MOCKCUDA_SYNC_ERROR"] = "700"
        try:
            with self.assertRaises(tile.TileError) as e:
                ctx.synchronize()
        finally:
            del os.environ["MOCKCUDA_SYNC_ERROR"]
        self.assertEqual(e.exception.status, "TRT_ERROR_DRIVER")
        self.assertIn("'vector_add'", str(e.exception))
        self.assertIn("the process must restart", str(e.exception))
        with self.assertRaisesRegex(tile.TileError, "must restart"):
            k(a, a, a, 100)

    def test_runtime_version(self):
        self.assertRegex(tile.runtime_version(), r"^\d+\.\d+\.\d+$")
        self.assertEqual(tile.runtime_version(), tile.__version__)

    def test_device_checks(self):
        k = tile.load(VECTOR_ADD).vector_add
        a = Tensor(np.zeros(10, np.float32))
        with self.assertRaisesRegex(TypeError, r"argument 'b' is a numpy array of float32, but the launch runs on cuda:0 \(where argument 'c' is\)"):
            k(a, a, np.zeros(10, np.float32), 10)
        with self.assertRaisesRegex(TypeError, r"argument 'b' is a tensor of float16 on cuda:0, but the parameter is \*f32"):
            k(a, a, Tensor(np.zeros(10, np.float16)), 10)
        with self.assertRaisesRegex(TypeError, r"argument 'b' is a tensor of float32 on cuda:1, but the launch runs on cuda:0"):
            k(a, a, Tensor(np.zeros(10, np.float32), device=1), 10)

    def test_checked_mode_passes_every_size(self):
        """check_bounds=True (TILE_DEBUG=bounds): the checked variant gets each tensor's
        element count after the arguments, and a report from the kernel (the mock writes
        one) raises TileError in the interpreter's words; the next launch works."""
        ctx = tile.Context("cuda:0", check_bounds=True)
        self.assertTrue(ctx.check_bounds)
        k = ctx.load(VECTOR_ADD).vector_add
        a, b = Tensor(np.zeros(300, np.float32)), Tensor(np.zeros(200, np.float32))
        c = Tensor(np.zeros((10, 20), np.float32)[:, ::2])          # strided: 10 x 10, 199 elements reached
        k[(1,)](c, a, b, 100)
        m = last_launch()
        self.assertEqual(m.nparams, 4 + 3 + 1)
        self.assertEqual([ctypes.c_int64(x).value for x in m.params[4:7]], [199, 300, 200])
        report = "0,%d,1,0,0,5,4096,199,4,9" % STORE_OPCODE
        os.environ["MOCKCUDA_BOUNDS_REPORT"] = report
        try:
            with self.assertRaisesRegex(tile.TileError, r"out-of-bounds store in kernel 'vector_add', program "
                                        r"\(1, 0, 0\): argument 'c' has 199 elements, lane 5 writes element 4096"):
                k[(1,)](c, a, b, 100)
        finally:
            del os.environ["MOCKCUDA_BOUNDS_REPORT"]
        k[(1,)](c, a, b, 100)
        self.assertFalse(tile.Context("cuda:0", check_bounds=False).check_bounds)

    def test_cuda_graph_capture_replay_update(self):
        """Launches inside g.capture() reach the driver only on replay, one cuGraphLaunch
        for both, with the captured parameters; update() changes launch 1's pointer and
        scalar in place; the errors say what went wrong."""
        k = tile.load(VECTOR_ADD).vector_add
        a, b, c, d = (Tensor(np.zeros(4096, np.float32)) for _ in range(4))
        k(c, a, b, 4096)                    # compiled before the capture
        _Cuda.stream = 0x9000
        counts = MockCounts()
        mock.mockcuda_counts(ctypes.byref(counts))
        before = counts.launches
        g = tile.CudaGraph()
        with g.capture():
            k(c, a, b, 4096)
            run = k.prepare(d, c, c, 2048)
            run()
        mock.mockcuda_counts(ctypes.byref(counts))
        self.assertEqual(counts.launches, before)               # nothing ran yet
        self.assertEqual(len(g), 2)
        self.assertEqual(k.last_config(), {})                   # no @autotune, no consts
        g.replay()
        mock.mockcuda_counts(ctypes.byref(counts))
        self.assertEqual(counts.launches, before + 2)
        m = last_launch()
        self.assertEqual(m.stream, 0x9000)
        self.assertEqual(list(m.params[:4]), [d.data_ptr(), c.data_ptr(), c.data_ptr(), 2048])
        self.assertEqual(list(m.grid), [2, 1, 1])
        g.update(1, d, a, b, 2000)                              # same grid: cdiv(2000, 1024) = 2
        g.replay()
        m = last_launch()
        self.assertEqual(list(m.params[:4]), [d.data_ptr(), a.data_ptr(), b.data_ptr(), 2000])
        with self.assertRaisesRegex(tile.TileError, "grid"):   # another grid: capture again
            g.update(1, d, a, b, 112)
        with self.assertRaisesRegex(tile.TileError, "changed class"):    # another variant
            g.update(1, d, a, b, 2001)
        with self.assertRaisesRegex(ValueError, "other consts"):
            g.update(0, c, a, b, 4096, BLOCK=256)
        with self.assertRaises(IndexError):
            g.update(2, c, a, b, 4096)
        with self.assertRaisesRegex(tile.TileError, "nothing has been captured"):
            tile.CudaGraph().replay()
        other = tile.Context("cuda:0")
        k_other = other.load(VECTOR_ADD).vector_add
        with self.assertRaisesRegex(tile.TileError, "another tile context"):
            with tile.CudaGraph().capture():
                k_other(c, a, b, 4096)
        _Cuda.stream = 0

    def test_tensor_graph_runs_its_plan_on_the_current_stream(self):
        """A graph called on CUDA tensors: each kernel of its fusion plan reaches the
        driver on PyTorch's current stream, the last one writing the result, a new
        tensor on the arguments' device; a numpy array among them is refused."""
        g = tile.loads(FFN_GRAPH, name="ffn.tile").ffn
        x, w, b = Tensor(np.zeros((6, 4), np.float32)), Tensor(np.zeros((4, 2), np.float32)), \
            Tensor(np.zeros(2, np.float32))
        counts = MockCounts()
        mock.mockcuda_counts(ctypes.byref(counts))
        before = counts.launches
        _Cuda.stream = 0x6000
        out = g(x, w, b)
        mock.mockcuda_counts(ctypes.byref(counts))
        self.assertEqual(counts.launches, before + 1)                  # one GEMM with its epilogue
        m = last_launch()
        self.assertEqual(m.func, b"ffn_k0")
        self.assertEqual(m.stream, 0x6000)
        self.assertIsInstance(out, Tensor)
        self.assertEqual((out.shape, str(out.dtype), out.get_device()), ((6, 2), "torch.float32", 0))
        self.assertIn(out.data_ptr(), list(m.params[:m.nparams]))
        self.assertIn(x.data_ptr(), list(m.params[:m.nparams]))
        self.assertIn(6, list(m.params[:m.nparams]))                     # T, a size argument
        _Cuda.stream = 0
        with self.assertRaisesRegex(tile.ArgError, r"graph 'ffn': argument 'w' is a numpy array of float32, but "
                                    r"the graph runs on cuda:0 \(where argument 'x' is\)"):
            g(x, np.zeros((4, 2), np.float32), b)
        with self.assertRaisesRegex(tile.ArgError, r"graph 'ffn': argument 'b' is a tensor of float32 on cuda:1, "
                                    r"but the graph runs on cuda:0"):
            g(x, w, Tensor(np.zeros(2, np.float32), device=1))


FFN_GRAPH = """
graph ffn(x: f32[T, 4], w: f32[4, 2], b: f32[2]) -> f32[T, 2] { return maximum(x @ w + b, 0.0); }
"""


if __name__ == "__main__":
    unittest.main()
