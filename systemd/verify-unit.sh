#!/usr/bin/env bash
# Checks the systemd packaging of hwfarmd (ctest: systemd_unit_verify).
#
#   verify-unit.sh BUILD_DIR SOURCE_DIR
#
# Stages `cmake --install BUILD_DIR --prefix /usr` into a temporary DESTDIR
# (the real system is not touched) and then:
#   1. checks that the unit, sysusers.d, tmpfiles.d, modules-load.d and udev
#      files are at their /usr/lib/... paths, and the binaries in /usr/bin;
#   2. applies the sysusers.d and tmpfiles.d files to the staging root and
#      checks the user, groups and directory modes they produce;
#   3. runs `systemd-analyze verify --root=STAGE` on the installed units, so
#      ExecStart=/usr/bin/hwfarmd resolves to the staged binary;
#   4. runs `systemd-analyze security --offline=true` and fails above
#      MAX_EXPOSURE for hwfarmd.service, above MAX_LAUNCHER_EXPOSURE for
#      hwfarm-launcher.service;
#   5. runs `udevadm verify` on the rules if this udevadm has it (systemd 254+).
# Exits non-zero on the first failed check.
set -euo pipefail

# hwfarmd.service scores 1.5 with systemd 252: it may create no namespaces,
# as simulated boards' QEMU is confined by hwfarm-launcher.service, which
# scores 1.4: it holds what bubblewrap needs (user, mount, pid, net, ipc, uts
# and cgroup namespaces; @mount, capset and pivot_root, inside the sandbox's
# own user namespace) but no network, no devices and no other user's files. The limits leave a little room for scoring changes in
# newer systemd; a setting dropped from either sandbox shows up here. Same
# 0-100 scale as `systemd-analyze security --threshold` (20 means 2.0 on the
# printed 0-10 scale).
readonly MAX_EXPOSURE=20
readonly MAX_LAUNCHER_EXPOSURE=20

if [[ $# -ne 2 ]]; then
  echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
  exit 2
fi
build_dir=$1
source_dir=$2
cmake_bin=${CMAKE:-cmake}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Applies sysusers.d or tmpfiles.d to the staging root. Both tools exit 0 on
# a line they cannot parse and only log it as "FILE:LINE: ...".
apply_conf() {  # tool [args...]
  local rc=0
  "$1" --root="$stage" "${@:2}" >"$work/$1.log" 2>&1 || rc=$?
  if [[ $rc -ne 0 ]] || grep -Eq 'hwfarm\.conf:[0-9]+:' "$work/$1.log"; then
    cat "$work/$1.log" >&2
    fail "$1 rejected hwfarm.conf"
  fi
}

check_dir() {  # path mode uid gid
  local got
  got=$(stat -c '%a %u %g' "$stage$1") || fail "tmpfiles did not create $1"
  [[ $got == "$2 $3 $4" ]] || fail "$1 is '$got' (mode uid gid), want '$2 $3 $4'"
}

work=$(mktemp -d "${TMPDIR:-/tmp}/hwfarm-unit.XXXXXX")
trap 'rm -rf "$work"' EXIT
stage=$work/root
mkdir "$stage"

readonly unit=/usr/lib/systemd/system/hwfarmd.service
readonly launcher_unit=/usr/lib/systemd/system/hwfarm-launcher.service

# --- 1. install and check paths ----------------------------------------------
if ! DESTDIR=$stage "$cmake_bin" --install "$build_dir" --prefix /usr >"$work/install.log" 2>&1; then
  cat "$work/install.log" >&2
  fail "cmake --install $build_dir failed"
fi

for f in /usr/bin/hwfarmd /usr/bin/hwfarmctl; do
  [[ -x $stage$f ]] || fail "$f not installed (daemon/ must install(TARGETS hwfarmd hwfarmctl))"
done
for f in "$unit" "$launcher_unit" /usr/lib/systemd/system/hwfarm-launcher.socket \
         /usr/libexec/hwfarm/hwfarm-launcher /etc/hwfarm/hwfarm.toml \
         /usr/lib/sysusers.d/hwfarm.conf \
         /usr/lib/tmpfiles.d/hwfarm.conf \
         /usr/lib/modules-load.d/hwfarm.conf \
         /usr/lib/udev/rules.d/60-hwfarm.rules; do
  [[ -f $stage$f ]] || fail "$f not installed"
done
reference=/usr/share/doc/hwfarm/examples/reference.toml
if [[ -f $source_dir/config/examples/reference.toml && ! -f $stage$reference ]]; then
  fail "$reference not installed (re-run cmake after adding the file)"
fi
# The unit is generated at install time, so it follows --prefix.
grep -q '^ExecStart=/usr/bin/hwfarmd .*--simulator-launcher /run/hwfarm-launcher.sock' "$stage$unit" ||
  fail "$unit: ExecStart does not name /usr/bin/hwfarmd with --simulator-launcher"
grep -q '^ExecStart=/usr/libexec/hwfarm/hwfarm-launcher$' "$stage$launcher_unit" ||
  fail "$launcher_unit: ExecStart does not name /usr/libexec/hwfarm/hwfarm-launcher"
# The socket hwfarmd is told and the one the launcher's socket unit makes.
grep -q '^ListenSequentialPacket=/run/hwfarm-launcher.sock$' "$stage/usr/lib/systemd/system/hwfarm-launcher.socket" ||
  fail "hwfarm-launcher.socket does not listen at /run/hwfarm-launcher.sock"
# Connections are descriptors: the default limits.max_connections (1024) plus
# hwfarmd's own (64 + 4 per board) must fit under LimitNOFILE without relying
# on systemd's default hard limit.
nofile=$(sed -n 's/^LimitNOFILE=\([0-9]*\)$/\1/p' "$stage$unit")
[[ -n $nofile && $nofile -ge 4096 ]] ||
  fail "$unit: LimitNOFILE= must be set to at least 4096 (max_connections 1024 + hwfarmd's own descriptors)"
echo "ok: files installed under /usr"

# --- 2. sysusers.d and tmpfiles.d applied to the staging root ----------------
# With --root both tools read and write the root's /etc/passwd and /etc/group
# only, so this never creates anything on the host.
mkdir -p "$stage/etc"
apply_conf systemd-sysusers
uid=$(awk -F: '$1 == "hwfarm" { print $3 }' "$stage/etc/passwd")
gid=$(awk -F: '$1 == "hwfarm" { print $3 }' "$stage/etc/group")
[[ -n $uid && -n $gid ]] || fail "sysusers did not create user and group hwfarm"
for g in dialout plugdev; do
  awk -F: -v g="$g" '$1 == g && ("," $4 ",") ~ /,hwfarm,/ { found = 1 } END { exit !found }' \
    "$stage/etc/group" || fail "sysusers did not add hwfarm to group $g"
done
if [[ $EUID -eq 0 ]]; then
  apply_conf systemd-tmpfiles --create
  check_dir /etc/hwfarm 750 0 "$gid"
  check_dir /var/lib/hwfarm 750 "$uid" "$gid"
  check_dir /var/log/hwfarm 750 "$uid" "$gid"
  echo "ok: sysusers.d and tmpfiles.d"
else
  echo "ok: sysusers.d (tmpfiles.d not applied: chown needs root)"
fi

# --- 3. systemd-analyze verify ------------------------------------------------
# --root makes verify resolve every path inside the staging root: ExecStart
# finds the staged /usr/bin/hwfarmd, not whatever the host has. The root also
# needs what the unit refers to outside hwfarm: the host's targets and slices
# (sysinit.target, network-online.target, system.slice, ...) and the helper
# commands of other Exec lines (/bin/kill). They are copied from the host.
seed=$stage/run/systemd/system
mkdir -p "$seed"
for d in /usr/lib/systemd/system /lib/systemd/system; do
  [[ -d $d ]] || continue
  find "$d" -maxdepth 1 \( -name '*.target' -o -name '*.slice' \) -exec cp -nL -t "$seed" {} +
done
sed -n 's/^Exec[A-Za-z]*=[-@:+!|]*\([^ ]*\).*/\1/p' "$stage$unit" | sort -u |
  while read -r cmd; do
    [[ $(basename "$cmd") == hwfarm* || -e $stage$cmd || ! -e $cmd ]] && continue
    mkdir -p "$stage$(dirname "$cmd")"
    cp -L "$cmd" "$stage$cmd"
  done

# verify also reports problems of the units it loads for the dependencies;
# those are the host's and are not ours to fix. Every message about our
# units starts with their name or with the unit file's path, so any line
# containing "hwfarm" is a failure; other lines are shown as notes.
for u in "$unit" "$launcher_unit" /usr/lib/systemd/system/hwfarm-launcher.socket; do
  name=$(basename "$u")
  verify_rc=0
  verify_out=$(systemd-analyze verify --root="$stage" "$u" 2>&1) || verify_rc=$?
  if grep -q hwfarm <<<"$verify_out"; then
    grep hwfarm <<<"$verify_out" >&2
    fail "systemd-analyze verify reports problems in $name"
  fi
  if [[ $verify_rc -ne 0 ]]; then
    echo "note: systemd-analyze verify, about units $name depends on:"
    echo "$verify_out"
    # Rule out an error in our unit that carries no unit name.
    systemd-analyze verify --recursive-errors=no --root="$stage" "$u" ||
      fail "systemd-analyze verify failed on $name"
  fi
done
echo "ok: systemd-analyze verify"

# --- 4. systemd-analyze security ---------------------------------------------
security() {  # UNIT LIMIT: fails when the staged UNIT scores above LIMIT/100
  local rc=0 out line
  out=$(systemd-analyze security --offline=true --threshold="$2" --root="$stage" "$1" 2>&1) || rc=$?
  line=$(grep 'Overall exposure level' <<<"$out" || true)
  if [[ -z $line || $rc -ne 0 ]]; then
    echo "$out" >&2
    fail "systemd-analyze security $(basename "$1"): exposure above $2/100 or analysis failed"
  fi
  echo "$(basename "$1"): $line (limit $2/100)"
}
security "$unit" "$MAX_EXPOSURE"
security "$launcher_unit" "$MAX_LAUNCHER_EXPOSURE"

# --- 5. udevadm verify (systemd 254 and later) --------------------------------
# --resolve-names=never: the build host need not have the plugdev group.
if command -v udevadm >/dev/null && udevadm verify --help >/dev/null 2>&1; then
  udevadm verify --resolve-names=never "$stage/usr/lib/udev/rules.d/60-hwfarm.rules" ||
    fail "udevadm verify rejected 60-hwfarm.rules"
  echo "ok: udevadm verify"
fi
