#!/usr/bin/env bash
# `make demo`: runs hwfarmd on the built-in simulated fleet in the foreground,
# shows what it serves, then leases a simulated board, flashes the test
# firmware, powers it on and streams its console. Ctrl-C stops hwfarmd
# (gracefully, via SIGINT).
#
# DEMO_ONESHOT=1 stops the daemon after the walkthrough (used by ctest).
set -euo pipefail
build=${1:-build}
hwfarmd="$build/daemon/hwfarmd"
hwfarmctl="$build/daemon/hwfarmctl"
url=http://127.0.0.1:7420

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

say "hwfarmd on the built-in simulated fleet (config/examples/sim-fleet.toml)"
echo "state in $(pwd)/.hwfarm-state; logs below"
"$hwfarmd" &
daemon=$!
trap 'kill -INT $daemon 2>/dev/null || true; wait $daemon' INT TERM

# Ready when the daemon answering on $url is ours (another hwfarmd may hold the port).
for _ in $(seq 1 100); do
  kill -0 $daemon 2>/dev/null || { wait $daemon; exit 1; }
  pid=$("$hwfarmctl" --url "$url" --json status 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])' 2>/dev/null || true)
  [ "$pid" = "$daemon" ] && break
  sleep 0.1
done
[ "${pid:-}" = "$daemon" ] || { echo "demo: hwfarmd did not start on $url" >&2; kill $daemon 2>/dev/null; exit 1; }

say "hwfarmctl status"
"$hwfarmctl" --url "$url" status
say "hwfarmctl boards"
"$hwfarmctl" --url "$url" boards
say "the same over HTTP: curl $url/v1/boards"
command -v curl >/dev/null && curl -s "$url/v1/boards" | head -c 400 && echo " ..."

firmware="$build/firmware/hwfarm-pass.elf"
if [ -f "$firmware" ]; then
  say "lease a simulated board: hwfarmctl lease acquire --type mps2-an385 -q"
  lease=$("$hwfarmctl" --url "$url" lease acquire --type mps2-an385 --ttl 300 -q)
  board=$("$hwfarmctl" --url "$url" --json lease show "$lease" | python3 -c 'import json,sys; print(json.load(sys.stdin)["boards"][0]["name"])')
  echo "lease $lease holds $board"
  say "flash it: hwfarmctl flash $lease $board $firmware"
  "$hwfarmctl" --url "$url" flash "$lease" "$board" "$firmware"
  say "power it on and show its console: hwfarmctl power ... on; hwfarmctl console ..."
  "$hwfarmctl" --url "$url" power "$lease" "$board" on
  "$hwfarmctl" --url "$url" console "$lease" "$board"
  say "run it against the simulator reference: hwfarmctl run --lease $lease --out .hwfarm-demo-run $firmware"
  echo "(flash, power-cycle, capture until HWFARM END, the same image on a sandboxed QEMU reference, compare)"
  rm -rf .hwfarm-demo-run
  "$hwfarmctl" --url "$url" run --lease "$lease" --out .hwfarm-demo-run "$firmware"
  say "what it compared (.hwfarm-demo-run/golden_results__*.json) and the JUnit report"
  for g in .hwfarm-demo-run/golden_results__*.json; do echo "$g:"; head -c 600 "$g"; echo; done
  grep -o '<testsuite [^>]*>' .hwfarm-demo-run/junit.xml
  say "release the lease: hwfarmctl lease release $lease"
  "$hwfarmctl" --url "$url" lease release "$lease" >/dev/null && echo "released; console kept in .hwfarm-state/consoles/$lease/"
else
  echo "(no test firmware at $firmware: install gcc-arm-none-eabi to see a board run)"
fi

if [ "${DEMO_ONESHOT:-0}" = 1 ]; then
  kill -TERM $daemon
  wait $daemon
  exit $?
fi
say "hwfarmd is listening on $url — the dashboard: $url/ — try: $hwfarmctl boards   (Ctrl-C to stop)"
wait $daemon
