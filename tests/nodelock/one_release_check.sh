#!/usr/bin/env bash
# One node lock in src/: hami.io/mutex.lock is written only by src/nodelock/ (acquire.cc takes it,
# release.cc removes it), and nodelock::Release is the one function that removes it. HAMi's users
# lost nodes to a second, unconditional release path (a lock left behind, or a live owner's lock
# removed); this check fails the tests when one appears again.
#
#   one_release_check.sh <repo root>   check <repo root>/src; exit 1 with the offending lines
#   one_release_check.sh --self-test   run the check on small trees with a second writer planted
#                                      (each must fail) and on one without (must pass)
#
# What counts as a write of the lock key (kNodeLockKey, or the key spelled out):
#   - a JSON object member:   [std::string(protocol::kNodeLockKey)] = ...  /  {kNodeLockKey, ...}
#   - a JSON pointer:         JsonPointerEscape(...kNodeLockKey...)  /  hami.io~1mutex.lock
#   - erasing it from a map:  .erase(...kNodeLockKey...)  (then written back with an Update)
#   - the key as a literal:   "hami.io/mutex.lock" (src/protocol/keys.h defines kNodeLockKey)
# Reads (k8s::Annotation, FindValue, messages) are not writes. Comments are ignored.
set -euo pipefail

# Writes that are not ones, reviewed: kube-scheduler's view of a node, which drops the lock so a
# lock change does not count as a node update (src/sim: never written back); the scheduler's node
# informer cache, which keeps the lock for the bind's first attempt (src/scheduler/server.cc:
# never written back).
readonly kReviewed=(
  'annos.erase(std::string(protocol::kNodeLockKey));'
  'kept["annotations"][std::string(protocol::kNodeLockKey)] = std::move(*lock);'
)

# Prints "<file>:<line>: <text>" for every write of the lock key under <root>/src, comments cut.
lock_writes() {
  local root=$1
  (cd "$root" && grep -rnE --include='*.cc' --include='*.h' --include='*.cpp' \
    'kNodeLockKey|hami\.io/mutex\.lock|hami\.io~1mutex\.lock' src || true) |
    awk -F: '{
      line = $0; sub(/^[^:]*:[^:]*:/, "", line)   # the text after "file:no:"
      sub(/\/\/.*$/, "", line)                     # a trailing comment
      if (line ~ /kNodeLockKey[^;]*\][ \t]*=[^=]/ || line ~ /\[[^]]*kNodeLockKey[^]]*\][ \t]*=[^=]/ ||
          line ~ /\{[ \t]*(std::string\()?(protocol::)?kNodeLockKey\)?[ \t]*,/ ||
          line ~ /JsonPointerEscape\([^)]*kNodeLockKey/ || line ~ /hami\.io~1mutex\.lock/ ||
          line ~ /\.erase\([^)]*kNodeLockKey/ ||
          (line ~ /"hami\.io\/mutex\.lock"/ && $1 != "src/protocol/keys.h")) {
        sub(/^[ \t]+/, "", line)
        print $1 ":" $2 ": " line
      }
    }'
}

is_reviewed() {
  local text=$1 r
  for r in "${kReviewed[@]}"; do
    [[ "$text" == "$r" ]] && return 0
  done
  return 1
}

# Exit 0 when <root>/src has one node lock, else 1 with the reasons on stderr.
check() {
  local root=$1 failed=0 entry file text
  while IFS= read -r entry; do
    [[ -z "$entry" ]] && continue
    file=${entry%%:*}
    text=${entry#*: }
    case "$file" in
      src/nodelock/acquire.cc)
        # Taking the lock sets it; removing it is release.cc's alone.
        if [[ "$text" == *nullptr* || "$text" == *erase* ]]; then
          echo "$entry: the node lock is removed outside nodelock::Release" >&2
          failed=1
        fi
        ;;
      src/nodelock/release.cc) ;;
      *)
        if ! is_reviewed "$text"; then
          echo "$entry: the node lock is written outside src/nodelock (use nodelock::Locker" \
            "or nodelock::Release)" >&2
          failed=1
        fi
        ;;
    esac
  done < <(lock_writes "$root")
  # The JSON patch's remove op of the conditional release is the other removal form.
  while IFS= read -r entry; do
    [[ -z "$entry" ]] && continue
    echo "$entry: a JSON patch remove op in src/nodelock outside release.cc" >&2
    failed=1
  done < <(cd "$root" && grep -rnE '"op", "remove"' src/nodelock 2>/dev/null |
    grep -v '^src/nodelock/release.cc:' || true)
  # One Release: defined once, in src/nodelock/release.cc.
  local defs
  defs=$(cd "$root" && grep -rnE --include='*.cc' '^Status Release\(' src || true)
  if [[ "$defs" != src/nodelock/release.cc:* || $(printf '%s\n' "$defs" | wc -l) -ne 1 ]]; then
    echo "release functions: want exactly one in src/nodelock/release.cc, have:" >&2
    printf '%s\n' "${defs:-(none)}" >&2
    failed=1
  fi
  return $failed
}

self_test() {
  local here tmp status=0
  here=$(cd "$(dirname "$0")/../.." && pwd)
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  # A tree: src/nodelock and src/protocol/keys.h as they are, plus one planted file.
  plant() {  # <name> <file> <line>
    local t=$tmp/$1
    mkdir -p "$t/src/protocol" "$t/$(dirname "$2")"
    cp -r "$here/src/nodelock" "$t/src/"
    cp "$here/src/protocol/keys.h" "$t/src/protocol/"
    [[ -n "$3" ]] && printf '%s\n' "$3" >>"$t/$2"
    echo "$t"
  }
  expect() {  # <want: pass|fail> <name> <file> <line>
    local t got
    t=$(plant "$2" "$3" "$4")
    if check "$t" 2>"$t.err"; then got=pass; else got=fail; fi
    if [[ "$got" != "$1" ]]; then
      echo "self-test $2: want $1, got $got" >&2
      cat "$t.err" >&2
      status=1
    fi
  }
  expect pass clean src/x/reader.cc \
    'auto lock = k8s::Annotation(*n, protocol::kNodeLockKey);  // a read'
  expect pass comment src/x/comment.cc \
    '// patch["metadata"]["annotations"][std::string(protocol::kNodeLockKey)] = nullptr;'
  expect pass reviewed src/sim/view.cc '  annos.erase(std::string(protocol::kNodeLockKey));'
  expect fail merge_patch src/deviceplugin/allocator.cc \
    '  patch["metadata"]["annotations"][std::string(protocol::kNodeLockKey)] = nullptr;'
  expect fail initializer src/scheduler/extender.cc \
    '  json p = {{"metadata", {{"annotations", {{std::string(protocol::kNodeLockKey), v}}}}}};'
  expect fail json_pointer src/sim/vendor_plugin.cc \
    '  const std::string path = "/metadata/annotations/" + k8s::JsonPointerEscape(kNodeLockKey);'
  expect fail spelled_pointer src/sim/vendor_plugin.cc \
    '  {"op", "remove"}, {"path", "/metadata/annotations/hami.io~1mutex.lock"}'
  expect fail literal src/deviceplugin/x.cc '  annotations["hami.io/mutex.lock"] = nullptr;'
  expect fail erase src/deviceplugin/x.cc '  annotations.erase(std::string(protocol::kNodeLockKey));'
  expect fail second_release src/deviceplugin/x.cc \
    'Status Release(k8s::Client& c, std::string_view node) { return OkStatus(); }'
  expect fail remove_in_acquire src/nodelock/acquire.cc \
    '  patch["metadata"]["annotations"][std::string(protocol::kNodeLockKey)] = nullptr;'
  expect fail remove_op_in_nodelock src/nodelock/owner.cc '  {{"op", "remove"}, {"path", p}}'
  if [[ $status -eq 0 ]]; then echo "self-test: ok"; fi
  return $status
}

if [[ "${1:-}" == "--self-test" ]]; then
  self_test
else
  root=${1:?usage: one_release_check.sh <repo root> | --self-test}
  if check "$root"; then
    echo "one node lock: src/nodelock writes hami.io/mutex.lock, nodelock::Release removes it"
  else
    exit 1
  fi
fi
