# shellcheck shell=bash
# Sourced by the shell tests that drive helm or kubectl against `hami-sim apiserver`
# (tests/chart/cert_renewal_test.sh, tests/sim/helm_install_test.sh,
# tests/cli/kubectl_hami_sim_test.sh): the skips, the scratch directory and its cleanup, fail, and
# the server's start on a free port.
#
#   sim_require_helm HELM   exit 77 (ctest: skipped) unless HELM is executable
#   sim_require_kubectl     exit 77 unless kubectl is on PATH
#   sim_setup               $work (removed on exit), fail, HOME and KUBECONFIG under $work
#   sim_start SIM           SIM apiserver on 127.0.0.1:0 writing $KUBECONFIG; sets $line to its
#                           "listening on" line and $sim_pid (killed on exit)
# fail tails the last $sim_log_tail (default 20) lines of the server's log.

sim_require_helm() {
  if [[ ! -x $1 ]]; then
    echo "SKIP: helm not found at $1 (scripts/bootstrap fetches it; or set HAMI_HELM)"
    exit 77
  fi
}

sim_require_kubectl() {
  if ! command -v kubectl >/dev/null 2>&1; then
    echo "SKIP: kubectl not on PATH (scripts/bootstrap installs it)"
    exit 77
  fi
}

sim_setup() {
  work=$(mktemp -d)
  sim_pid=
  trap sim_cleanup EXIT
  # helm and kubectl keep caches and config under HOME.
  export HOME=$work/home KUBECONFIG=$work/kubeconfig
  mkdir -p "$HOME"
}

sim_cleanup() {
  if [[ -n $sim_pid ]]; then kill "$sim_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}

# shellcheck disable=SC2154  # $work is set by sim_setup
fail() {
  echo "FAIL: $*" >&2
  echo "--- hami-sim apiserver log:" >&2
  tail -n "${sim_log_tail:-20}" "$work/sim.log" >&2 || true
  exit 1
}

sim_start() {
  # The server prints its "listening on" line once the kubeconfig is written and it accepts.
  mkfifo "$work/ready"
  "$1" apiserver --listen 127.0.0.1:0 --kubeconfig-out "$KUBECONFIG" \
    > "$work/ready" 2> "$work/sim.log" &
  sim_pid=$!
  exec 3< "$work/ready"
  # shellcheck disable=SC2034  # $line is the caller's
  read -r -t 30 line <&3 || fail "hami-sim apiserver did not start"
  cat <&3 > /dev/null &  # keep draining its stdout
}
