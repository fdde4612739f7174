#!/usr/bin/env bash
# Installs the Debian 12 packages hwfarm needs, by group, then checks that
# every tool and Python module of the group really runs:
#
#   install-deps.sh demo   what `make demo` builds and runs: the compiler and
#                          libraries of hwfarmd and hwfarmctl, QEMU, the test
#                          firmware's cross compiler, bubblewrap
#   install-deps.sh test   the demo's group and what `make test` and CI run:
#                          Catch2, umockdev, Python with numpy, pykwalify,
#                          botocore and pytest, Tcl, xmllint, groovy and a JRE, promtool,
#                          clang-14 with libFuzzer, Chromium, node with s3rver
#                          and puppeteer-core
#   install-deps.sh        the same as `test` (also `all`)
#
# Idempotent: prints nothing and installs nothing when every package is
# present. Runs `apt-get update` once, non-interactively, only when something
# is missing. The test group also installs the test helpers that come from
# npm, each pinned by its package-lock.json: the S3-compatible server the
# upload tests run against (s3rver, into tests/s3/node_modules) and the
# browser driver of the dashboard tests (puppeteer-core, into
# tests/dashboard/node_modules). A tool or module that does not run afterwards
# fails the script, naming it and its package.
#
# To add a package: put it into its group's list below with a comment saying
# what needs it, and what the tests run from it into the group's checks.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

group=${1:-all}
case $group in
  demo | test | all) ;;
  *) echo "usage: install-deps.sh [demo|test|all]" >&2; exit 2 ;;
esac

demo_packages=(
  # build
  build-essential cmake pkg-config
  # libraries (Boost 1.81 split packages: headers for Asio/Beast, JSON, and
  # filesystem for Boost.Process v1)
  libboost1.81-dev libboost-json1.81-dev libboost-filesystem1.81-dev
  libusb-1.0-0-dev libudev-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libsqlite3-dev libsystemd-dev libssl-dev
  # uploads to an S3 bucket: libcurl (TLS, proxies, SigV4)
  libcurl4-openssl-dev
  # simulated boards: QEMU, confined by bubblewrap (docs/drivers.md#sandbox),
  # and the test firmware they run
  qemu-system-arm bubblewrap gcc-arm-none-eabi libnewlib-arm-none-eabi
  # the demo's `curl /v1/boards`
  curl
  # the dashboard's charts: Chart.js, which hwfarmd serves from
  # /usr/share/javascript
  libjs-chart.js
)
# Each check: "PACKAGE|COMMAND"; the command must exit 0.
demo_checks=(
  "cmake|cmake --version"
  "build-essential|c++ --version"
  "pkg-config|pkg-config --version"
  "qemu-system-arm|qemu-system-arm --version"
  "bubblewrap|bwrap --version"
  "gcc-arm-none-eabi|arm-none-eabi-gcc --version"
  "curl|curl --version"
  "libjs-chart.js|test -f /usr/share/javascript/chart.js/chart.min.js || test -f /usr/share/javascript/chart.js/chart.js"
)

test_packages=(
  # the Catch2 tests
  catch2
  # tests: processes, systemd's unit checks (systemd-analyze, sysusers,
  # tmpfiles), prlimit and setsid; `make demo` in a scratch git work tree
  systemd procps util-linux git
  # tests: USB faked at the kernel interface (umockdev-run, umockdev-wrapper)
  umockdev libumockdev-dev
  # tests: OpenOCD's Tcl quoting is evaluated by a real Tcl interpreter
  tcl
  # tests: junit.xml is validated with xmllint
  libxml2-utils
  # tests: Python (always Debian's /usr/bin/python3): the comparator and
  # .npy files against numpy; twister hardware maps against twister's schema
  # with pykwalify (which needs ruamel.yaml, only a recommendation of its
  # package, and dateutil); SigV4 against botocore's signer
  python3 python3-numpy python3-yaml python3-pykwalify python3-ruamel.yaml python3-dateutil
  python3-botocore
  # tests: a harness's results read as pytest writes them (--junitxml)
  python3-pytest
  # tests: the man pages are rendered by groff to check them
  groff-base
  # tests: the Jenkins shared library (jenkins/) runs in a Groovy harness
  groovy default-jre-headless
  # tests: the example alert rules (docs/prometheus/) and /metrics are
  # checked by promtool
  prometheus
  # fuzzing (make fuzz): clang with libFuzzer
  clang-14 libfuzzer-14-dev
  # uploads to an S3 bucket: libcurl (TLS, proxies, SigV4); tests: the
  # signing cross-checked with botocore's signer
  libcurl4-openssl-dev python3-botocore
  # tests: certificates for the TLS tests and benchmark (openssl req)
  openssl
  # the Debian package (make deb): dpkg-buildpackage with debhelper, the
  # source copied with rsync; checked by lintian; tests/packaging boots a
  # Debian 12 made by debootstrap
  dpkg-dev debhelper fakeroot rsync lintian debootstrap
  # tests: the dashboard in a real headless browser
  chromium
)
test_checks=(
  "systemd|systemd-analyze --version"
  "procps|ps -p $$"
  "util-linux|prlimit --version"
  "util-linux|setsid --version"
  "git|git --version"
  "umockdev|umockdev-run --version"
  "umockdev|command -v umockdev-wrapper"
  "tcl|echo 'puts ok' | tclsh"
  "libxml2-utils|xmllint --version"
  "groff-base|groff --version"
  "python3|/usr/bin/python3 -c 'import json, sqlite3, zlib'"
  "python3-numpy|/usr/bin/python3 -c 'import numpy'"
  "python3-yaml|/usr/bin/python3 -c 'import yaml'"
  "python3-pykwalify python3-ruamel.yaml python3-dateutil|/usr/bin/python3 -c 'import pykwalify.core'"
  "python3-botocore|/usr/bin/python3 -c 'import botocore.auth, botocore.awsrequest, botocore.credentials'"
  "python3-pytest|/usr/bin/python3 -m pytest --version"
  "groovy default-jre-headless|groovy --version"
  "prometheus|promtool --version"
  "clang-14|clang++-14 --version"
  "nodejs|node --version"
  "s3rver (npm ci in tests/s3)|node '$repo/tests/s3/node_modules/s3rver/bin/s3rver.js' --version"
  "chromium|chromium --version"
  "openssl|openssl version"
  "dpkg-dev|dpkg-buildpackage --version"
  "debhelper|command -v dh_installsystemd"
  "fakeroot|fakeroot --version"
  "rsync|rsync --version"
  "lintian|lintian --version"
  "debootstrap|debootstrap --version"
  "util-linux|unshare --version"
  "util-linux|nsenter --version"
  "puppeteer-core (npm ci in tests/dashboard)|cd '$repo/tests/dashboard' && node -e 'require(\"puppeteer-core\")'"
)

packages=("${demo_packages[@]}")
checks=("${demo_checks[@]}")
if [ "$group" != demo ]; then
  packages+=("${test_packages[@]}")
  checks+=("${test_checks[@]}")
  # s3rver runs on node, installed with npm (Debian's, unless a node with
  # its npm is installed already)
  command -v npm >/dev/null || packages+=(nodejs npm)
fi

# An npm package as DIR's package-lock.json pins it (npm ci into
# DIR/node_modules), unless that version is there:
#   install_npm DIR PACKAGE VERSION
install_npm() {
  local dir=$repo/$1 installed=$repo/$1/node_modules/$2/package.json
  if [ -f "$installed" ] && grep -q "\"version\": \"$3\"" "$installed"; then return 0; fi
  echo "install-deps: installing $2 $3 into $1/node_modules (npm ci)" >&2
  local attempt
  for attempt in 1 2 3; do
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null && return 0
    echo "install-deps: 'npm ci' in $1 failed (attempt $attempt of 3)" >&2
    [ $attempt -lt 3 ] && sleep 10
  done
  return 1
}
install_npm_packages() {
  install_npm tests/s3 s3rver 3.7.1
  install_npm tests/dashboard puppeteer-core 24.43.1
}

# A mirror that fails for a moment (a fresh CI machine's first apt-get) is
# retried twice; each failure is reported.
retry() {
  local attempt
  for attempt in 1 2 3; do
    "$@" && return 0
    echo "install-deps: '$*' failed (attempt $attempt of 3)" >&2
    [ $attempt -lt 3 ] && sleep 10
  done
  return 1
}

# The packages of the list that are not installed (one dpkg-query for all).
missing_packages() {
  local -A installed=()
  local p
  while read -r p; do installed[$p]=1; done < <(
    dpkg-query -W -f='${Status} ${Package}\n' "$@" 2>/dev/null | awk '/^install ok installed / { print $4 }')
  for p in "$@"; do
    [ -n "${installed[$p]:-}" ] || echo "$p"
  done
}

mapfile -t missing < <(missing_packages "${packages[@]}")
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  # Another apt (unattended upgrades, say) is waited for, not an error.
  apt_opts=(-o DPkg::Lock::Timeout=600)
  retry "${sudo_cmd[@]}" apt-get "${apt_opts[@]}" update -qq
  retry "${sudo_cmd[@]}" apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "$group" = demo ] || install_npm_packages

# Everything the group's builds and tests run must run now: a missing piece
# fails here, by name, not in a test ten minutes later.
failed=0
for check in "${checks[@]}"; do
  package=${check%%|*}
  command=${check#*|}
  if ! output=$(bash -c "$command" 2>&1 </dev/null); then
    echo "install-deps: '$command' failed (package: $package): ${output##*$'\n'}" >&2
    failed=1
  fi
done
exit $failed
