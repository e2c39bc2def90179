#!/bin/bash
# kubectl-hami against `hami-sim apiserver`: a node carrying the seed's register, handshake and
# node-lock annotations, a pod holding an allocation on it, a pending pod with a scheduling
# failure, a finished pod (not counted) and a pod without HAMi resources (not listed). Checks
# `inspect -o json`, `pods -A -o json`, `pods -n`, `explain`, `top` (allocations only, and through
# the pod proxy to a monitor pod served by python3's http.server),
# decode/encode, the tables, colour on a pty only, --context, the exit codes, and that kubectl
# finds the plugin on PATH and runs `kubectl hami inspect`. Objects are created with kubectl.
#
# Usage: kubectl_hami_sim_test.sh KUBECTL_HAMI HAMI_SIM
#   Exits 77 (ctest: skipped) when kubectl is absent.
set -euo pipefail

kh=$1
sim=$2
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_kubectl
sim_setup
sim_start "$sim"

k() { timeout 60 kubectl "$@"; }
u0=GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec
u1=GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448
register='[{"id":"'$u0'","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true},{"id":"'$u1'","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]'
lock='2024-01-23T04:30:04Z,default,train-0'

k create namespace team-a > /dev/null
cat > "$work/objects.json" <<JSON
{"apiVersion":"v1","kind":"List","items":[
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","annotations":{
   "hami.io/node-nvidia-register":$(jq -Rn --arg v "$register" '$v'),
   "hami.io/node-handshake":"Requesting_2024-01-23 04:30:04",
   "hami.io/mutex.lock":"$lock"}}},
 {"apiVersion":"v1","kind":"Node","metadata":{"name":"cpu-1"}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"train-0","namespace":"default","annotations":{
   "hami.io/vgpu-node":"gpu-1","hami.io/bind-phase":"allocating",
   "hami.io/vgpu-devices-allocated":"$u1,NVIDIA,3000,30:;;$u0,NVIDIA,1000,0:;",
   "hami.io/vgpu-devices-to-allocate":"$u1,NVIDIA,3000,30:;;$u0,NVIDIA,1000,0:;"}},
  "spec":{"nodeName":"gpu-1","containers":[
   {"name":"a","image":"x","resources":{"limits":{"nvidia.com/gpu":"1"}}},
   {"name":"b","image":"x"},
   {"name":"c","image":"x","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"big","namespace":"team-a"},
  "spec":{"schedulerName":"hami-scheduler","containers":[{"name":"a","image":"x","resources":{"limits":{"nvidia.com/gpu":"1","nvidia.com/gpumem":"40000"}}}]}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"done","namespace":"team-a","annotations":{
   "hami.io/vgpu-node":"gpu-1","hami.io/bind-phase":"success",
   "hami.io/vgpu-devices-allocated":"$u0,NVIDIA,5000,50:;"}},
  "spec":{"nodeName":"gpu-1","containers":[{"name":"a","image":"x","resources":{"limits":{"nvidia.com/gpu":"1"}}}]}},
 {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default"},
  "spec":{"containers":[{"name":"a","image":"x"}]}}
]}
JSON
k create -f "$work/objects.json" > /dev/null || fail "kubectl create"
# Status: the pending pod's scheduling failure, the finished pod's phase.
k patch pod big -n team-a --subresource=status --type=merge -p \
  '{"status":{"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/2 nodes are available: 1 node(s) had no GPU with enough memory."}]}}' \
  > /dev/null || fail "patch big status"
k patch pod done -n team-a --subresource=status --type=merge -p '{"status":{"phase":"Succeeded"}}' \
  > /dev/null || fail "patch done status"

# inspect -o json: the finished pod holds nothing; train-0's containers collapse per device.
got=$("$kh" inspect -o json) || fail "inspect -o json exited $?"
want='{"nodes":[{"name":"gpu-1","devices":[{"index":0,"uuid":"'$u0'","type":"NVIDIA-Tesla V100-PCIE-32GB","vendor":"NVIDIA","health":true,"memory":{"allocated":1000,"total":32768},"cores":{"allocated":0,"total":100},"slices":{"used":1,"total":10},"pods":["default/train-0"]},{"index":1,"uuid":"'$u1'","type":"NVIDIA-Tesla V100-PCIE-32GB","vendor":"NVIDIA","health":true,"memory":{"allocated":3000,"total":32768},"cores":{"allocated":30,"total":100},"slices":{"used":1,"total":10},"pods":["default/train-0"]}],"handshake":"Requesting_2024-01-23 04:30:04","lock":"'$lock'"}]}'
[[ $got == "$want" ]] || fail "inspect -o json:
got:  $got
want: $want"
echo "inspect -o json: ok"

got=$("$kh" inspect gpu-1 -o json | jq -c '[.nodes[].name]')
[[ $got == '["gpu-1"]' ]] || fail "inspect gpu-1: nodes $got"
# A node without HAMi devices shows only when named.
got=$("$kh" inspect cpu-1 gpu-1 -o json | jq -c '[.nodes[] | [.name, (.devices | length)]]')
[[ $got == '[["cpu-1",0],["gpu-1",2]]' ]] || fail "inspect cpu-1 gpu-1: $got"
set +e
"$kh" inspect nosuch > /dev/null 2> "$work/err"; rc=$?
set -e
[[ $rc == 1 ]] || fail "inspect nosuch: exit $rc, want 1"
grep -q 'node "nosuch": not found' "$work/err" || fail "inspect nosuch: $(cat "$work/err")"

# inspect table: the device rows, the node total and the lock holder.
table=$("$kh" inspect) || fail "inspect exited $?"
echo "$table"
echo "$table" | grep -Eq "^gpu-1 +1 +$u1 +NVIDIA-Tesla V100-PCIE-32GB +NVIDIA +true +3000/32768 +30/100 +1/10 +default/train-0$" \
  || fail "inspect table: no row for $u1"
echo "$table" | grep -Eq '^gpu-1 +total +2 devices +4000/65536 +30/200 +2/20$' || fail "inspect table: no total"
echo "$table" | grep -Eq '^gpu-1 +Requesting_2024-01-23 04:30:04 +default/train-0 +[0-9]+[dy]$' \
  || fail "inspect table: no lock holder"
[[ $("$kh" inspect --no-headers | grep -c NODE) == 0 ]] || fail "--no-headers printed a header"

# pods -A -o json: HAMi pods only (web has no HAMi resource), pending one with its reason.
got=$("$kh" pods -A -o json) || fail "pods -A -o json exited $?"
want='{"pods":[{"namespace":"default","name":"train-0","node":"gpu-1","bindPhase":"allocating","devices":[{"uuid":"'$u0'","vendor":"NVIDIA","memory":1000,"cores":0},{"uuid":"'$u1'","vendor":"NVIDIA","memory":3000,"cores":30}],"reason":null},{"namespace":"team-a","name":"big","node":null,"bindPhase":null,"devices":[],"reason":"0/2 nodes are available: 1 node(s) had no GPU with enough memory."},{"namespace":"team-a","name":"done","node":"gpu-1","bindPhase":"success","devices":[{"uuid":"'$u0'","vendor":"NVIDIA","memory":5000,"cores":50}],"reason":null}]}'
[[ $got == "$want" ]] || fail "pods -A -o json:
got:  $got
want: $want"
echo "pods -A -o json: ok"

# -n, the context's namespace (default), --context, and -n with -A (usage error).
[[ $("$kh" pods -n team-a -o json | jq -c '[.pods[].name]') == '["big","done"]' ]] || fail "pods -n team-a"
[[ $("$kh" pods -o json | jq -c '[.pods[].name]') == '["train-0"]' ]] || fail "pods (default ns)"
ctx=$(k config current-context)
[[ $("$kh" pods --context "$ctx" -o json | jq -c '[.pods[].name]') == '["train-0"]' ]] \
  || fail "pods --context $ctx"
# --kubeconfig in both forms, ~/.kube/config when neither it nor KUBECONFIG is given, and
# kubectl's short flag forms.
kc=$KUBECONFIG
[[ $(env -u KUBECONFIG "$kh" --kubeconfig "$kc" pods -nteam-a -ojson | jq -c '[.pods[].name]') \
  == '["big","done"]' ]] || fail "--kubeconfig FILE -nteam-a -ojson"
[[ $(env -u KUBECONFIG "$kh" pods --kubeconfig="$kc" --namespace=team-a --output=json \
  | jq -c '[.pods[].name]') == '["big","done"]' ]] || fail "--kubeconfig=FILE --namespace= --output="
mkdir -p "$HOME/.kube" && cp "$kc" "$HOME/.kube/config"
[[ $(env -u KUBECONFIG "$kh" pods -A -o json | jq '.pods | length') == 3 ]] || fail "~/.kube/config"
set +e
env -u KUBECONFIG "$kh" --kubeconfig "$work/nosuch" pods > /dev/null 2> "$work/err"; rc=$?
[[ $rc == 1 && -s $work/err ]] || fail "--kubeconfig of a missing file: exit $rc, want 1 and a message"
"$kh" pods --context nosuch > /dev/null 2>&1; rc=$?
[[ $rc == 1 ]] || fail "--context nosuch: exit $rc, want 1"
"$kh" pods -n a -A > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "-n with -A: exit $rc, want 2"
"$kh" frobnicate > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "unknown command: exit $rc, want 2"
"$kh" pods -o yaml > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "-o yaml: exit $rc, want 2"
"$kh" pods extra > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "pods with an argument: exit $rc, want 2"
"$kh" > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "no command: exit $rc, want 2"
"$kh" --help | grep -q '^  kubectl hami inspect' || fail "--help does not describe inspect"
set -e
table=$("$kh" pods -A) || fail "pods -A exited $?"
echo "$table"
echo "$table" | grep -Eq "^team-a +big +<none> +<none> +<none> +[0-9]+s$" || fail "pods table: no row for big"
echo "$table" | grep -q '^team-a/big pending: 0/2 nodes are available' || fail "pods table: no reason"

# explain: the pending pod, its filter outcome computed from the cluster's annotations in words
# with the figures, hami-scheduler's recorded event, the summary; -o json pinned.
k create -f - > /dev/null <<'JSON' || fail "kubectl create event"
{"apiVersion":"v1","kind":"Event","metadata":{"name":"big.1","namespace":"team-a"},
 "involvedObject":{"kind":"Pod","name":"big","namespace":"team-a"},"type":"Warning",
 "reason":"FilteringFailed","message":"1 nodes CardInsufficientMemory(gpu-1)",
 "source":{"component":"hami-scheduler"},"count":2,"lastTimestamp":"2024-01-23T04:30:10Z"}
JSON
out=$("$kh" explain big -n team-a) || fail "explain big exited $?"
echo "$out"
grep -Eq '^  gpu-1 +no +2 of 2 GPUs lack memory: wants 40000 MiB, free 31768, 29768$' <<< "$out" \
  || fail "explain big: no node row in words"
grep -Eq '^  2024-01-23T04:30:10Z +Warning +FilteringFailed \(x2\) +hami-scheduler +1 nodes CardInsufficientMemory\(gpu-1\)$' \
  <<< "$out" || fail "explain big: no history row"
grep -q '^Last scheduling failure: 0/2 nodes are available: 1 node(s) had no GPU' <<< "$out" \
  || fail "explain big: no recorded failure"
[[ $(tail -n 1 <<< "$out") == "Pending: no GPU has enough memory for the request." ]] \
  || fail "explain big: summary"
[[ $("$kh" explain big -n team-a --no-headers | grep -c 'CONTAINER\|NODE   \|TIME   ') == 0 ]] \
  || fail "explain --no-headers printed a header"
got=$("$kh" explain pod/big --namespace=team-a -o json | jq -c '{pod, requests, devices,
  nodes: [.nodes[] | {name, fit, reason, words}], otherNodes, lock, summary,
  history: [.history[] | {time, type, reason, count, source}]}') || fail "explain -o json"
want='{"pod":{"namespace":"team-a","name":"big","phase":"Pending","node":null,"bindPhase":null},"requests":[{"container":"a","init":false,"vendor":"NVIDIA","count":1,"memory":40000,"memoryPercent":null,"cores":0}],"devices":[],"nodes":[{"name":"gpu-1","fit":false,"reason":"2/2 CardInsufficientMemory","words":"2 of 2 GPUs lack memory: wants 40000 MiB, free 31768, 29768"}],"otherNodes":1,"lock":null,"summary":"Pending: no GPU has enough memory for the request.","history":[{"time":"2024-01-23T04:30:10Z","type":"Warning","reason":"FilteringFailed","count":2,"source":"hami-scheduler"}]}'
[[ $got == "$want" ]] || fail "explain big -o json:
got:  $got
want: $want"
# A bound pod: what it holds, the node lock it holds, its bind phase.
out=$("$kh" explain train-0) || fail "explain train-0 exited $?"
grep -Eq "^Node lock: gpu-1 held by default/train-0 for [0-9]+[dy] \(this pod\)$" <<< "$out" \
  || fail "explain train-0: no lock line"
grep -q "^  $u1 (3000 MiB, 30% cores)$" <<< "$out" || fail "explain train-0: holds"
[[ $(tail -n 1 <<< "$out") == "Scheduled on gpu-1. The device plugin has not yet allocated its devices (bind phase allocating)." ]] \
  || fail "explain train-0: summary"
# --device-config: the scheduler's resource names (here the count is another resource, so big
# asks for nothing HAMi knows); a missing or bad file is an input error.
printf 'nvidia:\n  resourceCountName: example.com/vgpu\n' > "$work/dc.yaml"
[[ $("$kh" explain big -n team-a --device-config "$work/dc.yaml" | tail -n 1) == \
  "The pod asks for no HAMi device; hami-scheduler passes it through." ]] \
  || fail "explain --device-config: the configured resource names are not used"
set +e
"$kh" explain big -n team-a --device-config "$work/nosuch.yaml" > /dev/null 2>&1; rc=$?
[[ $rc == 1 ]] || fail "explain --device-config of a missing file: exit $rc, want 1"
printf 'nvidia: [\n' > "$work/bad.yaml"
"$kh" explain big -n team-a --device-config="$work/bad.yaml" > /dev/null 2> "$work/err"; rc=$?
[[ $rc == 1 ]] && grep -q 'invalid YAML' "$work/err" || fail "explain --device-config of bad YAML: exit $rc"
set -e
echo "explain: ok"

# top: no monitor pod anywhere, so allocations only, per container, with the cause.
got=$("$kh" top -o json) || fail "top -o json exited $?"
want='{"nodes":[{"name":"gpu-1","monitor":null,"error":"no monitor pod on the node (label app.kubernetes.io/component=hami-device-plugin)","containers":[{"namespace":"default","pod":"train-0","container":"a","uuid":"'$u1'","allocated":{"memory":3000,"cores":30},"used":null},{"namespace":"default","pod":"train-0","container":"c","uuid":"'$u0'","allocated":{"memory":1000,"cores":0},"used":null}]}]}'
[[ $got == "$want" ]] || fail "top -o json:
got:  $got
want: $want"
"$kh" top | grep -q '^node gpu-1: no measurements, allocations only: no monitor pod' \
  || fail "top: no line saying no monitor answered"

# top through the API server's pod proxy: a monitor pod on gpu-1 whose "metrics" port is a local
# HTTP server with a /metrics file.
mkdir -p "$work/www"
cat > "$work/www/metrics" <<METRICS
# TYPE hami_vgpu_memory_used_bytes gauge
hami_vgpu_memory_used_bytes{container="a",device_uuid="$u1",namespace="default",pod="train-0",vdevice_index="0"} 1.048576e+09
hami_container_device_utilization_ratio{container="a",device_uuid="$u1",namespace="default",pod="train-0",vdevice_index="0"} 37
METRICS
# The server prints its port once it listens (read through a fifo: no polling).
mkfifo "$work/http.port"
python3 -c 'import functools, http.server, sys
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
s = http.server.HTTPServer(("127.0.0.1", 0), h)
print(s.server_address[1], flush=True)
s.serve_forever()' "$work/www" > "$work/http.port" 2> "$work/http.log" &
http_pid=$!
trap 'kill "$http_pid" 2>/dev/null || true; sim_cleanup' EXIT
port=
read -r -t 30 port < "$work/http.port" || true
[[ -n $port ]] || fail "python3 http.server did not start"
k create -f - > /dev/null <<JSON || fail "kubectl create monitor pod"
{"apiVersion":"v1","kind":"Pod","metadata":{"name":"hami-device-plugin-gpu-1","namespace":"kube-system",
 "labels":{"app.kubernetes.io/component":"hami-device-plugin"}},
 "spec":{"nodeName":"gpu-1","containers":[{"name":"vgpu-monitor","image":"x",
   "ports":[{"name":"metrics","containerPort":$port}]}]}}
JSON
k patch pod hami-device-plugin-gpu-1 -n kube-system --subresource=status --type=merge -p \
  '{"status":{"phase":"Running","podIP":"127.0.0.1"}}' > /dev/null || fail "patch monitor status"
got=$("$kh" top -o json | jq -c '.nodes[0] | {monitor, error, containers: [.containers[] | {container, allocated, used}]}')
want='{"monitor":"kube-system/hami-device-plugin-gpu-1","error":null,"containers":[{"container":"a","allocated":{"memory":3000,"cores":30},"used":{"memory":1000,"limit":null,"utilization":37}},{"container":"c","allocated":{"memory":1000,"cores":0},"used":null}]}'
[[ $got == "$want" ]] || fail "top through the pod proxy:
got:  $got
want: $want"
"$kh" top --no-headers | grep -Eq "^gpu-1 +default +train-0 +a +$u1 +1000 +3000 +30 +37$" \
  || fail "top table through the pod proxy"
echo "top through the pod proxy: ok"
kill "$http_pid" 2>/dev/null || true

# decode / encode: hamictl's kinds, round trip, exit codes.
got=$("$kh" decode node-lock "$lock" | "$kh" encode node-lock -) || fail "decode | encode"
[[ $got == "$lock" ]] || fail "node-lock round trip: $got"
set +e
"$kh" decode node-lock garbage > /dev/null 2> "$work/err"; rc=$?
[[ $rc == 1 ]] && grep -q 'garbage' "$work/err" || fail "decode of a bad value: exit $rc, want 1"
"$kh" decode nosuch x > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "decode of an unknown kind: exit $rc, want 2"
"$kh" decode node-lock > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "decode without a value: exit $rc, want 2"
# explain's usage and input errors.
"$kh" explain nosuch > /dev/null 2> "$work/err"; rc=$?
[[ $rc == 1 ]] && grep -q 'pod "default/nosuch": not found' "$work/err" \
  || fail "explain nosuch: exit $rc, $(cat "$work/err")"
"$kh" explain > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "explain without a pod: exit $rc, want 2"
"$kh" explain a b > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "explain of two pods: exit $rc, want 2"
"$kh" explain big -A > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "explain -A: exit $rc, want 2"
"$kh" top -o wide > /dev/null 2>&1; rc=$?
[[ $rc == 2 ]] || fail "top -o wide: exit $rc, want 2"
"$kh" top nosuch > /dev/null 2>&1; rc=$?
[[ $rc == 1 ]] || fail "top nosuch: exit $rc, want 1"
set -e

# Colour only on a terminal and without NO_COLOR: a pty (script) shows ANSI codes.
esc=$'\e['
got=$(script -qec "$kh pods -A" /dev/null) || fail "pods -A on a pty"
[[ $got == *"${esc}33mteam-a/big pending"* && $got == *"${esc}33mallocating${esc}0m"* ]] \
  || fail "pods -A on a terminal has no colour: $got"
got=$(NO_COLOR=1 script -qec "$kh pods -A" /dev/null)
[[ $got != *"$esc"* ]] || fail "NO_COLOR=1 still colours"
[[ $("$kh" pods -A) != *"$esc"* ]] || fail "colour on a pipe"
got=$(script -qec "$kh explain big -n team-a" /dev/null)
[[ $got == *"${esc}31mno${esc}0m"* ]] || fail "explain on a terminal has no colour"
echo "colour: ok"

# Plugin discovery: kubectl finds kubectl-hami on PATH and runs it.
mkdir -p "$work/path"
ln -s "$(readlink -f "$kh")" "$work/path/kubectl-hami"
PATH=$work/path:$PATH k plugin list 2>/dev/null | grep -q "$work/path/kubectl-hami" \
  || fail "kubectl plugin list does not show kubectl-hami"
got=$(PATH=$work/path:$PATH k hami pods -A -o json | jq -c '[.pods[].name]')
[[ $got == '["train-0","big","done"]' ]] || fail "kubectl hami pods -A: $got"
via=$(PATH=$work/path:$PATH k hami inspect -o json 2>&1); direct=$("$kh" inspect -o json)
[[ $via == "$direct" ]] \
  || fail "kubectl hami inspect differs from kubectl-hami inspect: $via vs $direct"
PATH=$work/path:$PATH k hami explain big -n team-a | grep -q 'lack memory' \
  || fail "kubectl hami explain"
echo "plugin discovery: ok"

# An unreachable API server: exit 1 with a message, quickly.
kill "$sim_pid"; wait "$sim_pid" 2>/dev/null || true; sim_pid=
for cmd in inspect pods "explain big -n team-a" top; do
  set +e
  # shellcheck disable=SC2086  # the command's words
  timeout 40 "$kh" $cmd > /dev/null 2> "$work/err"; rc=$?
  set -e
  [[ $rc == 1 ]] || fail "unreachable server, $cmd: exit $rc, want 1"
  [[ -s $work/err ]] || fail "unreachable server, $cmd: no message"
done
# decode/encode need no server.
"$kh" decode node-lock "$lock" > /dev/null || fail "decode without a server"
echo "PASS"
