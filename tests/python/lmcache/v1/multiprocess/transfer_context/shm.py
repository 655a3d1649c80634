# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess.transfer_context.shm stand-in: the SHM slot
descriptor and EngineDrivenContextShm's members and signatures (attach
to the server's named segment, views over slots the server describes).
No behaviour."""
from dataclasses import dataclass
from typing import Any

import torch

from lmcache.v1.multiprocess.custom_types import IPCCacheServerKey
from lmcache.v1.multiprocess.mq import MessageQueueClient
from lmcache.v1.multiprocess.transfer_context.base import (
    EngineDrivenContext, EngineDrivenContextMetadata)


@dataclass(frozen=True)
class ShmSlotDescriptor:
    offset: int
    length: int
    shape: list
    dtype: str

    def to_dict(self) -> "dict[str, Any]":
        raise NotImplementedError("stand-in")

    @classmethod
    def from_dict(cls, d: "dict[str, Any]") -> "ShmSlotDescriptor":
        raise NotImplementedError("stand-in")


class EngineDrivenContextShm(EngineDrivenContext):

    def __init__(self, metadata: EngineDrivenContextMetadata,
                 mq_client: MessageQueueClient, mq_timeout: float,
                 shm_name: str, pool_size: int) -> None:
        raise NotImplementedError("stand-in")

    def _make_tensor_view(self, offset: int, length: int, shape: list,
                          dtype_str: str) -> torch.Tensor:
        raise NotImplementedError("stand-in")

    def _build_slot_tensors(self, slots: list) -> list:
        raise NotImplementedError("stand-in")

    def prepare_store(self, key: IPCCacheServerKey, instance_id: int):
        raise NotImplementedError("stand-in")

    def commit_store(self, key: IPCCacheServerKey, instance_id: int,
                     _chunks: list) -> bool:
        raise NotImplementedError("stand-in")

    def prepare_retrieve(self, key: IPCCacheServerKey, instance_id: int):
        raise NotImplementedError("stand-in")

    def commit_retrieve(self, key: IPCCacheServerKey,
                        instance_id: int) -> bool:
        raise NotImplementedError("stand-in")

    def close(self) -> None:
        raise NotImplementedError("stand-in")

    def _pin_shm_buffer(self) -> None:
        raise NotImplementedError("stand-in")

    def _unpin_shm_buffer(self) -> None:
        raise NotImplementedError("stand-in")
