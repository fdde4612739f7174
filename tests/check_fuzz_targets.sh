#!/bin/sh
# Every libFuzzer target that tests/fuzz/CMakeLists.txt builds is run by
# `make fuzz` (scripts/run-fuzz.sh's list) and documented in docs/testing.md:
# a target missing from either is named and fails the check.
#   check_fuzz_targets.sh SOURCE_DIR
src=${1:?usage: check_fuzz_targets.sh SOURCE_DIR}
targets=$(sed -n 's/^hwfarm_fuzz_target(\([a-z_0-9]*\).*/\1/p' "$src/tests/fuzz/CMakeLists.txt")
[ -n "$targets" ] || { echo "no hwfarm_fuzz_target in tests/fuzz/CMakeLists.txt" >&2; exit 1; }
failed=0
for t in $targets; do
  grep -q "^  \"$t:" "$src/scripts/run-fuzz.sh" ||
    { echo "fuzz target $t is not run by scripts/run-fuzz.sh" >&2; failed=1; }
  grep -q "^| \`fuzz_$t\` |" "$src/docs/testing.md" ||
    { echo "fuzz target $t is not in docs/testing.md's table" >&2; failed=1; }
done
exit $failed
