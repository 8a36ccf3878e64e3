#!/usr/bin/env bash
# The generator writes the issue-13 shapes (docs/DIFFTEST.md "Programs"): among the
# programs of seeds 1..200 some must hold a rank-4 and a rank-5 tile, a 0-d tile
# (`full([], v, T)`, `zeros([], T)`) and `s[None]`; the programs themselves are run by
# difftest/cpu. Usage: forms-test.sh TILE_DIFFTEST
set -u
bin=$1
text=$(mktemp)
trap 'rm -f "$text"' EXIT
for s in $(seq 1 200); do "$bin" --print "$s" || { echo "forms-test: --print $s failed"; exit 1; }; done > "$text"
need() {   # need WHAT REGEX
    grep -qE "$2" "$text" || { echo "forms-test: no program of seeds 1..200 has $1 (/$2/)"; exit 1; }
}
need "a rank-4 tile" 'full\(\[[0-9]+(, [0-9]+){3}\]|\[(None|:)(, (None|:)){3}\]'
need "a rank-5 tile" 'full\(\[[0-9]+(, [0-9]+){4}\]|\[(None|:)(, (None|:)){4}\]'
need "full([], v, T)" 'full\(\[\], '
need "zeros([], T)" 'zeros\(\[\], '
need "s[None]" '\)\[None\]'
need "a block load at a program-dependent offset" 'load_block\(in_[a-z0-9]+, \[[0-9, ]+\], \[[0-9, ]+\], \[program_id\(0\) \+ '
echo "forms-test: ok"
