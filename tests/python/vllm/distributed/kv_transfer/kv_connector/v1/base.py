# SPDX-License-Identifier: MIT
"""vllm.distributed.kv_transfer.kv_connector.v1.base stand-in.

Every member of vLLM's KVConnectorBase_V1, with vLLM's names, signatures,
defaults and abstract set, and the module's other public names
(SupportsHMA, supports_hma, KVConnectorRole, KVConnectorMetadata,
KVConnectorWorkerMetadata, KVConnectorHandshakeMetadata, CopyBlocksOp).
The default bodies do what vLLM's do: nothing, hold the bound metadata,
or answer the documented default. test_torch.py compares the connector's
overrides with these signatures."""
import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, Optional

import torch

from vllm.logger import init_logger
from vllm.v1.attention.backend import AttentionBackend, AttentionMetadata
from vllm.v1.core.sched.output import SchedulerOutput
from vllm.v1.outputs import KVConnectorOutput

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.forward_context import ForwardContext
    from vllm.v1.core.kv_cache_manager import KVCacheBlocks
    from vllm.v1.kv_cache_interface import KVCacheConfig
    from vllm.v1.request import Request

# s_tensor_list, d_tensor_list, s_indices, d_indices, direction
CopyBlocksOp = Callable[
    [dict[str, torch.Tensor], dict[str, torch.Tensor], list[int], list[int],
     Literal["h2d", "d2h"]], None]

logger = init_logger(__name__)

__all__ = ["SupportsHMA", "supports_hma", "KVConnectorRole",
           "KVConnectorHandshakeMetadata", "KVConnectorMetadata",
           "KVConnectorWorkerMetadata", "KVConnectorBase_V1", "CopyBlocksOp",
           "AttentionMetadata", "SchedulerOutput"]


class SupportsHMA(ABC):
    """A connector that supports the hybrid memory allocator."""

    @abstractmethod
    def request_finished_all_groups(
            self, request: "Request", block_ids: tuple[list[int], ...]
    ) -> tuple[bool, Optional[dict[str, Any]]]:
        raise NotImplementedError


def supports_hma(connector: Any) -> bool:
    if isinstance(connector, type):
        return issubclass(connector, SupportsHMA)
    return isinstance(connector, SupportsHMA)


class KVConnectorRole(enum.Enum):
    SCHEDULER = 0
    WORKER = 1


class KVConnectorHandshakeMetadata(ABC):  # noqa: B024
    pass


class KVConnectorMetadata(ABC):  # noqa: B024
    """Scheduler connector -> worker connector, pickled between them."""


class KVConnectorWorkerMetadata(ABC):
    @abstractmethod
    def aggregate(self, other: "KVConnectorWorkerMetadata"
                  ) -> "KVConnectorWorkerMetadata":
        pass


class KVConnectorBase_V1(ABC):

    @property
    def prefer_cross_layer_blocks(self) -> bool:
        return False

    @property
    def supports_eagle_prefix_cache_hashing(self) -> bool:
        return False

    @property
    def requires_kv_delivery(self) -> bool:
        return self._kv_transfer_config.is_kv_producer

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
        self.use_eagle_prefix_cache_hashing = False

    def set_eagle_prefix_cache_hashing(self, enabled: bool) -> None:
        self.use_eagle_prefix_cache_hashing = enabled

    @property
    def role(self) -> KVConnectorRole:
        return self._role

    # ==============================
    # Worker-side methods
    # ==============================

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

    def register_cross_layers_kv_cache(
            self, kv_cache: torch.Tensor,
            attn_backend: type["AttentionBackend"]):
        return

    def set_host_xfer_buffer_ops(self, copy_operation: CopyBlocksOp):
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

    def get_kv_connector_stats(self) -> Any:
        return None

    def get_kv_connector_kv_cache_events(self) -> Any:
        return None

    def get_handshake_metadata(self
                               ) -> Optional[KVConnectorHandshakeMetadata]:
        return None

    def build_connector_worker_meta(self
                                    ) -> Optional[KVConnectorWorkerMetadata]:
        return None

    # ==============================
    # Scheduler-side methods
    # ==============================

    def bind_gpu_block_pool(self, gpu_block_pool: Any) -> None:
        return

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
            self, scheduler_output: SchedulerOutput) -> KVConnectorMetadata:
        pass

    def on_new_request(self, request: "Request") -> None:
        return

    def update_connector_output(self, connector_output: KVConnectorOutput):
        return

    def request_finished(self, request: "Request", block_ids: list[int]
                         ) -> tuple[bool, Optional[dict[str, Any]]]:
        return False, None

    def take_events(self) -> Iterable[Any]:
        return ()

    def has_pending_push_work(self) -> bool:
        return False

    @classmethod
    def get_required_kvcache_layout(cls, vllm_config: "VllmConfig"
                                    ) -> Optional[str]:
        if cls is KVConnectorBase_V1:
            raise TypeError("get_required_kvcache_layout should not be "
                            "called on the abstract base class")
        return None

    @classmethod
    def requires_piecewise_for_cudagraph(cls, extra_config: dict[str, Any]
                                         ) -> bool:
        return False

    def get_finished_count(self) -> Optional[int]:
        return None

    @classmethod
    def build_kv_connector_stats(cls, data: Optional[dict[str, Any]] = None
                                 ) -> Any:
        return None

    def set_xfer_handshake_metadata(
            self, metadata: dict[int, KVConnectorHandshakeMetadata]) -> None:
        return None

    def set_xfer_handshake_metadata_pp_aware(
            self, metadata: dict[tuple[int, int],
                                 KVConnectorHandshakeMetadata]) -> None:
        if any(pp_rank != 0 for pp_rank, _ in metadata):
            raise ValueError(
                "%s received pp_rank > 0 handshake metadata but does not "
                "support PP-disaggregated KV transfer." % type(self).__name__)
        self.set_xfer_handshake_metadata(
            {tp_rank: meta for (_, tp_rank), meta in metadata.items()})

    @classmethod
    def build_prom_metrics(cls, vllm_config: "VllmConfig",
                           metric_types: dict[type, type],
                           labelnames: list[str],
                           per_engine_labelvalues: dict[int, list[object]]
                           ) -> Any:
        return None

    def reset_cache(self) -> Optional[bool]:
        return None
