#!/bin/sh
# The command hwfarmLease runs under `hwfarmctl lease run` while its
# pipeline body holds the lease:
#   hold-lease.sh ENV_FILE STOP_FILE
# writes the lease's HWFARM_* environment to ENV_FILE (whole, by rename),
# then waits until STOP_FILE exists (the body ended). hwfarmctl renews the
# lease meanwhile and releases it when this ends, or when the build is
# aborted (SIGTERM to the step's processes).
set -eu
env_file=$1
stop_file=$2
env | grep '^HWFARM_' > "$env_file.tmp"
mv "$env_file.tmp" "$env_file"
while [ ! -e "$stop_file" ]; do sleep 0.2; done
