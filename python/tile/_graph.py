"""CUDA graphs, the reduce-overhead path (docs/PYTHON.md "CUDA graphs"): the kernel
launches made on PyTorch's current stream inside `with g.capture():` become one graph
that `g.replay()` runs with one driver call; `g.update(i, ...)` gives launch i new
arguments in place. libtileRT's trt_graph_* functions do the work
(docs/RUNTIME.md "CUDA graphs")."""
import ctypes
import sys
import threading

from ._context import default_context, parse_device
from ._lib import TileError, check, lib

_state = threading.local()    # .graph: the CudaGraph this thread is capturing, if any
capturing = 0                 # captures open in any thread: the launch path's fast test


def current():
    """The graph this thread is capturing, or None."""
    return getattr(_state, "graph", None) if capturing else None


def _stream(device_index):
    torch = sys.modules["torch"]
    return ctypes.c_void_p(torch.cuda.current_stream(device_index).cuda_stream)


class CudaGraph:
    """A sequence of tile kernel launches, captured once and replayed.

        g = tile.CudaGraph()
        with g.capture():            # on PyTorch's current stream
            k1(x, y, n)
            k2(y, z, n)
        g.replay()                   # both kernels, one cuGraphLaunch
        g.update(0, x2, y, n)        # launch 0 reads x2 from now on

    Only tile launches on the capturing thread, on the current stream at capture(), in
    the graph's context are captured (another library's work, such as a torch op, is
    not: it runs at once). A launch in another tile context inside the capture is an
    error. The graph keeps the tensors of its launches alive. An update that would make
    a launch run other code (another specialization class, grid or tuned config) raises
    TileError: capture again."""

    def __init__(self, device=None, context=None):
        if context is None:
            if device is None:
                device = "cuda:%d" % sys.modules["torch"].cuda.current_device()
            context = default_context(device)
        elif device is not None and context.key != parse_device(device):
            raise ValueError("CudaGraph: device %s and context %s disagree" % (device, context.device))
        if context.is_cpu:
            raise ValueError("CudaGraph: graphs run on a GPU; the context is %s" % context.device)
        self.context = context
        self._handle = None
        self._launches = []       # (kernel, plan, arguments kept alive) per captured launch
        self._device_index = context.key[1]
        self._stream = None           # the stream of the capture

    def capture(self):
        """A context manager: the launches inside it are captured instead of run."""
        return _Capture(self)

    def replay(self):
        """Runs the captured launches on PyTorch's current stream (asynchronously)."""
        if self._handle is None:
            raise TileError("TRT_ERROR_INVALID_ARGUMENT", "CudaGraph.replay: nothing has been captured")
        check(lib.trt_graph_launch(self._handle, _stream(self._device_index)))

    def update(self, index, *args, **kwargs):
        """New arguments for captured launch `index`, given as to the kernel's call (its
        consts must be the captured ones); later replays use them."""
        if self._handle is None:
            raise TileError("TRT_ERROR_INVALID_ARGUMENT", "CudaGraph.update: nothing has been captured")
        if not 0 <= index < len(self._launches):
            raise IndexError("CudaGraph.update: launch %d of %d" % (index, len(self._launches)))
        kernel, plan, _ = self._launches[index]
        vals, consts, runtime = kernel._bind(args, kwargs)
        if kernel._plan(kernel._device_of(runtime), consts) is not plan:
            raise ValueError("CudaGraph.update: launch %d of '%s' was captured with other consts or on "
                             "another device; capture again" % (index, kernel.name))
        packed, _ = kernel._pack(plan, runtime)
        check(lib.trt_graph_update(self._handle, index, packed, plan.n))
        self._launches[index] = (kernel, plan, runtime)

    def __len__(self):
        return lib.trt_graph_num_launches(self._handle) if self._handle is not None else 0

    def _record(self, kernel, plan, runtime):
        if plan.ctx is not self.context:
            raise TileError("TRT_ERROR_INVALID_ARGUMENT",
                            "kernel '%s' ran at once in another tile context (%s) instead of being captured "
                            "by the CudaGraph of %s: load its module without a context or into the graph's"
                            % (kernel.name, plan.ctx.device, self.context.device))
        if _stream(self._device_index).value != self._stream.value:
            return                    # another stream: libtileRT ran it at once
        self._launches.append((kernel, plan, runtime))

    def _free(self):
        if self._handle is not None:
            lib.trt_graph_destroy(self._handle)
            self._handle = None

    def __del__(self):
        if not sys.is_finalizing():
            self._free()

    def __repr__(self):
        return "<tile CudaGraph of %d launches on %s>" % (len(self), self.context.device)


class _Capture:
    def __init__(self, graph):
        self.graph = graph

    def __enter__(self):
        global capturing
        g = self.graph
        if current() is not None:
            raise TileError("TRT_ERROR_INVALID_ARGUMENT", "CudaGraph.capture: this thread captures already")
        self.stream = g._stream = _stream(g._device_index)
        check(lib.trt_graph_begin(g.context.handle, self.stream))
        g._free()
        g._launches = []
        _state.graph = g
        capturing += 1
        return g

    def __exit__(self, kind, value, tb):
        global capturing
        g = self.graph
        _state.graph = None
        capturing -= 1
        h = ctypes.c_void_p()
        status = lib.trt_graph_end(g.context.handle, self.stream, ctypes.byref(h))
        if kind is not None:          # the capture failed: free what it made, keep the error
            if h.value:
                lib.trt_graph_destroy(h)
            g._launches = []
            return False
        check(status)
        g._handle = h
        return False
