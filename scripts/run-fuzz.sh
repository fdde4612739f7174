#!/usr/bin/env bash
# Runs every libFuzzer target of a HWFARM_FUZZ build for SECONDS each.
#   scripts/run-fuzz.sh BUILD_DIR SECONDS
# FUZZ_TARGETS="name ..." (e.g. result_protocol) runs only those.
# Each target starts from its seed corpus (tests/fuzz/corpus/<name>, read
# only) plus what earlier runs found (BUILD_DIR/fuzz-corpus/<name>, where new
# inputs go). A crash, leak, timeout or sanitizer report leaves its input in
# BUILD_DIR/fuzz-artifacts/ and makes this script fail after all targets ran.
set -uo pipefail
build=${1:?usage: run-fuzz.sh BUILD_DIR SECONDS}
seconds=${2:?usage: run-fuzz.sh BUILD_DIR SECONDS}
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$build" && pwd)

# name:max_len:dictionary (the dictionary may be empty). Inputs stay small
# (max_len) so a run explores structure rather than size; the size limits
# have their own tests. Every hwfarm_fuzz_target of tests/fuzz/CMakeLists.txt
# is here (a test checks it).
targets=(
  "http_request:4096:http_request.dict"
  "json_codec:2048:json_codec.dict"
  "fleet_config:4096:toml.dict"
  "tokens:2048:toml.dict"
  "credentials:1024:toml.dict"
  "result_protocol:4096:result_protocol.dict"
  "should_run:2048:should_run.dict"
  "sla_state:4096:"
  "npy:4096:"
  "run_manifest:4096:toml.dict"
  "run_record:4096:json_codec.dict"
  "harness_results:8192:harness_results.dict"
  "results_tar:16384:results_tar.dict"
  "launch_request:4096:"
)

export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1:print_stacktrace=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
# The HTTP target makes a state directory (SQLite) per input: in memory.
[ -z "${TMPDIR:-}" ] && [ -w /dev/shm ] && export TMPDIR=/dev/shm
failed=()
mkdir -p "$build/fuzz-artifacts"
for t in "${targets[@]}"; do
  IFS=: read -r name max_len dict <<<"$t"
  if [ -n "${FUZZ_TARGETS:-}" ] && [[ " $FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
  exe="$build/tests/fuzz/fuzz_$name"
  work="$build/fuzz-corpus/$name"
  mkdir -p "$work"
  echo "fuzz: $name for ${seconds}s (max_len $max_len)" >&2
  dict_flag=()
  [ -n "$dict" ] && dict_flag=(-dict="$src/tests/fuzz/$dict")
  start=$(date +%s)
  # -timeout: one input taking longer than 10 s is a finding (a hang).
  if "$exe" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
      "${dict_flag[@]}" -artifact_prefix="$build/fuzz-artifacts/$name-" -print_final_stats=1 \
      "$work" "$src/tests/fuzz/corpus/$name" >"$build/fuzz-$name.log" 2>&1; then
    echo "fuzz: $name ok in $(( $(date +%s) - start ))s: $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/fuzz-$name.log" | grep -o '[0-9]*$') runs" >&2
  else
    echo "fuzz: $name FAILED (log: $build/fuzz-$name.log); last lines:" >&2
    tail -n 40 "$build/fuzz-$name.log" >&2
    failed+=("$name")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}; inputs in $build/fuzz-artifacts/ (add each to tests/fuzz/corpus/<name>/ as crash-<what>, with the fix)" >&2
  exit 1
fi
