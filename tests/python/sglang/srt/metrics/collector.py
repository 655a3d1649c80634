# SPDX-License-Identifier: MIT
"""sglang.srt.metrics.collector stand-in: StorageMetrics only, the value
a HiCache backend's get_stats() may return (SGLang's
StorageMetricsCollector.log_storage_metrics() asserts this type and
returns early on None)."""
from dataclasses import dataclass, field
from typing import List


@dataclass
class StorageMetrics:
    prefetch_pgs: List[int] = field(default_factory=list)
    backup_pgs: List[int] = field(default_factory=list)
    prefetch_bandwidth: List[float] = field(default_factory=list)
    backup_bandwidth: List[float] = field(default_factory=list)
