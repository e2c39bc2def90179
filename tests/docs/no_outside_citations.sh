#!/usr/bin/env bash
# Comments in src/ cite docs/ in this repository, never the specs, seeds or design notes kept
# outside it (docs/ARCHITECTURE.md, decision 10): a reader of the source has docs/ and nothing else.
# The wire formats are in docs/protocol.md, the layout and decisions in docs/ARCHITECTURE.md.
#
#   no_outside_citations.sh <repo root>   check <repo root>/src; exit 1 listing the offending lines
#   no_outside_citations.sh --self-test   run the check on small trees: one citation of each kind
#                                         planted (each must fail) and a clean one (must pass)
#
# HAMi's own source (e.g. "HAMi v2.10 pkg/util/nodelock") may be cited: it is public upstream.
set -euo pipefail

# One extended regex per kind of outside citation.
readonly kPatterns=(
  '\.\./shared'                                                   # a path out of the repository
  '/work/shared'
  '(^|[^A-Za-z0-9_/.-])(hami|hami-core|kubernetes-contracts|deploy|toolchain)\.md'  # the specs
  'spec hami'
  '(^|[^A-Za-z])seeds?( |/)+(0[0-9]|"|[A-Z])'                   # seed 000..., seed "Task Dispatch"
  'the seed'
  'DESIGN( decision|\.md|:)'
)

# Prints "<file>:<line>: <text>" for every outside citation under <root>/src.
citations() {
  local root=$1 pattern
  for pattern in "${kPatterns[@]}"; do
    (cd "$root" && grep -rnE -- "$pattern" src || true)
  done
  # A bare section number ("(§3 step 7)", "spec §4.9") is a spec's; an RFC's section is fine.
  (cd "$root" && grep -rnE '§ ?[0-9]' src | grep -vE 'RFC ?[0-9]+,? §' || true)
}

sorted_citations() {
  citations "$1" | sort -u
}

# GitHub's anchor of a Markdown heading line: "## NVIDIA's fit" -> "nvidias-fit".
slug() {
  sed -E 's/^#+[ \t]*//' | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9 _-]//g; s/ /-/g'
}

# Prints "<file>:<line>: <citation>" for every docs/<page>.md[#anchor] cited under <root>/src whose
# page or heading does not exist.
dangling() {
  local root=$1 where cite page anchor
  (cd "$root" && grep -rnoE 'docs/[A-Za-z0-9_/.-]+\.md(#[a-z0-9_-]+)?' src || true) |
    while IFS= read -r hit; do
      where=${hit%:*}
      cite=${hit##*:}
      page=${cite%%#*}
      anchor=""
      [[ $cite == *"#"* ]] && anchor=${cite#*#}
      if [[ ! -f "$root/$page" ]]; then
        echo "$where: $cite (no such page)"
      elif [[ -n $anchor ]] && ! grep -E '^#+ ' "$root/$page" | slug | grep -qxF -- "$anchor"; then
        echo "$where: $cite (no such heading)"
      fi
    done
}

check() {
  local root=$1 found missing
  if [[ ! -d "$root/src" ]]; then
    echo "no_outside_citations: $root/src is not a directory" >&2
    return 2
  fi
  found=$(sorted_citations "$root")
  if [[ -n "$found" ]]; then
    echo "src/ cites documents outside the repository; cite docs/ instead" \
      "(docs/protocol.md, docs/ARCHITECTURE.md):" >&2
    echo "$found" >&2
    return 1
  fi
  missing=$(dangling "$root")
  if [[ -n "$missing" ]]; then
    echo "src/ cites docs/ pages or headings that do not exist:" >&2
    echo "$missing" >&2
    return 1
  fi
  return 0
}

self_test() {
  local tmp failures=0 line
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  local -a bad=(
    '// Pod device annotations (spec hami.md §2.5).'
    '// see ../shared/spec/hami.md'
    '# Modules in dependency order (see ../shared DESIGN: dependencies point down the list).'
    '// The environment contract of HAMi-core (hami-core.md §3).'
    '// kubernetes-contracts.md §4.1'
    '// (toolchain.md pitfall 6e)'
    '// chart values (deploy.md)'
    '// Node registration (seed 000 "NVIDIA Device Inventory")'
    '// The registration pass (seed "Health Checks")'
    '// the seed whose keys win'
    '// The incremental usage index (DESIGN decision 3)'
    '// /work/shared/STYLE.md'
    '// LockNode (spec §4.7 step 2) as a pure decision'
    '// Quota pre-check (§3 step 7) over the mutated pod'
    '// Reads every variable of §3 through `lookup`.'
  )
  for line in "${bad[@]}"; do
    rm -rf "$tmp/tree" && mkdir -p "$tmp/tree/src/m"
    printf '%s\n' '#include "m/a.h"' "$line" 'int x = 0;' >"$tmp/tree/src/m/a.cc"
    if check "$tmp/tree" 2>/dev/null; then
      echo "self-test: not caught: $line" >&2
      failures=$((failures + 1))
    fi
  done
  local -a dangling_cites=(
    '// (docs/nowhere.md)'
    '// (docs/protocol.md#no-such-section)'
  )
  for line in "${dangling_cites[@]}"; do
    rm -rf "$tmp/tree" && mkdir -p "$tmp/tree/src/m" "$tmp/tree/docs"
    printf '%s\n' '# Wire formats' "## NVIDIA's fit" >"$tmp/tree/docs/protocol.md"
    printf '%s\n' "$line" >"$tmp/tree/src/m/a.cc"
    if check "$tmp/tree" 2>/dev/null; then
      echo "self-test: dangling citation not caught: $line" >&2
      failures=$((failures + 1))
    fi
  done
  rm -rf "$tmp/tree" && mkdir -p "$tmp/tree/src/m" "$tmp/tree/docs"
  printf '%s\n' '# Wire formats' "## NVIDIA's fit" '## Device lists on pods' >"$tmp/tree/docs/protocol.md"
  printf '%s\n' '# Architecture' '## Decisions' >"$tmp/tree/docs/ARCHITECTURE.md"
  printf '%s\n' '# MIG' >"$tmp/tree/docs/MIG.md"
  printf '%s\n' '# vgpu' >"$tmp/tree/docs/vgpu.md"
  printf '%s\n' '# apiserver' >"$tmp/tree/docs/SIM_APISERVER.md"
  mkdir -p "$tmp/tree/docs/vendors" && printf '%s\n' '# ascend' >"$tmp/tree/docs/vendors/ascend.md"
  printf '%s\n' \
    '// Pod device annotations (docs/protocol.md#device-lists-on-pods; docs/protocol.md#nvidias-fit).' \
    '// Pod device annotations (docs/protocol.md, "Device lists on pods").' \
    '// The environment libvgpu reads (docs/vgpu.md, "Environment").' \
    '// The incremental usage index (docs/ARCHITECTURE.md#decisions, 3).' \
    '// HAMi v2.10 pkg/util/nodelock/nodelock.go; docs/MIG.md; docs/vendors/ascend.md' \
    '// a seedless run; deploy_md = 1; see docs/SIM_APISERVER.md' \
    '    if (line.empty()) return true;  // RFC 9112 §2.2: ignore empty lines' >"$tmp/tree/src/m/a.cc"
  if ! check "$tmp/tree"; then
    echo "self-test: a clean tree failed" >&2
    failures=$((failures + 1))
  fi
  if ((failures > 0)); then
    echo "self-test: $failures failure(s)" >&2
    return 1
  fi
  echo "self-test: ${#bad[@]} outside and ${#dangling_cites[@]} dangling citations caught," \
    "clean tree passes"
}

case "${1:-}" in
  --self-test) self_test ;;
  "") echo "usage: $0 <repo root> | --self-test" >&2; exit 2 ;;
  *) check "$1" && echo "src/ cites only docs/" ;;
esac
