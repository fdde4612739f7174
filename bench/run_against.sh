#!/usr/bin/env bash
# The run benchmark with another build as the baseline column: the same
# runs on this build's hwfarmd and on the other's, side by side, rounds
# alternating (A then B in each round), so a change of the machine's speed
# during the measurement moves both columns.
#
#   bench/run_against.sh BUILD_DIR BASELINE_BUILD_DIR [ROUNDS]
#
# Each build's hwfarmd runs with the same fleet (2 simulated mps2-an385
# boards) and is driven by its own hwfarmctl; the image is BUILD_DIR's
# pass firmware for both (IMAGES=own: each build's own pass firmware, for a
# change of the test firmware). Rows (median of ROUNDS):
#   latency      `hwfarmctl run --out DIR pass.elf` on one board with the
#                QEMU reference, from the command's start to its exit
#   parallelism  the same image on 2 boards + the reference (mode each)
#   throughput   20 one-image runs over 2 boards (two clients, 10 runs
#                each), in runs per minute (ROUNDS / 3 rounds, at least 1)
# The ratio column is this build over the baseline (for throughput,
# baseline over this build: above 1 is slower either way).
# RUNS_CONFIG="key = value" (lines of TOML) goes to this build's [runs] only (a
# key the baseline does not know, e.g. RUNS_CONFIG="drain_ms = 0" to leave
# out the drain window after END that a baseline without one lacks).
set -euo pipefail
shopt -s inherit_errexit # a run that fails inside $(pair ...) ends the benchmark
a_build=${1:?usage: run_against.sh BUILD_DIR BASELINE_BUILD_DIR [ROUNDS]}
b_build=${2:?usage: run_against.sh BUILD_DIR BASELINE_BUILD_DIR [ROUNDS]}
rounds=${3:-15}
image_a=$a_build/firmware/hwfarm-pass.elf
image_b=$image_a
[ "${IMAGES:-same}" = own ] && image_b=$b_build/firmware/hwfarm-pass.elf
image() { if [ "$1" = a ]; then echo "$image_a"; else echo "$image_b"; fi; }
for f in "$a_build/daemon/hwfarmd" "$a_build/daemon/hwfarmctl" "$b_build/daemon/hwfarmd" \
         "$b_build/daemon/hwfarmctl" "$image_a" "$image_b"; do
  [ -e "$f" ] || { echo "run_against: $f is missing (build first)" >&2; exit 2; }
done

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# start SIDE BUILD: that build's hwfarmd on $work/SIDE/hwfarmd.sock
start() {
  local side=$1 build=$2 dir=$work/$1
  mkdir -p "$dir"
  cat >"$dir/fleet.toml" <<EOF
[agent]
name = "run-bench-$side"
tier = 3
listen = "unix:$dir/hwfarmd.sock"
state_dir = "$dir/state"
log_level = "warn"
anonymous = "loopback"
[runs]
max_simulators = 4
$([ "$side" = a ] && printf '%s\n' "${RUNS_CONFIG:-}")
[[worker]]
name = "w0"
[[worker.board]]
name = "sim-0"
type = "mps2-an385"
driver = "qemu"
[[worker.board]]
name = "sim-1"
type = "mps2-an385"
driver = "qemu"
EOF
  "$build/daemon/hwfarmd" --config "$dir/fleet.toml" >"$dir/hwfarmd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 100); do ctl "$side" status >/dev/null 2>&1 && return 0; sleep 0.05; done
  echo "run_against: the $side hwfarmd does not answer:" >&2
  cat "$dir/hwfarmd.log" >&2
  exit 1
}
ctl() { # SIDE ARGS...
  local side=$1
  shift
  local build=$a_build
  [ "$side" = b ] && build=$b_build
  "$build/daemon/hwfarmctl" --url "unix:$work/$side/hwfarmd.sock" "$@"
}
start a "$a_build"
start b "$b_build"

now() { date +%s%N; }
ms() { echo $((($2 - $1) / 1000000)); }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

run() { # SIDE LEASE MODE: milliseconds of one hwfarmctl run
  local start end
  start=$(now)
  ctl "$1" run --lease "$2" --mode "$3" --out "$work/$1/out" "$(image "$1")" >/dev/null ||
    { echo "run_against: a run on $1 failed" >&2; exit 1; }
  end=$(now)
  rm -rf "$work/$1/out"
  ms "$start" "$end"
}

pair() { # COUNT MODE: "A B", the medians of ROUNDS runs in MODE on COUNT boards a side
  local count=$1 mode=$2 lease_a lease_b times_a=() times_b=()
  lease_a=$(ctl a lease acquire --type mps2-an385 --count "$count" --ttl 3600 -q)
  lease_b=$(ctl b lease acquire --type mps2-an385 --count "$count" --ttl 3600 -q)
  for _ in $(seq 1 "$rounds"); do
    times_a+=("$(run a "$lease_a" "$mode")")
    times_b+=("$(run b "$lease_b" "$mode")")
  done
  ctl a lease release "$lease_a" >/dev/null
  ctl b lease release "$lease_b" >/dev/null
  echo "$(median "${times_a[@]}") $(median "${times_b[@]}")"
}
latency=$(pair 1 shard)
parallelism=$(pair 2 each)

stream() { # SIDE: one client, 10 runs on a lease of its own
  local lease
  lease=$(ctl "$1" lease acquire --type mps2-an385 --count 1 --ttl 3600 -q)
  for _ in $(seq 1 10); do ctl "$1" run --lease "$lease" "$(image "$1")" >/dev/null; done
  ctl "$1" lease release "$lease" >/dev/null
}
throughput() { # SIDE: runs per minute of two streams
  local start took s1 s2
  start=$(now)
  stream "$1" &
  s1=$!
  stream "$1" &
  s2=$!
  wait $s1 $s2
  took=$(ms "$start" "$(now)")
  echo $((20 * 60000 / (took > 0 ? took : 1)))
}
thr_rounds=$((rounds / 3 > 0 ? rounds / 3 : 1))
thr_a=() thr_b=()
for _ in $(seq 1 "$thr_rounds"); do
  thr_a+=("$(throughput a)")
  thr_b+=("$(throughput b)")
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3fx", a / b; else print "-" }'; }
read -r la lb <<<"$latency"
read -r pa pb <<<"$parallelism"
ta=$(median "${thr_a[@]}") tb=$(median "${thr_b[@]}")
echo "run benchmark against a baseline build: $rounds alternating rounds (median), $(nproc) cores"
printf '%-44s %12s %12s %9s\n' "" "this build" "baseline" "ratio"
printf '%-44s %9s ms %9s ms %9s\n' "latency: run (1 board + reference)" "$la" "$lb" "$(ratio "$la" "$lb")"
printf '%-44s %9s ms %9s ms %9s\n' "parallelism: run (2 boards + reference)" "$pa" "$pb" "$(ratio "$pa" "$pb")"
printf '%-44s %7s/min %7s/min %9s\n' "throughput: 20 runs over 2 boards ($thr_rounds rounds)" "$ta" "$tb" "$(ratio "$tb" "$ta")"
