# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache.pool_host.mha stand-in: MHATokenToKVPoolHost.

SGLang's kv_buffer shapes by layout (init_kv_buffer):
  layer_first        [2, layer_num, size, head_num, head_dim]
  page_first         [2, size, layer_num, head_num, head_dim]
  page_first_direct  [2, page_num, layer_num, page_size, head_num, head_dim]
  page_head          [2, page_num, head_num, page_size, layer_num, head_dim]
k_buffer is kv_buffer[0], v_buffer kv_buffer[1]. get_page_buffer_meta()
gives, per page, K and V pointers (per layer for layer_first). Members
and signatures only."""
from __future__ import annotations

from typing import Any, Sequence

import torch

from sglang.srt.mem_cache.pool_host.base import HostKVCache


class MHATokenToKVPoolHost(HostKVCache):
    device_pool: Any = None
    mtp_draft_device_pools: tuple = ()

    def __init__(self, device_pool: Any, host_to_device_ratio: float,
                 host_size: int, page_size: int, layout: str,
                 pin_memory: bool = True, device: str = "cpu",
                 allocator_type: str = "default", *,
                 mtp_draft_device_pools: Sequence[Any] = (),
                 pool_label: str = "kv"):
        raise NotImplementedError("stand-in")

    def get_size_per_token(self):
        raise NotImplementedError("stand-in")

    def get_hybrid_pool_buffer(self):
        raise NotImplementedError("stand-in")

    def get_ksize_per_token(self):
        raise NotImplementedError("stand-in")

    def init_kv_buffer(self):
        raise NotImplementedError("stand-in")

    @property
    def k_buffer(self):
        return self.kv_buffer[0]

    @property
    def v_buffer(self):
        return self.kv_buffer[1]

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

    def get_split_heads_page_buffer_meta(self, indices: torch.Tensor,
                                         split_factor: int):
        raise NotImplementedError("stand-in")

    def get_page_buffer_meta(self, indices):
        raise NotImplementedError("stand-in")

    def is_stride_page_aligned(self, page_size_bytes: int = 4096) -> bool:
        raise NotImplementedError("stand-in")
