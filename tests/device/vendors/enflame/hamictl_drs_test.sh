#!/usr/bin/env bash
# hamictl_drs_test.sh HAMICTL: the enflame-drs-capacity kind decodes HAMi's vector, encodes it
# back byte for byte, and refuses what the backend refuses (exit 1, message on stderr).
set -u
hamictl=$1
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

value='{"devices":[{"index":"0","minor":"0","capacity":6}],"profiles":{"1g.6gb":"0","3g.20gb":"1","6g.40gb":"2"}}'
json=$("$hamictl" decode enflame-drs-capacity "$value") || fail "decode failed"
for want in '"capacity": 6' '"corePercent": 50' '"maxSlice": 6' '"maxMemoryGB": 40'; do
  [[ $json == *"$want"* ]] || fail "decode lacks $want: $json"
done
out=$("$hamictl" encode enflame-drs-capacity "$json") || fail "encode failed: $json"
[[ $out == "$value" ]] || fail "roundtrip: got '$out', want '$value'"

for bad in '{}' 'nope' '{"devices":[{"capacity":0}],"profiles":{"1g.6gb":"0"}}'; do
  if err=$("$hamictl" decode enflame-drs-capacity "$bad" 2>&1 >/dev/null); then
    fail "decode accepted '$bad'"
  elif [[ $err != *"enflame.com/gcu-drs-capacity"* ]]; then
    fail "decode of '$bad': message does not name the key: $err"
  fi
done
if "$hamictl" encode enflame-drs-capacity '{"devices":[],"profiles":[]}' >/dev/null 2>&1; then
  fail "encode accepted a value with no devices"
fi
[[ $failures == 0 ]] || { echo "$failures failure(s)" >&2; exit 1; }
echo "ok"
