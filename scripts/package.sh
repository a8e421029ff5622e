#!/usr/bin/env bash
# Builds the Debian packages outboxd, outboxd-sdk-dev and outboxd-sample-plugins with
# CPack from an optimised build directory (tests, benchmark and fuzzers off):
#   scripts/package.sh [--build-dir DIR] [--release N]
# --release sets the Debian revision (<version>-N, default 1): a rebuild with a higher N
# upgrades an installed one. The .deb files are written to the build directory, and their
# paths printed one per line.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=$root/build-package
release=1
while (($#)); do
  case "$1" in
    --build-dir) build_dir=$2; shift 2 ;;
    --release) release=$2; shift 2 ;;
    *) echo "usage: scripts/package.sh [--build-dir DIR] [--release N]" >&2; exit 2 ;;
  esac
done

# shellcheck source=scripts/ccache.sh
source "$root/scripts/ccache.sh"
# Debian's way: -O2 with debug information, stripped into the packages (CPACK_STRIP_FILES).
# The flags are scripts/test.sh's, so with ccache this build reuses the test build's objects.
cmake -S "$root" -B "$build_dir" "${build_flags[@]}" -DOUTBOX_WERROR=ON \
  -DOUTBOX_BUILD_TESTS=OFF -DOUTBOX_BUILD_BENCH=OFF -DOUTBOX_BUILD_FUZZERS=OFF -DOUTBOX_BUILD_PLUGINS=ON \
  -DOUTBOX_SYSTEM_PACKAGE=ON -DCMAKE_INSTALL_PREFIX=/usr -DCMAKE_INSTALL_LIBDIR=lib \
  -DOUTBOX_PACKAGE_RELEASE="$release" "${launcher[@]}" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
rm -f "$build_dir"/*.deb
(cd "$build_dir" && cpack -G DEB >/dev/null)
ls "$build_dir"/*.deb
