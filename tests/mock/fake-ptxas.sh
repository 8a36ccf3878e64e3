#!/bin/sh
# A stand-in for the toolkit's ptxas in the runtime's tests (TILE_PTXAS), for the mock
# driver: `--version` prints a CUDA ${FAKE_PTXAS_RELEASE:-13.0} banner; `-arch=X IN -o
# OUT` writes the mock's cubin (MOCKCUBIN + the PTX + NUL) to OUT and appends "X" to
# $FAKE_PTXAS_LOG; a PTX containing MOCK_SYNTAX_ERROR fails as ptxas does.
if [ "$1" = --version ]; then
  echo "ptxas: NVIDIA (R) Ptx optimizing assembler"
  echo "Cuda compilation tools, release ${FAKE_PTXAS_RELEASE:-13.0}, V${FAKE_PTXAS_RELEASE:-13.0}.0"
  exit 0
fi
arch=${1#-arch=} in=$2 out=$4
if grep -q MOCK_SYNTAX_ERROR "$in"; then
  echo "ptxas $in, line 3; error   : Unknown symbol 'MOCK_SYNTAX_ERROR'" >&2
  echo "ptxas fatal   : Ptx assembly aborted due to errors" >&2
  exit 255
fi
{ printf 'MOCKCUBIN\n'; cat "$in"; printf '\000'; } > "$out"   # NUL-ended, as the mock's own
[ -n "$FAKE_PTXAS_LOG" ] && echo "$arch" >> "$FAKE_PTXAS_LOG"
exit 0
