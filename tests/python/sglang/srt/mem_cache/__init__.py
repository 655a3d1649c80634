# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache stand-in package."""
