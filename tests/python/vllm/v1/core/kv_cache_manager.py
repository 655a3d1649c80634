# SPDX-License-Identifier: MIT
"""vllm.v1.core.kv_cache_manager stand-in: the blocks allocated to a
request, one sequence per KV-cache group."""
from dataclasses import dataclass
from typing import Sequence

from vllm.v1.core.kv_cache_utils import KVCacheBlock


@dataclass
class KVCacheBlocks:
    blocks: tuple[Sequence[KVCacheBlock], ...]

    def get_block_ids(self) -> tuple[list[int], ...]:
        return tuple([b.block_id for b in g] for g in self.blocks)

    def get_unhashed_block_ids(self) -> list[int]:
        return [b.block_id for b in self.blocks[0]]
