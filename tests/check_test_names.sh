#!/bin/sh
# CTest splits a test's name at ';': a Catch test case (or section) whose
# name holds one is registered as two tests that both fail. Names each
# such test case and fails.
#   check_test_names.sh SOURCE_DIR
src=${1:?usage: check_test_names.sh SOURCE_DIR}
found=$(grep -n 'TEST_CASE("[^"]*;' "$src"/tests/*.cpp)
[ -z "$found" ] && exit 0
echo "test names with ';' (CTest splits them; write ', and' instead):" >&2
echo "$found" >&2
exit 1
