# SPDX-License-Identifier: MIT
"""Only what pyproject.toml cannot say: a wheel that carries libkvring.so
is for one platform (the library is machine code) but for any Python 3
(the binding is ctypes, no extension module), so its tag is
py3-none-<platform>. Without a bundled library the wheel stays pure."""

import glob
import os

from setuptools import setup
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = bool(glob.glob(os.path.join(HERE, "kvring", "libkvring.so.*")))

cmdclass = {}
try:
    from wheel.bdist_wheel import bdist_wheel

    class PlatformWheel(bdist_wheel):
        """bdist_wheel tagged py3-none-<platform> when the library is in."""

        def finalize_options(self):
            super().finalize_options()
            self.root_is_pure = not BUNDLED

        def get_tag(self):
            python, abi, plat = super().get_tag()
            if BUNDLED:
                return "py3", "none", plat
            return python, abi, plat

    cmdclass["bdist_wheel"] = PlatformWheel
except ImportError:  # no wheel package: pip falls back to its own path
    pass


class BinaryDistribution(Distribution):
    """Platform-specific (purelib goes to platlib) when the library is in."""

    def has_ext_modules(self):
        return BUNDLED


setup(cmdclass=cmdclass, distclass=BinaryDistribution)
