#!/bin/sh
# Runs the example suite against hwfarm's fake board (tests/fakes/fake_board.cpp,
# built as build/tests/fake_board): a pty that prints fake_board_image.txt,
# the pass firmware's console, when it is powered on. No hwfarmd, no lease.
#
#   run_on_fake_board.sh FAKE_BOARD SCENARIO JUNIT_XML [PYTEST ARGS...]
#
#   pass     the suite passes (4 passed or xfailed, 1 skipped)
#   fail     HWFARM_EXAMPLE_FAIL=1: test_ramp_output fails (a <failure>)
#   missing  the console path does not exist: every test that uses the board
#            errors at setup (<error> "... SerialException: board console ... vanished ...")
#   unplug   the board prints half its run and vanishes 0.2 s after its power
#            cycle: test_ramp_output fails with SerialException and errors at
#            teardown, the tests after it error at setup
#
# Exits with pytest's exit code.
set -eu
fake=$(realpath "$1") scenario=$2 xml=$3
shift 3
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
link=$dir/ttyFAKE0 sock=$dir/fake.sock

"$fake" serve --link "$link" --control "$sock" >"$dir/serve.out" 2>&1 &
serve=$!
trap 'kill $serve 2>/dev/null; wait $serve 2>/dev/null; rm -rf "$dir"' EXIT
i=0
until [ -S "$sock" ] && [ -e "$link" ]; do
  i=$((i + 1)); [ $i -lt 100 ] || { echo "fake board did not start" >&2; exit 1; }
  sleep 0.05
done
"$fake" flash "$sock" "$here/fake_board_image.txt" >/dev/null

port=$link
case $scenario in
  pass) ;;
  fail) export HWFARM_EXAMPLE_FAIL=1 ;;
  missing) port=$dir/ttyFAKE-none ;;
  unplug) "$fake" mode "$sock" unplug >/dev/null ;;
  *) echo "unknown scenario $scenario" >&2; exit 2 ;;
esac

# The environment `hwfarmctl lease run` gives, for one board, plus how to
# reset the fake board: after the fixture opened its console.
export HWFARM_LEASE_ID=example HWFARM_BOARD_COUNT=1 HWFARM_BOARD_0_NAME=fake-1 HWFARM_BOARD_0_TYPE=fake
export HWFARM_BOARD_0_SERIAL_PORT=$port HWFARM_BOARD_0_USB_SERIAL=FAKE0001
export HWFARM_EXAMPLE_RESET_CMD="'$fake' power '$sock' cycle"
export PYTHONDONTWRITEBYTECODE=1 # leave no __pycache__ in the source tree
set +e
/usr/bin/python3 -m pytest -p no:cacheprovider --junitxml "$xml" "$here" "$@"
