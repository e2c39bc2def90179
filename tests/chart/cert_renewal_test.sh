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
# shellcheck source=tests/support/sim_apiserver.sh
source "${BASH_SOURCE[0]%/*}/../support/sim_apiserver.sh"
sim_require_helm "$helm"
sim_require_kubectl
sim_setup
sim_start "$sim"

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
