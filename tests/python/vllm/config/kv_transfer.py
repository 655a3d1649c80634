# SPDX-License-Identifier: MIT
"""vllm.config.kv_transfer stand-in: what --kv-transfer-config parses to."""
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Optional


@dataclass
class KVTransferConfig:
    kv_connector: Optional[str] = None
    engine_id: Optional[str] = None
    kv_buffer_device: str = "cuda"
    kv_buffer_size: float = 1e9
    kv_role: Optional[str] = None
    kv_rank: Optional[int] = None
    kv_parallel_size: int = 1
    kv_ip: str = "127.0.0.1"
    kv_port: int = 14579
    kv_connector_extra_config: dict = field(default_factory=dict)
    kv_connector_module_path: Optional[str] = None
    enable_permute_local_kv: bool = False
    # 'recompute': reschedule the request to recompute failed blocks;
    # 'fail': fail the request with an error finish reason (vLLM's default).
    kv_load_failure_policy: Literal["recompute", "fail"] = "fail"

    @classmethod
    def from_cli(cls, cli_value: str) -> "KVTransferConfig":
        return cls(**json.loads(cli_value))

    @property
    def is_kv_transfer_instance(self) -> bool:
        return self.kv_connector is not None

    @property
    def is_kv_producer(self) -> bool:
        return self.kv_role in ("kv_producer", "kv_both")

    @property
    def is_kv_consumer(self) -> bool:
        return self.kv_role in ("kv_consumer", "kv_both")

    def get_from_extra_config(self, key: str, default: Any) -> Any:
        return self.kv_connector_extra_config.get(key, default)
