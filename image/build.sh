#!/usr/bin/env bash
# image/build.sh [--force] [--check-packages] [--packages FILE] BUILD_DIR
#
# Builds the project's one container image, BUILD_DIR/image/hami.oci.tar: an OCI archive (a tar
# of an OCI image layout) holding one manifest named localhost/hami:<version>, made from Debian
# packages only (mmdebstrap + umoci; no registry, no docker). Inputs are the binaries in
# BUILD_DIR/bin and BUILD_DIR/lib/libvgpu.so (`make build`), image/packages,
# image/hami-install-libvgpu and image/ld.so.preload. docs/IMAGE.md describes the result;
# image/Dockerfile builds the same image with docker.
#
# The runtime packages are derived from the binaries (objdump -p NEEDED, ldd, dpkg -S) and must
# equal image/packages (or --packages FILE); --check-packages stops after that check, which needs
# neither root nor the network (image/Dockerfile runs it).
#
# The archive is left alone when it is newer than every input (--force rebuilds it). Building
# needs root (or passwordless sudo) and Debian's mirror:
# HAMI_IMAGE_MIRROR and HAMI_IMAGE_SECURITY_MIRROR override the two archives. SOURCE_DATE_EPOCH
# (default: the last commit's time) fixes every timestamp in the image, so two builds from the
# same binaries and the same mirror state give the same digests.
set -euo pipefail

die() {
  echo "image: $*" >&2
  exit 1
}

usage="usage: image/build.sh [--force] [--check-packages] [--packages FILE] BUILD_DIR"
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
force=0
check_only=0
package_list=$here/packages
while [[ $# -gt 1 ]]; do
  case $1 in
    --force) force=1 ;;
    --check-packages) check_only=1 ;;
    --packages)
      [[ $# -gt 2 ]] || die "$usage"
      package_list=$2
      shift
      ;;
    *) die "unknown option '$1'; $usage" ;;
  esac
  shift
done
[[ $# -eq 1 && $1 != -* ]] || die "$usage"
build=$(cd "$1" && pwd) || die "build directory '$1' does not exist (run make build)"

version=$(sed -n 's/^project(hami VERSION \([0-9][0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
[[ -n $version ]] || die "no 'project(hami VERSION x.y.z' line in $root/CMakeLists.txt"
ref="localhost/hami:$version"
suite=bookworm
mirror=${HAMI_IMAGE_MIRROR:-http://deb.debian.org/debian}
security_mirror=${HAMI_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
out_dir=$build/image
out=$out_dir/hami.oci.tar

# What goes into /usr/local/bin. The vGPU monitor (hami-vgpu-monitor, src/monitor) is not built
# yet: it is listed in `optional` and joins the image, its --help check and its library check
# as soon as BUILD_DIR/bin/hami-vgpu-monitor exists.
binaries=(hami-scheduler hami-device-plugin hami-dra-plugin hamictl)
optional=(hami-vgpu-monitor)
for b in "${optional[@]}"; do
  if [[ -x $build/bin/$b ]]; then binaries+=("$b"); fi
done
inputs=("$package_list" "$here/hami-install-libvgpu" "$here/ld.so.preload" "$here/build.sh"
  "$build/lib/libvgpu.so")
for b in "${binaries[@]}"; do inputs+=("$build/bin/$b"); done
for f in "${inputs[@]}"; do
  [[ -f $f ]] || die "input '$f' is missing (run make build)"
done

if ((force == 0 && check_only == 0)) && [[ -f $out ]]; then
  stale=0
  for f in "${inputs[@]}"; do
    if [[ $f -nt $out ]]; then stale=1; fi
  done
  if ((stale == 0)); then
    echo "image: $out is up to date ($ref)"
    exit 0
  fi
fi

for tool in objdump ldd dpkg-query; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run scripts/bootstrap"
done

# --- The runtime packages: derived from the binaries, checked against image/packages. ---------

# Each NEEDED entry of each binary, resolved to a path by ldd (which honours the binary's class).
declare -A lib_users=()  # library path -> " binary..."
for f in "${binaries[@]/#/$build/bin/}" "$build/lib/libvgpu.so"; do
  mapfile -t sonames < <(objdump -p "$f" | awk '$1 == "NEEDED" {print $2}')
  ldd_out=$(ldd "$f") || die "ldd '$f' failed"
  for so in "${sonames[@]}"; do
    # "libx.so.1 => /path (0x...)" or, for the loader, "/lib64/ld-linux-x86-64.so.2 (0x...)".
    path=$(awk -v so="/$so" '
      $1 == substr(so, 2) && $2 == "=>" { print $3 }
      length($1) > length(so) && substr($1, length($1) - length(so) + 1) == so { print $1 }' \
      <<<"$ldd_out" | head -n1)
    [[ -n $path && $path != not ]] || die "$(basename "$f") needs $so, which is not installed here"
    lib_users[$path]+=" $(basename "$f")"
  done
done
# Their owners, in one dpkg query (one is slow): dpkg registers some libraries under /lib, others
# under /usr/lib, and merged /usr makes both paths name the same file, so ask for every spelling.
candidates=()
for path in "${!lib_users[@]}"; do
  candidates+=("$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}")
done
declare -A owner=()  # path as dpkg knows it -> package
while IFS= read -r line; do
  [[ $line == diversion* ]] && continue
  pkgs=${line%%: /*}
  [[ $pkgs == *,* ]] && continue  # a path shared by several packages
  owner[${line#*: }]=${pkgs%%:*}
done < <(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
declare -A needed_by=()  # package -> " binary..."
for path in "${!lib_users[@]}"; do
  pkg=
  for p in "$path" "$(readlink -f "$path")" "/usr$path" "${path#/usr}"; do
    if [[ -v owner[$p] ]]; then
      pkg=${owner[$p]}
      break
    fi
  done
  [[ -n $pkg ]] || die "${lib_users[$path]# } needs $path, which no Debian package owns"
  for user in ${lib_users[$path]}; do
    [[ " ${needed_by[$pkg]:-} " == *" $user "* ]] || needed_by[$pkg]+=" $user"
  done
done

declare -A listed=()
packages=()
while read -r name flag rest; do
  [[ -z $name || $name == \#* ]] && continue
  [[ -z $flag || $flag == extra ]] || die "$package_list: unknown word '$flag' after '$name'"
  [[ -z $rest ]] || die "$package_list: trailing text '$rest' after '$name $flag'"
  listed[$name]=$flag
  packages+=("$name")
done <"$package_list"

problems=()
for pkg in "${!needed_by[@]}"; do
  if [[ ! -v listed[$pkg] ]]; then
    problems+=("package '$pkg' is needed by${needed_by[$pkg]} but is not in $package_list")
  fi
done
for pkg in "${packages[@]}"; do
  if [[ ${listed[$pkg]} != extra && ! -v needed_by[$pkg] ]]; then
    problems+=("package '$pkg' is in $package_list but no binary links it (mark it 'extra' and say why, or remove it)")
  fi
done
if ((${#problems[@]} > 0)); then
  printf 'image: %s\n' "${problems[@]}" >&2
  die "$package_list does not match the binaries' libraries; fix the list"
fi
echo "image: $package_list matches the libraries of ${binaries[*]} libvgpu.so"
if ((check_only)); then exit 0; fi

# mmdebstrap --mode=root and umoci keep file owners (root, shadow's group) only as root; umoci
# --rootless would record them wrongly.
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    exec sudo -n --preserve-env=SOURCE_DATE_EPOCH,HAMI_IMAGE_MIRROR,HAMI_IMAGE_SECURITY_MIRROR \
      "$here/build.sh" --force --packages "$package_list" "$build"
  fi
  die "building the image needs root (or passwordless sudo)"
fi
for tool in mmdebstrap umoci tar; do
  command -v "$tool" >/dev/null || die "'$tool' not found; run scripts/bootstrap"
done

# --- The root file system. -----------------------------------------------------------------------

if [[ -z ${SOURCE_DATE_EPOCH:-} ]]; then
  SOURCE_DATE_EPOCH=$(git -C "$root" log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$out_dir"
work=$(mktemp -d "$out_dir/work.XXXXXX")
cleanup() {
  rm -rf "$work"
}
trap cleanup EXIT

# umoci unpacks the empty image into bundle/, mmdebstrap fills bundle/rootfs, and umoci repack
# turns that into the one layer.
layout=$work/oci
bundle=$work/bundle
rootfs=$bundle/rootfs
umoci init --layout "$layout"
umoci new --image "$layout:$ref"
umoci unpack --image "$layout:$ref" "$bundle" >/dev/null

start=$SECONDS
include=$(
  IFS=,
  echo "${packages[*]}"
)
# The .debs of the last build: apt reuses those whose version is still current, so a rebuild
# downloads only the package lists and what changed. The cache is replaced by this build's set.
debs=$out_dir/debs
mkdir -p "$debs" "$work/debs"
# shellcheck disable=SC2016 # $1 is the root directory, expanded when mmdebstrap runs the hook
make_cache_dir='mkdir -p "$1/var/cache/apt/archives"'
# The container runtime provides resolv.conf and hostname; mmdebstrap copies the build host's.
# shellcheck disable=SC2016
strip_host_files='rm -f "$1/etc/resolv.conf" "$1/etc/hostname"'
echo "image: mmdebstrap $suite with: ${packages[*]}"
if ! mmdebstrap --variant=minbase --mode=root --format=directory \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --include="$include" \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --skip=essential/unlink \
  --setup-hook="$make_cache_dir" \
  --setup-hook="sync-in $debs /var/cache/apt/archives/" \
  --customize-hook="sync-out /var/cache/apt/archives $work/debs" \
  --customize-hook="$strip_host_files" \
  "$suite" "$rootfs" \
  "deb $mirror $suite main" \
  "deb $mirror $suite-updates main" \
  "deb $security_mirror $suite-security main" >"$work/mmdebstrap.log" 2>&1; then
  tail -n 25 "$work/mmdebstrap.log" >&2
  die "mmdebstrap could not build the root file system (log above). Is $mirror reachable from here? Set HAMI_IMAGE_MIRROR and HAMI_IMAGE_SECURITY_MIRROR to a reachable Debian mirror."
fi
if ! { rm -rf "$debs" && mv -T "$work/debs" "$debs"; } 2>/dev/null; then
  echo "image: a concurrent build replaced the .deb cache first; keeping its set"
fi
# The runtime provides /dev too; device nodes in the layer would stop rootless runtimes.
find "$rootfs/dev" -mindepth 1 -delete
echo "image: root file system in $((SECONDS - start)) s"

# The project's files (the contract in docs/IMAGE.md).
install -d -m 0755 "$rootfs/usr/local/bin" "$rootfs/k8s-vgpu/lib/nvidia"
for b in "${binaries[@]}"; do
  install -m 0755 "$build/bin/$b" "$rootfs/usr/local/bin/$b"
done
install -m 0755 "$here/hami-install-libvgpu" "$rootfs/usr/local/bin/hami-install-libvgpu"
install -m 0644 "$build/lib/libvgpu.so" "$rootfs/k8s-vgpu/lib/nvidia/libvgpu.so"
install -m 0644 "$here/ld.so.preload" "$rootfs/k8s-vgpu/lib/nvidia/ld.so.preload"
chown -R 0:0 "$rootfs/usr/local" "$rootfs/k8s-vgpu"
# Clamp every timestamp (ours are the build's; a few of mmdebstrap's are the clock's).
find "$rootfs" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# --- The OCI layout: one layer, one manifest. ----------------------------------------------------

umoci repack --image "$layout:$ref" \
  --history.created "$created" --history.created_by "image/build.sh: mmdebstrap $suite + hami" \
  "$bundle" >/dev/null
umoci config --image "$layout:$ref" --created "$created" --no-history \
  --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.cmd hamictl --config.cmd --help \
  --config.workingdir / \
  --config.label "org.opencontainers.image.title=hami" \
  --config.label "org.opencontainers.image.version=$version" \
  --config.label "org.opencontainers.image.description=HAMi rebuilt in C++ (hami-scheduler, hami-device-plugin, hami-dra-plugin, hamictl, libvgpu.so) on Debian $suite minbase"
umoci gc --layout "$layout"

manifests=$(grep -o '"application/vnd.oci.image.manifest.v1+json"' "$layout/index.json" | wc -l)
[[ $manifests -eq 1 ]] || die "expected one manifest in index.json, found $manifests"

tmp_out=$work/hami.oci.tar
tar -C "$layout" --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  --mode=a+rX,u+w \
  -cf "$tmp_out" oci-layout index.json blobs
mv -f "$tmp_out" "$out"
echo "image: wrote $out ($ref, $(du -m "$out" | cut -f1) MB) in $((SECONDS - start)) s"
