# SPDX-License-Identifier: MIT
"""vllm.v1.kv_cache_interface stand-in: the KV cache configuration a
connector is built with. A model with layers of different kinds (full
attention beside sliding-window or Mamba layers: vLLM's hybrid memory
allocator) has one KVCacheGroupSpec per kind."""
from dataclasses import dataclass, field
from typing import Optional

import torch


@dataclass(frozen=True)
class KVCacheSpec:
    block_size: int


@dataclass(frozen=True)
class AttentionSpec(KVCacheSpec):
    num_kv_heads: int
    head_size: int
    dtype: torch.dtype


@dataclass(frozen=True)
class FullAttentionSpec(AttentionSpec):
    sliding_window: Optional[int] = None


@dataclass(frozen=True)
class MLAAttentionSpec(FullAttentionSpec):
    cache_dtype_str: Optional[str] = None


@dataclass(frozen=True)
class SlidingWindowSpec(AttentionSpec):
    sliding_window: int = 0


@dataclass(frozen=True)
class MambaSpec(KVCacheSpec):
    shapes: tuple = ()
    dtypes: tuple = ()


@dataclass
class KVCacheTensor:
    size: int
    shared_by: list[str]


@dataclass
class KVCacheGroupSpec:
    layer_names: list[str]
    kv_cache_spec: KVCacheSpec


@dataclass
class KVCacheConfig:
    num_blocks: int
    kv_cache_tensors: list[KVCacheTensor] = field(default_factory=list)
    kv_cache_groups: list[KVCacheGroupSpec] = field(default_factory=list)
