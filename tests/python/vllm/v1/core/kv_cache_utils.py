# SPDX-License-Identifier: MIT
"""vllm.v1.core.kv_cache_utils stand-in: one paged block."""
from dataclasses import dataclass


@dataclass
class KVCacheBlock:
    block_id: int
    ref_cnt: int = 0
