#!/usr/bin/env bash
# Lists the processes a test run left running: every process (not a zombie)
# whose command line, working directory or environment mentions PREFIX, the
# run's own TMPDIR (every test process has it in its environment, and every
# temp dir of a test is under it; QEMU, whose environment its sandbox
# clears, has its temp dir on its command line). Processes of other runs on
# the same machine never mention it. With --kill, SIGKILLs what it listed.
# Exits 1 when it found any, 0 otherwise.
#   scripts/leaked-processes.sh PREFIX [--kill]
set -uo pipefail
prefix=${1:?usage: leaked-processes.sh PREFIX [--kill]}
kill_them=${2:-}
found=()
for dir in /proc/[0-9]*; do
  pid=${dir#/proc/}
  [ "$pid" = $$ ] && continue
  stat=$(cat "$dir/stat" 2>/dev/null) || continue
  state=${stat##*) }
  state=${state%% *}
  case $state in Z | X | '') continue ;; esac
  cmd=$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null)
  case $cmd in *leaked-processes.sh*) continue ;; esac # this script's subshells
  cwd=$(readlink "$dir/cwd" 2>/dev/null)
  if [[ $cmd == *"$prefix"* || $cwd == "$prefix"* ]] || grep -qaF -- "$prefix" "$dir/environ" 2>/dev/null; then
    found+=("$pid")
    echo "pid $pid: ${cmd:0:300}"
  fi
done
[ ${#found[@]} -eq 0 ] && exit 0
[ "$kill_them" = --kill ] && kill -KILL "${found[@]}" 2>/dev/null
exit 1
