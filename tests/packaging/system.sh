# A Debian 12 userland booted with systemd as PID 1, for the packaging test
# (sourced by tests/packaging/run.sh).
#
# The rootfs comes from debootstrap (--variant=minbase with systemd,
# systemd-sysv and dbus, from the Debian archive the host's apt uses) and is
# cached as a tarball. systemd runs as PID 1 of a new PID namespace, rooted
# in a copy of it (unshare --pid --fork --mount --uts --ipc; proc, sys, dev
# and a tmpfs /run mounted first); commands run inside with nsenter.
# systemd-nspawn needs a systemd on the host, which a CI machine may lack.
#
# The new root is entered with pivot_root, not chroot: the kernel refuses a
# chrooted process new user namespaces (clone(2), EPERM), and bubblewrap
# needs one to confine QEMU as the unprivileged hwfarm user. systemd also
# builds each service's mount namespace (ProtectSystem=, PrivateTmp=) from
# the root, which must be a mount point: it is bound onto itself first.
#
# The system believes it is in a container (container=hwfarm-test), so the
# units that manage hardware (udev, kernel modules) stay out of its way.

# system_rootfs CACHE_TAR ROOT: ROOT holds a fresh copy of the cached
# rootfs, made by debootstrap first when CACHE_TAR does not exist.
system_rootfs() {
  local cache=$1 root=$2
  if [[ ! -s $cache ]]; then
    local mirror
    mirror=$(apt-get indextargets --format '$(REPO_URI) $(CODENAME) $(IDENTIFIER)' |
             awk '$2 == "bookworm" && $3 == "Packages" { print $1; exit }')
    [[ -n $mirror ]] || { echo "system: the host's apt has no Debian 12 (bookworm) archive to debootstrap from" >&2; return 1; }
    echo "system: no cached rootfs: debootstrap from ${mirror} (once; cached as $cache)"
    local fresh=$cache.d
    rm -rf "$fresh"
    debootstrap --variant=minbase --include=systemd,systemd-sysv,dbus bookworm "$fresh" "$mirror" \
      >"$cache.log" 2>&1 || { tail -20 "$cache.log" >&2; return 1; }
    # Nothing here logs in: logind fails without the host's seats, and
    # e2scrub has no ext4 volumes to scrub.
    chroot "$fresh" systemctl mask systemd-logind.service e2scrub_reap.service >/dev/null 2>&1
    echo hwfarm-test >"$fresh/etc/hostname"
    tar -C "$fresh" -cf "$cache.tmp" . && mv "$cache.tmp" "$cache"
    rm -rf "$fresh"
  fi
  rm -rf "$root"
  mkdir -p "$root"
  tar -C "$root" -xf "$cache"
  cp /etc/resolv.conf "$root/etc/resolv.conf"
}

# system_boot ROOT APT_ARCHIVES: boots ROOT; sets SYSTEM_PID (its PID 1 as
# the host sees it). Downloaded packages are kept in APT_ARCHIVES between
# runs.
system_boot() {
  local root=$1 archives=$2
  mkdir -p "$archives/partial"
  cat >"$root/.boot.sh" <<EOF
#!/bin/sh
set -e
mount --make-rprivate /
mount --bind "$root" "$root"
mount -t tmpfs -o mode=0755 tmpfs "$root/run"
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys"
mount --rbind /dev "$root/dev"
mount --bind "$archives" "$root/var/cache/apt/archives"
cd "$root"
mkdir -p .host
pivot_root . .host
exec /usr/bin/env -i container=hwfarm-test /bin/sh -c 'umount -l /.host && rmdir /.host && exec /sbin/init'
EOF
  chmod +x "$root/.boot.sh"
  unshare --pid --fork --mount --uts --ipc "$root/.boot.sh" >"$root.boot.log" 2>&1 &
  SYSTEM_UNSHARE=$!
  SYSTEM_PID=
  local i
  for i in $(seq 1 100); do
    SYSTEM_PID=$(pgrep -P "$SYSTEM_UNSHARE" || true)
    [[ -n $SYSTEM_PID ]] && break
    sleep 0.1
  done
  [[ -n $SYSTEM_PID ]] || { cat "$root.boot.log" >&2; echo "system: systemd did not start" >&2; return 1; }
  local state
  for i in $(seq 1 600); do
    state=$(in_system systemctl is-system-running 2>/dev/null || true)
    [[ $state == running || $state == degraded ]] && return 0
    sleep 0.1
  done
  echo "system: not up after 60 s (state: $state)" >&2
  in_system systemctl --failed --no-pager >&2 || true
  return 1
}

# in_system CMD...: runs CMD in the booted system (its mount, PID, UTS and
# IPC namespaces, root and working directory /).
in_system() {
  nsenter -t "$SYSTEM_PID" -m -p -u -i -r -w \
    /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# system_halt: powers the system off (SIGRTMIN+4 to its PID 1), and kills
# what is left after 30 s.
system_halt() {
  [[ -n ${SYSTEM_UNSHARE:-} ]] || return 0
  kill -s SIGRTMIN+4 "$SYSTEM_PID" 2>/dev/null || true
  local i
  for i in $(seq 1 300); do
    kill -0 "$SYSTEM_UNSHARE" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$SYSTEM_UNSHARE" 2>/dev/null; then
    kill -9 "$SYSTEM_PID" 2>/dev/null || true
  fi
  wait "$SYSTEM_UNSHARE" 2>/dev/null || true
  SYSTEM_UNSHARE=
}
