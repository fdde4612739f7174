#!/usr/bin/env bash
# Checks that a fresh Debian 12 machine runs `make demo` and `make test`
# with nothing installed beyond the base image, as a new user would, on a
# clean clone of this repository's HEAD (commit first: uncommitted changes
# are not in the clone). Run as root; takes about an hour on 2 cores. It is
# not part of .ci/run (docs/testing.md, "A fresh machine").
#
#   scripts/fresh-machine-check.sh [WORK_DIR]     (default: build/fresh-machine)
#
# WORK_DIR keeps Debian's minimal base system (debootstrap --variant=minbase
# bookworm, made once and kept as bookworm-minbase.tar), the machine's root
# (made again from it on each run), and a log per step. Each step runs in
# PID and mount namespaces of its own (nothing it starts outlives it,
# nothing it mounts leaks out), rooted in the machine's root with /proc,
# /sys, /dev, /run and /tmp. The root is entered with pivot_root, not
# chroot: the kernel refuses a chrooted process new user namespaces, and
# bubblewrap needs one to confine the simulated boards' QEMU.
#   1. apt-get install make (the README's prerequisite)
#   2. scripts/install-deps.sh demo
#   3. make demo (DEMO_ONESHOT=1: the walkthrough once), with only the demo
#      packages, then `git status` must be clean; the time to its first line
#   4. scripts/install-deps.sh test
#   5. make test
# Steps 3 and 5 run without network (a namespace with only loopback): the
# tests need none, and the demo's fixed port cannot meet another one on
# this machine. As in Debian's container images, services that packages
# install are not started in the machine (policy-rc.d).
#
# A network that inspects TLS needs its certificate authority on every
# machine behind it: the host's local authorities
# (/usr/local/share/ca-certificates) are copied in, where Debian's
# ca-certificates adds them to the system's list once installed, and a
# NODE_EXTRA_CA_CERTS the host sets is passed on to npm.
# Prints each step's result and time; exits 1 if any step failed.
set -uo pipefail
[ "$(id -u)" -eq 0 ] || { echo "fresh-machine-check: run as root" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mkdir -p "${1:-$repo/build/fresh-machine}" && cd "${1:-$repo/build/fresh-machine}" && pwd)
root=$work/root
base=$work/bookworm-minbase.tar
mirror=http://deb.debian.org/debian

say() { echo "fresh-machine-check: $*" >&2; }

# Debian's minimal base system, made once.
if [ ! -f "$base" ]; then
  command -v debootstrap >/dev/null ||
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null || exit 1
  say "debootstrap --variant=minbase bookworm (once; kept as $base)"
  rm -rf "$work/base"
  debootstrap --variant=minbase bookworm "$work/base" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 20 "$work/debootstrap.log" >&2; exit 1; }
  tar -C "$work/base" -cf "$base.tmp" . && mv "$base.tmp" "$base" && rm -rf "$work/base"
fi

# A fresh root from it, with a clean clone of HEAD.
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$base" || exit 1
cat >"$root/etc/apt/sources.list" <<EOF
deb $mirror bookworm main
deb $mirror bookworm-updates main
deb http://security.debian.org/debian-security bookworm-security main
EOF
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
network_env=()
[ -n "${NODE_EXTRA_CA_CERTS:-}" ] && network_env+=("NODE_EXTRA_CA_CERTS=$NODE_EXTRA_CA_CERTS")
commit=$(git -C "$repo" rev-parse HEAD)
git clone -q "$repo" "$root/root/hwfarm" && git -C "$root/root/hwfarm" checkout -q "$commit" || exit 1
say "checking $commit in $root"

# step NAME net|nonet COMMAND: COMMAND in the machine, from the clone, its
# output in WORK/NAME.log.
results=()
failed=0
step() {
  local name=$1 net=$2 command=$3 log=$work/$1.log
  local isolate=()
  [ "$net" = nonet ] && isolate=(--net)
  say "step $name: $command (log: $log)"
  local start=$SECONDS rc=0
  local env=(HOME=/root TERM=dumb LANG=C.UTF-8
             PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin)
  [ "$net" = net ] && env+=("${network_env[@]}")
  unshare --pid --fork --mount --propagation private "${isolate[@]}" bash -c '
    set -e
    root=$1 net=$2 command=$3
    shift 3
    [ "$net" = net ] || ip link set lo up
    # The root a mount point, to pivot into (bubblewrap pivots from it too).
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs tmpfs "$root/run"
    mkdir -p "$root/run/lock"
    mount -t tmpfs tmpfs "$root/tmp"
    cd "$root"
    mkdir -p .host
    pivot_root . .host
    umount -l /.host
    rmdir /.host
    # Not exec: this shell, PID 1 of the namespace, reaps the orphans.
    /usr/bin/env -i "$@" bash -c "cd /root/hwfarm && $command"
  ' step "$root" "$net" "$command" "${env[@]}" >"$log" 2>&1 </dev/null || rc=$?
  local took=$((SECONDS - start))
  local result=ok
  if [ $rc -ne 0 ]; then
    result="FAILED (exit $rc)"
    failed=1
    tail -n 30 "$log" | sed 's/^/  | /' >&2
  fi
  results+=("$(printf '%-14s %4d:%02d  %s' "$name" $((took / 60)) $((took % 60)) "$result")")
  say "step $name: $result in ${took}s"
  return $rc
}

step prerequisites net 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends make >/dev/null' &&
  step deps-demo net './scripts/install-deps.sh demo' &&
  step demo nonet 'DEMO_ONESHOT=1 make demo | while IFS= read -r line; do printf "%6d %s\n" $SECONDS "$line"; done; exit ${PIPESTATUS[0]}'
demo_rc=$?
if [ $demo_rc -eq 0 ]; then
  first=$(grep -m 1 '== hwfarmd on the built-in simulated fleet' "$work/demo.log" | awk '{ print $1 }')
  say "make demo: first demo line after ${first:-?} s (build included)"
  left=$(git -C "$root/root/hwfarm" status --porcelain --untracked-files=all)
  if [ -n "$left" ]; then
    say "make demo left files that git sees: $left"
    results+=("git status     FAILED: $left")
    failed=1
  fi
fi
step deps-test net './scripts/install-deps.sh test' && step test nonet 'make test'

say "step           m:ss   result"
printf 'fresh-machine-check: %s\n' "${results[@]}" >&2
exit $failed
