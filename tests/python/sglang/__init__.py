# SPDX-License-Identifier: MIT
"""A stand-in for the parts of SGLang that kvring.sglang touches (SGLang
cannot be installed on this machine: docs/tensors.md, "SGLang HiCache
storage"). Same module paths, class names, members and signatures as
SGLang's HiCache storage interface, read from sgl-project/sglang main
(python/sglang/srt/mem_cache/hicache_storage.py and
storage/backend_factory.py at commit 001067ff, pool_host/base.py at
049f8e64, pool_host/mha.py at 0047d999, pool_host/mla.py at 01c0ede3,
metrics/collector.py of the same snapshot), and no behaviour of its own:
tests/python/sglang_engine.py plays SGLang's HiCache controller and its
dynamic backend factory."""
__version__ = "0.0.0+kvring-standin"
