# SPDX-License-Identifier: MIT
"""vllm.v1.attention.backends.cpu_attn stand-in: vLLM's CPU backend keeps
its cache HND, (2, num_blocks, num_kv_heads, block_size, head_size), with
no stride order of its own (the tensor is that shape, contiguous)."""
from vllm.v1.attention.backend import AttentionBackend


class CPUAttentionBackend(AttentionBackend):
    accept_output_buffer: bool = True

    @staticmethod
    def get_name() -> str:
        return "CPU_ATTN"

    @staticmethod
    def get_kv_cache_shape(num_blocks: int, block_size: int,
                           num_kv_heads: int, head_size: int,
                           cache_dtype_str: str = "auto") -> tuple[int, ...]:
        return 2, num_blocks, num_kv_heads, block_size, head_size
