# SPDX-License-Identifier: MIT
"""vllm.v1.outputs stand-in."""
from dataclasses import dataclass, field
from typing import Optional


@dataclass
class KVConnectorOutput:
    finished_sending: Optional[set[str]] = None
    finished_recving: Optional[set[str]] = None
    invalid_block_ids: set[int] = field(default_factory=set)
