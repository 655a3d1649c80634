# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess.transfer_context.base stand-in.

EngineDrivenContextMetadata (the chunk layout a worker registers:
layout_desc, block_size, use_mla, and the per-group lists of hybrid
models), the EngineDrivenContext interface with its two-phase contract,
and create_engine_driven_context's signature. LMCache's contract, from
the docstrings of base.py:

  prepare_store(key, instance_id) -> None | ([], []) | (views, indices)
      None: no pre-allocated buffers; the caller gathers every chunk to
      the CPU itself and sends the data with commit_store. ([], []): all
      chunks are cached already; skip gather and commit. Else views[i] is
      a writable buffer for chunk indices[i] of the key's block ids.
  commit_store(key, instance_id, chunks) -> bool
  prepare_retrieve(key, instance_id) -> list[Tensor] | None (None: miss,
      timeout or failure alike)
  commit_retrieve(key, instance_id) -> bool (releases read locks)
  close() -> None
No behaviour here."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import torch

from lmcache.v1.distributed.api import MemoryLayoutDesc
from lmcache.v1.multiprocess.custom_types import IPCCacheServerKey
from lmcache.v1.multiprocess.mq import MessageQueueClient


@dataclass
class EngineDrivenContextMetadata:
    layout_desc: MemoryLayoutDesc
    block_size: int
    use_mla: bool
    group_layout_descs: list = field(default_factory=list)
    group_block_sizes: list = field(default_factory=list)
    group_use_mla: list = field(default_factory=list)
    group_blocks_in_chunk: list = field(default_factory=list)

    @property
    def is_multi_group(self) -> bool:
        return len(self.group_layout_descs) > 1


class EngineDrivenContext(ABC):

    def __init__(self, metadata: EngineDrivenContextMetadata,
                 mq_client: MessageQueueClient, mq_timeout: float) -> None:
        self.metadata = metadata
        self.mq_client = mq_client
        self.mq_timeout = mq_timeout

    @property
    def layout_desc(self) -> MemoryLayoutDesc:
        return self.metadata.layout_desc

    @abstractmethod
    def prepare_store(self, key: IPCCacheServerKey, instance_id: int
                      ) -> "tuple[list[torch.Tensor], list[int]] | None":
        ...

    @abstractmethod
    def commit_store(self, key: IPCCacheServerKey, instance_id: int,
                     chunks: "list[torch.Tensor]") -> bool:
        ...

    @abstractmethod
    def prepare_retrieve(self, key: IPCCacheServerKey, instance_id: int
                         ) -> "list[torch.Tensor] | None":
        ...

    @abstractmethod
    def commit_retrieve(self, key: IPCCacheServerKey,
                        instance_id: int) -> bool:
        ...

    @abstractmethod
    def close(self) -> None:
        ...

    def commit_store_raw(self, key: IPCCacheServerKey, instance_id: int,
                         cpu_data: bytes) -> bool:
        raise NotImplementedError("stand-in")

    def prepare_retrieve_raw(self, key: IPCCacheServerKey,
                             instance_id: int) -> "bytes | None":
        raise NotImplementedError("stand-in")


def create_engine_driven_context(metadata: EngineDrivenContextMetadata,
                                 mq_client: MessageQueueClient,
                                 mq_timeout: float, shm_name: str,
                                 pool_size: int, *,
                                 use_pickle: bool = False
                                 ) -> EngineDrivenContext:
    raise NotImplementedError("stand-in: LMCache returns its SHM context "
                              "when shm_name and pool_size are usable, else "
                              "its pickle context")

