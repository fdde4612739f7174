#!/usr/bin/env bash
# `make demo`: runs hwfarmd on the built-in simulated fleet in the foreground
# and shows what it serves. Ctrl-C stops it (gracefully, via SIGINT).
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

for _ in $(seq 1 100); do
  "$hwfarmctl" --url "$url" status >/dev/null 2>&1 && break
  kill -0 $daemon 2>/dev/null || { wait $daemon; exit 1; }
  sleep 0.1
done

say "hwfarmctl status"
"$hwfarmctl" --url "$url" status
say "hwfarmctl boards"
"$hwfarmctl" --url "$url" boards
say "the same over HTTP: curl $url/v1/boards"
command -v curl >/dev/null && curl -s "$url/v1/boards" | head -c 400 && echo " ..."

if [ "${DEMO_ONESHOT:-0}" = 1 ]; then
  kill -TERM $daemon
  wait $daemon
  exit $?
fi
say "hwfarmd is listening on $url — try: $hwfarmctl boards   (Ctrl-C to stop)"
wait $daemon
