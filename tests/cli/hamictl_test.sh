#!/usr/bin/env bash
# hamictl_test.sh HAMICTL
# Checks hamictl end to end. Each kind gets a few lines below:
#   roundtrip KIND VALUE    decode then encode gives VALUE back byte for byte
#   decodes KIND VALUE TXT  decode succeeds and its output contains TXT
#   rejects VERB KIND ARG   exit status 1, a message on stderr, nothing on stdout, no crash
# Add new kinds by adding such lines; the script fails at the end if any check failed.
set -u
hamictl=$1
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

roundtrip() {
  local kind=$1 value=$2 json out
  if ! json=$("$hamictl" decode "$kind" "$value"); then
    fail "decode $kind '$value' failed"
    return
  fi
  if ! out=$("$hamictl" encode "$kind" "$json"); then
    fail "encode $kind of decoded '$value' failed; JSON was: $json"
    return
  fi
  [[ $out == "$value" ]] || fail "roundtrip $kind: got '$out', want '$value'"
}

decodes() {
  local kind=$1 value=$2 want=$3 json
  if ! json=$("$hamictl" decode "$kind" "$value"); then
    fail "decode $kind '$value' failed"
    return
  fi
  [[ $json == *"$want"* ]] || fail "decode $kind '$value': output lacks '$want': $json"
}

# Runs hamictl with the given arguments and expects exit status $1 with a message on stderr.
expect_exit() {
  local want=$1 rc
  shift
  local err
  err=$(mktemp)
  "$hamictl" "$@" >"$err.out" 2>"$err"
  rc=$?
  if [[ $rc -ne $want ]]; then
    fail "hamictl $* exited $rc, want $want"
  elif [[ ! -s $err ]]; then
    fail "hamictl $* printed nothing on stderr"
  elif [[ $want -eq 1 && -s $err.out ]]; then
    fail "hamictl $* printed on stdout although it failed"
  fi
  rm -f "$err" "$err.out"
}
rejects() { expect_exit 1 "$@"; }

# --- node-register (the two-V100 example of docs/protocol.md) ---
seed='[{"id":"GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec","count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true},{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","index":1,"count":10,"devmem":32768,"devcore":100,"type":"NVIDIA-Tesla V100-PCIE-32GB","numa":1,"mode":"hami-core","health":true}]'
out=$("$hamictl" encode node-register "$("$hamictl" decode node-register "$seed")")
[[ $out == "$seed" ]] || fail "seed round trip: got '$out'"
roundtrip node-register '[]'
roundtrip node-register '[{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"mode":"mig","migProfiles":[{"name":"1g.5gb","memoryMB":4864,"core":15,"sliceCount":1,"placements":[{"start":6,"size":1}]}],"health":true}]'
# Go's escaping (HTML characters, U+2028) and raw UTF-8 survive the trip.
roundtrip node-register '[{"id":"GPU-\u003cx\u0026y\u003e","type":"café\u2028"}]'
decodes node-register '[{"id":"a"}]' '"index": 0'
decodes node-register '[{"id":"a"}]' '"numa": 0'
decodes node-register '[{"id":"a"}]' '"health": false'
out=$("$hamictl" encode node-register '[{"id":"a","index":0,"numa":0,"health":false}]')
[[ $out == '[{"id":"a"}]' ]] || fail "node-register zero values not omitted: $out"
rejects decode node-register '[{"devmem":"abc"}]'
rejects decode node-register '[{'
rejects encode node-register '{"id":"a"}'

# --- node-register-legacy ---
roundtrip node-register-legacy 'GPU-ebe7c3f7-303d-558d-435e-99a160631fe4,10,7680,100,NVIDIA-Tesla P4,0,true,0,hami-core:'
roundtrip node-register-legacy 'GPU-a,10,7680,100,DCU,1,false,3,hami-core:GPU-b,5,1024,50,DCU,0,true,4,mig:'
decodes node-register-legacy 'GPU-x,10,7680,100,NVIDIA-Tesla P4,0,true:' '"mode": "hami-core"'
rejects decode node-register-legacy 'GPU-x,10,7680,100'
rejects decode node-register-legacy 'GPU-x,ten,7680,100,T,0,true:'
rejects encode node-register-legacy '[{"id":"a,b"}]'

# --- pod-devices ---
roundtrip pod-devices 'GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448,NVIDIA,3000,0:;'
roundtrip pod-devices 'GPU-a,NVIDIA,1000,30:GPU-b,NVIDIA,1000,30:;'
roundtrip pod-devices ';GPU-a,NVIDIA,1000,30:;'
roundtrip pod-devices ';;'
roundtrip pod-devices ''
decodes pod-devices 'GPU-a,NVIDIA,3000,30:;' '"usedcores": 30'
rejects decode pod-devices 'uuid,type,100:;'
rejects decode pod-devices 'a,N,x,1:;'
rejects encode pod-devices '[[{"uuid":"a","usedmem":"x"}]]'
rejects encode pod-devices '[[{"uuid":"a:b"}]]'

# --- mig-allocations and pair-score ---
roundtrip mig-allocations '[{"containerIndex":0,"deviceIndex":0,"gpuUUID":"GPU-a","profile":"1g.5gb","placement":{"start":6,"size":1}},{"containerIndex":1,"deviceIndex":0,"gpuUUID":"GPU-b","profile":"1g.5gb","placement":{"start":0,"size":1},"migUUID":"MIG-x","gpuInstanceID":0,"computeInstanceID":0}]'
rejects decode mig-allocations '[{"gpuUUID":"g","profile":"p","placement":{"size":0}}]'
roundtrip pair-score '[{"uuid":"GPU-a","score":{"GPU-b":200,"GPU-c":20}}]'
rejects decode pair-score '[{"uuid":"GPU-a","score":{"GPU-b":"x"}}]'

# --- handshake (docs/protocol.md#node-registration-and-the-handshake; wall-clock times are read as UTC by hamictl) ---
roundtrip handshake 'Requesting_2024-01-23 04:30:04'
roundtrip handshake 'Reported_2024-01-23 04:30:05'
roundtrip handshake 'Deleted_2024-01-23 04:31:10'
roundtrip handshake 'Requesting'
roundtrip handshake 'Requesting_not-a-timestamp'
roundtrip handshake 'Reported 2024-01-23 04:30:04.434037031 +0000 UTC m=+1104711.7'
decodes handshake 'Requesting_2024-01-23 04:30:04' '"time": "2024-01-23T04:30:04Z"'
decodes handshake 'Requesting_not-a-timestamp' '"time": null'
decodes handshake 'Reported 2024-01-23 12:30:04 +0800 CST' '"time": "2024-01-23T04:30:04Z"'
out=$("$hamictl" encode handshake '{"kind":"Requesting","time":"2024-01-23T12:30:04+08:00"}')
[[ $out == 'Requesting_2024-01-23 04:30:04' ]] || fail "handshake encode from time: $out"
rejects decode handshake 'hello'
rejects decode handshake ''
rejects encode handshake '{"kind":"Other","timestamp":"x"}'
rejects encode handshake '{"kind":"Reported"}'
rejects encode handshake '{"kind":"Deleted","time":"yesterday"}'
rejects encode handshake '['

# --- node-lock (docs/protocol.md#node-lock) ---
roundtrip node-lock '2026-08-21T10:11:12+08:00,default,train-0'
roundtrip node-lock '2026-08-21T02:11:12Z,hami-ns,hami'
roundtrip node-lock '2026-08-21T02:11:12.25Z'
decodes node-lock '2026-08-21T10:11:12+08:00,default,train-0' '"time": "2026-08-21T02:11:12Z"'
decodes node-lock '2026-08-21T02:11:12Z' '"legacy": true'
out=$("$hamictl" encode node-lock '{"time":"2026-08-21T02:11:12Z","utcOffsetSeconds":28800,"namespace":"default","pod":"train-0"}')
[[ $out == '2026-08-21T10:11:12+08:00,default,train-0' ]] || fail "node-lock encode from time: $out"
rejects decode node-lock 'lock'
rejects decode node-lock '2026-08-21T10:11:12+08:00,default'
rejects decode node-lock '2026-08-21 10:11:12,default,train-0'
rejects encode node-lock '{"timestamp":"2026-08-21T02:11:12Z","namespace":"a,b","pod":"p"}'
rejects encode node-lock '{"timestamp":"2026-08-21T02:11:12Z","namespace":"a"}'
rejects encode node-lock '{"namespace":"a","pod":"p"}'

# --- deep JSON nesting: 100,000 levels (too long for argv, so on stdin) used to segfault ---
deep=$(mktemp)
printf '%.0s[' $(seq 100000) >"$deep"
printf '%.0s]' $(seq 100000) >>"$deep"
for verb_kind in "decode node-register" "decode mig-allocations" "decode pair-score" \
  "encode node-register" "encode pod-devices" "encode handshake" "encode node-lock" \
  "encode reason"; do
  # shellcheck disable=SC2086 # verb and kind are two words on purpose
  rejects $verb_kind - <"$deep"
  # shellcheck disable=SC2086
  err=$("$hamictl" $verb_kind - <"$deep" 2>&1 >/dev/null)
  [[ $err == *"nested deeper than 10000 levels"* ]] || fail "$verb_kind of deep JSON: ${err:0:200}"
done
rm -f "$deep"

# --- usage errors ---
expect_exit 2 decode no-such-kind x
expect_exit 2 encode no-such-kind '{}'

# --- Go-style flags: -help is --help; after the verb nothing is rewritten ---
for h in -help --help -h; do
  out=$("$hamictl" "$h") || fail "hamictl $h exited $?"
  [[ $out == *"Usage:"* ]] || fail "hamictl $h printed no usage: ${out:0:200}"
done
expect_exit 2 decode -help x

# --- terminal safety (issue 30 item 11/5): a decoded value never puts DEL or a C1 control (here
# U+009B, CSI) on the terminal; they print as JSON escapes ---
out=$("$hamictl" decode node-lock $'2024-01-23T04:30:34Z,default,p\x7f\xc2\x9b2J') ||
  fail "decode node-lock with control characters exited $?"
[[ $out != *$'\x7f'* && $out != *$'\xc2\x9b'* ]] || fail "decode printed a raw control: $out"
[[ $out == *'p\u007f\u009b2J'* ]] || fail "decode did not escape the controls: $out"

if [[ $failures -ne 0 ]]; then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "hamictl_test: all checks passed"
