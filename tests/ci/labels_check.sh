#!/usr/bin/env bash
# Every ctest test carries a label that one of make test's two passes runs: the Release pass runs
# the labels in the Makefile's RELEASE_LABELS, the sanitizer pass those in ASAN_LABELS
# (docs/DEVELOPING.md, "Test labels"). A test labelled otherwise, or not at all, would be built
# and never run by make test.
#
#   labels_check.sh <repo root> <build dir>   exit 1 listing such tests of <build dir>
#   labels_check.sh --self-test               run the check on small test trees: a test with an
#                                             unknown label and an unlabelled one (each must
#                                             fail) and a clean tree (must pass)
#
# gtest_discover_tests adds "<target>_NOT_BUILT" (no label) for a test binary not built yet:
# the Release pass leaves the unit test binaries unbuilt on purpose, so those are not counted.
set -euo pipefail

# The labels the two passes run, read from the Makefile: "a|b|c".
known_labels() {
  local makefile=$1/Makefile release asan
  release=$(sed -n 's/^RELEASE_LABELS ?= //p' "$makefile")
  asan=$(sed -n 's/^ASAN_LABELS ?= //p' "$makefile")
  if [[ -z $release || -z $asan ]]; then
    echo "labels_check: no RELEASE_LABELS or ASAN_LABELS in $makefile" >&2
    return 1
  fi
  echo "$release|$asan"
}

# Prints the tests of <build dir> whose labels are none of <labels> ("a|b").
unrun() {
  local dir=$1 labels=$2
  (cd "$dir" && ctest -N -LE "^($labels)\$") | sed -nE 's/^ *Test +#[0-9]+: //p' |
    grep -v '_NOT_BUILT$' || true
}

check() {
  local root=$1 dir=$2 labels found
  labels=$(known_labels "$root")
  found=$(unrun "$dir" "$labels")
  if [[ -n $found ]]; then
    echo "tests make test never runs (labels none of $labels):"
    echo "$found"
    return 1
  fi
  echo "labels_check: every test of $dir has one of $labels"
}

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  printf 'RELEASE_LABELS ?= integration|vgpu\nASAN_LABELS ?= unit|fuzz\n' > "$tmp/Makefile"
  mkdir -p "$tmp/clean" "$tmp/unknown" "$tmp/unlabelled"
  local base='add_test(a true)
set_tests_properties(a PROPERTIES LABELS unit)
add_test(b true)
set_tests_properties(b PROPERTIES LABELS "integration;unit")
add_test(c_NOT_BUILT c_NOT_BUILT)
'
  echo "$base" > "$tmp/clean/CTestTestfile.cmake"
  printf '%s\nadd_test(bogus true)\nset_tests_properties(bogus PROPERTIES LABELS slow)\n' \
    "$base" > "$tmp/unknown/CTestTestfile.cmake"
  printf '%s\nadd_test(bare true)\n' "$base" > "$tmp/unlabelled/CTestTestfile.cmake"
  local out
  if ! out=$(check "$tmp" "$tmp/clean"); then
    echo "self-test: the clean tree failed: $out"
    return 1
  fi
  for case in unknown:bogus unlabelled:bare; do
    local tree=${case%%:*} name=${case##*:}
    if out=$(check "$tmp" "$tmp/$tree"); then
      echo "self-test: the $tree tree passed: $out"
      return 1
    fi
    if ! grep -qx "$name" <<<"$out" || grep -qE '^(a|b|c_NOT_BUILT)$' <<<"$out"; then
      echo "self-test: the $tree tree's report does not name $name alone: $out"
      return 1
    fi
  done
  echo "labels_check self-test: ok"
}

if [[ ${1:-} == --self-test ]]; then
  self_test
else
  check "$1" "$2"
fi
