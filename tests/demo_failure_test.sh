#!/bin/sh
# `make demo`'s walkthrough with a step that fails (its test image is no
# ELF, so the flash is refused): the demo exits with the error and its
# hwfarmd is stopped, not left running in its own session.
#   demo_failure_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -u
src=$1 build=$2 work=$3
rm -rf "$work"
mkdir -p "$work/build/daemon" "$work/build/firmware" "$work/run"
ln -s "$build/daemon/hwfarmd" "$work/build/daemon/hwfarmd"
ln -s "$build/daemon/hwfarmctl" "$work/build/daemon/hwfarmctl"
echo "not an image" >"$work/build/firmware/hwfarm-pass.elf"
cd "$work/run" || exit 1
DEMO_ONESHOT=1 "$src/scripts/demo.sh" "$work/build" >demo.log 2>&1
rc=$?
cat demo.log
[ $rc -ne 0 ] || { echo "FAIL: the demo exited 0 although its flash failed"; exit 1; }
grep -q "a step failed (exit $rc): hwfarmd stopped" demo.log || { echo "FAIL: no 'hwfarmd stopped' line"; exit 1; }
# No hwfarmd of this demo (its state dir is $work/run/.hwfarm-state) runs on.
for p in /proc/[0-9]*; do
  [ "$(readlink "$p/cwd" 2>/dev/null)" = "$work/run" ] || continue
  case $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) in
    *hwfarmd*) echo "FAIL: hwfarmd ${p#/proc/} still runs"; exit 1 ;;
  esac
done
echo "ok: exit $rc, hwfarmd stopped"
