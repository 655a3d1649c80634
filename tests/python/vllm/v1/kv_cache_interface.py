# SPDX-License-Identifier: MIT
"""vllm.v1.kv_cache_interface stand-in."""
from dataclasses import dataclass, field


@dataclass
class KVCacheConfig:
    num_blocks: int = 0
    kv_cache_tensors: list = field(default_factory=list)
    kv_cache_groups: list = field(default_factory=list)
