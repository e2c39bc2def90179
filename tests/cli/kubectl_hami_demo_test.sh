#!/bin/bash
# Issue 14's "done when" on the demo: `hami-sim run examples/demo.yaml --serve`, then
# `kubectl-hami inspect -o json` equals the report's per-GPU allocations (memory, cores, slices,
# pods) and `kubectl-hami pods -A -o json` lists all the report's pods with their devices (the
# report's per-container devices summed per UUID), the unschedulable one with its reason.
#
# Usage: kubectl_hami_demo_test.sh KUBECTL_HAMI HAMI_SIM DEMO_YAML
set -euo pipefail

kh=$1
sim=$2
demo=$3
work=$(mktemp -d)
sim_pid=
cleanup() {
  if [[ -n $sim_pid ]]; then kill -INT "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -n 20 "$work/sim.log" >&2 || true
  exit 1
}

export KUBECONFIG=$work/kubeconfig
mkfifo "$work/out"
"$sim" run "$demo" --serve --no-color --kubeconfig-out "$KUBECONFIG" --report "$work/report.json" \
  > "$work/out" 2> "$work/sim.log" &
sim_pid=$!
exec 3< "$work/out"
# The run prints its report, then "Ctrl-C stops it." once the cluster serves.
ready=
while read -r -t 90 line <&3; do
  if [[ $line == *"Ctrl-C stops it"* ]]; then ready=1; break; fi
done
[[ -n $ready ]] || fail "hami-sim run --serve did not come up"
cat <&3 > /dev/null &

want=$(jq -c '[.gpus[] | {node, uuid, memory: [.used_memory_mib, .memory_limit_mib],
  cores: [.used_cores, .cores_limit], slices: [.used_slots, .slots_limit], pods: (.pods | sort)}]
  | sort_by(.node, .uuid)' "$work/report.json")
got=$("$kh" inspect -o json | jq -c '[.nodes[] | .name as $n | .devices[] | {node: $n, uuid,
  memory: [.memory.allocated, .memory.total], cores: [.cores.allocated, .cores.total],
  slices: [.slices.used, .slices.total], pods}] | sort_by(.node, .uuid)') \
  || fail "inspect -o json"
[[ $(jq length <<< "$want") -gt 0 ]] || fail "the report has no GPUs"
[[ $got == "$want" ]] || fail "inspect -o json differs from the report:
got:  $got
want: $want"
echo "inspect -o json equals the report on $(jq length <<< "$want") GPUs"

want=$(jq -c '[.pods[] | {namespace, name, node: (if .node == "" then null else .node end),
  devices: ([.devices[] | {uuid, memory: .memory_mib, cores}] | group_by(.uuid)
    | map({uuid: .[0].uuid, memory: (map(.memory) | add), cores: (map(.cores) | add)}))}]
  | sort_by(.namespace, .name)' "$work/report.json")
got=$("$kh" pods -A -o json | jq -c '[.pods[] | {namespace, name, node,
  devices: [.devices[] | {uuid, memory, cores}]}]') || fail "pods -A -o json"
[[ $got == "$want" ]] || fail "pods -A -o json differs from the report:
got:  $got
want: $want"
echo "pods -A -o json lists the report's $(jq length <<< "$want") pods"
reason=$("$kh" pods -A -o json | jq -r '.pods[] | select(.node == null) | .reason')
[[ $reason == *"GPUs lack memory"*"No GPU has enough memory"* && $reason != *CardInsufficient* ]] \
  || fail "the unschedulable pod's reason is not in words: $reason"
echo "reason: $reason"
echo "PASS"
