"""Tensor graphs: module.graphs["block"] (or module.block) called on arrays.

A graph (LANGUAGE.md section 7) is compiled by libtileRT's graph API (trt_tgraph_*,
docs/RUNTIME.md "Tensor graphs") into the kernels of its fusion plan, once per context:
the CPU context for numpy arrays and CPU tensors (the kernels run in the interpreter),
a GPU context for CUDA tensors (the plan runs on PyTorch's current stream). A call binds
the arguments to the declared parameters, learns each size name from the dimensions
that name it, checks every other dimension, makes the results as new arrays of the
same kind and binds them, and runs the plan. The checks and their errors are the
kernels' (_args.py): ArgError for a wrong type, dtype or device, ValueError for a wrong
shape, TypeError for a wrong count or name."""
import ctypes
import difflib
import operator
import re
import struct
import sys
import threading

from . import _args, _graph, _lib
from ._context import default_context, device_name
from ._lib import TileError, check, lib


class GraphParam:
    """A parameter or result of a graph as declared: name, elem ("f32"), type
    ("f32[T, 256]"), dims (("T", "256")), is_tensor; kind and elem_bytes as Param's."""

    def __init__(self, info):
        self.name = info.name.decode()
        self.kind = _lib.KINDS[info.kind]
        self.elem = info.elem.decode()
        self.elem_bytes = info.elem_bytes
        self.dims = tuple(info.dims[d].decode() for d in range(info.rank))
        self.type = info.type.decode()
        self.is_tensor = info.rank > 0

    def __repr__(self):
        return "<graph %s %s: %s>" % ("result" if self.name.startswith("ret") else "param", self.name, self.type)


def _suggest(name, names):
    near = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return "; did you mean '%s'?" % near[0] if near else ""


def _dim_value(dim, sizes):
    """A dimension's value for the sizes learnt: "1024", "T" or "2*S+T" (the compiler's
    normalized text of a polynomial over size names); None while a name is unknown."""
    if dim.isdigit():
        return int(dim)
    try:
        return eval(compile(dim, "<dim>", "eval"), {"__builtins__": {}}, dict(sizes))
    except NameError:
        return None


def _numpy_dtype(elem):
    """The numpy dtype of a result: elem's, or for bf16 and the f8 types, which numpy
    lacks, unsigned integers of their size holding the bits (as tile.bits takes them)."""
    np = sys.modules["numpy"]
    name = _args.DTYPE_NAMES[elem]
    if elem in ("bf16", "f8e4m3", "f8e5m2"):
        name = "uint16" if elem == "bf16" else "uint8"
    return np.dtype(name)


class _Handle:
    """A graph compiled in one context, with the lock that makes one call at a time
    bind and run it (the C API's rule)."""

    def __init__(self, module, name, ctx, options=None):
        self.ctx = ctx
        self.ptr = ctypes.c_void_p()
        opts = ctypes.byref(options) if options is not None else None
        check(lib.trt_module_get_graph_with(module._handle(ctx), name.encode(), opts, ctypes.byref(self.ptr)))
        self.lock = threading.Lock()

    def free(self):
        if self.ptr:
            lib.trt_tgraph_destroy(self.ptr)
            self.ptr = ctypes.c_void_p()


class TensorGraph:
    """A graph of a module. g(*args, **kwargs) runs it and returns its result (a tuple
    for several) as new numpy arrays or torch tensors on the arguments' device.
    Arguments bind to the parameters positionally or by name; a size name (T) is learnt
    from the dimensions of the tensors that name it, or given by name (T=16) where no
    parameter's dimension is that name alone."""

    RECOMPUTE = ("save-all", "selective", "checkpoint")

    def __init__(self, module, name, options=None):
        self.module, self.name = module, name
        self._handles = {}
        self._meta = None
        self._split = None
        self._options = options or {}   # recompute, memory_budget, sizes: the C API's texts
        self._variants = {}

    # ---- compile options (TrtGraphOptions) ---------------------------------------------------
    @property
    def options(self):
        """The compile options this graph was made with (those not given are the graph's
        own @recompute / @memory_budget settings): a dict of recompute, memory_budget and
        sizes, as given to with_options."""
        return dict(self._options)

    def with_options(self, recompute=None, memory_budget=None, sizes=None):
        """This graph compiled with other options (docs/GRAPHS.md "Recomputation"): the
        recomputation policy ("save-all", "selective", "checkpoint"), a memory budget for
        what the forward saves (bytes as an int or "2GiB", or a fraction of save-all's as
        a float or "0.5"), and the sizes the budget is compared at ({"T": 4096}; a size
        not given counts as 4096). The options change the graph's kernels; the call
        binds sizes from its arguments as always. Graphs of equal options are one object;
        the options are checked here (ValueError)."""
        opts = dict(self._options)
        if recompute is not None:
            if recompute not in self.RECOMPUTE:
                self._fail(ValueError, "recompute takes %s, got %r", ", ".join(self.RECOMPUTE), recompute)
            opts["recompute"] = recompute
        if memory_budget is not None:
            if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, float, str)):
                self._fail(TypeError, "memory_budget takes bytes (an int or a string such as '2GiB') or a "
                           "fraction of save-all's (a float), got %s", _args.describe(memory_budget))
            opts["memory_budget"] = repr(memory_budget) if isinstance(memory_budget, float) else str(memory_budget)
        if sizes is not None:
            for k, v in sizes.items():
                if not str(k).isidentifier() or isinstance(v, bool) or not hasattr(v, "__index__") or v < 1:
                    self._fail(ValueError, "sizes takes size names and positive integers, got %r: %r", k, v)
            opts["sizes"] = ",".join("%s=%d" % (k, v) for k, v in sizes.items())
        if opts == self._options:
            return self
        key = tuple(sorted(opts.items()))
        g = self._variants.get(key)
        if g is None:
            g = TensorGraph(self.module, self.name, opts)
            g._describe()   # compiled once here, so a bad budget fails now
            self._variants[key] = g
        return g

    def _c_options(self):
        if not self._options:
            return None
        o = self._options
        enc = (lambda k: o[k].encode() if k in o else None)
        return _lib.GraphOptions(enc("recompute"), enc("memory_budget"), enc("sizes"))

    def plan_stats(self, device="cpu"):
        """The compiled plan on a device ("cpu" or "cuda:N"; compiled there if not yet):
        {"kernels": its kernel count, "buffers": the bytes of each buffer of its memory
        plan as allocated by the last call (0 before the first)}."""
        ctx = default_context(device) if self.module.context is None else self.module.context
        h = self._handle(ctx).ptr
        return {"kernels": lib.trt_tgraph_num_kernels(h),
                "buffers": [lib.trt_tgraph_buffer_bytes(h, i) for i in range(lib.trt_tgraph_num_buffers(h))]}

    def autograd(self, grads, loss=0):
        """A torch.autograd.Function over this graph (tile.GraphFunction): see there."""
        from ._autograd import GraphFunction
        return GraphFunction(self, grads, loss)

    # ---- what the graph declares (compiled once in the CPU context) -------------------------
    def _describe(self):
        if self._meta is None:
            h = self._handle(self.module._meta_context()).ptr
            info = _lib.GraphValueInfo()
            params, outputs = [], []
            for i in range(lib.trt_tgraph_num_params(h)):
                check(lib.trt_tgraph_param(h, i, ctypes.byref(info)))
                params.append(GraphParam(info))
            for i in range(lib.trt_tgraph_num_outputs(h)):
                check(lib.trt_tgraph_output(h, i, ctypes.byref(info)))
                outputs.append(GraphParam(info))
            sizes = [lib.trt_tgraph_size_name(h, i).decode() for i in range(lib.trt_tgraph_num_sizes(h))]
            self._meta = (params, outputs, sizes)
        return self._meta

    def _split_meta(self):
        """The forward/backward split (docs/GRAPHS.md "The forward/backward split"): the
        saved values (GraphParams named as the compiler prints them) and which part
        computes each result (1 the forward, 2 the backward; 0 each without a grad), and
        the seed (a GraphParam: the loss's type), or None."""
        if self._split is None:
            h = self._handle(self.module._meta_context()).ptr
            info = _lib.GraphValueInfo()
            saved = []
            for i in range(lib.trt_tgraph_num_saved(h)):
                check(lib.trt_tgraph_saved(h, i, ctypes.byref(info)))
                saved.append(GraphParam(info))
            seed = GraphParam(info) if lib.trt_tgraph_seed(h, ctypes.byref(info)) == 0 else None
            self._split = (saved, [lib.trt_tgraph_output_part(h, i) for i in range(lib.trt_tgraph_num_outputs(h))],
                           seed)
        return self._split

    @property
    def params(self):
        return self._describe()[0]

    @property
    def outputs(self):
        return self._describe()[1]

    @property
    def sizes(self):
        """The size names of the parameters' types, first appearance first."""
        return self._describe()[2]

    def __repr__(self):
        params, outputs, _ = self._describe()
        res = ", ".join(o.type for o in outputs)
        return "<tile graph %s(%s) -> %s of %s>" % (
            self.name, ", ".join("%s: %s" % (p.name, p.type) for p in params),
            res if len(outputs) == 1 else "(%s)" % res, self.module.name)

    def _handle(self, ctx):
        h = self._handles.get(ctx)
        if h is None:
            h = self._handles[ctx] = _Handle(self.module, self.name, ctx, self._c_options())
        return h

    def _free(self):
        for g in self._variants.values():
            g._free()
        for h in self._handles.values():
            h.free()
        self._handles = {}

    # ---- binding ------------------------------------------------------------------------------
    def _fail(self, cls, msg, *a):
        raise cls(("graph '%s': " % self.name) + msg % a)

    def _bind(self, args, kwargs):
        params, _, sizes = self._describe()
        n = len(params)
        if len(args) > n:
            raise TypeError("graph '%s' takes %d arguments (%s), got %d" % (
                self.name, n, ", ".join(p.name for p in params), len(args)))
        vals = dict(zip((p.name for p in params), args))
        given = {}
        for key, v in kwargs.items():
            if key in sizes and key not in vals and all(p.name != key for p in params):
                given[key] = v
            elif all(p.name != key for p in params):
                names = [p.name for p in params] + sizes
                raise TypeError("graph '%s' has no parameter or size '%s' (it has %s)%s" % (
                    self.name, key, ", ".join(names), _suggest(key, names)))
            elif key in vals:
                self._fail(TypeError, "argument '%s' given twice", key)
            else:
                vals[key] = v
        for p in params:
            if p.name not in vals:
                self._fail(TypeError, "missing argument '%s' (of type %s)", p.name, p.type)
        return [vals[p.name] for p in params], given

    def _device(self, params, vals):
        """The first tensor argument's device and its name (the CPU for none)."""
        for p, v in zip(params, vals):
            if p.is_tensor:
                d = _args.value_device(v)
                if d is not None:
                    return d, p.name
        ctx = self.module.context
        return (ctx.key if ctx is not None else ("cpu", -1)), None

    def _array(self, p, v, device, origin):
        """v checked against tensor parameter p: (the array, its shape, numpy?)."""
        a, elem = (v.array, v.elem) if isinstance(v, _args.Bits) else (v, None)
        numpy = _args._is_numpy(a)
        if not numpy and not _args._is_torch(a):
            self._fail(_args.ArgError, "argument '%s' is %s, but the parameter is %s: pass a numpy array or a "
                       "tensor", p.name, _args.describe(v), p.type)
        if elem is not None:
            size = a.dtype.itemsize if numpy else a.element_size()
            if elem != p.elem or size != p.elem_bytes:
                self._fail(_args.ArgError, "argument '%s' is %s, but the parameter is %s", p.name,
                           _args.describe(v), p.type)
        elif _args._dtype_name(a) != _args.DTYPE_NAMES[p.elem]:
            hint = " (numpy has no %s: pass tile.bits(array, %r))" % (p.elem, p.elem) \
                if numpy and p.elem in ("bf16", "f8e4m3", "f8e5m2") else ""
            self._fail(_args.ArgError, "argument '%s' is %s, but the parameter is %s (a %s array or tensor)%s",
                       p.name, _args.describe(v), p.type, _args.DTYPE_NAMES[p.elem], hint)
        if _args.value_device(a) != device:
            self._fail(_args.ArgError, "argument '%s' is %s, but the graph runs on %s (where argument '%s' is)",
                       p.name, _args.describe(v), device_name(device), origin)
        return a, tuple(a.shape), numpy

    def _learn_sizes(self, params, shapes, given):
        """Each size name's value: given by name, or from the first dimension that is
        the name alone; then every dimension checked against its declared size."""
        sizes = {}
        for k, v in given.items():
            if isinstance(v, bool) or not hasattr(v, "__index__"):
                self._fail(TypeError, "size '%s' takes an integer, got %s", k, _args.describe(v))
            sizes[k] = (operator.index(v), "given as %s=%d" % (k, v))
        for p, shape in zip(params, shapes):
            if shape is None:
                continue
            if len(shape) != len(p.dims):
                self._fail(ValueError, "argument '%s' has %d dimensions (shape %s), but the parameter is %s",
                           p.name, len(shape), shape, p.type)
            for d, (dim, n) in enumerate(zip(p.dims, shape)):
                if dim.isidentifier() and dim not in sizes:
                    sizes[dim] = (n, "from argument '%s' dimension %d" % (p.name, d))
        for k, (v, where) in sizes.items():
            if not 1 <= v <= 2 ** 40:
                self._fail(ValueError, "size %s is %d (%s); a size is 1 to 2**40", k, v, where)
        values = {k: v for k, (v, _) in sizes.items()}
        for p, shape in zip(params, shapes):
            for d, (dim, n) in enumerate(zip(p.dims, shape or ())):
                names = re.findall(r"[A-Za-z_]\w*", dim)
                missing = [k for k in names if k not in values]
                if missing:
                    self._fail(TypeError, "size %s cannot be learnt from the arguments' shapes (no dimension is "
                               "%s alone): pass it by name, %s=N", missing[0], missing[0], missing[0])
                want = _dim_value(dim, values)
                if n != want:
                    why = "" if not names else " = %d (%s)" % (want, "; ".join(
                        ("%s %s" if k == dim else "%s = %d %s") % ((k, sizes[k][1]) if k == dim else
                                                                  (k, values[k], sizes[k][1]))
                        for k in dict.fromkeys(names)))
                    self._fail(ValueError, "argument '%s' has shape %s, but the parameter is %s: dimension %d is "
                               "%d, not %s%s", p.name, shape, p.type, d, n, dim, why)
        return values

    def _scalar(self, p, v):
        bits = _args.scalar_converter(self.name, p, owner="graph")(v)
        try:
            raw = struct.pack("=" + _args.VALUE_FORMATS[p.kind], bits)
        except struct.error:
            self._fail(OverflowError, "argument '%s' = %r does not fit in %s", p.name, v, _args.elem_text(p.elem))
        return _lib.Arg(_lib.KIND[p.kind], struct.unpack("=Q", raw.ljust(8, b"\0"))[0])

    # ---- running ------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        device, sizes, numpy, bound = self._prepare(args, kwargs)
        results = [self._result(o, sizes, numpy, device) for o in self._describe()[1]]
        self._run(self._context(device), bound, sizes, results, device)
        return results[0] if len(results) == 1 else tuple(results)

    def forward(self, *args, **kwargs):
        """Runs only the forward part of a graph with a grad (its plan's forward kernels):
        arguments as for a call. Returns a GraphForward: the forward's results
        (`results`, None where the backward computes a result) and the saved values
        (`saved`, new arrays of the arguments' kind), which backward(step) reads. Any
        number of forwards may be kept before their backwards."""
        if not all(self._split_meta()[1]):
            self._fail(ValueError, "has no grad, so no forward and backward parts (call the graph itself)")
        device, sizes, numpy, bound = self._prepare(args, kwargs)
        saved_meta, parts, _ = self._split_meta()
        results = [self._result(o, sizes, numpy, device) if part == 1 else None
                   for o, part in zip(self._describe()[1], parts)]
        saved = [self._result(v, sizes, numpy, device) for v in saved_meta]
        ctx = self._context(device)
        self._run(ctx, bound, sizes, results, device, part=1, saved=saved)
        return GraphForward(self, ctx, device, sizes, numpy, bound, results, saved)

    def backward(self, step, seed=1.0):
        """Runs the backward part for `step` (a GraphForward of this graph), through its
        saved values, with `seed` the incoming gradient of the loss (the backward computes
        seed * d(loss)/dw). Returns every result, as a call does: the forward's from
        `step`, the backward's new."""
        if not isinstance(step, GraphForward) or step.graph is not self:
            self._fail(TypeError, "backward takes what this graph's forward returned, not %s", _args.describe(step))
        outputs = self._describe()[1]
        results = [r if r is not None else self._result(o, step.sizes, step.numpy, step.device)
                   for o, r in zip(outputs, step.results)]
        seed_param = self._split_meta()[2]
        seed_arg = self._scalar(seed_param, seed) if seed_param is not None else None
        self._run(step.ctx, step.bound, step.sizes, results, step.device, part=2, saved=step.saved, seed=seed_arg)
        return results[0] if len(results) == 1 else tuple(results)

    def _prepare(self, args, kwargs):
        """The arguments checked and bound: (device, sizes, numpy?, bound) for _run."""
        params, outputs, _ = self._describe()
        vals, given = self._bind(args, kwargs)
        device, origin = self._device(params, vals)
        arrays = [self._array(p, v, device, origin) if p.is_tensor else None for p, v in zip(params, vals)]
        sizes = self._learn_sizes(params, [a[1] if a else None for a in arrays], given)
        numpy = next((a[2] for a in arrays if a), device[0] == "cpu")
        bound = []
        for p, v, a in zip(params, vals, arrays):
            if a is None:
                bound.append((p.name, self._scalar(p, v)))
                continue
            x = a[0]
            if numpy:
                x = sys.modules["numpy"].ascontiguousarray(x)
                ptr = x.ctypes.data
            else:
                x = x.contiguous()
                ptr = x.data_ptr()
            bound.append((p.name, _lib.Arg(_lib.KIND["ptr"], ptr), x))
        if _graph.current() is not None:
            raise TileError("TRT_ERROR_INVALID_ARGUMENT", "graph '%s' called inside a tile.CudaGraph capture: "
                            "tensor graphs are not captured yet" % self.name)
        return device, sizes, numpy, bound

    def _context(self, device):
        ctx = self.module.context
        if ctx is None:
            return default_context(device_name(device))
        if ctx.key != device:
            self._fail(ValueError, "the module was loaded into the %s context, but the arguments are on %s",
                       ctx.device, device_name(device))
        return ctx

    def _result(self, o, sizes, numpy, device):
        shape = tuple(_dim_value(d, sizes) for d in o.dims)
        if numpy:
            return sys.modules["numpy"].empty(shape, _numpy_dtype(o.elem))
        torch = sys.modules["torch"]
        dev = "cpu" if device[0] == "cpu" else "cuda:%d" % device[1]
        return torch.empty(shape, dtype=getattr(torch, _args.DTYPE_NAMES[o.elem]), device=dev)

    def _run(self, ctx, bound, sizes, results, device, part=0, saved=(), seed=None):
        """Binds and runs the whole plan (part 0), its forward (1) or its backward (2),
        the saved values in `saved`; a result of None is not bound (the other part's)."""
        h = self._handle(ctx)
        run = (lib.trt_tgraph_run, lib.trt_tgraph_run_forward, lib.trt_tgraph_run_backward)[part]
        with h.lock:
            g = h.ptr
            for name, value in sizes.items():
                check(lib.trt_tgraph_bind_size(g, name.encode(), value))
            for b in bound:
                check(lib.trt_tgraph_bind(g, b[0].encode(), b[1]))
            for i, r in enumerate(results):
                if r is not None:
                    check(lib.trt_tgraph_bind_output(g, i, _pointer(r)))
            for i, v in enumerate(saved):
                check(lib.trt_tgraph_bind_saved(g, i, _pointer(v)))
            if seed is not None:
                check(lib.trt_tgraph_bind_seed(g, seed))
            if device[0] == "cpu":
                check(run(g, None))
            else:
                _run_cuda(g, device[1], run)


class GraphForward:
    """What TensorGraph.forward ran (one step of a training loop): the graph, where it
    ran, the sizes and bound arguments (kept alive for the backward), the forward's
    results (None for the backward's) and the saved values."""

    def __init__(self, graph, ctx, device, sizes, numpy, bound, results, saved):
        self.graph, self.ctx, self.device, self.sizes, self.numpy = graph, ctx, device, sizes, numpy
        self.bound, self.results, self.saved = bound, results, saved

    def __repr__(self):
        return "<tile graph %s forward: %d saved values>" % (self.graph.name, len(self.saved))


def _pointer(a):
    return a.ctypes.data if _args._is_numpy(a) else a.data_ptr()


def _run_cuda(g, index, run=None):
    """On PyTorch's current stream of the arguments' device (made current for the call)."""
    torch = sys.modules["torch"]
    run = run or lib.trt_tgraph_run
    stream = ctypes.c_void_p(torch.cuda.current_stream(index).cuda_stream)
    if torch.cuda.current_device() == index:
        check(run(g, stream))
    else:
        with torch.cuda.device(index):
            check(run(g, stream))
