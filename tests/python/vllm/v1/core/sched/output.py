# SPDX-License-Identifier: MIT
"""vllm.v1.core.sched.output stand-in: what the scheduler hands
build_connector_meta() each step (vLLM's field names)."""
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: Optional[list[int]]
    mm_features: list = field(default_factory=list)
    sampling_params: Any = None
    pooling_params: Any = None
    block_ids: tuple[list[int], ...] = ((),)
    num_computed_tokens: int = 0
    lora_request: Any = None


@dataclass
class CachedRequestData:
    req_ids: list[str] = field(default_factory=list)
    resumed_req_ids: set[str] = field(default_factory=set)
    new_token_ids: list[list[int]] = field(default_factory=list)
    all_token_ids: dict[str, list[int]] = field(default_factory=dict)
    new_block_ids: list[Optional[tuple[list[int], ...]]] = field(
        default_factory=list)
    num_computed_tokens: list[int] = field(default_factory=list)
    num_output_tokens: list[int] = field(default_factory=list)

    @classmethod
    def make_empty(cls) -> "CachedRequestData":
        return cls()


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData] = field(default_factory=list)
    scheduled_cached_reqs: CachedRequestData = field(
        default_factory=CachedRequestData)
    num_scheduled_tokens: dict[str, int] = field(default_factory=dict)
    total_num_scheduled_tokens: int = 0
    scheduled_spec_decode_tokens: dict[str, list[int]] = field(
        default_factory=dict)
    scheduled_encoder_inputs: dict[str, list[int]] = field(
        default_factory=dict)
    num_common_prefix_blocks: list[int] = field(default_factory=list)
    finished_req_ids: set[str] = field(default_factory=set)
    free_encoder_mm_hashes: list[str] = field(default_factory=list)
    kv_connector_metadata: Any = None
