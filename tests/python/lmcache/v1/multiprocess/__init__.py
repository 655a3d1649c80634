# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess stand-in package."""
