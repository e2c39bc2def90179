#!/usr/bin/env bash
# hamictl_dsmlu_test.sh HAMICTL: the cambricon-dsmlu-profile kind decodes HAMi's vector
# ("0_1_1000": index 0, 1 % cores, 1000 units of 256 MiB), encodes it back byte for byte, and
# refuses what the backend refuses (exit 1, message on stderr naming the annotation).
set -u
hamictl=$1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

value='0_1_1000'
json=$("$hamictl" decode cambricon-dsmlu-profile "$value") || fail "decode failed"
for want in '"index": 0' '"cores": 1' '"memoryUnits": 1000' '"memoryMiB": 256000'; do
  [[ $json == *"$want"* ]] || fail "decode lacks $want: $json"
done
out=$("$hamictl" encode cambricon-dsmlu-profile "$json") || fail "encode failed: $json"
[[ $out == "$value" ]] || fail "roundtrip: got '$out', want '$value'"

for bad in '' '1_2' 'a_b_c' '1_2_3_4'; do
  if err=$("$hamictl" decode cambricon-dsmlu-profile "$bad" 2>&1 >/dev/null); then
    fail "decode accepted '$bad'"
  elif [[ $err != *"CAMBRICON_DSMLU_PROFILE"* ]]; then
    fail "decode of '$bad': message does not name the annotation: $err"
  fi
done
if "$hamictl" encode cambricon-dsmlu-profile '{"index":-1,"cores":1,"memoryUnits":1}' >/dev/null 2>&1; then
  fail "encode accepted a negative index"
fi
[[ $failures == 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "ok"
