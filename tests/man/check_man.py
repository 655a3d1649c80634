#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""ctest man_complete: the manual pages document everything there is.

  * every option a program's --help defines (a line that starts with
    `-x, --flag` or `--flag`; for kvring-bench, the --help of each
    scenario its --help lists too) has an item (the tag line after `.TP`) in
    that program's page, and every other `--flag` its help mentions
    appears somewhere in the page;
  * every function libkvring.so exports (`nm -D --defined-only`, type T)
    has a prototype in the SYNOPSIS of a section-3 page in docs/man and is
    named again in a later section of that page (what it does);
  * every environment variable the product reads (a "KVRING..." string,
    XDG_RUNTIME_DIR, JOURNAL_STREAM in lib/, worker/, server/, tools/ and
    the Python package) is named in the ENVIRONMENT section of a page.

So a flag, a function or a variable added without its man-page line
fails this test. Usage:
  check_man.py --man-dir DIR [--prog PROGRAM=PAGE]... [--lib LIBKVRING]
               [--src SOURCE_ROOT]
"""

import argparse
import glob
import os
import re
import subprocess
import sys

LONG = re.compile(r"--[a-z0-9][a-z0-9-]*[a-z0-9]")
# An option definition in --help: a short indent, then -x, and/or --flag.
DEF = re.compile(r"^ {1,8}(?:(-[A-Za-z0-9]),\s+)?(--[a-z0-9][a-z0-9-]*[a-z0-9])")
DEF_SHORT_ONLY = re.compile(r"^ {1,8}(-[A-Za-z0-9])\s")
ENV_LITERAL = re.compile(r'"(KVRING[A-Z0-9_]*|XDG_RUNTIME_DIR|JOURNAL_STREAM)"')


def plain(roff):
    """roff source to the words a reader sees (fonts and escapes gone)."""
    s = re.sub(r"\\f(\[[^]]*\]|\(..|.)", "", roff)
    s = s.replace("\\-", "-").replace("\\&", "").replace("\\e", "\\")
    return s


def sections(roff):
    """{".SH name": plain text of that section} of one page."""
    out = {}
    name = None
    for line in roff.split("\n"):
        m = re.match(r'^\.SH\s+"?([^"]*)"?', line)
        if m:
            name = m.group(1).strip()
            out.setdefault(name, "")
            continue
        if name:
            out[name] += plain(line) + "\n"
    return out


def tags(roff):
    """The item tags of a page: the line after each .TP, as plain text."""
    lines = roff.split("\n")
    return [plain(lines[i + 1]) for i, ln in enumerate(lines[:-1])
            if ln.startswith(".TP")]


def run_help(argv, errors):
    r = subprocess.run(argv + ["--help"], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=30)
    text = r.stdout.decode(errors="replace")
    if r.returncode != 0 or not text.strip():
        errors.append("%s --help exited %d: %s" % (" ".join(argv),
                                                   r.returncode, text[:200]))
        return ""
    return text


def subcommands(help_text):
    """The names listed under "scenarios:" in a --help (kvring-bench)."""
    names = []
    block = help_text.split("\nscenarios:\n", 1)
    if len(block) == 2:
        for line in block[1].split("\n"):
            m = re.match(r"^  ([a-z0-9_]+)\s{2,}", line)
            if not m:
                break
            if m.group(1) != "all":
                names.append(m.group(1))
    return names


def check_program(prog, page, errors):
    help_text = run_help([prog], errors)
    if not help_text:
        return 0
    # A program with subcommands: each one's --help counts too.
    subs = subcommands(help_text)
    for sub in subs:
        help_text += "\n" + run_help([prog, sub], errors)
    with open(page) as f:
        roff = f.read()
    tag_text = "\n".join(tags(roff)) + "\n"
    page_text = plain(roff)
    pname = os.path.basename(page)
    defined = set()
    for line in help_text.split("\n"):
        m = DEF.match(line)
        if m:
            short, flag = m.group(1), m.group(2)
            defined.add(flag)
            if not re.search(re.escape(flag) + r"(?![a-z0-9-])", tag_text):
                errors.append("%s: %s --help defines %s; %s has no .TP "
                              "item for it (add one under OPTIONS)"
                              % (pname, os.path.basename(prog), flag, pname))
            if short and not re.search(r"(?<![\w-])" + re.escape(short)
                                       + r"(?![\w-])", tag_text):
                errors.append("%s: %s --help gives %s the short form %s; "
                              "its .TP item lacks it"
                              % (pname, os.path.basename(prog), flag, short))
            continue
        m = DEF_SHORT_ONLY.match(line)
        if m and not re.search(r"(?<![\w-])" + re.escape(m.group(1))
                               + r"(?![\w-])", tag_text):
            errors.append("%s: %s --help defines %s; %s has no .TP item "
                          "for it" % (pname, os.path.basename(prog),
                                      m.group(1), pname))
    for flag in set(LONG.findall(help_text)) - defined:
        if not re.search(re.escape(flag) + r"(?![a-z0-9-])", page_text):
            errors.append("%s: %s --help mentions %s; %s never does"
                          % (pname, os.path.basename(prog), flag, pname))
    if not defined:
        errors.append("%s --help defines no option: the help format "
                      "changed and this check no longer reads it" % prog)
    return len(defined)


def check_library(lib, man_dir, errors):
    r = subprocess.run(["nm", "-D", "--defined-only", lib],
                       stdout=subprocess.PIPE, check=True)
    funcs = sorted(ln.split()[2] for ln in r.stdout.decode().split("\n")
                   if len(ln.split()) == 3 and ln.split()[1] == "T")
    if not funcs:
        errors.append("nm -D %s lists no exported function" % lib)
    pages = {}
    for p in sorted(glob.glob(os.path.join(man_dir, "*.3"))):
        with open(p) as f:
            roff = f.read()
        pages[os.path.basename(p)] = (sections(roff), roff)
    for fn in funcs:
        ok = False
        for name, (secs, roff) in pages.items():
            syn = secs.get("SYNOPSIS", "")
            rest = "".join(v for k, v in secs.items()
                           if k not in ("NAME", "SYNOPSIS"))
            if re.search(r"\b%s\(" % re.escape(fn), syn):
                if re.search(r"\b%s\b" % re.escape(fn), rest):
                    ok = True
                    break
                errors.append("%s: %s is in the SYNOPSIS but never "
                              "described below it" % (name, fn))
                ok = True
                break
        if not ok:
            errors.append("libkvring.so exports %s; no section-3 page in "
                          "docs/man has its prototype in SYNOPSIS" % fn)
    return len(funcs)


def check_environment(src, man_dir, errors):
    names = set()
    roots = [os.path.join(src, d) for d in ("lib", "worker", "server",
                                            "tools")]
    for root in roots:
        for dirpath, _dirs, files in os.walk(root):
            for fn in files:
                if fn.endswith((".c", ".h", ".py")):
                    with open(os.path.join(dirpath, fn),
                              errors="replace") as f:
                        names.update(ENV_LITERAL.findall(f.read()))
    env_text = ""
    for p in sorted(glob.glob(os.path.join(man_dir, "*.[0-9]"))):
        with open(p) as f:
            env_text += sections(f.read()).get("ENVIRONMENT", "")
    for name in sorted(names):
        if not re.search(r"\b%s\b" % re.escape(name), env_text):
            errors.append("the sources read $%s; no page's ENVIRONMENT "
                          "section names it" % name)
    return len(names)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--man-dir", required=True)
    ap.add_argument("--prog", action="append", default=[],
                    help="PROGRAM=PAGE")
    ap.add_argument("--lib")
    ap.add_argument("--src")
    a = ap.parse_args()
    errors = []
    for spec in a.prog:
        prog, page = spec.split("=", 1)
        n = check_program(prog, os.path.join(a.man_dir, page), errors)
        print("%s: %d options against %s" % (os.path.basename(prog), n, page))
    if a.lib:
        n = check_library(a.lib, a.man_dir, errors)
        print("libkvring: %d exported functions" % n)
    if a.src:
        n = check_environment(a.src, a.man_dir, errors)
        print("environment: %d variables" % n)
    for e in sorted(set(errors), key=errors.index):
        print("man_complete: MISSING: " + e, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
