# SPDX-License-Identifier: MIT
"""vllm.config stand-in: the config objects a KV connector reads. Fields
and method names are vLLM's; values are whatever the driver sets."""
from dataclasses import dataclass, field
from typing import Any, Optional

from vllm.config.kv_transfer import KVTransferConfig

__all__ = ["VllmConfig", "ModelConfig", "CacheConfig", "ParallelConfig",
           "CompilationConfig", "KVTransferConfig"]


@dataclass
class ParallelConfig:
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    rank: int = 0


@dataclass
class ModelConfig:
    model: str = "stand-in/model"
    dtype: Any = "float16"
    use_mla: bool = False
    num_layers: int = 2
    num_kv_heads: int = 2
    head_size: int = 64

    def get_num_layers(self, parallel_config: ParallelConfig) -> int:
        return self.num_layers // parallel_config.pipeline_parallel_size

    def get_num_kv_heads(self, parallel_config: ParallelConfig) -> int:
        return max(1, self.num_kv_heads //
                   parallel_config.tensor_parallel_size)

    def get_head_size(self) -> int:
        return self.head_size


@dataclass
class CacheConfig:
    block_size: int = 16
    cache_dtype: str = "auto"
    num_gpu_blocks: Optional[int] = None


@dataclass
class CompilationConfig:
    # layer name -> the layer object (an attention layer answers
    # get_attn_backend()); vLLM fills it while building the model.
    static_forward_context: dict[str, Any] = field(default_factory=dict)


@dataclass
class VllmConfig:
    model_config: ModelConfig = field(default_factory=ModelConfig)
    cache_config: CacheConfig = field(default_factory=CacheConfig)
    parallel_config: ParallelConfig = field(default_factory=ParallelConfig)
    kv_transfer_config: Optional[KVTransferConfig] = None
    compilation_config: CompilationConfig = field(
        default_factory=CompilationConfig)
