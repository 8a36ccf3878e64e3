"""Modules and kernels: tile.load / tile.loads, k[grid](...) and k(...).

A module's source is parsed once into a CPU context, which needs no driver, to learn
its kernels and their declared parameters (libtileRT's introspection); it is loaded
again into each GPU context on the first launch there. A call binds its arguments to
the declared parameters (positionally or by name, const ones included, as Triton's
constexprs), and the const values and the device of the first array argument select
the plan: the kernel handle and one converter per run-time parameter, made once. A
launch is then: convert each value, pack the TrtArgs, call trt_launch on PyTorch's
current stream, or trt_launch_host (the interpreter) for host arrays."""
import ctypes
import difflib
import struct
import sys

from . import _args, _graph, _lib
from ._context import default_context, device_name
from ._lib import check, lib
from ._tensor_graph import TensorGraph

_MISSING = object()


class _Never:
    """No value has this type (torch.Tensor's stand-in before torch is loaded)."""
_LAUNCH_CONSTS = tuple(_lib.LAUNCH_KEYS)   # warps, stages, ...: consts of every kernel


class Param:
    """A declared parameter: name, is_const, default (None if none is known),
    is_pointer, kind ("ptr", "i32", "f16", ...), elem ("bf16": the pointee or the type),
    elem_bytes."""

    def __init__(self, info):
        self.name = info.name.decode()
        self.is_const = bool(info.is_const)
        self.default = info.default_value if info.has_default else None
        self.is_pointer = bool(info.is_pointer)
        self.kind = _lib.KINDS[info.kind]
        self.elem = info.elem.decode()
        self.elem_bytes = info.elem_bytes

    @property
    def type(self):
        t = ("*" if self.is_pointer else "") + _args.elem_text(self.elem)
        return ("const " if self.is_const else "") + t

    def __repr__(self):
        d = "" if self.default is None else " = %d" % self.default
        return "<param %s: %s%s>" % (self.name, self.type, d)


class _Plan:
    def __init__(self, kernel, ctx, handle, device):
        self.ctx, self.handle, self.device = ctx, handle, device
        self.cpu = device[0] == "cpu"
        params = kernel.runtime_params
        origin = kernel.first_pointer.name if kernel.first_pointer else None
        writes = ctypes.c_uint64()
        check(lib.trt_kernel_writes(handle, ctypes.byref(writes)))
        self.kinds, self.pointers, self.converters = [], [], []
        for i, declared in enumerate(params):
            info = _lib.ParamInfo()
            check(lib.trt_kernel_param(handle, i, ctypes.byref(info)))
            p = Param(info)
            self.kinds.append(_lib.KIND[p.kind])
            self.pointers.append(p.is_pointer)
            self.converters.append(
                _args.pointer_converter(kernel.name, p, device, origin, bool(writes.value >> i & 1))
                if p.is_pointer
                else _args.scalar_converter(kernel.name, p))
        self.n = len(params)
        self.params = params
        self.pack = struct.Struct("=" + "".join("i4x" + _args.VALUE_FORMATS[_lib.KINDS[k]]
                                                for k in self.kinds)).pack
        self.pack_sizes = struct.Struct("=%dQ" % self.n).pack


class Kernel:
    """A kernel of a module. Call it as k[grid](*args, **kwargs), or k(*args, **kwargs)
    when it has a grid(...) clause. grid: an int, a tuple of 1-3 ints, or a function of
    the dict of arguments by name (const ones included) that returns one."""

    def __init__(self, module, name, handle):
        self.module, self.name = module, name
        info = _lib.KernelInfo()
        check(lib.trt_module_kernel_info(handle, name.encode(), ctypes.byref(info)))
        self.has_grid = bool(info.has_grid)
        self.params = []
        for i in range(info.nparams):
            pi = _lib.ParamInfo()
            check(lib.trt_module_kernel_param(handle, name.encode(), i, ctypes.byref(pi)))
            self.params.append(Param(pi))
        self._index = {p.name: i for i, p in enumerate(self.params)}
        self._const_pos = [i for i, p in enumerate(self.params) if p.is_const]
        self._runtime_pos = [i for i, p in enumerate(self.params) if not p.is_const]
        self.runtime_params = [self.params[i] for i in self._runtime_pos]
        ptrs = [i for i, p in enumerate(self.runtime_params) if p.is_pointer]
        self._first_ptr = ptrs[0] if ptrs else None
        self.first_pointer = self.runtime_params[ptrs[0]] if ptrs else None
        self._plans = {}
        self._last_plan = None
        self._tensor_type = _args.array_types()[1] or _Never

    def __repr__(self):
        return "<tile kernel %s(%s) of %s>" % (
            self.name, ", ".join(p.name for p in self.params), self.module.name)

    def __getitem__(self, grid):
        return _Launcher(self, grid)

    def __call__(self, *args, **kwargs):
        return self._launch(None, args, kwargs)

    # ---- binding ------------------------------------------------------------------------
    def _bind(self, args, kwargs):
        n = len(self.params)
        if len(args) > n:
            raise TypeError("kernel '%s' takes %d arguments (%d run-time, %d const), got %d"
                            % (self.name, n, len(self._runtime_pos), len(self._const_pos),
                               len(args)))
        vals = list(args) + [_MISSING] * (n - len(args))
        extra = ()
        for key, v in kwargs.items():
            i = self._index.get(key)
            if i is None:
                if key not in _LAUNCH_CONSTS:
                    raise TypeError("kernel '%s' has no parameter '%s' (it has %s)" % (
                        self.name, key, ", ".join(p.name for p in self.params)))
                extra += ((key, self._const_value(key, v)),)
            elif vals[i] is not _MISSING:
                raise TypeError("kernel '%s': argument '%s' given twice" % (self.name, key))
            else:
                vals[i] = v
        consts = tuple((self.params[i].name, self._const_value(self.params[i].name, vals[i]))
                       for i in self._const_pos if vals[i] is not _MISSING) + extra
        runtime = [vals[i] for i in self._runtime_pos]
        for i, v in zip(self._runtime_pos, runtime):
            if v is _MISSING:
                raise TypeError("kernel '%s': missing argument '%s'" % (self.name, self.params[i].name))
        return vals, consts, runtime

    def _const_value(self, name, v):
        if isinstance(v, bool) or type(v) is int:
            return int(v)
        try:
            if not (_args._is_torch(v) or _args._is_numpy(v) or isinstance(v, float)):
                import operator
                return operator.index(v)
        except TypeError:
            pass
        raise TypeError("kernel '%s': const parameter '%s' takes an integer, got %s"
                        % (self.name, name, _args.describe(v)))

    # ---- plans ----------------------------------------------------------------------------
    def _device_of(self, runtime):
        if self._first_ptr is not None:
            v = runtime[self._first_ptr]
            if type(v) is self._tensor_type and v.is_cuda:
                return ("cuda", v.get_device())
            d = _args.value_device(v)
            if d is not None:
                return d
        ctx = self.module.context
        return ctx.key if ctx is not None else ("cpu", -1)

    def _plan(self, device, consts):
        plan = self._plans.get((device, consts))
        if plan is None:
            plan = self._plans[(device, consts)] = self._make_plan(device, consts)
        return plan

    def _make_plan(self, device, consts):
        ctx = self.module.context
        if ctx is None:
            ctx = default_context(device_name(device))
        elif ctx.key != device:
            raise ValueError("kernel '%s': the module was loaded into the %s context, but the "
                             "arguments are on %s" % (self.name, ctx.device, device_name(device)))
        mod = self.module._handle(ctx)
        cs = (_lib.Const * max(1, len(consts)))(*[_lib.Const(k.encode(), v) for k, v in consts])
        handle = ctypes.c_void_p()
        check(lib.trt_module_get_kernel(mod, self.name.encode(), cs, len(consts),
                                        ctypes.byref(handle)))
        return _Plan(self, ctx, handle, device)

    # ---- launching ----------------------------------------------------------------------
    def _grid(self, grid, vals):
        if grid is None:
            if not self.has_grid:
                raise TypeError("kernel '%s' has no grid(...) clause: launch it as "
                                "kernel[grid](...)" % self.name)
            return None
        if callable(grid):
            meta = {p.name: (v if v is not _MISSING else p.default)
                    for p, v in zip(self.params, vals)}
            grid = grid(meta)
        return _pack_grid(self.name, grid)

    def _pack(self, plan, runtime):
        conv = plan.converters
        values, sizes = [], []
        for i, v in enumerate(runtime):
            x = conv[i](v)
            if plan.pointers[i]:
                x, size = x
                sizes.append(size)
            else:
                sizes.append(0)
            values.append(plan.kinds[i])
            values.append(x)
        try:
            return plan.pack(*values), sizes
        except struct.error:
            for i, v in enumerate(runtime):   # find which value does not fit its type
                try:
                    struct.pack("=i4x" + _args.VALUE_FORMATS[_lib.KINDS[plan.kinds[i]]],
                                plan.kinds[i], values[2 * i + 1])
                except struct.error:
                    raise OverflowError("kernel '%s': argument '%s' = %r does not fit in %s" % (
                        self.name, plan.params[i].name, v,
                        _args.elem_text(plan.params[i].elem))) from None
            raise

    def _launch(self, grid, args, kwargs):
        vals, consts, runtime = self._bind(args, kwargs)
        plan = self._plan(self._device_of(runtime), consts)
        packed, sizes = self._pack(plan, runtime)
        g = self._grid(grid, vals)
        self._last_plan = plan
        if plan.cpu:
            check(lib.trt_launch_host(plan.handle, packed, plan.pack_sizes(*sizes), plan.n, g))
        else:
            _launch_cuda(plan, packed, plan.pack_sizes(*sizes), g)
            if _graph.capturing:
                _record(self, plan, runtime)

    def last_config(self):
        """The config the last launch of this kernel ran, as a dict ({"BM": 128, "BN":
        256, "BK": 64, "warps": 8, "stages": 3}): for a kernel with @autotune, what its
        context's mode chose for that launch's key (docs/TUNING.md); otherwise the consts
        it was given. None before a launch."""
        plan = self._last_plan
        if plan is None:
            return None
        buf = ctypes.create_string_buffer(512)
        if lib.trt_kernel_last_config(plan.handle, buf, len(buf)) < 0:
            return None
        return {k: int(v) for k, v in (kv.split("=") for kv in buf.value.decode().split())}

    def prepare(self, *args, **kwargs):
        """A launch with these arguments bound, checked and packed once: calling it
        launches again (on the current stream then) at the cost of trt_launch alone. It
        keeps the arguments alive. For benchmarks and replays of one shape."""
        return self._prepare(None, args, kwargs)

    def _prepare(self, grid, args, kwargs):
        vals, consts, runtime = self._bind(args, kwargs)
        plan = self._plan(self._device_of(runtime), consts)
        packed, sizes = self._pack(plan, runtime)
        return PreparedLaunch(self, plan, packed, plan.pack_sizes(*sizes), self._grid(grid, vals),
                              runtime)


_GRID_MAX = 2**32 - 1   # the launch's grid is three u32s (the GPU's limits are libtileRT's)


def _pack_grid(kernel, grid):
    """An int or a tuple (or list) of 1 to 3 ints, each 0 to 2**32 - 1, as trt_launch's
    three u32s."""
    g = (grid,) if isinstance(grid, int) else tuple(grid) if isinstance(grid, (tuple, list)) else None
    if g is None or any(not isinstance(x, int) for x in g):
        raise TypeError("kernel '%s': the grid is %r (%s); a grid is an int, a tuple of 1 to 3 ints, or a "
                        "function of the arguments that returns one" % (kernel, grid, type(grid).__name__))
    if not 1 <= len(g) <= 3 or any(x < 0 for x in g):
        raise ValueError("kernel '%s': the grid is %r; expected 1 to 3 non-negative ints" % (kernel, grid))
    if any(x > _GRID_MAX for x in g):
        raise OverflowError("kernel '%s': the grid is %r; each size must be at most 2**32 - 1 = %d"
                            % (kernel, grid, _GRID_MAX))
    return struct.pack("=3I", *(g + (1, 1))[:3])


class PreparedLaunch:
    """Kernel.prepare's result: call it to launch."""
    __slots__ = ("kernel", "plan", "packed", "sizes", "grid", "keep")

    def __init__(self, kernel, plan, packed, sizes, grid, keep):
        self.kernel, self.plan, self.packed, self.sizes, self.grid, self.keep = \
            kernel, plan, packed, sizes, grid, keep

    def __call__(self):
        p = self.plan
        self.kernel._last_plan = p
        if p.cpu:
            check(lib.trt_launch_host(p.handle, self.packed, self.sizes, p.n, self.grid))
        else:
            _launch_cuda(p, self.packed, self.sizes, self.grid)
            if _graph.capturing:
                _record(self.kernel, p, self.keep)


def _record(kernel, plan, runtime):
    """A launch that libtileRT recorded on a thread capturing a CudaGraph: the graph
    learns which kernel and arguments it was (for update())."""
    g = _graph.current()
    if g is not None:
        g._record(kernel, plan, runtime)


def _launch_cuda(plan, packed, sizes, g):
    """With every tensor's size: the checked mode (TILE_DEBUG=bounds) checks them."""
    torch = sys.modules["torch"]
    index = plan.device[1]
    stream = ctypes.c_void_p(torch.cuda.current_stream(index).cuda_stream)
    if torch.cuda.current_device() == index:
        check(lib.trt_launch_sized(plan.handle, packed, sizes, plan.n, g, stream))
    else:
        with torch.cuda.device(index):
            check(lib.trt_launch_sized(plan.handle, packed, sizes, plan.n, g, stream))


class _Launcher:
    __slots__ = ("kernel", "grid")

    def __init__(self, kernel, grid):
        self.kernel, self.grid = kernel, grid

    def __call__(self, *args, **kwargs):
        return self.kernel._launch(self.grid, args, kwargs)

    def prepare(self, *args, **kwargs):
        return self.kernel._prepare(self.grid, args, kwargs)


class Module:
    """The kernels of one .tile source, as attributes (module.softmax) and in .kernels,
    and its tensor graphs, in .graphs and as attributes where no kernel has the name."""

    def __init__(self, text, name, context=None):
        self.name, self.context = name, context
        self._text = text.encode()
        self._handles = {}
        handle = self._handle(self._meta_context())
        names = [lib.trt_module_kernel_name(handle, i).decode()
                 for i in range(lib.trt_module_num_kernels(handle))]
        self.kernels = {n: Kernel(self, n, handle) for n in names}
        graphs = [lib.trt_module_graph_name(handle, i).decode()
                  for i in range(lib.trt_module_num_graphs(handle))]
        self.graphs = {n: TensorGraph(self, n) for n in graphs}

    def _meta_context(self):
        """The CPU context that learns what the source declares."""
        ctx = self.context
        return ctx if ctx is not None and ctx.is_cpu else default_context("cpu")

    def _handle(self, ctx):
        """The module loaded into ctx (the dict's key keeps ctx alive longer than it)."""
        h = self._handles.get(ctx)
        if h is None:
            h = ctypes.c_void_p()
            check(lib.trt_module_load_string(ctx.handle, self.name.encode(), self._text,
                                             ctypes.byref(h)))
            self._handles[ctx] = h
        return h

    def __getattr__(self, name):
        kernels, graphs = self.__dict__.get("kernels") or {}, self.__dict__.get("graphs") or {}
        if name in kernels:
            return kernels[name]
        if name in graphs:
            return graphs[name]
        if name.startswith("__"):
            raise AttributeError(name)
        names = list(kernels) + list(graphs)
        near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
        raise AttributeError("%s has no kernel or graph '%s' (kernels: %s; graphs: %s)%s" % (
            self.__dict__.get("name", "the module"), name, ", ".join(kernels) or "none",
            ", ".join(graphs) or "none", "; did you mean '%s'?" % near[0] if near else ""))

    def __dir__(self):
        return list(super().__dir__()) + list(self.kernels) + [g for g in self.graphs if g not in self.kernels]

    def __repr__(self):
        return "<tile module %s: %s>" % (self.name, ", ".join(list(self.kernels) + [
            "graph " + g for g in self.graphs]))

    def __del__(self):
        """Unloads the module from each context. libtileRT makes a GPU context current to
        unload its code, so PyTorch's current device is put back afterwards."""
        if sys.is_finalizing():
            return
        handles = getattr(self, "_handles", {})
        torch = sys.modules.get("torch")
        on_gpu = torch is not None and hasattr(torch.cuda, "set_device") and \
            any(not c.is_cpu for c in handles)
        device = torch.cuda.current_device() if on_gpu else None
        for g in getattr(self, "graphs", {}).values():   # a graph goes before its module
            g._free()
        for h in handles.values():
            lib.trt_module_destroy(h)
        if on_gpu:
            torch.cuda.set_device(device)


def _source_text(source, name):
    """source as str: bytes are read as UTF-8; a NUL, which would end the text libtileRT
    reads (a C string), is refused with its position."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        source = bytes(source).decode("utf-8")
    elif not isinstance(source, str):
        raise TypeError("tile.loads: the source must be str or bytes (UTF-8), got %s" % type(source).__name__)
    at = source.find("\0")
    if at >= 0:
        line = source.count("\n", 0, at) + 1
        col = at - (source.rfind("\n", 0, at) + 1) + 1
        raise ValueError("%s:%d:%d: the source has a NUL character (offset %d); .tile sources are text"
                         % (name, line, col, at))
    return source


def loads(source, name="<string>", context=None):
    """A module from .tile source text (str, or bytes as UTF-8); `name` appears in
    diagnostics."""
    return Module(_source_text(source, name), name, context)


def load(path, context=None):
    """A module from a .tile file (diagnostics name the path)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return Module(_source_text(text, str(path)), str(path), context)
