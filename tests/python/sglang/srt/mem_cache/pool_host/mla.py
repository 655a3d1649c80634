# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache.pool_host.mla stand-in: MLATokenToKVPoolHost.

SGLang's kv_buffer shapes by layout (init_kv_buffer), with kv_cache_dim
= kv_lora_rank + qk_rope_head_dim:
  layer_first        [layer_num, size, 1, kv_cache_dim]
  page_first         [size, layer_num, 1, kv_cache_dim]
  page_first_direct  [page_num, layer_num, page_size, 1, kv_cache_dim]
(page_first_kv_split is Ascend's, with separate buffers.) Members and
signatures only."""
from __future__ import annotations

from typing import Any, Optional, Sequence

import torch

from sglang.srt.mem_cache.pool_host.base import HostKVCache


class MLATokenToKVPoolHost(HostKVCache):
    device_pool: Any
    mtp_draft_device_pools: tuple = ()

    def __init__(self, device_pool: Any, host_to_device_ratio: float,
                 host_size: int, page_size: int, layout: str,
                 pin_memory: bool = True, device: str = "cpu",
                 allocator_type: str = "default",
                 override_kv_cache_dim: Optional[int] = None,
                 mtp_draft_device_pools: Sequence[Any] = (),
                 dcp_size: int = 1, dcp_rank: int = 0, *,
                 pool_label: str = "kv", is_dummy: bool = False):
        raise NotImplementedError("stand-in")

    def get_contiguous_buf_infos(self):
        raise NotImplementedError("stand-in")

    def get_size_per_token(self):
        raise NotImplementedError("stand-in")

    def get_ksize_per_token(self):
        raise NotImplementedError("stand-in")

    def init_kv_buffer(self):
        raise NotImplementedError("stand-in")

    def load_to_device_per_layer(self, device_pool, host_indices,
                                 device_indices, layer_id, io_backend, *,
                                 is_draft: bool = False):
        raise NotImplementedError("stand-in")

    def backup_from_device_all_layer(self, device_pool, host_indices,
                                     device_indices, io_backend):
        raise NotImplementedError("stand-in")

    def get_data_page(self, index, flat: bool = True) -> torch.Tensor:
        raise NotImplementedError("stand-in")

    def get_dummy_flat_data_page(self) -> torch.Tensor:
        raise NotImplementedError("stand-in")

    def set_from_flat_data_page(self, index: int,
                                data_page: torch.Tensor) -> None:
        raise NotImplementedError("stand-in")

    def get_page_buffer_meta(self, indices):
        raise NotImplementedError("stand-in")

    def is_stride_page_aligned(self, page_size_bytes: int = 4096) -> bool:
        raise NotImplementedError("stand-in")
