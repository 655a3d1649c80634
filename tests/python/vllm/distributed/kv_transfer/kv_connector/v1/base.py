# SPDX-License-Identifier: MIT
"""vllm.distributed.kv_transfer.kv_connector.v1.base stand-in.

KVConnectorBase_V1 with vLLM's method names, signatures and abstract set
(scheduler side: get_num_new_matched_tokens, update_state_after_alloc,
build_connector_meta, request_finished; worker side: register_kv_caches,
start_load_kv, wait_for_layer_load, save_kv_layer, wait_for_save,
get_finished, get_block_ids_with_load_errors, shutdown). The defaults do
what vLLM's do: nothing, or hold the bound metadata."""
import enum
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, Iterable, Optional

import torch

from vllm.logger import init_logger

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.attention.backend import AttentionMetadata
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

logger = init_logger(__name__)


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorMetadata(ABC):  # noqa: B024
    """Scheduler connector -> worker connector, pickled between them."""


class KVConnectorBase_V1(ABC):

    @property
    def prefer_cross_layer_blocks(self) -> bool:
        return False

    def __init__(self, vllm_config: "VllmConfig", role: KVConnectorRole,
                 kv_cache_config: "KVCacheConfig"):
        self._connector_metadata: Optional[KVConnectorMetadata] = None
        self._vllm_config = vllm_config
        if vllm_config.kv_transfer_config is not None:
            self._kv_transfer_config = vllm_config.kv_transfer_config
        else:
            raise ValueError("kv_transfer_config must be set for "
                             "KVConnectorBase_V1")
        self._kv_cache_config = kv_cache_config
        self._role = role

    @property
    def role(self) -> KVConnectorRole:
        return self._role

    # Worker-side methods
    def bind_connector_metadata(
            self, connector_metadata: KVConnectorMetadata) -> None:
        self._connector_metadata = connector_metadata

    def clear_connector_metadata(self) -> None:
        self._connector_metadata = None

    def _get_connector_metadata(self) -> KVConnectorMetadata:
        assert self._connector_metadata is not None
        return self._connector_metadata

    def has_connector_metadata(self) -> bool:
        return self._connector_metadata is not None

    def register_kv_caches(self, kv_caches: dict[str, torch.Tensor]):
        return

    def register_cross_layers_kv_cache(self, kv_cache: torch.Tensor,
                                       attn_backend: type):
        return

    def handle_preemptions(self, kv_connector_metadata: KVConnectorMetadata):
        return

    @abstractmethod
    def start_load_kv(self, forward_context: "ForwardContext",
                      **kwargs: Any) -> None:
        pass

    @abstractmethod
    def wait_for_layer_load(self, layer_name: str) -> None:
        pass

    @abstractmethod
    def save_kv_layer(self, layer_name: str, kv_layer: torch.Tensor,
                      attn_metadata: "AttentionMetadata",
                      **kwargs: Any) -> None:
        pass

    @abstractmethod
    def wait_for_save(self):
        pass

    def get_finished(self, finished_req_ids: set[str]
                     ) -> tuple[Optional[set[str]], Optional[set[str]]]:
        return None, None

    def get_block_ids_with_load_errors(self) -> set[int]:
        return set()

    def shutdown(self):
        return None

    # Scheduler-side methods
    @abstractmethod
    def get_num_new_matched_tokens(self, request: "Request",
                                   num_computed_tokens: int
                                   ) -> tuple[Optional[int], bool]:
        pass

    @abstractmethod
    def update_state_after_alloc(self, request: "Request",
                                 blocks: "KVCacheBlocks",
                                 num_external_tokens: int):
        pass

    @abstractmethod
    def build_connector_meta(
            self, scheduler_output: "SchedulerOutput") -> KVConnectorMetadata:
        pass

    def update_connector_output(self, connector_output: Any):
        return

    def request_finished(self, request: "Request", block_ids: list[int]
                         ) -> tuple[bool, Optional[dict[str, Any]]]:
        return False, None

    def take_events(self) -> Iterable[Any]:
        return ()

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: "VllmConfig"
                                    ) -> Optional[str]:
        return None
