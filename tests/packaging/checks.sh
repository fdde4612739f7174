# The packaging test's checks (sourced by tests/packaging/run.sh, which
# defines run, get, expect, fail, wait_for, in_system and say). Files of the
# system are edited from the host, under $root.

# A field of hwfarmctl's --json answer: "name":"value" or "name":number.
json_field() { # FIELD <<<JSON
  sed -n "s/.*\"$1\":\"\\{0,1\\}\\([^\",}]*\\).*/\\1/p" | head -1
}

main_pid() { get systemctl show -P MainPID hwfarmd; }

# Waits until hwfarmd answers on its unix socket; when it does not, shows
# why: the service's state, its journal and hwfarmctl's own error.
wait_serving() {
  wait_for "${1:-30}" hwfarmctl --url unix:/run/hwfarm/hwfarmd.sock status && return 0
  in_system systemctl status --no-pager hwfarmd 2>&1 | sed 's/^/  /' || true
  in_system journalctl --no-pager -u hwfarmd -n 40 2>&1 | sed 's/^/  /' || true
  in_system hwfarmctl --url unix:/run/hwfarm/hwfarmd.sock status 2>&1 | sed 's/^/  /' || true
  in_system sh -c 'getent passwd hwfarm; getent group hwfarm dialout plugdev; id hwfarm' 2>&1 | sed 's/^/  /' || true
  fail "hwfarmd does not answer"
}

install_package() { # DEB VERSION
  run apt-get install -y -q -o Dpkg::Options::=--force-confold "$1" >"$work/apt.log" ||
    { cat "$work/apt.log"; fail "apt-get install $1"; }
  grep -E '^(  Setting up|  Unpacking) hwfarm|^  (The following NEW|Need to get)' "$work/apt.log" || true
  expect "installed version" "$(get dpkg-query -W -f '${Version}' hwfarm)" "$2"
  wait_serving
}

check_installation() {
  run getent passwd hwfarm
  local uid home shell
  IFS=: read -r _ _ uid _ _ home shell <<<"$(get getent passwd hwfarm)"
  [[ $uid -lt 1000 ]] || fail "hwfarm is not a system user (uid $uid)"
  expect "hwfarm's home" "$home" /var/lib/hwfarm
  expect "hwfarm's groups" "$(get id -nG hwfarm | tr ' ' '\n' | grep -E '^(dialout|plugdev)$' | sort | tr '\n' ' ')" \
    "dialout plugdev "
  run stat -c '%n %a %U:%G' /etc/hwfarm /etc/hwfarm/hwfarm.toml /var/lib/hwfarm /var/log/hwfarm \
    /usr/bin/hwfarmd /usr/bin/hwfarmctl
  expect "/etc/hwfarm" "$(get stat -c '%a %U:%G' /etc/hwfarm)" "750 root:hwfarm"
  expect "/etc/hwfarm/hwfarm.toml" "$(get stat -c '%a %U:%G' /etc/hwfarm/hwfarm.toml)" "644 root:root"
  expect "/var/lib/hwfarm" "$(get stat -c '%a %U:%G' /var/lib/hwfarm)" "750 hwfarm:hwfarm"
  expect "/var/log/hwfarm" "$(get stat -c '%a %U:%G' /var/log/hwfarm)" "750 hwfarm:hwfarm"
  expect "/usr/bin/hwfarmd" "$(get stat -c '%a %U:%G' /usr/bin/hwfarmd)" "755 root:root"
  get dpkg-query -W -f '${Conffiles}\n' hwfarm | grep -q '^ /etc/hwfarm/hwfarm.toml ' ||
    fail "/etc/hwfarm/hwfarm.toml is not a conffile"
  echo "ok: /etc/hwfarm/hwfarm.toml is a conffile"
  local files
  files=$(get dpkg -L hwfarm)
  for f in /lib/systemd/system/hwfarmd.service /lib/systemd/system/hwfarm-launcher.service \
           /lib/systemd/system/hwfarm-launcher.socket /usr/libexec/hwfarm/hwfarm-launcher \
           /usr/lib/sysusers.d/hwfarm.conf /usr/lib/tmpfiles.d/hwfarm.conf \
           /usr/lib/modules-load.d/hwfarm.conf /lib/udev/rules.d/60-hwfarm.rules \
           /usr/share/hwfarm/jenkins/vars/hwfarmLease.groovy /usr/share/doc/hwfarm/examples/reference.toml \
           /usr/share/doc/hwfarm/copyright /usr/share/doc/hwfarm/changelog.gz; do
    grep -qx "$f" <<<"$files" || fail "the package has no $f"
  done
  echo "ok: the units, the launcher, sysusers.d, tmpfiles.d, modules-load.d, udev rules, Jenkins library and docs are in it"
  # The simulator launcher's socket: enabled, listening, only for hwfarm.
  expect "hwfarm-launcher.socket" "$(get systemctl is-enabled hwfarm-launcher.socket)/$(get systemctl is-active hwfarm-launcher.socket)" \
    enabled/active
  expect "/run/hwfarm-launcher.sock" "$(get stat -c '%F %a %U:%G' /run/hwfarm-launcher.sock)" "socket 600 hwfarm:hwfarm"
  expect "hwfarmd --version" "$(get hwfarmd --version)" "hwfarmd $version"
}

check_service_notify() {
  run systemctl status --no-pager --lines=0 hwfarmd || true
  expect "enabled" "$(get systemctl is-enabled hwfarmd)" enabled
  expect "Type" "$(get systemctl show -P Type hwfarmd)" notify
  expect "state" "$(get systemctl show -P ActiveState hwfarmd)/$(get systemctl show -P SubState hwfarmd)" active/running
  # The status line comes from hwfarmd's sd_notify STATUS=, and systemd
  # logged "Started" only after hwfarmd said READY=1 (its "ready" line first).
  local status
  status=$(get systemctl show -P StatusText hwfarmd)
  [[ $status == "serving agent lab-01, tier 3, 1 workers, 1 boards" ]] || fail "StatusText: $status"
  echo "ok: StatusText (sd_notify): $status"
  local log ready started
  log=$(get journalctl -b -o cat --no-pager -u hwfarmd)
  ready=$(grep -n "hwfarmd $version ready:" <<<"$log" | head -1 | cut -d: -f1)
  started=$(grep -n "Started hwfarmd.service" <<<"$log" | head -1 | cut -d: -f1)
  [[ -n $ready && -n $started && $ready -lt $started ]] || { echo "$log"; fail "systemd did not wait for READY=1"; }
  echo "ok: systemd reported the start after hwfarmd's READY=1"
  run hwfarmctl status
  expect "version in /v1/healthz" "$(get hwfarmctl --json status | json_field version)" "$version"
}

check_config_examples() {
  run runuser -u hwfarm -- hwfarmd --check-config /etc/hwfarm/hwfarm.toml || fail "the starter config"
  # Its commented example boards (Nucleo + openocd, nRF + nrfjprog, ESP32 +
  # esptool), uncommented, are valid too.
  sed -e 's/^  # \(\[\[worker\.board\]\]\|[a-z_]* = \)/  \1/' "$root/etc/hwfarm/hwfarm.toml" >"$root/tmp/examples.toml"
  expect "boards in the starter with its examples uncommented" \
    "$(grep -c '^  \[\[worker.board\]\]' "$root/tmp/examples.toml")" 4
  run hwfarmd --check-config /tmp/examples.toml || fail "the starter's examples"
}

# The end of every log a run's output points at ("see PATH").
show_logs() {
  local path
  for path in $(grep -o '(see /[^)]*)' <<<"$1" | sed 's/^(see //; s/)$//' | sort -u || true); do
    echo "--- $path (last 20 lines)"
    tail -n 20 "$root$path" 2>&1 | sed 's/^/  /'
  done
}

# Runs the test firmware on a leased simulated board (and the simulator
# reference); sets RUN_ID and RUN_STATE. The run must pass, or with "any"
# only end (the previous package's verdict is not this tree's to check).
lease_and_run() {
  local out ok=1
  out=$(get hwfarmctl lease run --type mps2-an385 --context manual --wait 60 -- \
          hwfarmctl run --out /tmp/run /root/hwfarm-pass.elf) || ok=0
  if ((!ok)) && [[ ${1:-} != any ]]; then
    echo "$out"
    show_logs "$out"
    echo "--- the journal of hwfarmd and hwfarm-launcher (last 40 lines)"
    get journalctl -b -o short-monotonic --no-pager -u hwfarmd -u hwfarm-launcher.service -n 40 | sed 's/^/  /'
    fail "hwfarmctl run"
  fi
  printf '$ hwfarmctl lease run --type mps2-an385 --context manual --wait 60 -- hwfarmctl run --out /tmp/run /root/hwfarm-pass.elf\n'
  echo "$out" | sed 's/^/  /'
  read -r RUN_ID RUN_STATE < <(sed -n 's/^run \(run-[0-9a-z]*\): \([a-z]*\)$/\1 \2/p' <<<"$out") || true
  [[ -n ${RUN_ID:-} ]] || fail "no ended run in hwfarmctl run's output"
  [[ $RUN_STATE == passed || ${1:-} == any ]] || fail "run $RUN_ID: $RUN_STATE, not passed"
  [[ -f $root/var/lib/hwfarm/runs/$RUN_ID/summary.json ]] || fail "no summary.json of $RUN_ID"
}

check_lease_and_run() {
  run hwfarmctl boards
  lease_and_run
  [[ -f $root/tmp/run/junit.xml ]] || fail "no junit.xml fetched"
  run ls /tmp/run
  # The board's QEMU and the reference's were run by hwfarm-launcher (its
  # socket started it), not by hwfarmd.
  local launched
  launched=$(get journalctl -b -o cat --no-pager -u hwfarm-launcher.service | grep '^hwfarm-launcher: ' || true)
  echo "$launched" | sed 's/^/  /'
  [[ $(grep -c '^hwfarm-launcher: started QEMU simulator ' <<<"$launched") -ge 2 ]] ||
    fail "hwfarm-launcher did not start the board's and the reference's QEMU"
  expect "hwfarm-launcher.service" "$(get systemctl is-active hwfarm-launcher.service)" active
  # A lease that stays for the restarts below.
  KEPT_LEASE=$(get hwfarmctl -q lease acquire --type mps2-an385 --context manual --ttl 3600)
  KEPT_EXPIRY=$(get hwfarmctl --json lease show "$KEPT_LEASE" | json_field expires_at)
  [[ -n $KEPT_EXPIRY ]] || fail "lease $KEPT_LEASE"
  echo "ok: lease $KEPT_LEASE held until $KEPT_EXPIRY"
}

lease_kept() {
  local shown
  shown=$(get hwfarmctl --json lease show "$KEPT_LEASE")
  expect "lease $KEPT_LEASE state" "$(json_field state <<<"$shown")" active
  expect "lease $KEPT_LEASE expiry" "$(json_field expires_at <<<"$shown")" "$KEPT_EXPIRY"
}

check_reload() {
  # A second simulated board, added by a reload.
  cp "$root/etc/hwfarm/hwfarm.toml" "$work/hwfarm.toml.orig"
  printf '\n  [[worker.board]]\n  name = "sim-1"\n  type = "mps2-an385"\n  driver = "qemu"\n' \
    >>"$root/etc/hwfarm/hwfarm.toml"
  local pid
  pid=$(main_pid)
  run systemctl reload hwfarmd || fail "systemctl reload"
  wait_for 20 sh -c 'hwfarmctl boards | grep -q "^sim-1 "' || fail "the reload did not add sim-1"
  run hwfarmctl boards
  expect "main pid after reload" "$(main_pid)" "$pid"
  expect "config generation" "$(get hwfarmctl --json status | json_field generation)" 2
}

check_broken_reload() {
  printf '\n[agent]\nname = "again"\n' >>"$root/etc/hwfarm/hwfarm.toml"
  run systemctl reload hwfarmd || fail "systemctl reload"
  wait_for 20 sh -c 'hwfarmctl status | grep -q "last reload FAILED"' || fail "the broken reload was not reported"
  run hwfarmctl status
  expect "state after a broken reload" "$(get systemctl is-active hwfarmd)" active
  expect "boards after a broken reload" "$(get hwfarmctl boards | grep -c '^sim-')" 2
  cp "$work/hwfarm.toml.orig" "$root/etc/hwfarm/hwfarm.toml"
  run systemctl reload hwfarmd
  wait_for 20 sh -c '[ "$(hwfarmctl boards | grep -c "^sim-")" = 1 ]' || fail "the good config did not come back"
}

check_kill_keeps_leases() {
  local pid
  pid=$(main_pid)
  run kill -9 "$pid"
  wait_for 30 sh -c "[ \"\$(systemctl show -P MainPID hwfarmd)\" != $pid ] && systemctl is-active -q hwfarmd" ||
    fail "hwfarmd was not restarted after SIGKILL"
  wait_serving
  run systemctl show -p NRestarts -p MainPID -p ActiveState hwfarmd
  get journalctl -b -o cat --no-pager -u hwfarmd | grep -E 'Main process exited|Scheduled restart' | tail -2 | sed 's/^/  /'
  lease_kept
}

check_watchdog() {
  local pid watchdog
  pid=$(main_pid)
  watchdog=$(get systemctl show -P WatchdogUSec hwfarmd)
  expect "WatchdogSec" "$watchdog" 30s
  say "SIGSTOP: the watchdog ($watchdog) restarts hwfarmd"
  run kill -STOP "$pid"
  wait_for 60 sh -c "[ \"\$(systemctl show -P MainPID hwfarmd)\" != $pid ] && systemctl is-active -q hwfarmd" ||
    fail "the watchdog did not restart a stopped hwfarmd"
  wait_serving
  get journalctl -b -o cat --no-pager -u hwfarmd | grep -E 'Watchdog timeout|Killing process|Scheduled restart' |
    tail -3 | sed 's/^/  /'
  get journalctl -b -o cat --no-pager -u hwfarmd | grep -q 'Watchdog timeout' || fail "no watchdog timeout logged"
  lease_kept
}

check_journal_priorities() {
  # hwfarmd's lines carry their syslog priority (<N> prefixes on stderr,
  # read by journald): err for the broken reload, warning for anonymous
  # access, info for ready.
  local p
  for p in "3:reload failed with" "4:anonymous access is allowed" "6:hwfarmd $version ready:"; do
    get journalctl -b -o cat --no-pager -u hwfarmd -p "${p%%:*}..${p%%:*}" | grep -q "${p#*:}" ||
      fail "journal: no priority ${p%%:*} line with '${p#*:}'"
    echo "ok: journal priority ${p%%:*}: ${p#*:}"
  done
  run journalctl -b --no-pager -u hwfarmd -p warning -o short-monotonic --lines 6
}

# Both units score 1.5 or less with Debian 12's systemd (docs/operations.md
# "Sandbox"): hwfarmd may create no namespaces, the launcher has no network,
# no devices and no capabilities. A setting dropped from either sandbox
# raises its score above this.
readonly MAX_SECURITY_SCORE=2.0

check_security_score() { # UNIT [LINES]
  local out score
  out=$(get systemd-analyze security --no-pager "$1")
  echo "$out" | grep -E '^(✗|✓)|Overall' | tail -"${2:-25}" | sed 's/^/  /'
  score=$(sed -n "s/.*Overall exposure level for $1: \([0-9.]*\).*/\1/p" <<<"$out")
  [[ -n $score ]] || fail "systemd-analyze security $1 printed no score"
  awk -v s="$score" -v max="$MAX_SECURITY_SCORE" 'BEGIN { exit !(s <= max) }' ||
    fail "systemd-analyze security $1: $score > $MAX_SECURITY_SCORE"
  echo "ok: systemd-analyze security $1: $score (<= $MAX_SECURITY_SCORE)"
}

# A lab without simulated boards masks the launcher's socket, as
# docs/operations.md ("Sandbox") says: hwfarmd serves, and a run on the
# simulated board is an infrastructure error that names the cause. Then the
# socket is unmasked and started again.
check_without_launcher() {
  run systemctl mask --now hwfarm-launcher.socket hwfarm-launcher.service
  local out rc=0
  out=$(get env HWFARM_LEASE_ID="$KEPT_LEASE" hwfarmctl run /root/hwfarm-pass.elf) || rc=$?
  printf '$ HWFARM_LEASE_ID=%s hwfarmctl run /root/hwfarm-pass.elf\n' "$KEPT_LEASE"
  grep -E 'cannot confine QEMU|^run ' <<<"$out" | sed 's/^/  /' || true
  [[ $rc -ne 0 ]] || fail "a run on the simulated board passed without the launcher"
  grep -q 'cannot confine QEMU for board [^:]*: cannot reach the simulator launcher at /run/hwfarm-launcher.sock (is hwfarm-launcher.socket started?)' \
    <<<"$out" || { echo "$out"; fail "the run does not say that QEMU cannot be confined, and why"; }
  grep -q '^run run-[0-9a-z]*: error$' <<<"$out" || { echo "$out"; fail "the run did not end in error"; }
  echo "ok: with the launcher masked a run on the simulated board is an error: QEMU cannot be confined (exit $rc)"
  run systemctl unmask hwfarm-launcher.socket hwfarm-launcher.service
  run systemctl start hwfarm-launcher.socket
  expect "hwfarm-launcher.socket" "$(get systemctl is-active hwfarm-launcher.socket)" active
}

check_sandbox_applies() {
  local pid
  pid=$(main_pid)
  run grep -E '^(Uid|Gid|Groups|NoNewPrivs|Seccomp|CapEff|CapBnd):' "/proc/$pid/status"
  local status
  status=$(get cat "/proc/$pid/status")
  grep -q '^NoNewPrivs:[[:space:]]*1' <<<"$status" || fail "NoNewPrivileges= does not apply"
  grep -q '^Seccomp:[[:space:]]*2' <<<"$status" || fail "SystemCallFilter= does not apply"
  grep -q '^CapBnd:[[:space:]]*0000000000000000' <<<"$status" || fail "CapabilityBoundingSet= does not apply"
  # In the service's own mount namespace, even root writes only where the
  # unit allows: its state, log and runtime directories and /run/lock.
  local path
  for path in /etc/hwfarm/x /usr/bin/x /var/lib/x /root/x /home/x; do
    if in_system nsenter -t "$pid" -m touch "$path" 2>/dev/null; then fail "the service can write $path"; fi
  done
  echo "ok: not writable in the service's view: /etc/hwfarm /usr/bin /var/lib /root /home"
  for path in /var/lib/hwfarm/.sandbox-check /var/log/hwfarm/.sandbox-check /run/lock/.sandbox-check; do
    in_system nsenter -t "$pid" -m sh -c "touch $path && rm $path" || fail "the service cannot write $path"
  done
  echo "ok: writable: /var/lib/hwfarm /var/log/hwfarm /run/lock"
  # PrivateTmp=: the service's /tmp is not the system's.
  in_system nsenter -t "$pid" -m touch /tmp/.sandbox-private
  get test -e /tmp/.sandbox-private && fail "PrivateTmp= does not apply"
  echo "ok: PrivateTmp"
  # The launcher: no privileges, a system call filter, and a network
  # namespace of its own (PrivateNetwork=), without any interface but lo.
  local launcher
  launcher=$(get systemctl show -P MainPID hwfarm-launcher.service)
  [[ $launcher -gt 0 ]] || fail "hwfarm-launcher.service is not running"
  status=$(get cat "/proc/$launcher/status")
  grep -q '^NoNewPrivs:[[:space:]]*1' <<<"$status" || fail "launcher: NoNewPrivileges= does not apply"
  grep -q '^Seccomp:[[:space:]]*2' <<<"$status" || fail "launcher: SystemCallFilter= does not apply"
  grep -q '^CapBnd:[[:space:]]*0000000000000000' <<<"$status" || fail "launcher: CapabilityBoundingSet= does not apply"
  [[ $(get readlink "/proc/$launcher/ns/net") != "$(get readlink /proc/1/ns/net)" ]] ||
    fail "launcher: PrivateNetwork= does not apply"
  expect "launcher's network interfaces" "$(get sed -n 's/^ *\([a-z0-9]*\):.*/\1/p' "/proc/$launcher/net/dev" | tr '\n' ' ')" "lo "
  for path in /etc/x /var/log/hwfarm/x /root/x; do
    if in_system nsenter -t "$launcher" -m touch "$path" 2>/dev/null; then fail "the launcher can write $path"; fi
  done
  echo "ok: hwfarm-launcher: NoNewPrivs, seccomp, no capabilities, network lo only; /etc, /var/log/hwfarm, /root not writable"
  # The device cgroup (DevicePolicy=closed): a device the unit does not
  # allow, opened by root from inside the service's cgroup, is refused; the
  # same open outside it works.
  local device
  for device in /dev/net/tun /dev/loop-control; do get test -c "$device" && break; device=; done
  if [[ -z $device ]]; then
    say "NOT CHECKED: DevicePolicy=closed: neither /dev/net/tun nor /dev/loop-control to try it with"
  elif ! in_system sh -c "exec 3<>$device"; then
    say "NOT CHECKED: DevicePolicy=closed: $device cannot be opened even outside the service"
  else
    local procs
    procs=$(service_cgroup_procs "$pid")
    if in_system sh -c "echo \$\$ >$procs && exec 3<>$device" 2>/dev/null; then
      fail "DevicePolicy=closed does not apply: $device opened in the service's cgroup ($procs)"
    fi
    echo "ok: DevicePolicy=closed: $device refused in the service's cgroup, opened outside it"
  fi
}

# The cgroup.procs file of the service's device controller: cgroup v1's
# devices hierarchy when there is one (this system's systemd uses it for
# DeviceAllow= then), else the unified hierarchy (a BPF device program).
service_cgroup_procs() {
  local cgroups path
  cgroups=$(get cat "/proc/$1/cgroup")
  path=$(sed -n 's/^[0-9]*:devices:\(.*\)/\1/p' <<<"$cgroups")
  if [[ -n $path ]]; then
    echo "/sys/fs/cgroup/devices$path/cgroup.procs"
  else
    path=$(sed -n 's/^0::\(.*\)/\1/p' <<<"$cgroups")
    if get test -d /sys/fs/cgroup/unified; then echo "/sys/fs/cgroup/unified$path/cgroup.procs"
    else echo "/sys/fs/cgroup$path/cgroup.procs"; fi
  fi
}

check_stop_in_time() {
  local t0 t1 limit
  limit=$(get systemctl show -P TimeoutStopUSec hwfarmd)
  t0=$(date +%s%N)
  run systemctl stop hwfarmd
  t1=$(date +%s%N)
  expect "Result after stop" "$(get systemctl show -P Result hwfarmd)" success
  local ms=$(((t1 - t0) / 1000000))
  [[ $ms -lt 20000 ]] || fail "systemctl stop took $ms ms (TimeoutStopSec=$limit)"
  echo "ok: stopped in $ms ms (TimeoutStopSec=$limit), hwfarmd exited 0"
  # (journald reads the service's stream on its own time: the line may come
  # in after systemctl has returned)
  wait_for 10 sh -c "journalctl -b -o cat --no-pager -u hwfarmd | grep -q 'hwfarmd stopped'" || {
    get journalctl -b -o short-monotonic --no-pager -u hwfarmd -n 15 | sed 's/^/  /'
    fail "no 'hwfarmd stopped' line"
  }
  run systemctl start hwfarmd
  wait_serving
}

check_remove_keeps_state() {
  run apt-get remove -y -q hwfarm >"$work/apt.log" || { cat "$work/apt.log"; fail "apt-get remove"; }
  expect "after remove" "$(get dpkg-query -W -f '${db:Status-Abbrev}' hwfarm)" "rc "
  get systemctl is-active -q hwfarmd && fail "hwfarmd still runs after remove"
  local f
  for f in /etc/hwfarm/hwfarm.toml /var/lib/hwfarm/hwfarm.db /var/log/hwfarm; do
    get test -e "$f" || fail "remove took $f"
  done
  echo "ok: stopped; /etc/hwfarm/hwfarm.toml, /var/lib/hwfarm/hwfarm.db and /var/log/hwfarm kept"
}

check_purge_leaves_nothing() {
  run apt-get purge -y -q hwfarm >"$work/apt.log" || { cat "$work/apt.log"; fail "apt-get purge"; }
  get dpkg-query -W hwfarm >/dev/null 2>&1 && fail "dpkg still knows hwfarm"
  local left
  # (/root and /tmp hold this test's own files: the package, the firmware,
  # the run's artifacts fetched by hwfarmctl.)
  left=$(get find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /root -o -path /tmp \) -prune -o \
           -name '*hwfarm*' -print)
  [[ -z $left ]] || fail "purge left: $left"
  # The system user stays, as Debian's packages leave theirs: files it owned
  # may remain elsewhere.
  get getent passwd hwfarm >/dev/null || fail "no hwfarm user (it is kept on purge)"
  echo "ok: purge left no file named *hwfarm* (the system user hwfarm stays)"
}

check_upgrade_keeps_state() { # DEB VERSION
  # The administrator's edit of the conffile, a run and a lease under the
  # previous version;
  sed -i 's/^name = "lab-01"/name = "lab-07"/' "$root/etc/hwfarm/hwfarm.toml"
  run systemctl reload hwfarmd
  wait_for 20 sh -c 'hwfarmctl status | grep -q "^agent: *lab-07"' || fail "the edit did not load"
  lease_and_run any
  local kept_run=$RUN_ID kept_state=$RUN_STATE pid
  echo "ok: run $kept_run ended under the previous version: $kept_state"
  KEPT_LEASE=$(get hwfarmctl -q lease acquire --type mps2-an385 --context manual --ttl 3600)
  KEPT_EXPIRY=$(get hwfarmctl --json lease show "$KEPT_LEASE" | json_field expires_at)
  pid=$(main_pid)
  # then the upgrade:
  install_package "$1" "$2"
  [[ $(main_pid) != "$pid" ]] || fail "the upgrade did not restart hwfarmd"
  echo "ok: restarted by the upgrade (main pid $pid -> $(main_pid))"
  expect "version in /v1/healthz" "$(get hwfarmctl --json status | json_field version)" "$2"
  expect "agent name (the conffile's edit)" "$(get hwfarmctl --json status | json_field agent)" lab-07
  lease_kept
  grep -q "\"state\":\"$kept_state\"" "$root/var/lib/hwfarm/runs/$kept_run/summary.json" ||
    fail "run $kept_run's record did not survive the upgrade"
  expect "run $kept_run's state after the upgrade" \
    "$(get hwfarmctl --json run show "$kept_run" | json_field state)" "$kept_state"
  run hwfarmctl lease show "$KEPT_LEASE"
  run hwfarmctl lease release "$KEPT_LEASE"
  # and the new version runs simulated boards (its postinst started the
  # launcher's socket, which the previous package may not have had).
  expect "hwfarm-launcher.socket after the upgrade" \
    "$(get systemctl is-enabled hwfarm-launcher.socket)/$(get systemctl is-active hwfarm-launcher.socket)" enabled/active
  lease_and_run
  echo "ok: run $RUN_ID under the new version: $RUN_STATE"
}
