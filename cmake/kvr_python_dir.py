# SPDX-License-Identifier: MIT
"""Print where this interpreter imports pure-Python packages from, for an
install prefix, relative to that prefix (worker/CMakeLists.txt runs it).

The interpreter's own purelib path for the prefix: Debian's python3 has
schemes of its own (deb_system for /usr: lib/python3/dist-packages;
posix_local for /usr/local: lib/python3.X/dist-packages), and the
upstream posix_prefix (lib/python3.X/site-packages) fits every other
prefix and interpreter. The first scheme whose path lies under the prefix
and is on sys.path wins; a prefix this interpreter does not search gets
posix_prefix's path, which then goes on PYTHONPATH (README, "Install").
"""
import os
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
names = sysconfig.get_scheme_names()
schemes = [s for s in ("deb_system", sysconfig.get_default_scheme(),
                       "posix_prefix") if s in names]
base = sys.base_prefix
for scheme in schemes:
    for b in (base, prefix):
        path = os.path.normpath(sysconfig.get_path(
            "purelib", scheme, vars={"base": b, "platbase": b}))
        if path.startswith(prefix + os.sep) and path in sys.path:
            print(os.path.relpath(path, prefix))
            sys.exit(0)
path = sysconfig.get_path("purelib", "posix_prefix",
                          vars={"base": prefix, "platbase": prefix})
print(os.path.relpath(os.path.normpath(path), prefix))
