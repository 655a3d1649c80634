#!/bin/sh
# file_deps.sh - who calls whom between the .c files of one static library.
#
# usage: scripts/file_deps.sh LIB.a [README]
#   Prints one line per file that calls another, "file -> callee ...",
#   from the library's own symbols (nm: what each object defines and what
#   it leaves undefined), sorted. Exits 1 when the calls form a cycle, or
#   when a global kvr__ function does not say its file (kvr__<file> or
#   kvr__<file>_<verb>, as STYLE.md asks). With README, also exits 1 when
#   the listing between its "<!-- file_deps -->" lines differs from the
#   one printed, so the folder README can't go stale.
# Calls through function pointers (an operations table) are not seen:
# the README says where they go.
set -eu

if [ $# -lt 1 ] || [ ! -f "$1" ]; then
	echo "usage: $0 LIB.a [README]" >&2
	exit 2
fi
lib=$1
readme=${2:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# "object symbol" for every definition and every undefined reference.
nm -A --defined-only "$lib" 2>/dev/null |
	awk '$(NF-1) ~ /^[TDRBC]$/ { split($1, a, ":"); o = a[2]; sub(/\.c\.o$|\.o$/, "", o); print o, $NF }' |
	sort -u >"$tmp/defs"
nm -A -u "$lib" 2>/dev/null |
	awk '{ split($1, a, ":"); o = a[2]; sub(/\.c\.o$|\.o$/, "", o); print o, $NF }' |
	sort -u >"$tmp/undef"

# Edges: caller callee, for undefined symbols another object defines.
awk 'NR == FNR { def[$2] = $1; next }
     ($2 in def) && def[$2] != $1 { print $1, def[$2] }' \
	"$tmp/defs" "$tmp/undef" | sort -u >"$tmp/edges"

awk '{ d[$1] = d[$1] " " $2 } END { for (f in d) print f " ->" d[f] }' \
	"$tmp/edges" | sort >"$tmp/list"
cat "$tmp/list"

rc=0
# tsort reports a cycle on stderr (and still prints an order).
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/tsort" || [ -s "$tmp/tsort" ]; then
	echo "$0: the calls between files form a cycle:" >&2
	head -n 12 "$tmp/tsort" >&2
	rc=1
fi
# Global kvr__ functions must name their file.
awk '$2 ~ /^kvr__/ {
	f = $1; s = $2
	if (s != "kvr__" f && index(s, "kvr__" f "_") != 1)
		print f ".c defines " s ", which does not say its file (kvr__" f "_...)"
}' "$tmp/defs" >"$tmp/names"
if [ -s "$tmp/names" ]; then
	sed "s|^|$0: |" "$tmp/names" >&2
	rc=1
fi
if [ -n "$readme" ]; then
	sed -n '/^<!-- file_deps -->$/,/^<!-- file_deps -->$/p' "$readme" |
		grep -v '^<!-- file_deps -->$' | grep -v '^```' >"$tmp/readme" || true
	if ! diff -u "$tmp/readme" "$tmp/list" >"$tmp/diff"; then
		echo "$0: $readme's listing is stale; the calls are now:" >&2
		cat "$tmp/diff" >&2
		rc=1
	fi
fi
exit $rc
