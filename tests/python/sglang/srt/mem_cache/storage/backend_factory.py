# SPDX-License-Identifier: MIT
"""sglang.srt.mem_cache.storage.backend_factory stand-in: the
StorageBackendFactory's members and signatures. What its "dynamic" path
does (import extra_config["module_path"], take extra_config["class_name"],
check that it subclasses HiCacheStorage, construct it as
cls(storage_config, kwargs)) is played by
tests/python/sglang_engine.py's create_backend(), not here."""
from typing import Any, Dict

from sglang.srt.mem_cache.hicache_storage import (HiCacheStorage,
                                                  HiCacheStorageConfig)


class StorageBackendFactory:
    _registry: Dict[str, Dict[str, Any]] = {}

    @staticmethod
    def _load_backend_class(module_path: str, class_name: str,
                            backend_name: str) -> type:
        raise NotImplementedError("stand-in")

    @classmethod
    def register_backend(cls, name: str, module_path: str,
                         class_name: str) -> None:
        raise NotImplementedError("stand-in")

    @classmethod
    def create_backend(cls, backend_name: str,
                       storage_config: HiCacheStorageConfig,
                       mem_pool_host: Any, **kwargs) -> HiCacheStorage:
        raise NotImplementedError("stand-in")

    @classmethod
    def _create_dynamic_backend(cls, backend_config: Dict[str, Any],
                                storage_config: HiCacheStorageConfig,
                                mem_pool_host: Any,
                                **kwargs) -> HiCacheStorage:
        raise NotImplementedError("stand-in")

    @classmethod
    def _create_builtin_backend(cls, backend_name: str, backend_class: type,
                                storage_config: HiCacheStorageConfig,
                                mem_pool_host: Any) -> HiCacheStorage:
        raise NotImplementedError("stand-in")
