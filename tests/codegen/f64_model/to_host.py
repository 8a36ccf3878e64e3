"""Turns the LLVM IR tilec emits for the scalar kernels of kernels.tile into IR for the
host: the x86-64 triple, no address spaces, thread 0, and the predicated store (inline
PTX) as a call of st(mask, address, low word, high word), which check.c defines.
Reads stdin, writes stdout."""
import re
import sys

s = sys.stdin.read()
s = re.sub(r'target datalayout = .*\n', '', s)
s = s.replace('nvptx64-nvidia-cuda', 'x86_64-pc-linux-gnu').replace('ptx_kernel ', '').replace(' addrspace(1)', '')
s = re.sub(r'(tail )?call void asm sideeffect "[^"]*st\.global[^"]*", "[^"]*"\(', 'call void @st(', s)
s = re.sub(r'declare noundef i32 @llvm\.nvvm\.read\.ptx\.sreg\.tid\.x\(\).*',
           'define internal i32 @tidx() { ret i32 0 }\ndeclare void @st(i32, i64, i32, i32)', s)
s = s.replace('@llvm.nvvm.read.ptx.sreg.tid.x', '@tidx')
s = re.sub(r'!nvvm\.annotations.*\n', '', s)
s = re.sub(r'^!\d+ = .*\n', '', s, flags=re.M)
if 'asm' in s or 'nvvm' in s:
    sys.exit('to_host.py: the IR uses PTX this model does not know; update it')
sys.stdout.write(s)
