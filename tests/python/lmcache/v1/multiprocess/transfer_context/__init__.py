# SPDX-License-Identifier: MIT
"""lmcache.v1.multiprocess.transfer_context stand-in: re-exports the
engine-driven context names as LMCache's package does."""
from .base import (EngineDrivenContext, EngineDrivenContextMetadata,
                   create_engine_driven_context)
from .pickle import EngineDrivenContextPickle
from .shm import EngineDrivenContextShm, ShmSlotDescriptor

__all__ = ["EngineDrivenContext", "EngineDrivenContextMetadata",
           "EngineDrivenContextPickle", "EngineDrivenContextShm",
           "ShmSlotDescriptor", "create_engine_driven_context"]
