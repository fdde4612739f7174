#!/usr/bin/env bash
# Runs ctest in BUILD_DIR with the given arguments, then fails if ctest
# failed or if a sanitizer wrote any report into BUILD_DIR/sanitizer/ (the
# log_path of ASAN_OPTIONS / UBSAN_OPTIONS / TSAN_OPTIONS set by the
# Makefile), printing every report: a daemon a test killed, or one whose
# stderr went to a temp dir, still fails the run.
#   scripts/sanitizer-reports.sh BUILD_DIR [ctest arguments...]
set -uo pipefail
build=${1:?usage: sanitizer-reports.sh BUILD_DIR [ctest args...]}
shift
rm -rf "$build/sanitizer" && mkdir -p "$build/sanitizer"
(cd "$build" && ctest --output-on-failure "$@")
rc=$?
shopt -s nullglob
reports=("$build"/sanitizer/*)
for r in "${reports[@]}"; do
  echo "==== $r" >&2
  cat "$r" >&2
done
if [ ${#reports[@]} -gt 0 ]; then
  echo "sanitizer: ${#reports[@]} report(s) in $build/sanitizer" >&2
  exit 1
fi
exit $rc
