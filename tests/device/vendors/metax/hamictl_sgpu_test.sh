#!/usr/bin/env bash
# hamictl_sgpu_test.sh HAMICTL: the metax-sgpu-devices kind decodes HAMi's vector with every field
# explicit, encodes it back as MetaX's plugin writes it, and refuses what the backend refuses
# (exit 1, message naming the annotation key on stderr).
set -u
hamictl=$1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

value='[{"uuid":"GPU-123","bdf":"0000:44:00.0","model":"sgpu","totalDevCount":16,"totalCompute":100,"totalVRam":32768,"numa":1,"healthy":true,"qosPolicy":"fixed-share"}]'
json=$("$hamictl" decode metax-sgpu-devices "$value") || fail "decode failed"
for want in '"totalVRam": 32768' '"linkZone": 0' '"availableVRam": 0' '"healthy": true'; do
  [[ $json == *"$want"* ]] || fail "decode lacks $want: $json"
done
out=$("$hamictl" encode metax-sgpu-devices "$json") || fail "encode failed: $json"
[[ $out == "$value" ]] || fail "roundtrip: got '$out', want '$value'"

for bad in '{}' 'nope' '[{"uuid":"a","totalVRam":"x"}]' '[{"uuid":"a"},{"uuid":"a"}]'; do
  if err=$("$hamictl" decode metax-sgpu-devices "$bad" 2>&1 >/dev/null); then
    fail "decode accepted '$bad'"
  elif [[ $err != *"metax-tech.com/node-gpu-devices"* ]]; then
    fail "decode of '$bad': message does not name the key: $err"
  fi
done
if "$hamictl" encode metax-sgpu-devices '[{"uuid":"a","totalCompute":-1}]' >/dev/null 2>&1; then
  fail "encode accepted a negative compute"
fi
[[ $failures == 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "ok"
