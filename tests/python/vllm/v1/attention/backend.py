# SPDX-License-Identifier: MIT
"""vllm.v1.attention.backend stand-in: the parts of AttentionBackend a KV
connector reads (its name, the KV cache's logical shape, and the stride
order that says how that shape is laid out in memory)."""
from typing import Optional


class AttentionType:
    DECODER = "decoder"
    ENCODER = "encoder"
    ENCODER_ONLY = "encoder_only"
    ENCODER_DECODER = "encoder_decoder"


class AttentionBackend:
    accept_output_buffer: bool = False

    @staticmethod
    def get_name() -> str:
        raise NotImplementedError

    @staticmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int,
                           num_kv_heads: int, head_size: int,
                           cache_dtype_str: str = "auto") -> tuple[int, ...]:
        raise NotImplementedError

    @staticmethod
    def get_kv_cache_stride_order(
            include_num_layers_dimension: bool = False) -> tuple[int, ...]:
        raise NotImplementedError

    @classmethod
    def is_mla(cls) -> bool:
        return False

    @classmethod
    def get_required_kv_cache_layout(cls) -> Optional[str]:
        return None


class AttentionMetadata:
    pass
