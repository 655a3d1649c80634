#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""bench_ab_summary.py: the table of tools/bench_ab.sh, per placement.

Reads the JSON lines bench_ab.sh kept (each kvring-bench line tagged with
"ab" = old or new, "ab_round" and "ab_load") and prints, per figure and per
placement, the median of each build's values and new/old. A busy-poll
figure (the ring round trip, the hot RTT, the pipelined lookups) is taken
from its per-round lines, each named near or far by the placement probe
taken just before it (keys "placement" and "placement_floor_ns"); a line
whose probe failed or whose rounds mixed placements counts as
"unplaced". A placement that one build, or the whole run, never saw is
said in so many words: its ratio would compare nothing. The store figure
is not a busy-poll one and has a single "any" row.

usage: scripts/bench_ab_summary.py RAW_JSON_LINES
Exit status: 0 with a table; 2 when the file is missing or holds no line
that bench_ab.sh tagged (then nothing was measured).
"""
import json
import statistics as st
import sys

PLACES = ("near", "far")

# (figure, format): the order of the table.
ORDER = [
    ("ring RTT 64 B p50 ns", "{:.0f}"),
    ("ring RTT 64 B / cache-line floor", "{:.2f}"),
    ("hot RTT p50 ns", "{:.0f}"),
    ("hot RTT p99 ns", "{:.0f}"),
    ("hot RTT / cache-line floor", "{:.2f}"),
    ("pipelined 1-key lookups M/s", "{:.3g}"),
    ("pipelined pings M/s", "{:.3g}"),
    ("store 2M x 1 GB/s", "{:.3g}"),
    ("store 2M x 1 p50 us", "{:.0f}"),
]


def place_of(r):
    """near, far or unplaced, from the probe taken before the line."""
    p = r.get("placement")
    return p if p in PLACES else "unplaced"


def pick(r):
    """The figures of one JSON line: {figure: value}, and its placement
    (None for a figure that is not a busy-poll one)."""
    s, sub, rnd = r.get("scenario"), r.get("subject"), r.get("round")
    if s == "ring" and sub == "kvring" and r.get("mode") == "rtt" \
            and r.get("bytes") == 64 and rnd:
        f = {"ring RTT 64 B p50 ns": r["p50_ns"]}
        if "ratio_to_floor" in r:
            f["ring RTT 64 B / cache-line floor"] = r["ratio_to_floor"]
        return f, place_of(r)
    if s == "rtt_hot" and sub == "kvring" and rnd:
        f = {"hot RTT p50 ns": r["p50_ns"], "hot RTT p99 ns": r["p99_ns"]}
        if "ratio_to_floor" in r:
            f["hot RTT / cache-line floor"] = r["ratio_to_floor"]
        return f, place_of(r)
    # scale prints only its medians over rounds (round 0), named by the
    # pooled placement of those rounds ("mixed" counts as unplaced).
    if s == "scale" and r.get("workers") == 1:
        mode = r.get("mode")
        if mode == "pipelined_lookup":
            return {"pipelined 1-key lookups M/s": r["ops_per_s"] / 1e6}, \
                place_of(r)
        if mode == "pipelined_ping":
            return {"pipelined pings M/s": r["ops_per_s"] / 1e6}, place_of(r)
    if s == "store" and sub == "kvring" and not r.get("first_touch") \
            and r.get("bytes") == 2 << 20:
        return {"store 2M x 1 GB/s": r["gbps"],
                "store 2M x 1 p50 us": r["p50_ns"] / 1e3}, None
    return {}, None


def load(path):
    try:
        with open(path) as f:
            rows = [json.loads(l) for l in f if l.startswith("{")]
    except OSError as e:
        print(f"bench_ab_summary: cannot read {path}: {e.strerror}; give "
              "the raw file bench_ab.sh printed", file=sys.stderr)
        sys.exit(2)
    rows = [r for r in rows if r.get("ab") in ("old", "new")]
    if not rows:
        print(f"bench_ab_summary: {path} holds no line tagged by "
              "bench_ab.sh (\"ab\": old/new): did every kvring-bench run "
              "fail? Run one by hand to see its error", file=sys.stderr)
        sys.exit(2)
    return rows


def collect(rows):
    """val[figure][place][build] = [(ab_round, value)], and what each
    build saw: seen[build][place] = busy-poll lines in that placement."""
    val, seen = {}, {"old": {}, "new": {}}
    for r in rows:
        figs, place = pick(r)
        if place is not None and figs:
            seen[r["ab"]][place] = seen[r["ab"]].get(place, 0) + 1
        for k, v in figs.items():
            cell = val.setdefault(k, {}).setdefault(place or "any", {})
            cell.setdefault(r["ab"], []).append((r["ab_round"], v))
    return val, seen


def paired(cell):
    """Per ab round that saw this placement on both sides: new/old of the
    round's medians (the two runs of a round saw about the same load)."""
    by = {}
    for b in ("old", "new"):
        for rnd, v in cell.get(b, []):
            by.setdefault(rnd, {}).setdefault(b, []).append(v)
    return [st.median(d["new"]) / st.median(d["old"])
            for _, d in sorted(by.items())
            if "old" in d and "new" in d and st.median(d["old"])]


def row(name, fmt, place, cell):
    old = [v for _, v in cell.get("old", [])]
    new = [v for _, v in cell.get("new", [])]
    if not old or not new:
        who = "old" if not old else "new"
        return (f"| {name} | {place} | {fmt.format(st.median(new or old))} "
                f"| - | never seen {place} by the {who} build | - |"
                if old or new else None)
    mo, mn = st.median(old), st.median(new)
    pr = paired(cell)
    return (f"| {name} | {place} | {fmt.format(mo)} ({len(old)}) "
            f"| {fmt.format(mn)} ({len(new)}) "
            f"| {mn / mo:.3f} | {', '.join(f'{x:.2f}' for x in pr) or '-'} |"
            if mo else None)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench_ab_summary.py RAW_JSON_LINES")
    rows = load(sys.argv[1])
    val, seen = collect(rows)
    loads = sorted({(r["ab_round"], r["ab_load"]) for r in rows})
    lv = sorted(x for _, x in loads)
    print(f"rounds {len({r['ab_round'] for r in rows})}, 1-min load "
          f"{lv[0]:.2f}..{lv[-1]:.2f} (median {st.median(lv):.2f})")
    for b in ("old", "new"):
        s = seen[b]
        print(f"{b}: busy-poll lines near {s.get('near', 0)}, far "
              f"{s.get('far', 0)}, unplaced {s.get('unplaced', 0)}")
    for p in PLACES:
        if not seen["old"].get(p) and not seen["new"].get(p):
            print(f"placement {p}: never seen in this run, no {p} figure")
    print("| figure | placement | old median (n) | new median (n) "
          "| new/old of medians | per-round new/old |")
    print("| --- | --- | ---: | ---: | ---: | --- |")
    for name, fmt in ORDER:
        for place in PLACES + ("unplaced", "any"):
            cell = val.get(name, {}).get(place)
            line = row(name, fmt, place, cell) if cell else None
            if line:
                print(line)


if __name__ == "__main__":
    main()
