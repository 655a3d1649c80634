#!/bin/sh
# bench_ab.sh: A/B of two kvring build directories in one session.
#
# Runs each build's own kvring-bench (with its own kvringd) alternately,
# round by round (A B A B ...), on the hot-path cells a change must not
# slow down: the bare ring round trip (64 B), rtt_hot kvring p50/p99,
# pipelined 1-key lookups ops/s (scale --only pipelined) and store 2M x 1
# GB/s. Each round records the 1-minute load average. The summary
# (scripts/bench_ab_summary.py) gives each busy-poll figure per placement,
# near or far by the cache-line probe kvring-bench took just before it:
# the median of each build's values, new/old of those medians, and new/old
# per round where both runs of the round saw that placement. It says when
# a build, or the whole run, never saw a placement.
#
# usage: tools/bench_ab.sh OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [OUT_FILE]
#   ROUNDS   alternations (default 5); OUT_FILE keeps the raw JSON lines
#   env: BENCH_AB_ARGS extra options for every kvring-bench run
#        (default: none, so --cpu-client 0 --cpu-server 1)
set -eu

if [ $# -lt 2 ]; then
	echo "usage: $0 OLD_BUILD_DIR NEW_BUILD_DIR [ROUNDS] [OUT_FILE]" >&2
	echo "  each dir must hold tools/kvring-bench and server/kvringd;" >&2
	echo "  build with -DKVR_BUILD_BENCH=ON -DKVR_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo" >&2
	exit 2
fi
old=$1
new=$2
rounds=${3:-5}
out=${4:-$(mktemp /tmp/bench_ab.XXXXXX)}
extra=${BENCH_AB_ARGS:-}

for d in "$old" "$new"; do
	for f in tools/kvring-bench server/kvringd; do
		if [ ! -x "$d/$f" ]; then
			echo "$0: $d/$f is missing or not executable: build that tree first (cmake -DKVR_BUILD_BENCH=ON)" >&2
			exit 2
		fi
	done
done
case $rounds in
'' | *[!0-9]*)
	echo "$0: ROUNDS must be a positive integer, got '$rounds'" >&2
	exit 2
	;;
esac

: >"$out"
tmp=$(mktemp /tmp/bench_ab_run.XXXXXX)
err=$(mktemp /tmp/bench_ab_err.XXXXXX)
trap 'rm -f "$tmp" "$err"' EXIT
# A cell that fails is said with the end of its stderr (a missing line
# in the table would otherwise be the only trace); the rounds go on.
run_one() { # tag build round
	bench="$2/tools/kvring-bench"
	k="--kvringd $2/server/kvringd"
	load=$(cut -d' ' -f1 /proc/loadavg)
	for cell in "ring --rounds 2 --iters 10000 --sizes 64 --tput-records 1000" \
		"rtt_hot --rounds 2 --iters 10000 $k" "scale --only pipelined $k" \
		"store --sizes 2M --chunks 1 $k"; do
		rc=0
		# shellcheck disable=SC2086
		"$bench" $cell --json $extra >"$tmp" 2>"$err" || rc=$?
		sed "s/^{/{\"ab\":\"$1\",\"ab_round\":$3,\"ab_load\":$load,/" "$tmp" >>"$out"
		if [ "$rc" -ne 0 ]; then
			echo "$0: round $3, $1 build: kvring-bench ${cell%% *} exited $rc (its figures may be missing or partial); its stderr ends:" >&2
			tail -n 3 "$err" >&2
		fi
	done
}

i=1
while [ "$i" -le "$rounds" ]; do
	echo "round $i/$rounds: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	run_one old "$old" "$i"
	run_one new "$new" "$i"
	i=$((i + 1))
done
echo "raw JSON lines: $out" >&2

/usr/bin/python3 "$(dirname "$0")/../scripts/bench_ab_summary.py" "$out"
