#!/bin/sh
# `cmake --install` puts tilec and tile-opt in PREFIX/bin next to the libraries, and the
# installed tilec finds libtileCG.so through its run path ($ORIGIN/../lib): it compiles
# a kernel read from standard input to PTX with nothing else on the library path. The
# tuner's worker goes to PREFIX/libexec/tile.
# Usage: install.sh BUILD_DIR PREFIX
set -eu
build=$1 prefix=$2
rm -rf "$prefix"
cmake --install "$build" --prefix "$prefix" > /dev/null
test -x "$prefix/bin/tilec" && test -x "$prefix/bin/tile-opt"
# the tuner's worker, where the installed libtileRT looks for it (docs/TUNING.md)
test -x "$prefix/libexec/tile/tile-tune-worker"
"$prefix/libexec/tile/tile-tune-worker" 2>&1 | grep -q 'usage: tile-tune-worker'
env -u LD_LIBRARY_PATH "$prefix/bin/tilec" --version
echo 'kernel k(x: *f32) { store(x, 1.0); }' | env -u LD_LIBRARY_PATH -u TILE_CODEGEN_LIBRARY "$prefix/bin/tilec" - --emit=ptx | grep -q '^.visible .entry k('
"$prefix/bin/tile-opt" --help > /dev/null
rm -rf "$prefix"
