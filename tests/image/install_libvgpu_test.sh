#!/usr/bin/env bash
# tests/image/install_libvgpu_test.sh SOURCE_DIR
#
# image/hami-install-libvgpu against temp dirs: placement, atomic replace (a new inode; a reader
# of the old file keeps the old bytes; no temp file left), up-to-date files left alone, the
# default DEST (/usr/local/vgpu, inside a private mount namespace), and the exit codes
# (0 placed, 1 cannot read or write, 2 usage). Runs the script with /bin/sh (dash on Debian),
# the shell the image runs it with. Exits 77 (ctest: skipped) when only the default-DEST case
# could not run for want of a mount namespace.
set -euo pipefail

[[ $# -eq 1 ]] || {
  echo "usage: install_libvgpu_test.sh SOURCE_DIR" >&2
  exit 1
}
script=$1/image/hami-install-libvgpu
work=$(mktemp -d "${TMPDIR:-/tmp}/hami-install-libvgpu-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
failures=0
skipped=

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# run EXPECTED_STATUS ARGS...: runs the script with the test's source dir; its output in $out.
run() {
  local want=$1 got=0
  shift
  out=$(HAMI_LIBVGPU_SRC=$work/src sh "$script" "$@" 2>&1) || got=$?
  if [[ $got -ne $want ]]; then
    fail "hami-install-libvgpu $* exited $got, want $want; output: $out"
    return 1
  fi
}
inode() { stat -c %i "$1"; }
no_temp_files() {
  local left
  left=$(find "$1" -name '.*.tmp.*' | head -n1)
  [[ -z $left ]] || fail "temp file left behind: $left"
}

mkdir -p "$work/src"
echo "libvgpu v2" >"$work/src/libvgpu.so"
echo "/usr/local/vgpu/libvgpu.so" >"$work/src/ld.so.preload"

# Usage.
if run 0 --help; then
  [[ $out == *"/usr/local/vgpu"* ]] || fail "--help does not name the default DEST: $out"
fi
run 2 a b
run 2 --bogus
run 2 ""

# A fresh, nested DEST is created and filled.
dest=$work/host/usr/local/vgpu
if run 0 "$dest"; then
  for f in libvgpu.so ld.so.preload; do
    cmp -s "$work/src/$f" "$dest/$f" || fail "$dest/$f not placed"
    [[ $(stat -c %a "$dest/$f") == 644 ]] || fail "$dest/$f mode $(stat -c %a "$dest/$f"), want 644"
  done
  no_temp_files "$dest"
fi

# Atomic replace: a new file takes the name; whoever had the old one open still reads it whole.
echo "libvgpu v1" >"$dest/libvgpu.so"
old_inode=$(inode "$dest/libvgpu.so")
exec 3<"$dest/libvgpu.so"
echo "libvgpu v3" >"$work/src/libvgpu.so"
preload_inode=$(inode "$dest/ld.so.preload")
if run 0 "$dest"; then
  cmp -s "$work/src/libvgpu.so" "$dest/libvgpu.so" || fail "libvgpu.so not replaced"
  [[ $(inode "$dest/libvgpu.so") != "$old_inode" ]] || fail "libvgpu.so was rewritten in place"
  [[ $(cat <&3) == "libvgpu v1" ]] || fail "the open old libvgpu.so changed under its reader"
  # Unchanged content is left alone (same inode), and said so.
  [[ $(inode "$dest/ld.so.preload") == "$preload_inode" ]] || fail "an up-to-date ld.so.preload was replaced"
  [[ $out == *"ld.so.preload is up to date"* ]] || fail "no up-to-date message: $out"
  no_temp_files "$dest"
fi
exec 3<&-

# Errors: nothing to copy; DEST not a directory; a directory in the way of a file.
rm "$work/src/ld.so.preload"
before=$(cat "$dest/libvgpu.so")
if run 1 "$dest"; then
  [[ $out == *"ld.so.preload"*"missing"* ]] || fail "missing source not named: $out"
fi
[[ $(cat "$dest/libvgpu.so") == "$before" ]] || fail "a failed run changed $dest/libvgpu.so"
echo "/usr/local/vgpu/libvgpu.so" >"$work/src/ld.so.preload"
touch "$work/not-a-dir"
run 1 "$work/not-a-dir"
mkdir -p "$work/blocked/libvgpu.so"
if run 1 "$work/blocked"; then
  [[ $out == *"is a directory"* ]] || fail "directory in the way not named: $out"
fi
no_temp_files "$work/blocked"

# The default DEST, /usr/local/vgpu, inside a private mount namespace with a tmpfs on /usr/local.
if unshare -m true 2>/dev/null; then
  ns=(unshare -m)
elif unshare -rm true 2>/dev/null; then
  ns=(unshare -rm)
else
  ns=()
  skipped="no mount namespace here (unshare -m and unshare -rm fail): the default DEST is untested"
fi
if ((${#ns[@]} > 0)); then
  got=0
  # shellcheck disable=SC2016 # expanded by the inner shell
  out=$(HAMI_LIBVGPU_SRC=$work/src "${ns[@]}" sh -c '
    mount -t tmpfs tmpfs /usr/local || exit 99
    sh "$1" >/dev/null || exit $?
    cmp -s "$HAMI_LIBVGPU_SRC/libvgpu.so" /usr/local/vgpu/libvgpu.so || exit 97
    cmp -s "$HAMI_LIBVGPU_SRC/ld.so.preload" /usr/local/vgpu/ld.so.preload || exit 98' \
    sh "$script" 2>&1) || got=$?
  [[ $got -eq 0 ]] || fail "default DEST run exited $got (97/98: file not placed, 99: no tmpfs): $out"
fi

if ((failures > 0)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
if [[ -n $skipped ]]; then
  echo "SKIP: $skipped (every other check passed)"
  exit 77
fi
echo "PASS: hami-install-libvgpu"
