# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache.pool_host stand-in: exports HostKVCache as
SGLang's package does."""
from sglang.srt.mem_cache.pool_host.base import HostKVCache

__all__ = ["HostKVCache"]
