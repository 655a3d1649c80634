#!/bin/bash
# SPDX-License-Identifier: MIT
#
# device-check.sh - kvring's device path on a machine with an NVIDIA GPU
# (docs/tensors.md, "Device caches" and "The device check").
#
# Two steps, because the GPU machine need not have kvring's Debian
# packages nor a network:
#
#   scripts/device-check.sh fetch   on a Debian 12 machine with apt: download
#                                   liburing and xxhash (.deb, no install)
#                                   into build-device/debs/
#   scripts/device-check.sh         on the GPU machine (this checkout, with
#                                   build-device/debs/ copied along):
#                                   unpack them (dpkg -x, no root), build
#                                   libkvring and kvringd, start kvringd on
#                                   a private socket, run
#                                   scripts/device-check.py, stop kvringd
#
# The GPU machine needs a C compiler, cmake (3.16 or later), pkg-config,
# dpkg-deb, and a python3 with a CUDA build of torch ($PYTHON picks
# another interpreter). vLLM is not needed: the check drives the connector
# through the stand-in in tests/python/vllm/, as the tests do. It prints
# one JSON line per figure and exits 0 when every check passed, 1 when a
# check found wrong bytes (or a step failed), 2 on a usage error or a
# machine without a CUDA device. It finishes in well under 8 minutes (the
# Python part is bounded by timeout 420).

set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
OUT=${KVRING_DEVICE_OUT:-$REPO/build-device}
PKGS=(liburing2 liburing-dev libxxhash0 libxxhash-dev)
PYTHON=${PYTHON:-python3}

usage() {
	echo "usage: scripts/device-check.sh [fetch]" >&2
	exit 2
}

case "${1:-run}" in
fetch)
	mkdir -p "$OUT/debs"
	cd "$OUT/debs"
	# apt-get download needs no root and installs nothing.
	apt-get download "${PKGS[@]}"
	ls -l "$OUT/debs"
	echo "device-check: copy $OUT/debs to the GPU machine's checkout" \
	    "and run scripts/device-check.sh there" >&2
	exit 0
	;;
run) ;;
-h | --help)
	sed -n '3,29p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
	;;
*) usage ;;
esac

# 1. The libraries: the machine's own when pkg-config finds them, else the
# downloaded packages unpacked under build-device/root
# (KVRING_DEVICE_DEBS=1 uses the packages even where the machine has the
# libraries, to check this step itself).
if [ "${KVRING_DEVICE_DEBS:-0}" = 1 ] ||
	! pkg-config --exists liburing libxxhash 2>/dev/null; then
	root=$OUT/root
	shopt -s nullglob
	debs=("$OUT"/debs/*.deb)
	if [ ${#debs[@]} -eq 0 ]; then
		echo "device-check: liburing and libxxhash are not installed and" \
		    "$OUT/debs/ holds no packages: run" \
		    "'scripts/device-check.sh fetch' on a Debian machine and" \
		    "copy build-device/debs/ here" >&2
		exit 2
	fi
	mkdir -p "$root"
	for d in "${debs[@]}"; do
		dpkg-deb -x "$d" "$root"
	done
	triplet=$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)
	export PKG_CONFIG_PATH="$root/usr/lib/$triplet/pkgconfig:$root/usr/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
	export PKG_CONFIG_SYSROOT_DIR="$root"
	export LD_LIBRARY_PATH="$root/usr/lib/$triplet${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# 2. Build the library and the server only (no test suites, no optional
# peers: nothing else is needed).
cmake -S "$REPO" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release \
    -DKVR_BUILD_TESTS=OFF -DKVR_NO_OPTIONAL=ON >"$OUT/cmake.log" 2>&1 ||
	{ cat "$OUT/cmake.log" >&2; exit 1; }
cmake --build "$OUT/build" -j"$(nproc)" --target kvring kvringd \
    >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log" >&2; exit 1; }

# 3. A private kvringd: 2 GiB pool, page-aligned slots (one DMA
# registration covers them), its own socket and segment names.
run=$(mktemp -d)
sock=$run/kvringd.sock
name=kvring-devcheck-$$
"$OUT/build/server/kvringd" --socket "$sock" --name "$name" \
    --pool-size 2G --align 4096 --allow-root --log-level warn &
srv=$!
cleanup() {
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	rm -rf "$run"
}
trap cleanup EXIT
for _ in $(seq 200); do
	[ -S "$sock" ] && break
	kill -0 "$srv" 2>/dev/null || { echo "device-check: kvringd" \
	    "exited at start-up" >&2; exit 1; }
	sleep 0.05
done
[ -S "$sock" ] || { echo "device-check: kvringd did not start" >&2; exit 1; }

# 4. The checks.
KVRING_LIB="$OUT/build/worker/libkvring.so" KVRING_SOCKET="$sock" \
    timeout 420 "$PYTHON" "$REPO/scripts/device-check.py"
