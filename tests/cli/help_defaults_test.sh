#!/bin/bash
# Every binary's --help shows each option's default (common/flags.h ShowDefaults for the CLI11
# binaries, the written help of kubectl-hami): one sample option per binary.
#
# Usage: help_defaults_test.sh HAMI_SCHEDULER HAMI_DEVICE_PLUGIN HAMI_VGPU_MONITOR HAMI_SIM KUBECTL_HAMI
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# expect NAME PATTERN COMMAND...: COMMAND's --help output has a line matching PATTERN.
expect() {
  local name=$1 pattern=$2
  shift 2
  local out
  out=$("$@" 2>&1) || fail "$name: $* exited $?"
  grep -Eq -- "$pattern" <<< "$out" || fail "$name: no line matching '$pattern' in:
$out"
  echo "$name: ok ($(grep -Em1 -- "$pattern" <<< "$out" | sed 's/^ *//'))"
}

expect hami-scheduler '^ +--node-scheduler-policy TEXT=binpack' "$1" --help
expect hami-scheduler '^ +--metrics-bind-address TEXT=:9395' "$1" --help
expect hami-scheduler '^ +--kube-qps FLOAT=50 ' "$1" --help
expect hami-device-plugin '^ +--hook-path TEXT=/usr/local' "$2" --help
expect hami-vgpu-monitor '^ +--metrics-bind-address TEXT=:9394' "$3" --help
expect hami-sim '^ +--listen TEXT=127.0.0.1:6443' "$4" apiserver --help
expect kubectl-hami '--context NAME .*\(default: current-context\)' "$5" --help
expect kubectl-hami '--scheduler-name NAME .*\(default:' "$5" --help
echo PASS
