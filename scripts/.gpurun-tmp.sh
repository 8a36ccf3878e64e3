export LD_LIBRARY_PATH=$PWD/build-gpu/runtime TILE_CACHE_DIR=$(mktemp -d) PYTHONUNBUFFERED=1
s() { n=$1; t=$2; shift 2; timeout $t "$@" > $OUT/$n.log 2>&1; echo "=== $n rc=$?"; tail -${TAILN:-6} $OUT/$n.log; }
TAILN=4 s examples 120 build-gpu/tile-examples --device gpu examples
TAILN=3 s lit 150 python3 tests/gpu/lit_on_gpu.py build-gpu/tilec --out $OUT/lit.txt
grep -E "^FAIL" $OUT/lit.log | head -5
TAILN=3 s difftest 130 env DIFFTEST_SEED=1 bash scripts/difftest.sh 75
TAILN=40 s gemm 200 python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --out $OUT/gemm.md --quick
TAILN=30 s attention 150 python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --out $OUT/attention.md --quick
