#!/usr/bin/env bash
# The Debian package installed under a real systemd (make test-deb; CI
# phase "deb"). As root:
#
#   tests/packaging/run.sh BUILD_DIR
#
# 1. Packages: the previous commit's package (cached by commit under
#    BUILD_DIR/packaging/previous/) and this tree's (make deb), built in the
#    same directory so the second build compiles only what changed; lintian
#    on this tree's, each warning left named in docs/operations.md.
# 2. Boots a Debian 12 userland with systemd as PID 1 (system.sh) and, in it:
#    installs the package with apt-get from the file (dependencies from the
#    archive); checks the user, directories, modes, conffile and that the
#    service is active through Type=notify and the simulator launcher's
#    socket listens; leases the QEMU board and runs the test firmware with
#    the installed hwfarmctl (QEMU started by hwfarm-launcher); reloads (a
#    change takes effect; a broken config leaves the old one running); kills
#    the main process with SIGKILL (Restart= brings it back with its leases)
#    and stops it with SIGSTOP (the watchdog restarts it); reads the
#    journal's priorities; systemd-analyze security <= 2.0 for hwfarmd and
#    the launcher, and their sandboxes as they apply; with the launcher
#    masked, a run on the simulated board is an error naming the cause;
#    systemctl stop within TimeoutStopSec; remove keeps the state and
#    configuration, purge removes them.
# 3. Installs the previous package, leases a board and runs, upgrades to
#    this one (the lease and the run survive, the administrator's edit of the
#    conffile too, and simulated boards run), and purges.
#
# Prints a transcript: "# ..." lines say what happens, "$ ..." lines are the
# commands run inside the system, followed by their output. Exits 1 at the
# first failed check ("FAIL: ..."). The rootfs and downloaded packages are
# cached in BUILD_DIR/packaging/ (a cold run debootstraps and downloads).
set -eEuo pipefail
trap 'echo "FAIL: line $LINENO: $BASH_COMMAND"' ERR
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: run.sh BUILD_DIR}" && pwd)
. "$here/system.sh"

[[ $EUID -eq 0 ]] || { echo "run.sh: needs root (unshare, chroot, debootstrap)" >&2; exit 2; }
cache=$build/packaging
mkdir -p "$cache"
work=$(mktemp -d "$cache/run.XXXXXX")
cleanup() {
  system_halt
  rm -rf "$work" "$work.boot.log"
}
trap cleanup EXIT
started=$(date +%s)

say() { printf '# %s\n' "$*"; }
fail() {
  printf 'FAIL: %s\n' "$*"
  exit 1
}
# Runs a command inside, showing it and its output.
run() {
  printf '$ %s\n' "$*"
  in_system "$@" 2>&1 | sed 's/^/  /'
  return "${PIPESTATUS[0]}"
}
# The command's output, not shown.
get() { in_system "$@" 2>&1; }
expect() { # WHAT GOT WANT
  [[ $2 == "$3" ]] || fail "$1: got '$2', want '$3'"
  echo "ok: $1: $2"
}
# Waits up to SECONDS for CMD to succeed.
wait_for() {
  local seconds=$1 i
  shift
  for ((i = 0; i < seconds * 10; i++)); do
    in_system "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  return 1
}
elapsed() { echo $(($(date +%s) - started)); }

# --- 1. the packages ---------------------------------------------------------
debs=$build/deb
firmware=$build/firmware/hwfarm-pass.elf
[[ -f $firmware ]] || fail "no test firmware at $firmware (cmake --build $build --target hwfarm_firmware)"

# The previous package: of the newest first-parent ancestor of HEAD that has
# the packaging. Built before this tree's, in the same directory, so this
# tree's build then compiles only what changed.
git=(git -c "safe.directory=$repo" -C "$repo")
previous_commit=
for c in $("${git[@]}" rev-list --first-parent --max-count=20 HEAD~1 2>/dev/null); do
  if "${git[@]}" cat-file -e "$c:packaging/debian/control" 2>/dev/null; then
    previous_commit=$c
    break
  fi
done
if [[ -n $previous_commit ]]; then
  previous_dir=$cache/previous/$("${git[@]}" rev-parse --short=12 "$previous_commit")
  if ! ls "$previous_dir"/hwfarm_*.deb >/dev/null 2>&1; then
    say "building the previous package (commit ${previous_commit:0:12}; cached in $previous_dir)"
    "$repo/packaging/build-deb.sh" "$debs" "$previous_commit" >/dev/null
    mkdir -p "$previous_dir"
    cp "$debs"/hwfarm_*.deb "$previous_dir/"
  fi
  previous_deb=$(ls "$previous_dir"/hwfarm_*.deb)
else
  previous_deb=
  say "no earlier commit with packaging/debian in this clone: the upgrade is from this tree's package with a lower version"
fi
say "building this tree's package (make deb)"
current_deb=$("$repo/packaging/build-deb.sh" "$debs")
if [[ -z $previous_deb ]]; then
  # The same build, numbered below this one: what an upgrade does with the
  # maintainer scripts and the state is the same; older code is not.
  version=$(dpkg-deb -f "$current_deb" Version)
  mkdir -p "$work/previous"
  dpkg-deb -R "$current_deb" "$work/previous/tree"
  sed -i "s/^Version: .*/Version: ${version}~previous/" "$work/previous/tree/DEBIAN/control"
  dpkg-deb -b --root-owner-group "$work/previous/tree" "$work/previous/" >/dev/null
  previous_deb=$(ls "$work/previous"/hwfarm_*.deb)
fi
version=$(dpkg-deb -f "$current_deb" Version)
previous_version=$(dpkg-deb -f "$previous_deb" Version)
say "this package: $(basename "$current_deb"); the previous: $(basename "$previous_deb")"
dpkg --compare-versions "$previous_version" lt "$version" ||
  fail "the previous package's version $previous_version is not below $version"

say "lintian"
lintian_out=$(lintian --fail-on error --display-level '>=warning' --tag-display-limit 0 "$current_deb" 2>&1) ||
  { echo "$lintian_out"; fail "lintian reports errors"; }
# Its findings are "E: package: tag ..." and "W: ..." lines; the rest is
# lintian talking about itself (running as root, say).
lintian_out=$(grep -E '^[EW]: ' <<<"$lintian_out" || true)
echo "${lintian_out:-  (no warnings)}" | sed 's/^/  /'
for tag in $(awk '{ print $3 }' <<<"$lintian_out" | sort -u); do
  grep -q "\`$tag\`" "$repo/docs/operations.md" || fail "lintian warning $tag is not named in docs/operations.md"
done
# Stripped, with the debug symbols in the -dbgsym package.
mkdir -p "$work/contents"
dpkg-deb -x "$current_deb" "$work/contents"
for b in hwfarmd hwfarmctl; do
  readelf -S "$work/contents/usr/bin/$b" | grep -q '\.debug_info' && fail "/usr/bin/$b is not stripped"
  readelf -n "$work/contents/usr/bin/$b" | grep -q 'Build ID' || fail "/usr/bin/$b has no build id"
done
ls "$debs"/hwfarm-dbgsym_"$version"_*.deb >/dev/null || fail "no hwfarm-dbgsym package"
echo "ok: binaries stripped; hwfarm-dbgsym_${version} holds their debug symbols"

# --- 2. a fresh install ------------------------------------------------------
say "booting Debian 12 with systemd as PID 1 ($(elapsed) s so far)"
root=$work/root
system_rootfs "$cache/bookworm-rootfs.tar" "$root"
cp "$current_deb" "$previous_deb" "$firmware" "$root/root/"
system_boot "$root" "$cache/apt-archives"
deb=/root/$(basename "$current_deb")
echo "ok: $(get systemctl --version | head -1), state $(get systemctl is-system-running || true) ($(elapsed) s)"
run apt-get update -qq || fail "apt-get update"

. "$here/checks.sh"

say "install"
install_package "$deb" "$version"
check_installation
check_service_notify
check_config_examples
say "run"
check_lease_and_run
say "reload"
check_reload
check_broken_reload
say "failures"
check_kill_keeps_leases
check_watchdog
check_journal_priorities
say "sandbox"
check_security_score hwfarmd.service
check_security_score hwfarm-launcher.service 1
check_sandbox_applies
check_without_launcher
say "stop, remove, purge"
check_stop_in_time
check_remove_keeps_state
check_purge_leaves_nothing

# --- 3. an upgrade -------------------------------------------------------------
say "upgrade from $previous_version"
install_package "/root/$(basename "$previous_deb")" "$previous_version"
check_upgrade_keeps_state "$deb" "$version"
check_purge_leaves_nothing

say "passed in $(elapsed) s"
