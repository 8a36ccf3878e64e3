#!/usr/bin/env bash
# The remote cache tier (docs/CACHE.md, "The remote tier") against a real redis-server
# on 127.0.0.1, started here on a free port. Each remote-client is one process of a
# fleet, with its own local cache directory, on the mock driver:
#  1. A builds vector_add and writes both entries to the remote;
#  2. B, with an empty local cache, loads it from the remote without compiling, and
#     keeps it locally (C, on B's directory, finds it on disk);
#  3. corrupted remote entries (a flipped byte, an entry under another key, garbage)
#     are refused, rebuilt and written back;
#  4. a tuning result travels: built by one process, fetched and reused by others,
#     through the cache calls and through the real tuner (max-autotune, then default);
#  5. TILE_REMOTE_CACHE unset: no warning, libhiredis never loaded;
#  6. a bad URL, an unreachable port, a missing libhiredis: one warning, launches work;
#     a server with a password: AUTH from the URL, a wrong one warns (masked);
#  7. a slow server (DEBUG SLEEP) and one that never answers: one warning after the
#     timeout, launches work;
#  8. the server killed, under a process connected to it and before others start: one
#     warning, lookups, builds and launches work.
# Usage: run.sh REMOTE_CLIENT VECTOR_ADD.tile SCALE_TUNED.tile (TILE_CUDA_LIBRARY,
# TILE_CODEGEN_LIBRARY and TILE_TUNE_WORKER set by ctest). Exit 77 without redis-server.
set -euo pipefail
CLIENT=$1
SRC=$2
TUNED=$3
if ! command -v redis-server > /dev/null || ! command -v redis-cli > /dev/null; then
  echo "redis-server or redis-cli not installed (scripts/install-deps.sh installs them): skipped"
  exit 77
fi
WORK=$(mktemp -d /tmp/tile-remote-XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
passed=0
ok() { passed=$((passed + 1)); echo "ok $passed - $*"; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --enable-debug-command local --daemonize no > "$WORK/redis.log" 2>&1 &
REDIS=$!
PIDS+=("$REDIS")
cli() { redis-cli -h 127.0.0.1 -p "$PORT" "$@"; }
for _ in $(seq 100); do
  [ "$(cli ping 2> /dev/null)" = PONG ] && break
  sleep 0.05
done
[ "$(cli ping)" = PONG ] || fail "redis-server did not start: $(cat "$WORK/redis.log")"

export TILE_LOG_RECOMPILES=1
export TILE_REMOTE_CACHE=redis://127.0.0.1:$PORT
# Runs one process with its own cache directory; its stderr goes to $WORK/NAME.err.
run() {
  local name=$1
  shift
  TILE_CACHE_DIR=$WORK/$name timeout 60 "$@" 2> "$WORK/$name.err" > "$WORK/$name.out" \
    || fail "$name failed (status $?): $(cat "$WORK/$name.err")"
}
launch() { run "$1" "$CLIENT" launch "$SRC"; grep -q launched "$WORK/$1.out" || fail "$1 did not launch"; }
has() { grep -q "$2" "$WORK/$1.err" || fail "$1: no '$2' in: $(cat "$WORK/$1.err")"; }
hasnt() { ! grep -q "$2" "$WORK/$1.err" || fail "$1: unexpected '$2' in: $(cat "$WORK/$1.err")"; }
warnings() { grep -c "tile: warning: remote cache" "$WORK/$1.err" || true; }
one_warning() {
  [ "$(warnings "$1")" -eq 1 ] || fail "$1: expected one warning, got: $(cat "$WORK/$1.err")"
  has "$1" "$2"
  has "$1" "; continuing with the local cache only"
}

# 1. A builds and writes the remote
launch a
has a "compiled variant 1"
grep -q "remote hits 0 misses 2 puts 2 refused 0" "$WORK/a.out" || fail "a: $(cat "$WORK/a.out")"
[ "$(warnings a)" -eq 0 ] || fail "a: a warning: $(cat "$WORK/a.err")"
cubin=$(cli --raw keys 'tile:*.cubin')
ptx=$(cli --raw keys 'tile:*.ptx')
[ -n "$cubin" ] && [ -n "$ptx" ] || fail "the remote holds no entries: $(cli --raw keys '*')"
[ "$(cli --raw keys 'tile:*' | wc -l)" -eq 2 ] || fail "expected 2 remote entries: $(cli --raw keys '*')"
hex=${cubin#tile:}
hex=${hex%.cubin}
cmp <(cli --raw get "$cubin" | head -c -1) "$WORK/a/$hex.cubin" \
  || fail "the remote cubin is not the local entry's image"
ok "a build writes its PTX and cubin entries to the remote, as the local files hold them"

# 2. B, empty local cache: from the remote, no compile; then on disk
launch b
has b "loaded variant 1 from the remote cache"
hasnt b "compiled"
grep -q "remote hits 1 misses 0 puts 0 refused 0" "$WORK/b.out" || fail "b: $(cat "$WORK/b.out")"
[ -f "$WORK/b/$hex.cubin" ] || fail "b did not store the remote entry locally"
TILE_CACHE_DIR=$WORK/b "$CLIENT" launch "$SRC" 2> "$WORK/b2.err" > /dev/null || fail "b2 failed"
has b2 "loaded variant 1 from the disk cache"
ok "an empty local cache loads the variant from the remote without compiling, and keeps it"

# 3. corrupted remote entries are refused and rebuilt (then written back)
cli --raw get "$cubin" | head -c -1 > "$WORK/good.cubin"
python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[-1] ^= 1; sys.stdout.buffer.write(d)' \
  "$WORK/good.cubin" | cli -x set "$cubin" > /dev/null
launch c1
has c1 "entry $hex.cubin refused (checksum mismatch)"
has c1 "linked variant 1 from PTX in the remote cache"
cmp <(cli --raw get "$cubin" | head -c -1) "$WORK/good.cubin" || fail "the rebuilt cubin was not written back"
cli --raw get "$ptx" | head -c -1 | cli -x set "$cubin" > /dev/null   # the PTX image under the cubin's key
launch c2
has c2 "entry $hex.cubin refused (wrong format or kind)"
cli set "$cubin" garbage > /dev/null
cli set "$ptx" garbage > /dev/null
launch c3
has c3 "entry $hex.cubin refused (truncated header)"
has c3 "refused (truncated header); building it here"
has c3 "compiled variant 1"
[ "$(grep -c refused "$WORK/c3.err")" -eq 2 ] || fail "c3: expected 2 refused entries: $(cat "$WORK/c3.err")"
[ -f "$WORK/c3/$hex.cubin" ] || fail "c3 stored no local cubin"
launch c4
has c4 "loaded variant 1 from the remote cache"
ok "corrupted remote entries (a flipped byte, another kind's image, garbage) are refused, rebuilt and written back"

# 4. a tuning result travels
TKEY=0123456789abcdef0123456789abcdef
run t1 "$CLIENT" tune $TKEY "winner=3 times=1.0,2.0"
grep -qx "built winner=3 times=1.0,2.0" "$WORK/t1.out" || fail "t1: $(cat "$WORK/t1.out")"
run t2 "$CLIENT" tune-fetch $TKEY
grep -qx "remote winner=3 times=1.0,2.0" "$WORK/t2.out" || fail "t2: $(cat "$WORK/t2.out")"
run t2 "$CLIENT" tune-fetch $TKEY
grep -qx "local winner=3 times=1.0,2.0" "$WORK/t2.out" || fail "t2 again: $(cat "$WORK/t2.out")"
run t3 "$CLIENT" tune $TKEY "winner=9"
grep -qx "remote winner=3 times=1.0,2.0" "$WORK/t3.out" || fail "t3 tuned again: $(cat "$WORK/t3.out")"
run t4 "$CLIENT" tune-fetch fedcba9876543210fedcba9876543210
grep -qx "miss" "$WORK/t4.out" || fail "t4: $(cat "$WORK/t4.out")"
ok "a tuning result built by one process is fetched (default mode) and reused (max-autotune) by others"

# 4b. the same through the real tuner (on the mock's fake timings)
export MOCKCUDA_TIMES="BLOCK=256,warps=2:0.25"
run ta1 "$CLIENT" autotune max-autotune "$TUNED"
has ta1 "config BLOCK=256 warps=2 (tuned now"
[ "$(cli --raw keys 'tile:*.tune' | wc -l)" -eq 2 ] || fail "expected 2 remote tune entries: $(cli --raw keys 'tile:*.tune')"
run ta2 "$CLIENT" autotune default "$TUNED"
has ta2 "config BLOCK=256 warps=2 (from the remote cache"
run ta3 "$CLIENT" autotune max-autotune "$TUNED"
has ta3 "config BLOCK=256 warps=2 (from the remote cache"
hasnt ta3 "tuned now"
run ta3 "$CLIENT" autotune default "$TUNED"
has ta3 "config BLOCK=256 warps=2 (from the cache"
unset MOCKCUDA_TIMES
ok "a winner tuned by one process is used by another in the default mode, and not tuned again in max-autotune"

# 5. unset: nothing remote, not even libhiredis loaded
(unset TILE_REMOTE_CACHE; TILE_HIREDIS_LIBRARY=/nonexistent/libhiredis.so launch u)
[ "$(warnings u)" -eq 0 ] || fail "u: a warning without TILE_REMOTE_CACHE: $(cat "$WORK/u.err")"
has u "compiled variant 1"
ok "without TILE_REMOTE_CACHE there is no remote tier and libhiredis is not loaded"

# 6. bad URLs, nothing listening, no libhiredis: one warning each, launches work
TILE_REMOTE_CACHE=http://127.0.0.1:$PORT launch e1
one_warning e1 "remote cache http://127.0.0.1:$PORT: not a URL"
TILE_REMOTE_CACHE=redis://127.0.0.1:99999 launch e2
one_warning e2 "not a URL"
DEAD=$(free_port)
TILE_REMOTE_CACHE=redis://127.0.0.1:$DEAD launch e3
one_warning e3 "remote cache redis://127.0.0.1:$DEAD: cannot connect: Connection refused"
has e3 "compiled variant 1"
TILE_HIREDIS_LIBRARY=/nonexistent/libhiredis.so launch e4
one_warning e4 "cannot load /nonexistent/libhiredis.so"
TILE_REMOTE_CACHE=redis://127.0.0.1:$PORT/1 launch e5
[ "$(warnings e5)" -eq 0 ] || fail "e5: $(cat "$WORK/e5.err")"
has e5 "compiled variant 1"
[ "$(cli -n 1 --raw keys 'tile:*' | wc -l)" -eq 2 ] || fail "redis://HOST:PORT/1 did not write database 1"
ok "a bad URL, a closed port, a missing libhiredis: one warning and the local cache; /DB selects a database"

# 6b. a server with a password: AUTH from the URL, the password never printed
APORT=$(free_port)
redis-server --port "$APORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
  --requirepass s3cret --daemonize no > "$WORK/redis-auth.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
  [ "$(redis-cli -p "$APORT" -a s3cret --no-auth-warning ping 2> /dev/null)" = PONG ] && break
  sleep 0.05
done
TILE_REMOTE_CACHE=redis://:s3cret@127.0.0.1:$APORT launch p1
[ "$(warnings p1)" -eq 0 ] || fail "p1: $(cat "$WORK/p1.err")"
[ "$(redis-cli -p "$APORT" -a s3cret --no-auth-warning --raw keys 'tile:*' | wc -l)" -eq 2 ] \
  || fail "p1 did not write the password-protected server"
TILE_REMOTE_CACHE=redis://default:s3cret@127.0.0.1:$APORT launch p2
has p2 "loaded variant 1 from the remote cache"
TILE_REMOTE_CACHE=redis://:badpw@127.0.0.1:$APORT launch p3
one_warning p3 "remote cache redis://:\*\*\*@127.0.0.1:$APORT: AUTH: the server answered: WRONGPASS"
hasnt p3 badpw
TILE_REMOTE_CACHE=redis://127.0.0.1:$APORT launch p4
one_warning p4 "GET: the server answered: NOAUTH"
ok "a password in the URL authenticates (AUTH, also with a user); a wrong or missing one warns once, and is never printed"

# 7. slow servers: one warning after the timeout
cli debug sleep 3 > /dev/null &
SLEEPER=$!
PIDS+=("$SLEEPER")
sleep 0.2
start=$(date +%s%N)
TILE_REMOTE_CACHE_TIMEOUT_MS=300 launch s1
ms=$((($(date +%s%N) - start) / 1000000))
one_warning s1 "GET: no answer within 300 ms (TILE_REMOTE_CACHE_TIMEOUT_MS)"
has s1 "compiled variant 1"
start=$(date +%s%N)
(unset TILE_REMOTE_CACHE; launch s0)   # the same build without a remote: the baseline
base=$((($(date +%s%N) - start) / 1000000))
[ "$ms" -lt $((base + 2000)) ] || fail "s1 took ${ms} ms on a sleeping server (${base} ms without a remote)"
wait "$SLEEPER" || true
python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
time.sleep(30)' > "$WORK/mute.port" &
MUTE=$!
PIDS+=("$MUTE")
for _ in $(seq 100); do [ -s "$WORK/mute.port" ] && break; sleep 0.05; done
MPORT=$(cat "$WORK/mute.port")
TILE_REMOTE_CACHE=redis://127.0.0.1:$MPORT TILE_REMOTE_CACHE_TIMEOUT_MS=200 launch s2
one_warning s2 "no answer within 200 ms"
ok "a sleeping server and one that never answers: one warning after the timeout, launches work (${ms} ms, ${base} ms without a remote)"

# 8. the server killed: while a process holds a connection, and before others start
K1=11111111111111111111111111111111
K2=22222222222222222222222222222222
TILE_CACHE_DIR=$WORK/k0 timeout 60 "$CLIENT" tune-after "$WORK/gate" $K1 one $K2 two \
  > "$WORK/k0.out" 2> "$WORK/k0.err" &
K0=$!
for _ in $(seq 200); do [ -s "$WORK/k0.out" ] && break; sleep 0.05; done
grep -qx "built one" "$WORK/k0.out" || fail "k0's first lookup: $(cat "$WORK/k0.out" "$WORK/k0.err")"
kill "$REDIS"
wait "$REDIS" 2> /dev/null || true
touch "$WORK/gate"
wait "$K0" || fail "k0 failed after the server died: $(cat "$WORK/k0.err")"
grep -qx "built two" "$WORK/k0.out" || fail "k0's second lookup: $(cat "$WORK/k0.out")"
one_warning k0 "GET: the server closed the connection"
launch k1
one_warning k1 "cannot connect: Connection refused"
has k1 "compiled variant 1"
launch k2   # on a directory of its own: the local tier still serves it next time
TILE_CACHE_DIR=$WORK/k2 "$CLIENT" launch "$SRC" 2> "$WORK/k3.err" > /dev/null || fail "k3 failed"
has k3 "loaded variant 1 from the disk cache"
ok "with the server killed: one warning, builds and the local cache work"
echo "$passed passed, 0 failed"
