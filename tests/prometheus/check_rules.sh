#!/bin/sh
# The example Prometheus alert rules (docs/prometheus/*.rules.yml): their
# syntax (`promtool check rules`) and their unit tests (`promtool test rules`
# on tests/prometheus/*.test.yml). promtool is the Debian package prometheus
# (scripts/install-deps.sh); without it this fails, saying so.
#
#   check_rules.sh SOURCE_DIR
set -eu
root=${1:?usage: check_rules.sh SOURCE_DIR}
if ! command -v promtool >/dev/null 2>&1; then
  echo "check_rules: promtool not found: install the Debian package prometheus (make deps)" >&2
  exit 1
fi
promtool check rules "$root"/docs/prometheus/*.rules.yml
cd "$root/tests/prometheus"
promtool test rules ./*.test.yml
