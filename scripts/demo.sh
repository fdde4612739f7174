#!/usr/bin/env bash
# `make demo`: runs hwfarmd on the built-in simulated fleet in the foreground,
# shows what it serves, then leases a simulated board, flashes the test
# firmware, powers it on, streams its console, runs it against the simulator
# reference and releases the lease. Ctrl-C stops hwfarmd (gracefully, via
# SIGINT) and the demo with it.
#
#   demo.sh [--build] [BUILD_DIR]
#
# --build (what `make demo` passes) first makes what the demo runs:
# installs the demo's packages (scripts/install-deps.sh demo), configures
# BUILD_DIR when it is not configured yet (as DEMO_BUILD_TYPE, Quick: -O1
# without debug information, and without the tests, which need the test
# packages; `make test` turns them on in the same directory) and builds
# hwfarmd, hwfarmctl and the test firmware only, with the compiler's output
# in BUILD_DIR/demo-build.log (shown if the build fails). JOBS,
# DEMO_BUILD_TYPE and CMAKE_FLAGS come from the environment (the Makefile's
# variables).
#
# hwfarmd's state and the demo's run go to ./.hwfarm-state/ in the working
# directory (the simulated fleet's state_dir; the run's artifacts in
# .hwfarm-state/demo-run/), which git ignores. Colours only on a terminal (and without NO_COLOR).
# DEMO_ONESHOT=1 stops the daemon after the walkthrough (used by ctest).
set -euo pipefail
do_build=0
if [ "${1:-}" = --build ]; then
  do_build=1
  shift
fi
build=${1:-build}
src=$(cd "$(dirname "$0")/.." && pwd)
hwfarmd="$build/daemon/hwfarmd"
hwfarmctl="$build/daemon/hwfarmctl"
url=http://127.0.0.1:7420
state=.hwfarm-state
out=$state/demo-run

if [ -t 1 ] && [ -z "${NO_COLOR:-}" ]; then
  bold=$'\033[1m' plain=$'\033[0m'
else
  bold='' plain=''
fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
note() { printf 'demo: %s\n' "$*"; }

# Ctrl-C while building: the build stops where it is (the next `make demo`
# goes on from there); the demo ends without an error of its own.
stopped() {
  printf '\n'
  note "stopped"
  exit 0
}

# Reads the build's output: everything into the log; on a terminal, one
# line that shows how far the build is.
progress() {
  local log=$1 line shown=0
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    if [ -t 1 ] && [[ $line =~ ^\[\ *([0-9]+)%\]\ (Building|Linking) ]]; then
      printf '\r  %3d%%' "${BASH_REMATCH[1]}"
      shown=1
    fi
  done
  [ $shown = 0 ] || printf '\r      \r'
}

build_demo() {
  trap stopped INT TERM
  local jobs=${JOBS:-2} log=$build/demo-build.log
  note "checking packages and building hwfarmd, hwfarmctl and the test firmware in $build/"
  "$src/scripts/install-deps.sh" demo
  if [ ! -f "$build/CMakeCache.txt" ]; then
    # shellcheck disable=SC2086 # CMAKE_FLAGS holds several flags
    cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE="${DEMO_BUILD_TYPE:-Quick}" -DHWFARM_BUILD_TESTS=OFF \
      ${CMAKE_FLAGS:-} >/dev/null
  fi
  mkdir -p "$build"
  : >"$log"
  local start=$SECONDS
  if ! cmake --build "$build" -j"$jobs" --target hwfarmd hwfarmctl hwfarm_firmware 2>&1 | progress "$log"; then
    tail -n 40 "$log" >&2
    note "the build failed; its whole output is in $log" >&2
    exit 1
  fi
  if grep -q '^\[ *[0-9]*%\] Building' "$log"; then note "built in $((SECONDS - start)) s"; fi
  trap - INT TERM
}

[ $do_build = 0 ] || build_demo

# The daemon's pid in `hwfarmctl --json status` (empty when none answers).
answering_pid() {
  "$hwfarmctl" --url "$url" --json status 2>/dev/null | sed -n 's/.*"pid":\([0-9]*\).*/\1/p' || true
}

say "hwfarmd on the built-in simulated fleet (config/examples/sim-fleet.toml)"
echo "state in $(pwd)/$state; logs below"
# In a session of its own: Ctrl-C reaches this script, which stops hwfarmd
# with one SIGINT (a second one would stop it at once, ungracefully).
setsid "$hwfarmd" &
daemon=$!
stop_daemon() {
  kill -INT $daemon 2>/dev/null || true
  local rc=0
  wait $daemon || rc=$?
  exit $rc
}
trap stop_daemon INT TERM
# A step that fails ends the script (set -e): hwfarmd, in its own session,
# would run on unseen; it is stopped, and the demo says so.
on_exit() {
  local rc=$?
  if kill -0 $daemon 2>/dev/null; then
    kill -TERM $daemon 2>/dev/null || true
    wait $daemon 2>/dev/null || true
    [ $rc -eq 0 ] || note "a step failed (exit $rc): hwfarmd stopped" >&2
  fi
  exit $rc
}
trap on_exit EXIT

# Ready when the daemon answering on $url is ours (another hwfarmd may hold the port).
pid=
for _ in $(seq 1 100); do
  kill -0 $daemon 2>/dev/null || { wait $daemon; exit 1; }
  pid=$(answering_pid)
  [ "$pid" = "$daemon" ] && break
  sleep 0.1
done
[ "$pid" = "$daemon" ] || { echo "demo: hwfarmd did not start on $url" >&2; kill $daemon 2>/dev/null; exit 1; }

say "hwfarmctl status"
"$hwfarmctl" --url "$url" status
say "hwfarmctl boards"
"$hwfarmctl" --url "$url" boards
if command -v curl >/dev/null; then
  say "the same over HTTP: curl $url/v1/boards"
  curl -s "$url/v1/boards" | head -c 400
  echo " ..."
fi

firmware="$build/firmware/hwfarm-pass.elf"
if [ -f "$firmware" ]; then
  say "lease a simulated board: hwfarmctl lease acquire --type mps2-an385 -q"
  lease=$("$hwfarmctl" --url "$url" lease acquire --type mps2-an385 --ttl 300 -q)
  board=$("$hwfarmctl" --url "$url" --json lease show "$lease" | sed -n 's/.*"boards":\[{"name":"\([^"]*\)".*/\1/p')
  echo "lease $lease holds $board"
  say "flash it: hwfarmctl flash $lease $board $firmware"
  "$hwfarmctl" --url "$url" flash "$lease" "$board" "$firmware"
  say "power it on and show its console: hwfarmctl power ... on; hwfarmctl console ..."
  "$hwfarmctl" --url "$url" power "$lease" "$board" on
  "$hwfarmctl" --url "$url" console "$lease" "$board"
  say "run it against the simulator reference: hwfarmctl run --lease $lease --out $out $firmware"
  echo "(flash, power-cycle, capture until HWFARM END, the same image on a sandboxed QEMU reference, compare)"
  rm -rf "$out"
  "$hwfarmctl" --url "$url" run --lease "$lease" --out "$out" "$firmware"
  say "what it compared ($out/golden_results__*.json) and the JUnit report"
  for g in "$out"/golden_results__*.json; do
    echo "$g:"
    head -c 600 "$g"
    echo
  done
  grep -o '<testsuite [^>]*>' "$out/junit.xml"
  say "release the lease: hwfarmctl lease release $lease"
  "$hwfarmctl" --url "$url" lease release "$lease" >/dev/null && echo "released; console kept in $state/consoles/$lease/"
else
  echo "(no test firmware at $firmware: install gcc-arm-none-eabi to see a board run)"
fi

if [ "${DEMO_ONESHOT:-0}" = 1 ]; then
  trap - INT TERM
  kill -TERM $daemon
  wait $daemon
  exit $?
fi
say "hwfarmd is listening on $url — the dashboard: $url/ — try: $hwfarmctl boards   (Ctrl-C to stop)"
wait $daemon
