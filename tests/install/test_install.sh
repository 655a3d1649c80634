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
#   6. systemd-analyze verify accepts the installed unit as it is, and
#      kvringd takes the installed config file the unit names;
#   7. systemd-analyze security rates it 4.0 or lower ("OK");
#   8. its sysusers.d and tmpfiles.d files create group and user kvring
#      and /run/kvring (0750) in a scratch root;
#   9. kvring.pc gives the right paths for the multiarch libdir of /usr;
#  10. the README names the Python path configure picks for a prefix
#      python3 does not search.
# Usage: test_install.sh BUILD_DIR SOURCE_DIR PYTHON PYTHON_DIR LIBDIR [bench|nobench]
#   (nobench: the tree was configured without KVR_BUILD_BENCH)
set -euo pipefail

build=$1 src=$2 py=$3 pydir=$4 libdir=$5 bench=${6:-bench}
kvr_test=install_tree kvr_tag=install
# shellcheck source=tests/install/common.sh
. "$(dirname "$0")/common.sh"

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
	lib/sysusers.d/kvring.conf lib/tmpfiles.d/kvring.conf \
	share/doc/kvring/LICENSE; do
	[ -e "$p/$f" ] || fail "missing $p/$f"
done

# The environment a user of a non-system prefix sets (README, Install):
# PKG_CONFIG_PATH to build, LD_LIBRARY_PATH (or an rpath) to run C, and
# PYTHONPATH for Python. Nothing else from this shell leaks in
# (clean_env, common.sh).
pc=$p/$libdir/pkgconfig

step "2. the guide's C example via pkg-config"
"${clean_env[@]}" PKG_CONFIG_PATH="$pc" sh -c \
	'cc -Wall -Wextra -Werror -o "$1" "$2" $(pkg-config --cflags --libs kvring)' \
	sh "$scratch/minimal" "$src/docs/examples/minimal.c" ||
	fail "compile docs/examples/minimal.c against the installed tree"
sock=$scratch/k.sock
start_kvringd "installed kvringd" "$p/bin/kvringd" "$sock" \
	--name "kvring-inst-$$" --pool-size 64M --no-prefault --allow-root
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

# systemd's own checker on the installed unit, as it is: its ExecStart
# names this prefix's kvringd (written at install time) and its
# Documentation= man:kvringd(8) resolves through the installed pages
# (a /usr or /usr/local install needs no MANPATH; this scratch prefix
# does). Debian machines have systemd-analyze; a missing one fails.
command -v systemd-analyze >/dev/null ||
	fail "systemd-analyze is missing (apt-get install systemd)"
unit=$p/lib/systemd/system/kvringd.service
step "6. systemd-analyze verify kvringd.service as installed"
grep -q "^ExecStart=$p/bin/kvringd --config $p/etc/kvring/kvringd.conf " "$unit" ||
	fail "the installed unit's ExecStart is not $p/bin/kvringd --config $p/etc/kvring/kvringd.conf: $(grep ^ExecStart= "$unit")"
# The unit's config file is installed, and kvringd takes it as it is.
"${clean_env[@]}" "$p/bin/kvringd" --config "$p/etc/kvring/kvringd.conf" \
	--print-config >"$scratch/print-config.out" 2>&1 ||
	fail "kvringd --config (installed file) --print-config: $(tail -3 "$scratch/print-config.out")"
out=$(MANPATH="$p/share/man" systemd-analyze verify "$unit" 2>&1) ||
	fail "systemd-analyze verify: $out"
[ -z "$out" ] || fail "systemd-analyze verify: $out"

step "7. systemd-analyze security rates the unit 4.0 or lower"
out=$(systemd-analyze security --offline=true --no-pager "$unit" 2>&1) ||
	fail "systemd-analyze security: $out"
level=$(sed -n 's/.*Overall exposure level for kvringd.service: \([0-9.]*\).*/\1/p' <<<"$out")
[ -n "$level" ] || fail "no exposure level in: $(tail -3 <<<"$out")"
awk -v l="$level" 'BEGIN { exit !(l <= 4.0) }' ||
	fail "exposure $level > 4.0: $(grep -F '✗' <<<"$out" | head -20)"
echo "install_tree: exposure $level"

step "8. sysusers.d and tmpfiles.d make group kvring and /run/kvring"
root=$scratch/root
mkdir -p "$root/etc" "$root/run"
systemd-sysusers --root="$root" "$p/lib/sysusers.d/kvring.conf" \
	>"$scratch/sysusers.log" 2>&1 || fail "systemd-sysusers: $(cat "$scratch/sysusers.log")"
grep -q '^kvring:' "$root/etc/group" || fail "no group kvring in $(cat "$root/etc/group")"
grep -q '^kvring:[^:]*:[0-9]*:[0-9]*:.*:/usr/sbin/nologin$' "$root/etc/passwd" ||
	fail "no system user kvring: $(cat "$root/etc/passwd")"
systemd-tmpfiles --root="$root" --create "$p/lib/tmpfiles.d/kvring.conf" \
	>"$scratch/tmpfiles.log" 2>&1 || fail "systemd-tmpfiles: $(cat "$scratch/tmpfiles.log")"
kgid=$(awk -F: '$1 == "kvring" { print $3 }' "$root/etc/group")
got=$(stat -c '%a %g' "$root/run/kvring") || fail "tmpfiles.d made no /run/kvring"
[ "$got" = "750 $kgid" ] || fail "/run/kvring is mode/gid $got, not 750 $kgid"

step "9. kvring.pc for Debian's multiarch libdir under /usr"
ma=$scratch/ma/usr/lib/x86_64-linux-gnu
cmake -DLIBDIR=lib/x86_64-linux-gnu -DINCLUDEDIR=include -DVERSION=0 \
	-DOUT="$ma/pkgconfig/kvring.pc" -P "$src/cmake/kvr_pc.cmake" ||
	fail "cmake/kvr_pc.cmake"
got=$(PKG_CONFIG_PATH="$ma/pkgconfig" pkg-config --variable=libdir kvring)
[ "$(realpath -m "$got")" = "$ma" ] || fail "multiarch libdir is $got, not $ma"
got=$(PKG_CONFIG_PATH="$ma/pkgconfig" pkg-config --variable=includedir kvring)
[ "$(realpath -m "$got")" = "$scratch/ma/usr/include" ] ||
	fail "multiarch includedir is $got, not $scratch/ma/usr/include"

step "10. the README's PYTHONPATH for another prefix is configure's"
rel=$("$py" "$src/cmake/kvr_python_dir.py" "$scratch/elsewhere")
grep -qF "PYTHONPATH=<prefix>/$rel" "$src/README.md" ||
	fail "README.md does not say PYTHONPATH=<prefix>/$rel, where configure puts the package for a prefix python3 does not search"

echo "install_tree: ok ($p)"
