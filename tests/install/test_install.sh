#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ctest install_tree: install the build tree into a scratch prefix, as a
# user following the README's "Install" section would, and use it from
# there, with nothing from the build tree:
#   1. the files land where the README says;
#   2. the worker guide's C example compiles with pkg-config and stores,
#      looks up and retrieves through an installed kvringd;
#   3. a C++17 file including every installed public header compiles with
#      g++ -Wall -Wextra -Werror and links;
#   4. python3 -c 'import kvring' works with PYTHONPATH as the only
#      variable set, and loads the installed libkvring, not the build's;
#   5. installed tools find the kvringd installed beside them;
#   6. systemd-analyze verify accepts the installed unit.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR PYTHON PYTHON_DIR LIBDIR [bench|nobench]
#   (nobench: the tree was configured without KVR_BUILD_BENCH)
set -euo pipefail

build=$1 src=$2 py=$3 pydir=$4 libdir=$5 bench=${6:-bench}
scratch=$(mktemp -d /tmp/kvring-install.XXXXXX)
srv_pid=
cleanup() {
	if [ -n "$srv_pid" ]; then
		kill -TERM "$srv_pid" 2>/dev/null || true
		wait "$srv_pid" 2>/dev/null || true
	fi
	rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "install_tree: FAIL: $*" >&2; exit 1; }
step() { echo "install_tree: $*"; }

p=$scratch/prefix
cmake --install "$build" --prefix "$p" >"$scratch/install.log" ||
	fail "cmake --install: $(tail -5 "$scratch/install.log")"

step "1. files where the README says"
bench_files=
if [ "$bench" = bench ]; then
	bench_files=bin/kvring-bench
fi
# shellcheck disable=SC2086
for f in bin/kvringd bin/kvring-inspect bin/kvring-stress $bench_files \
	bin/kvring-demo include/kvring/kvring.h include/kvring/version.h \
	include/kvring/proto.h include/kvring/keys.h "$libdir/libkvring.so.0" \
	"$libdir/pkgconfig/kvring.pc" "$pydir/kvring/__init__.py" \
	"$pydir/kvring/_install.py" share/man/man8/kvringd.8 \
	share/man/man3/libkvring.3 share/man/man1/kvring-inspect.1 \
	share/man/man1/kvring-stress.1 share/man/man1/kvring-bench.1 \
	share/man/man1/kvring-demo.1 lib/systemd/system/kvringd.service \
	lib/sysusers.d/kvring.conf share/doc/kvring/LICENSE; do
	[ -e "$p/$f" ] || fail "missing $p/$f"
done

# The environment a user of a non-system prefix sets (README, Install):
# PKG_CONFIG_PATH to build, LD_LIBRARY_PATH (or an rpath) to run C, and
# PYTHONPATH for Python. Nothing else from this shell leaks in.
clean_env=(env -i PATH=/usr/bin:/bin HOME="$scratch")
pc=$p/$libdir/pkgconfig

step "2. the guide's C example via pkg-config"
"${clean_env[@]}" PKG_CONFIG_PATH="$pc" sh -c \
	'cc -Wall -Wextra -Werror -o "$1" "$2" $(pkg-config --cflags --libs kvring)' \
	sh "$scratch/minimal" "$src/docs/examples/minimal.c" ||
	fail "compile docs/examples/minimal.c against the installed tree"
sock=$scratch/k.sock
"$p/bin/kvringd" --socket "$sock" --name "kvring-inst-$$" --pool-size 64M \
	--no-prefault --allow-root 2>"$scratch/kvringd.log" &
srv_pid=$!
for _ in $(seq 1 200); do
	[ -S "$sock" ] && break
	kill -0 "$srv_pid" 2>/dev/null || fail "kvringd: $(cat "$scratch/kvringd.log")"
	sleep 0.05
done
[ -S "$sock" ] || fail "installed kvringd did not create $sock"
"${clean_env[@]}" LD_LIBRARY_PATH="$p/$libdir" "$scratch/minimal" "$sock" \
	>"$scratch/minimal.out" 2>&1 ||
	fail "minimal: $(cat "$scratch/minimal.out")"
# Captured first: grep -q on a pipe under pipefail fails when ldd gets
# SIGPIPE after the match.
deps=$(LD_LIBRARY_PATH="$p/$libdir" ldd "$scratch/minimal")
case $deps in
*"libkvring.so.0 => $p/$libdir/"*) ;;
*) fail "minimal did not load the installed libkvring: $deps" ;;
esac

step "3. every public header in C++17 with -Werror"
{
	for h in "$p"/include/kvring/*.h; do
		echo "#include <kvring/$(basename "$h")>"
	done
	echo 'int main() { return kvr_version_number() == KVR_VERSION_NUMBER ? 0 : 1; }'
} >"$scratch/all.cpp"
"${clean_env[@]}" PKG_CONFIG_PATH="$pc" sh -c \
	'g++ -std=c++17 -Wall -Wextra -Werror -o "$1" "$2" $(pkg-config --cflags --libs kvring)' \
	sh "$scratch/all" "$scratch/all.cpp" ||
	fail "C++17 build of $(grep -c include "$scratch/all.cpp") installed headers"
"${clean_env[@]}" LD_LIBRARY_PATH="$p/$libdir" "$scratch/all" ||
	fail "the C++ program's header and library versions differ"

step "4. import kvring with PYTHONPATH only ($py)"
out=$("${clean_env[@]}" PYTHONPATH="$p/$pydir" "$py" -c '
import kvring, kvring._lib as l
print(kvring.__version__, l.load().kvring_path)') ||
	fail "import kvring from $p/$pydir"
case $out in
*" $p/"*) ;;
*) fail "kvring loaded a library outside the prefix: $out" ;;
esac

step "5. installed tools find kvringd beside them"
"${clean_env[@]}" "$p/bin/kvring-stress" --workers 1 --seconds 1 \
	--pool-size 16M --quiet >"$scratch/stress.out" 2>&1 ||
	fail "kvring-stress from the prefix: $(tail -5 "$scratch/stress.out")"

# systemd's own checker on the installed unit (systemd is on Debian
# machines; skipped, and said, where systemd-analyze is missing). The
# unit names the configured prefix's kvringd, so point it at this one;
# Documentation= is a man: URL the scratch tree's man path cannot serve.
if command -v systemd-analyze >/dev/null; then
	step "6. systemd-analyze verify kvringd.service"
	sed "s|^ExecStart=[^ ]*/kvringd|ExecStart=$p/bin/kvringd|; /^Documentation=/d" \
		"$p/lib/systemd/system/kvringd.service" >"$scratch/kvringd.service"
	out=$(systemd-analyze verify "$scratch/kvringd.service" 2>&1) ||
		fail "systemd-analyze verify: $out"
	[ -z "$out" ] || fail "systemd-analyze verify: $out"
else
	step "6. skipped: no systemd-analyze on this machine"
fi

echo "install_tree: ok ($p)"
