#!/bin/sh
# firmware/hwfarm_report.c builds for every Cortex-M core family as strict,
# freestanding C99 (-Wall -Wextra -Werror -pedantic, conversions included),
# and needs nothing of a C library: the only symbols it leaves undefined are
# the compiler's own runtime helpers (libgcc's __aeabi_*: division and
# soft-float on cores without them).
#
#   check_report_build.sh ARM_NONE_EABI_GCC SOURCE_DIR WORK_DIR
set -eu
gcc=${1:?usage: check_report_build.sh GCC SOURCE_DIR WORK_DIR}
src=${2:?}
work=${3:?}
nm=$(dirname "$gcc")/arm-none-eabi-nm
mkdir -p "$work"
flags="-mthumb -Os -std=c99 -pedantic -ffreestanding -nostdlib -Wall -Wextra -Werror -Wconversion -Wsign-conversion -Wshadow -Wcast-qual"
status=0
for target in "cortex-m0" "cortex-m0plus" "cortex-m3" "cortex-m4 -mfloat-abi=hard -mfpu=fpv4-sp-d16" \
              "cortex-m7 -mfloat-abi=hard -mfpu=fpv5-d16" "cortex-m23" "cortex-m33"; do
  cpu=${target%% *}
  obj="$work/hwfarm_report-$cpu.o"
  # shellcheck disable=SC2086 # the flags are words
  if ! "$gcc" -mcpu=$target $flags -c "$src/firmware/hwfarm_report.c" -o "$obj"; then
    echo "FAIL $cpu: does not build"
    status=1
    continue
  fi
  others=$("$nm" -u "$obj" | awk '{print $2}' | grep -v '^__aeabi_' || true)
  if [ -n "$others" ]; then
    echo "FAIL $cpu: needs" $others
    status=1
  else
    echo "ok $cpu:" $("$nm" -u "$obj" | awk '{print $2}')
  fi
done
exit $status
