# SPDX-License-Identifier: MIT
"""lmcache.v1.distributed.api stand-in: MemoryLayoutDesc, the layout of
one memory object (a chunk): shapes and dtypes, one per tensor."""
from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryLayoutDesc:
    shapes: list  # of torch.Size
    dtypes: list  # of torch.dtype

    def __post_init__(self):
        if len(self.shapes) != len(self.dtypes):
            raise ValueError("MemoryLayoutDesc: shapes and dtype must have "
                             "the same length")

