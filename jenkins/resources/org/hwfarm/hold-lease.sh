#!/bin/sh
# The command hwfarmLease runs under `hwfarmctl lease run` while its
# pipeline body holds the lease:
#   hold-lease.sh ENV_FILE STOP_FILE
# writes the lease's variables (HWFARM_LEASE_ID, HWFARM_BOARD_COUNT,
# HWFARM_BOARD_<i>_*) to ENV_FILE, readable by its owner only (whole, by
# rename), then waits until STOP_FILE exists (the body ended). Nothing else
# of the environment goes to disk: HWFARM_TOKEN, when Jenkins' credentials
# set it, stays in memory. hwfarmctl renews the lease meanwhile and
# releases it when this ends, or when the build is aborted (SIGTERM to the
# step's processes); hwfarmLease then removes the directory.
set -eu
umask 077
env_file=$1
stop_file=$2
env | grep -E '^HWFARM_(LEASE_ID|BOARD_COUNT|BOARD_[0-9]+_[A-Z_]+)=' > "$env_file.tmp"
mv "$env_file.tmp" "$env_file"
while [ ! -e "$stop_file" ]; do sleep 0.2; done
