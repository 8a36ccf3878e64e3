"""Finding and binding libtileRT (include/tile/tile_rt.h) with ctypes.

The library is found at $TILE_LIB if that is set (and nowhere else: an explicit choice
does not fall back); else in a build tree next to this package's source checkout, or
the build tree recorded when the package was installed from one (_paths.py); else by
the dynamic loader (an installed libtileRT.so.0)."""
import ctypes
import os
import sys
from pathlib import Path

# TrtArgKind, in the header's order.
KINDS = ("ptr", "bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64",
         "f16", "bf16", "f32", "f64")
KIND = {name: i for i, name in enumerate(KINDS)}
DEVICE_CPU = -1
MODES = {None: -1, "default": 0, "reduce-overhead": 1, "max-autotune": 2}
MODE_NAMES = {0: "default", 1: "reduce-overhead", 2: "max-autotune"}
FLAG_LOG_RECOMPILES = 1
FLAG_NO_DISK_CACHE = 2
CACHE_MODES = {"default": 0, "require": 1, "require-cubin": 2}   # TrtCacheMode
CACHE_MODE_NAMES = {v: k for k, v in CACHE_MODES.items()}
DEBUG_BOUNDS = 1           # TRT_DEBUG_BOUNDS: the checked mode


class TileError(RuntimeError):
    """A libtileRT call failed; .status is the status name ("TRT_ERROR_COMPILE")."""

    def __init__(self, status, message):
        super().__init__("%s: %s" % (status, message))
        self.status = status


class KernelInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("nparams", ctypes.c_uint32),
                ("nruntime", ctypes.c_uint32), ("has_grid", ctypes.c_int)]


class ParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("is_const", ctypes.c_int),
                ("has_default", ctypes.c_int), ("default_value", ctypes.c_int64),
                ("is_pointer", ctypes.c_int), ("kind", ctypes.c_int),
                ("elem", ctypes.c_char_p), ("elem_bytes", ctypes.c_uint32),
                ("runtime_index", ctypes.c_uint32)]


class GraphValueInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int), ("elem", ctypes.c_char_p),
                ("elem_bytes", ctypes.c_uint32), ("rank", ctypes.c_uint32),
                ("dims", ctypes.POINTER(ctypes.c_char_p)), ("type", ctypes.c_char_p)]


class GraphOptions(ctypes.Structure):
    """TrtGraphOptions: each NULL leaves the graph's own setting."""
    _fields_ = [("recompute", ctypes.c_char_p), ("memory_budget", ctypes.c_char_p), ("sizes", ctypes.c_char_p)]


class Arg(ctypes.Structure):
    """A TrtArg passed by value: the kind, and the union's 8 bytes as one u64."""
    _fields_ = [("kind", ctypes.c_int), ("bits", ctypes.c_uint64)]


class Const(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_int64)]


def _build_trees():
    """libtileRT.so in the build trees beside a source checkout of this package."""
    roots = [Path(__file__).resolve().parent.parent.parent]
    try:
        from . import _paths
        roots += [Path(p) for p in _paths.SOURCE_ROOTS]
    except ImportError:
        pass
    found = []
    for root in roots:
        preferred = [root / d / "runtime" / "libtileRT.so"
                     for d in ("build-release", "build-gpu", "build")]
        others = sorted(root.glob("build*/runtime/libtileRT.so"))
        found += [p for p in preferred + others if p.is_file() and p not in found]
    return found


def candidates():
    env = os.environ.get("TILE_LIB")
    if env:
        return [env]
    here = [str(p) for p in _build_trees()]
    prefix = [str(Path(sys.prefix) / d / "libtileRT.so.0") for d in ("lib", "lib64")]
    return here + [p for p in prefix if os.path.isfile(p)] + ["libtileRT.so.0", "libtileRT.so"]


def _triton_ptxas():
    """The ptxas that Triton's wheel carries, found without importing Triton: libtileRT
    assembles cached kernels with a toolkit's ptxas (whole-program code; the driver's
    linker drops setmaxnreg and can serialize wgmma, docs/RUNTIME.md), and a PyTorch
    install without the CUDA toolkit has this one."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if not spec or not spec.origin:
        return None
    p = Path(spec.origin).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return str(p) if os.access(p, os.X_OK) else None


def _toolkit_ptxas():
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    if any(h and os.access(os.path.join(h, "bin", "ptxas"), os.X_OK) for h in homes):
        return True
    return any(os.access(os.path.join(d, "ptxas"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep) if d)


def _open():
    if not os.environ.get("TILE_PTXAS") and not _toolkit_ptxas():
        p = _triton_ptxas()
        if p:
            os.environ["TILE_PTXAS"] = p
    tried = []
    for path in candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(str(e))
    raise ImportError("tile: cannot load libtileRT (tried: %s); set TILE_LIB to the path of "
                      "libtileRT.so" % "; ".join(tried))


def _declare(L):
    c, P = ctypes, ctypes.POINTER
    vp, u32 = c.c_void_p, c.c_uint32
    sigs = {
        "trt_status_name": (c.c_char_p, [c.c_int]),
        "trt_last_error": (c.c_char_p, []),
        "trt_version": (c.c_char_p, []),
        "trt_context_create": (c.c_int, [c.c_int, c.c_int, c.c_char_p, P(vp)]),
        "trt_context_destroy": (None, [vp]),
        "trt_context_set_flags": (c.c_int, [vp, c.c_uint]),
        "trt_context_set_debug": (c.c_int, [vp, c.c_uint]),
        "trt_context_debug": (c.c_uint, [vp]),
        "trt_context_mode": (c.c_int, [vp]),
        "trt_context_cache_dir": (c.c_char_p, [vp]),
        "trt_context_device": (c.c_int, [vp]),
        "trt_context_set_cache_mode": (c.c_int, [vp, c.c_int]),
        "trt_context_cache_mode": (c.c_int, [vp]),
        "trt_context_set_knob": (c.c_int, [vp, c.c_char_p, c.c_char_p]),
        "trt_compiler_id": (c.c_char_p, []),
        "trt_module_load_string": (c.c_int, [vp, c.c_char_p, c.c_char_p, P(vp)]),
        "trt_module_destroy": (None, [vp]),
        "trt_module_get_kernel": (c.c_int, [vp, c.c_char_p, P(Const), u32, P(vp)]),
        "trt_launch_key": (c.c_int, [u32, P(c.c_char_p), P(c.c_int64), P(c.c_int64), P(c.c_int64)]),
        "trt_module_num_kernels": (u32, [vp]),
        "trt_module_kernel_name": (c.c_char_p, [vp, u32]),
        "trt_module_kernel_info": (c.c_int, [vp, c.c_char_p, P(KernelInfo)]),
        "trt_module_kernel_param": (c.c_int, [vp, c.c_char_p, u32, P(ParamInfo)]),
        "trt_kernel_param": (c.c_int, [vp, u32, P(ParamInfo)]),
        "trt_kernel_writes": (c.c_int, [vp, P(c.c_uint64)]),
        "trt_kernel_num_variants": (u32, [vp]),
        # The TrtArg arrays, sizes and grids are packed by struct into bytes.
        "trt_launch": (c.c_int, [vp, c.c_char_p, u32, c.c_char_p, vp]),
        "trt_launch_sized": (c.c_int, [vp, c.c_char_p, c.c_char_p, u32, c.c_char_p, vp]),
        "trt_launch_host": (c.c_int, [vp, c.c_char_p, c.c_char_p, u32, c.c_char_p]),
        "trt_synchronize": (c.c_int, [vp]),
        "trt_kernel_last_config": (c.c_int, [vp, c.c_char_p, c.c_size_t]),
        "trt_graph_begin": (c.c_int, [vp, vp]),
        "trt_graph_end": (c.c_int, [vp, vp, P(vp)]),
        "trt_graph_launch": (c.c_int, [vp, vp]),
        "trt_graph_update": (c.c_int, [vp, u32, c.c_char_p, u32]),
        "trt_graph_num_launches": (u32, [vp]),
        "trt_graph_destroy": (None, [vp]),
        "trt_module_num_graphs": (u32, [vp]),
        "trt_module_graph_name": (c.c_char_p, [vp, u32]),
        "trt_module_get_graph": (c.c_int, [vp, c.c_char_p, P(vp)]),
        "trt_module_get_graph_with": (c.c_int, [vp, c.c_char_p, P(GraphOptions), P(vp)]),
        "trt_tgraph_destroy": (None, [vp]),
        "trt_tgraph_num_params": (u32, [vp]),
        "trt_tgraph_param": (c.c_int, [vp, u32, P(GraphValueInfo)]),
        "trt_tgraph_num_outputs": (u32, [vp]),
        "trt_tgraph_output": (c.c_int, [vp, u32, P(GraphValueInfo)]),
        "trt_tgraph_num_sizes": (u32, [vp]),
        "trt_tgraph_size_name": (c.c_char_p, [vp, u32]),
        "trt_tgraph_bind": (c.c_int, [vp, c.c_char_p, Arg]),
        "trt_tgraph_bind_size": (c.c_int, [vp, c.c_char_p, c.c_int64]),
        "trt_tgraph_bind_output": (c.c_int, [vp, u32, c.c_uint64]),
        "trt_tgraph_output_bytes": (c.c_int, [vp, u32, P(c.c_uint64)]),
        "trt_tgraph_run": (c.c_int, [vp, vp]),
        "trt_tgraph_num_saved": (u32, [vp]),
        "trt_tgraph_saved": (c.c_int, [vp, u32, P(GraphValueInfo)]),
        "trt_tgraph_bind_saved": (c.c_int, [vp, u32, c.c_uint64]),
        "trt_tgraph_bind_seed": (c.c_int, [vp, Arg]),
        "trt_tgraph_seed": (c.c_int, [vp, P(GraphValueInfo)]),
        "trt_tgraph_output_part": (u32, [vp, u32]),
        "trt_tgraph_run_forward": (c.c_int, [vp, vp]),
        "trt_tgraph_run_backward": (c.c_int, [vp, vp]),
        "trt_tgraph_num_kernels": (u32, [vp]),
        "trt_tgraph_num_buffers": (u32, [vp]),
        "trt_tgraph_buffer_bytes": (c.c_uint64, [vp, u32]),
    }
    for name, (res, args) in sigs.items():
        try:
            f = getattr(L, name)
        except AttributeError:
            raise ImportError("tile: %s lacks %s: it is older than this package; rebuild it"
                              % (L._name, name)) from None
        f.restype, f.argtypes = res, args


lib, path = _open()
_declare(lib)


def _launch_keys():
    """The launch keys of the library's compiler (trt_launch_key, ir/launch.def), in its
    order: name -> (min, max, default)."""
    keys = {}
    name, lo, hi, d = ctypes.c_char_p(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
    while lib.trt_launch_key(len(keys), ctypes.byref(name), ctypes.byref(lo), ctypes.byref(hi),
                             ctypes.byref(d)) == 0:
        keys[name.value.decode()] = (lo.value, hi.value, d.value)
    return keys


LAUNCH_KEYS = _launch_keys()


def check(status):
    if status:
        raise TileError(lib.trt_status_name(status).decode(),
                        lib.trt_last_error().decode(errors="replace"))
