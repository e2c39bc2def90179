#!/usr/bin/env bash
# tests/image/image_test.sh SOURCE_DIR BUILD_DIR
#
# The in-image test (ctest image.oci): builds BUILD_DIR/image/hami.oci.tar with image/build.sh
# (a no-op when the archive is newer than its inputs), unpacks it the way a runtime would
# (tar, then umoci unpack) and checks, inside the image's root file system:
#   - image/build.sh refuses a package list that misses a needed package or has an unneeded one;
#   - index.json has exactly one manifest, named localhost/hami:<project version>;
#   - the contract files of docs/IMAGE.md are there, with their modes;
#   - every binary's --help exits 0 under chroot, and ldd finds every library of every binary
#     and of libvgpu.so (no runtime package is missing);
#   - hami-install-libvgpu with no argument fills /usr/local/vgpu.
set -euo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $# -eq 2 ]] || fail "usage: image_test.sh SOURCE_DIR BUILD_DIR"
src=$1
build=$2
archive=$build/image/hami.oci.tar
version=$(sed -n 's/^project(hami VERSION \([0-9][0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
ref=localhost/hami:$version

if [[ $(id -u) -ne 0 ]] && ! { command -v sudo >/dev/null && sudo -n true 2>/dev/null; }; then
  fail "the image test needs root (or passwordless sudo) to build the image and chroot into it"
fi
as_root=()
if [[ $(id -u) -ne 0 ]]; then as_root=(sudo -n); fi

# The package list is checked against the binaries' libraries before anything is built: a list
# missing a needed package, or naming one nothing links (without `extra`), stops the build.
lists=$(mktemp -d "${TMPDIR:-/tmp}/hami-image-packages.XXXXXX")
grep -v '^libfmt9$' "$src/image/packages" >"$lists/missing"
{
  cat "$src/image/packages"
  echo libz3-4
} >"$lists/unneeded"
for case in missing:"'libfmt9' is needed by hami-scheduler" unneeded:"'libz3-4' is in"; do
  list=${case%%:*}
  if msg=$("$src/image/build.sh" --check-packages --packages "$lists/$list" "$build" 2>&1); then
    fail "image/build.sh accepted a package list with a $list package"
  fi
  [[ $msg == *"${case#*:}"* ]] || fail "image/build.sh's message for a $list package: $msg"
done
rm -rf "$lists"
"$src/image/build.sh" --check-packages "$build" >/dev/null || fail "image/packages does not match the binaries"
echo "ok: image/packages is exactly what the binaries link (a missing or unneeded package is refused)"

if ! "$src/image/build.sh" "$build"; then
  fail "image/build.sh could not build $archive (see its message above; CI reaches Debian's mirror, this machine may not)"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/hami-image-test.XXXXXX")
trap '"${as_root[@]}" rm -rf "$work"' EXIT

# --- The archive: one manifest with the contract's name. ---------------------------------------
mkdir "$work/oci"
tar -C "$work/oci" -xf "$archive"
[[ -f $work/oci/oci-layout ]] || fail "no oci-layout file in $archive"
python3 - "$work/oci/index.json" "$ref" <<'EOF' || fail "index.json of $archive is not as expected"
import json, sys
index = json.load(open(sys.argv[1]))
manifests = index.get("manifests", [])
if len(manifests) != 1:
    sys.exit(f"index.json has {len(manifests)} manifests, want exactly 1")
m = manifests[0]
if m.get("mediaType") != "application/vnd.oci.image.manifest.v1+json":
    sys.exit(f"manifest mediaType {m.get('mediaType')!r}")
name = m.get("annotations", {}).get("org.opencontainers.image.ref.name")
if name != sys.argv[2]:
    sys.exit(f"ref name {name!r}, want {sys.argv[2]!r}")
EOF
echo "ok: one manifest, named $ref"

"${as_root[@]}" umoci unpack --image "$work/oci:$ref" "$work/bundle" >/dev/null ||
  fail "umoci unpack of $ref failed"
rootfs=$work/bundle/rootfs

# --- The files of the contract (docs/IMAGE.md). -------------------------------------------------
binaries=(hami-scheduler hami-device-plugin hami-dra-plugin hamictl)
# hami-vgpu-monitor: checked as soon as the build makes it (image/build.sh adds it then).
if [[ -x $build/bin/hami-vgpu-monitor ]]; then binaries+=(hami-vgpu-monitor); fi
for f in "${binaries[@]}" hami-install-libvgpu; do
  [[ -f $rootfs/usr/local/bin/$f && -x $rootfs/usr/local/bin/$f ]] ||
    fail "/usr/local/bin/$f is missing or not executable in the image"
done
for f in libvgpu.so ld.so.preload; do
  [[ -f $rootfs/k8s-vgpu/lib/nvidia/$f ]] || fail "/k8s-vgpu/lib/nvidia/$f is missing in the image"
done
cmp -s "$build/lib/libvgpu.so" "$rootfs/k8s-vgpu/lib/nvidia/libvgpu.so" ||
  fail "the image's libvgpu.so differs from $build/lib/libvgpu.so"
preload=$(cat "$rootfs/k8s-vgpu/lib/nvidia/ld.so.preload")
[[ $preload == /usr/local/vgpu/libvgpu.so ]] ||
  fail "ld.so.preload says '$preload', want /usr/local/vgpu/libvgpu.so"
for f in etc/resolv.conf etc/hostname; do
  [[ ! -e $rootfs/$f ]] || fail "/$f of the build host is in the image"
done
[[ -z $(ls -A "$rootfs/dev") ]] || fail "/dev in the image is not empty: $(ls -A "$rootfs/dev")"
echo "ok: contract files present, no host files"

# --- Every binary runs inside the image, and no library is missing. ------------------------------
in_image() { "${as_root[@]}" chroot "$rootfs" "$@"; }
for b in "${binaries[@]}"; do
  if ! out=$(in_image "/usr/local/bin/$b" --help 2>&1); then
    printf '%s\n' "$out" >&2
    fail "$b --help failed inside the image"
  fi
  [[ -n $out ]] || fail "$b --help printed nothing inside the image"
  echo "ok: $b --help"
done
for f in "${binaries[@]/#//usr/local/bin/}" /k8s-vgpu/lib/nvidia/libvgpu.so; do
  libs=$(in_image /usr/bin/ldd "$f" 2>&1) || fail "ldd $f failed inside the image: $libs"
  if grep -q 'not found' <<<"$libs"; then
    printf '%s\n' "$libs" >&2
    fail "$f misses libraries inside the image (add their packages to image/packages)"
  fi
done
echo "ok: ldd finds every library of ${binaries[*]} and libvgpu.so"

# --- The placement script, as the DaemonSet runs it (default DEST). -----------------------------
in_image /usr/local/bin/hami-install-libvgpu >/dev/null || fail "hami-install-libvgpu failed in the image"
for f in libvgpu.so ld.so.preload; do
  cmp -s "$rootfs/k8s-vgpu/lib/nvidia/$f" "$rootfs/usr/local/vgpu/$f" ||
    fail "hami-install-libvgpu did not place /usr/local/vgpu/$f"
done
echo "ok: hami-install-libvgpu placed /usr/local/vgpu"
echo "PASS: $archive"
