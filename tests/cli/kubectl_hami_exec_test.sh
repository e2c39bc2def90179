#!/bin/bash
# kubectl-hami through a kubeconfig whose user is an exec credential plugin
# (client.authentication.k8s.io/v1 ExecCredential, docs/KUBECTL_HAMI.md#credentials), against
# `hami-sim apiserver --tls --token`: the plugin is a shell script that prints an ExecCredential
# and counts its runs. Checks: inspect succeeds and the plugin ran once for one invocation's
# several API calls (the credential is cached until its expiry); KUBERNETES_EXEC_INFO carries
# spec.cluster under provideClusterInfo; a refused token (401) runs the plugin once more and the
# second token works; a plugin that fails fails kubectl-hami with its message; the same through
# $KUBECONFIG with two files merged (the plugin user in the second file).
#
# Usage: kubectl_hami_exec_test.sh KUBECTL_HAMI HAMI_SIM
set -euo pipefail

kh=$1
sim=$2
work=$(mktemp -d)
sim_pid=
cleanup() {
  if [[ -n $sim_pid ]]; then kill "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  tail -n 20 "$work/sim.log" >&2 || true
  exit 1
}
token=exec-test-token-$$

mkfifo "$work/ready"
"$sim" apiserver --listen 127.0.0.1:0 --tls --token "$token" --cert-dir "$work/certs" \
  --kubeconfig-out "$work/sim-kubeconfig" > "$work/ready" 2> "$work/sim.log" &
sim_pid=$!
exec 3< "$work/ready"
read -r -t 30 line <&3 || fail "hami-sim apiserver did not start"
cat <&3 > /dev/null &
server=${line##* }
[[ $server == https://* ]] || fail "server $server: want https"

# The plugin: counts runs in $work/runs, saves KUBERNETES_EXEC_INFO, prints a token valid for an
# hour. PLUGIN_BAD_FIRST=1: the first run's token is one the server refuses.
cat > "$work/plugin.sh" <<'SH'
#!/bin/bash
n=$(( $(cat "$COUNT_FILE" 2>/dev/null || echo 0) + 1 ))
echo "$n" > "$COUNT_FILE"
printf '%s' "$KUBERNETES_EXEC_INFO" > "$COUNT_FILE.info"
[[ ${PLUGIN_FAIL:-} == 1 ]] && { echo "plugin: not logged in" >&2; exit 1; }
tok=$GOOD_TOKEN
[[ ${PLUGIN_BAD_FIRST:-} == 1 && $n == 1 ]] && tok=revoked
exp=$(date -u -d '+1 hour' +%Y-%m-%dT%H:%M:%SZ)
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s","expirationTimestamp":"%s"}}\n' "$tok" "$exp"
SH
chmod +x "$work/plugin.sh"
ca=$(base64 -w0 "$work/certs/ca.crt")

# kubeconfig FILE EXTRA_ENV_YAML: the exec user; the cluster in the same file unless $2 = split.
write_kubeconfig() {
  local file=$1
  cat > "$file" <<YAML
apiVersion: v1
kind: Config
current-context: exec
clusters:
- name: sim
  cluster:
    server: $server
    certificate-authority-data: $ca
contexts:
- name: exec
  context: {cluster: sim, user: plugin}
users:
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      interactiveMode: Never
      provideClusterInfo: true
      env:
      - {name: COUNT_FILE, value: "$work/runs"}
      - {name: GOOD_TOKEN, value: "$token"}
YAML
}
write_kubeconfig "$work/kubeconfig"
export HOME=$work KUBECONFIG=$work/kubeconfig

# A node with HAMi devices, created with the static token.
node='{"apiVersion":"v1","kind":"Node","metadata":{"name":"gpu-1","annotations":{"hami.io/node-nvidia-register":"[{\"id\":\"GPU-0\",\"count\":10,\"devmem\":32768,\"devcore\":100,\"type\":\"NVIDIA-A100\",\"numa\":0,\"mode\":\"hami-core\",\"health\":true}]"}}}'
curl -sf --cacert "$work/certs/ca.crt" -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -d "$node" "$server/api/v1/nodes" > /dev/null ||
  fail "create node"

# Without credentials the server refuses: the plugin is what makes it work.
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$work/certs/ca.crt" "$server/api/v1/nodes")
[[ $code == 401 ]] || fail "no credentials: HTTP $code, want 401"
out=$("$kh" inspect -o json) || fail "inspect through the exec plugin exited $?"
got=$(jq -c '[.nodes[] | [.name, .devices[0].uuid]]' <<< "$out")
[[ $got == '[["gpu-1","GPU-0"]]' ]] || fail "inspect: $got"
[[ $(cat "$work/runs") == 1 ]] || fail "plugin ran $(cat "$work/runs") times for one inspect, want 1"
echo "inspect via exec plugin: ok (plugin ran once for nodes+pods)"
info=$(cat "$work/runs.info")
[[ $(jq -r '.spec.cluster.server' <<< "$info") == "$server" ]] || fail "exec info: $info"
[[ $(jq -r '.spec.interactive' <<< "$info") == false ]] || fail "exec info interactive: $info"
[[ $(jq -r '.apiVersion' <<< "$info") == client.authentication.k8s.io/v1 ]] ||
  fail "exec info apiVersion: $info"
echo "KUBERNETES_EXEC_INFO: ok"

# A revoked token: 401, the plugin runs once more, the call succeeds.
rm -f "$work/runs"
PLUGIN_BAD_FIRST=1 "$kh" inspect -o json > /dev/null || fail "inspect after a 401 exited $?"
[[ $(cat "$work/runs") == 2 ]] || fail "plugin ran $(cat "$work/runs") times around a 401, want 2"
echo "401 -> plugin re-run: ok"

# A failing plugin: its error, not a bare 401.
set +e
PLUGIN_FAIL=1 "$kh" inspect > /dev/null 2> "$work/err"
rc=$?
set -e
[[ $rc != 0 ]] || fail "inspect with a failing plugin exited 0"
grep -q 'exec plugin ".*plugin.sh": exited 1' "$work/err" || fail "failing plugin: $(cat "$work/err")"
echo "failing plugin: ok"

# Two files merged: the first sets current-context and the cluster, the second holds the user.
mkdir -p "$work/a"
cat > "$work/a/config" <<YAML
current-context: exec
clusters:
- name: sim
  cluster: {server: "$server", certificate-authority-data: "$ca"}
YAML
rm -f "$work/runs"
KUBECONFIG=$work/a/config:$work/missing:$work/kubeconfig "$kh" inspect -o json > /dev/null ||
  fail "inspect with merged KUBECONFIG exited $?"
[[ $(cat "$work/runs") == 1 ]] || fail "merged: plugin ran $(cat "$work/runs") times"
echo "merged KUBECONFIG: ok"
echo PASS
