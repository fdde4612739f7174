#!/bin/sh
# daemon/core/ is pure logic (daemon/core/README.md): it fails this check when
# a file there includes Asio, Beast, SQLite, threads, files or a project
# header from outside daemon/core/ and common/, or reads a clock. common/
# (Status, Result) is held to the same rules.
#
#   check_core_purity.sh DIR...  checks the .h/.cpp files under DIR; exit 1
#                                and one "file:line: rule: text" per violation
#   check_core_purity.sh --self-test
#                                shows that each rule catches its violation
#                                and that a clean file passes
set -u

# Includes core code may not use (extended regular expressions).
banned_includes='^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]((boost/)?(asio|beast)([./][^>"]*)?|sqlite3[^>"]*|thread|mutex|shared_mutex|condition_variable|future|fstream|filesystem|pthread[.]h)[>"]'
# Project headers ("..."): only daemon/core/ and common/ ones.
quoted_include='^[[:space:]]*#[[:space:]]*include[[:space:]]*"'
core_include='^[[:space:]]*#[[:space:]]*include[[:space:]]*"(daemon/core|common)/'
# Clock reads: now() of any std::chrono clock, time(), clock_gettime(), gettimeofday().
clock_reads='(_clock::now[[:space:]]*[(]|(^|[^A-Za-z0-9_.>])time[[:space:]]*[(]|clock_gettime[[:space:]]*[(]|gettimeofday[[:space:]]*[(])'

check() {
  for dir in "$@"; do
    [ -d "$dir" ] || { echo "check_core_purity: no directory $dir" >&2; return 2; }
  done
  files=$(find "$@" -type f \( -name '*.h' -o -name '*.cpp' \) | sort)
  [ -n "$files" ] || { echo "check_core_purity: no sources under $dir" >&2; return 2; }
  bad=0
  for f in $files; do
    # Line comments are dropped so that prose ("the time (ms) ...") passes.
    out=$(sed 's@//.*$@@' "$f" | awk -v f="$f" \
      -v inc="$banned_includes" -v quoted="$quoted_include" -v core="$core_include" -v clk="$clock_reads" '
      $0 ~ inc                     { print f ":" NR ": banned include: " $0 }
      $0 ~ quoted && $0 !~ core    { print f ":" NR ": include from outside daemon/core/ and common/: " $0 }
      $0 ~ clk                     { print f ":" NR ": clock read: " $0 }')
    if [ -n "$out" ]; then
      echo "$out"
      bad=1
    fi
  done
  if [ $bad -ne 0 ]; then
    echo "daemon/core/ must stay pure: see daemon/core/README.md" >&2
    return 1
  fi
  echo "daemon/core/ is pure: $(echo "$files" | wc -l) files checked"
  return 0
}

self_test() {
  tmp=$(mktemp -d) || return 2
  trap 'rm -rf "$tmp"' EXIT
  failed=0
  # Each violation alone in a tree beside a clean file must fail the check.
  while IFS='|' read -r name line; do
    mkdir -p "$tmp/$name"
    printf '#include "daemon/core/lease/types.h"\nint f(int now) { return now; }\n' >"$tmp/$name/clean.h"
    printf '%s\n' "$line" >"$tmp/$name/bad.cpp"
    if check "$tmp/$name" >"$tmp/$name.out" 2>&1; then
      echo "self-test: '$line' was not caught"
      failed=1
    elif ! grep -q 'bad.cpp:1:' "$tmp/$name.out"; then
      echo "self-test: '$line' failed without naming bad.cpp:1"
      failed=1
    fi
  done <<'EOF'
asio|#include <boost/asio/io_context.hpp>
asio_all|#include <boost/asio.hpp>
beast|#include <boost/beast/http.hpp>
sqlite|#include <sqlite3.h>
thread|#include <thread>
mutex|#include <mutex>
fstream|#include <fstream>
filesystem|#include <filesystem>
spaced|#  include  <thread>
services|#include "daemon/services/lease_service.h"
drivers|#include "drivers/serial_port.h"
commonish|#include "common_extra/x.h"
steady|auto t = std::chrono::steady_clock::now();
system|auto t = std::chrono::system_clock::now();
time|long t = time(nullptr);
std_time|long t = std::time(nullptr);
gettime|clock_gettime(CLOCK_MONOTONIC, &ts);
gettimeofday|gettimeofday(&tv, nullptr);
EOF
  # Clean code and prose pass.
  mkdir -p "$tmp/clean"
  cat >"$tmp/clean/ok.h" <<'EOF'
#include <chrono>
#include <string>
#include "daemon/core/clock.h"
#include "common/status.h"
// Takes the time (ms) as an argument; never calls time() or steady_clock::now().
int64_t expiry(int64_t now, int64_t ttl) { return now + ttl; }
std::chrono::steady_clock::time_point at;
int runtime(int x);
int y = lease.time(3) + lease->time(4);
EOF
  if ! check "$tmp/clean" >"$tmp/clean.out" 2>&1; then
    echo "self-test: clean code was refused:"
    cat "$tmp/clean.out"
    failed=1
  fi
  if [ $failed -eq 0 ]; then echo "self-test: every rule catches its violation; clean code passes"; fi
  return $failed
}

case "${1:-}" in
  --self-test) self_test ;;
  "") echo "usage: $0 DIR | --self-test" >&2; exit 2 ;;
  *) check "$@" ;;
esac
