# SPDX-License-Identifier: MIT
"""vllm.v1.core.sched.output stand-in: what the scheduler hands
build_connector_meta() each step, field for field as vLLM declares it
(no defaults where vLLM has none; SchedulerOutput.make_empty() and
CachedRequestData.make_empty() give the empty values).

Two generations of CachedRequestData exist in deployed vLLM: the current
one says which requests resumed after preemption with a set,
resumed_req_ids; vLLM 0.10 said it with a list of flags parallel to
req_ids, resumed_from_preemption (and had no all_token_ids). Both mean
"new_block_ids replace the request's blocks instead of extending them".
LegacyCachedRequestData is the older one, field for field, for drivers
that play an older vLLM."""
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Optional

import torch

__all__ = ["NewRequestData", "CachedRequestData", "LegacyCachedRequestData",
           "SchedulerOutput"]


@dataclass
class NewRequestData:
    req_id: str
    prompt_token_ids: Optional[list[int]]
    mm_features: list[Any]
    sampling_params: Any
    pooling_params: Any
    block_ids: tuple[list[int], ...]
    num_computed_tokens: int
    lora_request: Any
    prompt_embeds: Optional[torch.Tensor] = None
    prefill_token_ids: Optional[list[int]] = None


@dataclass
class CachedRequestData:
    req_ids: list[str]
    # For request ids not in resumed_req_ids, new_block_ids are appended
    # to the request's block ids; for those in the set, they replace them.
    resumed_req_ids: set[str]
    new_token_ids: list[list[int]]
    all_token_ids: dict[str, list[int]]
    new_block_ids: list[Optional[tuple[list[int], ...]]]
    num_computed_tokens: list[int]
    num_output_tokens: list[int]

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @cached_property
    def _req_id_to_num_output_tokens(self) -> dict[str, int]:
        return dict(zip(self.req_ids, self.num_output_tokens))

    def is_context_phase(self, req_id: str) -> bool:
        n = self._req_id_to_num_output_tokens.get(req_id)
        return n is not None and n == 0

    @classmethod
    def make_empty(cls) -> "CachedRequestData":
        return cls(req_ids=[], resumed_req_ids=set(), new_token_ids=[],
                   all_token_ids={}, new_block_ids=[], num_computed_tokens=[],
                   num_output_tokens=[])


@dataclass
class LegacyCachedRequestData:
    """vLLM 0.10's CachedRequestData (same name there)."""
    req_ids: list[str]
    # If resumed_from_preemption is False, new_block_ids are appended to
    # the request's block ids. If True, they replace them.
    resumed_from_preemption: list[bool]
    new_token_ids: list[list[int]]
    new_block_ids: list[Optional[tuple[list[int], ...]]]
    num_computed_tokens: list[int]

    @property
    def num_reqs(self) -> int:
        return len(self.req_ids)

    @classmethod
    def make_empty(cls) -> "LegacyCachedRequestData":
        return cls(req_ids=[], resumed_from_preemption=[], new_token_ids=[],
                   new_block_ids=[], num_computed_tokens=[])


@dataclass
class SchedulerOutput:
    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    scheduled_encoder_inputs: dict[str, list[int]]
    num_common_prefix_blocks: list[int]
    finished_req_ids: set[str]
    free_encoder_mm_hashes: list[str]
    preempted_req_ids: Optional[set[str]] = None
    pending_structured_output_tokens: bool = False
    kv_connector_metadata: Any = None
    ec_connector_metadata: Any = None

    @classmethod
    def make_empty(cls) -> "SchedulerOutput":
        return cls(scheduled_new_reqs=[],
                   scheduled_cached_reqs=CachedRequestData.make_empty(),
                   num_scheduled_tokens={}, total_num_scheduled_tokens=0,
                   scheduled_spec_decode_tokens={},
                   scheduled_encoder_inputs={}, num_common_prefix_blocks=[],
                   finished_req_ids=set(), free_encoder_mm_hashes=[])
