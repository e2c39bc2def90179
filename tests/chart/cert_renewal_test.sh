#!/bin/bash
# The webhook certificate's life cycle as README.md documents it, against `hami-sim apiserver`:
# `helm install` makes a CA (the Secret's ca.crt is the webhook's caBundle), `helm upgrade` keeps
# it (the template's lookup of the live Secret), and deleting the Secret then `helm upgrade` makes
# a new one, again the same in Secret and caBundle.
#
# Usage: cert_renewal_test.sh HAMI_SIM HELM CHART
#   HELM is overridden by $HAMI_HELM. Exits 77 (ctest: skipped) when helm or kubectl is absent.
set -euo pipefail

sim=$1
helm=${HAMI_HELM:-$2}
chart=$3
if [[ ! -x $helm ]]; then
  echo "SKIP: helm not found at $helm (scripts/bootstrap fetches it; or set HAMI_HELM)"
  exit 77
fi
if ! command -v kubectl >/dev/null 2>&1; then
  echo "SKIP: kubectl not on PATH (scripts/bootstrap installs it)"
  exit 77
fi

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

export HOME=$work/home KUBECONFIG=$work/kubeconfig
mkdir -p "$HOME"
# The server prints its "listening on" line once the kubeconfig is written and it accepts.
mkfifo "$work/ready"
"$sim" apiserver --listen 127.0.0.1:0 --kubeconfig-out "$KUBECONFIG" \
  > "$work/ready" 2> "$work/sim.log" &
sim_pid=$!
exec 3< "$work/ready"
read -r -t 30 line <&3 || fail "hami-sim apiserver did not start"
cat <&3 > /dev/null &

ns=kube-system
h() { timeout 120 "$helm" "$@" > "$work/helm.out" 2>&1 || fail "helm $1: $(cat "$work/helm.out")"; }
k() { timeout 60 kubectl "$@"; }
ca_bundle() {
  k get mutatingwebhookconfiguration hami-webhook -o jsonpath='{.webhooks[0].clientConfig.caBundle}'
}
secret_ca() { k -n "$ns" get secret hami-scheduler-tls -o jsonpath='{.data.ca\.crt}'; }

h install hami "$chart" -n "$ns" --create-namespace
ca1=$(ca_bundle)
[[ -n $ca1 ]] || fail "install: the webhook has no caBundle"
[[ $(secret_ca) == "$ca1" ]] || fail "install: Secret ca.crt differs from the caBundle"

h upgrade hami "$chart" -n "$ns" --reuse-values --set scheduler.replicas=2
[[ $(ca_bundle) == "$ca1" ]] || fail "upgrade: the caBundle changed"
[[ $(secret_ca) == "$ca1" ]] || fail "upgrade: the Secret's CA changed"
echo "upgrade kept the CA"

k -n "$ns" delete secret hami-scheduler-tls > /dev/null
h upgrade hami "$chart" -n "$ns" --reuse-values
ca3=$(ca_bundle)
[[ -n $ca3 && $ca3 != "$ca1" ]] || fail "renewal: the caBundle is not a new CA"
[[ $(secret_ca) == "$ca3" ]] || fail "renewal: the new Secret's ca.crt differs from the caBundle"
echo "deleting the Secret and upgrading made a new CA, the same in Secret and caBundle"
