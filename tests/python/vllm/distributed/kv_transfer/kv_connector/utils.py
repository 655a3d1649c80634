# SPDX-License-Identifier: MIT
"""vllm.distributed.kv_transfer.kv_connector.utils stand-in: the attention
backend of the model's layers, as connectors ask for it. vLLM reads each
attention layer of compilation_config.static_forward_context and calls its
get_attn_backend(); so does this (the engine driver fills the context)."""
from typing import Any, Optional


def get_current_attn_backends(vllm_config: Any,
                              layer_names: Optional[list[str]] = None
                              ) -> list[type]:
    ctx = vllm_config.compilation_config.static_forward_context
    seen: dict[str, type] = {}
    for name, layer in ctx.items():
        if layer_names is not None and name not in layer_names:
            continue
        backend = layer.get_attn_backend()
        seen[backend.__module__ + "." + backend.__qualname__] = backend
    if not seen:
        raise NotImplementedError("no attention layer in the forward "
                                  "context (vLLM would ask its selector)")
    return list(seen.values())


def get_current_attn_backend(vllm_config: Any,
                             layer_names: Optional[list[str]] = None
                             ) -> type:
    return get_current_attn_backends(vllm_config, layer_names)[0]
