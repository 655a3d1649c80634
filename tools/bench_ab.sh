#!/bin/sh
# bench_ab.sh: A/B of two kvring build directories in one session.
#
# Runs each build's own kvring-bench (with its own kvringd) alternately,
# round by round (A B A B ...), on the hot-path cells a change must not
# slow: rtt_hot kvring p50/p99, pipelined 1-key lookups ops/s
# (scale --only pipelined) and store 2M x 1 GB/s. Each round records the
# 1-minute load average. The summary gives, per figure, the median of each
# build's rounds and the median of the per-round ratios new/old (the pair
# of runs of one round saw about the same load).
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
run_one() { # tag build round
	bench="$2/tools/kvring-bench"
	k="--kvringd $2/server/kvringd"
	load=$(cut -d' ' -f1 /proc/loadavg)
	# shellcheck disable=SC2086
	{
		"$bench" rtt_hot --rounds 2 --iters 10000 --json $k $extra
		"$bench" scale --only pipelined --json $k $extra
		"$bench" store --sizes 2M --chunks 1 --json $k $extra
	} 2>/dev/null | sed "s/^{/{\"ab\":\"$1\",\"ab_round\":$3,\"ab_load\":$load,/" >>"$out"
}

i=1
while [ "$i" -le "$rounds" ]; do
	echo "round $i/$rounds: load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
	run_one old "$old" "$i"
	run_one new "$new" "$i"
	i=$((i + 1))
done
echo "raw JSON lines: $out" >&2

python3 - "$out" <<'EOF'
import json, statistics as st, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def pick(r):
    s, sub = r.get("scenario"), r.get("subject")
    if s == "rtt_hot" and sub == "kvring" and r.get("round") == 0:
        return {"hot RTT p50 ns": r["p50_ns"], "hot RTT p99 ns": r["p99_ns"]}
    if s == "scale" and r.get("mode") == "pipelined_lookup" and r.get("workers") == 1:
        return {"pipelined 1-key lookups M/s": r["ops_per_s"] / 1e6}
    if s == "scale" and r.get("mode") == "pipelined_ping" and r.get("workers") == 1:
        return {"pipelined pings M/s": r["ops_per_s"] / 1e6}
    if s == "store" and sub == "kvring" and not r.get("first_touch") and r.get("bytes") == 2 << 20:
        return {"store 2M x 1 GB/s": r["gbps"], "store 2M x 1 p50 us": r["p50_ns"] / 1e3}
    return {}
val, load = {}, {}
for r in rows:
    for k, v in pick(r).items():
        val.setdefault(k, {}).setdefault(r["ab_round"], {})[r["ab"]] = v
    load.setdefault(r["ab_round"], set()).add(r["ab_load"])
order = ["hot RTT p50 ns", "hot RTT p99 ns", "pipelined 1-key lookups M/s",
         "pipelined pings M/s", "store 2M x 1 GB/s", "store 2M x 1 p50 us"]
loads = sorted(x for s in load.values() for x in s)
print(f"rounds {len(load)}, 1-min load {loads[0]:.2f}..{loads[-1]:.2f} (median {st.median(loads):.2f})")
print(f"| figure | old median | new median | new/old, median of rounds | per-round new/old |")
print(f"| --- | ---: | ---: | ---: | --- |")
for k in order:
    if k not in val:
        continue
    pairs = [(d["old"], d["new"]) for _, d in sorted(val[k].items()) if "old" in d and "new" in d]
    if not pairs:
        continue
    rat = [n / o for o, n in pairs if o]
    fmt = (lambda x: f"{x:.0f}") if "ns" in k or "us" in k else (lambda x: f"{x:.3g}")
    print(f"| {k} | {fmt(st.median(p[0] for p in pairs))} | {fmt(st.median(p[1] for p in pairs))} "
          f"| {st.median(rat):.3f} | {', '.join(f'{x:.2f}' for x in rat)} |")
EOF
