# SPDX-License-Identifier: MIT
"""A stand-in for the parts of vLLM that kvring.vllm imports (vLLM itself
is not installable on this machine: docs/tensors.md). Same module paths,
class names and signatures as vLLM's v1 KV-connector API (read from
vllm/distributed/kv_transfer/kv_connector/v1/base.py and the modules it
imports), and no behaviour of its own: the engine driver
(tests/python/engine.py) plays vLLM's scheduler and worker."""
__version__ = "0.0.0+kvring-standin"
