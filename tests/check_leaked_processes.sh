#!/bin/sh
# scripts/leaked-processes.py, as .ci/run uses it at the end of each phase:
# it names every process that mentions the run's prefix (working directory,
# environment or arguments), kills them with --kill, and leaves processes
# of another prefix (another run on the same machine) alone.
#   check_leaked_processes.sh PATH/TO/leaked-processes.py
set -u
script=${1:?usage: check_leaked_processes.sh LEAKED_PROCESSES_PY}
prefix=$(mktemp -d "${TMPDIR:-/tmp}/leak-run-XXXXXX")
other=$(mktemp -d "${TMPDIR:-/tmp}/leak-other-XXXXXX")
pids=""
cleanup() {
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  rm -rf "$prefix" "$other"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Given a run that left nothing, nothing is found.
"$script" "$prefix" >/dev/null || fail "an empty run was said to leak"

# Given processes under the run's prefix by working directory, environment
# and arguments, and one under another run's,
touch "$prefix/log"
(cd "$prefix" && exec sleep 300) &
by_cwd=$!
LEAK_CHECK_MARK="$prefix/x" sleep 301 &
by_env=$!
tail -f "$prefix/log" >/dev/null &
by_args=$!
(cd "$other" && exec sleep 303) &
elsewhere=$!
pids="$by_cwd $by_env $by_args $elsewhere"
found=""
for _ in $(seq 100); do
  found=$("$script" "$prefix")
  [ "$(printf '%s\n' "$found" | grep -c '^pid ')" -ge 3 ] && break
  sleep 0.05
done
# the check fails and names each of the run's, and not the other run's,
"$script" "$prefix" >/dev/null && fail "a leak was not reported"
for pid in $by_cwd $by_env $by_args; do
  printf '%s\n' "$found" | grep -q "^pid $pid: " || fail "pid $pid not named in: $found"
done
printf '%s\n' "$found" | grep -q "^pid $elsewhere: " && fail "another run's process named: $found"
printf '%s\n' "$found" | grep -q "tail -f $prefix/log" || fail "no command line in: $found"
# and --kill ends them, leaving the other run's running.
"$script" "$prefix" --kill >/dev/null
for _ in $(seq 100); do
  "$script" "$prefix" >/dev/null && break
  sleep 0.05
done
"$script" "$prefix" >/dev/null || fail "still running after --kill: $("$script" "$prefix")"
kill -0 "$elsewhere" 2>/dev/null || fail "another run's process was killed"
echo "ok"
