"""Turning Python values into TrtArgs: one converter per run-time parameter, chosen
once per kernel, const set and device (the plan), that checks a value and gives what
the TrtArg holds. Every message names the kernel and the parameter."""
import math
import operator
import struct
import sys

# The element types as numpy's dtype.name and torch's str(dtype)[6:] spell them.
DTYPE_NAMES = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
    "i1": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}
# The TrtArg union member each kind sets, as a struct format (the value at offset 8).
VALUE_FORMATS = {
    "ptr": "Q", "bool": "b7x", "i8": "b7x", "i16": "h6x", "i32": "i4x", "i64": "q",
    "u8": "B7x", "u16": "H6x", "u32": "I4x", "u64": "Q", "f16": "H6x", "bf16": "H6x",
    "f32": "f4x", "f64": "d",
}
INT_KINDS = ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64")


def elem_text(elem):
    return "bool" if elem == "i1" else elem


class Bits:
    """tile.bits(array, "bf16"): an array (numpy or torch) whose elements hold the bits
    of another element type of the same size, e.g. bf16 values in a uint16 numpy array,
    which has no bf16 dtype."""

    def __init__(self, array, elem):
        if elem not in DTYPE_NAMES:
            raise ValueError("tile.bits: unknown element type %r" % (elem,))
        self.array, self.elem = array, elem


def _is_torch(v):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(v, torch.Tensor)


def _is_numpy(v):
    np = sys.modules.get("numpy")
    return np is not None and isinstance(v, np.ndarray)


def describe(v):
    if _is_numpy(v):
        return "a numpy array of %s" % v.dtype.name
    if _is_torch(v):
        return "a tensor of %s on %s" % (str(v.dtype)[6:], v.device)
    if isinstance(v, Bits):
        return "tile.bits(%s, %r)" % (describe(v.array), v.elem)
    return "%r (%s)" % (v, type(v).__name__)


def array_types():
    """numpy.ndarray and torch.Tensor where those modules are loaded (None otherwise):
    an exact type compare is the fast path of every pointer argument."""
    np, torch = sys.modules.get("numpy"), sys.modules.get("torch")
    return (np.ndarray if np else None, torch.Tensor if torch else None)


def value_device(v):
    """("cpu", -1) or ("cuda", index) for an array argument; None for anything else."""
    if isinstance(v, Bits):
        v = v.array
    if _is_torch(v):
        d = v.device
        return ("cuda", d.index if d.index is not None else 0) if d.type == "cuda" else ("cpu", -1)
    if _is_numpy(v):
        return ("cpu", -1)
    return None


def _dtype_name(v):
    return v.dtype.name if _is_numpy(v) else str(v.dtype)[6:]


def _extent(shape, strides, unit):
    """The bytes an array reaches from its first element (strides in bytes)."""
    if any(n == 0 for n in shape):
        return 0
    ext = unit
    for n, s in zip(shape, strides):
        if s < 0:
            raise ValueError("negative strides")
        ext += (n - 1) * s
    return ext


class ArgError(TypeError):
    """An argument of the wrong type or on the wrong device (tile.ArgError); the message
    names the kernel and the parameter."""


def pointer_converter(kernel, p, device, origin, written=True):
    """For a *T parameter on `device`: value -> (address, bytes reachable). written:
    the kernel may store through the parameter, so a read-only numpy array (a view of
    bytes, or one with writeable=False) is refused with ValueError."""
    want = DTYPE_NAMES.get(p.elem, p.elem)
    where = "cpu" if device[0] == "cpu" else "cuda:%d" % device[1]
    on_cuda = device[0] == "cuda"
    accepted = {}   # dtype object -> whether it is `want` (dtype.name costs microseconds)

    def fail(v, why):
        raise ArgError("kernel '%s': argument '%s' is %s, but %s" % (kernel, p.name, describe(v), why))

    def read_only(v):
        raise ValueError("kernel '%s': argument '%s' is a read-only numpy array, but the kernel may "
                         "write through parameter '%s'" % (kernel, p.name, p.name))

    def wrong_device(v):
        fail(v, "the launch runs on %s (where argument '%s' is)" % (where, origin))

    def place(v, a, numpy):
        if numpy:
            if on_cuda:
                wrong_device(v)
            if a.flags.c_contiguous:
                return a.ctypes.data, a.nbytes
            return a.ctypes.data, _extent(a.shape, a.strides, a.itemsize)
        if on_cuda:
            if not a.is_cuda or a.get_device() != device[1]:
                wrong_device(v)
        elif a.device.type != "cpu":
            wrong_device(v)
        size = a.element_size()   # CUDA tensors too: the checked mode (TILE_DEBUG=bounds) needs it
        if a.is_contiguous():
            return a.data_ptr(), a.numel() * size
        return a.data_ptr(), _extent(a.shape, [s * size for s in a.stride()], size)

    def convert_bits(v):
        a = v.array
        numpy = _is_numpy(a)
        if v.elem != p.elem:
            fail(v, "the parameter is *%s" % elem_text(p.elem))
        if not (numpy or _is_torch(a)):
            fail(v, "tile.bits takes a numpy array or a tensor")
        if (a.dtype.itemsize if numpy else a.element_size()) != p.elem_bytes:
            fail(v, "tile.bits needs elements of %d bytes for %s" % (p.elem_bytes, p.elem))
        if written and numpy and not a.flags.writeable:
            read_only(v)
        return place(v, a, numpy)

    ndarray, tensor = array_types()
    last = [None]   # the dtype object last accepted: most calls compare one identity

    def convert(v):
        t = type(v)
        if t is tensor:
            numpy = False
        elif t is ndarray:
            numpy = True
        else:
            numpy = _is_numpy(v)
            if not numpy:
                if isinstance(v, Bits):
                    return convert_bits(v)
                if not _is_torch(v):
                    fail(v, "the parameter is *%s: pass a numpy array or a tensor" % elem_text(p.elem))
        d = v.dtype
        if d is not last[0]:
            ok = accepted.get(d)
            if ok is None:
                ok = accepted[d] = _dtype_name(v) == want
            if not ok:
                fail(v, "the parameter is *%s (a %s array or tensor)" % (elem_text(p.elem), want))
            last[0] = d
        if written and numpy and not v.flags.writeable:
            read_only(v)
        try:
            return place(v, v, numpy)
        except ValueError as e:
            fail(v, "its %s cannot be passed as a pointer" % e)
    return convert


def _f16_bits(x):
    try:
        return struct.unpack("=H", struct.pack("=e", x))[0]
    except OverflowError:
        return 0xFC00 if x < 0 else 0x7C00


def _bf16_bits(x):
    """Rounded to nearest even from f32, as the runtime's fp_f32_to_bf16."""
    if math.isnan(x):
        return 0x7FC0
    try:
        u = struct.unpack("=I", struct.pack("=f", x))[0]
    except OverflowError:
        return 0xFF80 if x < 0 else 0x7F80
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


def scalar_converter(kernel, p, owner="kernel"):
    """For a scalar parameter: value -> what its TrtArg member holds. owner: "kernel" or
    "graph", as messages name what `kernel` is."""
    kind = p.kind

    def fail(v, what):
        raise ArgError("%s '%s': argument '%s' is %s, but the parameter is %s%s"
                       % (owner, kernel, p.name, describe(v), elem_text(p.elem), what))

    def number(v, accept_float):
        if _is_torch(v) or _is_numpy(v) or isinstance(v, (str, bytes, Bits)):
            fail(v, ": pass a Python number")
        if accept_float:
            try:
                return float(v)
            except (TypeError, ValueError):
                fail(v, "")
        try:
            return operator.index(v)
        except TypeError:
            fail(v, " (an integer)")

    if p.elem.startswith("f8"):
        def unsupported(v):
            fail(v, ": f8 scalars cannot be passed from Python yet")
        return unsupported
    if kind in INT_KINDS:
        return lambda v: v if type(v) is int else number(v, False)
    if kind == "bool":
        def convert_bool(v):
            # numpy 2's np.bool_ is no integer for operator.index (numpy 1's was)
            n = int(v) if type(v).__name__ in ("bool_", "bool") and hasattr(v, "dtype") else number(v, False)
            if n not in (0, 1):
                fail(v, " (True, False, 0 or 1)")
            return n
        return convert_bool
    if kind in ("f32", "f64"):
        return lambda v: number(v, True)
    if p.elem == "f16":
        return lambda v: _f16_bits(number(v, True))
    if p.elem == "bf16":
        return lambda v: _bf16_bits(number(v, True))
    raise AssertionError("kind %s" % kind)
