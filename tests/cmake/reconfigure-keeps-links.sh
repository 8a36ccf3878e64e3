#!/bin/sh
# Re-running CMake on a built tree leaves the generated linker map of libtileCG.so
# untouched: it is a LINK_DEPENDS of libtileCG.so and tilec, so rewriting it (even with
# the same text) relinked both on every configure. Usage: reconfigure-keeps-links.sh <build dir>
set -eu
build=$1
map=$build/codegen/tileCG.map
[ -f "$map" ] || { echo "no $map (a build without the code generator)"; exit 77; }
before=$(stat -c %y "$map")
sleep 0.01
cmake "$build" >"$build/reconfigure-test.log" 2>&1 || { cat "$build/reconfigure-test.log"; exit 1; }
after=$(stat -c %y "$map")
if [ "$before" != "$after" ]; then
    echo "FAIL: reconfiguring rewrote $map ($before -> $after): libtileCG.so and tilec relink"
    exit 1
fi
echo "ok: $map kept its time ($after)"
