#!/usr/bin/env bash
# hamictl_runtime_test.sh HAMICTL: the ascend-runtime kind decodes HAMi's vector with every field
# explicit, encodes it back byte for byte, and refuses what the backend refuses (exit 1, message
# naming the annotation on stderr).
set -u
hamictl=$1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

value='[{"UUID":"device-0","temp":"vir08","memory":8738,"core":1},{"UUID":"device-1","memory":8192}]'
json=$("$hamictl" decode ascend-runtime "$value") || fail "decode failed"
for want in '"temp": "vir08"' '"memory": 8738' '"core": 0' '"temp": ""'; do
  [[ $json == *"$want"* ]] || fail "decode lacks $want: $json"
done
out=$("$hamictl" encode ascend-runtime "$json") || fail "encode failed: $json"
[[ $out == "$value" ]] || fail "roundtrip: got '$out', want '$value'"

for bad in '{}' 'nope' '[{"UUID":1}]' '[{"memory":"x"}]' '[{"core":2147483648}]'; do
  if err=$("$hamictl" decode ascend-runtime "$bad" 2>&1 >/dev/null); then
    fail "decode accepted '$bad'"
  elif [[ $err != *"huawei.com/"* ]]; then
    fail "decode of '$bad': message does not name the annotation: $err"
  fi
done
[[ $failures == 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "ok"
