# SPDX-License-Identifier: MIT
# shellcheck shell=bash disable=SC2154,SC2034 # set by, and used by, the sourcing script
#
# common.sh - what test_install.sh and test_wheel.sh share; each sources
# it after setting $kvr_test (its ctest name, the prefix of its messages)
# and $kvr_tag (part of its scratch folder's name):
#   - $scratch, a folder removed on exit together with the kvringd the
#     test started ($srv_pid), however the test ends;
#   - fail MESSAGE (exit 1) and step MESSAGE, prefixed with $kvr_test;
#   - clean_env, an `env -i` prefix that lets nothing of this shell leak
#     into what it runs (PATH=/usr/bin:/bin, HOME=$scratch);
#   - start_kvringd, a kvringd in the background, waited for.

scratch=$(mktemp -d "/tmp/kvring-$kvr_tag.XXXXXX")
srv_pid=
cleanup() {
	if [ -n "$srv_pid" ]; then
		kill -TERM "$srv_pid" 2>/dev/null || true
		wait "$srv_pid" 2>/dev/null || true
	fi
	rm -rf "$scratch"
}
trap cleanup EXIT
fail() { echo "$kvr_test: FAIL: $*" >&2; exit 1; }
step() { echo "$kvr_test: $*"; }
clean_env=(env -i PATH=/usr/bin:/bin HOME="$scratch")

# start_kvringd WHAT BINARY SOCKET ARGS...: run BINARY --socket SOCKET
# ARGS in the background (pid in $srv_pid, stderr in
# $scratch/kvringd.log) and wait up to 10 s for the socket; fails with
# the log if it exits first, or naming WHAT if the socket never appears.
start_kvringd() {
	local what=$1 bin=$2 sock=$3
	shift 3
	"$bin" --socket "$sock" "$@" 2>"$scratch/kvringd.log" &
	srv_pid=$!
	for _ in $(seq 1 200); do
		[ -S "$sock" ] && break
		kill -0 "$srv_pid" 2>/dev/null || fail "kvringd: $(cat "$scratch/kvringd.log")"
		sleep 0.05
	done
	[ -S "$sock" ] || fail "$what did not create $sock"
}
