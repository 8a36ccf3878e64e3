#!/usr/bin/env python3
"""Static SASS statistics of a cubin or PTX file, without a GPU.

    python3 scripts/sass.py FILE.ptx|FILE.cubin [--fun NAME] [--dump] [--loops]

For the host without a GPU: what ptxas made of a kernel (serialized wgmmas,
spills, the size of each loop) before device time is spent on it. PTX goes
through ptxas (-arch=sm_90a -O3, whole program, as the runtime's rt_ptxas.c;
PTXAS overrides the path). The disassembler (NVDISASM, default nvdisasm on the
PATH) may be CUDA 11.8's from Debian non-free (scripts/get-nvdisasm.sh puts it
in /usr/local/bin): it reads ptxas 13's cubins once their ELF header says the
old ABI (OSABI 0x33, ABI version 7, e_flags SM | SM << 16), which this script
patches in a copy (an old-ABI cubin is left as it is). nvdisasm 11.8 predates the fp8
wgmma (QGMMA): it prints nothing at their addresses, so fp8 kernels show HGMMA 0 and
their K loops may not be found; the other counts hold. Per function it prints
the instruction count, HGMMAs, WARPGROUP.DEPBAR waits (a wait after every
HGMMA means the wgmmas were serialized), MUFU, spills (STL/LDL) and, with
--loops, each loop (a backward branch) with its size and opcode histogram.
"""
import argparse
import collections
import os
import re
import struct
import subprocess
import sys
import tempfile

PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
NVDISASM = os.environ.get("NVDISASM", "nvdisasm")
INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def to_cubin(path, tmp):
    if path.endswith(".ptx"):
        out = os.path.join(tmp, "k.cubin")
        r = subprocess.run([PTXAS, "-arch=sm_90a", "-O3", "-v", path, "-o", out],
                           capture_output=True, text=True)
        if r.returncode:
            sys.exit(r.stderr)
        info = [ln for ln in r.stderr.splitlines() if "registers" in ln or "C75" in ln
                or "spill" in ln or "Compiling" in ln]
        return out, info
    return path, []


def patch(cubin, tmp):
    d = bytearray(open(cubin, "rb").read())
    if d[7] == 0x41:                      # CUDA 12.8+ ELF ABI: SM in bits 8..15
        sm = (struct.unpack_from("<I", d, 0x30)[0] >> 8) & 0xFF
        d[7], d[8] = 0x33, 7
        struct.pack_into("<I", d, 0x30, sm | (sm << 16))
    out = os.path.join(tmp, "p.cubin")
    open(out, "wb").write(bytes(d))
    return out


def functions(text):
    """{name: [(address, instruction)]} and {label: address} of the disassembly."""
    funs, labels, cur, pending = {}, {}, None, []
    for ln in text.splitlines():
        m = re.match(r"^\.text\.(\S+):", ln)
        if m:
            cur = m.group(1)
            funs[cur] = []
            continue
        m = re.match(r"^(\.L_\w+):", ln)
        if m:
            pending.append(m.group(1))
            continue
        m = INSN.match(ln)
        if m and cur:
            a = int(m.group(1), 16)
            for lb in pending:
                labels[lb] = a
            pending = []
            funs[cur].append((a, m.group(2)))
    return funs, labels


def opcode(ins):
    t = ins.split()
    if t and t[0].startswith("@"):
        t = t[1:]
    return t[0] if t else ""


def summary(name, ins, loops, labels):
    ops = collections.Counter(opcode(i).split(".")[0] for _, i in ins)
    depbar = [i for _, i in ins if i.startswith("WARPGROUP.DEPBAR") or "WARPGROUP.DEPBAR" in i]
    print("== %s: %d instructions, HGMMA %d, DEPBAR %d (%s), MUFU %d, STL %d, LDL %d, BAR %d, SYNCS %d"
          % (name, len(ins), ops["HGMMA"], len(depbar),
             ", ".join("%s x%d" % kv for kv in collections.Counter(d.split()[-1] for d in depbar).items()),
             ops["MUFU"], ops["STL"], ops["LDL"], ops["BAR"], ops["SYNCS"]))
    if not loops:
        return
    addr = {a: k for k, (a, _) in enumerate(ins)}
    for k, (a, i) in enumerate(ins):
        t = re.search(r"`\((\.L_\w+)\)", i) if opcode(i).startswith("BRA") else None
        if not t or t.group(1) not in labels:
            continue
        tgt = labels[t.group(1)]
        if tgt <= a and tgt in addr:
            body = ins[addr[tgt]:k + 1]
            h = collections.Counter(opcode(x).split(".")[0] for _, x in body)
            hg = [x for _, x in body if opcode(x).startswith("HGMMA")]
            dep = [x for _, x in body if "DEPBAR" in x]
            print("  loop %04x..%04x: %d instructions; HGMMA %d, waits %s" %
                  (tgt, a, len(body), len(hg), [d.split()[-1] for d in dep]))
            print("    " + ", ".join("%s %d" % kv for kv in h.most_common(16)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--fun")
    ap.add_argument("--dump", action="store_true")
    ap.add_argument("--loops", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cubin, info = to_cubin(a.file, tmp)
        for ln in info:
            print(ln)
        text = subprocess.run([NVDISASM, "-c", patch(cubin, tmp)], capture_output=True,
                              text=True, check=True).stdout
    funs, labels = functions(text)
    for name, ins in funs.items():
        if a.fun and a.fun != name:
            continue
        summary(name, ins, a.loops, labels)
        if a.dump:
            for addr, i in ins:
                print("  %04x  %s" % (addr, i))


if __name__ == "__main__":
    main()
