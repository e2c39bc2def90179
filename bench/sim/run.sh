#!/usr/bin/env bash
# The hami-sim benchmarks (issue 7): runs examples/burst.yaml and examples/scale.yaml N times each
# with `hami-sim run --report` and prints the median of each figure. Not a test: it takes minutes.
#   bench/sim/run.sh [RUNS] [SCENARIO...]     (default: 5 runs of burst and scale)
# Environment: HAMI_SIM (default build/bin/hami-sim; use a Release build), OUT (report dir).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIM=${HAMI_SIM:-build/bin/hami-sim}
RUNS=${1:-5}
shift || true
SCENARIOS=("$@")
[[ ${#SCENARIOS[@]} -gt 0 ]] || SCENARIOS=(examples/burst.yaml examples/scale.yaml)
OUT=${OUT:-$(mktemp -d /tmp/hami-sim-bench-XXXXXX)}
mkdir -p "$OUT"
KEYS=(pods_total pods_running pods_unschedulable overcommitted_devices wall_seconds setup_seconds
      pods_per_second schedule_latency_p50_ms schedule_latency_p99_ms bind_latency_p50_ms
      bind_latency_p99_ms)

# A top-level number of the report (dumped with indent 2: one key per line).
field() { sed -n "s/^  \"$2\": \\([-0-9.e+]*\\),\\{0,1\\}\$/\\1/p" "$1"; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $SIM"
for scenario in "${SCENARIOS[@]}"; do
  name=$(basename "$scenario" .yaml)
  for i in $(seq 1 "$RUNS"); do
    rc=0
    "$SIM" run "$scenario" --report "$OUT/$name-$i.json" --log-file "$OUT/$name-$i.log" \
      --no-color > "$OUT/$name-$i.txt" || rc=$?
    # The load average matters on a shared machine: figures are only comparable at similar load.
    echo "$name run $i: exit $rc, wall $(field "$OUT/$name-$i.json" wall_seconds) s," \
      "$(field "$OUT/$name-$i.json" pods_per_second) pods/s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
  echo "== $name: median of $RUNS runs"
  for key in "${KEYS[@]}"; do
    printf '  %-26s %s\n' "$key" "$(for f in "$OUT/$name"-*.json; do field "$f" "$key"; done | median)"
  done
done
echo "reports, logs and text output: $OUT"
