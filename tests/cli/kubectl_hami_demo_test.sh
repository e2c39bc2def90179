#!/bin/bash
# Issue 14's "done when" on the demo: `hami-sim run examples/demo.yaml --serve`, then
# `kubectl-hami inspect -o json` equals the report's per-GPU allocations (memory, cores, slices,
# pods) and `kubectl-hami pods -A -o json` lists all the report's pods with their devices (the
# report's per-container devices summed per UUID), the unschedulable one with its reason; and
# `kubectl-hami explain` of the unschedulable pod says in words that no GPU has enough memory.
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

# explain of the unschedulable pod says, in words, that no GPU has enough memory: per node, every
# GPU lacks memory with the figures (the request, each GPU's free memory from the report).
pending=$(jq -r '.pods[] | select(.node == "") | "\(.namespace) \(.name)"' "$work/report.json")
read -r ns name <<< "$pending"
out=$("$kh" explain "$name" -n "$ns") || fail "explain $ns/$name exited $?"
echo "$out"
[[ $(tail -n 1 <<< "$out") == "Pending: no GPU has enough memory for the request." ]] \
  || fail "explain: the summary does not say that no GPU has enough memory"
want=$(jq -c '[.gpus | group_by(.node)[] | {name: .[0].node, fit: false,
  reason: "\(length)/\(length) CardInsufficientMemory",
  words: "\(length) of \(length) GPUs lack memory: wants 100000 MiB, free \(
    [.[] | .memory_limit_mib - .used_memory_mib] as $f
    | if ($f | length) > 1 and ($f | unique | length) == 1 then "\($f[0]) each"
      else $f | map(tostring) | join(", ") end)"}]' "$work/report.json")
got=$("$kh" explain "$name" -n "$ns" -o json | jq -c '[.nodes[] | {name, fit, reason, words}]') \
  || fail "explain -o json"
[[ $got == "$want" ]] || fail "explain -o json nodes differ from the report:
got:  $got
want: $want"
echo "explain says no GPU has enough memory, with every GPU's free memory from the report"

# top: when the run's monitors answered (the report carries each GPU's measured_memory_mib, the
# sum of hami_vgpu_memory_used_bytes over its containers), top reads the same /metrics through
# the API server's pod proxy: per GPU its containers' used memory adds up to the report's.
if jq -e '[.gpus[] | has("measured_memory_mib")] | any' "$work/report.json" > /dev/null; then
  "$kh" top -o json > "$work/top.json" || fail "top -o json"
  jq -e '[.nodes[] | .error] | all(. == null)' "$work/top.json" > /dev/null \
    || fail "top: a monitor did not answer through the proxy: $(jq -c '[.nodes[] | {name, error}]' "$work/top.json")"
  want=$(jq -c '[.gpus[] | {uuid, used: (.measured_memory_mib // 0)}] | sort_by(.uuid)' \
    "$work/report.json")
  got=$(jq -c --slurpfile top "$work/top.json" '[.gpus[] | .uuid as $u | {uuid: $u,
    used: ([$top[0].nodes[].containers[] | select(.uuid == $u and .used != null)
      | .used.memory // 0] | add // 0)}] | sort_by(.uuid)' "$work/report.json")
  [[ $got == "$want" ]] || fail "top's used memory per GPU differs from the report's measured:
got:  $got
want: $want"
  # Every allocation of the report shows, per container, with its allocated memory.
  want=$(jq -c '[.pods[] | select(.node != "") | .devices[] | .memory_mib] | add' "$work/report.json")
  got=$(jq -c '[.nodes[].containers[] | .allocated.memory // 0] | add' "$work/top.json")
  [[ $got == "$want" ]] || fail "top's allocated memory $got, the report's $want"
  echo "top: used memory per GPU equals the report's measured, allocations all shown"
else
  echo "NOTE: this hami-sim runs no monitors; top not checked against measurements"
fi
echo "PASS"
