# SPDX-License-Identifier: MIT
"""vllm.forward_context stand-in: what start_load_kv receives."""
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ForwardContext:
    no_compile_layers: dict[str, Any] = field(default_factory=dict)
    attn_metadata: Any = None
    virtual_engine: int = 0
