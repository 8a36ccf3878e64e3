"""ctypes bindings of libtileRT for the benchmarks and the GPU tests.

Loads libtileRT.so (TILE_LIB, else next to this file's build), shares the device's
primary context with PyTorch, and launches kernels on PyTorch's current stream with
torch tensors as pointer arguments."""
import ctypes
import os

import torch

_KINDS = {  # TrtArgKind
    "ptr": 0, "bool": 1, "i8": 2, "i16": 3, "i32": 4, "i64": 5, "u8": 6, "u16": 7,
    "u32": 8, "u64": 9, "f16": 10, "bf16": 11, "f32": 12, "f64": 13,
}


def gemm_consts(cfg):
    """The launch constants of a GEMM config tuple (BM, BN, BK, warps, stages[, ws[,
    persistent[, cluster[, pingpong]]]]), as the benchmarks and the GPU tests name them;
    ws 1 gives the TMA copies a producer warpgroup, persistent 1 runs one program per SM
    slot walking the tiles, cluster 2 runs each program (BM rows) on two CTAs of BM / 2
    rows with B multicast between them, pingpong 1 (with ws, persistent, 4 warps) has two
    consumer warpgroups take alternate tiles, one's main loop beside the other's
    epilogue."""
    BM, BN, BK, warps, stages = cfg[:5]
    # ws, persistent, cluster and pingpong always given: a kernel's default config may set them
    return dict(BM=BM, BN=BN, BK=BK, warps=warps, stages=stages, ws=cfg[5] if len(cfg) > 5 else 0,
                persistent=cfg[6] if len(cfg) > 6 else 0, cluster=cfg[7] if len(cfg) > 7 else 1,
                pingpong=cfg[8] if len(cfg) > 8 else 0)


class _Val(ctypes.Union):
    _fields_ = [("ptr", ctypes.c_uint64), ("i32", ctypes.c_int32), ("i64", ctypes.c_int64),
                ("u16", ctypes.c_uint16), ("f32", ctypes.c_float), ("f64", ctypes.c_double)]


class _Arg(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("v", _Val)]


class _Const(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


class TileError(RuntimeError):
    pass


MODE_MAX_AUTOTUNE = 2  # TRT_MODE_MAX_AUTOTUNE
_tuning = {}


def tuning_runtime(lib_path):
    """One max-autotune Runtime per library and process, on a fresh empty cache: a
    benchmark's first launch of a key through it tunes that key (docs/TUNING.md)."""
    if lib_path not in _tuning:
        import tempfile
        _tuning[lib_path] = Runtime(lib_path, cache_dir=tempfile.mkdtemp(prefix="tile-bench-tune-"),
                                    mode=MODE_MAX_AUTOTUNE)
    return _tuning[lib_path]


class Runtime:
    def __init__(self, lib_path=None, cache_dir=None, mode=0):
        path = lib_path or os.environ.get("TILE_LIB", "libtileRT.so")
        self.lib = ctypes.CDLL(path)
        L = self.lib
        L.trt_last_error.restype = ctypes.c_char_p
        L.trt_status_name.restype = ctypes.c_char_p
        L.trt_context_create.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p,
                                         ctypes.POINTER(ctypes.c_void_p)]
        L.trt_module_load_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                           ctypes.POINTER(ctypes.c_void_p)]
        L.trt_module_get_kernel.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                            ctypes.POINTER(_Const), ctypes.c_uint32,
                                            ctypes.POINTER(ctypes.c_void_p)]
        L.trt_launch.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Arg), ctypes.c_uint32,
                                 ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
        L.trt_launch_sized.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Arg), ctypes.POINTER(ctypes.c_uint64),
                                       ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32), ctypes.c_void_p]
        L.trt_module_get_graph.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]
        L.trt_tgraph_bind.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _Arg]
        L.trt_tgraph_bind_size.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int64]
        L.trt_tgraph_bind_output.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64]
        L.trt_tgraph_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        L.trt_tgraph_num_kernels.argtypes = [ctypes.c_void_p]
        L.trt_tgraph_num_kernels.restype = ctypes.c_uint32
        L.trt_tgraph_destroy.argtypes = [ctypes.c_void_p]
        torch.cuda.init()  # the primary context exists before tile retains it
        ctx = ctypes.c_void_p()
        cd = None if cache_dir is None else cache_dir.encode()
        self._check(L.trt_context_create(torch.cuda.current_device(), mode, cd, ctypes.byref(ctx)))
        self.ctx = ctx
        self.modules = {}

    def _check(self, status):
        if status != 0:
            raise TileError("%s: %s" % (self.lib.trt_status_name(status).decode(),
                                        self.lib.trt_last_error().decode()))

    def kernel(self, path, name, **consts):
        if path not in self.modules:
            m = ctypes.c_void_p()
            self._check(self.lib.trt_module_load_file(self.ctx, path.encode(), ctypes.byref(m)))
            self.modules[path] = m
        cs = (_Const * max(1, len(consts)))(*[_Const(k.encode(), v) for k, v in consts.items()])
        k = ctypes.c_void_p()
        self._check(self.lib.trt_module_get_kernel(self.modules[path], name.encode(), cs,
                                                   len(consts), ctypes.byref(k)))
        return Kernel(self, k)


    def graph(self, path, name):
        """Tensor graph `name` of the module at path (docs/RUNTIME.md "Tensor graphs")."""
        if path not in self.modules:
            m = ctypes.c_void_p()
            self._check(self.lib.trt_module_load_file(self.ctx, path.encode(), ctypes.byref(m)))
            self.modules[path] = m
        g = ctypes.c_void_p()
        self._check(self.lib.trt_module_get_graph(self.modules[path], name.encode(), ctypes.byref(g)))
        return Graph(self, g)


class Graph:
    """A tensor graph: bind its tensors (torch tensors, row-major and contiguous), scalars
    and sizes by name and its results by index, then run it on PyTorch's current stream;
    the plan's buffers are the runtime's, allocated on the first run."""

    def __init__(self, rt, handle):
        self.rt, self.handle, self.keep = rt, handle, {}

    def bind(self, name, v, kind=None):
        a = _Arg()
        if isinstance(v, torch.Tensor):
            if not v.is_contiguous():
                raise ValueError("graph tensor %s is not contiguous" % name)
            a.kind, a.v.ptr = _KINDS["ptr"], v.data_ptr()
            self.keep[name] = v
        elif kind == "i64" or isinstance(v, int):
            a.kind, a.v.i64 = _KINDS["i64"], int(v)
        else:
            a.kind, a.v.f32 = _KINDS[kind or "f32"], float(v)
        self.rt._check(self.rt.lib.trt_tgraph_bind(self.handle, name.encode(), a))

    def bind_size(self, name, n):
        self.rt._check(self.rt.lib.trt_tgraph_bind_size(self.handle, name.encode(), int(n)))

    def bind_output(self, i, t):
        self.keep["ret%d" % i] = t
        self.rt._check(self.rt.lib.trt_tgraph_bind_output(self.handle, i, t.data_ptr()))

    def num_kernels(self):
        return self.rt.lib.trt_tgraph_num_kernels(self.handle)

    def run(self):
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        self.rt._check(self.rt.lib.trt_tgraph_run(self.handle, stream))

    def __del__(self):
        if getattr(self, "handle", None):
            self.rt.lib.trt_tgraph_destroy(self.handle)
            self.handle = None


class Kernel:
    """A kernel; call it with a signature string and the values:
    k("ptr ptr i32", out, x, n). Tensors pass their data pointers."""

    def __init__(self, rt, handle):
        self.rt, self.handle = rt, handle

    def prepare(self, sig, *values, grid=None):
        kinds = sig.split()
        args = (_Arg * len(kinds))()
        for i, (kind, v) in enumerate(zip(kinds, values)):
            a = args[i]
            a.kind = _KINDS[kind]
            if kind == "ptr":
                a.v.ptr = v.data_ptr() if isinstance(v, torch.Tensor) else int(v)
            elif kind in ("i32", "bool"):
                a.v.i32 = int(v)
            elif kind == "i64":
                a.v.i64 = int(v)
            elif kind == "f32":
                a.v.f32 = float(v)
            elif kind == "f64":
                a.v.f64 = float(v)
            else:
                raise ValueError("kind %s" % kind)
        g = None if grid is None else (ctypes.c_uint32 * 3)(*(list(grid) + [1, 1, 1])[:3])
        n = len(kinds)
        # Each tensor's bytes from its address to the end of its storage: the tuner of
        # max-autotune copies those, not the rest of the caching allocator's segment.
        sizes = (ctypes.c_uint64 * max(1, n))(*[
            v.untyped_storage().nbytes() - v.storage_offset() * v.element_size()
            if isinstance(v, torch.Tensor) else (1 << 64) - 1 for v in values[:n]])
        lib, handle = self.rt.lib, self.handle
        check = self.rt._check

        def launch():
            stream = torch.cuda.current_stream().cuda_stream
            check(lib.trt_launch_sized(handle, args, sizes, n, g, ctypes.c_void_p(stream)))
        return launch

    def last_config(self):
        """The config of the last launch through this handle ("BM=128 BN=256 ..."): for
        an @autotune kernel, the one its context's mode chose (trt_kernel_last_config)."""
        buf = ctypes.create_string_buffer(256)
        self.rt.lib.trt_kernel_last_config(self.handle, buf, ctypes.c_size_t(len(buf)))
        return buf.value.decode()

    def __call__(self, sig, *values, grid=None):
        self.prepare(sig, *values, grid=grid)()
