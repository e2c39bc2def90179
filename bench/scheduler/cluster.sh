# Sourced by rss.sh and failover.sh: `hami-sim apiserver` as its own process, filled over its
# API by `bench_scheduler populate`, and the helpers both scripts read the scheduler with.
# Sets BIN, NODES, PODS (from the script's arguments), WORK, API_PORT, SCHED_PORT, METRICS_PORT
# and API_PID; the script sets SCHED_PID once it starts hami-scheduler. Cleans up on exit.
set -euo pipefail
BIN=${1:-build-rel/bin}
NODES=${2:-1000}
PODS=${3:-20000}
WORK=$(mktemp -d)
API_PORT=$((20000 + RANDOM % 20000))
SCHED_PORT=$((API_PORT + 1))
METRICS_PORT=$((API_PORT + 2))
API_PID=""
SCHED_PID=""
cleanup() {
  [[ -n "$SCHED_PID" ]] && kill "$SCHED_PID" 2>/dev/null || true
  [[ -n "$API_PID" ]] && kill "$API_PID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$BIN/hami-sim" apiserver --listen "127.0.0.1:$API_PORT" --kubeconfig-out "$WORK/kubeconfig" \
  >"$WORK/apiserver.log" 2>&1 &
API_PID=$!
for _ in $(seq 100); do [[ -s "$WORK/kubeconfig" ]] && break; sleep 0.1; done
"$BIN/bench_scheduler" populate "http://127.0.0.1:$API_PORT" "$NODES" "$PODS"

# CPU seconds (user + system) of a process so far.
cpu() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
# VmRSS and VmHWM of the scheduler.
rss() { awk '/^(VmRSS|VmHWM)/ {printf "%s %.1f MiB  ", $1, $2 / 1024} END {print ""}' \
  "/proc/$SCHED_PID/status"; }
