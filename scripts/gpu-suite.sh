#!/usr/bin/env bash
# The GPU suite and the benchmarks, in one go, on the GPU machine (through the device
# tool, from the repository root, with build-gpu carried: see scripts/gpu-bundle.sh).
# Writes logs and tables under $OUT (default /tmp/tile-gpu-out) and prints a summary.
#   [DIFFTEST_SECONDS=N] [BENCH_QUICK=1] [STEP_TIMEOUT=S] scripts/gpu-suite.sh [tests|tests1|tests2|bench|all|new|newbench|compile|measure|measure2|measure3|issue40|measure40|issue41|issue41q|issue42|step42|check41|measure41|fp8attn]
# BENCH_QUICK=1 runs the GEMM and attention benchmarks with --quick (fewer shapes and
# configs, shorter timing: about two minutes for both, compiles included).
# STEP_TIMEOUT=S kills a step after S seconds (a kernel that hangs the GPU fails its
# step, and the call goes on). `new`: only the forms built without a GPU and not yet
# run on one (clusters, ping-pong, the attention forms of 2026-12-04): their GPU tests
# and fuzzers, each step at most 150 s unless STEP_TIMEOUT says otherwise (about 5
# minutes); `newbench`: their benchmarks against the defaults, and the arithmetic
# placement of codegen/cg_sink.c against the optimizer's order (TILE_SINK=0, its own
# kernel cache: the cache does not see the knob), about 8 minutes. `compile`: where the
# cold compile goes: the assemblers serial and parallel on the Llama block's kernels
# (bench/jit_parallel.py: the driver's cuLink, libnvJitLink, ptxas), then the block's
# cold compile through libtileRT with each (TILE_ASSEMBLER=nvjitlink), about 3 minutes.
set -u
what=${1:-all}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
OUT=${OUT:-/tmp/tile-gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$root/build-gpu/runtime${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export TILE_CACHE_DIR=$(mktemp -d /tmp/tile-cache.XXXXXX)
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
status=0
step() {  # step NAME COMMAND...: runs it, logs to $OUT/NAME.log, remembers a failure
  local name=$1; shift
  echo "=== $name: $*"
  local limit=()
  [ -n "${STEP_TIMEOUT:-}" ] && limit=(timeout --signal=KILL "$STEP_TIMEOUT")
  local t0=$SECONDS
  ${limit[@]+"${limit[@]}"} "$@" > "$OUT/$name.log" 2>&1; local rc=$?
  tail -n 25 "$OUT/$name.log"; echo
  echo "=== $name: exit $rc ($((SECONDS - t0)) s)"
  [ $rc -eq 0 ] || status=1
}
nvidia-smi -L
if [ "$what" = new ]; then
  : "${STEP_TIMEOUT:=150}"
  # correctness first: TMA GEMMs on clusters and with ping-pong (nn and nt, every edge),
  # the examples (matmul_bf16 and attn_fwd_tma on clusters, ping-pong GEMMs), the fuzzers
  step tma env TMA_NEW_ONLY=1 TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_tma_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  step examples build-gpu/tile-examples --device gpu examples
  step tma_fuzz python3 tests/difftest/tma_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit 60 --out "$OUT/tma-fuzz"
  step attn_fuzz python3 tests/difftest/attn_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit 45 --out "$OUT/attn-fuzz"
  exit $status
fi
if [ "$what" = newbench ]; then
  : "${STEP_TIMEOUT:=150}"
  # what the new forms are worth, beside the defaults in the same process; and the
  # GEMM's cold compile through libtileRT (issue 8's 150 ms), split by the runtime
  step gemm_cold python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --sections cold --out "$OUT/gemm_cold.md"
  step gemm_new python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --quick --no-tune --sections bf16 \
    --shapes "4096,4096,4096;8192,8192,8192" --configs "128,256,64,8,4,1,1;256,256,64,8,4,1,1,2;256,128,64,8,4,1,1,2;128,128,64,4,4,1,1,1,1;256,128,64,4,4,1,1,2,1" --out "$OUT/gemm_new.md"
  gelu_cfgs="128,256,64,8,4;128,256,64,8,4,1,1;128,128,64,4,4,1,1,1,1;128,64,64,4,5,1,1,1,1;256,256,64,8,4,1,1,2"
  step gelu_new python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --quick --no-tune --sections gelu,fp8 \
    --configs "$gelu_cfgs" --out "$OUT/gelu_new.md"
  step gelu_nosink env TILE_SINK=0 TILE_CACHE_DIR="$(mktemp -d /tmp/tile-cache.XXXXXX)" python3 bench/gemm.py \
    --lib build-gpu/runtime/libtileRT.so --quick --no-tune --sections gelu,fp8 --configs "$gelu_cfgs" --out "$OUT/gelu_nosink.md"
  step attention_new python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --quick --no-bwd \
    --fwd-configs "128,64,8,3;tma+ws+rot:128,64,8,3;tma+ws:128,64,8,3;tma+ws+cl:256,64,8,3" --out "$OUT/attention_new.md"
  # the graph compiler's attention kernel (its exponent now the example's), 2 and 3 stages
  step graph_attention_new python3 bench/graph_attention.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so \
    --configs "128,64,8,2;128,64,8,3" --out "$OUT/graph_attention_new.md"
  exit $status
fi
if [ "$what" = measure ]; then
  # what the fixes of 2026-12-05 (second session: ptxas as the assembler, exp2 ftz,
  # descriptors, ping-pong in flight, cluster releases, tree reductions) are worth:
  # correctness first, then attention, the GEMMs, the do_bench gap, the driver's
  # assembler for comparison, the differential tester, and the profiles (about 9 min)
  : "${STEP_TIMEOUT:=170}"
  step examples build-gpu/tile-examples --device gpu examples
  step attention python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --quick \
    --fwd-configs 'tma+ws:128,64,8,3;tma+ws+rot:128,64,8,3;tma+ws:128,128,8,2;tma+ws+rot:128,128,8,2' \
    --bwd-configs 'tma:32,64,4/64,64,4;tma:64,128,8/128,64,8;tma+ov:64,128,8/128,64,8;tma+ov:64,64,4/64,64,4' \
    --out "$OUT/attention.md"
  step gemm python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --quick --no-tune --sections bf16,gelu,fp8,cold \
    --configs "128,256,64,8,4,1,1;256,128,64,8,4,1,1,2;128,128,64,4,4,1,1,1,1;256,128,64,4,4,1,1,2,1;128,256,64,8,4" \
    --fp8-configs "128,256,128,8,4;128,256,128,8,4,1,1" --out "$OUT/gemm.md"
  step gemm_timing env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 bench/gemm_timing.py
  step attn_driver env TILE_ASSEMBLER=driver TILE_CACHE_DIR="$(mktemp -d /tmp/tile-cache.XXXXXX)" python3 bench/attention.py \
    --lib build-gpu/runtime/libtileRT.so --quick --no-bwd --fwd-configs 'tma+ws:128,64,8,3' --out "$OUT/attn_driver.md"
  step difftest env DIFFTEST_SEED=1 bash scripts/difftest.sh "${DIFFTEST_SECONDS:-60}"
  step profile env OUT="$OUT/profile" bash scripts/gpu-profile.sh attn_ws attn_rot gemm_pp gemm_cl cudnn
  exit $status
fi
if [ "$what" = measure2 ]; then
  # the second call of measure's session (2026-12-05, third): the graph compiler's
  # attention on TMA rings with a producer warpgroup, the block it runs in, and the
  # backward with its dots issued together (overlap = 1); the fuzzers that cover them
  : "${STEP_TIMEOUT:=150}"
  step graph_attention python3 bench/graph_attention.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so \
    --configs "128,64,8,3,1;128,64,8,2,0;128,128,8,2,1" --out "$OUT/graph_attention.md"
  step graph_block python3 bench/graph_block.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so --quick \
    --out "$OUT/graph_block.md"
  step attn_fuzz python3 tests/difftest/attn_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit 60 --out "$OUT/attn-fuzz"
  step graph_fuzz python3 tests/difftest/graph_fuzz.py build-gpu/tilec --device gpu --time-limit 60 --out "$OUT/graph-fuzz"
  # the K index and the ping-pong group through shfl (codegen/cg_control.c, cg_module.c)
  step tma_fuzz python3 tests/difftest/tma_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit 60 --out "$OUT/tma-fuzz"
  step tma env TMA_NEW_ONLY=1 TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_tma_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  step graph_lit python3 tests/gpu/lit_on_gpu.py build-gpu/tilec --only graph
  exit $status
fi
if [ "$what" = measure3 ]; then
  # after the fifth session of 2026-12-05 (new defaults: attn_fwd_tma ws + overlap at
  # BN 128, the backward _tma kernels at (64, 128) / (128, 64) on 8 warps, GELU's
  # ping-pong, fp8 with ws + persistent): the candidates beside the defaults (LPT order
  # for causal heads, persistent forwards, larger backward blocks), every GEMM shape of
  # the issue (8192^3 and the 7B shapes, which --quick leaves out), and the graphs
  # (about 9 minutes)
  : "${STEP_TIMEOUT:=170}"
  step attention python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --quick \
    --fwd-configs 'tma+ws+rot:128,128,8,2;tma+ws+rot:128,128,8,3;tma+ws+rot+lpt:128,128,8,2;tma+ws+rot+pers:128,128,8,2;tma+ws+rot+pers+lpt:128,128,8,2;tma+ws+rot+pers:128,64,8,3' \
    --bwd-configs 'tma:64,128,8/128,64,8;tma+pers:64,128,8/128,64,8;tma+lpt:64,128,8/128,64,8;tma:128,128,8/128,128,8;tma:64,128,8/128,128,8' \
    --out "$OUT/attention.md"
  step gemm python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --quick --no-tune --sections bf16,fp8 \
    --shapes "8192,8192,8192;16384,4096,4096;16384,11008,4096;16384,12288,4096" \
    --configs "128,256,64,8,4,1,1;128,128,64,4,4,1,1,1,1" --out "$OUT/gemm.md"
  step graph_block python3 bench/graph_block.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so --quick \
    --kernels --out "$OUT/graph_block.md"
  step graph_ffn python3 bench/graph_ffn.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so --quick \
    --kernels --out "$OUT/graph_ffn.md"
  step graph_attention python3 bench/graph_attention.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so \
    --configs "128,64,8,3,1;128,128,8,2,1;128,128,8,2,1,1;128,64,8,3,1,1" --out "$OUT/graph_attention.md"
  exit $status
fi
if [ "$what" = step42 ]; then
  # the training step's kernels after a change (about 7 minutes): the graph GPU tests the
  # change touches (the LM head's steps, attention's backward, the split in Python), the
  # table at T 1024 (eager, torch.compile, each policy; tile's compile column cold), the
  # step's CUDA time per kernel, the table at T 4096
  : "${STEP_TIMEOUT:=200}"
  step linear_ce python3 tests/gpu/test_linear_ce_gpu.py
  step graph_attn_bwd python3 tests/gpu/test_graph_attention_bwd_gpu.py
  step python_split env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" PYTHONPATH="$root/python" \
    python3 tests/gpu/test_python_gpu.py -k Training
  # the table first, on a kernel cache of its own: its compile column is the cold compile
  step train_step env TILE_CACHE_DIR="$(mktemp -d)" python3 bench/graph_train_step.py \
    --lib build-gpu/runtime/libtileRT.so --tilec build-gpu/tilec --quick --out "$OUT/train_step.md" --csv "$OUT/train_step.csv"
  step step_profile python3 bench/graph_step_profile.py --lib build-gpu/runtime/libtileRT.so
  step train_step_4096 python3 bench/graph_train_step.py --lib build-gpu/runtime/libtileRT.so --tilec build-gpu/tilec \
    --quick --tokens 4096 --out "$OUT/train_step_4096.md" --csv "$OUT/train_step_4096.csv"
  exit $status
fi
if [ "$what" = issue42 ]; then
  # a Llama-style block's training step (examples/graphs/llama_block_train.tile) against
  # eager and torch.compile, each recomputation policy: time, kernels, peak memory, cold
  # compile (bench/graph_train_step.py; --quick: T 1024, no max-autotune row)
  : "${STEP_TIMEOUT:=500}"
  step train_step python3 bench/graph_train_step.py --lib build-gpu/runtime/libtileRT.so --tilec build-gpu/tilec --quick \
    --out "$OUT/train_step.md" --csv "$OUT/train_step.csv"
  exit $status
fi
if [ "$what" = issue40 ]; then
  # attention's forms for training (issue 40): GQA, windows, variable lengths, head dims
  # 64-256, bf16 and f16, through tile.ops.attention against PyTorch (float64, then
  # bf16), and a small GQA training loop beside SDPA's; then the attention fuzzer's forms
  : "${STEP_TIMEOUT:=240}"
  step attention_ops env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 tests/gpu/test_attention_ops_gpu.py -v
  step attn_fuzz python3 tests/difftest/attn_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit 90 --out "$OUT/attn-fuzz"
  exit $status
fi
if [ "$what" = fp8attn ]; then
  # issue 40's fp8 forward (examples/flash_attn_fwd_fp8.tile): its configs against
  # float64 from the same e4m3 values, then bench/attention.py --fp8 (d128 and d256,
  # full and causal, beside tile's bf16 forward; target 1.5x); about 4 minutes
  : "${STEP_TIMEOUT:=240}"
  step attn_fp8 env TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_attn_fp8_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  step attn_fp8_bench python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --fp8 ${BENCH_QUICK:+--quick} \
    --out "$OUT/attention_fp8.md"
  exit $status
fi
if [ "$what" = measure40 ]; then
  # issue 40's targets: the forms through tile.ops.attention against SDPA's backends
  # (d64, d256, GQA 32/8, variable lengths against padded and jagged), then the example
  # kernels' forward (FA3's schedule: ws + rot + pers + lpt) and backward against cuDNN
  : "${STEP_TIMEOUT:=280}"
  step attn_forms env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" PYTHONPATH="$root/python" \
    python3 bench/attention_forms.py ${BENCH_QUICK:+--quick} --out "$OUT/attn_forms.md"
  step attn_bench python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so ${BENCH_QUICK:+--quick} --out "$OUT/attention.md"
  exit $status
fi
if [ "$what" = issue41q ]; then
  # issue41 in about five minutes (a short device budget): GEMMs aligned and ragged, fp8,
  # then softmax and attention, then the GEMMs with the compiler's choices off
  step tp_gemm_fp8 timeout --signal=KILL 170 python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so --quick \
    --programs gemm,fp8 --out "$OUT/tp_gemm_fp8.md"
  step tp_softmax_attn timeout --signal=KILL 90 python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so --quick \
    --programs softmax,attention --out "$OUT/tp_softmax_attn.md"
  step tp_gemm_off env TILE_SCHEDULE=0 TILE_PTRBLOCK=0 TILE_CACHE_DIR="$(mktemp -d /tmp/tile-cache.XXXXXX)" \
    timeout --signal=KILL 60 python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so --quick \
    --programs gemm --out "$OUT/tp_gemm_off.md"
  exit $status
fi
if [ "$what" = check41 ]; then
  # correctness of issue 41's later passes in one call (about 8 minutes): the fp8
  # transpose through shared memory, the lit files' `tilec run`s (spin locks and the
  # memory model on the owner's fences), the differential tester, the TMA fuzzer with
  # pointer forms (wrapped rows too), the examples
  : "${STEP_TIMEOUT:=120}"
  step fp8_nmajor env TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_fp8_nmajor_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  step fp8 env TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_fp8_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  step lit_on_gpu python3 tests/gpu/lit_on_gpu.py build-gpu/tilec --out "$OUT/lit_on_gpu.txt"
  step difftest env DIFFTEST_SEED=1 bash scripts/difftest.sh 50
  step tma_fuzz python3 tests/difftest/tma_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit 30 --out "$OUT/tma-fuzz"
  step examples build-gpu/tile-examples --device gpu examples
  exit $status
fi
if [ "$what" = measure41 ]; then
  # issue 41's table in one call (about 8 minutes): every program of bench/triton_programs.py
  # (--quick), the GEMMs with ptrblock and the schedule off, and the profiles of the
  # memory-bound programs that trail (LayerNorm at 4096 columns)
  step triton_programs timeout --signal=KILL 330 python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so --quick \
    --out "$OUT/triton_programs.md"
  step triton_programs_off env TILE_SCHEDULE=0 TILE_PTRBLOCK=0 TILE_CACHE_DIR="$(mktemp -d /tmp/tile-cache.XXXXXX)" \
    timeout --signal=KILL 70 python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so --quick --programs gemm \
    --out "$OUT/triton_programs_off.md"
  step profile env OUT="$OUT/profile" timeout --signal=KILL 100 bash scripts/gpu-profile.sh lnbwd_tile lnbwd_triton lnfwd_tile lnfwd_triton
  (cd "$OUT" && tar czf profile.tgz profile && rm -rf profile)
  exit $status
fi
if [ "$what" = issue41 ]; then
  # fast without rewriting (issue 41): the same programs written as Triton's tutorials
  # and in tile's pointer form, one process each (bench/triton_programs.py), with the
  # compiler's choices (the schedule, pointer loads as block copies) and without them
  # (TILE_SCHEDULE=0, TILE_PTRBLOCK=0: their own cache), after the examples' check
  : "${STEP_TIMEOUT:=400}"
  step examples build-gpu/tile-examples --device gpu examples
  # TILE_LOG_RECOMPILES=1: each variant built, and any tensor map refused at launch (the
  # ragged GEMM's question: does its DIV8 variant run with TMA?)
  step triton_programs env TILE_LOG_RECOMPILES=1 python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so \
    --out "$OUT/triton_programs.md"
  step triton_programs_off env TILE_SCHEDULE=0 TILE_PTRBLOCK=0 TILE_CACHE_DIR="$(mktemp -d /tmp/tile-cache.XXXXXX)" \
    python3 bench/triton_programs.py --lib build-gpu/runtime/libtileRT.so --quick --programs gemm,attention,fp8 \
    --out "$OUT/triton_programs_off.md"
  exit $status
fi
if [ "$what" = compile ]; then
  : "${STEP_TIMEOUT:=150}"
  # libnvJitLink: the toolkit's, else the one PyTorch's wheels bring (nvidia/*/lib)
  if [ -z "${TILE_NVJITLINK:-}" ] && [ ! -e /usr/local/cuda/lib64/libnvJitLink.so.13 ]; then
    TILE_NVJITLINK=$(python3 -c "import glob, os, site; print(next(iter(sorted(glob.glob(os.path.join(p, 'nvidia', '**', 'libnvJitLink.so*'), recursive=True) for p in site.getsitepackages() if glob.glob(os.path.join(p, 'nvidia', '**', 'libnvJitLink.so*'), recursive=True))), [''])[-1])" 2>/dev/null)
    [ -n "$TILE_NVJITLINK" ] && export TILE_NVJITLINK && echo "libnvJitLink: $TILE_NVJITLINK"
  fi
  step jit_parallel env CUDA_CACHE_DISABLE=1 python3 bench/jit_parallel.py --tilec build-gpu/tilec --out "$OUT/jit_parallel.md"
  for asm in driver nvjitlink; do
    step "block_cold_$asm" env TILE_ASSEMBLER=$asm CUDA_CACHE_DISABLE=1 python3 bench/graph_block.py --tilec build-gpu/tilec \
      --lib build-gpu/runtime/libtileRT.so --quick --tile-only --kernels --out "$OUT/block_cold_$asm.md"
  done
  exit $status
fi
# `tests` is the whole GPU suite (over 10 minutes on the H200 of 2026-12-05: longer than
# one device call), so `tests1` (the runtime, the tuner, the tensor-core paths, the
# examples, Python and the graphs: under 8 minutes) and `tests2` (the checked examples,
# lit on the GPU, the bounds checks, the differential tester and the fuzzers, with
# shorter DIFFTEST_SECONDS and *_FUZZ_SECONDS defaults) split it in two calls. Each step
# prints its time. Give each call OUT=$OUT, so that the logs of a call cut short come back.
if [ "$what" = tests1 ] || [ "$what" = tests ] || [ "$what" = all ]; then
  step gpu_runtime build-gpu/test_gpu_runtime
  # max-autotune on matmul_bf16: every config's time, the winner against the default,
  # and its reuse by a second process without benchmarking (docs/TUNING.md).
  step tune bash tests/gpu/test_tune_gpu.sh build-gpu
  # tilec tune of examples/tune/matmul_bf16.json: winners, report, resume, reuse.
  step tilec_tune env TILEC_TUNE_REPORT_TO="$OUT/tilec_tune_report" bash tests/gpu/test_tilec_tune_gpu.sh build-gpu
  # wgmma (sm_90a): every descriptor form and swizzle at aligned and ragged shapes
  # against float64, and each kernel's PTX checked to use wgmma.
  step wgmma python3 tests/gpu/test_wgmma_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  # TMA (sm_90a): block loads copied by the tensor-memory accelerator, every swizzle,
  # zero-filled edges, the cp.async variant for strides TMA cannot take, and the
  # fall-back at launch for a stride the class admits but a tensor map refuses.
  step tma env TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_tma_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  # fp8 (f8e4m3) GEMMs on wgmma k32 fed by TMA, per-row and per-tensor scales, against
  # float64 and torch._scaled_mm; the NN form (B [K, N]) on wgmma through a transpose in
  # shared memory, and with TILE_FP8_TRANSPOSE=0 on mma.sync through f16.
  step fp8 env TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_fp8_gpu.py "$root/build-gpu/runtime/libtileRT.so"
  step fp8_nn_fallback env TILE_FP8_TRANSPOSE=0 TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_fp8_gpu.py \
    "$root/build-gpu/runtime/libtileRT.so"
  # f8 B [K, N] and A [K, M] through the shared-memory transpose: configs of each swizzle,
  # TMA and cp.async rings, the pointer form, against float64 and torch._scaled_mm.
  step fp8_nmajor env TILEC="$root/build-gpu/tilec" python3 tests/gpu/test_fp8_nmajor_gpu.py \
    "$root/build-gpu/runtime/libtileRT.so"
  step examples build-gpu/tile-examples --device gpu examples
  # The Python package: CUDA tensors, the current stream, torch.compile (docs/PYTHON.md).
  step python_gpu env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 tests/gpu/test_python_gpu.py -v
  # examples/graphs/ through the tensor-graph API against PyTorch (f64 references).
  step graph_examples env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 tests/gpu/test_graph_examples_gpu.py
  # the LM head fused with its cross-entropy, in chunks (@linear_cross_entropy)
  step linear_ce env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 tests/gpu/test_linear_ce_gpu.py
fi
if [ "$what" = tests2 ] || [ "$what" = tests ] || [ "$what" = all ]; then
  if [ "$what" = tests2 ]; then
    : "${DIFFTEST_SECONDS:=60}" "${DIFFTEST_CHECKED_SECONDS:=30}"
    : "${TMA_FUZZ_SECONDS:=30}" "${ATTN_FUZZ_SECONDS:=30}" "${GRAPH_FUZZ_SECONDS:=30}"
  fi
  # The checked variants (TILE_DEBUG=bounds) of every example compute the same.
  step examples_checked build-gpu/tile-examples --device gpu --check-bounds examples
  step lit_on_gpu python3 tests/gpu/lit_on_gpu.py build-gpu/tilec --out "$OUT/lit_on_gpu.txt"
  # The checked mode (TILE_DEBUG=bounds, tilec run --check-bounds): a store far outside
  # its buffer is reported in the interpreter's words without a fault, and the process
  # keeps working (docs/RUNTIME.md).
  step bounds_gpu python3 tests/gpu/test_bounds_gpu.py build-gpu/tilec build-gpu/runtime/libtileRT.so
  # The regressions, then DIFFTEST_SECONDS (default 270) of random programs from seed
  # 1 (one log; reduced failures in $OUT/difftest, at most 3 files, and printed in the
  # log too).
  step difftest env DIFFTEST_SEED=1 bash scripts/difftest.sh "${DIFFTEST_SECONDS:-270}"
  # The same generator with the GPU running the checked variants (TILE_DEBUG=bounds):
  # checked codegen against the interpreter; failures under $OUT/checked/difftest.
  step difftest_checked env TILE_DEBUG=bounds DIFFTEST_SEED=1 OUT="$OUT/checked" bash scripts/difftest.sh "${DIFFTEST_CHECKED_SECONDS:-60}"
  # Random graphs on the GPU: op by op in the interpreter against their lowered kernels
  # on the GPU (tests/difftest/graph_fuzz.py; failures kept in $OUT/graph-fuzz).
  # block-load K loops (TMA rings) on the GPU against the interpreter, bit for bit
  step tma_fuzz python3 tests/difftest/tma_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit "${TMA_FUZZ_SECONDS:-60}" --out "$OUT/tma-fuzz"
  # attention-shaped loops (two row-wise dots, wgmma on sm_90a; half of them rotated,
  # overlap = true) on the GPU, bit for bit
  step attn_fuzz python3 tests/difftest/attn_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit "${ATTN_FUZZ_SECONDS:-60}" --out "$OUT/attn-fuzz"
  step graph_fuzz python3 tests/difftest/graph_fuzz.py build-gpu/tilec --device gpu --seeds 1..100000 --time-limit "${GRAPH_FUZZ_SECONDS:-60}" --out "$OUT/graph-fuzz"
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  step launch_overhead build-gpu/launch_overhead
  step graph_replay build-gpu/graph_replay
  # The same from Python: tile.CudaGraph against launches one by one, tile kernels in a
  # torch.cuda.CUDAGraph, and PyTorch's own small op eagerly and as a CUDA graph.
  step graph_replay_py env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 bench/graph_replay.py --out "$OUT/graph_replay_py.md"
  # One launch's host cost from Python: tile's k(...) against Triton's and torch.add.
  step python_launch env TILE_LIB="$root/build-gpu/runtime/libtileRT.so" python3 bench/python_launch.py --out "$OUT/python_launch.md"
  step bench python3 bench/bench.py --lib build-gpu/runtime/libtileRT.so --out "$OUT/bench.md"
  quick=; [ "${BENCH_QUICK:-0}" = 1 ] && quick=--quick
  step gemm python3 bench/gemm.py --lib build-gpu/runtime/libtileRT.so --out "$OUT/gemm.md" $quick
  step attention python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --out "$OUT/attention.md" $quick
  # What the ping-pong and the resident operands are worth: the same forms without them
  # (docs/CODEGEN.md section 9; the switches change the IR, so the cache keys differ).
  step attention_ablation env TILE_PINGPONG=0 TILE_RESIDENT_A=0 python3 bench/attention.py --lib build-gpu/runtime/libtileRT.so --no-bwd --fwd-configs 'tma+ws+rot:128,64,8,3;tma+ws+rot:128,128,8,2' --out "$OUT/attention_ablation.md"
  # The transformer block as a tile graph against eager and torch.compile (issue 10).
  step graph_block python3 bench/graph_block.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so --kernels --out "$OUT/graph_block.md" $quick
  # The FFN of LANGUAGE.md section 7 as a graph against eager and torch.compile.
  step graph_ffn python3 bench/graph_ffn.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so --kernels --out "$OUT/graph_ffn.md" $quick
  # Its attention kernel alone over configs, against flash_attn_fwd.tile and SDPA.
  step graph_attention python3 bench/graph_attention.py --tilec build-gpu/tilec --lib build-gpu/runtime/libtileRT.so --out "$OUT/graph_attention.md"
fi
exit $status
