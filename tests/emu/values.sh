#!/usr/bin/env bash
# The GPU code of a one-block kernel k(x: *i32, o: *i32, c: *i32) run on the host with
# values (llvm_to_host.py --values, values_harness.c) and compared with the
# interpreter: every element of c and o must be equal (integer kernels only).
#   values.sh TILEC FILE.tile KERNEL WARPS N_X N_O N_C   (x: N_X random i32 in [-1000, 1000))
# Exit 77 without LLVM's llc or a C compiler.
set -euo pipefail
tilec=$1; file=$2; kern=$3; warps=$4; nx=$5; no=$6; nc=$7
here=$(cd "$(dirname "$0")" && pwd)
command -v cc >/dev/null && { command -v llc-19 >/dev/null || [ -x /usr/lib/llvm-19/bin/llc ]; } || exit 77
llc=${LLC:-$(command -v llc-19 || echo /usr/lib/llvm-19/bin/llc)}
t=$(mktemp -d); trap 'rm -rf "$t"' EXIT
"$tilec" "$file" --kernel "$kern" --emit=llvm -o "$t/k.ll"
python3 "$here/llvm_to_host.py" "$t/k.ll" "$t/host.ll" --values
"$llc" -O1 -mtriple=x86_64-pc-linux-gnu -relocation-model=pic -filetype=obj "$t/host.ll" -o "$t/k.o"
cc -O1 -pthread -DKERNEL="$kern" "$here/values_harness.c" "$t/k.o" -o "$t/run"
# the same random input for both: integers in [-1000, 1000)
python3 -c "import random, struct, sys; random.seed(7); sys.stdout.buffer.write(struct.pack('<$nx''i', *[random.randrange(-1000, 1000) for _ in range($nx)]))" > "$t/x.bin"
"$t/run" $((warps * 32)) "$nx" "$no" "$nc" < "$t/x.bin" > "$t/gpu.txt"
"$tilec" run "$file" --kernel "$kern" --grid 1 --arg x=@"$t/x.bin" --arg o=zeros:"$no" --arg c=zeros:"$nc" \
    --print c --print o > "$t/cpu.txt" 2>&1 || { cat "$t/cpu.txt"; exit 1; }
if ! diff -q "$t/cpu.txt" "$t/gpu.txt" >/dev/null; then
    echo "$kern: the host run of the GPU code differs from the interpreter:"; diff "$t/cpu.txt" "$t/gpu.txt" | head -20
    exit 1
fi
echo "$kern: $((nc + no)) values equal"
