#!/usr/bin/env bash
# Run benchmark: how long a run takes end to end, next to the
# bare simulator it wraps, measured side by side (rounds alternate).
#
#   bench/run_bench.sh [BUILD_DIR] [ROUNDS]
#   RUNS_CONFIG="drain_ms = 0" bench/run_bench.sh ...   adds [runs] keys
#
# Ratios first: they hold on any CPU, where absolute times move with the
# machine. Rows (median of ROUNDS, each round runs A then B):
#   latency      `hwfarmctl run --out DIR pass.elf` on one simulated board with
#                the QEMU reference, from the command's start to its exit
#                (artifacts written and fetched), against a bare
#                `qemu-system-arm` of the same image from start to HWFARM END;
#                goal: at most 1.5x
#   sandbox      the bare QEMU inside bubblewrap's sandbox as hwfarmd starts
#                it (every namespace new, no capabilities, /usr read-only)
#                against the bare QEMU: the sandbox's own cost
#   floor        2 sandboxed QEMUs started together (a run's board and
#                reference), each until HWFARM END, against 1 the same way:
#                what sharing the cores costs, outside hwfarm; then the
#                latency run against that floor: what hwfarm adds. The
#                parallelism and fairness rows get their floors too: 3
#                QEMUs at once against 2, and 2 at once beside 4 sandboxed
#                QEMUs spinning in the hang image against 2 alone
#   parallelism  the same image on 2 boards + the reference (mode each)
#                against 1 board + the reference; goal: at most 1.3x
#   throughput   40 one-image runs over 2 boards (two clients, 20 runs each,
#                each with the reference), in runs per minute, against the
#                QEMU-bound limit: nproc cores / (2 QEMUs a run x the bare
#                run's time); goal: at least 80 %; then against the limit
#                the floor sets: nproc / 2 pairs of QEMUs at once, each pair
#                taking the floor row's time
#   fairness     the latency run on one lease while another lease's run of
#                4 images that hang (deadline 300 s) asks for every
#                simulator, against the latency run alone (the first row);
#                goal: at most 1.5x
set -euo pipefail
build=${1:-build}
rounds=${2:-9}
hwfarmd=$build/daemon/hwfarmd
hwfarmctl=$build/daemon/hwfarmctl
image=$build/firmware/hwfarm-pass.elf
qemu=$(command -v qemu-system-arm)
hang=$build/firmware/hwfarm-hang.elf
for f in "$hwfarmd" "$hwfarmctl" "$image" "$hang"; do [ -e "$f" ] || { echo "run_bench: $f is missing (build first)" >&2; exit 2; }; done

work=$(mktemp -d)
cleanup() {
  [ -n "${daemon:-}" ] && kill "$daemon" 2>/dev/null && wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cat >"$work/fleet.toml" <<EOF
[agent]
name = "run-bench"
tier = 3
listen = "unix:$work/hwfarmd.sock"
state_dir = "$work/state"
log_level = "warn"
anonymous = "loopback"
[runs]
max_simulators = 4
${RUNS_CONFIG:-}
[[worker]]
name = "w0"
EOF
for b in 0 1; do
  cat >>"$work/fleet.toml" <<EOF
[[worker.board]]
name = "sim-$b"
type = "mps2-an385"
driver = "qemu"
EOF
done
"$hwfarmd" --config "$work/fleet.toml" >"$work/hwfarmd.log" 2>&1 &
daemon=$!
# A socket of its own: a random TCP port could be another test's hwfarmd.
url=unix:$work/hwfarmd.sock
for _ in $(seq 1 100); do "$hwfarmctl" --url "$url" status >/dev/null 2>&1 && break; sleep 0.05; done
ctl() { "$hwfarmctl" --url "$url" "$@"; }

now() { date +%s%N; }
ms() { echo $(( ($2 - $1) / 1000000 )); }

# The bare simulator: the same sandbox-free QEMU command, until HWFARM END.
bare() {
  local start end line
  start=$(now)
  coproc Q { exec "$qemu" -M mps2-an385 -display none -monitor none -nic none -serial stdio -kernel "$image" 2>/dev/null; }
  while IFS= read -r line <&"${Q[0]}"; do [[ $line == "HWFARM END"* ]] && break; done
  end=$(now)
  kill "$Q_PID" 2>/dev/null || true
  wait "$Q_PID" 2>/dev/null || true
  ms "$start" "$end"
}

# The same inside bubblewrap, with the sandbox hwfarmd gives QEMU
# (drivers/qemu_board.cpp, sandboxArgv).
bwrap=$(command -v bwrap)
sandbox=("$bwrap" --new-session --die-with-parent --unshare-all --unshare-user --disable-userns --cap-drop ALL --clearenv
         --setenv PATH /usr/bin:/bin --ro-bind /usr /usr)
for top in /bin /sbin /lib /lib64 /lib32; do
  if [ -L "$top" ]; then sandbox+=(--symlink "$(readlink "$top")" "$top")
  elif [ -d "$top" ]; then sandbox+=(--ro-bind "$top" "$top"); fi
done
sandbox+=(--proc /proc --dev /dev --ro-bind "$image" "$image" --)
bare_sandboxed() {
  local start end line
  start=$(now)
  coproc Q { exec "${sandbox[@]}" "$qemu" -M mps2-an385 -display none -monitor none -nic none -serial stdio -kernel "$image" 2>/dev/null; }
  while IFS= read -r line <&"${Q[0]}"; do [[ $line == "HWFARM END"* ]] && break; done
  end=$(now)
  kill "$Q_PID" 2>/dev/null || true
  wait "$Q_PID" 2>/dev/null || true
  ms "$start" "$end"
}

run() { # LEASE MODE [IDS]: milliseconds of one hwfarmctl run; its id appended to IDS
  local start end said
  start=$(now)
  said=$(ctl run --lease "$1" --mode "$2" --out "$work/out" "$image") ||
    { printf 'run_bench: run failed:\n%s\n' "$said" >&2; exit 1; }
  end=$(now)
  rm -rf "$work/out"
  [ -z "${3:-}" ] || echo "$said" | awk '/^run run-/ {sub(":", "", $2); print $2}' | tail -1 >>"$3"
  ms "$start" "$end"
}

# N sandboxed QEMUs started together, until each printed HWFARM END: a
# run's two simulators (the board's and the reference) side by side, on
# the same cores, with nothing of hwfarm around them.
at_once() {
  local start end
  start=$(now)
  for _ in $(seq 1 "$1"); do
    ("${sandbox[@]}" "$qemu" -M mps2-an385 -display none -monitor none -nic none -no-reboot -serial stdio \
       -kernel "$image" 2>/dev/null | grep -q -m1 '^HWFARM END') &
  done
  wait
  end=$(now)
  ms "$start" "$end"
}

median() { sort -n | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }

one=$(ctl lease acquire --type mps2-an385 --count 1 --ttl 3600 -q)
lat_a=() lat_b=() box=() pair=() single=()
for _ in $(seq 1 "$rounds"); do
  lat_a+=("$(run "$one" shard "$work/latency-ids")")
  lat_b+=("$(bare)")
  box+=("$(bare_sandboxed)")
  single+=("$(at_once 1)")
  pair+=("$(at_once 2)")
done
ctl lease release "$one" >/dev/null

two=$(ctl lease acquire --type mps2-an385 --count 2 --ttl 3600 -q)
run_one() { # LEASE: one board (sim-0) and the reference
  local start end
  start=$(now)
  local said
  said=$(ctl run --lease "$1" --board sim-0 --out "$work/out" "$image") ||
    { printf 'run_bench: run failed:\n%s\n' "$said" >&2; exit 1; }
  end=$(now)
  rm -rf "$work/out"
  ms "$start" "$end"
}
par_a=() par_b=() trio=()
for _ in $(seq 1 "$rounds"); do
  par_a+=("$(run "$two" each)")
  par_b+=("$(run_one "$two")")
  trio+=("$(at_once 3)")
done
ctl lease release "$two" >/dev/null

# Throughput: two clients, one board each, 20 runs each.
stream() {
  local lease
  lease=$(ctl lease acquire --type mps2-an385 --count 1 --ttl 3600 -q)
  local said
  for _ in $(seq 1 20); do
    said=$(ctl run --lease "$lease" "$image") || { printf 'run_bench: run failed:\n%s\n' "$said" >&2; exit 1; }
  done
  ctl lease release "$lease" >/dev/null
}
start=$(now)
stream &
s1=$!
stream &
s2=$!
wait $s1 || exit 1
wait $s2 || exit 1
end=$(now)
total_ms=$(ms "$start" "$end")

# Fairness: a lease whose 4 images hang holds its share of the 4
# simulators (3) until it is cancelled; another lease's runs meanwhile.
for i in 1 2 3 4; do cp "$hang" "$work/h$i.elf"; done
hostile=$(ctl lease acquire --type mps2-an385 --count 1 --ttl 3600 -q)
stuck=$(ctl run --lease "$hostile" --no-wait --deadline 300 "$work"/h[1-4].elf | awk '{print $2}')
stuck=${stuck%:}
normal=$(ctl lease acquire --type mps2-an385 --count 1 --ttl 3600 -q)
fair=()
for _ in $(seq 1 "$rounds"); do fair+=("$(run "$normal" shard)"); done
ctl run cancel "$stuck" >/dev/null
# Its floor: 2 sandboxed QEMUs at once beside 4 that spin (the hanging
# lease's board and its 3 references), with nothing of hwfarm around.
spinning=()
for _ in 1 2 3 4; do
  # (the sandbox without its last "--", with the hang image bound too)
  "${sandbox[@]:0:${#sandbox[@]}-1}" --ro-bind "$hang" "$hang" -- "$qemu" -M mps2-an385 -display none \
    -monitor none -nic none -serial null -kernel "$hang" >/dev/null 2>&1 &
  spinning+=($!)
done
beside=()
for _ in $(seq 1 "$rounds"); do beside+=("$(at_once 2)"); done
kill "${spinning[@]}" 2>/dev/null || true
wait "${spinning[@]}" 2>/dev/null || true
ctl lease release "$normal" >/dev/null
ctl lease release "$hostile" >/dev/null

la=$(printf '%s\n' "${lat_a[@]}" | median)
lb=$(printf '%s\n' "${lat_b[@]}" | median)
sb=$(printf '%s\n' "${box[@]}" | median)
f1=$(printf '%s\n' "${single[@]}" | median)
f2=$(printf '%s\n' "${pair[@]}" | median)
f3=$(printf '%s\n' "${trio[@]}" | median)
fb=$(printf '%s\n' "${beside[@]}" | median)
pa=$(printf '%s\n' "${par_a[@]}" | median)
pb=$(printf '%s\n' "${par_b[@]}" | median)
fa=$(printf '%s\n' "${fair[@]}" | median)
cores=$(nproc)
# The most runs a minute this machine's QEMU allows: each run is 2 QEMUs
# (the board and the reference) of the bare run's time, `cores` at once.
limit=$(awk -v c="$cores" -v b="$lb" 'BEGIN {printf "%.0f", c * 60000 / (2 * b)}')
per_min=$(awk -v t="$total_ms" 'BEGIN {printf "%.0f", 40 * 60000 / t}')
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2fx", a / b}'; }
printf 'run benchmark: pass image, %d alternating rounds (median), %d cores, bare QEMU %d ms\n' "$rounds" "$cores" "$lb"
printf '%-48s %9s %9s %13s %13s\n' "" "ratio" "goal" "measured" "baseline"
printf '%-48s %9s %9s %10s ms %10s ms\n' "latency: run (1 board + ref) vs bare QEMU" "$(ratio "$la" "$lb")" "<= 1.50x" "$la" "$lb"
printf '%-48s %9s %9s %10s ms %10s ms\n' "sandbox: bare QEMU in bubblewrap vs bare QEMU" "$(ratio "$sb" "$lb")" "" "$sb" "$lb"
printf '%-48s %9s %9s %10s ms %10s ms\n' "floor: 2 sandboxed QEMUs at once vs 1" "$(ratio "$f2" "$f1")" "" "$f2" "$f1"
printf '%-48s %9s %9s %10s ms %10s ms\n' "latency: run vs its floor (2 QEMUs at once)" "$(ratio "$la" "$f2")" "" "$la" "$f2"
printf '%-48s %9s %9s %10s ms %10s ms\n' "parallelism: 2 boards + ref vs 1 board + ref" "$(ratio "$pa" "$pb")" "<= 1.30x" "$pa" "$pb"
printf '%-48s %9s %9s %10s ms %10s ms\n' "  its floor: 3 sandboxed QEMUs at once vs 2" "$(ratio "$f3" "$f2")" "" "$f3" "$f2"
printf '%-48s %8s%% %9s %9s/min %9s/min\n' "throughput: 40 runs over 2 boards vs QEMU limit" \
  "$(awk -v a="$per_min" -v b="$limit" 'BEGIN {printf "%.0f", 100 * a / b}')" ">= 80%" "$per_min" "$limit"
# The limit the floor sets: a run's 2 QEMUs take f2 ms on 2 cores together.
floor_limit=$(awk -v c="$cores" -v s="$f2" 'BEGIN {printf "%.0f", (c / 2) * 60000 / s}')
printf '%-48s %8s%% %9s %9s/min %9s/min\n' "throughput: the same vs the floor's limit" \
  "$(awk -v a="$per_min" -v b="$floor_limit" 'BEGIN {printf "%.0f", 100 * a / b}')" "" "$per_min" "$floor_limit"
printf '%-48s %9s %9s %10s ms %10s ms\n' "fairness: run beside a hanging lease vs alone" "$(ratio "$fa" "$la")" "<= 1.50x" "$fa" "$la"
printf '%-48s %9s %9s %10s ms %10s ms\n' "  its floor: 2 QEMUs beside 4 spinning vs alone" "$(ratio "$fb" "$f2")" "" "$fb" "$f2"

# Where the latency rounds' time went: the records' timings (docs/runs.md,
# "Timings"), medians over the rounds, beside the whole command's.
while read -r id; do ctl --json run show "$id"; done <"$work/latency-ids" >"$work/latency-records"
/usr/bin/python3 - "$work/latency-records" "$la" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
def med(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values)) if values else None
def of(reference, key):
    return med([a.get("timings", {}).get(key) for r in runs for a in r["attempts"] if a["reference"] == reference])
rows = [("the board (a QEMU board): flash (staged)", of(False, "flash_ms")),
        ("  power-on to its console's first line", of(False, "first_byte_ms")),
        ("  power-on to END", of(False, "end_ms")),
        ("  the drain after END (runs.drain_ms)", of(False, "drain_ms")),
        ("the reference: sandbox and QEMU up", of(True, "start_ms")),
        ("  spawn to its console's first byte", of(True, "first_byte_ms")),
        ("  spawn to END", of(True, "end_ms")),
        ("  the drain after END (runs.drain_ms)", of(True, "drain_ms")),
        ("the run: its start to every attempt done", med([r.get("timings", {}).get("attempts_ms") for r in runs])),
        ("the command: upload, start, files, record, fetch", int(sys.argv[2]))]
print("where a run's time goes (%d runs, median ms)" % len(runs))
for name, ms in rows:
    print("  %-52s %6s" % (name, "-" if ms is None else ms))
PY
