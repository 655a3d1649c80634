# SPDX-License-Identifier: MIT
"""A stand-in for the parts of LMCache that kvring.lmcache touches (LMCache
cannot be installed on this machine: docs/tensors.md, "LMCache's
engine-driven transfer context"). Same module paths, class names, members
and signatures as LMCache's multiprocess worker transport, read from
LMCache/LMCache main (lmcache/v1/multiprocess/transfer_context/base.py at
commit 00d15a5d, shm.py at 0b1cc58a, custom_types.py, mq.py and
lmcache/v1/distributed/api.py of the same snapshot), and no behaviour of
its own. tests/python/test_lmcache.py re-expresses LMCache's worker-side
tests of the SHM context against kvring.lmcache."""
__version__ = "0.0.0+kvring-standin"
