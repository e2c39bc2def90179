#!/usr/bin/env bash
# Leader failover of a 2-replica hami-scheduler at N nodes / P pods (issue 31 item 5): how long
# after kube-scheduler's Lease changes hands the standby replica answers its first /filter.
#
# Starts `hami-sim apiserver`, fills it (bench_scheduler populate), creates the Lease
# kube-system/kube-scheduler held by another replica, and starts `hami-scheduler --leader-elect`
# as the standby. Once the standby is ready (its pod informer synced: /readyz 200; it serves no
# filter and writes nothing while a follower), the Lease is handed to it (holderIdentity
# "<hostname>_<id>", as kube-scheduler writes it) and the clock starts; it stops when a /filter is
# answered (bench_scheduler probe: /filter is parked until the new leader's registration pass has
# put the node rows in the index). Prints both times, the CPU the standby spent on each, and its
# RSS while standing by and after taking over.
#
# Not included: how long kube-scheduler's own standby takes to win the Lease once the leader
# died (its --leader-elect-lease-duration, 15 s by default, plus up to a retry period of 2 s).
# Usage: bench/scheduler/failover.sh [BIN_DIR=build-rel/bin] [NODES=1000] [PODS=20000]
# SCHED_FLAGS (environment) adds hami-scheduler flags.
source "$(dirname "$0")/cluster.sh"

LEASE_URL="http://127.0.0.1:$API_PORT/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
lease() {  # lease HOLDER: the Lease as kube-scheduler writes it, renewed now
  local now
  now=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
  printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"kube-scheduler","namespace":"kube-system"},"spec":{"holderIdentity":"%s","leaseDurationSeconds":15,"acquireTime":"%s","renewTime":"%s","leaseTransitions":0}}' \
    "$1" "$now" "$now"
}
curl -sf -X POST -H 'Content-Type: application/json' -d "$(lease other-replica_1)" "$LEASE_URL" \
  >/dev/null

start=$(date +%s.%N)
"$BIN/hami-scheduler" --kubeconfig "$WORK/kubeconfig" --http_bind "127.0.0.1:$SCHED_PORT" \
  --metrics-bind-address "127.0.0.1:$METRICS_PORT" --leader-elect \
  --leader-elect-resource-name kube-scheduler --leader-elect-resource-namespace kube-system \
  ${SCHED_FLAGS:-} >"$WORK/scheduler.log" 2>&1 &
SCHED_PID=$!
until curl -sf "http://127.0.0.1:$SCHED_PORT/readyz" >/dev/null; do
  kill -0 "$SCHED_PID" 2>/dev/null || { cat "$WORK/scheduler.log"; exit 1; }
  sleep 0.05
done
standby=$(echo "$(date +%s.%N) - $start" | bc)
standby_cpu=$(cpu "$SCHED_PID")
echo "standby ready after $standby s (CPU $standby_cpu s); $(rss)"
if curl -s -m 2 -X POST -H 'Content-Type: application/json' \
  -d '{"Pod":{"metadata":{"name":"x","namespace":"default"}},"NodeNames":["node-0"]}' \
  "http://127.0.0.1:$SCHED_PORT/filter" | grep -q '"Error":""'; then
  echo "the standby answered a filter as a follower" >&2
  exit 1
fi

t0=$(date +%s.%N)
cpu0=$(cpu "$SCHED_PID")
curl -sf -X PUT -H 'Content-Type: application/json' \
  -d "$(lease "$(hostname)_failover")" "$LEASE_URL/kube-scheduler" >/dev/null
"$BIN/bench_scheduler" probe "$SCHED_PORT" "$NODES" 600 0
took=$(echo "$(date +%s.%N) - $t0" | bc)
echo "first filter of the new leader $took s after the Lease changed hands" \
  "(CPU $(echo "$(cpu "$SCHED_PID") - $cpu0" | bc) s); $(rss)"
