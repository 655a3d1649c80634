# SPDX-License-Identifier: MIT
"""vllm.v1.attention.backend stand-in."""


class AttentionBackend:
    pass


class AttentionMetadata:
    pass
