# SPDX-License-Identifier: MIT
"""lmcache.v1.distributed stand-in package."""
