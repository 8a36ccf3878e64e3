"""Contexts: one libtileRT context per device, made on first use or by the caller.

A context is a device (the CPU, whose kernels run in the reference interpreter, or a
CUDA device, whose primary context is shared with PyTorch), a compile mode and a disk
cache. Kernels launch in the context of their tensors' device: the default one for
that device (tile.default_context) unless the module was loaded into a given one."""
import ctypes
import sys

from . import _lib
from ._lib import check, lib


def parse_device(device):
    """("cpu", -1) or ("cuda", index) from "cpu", "cuda", "cuda:1", 1 or a torch.device."""
    if isinstance(device, int) and not isinstance(device, bool):
        return ("cuda", device)
    s = str(device)
    if s == "cpu":
        return ("cpu", _lib.DEVICE_CPU)
    if s == "cuda":
        torch = sys.modules.get("torch")
        return ("cuda", torch.cuda.current_device() if torch is not None else 0)
    if s.startswith("cuda:") and s[5:].isdigit():
        return ("cuda", int(s[5:]))
    raise ValueError("tile: unknown device %r (expected 'cpu', 'cuda' or 'cuda:N')" % (device,))


def device_name(key):
    return "cpu" if key[0] == "cpu" else "cuda:%d" % key[1]


class Context:
    """Context(device="cpu", mode=None, cache_dir=None, log_recompiles=False, check_bounds=None,
               cache_mode=None, knobs=None)

    mode: "default", "reduce-overhead" or "max-autotune", or None for $TILE_MODE. In
    "max-autotune" a kernel with @autotune is tuned on the first launch of each key and
    the winner stored in the disk cache; "default" uses a stored winner, else the
    kernel's default config, and never benchmarks (docs/TUNING.md); "reduce-overhead"
    runs as "default" (the C API's CUDA graphs, trt_graph_*, are not wrapped here yet).
    cache_dir: the disk cache's directory; None for the default location, "" for none.
    A CPU context compiles nothing past Tile IR and has no disk cache.
    check_bounds: True runs every kernel's checked variant (TILE_DEBUG=bounds, which
    None follows; False turns it off): an access outside a tensor raises TileError
    (TRT_ERROR_KERNEL_FAILED) in the interpreter's words instead of faulting the GPU.
    The sizes are every tensor's and array's, passed by the package.
    cache_mode: "default" compiles what the cache lacks; "require" never compiles (a
    deployment that shipped a warmed cache: a kernel missing from it raises TileError
    TRT_ERROR_CACHE_MISS naming the kernel, its variant and its keys); "require-cubin"
    does not even link cached PTX; None follows $TILE_CACHE_MODE (docs/CACHE.md).
    knobs: {name: value} of the code generator's settings ("sink", "tma", ...; their
    environment variables set them too), part of every cache key (docs/CACHE.md)."""

    def __init__(self, device="cpu", mode=None, cache_dir=None, log_recompiles=False, check_bounds=None,
                 cache_mode=None, knobs=None):
        if mode not in _lib.MODES:
            raise ValueError("tile: unknown mode %r (expected %s)" % (
                mode, ", ".join(repr(m) for m in _lib.MODES)))
        if cache_mode is not None and cache_mode not in _lib.CACHE_MODES:
            raise ValueError("tile: unknown cache_mode %r (expected %s)" % (
                cache_mode, ", ".join(repr(m) for m in _lib.CACHE_MODES)))
        if knobs is not None and not isinstance(knobs, dict):
            raise TypeError("tile: knobs takes a dict of name: value, not %s" % type(knobs).__name__)
        self.key = parse_device(device)
        if self.key[0] == "cuda" and "torch" in sys.modules:
            sys.modules["torch"].cuda.init()   # torch's context is the primary one we retain
        handle = ctypes.c_void_p()
        cd = None if cache_dir is None else cache_dir.encode()
        check(lib.trt_context_create(self.key[1], _lib.MODES[mode], cd, ctypes.byref(handle)))
        self.handle = handle
        if log_recompiles:
            check(lib.trt_context_set_flags(handle, _lib.FLAG_LOG_RECOMPILES))
        if check_bounds is not None:
            check(lib.trt_context_set_debug(handle, _lib.DEBUG_BOUNDS if check_bounds else 0))
        if cache_mode is not None:
            check(lib.trt_context_set_cache_mode(handle, _lib.CACHE_MODES[cache_mode]))
        for name, value in (knobs or {}).items():
            if isinstance(value, bool):
                value = int(value)
            check(lib.trt_context_set_knob(handle, str(name).encode(), str(value).encode()))

    @property
    def cache_mode(self):
        """"default", "require" or "require-cubin" (docs/CACHE.md)."""
        return _lib.CACHE_MODE_NAMES[lib.trt_context_cache_mode(self.handle)]

    @property
    def check_bounds(self):
        """Whether launches run the checked variants (TILE_DEBUG=bounds)."""
        return bool(lib.trt_context_debug(self.handle) & _lib.DEBUG_BOUNDS)

    @property
    def device(self):
        return device_name(self.key)

    @property
    def is_cpu(self):
        return self.key[0] == "cpu"

    @property
    def mode(self):
        return _lib.MODE_NAMES[lib.trt_context_mode(self.handle)]

    @property
    def cache_dir(self):
        d = lib.trt_context_cache_dir(self.handle)
        return d.decode() if d else None

    def load(self, path):
        """Loads a .tile file into this context (its kernels launch here only)."""
        from ._module import load
        return load(path, context=self)

    def loads(self, source, name="<string>"):
        from ._module import loads
        return loads(source, name=name, context=self)

    def synchronize(self):
        check(lib.trt_synchronize(self.handle))

    def __repr__(self):
        return "tile.Context(device=%r, mode=%r, cache_dir=%r)" % (self.device, self.mode,
                                                                  self.cache_dir)

    # Destroyed with the process: modules hold their context, and libtileRT requires a
    # context's modules to go first, which the collector does not promise at exit.


_defaults = {}


def default_context(device="cpu"):
    """The context kernels use on `device` when their module was given none."""
    key = parse_device(device)
    ctx = _defaults.get(key)
    if ctx is None:
        ctx = _defaults[key] = Context(device_name(key))
    return ctx


def set_default_context(ctx):
    """Makes ctx the context of its device for modules loaded without one."""
    _defaults[ctx.key] = ctx
