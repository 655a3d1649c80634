# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache.pool_host.base stand-in: HostKVCache, the host
(CPU) KV pool HiCache registers with a storage backend
(register_mem_pool_host). Attributes a backend reads, as SGLang sets
them: page_size, layout ("layer_first", "page_first",
"page_first_direct", ...), dtype (the device pool's store dtype), size
(tokens, a whole number of pages), page_num, layer_num, kv_buffer. Every
method raises: the test harness subclasses it and allocates kv_buffer
the way SGLang's init_kv_buffer() does."""
from __future__ import annotations

import abc
from typing import Any, Optional

import torch


class HostKVCache(abc.ABC):

    def __init__(self, device_pool: Any, host_to_device_ratio: float,
                 host_size: int, page_size: int, layout: str,
                 pin_memory: bool, device: str,
                 allocator_type: str = "default"):
        raise NotImplementedError("stand-in")

    def destroy(self):
        raise NotImplementedError("stand-in")

    @abc.abstractmethod
    def get_size_per_token(self):
        raise NotImplementedError()

    @abc.abstractmethod
    def init_kv_buffer(self):
        raise NotImplementedError()

    @abc.abstractmethod
    def load_to_device_per_layer(self, device_pool, host_indices,
                                 device_indices, layer_id,
                                 io_backend) -> None:
        raise NotImplementedError()

    @abc.abstractmethod
    def backup_from_device_all_layer(self, device_pool, host_indices,
                                     device_indices, io_backend) -> None:
        raise NotImplementedError()

    @abc.abstractmethod
    def get_data_page(self, index, flat: bool = True) -> torch.Tensor:
        raise NotImplementedError()

    @abc.abstractmethod
    def get_dummy_flat_data_page(self) -> torch.Tensor:
        raise NotImplementedError()

    @abc.abstractmethod
    def set_from_flat_data_page(self, index: int,
                                data_page: torch.Tensor) -> None:
        raise NotImplementedError()

    def is_stride_page_aligned(self, page_size_bytes: int = 4096) -> bool:
        raise NotImplementedError("stand-in")

    def clear(self):
        raise NotImplementedError("stand-in")

    def available_size(self):
        raise NotImplementedError("stand-in")

    def alloc(self, need_size: int) -> Optional[torch.Tensor]:
        raise NotImplementedError("stand-in")

    def free(self, indices: torch.Tensor) -> int:
        raise NotImplementedError("stand-in")
