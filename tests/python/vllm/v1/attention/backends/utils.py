# SPDX-License-Identifier: MIT
"""vllm.v1.attention.backends.utils stand-in: the process-wide KV cache
layout ("NHD" or "HND") that backends' stride orders follow. vLLM takes it
from VLLM_KV_CACHE_LAYOUT, a connector's required layout, or "NHD"."""
import os
from typing import Optional

_KV_CACHE_LAYOUT_OVERRIDE: Optional[str] = None


def set_kv_cache_layout(cache_layout: Optional[str]) -> None:
    global _KV_CACHE_LAYOUT_OVERRIDE
    _KV_CACHE_LAYOUT_OVERRIDE = cache_layout


def get_kv_cache_layout() -> str:
    if _KV_CACHE_LAYOUT_OVERRIDE is not None:
        return _KV_CACHE_LAYOUT_OVERRIDE
    return os.environ.get("VLLM_KV_CACHE_LAYOUT") or "NHD"
