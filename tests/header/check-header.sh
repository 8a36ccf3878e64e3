#!/bin/sh
# include/tile/tile_rt.h compiles without a warning as C99, C11, C++11 and C++17
# (-Werror -pedantic -Wall -Wextra), alone and before or after the CUDA driver's cuda.h
# (when /usr/local/cuda/include/cuda.h exists), and its inline helpers work in each.
# Usage: check-header.sh <repo include dir> [cuda.h]. Exit 77 when no C++ compiler exists.
set -eu
inc=$1
cuda_h=${2:-/usr/local/cuda/include/cuda.h}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc=${CC:-cc}
cxx=
for c in ${CXX:-} g++ clang++; do
    if command -v "$c" >/dev/null 2>&1; then cxx=$c; break; fi
done
flags="-Werror -pedantic -Wall -Wextra"

# $1: the include lines before main
write() {
    cat > "$work/$2" <<SRC
$1
int main(void)
{
    TrtArg a[] = {trt_arg_ptr((TrtDevicePtr)16), trt_arg_i8(-3), trt_arg_i16(-300),
                  trt_arg_i32(-7), trt_arg_i64(-9), trt_arg_u8(200), trt_arg_u16(60000),
                  trt_arg_u32(7u), trt_arg_u64(9u), trt_arg_f16(0x3c00), trt_arg_bf16(0x3f80),
                  trt_arg_f32(1.5f), trt_arg_f64(2.5), trt_arg_bool(5)};
    TrtStream s = 0;
#if defined(__cplusplus) || (defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L) || \\
    defined(__cuda_cuda_h__)
    CUdeviceptr p = a[0].v.ptr;
    CUstream t = s;
    (void)p;
    (void)t;
#endif
    (void)s;
    return !(a[0].kind == TRT_ARG_PTR && a[0].v.ptr == 16 && a[1].kind == TRT_ARG_I8 &&
             a[1].v.i8 == -3 && a[2].v.i16 == -300 && a[3].v.i32 == -7 && a[4].v.i64 == -9 &&
             a[5].kind == TRT_ARG_U8 && a[5].v.u8 == 200 && a[6].v.u16 == 60000 &&
             a[7].v.u32 == 7u && a[8].v.u64 == 9u && a[9].kind == TRT_ARG_F16 &&
             a[9].v.u16 == 0x3c00 && a[10].kind == TRT_ARG_BF16 && a[10].v.u16 == 0x3f80 &&
             a[11].v.f32 == 1.5f && a[12].v.f64 == 2.5 && a[13].kind == TRT_ARG_BOOL &&
             a[13].v.i8 == 1 && TILE_RT_VERSION_MAJOR >= 0 && TILE_RT_VERSION[0] != 0);
}
SRC
}

fail=0
# $1: compiler, $2: standard flag, $3: source name
check() {
    if "$1" $2 $flags -I"$inc" -o "$work/a.out" "$work/$3" 2>"$work/log" && "$work/a.out"; then
        echo "ok: $1 $2 $3" | sed "s|$work|.|g"
    else
        echo "FAIL: $1 $2 $3"; cat "$work/log"; fail=1
    fi
}

write '#include "tile/tile_rt.h"' alone.c
orders=alone
if [ -f "$cuda_h" ]; then
    # cuda.h itself is not clean C99 (unnamed unions), so it is a system header here, whose
    # own warnings are not shown. That would hide a typedef it repeats after tile_rt.h,
    # so its handle typedefs are also checked alone, copied into a stand-in shown in full.
    mkdir "$work/real" "$work/stub"
    ln -s "$cuda_h" "$work/real/cuda.h"
    { echo '#ifndef __cuda_cuda_h__'; echo '#define __cuda_cuda_h__'
      grep -E '^typedef (unsigned long long CUdeviceptr_v2|CUdeviceptr_v2 CUdeviceptr|struct CUstream_st \*CUstream);' "$cuda_h"
      echo '#endif'; } > "$work/stub/cuda.h"
    [ "$(grep -c '^typedef' "$work/stub/cuda.h")" = 3 ] || { echo "FAIL: $cuda_h lacks the typedefs of CUdeviceptr and CUstream"; exit 1; }
    write '#include "tile/tile_rt.h"
#include <cuda.h>' rt-first.c
    write '#include <cuda.h>
#include "tile/tile_rt.h"' cuda-first.c
    cp "$work/rt-first.c" "$work/rt-first-stub.c"
    cp "$work/cuda-first.c" "$work/cuda-first-stub.c"
    orders="alone rt-first cuda-first rt-first-stub cuda-first-stub"
else
    echo "no $cuda_h: only the header alone"
fi
for o in $orders; do
    case $o in
    *-stub) extra="-I$work/stub" ;;
    *) extra="-isystem $work/real" ;;
    esac
    for std in -std=c99 -std=c11; do check "$cc" "$std $extra" $o.c; done
    if [ -n "$cxx" ]; then
        cp "$work/$o.c" "$work/$o.cpp"
        for std in -std=c++11 -std=c++17; do check "$cxx" "$std $extra" $o.cpp; done
    fi
done
[ $fail = 0 ] || exit 1
if [ -z "$cxx" ]; then echo "no C++ compiler (g++, clang++): C++ not checked"; exit 77; fi
