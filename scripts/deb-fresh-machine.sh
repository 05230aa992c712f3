#!/usr/bin/env bash
# Installs the datavo .deb (cmake/Package.cmake) on a fresh Debian 12: a minimal debootstrapped root, copied from a
# cached pristine one for each run, where apt-get installs the package together with whatever its Depends pull from
# the Debian mirror, then runs `datavo --version`. With --dev it also installs libdatavo-dev (which pulls in g++ and
# the -dev packages of what libdatavo links) and builds tests/install/consumer/ there against /usr, with
# find_package(Datavo) and with pkg-config, and runs both.
#
# Not a test: it downloads from a Debian mirror, and the tests stay on loopback. tests/install/test_deb.sh is the
# offline counterpart that CI runs (the packages installed on the machine itself, their Depends checked against
# the libraries the CLI needs).
#
# Usage: scripts/deb-fresh-machine.sh [--dev] [BUILD_DIR]      (BUILD_DIR: a built tree, default build/)
# Needs root (debootstrap, chroot), debootstrap and dpkg-dev (scripts/install-deps.sh). The first run debootstraps
# the pristine root (about 200 MB; minutes, depending on the mirror).
# Env: DATAVO_DEBOOTSTRAP_CACHE  the pristine root (default ~/.cache/datavo/debootstrap-bookworm)
#      DATAVO_DEBIAN_MIRROR      (default http://deb.debian.org/debian)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dev=0
if [ "${1:-}" = --dev ]; then
  dev=1
  shift
fi
build=$(cd "${1:-$root/build}" && pwd)
cache=${DATAVO_DEBOOTSTRAP_CACHE:-$HOME/.cache/datavo/debootstrap-bookworm}
mirror=${DATAVO_DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ "$(id -u)" -eq 0 ] || { echo "deb-fresh-machine: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "deb-fresh-machine: apt-get install debootstrap" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/datavo-deb-fresh.XXXXXX")
rootfs=$work/rootfs
cleanup() {
  umount "$rootfs/proc" 2>/dev/null || true
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

echo "== cpack -G DEB ($build)"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/debs" >"$work/cpack.log" || { cat "$work/cpack.log"; exit 1; }
ls -l "$work"/debs/*.deb

if [ ! -x "$cache/bin/sh" ]; then
  echo "== debootstrap --variant=minbase bookworm $cache ($mirror)"
  rm -rf "$cache.partial"
  mkdir -p "$(dirname "$cache")"
  debootstrap --variant=minbase bookworm "$cache.partial" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; exit 1; }
  mv "$cache.partial" "$cache"
fi
cp -a "$cache" "$rootfs"
mount -t proc proc "$rootfs/proc"
cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
mkdir -p "$rootfs/debs" "$rootfs/consumer"
cp "$work"/debs/*.deb "$rootfs/debs/"
cp "$root"/tests/install/consumer/* "$rootfs/consumer/"

# in_root CMD...: runs CMD in the fresh root, under an environment as minimal as CI's.
in_root() {
  chroot "$rootfs" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

echo "== the fresh root: $(in_root cat /etc/debian_version), $(in_root dpkg-query -W | wc -l) packages, no datavo:"
in_root sh -c 'command -v datavo || echo "  datavo: not found"'
in_root apt-get update -qq
echo "== apt-get install ./datavo_*.deb"
in_root sh -c 'apt-get install -y -q --no-install-recommends /debs/datavo_*.deb' | grep -E '^(The following NEW|  |Setting up)' || true
echo "== datavo --version"
in_root datavo --version
in_root sh -c 'command -v datavo'

if [ "$dev" = 1 ]; then
  echo "== apt-get install ./libdatavo-dev_*.deb g++ cmake make pkg-config"
  in_root sh -c 'apt-get install -y -q --no-install-recommends /debs/libdatavo-dev_*.deb g++ cmake make pkg-config' \
    | grep -E '^(Setting up (libdatavo|g\+\+ |cmake ))' || true
  echo "== consumer with find_package(Datavo)"
  in_root sh -c 'cmake -S /consumer -B /consumer-build >/dev/null && cmake --build /consumer-build >/dev/null &&
                 /consumer-build/datavo_consumer'
  echo "== consumer with pkg-config"
  # shellcheck disable=SC2016  # expanded by the shell in the fresh root
  in_root sh -c 'g++ -std=c++20 -o /consumer-pc /consumer/main.cpp $(pkg-config --cflags datavo) \
                 $(pkg-config --static --libs datavo) && /consumer-pc'
fi
echo "== the .deb installed and ran on a fresh Debian $(in_root cat /etc/debian_version)"
