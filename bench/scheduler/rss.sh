#!/usr/bin/env bash
# RSS and start-up of the real hami-scheduler at N nodes / P pods (issue 4 item 7, issue 18):
# starts `hami-sim apiserver`, fills it over its API (bench_scheduler populate), starts
# `hami-scheduler` against it and
#  1. waits for its first answered /filter (bench_scheduler probe ... 0: /filter is parked until
#     the first sync), printing the wall time since the start and the CPU time the scheduler and
#     the API server spent meanwhile (their shares of the start-up; the rest is waiting, e.g. on
#     the scheduler's client rate limiter, --kube-qps);
#  2. times 100 filters (each patches its pod and records an Event: two API calls, so with the
#     default --kube-qps 50 they are paced at ~40 ms each once the burst is spent; with
#     SCHED_FLAGS="--kube-qps 0" they time the scheduler);
#  3. reads VmRSS/VmHWM of the scheduler process only.
# Usage: bench/scheduler/rss.sh [BIN_DIR=build-rel/bin] [NODES=1000] [PODS=20000]
# SCHED_FLAGS (environment) adds hami-scheduler flags, e.g. SCHED_FLAGS="--kube-qps 0".
source "$(dirname "$0")/cluster.sh"

api_cpu0=$(cpu "$API_PID")
start=$(date +%s.%N)
"$BIN/hami-scheduler" --kubeconfig "$WORK/kubeconfig" --http_bind "127.0.0.1:$SCHED_PORT" \
  --metrics-bind-address "127.0.0.1:$METRICS_PORT" ${SCHED_FLAGS:-} >"$WORK/scheduler.log" 2>&1 &
SCHED_PID=$!
"$BIN/bench_scheduler" probe "$SCHED_PORT" "$NODES" 600 0
synced=$(echo "$(date +%s.%N) - $start" | bc)
sched_cpu=$(cpu "$SCHED_PID")
api_cpu=$(echo "$(cpu "$API_PID") - $api_cpu0" | bc)
echo "first filter answered after $synced s (flags: ${SCHED_FLAGS:-none}); CPU meanwhile:" \
  "hami-scheduler $sched_cpu s, hami-sim apiserver $api_cpu s"
echo "hami-scheduler synced: $(rss)"
"$BIN/bench_scheduler" probe "$SCHED_PORT" "$NODES" 600 100
echo "synced + 100 filters after $(echo "$(date +%s.%N) - $start" | bc) s"
echo "hami-scheduler at $NODES nodes / $PODS pods: $(rss)"
