#!/usr/bin/env bash
# Installs the Debian 12 packages hwfarm needs to build, test and run its demo.
# Idempotent: prints nothing and touches nothing when every package is present.
# Runs `apt-get update` once, non-interactively, only when something is missing.
# Then installs the test helpers that come from npm, each pinned by its
# package-lock.json: the S3-compatible server the upload tests run against
# (s3rver, into tests/s3/node_modules) and the browser driver of the
# dashboard tests (puppeteer-core, into tests/dashboard/node_modules).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

packages=(
  # build
  build-essential cmake pkg-config
  # libraries (Boost 1.81 split packages: headers for Asio/Beast, JSON, and
  # filesystem for Boost.Process v1)
  libboost1.81-dev libboost-json1.81-dev libboost-filesystem1.81-dev
  libusb-1.0-0-dev libtomlplusplus-dev libspdlog-dev libfmt-dev
  libsqlite3-dev libsystemd-dev libssl-dev
  # tests: simulated boards (QEMU + test firmware), USB faked at the kernel
  # interface (umockdev)
  catch2 systemd procps util-linux python3 curl
  qemu-system-arm gcc-arm-none-eabi libnewlib-arm-none-eabi
  # run: simulated boards' QEMU is confined by bubblewrap (docs/drivers.md#sandbox)
  bubblewrap
  umockdev libumockdev-dev libudev-dev
  # tests: OpenOCD's Tcl quoting is evaluated by a real Tcl interpreter
  tcl
  # tests: junit.xml is validated with xmllint
  libxml2-utils
  # tests: twister hardware maps are validated with twister's schema (pykwalify)
  python3-pykwalify
  # tests: the Jenkins shared library (jenkins/) runs in a Groovy harness
  groovy default-jre-headless
  # tests and bench: the comparator is checked and timed against numpy
  python3-numpy
  # tests: the example alert rules (docs/prometheus/) are checked by promtool
  prometheus
  # fuzzing (make fuzz): clang with libFuzzer
  clang-14 libfuzzer-14-dev
  # uploads to an S3 bucket: libcurl (TLS, proxies, SigV4); tests: the
  # signing cross-checked with botocore's signer
  libcurl4-openssl-dev python3-botocore
  # the dashboard's charts: Chart.js, which hwfarmd serves from
  # /usr/share/javascript; tests: the dashboard in a real headless browser
  libjs-chart.js chromium
)
# tests: s3rver runs on node, installed with npm (Debian's, unless a node
# with its npm is installed already)
command -v npm >/dev/null || packages+=(nodejs npm)

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

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  install_npm_packages
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
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
retry "${sudo_cmd[@]}" apt-get update -qq
retry "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_npm_packages
