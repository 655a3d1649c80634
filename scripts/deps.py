#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""deps.py - who includes and calls whom among the C files of one folder.

usage: scripts/deps.py DIR [--types HEADER]... [--prefix P]... [--short]
                        [--check] [--names] [--readme README]

A unit is a header and the .c files behind it: foo.c and foo.h are unit
"foo", and foo_bar.c joins unit "foo" when foo.h exists and foo_bar.h does
not (server/store/store_*.c share store_int.h). Unit X depends on unit Y when a file of X
includes Y's header ("y.h") or names a function or object that a .c file
of Y defines with external linkage (kvr_* or kvr__*, and P* for each
--prefix P: the tools' folders name their functions st_, ins_, bench_).
A --types header is
the folder's shared type header: including it adds no edge (every file
does, for the structs), but calls into its unit still count.

Prints one line per unit, "unit: deps (what it uses)", bottom-up (--short:
the unit names only), then "cycles: none" or each cycle. --check exits 1
when there is a cycle.

--names also fails when a .c file defines a kvr__ name (the folder's
internal, non-static functions) that does not say its file: foo.c may
define kvr__foo and kvr__foo_<verb>, as STYLE.md asks. --readme fails when
the listing between the two "<!-- deps -->" lines of README (inside a
``` block) is not the --short listing printed, so a folder README cannot
go stale. Calls through function pointers (an operations table) are not
seen: the README says where they go.
"""
import os
import re
import sys

INC_RE = re.compile(r'^#include "([\w./-]+)\.h"', re.M)


def name_res(prefixes):
    """The definition and use patterns of names with @prefixes (kvr_ and
    kvr__ always; a folder whose files call each other by another prefix,
    such as kvring-stress's st_, names it with --prefix)."""
    alt = "|".join(re.escape(p) for p in ["kvr_", "kvr__"] + prefixes)
    return (re.compile(r"^(?!static\b)[A-Za-z_][\w \t\*]*?\b((?:" + alt +
                       r")\w+)\s*(\(|=|\[)", re.M),
            re.compile(r"\b(?:" + alt + r")\w+\b"))


DEF_RE, NAME_RE = name_res([])
COMMENT_RE = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING_RE = re.compile(r'"(?:\\.|[^"\\\n])*"')


def strip(text):
    """Source without comments and string literals (names in them are
    not uses)."""
    text = COMMENT_RE.sub(" ", text)
    return STRING_RE.sub('""', text)


def unit_of(base, headers):
    """foo_bar -> foo when foo.h exists and foo_bar.h does not."""
    if base in headers:
        return base
    parts = base.split("_")
    for i in range(len(parts) - 1, 0, -1):
        if "_".join(parts[:i]) in headers:
            return "_".join(parts[:i])
    return base


def graph(folder, types):
    names = sorted(f for f in os.listdir(folder)
                   if f.endswith((".c", ".h")) and
                   os.path.isfile(os.path.join(folder, f)))
    headers = {f[:-2] for f in names if f.endswith(".h")}
    src = {}
    for f in names:
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            src[f] = fh.read()
    defined = {}  # name -> unit
    for f in names:
        if f.endswith(".c"):
            for m in DEF_RE.finditer(strip(src[f])):
                defined.setdefault(m.group(1), unit_of(f[:-2], headers))
    units = sorted({unit_of(f[:-2], headers) for f in names})
    deps = {u: {} for u in units}
    for f in names:
        u = unit_of(f[:-2], headers)
        code = strip(src[f])
        for m in INC_RE.finditer(src[f]):
            h = m.group(1)
            if h in headers and h + ".h" not in types:
                v = unit_of(h, headers)
                if v != u:
                    deps[u].setdefault(v, set()).add(h + ".h")
        if f.endswith(".c"):
            for n in set(NAME_RE.findall(code)):
                v = defined.get(n)
                if v and v != u:
                    deps[u].setdefault(v, set()).add(n)
    return units, deps, defined_in(folder, names, src)


def defined_in(folder, names, src):
    """name -> the .c file (without .c) that defines it."""
    out = {}
    for f in names:
        if f.endswith(".c"):
            for m in DEF_RE.finditer(strip(src[f])):
                out.setdefault(m.group(1), f[:-2])
    return out


def misnamed(files):
    """Sentences for kvr__ names that do not say their file."""
    bad = []
    for name, f in sorted(files.items()):
        if name.startswith("kvr__") and name != "kvr__" + f and \
                not name.startswith("kvr__" + f + "_"):
            bad.append(f"{f}.c defines {name}, which does not say its "
                       f"file: rename it kvr__{f}_... or make it static")
    return bad


def readme_listing(path):
    """The lines between the two <!-- deps --> markers, fences dropped;
    None when README has no such pair."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")
    marks = [i for i, ln in enumerate(lines) if ln.strip() == "<!-- deps -->"]
    if len(marks) != 2:
        return None
    return [ln for ln in lines[marks[0] + 1:marks[1]]
            if ln.strip() and not ln.startswith("```")]


def cycles(units, deps):
    """Strongly connected components of more than one unit (Tarjan)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(u):
        index[u] = low[u] = counter[0]
        counter[0] += 1
        stack.append(u)
        on.add(u)
        for v in sorted(deps[u]):
            if v not in index:
                visit(v)
                low[u] = min(low[u], low[v])
            elif v in on:
                low[u] = min(low[u], index[v])
        if low[u] == index[u]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == u:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for u in units:
        if u not in index:
            visit(u)
    return out


def order(units, deps):
    """Bottom-up: a unit after everything it uses (cycles broken by name)."""
    done, seq = set(), []

    def visit(u, path):
        if u in done or u in path:
            return
        path.add(u)
        for v in sorted(deps[u]):
            visit(v, path)
        path.discard(u)
        done.add(u)
        seq.append(u)

    for u in units:
        visit(u, set())
    return seq


USAGE = ("usage: deps.py DIR [--types HEADER]... [--prefix P]... [--short] [--check] "
         "[--names] [--readme README]")


def main(argv):
    global DEF_RE, NAME_RE
    args, types, check, short, names = [], set(), False, False, False
    prefixes = []
    readme = None
    it = iter(argv[1:])
    for a in it:
        if a == "--check":
            check = True
        elif a == "--short":
            short = True
        elif a == "--names":
            names = True
        elif a == "--types":
            types.add(next(it, ""))
        elif a == "--prefix":
            prefixes.append(next(it, ""))
        elif a == "--readme":
            readme = next(it, "")
            if not os.path.isfile(readme):
                print(f"deps.py: --readme {readme!r} is not a file; give "
                      "the folder's README.md", file=sys.stderr)
                return 2
        elif a.startswith("-"):
            print(f"deps.py: unknown option {a!r}; {USAGE}", file=sys.stderr)
            return 2
        else:
            args.append(a)
    if len(args) != 1 or not os.path.isdir(args[0]):
        print("deps.py: give one folder of C files, e.g. "
              "scripts/deps.py server --types kvringd.h --check",
              file=sys.stderr)
        return 2
    DEF_RE, NAME_RE = name_res([p for p in prefixes if p])
    units, deps, files = graph(args[0], types)
    listing = []
    for u in order(units, deps):
        uses = ", ".join(v if short else
                         f"{v} ({' '.join(sorted(deps[u][v]))})"
                         for v in sorted(deps[u]))
        print(f"{u}: {uses or '-'}")
        listing.append(f"{u}: {', '.join(sorted(deps[u])) or '-'}")
    rc = 0
    found = cycles(units, deps)
    if not found:
        print("cycles: none")
    for comp in found:
        print("cycle: " + " <-> ".join(comp))
        rc = 1 if check else 0
    if names:
        for sentence in misnamed(files):
            print(f"deps.py: {sentence}", file=sys.stderr)
            rc = 1
    if readme:
        have = readme_listing(readme)
        if have is None:
            print(f"deps.py: {readme} has no listing between two "
                  "'<!-- deps -->' lines; add one with the --short "
                  "listing", file=sys.stderr)
            rc = 1
        elif have != listing:
            print(f"deps.py: {readme}'s listing is stale; replace the "
                  "lines between its '<!-- deps -->' markers with:",
                  file=sys.stderr)
            print("\n".join(listing), file=sys.stderr)
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
