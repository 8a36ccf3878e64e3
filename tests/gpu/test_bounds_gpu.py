"""The checked mode on a real GPU (issue 11 section 4, docs/RUNTIME.md "The checked
mode"): a kernel that stores (and loads) far outside its buffer, run checked, reports
the kernel, the program, the argument and the element in the interpreter's words
without faulting, and the process keeps working: the next launches on the same
context succeed and compute the right values. Three ways in:

  tilec run --device gpu --check-bounds    (a process per run)
  TILE_DEBUG=bounds tilec run --device gpu
  libtileRT in this process (ctypes): trt_context_set_debug, trt_launch_sized, then
  clean launches on the same context; and, with torch, the Python package under
  TILE_DEBUG=bounds on CUDA tensors

and one contrast: the same kernel unchecked faults (in a child process), which is what
the checked mode is for. Exits 77 (skipped) without a CUDA device.

    python3 tests/gpu/test_bounds_gpu.py build-gpu/tilec [build-gpu/runtime/libtileRT.so]
"""
import ctypes
import os
import re
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Each program stores one element 10^9 elements (4 GB) apart per lane: unchecked, far
# outside any allocation; checked, masked off. `inp` is read 2^20 elements past its end
# in program 1 (checked: the load gives 0).
SRC = """\
kernel far(out: *f32, inp: *f32, n: i32) {
    let offs = program_id(0) * 16 + arange(0, 16);
    let m = offs < n;
    let x = load(inp + offs, m);
    store(out + (offs as i64) * 1000000000, x + 1.0, m);
}

kernel far_load(out: *f32, inp: *f32) {
    let offs = program_id(0) * 16 + arange(0, 16);
    let x = load(inp + offs + program_id(0) * 1048576);
    store(out + offs, x + 1.0);
}

kernel good(out: *f32, inp: *f32, n: i32) {
    let offs = program_id(0) * 16 + arange(0, 16);
    let m = offs < n;
    store(out + offs, load(inp + offs, m) * 2.0, m);
}
"""
STORE_RE = (r"far\.tile:5:5: error: out-of-bounds store in kernel 'far', program \((\d+), 0, 0\): "
            r"argument 'out' has 64 elements, lane (\d+) writes element (\d+)")
LOAD_RE = (r"far\.tile:10:13: error: out-of-bounds load in kernel 'far_load', program \((\d+), 0, 0\): "
           r"argument 'inp' has 32 elements, lane (\d+) reads element (\d+)")

failures = []


def check(cond, what, detail=""):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)
        if detail:
            print("     " + detail.strip().replace("\n", "\n     ")[-1500:])


def check_store_report(text, what):
    """The first access outside that the GPU recorded: any program and lane may win the
    race, but the element must be that lane's (pid * 16 + lane) * 10^9, past the end."""
    m = re.search(STORE_RE, text)
    ok = bool(m)
    if m:
        pid, lane, elem = (int(g) for g in m.groups())
        ok = pid < 4 and lane < 16 and elem == (pid * 16 + lane) * 1000000000 and elem >= 64
    check(ok, what, text)


def tilec_runs(tilec, path, env):
    base = [tilec, "run", path, "--device", "gpu", "--grid", "4", "--arg", "out=zeros:64", "--arg", "inp=iota:64",
            "--arg", "n=64", "--kernel", "far"]
    r = subprocess.run(base + ["--check-bounds"], capture_output=True, text=True, env=env)
    check(r.returncode == 1, "tilec run --device gpu --check-bounds: exit 1", r.stderr)
    check_store_report(r.stderr, "tilec run --check-bounds names kernel, program, argument and element")
    check("TRT_ERROR_KERNEL_FAILED" in r.stderr and "bounds check on the GPU" in r.stderr
          and "CUDA_ERROR" not in r.stderr, "... as TRT_ERROR_KERNEL_FAILED, not a driver fault", r.stderr)
    r = subprocess.run(base, capture_output=True, text=True, env=dict(env, TILE_DEBUG="bounds"))
    check(r.returncode == 1, "TILE_DEBUG=bounds tilec run --device gpu: exit 1", r.stderr)
    check_store_report(r.stderr, "TILE_DEBUG=bounds names kernel, program, argument and element")
    r = subprocess.run([tilec, "run", path, "--device", "gpu", "--grid", "2", "--arg", "out=zeros:32", "--arg",
                        "inp=iota:32", "--kernel", "far_load", "--check-bounds"], capture_output=True, text=True,
                       env=env)
    m = re.search(LOAD_RE, r.stderr)
    check(r.returncode == 1 and m and m.group(1) == "1" and int(m.group(3)) == 1048576 + 16 + int(m.group(2)),
          "a load far outside: program 1, element 2^20 + 16 + lane", r.stderr)
    # In bounds, checked, the values are right (and the same as the interpreter's).
    good = [tilec, "run", path, "--grid", "4", "--arg", "out=zeros:64", "--arg", "inp=iota:64", "--arg", "n=60",
            "--kernel", "good", "--print", "out"]
    cpu = subprocess.run(good, capture_output=True, text=True, env=env)
    gpu = subprocess.run(good + ["--device", "gpu", "--check-bounds"], capture_output=True, text=True, env=env)
    check(gpu.returncode == 0 and gpu.stdout == cpu.stdout and cpu.stdout.split()[59] == "118",
          "a clean kernel, checked on the GPU, prints what the interpreter prints", gpu.stderr + gpu.stdout[:200])


class Lib:
    """The few libtileRT calls the in-process part needs, through ctypes."""

    def __init__(self, path):
        L = self.L = ctypes.CDLL(path)
        c, vp = ctypes, ctypes.c_void_p
        sigs = {
            "trt_context_create": (c.c_int, [c.c_int, c.c_int, c.c_char_p, c.POINTER(vp)]),
            "trt_context_set_debug": (c.c_int, [vp, c.c_uint]),
            "trt_module_load_string": (c.c_int, [vp, c.c_char_p, c.c_char_p, c.POINTER(vp)]),
            "trt_module_get_kernel": (c.c_int, [vp, c.c_char_p, vp, c.c_uint32, c.POINTER(vp)]),
            "trt_launch_sized": (c.c_int, [vp, c.c_char_p, c.c_char_p, c.c_uint32, c.c_char_p, vp]),
            "trt_launch": (c.c_int, [vp, c.c_char_p, c.c_uint32, c.c_char_p, vp]),
            "trt_mem_alloc": (c.c_int, [vp, c.c_size_t, c.POINTER(c.c_uint64)]),
            "trt_memcpy_htod": (c.c_int, [vp, c.c_uint64, c.c_char_p, c.c_size_t]),
            "trt_memcpy_dtoh": (c.c_int, [vp, c.c_char_p, c.c_uint64, c.c_size_t]),
            "trt_synchronize": (c.c_int, [vp]),
            "trt_last_error": (c.c_char_p, []),
        }
        for name, (res, args) in sigs.items():
            f = getattr(L, name)
            f.restype, f.argtypes = res, args

    def err(self):
        return self.L.trt_last_error().decode(errors="replace")


def ptr_arg(p):
    return struct.pack("=i4xQ", 0, p)      # TRT_ARG_PTR


def i32_arg(v):
    return struct.pack("=i4xi4x", 4, v)    # TRT_ARG_I32


def in_process(lib_path):
    lib = Lib(lib_path)
    L = lib.L
    ctx = ctypes.c_void_p()
    if L.trt_context_create(0, 0, b"", ctypes.byref(ctx)):
        check(False, "trt_context_create", lib.err())
        return
    check(L.trt_context_set_debug(ctx, 1) == 0, "trt_context_set_debug(TRT_DEBUG_BOUNDS)", lib.err())
    mod = ctypes.c_void_p()
    check(L.trt_module_load_string(ctx, b"far.tile", SRC.encode(), ctypes.byref(mod)) == 0, "module", lib.err())
    kernels = {}
    for name in (b"far", b"good"):
        k = ctypes.c_void_p()
        check(L.trt_module_get_kernel(mod, name, None, 0, ctypes.byref(k)) == 0, "kernel " + name.decode(), lib.err())
        kernels[name] = k
    out, inp = ctypes.c_uint64(), ctypes.c_uint64()
    check(L.trt_mem_alloc(ctx, 256, ctypes.byref(out)) == 0 and L.trt_mem_alloc(ctx, 256, ctypes.byref(inp)) == 0,
          "allocations", lib.err())
    L.trt_memcpy_htod(ctx, inp.value, struct.pack("=64f", *range(64)), 256)
    L.trt_memcpy_htod(ctx, out.value, bytes(256), 256)
    args = ptr_arg(out.value) + ptr_arg(inp.value) + i32_arg(64)
    sizes = struct.pack("=3Q", 256, 256, 0)
    grid = struct.pack("=3I", 4, 1, 1)
    st = L.trt_launch_sized(kernels[b"far"], args, sizes, 3, grid, None)
    msg = lib.err()
    check(st == 11, "trt_launch_sized of the far store: TRT_ERROR_KERNEL_FAILED", msg)
    check_store_report(msg, "... naming kernel, program, argument and element")
    # The context is fine: synchronize, then a clean kernel, twice, with the right values.
    check(L.trt_synchronize(ctx) == 0, "trt_synchronize after the report", lib.err())
    for attempt in range(2):
        args = ptr_arg(out.value) + ptr_arg(inp.value) + i32_arg(60)
        st = L.trt_launch_sized(kernels[b"good"], args, sizes, 3, grid, None)
        buf = ctypes.create_string_buffer(256)
        ok = st == 0 and L.trt_synchronize(ctx) == 0 and L.trt_memcpy_dtoh(ctx, buf, out.value, 256) == 0
        vals = struct.unpack("=64f", buf.raw)
        check(ok and vals[:60] == tuple(2.0 * i for i in range(60)),
              "launch %d after the report succeeds and computes the right values" % (attempt + 1), lib.err())
    # Unchecked on the same context (a separate variant): still right.
    L.trt_context_set_debug(ctx, 0)
    st = L.trt_launch(kernels[b"good"], args, 3, grid, None)
    check(st == 0 and L.trt_synchronize(ctx) == 0, "the unchecked variant after the checked one", lib.err())


def with_torch(env):
    """The Python package on CUDA tensors under TILE_DEBUG=bounds (its sizes are passed
    by the package), in a child process so that TILE_DEBUG is read at its start."""
    code = r"""
import sys, torch
sys.path.insert(0, %r)
import tile
m = tile.loads(%r, name="far.tile")
out = torch.zeros(64, device="cuda"); inp = torch.arange(64, dtype=torch.float32, device="cuda")
try:
    m.far[(4,)](out, inp, 64)
    print("NO ERROR")
except tile.TileError as e:
    print(e)
m.good[(4,)](out, inp, 60)
torch.cuda.synchronize()
print("GOOD", out[59].item(), (out[:60] == 2 * inp[:60]).all().item())
""" % (os.path.join(ROOT, "python"), SRC)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(env, TILE_DEBUG="bounds"))
    if "No module named 'torch'" in r.stderr:
        print("skip the Python package: no torch")
        return
    check_store_report(r.stdout, "tile (Python) under TILE_DEBUG=bounds raises TileError naming the access")
    check("GOOD 118.0 True" in r.stdout, "tile (Python): the next launch works", r.stdout + r.stderr)


def contrast(tilec, path, env):
    """Unchecked, the same launch faults the context (the first part of section 4)."""
    r = subprocess.run([tilec, "run", path, "--device", "gpu", "--grid", "4", "--arg", "out=zeros:64", "--arg",
                        "inp=iota:64", "--arg", "n=64", "--kernel", "far"], capture_output=True, text=True, env=env)
    check(r.returncode != 0 and "far" in r.stderr, "unchecked, the far store fails and names 'far'", r.stderr)
    print("     (unchecked: %s)" % (r.stderr.strip().splitlines() or ["?"])[0][:200])


def main():
    tilec = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build-gpu", "tilec"))
    lib = sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
        "TILE_LIB", os.path.join(ROOT, "build-gpu", "runtime", "libtileRT.so"))
    env = dict(os.environ)
    env.pop("TILE_DEBUG", None)
    env.setdefault("TILE_CACHE_DIR", tempfile.mkdtemp(prefix="tile-bounds-"))
    os.environ.pop("TILE_DEBUG", None)
    os.environ["TILE_CACHE_DIR"] = env["TILE_CACHE_DIR"]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "far.tile")
        with open(path, "w") as f:
            f.write(SRC)
        probe = subprocess.run([tilec, "run", path, "--device", "gpu", "--grid", "1", "--arg", "out=zeros:64",
                                "--arg", "inp=iota:64", "--arg", "n=16", "--kernel", "good"], capture_output=True,
                               text=True, env=env)
        if "TRT_ERROR_NO_DRIVER" in probe.stderr or "TRT_ERROR_NO_DEVICE" in probe.stderr:
            print("skipped: no CUDA device (%s)" % probe.stderr.strip()[:200])
            return 77
        tilec_runs(tilec, path, env)
        in_process(lib)
        with_torch(env)
        contrast(tilec, path, env)
    print("bounds-gpu: %s" % ("%d failed: %s" % (len(failures), "; ".join(failures)) if failures else "all passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
