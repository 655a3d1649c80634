# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess.transfer_context.pickle stand-in:
EngineDrivenContextPickle, the by-value transport (prepare_store returns
None; chunks travel pickled in commit_store and prepare_retrieve).
Signatures only."""
from lmcache.v1.multiprocess.transfer_context.base import (
    EngineDrivenContext, EngineDrivenContextMetadata)


class EngineDrivenContextPickle(EngineDrivenContext):

    def __init__(self, metadata: EngineDrivenContextMetadata, mq_client,
                 mq_timeout: float) -> None:
        raise NotImplementedError("stand-in")

    def prepare_store(self, key, instance_id):
        raise NotImplementedError("stand-in")

    def commit_store(self, key, instance_id, chunks) -> bool:
        raise NotImplementedError("stand-in")

    def prepare_retrieve(self, key, instance_id):
        raise NotImplementedError("stand-in")

    def commit_retrieve(self, key, instance_id) -> bool:
        raise NotImplementedError("stand-in")

    def close(self) -> None:
        raise NotImplementedError("stand-in")
