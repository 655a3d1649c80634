# SPDX-License-Identifier: MIT
"""vllm.v1.request stand-in: the attributes connectors read."""
from typing import Any, Optional


class Request:
    def __init__(self, request_id: str, prompt_token_ids: Optional[list[int]],
                 sampling_params: Any = None, pooling_params: Any = None,
                 eos_token_id: Optional[int] = None,
                 cache_salt: Optional[str] = None, priority: int = 0,
                 **kwargs: Any) -> None:
        self.request_id = request_id
        self.prompt_token_ids = prompt_token_ids
        self.num_prompt_tokens = len(prompt_token_ids or [])
        self.sampling_params = sampling_params
        self.pooling_params = pooling_params
        self.eos_token_id = eos_token_id
        self.cache_salt = cache_salt
        self.priority = priority
        self.num_computed_tokens = 0
        self.mm_features: list = []
        self._output_token_ids: list[int] = []
        self._all_token_ids: list[int] = list(prompt_token_ids or [])

    @property
    def num_tokens(self) -> int:
        return len(self._all_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self._all_token_ids
