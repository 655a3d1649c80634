#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""funclen.py - the longest C functions under some folders.

usage: scripts/funclen.py DIR... [--max N] [--top K]

Lists every function longer than N lines (default 120), longest first,
as "LINES FILE:LINE NAME", and exits 1 when there is one; --top K lists
the K longest whatever their length (and still exits 1 over N).

A function is what clang-format writes for kvring's style (STYLE.md): a
signature starting in column 0, its body opened by a "{" alone on a line
and closed by a "}" alone on a line. Its length counts from the
signature's first line to the closing brace, both included, so a
function of N lines reads N here and in `ctags -x` (its end field).
"""
import os
import re
import sys

# The function's name: the last identifier before the signature's "(".
NAME_RE = re.compile(r"([A-Za-z_]\w*)\s*\(")


def functions(path):
    """(first line, length, name) of each function of the C file @path."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i] != "{":
            i += 1
            continue
        # The signature: back to the nearest line that starts in column 0
        # (continuation lines are indented).
        start = i - 1
        while start > 0 and (not lines[start] or lines[start][0] in " \t"):
            start -= 1
        sig = " ".join(lines[start:i])
        m = NAME_RE.search(sig)
        end = i + 1
        while end < len(lines) and lines[end] != "}":
            end += 1
        if m and "=" not in sig.split("(")[0]:
            out.append((start + 1, end - start + 1, m.group(1)))
        i = end + 1
    return out


def main(argv):
    dirs, limit, top = [], 120, 0
    args = iter(argv[1:])
    for a in args:
        if a in ("--max", "--top"):
            v = next(args, None)
            if v is None or not v.isdigit():
                print(f"funclen.py: {a} needs a number of lines, "
                      f"got {v!r}", file=sys.stderr)
                return 2
            if a == "--max":
                limit = int(v)
            else:
                top = int(v)
        elif a.startswith("-"):
            print(f"funclen.py: unknown option {a!r} (try --max N, "
                  f"--top K)\n{__doc__}", file=sys.stderr)
            return 2
        else:
            dirs.append(a)
    if not dirs:
        print(__doc__, file=sys.stderr)
        return 2
    found = []
    for d in dirs:
        if not os.path.isdir(d):
            print(f"funclen.py: {d} is not a folder: name a folder of C "
                  f"files", file=sys.stderr)
            return 2
        for root, _, files in os.walk(d):
            for name in sorted(files):
                if name.endswith(".c"):
                    p = os.path.join(root, name)
                    found += [(n, f"{p}:{s}", fn)
                              for s, n, fn in functions(p)]
    found.sort(key=lambda x: (-x[0], x[1]))
    over = [x for x in found if x[0] > limit]
    for n, where, fn in (found[:top] if top else over):
        print(f"{n} {where} {fn}")
    print(f"{len(found)} functions, {len(over)} over {limit} lines")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
