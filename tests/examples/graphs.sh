#!/usr/bin/env bash
# The graph examples (examples/graphs/) on the CPU: each graph runs op by op and through
# its fusion plan (tilec run --compare-fused: the same bits, and the plan's kernels and
# buffers checked), and its result is compared with tests/examples/graph_ref.c, which
# computes it in plain C. Usage: graphs.sh TILEC GRAPH_REF EXAMPLES_DIR
set -euo pipefail
tilec=$1 ref=$2 ex=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# run FILE GRAPH REF_NAME NRESULTS [extra --arg options]: one graph against a reference.
run() {
  local file=$1 graph=$2 name=$3 nres=$4
  shift 4
  local d=$tmp/$graph prints=()
  mkdir -p "$d"
  read -r -a args < <("$ref" gen "$name" "$d")
  for ((i = 0; i < nres; i++)); do prints+=(--print "ret$i"); done
  "$tilec" run "$ex/$file" --compare-fused --max-ops 4000000000 --graph "$graph" "${args[@]}" "$@" "${prints[@]}" > "$d/out.txt"
  "$ref" cmp "$name" "$d" "$d/out.txt"
}
run ffn.tile ffn ffn 1
run block.tile block block 1
run block.tile block_op block_op 1
run residual_layernorm.tile residual_layernorm residual_layernorm 2
run conv_bn_relu.tile conv_bn_relu conv_bn_relu 1
run adamw.tile adamw adamw 3
# Dropout on: no reference, but the fused run must give the op-by-op run's bits.
d=$tmp/dropout && mkdir -p "$d"
read -r -a args < <("$ref" gen block "$d")
args=("${args[@]/#pdrop=0.0/pdrop=0.25}")
"$tilec" run "$ex/block.tile" --compare-fused --max-ops 4000000000 --graph block "${args[@]}" --print ret0 > "$d/out.txt"
echo "graphs.sh: block with dropout 0.25: the fused run agrees"
# The comparison itself: one value off by 1% of the mean fails it.
awk 'NR == 7 { $1 = $1 + 0.5 } { print }' "$tmp/adamw/out.txt" > "$tmp/adamw/off.txt"
if "$ref" cmp adamw "$tmp/adamw" "$tmp/adamw/off.txt" 2> "$tmp/err.txt"; then
  echo "graphs.sh: a wrong result passed the comparison" >&2
  exit 1
fi
grep -q "value 6 is" "$tmp/err.txt"
echo "graphs.sh: a wrong value is caught"
