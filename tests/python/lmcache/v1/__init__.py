# SPDX-License-Identifier: MIT
"""lmcache.v1 stand-in package."""
