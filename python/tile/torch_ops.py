"""A tile kernel as a PyTorch operator, so torch.compile traces it without a graph break.

register("mylib::softmax", kernel, mutates_args=["out"], BLOCK=1024) defines the
operator with torch.library.Library: its schema comes from the kernel's parameters
(a pointer is a Tensor, annotated as written to when named in mutates_args; integers
are SymInt, floats float, bool bool; const parameters not fixed by the keywords are
int arguments), it returns nothing, its CUDA and CPU implementations launch the kernel
(the CPU one through the interpreter) and its fake implementation does nothing, which
is all tracing needs of an operator that only writes its outputs. Call it as
torch.ops.mylib.softmax(out, x, ...) inside or outside a compiled function."""
import string

from ._lib import LAUNCH_KEYS

_libraries = {}   # namespace -> its Library (registrations last as long as the object; torch < 2.0 allows one a namespace)


def _schema_type(p, mutated, alias):
    if p.is_pointer:
        return "Tensor(%s!)" % alias if mutated else "Tensor"
    if p.is_const or p.kind in ("i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"):
        return "SymInt" if not p.is_const else "int"
    if p.kind == "bool":
        return "bool"
    return "float"


def schema(kernel, mutates_args, fixed):
    """The operator schema's argument list: "(Tensor(a!) out, Tensor x, SymInt n) -> ()"."""
    names = [p.name for p in kernel.params]
    for m in mutates_args:
        if m not in names or not kernel.params[names.index(m)].is_pointer:
            raise ValueError("register: '%s' in mutates_args is not a pointer parameter of %s"
                             % (m, kernel.name))
    aliases = iter(string.ascii_lowercase)
    args = []
    for p in kernel.params:
        if p.name in fixed:
            continue
        mutated = p.name in mutates_args
        t = _schema_type(p, mutated, next(aliases) if mutated else None)
        default = "=%d" % p.default if p.is_const and p.default is not None else ""
        args.append("%s %s%s" % (t, p.name, default))
    return "(%s) -> ()" % ", ".join(args)


def check_consts(kernel, consts):
    """The fixed values of register: each a const parameter of the kernel or a launch
    key (tile.LAUNCH_KEYS, the library's own list, so every key the compiler takes)."""
    for c in consts:
        if c not in LAUNCH_KEYS and not any(p.name == c and p.is_const for p in kernel.params):
            raise ValueError("register: %s has no const parameter '%s' (nor a launch key: %s)"
                             % (kernel.name, c, ", ".join(LAUNCH_KEYS)))


def register(qualname, kernel, mutates_args, grid=None, **consts):
    import torch
    ns, _, name = qualname.partition("::")
    if not ns or not name:
        raise ValueError("register: the name must be 'namespace::op', got %r" % qualname)
    check_consts(kernel, consts)
    sig = schema(kernel, list(mutates_args), consts)
    lib = _libraries.get(ns)
    if lib is None:
        try:
            lib = torch.library.Library(ns, "FRAGMENT")
        except ValueError:   # PyTorch before 2.0: one "DEF" library per namespace, kept for its next ops
            lib = torch.library.Library(ns, "DEF")
        _libraries[ns] = lib
    lib.define(name + sig)
    names = [p.name for p in kernel.params if p.name not in consts]
    launch = kernel if grid is None else kernel[grid]

    def impl(*args, **kwargs):
        kw = dict(zip(names, args))
        kw.update(kwargs)
        kw.update(consts)
        launch(**kw)

    def fake(*args, **kwargs):
        return None

    for key in ("CUDA", "CPU"):
        lib.impl(name, impl, key)
    if hasattr(torch.library, "register_fake"):
        torch.library.register_fake(qualname, fake, lib=lib)
    else:   # PyTorch before 2.4
        lib.impl(name, fake, "Meta")
    return getattr(getattr(torch.ops, ns), name)
