#!/usr/bin/env bash
# The installed libtileRT exports its public API (trt_*) and nothing else
# (runtime/tileRT.map); a leaked internal symbol fails this test and is named.
set -euo pipefail
lib=$1
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
leaked=$(grep -v -e '^trt_' <<<"$syms" || true)
if [ -n "$leaked" ]; then
  echo "exports: $lib exports symbols outside the API:"; echo "$leaked" | head -20
  exit 1
fi
n=$(grep -c '^trt_' <<<"$syms")
[ "$n" -ge 20 ] || { echo "exports: only $n trt_ symbols"; exit 1; }
echo "exports: $n symbols, all trt_*"
