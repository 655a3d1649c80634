# SPDX-License-Identifier: MIT
"""vllm.v1.attention.backends.mla.common stand-in: MLA caches are
(num_blocks, block_size, head_size), one latent per token."""
from vllm.v1.attention.backend import AttentionBackend


class MLACommonBackend(AttentionBackend):
    accept_output_buffer: bool = True

    @staticmethod
    def get_name() -> str:
        return "TRITON_MLA"

    @staticmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int,
                           num_kv_heads: int, head_size: int,
                           cache_dtype_str: str = "auto") -> tuple[int, ...]:
        return (num_blocks, block_size, head_size)

    @staticmethod
    def get_kv_cache_stride_order(
            include_num_layers_dimension: bool = False) -> tuple[int, ...]:
        # (num_blocks, num_layers, block_size, head_size)
        return (1, 0, 2, 3) if include_num_layers_dimension else (0, 1, 2)

    @classmethod
    def is_mla(cls) -> bool:
        return True
